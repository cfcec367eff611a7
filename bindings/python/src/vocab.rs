//! `grammask.Vocabulary`: a tokenizer's vocabulary ([`grammask::Vocabulary`]) loaded from a
//! `tokenizer.json`, a GGUF model, a `tokenizers.Tokenizer` (or a transformers fast tokenizer)
//! or the embedded Qwen3 tokenizer, with the logits width (`vocab_size`) a padded model needs.
//!
//! Each instance keeps its *recipe* (how it was loaded: a tuple of plain values) so that it and
//! the constraints compiled against it pickle: unpickling loads the vocabulary again from the
//! recipe, once per process (`grammask/_pickle.py` caches by recipe).

use crate::errors;
use grammask::vocab::{VocabCache, VocabConfig};
use grammask::{TokenId, Vocabulary};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

/// A tokenizer's vocabulary: every token's bytes, the EOS ids, the logits width. Immutable and
/// shareable across threads.
#[pyclass(frozen, name = "Vocabulary", module = "grammask._grammask")]
pub(crate) struct PyVocabulary {
    pub(crate) inner: Vocabulary,
    /// How to load it again (see the module docs).
    recipe: Py<PyTuple>,
}

fn config(vocab_size: Option<usize>, eos_token_ids: Option<Vec<u32>>) -> VocabConfig {
    VocabConfig::default()
        .with_n_vocab(vocab_size)
        .with_extra_eos(eos_token_ids.unwrap_or_default())
}

/// The `cache` argument: `False`/`None` off, `True` the per-user cache directory, a path that
/// directory.
fn cache_arg(
    py: Python<'_>,
    cache: Option<&Bound<'_, PyAny>>,
) -> PyResult<(VocabCache, Py<PyAny>)> {
    let Some(c) = cache.filter(|c| !c.is_none()) else {
        return Ok((VocabCache::Off, false.into_pyobject(py)?.to_owned().into_any().unbind()));
    };
    if let Ok(on) = c.extract::<bool>() {
        let mode = if on { VocabCache::User } else { VocabCache::Off };
        return Ok((mode, on.into_pyobject(py)?.to_owned().into_any().unbind()));
    }
    let dir: std::path::PathBuf = c.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err("cache must be a bool or a directory path")
    })?;
    let text = dir.display().to_string();
    Ok((VocabCache::Dir(dir), text.into_pyobject(py)?.into_any().unbind()))
}

impl PyVocabulary {
    fn new(inner: Vocabulary, recipe: Bound<'_, PyTuple>) -> Self {
        PyVocabulary { inner, recipe: recipe.unbind() }
    }
}

#[pymethods]
impl PyVocabulary {
    /// Load a Hugging Face `tokenizer.json`. EOS/BOS/pad come from `config_path` (a
    /// `tokenizer_config.json`), or from `tokenizer_config.json` / `NAME.config.json` beside
    /// the file when it is not given. `vocab_size` is the model's logits width when it pads its
    /// vocabulary (ids past the tokenizer are never allowed); `eos_token_ids` adds EOS ids
    /// (e.g. from `generation_config.json`).
    ///
    /// `cache`: `True` keeps the decoded vocabulary in the per-user cache directory
    /// (`$GRAMMASK_CACHE_DIR`, else e.g. `~/.cache/grammask/vocab`), a path keeps it there;
    /// the next load of the same files reads it back in milliseconds (keyed by a hash of the
    /// files; a stale or corrupt file is rebuilt). Default: no cache.
    #[staticmethod]
    #[pyo3(signature = (path, *, config_path=None, vocab_size=None, eos_token_ids=None, cache=None))]
    fn from_tokenizer_json(
        py: Python<'_>,
        path: std::path::PathBuf,
        config_path: Option<std::path::PathBuf>,
        vocab_size: Option<usize>,
        eos_token_ids: Option<Vec<u32>>,
        cache: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let p = path.display().to_string();
        let cp = config_path.as_ref().map(|c| c.display().to_string());
        let (mode, cache_obj) = cache_arg(py, cache)?;
        let recipe = PyTuple::new(
            py,
            [
                "tokenizer_json".into_pyobject(py)?.into_any(),
                p.clone().into_pyobject(py)?.into_any(),
                cp.clone().into_pyobject(py)?.into_any(),
                vocab_size.into_pyobject(py)?.into_any(),
                eos_token_ids.clone().into_pyobject(py)?.into_any(),
                cache_obj.into_bound(py),
            ],
        )?;
        let cfg = config(vocab_size, eos_token_ids).with_cache(mode);
        let vocab = match &config_path {
            None => py.detach(|| Vocabulary::from_file_with(&path, &cfg)),
            Some(c) => py.detach(|| Vocabulary::from_files_with(&path, Some(c), &cfg)),
        }
        .map_err(|e| errors::vocab_error(py, &e))?;
        Ok(Self::new(vocab, recipe))
    }

