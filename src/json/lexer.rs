//! The free-form JSON grammar (RFC 8259) as a byte-level state machine with a `Copy` state.
//!
//! The whole parse state — lexical position, the container stack and the whitespace run — fits
//! in one 32-byte [`JsonState`]: the stack is a bit per level (1 = object, 0 = array) in a `u128`,
//! so nesting is bounded by [`MAX_DEPTH_LIMIT`] and pushing/popping a level is a shift.
//!
//! Exactness: every byte the machine accepts leaves a state from which a complete document is
//! reachable, so a token is allowed iff its bytes run through. Strings are checked as they go:
//! control bytes refused, escapes `\" \\ \/ \b \f \n \r \t \uXXXX` (either hex case), UTF-16
//! surrogates paired (a high surrogate must be followed by `\u` + a low one; a lone low surrogate
//! is refused), raw UTF-8 validated byte by byte (Unicode table 3-7: no overlongs, no surrogates,
//! nothing past U+10FFFF), so a token ending inside a multi-byte character is handled exactly.
//! Numbers follow the RFC grammar (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`).

use super::syntax::{
    escape_char, hex_val, is_ws, literal_index, utf8_continues, utf8_lead, NumPhase, LITERALS,
};
use crate::recognizer::ByteLogic;

/// How many string slices [`JsonGrammar::string_slice_index`] numbers.
pub(crate) const STRING_SLICES: usize = 4 + 256 + 256;

/// The deepest nesting the state can represent.
pub const MAX_DEPTH_LIMIT: usize = 128;

/// How many levels a token may open past a state for the structural slices to hold there:
/// a structural slice is built at depth 1 with room for this many, so it applies at depth `d`
/// only when `d + STRUCT_PUSH_LIMIT` fits the grammar's `max_depth`, and only over a
/// vocabulary where no token has more `[`/`{` bytes than this (real ones have at most 4).
pub(crate) const STRUCT_PUSH_LIMIT: usize = 16;

/// Longest whitespace run (bytes so far) with structural slices: past it the engine walks,
/// so a vocabulary keeps at most ~100 of them (each a bitset over the vocabulary, 16–32 KB)
/// whatever `max_run` allows.
const STRUCT_MAX_WS: u8 = 4;

/// The positions between values with structural slices, by code (see
/// [`JsonGrammar::structural_slice_index`]); numbers and literals take the next two codes.
const BETWEEN: [Lex; 6] =
    [Lex::Value, Lex::ArrFirst, Lex::ObjFirst, Lex::ObjKey, Lex::Colon, Lex::After];

/// Lexical positions outside strings with structural slices, by code: [`BETWEEN`], numbers
/// and literals.
const STRUCT_CODES: usize = BETWEEN.len() + 2;

/// How many slices the free-form JSON engine numbers: the string sub-states', then the
/// structural positions' (code × byte × top-is-object).
pub(crate) const JSON_SLICES: usize = STRING_SLICES + STRUCT_CODES * 256 * 2;

/// [`NumPhase`]s by their `as u8` value (structural slice indices carry the phase).
const PHASES: [NumPhase; 9] = [
    NumPhase::Empty,
    NumPhase::Minus,
    NumPhase::Zero,
    NumPhase::Int,
    NumPhase::Dot,
    NumPhase::Frac,
    NumPhase::E,
    NumPhase::ESign,
    NumPhase::Exp,
];

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Lex {
    /// Before the document.
    Start,
    /// Expecting a value (after `:`, or after `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ArrFirst,
    /// After `{`: a key or `}`.
    ObjFirst,
    /// After `,` in an object: a key.
    ObjKey,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closer.
    After,
    /// The top-level value is complete.
    Done,
    /// In a string, at a character boundary.
    Str,
    /// After `\`.
    StrEsc,
    /// Inside `\uXXXX` (aux: digits so far, flags).
    StrHex,
    /// After a high surrogate escape: `\` must follow.
    StrNeedBackslash,
    /// After a high surrogate escape and `\`: `u` must follow.
    StrNeedU,
    /// Inside a multi-byte UTF-8 character (aux: bytes left and the allowed range).
    StrUtf8,
    /// Inside a number (never [`NumPhase::Empty`]).
    Num(NumPhase),
    /// Inside `true`/`false`/`null` (aux: which literal and how far).
    Lit,
}

