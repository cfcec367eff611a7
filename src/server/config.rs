//! [`ServerConfig`]: everything `grammask serve` can be told, with documented defaults and a
//! builder that validates (the same values are the CLI's flags; the limits are also listed in
//! `docs/limits.md`).

use super::error::ServerError;
use crate::sampler::LogprobsMode;
use std::path::PathBuf;
use std::time::Duration;

/// Default port.
pub const DEFAULT_PORT: u16 = 8080;
/// Default requests decoding at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 8;
/// Default requests waiting for a slot.
pub const DEFAULT_MAX_QUEUE: usize = 64;
/// Default largest request body (bytes).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;
/// Default `max_tokens` when a request sets none.
pub const DEFAULT_MAX_TOKENS: usize = 256;
/// Default compiled constraints kept.
pub const DEFAULT_COMPILE_CACHE: usize = 64;
/// Default context per sequence (tokens).
pub const DEFAULT_CONTEXT: usize = 4096;

/// How to run the server. Build with [`ServerConfig::builder`].
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub(crate) model: PathBuf,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) max_concurrent: usize,
    pub(crate) max_queue: usize,
    pub(crate) api_key: Option<String>,
    pub(crate) max_body_bytes: usize,
    pub(crate) default_max_tokens: usize,
    pub(crate) compile_cache: usize,
    pub(crate) shutdown_grace: Duration,
    pub(crate) batch_wait: Duration,
    pub(crate) batched: bool,
    pub(crate) threads: Option<usize>,
    pub(crate) kernel: Option<crate::model::DotKernel>,
    pub(crate) context: usize,
    pub(crate) model_name: Option<String>,
    pub(crate) profile: crate::schema::Profile,
    pub(crate) accept_any_model: bool,
    pub(crate) logprobs_mode: LogprobsMode,
}

/// Builder of [`ServerConfig`].
#[derive(Clone, Debug)]
pub struct ServerConfigBuilder {
    config: ServerConfig,
}

impl ServerConfig {
    /// A builder for the model file at `model`, with every default.
    pub fn builder(model: impl Into<PathBuf>) -> ServerConfigBuilder {
        ServerConfigBuilder {
            config: ServerConfig {
                model: model.into(),
                host: "127.0.0.1".into(),
                port: DEFAULT_PORT,
                max_concurrent: DEFAULT_MAX_CONCURRENT,
                max_queue: DEFAULT_MAX_QUEUE,
                api_key: None,
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
                default_max_tokens: DEFAULT_MAX_TOKENS,
                compile_cache: DEFAULT_COMPILE_CACHE,
                shutdown_grace: Duration::from_secs(10),
                batch_wait: Duration::from_millis(3),
                batched: true,
                threads: None,
                kernel: None,
                context: DEFAULT_CONTEXT,
                model_name: None,
                profile: crate::schema::Profile::Generation,
                accept_any_model: false,
                logprobs_mode: LogprobsMode::Raw,
            },
        }
    }

    /// The name `/v1/models` lists and responses carry: the configured one, else the model
    /// file's stem.
    pub fn model_name(&self) -> String {
        self.model_name.clone().unwrap_or_else(|| {
            self.model.file_stem().map_or("model".into(), |s| s.to_string_lossy().into_owned())
        })
    }
}

impl ServerConfigBuilder {
    /// Address to bind (default `127.0.0.1`: loopback only).
    pub fn host(mut self, host: &str) -> Self {
        self.config.host = host.into();
        self
    }

    /// Port (default [`DEFAULT_PORT`]; `0` picks a free one, printed on stderr).
    pub fn port(mut self, port: u16) -> Self {
        self.config.port = port;
        self
    }

    /// Requests decoding at once (default [`DEFAULT_MAX_CONCURRENT`]).
    pub fn max_concurrent(mut self, n: usize) -> Self {
        self.config.max_concurrent = n;
        self
    }

    /// Requests waiting for a slot past `max_concurrent` (default [`DEFAULT_MAX_QUEUE`]);
    /// beyond, 429 with `Retry-After`.
    pub fn max_queue(mut self, n: usize) -> Self {
        self.config.max_queue = n;
        self
    }

