//! Documents aimed at the schema locations the random walks missed (coverage-guided top-up).
//!
//! The walks choose by class and style, so a location several optional levels down, an `enum`
//! member among many or a key that must match a `patternProperties` pattern is often never
//! written (`Github_trivial---o78129`: `checksums` keys of 32 hex digits, never reached in
//! 100 documents, so no near miss could break them either). After most of the valid
//! instances are made, each missed location of these kinds gets one aimed document:
//! - `…/properties/<name>`: an object the location's parent subschema applies to, in a
//!   document already made, gets the key `<name>`;
//! - `…/patternProperties/<pattern>`: the same with a key matching the pattern;
//! - `…/enum/<i>`: a value the parent applies to is replaced by the `i`-th member.
//!
//! The document is rewritten up to that point ([`prefix`]: the containers on the path stay
//! open, their other members written first, array elements after the path dropped) and the
//! engine's completion search writes the rest ([`Fuzzer::finish`](super::Fuzzer::finish)):
//! the new key's value, and whatever the containers still need. Nothing here decides
//! validity: a prefix the engine refuses (the key is not allowed in that branch) gives no
//! document, and every document is checked like a walk's (token-level engine, duplicates).

use super::schema_map::{SchemaMap, Step};
use serde_json::Value;
use std::collections::HashMap;

/// What to write at a missed location's parent.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Aim {
    /// A property of this name.
    Property(String),
    /// A property whose name matches this pattern.
    Pattern(String),
    /// The `enum` member at this index.
    Member(usize),
    /// One more array element.
    Item,
    /// A property no `properties` entry names (`additionalProperties`).
    Extra,
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// The parent subschema's pointer and the aim, for a missed location of a kind this module
/// aims at (see the module docs); `None` for the others.
pub(crate) fn aim_of(location: &str) -> Option<(&str, Aim)> {
    let (rest, last) = location.rsplit_once('/')?;
    let named = rest.rsplit_once('/').and_then(|(parent, keyword)| {
        let aim = match keyword {
            "properties" => Aim::Property(unescape(last)),
            "patternProperties" => Aim::Pattern(unescape(last)),
            "enum" => Aim::Member(last.parse().ok()?),
            _ => return None,
        };
        Some((parent, aim))
    });
    named.or(match last {
        "items" => Some((rest, Aim::Item)),
        "additionalProperties" => Some((rest, Aim::Extra)),
        _ => None,
    })
}

/// Where a subschema applies in the documents made so far: the first (document, path) per
/// pointer where the value is an object, and the first where it is anything.
#[derive(Default)]
pub(crate) struct Places {
    object: HashMap<String, (usize, Vec<Step>)>,
    array: HashMap<String, (usize, Vec<Step>)>,
    any: HashMap<String, (usize, Vec<Step>)>,
}

impl Places {
    /// Take in the places of later documents (`later`'s indices all above this one's): the
    /// first place per pointer stays the first.
    pub(crate) fn merge(&mut self, later: Places) {
        for (mine, theirs) in [
            (&mut self.object, later.object),
            (&mut self.array, later.array),
            (&mut self.any, later.any),
        ] {
            for (k, v) in theirs {
                mine.entry(k).or_insert(v);
            }
        }
    }

    /// Record every place of `doc` (the `index`-th document).
    pub(crate) fn add(&mut self, map: &SchemaMap<'_>, index: usize, doc: &Value) {
        map.visit(doc, &mut |visit, value| {
            let place = || (index, visit.path.to_vec());
            if value.is_object() && !self.object.contains_key(visit.pointer) {
                self.object.insert(visit.pointer.to_string(), place());
            }
            let filled = value.as_array().is_some_and(|a| !a.is_empty());
            if filled && !self.array.contains_key(visit.pointer) {
                self.array.insert(visit.pointer.to_string(), place());
            }
            if !self.any.contains_key(visit.pointer) {
                self.any.insert(visit.pointer.to_string(), place());
            }
        });
    }

    /// Did any document recorded here reach the subschema at `pointer`? (Every visit is
    /// recorded in `any`: these are the locations [`super::coverage`] counts.)
    pub(crate) fn reached(&self, pointer: &str) -> bool {
        self.any.contains_key(pointer)
    }

    /// A place for `aim` at `parent`, and whether its value is an object: for a property an
    /// object if one was written there, else any value (the aimed document writes an object
    /// in its place: `Github_trivial---o78129`'s `checksums` was never an object).
    pub(crate) fn find(&self, parent: &str, aim: &Aim) -> Option<(&(usize, Vec<Step>), bool)> {
        match aim {
            Aim::Property(_) | Aim::Pattern(_) | Aim::Extra => match self.object.get(parent) {
                Some(p) => Some((p, true)),
                None => self.any.get(parent).map(|p| (p, false)),
            },
            Aim::Member(_) => self.any.get(parent).map(|p| (p, false)),
            Aim::Item => self.array.get(parent).map(|p| (p, false)),
        }
    }
}

fn push_json(out: &mut String, v: &Value) {
    out.push_str(&v.to_string());
}

fn push_key(out: &mut String, key: &str) {
    push_json(out, &Value::String(key.to_string()));
    out.push(':');
}

