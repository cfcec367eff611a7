//! The vocabulary: every token id decoded once to the bytes it contributes, its kind (text,
//! special, padding), the EOS ids, and the byte trie over all text tokens.
//!
//! A [`Vocabulary`] is built once per tokenizer and shared by every engine and request: it is a
//! cheap-to-clone handle (`Arc` inside), immutable, `Send + Sync`. Construction decodes each
//! token string with the encoding the tokenizer's decoder implies (see `vocab/decode.rs`) and builds
//! the flat trie ([`TokTrie`]). The vocabulary knows nothing of any grammar: engines attach
//! what they precompute per vocabulary (the JSON engines' lexical slices and token classes)
//! through the typed extension cache ([`VocabExtension`], [`Vocabulary::extension`]), the way
//! llguidance keeps its slicer outside `toktrie`.
//!
//! # Invariants
//! - `token_bytes(t)` is empty exactly for special and padding tokens.
//! - Ids in `n_tokens..n_vocab` are padding: they exist in the logits row and are never allowed.
//! - The trie holds exactly the text tokens (`kind == Text`).

mod bpe;
mod cache;
mod decode;
#[cfg(feature = "embedded-tokenizer")]
mod embedded;
mod extension;
mod trie;

pub use cache::{
    CacheOutcome, VocabCache, FORMAT_VERSION as CACHE_FORMAT_VERSION, MAX_FILES as CACHE_MAX_FILES,
};
pub use decode::TokenEncoding;
pub use extension::VocabExtension;
pub use trie::{TokTrie, WalkHook, MAX_TOKEN_BYTES};

use crate::token::TokenId;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tokenizers::Model as _;

/// What a token id is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenKind {
    /// A token that contributes text (its bytes may be empty only if its string is empty).
    Text,
    /// A special token (`<|im_end|>`, `<s>`…): never text, only allowed as EOS where EOS is.
    Special,
    /// An id past the tokenizer's size in a padded logits row: never allowed.
    Padding,
}

/// An error building a [`Vocabulary`].
#[derive(Debug)]
pub struct VocabError {
    kind: VocabErrorKind,
}

/// What went wrong building a vocabulary.
#[derive(Debug)]
#[non_exhaustive]
pub enum VocabErrorKind {
    /// Reading a file failed.
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is larger than [`VocabConfig::max_file_bytes`].
    TooLarge {
        /// The file.
        path: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// `tokenizers` could not load the tokenizer.
    Tokenizer(String),
    /// `tokenizer_config.json` is not valid JSON or has a field of the wrong type.
    Config(String),
    /// A token named in the config (EOS, BOS, pad) is not in the vocabulary.
    UnknownToken {
        /// Which role the token plays.
        role: &'static str,
        /// The token's content.
        content: String,
    },
    /// An EOS id given by the caller is out of range.
    EosOutOfRange {
        /// The id.
        id: u32,
        /// The number of tokens.
        n_tokens: usize,
    },
    /// The logits width is smaller than the tokenizer's size.
    LogitsTooNarrow {
        /// The requested width.
        n_vocab: usize,
        /// The tokenizer's size.
        n_tokens: usize,
    },
    /// [`Vocabulary::encode_exact`]: no tokenization of this character by text tokens spells
    /// it (the tokenizer normalises or drops it).
    CannotSpell {
        /// Byte offset of the character in the document.
        offset: usize,
        /// The character.
        text: String,
        /// What the tokenizer's tokens spell instead.
        got: String,
    },
    /// A token is longer than the trie supports.
    TokenTooLong {
        /// The token.
        id: u32,
        /// Its length in bytes.
        len: usize,
    },
    /// The vocabulary is too large for the packed trie.
    TooManyTokens(usize),
}

impl VocabError {
    fn new(kind: VocabErrorKind) -> Self {
        VocabError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &VocabErrorKind {
        &self.kind
    }
}

impl fmt::Display for VocabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            VocabErrorKind::Io { path, source } => write!(f, "cannot read {path}: {source}"),
            VocabErrorKind::TooLarge { path, limit } => write!(
                f,
                "{path} is larger than the file size limit of {limit} bytes (--max-file-bytes)"
            ),
            VocabErrorKind::Tokenizer(m) => write!(f, "cannot load tokenizer: {m}"),
            VocabErrorKind::Config(m) => write!(f, "bad tokenizer_config.json: {m}"),
            VocabErrorKind::UnknownToken { role, content } => {
                write!(f, "{role} token {content:?} is not in the vocabulary")
            }
            VocabErrorKind::EosOutOfRange { id, n_tokens } => {
                write!(f, "EOS id {id} is out of range (the tokenizer has {n_tokens} tokens)")
            }
            VocabErrorKind::LogitsTooNarrow { n_vocab, n_tokens } => write!(
                f,
                "logits width {n_vocab} is smaller than the tokenizer's {n_tokens} tokens"
            ),
            VocabErrorKind::CannotSpell { offset, text, got } => write!(
                f,
                "the tokenizer cannot spell {text:?} (byte {offset} of the document) with text \
                 tokens: its tokens spell {got:?}"
            ),
            VocabErrorKind::TokenTooLong { id, len } => {
                write!(f, "token {id} is {len} bytes long; at most {MAX_TOKEN_BYTES} are supported")
            }
            VocabErrorKind::TooManyTokens(n) => {
                write!(f, "{n} tokens is more than the trie supports (2^24 - 1)")
            }
        }
    }
}

impl std::error::Error for VocabError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            VocabErrorKind::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Where the tokenizer came from (for messages and the CLI).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VocabSource {
    /// The embedded Qwen3 tokenizer.
    Embedded,
    /// A file path.
    File(String),
    /// Bytes or an in-memory tokenizer.
    Memory,
}

