//! The loop itself: [`decode`] (every option) and [`generate_greedy`] (the foundation's greedy
//! entry point, kept as a thin wrapper).
//!
//! # Sample-then-check is exact
//! Let `p` be the distribution the sampler draws from without a mask (after penalties and
//! temperature), `A` the set of tokens the engine allows, and `P(A) = Σ_{a∈A} p(a) > 0`. The
//! masked pipeline draws from `p_A(t) = p(t)·1[t∈A] / P(A)` (masking sets forbidden logits to
//! `-inf` before the softmax, and penalties act token by token, so they commute with the mask).
//! Sample-then-check draws `t ~ p`; if `t ∈ A` it returns `t`, otherwise it draws a fresh,
//! independent `t' ~ p_A`. So for `t ∈ A`
//!
//! ```text
//! P(out = t) = p(t) + (1 − P(A)) · p(t) / P(A) = p(t) · (P(A) + 1 − P(A)) / P(A) = p_A(t),
//! ```
//!
//! and `P(out = t) = 0` for `t ∉ A`: exactly the masked distribution (`tests/it/decode_loop.rs`
//! checks it with a χ² test). The redraw need not run the pipeline again: `p_A` is `p`
//! restricted to `A` and renormalised, and `p` is already computed, so the loop draws from it
//! directly (one pass over the allowed ids instead of a second softmax). At temperature 0 the argument is simpler: the unmasked argmax,
//! when allowed, is the masked argmax (it is the largest logit overall and the lowest id holding
//! it). The argument needs the first draw to come from the same `p` the masked pipeline
//! restricts; truncation filters (top-p, top-k, min-p) break that — they truncate the unmasked
//! distribution differently from the masked one — so with an active truncation filter the loop
//! always fills the mask first. The random stream is consumed differently from mask-first
//! sampling (one or two draws per step), so a given seed yields a different, equally
//! distributed, sequence.

use super::config::DecodeConfig;
use super::error::{DecodeError, DecodeErrorKind};
use super::models::LogitsSource;
use super::think::{ThinkMarkers, ThinkSplitter};
use super::{FinishReason, Generation, StepTiming};
use crate::engine::ConstraintEngine;
use crate::mask::TokenMask;
use crate::sampler::{
    compute_top_logprobs_into, draw_index, sampling_distribution, top_logprobs_from_probs_into,
    Logits, LogprobsMode, SampleError, SampleErrorKind, Sampler, SamplerConfig, SamplerScratch,
    TokenLogprobs,
};
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::collections::VecDeque;
use std::time::Instant;

/// True when sample-then-check gives exactly the masked distribution under `s` (see the module
/// docs): greedy, or no truncation filter.
pub(crate) fn sample_then_check_exact(s: &SamplerConfig) -> bool {
    !s.sampling_active() || (!(s.top_p > 0.0 && s.top_p < 1.0) && s.top_k == 0 && s.min_p <= 0.0)
}

/// Map a sampler error to the loop's error.
pub(crate) fn sample_error(step: usize, e: SampleError) -> DecodeError {
    match e.kind() {
        SampleErrorKind::NanLogit { token } => {
            DecodeError::new(DecodeErrorKind::NanLogit { step, token: *token })
        }
        SampleErrorKind::AllForbidden => DecodeError::new(DecodeErrorKind::DeadEnd { step }),
        _ => DecodeError::new(DecodeErrorKind::Sample(e)),
    }
}

/// Inverse-CDF draw from `p` restricted to `mask` and renormalised (`r` uniform in `[0, 1)`);
/// `None` when the allowed mass is zero (underflow).
fn draw_masked(p: &[f32], mask: &TokenMask, r: f32) -> Option<TokenId> {
    let total: f64 = mask.iter().map(|t| f64::from(p[t.index()])).sum();
    if total.is_nan() || total <= 0.0 {
        return None;
    }
    let target = f64::from(r) * total;
    let mut acc = 0.0;
    let mut last = None;
    for t in mask.iter() {
        let q = f64::from(p[t.index()]);
        if q > 0.0 {
            acc += q;
            last = Some(t);
            if acc > target {
                return Some(t);
            }
        }
    }
    last
}

