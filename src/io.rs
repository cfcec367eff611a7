//! Bounded file reads: every file grammask reads (tokenizers, configs, schemas, grammars,
//! documents) goes through [`read_limited`], so a wrong path (`/dev/zero`, a multi-gigabyte
//! dump) is a typed [`ReadError`] naming the limit instead of an allocation that grows until the
//! process is killed.
//!
//! The limit is a parameter with a documented default ([`DEFAULT_MAX_FILE_BYTES`]); the
//! loaders take it from their configs ([`crate::vocab::VocabConfig::max_file_bytes`]) and the CLI from
//! `--max-file-bytes`. The read stops one byte past the limit, so a file of unbounded size
//! costs at most `limit + 1` bytes of memory before the error.

use std::fmt;
use std::io::Read;
use std::path::Path;

/// Default cap on one file read: 256 MiB (the largest `tokenizer.json` in common use, Gemma 3's,
/// is 33 MB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 256 << 20;

/// A file that could not be read, or that is larger than the limit.
#[derive(Debug)]
pub struct ReadError {
    path: String,
    kind: ReadErrorKind,
}

/// What went wrong in [`read_limited`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The operating system's error.
    Io(std::io::Error),
    /// The file holds more than `limit` bytes.
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 ([`read_text_limited`]).
    NotUtf8 {
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
}

impl ReadError {
    pub(crate) fn new(path: &Path, kind: ReadErrorKind) -> Self {
        ReadError { path: path.display().to_string(), kind }
    }

    /// The path as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What went wrong.
    pub fn kind(&self) -> &ReadErrorKind {
        &self.kind
    }

    /// The path and what went wrong, by value.
    pub fn into_parts(self) -> (String, ReadErrorKind) {
        (self.path, self.kind)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ReadErrorKind::Io(e) => write!(f, "cannot read {}: {e}", self.path),
            ReadErrorKind::TooLarge { limit } => write!(
                f,
                "{} is larger than the file size limit of {limit} bytes (--max-file-bytes)",
                self.path
            ),
            ReadErrorKind::NotUtf8 { offset } => {
                write!(f, "{} is not UTF-8 (invalid byte at offset {offset})", self.path)
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ReadErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Read the whole file at `path`, refusing one larger than `limit` bytes.
///
/// # Errors
/// [`ReadErrorKind::Io`] when the file cannot be opened or read, [`ReadErrorKind::TooLarge`]
/// when it holds more than `limit` bytes (found after reading at most `limit + 1`).
///
/// # Example
/// ```
/// use grammask::io::{read_limited, ReadErrorKind};
/// let err = read_limited("/dev/zero", 1 << 10).unwrap_err();
/// assert!(matches!(err.kind(), ReadErrorKind::TooLarge { limit: 1024 }));
/// ```
pub fn read_limited(path: impl AsRef<Path>, limit: u64) -> Result<Vec<u8>, ReadError> {
    let path = path.as_ref();
    let err = |kind| ReadError { path: path.display().to_string(), kind };
    let file = std::fs::File::open(path).map_err(|e| err(ReadErrorKind::Io(e)))?;
    // The size hint is only a hint (pipes, /dev/zero and /proc files report 0).
    let hint = file.metadata().map(|m| m.len()).unwrap_or(0);
    if hint > limit {
        return Err(err(ReadErrorKind::TooLarge { limit }));
    }
    let mut out = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| err(ReadErrorKind::Io(e)))?;
    if out.len() as u64 > limit {
        return Err(err(ReadErrorKind::TooLarge { limit }));
    }
    Ok(out)
}

/// [`read_limited`] for a text file: the bytes must be UTF-8.
///
/// # Errors
/// As [`read_limited`], plus [`ReadErrorKind::NotUtf8`].
pub fn read_text_limited(path: impl AsRef<Path>, limit: u64) -> Result<String, ReadError> {
    let path = path.as_ref();
    let bytes = read_limited(path, limit)?;
    String::from_utf8(bytes).map_err(|e| ReadError {
        path: path.display().to_string(),
        kind: ReadErrorKind::NotUtf8 { offset: e.utf8_error().valid_up_to() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_are_read_whole_and_large_ones_refused() {
        let dir = std::env::temp_dir().join(format!("grammask-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.txt");
        std::fs::write(&p, "héllo").unwrap();
        assert_eq!(read_text_limited(&p, 6).unwrap(), "héllo");
        let e = read_limited(&p, 5).unwrap_err();
        assert!(matches!(e.kind(), ReadErrorKind::TooLarge { limit: 5 }), "{e}");
        std::fs::write(&p, [0x61, 0xff, 0x62]).unwrap();
        let e = read_text_limited(&p, 100).unwrap_err();
        assert!(matches!(e.kind(), ReadErrorKind::NotUtf8 { offset: 1 }), "{e}");
        let e = read_limited(dir.join("missing"), 100).unwrap_err();
        assert!(matches!(e.kind(), ReadErrorKind::Io(_)), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_endless_stream_stops_at_the_limit() {
        let e = read_limited("/dev/zero", 4096).unwrap_err();
        assert!(e.to_string().contains("4096 bytes"), "{e}");
    }
}