/// The `tokenizers::Tokenizer` behind a vocabulary: loaded with it, absent (built from token
/// bytes), or — for a vocabulary read back from the cache — loaded on first use from the bytes
/// the cache was keyed by.
pub(crate) enum TokenizerSlot {
    None,
    Loaded(tokenizers::Tokenizer),
    Lazy { source: LazySource, cell: OnceLock<Result<tokenizers::Tokenizer, String>> },
}

/// Where a lazily loaded tokenizer comes from.
pub(crate) enum LazySource {
    /// A file whose bytes must still hash to `hash`.
    File { path: PathBuf, limit: u64, hash: u128 },
    /// The embedded tokenizer.
    #[cfg(feature = "embedded-tokenizer")]
    Embedded,
}

impl TokenizerSlot {
    fn lazy(source: LazySource) -> Self {
        TokenizerSlot::Lazy { source, cell: OnceLock::new() }
    }

    fn get(&self) -> Result<&tokenizers::Tokenizer, VocabError> {
        match self {
            TokenizerSlot::None => Err(VocabError::new(VocabErrorKind::Tokenizer(
                "this vocabulary has no tokenizer".into(),
            ))),
            TokenizerSlot::Loaded(t) => Ok(t),
            TokenizerSlot::Lazy { source, cell } => cell
                .get_or_init(|| load_lazy(source))
                .as_ref()
                .map_err(|m| VocabError::new(VocabErrorKind::Tokenizer(m.clone()))),
        }
    }
}

fn load_lazy(source: &LazySource) -> Result<tokenizers::Tokenizer, String> {
    match source {
        LazySource::File { path, limit, hash } => {
            let bytes = read_file(path, *limit).map_err(|e| e.to_string())?;
            if cache::content_hash(&bytes) != *hash {
                return Err(format!(
                    "{} changed since this vocabulary was read from the cache under its old \
                     contents; load the vocabulary again",
                    path.display()
                ));
            }
            load_tokenizer(&bytes).map_err(|e| e.to_string())
        }
        #[cfg(feature = "embedded-tokenizer")]
        LazySource::Embedded => embedded::tokenizer().map_err(|e| e.to_string()),
    }
}

/// Immutable vocabulary data; see the module docs.
pub struct VocabInner {
    tokenizer: TokenizerSlot,
    encoding: TokenEncoding,
    /// Concatenated token bytes; token `i` is `bytes[offsets[i]..offsets[i + 1]]`.
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    kinds: Vec<TokenKind>,
    n_tokens: usize,
    n_vocab: usize,
    eos: Vec<TokenId>,
    bos: Option<TokenId>,
    pad: Option<TokenId>,
    prepends_space: bool,
    trie: TokTrie,
    source: VocabSource,
    /// What engines derived from this vocabulary (lexical slices, token classes), built on
    /// first use and kept: see [`VocabExtension`].
    extensions: extension::Extensions,
    /// What the on-disk cache did, when one was asked for ([`VocabConfig::cache`]).
    cache: Option<CacheOutcome>,
    /// The cache's own BPE encoder ([`bpe::BpeEncoder`]), kept with a cached vocabulary so that
    /// encoding text needs no `tokenizers` model; `None` elsewhere.
    bpe: Option<bpe::BpeEncoder>,
}

/// A tokenizer's vocabulary as grammask sees it. Cheap to clone (shared `Arc`).
///
/// # Example
/// ```
/// let vocab = grammask::Vocabulary::embedded().unwrap();
/// let ids = vocab.encode("{\"a\": 1}").unwrap();
/// let text: Vec<u8> = ids.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
/// assert_eq!(text, b"{\"a\": 1}");
/// assert!(!vocab.eos_ids().is_empty());
/// ```
#[derive(Clone)]
pub struct Vocabulary {
    inner: Arc<VocabInner>,
}

impl fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocabulary")
            .field("source", &self.inner.source)
            .field("n_tokens", &self.inner.n_tokens)
            .field("n_vocab", &self.inner.n_vocab)
            .field("encoding", &self.inner.encoding)
            .field("eos", &self.inner.eos)
            .finish()
    }
}

fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, VocabError> {
    crate::io::read_limited(path, limit).map_err(file_error)
}

fn file_error(e: crate::io::ReadError) -> VocabError {
    use crate::io::ReadErrorKind;
    VocabError::new(match e.into_parts() {
        (path, ReadErrorKind::TooLarge { limit }) => VocabErrorKind::TooLarge { path, limit },
        (path, ReadErrorKind::Io(source)) => VocabErrorKind::Io { path, source },
        (path, other) => VocabErrorKind::Tokenizer(format!("{path}: {other:?}")),
    })
}

/// The `tokenizer_config.json` fields grammask reads.
#[derive(Default, Debug, Clone)]
struct TokenizerConfig {
    eos: Vec<String>,
    bos: Option<String>,
    pad: Option<String>,
}

fn token_content(v: &serde_json::Value, field: &str) -> Result<Option<String>, VocabError> {
    match v.get(field) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Object(o)) => match o.get("content") {
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            _ => Err(VocabError::new(VocabErrorKind::Config(format!(
                "`{field}` is an object without a string `content`"
            )))),
        },
        Some(other) => Err(VocabError::new(VocabErrorKind::Config(format!(
            "`{field}` must be a string or an object, not {other}"
        )))),
    }
}

fn parse_config(bytes: &[u8]) -> Result<TokenizerConfig, VocabError> {
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| VocabError::new(VocabErrorKind::Config(e.to_string())))?;
    if !v.is_object() {
        return Err(VocabError::new(VocabErrorKind::Config("not a JSON object".into())));
    }
    Ok(TokenizerConfig {
        eos: token_content(&v, "eos_token")?.into_iter().collect(),
        bos: token_content(&v, "bos_token")?,
        pad: token_content(&v, "pad_token")?,
    })
}

