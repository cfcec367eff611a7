//! `grammask.CompiledConstraint`: a constraint ([`grammask::Constraint`]) compiled once against a
//! `Vocabulary` — free-form JSON, JSON Schema, regex or GBNF — immutable, shared by every
//! `Matcher` made from it and across threads.
//!
//! It keeps its source (kind, text, keyword options) and its vocabulary, so it pickles: the
//! pickle holds the source and the vocabulary's recipe, and unpickling compiles again
//! (`grammask/_pickle.py`). Compilation releases the GIL.

use crate::errors;
use crate::vocab::PyVocabulary;
use grammask::constraint::{Piece, Tag, Tagged, TriggeredTags};
use grammask::json::TopLevel;
use grammask::schema::{FormatMode, PropertyOrder};
use grammask::{
    CfgConfig, CompiledConstraint, Constraint, EngineOptions, JsonConfig, SchemaOptions,
};
use grammask::{ConstraintKind, Whitespace};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

/// A constraint compiled against a vocabulary. Build one with `json_object`, `json_schema`,
/// `regex` or `gbnf`; make a `Matcher` per request from it.
#[pyclass(frozen, name = "CompiledConstraint", module = "grammask._grammask")]
pub(crate) struct PyCompiledConstraint {
    pub(crate) inner: CompiledConstraint,
    pub(crate) vocab: Py<PyVocabulary>,
    /// The pattern, grammar or schema text (`None` for `json_object`).
    source: Option<String>,
    /// The keyword options it was built with (what pickling replays).
    options: Py<PyDict>,
}

/// The options every constructor takes: rollback history and mask cache.
fn engine_options(rollback_history: Option<usize>, mask_cache: Option<usize>) -> EngineOptions {
    let d = EngineOptions::default();
    EngineOptions::default()
        .with_history(rollback_history.unwrap_or(d.history))
        .with_mask_cache(mask_cache.unwrap_or(d.mask_cache))
}

fn whitespace(
    name: Option<&str>,
    max_run: Option<u8>,
    default_run: u8,
    separators: Option<(String, String)>,
) -> PyResult<Whitespace> {
    if let Some((item, key)) = separators {
        return Ok(Whitespace::Separators { item, key });
    }
    match name.unwrap_or("flexible") {
        "flexible" => Ok(Whitespace::Flexible { max_run: max_run.unwrap_or(default_run) }),
        "compact" => Ok(Whitespace::Compact),
        other => Err(PyValueError::new_err(format!(
            "whitespace must be \"flexible\" or \"compact\", not {other:?}"
        ))),
    }
}

/// The non-`None` keyword arguments, for pickling.
fn options_dict<'py>(
    py: Python<'py>,
    items: &[(&str, Option<Bound<'py, PyAny>>)],
) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in items {
        if let Some(v) = v {
            d.set_item(k, v)?;
        }
    }
    Ok(d.unbind())
}

