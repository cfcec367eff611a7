//! The JSON lexical layer (RFC 8259) shared by the free-form engine ([`super::lexer`]) and the
//! schema engine (`crate::schema`): whitespace, literals, string escapes, UTF-16 surrogates,
//! UTF-8 sequences (Unicode table 3-7) and the number grammar as a byte-at-a-time machine.
//!
//! Both engines walk bytes one at a time and keep their own per-value state, so what they
//! share is small functions and tables, each written once here. Everything is `#[inline]`
//! and branch-for-branch what the engines had before, so neither engine pays for sharing.
//! Layering: this module knows no schema; `crate::schema` imports from here, never the reverse.

/// JSON whitespace (RFC 8259 §2: space, tab, line feed, carriage return).
#[inline]
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The value of a hexadecimal digit of a `\uXXXX` escape (either case).
#[inline]
pub(crate) fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The literal names (RFC 8259 §3), indexed by [`literal_index`].
pub(crate) const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// Which of [`LITERALS`] starts with `b`.
#[inline]
pub(crate) fn literal_index(b: u8) -> Option<u8> {
    match b {
        b't' => Some(0),
        b'f' => Some(1),
        b'n' => Some(2),
        _ => None,
    }
}

/// The character a one-letter escape `\b` stands for (RFC 8259 §7), or `None` when `b` is
/// not one (`u` starts a `\uXXXX` escape and is not one either).
#[inline]
pub(crate) fn escape_char(b: u8) -> Option<u8> {
    match b {
        b'"' => Some(b'"'),
        b'\\' => Some(b'\\'),
        b'/' => Some(b'/'),
        b'b' => Some(0x08),
        b'f' => Some(0x0C),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        _ => None,
    }
}

/// UTF-16 high (leading) surrogates: a `\uD8xx` escape must be followed by a low one.
pub(crate) const HIGH_SURROGATES: std::ops::RangeInclusive<u32> = 0xD800..=0xDBFF;
/// UTF-16 low (trailing) surrogates.
pub(crate) const LOW_SURROGATES: std::ops::RangeInclusive<u32> = 0xDC00..=0xDFFF;

/// The code point of the surrogate pair `high`, `low` (RFC 8259 §7, RFC 2781 §2.2).
#[inline]
pub(crate) fn surrogate_pair(high: u32, low: u32) -> u32 {
    debug_assert!(HIGH_SURROGATES.contains(&high) && LOW_SURROGATES.contains(&low));
    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
}

/// The allowed ranges of a UTF-8 continuation byte (Unicode table 3-7), indexed by the range
/// code [`utf8_lead`] gives: 0 is the general range; 1–4 are the restricted second bytes
/// after `E0` (no overlongs), `ED` (no surrogates), `F0` (no overlongs) and `F4` (nothing past
/// U+10FFFF).
pub(crate) const UTF8_CONTINUATION: [(u8, u8); 5] =
    [(0x80, 0xBF), (0xA0, 0xBF), (0x80, 0x9F), (0x90, 0xBF), (0x80, 0x8F)];

/// For the lead byte of a multi-byte UTF-8 sequence: how many continuation bytes follow and
/// the range code (into [`UTF8_CONTINUATION`]) of the first of them; the later ones are always
/// in range 0. `None` for ASCII, continuation bytes and bytes that never start a character.
#[inline]
pub(crate) fn utf8_lead(b: u8) -> Option<(u8, u8)> {
    match b {
        0xC2..=0xDF => Some((1, 0)),
        0xE0 => Some((2, 1)),
        0xE1..=0xEC | 0xEE..=0xEF => Some((2, 0)),
        0xED => Some((2, 2)),
        0xF0 => Some((3, 3)),
        0xF1..=0xF3 => Some((3, 0)),
        0xF4 => Some((3, 4)),
        _ => None,
    }
}

/// Is `b` an allowed continuation byte for range code `range` (see [`utf8_lead`])?
#[inline]
pub(crate) fn utf8_continues(range: u8, b: u8) -> bool {
    let (lo, hi) = UTF8_CONTINUATION[range as usize];
    (lo..=hi).contains(&b)
}

/// Where a number's text stands in the RFC 8259 §6 grammar
/// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum NumPhase {
    /// Nothing yet.
    Empty,
    /// After `-`.
    Minus,
    /// The integer part is `0` (no more integer digits).
    Zero,
    /// Inside a nonzero integer part.
    Int,
    /// After `.`.
    Dot,
    /// Inside the fraction.
    Frac,
    /// After `e`/`E`.
    E,
    /// After the exponent's sign.
    ESign,
    /// Inside the exponent's digits.
    Exp,
}

