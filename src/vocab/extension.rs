//! The typed extension cache: what an engine derives once per vocabulary — the JSON engines'
//! string slice and token classes, say — is attached to the [`Vocabulary`] by its type, built on
//! first use and shared by every engine and request over that vocabulary.
//!
//! This keeps the layers pointing down: the vocabulary stores values of types it has never heard
//! of, and each engine module owns its precomputation (llguidance keeps its slicer outside
//! `toktrie` the same way).

use super::Vocabulary;
use rustc_hash::FxHashMap;
use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

/// Data derived from a vocabulary once and kept with it.
///
/// ```
/// use grammask::vocab::{VocabExtension, Vocabulary};
///
/// /// The longest token, in bytes.
/// struct Longest(usize);
/// impl VocabExtension for Longest {
///     fn build(vocab: &Vocabulary) -> Self {
///         Longest(vocab.text_tokens().map(|(_, b)| b.len()).max().unwrap_or(0))
///     }
/// }
///
/// let vocab = Vocabulary::from_token_bytes(&[Some(b"a"), Some(b"abc"), None], &[2], None)?;
/// assert_eq!(vocab.extension::<Longest>().0, 3);
/// // Built once: a second call returns the same value.
/// assert!(std::sync::Arc::ptr_eq(&vocab.extension::<Longest>(), &vocab.extension::<Longest>()));
/// # Ok::<(), grammask::vocab::VocabError>(())
/// ```
pub trait VocabExtension: Send + Sync + 'static {
    /// Derive the value from `vocab`. May itself ask `vocab` for other extensions.
    fn build(vocab: &Vocabulary) -> Self
    where
        Self: Sized;
}

/// The cache: one value per extension type, never dropped before the vocabulary (their
/// addresses may key other caches).
#[derive(Default)]
pub(crate) struct Extensions {
    map: Mutex<FxHashMap<TypeId, Box<dyn Any + Send + Sync>>>,
}

impl Extensions {
    fn get<T: VocabExtension>(&self) -> Option<Arc<T>> {
        let map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&TypeId::of::<T>()).and_then(|b| b.downcast_ref::<Arc<T>>()).cloned()
    }

    /// Keep `value` unless another thread kept one first; return the kept one.
    fn insert<T: VocabExtension>(&self, value: Arc<T>) -> Arc<T> {
        let mut map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let kept = map.entry(TypeId::of::<T>()).or_insert_with(|| Box::new(value.clone()));
        kept.downcast_ref::<Arc<T>>().cloned().unwrap_or(value)
    }
}

impl Vocabulary {
    /// The vocabulary's value of extension `T`, built on the first call (outside any lock, so
    /// `build` may ask for other extensions) and shared afterwards. Engines fetch theirs at
    /// construction and keep the `Arc`, so no mask pays for the lookup.
    pub fn extension<T: VocabExtension>(&self) -> Arc<T> {
        let ext = &self.inner.extensions;
        if let Some(v) = ext.get::<T>() {
            return v;
        }
        ext.insert(Arc::new(T::build(self)))
    }
}
