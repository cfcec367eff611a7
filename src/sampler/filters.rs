//! Steps 6–11 of the host pipeline on a probability row: stable softmax with temperature, the
//! three truncation filters (top-p → min-p → top-k, mlx-lm's `make_sampler` order), the
//! renormalisation and the inverse-CDF draw.
//!
//! Every function works in place on a caller-owned row and reuses a caller-owned key buffer, so
//! a decode step allocates nothing once the buffers have grown to the vocabulary size.
//!
//! Sorting uses packed `u64` keys: a non-negative `f32`'s bits order like its value, so
//! `(prob_bits << 32) | index` sorts by probability and then by index with one integer sort
//! (no comparator closure reading a second array).

use super::error::SampleError;
use super::exp::exp;
use super::mass::{top_p_drops, Fixed};
use multiversion::multiversion;

/// Turn (masked, penalised) logits into probabilities in place: `p[i] = exp(x[i]/T - max/T) / Σ`.
///
/// `inv_temperature` is `1 / T`. Follows the spec literally: `scaled = logit × (1/T)`, then the
/// max is subtracted (Milakov & Gimelshein 2018 style stable softmax), and `-inf` entries become
/// exactly `0.0`. When the scaled maximum is infinite (a `+inf` logit, or a temperature so small
/// that `1/T` overflows) the row becomes the limit distribution: uniform over the tokens that
/// hold the maximum logit.
///
/// # Errors
/// NaN logit (naming the first one), or every entry `-inf` ([`AllForbidden`]).
///
/// [`AllForbidden`]: super::SampleErrorKind::AllForbidden
pub fn softmax_in_place(x: &mut [f32], inv_temperature: f32) -> Result<(), SampleError> {
    let sum = exp_in_place(x, inv_temperature)?;
    scale(x, sum);
    Ok(())
}

/// The softmax without its division: `x[i] = exp(x[i]·s − max·s)` in place (so the maximum
/// becomes exactly 1 and `-inf` exactly 0), returning the `f64` sum. The same arithmetic, and
/// the same limit case (an infinite scaled maximum gives 1 on the maxima, 0 elsewhere), as
/// [`softmax_in_place`]: every path of the sampler ranks and filters these values.
///
/// # Errors
/// As [`softmax_in_place`].
pub(crate) fn exp_in_place(x: &mut [f32], s: f32) -> Result<f64, SampleError> {
    let max = max_checked(x)?;
    if max == f32::NEG_INFINITY {
        return Err(SampleError::all_forbidden());
    }
    let m = max * s;
    let mut sum = 0.0f64;
    // `1/T` itself can overflow (a subnormal temperature); then `0 × inf` would be NaN.
    if m.is_infinite() || s.is_infinite() {
        for v in x.iter_mut() {
            *v = if *v == max { 1.0 } else { 0.0 };
            sum += f64::from(*v);
        }
    } else {
        sum = exp_pass(x, s, m).iter().sum();
    }
    Ok(sum)
}

/// The draw weights of the kept tokens under [`AfterFilters`]: `w[i] = exp(x[i]/T − max/T)`
/// where `keep[i] > 0`, else 0, written over `keep`. `logits` is the (masked, penalised) row;
/// its maximum is always kept by the filters. Handles the limit case like [`exp_in_place`].
///
/// [`AfterFilters`]: super::TemperaturePlacement::AfterFilters
pub(crate) fn reweight_kept(keep: &mut [f32], logits: &[f32], inv_t: f32) {
    let max = logits.iter().fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    let m = max * inv_t;
    let limit = m.is_infinite() || inv_t.is_infinite();
    for (k, &x) in keep.iter_mut().zip(logits) {
        if *k > 0.0 {
            *k = if limit {
                if x == max {
                    1.0
                } else {
                    0.0
                }
            } else {
                exp(x * inv_t - m)
            };
        }
    }
}

/// The maximum of `x`, refusing NaN (the error names the first NaN's index).
#[multiversion(targets("x86_64+avx2"))]
pub(crate) fn max_checked(x: &[f32]) -> Result<f32, SampleError> {
    // Thirty-two independent lanes let the compiler vectorise with four chains in flight. NaNs
    // are flagged separately from their bit patterns (and located by a second, cold scan), so
    // the maximum is a plain comparison (`maxps`), which passes over a NaN.
    let mut lanes = [f32::NEG_INFINITY; 32];
    let mut nan = [0u32; 32];
    let chunks = x.chunks_exact(32);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..32 {
            nan[j] |= u32::from((c[j].to_bits() & 0x7fff_ffff) > 0x7f80_0000);
            lanes[j] = if c[j] > lanes[j] { c[j] } else { lanes[j] };
        }
    }
    let mut any_nan = nan.iter().any(|&b| b != 0);
    for &v in tail {
        any_nan |= v.is_nan();
        lanes[0] = lanes[0].max(v);
    }
    if any_nan {
        let i = x.iter().position(|v| v.is_nan()).unwrap_or(0);
        return Err(SampleError::nan(i));
    }
    Ok(lanes.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)))
}

