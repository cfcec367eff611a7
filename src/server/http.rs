//! The HTTP side: routes, the API key, admission (`max_concurrent` slots, a bounded queue,
//! 429 past it), compile-cache lookups, and the OpenAI response and SSE chunk shapes.

use super::cache::CompileCache;
use super::config::ServerConfig;
use super::error::{ApiError, ServerError};
use super::generate::{self, Event, Job, Outcome};
use super::metrics::Metrics;
use super::request::{parse_chat, parse_completion, Params, SchemaKnobs, Spec};
use super::worker::Worker;
use crate::constraint::tagged::Tagged;
use crate::constraint::tools::{
    call_triggers, extract_tool_calls, render_output, tool_constraint_with, unfinished_tool_call,
    Reasoning, Tool, ToolChoice, ToolFormat,
};
use crate::constraint::{CompiledConstraint, Constraint};
use crate::decode::{DecodeConfig, ThinkConfig, ThinkGate, ThinkMarkers};
use crate::engine::Whitespace;
use crate::model::{BatchedModel, ChatMessage, ChatTemplate};
use crate::sampler::TokenLogprobs;
use crate::schema::SchemaOptions;
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Shared state of every handler.
struct App {
    config: ServerConfig,
    name: String,
    vocab: Vocabulary,
    template: Option<ChatTemplate>,
    add_bos_text: Option<TokenId>,
    context: usize,
    tool_format: ToolFormat,
    worker: Worker,
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
    cache: CompileCache,
    metrics: Arc<Metrics>,
    tickets: AtomicU64,
    closing: AtomicBool,
    cancel: Arc<AtomicBool>,
    created: u64,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(super) async fn run(config: ServerConfig, model: BatchedModel) -> Result<(), ServerError> {
    let metrics = Arc::new(Metrics::new());
    let vocab = model.vocab().clone();
    let template = model.chat_template().cloned();
    let context = model.context();
    // BOS as `encode_prompt` adds it: probe once with an empty-ish text.
    let add_bos_text = model
        .encode_prompt("a")
        .ok()
        .and_then(|ids| ids.first().copied())
        .filter(|t| Some(*t) == vocab.bos_id());
    let worker = Worker::start(model, config.batch_wait, config.batched, metrics.clone());
    let addr = format!("{}:{}", config.host, config.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|source| ServerError::Bind { addr: addr.clone(), source })?;
    let local = listener.local_addr().map_err(ServerError::Io)?;
    let app = Arc::new(App {
        name: config.model_name(),
        tool_format: ToolFormat::detect(&vocab).unwrap_or(ToolFormat::Llama3),
        slots: Arc::new(Semaphore::new(config.max_concurrent)),
        cache: CompileCache::new(config.compile_cache),
        config,
        vocab,
        template,
        add_bos_text,
        context,
        worker,
        queued: AtomicUsize::new(0),
        metrics,
        tickets: AtomicU64::new(1),
        closing: AtomicBool::new(false),
        cancel: Arc::new(AtomicBool::new(false)),
        created: now_secs(),
    });
    let router = Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model_by_id))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .fallback(fallback)
        .layer(DefaultBodyLimit::max(app.config.max_body_bytes))
        .with_state(app.clone());
    eprintln!("grammask serve: listening on http://{local} (model {})", app.name);
    let shutdown = {
        let app = app.clone();
        async move {
            shutdown_signal().await;
            eprintln!("grammask serve: shutting down");
            app.closing.store(true, Ordering::SeqCst);
            let (cancel, grace) = (app.cancel.clone(), app.config.shutdown_grace);
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                cancel.store(true, Ordering::SeqCst);
            });
        }
    };
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await.map_err(ServerError::Io)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

async fn health(State(app): State<Arc<App>>) -> Response {
    let status = if app.closing.load(Ordering::Relaxed) { "shutting_down" } else { "ok" };
    Json(json!({
        "status": status,
        "model": app.name,
        "active": app.metrics.active.get(),
        "queued": app.queued.load(Ordering::Relaxed),
    }))
    .into_response()
}

