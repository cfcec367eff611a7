//! Finalisation: normalise everything reachable from the root, lay cores out in their
//! runtime form, compute satisfiability as a least fixpoint, and build the [`Program`].

use super::*;
use crate::schema::unique;

/// The finalised cores reachable from the root.
#[derive(Default)]
struct Reachable {
    /// Runtime cores, in discovery order.
    cores: Vec<CoreRt>,
    /// Per runtime core, the compiler core it came from.
    sources: Vec<CoreId>,
    /// Runtime number of each compiler core.
    numbers: FxHashMap<CoreId, RtCoreId>,
    /// The reachable expressions.
    order: Vec<ExprId>,
}

impl CoreRt {
    /// Push the nodes this core's values hold (items, property values, undeclared keys).
    fn children(&self, out: &mut Vec<ExprId>) {
        match self {
            CoreRt::Array { prefix, items, contains, .. } => {
                out.extend(prefix.iter().copied());
                out.push(*items);
                if let Some(c) = contains {
                    out.extend(c.yes.iter().chain(&c.no).copied());
                }
            }
            CoreRt::Object(o) => {
                out.extend(o.props.iter().map(|p| p.node));
                if let Some(x) = &o.extra {
                    out.extend(x.combos.iter().copied());
                }
            }
            _ => {}
        }
    }
}

/// Does some core of node `e` have a finite instance (by `sat` so far)?
fn node_sat(nodes: &[Vec<RtCoreId>], sat: &[bool], e: ExprId) -> bool {
    nodes[e].iter().any(|&c| sat[c])
}

/// Satisfiability of every core: the least fixpoint of "has a finite instance", so a core
/// that only recurses into itself without a way out stays unsatisfiable.
fn satisfiable(cores: &[CoreRt], nodes: &[Vec<RtCoreId>], dfas: &[ByteDfa]) -> Vec<bool> {
    let mut sat = vec![false; cores.len()];
    loop {
        let mut changed = false;
        for i in 0..cores.len() {
            if !sat[i] && core_sat(&cores[i], nodes, &sat, dfas) {
                sat[i] = true;
                changed = true;
            }
        }
        if !changed {
            return sat;
        }
    }
}

/// Has `core` a finite instance, given which cores are known to (`sat`)?
fn core_sat(core: &CoreRt, nodes: &[Vec<RtCoreId>], sat: &[bool], dfas: &[ByteDfa]) -> bool {
    match core {
        CoreRt::Null => true,
        CoreRt::Bool(b) => *b != 0,
        CoreRt::Number(c) => c.live(b""),
        CoreRt::String { dfa, min, max, .. } => {
            let d = &dfas[*dfa];
            !d.is_empty() && min <= max && d.short(d.start()) <= *max
        }
        CoreRt::Array { prefix, items, min, max, contains: None, .. } => {
            min <= max
                && (0..*min as usize)
                    .all(|k| node_sat(nodes, sat, prefix.get(k).copied().unwrap_or(*items)))
        }
        CoreRt::Array { min, max, contains: Some(c), .. } => {
            let cap = |i: usize| (node_sat(nodes, sat, c.yes[i]), node_sat(nodes, sat, c.no[i]));
            contains_feasible(cap, c.yes.len() - 1, *min, *max, c, 0, 0, false)
        }
        CoreRt::Object(o) => {
            o.required.iter().all(|&r| node_sat(nodes, sat, o.props[r as usize].node))
                && (o.n_required <= o.max)
                && {
                    let avail =
                        o.props.iter().filter(|p| node_sat(nodes, sat, p.node)).count() as u64;
                    let extra_inf = o.extra.as_ref().is_some_and(|x| {
                        dfas[x.dfa].finite_count(dfas[x.dfa].start()).is_none_or(|c| c > 0)
                    });
                    let extra_n = o.extra.as_ref().map_or(0, |x| {
                        let d = &dfas[x.dfa];
                        u64::from(d.finite_count(d.start()).unwrap_or(u32::MAX))
                    });
                    extra_inf || avail + extra_n >= u64::from(o.min) || avail >= u64::from(o.min)
                }
        }
    }
}

