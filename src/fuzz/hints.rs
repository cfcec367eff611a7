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

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Most subschemas gathered for one path (branches of branches multiply).
const MAX_SCOPE: usize = 256;
/// Most hints offered at one object.
const MAX_HINTS: usize = 256;

/// One step of a document path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    Key(Arc<str>),
    Index(usize),
}

/// Property-name hints for a schema (see the module docs).
pub(crate) struct KeyHints {
    schema: Option<Value>,
    /// Every name in the schema (required ones first), JSON-escaped with the closing quote.
    global: Arc<[Hint]>,
    /// The same without the names made from `patternProperties` patterns (the walk's list).
    global_named: Arc<[Hint]>,
    /// The names per object path, in hint order, before the keys present are taken out
    /// (`None`: the path does not resolve). At most [`MAX_PATHS`] paths; cleared when full.
    by_path: Mutex<FxHashMap<Vec<Step>, PathNames>>,
    /// The last prefixes asked about, scanned, and the answers given there (see
    /// [`ScanCache`]): one per thread running a walk (a run makes costly walks two at a time,
    /// see `Fuzzer::run`), each call taking its thread's own (a thread's first call: the one
    /// whose prefix shares most with its document), so that two walks neither rescan each
    /// other's documents from the start nor wait for each other's answers (one shared map of
    /// answers, locked while an answer was built, cost a two-walk run more than the second
    /// thread gave).
    scans: Mutex<Vec<(std::thread::ThreadId, ScanCache)>>,
}

/// What an answer of [`KeyHints`] depends on: whether pattern names count, the object's
/// path, the keys written in it (how many, and their set hash: a key of 175 names was hashed
/// and copied at every lookup).
type AnswerKey = (bool, Vec<Step>, usize, u64);

/// Most answers [`KeyHints`] keeps. (One answered list per key during a fitted
/// `Github_ultra` run was 17–20% of its time, in allocations.)
const MAX_ANSWERS: usize = 1024;

/// One hint: a move of several bytes (a property name with its closing quote), shared, so
/// that an answer's list is a list of reference counts rather than of copies.
pub(crate) type Hint = Arc<[u8]>;

