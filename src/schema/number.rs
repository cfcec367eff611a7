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
//! Limits: exponents of more than [`MAX_EXP_DIGITS`] digits are refused (documented), and
//! `multipleOf` is supported where the range is unbounded in the direction away from zero
//! (checked at compile time by [`NumCore::multiple_supported`]).

use std::cmp::Ordering;

/// Exponents are at most this many digits.
pub(crate) const MAX_EXP_DIGITS: usize = 9;

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
        let (da, pa) = self.int_pow();
        let (db, pb) = o.int_pow();
        let p = pa.min(pb);
        // Both as integers × 10^p.
        let scale = |d: &[u8], k: i64| -> Option<u128> {
            let mut v = small(d)?;
            for _ in 0..k {
                v = v.checked_mul(10)?;
            }
            Some(v)
        };
        let a = scale(da, pa - p)?;
        let b = scale(db, pb - p)?;
        let g = {
            let (mut x, mut y) = (a, b);
            while y != 0 {
                (x, y) = (y, x % y);
            }
            x
        };
        let l = (a / g).checked_mul(b)?;
        let text = format!("{l}e{p}");
        Dec::parse(&text)
    }
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
    /// The value must *not* be an integer (`not: {type: integer}`); not combined with
    /// `multipleOf` (a merge refuses it).
    pub frac: bool,
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

/// Where a number's text stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Empty,
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
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
        p.phase = match (p.phase, b) {
            (Phase::Empty, b'-') => {
                p.neg = true;
                Phase::Minus
            }
            (Phase::Empty | Phase::Minus, b'0') => {
                p.mant.push(0);
                p.int_len = 1;
                Phase::Zero
            }
            (Phase::Empty | Phase::Minus | Phase::Int, b'1'..=b'9') | (Phase::Int, b'0') => {
                p.mant.push(b - b'0');
                p.int_len += 1;
                Phase::Int
            }
            (Phase::Zero | Phase::Int, b'.') => Phase::Dot,
            (Phase::Dot | Phase::Frac, b'0'..=b'9') => {
                p.mant.push(b - b'0');
                Phase::Frac
            }
            (Phase::Zero | Phase::Int | Phase::Frac, b'e' | b'E') => Phase::E,
            (Phase::E, b'+' | b'-') => {
                p.eneg = Some(b == b'-');
                Phase::ESign
            }
            (Phase::E | Phase::ESign | Phase::Exp, b'0'..=b'9') => {
                if p.edigits.len() >= MAX_EXP_DIGITS {
                    return None;
                }
                p.edigits.push(b - b'0');
                Phase::Exp
            }
            _ => return None,
        };
    }
    Some(p)
}

/// Can a number extend with byte `b`? (Syntax only.)
pub(crate) fn syntax_ok(text: &[u8]) -> bool {
    parse_prefix(text).is_some()
}

/// A representative of `text`'s class for constraints with no bounds and no `multipleOf`:
/// a shorter text with exactly the same completions (same phase, sign and, in the exponent,
/// the same digit count, which [`MAX_EXP_DIGITS`] limits), so masks can be cached by it.
/// `integer` constraints only get one before a `.` or exponent (after them, which completions
/// stay integers depends on the digits). `None`: no representative (or not a number prefix).
pub(crate) fn canonical(text: &[u8], integer: bool) -> Option<smallvec::SmallVec<[u8; 16]>> {
    let p = parse_prefix(text)?;
    let mut out: smallvec::SmallVec<[u8; 16]> = smallvec::SmallVec::new();
    if p.neg {
        out.push(b'-');
    }
    let body: &[u8] = match p.phase {
        Phase::Empty | Phase::Minus => b"",
        Phase::Zero => b"0",
        Phase::Int => b"1",
        _ if integer => return None,
        Phase::Dot => b"0.",
        Phase::Frac => b"0.0",
        Phase::E => b"0e",
        Phase::ESign => b"0e+",
        Phase::Exp => b"0e+",
    };
    out.extend_from_slice(body);
    if p.phase == Phase::Exp {
        out.extend(std::iter::repeat_n(b'0', p.edigits.len()));
        if p.eneg.is_none() {
            // `0e` + digits: drop the sign we wrote.
            out.retain(|b| *b != b'+');
        }
    }
    Some(out)
}

/// Is `text` a complete JSON number?
pub(crate) fn is_complete(text: &[u8]) -> bool {
    matches!(
        parse_prefix(text).map(|p| p.phase),
        Some(Phase::Zero | Phase::Int | Phase::Frac | Phase::Exp)
    )
}

