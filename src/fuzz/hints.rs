//! Property-name hints for the generator and the completion search, scoped to the object being
//! written.
//!
//! Where a JSON object key has just been opened, the search tries whole property names before
//! single bytes (without them an open object takes the shortest *additional* key, `""`, over and
//! over and never spells a required one). A single list of every name in the schema is not
//! enough when the object allows additional properties: the first names of that list — the
//! *other* objects' required keys — are all accepted as additional keys, each with a value, and
//! a large object (`Github_hard---o16058`: 131 required keys over nested objects) fills the byte
//! budget with them before it writes its own required keys, so no document is ever finished.
//! So the names are looked up for the object at hand: the document so far gives the path of the
//! innermost open object and the keys it already has, the path gives the subschemas that can
//! apply there (`properties`, `patternProperties`, `additionalProperties`, `items`,
//! `prefixItems`, through local `$ref`s and `allOf`/`anyOf`/`oneOf`/`if`/`then`/`else`/`not`/
//! `dependentSchemas`), and those give the names: their missing `required` keys first, then the
//! keys `dependentRequired`/`dependencies` name, then their other `properties` and the strings
//! inside `propertyNames`. Where the path cannot be resolved (a remote `$ref`, too many
//! branches), the schema-wide list is used. The hints only order the search; the engine decides
//! what is allowed.

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Most subschemas gathered for one path (branches of branches multiply).
const MAX_SCOPE: usize = 256;
/// Most hints offered at one object.
const MAX_HINTS: usize = 256;

/// One step of a document path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    Key(String),
    Index(usize),
}

/// Property-name hints for a schema (see the module docs).
pub(crate) struct KeyHints {
    schema: Option<Value>,
    /// Every name in the schema (required ones first), JSON-escaped with the closing quote.
    global: Arc<[Vec<u8>]>,
    /// The same without the names made from `patternProperties` patterns (the walk's list).
    global_named: Arc<[Vec<u8>]>,
    /// The names per object path, in hint order, before the keys present are taken out
    /// (`None`: the path does not resolve). At most [`MAX_PATHS`] paths; cleared when full.
    by_path: Mutex<HashMap<Vec<Step>, PathNames>>,
}

/// An object path's names in hint order, each with its hint bytes ([`quoted`]) and whether it
/// was made from a pattern; `None` where the path does not resolve.
type PathNames = Option<Arc<[(String, Vec<u8>, bool)]>>;

/// Most object paths whose names are kept.
const MAX_PATHS: usize = 4096;

impl KeyHints {
    /// Hints for `schema` (`None`: free-form JSON, no hints).
    pub(crate) fn new(schema: Option<&Value>) -> KeyHints {
        let (global, named) = schema.map(schema_names).unwrap_or_default();
        KeyHints {
            schema: schema.cloned(),
            global: global.into(),
            global_named: named.into(),
            by_path: Mutex::default(),
        }
    }

    /// The schema-wide list (required names first).
    #[cfg(test)]
    pub(crate) fn global(&self) -> &Arc<[Vec<u8>]> {
        &self.global
    }

    /// The hints for the object whose key `doc` has just opened (`doc` ends inside that
    /// object, after the key's opening quote): scoped to it where its path resolves, else the
    /// schema-wide list.
    pub(crate) fn at(&self, doc: &[u8]) -> Arc<[Vec<u8>]> {
        self.lookup(doc, true)
    }

    /// [`KeyHints::at`] without the names made from `patternProperties` patterns: the walk's
    /// choices. Four names per pattern are good moves for the completion search, but taken
    /// for 80% of a walk's keys they would make nearly every key of a pattern-keyed object
    /// (`^[a-zA-Z_][a-zA-Z0-9_]*$` labels) one of the same four; the walk's own bytes vary.
    pub(crate) fn named_at(&self, doc: &[u8]) -> Arc<[Vec<u8>]> {
        self.lookup(doc, false)
    }

