//! Sorting-free truncated sampling by dual-pivot rejection (seed 002): top-k, top-p, min-p and
//! their combinations drawn from a probability row without sorting the vocabulary.
//!
//! The sort-based chain of [`filters`](super::filters) (top-p → min-p → top-k, renormalise,
//! one inverse-CDF draw) keeps a *prefix* of the row ordered by probability descending, then
//! id ascending: top-p and min-p keep every token at or above a cut value (ties together), and
//! top-k of an upper set is the first `k` entries of that order. So the support of the chain is
//! `S = TopK ∩ TopP ∩ MinP`, the shortest of three prefixes, and a token `c` belongs to it iff
//!
//! * `rank(c) < k`, where `rank(c) = #{p > p_c} + #{j < c : p_j = p_c}` (top-k, lower ids win
//!   ties);
//! * `mass{p > p_c} < top_p × total` (top-p: mlx-lm 0.32's rule, a tied group survives
//!   together);
//! * `p_c >= max × min_p` (min-p).
//!
//! The sampler below never builds `S`. It keeps an open interval `(low, high]` of probability
//! values that contains the cut and, each round, draws one candidate from the row restricted to
//! `p > low` (a blocked inverse-CDF scan); `pivot_0 = p_candidate`, `pivot_1 = (pivot_0 +
//! high) / 2`; one pass counts entries and sums mass above both pivots; the candidate is
//! accepted when it passes the three tests, otherwise the interval shrinks to the pivot that
//! still brackets the cut (`low = pivot_1` if the value `pivot_1` already fails, else
//! `low = pivot_0, high = pivot_1`). Each round's proposal is the row restricted to a superset
//! of `S` and a candidate is accepted exactly when it lies in `S`, so an accepted candidate is
//! distributed as the row renormalised over `S` (von Neumann 1951 rejection sampling; the
//! dual-pivot shrinking schedule is FlashInfer's, Ye et al. 2025). Min-p needs no loop: its cut
//! is known after one max pass, so the first candidate drawn above it is accepted.
//!
//! # Ties at the top-k boundary
//! When the candidate's value `v` is the boundary value itself (`#{p > v} < k < #{p >= v}`)
//! and the candidate is one of the tied ids that top-k drops, `S` is known exactly (`p > v`,
//! plus the `k − #{p > v}` lowest ids with `p = v`), and the row is drawn from `S` directly with
//! one more scan. So top-k ties are resolved *exactly* as the sort-based filter does.
//!
//! # The same support as the sort-based chain, exactly
//! Top-k (including ties, by id) and min-p (the same `f32` product and comparison) select the
//! sort-based sets. Top-p compares masses that are summed here in `f64` by blocks and there in
//! sorted order; both decide with the exact fixed-point rule of `sampler::mass` whenever the
//! fast sum lies within 2⁻¹⁶ of the threshold (counted in
//! [`RejectionStats::exact_decisions`]), so the decision never depends on the order of the
//! additions. `tests/it/sampler_rejection.rs` and `tests/it/sampler_paths.rs` check it, the latter at
//! up to 262k tokens through [`distribution`](super::distribution).
//!
//! # Temperature after the filters
//! With `TemperaturePlacement::AfterFilters` the pass ranks and cuts `e = exp(x − max)` (the
//! temperature-1 row) but draws with the weights `w = exp(x/T − max/T)` of a second row: the
//! proposal of a round is `w` restricted to `e > low`, and the pivot pass also leaves the block
//! sums of `w` above both pivots.
//!
//! # Numerical contract
//! Pivots are single IEEE `f32` operations (`max × min_p`, the midpoint), masses are `f64`
//! sums (the per-round pivot pass adds `f32` partial sums of 16 entries per lane into them, a
//! relative error below 2⁻²⁰ that keeps the pass in 4-wide SIMD). Rust never enables
//! flush-to-zero or denormals-are-zero, and every `f32` subnormal is a normal `f64`, so rows of
//! subnormal-scale probabilities keep their exact order and mass (a test covers it). Every sum
//! runs in a fixed order (eight lanes per block of 1,024, blocks in order), so the same row and
//! the same [`Pcg32`] stream give the same token on every run.
//!
//! # Convergence cap
//! A row that needs more than [`MAX_REJECTION_ROUNDS`] rounds (adversarial near-uniform rows
//! can) is finished by the sort-based chain, and the event is counted in
//! [`RejectionStats::fallbacks`]. Each round consumes one `next_f32` of the stream; the
//! fallback consumes one more.

