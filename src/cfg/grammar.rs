//! Lowering GBNF to a flat byte-level CFG, and the grammar analysis (undefined, unreachable,
//! unproductive, nullable rules).
//!
//! # Lowering
//! - A literal becomes one terminal per byte; a terminal is a 256-bit byte set.
//! - A character class becomes one terminal when it is pure ASCII, else a helper rule whose
//!   alternatives are the UTF-8 byte-range sequences of its code points (`regex-syntax`'s
//!   `Utf8Sequences`; surrogates excluded), so only well-formed UTF-8 is ever accepted.
//! - `x*` becomes `R ::= ε | R x`, `x+` becomes `R ::= x | R x` (left recursion is what Earley
//!   likes best: constant-size sets per repetition), `x{m,n}` becomes `x`×m followed by a chain of
//!   `n−m` nested optionals.
//! - Groups with alternatives become helper rules.
//! - A token terminal (`<[id]>`, `<name>`, `!<…>`) becomes a terminal with an *empty* byte set,
//!   one per distinct token reference ([`CfgGrammar::token_terms`]): no byte ever scans it, so
//!   the byte-level machinery (trie walk, lexemes, FOLLOW sets, slices) ignores it, and the
//!   engine scans it by token id (see [`super::engine`]). Byte terminals are never empty, so an
//!   empty byte set means a token terminal.
//!
//! # Analysis
//! - An undefined rule is an error naming it; no `root` is an error.
//! - Unproductive rules (deriving no finite string) are a **warning**: their alternatives are
//!   removed, so the Earley sets only hold items that can still complete — which is what makes
//!   "set non-empty" equal "prefix viable", i.e. masks exact. A `root` that is unproductive is an
//!   error (the grammar accepts nothing).
//! - Unreachable rules are a warning (they are kept but never predicted).

use super::gbnf::{self, Expr, Pos, Rule, TokenRef};
use super::lexer::{self, Lexeme};
use super::{CfgConfig, CfgError, CfgErrorKind};
use crate::automaton::DfaConfig;
use crate::bytes::ByteSet;
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;
use std::fmt;

/// A packed symbol of the flat grammar.
pub(crate) const T_FLAG: u32 = 1 << 31;
pub(crate) const END_FLAG: u32 = 1 << 30;
/// Both flags: a lexeme (a regular sub-language run as one DFA, see [`super::lexer`]).
pub(crate) const LEX_FLAG: u32 = T_FLAG | END_FLAG;
const ID_MASK: u32 = END_FLAG - 1;

/// A symbol of a lowered (not yet flattened) right-hand side.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum RSym {
    Nt(u32),
    T(u32),
}

struct NtDef {
    name: String,
    alts: Vec<Vec<RSym>>,
    /// For helper rules of character classes: the code points they match.
    class: Option<Vec<(u32, u32)>>,
}

/// A loop `R ::= R x` whose `x` derives every character of a class: where the item `R → R • x`
/// is in the current Earley set, any token made only of those characters is allowed.
#[derive(Clone, Debug)]
pub(crate) struct Loop {
    /// Flat position of `x` in `R → R x`.
    pub pos: u32,
    /// The code points `x` derives as single characters.
    pub class: Vec<(u32, u32)>,
}

/// A token terminal of the grammar: which token, negated or not, and where it is first written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenTerm {
    /// The token, by id or by name (resolved against a vocabulary by the engine).
    pub token: TokenRef,
    /// `!<…>`: any one token but this one.
    pub negated: bool,
    /// Where it is first written.
    pub pos: Pos,
    /// Its terminal (byte-set) id.
    pub(crate) set: u32,
}

/// One rule of the grammar as written, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleInfo {
    /// Its name.
    pub name: String,
    /// Its definition, printed back.
    pub definition: String,
    /// Line of the definition.
    pub line: usize,
}

/// What `grammask check` prints about a grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrammarReport {
    /// The rules, in order of definition.
    pub rules: Vec<RuleInfo>,
    /// Rules not reachable from `root` (warning).
    pub unreachable: Vec<String>,
    /// Rules that derive no finite string (warning; removed).
    pub unproductive: Vec<String>,
    /// Nonterminals after lowering (helper rules included).
    pub nonterminals: usize,
    /// Productions after lowering.
    pub productions: usize,
    /// Symbols in all right-hand sides after lowering.
    pub symbols: usize,
    /// The token terminals as written (`<|im_end|>`, `!<[12]>`), resolved against a
    /// vocabulary only when an engine is built.
    pub tokens: Vec<String>,
}

