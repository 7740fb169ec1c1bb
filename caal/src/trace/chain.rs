//! The hash chain. Each conversation's events form one SHA-256 chain, ordered
//! by (round_seq, event_seq):
//!
//! `hash = "sha256:" + hex(SHA-256(RFC 8785 canonical JSON of the exported
//! event object without "hash"))`, where that object carries `prev_hash`, the
//! previous event's hash in the same conversation (`null` for the first).
//!
//! The export line is the same object with `hash` added, itself canonical, so
//! anyone can recompute every hash from the JSONL bytes alone.

pub use crate::crypto::{canonical_json, sha256_tagged};
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// One event as stored and exported; `payload` is canonical JSON text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventRecord {
    pub schema_version: u32,
    pub round_id: String,
    pub conversation_id: String,
    pub round_seq: i64,
    pub event_seq: i64,
    pub event_type: String,
    pub call_id: Option<String>,
    pub timestamp: String,
    pub payload: String,
    pub status: String,
    pub failure_code: Option<String>,
    pub failure_reason: Option<String>,
    pub prev_hash: Option<String>,
    pub hash: String,
}

impl EventRecord {
    /// The canonical bytes the hash covers: every field but `hash`, plus
    /// `"type":"event"`, with `payload` embedded as given (it must already be
    /// canonical; `verify` re-canonicalises stored payloads before calling).
    ///
    /// The envelope's keys are fixed ASCII names written here in RFC 8785
    /// order; its strings use serde_json's escaping, which is RFC 8785's. A
    /// property test holds this equal to the canonicalizer crate's output.
    pub fn canonical_without_hash(&self, canonical_payload: &str) -> String {
        self.write_canonical(canonical_payload, None)
    }

    /// The export line: canonical, with `hash` included.
    pub fn to_json_line(&self) -> String {
        self.write_canonical(&self.payload, Some(&self.hash))
    }

    /// Recomputes the hash from the fields, re-canonicalising the payload.
    pub fn recompute_hash(&self) -> Result<String, serde_json::Error> {
        let payload: Value = serde_json::from_str(&self.payload)?;
        Ok(sha256_tagged(
            self.canonical_without_hash(&canonical_json(&payload))
                .as_bytes(),
        ))
    }

    fn write_canonical(&self, payload: &str, hash: Option<&str>) -> String {
        let mut out = String::with_capacity(320 + payload.len());
        out.push_str("{\"call_id\":");
        push_opt_str(&mut out, self.call_id.as_deref());
        out.push_str(",\"conversation_id\":");
        push_str(&mut out, &self.conversation_id);
        let _ = write!(out, ",\"event_seq\":{}", self.event_seq);
        out.push_str(",\"event_type\":");
        push_str(&mut out, &self.event_type);
        out.push_str(",\"failure_code\":");
        push_opt_str(&mut out, self.failure_code.as_deref());
        out.push_str(",\"failure_reason\":");
        push_opt_str(&mut out, self.failure_reason.as_deref());
        if let Some(hash) = hash {
            out.push_str(",\"hash\":");
            push_str(&mut out, hash);
        }
        out.push_str(",\"payload\":");
        out.push_str(payload);
        out.push_str(",\"prev_hash\":");
        push_opt_str(&mut out, self.prev_hash.as_deref());
        out.push_str(",\"round_id\":");
        push_str(&mut out, &self.round_id);
        let _ = write!(
            out,
            ",\"round_seq\":{},\"schema_version\":{}",
            self.round_seq, self.schema_version
        );
        out.push_str(",\"status\":");
        push_str(&mut out, &self.status);
        out.push_str(",\"timestamp\":");
        push_str(&mut out, &self.timestamp);
        out.push_str(",\"type\":\"event\"}");
        out
    }
}

fn push_str(out: &mut String, s: &str) {
    // serde_json escapes exactly what RFC 8785 escapes: `"`, `\`, and control
    // characters (short forms for \b \f \n \r \t, else \u00xx in lowercase).
    // Plain text, the common case, needs no escaping at all.
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
        return;
    }
    let escaped =
        serde_json::to_string(s).unwrap_or_else(|e| unreachable!("a str serialises: {e}"));
    out.push_str(&escaped);
}

fn push_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => push_str(out, s),
        None => out.push_str("null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn record(s: String, payload: Value) -> EventRecord {
        EventRecord {
            schema_version: 1,
            round_id: "0190c8e4-7b7a-7000-8000-000000000000".into(),
            conversation_id: s.clone(),
            round_seq: 3,
            event_seq: 12,
            event_type: "output.emitted".into(),
            call_id: Some(s.clone()),
            timestamp: "2026-11-21T23:21:49.123456Z".into(),
            payload: canonical_json(&payload),
            status: "ok".into(),
            failure_code: None,
            failure_reason: Some(s),
            prev_hash: Some(format!("sha256:{}", "ab".repeat(32))),
            hash: format!("sha256:{}", "cd".repeat(32)),
        }
    }

    /// The same object built as a `Value` and canonicalised by the crate.
    fn by_crate(r: &EventRecord, with_hash: bool) -> String {
        let mut v = serde_json::to_value(r).unwrap();
        let obj = v.as_object_mut().unwrap();
        obj.insert("payload".into(), serde_json::from_str(&r.payload).unwrap());
        obj.insert("type".into(), json!("event"));
        if !with_hash {
            obj.remove("hash");
        }
        canonical_json(&v)
    }

    proptest! {
        #[test]
        fn envelope_matches_the_rfc8785_crate(s in "\\PC*|[\\x00-\\x1f\"\\\\\u{7f}\u{2028}é😀]{0,12}", n in any::<i32>(), f in -1e9f64..1e9) {
            let r = record(s.clone(), json!({"text": s, "n": n, "f": f, "nested": {"z": 1, "a": [true, null]}}));
            prop_assert_eq!(r.canonical_without_hash(&r.payload), by_crate(&r, false));
            prop_assert_eq!(r.to_json_line(), by_crate(&r, true));
        }
    }

    #[test]
    fn hash_is_tagged_hex_sha256() {
        assert_eq!(
            sha256_tagged(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn recompute_ignores_non_canonical_payload_spelling_but_not_content() {
        let mut r = record("c".into(), json!({"b": 1, "a": "x"}));
        r.hash = r.recompute_hash().unwrap();
        let same = EventRecord {
            payload: "{ \"a\" : \"x\", \"b\": 1.0e0 }".into(),
            ..r.clone()
        };
        assert_eq!(same.recompute_hash().unwrap(), r.hash);
        let edited = EventRecord {
            payload: "{\"a\":\"y\",\"b\":1}".into(),
            ..r.clone()
        };
        assert_ne!(edited.recompute_hash().unwrap(), r.hash);
    }
}