use super::config::SamplerConfig;
use super::error::SampleError;
use super::exp::exp;
use super::filters::{
    draw_index, exp_in_place, max_checked, min_p_in_place, renormalise, softmax_in_place,
    top_k_in_place, top_p_in_place,
};
use super::mass::{fast_decision, top_p_drops, Decision, Fixed};
use super::pcg::Pcg32;

/// Default cap on rejection rounds per row before the sort-based fallback.
pub const MAX_REJECTION_ROUNDS: usize = 32;

/// Block length of the inverse-CDF scan: block sums locate the target, one block is walked.
const BLOCK: usize = 1024;

/// Sub-block summed in `f32` lanes before widening to `f64` (16 entries per lane).
const SUB: usize = 128;

/// Counters of the rejection sampler, readable by the caller (see
/// [`RejectionScratch::stats`], [`SamplerScratch::rejection_stats`](super::SamplerScratch)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RejectionStats {
    /// Rows sampled by the rejection sampler (fallback rows included).
    pub rows: u64,
    /// Candidate draws over all rows (a row accepted at its first candidate counts one).
    pub rounds: u64,
    /// Rows whose boundary tie group was resolved exactly (top-k ties at the cut).
    pub tie_resolutions: u64,
    /// Rows that hit the round cap and were finished by the sort-based chain.
    pub fallbacks: u64,
    /// Rows sampled on the top-k candidate path ([`sample_candidates`](super::sample_candidates)).
    pub candidate_rows: u64,
    /// Top-p decisions whose fast `f64` mass was within rounding of the threshold and that the
    /// exact sums settled (one extra pass each; see `sampler::mass`).
    pub exact_decisions: u64,
}

/// Reusable buffers and counters of the rejection sampler: block sums (vocab / 1,024 entries)
/// and, for the rare cap overflow, a copy of the row and the sort keys.
#[derive(Clone, Debug)]
pub struct RejectionScratch {
    sums: Vec<f64>,
    sums1: Vec<f64>,
    row: Vec<f32>,
    /// Draw weights `exp(x/T − max/T)` under `TemperaturePlacement::AfterFilters`.
    weights: Vec<f32>,
    /// The first round's block sums, kept for repeated draws from one row.
    first: Vec<f64>,
    keys: Vec<u64>,
    max_rounds: usize,
    stats: RejectionStats,
}

impl Default for RejectionScratch {
    fn default() -> Self {
        RejectionScratch::new()
    }
}

impl RejectionScratch {
    /// Empty buffers, cap [`MAX_REJECTION_ROUNDS`].
    pub fn new() -> RejectionScratch {
        RejectionScratch {
            sums: Vec::new(),
            sums1: Vec::new(),
            row: Vec::new(),
            weights: Vec::new(),
            first: Vec::new(),
            keys: Vec::new(),
            max_rounds: MAX_REJECTION_ROUNDS,
            stats: RejectionStats::default(),
        }
    }

    /// Buffers pre-sized for `vocab` tokens (the cap-overflow copy still grows on first use).
    pub fn with_capacity(vocab: usize) -> RejectionScratch {
        let mut s = RejectionScratch::new();
        s.sums.reserve(vocab.div_ceil(BLOCK));
        s.sums1.reserve(vocab.div_ceil(BLOCK));
        s
    }

    /// Change the round cap (at least one round always runs). Tests use a small cap to force
    /// the fallback.
    pub fn with_max_rounds(mut self, rounds: usize) -> RejectionScratch {
        self.max_rounds = rounds.max(1);
        self
    }

    /// The counters since creation (or the last [`reset_stats`](Self::reset_stats)).
    pub fn stats(&self) -> RejectionStats {
        self.stats
    }

    /// Zero the counters.
    pub fn reset_stats(&mut self) {
        self.stats = RejectionStats::default();
    }

    /// Keep the first round's block sums of a [`prepare`]d row, so that several draws can be
    /// made from it ([`restore_first_round`](Self::restore_first_round) before each).
    pub(crate) fn save_first_round(&mut self) {
        self.first.clear();
        self.first.extend_from_slice(&self.sums);
    }

    /// Put back the block sums saved by [`save_first_round`](Self::save_first_round).
    pub(crate) fn restore_first_round(&mut self) {
        self.sums.clear();
        self.sums.extend_from_slice(&self.first);
    }

    pub(crate) fn count_candidate_row(&mut self) {
        self.stats.candidate_rows += 1;
    }
}

/// Count and mass above the two pivots of one round.
#[derive(Clone, Copy, Debug)]
struct PivotStats {
    /// `#{p > pivot_0}`, `#{p >= pivot_0}`, `#{p > pivot_1}`.
    gt0: usize,
    ge0: usize,
    gt1: usize,
    /// `Σ{p > pivot_0}`, `Σ{p > pivot_1}`.
    mass0: f64,
    mass1: f64,
}

