//! # grammask — grammar-constrained decoding, exact and fast
//!
//! At every decode step a language model emits logits over its vocabulary. grammask turns a
//! constraint into a per-step allow-mask over that vocabulary — a token is allowed **iff** the
//! output after it can still be completed to an accepted document — and the decode loop picks
//! the next token under that mask.
//!
//! ## When to use it
//! Structured output from an LLM you run yourself: JSON objects (OpenAI's `json_object`),
//! schema-conforming JSON, regex-shaped text, grammar-shaped text. Plug an engine into your
//! decode loop through the object-safe [`ConstraintEngine`] trait.
//!
//! ## A complete example
//! tokenizer → constraint → mask loop → token:
//! ```
//! use grammask::decode::{generate_greedy, RandomLogits};
//! use grammask::{ConstraintEngine, JsonConfig, JsonObjectConstraint, Vocabulary};
//!
//! let vocab = Vocabulary::embedded()?;          // Qwen3, embedded; or Vocabulary::from_file(..)
//! let mut engine = JsonObjectConstraint::new(&vocab, &JsonConfig::default())?;
//! let mut model = RandomLogits::new(&vocab, 7); // stands in for a real model's logits
//! let out = generate_greedy(&mut model, &mut engine, 400)?;
//! if out.finish_reason.as_str() == "stop" {
//!     let doc: serde_json::Value = serde_json::from_slice(&out.text)?;
//!     assert!(doc.is_object());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The pieces
//! - [`vocab`]: [`Vocabulary`] — every token decoded once to its bytes, kinds (text, special,
//!   padding), EOS ids, and the flat byte trie ([`vocab::TokTrie`]) every mask walks.
//! - [`mask`]: [`TokenMask`] — the allow-mask, a `u32`-word bitset with `&[bool]` and additive
//!   `f32` bias exports.
//! - [`engine`]: the [`ConstraintEngine`] contract and its typed [`EngineError`].
//! - [`recognizer`]: the byte-level interface ([`recognizer::Recognizer`]) the trie walker
//!   drives; [`copy_engine`]: a complete engine for any grammar with a small `Copy` state.
//! - [`json`]: free-form JSON (RFC 8259), [`JsonObjectConstraint`].
//! - [`schema`]: JSON Schema, [`SchemaConstraint`] over an `Arc`-shared [`CompiledSchema`]
//!   (keyword table in `docs/json-schema.md`; unsupported keywords are typed errors).
//! - [`regex`] and [`automaton`]: [`RegexConstraint`], a full-match regex as a live-state byte DFA
//!   (dense, or lazily determinised when the dense one is too big).
//! - [`cfg`](mod@cfg): GBNF grammars (llama.cpp's format, left recursion allowed), [`CfgConstraint`].
//! - [`bench`](mod@bench): the MaskBench harness and the JSON Schema Test Suite runner.
//! - [`sampler`]: logits + mask → token: greedy paths, the seed-`000` host pipeline (mask →
//!   logit bias → penalties → temperature softmax → top-p → min-p → top-k → draw with
//!   [`sampler::Pcg32`]), logprobs, `sampling_distribution` and speculative acceptance.
//! - [`decode`]: the decode loop ([`decode::decode`]): sample-then-check, thinking budget and
//!   [`decode::ThinkGate`], draft validation, fast-forward, batch masks; stand-in models.
//! - `gpu` (feature `mlx`): masked argmax on MLX arrays.
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
//! [`SchemaError`], [`RegexError`] and [`CfgError`] (compiling a constraint),
//! [`EngineError`] (advance/mask/rollback; the state is unchanged after an error),
//! [`sampler::SampleError`] (sampling), [`decode::DecodeError`] (the loop). Each has a `kind()`
//! and a message naming the culprit.
//!
//! ## Configuration and size limits
//! - [`JsonConfig`]: top level (object or any value), whitespace (compact, or flexible with runs
//!   of at most 32 bytes by default), nesting depth (64 by default, at most 128).
//! - [`EngineOptions`]: rollback history (64 tokens) and mask-cache size (8 masks).
//! - [`schema::SchemaOptions`]: whitespace, property order, `lenient`, and
//!   [`schema::SchemaLimits`] (nodes, `$ref` depth, automaton states, alternatives).
//! - [`RegexConfig`] / [`DfaConfig`]: DFA state and memory limits (past them, a lazy DFA with a
//!   per-request memory bound, [`RegexConfig::lazy_max_memory`]); [`CfgConfig`]: grammar size,
//!   Earley items per set (over it: [`EngineErrorKind::LimitExceeded`], never a smaller mask)
//!   and DFA states per lexeme.
//! - Tokens longer than [`vocab::MAX_TOKEN_BYTES`] are refused at vocabulary construction.
//!
//! ## Cargo features
//! - `mlx` (off): GPU masked argmax through `mlx-rs` (see `docs/gpu.md`); on Linux it builds
//!   against MLX's CPU library through `../shared/mlx-linux`.
//! - `mlx-metal` (off, macOS only): `mlx` plus MLX's Metal backend and Accelerate.
//! - `model` (on): [`model`], a GGUF `llama` backend on the CPU (KV cache, prefill, rollback),
//!   `Vocabulary::from_gguf` and Jinja chat templates; costs rayon and minijinja, no C code.

pub mod automaton;
pub mod bench;
pub mod cfg;
pub mod copy_engine;
pub mod decode;
pub mod engine;
mod forced;
#[cfg(feature = "mlx")]
pub mod gpu;
mod history;
pub mod json;
pub mod mask;
mod mask_cache;
#[cfg(feature = "model")]
pub mod model;
pub mod recognizer;
pub mod regex;
pub mod sampler;
pub mod schema;
pub mod stats;
pub mod token;
pub mod vocab;

pub use automaton::{ByteDfa, DfaConfig, RegexError};
pub use cfg::{CfgConfig, CfgConstraint, CfgError, CfgGrammar};
pub use copy_engine::{CopyGrammar, CopyStateEngine, EngineOptions};
pub use engine::{ConstraintEngine, EngineError, EngineErrorKind};
pub use json::{JsonConfig, JsonObjectConstraint};
pub use mask::TokenMask;
pub use regex::{RegexConfig, RegexConstraint};
pub use schema::{CompiledSchema, SchemaConstraint, SchemaError, SchemaErrorKind, SchemaOptions};
pub use token::TokenId;
pub use vocab::Vocabulary;

/// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
