//! Number literals the walk tries where a number starts: multiples of the schema's `multipleOf`
//! values (and of their least common multiple), its bounds and their neighbours, and integers of
//! random magnitude — each pushed whole and kept only where the engine allows it and the number
//! may end right after it.
//!
//! A byte-by-byte walk reaches a multiple of 385 (`Handwritten---allany1`: `multipleOf` 5, then 7,
//! then 11 through `anyOf`/`not`) with probability 1/385 per number; the completion search then
//! appends digits and an exponent (`4847645948449.15E+12`) — a valid number, but one past what an
//! `f64` reader holds exactly, and a costly search (every push re-decides `multipleOf` under
//! `anyOf`/`not`). A literal like `770` costs three pushes. Candidates are drawn from the whole
//! schema, not from the location being written: the engine decides which of them fit here.
//! Every candidate is written without an exponent and with fewer than 2^53 units of its last
//! digit, so `f64` readers see the same value.

use super::Rng;
use serde_json::Value;
use std::sync::Arc;

/// A decimal `mant / 10^scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dec {
    mant: i128,
    scale: u32,
}

/// Most fraction digits a candidate may have.
const MAX_SCALE: u32 = 12;
/// Candidates have fewer units than this (2^53: exact in an `f64`).
const MAX_MANT: i128 = 1 << 53;
/// Most `multipleOf` values and bounds kept from a schema.
const MAX_KEPT: usize = 32;

