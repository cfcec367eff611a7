//! The per-request schema recogniser and its [`ConstraintEngine`].
//!
//! State: a stack of open values ([`Frame`]s: the root, objects, arrays, strings, keys,
//! numbers, literals). Each frame owns a slice of [`Alt`]s in one arena: the alternative cores
//! still alive for that value, with their progress (seen keys, item index, automaton state,
//! character count) and a bitmask of the parent's alternatives they serve (one word and the
//! block of 64 parents it indexes, so a frame may hold any number of them). A value that
//! completes tells its parent which of the parent's alternatives survive
//! ([`Rt::child_done`]), and for which of them it matched `contains` (item alternatives from
//! `item ∧ contains` carry `tag`; array alternatives count matches in `b`). Arrays with
//! `uniqueItems` record the raw text of their items while open and compare canonical forms
//! when an item completes (see [`super::unique`]).
//!
//! Every mutation goes through helpers that append to an undo log, and each pushed byte starts
//! with a mark, so `pop_bytes` restores exactly the previous state whatever the nesting depth;
//! values that close move their arena tails to graveyards, so undo never allocates.
//!
//! Exactness: a byte is accepted only if some alternative stays alive, and an alternative is
//! alive only while its value can still be completed (live automaton states, numeric families
//! from [`super::number`], object feasibility checks, satisfiable child cores), so the trie walk
//! computes exact masks.
//!
//! Masks: the general recogniser costs tens of nanoseconds per byte (undo log, alternatives),
//! so a full trie walk with it costs milliseconds. [`fast`] answers string bodies, keys and
//! numbers from vocabulary classes instead (cached open-token sets, closing tokens decided per
//! group), and the walk that remains (structure between values) hands every subtree below a
//! string- or number-opening prefix to the same fast paths through a walk hook, and skips
//! bytes no structural state can take ([`Recognizer::byte_superset`]). The plain walk is kept
//! as the reference the fast masks are tested against (`fill_mask_reference`).
//!
//! Numbers: each number alternative carries a state of its constraint's automaton over
//! classes of number texts ([`super::numdfa`]), so its bytes are table steps and its masks are
//! cached by state, not digits. Masks are cached per engine and, by exact state, for all the
//! schema's engines (`CompiledSchema::masks`).
//!
//! Still slow (FIXME, issue 23): the first visit of a permissive automaton state
//! walks the plain-token trie once (~1–3 ms, then shared by all engines of the schema);
//! object feasibility checks (`completable_after`) are linear in the declared names.
//!
//! Files: this one holds the recogniser's core (the byte step, value starts, member
//! separators, closing values, numbers and literals) and the engine; [`state`] the state types,
//! [`undo`] the undo log, [`object`], [`array`] and [`string`] the per-kind byte logic,
//! [`fast`] the mask fast paths, and [`completion`] the fuzzer's bound on what a completion
//! needs.

use super::compile::{contains_feasible, CoreRt, DfaId, ExprId, ObjRt, Program, RtCoreId};
use super::number;
use super::numdfa::{NUM_DEAD, NUM_OVER, NUM_START};
use super::string::DEAD;
use super::unique;
use super::{CompiledSchema, PropertyOrder, SchemaError};
use crate::engine::history::History;
use crate::engine::mask_cache::MaskCache;
use crate::engine::{
    allow_eos, allows_with, bool_view, check_mask_len, mask_prelude, precheck, refused, BoolView,
    ConstraintEngine, EngineError,
};
use crate::json::slices::JsonVocab;
use crate::json::syntax::{
    escape_char, hex_val, is_ws, literal_index, surrogate_pair, HIGH_SURROGATES, LITERALS,
    LOW_SURROGATES,
};
use crate::mask::TokenMask;
use crate::recognizer::Recognizer;
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

mod array;
mod completion;
mod fast;
mod object;
mod state;
mod string;
mod undo;

pub(crate) use completion::min_value_bytes;
pub(crate) use fast::SharedOpen;
/// The schema engine's state as the shared mask cache keys it.
pub(crate) type SharedMasks = crate::engine::mask_cache::SharedMasks<Arc<St>>;
/// The masks of a number's closing tokens ([`crate::json::slices::NumberClasses::rest_close`]),
/// by (address of the classes, state with the number reduced to which alternatives accept it);
/// shared by the schema's engines (`Fast::closing_tokens`).
pub(crate) type SharedClosing = crate::engine::mask_cache::SharedMasks<(usize, St)>;
use object::KeyChoices;
use state::*;
use undo::{Graves, Undo};

/// The runtime state (what the mask is a function of).
#[derive(Clone, Default, PartialEq, Eq, Hash, Debug)]
pub(crate) struct St {
    frames: Vec<Frame>,
    alts: Vec<Alt>,
    buf: Vec<u8>,
    bits: Vec<u64>,
    xk: Vec<XKey>,
    xtext: Vec<u8>,
    /// The bytes of the document while an array with `uniqueItems` is open (the items'
    /// texts, canonicalised when they complete; see [`super::unique`]).
    raw: Vec<u8>,
}

impl St {
    /// `*self = o.clone()`, reusing `self`'s allocations (a scratch key per mask, not a
    /// fresh copy of every vector).
    pub(super) fn copy_from(&mut self, o: &St) {
        self.frames.clone_from(&o.frames);
        self.alts.clone_from(&o.alts);
        self.buf.clone_from(&o.buf);
        self.bits.clone_from(&o.bits);
        self.xk.clone_from(&o.xk);
        self.xtext.clone_from(&o.xtext);
        self.raw.clone_from(&o.raw);
    }
}

/// The recogniser: state plus undo log, over a compiled schema.
struct Rt<'a> {
    cs: &'a CompiledSchema,
    st: &'a mut St,
    log: &'a mut Vec<Undo>,
    graves: &'a mut Graves,
    /// Decide numbers on their text alone, ignoring the automata ([`super::numdfa`]): the
    /// reference walk, so the fast masks are tested against an independent liveness test.
    texts: bool,
}

