//! Exact hierarchical top-K candidates (seed 003) and the candidate-set sampling path.
//!
//! [`top_k_candidates`] splits a logits row into groups of [`CANDIDATE_GROUP`] (2,048) tokens,
//! the last group possibly shorter, takes an exact top-K of every group, merges the group
//! winners and takes the exact global top-K, token ids carried through. Order: value
//! descending, then id ascending (the sort-based top-k's tie rule); `-inf` (masked) entries are
//! never candidates. This is the shape a device selector has (per-group sort + merge), so a GPU
//! or NPU port only changes where it runs.
//!
//! [`sample_candidates`] is the sampling path built on it: when `temperature > 0` and
//! `0 < top_k ≤` [`MAX_CANDIDATES`], temperature, top-p, min-p, validation and the draw run on
//! the K candidates only, and the full vocabulary is read once (by the selector). The result
//! has exactly the distribution of the full path: top-k keeps these K tokens; min-p only needs
//! the maximum; top-p needs the full-row partition function `Z = Σ exp(x/T − max/T)`, which
//! is bracketed by `Σ_candidates ≤ Z ≤ Σ_candidates + (finite − K) · e_K` (every other token is
//! at most the K-th candidate) and computed with one extra exp-sum pass only when the bracket
//! does not decide the cut.
//!
//! It keeps exactly the full path's set: the full path ranks the `f32` values `e = exp(x·s −
//! m)`, this path ranks logits, and `exp` is monotone (checked over every `f32` in `[-104, 0]`),
//! so the orders agree except between logits whose `e` is equal; the path selects K + 1
//! candidates and hands a row whose K-th and (K+1)-th `e` are equal to the full path, which
//! breaks that tie by id. Top-p compares the exact fixed-point sums of `sampler::mass` (the
//! bracket is exact at both ends), min-p the same `f32` product as the full path.

use super::config::SamplerConfig;
use super::error::SampleError;
use super::exp::exp;
use super::filters::exp_sum;
use super::mass::{fast_decision, top_p_drops, Decision, Fixed};
use super::pcg::Pcg32;
use crate::token::TokenId;

/// Group length of the hierarchical selector.
pub const CANDIDATE_GROUP: usize = 2048;

/// The largest `top_k` served by the candidate path (the device selector's capacity in seed
/// 003); larger values use the full path.
pub const MAX_CANDIDATES: usize = 32;

/// One top-K candidate: a token and its logit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// The token id.
    pub token: TokenId,
    /// Its (masked, penalised) logit.
    pub value: f32,
}

/// Reusable buffers of the selector and the candidate path (a few KiB; no vocabulary-sized
/// buffer).
#[derive(Clone, Debug, Default)]
pub struct TopKScratch {
    group: Vec<u64>,
    maxima: Vec<f32>,
    sel: Vec<f32>,
    merged: Vec<u64>,
    out: Vec<Candidate>,
    e: Vec<f32>,
    kept: Vec<(u32, f32)>,
    finite: usize,
}

impl TopKScratch {
    /// Empty buffers.
    pub fn new() -> TopKScratch {
        TopKScratch::default()
    }

    /// The number of finite (not `-inf`) entries seen by the last [`top_k_candidates`] call.
    pub fn finite_count(&self) -> usize {
        self.finite
    }
}

/// Order-preserving packed key: ascending key = descending value, then ascending id.
#[inline]
fn key(x: f32, id: usize) -> u64 {
    // `+ 0.0` turns `-0.0` into `0.0`, which compares equal to it.
    let b = (x + 0.0).to_bits();
    let ord = if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 };
    (u64::from(!ord) << 32) | id as u64
}

#[inline]
fn key_value(k: u64) -> f32 {
    let ord = !((k >> 32) as u32);
    f32::from_bits(if ord & 0x8000_0000 != 0 { ord & 0x7fff_ffff } else { !ord })
}

