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
use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

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
    let n = n_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, refs.len().max(1));
    let helpers = if n > 1 { Some(pool(n - 1)?) } else { None };
    let batch = Arc::new(Batch {
        refs: refs.as_ptr().cast(),
        idx: idx.as_ptr(),
        len: refs.len(),
        rows: target.rows,
        next: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        failure: Mutex::new(None),
    });
    let result = py.detach(|| {
        if let Some(p) = &helpers {
            for _ in 1..n {
                let b = batch.clone();
                // SAFETY: `Batch::drain`'s contract — this call returns only once every row
                // is finished, and a helper that starts later claims none.
                p.spawn(move || unsafe { b.drain() });
            }
        }
        // SAFETY: as above; `refs`, `idx` and the exported buffer outlive this call.
        unsafe { batch.drain() };
        batch.wait();
        match batch.failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
            None => Ok(()),
            Some(Failure::Error(e)) => Err(e),
            Some(Failure::Panic(p)) => resume_unwind(p),
        }
    });
    target.release(py);
    result.map_err(|e| errors::engine_error(py, &e))
}

/// One batch fill, shared by the calling thread and the pool's helpers.
///
/// The calling thread fills rows too and starts at once; rows go to whoever is free next
/// through one counter, so a helper that wakes late (tens of µs on a VM) takes fewer rows
/// instead of holding the batch up. The call returns when every row is *finished*, not when
/// every helper has run: a helper woken after the last row was taken finds nothing to claim
/// and touches nothing but this struct (kept alive by its `Arc`), so no batch waits for a
/// helper's wake-up, and the caller spins through the last rows' tail instead of sleeping on
/// a latch and paying a second wake-up (`rayon::in_place_scope` did both; docs/python.md has
/// the figures before and after).
struct Batch {
    /// `len` matchers and their rows, borrowed from the call: only read for a claimed row.
    refs: *const &'static PyMatcher,
    idx: *const usize,
    len: usize,
    rows: Rows,
    /// The next row to claim; claims past `len` find nothing.
    next: AtomicUsize,
    /// Rows done (filled, failed, or skipped after a failure).
    finished: AtomicUsize,
    /// A row failed: the rows claimed after it are skipped, the first failure is raised.
    failed: AtomicBool,
    failure: Mutex<Option<Failure>>,
}

/// Why a row of a batch failed.
enum Failure {
    Error(EngineError),
    Panic(Box<dyn Any + Send>),
}

// SAFETY: the pointers are only dereferenced for claimed rows, while the call that owns
// what they point to waits (see `Batch::drain`); `PyMatcher` is `Sync` (a frozen class over
// a `Mutex`), and rows are written by one thread each.
unsafe impl Send for Batch {}
// SAFETY: as above.
unsafe impl Sync for Batch {}

impl Batch {
    /// Claim and fill rows until none is left.
    ///
    /// # Safety
    /// The matchers, indices and buffer behind the pointers are alive for every row claimed
    /// here: the call that made the batch does not return before `finished == len`, and
    /// every row is counted finished only after its last access.
    unsafe fn drain(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.len {
                return;
            }
            if !self.failed.load(Ordering::Relaxed) {
                // SAFETY: `i < len`, and the call still waits for this row (above).
                let (m, row) = unsafe { (*self.refs.add(i), *self.idx.add(i)) };
                // A panic is caught so that the row still counts finished (the caller would
                // wait forever otherwise, and a panic on a pool thread aborts) and is
                // resumed on the calling thread, where pyo3 raises it as `PanicException`.
                let filled = catch_unwind(AssertUnwindSafe(|| {
                    let mut state = m.lock();
                    let mask = state.fill()?;
                    // SAFETY: rows checked in range, wide enough and distinct by the caller;
                    // the buffer stays exported until after `wait`.
                    unsafe { self.rows.write(row, mask) };
                    Ok::<(), EngineError>(())
                }));
                let failure = match filled {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(Failure::Error(e)),
                    Err(panic) => Some(Failure::Panic(panic)),
                };
                if let Some(f) = failure {
                    self.failed.store(true, Ordering::Relaxed);
                    self.failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(f);
                }
            }
            self.finished.fetch_add(1, Ordering::Release);
        }
    }

    /// Wait until every row is finished: spin (what is left is at most one row per helper,
    /// and a sleep would cost a wake-up), yielding the core after 200 µs in case a helper was
    /// descheduled mid-row.
    fn wait(&self) {
        let start = Instant::now();
        let mut spins = 0u32;
        while self.finished.load(Ordering::Acquire) < self.len {
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || start.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
