//! JSON Schema constraints: compile a schema once into an immutable, `Arc`-shared
//! [`CompiledSchema`]; run one [`SchemaConstraint`] per request.
//!
//! Masks are exact: a token is allowed iff the output after it can still be completed to an
//! instance that validates. Keywords that cannot be decided exactly are refused at compile time
//! with [`SchemaErrorKind::Unsupported`] naming the keyword and its JSON pointer (or, with
//! [`SchemaOptions::lenient`], ignored and listed by [`CompiledSchema::ignored_keywords`]).
//! The keyword-by-keyword support table is in `docs/json-schema.md`.
//!
//! # Architecture
//! - [`compile`](self) turns the schema into a union of typed *cores* per subschema (DNF):
//!   `allOf` is intersected at compile time, `anyOf` (and `oneOf` whose branches are provably
//!   disjoint) is a union, `not` is pushed inwards, `$ref` is a cycle in the graph. A
//!   satisfiability fixpoint removes cores without finite instances.
//! - `unique` canonicalises completed array items for `uniqueItems` and decides which item
//!   schemas the runtime can keep unique exactly.
//! - `string` builds byte automata (pattern, format, enum, lengths) pruned to live states;
//!   `number` decides numeric keywords digit by digit with exact decimals.
//! - `runtime` is the per-request recogniser: a stack of open values, each with the set of
//!   still-alive alternative cores (and which parent alternatives each serves), with an undo
//!   log so the trie walk pushes and pops bytes cheaply.
//!
//! # Example
//! ```
//! use grammask::schema::{SchemaConstraint, SchemaOptions};
//! use grammask::{ConstraintEngine, TokenMask, Vocabulary};
//! let vocab = Vocabulary::embedded().unwrap();
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
//!     "required": ["name"],
//!     "additionalProperties": false
//! });
//! let mut engine = SchemaConstraint::compile(&schema, &vocab, &SchemaOptions::default()).unwrap();
//! let mut mask = TokenMask::new(vocab.n_vocab());
//! for t in vocab.encode(r#"{"name": "Ada", "age": 36}"#).unwrap() {
//!     engine.fill_mask(&mut mask).unwrap();
//!     assert!(mask.contains(t));
//!     engine.advance(t).unwrap();
//! }
//! assert!(engine.is_accepting());
//! ```

mod chardfa;
mod compile;
mod error;
mod ids;
mod number;
mod numdfa;
mod runtime;
pub(crate) mod string;
mod unique;
mod vocabulary;

pub use error::{SchemaError, SchemaErrorKind};
pub use runtime::SchemaConstraint;

use crate::engine::{EngineOptions, Whitespace};
use std::sync::Arc;

/// In which order an object's declared properties may appear.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PropertyOrder {
    /// Any order, as the specification allows (default). Each key at most once.
    #[default]
    Any,
    /// Declared properties in the order of `properties` (as OpenAI and llguidance produce);
    /// undeclared keys (`additionalProperties`, `patternProperties`) anywhere.
    Schema,
}

/// What `format` does (draft 2020-12 makes it an annotation by default; issue 3 asks for
/// assertion of the common formats, so that is the default here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FormatMode {
    /// Known formats constrain strings (date-time, date, time, duration, email, hostname,
    /// ipv4, ipv6, uuid, uri, uri-reference, …; the list is in `docs/json-schema.md`).
    /// `regex`, `idn-email` and `idn-hostname` are [`SchemaErrorKind::Unsupported`].
    /// Unknown format names constrain nothing (default).
    #[default]
    Assert,
    /// Every `format` is an annotation and constrains nothing, as the 2020-12 specification's
    /// format-annotation vocabulary says.
    Annotate,
}

