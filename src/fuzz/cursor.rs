//! The generator's hold on the engine: a byte cursor over a compiled constraint's byte probe
//! (push one byte if the constraint allows it, pop it again, ask whether the bytes so far are a
//! complete document), with a small JSON bracket tracker beside it, and the completion search
//! that always finishes a document the budget has run out on.
//!
//! Because every engine is exact — a pushed byte always leaves a state from which some
//! document can still be completed (`docs/architecture.md`, "Invariants") — a depth-first
//! search that tries closing bytes first (`"`, `}`, `]`, short numbers, `null`/`false`) almost
//! never backtracks: its first path is the completion. The search is bounded (a depth limit
//! raised 64 → 256 → 1024 → … up to the byte budget, and a work budget in pushes) and says so when
//! it cannot finish, rather than running on.

use super::hints::{Hint, KeyHints};
use super::numbers::NumberHints;
use crate::constraint::tagged::InnerSlot;
use crate::constraint::CompiledConstraint;
use std::sync::Arc;

/// Where a JSON text stands after some bytes: nesting depth (containers as bits, 1 = object),
/// inside a string, after a backslash. Enough for the generator's policy and for a lower bound
/// on the bytes any completion needs (one closing byte per open container, one quote).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JsonPos {
    pub depth: u32,
    /// Bit `i` set: the container at depth `i + 1` is an object. Depths past 128 are not
    /// distinguished (the bit of depth 128 stands for all deeper ones).
    pub objects: u128,
    pub in_string: bool,
    pub escape: bool,
    /// Inside an object, between `{`/`,` and `:` (a key is expected or being written).
    pub in_key: bool,
}

impl JsonPos {
    fn step(mut self, b: u8) -> JsonPos {
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return self;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => {
                let bit = 1u128 << self.depth.min(127);
                if b == b'{' {
                    self.objects |= bit;
                } else {
                    self.objects &= !bit;
                }
                self.depth += 1;
                self.in_key = b == b'{';
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                self.in_key = false;
            }
            b',' => self.in_key = self.in_object(),
            b':' => self.in_key = false,
            _ => {}
        }
        self
    }

    /// Is the innermost open container an object?
    pub fn in_object(&self) -> bool {
        self.depth > 0 && self.objects & (1u128 << (self.depth - 1).min(127)) != 0
    }

    /// A lower bound on the bytes any completion needs.
    pub fn closing_bytes(&self) -> usize {
        self.depth as usize + usize::from(self.in_string)
    }
}

/// A byte cursor: the bytes generated so far, pushed on a byte probe of the engine.
pub(crate) struct Cursor {
    slot: InnerSlot,
    bytes: Vec<u8>,
    /// `pos[i]`: the JSON position after `bytes[..i]` (`pos[0]` the start).
    pos: Vec<JsonPos>,
    /// Pushes tried since the start (the work measure of every budget).
    pub work: u64,
}

