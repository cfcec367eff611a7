//! Exact decimal arithmetic for numeric keywords: `minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum`, `type: integer` and `multipleOf`, decided digit by digit.
//!
//! A number is checked as it is typed: after every byte we ask whether *some* completion of the
//! text so far is a valid number in the constraint. Before the exponent, the exponent can still
//! rescale the digits typed, so the reachable values are all numbers whose significant digits
//! start with the digits so far, at any scale: a union of half-open intervals
//! `[0.P × 10^t, 0.(P+1) × 10^t)`, one per scale `t`, of which only a few can meet a bounded
//! range. Inside the exponent the mantissa `m` is fixed and the reachable values are
//! `m × 10^x` for the exponents `x` whose decimal text starts with what was typed; the value is
//! monotone in `x`, so the range becomes an interval of exponents. Values are compared as exact
//! decimals (`1000e-1` is 100, `1.0` is an integer).
//!
//! `multipleOf q` (and `integer`, which is `multipleOf 1`) meets each candidate interval
//! exactly: with `q = Q × 10^e`, values are counted in units of `10^e`, the first multiple of
//! `Q` units at or above the interval's lower end is found with a remainder modulo `Q`, and it
//! is compared with the upper end, respecting open and closed ends; for "not an integer" the
//! next multiple is tried too (when a multiple of a non-integer `q` is an integer, the next
//! one is not). With a bound on the side of the
//! digits typed, the scales that meet the range are finite, and the scan over them stops at the
//! first scale whose interval lies inside the range and spans two multiples, so it visits at
//! most a few more scales than there are digits typed. `not: {multipleOf r}` excludes the
//! multiples `k × q` with `c | k` for a period `c`; a run of `lcm(c…)` consecutive multiples
//! always keeps one (`k ≡ 1`), and shorter runs are scanned. Inside the exponent, being a
//! multiple of `r` is monotone in the exponent too, so it stays an interval.
//!
//! Limits: exponents of more than [`MAX_EXP_DIGITS`] digits are refused (documented), and
//! `multipleOf` needs a mantissa of at most [`MAX_MULTIPLE_DIGITS`] digits and bounds within
//! [`MAX_MULTIPLE_SPAN`] decimal orders of `q`'s last digit (checked at compile time by
//! [`NumCore::multiple_supported`]; other cases are `Unsupported`, never a wrong mask).

// Where a number's text stands: the shared RFC 8259 number machine.
use crate::json::syntax::NumPhase as Phase;
use std::cmp::Ordering;

/// Exponents are at most this many digits.
pub(crate) const MAX_EXP_DIGITS: usize = 9;

/// `multipleOf` mantissas are at most this many digits, so remainders modulo them (and a
/// digit more) fit a `u128`.
pub(crate) const MAX_MULTIPLE_DIGITS: usize = 30;

/// `not: {multipleOf}` under a step: the multiples of the step it excludes repeat with at
/// most this period (in steps), which bounds the multiples scanned in one interval.
pub(crate) const MAX_EXCLUDED_PERIOD: u128 = 100_000;

/// Bounds of a `multipleOf` range are below `10^(e + this)` for `q = Q × 10^e`, which caps the
/// digits of the unit counts that liveness computes.
pub(crate) const MAX_MULTIPLE_SPAN: i64 = 4000;

/// An exact decimal: `(-1)^neg × 0.d1 d2 … dn × 10^exp`, digits without leading or trailing
/// zeros; zero has no digits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Dec {
    neg: bool,
    digits: Vec<u8>,
    exp: i64,
}

impl Dec {
    pub(crate) fn zero() -> Dec {
        Dec { neg: false, digits: Vec::new(), exp: 0 }
    }

    fn norm(neg: bool, mut digits: Vec<u8>, mut exp: i64) -> Dec {
        let lead = digits.iter().take_while(|&&d| d == 0).count();
        digits.drain(..lead);
        exp -= lead as i64;
        while digits.last() == Some(&0) {
            digits.pop();
        }
        if digits.is_empty() {
            return Dec::zero();
        }
        Dec { neg, digits, exp }
    }

    /// Parse a JSON number text (or anything `f64`'s `Display` prints).
    pub(crate) fn parse(s: &str) -> Option<Dec> {
        let b = s.as_bytes();
        let mut i = 0;
        let neg = b.first() == Some(&b'-');
        if neg {
            i += 1;
        }
        let mut digits = Vec::new();
        let mut int_len: i64 = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            digits.push(b[i] - b'0');
            int_len += 1;
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                digits.push(b[i] - b'0');
                i += 1;
            }
        }
        let mut e: i64 = 0;
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            i += 1;
            let eneg = b.get(i) == Some(&b'-');
            if matches!(b.get(i), Some(b'-' | b'+')) {
                i += 1;
            }
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                e = e.saturating_mul(10).saturating_add(i64::from(b[i] - b'0'));
                i += 1;
            }
            if i == start {
                return None;
            }
            if eneg {
                e = -e;
            }
        }
        if i != b.len() || digits.is_empty() {
            return None;
        }
        Some(Dec::norm(neg, digits, int_len + e))
    }

    /// From a `serde_json` number.
    pub(crate) fn from_json(n: &serde_json::Number) -> Option<Dec> {
        Dec::parse(&n.to_string())
    }

    /// A canonical byte form: equal numbers (`1`, `1.0`, `10e-1`) give equal bytes.
    pub(crate) fn canon(&self, out: &mut Vec<u8>) {
        out.push(if self.neg { b'-' } else { b'+' });
        out.extend(self.digits.iter().map(|d| b'0' + d));
        out.extend_from_slice(format!("e{}", self.exp).as_bytes());
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    pub(crate) fn is_integer(&self) -> bool {
        self.is_zero() || self.exp >= self.digits.len() as i64
    }

    fn negate(&self) -> Dec {
        if self.is_zero() {
            return self.clone();
        }
        Dec { neg: !self.neg, ..self.clone() }
    }

    /// `(digits as integer, power)` with value `±int × 10^power`.
    fn int_pow(&self) -> (&[u8], i64) {
        (&self.digits, self.exp - self.digits.len() as i64)
    }

    /// Is `self` an integer multiple of `q` (> 0)?
    pub(crate) fn is_multiple_of(&self, q: &Dec) -> bool {
        if self.is_zero() {
            return true;
        }
        let (v, a) = self.int_pow();
        let (qd, b) = q.int_pow();
        if a < b {
            // v has no trailing zeros, so 10^(b-a) never divides it.
            return false;
        }
        let Some(qm) = small(qd) else { return false };
        let mut r = 0u128;
        for &d in v {
            r = (r * 10 + u128::from(d)) % qm;
        }
        for _ in 0..(a - b).min(200) {
            r = (r * 10) % qm;
        }
        r == 0
    }
}

impl Dec {
    /// The least common multiple of two positive decimals (`x` is a multiple of both iff it
    /// is a multiple of this), or `None` when the mantissas are too long to combine exactly.
    pub(crate) fn lcm(&self, o: &Dec) -> Option<Dec> {
        let (a, b, p) = common_scale(self, o)?;
        let l = (a / gcd(a, b)).checked_mul(b)?;
        let text = format!("{l}e{p}");
        Dec::parse(&text)
    }
}

/// Two positive decimals as integers times one power of ten: `(x, y, p)` with
/// `a = x × 10^p` and `b = y × 10^p`, or `None` when they do not fit in `u128`.
fn common_scale(a: &Dec, b: &Dec) -> Option<(u128, u128, i64)> {
    let (da, pa) = a.int_pow();
    let (db, pb) = b.int_pow();
    let p = pa.min(pb);
    let scale = |d: &[u8], k: i64| -> Option<u128> {
        let mut v = small(d)?;
        for _ in 0..k {
            v = v.checked_mul(10)?;
        }
        Some(v)
    };
    Some((scale(da, pa - p)?, scale(db, pb - p)?, p))
}

fn small(d: &[u8]) -> Option<u128> {
    if d.len() > 30 {
        return None;
    }
    Some(d.iter().fold(0u128, |a, &x| a * 10 + u128::from(x)))
}

/// Compare magnitudes of non-negative decimals.
fn cmp_mag(a: &Dec, b: &Dec) -> Ordering {
    match (a.is_zero(), b.is_zero()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    a.exp.cmp(&b.exp).then_with(|| a.digits.cmp(&b.digits))
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Dec {
    fn cmp(&self, o: &Self) -> Ordering {
        match (self.neg, o.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => cmp_mag(self, o),
            (true, true) => cmp_mag(o, self),
        }
    }
}

/// A bound: value and whether it is exclusive.
pub(crate) type Bound = Option<(Dec, bool)>;

/// The numeric part of a schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NumCore {
    pub lo: Bound,
    pub hi: Bound,
    pub integer: bool,
    pub multiple: Option<Dec>,
    /// Draft-04 `integer`: the text itself must be an integer literal (no fraction, no
    /// exponent), as Python's `json` module parses `1.0` to a float.
    pub int_syntax: bool,
    /// The value must *not* be an integer (`not: {type: integer}`).
    pub frac: bool,
    /// The value must not be a multiple of any of these (`not: {multipleOf}`), sorted.
    pub not_multiples: Vec<Dec>,
    /// The value must be one of these (an `enum` of numbers: one alternative however many
    /// members). Every member satisfies the other fields ([`NumCore::merge`] filters them).
    pub values: Option<std::sync::Arc<NumSet>>,
    /// Under [`crate::schema::SchemaOptions::plain_numbers`], the digit cap `N` (`0`: every
    /// JSON spelling): the text must be a plain decimal `-?(0|[1-9][0-9]*)(\.[0-9]+)?` with
    /// at most `N` significant digits and at most `N` after the point. A spelling
    /// restriction: the values stay those of the other fields ([`NumCore::plain_live`]).
    pub plain: u8,
}

/// A finite set of numbers, sorted by sign, then digit string, then exponent: the members
/// whose significant digits start with a typed prefix are one run ([`NumCore::live`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NumSet {
    members: Vec<Dec>,
}

impl NumSet {
    /// The set of `values` (duplicates merged: `1` and `1.0` are one member).
    pub(crate) fn new(mut values: Vec<Dec>) -> NumSet {
        values.sort_by(Self::order);
        values.dedup();
        NumSet { members: values }
    }

