//! Schema JSON → compiled, immutable node arena.
//!
//! Three stages:
//! 1. **Expressions.** Every subschema becomes an [`Expr`]: a typed *shape* (the type-specific
//!    keywords, each applying only to values of its type, as the spec says), literal sets
//!    (`enum`/`const`), and the combinators `And` (`allOf`, `$ref` siblings), `Or` (`anyOf`,
//!    disjoint `oneOf`, `if`/`then`/`else`), with `not` pushed inwards by [`Compiler::negate`].
//!    Expressions are memoised by JSON pointer (and dynamic scope, for `$dynamicRef`: see
//!    [`DynScopes`]), so `$ref` recursion is a cycle in the graph.
//! 2. **Normal form.** On demand, an expression is normalised into a union of typed [`Core`]s
//!    (disjunctive normal form): `And` intersects cores pairwise (merging bounds, taking
//!    automaton products, merging object/array children into new `And` expressions, memoised
//!    by their operand set so recursive merges terminate).
//! 3. **Satisfiability.** A least fixpoint marks the cores that have at least one finite
//!    instance; the runtime only ever enters those, which is what rules out dead ends inside
//!    nested values. An unsatisfiable root is a compile error.

use super::error::SchemaError;
use super::number::{Dec, NumCore};
use super::string::{self, ByteDfa, DfaError, Op};
use super::unique;
use super::{FormatMode, SchemaLimits, SchemaOptions};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Map, Value};

/// Index of an expression (also the node id the runtime uses).
pub(crate) type ExprId = u32;
/// Index of a core.
pub(crate) type CoreId = u32;

/// Value types, as bits.
pub(crate) const T_NULL: u8 = 1;
pub(crate) const T_BOOL: u8 = 2;
pub(crate) const T_INT: u8 = 4;
pub(crate) const T_NUM: u8 = 8;
pub(crate) const T_STR: u8 = 16;
pub(crate) const T_ARR: u8 = 32;
pub(crate) const T_OBJ: u8 = 64;
pub(crate) const T_ALL: u8 = 127;

/// String constraint before finalisation.
#[derive(Clone, Debug, Default)]
pub(crate) struct StrC {
    /// Automaton (index into the DFA table); `None` = any string.
    pub dfa: Option<u32>,
    pub min: u32,
    pub max: u32,
}

/// A group of key rules from one source schema (`properties`, `patternProperties`,
/// `additionalProperties` of one subschema).
#[derive(Clone, Debug)]
pub(crate) struct KeyGroup {
    pub props: Vec<(String, ExprId)>,
    /// (pattern automaton, schema)
    pub patterns: Vec<(u32, ExprId)>,
    pub additional: ExprId,
    /// The group's names and patterns produce evaluation annotations (they come from a
    /// schema's own `properties`/`patternProperties`, not from `const`, `not`, …).
    pub annot: bool,
    /// Every key is evaluated (`additionalProperties` or `unevaluatedProperties` present).
    pub annot_all: bool,
}

/// Object constraint before finalisation.
#[derive(Clone, Debug)]
pub(crate) struct ObjC {
    pub groups: Vec<KeyGroup>,
    pub required: Vec<String>,
    pub min: u32,
    pub max: u32,
    pub deps: Vec<(String, Vec<String>)>,
    pub names: Option<u32>,
}

/// Array constraint.
#[derive(Clone, Debug)]
pub(crate) struct ArrC {
    pub prefix: Vec<ExprId>,
    pub items: ExprId,
    pub min: u32,
    pub max: u32,
    pub contains: Option<ContainsC>,
    /// `uniqueItems: true`, with the pointer of the schema that said so.
    pub unique: Option<String>,
    /// Item positions evaluated by `prefixItems` (or array-form `items`).
    pub annot_len: u32,
    /// Every item is evaluated (`items`, `additionalItems` or `unevaluatedItems` present).
    pub annot_all: bool,
}

impl ArrC {
    /// Items and length bounds only: no `contains`, no `uniqueItems`, no annotations.
    pub(crate) fn new(prefix: Vec<ExprId>, items: ExprId, min: u32, max: u32) -> ArrC {
        ArrC {
            prefix,
            items,
            min,
            max,
            contains: None,
            unique: None,
            annot_len: 0,
            annot_all: false,
        }
    }
}

/// `contains` with `minContains`/`maxContains`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContainsC {
    /// The `contains` schema.
    pub schema: ExprId,
    /// Its negation, when [`Compiler::negate`] can build it (required when `max` is finite).
    pub neg: Option<ExprId>,
    pub min: u32,
    pub max: u32,
}

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

/// A typed alternative: the runtime's unit of progress.
#[derive(Clone, Debug)]
pub(crate) enum Core {
    Null,
    /// Bit 0: `false` allowed, bit 1: `true` allowed.
    Bool(u8),
    Number(NumCore),
    String(StrC),
    Array(ArrC),
    Object(Box<ObjC>),
}

impl Core {
    fn type_bit(&self) -> u8 {
        match self {
            Core::Null => T_NULL,
            Core::Bool(_) => T_BOOL,
            Core::Number(_) => T_NUM,
            Core::String(_) => T_STR,
            Core::Array(_) => T_ARR,
            Core::Object(_) => T_OBJ,
        }
    }
}

/// A subschema expression.
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    /// Filled in later (a `$ref` target being compiled).
    Pending,
    /// A union of cores given directly.
    Cores(Vec<CoreId>),
    And(Vec<ExprId>),
    Or(Vec<ExprId>),
    /// `oneOf`: normalised as a union once the branches are shown disjoint.
    /// `oneOf`: normalised as a union once the branches are shown disjoint, otherwise as
    /// `∨ᵢ (branchᵢ ∧ ∧_{j≠i} ¬branchⱼ)` when every branch can be negated (last field).
    OneOf(Vec<ExprId>, String, Option<Vec<ExprId>>),
    /// `unevaluatedProperties` / `unevaluatedItems` over the rest of a schema object (`base`):
    /// decided per normal-form alternative, whose evaluated keys and items are static when
    /// every in-place applicator below is exclusive (see [`Compiler::check_exclusive`]).
    Uneval {
        base: ExprId,
        props: Option<ExprId>,
        items: Option<ExprId>,
        ptr: String,
    },
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
    pub dfa: u32,
    pub patterns: Vec<u32>,
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
        dfa: u32,
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

/// The compiled schema (inside [`super::CompiledSchema`]).
#[derive(Debug)]
pub(crate) struct Program {
    pub nodes: Vec<Vec<CoreId>>,
    pub cores: Vec<CoreRt>,
    pub dfas: Vec<ByteDfa>,
    pub root: ExprId,
    pub any_dfa: u32,
}

/// Which keyword names a schema resource, by the document's `$schema`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdKeyword {
    /// Draft-06 and later (any `$schema` other than draft-04 or earlier): `$id`; a plain `id`
    /// is an annotation.
    Dollar,
    /// Draft-04 and earlier: `id`; `$id` is an unknown keyword.
    Plain,
    /// No `$schema`: `$id`, else a plain `id` that sits in a schema-looking object.
    Either,
}

impl IdKeyword {
    fn of(doc: &Value) -> IdKeyword {
        match doc.get("$schema").and_then(Value::as_str) {
            None => IdKeyword::Either,
            Some(s)
                if ["draft-04", "draft-03", "draft-02", "draft-01"]
                    .iter()
                    .any(|d| s.contains(d)) =>
            {
                IdKeyword::Plain
            }
            Some(_) => IdKeyword::Dollar,
        }
    }
}

/// Index of a dynamic scope (0: no bindings).
type ScopeId = u32;

/// `$dynamicRef` / `$dynamicAnchor` (2020-12 Core §8.2.3.2, §7.1 "dynamic scope").
///
/// A `$dynamicRef` depends on the dynamic scope only through which schema resource in it is
/// the outermost to declare `$dynamicAnchor` with the referenced name. A scope is therefore a
/// set of *bindings* name → pointer of that outermost anchor, kept only for names some
/// `$dynamicRef` uses. Subschemas are compiled per (scope, pointer); entering a subschema adds
/// the bindings its resource declares for names not yet bound. Bindings only grow along a
/// path, so memoisation terminates; the number of copies is bounded by
/// [`SchemaLimits::max_nodes`] like every other node. 2019-09's `$recursiveAnchor: true` is
/// a dynamic anchor named `""` and `$recursiveRef` a dynamic reference to it.
#[derive(Default)]
struct DynScopes {
    /// Anchor keys (`base#name`) declared by `$dynamicAnchor`.
    keys: FxHashSet<String>,
    /// Per resource (base URI): its `$dynamicAnchor`s as (name, pointer).
    by_resource: FxHashMap<String, Vec<(String, String)>>,
    /// Anchor names in the fragments of `$dynamicRef`s.
    names: FxHashSet<String>,
    /// Interned scopes (id − 1): bindings sorted by name.
    scopes: Vec<Vec<(String, String)>>,
    ids: FxHashMap<Vec<(String, String)>, ScopeId>,
    /// The scope of the subschema being compiled.
    cur: ScopeId,
}

impl DynScopes {
    fn bindings(&self, s: ScopeId) -> &[(String, String)] {
        match s {
            0 => &[],
            _ => &self.scopes[s as usize - 1],
        }
    }

    fn intern(&mut self, b: Vec<(String, String)>) -> ScopeId {
        if let Some(&s) = self.ids.get(&b) {
            return s;
        }
        self.scopes.push(b.clone());
        let s = self.scopes.len() as ScopeId;
        self.ids.insert(b, s);
        s
    }
}

pub(crate) struct Compiler<'a> {
    doc: &'a Value,
    opts: &'a SchemaOptions,
    limits: SchemaLimits,
    exprs: Vec<Expr>,
    cores: Vec<Core>,
    dfas: Vec<ByteDfa>,
    /// Compiled subschemas by (dynamic scope, JSON pointer).
    by_ptr: FxHashMap<(ScopeId, String), ExprId>,
    and_memo: FxHashMap<Vec<ExprId>, ExprId>,
    norm: Vec<Option<Vec<CoreId>>>,
    in_progress: Vec<bool>,
    ids: FxHashMap<String, String>,
    /// Base URI of each schema resource, by the pointer of its root (`""` for the document,
    /// `URI#` for a pre-loaded one).
    res_base: FxHashMap<String, String>,
    anchors: FxHashMap<String, String>,
    /// `$dynamicRef` state (see [`DynScopes`]).
    dyn_scopes: DynScopes,
    pub ignored: Vec<String>,
    true_e: ExprId,
    false_e: ExprId,
    any_dfa: u32,
    legacy_ref: bool,
    draft4: bool,
    pre_draft7: bool,
    ref_depth: usize,
    dfa_memo: FxHashMap<String, u32>,
    /// `anyOf` unions (their branches may overlap, which matters for `unevaluated*`).
    anyof: FxHashSet<ExprId>,
    /// Positive schemas inside a double `not` (their annotations are dropped by the spec).
    unannotated: FxHashSet<ExprId>,
}