impl Cursor {
    /// A cursor at the start of the output; `None` for constraints without a byte probe.
    pub fn new(compiled: &CompiledConstraint) -> Option<Cursor> {
        let slot = compiled.byte_probe()?;
        Some(Cursor { slot, bytes: Vec::new(), pos: vec![JsonPos::default()], work: 0 })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn json(&self) -> JsonPos {
        *self.pos.last().expect("start position")
    }

    /// Push `b` if the constraint allows it here.
    pub fn push(&mut self, b: u8) -> bool {
        self.work += 1;
        if self.slot.push(b) {
            self.bytes.push(b);
            let next = self.json().step(b);
            self.pos.push(next);
            true
        } else {
            false
        }
    }

    /// Undo the last push.
    pub fn pop(&mut self) {
        debug_assert!(!self.bytes.is_empty(), "pop at the start");
        self.slot.pop();
        self.bytes.pop();
        self.pos.pop();
    }

    pub fn pop_n(&mut self, n: usize) {
        for _ in 0..n {
            self.pop();
        }
    }

    /// Would `b` be accepted here? (Cursor unchanged.)
    pub fn allows(&mut self, b: u8) -> bool {
        let ok = self.push(b);
        if ok {
            self.pop();
        }
        ok
    }

    /// Push all of `bytes` or none (`false`: refused, cursor unchanged).
    pub fn push_all(&mut self, bytes: &[u8]) -> bool {
        for (i, &b) in bytes.iter().enumerate() {
            if !self.push(b) {
                self.pop_n(i);
                return false;
            }
        }
        true
    }

    /// Push the number literal `t` if the engine allows it and the number may end right after
    /// it (the document is complete, or a delimiter may follow); otherwise leave the cursor as
    /// it was. `scratch` is a buffer for the delimiter probe.
    pub fn push_number(&mut self, t: &[u8], scratch: &mut Vec<u8>) -> bool {
        if !self.push_all(t) {
            return false;
        }
        if self.accepting() {
            return true;
        }
        self.allowed_of(b",]} \t\n\r", scratch);
        if scratch.is_empty() {
            self.pop_n(t.len());
            return false;
        }
        true
    }

    /// A key of the engine state after the bytes so far, where the engine has small hashable
    /// states (free-form JSON, regex); see `InnerSlot::state_key`.
    pub fn state_key(&self) -> Option<u64> {
        self.slot.state_key()
    }

    /// A lower bound on the bytes any completion needs from here: the engine's where it has
    /// one (JSON Schema), else the JSON nesting's ([`JsonPos::closing_bytes`]) for JSON output
    /// and 0 for other languages.
    pub fn completion_bound(&mut self, json: bool) -> usize {
        let nesting = if json { self.json().closing_bytes() } else { 0 };
        self.slot.completion_bound().map_or(nesting, |b| b.max(nesting))
    }

    /// The shortest rest of the open string value, closing quote included, where the engine
    /// knows it (JSON Schema); tried by the completion search as one move.
    pub fn string_rest(&mut self) -> Option<Vec<u8>> {
        self.slot.string_rest()
    }

    /// Are the bytes so far a complete document?
    pub fn accepting(&self) -> bool {
        self.slot.accepting()
    }

    /// A superset of the bytes allowed next, from the engine without pushing
    /// ([`crate::recognizer::Recognizer::byte_superset`]): a candidate outside it needs no
    /// push to be refused. Between JSON values and in keys of declared names it holds a few
    /// bytes of the dozens the generator's alphabet and the completion search try. A
    /// candidate refused this way still counts as one push of [`Cursor::work`], so every
    /// budget buys the same search as before, only cheaper (counted as free, the completion
    /// search's levels that cannot succeed explored further within their share and cost more
    /// time than the refusals saved).
    pub fn superset(&mut self) -> crate::ByteSet {
        self.slot.byte_superset()
    }

    /// Is `b` outside `sup` (this state's [`Cursor::superset`])? Then it is refused without a
    /// push, counted as one.
    fn refused_unpushed(&mut self, sup: crate::ByteSet, b: u8) -> bool {
        let out = !sup.contains(b);
        self.work += u64::from(out);
        out
    }

    /// The bytes of `candidates` allowed next, in their order, into `out` (cleared first).
    pub fn allowed_of(&mut self, candidates: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let sup = self.superset();
        for &b in candidates {
            if !self.refused_unpushed(sup, b) && self.allows(b) {
                out.push(b);
            }
        }
    }
}

/// Every byte, closing ones first: the completion search's order. Quotes and brackets close
/// what is open, `,` ends a value where more must follow; `1` (before `0`, which would open `0.000…` where the value must be at least 1),
/// `0` and the letters of `null`, `false`, `true` make the shortest values;
/// then the rest of printable ASCII, whitespace, and the other bytes last.
pub(crate) fn closing_order() -> &'static [u8; 256] {
    static ORDER: std::sync::OnceLock<[u8; 256]> = std::sync::OnceLock::new();
    ORDER.get_or_init(|| {
        let first = b"\"}],10nulfasetr:ab";
        let mut order = Vec::with_capacity(256);
        let mut seen = [false; 256];
        let mut add = |b: u8, order: &mut Vec<u8>| {
            if !seen[b as usize] {
                seen[b as usize] = true;
                order.push(b);
            }
        };
        for &b in first {
            add(b, &mut order);
        }
        for b in (b'a'..=b'z').chain(b'A'..=b'Z').chain(b'0'..=b'9') {
            add(b, &mut order);
        }
        // A backslash only when nothing else will do: `\u005f` spells `_` in six bytes.
        for b in (0x21..=0x7e).filter(|&b| b != b'\\') {
            add(b, &mut order);
        }
        for b in [b' ', b'\\', b'\n', b'\t', b'\r'] {
            add(b, &mut order);
        }
        for b in 0..=255u8 {
            add(b, &mut order);
        }
        order.try_into().expect("256 bytes")
    })
}

