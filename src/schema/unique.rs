//! `uniqueItems`: canonical forms of completed items, and which item schemas the runtime
//! decides exactly.
//!
//! The runtime records the text of each item of a `uniqueItems` array and, when the item
//! completes, compares its canonical form ([`canonical`]: JSON equality, so `1 == 1.0`, key
//! order irrelevant, escapes decoded) with the earlier items'; a duplicate is refused at the
//! byte that completes it. `true`, `false` and `null` are known from their first byte and
//! refused there.
//!
//! Refusing at completion is exact only when no partial item is a dead end, i.e. when every
//! live prefix of an item has infinitely many distinct completions (then some completion is
//! always new). [`open_core`] decides that per core; the compiler requires every item position
//! of a `uniqueItems` array to offer only open cores plus `null`/booleans and strings, and at
//! least one open core (so the array can always grow). Other finite item languages (`enum`,
//! `const` of numbers, bounded numbers, integers — `0` and `-0` admit only one value) are
//! refused with [`super::SchemaErrorKind::Unsupported`] naming `uniqueItems`.
//!
//! Strings that are not open are decided exactly while they are typed: an item prefix is
//! dead iff every completion of it is a value an earlier item has. A language of at most
//! [`MAX_MEMBERS`] members (an `enum` of names, the usual "list of distinct options") is
//! decided by its members ([`string_members`], [`fresh_member`]); any other (strings bounded
//! by `maxLength`, patterns with finitely many completions from some state) by counting the
//! completions from the item's automaton state ([`counted_fresh`]): with `k` earlier items
//! that start with the text so far, the count stops at `k + 1` (then one completion is new),
//! and only a count of at most `k` is listed and compared. Completions are counted over the
//! decoded content, so values, not spellings. The runtime checks after every byte, inside
//! every `\u` escape and at the opening quote, and offers another item only while a value
//! is unused ([`fresh_literal`]), so no partial item is a dead end there either. The counts
//! spend a per-mask fuel ([`COUNT_FUEL`]); past it the engine reports an error instead of a
//! mask.

use super::compile::{CoreRt, DfaId, ExprId, RtCoreId};
use super::number::Dec;
use super::string::ByteDfa;

/// The canonical form of a `true`/`false`/`null` item from its first byte.
pub(crate) fn literal(b: u8) -> [u8; 1] {
    [b]
}

