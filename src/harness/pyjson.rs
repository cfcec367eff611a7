//! Python's `json.dumps(data, ensure_ascii=False)` byte for byte, the serialisation MaskBench
//! instances are scored with.
//!
//! MaskBench (and the published numbers on it) tokenizes each instance exactly as Python prints
//! it, so a harness that serialised differently would measure different token sequences. The
//! rules reproduced here (CPython 3 `json.encoder`, default separators `", "` and `": "`):
//! - keys in document order (the crate's `serde_json` keeps insertion order);
//! - strings: `"` `\` `\b` `\f` `\n` `\r` `\t` escaped by name, other bytes below 0x20 as
//!   `\u00xx` (lowercase hex), everything else — DEL and non-ASCII included — raw;
//! - integers as integers; floats as Python's `repr(float)`: the shortest round-trip digits,
//!   positional when the decimal exponent is in `-4..16` (always with a fractional part:
//!   `100.0`), scientific otherwise with a signed two-digit-minimum exponent (`1e-05`,
//!   `1.5e+20`); non-finite values as `NaN`, `Infinity`, `-Infinity`;
//! - empty containers as `[]` and `{}`.
//!
//! Integers beyond `u64`/`i64` are floats once `serde_json` parsed them; MaskBench has none
//! (its largest is 12345678901234567890, which fits `u64`).

use serde_json::{Number, Value};
use std::fmt::Write;

/// Serialise `value` as Python's `json.dumps(value, ensure_ascii=False)` does.
///
/// # Example
/// ```
/// use grammask::harness::pyjson::dumps;
/// let v: serde_json::Value = serde_json::from_str(r#"{"b": [1, 2.50, 1e-5], "a": "é\n"}"#).unwrap();
/// assert_eq!(dumps(&v), "{\"b\": [1, 2.5, 1e-05], \"a\": \"é\\n\"}");
/// ```
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Append the Python serialisation of `value` to `out`.
pub fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, k);
                out.push_str(": ");
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &Number) {
    if !n.is_f64() {
        if let Some(u) = n.as_u64() {
            let _ = write!(out, "{u}");
            return;
        }
        if let Some(i) = n.as_i64() {
            let _ = write!(out, "{i}");
            return;
        }
    }
    out.push_str(&float_repr(n.as_f64().unwrap_or(f64::NAN)));
}

/// Python's `repr(x)` for a float (see the module docs for the rules).
///
/// # Example
/// ```
/// use grammask::harness::pyjson::float_repr;
/// assert_eq!(float_repr(1e-5), "1e-05");
/// assert_eq!(float_repr(1.5e20), "1.5e+20");
/// assert_eq!(float_repr(100.0), "100.0");
/// assert_eq!(float_repr(0.0001), "0.0001");
/// ```
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    // Rust's `{:e}` prints the shortest digits that round-trip, like Python's repr: `d.ddde±x`.
    let sci = format!("{x:e}");
    let (sign, rest) = match sci.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", sci.as_str()),
    };
    let (mantissa, exp) = rest.split_once('e').expect("`{:e}` always has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len() as i32;
    let mut out = String::from(sign);
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp + 1;
            if n <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', (int_len - n) as usize));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len as usize]);
                out.push('.');
                out.push_str(&digits[int_len as usize..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    out
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs (JSON input, `json.dumps(json.loads(input), ensure_ascii=False)`) printed by
    /// CPython 3.11.
    const CASES: &[(&str, &str)] = &[
        ("1", "1"),
        ("-7", "-7"),
        ("12345678901234567890", "12345678901234567890"),
        ("1.0", "1.0"),
        ("1e2", "100.0"),
        ("-0.0", "-0.0"),
        ("0.0001", "0.0001"),
        ("0.00001", "1e-05"),
        ("1.6e-05", "1.6e-05"),
        ("1.5e20", "1.5e+20"),
        ("1e16", "1e+16"),
        ("9999999999999998.0", "9999999999999998.0"),
        ("1.234567890123457e+31", "1.234567890123457e+31"),
        ("0.1", "0.1"),
        ("123.456", "123.456"),
        ("1e308", "1e+308"),
        ("5e-324", "5e-324"),
        ("[]", "[]"),
        ("{}", "{}"),
        ("[1,[2,{}],{\"a\":null}]", "[1, [2, {}], {\"a\": null}]"),
        (r#"{"z":1,"a":2}"#, r#"{"z": 1, "a": 2}"#),
        (r#""\u00e9\u4e2d\ud83d\ude00""#, "\"é中😀\""),
        (r#""a\"b\\c\/d""#, r#""a\"b\\c/d""#),
        (r#""\b\f\n\r\t\u0001\u001f\u007f""#, "\"\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}\""),
        ("[true,false,null]", "[true, false, null]"),
    ];

    #[test]
    fn matches_cpython() {
        for (input, expected) in CASES {
            let v: Value = serde_json::from_str(input).unwrap();
            assert_eq!(dumps(&v), *expected, "input {input}");
        }
    }
}
