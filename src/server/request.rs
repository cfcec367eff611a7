//! Request bodies → typed requests: the OpenAI chat and completions parameters and the
//! structured-output extensions (vLLM's `structured_outputs` and its older `guided_*` names),
//! each checked for type and range with a 400 naming the parameter. Pure functions of the JSON
//! body: no model, no I/O (unit-tested below).

use super::error::ApiError;
use crate::constraint::tools::{parse_tools, Tool, ToolChoice};
use crate::sampler::LogprobsMode;
use crate::schema::Profile;
use serde_json::Value;

/// The constraint a request asks for.
#[derive(Clone, Debug)]
pub enum Spec {
    /// Any JSON object (`response_format: json_object`).
    Json,
    /// A JSON Schema (`json_schema`, `structured_outputs.json`, `guided_json`).
    Schema(Value),
    /// A regex over the whole output (`structured_outputs.regex`, `guided_regex`).
    Regex(String),
    /// A GBNF grammar (`structured_outputs.grammar`, `guided_grammar`).
    Grammar(String),
    /// One of these strings exactly (`structured_outputs.choice`, `guided_choice`).
    Choice(Vec<String>),
    /// Text and tool calls in the model's format (`tools` + `tool_choice`).
    Tools {
        /// The functions.
        tools: Vec<Tool>,
        /// The choice.
        choice: ToolChoice,
    },
}

impl PartialEq for Spec {
    /// Equal when they compile to the same constraint (same cache key).
    fn eq(&self, other: &Spec) -> bool {
        self.cache_key() == other.cache_key()
    }
}

impl Spec {
    /// The compile-cache key: the kind and the canonical JSON of the content.
    pub fn cache_key(&self) -> String {
        match self {
            Spec::Json => "json".into(),
            Spec::Schema(v) => format!("schema:{v}"),
            Spec::Regex(r) => format!("regex:{r}"),
            Spec::Grammar(g) => format!("gbnf:{g}"),
            Spec::Choice(c) => format!("choice:{}", Value::from(c.clone())),
            Spec::Tools { tools, choice } => {
                let t: Vec<Value> =
                    tools.iter().map(|t| serde_json::json!([t.name, t.parameters])).collect();
                format!("tools:{choice:?}:{}", Value::from(t))
            }
        }
    }
}

/// One chat message, as the template gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text (content parts joined; an assistant's tool calls written as JSON after it).
    pub content: String,
}

/// The sampling and output parameters both endpoints share.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `model`; `None` when absent or empty (the served model).
    pub model: Option<String>,
    /// `max_tokens` / `max_completion_tokens` (`None`: the server's default).
    pub max_tokens: Option<usize>,
    /// Temperature (default 1, as OpenAI's).
    pub temperature: f32,
    /// Nucleus mass (default 1).
    pub top_p: f32,
    /// Seed (default: none, a fresh one per request).
    pub seed: Option<u64>,
    /// Stop strings (at most 4).
    pub stop: Vec<String>,
    /// Logprobs: `None` off, `Some(k)` on with `k` alternatives.
    pub logprobs: Option<usize>,
    /// `logprobs_mode` (vLLM's values, an extension): `None` is the server's default.
    pub logprobs_mode: Option<LogprobsMode>,
    /// SSE streaming.
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// Presence penalty.
    pub presence_penalty: f32,
    /// Frequency penalty.
    pub frequency_penalty: f32,
    /// How the request's JSON Schemas (response format, tools' arguments) are compiled.
    pub schema: SchemaKnobs,
}

/// A request's say in how its JSON Schemas are compiled, on top of the server's profile
/// (`--profile`, default [`Profile::Generation`]): vLLM's `structured_outputs` knobs and
/// grammask's own `structured_outputs.profile`. Absent knobs leave the profile as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SchemaKnobs {
    /// `structured_outputs.profile`: `"exact"` (the schema's whole language) or
    /// `"generation"`.
    pub profile: Option<Profile>,
    /// vLLM's `structured_outputs.disable_additional_properties`: `true` closes objects that
    /// say nothing of undeclared keys ([`crate::SchemaOptions::closed_objects`]), `false`
    /// leaves them open.
    pub disable_additional_properties: Option<bool>,
    /// vLLM's `structured_outputs.disable_any_whitespace`: `true` writes no whitespace at all
    /// ([`crate::Whitespace::Compact`]).
    pub disable_any_whitespace: Option<bool>,
}

