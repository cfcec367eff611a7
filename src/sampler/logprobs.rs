//! Per-step logprob capture (OpenAI `logprobs` / `top_logprobs`): the chosen token's
//! log-probability and the `k` most likely alternatives, under the RAW model logits by default
//! or under the distribution the token was drawn from ([`LogprobsMode`], vLLM's names).
//!
//! Raw means before mask, penalties, temperature and filters: the reported number is the
//! model's own log-likelihood, not the post-sampling distribution (OpenAI's contract).
//! Processed means after them all, so a token the constraint refused never appears. When
//! `k == 0` nothing here runs and nothing is allocated.

use super::config::MAX_TOP_LOGPROBS;
use super::error::{SampleError, SampleErrorKind};
use super::exp::exp;
use super::filters::{exp_sum, max_checked};
use super::logits::{bf16_to_f32, Logits};
use crate::token::TokenId;

/// Which distribution logprobs are read from (vLLM's `logprobs_mode` values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogprobsMode {
    /// `raw_logprobs`: the log-softmax of the model's logits, before the constraint's mask,
    /// penalties, temperature and filters (the default, as OpenAI's and vLLM's).
    #[default]
    Raw,
    /// `processed_logprobs`: the log of the distribution the token was drawn from (mask,
    /// penalties, temperature, top-p/top-k/min-p), so only tokens that could have been drawn
    /// appear. Under greedy decoding (temperature 0, a point mass) it is the masked and
    /// penalised softmax at temperature 1, which still ranks the allowed alternatives.
    Processed,
}

impl LogprobsMode {
    /// `raw_logprobs` or `processed_logprobs` (vLLM's spelling).
    pub fn parse(s: &str) -> Option<LogprobsMode> {
        match s {
            "raw_logprobs" => Some(LogprobsMode::Raw),
            "processed_logprobs" => Some(LogprobsMode::Processed),
            _ => None,
        }
    }

    /// vLLM's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            LogprobsMode::Raw => "raw_logprobs",
            LogprobsMode::Processed => "processed_logprobs",
        }
    }
}

/// Logprobs captured for one decode step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenLogprobs {
    /// The sampled (or argmax) token of the step.
    pub token: TokenId,
    /// `ln P(token)` under the softmax of the raw logits.
    pub logprob: f32,
    /// The `k` most likely `(token, logprob)` pairs, descending by logprob, ties by lower id.
    /// May or may not contain `token`.
    pub top: Vec<(TokenId, f32)>,
}

/// Log-softmax of the raw logits at `chosen`, plus the `k` best alternatives.
///
/// `lse = max + ln Σ exp(x − max)`, `logprob(i) = x[i] − lse` (sum accumulated in `f64`). The
/// selection keeps a sorted array of at most `k` entries while scanning once, O(vocab · k)
/// worst case and O(vocab) in practice. Returns `Ok(None)` without touching the logits when
/// `k == 0`.
///
/// # Errors
/// `k > 20`, `chosen` out of range, empty row, a NaN logit, every logit `-inf`.
///
/// # Example
/// ```
/// use grammask::{sampler::{compute_top_logprobs, Logits}, TokenId};
/// let lp = compute_top_logprobs(Logits::F32(&[0.0, 0.0, f32::NEG_INFINITY]), TokenId(1), 1)
///     .unwrap()
///     .unwrap();
/// assert!((lp.logprob - 0.5f32.ln()).abs() < 1e-6);
/// assert_eq!(lp.top[0].0, TokenId(0));
/// ```
pub fn compute_top_logprobs(
    logits: Logits<'_>,
    chosen: TokenId,
    k: usize,
) -> Result<Option<TokenLogprobs>, SampleError> {
    if k == 0 {
        return Ok(None);
    }
    let mut out = TokenLogprobs { token: chosen, logprob: 0.0, top: Vec::with_capacity(k) };
    compute_top_logprobs_into(logits, chosen, k, &mut out)?;
    Ok(Some(out))
}