/// The parse state of a free-form JSON document. `Copy`, 32 bytes, hashable (the mask cache key).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct JsonState {
    /// Bit `d` is 1 when the container at depth `d` (0 = outermost) is an object.
    stack: u128,
    depth: u8,
    lex: Lex,
    /// Whitespace bytes in the current run.
    ws: u8,
    /// Per-lexeme scratch: see [`Lex`].
    aux: u8,
    /// Bit 0: the current string is an object key.
    key: bool,
}

/// Whitespace policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whitespace {
    /// No whitespace anywhere: `{"a":[1,2]}`.
    Compact,
    /// Whitespace allowed wherever RFC 8259 allows it inside the document, in runs of at most
    /// `max_run` bytes (so a model cannot emit whitespace forever). None before or after the
    /// top-level value.
    Flexible {
        /// Longest whitespace run.
        max_run: u8,
    },
}

/// Which values may stand at the top level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopLevel {
    /// An object, as OpenAI's `json_object` response format.
    Object,
    /// Any JSON value.
    AnyValue,
}

/// The compiled free-form JSON grammar.
#[derive(Clone, Debug)]
pub struct JsonGrammar {
    pub(crate) whitespace: Whitespace,
    pub(crate) top: TopLevel,
    pub(crate) max_depth: u8,
}

// The state stays one 32-byte value (`Lex` keeps its one byte through `NumPhase`'s niche).
const _: () = assert!(std::mem::size_of::<JsonState>() == 32 && std::mem::size_of::<Lex>() == 1);

const HEX_COUNT: u8 = 0x07;
const HEX_FIRST_D: u8 = 0x10;
const HEX_LOW: u8 = 0x20;

impl JsonState {
    #[inline]
    fn with(self, lex: Lex) -> JsonState {
        JsonState { lex, ws: 0, aux: 0, ..self }
    }

    /// How many containers are open.
    #[inline]
    pub(crate) fn depth(&self) -> usize {
        self.depth as usize
    }

    #[inline]
    fn top_is_object(&self) -> bool {
        self.depth > 0 && (self.stack >> (self.depth - 1)) & 1 == 1
    }

    /// The state after a complete value.
    #[inline]
    fn after_value(self) -> JsonState {
        if self.depth == 0 {
            self.with(Lex::Done)
        } else {
            self.with(Lex::After)
        }
    }

    /// Is a number complete here (so the number may end)?
    #[inline]
    fn number_complete(&self) -> bool {
        matches!(self.lex, Lex::Num(p) if p.is_complete())
    }
}

impl JsonGrammar {
    fn push(&self, s: JsonState, object: bool) -> Option<JsonState> {
        if s.depth >= self.max_depth {
            return None;
        }
        let mut n = s;
        if object {
            n.stack |= 1u128 << s.depth;
        } else {
            n.stack &= !(1u128 << s.depth);
        }
        n.depth += 1;
        Some(n.with(if object { Lex::ObjFirst } else { Lex::ArrFirst }))
    }

    pub(crate) fn pop(&self, s: JsonState) -> JsonState {
        let mut n = s;
        n.depth -= 1;
        n.stack &= !(1u128 << n.depth);
        n.after_value()
    }

    /// A value starting with byte `b`.
    fn value_start(&self, s: JsonState, b: u8) -> Option<JsonState> {
        match b {
            b'{' => self.push(s, true),
            b'[' => self.push(s, false),
            b'"' => Some(JsonState { key: false, ..s.with(Lex::Str) }),
            b'-' | b'0'..=b'9' => NumPhase::Empty.step(b).map(|p| s.with(Lex::Num(p))),
            _ => literal_index(b).map(|i| JsonState { aux: (i << 4) | 1, ..s.with(Lex::Lit) }),
        }
    }

    #[inline]
    fn whitespace(&self, s: &JsonState) -> Option<JsonState> {
        match self.whitespace {
            Whitespace::Flexible { max_run } if s.ws < max_run => {
                Some(JsonState { ws: s.ws + 1, ..*s })
            }
            _ => None,
        }
    }

