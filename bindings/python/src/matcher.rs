//! `grammask.Matcher` — one request's constraint state over a `CompiledConstraint`, with
//! XGrammar's `GrammarMatcher` method names (`fill_next_token_bitmask`, `accept_token`,
//! `accept_string`, `rollback`, `is_terminated`, `reset`, `find_jump_forward_string`) — and
//! `fill_next_token_bitmask_batch`, which fills one bitmask row per matcher on a thread pool
//! with the GIL released.
//!
//! The engine sits behind a `Mutex` (uncontended: a few ns) so the class is `frozen` and a batch
//! fill can reach many matchers from pool threads without the GIL. Mask fills release the GIL
//! too, so Python threads filling different matchers run in parallel.

use crate::bitmask::{Bitmask, Rows};
use crate::constraint::PyCompiledConstraint;
use crate::errors;
use crate::vocab::check_id;
use grammask::{CompiledConstraint, ConstraintEngine, EngineError, EngineErrorKind};
use grammask::{TokenId, TokenMask};
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A request's mutable state.
struct State {
    engine: Box<dyn ConstraintEngine>,
    /// The mask each fill computes before it is copied into the caller's row.
    mask: TokenMask,
    /// Every token accepted since the start (or `reset`): `accept_string` replays them when a
    /// refused string cannot be rolled back within the engine's bounded history.
    tokens: Vec<TokenId>,
    /// `find_jump_forward_string`'s buffer.
    forced: Vec<u8>,
}

impl State {
    fn new(compiled: &CompiledConstraint) -> State {
        State {
            engine: compiled.engine(),
            mask: TokenMask::new(compiled.vocab().n_vocab()),
            tokens: Vec::new(),
            forced: Vec::new(),
        }
    }

    fn fill(&mut self) -> Result<&TokenMask, EngineError> {
        self.engine.fill_mask(&mut self.mask)?;
        Ok(&self.mask)
    }
}

/// One request's matcher over a `CompiledConstraint` (cheap to create: no compilation).
#[pyclass(frozen, name = "Matcher", module = "grammask._grammask")]
pub(crate) struct PyMatcher {
    compiled: Py<PyCompiledConstraint>,
    inner: CompiledConstraint,
    state: Mutex<State>,
}

impl PyMatcher {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside an engine poisons the lock; the state is still the engine's last one.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether an advance error is a refusal (`False` to Python) rather than an exception.
fn is_refusal(e: &EngineError) -> bool {
    matches!(
        e.kind(),
        EngineErrorKind::Refused { .. }
            | EngineErrorKind::SpecialToken { .. }
            | EngineErrorKind::EosNotAllowed { .. }
            | EngineErrorKind::AfterEos { .. }
    )
}

#[pymethods]
impl PyMatcher {
    #[new]
    fn new(py: Python<'_>, compiled: &Bound<'_, PyCompiledConstraint>) -> Self {
        let inner = compiled.get().inner.clone();
        let state = Mutex::new(py.detach(|| State::new(&inner)));
        PyMatcher { compiled: compiled.clone().unbind(), inner, state }
    }

    /// Write the mask of the tokens allowed next into row `index` of `bitmask` (int32,
    /// `[batch, ceil(vocab_size / 32)]` or one row), in XGrammar's layout. Returns whether
    /// any token is forbidden (`False` means the row allows everything). Releases the GIL.
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(
        &self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: usize,
    ) -> PyResult<bool> {
        let target = Bitmask::get(bitmask)?;
        let n_vocab = self.inner.vocab().n_vocab();
        if let Err(e) = target.check_row(py, index, n_vocab) {
            target.release(py);
            return Err(e);
        }
        let rows = target.rows;
        let result = py.detach(|| {
            let mut state = self.lock();
            // SAFETY: row and width checked above; the buffer stays exported until `release`
            // below; this thread is the only writer.
            state.fill().map(|mask| unsafe { rows.write(index, mask) })
        });
        target.release(py);
        result.map_err(|e| errors::engine_error(py, &e))
    }