impl<'a> Rt<'a> {
    #[inline]
    fn prog(&self) -> &'a Program {
        &self.cs.program
    }

    fn top(&self) -> usize {
        self.st.frames.len() - 1
    }

    fn alt_range(&self, fi: usize) -> std::ops::Range<usize> {
        let start = self.st.frames[fi].alts as usize;
        let end = if fi + 1 < self.st.frames.len() {
            self.st.frames[fi + 1].alts as usize
        } else {
            self.st.alts.len()
        };
        start..end
    }

    /// `Some(accepted)` when `b` is consumed as whitespace/separator padding.
    fn ws(&mut self, fi: usize, b: u8, expect: &[u8]) -> Option<bool> {
        let f = self.st.frames[fi];
        match self.cs.ws.flexible {
            Some(max) => {
                if !is_ws(b) {
                    return None;
                }
                if f.ws >= max {
                    return Some(false);
                }
                self.set_frame(fi, Frame { ws: f.ws + 1, ..f });
                Some(true)
            }
            None => {
                if (f.ws as usize) < expect.len() && expect[f.ws as usize] == b {
                    self.set_frame(fi, Frame { ws: f.ws + 1, ..f });
                    return Some(true);
                }
                if is_ws(b) {
                    return Some(false);
                }
                None
            }
        }
    }

    /// Is the separator padding before a structural byte complete?
    fn pad_done(&self, fi: usize, expect: &[u8]) -> bool {
        self.cs.ws.flexible.is_some() || self.st.frames[fi].ws as usize == expect.len()
    }

    fn step(&mut self, b: u8) -> bool {
        if self.st.frames.iter().any(|f| f.uniq) {
            self.note_lens();
            self.st.raw.push(b);
        }
        loop {
            let fi = self.top();
            let f = self.st.frames[fi];
            return match f.kind() {
                Kind::Root => f.lex == Lex::Root { done: false } && self.value_start(fi, b),
                Kind::Obj => self.obj_byte(fi, b),
                Kind::Arr => self.arr_byte(fi, b),
                Kind::Str | Kind::Key => self.str_byte(fi, b),
                Kind::Lit => self.lit_byte(fi, b),
                Kind::Num => {
                    if matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                        self.num_extend(fi, b)
                    } else {
                        if !self.num_close(fi) {
                            return false;
                        }
                        continue;
                    }
                }
            };
        }
    }

    /// A child value completed: `mask` holds the parent alternatives it serves, `cmask` those
    /// for which it matched `contains`. `false` when no parent alternative survives (a
    /// duplicate item under `uniqueItems`).
    fn child_done(&mut self, mask: &Served, cmask: &Served) -> bool {
        let pi = self.top();
        let pf = self.st.frames[pi];
        let r = self.alt_range(pi);
        for (li, ai) in r.enumerate() {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            if !mask.has(li) {
                self.kill(ai);
            } else if pf.kind() == Kind::Arr {
                let matched = u32::from(cmask.has(li));
                let p = a.arr();
                let p = ArrProgress { items: p.items + 1, matches: p.matches + matched };
                self.set_alt(ai, a.with_arr(p));
            }
        }
        if pf.kind() == Kind::Arr && pf.uniq && !self.unique_item_done(pi) {
            return false;
        }
        let lex = match pf.lex {
            Lex::Obj(_) => Lex::Obj(ObjPhase::After),
            Lex::Arr(_) => Lex::Arr(ArrPhase::After),
            _ => Lex::Root { done: true },
        };
        self.set_frame(pi, Frame { lex, ws: 0, ..pf });
        true
    }

    fn value_start(&mut self, pi: usize, b: u8) -> bool {
        let kind = match b {
            b'{' => Kind::Obj,
            b'[' => Kind::Arr,
            b'"' => Kind::Str,
            b'-' | b'0'..=b'9' => Kind::Num,
            b't' | b'f' | b'n' => Kind::Lit,
            _ => return false,
        };
        let prog = self.prog();
        // `frames` holds the root and every open container: one more would pass the limit.
        if matches!(kind, Kind::Obj | Kind::Arr) && self.st.frames.len() > prog.max_depth {
            return false;
        }
        self.note_lens();
        let start = self.st.alts.len();
        let bits0 = self.st.bits.len() as u32;
        let pkind = self.st.frames[pi].kind();
        let r = self.alt_range(pi);
        // A `true`/`false`/`null` item is known from its first byte: a duplicate is refused
        // here, by the alternatives with `uniqueItems`.
        let puniq = pkind == Kind::Arr && self.st.frames[pi].uniq;
        let lit_dup = puniq && kind == Kind::Lit && self.seen_item(pi, &unique::literal(b));
        if puniq {
            let pf = self.st.frames[pi];
            self.set_frame(pi, Frame { item: self.st.raw.len() as u32 - 1, ..pf });
        }
        for (li, ai) in r.enumerate() {
            let pa = self.st.alts[ai];
            if !pa.alive || (lit_dup && self.is_unique(pa.core)) {
                continue;
            }
            if li >= MAX_PARENTS {
                // Unreachable under the compile limits (see `MAX_PARENTS`).
                break;
            }
            let block = (li / 64) as u16;
            let mut item_nodes: smallvec::SmallVec<[(ExprId, bool); 2]> = smallvec::SmallVec::new();
            match pkind {
                Kind::Root => item_nodes.push((prog.root, false)),
                Kind::Obj => item_nodes.push((pa.obj().value, false)),
                Kind::Arr => self.item_nodes(&pa, &mut item_nodes),
                _ => unreachable!("value in a scalar"),
            }
            for (tag, c) in
                item_nodes.iter().flat_map(|&(n, t)| prog.nodes[n].iter().map(move |&c| (t, c)))
            {
                let core = &prog.cores[c];
                let mut nstate = NUM_OVER;
                let ok = match (kind, core) {
                    (Kind::Obj, CoreRt::Object(_))
                    | (Kind::Arr, CoreRt::Array { .. })
                    | (Kind::Str, CoreRt::String { .. }) => true,
                    (Kind::Num, CoreRt::Number(n)) => {
                        if let Some(d) = self.cs.numbers.dfa(c).filter(|_| !self.texts) {
                            nstate = self.cs.numbers.step(d, NUM_START, b);
                        }
                        match nstate {
                            NUM_OVER => n.live(&[b]),
                            s => s != NUM_DEAD,
                        }
                    }
                    (Kind::Lit, CoreRt::Null) => b == b'n',
                    (Kind::Lit, CoreRt::Bool(m)) => {
                        (b == b't' && m & 2 != 0) || (b == b'f' && m & 1 != 0)
                    }
                    _ => false,
                };
                if !ok {
                    continue;
                }
                if let Some(e) = self.st.alts[start..]
                    .iter_mut()
                    .find(|e| e.core == c && e.tag == tag && e.block == block)
                {
                    e.parents |= 1 << (li % 64);
                    continue;
                }
                let mut alt = Alt::serving(c, li, tag);
                match core {
                    CoreRt::Object(o) => {
                        let seen = self.st.bits.len() as u32;
                        alt = alt.with_obj(ObjProgress { seen, ..alt.obj() });
                        let words = o.names.len().div_ceil(64).max(1);
                        self.st.bits.resize(self.st.bits.len() + words, 0);
                    }
                    CoreRt::String { dfa, .. } => {
                        let state = prog.dfas[*dfa].start();
                        alt = alt.with_str(StrProgress { state, chars: 0 });
                    }
                    CoreRt::Number(_) => alt = alt.with_num(NumProgress { state: nstate }),
                    _ => {}
                }
                self.st.alts.push(alt);
            }
        }
        if self.st.alts.len() == start {
            return false;
        }
        let uniq =
            kind == Kind::Arr && self.st.alts[start..].iter().any(|a| self.is_unique(a.core));
        // The outermost `uniqueItems` array owns the raw text recorded from here on.
        let raw_own = if uniq && !self.st.frames.iter().any(|f| f.uniq) {
            self.st.raw.len() as u32
        } else {
            NONE
        };
        let lex = match kind {
            Kind::Obj => Lex::Obj(ObjPhase::First),
            Kind::Arr => Lex::Arr(ArrPhase::First),
            Kind::Str => Lex::Str(Escape::None),
            Kind::Num => Lex::Num,
            _ => Lex::Lit { lit: literal_index(b).expect("a literal's first byte"), pos: 1 },
        };
        let frame = Frame { bits: bits0, raw: raw_own, uniq, ..self.st.open_frame(lex, start) };
        self.st.frames.push(frame);
        if kind == Kind::Num {
            self.st.buf.push(b);
        }
        if kind == Kind::Str
            && puniq
            && (!prog.unique_members.is_empty() || !prog.unique_counted.is_empty())
        {
            // A string item decided by its members or by counting needs an unseen value
            // from its first byte.
            let fi = self.st.frames.len() - 1;
            let mut any = false;
            for ai in self.alt_range(fi) {
                if !self.st.alts[ai].alive {
                    continue;
                }
                let a = self.st.alts[ai];
                if self.str_item_fresh(fi, ai, None, a.str(), true) {
                    any = true;
                } else {
                    self.kill(ai);
                }
            }
            return any;
        }
        true
    }

    /// Byte `b` where a value may start after the padding `expect`.
    fn padded_value(&mut self, fi: usize, b: u8, expect: &[u8]) -> bool {
        if let Some(ok) = self.ws(fi, b, expect) {
            return ok;
        }
        self.pad_done(fi, expect) && self.value_start(fi, b)
    }

    /// Byte `b` after a member of the object or array in frame `fi`: padding, `,` (the
    /// alternatives `more` accepts take another member) or `closer` (then `close`). Custom
    /// separators pad only the `,`.
    fn after_member(
        &mut self,
        fi: usize,
        b: u8,
        closer: u8,
        more: impl Fn(&Self, usize) -> bool,
        close: fn(&mut Self, usize) -> bool,
    ) -> bool {
        let item_pre = &self.cs.ws.item_pre;
        if let Some(ok) = self.ws(fi, b, item_pre) {
            return ok;
        }
        if b == b',' && self.pad_done(fi, item_pre) {
            return self.next_member(fi, more);
        }
        b == closer
            && (self.st.frames[fi].ws == 0 || self.cs.ws.flexible.is_some())
            && close(self, fi)
    }

    /// A `,` in the object or array of frame `fi`: the live alternatives that `more` says can
    /// take another member stay alive, the others die; with any left, the frame expects the
    /// next member. Returns whether any is left.
    fn next_member(&mut self, fi: usize, more: impl Fn(&Self, usize) -> bool) -> bool {
        let mut any = false;
        for ai in self.alt_range(fi) {
            if !self.st.alts[ai].alive {
                continue;
            }
            if more(self, ai) {
                any = true;
            } else {
                self.kill(ai);
            }
        }
        if any {
            let f = self.st.frames[fi];
            let lex = match f.lex {
                Lex::Obj(_) => Lex::Obj(ObjPhase::Key),
                _ => Lex::Arr(ArrPhase::Item),
            };
            self.set_frame(fi, Frame { lex, ws: 0, ..f });
        }
        any
    }

    /// Close the value of frame `fi`: the live alternatives for which `complete` holds tell
    /// the parent which of its alternatives survive (and, tagged, for which it matched
    /// `contains`). `false` when none is complete (the closing byte is refused).
    fn close_with(&mut self, fi: usize, complete: impl Fn(&Self, &Alt) -> bool) -> bool {
        let (mut mask, mut cmask) = (Served::default(), Served::default());
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if a.alive && complete(self, &a) {
                mask.add(&a);
                if a.tag {
                    cmask.add(&a);
                }
            }
        }
        if mask.is_empty() {
            return false;
        }
        self.pop_frame();
        self.child_done(&mask, &cmask)
    }

    fn lit_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let Lex::Lit { lit, pos } = f.lex else { unreachable!("a literal frame") };
        let text = LITERALS[lit as usize];
        if text[pos as usize] != b {
            return false;
        }
        if pos as usize + 1 < text.len() {
            self.set_frame(fi, Frame { lex: Lex::Lit { lit, pos: pos + 1 }, ..f });
            return true;
        }
        // Every live alternative took the literal's first byte, so each completes with it.
        self.close_with(fi, |_, _| true)
    }

    fn num_extend(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        self.note_lens();
        self.st.buf.push(b);
        let prog = self.prog();
        let nums = &self.cs.numbers;
        let mut any = false;
        let r = self.alt_range(fi);
        for ai in r {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            let CoreRt::Number(n) = &prog.cores[a.core] else {
                self.kill(ai);
                continue;
            };
            // The constraint's automaton while it has a state for this text; else the text.
            let s = a.num().state;
            let next = match nums.dfa(a.core) {
                Some(d) if s != NUM_OVER && !self.texts => nums.step(d, s, b),
                _ => NUM_OVER,
            };
            let live = match next {
                NUM_DEAD => false,
                NUM_OVER => n.live(&self.st.buf[f.buf as usize..]),
                _ => true,
            };
            if live && next != s {
                self.set_alt(ai, a.with_num(NumProgress { state: next }));
            }
            if live {
                any = true;
            } else {
                self.kill(ai);
            }
        }
        if any
            && fi > 0
            && self.st.frames[fi - 1].uniq
            && self.st.frames[fi - 1].kind() == Kind::Arr
        {
            return self.num_item_fresh(fi);
        }
        any
    }

    /// A number item of a `uniqueItems` array in its exponent has finitely many completions
    /// ([`unique::exponent_fresh`]): it is live if some live number alternative serves an
    /// array alternative without `uniqueItems`, or one of its values is new.
    fn num_item_fresh(&self, fi: usize) -> bool {
        let text = &self.st.buf[self.st.frames[fi].buf as usize..];
        if !text.iter().any(|&b| b == b'e' || b == b'E') {
            return true;
        }
        let pi = fi - 1;
        let mut served = Served::default();
        for ai in self.alt_range(fi).filter(|&ai| self.st.alts[ai].alive) {
            served.add(&self.st.alts[ai]);
        }
        let plain = self.alt_range(pi).enumerate().any(|(li, ai)| {
            let p = self.st.alts[ai];
            served.has(li) && p.alive && !self.is_unique(p.core)
        });
        plain || unique::exponent_fresh(text, self.seen_count(pi), |c| self.seen_item(pi, c))
    }

    /// Does some number alternative of frame `fi` accept its text as complete?
    fn num_accepted(&self, fi: usize) -> bool {
        let at = self.st.frames[fi].buf as usize;
        if !number::is_complete(&self.st.buf[at..]) {
            return false;
        }
        let mut live = self.alt_range(fi).map(|ai| self.st.alts[ai]).filter(|a| a.alive);
        live.any(|a| self.num_accepts(at, &a))
    }

    /// Does number alternative `a` accept the (complete) number text at `buf[at..]`?
    fn num_accepts(&self, at: usize, a: &Alt) -> bool {
        let CoreRt::Number(n) = &self.prog().cores[a.core] else { return false };
        match (self.cs.numbers.dfa(a.core), a.num().state) {
            (Some(d), s) if s != NUM_OVER && s != NUM_DEAD && !self.texts => {
                self.cs.numbers.accepts(d, s)
            }
            _ => n.accepts_text(&self.st.buf[at..]),
        }
    }

    /// The bytes a key at a character boundary can take when no live alternative takes
    /// undeclared keys: the next byte of each declared name the key text is a prefix of (the
    /// names of a range share the text, sorted: one byte per run), `\` where a name goes on
    /// (any character may be escaped) and `"` where one is complete. `FULL` when some
    /// alternative has an undeclared-key automaton.
    pub(super) fn key_superset(&self) -> crate::ByteSet {
        let fi = self.top();
        let pos = self.st.buf.len() - self.st.frames[fi].buf as usize;
        let mut s = crate::ByteSet::EMPTY;
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            let k = a.key();
            if k.extra != DEAD {
                return crate::ByteSet::FULL;
            }
            let names = &self.obj(a.core).names[k.lo as usize..k.hi as usize];
            let mut i = 0;
            while i < names.len() {
                let Some(&b) = names[i].get(pos) else {
                    s.insert(b'"');
                    i += 1;
                    continue;
                };
                s.insert(b);
                s.insert(b'\\');
                i += names[i..].partition_point(|n| n.get(pos) == Some(&b));
            }
        }
        s
    }

    /// Under [`crate::schema::SchemaOptions::literal_keys`]: may key frame `fi` take `\` at
    /// this position? Yes where some live alternative takes undeclared keys, or a declared
    /// name the key text is a prefix of goes on with a character JSON requires escaped.
    pub(super) fn key_may_escape(&self, fi: usize) -> bool {
        let pos = self.st.buf.len() - self.st.frames[fi].buf as usize;
        self.alt_range(fi).map(|ai| self.st.alts[ai]).filter(|a| a.alive).any(|a| {
            let k = a.key();
            k.extra != DEAD
                || self.obj(a.core).names[k.lo as usize..k.hi as usize]
                    .iter()
                    .any(|n| n.get(pos).is_some_and(|&b| b == b'"' || b == b'\\' || b < 0x20))
        })
    }

    /// Under [`crate::schema::SchemaOptions::literal_values`]: may string frame `fi` take `\`
    /// at this position? Yes where some live alternative's automaton still accepts infinitely
    /// many strings from its state, or the next character may be one JSON requires escaped
    /// (`"`, `\`, a control character).
    pub(super) fn str_may_escape(&self, fi: usize) -> bool {
        let prog = self.prog();
        let unbounded = |a: Alt| match &prog.cores[a.core] {
            CoreRt::String { dfa, .. } => prog.dfas[*dfa].finite_count(a.str().state).is_none(),
            _ => true,
        };
        self.alt_range(fi).map(|ai| self.st.alts[ai]).filter(|a| a.alive).any(unbounded)
            || self.range_live(fi, 0, 0x1F)
            || self.range_live(fi, u32::from(b'"'), u32::from(b'"'))
            || self.range_live(fi, u32::from(b'\\'), u32::from(b'\\'))
    }

    fn num_close(&mut self, fi: usize) -> bool {
        let at = self.st.frames[fi].buf as usize;
        number::is_complete(&self.st.buf[at..])
            && self.close_with(fi, |rt, a| rt.num_accepts(at, a))
    }
}

