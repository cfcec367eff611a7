//! Objects and keys in the recogniser: which declared names and undeclared keys each object
//! alternative can still take (`required`, dependencies, `minProperties`/`maxProperties`,
//! property order), the object's phases, and keys read against the sorted declared names and
//! the undeclared-key automaton at once.

use super::*;

/// Per object alternative: (arena index, declared name index or `None` for an undeclared
/// key, value node).
pub(super) type KeyChoices = smallvec::SmallVec<[(usize, Option<usize>, ExprId); 8]>;

impl<'a> Rt<'a> {
    pub(super) fn obj(&self, core: RtCoreId) -> &'a ObjRt {
        match &self.prog().cores[core] {
            CoreRt::Object(o) => o,
            _ => unreachable!("object core expected"),
        }
    }

    pub(super) fn seen(&self, alt: &Alt, idx: usize) -> bool {
        (self.st.bits[alt.obj().seen as usize + idx / 64] >> (idx % 64)) & 1 == 1
    }

    pub(super) fn schema_order(&self) -> bool {
        self.cs.order == PropertyOrder::Schema
    }

    /// Seen undeclared keys of object alt `ai` (in frame `fi`) that start with `prefix`.
    pub(super) fn seen_extra_with_prefix(&self, fi: usize, ai: usize, prefix: &[u8]) -> u32 {
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
    pub(super) fn seen_extra(&self, fi: usize, ai: usize, key: &[u8]) -> bool {
        let f = &self.st.frames[fi];
        self.st.xk[f.xk as usize..].iter().any(|x| {
            x.alt as usize == ai
                && &self.st.xtext[x.start as usize..(x.start + x.len) as usize] == key
        })
    }

    /// Remaining undeclared keys (`u32::MAX` = unbounded).
    pub(super) fn extra_supply(&self, fi: usize, ai: usize, o: &ObjRt) -> u32 {
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
    pub(super) fn completable_after(&self, fi: usize, ai: usize, choice: Option<usize>) -> bool {
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

    pub(super) fn name_ok(&self, fi: usize, ai: usize, idx: usize) -> bool {
        let alt = self.st.alts[ai];
        let o = self.obj(alt.core);
        !o.props[idx].forbidden
            && !self.seen(&alt, idx)
            && (!self.schema_order() || o.props[idx].order >= alt.obj().next_order)
            && self.completable_after(fi, ai, Some(idx))
    }

    pub(super) fn extra_ok(&self, fi: usize, ai: usize) -> bool {
        let o = self.obj(self.st.alts[ai].core);
        o.extra.is_some()
            && self.extra_supply(fi, ai, o) > 0
            && self.completable_after(fi, ai, None)
    }

    pub(super) fn more_keys_possible(&self, fi: usize, ai: usize) -> bool {
        let o = self.obj(self.st.alts[ai].core);
        self.extra_ok(fi, ai) || (0..o.names.len()).any(|i| self.name_ok(fi, ai, i))
    }

    pub(super) fn can_close_obj(&self, alt: &Alt) -> bool {
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

    pub(super) fn obj_byte(&mut self, fi: usize, b: u8) -> bool {
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

    pub(super) fn obj_close(&mut self, fi: usize) -> bool {
        self.close_with(fi, |rt, a| rt.can_close_obj(a))
    }

    pub(super) fn key_start(&mut self, fi: usize) -> bool {
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
            self.st.alts.push(Alt::serving(a.core, li, false).with_key(k));
        }
        if self.st.alts.len() == start {
            return false;
        }
        let frame = self.st.open_frame(Lex::Key(Escape::None), start);
        self.st.frames.push(frame);
        true
    }

    pub(super) fn key_close(&mut self, fi: usize) -> bool {
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
    pub(super) fn extra_oks(&self, fi: usize) -> smallvec::SmallVec<[bool; 8]> {
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
    pub(super) fn key_choices(
        &self,
        fi: usize,
        ext: &[u8],
        choices: &mut KeyChoices,
        xoks: Option<&[bool]>,
    ) {
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
    pub(super) fn key_apply(&mut self, fi: usize, text: &[u8], choices: &KeyChoices) {
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
