//! The normal form: every expression as a union of typed cores (disjunctive normal form).
//!
//! `And` intersects cores pairwise ([`Compiler::merge`]: bounds merged, automaton products,
//! children merged into new memoised `And` expressions so recursive merges terminate); `Or`
//! concatenates; `oneOf` is a union once its branches are shown disjoint
//! ([`Compiler::disjoint`]); `unevaluated*` is applied per alternative when that is exact
//! ([`Compiler::check_exclusive`]).

use super::*;
use crate::schema::number::{Dec, NumSet};
use std::sync::Arc;

/// The JSON type a core type bit names, for messages.
fn type_name(t: u8) -> &'static str {
    match t {
        T_NULL => "null",
        T_BOOL => "boolean",
        T_INT | T_NUM => "number",
        T_STR => "string",
        T_ARR => "array",
        _ => "object",
    }
}

/// The reason of an [`Expr::Not`] error: why its complement has no exact form, and that no
/// finite set of literals beside it could be tested instead.
fn not_reason(reason: &str) -> String {
    let r = if reason.is_empty() { "its complement has no exact form" } else { reason };
    format!("{r}; the values beside it are not a finite set of literals (enum/const) it could be tested on one by one")
}

impl<'a> Compiler<'a> {
    /// Normal form of an expression: its union of cores.
    pub(crate) fn normalize(&mut self, e: ExprId, ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        if let Some(n) = &self.norm[e] {
            return Ok(n.clone());
        }
        if self.in_progress[e] {
            return Err(SchemaError::unsupported_because(
                "$ref",
                ptr,
                "a cycle of references with no object or array between them (the schema \
                 would have to contain itself: a $ref loop through allOf/anyOf/oneOf/not or \
                 directly), which no finite grammar decides",
            ));
        }
        self.in_progress[e] = true;
        let r = self.normalize_in(e, ptr);
        // Reset on errors too: a caller that treats an error as "unsure" (the disjointness
        // and cover tests) must not leave `e` looking like a cycle to the next visit.
        self.in_progress[e] = false;
        if let Ok(r) = &r {
            self.norm[e] = Some(r.clone());
        }
        r
    }

    /// [`Compiler::normalize`] of an expression not normalised yet and marked in progress.
    fn normalize_in(&mut self, e: ExprId, ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        self.check_size()?;
        // Where a union over the limit is blamed: the subschema `e` was built from, if known.
        let origin = self.origin.get(&e).cloned();
        let here = origin.as_deref().unwrap_or(ptr);
        let r = match self.exprs[e].clone() {
            Expr::Pending => {
                return Err(SchemaError::unsupported_because(
                    "$ref",
                    ptr,
                    "the reference points back into the subschema being compiled, with no \
                     object or array between them (a cycle)",
                ))
            }
            Expr::Cores(c) => c,
            Expr::Or(a) => {
                let mut out = Vec::new();
                for x in a {
                    out.extend(self.normalize(x, ptr)?);
                    self.within_alternatives(out.len(), here)?;
                }
                out
            }
            Expr::And(a) if self.has_lazy_not(&a) => self.and_with_lazy_nots(&a, ptr)?,
            Expr::And(a) => {
                if let Some(cs) = self.and_into_one_of(&a, ptr)? {
                    cs
                } else {
                    self.and_cores(&a, here)?
                }
            }
            Expr::NoAnnot(x) => {
                let cs = self.normalize(x, ptr)?;
                cs.into_iter().map(|c| self.plain_core(c)).collect()
            }
            Expr::Not { ptr: p, reason, .. } => {
                return Err(SchemaError::unsupported_because("not", &p, not_reason(&reason)));
            }
            Expr::Uneval { base, props, items, ptr: p } => {
                let kw = if props.is_some() { "unevaluatedProperties" } else { "unevaluatedItems" };
                if let Err(err) = self.check_exclusive(base, kw, &p) {
                    self.in_progress[e] = false;
                    if !self.opts.lenient {
                        return Err(err);
                    }
                    self.ignored
                        .push(format!("{kw} at {}", if p.is_empty() { "(root)" } else { &p }));
                    let cs = self.normalize(base, &p)?;
                    self.in_progress[e] = true;
                    cs
                } else {
                    let cs = self.normalize(base, &p)?;
                    cs.into_iter().map(|c| self.apply_uneval(c, props, items)).collect()
                }
            }
            Expr::OneOf(a, p) => {
                let mut branches = Vec::new();
                let mut total = 0;
                for &x in &a {
                    let b = self.normalize(x, &p)?;
                    // The disjointness check below is quadratic: bound its input first.
                    total += b.len();
                    self.within_alternatives(total, &p)?;
                    branches.push(b);
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
                } else if let Some(kept) = self.one_of_by_cover(&branches) {
                    kept
                } else if let Some(negs) = self.one_of_negations(e)? {
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
                    let (i, j, t) = self.cover_block;
                    let t = type_name(t);
                    let negs = if a.len() > 16 { "more than 16 branches" } else { "a branch" };
                    return Err(SchemaError::unsupported_because(
                        "oneOf",
                        &p,
                        format!(
                            "branch {i} has {t}s that branch {j} may also accept (not shown \
                             disjoint) without accepting all of them, and {negs} cannot be \
                             negated exactly (see `not`), so \"exactly one\" is not decided"
                        ),
                    ));
                }
            }
        };
        // `simplify` is quadratic: refuse a union far over the limit before it.
        self.within_alternatives(r.len(), here)?;
        let mut r = self.simplify(r);
        if r.len() > self.limits.max_alternatives {
            r = self.drop_covered(r);
        }
        if r.len() > self.limits.max_alternatives {
            r = self.collapse_scalars(r, ptr);
        }
        if r.len() > self.limits.max_alternatives {
            return Err(SchemaError::limit_at("alternatives", self.limits.max_alternatives, here));
        }
        Ok(r)
    }