    fn lookup(&self, doc: &[u8], patterns: bool) -> Arc<[Vec<u8>]> {
        let global = if patterns { &self.global } else { &self.global_named };
        let Some(schema) = &self.schema else { return global.clone() };
        let Some((path, present)) = open_object(doc) else { return global.clone() };
        let names = {
            let mut m = self.by_path.lock().unwrap_or_else(|e| e.into_inner());
            if m.len() >= MAX_PATHS {
                m.clear();
            }
            m.entry(path)
                .or_insert_with_key(|p| {
                    scope_names(schema, p).map(|names| {
                        names
                            .into_iter()
                            .map(|(k, pattern)| {
                                let q = quoted(&k);
                                (k, q, pattern)
                            })
                            .collect()
                    })
                })
                .clone()
        };
        let Some(names) = names else { return global.clone() };
        let out: Vec<Vec<u8>> = names
            .iter()
            .filter(|(k, _, pattern)| (patterns || !pattern) && !present.contains(k))
            .take(MAX_HINTS)
            .map(|(_, q, _)| q.clone())
            .collect();
        if out.is_empty() {
            return global.clone();
        }
        out.into()
    }
}

/// The path of the innermost open object of the JSON prefix `doc` and the keys it already has;
/// `None` when `doc` does not end inside an object.
///
/// One scan of the prefix that keeps the keys of open objects as byte spans (a closed object's
/// spans are dropped with it) and decodes only those the answer names: the walk and the
/// completion search ask at every key they open, and decoding every key of the document each
/// time (a `String` per key through `serde_json`) was a third of a run on 4–8 kB documents.
fn open_object(doc: &[u8]) -> Option<(Vec<Step>, Vec<String>)> {
    // Per open container: for an object where its key spans start in `spans` and whether the
    // next string is a key; for an array the index of the current element.
    enum Frame {
        Obj { first: usize, want_key: bool },
        Arr { index: usize },
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < doc.len() {
        match doc[i] {
            b'"' => {
                // A whole string: its end, escapes skipped.
                let start = i;
                i += 1;
                while i < doc.len() && doc[i] != b'"' {
                    i += if doc[i] == b'\\' { 2 } else { 1 };
                }
                if i >= doc.len() {
                    break; // the string still open: the key just opened
                }
                if let Some(Frame::Obj { want_key, .. }) = stack.last_mut() {
                    if *want_key {
                        spans.push((start, i + 1));
                        *want_key = false;
                    }
                }
            }
            b'{' => stack.push(Frame::Obj { first: spans.len(), want_key: true }),
            b'[' => stack.push(Frame::Arr { index: 0 }),
            b'}' | b']' => {
                if let Some(Frame::Obj { first, .. }) = stack.pop() {
                    spans.truncate(first);
                }
            }
            b',' => match stack.last_mut() {
                Some(Frame::Obj { want_key, .. }) => *want_key = true,
                Some(Frame::Arr { index }) => *index += 1,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    let key = |(a, b): (usize, usize)| serde_json::from_slice::<String>(&doc[a..b]).ok();
    let Some(Frame::Obj { first, .. }) = stack.last() else { return None };
    let present = spans[*first..].iter().map(|&sp| key(sp)).collect::<Option<Vec<_>>>()?;
    let mut path = Vec::new();
    for (d, f) in stack[..stack.len() - 1].iter().enumerate() {
        path.push(match f {
            // The object's last key: the one before the next open frame's spans.
            Frame::Obj { first, .. } => {
                let end = stack[d + 1..]
                    .iter()
                    .find_map(|g| match g {
                        Frame::Obj { first, .. } => Some(*first),
                        Frame::Arr { .. } => None,
                    })
                    .unwrap_or(spans.len());
                Step::Key(key(*spans[*first..end].last()?)?)
            }
            Frame::Arr { index } => Step::Index(*index),
        });
    }
    Some((path, present))
}

/// Resolve a local `$ref` (`#`, `#/json/pointer`, `#anchor`) against `root`.
fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let frag = r.strip_prefix('#')?;
    if frag.is_empty() {
        return Some(root);
    }
    if frag.starts_with('/') {
        let decoded = crate::schema::percent_decode(frag);
        return root.pointer(&decoded);
    }
    find_anchor(root, frag, 0)
}

fn find_anchor<'a>(v: &'a Value, name: &str, depth: usize) -> Option<&'a Value> {
    if depth > 64 {
        return None;
    }
    match v {
        Value::Object(m) => {
            if m.get("$anchor").and_then(Value::as_str) == Some(name) {
                return Some(v);
            }
            m.values().find_map(|x| find_anchor(x, name, depth + 1))
        }
        Value::Array(a) => a.iter().find_map(|x| find_anchor(x, name, depth + 1)),
        _ => None,
    }
}

/// `v` and every subschema that applies at the same place: local `$ref` targets and the
/// branches of `allOf`/`anyOf`/`oneOf`/`if`/`then`/`else`/`not`/`dependentSchemas`. `None`
/// past [`MAX_SCOPE`] or on a `$ref` that is not local.
fn expand<'a>(root: &'a Value, v: &'a Value, out: &mut Vec<&'a Value>) -> Option<()> {
    let mut work = vec![v];
    while let Some(s) = work.pop() {
        let Value::Object(m) = s else { continue };
        if out.iter().any(|x| std::ptr::eq(*x, s)) {
            continue;
        }
        if out.len() >= MAX_SCOPE {
            return None;
        }
        out.push(s);
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            work.push(resolve(root, r)?);
        }
        for kw in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(a)) = m.get(kw) {
                work.extend(a.iter());
            }
        }
        for kw in ["if", "then", "else", "not"] {
            if let Some(x) = m.get(kw) {
                work.push(x);
            }
        }
        if let Some(Value::Object(d)) = m.get("dependentSchemas") {
            work.extend(d.values());
        }
        if let Some(Value::Object(d)) = m.get("dependencies") {
            work.extend(d.values().filter(|x| x.is_object()));
        }
    }
    Some(())
}