fn opt<'py, T: IntoPyObjectExt<'py>>(py: Python<'py>, v: Option<T>) -> Option<Bound<'py, PyAny>> {
    v.and_then(|v| v.into_bound_py_any(py).ok())
}

impl PyCompiledConstraint {
    fn compile(
        py: Python<'_>,
        vocab: &Bound<'_, PyVocabulary>,
        constraint: Constraint,
        source: Option<String>,
        options: Py<PyDict>,
    ) -> PyResult<Self> {
        let v = vocab.get().inner.clone();
        let inner =
            py.detach(|| constraint.compile(&v)).map_err(|e| errors::compile_error(py, &e))?;
        Ok(PyCompiledConstraint { inner, vocab: vocab.clone().unbind(), source, options })
    }
}

#[pymethods]
impl PyCompiledConstraint {
    /// Free-form JSON (RFC 8259): by default an object (OpenAI's `json_object`), `any_value`
    /// for any JSON value. `whitespace`: `"flexible"` (runs of at most `max_whitespace_run`,
    /// default 32) or `"compact"`; `max_depth` nesting (default 64, at most 128).
    #[staticmethod]
    #[pyo3(signature = (vocab, *, any_value=false, whitespace=None, max_whitespace_run=None,
                        max_depth=None, rollback_history=None, mask_cache=None))]
    #[allow(clippy::too_many_arguments)]
    fn json_object(
        py: Python<'_>,
        vocab: &Bound<'_, PyVocabulary>,
        any_value: bool,
        whitespace: Option<String>,
        max_whitespace_run: Option<u8>,
        max_depth: Option<usize>,
        rollback_history: Option<usize>,
        mask_cache: Option<usize>,
    ) -> PyResult<Self> {
        let options = options_dict(
            py,
            &[
                ("any_value", opt(py, Some(any_value))),
                ("whitespace", opt(py, whitespace.as_deref())),
                ("max_whitespace_run", opt(py, max_whitespace_run)),
                ("max_depth", opt(py, max_depth)),
                ("rollback_history", opt(py, rollback_history)),
                ("mask_cache", opt(py, mask_cache)),
            ],
        )?;
        let ws = self::whitespace(
            whitespace.as_deref(),
            max_whitespace_run,
            JsonConfig::DEFAULT_MAX_WS_RUN,
            None,
        )?;
        let top = if any_value { TopLevel::AnyValue } else { TopLevel::Object };
        let mut config = JsonConfig::default()
            .with_top_level(top)
            .with_whitespace(ws)
            .with_engine(engine_options(rollback_history, mask_cache));
        if let Some(d) = max_depth {
            config = config.with_max_depth(d);
        }
        Self::compile(py, vocab, Constraint::json_with(config), None, options)
    }

    /// Output conforming to a JSON Schema, given as a `str` or a `dict`. Options:
    /// `whitespace` (`"flexible"` with runs of at most `max_whitespace_run`, default 4, or
    /// `"compact"`), `any_whitespace` (XGrammar's flag: `True` is flexible, `False` compact),
    /// `separators` (`(item, key)`, e.g. `(", ", ": ")`, and no other whitespace),
    /// `property_order` (`"any"` or `"schema"`), `lenient` (ignore unsupported keywords),
    /// `formats` (`"assert"` or `"annotate"`), `plain_integers` (`integer` as plain literals
    /// `-?(0|[1-9][0-9]*)` only, as XGrammar and llguidance generate them; default every
    /// spelling of an integer value, `1.0` and `1e3` too), `literal_keys` (declared names
    /// spelled as written in objects that take no other keys; default any JSON spelling),
    /// `literal_values` (string values with finitely many choices left — `enum`, `const` —
    /// spelled as written; default any JSON spelling).
    ///
    /// `profile`: `"exact"` (default: every document the schema accepts, in every spelling)
    /// or `"generation"` (the subset a model finishes, every output still valid: objects that
    /// declare properties and say nothing of others closed, numbers as plain decimals of at
    /// most 15 significant digits, no gratuitous escapes, `", "`/`": "` separators, and the
    /// three spellings above). `closed_objects` overrides the profile's object closing (vLLM's
    /// `disable_additional_properties`); the whitespace arguments override its separators.
    #[staticmethod]
    #[pyo3(signature = (vocab, schema, *, whitespace=None, max_whitespace_run=None,
                        any_whitespace=None, separators=None, property_order=None, lenient=false,
                        formats=None, rollback_history=None, mask_cache=None,
                        plain_integers=false, literal_keys=false, literal_values=false,
                        profile=None, closed_objects=None))]
    #[allow(clippy::too_many_arguments)]
    fn json_schema(
        py: Python<'_>,
        vocab: &Bound<'_, PyVocabulary>,
        schema: &Bound<'_, PyAny>,
        whitespace: Option<String>,
        max_whitespace_run: Option<u8>,
        any_whitespace: Option<bool>,
        separators: Option<(String, String)>,
        property_order: Option<String>,
        lenient: bool,
        formats: Option<String>,
        rollback_history: Option<usize>,
        mask_cache: Option<usize>,
        plain_integers: bool,
        literal_keys: bool,
        literal_values: bool,
        profile: Option<String>,
        closed_objects: Option<bool>,
    ) -> PyResult<Self> {
        let base = match profile.as_deref().unwrap_or("exact") {
            "exact" => SchemaOptions::default(),
            "generation" => SchemaOptions::generation(),
            p => {
                return Err(PyValueError::new_err(format!(
                    "profile must be \"exact\" or \"generation\", not {p:?}"
                )))
            }
        };
        let text: String = if let Ok(s) = schema.cast::<PyString>() {
            s.to_str()?.to_owned()
        } else if schema.is_instance_of::<PyDict>()
            || schema.is_instance_of::<pyo3::types::PyBool>()
        {
            py.import("json")?.call_method1("dumps", (schema,))?.extract()?
        } else {
            return Err(PyTypeError::new_err("schema must be a str (JSON text) or a dict"));
        };
        // The crate's own parser: exact numbers, and the depth limit named as such.
        let value = grammask::schema::parse_schema_text(&text).map_err(|e| {
            errors::error(
                py,
                "CompileError",
                format!("json schema: {e}"),
                &[("kind", opt(py, Some("json_schema")).map(Bound::unbind))],
            )
        })?;
        let options = options_dict(
            py,
            &[
                ("whitespace", opt(py, whitespace.as_deref())),
                ("max_whitespace_run", opt(py, max_whitespace_run)),
                ("any_whitespace", opt(py, any_whitespace)),
                ("separators", opt(py, separators.clone())),
                ("property_order", opt(py, property_order.as_deref())),
                ("lenient", opt(py, Some(lenient))),
                ("formats", opt(py, formats.as_deref())),
                ("rollback_history", opt(py, rollback_history)),
                ("mask_cache", opt(py, mask_cache)),
                ("plain_integers", opt(py, Some(plain_integers))),
                ("literal_keys", opt(py, Some(literal_keys))),
                ("literal_values", opt(py, Some(literal_values))),
                ("profile", opt(py, profile.as_deref())),
                ("closed_objects", opt(py, closed_objects)),
            ],
        )?;
        let ws_name = match (whitespace.as_deref(), any_whitespace) {
            (Some(w), _) => Some(w),
            (None, Some(true)) => Some("flexible"),
            (None, Some(false)) => Some("compact"),
            (None, None) => None,
        };
        let ws_given = ws_name.is_some() || separators.is_some() || max_whitespace_run.is_some();
        let ws = self::whitespace(
            ws_name,
            max_whitespace_run,
            SchemaOptions::DEFAULT_MAX_WS_RUN,
            separators,
        )?;
        let order = match property_order.as_deref().unwrap_or("any") {
            "any" => PropertyOrder::Any,
            "schema" => PropertyOrder::Schema,
            o => {
                return Err(PyValueError::new_err(format!(
                    "property_order must be \"any\" or \"schema\", not {o:?}"
                )))
            }
        };
        let formats = match formats.as_deref().unwrap_or("assert") {
            "assert" => FormatMode::Assert,
            "annotate" => FormatMode::Annotate,
            f => {
                return Err(PyValueError::new_err(format!(
                    "formats must be \"assert\" or \"annotate\", not {f:?}"
                )))
            }
        };
        let ws = if ws_given { ws } else { base.whitespace.clone() };
        let closed = closed_objects.unwrap_or(base.closed_objects);
        let (pi, lk, lv) = (base.plain_integers, base.literal_keys, base.literal_values);
        let opts = base
            .with_plain_integers(pi || plain_integers)
            .with_literal_keys(lk || literal_keys)
            .with_literal_values(lv || literal_values)
            .with_whitespace(ws)
            .with_property_order(order)
            .with_lenient(lenient)
            .with_formats(formats)
            .with_engine(engine_options(rollback_history, mask_cache))
            .with_closed_objects(closed);
        Self::compile(py, vocab, Constraint::json_schema_with(&value, opts), Some(text), options)
    }

    /// Structural tags (XGrammar's `Grammar.from_structural_tag`): free text in which
    /// completing one of `triggers` commits the output to a tag whose `begin` starts with it;
    /// the tag's content must validate against its JSON Schema, then its `end` follows, then
    /// free text again. `spec` is JSON text: `{"tags": [{"begin": str, "schema": object |
    /// bool, "end": str}, ...], "triggers": [str, ...]}` — `grammask.structural_tag` builds it
    /// from XGrammar-style items. `at_least_one`: the output starts with a tag;
    /// `stop_after_first`: nothing follows the first tag; `max_tags`: at most this many.
    /// Exact at every edge a token spans (`docs/tagged.md`).
    #[staticmethod]
    #[pyo3(signature = (vocab, spec, *, at_least_one=false, stop_after_first=false,
                        max_tags=None, rollback_history=None, mask_cache=None))]
    #[allow(clippy::too_many_arguments)]
    fn structural_tag(
        py: Python<'_>,
        vocab: &Bound<'_, PyVocabulary>,
        spec: String,
        at_least_one: bool,
        stop_after_first: bool,
        max_tags: Option<usize>,
        rollback_history: Option<usize>,
        mask_cache: Option<usize>,
    ) -> PyResult<Self> {
        let bad = |m: String| PyValueError::new_err(format!("structural tag spec: {m}"));
        let v: serde_json::Value = serde_json::from_str(&spec).map_err(|e| bad(e.to_string()))?;
        let triggers = v["triggers"]
            .as_array()
            .ok_or_else(|| bad("`triggers` must be a list of strings".into()))?
            .iter()
            .map(|t| {
                t.as_str().map(Piece::text).ok_or_else(|| bad("a trigger is not a string".into()))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let engine = engine_options(rollback_history, mask_cache);
        let mut tags = Vec::new();
        let items =
            v["tags"].as_array().ok_or_else(|| bad("`tags` must be a list of objects".into()))?;
        for (i, t) in items.iter().enumerate() {
            let text = |k: &str| {
                t[k].as_str().ok_or_else(|| bad(format!("tags[{i}].{k} must be a string")))
            };
            let (begin, end) = (text("begin")?, text("end")?);
            let options = SchemaOptions::default().with_engine(engine.clone());
            let content = Constraint::json_schema_with(&t["schema"], options);
            tags.push(Tag::new(
                begin,
                vec![Piece::text(begin)],
                Tagged::content(content),
                vec![Piece::text(end)],
            ));
        }
        let tt = TriggeredTags::new(triggers, tags)
            .with_at_least_one(at_least_one)
            .with_stop_after_first(stop_after_first)
            .with_max_tags(max_tags);
        let constraint = Constraint::tagged(Tagged::tags(tt)).with_engine_options(engine);
        let options = options_dict(
            py,
            &[
                ("at_least_one", opt(py, Some(at_least_one))),
                ("stop_after_first", opt(py, Some(stop_after_first))),
                ("max_tags", opt(py, max_tags)),
                ("rollback_history", opt(py, rollback_history)),
                ("mask_cache", opt(py, mask_cache)),
            ],
        )?;
        Self::compile(py, vocab, constraint, Some(spec), options)
    }

    /// Output matching `pattern` in full (Rust `regex-syntax` dialect, anchored at both ends).
    #[staticmethod]
    #[pyo3(signature = (vocab, pattern, *, rollback_history=None, mask_cache=None))]
    fn regex(
        py: Python<'_>,
        vocab: &Bound<'_, PyVocabulary>,
        pattern: String,
        rollback_history: Option<usize>,
        mask_cache: Option<usize>,
    ) -> PyResult<Self> {
        let options = options_dict(
            py,
            &[("rollback_history", opt(py, rollback_history)), ("mask_cache", opt(py, mask_cache))],
        )?;
        let c = Constraint::regex(&pattern)
            .with_engine_options(engine_options(rollback_history, mask_cache));
        Self::compile(py, vocab, c, Some(pattern), options)
    }

    /// Output in the language of a GBNF grammar (llama.cpp's format, start rule `root`).
    /// `position_masks` caps the masks kept per position for every matcher of it (default
    /// 512; 0: none); `warm_positions` computes up to that many positions' masks now, so that
    /// a first request finds them made (default 128; 0: none), for at most `warm_ms`
    /// milliseconds (default 50; see `docs/grammars.md`).
    #[staticmethod]
    #[pyo3(signature = (
        vocab, grammar, *, rollback_history=None, mask_cache=None, position_masks=None,
        warm_positions=None, warm_ms=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn gbnf(
        py: Python<'_>,
        vocab: &Bound<'_, PyVocabulary>,
        grammar: String,
        rollback_history: Option<usize>,
        mask_cache: Option<usize>,
        position_masks: Option<usize>,
        warm_positions: Option<usize>,
        warm_ms: Option<u64>,
    ) -> PyResult<Self> {
        let options = options_dict(
            py,
            &[
                ("rollback_history", opt(py, rollback_history)),
                ("mask_cache", opt(py, mask_cache)),
                ("position_masks", opt(py, position_masks)),
                ("warm_positions", opt(py, warm_positions)),
                ("warm_ms", opt(py, warm_ms)),
            ],
        )?;
        let mut config = CfgConfig::default();
        if let Some(n) = position_masks {
            config.position_masks = n;
        }
        if let Some(n) = warm_positions {
            config.warm_positions = n;
        }
        if let Some(ms) = warm_ms {
            config.warm_time = std::time::Duration::from_millis(ms);
        }
        let c = Constraint::gbnf_with(&grammar, config)
            .with_engine_options(engine_options(rollback_history, mask_cache));
        Self::compile(py, vocab, c, Some(grammar), options)
    }

    /// `"json"`, `"json_schema"`, `"regex"`, `"gbnf"` or `"tagged"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    /// The vocabulary it was compiled against.
    #[getter]
    fn vocab(&self, py: Python<'_>) -> Py<PyVocabulary> {
        self.vocab.clone_ref(py)
    }

    /// The logits width of its vocabulary.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab().n_vocab()
    }

    /// The pattern, grammar or schema text (`None` for `json_object`).
    #[getter]
    fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let f = py.import("grammask._pickle")?.getattr("constraint_from_source")?;
        let ctor = match self.inner.kind() {
            ConstraintKind::Json => "json_object",
            ConstraintKind::JsonSchema => "json_schema",
            ConstraintKind::Regex => "regex",
            ConstraintKind::Tagged => "structural_tag",
            _ => "gbnf",
        };
        let args = PyTuple::new(
            py,
            [
                ctor.into_pyobject(py)?.into_any(),
                self.vocab.bind(py).clone().into_any(),
                self.source.as_deref().into_pyobject(py)?.into_any(),
                self.options.bind(py).clone().into_any(),
            ],
        )?;
        PyTuple::new(py, [f, args.into_any()])
    }

    fn __repr__(&self) -> String {
        format!("CompiledConstraint(kind={:?}, vocab_size={})", self.kind(), self.vocab_size())
    }
}