async fn metrics_text(State(app): State<Arc<App>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], app.metrics.render())
        .into_response()
}

/// The served model as OpenAI's model object.
fn model_object(app: &App) -> Value {
    json!({
        "id": app.name, "object": "model", "created": app.created, "owned_by": "grammask",
        "max_model_len": app.context,
    })
}

async fn models(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = auth(&app, &headers) {
        return e.into_response();
    }
    Json(json!({"object": "list", "data": [model_object(&app)]})).into_response()
}

/// `GET /v1/models/{id}`: the served model, or 404 `model_not_found` for any other name.
async fn model_by_id(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(e) = auth(&app, &headers) {
        return e.into_response();
    }
    if id != app.name {
        return ApiError::model_not_found(&id, &app.name).into_response();
    }
    Json(model_object(&app)).into_response()
}

/// A request's `model` must be the served name (404 `model_not_found` otherwise, as OpenAI
/// and vLLM answer), unless `--accept-any-model`; an absent or empty one means the served
/// model, as vLLM's `model` is optional.
fn check_model(app: &App, p: &Params) -> Result<(), ApiError> {
    match &p.model {
        Some(m) if m != &app.name && !app.config.accept_any_model => {
            Err(ApiError::model_not_found(m, &app.name))
        }
        _ => Ok(()),
    }
}

async fn fallback(uri: Uri) -> Response {
    ApiError::not_found(uri.path()).into_response()
}

fn auth(app: &App, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &app.config.api_key else { return Ok(()) };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.map(str::trim) == Some(key.as_str()) {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

fn body_json(app: &App, body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let bytes = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(app.config.max_body_bytes)
        } else {
            ApiError::bad_request(format!("cannot read the body: {r}"), None)
        }
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}"), None))
}

/// A slot to decode in: at once, after waiting in the queue, or 429.
async fn admit(app: &App) -> Result<OwnedSemaphorePermit, ApiError> {
    if app.closing.load(Ordering::Relaxed) {
        return Err(ApiError::shutting_down());
    }
    if let Ok(p) = app.slots.clone().try_acquire_owned() {
        return Ok(p);
    }
    let q = app.queued.fetch_add(1, Ordering::SeqCst);
    if q >= app.config.max_queue {
        app.queued.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError::overloaded(app.config.max_concurrent, q));
    }
    app.metrics.queue_depth.inc();
    // Dropping this future (the client went away) must also leave the queue.
    struct Leave<'a>(&'a App);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.queued.fetch_sub(1, Ordering::SeqCst);
            self.0.metrics.queue_depth.dec();
        }
    }
    let _leave = Leave(app);
    app.slots.clone().acquire_owned().await.map_err(|_| ApiError::shutting_down())
}

fn choice_regex(choices: &[String]) -> String {
    let alts: Vec<String> = choices.iter().map(|c| regex_syntax::escape(c)).collect();
    format!("(?:{})", alts.join("|"))
}

/// The structural tags of a `tools` request. In the plain-JSON format (Llama 3.1's, also the
/// fallback for a vocabulary without tool-call tokens, such as SmolLM2's) a call that is
/// required starts the answer at once: `{"name": NAME, "parameters": ARGS}` for one of the
/// allowed functions and nothing after it; the library's format lets free text come first,
/// which a small model fills with blank lines until the token limit.
fn tool_tags(
    app: &App,
    tools: &[Tool],
    choice: &ToolChoice,
    knobs: &SchemaKnobs,
) -> Result<Tagged, ApiError> {
    let forced: Vec<&Tool> = match choice {
        ToolChoice::Required => tools.iter().collect(),
        ToolChoice::Named(n) => tools.iter().filter(|t| &t.name == n).collect(),
        _ => Vec::new(),
    };
    if app.tool_format == ToolFormat::Llama3 && !forced.is_empty() {
        let calls = forced
            .iter()
            .map(|t| {
                Tagged::sequence(vec![
                    Tagged::literal(&format!("{{\"name\": \"{}\", \"parameters\": ", t.name)),
                    Tagged::content(Constraint::json_schema_with(
                        &t.parameters,
                        schema_options(app, knobs, true),
                    )),
                    Tagged::literal("}"),
                ])
            })
            .collect();
        return Ok(Tagged::choice(calls));
    }
    let options = schema_options(app, knobs, true);
    tool_constraint_with(&app.vocab, tools, choice, app.tool_format, Reasoning::Free, &options)
        .map_err(|e| ApiError::bad_request(format!("tools: {e}"), Some("tools")))
}