    /// The intersection of expressions `a`: their normal forms merged pairwise.
    fn and_cores(&mut self, a: &[ExprId], ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        let mut acc: Option<Vec<CoreId>> = None;
        for &x in a {
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
                            return Err(SchemaError::limit_at(
                                "alternatives",
                                self.limits.max_alternatives,
                                ptr,
                            ));
                        }
                    }
                    out
                }
            });
        }
        Ok(acc.unwrap_or_default())
    }

    /// Does the conjunction `a` hold an [`Expr::Not`] (directly or in a nested conjunction;
    /// a `$ref` cycle of conjunctions is walked once)?
    fn has_lazy_not(&self, a: &[ExprId]) -> bool {
        if !self.lazy_nots {
            // No `not` was left lazy: skip the walk every conjunction would pay.
            return false;
        }
        let mut seen: FxHashSet<ExprId> = FxHashSet::default();
        let mut todo: Vec<ExprId> = a.to_vec();
        while let Some(x) = todo.pop() {
            if !seen.insert(x) {
                continue;
            }
            match &self.exprs[x] {
                Expr::Not { .. } => return true,
                Expr::And(b) => todo.extend(b.iter().copied()),
                _ => {}
            }
        }
        false
    }

    /// A conjunction with [`Expr::Not`]s: the other parts' cores, each of which must be a
    /// single instance (a literal, or a literal merged with more constraints), kept iff every
    /// such `not`'s schema rejects it — decided by [`Compiler::covers`] (the schema has a core
    /// containing it: drop) and [`Compiler::disjoint`] (disjoint from every core: keep).
    /// Anything else is the `not`'s error.
    fn and_with_lazy_nots(&mut self, a: &[ExprId], ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        let mut parts = Vec::new();
        let mut nots = Vec::new();
        let mut todo: Vec<ExprId> = a.to_vec();
        let mut seen: FxHashSet<ExprId> = FxHashSet::default();
        while let Some(x) = todo.pop() {
            if !seen.insert(x) {
                continue;
            }
            match &self.exprs[x] {
                Expr::Not { .. } => nots.push(x),
                Expr::And(b) if self.has_lazy_not(b) => todo.extend(b.iter().copied()),
                _ => parts.push(x),
            }
        }
        let e = self.and(parts);
        let cs = self.normalize(e, ptr)?;
        let mut out = Vec::new();
        for c in cs {
            let mut keep = true;
            for &n in &nots {
                let Expr::Not { pos, ptr: p, reason } = self.exprs[n].clone() else {
                    unreachable!("collected above")
                };
                let err = || SchemaError::unsupported_because("not", &p, not_reason(&reason));
                if !self.single.contains(&c) {
                    // Not a single instance: no literal to test (reported for the first `not`).
                    return Err(err());
                }
                let pcs = self.normalize(pos, &p)?;
                if pcs.iter().any(|&q| self.covers(q, c, 0)) {
                    keep = false;
                    break;
                }
                if !pcs.iter().all(|&q| self.disjoint(c, q, 0)) {
                    return Err(err());
                }
            }
            if keep {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// `A ∧ oneOf(B₁…Bₙ)` is `oneOf(A ∧ B₁ … A ∧ Bₙ)`: an instance of `A` matches exactly one
    /// `A ∧ Bᵢ` iff it matches exactly one `Bᵢ`. When a `oneOf` among `a` cannot be decided on
    /// its own, its siblings are moved into its branches and the `oneOf` decided there, where
    /// they often make the branches disjoint (a `"required": ["type"]` beside branches that
    /// give `type` different values). `None` when `a` holds no `oneOf` that needs this or the
    /// moved form is undecided too (the caller then reports the `oneOf` as before).
    fn and_into_one_of(
        &mut self,
        a: &[ExprId],
        ptr: &str,
    ) -> Result<Option<Vec<CoreId>>, SchemaError> {
        if a.len() < 2 {
            return Ok(None);
        }
        for (i, &x) in a.iter().enumerate() {
            let Expr::OneOf(branches, p) = self.exprs[x].clone() else { continue };
            match self.normalize(x, ptr) {
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), SchemaErrorKind::Unsupported { keyword, .. } if keyword == "oneOf") =>
                    {}
                Err(e) => return Err(e),
            }
            let others: Vec<ExprId> =
                a.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &y)| y).collect();
            let moved: Vec<ExprId> = branches
                .iter()
                .map(|&b| {
                    let mut parts = others.clone();
                    parts.push(b);
                    self.and(parts)
                })
                .collect();
            let y = self.push(Expr::OneOf(moved, p));
            return Ok(self.normalize(y, ptr).ok());
        }
        Ok(None)
    }

    /// A union being built has `n` cores: refuse it when `n` is so far over
    /// [`SchemaLimits::max_alternatives`] that no simplification could bring it back (only
    /// duplicate trivial cores are dropped), before any quadratic work on it. An `enum` of
    /// 100,000 numbers is refused here in microseconds instead of after minutes of pairwise
    /// comparison.
    pub(super) fn within_alternatives(&self, n: usize, ptr: &str) -> Result<(), SchemaError> {
        if n > self.limits.max_alternatives.saturating_mul(4) {
            return Err(SchemaError::limit_at("alternatives", self.limits.max_alternatives, ptr));
        }
        Ok(())
    }

    /// Drop every core of a union that another core of it covers ([`Compiler::covers`]; of
    /// two that cover each other the first is kept): the union is unchanged. Quadratic, so
    /// only run on a union over [`SchemaLimits::max_alternatives`] (a DNF of `not`s and
    /// `anyOf`s often repeats one alternative under different conditions).
    fn drop_covered(&mut self, cs: Vec<CoreId>) -> Vec<CoreId> {
        let mut out: Vec<CoreId> = Vec::new();
        for (i, &c) in cs.iter().enumerate() {
            let covered = cs
                .iter()
                .enumerate()
                .any(|(j, &d)| j != i && self.covers(d, c, 0) && (j < i || !self.covers(c, d, 0)));
            if !covered {
                out.push(c);
            }
        }
        out
    }

    /// A union over the alternatives limit with its scalar cores of one type united into one
    /// core, which has no annotations to keep apart: the string cores into one automaton
    /// (lengths folded in), booleans into one, and numbers that are finite sets of values
    /// (`const`s, `enum`s) into one set — so an `anyOf` of 100 patterns or of 100 `const`
    /// numbers is one alternative per type. The language is unchanged; if an automaton would
    /// pass its size limit the strings stay apart (and the union is refused by its size).
    /// Object and array cores are never united (their alternatives carry their own key and
    /// item state).
    fn collapse_scalars(&mut self, cs: Vec<CoreId>, ptr: &str) -> Vec<CoreId> {
        let strs: Vec<CoreId> =
            cs.iter().copied().filter(|&c| matches!(self.cores[c], Core::String(_))).collect();
        let nums: Vec<(CoreId, Vec<Dec>)> = cs
            .iter()
            .filter_map(|&c| match &self.cores[c] {
                Core::Number(n) => n.finite_values().map(|v| (c, v)),
                _ => None,
            })
            .collect();
        let bools: Vec<CoreId> =
            cs.iter().copied().filter(|&c| matches!(self.cores[c], Core::Bool(_))).collect();
        let mut drop: FxHashSet<CoreId> = FxHashSet::default();
        let mut out_new: Vec<CoreId> = Vec::new();
        if strs.len() > 1 {
            if let Ok(dfa) = self.union_strings(&strs, ptr, "anyOf") {
                drop.extend(strs.iter().copied());
                out_new.push(self.core(Core::String(StrC { dfa, min: 0, max: u32::MAX })));
            }
        }
        if nums.len() > 1 {
            let mut vals = Vec::new();
            for (c, v) in nums {
                drop.insert(c);
                vals.extend(v);
            }
            let n = NumCore { values: Some(Arc::new(NumSet::new(vals))), ..NumCore::any() };
            out_new.push(self.core(Core::Number(n)));
        }
        if bools.len() > 1 {
            let mut bits = 0u8;
            for &c in &bools {
                if let Core::Bool(b) = self.cores[c] {
                    bits |= b;
                }
                drop.insert(c);
            }
            out_new.push(self.core(Core::Bool(bits)));
        }
        let mut out: Vec<CoreId> = cs.into_iter().filter(|c| !drop.contains(c)).collect();
        out.extend(out_new);
        out
    }

    /// Drop duplicate trivial cores (several `null` cores, equal number cores).
    pub(super) fn simplify(&self, cs: Vec<CoreId>) -> Vec<CoreId> {
        let mut out: Vec<CoreId> = Vec::new();
        for c in cs {
            let dup = out.iter().any(|&o| match (&self.cores[o], &self.cores[c]) {
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

    /// `oneOf` over branches that overlap only where one covers the other: a core `c` of
    /// branch `i` contributes `c ∧ ¬(other branches)`, which is `c` itself when `c` is disjoint
    /// from every other branch's cores and empty when some other branch has a core that
    /// contains `c` ([`Compiler::covers`]). When every core is one or the other, the `oneOf`
    /// is exactly the union of the first kind; otherwise `None` (unsure). This is the common
    /// shape of `oneOf` branches written without `type`: `{"required": ["a"], …}` and
    /// `{"required": ["b"], …}` both accept every non-object through their `any` cores, which
    /// cancel, while their object cores are disjoint.
    ///
    /// Object branches told apart by a key none of them requires (`"type": {"enum":
    /// ["exec"]}` beside `"type": {"enum": ["copy"]}`) overlap on the objects without that key.
    /// Each object core is then split on the key into "has it" and "has it not" (an exact
    /// partition, so the branches' languages are unchanged) and the test is repeated: the
    /// halves with the key are disjoint by its values, and the halves without it often cover
    /// one another or are told apart by another key. At most three keys are tried.
    pub(super) fn one_of_by_cover(&mut self, branches: &[Vec<CoreId>]) -> Option<Vec<CoreId>> {
        if let Some(kept) = self.cover_pass(branches) {
            return Some(kept);
        }
        let mut bs = branches.to_vec();
        for key in self.discriminator_keys(branches).into_iter().take(3) {
            let mut total = 0;
            for b in bs.iter_mut() {
                let mut split = Vec::new();
                for &c in b.iter() {
                    split.extend(self.split_on_key(c, &key));
                }
                total += split.len();
                *b = split;
            }
            if total > self.limits.max_alternatives {
                return None;
            }
            if let Some(kept) = self.cover_pass(&bs) {
                return Some(kept);
            }
        }
        None
    }

    /// One pass of [`Compiler::one_of_by_cover`] over fixed cores.
    fn cover_pass(&mut self, branches: &[Vec<CoreId>]) -> Option<Vec<CoreId>> {
        let mut kept = Vec::new();
        for (i, bi) in branches.iter().enumerate() {
            for &c in bi {
                let mut dropped = false;
                for (j, bj) in branches.iter().enumerate() {
                    if i == j {
                        continue;
                    }
                    for &d in bj {
                        if self.disjoint(c, d, 0) {
                            continue;
                        }
                        if !self.covers(d, c, 0) {
                            self.cover_block = (i, j, self.cores[c].type_bit());
                            return None;
                        }
                        dropped = true;
                    }
                }
                if !dropped {
                    kept.push(c);
                }
            }
        }
        Some(kept)
    }

    /// Keys the object cores declare and do not all require, most widely declared first. A
    /// key only one branch declares splits too: `{"foo"}` and `{"bar"}` under
    /// `additionalProperties: false` overlap only on `{}`, which the halves without either key
    /// isolate (and cancel).
    fn discriminator_keys(&self, branches: &[Vec<CoreId>]) -> Vec<String> {
        let mut count: FxHashMap<&str, (usize, bool)> = FxHashMap::default();
        for b in branches {
            let mut seen: FxHashSet<&str> = FxHashSet::default();
            for &c in b {
                let Core::Object(o) = &self.cores[c] else { continue };
                for g in &o.groups {
                    for (k, _) in &g.props {
                        if seen.insert(k) {
                            let e = count.entry(k).or_insert((0, false));
                            e.0 += 1;
                            e.1 |= !o.required.iter().any(|r| r == k);
                        }
                    }
                }
            }
        }
        let mut keys: Vec<(usize, &str)> =
            count.into_iter().filter(|&(_, (_, opt))| opt).map(|(k, (n, _))| (n, k)).collect();
        keys.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        keys.into_iter().map(|(_, k)| k.to_string()).collect()
    }

    /// An object core as the objects with `key` and those without it (itself when it
    /// requires the key); other cores as they are.
    fn split_on_key(&mut self, c: CoreId, key: &str) -> Vec<CoreId> {
        let Core::Object(o) = &self.cores[c] else { return vec![c] };
        if o.required.iter().any(|r| r == key) || o.groups.is_empty() {
            return vec![c];
        }
        let mut has = (**o).clone();
        has.required.push(key.to_string());
        let mut without = (**o).clone();
        let f = self.false_e;
        match without.groups[0].props.iter_mut().find(|(k, _)| k == key) {
            Some((_, e)) => *e = f,
            None => without.groups[0].props.push((key.to_string(), f)),
        }
        let has = self.core(Core::Object(Box::new(has)));
        let without = self.core(Core::Object(Box::new(without)));
        vec![has, without]
    }

    /// When `c` is a single scalar instance ([`Compiler::single`]: a literal, maybe merged
    /// with more constraints), does `d` accept it? Exact for null, booleans, numbers (by
    /// value; `None` under a draft-04 `integer` that also looks at the spelling) and strings
    /// (the one member run through `d`'s automaton and length bounds), and for array and
    /// object literals as `enum`/`const` build them (length or size, required keys and each
    /// member judged the same way, recursively: [`Compiler::literal_parts`]); `None` for
    /// other arrays and objects, which [`Compiler::covers`] and [`Compiler::disjoint`] decide
    /// through their children, for `d`s with `contains`, `uniqueItems` or
    /// `dependentRequired`, and when `c` is not single.
    fn single_in(&mut self, d: CoreId, c: CoreId) -> Option<bool> {
        if !self.single.contains(&c) {
            return None;
        }
        let (cd, cc) = (&self.cores[d], &self.cores[c]);
        if cd.type_bit() != cc.type_bit() {
            return Some(false);
        }
        match (cd, cc) {
            (Core::Array(_), Core::Array(_)) | (Core::Object(_), Core::Object(_)) => {
                self.literal_in_core(d, c)
            }
            (Core::Null, Core::Null) => Some(true),
            (Core::Bool(x), Core::Bool(y)) => Some(y & !x == 0),
            (Core::Number(x), Core::Number(y)) => {
                let (Some((lo, false)), Some((hi, false))) = (&y.lo, &y.hi) else { return None };
                if lo != hi || x.int_syntax || y.int_syntax || !y.accepts(lo) {
                    return None;
                }
                Some(x.accepts(lo))
            }
            (Core::String(x), Core::String(y)) => {
                let dy = &self.dfas[y.dfa.unwrap_or(self.any_dfa)];
                let ms = dy.members(1)?;
                let [m] = &ms[..] else { return None };
                let len = std::str::from_utf8(m).ok()?.chars().count() as u64;
                if len < u64::from(y.min) || len > u64::from(y.max) {
                    return None;
                }
                let dx = &self.dfas[x.dfa.unwrap_or(self.any_dfa)];
                Some(dx.matches(m) && len >= u64::from(x.min) && len <= u64::from(x.max))
            }
            _ => None,
        }
    }

    /// An array or object literal core `c` (built by `literal_in`: each member one single
    /// core, nothing else allowed) judged against core `d` of its type: see
    /// [`Compiler::single_in`].
    fn literal_in_core(&mut self, d: CoreId, c: CoreId) -> Option<bool> {
        let tr = self.true_e;
        let mut checks: Vec<(ExprId, CoreId)> = Vec::new();
        match (&self.cores[d], &self.cores[c]) {
            (Core::Array(x), Core::Array(y)) => {
                let items = self.literal_parts(&y.prefix)?;
                let n = items.len() as u32;
                if y.items != self.false_e || y.min != n || y.max != n {
                    return None;
                }
                if y.contains.is_some() || y.unique.is_some() {
                    return None;
                }
                if x.contains.is_some() || x.unique.is_some() {
                    return None;
                }
                if n < x.min || n > x.max {
                    return Some(false);
                }
                for (i, m) in items.into_iter().enumerate() {
                    checks.push((x.prefix.get(i).copied().unwrap_or(x.items), m));
                }
            }
            (Core::Object(x), Core::Object(y)) => {
                let [g] = &y.groups[..] else { return None };
                let members = self.literal_parts(g.props.iter().map(|(_, e)| e))?;
                let n = members.len() as u32;
                let keys_required = y.required.len() == g.props.len()
                    && g.props.iter().all(|(k, _)| y.required.contains(k));
                if g.additional != self.false_e || !g.patterns.is_empty() || !keys_required {
                    return None;
                }
                if y.names.is_some() || !y.deps.is_empty() || n < y.min || n > y.max {
                    return None;
                }
                if !x.deps.is_empty() {
                    return None;
                }
                let has = |k: &String| g.props.iter().any(|(p, _)| p == k);
                if n < x.min || n > x.max || !x.required.iter().all(has) {
                    return Some(false);
                }
                for ((k, _), m) in g.props.iter().zip(members) {
                    // `None`: `propertyNames` refuses the key.
                    for e in self.key_parts(x, k)? {
                        checks.push((e, m));
                    }
                }
            }
            _ => return None,
        }
        let mut unsure = false;
        for (e, m) in checks {
            if e == tr {
                continue;
            }
            let Ok(cores) = self.normalize(e, "") else {
                unsure = true;
                continue;
            };
            let mut found = Some(false);
            for q in cores {
                match self.single_in(q, m) {
                    Some(true) => {
                        found = Some(true);
                        break;
                    }
                    Some(false) => {}
                    None => found = None,
                }
            }
            match found {
                Some(true) => {}
                Some(false) => return Some(false),
                None => unsure = true,
            }
        }
        (!unsure).then_some(true)
    }

    /// The member cores of a literal's parts: each expression one [`Compiler::single`] core
    /// (`None` otherwise).
    fn literal_parts<'e>(&self, es: impl IntoIterator<Item = &'e ExprId>) -> Option<Vec<CoreId>> {
        es.into_iter()
            .map(|&e| match &self.exprs[e] {
                Expr::Cores(cs) => match cs[..] {
                    [m] if self.single.contains(&m) => Some(m),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// Does core `d` accept every instance core `c` accepts? Conservative: `false` when
    /// unsure. True for the same core, for a `d` that constrains nothing beyond its type, for
    /// booleans, strings and numbers that constrain less in the ways compared here, and for
    /// objects whose every key's schema in `d` covers its schema in `c`
    /// ([`Compiler::covers_expr`]), with fewer required keys and looser size bounds.
    pub(super) fn covers(&mut self, d: CoreId, c: CoreId, depth: usize) -> bool {
        if d == c {
            return true;
        }
        if let Some(b) = self.single_in(d, c) {
            return b;
        }
        let tr = self.true_e;
        match (&self.cores[d], &self.cores[c]) {
            (Core::Null, Core::Null) => true,
            (Core::Bool(x), Core::Bool(y)) => y & !x == 0,
            (Core::Number(x), Core::Number(y)) if y.values.is_some() => {
                let s = y.values.as_ref().expect("checked");
                (!x.int_syntax || y.int_syntax) && s.members().iter().all(|v| x.accepts(v))
            }
            (Core::Number(x), Core::Number(y)) => {
                x == y
                    || (x.lo.is_none()
                        && x.values.is_none()
                        && x.hi.is_none()
                        && x.multiple.is_none()
                        && !x.frac
                        && x.not_multiples.is_empty()
                        && (!x.integer || y.integer)
                        && (!x.int_syntax || y.int_syntax))
            }
            (Core::String(x), Core::String(y)) => {
                (x.dfa.is_none() || x.dfa == y.dfa) && x.min <= y.min && x.max >= y.max
            }
            (Core::Array(x), Core::Array(_)) => {
                x.prefix.is_empty()
                    && x.items == tr
                    && x.min == 0
                    && x.max == u32::MAX
                    && x.contains.is_none()
                    && x.unique.is_none()
            }
            (Core::Object(_), Core::Object(_)) => self.object_covers(d, c, depth),
            _ => false,
        }
    }

    /// [`Compiler::covers`] for two object cores. The per-key checks are listed from shared
    /// borrows of the cores first: cloning them instead (their key groups own the property
    /// names) was most of the compile time of wide unions, whose pairwise `drop_covered` runs
    /// this on every pair.
    fn object_covers(&mut self, d: CoreId, c: CoreId, depth: usize) -> bool {
        let (Core::Object(d), Core::Object(c)) = (&self.cores[d], &self.cores[c]) else {
            unreachable!("object cores checked by the caller")
        };
        let (d, c): (&ObjC, &ObjC) = (d, c);
        let tr = self.true_e;
        let unconstrained = d.groups.iter().all(|g| {
            g.additional == tr
                && g.patterns.iter().all(|&(_, e)| e == tr)
                && g.props.iter().all(|&(_, e)| e == tr)
        });
        let sizes = d.required.iter().all(|r| c.required.contains(r))
            && d.min <= c.min
            && d.max >= c.max
            && d.deps.is_empty()
            && (d.names.is_none() || d.names == c.names);
        if !sizes {
            return false;
        }
        if unconstrained {
            return true;
        }
        if depth > 3 || d.groups.iter().chain(&c.groups).any(|g| !g.patterns.is_empty()) {
            return false;
        }
        let mut keys: Vec<&str> = Vec::new();
        for g in d.groups.iter().chain(&c.groups) {
            for (k, _) in &g.props {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
        // Per key: the schemas `d` and `c` give it (`None`: a key `propertyNames` refuses).
        type Parts = Option<Vec<ExprId>>;
        let pairs: Vec<(Parts, Parts)> =
            keys.iter().map(|k| (self.key_parts(d, k), self.key_parts(c, k))).collect();
        let ad: Vec<ExprId> = d.groups.iter().map(|g| g.additional).collect();
        let ac: Vec<ExprId> = c.groups.iter().map(|g| g.additional).collect();
        for (pd, pc) in pairs {
            let vd = pd.map_or(self.false_e, |p| self.and(p));
            let vc = pc.map_or(self.false_e, |p| self.and(p));
            if !self.covers_expr(vd, vc, depth + 1) {
                return false;
            }
        }
        let (ad, ac) = (self.and(ad), self.and(ac));
        self.covers_expr(ad, ac, depth + 1)
    }

    /// Does expression `d` accept every instance `c` accepts? Conservative, through the normal
    /// forms: every core of `c` covered by some core of `d`.
    pub(super) fn covers_expr(&mut self, d: ExprId, c: ExprId, depth: usize) -> bool {
        if d == c || d == self.true_e || c == self.false_e {
            return true;
        }
        if depth > 3 {
            return false;
        }
        let (Ok(nd), Ok(nc)) = (self.normalize(d, ""), self.normalize(c, "")) else {
            return false;
        };
        nc.iter().all(|&x| nd.iter().any(|&y| self.covers(y, x, depth)))
    }

    /// Are two cores disjoint (no instance satisfies both)? Conservative: `false` when unsure.
    pub(super) fn disjoint(&mut self, a: CoreId, b: CoreId, depth: usize) -> bool {
        if let Some(x) = match self.single_in(a, b) {
            None => self.single_in(b, a),
            x => x,
        } {
            return !x;
        }
        let (ca, cb) = (self.cores[a].clone(), self.cores[b].clone());
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
                    &self.dfas[dx],
                    &self.dfas[dy],
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
    pub(super) fn key_value(&mut self, o: &ObjC, k: &str) -> ExprId {
        match self.key_parts(o, k) {
            Some(parts) => self.and(parts),
            None => self.false_e,
        }
    }

    /// The schemas every group of `o` gives key `k` (its property's, the matching patterns',
    /// else `additionalProperties`), whose conjunction is [`Compiler::key_value`]; `None`
    /// when `propertyNames` refuses the key.
    fn key_parts(&self, o: &ObjC, k: &str) -> Option<Vec<ExprId>> {
        if o.names.is_some_and(|d| !self.dfas[d].matches(k.as_bytes())) {
            return None;
        }
        let mut parts = Vec::new();
        for g in &o.groups {
            let mut matched = false;
            if let Some((_, e)) = g.props.iter().find(|(n, _)| n == k) {
                parts.push(*e);
                matched = true;
            }
            for &(d, e) in &g.patterns {
                if self.dfas[d].matches(k.as_bytes()) {
                    parts.push(e);
                    matched = true;
                }
            }
            if !matched {
                parts.push(g.additional);
            }
        }
        Some(parts)
    }

    /// Intersection of two cores (`None` when of different types or empty for sure).
    pub(super) fn merge(
        &mut self,
        a: CoreId,
        b: CoreId,
        ptr: &str,
    ) -> Result<Option<CoreId>, SchemaError> {
        let m = self.merge_in(a, b, ptr)?;
        // An intersection with a single instance has at most that instance (`merge_in`
        // returns `a` unchanged only when it is the intersection, or in lenient mode).
        if let Some(m) = m {
            let (sa, sb) = (self.single.contains(&a), self.single.contains(&b));
            if (sa && (m == a || !self.opts.lenient)) || (sb && (m == b || !self.opts.lenient)) {
                self.single.insert(m);
            }
        }
        Ok(m)
    }

    /// [`Compiler::merge`] before single instances are tracked.
    fn merge_in(&mut self, a: CoreId, b: CoreId, ptr: &str) -> Result<Option<CoreId>, SchemaError> {
        let (ca, cb) = (&self.cores[a], &self.cores[b]);
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
                        self.unsupported_because(
                            "contains",
                            ptr,
                            "two different `contains` schemas apply to one array (through \
                             allOf/$ref/oneOf), and each would need its own count of matching \
                             items",
                        )?;
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
                let o = ObjC {
                    groups,
                    required,
                    min: x.min.max(y.min),
                    max: x.max.min(y.max),
                    deps,
                    names,
                };
                if self.required_forbidden(&o) {
                    return Ok(None);
                }
                Core::Object(Box::new(o))
            }
            _ => return Ok(None),
        };
        Ok(Some(self.core(merged)))
    }

    /// Is `e` known to accept nothing (`false`, a reference to it, or normalised empty)?
    fn is_false(&self, mut e: ExprId) -> bool {
        // A chain of single-part conjunctions (`$ref` to `$ref` to `false`), not followed
        // round a cycle.
        for _ in 0..64 {
            if e == self.false_e || self.norm[e].as_ref().is_some_and(Vec::is_empty) {
                return true;
            }
            match &self.exprs[e] {
                Expr::And(v) if v.len() == 1 => e = v[0],
                Expr::Cores(v) => return v.is_empty(),
                _ => return false,
            }
        }
        false
    }

    /// Can an object of `o` not exist because it must hold more keys than `maxProperties`
    /// allows, or a required key that some group gives the schema `false` (not declared, no
    /// pattern matches it, `additionalProperties: false`) or that `propertyNames` refuses?
    /// Checked when cores are merged, so that intersections of `required` (from negated
    /// `propertyNames`/`patternProperties` above all) with closed objects drop out before
    /// they count against the alternatives limit.
    fn required_forbidden(&self, o: &ObjC) -> bool {
        if o.required.len() as u64 > u64::from(o.max) {
            return true;
        }
        o.required.iter().any(|r| {
            self.key_parts(o, r).is_none_or(|parts| parts.iter().any(|&e| self.is_false(e)))
        })
    }

    /// `unevaluated*` is decided per normal-form alternative, which is exact when an instance
    /// matches at most one alternative with given annotations: every `anyOf` below `e` (through
    /// in-place applicators) must have pairwise disjoint branches (annotations from inside a
    /// `not` are dropped where they arise: [`Expr::NoAnnot`]).
    pub(super) fn check_exclusive(
        &mut self,
        e: ExprId,
        kw: &str,
        ptr: &str,
    ) -> Result<(), SchemaError> {
        let mut stack = vec![e];
        let mut seen: FxHashSet<ExprId> = FxHashSet::default();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            match self.exprs[x].clone() {
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
                                            return Err(SchemaError::unsupported_because(
                                                kw,
                                                ptr,
                                                "an anyOf below it has branches that may both \
                                                 match (not shown disjoint), so which keys or \
                                                 items count as evaluated is not decided per \
                                                 alternative",
                                            ));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    stack.extend(a);
                }
                Expr::OneOf(a, _) => {
                    stack.extend(a);
                    stack.extend(self.one_of_negations(x)?.into_iter().flatten());
                }
                Expr::Uneval { base, .. } => stack.push(base),
                // Inside `not`: no annotations.
                Expr::Cores(_) | Expr::Pending | Expr::Not { .. } | Expr::NoAnnot(_) => {}
            }
        }
        Ok(())
    }

    /// Core `c` without its evaluation annotations (a schema's own `properties`,
    /// `prefixItems`, …): what it contributes from inside a `not`, whose annotations the
    /// specification drops.
    fn plain_core(&mut self, c: CoreId) -> CoreId {
        let plain = match self.cores[c].clone() {
            Core::Object(mut o) if o.groups.iter().any(|g| g.annot || g.annot_all) => {
                for g in o.groups.iter_mut() {
                    g.annot = false;
                    g.annot_all = false;
                }
                Core::Object(o)
            }
            Core::Array(mut a) if a.annot_len > 0 || a.annot_all => {
                a.annot_len = 0;
                a.annot_all = false;
                Core::Array(a)
            }
            _ => return c,
        };
        let p = self.core(plain);
        if self.single.contains(&c) {
            self.single.insert(p);
        }
        p
    }

    /// Core `c` with `unevaluatedProperties: props` / `unevaluatedItems: items` applied to
    /// what its own annotations leave unevaluated.
    pub(super) fn apply_uneval(
        &mut self,
        c: CoreId,
        props: Option<ExprId>,
        items: Option<ExprId>,
    ) -> CoreId {
        let tr = self.true_e;
        match self.cores[c].clone() {
            Core::Object(o) if props.is_some() && !o.groups.iter().any(|g| g.annot_all) => {
                let mut names: Vec<(String, ExprId)> = Vec::new();
                let mut patterns: Vec<(DfaId, ExprId)> = Vec::new();
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
                    // `unevaluatedProperties: false` closes the object already; any other
                    // value is an explicit word on the undeclared keys.
                    close: if self.is_false(props.expect("checked")) {
                        Close::Neutral
                    } else {
                        Close::Open
                    },
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
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{compiler, cores, kinds, validates};
    use super::*;
    use serde_json::json;

    #[test]
    fn all_of_intersects_cores_of_the_same_type() {
        let mut c = compiler(json!({"allOf": [{"minimum": 1}, {"maximum": 5, "type": "integer"}]}));
        let e = c.schema_at("").unwrap();
        let cs = cores(&mut c, e);
        assert_eq!(cs.len(), 1);
        let Core::Number(n) = &cs[0] else { panic!("a number core") };
        assert!(n.integer && n.lo.is_some() && n.hi.is_some());
    }

    #[test]
    fn intersections_of_different_types_are_empty() {
        let mut c = compiler(json!({"allOf": [{"type": "string"}, {"type": "integer"}]}));
        let e = c.schema_at("").unwrap();
        assert!(kinds(&mut c, e).is_empty());
    }

    #[test]
    fn objects_merge_their_key_groups_and_required() {
        let mut c = compiler(json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "additionalProperties": false, "required": ["a", "b"]}
        ]}));
        let e = c.schema_at("").unwrap();
        // Both groups apply to every key: `b` is required but the second group forbids it,
        // so the merge is empty.
        assert!(kinds(&mut c, e).is_empty());
        let mut c = compiler(json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "additionalProperties": {"type": "integer"}, "required": ["b"]}
        ]}));
        let e = c.schema_at("").unwrap();
        let cs = cores(&mut c, e);
        let [Core::Object(o)] = &cs[..] else { panic!("one object core") };
        // The two branches' groups and the (empty) one of the schema holding the `allOf`.
        assert_eq!(o.groups.len(), 3);
        assert_eq!(o.required, ["a", "b"]);
        // `a` must be a string by the first group and an integer by the second.
        let va = c.key_value(o, "a");
        assert!(kinds(&mut c, va).is_empty());
    }

    #[test]
    fn disjointness() {
        let mut c = compiler(json!({"$defs": {
            "one": {"const": 1},
            "two": {"const": 2},
            "s": {"type": "string"},
            "s1": {"type": "string", "minLength": 1},
            "p": {"type": "string", "pattern": "^a"},
            "q": {"type": "string", "pattern": "^b"},
            "o1": {"type": "object", "properties": {"k": {"const": "x"}}, "required": ["k"]},
            "o2": {"type": "object", "properties": {"k": {"const": "y"}}, "required": ["k"]}
        }}));
        let core = |c: &mut Compiler<'static>, name: &str| {
            let e = c.schema_at(&format!("/$defs/{name}")).unwrap();
            c.normalize(e, "").unwrap()[0]
        };
        let pairs =
            [("one", "two", true), ("s", "s1", false), ("p", "q", true), ("o1", "o2", true)];
        for (a, b, want) in pairs {
            let (x, y) = (core(&mut c, a), core(&mut c, b));
            assert_eq!(c.disjoint(x, y, 0), want, "{a} vs {b}");
        }
    }

    #[test]
    fn one_of_is_a_union_when_disjoint_and_exclusive_otherwise() {
        let mut c = compiler(json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}));
        let e = c.schema_at("").unwrap();
        assert_eq!(kinds(&mut c, e), ["num", "str"]);
        let s = json!({"oneOf": [{"minimum": 2}, {"multipleOf": 2}], "type": "integer"});
        assert!(validates(&s, "3"));
        assert!(validates(&s, "0"));
        assert!(!validates(&s, "4"));
        assert!(!validates(&s, "1"));
    }

    /// Object branches that overlap only on objects lacking their keys: split on the keys,
    /// the halves without them cover each other and cancel.
    #[test]
    fn one_of_splits_object_branches_on_their_keys() {
        let s = json!({"oneOf": [
            {"type": "object", "additionalProperties": false, "properties": {"foo": {"type": "string"}}},
            {"type": "object", "additionalProperties": false, "properties": {"bar": {"type": "string"}}}
        ]});
        assert!(validates(&s, r#"{"foo":"x"}"#) && validates(&s, r#"{"bar":"y"}"#));
        assert!(!validates(&s, "{}") && !validates(&s, r#"{"foo":"x","bar":"y"}"#));
        let s = json!({"type": "array", "items": {"oneOf": [
            {"type": "object", "properties": {"type": {"enum": ["exec"]}, "value": {"type": "string"}},
             "required": ["value"], "additionalProperties": false},
            {"type": "object", "properties": {"type": {"enum": ["copy"]}, "src": {"type": "string"}},
             "required": ["src"], "additionalProperties": false},
            {"type": "object", "properties": {"type": {"enum": ["install"]}, "value": {"type": "string"}},
             "required": ["value"], "additionalProperties": false}
        ]}});
        assert!(validates(
            &s,
            r#"[{"type":"exec","value":"a"},{"src":"b"},{"type":"copy","src":"c"}]"#
        ));
        // Without the discriminator, exec and install both match.
        assert!(!validates(&s, r#"[{"value":"a"}]"#));
        assert!(!validates(&s, r#"[{"type":"copy","value":"a"}]"#));
    }

    /// Branches without `type` overlap on every other type through their `any` cores, which
    /// cancel; their objects are told apart by a key one requires and the other forbids.
    #[test]
    fn one_of_cancels_cores_another_branch_covers() {
        let s = json!({"oneOf": [
            {"properties": {"path": {"type": "string"}}, "required": ["path"],
             "additionalProperties": false},
            {"properties": {"b64": {"type": "string"}}, "required": ["b64"],
             "additionalProperties": false}
        ]});
        let mut c = compiler(s.clone());
        let e = c.schema_at("").unwrap();
        assert_eq!(kinds(&mut c, e), ["obj", "obj"]);
        assert!(validates(&s, r#"{"path":"x"}"#));
        assert!(validates(&s, r#"{"b64":"x"}"#));
        for bad in [r#"{"path":"x","b64":"y"}"#, r#"{}"#, r#""s""#, "1", "null", "[]", "true"] {
            assert!(!validates(&s, bad), "{bad}");
        }
        // One branch's strings inside the other's: the difference is no core the cover rule
        // can keep, so the negation path decides it.
        let s = json!({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]});
        assert!(validates(&s, r#""abcd""#) && !validates(&s, r#""abc""#));
        // The untyped branch's numbers cover the integers ≥ 3, which cancel; the rest of its
        // numbers is a difference, left to the negation path.
        let s = json!({"oneOf": [{"required": ["a"]}, {"type": "integer", "minimum": 3}]});
        assert!(!validates(&s, "4") && validates(&s, "1") && validates(&s, "3.5"));
        assert!(validates(&s, r#"{"a":1}"#) && !validates(&s, r#"{}"#));
        // A boolean branch covered by `true`, an object branch covered by an untyped one.
        let mut c = compiler(json!({"oneOf": [
            {"enum": [true, null]},
            {"type": ["string", "object"], "required": ["k"], "properties": {"k": false}},
            {"type": "boolean", "const": true}
        ]}));
        let e = c.schema_at("").unwrap();
        // (The object core requires a key it forbids: dropped as empty when merged.)
        assert_eq!(kinds(&mut c, e), ["null", "str"]);
    }

    #[test]
    fn unevaluated_properties_see_only_the_alternative_s_own_keys() {
        let s = json!({
            "anyOf": [
                {"type": "object", "properties": {"a": true}, "required": ["a"]},
                {
                    "type": "object",
                    "properties": {"b": true},
                    "required": ["b"],
                    "not": {"required": ["a"]}
                }
            ],
            "unevaluatedProperties": false
        });
        assert!(validates(&s, r#"{"a":1}"#));
        assert!(validates(&s, r#"{"b":1}"#));
        assert!(!validates(&s, r#"{"a":1,"c":2}"#));
    }

    /// A required key that a closed object cannot hold, or more required keys than
    /// `maxProperties`, makes the merge empty.
    #[test]
    fn merges_drop_objects_whose_required_keys_are_forbidden() {
        let mut c = compiler(json!({"allOf": [
            {"patternProperties": {"^[0-9]$": true}, "additionalProperties": false},
            {"anyOf": [{"required": ["11"]}, {"required": ["1"]}, {"required": ["1", "2"]}]},
            {"maxProperties": 1}
        ]}));
        let e = c.schema_at("").unwrap();
        let objs: Vec<Core> =
            cores(&mut c, e).into_iter().filter(|k| matches!(k, Core::Object(_))).collect();
        let objs = objs.len();
        assert_eq!(objs, 1);
    }

    /// A union over the alternatives limit unites its scalar cores per type: 200 `const`
    /// numbers, 180 `const` strings and a pattern, two booleans are one core each; object
    /// cores stay apart (and over the limit the union is refused).
    #[test]
    fn unions_over_the_limit_unite_their_scalars() {
        let mut branches: Vec<Value> = (0..200).map(|i| json!({"const": i})).collect();
        branches.extend((0..180).map(|i| json!({"const": format!("s{i}")})));
        branches.push(json!({"type": "string", "pattern": "^x[0-9]+$", "maxLength": 3}));
        branches.push(json!({"const": true}));
        branches.push(json!({"const": false}));
        let s = json!({"anyOf": branches});
        let mut c = compiler(s.clone());
        let e = c.schema_at("").unwrap();
        let mut k = kinds(&mut c, e);
        k.sort_unstable();
        assert_eq!(k, ["bool", "num", "str"]);
        for (doc, ok) in [
            ("42", true),
            ("4.2e1", true),
            ("200", false),
            (r#""s179""#, true),
            (r#""s180""#, false),
            (r#""x12""#, true),
            (r#""x123""#, false),
            ("true", true),
            ("null", false),
        ] {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
        let objs: Vec<Value> = (0..300).map(|i| json!({"const": {"k": i}})).collect();
        let mut c = compiler(json!({"anyOf": objs}));
        let e = c.schema_at("").unwrap();
        let err = c.normalize(e, "").unwrap_err();
        assert!(matches!(err.kind(), SchemaErrorKind::Limit { .. }), "{err}");
    }
}