/// An object path's names in hint order, each with its hint bytes ([`quoted`]) and whether it
/// was made from a pattern; `None` where the path does not resolve.
type PathNames = Option<Arc<[(String, Hint, bool)]>>;

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
            scans: Mutex::default(),
        }
    }

    /// The schema-wide list (required names first).
    #[cfg(test)]
    pub(crate) fn global(&self) -> &Arc<[Hint]> {
        &self.global
    }

    /// The hints for the object whose key `doc` has just opened (`doc` ends inside that
    /// object, after the key's opening quote): scoped to it where its path resolves, else the
    /// schema-wide list.
    pub(crate) fn at(&self, doc: &[u8]) -> Arc<[Hint]> {
        self.lookup(doc, true)
    }

    /// [`KeyHints::at`] without the names made from `patternProperties` patterns: the walk's
    /// choices. Four names per pattern are good moves for the completion search, but taken
    /// for 80% of a walk's keys they would make nearly every key of a pattern-keyed object
    /// (`^[a-zA-Z_][a-zA-Z0-9_]*$` labels) one of the same four; the walk's own bytes vary.
    pub(crate) fn named_at(&self, doc: &[u8]) -> Arc<[Hint]> {
        self.lookup(doc, false)
    }

    fn lookup(&self, doc: &[u8], patterns: bool) -> Arc<[Hint]> {
        let global = if patterns { &self.global } else { &self.global_named };
        let Some(schema) = &self.schema else { return global.clone() };
        let me = std::thread::current().id();
        let mut cache = {
            let mut scans = self.scans.lock().unwrap_or_else(|e| e.into_inner());
            // This thread's own cache, else (a thread's first call) the one whose prefix
            // shares most with `doc`.
            let best = scans
                .iter()
                .position(|(t, _)| *t == me)
                .or_else(|| (0..scans.len()).max_by_key(|&i| common_prefix(&scans[i].1.doc, doc)));
            best.map(|i| scans.swap_remove(i).1).unwrap_or_default()
        };
        let scan = cache.scan_to(doc);
        let out = match scan.open_key() {
            None => global.clone(),
            Some((path, n, keys)) => {
                let key = (patterns, path, n, keys);
                match cache.answers.get(&key) {
                    Some(out) => out.clone(),
                    None => {
                        let scan = &cache.last;
                        let derived = scan.last_key().and_then(|k| cache.one_more(&key, k));
                        let (out, whole) = match derived {
                            Some(out) => (out, true),
                            None => {
                                let present = scan.present();
                                self.answer(schema, global, key.1.clone(), &present, patterns)
                            }
                        };
                        if cache.answers.len() >= MAX_ANSWERS {
                            cache.answers.clear();
                        }
                        cache.answers.insert(key.clone(), out.clone());
                        cache.last_whole = whole.then(|| (key, out.clone()));
                        out
                    }
                }
            }
        };
        self.scans.lock().unwrap_or_else(|e| e.into_inner()).push((me, cache));
        out
    }

    /// The hints at the object of `path` whose keys `present` are written, and whether they
    /// are every such name of the object (not the schema-wide list, not cut at
    /// [`MAX_HINTS`]), so that one key more can be answered by taking one out
    /// ([`ScanCache::one_more`]).
    fn answer(
        &self,
        schema: &Value,
        global: &Arc<[Hint]>,
        path: Vec<Step>,
        present: &[Arc<str>],
        patterns: bool,
    ) -> (Arc<[Hint]>, bool) {
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
        let Some(names) = names else { return (global.clone(), false) };
        // The keys written as a set where there are many (an object of hundreds of
        // properties half written: a scan of them per name was most of an answer).
        let many: Option<FxHashSet<&str>> =
            (present.len() > 8).then(|| present.iter().map(|p| &**p).collect());
        let written = |k: &str| match &many {
            Some(set) => set.contains(k),
            None => present.iter().any(|p| **p == *k),
        };
        let out: Vec<Hint> = names
            .iter()
            .filter(|(k, _, pattern)| (patterns || !pattern) && !written(k))
            .take(MAX_HINTS)
            .map(|(_, q, _)| q.clone())
            .collect();
        if out.is_empty() {
            return (global.clone(), false);
        }
        let whole = out.len() < MAX_HINTS;
        (out.into(), whole)
    }
}

/// Per open container of a scanned prefix: for an object where its keys start in
/// [`Scan::keys`] and whether the next string is a key; for an array the index of the current
/// element.
#[derive(Clone, Debug)]
enum Frame {
    /// `keys`: the object's keys as a set, each [`key_hash`] added (what an answer depends
    /// on, without reading the keys again); `unread`: a key `serde_json` could not decode.
    Obj {
        first: usize,
        want_key: bool,
        keys: u64,
        unread: bool,
    },
    Arr {
        index: usize,
    },
}