impl SchemaKnobs {
    /// Read the knobs from `structured_outputs` (absent, null or not an object: none; the
    /// constraint keys are [`extensions`]' business).
    fn parse(body: &Value) -> Result<SchemaKnobs, ApiError> {
        let mut k = SchemaKnobs::default();
        let Some(so) = body.get("structured_outputs").and_then(Value::as_object) else {
            return Ok(k);
        };
        let flag = |key: &str| -> Result<Option<bool>, ApiError> {
            let param = match key {
                "disable_additional_properties" => {
                    "structured_outputs.disable_additional_properties"
                }
                _ => "structured_outputs.disable_any_whitespace",
            };
            match so.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Bool(b)) => Ok(Some(*b)),
                Some(_) => Err(bad(format!("{param} must be a boolean"), param)),
            }
        };
        k.disable_additional_properties = flag("disable_additional_properties")?;
        k.disable_any_whitespace = flag("disable_any_whitespace")?;
        k.profile = match so.get("profile") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => Some(p.parse().map_err(|e: String| {
                bad(format!("structured_outputs.profile: {e}"), "structured_outputs.profile")
            })?),
            Some(_) => {
                return Err(bad(
                    "structured_outputs.profile must be a string (exact, generation)",
                    "structured_outputs.profile",
                ))
            }
        };
        Ok(k)
    }
}

/// A parsed `POST /v1/chat/completions`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Message>,
    /// The constraint and the parameter it came from.
    pub spec: Option<(Spec, &'static str)>,
    /// Everything else.
    pub params: Params,
}

/// A parsed `POST /v1/completions`.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionRequest {
    /// The prompt text (used as is, no chat template).
    pub prompt: String,
    /// The constraint and the parameter it came from.
    pub spec: Option<(Spec, &'static str)>,
    /// Everything else.
    pub params: Params,
}

fn bad(message: impl Into<String>, param: &str) -> ApiError {
    ApiError::bad_request(message, Some(param))
}

fn opt_f32(body: &Value, key: &str, lo: f64, hi: f64, default: f32) -> Result<f32, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => {
            let x = v.as_f64().ok_or_else(|| bad(format!("{key} must be a number"), key))?;
            if !(lo..=hi).contains(&x) {
                return Err(bad(format!("{key} must be in [{lo}, {hi}], got {x}"), key));
            }
            Ok(x as f32)
        }
    }
}

fn opt_uint(body: &Value, key: &str) -> Result<Option<u64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(format!("{key} must be a non-negative integer"), key)),
    }
}

fn opt_bool(body: &Value, key: &str) -> Result<bool, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad(format!("{key} must be a boolean"), key)),
    }
}

fn params(body: &Value, chat: bool) -> Result<Params, ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object", None));
    }
    if let Some(n) = opt_uint(body, "n")? {
        if n != 1 {
            return Err(bad(format!("n = {n}: only n = 1 is supported"), "n")
                .with_code("unsupported_value"));
        }
    }
    let mut max_tokens = opt_uint(body, "max_tokens")?;
    if chat {
        if let Some(m) = opt_uint(body, "max_completion_tokens")? {
            max_tokens = Some(m);
        }
    }
    if max_tokens == Some(0) {
        return Err(bad("max_tokens must be at least 1", "max_tokens"));
    }
    let stop = match body.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("stop must be a string or a list of strings", "stop"))?,
        Some(_) => return Err(bad("stop must be a string or a list of strings", "stop")),
    };
    if stop.len() > 4 || stop.iter().any(String::is_empty) {
        return Err(bad("stop: at most 4 non-empty strings", "stop"));
    }
    let logprobs = if chat {
        let on = opt_bool(body, "logprobs")?;
        let k = opt_uint(body, "top_logprobs")?.unwrap_or(0);
        if k > 20 {
            return Err(bad("top_logprobs must be at most 20", "top_logprobs"));
        }
        if k > 0 && !on {
            return Err(bad("top_logprobs needs logprobs: true", "top_logprobs"));
        }
        on.then_some(k as usize)
    } else {
        match opt_uint(body, "logprobs")? {
            Some(k) if k > 5 => return Err(bad("logprobs must be at most 5", "logprobs")),
            k => k.map(|k| k as usize),
        }
    };
    let include_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(o @ Value::Object(_)) => opt_bool(o, "include_usage")?,
        Some(_) => return Err(bad("stream_options must be an object", "stream_options")),
    };
    let model = match body.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m.clone()).filter(|m| !m.is_empty()),
        Some(_) => return Err(bad("model must be a string", "model")),
    };
    let logprobs_mode = match body.get("logprobs_mode") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_str().and_then(LogprobsMode::parse).ok_or_else(|| {
            bad("logprobs_mode must be \"raw_logprobs\" or \"processed_logprobs\"", "logprobs_mode")
        })?),
    };
    Ok(Params {
        model,
        logprobs_mode,
        max_tokens: max_tokens.map(|m| m as usize),
        temperature: opt_f32(body, "temperature", 0.0, 2.0, 1.0)?,
        top_p: opt_f32(body, "top_p", 0.0, 1.0, 1.0)?,
        seed: match body.get("seed") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .map(|s| s as u64)
                    .or_else(|| v.as_u64())
                    .ok_or_else(|| bad("seed must be an integer", "seed"))?,
            ),
        },
        stop,
        logprobs,
        stream: opt_bool(body, "stream")?,
        include_usage,
        presence_penalty: opt_f32(body, "presence_penalty", -2.0, 2.0, 0.0)?,
        frequency_penalty: opt_f32(body, "frequency_penalty", -2.0, 2.0, 0.0)?,
        schema: SchemaKnobs::parse(body)?,
    })
}

