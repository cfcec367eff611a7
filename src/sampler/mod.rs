//! The sampler: from one row of logits (and an optional allow-mask) to one token id.
//!
//! This module implements the per-token sampling specification (seed 000) step by step. Two
//! paths exist:
//!
//! * **Greedy** (`temperature == 0`): an argmax, ties to the lowest id, no random draw —
//!   byte-identical across runs. With a mask, [`apply_mask_argmax`]; with penalties,
//!   [`argmax_with_penalties`].
//! * **Host path** (`temperature > 0`), in this exact order:
//!   1. constraint mask: forbidden ids → `-inf`;
//!   2. `logit_bias` (additive; out-of-vocabulary ids skipped);
//!   3. repetition penalty (sign-aware, once per distinct id of the last-20 window);
//!   4. presence penalty; 5. frequency penalty (see [`apply_penalties`]);
//!   6. temperature scale and numerically stable softmax ([`softmax_in_place`]);
//!   7. top-p ([`top_p_in_place`]); 8. min-p ([`min_p_in_place`]); 9. top-k
//!      ([`top_k_in_place`]);
//!   10. renormalise; 11. inverse-CDF draw with the request's [`Pcg32`] ([`draw_index`]).
//!
//! Steps 2–5 and 7–9 run in the order of mlx-lm's `make_logits_processors` and
//! `make_sampler` (checked against recorded mlx-lm outputs in `tests/it/sampler_mlx_golden.rs`
//! and `tests/it/sampler_fidelity.rs`). Where the temperature goes is a choice,
//! [`TemperaturePlacement`]: before the filters (the default: the seed's step list, HF
//! transformers, vLLM) or after them (mlx-lm: the filters see the temperature-1 distribution,
//! the draw `∝ exp(logit/T)` over the kept tokens). The two agree at temperature 1. See
//! `docs/sampler.md` for the conventions (placement, top-p boundary, underflow, ties) and their
//! differences from mlx-lm and HF, with numbers.
//!
//! [`sampling_distribution`] runs steps 1–10 and returns the probability row. It is the exact
//! distribution of every path: all of them rank and cut the same `f32` values, and the top-p
//! boundary is decided on exact sums (`sampler::mass`), whatever order a path adds in. With
//! [`FilterAlgorithm::Sort`] the draw is exactly `draw_index(sampling_distribution(..),
//! rng.next_f32())`, and the speculative helper ([`speculative_accept`],
//! [`Sampler::verify_draft`]) builds both of its distributions with it.
//!
//! # Sorting-free filters
//! By default ([`FilterAlgorithm::Auto`]) a step with an active filter draws from the same
//! distribution without sorting: the top-k candidate path ([`sample_candidates`], seed 003) when
//! `0 < top_k ≤ 32`, else dual-pivot rejection sampling ([`rejection_sample`], seed 002) after
//! an unnormalised exp pass. [`FilterAlgorithm::Sort`] restores steps 7–11 as listed; it is a
//! config field only (the library reads no environment variable). [`sample_draw`] reports the
//! path of each draw ([`SamplingPath`]), [`distribution`] returns the distribution a path
//! samples from as computed by that path's own code, and [`sample_n`] draws several tokens
//! from one prepared row. Counters (rejection rounds, cap-overflow fallbacks, exact top-p
//! decisions) are in [`Sampler::rejection_stats`].
//!
//! # Zero overhead when off
//! Penalties at identity, no mask and `top_logprobs_k == 0` cost nothing: the greedy path is
//! one argmax over the caller's slice, the host path skips steps 1–5 and 10, and logprobs are
//! never computed. Buffers live in a [`SamplerScratch`] (or a [`Sampler`]) that the caller
//! keeps across steps, so a step allocates nothing once the buffers reach vocabulary size.
//!
//! # Example
//! ```
//! use grammask::sampler::{Logits, PenaltyConfig, Sampler, SamplerConfig};
//! use grammask::{TokenId, TokenMask};
//!
//! let cfg = SamplerConfig::default().with_temperature(0.8).with_top_k(2).with_seed(42);
//! let mut sampler = Sampler::new(cfg, PenaltyConfig::default()).unwrap();
//! let logits = [0.1f32, 2.0, 1.5, -1.0];
//! let mut mask = TokenMask::full(4);
//! mask.remove(TokenId(1));
//! let mut generated = Vec::new();
//! for _ in 0..3 {
//!     let t = sampler.sample(Logits::F32(&logits), Some(&mask), &generated).unwrap();
//!     assert!(t == TokenId(0) || t == TokenId(2)); // top-2 of the allowed tokens
//!     generated.push(t);
//! }
//! ```

