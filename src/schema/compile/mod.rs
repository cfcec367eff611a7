//! Schema JSON → compiled, immutable node arena.
//!
//! The compiler is one [`Compiler`] (the arenas of expressions, cores and automata, and the
//! memo tables) whose methods live with their concept, one file each:
//! - [`refs`]: reference resolution (`$id`, `$anchor`, `$ref`, `$dynamicRef`,
//!   `$recursiveRef`, dynamic scopes, pre-loaded documents), independent of compilation;
//! - [`ir`]: the typed IR ([`Expr`], [`Core`] and the per-type constraints);
//! - [`applicators`]: a schema object's in-place applicators (`$ref`, `allOf`, `anyOf`,
//!   `oneOf`, `not`, `if`, `dependentSchemas`, `unevaluated*`) as combinators;
//! - [`keywords`]: the type-specific keywords and literals (`type`, bounds, `pattern`,
//!   `format`, `items`, `properties`, `enum`/`const`) parsed into cores;
//! - [`negate`]: `not` pushed inwards, keyword by keyword;
//! - [`merge`]: the normal form (union of cores), intersection of cores, disjointness,
//!   `unevaluated*` per alternative;
//! - [`finish`]: reachability, satisfiability and the layout of the runtime [`Program`]
//!   ([`program`]).
//!
//! Three stages:
//! 1. **Expressions.** Every subschema becomes an [`Expr`]: a typed *shape* (the type-specific
//!    keywords, each applying only to values of its type, as the spec says), literal sets
//!    (`enum`/`const`), and the combinators `And` (`allOf`, `$ref` siblings), `Or` (`anyOf`,
//!    disjoint `oneOf`, `if`/`then`/`else`), with `not` pushed inwards by [`Compiler::negate`].
//!    Expressions are memoised by JSON pointer (and dynamic scope, for `$dynamicRef`: see
//!    [`refs::DynScopes`]), so `$ref` recursion is a cycle in the graph.
//! 2. **Normal form.** On demand, an expression is normalised into a union of typed [`Core`]s
//!    (disjunctive normal form): `And` intersects cores pairwise (merging bounds, taking
//!    automaton products, merging object/array children into new `And` expressions, memoised
//!    by their operand set so recursive merges terminate).
//! 3. **Satisfiability.** A least fixpoint marks the cores that have at least one finite
//!    instance; the runtime only ever enters those, which is what rules out dead ends inside
//!    nested values. An unsatisfiable root is a compile error.

mod applicators;
mod finish;
mod ir;
mod keywords;
mod merge;
mod negate;
mod program;
mod refs;

pub(crate) use ir::*;
pub(crate) use program::*;

use super::error::{SchemaError, SchemaErrorKind};
use super::number::NumCore;
use super::string::{self, ByteDfa, DfaError, Op};
use super::{SchemaLimits, SchemaOptions};
use refs::{Refs, ScopeId};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;

pub(crate) use super::ids::{CoreId, DfaId, ExprId, RtCoreId};

/// The schema compiler: arenas, memo tables and the reference resolver. See the module docs.
pub(crate) struct Compiler<'a> {
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
    /// Identifiers, anchors and the dynamic scope (see [`Refs`]).
    refs: Refs<'a>,
    pub ignored: Vec<String>,
    true_e: ExprId,
    false_e: ExprId,
    any_dfa: DfaId,
    legacy_ref: bool,
    draft4: bool,
    pre_draft7: bool,
    ref_depth: usize,
    dfa_memo: FxHashMap<String, DfaId>,
    /// Products already built, and length automata by bounds: a union of many string cores
    /// with the same `minLength`/`maxLength` folds each against the same length automaton,
    /// and conjunctions meet the same pairs again.
    product_memo: FxHashMap<(DfaId, DfaId, Op), DfaId>,
    length_memo: FxHashMap<(u32, u32), DfaId>,
    /// `anyOf` unions (their branches may overlap, which matters for `unevaluated*`).
    anyof: FxHashSet<ExprId>,
    /// The branch negations of each `oneOf`, built on first need
    /// ([`Compiler::one_of_negations`]): most `oneOf`s are disjoint and never need them, and
    /// nested `oneOf`s would otherwise build every level's negations up front.
    one_of_negs: FxHashMap<ExprId, OneOfNegs<'a>>,
    /// The last `oneOf` cover test's blocker (branch, other branch, type bit), for the error.
    cover_block: (usize, usize, u8),
    /// Cores with at most one instance: literals (`const`, `enum` members) and what merging
    /// them with anything gives. A `not` without an exact complement is decided on them
    /// ([`Expr::Not`]).
    single: FxHashSet<CoreId>,
    /// Some `not` was left lazy ([`Expr::Not`]): only then do conjunctions look for one.
    lazy_nots: bool,
    /// The JSON pointer each subschema's expression (and each `anyOf`'s union) was built
    /// from, the first where one is shared: a union over the alternatives limit names it.
    origin: FxHashMap<ExprId, String>,
    /// Under [`SchemaOptions::plain_numbers`]: the first keyword (and its subschema's
    /// pointer) whose numbers no plain decimal within the digit caps can spell, named by the
    /// error when the whole schema's language is empty only for that reason.
    plain_blame: Option<(&'static str, String)>,
}