fn string_list(v: &Value, param: &str) -> Result<Vec<String>, ApiError> {
    let list = v
        .as_array()
        .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>())
        .ok_or_else(|| bad(format!("{param} must be a list of strings"), param))?;
    if list.is_empty() {
        return Err(bad(format!("{param} must not be empty"), param));
    }
    Ok(list)
}

fn schema_value(v: &Value, param: &'static str) -> Result<Value, ApiError> {
    match v {
        Value::Object(_) | Value::Bool(_) => Ok(v.clone()),
        // vLLM accepts the schema as a JSON string too.
        Value::String(s) => crate::schema::parse_schema_text(s)
            .map_err(|e| bad(format!("{param}: not a JSON Schema: {e}"), param)),
        _ => Err(bad(format!("{param} must be a JSON Schema (object)"), param)),
    }
}

/// The structured-output extensions: `structured_outputs: {json, regex, grammar, choice,
/// json_object}` (vLLM ≥ 0.10) and the older top-level `guided_json`, `guided_regex`,
/// `guided_grammar`, `guided_choice`.
fn extensions(body: &Value) -> Result<Vec<(Spec, &'static str)>, ApiError> {
    let mut found = Vec::new();
    match body.get("structured_outputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(so)) => {
            for (key, v) in so {
                if v.is_null() {
                    continue;
                }
                let spec = match key.as_str() {
                    "json" => (Spec::Schema(schema_value(v, "structured_outputs.json")?), "structured_outputs.json"),
                    "regex" => (
                        Spec::Regex(v.as_str().map(str::to_owned).ok_or_else(|| {
                            bad("structured_outputs.regex must be a string", "structured_outputs.regex")
                        })?),
                        "structured_outputs.regex",
                    ),
                    "grammar" => (
                        Spec::Grammar(v.as_str().map(str::to_owned).ok_or_else(|| {
                            bad("structured_outputs.grammar must be a string", "structured_outputs.grammar")
                        })?),
                        "structured_outputs.grammar",
                    ),
                    "choice" => (
                        Spec::Choice(string_list(v, "structured_outputs.choice")?),
                        "structured_outputs.choice",
                    ),
                    "json_object" => {
                        if v != &Value::Bool(true) {
                            continue;
                        }
                        (Spec::Json, "structured_outputs.json_object")
                    }
                    // How schemas compile ([`SchemaKnobs`], read by `params`).
                    "disable_any_whitespace" | "disable_additional_properties" | "profile" => {
                        continue
                    }
                    // vLLM's options that change nothing here.
                    "disable_fallback" | "whitespace_pattern" | "backend" => continue,
                    other => {
                        return Err(bad(
                            format!("structured_outputs.{other}: unknown (json, regex, grammar, choice, json_object)"),
                            "structured_outputs",
                        ))
                    }
                };
                found.push(spec);
            }
        }
        Some(_) => return Err(bad("structured_outputs must be an object", "structured_outputs")),
    }
    for key in ["guided_json", "guided_regex", "guided_grammar", "guided_choice"] {
        let Some(v) = body.get(key).filter(|v| !v.is_null()) else { continue };
        let spec = match key {
            "guided_json" => (Spec::Schema(schema_value(v, "guided_json")?), "guided_json"),
            "guided_regex" => (
                Spec::Regex(
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad("guided_regex must be a string", key))?,
                ),
                "guided_regex",
            ),
            "guided_grammar" => (
                Spec::Grammar(
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad("guided_grammar must be a string", key))?,
                ),
                "guided_grammar",
            ),
            _ => (Spec::Choice(string_list(v, key)?), "guided_choice"),
        };
        found.push(spec);
    }
    Ok(found)
}

