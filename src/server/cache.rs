//! The compile cache: compiled constraints keyed by the constraint's canonical text (its kind
//! and its JSON), least recently used evicted past a bound, so requests with one schema share
//! one `Arc`-shared [`CompiledConstraint`] and each gets only a cheap engine.

use crate::constraint::CompiledConstraint;
use std::collections::VecDeque;
use std::sync::Mutex;

/// A bounded LRU of compiled constraints.
pub struct CompileCache {
    cap: usize,
    entries: Mutex<VecDeque<(String, CompiledConstraint)>>,
}

impl CompileCache {
    /// At most `cap` entries (at least one).
    pub fn new(cap: usize) -> CompileCache {
        CompileCache { cap: cap.max(1), entries: Mutex::new(VecDeque::new()) }
    }

    /// The entry for `key`, moved to the front.
    pub fn get(&self, key: &str) -> Option<CompiledConstraint> {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let i = e.iter().position(|(k, _)| k == key)?;
        let entry = e.remove(i)?;
        let c = entry.1.clone();
        e.push_front(entry);
        Some(c)
    }

    /// Insert (or refresh) `key`, evicting the least recently used past the bound.
    pub fn put(&self, key: String, c: CompiledConstraint) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = e.iter().position(|(k, _)| *k == key) {
            e.remove(i);
        }
        e.push_front((key, c));
        e.truncate(self.cap);
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Constraint, Vocabulary};

    #[test]
    fn evicts_the_least_recently_used() {
        let vocab = Vocabulary::embedded().unwrap();
        let c = Constraint::json().compile(&vocab).unwrap();
        let cache = CompileCache::new(2);
        cache.put("a".into(), c.clone());
        cache.put("b".into(), c.clone());
        assert!(cache.get("a").is_some()); // a is now the most recent
        cache.put("c".into(), c);
        assert_eq!(cache.len(), 2);
        assert!(cache.get("b").is_none());
        assert!(cache.get("a").is_some() && cache.get("c").is_some());
    }
}
