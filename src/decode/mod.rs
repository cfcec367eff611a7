//! The decode loop: drive a model ([`LogitsSource`]) under an optional
//! [`ConstraintEngine`](crate::ConstraintEngine) and the [`sampler`](crate::sampler), one token
//! per step, and report what happened.
//!
//! # One step (seed `000`)
//! 1. **Forced tokens first.** A latched thinking-budget close injects `</think>` (see
//!    [`think`]); an engine that [can only end](crate::ConstraintEngine::can_only_end) gets EOS. Neither
//!    calls the model, and neither carries logprobs.
//! 2. **Logits** from the model (`[n_vocab]`, checked once for width; NaN is a typed error).
//! 3. **Sample.** No engine, or `wants_mask() == false` (warm-up, an open think block): the
//!    unconstrained path — an argmax at temperature 0 (the greedy fast path), else the sampler's
//!    host pipeline. With a constraint, either the full mask is filled and the sampler draws
//!    under it (masked argmax at temperature 0), or — the default — **sample-then-check**: draw
//!    unconstrained, keep the token if the engine [allows](crate::ConstraintEngine::allows) it, and only
//!    otherwise fill the mask and draw again under it (proof of exactness in `run.rs`).
//! 4. **Advance** the engine, then stop on any EOS id (`"stop"`) or at the token limit
//!    (`"length"`).
//!
//! # The rest of the module
//! - [`models`]: the seeded random-logit model and the replay model (golden tests).
//! - [`think`]: [`ThinkSplitter`] (reasoning vs content, budget) and [`ThinkGate`] (no
//!   constraint inside `<think>`…`</think>`).
//! - [`speculative`]: masks for a run of draft tokens, and constrained speculative verification.
//! - [`forward`]: fast-forward (forced bytes and their canonical tokens).
//! - [`batch`]: the masks of N engines filled in parallel into one `u32`-row buffer.
//! - [`eos`]: EOS ids from `config.json`, `generation_config.json` and `tokenizer_config.json`.
//!
//! # Example
//! ```
//! use grammask::decode::{decode, DecodeConfig, RandomLogits};
//! use grammask::{JsonConfig, JsonObjectConstraint, Vocabulary};
//!
//! let vocab = Vocabulary::embedded()?;
//! let mut engine = JsonObjectConstraint::new(&vocab, &JsonConfig::default())?;
//! let mut model = RandomLogits::new(&vocab, 7);
//! let config = DecodeConfig::builder().max_tokens(400).temperature(0.7).seed(1).build()?;
//! let out = decode(&mut model, &vocab, Some(&mut engine), &config)?;
//! if out.finish_reason.as_str() == "stop" {
//!     assert!(serde_json::from_slice::<serde_json::Value>(&out.text)?.is_object());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod batch;
mod config;
pub mod eos;
mod error;
pub mod forward;
pub mod models;
mod run;
pub mod speculative;
pub mod think;

pub use batch::BatchMasker;
pub use config::{DecodeConfig, DecodeConfigBuilder, ThinkConfig, TokenHook, TokenHookFn};
pub use error::{DecodeError, DecodeErrorKind};
pub use forward::FastForward;
pub use models::{LogitsSource, RandomLogits, ReplayModel};
pub use run::{decode, decode_overlapped, generate_greedy};
pub use think::{ThinkGate, ThinkMarkers, ThinkSplitter};

use crate::mask::TokenMask;
use crate::sampler::TokenLogprobs;
use crate::token::TokenId;
use std::fmt;

/// Why decoding stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An EOS token was produced (the document is complete).
    Stop,
    /// The token limit was reached.
    Length,
}

impl FinishReason {
    /// The OpenAI-style name: `"stop"` or `"length"`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one step's time went, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepTiming {
    /// Constraint work: the `allows` check of sample-then-check plus any full mask fill.
    pub constraint_us: f64,
    /// Sampling (both draws when sample-then-check had to resample); logprobs excluded.
    pub sample_us: f64,
    /// True when the token was forced (think close, EOS at a finished document, fast-forward):
    /// no model call, no sampling.
    pub forced: bool,
}

/// What the loop did, counted over a whole decode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeCounters {
    /// Steps run (tokens produced).
    pub steps: usize,
    /// Calls to the model.
    pub model_calls: usize,
    /// Steps without a constraint (no engine, or `wants_mask()` false).
    pub unconstrained_steps: usize,
    /// Full masks filled.
    pub masks_filled: usize,
    /// Constrained steps whose unconstrained draw the engine allowed: no mask was filled.
    pub masks_skipped: usize,
    /// Constrained steps whose unconstrained draw the engine refused (mask filled, redrawn).
    pub check_rejections: usize,
    /// `</think>` injections by the thinking budget (0 or 1).
    pub forced_think_close: usize,
    /// EOS tokens appended because the engine could only end.
    pub forced_eos: usize,
    /// Tokens appended by fast-forward (forced bytes).
    pub fast_forward_tokens: usize,
}

impl DecodeCounters {
    /// Share of constrained steps whose full mask sample-then-check skipped (0 when none).
    pub fn skip_rate(&self) -> f64 {
        let constrained = self.masks_skipped + self.check_rejections;
        if constrained == 0 {
            0.0
        } else {
            self.masks_skipped as f64 / constrained as f64
        }
    }
}

/// The outcome of a decode.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Every token produced, forced ones and the final EOS included, markers included.
    pub tokens: Vec<TokenId>,
    /// The content: bytes of the non-EOS tokens outside the think block (all of them when
    /// thinking is not configured). Think markers are in neither channel.
    pub text: Vec<u8>,
    /// The reasoning content: bytes of the tokens inside `<think>`…`</think>`.
    pub reasoning: Vec<u8>,
    /// Why decoding stopped.
    pub finish_reason: FinishReason,
    /// Per step, when `top_logprobs_k > 0` (empty otherwise): the logprobs of the raw logits,
    /// `None` for forced tokens.
    pub logprobs: Vec<Option<TokenLogprobs>>,
    /// Time of each full mask fill, in microseconds (only steps that filled one).
    pub mask_us: Vec<f64>,
    /// One entry per step.
    pub timings: Vec<StepTiming>,
    /// What the loop did.
    pub counters: DecodeCounters,
}

impl Generation {
    fn empty() -> Generation {
        Generation {
            tokens: Vec::new(),
            text: Vec::new(),
            reasoning: Vec::new(),
            finish_reason: FinishReason::Length,
            logprobs: Vec::new(),
            mask_us: Vec::new(),
            timings: Vec::new(),
            counters: DecodeCounters::default(),
        }
    }

    /// The content as text (lossy UTF-8).
    pub fn content(&self) -> String {
        String::from_utf8_lossy(&self.text).into_owned()
    }

    /// The reasoning content as text (lossy UTF-8).
    pub fn reasoning_content(&self) -> String {
        String::from_utf8_lossy(&self.reasoning).into_owned()
    }
}

/// Greedy argmax over the allowed tokens: highest logit, lowest id on ties; `None` when no
/// token is allowed.
///
/// # Errors
/// A NaN logit on an allowed token (as `Err(token)`).
pub fn masked_argmax(logits: &[f32], mask: &TokenMask) -> Result<Option<TokenId>, TokenId> {
    let mut best: Option<(TokenId, f32)> = None;
    for t in mask.iter() {
        let v = logits[t.index()];
        if v.is_nan() {
            return Err(t);
        }
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((t, v));
        }
    }
    Ok(best.map(|(t, _)| t))
}