    /// Consume `token_id`. `False` when the constraint refuses it (the state is then
    /// unchanged); `InvalidTokenError` for an id outside the vocabulary (or a padding id).
    fn accept_token(&self, py: Python<'_>, token_id: i64) -> PyResult<bool> {
        let t = check_id(py, token_id, self.inner.vocab().n_vocab())?;
        let mut state = self.lock();
        match state.engine.advance(t) {
            Ok(()) => {
                state.tokens.push(t);
                Ok(true)
            }
            Err(e) if is_refusal(&e) => Ok(false),
            Err(e) => Err(errors::engine_error(py, &e)),
        }
    }

    /// Consume the bytes of `text` (a `str` or `bytes`), whatever their tokenization: they are
    /// split greedily into the longest vocabulary tokens. `False` when the constraint refuses
    /// them; the state is then unchanged. Each token counts toward `rollback`.
    fn accept_string(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<bool> {
        let bytes: Vec<u8> = if let Ok(s) = text.cast::<PyString>() {
            s.to_str()?.as_bytes().to_vec()
        } else if let Ok(b) = text.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err("text must be str or bytes"));
        };
        let vocab = self.inner.vocab().clone();
        let mut tokens = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let mut best = None;
            vocab.trie().prefix_tokens(&bytes[at..], |len, t| best = Some((len, t)));
            match best {
                Some((len, t)) => {
                    tokens.push(t);
                    at += len;
                }
                None => {
                    return Err(errors::error(
                        py,
                        "GrammaskError",
                        format!("no token of the vocabulary starts with the byte at {at}"),
                        &[],
                    ))
                }
            }
        }
        let mut state = self.lock();
        for (k, &t) in tokens.iter().enumerate() {
            if let Err(e) = state.engine.advance(t) {
                // Undo the `k` tokens taken; past the bounded history, replay from the start.
                if state.engine.rollback(k).is_err() {
                    let mut fresh = State::new(&self.inner);
                    for &old in &state.tokens {
                        fresh.engine.advance(old).map_err(|e| errors::engine_error(py, &e))?;
                    }
                    fresh.tokens = std::mem::take(&mut state.tokens);
                    *state = fresh;
                }
                return if is_refusal(&e) { Ok(false) } else { Err(errors::engine_error(py, &e)) };
            }
        }
        state.tokens.extend_from_slice(&tokens);
        Ok(true)
    }

    /// Undo the last `num_tokens` accepted tokens (`RollbackError` past the history kept,
    /// `rollback_history` tokens, 64 by default; the state is then unchanged).
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&self, py: Python<'_>, num_tokens: usize) -> PyResult<()> {
        let mut state = self.lock();
        state.engine.rollback(num_tokens).map_err(|e| errors::engine_error(py, &e))?;
        let keep = state.tokens.len().saturating_sub(num_tokens);
        state.tokens.truncate(keep);
        Ok(())
    }

    /// Has an EOS token been accepted (the request is over)?
    fn is_terminated(&self) -> bool {
        self.lock().engine.is_finished()
    }

    /// Is the output a complete document here (EOS allowed)?
    fn is_accepting(&self) -> bool {
        self.lock().engine.is_accepting()
    }

    /// Back to the start of the output, as a new matcher.
    fn reset(&self, py: Python<'_>) {
        let fresh = py.detach(|| State::new(&self.inner));
        *self.lock() = fresh;
    }

    /// The text the constraint forces next (XGrammar's jump-forward string): the longest string
    /// every completion starts with, stopping where the document could end. Cut at the last
    /// whole UTF-8 character; `""` when nothing is forced.
    fn find_jump_forward_string(&self) -> String {
        let mut state = self.lock();
        let State { engine, forced, .. } = &mut *state;
        engine.forced_bytes(forced);
        let valid = match std::str::from_utf8(forced) {
            Ok(s) => s.len(),
            Err(e) => e.valid_up_to(),
        };
        String::from_utf8_lossy(&forced[..valid]).into_owned()
    }

    /// The tokens accepted since the start (or the last `reset`).
    #[getter]
    fn accepted_tokens(&self) -> Vec<u32> {
        self.lock().tokens.iter().map(|t| t.0).collect()
    }

    /// The logits width.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab().n_vocab()
    }

    /// The constraint this matcher follows.
    #[getter]
    fn compiled(&self, py: Python<'_>) -> Py<PyCompiledConstraint> {
        self.compiled.clone_ref(py)
    }

    /// Benchmark helper (`bench/`): seconds per `fill_mask` of the Rust engine alone, averaged
    /// over `iterations` calls in the current state, with no Python in the loop.
    fn _time_fill_mask(&self, py: Python<'_>, iterations: usize) -> PyResult<f64> {
        let r = py.detach(|| {
            let mut state = self.lock();
            let t0 = std::time::Instant::now();
            for _ in 0..iterations {
                state.fill()?;
            }
            Ok(t0.elapsed().as_secs_f64() / iterations.max(1) as f64)
        });
        r.map_err(|e| errors::engine_error(py, &e))
    }

    fn __repr__(&self) -> String {
        let s = self.lock();
        format!(
            "Matcher(kind={:?}, accepted={}, terminated={})",
            self.inner.kind().as_str(),
            s.tokens.len(),
            s.engine.is_finished()
        )
    }
}

