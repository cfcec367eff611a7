//! Always finished, for a decode loop: a [`LogitsSource`] wrapper that lets its model run for a
//! token budget and then steers the output to the nearest end the completion search finds.
//!
//! Issue 20 measured `grammask generate` with the random-logit model on MaskBench schemas: 101
//! of 234 generations never finished within 2,000 tokens (strings and arrays keep growing,
//! recursive schemas never close). The fuzzer already knows how to end a document from any
//! prefix (`cursor.rs`); [`Finisher`] puts that behind the model interface, so the decode loop,
//! its sampler and the constraint's mask are unchanged: past the budget, the wrapped model's
//! logits are replaced by logits that allow one token only, the next token of the completion
//! (spelled greedily, longest vocabulary token first), then EOS. The mask still applies, so
//! a finish is checked by the token-level engine like every other step, and `finish_reason`
//! stays honest: `stop` only where the constraint accepted the output, `length` where
//! `max_tokens` came first.

use super::cursor::complete;
use super::{FuzzError, FuzzErrorKind, Fuzzer};
use crate::decode::models::{logits_or_nan, LogitsSource};
use crate::TokenId;

/// A model that finishes the document after a token budget (see the module docs).
///
/// ```
/// use grammask::decode::{decode, DecodeConfig};
/// use grammask::decode::models::RandomLogits;
/// use grammask::fuzz::{FuzzConfig, Finisher, Fuzzer};
/// use grammask::{Constraint, Vocabulary};
///
/// let vocab = Vocabulary::embedded()?;
/// // Recursive: a random walk nests without end.
/// let schema = serde_json::json!({"type": "array", "items": {"$ref": "#"}});
/// let compiled = Constraint::json_schema(&schema).compile(&vocab)?;
/// let fuzzer = Fuzzer::new(&compiled, FuzzConfig::default())?;
/// let mut model = Finisher::new(RandomLogits::new(&vocab, 3), &fuzzer, 40);
/// let mut engine = compiled.engine();
/// let config = DecodeConfig::builder().max_tokens(200).build()?;
/// let out = decode(&mut model, &vocab, Some(engine.as_mut()), &config)?;
/// assert_eq!(out.finish_reason.as_str(), "stop");
/// let doc: serde_json::Value = serde_json::from_str(&out.content())?;
/// assert!(doc.is_array());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Finisher<'f, 'c, M> {
    inner: M,
    fuzzer: &'f Fuzzer<'c>,
    after: usize,
    /// The whole document being steered to (the output so far plus its completion).
    target: Vec<u8>,
    eos: Option<TokenId>,
}

impl<'f, 'c, M: LogitsSource> Finisher<'f, 'c, M> {
    /// `inner` for the first `after` tokens, then the completion of the output so far under
    /// `fuzzer`'s constraint.
    pub fn new(inner: M, fuzzer: &'f Fuzzer<'c>, after: usize) -> Finisher<'f, 'c, M> {
        let eos = fuzzer.compiled.vocab().eos_ids().first().copied();
        Finisher { inner, fuzzer, after, target: Vec::new(), eos }
    }

    /// The wrapped model.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// The output's bytes (tokens spelled by the vocabulary).
    fn bytes_of(&self, tokens: &[TokenId]) -> Vec<u8> {
        let vocab = self.fuzzer.compiled.vocab();
        let mut out = Vec::new();
        for &t in tokens {
            out.extend_from_slice(vocab.token_bytes(t));
        }
        out
    }

    /// The next token towards the end: `None` when the output so far is the whole target (EOS
    /// is next). Recomputes the target when the output left it (a forced token spelled the same
    /// bytes differently, or the budget was just reached).
    fn next_token(&mut self, tokens: &[TokenId]) -> Result<Option<TokenId>, FuzzError> {
        let done = self.bytes_of(tokens);
        if !self.target.starts_with(&done) || self.target.is_empty() {
            self.target = self.fuzzer.finish(&done)?;
        }
        let rest = &self.target[done.len()..];
        if rest.is_empty() {
            return Ok(None);
        }
        let mut best = None;
        self.fuzzer.compiled.vocab().trie().prefix_tokens(rest, |len, t| best = Some((len, t)));
        match best {
            Some((_, t)) => Ok(Some(t)),
            None => Err(FuzzError::new(FuzzErrorKind::Unspellable { at: done.len() })),
        }
    }
}

impl<M: LogitsSource> LogitsSource for Finisher<'_, '_, M> {
    fn n_vocab(&self) -> usize {
        self.inner.n_vocab()
    }

    /// Infallible form ([`logits_or_nan`]); [`Finisher::try_logits`] is the one the loop calls.
    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]) {
        logits_or_nan(self, tokens, out);
    }

    fn try_logits(
        &mut self,
        tokens: &[TokenId],
        out: &mut [f32],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if tokens.len() < self.after {
            return self.inner.try_logits(tokens, out);
        }
        let next = match self.next_token(tokens)? {
            Some(t) => t,
            None => self.eos.ok_or_else(|| FuzzError::new(FuzzErrorKind::NoEos))?,
        };
        out.fill(f32::NEG_INFINITY);
        let slot = out
            .get_mut(next.0 as usize)
            .ok_or_else(|| FuzzError::new(FuzzErrorKind::Unspellable { at: self.target.len() }))?;
        *slot = 0.0;
        Ok(())
    }
}

impl Fuzzer<'_> {
    /// The shortest-found complete document that starts with `prefix` (prefix included): the
    /// completion search's, with at most [`FuzzConfig::max_bytes`](super::FuzzConfig::max_bytes)
    /// more bytes and [`FuzzConfig::max_work`](super::FuzzConfig::max_work) pushes.
    ///
    /// # Errors
    /// [`FuzzErrorKind::Refused`] when the constraint refuses `prefix`;
    /// [`FuzzErrorKind::Unfinished`] when no end was found within the budgets.
    pub fn finish(&self, prefix: &[u8]) -> Result<Vec<u8>, FuzzError> {
        let mut cur = self.cursor();
        for (i, &b) in prefix.iter().enumerate() {
            if !cur.push(b) {
                self.charge(&cur);
                return Err(FuzzError::new(FuzzErrorKind::Refused { at: i }));
            }
        }
        let left = self.config.max_bytes;
        let start = cur.work;
        let done =
            complete(&mut cur, left, self.config.max_work, self.json, &self.hints, &self.numbers);
        self.charge(&cur);
        match done {
            Ok(_) => Ok(cur.bytes().to_vec()),
            Err(_) => Err(FuzzError::new(FuzzErrorKind::Unfinished {
                max_bytes: prefix.len() + left,
                max_work: self.config.max_work.max(cur.work - start),
            })),
        }
    }
}
