//! EOS ids from a model's config files (seed `000`): `config.json` and `generation_config.json`
//! carry `eos_token_id` as a single integer or an array of integers; `tokenizer_config.json`
//! names `eos_token` as a string or an `{"content": ...}` object, resolved through the
//! vocabulary. Every form is normalised to a sorted, deduplicated list; the decode loop stops on
//! any of them ([`super::DecodeConfig::eos_ids`]).

use super::error::{DecodeError, DecodeErrorKind};
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::path::Path;

fn eos_error(file: &str, reason: impl Into<String>) -> DecodeError {
    DecodeError::new(DecodeErrorKind::EosConfig { file: file.to_string(), reason: reason.into() })
}

/// The `eos_token_id` of a `config.json` / `generation_config.json` document: an integer, an
/// array of integers, `null` or absent (→ empty).
///
/// # Errors
/// Invalid JSON, or `eos_token_id` of another type or out of the `u32` range.
///
/// # Example
/// ```
/// use grammask::decode::eos::eos_ids_from_config;
/// use grammask::TokenId;
/// assert_eq!(eos_ids_from_config(br#"{"eos_token_id": 2}"#, "config.json")?, vec![TokenId(2)]);
/// assert_eq!(
///     eos_ids_from_config(br#"{"eos_token_id": [151645, 151643]}"#, "generation_config.json")?,
///     vec![TokenId(151645), TokenId(151643)]
/// );
/// # Ok::<(), grammask::decode::DecodeError>(())
/// ```
pub fn eos_ids_from_config(json: &[u8], file: &str) -> Result<Vec<TokenId>, DecodeError> {
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| eos_error(file, e.to_string()))?;
    let one = |x: &serde_json::Value| -> Result<TokenId, DecodeError> {
        x.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(TokenId)
            .ok_or_else(|| eos_error(file, format!("eos_token_id entry {x} is not a token id")))
    };
    match v.get("eos_token_id") {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Array(a)) => a.iter().map(one).collect(),
        Some(x) => Ok(vec![one(x)?]),
    }
}

/// The `eos_token` of a `tokenizer_config.json` document, resolved to its id in `vocab`
/// (`None` when absent or `null`).
///
/// # Errors
/// Invalid JSON, an `eos_token` of another shape, or a token the vocabulary does not have.
pub fn eos_id_from_tokenizer_config(
    json: &[u8],
    vocab: &Vocabulary,
    file: &str,
) -> Result<Option<TokenId>, DecodeError> {
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| eos_error(file, e.to_string()))?;
    let content = match v.get("eos_token") {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(s)) => s.as_str(),
        Some(o) => o
            .get("content")
            .and_then(|c| c.as_str())
            .ok_or_else(|| eos_error(file, format!("eos_token {o} has no string content")))?,
    };
    vocab
        .token_id(content)
        .map(Some)
        .ok_or_else(|| eos_error(file, format!("eos_token {content:?} is not in the vocabulary")))
}

/// EOS ids from the config files in a model directory: the union of `config.json`,
/// `generation_config.json` (`eos_token_id`) and `tokenizer_config.json` (`eos_token`), each
/// read when present; sorted and deduplicated. Ids must be below `vocab.n_tokens()`.
///
/// # Errors
/// An unreadable or malformed file, an unknown token, an id out of range.
pub fn load_eos_ids(dir: &Path, vocab: &Vocabulary) -> Result<Vec<TokenId>, DecodeError> {
    let mut ids = Vec::new();
    let read = |name: &str| -> Result<Option<Vec<u8>>, DecodeError> {
        let p = dir.join(name);
        if !p.is_file() {
            return Ok(None);
        }
        crate::io::read_limited(&p, crate::io::DEFAULT_MAX_FILE_BYTES)
            .map(Some)
            .map_err(|e| eos_error(&p.display().to_string(), e.to_string()))
    };
    for name in ["config.json", "generation_config.json"] {
        if let Some(bytes) = read(name)? {
            ids.extend(eos_ids_from_config(&bytes, name)?);
        }
    }
    if let Some(bytes) = read("tokenizer_config.json")? {
        ids.extend(eos_id_from_tokenizer_config(&bytes, vocab, "tokenizer_config.json")?);
    }
    if let Some(&bad) = ids.iter().find(|t| t.index() >= vocab.n_tokens()) {
        return Err(eos_error(
            &dir.display().to_string(),
            format!("EOS id {bad} is past the vocabulary's {} tokens", vocab.n_tokens()),
        ));
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}