/// Append the canonical form of the JSON value at the start of `s` (whitespace allowed
/// around it; bytes after it are ignored); `None` if `s` does not start with a JSON value.
pub(crate) fn canonical(s: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let mut i = skip_ws(s, 0);
    match *s.get(i)? {
        b't' => {
            out.push(b't');
            Some(i + 4)
        }
        b'f' => {
            out.push(b'f');
            Some(i + 5)
        }
        b'n' => {
            out.push(b'n');
            Some(i + 4)
        }
        b'"' => {
            let (text, end) = string(s, i)?;
            out.push(b's');
            out.extend_from_slice(format!("{}:", text.len()).as_bytes());
            out.extend_from_slice(text.as_bytes());
            Some(end)
        }
        b'[' => {
            out.push(b'[');
            i = skip_ws(s, i + 1);
            if s.get(i) == Some(&b']') {
                out.push(b']');
                return Some(i + 1);
            }
            loop {
                i = canonical(&s[i..], out)? + i;
                i = skip_ws(s, i);
                match *s.get(i)? {
                    b',' => i += 1,
                    b']' => {
                        out.push(b']');
                        return Some(i + 1);
                    }
                    _ => return None,
                }
            }
        }
        b'{' => {
            let mut members: Vec<(String, Vec<u8>)> = Vec::new();
            i = skip_ws(s, i + 1);
            if s.get(i) != Some(&b'}') {
                loop {
                    i = skip_ws(s, i);
                    let (key, end) = string(s, i)?;
                    i = skip_ws(s, end);
                    if s.get(i) != Some(&b':') {
                        return None;
                    }
                    let mut v = Vec::new();
                    i = canonical(&s[i + 1..], &mut v)? + i + 1;
                    members.push((key, v));
                    i = skip_ws(s, i);
                    match *s.get(i)? {
                        b',' => i += 1,
                        b'}' => break,
                        _ => return None,
                    }
                }
            }
            members.sort();
            out.push(b'{');
            for (k, v) in members {
                out.extend_from_slice(format!("{}:", k.len()).as_bytes());
                out.extend_from_slice(k.as_bytes());
                out.extend_from_slice(&v);
            }
            out.push(b'}');
            Some(i + 1)
        }
        _ => {
            let start = i;
            while i < s.len() && matches!(s[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                i += 1;
            }
            let d = Dec::parse(std::str::from_utf8(&s[start..i]).ok()?)?;
            out.push(b'#');
            d.canon(out);
            out.push(b';');
            Some(i)
        }
    }
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && crate::json::syntax::is_ws(s[i]) {
        i += 1;
    }
    i
}

/// The decoded string token starting at `s[i] == '"'`, and the index after it.
fn string(s: &[u8], i: usize) -> Option<(String, usize)> {
    if s.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    while j < s.len() {
        match s[j] {
            b'\\' => j += 2,
            b'"' => {
                let text: String = serde_json::from_slice(&s[i..=j]).ok()?;
                return Some((text, j + 1));
            }
            _ => j += 1,
        }
    }
    None
}

/// Does every live prefix of a value of this core have infinitely many distinct
/// completions? (`false` when unsure.)
pub(crate) fn open_core(
    cores: &[CoreRt],
    nodes: &[Vec<RtCoreId>],
    dfas: &[ByteDfa],
    any_dfa: DfaId,
    c: RtCoreId,
) -> bool {
    match &cores[c] {
        CoreRt::Null | CoreRt::Bool(_) => false,
        // `0` and `-0` only complete to zero for integers; bounds pin values at their ends.
        CoreRt::Number(n) => {
            !n.integer
                && n.values.is_none()
                && n.lo.is_none()
                && n.hi.is_none()
                && n.multiple.is_none()
                && n.not_multiples.is_empty()
        }
        CoreRt::String { dfa, max, .. } => {
            *max == u32::MAX
                && (*dfa == any_dfa || {
                    let d = &dfas[*dfa];
                    (1..d.n_states() as u32).all(|s| d.finite_count(s).is_none())
                })
        }
        // More items (or undeclared keys) can always follow: arrays (objects) of every length.
        CoreRt::Array { items, max, contains, unique, .. } => {
            *max == u32::MAX && contains.is_none() && !*unique && !nodes[*items].is_empty()
        }
        CoreRt::Object(o) => {
            o.max == u32::MAX
                && o.extra.as_ref().is_some_and(|x| {
                    x.patterns.is_empty()
                        && !nodes[x.combos[0]].is_empty()
                        && dfas[x.dfa].finite_count(dfas[x.dfa].start()).is_none()
                })
        }
    }
}

/// The most members a string core of a `uniqueItems` item may have to be decided by its
/// members (each item byte compares the item's text with them).
pub(crate) const MAX_MEMBERS: u32 = 1024;

/// The members of a string core's language (UTF-8 bytes, in byte order) when it is finite
/// with at most [`MAX_MEMBERS`] of them (`max` code points at most); `None` otherwise.
pub(crate) fn string_members(
    core: &CoreRt,
    dfas: &[ByteDfa],
    any_dfa: DfaId,
) -> Option<Vec<Box<[u8]>>> {
    if !decided_by_members(core, dfas, any_dfa) {
        return None;
    }
    let CoreRt::String { dfa, max, .. } = core else { return None };
    let mut out: Vec<Box<[u8]>> =
        dfas[*dfa].members(MAX_MEMBERS)?.into_iter().map(Vec::into_boxed_slice).collect();
    out.retain(|m| {
        std::str::from_utf8(m).is_ok_and(|t| t.chars().count() as u64 <= u64::from(*max))
    });
    Some(out)
}

/// Is `core` a string core [`string_members`] lists (a finite language of at most
/// [`MAX_MEMBERS`] members)? Decided from the automaton's count, without listing them.
pub(crate) fn decided_by_members(core: &CoreRt, dfas: &[ByteDfa], any_dfa: DfaId) -> bool {
    let CoreRt::String { dfa, .. } = core else { return false };
    let d = &dfas[*dfa];
    *dfa != any_dfa && d.finite_count(d.start()).is_some_and(|n| n <= MAX_MEMBERS)
}

/// The members (sorted bytewise, as [`string_members`] lists them) that start with `text`:
/// one contiguous run.
pub(crate) fn members_with_prefix<'m>(members: &'m [Box<[u8]>], text: &[u8]) -> &'m [Box<[u8]>] {
    let lo = members.partition_point(|m| m.as_ref() < text);
    let n = members[lo..].partition_point(|m| m.starts_with(text));
    &members[lo..lo + n]
}

/// How many distinct values an item node of only `null`/boolean cores and strings offers,
/// counted up to `need` (a result of at least `need` means at least that many); `None` when
/// it has another kind of core, or when counting a string language ran out of fuel.
pub(crate) fn finite_supply(
    cores: &[CoreRt],
    node: &[RtCoreId],
    dfas: &[ByteDfa],
    any_dfa: DfaId,
    need: usize,
) -> Option<usize> {
    let mut values: rustc_hash::FxHashSet<Vec<u8>> = rustc_hash::FxHashSet::default();
    for &c in node {
        match cores[c] {
            CoreRt::Null => {
                values.insert(literal(b'n').to_vec());
            }
            CoreRt::Bool(m) => {
                if m & 2 != 0 {
                    values.insert(literal(b't').to_vec());
                }
                if m & 1 != 0 {
                    values.insert(literal(b'f').to_vec());
                }
            }
            CoreRt::String { dfa, min, max } => {
                let listed = match string_members(&cores[c], dfas, any_dfa) {
                    Some(m) => m.into_iter().map(Vec::from).collect(),
                    None => {
                        let lang = StrLang { dfa: &dfas[dfa], min, max };
                        if count_values(lang, need as u64)? >= need as u64 {
                            return Some(need);
                        }
                        list_values(lang, need as u64)?
                    }
                };
                for m in listed {
                    let mut canon = Vec::new();
                    string_canon(&m, &mut canon);
                    values.insert(canon);
                }
            }
            _ => return None,
        }
    }
    Some(values.len())
}

