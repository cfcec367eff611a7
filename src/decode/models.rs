//! Stand-in language models for tests, fuzzing and the CLI: no weights, just logits.
//!
//! [`RandomLogits`] is the seeded random-logit model `grammask generate` runs. Uniform logits
//! over 150k tokens almost never pick the one closing quote a document needs, so documents would
//! run to the token limit; the model therefore adds a bias that grows with the step number to EOS
//! and to tokens that close structure (`"`, `}`, `]`), so most runs reach a complete document
//! while the early steps stay close to uniform. Concretely, at step `n` the logit of token `t` is
//!
//! ```text
//! u(seed, n, t) * spread + (n / ramp) * (#closing bytes in t + 4·[t is EOS])
//! ```
//!
//! with `u` uniform in [0, 1) from a counter-based hash (so logits are a pure function of seed,
//! step and token: reproducible and cheap to recompute). Defaults: `spread = 8`, `ramp = 64`.
//!
//! [`ReplayModel`] strongly prefers the tokens of a given document, for golden tests: it tracks
//! where in the document the history is and puts a large logit on the next document token (on
//! EOS past the end). When the history leaves the document (an injected `</think>`, a token the
//! constraint forced), it resynchronises on the next occurrence of the last token in the
//! document, so a forced `</think>` jumps to the answer.

use crate::token::TokenId;
use crate::vocab::Vocabulary;

/// A model: given the tokens so far, the next token's logits.
pub trait LogitsSource {
    /// Logits width.
    fn n_vocab(&self) -> usize;
    /// Write the logits for the next token after `tokens` into `out` (`out.len() == n_vocab()`).
    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]);

    /// [`LogitsSource::logits`] for models that can fail (a real model: context full, a bad
    /// token id). The decode loop calls this one and stops with
    /// [`DecodeErrorKind::Model`](super::DecodeErrorKind::Model) on an error. The default
    /// calls `logits` and never fails, so infallible models implement only `logits`.
    ///
    /// # Errors
    /// The model's own error.
    fn try_logits(
        &mut self,
        tokens: &[TokenId],
        out: &mut [f32],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.logits(tokens, out);
        Ok(())
    }
}

/// The infallible [`LogitsSource::logits`] of a model whose real one is
/// [`LogitsSource::try_logits`] (a real model, a remote one, a wrapper that can fail): on an
/// error every logit is NaN, which the decode loop refuses.
pub fn logits_or_nan<M: LogitsSource + ?Sized>(model: &mut M, tokens: &[TokenId], out: &mut [f32]) {
    if model.try_logits(tokens, out).is_err() {
        out.fill(f32::NAN);
    }
}

/// The seeded random-logit model with a closing bias (see the module docs).
#[derive(Clone, Debug)]
pub struct RandomLogits {
    seed: u64,
    spread: f32,
    ramp: f32,
    /// Per token: number of structure-closing bytes, plus 4 for EOS ids.
    closers: Vec<u8>,
    /// Per token: true when its bytes are all whitespace.
    blank: Vec<bool>,
}

/// SplitMix64 finaliser: a good 64-bit mix for counter-based random numbers.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl RandomLogits {
    /// A model over `vocab` drawing from `seed`.
    pub fn new(vocab: &Vocabulary, seed: u64) -> RandomLogits {
        let closers = (0..vocab.n_vocab())
            .map(|i| {
                let t = TokenId::from_index(i);
                if vocab.is_eos(t) {
                    4
                } else {
                    let n = vocab
                        .token_bytes(t)
                        .iter()
                        .filter(|&&b| matches!(b, b'"' | b'}' | b']'))
                        .count();
                    n.min(4) as u8
                }
            })
            .collect();
        let blank = (0..vocab.n_vocab())
            .map(|i| {
                let b = vocab.token_bytes(TokenId::from_index(i));
                !b.is_empty() && b.iter().all(u8::is_ascii_whitespace)
            })
            .collect();
        RandomLogits { seed, spread: 8.0, ramp: 64.0, closers, blank }
    }

    /// Change the noise amplitude and how fast the closing bias grows.
    pub fn with_shape(mut self, spread: f32, ramp: f32) -> RandomLogits {
        self.spread = spread;
        self.ramp = ramp.max(1.0);
        self
    }
}

