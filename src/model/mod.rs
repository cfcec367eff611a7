//! A real language model for the decode loop: [`GgufModel`] runs a `llama`-architecture GGUF
//! file (SmolLM2, Llama, …) on the CPU and implements [`LogitsSource`], with a KV cache,
//! batched prefill and truncation for rollback. Behind the cargo feature `model`; with
//! `default-features = false` none of this is compiled. It sits above the vocabulary and the
//! decode loop and nothing below points back at it.
//!
//! # Pieces
//! - `gguf`: the container ([`GgufFile`], and [`GgufWriter`] for tests and tools).
//! - `quant`: the block formats and dot kernels ([`DotKernel`]: AVX-512 VNNI or AVX2
//!   picked at run time, scalar reference).
//! - `llama`: the forward pass and KV cache.
//! - `vocab`: [`Vocabulary::from_gguf`] (`gpt2` byte-level BPE and `llama` SentencePiece).
//! - `template`: [`ChatTemplate`] (the model's Jinja chat template through minijinja).
//!
//! # Sequence and cache
//! The decode loop hands [`LogitsSource::logits`] the tokens generated so far; the model puts
//! its prompt ([`GgufModel::set_prompt`]) in front of them. The sequence asked for is compared
//! with what the cache holds: the cache is truncated to the common prefix (a rollback, a
//! rejected draft) and only the tokens after it are fed, all in one batch. Asking twice for
//! the same sequence returns the kept logits without running the model.
//!
//! # Example
//! ```no_run
//! use grammask::decode::{decode, DecodeConfig};
//! use grammask::model::{GgufModel, ModelConfig};
//! use grammask::{JsonConfig, JsonObjectConstraint};
//! let mut model = GgufModel::load("model.gguf", &ModelConfig::default())?;
//! let vocab = model.vocab().clone();
//! let prompt = model.chat_prompt(Some("Answer in JSON."), "A person with a name and an age.")?;
//! model.set_prompt(&prompt)?;
//! let mut engine = JsonObjectConstraint::new(&vocab, &JsonConfig::default())?;
//! let out = decode(&mut model, &vocab, Some(&mut engine), &DecodeConfig::greedy(200))?;
//! println!("{}", out.content());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
mod error;
pub mod gguf;
mod llama;
mod quant;
mod template;
mod vocab;

pub use batch::{BatchStats, BatchedModel, SeqId, StepRequest};
pub use error::{ModelError, ModelErrorKind};
pub use gguf::{GgufFile, GgufValue, GgufWriter, TensorInfo};
pub use llama::LlamaParams;
pub use quant::DotKernel;
pub use template::{ChatMessage, ChatTemplate};

use crate::decode::LogitsSource;
use crate::token::TokenId;
use crate::vocab::{TokenKind, Vocabulary};
use llama::Llama;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// Context window used when the config sets none: the model's own, at most this (the KV cache
/// of SmolLM2-135M is 46 KB per position).
pub const DEFAULT_CONTEXT: usize = 4096;

/// How to run a model. Build with [`ModelConfig::builder`]; `Default` is the documented
/// defaults.
#[derive(Clone, Debug, Default)]
pub struct ModelConfig {
    threads: Option<usize>,
    context: Option<usize>,
    kernel: Option<DotKernel>,
}

/// Builder of [`ModelConfig`].
#[derive(Clone, Debug, Default)]
pub struct ModelConfigBuilder {
    config: ModelConfig,
}

impl ModelConfig {
    /// A builder with the defaults.
    pub fn builder() -> ModelConfigBuilder {
        ModelConfigBuilder::default()
    }