fn response_format(body: &Value) -> Result<Option<(Spec, &'static str)>, ApiError> {
    let p = "response_format";
    let Some(rf) = body.get(p).filter(|v| !v.is_null()) else { return Ok(None) };
    let ty = rf
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("response_format.type must be a string", p))?;
    match ty {
        "text" => Ok(None),
        // instructor's JSON_SCHEMA mode (and llama-server, Together, Fireworks) put a schema
        // here: it is honoured exactly as a `json_schema` one.
        "json_object" => match rf.get("schema").filter(|v| !v.is_null()) {
            Some(schema) => Ok(Some((Spec::Schema(schema_value(schema, p)?), p))),
            None => Ok(Some((Spec::Json, p))),
        },
        "json_schema" => {
            let js = rf
                .get("json_schema")
                .filter(|v| v.is_object())
                .ok_or_else(|| bad("response_format.json_schema must be an object", p))?;
            if let Some(s) = js.get("strict") {
                if !s.is_boolean() && !s.is_null() {
                    return Err(bad("response_format.json_schema.strict must be a boolean", p));
                }
            }
            let schema = js
                .get("schema")
                .ok_or_else(|| bad("response_format.json_schema.schema is required", p))?;
            Ok(Some((Spec::Schema(schema_value(schema, p)?), p)))
        }
        other => Err(bad(
            format!("response_format.type {other:?}: expected text, json_object or json_schema"),
            p,
        )
        .with_code("unsupported_value")),
    }
}

fn tool_spec(body: &Value) -> Result<Option<(Spec, &'static str)>, ApiError> {
    let Some(tools) = body.get("tools").filter(|v| !v.is_null()) else {
        return match body.get("tool_choice") {
            Some(Value::String(s)) if s == "none" || s == "auto" => Ok(None),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err(bad("tool_choice needs tools", "tool_choice")),
        };
    };
    let list = parse_tools(tools).map_err(|e| bad(format!("tools: {e}"), "tools"))?;
    if list.is_empty() {
        return Err(bad("tools must not be empty", "tools"));
    }
    let choice = match body.get("tool_choice") {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "auto" | "required" | "none" => ToolChoice::parse(s),
            other => {
                return Err(bad(
                    format!("tool_choice {other:?}: expected none, auto, required or an object"),
                    "tool_choice",
                ))
            }
        },
        Some(o) => {
            let name = o.pointer("/function/name").and_then(Value::as_str).ok_or_else(|| {
                bad(
                    "tool_choice must be {\"type\": \"function\", \"function\": {\"name\": …}}",
                    "tool_choice",
                )
            })?;
            if !list.iter().any(|t| t.name == name) {
                return Err(bad(
                    format!("tool_choice names {name:?}, not in tools"),
                    "tool_choice",
                ));
            }
            ToolChoice::Named(name.to_owned())
        }
    };
    if choice == ToolChoice::None {
        return Ok(None);
    }
    Ok(Some((Spec::Tools { tools: list, choice }, "tools")))
}

fn one_spec(mut all: Vec<(Spec, &'static str)>) -> Result<Option<(Spec, &'static str)>, ApiError> {
    if all.len() > 1 {
        let names: Vec<&str> = all.iter().map(|(_, p)| *p).collect();
        return Err(bad(
            format!("at most one constraint per request, got {}", names.join(", ")),
            names[1],
        ));
    }
    Ok(all.pop())
}

fn content_text(v: &Value, i: usize) -> Result<String, ApiError> {
    let p = "messages";
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push_str(t),
                    _ => {
                        return Err(bad(
                            format!("messages[{i}].content: only text parts are supported"),
                            p,
                        ))
                    }
                }
            }
            Ok(out)
        }
        _ => Err(bad(format!("messages[{i}].content must be a string or a list of parts"), p)),
    }
}

