//! # grammask — grammar-constrained decoding, exact and fast
//!
//! At every decode step a language model emits logits over its vocabulary. grammask turns a
//! constraint into a per-step allow-mask over that vocabulary — a token is allowed **iff** the
//! output after it can still be completed to an accepted document — and the decode loop picks
//! the next token under that mask.
//!
//! ## When to use it
//! Structured output from an LLM you run yourself: JSON objects (OpenAI's `json_object`),
//! schema-conforming JSON, regex-shaped text, grammar-shaped text, and free text with tool calls
//! and reasoning in a model's own format (structural tags). Plug an engine into your
//! decode loop through the object-safe [`ConstraintEngine`] trait.
//!
//! ## A complete example
//! tokenizer → constraint → compiled once → engine per request → mask loop → token:
//! ```
//! use grammask::decode::{generate_greedy, RandomLogits};
//! use grammask::{Constraint, Vocabulary};
//!
//! let vocab = Vocabulary::embedded()?;          // Qwen3, embedded; or Vocabulary::from_file(..)
//! let compiled = Constraint::json().compile(&vocab)?; // Arc-shared, Send + Sync
//! let mut engine = compiled.engine();           // one per request, no compilation
//! let mut model = RandomLogits::new(&vocab, 7); // stands in for a real model's logits
//! let out = generate_greedy(&mut model, &mut *engine, 400)?;
//! if out.finish_reason.as_str() == "stop" {
//!     let doc: serde_json::Value = serde_json::from_slice(&out.text)?;
//!     assert!(doc.is_object());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Layers
//! Bottom up, each using only the ones below it (checked by `tests/it/architecture.rs`; the map
//! is `docs/architecture.md`): [`token`], [`bytes`], [`io`], [`stats`] → [`mask`] → [`recognizer`],
//! [`sampler`] → [`vocab`], [`automaton`] → [`engine`] → the engines [`json`], [`regex`],
//! [`cfg`](mod@cfg), [`schema`] → [`constraint`] → [`decode`] → the harness and the CLI.
//!
//! ## The pieces
//! - [`constraint`]: [`Constraint`] — the one way to build any constraint: `Constraint::json()`,
//!   `::json_schema(&schema)`, `::regex(pattern)`, `::gbnf(grammar)` → [`CompiledConstraint`] →
//!   `engine()`; [`ConstraintError`] wraps each engine's typed error.
//! - [`constraint::tagged`]: structural tags — `Constraint::tagged(Tagged)`: free text with
//!   triggered, exactly constrained islands (tool calls, reasoning blocks), exact across every
//!   edge a token spans; [`constraint::tools`]: the tool-call formats of Qwen3, Llama 3,
//!   gpt-oss Harmony and DeepSeek-V3 built from an OpenAI `tools` list (`docs/tagged.md`).
//! - [`vocab`]: [`Vocabulary`] — every token decoded once to its bytes, kinds (text, special,
//!   padding), EOS ids, and the flat byte trie ([`vocab::TokTrie`]) every mask walks; engines
//!   attach per-vocabulary data through [`vocab::VocabExtension`]. [`vocab::VocabCache`] keeps
//!   all of it on disk between runs, keyed by a hash of the tokenizer files and checked on every
//!   read ([`Vocabulary::cache_outcome`] says what happened), so a process starts in
//!   milliseconds instead of loading `tokenizer.json` through `tokenizers` again.
//! - [`mask`]: [`TokenMask`] — the allow-mask, a `u32`-word bitset with `&[bool]` and additive
//!   `f32` bias exports. [`bytes`]: [`ByteSet`], 256-bit byte sets.
//! - [`engine`]: the [`ConstraintEngine`] contract, its typed [`EngineError`], the options
//!   every engine shares ([`EngineOptions`], [`Whitespace`]) and [`CopyStateEngine`], a complete
//!   engine for any grammar with a small `Copy` state; [`recognizer`]: the byte-level interface
//!   ([`recognizer::Recognizer`]) the trie walker drives.
//! - [`json`]: free-form JSON (RFC 8259), [`JsonObjectConstraint`].
//! - [`schema`]: JSON Schema, [`SchemaConstraint`] over an `Arc`-shared [`CompiledSchema`]
//!   (keyword table in `docs/json-schema.md`; unsupported keywords are typed errors).
//! - [`regex`] and [`automaton`]: [`RegexConstraint`], a full-match regex as a live-state byte DFA
//!   (dense, or lazily determinised when the dense one is too big).
//! - [`cfg`](mod@cfg): GBNF grammars (llama.cpp's format, left recursion allowed), [`CfgConstraint`].
//! - [`sampler`]: logits + mask → token: greedy paths, the seed-`000` host pipeline (mask →
//!   logit bias → penalties → temperature softmax → top-p → min-p → top-k → draw with
//!   [`sampler::Pcg32`]), logprobs, `sampling_distribution` and speculative acceptance.
//! - [`decode`]: the decode loop ([`decode::decode`]): sample-then-check, thinking budget and
//!   [`decode::ThinkGate`], draft validation, fast-forward, batch masks; stand-in models.
//! - `harness` (feature `harness`): the MaskBench harness and the JSON Schema Test Suite runner.
//! - `gpu` (feature `mlx`): masked argmax on MLX arrays.
//! - `server` (feature `server`): `grammask serve`, the OpenAI-compatible server.
//! - [`stats`]: latency summaries.
//!
//! ## Mask lifecycle
//! Per step: `wants_mask()` → `fill_mask(&mut mask)` (or `step_mask(n)` for a `&[bool]` view) →
//! sample → `advance(token)`. EOS ids are in the mask exactly when the document is complete;
//! when nothing else can follow, only EOS is. `rollback(n)` undoes the last `n` tokens (bounded
//! history). Masks are cached per exact grammar state, so repeated states cost a copy.
//!
//! ## Errors
//! Typed per phase: [`vocab::VocabError`] (loading), [`json::JsonConfigError`] (configuration),
//! [`SchemaError`], [`RegexError`], [`CfgError`] and [`constraint::TaggedError`] (compiling a
//! constraint),
//! [`EngineError`] (advance/mask/rollback; the state is unchanged after an error),
//! [`sampler::SampleError`] (sampling), [`decode::DecodeError`] (the loop). Each has a `kind()`
//! and a message naming the culprit.
//!
//! ## Configuration and size limits
//! Every config is `#[non_exhaustive]` with `with_*` builders and its defaults documented on
//! each field: `Config::default().with_a(..)`. Nothing in the library reads environment
//! variables; the CLI maps its flags onto config fields.
//! - [`JsonConfig`]: top level (object or any value), [`Whitespace`] (compact, or flexible with
//!   runs of at most 32 bytes by default), nesting depth (64 by default, at most 128).
//! - [`EngineOptions`]: rollback history (64 tokens) and mask-cache size (8 masks).
//! - [`SchemaOptions`]: [`Whitespace`] (flexible runs of at most 4 by default), property order, `lenient`, and
//!   [`schema::SchemaLimits`] (nodes, `$ref` depth, automaton states, alternatives, instance
//!   nesting depth).
//! - [`RegexConfig`] / [`DfaConfig`]: DFA state and memory limits (past them, a lazy DFA with a
//!   per-request memory bound, [`RegexConfig::lazy_max_memory`]); [`CfgConfig`]: grammar size,
//!   Earley items per set and per engine call (over them: [`EngineErrorKind::LimitExceeded`],
//!   never a smaller mask) and DFA states per lexeme.
//! - Tokens longer than [`vocab::MAX_TOKEN_BYTES`] are refused at vocabulary construction.
//! - Files are read through [`io::read_limited`] (256 MiB by default,
//!   [`vocab::VocabConfig::max_file_bytes`]); documents are tokenized with
//!   [`Vocabulary::encode_exact`] (in pieces, checked to spell the text as text tokens).
//! - Schema numbers are exact decimals (serde_json's `arbitrary_precision`); parse schema text
//!   with [`schema::parse_schema_text`] for errors that name the position or the depth limit.
//!
//! `docs/limits.md` lists every limit with its default, its CLI flag (`--limit NAME=N`,
//! `--max-file-bytes`) and the error a user sees.
//!
//! ## Cargo features
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `cli` | on | the `grammask` binary (clap), with `harness` and `embedded-tokenizer` |
//! | `harness` | via `cli` | `grammask::harness`: MaskBench, the JSON Schema Test Suite runner |
//! | `embedded-tokenizer` | via `cli` | [`Vocabulary::embedded`]: Qwen3's tokenizer, 2 MB gzipped |
//! | `mlx` | off | `gpu`: masked argmax through `mlx-rs` (`docs/gpu.md`; on Linux against MLX's CPU library through `../shared/mlx-linux`) |
//! | `mlx-metal` | off | `mlx` plus MLX's Metal backend and Accelerate (macOS only) |
//! | `model` | via `cli` | [`model`](mod@model): a GGUF `llama` backend on the CPU (KV cache, prefill, rollback), `Vocabulary::from_gguf`, Jinja chat templates; rayon and minijinja, no C code |
//! | `server` | off | `grammask::server` and `grammask serve`: an OpenAI-compatible HTTP server with structured outputs, batched decode over many requests (`docs/server.md`); tokio, axum, prometheus |
//!
//! With `default-features = false` the library compiles no clap, no harness, no embedded
//! tokenizer, no model backend.
//!
//! ## Python
//! `bindings/python` (a workspace member, not a feature) is the `grammask` Python package over
//! this public API: XGrammar-shaped int32 bitmasks in [`TokenMask`]'s layout, matchers, a
//! batched fill that releases the GIL, adapters for transformers, mlx-lm and a vLLM-style
//! backend (`docs/python.md`). A model that pads its logits row gets the width through
//! [`vocab::VocabConfig::n_vocab`] (`Vocabulary::from_file_with`, `Vocabulary::embedded_with`,
//! `Vocabulary::from_gguf_with`).

