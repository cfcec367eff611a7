//! The type-specific keywords of a schema object parsed into typed cores: `type`, the numeric
//! bounds and `multipleOf`, string lengths, `pattern` and `format`, the array keywords, the
//! object keywords, and literals (`enum` members, `const`). Each keyword applies only to values
//! of its type, as the specification says, so a schema object becomes one core per type.

use super::refs::esc_ptr;
use super::*;
use crate::schema::number::Dec;
use crate::schema::FormatMode;
use serde_json::Map;

impl<'a> Compiler<'a> {
    pub(super) fn get_u32(v: &Value, ptr: &str, kw: &str) -> Result<u32, SchemaError> {
        match v.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(f.min(u32::MAX as f64) as u32),
            _ => Err(SchemaError::invalid(ptr, format!("{kw} must be a non-negative integer"))),
        }
    }

    pub(super) fn get_dec(v: &Value, ptr: &str, kw: &str) -> Result<Dec, SchemaError> {
        match v {
            Value::Number(n) => Dec::from_json(n)
                .ok_or_else(|| SchemaError::invalid(ptr, format!("{kw}: bad number"))),
            _ => Err(SchemaError::invalid(ptr, format!("{kw} must be a number"))),
        }
    }

    /// The typed part of a schema object: `type` plus every type-specific keyword.
    pub(super) fn shape(
        &mut self,
        m: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<ExprId, SchemaError> {
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

    pub(super) fn num_shape(
        &mut self,
        m: &Map<String, Value>,
        ptr: &str,
        integer: bool,
    ) -> Result<Option<NumCore>, SchemaError> {
        let mut n = NumCore::any();
        n.integer = integer;
        n.int_syntax = integer && (self.draft4 || self.opts.plain_integers);
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
        self.blame_plain_shape(&n, m, ptr);
        Ok(Some(n))
    }

    /// Under `plain_numbers`: when the numbers of this shape exist but no plain text within
    /// the digit caps spells one, remember the keyword to blame ([`Compiler::blame_plain`]):
    /// the lower bound when the shape lives without it, else the upper one, else
    /// `multipleOf`.
    fn blame_plain_shape(&mut self, n: &NumCore, m: &Map<String, Value>, ptr: &str) {
        let pn = self.plain_spelled(n.clone());
        if pn.plain == 0 || !n.live(b"") || pn.live(b"") {
            return;
        }
        let numeric = |k: &str| m.get(k).is_some_and(Value::is_number);
        let kw = if (NumCore { hi: None, ..pn.clone() }).live(b"") {
            match &n.hi {
                Some((_, true)) if numeric("exclusiveMaximum") => "exclusiveMaximum",
                _ => "maximum",
            }
        } else if (NumCore { lo: None, ..pn.clone() }).live(b"") {
            match &n.lo {
                Some((_, true)) if numeric("exclusiveMinimum") => "exclusiveMinimum",
                _ => "minimum",
            }
        } else if n.multiple.is_some() {
            "multipleOf"
        } else {
            "type"
        };
        self.blame_plain(kw, ptr);
    }

    /// Under `plain_numbers`: when none of the numbers `vs` of `keyword` (`const`, `enum`)
    /// can be spelled plainly within the digit caps, remember it ([`Compiler::blame_plain`]).
    pub(super) fn blame_plain_values(&mut self, keyword: &'static str, vs: &[Dec], ptr: &str) {
        let pn = self.plain_spelled(NumCore::any());
        if pn.plain != 0 && !vs.is_empty() && !vs.iter().any(|v| pn.spellable(v)) {
            self.blame_plain(keyword, ptr);
        }
    }

    pub(super) fn str_shape(
        &mut self,
        m: &Map<String, Value>,
        ptr: &str,
    ) -> Result<StrC, SchemaError> {
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
                Ok(re) => {
                    let d = self.regex_dfa(&re, "pattern", ptr);
                    if let Some(d) = self.or_unsupported(d, "pattern", ptr)? {
                        s.dfa = Some(d);
                    }
                }
                Err(msg) => {
                    if msg.contains("not supported") {
                        self.unsupported_because("pattern", ptr, &msg)?;
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
                let why = if f == "regex" {
                    "the language of ECMA-262 regexes is not regular (groups and classes nest), \
                     so no automaton decides it"
                } else {
                    "IDNA2008 label rules (mappings, contextual rules) are not implemented"
                };
                let why = format!("format {f:?}: {why}; annotate formats to accept any string");
                self.unsupported_because("format", ptr, &why)?;
            }
            if let Some(re) = string::format_regex(f).filter(|_| assert) {
                if let Some(n) = string::format_max_len(f) {
                    s.max = s.max.min(n);
                }
                let d = self.format_dfa_id(f, re, ptr)?;
                s.dfa = Some(match s.dfa {
                    None => d,
                    Some(p) => self.dfa_product(p, d, Op::And, "format", ptr)?,
                });
            }
        }
        Ok(s)
    }

    /// The automaton of an asserted `format` (memoised by its regex).
    pub(super) fn format_dfa_id(
        &mut self,
        f: &str,
        re: String,
        ptr: &str,
    ) -> Result<DfaId, SchemaError> {
        if let Some(&d) = self.dfa_memo.get(&re) {
            return Ok(d);
        }
        let d = string::format_dfa(f, &re, self.limits.max_dfa_states)
            .map_err(|e| dfa_err(e, "format", ptr, &self.limits))?;
        let id = self.add_dfa(d);
        self.dfa_memo.insert(re, id);
        Ok(id)
    }

    pub(super) fn arr_shape(
        &mut self,
        m: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<ArrC, SchemaError> {
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
            let neg = unless_unsupported(self.negate(c, &cp, 0))?;
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

    pub(super) fn obj_shape(
        &mut self,
        m: &Map<String, Value>,
        ptr: &str,
    ) -> Result<ObjC, SchemaError> {
        let mut g = KeyGroup {
            props: Vec::new(),
            patterns: Vec::new(),
            additional: self.true_e,
            annot: true,
            annot_all: m.contains_key("additionalProperties"),
            close: match m.get("additionalProperties") {
                Some(Value::Bool(false)) => Close::Neutral,
                Some(_) => Close::Open,
                None if m.contains_key("unevaluatedProperties") => Close::Neutral,
                None if m.contains_key("properties") || m.contains_key("patternProperties") => {
                    Close::Silent
                }
                None => Close::Neutral,
            },
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
                        SchemaError::unsupported_because(
                            "patternProperties",
                            ptr,
                            format!("pattern {k:?}: {msg}"),
                        )
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
            let d = match self.strings_dfa(e, &format!("{ptr}/propertyNames"), "propertyNames")? {
                Some(d) => d,
                None => self.literals_dfa([], "propertyNames", ptr)?,
            };
            o.names = Some(d);
        }
        Ok(o)
    }

    /// One automaton for the strings expression `e` accepts (its string cores, lengths
    /// folded in, united); `None` when it accepts no string. For key languages
    /// (`propertyNames` and its negation).
    pub(super) fn strings_dfa(
        &mut self,
        e: ExprId,
        ptr: &str,
        kw: &str,
    ) -> Result<Option<DfaId>, SchemaError> {
        let cores = self.normalize(e, ptr)?;
        self.union_strings(&cores, ptr, kw)
    }

    /// One automaton for the string cores among `cores` (lengths folded in, united); `None`
    /// when there are none. United pairwise as a balanced tree: folding one by one would
    /// build each product against the whole union so far (hundreds of products at the
    /// state limit for a union of a few hundred patterns, seconds of work).
    pub(super) fn union_strings(
        &mut self,
        cores: &[CoreId],
        ptr: &str,
        kw: &str,
    ) -> Result<Option<DfaId>, SchemaError> {
        let mut level: Vec<DfaId> = Vec::new();
        for &c in cores {
            if let Core::String(s) = self.cores[c].clone() {
                level.push(self.fold_str(&s, ptr)?);
            }
        }
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(2));
            for pair in level.chunks(2) {
                next.push(match *pair {
                    [x, y] => self.dfa_product(x, y, Op::Or, kw, ptr)?,
                    [x] => x,
                    _ => unreachable!("chunks of two"),
                });
            }
            level = next;
        }
        Ok(level.pop())
    }

    /// One automaton for a string constraint, lengths folded in.
    pub(super) fn fold_str(&mut self, s: &StrC, ptr: &str) -> Result<DfaId, SchemaError> {
        let base = s.dfa.unwrap_or(self.any_dfa);
        if s.min == 0 && s.max == u32::MAX {
            return Ok(base);
        }
        let l = self.length_dfa(s.min, s.max, ptr)?;
        if s.dfa.is_none() {
            return Ok(l);
        }
        self.dfa_product(base, l, Op::And, "maxLength", ptr)
    }

    /// Cores of one literal value (`const`, an `enum` member).
    pub(super) fn literal(&mut self, v: &Value, ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        let cs = self.literal_in(v, ptr)?;
        self.single.extend(cs.iter().copied());
        Ok(cs)
    }

    /// [`Compiler::literal`] before its cores are marked as single instances.
    fn literal_in(&mut self, v: &Value, ptr: &str) -> Result<Vec<CoreId>, SchemaError> {
        self.check_size()?;
        Ok(match v {
            Value::Null => vec![self.core(Core::Null)],
            Value::Bool(b) => vec![self.core(Core::Bool(if *b { 2 } else { 1 }))],
            Value::Number(n) => {
                let d = Dec::from_json(n).ok_or_else(|| SchemaError::invalid(ptr, "bad number"))?;
                vec![self.core(Core::Number(NumCore::point(d)))]
            }
            Value::String(s) => {
                let d = self.literals_dfa([s.as_str()], "enum", ptr)?;
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
                let required = m.keys().cloned().collect();
                vec![self.core(Core::Object(Box::new(ObjC::new(props, additional, required, 0))))]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{compiler, cores, kinds};
    use super::*;
    use serde_json::json;

    #[test]
    fn type_keywords_give_one_core_per_type() {
        let mut c = compiler(json!({"type": ["string", "null"], "minLength": 2}));
        let e = c.schema_at("").unwrap();
        assert_eq!(kinds(&mut c, e), ["null", "str"]);
        let Some(Core::String(s)) = cores(&mut c, e).pop() else { panic!("a string core") };
        assert_eq!((s.min, s.max, s.dfa), (2, u32::MAX, None));
    }

    #[test]
    fn keywords_without_type_apply_to_their_type_only() {
        let mut c = compiler(json!({"minimum": 1, "exclusiveMaximum": 5}));
        let e = c.schema_at("").unwrap();
        assert_eq!(kinds(&mut c, e), ["null", "bool", "num", "str", "arr", "obj"]);
        let num = cores(&mut c, e).into_iter().find_map(|k| match k {
            Core::Number(n) => Some(n),
            _ => None,
        });
        let n = num.expect("a number core");
        assert_eq!(n.lo, Some((Dec::from_json(&1.into()).unwrap(), false)));
        assert_eq!(n.hi, Some((Dec::from_json(&5.into()).unwrap(), true)));
        assert!(!n.integer);
    }

    #[test]
    fn tuple_items_and_their_annotations() {
        let mut c =
            compiler(json!({"type": "array", "items": [{"type": "string"}], "maxItems": 3}));
        let e = c.schema_at("").unwrap();
        let Some(Core::Array(a)) = cores(&mut c, e).pop() else { panic!("an array core") };
        assert_eq!((a.prefix.len(), a.annot_len, a.max, a.annot_all), (1, 1, 3, false));
        assert_eq!(kinds(&mut c, a.prefix[0]), ["str"]);
        assert_eq!(a.items, c.true_e);
    }

    #[test]
    fn enum_strings_become_one_automaton() {
        let mut c = compiler(json!({"enum": ["ab", "cd", 1, null]}));
        let e = c.schema_at("").unwrap();
        // In the order of the schema's own cores (null, number, string), each narrowed.
        assert_eq!(kinds(&mut c, e), ["null", "num", "str"]);
        let Some(Core::String(s)) = cores(&mut c, e).pop() else { panic!("a string core") };
        let d = &c.dfas[(s.dfa.expect("an automaton")).index()];
        assert!(d.matches(b"ab") && d.matches(b"cd") && !d.matches(b"abcd"));
    }

    #[test]
    fn object_keywords() {
        let mut c = compiler(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a", "a", "b"],
            "dependentRequired": {"a": ["c"]},
            "maxProperties": 4
        }));
        let e = c.schema_at("").unwrap();
        let Some(Core::Object(o)) = cores(&mut c, e).pop() else { panic!("an object core") };
        assert_eq!(o.required, ["a", "b"]);
        assert_eq!(o.deps, [("a".to_string(), vec!["c".to_string()])]);
        assert_eq!((o.min, o.max), (0, 4));
        assert_eq!(o.groups[0].props[0].0, "a");
    }

    #[test]
    fn bad_keyword_values_are_invalid() {
        for bad in [
            json!({"minLength": -1}),
            json!({"type": "strin"}),
            json!({"multipleOf": 0}),
            json!({"required": "a"}),
        ] {
            let mut c = compiler(bad.clone());
            let err = c.schema_at("").unwrap_err();
            assert!(matches!(err.kind(), SchemaErrorKind::Invalid { .. }), "{bad}: {err}");
        }
    }
}