impl NumPhase {
    /// The phase after byte `b`; `None` when `b` cannot extend the number here.
    #[inline]
    pub(crate) fn step(self, b: u8) -> Option<NumPhase> {
        use NumPhase::*;
        Some(match (self, b) {
            (Empty, b'-') => Minus,
            (Empty | Minus, b'0') => Zero,
            (Empty | Minus | Int, b'1'..=b'9') | (Int, b'0') => Int,
            (Zero | Int, b'.') => Dot,
            (Dot | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => E,
            (E, b'+' | b'-') => ESign,
            (E | ESign | Exp, b'0'..=b'9') => Exp,
            _ => return None,
        })
    }

    /// Is the text a complete number (so it may end here)?
    #[inline]
    pub(crate) fn is_complete(self) -> bool {
        matches!(self, NumPhase::Zero | NumPhase::Int | NumPhase::Frac | NumPhase::Exp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_exactly_the_four_rfc_bytes() {
        let ws: Vec<u8> = (0..=255u8).filter(|&b| is_ws(b)).collect();
        assert_eq!(ws, b"\t\n\r ");
    }

    #[test]
    fn hex_digits_in_either_case() {
        for b in 0..=255u8 {
            let want = (b as char).to_digit(16).map(|d| d as u8);
            assert_eq!(hex_val(b), want, "byte {b:#x}");
        }
    }

    #[test]
    fn escapes_decode_like_serde_json() {
        for b in 0..=127u8 {
            let text = format!("\"\\{}\"", b as char);
            let parsed: Option<String> = serde_json::from_str(&text).ok();
            let want = if b == b'u' { None } else { parsed.map(|s| s.as_bytes()[0]) };
            assert_eq!(escape_char(b), want, "escape \\{}", b as char);
        }
    }

    #[test]
    fn literals_are_found_by_their_first_byte() {
        for (i, lit) in LITERALS.iter().enumerate() {
            assert_eq!(literal_index(lit[0]), Some(i as u8));
        }
        assert_eq!(literal_index(b'x'), None);
    }

    #[test]
    fn surrogate_pairs_decode_like_utf16() {
        let s = "😀"; // U+1F600 = D83D DE00
        let units: Vec<u16> = s.encode_utf16().collect();
        assert_eq!(surrogate_pair(u32::from(units[0]), u32::from(units[1])), 0x1F600);
        assert_eq!(surrogate_pair(0xDBFF, 0xDFFF), 0x10FFFF);
    }

    /// Does the lead/continuation table accept `seq` as one whole character?
    fn table_accepts(seq: &[u8]) -> bool {
        let Some((left, range)) = utf8_lead(seq[0]) else { return false };
        if seq.len() != 1 + left as usize {
            return false;
        }
        seq[1..].iter().enumerate().all(|(i, &b)| utf8_continues(if i == 0 { range } else { 0 }, b))
    }

    /// Is `seq` exactly one character by the standard library's validator?
    fn std_one_char(seq: &[u8]) -> bool {
        std::str::from_utf8(seq).is_ok_and(|s| s.chars().count() == 1)
    }

    #[test]
    fn utf8_table_agrees_with_std_on_every_two_and_three_byte_sequence() {
        for a in 0x80..=0xFFu8 {
            for b in 0..=0xFFu8 {
                let two = [a, b];
                assert_eq!(table_accepts(&two), std_one_char(&two), "{two:x?}");
                for c in [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0] {
                    let three = [a, b, c];
                    assert_eq!(table_accepts(&three), std_one_char(&three), "{three:x?}");
                }
            }
        }
    }

    #[test]
    fn utf8_table_agrees_with_std_on_four_byte_edges() {
        for a in 0xF0..=0xF5u8 {
            for b in [0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0] {
                let four = [a, b, 0x80, 0xBF];
                assert_eq!(table_accepts(&four), std_one_char(&four), "{four:x?}");
            }
        }
    }

    /// Run the machine over `text`: `Some(complete)` when every byte is taken.
    fn run(text: &str) -> Option<bool> {
        text.bytes().try_fold(NumPhase::Empty, NumPhase::step).map(NumPhase::is_complete)
    }

    #[test]
    fn number_machine_follows_the_rfc_grammar() {
        for ok in ["0", "-0", "12", "1.5", "0.25e-3", "1E+2", "-9e9"] {
            assert_eq!(run(ok), Some(true), "{ok}");
            assert!(serde_json::from_str::<serde_json::Value>(ok).is_ok());
        }
        for prefix in ["-", "1.", "1e", "1e+", "-0."] {
            assert_eq!(run(prefix), Some(false), "{prefix}");
        }
        for bad in ["01", "+1", ".5", "1.e3", "--1", "1e+-2", "0x1", "1.2.3"] {
            assert_eq!(run(bad), None, "{bad}");
        }
    }
}
