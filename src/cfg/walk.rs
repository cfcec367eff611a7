//! The trie walker's view of an Earley chart ([`EarleyWalk`]), with a fast path for runs of
//! bytes inside one lexeme.
//!
//! A push normally appends one Earley set to the chart (scan, close, bookkeeping) and a pop
//! truncates it. But most of a mask's trie walk happens inside a lexeme — the characters of a
//! JSON string, an identifier, a number — where the set is *pure*: every item that can scan is
//! before the same lexeme in the same DFA state (a string body: one item; an identifier at a
//! statement start: the four rules that begin with `ident`). Pushing a byte there only moves
//! that DFA state, and the set after it is again pure with the same items; the deferred
//! completions (see [`super::earley`]) only matter for bytes in the lexeme's FOLLOW set. So
//! such pushes are *virtual*: a stack of DFA states above the chart's last set, one table step
//! each. The first push that leaves the run — a byte that would complete the lexeme (in the
//! FOLLOW set while accepting) or end it (a state with no way on) — makes the run real and then
//! pushes normally. Making it real builds only the set after the run (the pure set's items with
//! the run's final DFA state: what pushing every byte would have made) and empty placeholder
//! sets for the bytes before it ([`Chart::push_run`]); a pop that lands on a placeholder turns
//! the rest of the run virtual again, so no walk ever pushes from one. Pops take virtual bytes
//! first.

use super::earley::Chart;
use super::grammar::{decode, set_has, ByteSet, CfgGrammar, Sym};
use crate::recognizer::Recognizer;

/// The lexeme run a pure set allows: the lexeme, its DFA state in the set, and the union of
/// the FOLLOW sets of its items.
#[derive(Clone, Copy)]
struct Pure {
    lex: u32,
    st: u32,
    follow: ByteSet,
}

/// The trie walker's view of a chart (see the module docs).
pub(crate) struct EarleyWalk<'a> {
    g: &'a CfgGrammar,
    chart: &'a mut Chart,
    /// Virtual pushes above the chart's last set: (byte, DFA state after it).
    virt: Vec<(u8, u32)>,
    /// Whether the chart's last set is pure, and the bytes it can take (`scan`, its deferred
    /// completions' FOLLOW bytes included); valid when `pure_for` is the set count.
    pure: Option<Pure>,
    scan: ByteSet,
    pure_for: usize,
    /// Runs turned into real sets ([`Chart::push_run`]), innermost last: popping back onto one
    /// of their placeholder sets turns the rest of the run virtual again.
    runs: Vec<Run>,
    /// The pushes of all runs, back to back.
    run_store: Vec<(u8, u32)>,
}

/// A run of virtual pushes made real: the set count before it, where its pushes are in
/// `run_store`, its pure set.
struct Run {
    base: usize,
    from: usize,
    len: usize,
    pure: Pure,
}

impl<'a> EarleyWalk<'a> {
    pub(crate) fn new(g: &'a CfgGrammar, chart: &'a mut Chart) -> Self {
        EarleyWalk {
            g,
            chart,
            virt: Vec::with_capacity(64),
            pure: None,
            scan: [0; 4],
            pure_for: usize::MAX,
            runs: Vec::new(),
            run_store: Vec::new(),
        }
    }

    /// The lexeme and DFA state of the chart's last set, when it is pure.
    pub(crate) fn pure_lexeme(&self) -> Option<(u32, u32)> {
        self.compute_pure().map(|p| (p.lex, p.st))
    }

    /// Start the walk inside a virtual run of the last set's lexeme that has reached DFA state
    /// `q` (the last set must be pure, see [`EarleyWalk::pure_lexeme`]): the trie then walks
    /// what follows such a run (`PureExits` in the engine). The run's placeholder set stays in
    /// the chart once a push made it real: the caller truncates the chart back afterwards.
    pub(crate) fn enter_run(&mut self, q: u32) {
        self.pure_for = self.chart.set_count();
        self.pure = self.compute_pure();
        self.scan = self.chart.last_scan();
        debug_assert!(self.pure.is_some(), "enter_run on an impure set");
        self.virt.push((0, q));
    }

