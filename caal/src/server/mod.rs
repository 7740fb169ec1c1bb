//! `caal serve`: the HTTP API (JSON, bearer token), the live event stream
//! (Server-Sent Events, resumable with `Last-Event-ID`), and the web page.
//!
//! [`serve`] takes a bound listener and a shutdown future, so tests bind
//! 127.0.0.1:0 and stop cleanly. The engine is synchronous (SQLite, a writer
//! thread); handlers run it on the blocking pool.

pub mod auth;
pub(crate) mod conns;
mod error;
pub mod protocols;
mod voice;

use std::{
    convert::Infallible,
    future::Future,
    io,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, Path, Query, Request, State, rejection::JsonRejection},
    http::{HeaderMap, StatusCode, header},
    middleware::{self, Next},
    response::{
        Html, IntoResponse, Response,
        sse::{Event as SseEvent, KeepAlive, Sse},
    },
    routing::{delete, get, post},
};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{Semaphore, watch},
};

pub(crate) use conns::Backoff;
pub use conns::raise_descriptor_limit;
pub use error::AppError;

use crate::{
    auth::Door,
    ids::{BucketId, ConversationId},
    memory::{ItemRef, Match},
    round::{
        Channel, Engine, OperatorOutcome, OperatorWrite, OverrideReason, PendingView, RoundResult,
    },
    trace::EventRecord,
};

/// Largest request body accepted; more is refused with 413.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A peer has this long to send a request's headers; a keep-alive
/// connection with no next request is closed after it too.
pub const HEADER_WITHIN: Duration = Duration::from_secs(10);

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    engine: Engine,
    token: Arc<String>,
    commits: watch::Receiver<i64>,
    closing: watch::Sender<bool>,
    started: Instant,
    /// LiveKit's keys (`LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET`), for its webhooks.
    livekit: Option<Arc<crate::voice::livekit::Keys>>,
    /// Host names the service answers to beyond IP literals and localhost.
    hosts: Arc<Vec<String>>,
    /// HTTP connections served at once.
    http_connections: usize,
    /// Speech to or from text for the doors, one job per core at a time
    /// (the rest wait their turn rather than crowd the cores and memory).
    pub(crate) speech: Arc<Semaphore>,
    /// Where ended rounds are shipped (`caal serve --ship`), if anywhere.
    shipping: Option<Arc<String>>,
}

impl AppState {
    /// Wires the engine's commits to live streams.
    pub fn new(engine: Engine, token: String) -> Self {
        let last = engine.store().reader().last_event_id().unwrap_or(0);
        let (tx, commits) = watch::channel(last);
        engine.store().on_commit(move |id| {
            tx.send_replace(id);
        });
        let hosts = engine
            .config()
            .doors
            .hosts
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let wyoming = engine.config().doors.wyoming.max_connections;
        Self {
            engine,
            token: Arc::new(token),
            commits,
            closing: watch::channel(false).0,
            started: Instant::now(),
            livekit: crate::voice::livekit::Keys::from_env(&|k| std::env::var(k).ok())
                .ok()
                .map(Arc::new),
            hosts: Arc::new(hosts),
            http_connections: conns::http_cap(conns::descriptor_limit(), wyoming),
            speech: Arc::new(Semaphore::new(cores)),
            shipping: None,
        }
    }

    /// Names the receiver rounds are shipped to, for the page (`/api/ship`).
    pub fn with_shipping(self, endpoint: Option<String>) -> Self {
        Self {
            shipping: endpoint.map(Arc::new),
            ..self
        }
    }

    /// Serve at most `n` HTTP connections at once (tests; by default the
    /// share of the descriptor limit the doors leave, at most 2,048).
    pub fn with_http_connections(self, n: usize) -> Self {
        Self {
            http_connections: n.max(1),
            ..self
        }
    }
}

