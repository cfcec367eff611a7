//! Mutations of a valid instance, read off the keywords that apply to each of its values
//! ([`SchemaMap::visit`]): *near misses* — one small change that should break exactly one
//! keyword (a bound ±1, a required property removed, an extra property where
//! `additionalProperties` is `false`, a wrong type, a pattern broken by one character, a
//! duplicate in a `uniqueItems` array, a length one past its limit, a value outside its `enum`)
//! — and *boundary variants* that should stay valid (a number at its bound, a string at its
//! minimum or maximum length, another `enum` value, an optional property left out, an array at
//! its minimum length).
//!
//! Nothing here decides validity: every mutant is labelled with the keyword it aims at and its
//! pointer, and the caller keeps a near miss only when the engine refuses it and a variant only
//! when the engine accepts it (a mutant another `anyOf` branch accepts is simply dropped).

use super::schema_map::{declared_types, is_integer, json_eq, type_names, SchemaMap, Step};
use super::Rng;
use serde_json::{Map, Number, Value};

/// A mutation of an instance — the value at `path` edited ([`Edit`]) — and the keyword (with
/// its JSON pointer in the schema) it aims at. The mutated document is made only when asked
/// ([`Mutant::text`]): a 2 kB document has dozens of candidate mutations and the caller tries
/// one or two, so copying the document for each candidate was a fifth of a fuzz run.
#[derive(Clone, Debug)]
pub(crate) struct Mutant {
    path: Vec<Step>,
    edit: Edit,
    pub keyword: String,
    pub pointer: String,
}

/// What a mutation does to the value at its path. Object and array edits say what changes
/// rather than carrying the changed container: a candidate that removed a member from an
/// object near the root carried a copy of nearly the whole document, one per object, and the
/// caller tries a few of them (`Github_ultra---o44208`'s 15 kB documents: a fifth of a run
/// went to `malloc` and `free`).
#[derive(Clone, Debug)]
enum Edit {
    /// The value replaced.
    Replace(Value),
    /// An object's member removed (the others keep their order).
    Remove(String),
    /// Members added at an object's end.
    Insert(Vec<(String, Value)>),
    /// Elements added at an array's end.
    Append(Vec<Value>),
}

impl Mutant {
    /// The mutated document, as JSON text (`instance`: the one the mutation was read off).
    pub fn text(&self, instance: &Value) -> String {
        let mut copy = instance.clone();
        let at = super::schema_map::at_mut(&mut copy, &self.path)
            .expect("a path read off this instance");
        match (&self.edit, at) {
            (Edit::Replace(v), at) => *at = v.clone(),
            (Edit::Remove(k), Value::Object(m)) => {
                m.shift_remove(k);
            }
            (Edit::Insert(kv), Value::Object(m)) => {
                m.extend(kv.iter().cloned());
            }
            (Edit::Append(vs), Value::Array(a)) => a.extend(vs.iter().cloned()),
            _ => unreachable!("an edit read off a value of this type"),
        }
        copy.to_string()
    }
}

/// Where a visit's mutations go: each with the visited value's path and the keyword's
/// pointer.
struct Sink<'a> {
    out: &'a mut Vec<Mutant>,
    path: &'a [Step],
    ptr: &'a str,
}

impl Sink<'_> {
    /// The value replaced by `new`, if any.
    fn add(&mut self, keyword: &str, new: Option<Value>) {
        if let Some(v) = new {
            self.edit(keyword, Edit::Replace(v));
        }
    }

    fn edit(&mut self, keyword: &str, edit: Edit) {
        self.out.push(Mutant {
            path: self.path.to_vec(),
            edit,
            keyword: keyword.into(),
            pointer: format!("{}/{keyword}", self.ptr),
        });
    }
}

fn num(text: &str) -> Option<Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Number(_)) => Some(v),
        _ => None,
    }
}

/// `n + delta` (`delta` a small integer), exact for integers, through `f64` otherwise.
fn shift(n: &Number, delta: i64) -> Option<Value> {
    let s = n.to_string();
    if let Ok(i) = s.parse::<i128>() {
        return num(&(i.checked_add(i128::from(delta))?).to_string());
    }
    let f = s.parse::<f64>().ok()? + delta as f64;
    f.is_finite().then(|| num(&format!("{f:?}"))).flatten()
}

