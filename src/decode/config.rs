//! [`DecodeConfig`]: everything one decode request sets, with explicit defaults and a builder
//! that validates (the sampler's configs, the thinking options).

use super::error::{DecodeError, DecodeErrorKind};
use super::forward::FastForward;
use super::think::ThinkMarkers;
use crate::sampler::{LogprobsMode, PenaltyConfig, SamplerConfig, TokenLogprobs};
use crate::token::TokenId;
use std::sync::Arc;

/// A callback the loop calls for every token it appends, as it appends it (before the next
/// model call): the token's index in the generation, the token, and its log-probabilities
/// when they were asked for and the token was sampled (`None` for forced tokens). For
/// streaming what the loop computes, e.g. a server's per-chunk logprobs.
#[derive(Clone)]
pub struct TokenHook(pub Arc<TokenHookFn>);

/// The function behind a [`TokenHook`]: (index, token, logprobs).
pub type TokenHookFn = dyn Fn(usize, TokenId, Option<&TokenLogprobs>) + Send + Sync;

impl std::fmt::Debug for TokenHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenHook(..)")
    }
}

/// Thinking-model options: where the think block is and how long it may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThinkConfig {
    /// The `<think>`/`</think>` ids; `None` resolves them from the vocabulary
    /// ([`ThinkMarkers::from_vocab`]) when decoding starts.
    pub markers: Option<ThinkMarkers>,
    /// True when the prompt already opened the think block (Qwen3's chat template prefills
    /// `<think>`), so the first generated tokens are reasoning. Default `true`.
    pub starts_open: bool,
    /// At most this many reasoning tokens; the token that would exceed it is replaced by
    /// `</think>` (exactly once). `None` (the default): no budget, zero cost.
    pub budget: Option<usize>,
}

impl Default for ThinkConfig {
    fn default() -> Self {
        ThinkConfig { markers: None, starts_open: true, budget: None }
    }
}

/// One decode request's settings.
///
/// Defaults: 512 tokens, greedy sampling, no penalties, sample-then-check on, EOS appended
/// without a model call when the engine can only end, no thinking, the vocabulary's EOS ids.
///
/// # Example
/// ```
/// use grammask::decode::DecodeConfig;
/// let cfg = DecodeConfig::builder().max_tokens(64).temperature(0.8).top_p(0.95).seed(3).build()?;
/// assert_eq!(cfg.max_tokens, 64);
/// # Ok::<(), grammask::decode::DecodeError>(())
/// ```
#[derive(Clone, Debug)]
pub struct DecodeConfig {
    /// Token limit (forced tokens count).
    pub max_tokens: usize,
    /// Temperature, filters, seed, logprobs.
    pub sampler: SamplerConfig,
    /// Repetition, presence, frequency penalties and logit bias.
    pub penalties: PenaltyConfig,
    /// Sample-then-check (llama.cpp): draw unconstrained and fill the mask only when the engine
    /// refuses the draw. Exact (same distribution as masking first) at temperature 0 and whenever
    /// no truncation filter (top-p < 1, top-k, min-p) is active; with a truncation filter the
    /// loop always masks first, whatever this says. Default `true`.
    pub sample_then_check: bool,
    /// Append EOS without calling the model when the engine can only end. Default `true`.
    pub end_when_only_eos: bool,
    /// Thinking-model options (`None`: no think block handling, all text is content).
    pub think: Option<ThinkConfig>,
    /// EOS ids overriding the vocabulary's (e.g. from [`super::eos::load_eos_ids`]).
    pub eos_ids: Option<Vec<TokenId>>,
    /// Fast-forward: append the tokens of bytes the grammar forces without calling the model
    /// (see [`super::forward`]). `None` (the default): off.
    pub fast_forward: Option<Arc<FastForward>>,
    /// Called for every appended token ([`TokenHook`]). `None` (the default): nothing.
    pub on_token: Option<TokenHook>,
    /// Which distribution logprobs are read from (default [`LogprobsMode::Raw`]). With
    /// [`LogprobsMode::Processed`] a constrained step fills its mask even when
    /// sample-then-check accepted the first draw, so that refused tokens stay out.
    pub logprobs_mode: LogprobsMode,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        DecodeConfig {
            max_tokens: 512,
            sampler: SamplerConfig::default(),
            penalties: PenaltyConfig::default(),
            sample_then_check: true,
            end_when_only_eos: true,
            think: None,
            eos_ids: None,
            fast_forward: None,
            on_token: None,
            logprobs_mode: LogprobsMode::Raw,
        }
    }
}