/// Options for building a [`Vocabulary`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct VocabConfig {
    /// Logits width when the model pads its vocabulary (default: the tokenizer's size).
    pub n_vocab: Option<usize>,
    /// Extra EOS ids (e.g. from `generation_config.json`), added to the config's EOS token.
    pub extra_eos: Vec<u32>,
    /// Extra EOS tokens by content (e.g. `<|im_end|>`), added to the config's EOS token; each
    /// must be a token of the tokenizer (default: none).
    pub extra_eos_tokens: Vec<String>,
    /// Largest `tokenizer.json` / `tokenizer_config.json` read from a file (default
    /// [`crate::io::DEFAULT_MAX_FILE_BYTES`], 256 MiB).
    pub max_file_bytes: u64,
    /// Where the decoded vocabulary is cached between runs, for [`Vocabulary::from_file_with`]
    /// and [`Vocabulary::embedded_with`] (default [`VocabCache::Off`]; the CLI uses
    /// [`VocabCache::User`]). See `vocab/cache.rs` for the keys and checks.
    pub cache: VocabCache,
}

impl Default for VocabConfig {
    fn default() -> Self {
        VocabConfig {
            n_vocab: None,
            extra_eos: Vec::new(),
            extra_eos_tokens: Vec::new(),
            max_file_bytes: crate::io::DEFAULT_MAX_FILE_BYTES,
            cache: VocabCache::Off,
        }
    }
}

builder!(VocabConfig {
    /// Logits width when the model pads its vocabulary (default: the tokenizer's size).
    with_n_vocab => n_vocab: Option<usize>,
    /// Extra EOS ids, added to the config's EOS token.
    with_extra_eos => extra_eos: Vec<u32>,
    /// Extra EOS tokens by content, added to the config's EOS token.
    with_extra_eos_tokens => extra_eos_tokens: Vec<String>,
    /// Largest tokenizer or config file read (default 256 MiB).
    with_max_file_bytes => max_file_bytes: u64,
    /// Where the decoded vocabulary is cached between runs (default off).
    with_cache => cache: VocabCache,
});