/// A `oneOf`'s branch negations: its array and dynamic scope until built, then the result
/// (`None`: some branch cannot be negated, or there are more than 16).
enum OneOfNegs<'a> {
    Source(&'a Value, String, ScopeId),
    Built(Option<Vec<ExprId>>),
}

/// `r` with an [`SchemaErrorKind::Unsupported`] error as `None` (other errors passed on).
fn unless_unsupported<T>(r: Result<T, SchemaError>) -> Result<Option<T>, SchemaError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if matches!(e.kind(), SchemaErrorKind::Unsupported { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The error for a compile past [`SchemaLimits::max_compile_time`].
fn deadline_error(limits: &SchemaLimits) -> SchemaError {
    let ms = limits.max_compile_time.map_or(0, |t| t.as_millis());
    SchemaError::limit("compile_time_ms", usize::try_from(ms).unwrap_or(usize::MAX))
}

fn dfa_err(e: DfaError, kw: &str, ptr: &str, limits: &SchemaLimits) -> SchemaError {
    match e {
        DfaError::TooBig => SchemaError::limit("dfa_states", limits.max_dfa_states),
        DfaError::Deadline => deadline_error(limits),
        DfaError::Regex(m) => {
            if m.contains("not supported") || m.contains("look") || m.contains("back-reference") {
                SchemaError::unsupported_because(kw, ptr, m)
            } else {
                SchemaError::invalid(ptr, format!("{kw}: {m}"))
            }
        }
    }
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(doc: &'a Value, opts: &'a SchemaOptions) -> Result<Self, SchemaError> {
        let legacy_ref = doc.get("$schema").and_then(Value::as_str).is_some_and(|s| {
            s.contains("draft-04") || s.contains("draft-06") || s.contains("draft-07")
        });
        let mut c = Compiler {
            refs: Refs::new(doc, &opts.documents)?,
            opts,
            limits: opts.limits.clone(),
            exprs: Vec::new(),
            cores: Vec::new(),
            dfas: Vec::new(),
            by_ptr: FxHashMap::default(),
            and_memo: FxHashMap::default(),
            norm: Vec::new(),
            in_progress: Vec::new(),
            ignored: Vec::new(),
            true_e: ExprId::new(0),
            false_e: ExprId::new(0),
            any_dfa: DfaId::new(0),
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
            product_memo: FxHashMap::default(),
            length_memo: FxHashMap::default(),
            anyof: FxHashSet::default(),
            one_of_negs: FxHashMap::default(),
            cover_block: (0, 0, 0),
            single: FxHashSet::default(),
            lazy_nots: false,
            origin: FxHashMap::default(),
            plain_blame: None,
        };
        c.dfas.push(string::any_content().clone());
        c.any_dfa = DfaId::new(0);
        let all = c.type_cores(T_ALL);
        c.true_e = c.push(Expr::Cores(all));
        c.false_e = c.push(Expr::Cores(Vec::new()));
        Ok(c)
    }

    fn push(&mut self, e: Expr) -> ExprId {
        self.exprs.push(e);
        self.norm.push(None);
        self.in_progress.push(false);
        ExprId::new(self.exprs.len() - 1)
    }

    fn core(&mut self, c: Core) -> CoreId {
        self.cores.push(c);
        CoreId::new(self.cores.len() - 1)
    }

    fn check_size(&self) -> Result<(), SchemaError> {
        if self.exprs.len() + self.cores.len() > self.limits.max_nodes {
            return Err(SchemaError::limit("nodes", self.limits.max_nodes));
        }
        if string::past_deadline() {
            return Err(deadline_error(&self.limits));
        }
        Ok(())
    }

    fn add_dfa(&mut self, d: ByteDfa) -> DfaId {
        self.dfas.push(d);
        DfaId::new(self.dfas.len() - 1)
    }

    fn regex_dfa(&mut self, re: &str, kw: &str, ptr: &str) -> Result<DfaId, SchemaError> {
        if let Some(&d) = self.dfa_memo.get(re) {
            return Ok(d);
        }
        let d = string::dfa_from_regex(re, self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, kw, ptr, &self.limits))?;
        let id = self.add_dfa(d);
        self.dfa_memo.insert(re.to_string(), id);
        Ok(id)
    }

    /// The automaton of a finite set of strings ([`string::dfa_from_literals`]), memoised with
    /// the regexes under the alternation that spells the same language.
    fn literals_dfa<'s>(
        &mut self,
        lits: impl IntoIterator<Item = &'s str> + Clone,
        kw: &str,
        ptr: &str,
    ) -> Result<DfaId, SchemaError> {
        let key = string::literals_regex(lits.clone());
        if let Some(&d) = self.dfa_memo.get(&key) {
            return Ok(d);
        }
        let d = string::dfa_from_literals(lits, self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, kw, ptr, &self.limits))?;
        let id = self.add_dfa(d);
        self.dfa_memo.insert(key, id);
        Ok(id)
    }

    fn dfa_product(
        &mut self,
        a: DfaId,
        b: DfaId,
        op: Op,
        kw: &str,
        ptr: &str,
    ) -> Result<DfaId, SchemaError> {
        // `And` and `Or` commute: one entry for both orders.
        let key = if op != Op::AndNot && b < a { (b, a, op) } else { (a, b, op) };
        if let Some(&d) = self.product_memo.get(&key) {
            return Ok(d);
        }
        let d = string::product(&self.dfas[a], &self.dfas[b], op, self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, kw, ptr, &self.limits))?;
        let id = self.add_dfa(d);
        self.product_memo.insert(key, id);
        Ok(id)
    }

    /// The automaton of strings of `min..=max` characters, memoised by its bounds.
    fn length_dfa(&mut self, min: u32, max: u32, ptr: &str) -> Result<DfaId, SchemaError> {
        if let Some(&d) = self.length_memo.get(&(min, max)) {
            return Ok(d);
        }
        let d = string::length_dfa(min, max, self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, "maxLength", ptr, &self.limits))?;
        let id = self.add_dfa(d);
        self.length_memo.insert((min, max), id);
        Ok(id)
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
            v.push(self.core(Core::Object(Box::new(ObjC::new(
                Vec::new(),
                additional,
                Vec::new(),
                0,
            )))));
        }
        v
    }

    /// The subschema at a resolved reference target, within the `$ref` depth limit.
    fn follow_ref(&mut self, target: &str) -> Result<ExprId, SchemaError> {
        self.ref_depth += 1;
        if self.ref_depth > self.limits.max_ref_depth {
            return Err(SchemaError::limit_at("ref_depth", self.limits.max_ref_depth, target));
        }
        let e = self.schema_at(target);
        self.ref_depth -= 1;
        e
    }

    /// Compile the subschema at `ptr`.
    pub(crate) fn schema_at(&mut self, ptr: &str) -> Result<ExprId, SchemaError> {
        let scope = self.refs.enter(ptr);
        let key = (scope, ptr.to_string());
        if let Some(&e) = self.by_ptr.get(&key) {
            return Ok(e);
        }
        let v = self
            .refs
            .lookup(ptr)
            .ok_or_else(|| SchemaError::invalid(ptr, "pointer does not resolve"))?;
        let id = self.push(Expr::Pending);
        self.by_ptr.insert(key, id);
        self.check_size()?;
        let saved = std::mem::replace(&mut self.refs.dyn_scopes.cur, scope);
        let e = self.schema(v, ptr);
        self.refs.dyn_scopes.cur = saved;
        self.exprs[id] = Expr::And(vec![e?]);
        Ok(id)
    }

    /// Keyword `kw` at `ptr` cannot be compiled exactly: an error, or in lenient mode a
    /// note in [`Compiler::ignored`].
    fn unsupported(&mut self, kw: &str, ptr: &str) -> Result<(), SchemaError> {
        self.unsupported_because(kw, ptr, "")
    }

    /// [`Compiler::unsupported`] with the reason the error names.
    fn unsupported_because(&mut self, kw: &str, ptr: &str, why: &str) -> Result<(), SchemaError> {
        if self.opts.lenient {
            self.ignored.push(format!("{kw} at {}", if ptr.is_empty() { "(root)" } else { ptr }));
            Ok(())
        } else {
            Err(SchemaError::unsupported_because(kw, ptr, why))
        }
    }

    /// `r`, with an [`SchemaErrorKind::Unsupported`] error reported as keyword `kw` at `ptr`
    /// ([`Compiler::unsupported`]) and then `None`.
    fn or_unsupported<T>(
        &mut self,
        r: Result<T, SchemaError>,
        kw: &str,
        ptr: &str,
    ) -> Result<Option<T>, SchemaError> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e) => match e.kind() {
                SchemaErrorKind::Unsupported { reason, .. } => {
                    let reason = reason.clone();
                    self.unsupported_because(kw, ptr, &reason)?;
                    Ok(None)
                }
                _ => Err(e),
            },
        }
    }

    /// An expression: non-objects, or objects with `required` and property schemas.
    fn obj_with(&mut self, required: &[String], props: &[(String, ExprId)]) -> ExprId {
        let c = self.obj_core(props.to_vec(), required.to_vec(), 0);
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
        self.core(Core::Object(Box::new(ObjC::new(props, additional, required, min))))
    }
}

