//! Lexical slices: precomputed masks for lexical contexts where most tokens are allowed.
//!
//! Inside a JSON string any byte except `"`, `\` and control bytes continues the string, so at
//! such a state ~90% of the vocabulary is allowed — the expensive masks for a plain trie walk.
//! The [`StringSlice`] splits the vocabulary once into the tokens made only of string-safe
//! characters (allowed as one block by copying a bitset) and the rest (walked, in a trie of
//! their own). This is llguidance's "slices" idea for the one slice JSON needs.
//!
//! Invariant: `safe` and the tokens of `rest` partition the text tokens of the vocabulary.

use super::{TokTrie, TokenKind, Vocabulary};
use crate::mask::TokenMask;
use crate::token::TokenId;

/// The vocabulary split for the inside of a JSON string.
#[derive(Debug)]
pub struct StringSlice {
    /// Tokens whose bytes are complete UTF-8 characters, none of them `"`, `\` or < 0x20:
    /// each of them continues any unconstrained JSON string and leaves it at a char boundary.
    pub safe: TokenMask,
    /// All other text tokens.
    pub rest: TokTrie,
}

/// True for tokens that are plain JSON string content on their own.
pub fn is_string_safe(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
        && std::str::from_utf8(bytes).is_ok()
}

impl StringSlice {
    pub(crate) fn build(vocab: &Vocabulary) -> StringSlice {
        let mut safe = TokenMask::new(vocab.n_vocab());
        let mut rest: Vec<(TokenId, &[u8])> = Vec::new();
        for i in 0..vocab.n_tokens() {
            let t = TokenId::from_index(i);
            if vocab.kind(t) != TokenKind::Text {
                continue;
            }
            let b = vocab.token_bytes(t);
            if is_string_safe(b) {
                safe.insert(t);
            } else {
                rest.push((t, b));
            }
        }
        StringSlice { safe, rest: TokTrie::build(rest) }
    }
}