    fn string_byte(&self, s: &JsonState, b: u8) -> Option<JsonState> {
        match b {
            b'"' => {
                if s.key {
                    Some(JsonState { key: false, ..s.with(Lex::Colon) })
                } else {
                    Some(s.after_value())
                }
            }
            b'\\' => Some(s.with(Lex::StrEsc)),
            0x00..=0x1F => None,
            0x20..=0x7F => Some(*s),
            _ => utf8_lead(b).map(|(left, range)| JsonState {
                aux: left | (range << 4),
                ..s.with(Lex::StrUtf8)
            }),
        }
    }

    fn hex_digit(&self, s: &JsonState, b: u8) -> Option<JsonState> {
        let v = hex_val(b)?;
        let n = s.aux & HEX_COUNT;
        let low = s.aux & HEX_LOW != 0;
        let mut aux = s.aux;
        match n {
            0 => {
                if low && v != 0xD {
                    return None;
                }
                if v == 0xD {
                    aux |= HEX_FIRST_D;
                }
            }
            1 => {
                if low && !(0xC..=0xF).contains(&v) {
                    return None;
                }
                if !low && aux & HEX_FIRST_D != 0 {
                    match v {
                        // A lone low surrogate.
                        0xC..=0xF => return None,
                        // A high surrogate: remember it through the remaining digits.
                        0x8..=0xB => aux |= HEX_LOW << 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if n == 3 {
            let high = aux & (HEX_LOW << 1) != 0;
            return Some(if high { s.with(Lex::StrNeedBackslash) } else { s.with(Lex::Str) });
        }
        Some(JsonState { aux: (aux & !HEX_COUNT) | (n + 1), ..*s })
    }

    fn number_byte(&self, s: &JsonState, p: NumPhase, b: u8) -> Option<JsonState> {
        match p.step(b) {
            Some(next) => Some(s.with(Lex::Num(next))),
            // A complete number followed by a byte that cannot extend it: the number ends and
            // the byte belongs to what follows (a digit after `0` is refused there too).
            None if p.is_complete() => self.step(&s.after_value(), b),
            None => None,
        }
    }
}

impl ByteLogic for JsonGrammar {
    type State = JsonState;

    fn step(&self, s: &JsonState, b: u8) -> Option<JsonState> {
        match s.lex {
            Lex::Start => match (self.top, b) {
                (TopLevel::Object, b'{') => self.push(*s, true),
                (TopLevel::Object, _) => None,
                (TopLevel::AnyValue, _) => self.value_start(*s, b),
            },
            Lex::Value | Lex::ArrFirst => {
                if is_ws(b) {
                    self.whitespace(s)
                } else if b == b']' && s.lex == Lex::ArrFirst {
                    Some(self.pop(*s))
                } else {
                    self.value_start(*s, b)
                }
            }
            Lex::ObjFirst | Lex::ObjKey => match b {
                b'"' => Some(JsonState { key: true, ..s.with(Lex::Str) }),
                b'}' if s.lex == Lex::ObjFirst => Some(self.pop(*s)),
                _ if is_ws(b) => self.whitespace(s),
                _ => None,
            },
            Lex::Colon => match b {
                b':' => Some(s.with(Lex::Value)),
                _ if is_ws(b) => self.whitespace(s),
                _ => None,
            },
            Lex::After => match b {
                b',' => Some(s.with(if s.top_is_object() { Lex::ObjKey } else { Lex::Value })),
                b'}' if s.top_is_object() => Some(self.pop(*s)),
                b']' if !s.top_is_object() => Some(self.pop(*s)),
                _ if is_ws(b) => self.whitespace(s),
                _ => None,
            },
            Lex::Done => None,
            Lex::Str => self.string_byte(s, b),
            Lex::StrEsc => match b {
                b'u' => Some(s.with(Lex::StrHex)),
                _ => escape_char(b).map(|_| s.with(Lex::Str)),
            },
            Lex::StrHex => self.hex_digit(s, b),
            Lex::StrNeedBackslash => (b == b'\\').then(|| s.with(Lex::StrNeedU)),
            Lex::StrNeedU => (b == b'u').then(|| JsonState { aux: HEX_LOW, ..s.with(Lex::StrHex) }),
            Lex::StrUtf8 => {
                if !utf8_continues(s.aux >> 4, b) {
                    return None;
                }
                let left = (s.aux & 0x0F) - 1;
                Some(if left == 0 { s.with(Lex::Str) } else { JsonState { aux: left, ..*s } })
            }
            Lex::Num(p) => self.number_byte(s, p, b),
            Lex::Lit => {
                let lit = LITERALS[(s.aux >> 4) as usize];
                let pos = (s.aux & 0x0F) as usize;
                if lit[pos] != b {
                    return None;
                }
                Some(if pos + 1 == lit.len() {
                    s.after_value()
                } else {
                    JsonState { aux: s.aux + 1, ..*s }
                })
            }
        }
    }
}

impl JsonGrammar {
    /// The state before any output.
    pub fn start_state(&self) -> JsonState {
        JsonState { stack: 0, depth: 0, lex: Lex::Start, ws: 0, aux: 0, key: false }
    }

    /// Is the document complete in `s`?
    pub fn accepting(&self, s: &JsonState) -> bool {
        s.lex == Lex::Done || (s.depth == 0 && s.number_complete())
    }

    /// Can bytes follow `s`?
    pub fn continues(&self, s: &JsonState) -> bool {
        s.lex != Lex::Done
    }

    /// Inside a string at a character boundary (the string slice applies).
    pub fn free_string(&self, s: &JsonState) -> bool {
        s.lex == Lex::Str
    }

    /// A grammar and a state inside a value string at a character boundary, for classifying
    /// tokens by what they do to a string body (see `json::slices::StringSlice`).
    pub(crate) fn string_probe() -> (JsonGrammar, JsonState) {
        let g = JsonGrammar {
            whitespace: Whitespace::Flexible { max_run: u8::MAX },
            top: TopLevel::AnyValue,
            max_depth: MAX_DEPTH_LIMIT as u8,
        };
        let s = JsonState { stack: 0, depth: 1, lex: Lex::Str, ws: 0, aux: 0, key: false };
        (g, s)
    }

    /// Where `s` is inside a string body, its string slice (see
    /// `json::slices::string_slices`): 0 at a character boundary, then one per sub-state —
    /// after `\\`, inside `\\uXXXX` (by digits typed and surrogate flags), between the two
    /// escapes of a surrogate pair, inside a multi-byte character (by bytes left and range).
    /// `None` outside strings. Below [`STRING_SLICES`].
    pub(crate) fn string_slice_index(s: &JsonState) -> Option<usize> {
        Some(match s.lex {
            Lex::Str => 0,
            Lex::StrEsc => 1,
            Lex::StrNeedBackslash => 2,
            Lex::StrNeedU => 3,
            Lex::StrHex => 4 + s.aux as usize,
            Lex::StrUtf8 => 4 + 256 + s.aux as usize,
            _ => return None,
        })
    }

    /// The probe of [`JsonGrammar::string_probe`] moved to the string sub-state of slice
    /// `index` (the inverse of [`JsonGrammar::string_slice_index`]).
    pub(crate) fn string_probe_at(index: usize) -> (JsonGrammar, JsonState) {
        let (g, s) = Self::string_probe();
        let (lex, aux) = match index {
            0 => (Lex::Str, 0),
            1 => (Lex::StrEsc, 0),
            2 => (Lex::StrNeedBackslash, 0),
            3 => (Lex::StrNeedU, 0),
            i if i < 4 + 256 => (Lex::StrHex, (i - 4) as u8),
            i => (Lex::StrUtf8, (i - 4 - 256) as u8),
        };
        (g, JsonState { lex, aux, ..s })
    }

    /// Where `s` is between values, in a number or in a literal inside a container, its
    /// structural slice: the tokens that, from any state of the same lexical position, the same
    /// whitespace run and the same kind of innermost container, never close that container
    /// (or close it at their last byte) are allowed whatever the containers around it — so
    /// states that differ only in the stack below share one slice, and a mask there is a
    /// bitset copy and a walk of the tokens that close the container and go on, from
    /// [`JsonGrammar::pop`] of the state. `None` at depth 0, in strings (their own slices),
    /// where a token opening [`STRUCT_PUSH_LIMIT`] levels could meet `max_depth`, and after
    /// more than [`STRUCT_MAX_WS`] bytes of whitespace.
    pub(crate) fn structural_slice_index(&self, s: &JsonState) -> Option<usize> {
        if s.depth == 0 || s.key || s.depth as usize + STRUCT_PUSH_LIMIT > self.max_depth as usize {
            return None;
        }
        if s.ws > STRUCT_MAX_WS {
            return None;
        }
        let (code, sub) = match BETWEEN.iter().position(|&l| l == s.lex) {
            Some(c) if s.aux == 0 => (c, s.ws),
            Some(_) => return None,
            None => match s.lex {
                Lex::Num(p) if s.ws == 0 && s.aux == 0 => (BETWEEN.len(), p as u8),
                Lex::Lit if s.ws == 0 => (BETWEEN.len() + 1, s.aux),
                _ => return None,
            },
        };
        Some(STRING_SLICES + ((code * 256 + sub as usize) * 2 + s.top_is_object() as usize))
    }

    /// The grammar structural slices are built over (see
    /// [`JsonGrammar::structural_probe_at`]): `whitespace`, any top-level value, room for
    /// [`STRUCT_PUSH_LIMIT`] levels past depth 1.
    pub(crate) fn structural_probe(whitespace: Whitespace) -> JsonGrammar {
        JsonGrammar { whitespace, top: TopLevel::AnyValue, max_depth: 1 + STRUCT_PUSH_LIMIT as u8 }
    }

    /// The depth-1 state a structural slice `index` (as numbered by
    /// [`JsonGrammar::structural_slice_index`]) is built from, in the
    /// [`JsonGrammar::structural_probe`] grammar: closing its container ends the document
    /// (`Done`). `None` for an index that numbers no state.
    pub(crate) fn structural_probe_at(index: usize) -> Option<JsonState> {
        let i = index.checked_sub(STRING_SLICES)?;
        let (object, sub, code) = (i % 2 == 1, (i / 2 % 256) as u8, i / 512);
        let (lex, ws, aux) = match code {
            c if c < BETWEEN.len() => (BETWEEN[c], sub, 0),
            c if c == BETWEEN.len() => (Lex::Num(*PHASES.get(sub as usize)?), 0, 0),
            c if c == BETWEEN.len() + 1 => (Lex::Lit, 0, sub),
            _ => return None,
        };
        Some(JsonState { stack: object as u128, depth: 1, lex, ws, aux, key: false })
    }

    /// The structural slices a document reaches first, where `self` is a
    /// [`JsonGrammar::structural_probe`]: every position inside a container of either kind
    /// (keys and strings passed through) after at most one whitespace byte — between values,
    /// each number phase, each literal prefix. About fifty; building them with the engine's
    /// first use keeps those builds out of the masks.
    pub(crate) fn common_structural_indices(&self) -> Vec<usize> {
        let g = self;
        let mut seen = std::collections::HashSet::new();
        let mut queue: Vec<JsonState> = [false, true]
            .into_iter()
            .map(|object| JsonState {
                stack: object as u128,
                depth: 1,
                lex: if object { Lex::ObjFirst } else { Lex::ArrFirst },
                ws: 0,
                aux: 0,
                key: false,
            })
            .collect();
        let mut out = Vec::new();
        while let Some(s) = queue.pop() {
            if !seen.insert(s) {
                continue;
            }
            if let Some(i) = g.structural_slice_index(&s) {
                out.push(i);
            }
            for b in 0..=255u8 {
                match g.step(&s, b) {
                    Some(n) if n.depth == 1 && n.ws <= 1 && !seen.contains(&n) => queue.push(n),
                    _ => {}
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// The state after the closing quote of the string `s` is inside (any sub-state): the
    /// state the slices' exits are walked from.
    pub(crate) fn after_string(&self, s: &JsonState) -> Option<JsonState> {
        self.step(&s.with(Lex::Str), b'"')
    }

    /// Is `s` still inside the string body started from [`JsonGrammar::string_probe`]?
    pub(crate) fn in_string_body(s: &JsonState) -> bool {
        matches!(
            s.lex,
            Lex::Str
                | Lex::StrEsc
                | Lex::StrHex
                | Lex::StrNeedBackslash
                | Lex::StrNeedU
                | Lex::StrUtf8
        )
    }
}
