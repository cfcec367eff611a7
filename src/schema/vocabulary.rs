//! `$vocabulary` of a custom metaschema (2020-12 Core §8.1.2): which keywords of the schema are
//! assertions at all.
//!
//! A schema whose `$schema` names a pre-loaded document ([`SchemaOptions::documents`]) gets the
//! vocabularies that document's `$vocabulary` lists. Only one consequence is implemented:
//! without the validation vocabulary, the validation keywords (`type`, `enum`, `const`, the
//! numeric, string, array and object bounds, `required`, `dependentRequired`, …) are
//! annotations, so they are removed from a copy of the schema before compiling. A vocabulary
//! we do not know that the metaschema *requires* (value `true`) is
//! [`SchemaErrorKind::Unsupported`](super::SchemaErrorKind) with keyword `$vocabulary`; unknown
//! optional ones (value `false`) are ignored, as the specification allows. Without `$schema`,
//! with a `$schema` we do not have, or with a metaschema without `$vocabulary`, every
//! vocabulary is in use.

use super::error::SchemaError;
use super::SchemaOptions;
use serde_json::Value;

/// The validation vocabulary, 2020-12 and 2019-09.
const VALIDATION: [&str; 2] = [
    "https://json-schema.org/draft/2020-12/vocab/validation",
    "https://json-schema.org/draft/2019-09/vocab/validation",
];

/// Every vocabulary of drafts 2019-09 and 2020-12: requiring one of these is fine (those other
/// than validation are always in use here; `format` follows [`SchemaOptions::formats`]).
const KNOWN: [&str; 14] = [
    "https://json-schema.org/draft/2020-12/vocab/core",
    "https://json-schema.org/draft/2020-12/vocab/applicator",
    "https://json-schema.org/draft/2020-12/vocab/unevaluated",
    "https://json-schema.org/draft/2020-12/vocab/validation",
    "https://json-schema.org/draft/2020-12/vocab/meta-data",
    "https://json-schema.org/draft/2020-12/vocab/format-annotation",
    "https://json-schema.org/draft/2020-12/vocab/format-assertion",
    "https://json-schema.org/draft/2020-12/vocab/content",
    "https://json-schema.org/draft/2019-09/vocab/core",
    "https://json-schema.org/draft/2019-09/vocab/applicator",
    "https://json-schema.org/draft/2019-09/vocab/validation",
    "https://json-schema.org/draft/2019-09/vocab/meta-data",
    "https://json-schema.org/draft/2019-09/vocab/format",
    "https://json-schema.org/draft/2019-09/vocab/content",
];

/// The validation vocabulary's keywords (2020-12 Validation §6).
const VALIDATION_KEYWORDS: [&str; 20] = [
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
];

/// The schema as its metaschema's vocabularies make it: `Some(copy)` without the validation
/// keywords when the validation vocabulary is absent, `None` when the schema is used as is.
///
/// # Errors
/// [`SchemaErrorKind::Unsupported`](super::SchemaErrorKind) (`$vocabulary` at the root) when the
/// metaschema requires a vocabulary we do not know; `Invalid` when its `$vocabulary` is not an
/// object of booleans.
pub(crate) fn apply(schema: &Value, opts: &SchemaOptions) -> Result<Option<Value>, SchemaError> {
    let Some(uri) = schema.get("$schema").and_then(Value::as_str) else {
        return Ok(None);
    };
    let uri = uri.split_once('#').map_or(uri, |x| x.0);
    let Some(vocab) = opts.documents.get(uri).and_then(|m| m.get("$vocabulary")) else {
        return Ok(None);
    };
    let vocab = vocab.as_object().ok_or_else(|| {
        SchemaError::invalid("", format!("$vocabulary of metaschema {uri} must be an object"))
    })?;
    for (v, required) in vocab {
        let required = required.as_bool().ok_or_else(|| {
            SchemaError::invalid(
                "",
                format!("$vocabulary of metaschema {uri}: {v} must be a boolean"),
            )
        })?;
        if required && !KNOWN.contains(&v.as_str()) {
            return Err(SchemaError::unsupported("$vocabulary", ""));
        }
    }
    if VALIDATION.iter().any(|v| vocab.contains_key(*v)) {
        return Ok(None);
    }
    let mut copy = schema.clone();
    strip(&mut copy);
    Ok(Some(copy))
}

/// Remove the validation keywords from `v` and every subschema reached through the
/// applicators and `$defs`/`definitions` (subschemas under unknown keywords keep theirs).
fn strip(v: &mut Value) {
    let Value::Object(m) = v else { return };
    for k in VALIDATION_KEYWORDS {
        m.remove(k);
    }
    for (k, x) in m.iter_mut() {
        match k.as_str() {
            "$defs" | "definitions" | "properties" | "patternProperties" | "dependentSchemas"
            | "dependencies" => {
                if let Value::Object(sub) = x {
                    sub.values_mut().for_each(strip);
                }
            }
            "items" | "prefixItems" | "allOf" | "anyOf" | "oneOf" => match x {
                Value::Array(a) => a.iter_mut().for_each(strip),
                x => strip(x),
            },
            "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "additionalProperties"
            | "additionalItems"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties" => strip(x),
            _ => {}
        }
    }
}