impl Compiler<'_> {
    /// The digit cap of [`SchemaOptions::plain_numbers`] (`0`: off); a cap of 0 reads as 1.
    pub(super) fn plain_digits(&self) -> u8 {
        if self.opts.plain_numbers {
            self.opts.max_number_digits.max(1)
        } else {
            0
        }
    }

    /// `n` as the runtime holds it: under `plain_numbers`, spelled plainly within the digit
    /// caps, and an `integer` spelled as a plain integer ([`NumCore::plain`]).
    pub(super) fn plain_spelled(&self, mut n: NumCore) -> NumCore {
        let cap = self.plain_digits();
        if cap != 0 {
            n.plain = cap;
            n.int_syntax |= n.integer;
        }
        n
    }

    /// Remember `keyword` at `ptr` as the reason the generation profile's plain numbers reach
    /// nothing, if nothing was remembered before.
    pub(super) fn blame_plain(&mut self, keyword: &'static str, ptr: &str) {
        if self.plain_blame.is_none() {
            self.plain_blame = Some((keyword, ptr.to_string()));
        }
    }
}

/// Helpers for the compiler's unit tests: a compiler over a literal schema, the kinds of an
/// expression's normal form, and a validation through the runtime engine.
#[cfg(test)]
pub(super) mod test_util {
    use super::*;
    use crate::engine::ConstraintEngine;