impl Recognizer for Rt<'_> {
    fn try_push_byte(&mut self, b: u8) -> bool {
        self.log.push(Undo::Mark);
        if self.step(b) {
            true
        } else {
            self.undo_byte();
            false
        }
    }

    fn pop_bytes(&mut self, n: usize) {
        for _ in 0..n {
            self.undo_byte();
        }
    }

    /// Between values, whitespace (custom separators only add whitespace) and what JSON's
    /// syntax lets the phase take: a value's first byte where a value may start, a key's
    /// quote, `:`, `,` and the closing bracket where they may come; after a complete root
    /// value, nothing. A literal takes its next letter; a number its own bytes, or
    /// (closing it) whitespace, `,`, `}` or `]`. Inside an escape, what the escape's syntax
    /// takes; a key of declared names only, [`Rt::key_superset`]; other string content:
    /// anything. The walks skip the other bytes unasked, which matters below `,`, whitespace
    /// and a key's quote, whose trie nodes have children for nearly every byte.
    fn byte_superset(&self) -> crate::ByteSet {
        use crate::ByteSet;
        const VALUE: ByteSet = ByteSet::of(b" \t\n\r\"{[-0123456789tfn");
        const FIRST_ITEM: ByteSet = ByteSet::of(b" \t\n\r\"{[-0123456789tfn]");
        const FIRST_KEY: ByteSet = ByteSet::of(b" \t\n\r\"}");
        const KEY: ByteSet = ByteSet::of(b" \t\n\r\"");
        const COLON: ByteSet = ByteSet::of(b" \t\n\r:");
        const AFTER_MEMBER: ByteSet = ByteSet::of(b" \t\n\r,}");
        const AFTER_ITEM: ByteSet = ByteSet::of(b" \t\n\r,]");
        const NUMBER: ByteSet = ByteSet::of(b" \t\n\r,}]-0123456789.eE+");
        const HEX: ByteSet = ByteSet::of(b"0123456789abcdefABCDEF");
        let f = self.st.frames.last().expect("root");
        match f.lex {
            Lex::Root { done: false } | Lex::Obj(ObjPhase::Value) | Lex::Arr(ArrPhase::Item) => {
                VALUE
            }
            Lex::Root { done: true } => ByteSet::EMPTY,
            Lex::Obj(ObjPhase::First) => FIRST_KEY,
            Lex::Obj(ObjPhase::Key) => KEY,
            Lex::Obj(ObjPhase::Colon) => COLON,
            Lex::Obj(ObjPhase::After) => AFTER_MEMBER,
            Lex::Arr(ArrPhase::First) => FIRST_ITEM,
            Lex::Arr(ArrPhase::After) => AFTER_ITEM,
            Lex::Num => NUMBER,
            Lex::Lit { lit, pos } => ByteSet::of(&[LITERALS[lit as usize][pos as usize]]),
            Lex::Key(Escape::None) => self.key_superset(),
            Lex::Str(e) | Lex::Key(e) => match e {
                Escape::None => ByteSet::FULL,
                Escape::Backslash => ByteSet::of(b"\"\\/bfnrtu"),
                Escape::Hex { .. } | Escape::LowHex { .. } => HEX,
                Escape::NeedBackslash { .. } => ByteSet::of(b"\\"),
                Escape::NeedU { .. } => ByteSet::of(b"u"),
            },
        }
    }
}

