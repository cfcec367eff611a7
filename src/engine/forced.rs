//! Forced bytes for fast-forward, decided on *values* inside JSON strings.
//!
//! An exact JSON grammar never forces a byte inside a string: after `{"na` in a schema whose only
//! key is `name`, both `m` and `\` (the start of `\u006d`, which decodes to `m`) are possible. The
//! *value* is nevertheless forced — every completion spells the same key — so fast-forward may
//! append the plain byte `m`: it is one of the allowed spellings and loses no document value.
//!
//! [`forced_bytes`] probes any [`Recognizer`] byte by byte: a byte is forced when it is the only
//! one allowed, or when the only other allowed byte is `\` and the escape branch can spell
//! nothing but that same printable ASCII character (`\uXXXX` with the character's own code, in
//! either hex case, or `\/` for `/`). Multi-byte characters and everything else stop the run.

use crate::bytes::ByteSet;
use crate::recognizer::Recognizer;

/// Bytes allowed next, ascending.
fn allowed<R: Recognizer + ?Sized>(rec: &mut R) -> Vec<u8> {
    let set = ByteSet::from_fn(|b| {
        let ok = rec.try_push_byte(b);
        if ok {
            rec.pop_bytes(1);
        }
        ok
    });
    set.iter().collect()
}

/// Can the escape branch (after `\`) spell only the character `c`? Leaves `rec` as it found it.
fn escape_spells_only<R: Recognizer + ?Sized>(rec: &mut R, c: u8) -> bool {
    if !rec.try_push_byte(b'\\') {
        return false;
    }
    let mut pushed = 1;
    let ok = 'check: {
        let after = allowed(rec);
        for &e in &after {
            // `\/` spells `/`; every other short escape spells a different character.
            if !(e == b'u' || (e == b'/' && c == b'/')) {
                break 'check false;
            }
        }
        if !after.contains(&b'u') {
            break 'check true;
        }
        if !rec.try_push_byte(b'u') {
            break 'check false;
        }
        pushed += 1;
        let hex = format!("{:04x}", c);
        for h in hex.bytes() {
            let digits = allowed(rec);
            if digits.is_empty() || digits.iter().any(|d| !d.eq_ignore_ascii_case(&h)) {
                break 'check false;
            }
            if !rec.try_push_byte(digits[0]) {
                break 'check false;
            }
            pushed += 1;
        }
        true
    };
    rec.pop_bytes(pushed);
    ok
}

/// Write into `out` (cleared first) the bytes every completion starts with, up to `limit`,
/// stopping where the document may end (`accepting`) or where two different values are
/// possible. `rec` is left as it was.
pub(crate) fn forced_bytes<R: Recognizer + ?Sized>(
    rec: &mut R,
    accepting: impl Fn(&R) -> bool,
    limit: usize,
    out: &mut Vec<u8>,
) {
    out.clear();
    while out.len() < limit && !accepting(rec) {
        let bytes = allowed(rec);
        let next = match bytes.as_slice() {
            [b] => *b,
            [a, b] if *a == b'\\' || *b == b'\\' => {
                let c = if *a == b'\\' { *b } else { *a };
                if (0x20..0x7F).contains(&c) && c != b'"' && escape_spells_only(rec, c) {
                    c
                } else {
                    break;
                }
            }
            _ => break,
        };
        if !rec.try_push_byte(next) {
            break;
        }
        out.push(next);
    }
    rec.pop_bytes(out.len());
}