/// The HTTP application: `/api/*` behind the token, the page at `/`.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/chat", post(chat))
        .route("/conversations", get(conversations))
        .route("/conversations/{id}/rounds", get(rounds))
        .route("/rounds/{round_id}", get(round))
        .route("/rounds/{round_id}/feedback", post(feedback))
        .route("/trace/export", get(export))
        .route("/trace/search", get(search))
        .route("/replay", post(replay))
        .route("/audio/{id}", get(audio))
        .route("/trace/verify", get(verify))
        .route("/pending", get(pending))
        .route("/timers", get(timers))
        .route("/timers/{id}/cancel", post(cancel_timer))
        .route("/reminders/{id}/cancel", post(cancel_reminder))
        .route("/jobs", get(jobs))
        .route("/jobs/{id}", get(job))
        .route("/jobs/{id}/cancel", post(cancel_job))
        .route("/pending/{id}/confirm", post(confirm))
        .route("/pending/{id}/deny", post(deny))
        .route("/buckets", get(buckets))
        .route("/buckets/{id}", get(bucket_package))
        .route("/buckets/{id}/items", get(bucket_items).post(bucket_add))
        .route("/buckets/{id}/items/{item_id}", delete(bucket_forget))
        .route("/buckets/{id}/items/{item_id}/pin", post(bucket_pin))
        .route("/buckets/{id}/items/{item_id}/unpin", post(bucket_unpin))
        .route("/memory/search", get(memory_search))
        .route("/events", get(events))
        .route("/health", get(health))
        .route("/ship", get(ship))
        .route("/openapi.json", get(openapi))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(error::in_api_shape));
    // The OpenAI-compatible door, its errors in OpenAI's shape.
    let v1 = Router::new()
        .route(
            "/chat/completions",
            post(protocols::openai::chat_completions),
        )
        .route("/models", get(protocols::openai::models))
        .fallback(protocols::openai::not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            protocols::openai::require_token,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES));
    // MCP over streamable HTTP, behind the same token.
    let mcp = Router::new()
        .route_service("/mcp", protocols::mcp::http_service(state.engine.clone()))
        .layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .nest("/api", api)
        .nest("/v1", v1)
        .merge(mcp)
        // The socket's token comes in its first message; the webhook's
        // signature is LiveKit's own.
        .route("/voice/stream", get(voice::stream))
        .route("/livekit/webhook", post(voice::livekit_webhook))
        .route("/", get(page))
        .route("/voice", get(voice_page))
        .fallback(not_found)
        .layer(middleware::from_fn(log_request))
        .layer(middleware::from_fn_with_state(state.clone(), guard_host))
        .with_state(state)
}

/// Every answer may not be framed by another page (clickjacking the
/// confirm button) and is not sniffed; a request whose `Host` names a
/// domain the service was not told it answers to is refused (DNS
/// rebinding: a page elsewhere whose name points at 127.0.0.1).
async fn guard_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned);
    let mut response = match host {
        Some(host) if !host_allowed(&host, &state.hosts) => {
            tracing::warn!(host = %crate::safety::global().scrub(&host), "request refused: Host not served");
            AppError::MisdirectedHost {
                host: crate::safety::global().scrub(&host).into_owned(),
            }
            .into_response()
        }
        _ => next.run(request).await,
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, "frame-ancestors 'none'"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, header::HeaderValue::from_static(value));
    }
    response
}

/// An IP literal, localhost (and its subdomains), or a configured name; the port is ignored.
fn host_allowed(host: &str, configured: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.strip_prefix('[') {
        // [::1]:8377
        Some(v6) => {
            return v6
                .split(']')
                .next()
                .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
        }
        None => host.rsplit_once(':').map_or(host.as_str(), |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host.as_str()
            }
        }),
    };
    name.parse::<std::net::IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || configured.iter().any(|c| c == name)
}

/// Serves until `shutdown` resolves; in-flight requests finish, live streams end.
/// Connections are bounded (`conns`): at most `http_connections` at once, a
/// newcomer at the cap taking the place of the longest idle one, headers
/// within [`HEADER_WITHIN`].
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let closing = state.closing.clone();
    let slots = conns::Slots::new(state.http_connections);
    let app = app(state);
    // Each connection's task holds a receiver; when all are gone, all ended.
    let (ended_tx, ended_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    let mut backoff = Backoff::default();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff.reset();
                    stream
                }
                Err(e) if conns::passing(&e) => continue,
                Err(e) => {
                    backoff.wait(&format!("cannot accept a connection: {e}")).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let held = match slots.admit() {
            conns::Admitted::Yes { held, evicted } => {
                if evicted {
                    backoff.note(
                        "at the connection cap: the longest idle connection gave way to a new one",
                    );
                }
                held
            }
            conns::Admitted::Full => {
                backoff.note("at the connection cap with every connection busy: a new one was closed on arrival");
                continue;
            }
        };
        tokio::spawn(conns::serve_http(
            stream,
            app.clone(),
            held,
            closing.subscribe(),
            ended_rx.clone(),
        ));
    }
    closing.send_replace(true);
    drop(listener);
    drop(ended_rx);
    ended_tx.closed().await;
    Ok(())
}

