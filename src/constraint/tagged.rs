//! Structural tags: free text with constrained islands (tool calls, reasoning blocks). A
//! [`Tagged`] value describes the output as text, literals, sequences, choices, inner constraints
//! (JSON, JSON Schema, regex, GBNF) and **triggered tags** — free text in which completing a
//! trigger commits the output to one of the tags that begin with it, whose content constraint
//! then applies until its `end`.
//!
//! It lives inside `constraint` (not beside it) because it compiles its inner constraints through
//! [`Constraint`] and holds their compiled forms.
//!
//! # How it works
//! The description compiles to a small deterministic *outer* machine: literal tries (`Switch`
//! states over bytes and special-token ids), text states (an Aho–Corasick automaton over the
//! strings that end or are excluded from the text), content states (an inner engine plus a
//! shift-and tracker of the `end` text) and the counters of triggered tags. The whole
//! combination is a byte-level [`Recognizer`] over the outer state and the inner engines'
//! byte-level states, so a token is allowed exactly when its bytes stay valid across every edge
//! (text → trigger → begin → content → end → text) it spans.
//!
//! - Outside content, the mask depends on the outer state alone: one walk of the vocabulary trie,
//!   then shared by every request through a per-compiled-constraint cache (free text costs a
//!   bitset copy).
//! - Inside content, the inner engine's own mask (its fast paths and cache) is used for every
//!   token that cannot touch the `end` text; the few tokens that can (precomputed per tag, with
//!   their own trie) are walked through the combined recogniser.
//!
//! # Where content ends
//! A content ends at the **first** place where the inner constraint is complete and the text of
//! `end` follows (or, for an `end` that starts with a special token, where that token comes while
//! the inner constraint is complete). An `end` string inside a JSON string is therefore content
//! (the value is not complete there); for a regex content, an `end` the pattern could also
//! produce after a complete match is a compile error ([`TaggedErrorKind::EndInsideContent`]), as
//! is an all-whitespace `end` after JSON. See `docs/tagged.md`.

use super::{Compiled, Constraint, ConstraintError};
use crate::cfg::CfgConstraint;
use crate::engine::history::History;
use crate::engine::{
    check_mask_len, ConstraintEngine, CopyGrammar, EngineError, EngineErrorKind, EngineOptions,
};
use crate::json::JsonObjectConstraint;
use crate::mask::TokenMask;
use crate::recognizer::{ByteLogic, Recognizer};
use crate::regex::RegexConstraint;
use crate::schema::SchemaConstraint;
use crate::token::TokenId;
use crate::vocab::{TokTrie, TokenKind, Vocabulary};
use rustc_hash::FxHashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

// ---------------------------------------------------------------------------------------------
// Description
// ---------------------------------------------------------------------------------------------

/// One piece of a literal, trigger, `begin` or `end`: text, or a token named by its string in
/// the tokenizer (`"<|call|>"`). A named token that is special is matched by its id; one that is
/// text (Qwen3's `<tool_call>` is an added *non-special* token) is matched by its bytes, so its
/// spellings in smaller tokens are accepted too.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// A token by its string in the tokenizer.
    Token(String),
}

impl Piece {
    /// A text piece.
    pub fn text(s: &str) -> Piece {
        Piece::Text(s.to_owned())
    }
    /// A token piece.
    pub fn token(s: &str) -> Piece {
        Piece::Token(s.to_owned())
    }
}

/// A structural-tag description. Build with the constructors ([`Tagged::text`],
/// [`Tagged::literal`], [`Tagged::sequence`], [`Tagged::choice`], [`Tagged::content`],
/// [`Tagged::tags`]) and compile through [`Constraint::tagged`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Tagged {
    /// Any text tokens (no special tokens), ending where what follows begins (the first
    /// occurrence of its leading literal), never containing an `exclude` string. With
    /// `max_bytes`, once that many bytes are written the text may only go on with its ending
    /// literal (a reasoning budget). Must be followed by a literal or by the end of the output.
    Text {
        /// Strings the text may not contain.
        exclude: Vec<String>,
        /// Byte budget; `None` (the default) is unbounded.
        max_bytes: Option<usize>,
    },
    /// Exactly these pieces.
    Literal(Vec<Piece>),
    /// Each element in turn.
    Sequence(Vec<Tagged>),
    /// One of the alternatives; each must start with a literal, and none's leading literal may be
    /// a prefix of another's (the choice is made by the first differing byte or token).
    Choice(Vec<Tagged>),
    /// An inner constraint (JSON, JSON Schema, regex, GBNF, or a nested [`Tagged`]); must be
    /// followed by a literal (its end).
    Content(Box<Constraint>),
    /// Free text with triggered tags.
    Tags(TriggeredTags),
}

impl Tagged {
    /// Any text.
    pub fn text() -> Tagged {
        Tagged::Text { exclude: Vec::new(), max_bytes: None }
    }
    /// Any text not containing any of `exclude`.
    pub fn text_excluding(exclude: &[&str]) -> Tagged {
        Tagged::Text { exclude: exclude.iter().map(|s| (*s).to_owned()).collect(), max_bytes: None }
    }
    /// Any text of at most `max_bytes` bytes before its ending literal.
    pub fn text_budget(max_bytes: usize) -> Tagged {
        Tagged::Text { exclude: Vec::new(), max_bytes: Some(max_bytes) }
    }
    /// A text literal.
    pub fn literal(s: &str) -> Tagged {
        Tagged::Literal(vec![Piece::text(s)])
    }
    /// A literal of several pieces.
    pub fn pieces(p: Vec<Piece>) -> Tagged {
        Tagged::Literal(p)
    }
    /// A sequence.
    pub fn sequence(items: Vec<Tagged>) -> Tagged {
        Tagged::Sequence(items)
    }
    /// A choice.
    pub fn choice(items: Vec<Tagged>) -> Tagged {
        Tagged::Choice(items)
    }
    /// An inner constraint.
    pub fn content(c: Constraint) -> Tagged {
        Tagged::Content(Box::new(c))
    }
    /// Triggered tags.
    pub fn tags(t: TriggeredTags) -> Tagged {
        Tagged::Tags(t)
    }
}

/// One tag: when its `begin` is written, `content` applies until `end`.
#[derive(Clone, Debug)]
pub struct Tag {
    /// A name for errors and reports (the tool's name).
    pub name: String,
    /// What opens it; must start with one of the triggers.
    pub begin: Vec<Piece>,
    /// What it holds.
    pub content: Tagged,
    /// What closes it (non-empty).
    pub end: Vec<Piece>,
}

impl Tag {
    /// A tag.
    pub fn new(name: &str, begin: Vec<Piece>, content: Tagged, end: Vec<Piece>) -> Tag {
        Tag { name: name.to_owned(), begin, content, end }
    }
}

/// Free text in which completing a trigger commits the output to a tag beginning with it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TriggeredTags {
    /// What starts a tag (each tag's `begin` starts with one of them).
    pub triggers: Vec<Piece>,
    /// The tags.
    pub tags: Vec<Tag>,
    /// The output starts with a tag (no text before the first one), so at least one is written.
    /// Default `false`.
    pub at_least_one: bool,
    /// After the first tag nothing of this node follows (the output goes on after it). Default
    /// `false`.
    pub stop_after_first: bool,
    /// At most this many tags (1..=255); then the triggers are excluded from the text. Default
    /// `None` (unbounded).
    pub max_tags: Option<usize>,
    /// Strings the free text may not contain. Default none.
    pub exclude: Vec<String>,
    /// At most this many bytes of free text before each tag and after the last (then only a
    /// trigger or what follows may be written). Default `None` (unbounded).
    pub max_text_bytes: Option<usize>,
}

impl TriggeredTags {
    /// Triggered tags with the defaults (any number of tags, text around them).
    pub fn new(triggers: Vec<Piece>, tags: Vec<Tag>) -> TriggeredTags {
        TriggeredTags {
            triggers,
            tags,
            at_least_one: false,
            stop_after_first: false,
            max_tags: None,
            exclude: Vec::new(),
            max_text_bytes: None,
        }
    }
}

