//! A schema object's in-place applicators, as combinators over the typed parts: `$ref` (and
//! `$dynamicRef`, `$recursiveRef`), `enum`/`const`, `allOf`, `anyOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, `dependentSchemas` and `unevaluated*`. The type-specific keywords are
//! [`super::keywords`]'s; negation is [`super::negate`]'s.

use super::refs::esc_ptr;
use super::*;
use crate::schema::error::SchemaErrorKind;

impl<'a> Compiler<'a> {
    pub(super) fn schema(&mut self, v: &'a Value, ptr: &str) -> Result<ExprId, SchemaError> {
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
            match self.refs.resolve_ref(r, ptr) {
                Ok(target) => parts.push(self.follow_ref(&target)?),
                Err(e) => {
                    if matches!(e.kind(), SchemaErrorKind::Unsupported { .. }) {
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
                self.refs.resolve_dynamic(r, ptr)
            } else {
                self.refs.resolve_recursive(r, ptr)
            };
            match target {
                Ok(target) => parts.push(self.follow_ref(&target)?),
                Err(e) if matches!(e.kind(), SchemaErrorKind::Unsupported { .. }) => {
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
                        Err(e) if matches!(e.kind(), SchemaErrorKind::Unsupported { .. }) => {
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
                Err(e) if matches!(e.kind(), SchemaErrorKind::Unsupported { .. }) => {
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
                    Err(e) if matches!(e.kind(), SchemaErrorKind::Unsupported { .. }) => {
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
}
