//! `grammask._grammask`, the native half of the `grammask` Python package (issue 18): pyo3
//! classes over grammask's public Rust API, mirroring it module by module — [`vocab`]
//! (`Vocabulary`), [`constraint`] (`CompiledConstraint`), [`matcher`] (`Matcher` and the
//! GIL-free batch fill), [`bitmask`] (writing masks into caller-owned int32 buffers in the
//! XGrammar/vLLM bit layout), [`apply`] (those bitmasks onto host logits) and [`errors`] (Rust
//! errors onto the Python exception classes of `grammask/_errors.py`).
//!
//! The Python side (`python/grammask/`) adds what is plain Python: the exceptions, pickling
//! helpers, `allocate_token_bitmask` / `apply_token_bitmask_inplace` over numpy, torch and mlx,
//! and the framework adapters in `grammask.contrib`. `docs/python.md` is the manual.

mod apply;
mod bitmask;
mod constraint;
mod errors;
mod matcher;
mod vocab;

use pyo3::prelude::*;

/// The module `grammask._grammask`; `grammask/__init__.py` re-exports everything.
#[pymodule]
fn _grammask(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<vocab::PyVocabulary>()?;
    m.add_class::<constraint::PyCompiledConstraint>()?;
    m.add_class::<matcher::PyMatcher>()?;
    m.add_function(wrap_pyfunction!(matcher::fill_next_token_bitmask_batch, m)?)?;
    m.add_function(wrap_pyfunction!(apply::apply_bitmask_rows, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