/// Draw one token from `probs` truncated by the config's top-k, top-p and min-p, without
/// sorting: the same distribution as the sort-based chain (`top_p_in_place`, `min_p_in_place`,
/// `top_k_in_place`, `renormalise`, `draw_index`), see the module docs for the one rounding-level
/// difference at the top-p boundary.
///
/// `probs` holds finite non-negative probabilities (they need not sum to one, but entries
/// should stay below `f32::MAX / 16`, the headroom of the pass's `f32` partial sums; zero
/// entries are never drawn). Temperature is not applied here. Returns `None` only when no entry is positive.
///
/// # Example
/// ```
/// use grammask::sampler::{rejection_sample, Pcg32, RejectionScratch, SamplerConfig};
/// let probs = [0.05f32, 0.4, 0.3, 0.0, 0.25];
/// let cfg = SamplerConfig::default().with_temperature(1.0).with_top_k(2);
/// let mut rng = Pcg32::new(7);
/// let mut scratch = RejectionScratch::new();
/// for _ in 0..20 {
///     let t = rejection_sample(&probs, &cfg, &mut rng, &mut scratch).unwrap();
///     assert!(t == 1 || t == 2);
/// }
/// ```
pub fn rejection_sample(
    probs: &[f32],
    cfg: &SamplerConfig,
    rng: &mut Pcg32,
    scratch: &mut RejectionScratch,
) -> Option<usize> {
    let (max, total) = max_and_sum(probs);
    let low = min_p_low(max, cfg.min_p);
    block_sums_above(probs, low, &mut scratch.sums);
    sample_prepared(probs, None, max, total, low, cfg, rng, scratch)
}

/// The min-p cut as an exclusive lower bound: `p >= max × min_p` iff `p > low`.
fn min_p_low(max: f32, min_p: f32) -> f32 {
    let cut = max * min_p;
    if min_p > 0.0 && cut > 0.0 {
        f32::from_bits(cut.to_bits() - 1)
    } else {
        0.0
    }
}

/// What [`prepare`] leaves for the draws: the row maximum and mass of the filter values, the
/// min-p bound, and whether the draw weights are a separate row (`scratch.weights`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prepared {
    max: f32,
    total: f64,
    low: f32,
    split: bool,
}

/// The pipeline's entry: the logits (masked, penalised; `src`, or `out` itself when `src` is
/// `None`) become unnormalised probabilities `e = exp(x·s − max·s)` in `out` (no division: the
/// sampler only needs ratios; `s = 1/T`, or `1` when the temperature comes after the filters,
/// and then the draw weights `exp(x/T − max/T)` go to `scratch.weights`), and the same pass
/// records the block sums of the first round. Saves the softmax's scale pass, the separate
/// max/sum pass and, with `src`, the copy into the working row. `out` has the length of the
/// row.
///
/// # Errors
/// A NaN logit, or every logit `-inf`.
pub(crate) fn prepare(
    src: Option<&[f32]>,
    out: &mut [f32],
    cfg: &SamplerConfig,
    scratch: &mut RejectionScratch,
) -> Result<Prepared, SampleError> {
    let inv_t = 1.0 / cfg.temperature;
    if cfg.split_weights() {
        // Temperature after the filters: rank and filter `e = exp(x − max)`, draw with
        // `w = exp(x/T − max/T)`. Two exp passes; only this placement pays for them.
        let RejectionScratch { weights, sums, .. } = scratch;
        weights.resize(out.len(), 0.0);
        if let Some(s) = src {
            out.copy_from_slice(s);
        }
        weights.copy_from_slice(out);
        exp_in_place(out, 1.0)?;
        exp_in_place(weights, inv_t)?;
        let (max, total) = max_and_sum(out);
        let low = min_p_low(max, cfg.min_p);
        sums.clear();
        sums.extend(
            out.chunks(BLOCK).zip(weights.chunks(BLOCK)).map(|(k, w)| weight_above(k, w, low)),
        );
        return Ok(Prepared { max, total, low, split: true });
    }
    let max = max_checked(src.unwrap_or(out))?;
    if max == f32::NEG_INFINITY {
        return Err(SampleError::all_forbidden());
    }
    let m = max * inv_t;
    if m.is_infinite() || inv_t.is_infinite() {
        // The limit distribution (uniform over the maxima): the softmax's own special case.
        if let Some(s) = src {
            out.copy_from_slice(s);
        }
        softmax_in_place(out, inv_t)?;
        let (max, total) = max_and_sum(out);
        let low = min_p_low(max, cfg.min_p);
        block_sums_above(out, low, &mut scratch.sums);
        return Ok(Prepared { max, total, low, split: false });
    }
    // `max` maps to exactly this value (the same expression as every other entry's).
    let e_max = exp(max * inv_t - m);
    let low = min_p_low(e_max, cfg.min_p);
    let sums = &mut scratch.sums;
    sums.clear();
    let mut total = 0.0f64;
    if let Some(s) = src {
        out.copy_from_slice(s);
    }
    for block in out.chunks_mut(BLOCK) {
        let (mut all, mut hi) = exp_block(block, inv_t, m, low);
        let chunks = block.chunks_exact_mut(8);
        for v in chunks.into_remainder() {
            let e = exp(*v * inv_t - m);
            *v = e;
            all[0] += f64::from(e);
            hi[0] += f64::from(if e > low { e } else { 0.0 });
        }
        sums.push(lanes_sum(&hi));
        total += lanes_sum(&all);
    }
    Ok(Prepared { max: e_max, total, low, split: false })
}