/// Whether a request carries the service's bearer token.
pub(crate) fn token_holds(state: &AppState, request: &Request) -> bool {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    auth::authorized(header, &state.token)
}

async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if token_holds(&state, &request) {
        next.run(request).await
    } else {
        AppError::Unauthorized.into_response()
    }
}

/// One log line per API call (scrubbed like every log line).
async fn log_request(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(%method, %path, status = response.status().as_u16(), ms = format!("{ms:.2}"), "request");
    response
}

async fn not_found() -> AppError {
    AppError::NotFound {
        what: "route".into(),
    }
}

/// Runs blocking engine work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    tokio::task::spawn_blocking(f).await?
}

fn conversation(id: &str) -> Result<ConversationId, AppError> {
    id.parse().map_err(|e: crate::ids::InvalidId| {
        AppError::bad_request("conversation_id.invalid", e.to_string())
    })
}

/// A JSON body, or an error in the API's own shape (413 when too large).
fn json_body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, AppError> {
    match body {
        Ok(Json(v)) => Ok(v),
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(AppError::TooLarge)
        }
        Err(rejection) => Err(AppError::bad_request("body.invalid", rejection.body_text())),
    }
}

#[derive(Deserialize)]
struct ChatRequest {
    conversation_id: Option<String>,
    text: String,
    /// The area the client is in ("turn on the lights" acts there).
    area: Option<String>,
}

async fn chat(
    State(state): State<AppState>,
    body: Result<Json<ChatRequest>, JsonRejection>,
) -> Result<Json<RoundResult>, AppError> {
    let request = json_body(body)?;
    let area = match request.area.as_deref() {
        Some(said) => Some(
            state
                .engine
                .area(said)
                .map_err(|e| AppError::bad_request("area.unknown", e))?,
        ),
        None => None,
    };
    let origin = state.engine.origin(Door::Api, "token").in_area(area);
    let conversation = conversation(request.conversation_id.as_deref().unwrap_or("default"))?;
    if let Some(door) = Door::owning(conversation.as_str()) {
        return Err(AppError::bad_request(
            "conversation_id.reserved",
            format!(
                "conversations that begin with {:?} belong to the {door} door; name another one (e.g. \"kitchen\")",
                door.namespace().unwrap_or_default()
            ),
        ));
    }
    let engine = state.engine.clone();
    let result = blocking(move || {
        Ok(engine.round_from(&origin, &conversation, &request.text, Channel::Api)?)
    })
    .await?;
    Ok(Json(result))
}

async fn conversations(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let engine = state.engine.clone();
    let list = blocking(move || Ok(engine.store().reader().conversations()?)).await?;
    Ok(Json(json!({"conversations": list})))
}

#[derive(Deserialize)]
struct Page {
    limit: Option<usize>,
    /// Rounds with round_seq below this (the page before).
    before: Option<i64>,
}