/// Declared names whose node is empty can never appear: mark them forbidden (they stay
/// declared, so the runtime never reads them as undeclared keys), and so are names whose
/// dependencies are forbidden. Undeclared keys whose every node is empty are dropped.
fn forbid_dead_keys(cores: &mut [CoreRt], nodes: &[Vec<RtCoreId>]) {
    for c in cores.iter_mut() {
        let CoreRt::Object(o) = c else { continue };
        for p in o.props.iter_mut() {
            p.forbidden = nodes[p.node].is_empty();
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
            if x.combos.iter().all(|&n| nodes[n].is_empty()) {
                o.extra = None;
            }
        }
    }
}

impl<'a> Compiler<'a> {
    /// Normalise everything reachable from `root`, compute satisfiability, and lay out the
    /// runtime program.
    pub(crate) fn finish(mut self, root: ExprId) -> Result<(Program, Vec<String>), SchemaError> {
        // Stage 2: normalise every reachable expression; finalise cores into runtime form.
        let reach = self.finalize_reachable(root)?;
        let mut nodes = self.runtime_nodes(&reach);
        let mut cores = reach.cores;
        // Stage 3: keep satisfiable cores only.
        let sat = satisfiable(&cores, &nodes, &self.dfas);
        for ns in nodes.iter_mut() {
            ns.retain(|&c| sat[c]);
        }
        forbid_dead_keys(&mut cores, &nodes);
        let (unique_members, unique_counted) =
            self.restrict_unique(&mut cores, &nodes, &reach.sources)?;
        if nodes[root].is_empty() {
            return Err(SchemaError::unsat("", "no instance satisfies the schema"));
        }
        let any_dfa = self.any_dfa;
        let ignored = std::mem::take(&mut self.ignored);
        let max_depth = self.limits.max_instance_depth;
        let dfas = self.dfas;
        let program = Program {
            nodes,
            cores,
            dfas,
            root,
            any_dfa,
            max_depth,
            unique_members,
            unique_counted,
        };
        Ok((program, ignored))
    }

    /// Every expression reachable from `root` through the finalised cores' children,
    /// normalised, and its cores finalised (each once, numbered in discovery order).
    fn finalize_reachable(&mut self, root: ExprId) -> Result<Reachable, SchemaError> {
        let mut r = Reachable::default();
        let mut todo: Vec<ExprId> = vec![root];
        let mut seen_expr: FxHashSet<ExprId> = FxHashSet::default();
        while let Some(e) = todo.pop() {
            if !seen_expr.insert(e) {
                continue;
            }
            r.order.push(e);
            let cs = self.normalize(e, "")?;
            for c in cs {
                if r.numbers.contains_key(&c) {
                    continue;
                }
                let rt = self.finalize_core(c)?;
                rt.children(&mut todo);
                r.numbers.insert(c, RtCoreId::new(r.cores.len()));
                r.cores.push(rt);
                r.sources.push(c);
                if r.cores.len() > self.limits.max_nodes {
                    return Err(SchemaError::limit("nodes", self.limits.max_nodes));
                }
            }
        }
        Ok(r)
    }

    /// Nodes in runtime numbering (indexed by [`ExprId`]; unreachable ones empty).
    fn runtime_nodes(&self, r: &Reachable) -> Vec<Vec<RtCoreId>> {
        let mut nodes: Vec<Vec<RtCoreId>> = vec![Vec::new(); self.exprs.len()];
        for &e in &r.order {
            nodes[e] =
                self.norm[e].as_ref().expect("normalised").iter().map(|c| r.numbers[c]).collect();
        }
        nodes
    }