/// `c = exp(c·inv_t − m)` over the whole 8-chunks of `block`, with the eight `f64` lane sums
/// of all values and of those above `low` (the tail is the caller's). With AVX2 the same
/// arithmetic lane for lane ([`exp8`](super::exp::avx2::exp8)), so the same bits.
fn exp_block(block: &mut [f32], inv_t: f32, m: f32, low: f32) -> ([f64; 8], [f64; 8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present.
        return unsafe { exp_block_avx2(block, inv_t, m, low) };
    }
    let mut all = [0.0f64; 8];
    let mut hi = [0.0f64; 8];
    for c in block.chunks_exact_mut(8) {
        for j in 0..8 {
            let e = exp(c[j] * inv_t - m);
            c[j] = e;
            all[j] += f64::from(e);
            hi[j] += f64::from(if e > low { e } else { 0.0 });
        }
    }
    (all, hi)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn exp_block_avx2(block: &mut [f32], inv_t: f32, m: f32, low: f32) -> ([f64; 8], [f64; 8]) {
    use super::exp::avx2::{add_lanes, exp8, lanes};
    use std::arch::x86_64::*;
    let (sv, mv, lv) = (_mm256_set1_ps(inv_t), _mm256_set1_ps(m), _mm256_set1_ps(low));
    let (mut all, mut hi) = ([_mm256_setzero_pd(); 2], [_mm256_setzero_pd(); 2]);
    for c in block.chunks_exact_mut(8) {
        let p = c.as_mut_ptr();
        let e = exp8(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p), sv), mv));
        _mm256_storeu_ps(p, e);
        add_lanes(&mut all, e);
        add_lanes(&mut hi, _mm256_and_ps(e, _mm256_cmp_ps::<_CMP_GT_OQ>(e, lv)));
    }
    (lanes(all), lanes(hi))
}

/// One draw from a row [`prepare`]d in `out` (the block sums of `scratch` are consumed; see
/// [`save_first_round`](RejectionScratch::save_first_round) to draw again).
pub(crate) fn draw_prepared(
    out: &[f32],
    p: &Prepared,
    cfg: &SamplerConfig,
    rng: &mut Pcg32,
    scratch: &mut RejectionScratch,
) -> Option<usize> {
    if p.split {
        let w = std::mem::take(&mut scratch.weights);
        let t = sample_prepared(out, Some(&w), p.max, p.total, p.low, cfg, rng, scratch);
        scratch.weights = w;
        t
    } else {
        sample_prepared(out, None, p.max, p.total, p.low, cfg, rng, scratch)
    }
}

