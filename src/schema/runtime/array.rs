//! Arrays in the recogniser: the item node each alternative offers next (`prefixItems`,
//! `items`, `contains` with its counts), `uniqueItems` by canonical item text, and the
//! array's phases.

use super::*;

impl<'a> Rt<'a> {
    pub(super) fn arr_node(&self, core: RtCoreId, idx: u32) -> Option<ExprId> {
        match &self.prog().cores[core] {
            CoreRt::Array { prefix, items, max, .. } => {
                if idx >= *max {
                    return None;
                }
                let n = prefix.get(idx as usize).copied().unwrap_or(*items);
                (!self.prog().nodes[n].is_empty()).then_some(n)
            }
            _ => None,
        }
    }

    /// Does the array core have `uniqueItems`?
    pub(super) fn is_unique(&self, core: RtCoreId) -> bool {
        matches!(&self.prog().cores[core], CoreRt::Array { unique: true, .. })
    }

    /// Has the `uniqueItems` array in frame `fi` already completed an item equal to the
    /// canonical form `canon`?
    pub(super) fn seen_item(&self, fi: usize, canon: &[u8]) -> bool {
        let f = &self.st.frames[fi];
        self.st.xk[f.xk as usize..].iter().any(|x| {
            x.alt == NONE && &self.st.xtext[x.start as usize..(x.start + x.len) as usize] == canon
        })
    }

    /// How many items the `uniqueItems` array in frame `fi` has completed and remembered.
    pub(super) fn seen_count(&self, fi: usize) -> usize {
        let f = &self.st.frames[fi];
        self.st.xk[f.xk as usize..].iter().filter(|x| x.alt == NONE).count()
    }

    /// The current item of the `uniqueItems` array in frame `fi` completed: alternatives with
    /// `uniqueItems` die on a duplicate, otherwise its canonical form is remembered.
    pub(super) fn unique_item_done(&mut self, fi: usize) -> bool {
        let f = self.st.frames[fi];
        let mut canon = Vec::new();
        if unique::canonical(&self.st.raw[f.item as usize..], &mut canon).is_none() {
            // The recogniser only completes valid JSON; nothing to compare otherwise.
            return true;
        }
        if self.seen_item(fi, &canon) {
            let mut any = false;
            for ai in self.alt_range(fi) {
                let a = self.st.alts[ai];
                if a.alive && self.is_unique(a.core) {
                    self.kill(ai);
                } else if a.alive {
                    any = true;
                }
            }
            return any;
        }
        self.note_lens();
        let start = self.st.xtext.len() as u32;
        self.st.xtext.extend_from_slice(&canon);
        self.st.xk.push(XKey { alt: NONE, start, len: canon.len() as u32 });
        true
    }

    /// The item nodes an array alternative offers its next item, each with whether the item's
    /// alternatives count as `contains` matches.
    pub(super) fn item_nodes(&self, pa: &Alt, out: &mut smallvec::SmallVec<[(ExprId, bool); 2]>) {
        let prog = self.prog();
        let CoreRt::Array { prefix, items, min, max, contains, .. } = &prog.cores[pa.core] else {
            return;
        };
        let Some(c) = contains else {
            if let Some(n) = self.arr_node(pa.core, pa.arr().items) {
                out.push((n, false));
            }
            return;
        };
        let k = pa.arr().items;
        if k >= *max {
            return;
        }
        let live = |n: ExprId| !prog.nodes[n].is_empty();
        let i = (k as usize).min(prefix.len());
        let node = prefix.get(i).copied().unwrap_or(*items);
        if c.max == u32::MAX && pa.arr().matches >= c.min {
            // Enough matches and no upper bound: matches no longer matter.
            if live(node) {
                out.push((node, false));
            }
            return;
        }
        let cap = |j: usize| (live(c.yes[j]), live(c.no[j]));
        let feasible =
            |count: u32| contains_feasible(cap, prefix.len(), *min, *max, c, k + 1, count, false);
        let yes = pa.arr().matches < c.max && live(c.yes[i]) && feasible(pa.arr().matches + 1);
        let no = live(c.no[i]) && feasible(pa.arr().matches);
        match (yes, no) {
            (true, true) => {
                if live(node) {
                    out.push((node, false));
                }
                out.push((c.yes[i], true));
            }
            (true, false) => out.push((c.yes[i], true)),
            (false, true) => out.push((c.no[i], false)),
            (false, false) => {}
        }
    }

    /// Can array alternative `ai` take one more item?
    pub(super) fn arr_more(&self, ai: usize) -> bool {
        let a = self.st.alts[ai];
        let prog = self.prog();
        match &prog.cores[a.core] {
            CoreRt::Array { prefix, min, max, contains: Some(c), .. } => {
                let live = |n: ExprId| !prog.nodes[n].is_empty();
                let cap = |j: usize| (live(c.yes[j]), live(c.no[j]));
                contains_feasible(
                    cap,
                    prefix.len(),
                    *min,
                    *max,
                    c,
                    a.arr().items,
                    a.arr().matches,
                    true,
                )
            }
            CoreRt::Array { unique: true, .. } => {
                // A position of only `true`/`false`/`null` needs one still unused.
                let top = self.top();
                self.arr_node(a.core, a.arr().items).is_some_and(|n| {
                    unique::fresh_literal(
                        &prog.cores,
                        &prog.nodes[n],
                        &prog.unique_members,
                        |c| self.seen_item(top, c),
                        |c| self.counted_fresh_start(top, c),
                    )
                    .unwrap_or(true)
                })
            }
            _ => self.arr_node(a.core, a.arr().items).is_some(),
        }
    }

    /// For a string core decided by counting ([`unique::counted_fresh`]): does it have a
    /// value the `uniqueItems` array in frame `fi` has not completed yet? `None` for other
    /// cores.
    fn counted_fresh_start(&self, fi: usize, c: RtCoreId) -> Option<bool> {
        let prog = self.prog();
        if !prog.unique_counted.contains(&c) {
            return None;
        }
        let CoreRt::String { dfa, min, max } = prog.cores[c] else { return None };
        let d = &prog.dfas[dfa];
        let lang = unique::StrLang { dfa: d, min, max };
        Some(unique::counted_fresh(lang, d.start(), 0, b"", None, self.seen_texts(fi)))
    }

    pub(super) fn arr_byte(&mut self, fi: usize, b: u8) -> bool {
        let f = self.st.frames[fi];
        let w = &self.cs.ws;
        let Lex::Arr(phase) = f.lex else { unreachable!("an array frame") };
        match phase {
            ArrPhase::First => {
                if let Some(ok) = self.ws(fi, b, &[]) {
                    return ok;
                }
                if !self.pad_done(fi, &[]) {
                    return false;
                }
                if b == b']' {
                    self.arr_close(fi)
                } else {
                    self.value_start(fi, b)
                }
            }
            ArrPhase::Item => self.padded_value(fi, b, &w.item_post),
            ArrPhase::After => {
                self.after_member(fi, b, b']', |rt, ai| rt.arr_more(ai), Self::arr_close)
            }
        }
    }

    pub(super) fn arr_close(&mut self, fi: usize) -> bool {
        self.close_with(fi, |rt, a| match &rt.prog().cores[a.core] {
            CoreRt::Array { min, contains, .. } => {
                a.arr().items >= *min && contains.as_ref().is_none_or(|c| a.arr().matches >= c.min)
            }
            _ => false,
        })
    }
}