    fn order(a: &Dec, b: &Dec) -> Ordering {
        (a.neg, &a.digits, a.exp).cmp(&(b.neg, &b.digits, b.exp))
    }

    /// The members.
    pub(crate) fn members(&self) -> &[Dec] {
        &self.members
    }

    pub(crate) fn contains(&self, v: &Dec) -> bool {
        self.members.binary_search_by(|m| Self::order(m, v)).is_ok()
    }

    /// The nonzero members of sign `neg` whose digit string starts with `sig`.
    fn with_prefix<'s>(&'s self, neg: bool, sig: &'s [u8]) -> impl Iterator<Item = &'s Dec> + 's {
        let start = self.members.partition_point(|m| (m.neg, &m.digits[..]) < (neg, sig));
        self.members[start..]
            .iter()
            .take_while(move |m| m.neg == neg && m.digits.starts_with(sig))
            .filter(|m| !m.is_zero())
    }
}

fn tighter_lo(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some((x, xe)), Some((y, ye))) => match x.cmp(y) {
            Ordering::Greater => Some((x.clone(), *xe)),
            Ordering::Less => Some((y.clone(), *ye)),
            Ordering::Equal => Some((x.clone(), *xe || *ye)),
        },
    }
}

fn tighter_hi(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some((x, xe)), Some((y, ye))) => match x.cmp(y) {
            Ordering::Less => Some((x.clone(), *xe)),
            Ordering::Greater => Some((y.clone(), *ye)),
            Ordering::Equal => Some((x.clone(), *xe || *ye)),
        },
    }
}

struct Parsed {
    phase: Phase,
    neg: bool,
    /// Mantissa digits (int then frac).
    mant: smallvec::SmallVec<[u8; 32]>,
    int_len: usize,
    eneg: Option<bool>,
    edigits: smallvec::SmallVec<[u8; MAX_EXP_DIGITS]>,
}

/// Parse a (possibly incomplete) number text; `None` when it is not a prefix of a number.
fn parse_prefix(t: &[u8]) -> Option<Parsed> {
    let mut p = Parsed {
        phase: Phase::Empty,
        neg: false,
        mant: smallvec::SmallVec::new(),
        int_len: 0,
        eneg: None,
        edigits: smallvec::SmallVec::new(),
    };
    for &b in t {
        // The grammar is the shared machine's; what each transition records is ours.
        let next = p.phase.step(b)?;
        match next {
            Phase::Minus => p.neg = true,
            Phase::Zero | Phase::Int => {
                p.mant.push(b - b'0');
                p.int_len += 1;
            }
            Phase::Frac => p.mant.push(b - b'0'),
            Phase::ESign => p.eneg = Some(b == b'-'),
            Phase::Exp => {
                if p.edigits.len() >= MAX_EXP_DIGITS {
                    return None;
                }
                p.edigits.push(b - b'0');
            }
            Phase::Empty | Phase::Dot | Phase::E => {}
        }
        p.phase = next;
    }
    Some(p)
}

/// A class key of number texts under one constraint: two texts with the same key have the
/// same completions (`live` and `accepts_text` agree on them after every continuation), so
/// masks and automaton states can be shared by them ([`super::numdfa`]). `None`: no key for
/// this constraint (`not: {multipleOf}` and "not an integer", which depend on more of the
/// digits), or `text` is not a number prefix.
///
/// Why the key is enough. Write the text as sign, mantissa digits (`mant`, integer part then
/// fraction), exponent. With `sig` the mantissa without its leading zeros and
/// `mag = int_len − leading zeros`, the text's value so far is `0.sig × 10^mag`, and any
/// completion appends digits `u` to the mantissa (`ext` of them to the integer part, only
/// before a `.`) and an exponent `x`: its value is `0.(sig u) × 10^(mag + ext + x)`, whose
/// leading digit is `sig`'s, so its order of magnitude is exactly `mag + ext + x`.
/// - Against a bound `0.B × 10^eb` (digits `B`): orders of magnitude decide unless equal, then
///   the digit strings `sig u` and `B` (zero-padded). Those compare as `sig` against `B`'s
///   first `len(sig)` digits if they differ there, else as `u` against the rest of `B` — so
///   the comparison with every completion is fixed by `mag`, the first comparison (`<`, `=`,
///   `>`) and, when `=`, how much of `B` is consumed (`min(len(sig), len(B))`).
/// - Being a multiple of `10^k` (`integer` is `k = 0`, `multipleOf: 0.01` is `k = −2`): every
///   nonzero digit of `sig u` must sit at place `≥ k`; the last one is `u`'s (at index
///   `len(sig) + lnz(u)`) or else `sig`'s (`lnz(sig)`), at place `mag + ext + x − index`. So
///   `mag`, `lnz(sig)` and, in the fraction (where `len(sig)` is not `mag`), `len(sig)`.
///   For `multipleOf Q × 10^e` with `Q > 1`, the value over `10^e` must also be divisible by
///   `Q`: that integer is `S × 10^(…) + U × 10^(…)` with `S` the digits of `sig` up to its
///   last nonzero one, `U` the completion's digits and the powers fixed by the positions
///   above, so `S mod Q` is the only more that it needs.
/// - The exponent typed so far is kept as typed (its digit count limits what may follow), and
///   the phase and sign as they are; a zero mantissa is kept whole (`0.000` ≠ `0.00`).
///
/// So the key holds exactly those, and nothing else of the digits.
/// `texts_with_one_class_key_share_completions` in the tests checks it against
/// [`NumCore::live`] by brute force.
pub(crate) fn class_key(core: &NumCore, text: &[u8]) -> Option<smallvec::SmallVec<[u8; 32]>> {
    if core.values.is_some() {
        // A finite set: the text itself (its prefixes repeat from item to item, so states
        // keyed by it still save the liveness tests of later masks; a member's exponent
        // depends on the exact mantissa, so little of the text could be dropped).
        return parse_prefix(text).map(|_| text.into());
    }
    if core.frac || !core.not_multiples.is_empty() {
        return None;
    }
    // Integrality (`integer`, `multipleOf`): positions matter; with `multipleOf Q × 10^e`
    // and `Q > 1`, also the digits up to the last nonzero one modulo `Q`.
    let integral = core.integer || core.multiple.is_some();
    let modulus: Option<u128> = match &core.multiple {
        Some(q) => match small(q.int_pow().0)? {
            1 => None,
            m => Some(m),
        },
        None => None,
    };
    let p = parse_prefix(text)?;
    let mut k: smallvec::SmallVec<[u8; 32]> = smallvec::SmallVec::new();
    k.push(p.phase as u8);
    k.push(u8::from(p.neg));
    if core.plain != 0 {
        // The digit caps: which completions the spelling allows depends on the significant
        // and fraction digits typed (with the phase, they also give the integer digits).
        let lead = p.mant.iter().take_while(|&&d| d == 0).count();
        k.extend_from_slice(&((p.mant.len() - lead) as u32).to_le_bytes());
        k.extend_from_slice(&((p.mant.len() - p.int_len) as u32).to_le_bytes());
    }
    let bounded = core.lo.is_some() || core.hi.is_some();
    let exp_phase = matches!(p.phase, Phase::E | Phase::ESign | Phase::Exp);
    if exp_phase {
        k.push(u8::from(p.eneg == Some(true)));
        k.push(p.edigits.len() as u8);
        if bounded || integral {
            k.extend_from_slice(&p.edigits);
        }
    }
    if !bounded && !integral {
        // Any value: the phase, sign and exponent digit count are all that matter.
        return Some(k);
    }
    if matches!(p.phase, Phase::Empty | Phase::Minus | Phase::Zero) {
        return Some(k);
    }
    let lead = p.mant.iter().take_while(|&&d| d == 0).count();
    let sig = &p.mant[lead..];
    let put = |k: &mut smallvec::SmallVec<[u8; 32]>, v: i64| k.extend_from_slice(&v.to_le_bytes());
    if sig.is_empty() {
        // Zero so far: the text is fixed by the phase, sign and mantissa length.
        k.push(b'Z');
        put(&mut k, p.mant.len() as i64);
        return Some(k);
    }
    let mag = p.int_len as i64 - lead as i64;
    let lnz = sig.iter().rposition(|&d| d != 0).map_or(0, |i| i + 1) as i64;
    if bounded {
        put(&mut k, mag);
        for (b, _) in core.lo.iter().chain(core.hi.iter()) {
            if b.is_zero() {
                continue;
            }
            let ord = sig
                .iter()
                .enumerate()
                .map(|(i, &d)| d.cmp(b.digits.get(i).unwrap_or(&0)))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal);
            k.push(ord as i8 as u8);
            if ord.is_eq() {
                put(&mut k, sig.len().min(b.digits.len()) as i64);
            }
        }
        if integral {
            put(&mut k, lnz);
            if p.phase == Phase::Frac {
                put(&mut k, sig.len() as i64);
            }
        }
    } else {
        // Integrality alone: only the places relative to `mag` matter.
        put(&mut k, mag - lnz);
        if p.phase == Phase::Frac {
            put(&mut k, mag - sig.len() as i64);
        }
    }
    if let Some(q) = modulus {
        let r = sig[..lnz as usize].iter().fold(0u128, |r, &d| (r * 10 + u128::from(d)) % q);
        k.extend_from_slice(&r.to_le_bytes());
    }
    Some(k)
}

/// Is `text` a complete JSON number?
pub(crate) fn is_complete(text: &[u8]) -> bool {
    parse_prefix(text).is_some_and(|p| p.phase.is_complete())
}

fn pow10(p: i64) -> Dec {
    Dec { neg: false, digits: vec![1], exp: p + 1 }
}

/// 1, made once: [`NumCore::live`] runs once per new automaton transition.
static ONE: std::sync::LazyLock<Dec> = std::sync::LazyLock::new(|| pow10(0));

impl NumCore {
    /// Any number.
    pub(crate) fn any() -> NumCore {
        NumCore {
            lo: None,
            hi: None,
            integer: false,
            multiple: None,
            int_syntax: false,
            frac: false,
            not_multiples: Vec::new(),
            values: None,
            plain: 0,
        }
    }

