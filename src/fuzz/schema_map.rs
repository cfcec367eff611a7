//! The schema read as a map of locations: which subschemas (JSON pointers) exist, which of them
//! an instance exercises, and which keywords apply to each value of an instance — what the
//! coverage report counts and where the near-miss mutations ([`super::mutate`]) strike.
//!
//! This walks the schema *document* (the `serde_json::Value`), not the compiled program, so that
//! locations are the pointers a user reads in their own file. `$ref` is followed for local
//! references (`#`, `#/…` JSON pointers, with `~0`/`~1` and percent escapes); `allOf` members
//! and a `$ref` beside other keywords apply to the same value; an `anyOf`/`oneOf` branch counts
//! as exercised when the value matches its *shape* (type, `const`/`enum`, required keys present)
//! — a heuristic, since deciding the branch exactly would need a validator, and the coverage
//! report says "shape-matched".

use serde_json::{Map, Value};

/// A location: a JSON pointer into the schema document (`""` is the root).
pub(crate) type Pointer = String;

/// One step of a path into an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// A subschema that applies to one value of an instance. The pointer and the path are
/// borrowed for the call: a visit of a 13 kB document calls back thousands of times, and
/// copying the path each time was most of a visit.
pub(crate) struct Visit<'s, 'p> {
    pub node: &'s Map<String, Value>,
    pub pointer: &'p str,
    pub path: &'p [Step],
}

/// A schema document with local `$ref` resolution.
pub(crate) struct SchemaMap<'s> {
    root: &'s Value,
    /// Each `$ref` resolved once: a visit of a document meets the same few hundred references
    /// thousands of times, and decoding and following the pointer each time was a fifth of a
    /// visit (`Github_ultra---o44208`).
    resolved: std::sync::RwLock<rustc_hash::FxHashMap<&'s str, Option<(&'s Value, Pointer)>>>,
}

/// A name as a JSON pointer token (`~` → `~0`, `/` → `~1`), borrowed where it has neither.
fn escape(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains(['~', '/']) {
        token.replace('~', "~0").replace('/', "~1").into()
    } else {
        token.into()
    }
}

/// The JSON type names `value` has (`integer` values are also `number`s).
pub(crate) fn type_names(value: &Value) -> &'static [&'static str] {
    match value {
        Value::Null => &["null"],
        Value::Bool(_) => &["boolean"],
        Value::Number(n) if is_integer(n) => &["integer", "number"],
        Value::Number(_) => &["number"],
        Value::String(_) => &["string"],
        Value::Array(_) => &["array"],
        Value::Object(_) => &["object"],
    }
}