impl St {
    /// A new frame of `lex` whose alternatives start at arena index `alts` and whose other
    /// arena tails start at the arenas' current ends (owning no raw text).
    fn open_frame(&self, lex: Lex, alts: usize) -> Frame {
        Frame {
            lex,
            ws: 0,
            alts: alts as u32,
            buf: self.buf.len() as u32,
            bits: self.bits.len() as u32,
            xk: self.xk.len() as u32,
            xtext: self.xtext.len() as u32,
            raw: NONE,
            item: 0,
            uniq: false,
        }
    }

    fn initial() -> St {
        let mut st = St::default();
        let root = st.open_frame(Lex::Root { done: false }, 0);
        st.frames.push(root);
        st.alts.push(Alt::new(RtCoreId::NONE, 1, false));
        st
    }
}

/// Is the root value complete in `st` (EOS allowed)?
fn accepting(schema: &CompiledSchema, st: &St) -> bool {
    match st.frames.len() {
        1 => st.frames[0].lex == Lex::Root { done: true },
        2 if st.frames[1].kind() == Kind::Num => {
            let rt = Rt {
                cs: schema,
                st: &mut st.clone(),
                log: &mut Vec::new(),
                graves: &mut Graves::default(),
                texts: false,
            };
            rt.num_accepted(1)
        }
        _ => false,
    }
}

/// The most bytes [`SchemaConstraint`]'s `forced_bytes` reports at once.
pub(crate) const FORCED_BYTES_LIMIT: usize = 256;

/// A per-request JSON Schema engine. See the [module docs](super).
pub struct SchemaConstraint {
    schema: Arc<CompiledSchema>,
    vocab: Vocabulary,
    st: St,
    finished: bool,
    log: Vec<Undo>,
    graves: Graves,
    history: History<(St, bool)>,
    /// Keyed by (hash of the state, the state): the hash is compared first.
    /// Keys are shared with the schema's [`SharedMasks`] (one copy of a state per miss).
    cache: MaskCache<(u64, Arc<St>)>,
    view: BoolView,
    fast: fast::FastState,
    /// Where [`SchemaConstraint::number_key`] writes its key (reused from mask to mask;
    /// boxed, as the engine sits in enums of engines).
    key: Box<St>,
}

impl std::fmt::Debug for SchemaConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaConstraint")
            .field("frames", &self.st.frames.len())
            .field("finished", &self.finished)
            .finish()
    }
}

impl SchemaConstraint {
    /// A fresh engine for `schema` over `vocab`.
    pub fn new(schema: Arc<CompiledSchema>, vocab: &Vocabulary) -> SchemaConstraint {
        // Vocabulary preprocessing for the string fast paths: built once per vocabulary (tens
        // of milliseconds) and shared, like the trie; done here so no mask pays for it.
        vocab.string_classes();
        vocab.prepare_json_classes();
        let options = schema.engine.clone();
        let cache = MaskCache::new(options.mask_cache);
        SchemaConstraint {
            schema,
            vocab: vocab.clone(),
            st: St::initial(),
            finished: false,
            log: Vec::new(),
            graves: Graves::default(),
            history: History::new(options.history),
            cache,
            view: BoolView::default(),
            fast: fast::FastState::default(),
            key: Box::default(),
        }
    }

    /// Compile `schema` and start an engine.
    ///
    /// # Errors
    /// Any compile error (see [`CompiledSchema::compile`]).
    pub fn compile(
        schema: &serde_json::Value,
        vocab: &Vocabulary,
        options: &super::SchemaOptions,
    ) -> Result<SchemaConstraint, SchemaError> {
        Ok(SchemaConstraint::new(CompiledSchema::compile(schema, options)?, vocab))
    }

    /// A short description of where the engine stands (innermost open value, its phase and
    /// live alternatives), for diagnostics and benchmarks.
    pub fn context(&self) -> String {
        let f = self.st.frames.last().expect("root");
        let p = &self.schema.program;
        let mut kinds = String::new();
        for a in self.st.alts[f.alts as usize..].iter().filter(|a| a.alive) {
            let k = match p.cores.get(a.core.index()) {
                None => "root",
                Some(CoreRt::Null) => "null",
                Some(CoreRt::Bool(_)) => "bool",
                Some(CoreRt::Number(_)) => "num",
                Some(CoreRt::String { dfa, .. }) if *dfa == p.any_dfa => "str",
                Some(CoreRt::String { .. }) => "strdfa",
                Some(CoreRt::Array { .. }) => "arr",
                Some(CoreRt::Object(o)) => match &o.extra {
                    None => "obj-closed",
                    Some(x) if x.dfa == p.any_dfa => "obj-open",
                    Some(_) => "obj-pat",
                },
            };
            kinds.push_str(k);
            kinds.push(',');
        }
        format!("{:?}/{}", f.lex, kinds)
    }

    /// The compiled schema.
    pub fn schema(&self) -> &Arc<CompiledSchema> {
        &self.schema
    }