impl fmt::Display for GrammarReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} rules:", self.rules.len())?;
        for r in &self.rules {
            writeln!(f, "  {} ::= {}", r.name, r.definition)?;
        }
        if self.unreachable.is_empty() {
            writeln!(f, "unreachable rules: none")?;
        } else {
            writeln!(f, "unreachable rules (warning): {}", self.unreachable.join(", "))?;
        }
        if self.unproductive.is_empty() {
            writeln!(f, "unproductive rules: none")?;
        } else {
            writeln!(f, "unproductive rules (warning, removed): {}", self.unproductive.join(", "))?;
        }
        if !self.tokens.is_empty() {
            writeln!(f, "token terminals: {}", self.tokens.join(", "))?;
        }
        write!(
            f,
            "lowered: {} nonterminals, {} productions, {} symbols",
            self.nonterminals, self.productions, self.symbols
        )
    }
}

/// A compiled grammar: the flat byte-level CFG the Earley recogniser runs. Immutable, shared.
#[derive(Debug)]
pub struct CfgGrammar {
    /// Productions laid out one after another, each followed by `END_FLAG | lhs`.
    pub(crate) syms: Vec<u32>,
    /// Terminal byte sets, indexed by `sym & ID_MASK` for `T_FLAG` symbols.
    pub(crate) sets: Vec<ByteSet>,
    /// Per nonterminal: the flat positions where its productions start.
    pub(crate) alts: Vec<Vec<u32>>,
    pub(crate) nullable: Vec<bool>,
    /// Position of the augmented start production `S' → root`.
    pub(crate) start_pos: u32,
    /// Position of the END of `S' → root` (an item there with origin 0 means "accepted").
    pub(crate) accept_pos: u32,
    pub(crate) loops: Vec<Loop>,
    /// The lexemes, indexed by `sym & ID_MASK` for `LEX_FLAG` symbols.
    pub(crate) lexemes: Vec<Lexeme>,
    /// Per flat position of a lexeme: the bytes that can come right after the lexeme there
    /// (FIRST of the rest of the production, and FOLLOW of its left-hand side where that rest is
    /// nullable). The recogniser defers a lexeme's completion until such a byte is pushed.
    pub(crate) follow: Vec<ByteSet>,
    /// Per flat position: the left-hand side of its production (continuation signatures, see
    /// [`super::earley`]).
    pub(crate) lhs: Vec<u32>,
    /// Per flat position: a hash of the rest of its production from there, left-hand side
    /// included. Two positions with the same rest behave the same, so signatures hash this,
    /// not the position.
    pub(crate) rest_hash: Vec<u64>,
    /// The token terminals, each with its (empty) byte set id.
    pub(crate) tokens: Vec<TokenTerm>,
    /// Per terminal id: its index in `tokens`, or `u32::MAX` for a byte terminal.
    pub(crate) set_token: Vec<u32>,
    names: Vec<String>,
    report: GrammarReport,
}

/// Decoded view of a packed symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sym {
    Nt(u32),
    T(u32),
    End(u32),
    Lex(u32),
}

#[inline(always)]
pub(crate) fn decode(s: u32) -> Sym {
    if s & LEX_FLAG == LEX_FLAG {
        Sym::Lex(s & ID_MASK)
    } else if s & T_FLAG != 0 {
        Sym::T(s & ID_MASK)
    } else if s & END_FLAG != 0 {
        Sym::End(s & ID_MASK)
    } else {
        Sym::Nt(s)
    }
}

struct Lowerer<'a> {
    defs: Vec<NtDef>,
    ids: FxHashMap<&'a str, u32>,
    sets: Vec<ByteSet>,
    set_ids: FxHashMap<ByteSet, u32>,
    class_nts: FxHashMap<Vec<(u32, u32)>, RSym>,
    loops: Vec<(u32, usize, RSym)>,
    tokens: Vec<TokenTerm>,
    symbols: usize,
    limit: usize,
}

