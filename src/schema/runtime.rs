//! The per-request schema recogniser and its [`ConstraintEngine`].
//!
//! State: a stack of open values ([`Frame`]s: the root, objects, arrays, strings, keys,
//! numbers, literals). Each frame owns a slice of [`Alt`]s in one arena: the alternative cores
//! still alive for that value, with their progress (seen keys, item index, automaton state,
//! character count) and a bitmask of the parent's alternatives they serve. A value that
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
//! Still slow (FIXME, issue 3): bounded numbers walk their number-only tokens with the
//! decimal liveness test on each (~150 µs); the first visit of a permissive automaton state
//! walks the plain-token trie once (~1–3 ms, then shared by all engines of the schema);
//! object feasibility checks (`completable_after`) are linear in the declared names.

use super::compile::{contains_feasible, CoreRt, ObjRt, Program};
use super::number;
use super::string::DEAD;
use super::unique;
use super::{CompiledSchema, PropertyOrder, SchemaError};
use crate::engine::{
    allow_eos, check_mask_len, precheck, refused, BoolView, ConstraintEngine, EngineError,
};
use crate::history::History;
use crate::json::syntax::{
    escape_char, hex_val, is_ws, literal_index, surrogate_pair, HIGH_SURROGATES, LITERALS,
    LOW_SURROGATES,
};
use crate::mask::TokenMask;
use crate::mask_cache::MaskCache;
use crate::recognizer::Recognizer;
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

mod fast;
pub(crate) use fast::SharedOpen;

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Alt {
    core: u32,
    parents: u64,
    a: u32,
    b: u32,
    c: u32,
    d: u32,
    alive: bool,
    /// An item alternative from `item ∧ contains`: its survival counts a match.
    tag: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Root,
    Obj,
    Arr,
    Str,
    Key,
    Num,
    Lit,
}

