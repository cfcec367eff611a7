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
    /// The text sent as deltas of a `tools` stream (the start of its content).
    pub streamed_text: String,
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
    /// A `tools` stream: the strings that begin a call in the model's format. Content streams
    /// up to the first of them (special tokens written as their strings), a suffix that could
    /// still grow into one is held back, and so is whitespace at either end (the content is
    /// trimmed); the rest, and the calls, come at the end.
    pub hold: Option<&'static [&'static str]>,
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
    /// Where the first call trigger starts, once one has appeared (`tools` streams).
    trigger_at: Option<usize>,
    /// What a `tools` stream has sent.
    emitted: String,
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

/// The length of the longest suffix of `b` that is a proper prefix of one of `triggers`: the
/// bytes that could still grow into a trigger.
fn trigger_prefix_suffix(b: &[u8], triggers: &[&str]) -> usize {
    triggers
        .iter()
        .filter_map(|t| {
            let t = t.as_bytes();
            (1..t.len().min(b.len() + 1)).rev().find(|&n| b.ends_with(&t[..n]))
        })
        .max()
        .unwrap_or(0)
}

/// Where the first of `triggers` starts in `b`, searching from `from` (less a trigger's
/// length, for one that straddles it).
fn find_trigger(b: &[u8], triggers: &[&str], from: usize) -> Option<usize> {
    triggers
        .iter()
        .filter_map(|t| {
            let t = t.as_bytes();
            let start = from.saturating_sub(t.len());
            b.get(start..)?.windows(t.len()).position(|w| w == t).map(|p| p + start)
        })
        .min()
}

/// How far a `tools` stream may send: before the first trigger (or a suffix that could become
/// one), without trailing whitespace; and where it starts: past leading whitespace while
/// nothing has been sent.
fn tools_window(s: &mut Seen, triggers: &[&str], from: usize, safe: usize) -> usize {
    if s.trigger_at.is_none() {
        s.trigger_at = find_trigger(&s.bytes, triggers, from);
    }
    let mut end = match s.trigger_at {
        Some(at) => safe.min(at),
        None => safe.min(s.bytes.len() - trigger_prefix_suffix(&s.bytes, triggers)),
    };
    if s.emitted.is_empty() {
        while s.sent < end && s.bytes[s.sent].is_ascii_whitespace() {
            s.sent += 1;
        }
    }
    while end > s.sent && s.bytes[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    end.max(s.sent)
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
        let hold = job.hold;
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
                    match vocab.token_bytes(t) {
                        // A special token (a call's marker) as its string, for the triggers.
                        [] if hold.is_some() => {
                            let name = vocab.tokenizer().and_then(|k| k.id_to_token(t.0));
                            s.bytes.extend_from_slice(name.unwrap_or_default().as_bytes());
                        }
                        b => s.bytes.extend_from_slice(b),
                    }
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
                let mut safe = s.bytes.len().saturating_sub(max_stop.saturating_sub(1));
                if let Some(triggers) = hold {
                    safe = tools_window(&mut s, triggers, from, safe);
                }
                let end = s.sent + utf8_prefix(&s.bytes[s.sent..safe.max(s.sent)]);
                if end > s.sent {
                    let text = String::from_utf8_lossy(&s.bytes[s.sent..end]).into_owned();
                    s.sent = end;
                    if hold.is_some() {
                        s.emitted.push_str(&text);
                    }
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
    // A `tools` stream's logprobs come at the end, with the calls.
    if job.stream_text && job.hold.is_none() && job.config.sampler.top_logprobs_k > 0 {
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
                streamed_text: s.emitted,
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
                        streamed_text: s.emitted,
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
        // The rest of the content that was held back (or never streamed); a `tools` stream's
        // comes with its calls.
        if job.stream_text && job.hold.is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_streams_hold_back_what_could_begin_a_call() {
        let t: &[&str] = &["{\"name\"", "<think>"];
        assert_eq!(trigger_prefix_suffix(b"Sure {\"na", t), 4);
        assert_eq!(trigger_prefix_suffix(b"a <thi", t), 4);
        assert_eq!(trigger_prefix_suffix(b"plain text", t), 0);
        assert_eq!(
            trigger_prefix_suffix(b"x{\"name\"", t),
            0,
            "a whole trigger is found, not held"
        );
        assert_eq!(find_trigger(b"ab {\"name\": 1", t, 8), Some(3));
        let mut s = Seen { bytes: b"\n Hello there {\"n".to_vec(), ..Seen::default() };
        let len = s.bytes.len();
        let end = tools_window(&mut s, t, 0, len);
        // Leading whitespace skipped; the space before `{"n` held with it.
        assert_eq!(&s.bytes[s.sent..end], b"Hello there");
        s.bytes.extend_from_slice(b"ame\": \"f\"");
        s.emitted.push_str("Hello there");
        s.sent = end;
        let len = s.bytes.len();
        let end = tools_window(&mut s, t, 18, len);
        assert_eq!((s.trigger_at, end), (Some(14), 13), "nothing more once the call starts");
    }
}