/// The canonical form ([`canonical`]) of the string item with UTF-8 text `m`.
pub(crate) fn string_canon(m: &[u8], out: &mut Vec<u8>) {
    use std::io::Write;
    out.push(b's');
    write!(out, "{}:", m.len()).expect("writing to a Vec");
    out.extend_from_slice(m);
}

/// The text of a string item so far: `raw` is its JSON text after the opening quote, decoded
/// up to an escape not yet complete (a high surrogate waiting for its low half counts as
/// incomplete); a character's leading UTF-8 bytes are kept as they are.
pub(crate) fn partial_string(raw: &[u8]) -> Vec<u8> {
    use crate::json::syntax::{
        escape_char, hex_val, surrogate_pair, HIGH_SURROGATES, LOW_SURROGATES,
    };
    let hex4 = |i: usize| -> Option<u32> {
        raw.get(i..i + 4)?.iter().try_fold(0u32, |v, &b| Some(v << 4 | u32::from(hex_val(b)?)))
    };
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        let Some(&e) = raw.get(i + 1) else { break };
        let cp = if e == b'u' {
            let Some(v) = hex4(i + 2) else { break };
            if HIGH_SURROGATES.contains(&v) {
                let Some(lo) = hex4(i + 8).filter(|lo| LOW_SURROGATES.contains(lo)) else { break };
                if raw.get(i + 6..i + 8) != Some(b"\\u") {
                    break;
                }
                i += 12;
                surrogate_pair(v, lo)
            } else {
                i += 6;
                v
            }
        } else {
            let Some(c) = escape_char(e) else { break };
            i += 2;
            u32::from(c)
        };
        let Some(c) = char::from_u32(cp) else { break };
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    out
}

/// Can a string item whose text so far is `text` (see [`partial_string`]) still become a
/// member of `members` not `seen`? `pending`: inside a `\u` escape, the range of code points
/// it can still spell, which the member's next character must lie in.
pub(crate) fn fresh_member(
    members: &[Box<[u8]>],
    text: &[u8],
    pending: Option<(u32, u32)>,
    seen: impl Fn(&[u8]) -> bool,
) -> bool {
    let mut canon = Vec::new();
    members_with_prefix(members, text).iter().any(|m| {
        if let Some((lo, hi)) = pending {
            let next = std::str::from_utf8(&m[text.len()..]).ok().and_then(|t| t.chars().next());
            if !next.is_some_and(|c| (lo..=hi).contains(&(c as u32))) {
                return false;
            }
        }
        canon.clear();
        string_canon(m, &mut canon);
        !seen(&canon)
    })
}

/// Is the item node `e` of a `uniqueItems` array decided exactly: empty, or only open cores,
/// `null`/booleans and strings decided by their members ([`string_members`]), with at least
/// one open core unless the position is `optional` (at or after `minItems`, no `contains`: the
/// runtime then offers it only while a value it allows is still unused, see
/// [`fresh_literal`])?
pub(crate) fn node_ok(
    cores: &[CoreRt],
    nodes: &[Vec<RtCoreId>],
    dfas: &[ByteDfa],
    any_dfa: DfaId,
    e: ExprId,
    optional: bool,
) -> bool {
    let cs = &nodes[e];
    if cs.is_empty() {
        return true;
    }
    let mut open = false;
    for &c in cs {
        if open_core(cores, nodes, dfas, any_dfa, c) {
            open = true;
        } else if !matches!(cores[c], CoreRt::Null | CoreRt::Bool(_) | CoreRt::String { .. }) {
            // Strings are decided by their members or by counting ([`counted_fresh`]).
            return false;
        }
    }
    open || optional
}

