//! The model worker: one thread owns the [`BatchedModel`] and runs every in-flight request's
//! forward passes. Each request decodes on its own thread with the ordinary decode loop
//! ([`crate::decode::decode`]); its model is a [`RemoteModel`], a [`LogitsSource`] that sends
//! "logits after these tokens" to the worker and waits for the answer. The worker gathers the
//! requests that are waiting — it waits up to `batch_wait` for every sequence it answered last
//! step to come back, and takes new requests' prompts as they arrive — and answers them all
//! with one batched forward pass (or, with batching off, one pass per sequence).

use super::metrics::Metrics;
use crate::decode::LogitsSource;
use crate::model::{BatchedModel, ModelError, SeqId, StepRequest};
use crate::token::TokenId;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The answer to one logits request: the token buffer and logits buffer back, and the result.
type Reply = (Vec<TokenId>, Vec<f32>, Result<(), ModelError>);

enum Msg {
    Logits { ticket: u64, tokens: Vec<TokenId>, logits: Vec<f32>, reply: SyncSender<Reply> },
    Close { ticket: u64 },
}

/// The handle requests use to reach the worker (cheap to clone).
#[derive(Clone)]
pub struct Worker {
    tx: Sender<Msg>,
    n_vocab: usize,
}

struct Waiting {
    ticket: u64,
    tokens: Vec<TokenId>,
    logits: Vec<f32>,
    reply: SyncSender<Reply>,
}

impl Worker {
    /// Start the worker thread over `model`.
    pub fn start(
        model: BatchedModel,
        batch_wait: Duration,
        batched: bool,
        metrics: Arc<Metrics>,
    ) -> Worker {
        let (tx, rx) = channel();
        let n_vocab = model.vocab().n_vocab();
        std::thread::Builder::new()
            .name("grammask-worker".into())
            .spawn(move || run(model, rx, batch_wait, batched, &metrics))
            .expect("spawn the model worker");
        Worker { tx, n_vocab }
    }

    /// A model for one request whose sequence starts with `prompt`.
    pub fn remote(&self, ticket: u64, prompt: Vec<TokenId>) -> RemoteModel {
        let (reply_tx, reply_rx) = sync_channel(1);
        RemoteModel {
            ticket,
            worker: self.clone(),
            prompt_len: prompt.len(),
            tokens: Some(prompt),
            logits: Some(vec![0.0; self.n_vocab]),
            reply_tx,
            reply_rx,
            observer: None,
        }
    }
}

/// What a request's observer says after seeing the tokens so far.
pub type Observer = Box<dyn FnMut(&[TokenId]) -> Result<(), Halt> + Send>;

/// Why a request's decode was stopped from outside the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Halt {
    /// A `stop` string appeared.
    StopString,
    /// The client went away or the server is shutting down.
    Cancelled,
}

impl std::fmt::Display for Halt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Halt::StopString => "stop string",
            Halt::Cancelled => "cancelled",
        })
    }
}

impl std::error::Error for Halt {}

/// One request's view of the shared model (see the module docs). Dropping it frees the
/// sequence's KV cache in the worker.
pub struct RemoteModel {
    ticket: u64,
    worker: Worker,
    prompt_len: usize,
    tokens: Option<Vec<TokenId>>,
    logits: Option<Vec<f32>>,
    reply_tx: SyncSender<Reply>,
    reply_rx: Receiver<Reply>,
    observer: Option<Observer>,
}

impl RemoteModel {
    /// Call `f` with the generated tokens before every forward pass; its `Err` ends the
    /// decode (the loop reports it as a model error carrying the [`Halt`]).
    pub fn set_observer(&mut self, f: Observer) {
        self.observer = Some(f);
    }
}

impl Drop for RemoteModel {
    fn drop(&mut self) {
        let _ = self.worker.tx.send(Msg::Close { ticket: self.ticket });
    }
}

fn gone() -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(Halt::Cancelled)
}

