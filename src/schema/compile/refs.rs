//! Reference resolution: which subschema a `$ref`, `$dynamicRef` or `$recursiveRef` names.
//!
//! [`Refs`] scans the document (and the pre-loaded documents of
//! [`SchemaOptions::documents`](crate::schema::SchemaOptions::documents)) once for `$id`s (or
//! draft-04 `id`s), `$anchor`s, `$dynamicAnchor`s and `$recursiveAnchor`s, and answers
//! "where does this reference lead" as a JSON pointer (`/…` into the schema, `URI#/…` into a
//! pre-loaded document). It knows nothing of compilation, so it is tested on its own; the
//! compiler memoises subschemas by (dynamic scope, pointer).

use crate::schema::error::{SchemaError, SchemaErrorKind};
use crate::schema::percent_decode;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use std::collections::BTreeMap;

/// Which keyword names a schema resource, by the document's `$schema`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdKeyword {
    /// Draft-06 and later (any `$schema` other than draft-04 or earlier): `$id`; a plain `id`
    /// is an annotation.
    Dollar,
    /// Draft-04 and earlier: `id`; `$id` is an unknown keyword.
    Plain,
    /// No `$schema`: `$id`, else a plain `id` that sits in a schema-looking object.
    Either,
}

impl IdKeyword {
    fn of(doc: &Value) -> IdKeyword {
        match doc.get("$schema").and_then(Value::as_str) {
            None => IdKeyword::Either,
            Some(s)
                if ["draft-04", "draft-03", "draft-02", "draft-01"]
                    .iter()
                    .any(|d| s.contains(d)) =>
            {
                IdKeyword::Plain
            }
            Some(_) => IdKeyword::Dollar,
        }
    }
}

/// Index of a dynamic scope (0: no bindings).
pub(super) type ScopeId = u32;

/// `$dynamicRef` / `$dynamicAnchor` (2020-12 Core §8.2.3.2, §7.1 "dynamic scope").
///
/// A `$dynamicRef` depends on the dynamic scope only through which schema resource in it is
/// the outermost to declare `$dynamicAnchor` with the referenced name. A scope is therefore a
/// set of *bindings* name → pointer of that outermost anchor, kept only for names some
/// `$dynamicRef` uses. Subschemas are compiled per (scope, pointer); entering a subschema adds
/// the bindings its resource declares for names not yet bound. Bindings only grow along a
/// path, so memoisation terminates; the number of copies is bounded by
/// [`SchemaLimits::max_nodes`] like every other node. 2019-09's `$recursiveAnchor: true` is
/// a dynamic anchor named `""` and `$recursiveRef` a dynamic reference to it.
#[derive(Default)]
pub(super) struct DynScopes {
    /// Anchor keys (`base#name`) declared by `$dynamicAnchor`.
    keys: FxHashSet<String>,
    /// Per resource (base URI): its `$dynamicAnchor`s as (name, pointer).
    by_resource: FxHashMap<String, Vec<(String, String)>>,
    /// Anchor names in the fragments of `$dynamicRef`s.
    names: FxHashSet<String>,
    /// Interned scopes (id − 1): bindings sorted by name.
    scopes: Vec<Vec<(String, String)>>,
    ids: FxHashMap<Vec<(String, String)>, ScopeId>,
    /// The scope of the subschema being compiled.
    pub(super) cur: ScopeId,
}

impl DynScopes {
    fn bindings(&self, s: ScopeId) -> &[(String, String)] {
        match s {
            0 => &[],
            _ => &self.scopes[s as usize - 1],
        }
    }

    fn intern(&mut self, b: Vec<(String, String)>) -> ScopeId {
        if let Some(&s) = self.ids.get(&b) {
            return s;
        }
        self.scopes.push(b.clone());
        let s = self.scopes.len() as ScopeId;
        self.ids.insert(b, s);
        s
    }
}