/// Exact top-`k` of one group, appended to `out` (unsorted). Returns the group's count of
/// finite entries and whether it holds a NaN.
///
/// A first pass takes the maximum of every chunk of 16; the K-th largest of those maxima is a
/// lower bound for the group's K-th value, so only chunks reaching it are walked. Entries enter
/// a buffer of up to `2k` keys only when they beat the current K-th best; a full buffer is cut
/// back to its best `k` by selection.
fn group_top_k(
    x: &[f32],
    base: usize,
    k: usize,
    bufs: (&mut Vec<u64>, &mut Vec<f32>, &mut Vec<f32>),
    out: &mut Vec<u64>,
) -> (usize, bool) {
    let (buf, maxima, sel) = bufs;
    buf.clear();
    let mut thr_val = f32::NEG_INFINITY;
    let mut thr_key = u64::MAX;
    let mut finite = 0usize;
    let mut nan = false;
    let chunks = x.chunks_exact(16);
    let tail_start = x.len() - chunks.remainder().len();
    let visit = |i: usize, v: f32, buf: &mut Vec<u64>, thr_val: &mut f32, thr_key: &mut u64| {
        if v > f32::NEG_INFINITY && v >= *thr_val {
            let kk = key(v, base + i);
            if kk < *thr_key {
                buf.push(kk);
                if buf.len() == 2 * k {
                    buf.select_nth_unstable(k - 1);
                    buf.truncate(k);
                    // After the selection `buf[k - 1]` is the largest kept key: the K-th best.
                    *thr_key = buf[k - 1];
                    *thr_val = key_value(*thr_key);
                }
            }
        }
    };
    // Phase 1: the maximum of every chunk of 16 (plus the finite count and the NaN flag).
    maxima.clear();
    for c in chunks {
        let mut m = [f32::NEG_INFINITY; 8];
        let mut fin = [0u32; 8];
        let mut bad = [0u32; 8];
        for j in 0..16 {
            let v = c[j];
            m[j % 8] = if v > m[j % 8] { v } else { m[j % 8] };
            fin[j % 8] += u32::from(v > f32::NEG_INFINITY);
            bad[j % 8] |= u32::from((v.to_bits() & 0x7fff_ffff) > 0x7f80_0000);
        }
        finite += fin.iter().sum::<u32>() as usize;
        nan |= bad.iter().any(|&b| b != 0);
        maxima.push(m.iter().fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a }));
    }
    // The K-th largest chunk maximum bounds the group's K-th value from below (K distinct
    // entries reach it), so chunks whose maximum is below it cannot contribute.
    if maxima.len() >= k {
        sel.clear();
        sel.extend_from_slice(maxima);
        sel.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
        thr_val = sel[k - 1];
    }
    // Phase 2: only the chunks that can still enter (the group is L1-resident by now).
    for (ci, &mx) in maxima.iter().enumerate() {
        if mx > f32::NEG_INFINITY && mx >= thr_val {
            for (j, &v) in x[ci * 16..ci * 16 + 16].iter().enumerate() {
                visit(ci * 16 + j, v, buf, &mut thr_val, &mut thr_key);
            }
        }
    }
    for (j, &v) in x[tail_start..].iter().enumerate() {
        finite += usize::from(v > f32::NEG_INFINITY);
        nan |= v.is_nan();
        visit(tail_start + j, v, buf, &mut thr_val, &mut thr_key);
    }
    if buf.len() > k {
        buf.select_nth_unstable(k - 1);
        buf.truncate(k);
    }
    out.extend_from_slice(buf);
    (finite, nan)
}

/// Exact top-`k` of `values` (value descending, id ascending), `-inf` entries excluded, by
/// groups of [`CANDIDATE_GROUP`]. Returns fewer than `k` candidates when fewer entries are
/// finite (none when all are `-inf`); `k == 0` returns none.
///
/// # Errors
/// A NaN entry (the error names the first one).
///
/// # Example
/// ```
/// use grammask::sampler::{top_k_candidates, TopKScratch};
/// use grammask::TokenId;
/// let row = [0.5f32, 3.0, f32::NEG_INFINITY, 3.0, -1.0];
/// let mut s = TopKScratch::new();
/// let c = top_k_candidates(&row, 3, &mut s).unwrap();
/// let ids: Vec<TokenId> = c.iter().map(|c| c.token).collect();
/// assert_eq!(ids, [TokenId(1), TokenId(3), TokenId(0)]);
/// ```
pub fn top_k_candidates<'s>(
    values: &[f32],
    k: usize,
    scratch: &'s mut TopKScratch,
) -> Result<&'s [Candidate], SampleError> {
    top_k_candidates_grouped(values, k, CANDIDATE_GROUP, scratch)
}