#[inline]
fn micros(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e6
}

/// Decode under an optional engine with every option of [`DecodeConfig`].
///
/// `vocab` gives the token bytes and EOS ids; the engine (when given) must be over a
/// vocabulary of the same width. The engine is advanced by every produced token, forced ones
/// included, so after the call it reflects the whole generation.
///
/// # Errors
/// [`DecodeErrorKind::WidthMismatch`] (model or engine width ≠ vocabulary width, checked before
/// the first step), [`DecodeErrorKind::NanLogit`], [`DecodeErrorKind::DeadEnd`] (the engine
/// allows nothing, or every allowed logit is `-inf`), [`DecodeErrorKind::Engine`] (the engine
/// refused a token), [`DecodeErrorKind::Sample`] / [`DecodeErrorKind::NoThinkMarkers`] (bad
/// config).
///
/// # Example
/// ```
/// use grammask::decode::{decode, DecodeConfig, RandomLogits};
/// use grammask::Vocabulary;
/// let vocab = Vocabulary::embedded()?;
/// let mut model = RandomLogits::new(&vocab, 3);
/// let out = decode(&mut model, &vocab, None, &DecodeConfig::greedy(5))?;
/// assert_eq!(out.tokens.len(), 5);
/// assert_eq!(out.counters.unconstrained_steps, 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decode(
    model: &mut dyn LogitsSource,
    vocab: &Vocabulary,
    engine: Option<&mut dyn ConstraintEngine>,
    config: &DecodeConfig,
) -> Result<Generation, DecodeError> {
    decode_with(ModelRef::Plain(model), vocab, engine, config)
}

/// [`decode`] with the mask computed while the model runs: at a constrained step the forward
/// pass runs on a second thread while this one fills the full mask (the mask depends only on
/// the engine's state, known before the logits). The step then samples exactly as [`decode`]
/// does, with the mask's bit test in place of the engine's `allows` (the two agree by the
/// engine contract), so for the same config the tokens are identical to [`decode`]'s.
///
/// Timing: `mask_us` has every fill; a step's `constraint_us` is only the part not hidden,
/// the time the step waited for the mask after the model was done (thread hand-over
/// included). It pays when the forward pass is longer than a mask fill — a real model — and
/// costs a thread spawn per constrained step otherwise.
///
/// # Errors
/// As [`decode`].
///
/// # Example
/// ```
/// use grammask::decode::{decode, decode_overlapped, DecodeConfig, RandomLogits};
/// use grammask::{JsonConfig, JsonObjectConstraint, Vocabulary};
/// let vocab = Vocabulary::embedded()?;
/// let config = DecodeConfig::greedy(40);
/// let mut a = JsonObjectConstraint::new(&vocab, &JsonConfig::default())?;
/// let seq = decode(&mut RandomLogits::new(&vocab, 5), &vocab, Some(&mut a), &config)?;
/// let mut b = JsonObjectConstraint::new(&vocab, &JsonConfig::default())?;
/// let ovl = decode_overlapped(&mut RandomLogits::new(&vocab, 5), &vocab, Some(&mut b), &config)?;
/// assert_eq!(seq.tokens, ovl.tokens);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decode_overlapped(
    model: &mut (dyn LogitsSource + Send),
    vocab: &Vocabulary,
    engine: Option<&mut dyn ConstraintEngine>,
    config: &DecodeConfig,
) -> Result<Generation, DecodeError> {
    decode_with(ModelRef::Overlap(model), vocab, engine, config)
}

/// The model as the loop holds it: overlapping needs it `Send`.
enum ModelRef<'a> {
    Plain(&'a mut dyn LogitsSource),
    Overlap(&'a mut (dyn LogitsSource + Send)),
}

impl ModelRef<'_> {
    fn n_vocab(&self) -> usize {
        match self {
            ModelRef::Plain(m) => m.n_vocab(),
            ModelRef::Overlap(m) => m.n_vocab(),
        }
    }
}