impl Vocabulary {
    /// Load `tokenizer.json` from `path`. When `tokenizer_config.json` sits beside it (or
    /// `NAME.config.json` beside `NAME.json`, the layout of `../shared/tokenizers`) it is read
    /// for EOS/BOS/pad.
    ///
    /// # Errors
    /// Unreadable files, a tokenizer `tokenizers` cannot load, a malformed config.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Vocabulary, VocabError> {
        Self::from_file_with(path, &VocabConfig::default())
    }

    /// [`Vocabulary::from_file`] with options.
    ///
    /// # Errors
    /// As [`Vocabulary::from_file`], plus option errors (EOS out of range, narrow logits).
    pub fn from_file_with(
        path: impl AsRef<Path>,
        config: &VocabConfig,
    ) -> Result<Vocabulary, VocabError> {
        let path = path.as_ref();
        Self::from_files_with(path, find_config(path).as_deref(), config)
    }

    /// [`Vocabulary::from_file_with`] with the `tokenizer_config.json` named (or none), instead
    /// of looked for beside the tokenizer.
    ///
    /// # Errors
    /// As [`Vocabulary::from_file_with`].
    pub fn from_files_with(
        path: impl AsRef<Path>,
        config_path: Option<&Path>,
        config: &VocabConfig,
    ) -> Result<Vocabulary, VocabError> {
        let path = path.as_ref();
        let limit = config.max_file_bytes;
        let cfg = config_path.map(|p| read_file(p, limit)).transpose()?;
        let source = VocabSource::File(path.display().to_string());
        let build =
            |source, key_hash| Self::build_file(path, cfg.as_deref(), config, source, key_hash);
        let identity = || cache::hash_file(path, limit).map_err(file_error);
        let lazy = |hash| LazySource::File { path: path.to_path_buf(), limit, hash };
        Self::cached(identity, cfg.as_deref(), config, source, lazy, build)
    }

    /// Build from the tokenizer file at `path` (the build step of [`Vocabulary::cached`]), and
    /// say whether its bytes hash to `key_hash` (always, when `None`).
    fn build_file(
        path: &Path,
        config_json: Option<&[u8]>,
        config: &VocabConfig,
        source: VocabSource,
        key_hash: Option<u128>,
    ) -> Result<(Vocabulary, bool), VocabError> {
        let tok = read_file(path, config.max_file_bytes)?;
        let same = key_hash.is_none_or(|h| cache::content_hash(&tok) == h);
        Ok((Self::build(load_tokenizer(&tok)?, config_json, config, source)?, same))
    }

    /// Read the vocabulary keyed by these files' bytes back from the cache
    /// [`VocabConfig::cache`] names, or `build` it (and store it there); with the cache off,
    /// just build it.
    ///
    /// `identity` is the xxh3-128 and length of the tokenizer's bytes (hashed without keeping
    /// them: a hit never holds the file in memory); `lazy` says where a hit's tokenizer loads
    /// from when it is first needed. `build(source, key_hash)` builds the vocabulary and says
    /// whether the bytes it built from still hash to `key_hash` (always, when it is `None`): a
    /// file rewritten between the hash and the read is built from as it is now and not stored
    /// under the old key.
    fn cached(
        identity: impl FnOnce() -> Result<(u128, u64), VocabError>,
        config_json: Option<&[u8]>,
        config: &VocabConfig,
        source: VocabSource,
        lazy: impl FnOnce(u128) -> LazySource,
        build: impl FnOnce(VocabSource, Option<u128>) -> Result<(Vocabulary, bool), VocabError>,
    ) -> Result<Vocabulary, VocabError> {
        let Some(dir) = config.cache.dir() else {
            return build(source, None).map(|(v, _)| v);
        };
        let (hash, len) = identity()?;
        let key = cache::key(hash, len, config_json, config);
        let path = cache::file_path(&dir, key);
        let refused = match cache::read(&dir, key, config.max_file_bytes) {
            Ok(mut inner) => {
                inner.tokenizer = TokenizerSlot::lazy(lazy(hash));
                inner.source = source;
                inner.cache = Some(CacheOutcome::Hit { path });
                cache::touch(&dir, key);
                return Ok(Vocabulary { inner: Arc::new(inner) });
            }
            Err(cache::ReadFailure::Missing) => None,
            Err(cache::ReadFailure::Refused(why)) => Some(why),
        };
        let (mut vocab, same) = build(source, Some(hash))?;
        let encoder = vocab.inner.tokenizer.get().ok().and_then(|tok| {
            let text = |id: u32| {
                let t = TokenId(id);
                (vocab.kind(t) == TokenKind::Text).then(|| vocab.token_bytes(t))
            };
            bpe::BpeEncoder::from_tokenizer(tok, vocab.encoding(), vocab.n_tokens(), text).ok()
        });
        Arc::get_mut(&mut vocab.inner).expect("a vocabulary just built is not shared").bpe =
            encoder;
        let outcome = if !same {
            let why = "the tokenizer file changed while it was read: built from its new bytes, \
                       which the key does not name"
                .to_string();
            CacheOutcome::NotStored { path, why }
        } else {
            match (cache::write(&dir, key, &vocab.inner), refused) {
                (Ok(path), None) => CacheOutcome::Stored { path },
                (Ok(path), Some(why)) => CacheOutcome::Rebuilt { path, why },
                (Err(e), _) => CacheOutcome::NotStored { path, why: e.to_string() },
            }
        };
        Arc::get_mut(&mut vocab.inner).expect("a vocabulary just built is not shared").cache =
            Some(outcome);
        Ok(vocab)
    }

    /// Does [`Vocabulary::encode`] run the vocabulary cache's own BPE encoder (`vocab/bpe.rs`)
    /// instead of `tokenizers`? True for a vocabulary stored in or read from the cache when its
    /// tokenizer is a BPE model that encoder reproduces (byte-level or SentencePiece-style, no
    /// dropout, no truncation); the `tokenizers` model is then loaded only for the rare text
    /// the encoder leaves to it (an added token matched after normalisation, see
    /// `vocab/bpe.rs`).
    pub fn has_cached_encoder(&self) -> bool {
        self.inner.bpe.is_some()
    }

    /// What the on-disk cache did for this vocabulary: `None` when no cache was asked for
    /// (or the vocabulary was not built from files).
    pub fn cache_outcome(&self) -> Option<&CacheOutcome> {
        self.inner.cache.as_ref()
    }

    /// Build from the bytes of `tokenizer.json` and optionally `tokenizer_config.json`.
    ///
    /// # Errors
    /// A tokenizer `tokenizers` cannot load, a malformed config, option errors.
    pub fn from_bytes(
        tokenizer_json: &[u8],
        tokenizer_config_json: Option<&[u8]>,
        config: &VocabConfig,
    ) -> Result<Vocabulary, VocabError> {
        Self::build(
            load_tokenizer(tokenizer_json)?,
            tokenizer_config_json,
            config,
            VocabSource::Memory,
        )
    }

    /// Build from an already loaded `tokenizers::Tokenizer`.
    ///
    /// # Errors
    /// A malformed config, option errors.
    pub fn from_tokenizer(
        tokenizer: tokenizers::Tokenizer,
        tokenizer_config_json: Option<&[u8]>,
        config: &VocabConfig,
    ) -> Result<Vocabulary, VocabError> {
        Self::build(tokenizer, tokenizer_config_json, config, VocabSource::Memory)
    }

    fn build(
        tokenizer: tokenizers::Tokenizer,
        config_json: Option<&[u8]>,
        config: &VocabConfig,
        source: VocabSource,
    ) -> Result<Vocabulary, VocabError> {
        let tcfg = config_json.map(parse_config).transpose()?.unwrap_or_default();
        let mut inner = decode_vocab(tokenizer, source)?;
        let lookup = |role: &'static str, content: &str| -> Result<TokenId, VocabError> {
            let id = inner.tokenizer.get().ok().and_then(|t| t.token_to_id(content)).ok_or_else(
                || {
                    VocabError::new(VocabErrorKind::UnknownToken {
                        role,
                        content: content.to_string(),
                    })
                },
            )?;
            // A model whose ids have holes or repeats (a malformed tokenizer.json) can name a
            // token past the ids the vocabulary decodes: refuse it rather than keep an EOS
            // (BOS, pad) no mask can hold (fuzz finding, docs/fuzzing.md).
            if id as usize >= inner.n_tokens {
                return Err(VocabError::new(VocabErrorKind::Tokenizer(format!(
                    "the {role} token {content:?} has id {id}, past the {} ids the model \
                     defines (repeated or missing ids in tokenizer.json)",
                    inner.n_tokens
                ))));
            }
            Ok(TokenId(id))
        };
        let mut eos = Vec::new();
        for c in tcfg.eos.iter().chain(&config.extra_eos_tokens) {
            eos.push(lookup("EOS", c)?);
        }
        if eos.is_empty() && config.extra_eos.is_empty() {
            // No config says which token ends a text (a `tokenizer.json` copied alone): take
            // the tokenizer's own special tokens that are end-of-text markers by name.
            eos.extend(inner.tokenizer.get().ok().map(eos_from_specials).unwrap_or_default());
        }
        let bos = tcfg.bos.as_deref().map(|c| lookup("BOS", c)).transpose()?;
        let pad = tcfg.pad.as_deref().map(|c| lookup("pad", c)).transpose()?;
        for &id in &config.extra_eos {
            if id as usize >= inner.n_tokens {
                return Err(VocabError::new(VocabErrorKind::EosOutOfRange {
                    id,
                    n_tokens: inner.n_tokens,
                }));
            }
            eos.push(TokenId(id));
        }
        eos.sort();
        eos.dedup();
        inner.eos = eos;
        eos_not_text(&mut inner);
        inner.bos = bos;
        inner.pad = pad;
        if let Some(n) = config.n_vocab {
            if n < inner.n_tokens {
                return Err(VocabError::new(VocabErrorKind::LogitsTooNarrow {
                    n_vocab: n,
                    n_tokens: inner.n_tokens,
                }));
            }
            inner.n_vocab = n;
            inner.kinds.resize(n, TokenKind::Padding);
        }
        Ok(Vocabulary { inner: Arc::new(inner) })
    }

    /// Build a vocabulary directly from token byte strings (no tokenizer): for tests, tiny
    /// vocabularies and callers with their own tokenizer. `None` marks a special token.
    ///
    /// # Errors
    /// EOS ids out of range, a token too long for the trie.
    pub fn from_token_bytes(
        tokens: &[Option<&[u8]>],
        eos: &[u32],
        n_vocab: Option<usize>,
    ) -> Result<Vocabulary, VocabError> {
        let n = tokens.len();
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(n + 1);
        let mut kinds = Vec::with_capacity(n);
        offsets.push(0);
        for t in tokens {
            match t {
                Some(b) => {
                    bytes.extend_from_slice(b);
                    kinds.push(TokenKind::Text);
                }
                None => kinds.push(TokenKind::Special),
            }
            offsets.push(bytes.len() as u32);
        }
        let mut inner = finish_inner(
            TokenizerSlot::None,
            TokenEncoding::Raw,
            bytes,
            offsets,
            kinds,
            false,
            VocabSource::Memory,
        )?;
        for &e in eos {
            if e as usize >= n {
                return Err(VocabError::new(VocabErrorKind::EosOutOfRange { id: e, n_tokens: n }));
            }
            inner.eos.push(TokenId(e));
        }
        if let Some(w) = n_vocab {
            if w < n {
                return Err(VocabError::new(VocabErrorKind::LogitsTooNarrow {
                    n_vocab: w,
                    n_tokens: n,
                }));
            }
            inner.n_vocab = w;
            inner.kinds.resize(w, TokenKind::Padding);
        }
        Ok(Vocabulary { inner: Arc::new(inner) })
    }

    /// Logits width: the size every mask has.
    #[inline]
    pub fn n_vocab(&self) -> usize {
        self.inner.n_vocab
    }

    /// Number of tokens the tokenizer defines (ids `0..n_tokens`).
    #[inline]
    pub fn n_tokens(&self) -> usize {
        self.inner.n_tokens
    }

    /// The bytes token `t` contributes to the output (empty for special and padding ids).
    #[inline]
    pub fn token_bytes(&self, t: TokenId) -> &[u8] {
        let i = t.index();
        if i >= self.inner.n_tokens {
            return &[];
        }
        &self.inner.bytes[self.inner.offsets[i] as usize..self.inner.offsets[i + 1] as usize]
    }

    /// What token `t` is; ids past the logits width are padding.
    #[inline]
    pub fn kind(&self, t: TokenId) -> TokenKind {
        self.inner.kinds.get(t.index()).copied().unwrap_or(TokenKind::Padding)
    }

    /// The EOS ids (several are common: `<|im_end|>`, `<|endoftext|>`).
    pub fn eos_ids(&self) -> &[TokenId] {
        &self.inner.eos
    }

    /// Is `t` an EOS id?
    #[inline]
    pub fn is_eos(&self, t: TokenId) -> bool {
        self.inner.eos.contains(&t)
    }

    /// The BOS id, if the config names one.
    pub fn bos_id(&self) -> Option<TokenId> {
        self.inner.bos
    }

    /// The pad id, if the config names one.
    pub fn pad_id(&self) -> Option<TokenId> {
        self.inner.pad
    }

    /// How vocabulary strings encode bytes.
    pub fn encoding(&self) -> TokenEncoding {
        self.inner.encoding
    }

    /// Where the vocabulary came from.
    pub fn source(&self) -> &VocabSource {
        &self.inner.source
    }

    /// The trie over all text tokens.
    pub fn trie(&self) -> &TokTrie {
        &self.inner.trie
    }

    /// The id of a token by its string in the tokenizer (e.g. `"</think>"`).
    pub fn token_id(&self, content: &str) -> Option<TokenId> {
        self.tokenizer()?.token_to_id(content).map(TokenId)
    }

    /// The underlying `tokenizers::Tokenizer`, when the vocabulary was built from one. A
    /// vocabulary read from the cache loads it here on first use (`None` if that fails; see
    /// [`Vocabulary::try_tokenizer`] for why).
    pub fn tokenizer(&self) -> Option<&tokenizers::Tokenizer> {
        self.inner.tokenizer.get().ok()
    }

    /// [`Vocabulary::tokenizer`], or why there is none: built without one, or (read from the
    /// cache) its file is gone, unreadable or changed since.
    ///
    /// # Errors
    /// [`VocabErrorKind::Tokenizer`] naming the cause.
    pub fn try_tokenizer(&self) -> Result<&tokenizers::Tokenizer, VocabError> {
        self.inner.tokenizer.get()
    }

    /// True when the tokenizer's normaliser prepends `▁` to every text (Llama-2 style), so the
    /// first token of an encoded text carries a leading space that is not in the text.
    pub fn prepends_space(&self) -> bool {
        self.inner.prepends_space
    }

    /// Encode `text` (no BOS/EOS added): the ids `tokenizers` gives. A cached vocabulary
    /// ([`VocabConfig::cache`]) encodes with the cache's own BPE encoder where it has one
    /// ([`Vocabulary::has_cached_encoder`]), without loading the `tokenizers` model.
    ///
    /// # Errors
    /// A vocabulary built without a tokenizer, or a tokenizer error.
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        if let Some(bpe) = &self.inner.bpe {
            let mut out = Vec::with_capacity(text.len() / 3 + 1);
            if bpe.encode(text, &self.inner.trie, &mut out).is_some() {
                return Ok(out);
            }
        }
        let tok = self.try_tokenizer()?;
        let enc = tok
            .encode(text, false)
            .map_err(|e| VocabError::new(VocabErrorKind::Tokenizer(e.to_string())))?;
        Ok(enc.get_ids().iter().map(|&i| TokenId(i)).collect())
    }

    /// Encode `text` as the continuation of a longer text, so that the tokens' bytes concatenate
    /// to exactly `text`. For most tokenizers this is [`Vocabulary::encode`]; SentencePiece
    /// tokenizers that prepend `▁` to every input (Llama-2) would give the first token a leading
    /// space, so the text is encoded after a newline and the tokens of that prefix are dropped.
    /// If no clean boundary exists the plain encoding is returned.
    ///
    /// # Errors
    /// As [`Vocabulary::encode`].
    pub fn encode_continuation(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        let plain = self.encode(text)?;
        let concat = |ids: &[TokenId]| -> Vec<u8> {
            ids.iter().flat_map(|&t| self.token_bytes(t).iter().copied()).collect()
        };
        if concat(&plain) == text.as_bytes() {
            return Ok(plain);
        }
        let ids = self.encode(&format!("\n{text}"))?;
        let mut acc = Vec::new();
        for (i, &t) in ids.iter().enumerate() {
            acc.extend_from_slice(self.token_bytes(t));
            if acc == b"\n" || acc == b" \n" {
                let rest = ids[i + 1..].to_vec();
                if concat(&rest) == text.as_bytes() {
                    return Ok(rest);
                }
                break;
            }
            if acc.len() > 2 {
                break;
            }
        }
        Ok(plain)
    }

    /// Tokenize a document so that the tokens' bytes spell `text` exactly, as text: the
    /// tokenization a constraint is judged on.
    ///
    /// [`Vocabulary::encode_continuation`] alone can lie in three ways, each checked here:
    /// a normaliser that rewrites the text (Qwen3's NFC turns `e` + U+0301 into `é`), a
    /// tokenizer that drops bytes it cannot encode, and text that spells a special token
    /// (`<|endoftext|>` inside a JSON string is text, not the special token). The text is
    /// encoded in pieces of at most [`Vocabulary::ENCODE_PIECE_BYTES`] (cut after whitespace
    /// where possible), so memory stays proportional to the piece, not to the document; a
    /// piece whose encoding does not spell it exactly as text tokens is split in halves, down
    /// to single characters — a non-canonical but exact tokenization, which is what an exact
    /// engine needs.
    ///
    /// # Errors
    /// [`VocabErrorKind::CannotSpell`] when some character cannot be spelled by text tokens;
    /// the errors of [`Vocabulary::encode`].
    ///
    /// # Example
    /// ```
    /// let vocab = grammask::Vocabulary::embedded().unwrap();
    /// // Qwen3 normalises to NFC: the plain encoding of `e` + U+0301 spells `é` instead.
    /// let ids = vocab.encode_exact("e\u{301}").unwrap();
    /// let bytes: Vec<u8> = ids.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
    /// assert_eq!(bytes, "e\u{301}".as_bytes());
    /// ```
    pub fn encode_exact(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let mut rest = text;
        let mut offset = 0;
        while !rest.is_empty() {
            let cut = piece_end(rest, Self::ENCODE_PIECE_BYTES);
            self.encode_piece(&rest[..cut], offset, &mut out)?;
            offset += cut;
            rest = &rest[cut..];
        }
        Ok(out)
    }

    /// Largest piece of a document [`Vocabulary::encode_exact`] hands the tokenizer at once.
    pub const ENCODE_PIECE_BYTES: usize = 1 << 16;

    fn encode_piece(
        &self,
        piece: &str,
        offset: usize,
        out: &mut Vec<TokenId>,
    ) -> Result<(), VocabError> {
        let ids = self.encode_continuation(piece)?;
        if self.spells_as_text(&ids, piece.as_bytes()) {
            out.extend(ids);
            return Ok(());
        }
        let mut chars = piece.char_indices();
        if chars.nth(1).is_none() {
            return Err(VocabError::new(VocabErrorKind::CannotSpell {
                offset,
                text: piece.to_string(),
                got: String::from_utf8_lossy(
                    &ids.iter().flat_map(|&t| self.token_bytes(t).to_vec()).collect::<Vec<u8>>(),
                )
                .into_owned(),
            }));
        }
        let mut mid = piece.len() / 2;
        while !piece.is_char_boundary(mid) {
            mid += 1;
        }
        if mid == piece.len() {
            mid = piece.char_indices().last().map_or(0, |(i, _)| i);
        }
        self.encode_piece(&piece[..mid], offset, out)?;
        self.encode_piece(&piece[mid..], offset + mid, out)
    }

    /// Do `ids` spell `text` exactly, with text tokens only?
    fn spells_as_text(&self, ids: &[TokenId], text: &[u8]) -> bool {
        let mut rest = text;
        for &t in ids {
            if self.kind(t) != TokenKind::Text {
                return false;
            }
            match rest.strip_prefix(self.token_bytes(t)) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }

    /// Every text token with its bytes, in id order (special tokens are never text).
    pub fn text_tokens(&self) -> impl Iterator<Item = (TokenId, &[u8])> + '_ {
        (0..self.n_tokens())
            .map(TokenId::from_index)
            .filter(|&t| self.kind(t) == TokenKind::Text)
            .map(|t| (t, self.token_bytes(t)))
    }

    /// Do `self` and `other` share their data (clones of one vocabulary)?
    pub fn same_as(&self, other: &Vocabulary) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The address of the shared vocabulary (what [`Vocabulary::same_as`] compares), for
    /// caches keyed by vocabulary that keep a clone so the address is not reused.
    pub(crate) fn addr(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// A readable rendering of a token for messages: its bytes, escaped.
    pub fn describe(&self, t: TokenId) -> String {
        match self.kind(t) {
            TokenKind::Text => format!("{t:?} {:?}", String::from_utf8_lossy(self.token_bytes(t))),
            TokenKind::Special => {
                let name = self
                    .tokenizer()
                    .and_then(|tk| tk.id_to_token(t.0))
                    .unwrap_or_else(|| "?".into());
                format!("{t:?} special {name}")
            }
            TokenKind::Padding => format!("{t:?} padding"),
        }
    }
}