    /// Threads of the forward pass (default: the available parallelism).
    pub fn threads(&self) -> usize {
        self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

impl ModelConfigBuilder {
    /// Threads of the forward pass (default: `std::thread::available_parallelism`). On a
    /// machine shared with other work, fewer threads than cores avoids oversubscription.
    pub fn threads(mut self, n: usize) -> Self {
        self.config.threads = Some(n);
        self
    }

    /// The context window in tokens (default: the model's, at most [`DEFAULT_CONTEXT`]).
    pub fn context(mut self, n: usize) -> Self {
        self.config.context = Some(n);
        self
    }

    /// Use the scalar kernels even where AVX2 is available (default: false; for tests):
    /// `kernel(DotKernel::Scalar)`.
    pub fn scalar_kernels(mut self, yes: bool) -> Self {
        self.config.kernel = if yes { Some(DotKernel::Scalar) } else { None };
        self
    }

    /// The int8 dot kernels' instruction set (default: [`DotKernel::best`] for this CPU).
    /// Loading fails with [`ModelErrorKind::Config`] where the CPU lacks it.
    pub fn kernel(mut self, kernel: DotKernel) -> Self {
        self.config.kernel = Some(kernel);
        self
    }

    /// The config.
    ///
    /// # Errors
    /// [`ModelErrorKind::Config`] for zero threads or a zero context.
    pub fn build(self) -> Result<ModelConfig, ModelError> {
        if self.config.threads == Some(0) || self.config.context == Some(0) {
            return Err(ModelError::new(ModelErrorKind::Config(
                "threads and context must be at least 1".into(),
            )));
        }
        Ok(self.config)
    }
}

/// Where loading stands, for a progress indicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadProgress {
    /// Bytes of the file read so far, of the total.
    Reading {
        /// Read.
        done: u64,
        /// Total.
        total: u64,
    },
    /// Building the vocabulary from the metadata.
    Vocabulary,
    /// Done.
    Ready,
}

/// Forward-pass time, counted since load or [`GgufModel::reset_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ForwardStats {
    /// Batched calls (prefill, or several new tokens after a rollback).
    pub prefill_calls: usize,
    /// Tokens fed by batched calls.
    pub prefill_tokens: usize,
    /// Time in batched calls.
    pub prefill_time: Duration,
    /// Single-token calls (decode steps).
    pub decode_calls: usize,
    /// Time in single-token calls.
    pub decode_time: Duration,
    /// Calls answered from the kept logits.
    pub reused: usize,
}

/// A GGUF model with its vocabulary, chat template, KV cache and thread pool.
#[derive(Debug)]
pub struct GgufModel {
    llama: Llama,
    vocab: Vocabulary,
    template: Option<ChatTemplate>,
    add_bos: bool,
    pool: rayon::ThreadPool,
    prompt: Vec<u32>,
    /// The tokens in the KV cache.
    cached: Vec<u32>,
    /// Tokens to feed this call (reused buffer).
    pending: Vec<u32>,
    /// Logits after `cached` when `logits_valid`.
    logits: Vec<f32>,
    logits_valid: bool,
    stats: ForwardStats,
}