/// The support the rejection loop accepts from, computed by its own tests: the largest value
/// `v` above the min-p bound that passes the top-k count and the top-p rule (the acceptance
/// test of a candidate of value `v`), found by bisection over the row's distinct values (one
/// counting pass per step), then every token above it and, at a top-k tie, the lowest tied
/// ids. Returns the ids (ascending) and their unnormalised draw weights into `ids`/`weights`.
pub(crate) fn prepared_support(
    out: &[f32],
    p: &Prepared,
    cfg: &SamplerConfig,
    scratch: &mut RejectionScratch,
    ids: &mut Vec<usize>,
    weights: &mut Vec<f32>,
) {
    ids.clear();
    weights.clear();
    let n = out.len();
    let k = if cfg.top_k == 0 || cfg.top_k >= n { usize::MAX } else { cfg.top_k };
    let rule = TopPRule {
        key: out,
        total: p.total,
        top_p: cfg.top_p,
        on: cfg.top_p_active(),
        fixed: Fixed::for_max(p.max),
    };
    let mut vals: Vec<f32> = out.iter().copied().filter(|&v| v > p.low).collect();
    vals.sort_unstable_by(|a, b| b.total_cmp(a));
    vals.dedup();
    let RejectionScratch { sums, sums1, stats, .. } = scratch;
    let mut passes = |v: f32| {
        let s = pivot_stats::<false>(out, out, v, v, sums, sums1);
        !(s.gt0 >= k || rule.drops(s.mass0, v, stats))
    };
    // vals[0] (the maximum) always passes; find the last index that does.
    let (mut lo, mut hi) = (0usize, vals.len());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if passes(vals[mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let Some(&cut) = vals.get(lo) else { return };
    let s = pivot_stats::<false>(out, out, cut, cut, sums, sums1);
    let keep = if s.ge0 <= k { usize::MAX } else { k - s.gt0 };
    let w = if p.split { &scratch.weights[..] } else { out };
    let mut seen = 0usize;
    for (i, &v) in out.iter().enumerate() {
        let tied = v == cut;
        if v > cut || (tied && seen < keep) {
            ids.push(i);
            weights.push(w[i]);
        }
        seen += usize::from(tied);
    }
}

/// The rejection loop. `key` holds the values the filters rank (and `max`, `total` its maximum
/// and mass); `weight`, when given, the draw weights of the same tokens (else `key` itself).
/// `scratch.sums` holds the block sums of the weights of `key > low`.
#[allow(clippy::too_many_arguments)]
fn sample_prepared(
    key: &[f32],
    weight: Option<&[f32]>,
    max: f32,
    total: f64,
    mut low: f32,
    cfg: &SamplerConfig,
    rng: &mut Pcg32,
    scratch: &mut RejectionScratch,
) -> Option<usize> {
    let n = key.len();
    scratch.stats.rows += 1;
    if max.is_nan() || max <= 0.0 {
        return None;
    }
    // Top-k is a no-op when k is 0 or covers the row (the sort-based filter's rule).
    let k = if cfg.top_k == 0 || cfg.top_k >= n { usize::MAX } else { cfg.top_k };
    let top_p_on = cfg.top_p_active();
    let rule = TopPRule { key, total, top_p: cfg.top_p, on: top_p_on, fixed: Fixed::for_max(max) };
    let w = weight.unwrap_or(key);
    let mut high = max;
    let RejectionScratch { sums, sums1, .. } = scratch;
    for _ in 0..scratch.max_rounds {
        scratch.stats.rounds += 1;
        let c = draw_in_blocks(key, w, low, sums, rng.next_f32())?;
        if k == usize::MAX && !top_p_on {
            return Some(c); // min-p alone (or nothing): every candidate above the cut is in S.
        }
        let p0 = key[c];
        // Round-to-nearest keeps the midpoint inside [p0, high], subnormals included.
        let p1 = p0 + (high - p0) * 0.5;
        // The pass also leaves the block sums above each pivot: the next round's draw needs
        // no pass of its own.
        let s = match weight {
            None => pivot_stats::<false>(key, key, p0, p1, sums, sums1),
            Some(wt) => pivot_stats::<true>(key, wt, p0, p1, sums, sums1),
        };
        let fails0 = s.gt0 >= k || rule.drops(s.mass0, p0, &mut scratch.stats);
        if !fails0 {
            if s.ge0 <= k {
                return Some(c);
            }
            // `p0` is the boundary value and top-k keeps only the lowest tied ids.
            let keep = k - s.gt0;
            let rank_in_tie = key[..c].iter().filter(|&&p| p == p0).count();
            if rank_in_tie < keep {
                return Some(c);
            }
            scratch.stats.tie_resolutions += 1;
            return draw_tie_cut(key, w, p0, keep, rng.next_f32());
        }
        let fails1 = s.gt1 >= k || rule.drops(s.mass1, p1, &mut scratch.stats);
        if fails1 {
            low = p1;
            std::mem::swap(sums, sums1);
        } else {
            low = p0;
            high = p1;
        }
    }
    scratch.stats.fallbacks += 1;
    sort_fallback(key, weight, cfg, rng, scratch)
}

/// The top-p test of one row: is the tie group of value `v`, with fast mass `mass` above it,
/// dropped? Decided by the fast `f64` sums when they are clear of the threshold, else by the
/// exact sums of `sampler::mass` (the rule every path shares).
struct TopPRule<'a> {
    key: &'a [f32],
    total: f64,
    top_p: f32,
    on: bool,
    fixed: Fixed,
}

impl TopPRule<'_> {
    fn drops(&self, mass: f64, v: f32, stats: &mut RejectionStats) -> bool {
        if !self.on {
            return false;
        }
        match fast_decision(mass, self.total, self.top_p) {
            Decision::Sure(d) => d,
            Decision::Close => {
                stats.exact_decisions += 1;
                let (above, total) = self.fixed.above_and_total(self.key, v);
                top_p_drops(above, total, self.top_p)
            }
        }
    }
}

