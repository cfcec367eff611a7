//! The greedy paths (temperature 0): plain argmax, masked argmax, argmax after penalties.
//!
//! Greedy decoding consults no random number generator, so its output is a pure function of
//! the logits, the mask and the penalty window: byte-identical across runs. Ties go to the
//! lowest token id, the rule of `mx.argmax`, `numpy.argmax` and `torch.argmax` alike.

use super::config::PenaltyConfig;
use super::error::{SampleError, SampleErrorKind};
use super::filters::max_checked;
use super::logits::{bf16_to_f32, Logits};
use super::penalties::apply_penalties;
use super::SamplerScratch;
use crate::mask::{TokenMask, WORD_BITS};
use crate::token::TokenId;

/// The index of the largest logit; ties go to the lowest index.
///
/// # Errors
/// Empty row, a NaN logit (named), or every logit `-inf`.
///
/// # Example
/// ```
/// use grammask::{sampler::{argmax, Logits}, TokenId};
/// assert_eq!(argmax(Logits::F32(&[1.0, 3.0, 3.0])).unwrap(), TokenId(1));
/// ```
pub fn argmax(logits: Logits<'_>) -> Result<TokenId, SampleError> {
    match logits {
        Logits::F32(v) => argmax_f32(v),
        Logits::Bf16(v) => argmax_iter(v.iter().map(|&b| bf16_to_f32(b))),
    }
}

/// Argmax of an `f32` row: a vectorisable max (with NaN check), then the first position that
/// holds it.
pub(crate) fn argmax_f32(v: &[f32]) -> Result<TokenId, SampleError> {
    if v.is_empty() {
        return Err(SampleError::new(SampleErrorKind::EmptyLogits));
    }
    let max = max_checked(v)?;
    if max == f32::NEG_INFINITY {
        return Err(SampleError::all_forbidden());
    }
    Ok(TokenId::from_index(first_equal(v, max)))
}

/// The first index holding `max` (0 if none): a vectorised test per 64-entry chunk, then a
/// scan of the chunk that has it (an early-exit scan of the whole row does not vectorise).
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn first_equal(v: &[f32], max: f32) -> usize {
    for (ci, c) in v.chunks(64).enumerate() {
        if c.iter().fold(false, |a, &x| a | (x == max)) {
            return ci * 64 + c.iter().position(|&x| x == max).unwrap_or(0);
        }
    }
    0
}

fn argmax_iter(it: impl Iterator<Item = f32>) -> Result<TokenId, SampleError> {
    let mut best = f32::NEG_INFINITY;
    let mut best_i = None;
    let mut n = 0;
    for (i, x) in it.enumerate() {
        n += 1;
        if x.is_nan() {
            return Err(SampleError::nan(i));
        }
        if x > best {
            best = x;
            best_i = Some(i);
        }
    }
    if n == 0 {
        return Err(SampleError::new(SampleErrorKind::EmptyLogits));
    }
    best_i.map(TokenId::from_index).ok_or_else(SampleError::all_forbidden)
}

/// Check that `mask` covers exactly the logits row.
pub(crate) fn check_mask(mask: &TokenMask, n: usize) -> Result<(), SampleError> {
    if n == 0 {
        return Err(SampleError::new(SampleErrorKind::EmptyLogits));
    }
    if mask.len() != n {
        return Err(SampleError::new(SampleErrorKind::LengthMismatch {
            mask: mask.len(),
            logits: n,
        }));
    }
    Ok(())
}

/// Greedy under a constraint: the argmax of `logits + bias` where `bias` is `0` for allowed
/// and `-inf` for forbidden tokens ([`TokenMask::write_bias`]), computed on the host without
/// materialising the bias. Ties go to the lowest allowed index. Forbidden tokens are never
/// read, so a NaN there is not an error.
///
/// # Errors
/// Length mismatch, a NaN allowed logit, no allowed token or every allowed logit `-inf`.
///
/// # Example
/// ```
/// use grammask::{sampler::{apply_mask_argmax, Logits}, TokenId, TokenMask};
/// let mut mask = TokenMask::full(3);
/// mask.remove(TokenId(1));
/// assert_eq!(apply_mask_argmax(Logits::F32(&[1.0, 9.0, 2.0]), &mask).unwrap(), TokenId(2));
/// ```
pub fn apply_mask_argmax(logits: Logits<'_>, mask: &TokenMask) -> Result<TokenId, SampleError> {
    check_mask(mask, logits.len())?;
    let best = match logits {
        Logits::F32(v) => masked_argmax_f32(mask, v)?,
        Logits::Bf16(v) => masked_argmax_by(mask, |i| bf16_to_f32(v[i]))?,
    };
    best.ok_or_else(SampleError::all_forbidden)
}

