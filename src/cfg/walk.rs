//! The trie walker's view of an Earley chart ([`EarleyWalk`]), with a fast path for runs of
//! bytes inside lexemes.
//!
//! A push normally appends one Earley set to the chart (scan, close, bookkeeping) and a pop
//! truncates it. But most of a mask's trie walk happens inside a lexeme — the characters of a
//! JSON string, an identifier, a number — where the set is *pure*: every item that can scan is
//! before one of a few lexemes, each in one DFA state (a string body: one item; an identifier
//! at a statement start: the rules that begin with `ident`; a name that is both a `column` and
//! an `operand`: two lexemes). Pushing a byte there only moves those DFA states (a lexeme that
//! cannot take the byte drops out), and the set after it is again pure with the same items;
//! the deferred completions (see [`super::earley`]) only matter for bytes in a lexeme's FOLLOW
//! set. So such pushes are *virtual*: a stack of DFA states above the chart's last set, one
//! table step per lexeme. The first push that leaves the run — a byte that would complete a
//! lexeme (in its FOLLOW set while accepting) or end it (a state with no way on) — makes the
//! run real and then pushes normally. Making it real builds only the set after the run (the
//! pure set's items with the run's final DFA states: what pushing every byte would have made)
//! and empty placeholder sets for the bytes before it ([`Chart::push_run`]); a pop that lands
//! on a placeholder turns the rest of the run virtual again, so no walk ever pushes from one.
//! Pops take virtual bytes first.
//!
//! A committed set whose byte left its items inside lexemes is pure too, though its deferred
//! completions were made when it was committed: what those completions can scan is in the
//! lexemes' FOLLOW sets, where a run is left anyway ([`pure_of`]).

use super::earley::Chart;
use super::grammar::{decode, CfgGrammar, Sym};
use crate::bytes::ByteSet;
use crate::recognizer::Recognizer;

/// Most lexemes a virtual run steps in lockstep (the same bytes read as an identifier and as a
/// keyword, as a column and as an operand, as whitespace before either).
const MAX_LEXES: usize = 4;
/// A lexeme of the run that has died (its items are gone).
const DEAD: u32 = u32::MAX;

/// The lexeme run a pure set allows: its lexemes (at most [`MAX_LEXES`]), their DFA states in
/// the set, and per lexeme the union of the FOLLOW sets of its items.
#[derive(Clone, Copy)]
struct Pure {
    n: usize,
    lex: [u32; MAX_LEXES],
    st: [u32; MAX_LEXES],
    follow: [ByteSet; MAX_LEXES],
}

impl Pure {
    fn empty() -> Pure {
        Pure {
            n: 0,
            lex: [0; MAX_LEXES],
            st: [DEAD; MAX_LEXES],
            follow: [ByteSet::EMPTY; MAX_LEXES],
        }
    }

    /// Add an item before lexeme `l` in state `st` at flat position `pos`; `false` when the set
    /// cannot be pure (a completion that is not deferred, or too many lexemes).
    fn add(&mut self, g: &CfgGrammar, l: u32, st: u32, pos: u32) -> bool {
        let f = &g.follow[pos as usize];
        // An empty FOLLOW set means the completion is not deferred (see earley).
        if f.is_empty() {
            return false;
        }
        for i in 0..self.n {
            if self.lex[i] == l && self.st[i] == st {
                self.follow[i].union_with(f);
                return true;
            }
        }
        if self.n == MAX_LEXES {
            return false;
        }
        (self.lex[self.n], self.st[self.n], self.follow[self.n]) = (l, st, *f);
        self.n += 1;
        true
    }
}

/// Is the chart's last set pure (see the module docs)? Either every item that can scan is
/// before one of at most [`MAX_LEXES`] lexemes, one DFA state each, or — a committed set,
/// whose deferred completions were made — every item of its *kernel* (the items its byte
/// made) is, and the others are those completions: all they can scan is in the lexemes'
/// FOLLOW sets, where a walk leaves the virtual run anyway.
fn pure_of(g: &CfgGrammar, chart: &Chart) -> Option<Pure> {
    let mut p = Pure::empty();
    let mut all = true;
    for it in chart.last() {
        all &= match decode(g.syms[it.pos as usize]) {
            Sym::T(_) => false,
            Sym::Lex(l) => p.add(g, l, it.st, it.pos),
            Sym::Nt(_) | Sym::End(_) => true,
        };
        if !all {
            break;
        }
    }
    if all {
        return (p.n > 0).then_some(p);
    }
    let mut p = Pure::empty();
    for it in chart.last_kernel() {
        let Sym::Lex(l) = decode(g.syms[it.pos as usize]) else { return None };
        if !p.add(g, l, it.st, it.pos) {
            return None;
        }
    }
    (p.n > 0).then_some(p)
}