fn model_error(step: usize) -> impl Fn(Box<dyn std::error::Error + Send + Sync>) -> DecodeError {
    move |source| DecodeError::new(DecodeErrorKind::Model { step, source })
}

fn decode_with(
    mut model: ModelRef<'_>,
    vocab: &Vocabulary,
    mut engine: Option<&mut dyn ConstraintEngine>,
    config: &DecodeConfig,
) -> Result<Generation, DecodeError> {
    let n = vocab.n_vocab();
    if model.n_vocab() != n {
        return Err(DecodeError::new(DecodeErrorKind::WidthMismatch {
            model: model.n_vocab(),
            vocab: n,
        }));
    }
    if let Some(e) = engine.as_deref() {
        if e.vocab().n_vocab() != n {
            return Err(DecodeError::new(DecodeErrorKind::WidthMismatch {
                model: e.vocab().n_vocab(),
                vocab: n,
            }));
        }
    }
    config.validate()?;
    let mut sampler = Sampler::new(config.sampler.clone(), config.penalties.clone())
        .map_err(|e| DecodeError::new(DecodeErrorKind::Sample(e)))?;
    let eos: &[TokenId] = config.eos_ids.as_deref().unwrap_or(vocab.eos_ids());
    let mut splitter = match &config.think {
        Some(t) => {
            let markers = match t.markers {
                Some(m) => m,
                None => ThinkMarkers::from_vocab(vocab)?,
            };
            Some(ThinkSplitter::new(markers, t.starts_open, t.budget))
        }
        None => None,
    };
    let check_first = config.sample_then_check && sample_then_check_exact(&config.sampler);
    let lp_k = config.sampler.top_logprobs_k;
    // Processed logprobs are read from the sampler's own distribution; a greedy one is a point
    // mass, so greedy decoding reports the masked softmax at temperature 1 instead.
    let processed = lp_k > 0 && config.logprobs_mode == LogprobsMode::Processed;
    let lp_sampler = if config.sampler.sampling_active() {
        config.sampler.clone()
    } else {
        SamplerConfig {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            ..config.sampler.clone()
        }
    };
    let mut lp_dist = SamplerScratch::default();

    let mut logits = vec![0.0f32; n];
    let mut mask = TokenMask::new(n);
    let mut lp = TokenLogprobs::default();
    let mut dist = SamplerScratch::with_capacity(n);
    let mut ff_queue: VecDeque<TokenId> = VecDeque::new();
    let (mut ff_bytes, mut ff_tokens) = (Vec::new(), Vec::new());
    let mut out = Generation::empty();
    // Reserve for typical lengths; a huge `max_tokens` must not allocate (or overflow) upfront.
    out.tokens.reserve(config.max_tokens.min(1 << 14));
    out.timings.reserve(config.max_tokens.min(1 << 14));

    for step in 0..config.max_tokens {
        let mut timing = StepTiming::default();
        // 1. Forced tokens: no model call, no sampling, no logprobs.
        let mut forced = None;
        if let Some(s) = splitter.as_mut() {
            if s.take_force_close() {
                forced = Some(s.markers().close);
                out.counters.forced_think_close += 1;
            }
        }
        if forced.is_none() {
            if let (Some(ff), Some(e)) = (config.fast_forward.as_deref(), engine.as_deref()) {
                let thinking = splitter.as_ref().is_some_and(|s| s.is_thinking());
                if ff_queue.is_empty() && !thinking {
                    ff.forced_tokens(e, &mut ff_bytes, &mut ff_tokens)?;
                    ff_queue.extend(ff_tokens.iter().copied());
                }
                if let Some(t) = ff_queue.pop_front() {
                    forced = Some(t);
                    out.counters.fast_forward_tokens += 1;
                }
            }
        }
        if forced.is_none() && config.end_when_only_eos {
            if let Some(e) = engine.as_deref() {
                if e.can_only_end() {
                    if let Some(&t) = eos.iter().find(|&&t| e.allows(t)) {
                        forced = Some(t);
                        out.counters.forced_eos += 1;
                    }
                }
            }
        }
        let token = match forced {
            Some(t) => {
                timing.forced = true;
                if lp_k > 0 {
                    out.logprobs.push(None);
                }
                t
            }
            None => {
                // 2. Logits.
                let constrained = engine.as_deref().is_some_and(|e| e.wants_mask());
                // With overlap, a constrained step fills the mask while the model runs;
                // `premasked` then holds that fill's result.
                let mut premasked = false;
                match &mut model {
                    ModelRef::Overlap(m) if constrained => {
                        let e = engine.as_deref_mut().expect("constrained implies an engine");
                        let (forward, fill, fill_us) = std::thread::scope(|scope| {
                            let tokens = &out.tokens;
                            let logits = &mut logits;
                            let h = scope.spawn(move || {
                                let r = m.try_logits(tokens, logits);
                                (r, Instant::now())
                            });
                            let t1 = Instant::now();
                            let fill = e.fill_mask(&mut mask);
                            let fill_us = micros(t1);
                            (h.join(), fill, fill_us)
                        });
                        let (forward, model_done) = match forward {
                            Ok(r) => r,
                            Err(panic) => std::panic::resume_unwind(panic),
                        };
                        forward.map_err(model_error(step))?;
                        fill?;
                        // Only the wait past the model's end is constraint time.
                        timing.constraint_us = model_done.elapsed().as_secs_f64() * 1e6;
                        out.mask_us.push(fill_us);
                        out.counters.masks_filled += 1;
                        premasked = true;
                    }
                    ModelRef::Overlap(m) => {
                        m.try_logits(&out.tokens, &mut logits).map_err(model_error(step))?
                    }
                    ModelRef::Plain(m) => {
                        m.try_logits(&out.tokens, &mut logits).map_err(model_error(step))?
                    }
                }
                out.counters.model_calls += 1;
                // Whether `mask` holds this step's mask (processed logprobs need it).
                let mut mask_now = premasked;
                // 3. Sample.
                let t = if !constrained {
                    out.counters.unconstrained_steps += 1;
                    let t0 = Instant::now();
                    let mut t = sampler
                        .sample(Logits::F32(&logits), None, &out.tokens)
                        .map_err(|e| sample_error(step, e))?;
                    // An engine that asks for no mask may still refuse a token (a think gate
                    // refuses EOS while its constraint's answer is pending): redraw under its
                    // mask then.
                    if let Some(e) = engine.as_deref_mut().filter(|e| !e.allows(t)) {
                        out.counters.check_rejections += 1;
                        let t1 = Instant::now();
                        e.fill_mask(&mut mask)?;
                        let us = micros(t1);
                        out.mask_us.push(us);
                        timing.constraint_us += us;
                        out.counters.masks_filled += 1;
                        mask_now = true;
                        if mask.is_none_allowed() {
                            return Err(DecodeError::new(DecodeErrorKind::DeadEnd { step }));
                        }
                        t = sampler
                            .sample(Logits::F32(&logits), Some(&mask), &out.tokens)
                            .map_err(|e| sample_error(step, e))?;
                    }
                    // The fill of a redraw is constraint time, not sampling time.
                    timing.sample_us = micros(t0) - timing.constraint_us;
                    t
                } else {
                    let e = engine.as_deref_mut().expect("constrained implies an engine");
                    let mut first = None;
                    let mut probs: Option<&[f32]> = None;
                    if check_first {
                        let t0 = Instant::now();
                        // A NaN anywhere fails the unmasked draw; the masked path below then
                        // reports it only if the NaN is on an allowed token.
                        let draw = if config.sampler.sampling_active() {
                            let r = sampler.rng_mut().next_f32();
                            probs = sampling_distribution(
                                &config.sampler,
                                &config.penalties,
                                Logits::F32(&logits),
                                None,
                                &out.tokens,
                                &mut dist,
                            )
                            .ok();
                            probs.and_then(|p| draw_index(p, r)).map(TokenId::from_index)
                        } else {
                            sampler.sample(Logits::F32(&logits), None, &out.tokens).ok()
                        };
                        timing.sample_us = micros(t0);
                        if let Some(t) = draw {
                            let t1 = Instant::now();
                            let ok = if premasked { mask.contains(t) } else { e.allows(t) };
                            timing.constraint_us += micros(t1);
                            if ok {
                                out.counters.masks_skipped += 1;
                                first = Some(t);
                            } else {
                                out.counters.check_rejections += 1;
                            }
                        } else {
                            out.counters.check_rejections += 1;
                        }
                    }
                    match first {
                        Some(t) => {
                            if processed && !premasked {
                                e.fill_mask(&mut mask)?;
                                mask_now = true;
                            }
                            t
                        }
                        None => {
                            mask_now = true;
                            if !premasked {
                                let t1 = Instant::now();
                                e.fill_mask(&mut mask)?;
                                let us = micros(t1);
                                out.mask_us.push(us);
                                timing.constraint_us += us;
                                out.counters.masks_filled += 1;
                            }
                            if mask.is_none_allowed() {
                                return Err(DecodeError::new(DecodeErrorKind::DeadEnd { step }));
                            }
                            let t2 = Instant::now();
                            // The redraw reuses the unmasked probabilities when it has them:
                            // p restricted to the mask and renormalised is p_A (no second
                            // softmax). If the allowed mass underflowed, the full masked
                            // pipeline runs instead.
                            let reused = match probs {
                                Some(p) => draw_masked(p, &mask, sampler.rng_mut().next_f32()),
                                None => None,
                            };
                            let t = match reused {
                                Some(t) => t,
                                None => sampler
                                    .sample(Logits::F32(&logits), Some(&mask), &out.tokens)
                                    .map_err(|e| sample_error(step, e))?,
                            };
                            timing.sample_us += micros(t2);
                            t
                        }
                    }
                };
                if processed {
                    let probs = sampling_distribution(
                        &lp_sampler,
                        &config.penalties,
                        Logits::F32(&logits),
                        mask_now.then_some(&mask),
                        &out.tokens,
                        &mut lp_dist,
                    )
                    .map_err(|e| sample_error(step, e))?;
                    top_logprobs_from_probs_into(probs, t, lp_k, &mut lp)
                        .map_err(|e| sample_error(step, e))?;
                    out.logprobs.push(Some(lp.clone()));
                } else if lp_k > 0 {
                    compute_top_logprobs_into(Logits::F32(&logits), t, lp_k, &mut lp)
                        .map_err(|e| sample_error(step, e))?;
                    out.logprobs.push(Some(lp.clone()));
                }
                t
            }
        };
        // 4. Advance, emit, stop.
        if let Some(e) = engine.as_deref_mut() {
            e.advance(token)?;
        }
        out.tokens.push(token);
        if let Some(hook) = &config.on_token {
            let lp = if lp_k > 0 { out.logprobs.last().and_then(Option::as_ref) } else { None };
            (hook.0)(out.tokens.len() - 1, token, lp);
        }
        out.timings.push(timing);
        out.counters.steps += 1;
        if eos.contains(&token) {
            out.finish_reason = FinishReason::Stop;
            break;
        }
        let bytes = vocab.token_bytes(token);
        match splitter.as_mut() {
            Some(s) => {
                s.push(token, bytes, &mut out.reasoning, &mut out.text);
            }
            None => out.text.extend_from_slice(bytes),
        }
    }
    Ok(out)
}

/// Decode greedily under `engine` for at most `max_tokens` tokens: the foundation's entry
/// point, now [`decode`] with [`DecodeConfig::greedy`] and the full mask filled at every step
/// (no sample-then-check, no EOS shortcut), so `mask_us` has one entry per step as before.
///
/// # Errors
/// As [`decode`].
pub fn generate_greedy(
    model: &mut dyn LogitsSource,
    engine: &mut dyn ConstraintEngine,
    max_tokens: usize,
) -> Result<Generation, DecodeError> {
    let vocab = engine.vocab().clone();
    let config = DecodeConfig {
        sample_then_check: false,
        end_when_only_eos: false,
        ..DecodeConfig::greedy(max_tokens)
    };
    decode(model, &vocab, Some(engine), &config)
}