/// Why a completion search stopped without a complete document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unfinished {
    /// No completion within the byte budget.
    Bytes,
    /// The work budget (pushes) ran out first.
    Work,
}

/// Extend the cursor to a complete document with at most `max_extra` more bytes, closing bytes
/// first, spending at most `max_work` pushes. On success the completion is pushed and its
/// length returned; on failure the cursor is as it was.
///
/// The depth limit starts at 64 or at the engine's bound on what any completion needs
/// ([`Cursor::completion_bound`]), whichever is more, and is raised ×4 up to `max_extra`
/// (past it the search fails at once); within a limit the first
/// path found is taken, which in practice is the first greedy closing-first path (no
/// backtracking). It is short, not proven shortest. Where the output is JSON, a
/// branch that cannot close its open containers within the limit is cut
/// ([`JsonPos::closing_bytes`]).
pub(crate) fn complete(
    cur: &mut Cursor,
    max_extra: usize,
    max_work: u64,
    json: bool,
    hints: &KeyHints,
    numbers: &NumberHints,
) -> Result<usize, Unfinished> {
    let end = cur.work + max_work;
    // No limit below the engine's bound on what any completion needs can succeed: start at
    // it (the bound is computed once here; per search node it cost more than it cut).
    let need = cur.completion_bound(json);
    if need > max_extra {
        return Err(Unfinished::Bytes);
    }
    let mut limit = 64usize.max(need).min(max_extra);
    loop {
        // A limit that is too small must not spend the whole budget exhausting its tree: each
        // but the last gets a 32nd of it. (An eighth each left 5/8 for a document that needs
        // 2 KB to close its required keys, so every walk cost ~80k pushes, mostly in searches
        // that could not succeed, and the run's budget ended after a few dozen documents.)
        let last = limit >= max_extra;
        let level_end = if last { end } else { cur.work + max_work / 32 };
        match dfs(cur, limit, level_end.min(end), json, hints, numbers) {
            Ok(n) => return Ok(n),
            Err(Unfinished::Work) if last || cur.work >= end => return Err(Unfinished::Work),
            Err(Unfinished::Bytes) if last => return Err(Unfinished::Bytes),
            Err(_) => limit = limit.saturating_mul(4).min(max_extra),
        }
    }
}

/// Do the bytes end where a JSON value may start (the document's start, or after `:`, `[` or
/// `,`, whitespace aside)? After an object's `,` a key comes instead, which the engine refuses
/// a number literal at after one push.
fn value_start(bytes: &[u8]) -> bool {
    match bytes.iter().rev().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        None => true,
        Some(b) => matches!(b, b':' | b'[' | b','),
    }
}

/// After this many equal bytes the search tries that byte last.
const REPEAT: usize = 8;
/// After this many digits it added to a number (letters and digits to a string), the search
/// tries those last.
const DEFER_RUN: usize = 2;