/// The subschemas at `path` below `root` (see [`expand`]).
fn at_path<'a>(root: &'a Value, path: &[Step]) -> Option<Vec<&'a Value>> {
    let mut here = Vec::new();
    expand(root, root, &mut here)?;
    for step in path {
        let mut next: Vec<&Value> = Vec::new();
        for s in &here {
            let Value::Object(m) = s else { continue };
            match step {
                Step::Key(k) => {
                    let mut named = false;
                    if let Some(x) = m.get("properties").and_then(|p| p.get(k.as_str())) {
                        expand(root, x, &mut next)?;
                        named = true;
                    }
                    if let Some(Value::Object(pp)) = m.get("patternProperties") {
                        for (pat, x) in pp {
                            if super::schema_map::pattern_matches(pat, k) {
                                expand(root, x, &mut next)?;
                                named = true;
                            }
                        }
                    }
                    if !named {
                        if let Some(x @ Value::Object(_)) = m.get("additionalProperties") {
                            expand(root, x, &mut next)?;
                        }
                    }
                }
                Step::Index(i) => {
                    let prefix =
                        m.get("prefixItems").or_else(|| m.get("items").filter(|x| x.is_array()));
                    match prefix.and_then(Value::as_array) {
                        Some(a) if *i < a.len() => expand(root, &a[*i], &mut next)?,
                        Some(_) => {
                            let rest = if m.contains_key("prefixItems") {
                                m.get("items")
                            } else {
                                m.get("additionalItems")
                            };
                            if let Some(x @ Value::Object(_)) = rest {
                                expand(root, x, &mut next)?;
                            }
                        }
                        None => {
                            if let Some(x @ Value::Object(_)) = m.get("items") {
                                expand(root, x, &mut next)?;
                            }
                        }
                    }
                    if let Some(x @ Value::Object(_)) = m.get("contains") {
                        expand(root, x, &mut next)?;
                    }
                }
            }
        }
        if next.is_empty() {
            return None;
        }
        here = next;
    }
    Some(here)
}

