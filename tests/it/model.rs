//! The GGUF model backend end to end: the real SmolLM2 model (found through `../shared/models`
//! beside the crate, or `GRAMMASK_MODEL`; skipped with a printed reason only when absent)
//! answers sensibly, decodes valid constrained documents, keeps its KV cache right across
//! rollback, and gives the same tokens overlapped and sequential; the GGUF vocabulary is checked
//! against `tokenizers` on the shared Hugging Face tokenizers converted to GGUF metadata, and on
//! small files the tests write; every bad input is a typed error.

#![cfg(feature = "model")]

use grammask::decode::{decode, decode_overlapped, DecodeConfig, LogitsSource, RandomLogits};
use grammask::model::{
    ChatMessage, ChatTemplate, DotKernel, GgufModel, GgufValue, GgufWriter, ModelConfig,
    ModelErrorKind,
};
use grammask::schema::{SchemaConstraint, SchemaOptions};
use grammask::{
    JsonConfig, JsonObjectConstraint, RegexConfig, RegexConstraint, TokenId, Vocabulary,
};
use std::path::PathBuf;
use std::sync::OnceLock;

const MODEL_FILE: &str = "smollm2-135m-instruct-q4_1.gguf";

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

fn model_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GRAMMASK_MODEL") {
        return Some(PathBuf::from(p));
    }
    let p = shared().join("models").join(MODEL_FILE);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("skipped: no model at {} and GRAMMASK_MODEL unset", p.display());
        None
    }
}

/// The model file's bytes, read once for all tests.
fn model_bytes() -> Option<&'static [u8]> {
    static BYTES: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    BYTES.get_or_init(|| model_path().map(|p| std::fs::read(p).expect("readable model"))).as_deref()
}

fn load() -> Option<GgufModel> {
    let bytes = model_bytes()?.to_vec();
    let config = ModelConfig::builder().threads(2).context(1024).build().unwrap();
    Some(GgufModel::from_bytes(bytes, &config).expect("the shared model loads"))
}

#[test]
fn real_model_answers_a_chat_prompt() {
    let Some(mut model) = load() else { return };
    assert_eq!(model.params().n_layer, 30);
    let vocab = model.vocab().clone();
    assert_eq!(vocab.n_vocab(), 49_152);
    assert_eq!(vocab.token_id("<|im_end|>"), Some(TokenId(2)));
    assert!(vocab.is_eos(TokenId(2)));
    let prompt =
        model.chat_prompt(None, "What is the capital of France? Answer in one sentence.").unwrap();
    // ChatML: `<|im_start|>` is one special token, the default system message is there.
    assert_eq!(prompt[0], TokenId(1));
    model.set_prompt(&prompt).unwrap();
    let out = decode(&mut model, &vocab, None, &DecodeConfig::greedy(24)).unwrap();
    assert!(out.content().contains("Paris"), "{:?}", out.content());
    assert_eq!(out.finish_reason.as_str(), "stop", "{:?}", out.content());
}

#[test]
fn real_model_predicts_english_text() {
    // Perplexity on a Wikipedia sentence: a wrong rotation, norm or quantisation detail
    // sends it far above the ~8 this model gets.
    let Some(mut model) = load() else { return };
    let text = "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, \
        France. It is named after the engineer Gustave Eiffel, whose company designed and built \
        the tower from 1887 to 1889.";
    let ids = model.vocab().encode(text).unwrap();
    model.set_prompt(&ids[..1]).unwrap();
    let mut out = vec![0.0f32; model.vocab().n_vocab()];
    let mut nll = 0.0f64;
    for i in 1..ids.len() {
        model.sequence_logits(&ids[1..i], &mut out).unwrap();
        let max = out.iter().copied().fold(f32::MIN, f32::max);
        let lse = f64::from(max) + out.iter().map(|&v| f64::from(v - max).exp()).sum::<f64>().ln();
        nll += lse - f64::from(out[ids[i].index()]);
    }
    let ppl = (nll / (ids.len() - 1) as f64).exp();
    assert!(ppl < 15.0, "perplexity {ppl:.2}");
}

