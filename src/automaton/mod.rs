//! Regular expressions as compact byte DFAs with live-state analysis: the shared automaton layer
//! of the regex constraint and of JSON Schema `pattern`.
//!
//! A pattern is parsed with `regex-syntax` (so syntax errors carry a position), compiled to a
//! Thompson NFA and determinised by `regex-automata` into a dense DFA — all three steps under
//! byte-size limits, so a pattern that would blow up returns a typed [`RegexError`] instead of
//! exhausting memory. The dense DFA is then re-tabled into a table of our own:
//!
//! - states renumbered `0..n` in breadth-first order from the anchored start;
//! - transitions indexed by the DFA's byte equivalence classes (`state * classes + class`);
//! - a per-state *accept-at-end* flag (`regex-automata` reports matches one byte late; we resolve
//!   that once, through the end-of-input transition, so `is_accepting` is a table read);
//! - **live-state analysis**: a state is live when an accepting state is reachable from it
//!   (backward reachability over the reversed transition graph). Transitions into non-live states
//!   are removed, so [`ByteDfa::next`] returns `None` exactly when no completion exists. That is
//!   what makes masks exact: no token that leads into a dead end is ever allowed.
//!
//! Matching is **full match over bytes**: the whole output must match the pattern, as if it were
//! wrapped in `^(?:…)$`. Semantics are `MatchKind::All` (every alternative stays alive, so `a|ab`
//! accepts both `a` and `ab`). Unicode classes are compiled to UTF-8 byte sequences, so a token
//! that ends in the middle of a multi-byte character is handled exactly.
//!
//! Not supported (typed error at build): Unicode word boundaries `\b` (the dense DFA cannot
//! represent them), and patterns whose DFA exceeds the limits of [`DfaConfig`]
//! ([`RegexErrorKind::TooBig`]). For the latter the regex constraint falls back to
//! [`lazy::LazyDfa`], determinised on demand with the same exact liveness.
//!
//! # Example
//! ```
//! use grammask::automaton::{ByteDfa, DfaConfig};
//! let dfa = ByteDfa::from_regex(r"[a-z]+@[a-z]+\.com", &DfaConfig::default()).unwrap();
//! let mut s = dfa.start();
//! for &b in b"me@x.com" {
//!     s = dfa.next(s, b).unwrap();
//! }
//! assert!(dfa.is_accepting(s));
//! assert!(dfa.next(dfa.start(), b'@').is_none()); // no completion starts with '@'
//! ```

pub(crate) mod lazy;
pub(crate) mod minimize;
mod safe;

pub use lazy::LazyDfa;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use std::fmt;

/// A state of a [`ByteDfa`]. Always live (some completion exists from it).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct DfaStateId(u32);

impl DfaStateId {
    /// The state with index `i` (must be below [`ByteDfa::state_count`] to be used).
    #[inline]
    pub fn from_index(i: usize) -> DfaStateId {
        DfaStateId(i as u32)
    }

    /// The state's index in `0..ByteDfa::state_count()`.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

const DEAD: u32 = u32::MAX;

/// Size limits and options for compiling a regex.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DfaConfig {
    /// Most live states the final table may have (default 100,000).
    pub max_states: usize,
    /// Byte budget for each of the NFA, the determiniser's working memory and the dense DFA
    /// (default 64 MiB each).
    pub max_memory: usize,
    /// Deepest nesting of groups and repetitions the parser accepts (default 128).
    pub nest_limit: u32,
    /// Minimise the live table (Moore's refinement, `automaton::minimize`; default `false`;
    /// tables of more than 16,384 state × class cells are left as they are). Equivalent states
    /// then share one id, so caches keyed by state hit more often; it costs compile time, so
    /// it is for small automata such as the CFG lexer's lexemes. (`regex-automata`'s own
    /// minimiser keeps states apart that differ only in a delayed match.)
    pub minimize: bool,
}

impl Default for DfaConfig {
    fn default() -> Self {
        DfaConfig { max_states: 100_000, max_memory: 64 << 20, nest_limit: 128, minimize: false }
    }
}