impl DecodeConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> DecodeConfigBuilder {
        DecodeConfigBuilder { config: DecodeConfig::default() }
    }

    /// Greedy decoding of at most `max_tokens` tokens, otherwise the defaults.
    pub fn greedy(max_tokens: usize) -> DecodeConfig {
        DecodeConfig { max_tokens, ..DecodeConfig::default() }
    }

    /// Check the sampler configs and the thinking options.
    ///
    /// # Errors
    /// [`DecodeErrorKind::Sample`] for an invalid sampler or penalty config.
    pub fn validate(&self) -> Result<(), DecodeError> {
        self.sampler.validate().map_err(|e| DecodeError::new(DecodeErrorKind::Sample(e)))?;
        self.penalties.validate().map_err(|e| DecodeError::new(DecodeErrorKind::Sample(e)))?;
        Ok(())
    }
}

/// Builds a [`DecodeConfig`]; [`DecodeConfigBuilder::build`] validates it.
#[derive(Clone, Debug)]
pub struct DecodeConfigBuilder {
    config: DecodeConfig,
}

impl DecodeConfigBuilder {
    /// Token limit.
    pub fn max_tokens(mut self, n: usize) -> Self {
        self.config.max_tokens = n;
        self
    }
    /// The whole sampler config.
    pub fn sampler(mut self, s: SamplerConfig) -> Self {
        self.config.sampler = s;
        self
    }
    /// The penalty config.
    pub fn penalties(mut self, p: PenaltyConfig) -> Self {
        self.config.penalties = p;
        self
    }
    /// Temperature (`0`: greedy).
    pub fn temperature(mut self, t: f32) -> Self {
        self.config.sampler.temperature = t;
        self
    }
    /// Nucleus mass.
    pub fn top_p(mut self, p: f32) -> Self {
        self.config.sampler.top_p = p;
        self
    }
    /// Top-k (`0`: off).
    pub fn top_k(mut self, k: usize) -> Self {
        self.config.sampler.top_k = k;
        self
    }
    /// Min-p (`0`: off).
    pub fn min_p(mut self, p: f32) -> Self {
        self.config.sampler.min_p = p;
        self
    }
    /// Temperature before the filters (the default) or after them (mlx-lm); see
    /// [`TemperaturePlacement`](crate::sampler::TemperaturePlacement).
    pub fn temperature_placement(mut self, p: crate::sampler::TemperaturePlacement) -> Self {
        self.config.sampler.temperature_placement = p;
        self
    }
    /// Seed of the request's random stream.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.sampler.seed = Some(seed);
        self
    }
    /// Which distribution logprobs are read from (default [`LogprobsMode::Raw`]).
    pub fn logprobs_mode(mut self, mode: LogprobsMode) -> Self {
        self.config.logprobs_mode = mode;
        self
    }

    /// Capture logprobs with the `k` best alternatives per step (`0`: off, at most 20).
    pub fn logprobs(mut self, k: usize) -> Self {
        self.config.sampler.top_logprobs_k = k;
        self
    }
    /// Sample-then-check on or off.
    pub fn sample_then_check(mut self, on: bool) -> Self {
        self.config.sample_then_check = on;
        self
    }
    /// Append EOS without a model call when the engine can only end.
    pub fn end_when_only_eos(mut self, on: bool) -> Self {
        self.config.end_when_only_eos = on;
        self
    }
    /// Thinking-model options.
    pub fn think(mut self, think: ThinkConfig) -> Self {
        self.config.think = Some(think);
        self
    }
    /// A thinking budget (enables thinking with the defaults of [`ThinkConfig`] if it was off;
    /// `None` keeps thinking as configured and removes the budget).
    pub fn think_budget(mut self, budget: Option<usize>) -> Self {
        match (&mut self.config.think, budget) {
            (Some(t), b) => t.budget = b,
            (None, Some(b)) => {
                self.config.think = Some(ThinkConfig { budget: Some(b), ..ThinkConfig::default() })
            }
            (None, None) => {}
        }
        self
    }
    /// Turn fast-forward on with this index of the vocabulary.
    pub fn fast_forward(mut self, ff: Arc<FastForward>) -> Self {
        self.config.fast_forward = Some(ff);
        self
    }
    /// EOS ids overriding the vocabulary's.
    pub fn eos_ids(mut self, ids: Vec<TokenId>) -> Self {
        self.config.eos_ids = Some(ids);
        self
    }
    /// Call `hook` for every appended token ([`TokenHook`]).
    pub fn on_token(
        mut self,
        hook: impl Fn(usize, TokenId, Option<&TokenLogprobs>) + Send + Sync + 'static,
    ) -> Self {
        self.config.on_token = Some(TokenHook(Arc::new(hook)));
        self
    }

    /// The validated config.
    ///
    /// # Errors
    /// As [`DecodeConfig::validate`].
    pub fn build(self) -> Result<DecodeConfig, DecodeError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
