//! Rounds as an OTLP/HTTP request body: the spans `otlp` builds, as the
//! official protobuf messages (`ExportTraceServiceRequest`, from the
//! `opentelemetry-proto` crate), gzip-compressed.

use std::io::Write as _;

use flate2::{Compression, write::GzEncoder};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse},
    common::v1::{AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span},
};
use prost::Message as _;

use crate::export::otlp::{Attr, AttrValue, RoundSpans, SCOPE_NAME, SpanStatus, VERSION};

/// One request for many rounds: a `ResourceSpans` per round (each names its
/// home, so rounds of one request may come from several).
pub fn request(rounds: &[RoundSpans]) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: rounds.iter().map(resource_spans).collect(),
    }
}

/// The request encoded and gzip-compressed: the body of `POST /v1/traces`.
pub fn body(rounds: &[RoundSpans]) -> Vec<u8> {
    let raw = request(rounds).encode_to_vec();
    // Level 1: spans of one round repeat their keys and ids, so the fastest
    // level already shrinks them several times, at a fraction of the CPU.
    let mut gz = GzEncoder::new(Vec::with_capacity(raw.len() / 4), Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(&raw);
    gz.finish().unwrap_or_default()
}

/// Spans a receiver said it rejected (an OTLP partial success), with its
/// message; `None` when the answer is empty or accepts everything.
pub fn rejected(response: &[u8]) -> Option<(i64, String)> {
    let answer = ExportTraceServiceResponse::decode(response).ok()?;
    let partial = answer.partial_success?;
    (partial.rejected_spans > 0 || !partial.error_message.is_empty())
        .then_some((partial.rejected_spans, partial.error_message))
}

fn resource_spans(round: &RoundSpans) -> ResourceSpans {
    ResourceSpans {
        resource: Some(Resource {
            attributes: key_values(&round.resource),
            ..Default::default()
        }),
        scope_spans: vec![ScopeSpans {
            scope: Some(InstrumentationScope {
                name: SCOPE_NAME.into(),
                version: VERSION.into(),
                ..Default::default()
            }),
            spans: round.spans.iter().map(proto_span).collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn proto_span(s: &crate::export::otlp::Span) -> Span {
    let status = match &s.status {
        SpanStatus::Unset => None,
        SpanStatus::Ok => Some(Status {
            code: 1,
            message: String::new(),
        }),
        SpanStatus::Error(message) => Some(Status {
            code: 2,
            message: message.clone(),
        }),
    };
    Span {
        trace_id: id_bytes(&s.trace_id),
        span_id: id_bytes(&s.span_id),
        parent_span_id: s
            .parent_span_id
            .as_deref()
            .map(id_bytes)
            .unwrap_or_default(),
        name: s.name.clone(),
        kind: s.kind as i32,
        start_time_unix_nano: s.start_unix_nano,
        end_time_unix_nano: s.end_unix_nano,
        attributes: key_values(&s.attributes),
        events: s
            .events
            .iter()
            .map(|e| span::Event {
                time_unix_nano: e.time_unix_nano,
                name: e.name.clone(),
                attributes: key_values(&e.attributes),
                ..Default::default()
            })
            .collect(),
        status,
        ..Default::default()
    }
}

/// Hex ids as bytes (the spans hold them as OTLP/JSON writes them).
fn id_bytes(hex: &str) -> Vec<u8> {
    crate::crypto::hex_decode(hex).unwrap_or_default()
}

fn key_values(attributes: &[Attr]) -> Vec<KeyValue> {
    attributes
        .iter()
        .map(|a| KeyValue {
            key: a.key.into(),
            value: Some(any(&a.value)),
            ..Default::default()
        })
        .collect()
}

fn any(value: &AttrValue) -> AnyValue {
    let value = match value {
        AttrValue::Str(s) => any_value::Value::StringValue(s.clone()),
        AttrValue::Int(n) => any_value::Value::IntValue(*n),
        AttrValue::StrList(list) => any_value::Value::ArrayValue(ArrayValue {
            values: list
                .iter()
                .map(|s| AnyValue {
                    value: Some(any_value::Value::StringValue(s.clone())),
                })
                .collect(),
        }),
    };
    AnyValue { value: Some(value) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::otlp::{Span as OtlpSpan, SpanKind};
    use flate2::read::GzDecoder;
    use std::io::Read as _;

    #[test]
    fn a_round_decodes_back_with_its_ids_and_attributes() {
        let round = RoundSpans {
            resource: vec![Attr {
                key: "service.name",
                value: AttrValue::Str("caal".into()),
            }],
            spans: vec![OtlpSpan {
                trace_id: "0192f0a0b1c2d3e4f5a6b7c8d9e0f1a2".into(),
                span_id: "0102030405060708".into(),
                parent_span_id: None,
                name: "invoke_agent caal".into(),
                kind: SpanKind::Server,
                start_unix_nano: 1,
                end_unix_nano: 2,
                attributes: vec![Attr {
                    key: "caal.round_seq",
                    value: AttrValue::Int(7),
                }],
                events: vec![],
                status: SpanStatus::Ok,
            }],
        };
        let mut raw = Vec::new();
        GzDecoder::new(&body(&[round])[..])
            .read_to_end(&mut raw)
            .unwrap();
        let got = ExportTraceServiceRequest::decode(&raw[..]).unwrap();
        let span = &got.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(
            crate::crypto::hex(&span.trace_id),
            "0192f0a0b1c2d3e4f5a6b7c8d9e0f1a2"
        );
        assert_eq!(span.span_id, vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(span.parent_span_id.is_empty());
        assert_eq!(span.kind, 2);
        assert_eq!(
            span.attributes[0].value,
            Some(AnyValue {
                value: Some(any_value::Value::IntValue(7))
            })
        );
        assert_eq!(span.status.as_ref().map(|s| s.code), Some(1));
    }
}
