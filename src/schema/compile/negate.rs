//! `not` pushed inwards: the expression for the complement of a schema, keyword by keyword.
//!
//! `¬(k1 ∧ k2 ∧ …) = ¬k1 ∨ ¬k2 ∨ …`, and a type-specific keyword holds vacuously for values of
//! other types, so the negation of one keyword only admits values of its own type. Keywords
//! whose complement the engine cannot represent exactly are [`SchemaErrorKind::Unsupported`]
//! (the caller decides whether that is an error).

use super::refs::esc_ptr;
use super::*;
use crate::schema::number::Dec;
use crate::schema::FormatMode;
use serde_json::Map;

/// The most key names a negated `propertyNames`/`patternProperties` may leave possible
/// ([`Compiler::exists_key`]: one object alternative per name).
const MAX_EXISTS_KEYS: u32 = 32;

/// Does the subschema accept every value (`true`, `{}`)?
fn trivially_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

impl<'a> Compiler<'a> {
    /// `not` pushed inwards: the expression for the complement of the schema at `ptr`.
    pub(super) fn negate(
        &mut self,
        v: &'a Value,
        ptr: &str,
        depth: usize,
    ) -> Result<ExprId, SchemaError> {
        let scope = self.refs.enter(ptr);
        let saved = std::mem::replace(&mut self.refs.dyn_scopes.cur, scope);
        let r = self.negate_in(v, ptr, depth);
        self.refs.dyn_scopes.cur = saved;
        r
    }

