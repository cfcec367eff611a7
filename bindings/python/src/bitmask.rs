//! Writing masks into a caller's bitmask: an int32 (or uint32) array of shape
//! `[batch, ceil(vocab_size / 32)]` (or one row, `[ceil(vocab_size / 32)]`), through the buffer
//! protocol — numpy arrays, `array.array`, memoryviews; torch CPU tensors through their
//! zero-copy `.numpy()` view.
//!
//! # Layout
//! Token `i` is bit `i % 32` (least significant first) of word `i // 32` of its row: the layout
//! of [`grammask::TokenMask`], of XGrammar's `allocate_token_bitmask` and of vLLM's structured
//! output bitmask, so a row is the mask's words copied as they are. A row wider than the
//! vocabulary's words gets zeros past them (ids past `vocab_size` are never allowed); a narrower
//! one is a `VocabularyMismatchError`.

use crate::errors;
use grammask::mask::words_for;
use grammask::TokenMask;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The base of a bitmask's memory, movable to the threads that fill its rows. Each thread
/// writes only rows it was given, and the buffer outlives the threads (see [`Bitmask`]).
#[derive(Clone, Copy)]
pub(crate) struct Rows {
    base: *mut u32,
    /// Words per row.
    pub(crate) width: usize,
    /// Number of rows.
    pub(crate) rows: usize,
}

// SAFETY: `Rows` is only a pointer into a buffer that `Bitmask` keeps exported (and so alive and
// unmoved) while any copy is in use; writers touch disjoint rows (checked by the callers).
unsafe impl Send for Rows {}
// SAFETY: as above; shared copies are only read for their fields, writes go to disjoint rows.
unsafe impl Sync for Rows {}

impl Rows {
    /// Copy `mask`'s words into row `row`, zeroing the words past them. Returns whether any
    /// token is forbidden (XGrammar's "needs apply"), judged on the full words.
    ///
    /// # Safety
    /// `row < self.rows`, `words_for(mask.len()) <= self.width`, the buffer is still exported,
    /// and no other thread writes this row concurrently.
    pub(crate) unsafe fn write(self, row: usize, mask: &TokenMask) -> bool {
        let words = mask.words();
        debug_assert!(row < self.rows && words.len() <= self.width);
        // SAFETY: in bounds by the caller's contract; u32 and i32 share size and alignment.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(self.base.add(row * self.width), self.width) };
        dst[..words.len()].copy_from_slice(words);
        dst[words.len()..].fill(0);
        let full = mask.len() / 32;
        words[..full].iter().any(|&w| w != u32::MAX)
            || !mask.len().is_multiple_of(32) && {
                let tail = words[full];
                tail != (1u32 << (mask.len() % 32)) - 1
            }
    }
}

/// A bitmask buffer's (rows, words per row): `[words]` is one row; other shapes than 1-D and
/// 2-D are a `ValueError`.
pub(crate) fn rows_and_width(buffer: &PyUntypedBuffer) -> PyResult<(usize, usize)> {
    match buffer.shape() {
        [w] => Ok((1, *w)),
        [r, w] => Ok((*r, *w)),
        s => Err(PyValueError::new_err(format!(
            "bitmask must have 1 or 2 dimensions, not {}",
            s.len()
        ))),
    }
}

/// An exported bitmask buffer, checked: 32-bit integers, writable, C-contiguous, 1 or 2
/// dimensions. Release it with [`Bitmask::release`] (dropping it re-attaches to Python).
pub(crate) struct Bitmask {
    buffer: PyUntypedBuffer,
    pub(crate) rows: Rows,
}

impl Bitmask {
    /// Export `obj`'s buffer (a torch tensor through `.numpy()`), or raise `TypeError`
    /// (not a 32-bit integer array) or `ValueError` (read-only, not contiguous, not 1-D/2-D).
    pub(crate) fn get(obj: &Bound<'_, PyAny>) -> PyResult<Bitmask> {
        let buffer = match PyUntypedBuffer::get(obj) {
            Ok(b) => b,
            Err(e) => {
                if obj.hasattr("numpy")? && obj.hasattr("data_ptr")? {
                    PyUntypedBuffer::get(&obj.call_method0("numpy")?)?
                } else {
                    return Err(PyTypeError::new_err(format!(
                        "bitmask must be an int32 array (numpy, torch CPU, array.array): {e}"
                    )));
                }
            }
        };
        let format = buffer.format().to_bytes();
        let code = format.last().copied().unwrap_or(b'B');
        if buffer.item_size() != 4 || !matches!(code, b'i' | b'I' | b'l' | b'L') {
            return Err(PyTypeError::new_err(format!(
                "bitmask must hold 32-bit integers (int32), not format {:?} of {} bytes",
                String::from_utf8_lossy(format),
                buffer.item_size()
            )));
        }
        if buffer.readonly() {
            return Err(PyValueError::new_err("bitmask is read-only"));
        }
        if !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err("bitmask must be C-contiguous"));
        }
        let (rows, width) = rows_and_width(&buffer)?;
        let base = buffer.buf_ptr().cast::<u32>();
        if base.align_offset(std::mem::align_of::<u32>()) != 0 {
            return Err(PyValueError::new_err("bitmask memory is not 4-byte aligned"));
        }
        Ok(Bitmask { buffer, rows: Rows { base, width, rows } })
    }

    /// Check that row `index` exists and is wide enough for `n_vocab` bits.
    pub(crate) fn check_row(&self, py: Python<'_>, index: usize, n_vocab: usize) -> PyResult<()> {
        if index >= self.rows.rows {
            return Err(PyIndexError::new_err(format!(
                "bitmask row {index} is out of range ({} rows)",
                self.rows.rows
            )));
        }
        if words_for(n_vocab) > self.rows.width {
            return Err(errors::error(
                py,
                "VocabularyMismatchError",
                format!(
                    "bitmask rows have {} int32 words, the vocabulary needs ceil({n_vocab} / 32) = {}",
                    self.rows.width,
                    words_for(n_vocab)
                ),
                &[],
            ));
        }
        Ok(())
    }

    /// Give the buffer back to its exporter.
    pub(crate) fn release(self, py: Python<'_>) {
        self.buffer.release(py);
    }
}