    /// The finite set of values this constraint accepts when it is one: a point (`lo == hi`,
    /// both inclusive) or a set, judged by value (`None` under a draft-04 `integer`, which
    /// also looks at the spelling, and for anything else).
    pub(crate) fn finite_values(&self) -> Option<Vec<Dec>> {
        if self.int_syntax {
            return None;
        }
        if let Some(s) = &self.values {
            return Some(s.members.iter().filter(|v| self.spellable(v)).cloned().collect());
        }
        match (&self.lo, &self.hi) {
            (Some((l, false)), Some((h, false))) if l == h => {
                Some(if self.accepts(l) && self.spellable(l) {
                    vec![l.clone()]
                } else {
                    Vec::new()
                })
            }
            _ => None,
        }
    }

    /// Exactly `v`.
    pub(crate) fn point(v: Dec) -> NumCore {
        NumCore { lo: Some((v.clone(), false)), hi: Some((v, false)), ..NumCore::any() }
    }

    /// The intersection; `Err` when `multipleOf` values cannot be combined exactly. With
    /// `integer`, the step becomes `lcm(q, 1)` (the integer multiples of `q`), which liveness
    /// relies on.
    pub(crate) fn merge(&self, o: &NumCore) -> Result<NumCore, ()> {
        let integer = self.integer || o.integer;
        let multiple = match (&self.multiple, &o.multiple) {
            (None, x) | (x, None) => x.clone(),
            (Some(a), Some(b)) => {
                if a.is_multiple_of(b) {
                    Some(a.clone())
                } else if b.is_multiple_of(a) {
                    Some(b.clone())
                } else {
                    Some(a.lcm(b).ok_or(())?)
                }
            }
        };
        let multiple = match multiple {
            Some(q) if integer && !q.is_integer() => Some(q.lcm(&pow10(0)).ok_or(())?),
            m => m,
        };
        let values = match (&self.values, &o.values) {
            (None, None) => None,
            (Some(s), None) | (None, Some(s)) => Some(s.members.clone()),
            (Some(a), Some(b)) => {
                Some(a.members.iter().filter(|v| b.contains(v)).cloned().collect::<Vec<_>>())
            }
        };
        let mut m = NumCore {
            lo: tighter_lo(&self.lo, &o.lo),
            hi: tighter_hi(&self.hi, &o.hi),
            integer,
            multiple,
            int_syntax: self.int_syntax || o.int_syntax,
            frac: self.frac || o.frac,
            not_multiples: {
                let mut v: Vec<Dec> =
                    self.not_multiples.iter().chain(&o.not_multiples).cloned().collect();
                v.sort();
                v.dedup();
                v
            },
            values: None,
            plain: match (self.plain, o.plain) {
                (0, x) | (x, 0) => x,
                (x, y) => x.min(y),
            },
        };
        if let Some(mut vs) = values {
            // Keep only the members the other fields accept: the set alone then decides.
            vs.retain(|v| m.accepts(v));
            m.values = Some(std::sync::Arc::new(NumSet::new(vs)));
        }
        Ok(m)
    }

    /// Can liveness decide `multipleOf` (and `not: {multipleOf}`) exactly? Each mantissa must
    /// have at most [`MAX_MULTIPLE_DIGITS`] digits, `integer` must already be folded into the
    /// step (as [`NumCore::merge`] does), the bounds must lie within [`MAX_MULTIPLE_SPAN`]
    /// orders of magnitude of the step's last digit, and excluded multiples must repeat
    /// along the step's multiples with a period of at most [`MAX_EXCLUDED_PERIOD`].
    pub(crate) fn multiple_supported(&self) -> bool {
        if self.not_multiples.iter().any(|r| r.int_pow().0.len() > MAX_MULTIPLE_DIGITS) {
            return false;
        }
        let one = pow10(0);
        if let (Some(s), false) = (self.step(&one), self.not_multiples.is_empty()) {
            if self.exclusions(s, false).is_none() {
                return false;
            }
        }
        let Some(q) = &self.multiple else { return true };
        let (qd, e) = q.int_pow();
        let near = |b: &Bound| {
            b.as_ref().is_none_or(|(v, _)| v.is_zero() || v.exp - e <= MAX_MULTIPLE_SPAN)
        };
        qd.len() <= MAX_MULTIPLE_DIGITS
            && (!self.integer || q.is_integer())
            && near(&self.lo)
            && near(&self.hi)
    }

    /// With `not: {multipleOf r}`: which multiples `k × step` are excluded, as periods `c`
    /// (`k × step` is a multiple of `r` iff `c` divides `k`), "not an integer" counting as
    /// `r = 1`; `None` when they do not fit (refused at compile time).
    /// With `one_any_period` (the plain spelling's grid steps), a single period may be of any
    /// size: two consecutive multiples then always hold a kept one, so
    /// [`Exclusions::any_kept`] scans at most two.
    fn exclusions(&self, step: &Dec, one_any_period: bool) -> Option<Exclusions> {
        let mut cs = smallvec::SmallVec::new();
        let one = pow10(0);
        let frac = self.frac.then_some(&one);
        for r in self.not_multiples.iter().chain(frac) {
            cs.push(index_period(step, r)?);
        }
        let mut period: u128 = 1;
        for &c in &cs {
            period = period / gcd(period, c) * c;
            if period > MAX_EXCLUDED_PERIOD && !(one_any_period && cs.len() == 1) {
                return None;
            }
        }
        if one_any_period {
            // `any_kept` counts residues modulo `Q × c` in `u128`.
            small(step.int_pow().0)?.checked_mul(period)?.checked_mul(10)?;
        }
        Some(Exclusions { cs, period })
    }

    /// The step values are multiples of: `multipleOf` (with `integer` folded in), or 1 for
    /// integers; `one` holds the 1.
    fn step<'s>(&'s self, one: &'s Dec) -> Option<&'s Dec> {
        match &self.multiple {
            Some(q) => Some(q),
            None if self.integer => Some(one),
            None => None,
        }
    }

    fn in_range(&self, v: &Dec) -> bool {
        if let Some((l, ex)) = &self.lo {
            match v.cmp(l) {
                Ordering::Less => return false,
                Ordering::Equal if *ex => return false,
                _ => {}
            }
        }
        if let Some((h, ex)) = &self.hi {
            match v.cmp(h) {
                Ordering::Greater => return false,
                Ordering::Equal if *ex => return false,
                _ => {}
            }
        }
        true
    }

    /// Does the complete value `v` satisfy the constraint?
    pub(crate) fn accepts(&self, v: &Dec) -> bool {
        self.values.as_ref().is_none_or(|s| s.contains(v))
            && self.in_range(v)
            && (!self.integer || v.is_integer())
            && (!self.frac || !v.is_integer())
            && self.multiple.as_ref().is_none_or(|q| v.is_multiple_of(q))
            && !self.not_multiples.iter().any(|r| v.is_multiple_of(r))
    }

    /// Does the complete number text satisfy the constraint?
    pub(crate) fn accepts_text(&self, text: &[u8]) -> bool {
        (!self.int_syntax || !text.iter().any(|&b| matches!(b, b'.' | b'e' | b'E')))
            && (self.plain == 0 || parse_prefix(text).is_some_and(|p| self.plain_caps_ok(&p)))
            && is_complete(text)
            && std::str::from_utf8(text).ok().and_then(Dec::parse).is_some_and(|v| self.accepts(&v))
    }

    /// Can the (possibly incomplete) number `text` still be completed to a value that
    /// satisfies the constraint?
    pub(crate) fn live(&self, text: &[u8]) -> bool {
        let Some(p) = parse_prefix(text) else { return false };
        if let Some(s) = &self.values {
            return self.set_live(s, &p, text);
        }
        if self.integer && self.frac {
            return false;
        }
        if self.plain != 0 {
            return self.plain_live(&p);
        }
        if self.lo.is_none()
            && self.hi.is_none()
            && !self.integer
            && !self.frac
            && self.multiple.is_none()
            && self.not_multiples.is_empty()
        {
            // Any number: every syntactic prefix completes (`int_syntax` is checked below).
            return !self.int_syntax
                || matches!(p.phase, Phase::Empty | Phase::Minus | Phase::Zero | Phase::Int);
        }
        if self.int_syntax
            && !matches!(p.phase, Phase::Empty | Phase::Minus | Phase::Zero | Phase::Int)
        {
            return false;
        }
        let one: &Dec = &ONE;
        let step = self.step(one);
        if self.frac && step.is_some_and(Dec::is_integer) {
            // Every multiple of an integer is an integer.
            return false;
        }
        let excl = match step {
            Some(s) if !self.not_multiples.is_empty() => match self.exclusions(s, false) {
                Some(x) => x,
                None => return false, // refused at compile time (`multiple_supported`)
            },
            _ => Exclusions::default(),
        };
        if excl.cs.contains(&1) {
            // Every multiple of the step is excluded.
            return false;
        }
        match p.phase {
            Phase::Empty => {
                self.accepts(&Dec::zero())
                    || self.family_live(false, &[], step, &excl)
                    || self.family_live(true, &[], step, &excl)
            }
            // An integer literal `0` or `-0` has no continuation.
            Phase::Zero if self.int_syntax => self.accepts(&Dec::zero()),
            Phase::Minus | Phase::Zero | Phase::Int | Phase::Dot | Phase::Frac => {
                let lead = p.mant.iter().take_while(|&&d| d == 0).count();
                let sig = &p.mant[lead..];
                (sig.is_empty() && self.accepts(&Dec::zero()))
                    || self.family_live(p.neg, sig, step, &excl)
            }
            Phase::E | Phase::ESign | Phase::Exp => self.exp_live(&p),
        }
    }

    /// Does the (possibly incomplete) text `p` keep within the plain spelling's digit caps: no
    /// exponent, at most `N` significant digits (from the first nonzero digit to the end,
    /// trailing zeros included) and at most `N` after the point?
    fn plain_caps_ok(&self, p: &Parsed) -> bool {
        let n = usize::from(self.plain);
        let lead = p.mant.iter().take_while(|&&d| d == 0).count();
        !matches!(p.phase, Phase::E | Phase::ESign | Phase::Exp)
            && p.mant.len() - lead <= n
            && p.mant.len() - p.int_len <= n
    }