/// [`masked_argmax_by`] for an `f32` row: a word whose ids are all allowed is one vectorised
/// maximum over its 32 values (the same first-maximum rule; a word holding a NaN goes through
/// the id-by-id walk, which reports it in order). Masks from grammars allow long runs.
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn masked_argmax_f32(mask: &TokenMask, v: &[f32]) -> Result<Option<TokenId>, SampleError> {
    let mut best = f32::NEG_INFINITY;
    let mut best_i = None;
    for (wi, &w) in mask.words().iter().enumerate() {
        let base = wi * WORD_BITS;
        if w == u32::MAX && base + WORD_BITS <= v.len() {
            let c = &v[base..base + WORD_BITS];
            let mut m = f32::NEG_INFINITY;
            let mut nan = false;
            for &x in c {
                nan |= x.is_nan();
                m = if x > m { x } else { m };
            }
            if !nan {
                if m > best {
                    best = m;
                    best_i = c.iter().position(|&x| x == m).map(|j| base + j);
                }
                continue;
            }
        }
        walk_word(w, base, |i| v[i], &mut best, &mut best_i)?;
    }
    Ok(best_i.map(TokenId::from_index))
}

/// Masked argmax over the values read through `get`, visiting only the allowed ids (word by
/// word, skipping all-zero words).
fn masked_argmax_by(
    mask: &TokenMask,
    get: impl Fn(usize) -> f32,
) -> Result<Option<TokenId>, SampleError> {
    let mut best = f32::NEG_INFINITY;
    let mut best_i = None;
    for (wi, &w) in mask.words().iter().enumerate() {
        walk_word(w, wi * WORD_BITS, &get, &mut best, &mut best_i)?;
    }
    Ok(best_i.map(TokenId::from_index))
}

/// The allowed ids of one mask word (`base` its first id) in order: a larger value than
/// `best` takes its place (the first maximum wins); a NaN is an error naming its id.
#[inline(always)]
fn walk_word(
    w: u32,
    base: usize,
    get: impl Fn(usize) -> f32,
    best: &mut f32,
    best_i: &mut Option<usize>,
) -> Result<(), SampleError> {
    let mut bits = w;
    while bits != 0 {
        let i = base + bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let x = get(i);
        if x.is_nan() {
            return Err(SampleError::nan(i));
        }
        if x > *best {
            *best = x;
            *best_i = Some(i);
        }
    }
    Ok(())
}

/// Greedy with penalties (and optionally a mask): copy the row into `scratch`, apply
/// [`apply_penalties`], then the (masked) argmax. With penalties at identity this is exactly
/// [`argmax`] / [`apply_mask_argmax`] and copies nothing.
///
/// # Errors
/// As [`apply_mask_argmax`], plus an invalid [`PenaltyConfig`] or a NaN produced by the bias.
pub fn argmax_with_penalties(
    logits: Logits<'_>,
    penalties: &PenaltyConfig,
    recent: &[TokenId],
    mask: Option<&TokenMask>,
    scratch: &mut SamplerScratch,
) -> Result<TokenId, SampleError> {
    penalties.validate()?;
    if !penalties.penalties_active() {
        return match mask {
            Some(m) => apply_mask_argmax(logits, m),
            None => argmax(logits),
        };
    }
    let n = logits.len();
    if let Some(m) = mask {
        check_mask(m, n)?;
    }
    let work = scratch.load(logits);
    apply_penalties(work, recent, penalties, mask);
    match mask {
        Some(m) => apply_mask_argmax(Logits::F32(work), m),
        None => argmax_f32(work),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time masked argmax against the id-by-id walk it stands in for: fully
    /// allowed words, partial ones, ties inside and across words (the first id wins), `-inf`
    /// words, a NaN inside a fully allowed word after a larger value (reported in order), and
    /// a ragged last word.
    #[test]
    fn word_at_a_time_masked_argmax_equals_the_walk() {
        let n = 32 * 9 + 7;
        let mut v: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32) / 10.0).collect();
        v[70] = 50.0;
        v[100] = 50.0; // a tie in a later word
        v[33] = 50.0; // the first of the tie, in a word that is only partly allowed below
        for x in &mut v[128..160] {
            *x = f32::NEG_INFINITY;
        }
        let mut mask = TokenMask::full(n);
        for i in (32..64).step_by(3) {
            mask.remove(TokenId::from_index(i));
        }
        for (allow33, nan_at) in [(true, None), (false, None), (true, Some(200)), (false, Some(5))]
        {
            let mut m = mask.clone();
            if allow33 {
                m.insert(TokenId::from_index(33));
            } else {
                m.remove(TokenId::from_index(33));
            }
            let mut w = v.clone();
            if let Some(i) = nan_at {
                w[i] = f32::NAN;
            }
            let walk = masked_argmax_by(&m, |i| w[i]).map_err(|e| e.to_string());
            let fast = masked_argmax_f32(&m, &w).map_err(|e| e.to_string());
            assert_eq!(fast, walk, "allow33 {allow33} nan {nan_at:?}");
        }
        let all_inf = vec![f32::NEG_INFINITY; 64];
        assert_eq!(masked_argmax_f32(&TokenMask::full(64), &all_inf).unwrap(), None);
    }

    #[test]
    fn first_equal_finds_the_first_maximum_in_any_chunk() {
        let mut v = vec![0.0f32; 1000];
        for at in [0, 63, 64, 500, 999] {
            v.fill(0.0);
            v[at] = 2.0;
            v[999.min(at + 70)] = 2.0;
            assert_eq!(first_equal(&v, 2.0), at);
        }
    }
}
