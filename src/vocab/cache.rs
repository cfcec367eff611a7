//! The vocabulary cache: a tokenizer's decoded form — every token's bytes and kind, the EOS, BOS
//! and pad ids, and the trie — stored once on disk and read back in milliseconds, instead of
//! loading `tokenizer.json` through `tokenizers` (0.3–1.3 s for the tokenizers of the major model
//! families) and decoding every token again on each start of the CLI, a script or a worker.
//!
//! # Keys, staleness and corruption
//! A cache file is named by its **key**: the xxh3-128 of the tokenizer file's bytes, the
//! `tokenizer_config.json` bytes (or their absence), every [`VocabConfig`] option that changes the
//! result (logits width, extra EOS ids and tokens), [`FORMAT_VERSION`] and the crate version. A
//! changed tokenizer or option is a different key, so a stale file is never even opened. A file
//! that is read is **trusted for nothing**: its header must carry the key asked for, its payload
//! the xxh3-128 checksum in the header, every table must be consistent (lengths, offsets, kinds,
//! ids in range, special tokens without bytes), and the trie is checked node by node against the
//! token table (`TokTrie::from_stored_parts`: well nested, each token's node spells exactly its
//! bytes, every text token present once). Any failure rebuilds the vocabulary from the tokenizer
//! and overwrites the file ([`CacheOutcome::Rebuilt`] says why). Writes go to a temporary file in
//! the same directory and are renamed into place, so concurrent processes never read half a
//! file.
//!
//! # Encoding text without `tokenizers`
//! The `tokenizers::Tokenizer` itself is not stored: loading its BPE model is the slow part
//! (0.3–1.3 s). What encoding needs is stored instead, keyed by ids: for a BPE tokenizer the
//! merge table, the single-character and byte-fallback ids, and the normaliser and
//! pre-tokenizer as `tokenizers`' own JSON ([`super::bpe`]). [`Vocabulary::encode`] on a cached
//! vocabulary runs that encoder (`Vocabulary::has_cached_encoder`) and gives the ids
//! `tokenizers` gives.
//!
//! # What a cached vocabulary lacks until asked
//! The `tokenizers` model loads on first use — for the rare text the stored encoder leaves to
//! it (an added token matched after normalisation: `vocab/bpe.rs`), for a tokenizer the stored
//! encoder does not reproduce, and for the calls that need the
//! tokenizer itself ([`Vocabulary::tokenizer`], [`Vocabulary::token_id`]) — from the same file,
//! refused with a typed error if the file's bytes no longer hash to the key the cache was read
//! under (the file changed since). Masks, sampling and decoding of token ids never need it.
//!
//! Bump [`FORMAT_VERSION`] whenever the file layout or anything that decides a vocabulary's
//! contents changes (token decoding, EOS rules, the trie layout, the stored encoder); the test
//! `vocab_cache::fingerprint_pins_format_version` fails until it is bumped.

use super::bpe::{BpeEncoder, BpeTables};
use super::trie::StoredTrie;
use super::{
    TokTrie, TokenEncoding, TokenKind, VocabConfig, VocabInner, VocabSource, MAX_TOKEN_BYTES,
};
use crate::token::TokenId;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::{xxh3_128, Xxh3};

/// Version of the cache's layout and of the rules that decide a vocabulary's contents; part of
/// every key.
pub const FORMAT_VERSION: u32 = 2;

const MAGIC: [u8; 8] = *b"GMVOCAB\0";
/// Magic (8), version (4), reserved (4), key (16), checksum (16), payload length (8).
const HEADER_BYTES: usize = 56;

/// Where a vocabulary's decoded form is kept between runs ([`VocabConfig::cache`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum VocabCache {
    /// Never read or write a cache: the library's default (a library does not write to a
    /// user's home unasked).
    #[default]
    Off,
    /// The per-user cache directory: `$GRAMMASK_CACHE_DIR` when set, else the platform's
    /// (`$XDG_CACHE_HOME/grammask` or `~/.cache/grammask` on Linux, `~/Library/Caches/grammask`
    /// on macOS, `%LOCALAPPDATA%\grammask` on Windows), subdirectory `vocab`. The CLI's
    /// default.
    User,
    /// Files in this directory (created if missing).
    ///
    /// Either directory keeps at most [`MAX_FILES`] vocabularies, the least recently used
    /// removed when a new one is stored; deleting the directory is always safe.
    Dir(PathBuf),
}