async fn rounds(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(page): Query<Page>,
) -> Result<Json<Value>, AppError> {
    let conversation = conversation(&id)?;
    let limit = page.limit.unwrap_or(50).clamp(1, 500);
    let engine = state.engine.clone();
    let (rounds, has_more) = blocking(move || {
        let reader = engine.store().reader();
        let (rounds, has_more) = reader.rounds_page(&conversation, page.before, limit)?;
        // Each round carries its reasoning inline when it decided or ran commands.
        let mut with_reasoning = Vec::with_capacity(rounds.len());
        for r in rounds {
            let reasoning =
                crate::reasoning::ledger::reasoning_of_round(reader, &r.round.round_id)?;
            let mut value = json!(r);
            if let Some(reasoning) = reasoning {
                value["reasoning"] = json!(reasoning);
            }
            // The verdict that stands on it, if anyone gave one.
            if let Some(last) = reader.feedback_on(&r.round.round_id)?.last() {
                let p: Value = serde_json::from_str(&last.payload).unwrap_or_default();
                value["feedback"] = json!({"verdict": p["verdict"], "note": p["note"],
                    "by": p["by"], "round_id": last.round_id});
            }
            with_reasoning.push((r.round.round_seq, value));
        }
        Ok((with_reasoning, has_more))
    })
    .await?;
    let next = has_more
        .then(|| rounds.first().map(|(seq, _)| *seq))
        .flatten();
    let rounds: Vec<Value> = rounds.into_iter().map(|(_, v)| v).collect();
    Ok(Json(
        json!({"rounds": rounds, "has_more": has_more, "before": next}),
    ))
}

fn event_json(e: &EventRecord) -> Value {
    serde_json::from_str(&e.to_json_line()).unwrap_or(Value::Null)
}

/// A round and its events in order, `{"round", "events"}` (the API's
/// `/rounds/{id}` and MCP's `round_show`); None if there is no such round.
pub(crate) fn round_json(
    engine: &Engine,
    round_id: &str,
) -> Result<Option<Value>, crate::trace::StoreError> {
    let reader = engine.store().reader();
    let Some((round, events)) = reader.round(round_id)? else {
        return Ok(None);
    };
    // What people said of it, recorded in later rounds.
    let feedback = reader.feedback_on(round_id)?;
    Ok(Some(json!({"round": round,
        "events": events.iter().map(event_json).collect::<Vec<_>>(),
        "feedback": feedback.iter().map(event_json).collect::<Vec<_>>()})))
}