#[test]
fn every_dot_kernel_here_gives_the_same_logits() {
    // A 60-token prompt (the packed products split by tokens) and then one token (split by
    // rows): each kernel here within 3% of the logits' range of the scalar reference (which
    // adds its floats in another order), with the same most likely token. (The kernels'
    // integer sums are compared exactly in the quant unit tests.)
    let Some(bytes) = model_bytes() else { return };
    let text = "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, \
        France. It is named after the engineer Gustave Eiffel, whose company designed and built \
        the tower from 1887 to 1889. Locally nicknamed the Iron Lady, it was constructed";
    let mut runs: Vec<(DotKernel, Vec<f32>, Vec<f32>)> = Vec::new();
    for kernel in DotKernel::ALL.into_iter().filter(|k| k.is_available()) {
        let config = ModelConfig::builder().threads(2).context(256).kernel(kernel).build().unwrap();
        let mut model = GgufModel::from_bytes(bytes.to_vec(), &config).unwrap();
        assert_eq!(model.kernel(), kernel);
        let ids = model.vocab().encode(text).unwrap();
        assert!(ids.len() >= 40, "{} tokens", ids.len());
        model.set_prompt(&ids).unwrap();
        let n = model.vocab().n_vocab();
        let (mut a, mut b) = (vec![0.0f32; n], vec![0.0f32; n]);
        model.sequence_logits(&[], &mut a).unwrap();
        model.sequence_logits(&[TokenId(260)], &mut b).unwrap();
        runs.push((kernel, a, b));
    }
    eprintln!("kernels here: {:?}", runs.iter().map(|r| r.0.name()).collect::<Vec<_>>());
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&i, &j| v[i].total_cmp(&v[j])).unwrap();
    assert_eq!(runs[0].0, DotKernel::Scalar);
    let (_, a0, b0) = &runs[0];
    for (kernel, a, b) in &runs[1..] {
        for (x, y) in [(a0, a), (b0, b)] {
            let diff = x.iter().zip(y.iter()).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max);
            let range = x.iter().fold(f32::MIN, |m, &v| m.max(v))
                - x.iter().fold(f32::MAX, |m, &v| m.min(v));
            // Measured: 0.53 of a 36.4 range (the activations are quantised to bytes after
            // every product, so a float rounded the other way moves a byte, 30 layers deep).
            assert!(diff <= 0.03 * range, "{kernel:?} vs scalar: logits differ by {diff}");
            assert_eq!(argmax(x), argmax(y), "{kernel:?}");
        }
    }
    // Names round-trip, and an unknown one says which exist.
    for k in DotKernel::ALL {
        assert_eq!(k.name().parse::<DotKernel>(), Ok(k));
    }
    let err = "avx1024".parse::<DotKernel>().unwrap_err();
    assert!(err.contains("avx512-vnni"), "{err}");
}

#[test]
fn kv_cache_rollback_matches_a_fresh_run() {
    let Some(mut model) = load() else { return };
    let vocab = model.vocab().clone();
    let prompt = model.chat_prompt(None, "Count to five.").unwrap();
    model.set_prompt(&prompt).unwrap();
    let a = vocab.encode("1, 2, 3").unwrap();
    let b = vocab.encode("1, 2, 7, 8").unwrap();
    let n = vocab.n_vocab();
    let (mut la, mut lb, mut la2, mut step) =
        (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    model.sequence_logits(&a, &mut la).unwrap();
    model.sequence_logits(&b, &mut lb).unwrap();
    // Back to `a`: the cache is truncated to the common prefix and `a`'s tail fed again.
    model.sequence_logits(&a, &mut la2).unwrap();
    let max_diff =
        |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max);
    assert!(max_diff(&la, &la2) < 1e-3, "rollback changed the logits by {}", max_diff(&la, &la2));
    assert!(max_diff(&la, &lb) > 1e-2, "different sequences, same logits");
    // Token by token from a truncated cache gives what the batch gave.
    model.truncate_cache(prompt.len());
    for i in 1..=a.len() {
        model.sequence_logits(&a[..i], &mut step).unwrap();
    }
    assert!(max_diff(&la, &step) < 1e-3, "batched vs one by one: {}", max_diff(&la, &step));
}