/// [`top_k_candidates`] with an explicit group length (tests use small groups).
///
/// # Errors
/// As [`top_k_candidates`].
///
/// # Panics
/// When `group == 0`.
pub fn top_k_candidates_grouped<'s>(
    values: &[f32],
    k: usize,
    group: usize,
    scratch: &'s mut TopKScratch,
) -> Result<&'s [Candidate], SampleError> {
    assert!(group > 0, "group length must be positive");
    let TopKScratch { group: buf, maxima, sel, merged, out, finite, .. } = scratch;
    merged.clear();
    out.clear();
    *finite = 0;
    if k == 0 {
        return Ok(out);
    }
    let mut nan = false;
    for (g, x) in values.chunks(group).enumerate() {
        let (f, bad) = group_top_k(x, g * group, k, (buf, maxima, sel), merged);
        *finite += f;
        nan |= bad;
    }
    if nan {
        let i = values.iter().position(|v| v.is_nan()).unwrap_or(0);
        return Err(SampleError::nan(i));
    }
    // Exactness: a token outside its group's top-K has K tokens of its own group ranked ahead
    // of it, so it cannot be in the global top-K; hence the union of the group top-K sets
    // contains the global top-K, and the top-K of that union is the global top-K.
    if merged.len() > k {
        merged.select_nth_unstable(k - 1);
        merged.truncate(k);
    }
    merged.sort_unstable();
    out.extend(merged.iter().map(|&kk| Candidate {
        token: TokenId::from_index((kk & 0xffff_ffff) as usize),
        value: key_value(kk),
    }));
    Ok(out)
}

/// [`top_p_prefix`] from a fast `f64` partition function `z`: `None` when some group's
/// decision is within `sampler::mass`'s tolerance of the threshold (then the exact sums
/// decide).
fn top_p_prefix_fast(e: &[f32], top_p: f32, z: f64) -> Option<usize> {
    let mut above = 0.0f64;
    let mut i = 0;
    while i < e.len() {
        match fast_decision(above, z, top_p) {
            Decision::Sure(true) => return Some(i),
            Decision::Sure(false) => {}
            Decision::Close => return None,
        }
        let v = e[i];
        while i < e.len() && e[i] == v {
            above += f64::from(e[i]);
            i += 1;
        }
    }
    Some(e.len())
}

/// `Σ ⌊exp(x · s − m)⌋` over the whole row in the fixed point of `sampler::mass` (`-inf`
/// contributes 0): the exact partition function the top-p rule compares with.
fn exact_exp_total(x: &[f32], s: f32, m: f32, fixed: Fixed) -> u128 {
    x.iter().map(|&v| fixed.of(exp(v * s - m))).sum()
}

/// Number of leading candidates (in value order) that top-p keeps when the exact partition
/// function is `z`: a tied group is kept whole when the exact mass strictly above it is
/// `< top_p × z` (the rule of `top_p_in_place`).
fn top_p_prefix(e: &[f32], top_p: f32, z: u128, fixed: Fixed) -> usize {
    let mut above = 0u128;
    let mut i = 0;
    while i < e.len() {
        if top_p_drops(above, z, top_p) {
            return i;
        }
        let v = e[i];
        let mut j = i;
        while j < e.len() && e[j] == v {
            above += fixed.of(e[j]);
            j += 1;
        }
        i = j;
    }
    e.len()
}

/// The tokens the candidate path keeps and their unnormalised draw weights, in id order, into
/// `scratch.kept`; `Ok(false)` when the full path must decide instead (see
/// [`sample_candidates`]).
pub(crate) fn candidate_support(
    logits: &[f32],
    cfg: &SamplerConfig,
    scratch: &mut TopKScratch,
) -> Result<bool, SampleError> {
    let k = cfg.top_k;
    if k == 0 {
        return Ok(false);
    }
    let s = cfg.filter_scale();
    let inv_t = 1.0 / cfg.temperature;
    // One candidate more than K: the (K+1)-th tells whether the K-th value is tied (then the
    // full path, which breaks ties in `e` by id, decides) and bounds the rest of the row.
    let n_cands = top_k_candidates(logits, k + 1, scratch)?.len();
    if n_cands == 0 {
        return Err(SampleError::all_forbidden());
    }
    let TopKScratch { out, e, kept, finite, .. } = scratch;
    let m = out[0].value * s;
    let mt = out[0].value * inv_t;
    if m.is_infinite() || s.is_infinite() || mt.is_infinite() || inv_t.is_infinite() {
        return Ok(false);
    }
    // The same `exp` and the same arithmetic as the full path, unnormalised (`e[0]` is 1).
    e.clear();
    e.extend(out.iter().map(|c| exp(c.value * s - m)));
    if e.len() > k {
        // The full path ranks `e` (then ids); logits that differ but share an `e` at the cut
        // are its business. `exp` is monotone, so `e` is non-increasing here.
        if e[k] >= e[k - 1] {
            return Ok(false);
        }
    }
    let mut len = e.len().min(k);
    if cfg.min_p > 0.0 {
        // Full path: `e < e_max × min_p` is dropped.
        let cut = e[0] * cfg.min_p;
        len = len.min(e.iter().position(|&v| v < cut).unwrap_or(e.len()));
    }
    if cfg.top_p_active() {
        let fixed = Fixed::for_max(e[0]);
        let kk = e.len().min(k);
        let z_lo: u128 = e[..kk].iter().map(|&v| fixed.of(v)).sum();
        // Every token outside the K candidates is at most the (K+1)-th value.
        let rest = (*finite - kk) as u128;
        let bound = if e.len() > k { fixed.of(e[k]) } else { 0 };
        let z_hi = z_lo + rest * bound;
        let (a, b) = (
            top_p_prefix(&e[..kk], cfg.top_p, z_lo, fixed),
            top_p_prefix(&e[..kk], cfg.top_p, z_hi, fixed),
        );
        let keep = if a == b {
            a
        } else {
            // The bracket does not decide: the partition function, fast, then exact if close.
            top_p_prefix_fast(&e[..kk], cfg.top_p, exp_sum(logits, s, m)).unwrap_or_else(|| {
                top_p_prefix(&e[..kk], cfg.top_p, exact_exp_total(logits, s, m, fixed), fixed)
            })
        };
        len = len.min(keep.max(1));
    }
    // Draw in id order, as the full path's inverse CDF walks the row.
    kept.clear();
    if cfg.split_weights() {
        kept.extend(out[..len].iter().map(|c| (c.token.0, exp(c.value * inv_t - mt))));
    } else {
        kept.extend(out[..len].iter().zip(&e[..len]).map(|(c, &v)| (c.token.0, v)));
    }
    kept.sort_unstable_by_key(|&(t, _)| t);
    Ok(true)
}

