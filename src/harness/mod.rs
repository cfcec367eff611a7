//! Measurement and conformance harnesses (feature `harness`): MaskBench (`grammask maskbench`)
//! and the JSON Schema Test Suite runner. Not part of a library user's build: file I/O, threads,
//! JSONL and a Python `json.dumps` emulation belong to measuring engines, not to running them.
//!
//! Both harnesses drive any constraint that compiles from a JSON Schema through the
//! [`ConstraintCompiler`] trait, so they run the schema engine ([`schema::SchemaCompiler`])
//! and, in their own tests, the
//! free-form JSON engine as a stand-in ([`FreeJsonCompiler`]). Each document is tokenized with a
//! real tokenizer and walked token by token through the engine exactly as a decode loop would
//! ([`walk`]), timing every mask.
//!
//! - [`maskbench`]: a folder of MaskBench files (format in `../shared/README.md`) → per-schema
//!   JSONL records and a [`maskbench::MaskbenchSummary`] (pass rate, compile errors by keyword,
//!   false rejections/acceptances, mask and compile latency percentiles).
//! - [`suite`]: the official JSON Schema Test Suite → one outcome per test case, compared with a
//!   committed expected-results file (a ratchet).
//! - [`schema`]: the schema engine as a [`ConstraintCompiler`] ([`schema::SchemaCompiler`]).
//! - [`pyjson`]: Python's `json.dumps(…, ensure_ascii=False)`, the serialisation MaskBench uses.
//!
//! Latency percentiles come from [`crate::stats`], shared with the CLI and the decode loop.

pub mod maskbench;
pub mod pyjson;
pub mod schema;
pub mod suite;
pub mod walk;

use crate::engine::ConstraintEngine;
use crate::json::{JsonConfig, JsonObjectConstraint, TopLevel};
use crate::vocab::Vocabulary;
use serde_json::Value;
use std::fmt;

/// Why a constraint did not compile, as the harnesses record and group it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileFailure {
    /// A short, stable grouping key: the error kind, with the keyword for unsupported ones
    /// (e.g. `unsupported:not`, `invalid`, `dangling-ref`, `unsatisfiable`, `limit:states`).
    pub kind: String,
    /// The full message (names the keyword and its JSON pointer).
    pub message: String,
    /// True when the compiler proved that no instance validates: the harnesses then score the
    /// schema as refusing every instance (right for invalid ones, a false rejection for valid
    /// ones) instead of as unsupported.
    pub unsatisfiable: bool,
}

impl fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Something that compiles a JSON Schema once and then makes a fresh engine per document.
///
/// `Sync` so MaskBench can share it across its worker threads.
pub trait ConstraintCompiler: Sync {
    /// The compiled, shareable form of one schema.
    type Compiled: Send + Sync;

    /// Compile `schema` (the harness times this call).
    ///
    /// # Errors
    /// A [`CompileFailure`] for schemas the engine rejects or does not support.
    fn compile(&self, schema: &Value, vocab: &Vocabulary)
        -> Result<Self::Compiled, CompileFailure>;

    /// A fresh engine over `vocab` at the initial state of `compiled` (not timed).
    fn instantiate(
        &self,
        compiled: &Self::Compiled,
        vocab: &Vocabulary,
    ) -> Box<dyn ConstraintEngine>;
}

/// The free-form JSON engine as a stand-in compiler: it ignores the schema and accepts any JSON
/// value. Used by the harnesses' own tests, where its verdicts are known exactly.
#[derive(Clone, Debug, Default)]
pub struct FreeJsonCompiler {
    /// The JSON engine's options; `top_level` is forced to [`TopLevel::AnyValue`].
    pub config: JsonConfig,
}

impl ConstraintCompiler for FreeJsonCompiler {
    type Compiled = JsonConfig;

    fn compile(&self, schema: &Value, _vocab: &Vocabulary) -> Result<JsonConfig, CompileFailure> {
        if schema == &Value::Bool(false) {
            return Err(CompileFailure {
                kind: "unsatisfiable".into(),
                message: "the schema `false` accepts nothing".into(),
                unsatisfiable: true,
            });
        }
        Ok(self.config.clone().with_top_level(TopLevel::AnyValue))
    }

    fn instantiate(&self, config: &JsonConfig, vocab: &Vocabulary) -> Box<dyn ConstraintEngine> {
        Box::new(
            JsonObjectConstraint::new(vocab, config)
                .expect("the default JSON configuration is valid"),
        )
    }
}
