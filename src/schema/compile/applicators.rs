//! A schema object's in-place applicators, as combinators over the typed parts: `$ref` (and
//! `$dynamicRef`, `$recursiveRef`), `enum`/`const`, `allOf`, `anyOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, `dependentSchemas` and `unevaluated*`. The type-specific keywords are
//! [`super::keywords`]'s; negation is [`super::negate`]'s.

use super::refs::esc_ptr;
use super::*;
use crate::schema::number::{Dec, NumSet};
use serde_json::Map;
use std::sync::Arc;

impl<'a> Compiler<'a> {
    /// The expression of the schema `v` at `ptr`: the conjunction of its references, its
    /// typed shape, its literals and its applicators (wrapped for `unevaluated*`).
    pub(super) fn schema(&mut self, v: &'a Value, ptr: &str) -> Result<ExprId, SchemaError> {
        let m = match v {
            Value::Bool(true) => return Ok(self.true_e),
            Value::Bool(false) => return Ok(self.false_e),
            Value::Object(m) => m,
            _ => return Err(SchemaError::invalid(ptr, "a schema must be an object or a boolean")),
        };
        let mut parts: Vec<ExprId> = Vec::new();
        if self.references(m, ptr, &mut parts)? {
            // `$ref` siblings are ignored before 2019-09.
            return Ok(self.and(parts));
        }
        let uneval = m.contains_key("unevaluatedProperties") || m.contains_key("unevaluatedItems");
        let shape = self.shape(m, ptr)?;
        parts.push(shape);
        self.literals(m, ptr, &mut parts)?;
        self.all_any_one(m, ptr, &mut parts)?;
        if let Some(x) = m.get("not") {
            let not = self.negate(x, &format!("{ptr}/not"), 0);
            match not {
                Err(e) if !self.opts.lenient => {
                    let SchemaErrorKind::Unsupported { reason, .. } = e.kind() else {
                        return Err(e);
                    };
                    let reason = reason.clone();
                    let pos = self.schema_at(&format!("{ptr}/not"))?;
                    self.lazy_nots = true;
                    parts.push(self.push(Expr::Not { pos, ptr: ptr.to_string(), reason }));
                }
                not => parts.extend(self.or_unsupported(not, "not", ptr)?),
            }
        }
        self.conditional(m, ptr, uneval, &mut parts)?;
        self.dependent_schemas(m, ptr, &mut parts)?;
        let base = self.and(parts);
        self.origin.entry(base).or_insert_with(|| ptr.to_string());
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

    /// `$ref`, `$dynamicRef` and `$recursiveRef` onto `parts`. `true` when the draft ignores
    /// a `$ref`'s siblings (draft-07 and earlier), so the schema is its reference alone.
    fn references(
        &mut self,
        m: &'a Map<String, Value>,
        ptr: &str,
        parts: &mut Vec<ExprId>,
    ) -> Result<bool, SchemaError> {
        if let Some(r) = m.get("$ref") {
            let r = r.as_str().ok_or_else(|| SchemaError::invalid(ptr, "$ref must be a string"))?;
            let target = self.refs.resolve_ref(r, ptr);
            if let Some(target) = self.or_unsupported(target, "$ref", ptr)? {
                parts.push(self.follow_ref(&target)?);
            }
            if self.legacy_ref {
                return Ok(true);
            }
        }
        for kw in ["$dynamicRef", "$recursiveRef"] {
            let Some(r) = m.get(kw) else { continue };
            let r = r
                .as_str()
                .ok_or_else(|| SchemaError::invalid(ptr, format!("{kw} must be a string")))?;
            let target = if kw == "$dynamicRef" {
                self.refs.resolve_dynamic(r, ptr)
            } else {
                self.refs.resolve_recursive(r, ptr)
            };
            if let Some(target) = self.or_unsupported(target, kw, ptr)? {
                parts.push(self.follow_ref(&target)?);
            }
        }
        Ok(false)
    }

    /// `enum` and `const` onto `parts`. An enum's string members become one automaton, and
    /// its numbers one number core over their set (one alternative each, however many
    /// members).
    fn literals(
        &mut self,
        m: &Map<String, Value>,
        ptr: &str,
        parts: &mut Vec<ExprId>,
    ) -> Result<(), SchemaError> {
        if let Some(x) = m.get("enum") {
            let a =
                x.as_array().ok_or_else(|| SchemaError::invalid(ptr, "enum must be an array"))?;
            let strs: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            let mut cs = Vec::new();
            if !strs.is_empty() {
                let d = self.literals_dfa(strs, "enum", ptr)?;
                cs.push(self.core(Core::String(StrC { dfa: Some(d), min: 0, max: u32::MAX })));
            }
            let nums: Vec<&Value> = a.iter().filter(|v| v.is_number()).collect();
            let nums_len = nums.len();
            if nums_len > 1 {
                let mut vs = Vec::new();
                for n in nums {
                    let n = n.as_number().expect("a number");
                    vs.push(
                        Dec::from_json(n).ok_or_else(|| SchemaError::invalid(ptr, "bad number"))?,
                    );
                }
                self.blame_plain_values("enum", &vs, ptr);
                let n = NumCore { values: Some(Arc::new(NumSet::new(vs))), ..NumCore::any() };
                cs.push(self.core(Core::Number(n)));
            }
            for lit in a.iter().filter(|v| !v.is_string() && (!v.is_number() || nums_len < 2)) {
                if let Some(d) = lit.as_number().and_then(Dec::from_json) {
                    self.blame_plain_values("enum", &[d], ptr);
                }
                cs.extend(self.literal(lit, ptr)?);
            }
            parts.push(self.push(Expr::Cores(cs)));
        }
        if let Some(x) = m.get("const") {
            if let Some(d) = x.as_number().and_then(Dec::from_json) {
                self.blame_plain_values("const", &[d], ptr);
            }
            let cs = self.literal(x, ptr)?;
            parts.push(self.push(Expr::Cores(cs)));
        }
        Ok(())
    }

    /// The subschemas of the array keyword `kw` (`allOf`, `anyOf`, `oneOf`).
    fn branches(&mut self, x: &Value, kw: &str, ptr: &str) -> Result<Vec<ExprId>, SchemaError> {
        let a = x
            .as_array()
            .ok_or_else(|| SchemaError::invalid(ptr, format!("{kw} must be an array")))?;
        (0..a.len()).map(|i| self.schema_at(&format!("{ptr}/{kw}/{i}"))).collect()
    }

    /// `allOf` (conjuncts), `anyOf` (a union) and `oneOf` onto `parts`.
    fn all_any_one(
        &mut self,
        m: &'a Map<String, Value>,
        ptr: &str,
        parts: &mut Vec<ExprId>,
    ) -> Result<(), SchemaError> {
        if let Some(x) = m.get("allOf") {
            let all = self.branches(x, "allOf", ptr)?;
            parts.extend(all);
        }
        if let Some(x) = m.get("anyOf") {
            let alts = self.branches(x, "anyOf", ptr)?;
            let e = self.push(Expr::Or(alts));
            self.origin.insert(e, format!("{ptr}/anyOf"));
            self.anyof.insert(e);
            parts.push(e);
        }
        if let Some(x) = m.get("oneOf") {
            let alts = self.branches(x, "oneOf", ptr)?;
            let e = self.push(Expr::OneOf(alts, ptr.to_string()));
            let scope = self.refs.dyn_scopes.cur;
            self.one_of_negs.insert(e, OneOfNegs::Source(x, ptr.to_string(), scope));
            parts.push(e);
        }
        Ok(())
    }

    /// The negation of every branch of the `oneOf` expression `e`, for
    /// `∨ᵢ (branchᵢ ∧ ∧_{j≠i} ¬branchⱼ)` when the branches overlap; `None` when one cannot be
    /// negated or there are more than 16. Built on first call, in the dynamic scope the
    /// `oneOf` was met in.
    pub(super) fn one_of_negations(
        &mut self,
        e: ExprId,
    ) -> Result<Option<Vec<ExprId>>, SchemaError> {
        let (x, ptr, scope) = match self.one_of_negs.get(&e) {
            None => return Ok(None),
            Some(OneOfNegs::Built(n)) => return Ok(n.clone()),
            Some(OneOfNegs::Source(x, ptr, scope)) => (*x, ptr.clone(), *scope),
        };
        let a = x.as_array().expect("checked by branches");
        let saved = std::mem::replace(&mut self.refs.dyn_scopes.cur, scope);
        let built = |c: &mut Self| -> Result<Option<Vec<ExprId>>, SchemaError> {
            if a.len() > 16 {
                return Ok(None);
            }
            let mut negs = Vec::new();
            for (i, b) in a.iter().enumerate() {
                match unless_unsupported(c.negate(b, &format!("{ptr}/oneOf/{i}"), 0))? {
                    Some(n) => negs.push(n),
                    None => return Ok(None),
                }
            }
            Ok(Some(negs))
        };
        let negs = built(self);
        self.refs.dyn_scopes.cur = saved;
        let negs = negs?;
        self.one_of_negs.insert(e, OneOfNegs::Built(negs.clone()));
        Ok(negs)
    }

    /// `if`/`then`/`else` onto `parts` as `(if ∧ then) ∨ (¬if ∧ else)`. Draft-07 introduced
    /// them: older drafts ignore them. A lone `if` constrains nothing, but its annotations
    /// count for `unevaluated*`.
    fn conditional(
        &mut self,
        m: &'a Map<String, Value>,
        ptr: &str,
        uneval: bool,
        parts: &mut Vec<ExprId>,
    ) -> Result<(), SchemaError> {
        let Some(c) = m.get("if").filter(|_| !self.pre_draft7) else { return Ok(()) };
        let (then, els) = (m.get("then"), m.get("else"));
        if then.is_none() && els.is_none() && !uneval {
            return Ok(());
        }
        let not_if = self.negate(c, &format!("{ptr}/if"), 0);
        let Some(not_if) = self.or_unsupported(not_if, "if", ptr)? else { return Ok(()) };
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
        Ok(())
    }

    /// `dependentSchemas` (and `dependencies` in schema form) onto `parts`: per key,
    /// `non-object ∨ key absent ∨ (key present ∧ schema)`.
    fn dependent_schemas(
        &mut self,
        m: &Map<String, Value>,
        ptr: &str,
        parts: &mut Vec<ExprId>,
    ) -> Result<(), SchemaError> {
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
        Ok(())
    }
}