/// `x[i] = exp(x[i]·s − m)` in one pass, returning the eight `f64` lane sums (lane `j` sums
/// the entries `≡ j mod 8`, the tail in lane 0). With AVX2 the exponentials of a chunk are one
/// [`exp8`](super::exp::avx2::exp8): the same arithmetic lane for lane, so the same bits.
pub(crate) fn exp_pass(x: &mut [f32], s: f32, m: f32) -> [f64; 8] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present.
        return unsafe { exp_pass_avx2(x, s, m) };
    }
    let mut lanes = [0.0f64; 8];
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        for j in 0..8 {
            let e = exp(c[j] * s - m);
            c[j] = e;
            lanes[j] += f64::from(e);
        }
    }
    for v in chunks.into_remainder() {
        *v = exp(*v * s - m);
        lanes[0] += f64::from(*v);
    }
    lanes
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn exp_pass_avx2(x: &mut [f32], s: f32, m: f32) -> [f64; 8] {
    use super::exp::avx2::{add_lanes, exp8, lanes};
    use std::arch::x86_64::*;
    let (sv, mv) = (_mm256_set1_ps(s), _mm256_set1_ps(m));
    let mut acc = [_mm256_setzero_pd(); 2];
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn exp_at(p: *mut f32, sv: __m256, mv: __m256) -> __m256 {
        let e = exp8(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p), sv), mv));
        _mm256_storeu_ps(p, e);
        e
    }
    // Two chunks a step: two independent exponentials in flight (one was latency-bound);
    // their lane sums are still added chunk after chunk, in the row's order.
    let mut pairs = x.chunks_exact_mut(16);
    for c in &mut pairs {
        let (e1, e2) = (exp_at(c.as_mut_ptr(), sv, mv), exp_at(c.as_mut_ptr().add(8), sv, mv));
        add_lanes(&mut acc, e1);
        add_lanes(&mut acc, e2);
    }
    let mut chunks = pairs.into_remainder().chunks_exact_mut(8);
    for c in &mut chunks {
        add_lanes(&mut acc, exp_at(c.as_mut_ptr(), sv, mv));
    }
    let mut lanes = lanes(acc);
    for v in chunks.into_remainder() {
        *v = exp(*v * s - m);
        lanes[0] += f64::from(*v);
    }
    lanes
}

/// `Σ exp(x[i]·s − m)` in `f64` without writing the exponentials: eight lane sums over the
/// whole 8-chunks, totalled, then the tail's terms one by one (the log-sum-exp of logprobs
/// and the candidate path's partition function). With AVX2 the lanes come from
/// [`exp8`](super::exp::avx2::exp8) and hold the same values.
pub(crate) fn exp_sum(x: &[f32], s: f32, m: f32) -> f64 {
    let tail = x.len() % 8;
    let (body, rest) = x.split_at(x.len() - tail);
    let mut sum: f64 = exp_lane_sums(body, s, m).iter().sum();
    for &v in rest {
        sum += f64::from(exp(v * s - m));
    }
    sum
}

/// The lane sums of [`exp_sum`] over whole 8-chunks (`x.len() % 8 == 0`).
fn exp_lane_sums(x: &[f32], s: f32, m: f32) -> [f64; 8] {
    debug_assert_eq!(x.len() % 8, 0);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present.
        return unsafe { exp_lane_sums_avx2(x, s, m) };
    }
    let mut lanes = [0.0f64; 8];
    for c in x.chunks_exact(8) {
        for j in 0..8 {
            lanes[j] += f64::from(exp(c[j] * s - m));
        }
    }
    lanes
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn exp_lane_sums_avx2(x: &[f32], s: f32, m: f32) -> [f64; 8] {
    use super::exp::avx2::{add_lanes, exp8, lanes};
    use std::arch::x86_64::*;
    let (sv, mv) = (_mm256_set1_ps(s), _mm256_set1_ps(m));
    let mut acc = [_mm256_setzero_pd(); 2];
    for c in x.chunks_exact(8) {
        add_lanes(
            &mut acc,
            exp8(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(c.as_ptr()), sv), mv)),
        );
    }
    lanes(acc)
}

