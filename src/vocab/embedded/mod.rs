//! The embedded default tokenizer (feature `embedded-tokenizer`): Qwen3's `tokenizer.json` and
//! `tokenizer_config.json`, gzipped (Apache-2.0, see `README.md` here), so the CLI and the
//! examples run with no file at hand. A library user who brings a tokenizer turns the feature off
//! and links none of its 2 MB.

use super::{load_tokenizer, LazySource, VocabConfig, VocabError, VocabSource, Vocabulary};
use std::io::Read;

static EMBEDDED_TOKENIZER: &[u8] = include_bytes!("qwen3.tokenizer.json.gz");
static EMBEDDED_CONFIG: &[u8] = include_bytes!("qwen3.tokenizer_config.json.gz");

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * 6);
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .expect("the embedded tokenizer is a valid gzip stream");
    out
}

impl Vocabulary {
    /// The embedded Qwen3 tokenizer (Apache-2.0), the default when the user gives none.
    ///
    /// # Errors
    /// Never in practice; the embedded files are checked by the test suite.
    pub fn embedded() -> Result<Vocabulary, VocabError> {
        Self::embedded_with(&VocabConfig::default())
    }

    /// [`Vocabulary::embedded`] with options: a padded logits width (Qwen3 models emit
    /// 151,936 logits for the tokenizer's 151,669 tokens), extra EOS ids.
    ///
    /// # Errors
    /// Option errors (EOS out of range, a width below the tokenizer's size).
    pub fn embedded_with(config: &VocabConfig) -> Result<Vocabulary, VocabError> {
        // The linked-in bytes never change: they always match the key.
        let build = |source, _| {
            let cfg = gunzip(EMBEDDED_CONFIG);
            Ok((Self::build(tokenizer()?, Some(&cfg), config, source)?, true))
        };
        // Keyed by the compressed files (what is linked in): a hit never inflates them.
        let identity = || Ok((super::cache::content_hash(EMBEDDED_TOKENIZER), 0));
        let (cfg, source) = (Some(EMBEDDED_CONFIG), VocabSource::Embedded);
        Self::cached(identity, cfg, config, source, |_| LazySource::Embedded, build)
    }
}

/// The embedded `tokenizers::Tokenizer` (for a vocabulary read back from the cache).
pub(super) fn tokenizer() -> Result<tokenizers::Tokenizer, VocabError> {
    load_tokenizer(&gunzip(EMBEDDED_TOKENIZER))
}
