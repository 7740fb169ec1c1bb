//! The trace as OpenTelemetry traces (`caal trace export --format otlp`):
//! OTLP/JSON, one `TracesData` object per line, one round per line, so the
//! rounds stream and any OTLP tool (a collector's file receiver, Jaeger,
//! Tempo) can read them.
//!
//! A round is a trace: its id is the round's UUID. The round is the root
//! span, an agent invocation in the GenAI semantic conventions
//! (`invoke_agent caal`, kind SERVER); each model call (an `llm.request`
//! and its `llm.response`) is a child span `chat {model}` (kind CLIENT, with
//! `gen_ai.request.model`, `gen_ai.usage.*`, `gen_ai.response.finish_reasons`);
//! each tool call (a `tool.request` and the `tool.response` of its call id)
//! is a child span `execute_tool {tool}` (kind INTERNAL, `gen_ai.tool.*`).
//! Every event is a span event (on the span it belongs to, else the root)
//! carrying its `event_seq`, status, chain hash and payload, so the export
//! still points at verified evidence. Payloads are as stored: already
//! scrubbed of secrets.
//!
//! Ids: the trace id is the round's UUID, span ids the first 8 bytes of
//! SHA-256 over the round id and what the span is, so exporting (or
//! shipping) twice gives the same ids. The spans are built once, as
//! [`RoundSpans`]; this file writes them as OTLP/JSON (hex ids, Unix
//! nanoseconds as decimal strings) and `ship::wire` as OTLP protobuf.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use std::io::Write;

use crate::ids::ConversationId;
use crate::trace::{EventRecord, ExportStats, RoundRecord, StoreError, TraceReader};

/// Writes every round (of one conversation, or all) as a line of OTLP/JSON.
pub fn export(
    reader: &TraceReader,
    conversation: Option<&ConversationId>,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportStats, StoreError> {
    let stats = reader.each_round(conversation, progress, &mut |round, events| {
        let line = round_spans(round, events).to_json().to_string();
        writeln!(out, "{line}").map_err(written)
    })?;
    out.flush().map_err(written)?;
    Ok(stats)
}

/// OTLP span kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// A span's outcome: unset while the round is open.
#[derive(Clone, Debug, PartialEq)]
pub enum SpanStatus {
    Unset,
    Ok,
    Error(String),
}

/// An attribute's value, of the kinds the spans carry.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    StrList(Vec<String>),
}

/// One `key = value` of a span, an event or the resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub key: &'static str,
    pub value: AttrValue,
}

/// An event of the trace as a span event, pointing at the chain.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    pub time_unix_nano: u64,
    pub name: String,
    pub attributes: Vec<Attr>,
}

/// One span. Ids are lower-case hex (32 and 16 digits).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: SpanKind,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: Vec<Attr>,
    pub events: Vec<SpanEvent>,
    pub status: SpanStatus,
}

/// One round as one resource's spans: the root first, then its children.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundSpans {
    pub resource: Vec<Attr>,
    pub spans: Vec<Span>,
}

/// The instrumentation scope both encodings name.
pub const SCOPE_NAME: &str = "caal.trace";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn written(e: std::io::Error) -> StoreError {
    StoreError::Io {
        what: "writing the OTLP export failed".into(),
        source: e,
    }
}

/// One round as one OTLP/JSON `TracesData` object.
pub fn round_traces(round: &RoundRecord, events: &[EventRecord]) -> Value {
    round_spans(round, events).to_json()
}

