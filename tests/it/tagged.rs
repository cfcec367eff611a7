//! Structural tags (`Constraint::tagged`, `constraint::tools`): masks against a brute-force
//! oracle of the combination's language on small vocabularies, real tool-call transcripts of each
//! model format walked on the real tokenizers (accepted) and with one byte corrupted inside the
//! call (refused), generation with random logits whose every call validates against its tool's
//! schema (the independent `jsonschema` crate, on MaskBench's Glaive/BFCL function schemas), and
//! the typed errors of bad input.

use grammask::constraint::tools::{
    extract_tool_calls, parse_tools, tool_constraint, Reasoning, Tool, ToolChoice, ToolFormat,
};
use grammask::constraint::{Piece, Tag, Tagged, TaggedErrorKind, TriggeredTags};
use grammask::decode::{decode, DecodeConfig, RandomLogits};
use grammask::{Constraint, ConstraintEngine, ConstraintError, TokenId, TokenMask, Vocabulary};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

// ------------------------------------------------------------------ oracle on a small vocabulary

/// An allowed token by `p`: for even `p` one without the filler `a`, so that walks go into
/// tags often.
fn pick(vocab: &Vocabulary, allowed: &[TokenId], p: usize) -> TokenId {
    let busy: Vec<TokenId> =
        allowed.iter().copied().filter(|&t| !vocab.token_bytes(t).contains(&b'a')).collect();
    if p.is_multiple_of(2) && !busy.is_empty() {
        busy[(p / 2) % busy.len()]
    } else {
        allowed[p % allowed.len()]
    }
}

const ALPHA: &[u8] = b"ab<t>1";

fn small_vocab() -> Vocabulary {
    let mut toks: Vec<Vec<u8>> = Vec::new();
    for len in 1..=3 {
        let mut idx = vec![0usize; len];
        loop {
            toks.push(idx.iter().map(|&i| ALPHA[i]).collect());
            let mut p = len;
            loop {
                if p == 0 {
                    break;
                }
                p -= 1;
                idx[p] += 1;
                if idx[p] < ALPHA.len() {
                    break;
                }
                idx[p] = 0;
            }
            if idx.iter().all(|&i| i == 0) {
                break;
            }
        }
    }
    let mut refs: Vec<Option<&[u8]>> = toks.iter().map(|t| Some(t.as_slice())).collect();
    refs.push(None); // EOS
    let eos = refs.len() as u32 - 1;
    Vocabulary::from_token_bytes(&refs, &[eos], None).expect("small vocabulary")
}

/// The content of the small tag: `b+` or `1`.
fn content_ok(c: &[u8]) -> bool {
    c == b"1" || (!c.is_empty() && c.iter().all(|&b| b == b'b'))
}

/// The language of triggered tags (trigger `<t`, tag `<t>` `b+|1` `>`), written directly: text
/// up to the first `<t`, which must go on with `>`, content up to the first `>`, and so on;
/// `max` tags at most (then `<t` is excluded), starting with a tag when `first`.
fn member(s: &[u8], max: usize, first: bool) -> bool {
    let mut r = s;
    let mut n = 0;
    if first && !r.starts_with(b"<t") {
        return false;
    }
    loop {
        let Some(i) = r.windows(2).position(|w| w == b"<t") else { return !first || n > 0 };
        if n == max {
            return false;
        }
        r = &r[i + 2..];
        if !r.starts_with(b">") {
            return false;
        }
        r = &r[1..];
        let Some(j) = r.iter().position(|&b| b == b'>') else { return false };
        if !content_ok(&r[..j]) {
            return false;
        }
        r = &r[j + 1..];
        n += 1;
    }
}

/// Some completion of at most 4 bytes makes `s` a member (enough here: no state needs more
/// than 3 bytes to finish).
fn viable(s: &[u8], max: usize, first: bool) -> bool {
    let mut buf = s.to_vec();
    fn rec(buf: &mut Vec<u8>, left: usize, max: usize, first: bool) -> bool {
        if member(buf, max, first) {
            return true;
        }
        if left == 0 {
            return false;
        }
        for &b in ALPHA {
            buf.push(b);
            let ok = rec(buf, left - 1, max, first);
            buf.pop();
            if ok {
                return true;
            }
        }
        false
    }
    rec(&mut buf, 4, max, first)
}

