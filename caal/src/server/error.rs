//! The one error type of the HTTP API: rendered as `{"error", "code"}` with
//! the right status; internals go to the log (scrubbed), never to the client.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::json;

use crate::{
    memory::MemoryError,
    round::{OperatorError, RoundError},
    trace::StoreError,
};

#[derive(Debug)]
pub enum AppError {
    BadRequest {
        code: &'static str,
        message: String,
    },
    Unauthorized,
    NotFound {
        what: String,
    },
    Conflict {
        code: &'static str,
        message: String,
    },
    TooLarge,
    /// The request's `Host` is a name the service was not told it answers to.
    MisdirectedHost {
        host: String,
    },
    /// Something broke inside; the details are logged, not sent.
    Internal(String),
}

impl AppError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        AppError::BadRequest {
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            AppError::BadRequest { code, message } => (StatusCode::BAD_REQUEST, code, message),
            AppError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "auth.required",
                "send the API token as `Authorization: Bearer <token>` (see data/api_token)"
                    .to_owned(),
            ),
            AppError::NotFound { what } => (
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no such {what}"),
            ),
            AppError::Conflict { code, message } => (StatusCode::CONFLICT, code, message),
            AppError::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "body.too_large",
                format!("the request body is over {} bytes", super::MAX_BODY_BYTES),
            ),
            AppError::MisdirectedHost { host } => (
                StatusCode::MISDIRECTED_REQUEST,
                "host.not_served",
                format!(
                    "this service does not answer to the host {host:?}; reach it by its address or localhost, or add the name to [doors] hosts (or CAAL_HOSTS)"
                ),
            ),
            AppError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "something went wrong inside caal; see its log".to_owned(),
                )
            }
        };
        let message = crate::safety::global().scrub(&message).into_owned();
        (status, Json(json!({"error": message, "code": code}))).into_response()
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::RoundBusy { .. } => AppError::Conflict {
                code: "round.busy",
                message: e.to_string(),
            },
            // A search that cannot be made is the asker's to fix.
            StoreError::Search(why) => AppError::bad_request("search.invalid", why),
            other => AppError::Internal(other.to_string()),
        }
    }
}

impl From<RoundError> for AppError {
    fn from(e: RoundError) -> Self {
        match e {
            RoundError::EmptyInput => AppError::bad_request("input.empty", e.to_string()),
            RoundError::Store(s) => s.into(),
            RoundError::Memory(m) => m.into(),
        }
    }
}

impl From<tokio::task::JoinError> for AppError {
    fn from(e: tokio::task::JoinError) -> Self {
        AppError::Internal(format!("a blocking task failed: {e}"))
    }
}

impl From<MemoryError> for AppError {
    fn from(e: MemoryError) -> Self {
        match e {
            MemoryError::NoSuchItem { .. } => AppError::NotFound {
                what: "memory item".into(),
            },
            MemoryError::Empty => AppError::bad_request("memory.empty", e.to_string()),
            MemoryError::TooLong { .. } => AppError::bad_request("memory.too_long", e.to_string()),
            MemoryError::EmptyQuery { .. } => AppError::bad_request("search.empty", e.to_string()),
            MemoryError::ReadOnly { .. } => AppError::Internal(e.to_string()),
            MemoryError::Store(s) => s.into(),
        }
    }
}

impl From<crate::round::FeedbackError> for AppError {
    fn from(e: crate::round::FeedbackError) -> Self {
        use crate::round::FeedbackError;
        match e {
            FeedbackError::NoSuchRound(_) => AppError::NotFound {
                what: "round".into(),
            },
            FeedbackError::OnFeedback(_) => AppError::Conflict {
                code: "feedback.on_feedback",
                message: e.to_string(),
            },
            FeedbackError::Store(s) => s.into(),
        }
    }
}

impl From<OperatorError> for AppError {
    fn from(e: OperatorError) -> Self {
        match e {
            OperatorError::Memory(m) => m.into(),
            OperatorError::Store(s) => s.into(),
        }
    }
}

/// Refusals axum makes itself (a path or query that does not parse, a
/// method a route does not take) come as plain text; the API answers every
/// refusal as `{"error", "code"}`, so they are rewritten into that shape.
/// Found by the HTTP fuzz target: a round id of invalid UTF-8.
pub async fn in_api_shape(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method.not_allowed",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "body.content_type",
        StatusCode::PAYLOAD_TOO_LARGE => "body.too_large",
        s if s.is_server_error() => "internal",
        _ => "request.invalid",
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        crate::safety::global().scrub(&text).into_owned()
    };
    (status, Json(json!({"error": message, "code": code}))).into_response()
}
