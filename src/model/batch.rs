//! [`BatchedModel`]: one set of weights, many sequences, one forward pass per step for all of
//! them. The server (`grammask serve`) runs every in-flight request on it: each step gathers
//! the sequences that are waiting for logits — new requests' prompts (prefill) and running
//! requests' last tokens (decode) alike — and runs them as one batch, so every weight row is
//! read from memory once per step for the whole batch instead of once per sequence. Attention
//! stays per sequence, each over its own KV cache.
//!
//! Sequences are addressed by [`SeqId`]; like [`GgufModel`](super::GgufModel) each one is
//! asked for logits after a whole token sequence, and the cache is truncated to what it shares
//! with the one asked for before the rest is fed (so a rollback or a rejected token is never
//! answered from stale positions).

use super::error::{ModelError, ModelErrorKind};
use super::llama::{KvCache, Scratch, Segment, Weights};
use super::template::ChatTemplate;
use super::LlamaParams;
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A sequence of a [`BatchedModel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeqId(usize);

#[derive(Debug, Default)]
struct Seq {
    cache: KvCache,
    /// The tokens in `cache`.
    cached: Vec<u32>,
}

/// One sequence's request in a [`BatchedModel::step`]: the logits after all of `tokens`.
#[derive(Clone, Copy, Debug)]
pub struct StepRequest<'a> {
    /// The sequence.
    pub seq: SeqId,
    /// Its whole token sequence (prompt and generated tokens).
    pub tokens: &'a [TokenId],
}

/// Counters of a [`BatchedModel`], since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchStats {
    /// Forward passes run.
    pub steps: usize,
    /// Sequences summed over the steps (mean batch size = `sequences / steps`).
    pub sequences: usize,
    /// Tokens fed (prefill and decode).
    pub tokens: usize,
    /// Time in forward passes.
    pub time: Duration,
}

/// Shared weights and the KV caches of many sequences (see the module docs). Made from a
/// loaded model with [`GgufModel::into_batched`](super::GgufModel::into_batched).
#[derive(Debug)]
pub struct BatchedModel {
    weights: Arc<Weights>,
    context: usize,
    vocab: Vocabulary,
    template: Option<ChatTemplate>,
    add_bos: bool,
    pool: rayon::ThreadPool,
    scratch: Scratch,
    seqs: Vec<Option<Seq>>,
    logits: Vec<f32>,
    stats: BatchStats,
}

impl BatchedModel {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        weights: Arc<Weights>,
        context: usize,
        vocab: Vocabulary,
        template: Option<ChatTemplate>,
        add_bos: bool,
        pool: rayon::ThreadPool,
    ) -> BatchedModel {
        BatchedModel {
            weights,
            context,
            vocab,
            template,
            add_bos,
            pool,
            scratch: Scratch::default(),
            seqs: Vec::new(),
            logits: Vec::new(),
            stats: BatchStats::default(),
        }
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    /// The chat template, when the file has one.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// The hyper-parameters.
    pub fn params(&self) -> &LlamaParams {
        &self.weights.params
    }

    /// The context window of every sequence, in tokens.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Encode a prompt as [`GgufModel::encode_prompt`](super::GgufModel::encode_prompt) does.
    ///
    /// # Errors
    /// [`ModelErrorKind::Vocab`].
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<TokenId>, ModelError> {
        super::encode_prompt(&self.vocab, self.add_bos, text)
    }

    /// A new, empty sequence.
    pub fn new_sequence(&mut self) -> SeqId {
        let seq = Seq { cache: KvCache::new(&self.weights), cached: Vec::new() };
        match self.seqs.iter().position(Option::is_none) {
            Some(i) => {
                self.seqs[i] = Some(seq);
                SeqId(i)
            }
            None => {
                self.seqs.push(Some(seq));
                SeqId(self.seqs.len() - 1)
            }
        }
    }

    /// Drop a sequence and its cache (unknown ids are ignored).
    pub fn free(&mut self, id: SeqId) {
        if let Some(s) = self.seqs.get_mut(id.0) {
            *s = None;
        }
    }

    /// Live sequences.
    pub fn n_sequences(&self) -> usize {
        self.seqs.iter().filter(|s| s.is_some()).count()
    }

    /// Bytes held by the KV caches of the live sequences.
    pub fn kv_bytes(&self) -> usize {
        self.seqs.iter().flatten().map(|s| s.cache.bytes()).sum()
    }

    /// Counters since the model was made.
    pub fn stats(&self) -> BatchStats {
        self.stats
    }

    /// One forward pass for every request: `out[i]` (`n_vocab` wide) gets the logits after
    /// `reqs[i].tokens`. A request that cannot run (unknown sequence, empty or too long,
    /// a token out of range) gets its error and the others run.
    ///
    /// # Panics
    /// When `out` is shorter than `reqs` or a row is not `n_vocab` wide.
    pub fn step(
        &mut self,
        reqs: &[StepRequest<'_>],
        out: &mut [&mut [f32]],
    ) -> Vec<Result<(), ModelError>> {
        let nv = self.vocab.n_vocab();
        let kvd = self.weights.params.kv_dim();
        let mut results: Vec<Result<(), ModelError>> = Vec::with_capacity(reqs.len());
        // (request index, first token to feed)
        let mut run: Vec<(usize, usize)> = Vec::with_capacity(reqs.len());
        for (i, r) in reqs.iter().enumerate() {
            let check = || -> Result<usize, ModelError> {
                let total = r.tokens.len();
                if total == 0 {
                    return Err(ModelError::new(ModelErrorKind::Config(
                        "an empty sequence has no logits".into(),
                    )));
                }
                if total > self.context {
                    return Err(ModelError::new(ModelErrorKind::ContextFull {
                        tokens: total,
                        context: self.context,
                    }));
                }
                if let Some(t) = r.tokens.iter().find(|t| t.index() >= nv) {
                    return Err(ModelError::new(ModelErrorKind::TokenOutOfRange {
                        id: t.0,
                        n_vocab: nv,
                    }));
                }
                let seq = self.seqs.get(r.seq.0).and_then(Option::as_ref).ok_or_else(|| {
                    ModelError::new(ModelErrorKind::Config(format!("no sequence {}", r.seq.0)))
                })?;
                let common =
                    seq.cached.iter().zip(r.tokens).take_while(|(a, b)| **a == b.0).count();
                // At least one token is fed, to have logits at the end.
                Ok(common.min(total - 1))
            };
            match check() {
                Ok(keep) => {
                    results.push(Ok(()));
                    run.push((i, keep));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if run.is_empty() {
            return results;
        }
        // Take the caches out for the pass (a slot holds each request's sequence once: a
        // sequence asked for twice in one step runs only its first request).
        let mut caches = Vec::with_capacity(run.len());
        let mut pending: Vec<Vec<u32>> = Vec::with_capacity(run.len());
        let mut taken = Vec::with_capacity(run.len());
        for &(i, keep) in &run {
            let r = &reqs[i];
            let Some(seq) = self.seqs[r.seq.0].as_mut() else { continue };
            if taken.contains(&r.seq.0) {
                results[i] = Err(ModelError::new(ModelErrorKind::Config(format!(
                    "sequence {} asked for twice in one step",
                    r.seq.0
                ))));
                continue;
            }
            taken.push(r.seq.0);
            seq.cache.truncate(keep, kvd);
            seq.cached.truncate(keep);
            caches.push((i, std::mem::take(&mut seq.cache)));
            pending.push(r.tokens[keep..].iter().map(|t| t.0).collect());
        }
        let n_seg = caches.len();
        if self.logits.len() < n_seg * nv {
            self.logits.resize(n_seg * nv, 0.0);
        }
        let t0 = Instant::now();
        let r = {
            let mut segs: Vec<Segment<'_>> = caches
                .iter_mut()
                .zip(&pending)
                .map(|((_, cache), tokens)| Segment { cache, tokens })
                .collect();
            let (weights, context, scratch, logits) =
                (&self.weights, self.context, &mut self.scratch, &mut self.logits);
            self.pool.install(|| weights.forward(&mut segs, context, scratch, logits))
        };
        self.stats.steps += 1;
        self.stats.sequences += n_seg;
        self.stats.tokens += pending.iter().map(Vec::len).sum::<usize>();
        self.stats.time += t0.elapsed();
        for (g, ((i, cache), fed)) in caches.into_iter().zip(pending).enumerate() {
            let seq = self.seqs[reqs[i].seq.0].as_mut().expect("taken above");
            seq.cache = cache;
            match &r {
                Ok(()) => {
                    seq.cached.extend_from_slice(&fed);
                    out[i].copy_from_slice(&self.logits[g * nv..(g + 1) * nv]);
                }
                Err(e) => {
                    // Checked before the pass, so no cache changed; say so to every request.
                    results[i] = Err(ModelError::new(ModelErrorKind::Config(e.to_string())));
                }
            }
        }
        results
    }
}