/// Percent-decode a URI fragment (RFC 3986 §2.1) such as a `$ref`'s JSON pointer; a `%` not
/// followed by two hex digits is kept as it is. One decoder for the compiler's `$ref`s and the
/// fuzzer's schema maps (the compiler's own sliced the text by byte index and panicked on
/// `#/%aé`).
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(v) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse a schema's JSON text, with errors a user can act on: where the text stops being JSON,
/// and a schema nested deeper than the parser's depth limit (128, serde_json's) named as that
/// limit instead of "not JSON". Numbers keep their exact decimal text (the crate builds
/// `serde_json` with `arbitrary_precision`), so `18446744073709551617` or `1e400` mean what they
/// say in `const`, `enum` and the numeric bounds.
///
/// # Errors
/// [`SchemaErrorKind::Invalid`] (at the root pointer) for text that is not JSON,
/// [`SchemaErrorKind::Limit`] `nesting_depth` for nesting over 128.
///
/// # Example
/// ```
/// use grammask::schema::{parse_schema_text, SchemaErrorKind};
/// let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
/// let e = parse_schema_text(&deep).unwrap_err();
/// assert!(matches!(e.kind(), SchemaErrorKind::Limit { limit: "nesting_depth", value: 128, .. }));
/// let n = parse_schema_text(r#"{"const": 18446744073709551617}"#).unwrap();
/// assert_eq!(n["const"].to_string(), "18446744073709551617");
/// ```
pub fn parse_schema_text(text: &str) -> Result<serde_json::Value, SchemaError> {
    serde_json::from_str(text).map_err(|e| {
        if e.to_string().starts_with("recursion limit exceeded") {
            SchemaError::limit("nesting_depth", 128)
        } else {
            SchemaError::invalid("", format!("not JSON: {e}"))
        }
    })
}

/// Compile-time size limits: a hostile schema gets a typed [`SchemaErrorKind::Limit`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaLimits {
    /// Expressions plus cores (default 200,000).
    pub max_nodes: usize,
    /// Nested `$ref` expansion depth while compiling (default 256).
    pub max_ref_depth: usize,
    /// States of one string automaton (default 20,000).
    pub max_dfa_states: usize,
    /// Alternatives (typed cores) of one subschema (default 256), after a union's scalar cores
    /// are united per type. Live alternatives at run time are not capped by it.
    pub max_alternatives: usize,
    /// Deepest nesting of arrays and objects in an instance (default 128, the depth
    /// `serde_json` parses): the engine refuses the `[` or `{` that would go deeper, so a
    /// recursive schema (`{"items": {"$ref": "#"}}`) cannot be driven into masks whose cost
    /// grows without bound.
    pub max_instance_depth: usize,
    /// A wall-clock deadline for one compile (default `None`: the size limits above bound the
    /// work, and a schema compiles or not whatever the machine's load). With `Some(t)` the
    /// compiler and its automaton loops stop once `t` has passed:
    /// [`SchemaErrorKind::Limit`] `compile_time_ms`.
    pub max_compile_time: Option<std::time::Duration>,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        SchemaLimits {
            max_nodes: 200_000,
            max_ref_depth: 256,
            max_dfa_states: 20_000,
            max_alternatives: 256,
            max_instance_depth: 128,
            max_compile_time: None,
        }
    }
}