mod config;
mod error;
pub(crate) mod exp;
mod filters;
mod greedy;
mod logits;
mod logprobs;
mod mass;
mod pcg;
mod penalties;
mod rejection;
mod speculative;
mod topk;

pub use config::{
    FilterAlgorithm, PenaltyConfig, SamplerConfig, TemperaturePlacement, DEFAULT_SEED,
    MAX_TOP_LOGPROBS, PENALTY_WINDOW,
};
pub use error::{SampleError, SampleErrorKind};
pub use filters::{
    draw_index, min_p_in_place, renormalise, softmax_in_place, top_k_in_place, top_p_in_place,
};
pub use greedy::{apply_mask_argmax, argmax, argmax_with_penalties};
pub use logits::{bf16_to_f32, f32_to_bf16, Logits};
pub use logprobs::{
    compute_top_logprobs, compute_top_logprobs_into, top_logprobs_from_probs_into, LogprobsMode,
    TokenLogprobs,
};
pub use pcg::{Pcg32, DEFAULT_STREAM};
pub use penalties::apply_penalties;
pub use rejection::{rejection_sample, RejectionScratch, RejectionStats, MAX_REJECTION_ROUNDS};
pub use speculative::{speculative_accept, Verdict};
pub use topk::{
    sample_candidates, top_k_candidates, top_k_candidates_grouped, Candidate, TopKScratch,
    CANDIDATE_GROUP, MAX_CANDIDATES,
};

use crate::mask::{TokenMask, WORD_BITS};
use crate::token::TokenId;
use filters::{exp_in_place, reweight_kept};
use greedy::{argmax_f32, check_mask};

/// Reusable buffers for one decode stream: the working row, the sort keys of top-p/top-k, the
/// rejection sampler's block sums (with its counters) and the top-k candidate buffers.
///
/// Keep one per request (or per thread) and pass it to every step; buffers grow to the
/// vocabulary size once and are reused.
#[derive(Clone, Debug, Default)]
pub struct SamplerScratch {
    work: Vec<f32>,
    keys: Vec<u64>,
    /// A copy of the logits, for the draw weights when the temperature follows the filters.
    logits: Vec<f32>,
    rejection: RejectionScratch,
    topk: TopKScratch,
}

impl SamplerScratch {
    /// Empty buffers (they grow on first use).
    pub fn new() -> SamplerScratch {
        SamplerScratch::default()
    }

    /// Buffers pre-sized for `vocab` tokens, so even the first step does not allocate.
    pub fn with_capacity(vocab: usize) -> SamplerScratch {
        SamplerScratch {
            work: Vec::with_capacity(vocab),
            keys: Vec::with_capacity(vocab),
            logits: Vec::new(),
            rejection: RejectionScratch::with_capacity(vocab),
            topk: TopKScratch::new(),
        }
    }

    /// Counters of the sorting-free paths used with this scratch: rows, rejection rounds,
    /// cap-overflow fallbacks to the sort-based chain, candidate-path rows.
    pub fn rejection_stats(&self) -> RejectionStats {
        self.rejection.stats()
    }

    /// Replace the rejection sampler's buffers (e.g. to set a different round cap with
    /// [`RejectionScratch::with_max_rounds`]).
    pub fn set_rejection_scratch(&mut self, rejection: RejectionScratch) {
        self.rejection = rejection;
    }

    /// Copy (widening) `logits` into the working row and return it.
    pub(crate) fn load(&mut self, logits: Logits<'_>) -> &mut [f32] {
        load_masked(&mut self.work, logits, None)
    }
}