fn normalize(mut ranges: Vec<(u32, u32)>, negated: bool) -> Vec<(u32, u32)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    let merged = if negated {
        let mut out = Vec::new();
        let mut next = 0u32;
        for (lo, hi) in merged {
            if lo > next {
                out.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= 0x10FFFF {
            out.push((next, 0x10FFFF));
        }
        out
    } else {
        merged
    };
    // Surrogates are not characters: cut them out.
    let mut out = Vec::new();
    for (lo, hi) in merged {
        let hi = hi.min(0x10FFFF);
        if lo > hi {
            continue;
        }
        if hi < 0xD800 || lo > 0xDFFF {
            out.push((lo, hi));
        } else {
            if lo < 0xD800 {
                out.push((lo, 0xD7FF));
            }
            if hi > 0xDFFF {
                out.push((0xE000, hi));
            }
        }
    }
    out
}

impl<'a> Lowerer<'a> {
    fn count(&mut self, n: usize) -> Result<(), CfgError> {
        self.symbols += n;
        if self.symbols > self.limit {
            return Err(CfgError::new(CfgErrorKind::TooBig {
                symbols: self.symbols,
                limit: self.limit,
            }));
        }
        Ok(())
    }

    fn set(&mut self, s: ByteSet) -> RSym {
        let n = self.sets.len() as u32;
        let id = *self.set_ids.entry(s).or_insert_with(|| n);
        if id == n {
            self.sets.push(s);
        }
        RSym::T(id)
    }

    fn helper(&mut self, name: String, alts: Vec<Vec<RSym>>) -> Result<u32, CfgError> {
        let n: usize = alts.iter().map(|a| a.len() + 1).sum();
        self.count(n)?;
        self.defs.push(NtDef { name, alts, class: None });
        Ok(self.defs.len() as u32 - 1)
    }

    fn class(&mut self, ranges: Vec<(u32, u32)>) -> Result<RSym, CfgError> {
        if let Some(&s) = self.class_nts.get(&ranges) {
            return Ok(s);
        }
        let mut ascii = ByteSet::EMPTY;
        let mut multi: Vec<Vec<RSym>> = Vec::new();
        for &(lo, hi) in &ranges {
            let (lo, hi) =
                (char::from_u32(lo).expect("normalized"), char::from_u32(hi).expect("normalized"));
            for seq in Utf8Sequences::new(lo, hi) {
                let rs = seq.as_slice();
                if rs.len() == 1 {
                    ascii.union_with(&ByteSet::from_range(rs[0].start, rs[0].end));
                } else {
                    let mut alt = Vec::with_capacity(rs.len());
                    for r in rs {
                        alt.push(self.set(ByteSet::from_range(r.start, r.end)));
                    }
                    multi.push(alt);
                }
            }
        }
        let sym = if multi.is_empty() && !ascii.is_empty() {
            self.count(1)?;
            self.set(ascii)
        } else {
            let mut alts = Vec::new();
            if !ascii.is_empty() {
                alts.push(vec![self.set(ascii)]);
            }
            alts.extend(multi);
            let id = self.helper(format!("<class{}>", self.defs.len()), alts)?;
            self.defs[id as usize].class = Some(ranges.clone());
            RSym::Nt(id)
        };
        self.class_nts.insert(ranges, sym);
        Ok(sym)
    }

    /// `A (B A)*` at `items[i..]` (B not empty) lowered as one left-recursive list
    /// `L ::= A | L B A`, or `None` when the items there are not of that form.
    ///
    /// The language is the same as `A` then a repetition of `B A`, but every `A` now sits at
    /// the end of an `L` production, so an `A` completes into the same continuation whether it
    /// is the first element or a later one: the chart signatures (see [`super::earley`]) of
    /// the first member of a JSON object and of the others are then equal, and so are their
    /// cached masks.
    fn list(&mut self, items: &[Expr], i: usize, owner: &str) -> Result<Option<RSym>, CfgError> {
        let Some(Expr::Repeat { expr, min: 0, max: None }) = items.get(i + 1) else {
            return Ok(None);
        };
        let inner = match &**expr {
            Expr::Alt(alts) if alts.len() == 1 => &alts[0],
            e => e,
        };
        let Expr::Seq(rep) = inner else { return Ok(None) };
        let Some((last, sep)) = rep.split_last() else { return Ok(None) };
        if sep.is_empty() || !same_expr(last, &items[i]) {
            return Ok(None);
        }
        let a = self.seq(&items[i], owner)?;
        let mut b = Vec::new();
        for e in sep {
            b.extend(self.seq(e, owner)?);
        }
        let id = self.defs.len() as u32;
        let mut rec = vec![RSym::Nt(id)];
        rec.extend(b);
        rec.extend_from_slice(&a);
        let id2 = self.helper(format!("<{owner}-list>"), vec![a, rec])?;
        debug_assert_eq!(id, id2);
        Ok(Some(RSym::Nt(id)))
    }

    /// Lower `e` to a sequence of symbols.
    fn seq(&mut self, e: &Expr, owner: &str) -> Result<Vec<RSym>, CfgError> {
        Ok(match e {
            Expr::Seq(items) => {
                let mut out = Vec::new();
                let mut i = 0;
                while i < items.len() {
                    if let Some(list) = self.list(items, i, owner)? {
                        out.push(list);
                        i += 2;
                    } else {
                        out.extend(self.seq(&items[i], owner)?);
                        i += 1;
                    }
                }
                out
            }
            Expr::Alt(alts) => {
                let mut lowered = Vec::new();
                for a in alts {
                    lowered.push(self.seq(a, owner)?);
                }
                vec![RSym::Nt(self.helper(format!("<{owner}-group>"), lowered)?)]
            }
            Expr::Literal(bytes) => {
                self.count(bytes.len())?;
                bytes.iter().map(|&b| self.set(ByteSet::of(&[b]))).collect()
            }
            Expr::Class { ranges, negated } => {
                let r = normalize(ranges.clone(), *negated);
                if r.is_empty() {
                    // An empty class matches nothing: an unproductive helper.
                    vec![RSym::Nt(self.helper(format!("<{owner}-empty-class>"), Vec::new())?)]
                } else {
                    vec![self.class(r)?]
                }
            }
            Expr::Any => vec![self.class(vec![(0, 0xD7FF), (0xE000, 0x10FFFF)])?],
            Expr::Token { token, negated, pos } => {
                self.count(1)?;
                // Not deduplicated with the byte sets: each token reference is its own
                // (empty) terminal.
                let found = self.tokens.iter().find(|t| t.token == *token && t.negated == *negated);
                let set = match found {
                    Some(t) => t.set,
                    None => {
                        let set = self.sets.len() as u32;
                        self.sets.push(ByteSet::EMPTY);
                        self.tokens.push(TokenTerm {
                            token: token.clone(),
                            negated: *negated,
                            pos: *pos,
                            set,
                        });
                        set
                    }
                };
                vec![RSym::T(set)]
            }
            Expr::Ref { name, pos } => match self.ids.get(name.as_str()) {
                Some(&id) => vec![RSym::Nt(id)],
                None => {
                    return Err(CfgError::new(CfgErrorKind::UndefinedRule {
                        name: name.clone(),
                        line: pos.line,
                        column: pos.column,
                    }))
                }
            },
            Expr::Repeat { expr, min, max } => {
                let inner = self.seq(expr, owner)?;
                let x = if inner.len() == 1 {
                    inner[0]
                } else {
                    RSym::Nt(self.helper(format!("<{owner}-item>"), vec![inner])?)
                };
                let (min, max) = (*min as usize, max.map(|m| m as usize));
                let mut out = Vec::new();
                match max {
                    None => {
                        let fixed = min.saturating_sub(1);
                        self.count(fixed)?;
                        out.extend(std::iter::repeat_n(x, fixed));
                        let id = self.defs.len() as u32;
                        let first = if min == 0 { Vec::new() } else { vec![x] };
                        let id2 = self
                            .helper(format!("<{owner}-rep>"), vec![first, vec![RSym::Nt(id), x]])?;
                        debug_assert_eq!(id, id2);
                        self.loops.push((id, 1, x));
                        out.push(RSym::Nt(id));
                    }
                    Some(max) => {
                        self.count(min)?;
                        out.extend(std::iter::repeat_n(x, min));
                        // Optional chain: O_1 ::= ε | x ; O_k ::= ε | x O_{k-1}.
                        let mut tail: Option<u32> = None;
                        for _ in 0..max - min {
                            let mut alt = vec![x];
                            if let Some(t) = tail {
                                alt.push(RSym::Nt(t));
                            }
                            tail =
                                Some(self.helper(format!("<{owner}-opt>"), vec![Vec::new(), alt])?);
                        }
                        if let Some(t) = tail {
                            out.push(RSym::Nt(t));
                        }
                    }
                }
                out
            }
        })
    }
}

/// Are `a` and `b` the same expression (where they are written aside)?
fn same_expr(a: &Expr, b: &Expr) -> bool {
    match (a, b) {
        (Expr::Alt(x), Expr::Alt(y)) | (Expr::Seq(x), Expr::Seq(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_expr(p, q))
        }
        (Expr::Literal(x), Expr::Literal(y)) => x == y,
        (Expr::Class { ranges: r, negated: n }, Expr::Class { ranges: r2, negated: n2 }) => {
            r == r2 && n == n2
        }
        (Expr::Any, Expr::Any) => true,
        (Expr::Ref { name: x, .. }, Expr::Ref { name: y, .. }) => x == y,
        (Expr::Token { token: t, negated: n, .. }, Expr::Token { token: t2, negated: n2, .. }) => {
            t == t2 && n == n2
        }
        (Expr::Repeat { expr: e, min: m, max: x }, Expr::Repeat { expr: e2, min: m2, max: x2 }) => {
            m == m2 && x == x2 && same_expr(e, e2)
        }
        _ => false,
    }
}

fn class_of(defs: &[NtDef], sets: &[ByteSet], s: RSym, depth: u32) -> Vec<(u32, u32)> {
    match s {
        RSym::T(id) => {
            let set = &sets[id as usize];
            let mut out: Vec<(u32, u32)> = Vec::new();
            for b in set.iter().take_while(|&b| b < 0x80) {
                out.push((b as u32, b as u32));
            }
            normalize(out, false)
        }
        RSym::Nt(id) => {
            let d = &defs[id as usize];
            if let Some(c) = &d.class {
                return c.clone();
            }
            if depth == 0 {
                return Vec::new();
            }
            let mut out = Vec::new();
            for a in &d.alts {
                if a.len() == 1 {
                    out.extend(class_of(defs, sets, a[0], depth - 1));
                }
            }
            normalize(out, false)
        }
    }
}

impl CfgGrammar {
    /// Does the grammar accept the whole of `text`? The engine's own Earley recogniser, run on
    /// bytes, with at most `max_items` items per set (`false` past it).
    pub fn accepts(&self, text: &[u8], max_items: usize) -> bool {
        super::earley::accepts(self, text, max_items)
    }

    /// Parse and compile GBNF text.
    ///
    /// # Errors
    /// Syntax errors, undefined or duplicate rules, no `root`, an unproductive `root`, a lowered
    /// grammar above [`CfgConfig::max_grammar_symbols`].
    pub fn from_gbnf(text: &str, config: &CfgConfig) -> Result<CfgGrammar, CfgError> {
        let rules = gbnf::parse(text)?;
        Self::from_rules(&rules, config)
    }

    /// Compile parsed rules.
    ///
    /// # Errors
    /// As [`CfgGrammar::from_gbnf`], syntax aside.
    pub fn from_rules(rules: &[Rule], config: &CfgConfig) -> Result<CfgGrammar, CfgError> {
        let root = rules
            .iter()
            .position(|r| r.name == "root")
            .ok_or(CfgError::new(CfgErrorKind::NoRoot))?;
        let mut lw = Lowerer {
            defs: rules
                .iter()
                .map(|r| NtDef { name: r.name.clone(), alts: Vec::new(), class: None })
                .collect(),
            ids: rules.iter().enumerate().map(|(i, r)| (r.name.as_str(), i as u32)).collect(),
            sets: Vec::new(),
            set_ids: FxHashMap::default(),
            class_nts: FxHashMap::default(),
            loops: Vec::new(),
            tokens: Vec::new(),
            symbols: 0,
            limit: config.max_grammar_symbols,
        };
        for (i, r) in rules.iter().enumerate() {
            let alts: Vec<&Expr> = match &r.expr {
                Expr::Alt(a) => a.iter().collect(),
                e => vec![e],
            };
            let mut lowered = Vec::new();
            for a in alts {
                let s = lw.seq(a, &r.name)?;
                lw.count(s.len() + 1)?;
                lowered.push(s);
            }
            lw.defs[i].alts = lowered;
        }
        let n_user = rules.len();
        let Lowerer { mut defs, sets, loops, tokens, .. } = lw;
        let mut set_token = vec![u32::MAX; sets.len()];
        for (k, t) in tokens.iter().enumerate() {
            set_token[t.set as usize] = k as u32;
        }
        let n = defs.len();

        // Productive nonterminals (least fixpoint).
        let mut productive = vec![false; n];
        loop {
            let mut changed = false;
            for i in 0..n {
                if !productive[i]
                    && defs[i].alts.iter().any(|a| {
                        a.iter().all(|s| match s {
                            RSym::T(_) => true,
                            RSym::Nt(j) => productive[*j as usize],
                        })
                    })
                {
                    productive[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if !productive[root] {
            return Err(CfgError::new(CfgErrorKind::RootUnproductive));
        }
        let unproductive: Vec<String> =
            (0..n_user).filter(|&i| !productive[i]).map(|i| defs[i].name.clone()).collect();
        // Remove alternatives that mention an unproductive symbol (remembering loop indices).
        let mut loop_alive: FxHashMap<(u32, usize), bool> = FxHashMap::default();
        let mut alt_map: Vec<Vec<Option<usize>>> = Vec::with_capacity(n);
        for d in defs.iter_mut() {
            let mut map = Vec::with_capacity(d.alts.len());
            let mut kept = Vec::new();
            for a in std::mem::take(&mut d.alts) {
                if a.iter().all(|s| match s {
                    RSym::T(_) => true,
                    RSym::Nt(j) => productive[*j as usize],
                }) {
                    map.push(Some(kept.len()));
                    kept.push(a);
                } else {
                    map.push(None);
                }
            }
            d.alts = kept;
            alt_map.push(map);
        }
        for &(nt, alt, _) in &loops {
            loop_alive
                .insert((nt, alt), alt_map[nt as usize].get(alt).copied().flatten().is_some());
        }

        // Reachability from root.
        let mut reachable = vec![false; n];
        let mut work = vec![root];
        reachable[root] = true;
        while let Some(i) = work.pop() {
            for a in &defs[i].alts {
                for s in a {
                    if let RSym::Nt(j) = *s {
                        if !reachable[j as usize] {
                            reachable[j as usize] = true;
                            work.push(j as usize);
                        }
                    }
                }
            }
        }
        let unreachable: Vec<String> = (0..n_user)
            .filter(|&i| !reachable[i] && productive[i])
            .map(|i| defs[i].name.clone())
            .collect();

        // Nullable nonterminals.
        let mut nullable = vec![false; n + 1];
        loop {
            let mut changed = false;
            for i in 0..n {
                if !nullable[i]
                    && defs[i].alts.iter().any(|a| {
                        a.iter().all(|s| matches!(s, RSym::Nt(j) if nullable[*j as usize]))
                    })
                {
                    nullable[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        nullable[n] = nullable[root];

        // The lexical level: maximal regular sub-rules become DFAs.
        let (lex_of, lexemes) = if config.lexer {
            let rhs: Vec<Vec<Vec<RSym>>> = defs.iter().map(|d| d.alts.clone()).collect();
            let dfa_config = DfaConfig {
                max_states: config.max_lexeme_states,
                max_memory: config.max_lexeme_states.saturating_mul(4096).max(1 << 20),
                // Equivalent lexeme states then share one id: chart signatures and
                // lexeme-state slices see "after `1`" and "after `10`" as the same state.
                minimize: true,
                ..DfaConfig::default()
            };
            lexer::build(&rhs, &sets, root, &dfa_config, config.max_lexer_work as u64)
        } else {
            (vec![None; n], Vec::new())
        };

        // Flatten. Nonterminal n is the augmented start S' → root.
        let mut syms = Vec::new();
        let mut alts: Vec<Vec<u32>> = vec![Vec::new(); n + 1];
        let pack = |s: &RSym| match *s {
            RSym::Nt(j) => match lex_of[j as usize] {
                Some(l) => LEX_FLAG | l,
                None => j,
            },
            RSym::T(t) => T_FLAG | t,
        };
        let mut alt_pos: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, d) in defs.iter().enumerate() {
            for a in &d.alts {
                let p = syms.len() as u32;
                alts[i].push(p);
                alt_pos[i].push(p);
                syms.extend(a.iter().map(pack));
                syms.push(END_FLAG | i as u32);
            }
        }
        let start_pos = syms.len() as u32;
        alts[n].push(start_pos);
        syms.push(pack(&RSym::Nt(root as u32)));
        syms.push(END_FLAG | n as u32);
        let accept_pos = start_pos + 1;

        let mut flat_loops = Vec::new();
        for &(nt, alt, x) in &loops {
            if !loop_alive[&(nt, alt)] || !reachable[nt as usize] {
                continue;
            }
            let Some(k) = alt_map[nt as usize][alt] else { continue };
            let class = class_of(&defs, &sets, x, 2);
            if class.is_empty() {
                continue;
            }
            flat_loops.push(Loop { pos: alt_pos[nt as usize][k] + 1, class });
        }

        let follow = lexer::follow_sets(&syms, &sets, &lexemes, &alts, &nullable);
        let mut lhs = vec![0; syms.len()];
        let mut rest_hash = vec![0u64; syms.len()];
        let (mut cur, mut h) = (0, 0u64);
        for (p, &s) in syms.iter().enumerate().rev() {
            if let Sym::End(a) = decode(s) {
                cur = a;
                h = 0;
            }
            lhs[p] = cur;
            h = crate::cfg::earley::mix(h.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(s));
            rest_hash[p] = h;
        }
        let productions: usize = alts.iter().map(Vec::len).sum();
        let report = GrammarReport {
            rules: rules
                .iter()
                .map(|r| RuleInfo {
                    name: r.name.clone(),
                    definition: r.expr.to_string(),
                    line: r.pos.line,
                })
                .collect(),
            unreachable,
            unproductive,
            nonterminals: n + 1,
            productions,
            symbols: syms.len() - productions,
            tokens: tokens
                .iter()
                .map(|t| format!("{}{}", if t.negated { "!" } else { "" }, t.token))
                .collect(),
        };
        let mut names: Vec<String> = defs.into_iter().map(|d| d.name).collect();
        names.push("<start>".into());
        Ok(CfgGrammar {
            syms,
            sets,
            alts,
            nullable,
            start_pos,
            accept_pos,
            loops: flat_loops,
            lexemes,
            follow,
            lhs,
            rest_hash,
            tokens,
            set_token,
            names,
            report,
        })
    }

    /// The analysis report (rules, unreachable, unproductive, sizes).
    pub fn report(&self) -> &GrammarReport {
        &self.report
    }

    /// Name of nonterminal `id` (helper rules are named `<…>`).
    pub fn nonterminal_name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Number of lexemes: regular sub-rules run as one DFA each (see the `lexer` module).
    pub fn lexeme_count(&self) -> usize {
        self.lexemes.len()
    }

    /// The rules that became lexemes, by name (helper rules are named `<…>`).
    pub fn lexeme_names(&self) -> Vec<&str> {
        self.lexemes.iter().map(|l| self.names[l.nt as usize].as_str()).collect()
    }

    /// The token terminals (`<[id]>`, `<name>`, `!<…>`), one per distinct reference.
    pub fn token_terms(&self) -> &[TokenTerm] {
        &self.tokens
    }

    /// Is terminal `set` a token terminal? Returns its index in [`CfgGrammar::token_terms`].
    #[inline]
    pub(crate) fn token_term(&self, set: u32) -> Option<usize> {
        match self.set_token[set as usize] {
            u32::MAX => None,
            k => Some(k as usize),
        }
    }

    /// Number of terminal byte sets.
    pub fn terminal_count(&self) -> usize {
        self.sets.len()
    }
}