/// One inverse-CDF draw over `kept` (id order, unnormalised weights).
pub(crate) fn draw_kept(kept: &[(u32, f32)], r: f32) -> TokenId {
    let total: f64 = kept.iter().map(|&(_, v)| f64::from(v)).sum();
    let target = f64::from(r) * total;
    let mut cum = 0.0f64;
    let mut last = kept[0].0;
    for &(t, v) in kept.iter() {
        if v > 0.0 {
            cum += f64::from(v);
            last = t;
            if cum > target {
                break;
            }
        }
    }
    TokenId(last)
}

/// The candidate-set sampling path: one draw from the K best tokens of `logits` (already
/// masked to `-inf` and penalised) with the config's temperature (and its placement), top-p and
/// min-p, `K = cfg.top_k`. Consumes exactly one `next_f32` of `rng`, like the full path.
///
/// Returns `Ok(None)` when the full path must decide instead: `top_k` is 0, the scaled
/// maximum is infinite (a `+inf` logit, or `1/T` overflowing), where the full path's limit
/// distribution applies, or the K-th and (K+1)-th candidates have the same `f32` probability
/// (the full path breaks that tie by id, over the whole row). Valid for any `top_k`; the host
/// pipeline uses it for `top_k ≤` [`MAX_CANDIDATES`].
///
/// # Errors
/// A NaN logit, or no finite logit ([`AllForbidden`](super::SampleErrorKind::AllForbidden)).
pub fn sample_candidates(
    logits: &[f32],
    cfg: &SamplerConfig,
    rng: &mut Pcg32,
    scratch: &mut TopKScratch,
) -> Result<Option<TokenId>, SampleError> {
    if !candidate_support(logits, cfg, scratch)? {
        return Ok(None);
    }
    Ok(Some(draw_kept(&scratch.kept, rng.next_f32())))
}

/// The kept tokens of the last successful [`candidate_support`], id order.
impl TopKScratch {
    pub(crate) fn kept(&self) -> &[(u32, f32)] {
        &self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_values() {
        let vals = [f32::MAX, 3.0, 1e-40, 0.0, -0.0, -1e-40, -2.0, f32::MIN];
        for w in vals.windows(2) {
            assert!(key(w[0], 0) <= key(w[1], 0), "{w:?}");
            assert_eq!(key_value(key(w[0], 5)), w[0] + 0.0);
        }
        assert!(key(1.0, 3) < key(1.0, 4));
    }

    #[test]
    fn prefix_keeps_tied_groups() {
        let e = [1.0f32, 0.5, 0.5, 0.25];
        let f = Fixed::for_max(1.0);
        let z: u128 = e.iter().map(|&v| f.of(v)).sum();
        assert_eq!(top_p_prefix(&e, 0.3, z, f), 1);
        assert_eq!(top_p_prefix(&e, 0.5, z, f), 3);
        assert_eq!(top_p_prefix(&e, 0.99, z, f), 4);
    }
}