builder!(TriggeredTags {
    /// Start with a tag (see [`TriggeredTags::at_least_one`]).
    with_at_least_one => at_least_one: bool,
    /// End this node after the first tag.
    with_stop_after_first => stop_after_first: bool,
    /// Bound the number of tags.
    with_max_tags => max_tags: Option<usize>,
    /// Strings the free text may not contain.
    with_exclude => exclude: Vec<String>,
    /// Bound each stretch of free text.
    with_max_text_bytes => max_text_bytes: Option<usize>,
});

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a [`Tagged`] description did not compile.
#[derive(Debug, Clone)]
pub struct TaggedError {
    kind: TaggedErrorKind,
}

/// What was wrong, naming the tag (`""` outside any tag).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TaggedErrorKind {
    /// A trigger, `begin`, `end` or excluded string with no bytes and no token.
    Empty {
        /// Which (`"trigger"`, `"begin"`, `"end"`, `"exclude"`).
        what: &'static str,
        /// The tag.
        tag: String,
    },
    /// Two strings a text watches for overlap: one is a substring of the other (or equal), so
    /// which one completes first is ambiguous.
    Overlap {
        /// One string.
        a: String,
        /// The other.
        b: String,
        /// The tag (or `""`).
        tag: String,
    },
    /// A tag's `begin` is a prefix of another's (or equal to it).
    BeginPrefix {
        /// The tag.
        tag: String,
        /// The other tag.
        other: String,
    },
    /// A tag's `begin` starts with none of the triggers.
    BeginWithoutTrigger {
        /// The tag.
        tag: String,
    },
    /// A trigger that starts no tag.
    UnusedTrigger {
        /// The trigger.
        trigger: String,
    },
    /// The content can produce its `end` after being complete, so where it ends is ambiguous.
    EndInsideContent {
        /// The tag.
        tag: String,
        /// The end text.
        end: String,
    },
    /// A content (inner constraint) not followed by a literal.
    ContentNotDelimited {
        /// The tag.
        tag: String,
    },
    /// A text followed by something other than a literal or the end of the output.
    TextNotDelimited {
        /// The tag.
        tag: String,
    },
    /// Choice alternatives that are empty, do not start with a literal, or share a leading
    /// literal.
    AmbiguousChoice {
        /// The tag.
        tag: String,
        /// What is ambiguous.
        detail: String,
    },
    /// A token piece the vocabulary does not have.
    UnknownToken {
        /// The token string.
        token: String,
    },
    /// A tag's inner constraint did not compile (a tool whose parameters schema is bad).
    Content {
        /// The tag.
        tag: String,
        /// The inner error.
        source: Box<ConstraintError>,
    },
    /// Over a limit: an `end` text over 64 bytes, more than 4 counted tag sets, `max_tags`
    /// outside 1..=255.
    Limit {
        /// Which.
        what: &'static str,
    },
}

impl TaggedError {
    fn new(kind: TaggedErrorKind) -> TaggedError {
        TaggedError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &TaggedErrorKind {
        &self.kind
    }
}

fn at(tag: &str) -> String {
    if tag.is_empty() {
        "outside any tag".to_owned()
    } else {
        format!("in tag {tag:?}")
    }
}

impl fmt::Display for TaggedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TaggedErrorKind as K;
        match &self.kind {
            K::Empty { what, tag } => write!(f, "empty {what} {}", at(tag)),
            K::Overlap { a, b, tag } => {
                write!(f, "{a:?} and {b:?} overlap (one contains the other) {}", at(tag))
            }
            K::BeginPrefix { tag, other } => {
                write!(f, "the begin of tag {tag:?} is a prefix of the begin of tag {other:?}")
            }
            K::BeginWithoutTrigger { tag } => {
                write!(f, "the begin of tag {tag:?} starts with none of the triggers")
            }
            K::UnusedTrigger { trigger } => write!(f, "trigger {trigger:?} starts no tag"),
            K::EndInsideContent { tag, end } => write!(
                f,
                "the content of tag {tag:?} can produce its end {end:?} after it is complete"
            ),
            K::ContentNotDelimited { tag } => {
                write!(f, "a content {} is not followed by a literal end", at(tag))
            }
            K::TextNotDelimited { tag } => write!(
                f,
                "a text {} is followed by neither a literal nor the end of the output",
                at(tag)
            ),
            K::AmbiguousChoice { tag, detail } => {
                write!(f, "ambiguous choice {}: {detail}", at(tag))
            }
            K::UnknownToken { token } => write!(f, "token {token:?} is not in the vocabulary"),
            K::Content { tag, source } => write!(f, "the content of tag {tag:?}: {source}"),
            K::Limit { what } => write!(f, "over a limit: {what}"),
        }
    }
}

impl std::error::Error for TaggedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            TaggedErrorKind::Content { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Compiled program
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Sym {
    Byte(u8),
    Special(TokenId),
}

#[derive(Clone, Debug)]
enum St {
    /// A literal trie node: one edge per byte or special token.
    Switch {
        bytes: Vec<(u8, u32)>,
        specials: Vec<(TokenId, u32)>,
    },
    Text(u32),
    Content(u32),
    /// Epsilon: a tag ended (count it), then back to the text or out.
    Done {
        slot: Option<u8>,
        back: u32,
        exit: u32,
        stop_after_first: bool,
    },
    Accept,
    /// Placeholder while compiling.
    Hole,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Out {
    None,
    Stop(u32),
    Excluded,
}

struct TextMachine {
    /// `delta[ac * 256 + b]`.
    delta: Vec<u32>,
    depth: Vec<u32>,
    out_on: Vec<Out>,
    out_off: Vec<Out>,
    specials_on: Vec<(TokenId, u32)>,
    specials_off: Vec<(TokenId, u32)>,
    eos: bool,
    slot: Option<(u8, u8)>,
    max_bytes: Option<u32>,
}

struct ContentInfo {
    tag: String,
    compiled: Compiled,
    end: Vec<u8>,
    after: u32,
    /// `bmask[b]` bit `i` set iff `end[i] == b`.
    bmask: Box<[u64; 256]>,
    /// Tokens that can touch the end text from anywhere (a partial match to continue, or the
    /// content complete before them), and their trie.
    exit_all: Exits,
    /// Tokens that can touch it when nothing is matched yet and the content is not complete
    /// before them: the end must start inside the token, after a byte that can complete the
    /// content (for JSON: a closing byte or whitespace). The common case inside a call.
    exit_mid: Exits,
}

/// A set of tokens as a mask, a list and a trie.
struct Exits {
    mask: TokenMask,
    list: Vec<TokenId>,
    trie: TokTrie,
}

impl Exits {
    /// Clear these tokens in `mask` (by list when it is short, else word by word).
    fn remove_from(&self, mask: &mut TokenMask) {
        if self.list.len() * 16 < mask.words().len() {
            for &t in &self.list {
                mask.remove(t);
            }
        } else {
            for (w, x) in mask.words_mut().iter_mut().zip(self.mask.words()) {
                *w &= !x;
            }
        }
    }
}

impl ContentInfo {
    fn exits(&self, full: bool) -> &Exits {
        if full {
            &self.exit_all
        } else {
            &self.exit_mid
        }
    }
}

/// A compiled [`Tagged`] description (shared by every engine made from it).
pub(crate) struct Program {
    states: Vec<St>,
    texts: Vec<TextMachine>,
    contents: Vec<ContentInfo>,
    entry: u32,
    vocab: Vocabulary,
    options: EngineOptions,
    cache: Mutex<FxHashMap<Outer, Arc<TokenMask>>>,
    max_depth: u32,
}

const CACHE_CAP: usize = 4096;

/// The outer state: small and `Copy` (the mask-cache key outside content).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Outer {
    st: u32,
    /// Text: Aho–Corasick state.
    ac: u32,
    /// Text: bytes written (only counted under a budget).
    n: u32,
    /// Content: shift-and bits of the end text matched so far.
    d: u64,
    /// Content: the inner engine still takes bytes.
    alive: bool,
    counts: [u8; 4],
}

impl Program {
    fn goto(&self, o: Outer, st: u32) -> Outer {
        let mut o = Outer { st, ac: 0, n: 0, d: 0, alive: true, counts: o.counts };
        while let St::Done { slot, back, exit, stop_after_first } = self.states[o.st as usize] {
            if let Some(s) = slot {
                o.counts[s as usize] = o.counts[s as usize].saturating_add(1);
            }
            o.st = if stop_after_first { exit } else { back };
        }
        o
    }

