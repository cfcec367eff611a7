//! Tests of the plain spelling ([`NumCore::plain`], `SchemaOptions::plain_numbers`): liveness
//! tables for common constraints, the digit caps, and a brute-force oracle that enumerates
//! every plain text within small caps.

use super::*;
use std::collections::HashSet;

fn d(s: &str) -> Dec {
    Dec::parse(s).unwrap()
}

fn plain(n: u8, c: NumCore) -> NumCore {
    let int_syntax = c.int_syntax || c.integer;
    NumCore { plain: n, int_syntax, ..c }
}

fn range(lo: Option<(&str, bool)>, hi: Option<(&str, bool)>) -> NumCore {
    NumCore { lo: lo.map(|(v, e)| (d(v), e)), hi: hi.map(|(v, e)| (d(v), e)), ..NumCore::any() }
}

/// Each text's liveness (`+` alive, `-` dead) and, for `=`, complete and accepted.
fn table(c: &NumCore, rows: &[(&str, char)]) {
    for &(t, want) in rows {
        let live = c.live(t.as_bytes());
        let acc = c.accepts_text(t.as_bytes());
        match want {
            '=' => assert!(live && acc, "{t:?} should be alive and accepted"),
            '+' => assert!(live && !acc, "{t:?} should be alive, not accepted ({live}, {acc})"),
            '-' => assert!(!live && !acc, "{t:?} should be dead ({live}, {acc})"),
            _ => unreachable!(),
        }
    }
}

#[test]
fn unit_interval() {
    let c = plain(15, range(Some(("0", false)), Some(("1", false))));
    table(
        &c,
        &[
            ("", '+'),
            ("0", '='),
            ("0.", '+'),
            ("0.5", '='),
            ("0.999999999999999", '='),
            ("1", '='),
            ("1.", '+'),
            ("1.0", '='),
            ("1.000000000000000", '-'), // 16 significant digits
            ("1.00000000000000", '='),  // 15
            ("1.1", '-'),
            ("4", '-'),
            ("10", '-'),
            ("0.5e", '-'),
            ("1e-3", '-'),
            ("-", '+'),
            ("-0", '='), // value 0 is in [0, 1]
            ("-0.", '+'),
            ("-0.0", '='),
            ("-0.1", '-'),
            ("-1", '-'),
            ("0.0000000000000001", '-'), // 16 digits after the point
            ("0.000000000000001", '='),
            ("0.000000000000000", '='),
        ],
    );
    // Without the plain spelling the exponent keeps `4` and `10` alive.
    let exact = range(Some(("0", false)), Some(("1", false)));
    assert!(exact.live(b"4") && exact.live(b"10") && exact.accepts_text(b"1e-3"));
}

#[test]
fn exclusive_bounds() {
    let c = plain(15, range(Some(("0", true)), Some(("1", true))));
    table(
        &c,
        &[
            ("0", '+'),
            ("-0", '-'),
            ("0.", '+'),
            ("0.0", '+'),
            ("0.000000000000000", '-'), // no digit left for a nonzero one
            ("0.00000000000000", '+'),
            ("0.000000000000001", '='),
            ("1", '-'),
            ("0.9", '='),
            ("-", '-'),
        ],
    );
    // A range no plain decimal within 15 digits after the point reaches.
    let tiny = plain(15, range(Some(("0", true)), Some(("1e-20", false))));
    assert!(!tiny.live(b""));
    assert!(range(Some(("0", true)), Some(("1e-20", false))).live(b""));
    assert!(!plain(15, range(Some(("1e300", false)), None)).live(b""));
    assert!(plain(15, range(Some(("1e14", false)), None)).live(b""));
    assert!(!plain(15, range(Some(("1e15", false)), None)).live(b""), "16 digits");
    assert!(plain(16, range(Some(("1e15", false)), None)).live(b"1"));
}

#[test]
fn cents_and_integers_and_negative_ranges() {
    let cents = plain(
        15,
        NumCore { multiple: Some(d("0.01")), ..range(Some(("0", false)), Some(("10", false))) },
    );
    table(
        &cents,
        &[
            ("9.99", '='),
            ("9.995", '-'),
            ("10", '='),
            ("10.00", '='),
            ("10.001", '-'),
            ("10.01", '-'),
            ("0.", '+'),
            ("0.1", '='),
            ("0.10", '='),
            ("0.100", '='), // 0.1: the value counts, not the spelling
            ("0.101", '-'),
            ("11", '-'),
            ("1", '='),
        ],
    );
    let int =
        plain(15, NumCore { integer: true, ..range(Some(("-5", false)), Some(("120", true))) });
    table(
        &int,
        &[
            ("-5", '='),
            ("-6", '-'),
            ("-0", '='),
            ("1", '='),
            ("1.", '-'),
            ("11", '='),
            ("119", '='),
            ("120", '-'),
            ("12", '='),
            ("1200", '-'),
            ("5e1", '-'),
        ],
    );
    let neg = plain(15, range(Some(("-2.5", false)), Some(("-0.25", true))));
    table(
        &neg,
        &[
            ("", '+'),
            ("0", '-'),
            ("-", '+'),
            ("-0", '+'),
            ("-0.2", '+'),
            ("-0.25", '+'), // -0.251 is below the open end
            ("-0.251", '='),
            ("-2.5", '='),
            ("-2.50", '='),
            ("-2.51", '-'),
            ("-3", '-'),
        ],
    );
}