fn small_tags(max: Option<usize>, first: bool) -> Tagged {
    small_tags_with(Constraint::regex("b+|1"), max, first)
}

/// The same language with the content as any inner constraint of that language.
fn small_tags_with(content: Constraint, max: Option<usize>, first: bool) -> Tagged {
    let tag =
        Tag::new("t", vec![Piece::text("<t>")], Tagged::content(content), vec![Piece::text(">")]);
    Tagged::tags(
        TriggeredTags::new(vec![Piece::text("<t")], vec![tag])
            .with_max_tags(max)
            .with_at_least_one(first),
    )
}

fn check_against_oracle(picks: &[usize], max: Option<usize>, first: bool) {
    check_content_against_oracle(Constraint::regex("b+|1"), picks, max, first);
}

fn check_content_against_oracle(
    content: Constraint,
    picks: &[usize],
    max: Option<usize>,
    first: bool,
) {
    let vocab = small_vocab();
    let compiled =
        Constraint::tagged(small_tags_with(content, max, first)).compile(&vocab).expect("compiles");
    let mut engine = compiled.engine();
    let lim = max.unwrap_or(usize::MAX);
    let eos = TokenId(vocab.n_vocab() as u32 - 1);
    let mut out: Vec<u8> = Vec::new();
    let mut mask = TokenMask::new(vocab.n_vocab());
    for &p in picks {
        engine.fill_mask(&mut mask).unwrap();
        let mut allowed = Vec::new();
        for i in 0..vocab.n_vocab() {
            let t = TokenId(i as u32);
            let expect = if t == eos {
                member(&out, lim, first)
            } else {
                let mut s = out.clone();
                s.extend_from_slice(vocab.token_bytes(t));
                viable(&s, lim, first)
            };
            assert_eq!(
                mask.contains(t),
                expect,
                "after {:?}, token {:?}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(vocab.token_bytes(t))
            );
            assert_eq!(engine.allows(t), expect, "allows agrees with the mask");
            if expect && t != eos {
                allowed.push(t);
            }
        }
        if allowed.is_empty() {
            break;
        }
        let t = pick(&vocab, &allowed, p);
        engine.advance(t).unwrap();
        out.extend_from_slice(vocab.token_bytes(t));
        // Rollback restores the same masks.
        if p % 3 == 0 {
            let before = {
                engine.rollback(1).unwrap();
                let mut m = TokenMask::new(vocab.n_vocab());
                engine.fill_mask(&mut m).unwrap();
                m
            };
            engine.advance(t).unwrap();
            engine.rollback(1).unwrap();
            let mut again = TokenMask::new(vocab.n_vocab());
            engine.fill_mask(&mut again).unwrap();
            assert_eq!(before, again);
            engine.advance(t).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn masks_equal_the_brute_force_language(picks in proptest::collection::vec(0usize..1000, 1..14)) {
        check_against_oracle(&picks, None, false);
    }

    #[test]
    fn max_tags_and_at_least_one_equal_the_brute_force_language(
        picks in proptest::collection::vec(0usize..1000, 1..14),
        max in 1usize..3,
    ) {
        check_against_oracle(&picks, Some(max), true);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    #[test]
    fn a_gbnf_content_equals_the_brute_force_language(picks in proptest::collection::vec(0usize..1000, 1..10)) {
        check_content_against_oracle(Constraint::gbnf("root ::= \"b\"+ | \"1\""), &picks, None, false);
    }

    #[test]
    fn a_json_content_equals_the_brute_force_language(picks in proptest::collection::vec(0usize..1000, 1..10)) {
        // Positive integers: over this alphabet, runs of `1` (and no byte of the alphabet
        // starts anything else an integer may hold).
        check_json_against_oracle(Constraint::json_schema(&json!({"type": "integer", "minimum": 1})), &picks);
    }
}

/// The JSON Schema variant: content is a positive integer (over `ab<t>1`: a run of `1`).
fn check_json_against_oracle(content: Constraint, picks: &[usize]) {
    let vocab = small_vocab();
    let compiled =
        Constraint::tagged(small_tags_with(content, None, false)).compile(&vocab).unwrap();
    let mut engine = compiled.engine();
    let json_ok = |c: &[u8]| !c.is_empty() && c.iter().all(|&b| b == b'1');
    let member = |s: &[u8]| -> bool {
        let mut r = s;
        loop {
            let Some(i) = r.windows(2).position(|w| w == b"<t") else { return true };
            r = &r[i + 2..];
            if !r.starts_with(b">") {
                return false;
            }
            r = &r[1..];
            let Some(j) = r.iter().position(|&b| b == b'>') else { return false };
            if !json_ok(&r[..j]) {
                return false;
            }
            r = &r[j + 1..];
        }
    };
    let viable = |s: &[u8]| -> bool {
        // Completions of up to 3 bytes suffice: "1>" finishes any live content.
        let mut stack = vec![s.to_vec()];
        while let Some(x) = stack.pop() {
            if member(&x) {
                return true;
            }
            if x.len() < s.len() + 3 {
                for &b in ALPHA {
                    let mut y = x.clone();
                    y.push(b);
                    stack.push(y);
                }
            }
        }
        false
    };
    let eos = TokenId(vocab.n_vocab() as u32 - 1);
    let mut out = Vec::new();
    let mut mask = TokenMask::new(vocab.n_vocab());
    for &p in picks {
        engine.fill_mask(&mut mask).unwrap();
        let mut allowed = Vec::new();
        for i in 0..vocab.n_vocab() {
            let t = TokenId(i as u32);
            let expect = if t == eos {
                member(&out)
            } else {
                let mut s = out.clone();
                s.extend_from_slice(vocab.token_bytes(t));
                viable(&s)
            };
            assert_eq!(
                mask.contains(t),
                expect,
                "after {:?}, {:?}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(vocab.token_bytes(t))
            );
            if expect && t != eos {
                allowed.push(t);
            }
        }
        let t = pick(&vocab, &allowed, p);
        engine.advance(t).unwrap();
        out.extend_from_slice(vocab.token_bytes(t));
    }
}

#[test]
fn a_token_spanning_text_trigger_begin_content_and_end_is_allowed_exactly() {
    let vocab = small_vocab();
    let compiled = Constraint::tagged(small_tags(None, false)).compile(&vocab).unwrap();
    let id = |s: &[u8]| {
        TokenId((0..vocab.n_vocab()).find(|&i| vocab.token_bytes(TokenId(i as u32)) == s).unwrap()
            as u32)
    };
    let mut e = compiled.engine();
    e.advance(id(b"a<t")).unwrap(); // text, then the whole trigger
    assert!(e.allows(id(b">1>")), "begin rest, content, end in one token");
    assert!(!e.allows(id(b">1b")), "1 then b is no content");
    e.advance(id(b">bb")).unwrap();
    assert!(!e.is_accepting(), "inside a content EOS is refused");
    assert!(e.allows(id(b"b>a")), "content, end and text in one token");
    assert!(!e.allows(id(b"1")));
    e.advance(id(b">")).unwrap();
    assert!(e.is_accepting());
}

// ------------------------------------------------------------------ real tokenizers

fn shared() -> PathBuf {
    std::env::var_os("GRAMMASK_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

fn tokenizer(name: &str) -> Option<Vocabulary> {
    let p = shared().join("tokenizers").join(format!("{name}.json"));
    if !p.is_file() {
        eprintln!("skipped: {} absent", p.display());
        return None;
    }
    Some(Vocabulary::from_file(&p).expect("tokenizer loads"))
}

fn weather() -> Vec<Tool> {
    parse_tools(&json!([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["location", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}]))
    .unwrap()
}

/// Walk `text` (special tokens written as their strings); `Ok(())` when every token is allowed
/// and the output may end (or has ended) after it.
fn walk(engine: &mut dyn ConstraintEngine, vocab: &Vocabulary, text: &str) -> Result<(), String> {
    let toks = vocab.encode(text).map_err(|e| e.to_string())?;
    for (i, &t) in toks.iter().enumerate() {
        if !engine.allows(t) {
            return Err(format!(
                "token {i} {:?} refused",
                String::from_utf8_lossy(vocab.token_bytes(t))
            ));
        }
        let mut m = TokenMask::new(vocab.n_vocab());
        engine.fill_mask(&mut m).unwrap();
        assert!(m.contains(t), "mask agrees with allows at token {i}");
        engine.advance(t).map_err(|e| e.to_string())?;
    }
    if engine.is_finished() || engine.is_accepting() {
        Ok(())
    } else {
        Err("not complete at the end".into())
    }
}

struct Transcript {
    tokenizer: &'static str,
    format: ToolFormat,
    text: &'static str,
    /// The call's bytes (corrupted one at a time), and the free string value inside it (left).
    call: &'static str,
    free: &'static str,
}

const TRANSCRIPTS: &[Transcript] = &[
    Transcript {
        tokenizer: "qwen3",
        format: ToolFormat::Qwen3,
        text: "<think>\nThe user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
        call: "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
        free: "Paris",
    },
    Transcript {
        tokenizer: "llama3",
        format: ToolFormat::Llama3,
        text: "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}",
        call: "get_weather\", \"parameters\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}",
        free: "Paris",
    },
    Transcript {
        tokenizer: "gptoss",
        format: ToolFormat::Harmony,
        text: "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\",\"unit\":\"celsius\"}<|call|>",
        call: "commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\",\"unit\":\"celsius\"}<|call|>",
        free: "Paris",
    },
    Transcript {
        tokenizer: "deepseek_v3",
        format: ToolFormat::DeepSeek,
        text: "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"zone\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        call: "function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜>",
        free: "Paris",
    },
];

#[test]
fn real_transcripts_are_accepted_and_one_byte_corruptions_inside_a_call_refused() {
    let mut walked = 0;
    for tr in TRANSCRIPTS {
        let Some(vocab) = tokenizer(tr.tokenizer) else { continue };
        assert_eq!(ToolFormat::detect(&vocab), Some(tr.format), "{}", tr.tokenizer);
        let tagged =
            tool_constraint(&vocab, &weather(), &ToolChoice::Auto, tr.format, Reasoning::Free)
                .unwrap();
        let compiled = Constraint::tagged(tagged).compile(&vocab).unwrap();
        walk(&mut *compiled.engine(), &vocab, tr.text)
            .unwrap_or_else(|e| panic!("{}: transcript refused: {e}", tr.tokenizer));
        let (_, calls) = extract_tool_calls(tr.format, tr.text);
        assert_eq!(calls[0].name, "get_weather", "{}", tr.tokenizer);
        assert_eq!(calls[0].arguments, json!({"location": "Paris", "unit": "celsius"}));
        // One-byte corruptions inside the call (outside the free string value).
        let start = tr.text.find(tr.call).unwrap();
        let free = start + tr.call.find(tr.free).unwrap();
        let mut corrupted = 0;
        for i in start..start + tr.call.len() {
            if (free..free + tr.free.len()).contains(&i) || !tr.text.is_char_boundary(i) {
                continue;
            }
            let ch = tr.text[i..].chars().next().unwrap();
            if !ch.is_ascii() {
                continue;
            }
            let repl = if ch == '#' { "@" } else { "#" };
            let bad = format!("{}{}{}", &tr.text[..i], repl, &tr.text[i + 1..]);
            let r = walk(&mut *compiled.engine(), &vocab, &bad);
            assert!(
                r.is_err(),
                "{}: corruption at byte {i} ({ch:?}) accepted: {bad:?}",
                tr.tokenizer
            );
            corrupted += 1;
        }
        assert!(corrupted > 40, "{}: {corrupted} corruptions checked", tr.tokenizer);
        walked += 1;
    }
    if walked == 0 {
        eprintln!("skipped: no shared tokenizer");
    }
}

#[test]
fn tool_choice_none_required_and_named_shape_the_language() {
    let Some(vocab) = tokenizer("qwen3") else { return };
    let call =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
    let run = |choice: ToolChoice, text: &str| {
        let tagged =
            tool_constraint(&vocab, &weather(), &choice, ToolFormat::Qwen3, Reasoning::Off)
                .unwrap();
        let compiled = Constraint::tagged(tagged).compile(&vocab).unwrap();
        walk(&mut *compiled.engine(), &vocab, text)
    };
    assert!(run(ToolChoice::Auto, "Just text.").is_ok());
    assert!(run(ToolChoice::Required, "Just text.").is_err(), "required refuses text alone");
    assert!(run(ToolChoice::Required, call).is_ok());
    assert!(run(ToolChoice::Named("get_time".into()), call).is_ok());
    assert!(run(ToolChoice::Named("get_weather".into()), call).is_err(), "the other tool");
    assert!(run(ToolChoice::None, call).is_err(), "none refuses a call");
    assert!(run(ToolChoice::None, "Just text.").is_ok());
}

#[test]
fn budgeted_reasoning_must_close_within_its_budget() {
    let Some(vocab) = tokenizer("qwen3") else { return };
    let tagged = tool_constraint(
        &vocab,
        &weather(),
        &ToolChoice::Auto,
        ToolFormat::Qwen3,
        Reasoning::Budget(12),
    )
    .unwrap();
    let compiled = Constraint::tagged(tagged).compile(&vocab).unwrap();
    assert!(walk(&mut *compiled.engine(), &vocab, "<think>short</think>Hi").is_ok());
    assert!(walk(&mut *compiled.engine(), &vocab, "<think>this is far too long</think>Hi").is_err());
}

// ------------------------------------------------------------------ generation

fn function_schemas(n: usize) -> Vec<Tool> {
    let dir = shared().join("maskbench-dev");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect()
        })
        .unwrap_or_default();
    names.retain(|n: &String| n.starts_with("Glaiveai2K") || n.starts_with("BFCL_"));
    names.sort();
    let step = (names.len() / n).max(1);
    names
        .iter()
        .step_by(step)
        .take(n)
        .enumerate()
        .map(|(i, f)| {
            let doc: Value = serde_json::from_slice(&std::fs::read(dir.join(f)).unwrap()).unwrap();
            Tool { name: format!("fn{i}"), parameters: doc["schema"].clone() }
        })
        .collect()
}

fn render(vocab: &Vocabulary, toks: &[TokenId]) -> String {
    let mut out = Vec::new();
    for &t in toks {
        if vocab.is_eos(t) {
            continue;
        }
        let b = vocab.token_bytes(t);
        if b.is_empty() {
            if let Some(s) = vocab.tokenizer().and_then(|k| k.id_to_token(t.0)) {
                out.extend_from_slice(s.as_bytes());
            }
        } else {
            out.extend_from_slice(b);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn random_logit_tool_calls_validate_against_their_schemas() {
    let tools = function_schemas(6);
    if tools.is_empty() {
        eprintln!("skipped: no maskbench-dev function schemas");
        return;
    }
    let mut validated = 0;
    for (tok, format) in [
        ("qwen3", ToolFormat::Qwen3),
        ("llama3", ToolFormat::Llama3),
        ("gptoss", ToolFormat::Harmony),
        ("deepseek_v3", ToolFormat::DeepSeek),
    ] {
        let Some(vocab) = tokenizer(tok) else { continue };
        for (i, tool) in tools.iter().enumerate() {
            let tagged = tool_constraint(
                &vocab,
                std::slice::from_ref(tool),
                &ToolChoice::Required,
                format,
                Reasoning::Off,
            )
            .unwrap();
            let compiled = match Constraint::tagged(tagged).compile(&vocab) {
                Ok(c) => c,
                Err(e) => {
                    // A schema grammask does not support is a typed error naming the tool.
                    assert!(e.to_string().contains(&tool.name), "{e}");
                    eprintln!("{tok} {}: {e}", tool.name);
                    continue;
                }
            };
            let mut engine = compiled.engine();
            let mut model = RandomLogits::new(&vocab, 7 + i as u64);
            let cfg = DecodeConfig::greedy(1500);
            let out = decode(&mut model, &vocab, Some(&mut *engine), &cfg).unwrap();
            let text = render(&vocab, &out.tokens);
            let (_, calls) = extract_tool_calls(format, &text);
            if !engine.is_finished() && !engine.is_accepting() {
                eprintln!(
                    "{tok} {}: unfinished after {} tokens: …{:?}",
                    tool.name,
                    out.tokens.len(),
                    &text[text.len().saturating_sub(150)..]
                );
                continue; // out of tokens inside a long value
            }
            assert!(!calls.is_empty(), "{tok}: a required call: {text:?}");
            let validator = jsonschema::validator_for(&tool.parameters).unwrap();
            eprintln!(
                "{tok} {}: {} call(s) in {} tokens",
                tool.name,
                calls.len(),
                out.tokens.len()
            );
            for c in &calls {
                assert_eq!(c.name, tool.name);
                assert!(validator.is_valid(&c.arguments), "{tok} {}: {}", tool.name, c.arguments);
                validated += 1;
            }
        }
    }
    if tokenizer("qwen3").is_some() {
        assert!(validated >= 4, "{validated} calls validated");
    }
}

// ------------------------------------------------------------------ bad input

fn err_of(t: Tagged) -> TaggedErrorKind {
    let vocab = small_vocab();
    match Constraint::tagged(t).compile(&vocab) {
        Err(ConstraintError::Tagged(e)) => e.kind().clone(),
        other => panic!("expected a tagged error, got {other:?}"),
    }
}

fn tag(name: &str, begin: &str, content: Tagged, end: &str) -> Tag {
    Tag::new(name, vec![Piece::text(begin)], content, vec![Piece::text(end)])
}

#[test]
fn bad_input_is_a_typed_error_naming_the_tag() {
    let re = || Tagged::content(Constraint::regex("b+"));
    let tt = |tr: Vec<&str>, tags: Vec<Tag>| {
        Tagged::tags(TriggeredTags::new(tr.into_iter().map(Piece::text).collect(), tags))
    };
    assert!(matches!(
        err_of(tt(vec![""], vec![tag("x", "<t", re(), ">")])),
        TaggedErrorKind::Empty { what: "trigger", .. }
    ));
    assert!(
        matches!(err_of(tt(vec!["<t"], vec![tag("x", "<t", re(), "")])), TaggedErrorKind::Empty { what: "end", ref tag } if tag == "x")
    );
    assert!(matches!(
        err_of(tt(vec!["<t", "<t"], vec![tag("x", "<t", re(), ">")])),
        TaggedErrorKind::Overlap { .. }
    ));
    assert!(matches!(
        err_of(tt(vec!["<", "<t"], vec![tag("x", "<t", re(), ">")])),
        TaggedErrorKind::Overlap { .. }
    ));
    assert!(matches!(
        err_of(tt(vec!["<"], vec![tag("x", "<t", re(), ">"), tag("y", "<t>", re(), ">")])),
        TaggedErrorKind::BeginPrefix { ref tag, ref other } if tag == "x" && other == "y"
    ));
    assert!(
        matches!(err_of(tt(vec!["<"], vec![tag("x", "a", re(), ">")])), TaggedErrorKind::BeginWithoutTrigger { ref tag } if tag == "x")
    );
    assert!(matches!(
        err_of(tt(vec!["<", "a"], vec![tag("x", "<t", re(), ">")])),
        TaggedErrorKind::UnusedTrigger { .. }
    ));
    // The content could produce its end after a complete match: ambiguous.
    assert!(matches!(
        err_of(tt(vec!["<"], vec![tag("x", "<t", Tagged::content(Constraint::regex("[b>]+")), ">")])),
        TaggedErrorKind::EndInsideContent { ref tag, .. } if tag == "x"
    ));
    assert!(matches!(
        err_of(tt(vec!["<"], vec![tag("x", "<t", Tagged::content(Constraint::json()), "\n")])),
        TaggedErrorKind::EndInsideContent { .. }
    ));
    // A tool whose schema does not compile.
    let bad = Tagged::content(Constraint::json_schema(&json!({"type": 5})));
    assert!(
        matches!(err_of(tt(vec!["<"], vec![tag("weather", "<t", bad, ">")])), TaggedErrorKind::Content { ref tag, .. } if tag == "weather")
    );
    assert!(matches!(
        err_of(Tagged::sequence(vec![re(), Tagged::text()])),
        TaggedErrorKind::ContentNotDelimited { .. }
    ));
    assert!(matches!(
        err_of(Tagged::sequence(vec![Tagged::text(), re(), Tagged::literal(">")])),
        TaggedErrorKind::TextNotDelimited { .. }
    ));
    assert!(matches!(
        err_of(Tagged::choice(vec![Tagged::literal("ab"), Tagged::literal("a")])),
        TaggedErrorKind::AmbiguousChoice { .. }
    ));
    assert!(matches!(
        err_of(Tagged::pieces(vec![Piece::token("<|nope|>")])),
        TaggedErrorKind::UnknownToken { .. }
    ));
    let msg = Constraint::tagged(tt(vec!["<"], vec![tag("x", "a", re(), ">")]))
        .compile(&small_vocab())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("\"x\""), "{msg}");
}

#[test]
fn end_strings_inside_json_strings_are_content() {
    let vocab = small_vocab();
    let _ = vocab;
    let Some(vocab) = tokenizer("qwen3") else { return };
    let tools = parse_tools(&json!([{"name": "echo", "parameters": {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}}])).unwrap();
    let tagged =
        tool_constraint(&vocab, &tools, &ToolChoice::Auto, ToolFormat::Qwen3, Reasoning::Off)
            .unwrap();
    let compiled = Constraint::tagged(tagged).compile(&vocab).unwrap();
    let text = "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"s\": \"}\\n</tool_call>\"}}\n</tool_call> done";
    walk(&mut *compiled.engine(), &vocab, text).unwrap();
    let (content, calls) = extract_tool_calls(ToolFormat::Qwen3, text);
    assert_eq!(calls.len(), 1, "{content}");
}

// ------------------------------------------------------------------ the CLI

#[test]
fn cli_generate_and_walk_report_tool_calls_apart_from_content() {
    let dir = std::env::temp_dir().join(format!("grammask-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tools = dir.join("tools.json");
    let list = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["location", "unit"], "additionalProperties": false}}}]);
    std::fs::write(&tools, list.to_string()).unwrap();
    let bin = env!("CARGO_BIN_EXE_grammask");
    let run_with = |args: &[&str], code: i32| {
        let out = std::process::Command::new(bin).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let run = |args: &[&str]| run_with(args, 0);
    let t = tools.to_str().unwrap();
    let validator = jsonschema::validator_for(&list[0]["function"]["parameters"]).unwrap();
    let mut seen = 0;
    for seed in ["1", "2", "3"] {
        let v = run(&[
            "generate",
            "--tools",
            t,
            "--tool-choice",
            "required",
            "--format",
            "json",
            "--max-tokens",
            "400",
            "--seed",
            seed,
        ]);
        assert_eq!(v["tool_format"], "qwen3", "detected from the embedded tokenizer");
        if v["finish_reason"] != "stop" {
            continue;
        }
        let calls = v["tool_calls"].as_array().unwrap();
        assert!(!calls.is_empty(), "{v}");
        for c in calls {
            assert_eq!(c["name"], "get_weather");
            assert!(validator.is_valid(&c["arguments"]), "{c}");
            seen += 1;
        }
        assert!(!v["content"].as_str().unwrap().contains("<tool_call>"), "calls are not content");
    }
    assert!(seen > 0, "some generation finished");
    let doc = dir.join("doc.txt");
    std::fs::write(&doc, "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\", \"unit\": \"celsius\"}}\n</tool_call>\n").unwrap();
    let v = run(&["walk", "--tools", t, "--input", doc.to_str().unwrap(), "--format", "json"]);
    assert_eq!(v["accepted"], true, "{v}");
    assert_eq!(v["content"], "Sure.");
    assert_eq!(v["tool_calls"][0]["arguments"]["location"], "Oslo");
    std::fs::write(&doc, "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\", \"unit\": \"kelvin\"}}\n</tool_call>\n").unwrap();
    // A refused document: `walk` exits with status 3.
    let v =
        run_with(&["walk", "--tools", t, "--input", doc.to_str().unwrap(), "--format", "json"], 3);
    assert_eq!(v["accepted"], false, "an enum violation inside the call: {v}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------ the real model

#[cfg(feature = "model")]
#[test]
fn real_model_tool_calls_validate_against_their_schemas() {
    use grammask::model::{GgufModel, ModelConfig};
    let path = match std::env::var_os("GRAMMASK_MODEL") {
        Some(p) => PathBuf::from(p),
        None => shared().join("models/smollm2-135m-instruct-q4_1.gguf"),
    };
    if !path.is_file() {
        eprintln!("skipped: no model at {} and GRAMMASK_MODEL unset", path.display());
        return;
    }
    let tools = function_schemas(4);
    if tools.is_empty() {
        eprintln!("skipped: no maskbench-dev function schemas");
        return;
    }
    let config = ModelConfig::builder().threads(2).context(2048).build().unwrap();
    let mut model = GgufModel::from_bytes(std::fs::read(&path).unwrap(), &config).unwrap();
    let vocab = model.vocab().clone();
    // Greedy first; the 135M model often loops inside an array or a nested object until the
    // token budget (greedy outputs also move with the kernels' rounding), so if no call has
    // finished, seeded sampled runs with a repetition penalty follow until one does. Every
    // call that finishes is judged by `jsonschema`, whichever run made it.
    let sampled = |seed: u64| {
        DecodeConfig::builder()
            .max_tokens(256)
            .temperature(0.7)
            .top_p(0.95)
            .seed(seed)
            .penalties(grammask::sampler::PenaltyConfig::default().with_repetition_penalty(1.15))
            .build()
            .unwrap()
    };
    let mut validated = 0;
    let mut runs = vec![DecodeConfig::greedy(160)];
    runs.extend((1..=4).map(sampled));
    for (r, config) in runs.iter().enumerate() {
        if r > 0 && validated > 0 {
            break;
        }
        for tool in &tools {
            let system = format!(
                "You call functions. Reply with {{\"name\": \"{}\", \"parameters\": {{...}}}} where the parameters follow this JSON Schema: {}",
                tool.name, tool.parameters
            );
            let prompt = model
                .chat_prompt(Some(&system), "Please make the call with sensible values.")
                .unwrap();
            model.set_prompt(&prompt).unwrap();
            let tagged = tool_constraint(
                &vocab,
                std::slice::from_ref(tool),
                &ToolChoice::Required,
                ToolFormat::Llama3,
                Reasoning::Off,
            )
            .unwrap();
            let Ok(compiled) = Constraint::tagged(tagged).compile(&vocab) else { continue };
            let mut engine = compiled.engine();
            let out = decode(&mut model, &vocab, Some(&mut *engine), config).unwrap();
            let text = render(&vocab, &out.tokens);
            let (_, calls) = extract_tool_calls(ToolFormat::Llama3, &text);
            eprintln!("real model {} (run {r}): {text:?}", tool.name);
            if !engine.is_accepting() && !engine.is_finished() {
                continue;
            }
            let validator = jsonschema::validator_for(&tool.parameters).unwrap();
            for c in &calls {
                assert!(validator.is_valid(&c.arguments), "{}: {}", tool.name, c.arguments);
                validated += 1;
            }
        }
    }
    assert!(validated > 0, "at least one call finished within the token budget");
}