/// Step 1: copy the row into `work`, writing `-inf` over forbidden ids (which are never read).
fn load_masked<'w>(
    work: &'w mut Vec<f32>,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
) -> &'w mut [f32] {
    let n = logits.len();
    work.resize(n, 0.0);
    logits.load_into(work);
    if let Some(m) = mask {
        for (wi, &w) in m.words().iter().enumerate() {
            if w == u32::MAX {
                continue;
            }
            let base = wi * WORD_BITS;
            let mut forbidden = !w;
            while forbidden != 0 {
                let i = base + forbidden.trailing_zeros() as usize;
                forbidden &= forbidden - 1;
                if i >= n {
                    break;
                }
                work[i] = f32::NEG_INFINITY;
            }
        }
    }
    work
}

/// The distribution a step samples from: steps 1–10 of the pipeline, returned as a probability
/// row (in `scratch`) that sums to one. At temperature 0 it is the one-hot row of the greedy
/// choice, so the speculative helper also covers greedy decoding.
///
/// `recent` holds the generated tokens so far (only the last [`PENALTY_WINDOW`] matter).
///
/// # Errors
/// Invalid config, empty row, mask/logits length mismatch, a NaN allowed logit, or no token
/// left (the mask forbids all, or every allowed logit is `-inf`).
pub fn sampling_distribution<'s>(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    scratch: &'s mut SamplerScratch,
) -> Result<&'s [f32], SampleError> {
    cfg.validate()?;
    penalties.validate()?;
    let n = logits.len();
    if n == 0 {
        return Err(SampleError::new(SampleErrorKind::EmptyLogits));
    }
    if let Some(m) = mask {
        check_mask(m, n)?;
    }
    let SamplerScratch { work, keys, logits: copy, .. } = scratch;
    let work = load_masked(work, logits, mask);
    if penalties.penalties_active() {
        apply_penalties(work, recent, penalties, mask);
    }
    if !cfg.sampling_active() {
        let t = argmax_f32(work)?;
        work.fill(0.0);
        work[t.index()] = 1.0;
        return Ok(work);
    }
    if !cfg.filters_active(n) {
        softmax_in_place(work, 1.0 / cfg.temperature)?;
        return Ok(work);
    }
    let split = cfg.split_weights();
    if split {
        copy.clear();
        copy.extend_from_slice(work);
    }
    // The filters rank and cut the unnormalised `e = exp(x·s − max·s)` (maximum exactly 1),
    // the values the rejection and candidate paths see too, so all paths keep one set.
    exp_in_place(work, cfg.filter_scale())?;
    filter_in_place(work, cfg, keys);
    if split {
        reweight_kept(work, copy, 1.0 / cfg.temperature);
    }
    renormalise(work);
    Ok(work)
}

/// Steps 7–9 on a row of filter values: top-p, min-p, top-k (each a no-op when off).
fn filter_in_place(work: &mut [f32], cfg: &SamplerConfig, keys: &mut Vec<u64>) {
    if cfg.top_p_active() {
        top_p_in_place(work, cfg.top_p, keys);
    }
    if cfg.min_p > 0.0 {
        min_p_in_place(work, cfg.min_p);
    }
    if cfg.top_k > 0 && cfg.top_k < work.len() {
        top_k_in_place(work, cfg.top_k, keys);
    }
}

/// Which implementation produced a draw (or a [`Distribution`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SamplingPath {
    /// Temperature 0: an argmax, no random draw.
    Greedy,
    /// Temperature only (no active filter): softmax and one inverse-CDF draw.
    Softmax,
    /// The sort-based filter chain (seed 000).
    Sort,
    /// Dual-pivot rejection sampling without sorting (seed 002).
    Rejection,
    /// The top-k candidate path (seed 003).
    Candidates,
}

/// One sampled token and the path that drew it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    /// The token.
    pub token: TokenId,
    /// How it was drawn.
    pub path: SamplingPath,
}