/// The checks both top-logprob functions make of their arguments over a row of `n` entries:
/// `false` for `k == 0` (nothing to report), an error for `k > 20`, an empty row, or `chosen`
/// outside it.
fn top_args(k: usize, n: usize, chosen: TokenId) -> Result<bool, SampleError> {
    if k == 0 {
        return Ok(false);
    }
    if k > MAX_TOP_LOGPROBS {
        return Err(SampleError::new(SampleErrorKind::TopLogprobsK(k)));
    }
    if n == 0 {
        return Err(SampleError::new(SampleErrorKind::EmptyLogits));
    }
    if chosen.index() >= n {
        return Err(SampleError::new(SampleErrorKind::TokenOutOfRange { token: chosen, vocab: n }));
    }
    Ok(true)
}

/// [`compute_top_logprobs`] into a reusable `out` (its `top` vector keeps its capacity).
/// Returns `false` and leaves `out` untouched when `k == 0`.
///
/// # Errors
/// As [`compute_top_logprobs`].
pub fn compute_top_logprobs_into(
    logits: Logits<'_>,
    chosen: TokenId,
    k: usize,
    out: &mut TokenLogprobs,
) -> Result<bool, SampleError> {
    if !top_args(k, logits.len(), chosen)? {
        return Ok(false);
    }
    out.token = chosen;
    out.top.clear();
    let lse = match logits {
        Logits::F32(v) => scan_f32(v, k, &mut out.top)?,
        Logits::Bf16(v) => scan(v.iter().map(|&b| bf16_to_f32(b)), k, &mut out.top)?,
    };
    let lp = |x: f32| log_prob(x, lse);
    out.logprob = lp(logits.get(chosen.index()));
    for e in out.top.iter_mut() {
        e.1 = lp(e.1);
    }
    Ok(true)
}

/// [`compute_top_logprobs_into`] from a probability row (the sampler's distribution, as
/// [`super::sampling_distribution`] returns it): `ln p(chosen)` and the `k` most likely
/// tokens of non-zero probability, so fewer than `k` where fewer could be drawn.
///
/// # Errors
/// `k > 20`, `chosen` out of range, an empty row.
pub fn top_logprobs_from_probs_into(
    probs: &[f32],
    chosen: TokenId,
    k: usize,
    out: &mut TokenLogprobs,
) -> Result<bool, SampleError> {
    if !top_args(k, probs.len(), chosen)? {
        return Ok(false);
    }
    out.token = chosen;
    out.top.clear();
    select_top_f32(probs, k, &mut out.top);
    out.top.retain(|e| e.1 > 0.0);
    for e in out.top.iter_mut() {
        e.1 = e.1.ln();
    }
    out.logprob = probs[chosen.index()].ln();
    Ok(true)
}

/// The log-sum-exp of the row, as `(max, ln Σ exp(x − max))`, while collecting the `k` largest
/// raw logits into `top`. Three passes over an `f32` row (max with NaN check, selection,
/// exp-sum), each a tight loop; bf16 rows go through the same steps element by element.
fn scan_f32(v: &[f32], k: usize, top: &mut Vec<(TokenId, f32)>) -> Result<(f32, f64), SampleError> {
    let max = max_checked(v)?;
    select_top_f32(v, k, top);
    if max.is_infinite() {
        return limit(v.iter().copied(), max);
    }
    // `x · 1.0` is `x`: the same terms as `exp(x − max)`, in the same order.
    Ok((max, exp_sum(v, 1.0, max).ln()))
}

fn scan(
    it: impl Iterator<Item = f32> + Clone,
    k: usize,
    top: &mut Vec<(TokenId, f32)>,
) -> Result<(f32, f64), SampleError> {
    let mut max = f32::NEG_INFINITY;
    for (i, x) in it.clone().enumerate() {
        if x.is_nan() {
            return Err(SampleError::nan(i));
        }
        if x > max {
            max = x;
        }
    }
    select_top(it.clone(), k, top);
    if max.is_infinite() {
        return limit(it, max);
    }
    let sum: f64 = it.map(|x| f64::from(exp(x - max))).sum();
    Ok((max, sum.ln()))
}

/// The degenerate rows: all `-inf` is an error; with `+inf` logits the distribution is the
/// limit one, uniform over them.
fn limit(it: impl Iterator<Item = f32>, max: f32) -> Result<(f32, f64), SampleError> {
    if max == f32::NEG_INFINITY {
        return Err(SampleError::all_forbidden());
    }
    let count = it.filter(|&x| x == f32::INFINITY).count();
    Ok((max, (count as f64).ln()))
}

