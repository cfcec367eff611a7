//! `grammask serve`: an OpenAI-compatible HTTP server (feature `server`) over the GGUF model
//! backend, with every structured output enforced exactly by grammask's constraints:
//! `response_format` (`json_object`, `json_schema`), `tools` + `tool_choice` (structural tags
//! in the model's tool-call format), and vLLM's `structured_outputs` extensions (regex, GBNF
//! grammar, choice). The full reference — endpoints, parameters, status codes, limits, and why
//! requests are batched — is `docs/server.md`.
//!
//! # Pieces
//! - `config`: [`ServerConfig`] and its builder (the CLI's flags).
//! - `request`: bodies → typed requests, every parameter checked (pure, unit-tested).
//! - `error`: [`ApiError`] in OpenAI's error shape with its HTTP status; [`ServerError`].
//! - `http`: the axum routes, admission (slots, queue, 429), streaming, responses.
//! - `worker`: the model thread, one batched forward pass per step for every request.
//! - `generate`: one request's decode loop on its own thread, streaming and cancellation.
//! - `cache`: the compile cache; `metrics`: `/metrics`.
//!
//! It sits on top of every layer (beside the CLI) and nothing points back at it.

mod cache;
mod config;
mod error;
mod generate;
mod http;
mod metrics;
pub mod request;
mod worker;

pub use config::{
    ServerConfig, ServerConfigBuilder, DEFAULT_COMPILE_CACHE, DEFAULT_CONTEXT,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_QUEUE, DEFAULT_MAX_TOKENS,
    DEFAULT_PORT,
};
pub use error::{ApiError, ServerError};

use crate::model::{GgufModel, ModelConfig};

/// Load the model, bind, and serve until SIGINT/SIGTERM; then stop accepting, let in-flight
/// requests finish for the grace period, cancel what is left, and return.
///
/// # Errors
/// [`ServerError::Model`] (the model does not load), [`ServerError::Bind`],
/// [`ServerError::Io`].
pub fn serve(config: ServerConfig) -> Result<(), ServerError> {
    let mut mc = ModelConfig::builder().context(config.context);
    if let Some(t) = config.threads {
        mc = mc.threads(t);
    }
    if let Some(k) = config.kernel {
        mc = mc.kernel(k);
    }
    let mc = mc.build().map_err(ServerError::Model)?;
    let model = GgufModel::load(&config.model, &mc).map_err(ServerError::Model)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("grammask-http")
        .build()
        .map_err(ServerError::Io)?;
    rt.block_on(http::run(config, model.into_batched()))
}