/// Options of the schema compiler and engine.
///
/// ```
/// use grammask::{schema::PropertyOrder, SchemaOptions, Whitespace};
/// let o = SchemaOptions::default()
///     .with_whitespace(Whitespace::Compact)
///     .with_property_order(PropertyOrder::Schema);
/// assert!(!o.lenient);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SchemaOptions {
    /// Whitespace policy (default [`Whitespace::Flexible`] with runs of at most
    /// [`SchemaOptions::DEFAULT_MAX_WS_RUN`] = 4: accepts compact output and `json.dumps`'s
    /// `", "`/`": "`).
    pub whitespace: Whitespace,
    /// Property order (default [`PropertyOrder::Any`]).
    pub property_order: PropertyOrder,
    /// Ignore unsupported keywords instead of failing, and list them in
    /// [`CompiledSchema::ignored_keywords`] (default `false`). Masks are then exact for the
    /// schema without those keywords.
    pub lenient: bool,
    /// `format` policy (default [`FormatMode::Assert`]).
    pub formats: FormatMode,
    /// Pre-loaded documents that `$ref`s to other URIs resolve to, keyed by absolute URI
    /// without fragment (e.g. `http://example.com/defs.json`); documents are also found by
    /// the `$id`s inside them. Nothing is ever fetched: a `$ref` to a URI that is neither here
    /// nor an `$id` of the schema is [`SchemaErrorKind::Unsupported`] (default: none).
    /// A schema whose `$schema` names one of these documents uses that metaschema's
    /// `$vocabulary`: without the validation vocabulary, validation keywords are annotations;
    /// a required vocabulary we do not know is [`SchemaErrorKind::Unsupported`].
    pub documents: std::collections::BTreeMap<String, serde_json::Value>,
    /// Compile limits.
    pub limits: SchemaLimits,
    /// Engine limits (rollback history, mask cache).
    pub engine: EngineOptions,
    /// Spell `integer` values as plain integer literals, `-?(0|[1-9][0-9]*)` (default
    /// `false`: every JSON spelling of an integer value, as the JSON Schema validators accept —
    /// `1.0`, `1e3`, `10.0E-1`). For generation: a model that starts `1.1` under `integer`
    /// may otherwise write zeros until an exponent brings the value back to an integer
    /// (`1.1000…0e3`), which a small model never does. XGrammar and llguidance generate the
    /// plain form. Documents in other spellings are refused under this option.
    pub plain_integers: bool,
    /// In an object that takes no keys but its declared ones, spell those names as written:
    /// `\` only where a name's next character must be escaped (`"`, `\`, a control
    /// character). Default `false`: any JSON spelling of a name (`"colo\u0072"` is `color`),
    /// which a model masked away from a misspelling can take (SmolLM2-135M wrote exactly that,
    /// docs/python.md). Objects that take undeclared keys keep every spelling.
    pub literal_keys: bool,
    /// Spell a string value as written where its schema leaves finitely many strings from
    /// there (`enum`, `const`, a pattern such as `^(red|green)$`): `\` only where the next
    /// character must be escaped (`"`, `\`, a control character). Default `false`: any JSON
    /// spelling (`"p\u0075rple"` is `purple`), which a model masked away from a value outside
    /// the enum can take (SmolLM2-135M wrote `"p\u0075r\u0070\u006c\u0065"` for `purple`,
    /// docs/python.md). XGrammar and llguidance generate enum members as written. A string
    /// that may still go on without bound (`{"type": "string"}`, `^a.*$`) keeps every
    /// spelling.
    pub literal_values: bool,
    /// Close objects whose schema leaves undeclared keys open only by saying nothing: a schema
    /// object that declares `properties` (even `{}`) or `patternProperties` but has neither
    /// `additionalProperties` nor `unevaluatedProperties` takes only the keys declared across
    /// the pieces merged into the same object (`allOf`, `$ref` siblings, the `anyOf`/`oneOf`
    /// branch that holds, the half of an `if`/`then`/`else`): their `properties` names,
    /// `patternProperties` matches, and the names in `required`/`dependentRequired` — the
    /// union, so `allOf: [{properties: {a}}, {properties: {b}}]` takes `a` and `b`; each
    /// piece's own rules still apply to each key. An explicit `additionalProperties` (`true` or
    /// a schema) in any piece or an applied `unevaluatedProperties` keeps an object as it is,
    /// and so does a schema that declares no keys at all (`{"type": "object"}` stays any
    /// object). Object items of a `uniqueItems` array stay open (the runtime decides
    /// uniqueness exactly only for items open to new keys). Default `false`: the letter of JSON
    /// Schema, where unlisted keys are allowed — a small model then invents keys until its
    /// token budget runs out. Closing is decided on the final cores after every compile-time
    /// proof, so `not`, the negated `if` of a conditional, `contains` counting and a `oneOf`'s
    /// exclusion see the schema as written, and every output still validates against it. An
    /// object closing leaves without instances (`minProperties` above its declared keys) drops
    /// out like any unsatisfiable alternative; when that empties the root the error is
    /// [`SchemaErrorKind::Unsatisfiable`] at the object's pointer. XGrammar's strict mode,
    /// OpenAI's strict structured outputs and llama.cpp's schema converter generate the same
    /// subset (`docs/json-schema.md`, "Generation profile: closed objects").
    pub closed_objects: bool,
    /// Spell `number` values as plain decimals, `-?(0|[1-9][0-9]*)(\.[0-9]+)?` (no exponent),
    /// with at most [`SchemaOptions::max_number_digits`] significant digits and as many after
    /// the point; bounds, `multipleOf` and `integer` stay exact — a prefix lives only while a
    /// plain completion inside them exists. Default `false`: every JSON spelling, where an
    /// exponent (`e-300`) can still bring `4.09826…` into `[0, 1]`, so a model under bounds can
    /// write digits forever. A spelling restriction at every depth and in every polarity
    /// (inside `not` too): values are judged as the schema says, so every output validates;
    /// an `enum`/`const` member no plain text within the cap spells (`1e400`) is unreachable.
    /// A schema whose numbers no plain decimal can reach (e.g. `minimum: 1e300`) is refused
    /// with [`SchemaErrorKind::Unsatisfiable`] at the subschema's pointer, its reason naming
    /// the keyword; where such a number is one alternative among others, that alternative is
    /// dropped. Implies [`SchemaOptions::plain_integers`] for `integer`, within the same cap.
    pub plain_numbers: bool,
    /// Longest count of significant digits (from the first nonzero digit to the end of the
    /// text, trailing zeros included) and of digits after the point under
    /// [`SchemaOptions::plain_numbers`] (default 15, what an IEEE double carries exactly; 0
    /// reads as 1). Integers are capped too: `123456789012345` is the longest by default.
    pub max_number_digits: u8,
    /// Spell string contents without gratuitous escapes: `\u` only for a control character
    /// (U+0000–U+001F), no `\/`, the short escapes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
    /// `\t`) kept; a character that may stand as it is stands as it is (no `\u00e9`, no
    /// surrogate pairs). Default `false`: every JSON spelling (`"\u0041"` is `"A"`). Keys and
    /// values alike, at every depth; the strings' values are unchanged, so every output still
    /// validates.
    pub plain_strings: bool,
}

