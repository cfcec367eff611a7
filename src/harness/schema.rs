//! The schema engine ([`crate::schema`]) as a [`ConstraintCompiler`] for the harnesses, and the
//! mapping of its typed compile errors to the harnesses' grouping keys.

use super::{CompileFailure, ConstraintCompiler};
use crate::engine::ConstraintEngine;
use crate::schema::{
    CompiledSchema, SchemaConstraint, SchemaError, SchemaErrorKind, SchemaOptions,
};
use crate::vocab::Vocabulary;
use serde_json::Value;
use std::sync::Arc;

/// Compiles with [`CompiledSchema::compile`]; one [`SchemaConstraint`] per document.
#[derive(Clone, Debug, Default)]
pub struct SchemaCompiler {
    /// The compiler's options (default: flexible whitespace, which accepts both compact JSON
    /// and Python's `", "`/`": "`, and any property order).
    pub options: SchemaOptions,
}

impl ConstraintCompiler for SchemaCompiler {
    type Compiled = Arc<CompiledSchema>;

    fn compile(
        &self,
        schema: &Value,
        _vocab: &Vocabulary,
    ) -> Result<Arc<CompiledSchema>, CompileFailure> {
        CompiledSchema::compile(schema, &self.options).map_err(|e| failure(&e))
    }

    fn instantiate(
        &self,
        compiled: &Arc<CompiledSchema>,
        vocab: &Vocabulary,
    ) -> Box<dyn ConstraintEngine> {
        Box::new(SchemaConstraint::new(Arc::clone(compiled), vocab))
    }
}

/// The harness's view of a [`SchemaError`]: `unsupported:<keyword>`, `invalid`,
/// `dangling-ref`, `unsatisfiable` (scored as refusing everything), `limit:<name>`.
pub fn failure(e: &SchemaError) -> CompileFailure {
    let (kind, unsatisfiable) = match e.kind() {
        SchemaErrorKind::Unsupported { keyword, .. } => (format!("unsupported:{keyword}"), false),
        SchemaErrorKind::Invalid { .. } => ("invalid".to_string(), false),
        SchemaErrorKind::DanglingRef { .. } => ("dangling-ref".to_string(), false),
        SchemaErrorKind::Unsatisfiable { .. } => ("unsatisfiable".to_string(), true),
        SchemaErrorKind::Limit { limit, .. } => (format!("limit:{limit}"), false),
        #[allow(unreachable_patterns)]
        _ => ("other".to_string(), false),
    };
    CompileFailure { kind, message: e.to_string(), unsatisfiable }
}