/// Special tokens whose names mark the end of a text or a turn in the tokenizers of the major
/// model families (GPT-2/Qwen `<|endoftext|>`, Qwen chat `<|im_end|>`, Llama 3
/// `<|end_of_text|>`/`<|eot_id|>`, Llama 2/Mistral `</s>`, Gemma `<eos>`/`<end_of_turn>`,
/// gpt-oss `<|return|>`, DeepSeek `<｜end▁of▁sentence｜>`, Phi `<|end|>`).
pub const KNOWN_EOS_NAMES: &[&str] = &[
    "<|endoftext|>",
    "<|im_end|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<|return|>",
    "<｜end▁of▁sentence｜>",
    "<|end|>",
];

/// The special added tokens of `tok` named in [`KNOWN_EOS_NAMES`].
fn eos_from_specials(tok: &tokenizers::Tokenizer) -> Vec<TokenId> {
    let added = tok.get_added_tokens_decoder();
    let mut out: Vec<TokenId> = added
        .iter()
        .filter(|(_, t)| t.special && KNOWN_EOS_NAMES.contains(&t.content.as_str()))
        .map(|(&id, _)| TokenId(id))
        .collect();
    out.sort();
    out
}

/// Where the next piece of at most `max` bytes of `text` ends: after the last whitespace
/// before `max` when there is one (so a word is not cut), else at a character boundary.
fn piece_end(text: &str, max: usize) -> usize {
    if text.len() <= max {
        return text.len();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text.as_bytes()[..end].iter().rposition(|b| b.is_ascii_whitespace()) {
        Some(i) if i > 0 => i + 1,
        _ => end.max(text.chars().next().map_or(1, char::len_utf8)),
    }
}

fn find_config(path: &Path) -> Option<std::path::PathBuf> {
    let dir = path.parent()?;
    let beside = dir.join("tokenizer_config.json");
    if beside.is_file() {
        return Some(beside);
    }
    let stem = path.file_stem()?.to_str()?;
    let named = dir.join(format!("{stem}.config.json"));
    named.is_file().then_some(named)
}

fn load_tokenizer(bytes: &[u8]) -> Result<tokenizers::Tokenizer, VocabError> {
    // `tokenizers` panics on some malformed files instead of returning its error (0.22: a JSON
    // syntax error inside `"decoder"`, e.g. `{"decoder":[`, hits an `expect("Helper")`). A bad
    // file must be a typed error, never a panic of the caller's thread.
    std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(bytes))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            Err(format!("malformed tokenizer.json ({what})").into())
        })
        .map_err(|e| {
            // `tokenizers` reports a missing field as a JSON syntax error: say which it is.
            let why = match serde_json::from_slice::<serde_json::Value>(bytes) {
                Err(j) => format!("malformed tokenizer.json: not JSON: {j}"),
                Ok(v) if v.get("model").is_none_or(|m| !m.is_object()) => {
                    "valid JSON but not a tokenizer.json (no `model` object)".to_string()
                }
                Ok(_) => e.to_string(),
            };
            VocabError::new(VocabErrorKind::Tokenizer(why))
        })
}