    /// A compiler over `doc` with `opts` (both leaked: tests only).
    pub(crate) fn compiler_with(doc: Value, opts: SchemaOptions) -> Compiler<'static> {
        let doc: &'static Value = Box::leak(Box::new(doc));
        let opts: &'static SchemaOptions = Box::leak(Box::new(opts));
        Compiler::new(doc, opts).expect("compiler")
    }

    /// A compiler over `doc` with default options.
    pub(crate) fn compiler(doc: Value) -> Compiler<'static> {
        compiler_with(doc, SchemaOptions::default())
    }

    /// The cores of `e`'s normal form, by kind, in order.
    pub(crate) fn kinds(c: &mut Compiler<'_>, e: ExprId) -> Vec<&'static str> {
        let cs = c.normalize(e, "").expect("normal form");
        cs.iter()
            .map(|&k| match &c.cores[k] {
                Core::Null => "null",
                Core::Bool(_) => "bool",
                Core::Number(_) => "num",
                Core::String(_) => "str",
                Core::Array(_) => "arr",
                Core::Object(_) => "obj",
            })
            .collect()
    }

    /// The cores of `e`'s normal form.
    pub(crate) fn cores(c: &mut Compiler<'_>, e: ExprId) -> Vec<Core> {
        let cs = c.normalize(e, "").expect("normal form");
        cs.iter().map(|&k| c.cores[k].clone()).collect()
    }

    /// Does `instance` (JSON text) validate against `schema`, by the runtime engine?
    pub(crate) fn validates(schema: &Value, instance: &str) -> bool {
        static VOCAB: std::sync::OnceLock<crate::vocab::Vocabulary> = std::sync::OnceLock::new();
        let vocab = VOCAB.get_or_init(|| crate::vocab::Vocabulary::embedded().expect("vocab"));
        let mut e =
            crate::schema::SchemaConstraint::compile(schema, vocab, &SchemaOptions::default())
                .expect("compiles");
        e.advance_bytes(instance.as_bytes()).is_ok() && e.is_accepting()
    }
}
