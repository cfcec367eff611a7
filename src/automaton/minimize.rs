//! Moore's partition refinement of a pruned byte-class DFA table: one state per remaining
//! language. Shared by the JSON Schema string automata and (on request,
//! [`super::DfaConfig::minimize`]) the dense DFAs of regexes and CFG lexemes, whose caches
//! and slices are keyed by state.

use rustc_hash::FxHashMap;

/// Tables with more cells (states × byte classes) than this are not minimised.
const MINIMIZE_LIMIT: usize = 1 << 14;

/// Moore's partition refinement over a pruned table (state 0 dead, 1 start, all others live):
/// equivalent states are merged, so one language has one state. Caches and slices keyed by an
/// automaton state then hit whenever the remaining language is the same (the loop state of
/// `.*` *is* its start state). Returns the table renumbered breadth-first from the start (0
/// stays dead, the start stays 1).
pub(crate) fn minimize(trans: &[u32], stride: usize, accept: &[bool]) -> (Vec<u32>, Vec<bool>) {
    let m = accept.len();
    // Large tables (long enums, big patterns) are mostly acyclic: minimising them merges
    // little and Moore's refinement is quadratic there, so compile time wins.
    if m <= 2 || m * stride > MINIMIZE_LIMIT {
        return (trans.to_vec(), accept.to_vec());
    }
    // Initial blocks: dead, accepting, non-accepting live.
    let mut block: Vec<u32> = (0..m)
        .map(|s| {
            if s == 0 {
                0
            } else if accept[s] {
                1
            } else {
                2
            }
        })
        .collect();
    let mut n_blocks = 0;
    let mut sig: Vec<u32> = Vec::with_capacity(stride + 1);
    loop {
        let mut ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
        let mut next = vec![0u32; m];
        for s in 0..m {
            sig.clear();
            sig.push(block[s]);
            sig.extend(trans[s * stride..(s + 1) * stride].iter().map(|&t| block[t as usize]));
            let len = ids.len() as u32;
            next[s] = *ids.entry(sig.clone()).or_insert(len);
        }
        let count = ids.len();
        block = next;
        if count == n_blocks {
            break;
        }
        n_blocks = count;
    }
    if n_blocks == m {
        return (trans.to_vec(), accept.to_vec());
    }
    // Renumber blocks breadth-first from the start; the dead block (that of state 0) is 0.
    let rep: Vec<usize> = {
        let mut r = vec![usize::MAX; n_blocks];
        for s in (0..m).rev() {
            r[block[s] as usize] = s;
        }
        r
    };
    let mut new_id = vec![u32::MAX; n_blocks];
    new_id[block[0] as usize] = 0;
    let mut order = vec![block[1]];
    new_id[block[1] as usize] = 1;
    let mut i = 0;
    while i < order.len() {
        let s = rep[order[i] as usize];
        i += 1;
        for &t in &trans[s * stride..(s + 1) * stride] {
            let b = block[t as usize];
            if new_id[b as usize] == u32::MAX {
                new_id[b as usize] = order.len() as u32 + 1;
                order.push(b);
            }
        }
    }
    let mm = order.len() + 1;
    let mut out = vec![0u32; mm * stride];
    let mut acc = vec![false; mm];
    for &b in &order {
        let s = rep[b as usize];
        let ns = new_id[b as usize] as usize;
        acc[ns] = accept[s];
        for c in 0..stride {
            out[ns * stride + c] = new_id[block[trans[s * stride + c] as usize] as usize];
        }
    }
    (out, acc)
}
