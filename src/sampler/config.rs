//! Sampling and penalty configuration: the per-request knobs, their identity defaults and their
//! validation.
//!
//! The two configs are split the way the pipeline is: [`PenaltyConfig`] drives the logit
//! processors (steps 2–5 of the pipeline, before softmax) and [`SamplerConfig`] drives
//! temperature, the filters and the draw (steps 6–11). Each default is the identity of its step,
//! so a default-constructed config does no host work for that step.

use super::error::{SampleError, SampleErrorKind};
use crate::token::TokenId;

/// Largest `top_logprobs_k` accepted (the OpenAI `top_logprobs` cap).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Number of trailing generated tokens the penalties look at (mlx-lm's `context_size=20`).
pub const PENALTY_WINDOW: usize = 20;

/// Seed used when a request gives none. Absent-seed requests are therefore deterministic per
/// model and prompt at temperature > 0; callers that want distinct streams must pass distinct
/// seeds.
pub const DEFAULT_SEED: u64 = 0xA7A7;

/// How the host pipeline applies top-k / top-p / min-p when it draws a token.
///
/// Every algorithm samples from exactly the same distribution: they decide the support with
/// the same rules on the same `f32` values (top-p by exact sums, `sampler::mass`), so
/// [`sampling_distribution`](super::sampling_distribution) is the distribution of each of them.
/// They differ in cost and in how they consume the random stream. Greedy and
/// temperature-only steps never depend on it.
///
/// This is a config field and nothing else: the library reads no environment variable. (The
/// CLI maps `GRAMMASK_SAMPLING_REJECTION=0` onto [`Sort`](FilterAlgorithm::Sort), as a kill
/// switch for its own runs.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterAlgorithm {
    /// [`Candidates`](FilterAlgorithm::Candidates) (the default).
    #[default]
    Auto,
    /// The sort-based chain: softmax, top-p → min-p → top-k by sorting, renormalise, one
    /// inverse-CDF draw (seed 000; one `next_f32` per step).
    Sort,
    /// Softmax, then dual-pivot rejection sampling without sorting
    /// ([`rejection_sample`](super::rejection_sample); one `next_f32` per round).
    Rejection,
    /// The top-k candidate path ([`sample_candidates`](super::sample_candidates)) when
    /// `0 < top_k ≤ 32`, otherwise [`Rejection`](FilterAlgorithm::Rejection).
    Candidates,
}

/// Where the temperature is applied relative to top-p, min-p and top-k.
///
/// Both conventions are in use: HF transformers' warpers and vLLM divide the logits by the
/// temperature first and filter the tempered distribution; mlx-lm's `make_sampler` (and
/// llama.cpp's default chain) filter the temperature-1 distribution and apply the temperature
/// only in the final draw. The two agree at temperature 1 and whenever no filter is active.
/// `docs/sampler.md` gives the numbers and why [`BeforeFilters`](Self::BeforeFilters) is the
/// default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TemperaturePlacement {
    /// Scale by `1/T`, then filter (seed 000's step list; HF transformers, vLLM). The default.
    #[default]
    BeforeFilters,
    /// Filter the temperature-1 probabilities, then draw from the kept tokens with
    /// probabilities `∝ exp(logit / T)` (mlx-lm's `make_sampler`).
    AfterFilters,
}

/// Temperature, filters, seed and logprob capture for one request.
///
/// The default is greedy decoding (temperature 0, like mlx-lm's `make_sampler`) with every
/// filter off and no logprobs. Each field's default is stated on it; build a config with
/// [`SamplerConfig::default`] and the `with_*` methods (the struct is `#[non_exhaustive]`, so
/// new knobs can be added without breaking callers; the fields stay readable).
///
/// # Example
/// ```
/// use grammask::sampler::SamplerConfig;
/// let cfg = SamplerConfig::default().with_temperature(0.7).with_top_p(0.9).with_seed(7);
/// assert!(cfg.sampling_active());
/// cfg.validate().unwrap();
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SamplerConfig {
    /// Softmax temperature. `0` (the default) means greedy: no softmax, no random draw.
    pub temperature: f32,
    /// Nucleus mass in `(0, 1]`; `1` (the default) keeps everything.
    pub top_p: f32,
    /// Keep the `top_k` most likely tokens; `0` (the default) keeps everything.
    pub top_k: usize,
    /// Drop tokens below `min_p × max_prob`, `min_p` in `[0, 1]`; `0` (the default) is off.
    pub min_p: f32,
    /// The request seed; `None` uses [`DEFAULT_SEED`].
    pub seed: Option<u64>,
    /// How many alternative logprobs to report per step, at most [`MAX_TOP_LOGPROBS`]; `0` (the
    /// default) disables logprob capture entirely.
    pub top_logprobs_k: usize,
    /// Which implementation applies the filters ([`FilterAlgorithm::Auto`] by default).
    pub filter_algorithm: FilterAlgorithm,
    /// Temperature before or after the filters ([`TemperaturePlacement::BeforeFilters`] by
    /// default).
    pub temperature_placement: TemperaturePlacement,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            seed: None,
            top_logprobs_k: 0,
            filter_algorithm: FilterAlgorithm::Auto,
            temperature_placement: TemperaturePlacement::BeforeFilters,
        }
    }
}