async fn round(
    State(state): State<AppState>,
    Path(round_id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let engine = state.engine.clone();
    let found = blocking(move || Ok(round_json(&engine, &round_id)?)).await?;
    found.map(Json).ok_or_else(|| AppError::NotFound {
        what: "round".into(),
    })
}

#[derive(Deserialize)]
struct TraceSearchQuery {
    q: Option<String>,
    conversation: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    since: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/trace/search?q=…[&conversation=][&type=][&since=][&limit=]`:
/// what was said, answered and decided, newest first (FTS5).
async fn search(
    State(state): State<AppState>,
    Query(query): Query<TraceSearchQuery>,
) -> Result<Json<Value>, AppError> {
    let q = query.q.filter(|q| !q.trim().is_empty()).ok_or_else(|| {
        AppError::bad_request(
            "q.missing",
            "give the words to search for as ?q=kitchen+lights",
        )
    })?;
    let conversation = query
        .conversation
        .as_deref()
        .map(conversation)
        .transpose()?;
    let since = query
        .since
        .as_deref()
        .map(crate::export::training::parse_since)
        .transpose()
        .map_err(|e| AppError::bad_request("since.invalid", e))?;
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let engine = state.engine.clone();
    let hits = blocking(move || {
        let filter = crate::trace::SearchFilter {
            conversation: conversation.as_ref(),
            event_type: query.event_type.as_deref(),
            since,
            limit,
        };
        Ok(engine.store().reader().search(&q, &filter)?)
    })
    .await?;
    Ok(Json(json!({"hits": hits})))
}

/// `POST /api/replay` `{"config": TOML, "conversation"?, "since"?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayBody {
    config: String,
    conversation: Option<String>,
    since: Option<String>,
}

/// Every stored input routed again through `config` (merged over the
/// built-in defaults, as `caal --config FILE replay` does), in memory:
/// nothing runs, nothing is recorded, no model is asked.
async fn replay(
    State(state): State<AppState>,
    body: Result<Json<ReplayBody>, JsonRejection>,
) -> Result<Json<crate::router::replay::ReplayReport>, AppError> {
    let body = json_body(body)?;
    let config = crate::config::Config::from_toml_over_defaults(&body.config)
        .map_err(|e| AppError::bad_request("config.invalid", e.to_string()))?;
    let only = body.conversation.as_deref().map(conversation).transpose()?;
    let since = body
        .since
        .as_deref()
        .map(crate::export::training::parse_since)
        .transpose()
        .map_err(|e| AppError::bad_request("since.invalid", e))?;
    let engine = state.engine.clone();
    let report = blocking(move || {
        let (router, _) = crate::router::Router::configured(&config, &|k| std::env::var(k).ok())
            .map_err(|e| AppError::bad_request("config.invalid", e.to_string()))?;
        Ok(crate::router::replay::replay(
            engine.store().reader(),
            &router,
            crate::router::Bars::of(&config.voice),
            only.as_ref(),
            since,
            &mut |_| {},
        )?)
    })
    .await?;
    Ok(Json(report))
}

/// `GET /api/audio/{id}`: the kept audio of a voice round (WAV), if its
/// file is still there and still hashes to what the trace recorded.
async fn audio(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let engine = state.engine.clone();
    let found = blocking(move || {
        let Some(a) = crate::voice::store::get(engine.state(), &id)? else {
            return Ok(None);
        };
        if !crate::voice::store::file_matches(&a) {
            return Err(AppError::Conflict {
                code: "audio.gone",
                message: format!(
                    "audio {id} is not kept any more, or its file no longer matches its hash {}",
                    a.sha256
                ),
            });
        }
        let bytes = std::fs::read(&a.path).map_err(|e| AppError::Internal(e.to_string()))?;
        Ok(Some((bytes, a.sha256)))
    })
    .await?;
    let (bytes, sha256) = found.ok_or_else(|| AppError::NotFound {
        what: "audio".into(),
    })?;
    Ok((
        [
            (header::CONTENT_TYPE, "audio/wav".to_owned()),
            (header::HeaderName::from_static("x-caal-sha256"), sha256),
        ],
        bytes,
    )
        .into_response())
}

#[derive(Deserialize)]
struct ExportQuery {
    conversation: Option<String>,
}

/// Streamed JSONL, the same bytes as `caal trace export`.
async fn export(
    State(state): State<AppState>,
    Query(q): Query<ExportQuery>,
) -> Result<Response, AppError> {
    let conversation = q.conversation.as_deref().map(conversation).transpose()?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, io::Error>>(16);
    let engine = state.engine.clone();
    tokio::task::spawn_blocking(move || {
        let mut sink = io::BufWriter::with_capacity(64 * 1024, ChannelWriter(tx.clone()));
        if let Err(e) =
            engine
                .store()
                .reader()
                .export(conversation.as_ref(), &mut sink, &mut |_| {})
        {
            let _ = tx.blocking_send(Err(io::Error::other(e.to_string())));
        }
    });
    let body = Body::from_stream(stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    }));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// Bytes written here go to a streamed response body.
struct ChannelWriter(tokio::sync::mpsc::Sender<Result<Bytes, io::Error>>);

impl io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[derive(Deserialize)]
struct VerifyQuery {
    conversation: Option<String>,
}

/// `GET /api/trace/verify[?conversation=]`: the chain check, of one
/// conversation or all, with this data dir's receipt key (the key a page
/// verifies receipts against).
async fn verify(
    State(state): State<AppState>,
    Query(query): Query<VerifyQuery>,
) -> Result<Json<Value>, AppError> {
    let only = query
        .conversation
        .as_deref()
        .map(conversation)
        .transpose()?;
    let engine = state.engine.clone();
    let (report, key) = blocking(move || {
        let key = crate::crypto::public_key_hex(&engine.receipt_key().verifying_key());
        Ok((engine.store().reader().verify(only.as_ref())?, key))
    })
    .await?;
    let mut value = json!(report);
    value["receipt_public_key"] = json!(key);
    Ok(Json(value))
}

async fn pending(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let engine = state.engine.clone();
    let list = blocking(move || Ok(engine.state().pendings(None)?)).await?;
    let views: Vec<Value> = list
        .iter()
        .map(|(c, p)| json!({"conversation_id": c, "pending": PendingView::of(p)}))
        .collect();
    Ok(Json(json!({"pending": views})))
}

#[derive(Deserialize)]
struct TimersQuery {
    conversation: Option<String>,
}

/// Timers (running and paused) and reminders to come, with what is left.
async fn timers(
    State(state): State<AppState>,
    Query(q): Query<TimersQuery>,
) -> Result<Json<Value>, AppError> {
    if let Some(c) = &q.conversation {
        conversation(c)?;
    }
    let engine = state.engine.clone();
    let scheduled = blocking(move || Ok(engine.scheduled(q.conversation.as_deref())?)).await?;
    Ok(Json(json!(scheduled)))
}

async fn cancel_timer(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    cancel_scheduled(state, "timer", &id).await
}

async fn cancel_reminder(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    cancel_scheduled(state, "reminder", &id).await
}

/// Recorded as a round (channel `api`) of the conversation that set it.
async fn cancel_scheduled(
    state: AppState,
    kind: &'static str,
    id: &str,
) -> Result<Json<Value>, AppError> {
    let id: i64 = id.parse().map_err(|_| {
        AppError::bad_request(
            "id.invalid",
            format!("{id:?} is not a {kind} id; GET /api/timers lists them"),
        )
    })?;
    let engine = state.engine.clone();
    match blocking(move || Ok(engine.cancel_scheduled(kind, id, Channel::Api)?)).await? {
        Some(said) => Ok(Json(
            json!({"cancelled": {"kind": kind, "id": id}, "reply": said}),
        )),
        None => Err(AppError::NotFound {
            what: format!("{kind} {id} to come (it rang, was cancelled, or never was)"),
        }),
    }
}

#[derive(Deserialize)]
struct JobsQuery {
    limit: Option<usize>,
}

/// Background jobs: queued and running first, then the newest.
async fn jobs(
    State(state): State<AppState>,
    Query(q): Query<JobsQuery>,
) -> Result<Json<Value>, AppError> {
    let engine = state.engine.clone();
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let list = blocking(move || Ok(engine.jobs(limit)?)).await?;
    Ok(Json(json!({"jobs": list})))
}

async fn job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let engine = state.engine.clone();
    let found = blocking(move || {
        Ok(engine
            .state()
            .with(|c| crate::schedule::jobs::get(c, &id))?)
    })
    .await?;
    found
        .map(|j| Json(json!(j)))
        .ok_or_else(|| AppError::NotFound { what: "job".into() })
}

/// Stops a queued or running job, told (channel `api`) in the conversation that asked.
async fn cancel_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let engine = state.engine.clone();
    let shown = id.clone();
    match blocking(move || Ok(engine.cancel_job(&id, Channel::Api)?)).await? {
        Some(said) => Ok(Json(json!({"cancelled": shown, "reply": said}))),
        None => Err(AppError::NotFound {
            what: "queued or running job (it ended, or never was)".into(),
        }),
    }
}

