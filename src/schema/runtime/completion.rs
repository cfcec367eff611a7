//! How far a recogniser state is from an end: a lower bound on the bytes any completion of
//! the document needs, for the fuzzer's completion search ([`crate::fuzz`], issue 20).
//!
//! The search finishes a document by a depth-first walk under a byte limit, raised 64, 256,
//! 1024, … until a walk fits. Its only bound used to be the JSON nesting (one closing byte
//! per open container), so where the schema still needs hundreds of bytes (required
//! properties of every open object, `minItems` of recursive items) every small limit
//! explored its whole tree before failing: on `Github_hard---o16058` three quarters of the
//! fuzz run's pushes went to limits that could not succeed. With this bound a limit below
//! it fails at once, and branches that cannot close within the limit are cut where they
//! start.
//!
//! Two parts, both lower bounds, never estimates (a bound above the truth would cut the only
//! completions and leave documents unfinished):
//! - per program node, [`min_value_bytes`]: the fewest bytes of a compact value the node
//!   accepts, from its cores' required properties, `minItems`, string automata's shortest
//!   accepted contents ([`crate::schema::string::ByteDfa::short`]) and literal lengths,
//!   solved by iteration from 0 (each round is a lower bound; recursion only raises it);
//! - per state, [`Rt::completion_bound`]: per open frame, the fewest bytes its live
//!   alternatives need after the value open above it (unseen required names with their
//!   values, missing items, a string's shortest remaining content, a literal's rest, the
//!   closing byte), summed over frames — each frame's bytes are its own part of any
//!   completion, so the sum of the per-frame minima is a bound.

use super::*;
use crate::schema::compile::CoreRt;

/// "Never" (an unsatisfiable node); sums saturate here.
const FAR: u32 = 1 << 24;

/// Longest string rest [`Rt::string_rest`] spells (bytes of content).
const MAX_REST: u32 = 1 << 16;

/// Rounds of the fixed-point iteration at most: each round is already a lower bound, and a
/// recursion through required members only raises the bound of its nodes by a round's
/// length each round, so stopping early loses precision, never soundness.
const ROUNDS: usize = 64;