impl VocabCache {
    /// The directory cache files go to, or `None` when off (or no per-user cache directory
    /// is known on this platform).
    pub fn dir(&self) -> Option<PathBuf> {
        match self {
            VocabCache::Off => None,
            VocabCache::Dir(d) => Some(d.clone()),
            VocabCache::User => {
                let base = match std::env::var_os("GRAMMASK_CACHE_DIR") {
                    Some(d) if !d.is_empty() => PathBuf::from(d),
                    _ => dirs::cache_dir()?.join("grammask"),
                };
                Some(base.join("vocab"))
            }
        }
    }
}

/// What the cache did for one vocabulary ([`super::Vocabulary::cache_outcome`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheOutcome {
    /// Read back from this file; the `tokenizers` model loads on first use (see the module
    /// docs for when).
    Hit {
        /// The cache file.
        path: PathBuf,
    },
    /// No file yet: built from the tokenizer and stored here.
    Stored {
        /// The cache file.
        path: PathBuf,
    },
    /// A file was there but refused (`why`): rebuilt from the tokenizer and stored again.
    Rebuilt {
        /// The cache file.
        path: PathBuf,
        /// Why the file was refused.
        why: String,
    },
    /// Built from the tokenizer; storing it failed (`why`). The vocabulary is still exact.
    NotStored {
        /// The cache file it would have been.
        path: PathBuf,
        /// Why it could not be written.
        why: String,
    },
}

/// The xxh3-128 of a tokenizer file's bytes (what a lazily loaded encoder is checked against).
pub(crate) fn content_hash(bytes: &[u8]) -> u128 {
    xxh3_128(bytes)
}

/// [`content_hash`] of a file and its length, read in pieces (a cache hit never holds the
/// tokenizer file in memory), refused past `limit` bytes.
pub(crate) fn hash_file(path: &Path, limit: u64) -> Result<(u128, u64), crate::io::ReadError> {
    use std::io::Read as _;
    let err = |kind| crate::io::ReadError::new(path, kind);
    let mut file = std::fs::File::open(path).map_err(|e| err(crate::io::ReadErrorKind::Io(e)))?;
    let mut h = Xxh3::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut len = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(crate::io::ReadErrorKind::Io(e))),
        };
        len += n as u64;
        if len > limit {
            return Err(err(crate::io::ReadErrorKind::TooLarge { limit }));
        }
        h.update(&buf[..n]);
    }
    Ok((h.digest128(), len))
}

/// The key of a vocabulary built with these options from a tokenizer file of this
/// [`content_hash`] and length and this config file.
pub(crate) fn key(
    tokenizer_hash: u128,
    tokenizer_len: u64,
    config_json: Option<&[u8]>,
    opts: &VocabConfig,
) -> u128 {
    fn put(h: &mut Xxh3, b: &[u8]) {
        h.update(&(b.len() as u64).to_le_bytes());
        h.update(b);
    }
    let mut h = Xxh3::new();
    h.update(&MAGIC);
    h.update(&FORMAT_VERSION.to_le_bytes());
    put(&mut h, env!("CARGO_PKG_VERSION").as_bytes());
    h.update(&tokenizer_hash.to_le_bytes());
    h.update(&tokenizer_len.to_le_bytes());
    match config_json {
        None => h.update(&[0]),
        Some(c) => {
            h.update(&[1]);
            put(&mut h, c);
        }
    }
    h.update(&opts.n_vocab.map_or(u64::MAX, |n| n as u64).to_le_bytes());
    h.update(&(opts.extra_eos.len() as u64).to_le_bytes());
    for id in &opts.extra_eos {
        h.update(&id.to_le_bytes());
    }
    h.update(&(opts.extra_eos_tokens.len() as u64).to_le_bytes());
    for t in &opts.extra_eos_tokens {
        put(&mut h, t.as_bytes());
    }
    h.digest128()
}