fn read_with_progress(
    path: &Path,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<Vec<u8>, ModelError> {
    let io =
        |source| ModelError::new(ModelErrorKind::Io { path: path.display().to_string(), source });
    let mut f = std::fs::File::open(path).map_err(io)?;
    let total = f.metadata().map_err(io)?.len();
    let mut bytes = Vec::with_capacity(total as usize);
    let mut chunk = vec![0u8; 4 << 20];
    loop {
        let n = f.read(&mut chunk).map_err(io)?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
        progress(LoadProgress::Reading { done: bytes.len() as u64, total });
    }
    Ok(bytes)
}

impl GgufModel {
    /// Load a GGUF file.
    ///
    /// # Errors
    /// [`ModelErrorKind::Io`]; the container errors of [`GgufFile::parse`] (not GGUF,
    /// truncated); [`ModelErrorKind::UnsupportedArchitecture`],
    /// [`ModelErrorKind::UnsupportedQuantization`], [`ModelErrorKind::UnsupportedTokenizer`],
    /// [`ModelErrorKind::MissingKey`], [`ModelErrorKind::BadTensor`].
    pub fn load(path: impl AsRef<Path>, config: &ModelConfig) -> Result<GgufModel, ModelError> {
        Self::load_with_progress(path, config, &mut |_| {})
    }

    /// [`GgufModel::load`], reporting progress to `progress`.
    ///
    /// # Errors
    /// As [`GgufModel::load`].
    pub fn load_with_progress(
        path: impl AsRef<Path>,
        config: &ModelConfig,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<GgufModel, ModelError> {
        let bytes = read_with_progress(path.as_ref(), progress)?;
        Self::from_bytes_with_progress(bytes, config, progress)
    }

    /// Load from the bytes of a GGUF file.
    ///
    /// # Errors
    /// As [`GgufModel::load`], without `Io`.
    pub fn from_bytes(bytes: Vec<u8>, config: &ModelConfig) -> Result<GgufModel, ModelError> {
        Self::from_bytes_with_progress(bytes, config, &mut |_| {})
    }

    fn from_bytes_with_progress(
        bytes: Vec<u8>,
        config: &ModelConfig,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<GgufModel, ModelError> {
        let file = GgufFile::parse(&bytes)?;
        let arch = file.get_str("general.architecture").unwrap_or("");
        if arch != "llama" {
            return Err(ModelError::new(ModelErrorKind::UnsupportedArchitecture(arch.into())));
        }
        for t in &file.tensors {
            let ok = matches!(t.ggml_type, 0 | 1 | 2 | 3 | 8);
            if !ok {
                return Err(ModelError::new(ModelErrorKind::UnsupportedQuantization {
                    tensor: t.name.clone(),
                    ggml_type: gguf::type_name(t.ggml_type).into(),
                }));
            }
        }
        progress(LoadProgress::Vocabulary);
        let tok = vocab::GgufTokenizer::from_file(&file)?;
        let kernel = match config.kernel {
            None => DotKernel::best(),
            Some(k) if k.is_available() => k,
            Some(k) => {
                return Err(ModelError::new(ModelErrorKind::Config(format!(
                    "the {} kernel needs instructions this CPU does not have (it runs: {})",
                    k.name(),
                    DotKernel::ALL
                        .iter()
                        .filter(|k| k.is_available())
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))))
            }
        };
        let train_ctx = file.get_u64("llama.context_length").unwrap_or(DEFAULT_CONTEXT as u64);
        let context = config.context.unwrap_or((train_ctx as usize).min(DEFAULT_CONTEXT));
        let llama = Llama::new(&file, bytes, context, kernel)?;
        let n_vocab = llama.params.n_vocab;
        let vocab = tok.vocabulary(Some(n_vocab))?;
        let template = match &tok.chat_template {
            Some(src) => {
                let name = |id: Option<TokenId>| {
                    id.map(|t| String::from_utf8_lossy(vocab.token_bytes(t)).into_owned())
                        .unwrap_or_default()
                };
                let special = |id: Option<TokenId>| {
                    id.and_then(|t| vocab.tokenizer().and_then(|tk| tk.id_to_token(t.0)))
                        .unwrap_or_else(|| name(id))
                };
                let bos = special(vocab.bos_id());
                let eos = special(vocab.eos_ids().first().copied());
                Some(ChatTemplate::new(src)?.with_special_tokens(&bos, &eos))
            }
            None => None,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads())
            .thread_name(|i| format!("grammask-model-{i}"))
            .build()
            .map_err(|e| ModelError::new(ModelErrorKind::Config(e.to_string())))?;
        progress(LoadProgress::Ready);
        Ok(GgufModel {
            llama,
            vocab,
            template,
            add_bos: tok.add_bos,
            pool,
            prompt: Vec::new(),
            cached: Vec::new(),
            pending: Vec::new(),
            logits: vec![0.0; n_vocab],
            logits_valid: false,
            stats: ForwardStats::default(),
        })
    }

    /// The model's vocabulary (from the GGUF metadata, as wide as the output layer).
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    /// The chat template, when the file has one.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// The hyper-parameters.
    pub fn params(&self) -> &LlamaParams {
        &self.llama.params
    }

    /// The context window in tokens.
    pub fn context(&self) -> usize {
        self.llama.context()
    }

    /// True when the AVX2 kernels run (false: the scalar ones).
    pub fn uses_simd(&self) -> bool {
        self.llama.kernel() != DotKernel::Scalar
    }

    /// The int8 dot kernels' instruction set this model runs with.
    pub fn kernel(&self) -> DotKernel {
        self.llama.kernel()
    }

    /// Encode `text` as a prompt: BOS first when the tokenizer asks for it
    /// (`tokenizer.ggml.add_bos_token`) and the text does not already start with it; special
    /// tokens written in the text (`<|im_start|>`) are their ids.
    ///
    /// # Errors
    /// [`ModelErrorKind::Vocab`] from the tokenizer.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<TokenId>, ModelError> {
        encode_prompt(&self.vocab, self.add_bos, text)
    }

    /// This model's weights, vocabulary, template and thread pool as a [`BatchedModel`], which
    /// runs many sequences with one forward pass per step (the server's backend). The weights
    /// are shared, not copied; this model's own cache is dropped.
    pub fn into_batched(self) -> BatchedModel {
        let context = self.llama.context();
        BatchedModel::new(
            self.llama.weights().clone(),
            context,
            self.vocab,
            self.template,
            self.add_bos,
            self.pool,
        )
    }

    /// The tokens of a chat prompt: the chat template rendered for an optional system message
    /// and a user message, with the generation prompt; without a template, the plain text.
    ///
    /// # Errors
    /// [`ModelErrorKind::Template`], [`ModelErrorKind::Vocab`].
    pub fn chat_prompt(
        &self,
        system: Option<&str>,
        user: &str,
    ) -> Result<Vec<TokenId>, ModelError> {
        let text = match &self.template {
            Some(t) => {
                let mut messages = Vec::new();
                if let Some(s) = system {
                    messages.push(ChatMessage::new("system", s));
                }
                messages.push(ChatMessage::new("user", user));
                t.render(&messages, true)?
            }
            None => match system {
                Some(s) => format!("{s}\n\n{user}"),
                None => user.to_string(),
            },
        };
        self.encode_prompt(&text)
    }

    /// Set the prompt the loop's tokens continue. The cache keeps what the new prompt shares
    /// with the old sequence.
    ///
    /// # Errors
    /// [`ModelErrorKind::ContextFull`] (the prompt does not fit, with room for one token),
    /// [`ModelErrorKind::TokenOutOfRange`].
    pub fn set_prompt(&mut self, prompt: &[TokenId]) -> Result<(), ModelError> {
        if prompt.len() >= self.context() {
            return Err(ModelError::new(ModelErrorKind::ContextFull {
                tokens: prompt.len() + 1,
                context: self.context(),
            }));
        }
        let nv = self.vocab.n_vocab();
        if let Some(t) = prompt.iter().find(|t| t.index() >= nv) {
            return Err(ModelError::new(ModelErrorKind::TokenOutOfRange { id: t.0, n_vocab: nv }));
        }
        self.prompt.clear();
        self.prompt.extend(prompt.iter().map(|t| t.0));
        Ok(())
    }

    /// The prompt.
    pub fn prompt(&self) -> Vec<TokenId> {
        self.prompt.iter().map(|&t| TokenId(t)).collect()
    }

    /// Run the prompt through the model now (so its time is measured apart from the first
    /// decode step) and return how long it took.
    ///
    /// # Errors
    /// As [`GgufModel::sequence_logits`].
    pub fn prefill(&mut self) -> Result<Duration, ModelError> {
        let t0 = Instant::now();
        let mut out = vec![0.0; self.vocab.n_vocab()];
        self.sequence_logits(&[], &mut out).map(|()| t0.elapsed())
    }

    /// Tokens in the KV cache.
    pub fn n_cached(&self) -> usize {
        self.cached.len()
    }

    /// Drop the KV cache from position `n` on (the next call recomputes what it needs).
    pub fn truncate_cache(&mut self, n: usize) {
        if n < self.cached.len() {
            self.cached.truncate(n);
            self.llama.truncate(n);
            self.logits_valid = false;
        }
    }

    /// Forward-pass time since load or the last reset.
    pub fn stats(&self) -> ForwardStats {
        self.stats
    }

    /// Zero the counters of [`GgufModel::stats`].
    pub fn reset_stats(&mut self) {
        self.stats = ForwardStats::default();
    }

    /// Check that a constraint's vocabulary is this model's: same width and, token by token,
    /// same kind and bytes. Engines built on [`GgufModel::vocab`] pass at once.
    ///
    /// # Errors
    /// [`ModelErrorKind::VocabMismatch`] naming the width or the first differing token.
    pub fn check_vocab(&self, other: &Vocabulary) -> Result<(), ModelError> {
        if other.same_as(&self.vocab) {
            return Ok(());
        }
        let mismatch = |why: String| Err(ModelError::new(ModelErrorKind::VocabMismatch(why)));
        if other.n_vocab() != self.vocab.n_vocab() {
            return mismatch(format!(
                "it has {} tokens, the model {}",
                other.n_vocab(),
                self.vocab.n_vocab()
            ));
        }
        for i in 0..other.n_vocab() {
            let t = TokenId::from_index(i);
            let (a, b) = (self.vocab.kind(t), other.kind(t));
            if a != b || (a == TokenKind::Text && self.vocab.token_bytes(t) != other.token_bytes(t))
            {
                return mismatch(format!(
                    "token {i} is {} in the model but {} in the constraint",
                    self.vocab.describe(t),
                    other.describe(t)
                ));
            }
        }
        Ok(())
    }

    /// Logits after the prompt followed by `tokens`, using and updating the KV cache.
    ///
    /// # Errors
    /// [`ModelErrorKind::ContextFull`], [`ModelErrorKind::TokenOutOfRange`], and
    /// [`ModelErrorKind::Config`] when both the prompt and `tokens` are empty and the
    /// vocabulary has no BOS to start from.
    pub fn sequence_logits(
        &mut self,
        tokens: &[TokenId],
        out: &mut [f32],
    ) -> Result<(), ModelError> {
        let total = self.prompt.len() + tokens.len();
        if total == 0 {
            // An empty sequence: start from BOS when there is one.
            let Some(bos) = self.vocab.bos_id() else {
                return Err(ModelError::new(ModelErrorKind::Config(
                    "an empty prompt needs a BOS token".into(),
                )));
            };
            self.prompt.push(bos.0);
            let r = self.sequence_logits(tokens, out);
            self.prompt.clear();
            return r;
        }
        let np = self.prompt.len();
        let (prompt, cached) = (&self.prompt, &self.cached);
        let seq = |i: usize| -> u32 {
            if i < np {
                prompt[i]
            } else {
                tokens[i - np].0
            }
        };
        let common = (0..total.min(cached.len())).take_while(|&i| cached[i] == seq(i)).count();
        if common == total && cached.len() == total && self.logits_valid {
            out.copy_from_slice(&self.logits);
            self.stats.reused += 1;
            return Ok(());
        }
        // At least one token must be fed to get logits at the end.
        let keep = common.min(total - 1);
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        pending.extend((keep..total).map(seq));
        self.truncate_cache(keep);
        let t0 = Instant::now();
        let llama = &mut self.llama;
        let logits = &mut self.logits;
        let r = self.pool.install(|| llama.forward(&pending, logits));
        self.logits_valid = r.is_ok();
        if let Err(e) = r {
            self.pending = pending;
            // The cache may hold part of a failed batch; start over from what is known good.
            self.llama.truncate(keep);
            return Err(e);
        }
        let dt = t0.elapsed();
        if pending.len() == 1 {
            self.stats.decode_calls += 1;
            self.stats.decode_time += dt;
        } else {
            self.stats.prefill_calls += 1;
            self.stats.prefill_tokens += pending.len();
            self.stats.prefill_time += dt;
        }
        self.cached.extend_from_slice(&pending);
        self.pending = pending;
        out.copy_from_slice(&self.logits);
        Ok(())
    }
}

/// `text` encoded, BOS first when the tokenizer asks for it and the text lacks it.
fn encode_prompt(
    vocab: &Vocabulary,
    add_bos: bool,
    text: &str,
) -> Result<Vec<TokenId>, ModelError> {
    let mut ids = vocab.encode(text).map_err(|e| ModelError::new(ModelErrorKind::Vocab(e)))?;
    if let Some(bos) = vocab.bos_id().filter(|_| add_bos) {
        if ids.first() != Some(&bos) {
            ids.insert(0, bos);
        }
    }
    Ok(ids)
}

impl LogitsSource for GgufModel {
    fn n_vocab(&self) -> usize {
        self.vocab.n_vocab()
    }

    /// The infallible form ([`logits_or_nan`](crate::decode::models::logits_or_nan)); the loop
    /// itself calls [`LogitsSource::try_logits`].
    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]) {
        crate::decode::models::logits_or_nan(self, tokens, out);
    }

    fn try_logits(
        &mut self,
        tokens: &[TokenId],
        out: &mut [f32],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.sequence_logits(tokens, out).map_err(|e| Box::new(e) as _)
    }
}