/// A number item whose text has reached its exponent (`…e`, `…e-`, `…e12`) has finitely many
/// completions, since an exponent has at most [`MAX_EXP_DIGITS`](super::number::MAX_EXP_DIGITS)
/// digits (and all of them are zero when the mantissa is: `0e5`): is one of their values not
/// `seen`, with `items` values seen so far? Without this check, `[4, 4E+000000000` (nine
/// exponent digits, value 4) was a dead end the mask allowed into. With a nonzero mantissa and
/// `room` exponent digits left there are at least `10^room` distinct values, so only arrays of
/// that many items are checked value by value.
pub(crate) fn exponent_fresh(text: &[u8], items: usize, seen: impl Fn(&[u8]) -> bool) -> bool {
    let Some(e) = text.iter().position(|&b| b == b'e' || b == b'E') else { return true };
    let mut canon = Vec::new();
    if text[..e].iter().all(|&b| !b.is_ascii_digit() || b == b'0') {
        return canonical(b"0", &mut canon).is_some() && !seen(&canon);
    }
    let k = text[e + 1..].iter().filter(|b| b.is_ascii_digit()).count();
    let room = super::number::MAX_EXP_DIGITS.saturating_sub(k) as u32;
    if 10u64.pow(room) > items as u64 {
        return true;
    }
    fn walk(
        cand: &mut Vec<u8>,
        digits: usize,
        room: u32,
        canon: &mut Vec<u8>,
        seen: &impl Fn(&[u8]) -> bool,
    ) -> bool {
        if digits > 0 {
            canon.clear();
            if canonical(cand, canon).is_some() && !seen(canon) {
                return true;
            }
        }
        for d in b'0'..=b'9' {
            if room == 0 {
                break;
            }
            cand.push(d);
            let fresh = walk(cand, digits + 1, room - 1, canon, seen);
            cand.pop();
            if fresh {
                return true;
            }
        }
        false
    }
    walk(&mut text.to_vec(), k, room, &mut canon, &seen)
}

/// Why an item node that [`node_ok`] refuses is not decided, for the error message.
pub(crate) fn undecided_reason(
    cores: &[CoreRt],
    nodes: &[Vec<RtCoreId>],
    dfas: &[ByteDfa],
    any_dfa: DfaId,
    node: &[RtCoreId],
) -> &'static str {
    for &c in node {
        if open_core(cores, nodes, dfas, any_dfa, c)
            || matches!(cores[c], CoreRt::Null | CoreRt::Bool(_) | CoreRt::String { .. })
        {
            continue;
        }
        return match &cores[c] {
            CoreRt::Number(n) if n.integer => {
                "items may be integers, whose partial texts can have only duplicate \
                 completions (`0` and `-0` are one value)"
            }
            CoreRt::Number(_) => {
                "items may be bounded numbers or multiples, whose partial texts can have only \
                 duplicate completions"
            }
            CoreRt::Array { .. } => {
                "items may be arrays with maxItems, contains or uniqueItems, which can have \
                 only duplicate completions"
            }
            _ => {
                "items may be objects without room for undeclared keys, which can have only \
                 duplicate completions"
            }
        };
    }
    "items offer only finitely many values (null, booleans, members) before minItems is \
     reached, fewer than minItems distinct ones, or also under contains"
}

/// For an item node of only `null`/boolean cores and strings decided by their members
/// (`members`) or by counting (`counted`, asked with the core): is one of its values not yet
/// `seen`? `None` when the node has another kind of core (then a new value always exists).
pub(crate) fn fresh_literal(
    cores: &[CoreRt],
    node: &[RtCoreId],
    members: &super::compile::UniqueMembers,
    seen: impl Fn(&[u8]) -> bool,
    counted: impl Fn(RtCoreId) -> Option<bool>,
) -> Option<bool> {
    let mut fresh = false;
    for &c in node {
        match cores[c] {
            CoreRt::Null => fresh |= !seen(&literal(b'n')),
            CoreRt::Bool(m) => {
                fresh |=
                    (m & 2 != 0 && !seen(&literal(b't'))) || (m & 1 != 0 && !seen(&literal(b'f')));
            }
            CoreRt::String { .. } if members.contains_key(&c) => {
                fresh |= fresh_member(&members[&c], &[], None, &seen);
            }
            _ => fresh |= counted(c)?,
        }
    }
    Some(fresh)
}

/// The string language of an item core that [`counted_fresh`] decides: its automaton over the
/// decoded UTF-8 content, and its `minLength`/`maxLength` in code points (`max ==
/// u32::MAX`: no bound).
#[derive(Clone, Copy)]
pub(crate) struct StrLang<'d> {
    pub dfa: &'d ByteDfa,
    pub min: u32,
    pub max: u32,
}

/// Automaton steps one mask (or one token's step) may spend counting and listing string
/// completions for `uniqueItems` ([`counted_fresh`]). Past it the engine reports
/// [`crate::EngineErrorKind::LimitExceeded`] naming [`COUNT_FUEL_NAME`] rather than a mask
/// that may be wrong. Ordinary schemas spend a few hundred steps per query: the count stops
/// as soon as it exceeds the items already written.
pub(crate) const COUNT_FUEL: u64 = 1 << 22;

/// The limit's name in [`crate::EngineErrorKind::LimitExceeded`].
pub(crate) const COUNT_FUEL_NAME: &str = "uniqueItems completion count (steps per mask)";

/// The deepest recursion of one count (code points and bytes of a completion walked);
/// deeper counts spend the fuel at once.
const MAX_COUNT_DEPTH: u32 = 4096;