/// The file of `key` in `dir`.
pub(crate) fn file_path(dir: &Path, key: u128) -> PathBuf {
    dir.join(format!("{key:032x}.gmvocab"))
}

/// The payload of a vocabulary: everything but the tokenizer, the source and the extensions.
fn payload(inner: &VocabInner) -> Vec<u8> {
    let mut w = Vec::with_capacity(inner.bytes.len() + inner.trie.node_count() * 8 + (1 << 20));
    let u64_ = |w: &mut Vec<u8>, v: u64| w.extend_from_slice(&v.to_le_bytes());
    let u32s = |w: &mut Vec<u8>, v: &mut dyn Iterator<Item = u32>, n: usize| {
        w.extend_from_slice(&(n as u64).to_le_bytes());
        for x in v {
            w.extend_from_slice(&x.to_le_bytes());
        }
    };
    w.push(match inner.encoding {
        TokenEncoding::ByteLevel => 0,
        TokenEncoding::Metaspace { byte_fallback: false } => 1,
        TokenEncoding::Metaspace { byte_fallback: true } => 2,
        TokenEncoding::Raw => 3,
    });
    w.push(u8::from(inner.prepends_space));
    u64_(&mut w, inner.n_tokens as u64);
    u64_(&mut w, inner.n_vocab as u64);
    u32s(&mut w, &mut inner.eos.iter().map(|t| t.0), inner.eos.len());
    u64_(&mut w, inner.bos.map_or(u64::MAX, |t| u64::from(t.0)));
    u64_(&mut w, inner.pad.map_or(u64::MAX, |t| u64::from(t.0)));
    u64_(&mut w, inner.kinds.len() as u64);
    w.extend(inner.kinds.iter().map(|k| match k {
        TokenKind::Text => 0u8,
        TokenKind::Special => 1,
        TokenKind::Padding => 2,
    }));
    u32s(&mut w, &mut inner.offsets.iter().copied(), inner.offsets.len());
    u64_(&mut w, inner.bytes.len() as u64);
    w.extend_from_slice(&inner.bytes);
    let trie = inner.trie.stored_parts();
    u32s(&mut w, &mut trie.nodes.iter().copied(), trie.nodes.len());
    u64_(&mut w, trie.dups.len() as u64);
    for (node, ids) in &trie.dups {
        w.extend_from_slice(&node.to_le_bytes());
        u32s(&mut w, &mut ids.iter().copied(), ids.len());
    }
    u32s(&mut w, &mut trie.below.iter().copied(), trie.below.len());
    u64_(&mut w, trie.below_sets.len() as u64);
    for set in &trie.below_sets {
        for word in set {
            w.extend_from_slice(&word.to_le_bytes());
        }
    }
    match &inner.bpe {
        None => w.push(0),
        Some(e) => {
            let e = &e.tables;
            w.push(1);
            let bytes = |w: &mut Vec<u8>, b: &[u8]| {
                w.extend_from_slice(&(b.len() as u64).to_le_bytes());
                w.extend_from_slice(b);
            };
            for json in [&e.normalizer, &e.pre_tokenizer] {
                match json {
                    None => w.push(0),
                    Some(j) => {
                        w.push(1);
                        bytes(&mut w, j.as_bytes());
                    }
                }
            }
            w.push(
                u8::from(e.ignore_merges)
                    | u8::from(e.byte_fallback) << 1
                    | u8::from(e.fuse_unk) << 2,
            );
            u64_(&mut w, e.unk.map_or(u64::MAX, u64::from));
            w.push(u8::from(e.split_added));
            u64_(&mut w, e.added.len() as u64);
            for (content, id) in &e.added {
                bytes(&mut w, content.as_bytes());
                w.extend_from_slice(&id.to_le_bytes());
            }
            u64_(&mut w, e.normalized_added.len() as u64);
            for a in &e.normalized_added {
                bytes(&mut w, a.as_bytes());
            }
            u32s(&mut w, &mut e.chars.iter().flat_map(|&(c, id)| [c, id]), e.chars.len() * 2);
            u32s(&mut w, &mut e.fallback.iter().copied(), e.fallback.len());
            u64_(&mut w, e.whole.len() as u64);
            for word in &e.whole {
                w.extend_from_slice(&word.to_le_bytes());
            }
            u64_(&mut w, e.extra_words.len() as u64);
            for (b, id) in &e.extra_words {
                bytes(&mut w, b);
                w.extend_from_slice(&id.to_le_bytes());
            }
            for t in [&e.rows, &e.right, &e.rank, &e.merged] {
                u32s(&mut w, &mut t.iter().copied(), t.len());
            }
        }
    }
    w
}

