//! The generation policy: one document, byte by byte, through the [`Cursor`], choosing among the
//! bytes the engine allows by the structural choice each makes, until a per-instance length
//! target; then the closing-first completion search finishes it.
//!
//! A uniform choice over allowed *tokens* (the random-logit model) never ends: nearly every token
//! continues a string, and closing bytes are a handful among a hundred thousand. Here the choice
//! is made over *classes* of bytes first — close the string or continue it, another element or
//! the end of the container, which kind of value (string, number, `true`/`false`, `null`, array,
//! object: the schema's `type` alternatives and `anyOf` branches) — each with a probability drawn
//! per instance (its "style": short or long strings, few or many elements, whitespace or none),
//! and only then among the bytes of the class, uniformly (which spreads enum values, property
//! names and pattern alternatives). The styles vary from instance to instance so a batch covers
//! empty and long strings, empty and full arrays, shallow and deep documents.

use super::cursor::{complete, Cursor, Unfinished};
use super::hints::KeyHints;
use super::numbers::NumberHints;
use super::Rng as Pcg32;
use crate::bytes::UTF8_CONTINUATION;

/// The bytes tried at each step before falling back to all 256: printable ASCII, the JSON
/// whitespace, and the lead bytes of a few multi-byte characters (é, λ, —, 中, an emoji).
const ALPHABET: &[u8] = b" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\t\n\r\xc3\xce\xe2\xe4\xf0";

/// Every byte JSON allows outside strings (RFC 8259 §2–§6): structure, whitespace, numbers and
/// the letters of `true`, `false`, `null`.
const JSON_OUTSIDE: &[u8] = b" \t\n\r,]}:\"[{-0123456789.eE+tfnruals";

/// Characters tried inside a string, by weight: letters and digits, other printable ASCII, and
/// the lead bytes of a few multi-byte characters (their continuation bytes come from the
/// general path, which probes only [`UTF8_CONTINUATION`] there).
fn draw_char(rng: &mut Pcg32) -> u8 {
    const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const PUNCT: &[u8] = b" !#$%&'()*+,-./:;<=>?@[]^_`{|}~";
    const WIDE: &[u8] = b"\xc3\xce\xe2\xe4\xf0";
    match rng.below(100) {
        0..=64 => ALNUM[rng.below(ALNUM.len() as u32) as usize],
        65..=96 => PUNCT[rng.below(PUNCT.len() as u32) as usize],
        _ => WIDE[rng.below(WIDE.len() as u32) as usize],
    }
}

/// Do the bytes end inside a multi-byte UTF-8 character?
fn utf8_open(bytes: &[u8]) -> bool {
    for (back, &b) in bytes.iter().rev().take(4).enumerate() {
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let len = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return back + 1 < len;
    }
    false
}

/// One step inside a JSON string without probing the whole alphabet: close it (with
/// probability `1 - str_more` where it may close), rarely an escape, else characters drawn by
/// weight and tried until one is allowed — which draws from the allowed characters in
/// proportion to their weights. `false`: nothing pushed, the caller probes the alphabet (after
/// a backslash, inside a multi-byte character, or where no drawn character was allowed).
fn string_step(cur: &mut Cursor, style: &Style, rng: &mut Pcg32) -> bool {
    if cur.json().escape || utf8_open(cur.bytes()) {
        return false;
    }
    let can_close = cur.allows(b'"');
    if can_close && rng.unit() >= style.str_more {
        return cur.push(b'"');
    }
    if rng.below(100) == 0 && cur.push(b'\\') {
        return true;
    }
    for _ in 0..24 {
        let b = draw_char(rng);
        if cur.push(b) {
            return true;
        }
    }
    false
}

/// How one instance is written: probabilities drawn once per instance.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Style {
    /// Continue a string rather than close it.
    pub str_more: f64,
    /// Another element/property rather than the end of the container.
    pub more: f64,
    /// Another digit rather than the end of a number.
    pub digit_more: f64,
    /// Whitespace where it is allowed and other bytes are too.
    pub ws: f64,
    /// End the document as soon as it is complete (non-JSON languages).
    pub stop: f64,
    /// Past this many bytes, the completion search takes over.
    pub target: usize,
    /// Past this depth, no new container is opened unless nothing else is allowed.
    pub max_depth: u32,
    /// Where a number starts, try a literal from [`NumberHints`] (set by the caller; 0 from
    /// [`Style::draw`]).
    pub num_hint: f64,
    /// Weight of `.`, `e`, `E`, `+` in a number (0.05; 0 where every `multipleOf` is whole,
    /// so a valid number is an integer and a fraction would need an exponent to end).
    pub punct: f64,
}

