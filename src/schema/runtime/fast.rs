//! Fast masks inside string bodies: the schema engine's slices.
//!
//! Inside a string value or a key, almost every token stays inside the string, and a full trie
//! walk with the general recogniser ([`Rt`], undo log and all) costs milliseconds. This module
//! answers those masks from the vocabulary's [`StringClasses`] instead:
//!
//! - **Open tokens** (those that stay inside the string): per live alternative, the plain
//!   tokens are run through the content automaton with a tiny `Copy` walker (one table lookup
//!   per trie node, no escape logic: plain bytes are their own decoded content), and only the
//!   escaped tokens go through [`Rt`]. The result depends only on the alternative's core,
//!   automaton state and (for length-counted strings) character count, so it is cached per
//!   engine under that key. An unconstrained string needs no walk at all
//!   ([`StringClasses::open`]), and a length-bounded one far from its bound is
//!   `safe_at_most(r) ∪ open_nonsafe`.
//! - **Closing tokens** of a string with one live alternative: the state after the closing
//!   quote does not depend on the content before it, so the suffixes after the quote are walked
//!   once from that state (the small `exits` trie), and each group of tokens with the same
//!   content before the quote is decided by one automaton run. Tokens with an escape before the
//!   quote, and strings with several live alternatives, walk the closing tokens with [`Rt`].
//! - **Keys** of objects whose undeclared keys are any string: every key prefix can still be
//!   completed (the language is infinite, so seen keys never exhaust it), so the open tokens are
//!   [`StringClasses::open`]; the closing tokens (duplicate keys, declared names, what may follow
//!   the key) are walked with [`Rt`].
//!
//! Exactness: each set above is what the trie walk with [`Rt`] would compute for that class of
//! tokens; `tests/schema_fast_masks.rs` compares every mask with the plain walk
//! (`SchemaConstraint::fill_mask_reference`) on real schemas and documents.

use super::{Alt, CoreRt, Graves, Kind, Rt, SchemaConstraint, Undo, E_NORMAL};
use crate::mask::TokenMask;
use crate::recognizer::Recognizer;
use crate::schema::string::{ByteDfa, DEAD};
use crate::vocab::{StringClasses, TokTrie};
use rustc_hash::FxHashMap;

/// Open-token sets cached per (core, automaton state, character count or 0).
#[derive(Default)]
pub(super) struct FastState {
    open: FxHashMap<(u32, u32, u32), Box<TokenMask>>,
    exits: Option<TokenMask>,
    plain_stack: Vec<(u32, u32)>,
}

/// Most cached open sets per engine (each is one vocabulary-sized bitset).
const OPEN_CACHE_LIMIT: usize = 64;

/// Runs plain bytes through a content automaton with a character bound: the `Copy` walker.
struct PlainWalk<'a> {
    dfa: &'a ByteDfa,
    max: u32,
    stack: &'a mut Vec<(u32, u32)>,
    top: usize,
}

impl Recognizer for PlainWalk<'_> {
    #[inline(always)]
    fn try_push_byte(&mut self, b: u8) -> bool {
        let (s, c) = self.stack[self.top];
        let n = self.dfa.next(s, b);
        let c = c + u32::from(b & 0xC0 != 0x80);
        if n == DEAD || c > self.max {
            return false;
        }
        self.top += 1;
        if self.top == self.stack.len() {
            self.stack.push((n, c));
        } else {
            self.stack[self.top] = (n, c);
        }
        true
    }

    #[inline(always)]
    fn pop_bytes(&mut self, n: usize) {
        self.top -= n;
    }
}

impl SchemaConstraint {
    /// The fast mask for a string or key body, if one applies (`false`: walk the trie).
    pub(super) fn fast_string_mask(&mut self, mask: &mut TokenMask) -> bool {
        let f = *self.st.frames.last().expect("root");
        if f.esc != E_NORMAL {
            return false;
        }
        match f.kind {
            Kind::Str => self.fast_str(mask),
            Kind::Key if self.free_budget() == Some(u32::MAX) => {
                let vocab = self.vocab.clone();
                let classes = vocab.string_classes();
                mask.union_with(&classes.open);
                self.rt().walk(&classes.closing, mask);
                true
            }
            _ => false,
        }
    }