/// Store `inner` under `key` in `dir`, atomically (temporary file, then rename).
pub(crate) fn write(dir: &Path, key: u128, inner: &VocabInner) -> std::io::Result<PathBuf> {
    let body = payload(inner);
    let mut head = Vec::with_capacity(HEADER_BYTES);
    head.extend_from_slice(&MAGIC);
    head.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    head.extend_from_slice(&key.to_le_bytes());
    head.extend_from_slice(&xxh3_128(&body).to_le_bytes());
    head.extend_from_slice(&(body.len() as u64).to_le_bytes());
    debug_assert_eq!(head.len(), HEADER_BYTES);
    std::fs::create_dir_all(dir)?;
    let path = file_path(dir, key);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{key:032x}.{}.{nanos}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&head)?;
        f.write_all(&body)?;
        f.sync_data()?;
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    prune(dir, &path);
    Ok(path)
}

/// Most cache files a directory keeps (`prune`): a changed tokenizer or option leaves its old
/// file behind, and a cache must not grow without bound. 32 files of 3–13 MB each.
pub const MAX_FILES: usize = 32;

/// A temporary file older than this is a writer that died mid-write: removed.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Keep at most [`MAX_FILES`] cache files in `dir`, removing the least recently used (a hit
/// touches its file, so the modification time is the last use), never `keep`; and remove
/// temporary files left by writers that died. Best effort: errors are ignored (another process
/// may be pruning too).
fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let now = std::time::SystemTime::now();
    let mut files = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Ok(modified) = e.metadata().and_then(|m| m.modified()) else { continue };
        if name.starts_with('.') && name.ends_with(".tmp") {
            if now.duration_since(modified).is_ok_and(|age| age > STALE_TMP) {
                let _ = std::fs::remove_file(&path);
            }
        } else if name.ends_with(".gmvocab") && path != keep {
            files.push((modified, path));
        }
    }
    if files.len() < MAX_FILES {
        return;
    }
    files.sort();
    for (_, path) in &files[..files.len() + 1 - MAX_FILES] {
        let _ = std::fs::remove_file(path);
    }
}

/// Mark the file of a hit as just used (its modification time), for [`prune`]'s order.
pub(crate) fn touch(dir: &Path, key: u128) {
    if let Ok(f) = std::fs::File::options().append(true).open(file_path(dir, key)) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// Why a cache file was not used.
pub(crate) enum ReadFailure {
    /// There is no file (the normal first run).
    Missing,
    /// A file is there and was refused.
    Refused(String),
}

/// A bounds-checked little-endian reader over the payload.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("the payload is truncated".into());
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    /// A length, refused when it could not fit in what is left at `unit` bytes per element.
    fn len(&mut self, unit: usize) -> Result<usize, String> {
        let n = self.u64()?;
        if n > (self.buf.len() / unit.max(1)) as u64 {
            return Err("a table is longer than the payload".into());
        }
        Ok(n as usize)
    }
    fn u32s(&mut self) -> Result<Vec<u32>, String> {
        let n = self.len(4)?;
        let raw = self.take(n * 4)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    }
}

/// Read the file of `key` in `dir` back into a vocabulary's tables (no tokenizer yet: the
/// caller sets the lazy one, the source and the outcome).
/// A file larger than `limit` bytes ([`VocabConfig::max_file_bytes`]) is refused unread.
pub(crate) fn read(dir: &Path, key: u128, limit: u64) -> Result<VocabInner, ReadFailure> {
    use crate::io::ReadErrorKind;
    let path = file_path(dir, key);
    let data = match crate::io::read_limited(&path, limit) {
        Ok(d) => d,
        Err(e) => match e.kind() {
            ReadErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                return Err(ReadFailure::Missing)
            }
            _ => return Err(ReadFailure::Refused(format!("cannot read it: {e}"))),
        },
    };
    parse(&data, key).map_err(ReadFailure::Refused)
}