/// A rayon pool of `n` helper threads, built once per `n` and kept.
fn pool(n: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = pools.get(&n) {
        return Ok(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("grammask-fill-{i}"))
        .build()
        .map_err(|e| PyValueError::new_err(format!("cannot start {n} threads: {e}")))?;
    let p = Arc::new(p);
    pools.insert(n, p.clone());
    Ok(p)
}

/// Fill row `indices[i]` (default: row `i`) of `bitmask` with the mask of `matchers[i]`, on
/// `n_threads` threads (default: the machine's cores) with the GIL released. Rows are handed
/// out one at a time, so uneven masks balance. Raises as `Matcher.fill_next_token_bitmask`,
/// and `ValueError` for repeated indices.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, n_threads=None, indices=None))]
pub(crate) fn fill_next_token_bitmask_batch(
    py: Python<'_>,
    matchers: Vec<Bound<'_, PyMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    n_threads: Option<usize>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    let target = Bitmask::get(bitmask)?;
    let check = || -> PyResult<Vec<usize>> {
        let idx = indices.unwrap_or_else(|| (0..matchers.len()).collect());
        if idx.len() != matchers.len() {
            return Err(PyIndexError::new_err(format!(
                "{} indices for {} matchers",
                idx.len(),
                matchers.len()
            )));
        }
        let mut seen = vec![false; target.rows.rows];
        for (m, &row) in matchers.iter().zip(&idx) {
            target.check_row(py, row, m.get().inner.vocab().n_vocab())?;
            if std::mem::replace(&mut seen[row], true) {
                return Err(PyValueError::new_err(format!("bitmask row {row} given twice")));
            }
        }
        Ok(idx)
    };
    let idx = match check() {
        Ok(i) => i,
        Err(e) => {
            target.release(py);
            return Err(e);
        }
    };
    let refs: Vec<&PyMatcher> = matchers.iter().map(|m| m.get()).collect();
    let rows: Rows = target.rows;
    let n = n_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, refs.len().max(1));
    let work = |i: usize| -> Result<(), EngineError> {
        let mut state = refs[i].lock();
        let mask = state.fill()?;
        // SAFETY: rows checked in range, wide enough and distinct above; the buffer stays
        // exported until `release` below, after every worker has returned.
        unsafe { rows.write(idx[i], mask) };
        Ok(())
    };
    // The calling thread fills rows too, beside `n - 1` pool threads: it starts at once while
    // a helper wakes (tens of µs on a VM), and rows go to whoever is free next through one
    // counter, so a late helper takes fewer rows instead of holding the batch up.
    let helpers = if n > 1 { Some(pool(n - 1)?) } else { None };
    let result = py.detach(|| match &helpers {
        None => (0..refs.len()).try_for_each(work),
        Some(p) => {
            let next = AtomicUsize::new(0);
            let failed: Mutex<Option<EngineError>> = Mutex::new(None);
            let drain = || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= refs.len() {
                    break;
                }
                if let Err(e) = work(i) {
                    // No row after a failure is handed out; the first error is the one raised.
                    next.store(refs.len(), Ordering::Relaxed);
                    failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    break;
                }
            };
            p.in_place_scope(|s| {
                for _ in 1..n {
                    s.spawn(|_| drain());
                }
                drain();
            });
            failed.into_inner().unwrap_or_else(|p| p.into_inner()).map_or(Ok(()), Err)
        }
    });
    target.release(py);
    result.map_err(|e| errors::engine_error(py, &e))
}