    /// Is the chart's last set pure (see the module docs)?
    fn compute_pure(&self) -> Option<Pure> {
        let g = self.g;
        let mut p: Option<Pure> = None;
        for it in self.chart.last() {
            match decode(g.syms[it.pos as usize]) {
                Sym::T(_) => return None,
                Sym::Lex(l) => {
                    let f = &g.follow[it.pos as usize];
                    // An empty FOLLOW set means the completion is not deferred (see earley).
                    if *f == [0; 4] {
                        return None;
                    }
                    match &mut p {
                        None => p = Some(Pure { lex: l, st: it.st, follow: *f }),
                        Some(q) if q.lex == l && q.st == it.st => {
                            for (a, b) in q.follow.iter_mut().zip(f) {
                                *a |= b;
                            }
                        }
                        Some(_) => return None,
                    }
                }
                Sym::Nt(_) | Sym::End(_) => {}
            }
        }
        p
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
                self.runs.pop();
                continue;
            }
            if count < r.base + r.len {
                // On a placeholder: back to the pure set and virtual pushes.
                let r = self.runs.pop().expect("checked");
                self.chart.truncate(r.base);
                self.virt.extend_from_slice(&self.run_store[r.from..r.from + count - r.base]);
                self.run_store.truncate(r.from);
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
        if self.virt.is_empty() {
            return true;
        }
        let (Some(pure), Some(&(_, st))) = (self.pure, self.virt.last()) else { return true };
        let base = self.chart.set_count();
        if !self.chart.push_run(self.g, &self.virt, st) {
            return false;
        }
        let from = self.run_store.len();
        self.run_store.extend_from_slice(&self.virt);
        self.runs.push(Run { base, from, len: self.virt.len(), pure });
        self.virt.clear();
        true
    }
}

impl Recognizer for EarleyWalk<'_> {
    #[inline]
    fn try_push_byte(&mut self, byte: u8) -> bool {
        // While virtual pushes are stacked, the last set (and its purity) cannot change.
        if self.virt.is_empty() {
            let n = self.chart.set_count();
            if self.pure_for != n {
                self.pure_for = n;
                self.pure = self.compute_pure();
                self.scan = self.chart.last_scan();
            }
            // Most tries of a walk fail here, on the last set's scannable bytes.
            if !set_has(&self.scan, byte) {
                return false;
            }
        }
        // Fields of `self.pure` are read in place: copying the whole `Pure` out per byte was
        // a store-forwarding stall on the walk's hottest path.
        if let Some(p) = &self.pure {
            let lx = &self.g.lexemes[p.lex as usize];
            let cur = self.virt.last().map_or(p.st, |v| v.1);
            if !(lx.accepting(cur) && set_has(&p.follow, byte)) {
                match lx.next(cur, byte) {
                    // Neither the lexeme nor a completion of it can take the byte.
                    None => return false,
                    Some(n) if lx.continues(n) => {
                        self.virt.push((byte, n));
                        return true;
                    }
                    Some(_) => {}
                }
            }
            if !self.replay() {
                return false;
            }
        }
        // The last set changes (or a replay changed it): forget its purity.
        self.pure_for = usize::MAX;
        self.chart.push(self.g, byte)
    }

    /// The bytes the next push could take: the last set's scannable bytes, or inside a
    /// virtual run the lexeme's live bytes (plus its FOLLOW bytes where it may end). Lets the
    /// trie skip the other children without a call each.
    #[inline(always)]
    fn byte_superset(&self) -> [u64; 4] {
        match (self.virt.last(), self.pure) {
            (Some(&(_, cur)), Some(p)) => {
                let lx = &self.g.lexemes[p.lex as usize];
                let mut s = lx.first[cur as usize];
                if lx.accepting(cur) {
                    for (a, b) in s.iter_mut().zip(&p.follow) {
                        *a |= b;
                    }
                }
                s
            }
            _ => self.chart.last_scan(),
        }
    }

    #[inline(always)]
    fn pop_bytes(&mut self, n: usize) {
        let v = n.min(self.virt.len());
        self.virt.truncate(self.virt.len() - v);
        if n > v {
            self.pop_real(n - v);
        }
    }
}