    fn rt(&mut self) -> Rt<'_> {
        Rt {
            cs: &self.schema,
            st: &mut self.st,
            log: &mut self.log,
            graves: &mut self.graves,
            texts: false,
        }
    }

    /// Feed raw bytes (not tokens). `Ok(())` if all are accepted (state advanced); otherwise
    /// the index of the first refused byte, with the state unchanged.
    ///
    /// # Errors
    /// The index of the refused byte (also a byte whose `uniqueItems` completion count ran
    /// out of its fuel: [`ConstraintEngine::advance`] reports that one as
    /// [`crate::EngineErrorKind::LimitExceeded`]).
    pub fn advance_bytes(&mut self, bytes: &[u8]) -> Result<(), usize> {
        unique::refuel();
        let mut rt = self.rt();
        for (i, &b) in bytes.iter().enumerate() {
            if !rt.try_push_byte(b) {
                rt.pop_bytes(i);
                return Err(i);
            }
        }
        self.log.clear();
        self.graves = Graves::default();
        Ok(())
    }

    /// Push one byte on the live state (the structural-tag combinator's byte probe); undone by
    /// [`SchemaConstraint::probe_pop`], and the undo log dropped by
    /// [`SchemaConstraint::probe_done`] once every probe byte is popped.
    pub(crate) fn probe_push(&mut self, b: u8) -> bool {
        unique::refuel();
        self.rt().try_push_byte(b)
    }

    /// Undo the last `n` probe pushes.
    pub(crate) fn probe_pop(&mut self, n: usize) {
        self.rt().pop_bytes(n);
    }

    /// Is the value complete after the probe bytes pushed so far?
    pub(crate) fn probe_accepting(&self) -> bool {
        self.accepting_state()
    }

    /// A hash of the state after the probe bytes pushed so far (the mask cache's): equal
    /// states have equal futures, which the fuzzer's completion search uses to cut repeats.
    pub(crate) fn probe_key(&self) -> u64 {
        Self::state_hash(&self.st)
    }

    /// A superset of the bytes a probe push may take next ([`Recognizer::byte_superset`]):
    /// the fuzzer's candidates outside it are refused without a push.
    pub(crate) fn probe_superset(&mut self) -> crate::ByteSet {
        self.rt().byte_superset()
    }

    /// A lower bound on the bytes any completion of the document needs after the probe bytes
    /// pushed so far ([`completion`]); the fuzzer's completion search cuts what cannot close
    /// within its limit.
    pub(crate) fn probe_completion_bound(&mut self) -> u32 {
        let cs = Arc::clone(&self.schema);
        let node = cs.min_bytes.get_or_init(|| min_value_bytes(&cs.program));
        self.rt().completion_bound(node)
    }

    /// The shortest rest of the string value open after the probe bytes pushed so far, with
    /// its closing quote ([`Rt::string_rest`]); the fuzzer's completion search tries it as one
    /// move.
    pub(crate) fn probe_string_rest(&mut self) -> Option<Vec<u8>> {
        self.rt().string_rest()
    }

    /// End a probe whose bytes were all popped.
    pub(crate) fn probe_done(&mut self) {
        self.log.clear();
    }

    /// Would `bytes` be accepted from the current state? (State unchanged.)
    pub fn accepts_bytes(&mut self, bytes: &[u8]) -> bool {
        let mut rt = self.rt();
        let mut n = 0;
        let mut ok = true;
        for &b in bytes {
            if !rt.try_push_byte(b) {
                ok = false;
                break;
            }
            n += 1;
        }
        rt.pop_bytes(n);
        self.log.clear();
        ok
    }

    fn accepting_state(&self) -> bool {
        accepting(&self.schema, &self.st)
    }

    fn compute(&mut self, mask: &mut TokenMask) {
        mask.clear();
        let vocab = self.vocab.clone();
        let mut rt = Rt {
            cs: &self.schema,
            st: &mut self.st,
            log: &mut self.log,
            graves: &mut self.graves,
            texts: false,
        };
        let mut fast = fast::Fast { rt: &mut rt, fast: &mut self.fast, vocab: &vocab };
        let numbers = vocab.number_classes(b"");
        if !fast.string_mask(&vocab.string_classes(), mask)
            && !numbers.is_some_and(|c| fast.number_mask(&c, b"", mask))
        {
            let json = vocab.extension::<crate::json::slices::JsonClasses>();
            let mut hook =
                fast::StringHook { fast: &mut self.fast, vocab: &vocab, classes: &json, base: b"" };
            vocab.trie().walk_hooked(&mut rt, mask, &mut hook);
        }
        self.log.clear();
        if self.accepting_state() {
            allow_eos(&self.vocab, mask);
        }
    }

    /// The mask by one plain walk of the whole vocabulary trie with the general recogniser:
    /// no slices, no fast paths, no cache. The reference the fast masks are tested against
    /// (slow: milliseconds per call).
    #[doc(hidden)]
    pub fn fill_mask_reference(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        check_mask_len(&self.vocab, mask.len())?;
        mask.clear();
        if self.finished {
            return Ok(());
        }
        let vocab = self.vocab.clone();
        unique::refuel();
        vocab.trie().walk(&mut Rt { texts: true, ..self.rt() }, mask);
        self.log.clear();
        if unique::fuel_spent() {
            return Err(fuel_error());
        }
        if self.accepting_state() {
            allow_eos(&self.vocab, mask);
        }
        Ok(())
    }

    fn state_hash(st: &St) -> u64 {
        let mut h = rustc_hash::FxHasher::default();
        st.hash(&mut h);
        h.finish()
    }

    /// Is a `uniqueItems` array open (its items' bytes are being recorded)? Then the mask
    /// also depends on the number's digits (a duplicate item cannot close).
    fn recording(&self) -> bool {
        self.st.frames.iter().any(|f| f.uniq)
    }

    /// Inside a number whose live alternatives all have automaton states
    /// ([`super::numdfa`]): the state with the number's text left out (and dead alternatives'
    /// states cleared), since the states decide everything the text would — so `1249.99` and
    /// `1387.02` under `maximum: 10000` share one cache entry. (A real state never has an empty
    /// number text, so a key cannot equal one.)
    /// Written into `self.key`; `false` when there is no such key.
    fn number_key(&mut self) -> bool {
        let f = *self.st.frames.last().expect("root");
        if f.kind() != Kind::Num || self.recording() {
            return false;
        }
        let alts = &self.st.alts[f.alts as usize..];
        if alts.iter().any(|a| a.alive && a.num().state == NUM_OVER) {
            return false;
        }
        let st = &mut self.key;
        st.copy_from(&self.st);
        st.buf.truncate(f.buf as usize);
        for a in &mut st.alts[f.alts as usize..] {
            if !a.alive {
                *a = a.with_num(NumProgress { state: NUM_DEAD });
            }
        }
        true
    }

    fn push_history(&mut self) {
        self.history.push((self.st.clone(), self.finished));
    }
}

/// A `uniqueItems` completion count ran out of its fuel ([`unique::COUNT_FUEL`]).
fn fuel_error() -> EngineError {
    EngineError::new(crate::engine::EngineErrorKind::LimitExceeded {
        limit: unique::COUNT_FUEL_NAME,
        value: unique::COUNT_FUEL as usize,
    })
}

