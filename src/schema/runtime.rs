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

use super::compile::{contains_feasible, CoreRt, DfaId, ExprId, ObjRt, Program, RtCoreId};
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
mod state;
use state::*;

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

    fn obj(&self, core: RtCoreId) -> &'a ObjRt {
        match &self.prog().cores[core] {
            CoreRt::Object(o) => o,
            _ => unreachable!("object core expected"),
        }
    }

    fn seen(&self, alt: &Alt, idx: usize) -> bool {
        (self.st.bits[alt.obj().seen as usize + idx / 64] >> (idx % 64)) & 1 == 1
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
                let d = &self.prog().dfas[x.dfa];
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
        let count = alt.obj().members + 1;
        let last = match choice {
            Some(i) if schema => o.props[i].order + 1,
            _ => alt.obj().next_order,
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
            && (!self.schema_order() || o.props[idx].order >= alt.obj().next_order)
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
        if alt.obj().members < o.min || o.required.iter().any(|&r| !self.seen(alt, r as usize)) {
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

    fn arr_node(&self, core: RtCoreId, idx: u32) -> Option<ExprId> {
        match &self.prog().cores[core] {
            CoreRt::Array { prefix, items, max, .. } => {
                if idx >= *max {
                    return None;
                }
                let n = prefix.get(idx as usize).copied().unwrap_or(*items);
                (!self.prog().nodes[n].is_empty()).then_some(n)
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
            } else if pf.kind() == Kind::Arr {
                let matched = u32::from((cmask >> li) & 1 == 1);
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

    /// Does the array core have `uniqueItems`?
    fn is_unique(&self, core: RtCoreId) -> bool {
        matches!(&self.prog().cores[core], CoreRt::Array { unique: true, .. })
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
    fn item_nodes(&self, pa: &Alt, out: &mut smallvec::SmallVec<[(ExprId, bool); 2]>) {
        let prog = self.prog();
        let CoreRt::Array { prefix, items, min, max, contains, .. } = &prog.cores[pa.core] else {
            return;
        };
        let Some(c) = contains else {
            if let Some(n) = self.arr_node(pa.core, pa.arr().items) {
                out.push((n, false));
            }
            return;
        };
        let k = pa.arr().items;
        if k >= *max {
            return;
        }
        let live = |n: ExprId| !prog.nodes[n].is_empty();
        let i = (k as usize).min(prefix.len());
        let node = prefix.get(i).copied().unwrap_or(*items);
        if c.max == u32::MAX && pa.arr().matches >= c.min {
            // Enough matches and no upper bound: matches no longer matter.
            if live(node) {
                out.push((node, false));
            }
            return;
        }
        let cap = |j: usize| (live(c.yes[j]), live(c.no[j]));
        let feasible =
            |count: u32| contains_feasible(cap, prefix.len(), *min, *max, c, k + 1, count, false);
        let yes = pa.arr().matches < c.max && live(c.yes[i]) && feasible(pa.arr().matches + 1);
        let no = live(c.no[i]) && feasible(pa.arr().matches);
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
        match &prog.cores[a.core] {
            CoreRt::Array { prefix, min, max, contains: Some(c), .. } => {
                let live = |n: ExprId| !prog.nodes[n].is_empty();
                let cap = |j: usize| (live(c.yes[j]), live(c.no[j]));
                contains_feasible(
                    cap,
                    prefix.len(),
                    *min,
                    *max,
                    c,
                    a.arr().items,
                    a.arr().matches,
                    true,
                )
            }
            CoreRt::Array { unique: true, .. } => {
                // A position of only `true`/`false`/`null` needs one still unused.
                let top = self.top();
                self.arr_node(a.core, a.arr().items).is_some_and(|n| {
                    unique::fresh_literal(&prog.cores, &prog.nodes[n], |c| self.seen_item(top, c))
                        .unwrap_or(true)
                })
            }
            _ => self.arr_node(a.core, a.arr().items).is_some(),
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
            if !pa.alive || li >= 64 || (lit_dup && self.is_unique(pa.core)) {
                continue;
            }
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
                let mut alt = Alt::new(c, 1 << li, tag);
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
        true
    }

    fn obj_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let w = &self.cs.ws;
        let Lex::Obj(phase) = f.lex else { unreachable!("an object frame") };
        match phase {
            ObjPhase::First => {
                if let Some(ok) = self.ws(fi, b, &[]) {
                    return ok;
                }
                match b {
                    b'"' if self.pad_done(fi, &[]) => self.key_start(fi),
                    b'}' if self.pad_done(fi, &[]) => self.obj_close(fi),
                    _ => false,
                }
            }
            ObjPhase::Key => {
                if let Some(ok) = self.ws(fi, b, &w.item_post) {
                    return ok;
                }
                b == b'"' && self.pad_done(fi, &w.item_post) && self.key_start(fi)
            }
            ObjPhase::Colon => {
                if let Some(ok) = self.ws(fi, b, &w.key_pre) {
                    return ok;
                }
                if b == b':' && self.pad_done(fi, &w.key_pre) {
                    self.set_frame(fi, Frame { lex: Lex::Obj(ObjPhase::Value), ws: 0, ..f });
                    return true;
                }
                false
            }
            ObjPhase::Value => self.padded_value(fi, b, &w.key_post),
            ObjPhase::After => self.after_member(
                fi,
                b,
                b'}',
                |rt, ai| rt.more_keys_possible(fi, ai),
                Self::obj_close,
            ),
        }
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

    fn obj_close(&mut self, fi: usize) -> bool {
        self.close_with(fi, |rt, a| rt.can_close_obj(a))
    }

    /// Close the value of frame `fi`: the live alternatives for which `complete` holds tell
    /// the parent which of its alternatives survive (and, tagged, for which it matched
    /// `contains`). `false` when none is complete (the closing byte is refused).
    fn close_with(&mut self, fi: usize, complete: impl Fn(&Self, &Alt) -> bool) -> bool {
        let (mut mask, mut cmask) = (0u64, 0u64);
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if a.alive && complete(self, &a) {
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
                Some(x) if self.extra_ok(fi, ai) => self.prog().dfas[x.dfa].start(),
                _ => DEAD,
            };
            let names_live = (0..o.names.len()).any(|i| self.name_ok(fi, ai, i));
            if extra == DEAD && !names_live {
                self.kill(ai);
                continue;
            }
            let k = KeyProgress { extra, lo: 0, hi: o.names.len() as u32, obj: ai as u32 };
            self.st.alts.push(Alt::new(a.core, 1 << li, false).with_key(k));
        }
        if self.st.alts.len() == start {
            return false;
        }
        let frame = self.st.open_frame(Lex::Key(Escape::None), start);
        self.st.frames.push(frame);
        true
    }

    fn arr_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let w = &self.cs.ws;
        let Lex::Arr(phase) = f.lex else { unreachable!("an array frame") };
        match phase {
            ArrPhase::First => {
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
            ArrPhase::Item => self.padded_value(fi, b, &w.item_post),
            ArrPhase::After => {
                self.after_member(fi, b, b']', |rt, ai| rt.arr_more(ai), Self::arr_close)
            }
        }
    }

    fn arr_close(&mut self, fi: usize) -> bool {
        self.close_with(fi, |rt, a| match &rt.prog().cores[a.core] {
            CoreRt::Array { min, contains, .. } => {
                a.arr().items >= *min && contains.as_ref().is_none_or(|c| a.arr().matches >= c.min)
            }
            _ => false,
        })
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
            let live = match &prog.cores[a.core] {
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
        let at = self.st.frames[fi].buf as usize;
        if !number::is_complete(&self.st.buf[at..]) {
            return 0;
        }
        let live = self.alt_range(fi).map(|ai| self.st.alts[ai]).filter(|a| a.alive);
        live.filter(|a| self.num_accepts(at, a)).fold(0, |m, a| m | a.parents)
    }

    /// Does number alternative `a` accept the (complete) number text at `buf[at..]`?
    fn num_accepts(&self, at: usize, a: &Alt) -> bool {
        matches!(&self.prog().cores[a.core], CoreRt::Number(n) if n.accepts_text(&self.st.buf[at..]))
    }

    fn num_close(&mut self, fi: usize) -> bool {
        let at = self.st.frames[fi].buf as usize;
        number::is_complete(&self.st.buf[at..])
            && self.close_with(fi, |rt, a| rt.num_accepts(at, a))
    }

    // ---- strings and keys ----

    fn str_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        match f.lex.escape().expect("a string or key frame") {
            Escape::None => match b {
                b'"' => {
                    if f.kind() == Kind::Key {
                        self.key_close(fi)
                    } else {
                        self.str_close(fi)
                    }
                }
                b'\\' => {
                    if !self.range_live(fi, 0, 0x10FFFF) {
                        return false;
                    }
                    self.set_escape(fi, Escape::Backslash);
                    true
                }
                0..=0x1F => false,
                _ => self.feed(fi, b),
            },
            Escape::Backslash => {
                if b == b'u' {
                    self.set_escape(fi, Escape::Hex { n: 0, v: 0 });
                    return true;
                }
                let Some(c) = escape_char(b) else { return false };
                self.set_escape(fi, Escape::None);
                self.feed_cp(fi, u32::from(c))
            }
            Escape::Hex { n, v } => self.hex_byte(fi, None, n, v, b),
            Escape::LowHex { high, n, v } => self.hex_byte(fi, Some(high), n, v, b),
            Escape::NeedBackslash { high } => {
                if b != b'\\' {
                    return false;
                }
                self.set_escape(fi, Escape::NeedU { high });
                true
            }
            Escape::NeedU { high } => {
                if b != b'u' {
                    return false;
                }
                self.set_escape(fi, Escape::LowHex { high, n: 0, v: 0 });
                true
            }
        }
    }

    fn set_escape(&mut self, fi: usize, e: Escape) {
        let f = self.st.frames[fi];
        self.set_frame(fi, Frame { lex: f.lex.with_escape(e), ..f });
    }

    /// Hex digit `b` of a `\uXXXX` escape with `n` digits of value `v` so far (`high`: this
    /// escape is the low half of a surrogate pair after `high`). Each prefix of the escape must
    /// leave some code point that continues the string.
    fn hex_byte(&mut self, fi: usize, high: Option<u16>, n: u8, v: u16, b: u8) -> bool {
        let Some(d) = hex_val(b) else { return false };
        let v = (v << 4) | u16::from(d);
        let n = n + 1;
        if n < 4 {
            let shift = 4 * (4 - u32::from(n));
            let lo = u32::from(v) << shift;
            let hi = lo + (1 << shift) - 1;
            let ok = match high {
                Some(h) => self.low_range_live(fi, h, lo, hi),
                None => self.hex_range_live(fi, lo, hi),
            };
            if !ok {
                return false;
            }
            let e = match high {
                Some(high) => Escape::LowHex { high, n, v },
                None => Escape::Hex { n, v },
            };
            self.set_escape(fi, e);
            return true;
        }
        let v = u32::from(v);
        if let Some(h) = high {
            if !LOW_SURROGATES.contains(&v) {
                return false;
            }
            self.set_escape(fi, Escape::None);
            return self.feed_cp(fi, surrogate_pair(u32::from(h), v));
        }
        if HIGH_SURROGATES.contains(&v) {
            if !self.low_range_live(fi, v as u16, 0xDC00, 0xDFFF) {
                return false;
            }
            self.set_escape(fi, Escape::NeedBackslash { high: v as u16 });
            return true;
        }
        if LOW_SURROGATES.contains(&v) {
            return false;
        }
        self.set_escape(fi, Escape::None);
        self.feed_cp(fi, v)
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
            if f.kind() == Kind::Str {
                let p = a.str();
                if let CoreRt::String { dfa, max, .. } = &prog.cores[a.core] {
                    if p.chars < *max
                        && prog.dfas[*dfa].range_live(p.state, lo, hi, *max - p.chars - 1)
                    {
                        return true;
                    }
                }
            } else {
                let k = a.key();
                if let Some(x) = &self.obj(a.core).extra {
                    if k.extra != DEAD && prog.dfas[x.dfa].range_live(k.extra, lo, hi, u32::MAX) {
                        return true;
                    }
                }
                let o = self.obj(a.core);
                let pos = self.st.buf.len() - f.buf as usize;
                for i in k.lo as usize..k.hi as usize {
                    let n = &o.names[i];
                    if n.len() > pos {
                        if let Some(cp) = cp_at(n, pos) {
                            if (lo..=hi).contains(&cp) && self.name_ok(fi - 1, k.obj as usize, i) {
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
        if f.kind() == Kind::Str {
            for ai in self.alt_range(fi) {
                let a = self.st.alts[ai];
                if !a.alive {
                    continue;
                }
                let CoreRt::String { dfa, max, .. } = &prog.cores[a.core] else {
                    continue;
                };
                let d = &prog.dfas[*dfa];
                let p = a.str();
                let n = d.next(p.state, b);
                let count = p.chars + u32::from(lead);
                // Live iff the fewest code points that complete it still fit under `max`.
                if n == DEAD || count.saturating_add(d.short(n)) > *max {
                    self.kill(ai);
                } else {
                    if n != p.state || count != p.chars {
                        self.set_alt(ai, a.with_str(StrProgress { state: n, chars: count }));
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
            let k = a.key();
            let names = &o.names[k.lo as usize..k.hi as usize];
            let lo = k.lo as usize + names.partition_point(|n| n.len() <= pos || n[pos] < b);
            let hi = k.lo as usize + names.partition_point(|n| n.len() <= pos || n[pos] <= b);
            let ex = match &o.extra {
                Some(x) if k.extra != DEAD => prog.dfas[x.dfa].next(k.extra, b),
                _ => DEAD,
            };
            let objai = k.obj as usize;
            let text = &self.st.buf[f.buf as usize..];
            let names_live = (lo..hi).any(|i| self.name_ok(fi - 1, objai, i));
            let extra_live = ex != DEAD && {
                let d = &prog.dfas[(o.extra.as_ref().expect("extra").dfa).index()];
                match d.finite_count(ex) {
                    None => true,
                    Some(cnt) => cnt > self.seen_extra_with_prefix(fi - 1, objai, text),
                }
            };
            if !names_live && !extra_live {
                self.kill(ai);
            } else {
                let k = KeyProgress { extra: ex, lo: lo as u32, hi: hi as u32, obj: k.obj };
                self.set_alt(ai, a.with_key(k));
                any = true;
            }
        }
        any
    }

    fn str_close(&mut self, fi: usize) -> bool {
        self.close_with(fi, |rt, a| match &rt.prog().cores[a.core] {
            CoreRt::String { dfa, min, .. } => {
                rt.prog().dfas[*dfa].is_accept(a.str().state) && a.str().chars >= *min
            }
            _ => false,
        })
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
                a.alive && a.key().extra != DEAD && self.extra_ok(fi - 1, a.key().obj as usize)
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
            let objai = a.key().obj as usize;
            let (mut lo, mut hi) = (a.key().lo as usize, a.key().hi as usize);
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
                if a.key().extra == DEAD {
                    continue;
                }
                let d = &prog.dfas[x.dfa];
                let ex = d.run(a.key().extra, ext);
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
                    if prog.dfas[p].matches(&text) {
                        m |= 1 << i;
                    }
                }
                let node = x.combos[m];
                if !prog.nodes[node].is_empty() {
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
            let mut p = ObjProgress { members: a.obj().members + 1, value: node, ..a.obj() };
            match idx {
                Some(i) => {
                    let w = a.obj().seen as usize + i / 64;
                    let v = self.st.bits[w] | (1 << (i % 64));
                    self.set_bit(w, v);
                    if self.schema_order() {
                        p.next_order = o.props[i].order + 1;
                    }
                }
                None => {
                    let start = self.st.xtext.len() as u32;
                    self.st.xtext.extend_from_slice(text);
                    self.st.xk.push(XKey { alt: ai as u32, start, len: text.len() as u32 });
                }
            }
            self.set_alt(ai, a.with_obj(p));
        }
        let of = self.st.frames[oi];
        self.set_frame(oi, Frame { lex: Lex::Obj(ObjPhase::Colon), ws: 0, ..of });
    }
}

/// Per object alternative: (arena index, declared name index or `None` for an undeclared
/// key, value node).
type KeyChoices = smallvec::SmallVec<[(usize, Option<usize>, ExprId); 8]>;

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
        match f.lex {
            Lex::Root { .. } | Lex::Obj(_) | Lex::Arr(_) => STRUCTURE,
            Lex::Num => NUMBER,
            Lex::Lit { lit, pos } => {
                crate::recognizer::byte_set(&[LITERALS[lit as usize][pos as usize]])
            }
            Lex::Str(_) | Lex::Key(_) => [u64::MAX; 4],
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
        if f.kind() != Kind::Num || self.recording() {
            return None;
        }
        let p = &self.schema.program;
        let mut integer = false;
        for a in self.st.alts[f.alts as usize..].iter().filter(|a| a.alive) {
            let CoreRt::Number(n) = &p.cores[a.core] else { return None };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{SchemaOptions, SchemaWhitespace};
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
            whitespace: SchemaWhitespace::Separators { item: ", ".into(), key: ": ".into() },
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
