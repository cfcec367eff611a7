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
/// With `by_value`, numbers are read with every spelling (without [`NumCore::plain`] and
/// `int_syntax`): which cores the values alone leave satisfiable.
fn satisfiable(
    cores: &[CoreRt],
    nodes: &[Vec<RtCoreId>],
    dfas: &[ByteDfa],
    by_value: bool,
) -> Vec<bool> {
    let mut sat = vec![false; cores.len()];
    loop {
        let mut changed = false;
        for i in 0..cores.len() {
            if !sat[i] && core_sat(&cores[i], nodes, &sat, dfas, by_value) {
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
fn core_sat(
    core: &CoreRt,
    nodes: &[Vec<RtCoreId>],
    sat: &[bool],
    dfas: &[ByteDfa],
    by_value: bool,
) -> bool {
    match core {
        CoreRt::Null => true,
        CoreRt::Bool(b) => *b != 0,
        CoreRt::Number(c) if by_value && (c.plain != 0 || c.int_syntax) => {
            NumCore { plain: 0, int_syntax: false, ..c.clone() }.live(b"")
        }
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
        let mut reach = self.finalize_reachable(root)?;
        let mut nodes = self.runtime_nodes(&reach);
        let mut cores = std::mem::take(&mut reach.cores);
        // Stage 3: keep satisfiable cores only.
        let sat = satisfiable(&cores, &nodes, &self.dfas, false);
        if self.opts.closed_objects && !node_sat(&nodes, &sat, root) {
            if let Some(e) = self.closed_unsat(&reach, &mut cores, &nodes, &sat)? {
                return Err(e);
            }
        }
        // The nodes before the unsatisfiable cores go: what the error for an empty root reads.
        let all_nodes =
            (self.plain_digits() != 0 && !node_sat(&nodes, &sat, root)).then(|| nodes.clone());
        for ns in nodes.iter_mut() {
            ns.retain(|&c| sat[c]);
        }
        forbid_dead_keys(&mut cores, &nodes);
        let (unique_members, unique_counted) =
            self.restrict_unique(&mut cores, &nodes, &reach.sources)?;
        if nodes[root].is_empty() {
            return Err(self.empty_root_error(
                &cores,
                all_nodes.as_deref().unwrap_or(&nodes),
                root,
            ));
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

    /// The error for a schema that has instances but none once its objects are closed
    /// ([`SchemaOptions::closed_objects`]): the closed object core that is empty although
    /// everything it holds has instances (`minProperties` above its declared keys, say), named
    /// by the pointer of a subschema it belongs to. `None` when the schema is unsatisfiable
    /// as written too (the usual error then). Reopens the closed cores of `cores` (an error
    /// follows either way).
    fn closed_unsat(
        &mut self,
        reach: &Reachable,
        cores: &mut [CoreRt],
        nodes: &[Vec<RtCoreId>],
        sat: &[bool],
    ) -> Result<Option<SchemaError>, SchemaError> {
        let mut reopened = Vec::new();
        for (i, &src) in reach.sources.iter().enumerate() {
            let Core::Object(o) = &self.cores[src] else { continue };
            if !self.closes(o) {
                continue;
            }
            let o = o.clone();
            let extra = self.undeclared_keys(&o, &Self::declared_names(&o), false)?;
            if let CoreRt::Object(rt) = &mut cores[i] {
                rt.extra = extra;
                reopened.push(i);
            }
        }
        let open_sat = satisfiable(cores, nodes, &self.dfas, false);
        if !node_sat(nodes, &open_sat, reach.order[0]) {
            return Ok(None);
        }
        // The closed core that is empty by itself: open, it would have an instance with
        // every other core as closed as it is.
        let culprit = reopened
            .iter()
            .copied()
            .find(|&i| !sat[i] && core_sat(&cores[i], nodes, sat, &self.dfas, false))
            .or_else(|| reopened.iter().copied().find(|&i| !sat[i] && open_sat[i]));
        let ptrs: FxHashMap<ExprId, &str> =
            self.by_ptr.iter().map(|((_, p), &e)| (e, p.as_str())).collect();
        let ptr = culprit
            .and_then(|i| {
                let rt = RtCoreId::new(i);
                reach.order.iter().find_map(|&e| {
                    nodes[e]
                        .contains(&rt)
                        .then(|| ptrs.get(&e).copied().or(self.origin.get(&e).map(String::as_str)))
                        .flatten()
                })
            })
            .unwrap_or("")
            .to_string();
        Ok(Some(SchemaError::unsat(
            &ptr,
            "no instance has only the declared keys of this object (closed_objects closes \
             objects that declare properties and say nothing of others): its required keys, \
             minProperties or propertyNames need more; say additionalProperties to keep it \
             open",
        )))
    }

    /// The error for a schema whose root has no satisfiable core. When only the generation
    /// profile's plain numbers made it empty (every number core read with every spelling
    /// again gives an instance), the error says so, naming the keyword remembered by
    /// [`Compiler::blame_plain`] and its pointer.
    fn empty_root_error(
        &self,
        cores: &[CoreRt],
        nodes: &[Vec<RtCoreId>],
        root: ExprId,
    ) -> SchemaError {
        let generic = || SchemaError::unsat("", "no instance satisfies the schema");
        if self.plain_digits() == 0 {
            return generic();
        }
        let sat = satisfiable(cores, nodes, &self.dfas, true);
        if !node_sat(nodes, &sat, root) {
            return generic();
        }
        let n = self.plain_digits();
        let (kw, ptr) = self.plain_blame.clone().unwrap_or(("type", String::new()));
        SchemaError::unsat(
            &ptr,
            format!(
                "`{kw}`: no plain decimal of at most {n} significant digits and {n} after the \
                 point reaches the numbers it allows (the generation profile's plain_numbers; \
                 raise max_number_digits or compile with every spelling)"
            ),
        )
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
            Core::Number(n) => {
                let n = self.plain_spelled(n);
                if !n.plain_supported() {
                    self.unsupported_because(
                        "multipleOf",
                        "",
                        "`not: {multipleOf}` whose excluded multiples do not fit the plain \
                         numbers' steps (SchemaOptions::plain_numbers)",
                    )?;
                }
                CoreRt::Number(n)
            }
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
            Core::Array(mut a) => {
                if self.opts.closed_objects && a.unique.is_some() {
                    for i in 0..a.prefix.len() {
                        a.prefix[i] = self.keep_open(a.prefix[i])?;
                    }
                    a.items = self.keep_open(a.items)?;
                }
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

    /// Is object core `o` closed under [`SchemaOptions::closed_objects`]: one of its groups
    /// declares keys and says nothing of others ([`Close::Silent`]), and none allows
    /// undeclared keys explicitly ([`Close::Open`])? Decided here, on the final core, so that
    /// the names of every piece merged into it (`allOf`, `$ref`, the branch of an `anyOf`)
    /// stay allowed: closing each piece apart would intersect them to nothing.
    pub(super) fn closes(&self, o: &ObjC) -> bool {
        self.opts.closed_objects
            && o.groups.iter().any(|g| g.close == Close::Silent)
            && !o.groups.iter().any(|g| g.close == Close::Open)
    }

    /// The item node `e` of a `uniqueItems` array kept open under
    /// [`SchemaOptions::closed_objects`]: its object cores get an [`Close::Open`] group that
    /// constrains nothing, since the runtime decides uniqueness exactly only for items open
    /// to new keys ([`unique::open_core`]); closing them would make the schema unsupported.
    fn keep_open(&mut self, e: ExprId) -> Result<ExprId, SchemaError> {
        let cs = self.normalize(e, "")?;
        let silent = |c: &Core| match c {
            Core::Object(o) => o.groups.iter().any(|g| g.close == Close::Silent),
            _ => false,
        };
        if !cs.iter().any(|&c| silent(&self.cores[c])) {
            return Ok(e);
        }
        let mut out = Vec::with_capacity(cs.len());
        for c in cs {
            let Core::Object(o) = &self.cores[c] else {
                out.push(c);
                continue;
            };
            let mut o = o.clone();
            o.groups.push(KeyGroup {
                props: Vec::new(),
                patterns: Vec::new(),
                additional: self.true_e,
                annot: false,
                annot_all: false,
                close: Close::Open,
            });
            let k = self.core(Core::Object(o));
            if self.single.contains(&c) {
                self.single.insert(k);
            }
            out.push(k);
        }
        Ok(self.push(Expr::Cores(out)))
    }

    /// The names an object core declares, in order: every name in any group's properties,
    /// in `required`, in the dependencies.
    fn declared_names(o: &ObjC) -> Vec<String> {
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
        order_names
    }

    pub(super) fn finalize_obj(&mut self, o: &ObjC) -> Result<ObjRt, SchemaError> {
        let order_names = Self::declared_names(o);
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
        let closed = self.closes(o);
        let extra = self.undeclared_keys(o, &order_names, closed)?;
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
    /// when no undeclared key can appear. A `closed` object ([`Compiler::closes`]) takes only
    /// the undeclared keys some pattern matches.
    fn undeclared_keys(
        &mut self,
        o: &ObjC,
        declared: &[String],
        closed: bool,
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
        if closed && pats.is_empty() {
            return Ok(None);
        }
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
            if closed && mask == 0 {
                // Keys no pattern matches: none in a closed object (the runtime never looks
                // this combination up, as the key language below leaves them out).
                combos.push(self.false_e);
                continue;
            }
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

    /// The root object core of `doc` compiled with `closed_objects`, and the automata.
    fn closed_root(doc: Value) -> (ObjRt, Vec<ByteDfa>) {
        let mut c = super::super::test_util::compiler_with(
            doc,
            crate::schema::SchemaOptions::default().with_closed_objects(true),
        );
        let root = c.schema_at("").unwrap();
        let mut p = c.finish(root).map(|(p, _)| p).unwrap();
        let k = *p.nodes[p.root]
            .iter()
            .find(|&&k| matches!(p.cores[k.index()], CoreRt::Object(_)))
            .expect("an object core");
        let CoreRt::Object(o) = p.cores.swap_remove(k.index()) else { unreachable!() };
        (o, p.dfas)
    }

    #[test]
    fn closed_objects_take_the_union_of_their_pieces_names() {
        let (o, _) = closed_root(json!({"allOf": [
            {"properties": {"a": {}}},
            {"properties": {"b": {}}, "required": ["b", "x"]}
        ]}));
        let names: Vec<&[u8]> = o.names.iter().map(|n| &n[..]).collect();
        assert_eq!(names, [&b"a"[..], b"b", b"x"]);
        assert!(o.extra.is_none(), "no undeclared key");
        // Any explicit word on undeclared keys keeps the object as written.
        for open in [
            json!({"allOf": [{"properties": {"a": {}}}, {"additionalProperties": true}]}),
            json!({"properties": {"a": {}}, "unevaluatedProperties": {"type": "integer"}}),
            json!({"type": "object"}),
            json!({"type": "object", "not": {"properties": {"a": {}}, "required": ["a"]}}),
        ] {
            assert!(closed_root(open.clone()).0.extra.is_some(), "{open}");
        }
        // Patterns: only the keys some pattern matches.
        let (o, dfas) = closed_root(json!({"patternProperties": {"^x": {}}, "type": "object"}));
        let x = o.extra.expect("pattern keys");
        assert!(dfas[x.dfa.index()].matches(b"xa") && !dfas[x.dfa.index()].matches(b"ya"));
    }

    #[test]
    fn unique_items_stay_open_under_closed_objects() {
        let mut c = super::super::test_util::compiler_with(
            json!({"type": "array", "uniqueItems": true, "items": {"properties": {"a": {}}}}),
            crate::schema::SchemaOptions::default().with_closed_objects(true),
        );
        let root = c.schema_at("").unwrap();
        let p = c.finish(root).map(|(p, _)| p).expect("uniqueItems still decided exactly");
        assert!(p.cores.iter().any(|c| matches!(c, CoreRt::Array { unique: true, .. })));
        assert!(p.cores.iter().all(|c| !matches!(c, CoreRt::Object(o) if o.extra.is_none())));
    }

    #[test]
    fn core_sat_reads_bounds() {
        let dfas = vec![crate::schema::string::any_content().clone()];
        let bad = CoreRt::String { dfa: DfaId::new(0), min: 3, max: 2 };
        let good = CoreRt::String { dfa: DfaId::new(0), min: 0, max: 2 };
        assert!(!core_sat(&bad, &[], &[], &dfas, false));
        assert!(core_sat(&good, &[], &[], &dfas, false));
        assert!(!core_sat(&CoreRt::Bool(0), &[], &[], &dfas, false));
    }
}
