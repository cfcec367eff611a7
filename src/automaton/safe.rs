//! Safe bytes of a DFA state: a large set of bytes that can never lead the automaton from that
//! state to a dead end, in any order and any number.
//!
//! Both the regex engine (vocabulary slices per DFA state) and the CFG engine (slices per lexeme
//! state) precompute, for a state, the tokens made only of such bytes: they are allowed there
//! without a walk. The analysis is about the automaton alone, so it lives here, below both.

use super::{ByteDfa, DfaStateId};
use crate::bytes::ByteSet;
use rustc_hash::FxHashSet;

impl ByteDfa {
    /// A large byte set `C` such that from `state`, every string over `C` runs through the DFA.
    ///
    /// Starts from the bytes `state` accepts twice in a row, then drops every byte that some
    /// state reachable from `state` by `C`-bytes refuses, until stable (the set only shrinks, so
    /// this terminates). Every token made only of `C`-bytes is then allowed at `state` (all DFA
    /// states are live). Gives up (the empty set) when the reachable region exceeds `limit`
    /// states or the shared work `budget` (decremented by 256 per state visited) runs out.
    pub(crate) fn safe_bytes(
        &self,
        state: DfaStateId,
        limit: usize,
        budget: &mut usize,
    ) -> ByteSet {
        // Candidates: bytes that can follow `state` twice in a row. (Without this, one byte that
        // leads somewhere narrow, like `(` before a phone number, would make the fixpoint drop
        // everything.)
        let mut set =
            ByteSet::from_fn(|b| self.next(state, b).and_then(|n| self.next(n, b)).is_some());
        let mut seen: FxHashSet<DfaStateId> = FxHashSet::default();
        let mut work = Vec::new();
        loop {
            seen.clear();
            seen.insert(state);
            work.push(state);
            let mut changed = false;
            while let Some(r) = work.pop() {
                // Bound the total analysis work of a pattern: past the budget, no more slices.
                *budget = budget.saturating_sub(256);
                if *budget == 0 {
                    return ByteSet::EMPTY;
                }
                for b in set.iter() {
                    match self.next(r, b) {
                        None => {
                            set.remove(b);
                            changed = true;
                        }
                        Some(n) => {
                            if seen.insert(n) {
                                if seen.len() > limit {
                                    return ByteSet::EMPTY;
                                }
                                work.push(n);
                            }
                        }
                    }
                }
            }
            if !changed {
                return set;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::DfaConfig;

    fn dfa(p: &str) -> ByteDfa {
        ByteDfa::from_regex(p, &DfaConfig::default()).unwrap()
    }

    /// Every string over the safe bytes (here: all of length ≤ 3) runs through from `s`.
    fn assert_safe(d: &ByteDfa, s: DfaStateId, set: &ByteSet) {
        let bytes: Vec<u8> = set.iter().collect();
        for &a in &bytes {
            assert!(d.run(s, &[a]).is_some(), "{a:#04x}");
            for &b in &bytes {
                for &c in &bytes {
                    assert!(d.run(s, &[a, b, c]).is_some(), "{a:#04x} {b:#04x} {c:#04x}");
                }
            }
        }
    }

    #[test]
    fn a_loop_is_safe_and_what_leaves_it_is_not() {
        // Inside the local part of an e-mail-like pattern: letters and dots loop, `@` leaves.
        let d = dfa(r"[a-z.]+@[a-z]+");
        let s = d.next(d.start(), b'x').unwrap();
        let set = d.safe_bytes(s, 1024, &mut 1_000_000);
        assert_eq!(set, ByteSet::from_range(b'a', b'z').union(&ByteSet::of(b".")));
        assert_safe(&d, s, &set);
    }

    #[test]
    fn bytes_that_cannot_repeat_are_dropped() {
        // After the start only one `-` may come: it is not safe, digits are.
        let d = dfa(r"-?[0-9]+");
        let set = d.safe_bytes(d.start(), 1024, &mut 1_000_000);
        assert_eq!(set, ByteSet::from_range(b'0', b'9'));
        assert_safe(&d, d.start(), &set);
    }

    #[test]
    fn the_fixpoint_drops_bytes_refused_further_on() {
        // `a` and `b` each repeat from the start, but after an `a` no `b` may follow: only
        // `a` survives the fixpoint.
        let d = dfa(r"b*a*");
        let set = d.safe_bytes(d.start(), 1024, &mut 1_000_000);
        assert_eq!(set, ByteSet::of(b"a"));
        assert_safe(&d, d.start(), &set);
    }

    #[test]
    fn bounded_patterns_have_no_safe_bytes() {
        let d = dfa(r"[0-9]{3}");
        assert!(d.safe_bytes(d.start(), 1024, &mut 1_000_000).is_empty());
    }

    #[test]
    fn limits_give_up_with_the_empty_set() {
        let d = dfa(r"[a-z]*");
        let mut budget = 1_000_000;
        assert_eq!(d.safe_bytes(d.start(), 1024, &mut budget), ByteSet::from_range(b'a', b'z'));
        assert!(budget < 1_000_000, "the work is charged to the budget");
        // No budget left: nothing.
        assert!(d.safe_bytes(d.start(), 1024, &mut 256).is_empty());
        // Letters lead out of the start and then digits refuse them back: only digits stay. A
        // limit of 0 gives up at the first state reached beyond the start.
        let d = dfa(r"[a-z]*[0-9]*");
        assert_eq!(d.safe_bytes(d.start(), 1024, &mut 1_000_000), ByteSet::from_range(b'0', b'9'));
        assert!(d.safe_bytes(d.start(), 0, &mut 1_000_000).is_empty(), "over the state limit");
    }
}