/// The lexeme and DFA state of the chart's last set, when it is pure with one lexeme (the
/// engine's lexeme-state slices apply then, see `PureExits`).
pub(crate) fn pure_lexeme(g: &CfgGrammar, chart: &Chart) -> Option<(u32, u32)> {
    pure_of(g, chart).filter(|p| p.n == 1).map(|p| (p.lex[0], p.st[0]))
}

/// The trie walker's view of a chart (see the module docs).
pub(crate) struct EarleyWalk<'a> {
    g: &'a CfgGrammar,
    chart: &'a mut Chart,
    /// Virtual pushes above the chart's last set: (byte, DFA state after it) — with one lexeme
    /// in the pure set; with several, the state is 0 and `vstates` holds every lexeme's state
    /// after each push (`pure.n` per push, [`DEAD`] for one that dropped out).
    virt: Vec<(u8, u32)>,
    vstates: Vec<u32>,
    /// Whether the chart's last set is pure, and the bytes it can take (`scan`, its deferred
    /// completions' FOLLOW bytes included); valid when `pure_for` is the set count.
    pure: Option<Pure>,
    scan: ByteSet,
    pure_for: usize,
    /// Runs turned into real sets ([`Chart::push_run`]), innermost last: popping back onto one
    /// of their placeholder sets turns the rest of the run virtual again.
    runs: Vec<Run>,
    /// The pushes of all runs, back to back (as in `virt` and `vstates`).
    run_store: Vec<(u8, u32)>,
    run_states: Vec<u32>,
    /// (lexeme, state in the pure set, state after the run) for [`Chart::push_run`] (reused).
    moves: Vec<(u32, u32, u32)>,
    /// See [`Recognizer::stay_set`].
    stay: ByteSet,
}

/// A run of virtual pushes made real: the set count before it, where its pushes are in
/// `run_store` and `run_states`, its pure set.
struct Run {
    base: usize,
    from: usize,
    states_from: usize,
    len: usize,
    pure: Pure,
}

impl<'a> EarleyWalk<'a> {
    pub(crate) fn new(g: &'a CfgGrammar, chart: &'a mut Chart) -> Self {
        EarleyWalk {
            g,
            chart,
            virt: Vec::with_capacity(64),
            vstates: Vec::new(),
            pure: None,
            scan: ByteSet::EMPTY,
            pure_for: usize::MAX,
            runs: Vec::new(),
            run_store: Vec::new(),
            run_states: Vec::new(),
            moves: Vec::new(),
            stay: ByteSet::EMPTY,
        }
    }

    /// Start the walk inside a virtual run of the last set's lexeme that has reached DFA state
    /// `q` (the last set must be pure with one lexeme, see [`pure_lexeme`]): the
    /// trie then walks what follows such a run (`PureExits` in the engine). The run's
    /// placeholder set stays in the chart once a push made it real: the caller truncates the
    /// chart back afterwards.
    pub(crate) fn enter_run(&mut self, q: u32) {
        self.pure_for = self.chart.set_count();
        self.pure = pure_of(self.g, self.chart);
        self.scan = self.chart.last_scan();
        debug_assert!(self.pure.is_some_and(|p| p.n == 1), "enter_run on an impure set");
        self.virt.push((0, q));
    }

    /// The chart's completions across its boundary so far (see [`Chart::set_boundary`]).
    #[inline(always)]
    pub(crate) fn taint_counts(&self) -> (u32, u32) {
        self.chart.taint_counts()
    }