    /// Can some plain text within the digit caps spell `v` (and, under `int_syntax`, without
    /// a point)? Always, without [`NumCore::plain`]. A nonzero `v = 0.D × 10^x` (`k` digits
    /// `D`) is spelled with fewest digits as an integer of `x` digits when `x >= k`, with `k`
    /// significant and `k − x` fraction digits when `0 < x < k`, and as `0.0…0D` with
    /// `k − x` fraction digits (`k` significant) when `x <= 0`.
    pub(crate) fn spellable(&self, v: &Dec) -> bool {
        if self.plain == 0 || v.is_zero() {
            return true;
        }
        let n = i64::from(self.plain);
        let k = v.digits.len() as i64;
        let x = v.exp;
        let (sig, frac) = if x >= k { (x, 0) } else { (k, k - x) };
        sig <= n && frac <= n && (!self.int_syntax || frac == 0)
    }

    /// Under `plain_numbers`, the `not: {multipleOf}` exclusions must fit for the step of
    /// every fraction length `f <= N` ([`NumCore::plain_live`] meets the step with `10^-f`);
    /// checked at compile time like [`NumCore::multiple_supported`].
    pub(crate) fn plain_supported(&self) -> bool {
        if self.plain == 0 || self.not_multiples.is_empty() || self.values.is_some() {
            // A set's members are decided one by one, without exclusions.
            return true;
        }
        let one = pow10(0);
        (0..=i64::from(self.plain))
            .all(|f| self.exclusions(&grid_step(self.step(&one), f), true).is_some())
    }

    /// [`NumCore::live`] under [`NumCore::plain`]. A plain text within the caps is a sign, an
    /// integer `T < 10^N` and a fraction length `f <= N`: its value is `T × 10^-f`. The texts
    /// that extend a prefix are, for each shape, the multiples of `10^-f` in one interval:
    /// - after integer digits `D` (`d` of them, `D ≠ 0`), `a` more integer digits and `f`
    ///   fraction digits with `d + a + f <= N` give `[D × 10^a, (D + 1) × 10^a)`;
    /// - after `0`, `D.` or `D.G` (`g` fraction digits typed), `f >= max(g, 1)` fraction digits
    ///   give `[D.G, D.G + 10^-g)`, with `d + f <= N` when `D ≠ 0` (when the integer part is
    ///   `0`, `T` has at most `f <= N` digits);
    /// - before any digit, `(0, 10^(N−f))` for every `f`, and zero.
    ///
    /// For a fixed interval the multiples of `10^-f` grow with `f`, so only the largest `f`
    /// that the caps allow is tried. Each candidate meets the bounds, the step met with
    /// `10^-f` (`lcm`), "not an integer" and the excluded multiples exactly through
    /// [`NumCore::exists_in`]. Zero (`0`, `-0`, `0.0`: value 0) is reachable while every
    /// digit typed is a zero.
    fn plain_live(&self, p: &Parsed) -> bool {
        if !self.plain_caps_ok(p) {
            return false;
        }
        if self.int_syntax
            && !matches!(p.phase, Phase::Empty | Phase::Minus | Phase::Zero | Phase::Int)
        {
            return false;
        }
        let n = i64::from(self.plain);
        let fcap = if self.int_syntax { 0 } else { n };
        let zero = Dec::zero();
        let c = self.oriented(p.neg);
        let lead = p.mant.iter().take_while(|&&d| d == 0).count();
        let sig_empty = lead == p.mant.len();
        // Before any digit: every nonzero T < 10^N, at every fraction length.
        let any_positive =
            |c: &NumCore| (0..=fcap).any(|f| c.plain_in(f, &zero, true, &pow10(n - f), true));
        match p.phase {
            Phase::Empty => {
                self.accepts(&zero) || any_positive(self) || any_positive(&self.oriented(true))
            }
            Phase::Minus => self.accepts(&zero) || any_positive(&c),
            Phase::Zero => {
                self.accepts(&zero) || (fcap >= 1 && c.plain_in(fcap, &zero, true, &ONE, true))
            }
            Phase::Int => {
                let d = p.int_len as i64;
                for a in 0..=(n - d) {
                    let l = Dec::norm(false, p.mant.to_vec(), d + a);
                    if c.hi.as_ref().is_some_and(|(h, _)| l > *h) {
                        break;
                    }
                    let h = succ(&p.mant, d + a);
                    if c.plain_in(fcap.min(n - d - a), &l, false, &h, true) {
                        return true;
                    }
                }
                false
            }
            Phase::Dot | Phase::Frac => {
                let g = (p.mant.len() - p.int_len) as i64;
                let int_zero = p.mant[..p.int_len].iter().all(|&d| d == 0);
                let f = if int_zero { fcap } else { fcap.min(n - p.int_len as i64) };
                if f < g.max(1) {
                    return false;
                }
                let l = Dec::norm(false, p.mant.to_vec(), p.int_len as i64);
                let h = succ(&p.mant, p.int_len as i64);
                if sig_empty {
                    self.accepts(&zero) || c.plain_in(f, &zero, true, &h, true)
                } else {
                    c.plain_in(f, &l, false, &h, true)
                }
            }
            Phase::E | Phase::ESign | Phase::Exp => false,
        }
    }

    /// Is there an admissible value that is a multiple of `10^-f` in the interval from
    /// `l >= 0` to `h` (open ends where `lex`/`hex`) met with the bounds? For the positive
    /// side of a constraint ([`NumCore::oriented`]).
    fn plain_in(&self, f: i64, l: &Dec, lex: bool, h: &Dec, hex: bool) -> bool {
        let (l, lex) = match &self.lo {
            Some((b, bex)) => match b.cmp(l) {
                Ordering::Greater => (b, *bex),
                Ordering::Equal => (l, lex || *bex),
                Ordering::Less => (l, lex),
            },
            None => (l, lex),
        };
        let (h, hex) = match &self.hi {
            Some((b, bex)) => match b.cmp(h) {
                Ordering::Less => (b, *bex),
                Ordering::Equal => (h, hex || *bex),
                Ordering::Greater => (h, hex),
            },
            None => (h, hex),
        };
        let one: &Dec = &ONE;
        let step = grid_step(self.step(one), f);
        match l.cmp(h) {
            Ordering::Greater => return false,
            Ordering::Equal => {
                return !lex && !hex && self.accepts(l) && l.is_multiple_of(&step);
            }
            Ordering::Less => {}
        }
        if self.frac && step.is_integer() {
            return false;
        }
        let excl = if self.not_multiples.is_empty() {
            Exclusions::default()
        } else {
            match self.exclusions(&step, true) {
                Some(x) => x,
                None => return false, // refused at compile time (`plain_supported`)
            }
        };
        if excl.cs.contains(&1) {
            return false;
        }
        self.exists_in(Some(&step), &excl, l, lex, h, hex)
    }

    /// [`NumCore::live`] for a finite set: some member still reachable from `text`, decided
    /// by the point constraint of each candidate ([`NumCore::point`], with `int_syntax`).
    /// Candidates are the members a completion could reach at all: before the exponent, a
    /// completion keeps the typed significant digits `P` as the leading ones and the
    /// exponent can move the point anywhere, so a member's digit string must start with `P`
    /// or be `P` without its trailing zeros; in the exponent the mantissa is fixed, so its
    /// digits must be the member's. Zero is reachable while every typed digit is a zero.
    fn set_live(&self, s: &NumSet, p: &Parsed, text: &[u8]) -> bool {
        let reach = |v: &Dec| {
            let mut c = NumCore::point(v.clone());
            c.int_syntax = self.int_syntax;
            c.plain = self.plain;
            c.live(text)
        };
        let zero = Dec::zero();
        match p.phase {
            Phase::Empty => s.members.iter().any(reach),
            Phase::Minus | Phase::Zero | Phase::Int | Phase::Dot | Phase::Frac => {
                let lead = p.mant.iter().take_while(|&&d| d == 0).count();
                let sig = &p.mant[lead..];
                let trimmed = &sig[..sig.len() - sig.iter().rev().take_while(|&&d| d == 0).count()];
                (sig.is_empty() && s.contains(&zero) && reach(&zero))
                    || s.with_prefix(p.neg, sig).any(reach)
                    || (trimmed.len() < sig.len()
                        && s.with_prefix(p.neg, trimmed)
                            .take_while(|m| m.digits == trimmed)
                            .any(reach))
            }
            Phase::E | Phase::ESign | Phase::Exp => {
                let m = Dec::norm(false, p.mant.to_vec(), p.int_len as i64);
                if m.is_zero() {
                    return s.contains(&zero) && reach(&zero);
                }
                let found =
                    s.with_prefix(p.neg, &m.digits).take_while(|v| v.digits == m.digits).any(reach);
                found
            }
        }
    }