#[test]
fn overlapped_and_sequential_loops_give_identical_tokens() {
    // The random-logit model always; the real model when present.
    let vocab = Vocabulary::embedded().unwrap();
    for (temperature, seed) in [(0.0, 1), (0.9, 2), (0.9, 3)] {
        let config = DecodeConfig::builder()
            .max_tokens(120)
            .temperature(temperature)
            .seed(seed)
            .build()
            .unwrap();
        let mut e1 = JsonObjectConstraint::new(&vocab, &JsonConfig::default()).unwrap();
        let mut e2 = JsonObjectConstraint::new(&vocab, &JsonConfig::default()).unwrap();
        let s =
            decode(&mut RandomLogits::new(&vocab, seed), &vocab, Some(&mut e1), &config).unwrap();
        let o =
            decode_overlapped(&mut RandomLogits::new(&vocab, seed), &vocab, Some(&mut e2), &config)
                .unwrap();
        assert_eq!(s.tokens, o.tokens, "random model, T={temperature}");
        assert_eq!(o.mask_us.len(), o.counters.masks_filled);
    }
    let Some(mut model) = load() else { return };
    let vocab = model.vocab().clone();
    let prompt =
        model.chat_prompt(Some("Answer in JSON."), "A cat with a name and an age.").unwrap();
    for temperature in [0.0, 0.8] {
        let config = DecodeConfig::builder()
            .max_tokens(40)
            .temperature(temperature)
            .seed(7)
            .build()
            .unwrap();
        let mut runs = Vec::new();
        for overlap in [false, true] {
            model.set_prompt(&prompt).unwrap();
            let mut e = JsonObjectConstraint::new(&vocab, &JsonConfig::default()).unwrap();
            let g = if overlap {
                decode_overlapped(&mut model, &vocab, Some(&mut e), &config)
            } else {
                decode(&mut model, &vocab, Some(&mut e), &config)
            };
            runs.push(g.unwrap().tokens);
        }
        assert_eq!(runs[0], runs[1], "real model, T={temperature}");
    }
}