/// One round as spans: the round the root, model and tool calls its children.
pub fn round_spans(round: &RoundRecord, events: &[EventRecord]) -> RoundSpans {
    let trace_id = round.round_id.replace('-', "");
    let root_id = span_id(&round.round_id, "round");
    let start = nanos(&round.created_at);
    let end = events.last().map_or(start, |e| nanos(&e.timestamp));
    let ids = Ids {
        trace_id: &trace_id,
        parent: &root_id,
        round,
    };

    let mut children: Vec<Span> = Vec::new();
    let mut root_events = Vec::new();
    // An llm.request waiting for its response; tool requests by call id.
    let mut asking: Option<(&EventRecord, Value)> = None;
    let mut tools: Vec<(&EventRecord, Value)> = Vec::new();
    let (mut route, mut auth_level, mut command) = (None, None, None);
    for e in events {
        // Only the events a span or the root's attributes read are parsed:
        // the rest go out as their stored text (most of a round's events).
        let payload: Value = if READ.contains(&e.event_type.as_str()) {
            serde_json::from_str(&e.payload).unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        match e.event_type.as_str() {
            "llm.request" => {
                if let Some((req, p)) = asking.take() {
                    // A request with no answer: its span ends where it began.
                    children.push(llm_span(&ids, req, &p, None));
                }
                asking = Some((e, payload));
                continue;
            }
            "llm.response" => {
                if let Some((req, p)) = asking.take() {
                    children.push(llm_span(&ids, req, &p, Some((e, &payload))));
                    continue;
                }
            }
            "tool.request" => {
                tools.push((e, payload));
                continue;
            }
            "tool.response" => {
                if let Some(at) = tools.iter().position(|(r, _)| r.call_id == e.call_id) {
                    let (req, p) = tools.remove(at);
                    children.push(tool_span(&ids, req, &p, e, &payload));
                    continue;
                }
            }
            "route.selected" => {
                route = payload["route_code"].as_str().map(str::to_owned);
                auth_level = payload["auth_level"].as_i64();
                command = payload["command_id"].as_str().map(str::to_owned);
            }
            _ => {}
        }
        root_events.push(span_event(e));
    }
    if let Some((req, p)) = asking {
        children.push(llm_span(&ids, req, &p, None));
    }
    // A tool request with no response (the process stopped): an event of the round.
    root_events.extend(tools.into_iter().map(|(req, _)| span_event(req)));

    let mut attributes = vec![
        attr("gen_ai.operation.name", "invoke_agent"),
        attr("gen_ai.agent.name", "caal"),
        attr("gen_ai.conversation.id", &round.conversation_id),
        attr("caal.conversation_id", &round.conversation_id),
        attr("caal.round_id", &round.round_id),
        int_attr("caal.round_seq", round.round_seq),
        attr("caal.channel", &round.channel),
        attr("caal.bucket_id", &round.bucket_id),
        attr("caal.state_in", &round.state_in),
        attr("caal.status", &round.status),
    ];
    attributes.extend(
        [
            ("caal.state_out", round.state_out.as_deref()),
            ("caal.audio_id", round.audio_id.as_deref()),
            ("caal.route_code", route.as_deref()),
            ("caal.command_id", command.as_deref()),
        ]
        .into_iter()
        .filter_map(|(key, value)| value.map(|v| attr(key, v))),
    );
    attributes.extend(auth_level.map(|l| int_attr("caal.auth_level", l)));
    let status = match round.status.as_str() {
        "failed" => {
            let code = round.failure_code.clone().unwrap_or_default();
            attributes.push(attr("error.type", &code));
            SpanStatus::Error(round.failure_reason.clone().unwrap_or(code))
        }
        "open" => SpanStatus::Unset,
        _ => SpanStatus::Ok,
    };
    let root = Span {
        trace_id: trace_id.clone(),
        span_id: root_id.clone(),
        parent_span_id: None,
        name: "invoke_agent caal".into(),
        kind: SpanKind::Server,
        start_unix_nano: start,
        end_unix_nano: end,
        attributes,
        events: root_events,
        status,
    };
    let mut spans = vec![root];
    spans.extend(children);
    RoundSpans {
        resource: vec![
            attr("service.name", "caal"),
            attr("service.version", VERSION),
            attr("caal.library_id", &round.library_id),
        ],
        spans,
    }
}

/// The event types whose payloads `round_spans` reads.
const READ: [&str; 5] = [
    "llm.request",
    "llm.response",
    "tool.request",
    "tool.response",
    "route.selected",
];

/// What every child span of a round shares: its trace, its parent, its round.
struct Ids<'a> {
    trace_id: &'a str,
    parent: &'a str,
    round: &'a RoundRecord,
}

