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
//! `make_sampler`, and the filters reproduce mlx-lm 0.32's arithmetic (checked against
//! recorded mlx-lm outputs in `tests/it/sampler_mlx_golden.rs`). One deliberate difference, from
//! the spec: temperature is applied *before* the filters (mlx-lm filters the temperature-1
//! distribution and divides by the temperature only inside the final categorical draw). The
//! two agree at temperature 1. See `docs/sampler.md`.
//!
//! [`sampling_distribution`] runs steps 1–10 and returns the probability row; with
//! [`FilterAlgorithm::Sort`] the sampler's draw is exactly
//! `draw_index(sampling_distribution(..), rng.next_f32())`, and the speculative helper
//! ([`speculative_accept`], [`Sampler::verify_draft`]) builds both of its distributions with it.
//!
//! # Sorting-free filters
//! By default ([`FilterAlgorithm::Auto`]) a step with an active filter draws from the same
//! distribution without sorting: the top-k candidate path ([`sample_candidates`], seed 003) when
//! `0 < top_k ≤ 32`, else dual-pivot rejection sampling ([`rejection_sample`], seed 002) after
//! an unnormalised exp pass. [`FilterAlgorithm::Sort`], or `GRAMMASK_SAMPLING_REJECTION=0` in the
//! environment, restores steps 7–11 as listed. Counters (rejection rounds, cap-overflow
//! fallbacks) are in [`Sampler::rejection_stats`]. `docs/sampler.md` states where the supports
//! can differ (rounding at the top-p cut only).
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
mod exp;
mod filters;
mod greedy;
mod logits;
mod logprobs;
mod pcg;
mod penalties;
mod rejection;
mod speculative;
mod topk;

pub use config::{
    FilterAlgorithm, PenaltyConfig, SamplerConfig, DEFAULT_SEED, MAX_TOP_LOGPROBS, PENALTY_WINDOW,
    REJECTION_ENV,
};
pub use error::{SampleError, SampleErrorKind};
pub use filters::{
    draw_index, min_p_in_place, renormalise, softmax_in_place, top_k_in_place, top_p_in_place,
};
pub use greedy::{apply_mask_argmax, argmax, argmax_with_penalties};
pub use logits::{bf16_to_f32, f32_to_bf16, Logits};
pub use logprobs::{compute_top_logprobs, compute_top_logprobs_into, TokenLogprobs};
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
    let n = check_inputs(cfg, penalties, logits, mask)?;
    let SamplerScratch { work, keys, .. } = scratch;
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
    softmax_in_place(work, 1.0 / cfg.temperature)?;
    let mut filtered = false;
    if cfg.top_p_active() {
        top_p_in_place(work, cfg.top_p, keys);
        filtered = true;
    }
    if cfg.min_p > 0.0 {
        min_p_in_place(work, cfg.min_p);
        filtered = true;
    }
    if cfg.top_k > 0 && cfg.top_k < n {
        top_k_in_place(work, cfg.top_k, keys);
        filtered = true;
    }
    if filtered {
        renormalise(work);
    }
    Ok(work)
}

/// The checks every sampling path runs first, in this order: both configs valid, a non-empty
/// row, a mask as wide as it. Returns the row's width.
fn check_inputs(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
) -> Result<usize, SampleError> {
    cfg.validate()?;
    penalties.validate()?;
    let n = logits.len();
    if n == 0 {
        return Err(SampleError::new(SampleErrorKind::EmptyLogits));
    }
    if let Some(m) = mask {
        check_mask(m, n)?;
    }
    Ok(n)
}

/// Choose the next token: greedy when `temperature == 0` (no random draw), else one draw from
/// [`sampling_distribution`] with `rng`.
///
/// When a filter is active (top-p < 1, min-p > 0, `0 < top_k < vocab`) the draw goes through
/// the config's [`FilterAlgorithm`]: by default the top-k candidate path for `top_k ≤ 32`
/// ([`sample_candidates`]) and sorting-free rejection otherwise ([`rejection_sample`]); the
/// distribution is the same, the random stream is consumed differently (see
/// `docs/sampler.md`). [`FilterAlgorithm::Sort`] or `GRAMMASK_SAMPLING_REJECTION=0` restores
/// the sort-based chain. Greedy and temperature-only steps take the same path whatever the
/// algorithm.
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
    if !cfg.sampling_active() {
        cfg.validate()?;
        return argmax_with_penalties(logits, penalties, recent, mask, scratch);
    }
    let algorithm = cfg.effective_filter_algorithm();
    if algorithm != FilterAlgorithm::Sort && cfg.filters_active(logits.len()) {
        return sample_sorting_free(cfg, penalties, logits, mask, recent, rng, scratch, algorithm);
    }
    let probs = sampling_distribution(cfg, penalties, logits, mask, recent, scratch)?;
    draw_index(probs, rng.next_f32())
        .map(TokenId::from_index)
        .ok_or_else(SampleError::all_forbidden)
}

/// Steps 1–11 with the sorting-free filters: the same checks, mask and penalties as
/// [`sampling_distribution`], then the candidate path or softmax + rejection.
#[allow(clippy::too_many_arguments)]
fn sample_sorting_free(
    cfg: &SamplerConfig,
    penalties: &PenaltyConfig,
    logits: Logits<'_>,
    mask: Option<&TokenMask>,
    recent: &[TokenId],
    rng: &mut Pcg32,
    scratch: &mut SamplerScratch,
    algorithm: FilterAlgorithm,
) -> Result<TokenId, SampleError> {
    let n = check_inputs(cfg, penalties, logits, mask)?;
    let SamplerScratch { work, rejection, topk, .. } = scratch;
    let mut candidates =
        algorithm == FilterAlgorithm::Candidates && cfg.top_k > 0 && cfg.top_k <= MAX_CANDIDATES;
    if candidates && mask.is_none() && !penalties.penalties_active() {
        if let Logits::F32(row) = logits {
            // Nothing to apply to the row: the selector reads the caller's slice, no copy.
            if let Some(t) = sample_candidates(row, cfg, rng, topk)? {
                rejection.count_candidate_row();
                return Ok(t);
            }
            candidates = false;
        }
    }
    if mask.is_none() && !penalties.penalties_active() {
        if let Logits::F32(row) = logits {
            // Nothing to apply: the exp pass reads the caller's row, no copy.
            work.resize(n, 0.0);
            return rejection::sample_logits(Some(row), work, cfg, rng, rejection)?
                .map(TokenId::from_index)
                .ok_or_else(SampleError::all_forbidden);
        }
    }
    let work = load_masked(work, logits, mask);
    if penalties.penalties_active() {
        apply_penalties(work, recent, penalties, mask);
    }
    if candidates {
        if let Some(t) = sample_candidates(work, cfg, rng, topk)? {
            rejection.count_candidate_row();
            return Ok(t);
        }
    }
    rejection::sample_logits(None, work, cfg, rng, rejection)?
        .map(TokenId::from_index)
        .ok_or_else(SampleError::all_forbidden)
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