#[test]
fn constrained_generations_validate() {
    let Some(mut model) = load() else { return };
    let vocab = model.vocab().clone();
    // Free-form JSON.
    let prompt = model.chat_prompt(None, "Describe a dog as a JSON object.").unwrap();
    model.set_prompt(&prompt).unwrap();
    let mut e = JsonObjectConstraint::new(&vocab, &JsonConfig::default()).unwrap();
    let g = decode_overlapped(&mut model, &vocab, Some(&mut e), &DecodeConfig::greedy(80)).unwrap();
    if g.finish_reason.as_str() == "stop" {
        let v: serde_json::Value = serde_json::from_slice(&g.text).expect("valid JSON");
        assert!(v.is_object());
    }
    // A regex.
    model.set_prompt(&model.chat_prompt(None, "Give a date.").unwrap()).unwrap();
    let mut e =
        RegexConstraint::new(&vocab, r"[0-9]{4}-[0-9]{2}-[0-9]{2}", &RegexConfig::default())
            .unwrap();
    let g = decode_overlapped(&mut model, &vocab, Some(&mut e), &DecodeConfig::greedy(20)).unwrap();
    assert_eq!(g.finish_reason.as_str(), "stop");
    let re = regex_automata::meta::Regex::new(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$").unwrap();
    assert!(re.is_match(&g.text), "{:?}", g.content());
    // MaskBench schemas, judged by the `jsonschema` crate.
    let dir = shared().join("maskbench-dev");
    for name in ["BFCL_java_0.json", "BFCL_simple_10.json", "JME_1.json"] {
        let Ok(text) = std::fs::read_to_string(dir.join(name)) else { continue };
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let schema = &doc["schema"];
        let user = format!("Reply with a JSON object that follows this schema:\n{schema}");
        model.set_prompt(&model.chat_prompt(None, &user).unwrap()).unwrap();
        let mut e = SchemaConstraint::compile(schema, &vocab, &SchemaOptions::default()).unwrap();
        let g = decode_overlapped(&mut model, &vocab, Some(&mut e), &DecodeConfig::greedy(120))
            .unwrap();
        if g.finish_reason.as_str() == "stop" {
            let v: serde_json::Value = serde_json::from_slice(&g.text).expect("valid JSON");
            let validator = jsonschema::validator_for(schema).unwrap();
            assert!(validator.is_valid(&v), "{name}: {}", g.content());
        }
    }
}

#[test]
fn bad_model_inputs_are_typed_errors() {
    let config = ModelConfig::default();
    let kind = |bytes: Vec<u8>| GgufModel::from_bytes(bytes, &config).unwrap_err();
    assert!(matches!(kind(b"not a model at all".to_vec()).kind(), ModelErrorKind::NotGguf));
    let arch = GgufWriter::new().kv("general.architecture", GgufValue::String("gpt2".into()));
    assert!(matches!(
        kind(arch.to_bytes()).kind(),
        ModelErrorKind::UnsupportedArchitecture(a) if a == "gpt2"
    ));
    let q6k = GgufWriter::new()
        .kv("general.architecture", GgufValue::String("llama".into()))
        .tensor("token_embd.weight", &[256, 1], 14, vec![0; 210]);
    let e = kind(q6k.to_bytes());
    assert!(matches!(e.kind(), ModelErrorKind::UnsupportedQuantization { .. }), "{e}");
    assert!(e.to_string().contains("Q6_K"), "{e}");
    let bert = tiny_bpe("bert");
    let e = Vocabulary::from_gguf_bytes(&bert.to_bytes()).unwrap_err();
    assert!(matches!(e.kind(), ModelErrorKind::UnsupportedTokenizer(m) if m == "bert"), "{e}");
    let Some(bytes) = model_bytes() else { return };
    let e = kind(bytes[..bytes.len() / 2].to_vec());
    assert!(matches!(e.kind(), ModelErrorKind::Truncated { .. }), "{e}");
    let e = kind(bytes[..1000].to_vec());
    assert!(matches!(e.kind(), ModelErrorKind::Truncated { .. }), "{e}");
    let small = ModelConfig::builder().context(16).threads(1).build().unwrap();
    let mut model = GgufModel::from_bytes(bytes.to_vec(), &small).unwrap();
    let prompt =
        model.chat_prompt(None, "This prompt is longer than sixteen tokens, by far.").unwrap();
    let e = model.set_prompt(&prompt).unwrap_err();
    assert!(matches!(e.kind(), ModelErrorKind::ContextFull { context: 16, .. }), "{e}");
    // A constraint over another vocabulary is refused before any step.
    let e = model.check_vocab(&Vocabulary::embedded().unwrap()).unwrap_err();
    assert!(matches!(e.kind(), ModelErrorKind::VocabMismatch(_)), "{e}");
    model.check_vocab(&model.vocab().clone()).unwrap();
    // Past the context mid-decode: a typed decode error, not a panic.
    model.set_prompt(&prompt[..10]).unwrap();
    let vocab = model.vocab().clone();
    let e = decode(&mut model, &vocab, None, &DecodeConfig::greedy(50)).unwrap_err();
    assert!(e.to_string().contains("context window of 16"), "{e}");
}

/// The GPT-2 byte → char map for the few bytes the tiny vocabularies use.
fn bl(s: &str) -> String {
    s.replace(' ', "Ġ").replace('\n', "Ċ")
}

fn strings(v: &[&str]) -> GgufValue {
    GgufValue::Array(v.iter().map(|s| GgufValue::String(s.to_string())).collect())
}

/// A byte-level BPE vocabulary of 9 tokens: `<|end|>` (control), the letters, two merges.
fn tiny_gpt2() -> GgufWriter {
    tiny_bpe("gpt2")
}

fn tiny_bpe(model: &str) -> GgufWriter {
    let tokens = ["<|end|>", "a", "b", "c", &bl(" "), "ab", &bl(" a"), &bl("\n"), "<|user|>"];
    let merges = ["a b", &format!("{} a", bl(" "))];
    GgufWriter::new()
        .kv("general.architecture", GgufValue::String("llama".into()))
        .kv("tokenizer.ggml.model", GgufValue::String(model.into()))
        .kv("tokenizer.ggml.tokens", strings(&tokens))
        .kv("tokenizer.ggml.merges", strings(&merges))
        .kv(
            "tokenizer.ggml.token_type",
            GgufValue::Array(
                [3, 1, 1, 1, 1, 1, 1, 1, 4].iter().map(|&t| GgufValue::I32(t)).collect(),
            ),
        )
        .kv("tokenizer.ggml.eos_token_id", GgufValue::U32(0))
        .kv("tokenizer.chat_template", GgufValue::String("{{ messages[0].content }}".into()))
}

#[test]
fn gguf_gpt2_vocabulary_from_a_small_file() {
    let v = Vocabulary::from_gguf_bytes(&tiny_gpt2().to_bytes()).unwrap();
    assert_eq!(v.n_vocab(), 9);
    assert_eq!(v.eos_ids(), &[TokenId(0)]);
    assert_eq!(v.kind(TokenId(0)), grammask::vocab::TokenKind::Special);
    assert_eq!(v.token_bytes(TokenId(6)), b" a");
    assert_eq!(v.token_bytes(TokenId(7)), b"\n");
    // User-defined tokens are text, and split out of the input.
    assert_eq!(v.token_bytes(TokenId(8)), b"<|user|>");
    let ids: Vec<u32> = v.encode("ab a\nc<|user|>").unwrap().iter().map(|t| t.0).collect();
    assert_eq!(ids, vec![5, 6, 7, 3, 8]);
}

#[test]
fn gguf_llama_vocabulary_from_a_small_file() {
    let tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "▁", "a", "b", "▁a", "ab", "▁ab"];
    let scores = [0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0];
    let types = [2, 3, 3, 6, 1, 1, 1, 1, 1, 1];
    let w = GgufWriter::new()
        .kv("tokenizer.ggml.model", GgufValue::String("llama".into()))
        .kv("tokenizer.ggml.tokens", strings(&tokens))
        .kv(
            "tokenizer.ggml.scores",
            GgufValue::Array(scores.iter().map(|&s| GgufValue::F32(s)).collect()),
        )
        .kv(
            "tokenizer.ggml.token_type",
            GgufValue::Array(types.iter().map(|&t| GgufValue::I32(t)).collect()),
        )
        .kv("tokenizer.ggml.bos_token_id", GgufValue::U32(1))
        .kv("tokenizer.ggml.eos_token_id", GgufValue::U32(2))
        .kv("tokenizer.ggml.unknown_token_id", GgufValue::U32(0));
    let v = Vocabulary::from_gguf_bytes(&w.to_bytes()).unwrap();
    assert_eq!(v.bos_id(), Some(TokenId(1)));
    assert_eq!(v.eos_ids(), &[TokenId(2)]);
    assert_eq!(v.token_bytes(TokenId(3)), b"\n");
    assert_eq!(v.token_bytes(TokenId(9)), b" ab");
    assert!(v.prepends_space());
    // "▁a" (-4) merges before "ab" (-5): ▁ a b → ▁a b; then "▁ab" from ▁a + b.
    let ids: Vec<u32> = v.encode("ab\n").unwrap().iter().map(|t| t.0).collect();
    assert_eq!(ids, vec![9, 3]);
}