fn shift_frac(n: &Number, delta: f64) -> Option<Value> {
    let f = n.to_string().parse::<f64>().ok()? + delta;
    f.is_finite().then(|| num(&format!("{f:?}"))).flatten()
}

/// Values of each JSON type for [`wrong_type`], a few of each so that one location gives
/// more than one near miss (a schema whose only constraint is its root `type` would otherwise
/// have six at most). The `number` ones are not whole, so they are wrong for `integer`.
const WRONG_TYPED: [(&str, &[&str]); 7] = [
    ("string", &[r#""x""#, r#""""#, r#""near miss""#, r#""0""#, r#""true""#, r#""[]""#]),
    ("integer", &["0", "1", "-7", "1000", "-1", "65536"]),
    ("number", &["0.5", "-2.25", "3.75", "0.001", "12.125", "-0.5"]),
    ("boolean", &["true", "false"]),
    ("null", &["null"]),
    ("array", &["[]", "[0]", r#"["x"]"#, "[null, true]", "[[]]", "[{}]"]),
    ("object", &["{}", r#"{"x": 0}"#, r#"{"near": "miss"}"#, r#"{"": null}"#, r#"{"a": []}"#]),
];

/// A value of a JSON type `types` does not allow (`integer` allowing whole numbers only): a
/// random one of such types, a random one of its [`WRONG_TYPED`] values.
fn wrong_type(types: &[&str], rng: &mut Rng) -> Option<Value> {
    let allowed = |t: &str| types.contains(&t) || (t == "integer" && types.contains(&"number"));
    let offset = rng.below(WRONG_TYPED.len() as u32) as usize;
    let (_, values) = (0..WRONG_TYPED.len())
        .map(|i| &WRONG_TYPED[(i + offset) % WRONG_TYPED.len()])
        .find(|(t, _)| !allowed(t))?;
    draw(values, rng)
}

/// One of [`WRONG_TYPED`]'s values of type `t` (its `integer`s are whole), drawn by `rng`.
fn typed_value(t: &str, rng: &mut Rng) -> Option<Value> {
    let (_, values) = WRONG_TYPED.iter().find(|(name, _)| *name == t)?;
    draw(values, rng)
}

/// One of `values` (JSON texts), drawn by `rng`.
fn draw(values: &[&str], rng: &mut Rng) -> Option<Value> {
    serde_json::from_str(values[rng.below(values.len() as u32) as usize]).ok()
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

fn truncate_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn pad_chars(s: &str, n: usize) -> String {
    let mut out = s.to_string();
    let have = char_len(s);
    out.extend(std::iter::repeat_n('a', n.saturating_sub(have)));
    out
}

fn as_len(v: Option<&Value>) -> Option<usize> {
    v.and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok())
}

/// One character of `s` changed to break a pattern: a replacement by a character of another
/// class, a deletion or an insertion, chosen by `rng`.
fn broken(s: &str, rng: &mut Rng) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return "!".into();
    }
    let i = rng.below(chars.len() as u32) as usize;
    let mut out = chars.clone();
    match rng.below(3) {
        0 => {
            out[i] = match chars[i] {
                c if c.is_ascii_digit() => 'x',
                c if c.is_alphabetic() => '0',
                _ => 'a',
            };
        }
        1 => {
            out.remove(i);
        }
        _ => out.insert(i, '!'),
    }
    out.into_iter().collect()
}

/// `v` changed a little: a string by one character ([`broken`]), a number by one, a boolean
/// negated; `None` for `null`, arrays and objects.
fn nudged(v: &Value, rng: &mut Rng) -> Option<Value> {
    match v {
        Value::String(s) => Some(Value::String(broken(s, rng))),
        Value::Number(n) => shift(n, if rng.below(2) == 0 { -1 } else { 1 }),
        Value::Bool(b) => Some(Value::Bool(!b)),
        _ => None,
    }
}

/// A value outside `values` (an `enum`'s members, or a `const` alone), drawn so that one
/// location gives many near misses: most often a member nudged by one character or one unit
/// (the nearest miss there is), else a value of a type no member has, else a fixed
/// outsider. Before, it was always the first of `"zz-not-in-enum"`, `987654321`, `null`,
/// so a place constrained by an `enum` alone (`Github_trivial---o46358`: `oneOf` of eight
/// one-string enums, no `type`) gave one near miss however many were asked for.
fn outside(values: &[Value], rng: &mut Rng) -> Option<Value> {
    let fresh = |c: &Value| !values.iter().any(|v| json_eq(v, c));
    if !values.is_empty() && rng.below(3) != 0 {
        for _ in 0..4 {
            let member = &values[rng.below(values.len() as u32) as usize];
            if let Some(c) = nudged(member, rng).filter(|c| fresh(c)) {
                return Some(c);
            }
        }
    }
    let types: Vec<&str> =
        values.iter().flat_map(|v| super::schema_map::type_names(v).iter().copied()).collect();
    if let Some(c) = wrong_type(&types, rng).filter(|c| fresh(c)) {
        return Some(c);
    }
    [Value::String("zz-not-in-enum".into()), Value::from(987_654_321), Value::Null]
        .into_iter()
        .find(|c| fresh(c))
}

/// A value the subschema `not` accepts, where that is plain to see: `not` of a `type` alone
/// (a value of one of its types), of an `enum` (a member), of a `const`, or of a `required`
/// (an object with those names, each with a value drawn from [`WRONG_TYPED`]); `None`
/// otherwise. Annotations beside those keywords are ignored.
fn inside(not: &Map<String, Value>, rng: &mut Rng) -> Option<Value> {
    const ANNOTATIONS: [&str; 5] = ["title", "description", "$comment", "examples", "default"];
    let mut keys = not.keys().filter(|k| !ANNOTATIONS.contains(&k.as_str()));
    let (Some(key), None) = (keys.next(), keys.next()) else { return None };
    match (key.as_str(), &not[key]) {
        ("const", c) => Some(c.clone()),
        ("enum", Value::Array(members)) if !members.is_empty() => {
            Some(members[rng.below(members.len() as u32) as usize].clone())
        }
        ("required", Value::Array(names)) => {
            let mut m = Map::new();
            for name in names {
                let name = name.as_str()?;
                let (_, values) = WRONG_TYPED[rng.below(WRONG_TYPED.len() as u32) as usize];
                m.insert(name.to_string(), draw(values, rng)?);
            }
            Some(Value::Object(m))
        }
        ("type", t) => {
            let types: Vec<&str> = match t {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => return None,
            };
            let t = types.get(rng.below(types.len().max(1) as u32) as usize)?;
            typed_value(t, rng)
        }
        _ => None,
    }
}

/// Candidate near misses of `instance` (not yet judged), in random order.
pub(crate) fn near_misses(map: &SchemaMap<'_>, instance: &Value, rng: &mut Rng) -> Vec<Mutant> {
    let mut out = Vec::new();
    map.visit(instance, &mut |visit, value| {
        if visit.pointer.contains("/enum/") {
            return;
        }
        let node = visit.node;
        let mut sink = Sink { out: &mut out, path: visit.path, ptr: visit.pointer };
        if let Some(types) = declared_types(node) {
            sink.add("type", wrong_type(&types, rng));
        }
        if let Some(Value::Array(values)) = node.get("enum") {
            sink.add("enum", outside(values, rng));
        }
        if let Some(c) = node.get("const") {
            sink.add("const", outside(std::slice::from_ref(c), rng));
        }
        if let Some(Value::Object(not)) = node.get("not") {
            sink.add("not", inside(not, rng));
        }
        // `oneOf` fails when no branch matches, or a second one does: a member taken out of an
        // object, or a value of another type, may do either. Where a branch accepts every
        // value (`Github_easy---o2231`: `{"#ref": …}`, an unknown keyword, is an empty
        // schema), the valid values are those every other branch refuses and no other keyword
        // names what is wrong with them; a near miss there makes another branch match.
        if node.get("oneOf").is_some_and(Value::is_array) {
            match value {
                Value::Object(members) if !members.is_empty() => {
                    let k = members.keys().nth(rng.below(members.len() as u32) as usize);
                    sink.edit("oneOf", Edit::Remove(k.expect("a member").clone()));
                }
                _ => sink.add("oneOf", wrong_type(type_names(value), rng)),
            }
        }
        // `required` binds objects only: where the schema does not declare a type, a
        // non-object instance (the valid documents of `Github_medium---o48406`, whose root
        // object can never be valid, are all scalars) still has a near miss here: an object
        // without the required names.
        if let (Some(Value::Array(req)), false) = (node.get("required"), value.is_object()) {
            if !req.is_empty() && declared_types(node).is_none() {
                let pick = if rng.below(2) == 0 {
                    typed_value("object", rng)
                } else {
                    Some(serde_json::json!({ format!("zz_extra_{}", rng.below(1_000_000)): 0 }))
                };
                let lacks = |o: &Value| {
                    o.as_object().is_some_and(|m| {
                        req.iter().any(|k| !k.as_str().is_some_and(|k| m.contains_key(k)))
                    })
                };
                sink.add("required", pick.filter(lacks));
            }
        }
        if let Value::Number(n) = value {
            let integer = declared_types(node).is_some_and(|t| t == ["integer"]) || is_integer(n);
            let draft4_excl = |k: &str| node.get(k).and_then(Value::as_bool) == Some(true);
            if let Some(Value::Number(b)) = node.get("minimum") {
                let v = if draft4_excl("exclusiveMinimum") {
                    Some(Value::Number(b.clone()))
                } else {
                    shift(b, -1)
                };
                sink.add("minimum", v);
            }
            if let Some(Value::Number(b)) = node.get("maximum") {
                let v = if draft4_excl("exclusiveMaximum") {
                    Some(Value::Number(b.clone()))
                } else {
                    shift(b, 1)
                };
                sink.add("maximum", v);
            }
            for k in ["exclusiveMinimum", "exclusiveMaximum"] {
                if let Some(Value::Number(b)) = node.get(k) {
                    sink.add(k, Some(Value::Number(b.clone())));
                }
            }
            if let Some(Value::Number(m)) = node.get("multipleOf") {
                let v = if integer && is_integer(m) && m.to_string() != "1" {
                    shift(n, 1)
                } else {
                    m.to_string().parse::<f64>().ok().and_then(|mf| shift_frac(n, mf / 2.0))
                };
                sink.add("multipleOf", v);
            }
        }
        if let Value::String(s) = value {
            if let Some(min) = as_len(node.get("minLength")).filter(|&m| m >= 1) {
                sink.add(
                    "minLength",
                    Some(Value::String(truncate_chars(&pad_chars(s, min), min - 1))),
                );
            }
            if let Some(max) = as_len(node.get("maxLength")).filter(|&m| m < 100_000) {
                sink.add("maxLength", Some(Value::String(pad_chars(s, max + 1))));
            }
            if node.get("pattern").is_some_and(Value::is_string) {
                sink.add("pattern", Some(Value::String(broken(s, rng))));
            }
        }
        if let Value::Object(members) = value {
            if let Some(Value::Array(req)) = node.get("required") {
                let present: Vec<&str> = req
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|k| members.contains_key(*k))
                    .collect();
                if !present.is_empty() {
                    let k = present[rng.below(present.len() as u32) as usize];
                    sink.edit("required", Edit::Remove(k.to_string()));
                }
            }
            let props = node.get("properties").and_then(Value::as_object);
            let extra_key = (0..)
                .map(|i| if i == 0 { "zz_extra".to_string() } else { format!("zz_extra{i}") })
                .find(|k| !members.contains_key(k) && !props.is_some_and(|p| p.contains_key(k)))
                .expect("a free key");
            if node.get("additionalProperties") == Some(&Value::Bool(false)) {
                sink.edit(
                    "additionalProperties",
                    Edit::Insert(vec![(extra_key.clone(), 0.into())]),
                );
            }
            if let Some(max) = as_len(node.get("maxProperties")).filter(|&m| m < 1000) {
                let extra = (0..=max.saturating_sub(members.len()))
                    .map(|i| (format!("{extra_key}_{i}"), Value::from(0)))
                    .collect();
                sink.edit("maxProperties", Edit::Insert(extra));
            }
            if let Some(min) = as_len(node.get("minProperties")).filter(|&m| m >= 1) {
                let m: Map<String, Value> =
                    members.iter().take(min - 1).map(|(k, v)| (k.clone(), v.clone())).collect();
                sink.add("minProperties", Some(Value::Object(m)));
            }
        }
        if let Value::Array(items) = value {
            if let Some(min) = as_len(node.get("minItems")).filter(|&m| m >= 1) {
                sink.add(
                    "minItems",
                    Some(Value::Array(items.iter().take(min - 1).cloned().collect())),
                );
            }
            if let (Some(max), Some(first)) = (as_len(node.get("maxItems")), items.first()) {
                if max < 1000 {
                    let more = (max + 1).saturating_sub(items.len());
                    sink.edit("maxItems", Edit::Append(vec![first.clone(); more]));
                }
            }
            if node.get("uniqueItems") == Some(&Value::Bool(true)) && !items.is_empty() {
                let i = rng.below(items.len() as u32) as usize;
                sink.edit("uniqueItems", Edit::Append(vec![items[i].clone()]));
            }
        }
    });
    shuffle(&mut out, rng);
    out
}

/// Candidate boundary variants of `instance` (not yet judged), in random order: what a random
/// walk rarely hits by itself.
pub(crate) fn boundary_variants(
    map: &SchemaMap<'_>,
    instance: &Value,
    rng: &mut Rng,
) -> Vec<Mutant> {
    let mut out = Vec::new();
    map.visit(instance, &mut |visit, value| {
        if visit.pointer.contains("/enum/") {
            return;
        }
        let node = visit.node;
        let mut sink = Sink { out: &mut out, path: visit.path, ptr: visit.pointer };
        if let Some(Value::Array(values)) = node.get("enum") {
            if !values.is_empty() {
                sink.add("enum", Some(values[rng.below(values.len() as u32) as usize].clone()));
            }
        }
        if let Value::Number(_) = value {
            for k in ["minimum", "maximum"] {
                if let Some(Value::Number(b)) = node.get(k) {
                    sink.add(k, Some(Value::Number(b.clone())));
                }
            }
            if let Some(Value::Number(b)) = node.get("exclusiveMinimum") {
                sink.add("exclusiveMinimum", shift(b, 1));
            }
            if let Some(Value::Number(b)) = node.get("exclusiveMaximum") {
                sink.add("exclusiveMaximum", shift(b, -1));
            }
        }
        if let Value::String(s) = value {
            if let Some(min) = as_len(node.get("minLength")) {
                sink.add("minLength", Some(Value::String(truncate_chars(&pad_chars(s, min), min))));
            }
            if let Some(max) = as_len(node.get("maxLength")).filter(|&m| m <= 4096) {
                sink.add("maxLength", Some(Value::String(pad_chars(s, max))));
            }
        }
        if let Value::Object(members) = value {
            let req: Vec<&str> = match node.get("required") {
                Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let optional: Vec<&String> =
                members.keys().filter(|k| !req.contains(&k.as_str())).collect();
            if !optional.is_empty() {
                let k = optional[rng.below(optional.len() as u32) as usize];
                sink.edit("properties", Edit::Remove(k.clone()));
            }
        }
        if let Value::Array(items) = value {
            let min = as_len(node.get("minItems")).unwrap_or(0);
            if items.len() > min {
                sink.add("minItems", Some(Value::Array(items[..min].to_vec())));
            }
        }
    });
    shuffle(&mut out, rng);
    out
}

fn shuffle<T>(xs: &mut [T], rng: &mut Rng) {
    for i in (1..xs.len()).rev() {
        let j = rng.below(i as u32 + 1) as usize;
        xs.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_types_are_wrong_and_varied() {
        let mut rng = Rng::new(7);
        let sets: [&[&str]; 6] = [
            &["object"],
            &["integer"],
            &["number"],
            &["string", "null"],
            &["array", "object", "boolean"],
            &["string", "integer", "number", "boolean", "null", "array"],
        ];
        for types in sets {
            let mut seen = std::collections::HashSet::new();
            for _ in 0..400 {
                let v = wrong_type(types, &mut rng).expect("some type is left");
                assert!(
                    super::super::schema_map::type_names(&v).iter().all(|t| !types.contains(t)),
                    "{v} is allowed by {types:?}"
                );
                seen.insert(v.to_string());
            }
            // Root `type: object` alone still gives more than the 20 near misses asked for.
            if types == ["object"] {
                assert!(seen.len() >= 20, "{} values: {seen:?}", seen.len());
            }
        }
        let all = ["string", "integer", "number", "boolean", "null", "array", "object"];
        assert_eq!(wrong_type(&all, &mut rng), None);
    }

    #[test]
    fn values_inside_a_plain_not_are_inside() {
        let mut rng = Rng::new(3);
        let obj = |v: Value| v.as_object().expect("object").clone();
        for _ in 0..50 {
            let v = inside(&obj(serde_json::json!({"type": "integer"})), &mut rng);
            assert!(v.as_ref().is_some_and(|v| v.as_i64().is_some()), "{v:?} is not an integer");
            let v = inside(&obj(serde_json::json!({"type": ["null", "boolean"]})), &mut rng);
            assert!(v.as_ref().is_some_and(|v| v.is_null() || v.is_boolean()), "{v:?}");
            let v = inside(&obj(serde_json::json!({"enum": ["a", 2], "title": "t"})), &mut rng);
            assert!(v == Some("a".into()) || v == Some(2.into()), "{v:?}");
            // `required` alone: an object with every name (`Handwritten---oneof6`'s
            // `not: {required: [x]}`, whose valid documents are all scalars).
            let v = inside(&obj(serde_json::json!({"required": ["x", "y"]})), &mut rng);
            let m = v.as_ref().and_then(Value::as_object).expect("an object");
            assert!(m.len() == 2 && m.contains_key("x") && m.contains_key("y"), "{v:?}");
        }
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            seen.insert(
                inside(&obj(serde_json::json!({"required": ["x"]})), &mut rng).unwrap().to_string(),
            );
        }
        assert!(seen.len() >= 20, "only {} distinct objects with `x`", seen.len());
        assert_eq!(inside(&obj(serde_json::json!({"const": 5})), &mut rng), Some(5.into()));
        // A `type` with another keyword beside it: not plain, no guess.
        let typed = obj(serde_json::json!({"type": "string", "minLength": 3}));
        assert_eq!(inside(&typed, &mut rng), None);
    }

    #[test]
    fn values_outside_an_enum_are_outside_and_varied() {
        let mut rng = Rng::new(11);
        let enums: [Value; 5] = [
            serde_json::json!(["001", "002", "003", "004", "005", "006", "007", "008"]),
            serde_json::json!(["yes"]),
            serde_json::json!([true]),
            serde_json::json!([0, 1]),
            serde_json::json!([null, {"a": 1}, [1, 2]]),
        ];
        for values in &enums {
            let values = values.as_array().expect("array");
            let mut seen = std::collections::HashSet::new();
            for _ in 0..400 {
                let v = outside(values, &mut rng).expect("something is outside");
                assert!(!values.iter().any(|m| json_eq(m, &v)), "{v} is a member of {values:?}");
                seen.insert(v.to_string());
            }
            // One `enum` alone gives the 20 near misses a run asks for.
            assert!(seen.len() >= 20, "{} values outside {values:?}: {seen:?}", seen.len());
        }
        // A nudged member is the usual draw: one character or one unit away.
        let near = (0..100)
            .filter_map(|_| outside(enums[0].as_array().expect("array"), &mut rng))
            .filter(|v| v.as_str().is_some_and(|s| (2..=4).contains(&s.chars().count())))
            .count();
        assert!(near >= 50, "{near} of 100 draws were nudged members");
    }
}