/// Which language a schema is compiled to: the schema's own (exact, for validation) or the
/// generation subset that a model finishes (every output of it still validates).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Every document the schema accepts, in every JSON spelling the whitespace policy allows:
    /// what `walk`, MaskBench, the JSON Schema Test Suite and the fuzzer use.
    #[default]
    Exact,
    /// [`SchemaOptions::generation`]: the subset a small greedy model finishes. The default
    /// wherever text is generated (the server, `grammask generate`, the Python serving adapters).
    Generation,
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Profile, String> {
        match s {
            "exact" => Ok(Profile::Exact),
            "generation" => Ok(Profile::Generation),
            _ => Err(format!("unknown profile {s:?} (exact, generation)")),
        }
    }
}

impl SchemaOptions {
    /// Default longest whitespace run of [`Whitespace::Flexible`].
    pub const DEFAULT_MAX_WS_RUN: u8 = 4;

    /// Default of [`SchemaOptions::max_number_digits`].
    pub const DEFAULT_MAX_NUMBER_DIGITS: u8 = 15;

    /// The options of `profile`: [`SchemaOptions::default`] for [`Profile::Exact`],
    /// [`SchemaOptions::generation`] for [`Profile::Generation`].
    pub fn for_profile(profile: Profile) -> SchemaOptions {
        match profile {
            Profile::Exact => SchemaOptions::default(),
            Profile::Generation => SchemaOptions::generation(),
        }
    }

    /// The generation profile: a subset of the schema's language, chosen so that a greedy
    /// small model finishes, every output still valid (`docs/generation.md`): objects closed
    /// where the schema says nothing ([`Self::closed_objects`]), plain bounded numbers
    /// ([`Self::plain_numbers`]) and integers, declared names and enum members as written
    /// ([`Self::literal_keys`], [`Self::literal_values`]), no gratuitous escapes
    /// ([`Self::plain_strings`]). Whitespace stays flexible in runs of at most 4: of compact
    /// JSON, `json.dumps`'s separators and bounded flexible runs, the runs let SmolLM2-135M
    /// finish most often (61 of 80 MaskBench schemas, against 60 and 51, and the client
    /// suite's extractions, which a chat model writes pretty-printed and loses its way in when
    /// made to write them compact; `docs/generation.md`).
    ///
    /// ```
    /// use grammask::SchemaOptions;
    /// let o = SchemaOptions::generation();
    /// assert!(o.closed_objects && o.plain_numbers && o.plain_integers);
    /// ```
    pub fn generation() -> SchemaOptions {
        SchemaOptions {
            whitespace: Whitespace::Flexible { max_run: Self::DEFAULT_MAX_WS_RUN },
            plain_integers: true,
            literal_keys: true,
            literal_values: true,
            closed_objects: true,
            plain_numbers: true,
            plain_strings: true,
            ..SchemaOptions::default()
        }
    }
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            whitespace: Whitespace::Flexible { max_run: Self::DEFAULT_MAX_WS_RUN },
            property_order: PropertyOrder::default(),
            lenient: false,
            formats: FormatMode::default(),
            documents: Default::default(),
            limits: SchemaLimits::default(),
            engine: EngineOptions::default(),
            plain_integers: false,
            literal_keys: false,
            literal_values: false,
            closed_objects: false,
            plain_numbers: false,
            max_number_digits: Self::DEFAULT_MAX_NUMBER_DIGITS,
            plain_strings: false,
        }
    }
}