/// Sum of a row in `f64` with independent accumulators (order does not matter to callers).
#[multiversion(targets("x86_64+avx2"))]
pub(crate) fn sum_f64(x: &[f32]) -> f64 {
    // Sixteen lanes: four independent vector additions in flight (one chain of `addpd` was
    // latency-bound at a quarter of the machine's throughput).
    let mut acc = [0.0f64; 16];
    let chunks = x.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..16 {
            acc[j] += f64::from(c[j]);
        }
    }
    let mut s: f64 = acc.iter().sum();
    for &v in tail {
        s += f64::from(v);
    }
    s
}

/// Divide every entry by `sum` (no-op when `sum` is zero).
fn scale(x: &mut [f32], sum: f64) {
    if sum > 0.0 {
        let inv = (1.0 / sum) as f32;
        for v in x.iter_mut() {
            *v *= inv;
        }
    }
}

/// Renormalise a filtered row so it sums to one (step 10).
pub fn renormalise(probs: &mut [f32]) {
    let sum = sum_f64(probs);
    scale(probs, sum);
}

/// Nucleus filter (Holtzman et al. 2020): sort ascending; the tie group of value `v` is kept
/// iff the mass strictly above it is `< top_p × total`, where both masses are *exact* sums
/// (fixed point, `sampler::mass`): the answer does not depend on the order of the additions,
/// so the rejection and candidate paths, which sum in other orders, keep exactly this set.
///
/// This is the spec's "inclusive ascending cumsum > 1 − top_p" rule (`cum(i) = total −
/// above(i)`) in mlx-lm 0.32's formulation ("mass above ≥ `top_p × total` is dropped", ties at
/// the cut kept as a group: survival depends on a token's probability, never on its index).
/// mlx-lm evaluates it with an `f32` reverse cumsum and an `f32` threshold; the two can differ
/// only when the mass above a group lies within that `f32` rounding of the threshold
/// (`docs/sampler.md`). No-op unless `0 < top_p < 1`. `keys` is scratch.
pub fn top_p_in_place(probs: &mut [f32], top_p: f32, keys: &mut Vec<u64>) {
    if !(top_p > 0.0 && top_p < 1.0) {
        return;
    }
    keys.clear();
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            keys.push((u64::from(p.to_bits()) << 32) | i as u64);
        }
    }
    if keys.len() <= 1 {
        return;
    }
    keys.sort_unstable();
    let prob = |k: u64| f32::from_bits((k >> 32) as u32);
    let fixed = Fixed::for_max(prob(keys[keys.len() - 1]));
    let total: u128 = keys.iter().map(|&k| fixed.of(prob(k))).sum();
    // Walk down from the most likely token; `above` is the mass strictly above position j.
    let mut above = 0u128;
    let mut first_kept = 0;
    for j in (0..keys.len()).rev() {
        if top_p_drops(above, total, top_p) {
            first_kept = j + 1;
            break;
        }
        above += fixed.of(prob(keys[j]));
    }
    let cut = prob(keys[first_kept]);
    for &k in &keys[..first_kept] {
        if prob(k) < cut {
            probs[(k & 0xffff_ffff) as usize] = 0.0;
        }
    }
}

/// Min-p filter (Nguyen et al. 2024): zero every probability below `max(probs) × min_p`. The
/// maximum always survives (`min_tokens_to_keep = 1` needs no special case). No-op when
/// `min_p <= 0`.
pub fn min_p_in_place(probs: &mut [f32], min_p: f32) {
    if min_p.is_nan() || min_p <= 0.0 {
        return;
    }
    let max = probs.iter().fold(0.0f32, |a, &b| if b > a { b } else { a });
    let cutoff = max * min_p;
    for v in probs.iter_mut() {
        if *v < cutoff {
            *v = 0.0;
        }
    }
}

/// Top-k filter (Fan et al. 2018): keep the `k` most probable tokens, ties broken by index
/// rank (the lower id wins), zero the rest. No-op when `k == 0` or fewer than `k + 1` tokens
/// have non-zero probability. `keys` is scratch; the selection is O(vocab).
pub fn top_k_in_place(probs: &mut [f32], k: usize, keys: &mut Vec<u64>) {
    if k == 0 || k >= probs.len() {
        return;
    }
    keys.clear();
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            // `!bits` reverses the order of non-negative floats: ascending key = descending
            // probability, then ascending index.
            keys.push((u64::from(!p.to_bits()) << 32) | i as u64);
        }
    }
    if keys.len() <= k {
        return;
    }
    keys.select_nth_unstable(k);
    for &key in &keys[k..] {
        probs[(key & 0xffff_ffff) as usize] = 0.0;
    }
}

