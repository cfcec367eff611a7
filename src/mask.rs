//! The allow-mask over a vocabulary: one bit per token id.
//!
//! Every constraint engine fills a [`TokenMask`]; the sampler consumes one. The storage is a
//! bitset of `u32` words — the layout GPU apply-kernels read — and the `&[bool]` and additive
//! `f32` bias forms are exports for callers that want them, never the storage.
//!
//! # Layout (stated once, relied on everywhere)
//! Token `t` is bit `t % 32` (least significant bit first) of word `t / 32`. A mask of `n` tokens
//! has `ceil(n / 32)` words; the bits past `n` in the last word are always zero.

use crate::token::TokenId;

/// Bits per storage word.
pub const WORD_BITS: usize = 32;
const _: () = assert!(WORD_BITS == u32::BITS as usize);
const _: () = assert!(std::mem::size_of::<u32>() * 8 == WORD_BITS);

/// Number of `u32` words needed for `n_vocab` bits.
#[inline]
pub const fn words_for(n_vocab: usize) -> usize {
    n_vocab.div_ceil(WORD_BITS)
}

/// A vocabulary-sized set of allowed token ids.
///
/// Invariant: bits at positions `>= len()` are zero, so `count()` and word-level operations
/// never see padding.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenMask {
    words: Vec<u32>,
    len: usize,
}

impl TokenMask {
    /// An all-forbidden mask over `n_vocab` tokens.
    pub fn new(n_vocab: usize) -> TokenMask {
        TokenMask { words: vec![0; words_for(n_vocab)], len: n_vocab }
    }

    /// An all-allowed mask over `n_vocab` tokens.
    pub fn full(n_vocab: usize) -> TokenMask {
        let mut m = TokenMask::new(n_vocab);
        m.set_all();
        m
    }

    /// Number of tokens the mask covers (the logits width).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the mask covers zero tokens.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The storage words (layout in the module docs).
    #[inline]
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The storage words, mutable. Callers must keep the bits past `len()` zero.
    #[inline]
    pub fn words_mut(&mut self) -> &mut [u32] {
        &mut self.words
    }

    /// Is token `t` allowed? Ids past the end are never allowed.
    #[inline]
    pub fn contains(&self, t: TokenId) -> bool {
        let i = t.index();
        i < self.len && (self.words[i / WORD_BITS] >> (i % WORD_BITS)) & 1 != 0
    }

    /// Allow token `t`.
    ///
    /// # Panics
    /// Panics if `t` is out of range.
    #[inline]
    pub fn insert(&mut self, t: TokenId) {
        let i = t.index();
        assert!(i < self.len, "token {t:?} out of range for a mask of {}", self.len);
        self.words[i / WORD_BITS] |= 1 << (i % WORD_BITS);
    }

    /// Forbid token `t` (no-op when out of range).
    #[inline]
    pub fn remove(&mut self, t: TokenId) {
        let i = t.index();
        if i < self.len {
            self.words[i / WORD_BITS] &= !(1 << (i % WORD_BITS));
        }
    }

    /// Forbid every token.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Allow every token.
    pub fn set_all(&mut self) {
        self.words.fill(u32::MAX);
        self.trim_tail();
    }

