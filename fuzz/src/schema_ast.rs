//! A structure-aware JSON Schema: an `arbitrary`-derived AST rendered to JSON, and small JSON
//! instances to judge against it.
//!
//! The values are kept where the independent validator (the `jsonschema` crate, f64 numbers,
//! ECMA-262 regexes) judges exactly what grammask judges: integer `multipleOf`, numbers that
//! are small integers or halves, ASCII patterns from a fixed list, no `format`.

use arbitrary::Arbitrary;
use serde_json::{json, Map, Value};

/// Patterns both regex dialects read the same way (unanchored search, ASCII).
const PATTERNS: &[&str] =
    &["^a", "b$", "^[a-c]+$", "x|yz", "^[0-9]{2,3}$", "a*b", "^.?$", "^(ab)+", "[^a]", "^$"];
const KEYS: &[&str] = &["a", "b", "c", "k0"];
const STRINGS: &[&str] = &["", "a", "b", "ab", "abc", "x", "é", "😀", "\"", "\\", "\n", "k0", "12"];

#[derive(Arbitrary, Debug, Clone)]
pub enum Ty {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Ty {
    fn name(&self) -> &'static str {
        match self {
            Ty::Null => "null",
            Ty::Boolean => "boolean",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::String => "string",
            Ty::Array => "array",
            Ty::Object => "object",
        }
    }
}

/// A small number: an integer, or an integer plus one half (exact in f64 and in decimal).
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Num {
    Int(i8),
    Half(i8),
}

impl Num {
    fn value(self) -> Value {
        match self {
            Num::Int(i) => json!(i),
            Num::Half(i) => json!(f64::from(i) + 0.5),
        }
    }
}

/// A small JSON value (instances, `const`, `enum` members).
#[derive(Arbitrary, Debug, Clone)]
pub enum Inst {
    Null,
    Bool(bool),
    Num(Num),
    Str(u8),
    Arr(Vec<Inst>),
    Obj(Vec<(u8, Inst)>),
}

