//! One request's decode: a thread runs the ordinary decode loop ([`crate::decode::decode`]) on
//! a [`RemoteModel`](super::worker::RemoteModel), with an observer that, before every forward
//! pass, streams the new text, watches for `stop` strings, and ends the decode as soon as the
//! client has gone (its event channel closed) or the server's shutdown deadline has passed —
//! so a disconnected client's slot and KV cache are freed within one step.

use super::error::ApiError;
use super::metrics::Metrics;
use super::worker::{Halt, RemoteModel};
use crate::decode::{decode, DecodeConfig, DecodeErrorKind, TokenHook};
use crate::engine::ConstraintEngine;
use crate::sampler::TokenLogprobs;
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// What a request's thread sends back.
#[derive(Debug)]
pub enum Event {
    /// New content text (streaming only), with the logprobs of the tokens whose bytes it
    /// completes (when they were asked for).
    Delta {
        /// The text.
        text: String,
        /// Logprobs of the sampled tokens among those whose last byte is in `text`.
        logprobs: Vec<TokenLogprobs>,
    },
    /// The end: the outcome or the error.
    Done(Result<Outcome, ApiError>),
}

/// A finished generation.
#[derive(Debug)]
pub struct Outcome {
    /// The content (stop string and what follows cut off).
    pub text: String,
    /// Reasoning content (a thinking model's think block).
    pub reasoning: String,
    /// The generated tokens (EOS included when there was one).
    pub tokens: Vec<TokenId>,
    /// `stop` or `length`.
    pub finish: &'static str,
    /// Per token, when logprobs were asked for.
    pub logprobs: Vec<Option<TokenLogprobs>>,
    /// Bytes of `text` already sent as deltas.
    pub streamed: usize,
}