/// The names for an object at `path`, in hint order (see the module docs), duplicates
/// removed; `None` when the path does not resolve.
fn scope_names(root: &Value, path: &[Step]) -> Option<Vec<(String, bool)>> {
    let scope = at_path(root, path)?;
    let (mut required, mut dependent, mut other, mut pattern) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for s in &scope {
        let Value::Object(m) = s else { continue };
        node_names(m, &mut |source, k| {
            match source {
                Source::Required => &mut required,
                Source::Dependent => &mut dependent,
                Source::Other => &mut other,
                Source::Pattern => &mut pattern,
            }
            .push(k.to_string())
        });
    }
    let mut seen: HashSet<String> = HashSet::new();
    let named = required.into_iter().chain(dependent).chain(other).map(|k| (k, false));
    Some(
        named
            .chain(pattern.into_iter().map(|k| (k, true)))
            .filter(|(k, _)| seen.insert(k.clone()))
            .collect(),
    )
}

/// Where a property name comes from in a schema node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Its `required`.
    Required,
    /// What its `dependentRequired` (or the array form of `dependencies`) requires: often
    /// named nowhere else (Glaive's `calculate_area` schemas require `rectangle`, `circle`,
    /// `triangle` that way).
    Dependent,
    /// Its `properties`, and the strings spelled inside its `propertyNames` (`const`/`enum` at
    /// any depth: a `not` around them can require such a key to exist).
    Other,
    /// Made from one of its `patternProperties` patterns ([`pattern_samples`]).
    Pattern,
}

/// The property names one schema node spells itself (not its subschemas'), each with where it
/// comes from: what both the scoped and the schema-wide hints are made of.
fn node_names(m: &serde_json::Map<String, Value>, f: &mut impl FnMut(Source, &str)) {
    fn strings(v: &Value) -> impl Iterator<Item = &str> {
        v.as_array().into_iter().flatten().filter_map(Value::as_str)
    }
    /// The strings of every `const` and `enum` below `v`.
    fn literal_strings(v: &Value, f: &mut impl FnMut(Source, &str), depth: usize) {
        if depth > 64 {
            return;
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("const", Value::String(s)) => f(Source::Other, s),
                        ("enum", Value::Array(a)) => {
                            a.iter().filter_map(Value::as_str).for_each(|s| f(Source::Other, s))
                        }
                        _ => literal_strings(x, f, depth + 1),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| literal_strings(x, f, depth + 1)),
            _ => {}
        }
    }
    if let Some(r) = m.get("required") {
        strings(r).for_each(|k| f(Source::Required, k));
    }
    for kw in ["dependentRequired", "dependencies"] {
        if let Some(Value::Object(d)) = m.get(kw) {
            d.values().flat_map(strings).for_each(|k| f(Source::Dependent, k));
        }
    }
    if let Some(Value::Object(p)) = m.get("properties") {
        p.keys().for_each(|k| f(Source::Other, k));
    }
    if let Some(names) = m.get("propertyNames") {
        literal_strings(names, f, 1);
    }
    if let Some(Value::Object(p)) = m.get("patternProperties") {
        for pat in p.keys() {
            pattern_samples(pat, PATTERN_SAMPLES).iter().for_each(|k| f(Source::Pattern, k));
        }
    }
}

/// Names made per `patternProperties` pattern.
const PATTERN_SAMPLES: usize = 4;