/// The distribution one path samples from: the tokens with non-zero probability (ascending
/// ids) and their probabilities (summing to one), computed by that path's own code.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Distribution {
    /// The support, ascending.
    pub ids: Vec<TokenId>,
    /// `probs[i]` is the probability of `ids[i]`.
    pub probs: Vec<f32>,
    /// The path whose code computed it (`None` only for the empty default).
    pub path: Option<SamplingPath>,
}

impl Distribution {
    /// The dense row (`0` outside the support) of a vocabulary of `n` tokens.
    pub fn to_dense(&self, n: usize) -> Vec<f32> {
        let mut row = vec![0.0; n];
        for (t, &p) in self.ids.iter().zip(&self.probs) {
            row[t.index()] = p;
        }
        row
    }
}

/// The path a step with `cfg` takes on a row of `n` tokens before any run-time deferral (the
/// candidate path hands a row to rejection at a tie on its K-th value or an infinite scaled
/// maximum; a draw reports the path that actually ran).
pub fn planned_path(cfg: &SamplerConfig, n: usize) -> SamplingPath {
    if !cfg.sampling_active() {
        return SamplingPath::Greedy;
    }
    if !cfg.filters_active(n) {
        return SamplingPath::Softmax;
    }
    match cfg.effective_filter_algorithm() {
        FilterAlgorithm::Sort => SamplingPath::Sort,
        FilterAlgorithm::Candidates if cfg.top_k > 0 && cfg.top_k <= MAX_CANDIDATES => {
            SamplingPath::Candidates
        }
        _ => SamplingPath::Rejection,
    }
}

/// Choose the next token: greedy when `temperature == 0` (no random draw), else one draw from
/// [`sampling_distribution`] with `rng`. [`sample_draw`] also says which path ran.
///
/// When a filter is active (top-p < 1, min-p > 0, `0 < top_k < vocab`) the draw goes through
/// the config's [`FilterAlgorithm`]: by default the top-k candidate path for `top_k ≤ 32`
/// ([`sample_candidates`]) and sorting-free rejection otherwise ([`rejection_sample`]); the
/// distribution is exactly the same, the random stream is consumed differently (see
/// `docs/sampler.md`). [`FilterAlgorithm::Sort`] restores the sort-based chain. Greedy and
/// temperature-only steps take the same path whatever the algorithm.
///
/// # Errors
/// As [`sampling_distribution`].
pub fn sample_token(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    rng: &mut Pcg32,
    scratch: &mut SamplerScratch,
) -> Result<TokenId, SampleError> {
    sample_draw(cfg, penalties, logits, mask, recent, rng, scratch).map(|d| d.token)
}

/// [`sample_token`], reporting the path that drew the token.
///
/// # Errors
/// As [`sampling_distribution`].
pub fn sample_draw(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    rng: &mut Pcg32,
    scratch: &mut SamplerScratch,
) -> Result<Draw, SampleError> {
    // A closure, not a Vec: a single draw allocates nothing.
    let mut token = TokenId(0);
    let path =
        sample_into(cfg, penalties, logits, mask, recent, 1, rng, scratch, &mut |t| token = t)?;
    Ok(Draw { token, path })
}

/// `k` independent draws from one row (best-of-n, tests): steps 1–6 and the path's
/// preparation run once, then each draw costs what the path's draw costs (an inverse-CDF walk,
/// a rejection loop over the prepared row, or a walk over the K candidates). Appends to `out`
/// and returns the path. Greedy repeats its one token.
///
/// # Errors
/// As [`sampling_distribution`].
#[allow(clippy::too_many_arguments)]
pub fn sample_n(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    k: usize,
    rng: &mut Pcg32,
    scratch: &mut SamplerScratch,
    out: &mut Vec<TokenId>,
) -> Result<SamplingPath, SampleError> {
    sample_into(cfg, penalties, logits, mask, recent, k, rng, scratch, &mut |t| out.push(t))
}