/// Decode every token of `tokenizer` and build the trie.
fn decode_vocab(
    tokenizer: tokenizers::Tokenizer,
    source: VocabSource,
) -> Result<VocabInner, VocabError> {
    let decoder_json = tokenizer.get_decoder().and_then(|d| serde_json::to_value(d).ok());
    let encoding = decode::encoding_from_decoder(decoder_json.as_ref());
    let prepends_space = tokenizer
        .get_normalizer()
        .and_then(|n| serde_json::to_string(n).ok())
        .is_some_and(|s| s.contains("\"Prepend\"") && s.contains('▁'));
    let added = tokenizer.get_added_tokens_decoder();
    // The model's size, not `Tokenizer::get_vocab_size(true)`, which builds the whole
    // string → id map (~30 ms at 151k) just to count it. Added tokens may sit past the model's
    // ids (Qwen3) or inside them (Gemma 3).
    let model = tokenizer.get_model();
    let n_tokens =
        model.get_vocab_size().max(added.keys().map(|&k| k as usize + 1).max().unwrap_or(0));
    // Decoding is independent per token: split the id range over the available cores (the
    // per-id cost is dominated by the id → string lookup and its allocation). The model's own
    // lookup is used: `Tokenizer::id_to_token` checks the added vocabulary again (already done
    // from `added` here).
    let map = decode::CharToByte::new();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let chunk = n_tokens.div_ceil(threads).max(1);
    let decode_range = |lo: usize, hi: usize| {
        let mut bytes = Vec::with_capacity((hi - lo) * 8);
        let mut ends = Vec::with_capacity(hi - lo);
        let mut kinds = Vec::with_capacity(hi - lo);
        for id in lo as u32..hi as u32 {
            if let Some(a) = added.get(&id) {
                if a.special {
                    kinds.push(TokenKind::Special);
                } else {
                    decode::decode_token(encoding, &map, &a.content, &mut bytes);
                    kinds.push(TokenKind::Text);
                }
            } else if let Some(s) = model.id_to_token(id) {
                decode::decode_token(encoding, &map, &s, &mut bytes);
                kinds.push(TokenKind::Text);
            } else {
                // A hole in the id space: nothing decodes to it, treat as padding.
                kinds.push(TokenKind::Padding);
            }
            ends.push(bytes.len());
        }
        (bytes, ends, kinds)
    };
    let parts: Vec<(Vec<u8>, Vec<usize>, Vec<TokenKind>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (lo, hi) = ((i * chunk).min(n_tokens), ((i + 1) * chunk).min(n_tokens));
                let f = &decode_range;
                scope.spawn(move || f(lo, hi))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("decode thread")).collect()
    });
    let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    let mut offsets = Vec::with_capacity(n_tokens + 1);
    let mut kinds = Vec::with_capacity(n_tokens);
    offsets.push(0u32);
    for (b, ends, k) in parts {
        let base = bytes.len();
        bytes.extend_from_slice(&b);
        offsets.extend(ends.iter().map(|&e| (base + e) as u32));
        kinds.extend(k);
    }
    finish_inner(
        TokenizerSlot::Loaded(tokenizer),
        encoding,
        bytes,
        offsets,
        kinds,
        prepends_space,
        source,
    )
}

