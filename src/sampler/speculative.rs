//! Speculative-decoding acceptance (Leviathan, Kalman & Matias 2023, "Fast Inference from
//! Transformers via Speculative Decoding", §2.3): accept a draft token with probability
//! `min(1, p(x)/q(x))`, otherwise resample from the normalised residual `max(0, p − q)`.
//!
//! The output is distributed exactly as the target distribution `p` only if `p` and `q` are the
//! distributions the two models are *sampled* from, so both sides are built by the same
//! [`sampling_distribution`](super::sampling_distribution) pipeline (mask → penalties →
//! softmax → filters → renormalise).

use super::error::{SampleError, SampleErrorKind};
use super::filters::{draw_index, sum_f64};
use super::pcg::Pcg32;
use crate::token::TokenId;

/// The outcome of verifying one draft token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The draft token is kept.
    Accepted(TokenId),
    /// The draft token is rejected; this token, drawn from the residual, replaces it and ends
    /// the speculative run.
    Resampled(TokenId),
}

impl Verdict {
    /// The token to emit.
    pub fn token(self) -> TokenId {
        match self {
            Verdict::Accepted(t) | Verdict::Resampled(t) => t,
        }
    }

    /// True when the draft token was accepted.
    pub fn is_accepted(self) -> bool {
        matches!(self, Verdict::Accepted(_))
    }
}

/// Accept or replace `token`, drawn by the draft model from `draft` (`q`), given the target
/// model's distribution `target` (`p`). Consumes one uniform draw, and a second one on
/// rejection. `residual` is scratch.
///
/// Acceptance is `r · q(x) < p(x)` with `r` uniform in `[0, 1)`, i.e. probability
/// `min(1, p/q)`. On rejection the replacement is drawn by inverse CDF from `max(0, p − q)`; if
/// that residual is empty (the distributions agree to rounding), from `p` itself.
///
/// # Errors
/// The rows differ in length, `token` is out of range, or `target` has no positive entry.
///
/// # Example
/// ```
/// use grammask::{sampler::{speculative_accept, Pcg32, Verdict}, TokenId};
/// let mut rng = Pcg32::new(1);
/// let mut residual = Vec::new();
/// // The target puts all its mass on token 0: a draft of token 1 is always replaced by 0.
/// let v = speculative_accept(&[1.0, 0.0], &[0.5, 0.5], TokenId(1), &mut rng, &mut residual);
/// assert_eq!(v.unwrap(), Verdict::Resampled(TokenId(0)));
/// ```
pub fn speculative_accept(
    target: &[f32],
    draft: &[f32],
    token: TokenId,
    rng: &mut Pcg32,
    residual: &mut Vec<f32>,
) -> Result<Verdict, SampleError> {
    if target.len() != draft.len() {
        return Err(SampleError::new(SampleErrorKind::DistributionMismatch {
            target: target.len(),
            draft: draft.len(),
        }));
    }
    let i = token.index();
    if i >= target.len() {
        return Err(SampleError::new(SampleErrorKind::TokenOutOfRange {
            token,
            vocab: target.len(),
        }));
    }
    let (p, q) = (target[i], draft[i]);
    let r = rng.next_f32();
    if r * q < p {
        return Ok(Verdict::Accepted(token));
    }
    residual.clear();
    residual.extend(target.iter().zip(draft).map(|(&p, &q)| (p - q).max(0.0)));
    let row: &[f32] = if sum_f64(residual) > 0.0 { residual } else { target };
    let r2 = rng.next_f32();
    draw_index(row, r2)
        .map(|j| Verdict::Resampled(TokenId::from_index(j)))
        .ok_or_else(SampleError::all_forbidden)
}