// String escape modes.
const E_NORMAL: u8 = 0;
const E_BS: u8 = 1;
const E_HEX: u8 = 2;
const E_NEED_BS: u8 = 3;
const E_NEED_U: u8 = 4;
const E_HEX_LOW: u8 = 5;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Frame {
    kind: Kind,
    phase: u8,
    ws: u8,
    esc: u8,
    hexn: u8,
    hexv: u16,
    high: u16,
    alts: u32,
    buf: u32,
    bits: u32,
    xk: u32,
    xtext: u32,
    /// Offset of this frame's tail of the raw-text arena.
    raw: u32,
    /// Arrays with `uniqueItems`: raw-text offset where the current item started.
    item: u32,
    /// An array some of whose alternatives have `uniqueItems` (raw text is recorded while
    /// such a frame is open).
    uniq: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct XKey {
    alt: u32,
    start: u32,
    len: u32,
}

#[derive(Clone, Copy, Debug)]
enum Undo {
    Mark,
    Frame(u32, Frame),
    Alt(u32, Alt),
    Bit(u32, u64),
    Len { frames: u32, alts: u32, buf: u32, bits: u32, xk: u32, xtext: u32, raw: u32 },
    Restore { alts: u32, buf: u32, bits: u32, xk: u32, xtext: u32, raw: u32 },
}

/// The runtime state (what the mask is a function of).
#[derive(Clone, Default, PartialEq, Eq, Hash, Debug)]
struct St {
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

#[derive(Default)]
struct Graves {
    frames: Vec<Frame>,
    alts: Vec<Alt>,
    buf: Vec<u8>,
    bits: Vec<u64>,
    xk: Vec<XKey>,
    xtext: Vec<u8>,
    raw: Vec<u8>,
}

/// The recogniser: state plus undo log, over a compiled schema.
struct Rt<'a> {
    cs: &'a CompiledSchema,
    st: &'a mut St,
    log: &'a mut Vec<Undo>,
    graves: &'a mut Graves,
}

fn utf8(cp: u32, out: &mut [u8; 4]) -> &[u8] {
    match char::from_u32(cp) {
        Some(c) => c.encode_utf8(out).as_bytes(),
        None => &out[..0],
    }
}

/// Decode the code point of `s` starting at byte `i` (valid UTF-8 assumed).
fn cp_at(s: &[u8], i: usize) -> Option<u32> {
    std::str::from_utf8(&s[i..]).ok().and_then(|t| t.chars().next()).map(|c| c as u32)
}

impl<'a> Rt<'a> {
    #[inline]
    fn prog(&self) -> &'a Program {
        &self.cs.program
    }

    // ---- logged mutations ----

    fn lens(&self) -> Undo {
        Undo::Len {
            frames: self.st.frames.len() as u32,
            alts: self.st.alts.len() as u32,
            buf: self.st.buf.len() as u32,
            bits: self.st.bits.len() as u32,
            xk: self.st.xk.len() as u32,
            xtext: self.st.xtext.len() as u32,
            raw: self.st.raw.len() as u32,
        }
    }

    fn set_frame(&mut self, i: usize, f: Frame) {
        self.log.push(Undo::Frame(i as u32, self.st.frames[i]));
        self.st.frames[i] = f;
    }

    fn set_alt(&mut self, i: usize, a: Alt) {
        self.log.push(Undo::Alt(i as u32, self.st.alts[i]));
        self.st.alts[i] = a;
    }

    fn kill(&mut self, i: usize) {
        let mut a = self.st.alts[i];
        a.alive = false;
        self.set_alt(i, a);
    }

    fn set_bit(&mut self, w: usize, v: u64) {
        self.log.push(Undo::Bit(w as u32, self.st.bits[w]));
        self.st.bits[w] = v;
    }

    /// Log current lengths (before appending anything this step).
    fn note_lens(&mut self) {
        let l = self.lens();
        self.log.push(l);
    }

    /// Remove the top frame and its arena tails (to the graveyards).
    fn pop_frame(&mut self) {
        let f = self.st.frames.pop().expect("frame");
        self.graves.frames.push(f);
        let na = self.st.alts.len() - f.alts as usize;
        self.graves.alts.extend(self.st.alts.drain(f.alts as usize..));
        let nb = self.st.buf.len() - f.buf as usize;
        self.graves.buf.extend(self.st.buf.drain(f.buf as usize..));
        let nw = self.st.bits.len() - f.bits as usize;
        self.graves.bits.extend(self.st.bits.drain(f.bits as usize..));
        let nx = self.st.xk.len() - f.xk as usize;
        self.graves.xk.extend(self.st.xk.drain(f.xk as usize..));
        let nt = self.st.xtext.len() - f.xtext as usize;
        self.graves.xtext.extend(self.st.xtext.drain(f.xtext as usize..));
        // Only the outermost `uniqueItems` array owns raw text (`NONE` elsewhere).
        let nr = if f.raw == NONE { 0 } else { self.st.raw.len() - f.raw as usize };
        if f.raw != NONE {
            self.graves.raw.extend(self.st.raw.drain(f.raw as usize..));
        }
        self.log.push(Undo::Restore {
            alts: na as u32,
            buf: nb as u32,
            bits: nw as u32,
            xk: nx as u32,
            xtext: nt as u32,
            raw: nr as u32,
        });
    }

    fn undo_one(&mut self) -> bool {
        let u = self.log.pop().expect("undo log");
        match u {
            Undo::Mark => return true,
            Undo::Frame(i, f) => self.st.frames[i as usize] = f,
            Undo::Alt(i, a) => self.st.alts[i as usize] = a,
            Undo::Bit(i, w) => self.st.bits[i as usize] = w,
            Undo::Len { frames, alts, buf, bits, xk, xtext, raw } => {
                self.st.raw.truncate(raw as usize);
                self.st.frames.truncate(frames as usize);
                self.st.alts.truncate(alts as usize);
                self.st.buf.truncate(buf as usize);
                self.st.bits.truncate(bits as usize);
                self.st.xk.truncate(xk as usize);
                self.st.xtext.truncate(xtext as usize);
            }
            Undo::Restore { alts, buf, bits, xk, xtext, raw } => {
                fn back<T>(dst: &mut Vec<T>, src: &mut Vec<T>, n: u32) {
                    let at = src.len() - n as usize;
                    dst.extend(src.drain(at..));
                }
                back(&mut self.st.alts, &mut self.graves.alts, alts);
                back(&mut self.st.buf, &mut self.graves.buf, buf);
                back(&mut self.st.bits, &mut self.graves.bits, bits);
                back(&mut self.st.xk, &mut self.graves.xk, xk);
                back(&mut self.st.xtext, &mut self.graves.xtext, xtext);
                back(&mut self.st.raw, &mut self.graves.raw, raw);
                let f = self.graves.frames.pop().expect("grave frame");
                self.st.frames.push(f);
            }
        }
        false
    }

    fn undo_byte(&mut self) {
        while !self.undo_one() {}
    }

    // ---- helpers ----

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

    fn obj(&self, core: u32) -> &'a ObjRt {
        match &self.prog().cores[core as usize] {
            CoreRt::Object(o) => o,
            _ => unreachable!("object core expected"),
        }
    }

    fn seen(&self, alt: &Alt, idx: usize) -> bool {
        (self.st.bits[alt.b as usize + idx / 64] >> (idx % 64)) & 1 == 1
    }

    fn schema_order(&self) -> bool {
        self.cs.order == PropertyOrder::Schema
    }

    /// Seen undeclared keys of object alt `ai` (in frame `fi`) that start with `prefix`.
    fn seen_extra_with_prefix(&self, fi: usize, ai: usize, prefix: &[u8]) -> u32 {
        let f = &self.st.frames[fi];
        self.st.xk[f.xk as usize..]
            .iter()
            .filter(|x| {
                x.alt as usize == ai
                    && self.st.xtext[x.start as usize..(x.start + x.len) as usize]
                        .starts_with(prefix)
            })
            .count() as u32
    }

    /// Has object alt `ai` (in frame `fi`) already seen the undeclared key `key`?
    fn seen_extra(&self, fi: usize, ai: usize, key: &[u8]) -> bool {
        let f = &self.st.frames[fi];
        self.st.xk[f.xk as usize..].iter().any(|x| {
            x.alt as usize == ai
                && &self.st.xtext[x.start as usize..(x.start + x.len) as usize] == key
        })
    }

    /// Remaining undeclared keys (`u32::MAX` = unbounded).
    fn extra_supply(&self, fi: usize, ai: usize, o: &ObjRt) -> u32 {
        match &o.extra {
            None => 0,
            Some(x) => {
                let d = &self.prog().dfas[x.dfa as usize];
                match d.finite_count(d.start()) {
                    None => u32::MAX,
                    Some(n) => n.saturating_sub(self.seen_extra_with_prefix(fi, ai, &[])),
                }
            }
        }
    }

    /// Can the object still be completed after adding key `choice` (declared index, or `None`
    /// for an undeclared key)?
    fn completable_after(&self, fi: usize, ai: usize, choice: Option<usize>) -> bool {
        let alt = self.st.alts[ai];
        let o = self.obj(alt.core);
        let schema = self.schema_order();
        if !o.has_deps && o.max == u32::MAX && !schema && o.min == 0 {
            return true;
        }
        let count = alt.a + 1;
        let last = match choice {
            Some(i) if schema => o.props[i].order + 1,
            _ => alt.c,
        };
        let n = o.names.len();
        let mut need: smallvec::SmallVec<[bool; 64]> = smallvec::smallvec![false; n];
        let is_in = |i: usize, need: &[bool]| self.seen(&alt, i) || Some(i) == choice || need[i];
        for &r in &o.required {
            if !is_in(r as usize, &need) {
                need[r as usize] = true;
            }
        }
        if o.has_deps {
            loop {
                let mut changed = false;
                for i in 0..n {
                    if is_in(i, &need) {
                        for &d in &o.props[i].deps {
                            if !is_in(d as usize, &need) {
                                need[d as usize] = true;
                                changed = true;
                            }
                        }
                    }
                }
                if !changed {
                    break;
                }
            }
        }
        let mut needed = 0u32;
        for (i, &nd) in need.iter().enumerate() {
            if nd {
                needed += 1;
                if schema && o.props[i].order < last {
                    return false;
                }
            }
        }
        if u64::from(count) + u64::from(needed) > u64::from(o.max) {
            return false;
        }
        if o.min > count {
            let mut avail: u64 = 0;
            for i in 0..n {
                if !o.props[i].forbidden
                    && !self.seen(&alt, i)
                    && Some(i) != choice
                    && (!schema || o.props[i].order >= last)
                {
                    avail += 1;
                }
            }
            let sup = self.extra_supply(fi, ai, o);
            let sup = if choice.is_none() && sup != u32::MAX { sup.saturating_sub(1) } else { sup };
            if sup != u32::MAX {
                avail += u64::from(sup);
                if u64::from(count) + avail < u64::from(o.min) {
                    return false;
                }
            }
        }
        true
    }

    fn name_ok(&self, fi: usize, ai: usize, idx: usize) -> bool {
        let alt = self.st.alts[ai];
        let o = self.obj(alt.core);
        !o.props[idx].forbidden
            && !self.seen(&alt, idx)
            && (!self.schema_order() || o.props[idx].order >= alt.c)
            && self.completable_after(fi, ai, Some(idx))
    }

    fn extra_ok(&self, fi: usize, ai: usize) -> bool {
        let o = self.obj(self.st.alts[ai].core);
        o.extra.is_some()
            && self.extra_supply(fi, ai, o) > 0
            && self.completable_after(fi, ai, None)
    }

    fn more_keys_possible(&self, fi: usize, ai: usize) -> bool {
        let o = self.obj(self.st.alts[ai].core);
        self.extra_ok(fi, ai) || (0..o.names.len()).any(|i| self.name_ok(fi, ai, i))
    }

    fn can_close_obj(&self, alt: &Alt) -> bool {
        let o = self.obj(alt.core);
        if alt.a < o.min || o.required.iter().any(|&r| !self.seen(alt, r as usize)) {
            return false;
        }
        if o.has_deps {
            for i in 0..o.names.len() {
                if self.seen(alt, i) && o.props[i].deps.iter().any(|&d| !self.seen(alt, d as usize))
                {
                    return false;
                }
            }
        }
        true
    }

    fn arr_node(&self, core: u32, idx: u32) -> Option<u32> {
        match &self.prog().cores[core as usize] {
            CoreRt::Array { prefix, items, max, .. } => {
                if idx >= *max {
                    return None;
                }
                let n = prefix.get(idx as usize).copied().unwrap_or(*items);
                (!self.prog().nodes[n as usize].is_empty()).then_some(n)
            }
            _ => None,
        }
    }

    // ---- whitespace ----

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

    // ---- the byte step ----

    fn step(&mut self, b: u8) -> bool {
        if self.st.frames.iter().any(|f| f.uniq) {
            self.note_lens();
            self.st.raw.push(b);
        }
        loop {
            let fi = self.top();
            let f = self.st.frames[fi];
            return match f.kind {
                Kind::Root => f.phase == 0 && self.value_start(fi, b),
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
    fn child_done(&mut self, mask: u64, cmask: u64) -> bool {
        let pi = self.top();
        let pf = self.st.frames[pi];
        let r = self.alt_range(pi);
        for (li, ai) in r.enumerate() {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            if (mask >> li) & 1 == 0 {
                self.kill(ai);
            } else if pf.kind == Kind::Arr {
                let matched = u32::from((cmask >> li) & 1 == 1);
                self.set_alt(ai, Alt { a: a.a + 1, b: a.b + matched, ..a });
            }
        }
        if pf.kind == Kind::Arr && pf.uniq && !self.unique_item_done(pi) {
            return false;
        }
        let phase = match pf.kind {
            Kind::Obj => 4,
            Kind::Arr => 2,
            _ => 1,
        };
        self.set_frame(pi, Frame { phase, ws: 0, ..pf });
        true
    }

    /// Does the array core have `uniqueItems`?
    fn is_unique(&self, core: u32) -> bool {
        matches!(&self.prog().cores[core as usize], CoreRt::Array { unique: true, .. })
    }

    /// Has the `uniqueItems` array in frame `fi` already completed an item equal to the
    /// canonical form `canon`?
    fn seen_item(&self, fi: usize, canon: &[u8]) -> bool {
        let f = &self.st.frames[fi];
        self.st.xk[f.xk as usize..].iter().any(|x| {
            x.alt == NONE && &self.st.xtext[x.start as usize..(x.start + x.len) as usize] == canon
        })
    }

    /// The current item of the `uniqueItems` array in frame `fi` completed: alternatives with
    /// `uniqueItems` die on a duplicate, otherwise its canonical form is remembered.
    fn unique_item_done(&mut self, fi: usize) -> bool {
        let f = self.st.frames[fi];
        let mut canon = Vec::new();
        if unique::canonical(&self.st.raw[f.item as usize..], &mut canon).is_none() {
            // The recogniser only completes valid JSON; nothing to compare otherwise.
            return true;
        }
        if self.seen_item(fi, &canon) {
            let mut any = false;
            for ai in self.alt_range(fi) {
                let a = self.st.alts[ai];
                if a.alive && self.is_unique(a.core) {
                    self.kill(ai);
                } else if a.alive {
                    any = true;
                }
            }
            return any;
        }
        self.note_lens();
        let start = self.st.xtext.len() as u32;
        self.st.xtext.extend_from_slice(&canon);
        self.st.xk.push(XKey { alt: NONE, start, len: canon.len() as u32 });
        true
    }

    /// The item nodes an array alternative offers its next item, each with whether the item's
    /// alternatives count as `contains` matches.
    fn item_nodes(&self, pa: &Alt, out: &mut smallvec::SmallVec<[(u32, bool); 2]>) {
        let prog = self.prog();
        let CoreRt::Array { prefix, items, min, max, contains, .. } = &prog.cores[pa.core as usize]
        else {
            return;
        };
        let Some(c) = contains else {
            if let Some(n) = self.arr_node(pa.core, pa.a) {
                out.push((n, false));
            }
            return;
        };
        let k = pa.a;
        if k >= *max {
            return;
        }
        let live = |n: u32| !prog.nodes[n as usize].is_empty();
        let i = (k as usize).min(prefix.len());
        let node = prefix.get(i).copied().unwrap_or(*items);
        if c.max == u32::MAX && pa.b >= c.min {
            // Enough matches and no upper bound: matches no longer matter.
            if live(node) {
                out.push((node, false));
            }
            return;
        }
        let cap = |j: usize| (live(c.yes[j]), live(c.no[j]));
        let feasible =
            |count: u32| contains_feasible(cap, prefix.len(), *min, *max, c, k + 1, count, false);
        let yes = pa.b < c.max && live(c.yes[i]) && feasible(pa.b + 1);
        let no = live(c.no[i]) && feasible(pa.b);
        match (yes, no) {
            (true, true) => {
                if live(node) {
                    out.push((node, false));
                }
                out.push((c.yes[i], true));
            }
            (true, false) => out.push((c.yes[i], true)),
            (false, true) => out.push((c.no[i], false)),
            (false, false) => {}
        }
    }

    /// Can array alternative `ai` take one more item?
    fn arr_more(&self, ai: usize) -> bool {
        let a = self.st.alts[ai];
        let prog = self.prog();
        match &prog.cores[a.core as usize] {
            CoreRt::Array { prefix, min, max, contains: Some(c), .. } => {
                let live = |n: u32| !prog.nodes[n as usize].is_empty();
                let cap = |j: usize| (live(c.yes[j]), live(c.no[j]));
                contains_feasible(cap, prefix.len(), *min, *max, c, a.a, a.b, true)
            }
            CoreRt::Array { unique: true, .. } => {
                // A position of only `true`/`false`/`null` needs one still unused.
                let top = self.top();
                self.arr_node(a.core, a.a).is_some_and(|n| {
                    unique::fresh_literal(&prog.cores, &prog.nodes[n as usize], |c| {
                        self.seen_item(top, c)
                    })
                    .unwrap_or(true)
                })
            }
            _ => self.arr_node(a.core, a.a).is_some(),
        }
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
        self.note_lens();
        let start = self.st.alts.len();
        let bits0 = self.st.bits.len() as u32;
        let pkind = self.st.frames[pi].kind;
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
            if !pa.alive || li >= 64 || (lit_dup && self.is_unique(pa.core)) {
                continue;
            }
            let mut item_nodes: smallvec::SmallVec<[(u32, bool); 2]> = smallvec::SmallVec::new();
            match pkind {
                Kind::Root => item_nodes.push((prog.root, false)),
                Kind::Obj => item_nodes.push((pa.d, false)),
                Kind::Arr => self.item_nodes(&pa, &mut item_nodes),
                _ => unreachable!("value in a scalar"),
            }
            for (tag, c) in item_nodes
                .iter()
                .flat_map(|&(n, t)| prog.nodes[n as usize].iter().map(move |&c| (t, c)))
            {
                let core = &prog.cores[c as usize];
                let ok = match (kind, core) {
                    (Kind::Obj, CoreRt::Object(_))
                    | (Kind::Arr, CoreRt::Array { .. })
                    | (Kind::Str, CoreRt::String { .. }) => true,
                    (Kind::Num, CoreRt::Number(n)) => n.live(&[b]),
                    (Kind::Lit, CoreRt::Null) => b == b'n',
                    (Kind::Lit, CoreRt::Bool(m)) => {
                        (b == b't' && m & 2 != 0) || (b == b'f' && m & 1 != 0)
                    }
                    _ => false,
                };
                if !ok {
                    continue;
                }
                if let Some(e) =
                    self.st.alts[start..].iter_mut().find(|e| e.core == c && e.tag == tag)
                {
                    e.parents |= 1 << li;
                    continue;
                }
                let mut alt =
                    Alt { core: c, parents: 1 << li, a: 0, b: 0, c: 0, d: NONE, alive: true, tag };
                match core {
                    CoreRt::Object(o) => {
                        alt.b = self.st.bits.len() as u32;
                        let words = o.names.len().div_ceil(64).max(1);
                        self.st.bits.resize(self.st.bits.len() + words, 0);
                    }
                    CoreRt::String { dfa, .. } => alt.a = prog.dfas[*dfa as usize].start(),
                    _ => {}
                }
                self.st.alts.push(alt);
            }
        }
        if self.st.alts.len() == start {
            return false;
        }
        if self.st.alts.len() - start > 64 {
            // More alternatives than the parent masks can address: refuse (documented limit).
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
        let buf = self.st.buf.len() as u32;
        let (phase, ws) = match kind {
            Kind::Lit => (literal_index(b).expect("a literal's first byte"), 1),
            _ => (0, 0),
        };
        self.st.frames.push(Frame {
            kind,
            phase,
            ws,
            esc: E_NORMAL,
            hexn: 0,
            hexv: 0,
            high: 0,
            alts: start as u32,
            buf,
            bits: bits0,
            xk: self.st.xk.len() as u32,
            xtext: self.st.xtext.len() as u32,
            raw: raw_own,
            item: 0,
            uniq,
        });
        if kind == Kind::Num {
            self.st.buf.push(b);
        }
        true
    }

    fn obj_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let w = &self.cs.ws;
        match f.phase {
            0 => {
                if let Some(ok) = self.ws(fi, b, &[]) {
                    return ok;
                }
                match b {
                    b'"' if self.pad_done(fi, &[]) => self.key_start(fi),
                    b'}' if self.pad_done(fi, &[]) => self.obj_close(fi),
                    _ => false,
                }
            }
            1 => {
                if let Some(ok) = self.ws(fi, b, &w.item_post) {
                    return ok;
                }
                b == b'"' && self.pad_done(fi, &w.item_post) && self.key_start(fi)
            }
            2 => {
                if let Some(ok) = self.ws(fi, b, &w.key_pre) {
                    return ok;
                }
                if b == b':' && self.pad_done(fi, &w.key_pre) {
                    self.set_frame(fi, Frame { phase: 3, ws: 0, ..f });
                    return true;
                }
                false
            }
            3 => {
                if let Some(ok) = self.ws(fi, b, &w.key_post) {
                    return ok;
                }
                self.pad_done(fi, &w.key_post) && self.value_start(fi, b)
            }
            _ => {
                if let Some(ok) = self.ws(fi, b, &w.item_pre) {
                    return ok;
                }
                match b {
                    b',' if self.pad_done(fi, &w.item_pre) => {
                        self.next_member(fi, |rt, ai| rt.more_keys_possible(fi, ai))
                    }
                    b'}' if f.ws == 0 || self.cs.ws.flexible.is_some() => self.obj_close(fi),
                    _ => false,
                }
            }
        }
    }

    /// A `,` in the object or array of frame `fi`: the live alternatives that `more` says can
    /// take another member stay alive, the others die; with any left, the frame expects the
    /// next member (phase 1). Returns whether any is left.
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
            self.set_frame(fi, Frame { phase: 1, ws: 0, ..self.st.frames[fi] });
        }
        any
    }

    fn obj_close(&mut self, fi: usize) -> bool {
        let (mut mask, mut cmask) = (0u64, 0u64);
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if a.alive && self.can_close_obj(&a) {
                mask |= a.parents;
                if a.tag {
                    cmask |= a.parents;
                }
            }
        }
        if mask == 0 {
            return false;
        }
        self.pop_frame();
        self.child_done(mask, cmask)
    }

    fn key_start(&mut self, fi: usize) -> bool {
        self.note_lens();
        let start = self.st.alts.len();
        for (li, ai) in self.alt_range(fi).enumerate() {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            let o = self.obj(a.core);
            let extra = match &o.extra {
                Some(x) if self.extra_ok(fi, ai) => self.prog().dfas[x.dfa as usize].start(),
                _ => DEAD,
            };
            let names_live = (0..o.names.len()).any(|i| self.name_ok(fi, ai, i));
            if extra == DEAD && !names_live {
                self.kill(ai);
                continue;
            }
            // `c` holds the name range end; `d` the arena index of the object alternative.
            self.st.alts.push(Alt {
                core: a.core,
                parents: 1 << li,
                a: extra,
                b: 0,
                c: o.names.len() as u32,
                d: ai as u32,
                alive: true,
                tag: false,
            });
        }
        if self.st.alts.len() == start {
            return false;
        }
        self.st.frames.push(Frame {
            kind: Kind::Key,
            phase: 0,
            ws: 0,
            esc: E_NORMAL,
            hexn: 0,
            hexv: 0,
            high: 0,
            alts: start as u32,
            buf: self.st.buf.len() as u32,
            bits: self.st.bits.len() as u32,
            xk: self.st.xk.len() as u32,
            xtext: self.st.xtext.len() as u32,
            raw: NONE,
            item: 0,
            uniq: false,
        });
        true
    }

    fn arr_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let w = &self.cs.ws;
        match f.phase {
            0 => {
                if let Some(ok) = self.ws(fi, b, &[]) {
                    return ok;
                }
                if !self.pad_done(fi, &[]) {
                    return false;
                }
                if b == b']' {
                    self.arr_close(fi)
                } else {
                    self.value_start(fi, b)
                }
            }
            1 => {
                if let Some(ok) = self.ws(fi, b, &w.item_post) {
                    return ok;
                }
                self.pad_done(fi, &w.item_post) && self.value_start(fi, b)
            }
            _ => {
                if let Some(ok) = self.ws(fi, b, &w.item_pre) {
                    return ok;
                }
                match b {
                    b',' if self.pad_done(fi, &w.item_pre) => {
                        self.next_member(fi, |rt, ai| rt.arr_more(ai))
                    }
                    b']' if f.ws == 0 || self.cs.ws.flexible.is_some() => self.arr_close(fi),
                    _ => false,
                }
            }
        }
    }

    fn arr_close(&mut self, fi: usize) -> bool {
        let (mut mask, mut cmask) = (0u64, 0u64);
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if let CoreRt::Array { min, contains, .. } = &self.prog().cores[a.core as usize] {
                if a.alive && a.a >= *min && contains.as_ref().is_none_or(|c| a.b >= c.min) {
                    mask |= a.parents;
                    if a.tag {
                        cmask |= a.parents;
                    }
                }
            }
        }
        if mask == 0 {
            return false;
        }
        self.pop_frame();
        self.child_done(mask, cmask)
    }

    fn lit_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let lit = LITERALS[f.phase as usize];
        if lit[f.ws as usize] != b {
            return false;
        }
        if f.ws as usize + 1 < lit.len() {
            self.set_frame(fi, Frame { ws: f.ws + 1, ..f });
            return true;
        }
        let (mut mask, mut cmask) = (0u64, 0u64);
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if a.alive {
                mask |= a.parents;
                if a.tag {
                    cmask |= a.parents;
                }
            }
        }
        self.pop_frame();
        self.child_done(mask, cmask)
    }

    fn num_extend(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        self.note_lens();
        self.st.buf.push(b);
        let text = &self.st.buf[f.buf as usize..];
        if !number::syntax_ok(text) {
            return false;
        }
        let prog = self.prog();
        let mut any = false;
        let r = self.alt_range(fi);
        for ai in r {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            let live = match &prog.cores[a.core as usize] {
                CoreRt::Number(n) => n.live(&self.st.buf[f.buf as usize..]),
                _ => false,
            };
            if live {
                any = true;
            } else {
                self.kill(ai);
            }
        }
        any
    }

    /// The parents mask of number alternatives accepting the complete text (0: none).
    fn num_mask(&self, fi: usize) -> u64 {
        let f = self.st.frames[fi];
        let text = &self.st.buf[f.buf as usize..];
        if !number::is_complete(text) {
            return 0;
        }
        let mut mask = 0u64;
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if let CoreRt::Number(n) = &self.prog().cores[a.core as usize] {
                if a.alive && n.accepts_text(text) {
                    mask |= a.parents;
                }
            }
        }
        mask
    }

    fn num_close(&mut self, fi: usize) -> bool {
        let mask = self.num_mask(fi);
        if mask == 0 {
            return false;
        }
        let text = &self.st.buf[self.st.frames[fi].buf as usize..];
        let mut cmask = 0u64;
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if let CoreRt::Number(n) = &self.prog().cores[a.core as usize] {
                if a.alive && a.tag && n.accepts_text(text) {
                    cmask |= a.parents;
                }
            }
        }
        self.pop_frame();
        self.child_done(mask, cmask)
    }

    // ---- strings and keys ----

    fn str_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        match f.esc {
            E_NORMAL => match b {
                b'"' => {
                    if f.kind == Kind::Key {
                        self.key_close(fi)
                    } else {
                        self.str_close(fi)
                    }
                }
                b'\\' => {
                    if !self.range_live(fi, 0, 0x10FFFF) {
                        return false;
                    }
                    self.set_frame(fi, Frame { esc: E_BS, ..f });
                    true
                }
                0..=0x1F => false,
                _ => self.feed(fi, b),
            },
            E_BS => {
                if b == b'u' {
                    self.set_frame(fi, Frame { esc: E_HEX, hexn: 0, hexv: 0, ..f });
                    return true;
                }
                let Some(c) = escape_char(b) else { return false };
                self.set_frame(fi, Frame { esc: E_NORMAL, ..f });
                self.feed_cp(fi, u32::from(c))
            }
            E_HEX | E_HEX_LOW => {
                let Some(d) = hex_val(b) else { return false };
                let v = (f.hexv << 4) | u16::from(d);
                let n = f.hexn + 1;
                let low = f.esc == E_HEX_LOW;
                if n < 4 {
                    let shift = 4 * (4 - u32::from(n));
                    let lo = u32::from(v) << shift;
                    let hi = lo + (1 << shift) - 1;
                    let ok = if low {
                        self.low_range_live(fi, f.high, lo, hi)
                    } else {
                        self.hex_range_live(fi, lo, hi)
                    };
                    if !ok {
                        return false;
                    }
                    self.set_frame(fi, Frame { hexn: n, hexv: v, ..f });
                    return true;
                }
                let v = u32::from(v);
                if low {
                    if !LOW_SURROGATES.contains(&v) {
                        return false;
                    }
                    let cp = surrogate_pair(u32::from(f.high), v);
                    self.set_frame(fi, Frame { esc: E_NORMAL, hexn: 0, hexv: 0, high: 0, ..f });
                    return self.feed_cp(fi, cp);
                }
                if HIGH_SURROGATES.contains(&v) {
                    if !self.low_range_live(fi, v as u16, 0xDC00, 0xDFFF) {
                        return false;
                    }
                    self.set_frame(
                        fi,
                        Frame { esc: E_NEED_BS, hexn: 0, hexv: 0, high: v as u16, ..f },
                    );
                    return true;
                }
                if LOW_SURROGATES.contains(&v) {
                    return false;
                }
                self.set_frame(fi, Frame { esc: E_NORMAL, hexn: 0, hexv: 0, ..f });
                self.feed_cp(fi, v)
            }
            E_NEED_BS => {
                if b != b'\\' {
                    return false;
                }
                self.set_frame(fi, Frame { esc: E_NEED_U, ..f });
                true
            }
            _ => {
                if b != b'u' {
                    return false;
                }
                self.set_frame(fi, Frame { esc: E_HEX_LOW, hexn: 0, hexv: 0, ..f });
                true
            }
        }
    }

    /// A partial `\u` escape covering `lo..=hi` (BMP values; high surrogates lead on).
    fn hex_range_live(&self, fi: usize, lo: u32, hi: u32) -> bool {
        if self.range_live(fi, lo, hi.min(0xD7FF)) || self.range_live(fi, lo.max(0xE000), hi) {
            return true;
        }
        let (a, b) = (lo.max(0xD800), hi.min(0xDBFF));
        a <= b && self.range_live(fi, surrogate_pair(a, 0xDC00), surrogate_pair(b, 0xDFFF))
    }

    fn low_range_live(&self, fi: usize, high: u16, lo: u32, hi: u32) -> bool {
        let (a, b) = (lo.max(0xDC00), hi.min(0xDFFF));
        let high = u32::from(high);
        a <= b && self.range_live(fi, surrogate_pair(high, a), surrogate_pair(high, b))
    }

    /// Can some code point in `lo..=hi` continue the string/key in frame `fi`?
    fn range_live(&self, fi: usize, lo: u32, hi: u32) -> bool {
        if lo > hi {
            return false;
        }
        let f = self.st.frames[fi];
        let prog = self.prog();
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            if f.kind == Kind::Str {
                if let CoreRt::String { dfa, max, .. } = &prog.cores[a.core as usize] {
                    if a.b < *max
                        && prog.dfas[*dfa as usize].range_live(a.a, lo, hi, *max - a.b - 1)
                    {
                        return true;
                    }
                }
            } else {
                if let Some(x) = &self.obj(a.core).extra {
                    if a.a != DEAD && prog.dfas[x.dfa as usize].range_live(a.a, lo, hi, u32::MAX) {
                        return true;
                    }
                }
                let o = self.obj(a.core);
                let pos = self.st.buf.len() - f.buf as usize;
                for i in a.b as usize..a.c as usize {
                    let n = &o.names[i];
                    if n.len() > pos {
                        if let Some(cp) = cp_at(n, pos) {
                            if (lo..=hi).contains(&cp) && self.name_ok(fi - 1, a.d as usize, i) {
                                return true;
                            }
                        }
                    }
                }
            }
        }
        false
    }

    fn feed_cp(&mut self, fi: usize, cp: u32) -> bool {
        let mut tmp = [0u8; 4];
        let bytes: smallvec::SmallVec<[u8; 4]> = utf8(cp, &mut tmp).iter().copied().collect();
        if bytes.is_empty() {
            return false;
        }
        bytes.iter().all(|&b| self.feed(fi, b))
    }

    /// One decoded content byte into every alternative of a string or key frame.
    fn feed(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let prog = self.prog();
        let lead = b & 0xC0 != 0x80;
        let mut any = false;
        if f.kind == Kind::Str {
            for ai in self.alt_range(fi) {
                let a = self.st.alts[ai];
                if !a.alive {
                    continue;
                }
                let CoreRt::String { dfa, max, .. } = &prog.cores[a.core as usize] else {
                    continue;
                };
                let d = &prog.dfas[*dfa as usize];
                let n = d.next(a.a, b);
                let count = a.b + u32::from(lead);
                // Live iff the fewest code points that complete it still fit under `max`.
                if n == DEAD || count.saturating_add(d.short(n)) > *max {
                    self.kill(ai);
                } else {
                    if n != a.a || count != a.b {
                        self.set_alt(ai, Alt { a: n, b: count, ..a });
                    }
                    any = true;
                }
            }
            return any;
        }
        // A key: extend the decoded text, narrow name ranges, step the undeclared automaton.
        let pos = self.st.buf.len() - f.buf as usize;
        self.note_lens();
        self.st.buf.push(b);
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            let o = self.obj(a.core);
            let names = &o.names[a.b as usize..a.c as usize];
            let lo = a.b as usize + names.partition_point(|n| n.len() <= pos || n[pos] < b);
            let hi = a.b as usize + names.partition_point(|n| n.len() <= pos || n[pos] <= b);
            let ex = match &o.extra {
                Some(x) if a.a != DEAD => prog.dfas[x.dfa as usize].next(a.a, b),
                _ => DEAD,
            };
            let objai = a.d as usize;
            let text = &self.st.buf[f.buf as usize..];
            let names_live = (lo..hi).any(|i| self.name_ok(fi - 1, objai, i));
            let extra_live = ex != DEAD && {
                let d = &prog.dfas[o.extra.as_ref().expect("extra").dfa as usize];
                match d.finite_count(ex) {
                    None => true,
                    Some(cnt) => cnt > self.seen_extra_with_prefix(fi - 1, objai, text),
                }
            };
            if !names_live && !extra_live {
                self.kill(ai);
            } else {
                self.set_alt(ai, Alt { a: ex, b: lo as u32, c: hi as u32, ..a });
                any = true;
            }
        }
        any
    }

    fn str_close(&mut self, fi: usize) -> bool {
        let prog = self.prog();
        let (mut mask, mut cmask) = (0u64, 0u64);
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            if let CoreRt::String { dfa, min, .. } = &prog.cores[a.core as usize] {
                if prog.dfas[*dfa as usize].is_accept(a.a) && a.b >= *min {
                    mask |= a.parents;
                    if a.tag {
                        cmask |= a.parents;
                    }
                }
            }
        }
        if mask == 0 {
            return false;
        }
        self.pop_frame();
        self.child_done(mask, cmask)
    }

    fn key_close(&mut self, fi: usize) -> bool {
        let mut choices = KeyChoices::new();
        self.key_choices(fi, &[], &mut choices, None);
        if choices.is_empty() {
            return false;
        }
        let f = self.st.frames[fi];
        let text: smallvec::SmallVec<[u8; 64]> =
            self.st.buf[f.buf as usize..].iter().copied().collect();
        self.key_apply(fi, &text, &choices);
        true
    }

    /// Per alternative of key frame `fi` (in arena order): may its object take an undeclared
    /// key now? (What [`Rt::key_choices`] asks for every group; the same for all of them.)
    fn extra_oks(&self, fi: usize) -> smallvec::SmallVec<[bool; 8]> {
        self.alt_range(fi)
            .map(|ai| {
                let a = self.st.alts[ai];
                a.alive && a.a != DEAD && self.extra_ok(fi - 1, a.d as usize)
            })
            .collect()
    }

    /// How each live object alternative would read the key if it were closed after the text
    /// so far plus `ext` (plain bytes): a declared name (index) or an undeclared key, with the
    /// value's node. Empty: the key cannot close there. No state change. `xoks`: the answers
    /// of [`Rt::extra_oks`], when the caller asks for many `ext`.
    fn key_choices(&self, fi: usize, ext: &[u8], choices: &mut KeyChoices, xoks: Option<&[bool]>) {
        choices.clear();
        let prog = self.prog();
        let f = self.st.frames[fi];
        let pos = self.st.buf.len() - f.buf as usize;
        let mut text: smallvec::SmallVec<[u8; 64]> = smallvec::SmallVec::new();
        let oi = fi - 1;
        let first = self.st.frames[fi].alts as usize;
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            let o = self.obj(a.core);
            let objai = a.d as usize;
            let (mut lo, mut hi) = (a.b as usize, a.c as usize);
            for (k, &b) in ext.iter().enumerate() {
                let at = pos + k;
                let r = &o.names[lo..hi];
                let l = lo + r.partition_point(|n| n.len() <= at || n[at] < b);
                hi = lo + r.partition_point(|n| n.len() <= at || n[at] <= b);
                lo = l;
            }
            if lo < hi && o.names[lo].len() == pos + ext.len() {
                // A declared name: never an undeclared key, even if it cannot be taken now.
                if self.name_ok(oi, objai, lo) {
                    choices.push((objai, Some(lo), o.props[lo].node));
                }
                continue;
            }
            if let Some(x) = &o.extra {
                if a.a == DEAD {
                    continue;
                }
                let d = &prog.dfas[x.dfa as usize];
                let ex = d.run(a.a, ext);
                if ex == DEAD || !d.is_accept(ex) {
                    continue;
                }
                let ok = match xoks {
                    Some(x) => x[ai - first],
                    None => self.extra_ok(oi, objai),
                };
                if !ok {
                    continue;
                }
                let of = &self.st.frames[oi];
                let any_seen = self.st.xk[of.xk as usize..].iter().any(|k| k.alt as usize == objai);
                if text.is_empty() && (any_seen || !x.patterns.is_empty()) {
                    text.extend_from_slice(&self.st.buf[f.buf as usize..]);
                    text.extend_from_slice(ext);
                }
                if any_seen && self.seen_extra(oi, objai, &text) {
                    continue;
                }
                let mut m = 0usize;
                for (i, &p) in x.patterns.iter().enumerate() {
                    if prog.dfas[p as usize].matches(&text) {
                        m |= 1 << i;
                    }
                }
                let node = x.combos[m];
                if !prog.nodes[node as usize].is_empty() {
                    choices.push((objai, None, node));
                }
            }
        }
    }

    /// Close the key frame `fi` whose text is `text`, as `choices` (non-empty, from
    /// [`Rt::key_choices`]) read it.
    fn key_apply(&mut self, fi: usize, text: &[u8], choices: &KeyChoices) {
        let oi = fi - 1;
        self.pop_frame();
        // Object alternatives without a valid reading of the key die.
        for ai in self.alt_range(oi) {
            let a = self.st.alts[ai];
            if a.alive && !choices.iter().any(|c| c.0 == ai) {
                self.kill(ai);
            }
        }
        self.note_lens();
        for &(ai, idx, node) in choices {
            let a = self.st.alts[ai];
            let o = self.obj(a.core);
            let mut na = Alt { a: a.a + 1, d: node, ..a };
            match idx {
                Some(i) => {
                    let w = a.b as usize + i / 64;
                    let v = self.st.bits[w] | (1 << (i % 64));
                    self.set_bit(w, v);
                    if self.schema_order() {
                        na.c = o.props[i].order + 1;
                    }
                }
                None => {
                    let start = self.st.xtext.len() as u32;
                    self.st.xtext.extend_from_slice(text);
                    self.st.xk.push(XKey { alt: ai as u32, start, len: text.len() as u32 });
                }
            }
            self.set_alt(ai, na);
        }
        let of = self.st.frames[oi];
        self.set_frame(oi, Frame { phase: 2, ws: 0, ..of });
    }
}

