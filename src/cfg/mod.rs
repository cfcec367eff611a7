//! Context-free grammars: GBNF in, an exact Earley-based constraint engine out.
//!
//! - [`gbnf`] parses llama.cpp's GBNF format into an AST ([`gbnf::Rule`]), token terminals
//!   (`<[id]>`, `<name>`, `!<…>`) included.
//! - `grammar` lowers the AST to a flat byte-level CFG ([`CfgGrammar`]): repetitions become
//!   left-recursive helper rules, character classes become UTF-8 byte-range sequences, and the
//!   analysis finds undefined rules (error), unreachable rules (warning) and unproductive rules
//!   (warning; they are removed, which is what keeps masks exact).
//! - `lexer` infers a lexical level: maximal regular sub-rules (a JSON string or number, an
//!   identifier, a whitespace run) become *lexemes*, each one DFA (`regex-automata`, through
//!   [`crate::automaton::ByteDfa`]).
//! - `earley` is an Earley recogniser over bytes and lexemes (Earley 1970, with Aycock &
//!   Horspool 2002's handling of nullable symbols): an item before a lexeme carries the lexeme's
//!   DFA state, so a byte inside a lexeme is one table step. It keeps an append-only chart (undo
//!   = truncate) and implements [`crate::recognizer::Recognizer`] through `walk`, so the
//!   shared trie walker drives it.
//! - `engine` is [`CfgConstraint`], the [`crate::ConstraintEngine`]: token terminals resolved
//!   against the vocabulary and scanned by id beside the byte-level walk; mask cache keyed by
//!   the signature of the chart's future (see `earley`), slices for character-class loops
//!   and lexeme states (walking the other tokens as suffixes after the lexeme),
//!   rollback by truncating the chart, [`crate::EngineErrorKind::LimitExceeded`] when an
//!   Earley set would exceed [`CfgConfig::max_items_per_set`].
//!
//! # Why Earley, and why a lexer inside it
//! Earley handles every CFG — left recursion, ambiguity, empty rules — with no grammar
//! rewriting, and its sets answer exactly the question a mask asks: after these bytes, is some
//! sentence still possible? (Yes iff the set is non-empty, once unproductive symbols are gone.)
//! Its cost is one Earley set per byte, and the trie walk pays it for every trie node it
//! visits; a purely byte-level Earley was 16× slower than the native JSON engine on JSON and
//! took 60–350 ms per mask on permissive grammars. The proven fix (llguidance) is a lexer:
//! regular sub-languages as DFAs, Earley over lexemes. GBNF has no lexical level, so it is
//! inferred (regular = not recursive through itself), and since GBNF has no maximal-munch or
//! priority rule, a lexeme is not tokenised greedily: the DFA runs *inside* Earley items, an
//! item in an accepting DFA state both continues and completes the lexeme, and the language is
//! unchanged. Three things make it fast:
//! 1. a byte inside a lexeme steps a DFA state instead of closing over many byte-level items;
//! 2. completing an accepting lexeme is deferred until a byte of its FOLLOW set is pushed
//!    (inside an identifier, eager completion walked the whole precedence chain per byte);
//! 3. during the trie walk, bytes inside a run of lexemes are *virtual* DFA steps, replayed
//!    into Earley sets only when the run ends (`walk`).
//!
//! And masks repeat: a set is hashed by what can follow it, not by how it was reached (separated
//! lists lowered so that every element completes alike, lexeme DFAs minimised), so the mask
//! cache hits at the second and later members of an object as it does in the native engine.
//! Where the same rule comes back under another context (one object deeper), the *position
//! mask* does: the part of the mask no token's walk read the context for — a walk reads it only
//! by completing an item that started before the last set, which the chart counts — kept by the
//! set's items with origins reduced to "here" or "before" ([`CfgConfig::position_masks`]).
//!
//! The alternative, a pushdown automaton with a context-independent token cache (XGrammar),
//! needs a large precomputation per grammar and vocabulary and was more than this step could
//! build; a lexer over the existing recogniser kept every exactness test applicable and gave
//! the numbers in `docs/performance.md` ("Regex and CFG"). The position masks are that cache
//! grown on demand over the Earley sets, and [`CfgConfig::warm_positions`] precomputes it
//! for the positions nearest the grammar's start when a grammar is built (128 positions
//! within 50 ms by default). The masks are checked equal to the
//! byte-level engine (`CfgConfig::lexer = false`) on every library grammar.
//!
//! # Example
//! ```
//! use grammask::{CfgConfig, CfgConstraint, ConstraintEngine, TokenMask, Vocabulary};
//! let vocab = Vocabulary::embedded().unwrap();
//! let gbnf = r#"root ::= expr
//! expr ::= expr "+" term | term
//! term ::= [0-9]+"#;
//! let mut engine = CfgConstraint::from_gbnf(&vocab, gbnf, &CfgConfig::default()).unwrap();
//! let mut mask = TokenMask::new(vocab.n_vocab());
//! for t in vocab.encode("12+3+45").unwrap() {
//!     engine.fill_mask(&mut mask).unwrap();
//!     assert!(mask.contains(t));
//!     engine.advance(t).unwrap();
//! }
//! assert!(engine.is_accepting());
//! ```