/// Up to `n` distinct short strings that match the (ECMA 262) `pattern`, the shortest first:
/// each repetition at its minimum (once where that is 0 and the pattern is otherwise empty),
/// and the `i`-th sample takes the `i`-th member of each class and alternation (`A0`, `B1`,
/// `C2` from `[A-Z]+[0-9]+`). Without them an object whose keys must match a pattern
/// (`Github_hard---o12454`: wells named `[A-Z]+[0-9]+`, `minProperties: 1`, no other keys)
/// has the completion search spell keys byte by byte, and no document finishes. Each sample
/// is checked against the pattern (ECMA semantics); patterns `regex-syntax` cannot read give
/// none.
fn pattern_samples(pattern: &str, n: usize) -> Vec<String> {
    use regex_syntax::hir::{Class, Hir, HirKind};
    fn gen(h: &Hir, i: u32, out: &mut String, budget: &mut usize) -> Option<()> {
        *budget = budget.checked_sub(1)?;
        match h.kind() {
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Literal(l) => out.push_str(std::str::from_utf8(&l.0).ok()?),
            HirKind::Class(Class::Unicode(c)) => {
                // The `i`-th character of the class, printable ones preferred.
                let printable = |ch: char| !ch.is_control() && ch != '"' && ch != '\\';
                let chars = c.ranges().iter().flat_map(|r| r.start()..=r.end());
                let mut pick = chars.clone().filter(|&ch| printable(ch)).nth(i as usize);
                if pick.is_none() {
                    pick = chars.clone().find(|&ch| printable(ch)).or_else(|| chars.clone().next());
                }
                out.push(pick?);
            }
            HirKind::Class(Class::Bytes(c)) => {
                let r = c.ranges().first()?;
                let b = r.start().saturating_add(i as u8).min(r.end());
                out.push(char::from(b.min(0x7f)));
            }
            HirKind::Repetition(r) => {
                let times = r.min.max(u32::from(r.min == 0 && i > 0)).min(64);
                for _ in 0..times {
                    gen(&r.sub, i, out, budget)?;
                }
            }
            HirKind::Capture(c) => gen(&c.sub, i, out, budget)?,
            HirKind::Concat(xs) => {
                for x in xs {
                    gen(x, i, out, budget)?;
                }
            }
            HirKind::Alternation(xs) => gen(&xs[i as usize % xs.len()], i, out, budget)?,
        }
        Some(())
    }
    let Ok(hir) = regex_syntax::ParserBuilder::new().build().parse(pattern) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for i in 0..(2 * n as u32) {
        let mut s = String::new();
        let mut budget = 10_000;
        if gen(&hir, i, &mut s, &mut budget).is_some()
            && s.len() <= 256
            && !out.contains(&s)
            && super::schema_map::pattern_matches(pattern, &s)
        {
            out.push(s);
            if out.len() >= n {
                break;
            }
        }
    }
    out
}

/// A property name as a hint: JSON-escaped, with the closing quote (the opening one is typed).
fn quoted(k: &str) -> Vec<u8> {
    let q = Value::String(k.to_string()).to_string();
    q.as_bytes()[1..].to_vec()
}