/// One key's share of [`Frame::Obj`]'s set hash (a sum, so the keys' order does not count).
fn key_hash(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    key.hash(&mut h);
    // splitmix64's finaliser: sums of raw Fx hashes of similar names collide too easily.
    let mut z = h.finish().wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Where a scan of a JSON prefix stands: the bytes before `pos` summarised as the open
/// containers and the keys of the open objects (decoded; `None` for a key `serde_json` cannot
/// read). `pos` is never inside a string: a scan that meets an unterminated string stops at
/// its opening quote.
#[derive(Clone, Debug, Default)]
struct Scan {
    pos: usize,
    stack: Vec<Frame>,
    keys: Vec<Option<Arc<str>>>,
}

/// Bytes between the scan checkpoints kept for a prefix that shrinks (the completion search
/// takes bytes back).
const CHECKPOINT_BYTES: usize = 512;

impl Scan {
    /// Scan on from `self.pos` to the end of `doc` (or to the quote of an unterminated
    /// string), handing the state to `checkpoint` at the first position from
    /// `next_checkpoint` on, then every [`CHECKPOINT_BYTES`].
    fn run(&mut self, doc: &[u8], mut next_checkpoint: usize, mut checkpoint: impl FnMut(&Scan)) {
        let mut i = self.pos;
        while i < doc.len() {
            if i >= next_checkpoint {
                self.pos = i;
                checkpoint(self);
                next_checkpoint = i + CHECKPOINT_BYTES;
            }
            match doc[i] {
                b'"' => {
                    // A whole string: its end, escapes skipped.
                    let start = i;
                    i += 1;
                    while i < doc.len() && doc[i] != b'"' {
                        i += if doc[i] == b'\\' { 2 } else { 1 };
                    }
                    if i >= doc.len() {
                        // The string still open: the key just opened.
                        self.pos = start;
                        return;
                    }
                    if let Some(Frame::Obj { want_key, keys, unread, .. }) = self.stack.last_mut() {
                        if *want_key {
                            let key = serde_json::from_slice::<String>(&doc[start..=i]).ok();
                            match &key {
                                Some(k) => *keys = keys.wrapping_add(key_hash(k)),
                                None => *unread = true,
                            }
                            self.keys.push(key.map(Arc::from));
                            *want_key = false;
                        }
                    }
                }
                b'{' => self.stack.push(Frame::Obj {
                    first: self.keys.len(),
                    want_key: true,
                    keys: 0,
                    unread: false,
                }),
                b'[' => self.stack.push(Frame::Arr { index: 0 }),
                b'}' | b']' => {
                    if let Some(Frame::Obj { first, .. }) = self.stack.pop() {
                        self.keys.truncate(first);
                    }
                }
                b',' => match self.stack.last_mut() {
                    Some(Frame::Obj { want_key, .. }) => *want_key = true,
                    Some(Frame::Arr { index }) => *index += 1,
                    None => {}
                },
                _ => {}
            }
            i += 1;
        }
        self.pos = doc.len();
    }

    /// The path of the innermost open object and the keys it already has; `None` when the
    /// scanned prefix does not end inside an object (or a key on the way cannot be read).
    #[cfg(test)]
    fn open_object(&self) -> Option<(Vec<Step>, Vec<Arc<str>>)> {
        let (path, _, _) = self.open_key()?;
        Some((path, self.present()))
    }

    /// The keys of the innermost open object (which [`Scan::open_key`] found readable).
    fn present(&self) -> Vec<Arc<str>> {
        let Some(Frame::Obj { first, .. }) = self.stack.last() else { return Vec::new() };
        self.keys[*first..].iter().flatten().cloned().collect()
    }

    /// The key written last in the innermost open object.
    fn last_key(&self) -> Option<&Arc<str>> {
        self.keys.last()?.as_ref()
    }

    /// What an answer at the innermost open object depends on, without copying its keys:
    /// its path, how many keys it has and their set hash; `None` as for `open_object`.
    fn open_key(&self) -> Option<(Vec<Step>, usize, u64)> {
        let Some(&Frame::Obj { first, keys, unread: false, .. }) = self.stack.last() else {
            return None;
        };
        let mut path = Vec::new();
        for (d, f) in self.stack[..self.stack.len() - 1].iter().enumerate() {
            path.push(match f {
                // The object's last key: the one before the next open frame's keys.
                Frame::Obj { first, .. } => {
                    let end = self.stack[d + 1..]
                        .iter()
                        .find_map(|g| match g {
                            Frame::Obj { first, .. } => Some(*first),
                            Frame::Arr { .. } => None,
                        })
                        .unwrap_or(self.keys.len());
                    Step::Key(self.keys[*first..end].last()?.clone()?)
                }
                Frame::Arr { index } => Step::Index(*index),
            });
        }
        Some((path, self.keys.len() - first, keys))
    }
}

/// The last prefix scanned and where its scan stood: the walk and the completion search ask
/// at every key they open, each time with the previous prefix grown by a few bytes (or taken
/// back by a few), so a new prefix is scanned on from the last state — or from the last
/// checkpoint before the first byte that changed — not from its start (a scan from the start
/// each time was quadratic: 12% of a run on 8–13 kB documents).
#[derive(Default)]
struct ScanCache {
    doc: Vec<u8>,
    checkpoints: Vec<Scan>,
    last: Scan,
    /// The answers given, by (patterns?, object path, keys written): the completion search
    /// asks again and again at the same objects with the same keys written (each attempt it
    /// takes back, and its moves alternate between objects), and building a list clones up
    /// to [`MAX_HINTS`] names. At most [`MAX_ANSWERS`]; cleared when full.
    answers: FxHashMap<AnswerKey, Arc<[Hint]>>,
    /// The last answer that held every name of its object still to write (see
    /// [`KeyHints::answer`]), with its key.
    last_whole: Option<(AnswerKey, Arc<[Hint]>)>,
}

impl ScanCache {
    /// The answer at `key` where it is the last whole answer's object with one key more
    /// written: that answer with the key's name taken out. An object of 175 required
    /// properties (`Github_ultra---o44208`'s root) is asked at each of its keys, and building
    /// each answer from the names afresh, with a set of the keys written, made the hints a
    /// third of a walk.
    fn one_more(&self, key: &AnswerKey, new: &str) -> Option<Arc<[Hint]>> {
        let ((patterns, path, n, keys), out) = self.last_whole.as_ref()?;
        let same = *patterns == key.0
            && *path == key.1
            && n + 1 == key.2
            && keys.wrapping_add(key_hash(new)) == key.3;
        if !same {
            return None;
        }
        let q = quoted(new);
        if !out.iter().any(|h| **h == *q) {
            return Some(out.clone());
        }
        let rest: Vec<Hint> = out.iter().filter(|h| ***h != *q).cloned().collect();
        // Nothing left: the schema-wide list, as `answer` gives; left to it.
        (!rest.is_empty()).then(|| rest.into())
    }

    #[cfg(test)]
    fn open_object(&mut self, doc: &[u8]) -> Option<(Vec<Step>, Vec<Arc<str>>)> {
        self.scan_to(doc).open_object()
    }

    /// The scan of `doc`, from the last state or checkpoint its bytes allow.
    fn scan_to(&mut self, doc: &[u8]) -> &Scan {
        let same = common_prefix(&self.doc, doc);
        let mut scan = if self.last.pos <= same {
            std::mem::take(&mut self.last)
        } else {
            while self.checkpoints.last().is_some_and(|c| c.pos > same) {
                self.checkpoints.pop();
            }
            self.checkpoints.last().cloned().unwrap_or_default()
        };
        let checkpoints = &mut self.checkpoints;
        let next = checkpoints.last().map_or(0, |c| c.pos) + CHECKPOINT_BYTES;
        scan.run(doc, next, |s| checkpoints.push(s.clone()));
        self.doc.truncate(same);
        self.doc.extend_from_slice(&doc[same..]);
        self.last = scan;
        &self.last
    }
}

/// How many leading bytes `a` and `b` share (compared 32 at a time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 32 <= n && a[i..i + 32] == b[i..i + 32] {
        i += 32;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The path of the innermost open object of the JSON prefix `doc` and the keys it already has;
/// `None` when `doc` does not end inside an object. One scan from the start (the reference the
/// incremental [`ScanCache`] is tested against).
#[cfg(test)]
fn open_object(doc: &[u8]) -> Option<(Vec<Step>, Vec<Arc<str>>)> {
    let mut scan = Scan::default();
    scan.run(doc, usize::MAX, |_| {});
    scan.open_object()
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
                    if let Some(x) = m.get("properties").and_then(|p| p.get(&**k)) {
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
pub(crate) fn pattern_samples(pattern: &str, n: usize) -> Vec<String> {
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
fn quoted(k: &str) -> Hint {
    let q = Value::String(k.to_string()).to_string();
    q.as_bytes()[1..].into()
}

/// Every property name of `schema` ([`node_names`] of every node; required and dependent ones
/// first, at most [`MAX_HINTS`]), as hints: the list where a path does not resolve; and the
/// same list without the names made from patterns (the walk's). One walk of the schema makes
/// both.
fn schema_names(schema: &Value) -> (Vec<Hint>, Vec<Hint>) {
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
    let hints = |patterns: bool| -> Vec<Hint> {
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

    fn strs(keys: &[Arc<str>]) -> Vec<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    fn names(h: &[Hint]) -> Vec<String> {
        h.iter().map(|k| String::from_utf8_lossy(&k[..k.len() - 1]).into_owned()).collect()
    }

    /// The incremental scan answers as a scan from the start, on prefixes that grow, shrink
    /// (to before and after checkpoints) and change in the middle, in a long document with
    /// escapes, nested containers and keys of closed objects.
    #[test]
    fn the_incremental_scan_answers_as_a_scan_from_the_start() {
        let mut doc = String::from("{");
        for i in 0..120 {
            doc.push_str(&format!(
                r#""k{i}\"x": {{"a": [1, {{"b{i}": "}}]", "c": {{"d": [[], {{}}]}}}}, 2], "e": "\\"}}, "#
            ));
        }
        doc.push_str(r#""last": {"y": 1, ""#);
        let doc = doc.as_bytes();
        let mut cache = ScanCache::default();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut end = 1usize;
        let mut longest = 0;
        for step in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let r = (seed >> 8) as usize;
            end = if step % 300 == 299 {
                // Now and then far back (before several checkpoints).
                end.saturating_sub(r % 3000).max(1)
            } else if seed.is_multiple_of(4) {
                // A few bytes taken back.
                end.saturating_sub(r % 40).max(1)
            } else {
                (end + r % 50).min(doc.len())
            };
            longest = longest.max(end);
            let mut prefix = doc[..end].to_vec();
            if step % 97 == 0 && end > 10 {
                // A changed byte in the middle (another document).
                prefix[end / 2] = b' ';
            }
            assert_eq!(cache.open_object(&prefix), open_object(&prefix), "prefix of {end} bytes");
        }
        assert!(longest == doc.len(), "the walk reached {longest} of {} bytes", doc.len());
        assert!(cache.checkpoints.len() >= 8, "{} checkpoints", cache.checkpoints.len());
        assert_eq!(cache.open_object(doc), open_object(doc));
        assert!(open_object(doc).is_some());
    }

    #[test]
    fn the_open_object_and_its_keys_are_read_from_the_prefix() {
        let (path, present) = open_object(br#"{"a": [1, {"x": "}", "y": {"#).expect("open");
        assert_eq!(path, vec![Step::Key("a".into()), Step::Index(1), Step::Key("y".into())]);
        assert!(present.is_empty());
        let (path, present) = open_object(br#"{"a": 1, "b\"c": {"k": [], ""#).expect("open");
        assert_eq!(path, vec![Step::Key("b\"c".into())]);
        assert_eq!(strs(&present), vec!["k".to_string()]);
        assert!(open_object(br#"{"a": ["#).is_none());
        // Keys of closed objects are not the open ones' (their spans are dropped).
        let doc = br#"{"a": {"p": 1, "q": {"z": 2}}, "b": [{"c": 1}, {"d": {"e": 0}, "f": 1, ""#;
        let (path, present) = open_object(doc).expect("open");
        assert_eq!(path, vec![Step::Key("b".into()), Step::Index(1)]);
        assert_eq!(strs(&present), vec!["d".to_string(), "f".to_string()]);
        let (path, present) = open_object(br#"{"a": {"k": 1}, "b": 2, "c": {"x": {}, ""#).unwrap();
        assert_eq!(path, vec![Step::Key("c".into())]);
        assert_eq!(strs(&present), vec!["x".to_string()]);
        let (path, present) = open_object(br#"{"a": {"k": 1}, "b": 2, ""#).unwrap();
        assert!(path.is_empty());
        assert_eq!(strs(&present), vec!["a".to_string(), "b".to_string()]);
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

    #[test]
    fn an_answer_with_one_key_more_equals_one_made_afresh() {
        // Answers along one object, a key at a time (each made from the one before it, see
        // `ScanCache::one_more`), against a fresh `KeyHints` asked at each prefix alone:
        // names written, an extra key, a pattern-made name, and the object's last name.
        let mut props = serde_json::Map::new();
        for i in 0..12 {
            props.insert(format!("p{i}"), json!({}));
        }
        let schema = json!({
            "type": "object", "required": ["p3", "p7"], "properties": props,
            "patternProperties": {"^x-[ab]$": {}}
        });
        let keys = ["p7", "zz", "p0", "x-a", "p11", "p3", "p1", "p2", "p4", "p5", "p6", "p8"];
        for patterns in [true, false] {
            let grown = KeyHints::new(Some(&schema));
            let mut doc = String::from("{");
            for k in keys.iter().chain(["p9", "p10", "x-b"].iter()) {
                let at = format!("{doc}\"");
                let fresh = KeyHints::new(Some(&schema)).lookup(at.as_bytes(), patterns);
                assert_eq!(names(&grown.lookup(at.as_bytes(), patterns)), names(&fresh), "{at}");
                doc.push_str(&format!("\"{k}\": 0, "));
            }
        }
    }
}