/// Parse a chat completions body.
///
/// # Errors
/// A 400 [`ApiError`] naming the parameter: missing or mistyped `messages`, an unknown role,
/// `n` > 1, an unknown `response_format.type`, two constraints at once, values out of range.
pub fn parse_chat(body: &Value) -> Result<ChatRequest, ApiError> {
    let params = params(body, true)?;
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("messages must be a list", "messages"))?;
    if msgs.is_empty() {
        return Err(bad("messages must not be empty", "messages"));
    }
    let mut messages = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("messages[{i}].role must be a string"), "messages"))?;
        let role = match role {
            "developer" => "system",
            "system" | "user" | "assistant" | "tool" => role,
            other => {
                return Err(bad(
                    format!("messages[{i}].role {other:?} is not supported"),
                    "messages",
                ))
            }
        };
        let mut content = content_text(m.get("content").unwrap_or(&Value::Null), i)?;
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for c in calls {
                let name = c.pointer("/function/name").and_then(Value::as_str).unwrap_or("");
                let args = c.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("{}");
                content.push_str(&format!("\n{{\"name\": \"{name}\", \"parameters\": {args}}}"));
            }
        }
        messages.push(Message { role: role.into(), content });
    }
    let mut specs = extensions(body)?;
    specs.extend(response_format(body)?);
    specs.extend(tool_spec(body)?);
    Ok(ChatRequest { messages, spec: one_spec(specs)?, params })
}

