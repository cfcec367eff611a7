//! The decode-phase error: every way the decode loop (and its helpers: speculative validation,
//! batch masks, think markers, EOS config files) stops with a typed reason.
//!
//! One struct with a private constructor and a public `#[non_exhaustive]` kind, like the other
//! phases' errors; messages name the step, the token and the engine's own error.

use crate::engine::EngineError;
use crate::sampler::SampleError;
use crate::token::TokenId;
use std::fmt;

/// An error that stops the decode loop or one of its helpers.
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
    /// The model produced a NaN logit for a token the step had to read.
    NanLogit {
        /// The step.
        step: usize,
        /// The token.
        token: TokenId,
    },
    /// The model's logits width differs from the vocabulary's (or an engine's vocabulary
    /// differs from the loop's).
    WidthMismatch {
        /// The model's (or engine's) width.
        model: usize,
        /// The vocabulary's width.
        vocab: usize,
    },
    /// The engine refused a token, or could not roll back / fill a mask.
    Engine(EngineError),
    /// The sampler refused its input (other than NaN and an empty mask, reported above).
    Sample(SampleError),
    /// An invalid [`DecodeConfig`](super::DecodeConfig) (the sampler config, a think budget
    /// without markers, a buffer of the wrong size).
    Config(String),
    /// The vocabulary has no `<think>`/`</think>` tokens but thinking was requested.
    NoThinkMarkers,
    /// The model failed to produce logits ([`LogitsSource::try_logits`](super::LogitsSource::try_logits)).
    Model {
        /// The step.
        step: usize,
        /// The model's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A model config file (EOS ids) could not be read or understood.
    EosConfig {
        /// The file.
        file: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl DecodeError {
    pub(crate) fn new(kind: DecodeErrorKind) -> Self {
        DecodeError { kind }
    }

    /// What went wrong.
    pub fn kind(&self) -> &DecodeErrorKind {
        &self.kind
    }
}

impl From<EngineError> for DecodeError {
    fn from(e: EngineError) -> Self {
        DecodeError::new(DecodeErrorKind::Engine(e))
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
            DecodeErrorKind::Sample(e) => write!(f, "sampler error: {e}"),
            DecodeErrorKind::Config(why) => write!(f, "invalid decode config: {why}"),
            DecodeErrorKind::NoThinkMarkers => {
                write!(f, "thinking requested but the vocabulary has no <think>/</think> tokens")
            }
            DecodeErrorKind::Model { step, source } => {
                write!(f, "the model failed at step {step}: {source}")
            }
            DecodeErrorKind::EosConfig { file, reason } => {
                write!(f, "cannot read EOS ids from {file}: {reason}")
            }
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            DecodeErrorKind::Engine(e) => Some(e),
            DecodeErrorKind::Sample(e) => Some(e),
            DecodeErrorKind::Model { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
