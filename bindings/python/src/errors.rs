//! Rust errors onto the Python exceptions of `grammask/_errors.py` (the classes live in Python so
//! they can inherit from both `GrammaskError` and the matching builtin, e.g. `ValueError`).
//! Built only on error paths: each conversion imports the module (a `sys.modules` look-up).

use grammask::schema::SchemaErrorKind;
use grammask::{ConstraintError, EngineError, EngineErrorKind};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// An instance of `grammask._errors.<class>(message, **attrs)` as a `PyErr`.
pub(crate) fn error(
    py: Python<'_>,
    class: &str,
    message: String,
    attrs: &[(&str, Option<Py<PyAny>>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("grammask._errors")?.getattr(class)?;
        let kwargs = PyDict::new(py);
        for (k, v) in attrs {
            kwargs.set_item(k, v)?;
        }
        Ok(PyErr::from_value(cls.call((message.clone(),), Some(&kwargs))?))
    };
    build().unwrap_or_else(|e| e)
}

fn s(py: Python<'_>, v: &str) -> Option<Py<PyAny>> {
    Some(pyo3::types::PyString::new(py, v).into_any().unbind())
}

/// A constraint that did not compile: `CompileError` with `kind` (`"json_schema"`, …), and for
/// schemas the `keyword` and JSON `pointer` the Rust error names.
pub(crate) fn compile_error(py: Python<'_>, e: &ConstraintError) -> PyErr {
    let (mut keyword, mut pointer) = (None, None);
    if let ConstraintError::Schema(se) = e {
        match se.kind() {
            SchemaErrorKind::Unsupported { keyword: k, pointer: p, .. } => {
                keyword = s(py, k);
                pointer = s(py, p);
            }
            SchemaErrorKind::DanglingRef { pointer: p, .. } => {
                keyword = s(py, "$ref");
                pointer = s(py, p);
            }
            SchemaErrorKind::Invalid { pointer: p, .. }
            | SchemaErrorKind::Unsatisfiable { pointer: p, .. } => pointer = s(py, p),
            _ => {}
        }
    }
    let kind = s(py, e.kind().as_str());
    error(
        py,
        "CompileError",
        e.to_string(),
        &[("kind", kind), ("keyword", keyword), ("pointer", pointer)],
    )
}

/// A vocabulary that did not load.
pub(crate) fn vocab_error(py: Python<'_>, e: &dyn std::fmt::Display) -> PyErr {
    error(py, "VocabularyError", e.to_string(), &[])
}

/// An engine error that is not a plain refusal: a bad id is `InvalidTokenError` (with
/// `token_id`), a too-long rollback `RollbackError`, a resource limit `GrammaskError`.
pub(crate) fn engine_error(py: Python<'_>, e: &EngineError) -> PyErr {
    match e.kind() {
        EngineErrorKind::OutOfRange { token, .. } => {
            let id = Some(token.0.into_pyobject(py).expect("int").into_any().unbind());
            error(py, "InvalidTokenError", e.to_string(), &[("token_id", id)])
        }
        EngineErrorKind::RollbackTooFar { .. } => error(py, "RollbackError", e.to_string(), &[]),
        EngineErrorKind::MaskLength { .. } => {
            error(py, "VocabularyMismatchError", e.to_string(), &[])
        }
        _ => error(py, "GrammaskError", e.to_string(), &[]),
    }
}