builder!(DfaConfig {
    /// Most live states the final table may have (default 100,000).
    with_max_states => max_states: usize,
    /// Byte budget for each of the NFA, the determiniser's working memory and the dense DFA
    /// (default 64 MiB each).
    with_max_memory => max_memory: usize,
    /// Deepest nesting of groups and repetitions the parser accepts (default 128).
    with_nest_limit => nest_limit: u32,
    /// Minimise the live table (default `false`).
    with_minimize => minimize: bool,
});

/// A regex that could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexError {
    kind: RegexErrorKind,
}

/// Why a regex could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegexErrorKind {
    /// The pattern is not valid syntax.
    Syntax {
        /// Byte offset of the offending part in the pattern.
        offset: usize,
        /// 1-based line of the offending part.
        line: usize,
        /// 1-based column of the offending part.
        column: usize,
        /// The parser's explanation.
        message: String,
    },
    /// The automaton would exceed a size limit of [`DfaConfig`].
    TooBig {
        /// Which limit, and how it was exceeded.
        message: String,
    },
    /// The pattern uses a feature the byte DFA cannot represent (e.g. Unicode `\b`).
    Unsupported {
        /// What the builder said.
        message: String,
    },
    /// The pattern matches no string at all, so no output could ever be accepted.
    MatchesNothing,
}

impl RegexError {
    pub(crate) fn new(kind: RegexErrorKind) -> Self {
        RegexError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &RegexErrorKind {
        &self.kind
    }
}

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            RegexErrorKind::Syntax { offset, line, column, message } => write!(
                f,
                "regex syntax error at offset {offset} (line {line}, column {column}): {message}"
            ),
            RegexErrorKind::TooBig { message } => write!(f, "regex too big: {message}"),
            RegexErrorKind::Unsupported { message } => {
                write!(f, "regex uses an unsupported feature: {message}")
            }
            RegexErrorKind::MatchesNothing => f.write_str("regex matches no string"),
        }
    }
}

impl std::error::Error for RegexError {}

fn syntax_error(err: &regex_syntax::Error) -> RegexError {
    let (span, message) = match err {
        regex_syntax::Error::Parse(e) => (*e.span(), e.kind().to_string()),
        regex_syntax::Error::Translate(e) => (*e.span(), e.kind().to_string()),
        other => (
            regex_syntax::ast::Span::splat(regex_syntax::ast::Position::new(0, 1, 1)),
            other.to_string(),
        ),
    };
    RegexError::new(RegexErrorKind::Syntax {
        offset: span.start.offset,
        line: span.start.line,
        column: span.start.column,
        message,
    })
}

/// A full-match byte DFA with only live states (see the module docs).
#[derive(Clone)]
pub struct ByteDfa {
    /// `classes[b]`: the equivalence class of byte `b`.
    classes: [u8; 256],
    n_classes: usize,
    /// `trans[s * n_classes + c]`: the next live state, or [`DEAD`].
    trans: Vec<u32>,
    accepting: Vec<bool>,
    /// Whether any byte leads from the state to a live state.
    continues: Vec<bool>,
}

impl fmt::Debug for ByteDfa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByteDfa")
            .field("states", &self.state_count())
            .field("classes", &self.n_classes)
            .finish()
    }
}

/// A byte-class table of `regex-automata` and one representative byte per class (its first
/// byte), as the dense automaton and the lazy fallback index their transitions.
pub(crate) fn class_table(
    bc: &regex_automata::util::alphabet::ByteClasses,
) -> ([u8; 256], Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut seen = crate::bytes::ByteSet::EMPTY;
    for b in 0..=255u8 {
        let c = bc.get(b);
        classes[b as usize] = c;
        if !seen.contains(c) {
            seen.insert(c);
            if reps.len() <= c as usize {
                reps.resize(c as usize + 1, 0);
            }
            reps[c as usize] = b;
        }
    }
    (classes, reps)
}

/// Parse `pattern` (Rust `regex` syntax, UTF-8 mode, `config.nest_limit`) to its HIR.
pub(crate) fn parse_pattern(
    pattern: &str,
    config: &DfaConfig,
) -> Result<regex_syntax::hir::Hir, RegexError> {
    regex_syntax::ParserBuilder::new()
        .nest_limit(config.nest_limit)
        .utf8(true)
        .build()
        .parse(pattern)
        .map_err(|e| syntax_error(&e))
}

