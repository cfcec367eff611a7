//! Mask caches keyed by an engine's exact state: the small least-recently-used one every
//! engine keeps ([`MaskCache`]), and the bounded one all engines of a compiled constraint
//! share ([`SharedMasks`]).
//!
//! A mask is a function of the engine's state (and vocabulary) alone, so a hit returns exactly
//! what a walk would. Per-engine lookups are a linear scan of a handful of entries (a state
//! comparison each), far cheaper than the walk they save; keys are compared through a
//! caller-supplied predicate so an engine with a large state can check a hash before the full
//! comparison without building a key. The shared cache is what makes the second request of a
//! schema cheap where the first paid: the states after `{"`, after `"price": `, inside a
//! bounded number recur from document to document.

use crate::mask::TokenMask;
use crate::vocab::Vocabulary;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

struct Entry<K> {
    key: K,
    /// Shared with [`SharedMasks`] when the mask came from there or went there too: one copy
    /// of a vocabulary-wide bitset per miss, not one per cache.
    mask: Arc<TokenMask>,
    stamp: u64,
}

/// At most `cap` masks, evicting the least recently used (`cap == 0` disables caching).
pub(crate) struct MaskCache<K> {
    entries: Vec<Entry<K>>,
    cap: usize,
    clock: u64,
}

impl<K> MaskCache<K> {
    /// An empty cache holding at most `cap` masks.
    pub(crate) fn new(cap: usize) -> Self {
        MaskCache { entries: Vec::new(), cap, clock: 0 }
    }

    /// Copy the mask of the entry whose key `matches` into `mask`; `false` on a miss. Counts as
    /// a use of that entry, and starts the step the following [`MaskCache::insert`] belongs to.
    pub(crate) fn lookup(&mut self, matches: impl Fn(&K) -> bool, mask: &mut TokenMask) -> bool {
        self.clock += 1;
        match self.entries.iter_mut().find(|e| matches(&e.key)) {
            Some(e) => {
                e.stamp = self.clock;
                mask.copy_from(&e.mask);
                true
            }
            None => false,
        }
    }

    /// Remember `mask` for `key`, replacing the least recently used entry when full (in
    /// place when no other cache holds that entry's mask).
    pub(crate) fn insert(&mut self, key: K, mask: &TokenMask) {
        if self.cap == 0 {
            return;
        }
        if self.entries.len() < self.cap {
            self.entries.push(Entry { key, mask: Arc::new(mask.clone()), stamp: self.clock });
        } else if let Some(e) = self.entries.iter_mut().min_by_key(|e| e.stamp) {
            e.key = key;
            match Arc::get_mut(&mut e.mask) {
                Some(m) => m.copy_from(mask),
                None => e.mask = Arc::new(mask.clone()),
            }
            e.stamp = self.clock;
        }
    }

    /// [`MaskCache::insert`] of a mask already behind an `Arc` (one [`SharedMasks`] holds):
    /// kept without a copy.
    pub(crate) fn insert_arc(&mut self, key: K, mask: Arc<TokenMask>) {
        if self.cap == 0 {
            return;
        }
        if self.entries.len() < self.cap {
            self.entries.push(Entry { key, mask, stamp: self.clock });
        } else if let Some(e) = self.entries.iter_mut().min_by_key(|e| e.stamp) {
            *e = Entry { key, mask, stamp: self.clock };
        }
    }
}

/// Masks shared by every engine of one compiled constraint: at most `cap` entries (cleared
/// when full), keyed by the vocabulary and the state's hash, each compared exactly. The map
/// keeps a clone of every vocabulary it has masks for, so their addresses stay unique while
/// the entries live.
pub(crate) struct SharedMasks<K> {
    inner: Mutex<SharedInner<K>>,
}

/// The keys (and their masks) stored under one (vocabulary address, state hash).
type Bucket<K> = Vec<(K, Arc<TokenMask>)>;

struct SharedInner<K> {
    map: FxHashMap<(usize, u64), Bucket<K>>,
    vocabs: Vec<Vocabulary>,
    len: usize,
}

impl<K> Default for SharedMasks<K> {
    fn default() -> Self {
        SharedMasks {
            inner: Mutex::new(SharedInner {
                map: FxHashMap::default(),
                vocabs: Vec::new(),
                len: 0,
            }),
        }
    }
}

impl<K> std::fmt::Debug for SharedMasks<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.inner.lock().map_or(0, |m| m.len);
        f.debug_struct("SharedMasks").field("masks", &n).finish()
    }
}

impl<K> SharedMasks<K> {
    /// The mask stored for (`vocab`, `hash`, a key that `matches`), if any.
    pub(crate) fn get(
        &self,
        vocab: &Vocabulary,
        hash: u64,
        matches: impl Fn(&K) -> bool,
    ) -> Option<Arc<TokenMask>> {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.map
            .get(&(vocab.addr(), hash))
            .and_then(|v| v.iter().find(|(k, _)| matches(k)).map(|(_, m)| Arc::clone(m)))
    }

    /// [`SharedMasks::get`] with the stored key too, for keys that are cheap to clone (an
    /// `Arc`): the engine's own cache can then hold the same key instead of a copy.
    pub(crate) fn get_with_key(
        &self,
        vocab: &Vocabulary,
        hash: u64,
        matches: impl Fn(&K) -> bool,
    ) -> Option<(K, Arc<TokenMask>)>
    where
        K: Clone,
    {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.map.get(&(vocab.addr(), hash)).and_then(|v| v.iter().find(|(k, _)| matches(k)).cloned())
    }

    /// Masks held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().map_or(0, |m| m.len)
    }

    /// Remember `mask` for (`vocab`, `hash`, `key`), keeping at most `cap` masks (cleared
    /// when full). The engine's own [`MaskCache`] holds the same `Arc`.
    pub(crate) fn insert_arc(
        &self,
        vocab: &Vocabulary,
        hash: u64,
        key: K,
        mask: Arc<TokenMask>,
        cap: usize,
    ) {
        if cap == 0 {
            return;
        }
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if m.len >= cap {
            m.map.clear();
            m.vocabs.clear();
            m.len = 0;
        }
        if !m.vocabs.iter().any(|v| v.same_as(vocab)) {
            m.vocabs.push(vocab.clone());
        }
        m.map.entry((vocab.addr(), hash)).or_default().push((key, mask));
        m.len += 1;
    }
}