pub(crate) mod earley;
pub(crate) mod engine;
pub mod gbnf;
pub(crate) mod grammar;
pub(crate) mod lexer;
mod walk;

pub use engine::CfgConstraint;
pub use grammar::{CfgGrammar, GrammarReport};

use crate::engine::EngineOptions;
use std::fmt;

/// Limits and options of the CFG engine.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CfgConfig {
    /// Most symbols in the lowered grammar (all right-hand sides together; default 200,000).
    /// Large `{m,n}` bounds and wide Unicode classes count here.
    pub max_grammar_symbols: usize,
    /// Most Earley items in one set (default 20,000). `fill_mask` and `advance` return
    /// [`crate::EngineErrorKind::LimitExceeded`] (state unchanged) when a set they need would
    /// exceed it, rather than a wrong mask; [`CfgConstraint::overflowed`] reports it for
    /// `advance_bytes` and `allows`.
    pub max_items_per_set: usize,
    /// Most Earley items one engine call (`fill_mask`, `advance`, `allows`) may add to the
    /// chart, over all the sets it builds (default 50,000,000: under a second; a byte-level
    /// mask over a 150k-token trie legitimately adds millions). An
    /// ambiguous grammar (`s ::= s s | "a" | ""`) does work quadratic in the output's length
    /// per byte; past the budget the call returns [`crate::EngineErrorKind::LimitExceeded`]
    /// (state unchanged) instead of taking seconds.
    pub max_work_per_call: usize,
    /// Engine limits: rollback history and the number of cached masks (default 64 / 32).
    pub engine: EngineOptions,
    /// Precompute lexical slices for character-class loops and lexeme DFA states whose safe
    /// bytes allow at least this many tokens (default 1,000; `usize::MAX` disables slices).
    pub slice_min_tokens: usize,
    /// Run maximal regular sub-rules as DFAs (lexemes, see the module docs; default `true`). `false`
    /// keeps every rule at the byte level (slower; the masks are the same).
    pub lexer: bool,
    /// Most live DFA states of one lexeme (default 10,000). A regular sub-rule over it stays
    /// a grammar rule (its own regular sub-rules are tried instead), so this never fails a
    /// grammar.
    pub max_lexeme_states: usize,
    /// Determinisation work for all the lexemes of a grammar together (default 16,000,000
    /// units: a unit is one NFA state × one byte class of one DFA state, an upper bound on a
    /// state's cost; the default is about 0.4 s in a release build at worst, and one attempt
    /// gets at most half). A sub-rule whose DFA needs more stays a grammar rule, so this never
    /// fails a grammar; it bounds the compile time of regular rules whose DFAs blow up.
    pub max_lexer_work: usize,
    /// Most position masks kept per compiled grammar (default 512; 0 turns them off; past it,
    /// one goes for each new one): the
    /// part of a mask that does not depend on what came before the last Earley set, and the
    /// trie nodes below which it does, shared by every engine of the grammar (see
    /// `docs/grammars.md`). A state met again under another context (a member value one
    /// object deeper) copies it and walks only those nodes. Each holds one mask (a bit per
    /// token). The masks are the same either way.
    pub position_masks: usize,
    /// Most positions whose masks are computed when the engine is built, before any request
    /// (default 128; 0: none). `CfgConstraint::warm_positions` explores the positions the
    /// grammar reaches from its start, breadth first over bytes, and computes a mask at each,
    /// so a first request finds the masks near the start of the grammar made. Bounded in time
    /// too ([`CfgConfig::warm_time`]). Measured on Llama 3 (`docs/performance.md`): `json.gbnf`
    /// +5 ms on a ~60 ms build (all of its ~335 positions: +16 ms), `sql_select.gbnf` +17 ms
    /// on ~300, `c_expr.gbnf` +30–36 ms on ~110, and their first requests' masks about twice
    /// as fast. The masks are the same either way.
    pub warm_positions: usize,
    /// Longest the build-time warm-up may run (default 50 ms), checked between positions: one
    /// position's mask past it still finishes (itself bounded by
    /// [`CfgConfig::max_work_per_call`]). A grammar whose masks are costly stops early rather
    /// than make its build seconds long for positions a request may never reach.
    pub warm_time: std::time::Duration,
}

impl Default for CfgConfig {
    fn default() -> Self {
        CfgConfig {
            max_grammar_symbols: 200_000,
            max_items_per_set: 20_000,
            max_work_per_call: 50_000_000,
            engine: EngineOptions::default().with_mask_cache(32),
            slice_min_tokens: 1_000,
            lexer: true,
            max_lexeme_states: 10_000,
            max_lexer_work: 16_000_000,
            position_masks: 512,
            warm_positions: 128,
            warm_time: std::time::Duration::from_millis(50),
        }
    }
}