/// Every property name of `schema` ([`node_names`] of every node; required and dependent ones
/// first, at most [`MAX_HINTS`]), as hints: the list where a path does not resolve; and the
/// same list without the names made from patterns (the walk's). One walk of the schema makes
/// both.
fn schema_names(schema: &Value) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    /// Required and dependent names; the others, each marked when made from a pattern.
    type Lists = (Vec<String>, Vec<(String, bool)>);
    fn walk(v: &Value, lists: &mut Lists, depth: usize) {
        if depth > 64 {
            return;
        }
        match v {
            Value::Object(m) => {
                node_names(m, &mut |source, k| match source {
                    Source::Required | Source::Dependent => lists.0.push(k.to_string()),
                    Source::Other => lists.1.push((k.to_string(), false)),
                    Source::Pattern => lists.1.push((k.to_string(), true)),
                });
                m.values().for_each(|x| walk(x, lists, depth + 1));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, lists, depth + 1)),
            _ => {}
        }
    }
    let mut lists = (Vec::new(), Vec::new());
    walk(schema, &mut lists, 0);
    let (required, other) = lists;
    let hints = |patterns: bool| -> Vec<Vec<u8>> {
        let mut seen = HashSet::new();
        let other = other.iter().filter(|(_, pattern)| patterns || !pattern).map(|(k, _)| k);
        required
            .iter()
            .chain(other)
            .filter(|k| seen.insert(k.as_str()))
            .take(MAX_HINTS)
            .map(|k| quoted(k))
            .collect()
    };
    (hints(true), hints(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pattern_property_names_are_made_from_their_patterns() {
        assert_eq!(pattern_samples("[A-Z]+[0-9]+", 3), ["A0", "B1", "C2"]);
        assert_eq!(pattern_samples("^x-(foo|bar)$", 4), ["x-foo", "x-bar"]);
        assert_eq!(pattern_samples(r"^\d{2}$", 2), ["00", "11"]);
        assert!(pattern_samples("(?<=a)b", 2).is_empty());
        let h = KeyHints::new(Some(&json!({
            "type": "object",
            "properties": {"wells": {"type": "object", "minProperties": 1,
                "additionalProperties": false,
                "patternProperties": {"[A-Z]+[0-9]+": {"type": "number"}}}}
        })));
        assert_eq!(names(&h.at(br#"{"wells": {""#))[..2], ["A0", "B1"]);
    }

    fn names(h: &[Vec<u8>]) -> Vec<String> {
        h.iter().map(|k| String::from_utf8_lossy(&k[..k.len() - 1]).into_owned()).collect()
    }

    #[test]
    fn the_open_object_and_its_keys_are_read_from_the_prefix() {
        let (path, present) = open_object(br#"{"a": [1, {"x": "}", "y": {"#).expect("open");
        assert_eq!(path, vec![Step::Key("a".into()), Step::Index(1), Step::Key("y".into())]);
        assert!(present.is_empty());
        let (path, present) = open_object(br#"{"a": 1, "b\"c": {"k": [], ""#).expect("open");
        assert_eq!(path, vec![Step::Key("b\"c".into())]);
        assert_eq!(present, vec!["k".to_string()]);
        assert!(open_object(br#"{"a": ["#).is_none());
        // Keys of closed objects are not the open ones' (their spans are dropped).
        let doc = br#"{"a": {"p": 1, "q": {"z": 2}}, "b": [{"c": 1}, {"d": {"e": 0}, "f": 1, ""#;
        let (path, present) = open_object(doc).expect("open");
        assert_eq!(path, vec![Step::Key("b".into()), Step::Index(1)]);
        assert_eq!(present, vec!["d".to_string(), "f".to_string()]);
        let (path, present) = open_object(br#"{"a": {"k": 1}, "b": 2, "c": {"x": {}, ""#).unwrap();
        assert_eq!(path, vec![Step::Key("c".into())]);
        assert_eq!(present, vec!["x".to_string()]);
        let (path, present) = open_object(br#"{"a": {"k": 1}, "b": 2, ""#).unwrap();
        assert!(path.is_empty());
        assert_eq!(present, vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn hints_are_the_missing_names_of_the_object_at_hand() {
        let schema = json!({
            "type": "object",
            "required": ["top"],
            "properties": {
                "top": {"type": "string"},
                "inner": {"$ref": "#/$defs/inner"},
                "list": {"type": "array", "items": {"required": ["id"], "properties": {"id": {}, "note": {}}}}
            },
            "$defs": {"inner": {"allOf": [{"required": ["b"]}, {"properties": {"a": {}, "b": {}}}],
                                "dependentRequired": {"a": ["c"]}}}
        });
        let h = KeyHints::new(Some(&schema));
        assert_eq!(names(&h.at(br#"{""#)), ["top", "inner", "list"]);
        assert_eq!(names(&h.at(br#"{"top": "x", ""#)), ["inner", "list"]);
        assert_eq!(names(&h.at(br#"{"inner": {""#)), ["b", "c", "a"]);
        assert_eq!(names(&h.at(br#"{"inner": {"b": 1, ""#)), ["c", "a"]);
        assert_eq!(names(&h.at(br#"{"list": [{}, {""#)), ["id", "note"]);
        // A path the schema does not describe: the schema-wide list.
        assert_eq!(h.at(br#"{"zzz": {""#).len(), h.global().len());
    }
}