    /// `uniqueItems` only where the runtime decides it exactly (see [`unique`]); elsewhere
    /// it is unsupported (dropped in lenient mode). Returns the members of the string cores
    /// the runtime decides member by member ([`unique::string_members`]), and the other
    /// string cores that are not open, which it decides by counting
    /// ([`unique::counted_fresh`]).
    fn restrict_unique(
        &mut self,
        cores: &mut [CoreRt],
        nodes: &[Vec<RtCoreId>],
        sources: &[CoreId],
    ) -> Result<(UniqueMembers, rustc_hash::FxHashSet<RtCoreId>), SchemaError> {
        let mut members = UniqueMembers::default();
        let mut counted = rustc_hash::FxHashSet::default();
        for i in 0..cores.len() {
            let CoreRt::Array { prefix, items, contains, unique: true, min, .. } = &cores[i] else {
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
            let mut ok = item_nodes.iter().all(|&(e, optional)| {
                unique::node_ok(cores, nodes, &self.dfas, self.any_dfa, e, optional)
            });
            if !ok && prefix.is_empty() && contains.is_none() {
                // Every position takes the same finite values: `minItems` distinct ones must
                // exist, then no position before it is a dead end either.
                let min = *min as usize;
                unique::refuel();
                ok = unique::finite_supply(cores, &nodes[*items], &self.dfas, self.any_dfa, min)
                    .is_some_and(|n| n >= min);
            }
            if !ok {
                let ptr = match &self.cores[sources[i]] {
                    Core::Array(a) => a.unique.clone().unwrap_or_default(),
                    _ => String::new(),
                };
                let bad = item_nodes
                    .iter()
                    .find(|&&(e, optional)| {
                        !unique::node_ok(cores, nodes, &self.dfas, self.any_dfa, e, optional)
                    })
                    .map_or(*items, |&(e, _)| e);
                let why =
                    unique::undecided_reason(cores, nodes, &self.dfas, self.any_dfa, &nodes[bad]);
                self.unsupported_because("uniqueItems", &ptr, why)?;
                if let CoreRt::Array { unique, .. } = &mut cores[i] {
                    *unique = false;
                }
                continue;
            }
            for &(e, _) in &item_nodes {
                for &c in &nodes[e] {
                    if members.contains_key(&c)
                        || unique::open_core(cores, nodes, &self.dfas, self.any_dfa, c)
                    {
                        continue;
                    }
                    if let Some(m) = unique::string_members(&cores[c], &self.dfas, self.any_dfa) {
                        members.insert(c, m);
                    } else if matches!(cores[c], CoreRt::String { .. }) {
                        counted.insert(c);
                    }
                }
            }
        }
        Ok((members, counted))
    }

    pub(super) fn finalize_core(&mut self, c: CoreId) -> Result<CoreRt, SchemaError> {
        Ok(match self.cores[c].clone() {
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

    pub(super) fn finalize_obj(&mut self, o: &ObjC) -> Result<ObjRt, SchemaError> {
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
        let extra = self.undeclared_keys(o, &order_names)?;
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

    /// The undeclared keys of an object constraint whose declared names are `declared`: their
    /// automaton, and per combination of matching `patternProperties` the value node. `None`
    /// when no undeclared key can appear.
    fn undeclared_keys(
        &mut self,
        o: &ObjC,
        declared: &[String],
    ) -> Result<Option<ExtraRt>, SchemaError> {
        let pats: Vec<(DfaId, usize, ExprId)> = o
            .groups
            .iter()
            .enumerate()
            .flat_map(|(gi, g)| g.patterns.iter().map(move |&(d, e)| (d, gi, e)))
            .collect();
        if pats.len() > 4 {
            return Err(SchemaError::unsupported_because(
                "patternProperties",
                "",
                format!(
                    "{} patterns apply to one object (merged through allOf/$ref): an undeclared \
                     key's schema is the conjunction of the patterns it matches, one per \
                     combination, and more than 4 patterns are not combined",
                    pats.len()
                ),
            ));
        }
        let mut combos = Vec::new();
        let mut lang: Option<DfaId> = None;
        if pats.is_empty() && o.names.is_none() {
            // The common case: undeclared keys are any string but the declared names (the
            // runtime reads a declared name as declared, never as undeclared), so no automaton
            // product is needed.
            let parts: Vec<ExprId> = o.groups.iter().map(|g| g.additional).collect();
            let node = self.and(parts);
            let cs = self.normalize(node, "")?;
            return Ok((!cs.is_empty()).then_some(ExtraRt {
                dfa: self.any_dfa,
                patterns: Vec::new(),
                combos: vec![node],
            }));
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
                if !declared.is_empty() {
                    let lit =
                        self.literals_dfa(declared.iter().map(String::as_str), "properties", "")?;
                    l = self.dfa_product(l, lit, Op::AndNot, "properties", "")?;
                }
                if self.dfas[l.index()].is_empty() {
                    None
                } else {
                    Some(ExtraRt { dfa: l, patterns: pats.iter().map(|p| p.0).collect(), combos })
                }
            }
        };
        Ok(extra)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::compiler;
    use super::*;
    use serde_json::json;

    fn program(doc: Value) -> Result<Program, SchemaError> {
        let mut c = compiler(doc);
        let root = c.schema_at("")?;
        c.finish(root).map(|(p, _)| p)
    }

    #[test]
    fn recursion_without_a_finite_instance_is_unsatisfiable() {
        // Every such array needs an item that is such an array: no finite instance.
        let err =
            program(json!({"type": "array", "minItems": 1, "items": {"$ref": "#"}})).unwrap_err();
        assert!(matches!(err.kind(), SchemaErrorKind::Unsatisfiable { .. }));
        // With `[]` as a way out it is fine.
        let p = program(json!({"type": "array", "items": {"$ref": "#"}})).unwrap();
        assert_eq!(p.nodes[p.root].len(), 1);
    }

    #[test]
    fn required_keys_that_cannot_appear_make_the_object_unsatisfiable() {
        let err = program(json!({"type": "object", "properties": {"a": false}, "required": ["a"]}))
            .unwrap_err();
        assert!(matches!(err.kind(), SchemaErrorKind::Unsatisfiable { .. }));
    }

    #[test]
    fn keys_that_cannot_appear_are_forbidden_with_their_dependants() {
        let p = program(json!({
            "type": "object",
            "properties": {"a": false, "b": true, "c": true},
            "dependentRequired": {"b": ["a"]}
        }))
        .unwrap();
        let CoreRt::Object(o) = &p.cores[(p.nodes[p.root][0]).index()] else {
            panic!("an object core")
        };
        let forbidden: Vec<(&[u8], bool)> =
            o.names.iter().zip(&o.props).map(|(n, q)| (&n[..], q.forbidden)).collect();
        assert_eq!(forbidden, [(&b"a"[..], true), (b"b", true), (b"c", false)]);
        assert!(o.has_deps);
    }

    #[test]
    fn unsatisfiable_alternatives_are_dropped_from_nodes() {
        let p = program(json!({"anyOf": [{"type": "string", "minLength": 3, "maxLength": 2}, {"type": "null"}]}))
            .unwrap();
        let root = &p.nodes[p.root];
        assert_eq!(root.len(), 1);
        assert!(matches!(p.cores[root[0]], CoreRt::Null));
    }

    #[test]
    fn unique_items_stay_where_the_runtime_decides_them() {
        // Any string can always be followed by another one: decided exactly.
        let ok =
            program(json!({"type": "array", "uniqueItems": true, "items": {"type": "string"}}))
                .unwrap();
        assert!(ok.cores.iter().any(|c| matches!(c, CoreRt::Array { unique: true, .. })));
        // Integers are not (`0` and `-0` are one value): unsupported, not a wrong mask.
        let err =
            program(json!({"type": "array", "uniqueItems": true, "items": {"type": "integer"}}))
                .unwrap_err();
        assert!(
            matches!(err.kind(), SchemaErrorKind::Unsupported { keyword, .. } if keyword == "uniqueItems")
        );
        // A small finite string language is decided member by member, also before
        // `minItems` when it has enough members; with too few it stays unsupported.
        let s = json!({"type": "array", "uniqueItems": true, "items": {"enum": ["a", "b"]}});
        let p = program(s).unwrap();
        assert_eq!(p.unique_members.len(), 1);
        assert!(program(json!({"type": "array", "uniqueItems": true, "minItems": 2,
            "items": {"enum": ["a", "b"]}}))
        .is_ok());
        assert!(program(json!({"type": "array", "uniqueItems": true, "minItems": 3,
            "items": {"enum": ["a", "b"]}}))
        .is_err());
    }

    #[test]
    fn core_sat_reads_bounds() {
        let dfas = vec![crate::schema::string::any_content().clone()];
        let bad = CoreRt::String { dfa: DfaId::new(0), min: 3, max: 2 };
        let good = CoreRt::String { dfa: DfaId::new(0), min: 0, max: 2 };
        assert!(!core_sat(&bad, &[], &[], &dfas));
        assert!(core_sat(&good, &[], &[], &dfas));
        assert!(!core_sat(&CoreRt::Bool(0), &[], &[], &dfas));
    }
}
