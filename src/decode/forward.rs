//! Fast-forward (jump-forward) tokens: when the grammar admits exactly one continuation for the
//! next bytes, append their tokens without running the model.
//!
//! The engine reports the forced bytes ([`ConstraintEngine::forced_bytes`]); this module turns
//! them into tokens the model could itself have produced.
//!
//! # Canonical tokenization at the boundary
//! Tokenizing the forced bytes `F` on their own can disagree with how the tokenizer would split
//! `F` followed by the bytes the model writes next: a token may start inside `F` and run past its
//! end (after `{"na`, the forced `me":` could be followed by ` "`, and a vocabulary that has
//! `":"` or `": "` would put the boundary elsewhere). Emitting such a split would push the model
//! off its training distribution. So:
//!
//! 1. `F` is tokenized canonically with the vocabulary's tokenizer (cut to its longest valid
//!    UTF-8 prefix; a tokenizer-less vocabulary uses greedy longest match); if the tokens do not
//!    spell `F` exactly, nothing is fast-forwarded.
//! 2. **Back-off:** let `p` be the first byte position of `F` from which some vocabulary token
//!    runs past the end of `F` (a token that has `F[p..]` as a proper prefix). Only the canonical
//!    tokens that end at or before `p` are emitted; the model writes the rest under the mask,
//!    free to choose the longer token. If no position qualifies, all tokens are emitted.
//!
//! The check is vocabulary-wide, not grammar-aware (a longer token the grammar would refuse
//! still causes a back-off): conservative, never wrong in that direction. The left boundary is
//! not healed: tokens already emitted are kept, so `na`‧`me` stays two tokens where the
//! tokenizer would have written `name`.

use super::error::{DecodeError, DecodeErrorKind};
use crate::engine::ConstraintEngine;
use crate::token::TokenId;
use crate::vocab::{TokenKind, Vocabulary};

/// Fast-forward support for one vocabulary: the text tokens sorted by bytes (for "does a
/// longer token start with these bytes" and greedy longest match). Build once, share.
#[derive(Clone)]
pub struct FastForward {
    vocab: Vocabulary,
    sorted: Vec<TokenId>,
    max_len: usize,
}

impl std::fmt::Debug for FastForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FastForward({} tokens)", self.sorted.len())
    }
}

impl FastForward {
    /// Index the text tokens of `vocab`.
    pub fn new(vocab: &Vocabulary) -> FastForward {
        let mut sorted: Vec<TokenId> = (0..vocab.n_tokens())
            .map(TokenId::from_index)
            .filter(|&t| vocab.kind(t) == TokenKind::Text && !vocab.token_bytes(t).is_empty())
            .collect();
        sorted.sort_by(|&a, &b| vocab.token_bytes(a).cmp(vocab.token_bytes(b)).then(a.cmp(&b)));
        let max_len = sorted.iter().map(|&t| vocab.token_bytes(t).len()).max().unwrap_or(0);
        FastForward { vocab: vocab.clone(), sorted, max_len }
    }

    fn bytes(&self, t: TokenId) -> &[u8] {
        self.vocab.token_bytes(t)
    }

    /// First index in `sorted` whose bytes are `>= key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        self.sorted.partition_point(|&t| self.bytes(t) < key)
    }

    /// True when some token has `prefix` as a proper prefix (is strictly longer and starts with
    /// it).
    pub fn has_extension(&self, prefix: &[u8]) -> bool {
        let i = self.lower_bound(prefix);
        self.sorted[i..]
            .iter()
            .map(|&t| self.bytes(t))
            .take_while(|b| b.starts_with(prefix))
            .any(|b| b.len() > prefix.len())
    }

    /// The token whose bytes are exactly `bytes` (lowest id), if any.
    pub fn exact(&self, bytes: &[u8]) -> Option<TokenId> {
        let i = self.lower_bound(bytes);
        self.sorted.get(i).copied().filter(|&t| self.bytes(t) == bytes)
    }

    /// Canonical tokens of `bytes` (see the module docs, step 1), or `None` when they cannot be
    /// tokenized to exactly these bytes.
    fn canonical(&self, bytes: &[u8], out: &mut Vec<TokenId>) -> Option<usize> {
        out.clear();
        if self.vocab.tokenizer().is_some() {
            let valid = match std::str::from_utf8(bytes) {
                Ok(s) => s,
                Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?,
            };
            if valid.is_empty() {
                return Some(0);
            }
            let ids = self.vocab.encode_continuation(valid).ok()?;
            let mut spelled = 0;
            for &t in &ids {
                let b = self.bytes(t);
                if self.vocab.kind(t) != TokenKind::Text
                    || !valid.as_bytes()[spelled..].starts_with(b)
                {
                    return None;
                }
                spelled += b.len();
            }
            if spelled != valid.len() {
                return None;
            }
            out.extend_from_slice(&ids);
            Some(spelled)
        } else {
            let mut pos = 0;
            while pos < bytes.len() {
                let longest = (1..=self.max_len.min(bytes.len() - pos))
                    .rev()
                    .find_map(|l| self.exact(&bytes[pos..pos + l]))?;
                pos += self.bytes(longest).len();
                out.push(longest);
            }
            Some(pos)
        }
    }

    /// The tokens to fast-forward for `forced` bytes: canonical tokens, backed off at the
    /// boundary (module docs). Writes them to `out` (cleared first) and returns how many bytes
    /// they cover.
    pub fn tokens_for(&self, forced: &[u8], out: &mut Vec<TokenId>) -> usize {
        let Some(len) = self.canonical(forced, out) else {
            out.clear();
            return 0;
        };
        // The first position from which a vocabulary token could run past the end of `forced`.
        let from = forced.len().saturating_sub(self.max_len);
        let p = (from..forced.len()).find(|&p| self.has_extension(&forced[p..])).unwrap_or(len);
        let mut end = 0;
        let mut keep = 0;
        for &t in out.iter() {
            let e = end + self.bytes(t).len();
            if e > p.min(len) {
                break;
            }
            end = e;
            keep += 1;
        }
        out.truncate(keep);
        end
    }

    /// The fast-forward tokens at the engine's current state: its forced bytes, then
    /// [`FastForward::tokens_for`]. `bytes` is scratch. The engine is not advanced.
    ///
    /// # Errors
    /// [`DecodeErrorKind::WidthMismatch`] when the engine's vocabulary is not this one's width.
    pub fn forced_tokens(
        &self,
        engine: &dyn ConstraintEngine,
        bytes: &mut Vec<u8>,
        out: &mut Vec<TokenId>,
    ) -> Result<usize, DecodeError> {
        if engine.vocab().n_vocab() != self.vocab.n_vocab() {
            return Err(DecodeError::new(DecodeErrorKind::WidthMismatch {
                model: engine.vocab().n_vocab(),
                vocab: self.vocab.n_vocab(),
            }));
        }
        engine.forced_bytes(bytes);
        out.clear();
        if bytes.is_empty() {
            return Ok(0);
        }
        Ok(self.tokens_for(bytes, out))
    }
}