impl LogitsSource for RandomLogits {
    fn n_vocab(&self) -> usize {
        self.closers.len()
    }

    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]) {
        let step = tokens.len() as u64;
        let base = mix64(self.seed ^ mix64(step.wrapping_add(0x9E37_79B9_7F4A_7C15)));
        let bias = step as f32 / self.ramp;
        for (i, ((o, &c), &blank)) in out.iter_mut().zip(&self.closers).zip(&self.blank).enumerate()
        {
            let r = mix64(base ^ (i as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93));
            let u = (r >> 40) as f32 * (1.0 / (1u64 << 24) as f32);
            *o = u * self.spread + bias * f32::from(c) - if blank { 4.0 } else { 0.0 };
        }
    }
}

/// A model that replays a document (see the module docs).
///
/// At each step the preferred token gets logit `strength` (default 30), every other token a
/// small seeded noise in `[0, 1)`, so greedy decoding reproduces the document exactly and
/// sampling at temperature 1 picks it with probability ≈ `1 − n·e^{-29}`.
///
/// # Example
/// ```
/// use grammask::decode::{decode, DecodeConfig, ReplayModel};
/// use grammask::{TokenId, Vocabulary};
/// let vocab = Vocabulary::embedded()?;
/// let doc = vocab.encode("{\"a\": 1}")?;
/// let mut model = ReplayModel::new(&vocab, doc.clone());
/// let out = decode(&mut model, &vocab, None, &DecodeConfig::greedy(50))?;
/// assert_eq!(out.text, b"{\"a\": 1}");
/// assert_eq!(out.finish_reason.as_str(), "stop");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReplayModel {
    doc: Vec<TokenId>,
    n_vocab: usize,
    eos: Option<TokenId>,
    strength: f32,
    seed: u64,
    /// `(history length, cursor)` memo so a step costs O(1) amortised.
    memo: (usize, usize),
}

impl ReplayModel {
    /// Replay `doc` over `vocab` (then the vocabulary's first EOS id).
    pub fn new(vocab: &Vocabulary, doc: Vec<TokenId>) -> ReplayModel {
        ReplayModel {
            doc,
            n_vocab: vocab.n_vocab(),
            eos: vocab.eos_ids().first().copied(),
            strength: 30.0,
            seed: 0x5EED,
            memo: (0, 0),
        }
    }

    /// Change how strongly the document token is preferred (its logit; others are in `[0, 1)`).
    pub fn with_strength(mut self, strength: f32) -> ReplayModel {
        self.strength = strength;
        self
    }

    /// The document position the next token is taken from, after `tokens`.
    pub fn cursor(&mut self, tokens: &[TokenId]) -> usize {
        let (mut len, mut cur) = self.memo;
        if len > tokens.len() {
            (len, cur) = (0, 0);
        }
        for &t in &tokens[len..] {
            if self.doc.get(cur) == Some(&t) {
                cur += 1;
            } else if let Some(j) = self.doc[cur.min(self.doc.len())..].iter().position(|&d| d == t)
            {
                cur += j + 1;
            }
        }
        self.memo = (tokens.len(), cur);
        cur
    }
}

impl LogitsSource for ReplayModel {
    fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]) {
        let cur = self.cursor(tokens);
        let base = mix64(self.seed ^ mix64(tokens.len() as u64));
        for (i, o) in out.iter_mut().enumerate() {
            let r = mix64(base ^ (i as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93));
            *o = (r >> 40) as f32 * (1.0 / (1u64 << 24) as f32);
        }
        let want = self.doc.get(cur).copied().or(self.eos);
        if let Some(t) = want {
            if t.index() < out.len() {
                out[t.index()] = self.strength;
            }
        }
    }
}