fn pow10(p: i64) -> Dec {
    Dec { neg: false, digits: vec![1], exp: p + 1 }
}

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
        }
    }

    /// Exactly `v`.
    pub(crate) fn point(v: Dec) -> NumCore {
        NumCore {
            lo: Some((v.clone(), false)),
            hi: Some((v, false)),
            integer: false,
            multiple: None,
            int_syntax: false,
            frac: false,
        }
    }

    /// The intersection; `Err` when `multipleOf` values cannot be combined exactly.
    pub(crate) fn merge(&self, o: &NumCore) -> Result<NumCore, ()> {
        if (self.frac || o.frac) && (self.multiple.is_some() || o.multiple.is_some()) {
            return Err(());
        }
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
        Ok(NumCore {
            lo: tighter_lo(&self.lo, &o.lo),
            hi: tighter_hi(&self.hi, &o.hi),
            integer: self.integer || o.integer,
            multiple,
            int_syntax: self.int_syntax || o.int_syntax,
            frac: self.frac || o.frac,
        })
    }

    /// `multipleOf` is decided exactly when the range is unbounded away from zero on each side
    /// it allows (see the module docs).
    pub(crate) fn multiple_supported(&self) -> bool {
        if self.multiple.is_none() {
            return true;
        }
        let lo_ok = match &self.lo {
            None => true,
            Some((v, _)) => !v.neg,
        };
        let hi_ok = match &self.hi {
            None => true,
            Some((v, _)) => v.neg || v.is_zero(),
        };
        // Either side infinite with the other side not crossing into it.
        (self.lo.is_none() && self.hi.is_none())
            || (self.hi.is_none() && lo_ok)
            || (self.lo.is_none() && hi_ok)
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
        self.in_range(v)
            && (!self.integer || v.is_integer())
            && (!self.frac || !v.is_integer())
            && self.multiple.as_ref().is_none_or(|q| v.is_multiple_of(q))
    }

    /// Does the complete number text satisfy the constraint?
    pub(crate) fn accepts_text(&self, text: &[u8]) -> bool {
        (!self.int_syntax || !text.iter().any(|&b| matches!(b, b'.' | b'e' | b'E')))
            && is_complete(text)
            && std::str::from_utf8(text).ok().and_then(Dec::parse).is_some_and(|v| self.accepts(&v))
    }

    /// No bounds, no `multipleOf`, no "not an integer" (see [`canonical`]).
    pub(crate) fn is_unbounded(&self) -> bool {
        self.lo.is_none() && self.hi.is_none() && self.multiple.is_none() && !self.frac
    }

    /// Can the (possibly incomplete) number `text` still be completed to a value that
    /// satisfies the constraint?
    pub(crate) fn live(&self, text: &[u8]) -> bool {
        let Some(p) = parse_prefix(text) else { return false };
        if self.integer && self.frac {
            return false;
        }
        if self.lo.is_none()
            && self.hi.is_none()
            && !self.integer
            && !self.frac
            && self.multiple.is_none()
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
        match p.phase {
            Phase::Empty => {
                self.accepts(&Dec::zero())
                    || self.family_live(false, &[])
                    || self.family_live(true, &[])
            }
            Phase::Minus | Phase::Zero | Phase::Int | Phase::Dot | Phase::Frac => {
                let lead = p.mant.iter().take_while(|&&d| d == 0).count();
                let sig = &p.mant[lead..];
                (sig.is_empty() && self.accepts(&Dec::zero())) || self.family_live(p.neg, sig)
            }
            Phase::E | Phase::ESign | Phase::Exp => self.exp_live(&p),
        }
    }

    /// The constraint seen from the positive side: for `neg`, values are negated.
    fn oriented(&self, neg: bool) -> NumCore {
        if !neg {
            return self.clone();
        }
        NumCore {
            lo: self.hi.as_ref().map(|(v, e)| (v.negate(), *e)),
            hi: self.lo.as_ref().map(|(v, e)| (v.negate(), *e)),
            integer: self.integer,
            multiple: self.multiple.clone(),
            int_syntax: self.int_syntax,
            frac: self.frac,
        }
    }

    /// Is there a value `> 0` (sign `neg`) whose significant digits start with `sig`?
    fn family_live(&self, neg: bool, sig: &[u8]) -> bool {
        let c = self.oriented(neg);
        // Positive values only.
        let hi = match &c.hi {
            None => return true, // unbounded above: large scales reach any constraint
            Some((h, ex)) => {
                if h.neg || (h.is_zero()) {
                    return false;
                }
                (h.clone(), *ex)
            }
        };
        let n = sig.len() as i64;
        // Without digits yet any positive value is reachable.
        if sig.is_empty() {
            let (l, lex) = match &c.lo {
                Some((l, e)) if !l.neg && !l.is_zero() => (l.clone(), *e),
                _ => (Dec::zero(), true),
            };
            return c.exists_in(&l, lex, &hi.0, hi.1);
        }
        let p_lo = Dec::norm(false, sig.to_vec(), 0); // 0.P
        let mut up = sig.to_vec();
        // 0.(P+1): increment the digit string.
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
        let p_hi = if carry {
            let mut v = vec![1];
            v.extend(up);
            Dec::norm(false, v, 1)
        } else {
            Dec::norm(false, up, 0)
        };
        let t_max = hi.0.exp + 1;
        let t_min = match &c.lo {
            Some((l, _)) if !l.neg && !l.is_zero() => l.exp - 1,
            _ => {
                if c.integer || c.multiple.is_some() {
                    // Positive integers (and multiples, which exist only in supported shapes
                    // with an unbounded side) are at least 1: scale >= 1.
                    if c.multiple.is_some() {
                        return false;
                    }
                    1
                } else {
                    // Arbitrarily small positive values are reachable and in range.
                    return true;
                }
            }
        };
        let t_min = if c.int_syntax { t_min.max(n) } else { t_min };
        if t_max - t_min > 2000 {
            // A range this wide contains whole scales: some J_t lies inside it.
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
            let (l, lex) = match &c.lo {
                Some((l, e)) if *l >= a => (l.clone(), *e),
                _ => (a, false),
            };
            let (h, hex) = if hi.0 < b { (hi.0.clone(), hi.1) } else { (b, true) };
            if c.exists_in(&l, lex, &h, hex) {
                return true;
            }
            t += 1;
        }
        false
    }

    /// Is there an admissible value (integer if required) in the interval?
    fn exists_in(&self, l: &Dec, lex: bool, h: &Dec, hex: bool) -> bool {
        match l.cmp(h) {
            Ordering::Greater => return false,
            Ordering::Equal => return !lex && !hex && self.accepts(l),
            Ordering::Less => {}
        }
        if !self.integer {
            return true;
        }
        // Smallest integer >= l (or > l).
        let c = ceil_int(l, lex);
        match c.cmp(h) {
            Ordering::Less => true,
            Ordering::Equal => !hex,
            Ordering::Greater => false,
        }
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

/// The smallest integer `>= l` (or `> l` when `strict`).
fn ceil_int(l: &Dec, strict: bool) -> Dec {
    if l.is_integer() {
        if strict {
            return add_one(l);
        }
        return l.clone();
    }
    // Truncate toward zero then adjust.
    let keep = l.exp.max(0) as usize;
    let trunc = if l.exp <= 0 {
        Dec::zero()
    } else {
        Dec::norm(l.neg, l.digits[..keep.min(l.digits.len())].to_vec(), l.exp)
    };
    if l.neg {
        trunc
    } else {
        add_one(&trunc)
    }
}

fn add_one(v: &Dec) -> Dec {
    // v is an integer. Compute v + 1 via digit arithmetic on its integer form.
    if v.is_zero() {
        return pow10(0);
    }
    let n = v.exp as usize;
    let mut d = v.digits.clone();
    d.resize(n, 0);
    if v.neg {
        // -(|v| - 1)
        let mut i = d.len();
        loop {
            i -= 1;
            if d[i] == 0 {
                d[i] = 9;
            } else {
                d[i] -= 1;
                break;
            }
        }
        return Dec::norm(true, d, n as i64);
    }
    let mut i = d.len();
    let mut carry = true;
    while carry && i > 0 {
        i -= 1;
        if d[i] == 9 {
            d[i] = 0;
        } else {
            d[i] += 1;
            carry = false;
        }
    }
    if carry {
        d.insert(0, 1);
        return Dec::norm(false, d, n as i64 + 1);
    }
    Dec::norm(false, d, n as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).unwrap()
    }

    /// A canonical text must have exactly the completions of the text it stands for: checked
    /// by liveness and acceptance after every extension up to three bytes over the number
    /// alphabet, for unconstrained, integer and integer-syntax cores.
    #[test]
    fn canonical_texts_have_the_same_completions() {
        let any = NumCore::any();
        let int = NumCore { integer: true, ..NumCore::any() };
        let int_syntax = NumCore { integer: true, int_syntax: true, ..NumCore::any() };
        let alphabet = b"0159.e-+E";
        let mut exts: Vec<Vec<u8>> = vec![vec![]];
        for _ in 0..3 {
            let mut next = exts.clone();
            for e in &exts {
                for &b in alphabet {
                    let mut x = e.clone();
                    x.push(b);
                    next.push(x);
                }
            }
            exts = next;
        }
        exts.sort();
        exts.dedup();
        let texts = [
            "",
            "-",
            "0",
            "-0",
            "7",
            "123",
            "-45",
            "3.",
            "3.25",
            "-0.5",
            "1e",
            "2E+",
            "2e-",
            "1e5",
            "1.5e-12",
            "1e12345678",
            "12e0000000",
        ];
        let mut checked = 0;
        for core in [&any, &int, &int_syntax] {
            for t in texts {
                let Some(c) = canonical(t.as_bytes(), core.integer) else { continue };
                for e in &exts {
                    let a = [t.as_bytes(), e].concat();
                    let b = [&c[..], e].concat();
                    assert_eq!(core.live(&a), core.live(&b), "{t:?}+{e:?} vs {c:?}");
                    assert_eq!(core.accepts_text(&a), core.accepts_text(&b), "{t:?}+{e:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000);
        assert!(canonical(b"3.25", true).is_none(), "integers after a dot depend on digits");
    }

    fn range(lo: Option<(&str, bool)>, hi: Option<(&str, bool)>, integer: bool) -> NumCore {
        NumCore {
            lo: lo.map(|(s, e)| (d(s), e)),
            hi: hi.map(|(s, e)| (d(s), e)),
            integer,
            multiple: None,
            int_syntax: false,
            frac: false,
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