thread_local! {
    /// Steps left to [`counted_fresh`] on this thread since the last [`refuel`].
    static FUEL: std::cell::Cell<u64> = const { std::cell::Cell::new(COUNT_FUEL) };
    /// Did a query run out of fuel since the last [`refuel`]? Its answer (not fresh) may be
    /// wrong, so the engine must not use the mask or the step it computed.
    static SPENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Give this thread [`COUNT_FUEL`] steps (at the start of a mask or a token's step).
pub(crate) fn refuel() {
    FUEL.set(COUNT_FUEL);
    SPENT.set(false);
}

/// Has a query run out of fuel since the last [`refuel`]?
pub(crate) fn fuel_spent() -> bool {
    SPENT.get()
}

fn burn() -> bool {
    let f = FUEL.get();
    if f == 0 {
        SPENT.set(true);
        return false;
    }
    FUEL.set(f - 1);
    true
}

/// Counts the completions of a string item from an automaton state, up to `cap + 1` (every
/// count above `cap` is reported as `cap + 1`), memoised per (state, code points).
/// Completions are byte strings over the decoded content, so distinct completions are
/// distinct values: escapes are not spellings here.
struct Counter<'d> {
    lang: StrLang<'d>,
    cap: u64,
    /// One representative byte per (byte class, leads a character), with the class size.
    groups: Vec<(u8, u32, bool)>,
    /// Per (state, code points): the count found and whether it is exact (below what was
    /// needed then) or a lower bound.
    memo: rustc_hash::FxHashMap<(u32, u32), (u64, bool)>,
}

impl<'d> Counter<'d> {
    fn new(lang: StrLang<'d>, cap: u64) -> Self {
        let mut groups: Vec<(u8, u32, bool)> = Vec::new();
        // Per (class, leads a character): its index in `groups` plus one.
        let mut index = [0u16; 512];
        for b in 0..=255u8 {
            let lead = b & 0xC0 != 0x80;
            let k = usize::from(lang.dfa.class_of(b)) << 1 | usize::from(lead);
            if index[k] == 0 {
                groups.push((b, 0, lead));
                index[k] = groups.len() as u16;
            }
            groups[usize::from(index[k]) - 1].1 += 1;
        }
        Counter { lang, cap, groups, memo: Default::default() }
    }

    /// Can `t`, reached with `chars` code points begun, still complete within `maxLength`?
    fn live(&self, t: u32, chars: u32) -> bool {
        t != super::string::DEAD && chars.saturating_add(self.lang.dfa.short(t)) <= self.lang.max
    }

    fn accepts(&self, s: u32, chars: u32) -> bool {
        self.lang.dfa.is_accept(s) && chars >= self.lang.min
    }

    /// The completions from live `s` with `chars` code points begun, counted up to `need`
    /// (`min(count, need)`); `None` when out of fuel. Children are tried nearest accepting
    /// state first, each asked only for what is still needed, so a count of `need` costs about
    /// `need` completions' worth of steps however long the strings may grow (`"^a*$"` with
    /// `maxLength: 1000000` stops after `need` levels).
    fn count(&mut self, s: u32, chars: u32, need: u64, depth: u32) -> Option<u64> {
        if need == 0 {
            return Some(0);
        }
        if let Some(&(v, exact)) = self.memo.get(&(s, chars)) {
            if exact || v >= need {
                return Some(v.min(need));
            }
        }
        if depth > MAX_COUNT_DEPTH {
            FUEL.set(0);
        }
        if !burn() {
            return None;
        }
        let d = self.lang.dfa;
        let (max, min) = (self.lang.max, self.lang.min);
        let total = match d.finite_count(s) {
            // No length bound left to cut the language: the automaton's own count.
            Some(n) if max == u32::MAX && chars >= min && n < (1 << 20) => u64::from(n),
            None if max == u32::MAX => need,
            _ => {
                let mut kids: smallvec::SmallVec<[(u32, u32, u32, u32); 16]> =
                    smallvec::SmallVec::new();
                for &(rep, size, lead) in &self.groups {
                    let t = d.next(s, rep);
                    let c2 = chars + u32::from(lead);
                    if self.live(t, c2) {
                        kids.push((d.short(t), t, c2, size));
                    }
                }
                kids.sort_unstable_by_key(|k| k.0);
                let mut total = u64::from(self.accepts(s, chars));
                for (_, t, c2, size) in kids {
                    if total >= need {
                        break;
                    }
                    let size = u64::from(size);
                    let sub = self.count(t, c2, (need - total).div_ceil(size), depth + 1)?;
                    total = total.saturating_add(size.saturating_mul(sub));
                }
                total
            }
        };
        let v = total.min(need);
        self.memo.insert((s, chars), (v, total < need));
        Some(v)
    }

    /// Completions from `s` whose first code point lies in `pending` (all when `None`),
    /// counted up to `cap + 1`.
    fn count_from(&mut self, s: u32, chars: u32, pending: Option<(u32, u32)>) -> Option<u64> {
        let need = self.cap + 1;
        let Some((lo, hi)) = pending else { return self.count(s, chars, need, 0) };
        let mut total = 0u64;
        for seq in first_chars(lo, hi) {
            if total >= need {
                break;
            }
            total = total.saturating_add(self.count_seq(
                s,
                chars,
                seq.as_slice(),
                true,
                need - total,
            )?);
        }
        Some(total.min(need))
    }

    fn count_seq(
        &mut self,
        s: u32,
        chars: u32,
        ranges: &[regex_syntax::utf8::Utf8Range],
        first: bool,
        need: u64,
    ) -> Option<u64> {
        let Some((r, rest)) = ranges.split_first() else { return self.count(s, chars, need, 0) };
        let c2 = chars + u32::from(first);
        let mut total = 0u64;
        let mut done: smallvec::SmallVec<[u8; 16]> = smallvec::SmallVec::new();
        for b in r.start..=r.end {
            if total >= need {
                break;
            }
            let class = self.lang.dfa.class_of(b);
            if done.contains(&class) {
                continue;
            }
            done.push(class);
            let t = self.lang.dfa.next(s, b);
            if !self.live(t, c2) {
                continue;
            }
            let n =
                (r.start..=r.end).filter(|&x| self.lang.dfa.class_of(x) == class).count() as u64;
            let sub = self.count_seq(t, c2, rest, false, (need - total).div_ceil(n))?;
            total = total.saturating_add(n.saturating_mul(sub));
        }
        Some(total.min(need))
    }

    /// Appends to `out` every completion from `s` (after `cur`) whose first code point lies
    /// in `pending`; only called where [`Counter::count_from`] found at most `cap`.
    fn list_from(
        &mut self,
        s: u32,
        chars: u32,
        pending: Option<(u32, u32)>,
        out: &mut Vec<Vec<u8>>,
    ) -> Option<()> {
        let mut cur = Vec::new();
        match pending {
            None => self.list(s, chars, &mut cur, out),
            Some((lo, hi)) => {
                for seq in first_chars(lo, hi) {
                    self.list_seq(s, chars, seq.as_slice(), true, &mut cur, out)?;
                }
                Some(())
            }
        }
    }

    fn list_seq(
        &mut self,
        s: u32,
        chars: u32,
        ranges: &[regex_syntax::utf8::Utf8Range],
        first: bool,
        cur: &mut Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) -> Option<()> {
        let Some((r, rest)) = ranges.split_first() else { return self.list(s, chars, cur, out) };
        let c2 = chars + u32::from(first);
        for b in r.start..=r.end {
            if !burn() {
                return None;
            }
            let t = self.lang.dfa.next(s, b);
            if !self.live(t, c2) {
                continue;
            }
            cur.push(b);
            self.list_seq(t, c2, rest, false, cur, out)?;
            cur.pop();
        }
        Some(())
    }

    fn list(
        &mut self,
        s: u32,
        chars: u32,
        cur: &mut Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) -> Option<()> {
        if self.accepts(s, chars) {
            out.push(cur.clone());
        }
        if out.len() as u64 > self.cap || cur.len() as u32 > MAX_COUNT_DEPTH {
            FUEL.set(0);
            burn();
            return None;
        }
        for b in 0..=255u8 {
            if !burn() {
                return None;
            }
            let t = self.lang.dfa.next(s, b);
            let c2 = chars + u32::from(b & 0xC0 != 0x80);
            if !self.live(t, c2) || self.count(t, c2, 1, 0)? == 0 {
                continue;
            }
            cur.push(b);
            self.list(t, c2, cur, out)?;
            cur.pop();
        }
        Some(())
    }
}

/// The UTF-8 byte-range sequences of the code points in `lo..=hi` (surrogates excluded).
fn first_chars(lo: u32, hi: u32) -> impl Iterator<Item = regex_syntax::utf8::Utf8Sequence> {
    let span = |a: u32, b: u32| {
        let (ca, cb) = (char::from_u32(a), char::from_u32(b));
        match (ca, cb) {
            (Some(ca), Some(cb)) if a <= b => Some(regex_syntax::utf8::Utf8Sequences::new(ca, cb)),
            _ => None,
        }
    };
    let below = span(lo, hi.min(0xD7FF));
    let above = span(lo.max(0xE000), hi.min(0x10FFFF));
    below.into_iter().flatten().chain(above.into_iter().flatten())
}

/// Can a string item of language `lang`, at automaton state `s` (live) with `chars` code
/// points begun and decoded text `text` so far, still complete to a value no earlier item
/// has (`seen`: the decoded texts of the earlier string items)? `pending`: inside a `\u`
/// escape, the range the next code point must lie in.
///
/// Exact, and cheap where it matters: with `k` earlier items starting with `text`, the
/// completions are counted only up to `k + 1` (more than `k` of them: one is new), and
/// listed and compared only when there are at most `k`. No earlier item starting with
/// `text` needs no count at all (a live state has a completion). Out of fuel ([`COUNT_FUEL`])
/// it answers `false` and [`fuel_spent`] tells the engine to discard what it computed.
pub(crate) fn counted_fresh<'s>(
    lang: StrLang<'_>,
    s: u32,
    chars: u32,
    text: &[u8],
    pending: Option<(u32, u32)>,
    seen: impl Iterator<Item = &'s [u8]>,
) -> bool {
    let rest: Vec<&[u8]> = seen.filter_map(|t| t.strip_prefix(text)).collect();
    if rest.is_empty() {
        return true;
    }
    let mut c = Counter::new(lang, rest.len() as u64);
    let Some(n) = c.count_from(s, chars, pending) else { return false };
    if n > rest.len() as u64 {
        return true;
    }
    let mut out = Vec::new();
    if c.list_from(s, chars, pending, &mut out).is_none() {
        return false;
    }
    out.iter().any(|w| !rest.contains(&w.as_slice()))
}

