//! The bounded undo history behind every engine's `rollback`: one entry per advanced token
//! (the state before it), the oldest dropped beyond the configured depth.
//!
//! Invariant: at most `cap` entries; `cap == 0` keeps none (rollback then always refuses).

use crate::engine::{EngineError, EngineErrorKind};
use std::collections::VecDeque;

/// A bounded stack of earlier states.
#[derive(Clone, Debug)]
pub(crate) struct History<T> {
    cap: usize,
    items: VecDeque<T>,
}

impl<T> History<T> {
    /// An empty history keeping at most `cap` states.
    pub(crate) fn new(cap: usize) -> History<T> {
        History { cap, items: VecDeque::new() }
    }

    /// Record `state` (the state before an advanced token), dropping the oldest when full.
    pub(crate) fn push(&mut self, state: T) {
        if self.cap == 0 {
            return;
        }
        if self.items.len() == self.cap {
            self.items.pop_front();
        }
        self.items.push_back(state);
    }

    /// How many entries are kept.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Remove and return the newest entry.
    pub(crate) fn pop(&mut self) -> Option<T> {
        self.items.pop_back()
    }

    /// Remove the last `n` entries and return the oldest of them: the state `n` tokens ago
    /// (`None` when `n == 0`).
    ///
    /// # Errors
    /// [`EngineErrorKind::RollbackTooFar`] when fewer than `n` are kept; nothing is removed.
    pub(crate) fn rewind(&mut self, n: usize) -> Result<Option<T>, EngineError> {
        if n > self.items.len() {
            return Err(EngineError::new(EngineErrorKind::RollbackTooFar {
                requested: n,
                available: self.items.len(),
            }));
        }
        Ok(self.items.drain(self.items.len() - n..).next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewind_returns_the_state_n_tokens_ago_and_refuses_beyond_the_cap() {
        let mut h = History::new(3);
        for s in 0..5 {
            h.push(s);
        }
        // Only 2, 3, 4 are kept.
        let e = h.rewind(4).unwrap_err();
        assert!(matches!(e.kind(), EngineErrorKind::RollbackTooFar { requested: 4, available: 3 }));
        assert_eq!(h.rewind(0).unwrap(), None);
        assert_eq!(h.rewind(2).unwrap(), Some(3));
        assert_eq!(h.rewind(1).unwrap(), Some(2));
        assert!(h.rewind(1).is_err());
        let mut off: History<u8> = History::new(0);
        off.push(1);
        assert!(off.rewind(1).is_err());
    }
}