/// EOS ids end the document, so they are never text, whatever the tokenizer calls them: a
/// config may name a plain vocabulary token (`"eos_token": "{"`) as EOS. Left as text, the
/// trie would offer it in masks as its bytes while `advance` and `allows` take it as EOS (found
/// by the `vocab_load` fuzz target). Such a token becomes special: no bytes, not in the trie.
fn eos_not_text(inner: &mut VocabInner) {
    let text_eos: Vec<usize> = inner
        .eos
        .iter()
        .map(|t| t.index())
        .filter(|&i| inner.kinds.get(i) == Some(&TokenKind::Text))
        .collect();
    if text_eos.is_empty() {
        return;
    }
    for &i in &text_eos {
        inner.kinds[i] = TokenKind::Special;
    }
    let n = inner.n_tokens;
    let mut bytes = Vec::with_capacity(inner.bytes.len());
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0u32);
    for i in 0..n {
        if inner.kinds[i] == TokenKind::Text {
            let (lo, hi) = (inner.offsets[i] as usize, inner.offsets[i + 1] as usize);
            bytes.extend_from_slice(&inner.bytes[lo..hi]);
        }
        offsets.push(bytes.len() as u32);
    }
    let tok = |i: usize| &bytes[offsets[i] as usize..offsets[i + 1] as usize];
    inner.trie = TokTrie::build(
        (0..n).filter(|&i| inner.kinds[i] == TokenKind::Text).map(|i| (TokenId(i as u32), tok(i))),
    );
    inner.bytes = bytes;
    inner.offsets = offsets;
}