impl Style {
    /// A style drawn from `rng`, with a target of at most `max_bytes / 2`.
    pub fn draw(rng: &mut Pcg32, max_bytes: usize) -> Style {
        let pick = |rng: &mut Pcg32, xs: &[f64]| xs[rng.below(xs.len() as u32) as usize];
        let cap = (max_bytes / 2).max(1);
        let target = match rng.below(10) {
            0..=4 => rng.below(64.min(cap) as u32 + 1) as usize,
            5..=8 => rng.below(256.min(cap) as u32 + 1) as usize,
            _ => rng.below(cap as u32 + 1) as usize,
        };
        Style {
            str_more: pick(rng, &[0.0, 0.3, 0.6, 0.85, 0.95]),
            more: pick(rng, &[0.0, 0.25, 0.5, 0.75, 0.9]),
            digit_more: pick(rng, &[0.0, 0.3, 0.6, 0.8]),
            ws: if rng.below(10) == 0 { 0.1 } else { 0.0 },
            stop: pick(rng, &[0.1, 0.3, 0.7, 1.0]),
            target,
            max_depth: 2 + rng.below(8),
            num_hint: 0.0,
            punct: 0.05,
        }
    }

    /// Move the continuation probabilities (`more`, `digit_more`, `str_more`) the share
    /// `pressure` (in [0, 1]) of the way to the largest [`Style::draw`] picks, and the length
    /// target as far toward the longest: after duplicate walks the fuzzer asks for output
    /// less likely to repeat.
    pub fn press(&mut self, pressure: f64) {
        let p = pressure.clamp(0.0, 1.0);
        if p == 0.0 {
            return;
        }
        let toward = |x: f64, hi: f64| x + (hi - x).max(0.0) * p;
        self.more = toward(self.more, 0.9);
        self.digit_more = toward(self.digit_more, 0.8);
        self.str_more = toward(self.str_more, 0.95);
        self.target = toward(self.target as f64, self.target.max(256) as f64) as usize;
    }
}

/// Why a document was not produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalkFailure {
    /// The completion search found no end within the byte or work budget.
    Unfinished(Unfinished),
    /// No byte is allowed and the document is not complete (an engine whose language is empty
    /// from here; never for an exact engine).
    Stuck,
}

/// What the walk may spend.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    pub max_bytes: usize,
    pub max_work: u64,
}

/// A byte class for the weighted choice.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    CloseString,
    StringChar,
    Escape,
    Wide,
    Ws,
    Close,
    Comma,
    Colon,
    Quote,
    NumberStart,
    Digit,
    NumberPunct,
    Literal(u8),
    OpenArray,
    OpenObject,
    Other,
}

fn class_of(b: u8, in_string: bool, escape: bool) -> Class {
    if in_string {
        return match b {
            _ if escape => Class::StringChar,
            b'"' => Class::CloseString,
            b'\\' => Class::Escape,
            0x80.. => Class::Wide,
            _ => Class::StringChar,
        };
    }
    match b {
        b' ' | b'\n' | b'\t' | b'\r' => Class::Ws,
        b']' | b'}' => Class::Close,
        b',' => Class::Comma,
        b':' => Class::Colon,
        b'"' => Class::Quote,
        b'-' => Class::NumberStart,
        b'0'..=b'9' => Class::Digit,
        b'.' | b'e' | b'E' | b'+' => Class::NumberPunct,
        b'a'..=b'z' => Class::Literal(b),
        b'[' => Class::OpenArray,
        b'{' => Class::OpenObject,
        _ => Class::Other,
    }
}