    fn fast_str(&mut self, mask: &mut TokenMask) -> bool {
        let f = *self.st.frames.last().expect("root");
        let schema = self.schema.clone();
        let p = &schema.program;
        let alive: smallvec::SmallVec<[usize; 4]> =
            (f.alts as usize..self.st.alts.len()).filter(|&i| self.st.alts[i].alive).collect();
        if alive.is_empty()
            || !alive.iter().all(|&i| {
                matches!(p.cores[self.st.alts[i].core as usize], CoreRt::String { .. })
            })
        {
            return false;
        }
        let vocab = self.vocab.clone();
        let classes = vocab.string_classes();
        for &ai in &alive {
            self.open_tokens(ai, classes, mask);
        }
        if alive.len() == 1 {
            self.closing_single(alive[0], classes, mask);
        } else {
            self.rt().walk(&classes.closing, mask);
        }
        true
    }

    /// Adds the tokens that keep alternative `ai` of the top string frame alive without
    /// closing the string.
    fn open_tokens(&mut self, ai: usize, classes: &StringClasses, mask: &mut TokenMask) {
        let p = &self.schema.program;
        let a = self.st.alts[ai];
        let CoreRt::String { dfa, max, .. } = p.cores[a.core as usize] else {
            unreachable!("string core checked by the caller")
        };
        let d = &p.dfas[dfa as usize];
        if dfa == p.any_dfa && a.a == d.start() {
            if max == u32::MAX {
                mask.union_with(&classes.open);
                return;
            }
            let r = max - a.b;
            if r >= classes.open_nonsafe_max_len {
                mask.union_with(classes.safe_at_most(r));
                mask.union_with(&classes.open_nonsafe);
                return;
            }
        }
        let key = (a.core, a.a, if max == u32::MAX { 0 } else { a.b });
        if let Some(m) = self.fast.open.get(&key) {
            mask.union_with(m);
            return;
        }
        let mut m = Box::new(TokenMask::new(mask.len()));
        {
            let mut w = PlainWalk { dfa: d, max, stack: &mut self.fast.plain_stack, top: 0 };
            w.stack.clear();
            w.stack.push((a.a, a.b));
            classes.plain.walk(&mut w, &mut m);
        }
        self.single_alt_walk(ai, &classes.escaped, &mut m);
        mask.union_with(&m);
        if self.fast.open.len() >= OPEN_CACHE_LIMIT {
            self.fast.open.clear();
        }
        self.fast.open.insert(key, m);
    }

    /// Walks `trie` with a copy of the state in which only alternative `ai` of the top frame
    /// is alive.
    fn single_alt_walk(&self, ai: usize, trie: &TokTrie, mask: &mut TokenMask) {
        let mut st = self.st.clone();
        let f = *st.frames.last().expect("root");
        for (i, a) in st.alts.iter_mut().enumerate().skip(f.alts as usize) {
            if i != ai {
                a.alive = false;
            }
        }
        let mut log = Vec::new();
        let mut graves = Graves::default();
        let mut rt = Rt { cs: &self.schema, st: &mut st, log: &mut log, graves: &mut graves };
        trie.walk(&mut rt, mask);
    }

    /// Adds the tokens that close the top string frame (one live alternative, `ai`) and go on
    /// as the document allows.
    fn closing_single(&mut self, ai: usize, classes: &StringClasses, mask: &mut TokenMask) {
        let schema = self.schema.clone();
        let p = &schema.program;
        let a: Alt = self.st.alts[ai];
        let CoreRt::String { dfa, min, max } = p.cores[a.core as usize] else {
            unreachable!("string core checked by the caller")
        };
        let d = &p.dfas[dfa as usize];
        // The suffixes after the quote, from the state after the quote: the same whatever the
        // content before it, since the one alternative closes with the same parents.
        let mut exits = self.fast.exits.take().unwrap_or_else(|| TokenMask::new(mask.len()));
        exits.clear();
        {
            let mut rt = self.rt();
            rt.log.push(Undo::Mark);
            rt.pop_frame();
            rt.child_done(a.parents);
            classes.exits.walk(&mut rt, &mut exits);
            rt.undo_byte();
        }
        self.log.clear();
        for g in &classes.groups {
            let s = d.run(a.a, &g.pre);
            let n = a.b + g.chars;
            if s == DEAD || !d.is_accept(s) || n < min || n > max {
                continue;
            }
            for &t in &g.at_end {
                mask.insert(t);
            }
            for &t in &g.going_on {
                if exits.contains(t) {
                    mask.insert(t);
                }
            }
        }
        self.fast.exits = Some(exits);
        self.rt().walk(&classes.close_escaped, mask);
    }
}

impl Rt<'_> {
    /// Walks `trie` from the current state (which is restored), then drops the undo log.
    pub(super) fn walk(mut self, trie: &TokTrie, mask: &mut TokenMask) {
        trie.walk(&mut self, mask);
        self.log.clear();
    }
}