fn parse(data: &[u8], key: u128) -> Result<VocabInner, String> {
    if data.len() < HEADER_BYTES || data[..8] != MAGIC {
        return Err("not a grammask vocabulary cache file".into());
    }
    let field = |lo: usize, hi: usize| &data[lo..hi];
    let version = u32::from_le_bytes(field(8, 12).try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(format!("format version {version}, this build reads {FORMAT_VERSION}"));
    }
    if u128::from_le_bytes(field(16, 32).try_into().expect("16 bytes")) != key {
        return Err("the file holds another key".into());
    }
    let sum = u128::from_le_bytes(field(32, 48).try_into().expect("16 bytes"));
    let len = u64::from_le_bytes(field(48, 56).try_into().expect("8 bytes"));
    let body = &data[HEADER_BYTES..];
    if body.len() as u64 != len {
        return Err(format!("the payload is {} bytes, the header says {len}", body.len()));
    }
    if xxh3_128(body) != sum {
        return Err("the payload's checksum does not match (corrupt file)".into());
    }
    let mut r = Reader { buf: body };
    let encoding = match r.u8()? {
        0 => TokenEncoding::ByteLevel,
        1 => TokenEncoding::Metaspace { byte_fallback: false },
        2 => TokenEncoding::Metaspace { byte_fallback: true },
        3 => TokenEncoding::Raw,
        e => return Err(format!("unknown token encoding {e}")),
    };
    let prepends_space = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err("malformed flag".into()),
    };
    let n_tokens = r.u64()? as usize;
    let n_vocab = r.u64()? as usize;
    if n_tokens >= (1 << 24) - 1 || n_vocab < n_tokens || n_vocab > (1 << 30) {
        return Err(format!("{n_tokens} tokens in a logits width of {n_vocab}"));
    }
    let eos: Vec<TokenId> = r.u32s()?.into_iter().map(TokenId).collect();
    let opt_id = |v: u64| -> Result<Option<TokenId>, String> {
        match v {
            u64::MAX => Ok(None),
            v if v < n_tokens as u64 => Ok(Some(TokenId(v as u32))),
            v => Err(format!("id {v} is out of range")),
        }
    };
    let bos = opt_id(r.u64()?)?;
    let pad = opt_id(r.u64()?)?;
    if eos.iter().any(|t| t.index() >= n_tokens) || eos.windows(2).any(|w| w[0] >= w[1]) {
        return Err("the EOS ids are out of range or unsorted".into());
    }
    let n_kinds = r.len(1)?;
    if n_kinds != n_vocab {
        return Err(format!("{n_kinds} kinds for a logits width of {n_vocab}"));
    }
    let mut kinds = Vec::with_capacity(n_vocab);
    for (i, &k) in r.take(n_kinds)?.iter().enumerate() {
        kinds.push(match k {
            0 if i < n_tokens => TokenKind::Text,
            1 if i < n_tokens => TokenKind::Special,
            2 => TokenKind::Padding,
            _ => return Err(format!("token {i} has a malformed kind")),
        });
    }
    if eos.iter().any(|t| kinds[t.index()] == TokenKind::Text) {
        return Err("an EOS id is a text token".into());
    }
    let offsets = r.u32s()?;
    let n_bytes = r.len(1)?;
    let bytes = r.take(n_bytes)?.to_vec();
    let offsets_ok = offsets.len() == n_tokens + 1
        && offsets[0] == 0
        && offsets[n_tokens] as usize == bytes.len()
        && (0..n_tokens).all(|i| {
            let (lo, hi) = (offsets[i], offsets[i + 1]);
            lo <= hi
                && (hi - lo) as usize <= MAX_TOKEN_BYTES
                && (kinds[i] == TokenKind::Text || lo == hi)
        });
    if !offsets_ok {
        return Err("the token offsets are inconsistent".into());
    }
    let nodes = r.u32s()?;
    let n_dups = r.len(12)?;
    let mut dups = Vec::with_capacity(n_dups);
    for _ in 0..n_dups {
        let node = r.u32()?;
        dups.push((node, r.u32s()?));
    }
    let below = r.u32s()?;
    let n_sets = r.len(32)?;
    let below_sets = r
        .take(n_sets * 32)?
        .chunks_exact(32)
        .map(|c| {
            std::array::from_fn(|k| u64::from_le_bytes(c[k * 8..k * 8 + 8].try_into().expect("8")))
        })
        .collect();
    let bpe = match r.u8()? {
        0 => None,
        1 => Some(read_bpe(&mut r, n_tokens)?),
        _ => return Err("malformed flag".into()),
    };
    if !r.buf.is_empty() {
        return Err("trailing bytes after the payload".into());
    }
    let token_bytes = |i: usize| &bytes[offsets[i] as usize..offsets[i + 1] as usize];
    let stored = StoredTrie { nodes, dups, below, below_sets };
    let trie = TokTrie::from_stored_parts(stored, n_tokens, token_bytes)
        .map_err(|e| format!("the trie does not match the token table: {e}"))?;
    Ok(VocabInner {
        tokenizer: super::TokenizerSlot::None,
        encoding,
        bytes,
        offsets,
        kinds,
        n_tokens,
        n_vocab,
        eos,
        bos,
        pad,
        prepends_space,
        trie,
        source: VocabSource::Memory,
        extensions: Default::default(),
        cache: None,
        bpe,
    })
}

