//! Speculative decoding under a constraint: the masks a verifier needs for a run of draft
//! tokens, and constrained verification at any temperature.
//!
//! A draft model proposes `k` tokens; the target model scores all `k + 1` positions in one
//! forward pass. Under a constraint the verifier needs the allow-mask at each of those positions,
//! which depends on the draft tokens before it. [`validate_draft`] advances the engine through
//! the draft, filling the mask before each token, stops at the first token the grammar refuses,
//! and rolls the engine back so its state is exactly what it was (the engine's rollback history
//! must hold `k` tokens: `EngineOptions::history`, 64 by default).
//!
//! [`verify_constrained`] then runs Leviathan et al. 2023 §2.3 position by position with the
//! sampler's [`Sampler::verify_draft`], which builds both the target and the draft distributions
//! with [`sampling_distribution`](crate::sampler::sampling_distribution) under the same mask —
//! the draft must have been sampled from that same pipeline (same config, same mask) for the
//! acceptance to be unbiased. The first refused draft token ends the run with a token drawn from
//! the target's masked distribution at that position; a run accepted in full earns the bonus
//! token from the last target row.

use super::error::{DecodeError, DecodeErrorKind};
use super::run::sample_error;
use crate::engine::ConstraintEngine;
use crate::mask::TokenMask;
use crate::sampler::{Logits, Sampler, Verdict};
use crate::token::TokenId;

/// Fill `masks[i]` with the mask before `draft[i]` for every draft token the grammar allows,
/// plus the mask after the last allowed one; return how many draft tokens are allowed (`a`), so
/// `masks[0..=a]` are filled. The engine's state is restored before returning.
///
/// # Errors
/// `masks.len() < draft.len() + 1` or a mask of the wrong width
/// ([`DecodeErrorKind::Config`]); a rollback beyond the engine's history
/// ([`DecodeErrorKind::Engine`] with `RollbackTooFar`; the engine is then left after the
/// allowed draft tokens).
///
/// # Example
/// ```
/// use grammask::decode::speculative::validate_draft;
/// use grammask::{JsonConfig, JsonObjectConstraint, TokenMask, Vocabulary};
/// let vocab = Vocabulary::embedded()?;
/// let mut engine = JsonObjectConstraint::new(&vocab, &JsonConfig::default())?;
/// let mut draft = vocab.encode("{\"a\"")?;
/// draft.extend(vocab.encode("]")?); // refused after `{"a"`
/// let mut masks = vec![TokenMask::new(vocab.n_vocab()); draft.len() + 1];
/// let allowed = validate_draft(&mut engine, &draft, &mut masks)?;
/// assert_eq!(allowed, draft.len() - 1);
/// assert!(!masks[allowed].contains(draft[allowed]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate_draft(
    engine: &mut dyn ConstraintEngine,
    draft: &[TokenId],
    masks: &mut [TokenMask],
) -> Result<usize, DecodeError> {
    if masks.len() < draft.len() + 1 {
        return Err(DecodeError::new(DecodeErrorKind::Config(format!(
            "{} mask buffers for {} draft tokens (need {})",
            masks.len(),
            draft.len(),
            draft.len() + 1
        ))));
    }
    let mut allowed = 0;
    for (i, &t) in draft.iter().enumerate() {
        engine.fill_mask(&mut masks[i])?;
        if !masks[i].contains(t) || engine.advance(t).is_err() {
            break;
        }
        allowed += 1;
    }
    if allowed == draft.len() {
        engine.fill_mask(&mut masks[allowed])?;
    }
    engine.rollback(allowed)?;
    Ok(allowed)
}

/// The outcome of verifying one speculative run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecOutcome {
    /// Tokens to emit: the accepted draft prefix, then one token from the target (the
    /// replacement of the first rejected draft token, or the bonus token).
    pub tokens: Vec<TokenId>,
    /// How many draft tokens were accepted.
    pub accepted: usize,
    /// How many draft tokens the grammar allowed.
    pub grammar_allowed: usize,
}

/// Verify a constrained speculative run (see the module docs) and advance `engine` through the
/// emitted tokens.
///
/// `target` holds `draft.len() + 1` rows of target logits (row `i` predicts position `i`),
/// `draft_rows` the `draft.len()` rows the draft model sampled from, `recent` the tokens
/// generated before the run (for penalties). `masks` is scratch of at least `draft.len() + 1`
/// masks.
///
/// # Errors
/// Row counts or widths that do not match, sampler errors (NaN, dead end), engine errors.
pub fn verify_constrained(
    sampler: &mut Sampler,
    engine: &mut dyn ConstraintEngine,
    draft: &[TokenId],
    draft_rows: &[&[f32]],
    target: &[&[f32]],
    recent: &[TokenId],
    masks: &mut [TokenMask],
) -> Result<SpecOutcome, DecodeError> {
    if draft_rows.len() != draft.len() || target.len() != draft.len() + 1 {
        return Err(DecodeError::new(DecodeErrorKind::Config(format!(
            "{} draft tokens need {} draft rows and {} target rows (got {} and {})",
            draft.len(),
            draft.len(),
            draft.len() + 1,
            draft_rows.len(),
            target.len()
        ))));
    }
    let allowed = validate_draft(engine, draft, masks)?;
    let mut history = recent.to_vec();
    let mut out = SpecOutcome { tokens: Vec::new(), accepted: 0, grammar_allowed: allowed };
    let step = recent.len();
    for i in 0..allowed {
        let v = sampler
            .verify_draft(
                Logits::F32(target[i]),
                Logits::F32(draft_rows[i]),
                Some(&masks[i]),
                &history,
                draft[i],
            )
            .map_err(|e| sample_error(step + i, e))?;
        out.tokens.push(v.token());
        history.push(v.token());
        if let Verdict::Resampled(_) = v {
            break;
        }
        out.accepted += 1;
    }
    if out.accepted == allowed && !masks[allowed].is_none_allowed() {
        // Every allowed draft token was accepted: the next token comes from the target's masked
        // distribution (the bonus token, or the replacement of a grammar-refused draft token);
        // none after an accepted EOS (empty mask).
        let t = sampler
            .sample(Logits::F32(target[allowed]), Some(&masks[allowed]), &history)
            .map_err(|e| sample_error(step + allowed, e))?;
        out.tokens.push(t);
    }
    for &t in &out.tokens {
        engine.advance(t)?;
    }
    Ok(out)
}