/// Per node of `prog`, the fewest bytes of a value it accepts written compactly (no
/// whitespace): a lower bound (see the module docs). [`FAR`] for a node without cores.
pub(crate) fn min_value_bytes(prog: &Program) -> Vec<u32> {
    let mut node = vec![0u32; prog.nodes.len()];
    for _ in 0..ROUNDS {
        let mut changed = false;
        for n in 0..prog.nodes.len() {
            let v = prog.nodes[n]
                .iter()
                .map(|&c| core_bytes(prog, &prog.cores[c], &node))
                .min()
                .unwrap_or(FAR);
            // Monotone: a round never lowers a bound the previous one proved.
            if v > node[n] {
                node[n] = v;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    node
}

fn add(a: u32, b: u32) -> u32 {
    a.saturating_add(b).min(FAR)
}

/// The fewest bytes of a compact value of `core`, given per-node bounds `node`.
fn core_bytes(prog: &Program, core: &CoreRt, node: &[u32]) -> u32 {
    match core {
        CoreRt::Null => 4,
        // Bit 1 `true` (4 bytes), bit 0 `false` (5).
        CoreRt::Bool(m) => {
            if m & 2 != 0 {
                4
            } else {
                5
            }
        }
        CoreRt::Number(_) => 1,
        CoreRt::String { dfa, min, .. } => add(2, string_rest(prog, *dfa, *min, 0, None, false)),
        CoreRt::Array { prefix, items, min, .. } => {
            let mut n = 2u32;
            for j in 0..*min as usize {
                let at = prefix.get(j).copied().unwrap_or(*items);
                n = add(n, node[at]);
            }
            add(n, min.saturating_sub(1))
        }
        CoreRt::Object(o) => {
            let mut n = 2u32;
            for &r in &o.required {
                n = add(n, member_bytes(o, r as usize, node));
            }
            let extra = o.min.saturating_sub(o.required.len() as u32);
            let members = o.required.len() as u32 + extra;
            // A member is at least `"":` and a one-byte value; members but the first a comma.
            add(add(n, extra.saturating_mul(4)), members.saturating_sub(1))
        }
    }
}

/// The bytes of the member of declared name `r`: the name (its JSON spelling is at least its
/// decoded bytes), two quotes, the colon, the value.
fn member_bytes(o: &ObjRt, r: usize, node: &[u32]) -> u32 {
    add(o.names[r].len() as u32 + 3, node[o.props[r].node])
}

/// The fewest bytes that complete a string of automaton `dfa` from `state` (the start when
/// `None`) with `chars` code points read: the automaton's shortest accepted rest in bytes (a
/// CJK character is three), or, for the "any" automaton, what `minLength` still asks (a code
/// point is at least a byte). `in_escape`: a `\u` escape is under way, whose character the
/// automaton has not read yet and whose rest may be shorter than its UTF-8 bytes (`5b57"`
/// left of `\u5b57` spells three), so the rest is counted in code points, each at least a
/// byte.
fn string_rest(
    prog: &Program,
    dfa: DfaId,
    min: u32,
    chars: u32,
    state: Option<u32>,
    in_escape: bool,
) -> u32 {
    let d = &prog.dfas[dfa];
    if dfa == prog.any_dfa {
        return min.saturating_sub(chars);
    }
    let s = state.unwrap_or_else(|| d.start());
    if s == DEAD {
        return FAR;
    }
    if in_escape { d.short(s) } else { d.short_bytes(s) }.min(FAR)
}

impl Rt<'_> {
    /// A lower bound on the bytes any completion of the document needs from this state (see
    /// the module docs); `node` is [`min_value_bytes`] of this program.
    pub(super) fn completion_bound(&self, node: &[u32]) -> u32 {
        let prog = self.prog();
        let n_frames = self.st.frames.len();
        let mut total = 0u32;
        for fi in 0..n_frames {
            let f = self.st.frames[fi];
            let above = self.st.frames.get(fi + 1).map(|g| g.kind());
            let own = match f.lex {
                Lex::Root { done } => {
                    if done || above.is_some() {
                        0
                    } else {
                        node[prog.root]
                    }
                }
                Lex::Num => 0,
                Lex::Lit { lit, pos } => {
                    (LITERALS[lit as usize].len() as u32).saturating_sub(u32::from(pos))
                }
                // The closing quote; the name is counted by the object below, which leaves
                // out the costliest name it still needs (this key may be that one).
                Lex::Key(_) => 1,
                Lex::Str(_) => self.min_over_alts(fi, |a| {
                    let CoreRt::String { dfa, min, .. } = &prog.cores[a.core] else {
                        return 1;
                    };
                    let p = a.str();
                    let in_escape = !f.lex.at_char_boundary();
                    add(1, string_rest(prog, *dfa, *min, p.chars, Some(p.state), in_escape))
                }),
                Lex::Arr(phase) => self.min_over_alts(fi, |a| {
                    let CoreRt::Array { prefix, items, min, .. } = &prog.cores[a.core] else {
                        return 1;
                    };
                    // Items complete when they close: one open above is under way.
                    let done = a.arr().items + u32::from(above.is_some());
                    let mut n = 1u32;
                    let mut missing = 0u32;
                    for j in done..*min {
                        let at = prefix.get(j as usize).copied().unwrap_or(*items);
                        n = add(n, node[at]);
                        missing += 1;
                    }
                    // After `,` an item must follow even past `minItems`.
                    if missing == 0 && phase == ArrPhase::Item && above.is_none() {
                        let at = prefix.get(done as usize).copied().unwrap_or(*items);
                        n = add(n, node[at]);
                    }
                    // A comma before each missing item but the first after `[` or `,`.
                    let lead = u32::from(phase == ArrPhase::After || above.is_some());
                    add(n, missing.saturating_sub(1 - lead))
                }),
                Lex::Obj(phase) => self.min_over_alts(fi, |a| {
                    let CoreRt::Object(o) = &prog.cores[a.core] else {
                        return 1;
                    };
                    let p = a.obj();
                    let typing = above == Some(Kind::Key);
                    let mut n = 1u32;
                    let mut max_term = 0u32;
                    let mut k = 0u32;
                    for &r in &o.required {
                        if !self.seen(a, r as usize) {
                            let t = member_bytes(o, r as usize, node);
                            n = add(n, t);
                            max_term = max_term.max(t);
                            k += 1;
                        }
                    }
                    if typing && k > 0 {
                        n -= max_term.min(n - 1);
                        k -= 1;
                    }
                    let members = p.members + u32::from(typing);
                    let extra = o.min.saturating_sub(members + k);
                    n = add(n, extra.saturating_mul(4));
                    let future = k + extra;
                    // Each future member after a first one (or one under way) needs a comma.
                    // (After `,` with no key begun, the comma before the next one is written.)
                    let lead = u32::from(members > 0 && (typing || phase != ObjPhase::Key));
                    n = add(n, future.saturating_sub(1 - lead));
                    // The value of the member whose key closed, not yet open above.
                    if above.is_none() && p.value != ExprId::NONE {
                        match phase {
                            ObjPhase::Colon => n = add(n, add(1, node[p.value])),
                            ObjPhase::Value => n = add(n, node[p.value]),
                            _ => {}
                        }
                    }
                    n
                }),
            };
            total = add(total, own);
        }
        total
    }

    /// The least of `f` over frame `fi`'s live alternatives ([`FAR`] when none is live).
    fn min_over_alts(&self, fi: usize, f: impl Fn(&Alt) -> u32) -> u32 {
        self.alt_range(fi)
            .map(|ai| &self.st.alts[ai])
            .filter(|a| a.alive)
            .map(f)
            .min()
            .unwrap_or(FAR)
    }

    /// The shortest rest of the string value being written, as JSON spells it, with its
    /// closing quote: for the first live alternative that has one, its automaton's shortest
    /// path to acceptance from its state (each byte taken where the fewest bytes remain after
    /// it, printable ASCII from `1` first), or as many `a`s as an unconstrained string's
    /// `minLength` still needs. The fuzzer's completion search tries it as one move where a string is
    /// open (`Handwritten---string2`: a thousand characters of three patterns, which byte by
    /// byte took 120–250k pushes a document). The engine still checks every byte of it;
    /// `None` outside a string value, inside an escape or a multi-byte character, or when no
    /// alternative has a rest.
    pub(crate) fn string_rest(&self) -> Option<Vec<u8>> {
        let fi = self.st.frames.len().checked_sub(1)?;
        let f = self.st.frames[fi];
        if f.kind() != Kind::Str || !f.lex.at_char_boundary() {
            return None;
        }
        let prog = self.prog();
        self.alt_range(fi).map(|ai| self.st.alts[ai]).filter(|a| a.alive).find_map(|a| {
            let CoreRt::String { dfa, min, max } = prog.cores[a.core] else { return None };
            let p = a.str();
            let d = &prog.dfas[dfa];
            let mut out = Vec::new();
            let mut s = p.state;
            if dfa == prog.any_dfa {
                let n = min.saturating_sub(p.chars);
                if n > MAX_REST || p.chars + n > max {
                    return None;
                }
                out.resize(n as usize, b'a');
            } else {
                let mut left = d.short_bytes(s);
                if left > MAX_REST || p.chars.saturating_add(d.short(s)) > max {
                    return None;
                }
                while left > 0 {
                    // `1` before `0`: a `date` or `date-time` rest of zeros is the year
                    // 0000, which RFC 3339 allows and Python's `date` refuses.
                    let mut order =
                        (b'1'..0x7F).chain(0x20..b'1').chain(0x80..=0xFF).chain(0..0x20);
                    let next = order.find(|&b| {
                        let t = d.next(s, b);
                        t != DEAD && d.short_bytes(t) == left - 1
                    })?;
                    match next {
                        b'"' => out.extend_from_slice(b"\\\""),
                        b'\\' => out.extend_from_slice(b"\\\\"),
                        0..=0x1F => out.extend_from_slice(format!("\\u{next:04x}").as_bytes()),
                        b => out.push(b),
                    }
                    s = d.next(s, next);
                    left -= 1;
                }
            }
            out.push(b'"');
            Some(out)
        })
    }
}