/// The options a request's JSON Schemas compile under: the server's profile (or the one the
/// request names), then vLLM's knobs. Tool arguments (`args`) are written as Python's
/// `json.dumps` writes them (`", "`, `": "`, no newlines) in either profile: a small model
/// otherwise spends its tokens on indentation.
fn schema_options(app: &App, knobs: &SchemaKnobs, args: bool) -> SchemaOptions {
    let mut o = SchemaOptions::for_profile(knobs.profile.unwrap_or(app.config.profile));
    if args {
        o.whitespace = Whitespace::Separators { item: ", ".into(), key: ": ".into() };
        // Spellings as OpenAI, XGrammar and llguidance write them, even in the exact profile:
        // a small model masked away from a misspelling escapes its way into a name.
        o.plain_integers = true;
        o.literal_keys = true;
        o.literal_values = true;
    }
    if let Some(closed) = knobs.disable_additional_properties {
        o.closed_objects = closed;
    }
    if knobs.disable_any_whitespace == Some(true) {
        o.whitespace = Whitespace::Compact;
    }
    o
}

/// A function as one prompt line: `name(arg: type, …)`, with the description if any.
fn describe_tool(t: &Tool) -> String {
    let args: Vec<String> = t
        .parameters
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(k, v)| {
                    format!("{k}: {}", v.get("type").and_then(Value::as_str).unwrap_or("any"))
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{}({})", t.name, args.join(", "))
}

/// `{"name": "f", "parameters": {"a": "...", "n": 0}}` for a tool's first properties.
fn example_call(t: &Tool) -> String {
    let mut args = serde_json::Map::new();
    if let Some(props) = t.parameters.get("properties").and_then(Value::as_object) {
        for (k, v) in props.iter().take(3) {
            let value = match v.get("type").and_then(Value::as_str) {
                Some("integer" | "number") => json!(0),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("..."),
            };
            args.insert(k.clone(), value);
        }
    }
    format!("{{\"name\": \"{}\", \"parameters\": {}}}", t.name, Value::Object(args))
}

/// The compiled constraint for `spec`, from the cache or compiled now (off the async threads).
async fn compiled(
    app: &Arc<App>,
    spec: &Spec,
    param: &'static str,
    knobs: &SchemaKnobs,
) -> Result<CompiledConstraint, ApiError> {
    let key = match spec {
        Spec::Schema(_) | Spec::Tools { .. } => {
            let profile = knobs.profile.unwrap_or(app.config.profile);
            format!(
                "{profile:?}:{:?}:{}",
                (knobs.disable_additional_properties, knobs.disable_any_whitespace),
                spec.cache_key()
            )
        }
        _ => spec.cache_key(),
    };
    if let Some(c) = app.cache.get(&key) {
        app.metrics.compile_cache_hits.inc();
        return Ok(c);
    }
    let constraint = match spec {
        Spec::Json => Constraint::json(),
        Spec::Schema(s) => Constraint::json_schema_with(s, schema_options(app, knobs, false)),
        Spec::Regex(r) => Constraint::regex(r),
        Spec::Grammar(g) => Constraint::gbnf(g),
        Spec::Choice(c) => Constraint::regex(&choice_regex(c)),
        Spec::Tools { tools, choice } => Constraint::tagged(tool_tags(app, tools, choice, knobs)?),
    };
    let app2 = app.clone();
    let t0 = Instant::now();
    let r = tokio::task::spawn_blocking(move || constraint.compile(&app2.vocab))
        .await
        .map_err(|e| ApiError::internal(format!("compile task: {e}")))?;
    app.metrics.compile_seconds.observe(t0.elapsed().as_secs_f64());
    let c = r.map_err(|e| ApiError::constraint(&e, param))?;
    app.cache.put(key, c.clone());
    Ok(c)
}

fn decode_config(
    app: &App,
    p: &Params,
    max_tokens: usize,
    ticket: u64,
) -> Result<DecodeConfig, ApiError> {
    let seed = p.seed.unwrap_or_else(|| {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        u64::from(nanos) ^ ticket.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    });
    let mut cfg = DecodeConfig::builder()
        .max_tokens(max_tokens)
        .temperature(p.temperature)
        .top_p(p.top_p)
        .seed(seed)
        .logprobs(p.logprobs.map_or(0, |k| k.max(1)))
        .logprobs_mode(p.logprobs_mode.unwrap_or(app.config.logprobs_mode))
        .build()
        .map_err(|e| ApiError::bad_request(e.to_string(), None))?;
    cfg.penalties.presence_penalty = p.presence_penalty;
    cfg.penalties.frequency_penalty = p.frequency_penalty;
    Ok(cfg)
}

/// The text of the first `<think>…</think>` block of `raw` (empty when there is none).
fn think_block(raw: &str) -> &str {
    let Some(start) = raw.find("<think>") else { return "" };
    let body = &raw[start + "<think>".len()..];
    body.find("</think>").map_or(body, |end| &body[..end]).trim()
}

fn token_text(vocab: &Vocabulary, t: TokenId) -> (String, Vec<u8>) {
    let b = vocab.token_bytes(t).to_vec();
    let s = if b.is_empty() {
        vocab.tokenizer().and_then(|k| k.id_to_token(t.0)).unwrap_or_default()
    } else {
        String::from_utf8_lossy(&b).into_owned()
    };
    (s, b)
}

fn chat_logprobs<'a>(
    vocab: &Vocabulary,
    lps: impl IntoIterator<Item = &'a TokenLogprobs>,
    k: usize,
) -> Value {
    let content: Vec<Value> = lps
        .into_iter()
        .map(|lp| {
            let (tok, bytes) = token_text(vocab, lp.token);
            let top: Vec<Value> = lp
                .top
                .iter()
                .take(k)
                .map(|&(t, l)| {
                    let (s, b) = token_text(vocab, t);
                    json!({"token": s, "logprob": l, "bytes": b})
                })
                .collect();
            json!({"token": tok, "logprob": lp.logprob, "bytes": bytes, "top_logprobs": top})
        })
        .collect();
    json!({"content": content})
}

