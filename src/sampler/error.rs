//! The sampling-phase error: every way a sampler call can refuse its input.
//!
//! One struct with a private kind, so new failure modes can be added without breaking callers
//! (the house pattern of regex-automata's `hybrid/error.rs`). Messages name the bad value: the
//! token id holding a NaN, the offending temperature, the two lengths that disagree.

use std::fmt;

use crate::token::TokenId;

/// Why a sampler call refused its input.
///
/// Inspect it with [`SampleError::kind`]; print it with `Display` for a message that names the
/// offending value.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleError {
    kind: SampleErrorKind,
}

/// The kinds of [`SampleError`]. Non-exhaustive: more may be added.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SampleErrorKind {
    /// A logit the pipeline reads is NaN (raw, or after penalties/bias).
    NanLogit {
        /// The token whose logit is NaN.
        token: TokenId,
    },
    /// No token can be chosen: the mask forbids all of them, or every allowed logit is `-inf`.
    AllForbidden,
    /// The logits row is empty.
    EmptyLogits,
    /// The mask covers a different number of tokens than the logits row.
    LengthMismatch {
        /// `TokenMask::len()`.
        mask: usize,
        /// Number of logits.
        logits: usize,
    },
    /// Two probability rows (speculative target and draft) differ in length.
    DistributionMismatch {
        /// Length of the target row.
        target: usize,
        /// Length of the draft row.
        draft: usize,
    },
    /// `temperature` is negative, infinite or NaN.
    Temperature(f32),
    /// `top_p` is outside `(0, 1]`.
    TopP(f32),
    /// `min_p` is outside `[0, 1]`.
    MinP(f32),
    /// `top_logprobs_k` exceeds [`MAX_TOP_LOGPROBS`](crate::sampler::MAX_TOP_LOGPROBS).
    TopLogprobsK(usize),
    /// A penalty is out of its domain (repetition penalty not finite and positive, presence or
    /// frequency penalty not finite, a bias that is NaN).
    Penalty {
        /// The field name (`repetition_penalty`, `presence_penalty`, ...).
        name: &'static str,
        /// The rejected value.
        value: f32,
    },
    /// A token id (the chosen token of a logprob query, a speculative draft token) is past the
    /// end of the vocabulary.
    TokenOutOfRange {
        /// The token.
        token: TokenId,
        /// The vocabulary size.
        vocab: usize,
    },
}

impl SampleError {
    /// What went wrong.
    pub fn kind(&self) -> &SampleErrorKind {
        &self.kind
    }

    pub(crate) fn new(kind: SampleErrorKind) -> SampleError {
        SampleError { kind }
    }

    pub(crate) fn nan(index: usize) -> SampleError {
        SampleError::new(SampleErrorKind::NanLogit { token: TokenId::from_index(index) })
    }

    pub(crate) fn all_forbidden() -> SampleError {
        SampleError::new(SampleErrorKind::AllForbidden)
    }
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            SampleErrorKind::NanLogit { token } => {
                write!(f, "logit of token {token} is NaN")
            }
            SampleErrorKind::AllForbidden => write!(
                f,
                "no token can be sampled: the mask forbids every token or every allowed logit is -inf"
            ),
            SampleErrorKind::EmptyLogits => write!(f, "the logits row is empty"),
            SampleErrorKind::LengthMismatch { mask, logits } => write!(
                f,
                "mask covers {mask} tokens but the logits row has {logits} entries"
            ),
            SampleErrorKind::DistributionMismatch { target, draft } => write!(
                f,
                "target distribution has {target} entries but the draft distribution has {draft}"
            ),
            SampleErrorKind::Temperature(t) => {
                write!(f, "temperature must be finite and >= 0, got {t}")
            }
            SampleErrorKind::TopP(p) => write!(f, "top_p must be in (0, 1], got {p}"),
            SampleErrorKind::MinP(p) => write!(f, "min_p must be in [0, 1], got {p}"),
            SampleErrorKind::TopLogprobsK(k) => write!(
                f,
                "top_logprobs_k must be at most {}, got {k}",
                crate::sampler::MAX_TOP_LOGPROBS
            ),
            SampleErrorKind::Penalty { name, value } => {
                write!(f, "{name} is out of range: {value}")
            }
            SampleErrorKind::TokenOutOfRange { token, vocab } => {
                write!(f, "token {token} is out of range for a vocabulary of {vocab}")
            }
        }
    }
}

impl std::error::Error for SampleError {}