impl SamplerConfig {
    /// Set the temperature.
    pub fn with_temperature(mut self, t: f32) -> Self {
        self.temperature = t;
        self
    }

    /// Set the nucleus mass.
    pub fn with_top_p(mut self, p: f32) -> Self {
        self.top_p = p;
        self
    }

    /// Set top-k (`0` is off).
    pub fn with_top_k(mut self, k: usize) -> Self {
        self.top_k = k;
        self
    }

    /// Set min-p (`0` is off).
    pub fn with_min_p(mut self, p: f32) -> Self {
        self.min_p = p;
        self
    }

    /// Set the seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Set or clear the seed (`None` uses [`DEFAULT_SEED`]).
    pub fn with_seed_opt(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// Set the number of top logprobs to capture.
    pub fn with_top_logprobs(mut self, k: usize) -> Self {
        self.top_logprobs_k = k;
        self
    }

    /// Choose the filter implementation.
    pub fn with_filter_algorithm(mut self, a: FilterAlgorithm) -> Self {
        self.filter_algorithm = a;
        self
    }

    /// Choose where the temperature is applied.
    pub fn with_temperature_placement(mut self, p: TemperaturePlacement) -> Self {
        self.temperature_placement = p;
        self
    }

    /// The algorithm a step uses: [`FilterAlgorithm::Auto`] means
    /// [`FilterAlgorithm::Candidates`]; the others are themselves.
    pub fn effective_filter_algorithm(&self) -> FilterAlgorithm {
        match self.filter_algorithm {
            FilterAlgorithm::Auto => FilterAlgorithm::Candidates,
            a => a,
        }
    }

    /// True when some filter can remove a token from a row of `n`: top-p below 1, min-p above
    /// 0, or `0 < top_k < n`.
    #[inline]
    pub(crate) fn filters_active(&self, n: usize) -> bool {
        self.top_p_active() || self.min_p > 0.0 || (self.top_k > 0 && self.top_k < n)
    }

    /// True when a random draw happens, i.e. `temperature > 0`. When false the decode step is
    /// greedy (an argmax) and the filters are irrelevant.
    #[inline]
    pub fn sampling_active(&self) -> bool {
        self.temperature > 0.0
    }

    /// The request seed, or [`DEFAULT_SEED`] (`0xA7A7`) when none was given.
    #[inline]
    pub fn seed_or_default(&self) -> u64 {
        self.seed.unwrap_or(DEFAULT_SEED)
    }

    /// The scale the filters see: `1/T` with [`TemperaturePlacement::BeforeFilters`], `1` with
    /// [`TemperaturePlacement::AfterFilters`].
    #[inline]
    pub(crate) fn filter_scale(&self) -> f32 {
        match self.temperature_placement {
            TemperaturePlacement::BeforeFilters => 1.0 / self.temperature,
            TemperaturePlacement::AfterFilters => 1.0,
        }
    }

    /// True when the draw weights differ from the values the filters rank: `AfterFilters` at a
    /// temperature other than 1.
    #[inline]
    pub(crate) fn split_weights(&self) -> bool {
        self.temperature_placement == TemperaturePlacement::AfterFilters && self.temperature != 1.0
    }

    /// True when top-p removes anything, i.e. `0 < top_p < 1`.
    #[inline]
    pub(crate) fn top_p_active(&self) -> bool {
        self.top_p > 0.0 && self.top_p < 1.0
    }

    /// Check every field against its domain.
    ///
    /// # Errors
    /// A [`SampleError`] naming the first bad field: temperature < 0 or NaN, top_p outside
    /// `(0, 1]`, min_p outside `[0, 1]`, top_logprobs_k above [`MAX_TOP_LOGPROBS`].
    pub fn validate(&self) -> Result<(), SampleError> {
        // Each range check is written so that NaN fails it.
        if self.temperature.is_nan() || self.temperature < 0.0 || self.temperature.is_infinite() {
            return Err(SampleError::new(SampleErrorKind::Temperature(self.temperature)));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SampleError::new(SampleErrorKind::TopP(self.top_p)));
        }
        if !(self.min_p >= 0.0 && self.min_p <= 1.0) {
            return Err(SampleError::new(SampleErrorKind::MinP(self.min_p)));
        }
        if self.top_logprobs_k > MAX_TOP_LOGPROBS {
            return Err(SampleError::new(SampleErrorKind::TopLogprobsK(self.top_logprobs_k)));
        }
        Ok(())
    }
}

