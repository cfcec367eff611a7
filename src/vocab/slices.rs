//! Lexical slices: precomputed masks for lexical contexts where most tokens are allowed.
//!
//! Inside a JSON string any byte except `"`, `\` and control bytes continues the string, so at
//! such a state ~95% of the vocabulary is allowed — the most expensive masks for a plain trie
//! walk. The [`StringSlice`] classifies every token once by what it does to a string body entered
//! at a character boundary:
//!
//! - it stays inside the string (plain content, valid escapes, a valid prefix of a multi-byte
//!   character or of an escape), or closes it exactly at its last byte: allowed from *every*
//!   unconstrained string state, whatever the context → the `inside` bitset;
//! - it closes the string and goes on (`",`, `"}`, `":{"`): allowed iff the bytes after the
//!   quote are allowed after the string → those suffixes go into the small `exits` trie, walked
//!   from the state right after the closing quote;
//! - it is refused inside the string (a control byte, a bad escape, invalid UTF-8): never allowed.
//!
//! So a mask inside a string is one bitset copy plus a walk over a few hundred suffix nodes,
//! instead of a walk over the ~300k-node vocabulary trie. This is llguidance's "slices" idea
//! pushed one step further (XGrammar's context-independent tokens for the one lexeme that
//! matters most).
//!
//! Invariant: `inside`, the tokens of `exits` and the refused tokens partition the text tokens;
//! `safe ⊆ inside`, and `rest` holds exactly the text tokens outside `safe`.

use super::{TokTrie, TokenKind, Vocabulary};
use crate::json::JsonGrammar;
use crate::mask::TokenMask;
use crate::recognizer::ByteLogic;
use crate::token::TokenId;

/// The vocabulary classified for the inside of an unconstrained JSON string.
#[derive(Debug)]
pub struct StringSlice {
    /// Tokens whose bytes are complete UTF-8 characters, none of them `"`, `\` or < 0x20:
    /// each of them continues any unconstrained JSON string and leaves it at a char boundary.
    pub safe: TokenMask,
    /// All text tokens outside `safe`, in a trie of their own.
    pub rest: TokTrie,
    /// Tokens allowed from any unconstrained string state at a character boundary, whatever
    /// follows the string: `safe`, plus tokens that stay inside the string or close it exactly
    /// at their last byte.
    pub inside: TokenMask,
    /// For tokens that close the string and continue: the bytes after the closing quote, each
    /// carrying the token ids that end that way. Walk it from the state after the quote.
    pub exits: TokTrie,
}

/// True for tokens that are plain JSON string content on their own.
pub fn is_string_safe(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
        && std::str::from_utf8(bytes).is_ok()
}

/// What a token does to a string body entered at a character boundary.
enum StringEffect {
    /// Stays inside or closes exactly at the end.
    Inside,
    /// Closes the string at byte `at` (the quote) and continues.
    Exit { at: usize },
    /// Refused inside the string.
    Refused,
}

fn classify(g: &JsonGrammar, start: &crate::json::JsonState, bytes: &[u8]) -> StringEffect {
    let mut s = *start;
    for (i, &b) in bytes.iter().enumerate() {
        match g.step(&s, b) {
            Some(n) => {
                if !JsonGrammar::in_string_body(&n) {
                    return if i + 1 == bytes.len() {
                        StringEffect::Inside
                    } else {
                        StringEffect::Exit { at: i }
                    };
                }
                s = n;
            }
            None => return StringEffect::Refused,
        }
    }
    StringEffect::Inside
}

impl StringSlice {
    pub(crate) fn build(vocab: &Vocabulary) -> StringSlice {
        let (g, start) = JsonGrammar::string_probe();
        let mut safe = TokenMask::new(vocab.n_vocab());
        let mut inside = TokenMask::new(vocab.n_vocab());
        let mut rest: Vec<(TokenId, &[u8])> = Vec::new();
        let mut exits: Vec<(TokenId, &[u8])> = Vec::new();
        for i in 0..vocab.n_tokens() {
            let t = TokenId::from_index(i);
            if vocab.kind(t) != TokenKind::Text {
                continue;
            }
            let b = vocab.token_bytes(t);
            if is_string_safe(b) {
                safe.insert(t);
                inside.insert(t);
                continue;
            }
            rest.push((t, b));
            match classify(&g, &start, b) {
                StringEffect::Inside => inside.insert(t),
                StringEffect::Exit { at } => exits.push((t, &b[at + 1..])),
                StringEffect::Refused => {}
            }
        }
        StringSlice { safe, rest: TokTrie::build(rest), inside, exits: TokTrie::build(exits) }
    }
}