#[macro_use]
mod builder;

pub mod automaton;
pub mod bytes;
pub mod cfg;
pub mod constraint;
pub mod decode;
pub mod engine;
pub mod fuzz;
#[cfg(feature = "mlx")]
pub mod gpu;
#[cfg(feature = "harness")]
pub mod harness;
pub mod io;
pub mod json;
pub mod mask;
#[cfg(feature = "model")]
pub mod model;
pub mod recognizer;
pub mod regex;
pub mod sampler;
pub mod schema;
#[cfg(feature = "server")]
pub mod server;
pub mod stats;
pub mod token;
pub mod vocab;

pub use automaton::{ByteDfa, DfaConfig, RegexError};
pub use bytes::ByteSet;
pub use cfg::{CfgConfig, CfgConstraint, CfgError, CfgGrammar};
pub use constraint::{CompiledConstraint, Constraint, ConstraintError, ConstraintKind};
pub use engine::{
    ConstraintEngine, CopyGrammar, CopyStateEngine, EngineError, EngineErrorKind, EngineOptions,
    Whitespace,
};
pub use json::{JsonConfig, JsonObjectConstraint};
pub use mask::TokenMask;
pub use regex::{RegexConfig, RegexConstraint};
pub use schema::{
    CompiledSchema, Profile, SchemaConstraint, SchemaError, SchemaErrorKind, SchemaOptions,
};
pub use token::TokenId;
pub use vocab::Vocabulary;

/// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
