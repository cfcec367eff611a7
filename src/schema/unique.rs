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
//! of a `uniqueItems` array to offer only open cores plus `null`/booleans, and at least one
//! open core (so the array can always grow). Finite item languages (`enum`, `const`, bounded
//! strings or numbers, integers — `0` and `-0` admit only one value) are refused with
//! [`super::SchemaErrorKind::Unsupported`] naming `uniqueItems`.

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

/// Is the item node `e` of a `uniqueItems` array decided exactly: empty, or only open cores
/// and `null`/booleans, with at least one open core unless the position is `optional` (at or
/// after `minItems`, no `contains`: the runtime then offers it only while a `true`/`false`/
/// `null` it allows is still unused, see [`fresh_literal`])?
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
        } else if !matches!(cores[c], CoreRt::Null | CoreRt::Bool(_)) {
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

/// For an item node of only `null`/boolean cores: is one of its literals not yet `seen`?
/// `None` when the node has another kind of core (then a new value always exists).
pub(crate) fn fresh_literal(
    cores: &[CoreRt],
    node: &[RtCoreId],
    seen: impl Fn(&[u8]) -> bool,
) -> Option<bool> {
    let mut fresh = false;
    for &c in node {
        match cores[c] {
            CoreRt::Null => fresh |= !seen(&literal(b'n')),
            CoreRt::Bool(m) => {
                fresh |=
                    (m & 2 != 0 && !seen(&literal(b't'))) || (m & 1 != 0 && !seen(&literal(b'f')));
            }
            _ => return None,
        }
    }
    Some(fresh)
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