/// Everything one decode needs.
pub struct Job {
    /// The model view (prompt set).
    pub model: RemoteModel,
    /// The vocabulary.
    pub vocab: Vocabulary,
    /// The constraint's engine, if any.
    pub engine: Option<Box<dyn ConstraintEngine>>,
    /// The loop's config.
    pub config: DecodeConfig,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Send content deltas as they come (false: only the end).
    pub stream_text: bool,
    /// Where events go; closed when the client has gone.
    pub events: UnboundedSender<Event>,
    /// Set at the shutdown deadline.
    pub cancel: Arc<AtomicBool>,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

#[derive(Default)]
struct Seen {
    tokens: usize,
    /// The tokens seen so far (what a stop string's answer is made of).
    ids: Vec<TokenId>,
    bytes: Vec<u8>,
    /// Where each token's bytes end in `bytes`.
    ends: Vec<usize>,
    /// Logprobs not streamed yet, with their tokens' indices (the decode loop's hook adds them
    /// as it samples, before the observer sees the token).
    logprobs: Vec<(usize, TokenLogprobs)>,
    sent: usize,
    /// Where a stop string starts, once one has appeared.
    stop_at: Option<usize>,
}

fn find_stop(bytes: &[u8], stop: &[String], from: usize) -> Option<usize> {
    stop.iter()
        .filter_map(|s| {
            let s = s.as_bytes();
            let start = from.saturating_sub(s.len());
            bytes[start..].windows(s.len()).position(|w| w == s).map(|p| p + start)
        })
        .min()
}

/// The longest prefix of `b` that is whole UTF-8 characters.
fn utf8_prefix(b: &[u8]) -> usize {
    match std::str::from_utf8(b) {
        Ok(_) => b.len(),
        Err(e) => e.valid_up_to(),
    }
}

/// Run `job` to the end on this thread, sending its events.
pub fn run(mut job: Job) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let max_stop = job.stop.iter().map(String::len).max().unwrap_or(0);
    {
        let (seen, vocab, stop, events, cancel) = (
            seen.clone(),
            job.vocab.clone(),
            job.stop.clone(),
            job.events.clone(),
            job.cancel.clone(),
        );
        let stream = job.stream_text;
        job.model.set_observer(Box::new(move |tokens: &[TokenId]| {
            if cancel.load(Ordering::Relaxed) || events.is_closed() {
                return Err(Halt::Cancelled);
            }
            let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
            let from = s.bytes.len();
            let new = s.tokens.min(tokens.len());
            s.ids.truncate(new);
            s.ends.truncate(new);
            for &t in &tokens[new..] {
                s.ids.push(t);
                if !vocab.is_eos(t) {
                    s.bytes.extend_from_slice(vocab.token_bytes(t));
                }
                let end = s.bytes.len();
                s.ends.push(end);
            }
            s.tokens = tokens.len();
            if !stop.is_empty() {
                if let Some(at) = find_stop(&s.bytes, &stop, from) {
                    s.stop_at = Some(at);
                    return Err(Halt::StopString);
                }
            }
            if stream {
                // Hold back what could be the start of a stop string, and split characters.
                let safe = s.bytes.len().saturating_sub(max_stop.saturating_sub(1));
                let end = s.sent + utf8_prefix(&s.bytes[s.sent..safe.max(s.sent)]);
                if end > s.sent {
                    let text = String::from_utf8_lossy(&s.bytes[s.sent..end]).into_owned();
                    s.sent = end;
                    let done = s
                        .logprobs
                        .iter()
                        .take_while(|(i, _)| s.ends.get(*i).is_some_and(|&e| e <= end))
                        .count();
                    let logprobs = s.logprobs.drain(..done).map(|(_, lp)| lp).collect();
                    if events.send(Event::Delta { text, logprobs }).is_err() {
                        return Err(Halt::Cancelled);
                    }
                }
            }
            Ok(())
        }));
    }
    if job.stream_text && job.config.sampler.top_logprobs_k > 0 {
        // Streamed logprobs: the loop hands each sampled token's logprobs over as it samples.
        let seen = seen.clone();
        job.config.on_token = Some(TokenHook(Arc::new(move |i, _, lp| {
            if let Some(lp) = lp {
                seen.lock().unwrap_or_else(|p| p.into_inner()).logprobs.push((i, lp.clone()));
            }
        })));
    }
    let mut engine = job.engine.take();
    let engine_ref: Option<&mut dyn ConstraintEngine> = match engine.as_mut() {
        Some(e) => Some(e.as_mut()),
        None => None,
    };
    let r = decode(&mut job.model, &job.vocab, engine_ref, &job.config);
    drop(job.model); // frees the sequence in the worker now
    let s = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
    let outcome = match r {
        Ok(gen) => {
            for us in &gen.mask_us {
                job.metrics.mask_seconds.observe(us / 1e6);
            }
            let mut text = gen.text.clone();
            let mut finish = gen.finish_reason.as_str();
            if let Some(at) = find_stop(&text, &job.stop, 0) {
                text.truncate(at);
                finish = "stop";
            }
            Ok(Outcome {
                text: String::from_utf8_lossy(&text).into_owned(),
                reasoning: gen.reasoning_content(),
                tokens: gen.tokens,
                finish,
                logprobs: gen.logprobs,
                streamed: s.sent,
            })
        }
        Err(e) => match e.kind() {
            DecodeErrorKind::Model { source, .. } => match source.downcast_ref::<Halt>() {
                Some(Halt::StopString) => {
                    let at = s.stop_at.unwrap_or(s.bytes.len());
                    Ok(Outcome {
                        text: String::from_utf8_lossy(&s.bytes[..at]).into_owned(),
                        reasoning: String::new(),
                        tokens: s.ids,
                        finish: "stop",
                        logprobs: Vec::new(),
                        streamed: s.sent,
                    })
                }
                Some(Halt::Cancelled) => Err(ApiError::shutting_down()),
                None => Err(ApiError::internal(format!("model: {source}"))),
            },
            DecodeErrorKind::DeadEnd { step } => {
                Err(ApiError::internal(format!("the constraint allows no token at step {step}")))
            }
            _ => Err(ApiError::internal(e.to_string())),
        },
    };
    if let Ok(o) = &outcome {
        // The rest of the content that was held back (or never streamed).
        if job.stream_text {
            let rest = o.text.get(o.streamed..).unwrap_or("").to_owned();
            // The logprobs not sent yet: the last tokens' (seen by no model call after them).
            let logprobs: Vec<_> = s.logprobs.into_iter().map(|(_, lp)| lp).collect();
            if !rest.is_empty() || !logprobs.is_empty() {
                let _ = job.events.send(Event::Delta { text: rest, logprobs });
            }
        }
    }
    let _ = job.events.send(Event::Done(outcome));
}