    /// Number of allowed tokens.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True when no token is allowed.
    pub fn is_none_allowed(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The allowed token ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(TokenId::from_index(wi * WORD_BITS + b))
            })
        })
    }

    /// `self |= other`.
    ///
    /// # Panics
    /// Panics if the lengths differ.
    pub fn union_with(&mut self, other: &TokenMask) {
        assert_eq!(self.len, other.len, "mask length mismatch");
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// `self &= other`.
    ///
    /// # Panics
    /// Panics if the lengths differ.
    pub fn intersect_with(&mut self, other: &TokenMask) {
        assert_eq!(self.len, other.len, "mask length mismatch");
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// Copy `other` into `self` without reallocating.
    ///
    /// # Panics
    /// Panics if the lengths differ.
    pub fn copy_from(&mut self, other: &TokenMask) {
        assert_eq!(self.len, other.len, "mask length mismatch");
        self.words.copy_from_slice(&other.words);
    }

    /// The mask as one `bool` per token.
    pub fn to_bools(&self) -> Vec<bool> {
        let mut v = vec![false; self.len];
        self.write_bools(&mut v);
        v
    }

    /// Write one `bool` per token into `out` (`out.len()` must equal `len()`).
    ///
    /// # Panics
    /// Panics if `out.len() != self.len()`.
    pub fn write_bools(&self, out: &mut [bool]) {
        assert_eq!(out.len(), self.len, "bool buffer length mismatch");
        for (chunk, &w) in out.chunks_mut(WORD_BITS).zip(&self.words) {
            for (j, b) in chunk.iter_mut().enumerate() {
                *b = (w >> j) & 1 != 0;
            }
        }
    }

    /// The additive logit bias of a masked argmax: `0.0` where allowed, `-inf` where forbidden.
    pub fn to_bias(&self) -> Vec<f32> {
        let mut v = vec![0.0; self.len];
        self.write_bias(&mut v);
        v
    }

    /// Write the additive bias (`0.0` allowed, `-inf` forbidden) into a reusable buffer.
    ///
    /// # Panics
    /// Panics if `out.len() != self.len()`.
    pub fn write_bias(&self, out: &mut [f32]) {
        assert_eq!(out.len(), self.len, "bias buffer length mismatch");
        for (chunk, &w) in out.chunks_mut(WORD_BITS).zip(&self.words) {
            if w == u32::MAX {
                chunk.fill(0.0);
            } else if w == 0 {
                chunk.fill(f32::NEG_INFINITY);
            } else {
                for (j, b) in chunk.iter_mut().enumerate() {
                    *b = if (w >> j) & 1 != 0 { 0.0 } else { f32::NEG_INFINITY };
                }
            }
        }
    }

    /// Build a mask from one `bool` per token.
    pub fn from_bools(bools: &[bool]) -> TokenMask {
        let mut m = TokenMask::new(bools.len());
        for (i, &b) in bools.iter().enumerate() {
            if b {
                m.words[i / WORD_BITS] |= 1 << (i % WORD_BITS);
            }
        }
        m
    }

    fn trim_tail(&mut self) {
        let rem = self.len % WORD_BITS;
        if rem != 0 {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u32 << rem) - 1;
            }
        }
    }
}

impl std::fmt::Debug for TokenMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenMask({}/{} allowed", self.count(), self.len)?;
        let first: Vec<u32> = self.iter().take(8).map(|t| t.0).collect();
        if !first.is_empty() {
            write!(f, ": {first:?}")?;
            if self.count() > first.len() {
                write!(f, "…")?;
            }
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_bits_stay_zero() {
        let mut m = TokenMask::full(33);
        assert_eq!(m.words().len(), 2);
        assert_eq!(m.words()[1], 1);
        assert_eq!(m.count(), 33);
        m.remove(TokenId(32));
        assert_eq!(m.count(), 32);
        assert!(!m.contains(TokenId(40)));
    }

    #[test]
    fn exports_agree() {
        let mut m = TokenMask::new(70);
        for t in [0u32, 5, 31, 32, 63, 69] {
            m.insert(TokenId(t));
        }
        let bools = m.to_bools();
        let bias = m.to_bias();
        for i in 0..70 {
            assert_eq!(bools[i], m.contains(TokenId(i as u32)));
            assert_eq!(bias[i] == 0.0, bools[i]);
            assert!(bools[i] || bias[i] == f32::NEG_INFINITY);
        }
        assert_eq!(TokenMask::from_bools(&bools), m);
        let ids: Vec<u32> = m.iter().map(|t| t.0).collect();
        assert_eq!(ids, vec![0, 5, 31, 32, 63, 69]);
    }

    #[test]
    fn set_operations() {
        let mut a = TokenMask::new(100);
        let mut b = TokenMask::new(100);
        a.insert(TokenId(1));
        a.insert(TokenId(50));
        b.insert(TokenId(50));
        b.insert(TokenId(99));
        let mut u = a.clone();
        u.union_with(&b);
        assert_eq!(u.count(), 3);
        let mut i = a.clone();
        i.intersect_with(&b);
        assert_eq!(i.iter().map(|t| t.0).collect::<Vec<_>>(), vec![50]);
        i.clear();
        assert!(i.is_none_allowed());
    }
}
