//! The byte-level recogniser interface every grammar implements, and the adapter for grammars
//! whose whole state is one small `Copy` value.
//!
//! The trie walker ([`crate::vocab::TokTrie::walk`]) computes a mask for any grammar that can
//! *push a byte* (consume it if the grammar allows it) and *pop bytes* (return to the state before
//! the last `n` successful pushes). Walking the vocabulary trie depth-first, a refused byte prunes
//! the whole subtree below it, and leaving a subtree pops exactly the bytes it pushed — so the
//! recogniser only ever keeps a stack of states as deep as the longest token.
//!
//! Grammars with a small `Copy` state (free-form JSON, regex DFAs) implement [`ByteLogic`] and
//! get a [`Recognizer`] for free through [`CopyStack`]: pushing is writing one state into the
//! next slot of a preallocated array, popping is moving an index. Grammars with deep state keep
//! their own undo log and implement [`Recognizer`] directly.

use crate::bytes::ByteSet;

/// A byte-level recogniser that the trie walker can drive.
///
/// Contract: `try_push_byte` either consumes the byte and returns `true`, or returns `false` and
/// leaves the state exactly as it was. `pop_bytes(n)` undoes the last `n` successful pushes that
/// have not been popped yet (`n` never exceeds that count).
pub trait Recognizer {
    /// Consume `byte` if the grammar allows it here.
    fn try_push_byte(&mut self, byte: u8) -> bool;
    /// Undo the last `n` successful pushes.
    fn pop_bytes(&mut self, n: usize);

    /// A superset of the bytes `try_push_byte` could accept now. Walkers may skip the other
    /// bytes without asking; the default (every byte) is always correct. Worth overriding where
    /// pushing is expensive and few bytes can follow (a JSON structure between values).
    #[inline]
    fn byte_superset(&self) -> ByteSet {
        ByteSet::FULL
    }

    /// Bytes that leave the recogniser in its current state, which stays live: every string of
    /// them is accepted from here. [`crate::vocab::TokTrie::walk_staying`] then accepts a whole
    /// subtree whose bytes all lie in it without pushing them (inside an identifier, a string
    /// body). The default (no byte) is always correct.
    #[inline]
    fn stay_set(&self) -> ByteSet {
        ByteSet::EMPTY
    }
}

/// The transition function of a grammar whose state is a small `Copy` value.
///
/// `step` must return `None` exactly when no document with the bytes so far plus `byte` as a
/// prefix can be completed: that is what makes masks exact (no dead ends).
pub trait ByteLogic {
    /// The whole recogniser state.
    type State: Copy;
    /// The state after `byte`, or `None` when the byte is refused.
    fn step(&self, state: &Self::State, byte: u8) -> Option<Self::State>;
}

/// A [`Recognizer`] over a [`ByteLogic`]: a stack of states in a caller-owned buffer, so that
/// computing a mask allocates nothing.
///
/// Invariant: `states[..=top]` are the base state and the states after each pushed byte.
pub struct CopyStack<'a, L: ByteLogic> {
    logic: &'a L,
    states: &'a mut Vec<L::State>,
    top: usize,
}

impl<'a, L: ByteLogic> CopyStack<'a, L> {
    /// A stack based at `base`, using `buffer` as storage (grown to `max_depth + 1` if needed).
    pub fn new(
        logic: &'a L,
        base: L::State,
        buffer: &'a mut Vec<L::State>,
        max_depth: usize,
    ) -> Self {
        buffer.clear();
        buffer.resize(max_depth + 1, base);
        CopyStack { logic, states: buffer, top: 0 }
    }

    /// The current state (after all pushed bytes).
    #[inline]
    pub fn current(&self) -> &L::State {
        &self.states[self.top]
    }

    /// Number of bytes currently pushed.
    #[inline]
    pub fn depth(&self) -> usize {
        self.top
    }
}

impl<L: ByteLogic> Recognizer for CopyStack<'_, L> {
    #[inline(always)]
    fn try_push_byte(&mut self, byte: u8) -> bool {
        match self.logic.step(&self.states[self.top], byte) {
            Some(s) => {
                self.top += 1;
                if self.top == self.states.len() {
                    // Only reachable if a token is longer than the depth given at creation.
                    self.states.push(s);
                } else {
                    self.states[self.top] = s;
                }
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn pop_bytes(&mut self, n: usize) {
        debug_assert!(n <= self.top, "pop_bytes({n}) past the base (depth {})", self.top);
        self.top -= n;
    }
}

/// Feed `bytes` to a [`ByteLogic`] from `state`; the state after them, or `None` at the first
/// refused byte. This is the naive reference the fast mask is tested against.
pub fn run_bytes<L: ByteLogic>(logic: &L, state: &L::State, bytes: &[u8]) -> Option<L::State> {
    let mut s = *state;
    for &b in bytes {
        s = logic.step(&s, b)?;
    }
    Some(s)
}