/// Per object alternative: (arena index, declared name index or `None` for an undeclared
/// key, value node).
type KeyChoices = smallvec::SmallVec<[(usize, Option<usize>, u32); 8]>;

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

    /// Between values only whitespace, punctuation and value starts can follow (custom
    /// separators only add whitespace); a literal takes its next letter; a number also its
    /// own bytes. Strings and keys: anything.
    fn byte_superset(&self) -> [u64; 4] {
        const STRUCTURE: [u64; 4] = crate::recognizer::byte_set(b" \t\n\r,:}]\"{[-0123456789tfn");
        const NUMBER: [u64; 4] = crate::recognizer::byte_set(b" \t\n\r,:}]\"{[-0123456789tfn.eE+");
        let f = self.st.frames.last().expect("root");
        match f.kind {
            Kind::Root | Kind::Obj | Kind::Arr => STRUCTURE,
            Kind::Num => NUMBER,
            Kind::Lit => crate::recognizer::byte_set(&[LITERALS[f.phase as usize][f.ws as usize]]),
            Kind::Str | Kind::Key => [u64::MAX; 4],
        }
    }
}

impl St {
    fn initial() -> St {
        let mut st = St::default();
        st.frames.push(Frame {
            kind: Kind::Root,
            phase: 0,
            ws: 0,
            esc: 0,
            hexn: 0,
            hexv: 0,
            high: 0,
            alts: 0,
            buf: 0,
            bits: 0,
            xk: 0,
            xtext: 0,
            raw: NONE,
            item: 0,
            uniq: false,
        });
        st.alts.push(Alt {
            core: NONE,
            parents: 1,
            a: 0,
            b: 0,
            c: 0,
            d: NONE,
            alive: true,
            tag: false,
        });
        st
    }
}

