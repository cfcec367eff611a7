//! Token ids: the one newtype every module passes around.
//!
//! A token id is an index into the model's logits row. It is a `u32` on the wire (tokenizers,
//! MLX arrays, GPU kernels all use 32-bit ids); the newtype keeps it from being confused with
//! byte offsets, trie node indices or counts. Numeric casts to `usize` happen here, in one place.

use std::fmt;

/// A token id: an index into the vocabulary (and into the logits row).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TokenId(pub u32);

impl TokenId {
    /// The id as an index into a logits row or a mask.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The id of the token at `index`.
    ///
    /// # Panics
    /// Panics if `index` does not fit in a `u32` (no vocabulary comes close).
    #[inline]
    pub fn from_index(index: usize) -> TokenId {
        TokenId(u32::try_from(index).expect("token index fits in u32"))
    }
}

impl fmt::Debug for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<u32> for TokenId {
    fn from(v: u32) -> Self {
        TokenId(v)
    }
}

impl From<TokenId> for u32 {
    fn from(t: TokenId) -> Self {
        t.0
    }
}