/// The stored BPE encoder (see `payload`), checked against `n_tokens` ids.
fn read_bpe(r: &mut Reader<'_>, n_tokens: usize) -> Result<BpeEncoder, String> {
    fn bytes(r: &mut Reader<'_>) -> Result<Vec<u8>, String> {
        let n = r.len(1)?;
        Ok(r.take(n)?.to_vec())
    }
    fn string(r: &mut Reader<'_>) -> Result<String, String> {
        String::from_utf8(bytes(r)?).map_err(|_| "a stored string is not UTF-8".to_string())
    }
    let mut json = || -> Result<Option<String>, String> {
        match r.u8()? {
            0 => Ok(None),
            1 => string(r).map(Some),
            _ => Err("malformed flag".into()),
        }
    };
    let normalizer = json()?;
    let pre_tokenizer = json()?;
    let flags = r.u8()?;
    if flags > 7 {
        return Err("malformed flags".into());
    }
    let unk = match r.u64()? {
        u64::MAX => None,
        u => Some(u32::try_from(u).map_err(|_| "the unknown id is out of range")?),
    };
    let split_added = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err("malformed flag".into()),
    };
    let n_added = r.len(12)?;
    let mut added = Vec::with_capacity(n_added);
    for _ in 0..n_added {
        let content = string(r)?;
        added.push((content, r.u32()?));
    }
    let n_normalized = r.len(8)?;
    let normalized_added = (0..n_normalized).map(|_| string(r)).collect::<Result<Vec<_>, _>>()?;
    let pairs = r.u32s()?;
    if pairs.len() % 2 != 0 {
        return Err("the character table is malformed".into());
    }
    let chars = pairs.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let fallback = r.u32s()?;
    let n_whole = r.len(8)?;
    let whole = r
        .take(n_whole * 8)?
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
        .collect();
    let n_extra = r.len(12)?;
    let mut extra_words = Vec::with_capacity(n_extra);
    for _ in 0..n_extra {
        let b = bytes(r)?;
        extra_words.push((b, r.u32()?));
    }
    let tables = BpeTables {
        normalizer,
        pre_tokenizer,
        ignore_merges: flags & 1 != 0,
        byte_fallback: flags & 2 != 0,
        fuse_unk: flags & 4 != 0,
        unk,
        added,
        split_added,
        normalized_added,
        chars,
        fallback,
        whole,
        extra_words,
        rows: r.u32s()?,
        right: r.u32s()?,
        rank: r.u32s()?,
        merged: r.u32s()?,
    };
    BpeEncoder::new(tables, n_tokens)
}
