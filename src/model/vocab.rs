//! [`Vocabulary::from_gguf`]: the tokenizer stored in a GGUF file's `tokenizer.ggml.*`
//! metadata, rebuilt as a Hugging Face `tokenizer.json` and loaded through the vocabulary's
//! ordinary constructor, so the token bytes, trie and encoder are the ones every other
//! vocabulary has.
//!
//! Two tokenizer models are read (llama.cpp `llama-vocab.cpp` names):
//! - **`gpt2`** — byte-level BPE: `tokens` in the GPT-2 byte↔unicode alphabet, `merges` as
//!   `"left right"` strings in rank order, `token_type` (1 normal, 3 control, 4 user-defined,
//!   6 byte). The pre-tokenizer is named by `tokenizer.ggml.pre`; the names whose split rule is
//!   known here are `default`/`gpt2`, `smollm`/`starcoder` (digits one by one, then GPT-2),
//!   `llama3`/`llama-bpe` and `qwen2`, and any other is refused rather than guessed.
//! - **`llama`** — SentencePiece BPE: `tokens` with `▁` for a space, `<0xNN>` byte tokens,
//!   `scores`. SentencePiece stores no merges, so they are derived from the scores the way
//!   `transformers`' `SentencePieceExtractor` does: every split of a piece into two pieces of
//!   the vocabulary is a merge, ranked by the merged piece's score (ties by the halves' ids).
//!   The normaliser prepends `▁` and maps spaces to `▁`; byte fallback is on.
//!
//! Control and unknown tokens (types 3, 2) become special added tokens, user-defined ones
//! (type 4) plain added tokens; EOS is `eos_token_id` plus `eot_token_id`/`eom_token_id` when present.

use super::error::{ModelError, ModelErrorKind};
use super::gguf::{GgufFile, GgufValue};
use crate::vocab::{VocabConfig, Vocabulary};
use serde_json::{json, Value};
use std::path::Path;

/// GGUF token types (llama.cpp `llama_token_type`).
const TYPE_UNKNOWN: i64 = 2;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;

const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn missing(key: &str) -> ModelError {
    ModelError::new(ModelErrorKind::MissingKey { key: key.into() })
}

fn strings<'a>(f: &'a GgufFile, key: &str) -> Result<Vec<&'a str>, ModelError> {
    let a = f.get(key).and_then(GgufValue::as_array).ok_or_else(|| missing(key))?;
    a.iter().map(|v| v.as_str().ok_or_else(|| missing(key))).collect()
}

/// What the GGUF tokenizer metadata says, beyond the `tokenizer.json` itself.
#[derive(Clone, Debug)]
pub(crate) struct GgufTokenizer {
    /// The rebuilt `tokenizer.json`.
    pub tokenizer_json: Vec<u8>,
    /// A `tokenizer_config.json` with the EOS/BOS/pad token contents.
    pub config_json: Vec<u8>,
    /// Extra EOS ids (end-of-turn, end-of-message).
    pub extra_eos: Vec<u32>,
    /// `tokenizer.ggml.add_bos_token` (default: true for `llama`, false for `gpt2`).
    pub add_bos: bool,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

fn pre_tokenizer(pre: &str) -> Result<(Value, bool), ModelError> {
    let byte_level = |use_regex: bool| {
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
               "use_regex": use_regex})
    };
    let split = |re: &str| {
        json!({"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated",
               "invert": false})
    };
    Ok(match pre {
        "default" | "gpt2" | "gpt-2" => (byte_level(true), false),
        "smollm" | "starcoder" => (
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
            false,
        ),
        "llama3" | "llama-bpe" | "llama-v3" => (
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]}),
            true,
        ),
        "qwen2" => (
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]}),
            false,
        ),
        other => {
            return Err(ModelError::new(ModelErrorKind::UnsupportedTokenizer(format!(
                "gpt2 with pre-tokenizer `{other}`"
            ))))
        }
    })
}

