//! Batch masks: fill the masks of N engines (N requests decoding together) in parallel, into one
//! caller-owned buffer of `u32` rows — the layout GPU apply-kernels read (row `i` is request
//! `i`'s [`TokenMask`] words, `words_for(n_vocab)` words, layout in [`crate::mask`]).
//!
//! Work is split into contiguous chunks of engines, one per thread (`std::thread::scope`, no
//! pool: a spawn costs tens of microseconds; the calling thread takes the first chunk); each
//! thread owns
//! one scratch [`TokenMask`] from the [`BatchMasker`] and copies it into its rows. Engines are
//! independent, so the result is identical to filling them one after the other (tested).

use super::error::{DecodeError, DecodeErrorKind};
use crate::engine::ConstraintEngine;
use crate::mask::{words_for, TokenMask};

/// Reusable scratch for [`BatchMasker::fill`]: one mask per thread.
#[derive(Debug)]
pub struct BatchMasker {
    n_vocab: usize,
    threads: usize,
    scratch: Vec<TokenMask>,
}

impl BatchMasker {
    /// A masker for `n_vocab`-wide masks using at most `threads` threads (`0` means the number
    /// of available cores).
    pub fn new(n_vocab: usize, threads: usize) -> BatchMasker {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        BatchMasker {
            n_vocab,
            threads,
            scratch: (0..threads).map(|_| TokenMask::new(n_vocab)).collect(),
        }
    }

    /// Words per row.
    pub fn row_words(&self) -> usize {
        words_for(self.n_vocab)
    }

    /// Fill row `i` of `out` with the mask of `engines[i]`.
    ///
    /// # Errors
    /// `out.len() != engines.len() * row_words()` ([`DecodeErrorKind::Config`]), an engine of
    /// another width ([`DecodeErrorKind::WidthMismatch`]), or the first engine error (rows of
    /// other engines may then be filled or not).
    pub fn fill(
        &mut self,
        engines: &mut [&mut dyn ConstraintEngine],
        out: &mut [u32],
    ) -> Result<(), DecodeError> {
        let w = self.row_words();
        if out.len() != engines.len() * w {
            return Err(DecodeError::new(DecodeErrorKind::Config(format!(
                "batch buffer has {} words, {} engines need {}",
                out.len(),
                engines.len(),
                engines.len() * w
            ))));
        }
        for e in engines.iter() {
            if e.vocab().n_vocab() != self.n_vocab {
                return Err(DecodeError::new(DecodeErrorKind::WidthMismatch {
                    model: e.vocab().n_vocab(),
                    vocab: self.n_vocab,
                }));
            }
        }
        if engines.is_empty() {
            return Ok(());
        }
        let threads = self.threads.min(engines.len());
        if threads <= 1 {
            return fill_serial(engines, out, &mut self.scratch[0], w);
        }
        let per = engines.len().div_ceil(threads);
        let results: Vec<Result<(), DecodeError>> = std::thread::scope(|s| {
            let mut jobs =
                engines.chunks_mut(per).zip(out.chunks_mut(per * w)).zip(self.scratch.iter_mut());
            // The calling thread takes the first chunk itself: one spawn fewer.
            let ((first_es, first_rows), first_mask) = jobs.next().expect("at least one engine");
            let handles: Vec<_> = jobs
                .map(|((es, rows), mask)| s.spawn(move || fill_serial(es, rows, mask, w)))
                .collect();
            let mut results = vec![fill_serial(first_es, first_rows, first_mask, w)];
            results.extend(handles.into_iter().map(|h| h.join().expect("mask thread panicked")));
            results
        });
        results.into_iter().collect()
    }
}

/// Fill the rows of `engines` one after the other (the reference the parallel path equals).
///
/// # Errors
/// The first engine error.
pub fn fill_serial(
    engines: &mut [&mut dyn ConstraintEngine],
    out: &mut [u32],
    mask: &mut TokenMask,
    row_words: usize,
) -> Result<(), DecodeError> {
    for (e, row) in engines.iter_mut().zip(out.chunks_mut(row_words)) {
        e.fill_mask(mask)?;
        row.copy_from_slice(mask.words());
    }
    Ok(())
}