#[derive(Deserialize, Default)]
struct ConfirmBody {
    /// Why a "yes" overrides failed reasoning checks; recorded in the receipt.
    override_reason: Option<OverrideReason>,
}

/// A "yes" from a UI; the body is optional (`{"override_reason": …}`).
async fn confirm(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<RoundResult>, AppError> {
    let reason = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        serde_json::from_slice::<ConfirmBody>(&body)
            .map_err(|e| AppError::bad_request("body.invalid", format!("{e}; send {{\"override_reason\": \"accepted_risk\"}} or nothing (false_positive, accepted_risk, emergency_override, threshold_too_strict)")))?
            .override_reason
    };
    decide(state, id, true, reason).await
}

async fn deny(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<RoundResult>, AppError> {
    decide(state, id, false, None).await
}

/// A confirmation answered from a UI: a round in its conversation, recorded
/// with channel `ui`, that answers exactly that confirmation.
async fn decide(
    state: AppState,
    confirmation_id: String,
    accept: bool,
    override_reason: Option<OverrideReason>,
) -> Result<Json<RoundResult>, AppError> {
    let origin = state.engine.origin(Door::Ui, "token");
    let engine = state.engine.clone();
    let result = blocking(move || {
        let found = engine
            .state()
            .pendings(None)?
            .into_iter()
            .find(|(_, p)| p.confirmation_id == confirmation_id);
        let Some((conversation, _)) = found else {
            return Err(AppError::NotFound {
                what: "pending confirmation (it may have been answered or replaced)".into(),
            });
        };
        let conversation = conversation
            .parse()
            .map_err(|e: crate::ids::InvalidId| AppError::Internal(e.to_string()))?;
        Ok(engine.answer_confirmation(&origin, &conversation, accept, override_reason)?)
    })
    .await?;
    Ok(Json(result))
}

fn bucket_id(id: &str) -> Result<BucketId, AppError> {
    id.parse().map_err(|e: crate::ids::InvalidId| {
        AppError::bad_request("bucket_id.invalid", e.to_string())
    })
}

/// Every bucket's register, most recently written first.
async fn buckets(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let engine = state.engine.clone();
    let registers = blocking(move || Ok(engine.memory().registers()?)).await?;
    Ok(Json(json!({"buckets": registers})))
}

/// The bucket's context package (from the cache while the bucket is unchanged).
async fn bucket_package(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let bucket = bucket_id(&id)?;
    let engine = state.engine.clone();
    let package = blocking(move || {
        let now = engine.now_ms();
        Ok(engine.memory().package(&bucket, now)?)
    })
    .await?;
    Ok(Json(json!(*package)))
}

async fn bucket_items(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let bucket = bucket_id(&id)?;
    let engine = state.engine.clone();
    let items = blocking(move || {
        let now = engine.now_ms();
        Ok(engine.memory().items(&bucket, now)?)
    })
    .await?;
    Ok(Json(json!({"items": items})))
}

/// `POST /api/rounds/{id}/feedback`: `{"verdict": "good"|"bad", "note"?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedbackBody {
    verdict: String,
    #[serde(default)]
    note: Option<String>,
    /// `ui` from the page; anything else is recorded as `api`.
    #[serde(default)]
    from: Option<String>,
}