#[allow(clippy::too_many_arguments)]
fn sample_into(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    k: usize,
    rng: &mut Pcg32,
    scratch: &mut SamplerScratch,
    out: &mut dyn FnMut(TokenId),
) -> Result<SamplingPath, SampleError> {
    if !cfg.sampling_active() {
        cfg.validate()?;
        let t = argmax_with_penalties(logits, penalties, recent, mask, scratch)?;
        (0..k).for_each(|_| out(t));
        return Ok(SamplingPath::Greedy);
    }
    let path = planned_path(cfg, logits.len());
    if matches!(path, SamplingPath::Rejection | SamplingPath::Candidates) {
        return sample_sorting_free(cfg, penalties, logits, mask, recent, k, rng, scratch, out);
    }
    let probs = sampling_distribution(cfg, penalties, logits, mask, recent, scratch)?;
    for _ in 0..k {
        let t = draw_index(probs, rng.next_f32()).ok_or_else(SampleError::all_forbidden)?;
        out(TokenId::from_index(t));
    }
    Ok(path)
}

/// Checks shared by every path: valid configs, a non-empty row, a mask of its length.
fn check_step(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    n: usize,
    mask: Option<&TokenMask>,
) -> Result<(), SampleError> {
    cfg.validate()?;
    penalties.validate()?;
    if n == 0 {
        return Err(SampleError::new(SampleErrorKind::EmptyLogits));
    }
    if let Some(m) = mask {
        check_mask(m, n)?;
    }
    Ok(())
}

/// Steps 1–11 with the sorting-free filters: the same checks, mask and penalties as
/// [`sampling_distribution`], then the candidate path or the exp pass + rejection, `k` draws.
#[allow(clippy::too_many_arguments)]
fn sample_sorting_free(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    k: usize,
    rng: &mut Pcg32,
    scratch: &mut SamplerScratch,
    out: &mut dyn FnMut(TokenId),
) -> Result<SamplingPath, SampleError> {
    let n = logits.len();
    check_step(cfg, penalties, n, mask)?;
    let SamplerScratch { work, rejection, topk, .. } = scratch;
    let candidates = planned_path(cfg, n) == SamplingPath::Candidates;
    let untouched = mask.is_none() && !penalties.penalties_active();
    // Nothing to apply to the row: the selector and the exp pass read the caller's slice.
    let src: Option<&[f32]> = match logits {
        Logits::F32(row) if untouched => Some(row),
        _ => {
            let w = load_masked(work, logits, mask);
            if penalties.penalties_active() {
                apply_penalties(w, recent, penalties, mask);
            }
            None
        }
    };
    if candidates && topk::candidate_support(src.unwrap_or(work), cfg, topk)? {
        rejection.count_candidate_row();
        for _ in 0..k {
            out(topk::draw_kept(topk.kept(), rng.next_f32()));
        }
        return Ok(SamplingPath::Candidates);
    }
    work.resize(n, 0.0);
    let prepared = rejection::prepare(src, work, cfg, rejection)?;
    if k > 1 {
        rejection.save_first_round();
    }
    for i in 0..k {
        if i > 0 {
            rejection.restore_first_round();
        }
        let t = rejection::draw_prepared(work, &prepared, cfg, rng, rejection)
            .ok_or_else(SampleError::all_forbidden)?;
        out(TokenId::from_index(t));
    }
    Ok(SamplingPath::Rejection)
}