impl Inst {
    pub fn to_json(&self, depth: usize) -> Value {
        match self {
            Inst::Null => Value::Null,
            Inst::Bool(b) => json!(b),
            Inst::Num(n) => n.value(),
            Inst::Str(i) => json!(STRINGS[*i as usize % STRINGS.len()]),
            Inst::Arr(a) if depth < 4 => {
                Value::Array(a.iter().take(5).map(|x| x.to_json(depth + 1)).collect())
            }
            Inst::Obj(o) if depth < 4 => {
                let mut m = Map::new();
                for (k, v) in o.iter().take(4) {
                    m.insert(KEYS[*k as usize % KEYS.len()].to_owned(), v.to_json(depth + 1));
                }
                Value::Object(m)
            }
            _ => Value::Null,
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Kw {
    Type(Ty),
    Types(Vec<Ty>),
    Minimum(Num),
    Maximum(Num),
    ExclusiveMinimum(Num),
    ExclusiveMaximum(Num),
    MultipleOf(u8),
    MinLength(u8),
    MaxLength(u8),
    Pattern(u8),
    Enum(Vec<Inst>),
    Const(Inst),
    AnyOf(Vec<Node>),
    OneOf(Vec<Node>),
    AllOf(Vec<Node>),
    Not(Box<Node>),
    Properties(Vec<(u8, Node)>),
    Required(Vec<u8>),
    AdditionalProperties(Box<Node>),
    MinProperties(u8),
    MaxProperties(u8),
    Items(Box<Node>),
    PrefixItems(Vec<Node>),
    MinItems(u8),
    MaxItems(u8),
    UniqueItems(bool),
    Contains(Box<Node>),
    /// `$ref` to `#/$defs/d<i>` (modulo the number of defs) or to the root `#`.
    Ref(u8),
    IfThenElse(Box<Node>, Box<Node>, Box<Node>),
}

/// A schema: `true`, `false`, or an object of keywords.
#[derive(Arbitrary, Debug, Clone)]
pub enum Node {
    True,
    False,
    Obj(Vec<Kw>),
}

/// The root: a schema plus the `$defs` its `$ref`s point into.
#[derive(Arbitrary, Debug, Clone)]
pub struct Root {
    pub schema: Node,
    pub defs: Vec<Node>,
}

struct Ctx {
    defs: usize,
    nodes: usize,
}

impl Node {
    fn render(&self, cx: &mut Ctx, depth: usize) -> Value {
        cx.nodes += 1;
        match self {
            Node::True => json!(true),
            Node::False => json!(false),
            Node::Obj(_) if depth > 5 || cx.nodes > 60 => json!({}),
            Node::Obj(kws) => {
                let mut m = Map::new();
                for k in kws.iter().take(6) {
                    k.render(cx, depth, &mut m);
                }
                Value::Object(m)
            }
        }
    }
}

fn list(nodes: &[Node], cx: &mut Ctx, depth: usize) -> Value {
    let v: Vec<Value> = nodes.iter().take(4).map(|n| n.render(cx, depth + 1)).collect();
    if v.is_empty() {
        Value::Array(vec![json!(true)])
    } else {
        Value::Array(v)
    }
}

impl Kw {
    fn render(&self, cx: &mut Ctx, depth: usize, m: &mut Map<String, Value>) {
        let d = depth;
        let (k, v) = match self {
            Kw::Type(t) => ("type", json!(t.name())),
            Kw::Types(ts) => {
                let mut names: Vec<&str> = ts.iter().take(4).map(Ty::name).collect();
                names.sort_unstable();
                names.dedup();
                if names.is_empty() {
                    return;
                }
                ("type", json!(names))
            }
            Kw::Minimum(n) => ("minimum", n.value()),
            Kw::Maximum(n) => ("maximum", n.value()),
            Kw::ExclusiveMinimum(n) => ("exclusiveMinimum", n.value()),
            Kw::ExclusiveMaximum(n) => ("exclusiveMaximum", n.value()),
            Kw::MultipleOf(n) => ("multipleOf", json!(1 + n % 10)),
            Kw::MinLength(n) => ("minLength", json!(n % 8)),
            Kw::MaxLength(n) => ("maxLength", json!(n % 8)),
            Kw::Pattern(i) => ("pattern", json!(PATTERNS[*i as usize % PATTERNS.len()])),
            Kw::Enum(xs) => {
                let v: Vec<Value> = xs.iter().take(6).map(|x| x.to_json(2)).collect();
                if v.is_empty() {
                    return;
                }
                ("enum", Value::Array(v))
            }
            Kw::Const(x) => ("const", x.to_json(2)),
            Kw::AnyOf(ns) => ("anyOf", list(ns, cx, d)),
            Kw::OneOf(ns) => ("oneOf", list(ns, cx, d)),
            Kw::AllOf(ns) => ("allOf", list(ns, cx, d)),
            Kw::Not(n) => ("not", n.render(cx, d + 1)),
            Kw::Properties(ps) => {
                let mut p = Map::new();
                for (k, n) in ps.iter().take(4) {
                    p.insert(KEYS[*k as usize % KEYS.len()].to_owned(), n.render(cx, d + 1));
                }
                ("properties", Value::Object(p))
            }
            Kw::Required(ks) => {
                let mut names: Vec<&str> =
                    ks.iter().take(3).map(|k| KEYS[*k as usize % KEYS.len()]).collect();
                names.sort_unstable();
                names.dedup();
                ("required", json!(names))
            }
            Kw::AdditionalProperties(n) => ("additionalProperties", n.render(cx, d + 1)),
            Kw::MinProperties(n) => ("minProperties", json!(n % 4)),
            Kw::MaxProperties(n) => ("maxProperties", json!(n % 4)),
            Kw::Items(n) => ("items", n.render(cx, d + 1)),
            Kw::PrefixItems(ns) => ("prefixItems", list(ns, cx, d)),
            Kw::MinItems(n) => ("minItems", json!(n % 5)),
            Kw::MaxItems(n) => ("maxItems", json!(n % 5)),
            Kw::UniqueItems(b) => ("uniqueItems", json!(b)),
            Kw::Contains(n) => ("contains", n.render(cx, d + 1)),
            Kw::Ref(i) => {
                if cx.defs == 0 || *i as usize % (cx.defs + 1) == cx.defs {
                    ("$ref", json!("#"))
                } else {
                    ("$ref", json!(format!("#/$defs/d{}", *i as usize % cx.defs)))
                }
            }
            Kw::IfThenElse(i, t, e) => {
                m.insert("if".into(), i.render(cx, d + 1));
                m.insert("then".into(), t.render(cx, d + 1));
                ("else", e.render(cx, d + 1))
            }
        };
        m.insert(k.to_owned(), v);
    }
}

impl Root {
    /// The schema as JSON: `$defs` `d0`, `d1`, … beside the root's keywords.
    pub fn to_json(&self) -> Value {
        let defs = self.defs.len().min(4);
        let mut cx = Ctx { defs, nodes: 0 };
        let mut root = self.schema.render(&mut cx, 0);
        if defs > 0 {
            let mut d = Map::new();
            for (i, n) in self.defs.iter().take(defs).enumerate() {
                d.insert(format!("d{i}"), n.render(&mut cx, 1));
            }
            match &mut root {
                Value::Object(m) => {
                    m.insert("$defs".into(), Value::Object(d));
                }
                // `true` / `false` root: wrap it so the `$defs` have a home.
                other => {
                    let inner = other.clone();
                    *other = json!({"allOf": [inner], "$defs": d});
                }
            }
        }
        root
    }
}