async fn feedback(
    State(state): State<AppState>,
    Path(round_id): Path<String>,
    body: Result<Json<FeedbackBody>, JsonRejection>,
) -> Result<Json<crate::round::FeedbackOutcome>, AppError> {
    let body = json_body(body)?;
    let verdict: crate::config::Verdict = body
        .verdict
        .parse()
        .map_err(|e: String| AppError::bad_request("verdict.invalid", e))?;
    let channel = match body.from.as_deref() {
        Some("ui") => Channel::Ui,
        _ => Channel::Api,
    };
    let engine = state.engine.clone();
    let done =
        blocking(move || Ok(engine.feedback(&round_id, verdict, body.note.as_deref(), channel)?))
            .await?;
    Ok(Json(done))
}

#[derive(Deserialize)]
struct AddItem {
    content: String,
    #[serde(default)]
    pin: bool,
    #[serde(default)]
    refs: Vec<ItemRef>,
}

async fn operator_write(
    state: AppState,
    id: String,
    write: OperatorWrite,
) -> Result<Json<OperatorOutcome>, AppError> {
    let bucket = bucket_id(&id)?;
    let engine = state.engine.clone();
    let outcome =
        blocking(move || Ok(engine.operator_memory(&bucket, write, Channel::Api)?)).await?;
    Ok(Json(outcome))
}

async fn bucket_add(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<AddItem>, JsonRejection>,
) -> Result<Json<OperatorOutcome>, AppError> {
    let add = json_body(body)?;
    let write = OperatorWrite::Add {
        content: add.content,
        refs: add.refs,
        pin: add.pin,
    };
    operator_write(state, id, write).await
}

async fn bucket_pin(
    State(state): State<AppState>,
    Path((id, item_id)): Path<(String, String)>,
) -> Result<Json<OperatorOutcome>, AppError> {
    operator_write(state, id, OperatorWrite::Pin { item_id }).await
}

async fn bucket_unpin(
    State(state): State<AppState>,
    Path((id, item_id)): Path<(String, String)>,
) -> Result<Json<OperatorOutcome>, AppError> {
    operator_write(state, id, OperatorWrite::Unpin { item_id }).await
}

async fn bucket_forget(
    State(state): State<AppState>,
    Path((id, item_id)): Path<(String, String)>,
) -> Result<Json<OperatorOutcome>, AppError> {
    operator_write(state, id, OperatorWrite::Forget { item_id }).await
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
    bucket: Option<String>,
    #[serde(default)]
    any: bool,
    limit: Option<usize>,
}