/// Is the root value complete in `st` (EOS allowed)?
fn accepting(schema: &CompiledSchema, st: &St) -> bool {
    match st.frames.len() {
        1 => st.frames[0].phase == 1,
        2 if st.frames[1].kind == Kind::Num => {
            let rt = Rt {
                cs: schema,
                st: &mut st.clone(),
                log: &mut Vec::new(),
                graves: &mut Graves::default(),
            };
            rt.num_mask(1) != 0
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
    cache: MaskCache<(u64, St)>,
    view: BoolView,
    fast: fast::FastState,
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
            let k = match p.cores.get(a.core as usize) {
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
        format!("{:?}/{}/esc{}/{}", f.kind, f.phase, f.esc, kinds)
    }

    /// The compiled schema.
    pub fn schema(&self) -> &Arc<CompiledSchema> {
        &self.schema
    }

    fn rt(&mut self) -> Rt<'_> {
        Rt { cs: &self.schema, st: &mut self.st, log: &mut self.log, graves: &mut self.graves }
    }

    /// Feed raw bytes (not tokens). `Ok(())` if all are accepted (state advanced); otherwise
    /// the index of the first refused byte, with the state unchanged.
    ///
    /// # Errors
    /// The index of the refused byte.
    pub fn advance_bytes(&mut self, bytes: &[u8]) -> Result<(), usize> {
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
        let mut rt =
            Rt { cs: &self.schema, st: &mut self.st, log: &mut self.log, graves: &mut self.graves };
        let mut fast = fast::Fast { rt: &mut rt, fast: &mut self.fast, vocab: &vocab };
        let numbers = vocab.number_classes(b"");
        if !fast.string_mask(vocab.string_classes(), mask)
            && !numbers.is_some_and(|c| fast.number_mask(&c, b"", mask))
        {
            let mut hook = fast::StringHook { fast: &mut self.fast, vocab: &vocab, base: b"" };
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
        vocab.trie().walk(&mut self.rt(), mask);
        self.log.clear();
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

    /// Inside a number whose live alternatives have no bounds: the state with the number's
    /// text replaced by its class representative ([`number::canonical`]), which has the same
    /// mask — so `1`, `12` and `2024` share one cache entry.
    fn number_key(&self) -> Option<St> {
        let f = self.st.frames.last().expect("root");
        if f.kind != Kind::Num || self.recording() {
            return None;
        }
        let p = &self.schema.program;
        let mut integer = false;
        for a in self.st.alts[f.alts as usize..].iter().filter(|a| a.alive) {
            let CoreRt::Number(n) = &p.cores[a.core as usize] else { return None };
            if !n.is_unbounded() {
                return None;
            }
            integer |= n.integer;
        }
        let text = &self.st.buf[f.buf as usize..];
        let c = number::canonical(text, integer)?;
        if c.as_slice() == text {
            return None;
        }
        let mut st = self.st.clone();
        st.buf.truncate(f.buf as usize);
        st.buf.extend_from_slice(&c);
        Some(st)
    }

    fn push_history(&mut self) {
        self.history.push((self.st.clone(), self.finished));
    }
}

impl ConstraintEngine for SchemaConstraint {
    fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        check_mask_len(&self.vocab, mask.len())?;
        if self.finished {
            mask.clear();
            return Ok(());
        }
        let key = self.number_key();
        let st = key.as_ref().unwrap_or(&self.st);
        let h = Self::state_hash(st);
        if self.cache.lookup(|(hash, state)| *hash == h && state == st, mask) {
            return Ok(());
        }
        self.compute(mask);
        let st = key.unwrap_or_else(|| self.st.clone());
        self.cache.insert((h, st), mask);
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
        match self.advance_bytes(bytes) {
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
        !self.finished && self.st.frames.len() == 1 && self.st.frames[0].phase == 1
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
        let mut st = self.st.clone();
        let mut log = Vec::new();
        let mut graves = Graves::default();
        let schema = &self.schema;
        let mut rt = Rt { cs: &self.schema, st: &mut st, log: &mut log, graves: &mut graves };
        crate::forced::forced_bytes(&mut rt, |r| accepting(schema, r.st), FORCED_BYTES_LIMIT, out);
    }

    fn allows(&self, token: TokenId) -> bool {
        let accepting = self.accepting_state();
        match precheck(&self.vocab, token, self.finished, accepting) {
            Ok(true) => true,
            Ok(false) => {
                let mut st = self.st.clone();
                let mut log = Vec::new();
                let mut graves = Graves::default();
                let mut rt =
                    Rt { cs: &self.schema, st: &mut st, log: &mut log, graves: &mut graves };
                self.vocab.token_bytes(token).iter().all(|&b| rt.try_push_byte(b))
            }
            Err(_) => false,
        }
    }

    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError> {
        check_mask_len(&self.vocab, vocab_size)?;
        let mut m = self.view.take_mask(vocab_size);
        self.fill_mask(&mut m)?;
        Ok(self.view.store(m))
    }

    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        if let Some((s, f)) = self.history.rewind(n)? {
            self.st = s;
            self.finished = f;
        }
        Ok(())
    }
}
