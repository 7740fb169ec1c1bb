//! The OpenAI-compatible door: `POST /v1/chat/completions` (whole or
//! streamed as server-sent chunks) and `GET /v1/models`, behind the same
//! bearer token as `/api`, so Open WebUI, Home Assistant's OpenAI
//! conversation integrations, LiveKit Agents and every OpenAI SDK can talk
//! to CAAL.
//!
//! The last user message is a round (channel `api`, door `openai`); what
//! came before it is the client's copy of the conversation, which CAAL
//! already holds. The conversation is in the door's own namespace
//! (`openai:…`): the `user` field, else the `X-CAAL-Conversation` header,
//! else derived from the thread's first user message under a key only this
//! server holds (a client that resends its history lands in the same
//! conversation; nobody can work out another's); it is returned in that
//! header and in the body's `caal` object with the round id. A pending
//! confirmation is answered by the next message ("yes"), and only when the
//! thread's last assistant message is the question: another thread that
//! opened with the same words cannot confirm it. Errors come in OpenAI's
//! shape: `{"error": {"message", "type", "param", "code"}}`.

use std::convert::Infallible;

use axum::{
    Json,
    body::Bytes,
    extract::{Request, State, rejection::BytesRejection},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode},
    middleware::Next,
    response::{
        IntoResponse, Response,
        sse::{Event as SseEvent, Sse},
    },
};
use futures_util::stream;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::server::{AppError, AppState, blocking, token_holds};
use crate::{
    auth::Door,
    ids::ConversationId,
    round::{Channel, RoundResult},
};

/// The model name CAAL answers as (any name asked for is answered by it).
pub const MODEL: &str = "caal";

/// The header that names (and returns) the conversation.
pub const CONVERSATION_HEADER: &str = "x-caal-conversation";

/// An error in OpenAI's shape.
pub struct OpenAiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<&'static str>,
    code: Option<&'static str>,
}

impl OpenAiError {
    fn invalid(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
        }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let message = crate::safety::global().scrub(&self.message).into_owned();
        tracing::warn!(status = self.status.as_u16(), %message, "openai request refused");
        let body = json!({"error": {
            "message": message, "type": self.kind, "param": self.param, "code": self.code,
        }});
        (self.status, Json(body)).into_response()
    }
}

/// What the engine's errors are to an OpenAI client.
impl From<AppError> for OpenAiError {
    fn from(e: AppError) -> Self {
        let response = e.into_response();
        let status = response.status();
        let (kind, code) = match status {
            StatusCode::UNAUTHORIZED => ("authentication_error", Some("invalid_api_key")),
            StatusCode::NOT_FOUND => ("invalid_request_error", Some("not_found")),
            StatusCode::PAYLOAD_TOO_LARGE => ("invalid_request_error", Some("body_too_large")),
            s if s.is_server_error() => ("server_error", None),
            _ => ("invalid_request_error", None),
        };
        let message = match status {
            StatusCode::UNAUTHORIZED => {
                "send the API token as `Authorization: Bearer <token>` (the OpenAI client's api_key; see data/api_token)".to_owned()
            }
            StatusCode::PAYLOAD_TOO_LARGE => format!(
                "the request body is over {} bytes",
                crate::server::MAX_BODY_BYTES
            ),
            _ if status.is_server_error() => {
                "something went wrong inside caal; see its log".to_owned()
            }
            _ => status.canonical_reason().unwrap_or("refused").to_owned(),
        };
        Self {
            status,
            message,
            kind,
            param: None,
            code,
        }
    }
}

/// The token, answered in OpenAI's shape.
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if token_holds(&state, &request) {
        next.run(request).await
    } else {
        OpenAiError::from(AppError::Unauthorized).into_response()
    }
}