/// The distribution the config's path samples from, computed by that path's own code (the
/// sort chain's row, the candidate path's kept set, or the support the rejection loop's
/// acceptance test defines), with the path. Every path gives the same support and, within
/// `f32` rounding of the normalisation, the same probabilities; this is how that is checked
/// without drawing. Allocates; meant for tests, diagnostics and verification, not the decode
/// loop.
///
/// # Errors
/// As [`sampling_distribution`].
pub fn distribution(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    scratch: &mut SamplerScratch,
) -> Result<Distribution, SampleError> {
    let n = logits.len();
    let path = planned_path(cfg, n);
    let from_weights = |ids: Vec<usize>, w: Vec<f32>, path| {
        let total: f64 = w.iter().map(|&v| f64::from(v)).sum();
        let (ids, probs) = ids
            .into_iter()
            .zip(w)
            .filter(|&(_, v)| v > 0.0)
            .map(|(i, v)| (TokenId::from_index(i), (f64::from(v) / total) as f32))
            .unzip();
        Distribution { ids, probs, path: Some(path) }
    };
    if matches!(path, SamplingPath::Rejection | SamplingPath::Candidates) {
        check_step(cfg, penalties, n, mask)?;
        let SamplerScratch { work, rejection, topk, .. } = scratch;
        let w = load_masked(work, logits, mask);
        if penalties.penalties_active() {
            apply_penalties(w, recent, penalties, mask);
        }
        if path == SamplingPath::Candidates && topk::candidate_support(w, cfg, topk)? {
            let (ids, wts) = topk.kept().iter().map(|&(t, v)| (t as usize, v)).unzip();
            return Ok(from_weights(ids, wts, SamplingPath::Candidates));
        }
        let prepared = rejection::prepare(None, w, cfg, rejection)?;
        let (mut ids, mut wts) = (Vec::new(), Vec::new());
        rejection::prepared_support(w, &prepared, cfg, rejection, &mut ids, &mut wts);
        return Ok(from_weights(ids, wts, SamplingPath::Rejection));
    }
    let probs = sampling_distribution(cfg, penalties, logits, mask, recent, scratch)?;
    let (ids, probs) = probs
        .iter()
        .enumerate()
        .filter(|&(_, &p)| p > 0.0)
        .map(|(i, &p)| (TokenId::from_index(i), p))
        .unzip();
    Ok(Distribution { ids, probs, path: Some(path) })
}

/// A request's sampler: its configs, its [`Pcg32`] (seeded from
/// [`SamplerConfig::seed_or_default`]) and its scratch buffers, threaded through every step.
#[derive(Clone)]
pub struct Sampler {
    config: SamplerConfig,
    penalties: PenaltyConfig,
    rng: Pcg32,
    scratch: SamplerScratch,
    draft: SamplerScratch,
    residual: Vec<f32>,
    logprobs: TokenLogprobs,
}

impl std::fmt::Debug for Sampler {
    /// The configs and the generator; the vocabulary-sized buffers are left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("config", &self.config)
            .field("penalties", &self.penalties)
            .field("rng", &self.rng)
            .finish_non_exhaustive()
    }
}

impl Sampler {
    /// A sampler for one request.
    ///
    /// # Errors
    /// An invalid [`SamplerConfig`] or [`PenaltyConfig`].
    pub fn new(config: SamplerConfig, penalties: PenaltyConfig) -> Result<Sampler, SampleError> {
        config.validate()?;
        penalties.validate()?;
        let rng = Pcg32::new(config.seed_or_default());
        let k = config.top_logprobs_k;
        Ok(Sampler {
            config,
            penalties,
            rng,
            scratch: SamplerScratch::new(),
            draft: SamplerScratch::new(),
            residual: Vec::new(),
            logprobs: TokenLogprobs { top: Vec::with_capacity(k), ..TokenLogprobs::default() },
        })
    }

    /// The sampling config.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The penalty config.
    pub fn penalties(&self) -> &PenaltyConfig {
        &self.penalties
    }

    /// The request's random stream.
    pub fn rng_mut(&mut self) -> &mut Pcg32 {
        &mut self.rng
    }

    /// Counters of the sorting-free paths (rejection rounds, cap-overflow fallbacks,
    /// candidate-path rows) over this sampler's steps.
    pub fn rejection_stats(&self) -> RejectionStats {
        self.scratch.rejection_stats()
    }

    /// One decode step: the next token given the logits, the optional allow-mask and the
    /// generated tokens so far. See [`sample_token`].
    ///
    /// # Errors
    /// As [`sampling_distribution`].
    pub fn sample(
        &mut self,
        logits: Logits<'_>,
        mask: Option<&TokenMask>,
        recent: &[TokenId],
    ) -> Result<TokenId, SampleError> {
        sample_token(
            &self.config,
            &self.penalties,
            logits,
            mask,
            recent,
            &mut self.rng,
            &mut self.scratch,
        )
    }