#[test]
fn chat_template_renders_chatml_with_generation_prompt() {
    let src = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] | trim \
               + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    let t = ChatTemplate::new(src).unwrap();
    let msgs = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", " hi ")];
    assert_eq!(
        t.render(&msgs, true).unwrap(),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert!(!t.render(&msgs, false).unwrap().ends_with("assistant\n"));
    // Python string methods and raise_exception, as Hugging Face templates use them.
    let py = ChatTemplate::new("{{ messages[0].content.strip().upper() }}").unwrap();
    assert_eq!(py.render(&[ChatMessage::new("user", " x ")], false).unwrap(), "X");
    let raise = ChatTemplate::new("{{ raise_exception('no system role') }}").unwrap();
    let e = raise.render(&msgs, false).unwrap_err();
    assert!(e.to_string().contains("no system role"), "{e}");
    assert!(ChatTemplate::new("{% for %}").is_err());
    // The model's own template (from a GGUF file) is read with the vocabulary.
    let Some(model) = load() else { return };
    let t = model.chat_template().expect("SmolLM2 has a ChatML template");
    let text = t.render(&[ChatMessage::new("user", "hi")], true).unwrap();
    assert!(text.ends_with("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), "{text}");
}

/// Convert a Hugging Face byte-level `tokenizer.json` to GGUF tokenizer metadata, as
/// llama.cpp's converter does, and compare the two tokenizers on a corpus.
fn gguf_from_hf(path: &std::path::Path, pre: &str) -> Vec<u8> {
    let hf: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let vocab = hf["model"]["vocab"].as_object().unwrap();
    let mut n = vocab.len();
    let added = hf["added_tokens"].as_array().unwrap();
    for a in added {
        n = n.max(a["id"].as_u64().unwrap() as usize + 1);
    }
    let mut tokens = vec![String::new(); n];
    let mut types = vec![1i32; n];
    for (k, v) in vocab {
        tokens[v.as_u64().unwrap() as usize] = k.clone();
    }
    for a in added {
        let id = a["id"].as_u64().unwrap() as usize;
        tokens[id] = a["content"].as_str().unwrap().to_string();
        types[id] = if a["special"].as_bool().unwrap() { 3 } else { 4 };
    }
    for (i, t) in tokens.iter_mut().enumerate() {
        if t.is_empty() {
            *t = format!("[PAD{i}]");
            types[i] = 5;
        }
    }
    let merges: Vec<String> = hf["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m {
            serde_json::Value::String(s) => s.clone(),
            a => format!("{} {}", a[0].as_str().unwrap(), a[1].as_str().unwrap()),
        })
        .collect();
    GgufWriter::new()
        .kv("tokenizer.ggml.model", GgufValue::String("gpt2".into()))
        .kv("tokenizer.ggml.pre", GgufValue::String(pre.into()))
        .kv(
            "tokenizer.ggml.tokens",
            GgufValue::Array(tokens.into_iter().map(GgufValue::String).collect()),
        )
        .kv(
            "tokenizer.ggml.merges",
            GgufValue::Array(merges.into_iter().map(GgufValue::String).collect()),
        )
        .kv(
            "tokenizer.ggml.token_type",
            GgufValue::Array(types.into_iter().map(GgufValue::I32).collect()),
        )
        .to_bytes()
}

/// A SentencePiece `tokenizer.json` (Llama-2) as GGUF `llama` tokenizer metadata.
fn gguf_from_hf_spm(path: &std::path::Path) -> Vec<u8> {
    let hf: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let vocab = hf["model"]["vocab"].as_object().unwrap();
    let mut tokens = vec![String::new(); vocab.len()];
    for (k, v) in vocab {
        tokens[v.as_u64().unwrap() as usize] = k.clone();
    }
    let ids: std::collections::HashMap<&str, usize> =
        tokens.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    let mut scores = vec![0.0f32; tokens.len()];
    let mut seen = vec![false; tokens.len()];
    for (rank, m) in hf["model"]["merges"].as_array().unwrap().iter().enumerate() {
        let (a, b) = match m {
            serde_json::Value::String(s) => {
                let (a, b) = s.split_once(' ').unwrap();
                (a.to_string(), b.to_string())
            }
            a => (a[0].as_str().unwrap().to_string(), a[1].as_str().unwrap().to_string()),
        };
        if let Some(&id) = ids.get(format!("{a}{b}").as_str()) {
            if !seen[id] {
                seen[id] = true;
                scores[id] = -(rank as f32) - 1.0;
            }
        }
    }
    let mut types = vec![1i32; tokens.len()];
    for (i, t) in tokens.iter().enumerate() {
        if t.starts_with("<0x") && t.len() == 6 {
            types[i] = 6;
        }
    }
    for a in hf["added_tokens"].as_array().unwrap() {
        let id = a["id"].as_u64().unwrap() as usize;
        types[id] = if id == 0 { 2 } else { 3 };
    }
    GgufWriter::new()
        .kv("tokenizer.ggml.model", GgufValue::String("llama".into()))
        .kv(
            "tokenizer.ggml.tokens",
            GgufValue::Array(tokens.into_iter().map(GgufValue::String).collect()),
        )
        .kv(
            "tokenizer.ggml.scores",
            GgufValue::Array(scores.into_iter().map(GgufValue::F32).collect()),
        )
        .kv(
            "tokenizer.ggml.token_type",
            GgufValue::Array(types.into_iter().map(GgufValue::I32).collect()),
        )
        .kv("tokenizer.ggml.unknown_token_id", GgufValue::U32(0))
        .kv("tokenizer.ggml.bos_token_id", GgufValue::U32(1))
        .kv("tokenizer.ggml.eos_token_id", GgufValue::U32(2))
        .to_bytes()
}

const CORPUS: &[&str] = &[
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"math\", \"engines\"]}",
    "    fn main() {\n        println!(\"{}\", 12345 + 678);\n    }\n\n\n",
    "Numbers 3.14159 and 1,000,000 and 2024-11-30T08:00:00Z.",
    "Ünïcödé: naïve café, 日本語のテキスト, 한국어, Ελληνικά, emoji 🎉🚀 done",
    "tabs\tand  double  spaces   and trailing   ",
    "I'm sure they'll say it's what we'd've done; DON'T SHOUT.",
];

#[test]
fn gguf_vocabulary_takes_a_padded_logits_width() {
    let path = shared().join("tokenizers/llama3.json");
    if !path.is_file() {
        eprintln!("skipped: {} absent", path.display());
        return;
    }
    let file = std::env::temp_dir().join(format!("grammask-gguf-pad-{}.gguf", std::process::id()));
    std::fs::write(&file, gguf_from_hf(&path, "llama-bpe")).unwrap();
    let plain = Vocabulary::from_gguf(&file).unwrap();
    let padded = Vocabulary::from_gguf_with(&file, Some(plain.n_tokens() + 64)).unwrap();
    assert_eq!(padded.n_vocab(), plain.n_tokens() + 64);
    assert_eq!(padded.n_tokens(), plain.n_tokens());
    assert_eq!(padded.eos_ids(), plain.eos_ids());
    let pad = TokenId::from_index(plain.n_tokens() + 1);
    assert_eq!(padded.kind(pad), grammask::vocab::TokenKind::Padding);
    let err = Vocabulary::from_gguf_with(&file, Some(8)).unwrap_err();
    assert!(err.to_string().contains("smaller than"), "{err}");
    std::fs::remove_file(&file).ok();
}

#[test]
fn gguf_vocabulary_matches_tokenizers_on_shared_tokenizers() {
    let dir = shared().join("tokenizers");
    for (name, pre) in [("llama3", "llama-bpe"), ("qwen3", "qwen2")] {
        let path = dir.join(format!("{name}.json"));
        if !path.is_file() {
            eprintln!("skipped {name}: {} absent", path.display());
            continue;
        }
        let reference = Vocabulary::from_file(&path).unwrap();
        let ours = Vocabulary::from_gguf_bytes(&gguf_from_hf(&path, pre)).unwrap();
        assert_eq!(ours.n_tokens(), reference.n_tokens(), "{name}");
        for i in 0..reference.n_tokens() {
            let t = TokenId::from_index(i);
            assert_eq!(ours.token_bytes(t), reference.token_bytes(t), "{name} token {i}");
        }
        for text in CORPUS {
            assert_eq!(
                ours.encode(text).unwrap(),
                reference.encode(text).unwrap(),
                "{name}: {text:?}"
            );
        }
    }
    // SentencePiece (`llama`): GGUF keeps scores, not merges. Scores are made from the Hugging
    // Face merge ranks (a merged piece scores minus the rank of its first merge), and the merges
    // we derive from them must tokenize as the original does.
    let path = dir.join("llama2.json");
    if path.is_file() {
        let reference = Vocabulary::from_file(&path).unwrap();
        let ours = Vocabulary::from_gguf_bytes(&gguf_from_hf_spm(&path)).unwrap();
        assert_eq!(ours.n_tokens(), reference.n_tokens());
        for i in 0..reference.n_tokens() {
            let t = TokenId::from_index(i);
            assert_eq!(ours.token_bytes(t), reference.token_bytes(t), "llama2 token {i}");
        }
        for text in CORPUS {
            assert_eq!(
                ours.encode(text).unwrap(),
                reference.encode(text).unwrap(),
                "llama2: {text:?}"
            );
        }
    }
    // The model's own vocabulary: every text token's bytes round-trip through its encoder.
    let Some(bytes) = model_bytes() else { return };
    let v = Vocabulary::from_gguf_bytes(bytes).unwrap();
    for text in CORPUS {
        let ids = v.encode(text).unwrap();
        let back: Vec<u8> = ids.iter().flat_map(|&t| v.token_bytes(t).to_vec()).collect();
        assert_eq!(back, text.as_bytes());
    }
    assert_eq!(v.encode("<|im_start|>user").unwrap()[0], TokenId(1));
}

#[test]
fn model_width_is_the_vocabulary_width() {
    let Some(model) = load() else { return };
    assert_eq!(LogitsSource::n_vocab(&model), model.vocab().n_vocab());
}

/// The server's backend: several sequences in one forward pass (prefill of one beside the
/// decode steps of others, a rollback in the middle) give the logits each gets alone.
#[test]
fn batched_sequences_match_single_sequence_runs() {
    use grammask::model::StepRequest;
    let Some(mut single) = load() else { return };
    let n = single.vocab().n_vocab();
    let seqs: Vec<Vec<TokenId>> = ["Count to five.", "Name a colour.", "Say hello in French."]
        .iter()
        .map(|p| single.chat_prompt(None, p).unwrap())
        .collect();
    // Reference: each sequence, and each one-token extension, alone.
    let ext: Vec<Vec<TokenId>> = seqs
        .iter()
        .map(|s| {
            let mut e = s.clone();
            e.extend(single.vocab().encode(" 1, 2").unwrap());
            e
        })
        .collect();
    let mut reference = Vec::new();
    for s in seqs.iter().chain(&ext) {
        single.set_prompt(s).unwrap();
        let mut out = vec![0.0; n];
        single.sequence_logits(&[], &mut out).unwrap();
        reference.push(out);
    }
    let mut model = load().unwrap().into_batched();
    let ids: Vec<_> = (0..3).map(|_| model.new_sequence()).collect();
    let mut rows = vec![vec![0.0f32; n]; 3];
    let max_diff =
        |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max);
    // Step 1: sequence 0 prefills alone.
    {
        let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| &mut r[..]).collect();
        let r = model.step(&[StepRequest { seq: ids[0], tokens: &seqs[0] }], &mut out[..1]);
        assert!(r[0].is_ok());
    }
    assert!(max_diff(&rows[0], &reference[0]) < 1e-3);
    // Step 2: sequence 0 decodes its extension while 1 and 2 prefill, in one pass.
    let reqs = [
        StepRequest { seq: ids[0], tokens: &ext[0] },
        StepRequest { seq: ids[1], tokens: &seqs[1] },
        StepRequest { seq: ids[2], tokens: &ext[2] },
    ];
    let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| &mut r[..]).collect();
    assert!(model.step(&reqs, &mut out).iter().all(Result::is_ok));
    for (row, want) in rows.iter().zip([&reference[3], &reference[1], &reference[5]]) {
        assert!(max_diff(row, want) < 1e-3, "batched vs alone: {}", max_diff(row, want));
    }
    // Step 3: sequence 2 rolls back to its prompt, sequence 1 extends.
    let reqs = [
        StepRequest { seq: ids[2], tokens: &seqs[2] },
        StepRequest { seq: ids[1], tokens: &ext[1] },
    ];
    let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| &mut r[..]).collect();
    assert!(model.step(&reqs, &mut out[..2]).iter().all(Result::is_ok));
    assert!(max_diff(&rows[0], &reference[2]) < 1e-3);
    assert!(max_diff(&rows[1], &reference[4]) < 1e-3);
    assert_eq!(model.stats().steps, 3);
    assert_eq!(model.stats().sequences, 6);
    // A sequence too long for the context is refused alone; the other runs.
    let long = vec![TokenId(1); model.context() + 1];
    let reqs =
        [StepRequest { seq: ids[0], tokens: &long }, StepRequest { seq: ids[1], tokens: &ext[1] }];
    let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| &mut r[..]).collect();
    let r = model.step(&reqs, &mut out[..2]);
    assert!(matches!(r[0].as_ref().unwrap_err().kind(), ModelErrorKind::ContextFull { .. }));
    assert!(r[1].is_ok());
    model.free(ids[0]);
    assert_eq!(model.n_sequences(), 2);
}