    /// Require `Authorization: Bearer KEY` on every `/v1/*` request (default: none).
    pub fn api_key(mut self, key: Option<String>) -> Self {
        self.config.api_key = key;
        self
    }

    /// Largest request body in bytes (default [`DEFAULT_MAX_BODY_BYTES`]); larger: 413.
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.config.max_body_bytes = n;
        self
    }

    /// `max_tokens` of a request that sets none (default [`DEFAULT_MAX_TOKENS`]).
    pub fn default_max_tokens(mut self, n: usize) -> Self {
        self.config.default_max_tokens = n;
        self
    }

    /// Compiled constraints kept, least recently used evicted (default
    /// [`DEFAULT_COMPILE_CACHE`]).
    pub fn compile_cache(mut self, n: usize) -> Self {
        self.config.compile_cache = n;
        self
    }

    /// How long in-flight requests may run after SIGINT/SIGTERM before they are cancelled
    /// (default 10 s).
    pub fn shutdown_grace(mut self, d: Duration) -> Self {
        self.config.shutdown_grace = d;
        self
    }

    /// How long a step waits for the running sequences to come back with their next token
    /// before running without the late ones (default 3 ms).
    pub fn batch_wait(mut self, d: Duration) -> Self {
        self.config.batch_wait = d;
        self
    }

    /// Run the waiting sequences as one batched forward pass (default `true`); `false` runs
    /// them one after the other (interleaved), for comparison.
    pub fn batched(mut self, on: bool) -> Self {
        self.config.batched = on;
        self
    }

    /// Forward-pass threads (default: the available cores).
    pub fn threads(mut self, n: Option<usize>) -> Self {
        self.config.threads = n;
        self
    }

    /// The model's int8 dot kernels (default: [`DotKernel::best`](crate::model::DotKernel::best)).
    pub fn kernel(mut self, kernel: Option<crate::model::DotKernel>) -> Self {
        self.config.kernel = kernel;
        self
    }

    /// Context per sequence in tokens (default [`DEFAULT_CONTEXT`], at most the model's).
    pub fn context(mut self, n: usize) -> Self {
        self.config.context = n;
        self
    }

    /// The model's name in responses (default: the file stem).
    pub fn model_name(mut self, name: Option<String>) -> Self {
        self.config.model_name = name;
        self
    }

    /// How JSON Schemas (response formats, tools' arguments) are compiled (default
    /// [`Profile::Generation`](crate::schema::Profile::Generation): the subset a model
    /// finishes, every output valid; [`Profile::Exact`](crate::schema::Profile::Exact): the
    /// schema's whole language). A request may ask otherwise (`structured_outputs.profile`,
    /// vLLM's `disable_additional_properties` and `disable_any_whitespace`).
    pub fn profile(mut self, profile: crate::schema::Profile) -> Self {
        self.config.profile = profile;
        self
    }

    /// Answer requests whatever `model` they name (default `false`: a name other than the
    /// served one is a 404 `model_not_found`, as OpenAI and vLLM answer; an absent or empty
    /// `model` always means the served model).
    pub fn accept_any_model(mut self, on: bool) -> Self {
        self.config.accept_any_model = on;
        self
    }

    /// What `logprobs`/`top_logprobs` report when a request does not say
    /// (`logprobs_mode` in its body): [`LogprobsMode::Raw`], the model's distribution before
    /// the constraint's mask (the default, as vLLM's), or [`LogprobsMode::Processed`], the
    /// distribution the token was drawn from (mask, penalties, temperature, filters).
    pub fn logprobs_mode(mut self, mode: LogprobsMode) -> Self {
        self.config.logprobs_mode = mode;
        self
    }

    /// The config.
    ///
    /// # Errors
    /// [`ServerError::Config`] for zero `max_concurrent`, body limit, context or cache size.
    pub fn build(self) -> Result<ServerConfig, ServerError> {
        let c = &self.config;
        if c.max_concurrent == 0 || c.max_body_bytes == 0 || c.context == 0 || c.compile_cache == 0
        {
            return Err(ServerError::Config(
                "max_concurrent, max_body_bytes, context and compile_cache must be at least 1"
                    .into(),
            ));
        }
        if c.threads == Some(0) {
            return Err(ServerError::Config("threads must be at least 1".into()));
        }
        Ok(self.config)
    }
}