    fn text_on(&self, tm: &TextMachine, o: &Outer) -> bool {
        tm.slot.is_none_or(|(s, max)| o.counts[s as usize] < max)
    }

    /// One byte from a state without an inner engine.
    fn step_outer(&self, o: Outer, b: u8) -> Option<Outer> {
        match &self.states[o.st as usize] {
            St::Switch { bytes, .. } => {
                bytes.iter().find(|e| e.0 == b).map(|&(_, t)| self.goto(o, t))
            }
            St::Text(t) => {
                let tm = &self.texts[*t as usize];
                let ac = tm.delta[o.ac as usize * 256 + b as usize];
                if let Some(max) = tm.max_bytes {
                    if o.n >= max && tm.depth[ac as usize] != tm.depth[o.ac as usize] + 1 {
                        return None;
                    }
                }
                let out = if self.text_on(tm, &o) {
                    tm.out_on[ac as usize]
                } else {
                    tm.out_off[ac as usize]
                };
                match out {
                    Out::Excluded => None,
                    Out::Stop(target) => Some(self.goto(o, target)),
                    Out::None => {
                        let n = if tm.max_bytes.is_some() { o.n + 1 } else { 0 };
                        Some(Outer { ac, n, ..o })
                    }
                }
            }
            _ => None,
        }
    }

    /// The special tokens allowed from `o` (content aside), with their targets.
    fn specials(&self, o: &Outer) -> &[(TokenId, u32)] {
        match &self.states[o.st as usize] {
            St::Switch { specials, .. } => specials,
            St::Text(t) => {
                let tm = &self.texts[*t as usize];
                if self.text_on(tm, o) {
                    &tm.specials_on
                } else {
                    &tm.specials_off
                }
            }
            St::Content(c) => {
                let info = &self.contents[*c as usize];
                match (&self.states[info.after as usize], info.end.is_empty()) {
                    (St::Switch { specials, .. }, true) => specials,
                    _ => &[],
                }
            }
            _ => &[],
        }
    }

    fn nullable(&self, o: &Outer) -> bool {
        match &self.states[o.st as usize] {
            St::Accept => true,
            St::Text(t) => self.texts[*t as usize].eos,
            _ => false,
        }
    }

    /// The cache key of a state outside content: a budget's count matters only within one
    /// token's length of the budget.
    fn key(&self, o: Outer) -> Outer {
        if let St::Text(t) = self.states[o.st as usize] {
            if let Some(max) = self.texts[t as usize].max_bytes {
                return Outer { n: o.n.max(max.saturating_sub(self.max_depth)), ..o };
            }
        }
        o
    }
}

// ---------------------------------------------------------------------------------------------
// Compiler
// ---------------------------------------------------------------------------------------------

struct Compiler<'v> {
    vocab: &'v Vocabulary,
    states: Vec<St>,
    texts: Vec<TextMachine>,
    contents: Vec<ContentInfo>,
    slots: usize,
    tag: String,
}

type Stops = (Vec<(Vec<u8>, u32)>, Vec<(TokenId, u32)>, bool);