/// The cap-overflow path: the sort-based chain on a copy of the row (filters on `key`, draw
/// with `weight`).
fn sort_fallback(
    key: &[f32],
    weight: Option<&[f32]>,
    cfg: &SamplerConfig,
    rng: &mut Pcg32,
    scratch: &mut RejectionScratch,
) -> Option<usize> {
    let row = &mut scratch.row;
    row.clear();
    row.extend_from_slice(key);
    top_p_in_place(row, cfg.top_p, &mut scratch.keys);
    min_p_in_place(row, cfg.min_p);
    top_k_in_place(row, cfg.top_k, &mut scratch.keys);
    if let Some(w) = weight {
        row.iter_mut().zip(w).filter(|(r, _)| **r > 0.0).for_each(|(r, &w)| *r = w);
    }
    renormalise(row);
    draw_index(row, rng.next_f32())
}

/// Row maximum and `f64` total in one pass (eight lanes, fixed order).
fn max_and_sum(x: &[f32]) -> (f32, f64) {
    let mut mx = [0.0f32; 8];
    let mut acc = [0.0f64; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            mx[j] = if c[j] > mx[j] { c[j] } else { mx[j] };
            acc[j] += f64::from(c[j]);
        }
    }
    let mut s = lanes_sum(&acc);
    let mut m = mx.iter().fold(0.0f32, |a, &b| if b > a { b } else { a });
    for &v in tail {
        m = if v > m { v } else { m };
        s += f64::from(v);
    }
    (m, s)
}

/// Pairwise sum of eight lanes (a fixed tree, so the result never depends on the caller).
#[inline]
fn lanes_sum(a: &[f64; 8]) -> f64 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

/// `Σ{p > low}` of a block, eight lanes.
fn sum_above(x: &[f32], low: f32) -> f64 {
    let mut acc = [0.0f64; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            let v = if c[j] > low { c[j] } else { 0.0 };
            acc[j] += f64::from(v);
        }
    }
    let mut s = lanes_sum(&acc);
    for &v in tail {
        if v > low {
            s += f64::from(v);
        }
    }
    s
}

/// `Σ{w : key > low}` of a block (the split-weight twin of [`sum_above`]).
fn weight_above(key: &[f32], w: &[f32], low: f32) -> f64 {
    key.iter().zip(w).map(|(&k, &w)| if k > low { f64::from(w) } else { 0.0 }).sum()
}

/// Block sums of `p > low` (one vectorised pass) into `sums`.
fn block_sums_above(probs: &[f32], low: f32, sums: &mut Vec<f64>) {
    sums.clear();
    sums.extend(probs.chunks(BLOCK).map(|b| sum_above(b, low)));
}

/// One inverse-CDF draw from the row restricted to `key > low`, with weights `w` (`key`
/// itself when the placement does not split them), given the block sums of those weights: the
/// block sums locate the block holding `r × Σ`, one sequential walk inside it finds the index.
/// On floating-point drift (the walk does not cross the target) the block's last entry with a
/// positive weight is taken. `None` when nothing lies above `low`.
fn draw_in_blocks(key: &[f32], w: &[f32], low: f32, sums: &[f64], r: f32) -> Option<usize> {
    let total: f64 = sums.iter().sum();
    if total.is_nan() || total <= 0.0 {
        return None;
    }
    let target = f64::from(r) * total;
    let mut cum = 0.0f64;
    let same = std::ptr::eq(key, w);
    for (b, &s) in sums.iter().enumerate() {
        if cum + s > target {
            let start = b * BLOCK;
            let end = (start + BLOCK).min(key.len());
            let mut last = None;
            if same {
                // One row (the default placement): the walk reads it once.
                for (j, &p) in key[start..end].iter().enumerate() {
                    if p > low {
                        cum += f64::from(p);
                        last = Some(start + j);
                        if cum > target {
                            return last;
                        }
                    }
                }
                if last.is_some() {
                    return last;
                }
                continue;
            }
            for (j, (&p, &wt)) in key[start..end].iter().zip(&w[start..end]).enumerate() {
                if p > low && wt > 0.0 {
                    cum += f64::from(wt);
                    last = Some(start + j);
                    if cum > target {
                        return last;
                    }
                }
            }
            if last.is_some() {
                return last;
            }
        } else {
            cum += s;
        }
    }
    (0..key.len()).rev().find(|&i| key[i] > low && w[i] > 0.0)
}