/// Generate one document with `style` from a fresh cursor. `json` switches on the JSON-aware
/// classes (for JSON and JSON Schema constraints); other languages get a uniform choice over
/// allowed bytes with a stop probability.
pub(crate) fn walk(
    cur: &mut Cursor,
    rng: &mut Pcg32,
    style: &Style,
    budget: Budget,
    json: bool,
    hints: &KeyHints,
    numbers: &NumberHints,
) -> Result<Vec<u8>, WalkFailure> {
    let mut allowed = Vec::with_capacity(256);
    let all: Vec<u8> = (0..=255).collect();
    let mut literals: Vec<String> = Vec::new();
    // The length at which a number literal from `numbers` ended: that number grows no further.
    let mut sealed_at = usize::MAX;
    let start_work = cur.work;
    loop {
        let pos = cur.json();
        let sealed = sealed_at == cur.len();
        // A complete JSON value at the top level: only trailing whitespace could follow, or
        // more digits of a top-level number.
        let in_number = !sealed && cur.bytes().last().is_some_and(|b| b.is_ascii_digit());
        let done_json = json
            && pos.depth == 0
            && !pos.in_string
            && cur.len() > 0
            && !(in_number && rng.unit() < style.digit_more);
        if cur.accepting() && (done_json || (!json && rng.unit() < style.stop)) {
            return Ok(cur.bytes().to_vec());
        }
        let number = number_len(cur.bytes());
        // A number of `MAX_NUMBER` bytes that cannot end yet, under `multipleOf`: it would end
        // only through more digits and an exponent (see below).
        let long_number = json
            && !pos.in_string
            && number.0 >= MAX_NUMBER
            && numbers.has_multiples()
            && !cur.accepting();
        let over =
            long_number || cur.len() >= style.target || cur.work - start_work > budget.max_work / 2;
        if over {
            let work = budget.max_work.saturating_sub(cur.work - start_work);
            // Inside a number under `multipleOf` the number is taken back and the search
            // starts where it started, with the number literals: a number like
            // `4847645948449.15` under `multipleOf: 385` ends only through more digits and an
            // exponent (past what an `f64` holds), and each push re-decides the whole number.
            let taken_back =
                if json && !pos.in_string && numbers.has_multiples() { number.0 } else { 0 };
            cur.pop_n(taken_back);
            if taken_back > 0 {
                // One of the literals, drawn as in the walk (the search's own are the same few
                // each time), then the search from after it.
                push_literal(cur, numbers, rng, &mut literals, &mut allowed);
            }
            let left = budget.max_bytes.saturating_sub(cur.len());
            let r = complete(cur, left, work, json, hints, numbers);
            return match r {
                Ok(_) => Ok(cur.bytes().to_vec()),
                Err(u) => Err(WalkFailure::Unfinished(u)),
            };
        }
        // A key just opened: most often one of the schema's property names (an open object
        // would otherwise nearly always get a random additional key).
        let key_opened = json && pos.in_key && pos.in_string && cur.bytes().last() == Some(&b'"');
        if key_opened && rng.unit() < 0.8 {
            // One of the names of the object at hand (see `hints`), from a random start.
            let hints = hints.named_at(cur.bytes());
            if !hints.is_empty() {
                let start = rng.below(hints.len() as u32) as usize;
                let n = hints.len();
                if (0..n.min(8)).any(|i| cur.push_all(&hints[(start + i) % n])) {
                    continue;
                }
            }
        }
        if json && pos.in_string && string_step(cur, style, rng) {
            continue;
        }
        let alphabet: &[u8] = if json && !pos.in_string {
            JSON_OUTSIDE
        } else if json && !pos.escape && utf8_open(cur.bytes()) {
            // Inside an open character only continuation bytes can follow.
            &UTF8_CONTINUATION
        } else {
            ALPHABET
        };
        cur.allowed_of(alphabet, &mut allowed);
        if allowed.is_empty() {
            cur.allowed_of(&all, &mut allowed);
        }
        if allowed.is_empty() {
            if cur.accepting() {
                return Ok(cur.bytes().to_vec());
            }
            return Err(WalkFailure::Stuck);
        }
        let b = if json {
            choose_json(&allowed, pos, style, number, sealed, rng)
        } else {
            pick(&allowed, rng)
        };
        // A number starts: most often one of the literals of `numbers` instead of digits.
        if json
            && !pos.in_string
            && number.0 == 0
            && (b.is_ascii_digit() || b == b'-')
            && rng.unit() < style.num_hint
            && push_literal(cur, numbers, rng, &mut literals, &mut allowed)
        {
            sealed_at = cur.len();
            continue;
        }
        let pushed = cur.push(b);
        debug_assert!(pushed, "an allowed byte is pushed");
    }
}

