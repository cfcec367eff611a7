//! Strings and keys in the recogniser: escapes decoded (RFC 8259 §7, surrogate pairs) with
//! every prefix of a `\\uXXXX` escape checked for a code point that can continue, and decoded
//! bytes fed to each alternative's automaton (strings) or to the declared names and the
//! undeclared-key automaton (keys).

use super::*;

fn utf8(cp: u32, out: &mut [u8; 4]) -> &[u8] {
    match char::from_u32(cp) {
        Some(c) => c.encode_utf8(out).as_bytes(),
        None => &out[..0],
    }
}

/// Decode the code point of `s` starting at byte `i` (valid UTF-8 assumed).
pub(super) fn cp_at(s: &[u8], i: usize) -> Option<u32> {
    std::str::from_utf8(&s[i..]).ok().and_then(|t| t.chars().next()).map(|c| c as u32)
}

impl<'a> Rt<'a> {
    pub(super) fn str_byte(&mut self, fi: usize, b: u8) -> bool {
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
                    if f.kind() == Kind::Key && self.cs.literal_keys && !self.key_may_escape(fi) {
                        return false;
                    }
                    if f.kind() == Kind::Str && self.cs.literal_values && !self.str_may_escape(fi) {
                        return false;
                    }
                    let live = if self.cs.plain_strings {
                        // Only what must be escaped: `"`, `\\` and the control characters.
                        self.range_live(fi, 0, 0x1F)
                            || self.range_live(fi, 0x22, 0x22)
                            || self.range_live(fi, 0x5C, 0x5C)
                    } else {
                        self.range_live(fi, 0, 0x10FFFF)
                    };
                    if !live {
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
                    // Under `plain_strings` a `\u` escape spells a control character only.
                    if self.cs.plain_strings && !self.range_live(fi, 0, 0x1F) {
                        return false;
                    }
                    self.set_escape(fi, Escape::Hex { n: 0, v: 0 });
                    return true;
                }
                if b == b'/' && self.cs.plain_strings {
                    return false;
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

    pub(super) fn set_escape(&mut self, fi: usize, e: Escape) {
        let f = self.st.frames[fi];
        self.set_frame(fi, Frame { lex: f.lex.with_escape(e), ..f });
    }

    /// Hex digit `b` of a `\uXXXX` escape with `n` digits of value `v` so far (`high`: this
    /// escape is the low half of a surrogate pair after `high`). Each prefix of the escape must
    /// leave some code point that continues the string.
    pub(super) fn hex_byte(&mut self, fi: usize, high: Option<u16>, n: u8, v: u16, b: u8) -> bool {
        let Some(d) = hex_val(b) else { return false };
        let v = (v << 4) | u16::from(d);
        let n = n + 1;
        // Under `plain_strings` only control characters (U+0000–U+001F) may be `\u`-escaped,
        // so no surrogate pair either.
        let cap = if self.cs.plain_strings { 0x1F } else { 0xFFFF };
        if n < 4 {
            let shift = 4 * (4 - u32::from(n));
            let lo = u32::from(v) << shift;
            let hi = (lo + (1 << shift) - 1).min(cap);
            if lo > hi {
                return false;
            }
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
        if v > cap {
            return false;
        }
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
    pub(super) fn hex_range_live(&self, fi: usize, lo: u32, hi: u32) -> bool {
        if self.range_live(fi, lo, hi.min(0xD7FF)) || self.range_live(fi, lo.max(0xE000), hi) {
            return true;
        }
        let (a, b) = (lo.max(0xD800), hi.min(0xDBFF));
        a <= b && self.range_live(fi, surrogate_pair(a, 0xDC00), surrogate_pair(b, 0xDFFF))
    }

    pub(super) fn low_range_live(&self, fi: usize, high: u16, lo: u32, hi: u32) -> bool {
        let (a, b) = (lo.max(0xDC00), hi.min(0xDFFF));
        let high = u32::from(high);
        a <= b && self.range_live(fi, surrogate_pair(high, a), surrogate_pair(high, b))
    }

    /// Can some code point in `lo..=hi` continue the string/key in frame `fi`?
    pub(super) fn range_live(&self, fi: usize, lo: u32, hi: u32) -> bool {
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
                        && self.str_item_fresh(fi, ai, Some((lo, hi)), p, true)
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

    /// For string alternative `ai` of frame `fi` when it is an item of a recording
    /// `uniqueItems` array whose core is not open: can the item, at progress `p` with its text
    /// so far, still complete to an unseen value (`pending`: inside a `\u` escape, the code
    /// points it can still spell)? Cores decided by their members
    /// ([`unique::string_members`]) compare the text with them; the others count the
    /// completions from `p` ([`unique::counted_fresh`]), skipped when `counted` is false (the
    /// text and `p` disagree in the middle of an escaped character). `true` for every other
    /// alternative, and for one that also serves a live array alternative without
    /// `uniqueItems` (duplicates are fine there).
    pub(super) fn str_item_fresh(
        &self,
        fi: usize,
        ai: usize,
        pending: Option<(u32, u32)>,
        p: StrProgress,
        counted: bool,
    ) -> bool {
        let pi = fi.wrapping_sub(1);
        if let Some(members) = self.item_members(fi, ai) {
            let text = unique::partial_string(&self.st.raw[self.st.frames[pi].item as usize + 1..]);
            return unique::fresh_member(members, &text, pending, |c| self.seen_item(pi, c));
        }
        if !counted {
            return true;
        }
        let Some(lang) = self.item_counted(fi, ai) else { return true };
        let text = unique::partial_string(&self.st.raw[self.st.frames[pi].item as usize + 1..]);
        unique::counted_fresh(lang, p.state, p.chars, &text, pending, self.seen_texts(pi))
    }

    /// The members that decide string alternative `ai` of frame `fi` (sorted bytewise), when
    /// [`Rt::str_item_fresh`] restricts it; `None` otherwise.
    pub(super) fn item_members(&self, fi: usize, ai: usize) -> Option<&'a [Box<[u8]>]> {
        let prog = self.prog();
        if prog.unique_members.is_empty() {
            return None;
        }
        let members = prog.unique_members.get(&self.st.alts[ai].core)?;
        self.unique_item(fi, ai).then_some(members.as_slice())
    }

    /// The language of string alternative `ai` of frame `fi` when [`Rt::str_item_fresh`]
    /// decides it by counting; `None` otherwise.
    pub(super) fn item_counted(&self, fi: usize, ai: usize) -> Option<unique::StrLang<'a>> {
        let prog = self.prog();
        let core = self.st.alts[ai].core;
        if prog.unique_counted.is_empty() || !prog.unique_counted.contains(&core) {
            return None;
        }
        let CoreRt::String { dfa, min, max } = prog.cores[core] else { return None };
        self.unique_item(fi, ai).then(|| unique::StrLang { dfa: &prog.dfas[dfa], min, max })
    }

    /// Is alternative `ai` of frame `fi` an item of a recording `uniqueItems` array that
    /// serves no live array alternative without it?
    fn unique_item(&self, fi: usize, ai: usize) -> bool {
        if fi == 0 {
            return false;
        }
        let a = self.st.alts[ai];
        let pi = fi - 1;
        let pf = self.st.frames[pi];
        if pf.kind() != Kind::Arr || !pf.uniq {
            return false;
        }
        !self.alt_range(pi).enumerate().any(|(li, pj)| {
            let p = self.st.alts[pj];
            a.serves(li) && p.alive && !self.is_unique(p.core)
        })
    }

    /// For string alternative `ai` of the top frame decided by counting: the bytes that
    /// continue its text so far along an earlier item of its array (`None` when there are
    /// none). A token that starts with another byte leaves every earlier item behind, so only
    /// the automaton state decides it; the others depend on the items written, and the mask
    /// walks them with the recogniser.
    pub(super) fn counted_risky_bytes(&self, fi: usize, ai: usize) -> Option<crate::ByteSet> {
        self.item_counted(fi, ai)?;
        let pi = fi - 1;
        let text = unique::partial_string(&self.st.raw[self.st.frames[pi].item as usize + 1..]);
        let mut set = crate::ByteSet::EMPTY;
        for t in self.seen_texts(pi) {
            if let Some(&b) = t.strip_prefix(text.as_slice()).and_then(|r| r.first()) {
                set.insert(b);
            }
        }
        (!set.is_empty()).then_some(set)
    }

    /// The decoded texts of the string items the `uniqueItems` array in frame `pi` has
    /// completed.
    pub(super) fn seen_texts(&self, pi: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let f = &self.st.frames[pi];
        self.st.xk[f.xk as usize..].iter().filter(|x| x.alt == NONE).filter_map(|x| {
            unique::canon_text(&self.st.xtext[x.start as usize..(x.start + x.len) as usize])
        })
    }

    /// After an escaped character was fed byte by byte: the alternatives decided by counting
    /// must still have an unseen completion ([`Rt::str_item_fresh`]).
    fn counted_pass(&mut self, fi: usize) -> bool {
        let mut any = false;
        for ai in self.alt_range(fi) {
            let a = self.st.alts[ai];
            if !a.alive {
                continue;
            }
            if self.item_counted(fi, ai).is_some()
                && !self.str_item_fresh(fi, ai, None, a.str(), true)
            {
                self.kill(ai);
            } else {
                any = true;
            }
        }
        any
    }

    pub(super) fn feed_cp(&mut self, fi: usize, cp: u32) -> bool {
        let mut tmp = [0u8; 4];
        let bytes: smallvec::SmallVec<[u8; 4]> = utf8(cp, &mut tmp).iter().copied().collect();
        if bytes.is_empty() {
            return false;
        }
        if !bytes.iter().all(|&b| self.feed_with(fi, b, false)) {
            return false;
        }
        self.st.frames[fi].kind() != Kind::Str
            || self.prog().unique_counted.is_empty()
            || self.counted_pass(fi)
    }

    /// One decoded content byte into every alternative of a string or key frame.
    pub(super) fn feed(&mut self, fi: usize, b: u8) -> bool {
        self.feed_with(fi, b, true)
    }

    /// [`Rt::feed`]; `counted`: the byte is the end of the item text so far (not one byte of
    /// an escaped character, whose text is already complete; see [`Rt::str_item_fresh`]).
    fn feed_with(&mut self, fi: usize, b: u8, counted: bool) -> bool {
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
                let CoreRt::String { dfa, min, max } = &prog.cores[a.core] else {
                    continue;
                };
                let d = &prog.dfas[*dfa];
                let p = a.str();
                let n = d.next(p.state, b);
                let count = p.chars + u32::from(lead);
                // Without a `maxLength` the count is only ever compared with `minLength`
                // (`chars >= min`, `chars + k >= min`): held there, two strings in the same
                // automaton state are the same state (for the mask cache, and for the fuzzer's
                // completion search, which cuts states it has seen).
                let count = if *max == u32::MAX { count.min(*min) } else { count };
                // Live iff the fewest code points that complete it still fit under `max`.
                if n == DEAD
                    || count.saturating_add(d.short(n)) > *max
                    || !self.str_item_fresh(
                        fi,
                        ai,
                        None,
                        StrProgress { state: n, chars: count },
                        counted,
                    )
                {
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

    pub(super) fn str_close(&mut self, fi: usize) -> bool {
        self.close_with(fi, |rt, a| match &rt.prog().cores[a.core] {
            CoreRt::String { dfa, min, .. } => {
                rt.prog().dfas[*dfa].is_accept(a.str().state) && a.str().chars >= *min
            }
            _ => false,
        })
    }
}
