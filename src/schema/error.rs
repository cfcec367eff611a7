//! Compile errors of the JSON Schema front-end: one typed kind per way a schema can be refused,
//! each naming the keyword and the JSON pointer of the subschema it sits in.

use std::fmt;

/// Why a schema could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    kind: SchemaErrorKind,
}

/// What went wrong compiling a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// A keyword (or a use of it) that grammask cannot decide exactly.
    Unsupported {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the subschema holding it.
        pointer: String,
        /// Why, when more can be said than the keyword (empty otherwise): the regex construct
        /// a `pattern` uses, the `$ref` cycle.
        reason: String,
    },
    /// The schema is not a valid JSON Schema (a keyword of the wrong type, a bad regex…).
    Invalid {
        /// JSON pointer of the offending value.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// A `$ref` that does not resolve inside the document.
    DanglingRef {
        /// The reference as written.
        reference: String,
        /// JSON pointer of the subschema holding it.
        pointer: String,
    },
    /// No instance validates against the schema (or a subschema that every instance must
    /// satisfy), so an engine could never finish.
    Unsatisfiable {
        /// JSON pointer of the unsatisfiable subschema.
        pointer: String,
        /// Why.
        reason: String,
    },
    /// A size limit of [`crate::schema::SchemaLimits`] was exceeded.
    Limit {
        /// Which limit.
        limit: &'static str,
        /// Its configured value.
        value: usize,
        /// JSON pointer of the subschema that went over it, where one is to blame (the union
        /// over `alternatives`, the `$ref` past `ref_depth`; `""` is the root); `None` for
        /// limits of the whole schema (`nodes`, `compile_time_ms`, `nesting_depth`).
        pointer: Option<String>,
    },
}

impl SchemaError {
    /// A new error of this kind.
    pub fn new(kind: SchemaErrorKind) -> Self {
        SchemaError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &SchemaErrorKind {
        &self.kind
    }
    pub(crate) fn unsupported(keyword: &str, pointer: &str) -> Self {
        Self::unsupported_because(keyword, pointer, "")
    }
    pub(crate) fn unsupported_because(
        keyword: &str,
        pointer: &str,
        reason: impl Into<String>,
    ) -> Self {
        Self::new(SchemaErrorKind::Unsupported {
            keyword: keyword.into(),
            pointer: pointer.into(),
            reason: reason.into(),
        })
    }
    pub(crate) fn invalid(pointer: &str, message: impl Into<String>) -> Self {
        Self::new(SchemaErrorKind::Invalid { pointer: pointer.into(), message: message.into() })
    }
    pub(crate) fn unsat(pointer: &str, reason: impl Into<String>) -> Self {
        Self::new(SchemaErrorKind::Unsatisfiable { pointer: pointer.into(), reason: reason.into() })
    }
    pub(crate) fn limit(limit: &'static str, value: usize) -> Self {
        Self::new(SchemaErrorKind::Limit { limit, value, pointer: None })
    }
    pub(crate) fn limit_at(limit: &'static str, value: usize, pointer: &str) -> Self {
        Self::new(SchemaErrorKind::Limit { limit, value, pointer: Some(pointer.into()) })
    }
}

fn ptr(p: &str) -> &str {
    if p.is_empty() {
        "(root)"
    } else {
        p
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            SchemaErrorKind::Unsupported { keyword, pointer, reason } => {
                write!(f, "unsupported keyword {keyword:?} at {}", ptr(pointer))?;
                if !reason.is_empty() {
                    write!(f, ": {reason}")?;
                }
                Ok(())
            }
            SchemaErrorKind::Invalid { pointer, message } => {
                write!(f, "invalid schema at {}: {message}", ptr(pointer))
            }
            SchemaErrorKind::DanglingRef { reference, pointer } => {
                write!(f, "$ref {reference:?} at {} does not resolve", ptr(pointer))
            }
            SchemaErrorKind::Unsatisfiable { pointer, reason } => {
                write!(f, "schema at {} is unsatisfiable: {reason}", ptr(pointer))
            }
            SchemaErrorKind::Limit { limit: "nesting_depth", value, .. } => {
                write!(f, "schema text nests deeper than {value} levels (the JSON parser's limit)")
            }
            SchemaErrorKind::Limit { limit, value, pointer } => {
                write!(f, "schema exceeds the {limit} limit")?;
                if let Some(p) = pointer {
                    write!(f, " at {}", ptr(p))?;
                }
                write!(f, " ({value}; raise it with SchemaLimits or `--limit {limit}=N`)")
            }
        }
    }
}

impl std::error::Error for SchemaError {}