/// Push the first of a fresh draw of `numbers`' literals that the engine allows whole
/// ([`Cursor::push_number`]); `false` (nothing pushed) when none is.
fn push_literal(
    cur: &mut Cursor,
    numbers: &NumberHints,
    rng: &mut Pcg32,
    literals: &mut Vec<String>,
    scratch: &mut Vec<u8>,
) -> bool {
    numbers.draw(rng, literals);
    literals.iter().any(|t| cur.push_number(t.as_bytes(), scratch))
}

fn pick(bytes: &[u8], rng: &mut Pcg32) -> u8 {
    bytes[rng.below(bytes.len() as u32) as usize]
}

/// The JSON-aware choice: a class by weight, then a byte of the class uniformly.
/// Length of the number the bytes end in (0 if none): the schema engine re-reads a number
/// at every byte, so the walk keeps numbers short (at most [`MAX_NUMBER`] bytes unless
/// nothing else is allowed).
fn number_len(bytes: &[u8]) -> (usize, usize) {
    let n = bytes
        .iter()
        .rev()
        .take_while(|b| matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
        .count();
    let number = &bytes[bytes.len() - n..];
    // Exponent digits so far (validators read numbers as `f64`: `1e999` is out of their range).
    let exponent = match number.iter().position(|b| matches!(b, b'e' | b'E')) {
        Some(i) => number[i + 1..].iter().filter(|b| b.is_ascii_digit()).count(),
        None => 0,
    };
    (n, exponent)
}

const MAX_NUMBER: usize = 12;

fn choose_json(
    allowed: &[u8],
    pos: super::cursor::JsonPos,
    s: &Style,
    (number, exponent): (usize, usize),
    sealed: bool,
    rng: &mut Pcg32,
) -> u8 {
    let mut classes: Vec<(Class, f64)> = Vec::with_capacity(16);
    let deep = pos.depth >= s.max_depth;
    // Inside a string the continuation classes share `str_more` when the string may close
    // here, and everything when it may not (escapes and wide characters rare either way).
    let can_close = pos.in_string && !pos.escape && allowed.contains(&b'"');
    let cont = if can_close { s.str_more } else { 1.0 };
    for &b in allowed {
        let c = class_of(b, pos.in_string, pos.escape);
        if classes.iter().any(|(k, _)| *k == c) {
            continue;
        }
        let w = match c {
            Class::CloseString => 1.0 - s.str_more,
            Class::StringChar => cont,
            Class::Escape => cont * 0.01,
            Class::Wide => cont * 0.03,
            Class::Ws => s.ws,
            // Never quite 0: where the container cannot end yet, a number that may grow no
            // further must still give way to the comma.
            Class::Close => (1.0 - s.more).max(0.02),
            Class::Comma => s.more.max(0.02),
            Class::Digit | Class::NumberPunct if sealed || number >= MAX_NUMBER => 0.0,
            Class::Digit if exponent >= 2 => 0.0,
            Class::Digit if allowed.iter().any(|&x| matches!(x, b',' | b']' | b'}')) => {
                s.digit_more
            }
            Class::NumberPunct => s.punct,
            Class::OpenArray | Class::OpenObject if deep => 0.0,
            _ => 1.0,
        };
        classes.push((c, w));
    }
    let total: f64 = classes.iter().map(|(_, w)| w).sum();
    let class = if total <= 0.0 {
        classes[rng.below(classes.len() as u32) as usize].0
    } else {
        let mut x = rng.unit() * total;
        let mut chosen = classes[classes.len() - 1].0;
        for &(c, w) in &classes {
            if x < w {
                chosen = c;
                break;
            }
            x -= w;
        }
        chosen
    };
    let members: Vec<u8> = allowed
        .iter()
        .copied()
        .filter(|&b| class_of(b, pos.in_string, pos.escape) == class)
        .collect();
    pick(&members, rng)
}