builder!(CfgConfig {
    /// Most symbols in the lowered grammar (default 200,000).
    with_max_grammar_symbols => max_grammar_symbols: usize,
    /// Most Earley items in one set (default 20,000).
    with_max_items_per_set => max_items_per_set: usize,
    /// Most Earley items one engine call may add (default 50,000,000).
    with_max_work_per_call => max_work_per_call: usize,
    /// Engine limits (default: history 64, 32 cached masks).
    with_engine => engine: EngineOptions,
    /// Least tokens a slice must allow to be built (default 1,000; `usize::MAX`: none).
    with_slice_min_tokens => slice_min_tokens: usize,
    /// Run maximal regular sub-rules as DFAs (default `true`).
    with_lexer => lexer: bool,
    /// Most live DFA states of one lexeme (default 10,000).
    with_max_lexeme_states => max_lexeme_states: usize,
    /// Determinisation work for all lexemes together (default 16,000,000 units).
    with_max_lexer_work => max_lexer_work: usize,
    /// Most position masks kept per compiled grammar (default 512; 0: none).
    with_position_masks => position_masks: usize,
    /// Most positions whose masks are computed when the engine is built (default 128).
    with_warm_positions => warm_positions: usize,
    /// Longest the build-time warm-up may run (default 50 ms).
    with_warm_time => warm_time: std::time::Duration,
});

/// A grammar that could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CfgError {
    kind: CfgErrorKind,
}

/// Why a grammar could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CfgErrorKind {
    /// The text is not GBNF.
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected.
        message: String,
    },
    /// A rule is defined twice.
    DuplicateRule {
        /// The rule.
        name: String,
        /// The line of the second definition.
        line: usize,
        /// The line of the first.
        first_line: usize,
    },
    /// A rule is referenced but never defined.
    UndefinedRule {
        /// The rule.
        name: String,
        /// Where it is referenced.
        line: usize,
        /// Column of the reference.
        column: usize,
    },
    /// There is no `root` rule.
    NoRoot,
    /// `root` derives no finite string (every alternative recurses forever or hits an empty
    /// class), so no output could ever be accepted.
    RootUnproductive,
    /// A token terminal `<name>` names no token of the vocabulary.
    UnknownToken {
        /// The name as written (`<|im_end|>`).
        name: String,
        /// 1-based line of its first use.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// A token terminal `<[id]>` names an id the vocabulary does not define.
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// Tokens the vocabulary defines (ids `0..n_tokens`).
        n_tokens: usize,
        /// 1-based line of its first use.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// The lowered grammar exceeds [`CfgConfig::max_grammar_symbols`].
    TooBig {
        /// Symbols needed (so far).
        symbols: usize,
        /// The limit.
        limit: usize,
    },
}

impl CfgError {
    pub(crate) fn new(kind: CfgErrorKind) -> Self {
        CfgError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &CfgErrorKind {
        &self.kind
    }
}

impl fmt::Display for CfgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            CfgErrorKind::Syntax { line, column, message } => {
                write!(f, "grammar syntax error at line {line}, column {column}: {message}")
            }
            CfgErrorKind::DuplicateRule { name, line, first_line } => write!(
                f,
                "rule '{name}' is defined twice (line {first_line} and line {line})"
            ),
            CfgErrorKind::UndefinedRule { name, line, column } => write!(
                f,
                "undefined rule '{name}' referenced at line {line}, column {column}"
            ),
            CfgErrorKind::NoRoot => f.write_str("the grammar has no 'root' rule"),
            CfgErrorKind::UnknownToken { name, line, column } => write!(
                f,
                "token '{name}' at line {line}, column {column} is not a token of the vocabulary"
            ),
            CfgErrorKind::TokenOutOfRange { id, n_tokens, line, column } => write!(
                f,
                "token id {id} at line {line}, column {column} is out of range (the vocabulary defines ids 0..{n_tokens})"
            ),
            CfgErrorKind::RootUnproductive => {
                f.write_str("rule 'root' derives no finite string: the grammar accepts nothing")
            }
            CfgErrorKind::TooBig { symbols, limit } => write!(
                f,
                "grammar too big: {symbols} symbols after lowering repetitions and classes (limit {limit}; \
                 CfgConfig::max_grammar_symbols, `--limit grammar_symbols=N`)"
            ),
        }
    }
}

impl std::error::Error for CfgError {}

/// Validate a GBNF grammar and describe it (what `grammask check` prints): its rules, the
/// unreachable and unproductive ones, and the size of the lowered grammar.
///
/// # Errors
/// Any compile error of [`CfgGrammar::from_gbnf`].
pub fn check(text: &str, config: &CfgConfig) -> Result<GrammarReport, CfgError> {
    Ok(CfgGrammar::from_gbnf(text, config)?.report().clone())
}