/// Parse a completions body (`prompt` a string, or a list of one string).
///
/// # Errors
/// As [`parse_chat`], and a `prompt` that is not one string.
pub fn parse_completion(body: &Value) -> Result<CompletionRequest, ApiError> {
    let params = params(body, false)?;
    let prompt = match body.get("prompt") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            a[0].as_str().unwrap_or_default().to_owned()
        }
        _ => return Err(bad("prompt must be a string (one prompt per request)", "prompt")),
    };
    let mut specs = extensions(body)?;
    specs.extend(response_format(body)?);
    Ok(CompletionRequest { prompt, spec: one_spec(specs)?, params })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(extra: Value) -> Result<ChatRequest, ApiError> {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        parse_chat(&body)
    }

    /// vLLM's schema knobs and `structured_outputs.profile` are read, typed, and none of them
    /// is taken for a constraint.
    #[test]
    fn schema_knobs_are_parsed_beside_the_constraint() {
        let r = chat(json!({"structured_outputs": {
            "json": {"type": "object"},
            "disable_additional_properties": false,
            "disable_any_whitespace": true,
            "profile": "exact"
        }}))
        .unwrap();
        assert!(matches!(r.spec, Some((Spec::Schema(_), "structured_outputs.json"))));
        assert_eq!(
            r.params.schema,
            SchemaKnobs {
                profile: Some(Profile::Exact),
                disable_additional_properties: Some(false),
                disable_any_whitespace: Some(true),
            }
        );
        assert_eq!(chat(json!({})).unwrap().params.schema, SchemaKnobs::default());
        let e = chat(json!({"structured_outputs": {"profile": "loose"}})).unwrap_err();
        assert!(e.to_string().contains("structured_outputs.profile"), "{e}");
        let e = chat(json!({"structured_outputs": {"disable_any_whitespace": "yes"}})).unwrap_err();
        assert!(e.to_string().contains("must be a boolean"), "{e}");
    }

    #[test]
    fn defaults_follow_openai() {
        let r = chat(json!({})).unwrap();
        assert_eq!(r.params.temperature, 1.0);
        assert_eq!(r.params.top_p, 1.0);
        assert_eq!(r.params.max_tokens, None);
        assert!(r.spec.is_none() && !r.params.stream);
        assert_eq!(r.messages, vec![Message { role: "user".into(), content: "hi".into() }]);
    }

    #[test]
    fn response_formats_map_to_constraints() {
        let r = chat(json!({"response_format": {"type": "json_object"}})).unwrap();
        assert_eq!(r.spec, Some((Spec::Json, "response_format")));
        let schema = json!({"type": "object"});
        let r = chat(json!({"response_format": {"type": "json_schema",
            "json_schema": {"name": "x", "schema": schema, "strict": true}}}))
        .unwrap();
        assert_eq!(r.spec, Some((Spec::Schema(schema.clone()), "response_format")));
        assert!(chat(json!({"response_format": {"type": "text"}})).unwrap().spec.is_none());
        // json_object with a schema (instructor's JSON_SCHEMA mode): the schema is the spec.
        let r =
            chat(json!({"response_format": {"type": "json_object", "schema": schema}})).unwrap();
        assert_eq!(r.spec, Some((Spec::Schema(schema), "response_format")));
        let e = chat(json!({"response_format": {"type": "json_object", "schema": 3}})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("response_format"));
        let e = chat(json!({"response_format": {"type": "yaml"}})).unwrap_err();
        assert_eq!((e.status.as_u16(), e.param.as_deref()), (400, Some("response_format")));
    }

    #[test]
    fn extensions_use_vllm_names() {
        let r = chat(json!({"structured_outputs": {"regex": "a+"}})).unwrap();
        assert_eq!(r.spec, Some((Spec::Regex("a+".into()), "structured_outputs.regex")));
        let r = chat(json!({"guided_choice": ["yes", "no"]})).unwrap();
        assert_eq!(r.spec, Some((Spec::Choice(vec!["yes".into(), "no".into()]), "guided_choice")));
        let r = chat(json!({"structured_outputs": {"grammar": "root ::= \"a\""}})).unwrap();
        assert!(matches!(r.spec, Some((Spec::Grammar(_), _))));
        let r = chat(json!({"guided_json": "{\"type\": \"integer\"}"})).unwrap();
        assert_eq!(r.spec, Some((Spec::Schema(json!({"type": "integer"})), "guided_json")));
        let e = chat(json!({"guided_regex": "a", "response_format": {"type": "json_object"}}))
            .unwrap_err();
        assert!(e.message.contains("at most one constraint"), "{}", e.message);
        assert!(chat(json!({"structured_outputs": {"xml": "<a/>"}})).is_err());
    }

    #[test]
    fn bad_values_are_400s_naming_the_parameter() {
        for (extra, param) in [
            (json!({"n": 2}), "n"),
            (json!({"temperature": "hot"}), "temperature"),
            (json!({"temperature": 3.5}), "temperature"),
            (json!({"max_tokens": -1}), "max_tokens"),
            (json!({"stop": [1, 2]}), "stop"),
            (json!({"stop": ["a", "b", "c", "d", "e"]}), "stop"),
            (json!({"top_logprobs": 3}), "top_logprobs"),
            (json!({"stream": "yes"}), "stream"),
            (json!({"messages": "hi"}), "messages"),
            (json!({"messages": [{"role": "wizard", "content": "x"}]}), "messages"),
            (json!({"tool_choice": "required"}), "tool_choice"),
            (json!({"model": 7}), "model"),
            (json!({"logprobs_mode": "raw_logits"}), "logprobs_mode"),
        ] {
            let e = chat(extra.clone()).unwrap_err();
            assert_eq!(e.status.as_u16(), 400, "{extra}");
            assert_eq!(e.param.as_deref(), Some(param), "{extra}: {}", e.message);
        }
        assert!(parse_chat(&json!([1, 2])).is_err());
    }

    #[test]
    fn tools_and_tool_choice() {
        let tools = json!([{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        let r = chat(json!({"tools": tools, "tool_choice": "required"})).unwrap();
        let Some((Spec::Tools { tools: t, choice }, "tools")) = r.spec else { panic!() };
        assert_eq!((t.len(), choice), (1, ToolChoice::Required));
        let named = json!({"type": "function", "function": {"name": "get_weather"}});
        let r = chat(json!({"tools": tools, "tool_choice": named})).unwrap();
        assert!(matches!(r.spec, Some((Spec::Tools { choice: ToolChoice::Named(_), .. }, _))));
        assert!(chat(json!({"tools": tools, "tool_choice": "none"})).unwrap().spec.is_none());
        let other = json!({"type": "function", "function": {"name": "nope"}});
        assert!(chat(json!({"tools": tools, "tool_choice": other})).is_err());
    }

    #[test]
    fn model_and_logprobs_mode_are_read() {
        let r = chat(json!({"model": "", "logprobs_mode": "processed_logprobs"})).unwrap();
        assert_eq!(r.params.model, None, "an empty model is the served one");
        assert_eq!(r.params.logprobs_mode, Some(LogprobsMode::Processed));
        let r = chat(json!({})).unwrap();
        assert_eq!((r.params.model.as_deref(), r.params.logprobs_mode), (Some("m"), None));
    }

    #[test]
    fn completions_take_one_prompt() {
        let r = parse_completion(&json!({"prompt": "Once", "logprobs": 2})).unwrap();
        assert_eq!((r.prompt.as_str(), r.params.logprobs), ("Once", Some(2)));
        assert!(parse_completion(&json!({"prompt": ["a", "b"]})).is_err());
    }
}