#[test]
fn digit_caps() {
    let any = plain(15, NumCore::any());
    table(
        &any,
        &[
            ("123456789012345", '='),
            ("1234567890123456", '-'),
            ("12345678901234.5", '='),
            ("12345678901234.56", '-'),
            ("0.123456789012345", '='),
            ("0.1234567890123456", '-'),
            ("-0.000000000000001", '='),
            ("100000000000000.", '-'),
            ("1e5", '-'),
            ("1E", '-'),
            ("00", '-'),
        ],
    );
    let three = plain(3, NumCore::any());
    table(&three, &[("999", '='), ("9999", '-'), ("0.999", '='), ("0.0001", '-'), ("9.99", '=')]);
    // Members of a set are reachable only when some plain text within the caps spells them.
    let set = plain(
        15,
        NumCore {
            values: Some(std::sync::Arc::new(NumSet::new(vec![d("1e400"), d("2.5"), d("1e-20")]))),
            ..NumCore::any()
        },
    );
    table(&set, &[("2.5", '='), ("2.50", '='), ("1", '-'), ("0.0", '-'), ("", '+')]);
    assert_eq!(set.finite_values().unwrap(), vec![d("2.5")]);
    let far = plain(
        15,
        NumCore {
            values: Some(std::sync::Arc::new(NumSet::new(vec![d("1e400")]))),
            ..NumCore::any()
        },
    );
    assert!(!far.live(b""));
    assert!(plain(15, NumCore::any()).spellable(&d("123456789012345")));
    assert!(!plain(15, NumCore::any()).spellable(&d("1234567890123456")));
    assert!(!plain(15, NumCore::any()).spellable(&d("1e-16")));
    assert!(plain(15, NumCore::any()).spellable(&d("1e-15")));
}

/// Every plain text of at most `n` significant digits and `n` after the point: a sign, an
/// integer `T < 10^n` and a fraction length `f <= n` (`int_syntax`: `f = 0`).
fn plain_texts(n: u32, int_syntax: bool) -> Vec<String> {
    let mut out = Vec::new();
    let fmax = if int_syntax { 0 } else { n };
    for sign in ["", "-"] {
        for f in 0..=fmax {
            for t in 0..10u64.pow(n) {
                let s = format!("{t:0>w$}", w = f as usize + 1);
                let (i, fr) = s.split_at(s.len() - f as usize);
                let text = if f == 0 { format!("{sign}{i}") } else { format!("{sign}{i}.{fr}") };
                out.push(text);
            }
        }
    }
    out
}

