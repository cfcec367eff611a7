//! The decode loop: drive a model ([`LogitsSource`]) under a [`ConstraintEngine`], one token per
//! step, and report what happened.
//!
//! Per step: ask `wants_mask()`, fill the mask only when wanted, pick the token (greedy masked
//! argmax: the highest logit among allowed tokens, lowest id on ties), `advance` the engine, and
//! stop on any EOS id (`"stop"`), when the token limit is reached (`"length"`), or when the
//! engine can only end. Mask computation is timed separately from everything else.

pub mod models;

pub use models::{LogitsSource, RandomLogits};

use crate::engine::{ConstraintEngine, EngineError};
use crate::mask::TokenMask;
use crate::token::TokenId;
use std::fmt;
use std::time::Instant;

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

/// An error that stops the decode loop.
#[derive(Debug)]
pub struct DecodeError {
    kind: DecodeErrorKind,
}

/// What stopped the decode loop.
#[derive(Debug)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The engine allows no token at all (a dead end: impossible for grammask's engines).
    DeadEnd {
        /// The step.
        step: usize,
    },
    /// The model produced a NaN logit for an allowed token.
    NanLogit {
        /// The step.
        step: usize,
        /// The token.
        token: TokenId,
    },
    /// The model's logits width differs from the engine's vocabulary.
    WidthMismatch {
        /// The model's width.
        model: usize,
        /// The vocabulary's width.
        vocab: usize,
    },
    /// The engine refused a token the loop picked from its own mask.
    Engine(EngineError),
}

impl DecodeError {
    fn new(kind: DecodeErrorKind) -> Self {
        DecodeError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &DecodeErrorKind {
        &self.kind
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DecodeErrorKind::DeadEnd { step } => {
                write!(f, "dead end at step {step}: the engine allows no token")
            }
            DecodeErrorKind::NanLogit { step, token } => {
                write!(f, "the model produced a NaN logit for token {token} at step {step}")
            }
            DecodeErrorKind::WidthMismatch { model, vocab } => {
                write!(f, "the model produces {model} logits but the vocabulary has {vocab} tokens")
            }
            DecodeErrorKind::Engine(e) => write!(f, "engine error: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The outcome of a decode.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Every token produced, EOS included.
    pub tokens: Vec<TokenId>,
    /// The text of the non-EOS tokens.
    pub text: Vec<u8>,
    /// Why decoding stopped.
    pub finish_reason: FinishReason,
    /// Time spent computing each step's mask, in microseconds (steps that computed one).
    pub mask_us: Vec<f64>,
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

/// Decode greedily under `engine` for at most `max_tokens` tokens.
///
/// # Errors
/// A width mismatch, a NaN logit, a dead end, or an engine error.
pub fn generate_greedy(
    model: &mut dyn LogitsSource,
    engine: &mut dyn ConstraintEngine,
    max_tokens: usize,
) -> Result<Generation, DecodeError> {
    let vocab = engine.vocab().clone();
    if model.n_vocab() != vocab.n_vocab() {
        return Err(DecodeError::new(DecodeErrorKind::WidthMismatch {
            model: model.n_vocab(),
            vocab: vocab.n_vocab(),
        }));
    }
    let mut logits = vec![0.0f32; vocab.n_vocab()];
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut out = Generation {
        tokens: Vec::new(),
        text: Vec::new(),
        finish_reason: FinishReason::Length,
        mask_us: Vec::new(),
    };
    for step in 0..max_tokens {
        model.logits(&out.tokens, &mut logits);
        if engine.wants_mask() {
            let t0 = Instant::now();
            engine
                .fill_mask(&mut mask)
                .map_err(|e| DecodeError::new(DecodeErrorKind::Engine(e)))?;
            out.mask_us.push(t0.elapsed().as_secs_f64() * 1e6);
        } else {
            mask.set_all();
        }
        let token = masked_argmax(&logits, &mask)
            .map_err(|token| DecodeError::new(DecodeErrorKind::NanLogit { step, token }))?
            .ok_or_else(|| DecodeError::new(DecodeErrorKind::DeadEnd { step }))?;
        engine.advance(token).map_err(|e| DecodeError::new(DecodeErrorKind::Engine(e)))?;
        out.tokens.push(token);
        if vocab.is_eos(token) {
            out.finish_reason = FinishReason::Stop;
            break;
        }
        out.text.extend_from_slice(vocab.token_bytes(token));
    }
    Ok(out)
}