/// The SentencePiece merges implied by `scores` (see the module docs).
fn spm_merges(tokens: &[&str], scores: &[f32]) -> Vec<(u32, u32)> {
    let ids: rustc_hash::FxHashMap<&str, u32> =
        tokens.iter().enumerate().map(|(i, &t)| (t, i as u32)).collect();
    let mut merges: Vec<(u32, u32, f32)> = Vec::new();
    let mut local = Vec::new();
    for (i, &piece) in tokens.iter().enumerate() {
        local.clear();
        for (at, _) in piece.char_indices().skip(1) {
            if let (Some(&l), Some(&r)) = (ids.get(&piece[..at]), ids.get(&piece[at..])) {
                local.push((l, r, scores.get(i).copied().unwrap_or(0.0)));
            }
        }
        local.sort_by_key(|&(l, r, _)| (l, r));
        merges.extend_from_slice(&local);
    }
    // Stable: ties keep the id order above.
    merges.sort_by(|a, b| b.2.total_cmp(&a.2));
    merges.into_iter().map(|(l, r, _)| (l, r)).collect()
}

impl GgufTokenizer {
    pub(crate) fn from_file(f: &GgufFile) -> Result<GgufTokenizer, ModelError> {
        let model =
            f.get_str("tokenizer.ggml.model").ok_or_else(|| missing("tokenizer.ggml.model"))?;
        let tokens = strings(f, "tokenizer.ggml.tokens")?;
        let types: Vec<i64> = match f.get("tokenizer.ggml.token_type").and_then(GgufValue::as_array)
        {
            Some(a) => a.iter().map(|v| v.as_i64().unwrap_or(1)).collect(),
            None => vec![1; tokens.len()],
        };
        let id = |key: &str| f.get_u64(key).filter(|&v| (v as usize) < tokens.len());
        let content = |i: u64| Value::String(tokens[i as usize].to_string());
        let mut added = Vec::new();
        for (i, (&t, &ty)) in tokens.iter().zip(&types).enumerate() {
            if ty == TYPE_CONTROL || ty == TYPE_UNKNOWN || ty == TYPE_USER_DEFINED {
                added.push(json!({"id": i, "content": t, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": ty != TYPE_USER_DEFINED}));
            }
        }
        let vocab: serde_json::Map<String, Value> =
            tokens.iter().enumerate().map(|(i, &t)| (t.to_string(), json!(i))).collect();
        let (tok, add_bos_default) = match model {
            "gpt2" => {
                let merges = strings(f, "tokenizer.ggml.merges")?;
                let merges: Vec<Value> = merges
                    .iter()
                    .map(|m| match m.split_once(' ') {
                        Some((a, b)) => Ok(json!([a, b])),
                        None => Err(ModelError::new(ModelErrorKind::Malformed(format!(
                            "merge `{m}` has no space"
                        )))),
                    })
                    .collect::<Result<_, _>>()?;
                let pre = f.get_str("tokenizer.ggml.pre").unwrap_or("default");
                let (pre_tok, ignore_merges) = pre_tokenizer(pre)?;
                let tok = json!({
                    "version": "1.0", "truncation": null, "padding": null,
                    "added_tokens": added, "normalizer": null,
                    "pre_tokenizer": pre_tok, "post_processor": null,
                    "decoder": {"type": "ByteLevel", "add_prefix_space": true,
                                "trim_offsets": true, "use_regex": true},
                    "model": {"type": "BPE", "dropout": null, "unk_token": null,
                              "continuing_subword_prefix": null, "end_of_word_suffix": null,
                              "fuse_unk": false, "byte_fallback": false,
                              "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges},
                });
                (tok, false)
            }
            "llama" => {
                let scores: Vec<f32> =
                    match f.get("tokenizer.ggml.scores").and_then(GgufValue::as_array) {
                        Some(a) => a.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect(),
                        None => return Err(missing("tokenizer.ggml.scores")),
                    };
                let merges: Vec<Value> = spm_merges(&tokens, &scores)
                    .into_iter()
                    .map(|(l, r)| json!([tokens[l as usize], tokens[r as usize]]))
                    .collect();
                let unk = id("tokenizer.ggml.unknown_token_id").map(content);
                let tok = json!({
                    "version": "1.0", "truncation": null, "padding": null,
                    "added_tokens": added,
                    "normalizer": {"type": "Sequence", "normalizers": [
                        {"type": "Prepend", "prepend": "▁"},
                        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
                    "pre_tokenizer": null, "post_processor": null,
                    "decoder": {"type": "Sequence", "decoders": [
                        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                        {"type": "ByteFallback"}, {"type": "Fuse"},
                        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
                    "model": {"type": "BPE", "dropout": null, "unk_token": unk,
                              "continuing_subword_prefix": null, "end_of_word_suffix": null,
                              "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                              "vocab": vocab, "merges": merges},
                });
                (tok, true)
            }
            other => {
                return Err(ModelError::new(ModelErrorKind::UnsupportedTokenizer(other.into())))
            }
        };
        let mut config = serde_json::Map::new();
        for (field, key) in [
            ("eos_token", "tokenizer.ggml.eos_token_id"),
            ("bos_token", "tokenizer.ggml.bos_token_id"),
            ("pad_token", "tokenizer.ggml.padding_token_id"),
        ] {
            if let Some(i) = id(key) {
                config.insert(field.into(), content(i));
            }
        }
        let extra_eos = ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"]
            .iter()
            .filter_map(|k| id(k).map(|v| v as u32))
            .collect();
        let add_bos = match f.get("tokenizer.ggml.add_bos_token") {
            Some(GgufValue::Bool(b)) => *b,
            _ => add_bos_default,
        };
        Ok(GgufTokenizer {
            tokenizer_json: serde_json::to_vec(&tok).expect("JSON values serialise"),
            config_json: serde_json::to_vec(&Value::Object(config)).expect("JSON values serialise"),
            extra_eos,
            add_bos,
            chat_template: f.get_str("tokenizer.chat_template").map(str::to_string),
        })
    }

    pub(crate) fn vocabulary(&self, n_vocab: Option<usize>) -> Result<Vocabulary, ModelError> {
        let config =
            VocabConfig { n_vocab, extra_eos: self.extra_eos.clone(), ..VocabConfig::default() };
        Vocabulary::from_bytes(&self.tokenizer_json, Some(&self.config_json), &config)
            .map_err(|e| ModelError::new(ModelErrorKind::Vocab(e)))
    }
}

impl Vocabulary {
    /// The vocabulary of a GGUF model file, from its `tokenizer.ggml.*` metadata (see
    /// [`crate::model`]'s vocabulary section for what is read). Only the header is used; the
    /// tensors may be absent (a tokenizer-only file).
    ///
    /// # Errors
    /// [`ModelErrorKind::Io`], the container errors of [`GgufFile::parse`],
    /// [`ModelErrorKind::UnsupportedTokenizer`] (a model other than `gpt2`/`llama`, or an
    /// unknown `gpt2` pre-tokenizer), [`ModelErrorKind::MissingKey`],
    /// [`ModelErrorKind::Vocab`].
    ///
    /// # Example
    /// ```no_run
    /// let vocab = grammask::Vocabulary::from_gguf("../shared/models/smollm2-135m-instruct-q4_1.gguf")?;
    /// assert_eq!(vocab.n_vocab(), 49_152);
    /// # Ok::<(), grammask::model::ModelError>(())
    /// ```
    pub fn from_gguf(path: impl AsRef<Path>) -> Result<Vocabulary, ModelError> {
        Self::from_gguf_with(path, None)
    }

    /// [`Vocabulary::from_gguf`] with a logits width `n_vocab` wider than the tokenizer (a
    /// model whose output row is padded, e.g. to a multiple of 64): ids past the tokenizer's
    /// size are padding, never allowed. `None` is the tokenizer's size.
    ///
    /// # Errors
    /// As [`Vocabulary::from_gguf`]; a width below the tokenizer's size is
    /// [`ModelErrorKind::Vocab`] wrapping [`crate::vocab::VocabErrorKind::LogitsTooNarrow`].
    pub fn from_gguf_with(
        path: impl AsRef<Path>,
        n_vocab: Option<usize>,
    ) -> Result<Vocabulary, ModelError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| {
            ModelError::new(ModelErrorKind::Io { path: path.display().to_string(), source })
        })?;
        let file = GgufFile::parse(&bytes)?;
        GgufTokenizer::from_file(&file)?.vocabulary(n_vocab)
    }

    /// [`Vocabulary::from_gguf`] over the bytes of a GGUF file.
    ///
    /// # Errors
    /// As [`Vocabulary::from_gguf`].
    pub fn from_gguf_bytes(bytes: &[u8]) -> Result<Vocabulary, ModelError> {
        let file = GgufFile::parse(bytes)?;
        GgufTokenizer::from_file(&file)?.vocabulary(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spm_merges_rank_by_merged_score() {
        let tokens = ["a", "b", "c", "ab", "bc", "abc"];
        let scores = [0.0, 0.0, 0.0, -1.0, -2.0, -3.0];
        let m = spm_merges(&tokens, &scores);
        // ab (-1) before bc (-2) before the two ways to make abc (-3), halves by id.
        assert_eq!(m, vec![(0, 1), (1, 2), (0, 4), (3, 2)]);
    }
}