/// One draw from the exactly known top-k support at a tie: every `key > v`, plus the first
/// `keep` ids with `key == v`, weighted by `w`. A direct two-pass scan (the tie group is rare
/// and small).
fn draw_tie_cut(key: &[f32], w: &[f32], v: f32, keep: usize, r: f32) -> Option<usize> {
    let inside = |seen: &mut usize, p: f32| {
        let at = p == v && *seen < keep;
        *seen += usize::from(p == v);
        p > v || at
    };
    let mut seen = 0usize;
    let total: f64 = key
        .iter()
        .zip(w)
        .filter(|(&p, _)| inside(&mut seen, p))
        .map(|(_, &wt)| f64::from(wt))
        .sum();
    let target = f64::from(r) * total;
    let mut cum = 0.0f64;
    let mut seen = 0usize;
    let mut last = None;
    for (i, (&p, &wt)) in key.iter().zip(w).enumerate() {
        if inside(&mut seen, p) && wt > 0.0 {
            cum += f64::from(wt);
            last = Some(i);
            if cum > target {
                return last;
            }
        }
    }
    last
}

/// Count and mass above both pivots, and the count at or above `p0`, in one pass; the
/// per-block masses above `p0` and `p1` go to `sums0` and `sums1`.
///
/// With `SPLIT`, the block sums are of the weights `w` of those entries instead of their values
/// (temperature after the filters); without it `w` is not read.
/// The per-lane counters and `f32` partial sums [`pivot_stats`] keeps for one sub-block.
struct Lanes<'a> {
    gt0: &'a mut [u32; 8],
    ge0: &'a mut [u32; 8],
    gt1: &'a mut [u32; 8],
    f0: &'a mut [f32; 8],
    f1: &'a mut [f32; 8],
}