/// The logit processors of one request: additive bias and the three repetition penalties.
///
/// All three penalties look at the window of the last [`PENALTY_WINDOW`] (20) generated tokens
/// that the caller passes to each step (mlx-lm's `context_size=20`; unlike OpenAI, tokens older
/// than the window are not penalised). Identity values: `repetition_penalty = 1`,
/// `presence_penalty = 0`, `frequency_penalty = 0`, empty `logit_bias` (the defaults). Build
/// it with [`PenaltyConfig::default`] and the `with_*` methods (`#[non_exhaustive]`).
///
/// # Example
/// ```
/// use grammask::{sampler::PenaltyConfig, TokenId};
/// let pen = PenaltyConfig::default().with_repetition_penalty(1.1).with_bias(TokenId(3), -5.0);
/// assert!(pen.penalties_active());
/// assert!(!PenaltyConfig::default().penalties_active());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PenaltyConfig {
    /// Sign-aware multiplicative penalty (CTRL, Keskar et al. 2019): a positive logit is divided
    /// by it, a negative one multiplied, once per unique id in the window. Must be finite and
    /// positive.
    pub repetition_penalty: f32,
    /// Subtracted once from the logit of every id present in the window.
    pub presence_penalty: f32,
    /// Subtracted `count` times from the logit of an id seen `count` times in the window.
    pub frequency_penalty: f32,
    /// Additive biases, applied first. Ids past the vocabulary are skipped; an id listed twice
    /// gets both biases. `-inf` bans a token.
    pub logit_bias: Vec<(TokenId, f32)>,
}

impl Default for PenaltyConfig {
    fn default() -> Self {
        PenaltyConfig {
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
        }
    }
}

impl PenaltyConfig {
    /// Set the repetition penalty.
    pub fn with_repetition_penalty(mut self, p: f32) -> Self {
        self.repetition_penalty = p;
        self
    }

    /// Set the presence penalty.
    pub fn with_presence_penalty(mut self, p: f32) -> Self {
        self.presence_penalty = p;
        self
    }

    /// Set the frequency penalty.
    pub fn with_frequency_penalty(mut self, p: f32) -> Self {
        self.frequency_penalty = p;
        self
    }

    /// Add a logit bias for `token`.
    pub fn with_bias(mut self, token: TokenId, bias: f32) -> Self {
        self.logit_bias.push((token, bias));
        self
    }

    /// Replace every logit bias with `biases`.
    pub fn with_logit_bias(mut self, biases: Vec<(TokenId, f32)>) -> Self {
        self.logit_bias = biases;
        self
    }

    /// False when every field is at its identity value; then no processor runs and the greedy
    /// path needs no host copy of the logits.
    #[inline]
    pub fn penalties_active(&self) -> bool {
        self.repetition_penalty != 1.0
            || self.presence_penalty != 0.0
            || self.frequency_penalty != 0.0
            || !self.logit_bias.is_empty()
    }

    /// True when a window-based penalty (repetition, presence, frequency) is not at identity.
    #[inline]
    pub(crate) fn window_active(&self) -> bool {
        self.repetition_penalty != 1.0
            || self.presence_penalty != 0.0
            || self.frequency_penalty != 0.0
    }

    /// Check every field against its domain.
    ///
    /// # Errors
    /// A [`SampleError`] naming the field: repetition penalty not finite and positive, presence
    /// or frequency penalty not finite, a NaN bias.
    pub fn validate(&self) -> Result<(), SampleError> {
        let bad = |name, value| Err(SampleError::new(SampleErrorKind::Penalty { name, value }));
        if self.repetition_penalty.is_nan()
            || self.repetition_penalty <= 0.0
            || !self.repetition_penalty.is_finite()
        {
            return bad("repetition_penalty", self.repetition_penalty);
        }
        if !self.presence_penalty.is_finite() {
            return bad("presence_penalty", self.presence_penalty);
        }
        if !self.frequency_penalty.is_finite() {
            return bad("frequency_penalty", self.frequency_penalty);
        }
        if let Some(&(_, b)) = self.logit_bias.iter().find(|(_, b)| b.is_nan()) {
            return bad("logit_bias", b);
        }
        Ok(())
    }
}