fn finish_inner(
    tokenizer: TokenizerSlot,
    encoding: TokenEncoding,
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    kinds: Vec<TokenKind>,
    prepends_space: bool,
    source: VocabSource,
) -> Result<VocabInner, VocabError> {
    let n_tokens = kinds.len();
    if n_tokens >= (1 << 24) - 1 {
        return Err(VocabError::new(VocabErrorKind::TooManyTokens(n_tokens)));
    }
    let tok = |i: usize| &bytes[offsets[i] as usize..offsets[i + 1] as usize];
    for i in 0..n_tokens {
        if tok(i).len() > MAX_TOKEN_BYTES {
            return Err(VocabError::new(VocabErrorKind::TokenTooLong {
                id: i as u32,
                len: tok(i).len(),
            }));
        }
    }
    let trie = TokTrie::build(
        (0..n_tokens).filter(|&i| kinds[i] == TokenKind::Text).map(|i| (TokenId(i as u32), tok(i))),
    );
    Ok(VocabInner {
        tokenizer,
        encoding,
        bytes,
        offsets,
        kinds,
        n_tokens,
        n_vocab: n_tokens,
        eos: Vec::new(),
        bos: None,
        pad: None,
        prepends_space,
        trie,
        source,
        extensions: Default::default(),
        cache: None,
        bpe: None,
    })
}

#[cfg(all(test, feature = "embedded-tokenizer"))]
mod tests {
    use super::*;

    /// A tokenizer file rewritten between the hash that keys the cache and the read that
    /// builds the vocabulary: the vocabulary is built from the bytes read, and not stored under
    /// the key of the bytes hashed (a later load of those bytes would read the wrong one).
    #[test]
    fn a_file_changed_between_hash_and_read_is_not_stored() {
        let dir = std::env::temp_dir().join(format!("grammask-vocab-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tok = dir.join("tokenizer.json");
        let json = embedded::tokenizer().unwrap().to_string(false).unwrap();
        std::fs::write(&tok, &json).unwrap();
        let cache_dir = dir.join("cache");
        let config = VocabConfig::default().with_cache(VocabCache::Dir(cache_dir.clone()));
        // The hash of other bytes, as if the file had held them when it was hashed.
        let before = cache::content_hash(b"the file as it was");
        let identity = || Ok((before, json.len() as u64));
        let source = VocabSource::File(tok.display().to_string());
        let lazy = |hash| LazySource::File { path: tok.clone(), limit: u64::MAX, hash };
        let build =
            |source, key_hash| Vocabulary::build_file(&tok, None, &config, source, key_hash);
        let v = Vocabulary::cached(identity, None, &config, source, lazy, build).unwrap();
        match v.cache_outcome() {
            Some(CacheOutcome::NotStored { why, .. }) => assert!(why.contains("changed"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!cache_dir.exists(), "nothing stored");
        assert!(v.encode("hello").is_ok(), "built from the bytes read");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