    /// The constraint seen from the positive side: for `neg`, values are negated (borrowed
    /// as it is otherwise: this runs once per new automaton transition).
    fn oriented(&self, neg: bool) -> std::borrow::Cow<'_, NumCore> {
        if !neg {
            return std::borrow::Cow::Borrowed(self);
        }
        std::borrow::Cow::Owned(NumCore {
            lo: self.hi.as_ref().map(|(v, e)| (v.negate(), *e)),
            hi: self.lo.as_ref().map(|(v, e)| (v.negate(), *e)),
            integer: self.integer,
            multiple: self.multiple.clone(),
            int_syntax: self.int_syntax,
            frac: self.frac,
            not_multiples: self.not_multiples.clone(),
            values: None,
            plain: self.plain,
        })
    }

    /// Is there a value `> 0` (sign `neg`) whose significant digits start with `sig`, a
    /// multiple of `step` when there is one?
    fn family_live(&self, neg: bool, sig: &[u8], step: Option<&Dec>, excl: &Exclusions) -> bool {
        let c = self.oriented(neg);
        // Positive values only.
        let (hi, hex) = match &c.hi {
            // Unbounded above: large scales hold whole runs of multiples, integers or not
            // (`live` has refused "not an integer" with an integer step).
            None => return true,
            Some((h, _)) if h.neg || h.is_zero() => return false,
            Some((h, ex)) => (h, *ex),
        };
        let lo_pos = match &c.lo {
            Some((l, ex)) if !l.neg && !l.is_zero() => Some((l, *ex)),
            _ => None,
        };
        let n = sig.len() as i64;
        // Without digits yet any positive value is reachable.
        if sig.is_empty() {
            let zero = Dec::zero();
            let (l, lex) = lo_pos.unwrap_or((&zero, true));
            return c.exists_in(step, excl, l, lex, hi, hex);
        }
        let p_lo = Dec::norm(false, sig.to_vec(), 0); // 0.P
        let p_hi = succ(sig, 0); // 0.(P+1)
                                 // Values at scale t lie in [10^(t-1), 10^t).
        let t_max = hi.exp + 1;
        let t_min = match (lo_pos, step) {
            (Some((l, _)), s) => (l.exp - 1).max(s.map_or(i64::MIN, |s| s.exp - 1)),
            // Positive multiples are at least the step.
            (None, Some(s)) => s.exp - 1,
            // Arbitrarily small positive values are reachable and in range.
            (None, None) => return true,
        };
        let t_min = if c.int_syntax { t_min.max(n) } else { t_min };
        // A scale t with lo.exp + 1 <= t <= hi.exp - 1 has its interval J_t inside
        // [10^(t-1), 10^t), strictly above lo and at most hi; when also t - n >= step.exp + 1,
        // J_t is at least 10^(step.exp + 1) > 2 × step long, so it holds two consecutive
        // multiples, of which one is not an integer when the step is not (with exclusions,
        // `span` digits more give a whole period of multiples). Such a scale
        // decides at once; when there is none, the scan below is short (hi.exp is then at most
        // a few scales above t_min plus the digits typed).
        let inner = lo_pos
            .map_or(t_min, |(l, _)| l.exp + 1)
            .max(step.map_or(t_min, |s| n + s.exp + excl.span()))
            .max(t_min);
        if inner < hi.exp {
            return true;
        }
        let mut t = t_min;
        while t <= t_max {
            let shift = |d: &Dec| -> Dec {
                if d.is_zero() {
                    return d.clone();
                }
                Dec { neg: false, digits: d.digits.clone(), exp: d.exp + t }
            };
            let a = shift(&p_lo);
            let b = shift(&p_hi);
            // J_t = [a, b) ∩ [lo, hi].
            let (l, lex) = match lo_pos {
                Some((l, e)) if *l >= a => (l.clone(), e),
                _ => (a, false),
            };
            let (h, hx) = if *hi < b { (hi.clone(), hex) } else { (b, true) };
            if c.exists_in(step, excl, &l, lex, &h, hx) {
                return true;
            }
            t += 1;
        }
        false
    }

    /// Is there an admissible value in the interval from `l >= 0` to `h` (open ends where
    /// `lex`/`hex`): a multiple of `step` if any, not an integer for `frac`?
    fn exists_in(
        &self,
        step: Option<&Dec>,
        excl: &Exclusions,
        l: &Dec,
        lex: bool,
        h: &Dec,
        hex: bool,
    ) -> bool {
        match l.cmp(h) {
            Ordering::Greater => return false,
            Ordering::Equal => return !lex && !hex && self.accepts(l),
            Ordering::Less => {}
        }
        // A proper interval holds non-integers.
        let Some(q) = step else { return true };
        // Count in units of 10^e, q = Q units.
        let (qd, e) = q.int_pow();
        let Some(qm) = small(qd) else {
            // Refused at compile time (`multiple_supported`).
            return false;
        };
        let (lu, lexact) = units_floor(l, e);
        // The first multiple of Q at or above l (above it when `lex`).
        let mut m = lu;
        if !lexact {
            units_add(&mut m, 1);
        }
        match units_mod(&m, qm) {
            0 if lexact && lex => units_add(&mut m, qm),
            0 => {}
            r => units_add(&mut m, qm - r),
        }
        let (hu, hexact) = units_floor(h, e);
        let below = |m: &Units| match units_cmp(m, &hu) {
            Ordering::Less => true,
            // m = floor(h): in when h is closed or lies above it.
            Ordering::Equal => !hex || !hexact,
            Ordering::Greater => false,
        };
        if !below(&m) {
            return false;
        }
        if !excl.cs.is_empty() {
            return excl.any_kept(m, qm, below);
        }
        if !self.frac {
            return true;
        }
        if e >= 0 {
            // Every multiple of an integer is an integer.
            return false;
        }
        // `m × 10^e` is an integer iff 10^(-e) divides m; then m + Q is not one (Q has no
        // trailing zeros, so q is not an integer).
        let s = (-e) as usize;
        let integral = m.is_empty() || (m.len() > s && m[m.len() - s..].iter().all(|&d| d == 0));
        if !integral {
            return true;
        }
        units_add(&mut m, qm);
        below(&m)
    }

    fn exp_live(&self, p: &Parsed) -> bool {
        let m = Dec::norm(false, p.mant.to_vec(), p.int_len as i64);
        if m.is_zero() {
            return self.accepts(&Dec::zero());
        }
        let c = self.oriented(p.neg);
        // Exponent interval from the range: m × 10^x in [lo, hi].
        let mut xlo: i64 = i64::MIN / 4;
        let mut xhi: i64 = i64::MAX / 4;
        if let Some((l, ex)) = &c.lo {
            if !l.neg && !l.is_zero() {
                // m×10^x = 0.dm × 10^(em+x) vs 0.dl × 10^el.
                let ok_eq = match m.digits.cmp(&l.digits) {
                    Ordering::Greater => true,
                    Ordering::Equal => !ex,
                    Ordering::Less => false,
                };
                xlo = l.exp - m.exp + if ok_eq { 0 } else { 1 };
            } else if l.is_zero() && *ex {
                // > 0: every positive value.
            }
        }
        if let Some((h, ex)) = &c.hi {
            if h.neg || h.is_zero() {
                return false;
            }
            let ok_eq = match m.digits.cmp(&h.digits) {
                Ordering::Less => true,
                Ordering::Equal => !ex,
                Ordering::Greater => false,
            };
            xhi = h.exp - m.exp - if ok_eq { 0 } else { 1 };
        }
        if c.integer {
            xlo = xlo.max(m.digits.len() as i64 - m.exp);
        }
        if c.frac {
            // m × 10^x has a fractional part iff x < (digits − exp).
            xhi = xhi.min(m.digits.len() as i64 - m.exp - 1);
        }
        for r in &c.not_multiples {
            // m × 10^x is a multiple of r iff x >= x_r.
            if let Some(x) = min_exp_for_multiple(&m, r) {
                xhi = xhi.min(x - 1);
            }
        }
        if let Some(q) = &c.multiple {
            match min_exp_for_multiple(&m, q) {
                Some(x0) => xlo = xlo.max(x0),
                None => return false,
            }
        }
        if xlo > xhi {
            return false;
        }
        // Reachable exponents.
        let cap: i64 = 10i64.pow(MAX_EXP_DIGITS as u32) - 1;
        let meet = |a: i64, b: i64| a.max(xlo) <= b.min(xhi);
        if p.edigits.is_empty() {
            return match p.eneg {
                None => meet(-cap, cap),
                Some(false) => meet(0, cap),
                Some(true) => meet(-cap, 0),
            };
        }
        let e: i64 = p.edigits.iter().fold(0i64, |a, &d| a * 10 + i64::from(d));
        let neg = p.eneg == Some(true);
        let mut width: i64 = 1;
        let mut base = e;
        let max_more = MAX_EXP_DIGITS - p.edigits.len();
        for k in 0..=max_more {
            let (a, b) = (base, base + width - 1);
            let (a, b) = if neg { (-b, -a) } else { (a, b) };
            if meet(a, b) {
                return true;
            }
            if k == max_more || base == 0 {
                // A leading zero exponent cannot be extended meaningfully beyond its value:
                // "e0" followed by digits is still allowed ("e01"), same values scaled.
                if base == 0 && k < max_more {
                    // "0d…" reads as the digits after the zero: all values below 10^(more).
                    let lim = 10i64.pow((max_more) as u32) - 1;
                    let (a, b) = if neg { (-lim, 0) } else { (0, lim) };
                    return meet(a, b);
                }
                break;
            }
            base *= 10;
            width *= 10;
        }
        false
    }
}

/// `0.(M + 1) × 10^x` for the digit string `M` (`0.M × 10^x` is the start of the interval of
/// values whose digits extend `M`; this is its end).
fn succ(m: &[u8], x: i64) -> Dec {
    let mut up = m.to_vec();
    let mut i = up.len();
    let mut carry = true;
    while carry && i > 0 {
        i -= 1;
        if up[i] == 9 {
            up[i] = 0;
        } else {
            up[i] += 1;
            carry = false;
        }
    }
    if carry {
        up.insert(0, 1);
        return Dec::norm(false, up, x + 1);
    }
    Dec::norm(false, up, x)
}

/// The step of the values that are multiples of `step` (if any) and of `10^-f`:
/// `lcm(Q × 10^e, 10^-f)`, which is `q` when `e >= -f`, else `Q / gcd(Q, 10^k) × 10^-f` with
/// `k = -f - e` (the gcd takes only the factors 2 and 5 of `Q`, so no `u128` overflows).
fn grid_step(step: Option<&Dec>, f: i64) -> Dec {
    let Some(q) = step else { return pow10(-f) };
    let (qd, e) = q.int_pow();
    if e >= -f {
        return q.clone();
    }
    let Some(mut qm) = small(qd) else { return q.clone() };
    let k = -f - e;
    for p in [2u128, 5] {
        let mut left = k;
        while left > 0 && qm % p == 0 {
            qm /= p;
            left -= 1;
        }
    }
    Dec::parse(&format!("{qm}e{}", -f)).expect("a decimal")
}

/// The least exponent `x` with `m × 10^x` a multiple of `q`, if any.
fn min_exp_for_multiple(m: &Dec, q: &Dec) -> Option<i64> {
    // m × 10^x = M × 10^(a0 + x) with M the digit integer.
    let a0 = m.exp - m.digits.len() as i64;
    let (qd, b) = q.int_pow();
    let qm = small(qd)?;
    let mut r = 0u128;
    for &d in &m.digits {
        r = (r * 10 + u128::from(d)) % qm;
    }
    // Need a0 + x >= b and Q | M × 10^s with s = a0 + x - b.
    for s in 0..=130i64 {
        if r == 0 {
            return Some(s + b - a0);
        }
        r = (r * 10) % qm;
    }
    None
}