impl ConstraintEngine for SchemaConstraint {
    fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        if mask_prelude(&self.vocab, mask, self.finished)? {
            return Ok(());
        }
        let keyed = self.number_key();
        let st = if keyed { &*self.key } else { &self.st };
        let h = Self::state_hash(st);
        if self.cache.lookup(|(hash, state)| *hash == h && **state == *st, mask) {
            return Ok(());
        }
        // Then the masks every engine of this schema has computed.
        let cap = self.schema.engine.shared_cap();
        let shared = cap > 0;
        if let Some((key, m)) =
            shared.then(|| self.schema.masks.get_with_key(&self.vocab, h, |s| **s == *st)).flatten()
        {
            mask.copy_from(&m);
            // The shared entry's key, not a copy of the state.
            self.cache.insert_arc((h, key), m);
            return Ok(());
        }
        unique::refuel();
        self.compute(mask);
        if unique::fuel_spent() {
            // A `uniqueItems` count gave up: the mask may be wrong, so none is given.
            return Err(fuel_error());
        }
        let st = Arc::new(if keyed { (*self.key).clone() } else { self.st.clone() });
        if shared {
            // One copy of the mask for both caches.
            let m = Arc::new(mask.clone());
            self.schema.masks.insert_arc(&self.vocab, h, st.clone(), m.clone(), cap);
            self.cache.insert_arc((h, st), m);
        } else {
            self.cache.insert((h, st), mask);
        }
        Ok(())
    }

    fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
        let accepting = self.accepting_state();
        if precheck(&self.vocab, token, self.finished, accepting)? {
            self.push_history();
            self.finished = true;
            return Ok(());
        }
        let vocab = self.vocab.clone();
        let bytes = vocab.token_bytes(token);
        let before = self.st.clone();
        unique::refuel();
        let r = self.advance_bytes(bytes);
        if unique::fuel_spent() {
            if r.is_ok() {
                self.st = before;
            }
            return Err(fuel_error());
        }
        match r {
            Ok(()) => {
                let after = std::mem::replace(&mut self.st, before);
                self.push_history();
                self.st = after;
                Ok(())
            }
            Err(i) => Err(refused(&self.vocab, token, i)),
        }
    }

    fn is_accepting(&self) -> bool {
        !self.finished && self.accepting_state()
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn can_only_end(&self) -> bool {
        !self.finished
            && self.st.frames.len() == 1
            && self.st.frames[0].lex == Lex::Root { done: true }
    }

    /// The bytes every completion starts with (at most `FORCED_BYTES_LIMIT` = 256), stepped on a
    /// copy of the state: structure after a fixed key, literal tails, and inside strings the
    /// characters every allowed spelling agrees on (a key's or enum member's unshared rest; see
    /// `src/forced.rs`). Stops where the document may end or two values are possible.
    fn forced_bytes(&self, out: &mut Vec<u8>) {
        out.clear();
        if self.finished {
            return;
        }
        unique::refuel();
        let mut st = self.st.clone();
        let mut log = Vec::new();
        let mut graves = Graves::default();
        let schema = &self.schema;
        let mut rt =
            Rt { cs: &self.schema, st: &mut st, log: &mut log, graves: &mut graves, texts: false };
        crate::engine::forced::forced_bytes(
            &mut rt,
            |r| accepting(schema, r.st),
            FORCED_BYTES_LIMIT,
            out,
        );
    }

    fn allows(&self, token: TokenId) -> bool {
        allows_with(&self.vocab, token, self.finished, self.accepting_state(), |bytes| {
            unique::refuel();
            let mut st = self.st.clone();
            let mut log = Vec::new();
            let mut graves = Graves::default();
            let mut rt = Rt {
                cs: &self.schema,
                st: &mut st,
                log: &mut log,
                graves: &mut graves,
                texts: false,
            };
            bytes.iter().all(|&b| rt.try_push_byte(b))
        })
    }

    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError> {
        bool_view(self, vocab_size, |e| &mut e.view)
    }

    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        if let Some((s, f)) = self.history.rewind(n)? {
            self.st = s;
            self.finished = f;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SchemaOptions;
    use crate::{EngineOptions, Whitespace};
    use serde_json::json;

    fn engine_with(schema: serde_json::Value, opts: &SchemaOptions) -> SchemaConstraint {
        static VOCAB: std::sync::OnceLock<Vocabulary> = std::sync::OnceLock::new();
        let vocab = VOCAB.get_or_init(|| Vocabulary::embedded().expect("vocab"));
        SchemaConstraint::compile(&schema, vocab, opts).expect("compiles")
    }

    fn engine(schema: serde_json::Value) -> SchemaConstraint {
        engine_with(schema, &SchemaOptions::default())
    }

    /// Is `doc` a complete, valid instance?
    fn complete(e: &SchemaConstraint, doc: &str) -> bool {
        let mut e2 = SchemaConstraint::new(e.schema().clone(), &e.vocab.clone());
        e2.advance_bytes(doc.as_bytes()).is_ok() && e2.is_accepting()
    }

    /// The fuzzer's completion bound (`probe_completion_bound`) is a lower bound: at every
    /// byte position of valid documents it is at most the bytes left. The documents are as
    /// short as their schemas allow where the bound is exact (then one byte too many fails),
    /// and also written long (whitespace, escapes, other key orders, undeclared keys); and at
    /// the start of the shortest ones it equals their length.
    #[test]
    fn completion_bound_never_exceeds_the_bytes_left() {
        let nested = json!({"type": "object", "required": ["name", "tags", "meta"],
            "properties": {"name": {"type": "string", "minLength": 3},
                "tags": {"type": "array", "minItems": 2,
                    "items": {"type": "string", "pattern": "^[a-z]{2}$"}},
                "meta": {"type": "object", "required": ["ok"],
                    "properties": {"ok": {"type": "boolean"}}}}});
        let tree = json!({"$ref": "#/$defs/n", "$defs": {"n": {"type": "object",
            "required": ["v"], "properties": {"v": {"type": "integer"},
                "kids": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/n"}}}}}});
        let cases: Vec<(serde_json::Value, Vec<&str>, Option<usize>)> = vec![
            (
                nested.clone(),
                vec![
                    r#"{"name":"abc","tags":["aa","bb"],"meta":{"ok":true}}"#,
                    r#"{"meta":{"ok":true},"tags":["aa","bb"],"name":"abc"}"#,
                    r#"{"tags":["aa","bb","cc"],"name":"abc","meta":{"ok":true},"x":1}"#,
                    "{ \"n\\u0061me\" : \"ab\\u00e9\" ,\n \"tags\": [ \"aa\" , \"bb\" ],\
                     \"meta\": {\"ok\": false, \"y\": []} }",
                ],
                Some(52),
            ),
            (
                json!({"type": "array", "prefixItems": [{"const": "xyz"}, {"type": "integer"}],
                    "minItems": 3, "items": {"type": "null"}}),
                vec![r#"["xyz",0,null]"#, r#"[ "xyz" , -12.5e3 , null , null ]"#],
                Some(14),
            ),
            (
                tree,
                vec![r#"{"v":1}"#, r#"{"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]}"#],
                Some(7),
            ),
            (
                json!({"anyOf": [{"type": "object", "required": ["aaaaaaaaaa"]},
                    {"type": "object", "required": ["b"]}]}),
                vec![r#"{"b":0}"#, r#"{"aaaaaaaaaa":0}"#, r#"{"a":1,"b":0}"#],
                Some(7),
            ),
            (
                json!({"type": "object", "minProperties": 3}),
                vec![r#"{"":0,"a":0,"b":0}"#, r#"{"abc":{"d":[]},"":0,"e":"f"}"#],
                None,
            ),
            (
                json!({"type": "string", "minLength": 2}),
                vec![r#""\u00e9\n""#, r#""\ud83d\ude00x""#, r#""ab""#],
                Some(4),
            ),
            // Three CJK characters are nine bytes, not three.
            (
                json!({"type": "string", "pattern": "^[\u{4e00}-\u{9fff}]{3}$"}),
                vec!["\"中文字\"", r#""\u4e2d\u6587\u5b57""#],
                Some(11),
            ),
            (json!({"enum": ["hello", "hi"]}), vec![r#""hi""#, r#""hello""#], Some(4)),
            (json!({"type": "boolean"}), vec!["true", "false"], Some(4)),
            (json!({"type": "null"}), vec!["null"], Some(4)),
            (
                json!({"type": "array", "uniqueItems": true, "minItems": 2,
                    "items": {"enum": ["a", "b", "c"]}}),
                vec![r#"["a","b"]"#, r#"[ "c" , "a" , "b" ]"#],
                Some(9),
            ),
        ];
        let mut checked = 0;
        for (schema, docs, at_start) in cases {
            for doc in docs {
                let mut e = engine(schema.clone());
                let bytes = doc.as_bytes();
                for i in 0..=bytes.len() {
                    let bound = e.probe_completion_bound() as usize;
                    assert!(
                        bound <= bytes.len() - i,
                        "{doc:?} at {i} ({:?} next): bound {bound}, {} bytes left",
                        String::from_utf8_lossy(&bytes[i..]),
                        bytes.len() - i
                    );
                    if i == 0 {
                        if let Some(n) = at_start {
                            assert_eq!(bound, n, "{schema} at the start");
                        }
                    }
                    checked += 1;
                    if i < bytes.len() {
                        e.advance_bytes(&bytes[i..=i])
                            .unwrap_or_else(|_| panic!("{doc:?} refused at {i}"));
                    }
                }
                assert!(e.is_accepting(), "{doc:?} incomplete");
            }
        }
        assert!(checked > 500, "{checked}");
    }

    /// `byte_superset` is a superset: at every byte position of documents over schemas that
    /// reach each lexical phase (roots of every kind, empty and nested containers, numbers
    /// before `,`, `}`, `]` and at the end, literals, custom separators and compact
    /// whitespace), every byte the recogniser takes is in it. (The trie walks skip bytes
    /// outside it unasked, the reference walk too, so the mask tests cannot catch a byte
    /// missing from it.) And it is tight where the walks spend their time: after an object
    /// member only whitespace, `,` and `}`; after a complete root value nothing.
    #[test]
    fn byte_superset_holds_every_byte_the_recogniser_takes() {
        let any = json!({});
        let obj = json!({"type": "object", "properties": {"a": {"type": "array",
            "items": {"type": ["number", "string", "boolean", "null", "object"]}},
            "n": {"type": "integer"}}});
        let cases: Vec<(serde_json::Value, SchemaOptions, Vec<&str>)> = vec![
            (
                any.clone(),
                SchemaOptions::default(),
                vec![
                    r#"{ "a" : [ 1 , -2.5e+3 , [ ] , { } , true , false , null , "x\"y" ] }"#,
                    "[1,[2,[3]],{\"k\":{}}]",
                    r#"{"\ud83d\ude00": "\uD83D\uDE00x\n\/"}"#,
                    "12",
                    "-0.5E-7",
                    "\"s\"",
                    "true",
                    "[ ]",
                    "{}",
                ],
            ),
            (
                obj.clone(),
                SchemaOptions::default(),
                vec![r#"{"a": [1, "b", true, null, {"c": 2}], "n": 3}"#, r#"{ "n" : 7 }"#],
            ),
            (
                obj.clone(),
                SchemaOptions::default().with_whitespace(Whitespace::Compact),
                vec![r#"{"a":[1,"b",false],"n":3}"#],
            ),
            (
                json!({"type": "object", "additionalProperties": false, "properties": {
                    "ab": {}, "abc": {}, "abd": {}, "bé": {}, "q\"q": {}, "": {},
                    "z": {"type": "object", "properties": {"k": {}}}}}),
                SchemaOptions::default(),
                vec![
                    r#"{"ab": 1, "abc": 2, "\u0061bd": 3, "b\u00e9": 4, "q\"q": 5, "": 6, "z": {"k": 7, "\u006b2": 8}}"#,
                    r#"{"\u0062\u00E9": [], "a\u0062c": null}"#,
                ],
            ),
            (
                obj,
                SchemaOptions::default().with_whitespace(Whitespace::Separators {
                    item: ",\n ".into(),
                    key: " : ".into(),
                }),
                vec!["{\"a\" : [1,\n 2],\n \"n\" : 3}"],
            ),
        ];
        let mut checked = 0;
        for (schema, opts, docs) in cases {
            for doc in docs {
                let mut e = engine_with(schema.clone(), &opts);
                for (i, &b) in doc.as_bytes().iter().chain(std::iter::once(&b'\n')).enumerate() {
                    let mut rt = e.rt();
                    let set = rt.byte_superset();
                    for x in 0..=255u8 {
                        if rt.try_push_byte(x) {
                            rt.pop_bytes(1);
                            assert!(
                                set.contains(x),
                                "{doc:?} at {i}: {:?} taken, not in the set",
                                x as char
                            );
                        }
                    }
                    checked += 1;
                    e.log.clear();
                    if i == doc.len() {
                        break;
                    }
                    e.advance_bytes(&[b]).unwrap_or_else(|_| panic!("{doc:?} refused at {i}"));
                }
            }
        }
        assert!(checked > 200, "{checked}");
        let mut e = engine(json!({"type": "object"}));
        e.advance_bytes(b"{\"a\": 1").unwrap();
        e.advance_bytes(b" ").unwrap();
        assert_eq!(e.rt().byte_superset(), crate::ByteSet::of(b" \t\n\r,}"));
        e.advance_bytes(b"}").unwrap();
        assert_eq!(e.rt().byte_superset(), crate::ByteSet::EMPTY);
        let mut e = engine(json!({"type": "object", "additionalProperties": false,
            "properties": {"abc": {}, "abd": {}, "x": {}}}));
        e.advance_bytes(b"{\"a").unwrap();
        assert_eq!(e.rt().byte_superset(), crate::ByteSet::of(b"b\\"));
        e.advance_bytes(b"\\").unwrap();
        assert_eq!(e.rt().byte_superset(), crate::ByteSet::of(b"\"\\/bfnrtu"));
    }

    /// `plain_integers`: an `integer` takes `-?(0|[1-9][0-9]*)` only, at every depth and under
    /// bounds, while `number` keeps every spelling; by default `integer` takes every spelling
    /// of an integer value (`1.0`, `1e3`, `10.0E-1`).
    #[test]
    fn plain_integers_take_plain_literals_only() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 2000},
            "x": {"type": "number"},
            "a": {"type": "array", "items": {"type": "integer"}}}});
        let plain = SchemaOptions::default().with_plain_integers(true);
        let doc = |opts: &SchemaOptions, text: &str| {
            let mut e = engine_with(schema.clone(), opts);
            e.advance_bytes(text.as_bytes()).is_ok() && e.accepting_state()
        };
        for ok in [r#"{"n": 12}"#, r#"{"n": 2000, "x": 1.5e3}"#, r#"{"a": [0, -7, 10]}"#] {
            assert!(doc(&plain, ok), "{ok}");
            assert!(doc(&SchemaOptions::default(), ok), "{ok}");
        }
        for spelled in [r#"{"n": 1.0}"#, r#"{"n": 1e3}"#, r#"{"n": 10.0E-1}"#, r#"{"a": [2.0]}"#] {
            assert!(!doc(&plain, spelled), "{spelled} is refused under plain_integers");
            assert!(doc(&SchemaOptions::default(), spelled), "{spelled} is an integer value");
        }
        // The prefix that started the loop a model fell into is refused at once.
        let mut e = engine_with(schema.clone(), &plain);
        assert!(e.advance_bytes(b"{\"n\": 1.").is_err());
        assert!(e.advance_bytes(b"{\"n\": 1").is_ok());
    }

    /// The fuzzer's string move: the shortest rest of the open string as JSON spells it (a
    /// quote, a backslash, a control character escaped), which completes the value.
    #[test]
    fn string_rest_is_the_shortest_accepted_rest_spelled_as_json() {
        let rest = |schema: serde_json::Value, prefix: &str| {
            let mut e = engine(schema);
            e.advance_bytes(prefix.as_bytes()).unwrap();
            let r = e.probe_string_rest();
            if let Some(r) = &r {
                e.advance_bytes(r).unwrap();
                assert!(e.accepting_state(), "{prefix}{}", String::from_utf8_lossy(r));
            }
            r.map(|r| String::from_utf8(r).unwrap())
        };
        let s = |p: &str| json!({"type": "string", "pattern": p});
        assert_eq!(rest(s("^ab(cd)*$"), "\"a").as_deref(), Some("b\""));
        assert_eq!(rest(s("^ab(cd)*$"), "\"abc").as_deref(), Some("d\""));
        assert_eq!(rest(s("^x\"y$"), "\"x").as_deref(), Some("\\\"y\""));
        assert_eq!(rest(s("^x\\\\$"), "\"x").as_deref(), Some("\\\\\""));
        assert_eq!(rest(s("^x\\ty$"), "\"x").as_deref(), Some("\\u0009y\""));
        let long = json!({"type": "string", "minLength": 3, "maxLength": 5});
        assert_eq!(rest(long.clone(), "\"z").as_deref(), Some("aa\""));
        assert_eq!(rest(long, "\"zzzz").as_deref(), Some("\""));
        // Not inside a string value, or inside an escape: no move.
        assert_eq!(rest(json!({"type": "array"}), "["), None);
        assert_eq!(rest(s("^ab$"), "\"a\\"), None);
    }

    /// `literal_keys`: in an object that takes only its declared keys, a name is spelled as
    /// written (an escape only where the name's character needs one); objects that take other
    /// keys, and the default, keep every spelling.
    #[test]
    fn literal_keys_spell_declared_names_as_written() {
        let closed = json!({"type": "object", "additionalProperties": false,
            "properties": {"color": {"type": "string"}, "a\"b": {"type": "integer"}}});
        let open = json!({"type": "object", "properties": {"color": {"type": "string"}}});
        let literal = SchemaOptions::default().with_literal_keys(true);
        let doc = |schema: &serde_json::Value, opts: &SchemaOptions, text: &str| {
            let mut e = engine_with(schema.clone(), opts);
            e.advance_bytes(text.as_bytes()).is_ok() && e.accepting_state()
        };
        let escaped = r#"{"colo\u0072": "x"}"#;
        assert!(doc(&closed, &literal, r#"{"color": "x"}"#));
        assert!(!doc(&closed, &literal, escaped), "an escape the name does not need");
        assert!(!doc(&closed, &literal, r#"{"\u0063olor": "x"}"#));
        assert!(doc(&closed, &literal, r#"{"a\"b": 1}"#), "an escape the name needs");
        assert!(doc(&closed, &SchemaOptions::default(), escaped), "any spelling by default");
        assert!(doc(&open, &literal, escaped), "an object that takes other keys");
        // Refused at the backslash itself.
        let mut e = engine_with(closed.clone(), &literal);
        assert!(e.advance_bytes(br#"{"colo\"#).is_err());
    }

    /// `literal_values`: a string value with finitely many choices left is spelled as written
    /// (an escape only where its next character needs one); a string that may still go on
    /// without bound, any alternative of that kind, and the default keep every spelling.
    #[test]
    fn literal_values_spell_enum_members_as_written() {
        let literal = SchemaOptions::default().with_literal_values(true);
        let doc = |schema: serde_json::Value, opts: &SchemaOptions, text: &str| {
            let mut e = engine_with(schema, opts);
            e.advance_bytes(text.as_bytes()).is_ok() && e.accepting_state()
        };
        let colors = json!({"enum": ["red", "purple", "a\"b", "tab\there", 3]});
        assert!(doc(colors.clone(), &literal, r#""purple""#));
        assert!(!doc(colors.clone(), &literal, r#""p\u0075rple""#), "an escape not needed");
        assert!(!doc(colors.clone(), &literal, r#""purpl\u0065""#));
        assert!(doc(colors.clone(), &literal, r#""a\"b""#), "an escape the member needs");
        assert!(doc(colors.clone(), &literal, r#""tab\there""#));
        assert!(doc(colors.clone(), &literal, "3"));
        assert!(doc(colors.clone(), &SchemaOptions::default(), r#""p\u0075rple""#));
        assert!(doc(json!({"const": "red"}), &literal, r#""red""#));
        assert!(!doc(json!({"const": "red"}), &literal, r#""r\u0065d""#));
        // A finite pattern is a finite language too; an unbounded one keeps every spelling.
        let finite = json!({"type": "string", "pattern": "^(ab|cd)$"});
        assert!(!doc(finite.clone(), &literal, r#""\u0061b""#));
        assert!(doc(finite, &literal, r#""ab""#));
        let open = json!({"type": "string", "pattern": "^a"});
        assert!(doc(open, &literal, r#""a\u0062c""#));
        assert!(doc(json!({"type": "string"}), &literal, r#""\u0061""#));
        // Finite from here: after `x` only `y` is left, although the pattern started open.
        let tail = json!({"type": "string", "pattern": "^(a.*|xy)$"});
        assert!(doc(tail.clone(), &literal, r#""a\u0062""#));
        assert!(!doc(tail, &literal, r#""x\u0079""#));
        // One live alternative that is not finite: every spelling.
        let either = json!({"anyOf": [{"enum": ["red"]}, {"type": "string", "maxLength": 8}]});
        assert!(doc(either, &literal, r#""r\u0065d""#));
        // Refused at the backslash itself.
        let mut e = engine_with(colors, &literal);
        assert!(e.advance_bytes(br#""pur\"#).is_err());
    }

    /// The masks all engines of a compiled schema share: a second engine on a document with
    /// the same states (other digits of a bounded number) adds nothing and gets the walk's
    /// masks; `mask_cache: 0` keeps the shared cache off too; `shared_masks` bounds it.
    #[test]
    fn shared_masks_serve_later_engines_and_obey_their_options() {
        let vocab = Vocabulary::embedded().expect("vocab");
        let schema = json!({"type": "object", "properties": {
            "price": {"type": "number", "minimum": 0, "maximum": 10000},
            "qty": {"type": "integer", "minimum": 1, "maximum": 99}}});
        let walk = |e: &mut SchemaConstraint, doc: &str| {
            let mut m = TokenMask::new(vocab.n_vocab());
            let mut r = TokenMask::new(vocab.n_vocab());
            for t in vocab.encode_exact(doc).expect("encodes") {
                e.fill_mask(&mut m).expect("mask");
                e.fill_mask_reference(&mut r).expect("reference");
                assert_eq!(m, r, "{doc}: mask differs from the walk");
                e.advance(t).expect("allowed");
            }
        };
        let compiled = |engine: EngineOptions| {
            let opts = SchemaOptions { engine, ..SchemaOptions::default() };
            CompiledSchema::compile(&schema, &opts).expect("compiles")
        };
        let cs = compiled(EngineOptions::default());
        walk(&mut SchemaConstraint::new(cs.clone(), &vocab), r#"{"price": 1249.99, "qty": 12}"#);
        let n = cs.masks.len();
        assert!(n > 5, "{n} shared masks");
        walk(&mut SchemaConstraint::new(cs.clone(), &vocab), r#"{"price": 1387.02, "qty": 13}"#);
        assert_eq!(cs.masks.len(), n, "the second document's states were all shared");
        let off = compiled(EngineOptions::default().with_mask_cache(0));
        walk(&mut SchemaConstraint::new(off.clone(), &vocab), r#"{"price": 1, "qty": 2}"#);
        assert_eq!(off.masks.len(), 0);
        let small = compiled(EngineOptions::default().with_shared_masks(3));
        walk(&mut SchemaConstraint::new(small.clone(), &vocab), r#"{"price": 1249.99, "qty": 12}"#);
        assert!(small.masks.len() <= 3);
    }

    #[test]
    fn escapes_decode_into_the_string_automaton() {
        let mut e = engine(json!({"enum": ["é😀", "\"/"]}));
        assert!(complete(&e, r#""\u00e9\ud83d\ude00""#));
        assert!(complete(&e, r#""\u00E9😀""#));
        assert!(complete(&e, r#""\"\/""#));
        // The first byte a value cannot continue with is refused, and the state is unchanged.
        assert_eq!(e.advance_bytes(br#""\u00e8"#), Err(6));
        assert_eq!(e.advance_bytes(br#""x"#), Err(1));
        assert!(e.advance_bytes(b"\"").is_ok());
        assert_eq!(e.st.frames.last().map(|f| f.lex), Some(Lex::Str(Escape::None)));
    }

    #[test]
    fn surrogate_escapes_are_paired() {
        let mut e = engine(json!({"type": "string"}));
        assert!(complete(&e, r#""\ud83d\ude00""#));
        // A lone low surrogate, a high one without its pair, a pair in the wrong order.
        assert!(!e.accepts_bytes(br#""\udc00"#));
        assert!(!e.accepts_bytes(br#""\ud83dx"#));
        assert!(!e.accepts_bytes(br#""\ud83d\u0041"#));
        assert!(e.advance_bytes(br#""\ud83d\"#).is_ok());
        let f = e.st.frames.last().unwrap().lex;
        assert_eq!(f, Lex::Str(Escape::NeedU { high: 0xD83D }));
    }

    #[test]
    fn literals_and_numbers_close_on_the_byte_after() {
        let mut e = engine(json!({"type": "array", "items": {"enum": [true, null, 12]}}));
        assert!(complete(&e, "[true,null,12]"));
        assert!(!complete(&e, "[false]"));
        assert!(!complete(&e, "[1]"));
        assert!(e.advance_bytes(b"[nu").is_ok());
        assert_eq!(e.st.frames.last().unwrap().lex, Lex::Lit { lit: 2, pos: 2 });
    }

    #[test]
    fn objects_walk_their_phases() {
        let mut e = engine(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
            "additionalProperties": false
        }));
        let phase = |e: &SchemaConstraint| e.st.frames.last().unwrap().lex;
        assert!(e.advance_bytes(b"{").is_ok());
        assert_eq!(phase(&e), Lex::Obj(ObjPhase::First));
        assert!(e.advance_bytes(b"\"a\"").is_ok());
        assert_eq!(phase(&e), Lex::Obj(ObjPhase::Colon));
        // The object alternative has read its key: one member, the value node chosen.
        let obj = e.st.alts[e.st.frames[1].alts as usize].obj();
        assert_eq!(obj.members, 1);
        assert_ne!(obj.value, ExprId::NONE);
        assert!(e.advance_bytes(b": 1").is_ok());
        // No key can follow: the `,` that would open one is refused (after closing the number).
        assert_eq!(e.advance_bytes(b",\"b"), Err(0));
        assert!(e.advance_bytes(b"}").is_ok());
        assert!(e.is_accepting());
        assert!(!complete(&e, "{}"));
    }

    #[test]
    fn separators_are_exact() {
        let opts = SchemaOptions {
            whitespace: Whitespace::Separators { item: ", ".into(), key: ": ".into() },
            ..SchemaOptions::default()
        };
        let e = engine_with(json!({"type": "array", "items": {"type": "object"}}), &opts);
        assert!(complete(&e, r#"[{"a": 1}, {}]"#));
        assert!(!complete(&e, r#"[{"a":1}]"#));
        assert!(!complete(&e, r#"[{}  ,{}]"#));
    }

    #[test]
    fn string_lengths_count_code_points() {
        let mut e = engine(json!({"type": "string", "minLength": 2, "maxLength": 2}));
        assert!(complete(&e, r#""éa""#));
        assert!(!complete(&e, r#""é""#));
        assert!(e.advance_bytes("\"é".as_bytes()).is_ok());
        let s = e.st.alts[e.st.frames[1].alts as usize].str();
        assert_eq!(s.chars, 1);
        assert_eq!(e.advance_bytes(b"ab"), Err(1));
    }
}