    /// Whether this vocabulary was read back from the cache (`"hit"`), built and stored
    /// (`"stored"`), rebuilt over a refused file (`"rebuilt"`), built but not stored
    /// (`"not_stored"`), or loaded without a cache (`None`).
    #[getter]
    fn cache_outcome(&self) -> Option<&'static str> {
        use grammask::vocab::CacheOutcome as O;
        self.inner.cache_outcome().map(|o| match o {
            O::Hit { .. } => "hit",
            O::Stored { .. } => "stored",
            O::Rebuilt { .. } => "rebuilt",
            O::NotStored { .. } => "not_stored",
            _ => "other",
        })
    }

    /// The vocabulary stored in a GGUF model file's `tokenizer.ggml.*` metadata (llama.cpp's
    /// `llama` and `gpt2` tokenizer models), with its EOS and end-of-turn ids.
    #[staticmethod]
    #[pyo3(signature = (path, *, vocab_size=None))]
    fn from_gguf(
        py: Python<'_>,
        path: std::path::PathBuf,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let p = path.display().to_string();
        let recipe = PyTuple::new(
            py,
            [
                "gguf".into_pyobject(py)?.into_any(),
                p.into_pyobject(py)?.into_any(),
                vocab_size.into_pyobject(py)?.into_any(),
            ],
        )?;
        let vocab = py
            .detach(|| Vocabulary::from_gguf_with(&path, vocab_size))
            .map_err(|e| errors::vocab_error(py, &e))?;
        Ok(Self::new(vocab, recipe))
    }

    /// From a `tokenizers.Tokenizer` (or a transformers fast tokenizer, whose
    /// `backend_tokenizer` is one). EOS ids: `eos_token_ids`, plus the transformers
    /// tokenizer's `eos_token_id`, plus `config` (the text of a `tokenizer_config.json`).
    #[staticmethod]
    #[pyo3(signature = (tokenizer, *, config=None, vocab_size=None, eos_token_ids=None))]
    fn from_hf_tokenizer(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        config: Option<String>,
        vocab_size: Option<usize>,
        eos_token_ids: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let mut eos = eos_token_ids.unwrap_or_default();
        let backend = if tokenizer.hasattr("backend_tokenizer")? {
            if let Ok(id) = tokenizer.getattr("eos_token_id")?.extract::<u32>() {
                eos.push(id);
            }
            tokenizer.getattr("backend_tokenizer")?
        } else {
            tokenizer.clone()
        };
        let json: String = backend.call_method0("to_str")?.extract()?;
        Self::from_json_text(py, json, config, vocab_size, eos)
    }

    /// The embedded Qwen3 tokenizer (no file needed). `cache` as in `from_tokenizer_json`.
    #[staticmethod]
    #[pyo3(signature = (*, vocab_size=None, cache=None))]
    fn embedded(
        py: Python<'_>,
        vocab_size: Option<usize>,
        cache: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let (mode, cache_obj) = cache_arg(py, cache)?;
        let recipe = PyTuple::new(
            py,
            [
                "embedded".into_pyobject(py)?.into_any(),
                vocab_size.into_pyobject(py)?.into_any(),
                cache_obj.into_bound(py),
            ],
        )?;
        let cfg = config(vocab_size, None).with_cache(mode);
        let vocab = py
            .detach(|| Vocabulary::embedded_with(&cfg))
            .map_err(|e| errors::vocab_error(py, &e))?;
        Ok(Self::new(vocab, recipe))
    }

    /// The logits width: the number of bits every mask has (`ceil(vocab_size / 32)` int32
    /// words per bitmask row).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.n_vocab()
    }

    /// The number of tokens the tokenizer defines (`<= vocab_size`).
    #[getter]
    fn n_tokens(&self) -> usize {
        self.inner.n_tokens()
    }

    /// The EOS ids (allowed exactly where the document may end).
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_ids().iter().map(|t| t.0).collect()
    }

    /// The bytes token `token_id` contributes to the output (empty for special and padding
    /// ids).
    ///
    /// Raises `InvalidTokenError` for an id outside `0..vocab_size`.
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let t = check_id(py, token_id, self.inner.n_vocab())?;
        Ok(PyBytes::new(py, self.inner.token_bytes(t)))
    }

    /// Token ids of `text` (no BOS/EOS added), through the tokenizer.
    fn encode(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        let ids = self.inner.encode(text).map_err(|e| errors::vocab_error(py, &e))?;
        Ok(ids.into_iter().map(|t| t.0).collect())
    }

    /// How this vocabulary was loaded, as plain values (what pickling stores).
    #[getter]
    fn recipe<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        self.recipe.bind(py).clone()
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let f = py.import("grammask._pickle")?.getattr("vocabulary_from_recipe")?;
        PyTuple::new(py, [f, PyTuple::new(py, [self.recipe.bind(py).clone()])?.into_any()])
    }

    fn __repr__(&self) -> String {
        format!(
            "Vocabulary(vocab_size={}, n_tokens={}, eos_token_ids={:?})",
            self.inner.n_vocab(),
            self.inner.n_tokens(),
            self.eos_token_ids()
        )
    }
}