/// `doc` rewritten up to the value at `path`, compactly: each container on the path open,
/// with its other members first (an object's) or the elements before the path (an array's),
/// then `tail` writes at the value itself. `None` where the path does not fit `doc` or
/// `tail` gives up.
pub(crate) fn prefix(
    doc: &Value,
    path: &[Step],
    tail: &mut dyn FnMut(&Value, &mut String) -> bool,
) -> Option<String> {
    let mut out = String::new();
    let mut v = doc;
    for step in path {
        match (step, v) {
            (Step::Key(k), Value::Object(m)) => {
                out.push('{');
                for (key, val) in m.iter().filter(|(key, _)| *key != k) {
                    push_key(&mut out, key);
                    push_json(&mut out, val);
                    out.push(',');
                }
                push_key(&mut out, k);
                v = m.get(k)?;
            }
            (Step::Index(i), Value::Array(a)) => {
                out.push('[');
                for e in a.get(..*i)? {
                    push_json(&mut out, e);
                    out.push(',');
                }
                v = a.get(*i)?;
            }
            _ => return None,
        }
    }
    tail(v, &mut out).then_some(out)
}

/// The tail for a new key `key` in the object at the path: its members, then `"key":`.
pub(crate) fn with_key(key: &str) -> impl FnMut(&Value, &mut String) -> bool + '_ {
    move |v, out| {
        let Value::Object(m) = v else { return false };
        if m.contains_key(key) {
            return false;
        }
        out.push('{');
        for (k, val) in m {
            push_key(out, k);
            push_json(out, val);
            out.push(',');
        }
        push_key(out, key);
        true
    }
}

/// The tail for a new object with the key `key` in place of the (non-object) value at the
/// path: `{"key":`.
pub(crate) fn in_new_object(key: &str) -> impl FnMut(&Value, &mut String) -> bool + '_ {
    move |_, out| {
        out.push('{');
        push_key(out, key);
        true
    }
}

/// The tail for one more element of the (non-empty) array at the path: its elements, then
/// `,`.
pub(crate) fn with_element(v: &Value, out: &mut String) -> bool {
    let Some(a) = v.as_array().filter(|a| !a.is_empty()) else { return false };
    out.push('[');
    for e in a {
        push_json(out, e);
        out.push(',');
    }
    true
}

/// A key for `additionalProperties` at the object subschema `node`: one its `properties`
/// do not name.
pub(crate) fn extra_key(node: &Value) -> String {
    let named = |k: &str| node.get("properties").and_then(|p| p.get(k)).is_some();
    (0..).map(|i| format!("extra{i}")).find(|k| !named(k)).expect("a free name")
}

/// The tail that writes `member` in place of the value at the path.
pub(crate) fn with_value(member: &Value) -> impl FnMut(&Value, &mut String) -> bool + '_ {
    move |_, out| {
        push_json(out, member);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_name_their_parent_and_aim() {
        assert_eq!(aim_of("/properties/a"), Some(("", Aim::Property("a".into()))));
        assert_eq!(
            aim_of("/definitions/x/properties/a~1b~0c"),
            Some(("/definitions/x", Aim::Property("a/b~c".into())))
        );
        assert_eq!(
            aim_of("/properties/c/patternProperties/^[0-9]$"),
            Some(("/properties/c", Aim::Pattern("^[0-9]$".into())))
        );
        assert_eq!(aim_of("/properties/t/enum/3"), Some(("/properties/t", Aim::Member(3))));
        assert_eq!(aim_of("/properties/a/items"), Some(("/properties/a", Aim::Item)));
        // A property named `items` is a property.
        assert_eq!(aim_of("/properties/items"), Some(("", Aim::Property("items".into()))));
        assert_eq!(aim_of("/additionalProperties"), Some(("", Aim::Extra)));
        assert_eq!(aim_of("/anyOf/1"), None);
        assert_eq!(aim_of(""), None);
    }

    #[test]
    fn prefixes_keep_the_path_open_and_the_rest_written() {
        let doc = serde_json::json!({"a": [1, {"b": true, "c": null}, 3], "z": "q"});
        let path = [Step::Key("a".into()), Step::Index(1)];
        let p = prefix(&doc, &path, &mut with_key("new")).expect("fits");
        assert_eq!(p, r#"{"z":"q","a":[1,{"b":true,"c":null,"new":"#);
        let p = prefix(&doc, &path, &mut with_value(&serde_json::json!("m"))).expect("fits");
        assert_eq!(p, r#"{"z":"q","a":[1,"m""#);
        let p = prefix(&doc, &[Step::Key("a".into())], &mut with_element).expect("fits");
        assert_eq!(p, r#"{"z":"q","a":[1,{"b":true,"c":null},3,"#);
        assert_eq!(prefix(&doc, &[Step::Key("z".into())], &mut with_element), None);
        let p = prefix(&doc, &[Step::Key("z".into())], &mut in_new_object("k")).expect("fits");
        assert_eq!(p, r#"{"a":[1,{"b":true,"c":null},3],"z":{"k":"#);
        // A key already there, or a path that does not fit, gives nothing.
        assert_eq!(prefix(&doc, &path, &mut with_key("b")), None);
        assert_eq!(prefix(&doc, &[Step::Index(0)], &mut with_key("x")), None);
    }
}