/// Counts above/at the pivots and the masses above them, lane `j` taking the entries `≡ j mod
/// 8` of `x` (whole 8-chunks). With AVX2 one vector per chunk: the same additions per lane in
/// the same order (a refused entry adds `+0.0` either way), so the same bits.
#[allow(clippy::needless_range_loop)]
fn sub_stats(x: &[f32], p0: f32, p1: f32, l: &mut Lanes<'_>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present.
        unsafe { sub_stats_avx2(x, p0, p1, l) };
        return;
    }
    for c in x.chunks_exact(8) {
        for j in 0..8 {
            let v = c[j];
            let a = v > p0;
            let b = v > p1;
            l.gt0[j] += u32::from(a);
            l.ge0[j] += u32::from(v >= p0);
            l.gt1[j] += u32::from(b);
            l.f0[j] += if a { v } else { 0.0 };
            l.f1[j] += if b { v } else { 0.0 };
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sub_stats_avx2(x: &[f32], p0: f32, p1: f32, l: &mut Lanes<'_>) {
    use std::arch::x86_64::*;
    let ld = |a: &[u32; 8]| _mm256_loadu_si256(a.as_ptr() as *const __m256i);
    let (mut gt0, mut ge0, mut gt1) = (ld(l.gt0), ld(l.ge0), ld(l.gt1));
    let (mut f0, mut f1) = (_mm256_loadu_ps(l.f0.as_ptr()), _mm256_loadu_ps(l.f1.as_ptr()));
    let (q0, q1) = (_mm256_set1_ps(p0), _mm256_set1_ps(p1));
    for c in x.chunks_exact(8) {
        let v = _mm256_loadu_ps(c.as_ptr());
        let a = _mm256_cmp_ps::<_CMP_GT_OQ>(v, q0);
        let e = _mm256_cmp_ps::<_CMP_GE_OQ>(v, q0);
        let b = _mm256_cmp_ps::<_CMP_GT_OQ>(v, q1);
        // A true comparison is all ones, −1 as an integer: subtracting it counts one.
        gt0 = _mm256_sub_epi32(gt0, _mm256_castps_si256(a));
        ge0 = _mm256_sub_epi32(ge0, _mm256_castps_si256(e));
        gt1 = _mm256_sub_epi32(gt1, _mm256_castps_si256(b));
        f0 = _mm256_add_ps(f0, _mm256_and_ps(v, a));
        f1 = _mm256_add_ps(f1, _mm256_and_ps(v, b));
    }
    let st = |a: &mut [u32; 8], v: __m256i| _mm256_storeu_si256(a.as_mut_ptr() as *mut __m256i, v);
    st(l.gt0, gt0);
    st(l.ge0, ge0);
    st(l.gt1, gt1);
    _mm256_storeu_ps(l.f0.as_mut_ptr(), f0);
    _mm256_storeu_ps(l.f1.as_mut_ptr(), f1);
}

fn pivot_stats<const SPLIT: bool>(
    x: &[f32],
    w: &[f32],
    p0: f32,
    p1: f32,
    sums0: &mut Vec<f64>,
    sums1: &mut Vec<f64>,
) -> PivotStats {
    let mut out = PivotStats { gt0: 0, ge0: 0, gt1: 0, mass0: 0.0, mass1: 0.0 };
    sums0.clear();
    sums1.clear();
    // Blocks keep the u32 lane counters far from overflow and the sums in a fixed order.
    for (bi, block) in x.chunks(BLOCK).enumerate() {
        let mut gt0 = [0u32; 8];
        let mut ge0 = [0u32; 8];
        let mut gt1 = [0u32; 8];
        let mut m0 = [0.0f64; 8];
        let mut m1 = [0.0f64; 8];
        for sub in block.chunks(SUB) {
            // `f32` partial sums of at most SUB / 8 entries per lane (relative error below
            // 2⁻²⁰), widened to `f64`: the loop stays in 4-wide `f32` SIMD.
            let mut f0 = [0.0f32; 8];
            let mut f1 = [0.0f32; 8];
            let tail = sub.chunks_exact(8).remainder();
            let mut lanes =
                Lanes { gt0: &mut gt0, ge0: &mut ge0, gt1: &mut gt1, f0: &mut f0, f1: &mut f1 };
            sub_stats(&sub[..sub.len() - tail.len()], p0, p1, &mut lanes);
            for &v in tail {
                gt0[0] += u32::from(v > p0);
                ge0[0] += u32::from(v >= p0);
                gt1[0] += u32::from(v > p1);
                f0[0] += if v > p0 { v } else { 0.0 };
                f1[0] += if v > p1 { v } else { 0.0 };
            }
            for j in 0..8 {
                m0[j] += f64::from(f0[j]);
                m1[j] += f64::from(f1[j]);
            }
        }
        out.gt0 += gt0.iter().map(|&c| c as usize).sum::<usize>();
        out.ge0 += ge0.iter().map(|&c| c as usize).sum::<usize>();
        out.gt1 += gt1.iter().map(|&c| c as usize).sum::<usize>();
        let (b0, b1) = (lanes_sum(&m0), lanes_sum(&m1));
        if SPLIT {
            let wb = &w[bi * BLOCK..bi * BLOCK + block.len()];
            sums0.push(weight_above(block, wb, p0));
            sums1.push(weight_above(block, wb, p1));
        } else {
            sums0.push(b0);
            sums1.push(b1);
        }
        out.mass0 += b0;
        out.mass1 += b1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SamplerConfig {
        SamplerConfig::default().with_temperature(1.0)
    }

    #[test]
    fn tie_cut_keeps_lowest_ids() {
        // A uniform row: top-k 3 must draw only ids 0, 1, 2.
        let probs = vec![0.1f32; 10];
        let mut rng = Pcg32::new(1);
        let mut s = RejectionScratch::new();
        let mut seen = [0u32; 10];
        for _ in 0..3000 {
            seen[rejection_sample(&probs, &cfg().with_top_k(3), &mut rng, &mut s).unwrap()] += 1;
        }
        assert!(seen[..3].iter().all(|&c| c > 800), "{seen:?}");
        assert!(seen[3..].iter().all(|&c| c == 0), "{seen:?}");
    }

    #[test]
    fn zero_row_is_none() {
        let mut rng = Pcg32::new(1);
        let mut s = RejectionScratch::new();
        assert_eq!(rejection_sample(&[0.0; 4], &cfg().with_top_p(0.5), &mut rng, &mut s), None);
        assert_eq!(rejection_sample(&[], &cfg(), &mut rng, &mut s), None);
    }

    #[test]
    fn pivot_stats_counts() {
        let x: Vec<f32> = (0..3000).map(|i| (i % 10) as f32).collect();
        let s = pivot_stats::<false>(&x, &x, 5.0, 7.5, &mut Vec::new(), &mut Vec::new());
        assert_eq!((s.gt0, s.ge0, s.gt1), (1200, 1500, 600));
        assert_eq!(s.mass0, 300.0 * (6.0 + 7.0 + 8.0 + 9.0));
        assert_eq!(s.mass1, 300.0 * (8.0 + 9.0));
    }
}