/// How many distinct values string language `lang` has, counted up to `need` (a count of
/// `need` means at least that many); `None` when out of fuel.
pub(crate) fn count_values(lang: StrLang<'_>, need: u64) -> Option<u64> {
    let s = lang.dfa.start();
    if s == super::string::DEAD || lang.dfa.short(s) > lang.max {
        return Some(0);
    }
    let mut c = Counter::new(lang, need.saturating_sub(1));
    c.count(s, 0, need, 0)
}

/// Every value of string language `lang` (UTF-8), when it has at most `cap`; `None`
/// otherwise or out of fuel.
pub(crate) fn list_values(lang: StrLang<'_>, cap: u64) -> Option<Vec<Vec<u8>>> {
    let s = lang.dfa.start();
    if s == super::string::DEAD || lang.dfa.short(s) > lang.max {
        return Some(Vec::new());
    }
    let mut c = Counter::new(lang, cap);
    if c.count(s, 0, cap + 1, 0)? > cap {
        return None;
    }
    let mut out = Vec::new();
    c.list_from(s, 0, None, &mut out)?;
    Some(out)
}

/// The decoded text of a string item from its canonical form ([`string_canon`]); `None` for
/// other values.
pub(crate) fn canon_text(canon: &[u8]) -> Option<&[u8]> {
    let rest = canon.strip_prefix(b"s")?;
    let colon = rest.iter().position(|&b| b == b':')?;
    Some(&rest[colon + 1..])
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn exponent_completions_are_counted_or_tried() {
        let canon = |t: &str| {
            let mut c = Vec::new();
            canonical(t.as_bytes(), &mut c).unwrap();
            c
        };
        let four = canon("4");
        let is_four = |c: &[u8]| c == four.as_slice();
        // Nine exponent digits: one value, 4, already seen.
        assert!(!super::exponent_fresh(b"4E+000000000", 1, is_four));
        assert!(super::exponent_fresh(b"4E+000000001", 1, is_four));
        // Eight: 4, 40, …, 4e9 (11 texts): fresh.
        assert!(super::exponent_fresh(b"4E+00000000", 1, is_four));
        // A zero mantissa: only 0.
        let zero = canon("0");
        assert!(!super::exponent_fresh(b"-0.0e", 1, |c: &[u8]| c == zero.as_slice()));
        assert!(super::exponent_fresh(b"0e", 1, is_four));
        // All of 4e0..4e9 seen, eight digits left: every completion is a duplicate.
        let seen: Vec<Vec<u8>> = (0..10).map(|i| canon(&format!("4e{i}"))).collect();
        assert!(!super::exponent_fresh(b"4e00000000", 10, |c: &[u8]| seen.iter().any(|s| s == c)));
        assert!(super::exponent_fresh(b"4e0000000", 10, |c: &[u8]| seen.iter().any(|s| s == c)));
    }

    fn canon(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        canonical(s.as_bytes(), &mut out).unwrap();
        out
    }

    #[test]
    fn partial_strings_decode_complete_escapes_only() {
        use super::partial_string as p;
        assert_eq!(p(br#"ab\n\u00e9"#), "ab\né".as_bytes());
        assert_eq!(p(br#"ab\u00e"#), b"ab");
        assert_eq!(p(br#"ab\"#), b"ab");
        assert_eq!(p(br#"\ud83d\ude00x"#), "😀x".as_bytes());
        assert_eq!(p(br#"a\ud83d"#), b"a", "a high surrogate waits for its low half");
        assert_eq!(p(br#"a\ud83d\ud"#), b"a");
        assert_eq!(p(&[b'a', 0xC3]), &[b'a', 0xC3], "a character's leading bytes are kept");
    }

    #[test]
    fn fresh_members_follow_the_text_the_pending_escape_and_the_seen_items() {
        use super::{fresh_member, string_canon};
        let members: Vec<Box<[u8]>> =
            ["a", "ab", "é"].iter().map(|m| m.as_bytes().into()).collect();
        let canon = |m: &str| {
            let mut c = Vec::new();
            string_canon(m.as_bytes(), &mut c);
            c
        };
        let seen_a = |c: &[u8]| c == canon("a").as_slice();
        assert!(fresh_member(&members, b"a", None, seen_a), "ab is still free");
        let seen_a_ab = |c: &[u8]| c == canon("a").as_slice() || c == canon("ab").as_slice();
        assert!(!fresh_member(&members, b"a", None, seen_a_ab));
        assert!(fresh_member(&members, b"", Some((0xE0, 0xEF)), seen_a_ab), "é by escape");
        assert!(!fresh_member(&members, b"", Some((0x61, 0x61)), seen_a_ab));
    }

    fn lang(d: &super::ByteDfa, max: u32) -> super::StrLang<'_> {
        super::StrLang { dfa: d, min: 0, max }
    }

    #[test]
    fn values_are_counted_up_to_the_cap_and_listed() {
        use super::{count_values, list_values};
        let d = crate::schema::string::dfa_from_regex("[ab]*", 100).unwrap();
        // "", a, b, aa, ab, ba, bb.
        assert_eq!(list_values(lang(&d, 2), 7).unwrap().len(), 7);
        assert_eq!(count_values(lang(&d, 2), 100), Some(7));
        assert_eq!(count_values(lang(&d, 2), 3), Some(3), "capped at what is needed");
        assert!(list_values(lang(&d, 2), 6).is_none(), "more than the cap: not listed");
        // Any content: 2-byte and 3-byte characters count once each (values, not bytes).
        let any = crate::schema::string::any_content();
        let one = count_values(lang(any, 1), 10_000_000).unwrap();
        assert_eq!(one, 1 + 0x10FFFF + 1 - 0x800, "every scalar value but surrogates, and \"\"");
    }

    #[test]
    fn a_prefix_is_fresh_while_an_unwritten_completion_remains() {
        use super::counted_fresh;
        let d = crate::schema::string::dfa_from_regex("[ab]*", 100).unwrap();
        let after_a = d.run(d.start(), b"a");
        let seen: Vec<&[u8]> = vec![b"a", b"ab"];
        // "a" → "", "a", "b": "aa" is new.
        assert!(counted_fresh(lang(&d, 2), after_a, 1, b"a", None, seen.iter().copied()));
        let seen3: Vec<&[u8]> = vec![b"a", b"ab", b"aa"];
        assert!(!counted_fresh(lang(&d, 2), after_a, 1, b"a", None, seen3.iter().copied()));
        // Inside `\u`: only completions whose next character is in the range count.
        assert!(counted_fresh(
            lang(&d, 2),
            after_a,
            1,
            b"a",
            Some((0x61, 0x61)),
            seen.iter().copied()
        ));
        assert!(!counted_fresh(
            lang(&d, 2),
            after_a,
            1,
            b"a",
            Some((0x62, 0x62)),
            seen.iter().copied()
        ));
        // Nothing written starts with the text: no count needed.
        assert!(counted_fresh(lang(&d, 2), d.start(), 0, b"", None, std::iter::empty()));
    }

    #[test]
    fn running_out_of_fuel_is_reported_not_guessed() {
        use super::{counted_fresh, fuel_spent, refuel, FUEL};
        let d = crate::schema::string::dfa_from_regex("[ab]*", 100).unwrap();
        let seen: Vec<Vec<u8>> = (0..40)
            .map(|i| format!("{i:b}").replace('0', "a").replace('1', "b").into_bytes())
            .collect();
        refuel();
        FUEL.set(5);
        assert!(!counted_fresh(
            lang(&d, 8),
            d.start(),
            0,
            b"",
            None,
            seen.iter().map(Vec::as_slice)
        ));
        assert!(fuel_spent());
        refuel();
        assert!(counted_fresh(
            lang(&d, 8),
            d.start(),
            0,
            b"",
            None,
            seen.iter().map(Vec::as_slice)
        ));
        assert!(!fuel_spent());
    }

    #[test]
    fn json_equality() {
        assert_eq!(canon("1"), canon("1.0"));
        assert_eq!(canon("1"), canon("10e-1"));
        assert_ne!(canon("1"), canon("-1"));
        assert_eq!(canon("-0"), canon("0.0"));
        assert_eq!(canon(r#"{"a":1,"b":[true]}"#), canon(r#"{ "b" : [ true ], "a" : 1.00 }"#));
        assert_ne!(canon(r#"{"a":1}"#), canon(r#"{"a":1,"b":1}"#));
        assert_eq!(canon(r#""\u0061""#), canon(r#""a""#));
        assert_ne!(canon(r#"["a"]"#), canon(r#""a""#));
        assert_ne!(canon(r#"[1,[2]]"#), canon(r#"[[1],2]"#));
        assert_ne!(canon(r#"{"ab":"c"}"#), canon(r#"{"a":"bc"}"#));
        assert_eq!(canon("1,2]"), canon("1"));
    }
}