    /// After the pushes so far, their deferred completions made, is there an item before
    /// lexeme `lex` in DFA state `st`? Virtual pushes are made real first (as the next push
    /// that leaves their run would). `false` when that or the completions overflow (the walk's
    /// next push would overflow too).
    pub(crate) fn settled_has(&mut self, lex: u32, st: u32) -> bool {
        if !self.virt.is_empty() && !self.replay() {
            return false;
        }
        if !self.chart.settle(self.g) {
            return false;
        }
        // The set has more items now and its scannable bytes may be fewer (its deferred bytes
        // were a FOLLOW set): both are read again on the next push.
        self.pure_for = usize::MAX;
        let sym = super::grammar::LEX_FLAG | lex;
        self.chart.last().iter().any(|it| self.g.syms[it.pos as usize] == sym && it.st == st)
    }

    /// After a virtual push of a run over several lexemes (its states on top of `vstates`): the
    /// loop bytes of the live lexeme with the most (a token must stay inside one lexeme for
    /// [`Recognizer::stay_set`] to hold).
    fn multi_stay(&self, p: &Pure) -> ByteSet {
        let top = self.vstates.len();
        let mut best = ByteSet::EMPTY;
        let mut best_n = 0;
        for i in 0..p.n {
            let c = self.vstates[top - p.n + i];
            if c != DEAD {
                let s = self.g.lexemes[p.lex[i] as usize].stay[c as usize];
                let n = s.len();
                if n > best_n {
                    (best, best_n) = (s, n);
                }
            }
        }
        best
    }

    /// Pop `n` real sets (the virtual pushes are gone already), turning a run back into
    /// virtual pushes when the pop lands on one of its placeholder sets.
    #[inline(never)]
    fn pop_real(&mut self, n: usize) {
        self.chart.pop(n);
        self.pure_for = usize::MAX;
        let count = self.chart.set_count();
        while let Some(r) = self.runs.last() {
            if count <= r.base {
                self.run_store.truncate(r.from);
                self.run_states.truncate(r.states_from);
                self.runs.pop();
                continue;
            }
            if count < r.base + r.len {
                // On a placeholder: back to the pure set and virtual pushes.
                let r = self.runs.pop().expect("checked");
                let k = count - r.base;
                self.chart.truncate(r.base);
                self.virt.extend_from_slice(&self.run_store[r.from..r.from + k]);
                if r.pure.n > 1 {
                    self.vstates.extend_from_slice(
                        &self.run_states[r.states_from..r.states_from + k * r.pure.n],
                    );
                }
                self.run_store.truncate(r.from);
                self.run_states.truncate(r.states_from);
                self.pure = Some(r.pure);
                self.scan = self.chart.last_scan();
                self.pure_for = r.base;
            }
            break;
        }
    }

    /// Turn the virtual pushes into real sets (one real set and placeholders, see
    /// [`Chart::push_run`]). `false` (nothing changed) on overflow.
    fn replay(&mut self) -> bool {
        let (Some(pure), Some(&(_, st))) = (self.pure, self.virt.last()) else { return true };
        self.moves.clear();
        if pure.n == 1 {
            self.moves.push((pure.lex[0], pure.st[0], st));
        } else {
            let last = &self.vstates[self.vstates.len() - pure.n..];
            for ((&l, &from), &to) in pure.lex.iter().zip(&pure.st).zip(last) {
                if to != DEAD {
                    self.moves.push((l, from, to));
                }
            }
        }
        let base = self.chart.set_count();
        if !self.chart.push_run(self.g, &self.moves, &self.virt) {
            return false;
        }
        let (from, states_from) = (self.run_store.len(), self.run_states.len());
        self.run_store.extend_from_slice(&self.virt);
        self.run_states.extend_from_slice(&self.vstates);
        self.runs.push(Run { base, from, states_from, len: self.virt.len(), pure });
        self.virt.clear();
        self.vstates.clear();
        true
    }
}

