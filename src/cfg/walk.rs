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
//! FOLLOW set while accepting) or end it (a state with no way on) — replays the virtual bytes
//! into real sets and then pushes normally, so the chart is exactly what pushing every byte
//! would have made. Pops take virtual bytes first.

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
    /// Whether the chart's last set is pure, for the set count in `pure_for`.
    pure: Option<Pure>,
    pure_for: usize,
}

impl<'a> EarleyWalk<'a> {
    pub(crate) fn new(g: &'a CfgGrammar, chart: &'a mut Chart) -> Self {
        EarleyWalk { g, chart, virt: Vec::with_capacity(64), pure: None, pure_for: usize::MAX }
    }

    /// Is the chart's last set pure (see the module docs)?
    fn pure_top(&mut self) -> Option<Pure> {
        let n = self.chart.set_count();
        if self.pure_for != n {
            self.pure_for = n;
            self.pure = self.compute_pure();
        }
        self.pure
    }

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

    /// Turn the virtual pushes into real sets. `false` (nothing changed) on overflow.
    fn replay(&mut self) -> bool {
        let before = self.chart.set_count();
        for k in 0..self.virt.len() {
            if !self.chart.push(self.g, self.virt[k].0) {
                self.chart.truncate(before);
                return false;
            }
        }
        self.virt.clear();
        true
    }
}

impl Recognizer for EarleyWalk<'_> {
    #[inline]
    fn try_push_byte(&mut self, byte: u8) -> bool {
        // While virtual pushes are stacked, the last set (and its purity) cannot change.
        let pure = if self.virt.is_empty() { self.pure_top() } else { self.pure };
        if let Some(p) = pure {
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

    #[inline]
    fn pop_bytes(&mut self, n: usize) {
        let v = n.min(self.virt.len());
        self.virt.truncate(self.virt.len() - v);
        if n > v {
            self.chart.pop(n - v);
            self.pure_for = usize::MAX;
        }
    }
}