/// The completions endpoint's (legacy) logprobs of `lps`, the first starting at byte `offset`
/// of the completion; also the offset after the last.
fn completion_logprobs<'a>(
    vocab: &Vocabulary,
    lps: impl IntoIterator<Item = &'a TokenLogprobs>,
    k: usize,
    mut offset: usize,
) -> (Value, usize) {
    let (mut tokens, mut values, mut tops, mut offsets) = (vec![], vec![], vec![], vec![]);
    for lp in lps {
        let (s, b) = token_text(vocab, lp.token);
        tokens.push(Value::String(s));
        values.push(json!(lp.logprob));
        let mut top = serde_json::Map::new();
        for &(t, l) in lp.top.iter().take(k) {
            top.insert(token_text(vocab, t).0, json!(l));
        }
        tops.push(Value::Object(top));
        offsets.push(json!(offset));
        offset += b.len();
    }
    let v = json!({"tokens": tokens, "token_logprobs": values, "top_logprobs": tops,
        "text_offset": offsets});
    (v, offset)
}

struct Prepared {
    prompt: Vec<TokenId>,
    spec: Option<(Spec, &'static str)>,
    params: Params,
    chat: bool,
}

async fn chat(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let r = async {
        auth(&app, &headers)?;
        let body = body_json(&app, body)?;
        let req = parse_chat(&body)?;
        check_model(&app, &req.params)?;
        let mut messages: Vec<ChatMessage> =
            req.messages.iter().map(|m| ChatMessage::new(&m.role, &m.content)).collect();
        if let Some((Spec::Tools { tools, .. }, _)) = &req.spec {
            // The template may not render tools: describe them in a system message.
            let list: Vec<String> = tools.iter().map(describe_tool).collect();
            let example = tools.first().map(example_call).unwrap_or_default();
            let text = format!(
                "You can call these functions: {}. To call one, answer with one JSON object \
                 such as {example}",
                list.join("; ")
            );
            match messages.first_mut() {
                Some(m) if m.role == "system" => m.content = format!("{}\n\n{text}", m.content),
                _ => messages.insert(0, ChatMessage::new("system", &text)),
            }
        }
        let text = match &app.template {
            Some(t) => t.render(&messages, true).map_err(|e| {
                ApiError::bad_request(
                    format!("messages: the chat template failed: {e}"),
                    Some("messages"),
                )
            })?,
            None => messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n\n"),
        };
        let prompt = encode(&app, &text)?;
        Ok::<_, ApiError>(Prepared { prompt, spec: req.spec, params: req.params, chat: true })
    }
    .await;
    finish(&app, "chat", r).await
}

async fn completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let r = async {
        auth(&app, &headers)?;
        let body = body_json(&app, body)?;
        let req = parse_completion(&body)?;
        check_model(&app, &req.params)?;
        let prompt = encode(&app, &req.prompt)?;
        Ok::<_, ApiError>(Prepared { prompt, spec: req.spec, params: req.params, chat: false })
    }
    .await;
    finish(&app, "completions", r).await
}