/// A JSON pointer token for key `s` (RFC 6901 §3: `~` → `~0`, `/` → `~1`).
pub(super) fn esc_ptr(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn join_uri(base: &str, r: &str) -> String {
    if r.contains("://") || base.is_empty() {
        return r.to_string();
    }
    if r.starts_with('/') {
        if let Some(i) = base.find("://") {
            if let Some(j) = base[i + 3..].find('/') {
                return format!("{}{}", &base[..i + 3 + j], r);
            }
        }
        return r.to_string();
    }
    match base.rfind('/') {
        Some(i) => format!("{}{}", &base[..=i], r),
        None => r.to_string(),
    }
}

/// The identifiers and anchors of the schema and its pre-loaded documents, and the dynamic
/// scope of the subschema being compiled.
pub(super) struct Refs<'a> {
    doc: &'a Value,
    documents: &'a BTreeMap<String, Value>,
    /// Resource pointer by absolute URI (`$id`s, and the pre-loaded documents' URIs).
    ids: FxHashMap<String, String>,
    /// Base URI of each schema resource, by the pointer of its root (`""` for the document,
    /// `URI#` for a pre-loaded one).
    res_base: FxHashMap<String, String>,
    /// Subschema pointer by `base#name` (`$anchor`, `$dynamicAnchor`, `$id` fragments).
    anchors: FxHashMap<String, String>,
    /// `$dynamicRef` state (see [`DynScopes`]).
    pub(super) dyn_scopes: DynScopes,
}