/// The Thompson NFA (no captures, `config.max_memory` bound) both the dense automaton and the
/// lazy fallback ([`lazy::LazyDfa`]) are built from.
pub(crate) fn thompson_nfa(
    hir: &regex_syntax::hir::Hir,
    config: &DfaConfig,
) -> Result<thompson::NFA, RegexError> {
    thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .nfa_size_limit(Some(config.max_memory))
                .shrink(false)
                .which_captures(thompson::WhichCaptures::None),
        )
        .build_from_hir(hir)
        .map_err(|e| RegexError::new(RegexErrorKind::TooBig { message: format!("NFA: {e}") }))
}

/// Most states the dense DFA may reach from its start before [`ByteDfa::retable`] gives up:
/// four times the live-state limit (dead-end states are pruned after), at least 1,024.
fn reachable_limit(config: &DfaConfig) -> usize {
    config.max_states.saturating_mul(4).max(1024)
}

impl ByteDfa {
    /// Compile `pattern` to a full-match DFA.
    ///
    /// # Errors
    /// [`RegexErrorKind::Syntax`] with the position of the error, [`RegexErrorKind::TooBig`]
    /// when a limit of `config` is exceeded, [`RegexErrorKind::Unsupported`] for features the
    /// DFA cannot represent, [`RegexErrorKind::MatchesNothing`] for an empty language.
    pub fn from_regex(pattern: &str, config: &DfaConfig) -> Result<ByteDfa, RegexError> {
        Self::from_hir(&parse_pattern(pattern, config)?, config)
    }

    /// Compile an already built `regex-syntax` HIR (byte classes allowed: the CFG lexer builds
    /// its lexemes' HIR from byte-level terminals) to a full-match DFA.
    ///
    /// # Errors
    /// As [`ByteDfa::from_regex`], syntax aside.
    pub fn from_hir(
        hir: &regex_syntax::hir::Hir,
        config: &DfaConfig,
    ) -> Result<ByteDfa, RegexError> {
        Self::from_hir_budgeted(hir, config, config.max_memory)
    }

    /// [`ByteDfa::from_hir`] with the determiniser and the dense DFA held to
    /// `min(dense_memory, config.max_memory)` bytes (the NFA keeps `config.max_memory`). The
    /// determiniser's time grows with the memory it may fill (about 50–80 ms per MiB in a release build), so a
    /// caller with a cheaper fallback than a huge dense DFA gives it a smaller budget.
    pub(crate) fn from_hir_budgeted(
        hir: &regex_syntax::hir::Hir,
        config: &DfaConfig,
        dense_memory: usize,
    ) -> Result<ByteDfa, RegexError> {
        let nfa = thompson_nfa(hir, config)?;
        let dfa = Self::dense(&nfa, dense_memory.min(config.max_memory), None)?;
        Self::retable(&dfa, config)
    }

    /// [`ByteDfa::from_hir`] with the determiniser's *work* held to about `max_work` units,
    /// where a unit is one NFA state × one byte class of one DFA state (an upper bound on what
    /// computing a state's transitions costs: each class's step closes over at most every NFA
    /// state). Memory alone does not bound the time: a DFA over few byte classes fits many
    /// states in a few MiB, and with a large NFA behind each state, tens of thousands of
    /// states take seconds (a GBNF lexeme whose character class swallowed its separators: 5 s
    /// to 60,000 states, 80 µs each). The dense DFA's size limit is set to the states the
    /// work allows (and at most the reachable states [`ByteDfa::retable`] accepts), so the
    /// determiniser stops there. Returns the result and the work charged for it (the cap's
    /// worth on failure).
    pub(crate) fn from_hir_with_work(
        hir: &regex_syntax::hir::Hir,
        config: &DfaConfig,
        max_work: u64,
    ) -> (Result<ByteDfa, RegexError>, u64) {
        let nfa = match thompson_nfa(hir, config) {
            Ok(nfa) => nfa,
            Err(e) => return (Err(e), 0),
        };
        let classes = nfa.byte_classes().alphabet_len();
        let unit = (nfa.states().len() as u64).saturating_mul(classes as u64).max(1);
        let reachable = reachable_limit(config) as u64;
        let cap = (max_work / unit).min(reachable + 8);
        if cap < 4 {
            let message = format!(
                "determinisation work budget ({max_work} units) too small for an NFA of {} states over {classes} byte classes",
                nfa.states().len()
            );
            return (Err(RegexError::new(RegexErrorKind::TooBig { message })), 0);
        }
        // The dense table: `2^stride2` transitions of 4 bytes per state, plus the start table
        // and the special states.
        let row = classes.next_power_of_two() * 4;
        let table = (cap as usize).saturating_mul(row).saturating_add(16 << 10);
        match Self::dense(&nfa, config.max_memory, Some(table)) {
            Ok(dfa) => {
                let built = (dfa.memory_usage() / row) as u64;
                (Self::retable(&dfa, config), built.min(cap).saturating_mul(unit))
            }
            Err(e) => (Err(e), cap.saturating_mul(unit)),
        }
    }