/// Inverse-CDF draw (step 11): `target = r × Σp`, the first index whose inclusive cumulative
/// sum exceeds `target`; on floating-point drift (no index does), the last non-zero index.
/// Returns `None` only for a row with no positive entry. `r` must be in `[0, 1)`.
///
/// # Example
/// ```
/// use grammask::sampler::draw_index;
/// let p = [0.25, 0.0, 0.5, 0.25];
/// assert_eq!(draw_index(&p, 0.0), Some(0));
/// assert_eq!(draw_index(&p, 0.3), Some(2));
/// assert_eq!(draw_index(&p, 0.99), Some(3));
/// ```
pub fn draw_index(probs: &[f32], r: f32) -> Option<usize> {
    // Blocked walk: whole-block sums (vectorised) locate the block holding the target, then one
    // sequential scan inside it. Sums are in `f64`, so the result equals the plain sequential
    // scan's except when `target` lies within ~1e-16 of a cumulative boundary.
    const BLOCK: usize = 1024;
    let sum = sum_f64(probs);
    let target = f64::from(r) * sum;
    let mut cum = 0.0f64;
    for (bi, block) in probs.chunks(BLOCK).enumerate() {
        let block_sum = sum_f64(block);
        if cum + block_sum > target {
            for (j, &p) in block.iter().enumerate() {
                if p > 0.0 {
                    cum += f64::from(p);
                    if cum > target {
                        return Some(bi * BLOCK + j);
                    }
                }
            }
        } else {
            cum += block_sum;
        }
    }
    probs.iter().rposition(|&p| p > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_basics() {
        let mut x = vec![1.0, f32::NEG_INFINITY, 1.0];
        softmax_in_place(&mut x, 1.0).unwrap();
        assert_eq!(x, vec![0.5, 0.0, 0.5]);
        let mut big = vec![1e30, 0.0, 1e30];
        softmax_in_place(&mut big, 1.0).unwrap();
        assert_eq!(big, vec![0.5, 0.0, 0.5]);
        let mut inf = vec![f32::INFINITY, 3.0];
        softmax_in_place(&mut inf, 1.0).unwrap();
        assert_eq!(inf, vec![1.0, 0.0]);
        assert!(softmax_in_place(&mut [f32::NEG_INFINITY; 3], 1.0).is_err());
        // A temperature so small that 1/T overflows: the argmax limit, not NaN.
        let mut tiny = vec![0.0, -1.0, 0.0];
        softmax_in_place(&mut tiny, 1.0 / 1e-40).unwrap();
        assert_eq!(tiny, vec![0.5, 0.0, 0.5]);
        assert!(softmax_in_place(&mut [0.0, f32::NAN], 1.0).is_err());
    }

    #[test]
    fn top_p_keeps_tied_group() {
        let mut keys = Vec::new();
        // Mass above the 0.2s: 0.4 < 0.5, so the first 0.2 survives and its tied twins too.
        let mut p = vec![0.2, 0.4, 0.2, 0.2];
        top_p_in_place(&mut p, 0.5, &mut keys);
        assert_eq!(p, vec![0.2, 0.4, 0.2, 0.2]);
        let mut q = vec![0.1, 0.6, 0.3];
        top_p_in_place(&mut q, 0.5, &mut keys);
        assert_eq!(q, vec![0.0, 0.6, 0.0]);
        let mut r = vec![0.1, 0.6, 0.3];
        top_p_in_place(&mut r, 0.7, &mut keys);
        assert_eq!(r, vec![0.0, 0.6, 0.3]);
        // Subnormal rows do not index past the end, and are cut like any other row.
        let mut tiny = vec![1e-45, 1e-45];
        top_p_in_place(&mut tiny, 0.1, &mut keys);
        assert_eq!(tiny, vec![1e-45, 1e-45]);
        let t = f32::from_bits(1);
        let mut sub = vec![t, t * 6.0, t * 3.0];
        top_p_in_place(&mut sub, 0.5, &mut keys);
        assert_eq!(sub, vec![0.0, t * 6.0, 0.0]);
    }

    #[test]
    fn top_k_ties_by_index() {
        let mut keys = Vec::new();
        let mut p = vec![0.2, 0.3, 0.2, 0.3];
        top_k_in_place(&mut p, 3, &mut keys);
        assert_eq!(p, vec![0.2, 0.3, 0.0, 0.3]);
    }

    #[test]
    fn min_p_cutoff() {
        let mut p = vec![0.5, 0.25, 0.24, 0.01];
        min_p_in_place(&mut p, 0.5);
        assert_eq!(p, vec![0.5, 0.25, 0.0, 0.0]);
    }

    #[test]
    fn draw_fallback() {
        assert_eq!(draw_index(&[0.0, 0.0], 0.5), None);
        // r just below 1 with rounding can leave target at the sum: last non-zero wins.
        assert_eq!(draw_index(&[0.5, 0.5, 0.0], 0.999_999_94), Some(1));
    }
}