    /// One decode step plus logprob capture: the token, and its logprobs when
    /// `top_logprobs_k > 0` (computed from the raw logits; nothing is done otherwise).
    ///
    /// # Errors
    /// As [`sample`](Sampler::sample) and [`compute_top_logprobs`].
    pub fn sample_with_logprobs(
        &mut self,
        logits: Logits<'_>,
        mask: Option<&TokenMask>,
        recent: &[TokenId],
    ) -> Result<(TokenId, Option<&TokenLogprobs>), SampleError> {
        let t = self.sample(logits, mask, recent)?;
        let k = self.config.top_logprobs_k;
        if k == 0 {
            return Ok((t, None));
        }
        compute_top_logprobs_into(logits, t, k, &mut self.logprobs)?;
        Ok((t, Some(&self.logprobs)))
    }

    /// One decode step reporting the path that drew the token ([`sample_draw`]).
    ///
    /// # Errors
    /// As [`sampling_distribution`].
    pub fn sample_draw(
        &mut self,
        logits: Logits<'_>,
        mask: Option<&TokenMask>,
        recent: &[TokenId],
    ) -> Result<Draw, SampleError> {
        sample_draw(
            &self.config,
            &self.penalties,
            logits,
            mask,
            recent,
            &mut self.rng,
            &mut self.scratch,
        )
    }

    /// `k` independent draws from one row ([`sample_n`]): appended to `out`, the path returned.
    ///
    /// # Errors
    /// As [`sampling_distribution`].
    pub fn sample_n(
        &mut self,
        logits: Logits<'_>,
        mask: Option<&TokenMask>,
        recent: &[TokenId],
        k: usize,
        out: &mut Vec<TokenId>,
    ) -> Result<SamplingPath, SampleError> {
        sample_n(
            &self.config,
            &self.penalties,
            logits,
            mask,
            recent,
            k,
            &mut self.rng,
            &mut self.scratch,
            out,
        )
    }

    /// The distribution this step's path samples from, by that path's own code
    /// ([`distribution`]).
    ///
    /// # Errors
    /// As [`sampling_distribution`].
    pub fn path_distribution(
        &mut self,
        logits: Logits<'_>,
        mask: Option<&TokenMask>,
        recent: &[TokenId],
    ) -> Result<Distribution, SampleError> {
        distribution(&self.config, &self.penalties, logits, mask, recent, &mut self.scratch)
    }

    /// The probability row this step samples from ([`sampling_distribution`]).
    ///
    /// # Errors
    /// As [`sampling_distribution`].
    pub fn distribution(
        &mut self,
        logits: Logits<'_>,
        mask: Option<&TokenMask>,
        recent: &[TokenId],
    ) -> Result<&[f32], SampleError> {
        sampling_distribution(
            &self.config,
            &self.penalties,
            logits,
            mask,
            recent,
            &mut self.scratch,
        )
    }

    /// Verify one speculative draft token (Leviathan et al. 2023 §2.3): both the target and the
    /// draft distributions are built by [`sampling_distribution`] with this sampler's configs,
    /// then [`speculative_accept`] decides with this sampler's random stream.
    ///
    /// # Errors
    /// As [`sampling_distribution`] (for either row) and [`speculative_accept`].
    pub fn verify_draft(
        &mut self,
        target: Logits<'_>,
        draft: Logits<'_>,
        mask: Option<&TokenMask>,
        recent: &[TokenId],
        token: TokenId,
    ) -> Result<Verdict, SampleError> {
        let (cfg, pen) = (&self.config, &self.penalties);
        let p = sampling_distribution(cfg, pen, target, mask, recent, &mut self.scratch)?;
        let q = sampling_distribution(cfg, pen, draft, mask, recent, &mut self.draft)?;
        // Grow the residual buffer on the first verification, not on the first rejection, so
        // later steps never allocate.
        if self.residual.capacity() < p.len() {
            self.residual.clear();
            self.residual.reserve_exact(p.len());
        }
        speculative_accept(p, q, token, &mut self.rng, &mut self.residual)
    }
}
