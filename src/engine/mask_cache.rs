//! The small least-recently-used cache of masks every engine keeps, keyed by its exact state.
//!
//! A mask is a function of the engine's state alone, so a hit returns exactly what a walk would.
//! Lookups are a linear scan of a handful of entries (a state comparison each), far cheaper
//! than the walk they save; keys are compared through a caller-supplied predicate so an engine
//! with a large state can check a hash before the full comparison without building a key.

use crate::mask::TokenMask;

struct Entry<K> {
    key: K,
    mask: TokenMask,
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

    /// Remember `mask` for `key`, replacing the least recently used entry when full.
    pub(crate) fn insert(&mut self, key: K, mask: &TokenMask) {
        if self.cap == 0 {
            return;
        }
        if self.entries.len() < self.cap {
            self.entries.push(Entry { key, mask: mask.clone(), stamp: self.clock });
        } else if let Some(e) = self.entries.iter_mut().min_by_key(|e| e.stamp) {
            e.key = key;
            e.mask.copy_from(mask);
            e.stamp = self.clock;
        }
    }
}