fn encode(app: &App, text: &str) -> Result<Vec<TokenId>, ApiError> {
    let mut ids = app
        .vocab
        .encode(text)
        .map_err(|e| ApiError::bad_request(format!("cannot tokenize the prompt: {e}"), None))?;
    if let Some(bos) = app.add_bos_text {
        if ids.first() != Some(&bos) {
            ids.insert(0, bos);
        }
    }
    if ids.is_empty() {
        return Err(ApiError::bad_request("the prompt is empty", Some("prompt")));
    }
    if ids.len() >= app.context {
        return Err(ApiError::bad_request(
            format!("the prompt has {} tokens; the context is {}", ids.len(), app.context),
            Some("messages"),
        )
        .with_code("context_length_exceeded"));
    }
    Ok(ids)
}

async fn finish(app: &Arc<App>, endpoint: &str, prepared: Result<Prepared, ApiError>) -> Response {
    let r = match prepared {
        Ok(p) => generate_response(app, p).await,
        Err(e) => Err(e),
    };
    let response = r.unwrap_or_else(IntoResponse::into_response);
    app.metrics.requests.with_label_values(&[endpoint, response.status().as_str()]).inc();
    response
}

async fn generate_response(app: &Arc<App>, p: Prepared) -> Result<Response, ApiError> {
    let permit = admit(app).await?;
    let compiled = match &p.spec {
        Some((spec, param)) => Some(compiled(app, spec, param, &p.params.schema).await?),
        None => None,
    };
    let ticket = app.tickets.fetch_add(1, Ordering::Relaxed);
    let room = app.context - p.prompt.len();
    let max_tokens = p.params.max_tokens.unwrap_or(app.config.default_max_tokens).min(room);
    let config = decode_config(app, &p.params, max_tokens, ticket)?;
    let tools = matches!(p.spec, Some((Spec::Tools { .. }, _)));
    let mut config = config;
    let mut engine = compiled.map(|c| c.engine());
    // A thinking model (`<think>`/`</think>` in the vocabulary): the think block is reasoning,
    // and the constraint applies to the answer after it. The tool formats carry their own
    // think block, read back in `Shape::message`.
    let thinking = p.chat && !tools && ThinkMarkers::from_vocab(&app.vocab).is_ok();
    let text_streamed = p.params.stream && !tools && !thinking;
    // A `tools` stream sends its text as it comes, up to what could begin a call (Harmony's
    // content is inside channel markers: it comes at the end).
    let triggers = call_triggers(app.tool_format);
    let hold = (p.params.stream && tools && !triggers.is_empty()).then_some(triggers);
    if thinking {
        config.think = Some(ThinkConfig { markers: None, starts_open: false, budget: None });
        if let (Some(e), Ok(markers)) = (engine.take(), ThinkMarkers::from_vocab(&app.vocab)) {
            engine = Some(Box::new(ThinkGate::new(e, markers)));
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let prompt_tokens = p.prompt.len();
    let job = Job {
        model: app.worker.remote(ticket, p.prompt),
        vocab: app.vocab.clone(),
        engine,
        config,
        stop: p.params.stop.clone(),
        // A thinking model's split is only known at the end: its stream sends everything then.
        stream_text: text_streamed || hold.is_some(),
        hold,
        events: tx,
        cancel: app.cancel.clone(),
        metrics: app.metrics.clone(),
    };
    let metrics = app.metrics.clone();
    metrics.active.inc();
    std::thread::Builder::new()
        .name(format!("grammask-req-{ticket}"))
        .spawn(move || {
            generate::run(job);
            metrics.active.dec();
            drop(permit); // the slot is free as soon as the decode is over
        })
        .map_err(|e| ApiError::internal(format!("cannot start the request thread: {e}")))?;
    let id = format!("{}-{ticket}", if p.chat { "chatcmpl" } else { "cmpl" });
    let shape = Shape {
        app: app.clone(),
        id,
        created: now_secs(),
        chat: p.chat,
        tools,
        text_streamed,
        logprobs: p.params.logprobs,
        prompt_tokens,
    };
    if !p.params.stream {
        loop {
            match rx.recv().await {
                Some(Event::Delta { .. }) => continue,
                Some(Event::Done(Ok(o))) => return Ok(Json(shape.full(&o)).into_response()),
                Some(Event::Done(Err(e))) => return Err(e),
                None => {
                    return Err(ApiError::internal("the request thread ended without an answer"))
                }
            }
        }
    }
    let include_usage = p.params.include_usage;
    // The state: the receiver, the shape, 0 (the role chunk not sent yet) / 1 (streaming) / 2
    // (done), and the byte offset of the next streamed text in the completion.
    let stream = futures_util::stream::unfold(
        (rx, shape, 0u8, 0usize),
        move |(mut rx, shape, state, mut offset)| async move {
            if state == 0 {
                let first = shape.chunk(json!({"role": "assistant", "content": ""}), None);
                let next = (rx, shape, 1, offset);
                return Some((Ok::<_, std::convert::Infallible>(sse(&first)), next));
            }
            if state == 2 {
                return None;
            }
            match rx.recv().await {
                Some(Event::Delta { text, logprobs }) => {
                    let c = shape.delta_chunk(text, &logprobs, &mut offset);
                    Some((Ok(sse(&c)), (rx, shape, 1, offset)))
                }
                Some(Event::Done(r)) => {
                    let mut out = String::new();
                    match r {
                        Ok(o) => {
                            for c in shape.final_chunks(&o, include_usage) {
                                out.push_str(&sse(&c));
                            }
                        }
                        Err(e) => out.push_str(&sse(&e.body())),
                    }
                    out.push_str("data: [DONE]\n\n");
                    Some((Ok(out), (rx, shape, 2, offset)))
                }
                None => None,
            }
        },
    );
    Ok((
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(stream),
    )
        .into_response())
}

fn sse(v: &Value) -> String {
    format!("data: {v}\n\n")
}

/// What a response looks like: ids, the endpoint's object names.
struct Shape {
    app: Arc<App>,
    id: String,
    created: u64,
    chat: bool,
    tools: bool,
    /// Content went out as deltas while decoding.
    text_streamed: bool,
    logprobs: Option<usize>,
    prompt_tokens: usize,
}

impl Shape {
    fn usage(&self, o: &Outcome) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": o.tokens.len(),
            "total_tokens": self.prompt_tokens + o.tokens.len(),
        })
    }

    /// Content, tool calls, finish reason and reasoning of a chat answer. With `tools` the
    /// content is the text outside the calls, trimmed; a call the token limit cut short is
    /// reported as far as it goes (name, arguments text so far) in `tool_calls` with
    /// `finish_reason: "length"`, as OpenAI reports one, never as content.
    fn message(&self, o: &Outcome) -> (Option<String>, Vec<Value>, &'static str, String) {
        if !self.tools {
            return (Some(o.text.clone()), Vec::new(), o.finish, o.reasoning.clone());
        }
        let format = self.app.tool_format;
        let raw = render_output(&self.app.vocab, &o.tokens);
        let reasoning = think_block(&raw).to_owned();
        let partial = if o.finish == "length" { unfinished_tool_call(format, &raw) } else { None };
        let whole = partial.as_ref().map_or(raw.as_str(), |p| &raw[..p.start]);
        let (content, calls) = extract_tool_calls(format, whole);
        let calls: Vec<Value> = calls
            .into_iter()
            .map(|c| (c.name, c.arguments.to_string()))
            .chain(partial.map(|p| (p.name, p.arguments)))
            .enumerate()
            .map(|(i, (name, arguments))| {
                json!({
                    "id": format!("call_{}_{i}", self.id),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                })
            })
            .collect();
        let finish = if !calls.is_empty() && o.finish == "stop" { "tool_calls" } else { o.finish };
        // No call: the text as decoded (stop strings cut), outside any think block.
        let content =
            if calls.is_empty() { extract_tool_calls(format, &o.text).0 } else { content };
        let content = content.trim_matches(|c: char| c.is_ascii_whitespace()).to_owned();
        let content = if content.is_empty() && !calls.is_empty() { None } else { Some(content) };
        (content, calls, finish, reasoning)
    }

    fn full(&self, o: &Outcome) -> Value {
        self.app.metrics.prompt_tokens.inc_by(self.prompt_tokens as u64);
        self.app.metrics.completion_tokens.inc_by(o.tokens.len() as u64);
        let vocab = &self.app.vocab;
        if !self.chat {
            let lp = self
                .logprobs
                .map(|k| completion_logprobs(vocab, o.logprobs.iter().flatten(), k, 0).0);
            return json!({
                "id": self.id, "object": "text_completion", "created": self.created,
                "model": self.app.name,
                "choices": [{"index": 0, "text": o.text, "logprobs": lp, "finish_reason": o.finish}],
                "usage": self.usage(o),
            });
        }
        let (content, calls, finish, reasoning) = self.message(o);
        let mut message = json!({"role": "assistant", "content": content});
        if !calls.is_empty() {
            message["tool_calls"] = Value::from(calls);
        }
        if !reasoning.is_empty() {
            message["reasoning_content"] = Value::from(reasoning);
        }
        let lp = self.logprobs.map(|k| chat_logprobs(vocab, o.logprobs.iter().flatten(), k));
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created,
            "model": self.app.name,
            "choices": [{"index": 0, "message": message, "logprobs": lp, "finish_reason": finish}],
            "usage": self.usage(o),
        })
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        self.chunk_with(delta, finish, Value::Null)
    }

    /// A chunk carrying the logprobs of its text's tokens (`null`: none asked for).
    fn chunk_with(&self, delta: Value, finish: Option<&str>, logprobs: Value) -> Value {
        if self.chat {
            json!({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.app.name,
                "choices": [{"index": 0, "delta": delta, "logprobs": logprobs,
                    "finish_reason": finish}],
            })
        } else {
            json!({
                "id": self.id, "object": "text_completion", "created": self.created,
                "model": self.app.name,
                "choices": [{"index": 0, "text": delta.as_str().unwrap_or(""),
                    "logprobs": logprobs, "finish_reason": finish}],
            })
        }
    }

    /// A streamed text delta and the logprobs of the tokens it completes; `offset` is the
    /// completion's byte offset of the first (the completions endpoint's `text_offset`).
    fn delta_chunk(&self, text: String, lps: &[TokenLogprobs], offset: &mut usize) -> Value {
        let vocab = &self.app.vocab;
        let logprobs = match self.logprobs {
            None => Value::Null,
            Some(k) if self.chat => chat_logprobs(vocab, lps, k),
            Some(k) => {
                let (v, end) = completion_logprobs(vocab, lps, k, *offset);
                *offset = end;
                v
            }
        };
        let delta = if self.chat { json!({"content": text}) } else { json!(text) };
        self.chunk_with(delta, None, logprobs)
    }

    fn final_chunks(&self, o: &Outcome, include_usage: bool) -> Vec<Value> {
        self.app.metrics.prompt_tokens.inc_by(self.prompt_tokens as u64);
        self.app.metrics.completion_tokens.inc_by(o.tokens.len() as u64);
        let mut out = Vec::new();
        let finish = if self.chat {
            let (content, calls, finish, reasoning) = self.message(o);
            if !reasoning.is_empty() {
                out.push(self.chunk(json!({"reasoning_content": reasoning}), None));
            }
            // Content not sent as deltas (a `tools` stream's rest, a thinking model's) comes
            // now, with the logprobs of the whole answer.
            if !self.text_streamed {
                let c = content.unwrap_or_default();
                let rest = c.strip_prefix(o.streamed_text.as_str()).unwrap_or("");
                if !rest.is_empty() || (self.logprobs.is_some() && !c.is_empty()) {
                    let lp = self.logprobs.map_or(Value::Null, |k| {
                        chat_logprobs(&self.app.vocab, o.logprobs.iter().flatten(), k)
                    });
                    out.push(self.chunk_with(json!({"content": rest}), None, lp));
                }
                if !calls.is_empty() {
                    let calls: Vec<Value> = calls
                        .into_iter()
                        .enumerate()
                        .map(|(i, mut c)| {
                            c["index"] = json!(i);
                            c
                        })
                        .collect();
                    out.push(self.chunk(json!({"tool_calls": calls}), None));
                }
            }
            finish
        } else {
            o.finish
        };
        let last_delta = if self.chat { json!({}) } else { json!("") };
        out.push(self.chunk(last_delta, Some(finish)));
        if include_usage {
            let object = if self.chat { "chat.completion.chunk" } else { "text_completion" };
            out.push(json!({
                "id": self.id, "object": object, "created": self.created,
                "model": self.app.name, "choices": [], "usage": self.usage(o),
            }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{choice_regex, think_block};

    #[test]
    fn think_blocks_are_read_out() {
        assert_eq!(think_block("<think>\nplan\n</think>\n\n<tool_call>…"), "plan");
        assert_eq!(think_block("no block"), "");
        assert_eq!(think_block("<think>cut off"), "cut off");
    }

    #[test]
    fn choices_are_escaped() {
        assert_eq!(choice_regex(&["a.b".into(), "(x)".into()]), r"(?:a\.b|\(x\))");
    }
}