impl LogitsSource for RemoteModel {
    fn n_vocab(&self) -> usize {
        self.worker.n_vocab
    }

    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]) {
        crate::decode::models::logits_or_nan(self, tokens, out);
    }

    fn try_logits(
        &mut self,
        tokens: &[TokenId],
        out: &mut [f32],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if let Some(obs) = self.observer.as_mut() {
            obs(tokens).map_err(|h| Box::new(h) as Box<dyn std::error::Error + Send + Sync>)?;
        }
        let mut seq = self.tokens.take().ok_or_else(gone)?;
        seq.truncate(self.prompt_len);
        seq.extend_from_slice(tokens);
        let logits = self.logits.take().ok_or_else(gone)?;
        let msg =
            Msg::Logits { ticket: self.ticket, tokens: seq, logits, reply: self.reply_tx.clone() };
        self.worker.tx.send(msg).map_err(|_| gone())?;
        let (seq, logits, r) = self.reply_rx.recv().map_err(|_| gone())?;
        out.copy_from_slice(&logits);
        self.tokens = Some(seq);
        self.logits = Some(logits);
        r.map_err(|e| Box::new(e) as _)
    }
}

fn run(
    mut model: BatchedModel,
    rx: Receiver<Msg>,
    batch_wait: Duration,
    batched: bool,
    metrics: &Metrics,
) {
    let mut seqs: FxHashMap<u64, SeqId> = FxHashMap::default();
    let mut waiting: Vec<Waiting> = Vec::new();
    // Sequences answered last step that have not asked again yet.
    let mut outstanding: FxHashSet<u64> = FxHashSet::default();
    let handle = |m: Msg,
                  model: &mut BatchedModel,
                  seqs: &mut FxHashMap<u64, SeqId>,
                  waiting: &mut Vec<Waiting>,
                  outstanding: &mut FxHashSet<u64>| match m {
        Msg::Logits { ticket, tokens, logits, reply } => {
            outstanding.remove(&ticket);
            waiting.push(Waiting { ticket, tokens, logits, reply });
        }
        Msg::Close { ticket } => {
            outstanding.remove(&ticket);
            if let Some(id) = seqs.remove(&ticket) {
                model.free(id);
            }
        }
    };
    loop {
        if waiting.is_empty() {
            match rx.recv() {
                Ok(m) => handle(m, &mut model, &mut seqs, &mut waiting, &mut outstanding),
                Err(_) => return,
            }
        }
        // Gather: everything already sent, then wait a little for the rest of last step.
        let deadline = Instant::now() + batch_wait;
        loop {
            while let Ok(m) = rx.try_recv() {
                handle(m, &mut model, &mut seqs, &mut waiting, &mut outstanding);
            }
            if outstanding.is_empty() || waiting.is_empty() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(m) => handle(m, &mut model, &mut seqs, &mut waiting, &mut outstanding),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        if waiting.is_empty() {
            continue;
        }
        let batch = std::mem::take(&mut waiting);
        for w in &batch {
            seqs.entry(w.ticket).or_insert_with(|| model.new_sequence());
        }
        for w in &batch {
            outstanding.insert(w.ticket);
        }
        step_and_reply(&mut model, &seqs, batch, batched, metrics);
    }
}

/// Run one step for `batch` (as one pass, or one pass each) and answer every request.
fn step_and_reply(
    model: &mut BatchedModel,
    seqs: &FxHashMap<u64, SeqId>,
    mut batch: Vec<Waiting>,
    batched: bool,
    metrics: &Metrics,
) {
    let t0 = Instant::now();
    let size = if batched { batch.len().max(1) } else { 1 };
    let mut i = 0;
    while i < batch.len() {
        let end = (i + size).min(batch.len());
        let (reqs, results) = {
            let group = &mut batch[i..end];
            let reqs: Vec<(SeqId, Vec<TokenId>)> = group
                .iter_mut()
                .map(|w| (seqs[&w.ticket], std::mem::take(&mut w.tokens)))
                .collect();
            let step: Vec<StepRequest<'_>> =
                reqs.iter().map(|(s, t)| StepRequest { seq: *s, tokens: t }).collect();
            let mut outs: Vec<&mut [f32]> = group.iter_mut().map(|w| &mut w.logits[..]).collect();
            let results = model.step(&step, &mut outs);
            (reqs, results)
        };
        for ((w, (_, tokens)), r) in batch[i..end].iter_mut().zip(reqs).zip(results) {
            w.tokens = tokens;
            let _ = w.reply.send((std::mem::take(&mut w.tokens), std::mem::take(&mut w.logits), r));
        }
        i = end;
    }
    metrics.batch_size.observe(batch.len() as f64);
    metrics.forward_seconds.observe(t0.elapsed().as_secs_f64());
    metrics.kv_bytes.set(model.kv_bytes() as i64);
}