/// Liveness under the plain spelling equals "some plain text within the caps extends the
/// prefix and its value satisfies the constraint", for every prefix of every such text and
/// some that leave the language, under random bounds, steps, "not an integer" and excluded
/// multiples (fixed seed). Acceptance likewise on every text.
#[test]
fn plain_liveness_matches_enumeration() {
    const BOUNDS: [&str; 14] = [
        "-12.5", "-3", "-1", "-0.05", "0", "0.003", "0.3", "1", "2.25", "7", "99.9", "250", "1e-3",
        "1e4",
    ];
    const STEPS: [&str; 8] = ["0.01", "0.25", "3", "0.5", "0.003", "7", "1.5", "0.2"];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| -> usize {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33) as usize % n
    };
    let n: u8 = 3;
    let texts = [plain_texts(3, false), plain_texts(3, true)];
    let mut prefixes: Vec<HashSet<String>> = vec![HashSet::new(), HashSet::new()];
    for (k, ts) in texts.iter().enumerate() {
        for t in ts {
            for i in 0..=t.len() {
                prefixes[k].insert(t[..i].to_string());
            }
            for extra in ["0", "5", ".", ".0", "e", "e1"] {
                prefixes[k].insert(format!("{t}{extra}"));
            }
        }
    }
    let (mut checked, mut nonempty) = (0, 0);
    for round in 0..70 {
        let mut c = NumCore::any();
        if next(4) != 0 {
            c.lo = Some((d(BOUNDS[next(BOUNDS.len())]), next(2) == 0));
        }
        if next(4) != 0 {
            c.hi = Some((d(BOUNDS[next(BOUNDS.len())]), next(2) == 0));
        }
        c.integer = next(4) == 0;
        if next(2) == 0 {
            match c
                .merge(&NumCore { multiple: Some(d(STEPS[next(STEPS.len())])), ..NumCore::any() })
            {
                Ok(m) => c = m,
                Err(()) => continue,
            }
        }
        if !c.integer && next(4) == 0 {
            c.frac = true;
        }
        if next(5) == 0 {
            let r = d(STEPS[next(STEPS.len())]);
            c = c.merge(&NumCore { not_multiples: vec![r], ..NumCore::any() }).unwrap();
        }
        if round % 7 == 0 {
            let vs = (0..6).map(|_| d(BOUNDS[next(BOUNDS.len())])).collect();
            c = c
                .merge(&NumCore {
                    values: Some(std::sync::Arc::new(NumSet::new(vs))),
                    ..NumCore::any()
                })
                .unwrap();
        }
        if !c.multiple_supported() {
            continue;
        }
        let p = plain(n, c.clone());
        assert!(p.plain_supported());
        let k = usize::from(p.int_syntax);
        let valid: Vec<&String> =
            texts[k].iter().filter(|t| c.accepts(&Dec::parse(t).unwrap())).collect();
        nonempty += usize::from(!valid.is_empty());
        let mut alive: HashSet<&str> = HashSet::new();
        for t in &valid {
            for i in 0..=t.len() {
                alive.insert(&t[..i]);
            }
        }
        for pre in &prefixes[k] {
            assert_eq!(p.live(pre.as_bytes()), alive.contains(pre.as_str()), "{pre:?} under {c:?}");
            checked += 1;
        }
        for t in &texts[k] {
            let want = valid.contains(&t);
            assert_eq!(p.accepts_text(t.as_bytes()), want, "{t:?} under {c:?}");
        }
    }
    assert!(checked > 200_000, "{checked}");
    assert!(nonempty >= 20, "only {nonempty} constraints had plain values");
}

/// Under the plain spelling, texts with one class key still share their completions: every
/// pair of prefixes with one key agrees on liveness and acceptance after each extension.
#[test]
fn plain_class_keys_share_completions() {
    let cores = [
        plain(4, NumCore::any()),
        plain(4, range(Some(("0", false)), Some(("1", false)))),
        plain(4, NumCore { integer: true, ..range(Some(("-50", false)), Some(("999", true))) }),
        plain(
            4,
            NumCore {
                multiple: Some(d("0.25")),
                ..range(Some(("-3", true)), Some(("12.5", false)))
            },
        ),
        plain(4, range(Some(("0.05", false)), None)),
    ];
    let texts: Vec<String> = plain_texts(4, false)
        .into_iter()
        .flat_map(|t| (0..=t.len()).map(move |i| t[..i].to_string()).collect::<Vec<_>>())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let tails = ["", "0", "5", "9", ".", ".5", "00", "5.", "e"];
    let mut shared = 0;
    for c in &cores {
        let mut first: std::collections::HashMap<smallvec::SmallVec<[u8; 32]>, &String> =
            std::collections::HashMap::new();
        for t in &texts {
            let Some(k) = class_key(c, t.as_bytes()) else { continue };
            let Some(r) = first.get(&k) else {
                first.insert(k, t);
                continue;
            };
            shared += 1;
            for tail in tails {
                let (a, b) = (format!("{r}{tail}"), format!("{t}{tail}"));
                assert_eq!(c.live(a.as_bytes()), c.live(b.as_bytes()), "{a:?} vs {b:?}");
                assert_eq!(c.accepts_text(a.as_bytes()), c.accepts_text(b.as_bytes()), "{a} {b}");
            }
        }
    }
    assert!(shared > 10_000, "{shared}");
}

/// `not: {multipleOf r}` whose multiples are sparse on the plain grid (a long period) is
/// decided, not refused: two consecutive grid points always hold one that is not excluded.
#[test]
fn sparse_excluded_multiples_on_the_plain_grid() {
    let c = plain(
        15,
        NumCore {
            not_multiples: vec![d("0.123456789")],
            ..range(Some(("0", false)), Some(("1", false)))
        },
    );
    assert!(c.plain_supported());
    table(&c, &[("0.5", '='), ("0.123456789", '+'), ("0.1234567890", '+'), ("", '+')]);
    assert!(!c.accepts_text(b"0.123456789") && !c.accepts_text(b"0.246913578"));
    let point = plain(
        15,
        NumCore {
            not_multiples: vec![d("0.123456789")],
            ..range(Some(("0.123456789", false)), Some(("0.123456789", false)))
        },
    );
    assert!(!point.live(b""), "the one value in range is excluded");
}