/// Multiples `k × step` excluded by `not: {multipleOf}` (and "not an integer"): those with
/// `c | k` for some `c` in `cs`; the pattern repeats every `period` multiples.
#[derive(Default)]
struct Exclusions {
    cs: smallvec::SmallVec<[u128; 4]>,
    period: u128,
}

impl Exclusions {
    /// Scales beyond the step's order that make an interval hold a whole period of multiples
    /// (`10^span > 2 × period`).
    fn span(&self) -> i64 {
        if self.cs.is_empty() {
            return 1;
        }
        (self.period.saturating_mul(2)).to_string().len() as i64
    }

    /// Is one of the multiples `m`, `m + Q`, … (in units, while `below`) kept? `m = k × Q`.
    fn any_kept(&self, mut m: Units, qm: u128, below: impl Fn(&Units) -> bool) -> bool {
        // A run of `period` consecutive multiples holds k ≡ 1 (mod period), which no c >= 2
        // divides (`live` has refused c = 1).
        let mut last = m.clone();
        // Saturating: past `u128` the run is longer than any interval (a single period of any
        // size, under the plain spelling), and the scan below decides.
        units_add(&mut last, qm.saturating_mul(self.period - 1));
        if below(&last) {
            return true;
        }
        // k mod c = (m mod (Q c)) / Q.
        let mut res: smallvec::SmallVec<[u128; 4]> =
            self.cs.iter().map(|&c| units_mod(&m, qm * c) / qm).collect();
        loop {
            if res.iter().all(|&r| r != 0) {
                return true;
            }
            units_add(&mut m, qm);
            if !below(&m) {
                return false;
            }
            for (r, &c) in res.iter_mut().zip(&self.cs) {
                *r = (*r + 1) % c;
            }
        }
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The least `c` with `c × q` a multiple of `r` (both positive), if it fits.
fn index_period(q: &Dec, r: &Dec) -> Option<u128> {
    let (qs, rs, _) = common_scale(q, r)?;
    Some(rs / gcd(qs, rs))
}

/// A non-negative integer as decimal digits, most significant first, without leading zeros
/// (zero is empty).
type Units = smallvec::SmallVec<[u8; 40]>;

/// `floor(x / 10^e)` for `x >= 0`, and whether the division is exact.
fn units_floor(x: &Dec, e: i64) -> (Units, bool) {
    if x.is_zero() {
        return (Units::new(), true);
    }
    let k = x.exp - e;
    if k <= 0 {
        return (Units::new(), false);
    }
    let k = k as usize;
    let n = x.digits.len();
    if k >= n {
        let mut u: Units = x.digits.iter().copied().collect();
        u.extend(std::iter::repeat_n(0, k - n));
        (u, true)
    } else {
        // The digits have no trailing zeros, so a dropped digit is non-zero.
        (x.digits[..k].iter().copied().collect(), false)
    }
}

/// `u += v`.
fn units_add(u: &mut Units, v: u128) {
    let mut carry = v;
    for d in u.iter_mut().rev() {
        if carry == 0 {
            return;
        }
        let t = u128::from(*d) + carry;
        *d = (t % 10) as u8;
        carry = t / 10;
    }
    while carry > 0 {
        u.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

/// `u mod q` for `0 < q <= 10^MAX_MULTIPLE_DIGITS`.
fn units_mod(u: &Units, q: u128) -> u128 {
    u.iter().fold(0u128, |r, &d| (r * 10 + u128::from(d)) % q)
}

fn units_cmp(a: &Units, b: &Units) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).unwrap()
    }

    /// Texts with the same [`class_key`] must have exactly the same completions: checked by
    /// liveness and acceptance after every extension up to three bytes over the number
    /// alphabet, for every number prefix up to four bytes (and some longer ones near the
    /// bounds), under unconstrained, integer, bounded, bounded-integer, `multipleOf 10^k` and
    /// `multipleOf Q × 10^e` cores. Each class is compared with its first text.
    /// A set's liveness equals "some member's point constraint is live" on every prefix
    /// of up to five characters and some longer ones: the candidate search by digit prefix
    /// never skips a reachable member. And a set merged with bounds keeps only its members
    /// inside them.
    #[test]
    fn number_sets_are_live_iff_some_member_is() {
        let sets: Vec<Vec<Dec>> = vec![
            ["0", "1", "10", "100", "15", "150", "-15", "-0.5", "0.05", "2.5e3", "19", "9"]
                .iter()
                .map(|v| d(v))
                .collect(),
            (0..300).map(|i| d(&i.to_string())).collect(),
            ["-1", "-10", "1e-7", "123.456"].iter().map(|v| d(v)).collect(),
        ];
        let mut texts: Vec<Vec<u8>> = vec![vec![]];
        let mut last: Vec<Vec<u8>> = vec![vec![]];
        for _ in 0..5 {
            let mut next = Vec::new();
            for w in &last {
                for &c in b"0159.e-" {
                    let mut x = w.clone();
                    x.push(c);
                    if parse_prefix(&x).is_some() {
                        next.push(x);
                    }
                }
            }
            texts.extend(next.iter().cloned());
            last = next;
        }
        for t in ["123.4560", "1.23456e2", "12345.6e-2", "0.0000001", "100e-9", "2500", "25e2"] {
            texts.push(t.as_bytes().to_vec());
        }
        let mut checked = 0;
        for members in &sets {
            for int_syntax in [false, true] {
                let set = NumCore {
                    values: Some(std::sync::Arc::new(NumSet::new(members.clone()))),
                    int_syntax,
                    ..NumCore::any()
                };
                for t in &texts {
                    let want = members.iter().any(|v| {
                        let mut c = NumCore::point(v.clone());
                        c.int_syntax = int_syntax;
                        c.live(t)
                    });
                    assert_eq!(set.live(t), want, "{:?}", String::from_utf8_lossy(t));
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000);
        let set = NumCore {
            values: Some(std::sync::Arc::new(NumSet::new(sets[1].clone()))),
            ..NumCore::any()
        };
        let bounded =
            NumCore { lo: Some((d("100"), true)), multiple: Some(d("7")), ..NumCore::any() };
        let m = set.merge(&bounded).unwrap();
        assert!(m.accepts(&d("105")) && m.accepts(&d("294")));
        assert!(!m.accepts(&d("100")) && !m.accepts(&d("98")) && !m.accepts(&d("106")));
        assert!(m.live(b"10") && m.live(b"1.05e") && !m.live(b"1.06e"));
    }

    #[test]
    fn texts_with_one_class_key_share_completions() {
        let b = |v: &str, ex: bool| Some((d(v), ex));
        let cores = [
            NumCore::any(),
            NumCore { integer: true, ..NumCore::any() },
            NumCore { integer: true, int_syntax: true, ..NumCore::any() },
            NumCore { lo: b("0", false), hi: b("100", false), ..NumCore::any() },
            NumCore { lo: b("1", false), hi: b("99", false), integer: true, ..NumCore::any() },
            NumCore { lo: b("-1.5", true), hi: b("15.5", true), ..NumCore::any() },
            NumCore { lo: b("0.5", false), hi: b("1", true), ..NumCore::any() },
            NumCore { hi: b("0", true), integer: true, ..NumCore::any() },
            NumCore { lo: b("-90", false), hi: b("90", false), ..NumCore::any() },
            NumCore {
                lo: b("0", false),
                hi: b("10", false),
                multiple: Some(d("0.01")),
                ..NumCore::any()
            },
            NumCore { lo: b("5", false), multiple: Some(d("10")), integer: true, ..NumCore::any() },
            NumCore { multiple: Some(d("0.1")), ..NumCore::any() },
            NumCore {
                lo: b("19", false),
                hi: b("1000", false),
                integer: true,
                int_syntax: true,
                ..NumCore::any()
            },
            NumCore { hi: b("15.55", false), ..NumCore::any() },
            NumCore { lo: b("-15.15", false), multiple: Some(d("0.01")), ..NumCore::any() },
            NumCore {
                lo: b("0", false),
                hi: b("100", true),
                multiple: Some(d("0.5")),
                ..NumCore::any()
            },
            NumCore {
                lo: b("-1000", false),
                hi: b("1000", false),
                multiple: Some(d("5")),
                integer: true,
                ..NumCore::any()
            },
            NumCore { multiple: Some(d("15")), ..NumCore::any() },
            NumCore { hi: b("19.5", false), multiple: Some(d("0.25")), ..NumCore::any() },
            NumCore {
                values: Some(std::sync::Arc::new(NumSet::new(
                    ["0", "1", "15", "-1.5", "100", "9.5e1"].iter().map(|v| d(v)).collect(),
                ))),
                ..NumCore::any()
            },
        ];
        let words = |alphabet: &[u8], len: usize| {
            let mut out: Vec<Vec<u8>> = vec![vec![]];
            let mut last: Vec<Vec<u8>> = vec![vec![]];
            for _ in 0..len {
                let mut next = Vec::new();
                for w in &last {
                    for &c in alphabet {
                        let mut x = w.clone();
                        x.push(c);
                        next.push(x);
                    }
                }
                out.extend(next.iter().cloned());
                last = next;
            }
            out
        };
        let exts = words(b"0159.e-+", 3);
        let mut texts: Vec<Vec<u8>> =
            words(b"0159.e-", 4).into_iter().filter(|t| parse_prefix(t).is_some()).collect();
        for t in [
            "99.99",
            "100.00",
            "15.499",
            "15.5000",
            "1e0000000",
            "0.000001",
            "1000000",
            "-89.9",
            "15.5",
            "15.55",
            "15.555",
            "15.5e",
            "15.55e",
            "15.1",
            "15.15",
            "-15.1",
            "-15.15",
            "-15.151",
            "1.10",
            "1.1",
            "1.19",
            "1.190",
            "11.1",
            "1.105",
        ] {
            texts.push(t.as_bytes().to_vec());
        }
        let (mut checked, mut merged) = (0usize, 0usize);
        for core in &cores {
            let mut classes: std::collections::HashMap<_, Vec<u8>> = Default::default();
            for t in &texts {
                let Some(k) = class_key(core, t) else { continue };
                let Some(rep) = classes.get(&k) else {
                    classes.insert(k, t.clone());
                    continue;
                };
                merged += 1;
                for e in &exts {
                    let x = [&t[..], e].concat();
                    let y = [&rep[..], e].concat();
                    assert_eq!(
                        core.live(&x),
                        core.live(&y),
                        "{core:?}: {:?} vs {:?} + {:?}",
                        String::from_utf8_lossy(t),
                        String::from_utf8_lossy(rep),
                        String::from_utf8_lossy(e)
                    );
                    assert_eq!(
                        core.accepts_text(&x),
                        core.accepts_text(&y),
                        "{core:?}: {t:?} vs {rep:?} + {e:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(merged > 5_000 && checked > 1_000_000, "merged {merged}, checked {checked}");
        // The keys do merge the digits they should, and not those they must not.
        let c = &cores[3];
        assert_eq!(class_key(c, b"12"), class_key(c, b"13"));
        assert_ne!(class_key(c, b"10"), class_key(c, b"12"), "10 may reach 100, 12 may not");
        let c = &cores[cores.len() - 1];
        assert_ne!(class_key(c, b"12"), class_key(c, b"13"), "12 and 13 differ modulo 0.25");
        let none = NumCore { frac: true, ..NumCore::any() };
        assert!(class_key(&none, b"1").is_none(), "not an integer depends on the digits");
    }

    fn range(lo: Option<(&str, bool)>, hi: Option<(&str, bool)>, integer: bool) -> NumCore {
        NumCore {
            lo: lo.map(|(s, e)| (d(s), e)),
            hi: hi.map(|(s, e)| (d(s), e)),
            integer,
            ..NumCore::any()
        }
    }

    #[test]
    fn non_integers() {
        let mut c = range(Some(("2", false)), Some(("3", false)), false);
        c.frac = true;
        for t in ["2.5", "2.000001", "25e-1", "0.25e1"] {
            assert!(c.live(t.as_bytes()) && c.accepts_text(t.as_bytes()), "{t}");
        }
        for t in ["2", "3", "2.0", "20e-1", "3.5", "1.5"] {
            assert!(!c.accepts_text(t.as_bytes()), "{t}");
        }
        // Prefixes: "2" and "2.0" can still become 2.05; "2.5e1" only reaches integers or
        // values out of range; "3" only 3 or more.
        assert!(c.live(b"2") && c.live(b"2.0") && c.live(b"2.5e"));
        assert!(!c.live(b"2.5e1") && !c.live(b"3.") && !c.live(b"-"));
        let mut any = NumCore::any();
        any.frac = true;
        assert!(any.live(b"15") && any.live(b"0") && any.live(b"-0") && any.live(b"1.5e-"));
        assert!(!any.live(b"1.5e1") && !any.live(b"0e") && !any.accepts_text(b"0"));
    }

    #[test]
    fn decimals() {
        assert_eq!(d("1000e-1"), d("100"));
        assert_eq!(d("1.0"), d("1"));
        assert!(d("-0.0").is_zero());
        assert!(d("1e2").is_integer() && !d("1.5").is_integer() && d("1.50e1").is_integer());
        assert!(d("-3") < d("-2.5") && d("0.01") < d("0.1") && d("9") < d("10"));
        assert!(d("7.5").is_multiple_of(&d("2.5")) && !d("7.4").is_multiple_of(&d("2.5")));
        assert!(d("1e3").is_multiple_of(&d("8")) && !d("0.1").is_multiple_of(&d("1")));
        assert_eq!(d("2").lcm(&d("3")), Some(d("6")));
        assert_eq!(d("0.4").lcm(&d("0.6")), Some(d("1.2")));
        assert_eq!(d("1.5").lcm(&d("25")), Some(d("75")));
    }

    #[test]
    fn digit_by_digit_ranges() {
        let r = range(Some(("150", false)), Some(("160", false)), false);
        assert!(r.live(b"1"));
        assert!(!r.live(b"2"), "no number starting with 2 lies in [150, 160]");
        assert!(!r.live(b"2e") && r.live(b"1.") && r.live(b"1.5e") && !r.live(b"1.5e-"));
        assert!(r.live(b"16") && !r.live(b"17") && !r.live(b"-"));
        let r = range(Some(("0", true)), Some(("1", false)), true);
        assert!(
            r.live(b"") && r.live(b"1") && r.live(b"0.") && r.live(b"0.1e") && !r.live(b"0.1e-")
        );
        assert!(!r.live(b"2") && !r.live(b"0e") && r.live(b"1000e-3"));
        let r = range(None, None, true);
        assert!(r.live(b"1.5") && r.live(b"1.5e") && !r.live(b"1.5e-") && !r.live(b"1.5e-0"));
        let mut m = NumCore::any();
        m.multiple = Some(d("3"));
        assert!(
            m.live(b"1.") && m.live(b"1.2e") && m.live(b"-") && !m.live(b"1.1e"),
            "11 × 10^x is never a multiple of 3"
        );
        assert!(m.accepts_text(b"1.2e1") && !m.accepts_text(b"1.3e1"));
    }
}

/// Liveness with `multipleOf` checked against an oracle that knows nothing of scales: for a
/// constraint with finitely many admissible values, a text is live iff it is a prefix of some
/// JSON text of one of them.
#[cfg(test)]
mod oracle {
    use super::*;
    use std::collections::HashSet;

    fn d(s: &str) -> Dec {
        Dec::parse(s).unwrap()
    }

    /// `v` written as `int.frac` (frac possibly empty).
    fn plain(v: &Dec) -> (String, String) {
        let digits: String = v.digits.iter().map(|&x| char::from(b'0' + x)).collect();
        let n = v.digits.len() as i64;
        if v.is_zero() {
            (String::from("0"), String::new())
        } else if v.exp <= 0 {
            (String::from("0"), "0".repeat((-v.exp) as usize) + &digits)
        } else if v.exp >= n {
            (digits + &"0".repeat((v.exp - n) as usize), String::new())
        } else {
            (digits[..v.exp as usize].to_string(), digits[v.exp as usize..].to_string())
        }
    }

    /// Every JSON text of `v` up to `max` bytes with exponents of at most `max` in
    /// magnitude (integer literals only for `int_syntax`).
    fn texts(v: &Dec, max: usize, int_syntax: bool, out: &mut Vec<String>) {
        let signs: &[&str] = if v.is_zero() {
            &["", "-"]
        } else if v.neg {
            &["-"]
        } else {
            &[""]
        };
        let m = max as i64;
        for x in -m..=m {
            if int_syntax && x != 0 {
                continue;
            }
            let mut scaled = v.clone();
            if !scaled.is_zero() {
                scaled.exp -= x;
            }
            let (int, frac) = plain(&scaled);
            let mut exps: Vec<String> = Vec::new();
            if x == 0 {
                exps.push(String::new());
            }
            if !int_syntax {
                let a = x.unsigned_abs().to_string();
                let esigns: &[&str] = match x.cmp(&0) {
                    Ordering::Less => &["-"],
                    Ordering::Equal => &["", "+", "-"],
                    Ordering::Greater => &["", "+"],
                };
                for e in ["e", "E"] {
                    for s in esigns {
                        for z in 0..max.min(6) {
                            exps.push(format!("{e}{s}{}{a}", "0".repeat(z)));
                        }
                    }
                }
            }
            for sign in signs {
                for zeros in 0..=max {
                    let body = if frac.is_empty() && zeros == 0 {
                        format!("{sign}{int}")
                    } else if int_syntax {
                        break;
                    } else {
                        format!("{sign}{int}.{frac}{}", "0".repeat(zeros))
                    };
                    if body.len() > max {
                        break;
                    }
                    for e in &exps {
                        if body.len() + e.len() <= max {
                            out.push(format!("{body}{e}"));
                        }
                    }
                }
            }
        }
    }

    /// Every text of at most `len` bytes over the number alphabet that is a number prefix.
    fn prefixes(len: usize) -> Vec<Vec<u8>> {
        let mut all = vec![Vec::new()];
        let mut frontier = vec![Vec::new()];
        for _ in 0..len {
            let mut next = Vec::new();
            for t in &frontier {
                for &b in b"-0123456789.eE+" {
                    let mut x: Vec<u8> = t.clone();
                    x.push(b);
                    if parse_prefix(&x).is_some() {
                        next.push(x);
                    }
                }
            }
            all.extend(next.iter().cloned());
            frontier = next;
        }
        all
    }

    fn core(lo: Option<(&str, bool)>, hi: Option<(&str, bool)>, q: &str, integer: bool) -> NumCore {
        let bounds = NumCore {
            lo: lo.map(|(s, e)| (d(s), e)),
            hi: hi.map(|(s, e)| (d(s), e)),
            integer,
            ..NumCore::any()
        };
        if q.is_empty() {
            return bounds;
        }
        let c = bounds.merge(&NumCore { multiple: Some(d(q)), ..NumCore::any() }).unwrap();
        assert!(c.multiple_supported());
        c
    }

    /// Check `c` on every number prefix of at most `len` bytes; the admissible values are the
    /// multiples `k × step` for `k` in `ks` that `c` accepts (a superset is fine), and their
    /// texts are generated up to `len + extra` bytes, enough to complete every live prefix.
    fn check(c: &NumCore, step: &str, ks: std::ops::RangeInclusive<i64>, len: usize, extra: usize) {
        let step = d(step);
        let mut values = Vec::new();
        for k in ks {
            let v = Dec::parse(&format!("{k}")).unwrap();
            // k × step, exactly: digits of k times 10^(step's power) times step's digits.
            let (sd, sp) = step.int_pow();
            let prod = small(sd).unwrap() as i128 * i128::from(k);
            let v = if v.is_zero() { v } else { Dec::parse(&format!("{prod}e{sp}")).unwrap() };
            if c.accepts(&v) {
                values.push(v);
            }
        }
        let mut live: HashSet<Vec<u8>> = HashSet::new();
        let mut out = Vec::new();
        for v in &values {
            out.clear();
            texts(v, len + extra, c.int_syntax, &mut out);
            for t in &out {
                assert_eq!(Dec::parse(t).as_ref(), Some(v), "{t}");
                for i in 0..=t.len().min(len) {
                    live.insert(t.as_bytes()[..i].to_vec());
                }
            }
        }
        let canon: HashSet<Vec<u8>> = values
            .iter()
            .map(|v| {
                let mut b = Vec::new();
                v.canon(&mut b);
                b
            })
            .collect();
        let all = prefixes(len);
        assert!(all.len() > 1000);
        let mut n_live = 0;
        let zero = values.iter().any(Dec::is_zero);
        for t in &all {
            // Zero has texts with every exponent: `-?0(\.0*)?([eE][+-]?[0-9]*)?` prefixes.
            let zero_text = {
                let body = t.split(|&b| b == b'e' || b == b'E').next().unwrap_or(&[]);
                let body = body.strip_prefix(b"-").unwrap_or(body);
                body.iter().all(|&b| b == b'0' || b == b'.')
                    && body.iter().filter(|&&b| b == b'0').count() >= usize::from(body.len() > 1)
                    && body.first() != Some(&b'.')
                    && (!c.int_syntax || !t.iter().any(|b| matches!(b, b'.' | b'e' | b'E')))
            };
            let want = live.contains(t) || (zero && zero_text);
            n_live += usize::from(want);
            assert_eq!(c.live(t), want, "live({:?}) for {c:?}", String::from_utf8_lossy(t));
            let acc = is_complete(t)
                && (!c.int_syntax || !t.iter().any(|b| matches!(b, b'.' | b'e' | b'E')))
                && Dec::parse(std::str::from_utf8(t).unwrap()).is_some_and(|v| {
                    let mut b = Vec::new();
                    v.canon(&mut b);
                    canon.contains(&b)
                });
            assert_eq!(c.accepts_text(t), acc, "accepts({:?})", String::from_utf8_lossy(t));
        }
        assert!(n_live > 0 || values.is_empty());
    }

    /// One random bounded constraint checked on prefixes of up to 4 bytes; 1 if it admits
    /// a value.
    pub(super) fn check_random(next: &mut impl FnMut(usize) -> usize) -> usize {
        const BOUNDS: [&str; 12] =
            ["-20", "-7.5", "-3", "-1", "-0.5", "0", "0.3", "1", "2.25", "6", "12", "40"];
        const STEPS: [&str; 10] = ["0.25", "0.3", "0.5", "1", "1.5", "2", "3", "7", "0.04", "12"];
        let (a, b) = (next(BOUNDS.len()), next(BOUNDS.len()));
        let (lo, hi) = (BOUNDS[a.min(b)], BOUNDS[a.max(b)]);
        let q = STEPS[next(STEPS.len())];
        let mut c = core(Some((lo, next(2) == 0)), Some((hi, next(2) == 0)), q, next(3) == 0);
        if !c.integer && next(3) == 0 {
            c.frac = true;
        }
        if next(3) == 0 {
            let r = STEPS[next(STEPS.len())];
            c = c.merge(&NumCore { not_multiples: vec![d(r)], ..NumCore::any() }).unwrap();
        }
        if !c.multiple_supported() {
            return 0;
        }
        let step = c.multiple.clone().unwrap();
        let (sd, sp) = step.int_pow();
        // |k| × step <= 40.
        let kmax = (40.0 / (small(sd).unwrap() as f64 * 10f64.powi(sp as i32))).ceil() as i64;
        let admits = (-kmax..=kmax).any(|k| {
            let v = Dec::parse(&format!("{}e{sp}", small(sd).unwrap() as i128 * i128::from(k)));
            v.is_some_and(|v| c.accepts(&v))
        });
        check(&c, &format_dec(&step), -kmax..=kmax, 4, 7);
        usize::from(admits)
    }

    fn format_dec(v: &Dec) -> String {
        let (digits, p) = v.int_pow();
        let m: String = digits.iter().map(|&x| char::from(b'0' + x)).collect();
        format!("{m}e{p}")
    }

    #[test]
    fn multiples_in_bounded_ranges_match_the_oracle() {
        // Zero-crossing, closed.
        check(&core(Some(("-30", false)), Some(("25", false)), "5", false), "5", -6..=5, 5, 6);
        // Zero-crossing, open, fractional step.
        check(&core(Some(("-1", true)), Some(("1", true)), "0.25", false), "0.25", -4..=4, 5, 7);
        // Positive, fractional step, two significant digits.
        check(
            &core(Some(("0.05", false)), Some(("0.3", false)), "0.01", false),
            "0.01",
            0..=31,
            5,
            7,
        );
        // Negative only, integer, exclusive low end.
        check(&core(Some(("-100", true)), Some(("-20", false)), "7", true), "7", -15..=-2, 5, 6);
        // Integers with a fractional step: the step becomes 3.
        check(&core(Some(("-10", false)), Some(("10", false)), "0.3", true), "3", -4..=4, 5, 6);
    }

    /// "Not an integer", integer literals, a single value and merged steps.
    #[test]
    fn not_integers_and_merged_steps_match_the_oracle() {
        // Not an integer: 1.2, 1.6, 2.4, 2.8, 3.6 (2 is excluded) in [1, 4].
        let mut f = core(Some(("1", false)), Some(("4", false)), "0.4", false);
        f.frac = true;
        check(&f, "0.4", 0..=11, 5, 7);
        // Not an integer with a step above 0.5: one multiple per unit interval may be 3.
        let mut f = core(Some(("-0.75", true)), Some(("60", false)), "0.75", false);
        f.frac = true;
        check(&f, "0.75", -1..=80, 5, 7);
        // Exclusive both ends at multiples; integer literals only (draft-04).
        let mut s = core(Some(("0", false)), Some(("100", true)), "10", true);
        s.int_syntax = true;
        check(&s, "10", 0..=10, 5, 3);
        // A single admissible value.
        check(&core(Some(("1.5", false)), Some(("1.5", false)), "0.5", false), "0.5", 0..=4, 5, 7);
        // Two steps merged: lcm(0.4, 0.6) = 1.2.
        let m = core(Some(("-5", false)), Some(("5", false)), "0.4", false)
            .merge(&NumCore { multiple: Some(d("0.6")), ..NumCore::any() })
            .unwrap();
        assert_eq!(m.multiple, Some(d("1.2")));
        check(&m, "1.2", -5..=5, 5, 7);
    }

    /// Wide integer steps, integers without a step, and `not: {multipleOf}`.
    #[test]
    fn integers_and_excluded_multiples_match_the_oracle() {
        // The Minecraft heights: [-2032, 2031], step 16.
        check(
            &core(Some(("-2032", false)), Some(("2031", false)), "16", true),
            "16",
            -128..=127,
            5,
            5,
        );
        // Integers without a step, and an empty range.
        check(&core(Some(("-12", false)), Some(("7", true)), "", true), "1", -12..=7, 5, 5);
        check(&core(Some(("0.1", false)), Some(("0.9", false)), "", true), "1", 0..=1, 4, 5);
        check(&core(Some(("4", true)), Some(("8", true)), "4", false), "4", 0..=3, 4, 5);
        // `not: {multipleOf}`: 13 k in (100, 1000) with k prime to 2, 3, 5, 7 and 11.
        let mut p = core(Some(("100", true)), Some(("1000", true)), "13", true);
        p = p
            .merge(&NumCore {
                not_multiples: [2, 3, 5, 7, 11].map(|r| d(&r.to_string())).to_vec(),
                ..NumCore::any()
            })
            .unwrap();
        assert!(p.multiple_supported());
        check(&p, "13", 7..=77, 5, 5);
        // Halves except multiples of 1.5, not integers either: ±0.5, ±2.5.
        let mut h = core(Some(("-3", false)), Some(("3", false)), "0.5", false);
        h.not_multiples.push(d("1.5"));
        h.frac = true;
        check(&h, "0.5", -6..=6, 5, 7);
        // Excluding the step itself leaves nothing.
        let mut e = core(Some(("-3", false)), Some(("3", false)), "0.5", false);
        e.not_multiples.push(d("0.25"));
        check(&e, "0.5", -6..=6, 4, 4);
        // Without a step: odd numbers and non-integers.
        let mut o = NumCore::any();
        o.not_multiples.push(d("2"));
        assert!(o.live(b"4") && o.live(b"4e") && !o.live(b"4e0") && o.live(b"4.1e0"));
        assert!(o.accepts_text(b"3") && !o.accepts_text(b"0") && o.live(b"0.") && !o.live(b"0e"));
        // Amounts with two decimals (maskbench): only a prefix check near the top.
        let money = core(Some(("0", false)), Some(("99999999999.99", false)), "0.01", false);
        assert!(money.live(b"99999999999.9") && money.live(b"99999999999.99"));
        assert!(!money.live(b"99999999999.999"), "no multiple of 0.01 starts with 14 nines");
        assert!(money.live(b"999999999999.5") && !money.live(b"999999999999.995"), "e-1");
        assert!(money.live(b"12.345") && money.live(b"12.345e") && !money.live(b"12.345e-"));
        assert!(money.accepts_text(b"12.34") && !money.accepts_text(b"12.345"));
        assert!(
            money.accepts_text(b"1234e-2")
                && !money.accepts_text(b"1234.5e-2")
                && !money.accepts_text(b"-0.01")
        );
    }

    /// One side unbounded: every digit prefix reaches a multiple at a large scale.
    #[test]
    fn multiples_with_one_open_side() {
        let c = core(Some(("-7", false)), None, "3", false);
        assert!(
            c.live(b"1") && c.live(b"1.1") && c.live(b"-6") && !c.live(b"-7") && !c.live(b"-8")
        );
        assert!(c.live(b"-0.3") && !c.live(b"-0.4e1") && c.accepts_text(b"-6") && !c.live(b"-1"));
        let mut f = core(None, Some(("0", true)), "1.5", false);
        f.frac = true;
        assert!(
            f.live(b"-1") && f.accepts_text(b"-1.5") && !f.accepts_text(b"-3") && !f.live(b"0")
        );
        let mut g = core(None, None, "2", false);
        g.frac = true;
        assert!(!g.live(b"") && !g.live(b"1.5"), "multiples of 2 are integers");
    }
}

/// Random bounded constraints (fixed seed) against the same oracle.
#[cfg(test)]
mod oracle_random {
    use super::oracle::check_random;

    #[test]
    fn random_bounded_constraints_match_the_oracle() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| -> usize {
            // xorshift64*
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
        };
        let mut checked = 0;
        for _ in 0..60 {
            checked += check_random(&mut next);
        }
        assert!(checked >= 30, "only {checked} constraints had values");
    }
}

#[cfg(test)]
mod plain_tests;