impl Compiler<'_> {
    fn err<T>(&self, kind: TaggedErrorKind) -> Result<T, TaggedError> {
        Err(TaggedError::new(kind))
    }

    fn add(&mut self, st: St) -> u32 {
        self.states.push(st);
        (self.states.len() - 1) as u32
    }

    fn syms(&self, pieces: &[Piece]) -> Result<Vec<Sym>, TaggedError> {
        let mut out = Vec::new();
        for p in pieces {
            match p {
                Piece::Text(s) => out.extend(s.bytes().map(Sym::Byte)),
                Piece::Token(name) => {
                    let id = self.vocab.token_id(name).filter(|t| t.index() < self.vocab.n_vocab());
                    let Some(id) = id else {
                        return self.err(TaggedErrorKind::UnknownToken { token: name.clone() });
                    };
                    if self.vocab.kind(id) == TokenKind::Special
                        || self.vocab.token_bytes(id).is_empty()
                    {
                        out.push(Sym::Special(id));
                    } else {
                        out.extend(self.vocab.token_bytes(id).iter().map(|&b| Sym::Byte(b)));
                    }
                }
            }
        }
        Ok(out)
    }

    fn render(&self, syms: &[Sym]) -> String {
        let mut s = String::new();
        let mut bytes = Vec::new();
        for sym in syms {
            match sym {
                Sym::Byte(b) => bytes.push(*b),
                Sym::Special(t) => {
                    s.push_str(&String::from_utf8_lossy(&std::mem::take(&mut bytes)));
                    s.push_str(&format!("<[{}]>", t.0));
                }
            }
        }
        s.push_str(&String::from_utf8_lossy(&bytes));
        s
    }

    fn chain(&mut self, syms: &[Sym], next: u32) -> u32 {
        let mut cur = next;
        for s in syms.iter().rev() {
            cur = match *s {
                Sym::Byte(b) => self.add(St::Switch { bytes: vec![(b, cur)], specials: vec![] }),
                Sym::Special(t) => self.add(St::Switch { bytes: vec![], specials: vec![(t, cur)] }),
            };
        }
        cur
    }

    fn merge(&mut self, a: u32, b: u32) -> Result<u32, TaggedError> {
        let (St::Switch { bytes: ba, specials: sa }, St::Switch { bytes: bb, specials: sb }) =
            (self.states[a as usize].clone(), self.states[b as usize].clone())
        else {
            return self.err(TaggedErrorKind::AmbiguousChoice {
                tag: self.tag.clone(),
                detail: "one alternative's leading literal is a prefix of another's".into(),
            });
        };
        let mut bytes = ba;
        for (byte, t) in bb {
            if let Some(i) = bytes.iter().position(|e| e.0 == byte) {
                bytes[i].1 = self.merge(bytes[i].1, t)?;
            } else {
                bytes.push((byte, t));
            }
        }
        let mut specials = sa;
        for (tok, t) in sb {
            if let Some(i) = specials.iter().position(|e| e.0 == tok) {
                specials[i].1 = self.merge(specials[i].1, t)?;
            } else {
                specials.push((tok, t));
            }
        }
        Ok(self.add(St::Switch { bytes, specials }))
    }

    /// What a text followed by `f` stops on: byte strings (through the literal trie up to the
    /// first state that is not a pure byte switch), special tokens, and whether the output may
    /// end.
    fn stops(&self, f: u32) -> Result<Stops, TaggedError> {
        match &self.states[f as usize] {
            St::Accept => Ok((vec![], vec![], true)),
            St::Switch { bytes, specials } => {
                let mut out = Vec::new();
                let mut stack: Vec<(Vec<u8>, u32)> =
                    bytes.iter().map(|&(b, t)| (vec![b], t)).collect();
                while let Some((path, t)) = stack.pop() {
                    match &self.states[t as usize] {
                        St::Switch { bytes, specials }
                            if specials.is_empty() && !bytes.is_empty() =>
                        {
                            for &(b, u) in bytes {
                                let mut p = path.clone();
                                p.push(b);
                                stack.push((p, u));
                            }
                        }
                        _ => out.push((path, t)),
                    }
                }
                Ok((out, specials.clone(), false))
            }
            _ => self.err(TaggedErrorKind::TextNotDelimited { tag: self.tag.clone() }),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn text(
        &mut self,
        exclude: &[String],
        max_bytes: Option<usize>,
        follower: u32,
        triggers: &[(Vec<u8>, u32)],
        special_triggers: &[(TokenId, u32)],
        slot: Option<(u8, u8)>,
    ) -> Result<u32, TaggedError> {
        let (stops, specials, eos) = self.stops(follower)?;
        // (string, output when on, output when off)
        let mut strings: Vec<(Vec<u8>, Out, Out)> = Vec::new();
        for (s, t) in triggers {
            strings.push((s.clone(), Out::Stop(*t), Out::Excluded));
        }
        for (s, t) in stops {
            strings.push((s, Out::Stop(t), Out::Stop(t)));
        }
        for e in exclude {
            if e.is_empty() {
                return self.err(TaggedErrorKind::Empty { what: "exclude", tag: self.tag.clone() });
            }
            strings.push((e.as_bytes().to_vec(), Out::Excluded, Out::Excluded));
        }
        for i in 0..strings.len() {
            for j in 0..strings.len() {
                let (a, b) = (&strings[i].0, &strings[j].0);
                if i != j && a.len() <= b.len() && b.windows(a.len()).any(|w| w == a.as_slice()) {
                    return self.err(TaggedErrorKind::Overlap {
                        a: String::from_utf8_lossy(a).into_owned(),
                        b: String::from_utf8_lossy(b).into_owned(),
                        tag: self.tag.clone(),
                    });
                }
            }
        }
        // Aho–Corasick: goto trie, failure links by BFS, full transition table.
        let mut goto: Vec<[u32; 256]> = vec![[u32::MAX; 256]];
        let mut depth = vec![0u32];
        let mut out_on = vec![Out::None];
        let mut out_off = vec![Out::None];
        for (s, on, off) in &strings {
            let mut cur = 0usize;
            for &b in s {
                if goto[cur][b as usize] == u32::MAX {
                    goto.push([u32::MAX; 256]);
                    depth.push(depth[cur] + 1);
                    out_on.push(Out::None);
                    out_off.push(Out::None);
                    goto[cur][b as usize] = (goto.len() - 1) as u32;
                }
                cur = goto[cur][b as usize] as usize;
            }
            out_on[cur] = *on;
            out_off[cur] = *off;
        }
        let n = goto.len();
        let mut fail = vec![0u32; n];
        let mut delta = vec![0u32; n * 256];
        let mut queue = std::collections::VecDeque::new();
        for b in 0..256 {
            let t = goto[0][b];
            if t == u32::MAX {
                delta[b] = 0;
            } else {
                delta[b] = t;
                fail[t as usize] = 0;
                queue.push_back(t as usize);
            }
        }
        while let Some(s) = queue.pop_front() {
            for b in 0..256 {
                let t = goto[s][b];
                if t == u32::MAX {
                    delta[s * 256 + b] = delta[fail[s] as usize * 256 + b];
                } else {
                    fail[t as usize] = delta[fail[s] as usize * 256 + b];
                    delta[s * 256 + b] = t;
                    queue.push_back(t as usize);
                }
            }
        }
        let mut specials_on: Vec<(TokenId, u32)> = special_triggers.to_vec();
        specials_on.extend(specials.iter().copied());
        let tm = TextMachine {
            delta,
            depth,
            out_on,
            out_off,
            specials_on,
            specials_off: specials,
            eos,
            slot,
            max_bytes: max_bytes.map(|m| m.min(u32::MAX as usize / 2) as u32),
        };
        self.texts.push(tm);
        Ok(self.add(St::Text((self.texts.len() - 1) as u32)))
    }

    fn node(&mut self, n: &Tagged, next: u32) -> Result<u32, TaggedError> {
        match n {
            Tagged::Literal(p) => {
                let syms = self.syms(p)?;
                Ok(self.chain(&syms, next))
            }
            Tagged::Sequence(items) => {
                let mut cur = next;
                for item in items.iter().rev() {
                    cur = self.node(item, cur)?;
                }
                Ok(cur)
            }
            Tagged::Choice(alts) => {
                let mut acc: Option<u32> = None;
                for a in alts {
                    let e = self.node(a, next)?;
                    if e == next || !matches!(self.states[e as usize], St::Switch { .. }) {
                        return self.err(TaggedErrorKind::AmbiguousChoice {
                            tag: self.tag.clone(),
                            detail: "an alternative is empty or does not start with a literal"
                                .into(),
                        });
                    }
                    acc = Some(match acc {
                        None => e,
                        Some(p) => self.merge(p, e)?,
                    });
                }
                acc.map_or_else(
                    || {
                        self.err(TaggedErrorKind::AmbiguousChoice {
                            tag: self.tag.clone(),
                            detail: "no alternative".into(),
                        })
                    },
                    Ok,
                )
            }
            Tagged::Text { exclude, max_bytes } => {
                self.text(exclude, *max_bytes, next, &[], &[], None)
            }
            Tagged::Content(c) => self.content(c, next),
            Tagged::Tags(t) => self.tags(t, next),
        }
    }

    fn content(&mut self, c: &Constraint, next: u32) -> Result<u32, TaggedError> {
        if let Constraint::Tagged { tagged, .. } = c {
            return self.node(tagged, next);
        }
        let compiled = c.compile(self.vocab).map_err(|e| {
            TaggedError::new(TaggedErrorKind::Content {
                tag: self.tag.clone(),
                source: Box::new(e),
            })
        })?;
        let compiled = match &*compiled.inner {
            Compiled::Json(g, o) => Compiled::Json(g.clone(), o.clone()),
            Compiled::Schema(s) => Compiled::Schema(s.clone()),
            Compiled::Regex(s) => Compiled::Regex(s.clone()),
            Compiled::Gbnf(s) => Compiled::Gbnf(s.clone()),
            Compiled::Tagged(_) => unreachable!("nested tagged content is flattened above"),
        };
        // The end text: the bytes of the single-path literal that follows.
        let mut end = Vec::new();
        let mut after = next;
        loop {
            match &self.states[after as usize] {
                St::Switch { bytes, specials } if specials.is_empty() && bytes.len() == 1 => {
                    end.push(bytes[0].0);
                    after = bytes[0].1;
                }
                _ => break,
            }
        }
        let tag = self.tag.clone();
        if end.is_empty() {
            let ok = matches!(&self.states[after as usize],
                St::Switch { bytes, specials } if bytes.is_empty() && !specials.is_empty());
            if !ok {
                return self.err(TaggedErrorKind::ContentNotDelimited { tag });
            }
        }
        if end.len() > 64 {
            return self.err(TaggedErrorKind::Limit { what: "an end text over 64 bytes" });
        }
        let end_str = String::from_utf8_lossy(&end).into_owned();
        let inside = match &compiled {
            Compiled::Json(..) | Compiled::Schema(_) => {
                !end.is_empty() && end.iter().all(|b| b" \t\n\r".contains(b))
            }
            Compiled::Regex(s) => regex_produces_after_match(s, &end),
            _ => false,
        };
        if inside {
            return self.err(TaggedErrorKind::EndInsideContent { tag, end: end_str });
        }
        let mut bmask = Box::new([0u64; 256]);
        for (i, &b) in end.iter().enumerate() {
            bmask[b as usize] |= 1 << i;
        }
        // Tokens whose bytes can touch the end text: some suffix is compatible with it, or the
        // whole token continues a partial match.
        let compat = |s: &[u8], e: &[u8]| {
            let k = s.len().min(e.len());
            s[..k] == e[..k]
        };
        let json = matches!(compiled, Compiled::Json(..) | Compiled::Schema(_));
        let completes = |b: u8| !json || b"}]\"0123456789el \t\n\r".contains(&b);
        let n = self.vocab.n_vocab();
        let (mut all, mut mid) = ((TokenMask::new(n), Vec::new()), (TokenMask::new(n), Vec::new()));
        if !end.is_empty() {
            for i in 0..n {
                let t = TokenId(i as u32);
                let bytes = self.vocab.token_bytes(t);
                if bytes.is_empty() {
                    continue;
                }
                let inside =
                    (1..bytes.len()).any(|k| completes(bytes[k - 1]) && compat(&bytes[k..], &end));
                let any = inside
                    || compat(bytes, &end)
                    || (1..bytes.len()).any(|k| compat(&bytes[k..], &end))
                    || (1..end.len()).any(|j| compat(bytes, &end[j..]));
                if inside {
                    mid.0.insert(t);
                    mid.1.push(t);
                }
                if any {
                    all.0.insert(t);
                    all.1.push(t);
                }
            }
        }
        let vocab = self.vocab;
        let exits = |(mask, list): (TokenMask, Vec<TokenId>)| {
            let trie = TokTrie::build(list.iter().map(|&t| (t, vocab.token_bytes(t))));
            Exits { mask, list, trie }
        };
        let (exit_all, exit_mid) = (exits(all), exits(mid));
        self.contents.push(ContentInfo { tag, compiled, end, after, bmask, exit_all, exit_mid });
        Ok(self.add(St::Content((self.contents.len() - 1) as u32)))
    }

    fn tags(&mut self, t: &TriggeredTags, next: u32) -> Result<u32, TaggedError> {
        let outer_tag = self.tag.clone();
        let slot = match t.max_tags {
            None => None,
            Some(m) if (1..=255).contains(&m) => {
                if self.slots == 4 {
                    return self
                        .err(TaggedErrorKind::Limit { what: "more than 4 counted tag sets" });
                }
                self.slots += 1;
                Some(((self.slots - 1) as u8, m as u8))
            }
            Some(_) => {
                return self.err(TaggedErrorKind::Limit { what: "max_tags outside 1..=255" })
            }
        };
        let text_id = self.add(St::Hole);
        let done = self.add(St::Done {
            slot: slot.map(|s| s.0),
            back: text_id,
            exit: next,
            stop_after_first: t.stop_after_first,
        });
        let mut triggers: Vec<Vec<Sym>> = Vec::new();
        for p in &t.triggers {
            let s = self.syms(std::slice::from_ref(p))?;
            if s.is_empty() {
                return self.err(TaggedErrorKind::Empty { what: "trigger", tag: outer_tag });
            }
            if let Some(o) = triggers.iter().find(|o| {
                let (a, b) = if o.len() <= s.len() { (&o[..], &s[..]) } else { (&s[..], &o[..]) };
                b.windows(a.len()).any(|w| w == a)
            }) {
                return self.err(TaggedErrorKind::Overlap {
                    a: self.render(o),
                    b: self.render(&s),
                    tag: outer_tag,
                });
            }
            if triggers.contains(&s) {
                return self.err(TaggedErrorKind::Overlap {
                    a: self.render(&s),
                    b: self.render(&s),
                    tag: outer_tag,
                });
            }
            if s[1..].iter().any(|x| matches!(x, Sym::Special(_)))
                || (matches!(s[0], Sym::Special(_)) && s.len() > 1)
            {
                return self.err(TaggedErrorKind::Limit {
                    what: "a trigger is either one special token or text",
                });
            }
            triggers.push(s);
        }
        let mut begins: Vec<(String, Vec<Sym>)> = Vec::new();
        let mut per_trigger: Vec<Vec<u32>> = vec![Vec::new(); triggers.len()];
        for tag in &t.tags {
            self.tag = tag.name.clone();
            let end = self.syms(&tag.end)?;
            if end.is_empty() {
                return self.err(TaggedErrorKind::Empty { what: "end", tag: tag.name.clone() });
            }
            let begin = self.syms(&tag.begin)?;
            if begin.is_empty() {
                return self.err(TaggedErrorKind::Empty { what: "begin", tag: tag.name.clone() });
            }
            for (other, ob) in &begins {
                let (short, long, s_name, l_name) = if ob.len() <= begin.len() {
                    (ob, &begin, other, &tag.name)
                } else {
                    (&begin, ob, &tag.name, other)
                };
                if long.starts_with(short) {
                    return self.err(TaggedErrorKind::BeginPrefix {
                        tag: s_name.clone(),
                        other: l_name.clone(),
                    });
                }
            }
            let Some(k) = triggers.iter().position(|tr| begin.starts_with(tr)) else {
                return self.err(TaggedErrorKind::BeginWithoutTrigger { tag: tag.name.clone() });
            };
            let end_entry = self.chain(&end, done);
            let content = self.node(&tag.content, end_entry)?;
            let rest = &begin[triggers[k].len()..];
            let entry = self.chain(rest, content);
            if rest.is_empty() && !per_trigger[k].is_empty() {
                return self.err(TaggedErrorKind::BeginPrefix {
                    tag: tag.name.clone(),
                    other: begins.last().map(|b| b.0.clone()).unwrap_or_default(),
                });
            }
            per_trigger[k].push(entry);
            begins.push((tag.name.clone(), begin));
        }
        self.tag = outer_tag.clone();
        let mut text_triggers = Vec::new();
        let mut special_triggers = Vec::new();
        let mut start: Option<u32> = None;
        for (k, tr) in triggers.iter().enumerate() {
            let dispatch = match per_trigger[k].as_slice() {
                [] => return self.err(TaggedErrorKind::UnusedTrigger { trigger: self.render(tr) }),
                [one] => *one,
                [first, more @ ..] => {
                    let mut acc = *first;
                    for &m in more {
                        acc = self.merge(acc, m)?;
                    }
                    acc
                }
            };
            match tr[0] {
                Sym::Special(id) => special_triggers.push((id, dispatch)),
                Sym::Byte(_) => {
                    let bytes =
                        tr.iter().map(|s| if let Sym::Byte(b) = s { *b } else { 0 }).collect();
                    text_triggers.push((bytes, dispatch));
                }
            }
            if t.at_least_one {
                let e = self.chain(tr, dispatch);
                start = Some(match start {
                    None => e,
                    Some(p) => self.merge(p, e)?,
                });
            }
        }
        let text =
            self.text(&t.exclude, t.max_text_bytes, next, &text_triggers, &special_triggers, slot)?;
        // Move the text machine into the placeholder the tags loop back to.
        self.states[text_id as usize] = self.states[text as usize].clone();
        Ok(if t.at_least_one { start.expect("a trigger") } else { text_id })
    }
}

/// Whether a complete match of the regex content can go on with the whole `end` and stay live
/// (then where the content ends would be ambiguous). Dense DFAs only; a lazy one is not checked.
fn regex_produces_after_match(s: &Arc<crate::regex::Shared>, end: &[u8]) -> bool {
    let Some(dfa) = s.grammar().dfa() else { return false };
    if end.is_empty() {
        return false;
    }
    let mut seen = vec![false; dfa.state_count()];
    let mut stack = vec![dfa.start()];
    while let Some(q) = stack.pop() {
        if std::mem::replace(&mut seen[q.index()], true) {
            continue;
        }
        if dfa.is_accepting(q) {
            let mut cur = Some(q);
            for &b in end {
                cur = cur.and_then(|c| dfa.next(c, b));
            }
            if cur.is_some() {
                return true;
            }
        }
        for b in 0..=255u8 {
            if let Some(n) = dfa.next(q, b) {
                if !seen[n.index()] {
                    stack.push(n);
                }
            }
        }
    }
    false
}

/// Compile `t` against `vocab`.
pub(crate) fn compile(
    t: &Tagged,
    options: &EngineOptions,
    vocab: &Vocabulary,
) -> Result<Arc<Program>, TaggedError> {
    let mut c = Compiler {
        vocab,
        states: Vec::new(),
        texts: Vec::new(),
        contents: Vec::new(),
        slots: 0,
        tag: String::new(),
    };
    let accept = c.add(St::Accept);
    let entry = c.node(t, accept)?;
    let prog = Program {
        states: c.states,
        texts: c.texts,
        contents: c.contents,
        entry,
        vocab: vocab.clone(),
        options: options.clone(),
        cache: Mutex::new(FxHashMap::default()),
        max_depth: vocab.trie().max_depth() as u32,
    };
    let prog = Arc::new(prog);
    // The first mask of every request, computed now.
    let mut e = TaggedEngine::new(prog.clone());
    let mut m = TokenMask::new(vocab.n_vocab());
    let _ = e.fill_mask(&mut m);
    Ok(prog)
}

// ---------------------------------------------------------------------------------------------
// Inner engines at byte level
// ---------------------------------------------------------------------------------------------

enum InnerEngine {
    Json(JsonObjectConstraint),
    Schema(SchemaConstraint),
    Regex(RegexConstraint),
    Cfg(CfgConstraint),
}

/// An inner engine and its probe stacks (byte pushes a walk undoes). Also the byte-level view
/// [`crate::constraint::CompiledConstraint::byte_probe`] gives the schema fuzzer.
pub(crate) struct InnerSlot {
    engine: InnerEngine,
    json: Vec<crate::json::JsonState>,
    regex: Vec<crate::automaton::DfaStateId>,
    cfg: Vec<CfgConstraint>,
    depth: usize,
}

impl InnerSlot {
    pub(super) fn fresh(compiled: &Compiled, vocab: &Vocabulary) -> InnerSlot {
        let engine = match compiled {
            Compiled::Json(g, o) => {
                InnerEngine::Json(JsonObjectConstraint::from_grammar(vocab, g.clone(), o))
            }
            Compiled::Schema(s) => InnerEngine::Schema(SchemaConstraint::new(s.clone(), vocab)),
            Compiled::Regex(s) => {
                InnerEngine::Regex(RegexConstraint::with_shared(vocab, s.clone()))
            }
            Compiled::Gbnf(s) => InnerEngine::Cfg(CfgConstraint::with_shared(vocab, s.clone())),
            Compiled::Tagged(_) => unreachable!("flattened at compile time"),
        };
        InnerSlot { engine, json: Vec::new(), regex: Vec::new(), cfg: Vec::new(), depth: 0 }
    }

    fn dyn_engine(&self) -> &dyn ConstraintEngine {
        match &self.engine {
            InnerEngine::Json(e) => e,
            InnerEngine::Schema(e) => e,
            InnerEngine::Regex(e) => e,
            InnerEngine::Cfg(e) => e,
        }
    }

    fn dyn_engine_mut(&mut self) -> &mut dyn ConstraintEngine {
        match &mut self.engine {
            InnerEngine::Json(e) => e,
            InnerEngine::Schema(e) => e,
            InnerEngine::Regex(e) => e,
            InnerEngine::Cfg(e) => e,
        }
    }

    /// Start probing from the engine's state.
    pub(crate) fn start(&mut self) {
        self.depth = 0;
        match &self.engine {
            InnerEngine::Json(e) => {
                self.json.clear();
                self.json.push(*e.state());
            }
            InnerEngine::Regex(e) => {
                self.regex.clear();
                self.regex.push(*e.state());
            }
            InnerEngine::Cfg(_) => self.cfg.clear(),
            InnerEngine::Schema(_) => {}
        }
    }

    pub(crate) fn push(&mut self, b: u8) -> bool {
        let ok = match &mut self.engine {
            InnerEngine::Json(e) => match e.grammar().step(self.json.last().expect("base"), b) {
                Some(s) => {
                    self.json.push(s);
                    true
                }
                None => false,
            },
            InnerEngine::Regex(e) => match e.grammar().step(self.regex.last().expect("base"), b) {
                Some(s) => {
                    self.regex.push(s);
                    true
                }
                None => false,
            },
            InnerEngine::Schema(e) => e.probe_push(b),
            InnerEngine::Cfg(e) => {
                let mut f = self.cfg.last().unwrap_or(e).fork_at();
                if f.advance_bytes(&[b]).is_ok() {
                    self.cfg.push(f);
                    true
                } else {
                    false
                }
            }
        };
        if ok {
            self.depth += 1;
        }
        ok
    }

    pub(crate) fn pop(&mut self) {
        self.depth -= 1;
        match &mut self.engine {
            InnerEngine::Json(_) => {
                self.json.pop();
            }
            InnerEngine::Regex(_) => {
                self.regex.pop();
            }
            InnerEngine::Schema(e) => {
                e.probe_pop(1);
                if self.depth == 0 {
                    e.probe_done();
                }
            }
            InnerEngine::Cfg(_) => {
                self.cfg.pop();
            }
        }
    }

    /// A key of the probe's current state where states are hashable (free-form JSON, regex,
    /// JSON Schema): two byte paths with the same key have the same futures. `None` for the
    /// grammar engine (its Earley sets are not hashed).
    pub(crate) fn state_key(&self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match &self.engine {
            InnerEngine::Json(_) => self.json.last()?.hash(&mut h),
            InnerEngine::Regex(_) => self.regex.last()?.hash(&mut h),
            InnerEngine::Schema(e) => return Some(e.probe_key()),
            InnerEngine::Cfg(_) => return None,
        }
        Some(h.finish())
    }

    /// A superset of the bytes [`InnerSlot::push`] may take next: the JSON Schema engine's
    /// by lexical phase (structure between values, a key's declared names), every byte for
    /// the others (their pushes are single table steps already).
    pub(crate) fn byte_superset(&mut self) -> crate::ByteSet {
        match &mut self.engine {
            InnerEngine::Schema(e) => e.probe_superset(),
            _ => crate::ByteSet::FULL,
        }
    }

    /// A lower bound on the bytes any completion needs from the probe's state, where the
    /// engine has one (JSON Schema: required members, `minItems`, string automata; see
    /// `schema::runtime::completion`); `None` for the others.
    pub(crate) fn completion_bound(&mut self) -> Option<usize> {
        match &mut self.engine {
            InnerEngine::Schema(e) => Some(e.probe_completion_bound() as usize),
            _ => None,
        }
    }

    /// The shortest rest of the string value open in the probe's state, with its closing
    /// quote, where the engine knows it (JSON Schema: the string automaton's shortest path,
    /// `schema::runtime::completion`); `None` for the others.
    pub(crate) fn string_rest(&mut self) -> Option<Vec<u8>> {
        match &mut self.engine {
            InnerEngine::Schema(e) => e.probe_string_rest(),
            _ => None,
        }
    }

    pub(crate) fn accepting(&self) -> bool {
        match &self.engine {
            InnerEngine::Json(e) => e.grammar().is_accepting(self.json.last().expect("base")),
            InnerEngine::Regex(e) => e.grammar().is_accepting(self.regex.last().expect("base")),
            InnerEngine::Schema(e) => e.probe_accepting(),
            InnerEngine::Cfg(e) => self.cfg.last().unwrap_or(e).is_accepting(),
        }
    }

    fn advance_bytes(&mut self, bytes: &[u8]) -> bool {
        match &mut self.engine {
            InnerEngine::Json(e) => e.advance_bytes(bytes).is_ok(),
            InnerEngine::Regex(e) => e.advance_bytes(bytes).is_ok(),
            InnerEngine::Schema(e) => e.advance_bytes(bytes).is_ok(),
            InnerEngine::Cfg(e) => e.advance_bytes(bytes).is_ok(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The combined recogniser
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    None,
    Live,
    Pool(u32, u32),
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    outer: Outer,
    inner: Slot,
    pushed: Slot,
    entered: Option<u32>,
}

/// Fresh inner engines a walk enters (per content, in stack order), kept across walks.
#[derive(Default)]
struct Pool {
    slots: Vec<Vec<InnerSlot>>,
    used: Vec<u32>,
    frames: Vec<Frame>,
}

struct Walker<'a> {
    prog: &'a Program,
    live: Option<&'a mut InnerSlot>,
    pool: &'a mut Pool,
    cur: Outer,
    cur_in: Slot,
    frames: Vec<Frame>,
}

impl<'a> Walker<'a> {
    fn new(
        prog: &'a Program,
        o: Outer,
        live: Option<&'a mut InnerSlot>,
        pool: &'a mut Pool,
    ) -> Self {
        if pool.slots.len() < prog.contents.len() {
            pool.slots.resize_with(prog.contents.len(), Vec::new);
            pool.used.resize(prog.contents.len(), 0);
        }
        let mut frames = std::mem::take(&mut pool.frames);
        frames.clear();
        let mut live = live;
        if let Some(l) = live.as_deref_mut() {
            l.start();
        }
        let cur_in = if live.is_some() { Slot::Live } else { Slot::None };
        Walker { prog, live, pool, cur: o, cur_in, frames }
    }

    fn finish(self) {
        debug_assert!(self.frames.is_empty());
        self.pool.frames = self.frames;
    }

    fn slot(&mut self, s: Slot) -> &mut InnerSlot {
        match s {
            Slot::Live => self.live.as_deref_mut().expect("live inner"),
            Slot::Pool(c, i) => &mut self.pool.slots[c as usize][i as usize],
            Slot::None => unreachable!("no inner engine"),
        }
    }

    /// Enter the state `o` (after a transition): a content gets a fresh pooled engine.
    fn enter(&mut self, o: Outer) -> (Slot, Option<u32>) {
        if let St::Content(c) = self.prog.states[o.st as usize] {
            let i = self.pool.used[c as usize];
            if self.pool.slots[c as usize].len() <= i as usize {
                let fresh =
                    InnerSlot::fresh(&self.prog.contents[c as usize].compiled, &self.prog.vocab);
                self.pool.slots[c as usize].push(fresh);
            }
            self.pool.used[c as usize] += 1;
            self.pool.slots[c as usize][i as usize].start();
            (Slot::Pool(c, i), Some(c))
        } else {
            (Slot::None, None)
        }
    }

    /// The slots pushed to, per byte, and the final inner (for committing an advance).
    fn trace(&self) -> (&[Frame], Slot) {
        (&self.frames, self.cur_in)
    }
}

impl Recognizer for Walker<'_> {
    fn try_push_byte(&mut self, b: u8) -> bool {
        let o = self.cur;
        let prog = self.prog;
        if let St::Content(c) = prog.states[o.st as usize] {
            let info = &prog.contents[c as usize];
            let inner = self.cur_in;
            let (acc, pushed) = if o.alive {
                let s = self.slot(inner);
                let acc = s.accepting();
                (acc, s.push(b))
            } else {
                (false, false)
            };
            let d = if info.end.is_empty() {
                0
            } else {
                ((o.d << 1) | u64::from(acc)) & info.bmask[b as usize]
            };
            let pushed_to = if pushed { inner } else { Slot::None };
            if !info.end.is_empty() && d & (1 << (info.end.len() - 1)) != 0 {
                let n = prog.goto(o, info.after);
                let (ns, entered) = self.enter(n);
                self.frames.push(Frame { outer: o, inner, pushed: pushed_to, entered });
                self.cur = n;
                self.cur_in = ns;
                return true;
            }
            if !pushed && d == 0 {
                return false;
            }
            self.frames.push(Frame { outer: o, inner, pushed: pushed_to, entered: None });
            self.cur = Outer { d, alive: pushed, ..o };
            return true;
        }
        let Some(n) = prog.step_outer(o, b) else { return false };
        let (ns, entered) = if n.st != o.st || !matches!(prog.states[n.st as usize], St::Text(_)) {
            self.enter(n)
        } else {
            (Slot::None, None)
        };
        self.frames.push(Frame { outer: o, inner: self.cur_in, pushed: Slot::None, entered });
        self.cur = n;
        self.cur_in = ns;
        true
    }

    fn pop_bytes(&mut self, n: usize) {
        for _ in 0..n {
            let f = self.frames.pop().expect("pushed frame");
            if f.pushed != Slot::None {
                self.slot(f.pushed).pop();
            }
            if let Some(c) = f.entered {
                self.pool.used[c as usize] -= 1;
            }
            self.cur = f.outer;
            self.cur_in = f.inner;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------------------------

enum Undo {
    /// The token went to the live inner engine: roll it back there.
    Inner,
    /// Restore this inner engine (or none) as the live one.
    Restore(Option<Box<InnerSlot>>),
    /// The inner engine is unchanged.
    Keep,
}

struct Hist {
    outer: Outer,
    finished: bool,
    undo: Undo,
}

/// The per-request engine of a structural-tag constraint (made by
/// [`super::CompiledConstraint::engine`]).
pub struct TaggedEngine {
    prog: Arc<Program>,
    outer: Outer,
    finished: bool,
    live: Mutex<Option<Box<InnerSlot>>>,
    pool: Mutex<Pool>,
    history: History<Hist>,
    view: crate::engine::BoolView,
    scratch: Vec<u8>,
}

impl fmt::Debug for TaggedEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaggedEngine")
            .field("outer", &self.outer)
            .field("finished", &self.finished)
            .finish()
    }
}

impl TaggedEngine {
    pub(crate) fn new(prog: Arc<Program>) -> TaggedEngine {
        let o =
            prog.goto(Outer { st: 0, ac: 0, n: 0, d: 0, alive: true, counts: [0; 4] }, prog.entry);
        let live = match prog.states[o.st as usize] {
            St::Content(c) => {
                Some(Box::new(InnerSlot::fresh(&prog.contents[c as usize].compiled, &prog.vocab)))
            }
            _ => None,
        };
        let history = History::new(prog.options.history);
        TaggedEngine {
            prog,
            outer: o,
            finished: false,
            live: Mutex::new(live),
            pool: Mutex::new(Pool::default()),
            history,
            view: crate::engine::BoolView::default(),
            scratch: Vec::new(),
        }
    }

    /// The name of the tag whose content is being written, if any.
    pub fn current_tag(&self) -> Option<&str> {
        match self.prog.states[self.outer.st as usize] {
            St::Content(c) => Some(&self.prog.contents[c as usize].tag),
            _ => None,
        }
    }

    fn in_content(&self) -> Option<u32> {
        match self.prog.states[self.outer.st as usize] {
            St::Content(c) => Some(c),
            _ => None,
        }
    }

    /// Run `bytes` through the combined recogniser; `f` sees the walker after every byte was
    /// accepted (before they are popped). `None` if a byte is refused.
    fn probe<T>(&self, bytes: &[u8], f: impl FnOnce(&Walker<'_>) -> T) -> Option<T> {
        let mut live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut pool = self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let prog = &*self.prog;
        let mut w = Walker::new(prog, self.outer, live.as_deref_mut(), &mut pool);
        let mut n = 0;
        let mut ok = true;
        for &b in bytes {
            if !w.try_push_byte(b) {
                ok = false;
                break;
            }
            n += 1;
        }
        let r = if ok { Some(f(&w)) } else { None };
        w.pop_bytes(n);
        w.finish();
        r
    }

    fn text_allowed(&self, t: TokenId) -> bool {
        let bytes = self.prog.vocab.token_bytes(t);
        if let Some(c) = self.in_content() {
            let info = &self.prog.contents[c as usize];
            let live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let l = live.as_ref().expect("content has an engine");
            let full = self.outer.d != 0 || !self.outer.alive || l.dyn_engine().is_accepting();
            if !full && !info.exits(false).mask.contains(t) {
                return l.dyn_engine().allows(t);
            }
        } else {
            let key = self.prog.key(self.outer);
            let cache = self.prog.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(m) = cache.get(&key) {
                return m.contains(t);
            }
        }
        self.probe(bytes, |_| ()).is_some()
    }

    fn live_accepting(&self) -> bool {
        let live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        live.as_ref().is_some_and(|l| l.dyn_engine().is_accepting())
    }

    /// The target of special token `t` from the current state, if it is expected.
    fn special_target(&self, t: TokenId) -> Option<u32> {
        let o = &self.outer;
        if let Some(c) = self.in_content() {
            if !self.prog.contents[c as usize].end.is_empty() || !o.alive || !self.live_accepting()
            {
                return None;
            }
        }
        self.prog.specials(o).iter().find(|e| e.0 == t).map(|e| e.1)
    }

    fn push_hist(&mut self, undo: Undo) {
        self.history.push(Hist { outer: self.outer, finished: self.finished, undo });
    }

    fn compute_outside(&self, mask: &mut TokenMask) {
        mask.clear();
        let prog = &*self.prog;
        {
            let mut pool = self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut w = Walker::new(prog, self.outer, None, &mut pool);
            prog.vocab.trie().walk(&mut w, mask);
            w.finish();
        }
        for &(t, _) in prog.specials(&self.outer) {
            mask.insert(t);
        }
        if prog.nullable(&self.outer) {
            crate::engine::allow_eos(&prog.vocab, mask);
        }
    }
}

impl ConstraintEngine for TaggedEngine {
    fn vocab(&self) -> &Vocabulary {
        &self.prog.vocab
    }

    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        check_mask_len(&self.prog.vocab, mask.len())?;
        if self.finished {
            mask.clear();
            return Ok(());
        }
        let prog = self.prog.clone();
        let Some(c) = self.in_content() else {
            let key = prog.key(self.outer);
            if let Some(m) =
                prog.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key)
            {
                mask.copy_from(m);
                return Ok(());
            }
            self.compute_outside(mask);
            let mut cache = prog.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if cache.len() >= CACHE_CAP {
                cache.clear();
            }
            cache.insert(key, Arc::new(mask.clone()));
            return Ok(());
        };
        let info = &prog.contents[c as usize];
        let o = self.outer;
        let live = self.live.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(l) = live.as_deref_mut() else { unreachable!("content without an engine") };
        if o.alive {
            l.dyn_engine_mut().fill_mask(mask)?;
            for &e in prog.vocab.eos_ids() {
                mask.remove(e);
            }
        } else {
            mask.clear();
        }
        if !info.end.is_empty() {
            let full = o.d != 0 || !o.alive || l.dyn_engine().is_accepting();
            let exits = info.exits(full);
            exits.remove_from(mask);
            let trie = &exits.trie;
            let pool = self.pool.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut w = Walker::new(&prog, o, Some(l), pool);
            trie.walk(&mut w, mask);
            w.finish();
        } else if o.alive && l.dyn_engine().is_accepting() {
            for &(t, _) in prog.specials(&o) {
                mask.insert(t);
            }
        }
        Ok(())
    }

    fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
        let vocab = self.prog.vocab.clone();
        if token.index() >= vocab.n_vocab() || vocab.kind(token) == TokenKind::Padding {
            return Err(EngineError::new(EngineErrorKind::OutOfRange {
                token,
                n_vocab: vocab.n_vocab(),
            }));
        }
        if self.finished {
            return Err(EngineError::new(EngineErrorKind::AfterEos { token }));
        }
        let bytes = vocab.token_bytes(token);
        if vocab.kind(token) == TokenKind::Special || bytes.is_empty() {
            if let Some(target) = self.special_target(token) {
                let n = self.prog.goto(self.outer, target);
                let old =
                    self.live.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).take();
                self.push_hist(Undo::Restore(old));
                self.outer = n;
                if let St::Content(c) = self.prog.states[n.st as usize] {
                    let fresh = InnerSlot::fresh(&self.prog.contents[c as usize].compiled, &vocab);
                    *self.live.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(Box::new(fresh));
                }
                if vocab.is_eos(token) && matches!(self.prog.states[n.st as usize], St::Accept) {
                    self.finished = true;
                }
                return Ok(());
            }
            // Inside content, a special token the inner grammar takes (a GBNF token terminal).
            if self.in_content().is_some() && self.outer.alive && !vocab.is_eos(token) {
                let live = self.live.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(l) = live.as_deref_mut() {
                    if l.dyn_engine().allows(token) {
                        l.dyn_engine_mut().advance(token)?;
                        self.push_hist(Undo::Inner);
                        self.outer.d = 0;
                        return Ok(());
                    }
                }
            }
            if vocab.is_eos(token) {
                if self.in_content().is_none() && self.prog.nullable(&self.outer) {
                    self.push_hist(Undo::Keep);
                    self.finished = true;
                    return Ok(());
                }
                return Err(EngineError::new(EngineErrorKind::EosNotAllowed { token }));
            }
            return Err(EngineError::new(EngineErrorKind::SpecialToken { token }));
        }
        // A text token: trace it through the combined recogniser, then commit with the engines'
        // own APIs.
        let mut in_bytes = std::mem::take(&mut self.scratch);
        let traced = self.probe(bytes, |w| {
            let (frames, last) = w.trace();
            let all_live = frames.iter().all(|f| f.pushed == Slot::Live);
            in_bytes.clear();
            if let Slot::Pool(..) = last {
                for (f, &b) in frames.iter().zip(bytes) {
                    if f.pushed == last {
                        in_bytes.push(b);
                    }
                }
            }
            (w.cur, last, all_live)
        });
        let Some((n, last, all_live)) = traced else {
            self.scratch = in_bytes;
            let accepted = (0..bytes.len())
                .rev()
                .find(|&k| self.probe(&bytes[..k], |_| ()).is_some())
                .unwrap_or(0);
            return Err(crate::engine::refused(&vocab, token, accepted));
        };
        let live = self.live.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        match last {
            Slot::Live if all_live => {
                let l = live.as_deref_mut().expect("live inner");
                l.dyn_engine_mut().advance(token)?;
                self.push_hist(Undo::Inner);
            }
            Slot::Live => self.push_hist(Undo::Keep),
            Slot::None => {
                let old = live.take();
                self.push_hist(Undo::Restore(old));
            }
            Slot::Pool(c, _) => {
                let mut fresh = InnerSlot::fresh(&self.prog.contents[c as usize].compiled, &vocab);
                let ok = fresh.advance_bytes(&in_bytes);
                debug_assert!(ok, "a traced content prefix is accepted");
                let old = live.replace(Box::new(fresh));
                self.push_hist(Undo::Restore(old));
            }
        }
        self.scratch = in_bytes;
        self.outer = n;
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        !self.finished && self.in_content().is_none() && self.prog.nullable(&self.outer)
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn can_only_end(&self) -> bool {
        self.is_accepting() && matches!(self.prog.states[self.outer.st as usize], St::Accept)
    }

    fn allows(&self, token: TokenId) -> bool {
        let vocab = &self.prog.vocab;
        if self.finished
            || token.index() >= vocab.n_vocab()
            || vocab.kind(token) == TokenKind::Padding
        {
            return false;
        }
        if vocab.kind(token) == TokenKind::Special || vocab.token_bytes(token).is_empty() {
            if self.special_target(token).is_some() {
                return true;
            }
            if vocab.is_eos(token) {
                return self.is_accepting();
            }
            if self.in_content().is_some() && self.outer.alive {
                let live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                return live.as_ref().is_some_and(|l| l.dyn_engine().allows(token));
            }
            return false;
        }
        self.text_allowed(token)
    }

    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError> {
        crate::engine::bool_view(self, vocab_size, |e| &mut e.view)
    }

    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        if n > self.history.len() {
            return Err(EngineError::new(EngineErrorKind::RollbackTooFar {
                requested: n,
                available: self.history.len(),
            }));
        }
        for _ in 0..n {
            let h = self.history.pop().expect("checked length");
            let live = self.live.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
            match h.undo {
                Undo::Inner => {
                    live.as_deref_mut().expect("live inner").dyn_engine_mut().rollback(1)?;
                }
                Undo::Restore(old) => *live = old,
                Undo::Keep => {}
            }
            self.outer = h.outer;
            self.finished = h.finished;
        }
        Ok(())
    }
}