builder!(SchemaOptions {
    /// Whitespace policy (default flexible, runs of at most 4).
    with_whitespace => whitespace: Whitespace,
    /// Property order (default [`PropertyOrder::Any`]).
    with_property_order => property_order: PropertyOrder,
    /// Ignore unsupported keywords instead of failing (default `false`).
    with_lenient => lenient: bool,
    /// `format` policy (default [`FormatMode::Assert`]).
    with_formats => formats: FormatMode,
    /// Pre-loaded documents for `$ref`s to other URIs (default: none).
    with_documents => documents: std::collections::BTreeMap<String, serde_json::Value>,
    /// Compile limits.
    with_limits => limits: SchemaLimits,
    /// Engine limits (rollback history, mask cache).
    with_engine => engine: EngineOptions,
    /// Plain integer literals for `integer` (default `false`: every spelling).
    with_plain_integers => plain_integers: bool,
    /// Declared names spelled as written in closed objects (default `false`).
    with_literal_keys => literal_keys: bool,
    /// Finite-language string values (`enum`, `const`) spelled as written (default `false`).
    with_literal_values => literal_values: bool,
    /// Objects that declare keys and say nothing of others take only those (default `false`).
    with_closed_objects => closed_objects: bool,
    /// Numbers as plain decimals of bounded digits (default `false`: every spelling).
    with_plain_numbers => plain_numbers: bool,
    /// Significant digits under `plain_numbers` (default 15).
    with_max_number_digits => max_number_digits: u8,
    /// No gratuitous escapes in strings (default `false`: every spelling).
    with_plain_strings => plain_strings: bool,
});

builder!(SchemaLimits {
    /// Expressions plus cores (default 200,000).
    with_max_nodes => max_nodes: usize,
    /// Nested `$ref` expansion depth while compiling (default 256).
    with_max_ref_depth => max_ref_depth: usize,
    /// States of one string automaton (default 20,000).
    with_max_dfa_states => max_dfa_states: usize,
    /// Alternatives (typed cores) of one subschema (default 256).
    with_max_alternatives => max_alternatives: usize,
    /// Deepest array/object nesting of an instance (default 128).
    with_max_instance_depth => max_instance_depth: usize,
    /// A wall-clock deadline for one compile (default none).
    with_max_compile_time => max_compile_time: Option<std::time::Duration>,
});

/// Resolved whitespace rules the runtime reads.
#[derive(Clone, Debug)]
pub(crate) struct WsRules {
    /// `Some(max_run)` in flexible mode.
    pub flexible: Option<u8>,
    pub item_pre: Vec<u8>,
    pub item_post: Vec<u8>,
    pub key_pre: Vec<u8>,
    pub key_post: Vec<u8>,
}

fn split_sep(s: &str, c: u8, what: &str) -> Result<(Vec<u8>, Vec<u8>), SchemaError> {
    let b = s.as_bytes();
    let i = b.iter().position(|&x| x == c).ok_or_else(|| {
        SchemaError::invalid("", format!("{what} separator {s:?} must contain {:?}", c as char))
    })?;
    let (pre, post) = (&b[..i], &b[i + 1..]);
    if !pre.iter().chain(post).all(|&x| crate::json::syntax::is_ws(x)) {
        return Err(SchemaError::invalid(
            "",
            format!("{what} separator {s:?} may only add whitespace"),
        ));
    }
    Ok((pre.to_vec(), post.to_vec()))
}