impl<'a> Refs<'a> {
    /// Scan `doc` and the pre-loaded `documents` (keyed by absolute URI).
    ///
    /// # Errors
    /// A document URI that is not absolute.
    pub(super) fn new(
        doc: &'a Value,
        documents: &'a BTreeMap<String, Value>,
    ) -> Result<Refs<'a>, SchemaError> {
        let mut r = Refs {
            doc,
            documents,
            ids: FxHashMap::default(),
            res_base: FxHashMap::default(),
            anchors: FxHashMap::default(),
            dyn_scopes: DynScopes::default(),
        };
        r.scan_ids(doc, "", "", IdKeyword::of(doc), false);
        // Pre-loaded documents: pointers into them are `URI#/json/pointer` (those into the
        // schema itself are empty or start with `/`).
        for (uri, d) in documents {
            let u = uri.split_once('#').map_or(uri.as_str(), |x| x.0);
            if u.is_empty() || u.starts_with('/') {
                return Err(SchemaError::invalid(
                    "",
                    format!("document URI {uri:?} is not absolute"),
                ));
            }
            let root = format!("{u}#");
            r.ids.entry(u.to_string()).or_insert_with(|| root.clone());
            r.scan_ids(d, &root, u, IdKeyword::of(d), false);
        }
        Ok(r)
    }

    /// Record `$id`s, `$anchor`s and `$dynamicAnchor`s with the pointers of their subschemas,
    /// and the anchor names `$dynamicRef`s use. `kw` says which identifier keyword the
    /// document's draft has.
    /// `names` says `v` maps names to subschemas (`$defs`, `properties`, …): its keys are not
    /// keywords, so a definition called `default` or `$id` is still scanned.
    fn scan_ids(&mut self, v: &Value, ptr: &str, base: &str, kw: IdKeyword, names: bool) {
        match v {
            Value::Object(m) if names => {
                for (k, x) in m {
                    self.scan_ids(x, &format!("{ptr}/{}", esc_ptr(k)), base, kw, false);
                }
            }
            Value::Object(m) => {
                let mut base = base.to_string();
                // A plain `id` is taken only where it is a string in something that looks like
                // a schema: `id` is also a common property name and annotation.
                let plain_id = || {
                    m.get("id").filter(|i| {
                        i.is_string()
                            && (m.contains_key("type")
                                || m.contains_key("properties")
                                || m.contains_key("$schema")
                                || ptr.is_empty()
                                || ptr.ends_with('#'))
                    })
                };
                let idv = match kw {
                    IdKeyword::Dollar => m.get("$id"),
                    IdKeyword::Plain => plain_id(),
                    IdKeyword::Either => m.get("$id").or_else(plain_id),
                };
                // A document's root (`""`, or `URI#` for a pre-loaded one) is a resource.
                let mut root = ptr.is_empty()
                    || (!ptr.starts_with('/') && ptr.find('#') == Some(ptr.len() - 1));
                if let Some(id) = idv.and_then(Value::as_str) {
                    let (u, frag) = id.split_once('#').unwrap_or((id, ""));
                    if !u.is_empty() {
                        base = join_uri(&base, u);
                        self.ids.insert(base.clone(), ptr.to_string());
                        root = true;
                    }
                    if !frag.is_empty() && !frag.starts_with('/') {
                        self.anchors.insert(format!("{base}#{frag}"), ptr.to_string());
                    }
                }
                if root {
                    self.res_base.insert(ptr.to_string(), base.clone());
                }
                if let Some(a) = m.get("$anchor").and_then(Value::as_str) {
                    self.anchors.insert(format!("{base}#{a}"), ptr.to_string());
                }
                if let Some(a) = m.get("$dynamicAnchor").and_then(Value::as_str) {
                    // Also a plain anchor for `$ref` (2020-12 Core §8.2.2).
                    let key = format!("{base}#{a}");
                    self.anchors.insert(key.clone(), ptr.to_string());
                    self.dyn_scopes.keys.insert(key);
                    let res = self.resource_of(ptr).to_string();
                    self.dyn_scopes
                        .by_resource
                        .entry(res)
                        .or_default()
                        .push((a.to_string(), ptr.to_string()));
                }
                if m.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                    // 2019-09: an anchor with the reserved name `""` (no `$dynamicAnchor`
                    // name is empty), which `$recursiveRef` uses.
                    let res = self.resource_of(ptr).to_string();
                    self.dyn_scopes
                        .by_resource
                        .entry(res)
                        .or_default()
                        .push((String::new(), ptr.to_string()));
                }
                if m.contains_key("$recursiveRef") {
                    self.dyn_scopes.names.insert(String::new());
                }
                if let Some(r) = m.get("$dynamicRef").and_then(Value::as_str) {
                    if let Some((_, frag)) = r.split_once('#') {
                        if !frag.is_empty() && !frag.starts_with('/') {
                            self.dyn_scopes.names.insert(percent_decode(frag));
                        }
                    }
                }
                for (k, x) in m {
                    if matches!(k.as_str(), "enum" | "const" | "examples" | "default") {
                        continue;
                    }
                    let names = matches!(
                        k.as_str(),
                        "$defs"
                            | "definitions"
                            | "properties"
                            | "patternProperties"
                            | "dependentSchemas"
                            | "dependencies"
                    );
                    self.scan_ids(x, &format!("{ptr}/{}", esc_ptr(k)), &base, kw, names);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    self.scan_ids(x, &format!("{ptr}/{i}"), base, kw, false);
                }
            }
            _ => {}
        }
    }

    /// The pointer of the root of the innermost schema resource containing `ptr`.
    fn resource_of<'p>(&self, ptr: &'p str) -> &'p str {
        // Pointers into a pre-loaded document are `URI#/…`: never cut into the URI.
        let floor = if ptr.starts_with('/') { 0 } else { ptr.find('#').unwrap_or(0) };
        let mut p = ptr;
        loop {
            if self.res_base.contains_key(p) {
                return p;
            }
            match p.rfind('/') {
                Some(i) if i > floor || (floor == 0 && i == 0) => p = &p[..i],
                _ => return "",
            }
        }
    }

    /// The base URI of the innermost resource containing `ptr`.
    fn base_of(&self, ptr: &str) -> String {
        self.res_base.get(self.resource_of(ptr)).cloned().unwrap_or_default()
    }

    pub(super) fn lookup(&self, ptr: &str) -> Option<&'a Value> {
        let (mut cur, ptr) = if ptr.is_empty() || ptr.starts_with('/') {
            (self.doc, ptr)
        } else {
            let (u, local) = ptr.split_once('#')?;
            (self.documents.get(u)?, local)
        };
        if ptr.is_empty() {
            return Some(cur);
        }
        for tok in ptr.split('/').skip(1) {
            let t = tok.replace("~1", "/").replace("~0", "~");
            cur = match cur {
                Value::Object(m) => m.get(&t)?,
                Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    pub(super) fn resolve_ref(&self, r: &str, ptr: &str) -> Result<String, SchemaError> {
        let base = self.base_of(ptr);
        let (u, frag) = r.split_once('#').unwrap_or((r, ""));
        let frag = percent_decode(frag);
        let res_ptr = if u.is_empty() {
            match self.ids.get(&base) {
                Some(p) => p.clone(),
                None => String::new(),
            }
        } else {
            let full = join_uri(&base, u);
            match self.ids.get(&full).or_else(|| self.ids.get(u)) {
                Some(p) => p.clone(),
                None => {
                    return Err(SchemaError::unsupported("$ref", ptr));
                }
            }
        };
        let target = if frag.is_empty() {
            res_ptr.clone()
        } else if frag.starts_with('/') {
            format!("{res_ptr}{frag}")
        } else {
            let key_base = if u.is_empty() { base.clone() } else { join_uri(&base, u) };
            match self.anchors.get(&format!("{key_base}#{frag}")) {
                Some(p) => p.clone(),
                None => {
                    return Err(SchemaError::new(SchemaErrorKind::DanglingRef {
                        reference: r.into(),
                        pointer: ptr.into(),
                    }))
                }
            }
        };
        if self.lookup(&target).is_none() {
            // A resource named by a plain `id` (no `$id`): `id` is a keyword only up to
            // draft-07, and documents without `$schema` mix both readings. A JSON-pointer
            // fragment that does not exist in that resource is read from the document's root,
            // as a 2019-09+ validator (to which `id` is an annotation) reads it: hyper-schema
            // generators write `"id": "schemata/app"` beside `"$ref":
            // "#/definitions/app/definitions/name"`.
            if u.is_empty() && frag.starts_with('/') && !res_ptr.is_empty() {
                let doc_root = match res_ptr.find('#') {
                    Some(i) if !res_ptr.starts_with('/') => &res_ptr[..=i],
                    _ => "",
                };
                let plain_id = self
                    .lookup(&res_ptr)
                    .is_some_and(|v| v.get("$id").is_none() && v.get("id").is_some());
                let at_root = format!("{doc_root}{frag}");
                if plain_id && doc_root != res_ptr && self.lookup(&at_root).is_some() {
                    return Ok(at_root);
                }
            }
            return Err(SchemaError::new(SchemaErrorKind::DanglingRef {
                reference: r.into(),
                pointer: ptr.into(),
            }));
        }
        Ok(target)
    }

    /// The dynamic scope inside the subschema at `ptr`, entered from the current one: the
    /// `$dynamicAnchor`s of its resource bind the names that are not bound yet.
    pub(super) fn enter(&mut self, ptr: &str) -> ScopeId {
        let cur = self.dyn_scopes.cur;
        if self.dyn_scopes.names.is_empty() {
            return cur;
        }
        let Some(decl) = self.dyn_scopes.by_resource.get(self.resource_of(ptr)) else {
            return cur;
        };
        let mut b = self.dyn_scopes.bindings(cur).to_vec();
        let n = b.len();
        for (name, p) in decl {
            if self.dyn_scopes.names.contains(name) && !b.iter().any(|(m, _)| m == name) {
                b.push((name.clone(), p.clone()));
            }
        }
        if b.len() == n {
            return cur;
        }
        b.sort();
        self.dyn_scopes.intern(b)
    }

    /// Where `$dynamicRef: r` at `ptr` leads in the current dynamic scope: resolved like
    /// `$ref`, and when that target is a `$dynamicAnchor` of the fragment's name, the
    /// outermost anchor of that name in the dynamic scope instead.
    pub(super) fn resolve_dynamic(&self, r: &str, ptr: &str) -> Result<String, SchemaError> {
        let target = self.resolve_ref(r, ptr)?;
        let (u, frag) = r.split_once('#').unwrap_or((r, ""));
        let frag = percent_decode(frag);
        if frag.is_empty() || frag.starts_with('/') {
            return Ok(target);
        }
        let base = self.base_of(ptr);
        let key_base = if u.is_empty() { base } else { join_uri(&base, u) };
        if !self.dyn_scopes.keys.contains(&format!("{key_base}#{frag}")) {
            return Ok(target);
        }
        let bound = self.dyn_scopes.bindings(self.dyn_scopes.cur).iter().find(|(n, _)| *n == frag);
        Ok(bound.map_or(target, |(_, p)| p.clone()))
    }

    /// Where `$recursiveRef: r` at `ptr` leads (2019-09 Core §8.2.4.2): resolved like `$ref`,
    /// and when that target has `$recursiveAnchor: true`, the outermost resource in the
    /// dynamic scope with `$recursiveAnchor: true` instead (the binding of the name `""`).
    pub(super) fn resolve_recursive(&self, r: &str, ptr: &str) -> Result<String, SchemaError> {
        let target = self.resolve_ref(r, ptr)?;
        let anchored = self
            .lookup(&target)
            .is_some_and(|v| v.get("$recursiveAnchor") == Some(&Value::Bool(true)));
        if !anchored {
            return Ok(target);
        }
        let bound =
            self.dyn_scopes.bindings(self.dyn_scopes.cur).iter().find(|(n, _)| n.is_empty());
        Ok(bound.map_or(target, |(_, p)| p.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refs(doc: &Value) -> Refs<'_> {
        static EMPTY: std::sync::OnceLock<BTreeMap<String, Value>> = std::sync::OnceLock::new();
        Refs::new(doc, EMPTY.get_or_init(BTreeMap::new)).unwrap()
    }

    #[test]
    fn uris_join_like_rfc_3986() {
        assert_eq!(join_uri("http://a/b/c.json", "d.json"), "http://a/b/d.json");
        assert_eq!(join_uri("http://a/b/c.json", "/x.json"), "http://a/x.json");
        assert_eq!(join_uri("http://a/b/c.json", "urn:x://y"), "urn:x://y");
        assert_eq!(join_uri("", "d.json"), "d.json");
        assert_eq!(percent_decode("a%25b%2Fc%zz"), "a%b/c%zz");
        // A `%` before a multi-byte character is kept, not sliced through (was a panic).
        assert_eq!(percent_decode("/%aé%é"), "/%aé%é");
        assert_eq!(esc_ptr("a/b~c"), "a~1b~0c");
    }

    #[test]
    fn ids_and_anchors_name_subschemas() {
        let doc = json!({
            "$id": "http://ex.com/root.json",
            "$defs": {
                "a": {"$id": "a.json", "type": "string"},
                "b": {"$anchor": "bee", "type": "null"},
                "c/d": {"type": "number"}
            }
        });
        let r = refs(&doc);
        assert_eq!(r.resolve_ref("a.json", "").unwrap(), "/$defs/a");
        assert_eq!(r.resolve_ref("http://ex.com/a.json", "").unwrap(), "/$defs/a");
        assert_eq!(r.resolve_ref("#bee", "").unwrap(), "/$defs/b");
        // A fragment pointer is relative to the resource of the reference's base.
        assert_eq!(r.resolve_ref("#/$defs/c~1d", "").unwrap(), "/$defs/c~1d");
        assert_eq!(r.lookup("/$defs/c~1d"), Some(&json!({"type": "number"})));
        // Inside `a.json` the empty reference is `a.json` itself.
        assert_eq!(r.resolve_ref("#", "/$defs/a").unwrap(), "/$defs/a");
    }

    #[test]
    fn unresolvable_references_are_typed_errors() {
        let doc = json!({"$defs": {"a": true}});
        let r = refs(&doc);
        let dangling = r.resolve_ref("#/$defs/nope", "/x").unwrap_err();
        assert!(
            matches!(dangling.kind(), SchemaErrorKind::DanglingRef { pointer, .. } if pointer == "/x")
        );
        let anchor = r.resolve_ref("#nope", "").unwrap_err();
        assert!(matches!(anchor.kind(), SchemaErrorKind::DanglingRef { .. }));
        // A `%` before a multi-byte character: a dangling reference, not a panic.
        let odd = r.resolve_ref("#/%aé", "").unwrap_err();
        assert!(matches!(odd.kind(), SchemaErrorKind::DanglingRef { .. }));
        // Nothing is ever fetched.
        let remote = r.resolve_ref("http://elsewhere.com/s.json", "").unwrap_err();
        assert!(matches!(remote.kind(), SchemaErrorKind::Unsupported { .. }));
    }

    /// A pointer that misses inside a resource a plain `id` names is read from the document
    /// root; one inside a `$id` resource stays dangling.
    #[test]
    fn pointers_missing_under_a_plain_id_are_read_from_the_root() {
        let doc = json!({"definitions": {
            "app": {"id": "schemata/app", "type": "object",
                    "definitions": {"name": {"type": "string"}}},
            "b": {"$id": "b.json", "type": "object"}
        }});
        let r = refs(&doc);
        assert_eq!(
            r.resolve_ref("#/definitions/app/definitions/name", "/definitions/app").unwrap(),
            "/definitions/app/definitions/name"
        );
        // Inside the resource itself the pointer still means the resource's own.
        assert_eq!(
            r.resolve_ref("#/definitions/name", "/definitions/app").unwrap(),
            "/definitions/app/definitions/name"
        );
        let err = r.resolve_ref("#/definitions/app", "/definitions/b").unwrap_err();
        assert!(matches!(err.kind(), SchemaErrorKind::DanglingRef { .. }));
    }

    #[test]
    fn draft_04_uses_plain_id() {
        let doc = json!({
            "$schema": "http://json-schema.org/draft-04/schema#",
            "id": "http://ex.com/root.json",
            "definitions": {"a": {"id": "#foo", "type": "string"}, "b": {"$id": "bar.json"}}
        });
        let r = refs(&doc);
        assert_eq!(r.resolve_ref("#foo", "").unwrap(), "/definitions/a");
        // `$id` is not an identifier in draft-04.
        assert!(r.resolve_ref("bar.json", "").is_err());
    }

    #[test]
    fn preloaded_documents_resolve_by_uri_and_need_absolute_uris() {
        let doc = json!({"$ref": "http://ex.com/defs.json#/$defs/n"});
        let mut docs = BTreeMap::new();
        docs.insert(
            "http://ex.com/defs.json".to_string(),
            json!({"$defs": {"n": {"type": "number"}}}),
        );
        let r = Refs::new(&doc, &docs).unwrap();
        let t = r.resolve_ref("http://ex.com/defs.json#/$defs/n", "").unwrap();
        assert_eq!(t, "http://ex.com/defs.json#/$defs/n");
        assert_eq!(r.lookup(&t), Some(&json!({"type": "number"})));
        let mut bad = BTreeMap::new();
        bad.insert("/defs.json".to_string(), json!({}));
        assert!(Refs::new(&doc, &bad).is_err());
    }

    #[test]
    fn dynamic_refs_follow_the_outermost_anchor_in_scope() {
        let doc = json!({
            "$id": "http://ex.com/root",
            "$dynamicAnchor": "items",
            "$defs": {
                "list": {"$id": "list", "$dynamicAnchor": "items", "$dynamicRef": "#items"}
            }
        });
        let mut r = refs(&doc);
        // Entered from the root, the root's anchor is the outermost one.
        r.dyn_scopes.cur = r.enter("");
        r.dyn_scopes.cur = r.enter("/$defs/list");
        assert_eq!(r.resolve_dynamic("#items", "/$defs/list").unwrap(), "");
        // Entered on its own, `list` binds its own anchor.
        r.dyn_scopes.cur = 0;
        r.dyn_scopes.cur = r.enter("/$defs/list");
        assert_eq!(r.resolve_dynamic("#items", "/$defs/list").unwrap(), "/$defs/list");
        // A plain `$ref` to the same anchor is static.
        r.dyn_scopes.cur = r.enter("");
        assert_eq!(r.resolve_ref("#items", "/$defs/list").unwrap(), "/$defs/list");
    }

    #[test]
    fn recursive_refs_follow_recursive_anchors() {
        let doc = json!({
            "$id": "http://ex.com/tree",
            "$recursiveAnchor": true,
            "$defs": {"node": {"$id": "node", "$recursiveAnchor": true, "$recursiveRef": "#"}}
        });
        let mut r = refs(&doc);
        r.dyn_scopes.cur = r.enter("");
        r.dyn_scopes.cur = r.enter("/$defs/node");
        assert_eq!(r.resolve_recursive("#", "/$defs/node").unwrap(), "");
        r.dyn_scopes.cur = 0;
        r.dyn_scopes.cur = r.enter("/$defs/node");
        assert_eq!(r.resolve_recursive("#", "/$defs/node").unwrap(), "/$defs/node");
    }
}