impl PyVocabulary {
    fn from_json_text(
        py: Python<'_>,
        json: String,
        config: Option<String>,
        vocab_size: Option<usize>,
        eos: Vec<u32>,
    ) -> PyResult<Self> {
        let recipe = PyTuple::new(
            py,
            [
                "hf_tokenizer".into_pyobject(py)?.into_any(),
                json.as_str().into_pyobject(py)?.into_any(),
                config.as_deref().into_pyobject(py)?.into_any(),
                vocab_size.into_pyobject(py)?.into_any(),
                eos.clone().into_pyobject(py)?.into_any(),
            ],
        )?;
        let cfg = self::config(vocab_size, Some(eos));
        let vocab = py
            .detach(|| {
                Vocabulary::from_bytes(json.as_bytes(), config.as_deref().map(str::as_bytes), &cfg)
            })
            .map_err(|e| errors::vocab_error(py, &e))?;
        Ok(Self::new(vocab, recipe))
    }
}

/// `token_id` as a [`TokenId`] below `n_vocab`, or `InvalidTokenError`.
pub(crate) fn check_id(py: Python<'_>, token_id: i64, n_vocab: usize) -> PyResult<TokenId> {
    match u32::try_from(token_id) {
        Ok(t) if (t as usize) < n_vocab => Ok(TokenId(t)),
        _ => {
            let id = Some(token_id.into_pyobject(py)?.into_any().unbind());
            Err(errors::error(
                py,
                "InvalidTokenError",
                format!("token id {token_id} is out of range (vocab_size {n_vocab})"),
                &[("token_id", id)],
            ))
        }
    }
}
