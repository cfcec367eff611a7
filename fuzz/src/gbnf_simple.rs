//! An independent whole-string GBNF recogniser (a copy of `tests/it/common/gbnf_simple.rs`).
//!
//! It works directly on the parsed AST (`grammask::cfg::gbnf`), not on the lowered grammar the
//! engine runs: each rule at each input position maps to the set of positions where a match can
//! end, computed as a least fixpoint (so left recursion and empty rules need no special care).
//! Characters are decoded from UTF-8 here, independently of the engine's byte-sequence lowering.
//! Slow (polynomial, unoptimised) and obviously correct is the point.

use grammask::cfg::gbnf::{parse, Expr, Rule};
use std::collections::{BTreeSet, HashMap};

pub struct Simple {
    rules: Vec<Rule>,
    ids: HashMap<String, usize>,
}

fn char_at(s: &[u8], i: usize) -> Option<(u32, usize)> {
    let b = *s.get(i)?;
    let n = match b {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    let chunk = s.get(i..i + n)?;
    let c = std::str::from_utf8(chunk).ok()?.chars().next()?;
    Some((c as u32, n))
}

impl Simple {
    pub fn new(gbnf: &str) -> Simple {
        let rules = parse(gbnf).expect("grammar parses");
        let ids = rules.iter().enumerate().map(|(i, r)| (r.name.clone(), i)).collect();
        Simple { rules, ids }
    }

    /// Does the grammar derive exactly `text` from `root`?
    pub fn accepts(&self, text: &[u8]) -> bool {
        let root = self.ids["root"];
        let mut memo: HashMap<(usize, usize), BTreeSet<usize>> = HashMap::new();
        memo.insert((root, 0), BTreeSet::new());
        loop {
            let mut changed = false;
            let keys: Vec<(usize, usize)> = memo.keys().copied().collect();
            for (r, i) in keys {
                let mut needed = Vec::new();
                let ends = self.eval(&self.rules[r].expr, text, i, &memo, &mut needed);
                for k in needed {
                    if let std::collections::hash_map::Entry::Vacant(e) = memo.entry(k) {
                        e.insert(BTreeSet::new());
                        changed = true;
                    }
                }
                let cur = memo.get_mut(&(r, i)).expect("present");
                for e in ends {
                    changed |= cur.insert(e);
                }
            }
            if !changed {
                break;
            }
        }
        memo[&(root, 0)].contains(&text.len())
    }

    fn eval(
        &self,
        e: &Expr,
        s: &[u8],
        i: usize,
        memo: &HashMap<(usize, usize), BTreeSet<usize>>,
        needed: &mut Vec<(usize, usize)>,
    ) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        match e {
            Expr::Alt(alts) => {
                for a in alts {
                    out.extend(self.eval(a, s, i, memo, needed));
                }
            }
            Expr::Seq(items) => {
                let mut cur: BTreeSet<usize> = [i].into();
                for it in items {
                    let mut next = BTreeSet::new();
                    for &p in &cur {
                        next.extend(self.eval(it, s, p, memo, needed));
                    }
                    cur = next;
                }
                out = cur;
            }
            Expr::Literal(b) => {
                if s[i..].starts_with(b) {
                    out.insert(i + b.len());
                }
            }
            Expr::Class { ranges, negated } => {
                if let Some((c, n)) = char_at(s, i) {
                    let inside = ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
                    if inside != *negated {
                        out.insert(i + n);
                    }
                }
            }
            Expr::Any => {
                if let Some((_, n)) = char_at(s, i) {
                    out.insert(i + n);
                }
            }
            // A token terminal matches a token, never bytes of a string.
            Expr::Token { .. } => {}
            Expr::Ref { name, .. } => {
                let r = self.ids[name];
                match memo.get(&(r, i)) {
                    Some(v) => out.extend(v.iter().copied()),
                    None => needed.push((r, i)),
                }
            }
            Expr::Repeat { expr, min, max } => {
                let mut level: BTreeSet<usize> = [i].into();
                let mut count = 0u32;
                if *min == 0 {
                    out.insert(i);
                }
                let mut seen: BTreeSet<(usize, u32)> = BTreeSet::new();
                while !level.is_empty() && !max.is_some_and(|m| count >= m) {
                    count += 1;
                    let mut next = BTreeSet::new();
                    for &p in &level {
                        for q in self.eval(expr, s, p, memo, needed) {
                            // Beyond `min`, only new positions matter (unbounded loops end).
                            let key = (q, count.min(*min));
                            if seen.insert(key) {
                                next.insert(q);
                            }
                        }
                    }
                    if count >= *min {
                        out.extend(next.iter().copied());
                    }
                    level = next;
                }
            }
        }
        out
    }
}