fn esc_ptr(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn dfa_err(e: DfaError, kw: &str, ptr: &str, limits: &SchemaLimits) -> SchemaError {
    match e {
        DfaError::TooBig => SchemaError::limit("dfa_states", limits.max_dfa_states),
        DfaError::Regex(m) => {
            if m.contains("not supported") || m.contains("look") || m.contains("back-reference") {
                SchemaError::unsupported(kw, ptr)
            } else {
                SchemaError::invalid(ptr, format!("{kw}: {m}"))
            }
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn join_uri(base: &str, r: &str) -> String {
    if r.contains("://") || base.is_empty() {
        return r.to_string();
    }
    if r.starts_with('/') {
        if let Some(i) = base.find("://") {
            if let Some(j) = base[i + 3..].find('/') {
                return format!("{}{}", &base[..i + 3 + j], r);
            }
        }
        return r.to_string();
    }
    match base.rfind('/') {
        Some(i) => format!("{}{}", &base[..=i], r),
        None => r.to_string(),
    }
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(doc: &'a Value, opts: &'a SchemaOptions) -> Result<Self, SchemaError> {
        let legacy_ref = doc.get("$schema").and_then(Value::as_str).is_some_and(|s| {
            s.contains("draft-04") || s.contains("draft-06") || s.contains("draft-07")
        });
        let mut c = Compiler {
            doc,
            opts,
            limits: opts.limits.clone(),
            exprs: Vec::new(),
            cores: Vec::new(),
            dfas: Vec::new(),
            by_ptr: FxHashMap::default(),
            and_memo: FxHashMap::default(),
            norm: Vec::new(),
            in_progress: Vec::new(),
            ids: FxHashMap::default(),
            res_base: FxHashMap::default(),
            anchors: FxHashMap::default(),
            dyn_scopes: DynScopes::default(),
            ignored: Vec::new(),
            true_e: 0,
            false_e: 0,
            any_dfa: 0,
            legacy_ref,
            pre_draft7: doc.get("$schema").and_then(Value::as_str).is_some_and(|s| {
                s.contains("draft-04") || s.contains("draft-03") || s.contains("draft-06")
            }),
            draft4: doc
                .get("$schema")
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains("draft-04") || s.contains("draft-03")),
            ref_depth: 0,
            dfa_memo: FxHashMap::default(),
            anyof: FxHashSet::default(),
            unannotated: FxHashSet::default(),
        };
        c.dfas.push(string::any_content().clone());
        c.any_dfa = 0;
        let all = c.type_cores(T_ALL);
        c.true_e = c.push(Expr::Cores(all));
        c.false_e = c.push(Expr::Cores(Vec::new()));
        c.scan_ids(doc, "", "", IdKeyword::of(doc), false);
        // Pre-loaded documents: pointers into them are `URI#/json/pointer` (those into the
        // schema itself are empty or start with `/`).
        for (uri, d) in &opts.documents {
            let u = uri.split_once('#').map_or(uri.as_str(), |x| x.0);
            if u.is_empty() || u.starts_with('/') {
                return Err(SchemaError::invalid(
                    "",
                    format!("document URI {uri:?} is not absolute"),
                ));
            }
            let root = format!("{u}#");
            c.ids.entry(u.to_string()).or_insert_with(|| root.clone());
            c.scan_ids(d, &root, u, IdKeyword::of(d), false);
        }
        Ok(c)
    }

    fn push(&mut self, e: Expr) -> ExprId {
        self.exprs.push(e);
        self.norm.push(None);
        self.in_progress.push(false);
        (self.exprs.len() - 1) as ExprId
    }

    fn core(&mut self, c: Core) -> CoreId {
        self.cores.push(c);
        (self.cores.len() - 1) as CoreId
    }

    fn check_size(&self) -> Result<(), SchemaError> {
        if self.exprs.len() + self.cores.len() > self.limits.max_nodes {
            return Err(SchemaError::limit("nodes", self.limits.max_nodes));
        }
        Ok(())
    }

    fn add_dfa(&mut self, d: ByteDfa) -> u32 {
        self.dfas.push(d);
        (self.dfas.len() - 1) as u32
    }

    fn regex_dfa(&mut self, re: &str, kw: &str, ptr: &str) -> Result<u32, SchemaError> {
        if let Some(&d) = self.dfa_memo.get(re) {
            return Ok(d);
        }
        let d = string::dfa_from_regex(re, self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, kw, ptr, &self.limits))?;
        let id = self.add_dfa(d);
        self.dfa_memo.insert(re.to_string(), id);
        Ok(id)
    }

    fn dfa_product(
        &mut self,
        a: u32,
        b: u32,
        op: Op,
        kw: &str,
        ptr: &str,
    ) -> Result<u32, SchemaError> {
        let d = string::product(
            &self.dfas[a as usize],
            &self.dfas[b as usize],
            op,
            self.limits.max_dfa_states,
        )
        .map_err(|e| dfa_err(e, kw, ptr, &self.limits))?;
        Ok(self.add_dfa(d))
    }

    fn type_cores(&mut self, t: u8) -> Vec<CoreId> {
        let mut v = Vec::new();
        if t & T_NULL != 0 {
            v.push(self.core(Core::Null));
        }
        if t & T_BOOL != 0 {
            v.push(self.core(Core::Bool(3)));
        }
        if t & (T_NUM | T_INT) != 0 {
            let mut n = NumCore::any();
            n.integer = t & T_NUM == 0;
            v.push(self.core(Core::Number(n)));
        }
        if t & T_STR != 0 {
            v.push(self.core(Core::String(StrC { dfa: None, min: 0, max: u32::MAX })));
        }
        if t & T_ARR != 0 {
            let items = self.true_e;
            v.push(self.core(Core::Array(ArrC::new(Vec::new(), items, 0, u32::MAX))));
        }
        if t & T_OBJ != 0 {
            let additional = self.true_e;
            v.push(self.core(Core::Object(Box::new(ObjC {
                groups: vec![KeyGroup {
                    props: Vec::new(),
                    patterns: Vec::new(),
                    additional,
                    annot: false,
                    annot_all: false,
                }],
                required: Vec::new(),
                min: 0,
                max: u32::MAX,
                deps: Vec::new(),
                names: None,
            }))));
        }
        v
    }

    /// Record `$id`s, `$anchor`s and `$dynamicAnchor`s with the pointers of their subschemas,
    /// and the anchor names `$dynamicRef`s use. `kw` says which identifier keyword the
    /// document's draft has.
    /// `names` says `v` maps names to subschemas (`$defs`, `properties`, …): its keys are not
    /// keywords, so a definition called `default` or `$id` is still scanned.
    fn scan_ids(&mut self, v: &Value, ptr: &str, base: &str, kw: IdKeyword, names: bool) {
        match v {
            Value::Object(m) if names => {
                for (k, x) in m {
                    self.scan_ids(x, &format!("{ptr}/{}", esc_ptr(k)), base, kw, false);
                }
            }
            Value::Object(m) => {
                let mut base = base.to_string();
                // A plain `id` is taken only where it is a string in something that looks like
                // a schema: `id` is also a common property name and annotation.
                let plain_id = || {
                    m.get("id").filter(|i| {
                        i.is_string()
                            && (m.contains_key("type")
                                || m.contains_key("properties")
                                || m.contains_key("$schema")
                                || ptr.is_empty()
                                || ptr.ends_with('#'))
                    })
                };
                let idv = match kw {
                    IdKeyword::Dollar => m.get("$id"),
                    IdKeyword::Plain => plain_id(),
                    IdKeyword::Either => m.get("$id").or_else(plain_id),
                };
                // A document's root (`""`, or `URI#` for a pre-loaded one) is a resource.
                let mut root = ptr.is_empty()
                    || (!ptr.starts_with('/') && ptr.find('#') == Some(ptr.len() - 1));
                if let Some(id) = idv.and_then(Value::as_str) {
                    let (u, frag) = id.split_once('#').unwrap_or((id, ""));
                    if !u.is_empty() {
                        base = join_uri(&base, u);
                        self.ids.insert(base.clone(), ptr.to_string());
                        root = true;
                    }
                    if !frag.is_empty() && !frag.starts_with('/') {
                        self.anchors.insert(format!("{base}#{frag}"), ptr.to_string());
                    }
                }
                if root {
                    self.res_base.insert(ptr.to_string(), base.clone());
                }
                if let Some(a) = m.get("$anchor").and_then(Value::as_str) {
                    self.anchors.insert(format!("{base}#{a}"), ptr.to_string());
                }
                if let Some(a) = m.get("$dynamicAnchor").and_then(Value::as_str) {
                    // Also a plain anchor for `$ref` (2020-12 Core §8.2.2).
                    let key = format!("{base}#{a}");
                    self.anchors.insert(key.clone(), ptr.to_string());
                    self.dyn_scopes.keys.insert(key);
                    let res = self.resource_of(ptr).to_string();
                    self.dyn_scopes
                        .by_resource
                        .entry(res)
                        .or_default()
                        .push((a.to_string(), ptr.to_string()));
                }
                if m.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                    // 2019-09: an anchor with the reserved name `""` (no `$dynamicAnchor`
                    // name is empty), which `$recursiveRef` uses.
                    let res = self.resource_of(ptr).to_string();
                    self.dyn_scopes
                        .by_resource
                        .entry(res)
                        .or_default()
                        .push((String::new(), ptr.to_string()));
                }
                if m.contains_key("$recursiveRef") {
                    self.dyn_scopes.names.insert(String::new());
                }
                if let Some(r) = m.get("$dynamicRef").and_then(Value::as_str) {
                    if let Some((_, frag)) = r.split_once('#') {
                        if !frag.is_empty() && !frag.starts_with('/') {
                            self.dyn_scopes.names.insert(percent_decode(frag));
                        }
                    }
                }
                for (k, x) in m {
                    if matches!(k.as_str(), "enum" | "const" | "examples" | "default") {
                        continue;
                    }
                    let names = matches!(
                        k.as_str(),
                        "$defs"
                            | "definitions"
                            | "properties"
                            | "patternProperties"
                            | "dependentSchemas"
                            | "dependencies"
                    );
                    self.scan_ids(x, &format!("{ptr}/{}", esc_ptr(k)), &base, kw, names);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    self.scan_ids(x, &format!("{ptr}/{i}"), base, kw, false);
                }
            }
            _ => {}
        }
    }

    /// The pointer of the root of the innermost schema resource containing `ptr`.
    fn resource_of<'p>(&self, ptr: &'p str) -> &'p str {
        // Pointers into a pre-loaded document are `URI#/…`: never cut into the URI.
        let floor = if ptr.starts_with('/') { 0 } else { ptr.find('#').unwrap_or(0) };
        let mut p = ptr;
        loop {
            if self.res_base.contains_key(p) {
                return p;
            }
            match p.rfind('/') {
                Some(i) if i > floor || (floor == 0 && i == 0) => p = &p[..i],
                _ => return "",
            }
        }
    }

    /// The base URI of the innermost resource containing `ptr`.
    fn base_of(&self, ptr: &str) -> String {
        self.res_base.get(self.resource_of(ptr)).cloned().unwrap_or_default()
    }

    fn lookup(&self, ptr: &str) -> Option<&'a Value> {
        let (mut cur, ptr) = if ptr.is_empty() || ptr.starts_with('/') {
            (self.doc, ptr)
        } else {
            let (u, local) = ptr.split_once('#')?;
            (self.opts.documents.get(u)?, local)
        };
        if ptr.is_empty() {
            return Some(cur);
        }
        for tok in ptr.split('/').skip(1) {
            let t = tok.replace("~1", "/").replace("~0", "~");
            cur = match cur {
                Value::Object(m) => m.get(&t)?,
                Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// The subschema at a resolved reference target, within the `$ref` depth limit.
    fn follow_ref(&mut self, target: &str) -> Result<ExprId, SchemaError> {
        self.ref_depth += 1;
        if self.ref_depth > self.limits.max_ref_depth {
            return Err(SchemaError::limit("ref_depth", self.limits.max_ref_depth));
        }
        let e = self.schema_at(target);
        self.ref_depth -= 1;
        e
    }

    fn resolve_ref(&self, r: &str, ptr: &str) -> Result<String, SchemaError> {
        let base = self.base_of(ptr);
        let (u, frag) = r.split_once('#').unwrap_or((r, ""));
        let frag = percent_decode(frag);
        let res_ptr = if u.is_empty() {
            match self.ids.get(&base) {
                Some(p) => p.clone(),
                None => String::new(),
            }
        } else {
            let full = join_uri(&base, u);
            match self.ids.get(&full).or_else(|| self.ids.get(u)) {
                Some(p) => p.clone(),
                None => {
                    return Err(SchemaError::unsupported("$ref", ptr));
                }
            }
        };
        let target = if frag.is_empty() {
            res_ptr
        } else if frag.starts_with('/') {
            format!("{res_ptr}{frag}")
        } else {
            let key_base = if u.is_empty() { base.clone() } else { join_uri(&base, u) };
            match self.anchors.get(&format!("{key_base}#{frag}")) {
                Some(p) => p.clone(),
                None => {
                    return Err(SchemaError::new(super::SchemaErrorKind::DanglingRef {
                        reference: r.into(),
                        pointer: ptr.into(),
                    }))
                }
            }
        };
        if self.lookup(&target).is_none() {
            return Err(SchemaError::new(super::SchemaErrorKind::DanglingRef {
                reference: r.into(),
                pointer: ptr.into(),
            }));
        }
        Ok(target)
    }

    /// Compile the subschema at `ptr`.
    pub(crate) fn schema_at(&mut self, ptr: &str) -> Result<ExprId, SchemaError> {
        let scope = self.enter(ptr);
        let key = (scope, ptr.to_string());
        if let Some(&e) = self.by_ptr.get(&key) {
            return Ok(e);
        }
        let v = self
            .lookup(ptr)
            .ok_or_else(|| SchemaError::invalid(ptr, "pointer does not resolve"))?;
        let id = self.push(Expr::Pending);
        self.by_ptr.insert(key, id);
        self.check_size()?;
        let saved = std::mem::replace(&mut self.dyn_scopes.cur, scope);
        let e = self.schema(v, ptr);
        self.dyn_scopes.cur = saved;
        self.exprs[id as usize] = Expr::And(vec![e?]);
        Ok(id)
    }

    /// The dynamic scope inside the subschema at `ptr`, entered from the current one: the
    /// `$dynamicAnchor`s of its resource bind the names that are not bound yet.
    fn enter(&mut self, ptr: &str) -> ScopeId {
        let cur = self.dyn_scopes.cur;
        if self.dyn_scopes.names.is_empty() {
            return cur;
        }
        let Some(decl) = self.dyn_scopes.by_resource.get(self.resource_of(ptr)) else {
            return cur;
        };
        let mut b = self.dyn_scopes.bindings(cur).to_vec();
        let n = b.len();
        for (name, p) in decl {
            if self.dyn_scopes.names.contains(name) && !b.iter().any(|(m, _)| m == name) {
                b.push((name.clone(), p.clone()));
            }
        }
        if b.len() == n {
            return cur;
        }
        b.sort();
        self.dyn_scopes.intern(b)
    }

    /// Where `$dynamicRef: r` at `ptr` leads in the current dynamic scope: resolved like
    /// `$ref`, and when that target is a `$dynamicAnchor` of the fragment's name, the
    /// outermost anchor of that name in the dynamic scope instead.
    fn resolve_dynamic(&self, r: &str, ptr: &str) -> Result<String, SchemaError> {
        let target = self.resolve_ref(r, ptr)?;
        let (u, frag) = r.split_once('#').unwrap_or((r, ""));
        let frag = percent_decode(frag);
        if frag.is_empty() || frag.starts_with('/') {
            return Ok(target);
        }
        let base = self.base_of(ptr);
        let key_base = if u.is_empty() { base } else { join_uri(&base, u) };
        if !self.dyn_scopes.keys.contains(&format!("{key_base}#{frag}")) {
            return Ok(target);
        }
        let bound = self.dyn_scopes.bindings(self.dyn_scopes.cur).iter().find(|(n, _)| *n == frag);
        Ok(bound.map_or(target, |(_, p)| p.clone()))
    }

    /// Where `$recursiveRef: r` at `ptr` leads (2019-09 Core §8.2.4.2): resolved like `$ref`,
    /// and when that target has `$recursiveAnchor: true`, the outermost resource in the
    /// dynamic scope with `$recursiveAnchor: true` instead (the binding of the name `""`).
    fn resolve_recursive(&self, r: &str, ptr: &str) -> Result<String, SchemaError> {
        let target = self.resolve_ref(r, ptr)?;
        let anchored = self
            .lookup(&target)
            .is_some_and(|v| v.get("$recursiveAnchor") == Some(&Value::Bool(true)));
        if !anchored {
            return Ok(target);
        }
        let bound =
            self.dyn_scopes.bindings(self.dyn_scopes.cur).iter().find(|(n, _)| n.is_empty());
        Ok(bound.map_or(target, |(_, p)| p.clone()))
    }

    fn unsupported(&mut self, kw: &str, ptr: &str) -> Result<(), SchemaError> {
        if self.opts.lenient {
            self.ignored.push(format!("{kw} at {}", if ptr.is_empty() { "(root)" } else { ptr }));
            Ok(())
        } else {
            Err(SchemaError::unsupported(kw, ptr))
        }
    }

    fn schema(&mut self, v: &'a Value, ptr: &str) -> Result<ExprId, SchemaError> {
        let m = match v {
            Value::Bool(true) => return Ok(self.true_e),
            Value::Bool(false) => return Ok(self.false_e),
            Value::Object(m) => m,
            _ => return Err(SchemaError::invalid(ptr, "a schema must be an object or a boolean")),
        };
        let mut parts: Vec<ExprId> = Vec::new();
        // `$ref` (siblings ignored before 2019-09).
        if let Some(r) = m.get("$ref") {
            let r = r.as_str().ok_or_else(|| SchemaError::invalid(ptr, "$ref must be a string"))?;
            match self.resolve_ref(r, ptr) {
                Ok(target) => parts.push(self.follow_ref(&target)?),
                Err(e) => {
                    if matches!(e.kind(), super::SchemaErrorKind::Unsupported { .. }) {
                        self.unsupported("$ref", ptr)?;
                    } else {
                        return Err(e);
                    }
                }
            }
            if self.legacy_ref {
                return Ok(self.and(parts));
            }
        }
        for kw in ["$dynamicRef", "$recursiveRef"] {
            let Some(r) = m.get(kw) else { continue };
            let r = r
                .as_str()
                .ok_or_else(|| SchemaError::invalid(ptr, format!("{kw} must be a string")))?;
            let target = if kw == "$dynamicRef" {
                self.resolve_dynamic(r, ptr)
            } else {
                self.resolve_recursive(r, ptr)
            };
            match target {
                Ok(target) => parts.push(self.follow_ref(&target)?),
                Err(e) if matches!(e.kind(), super::SchemaErrorKind::Unsupported { .. }) => {
                    self.unsupported(kw, ptr)?
                }
                Err(e) => return Err(e),
            }
        }
        let uneval = m.contains_key("unevaluatedProperties") || m.contains_key("unevaluatedItems");
        let shape = self.shape(m, ptr)?;
        parts.push(shape);
        if let Some(x) = m.get("enum") {
            let a =
                x.as_array().ok_or_else(|| SchemaError::invalid(ptr, "enum must be an array"))?;
            // String members become one automaton (one alternative, however many members).
            let strs: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            let mut cs = Vec::new();
            if !strs.is_empty() {
                let d = self.regex_dfa(&string::literals_regex(strs), "enum", ptr)?;
                cs.push(self.core(Core::String(StrC { dfa: Some(d), min: 0, max: u32::MAX })));
            }
            for lit in a.iter().filter(|v| !v.is_string()) {
                cs.extend(self.literal(lit, ptr)?);
            }
            parts.push(self.push(Expr::Cores(cs)));
        }
        if let Some(x) = m.get("const") {
            let cs = self.literal(x, ptr)?;
            parts.push(self.push(Expr::Cores(cs)));
        }
        if let Some(x) = m.get("allOf") {
            let a =
                x.as_array().ok_or_else(|| SchemaError::invalid(ptr, "allOf must be an array"))?;
            for i in 0..a.len() {
                parts.push(self.schema_at(&format!("{ptr}/allOf/{i}"))?);
            }
        }
        if let Some(x) = m.get("anyOf") {
            let a =
                x.as_array().ok_or_else(|| SchemaError::invalid(ptr, "anyOf must be an array"))?;
            let mut alts = Vec::new();
            for i in 0..a.len() {
                alts.push(self.schema_at(&format!("{ptr}/anyOf/{i}"))?);
            }
            let e = self.push(Expr::Or(alts));
            self.anyof.insert(e);
            parts.push(e);
        }
        if let Some(x) = m.get("oneOf") {
            let a =
                x.as_array().ok_or_else(|| SchemaError::invalid(ptr, "oneOf must be an array"))?;
            let mut alts = Vec::new();
            for i in 0..a.len() {
                alts.push(self.schema_at(&format!("{ptr}/oneOf/{i}"))?);
            }
            let mut negs = Some(Vec::new());
            if a.len() <= 16 {
                for (i, b) in a.iter().enumerate() {
                    match self.negate(b, &format!("{ptr}/oneOf/{i}"), 0) {
                        Ok(n) => negs.as_mut().expect("some").push(n),
                        Err(e)
                            if matches!(e.kind(), super::SchemaErrorKind::Unsupported { .. }) =>
                        {
                            negs = None;
                            break;
                        }
                        Err(e) => return Err(e),
                    }
                }
            } else {
                negs = None;
            }
            parts.push(self.push(Expr::OneOf(alts, ptr.to_string(), negs)));
        }
        if let Some(x) = m.get("not") {
            match self.negate(x, &format!("{ptr}/not"), 0) {
                Ok(e) => parts.push(e),
                Err(e) if matches!(e.kind(), super::SchemaErrorKind::Unsupported { .. }) => {
                    self.unsupported("not", ptr)?
                }
                Err(e) => return Err(e),
            }
        }
        // `if`/`then`/`else` arrived in draft-07: older drafts ignore them.
        if let Some(c) = m.get("if").filter(|_| !self.pre_draft7) {
            let then = m.get("then");
            let els = m.get("else");
            // A lone `if` constrains nothing, but its annotations count for `unevaluated*`.
            if then.is_some() || els.is_some() || uneval {
                match self.negate(c, &format!("{ptr}/if"), 0) {
                    Ok(not_if) => {
                        let if_e = self.schema_at(&format!("{ptr}/if"))?;
                        let then_e = match then {
                            Some(_) => self.schema_at(&format!("{ptr}/then"))?,
                            None => self.true_e,
                        };
                        let else_e = match els {
                            Some(_) => self.schema_at(&format!("{ptr}/else"))?,
                            None => self.true_e,
                        };
                        let a = self.and(vec![if_e, then_e]);
                        let b = self.and(vec![not_if, else_e]);
                        parts.push(self.push(Expr::Or(vec![a, b])));
                    }
                    Err(e) if matches!(e.kind(), super::SchemaErrorKind::Unsupported { .. }) => {
                        self.unsupported("if", ptr)?
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        // dependentSchemas / dependencies (schema form).
        let mut dep_schemas: Vec<(String, String)> = Vec::new();
        if let Some(d) = m.get("dependentSchemas") {
            let d = d
                .as_object()
                .ok_or_else(|| SchemaError::invalid(ptr, "dependentSchemas must be an object"))?;
            for k in d.keys() {
                dep_schemas.push((k.clone(), format!("{ptr}/dependentSchemas/{}", esc_ptr(k))));
            }
        }
        if let Some(Value::Object(d)) = m.get("dependencies") {
            for (k, v) in d {
                if !v.is_array() {
                    dep_schemas.push((k.clone(), format!("{ptr}/dependencies/{}", esc_ptr(k))));
                }
            }
        }
        for (k, p) in dep_schemas {
            let s = self.schema_at(&p)?;
            let non_obj = self.type_cores(T_ALL & !T_OBJ);
            let non_obj = self.push(Expr::Cores(non_obj));
            let absent = self.obj_with(&[], &[(k.clone(), self.false_e)]);
            let present = self.obj_with(std::slice::from_ref(&k), &[]);
            let with = self.and(vec![present, s]);
            parts.push(self.push(Expr::Or(vec![non_obj, absent, with])));
        }
        let base = self.and(parts);
        if !uneval {
            return Ok(base);
        }
        let props = match m.get("unevaluatedProperties") {
            Some(_) => Some(self.schema_at(&format!("{ptr}/unevaluatedProperties"))?),
            None => None,
        };
        let items = match m.get("unevaluatedItems") {
            Some(_) => Some(self.schema_at(&format!("{ptr}/unevaluatedItems"))?),
            None => None,
        };
        Ok(self.push(Expr::Uneval { base, props, items, ptr: ptr.to_string() }))
    }

    /// `unevaluated*` is decided per normal-form alternative, which is exact when an instance
    /// matches at most one alternative with given annotations: every `anyOf` below `e` (through
    /// in-place applicators) must have pairwise disjoint branches, and no annotations may come
    /// from inside a double `not`.
    fn check_exclusive(&mut self, e: ExprId, kw: &str, ptr: &str) -> Result<(), SchemaError> {
        let mut stack = vec![e];
        let mut seen: FxHashSet<ExprId> = FxHashSet::default();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            if self.unannotated.contains(&x) {
                return Err(SchemaError::unsupported(kw, ptr));
            }
            match self.exprs[x as usize].clone() {
                Expr::And(a) => stack.extend(a),
                Expr::Or(a) => {
                    if self.anyof.contains(&x) {
                        let mut branches = Vec::new();
                        for &b in &a {
                            branches.push(self.normalize(b, ptr)?);
                        }
                        for i in 0..branches.len() {
                            for j in i + 1..branches.len() {
                                for &ci in &branches[i] {
                                    for &cj in &branches[j] {
                                        if !self.disjoint(ci, cj, 0) {
                                            return Err(SchemaError::unsupported(kw, ptr));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    stack.extend(a);
                }
                Expr::OneOf(a, _, negs) => {
                    stack.extend(a);
                    stack.extend(negs.into_iter().flatten());
                }
                Expr::Uneval { base, .. } => stack.push(base),
                Expr::Cores(_) | Expr::Pending => {}
            }
        }
        Ok(())
    }

    /// Core `c` with `unevaluatedProperties: props` / `unevaluatedItems: items` applied to
    /// what its own annotations leave unevaluated.
    fn apply_uneval(&mut self, c: CoreId, props: Option<ExprId>, items: Option<ExprId>) -> CoreId {
        let tr = self.true_e;
        match self.cores[c as usize].clone() {
            Core::Object(o) if props.is_some() && !o.groups.iter().any(|g| g.annot_all) => {
                let mut names: Vec<(String, ExprId)> = Vec::new();
                let mut patterns: Vec<(u32, ExprId)> = Vec::new();
                for g in o.groups.iter().filter(|g| g.annot) {
                    for (n, _) in &g.props {
                        if !names.iter().any(|(m, _)| m == n) {
                            names.push((n.clone(), tr));
                        }
                    }
                    for &(d, _) in &g.patterns {
                        if !patterns.iter().any(|&(x, _)| x == d) {
                            patterns.push((d, tr));
                        }
                    }
                }
                let mut o = *o;
                o.groups.push(KeyGroup {
                    props: names,
                    patterns,
                    additional: props.expect("checked"),
                    annot: true,
                    annot_all: true,
                });
                self.core(Core::Object(Box::new(o)))
            }
            Core::Array(mut a) if items.is_some() && !a.annot_all => {
                let mut u = items.expect("checked");
                if let Some(cn) = &a.contains {
                    // Items that match `contains` are evaluated by it.
                    u = self.push(Expr::Or(vec![cn.schema, u]));
                }
                for i in a.annot_len as usize..a.prefix.len() {
                    a.prefix[i] = self.and(vec![a.prefix[i], u]);
                }
                a.items = self.and(vec![a.items, u]);
                a.annot_all = true;
                self.core(Core::Array(a))
            }
            _ => c,
        }
    }

    /// An expression: non-objects, or objects with `required` and property schemas.
    fn obj_with(&mut self, required: &[String], props: &[(String, ExprId)]) -> ExprId {
        let additional = self.true_e;
        let c = self.core(Core::Object(Box::new(ObjC {
            groups: vec![KeyGroup {
                props: props.to_vec(),
                patterns: Vec::new(),
                additional,
                annot: false,
                annot_all: false,
            }],
            required: required.to_vec(),
            min: 0,
            max: u32::MAX,
            deps: Vec::new(),
            names: None,
        })));
        let mut cs = self.type_cores(T_ALL & !T_OBJ);
        cs.push(c);
        self.push(Expr::Cores(cs))
    }

    fn and(&mut self, parts: Vec<ExprId>) -> ExprId {
        let mut flat: Vec<ExprId> = Vec::new();
        for p in parts {
            if p == self.true_e {
                continue;
            }
            flat.push(p);
        }
        flat.sort_unstable();
        flat.dedup();
        match flat.len() {
            0 => self.true_e,
            1 => flat[0],
            _ => {
                if let Some(&e) = self.and_memo.get(&flat) {
                    return e;
                }
                let e = self.push(Expr::And(flat.clone()));
                self.and_memo.insert(flat, e);
                e
            }
        }
    }

    fn get_u32(v: &Value, ptr: &str, kw: &str) -> Result<u32, SchemaError> {
        match v.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(f.min(u32::MAX as f64) as u32),
            _ => Err(SchemaError::invalid(ptr, format!("{kw} must be a non-negative integer"))),
        }
    }

    fn get_dec(v: &Value, ptr: &str, kw: &str) -> Result<Dec, SchemaError> {
        match v {
            Value::Number(n) => Dec::from_json(n)
                .ok_or_else(|| SchemaError::invalid(ptr, format!("{kw}: bad number"))),
            _ => Err(SchemaError::invalid(ptr, format!("{kw} must be a number"))),
        }
    }

    /// The typed part of a schema object: `type` plus every type-specific keyword.
    fn shape(&mut self, m: &'a Map<String, Value>, ptr: &str) -> Result<ExprId, SchemaError> {
        let mut types = T_ALL;
        if let Some(t) = m.get("type") {
            let one = |s: &str| -> Result<u8, SchemaError> {
                Ok(match s {
                    "null" => T_NULL,
                    "boolean" => T_BOOL,
                    "integer" => T_INT,
                    "number" => T_NUM | T_INT,
                    "string" => T_STR,
                    "array" => T_ARR,
                    "object" => T_OBJ,
                    _ => return Err(SchemaError::invalid(ptr, format!("unknown type {s:?}"))),
                })
            };
            types = match t {
                Value::String(s) => one(s)?,
                Value::Array(a) => {
                    let mut x = 0;
                    for s in a {
                        x |= one(s.as_str().ok_or_else(|| {
                            SchemaError::invalid(
                                ptr,
                                "type must be a string or an array of strings",
                            )
                        })?)?;
                    }
                    x
                }
                _ => {
                    return Err(SchemaError::invalid(
                        ptr,
                        "type must be a string or an array of strings",
                    ))
                }
            };
        }
        if m.get("nullable") == Some(&Value::Bool(true)) && types != T_ALL {
            types |= T_NULL;
        }
        let mut cores = Vec::new();
        if types & T_NULL != 0 {
            cores.push(self.core(Core::Null));
        }
        if types & T_BOOL != 0 {
            cores.push(self.core(Core::Bool(3)));
        }
        if types & (T_INT | T_NUM) != 0 {
            let n = self.num_shape(m, ptr, types & T_NUM == 0)?;
            if let Some(n) = n {
                cores.push(self.core(Core::Number(n)));
            }
        }
        if types & T_STR != 0 {
            let s = self.str_shape(m, ptr)?;
            cores.push(self.core(Core::String(s)));
        }
        if types & T_ARR != 0 {
            let a = self.arr_shape(m, ptr)?;
            cores.push(self.core(Core::Array(a)));
        }
        if types & T_OBJ != 0 {
            let o = self.obj_shape(m, ptr)?;
            cores.push(self.core(Core::Object(Box::new(o))));
        }
        Ok(self.push(Expr::Cores(cores)))
    }

    fn num_shape(
        &mut self,
        m: &Map<String, Value>,
        ptr: &str,
        integer: bool,
    ) -> Result<Option<NumCore>, SchemaError> {
        let mut n = NumCore::any();
        n.integer = integer;
        n.int_syntax = integer && self.draft4;
        let mut lo_parts: Vec<(Dec, bool)> = Vec::new();
        let mut hi_parts: Vec<(Dec, bool)> = Vec::new();
        if let Some(v) = m.get("minimum") {
            let d = Self::get_dec(v, ptr, "minimum")?;
            let ex = m.get("exclusiveMinimum") == Some(&Value::Bool(true));
            lo_parts.push((d, ex));
        }
        if let Some(v) = m.get("maximum") {
            let d = Self::get_dec(v, ptr, "maximum")?;
            let ex = m.get("exclusiveMaximum") == Some(&Value::Bool(true));
            hi_parts.push((d, ex));
        }
        match m.get("exclusiveMinimum") {
            Some(Value::Bool(_)) | None => {}
            Some(v) => lo_parts.push((Self::get_dec(v, ptr, "exclusiveMinimum")?, true)),
        }
        match m.get("exclusiveMaximum") {
            Some(Value::Bool(_)) | None => {}
            Some(v) => hi_parts.push((Self::get_dec(v, ptr, "exclusiveMaximum")?, true)),
        }
        for (d, ex) in lo_parts {
            n = n.merge(&NumCore { lo: Some((d, ex)), ..NumCore::any() }).expect("no multiple");
        }
        for (d, ex) in hi_parts {
            n = n.merge(&NumCore { hi: Some((d, ex)), ..NumCore::any() }).expect("no multiple");
        }
        if let Some(v) = m.get("multipleOf") {
            let q = Self::get_dec(v, ptr, "multipleOf")?;
            if q.is_zero() || q < Dec::zero() {
                return Err(SchemaError::invalid(ptr, "multipleOf must be > 0"));
            }
            // Merged so that `integer` folds into the step (see `NumCore::merge`).
            match n.merge(&NumCore { multiple: Some(q), ..NumCore::any() }) {
                Ok(t) if t.multiple_supported() => n = t,
                _ => self.unsupported("multipleOf", ptr)?,
            }
        }
        Ok(Some(n))
    }

    fn str_shape(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<StrC, SchemaError> {
        let mut s = StrC { dfa: None, min: 0, max: u32::MAX };
        if let Some(v) = m.get("minLength") {
            s.min = Self::get_u32(v, ptr, "minLength")?;
        }
        if let Some(v) = m.get("maxLength") {
            s.max = Self::get_u32(v, ptr, "maxLength")?;
        }
        if let Some(v) = m.get("pattern") {
            let p =
                v.as_str().ok_or_else(|| SchemaError::invalid(ptr, "pattern must be a string"))?;
            match string::translate_ecma(p) {
                Ok(re) => match self.regex_dfa(&re, "pattern", ptr) {
                    Ok(d) => s.dfa = Some(d),
                    Err(e) if matches!(e.kind(), super::SchemaErrorKind::Unsupported { .. }) => {
                        self.unsupported("pattern", ptr)?
                    }
                    Err(e) => return Err(e),
                },
                Err(msg) => {
                    if msg.contains("not supported") {
                        self.unsupported("pattern", ptr)?;
                    } else {
                        return Err(SchemaError::invalid(ptr, format!("pattern: {msg}")));
                    }
                }
            }
        }
        if let Some(v) = m.get("format") {
            let f =
                v.as_str().ok_or_else(|| SchemaError::invalid(ptr, "format must be a string"))?;
            // Annotate mode: every format is an annotation (the string must still be a string).
            let assert = self.opts.formats == FormatMode::Assert;
            if assert && string::UNSUPPORTED_FORMATS.contains(&f) {
                self.unsupported("format", ptr)?;
            }
            if let Some(re) = string::format_regex(f).filter(|_| assert) {
                let d = match self.dfa_memo.get(&re) {
                    Some(&d) => d,
                    None => {
                        let d = string::format_dfa(f, &re, self.limits.max_dfa_states)
                            .map_err(|e| dfa_err(e, "format", ptr, &self.limits))?;
                        let id = self.add_dfa(d);
                        self.dfa_memo.insert(re, id);
                        id
                    }
                };
                s.dfa = Some(match s.dfa {
                    None => d,
                    Some(p) => self.dfa_product(p, d, Op::And, "format", ptr)?,
                });
            }
        }
        Ok(s)
    }

    fn arr_shape(&mut self, m: &'a Map<String, Value>, ptr: &str) -> Result<ArrC, SchemaError> {
        let mut a = ArrC::new(Vec::new(), self.true_e, 0, u32::MAX);
        if let Some(v) = m.get("minItems") {
            a.min = Self::get_u32(v, ptr, "minItems")?;
        }
        if let Some(v) = m.get("maxItems") {
            a.max = Self::get_u32(v, ptr, "maxItems")?;
        }
        if let Some(Value::Array(p)) = m.get("prefixItems") {
            for i in 0..p.len() {
                a.prefix.push(self.schema_at(&format!("{ptr}/prefixItems/{i}"))?);
            }
            if m.get("items").is_some() {
                a.items = self.schema_at(&format!("{ptr}/items"))?;
                a.annot_all = true;
            }
            a.annot_len = p.len() as u32;
        } else {
            match m.get("items") {
                Some(Value::Array(p)) => {
                    for i in 0..p.len() {
                        a.prefix.push(self.schema_at(&format!("{ptr}/items/{i}"))?);
                    }
                    a.annot_len = p.len() as u32;
                    if m.get("additionalItems").is_some() {
                        a.items = self.schema_at(&format!("{ptr}/additionalItems"))?;
                        a.annot_all = true;
                    }
                }
                Some(_) => {
                    a.items = self.schema_at(&format!("{ptr}/items"))?;
                    a.annot_all = true;
                }
                None => {}
            }
        }
        if let Some(c) = m.get("contains") {
            let cp = format!("{ptr}/contains");
            let schema = self.schema_at(&cp)?;
            let min = match m.get("minContains") {
                Some(v) => Self::get_u32(v, ptr, "minContains")?,
                None => 1,
            };
            let mut max = match m.get("maxContains") {
                Some(v) => Self::get_u32(v, ptr, "maxContains")?,
                None => u32::MAX,
            };
            let neg = match self.negate(c, &cp, 0) {
                Ok(n) => Some(n),
                Err(e) if matches!(e.kind(), super::SchemaErrorKind::Unsupported { .. }) => None,
                Err(e) => return Err(e),
            };
            if max != u32::MAX && neg.is_none() {
                // Refusing a further match needs the items that do *not* match.
                self.unsupported("maxContains", ptr)?;
                max = u32::MAX;
            }
            // Kept even when it constrains nothing (`minContains: 0`): matching items are
            // evaluated for `unevaluatedItems`.
            a.contains = Some(ContainsC { schema, neg, min, max });
        }
        if let Some(u) = m.get("uniqueItems") {
            let u = u
                .as_bool()
                .ok_or_else(|| SchemaError::invalid(ptr, "uniqueItems must be a boolean"))?;
            a.unique = u.then(|| ptr.to_string());
        }
        Ok(a)
    }

    fn obj_shape(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<ObjC, SchemaError> {
        let mut g = KeyGroup {
            props: Vec::new(),
            patterns: Vec::new(),
            additional: self.true_e,
            annot: true,
            annot_all: m.contains_key("additionalProperties"),
        };
        if let Some(p) = m.get("properties") {
            let p = p
                .as_object()
                .ok_or_else(|| SchemaError::invalid(ptr, "properties must be an object"))?;
            for k in p.keys() {
                let e = self.schema_at(&format!("{ptr}/properties/{}", esc_ptr(k)))?;
                g.props.push((k.clone(), e));
            }
        }
        if let Some(p) = m.get("patternProperties") {
            let p = p
                .as_object()
                .ok_or_else(|| SchemaError::invalid(ptr, "patternProperties must be an object"))?;
            for k in p.keys() {
                let re = string::translate_ecma(k).map_err(|msg| {
                    if msg.contains("not supported") {
                        SchemaError::unsupported("patternProperties", ptr)
                    } else {
                        SchemaError::invalid(ptr, format!("patternProperties: {msg}"))
                    }
                })?;
                let d = self.regex_dfa(&re, "patternProperties", ptr)?;
                let e = self.schema_at(&format!("{ptr}/patternProperties/{}", esc_ptr(k)))?;
                g.patterns.push((d, e));
            }
        }
        if m.get("additionalProperties").is_some() {
            g.additional = self.schema_at(&format!("{ptr}/additionalProperties"))?;
        }
        let mut o = ObjC {
            groups: vec![g],
            required: Vec::new(),
            min: 0,
            max: u32::MAX,
            deps: Vec::new(),
            names: None,
        };
        if let Some(r) = m.get("required") {
            let r = r
                .as_array()
                .ok_or_else(|| SchemaError::invalid(ptr, "required must be an array"))?;
            for k in r {
                let k = k
                    .as_str()
                    .ok_or_else(|| SchemaError::invalid(ptr, "required must hold strings"))?;
                if !o.required.iter().any(|x| x == k) {
                    o.required.push(k.to_string());
                }
            }
        }
        if let Some(v) = m.get("minProperties") {
            o.min = Self::get_u32(v, ptr, "minProperties")?;
        }
        if let Some(v) = m.get("maxProperties") {
            o.max = Self::get_u32(v, ptr, "maxProperties")?;
        }
        let mut deps_src: Vec<(&String, &Value)> = Vec::new();
        if let Some(Value::Object(d)) = m.get("dependentRequired") {
            deps_src.extend(d.iter());
        }
        if let Some(Value::Object(d)) = m.get("dependencies") {
            deps_src.extend(d.iter().filter(|(_, v)| v.is_array()));
        }
        for (k, v) in deps_src {
            let a = v.as_array().ok_or_else(|| {
                SchemaError::invalid(ptr, "dependentRequired values must be arrays")
            })?;
            let mut names = Vec::new();
            for x in a {
                names.push(
                    x.as_str()
                        .ok_or_else(|| {
                            SchemaError::invalid(ptr, "dependentRequired must hold strings")
                        })?
                        .to_string(),
                );
            }
            o.deps.push((k.clone(), names));
        }
        if m.contains_key("propertyNames") {
            let e = self.schema_at(&format!("{ptr}/propertyNames"))?;
            let cores = self.normalize(e, &format!("{ptr}/propertyNames"))?;
            let mut dfa: Option<u32> = None;
            for c in cores {
                if let Core::String(s) = self.cores[c as usize].clone() {
                    let d = self.fold_str(&s, ptr)?;
                    dfa = Some(match dfa {
                        None => d,
                        Some(x) => self.dfa_product(x, d, Op::Or, "propertyNames", ptr)?,
                    });
                }
            }
            let d = match dfa {
                Some(d) => d,
                None => self.regex_dfa(&string::literals_regex([]), "propertyNames", ptr)?,
            };
            o.names = Some(d);
        }
        Ok(o)
    }

    /// One automaton for a string constraint, lengths folded in.
    fn fold_str(&mut self, s: &StrC, ptr: &str) -> Result<u32, SchemaError> {
        let base = s.dfa.unwrap_or(self.any_dfa);
        if s.min == 0 && s.max == u32::MAX {
            return Ok(base);
        }
        let l = string::length_dfa(s.min, s.max, self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, "maxLength", ptr, &self.limits))?;
        let l = self.add_dfa(l);
        if s.dfa.is_none() {
            return Ok(l);
        }
        self.dfa_product(base, l, Op::And, "maxLength", ptr)
    }

    /// Cores of one literal value (`const`, an `enum` member).
    fn literal(&mut self, v: &Value, ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        self.check_size()?;
        Ok(match v {
            Value::Null => vec![self.core(Core::Null)],
            Value::Bool(b) => vec![self.core(Core::Bool(if *b { 2 } else { 1 }))],
            Value::Number(n) => {
                let d = Dec::from_json(n).ok_or_else(|| SchemaError::invalid(ptr, "bad number"))?;
                vec![self.core(Core::Number(NumCore::point(d)))]
            }
            Value::String(s) => {
                let d = self.regex_dfa(&string::literals_regex([s.as_str()]), "enum", ptr)?;
                vec![self.core(Core::String(StrC { dfa: Some(d), min: 0, max: u32::MAX }))]
            }
            Value::Array(a) => {
                let mut prefix = Vec::new();
                for x in a {
                    let cs = self.literal(x, ptr)?;
                    prefix.push(self.push(Expr::Cores(cs)));
                }
                let n = a.len() as u32;
                let items = self.false_e;
                vec![self.core(Core::Array(ArrC::new(prefix, items, n, n)))]
            }
            Value::Object(m) => {
                let mut props = Vec::new();
                for (k, x) in m {
                    let cs = self.literal(x, ptr)?;
                    props.push((k.clone(), self.push(Expr::Cores(cs))));
                }
                let additional = self.false_e;
                vec![self.core(Core::Object(Box::new(ObjC {
                    groups: vec![KeyGroup {
                        props,
                        patterns: Vec::new(),
                        additional,
                        annot: false,
                        annot_all: false,
                    }],
                    required: m.keys().cloned().collect(),
                    min: 0,
                    max: u32::MAX,
                    deps: Vec::new(),
                    names: None,
                })))]
            }
        })
    }

    /// `not` pushed inwards: the expression for the complement of the schema at `ptr`.
    fn negate(&mut self, v: &'a Value, ptr: &str, depth: usize) -> Result<ExprId, SchemaError> {
        let scope = self.enter(ptr);
        let saved = std::mem::replace(&mut self.dyn_scopes.cur, scope);
        let r = self.negate_in(v, ptr, depth);
        self.dyn_scopes.cur = saved;
        r
    }

    /// [`Compiler::negate`] inside the dynamic scope of `ptr`.
    fn negate_in(&mut self, v: &'a Value, ptr: &str, depth: usize) -> Result<ExprId, SchemaError> {
        if depth > 32 {
            return Err(SchemaError::unsupported("not", ptr));
        }
        let m = match v {
            Value::Bool(true) => return Ok(self.false_e),
            Value::Bool(false) => return Ok(self.true_e),
            Value::Object(m) => m,
            _ => return Err(SchemaError::invalid(ptr, "a schema must be an object or a boolean")),
        };
        // ¬(k1 ∧ k2 ∧ …) = ¬k1 ∨ ¬k2 ∨ …. A type-specific keyword holds vacuously for other
        // types, so its negation only admits values of its own type.
        let mut alts: Vec<ExprId> = Vec::new();
        for (k, x) in m {
            let kp = format!("{ptr}/{}", esc_ptr(k));
            match k.as_str() {
                // An asserted format would need the complement of its automaton.
                "format"
                    if self.opts.formats == FormatMode::Assert
                        && x.as_str().is_some_and(|f| {
                            string::format_regex(f).is_some()
                                || string::UNSUPPORTED_FORMATS.contains(&f)
                        }) =>
                {
                    return Err(SchemaError::unsupported("not", ptr));
                }
                "title" | "description" | "default" | "examples" | "$comment" | "$id"
                | "$schema" | "$anchor" | "$defs" | "definitions" | "readOnly" | "writeOnly"
                | "deprecated" | "format" => {}
                _ if k.starts_with("x-") => {}
                "type" => {
                    let mut s = T_ALL;
                    let sub: Map<String, Value> =
                        [("type".to_string(), x.clone())].into_iter().collect();
                    let _ = sub;
                    let names: Vec<&str> = match x {
                        Value::String(s) => vec![s.as_str()],
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        _ => return Err(SchemaError::invalid(ptr, "bad type")),
                    };
                    let mut has_int_only = false;
                    let mut has_num = false;
                    for n in &names {
                        s &= !match *n {
                            "null" => T_NULL,
                            "boolean" => T_BOOL,
                            "integer" => {
                                has_int_only = true;
                                T_INT
                            }
                            "number" => {
                                has_num = true;
                                T_NUM | T_INT
                            }
                            "string" => T_STR,
                            "array" => T_ARR,
                            "object" => T_OBJ,
                            _ => return Err(SchemaError::invalid(ptr, "unknown type")),
                        };
                    }
                    let cs = if has_int_only && !has_num {
                        // Not an integer: the other types, and numbers with a fraction.
                        let mut cs = self.type_cores(s & !(T_INT | T_NUM));
                        let mut n = NumCore::any();
                        n.frac = true;
                        cs.push(self.core(Core::Number(n)));
                        cs
                    } else {
                        self.type_cores(s & !T_INT | if s & T_NUM != 0 { T_NUM } else { 0 })
                    };
                    alts.push(self.push(Expr::Cores(cs)));
                }
                "const" | "enum" => {
                    let vals: Vec<&Value> = if k == "const" {
                        vec![x]
                    } else {
                        x.as_array()
                            .ok_or_else(|| SchemaError::invalid(ptr, "enum must be an array"))?
                            .iter()
                            .collect()
                    };
                    alts.push(self.not_literals(&vals, ptr)?);
                }
                "required" => {
                    let r = x
                        .as_array()
                        .ok_or_else(|| SchemaError::invalid(ptr, "required must be an array"))?;
                    for n in r {
                        let n = n.as_str().ok_or_else(|| {
                            SchemaError::invalid(ptr, "required must hold strings")
                        })?;
                        let f = self.false_e;
                        let c = self.core(Core::Object(Box::new(ObjC {
                            groups: vec![KeyGroup {
                                props: vec![(n.to_string(), f)],
                                patterns: Vec::new(),
                                additional: self.true_e,
                                annot: false,
                                annot_all: false,
                            }],
                            required: Vec::new(),
                            min: 0,
                            max: u32::MAX,
                            deps: Vec::new(),
                            names: None,
                        })));
                        alts.push(self.push(Expr::Cores(vec![c])));
                    }
                }
                "properties" => {
                    let p = x
                        .as_object()
                        .ok_or_else(|| SchemaError::invalid(ptr, "properties must be an object"))?;
                    for (name, sub) in p {
                        let ns = self.negate(sub, &format!("{kp}/{}", esc_ptr(name)), depth + 1)?;
                        let c = self.core(Core::Object(Box::new(ObjC {
                            groups: vec![KeyGroup {
                                props: vec![(name.clone(), ns)],
                                patterns: Vec::new(),
                                additional: self.true_e,
                                annot: false,
                                annot_all: false,
                            }],
                            required: vec![name.clone()],
                            min: 0,
                            max: u32::MAX,
                            deps: Vec::new(),
                            names: None,
                        })));
                        alts.push(self.push(Expr::Cores(vec![c])));
                    }
                }
                "anyOf" | "allOf" | "oneOf" => {
                    let a = x
                        .as_array()
                        .ok_or_else(|| SchemaError::invalid(ptr, "must be an array"))?;
                    if k == "oneOf" && a.len() > 1 {
                        return Err(SchemaError::unsupported("not", ptr));
                    }
                    let mut negs = Vec::new();
                    for (i, sub) in a.iter().enumerate() {
                        negs.push(self.negate(sub, &format!("{kp}/{i}"), depth + 1)?);
                    }
                    if k == "allOf" {
                        alts.push(self.push(Expr::Or(negs)));
                    } else {
                        alts.push(self.and(negs));
                    }
                }
                "not" => {
                    let e = self.schema_at(&kp)?;
                    self.unannotated.insert(e);
                    alts.push(e);
                }
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    let r = x.as_str().ok_or_else(|| {
                        SchemaError::invalid(ptr, format!("{k} must be a string"))
                    })?;
                    let t = match k.as_str() {
                        "$ref" => self.resolve_ref(r, ptr)?,
                        "$dynamicRef" => self.resolve_dynamic(r, ptr)?,
                        _ => self.resolve_recursive(r, ptr)?,
                    };
                    let tv = self.lookup(&t).expect("resolved");
                    alts.push(self.negate(tv, &t, depth + 1)?);
                }
                "multipleOf" => {
                    // Numbers that are not multiples (other types pass `multipleOf`).
                    let q = Self::get_dec(x, ptr, k)?;
                    if q.is_zero() || q < Dec::zero() {
                        return Err(SchemaError::invalid(ptr, "multipleOf must be > 0"));
                    }
                    let n = NumCore { not_multiples: vec![q], ..NumCore::any() };
                    if !n.multiple_supported() {
                        return Err(SchemaError::unsupported("not", ptr));
                    }
                    let cs = vec![self.core(Core::Number(n))];
                    alts.push(self.push(Expr::Cores(cs)));
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    let d = Self::get_dec(x, ptr, k)?;
                    let mut n = NumCore::any();
                    match k.as_str() {
                        "minimum" => n.hi = Some((d, true)),
                        "maximum" => n.lo = Some((d, true)),
                        "exclusiveMinimum" => n.hi = Some((d, false)),
                        _ => n.lo = Some((d, false)),
                    }
                    let cs = vec![self.core(Core::Number(n))];
                    alts.push(self.push(Expr::Cores(cs)));
                }
                "minProperties" | "maxProperties" | "minItems" | "maxItems" => {
                    let n = Self::get_u32(x, ptr, k)?;
                    let (lo, hi) = if k.starts_with("min") {
                        if n == 0 {
                            continue; // `≥ 0` holds for every value of the type
                        }
                        (0, n - 1)
                    } else {
                        (n.saturating_add(1), u32::MAX)
                    };
                    let c = if k.ends_with("Items") {
                        let tr = self.true_e;
                        self.arr_core(Vec::new(), tr, lo, hi)
                    } else {
                        let c = self.obj_core(Vec::new(), Vec::new(), lo);
                        if let Core::Object(o) = &mut self.cores[c as usize] {
                            o.max = hi;
                        }
                        c
                    };
                    alts.push(self.push(Expr::Cores(vec![c])));
                }
                "items" | "prefixItems" if x.is_array() => {
                    // Some listed position holds a non-matching item (`additionalItems`, if
                    // any, is negated on its own below).
                    let a = x.as_array().expect("array");
                    let tr = self.true_e;
                    for (i, sub) in a.iter().enumerate() {
                        let ni = self.negate(sub, &format!("{kp}/{i}"), depth + 1)?;
                        let mut prefix = vec![tr; i];
                        prefix.push(ni);
                        let c = self.arr_core(prefix, tr, i as u32 + 1, u32::MAX);
                        alts.push(self.push(Expr::Cores(vec![c])));
                    }
                }
                "items" | "contains"
                    if !(m.contains_key("prefixItems")
                        || m.contains_key("minContains")
                        || m.contains_key("maxContains")
                        || (k == "items" && m.contains_key("additionalItems"))) =>
                {
                    // ¬(every item ∈ S) = some item ∈ ¬S (`contains: ¬S`);
                    // ¬(some item ∈ C) = every item ∈ ¬C.
                    let pos = self.schema_at(&kp)?;
                    let neg = self.negate(x, &kp, depth + 1)?;
                    let tr = self.true_e;
                    let c = if k == "items" {
                        let contains =
                            Some(ContainsC { schema: neg, neg: Some(pos), min: 1, max: u32::MAX });
                        self.core(Core::Array(ArrC {
                            contains,
                            ..ArrC::new(Vec::new(), tr, 0, u32::MAX)
                        }))
                    } else {
                        self.arr_core(Vec::new(), neg, 0, u32::MAX)
                    };
                    alts.push(self.push(Expr::Cores(vec![c])));
                }
                "minLength" | "maxLength" | "pattern" => {
                    let mut s = StrC { dfa: None, min: 0, max: u32::MAX };
                    match k.as_str() {
                        "minLength" => {
                            let n = Self::get_u32(x, ptr, k)?;
                            if n == 0 {
                                continue;
                            }
                            s.max = n - 1;
                        }
                        "maxLength" => {
                            s.min = Self::get_u32(x, ptr, k)?.saturating_add(1);
                        }
                        _ => {
                            let p = x.as_str().ok_or_else(|| {
                                SchemaError::invalid(ptr, "pattern must be a string")
                            })?;
                            let re = string::translate_ecma(p)
                                .map_err(|_| SchemaError::unsupported("not", ptr))?;
                            let d = self.regex_dfa(&re, "pattern", ptr)?;
                            let c = string::complement(
                                &self.dfas[d as usize],
                                self.limits.max_dfa_states,
                            )
                            .map_err(|e| dfa_err(e, "not", ptr, &self.limits))?;
                            s.dfa = Some(self.add_dfa(c));
                        }
                    }
                    let cs = vec![self.core(Core::String(s))];
                    alts.push(self.push(Expr::Cores(cs)));
                }
                // Keywords the engine knows but cannot negate (or only in the forms above).
                "additionalProperties"
                | "patternProperties"
                | "propertyNames"
                | "dependencies"
                | "dependentRequired"
                | "dependentSchemas"
                | "if"
                | "additionalItems"
                | "minContains"
                | "maxContains"
                | "items"
                | "prefixItems"
                | "contains"
                | "unevaluatedProperties"
                | "unevaluatedItems" => return Err(SchemaError::unsupported("not", ptr)),
                "uniqueItems" if x != &Value::Bool(false) => {
                    return Err(SchemaError::unsupported("not", ptr))
                }
                "nullable" if x == &Value::Bool(true) => {
                    return Err(SchemaError::unsupported("not", ptr))
                }
                // Anything else constrains nothing on the positive side either (unknown
                // keywords, `then`/`else` without `if`, `content*`, anchors): nothing to negate.
                _ => {}
            }
        }
        Ok(self.push(Expr::Or(alts)))
    }

    /// Every value except the given literals (scalars only).
    fn not_literals(&mut self, vals: &[&Value], ptr: &str) -> Result<ExprId, SchemaError> {
        let mut null_ok = true;
        let mut compound: Vec<&Value> = Vec::new();
        let mut bools = 3u8;
        let mut strs: Vec<&str> = Vec::new();
        let mut nums: Vec<Dec> = Vec::new();
        for v in vals {
            match v {
                Value::Null => null_ok = false,
                Value::Bool(b) => bools &= if *b { 1 } else { 2 },
                Value::String(s) => strs.push(s),
                Value::Number(n) => nums.push(
                    Dec::from_json(n).ok_or_else(|| SchemaError::invalid(ptr, "bad number"))?,
                ),
                _ => compound.push(v),
            }
        }
        let mut cs = Vec::new();
        if null_ok {
            cs.push(self.core(Core::Null));
        }
        if bools != 0 {
            cs.push(self.core(Core::Bool(bools)));
        }
        let lit = self.regex_dfa(&string::literals_regex(strs.iter().copied()), "enum", ptr)?;
        let comp = string::complement(&self.dfas[lit as usize], self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, "not", ptr, &self.limits))?;
        let comp = self.add_dfa(comp);
        cs.push(self.core(Core::String(StrC { dfa: Some(comp), min: 0, max: u32::MAX })));
        nums.sort();
        nums.dedup();
        let mut prev: Option<Dec> = None;
        for d in nums.iter().chain(std::iter::once(&Dec::zero()).filter(|_| false)) {
            let n = NumCore {
                lo: prev.clone().map(|p| (p, true)),
                hi: Some((d.clone(), true)),
                ..NumCore::any()
            };
            cs.push(self.core(Core::Number(n)));
            prev = Some(d.clone());
        }
        let n = NumCore { lo: prev.map(|p| (p, true)), ..NumCore::any() };
        cs.push(self.core(Core::Number(n)));
        let arr = self.type_cores(T_ARR | T_OBJ);
        cs.extend(arr);
        let mut parts = vec![self.push(Expr::Cores(cs))];
        for v in compound {
            parts.push(self.not_compound(v, ptr)?);
        }
        Ok(self.and(parts))
    }

    /// An array core with these items and length bounds (no `contains`, no `uniqueItems`).
    fn arr_core(&mut self, prefix: Vec<ExprId>, items: ExprId, min: u32, max: u32) -> CoreId {
        self.core(Core::Array(ArrC::new(prefix, items, min, max)))
    }

    /// An object core with these property schemas, required keys and minimum size.
    fn obj_core(
        &mut self,
        props: Vec<(String, ExprId)>,
        required: Vec<String>,
        min: u32,
    ) -> CoreId {
        let additional = self.true_e;
        self.core(Core::Object(Box::new(ObjC {
            groups: vec![KeyGroup {
                props,
                patterns: Vec::new(),
                additional,
                annot: false,
                annot_all: false,
            }],
            required,
            min,
            max: u32::MAX,
            deps: Vec::new(),
            names: None,
        })))
    }

    /// Every value except the array or object literal `v`.
    fn not_compound(&mut self, v: &Value, ptr: &str) -> Result<ExprId, SchemaError> {
        self.check_size()?;
        let (t, n) = match v {
            Value::Array(a) => (T_ARR, a.len()),
            Value::Object(m) => (T_OBJ, m.len()),
            _ => unreachable!("scalars are handled by not_literals"),
        };
        let mut cs = self.type_cores(T_ALL & !t);
        let (tr, fa) = (self.true_e, self.false_e);
        let n32 = u32::try_from(n).unwrap_or(u32::MAX);
        let mut alts = Vec::new();
        match v {
            Value::Array(a) => {
                // Another length, or some item different.
                if n > 0 {
                    cs.push(self.arr_core(Vec::new(), tr, 0, n32 - 1));
                }
                cs.push(self.arr_core(Vec::new(), tr, n32.saturating_add(1), u32::MAX));
                for (i, x) in a.iter().enumerate() {
                    let ni = self.not_literals(&[x], ptr)?;
                    let mut prefix = vec![tr; i];
                    prefix.push(ni);
                    let c = self.arr_core(prefix, tr, n32, n32);
                    alts.push(self.push(Expr::Cores(vec![c])));
                }
            }
            Value::Object(m) => {
                // A key missing, a value different, or more keys (all keys present and one
                // more means more than `n`).
                cs.push(self.obj_core(Vec::new(), Vec::new(), n32.saturating_add(1)));
                for (k, x) in m {
                    cs.push(self.obj_core(vec![(k.clone(), fa)], Vec::new(), 0));
                    let nk = self.not_literals(&[x], ptr)?;
                    let c = self.obj_core(vec![(k.clone(), nk)], vec![k.clone()], 0);
                    alts.push(self.push(Expr::Cores(vec![c])));
                }
            }
            _ => {}
        }
        alts.push(self.push(Expr::Cores(cs)));
        Ok(self.push(Expr::Or(alts)))
    }

    /// Normal form of an expression: its union of cores.
    pub(crate) fn normalize(&mut self, e: ExprId, ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        if let Some(n) = &self.norm[e as usize] {
            return Ok(n.clone());
        }
        if self.in_progress[e as usize] {
            return Err(SchemaError::unsupported("$ref", ptr));
        }
        self.in_progress[e as usize] = true;
        self.check_size()?;
        let r = match self.exprs[e as usize].clone() {
            Expr::Pending => return Err(SchemaError::unsupported("$ref", ptr)),
            Expr::Cores(c) => c,
            Expr::Or(a) => {
                let mut out = Vec::new();
                for x in a {
                    out.extend(self.normalize(x, ptr)?);
                }
                out
            }
            Expr::And(a) => {
                let mut acc: Option<Vec<CoreId>> = None;
                for x in a {
                    let cs = self.normalize(x, ptr)?;
                    acc = Some(match acc {
                        None => cs,
                        Some(prev) => {
                            let mut out = Vec::new();
                            for &p in &prev {
                                for &q in &cs {
                                    if let Some(m) = self.merge(p, q, ptr)? {
                                        out.push(m);
                                    }
                                }
                                if out.len() > self.limits.max_alternatives * 4 {
                                    return Err(SchemaError::limit(
                                        "alternatives",
                                        self.limits.max_alternatives,
                                    ));
                                }
                            }
                            out
                        }
                    });
                }
                acc.unwrap_or_default()
            }
            Expr::Uneval { base, props, items, ptr: p } => {
                let kw = if props.is_some() { "unevaluatedProperties" } else { "unevaluatedItems" };
                if let Err(err) = self.check_exclusive(base, kw, &p) {
                    self.in_progress[e as usize] = false;
                    if !self.opts.lenient {
                        return Err(err);
                    }
                    self.ignored
                        .push(format!("{kw} at {}", if p.is_empty() { "(root)" } else { &p }));
                    let cs = self.normalize(base, &p)?;
                    self.in_progress[e as usize] = true;
                    cs
                } else {
                    let cs = self.normalize(base, &p)?;
                    cs.into_iter().map(|c| self.apply_uneval(c, props, items)).collect()
                }
            }
            Expr::OneOf(a, p, negs) => {
                let mut branches = Vec::new();
                for &x in &a {
                    branches.push(self.normalize(x, &p)?);
                }
                let mut disjoint = true;
                'outer: for i in 0..branches.len() {
                    for j in i + 1..branches.len() {
                        for &ci in &branches[i] {
                            for &cj in &branches[j] {
                                if !self.disjoint(ci, cj, 0) {
                                    disjoint = false;
                                    break 'outer;
                                }
                            }
                        }
                    }
                }
                if disjoint {
                    branches.concat()
                } else if let Some(negs) = negs {
                    let mut out = Vec::new();
                    for i in 0..a.len() {
                        let mut parts = vec![a[i]];
                        parts.extend((0..a.len()).filter(|&j| j != i).map(|j| negs[j]));
                        let e2 = self.and(parts);
                        out.extend(self.normalize(e2, &p)?);
                    }
                    out
                } else if self.opts.lenient {
                    self.ignored.push(format!("oneOf at {p} (treated as anyOf)"));
                    branches.concat()
                } else {
                    self.in_progress[e as usize] = false;
                    return Err(SchemaError::unsupported("oneOf", &p));
                }
            }
        };
        let r = self.simplify(r);
        if r.len() > self.limits.max_alternatives {
            return Err(SchemaError::limit("alternatives", self.limits.max_alternatives));
        }
        self.in_progress[e as usize] = false;
        self.norm[e as usize] = Some(r.clone());
        Ok(r)
    }

    /// Drop duplicate trivial cores (several `null` cores, equal number cores).
    fn simplify(&self, cs: Vec<CoreId>) -> Vec<CoreId> {
        let mut out: Vec<CoreId> = Vec::new();
        for c in cs {
            let dup =
                out.iter().any(|&o| match (&self.cores[o as usize], &self.cores[c as usize]) {
                    (Core::Null, Core::Null) => true,
                    (Core::Bool(x), Core::Bool(y)) => x == y,
                    (Core::Number(x), Core::Number(y)) => x == y,
                    _ => o == c,
                });
            if !dup {
                out.push(c);
            }
        }
        out
    }

    /// Are two cores disjoint (no instance satisfies both)? Conservative: `false` when unsure.
    fn disjoint(&mut self, a: CoreId, b: CoreId, depth: usize) -> bool {
        let (ca, cb) = (self.cores[a as usize].clone(), self.cores[b as usize].clone());
        if ca.type_bit() != cb.type_bit() {
            return true;
        }
        match (&ca, &cb) {
            (Core::Bool(x), Core::Bool(y)) => x & y == 0,
            (Core::Number(x), Core::Number(y)) => match x.merge(y) {
                Ok(m) => !m.live(b""),
                Err(()) => false,
            },
            (Core::String(x), Core::String(y)) => {
                let (dx, dy) = (x.dfa.unwrap_or(self.any_dfa), y.dfa.unwrap_or(self.any_dfa));
                string::intersect_nonempty(
                    &self.dfas[dx as usize],
                    &self.dfas[dy as usize],
                    x.min.max(y.min),
                    x.max.min(y.max),
                    self.limits.max_dfa_states.saturating_mul(4),
                ) == Some(false)
            }
            (Core::Array(x), Core::Array(y)) => x.max < y.min || y.max < x.min,
            (Core::Object(x), Core::Object(y)) => {
                if depth > 4 {
                    return false;
                }
                // A key required by one whose values cannot agree, or that the other forbids.
                for (p, q) in [(&x, &y), (&y, &x)] {
                    for r in &p.required {
                        let vp = self.key_value(p, r);
                        let vq = self.key_value(q, r);
                        let (Ok(np), Ok(nq)) = (self.normalize(vp, ""), self.normalize(vq, ""))
                        else {
                            return false;
                        };
                        if nq.is_empty() {
                            return true;
                        }
                        {
                            let all = np
                                .iter()
                                .all(|&i| nq.iter().all(|&j| self.disjoint(i, j, depth + 1)));
                            if all && !np.is_empty() {
                                // p requires r with values disjoint from what q allows for r
                                return true;
                            }
                        }
                    }
                }
                false
            }
            _ => false,
        }
    }

    /// The value schema an object constraint gives key `k` (ignoring `propertyNames`).
    fn key_value(&mut self, o: &ObjC, k: &str) -> ExprId {
        let mut parts = Vec::new();
        for g in &o.groups {
            let mut matched = false;
            if let Some((_, e)) = g.props.iter().find(|(n, _)| n == k) {
                parts.push(*e);
                matched = true;
            }
            for &(d, e) in &g.patterns {
                if self.dfas[d as usize].matches(k.as_bytes()) {
                    parts.push(e);
                    matched = true;
                }
            }
            if !matched {
                parts.push(g.additional);
            }
        }
        if let Some(d) = o.names {
            if !self.dfas[d as usize].matches(k.as_bytes()) {
                return self.false_e;
            }
        }
        self.and(parts)
    }

    /// Intersection of two cores (`None` when of different types or empty for sure).
    fn merge(&mut self, a: CoreId, b: CoreId, ptr: &str) -> Result<Option<CoreId>, SchemaError> {
        let (ca, cb) = (&self.cores[a as usize], &self.cores[b as usize]);
        if ca.type_bit() != cb.type_bit() {
            return Ok(None);
        }
        let merged = match (ca.clone(), cb.clone()) {
            (Core::Null, Core::Null) => return Ok(Some(a)),
            (Core::Bool(x), Core::Bool(y)) => {
                if x & y == 0 {
                    return Ok(None);
                }
                Core::Bool(x & y)
            }
            (Core::Number(x), Core::Number(y)) => match x.merge(&y) {
                Ok(m) => {
                    if !m.multiple_supported() {
                        self.unsupported("multipleOf", ptr)?;
                        return Ok(Some(a));
                    }
                    Core::Number(m)
                }
                Err(()) => {
                    self.unsupported("multipleOf", ptr)?;
                    return Ok(Some(a));
                }
            },
            (Core::String(x), Core::String(y)) => {
                let dfa = match (x.dfa, y.dfa) {
                    (None, d) | (d, None) => d,
                    (Some(p), Some(q)) => Some(self.dfa_product(p, q, Op::And, "pattern", ptr)?),
                };
                Core::String(StrC { dfa, min: x.min.max(y.min), max: x.max.min(y.max) })
            }
            (Core::Array(x), Core::Array(y)) => {
                let n = x.prefix.len().max(y.prefix.len());
                let mut prefix = Vec::with_capacity(n);
                for i in 0..n {
                    let pa = x.prefix.get(i).copied().unwrap_or(x.items);
                    let pb = y.prefix.get(i).copied().unwrap_or(y.items);
                    prefix.push(self.and(vec![pa, pb]));
                }
                let items = self.and(vec![x.items, y.items]);
                let contains = match (&x.contains, &y.contains) {
                    (None, c) | (c, None) => c.clone(),
                    (Some(p), Some(q)) if p.schema == q.schema => Some(ContainsC {
                        min: p.min.max(q.min),
                        max: p.max.min(q.max),
                        ..p.clone()
                    }),
                    (Some(p), Some(_)) => {
                        // Two different `contains` counts would need a counter per schema.
                        self.unsupported("contains", ptr)?;
                        Some(p.clone())
                    }
                };
                Core::Array(ArrC {
                    prefix,
                    items,
                    min: x.min.max(y.min),
                    max: x.max.min(y.max),
                    contains,
                    unique: x.unique.clone().or_else(|| y.unique.clone()),
                    annot_len: x.annot_len.max(y.annot_len),
                    annot_all: x.annot_all || y.annot_all,
                })
            }
            (Core::Object(x), Core::Object(y)) => {
                let mut groups = x.groups.clone();
                groups.extend(y.groups.iter().cloned());
                let mut required = x.required.clone();
                for r in &y.required {
                    if !required.contains(r) {
                        required.push(r.clone());
                    }
                }
                let mut deps = x.deps.clone();
                deps.extend(y.deps.iter().cloned());
                let names = match (x.names, y.names) {
                    (None, d) | (d, None) => d,
                    (Some(p), Some(q)) => {
                        Some(self.dfa_product(p, q, Op::And, "propertyNames", ptr)?)
                    }
                };
                Core::Object(Box::new(ObjC {
                    groups,
                    required,
                    min: x.min.max(y.min),
                    max: x.max.min(y.max),
                    deps,
                    names,
                }))
            }
            _ => return Ok(None),
        };
        Ok(Some(self.core(merged)))
    }

    /// Normalise everything reachable from `root`, compute satisfiability, and lay out the
    /// runtime program.
    pub(crate) fn finish(mut self, root: ExprId) -> Result<(Program, Vec<String>), SchemaError> {
        // Stage 2: normalise every reachable expression; finalise cores into runtime form.
        let mut rt_cores: FxHashMap<CoreId, u32> = FxHashMap::default();
        let mut out_cores: Vec<CoreRt> = Vec::new();
        let mut core_src: Vec<CoreId> = Vec::new();
        let mut todo: Vec<ExprId> = vec![root];
        let mut seen_expr: FxHashMap<ExprId, ()> = FxHashMap::default();
        let mut order: Vec<ExprId> = Vec::new();
        while let Some(e) = todo.pop() {
            if seen_expr.insert(e, ()).is_some() {
                continue;
            }
            order.push(e);
            let cs = self.normalize(e, "")?;
            for c in cs {
                if rt_cores.contains_key(&c) {
                    continue;
                }
                let rt = self.finalize_core(c)?;
                match &rt {
                    CoreRt::Array { prefix, items, contains, .. } => {
                        todo.extend(prefix.iter().copied());
                        todo.push(*items);
                        if let Some(c) = contains {
                            todo.extend(c.yes.iter().chain(&c.no).copied());
                        }
                    }
                    CoreRt::Object(o) => {
                        todo.extend(o.props.iter().map(|p| p.node));
                        if let Some(x) = &o.extra {
                            todo.extend(x.combos.iter().copied());
                        }
                    }
                    _ => {}
                }
                rt_cores.insert(c, out_cores.len() as u32);
                out_cores.push(rt);
                core_src.push(c);
                if out_cores.len() > self.limits.max_nodes {
                    return Err(SchemaError::limit("nodes", self.limits.max_nodes));
                }
            }
        }
        // Nodes in runtime numbering (indexed by ExprId; unreachable ones empty).
        let mut nodes: Vec<Vec<u32>> = vec![Vec::new(); self.exprs.len()];
        for &e in &order {
            nodes[e as usize] = self.norm[e as usize]
                .as_ref()
                .expect("normalised")
                .iter()
                .map(|c| rt_cores[c])
                .collect();
        }
        // Stage 3: least fixpoint of satisfiability.
        let n = out_cores.len();
        let mut sat = vec![false; n];
        let node_sat = |nodes: &Vec<Vec<u32>>, sat: &Vec<bool>, e: ExprId| {
            nodes[e as usize].iter().any(|&c| sat[c as usize])
        };
        loop {
            let mut changed = false;
            for i in 0..n {
                if sat[i] {
                    continue;
                }
                let ok = match &out_cores[i] {
                    CoreRt::Null => true,
                    CoreRt::Bool(b) => *b != 0,
                    CoreRt::Number(c) => c.live(b""),
                    CoreRt::String { dfa, min, max, .. } => {
                        let d = &self.dfas[*dfa as usize];
                        !d.is_empty() && min <= max && d.short(d.start()) <= *max
                    }
                    CoreRt::Array { prefix, items, min, max, contains: None, .. } => {
                        min <= max
                            && (0..*min as usize).all(|k| {
                                node_sat(&nodes, &sat, prefix.get(k).copied().unwrap_or(*items))
                            })
                    }
                    CoreRt::Array { min, max, contains: Some(c), .. } => {
                        let cap = |i: usize| {
                            (node_sat(&nodes, &sat, c.yes[i]), node_sat(&nodes, &sat, c.no[i]))
                        };
                        contains_feasible(cap, c.yes.len() - 1, *min, *max, c, 0, 0, false)
                    }
                    CoreRt::Object(o) => {
                        o.required.iter().all(|&r| node_sat(&nodes, &sat, o.props[r as usize].node))
                            && (o.n_required <= o.max)
                            && {
                                let avail = o
                                    .props
                                    .iter()
                                    .filter(|p| node_sat(&nodes, &sat, p.node))
                                    .count() as u64;
                                let extra_inf = o.extra.as_ref().is_some_and(|x| {
                                    self.dfas[x.dfa as usize]
                                        .finite_count(self.dfas[x.dfa as usize].start())
                                        .is_none_or(|c| c > 0)
                                });
                                let extra_n = o.extra.as_ref().map_or(0, |x| {
                                    let d = &self.dfas[x.dfa as usize];
                                    u64::from(d.finite_count(d.start()).unwrap_or(u32::MAX))
                                });
                                extra_inf
                                    || avail + extra_n >= u64::from(o.min)
                                    || avail >= u64::from(o.min)
                            }
                    }
                };
                if ok {
                    sat[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // Keep satisfiable cores only.
        for ns in nodes.iter_mut() {
            ns.retain(|&c| sat[c as usize]);
        }
        // Declared names whose node is empty can never appear: mark them forbidden (they stay
        // declared, so the runtime never reads them as undeclared keys), and so are names
        // whose dependencies are forbidden.
        for c in out_cores.iter_mut() {
            if let CoreRt::Object(o) = c {
                for p in o.props.iter_mut() {
                    p.forbidden = nodes[p.node as usize].is_empty();
                }
                loop {
                    let mut changed = false;
                    for i in 0..o.props.len() {
                        if !o.props[i].forbidden
                            && o.props[i].deps.iter().any(|&d| o.props[d as usize].forbidden)
                        {
                            o.props[i].forbidden = true;
                            changed = true;
                        }
                    }
                    if !changed {
                        break;
                    }
                }
                o.has_deps = o.props.iter().any(|p| !p.deps.is_empty());
                if let Some(x) = &o.extra {
                    if x.combos.iter().all(|&n| nodes[n as usize].is_empty()) {
                        o.extra = None;
                    }
                }
            }
        }
        // `uniqueItems` only where the runtime decides it exactly (see `unique`).
        for i in 0..out_cores.len() {
            let CoreRt::Array { prefix, items, contains, unique: true, min, .. } = &out_cores[i]
            else {
                continue;
            };
            // (node, optional position: at or after minItems, no contains)
            let mut item_nodes: Vec<(ExprId, bool)> = prefix
                .iter()
                .enumerate()
                .map(|(k, &e)| (e, k as u32 >= *min && contains.is_none()))
                .collect();
            item_nodes.push((*items, prefix.len() as u32 >= *min && contains.is_none()));
            if let Some(c) = contains {
                item_nodes.extend(c.yes.iter().chain(&c.no).map(|&e| (e, false)));
            }
            let ok = item_nodes.iter().all(|&(e, optional)| {
                unique::node_ok(&out_cores, &nodes, &self.dfas, self.any_dfa, e, optional)
            });
            if !ok {
                let ptr = match &self.cores[core_src[i] as usize] {
                    Core::Array(a) => a.unique.clone().unwrap_or_default(),
                    _ => String::new(),
                };
                self.unsupported("uniqueItems", &ptr)?;
                if let CoreRt::Array { unique, .. } = &mut out_cores[i] {
                    *unique = false;
                }
            }
        }
        if nodes[root as usize].is_empty() {
            return Err(SchemaError::unsat("", "no instance satisfies the schema"));
        }
        let any_dfa = self.any_dfa;
        let ignored = std::mem::take(&mut self.ignored);
        Ok((Program { nodes, cores: out_cores, dfas: self.dfas, root, any_dfa }, ignored))
    }

    fn finalize_core(&mut self, c: CoreId) -> Result<CoreRt, SchemaError> {
        Ok(match self.cores[c as usize].clone() {
            Core::Null => CoreRt::Null,
            Core::Bool(b) => CoreRt::Bool(b),
            Core::Number(n) => CoreRt::Number(n),
            Core::String(s) => {
                if s.dfa.is_none() {
                    CoreRt::String { dfa: self.any_dfa, min: s.min, max: s.max }
                } else {
                    // `minLength` folded into the automaton, `maxLength` counted beside it
                    // (a product with a length counter multiplies the states by the bound:
                    // `format: email` with `maxLength: 1024` would be a million cells).
                    let d = self.fold_str(&StrC { max: u32::MAX, ..s.clone() }, "")?;
                    CoreRt::String { dfa: d, min: 0, max: s.max }
                }
            }
            Core::Array(a) => {
                let contains = match &a.contains {
                    None => None,
                    Some(c) => {
                        let (mut yes, mut no) = (Vec::new(), Vec::new());
                        for i in 0..=a.prefix.len() {
                            let node = a.prefix.get(i).copied().unwrap_or(a.items);
                            yes.push(self.and(vec![node, c.schema]));
                            no.push(match c.neg {
                                Some(n) if c.max != u32::MAX => self.and(vec![node, n]),
                                _ => node,
                            });
                        }
                        Some(Box::new(ContainsRt { min: c.min, max: c.max, yes, no }))
                    }
                };
                CoreRt::Array {
                    prefix: a.prefix,
                    items: a.items,
                    min: a.min,
                    max: a.max,
                    contains,
                    unique: a.unique.is_some(),
                }
            }
            Core::Object(o) => CoreRt::Object(self.finalize_obj(&o)?),
        })
    }

    fn finalize_obj(&mut self, o: &ObjC) -> Result<ObjRt, SchemaError> {
        // Declared names: every name in any group's properties, in `required`, in deps.
        let mut order_names: Vec<String> = Vec::new();
        for g in &o.groups {
            for (n, _) in &g.props {
                if !order_names.contains(n) {
                    order_names.push(n.clone());
                }
            }
        }
        for n in o
            .required
            .iter()
            .chain(o.deps.iter().flat_map(|(k, v)| std::iter::once(k).chain(v.iter())))
        {
            if !order_names.contains(n) {
                order_names.push(n.clone());
            }
        }
        let mut entries: Vec<(Vec<u8>, PropRt)> = Vec::new();
        for (i, n) in order_names.iter().enumerate() {
            let node = self.key_value(o, n);
            entries.push((
                n.as_bytes().to_vec(),
                PropRt {
                    node,
                    forbidden: false,
                    required: o.required.contains(n),
                    order: i as u32,
                    deps: Vec::new(),
                },
            ));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let idx = |name: &str, entries: &Vec<(Vec<u8>, PropRt)>| {
            entries.iter().position(|e| e.0 == name.as_bytes()).expect("declared") as u32
        };
        for (k, v) in &o.deps {
            let ki = idx(k, &entries);
            for d in v {
                let di = idx(d, &entries);
                if !entries[ki as usize].1.deps.contains(&di) && di != ki {
                    entries[ki as usize].1.deps.push(di);
                }
            }
        }
        let required: Vec<u32> = o.required.iter().map(|r| idx(r, &entries)).collect();
        // Undeclared keys.
        let pats: Vec<(u32, usize, ExprId)> = o
            .groups
            .iter()
            .enumerate()
            .flat_map(|(gi, g)| g.patterns.iter().map(move |&(d, e)| (d, gi, e)))
            .collect();
        if pats.len() > 4 {
            return Err(SchemaError::unsupported("patternProperties", ""));
        }
        let mut combos = Vec::new();
        let mut lang: Option<u32> = None;
        if pats.is_empty() && o.names.is_none() {
            // The common case: undeclared keys are any string but the declared names (the
            // runtime reads a declared name as declared, never as undeclared), so no automaton
            // product is needed.
            let parts: Vec<ExprId> = o.groups.iter().map(|g| g.additional).collect();
            let node = self.and(parts);
            let cs = self.normalize(node, "")?;
            let extra = (!cs.is_empty()).then_some(ExtraRt {
                dfa: self.any_dfa,
                patterns: Vec::new(),
                combos: vec![node],
            });
            let (names, props): (Vec<Box<[u8]>>, Vec<PropRt>) =
                entries.into_iter().map(|(n, p)| (n.into_boxed_slice(), p)).unzip();
            return Ok(ObjRt {
                names,
                props,
                extra,
                min: o.min,
                max: o.max,
                n_required: required.len() as u32,
                required,
                has_deps: !o.deps.is_empty(),
            });
        }
        for mask in 0..(1usize << pats.len()) {
            let mut parts = Vec::new();
            for (gi, g) in o.groups.iter().enumerate() {
                let mine: Vec<usize> =
                    (0..pats.len()).filter(|&i| pats[i].1 == gi && mask & (1 << i) != 0).collect();
                if mine.is_empty() {
                    parts.push(g.additional);
                } else {
                    parts.extend(mine.iter().map(|&i| pats[i].2));
                }
            }
            let node = self.and(parts);
            combos.push(node);
            let cs = self.normalize(node, "")?;
            if cs.is_empty() {
                continue;
            }
            // Language of exactly this combination.
            let mut d = self.any_dfa;
            for (i, p) in pats.iter().enumerate() {
                let op = if mask & (1 << i) != 0 { Op::And } else { Op::AndNot };
                d = self.dfa_product(d, p.0, op, "patternProperties", "")?;
            }
            lang = Some(match lang {
                None => d,
                Some(l) => self.dfa_product(l, d, Op::Or, "patternProperties", "")?,
            });
        }
        let extra = match lang {
            None => None,
            Some(mut l) => {
                if let Some(nd) = o.names {
                    l = self.dfa_product(l, nd, Op::And, "propertyNames", "")?;
                }
                if !order_names.is_empty() {
                    let lit = self.regex_dfa(
                        &string::literals_regex(order_names.iter().map(String::as_str)),
                        "properties",
                        "",
                    )?;
                    l = self.dfa_product(l, lit, Op::AndNot, "properties", "")?;
                }
                if self.dfas[l as usize].is_empty() {
                    None
                } else {
                    Some(ExtraRt { dfa: l, patterns: pats.iter().map(|p| p.0).collect(), combos })
                }
            }
        };
        let (names, props): (Vec<Box<[u8]>>, Vec<PropRt>) =
            entries.into_iter().map(|(n, p)| (n.into_boxed_slice(), p)).unzip();
        Ok(ObjRt {
            names,
            props,
            extra,
            min: o.min,
            max: o.max,
            n_required: required.len() as u32,
            required,
            has_deps: !o.deps.is_empty(),
        })
    }
}
