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
//! Ids are hex, as OTLP/JSON has them: the trace id the round's UUID, span
//! ids the first 8 bytes of SHA-256 over the round id and what the span is,
//! so exporting twice gives the same ids. Times are Unix nanoseconds as
//! decimal strings.

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
        let line = round_traces(round, events).to_string();
        writeln!(out, "{line}").map_err(written)
    })?;
    out.flush().map_err(written)?;
    Ok(stats)
}

/// The OTLP span kinds used here.
const KIND_INTERNAL: u8 = 1;
const KIND_SERVER: u8 = 2;
const KIND_CLIENT: u8 = 3;
/// OTLP status codes.
const STATUS_OK: u8 = 1;
const STATUS_ERROR: u8 = 2;

fn written(e: std::io::Error) -> StoreError {
    StoreError::Io {
        what: "writing the OTLP export failed".into(),
        source: e,
    }
}

/// One round as one OTLP/JSON `TracesData` object.
pub fn round_traces(round: &RoundRecord, events: &[EventRecord]) -> Value {
    let trace_id = round.round_id.replace('-', "");
    let root_id = span_id(&round.round_id, "round");
    let start = nanos(&round.created_at);
    let end = events.last().map_or(start.clone(), |e| nanos(&e.timestamp));

    let mut children: Vec<Value> = Vec::new();
    let mut root_events = Vec::new();
    // An llm.request waiting for its response; tool requests by call id.
    let mut asking: Option<(&EventRecord, Value)> = None;
    let mut tools: Vec<(&EventRecord, Value)> = Vec::new();
    let (mut route, mut auth_level, mut command) = (None, None, None);
    for e in events {
        let payload: Value = serde_json::from_str(&e.payload).unwrap_or(Value::Null);
        match e.event_type.as_str() {
            "llm.request" => {
                if let Some((req, p)) = asking.take() {
                    // A request with no answer: its span ends where it began.
                    children.push(llm_span(&trace_id, &root_id, round, req, &p, None));
                }
                asking = Some((e, payload));
                continue;
            }
            "llm.response" => {
                if let Some((req, p)) = asking.take() {
                    children.push(llm_span(
                        &trace_id,
                        &root_id,
                        round,
                        req,
                        &p,
                        Some((e, &payload)),
                    ));
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
                    children.push(tool_span(&trace_id, &root_id, round, req, &p, e, &payload));
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
        children.push(llm_span(&trace_id, &root_id, round, req, &p, None));
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
            json!({"code": STATUS_ERROR, "message": round.failure_reason.clone().unwrap_or(code)})
        }
        "open" => json!({}),
        _ => json!({"code": STATUS_OK}),
    };
    let root = json!({
        "traceId": trace_id,
        "spanId": root_id,
        "name": "invoke_agent caal",
        "kind": KIND_SERVER,
        "startTimeUnixNano": start,
        "endTimeUnixNano": end,
        "attributes": attributes,
        "events": root_events,
        "status": status,
    });
    let mut spans = vec![root];
    spans.extend(children);
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [
                attr("service.name", "caal"),
                attr("service.version", env!("CARGO_PKG_VERSION")),
                attr("caal.library_id", &round.library_id),
            ]},
            "scopeSpans": [{
                "scope": {"name": "caal.trace", "version": env!("CARGO_PKG_VERSION")},
                "spans": spans,
            }],
        }],
    })
}

fn llm_span(
    trace_id: &str,
    parent: &str,
    round: &RoundRecord,
    request: &EventRecord,
    asked: &Value,
    answer: Option<(&EventRecord, &Value)>,
) -> Value {
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
        attr("gen_ai.conversation.id", &round.conversation_id),
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
            attributes.push(json!({"key": "gen_ai.response.finish_reasons",
                                   "value": {"arrayValue": {"values": [{"stringValue": finish}]}}}));
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
                    json!({"code": STATUS_ERROR, "message": err})
                }
                None => json!({"code": STATUS_OK}),
            };
            (nanos(&e.timestamp), status)
        }
        None => (
            nanos(&request.timestamp),
            json!({"code": STATUS_ERROR, "message": "no answer was recorded"}),
        ),
    };
    child_span(
        (trace_id, parent, round),
        request,
        format!("{operation} {model}"),
        KIND_CLIENT,
        end,
        json!({"attributes": attributes, "events": events, "status": status}),
    )
}

fn tool_span(
    trace_id: &str,
    parent: &str,
    round: &RoundRecord,
    request: &EventRecord,
    asked: &Value,
    response: &EventRecord,
    got: &Value,
) -> Value {
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
        Some("ok") => json!({"code": STATUS_OK}),
        other => {
            let kind = other.unwrap_or("failed");
            attributes.push(attr("error.type", kind));
            json!({"code": STATUS_ERROR, "message": format!("the tool answered {kind}")})
        }
    };
    child_span(
        (trace_id, parent, round),
        request,
        format!("execute_tool {tool}"),
        KIND_INTERNAL,
        nanos(&response.timestamp),
        json!({"attributes": attributes, "events": [span_event(request), span_event(response)],
               "status": status}),
    )
}

/// A child of the round's span, begun by `request`: its ids, name, kind and
/// times, with `rest` (attributes, events, status) merged in.
fn child_span(
    (trace_id, parent, round): (&str, &str, &RoundRecord),
    request: &EventRecord,
    name: String,
    kind: u8,
    end: String,
    rest: Value,
) -> Value {
    let mut span = json!({
        "traceId": trace_id,
        "spanId": span_id(&round.round_id, &format!("event-{}", request.event_seq)),
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": nanos(&request.timestamp),
        "endTimeUnixNano": end,
    });
    if let (Some(span), Value::Object(rest)) = (span.as_object_mut(), rest) {
        span.extend(rest);
    }
    span
}

/// An event as a span event, pointing at the chain.
fn span_event(e: &EventRecord) -> Value {
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
    json!({"timeUnixNano": nanos(&e.timestamp), "name": e.event_type, "attributes": attributes})
}

fn attr(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

/// OTLP/JSON writes 64-bit integers as decimal strings.
fn int_attr(key: &str, value: i64) -> Value {
    json!({"key": key, "value": {"intValue": value.to_string()}})
}

/// The first 8 bytes of SHA-256 over the round id and what the span is, hex.
fn span_id(round_id: &str, what: &str) -> String {
    let digest = Sha256::digest(format!("{round_id}/{what}").as_bytes());
    crate::crypto::hex(&digest[..8])
}

/// An RFC 3339 time as Unix nanoseconds, a decimal string ("0" if unreadable).
fn nanos(rfc3339: &str) -> String {
    rfc3339
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_nanosecond().to_string())
        .unwrap_or_else(|_| "0".into())
}