    /// The anchored, all-matches dense DFA of `nfa`, its determiniser held to `memory` bytes
    /// and its table to `table` bytes (`memory` when `None`).
    fn dense(
        nfa: &regex_automata::nfa::thompson::NFA,
        memory: usize,
        table: Option<usize>,
    ) -> Result<dense::DFA<Vec<u32>>, RegexError> {
        dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .minimize(false)
                    .dfa_size_limit(Some(table.unwrap_or(memory).min(memory)))
                    .determinize_size_limit(Some(memory)),
            )
            .build_from_nfa(nfa)
            .map_err(|e| {
                let message = e.to_string();
                if message.contains("limit") {
                    RegexError::new(RegexErrorKind::TooBig { message: format!("DFA: {message}") })
                } else {
                    RegexError::new(RegexErrorKind::Unsupported { message })
                }
            })
    }

    fn retable(dfa: &dense::DFA<Vec<u32>>, config: &DfaConfig) -> Result<ByteDfa, RegexError> {
        let unsupported = |m: String| RegexError::new(RegexErrorKind::Unsupported { message: m });
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| unsupported(e.to_string()))?;
        let (classes, reps) = class_table(dfa.byte_classes());
        let n_classes = reps.len();
        // Breadth-first enumeration of the states reachable from the start.
        let mut ids: rustc_hash::FxHashMap<regex_automata::util::primitives::StateID, u32> =
            Default::default();
        let mut order = vec![start];
        ids.insert(start, 0);
        let mut raw: Vec<u32> = Vec::new();
        let mut accepting = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            accepting.push(dfa.is_match_state(dfa.next_eoi_state(s)));
            for &rep in &reps {
                let n = dfa.next_state(s, rep);
                if dfa.is_dead_state(n) || dfa.is_quit_state(n) {
                    if dfa.is_quit_state(n) {
                        return Err(unsupported(format!(
                            "the DFA gives up on byte 0x{rep:02X} (Unicode word boundary?)"
                        )));
                    }
                    raw.push(DEAD);
                    continue;
                }
                let next = match ids.get(&n) {
                    Some(&id) => id,
                    None => {
                        let id = order.len() as u32;
                        if order.len() >= reachable_limit(config) {
                            return Err(RegexError::new(RegexErrorKind::TooBig {
                                message: format!("more than {} reachable DFA states", order.len()),
                            }));
                        }
                        ids.insert(n, id);
                        order.push(n);
                        id
                    }
                };
                raw.push(next);
            }
        }
        let n = order.len();
        // Live-state analysis: backward reachability from the accepting states.
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
        for s in 0..n {
            for c in 0..n_classes {
                let t = raw[s * n_classes + c];
                if t != DEAD {
                    preds[t as usize].push(s as u32);
                }
            }
        }
        let mut live = accepting.clone();
        let mut work: Vec<usize> = (0..n).filter(|&s| live[s]).collect();
        while let Some(s) = work.pop() {
            for &p in &preds[s] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    work.push(p as usize);
                }
            }
        }
        if !live[0] {
            return Err(RegexError::new(RegexErrorKind::MatchesNothing));
        }
        // Renumber the live states (keeping BFS order, so the start stays 0).
        let mut new_id = vec![DEAD; n];
        let mut count = 0u32;
        for s in 0..n {
            if live[s] {
                new_id[s] = count;
                count += 1;
            }
        }
        if count as usize > config.max_states {
            return Err(RegexError::new(RegexErrorKind::TooBig {
                message: format!("{count} live DFA states (limit {})", config.max_states),
            }));
        }
        let mut trans = Vec::with_capacity(count as usize * n_classes);
        let mut acc = Vec::with_capacity(count as usize);
        for s in 0..n {
            if !live[s] {
                continue;
            }
            acc.push(accepting[s]);
            for c in 0..n_classes {
                let t = raw[s * n_classes + c];
                trans.push(if t == DEAD { DEAD } else { new_id[t as usize] });
            }
        }
        if config.minimize {
            (trans, acc) = Self::minimized(&trans, n_classes, &acc);
        }
        let continues =
            trans.chunks(n_classes.max(1)).map(|row| row.iter().any(|&t| t != DEAD)).collect();
        Ok(ByteDfa { classes, n_classes, trans, accepting: acc, continues })
    }

    /// The live table `trans`/`acc` (start 0, `DEAD` for no way on) with equivalent states
    /// merged ([`minimize::minimize`], which numbers the dead state 0 and the start 1).
    fn minimized(trans: &[u32], n_classes: usize, acc: &[bool]) -> (Vec<u32>, Vec<bool>) {
        let shifted: Vec<u32> = std::iter::repeat_n(0, n_classes)
            .chain(trans.iter().map(|&t| if t == DEAD { 0 } else { t + 1 }))
            .collect();
        let accept: Vec<bool> = std::iter::once(false).chain(acc.iter().copied()).collect();
        let (m, a) = minimize::minimize(&shifted, n_classes, &accept);
        let back = m[n_classes..].iter().map(|&t| if t == 0 { DEAD } else { t - 1 }).collect();
        (back, a[1..].to_vec())
    }

    /// The state before any byte.
    #[inline]
    pub fn start(&self) -> DfaStateId {
        DfaStateId(0)
    }

    /// The state after `byte`, or `None` when no completion starts with the bytes so far plus
    /// `byte`.
    #[inline(always)]
    pub fn next(&self, state: DfaStateId, byte: u8) -> Option<DfaStateId> {
        let t = self.trans[state.index() * self.n_classes + self.classes[byte as usize] as usize];
        (t != DEAD).then_some(DfaStateId(t))
    }

    /// Does the output so far fully match the pattern?
    #[inline]
    pub fn is_accepting(&self, state: DfaStateId) -> bool {
        self.accepting[state.index()]
    }

    /// Is some completion possible from `state`? Always true for states handed out by
    /// [`ByteDfa::start`] and [`ByteDfa::next`]; kept for callers that hold raw ids.
    #[inline]
    pub fn is_live(&self, state: DfaStateId) -> bool {
        state.index() < self.accepting.len()
    }

    /// Can any byte follow `state`? (`false` at an accepting state nothing may extend.)
    #[inline]
    pub fn can_continue(&self, state: DfaStateId) -> bool {
        self.continues[state.index()]
    }

    /// Number of (live) states.
    pub fn state_count(&self) -> usize {
        self.accepting.len()
    }

    /// Number of byte equivalence classes.
    pub fn class_count(&self) -> usize {
        self.n_classes
    }

    /// Heap bytes used by the tables.
    pub fn memory_usage(&self) -> usize {
        self.trans.len() * 4 + self.accepting.len() * 2
    }

    /// Run `bytes` from `state` (the naive reference): the state after them, or `None`.
    pub fn run(&self, state: DfaStateId, bytes: &[u8]) -> Option<DfaStateId> {
        bytes.iter().try_fold(state, |s, &b| self.next(s, b))
    }

    /// Does `text` fully match?
    pub fn matches(&self, text: &[u8]) -> bool {
        self.run(self.start(), text).is_some_and(|s| self.is_accepting(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(p: &str) -> ByteDfa {
        ByteDfa::from_regex(p, &DfaConfig::default()).unwrap()
    }

    #[test]
    fn full_match_semantics() {
        let d = dfa("a|ab");
        assert!(d.matches(b"a"));
        assert!(d.matches(b"ab"));
        assert!(!d.matches(b"abc"));
        assert!(!d.matches(b""));
        let d = dfa("(X)(; X)*");
        assert!(d.matches(b"X; X"));
        assert!(d.next(d.run(d.start(), b"X").unwrap(), b';').is_some());
    }

    #[test]
    fn dead_ends_are_refused() {
        // After "ab", only "c" leads to a match: 'x' is not live.
        let d = dfa("abc|abd");
        let s = d.run(d.start(), b"ab").unwrap();
        assert!(d.next(s, b'x').is_none());
        let s = d.next(s, b'c').unwrap();
        assert!(d.is_accepting(s));
        assert!(!d.can_continue(s));
    }

    #[test]
    fn unicode_classes_on_bytes() {
        let d = dfa(r"\p{Greek}+");
        assert!(d.matches("αβγ".as_bytes()));
        // The first byte of 'α' alone is live, a lone continuation byte is not.
        assert!(d.next(d.start(), "α".as_bytes()[0]).is_some());
        assert!(d.next(d.start(), 0xB1).is_none());
        assert!(!d.matches(b"abc"));
    }

    #[test]
    fn syntax_error_has_position() {
        let e = ByteDfa::from_regex("ab(c", &DfaConfig::default()).unwrap_err();
        match e.kind() {
            RegexErrorKind::Syntax { offset, .. } => assert_eq!(*offset, 2),
            k => panic!("{k:?}"),
        }
        let e = ByteDfa::from_regex("a{2,1}", &DfaConfig::default()).unwrap_err();
        assert!(matches!(e.kind(), RegexErrorKind::Syntax { .. }), "{e}");
    }

    #[test]
    fn size_limits_are_typed_errors() {
        let small = DfaConfig { max_memory: 1 << 16, ..DfaConfig::default() };
        let e = ByteDfa::from_regex(r"[a-z]{1000}", &small).unwrap_err();
        assert!(matches!(e.kind(), RegexErrorKind::TooBig { .. }), "{e}");
        let few = DfaConfig { max_states: 10, ..DfaConfig::default() };
        let e = ByteDfa::from_regex(r"[a-z]{20}", &few).unwrap_err();
        assert!(matches!(e.kind(), RegexErrorKind::TooBig { .. }), "{e}");
        // The classic exponential DFA blows the memory budget, not the machine.
        let e = ByteDfa::from_regex(
            r"[ab]*a[ab]{20}",
            &DfaConfig { max_memory: 1 << 20, ..DfaConfig::default() },
        )
        .unwrap_err();
        assert!(matches!(e.kind(), RegexErrorKind::TooBig { .. }), "{e}");
    }

    #[test]
    fn minimised_dfas_have_one_state_per_language() {
        let min = DfaConfig { minimize: true, ..DfaConfig::default() };
        for (re, states) in [("-?(0|[1-9][0-9]*)", 4), ("(ab|cb)d*", 3), ("(x|xyz)(yz)*", 3)] {
            let plain = ByteDfa::from_regex(re, &DfaConfig::default()).unwrap();
            let m = ByteDfa::from_regex(re, &min).unwrap();
            assert_eq!(m.state_count(), states, "{re}");
            assert!(plain.state_count() > m.state_count(), "{re}: nothing merged");
            for s in ["", "0", "-7", "10", "109", "01", "-", "ab", "cbdd", "abc", "x", "xyz", "xy"]
            {
                assert_eq!(m.matches(s.as_bytes()), plain.matches(s.as_bytes()), "{re} on {s:?}");
            }
        }
        // "after 1" and "after 10" are one state: both take any digit and accept.
        let m = ByteDfa::from_regex("[1-9][0-9]*", &min).unwrap();
        let one = m.next(m.start(), b'1').unwrap();
        assert_eq!(m.next(one, b'0'), Some(one));
    }

    #[test]
    fn empty_language_is_an_error() {
        let e = ByteDfa::from_regex(r"[a&&b]", &DfaConfig::default()).unwrap_err();
        assert_eq!(e.kind(), &RegexErrorKind::MatchesNothing);
    }
}