fn llm_span(
    ids: &Ids<'_>,
    request: &EventRecord,
    asked: &Value,
    answer: Option<(&EventRecord, &Value)>,
) -> Span {
    let model = asked["model"].as_str().unwrap_or("unknown");
    let tier = asked["tier"].as_str().unwrap_or("");
    let operation = "chat";
    let mut attributes = vec![
        attr("gen_ai.operation.name", operation),
        attr(
            "gen_ai.provider.name",
            if tier == "local" { "llama.cpp" } else { tier },
        ),
        attr("gen_ai.request.model", model),
        attr("gen_ai.conversation.id", &ids.round.conversation_id),
        attr("caal.llm.tier", tier),
        attr(
            "caal.llm.prompt_hash",
            asked["prompt_hash"].as_str().unwrap_or(""),
        ),
    ];
    if let Some(a) = asked["attempt"].as_i64() {
        attributes.push(int_attr("caal.llm.attempt", a));
    }
    if let Some(p) = asked["purpose"].as_str() {
        attributes.push(attr("caal.llm.purpose", p));
    }
    let mut events = vec![span_event(request)];
    let (end, status) = match answer {
        Some((e, got)) => {
            events.push(span_event(e));
            if let Some(m) = got["model"].as_str() {
                attributes.push(attr("gen_ai.response.model", m));
            }
            let usage = &got["usage"];
            for (key, names) in [
                (
                    "gen_ai.usage.input_tokens",
                    ["prompt_tokens", "input_tokens"],
                ),
                (
                    "gen_ai.usage.output_tokens",
                    ["completion_tokens", "output_tokens"],
                ),
            ] {
                if let Some(n) = names.iter().find_map(|n| usage[*n].as_i64()) {
                    attributes.push(int_attr(key, n));
                }
            }
            let finish = if got["truncated"] == true {
                "length"
            } else if got["tool_calls"].as_array().is_some_and(|c| !c.is_empty()) {
                "tool_calls"
            } else {
                "stop"
            };
            attributes.push(Attr {
                key: "gen_ai.response.finish_reasons",
                value: AttrValue::StrList(vec![finish.into()]),
            });
            let status = match got["error"].as_str() {
                Some(err) => {
                    attributes.push(attr(
                        "error.type",
                        if got["transient"] == true {
                            "transient"
                        } else {
                            "model_error"
                        },
                    ));
                    SpanStatus::Error(err.into())
                }
                None => SpanStatus::Ok,
            };
            (nanos(&e.timestamp), status)
        }
        None => (
            nanos(&request.timestamp),
            SpanStatus::Error("no answer was recorded".into()),
        ),
    };
    child_span(
        ids,
        request,
        (format!("{operation} {model}"), SpanKind::Client, end),
        (attributes, events, status),
    )
}

fn tool_span(
    ids: &Ids<'_>,
    request: &EventRecord,
    asked: &Value,
    response: &EventRecord,
    got: &Value,
) -> Span {
    let tool = asked["tool_id"].as_str().unwrap_or("unknown");
    let mut attributes = vec![
        attr("gen_ai.operation.name", "execute_tool"),
        attr("gen_ai.tool.name", tool),
        attr("gen_ai.tool.type", "extension"),
        attr(
            "gen_ai.tool.call.id",
            request.call_id.as_deref().unwrap_or(""),
        ),
        attr("gen_ai.tool.call.arguments", &asked["inputs"].to_string()),
        attr("gen_ai.tool.call.result", &got["result"].to_string()),
    ];
    if let Some(a) = asked["attempt"].as_i64() {
        attributes.push(int_attr("caal.tool.attempt", a));
    }
    let status = match got["status"].as_str() {
        Some("ok") => SpanStatus::Ok,
        other => {
            let kind = other.unwrap_or("failed");
            attributes.push(attr("error.type", kind));
            SpanStatus::Error(format!("the tool answered {kind}"))
        }
    };
    child_span(
        ids,
        request,
        (
            format!("execute_tool {tool}"),
            SpanKind::Internal,
            nanos(&response.timestamp),
        ),
        (
            attributes,
            vec![span_event(request), span_event(response)],
            status,
        ),
    )
}

/// A child of the round's span, begun by `request`, with its name, kind and
/// end, and its attributes, events and status.
fn child_span(
    ids: &Ids<'_>,
    request: &EventRecord,
    (name, kind, end): (String, SpanKind, u64),
    (attributes, events, status): (Vec<Attr>, Vec<SpanEvent>, SpanStatus),
) -> Span {
    Span {
        trace_id: ids.trace_id.to_owned(),
        span_id: span_id(&ids.round.round_id, &format!("event-{}", request.event_seq)),
        parent_span_id: Some(ids.parent.to_owned()),
        name,
        kind,
        start_unix_nano: nanos(&request.timestamp),
        end_unix_nano: end,
        attributes,
        events,
        status,
    }
}

