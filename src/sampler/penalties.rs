//! The logit processors, steps 2–5 of the pipeline: logit bias → repetition → presence →
//! frequency, in mlx-lm's `make_logits_processors` order.
//!
//! They touch only the biased ids and the (at most 20) ids of the penalty window, so they cost
//! nothing proportional to the vocabulary; the window is tallied in a fixed array, without
//! allocation.

use super::config::{PenaltyConfig, PENALTY_WINDOW};
use crate::mask::TokenMask;
use crate::token::TokenId;

/// The distinct ids of the window and how often each occurs, in first-seen order.
struct WindowCounts {
    ids: [u32; PENALTY_WINDOW],
    counts: [u32; PENALTY_WINDOW],
    len: usize,
}

impl WindowCounts {
    /// Tally the last [`PENALTY_WINDOW`] entries of `recent`, skipping ids `>= vocab`.
    fn tally(recent: &[TokenId], vocab: usize) -> WindowCounts {
        let mut w = WindowCounts { ids: [0; PENALTY_WINDOW], counts: [0; PENALTY_WINDOW], len: 0 };
        let start = recent.len().saturating_sub(PENALTY_WINDOW);
        for &t in &recent[start..] {
            if t.index() >= vocab {
                continue;
            }
            match w.ids[..w.len].iter().position(|&id| id == t.0) {
                Some(j) => w.counts[j] += 1,
                None => {
                    w.ids[w.len] = t.0;
                    w.counts[w.len] = 1;
                    w.len += 1;
                }
            }
        }
        w
    }

    fn iter(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.ids[..self.len].iter().zip(&self.counts[..self.len]).map(|(&i, &c)| (i as usize, c))
    }
}

/// Apply the logit processors to `logits` in place, in the order of the spec (and of mlx-lm's
/// `make_logits_processors`):
///
/// 1. `logit_bias`: `logit[id] += bias`; ids past the vocabulary are skipped.
/// 2. repetition penalty (Keskar et al. 2019, CTRL §4.1, sign-aware as in mlx-lm): for each
///    distinct id of the window, `logit *= p` if `logit < 0`, else `logit /= p`.
/// 3. presence penalty: `logit -= presence` once per distinct id of the window.
/// 4. frequency penalty: `logit -= frequency` once per occurrence in the window (the same
///    value as `frequency × count`, computed the way mlx-lm's scatter-subtract does).
///
/// The window is the last [`PENALTY_WINDOW`] entries of `recent` (the caller passes the
/// generated tokens). Tokens forbidden by `mask` are left untouched, so a forbidden token stays
/// forbidden whatever its bias. Does nothing when the config is at identity.
///
/// # Example
/// ```
/// use grammask::{sampler::{apply_penalties, PenaltyConfig}, TokenId};
/// let mut logits = vec![2.0, -2.0, 1.0];
/// let pen = PenaltyConfig::default().with_repetition_penalty(2.0);
/// apply_penalties(&mut logits, &[TokenId(0), TokenId(1), TokenId(0)], &pen, None);
/// assert_eq!(logits, vec![1.0, -4.0, 1.0]);
/// ```
pub fn apply_penalties(
    logits: &mut [f32],
    recent: &[TokenId],
    cfg: &PenaltyConfig,
    mask: Option<&TokenMask>,
) {
    let vocab = logits.len();
    let allowed = |i: usize| match mask {
        None => true,
        Some(m) => m.contains(TokenId::from_index(i)),
    };
    for &(t, bias) in &cfg.logit_bias {
        let i = t.index();
        if i < vocab && allowed(i) {
            logits[i] += bias;
        }
    }
    if !cfg.window_active() || recent.is_empty() {
        return;
    }
    let window = WindowCounts::tally(recent, vocab);
    let rep = cfg.repetition_penalty;
    if rep != 1.0 {
        for (i, _) in window.iter() {
            if allowed(i) {
                let x = logits[i];
                logits[i] = if x < 0.0 { x * rep } else { x / rep };
            }
        }
    }
    let presence = cfg.presence_penalty;
    if presence != 0.0 {
        for (i, _) in window.iter() {
            if allowed(i) {
                logits[i] -= presence;
            }
        }
    }
    let freq = cfg.frequency_penalty;
    if freq != 0.0 {
        for (i, count) in window.iter() {
            if allowed(i) {
                for _ in 0..count {
                    logits[i] -= freq;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<TokenId> {
        v.iter().map(|&i| TokenId(i)).collect()
    }

    #[test]
    fn order_and_window() {
        // Token 0 appears 21 positions back: outside the window of 20.
        let mut recent = ids(&[0]);
        recent.extend(ids(&[1; 19]));
        recent.push(TokenId(2));
        let pen = PenaltyConfig::default()
            .with_repetition_penalty(2.0)
            .with_presence_penalty(0.5)
            .with_frequency_penalty(0.25)
            .with_bias(TokenId(2), 3.0)
            .with_bias(TokenId(99), 1.0);
        let mut logits = vec![4.0, -1.0, -5.0, 7.0];
        apply_penalties(&mut logits, &recent, &pen, None);
        // 0: outside the window.
        assert_eq!(logits[0], 4.0);
        // 1: ×2 (negative), -0.5, -0.25×19.
        assert_eq!(logits[1], -2.0 - 0.5 - 0.25 * 19.0);
        // 2: bias first (-5+3=-2), then ×2 = -4, -0.5, -0.25.
        assert_eq!(logits[2], -4.0 - 0.5 - 0.25);
        assert_eq!(logits[3], 7.0);
    }

    #[test]
    fn forbidden_tokens_untouched() {
        let mut mask = TokenMask::full(3);
        mask.remove(TokenId(1));
        let pen = PenaltyConfig::default().with_bias(TokenId(1), f32::INFINITY);
        let mut logits = vec![0.0, f32::NEG_INFINITY, 0.0];
        apply_penalties(&mut logits, &[], &pen, Some(&mask));
        assert_eq!(logits[1], f32::NEG_INFINITY);
    }
}