async fn memory_search(
    State(state): State<AppState>,
    Query(q): Query<SearchQuery>,
) -> Result<Json<Value>, AppError> {
    let bucket = q.bucket.as_deref().map(bucket_id).transpose()?;
    let how = if q.any { Match::Any } else { Match::All };
    let limit = q.limit.unwrap_or(10).clamp(1, 100);
    let engine = state.engine.clone();
    let hits = blocking(move || {
        let now = engine.now_ms();
        Ok(engine
            .memory()
            .search(&q.q, bucket.as_ref(), how, limit, now)?)
    })
    .await?;
    Ok(Json(json!({"hits": hits})))
}

async fn health(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "ok": true,
        "version": env!("CARGO_PKG_VERSION"),
        "library_id": state.engine.store().library_id(),
        "uptime_s": state.started.elapsed().as_secs(),
        "last_event_id": *state.commits.borrow(),
    }))
}

/// Live shipping: the receiver and the backlog the trace holds for it
/// (`caal ship status`); only the endpoint, `null`, when shipping is off.
async fn ship(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    // Off: nothing is counted (a trace never shipped would count every round, each refresh).
    if state.shipping.is_none() {
        return Ok(Json(json!({"endpoint": null})));
    }
    let engine = state.engine.clone();
    let status = blocking(move || Ok(engine.store().reader().ship_status()?)).await?;
    let mut value = json!(status);
    value["endpoint"] = json!(state.shipping.as_deref());
    Ok(Json(value))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// The OpenAPI document of this API.
pub const OPENAPI: &str = include_str!("../../../schemas/openapi.v1.json");

async fn page() -> Html<&'static str> {
    Html(include_str!("page.html"))
}

async fn voice_page() -> Html<&'static str> {
    Html(include_str!("voice.html"))
}

#[derive(Deserialize)]
struct EventsQuery {
    after: Option<i64>,
}

/// Every committed event as it commits. A client that reconnects with
/// `Last-Event-ID` (or `?after=`) gets everything after that id first, read
/// from the store, so nothing is missed.
/// A `reasoning.update` as the stream's `reasoning_update`: the round's
/// decisions so far, without their parameters (those are in the history).
fn reasoning_update(event: &EventRecord) -> Option<String> {
    if event.event_type != "reasoning.update" {
        return None;
    }
    let mut payload: Value = serde_json::from_str(&event.payload).ok()?;
    for d in payload["tool_decisions"].as_array_mut()? {
        if let Some(o) = d.as_object_mut() {
            o.remove("parameters");
        }
    }
    Some(
        json!({"type": "reasoning_update", "conversation_id": event.conversation_id, "round_id": event.round_id,
               "round_seq": event.round_seq, "narrative": payload["narrative"],
               "tool_decisions": payload["tool_decisions"]})
        .to_string(),
    )
}

async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<EventsQuery>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(q.after);
    let mut commits = state.commits.clone();
    let after = resume.unwrap_or_else(|| *commits.borrow_and_update());
    let closing = state.closing.subscribe();
    let buffered: std::collections::VecDeque<(i64, EventRecord)> = Default::default();
    let stream = stream::unfold(
        (state.engine.clone(), after, commits, closing, buffered),
        |(engine, mut after, mut commits, mut closing, mut buffered)| async move {
            loop {
                if *closing.borrow() {
                    return None;
                }
                if let Some((id, event)) = buffered.pop_front() {
                    let sse = SseEvent::default().id(id.to_string());
                    let sse = match reasoning_update(&event) {
                        Some(update) => sse.event("reasoning_update").data(update),
                        None => sse
                            .event(event.event_type.clone())
                            .data(event.to_json_line()),
                    };
                    return Some((Ok(sse), (engine, after, commits, closing, buffered)));
                }
                // Mark what we have seen before reading, so a commit landing
                // in between still wakes us.
                commits.borrow_and_update();
                let reader_engine = engine.clone();
                let batch = tokio::task::spawn_blocking(move || {
                    reader_engine.store().reader().events_after(after, 512)
                })
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
                if let Some((last, _)) = batch.last() {
                    after = *last;
                    buffered.extend(batch);
                    continue;
                }
                tokio::select! {
                    changed = commits.changed() => if changed.is_err() { return None },
                    _ = closing.changed() => return None,
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests;
