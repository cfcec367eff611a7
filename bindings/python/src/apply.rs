//! Applying a bitmask to host logits in place: `-inf` wherever a token's bit is clear, for
//! numpy arrays (and anything else with a buffer) of float32, float64 or float16.
//!
//! `grammask.apply_token_bitmask_inplace` calls [`apply_bitmask_rows`] for numpy logits; numpy's
//! own unpack-and-`copyto` took ~90–140 µs a row at 151,936 logits and 12–16 ms for 64 rows on
//! the machines measured (docs/python.md), most of it in materialising one bool per token. Here
//! a row is one pass over its words: a word with every bit set is skipped, a word of zeros is a
//! run of 32 stores, anything else is tested bit by bit, with the GIL released. Formats it does
//! not handle (bfloat16 through `ml_dtypes`, a last axis that is not contiguous, read-only
//! arrays) make it return `False` and the Python side does the numpy version.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;

/// `-inf` as an element of the logits' type (float16 as its bits).
#[derive(Clone, Copy)]
enum Neg {
    F32(f32),
    F64(f64),
    F16(u16),
}

/// The raw pointers of one call, sent to the GIL-free loop.
struct Target {
    logits: *mut u8,
    /// Bytes between logits rows (a multiple of the element size).
    row_stride: isize,
    words: *const u32,
    width: usize,
}

// SAFETY: the pointers stay valid while both buffers are exported (the call holds them until
// the loop returns); only this call writes through `logits`.
unsafe impl Send for Target {}

impl Target {
    /// Apply bitmask row `r` to logits row `r` for each `r` of `rows`.
    ///
    /// # Safety
    /// Each `r` is a row of both buffers; a logits row holds `vocab` contiguous, aligned
    /// elements of `neg`'s type, a bitmask row `self.width >= ceil(vocab / 32)` words.
    unsafe fn apply(&self, rows: &[usize], vocab: usize, neg: Neg) {
        for &r in rows {
            // SAFETY: by the contract.
            unsafe {
                let row = self.logits.offset(r as isize * self.row_stride);
                let words = self.words.add(r * self.width);
                match neg {
                    Neg::F32(v) => apply_row(row.cast::<f32>(), words, vocab, v),
                    Neg::F64(v) => apply_row(row.cast::<f64>(), words, vocab, v),
                    Neg::F16(v) => apply_row(row.cast::<u16>(), words, vocab, v),
                }
            }
        }
    }
}

/// One row: every token below `vocab` whose bit in `words` is clear gets `neg`.
///
/// # Safety
/// `row` holds `vocab` elements of `T`; `words` holds `ceil(vocab / 32)` words.
unsafe fn apply_row<T: Copy>(row: *mut T, words: *const u32, vocab: usize, neg: T) {
    // SAFETY: by the contract (`T` is one of f32/f64/u16: any bit pattern is a value, and
    // numpy aligns its elements).
    let (row, words) = unsafe {
        (
            std::slice::from_raw_parts_mut(row, vocab),
            std::slice::from_raw_parts(words, vocab.div_ceil(32)),
        )
    };
    for (chunk, &word) in row.chunks_mut(32).zip(words) {
        match word {
            u32::MAX => {}
            0 => chunk.fill(neg),
            _ => {
                for (b, x) in chunk.iter_mut().enumerate() {
                    if word >> b & 1 == 0 {
                        *x = neg;
                    }
                }
            }
        }
    }
}

/// `logits[r, i] = -inf` for every row `r` of `rows` and every `i < vocab` whose bit in
/// `bitmask[r]` is clear. `logits`: 1-D (one row, `rows == [0]`) or 2-D, float32/float64/float16,
/// writable, contiguous along its last axis; `bitmask`: int32 `[words]` or `[batch, words]`,
/// C-contiguous. Returns `False` (nothing written) for logits it does not handle; raises
/// `IndexError` for a row past either array and `ValueError` for a bitmask too narrow.
#[pyfunction]
pub(crate) fn apply_bitmask_rows(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    rows: Vec<usize>,
    vocab: usize,
) -> PyResult<bool> {
    let Ok(lb) = PyUntypedBuffer::get(logits) else { return Ok(false) };
    let code = lb.format().to_bytes().last().copied().unwrap_or(b'B');
    let neg = match (code, lb.item_size()) {
        (b'f', 4) => Neg::F32(f32::NEG_INFINITY),
        (b'd', 8) => Neg::F64(f64::NEG_INFINITY),
        (b'e', 2) => Neg::F16(0xFC00), // IEEE half -inf
        _ => {
            lb.release(py);
            return Ok(false);
        }
    };
    let item = lb.item_size();
    let aligned = lb.buf_ptr().cast::<u8>().align_offset(item) == 0;
    let (n_rows, n_cols, row_stride, col_stride) = match (lb.shape(), lb.strides()) {
        ([n], [s]) => (1, *n, 0, *s),
        ([r, n], [s0, s1]) => (*r, *n, *s0, *s1),
        _ => (0, 0, 0, 0),
    };
    let rows_aligned = row_stride % item as isize == 0;
    if lb.readonly()
        || !aligned
        || !rows_aligned
        || n_cols == 0
        || col_stride != item as isize
        || row_stride < 0
        || vocab > n_cols
    {
        lb.release(py);
        return Ok(false);
    }
    let bb = match PyUntypedBuffer::get(bitmask) {
        Ok(b) => b,
        Err(e) => {
            lb.release(py);
            return Err(e);
        }
    };
    let check = || -> PyResult<usize> {
        let aligned = bb.buf_ptr().cast::<u32>().align_offset(std::mem::align_of::<u32>()) == 0;
        if bb.item_size() != 4 || !bb.is_c_contiguous() || !aligned {
            return Err(PyValueError::new_err(
                "bitmask must be a C-contiguous, 4-byte aligned int32 array",
            ));
        }
        let (b_rows, width) = crate::bitmask::rows_and_width(&bb)?;
        if width * 32 < vocab {
            return Err(PyValueError::new_err(format!(
                "bitmask rows cover {} tokens, the logits have {vocab}",
                width * 32
            )));
        }
        if let Some(&r) = rows.iter().find(|&&r| r >= n_rows || r >= b_rows) {
            return Err(PyIndexError::new_err(format!(
                "row {r} is out of range: the logits have {n_rows} rows, the bitmask {b_rows}"
            )));
        }
        Ok(width)
    };
    let width = match check() {
        Ok(w) => w,
        Err(e) => {
            lb.release(py);
            bb.release(py);
            return Err(e);
        }
    };
    let t = Target {
        logits: lb.buf_ptr().cast::<u8>(),
        row_stride,
        words: bb.buf_ptr().cast::<u32>().cast_const(),
        width,
    };
    // SAFETY: every row of `rows` is in both arrays (checked above), a logits row holds
    // n_cols >= vocab aligned elements along a contiguous last axis and a bitmask row `width` >=
    // ceil(vocab / 32) words; neither buffer is released before this returns.
    py.detach(move || unsafe { t.apply(&rows, vocab, neg) });
    lb.release(py);
    bb.release(py);
    Ok(true)
}
