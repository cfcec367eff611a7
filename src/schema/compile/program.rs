//! The compiled program as the runtime reads it: nodes (unions of cores), finalised cores
//! ([`CoreRt`]) and automata, plus the `contains` feasibility test both sides use.

use super::{DfaId, ExprId, RtCoreId};
use crate::schema::number::NumCore;
use crate::schema::string::ByteDfa;

/// `contains` as the runtime reads it: per item position (the prefix positions, then one
/// entry for every later position) the node of items that match and of items that do not.
#[derive(Debug)]
pub(crate) struct ContainsRt {
    pub min: u32,
    pub max: u32,
    /// `item ∧ contains` per position.
    pub yes: Vec<ExprId>,
    /// `item ∧ ¬contains` per position (`item` itself when `max` is unbounded: there an
    /// uncounted match never hurts).
    pub no: Vec<ExprId>,
}

/// Finalised object core, as the runtime reads it.
#[derive(Debug)]
pub(crate) struct ObjRt {
    /// Declared key names (decoded bytes), sorted.
    pub names: Vec<Box<[u8]>>,
    /// Per name: value node, required, schema order, dependent names (indices).
    pub props: Vec<PropRt>,
    /// Undeclared keys: automaton over the key text, and per pattern-match combination the
    /// value node (index = bitmask of matching patterns).
    pub extra: Option<ExtraRt>,
    pub min: u32,
    pub max: u32,
    pub n_required: u32,
    /// Indices of required names.
    pub required: Vec<u32>,
    pub has_deps: bool,
}

/// One declared property.
#[derive(Debug)]
pub(crate) struct PropRt {
    pub node: ExprId,
    /// The key can never appear (its schema or one of its dependencies is unsatisfiable).
    pub forbidden: bool,
    /// Listed in `required` (kept for diagnostics).
    #[allow(dead_code)]
    pub required: bool,
    pub order: u32,
    pub deps: Vec<u32>,
}

/// Undeclared keys of an object core.
#[derive(Debug)]
pub(crate) struct ExtraRt {
    pub dfa: DfaId,
    pub patterns: Vec<DfaId>,
    pub combos: Vec<ExprId>,
}

/// Finalised core as the runtime reads it.
#[derive(Debug)]
pub(crate) enum CoreRt {
    Null,
    Bool(u8),
    Number(NumCore),
    /// dfa (index), min/max code points. With the "any" automaton both bounds are counted;
    /// otherwise `minLength` is folded into the automaton (min = 0) and `maxLength` is
    /// counted beside it: a state with `count` code points is live iff
    /// `count + short(state) ≤ max` ([`ByteDfa::short`]).
    String {
        dfa: DfaId,
        min: u32,
        max: u32,
    },
    Array {
        prefix: Vec<ExprId>,
        items: ExprId,
        min: u32,
        max: u32,
        contains: Option<Box<ContainsRt>>,
        unique: bool,
    },
    Object(ObjRt),
}

/// Can an array holding `k` items, `c` of which match `contains`, still be completed (with at
/// least one more item when `more`)? `cap(i)` says whether item position `i` (the prefix
/// positions, then `tail` for every later one) can hold a matching / a non-matching item.
#[allow(clippy::too_many_arguments)]
pub(crate) fn contains_feasible(
    cap: impl Fn(usize) -> (bool, bool),
    tail: usize,
    min_items: u32,
    max_items: u32,
    c: &ContainsRt,
    k: u32,
    count: u32,
    more: bool,
) -> bool {
    let need = u64::from(c.min.saturating_sub(count));
    let room = if c.max == u32::MAX { u64::MAX } else { u64::from(c.max.saturating_sub(count)) };
    if count > c.max {
        return false;
    }
    let lo = u64::from(min_items).max(u64::from(k) + u64::from(more));
    let hi = u64::from(max_items);
    // Positions k..n: `only` must match, `both` may match or not.
    let (mut only, mut both) = (0u64, 0u64);
    let mut n = u64::from(k);
    let ok =
        |n: u64, only: u64, both: u64| n >= lo && n <= hi && only <= room && only + both >= need;
    loop {
        if ok(n, only, both) {
            return true;
        }
        if n >= hi || n >= tail as u64 {
            break;
        }
        match cap(n as usize) {
            (false, false) => return false,
            (true, false) => only += 1,
            (true, true) => both += 1,
            (false, true) => {}
        }
        n += 1;
    }
    if n >= hi {
        return false;
    }
    // Every later position is like `tail`: add m ≥ 1 of them.
    let m_lo = lo.saturating_sub(n).max(1);
    let m = match cap(tail) {
        (false, false) => return false,
        (false, true) => m_lo,
        (true, true) => m_lo.max(need.saturating_sub(only + both)),
        (true, false) => {
            let m = m_lo.max(need.saturating_sub(only + both));
            if only.saturating_add(m) > room {
                return false;
            }
            return n.saturating_add(m) <= hi;
        }
    };
    n.saturating_add(m) <= hi
        && ok(n.saturating_add(m), only, both + if cap(tail).0 { m } else { 0 })
}

/// The members of the string cores a `uniqueItems` item decides member by member
/// ([`crate::schema::unique::string_members`]), sorted bytewise.
pub(crate) type UniqueMembers = rustc_hash::FxHashMap<RtCoreId, Vec<Box<[u8]>>>;

/// The compiled schema (inside [`super::CompiledSchema`]).
#[derive(Debug)]
pub(crate) struct Program {
    /// Per expression, the satisfiable runtime cores of its normal form.
    pub nodes: Vec<Vec<RtCoreId>>,
    pub cores: Vec<CoreRt>,
    pub dfas: Vec<ByteDfa>,
    pub root: ExprId,
    pub any_dfa: DfaId,
    /// [`crate::schema::SchemaLimits::max_instance_depth`].
    pub max_depth: usize,
    /// String cores offered as items of `uniqueItems` arrays whose finite languages are
    /// decided member by member ([`crate::schema::unique::string_members`]).
    pub unique_members: UniqueMembers,
    /// The other string cores offered as items of `uniqueItems` arrays that are not open
    /// (bounded by `maxLength`, or with finitely many completions from some state): decided
    /// by counting completions ([`crate::schema::unique::counted_fresh`]).
    pub unique_counted: rustc_hash::FxHashSet<RtCoreId>,
}