/// One depth-limited, closing-first depth-first search. Where a JSON object key has just been
/// opened, the `hints` (the schema's property names, required ones first, each with its closing
/// quote) are tried as single moves before single bytes: without them an open object takes the
/// shortest *additional* key (`""`) over and over and never spells a required one. Where a
/// value starts, the `numbers`' fixed literals are tried the same way (each kept only where
/// the number may end after it).
fn dfs(
    cur: &mut Cursor,
    limit: usize,
    work_end: u64,
    json: bool,
    hints: &KeyHints,
    numbers: &NumberHints,
) -> Result<usize, Unfinished> {
    let literals = numbers.fixed();
    let mut scratch: Vec<u8> = Vec::new();
    let order = closing_order();
    // One frame per move: the index of the next move to try (hints first where they apply,
    // then the 256 bytes in `order`, then slots 256..512: the deferred bytes in `order`, see
    // `DEFER_RUN`; slot 512: a byte that repeats the last `REPEAT` pushed ones is tried last
    // of all, deferred or not, so a run like `0.0000…` that could go on for ever gives way to
    // the byte that ends it), and the bytes the move taken pushed.
    let base = cur.len();
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    // Per frame where a key was just opened: the hints for that object (looked up once); where
    // a value starts, the number literals (`true` in `frame_numbers`).
    let mut frame_hints: Vec<Option<Arc<[Hint]>>> = vec![None];
    let mut frame_numbers: Vec<bool> = vec![false];
    let mut out_of_work = false;
    // Engine states reached (where the engine has a state key) and the fewest added bytes they
    // were reached with: a state met again no earlier has been searched already with at least
    // as much of the limit left, and found no end, so it is cut. Without it a regex like
    // `[a-z]{3,}@…` has the search spell every string of letters up to the limit.
    let mut reached: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    loop {
        let added = cur.len() - base;
        if cur.accepting() && (!json || cur.json().depth == 0) {
            return Ok(added);
        }
        let pos = cur.json();
        let key_opened = json && pos.in_key && pos.in_string && cur.bytes().last() == Some(&b'"');
        let top = stack.len() - 1;
        // Where a string value is open — at the search's start, or just opened by its move —
        // its shortest rest is tried first, as one move: a string under patterns that needs
        // a thousand characters (`Handwritten---string2`) was spelled byte by byte, 120–250k
        // pushes a document.
        let string_entered = json
            && pos.in_string
            && !pos.in_key
            && !pos.escape
            && (top == 0 || cur.bytes().last() == Some(&b'"'));
        if key_opened && frame_hints[top].is_none() {
            frame_hints[top] = Some(hints.at(cur.bytes()));
        } else if string_entered && frame_hints[top].is_none() {
            let rest: Vec<Hint> = cur.string_rest().into_iter().map(Hint::from).collect();
            frame_hints[top] = Some(rest.into());
        } else if json
            && frame_hints[top].is_none()
            && !literals.is_empty()
            && !pos.in_string
            && value_start(cur.bytes())
        {
            frame_hints[top] = Some(Arc::clone(&literals));
            frame_numbers[top] = true;
        }
        let here: &[Hint] = frame_hints[top].as_deref().unwrap_or(&[]);
        let n_hints = here.len();
        let mut pushed = 0;
        if added < limit && (!json || added + pos.closing_bytes() <= limit) {
            let bytes = &cur.bytes()[base..];
            let repeat = (bytes.len() >= REPEAT)
                .then(|| bytes[bytes.len() - REPEAT..].to_vec())
                .filter(|run| run.iter().all(|&b| b == run[0]))
                .map(|run| run[0]);
            // Loops broken by deferring: digits the search itself has strung on a number, and
            // letters and digits it has strung in a string (or in a non-JSON language), are
            // tried last once there are `DEFER_RUN` of them, after `e`, `.`, punctuation and
            // the closers. A number that cannot end yet (an `integer` at `0.63020502137`,
            // which `e11` makes whole) or a pattern that needs its separator next
            // (`^pbj:([a-z0-9-]+):…`) would otherwise have the search spell every longer
            // run first, up to the limit: 10^depth or 36^depth pushes.
            let defer_digits = json
                && !pos.in_string
                && bytes.iter().rev().take_while(|b| b.is_ascii_digit()).count() >= DEFER_RUN;
            let defer_alnum = (!json || (pos.in_string && !pos.escape))
                && bytes.iter().rev().take_while(|b| b.is_ascii_alphanumeric()).count()
                    >= DEFER_RUN;
            // (A backslash waits with them: `pb\u006a` is a poor way to spell `pbj`.)
            // Right after `{`, the object's end before a key: closing-first puts `"` first
            // (it closes strings), which here would open a key and, through the hints, fill
            // every object that may be empty with its first property.
            let obj_start = json && !pos.in_string && bytes.last() == Some(&b'{');
            let order_at = |m: usize| match order[m] {
                b'"' if obj_start => b'}',
                b'}' if obj_start => b'"',
                b => b,
            };
            let deferred = |b: u8| {
                (defer_digits && b.is_ascii_digit())
                    || (defer_alnum && (b.is_ascii_alphanumeric() || b == b'\\'))
            };
            // Moves whose first byte is outside the engine's superset are refused unpushed
            // (the state does not change until a move is taken).
            let sup = cur.superset();
            while stack[top].0 < n_hints + 257 + 256 {
                if cur.work >= work_end {
                    out_of_work = true;
                    break;
                }
                let k = stack[top].0;
                stack[top].0 += 1;
                let n = if k < n_hints {
                    let pushed = added + here[k].len() <= limit
                        && here[k].first().is_some_and(|&b| !cur.refused_unpushed(sup, b))
                        && if frame_numbers[top] {
                            cur.push_number(&here[k], &mut scratch)
                        } else {
                            cur.push_all(&here[k])
                        };
                    if !pushed {
                        continue;
                    }
                    here[k].len()
                } else {
                    let m = k - n_hints;
                    let b = if m < 256 {
                        let b = order_at(m);
                        if repeat == Some(b) || deferred(b) {
                            continue;
                        }
                        b
                    } else if m < 512 {
                        // The deferred bytes, but the repeated one still last: a search at
                        // `0.00` that needs a `2` must not spell `0.000…` to the limit first.
                        let b = order_at(m - 256);
                        if !deferred(b) || repeat == Some(b) {
                            continue;
                        }
                        b
                    } else {
                        match repeat {
                            Some(r) => r,
                            None => continue,
                        }
                    };
                    if cur.refused_unpushed(sup, b) || !cur.push(b) {
                        continue;
                    }
                    1
                };
                if let Some(key) = cur.state_key() {
                    let at = added + n;
                    match reached.get(&key) {
                        Some(&first) if first <= at && !cur.accepting() => {
                            cur.pop_n(n);
                            continue;
                        }
                        _ => {
                            reached.insert(key, at);
                        }
                    }
                }
                pushed = n;
                break;
            }
        }
        if pushed > 0 {
            stack[top].1 = pushed;
            stack.push((0, 0));
            frame_hints.push(None);
            frame_numbers.push(false);
            continue;
        }
        // Exhausted here (or out of work): go back up.
        stack.pop();
        frame_hints.pop();
        frame_numbers.pop();
        let Some(&(_, n)) = stack.last() else {
            return Err(if out_of_work { Unfinished::Work } else { Unfinished::Bytes });
        };
        cur.pop_n(n);
        if out_of_work {
            let rest = cur.len() - base;
            cur.pop_n(rest);
            return Err(Unfinished::Work);
        }
    }
}
