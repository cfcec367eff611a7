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

use crate::token::TokenId;
use crate::vocab::Vocabulary;

/// A model: given the tokens so far, the next token's logits.
pub trait LogitsSource {
    /// Logits width.
    fn n_vocab(&self) -> usize;
    /// Write the logits for the next token after `tokens` into `out` (`out.len() == n_vocab()`).
    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]);
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