/// Is `n` mathematically an integer (`1.0` is, as JSON Schema says)?
pub(crate) fn is_integer(n: &serde_json::Number) -> bool {
    let s = n.to_string();
    if !s.contains(['.', 'e', 'E']) {
        return true;
    }
    s.parse::<f64>().is_ok_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// The `type` keyword's names, if any.
pub(crate) fn declared_types(node: &Map<String, Value>) -> Option<Vec<&str>> {
    match node.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

impl<'s> SchemaMap<'s> {
    pub fn new(root: &'s Value) -> SchemaMap<'s> {
        SchemaMap { root, resolved: Default::default() }
    }

    /// The node a local `$ref` names, with its pointer (see `resolved`).
    fn resolve(&self, reference: &'s str) -> Option<(&'s Value, Pointer)> {
        let read = self.resolved.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = read.get(reference) {
            return r.clone();
        }
        drop(read);
        let r = self.follow(reference);
        self.resolved
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(reference, r.clone());
        r
    }

    /// [`SchemaMap::resolve`] without the cache.
    fn follow(&self, reference: &str) -> Option<(&'s Value, Pointer)> {
        let fragment = reference.strip_prefix('#')?;
        let pointer = crate::schema::percent_decode(fragment);
        if pointer.is_empty() {
            return Some((self.root, String::new()));
        }
        if !pointer.starts_with('/') {
            return None; // an anchor: not followed
        }
        self.root.pointer(&pointer).map(|v| (v, pointer))
    }

    /// Every subschema location (objects only; `true`/`false` schemas are not locations) and
    /// every `enum` entry (`…/enum/i`), in document order.
    pub fn locations(&self) -> Vec<Pointer> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        self.collect(self.root, String::new(), &mut out, &mut seen);
        out
    }

    fn collect(
        &self,
        node: &'s Value,
        ptr: Pointer,
        out: &mut Vec<Pointer>,
        seen: &mut std::collections::HashSet<Pointer>,
    ) {
        let Some(map) = node.as_object() else { return };
        if !seen.insert(ptr.clone()) || out.len() > 100_000 {
            return;
        }
        out.push(ptr.clone());
        if let Some(Value::Array(values)) = map.get("enum") {
            if values.len() <= 256 {
                for i in 0..values.len() {
                    out.push(format!("{ptr}/enum/{i}"));
                }
            }
        }
        if let Some(Value::String(r)) = map.get("$ref") {
            if let Some((target, tptr)) = self.resolve(r) {
                self.collect(target, tptr, out, seen);
            }
        }
        for key in ["properties", "patternProperties"] {
            if let Some(Value::Object(props)) = map.get(key) {
                for (name, sub) in props {
                    self.collect(sub, format!("{ptr}/{key}/{}", escape(name)), out, seen);
                }
            }
        }
        for key in ["additionalProperties", "items", "additionalItems"] {
            match map.get(key) {
                Some(sub @ Value::Object(_)) => {
                    self.collect(sub, format!("{ptr}/{key}"), out, seen)
                }
                Some(Value::Array(subs)) if key == "items" => {
                    for (i, sub) in subs.iter().enumerate() {
                        self.collect(sub, format!("{ptr}/items/{i}"), out, seen);
                    }
                }
                _ => {}
            }
        }
        for key in ["prefixItems", "anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(subs)) = map.get(key) {
                for (i, sub) in subs.iter().enumerate() {
                    self.collect(sub, format!("{ptr}/{key}/{i}"), out, seen);
                }
            }
        }
    }

    /// Call `f` for every subschema that applies to a value of `instance` (the root, properties,
    /// items; through `$ref`, `allOf`, shape-matched `anyOf`/`oneOf` branches), with the path to
    /// the value; `enum` entries equal to the value are visited as `…/enum/i` with the same node.
    pub fn visit(&self, instance: &Value, f: &mut dyn FnMut(&Visit<'s, '_>, &Value)) {
        let mut path = Vec::new();
        self.visit_node(self.root, String::new(), instance, &mut path, f, 0);
    }

    fn visit_node(
        &self,
        node: &'s Value,
        ptr: Pointer,
        value: &Value,
        path: &mut Vec<Step>,
        f: &mut dyn FnMut(&Visit<'s, '_>, &Value),
        depth: usize,
    ) {
        let Some(map) = node.as_object() else { return };
        if depth > 64 {
            return;
        }
        f(&Visit { node: map, pointer: &ptr, path }, value);
        if let Some(Value::Array(values)) = map.get("enum") {
            if let Some(i) = values.iter().position(|v| json_eq(v, value)) {
                f(&Visit { node: map, pointer: &format!("{ptr}/enum/{i}"), path }, value);
            }
        }
        if let Some(Value::String(r)) = map.get("$ref") {
            if let Some((target, tptr)) = self.resolve(r) {
                self.visit_node(target, tptr, value, path, f, depth + 1);
            }
        }
        if let Some(Value::Array(subs)) = map.get("allOf") {
            for (i, sub) in subs.iter().enumerate() {
                self.visit_node(sub, format!("{ptr}/allOf/{i}"), value, path, f, depth + 1);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(subs)) = map.get(key) {
                for (i, sub) in subs.iter().enumerate() {
                    if self.shape_matches(sub, value, 0) {
                        self.visit_node(sub, format!("{ptr}/{key}/{i}"), value, path, f, depth + 1);
                    }
                }
            }
        }
        match value {
            Value::Object(members) => {
                let props = map.get("properties").and_then(Value::as_object);
                let patterns = map.get("patternProperties").and_then(Value::as_object);
                for (k, v) in members {
                    path.push(Step::Key(k.clone()));
                    let mut matched = false;
                    if let Some(sub) = props.and_then(|p| p.get(k)) {
                        matched = true;
                        let p = format!("{ptr}/properties/{}", escape(k));
                        self.visit_node(sub, p, v, path, f, depth + 1);
                    }
                    for (pat, sub) in patterns.into_iter().flatten() {
                        if pattern_matches(pat, k) {
                            matched = true;
                            let p = format!("{ptr}/patternProperties/{}", escape(pat));
                            self.visit_node(sub, p, v, path, f, depth + 1);
                        }
                    }
                    if !matched {
                        if let Some(sub) = map.get("additionalProperties") {
                            let p = format!("{ptr}/additionalProperties");
                            self.visit_node(sub, p, v, path, f, depth + 1);
                        }
                    }
                    path.pop();
                }
            }
            Value::Array(items) => {
                let prefix = match (map.get("prefixItems"), map.get("items")) {
                    (Some(Value::Array(p)), _) => Some(("prefixItems", p)),
                    (None, Some(Value::Array(p))) => Some(("items", p)),
                    _ => None,
                };
                let rest = match prefix {
                    Some(("items", _)) => {
                        map.get("additionalItems").map(|s| (s, "additionalItems"))
                    }
                    _ => map.get("items").filter(|s| s.is_object()).map(|s| (s, "items")),
                };
                for (i, v) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    match prefix {
                        Some((key, subs)) if i < subs.len() => {
                            self.visit_node(
                                &subs[i],
                                format!("{ptr}/{key}/{i}"),
                                v,
                                path,
                                f,
                                depth + 1,
                            );
                        }
                        _ => {
                            if let Some((sub, key)) = rest {
                                self.visit_node(sub, format!("{ptr}/{key}"), v, path, f, depth + 1);
                            }
                        }
                    }
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// Does `value` have the shape of `node` (type, `const`, `enum`, required keys), through
    /// `$ref` and `allOf`?
    pub fn shape_matches(&self, node: &'s Value, value: &Value, depth: usize) -> bool {
        let Some(map) = node.as_object() else { return node.as_bool() != Some(false) };
        if depth > 16 {
            return true;
        }
        if let Some(types) = declared_types(map) {
            if !type_names(value).iter().any(|t| types.contains(t)) {
                return false;
            }
        }
        if let Some(c) = map.get("const") {
            if !json_eq(c, value) {
                return false;
            }
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            if !values.iter().any(|v| json_eq(v, value)) {
                return false;
            }
        }
        if let (Some(Value::Array(req)), Value::Object(m)) = (map.get("required"), value) {
            if req.iter().filter_map(Value::as_str).any(|k| !m.contains_key(k)) {
                return false;
            }
        }
        if let Some(Value::String(r)) = map.get("$ref") {
            if let Some((target, _)) = self.resolve(r) {
                if !self.shape_matches(target, value, depth + 1) {
                    return false;
                }
            }
        }
        if let Some(Value::Array(subs)) = map.get("allOf") {
            if !subs.iter().all(|s| self.shape_matches(s, value, depth + 1)) {
                return false;
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(subs)) = map.get(key) {
                if !subs.iter().any(|s| self.shape_matches(s, value, depth + 1)) {
                    return false;
                }
            }
        }
        true
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x.to_string() == y.to_string()
                || matches!((x.to_string().parse::<f64>(), y.to_string().parse::<f64>()), (Ok(p), Ok(q)) if p == q)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Does the (ECMA 262, unanchored) `pattern` match `text`? Read with the schema compiler's ECMA
/// translation (`\d`, `\w` ASCII, `\s` ECMA's spaces), the raw pattern where it has none; patterns
/// neither reads match nothing.
///
/// Compiled regexes are kept per thread ([`PATTERN_CACHE`] of them, then the cache starts over):
/// coverage and key hints ask about the same few patterns for every key of every document, and
/// compiling `^.{1,255}$` (a 255-counter over UTF-8) each time was most of a run.
pub(crate) fn pattern_matches(pattern: &str, text: &str) -> bool {
    use regex_automata::meta::Regex;
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static CACHE: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
    }
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if !cache.contains_key(pattern) {
            if cache.len() >= PATTERN_CACHE {
                cache.clear();
            }
            let re = crate::schema::string::translate_ecma(pattern)
                .ok()
                .and_then(|t| Regex::new(&t).ok())
                .or_else(|| Regex::new(pattern).ok());
            cache.insert(pattern.to_owned(), re);
        }
        cache[pattern].as_ref().is_some_and(|r| r.is_match(text))
    })
}

/// How many compiled patterns [`pattern_matches`] keeps per thread.
const PATTERN_CACHE: usize = 256;

/// The value at `path` in `root`, mutably.
pub(crate) fn at_mut<'v>(root: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    let mut v = root;
    for step in path {
        v = match (step, v) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Step::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}