/// [`select_top`] on an `f32` row: once `top` is full, a 16-entry chunk with nothing above
/// the current floor (the common case) is skipped after one vectorised test; a chunk with a
/// candidate runs the same insertion in index order.
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn select_top_f32(v: &[f32], k: usize, top: &mut Vec<(TokenId, f32)>) {
    if k == 0 {
        return;
    }
    let mut floor = f32::NEG_INFINITY;
    let head = k.min(v.len());
    for (i, &x) in v[..head].iter().enumerate() {
        offer(top, k, i, x, &mut floor);
    }
    let mut at = head;
    for c in v[head..].chunks(16) {
        if c.iter().fold(false, |a, &x| a | (x > floor)) {
            for (j, &x) in c.iter().enumerate() {
                offer(top, k, at + j, x, &mut floor);
            }
        }
        at += c.len();
    }
}

/// One step of the selection (`k ≥ 1`): element `i` of value `x` enters `top` (descending) if
/// `top` is not full or `x` beats the current k-th value `floor`, which is kept up to date.
/// An equal value never displaces an earlier one, so ties go to the lower id.
#[inline(always)]
fn offer(top: &mut Vec<(TokenId, f32)>, k: usize, i: usize, x: f32, floor: &mut f32) {
    if top.len() < k || x > *floor {
        if top.len() == k {
            top.pop();
        }
        let pos = top.iter().position(|e| e.1 < x).unwrap_or(top.len());
        top.insert(pos, (TokenId::from_index(i), x));
        if top.len() == k {
            *floor = top[k - 1].1;
        }
    }
}

/// Keep the `k` largest values of `it` in `top`, descending. The scan is in index order and an
/// equal value never displaces an earlier one, so ties go to the lower id. Most elements fail
/// the first comparison against the current k-th value.
fn select_top(it: impl Iterator<Item = f32>, k: usize, top: &mut Vec<(TokenId, f32)>) {
    let mut floor = f32::NEG_INFINITY;
    for (i, x) in it.enumerate() {
        offer(top, k, i, x, &mut floor);
    }
}

/// `x − lse` with the `+inf` limit handled (`lse = (max, ln Σ)`).
#[inline]
fn log_prob(x: f32, (max, ln_sum): (f32, f64)) -> f32 {
    if max == f32::INFINITY {
        return if x == f32::INFINITY { -(ln_sum as f32) } else { f32::NEG_INFINITY };
    }
    ((f64::from(x) - f64::from(max)) - ln_sum) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processed_logprobs_leave_out_what_could_not_be_drawn() {
        let probs = [0.0, 0.25, 0.0, 0.75];
        let mut out = TokenLogprobs::default();
        assert!(top_logprobs_from_probs_into(&probs, TokenId(1), 3, &mut out).unwrap());
        assert_eq!(out.top.iter().map(|e| e.0).collect::<Vec<_>>(), [TokenId(3), TokenId(1)]);
        assert!((out.logprob - 0.25f32.ln()).abs() < 1e-6);
        assert!((out.top[0].1 - 0.75f32.ln()).abs() < 1e-6);
        assert_eq!(LogprobsMode::parse("processed_logprobs"), Some(LogprobsMode::Processed));
        assert_eq!(LogprobsMode::parse(LogprobsMode::Raw.as_str()), Some(LogprobsMode::Raw));
        assert_eq!(LogprobsMode::parse("raw_logits"), None);
    }

    /// The chunk-skipping selection against the element-by-element one: rows with many ties
    /// (the lower id wins), `-inf` runs, rows shorter than `k`, and every `k` up to 40.
    #[test]
    fn chunked_selection_equals_the_plain_scan() {
        let mut seed = 7u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        for n in [1usize, 5, 17, 40, 100, 1000, 5003] {
            let v: Vec<f32> = (0..n)
                .map(|_| match rnd() % 10 {
                    0 => f32::NEG_INFINITY,
                    r => (rnd() % (5 + r)) as f32,
                })
                .collect();
            for k in [1usize, 2, 20, 40] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                select_top(v.iter().copied(), k, &mut a);
                select_top_f32(&v, k, &mut b);
                assert_eq!(a, b, "n {n} k {k}");
            }
        }
    }
}