impl Recognizer for EarleyWalk<'_> {
    #[inline]
    fn try_push_byte(&mut self, byte: u8) -> bool {
        let k = self.virt.len();
        // While virtual pushes are stacked, the last set (and its purity) cannot change.
        if k == 0 {
            let n = self.chart.set_count();
            if self.pure_for != n {
                self.pure_for = n;
                self.pure = pure_of(self.g, self.chart);
                self.scan = self.chart.last_scan();
            }
            // Most tries of a walk fail here, on the last set's scannable bytes.
            if !self.scan.contains(byte) {
                return false;
            }
        }
        // Fields of `self.pure` are read in place: copying the whole `Pure` out per byte was
        // a store-forwarding stall on the walk's hottest path.
        if let Some(p) = &self.pure {
            if p.n == 1 {
                let lx = &self.g.lexemes[p.lex[0] as usize];
                let cur = self.virt.last().map_or(p.st[0], |v| v.1);
                if !(lx.accepting(cur) && p.follow[0].contains(byte)) {
                    match lx.next(cur, byte) {
                        // Neither the lexeme nor a completion of it can take the byte.
                        None => return false,
                        Some(x) if lx.continues(x) => {
                            self.virt.push((byte, x));
                            self.stay = lx.stay[x as usize];
                            return true;
                        }
                        Some(_) => {}
                    }
                }
            } else {
                // Several lexemes in lockstep: each steps or drops out; the run is left as
                // soon as one of them would complete or must end.
                let n = p.n;
                let top = self.vstates.len();
                let (mut alive, mut leave) = (false, false);
                for i in 0..n {
                    let c = if k == 0 { p.st[i] } else { self.vstates[top - n + i] };
                    let mut next = DEAD;
                    if c != DEAD {
                        let lx = &self.g.lexemes[p.lex[i] as usize];
                        if lx.accepting(c) && p.follow[i].contains(byte) {
                            leave = true;
                            break;
                        }
                        match lx.next(c, byte) {
                            None => {}
                            Some(x) if lx.continues(x) => {
                                next = x;
                                alive = true;
                            }
                            Some(_) => {
                                leave = true;
                                break;
                            }
                        }
                    }
                    self.vstates.push(next);
                }
                if !leave {
                    if alive {
                        self.virt.push((byte, 0));
                        self.stay = self.multi_stay(p);
                    } else {
                        self.vstates.truncate(top);
                    }
                    return alive;
                }
                self.vstates.truncate(top);
            }
            if !self.replay() {
                return false;
            }
        }
        // The last set changes (or a replay changed it): forget its purity.
        self.pure_for = usize::MAX;
        self.stay = ByteSet::EMPTY;
        self.chart.push(self.g, byte)
    }

    /// The bytes the next push could take: the last set's scannable bytes, or inside a
    /// virtual run the lexemes' live bytes (plus their FOLLOW bytes where they may end). Lets
    /// the trie skip the other children without a call each.
    #[inline(always)]
    fn byte_superset(&self) -> ByteSet {
        match (self.virt.last(), &self.pure) {
            (Some(&(_, cur)), Some(p)) if p.n == 1 => {
                let lx = &self.g.lexemes[p.lex[0] as usize];
                let s = lx.first[cur as usize];
                if lx.accepting(cur) {
                    s.union(&p.follow[0])
                } else {
                    s
                }
            }
            (Some(_), Some(p)) => {
                let top = self.vstates.len();
                let mut s = ByteSet::EMPTY;
                for i in 0..p.n {
                    let c = self.vstates[top - p.n + i];
                    if c == DEAD {
                        continue;
                    }
                    let lx = &self.g.lexemes[p.lex[i] as usize];
                    s.union_with(&lx.first[c as usize]);
                    if lx.accepting(c) {
                        s.union_with(&p.follow[i]);
                    }
                }
                s
            }
            _ => self.chart.last_scan(),
        }
    }

    /// After a virtual push, the bytes that loop on the state of its (one live) lexeme: its
    /// items stay alive on any string of them, whatever completions the run might also allow.
    /// Set by `try_push_byte`, cleared by `pop_bytes` (none: always correct).
    #[inline(always)]
    fn stay_set(&self) -> ByteSet {
        self.stay
    }

    #[inline(always)]
    fn pop_bytes(&mut self, n: usize) {
        self.stay = ByteSet::EMPTY;
        let v = n.min(self.virt.len());
        self.virt.truncate(self.virt.len() - v);
        if v > 0 {
            if let Some(p) = &self.pure {
                if p.n > 1 {
                    self.vstates.truncate(self.vstates.len() - v * p.n);
                }
            }
        }
        if n > v {
            self.pop_real(n - v);
        }
    }
}
