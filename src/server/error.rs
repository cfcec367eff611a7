//! Errors of the server, in OpenAI's JSON error shape (`{"error": {"message", "type", "param",
//! "code"}}`) with the HTTP status each maps to (the table is in `docs/server.md`), and
//! [`ServerError`], what [`serve`](super::serve) itself can fail with.

use crate::constraint::ConstraintError;
use crate::schema::SchemaErrorKind;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::fmt;

/// One request's error: an HTTP status and OpenAI's error body.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, `rate_limit_error`,
    /// `server_error`.
    pub kind: &'static str,
    /// What went wrong, naming the thing (the parameter, the keyword and its JSON pointer).
    pub message: String,
    /// The request parameter at fault, when one is.
    pub param: Option<String>,
    /// A machine-readable code (`unsupported_keyword`, `context_length_exceeded`, …).
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A 400 `invalid_request_error`.
    pub fn bad_request(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            message: message.into(),
            param: param.map(str::to_owned),
            code: None,
        }
    }

    /// The same error with a `code`.
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// 401: a missing or wrong API key.
    pub fn unauthorized() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            kind: "authentication_error",
            message: "invalid or missing API key (send `Authorization: Bearer KEY`)".into(),
            param: None,
            code: Some("invalid_api_key"),
        }
    }

    /// 413: the body is over the limit.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            kind: "invalid_request_error",
            message: format!("request body larger than {limit} bytes"),
            param: None,
            code: Some("request_too_large"),
        }
    }

    /// 429: every slot busy and the queue full.
    pub fn overloaded(active: usize, queued: usize) -> ApiError {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            kind: "rate_limit_error",
            message: format!(
                "server busy: {active} requests running and {queued} queued; retry later"
            ),
            param: None,
            code: Some("server_busy"),
        }
    }

    /// 404 for a path the server does not have.
    pub fn not_found(path: &str) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            kind: "invalid_request_error",
            message: format!("no route {path}"),
            param: None,
            code: Some("not_found"),
        }
    }

    /// 404 for a model this server does not serve (OpenAI's shape: `param: "model"`,
    /// `code: "model_not_found"`).
    pub fn model_not_found(name: &str, served: &str) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            kind: "invalid_request_error",
            message: format!("the model {name:?} does not exist; this server serves {served:?}"),
            param: Some("model".into()),
            code: Some("model_not_found"),
        }
    }

    /// 503 while shutting down.
    pub fn shutting_down() -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "server_error",
            message: "the server is shutting down".into(),
            param: None,
            code: Some("shutting_down"),
        }
    }

    /// 500: something failed inside (the model, the decode loop).
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "server_error",
            message: message.into(),
            param: None,
            code: None,
        }
    }

    /// A constraint that does not compile: 400, naming the keyword and its JSON pointer for
    /// an unsupported schema keyword (`code: unsupported_keyword`), the engine's own message
    /// otherwise. `param` is the request field the constraint came from.
    pub fn constraint(e: &ConstraintError, param: &str) -> ApiError {
        let mut err = ApiError::bad_request(format!("{param}: {e}"), Some(param))
            .with_code("invalid_constraint");
        if let ConstraintError::Schema(s) = e {
            if let SchemaErrorKind::Unsupported { keyword, pointer, .. } = s.kind() {
                err.code = Some("unsupported_keyword");
                err.message = format!(
                    "{param}: unsupported JSON Schema keyword {keyword:?} at {}: {e}",
                    if pointer.is_empty() { "#" } else { pointer }
                );
            }
        }
        err
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry = self.status == StatusCode::TOO_MANY_REQUESTS;
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if retry {
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

/// Why [`serve`](super::serve) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    /// The model did not load.
    Model(crate::model::ModelError),
    /// The address could not be bound (in use, no permission, bad host).
    Bind {
        /// `host:port`.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The async runtime or the server loop failed.
    Io(std::io::Error),
    /// A configuration value is out of range.
    Config(String),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Model(e) => write!(f, "model: {e}"),
            ServerError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            ServerError::Io(e) => write!(f, "server: {e}"),
            ServerError::Config(why) => write!(f, "server config: {why}"),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerError::Model(e) => Some(e),
            ServerError::Bind { source, .. } => Some(source),
            ServerError::Io(e) => Some(e),
            ServerError::Config(_) => None,
        }
    }
}