/// A message's content: text, or parts of which the text ones are read.
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Content {
    fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

#[derive(Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
struct ChatRequest {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    user: Option<String>,
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            OpenAiError::from(AppError::TooLarge)
        } else {
            OpenAiError::invalid(rejection.body_text(), None)
        }
    })?;
    let request: ChatRequest = serde_json::from_slice(&body).map_err(|e| {
        OpenAiError::invalid(
            format!("the body is not a chat completion request: {e}"),
            None,
        )
    })?;
    let messages = request.messages.unwrap_or_default();
    let Some(last) = messages.last() else {
        return Err(OpenAiError::invalid(
            "`messages` is missing or empty; send at least one {\"role\": \"user\", \"content\": \"…\"}",
            Some("messages"),
        ));
    };
    if last.role != "user" {
        return Err(OpenAiError::invalid(
            format!(
                "the last message is from {:?}; CAAL answers the last user message, so end with one",
                last.role
            ),
            Some("messages"),
        ));
    }
    let text = last.content.as_ref().map(Content::text).unwrap_or_default();
    if text.trim().is_empty() {
        return Err(OpenAiError::invalid(
            "the last user message has no text",
            Some("messages"),
        ));
    }
    let origin = state
        .engine
        .origin(Door::OpenAi, "token")
        .heard(last_heard(&messages));
    let conversation = conversation_of(&state, &request.user, &headers, &messages)?;
    let model = request.model.unwrap_or_else(|| MODEL.to_owned());
    let engine = state.engine.clone();
    let id = conversation.clone();
    let result: RoundResult =
        blocking(move || Ok(engine.round_from(&origin, &id, &text, Channel::Api)?)).await?;
    let created = unix_seconds(&state);
    let caal = json!({
        "conversation_id": result.conversation_id,
        "round_id": result.round_id,
        "route_code": result.route_code,
        "status": result.status,
        "pending_confirmation": result.pending_confirmation,
    });
    let completion_id = format!("chatcmpl-{}", result.round_id);
    let mut response = if request.stream {
        // The round is whole before the first byte: the reply is one
        // content chunk, between the role chunk and the finish chunk.
        let chunk = |delta: Value, finish: Value| {
            json!({
                "id": completion_id, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                "caal": caal,
            })
        };
        let events = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": result.reply}), Value::Null),
            chunk(json!({}), json!("stop")),
        ]
        .into_iter()
        .map(|c| SseEvent::default().data(c.to_string()))
        .chain([SseEvent::default().data("[DONE]")])
        .map(Ok::<_, Infallible>);
        Sse::new(stream::iter(events)).into_response()
    } else {
        Json(json!({
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": result.reply},
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "caal": caal,
        }))
        .into_response()
    };
    if let Ok(value) = HeaderValue::from_str(conversation.as_str()) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(CONVERSATION_HEADER), value);
    }
    Ok(response)
}

/// What the thread shows CAAL said last: the assistant message just before
/// the last user message (None when the client sent no history).
fn last_heard(messages: &[Message]) -> Option<String> {
    let (_, before) = messages.split_last()?;
    before
        .iter()
        .rev()
        .find(|m| m.role == "assistant")
        .and_then(|m| m.content.as_ref())
        .map(Content::text)
}

/// The conversation a request continues, in the door's namespace: `user`,
/// the header (its `openai:` kept, not doubled), or derived from the
/// thread's first user message under this server's key.
fn conversation_of(
    state: &AppState,
    user: &Option<String>,
    headers: &HeaderMap,
    messages: &[Message],
) -> Result<ConversationId, OpenAiError> {
    let namespace = Door::OpenAi.namespace().unwrap_or_default();
    let given = user.clone().filter(|u| !u.trim().is_empty()).or_else(|| {
        headers
            .get(CONVERSATION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    if let Some(id) = given {
        let id = id.trim();
        let named = if id.starts_with(namespace) {
            id.to_owned()
        } else {
            format!("{namespace}{id}")
        };
        return named.parse().map_err(|e: crate::ids::InvalidId| {
            let said = crate::safety::global().scrub(id).into_owned();
            OpenAiError::invalid(
                format!("the conversation {said:?} (from `user` or {CONVERSATION_HEADER}) is not usable: {e}"),
                Some("user"),
            )
        });
    }
    let first = messages
        .iter()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.as_ref())
        .map(Content::text)
        .unwrap_or_default();
    let digest = crate::crypto::private_digest(
        state.engine.receipt_key(),
        "openai-thread",
        first.trim().as_bytes(),
    );
    format!("{namespace}{}", &digest[..16])
        .parse()
        .map_err(|e: crate::ids::InvalidId| OpenAiError::invalid(e.to_string(), None))
}

/// Now by the engine's clock, in the seconds OpenAI's `created` counts.
fn unix_seconds(state: &AppState) -> u64 {
    u64::try_from(state.engine.now_ms() / 1000).unwrap_or(0)
}

/// `GET /v1/models`: CAAL is one model.
pub async fn models(State(state): State<AppState>) -> Json<Value> {
    // When this service started.
    let created = unix_seconds(&state).saturating_sub(state.started.elapsed().as_secs());
    Json(json!({
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "created": created, "owned_by": "caal"}],
    }))
}

/// A `/v1` path that is not there, in OpenAI's shape.
pub async fn not_found() -> OpenAiError {
    OpenAiError {
        status: StatusCode::NOT_FOUND,
        message: "no such route; CAAL serves /v1/chat/completions and /v1/models".into(),
        kind: "invalid_request_error",
        param: None,
        code: Some("not_found"),
    }
}