/// An event as a span event, pointing at the chain.
fn span_event(e: &EventRecord) -> SpanEvent {
    let mut attributes = vec![
        int_attr("caal.event_seq", e.event_seq),
        attr("caal.event_status", &e.status),
        attr("caal.event_hash", &e.hash),
        attr("caal.payload", &e.payload),
    ];
    attributes.extend(e.call_id.as_deref().map(|c| attr("caal.call_id", c)));
    attributes.extend(
        e.failure_code
            .as_deref()
            .map(|c| attr("caal.failure_code", c)),
    );
    SpanEvent {
        time_unix_nano: nanos(&e.timestamp),
        name: e.event_type.clone(),
        attributes,
    }
}

fn attr(key: &'static str, value: &str) -> Attr {
    Attr {
        key,
        value: AttrValue::Str(value.to_owned()),
    }
}

fn int_attr(key: &'static str, value: i64) -> Attr {
    Attr {
        key,
        value: AttrValue::Int(value),
    }
}

/// The first 8 bytes of SHA-256 over the round id and what the span is, hex.
fn span_id(round_id: &str, what: &str) -> String {
    let digest = Sha256::digest(format!("{round_id}/{what}").as_bytes());
    crate::crypto::hex(&digest[..8])
}

/// An RFC 3339 time as Unix nanoseconds (0 if unreadable).
fn nanos(rfc3339: &str) -> u64 {
    rfc3339
        .parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| u64::try_from(t.as_nanosecond()).ok())
        .unwrap_or(0)
}

// ------------------------------------------------------------- OTLP/JSON

impl RoundSpans {
    /// As one OTLP/JSON `TracesData` object.
    pub fn to_json(&self) -> Value {
        json!({
            "resourceSpans": [{
                "resource": {"attributes": json_attrs(&self.resource)},
                "scopeSpans": [{
                    "scope": {"name": SCOPE_NAME, "version": VERSION},
                    "spans": self.spans.iter().map(Span::to_json).collect::<Vec<_>>(),
                }],
            }],
        })
    }
}

impl Span {
    fn to_json(&self) -> Value {
        let status = match &self.status {
            SpanStatus::Unset => json!({}),
            SpanStatus::Ok => json!({"code": 1}),
            SpanStatus::Error(message) => json!({"code": 2, "message": message}),
        };
        let events: Vec<Value> = self
            .events
            .iter()
            .map(|e| {
                json!({"timeUnixNano": e.time_unix_nano.to_string(), "name": e.name,
                       "attributes": json_attrs(&e.attributes)})
            })
            .collect();
        // Keys in the order the export has always written them, the parent
        // after the span's own id.
        let mut span = serde_json::Map::new();
        span.insert("traceId".into(), json!(self.trace_id));
        span.insert("spanId".into(), json!(self.span_id));
        if let Some(parent) = &self.parent_span_id {
            span.insert("parentSpanId".into(), json!(parent));
        }
        for (key, value) in [
            ("name", json!(self.name)),
            ("kind", json!(self.kind as u8)),
            ("startTimeUnixNano", json!(self.start_unix_nano.to_string())),
            ("endTimeUnixNano", json!(self.end_unix_nano.to_string())),
            ("attributes", json!(json_attrs(&self.attributes))),
            ("events", json!(events)),
            ("status", status),
        ] {
            span.insert(key.into(), value);
        }
        Value::Object(span)
    }
}

fn json_attrs(attributes: &[Attr]) -> Vec<Value> {
    attributes
        .iter()
        .map(|a| {
            // OTLP/JSON writes 64-bit integers as decimal strings.
            let value = match &a.value {
                AttrValue::Str(s) => json!({"stringValue": s}),
                AttrValue::Int(n) => json!({"intValue": n.to_string()}),
                AttrValue::StrList(list) => json!({"arrayValue": {"values":
                    list.iter().map(|s| json!({"stringValue": s})).collect::<Vec<_>>()}}),
            };
            json!({"key": a.key, "value": value})
        })
        .collect()
}