impl WsRules {
    fn new(w: &Whitespace) -> Result<WsRules, SchemaError> {
        Ok(match w {
            Whitespace::Compact => WsRules {
                flexible: None,
                item_pre: vec![],
                item_post: vec![],
                key_pre: vec![],
                key_post: vec![],
            },
            Whitespace::Flexible { max_run } => {
                if *max_run == 0 {
                    return Err(SchemaError::invalid("", "flexible whitespace needs max_run >= 1"));
                }
                WsRules {
                    flexible: Some(*max_run),
                    item_pre: vec![],
                    item_post: vec![],
                    key_pre: vec![],
                    key_post: vec![],
                }
            }
            Whitespace::Separators { item, key } => {
                let (item_pre, item_post) = split_sep(item, b',', "item")?;
                let (key_pre, key_post) = split_sep(key, b':', "key")?;
                WsRules { flexible: None, item_pre, item_post, key_pre, key_post }
            }
        })
    }
}

/// A compiled schema: immutable, `Send + Sync`, shared by every request through an `Arc`.
#[derive(Debug)]
pub struct CompiledSchema {
    pub(crate) program: compile::Program,
    pub(crate) ws: WsRules,
    pub(crate) order: PropertyOrder,
    pub(crate) engine: EngineOptions,
    /// [`SchemaOptions::literal_keys`].
    pub(crate) literal_keys: bool,
    /// [`SchemaOptions::literal_values`].
    pub(crate) literal_values: bool,
    /// [`SchemaOptions::closed_objects`] (already laid out in `program`; kept so that what
    /// a compiled schema was compiled for can be read back).
    pub(crate) closed_objects: bool,
    /// [`SchemaOptions::plain_strings`].
    pub(crate) plain_strings: bool,
    ignored: Vec<String>,
    /// Open-token sets of string states, per vocabulary, shared by this schema's engines.
    pub(crate) open_sets: runtime::SharedOpen,
    /// The number cores' lazily built automata, shared by this schema's engines.
    pub(crate) numbers: numdfa::NumStates,
    /// Masks by exact state, shared by this schema's engines ([`EngineOptions::shared_masks`]).
    pub(crate) masks: runtime::SharedMasks,
    /// The masks of the tokens that close a number, by which alternatives accept it
    /// (shared like `masks`, under the same options).
    pub(crate) closing: runtime::SharedClosing,
    /// Per program node, the fewest bytes of a value it accepts (the fuzzer's completion
    /// bound, [`runtime::min_value_bytes`]), computed on first use.
    pub(crate) min_bytes: std::sync::OnceLock<Vec<u32>>,
}

impl CompiledSchema {
    /// Compile `schema`.
    ///
    /// # Errors
    /// A typed [`SchemaError`]: an unsupported keyword, an invalid schema, a dangling `$ref`,
    /// an unsatisfiable schema, or an exceeded [`SchemaLimits`] limit.
    pub fn compile(
        schema: &serde_json::Value,
        options: &SchemaOptions,
    ) -> Result<Arc<CompiledSchema>, SchemaError> {
        let _deadline = string::Deadline::set(
            options.limits.max_compile_time.map(|t| std::time::Instant::now() + t),
        );
        let ws = WsRules::new(&options.whitespace)?;
        // A custom metaschema without the validation vocabulary: compile a copy without it.
        let stripped = vocabulary::apply(schema, options)?;
        let schema = stripped.as_ref().unwrap_or(schema);
        let mut c = compile::Compiler::new(schema, options)?;
        let root = c.schema_at("")?;
        let (program, ignored) = c.finish(root)?;
        let numbers = numdfa::NumStates::new(&program);
        Ok(Arc::new(CompiledSchema {
            numbers,
            program,
            ws,
            order: options.property_order,
            engine: options.engine.clone(),
            literal_keys: options.literal_keys,
            literal_values: options.literal_values,
            closed_objects: options.closed_objects,
            plain_strings: options.plain_strings,
            ignored,
            open_sets: runtime::SharedOpen::default(),
            masks: runtime::SharedMasks::default(),
            closing: runtime::SharedClosing::default(),
            min_bytes: std::sync::OnceLock::new(),
        }))
    }

    /// Keywords ignored in lenient mode, as `"keyword at /pointer"` (empty otherwise).
    pub fn ignored_keywords(&self) -> &[String] {
        &self.ignored
    }

    /// Whether objects were compiled closed ([`SchemaOptions::closed_objects`]).
    pub fn closed_objects(&self) -> bool {
        self.closed_objects
    }
}