impl Dec {
    /// The value of a JSON number literal, if it has at most [`MAX_SCALE`] fraction digits and
    /// fits an `i128` at that scale.
    fn parse(text: &str) -> Option<Dec> {
        let (m, e) = match text.find(['e', 'E']) {
            Some(i) => (&text[..i], text[i + 1..].parse::<i64>().ok()?),
            None => (text, 0),
        };
        let (neg, m) = match m.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, m),
        };
        let (int, frac) = m.split_once('.').unwrap_or((m, ""));
        let digits: String = format!("{int}{frac}").trim_start_matches('0').to_owned();
        if digits.len() > 30 {
            return None;
        }
        let mut mant: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
        let mut scale = frac.len() as i64 - e;
        while scale < 0 {
            mant = mant.checked_mul(10)?;
            scale += 1;
        }
        while scale > 0 && mant != 0 && mant % 10 == 0 {
            mant /= 10;
            scale -= 1;
        }
        if mant == 0 {
            scale = 0;
        }
        if scale > i64::from(MAX_SCALE) {
            return None;
        }
        Some(Dec { mant: if neg { -mant } else { mant }, scale: scale as u32 })
    }

    /// The mantissa at a larger scale `s`.
    fn at(self, s: u32) -> Option<i128> {
        self.mant.checked_mul(10i128.checked_pow(s.checked_sub(self.scale)?)?)
    }

    /// The JSON text: no exponent, no trailing fraction zeros.
    fn text(self) -> String {
        let digits = self.mant.unsigned_abs().to_string();
        let sign = if self.mant < 0 { "-" } else { "" };
        let s = self.scale as usize;
        if s == 0 {
            return format!("{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = s + 1);
        let (int, frac) = padded.split_at(padded.len() - s);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            format!("{sign}{int}")
        } else {
            format!("{sign}{int}.{frac}")
        }
    }

    fn exact_in_f64(self) -> bool {
        self.mant.abs() < MAX_MANT
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// The schema's numeric keywords, read once per fuzzer.
#[derive(Debug)]
pub(crate) struct NumberHints {
    /// Positive `multipleOf` values, their least common multiple first where there are several.
    multiples: Vec<Dec>,
    /// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` values.
    bounds: Vec<Dec>,
    /// The completion search's number moves ([`NumberHints::fixed`]).
    fixed: Arc<[super::hints::Hint]>,
}

impl NumberHints {
    /// The hints of a schema document (`None`, or no numeric keywords: only random integers).
    pub(crate) fn new(schema: Option<&Value>) -> NumberHints {
        let mut hints =
            NumberHints { multiples: Vec::new(), bounds: Vec::new(), fixed: Arc::new([]) };
        if let Some(s) = schema {
            hints.collect(s, 0);
        }
        if hints.multiples.len() > 1 {
            if let Some(l) = lcm(&hints.multiples) {
                if !hints.multiples.contains(&l) {
                    hints.multiples.insert(0, l);
                }
            }
        }
        hints.fixed = hints.fixed_moves().into_iter().map(super::hints::Hint::from).collect();
        hints
    }

    /// The literals the completion search tries as single moves where a value starts, before
    /// single bytes (none without `multipleOf`: there `1` and `0` end a number soonest, and
    /// every move tried costs a push at every value start): the first (least common)
    /// multiple and its double, each bound with its neighbours and the multiples next to it.
    /// Without them, the search at `{"b": ` under `multipleOf: 30` strings digits and
    /// exponents (`11.1111e+11`) where `30` would do.
    fn fixed_moves(&self) -> Vec<Vec<u8>> {
        let mut c: Vec<Dec> = Vec::new();
        let Some(m) = self.multiples.first().copied() else { return Vec::new() };
        c.push(m);
        c.push(Dec { mant: m.mant * 2, scale: m.scale });
        for &b in self.bounds.iter().take(8) {
            c.extend(neighbours(b));
            c.extend(multiples_around(b, m).into_iter().flatten());
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for d in c {
            let t = d.text().into_bytes();
            if d.exact_in_f64() && !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    /// The completion search's number moves (see [`NumberHints::fixed_moves`]).
    pub(crate) fn fixed(&self) -> Arc<[super::hints::Hint]> {
        Arc::clone(&self.fixed)
    }

    fn collect(&mut self, v: &Value, depth: usize) {
        if depth > 64 {
            return;
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if let Value::Number(n) = x {
                        let Some(d) = Dec::parse(&n.to_string()) else { continue };
                        match k.as_str() {
                            "multipleOf" if d.mant > 0 => push_new(&mut self.multiples, d),
                            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                                push_new(&mut self.bounds, d)
                            }
                            _ => {}
                        }
                    } else {
                        self.collect(x, depth + 1);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| self.collect(x, depth + 1)),
            _ => {}
        }
    }

    /// Does the schema have a `multipleOf`? (Then a byte walk rarely ends a number well.)
    pub(crate) fn has_multiples(&self) -> bool {
        !self.multiples.is_empty()
    }

    /// Are there `multipleOf`s, all of them whole numbers?
    pub(crate) fn whole_multiples(&self) -> bool {
        !self.multiples.is_empty() && self.multiples.iter().all(|m| m.scale == 0)
    }

    /// About a dozen candidate literals in random order, into `out` (cleared first).
    pub(crate) fn draw(&self, rng: &mut Rng, out: &mut Vec<String>) {
        out.clear();
        let mut cands: Vec<Dec> = Vec::with_capacity(16);
        // Log-uniform factors below 10^5: small ones often, few repeats.
        let small = |rng: &mut Rng| -> i128 {
            let digits = 1 + rng.below(5);
            i128::from(rng.below(10u32.pow(digits)))
        };
        if !self.multiples.is_empty() {
            for _ in 0..8 {
                // The least common multiple of all (a value every location accepts), of a
                // random subset (`allOf`/`anyOf`/`oneOf`/`not` combinations: multiples of 264
                // but not of 5 under `Handwritten---allone2`), or one of them.
                let m = match rng.below(4) {
                    0 => self.multiples[0],
                    1 | 2 => {
                        let subset: Vec<Dec> =
                            self.multiples.iter().copied().filter(|_| rng.below(2) == 0).collect();
                        lcm(&subset).unwrap_or(self.multiples[0])
                    }
                    _ => self.multiples[rng.below(self.multiples.len() as u32) as usize],
                };
                if let Some(mant) = m.mant.checked_mul(small(rng)) {
                    cands.push(Dec { mant, scale: m.scale });
                }
            }
        }
        for _ in 0..self.bounds.len().min(4) {
            let b = self.bounds[rng.below(self.bounds.len() as u32) as usize];
            match self.multiples.first() {
                // The multiples of the first (least common) multiple next to the bound.
                Some(&m) if rng.below(2) == 0 => {
                    cands.extend(multiples_around(b, m).into_iter().flatten())
                }
                _ => cands.extend(neighbours(b)),
            }
        }
        for _ in 0..4 {
            let magnitude = 10u64.pow(1 + rng.below(12));
            let mant = (rng.unit() * magnitude as f64) as i128;
            let d = if rng.below(4) == 0 {
                Dec { mant: mant * 10 + i128::from(rng.below(10)), scale: 1 + rng.below(3) }
            } else {
                Dec { mant, scale: 0 }
            };
            cands.push(d);
        }
        for d in &mut cands {
            if rng.below(5) == 0 {
                d.mant = -d.mant;
            }
        }
        // Shuffle (Fisher–Yates), then keep the distinct, exactly-readable ones.
        for i in (1..cands.len()).rev() {
            cands.swap(i, rng.below(i as u32 + 1) as usize);
        }
        for d in cands {
            if d.exact_in_f64() {
                let t = d.text();
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
}

/// A bound and the numbers one unit of its last digit away.
fn neighbours(b: Dec) -> [Dec; 3] {
    let unit = 10i128.pow(b.scale);
    [b, Dec { mant: b.mant + unit, scale: b.scale }, Dec { mant: b.mant - unit, scale: b.scale }]
}

/// The multiples of `m` at or below the bound `b` and just above it (`None` past `i128`).
fn multiples_around(b: Dec, m: Dec) -> Option<[Dec; 2]> {
    let s = b.scale.max(m.scale);
    let (bm, mm) = (b.at(s)?, m.at(s)?);
    let below = bm.div_euclid(mm) * mm;
    Some([Dec { mant: below, scale: s }, Dec { mant: below + mm, scale: s }])
}

fn push_new(xs: &mut Vec<Dec>, d: Dec) {
    if xs.len() < MAX_KEPT && !xs.contains(&d) {
        xs.push(d);
    }
}

/// The least common multiple of positive decimals, if it stays below [`MAX_MANT`] units.
fn lcm(xs: &[Dec]) -> Option<Dec> {
    let s = xs.iter().map(|d| d.scale).max()?;
    let mut l: i128 = 1;
    for d in xs {
        let m = d.at(s)?;
        l = (l / gcd(l, m)).checked_mul(m)?;
        if l >= MAX_MANT {
            return None;
        }
    }
    Some(Dec { mant: l, scale: s })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimals_parse_and_print_without_exponents() {
        let p = |t: &str| Dec::parse(t).map(Dec::text);
        assert_eq!(p("1.50").as_deref(), Some("1.5"));
        assert_eq!(p("-0.25").as_deref(), Some("-0.25"));
        assert_eq!(p("1e3").as_deref(), Some("1000"));
        assert_eq!(p("25e-3").as_deref(), Some("0.025"));
        assert_eq!(p("0.0").as_deref(), Some("0"));
        assert_eq!(p("1e-20"), None);
    }

    #[test]
    fn the_least_common_multiple_comes_first() {
        let h = NumberHints::new(Some(&json!({
            "allOf": [{"multipleOf": 5}, {"anyOf": [{"multipleOf": 7}, {"multipleOf": 0.5}]},
                      {"properties": {"x": {"multipleOf": 11, "minimum": 3}}}]
        })));
        assert_eq!(h.multiples[0].text(), "385");
        assert_eq!(h.bounds, vec![Dec { mant: 3, scale: 0 }]);
        let mut rng = Rng::new(7);
        let mut out = Vec::new();
        let mut multiples_of_385 = 0;
        for _ in 0..50 {
            h.draw(&mut rng, &mut out);
            assert!(!out.is_empty());
            for t in &out {
                assert!(!t.contains(['e', 'E']), "{t}");
                let d = Dec::parse(t).expect("parses");
                assert!(d.exact_in_f64(), "{t}");
                multiples_of_385 += usize::from(d.scale == 0 && d.mant != 0 && d.mant % 385 == 0);
            }
        }
        assert!(multiples_of_385 > 20, "{multiples_of_385}");
    }
}