    /// [`Compiler::negate`] inside the dynamic scope of `ptr`: the union of the negations of
    /// the schema object's keywords.
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
        let mut alts: Vec<ExprId> = Vec::new();
        for (k, x) in m {
            let kp = format!("{ptr}/{}", esc_ptr(k));
            self.negate_keyword(m, k, x, ptr, &kp, depth, &mut alts)?;
        }
        Ok(self.push(Expr::Or(alts)))
    }

    /// Push onto `alts` the expressions whose union is the complement of keyword `k: x` of the
    /// schema object `m` at `ptr` (`kp` is the keyword's own pointer). Nothing for keywords
    /// that constrain nothing.
    #[allow(clippy::too_many_arguments)]
    fn negate_keyword(
        &mut self,
        m: &'a Map<String, Value>,
        k: &str,
        x: &'a Value,
        ptr: &str,
        kp: &str,
        depth: usize,
        alts: &mut Vec<ExprId>,
    ) -> Result<(), SchemaError> {
        let cores = |c: &mut Self, cs: Vec<CoreId>| c.push(Expr::Cores(cs));
        match k {
            // An asserted format: the strings outside its automaton (formats the engine
            // cannot assert stay unsupported).
            "format"
                if self.opts.formats == FormatMode::Assert
                    && x.as_str().is_some_and(|f| string::UNSUPPORTED_FORMATS.contains(&f)) =>
            {
                return Err(SchemaError::unsupported("not", ptr));
            }
            "format"
                if self.opts.formats == FormatMode::Assert
                    && x.as_str().and_then(string::format_regex).is_some() =>
            {
                let f = x.as_str().expect("checked");
                let re = string::format_regex(f).expect("checked");
                let d = self.format_dfa_id(f, re, ptr)?;
                let c = string::complement(&self.dfas[d], self.limits.max_dfa_states)
                    .map_err(|e| dfa_err(e, "not", ptr, &self.limits))?;
                let c = self.add_dfa(c);
                let mut cs =
                    vec![self.core(Core::String(StrC { dfa: Some(c), min: 0, max: u32::MAX }))];
                if let Some(n) = string::format_max_len(f) {
                    // Or too long.
                    let min = n.saturating_add(1);
                    cs.push(self.core(Core::String(StrC { dfa: None, min, max: u32::MAX })));
                }
                alts.push(cores(self, cs));
            }
            "title" | "description" | "default" | "examples" | "$comment" | "$id" | "$schema"
            | "$anchor" | "$defs" | "definitions" | "readOnly" | "writeOnly" | "deprecated"
            | "format" => {}
            _ if k.starts_with("x-") => {}
            "type" => {
                let cs = self.not_type(x, ptr)?;
                alts.push(cores(self, cs));
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
                // Objects without one of the keys.
                let r = x
                    .as_array()
                    .ok_or_else(|| SchemaError::invalid(ptr, "required must be an array"))?;
                for n in r {
                    let n = n
                        .as_str()
                        .ok_or_else(|| SchemaError::invalid(ptr, "required must hold strings"))?;
                    let c = self.obj_core(vec![(n.to_string(), self.false_e)], Vec::new(), 0);
                    alts.push(cores(self, vec![c]));
                }
            }
            "properties" => {
                // Objects with one of the keys, whose value does not match.
                let p = x
                    .as_object()
                    .ok_or_else(|| SchemaError::invalid(ptr, "properties must be an object"))?;
                for (name, sub) in p {
                    let ns = self.negate(sub, &format!("{kp}/{}", esc_ptr(name)), depth + 1)?;
                    let c = self.obj_core(vec![(name.clone(), ns)], vec![name.clone()], 0);
                    alts.push(cores(self, vec![c]));
                }
            }
            "anyOf" | "allOf" | "oneOf" => alts.push(self.not_applicator(k, x, ptr, kp, depth)?),
            "not" => {
                let e = self.schema_at(kp)?;
                alts.push(self.push(Expr::NoAnnot(e)));
            }
            "$ref" | "$dynamicRef" | "$recursiveRef" => {
                let r = x
                    .as_str()
                    .ok_or_else(|| SchemaError::invalid(ptr, format!("{k} must be a string")))?;
                let t = match k {
                    "$ref" => self.refs.resolve_ref(r, ptr)?,
                    "$dynamicRef" => self.refs.resolve_dynamic(r, ptr)?,
                    _ => self.refs.resolve_recursive(r, ptr)?,
                };
                let tv = self.refs.lookup(&t).expect("resolved");
                alts.push(self.negate(tv, &t, depth + 1)?);
            }
            "multipleOf" | "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                let n = self.not_numeric(k, x, ptr)?;
                let c = self.core(Core::Number(n));
                alts.push(cores(self, vec![c]));
            }
            "minProperties" | "maxProperties" | "minItems" | "maxItems" => {
                if let Some(c) = self.not_size(k, x, ptr)? {
                    alts.push(cores(self, vec![c]));
                }
            }
            "items" | "prefixItems" if x.is_array() => {
                // Some listed position holds a non-matching item (`additionalItems`, if any,
                // is negated on its own).
                let a = x.as_array().expect("array");
                let tr = self.true_e;
                for (i, sub) in a.iter().enumerate() {
                    let ni = self.negate(sub, &format!("{kp}/{i}"), depth + 1)?;
                    let mut prefix = vec![tr; i];
                    prefix.push(ni);
                    let c = self.arr_core(prefix, tr, i as u32 + 1, u32::MAX);
                    alts.push(cores(self, vec![c]));
                }
            }
            "items" | "contains"
                if !(m.contains_key("prefixItems")
                    || m.contains_key("minContains")
                    || m.contains_key("maxContains")
                    || (k == "items" && m.contains_key("additionalItems"))) =>
            {
                let c = self.not_items_or_contains(k, x, kp, depth)?;
                alts.push(cores(self, vec![c]));
            }
            "minLength" | "maxLength" | "pattern" => {
                if let Some(s) = self.not_string(k, x, ptr)? {
                    let c = self.core(Core::String(s));
                    alts.push(cores(self, vec![c]));
                }
            }
            // A subschema that accepts everything constrains nothing: nothing to negate
            // (`"unevaluatedProperties": true`, `"patternProperties": {"x": true}`).
            "additionalProperties"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "additionalItems"
            | "propertyNames"
            | "items"
                if trivially_true(x) => {}
            "patternProperties" | "dependentSchemas"
                if x.as_object().is_some_and(|o| o.values().all(trivially_true)) => {}
            // `if` alone constrains nothing; with `then`/`else` it fails where `if` holds and
            // `then` does not, or where `if` fails and `else` does not.
            "if" if !m.contains_key("then") && !m.contains_key("else") => {}
            "if" => {
                let pos = self.schema_at(kp)?;
                let pos = self.push(Expr::NoAnnot(pos));
                if let Some(t) = m.get("then") {
                    let nt = self.negate(t, &format!("{ptr}/then"), depth + 1)?;
                    alts.push(self.and(vec![pos, nt]));
                }
                if let Some(e) = m.get("else") {
                    let ni = self.negate(x, kp, depth + 1)?;
                    let ne = self.negate(e, &format!("{ptr}/else"), depth + 1)?;
                    alts.push(self.and(vec![ni, ne]));
                }
            }
            // ¬propertyNames: some key outside the names' language.
            "propertyNames" => {
                let neg = self.negate(x, kp, depth + 1)?;
                if let Some(names) = self.strings_dfa(neg, kp, "not")? {
                    let tr = self.true_e;
                    alts.push(self.exists_key(names, tr, ptr)?);
                }
            }
            // ¬patternProperties: for some pattern, a matching key whose value fails it.
            "patternProperties" => {
                let p = x.as_object().ok_or_else(|| {
                    SchemaError::invalid(ptr, "patternProperties must be an object")
                })?;
                for (pat, sub) in p {
                    if trivially_true(sub) {
                        continue;
                    }
                    let re = string::translate_ecma(pat)
                        .map_err(|_| SchemaError::unsupported("not", ptr))?;
                    let d = self.regex_dfa(&re, "patternProperties", ptr)?;
                    let nv = self.negate(sub, &format!("{kp}/{}", esc_ptr(pat)), depth + 1)?;
                    alts.push(self.exists_key(d, nv, ptr)?);
                }
            }
            // Keywords the engine knows but cannot negate (or only in the forms above).
            "additionalProperties"
            | "dependencies"
            | "dependentRequired"
            | "dependentSchemas"
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
            // Anything else constrains nothing on the positive side either (unknown keywords,
            // `then`/`else` without `if`, `content*`, anchors): nothing to negate.
            _ => {}
        }
        Ok(())
    }

    /// Objects with some key in the language of automaton `names` whose value matches
    /// `value` (the negations of `propertyNames` and of a `patternProperties` entry). Decided
    /// when the key language is finite with at most [`MAX_EXISTS_KEYS`] members (the union
    /// of "has key `n`, its value in `value`" over them), or when every key qualifies and
    /// the value is unconstrained (`minProperties: 1`). An existential over an infinite key
    /// language has no exact form in the object cores (`required` names keys one by one):
    /// unsupported, saying so.
    fn exists_key(
        &mut self,
        names: DfaId,
        value: ExprId,
        ptr: &str,
    ) -> Result<ExprId, SchemaError> {
        if let Some(ms) = self.dfas[names].members(MAX_EXISTS_KEYS) {
            let mut cs = Vec::new();
            for m in ms {
                let Ok(n) = String::from_utf8(m) else { continue };
                cs.push(self.obj_core(vec![(n.clone(), value)], vec![n], 0));
            }
            return Ok(self.push(Expr::Cores(cs)));
        }
        if value == self.true_e {
            let rest = string::complement(&self.dfas[names], self.limits.max_dfa_states)
                .map_err(|e| dfa_err(e, "not", ptr, &self.limits))?;
            if rest.is_empty() {
                let c = self.obj_core(Vec::new(), Vec::new(), 1);
                return Ok(self.push(Expr::Cores(vec![c])));
            }
        }
        Err(SchemaError::unsupported_because(
            "not",
            ptr,
            format!(
                "it requires some key of an infinite (or over {MAX_EXISTS_KEYS} names) key \
                 language to exist (the negation of propertyNames/patternProperties/\
                 additionalProperties), which objects cannot express"
            ),
        ))
    }

    /// `¬type`: the cores of the other types. `¬integer` also keeps numbers with a fraction.
    fn not_type(&mut self, x: &Value, ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        let names: Vec<&str> = match x {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(SchemaError::invalid(ptr, "bad type")),
        };
        let mut s = T_ALL;
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
        Ok(if has_int_only && !has_num {
            // Not an integer: the other types, and numbers with a fraction.
            let mut cs = self.type_cores(s & !(T_INT | T_NUM));
            let mut n = NumCore::any();
            n.frac = true;
            cs.push(self.core(Core::Number(n)));
            cs
        } else {
            self.type_cores(s & !T_INT | if s & T_NUM != 0 { T_NUM } else { 0 })
        })
    }

    /// `¬anyOf` = every branch negated; `¬allOf` = some branch negated; `¬oneOf` = no branch
    /// (every branch negated) or two at once (`∨_{i<j} (branchᵢ ∧ branchⱼ)`, at most 16
    /// branches so at most 120 pairs). The pairs' annotations come from inside a `not`, so
    /// they are dropped ([`Expr::NoAnnot`]).
    fn not_applicator(
        &mut self,
        k: &str,
        x: &'a Value,
        ptr: &str,
        kp: &str,
        depth: usize,
    ) -> Result<ExprId, SchemaError> {
        let a = x.as_array().ok_or_else(|| SchemaError::invalid(ptr, "must be an array"))?;
        if k == "oneOf" && a.len() > 16 {
            return Err(SchemaError::unsupported_because(
                "not",
                ptr,
                "a negated oneOf of more than 16 branches (its negation pairs every two)",
            ));
        }
        let mut negs = Vec::new();
        for (i, sub) in a.iter().enumerate() {
            negs.push(self.negate(sub, &format!("{kp}/{i}"), depth + 1)?);
        }
        if k == "oneOf" && a.len() > 1 {
            let pos = (0..a.len())
                .map(|i| self.schema_at(&format!("{kp}/{i}")))
                .collect::<Result<Vec<_>, _>>()?;
            let mut alts = vec![self.and(negs)];
            for i in 0..pos.len() {
                for j in i + 1..pos.len() {
                    let both = self.and(vec![pos[i], pos[j]]);
                    alts.push(self.push(Expr::NoAnnot(both)));
                }
            }
            return Ok(self.push(Expr::Or(alts)));
        }
        Ok(if k == "allOf" { self.push(Expr::Or(negs)) } else { self.and(negs) })
    }

    /// The numbers that fail one numeric keyword (other types pass it).
    fn not_numeric(&mut self, k: &str, x: &Value, ptr: &str) -> Result<NumCore, SchemaError> {
        let d = Self::get_dec(x, ptr, k)?;
        let mut n = NumCore::any();
        match k {
            "multipleOf" => {
                if d.is_zero() || d < Dec::zero() {
                    return Err(SchemaError::invalid(ptr, "multipleOf must be > 0"));
                }
                n.not_multiples = vec![d];
                if !n.multiple_supported() {
                    return Err(SchemaError::unsupported("not", ptr));
                }
            }
            "minimum" => n.hi = Some((d, true)),
            "maximum" => n.lo = Some((d, true)),
            "exclusiveMinimum" => n.hi = Some((d, false)),
            _ => n.lo = Some((d, false)),
        }
        Ok(n)
    }

    /// The objects or arrays whose size fails one size keyword; `None` for `min…: 0`, which
    /// every value of the type passes.
    fn not_size(&mut self, k: &str, x: &Value, ptr: &str) -> Result<Option<CoreId>, SchemaError> {
        let n = Self::get_u32(x, ptr, k)?;
        let (lo, hi) = if k.starts_with("min") {
            if n == 0 {
                return Ok(None);
            }
            (0, n - 1)
        } else {
            (n.saturating_add(1), u32::MAX)
        };
        Ok(Some(if k.ends_with("Items") {
            let tr = self.true_e;
            self.arr_core(Vec::new(), tr, lo, hi)
        } else {
            let c = self.obj_core(Vec::new(), Vec::new(), lo);
            if let Core::Object(o) = &mut self.cores[c] {
                o.max = hi;
            }
            c
        }))
    }

    /// ¬(every item ∈ S) = some item ∈ ¬S (`contains: ¬S`); ¬(some item ∈ C) = every item
    /// ∈ ¬C.
    fn not_items_or_contains(
        &mut self,
        k: &str,
        x: &'a Value,
        kp: &str,
        depth: usize,
    ) -> Result<CoreId, SchemaError> {
        let pos = self.schema_at(kp)?;
        let neg = self.negate(x, kp, depth + 1)?;
        let tr = self.true_e;
        Ok(if k == "items" {
            let contains = Some(ContainsC { schema: neg, neg: Some(pos), min: 1, max: u32::MAX });
            self.core(Core::Array(ArrC { contains, ..ArrC::new(Vec::new(), tr, 0, u32::MAX) }))
        } else {
            self.arr_core(Vec::new(), neg, 0, u32::MAX)
        })
    }

    /// The strings that fail one string keyword (a `pattern`'s complement automaton); `None`
    /// for `minLength: 0`.
    fn not_string(&mut self, k: &str, x: &Value, ptr: &str) -> Result<Option<StrC>, SchemaError> {
        let mut s = StrC { dfa: None, min: 0, max: u32::MAX };
        match k {
            "minLength" => {
                let n = Self::get_u32(x, ptr, k)?;
                if n == 0 {
                    return Ok(None);
                }
                s.max = n - 1;
            }
            "maxLength" => s.min = Self::get_u32(x, ptr, k)?.saturating_add(1),
            _ => {
                let p = x
                    .as_str()
                    .ok_or_else(|| SchemaError::invalid(ptr, "pattern must be a string"))?;
                let re =
                    string::translate_ecma(p).map_err(|_| SchemaError::unsupported("not", ptr))?;
                let d = self.regex_dfa(&re, "pattern", ptr)?;
                let c = string::complement(&self.dfas[d], self.limits.max_dfa_states)
                    .map_err(|e| dfa_err(e, "not", ptr, &self.limits))?;
                s.dfa = Some(self.add_dfa(c));
            }
        }
        Ok(Some(s))
    }

    /// Every value except the given literals (scalars only).
    pub(super) fn not_literals(
        &mut self,
        vals: &[&Value],
        ptr: &str,
    ) -> Result<ExprId, SchemaError> {
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
        let lit = self.literals_dfa(strs.iter().copied(), "enum", ptr)?;
        let comp = string::complement(&self.dfas[lit], self.limits.max_dfa_states)
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

    /// Every value except the array or object literal `v`.
    pub(super) fn not_compound(&mut self, v: &Value, ptr: &str) -> Result<ExprId, SchemaError> {
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
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{compiler, cores, kinds, validates};
    use super::*;
    use serde_json::json;

    /// The normal form's kinds of `not` applied to `v`.
    fn negated_kinds(v: Value) -> Vec<&'static str> {
        let mut c = compiler(v);
        let e = negated(&mut c).unwrap();
        kinds(&mut c, e)
    }

    /// `not` applied to the compiler's whole document.
    fn negated(c: &mut Compiler<'static>) -> Result<ExprId, SchemaError> {
        let v = c.refs.lookup("").expect("the document");
        c.negate(v, "", 0)
    }

    #[test]
    fn not_type_keeps_the_other_types() {
        assert_eq!(negated_kinds(json!({"type": "string"})), ["null", "bool", "num", "arr", "obj"]);
        assert_eq!(
            negated_kinds(json!({"type": ["object", "array", "null"]})),
            ["bool", "num", "str"]
        );
        // `¬integer` keeps every number with a fraction.
        let mut c = compiler(json!({"type": "integer"}));
        let e = negated(&mut c).unwrap();
        let nums: Vec<NumCore> = cores(&mut c, e)
            .into_iter()
            .filter_map(|k| match k {
                Core::Number(n) => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(nums.len(), 1);
        assert!(nums[0].frac);
    }

    #[test]
    fn a_type_keyword_negated_admits_only_its_own_type() {
        assert_eq!(negated_kinds(json!({"minimum": 5})), ["num"]);
        assert_eq!(negated_kinds(json!({"maxLength": 2})), ["str"]);
        assert_eq!(negated_kinds(json!({"required": ["a", "b"]})), ["obj", "obj"]);
        // `minItems: 0` holds for every array: nothing to negate, so nothing is admitted.
        assert!(negated_kinds(json!({"minItems": 0})).is_empty());
        // Annotations constrain nothing.
        assert!(negated_kinds(json!({"title": "t", "x-extra": 1})).is_empty());
        assert_eq!(negated_kinds(json!(false)), ["null", "bool", "num", "str", "arr", "obj"]);
        assert!(negated_kinds(json!(true)).is_empty());
    }

    #[test]
    fn negated_bounds_are_exact() {
        let s = json!({"not": {"minimum": 5, "multipleOf": 2}});
        assert!(validates(&s, "4.5"));
        assert!(validates(&s, "7"));
        assert!(!validates(&s, "6"));
        // A string satisfies both keywords vacuously, so it fails their negation.
        assert!(!validates(&s, "\"x\""));
        let s = json!({"not": {"type": "string", "maxLength": 2}});
        assert!(validates(&s, "\"abc\""));
        assert!(!validates(&s, "\"ab\""));
        assert!(validates(&s, "12"));
    }

    #[test]
    fn double_negation_is_the_schema_without_annotations() {
        let mut c = compiler(json!({"not": {"type": "object", "properties": {"a": {}}}}));
        let e = negated(&mut c).unwrap();
        let cs = cores(&mut c, e);
        let [Core::Object(o)] = &cs[..] else { panic!("one object core") };
        assert!(o.groups.iter().all(|g| !g.annot && !g.annot_all));
        // So `unevaluatedProperties` beside it does not count its keys as evaluated.
        let s = json!({"not": {"not": {"properties": {"a": {}}}}, "unevaluatedProperties": false});
        assert!(!validates(&s, r#"{"a":1}"#));
        assert!(validates(&s, "{}"));
    }

    #[test]
    fn what_cannot_be_negated_exactly_is_unsupported() {
        for v in [
            json!({"uniqueItems": true}),
            json!({"oneOf": [{"type": "string"}, {"uniqueItems": true}]}),
            json!({"additionalProperties": false}),
        ] {
            let mut c = compiler(v.clone());
            let err = negated(&mut c).unwrap_err();
            assert!(matches!(err.kind(), SchemaErrorKind::Unsupported { .. }), "{v}");
        }
    }

    /// An asserted format is negated through the complement of its automaton.
    #[test]
    fn negated_formats_are_the_other_strings() {
        let s = json!({"not": {"format": "ipv4"}});
        assert!(!validates(&s, r#""1.2.3.4""#));
        assert!(validates(&s, r#""1.2.3""#) && validates(&s, r#""host""#));
        // A number satisfies `format` vacuously, so it fails the negation.
        assert!(!validates(&s, "7"));
        // Overlapping branches: exactly one of them.
        let s = json!({"type": "string", "oneOf": [{"format": "ipv4"}, {"pattern": "^1\\."}]});
        assert!(validates(&s, r#""2.2.3.4""#) && validates(&s, r#""1.x""#));
        assert!(!validates(&s, r#""1.2.3.4""#) && !validates(&s, r#""x""#));
    }

    /// `¬oneOf`: no branch matches, or two or more do.
    #[test]
    fn negated_one_of_is_none_or_several() {
        let s = json!({"not": {"oneOf": [
            {"properties": {"bar": {"type": "integer"}}, "required": ["bar"]},
            {"properties": {"foo": {"type": "string"}}, "required": ["foo"]}
        ]}});
        for (doc, ok) in [
            (r#"{"bar":"quux","foo":2}"#, true),
            (r#"{"bar":1,"foo":"x"}"#, true),
            (r#"{"bar":1}"#, false),
            (r#"{"foo":"x"}"#, false),
            (r#"{"foo":"x","bar":"y"}"#, false),
            ("7", true),
            (r#""s""#, true),
        ] {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
        let s = json!({"not": {"oneOf": [{"type": "integer"}, {"minimum": 5}, {"const": 9}]}});
        for (doc, ok) in [
            ("3", false),
            ("7", true),
            ("9", true),
            ("7.5", false),
            ("2.5", true),
            (r#""s""#, false),
        ] {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
        let one_of: Vec<Value> = (0..17).map(|i| json!({"const": i})).collect();
        let mut c = compiler(json!({"oneOf": one_of}));
        let err = negated(&mut c).unwrap_err();
        assert!(matches!(err.kind(), SchemaErrorKind::Unsupported { .. }));
    }

    #[test]
    fn literals_are_negated_by_type() {
        let s = json!({"not": {"enum": ["a", 1, null, [1, 2], {"k": true}]}});
        for (doc, ok) in [
            ("\"a\"", false),
            ("\"b\"", true),
            ("1", false),
            ("1.5", true),
            ("null", false),
            ("true", true),
            ("[1,2]", false),
            ("[1,3]", true),
            ("[1]", true),
            ("{\"k\":true}", false),
            ("{\"k\":false}", true),
            ("{}", true),
        ] {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
    }

    /// `¬propertyNames` and `¬patternProperties`: some key of a finite language (one object
    /// alternative per name), or any key at all (`minProperties: 1`).
    #[test]
    fn negated_key_rules_are_some_key_existing() {
        let s = json!({"type": "object", "not": {"propertyNames": {"not": {"enum": ["a", "b"]}}}});
        for (doc, ok) in [
            ("{}", false),
            (r#"{"c":1}"#, false),
            (r#"{"c":1,"b":2}"#, true),
            (r#"{"a":[]}"#, true),
        ] {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
        let s = json!({"not": {"propertyNames": false}});
        assert!(!validates(&s, "{}") && validates(&s, r#"{"x":0}"#) && !validates(&s, "3"));
        let s = json!({"type": "object", "not": {"patternProperties": {"^(x|y)$": {"type": "string"}}}});
        for (doc, ok) in [
            (r#"{"x":"s"}"#, false),
            (r#"{"x":"s","y":2}"#, true),
            (r#"{"z":2}"#, false),
            (r#"{"y":null}"#, true),
        ] {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
        // An infinite key language with a constrained value has no exact form.
        let mut c = compiler(json!({"patternProperties": {"a": {"type": "string"}}}));
        let err = negated(&mut c).unwrap_err();
        assert!(err.to_string().contains("infinite"), "{err}");
    }

    /// Keywords whose subschema accepts everything negate to nothing; `if` with `then`/`else`
    /// negates to "if and not then, or not if and not else".
    #[test]
    fn trivially_true_subschemas_and_conditionals_negate() {
        assert!(negated_kinds(
            json!({"unevaluatedProperties": true, "patternProperties": {"x": {}}})
        )
        .is_empty());
        assert!(negated_kinds(json!({"if": {"type": "string"}})).is_empty());
        let s = json!({"not": {"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}}});
        for (doc, ok) in
            [("3", true), ("7", false), (r#""s""#, false), ("null", true), ("2.5", true)]
        {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
    }

    /// A `not` without an exact complement is decided on literal siblings, one by one.
    #[test]
    fn a_not_without_complement_filters_literals() {
        let s = json!({"allOf": [
            {"enum": [{"a": 1}, {"a": 1, "b": true}, {"b": 2}]},
            {"not": {"additionalProperties": {"type": "integer"}}}
        ]});
        for (doc, ok) in
            [(r#"{"a":1}"#, false), (r#"{"a":1,"b":true}"#, true), (r#"{"b":2}"#, false)]
        {
            assert_eq!(validates(&s, doc), ok, "{doc}");
        }
        // Without literals beside it, the error says why.
        let doc = json!({"type": "object", "not": {"additionalProperties": {"type": "integer"}}});
        let mut c = compiler(doc);
        let e = c.schema_at("").unwrap();
        let err = c.normalize(e, "").unwrap_err();
        assert!(err.to_string().contains("finite set of literals"), "{err}");
    }
}
