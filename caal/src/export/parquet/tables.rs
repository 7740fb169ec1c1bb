//! The Parquet export's two tables, `rounds` and `events`: their columns as
//! Arrow types (one list each, which `schemas/parquet.v1.json` documents and
//! a test holds it to), and the builders that take rows one at a time and
//! hand back a `RecordBatch` when asked.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, RecordBatch,
    builder::{Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder},
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::Deserialize;

use crate::trace::{EventRecord, RoundRecord};

/// Every timestamp is UTC, as the trace stores it.
pub const TIMEZONE: &str = "UTC";

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(TIMEZONE.into()))
}

/// The `rounds` table: the round header as the JSONL export has it, with
/// what an operator filters on most read out of its events (so the common
/// questions need no JSON functions).
pub fn rounds_schema() -> SchemaRef {
    use DataType::{Int32, Int64, Utf8};
    Arc::new(Schema::new(vec![
        Field::new("schema_version", Int32, false),
        Field::new("library_id", Utf8, false),
        Field::new("bucket_id", Utf8, false),
        Field::new("conversation_id", Utf8, false),
        Field::new("round_id", Utf8, false),
        Field::new("round_seq", Int64, false),
        Field::new("state_in", Utf8, false),
        Field::new("state_out", Utf8, true),
        Field::new("audio_id", Utf8, true),
        Field::new("channel", Utf8, false),
        Field::new("created_at", timestamp(), false),
        Field::new("status", Utf8, false),
        Field::new("failure_code", Utf8, true),
        Field::new("failure_reason", Utf8, true),
        Field::new("event_count", Int32, false),
        Field::new("input", Utf8, true),
        Field::new("route_code", Utf8, true),
        Field::new("command_id", Utf8, true),
        Field::new("auth_level", Int32, true),
        Field::new("confirmations_required", Int32, true),
        Field::new("reply", Utf8, true),
        Field::new("head_hash", Utf8, true),
    ]))
}

/// The `events` table: every field a chain link covers, so each hash can be
/// recomputed from these rows alone (`trace::chain`), and `library_id`.
pub fn events_schema() -> SchemaRef {
    use DataType::{Int32, Int64, Utf8};
    Arc::new(Schema::new(vec![
        Field::new("schema_version", Int32, false),
        Field::new("library_id", Utf8, false),
        Field::new("conversation_id", Utf8, false),
        Field::new("round_id", Utf8, false),
        Field::new("round_seq", Int64, false),
        Field::new("event_seq", Int64, false),
        Field::new("event_type", Utf8, false),
        Field::new("call_id", Utf8, true),
        Field::new("timestamp", timestamp(), false),
        Field::new("timestamp_text", Utf8, true),
        Field::new("payload", Utf8, false),
        Field::new("status", Utf8, false),
        Field::new("failure_code", Utf8, true),
        Field::new("failure_reason", Utf8, true),
        Field::new("prev_hash", Utf8, true),
        Field::new("hash", Utf8, false),
    ]))
}

/// Columns whose values are long and nearly all distinct: no dictionary and
/// no page statistics (both cost time and bytes and help no query).
pub const UNIQUE_TEXT: &[&str] = &[
    "round_id",
    "input",
    "reply",
    "head_hash",
    "payload",
    "prev_hash",
    "hash",
    "failure_reason",
    "timestamp_text",
];

/// What a round's events say that `rounds` keeps as columns.
#[derive(Debug, Default, PartialEq)]
pub struct RoundFacts {
    pub input: Option<String>,
    pub route_code: Option<String>,
    pub command_id: Option<String>,
    pub auth_level: Option<i32>,
    pub confirmations_required: Option<i32>,
    pub reply: Option<String>,
}

/// The payload fields `RoundFacts` reads; the rest are skipped unread.
#[derive(Deserialize)]
struct PayloadFacts {
    raw_text: Option<String>,
    route_code: Option<String>,
    command_id: Option<String>,
    auth_level: Option<i64>,
    confirmations_required: Option<i64>,
    text: Option<String>,
}

impl RoundFacts {
    /// The first thing said, the last route decided (as `caal trace list`
    /// and the OTLP export take it), the confirmations asked for, the last reply.
    pub fn of(events: &[EventRecord]) -> Self {
        let mut facts = Self::default();
        for e in events {
            let kind = e.event_type.as_str();
            if !matches!(
                kind,
                "input.received" | "route.selected" | "confirm.requested" | "output.emitted"
            ) {
                continue;
            }
            let Ok(p) = serde_json::from_str::<PayloadFacts>(&e.payload) else {
                continue;
            };
            let level = |n: Option<i64>| n.and_then(|n| i32::try_from(n).ok());
            match kind {
                "input.received" if facts.input.is_none() => facts.input = p.raw_text,
                "route.selected" => {
                    facts.route_code = p.route_code;
                    facts.command_id = p.command_id;
                    facts.auth_level = level(p.auth_level);
                }
                "confirm.requested" => {
                    // Older rounds wrote no count: a question asked is one confirmation.
                    let asked = level(p.confirmations_required).unwrap_or(0).max(1);
                    facts.confirmations_required =
                        Some(facts.confirmations_required.unwrap_or(0).max(asked));
                }
                "output.emitted" => facts.reply = p.text,
                _ => {}
            }
        }
        facts
    }
}

/// A timestamp as the trace writes it (`2026-11-21T23:21:49.123456Z`) in
/// microseconds since the Unix epoch, read by hand: it is parsed for every
/// event, and this form is the only one the store produces.
pub fn canonical_micros(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let shape_ok = b.len() == 27
        && [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
            (26, b'Z'),
        ]
        .iter()
        .all(|&(i, c)| b[i] == c);
    if !shape_ok {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss, us) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 26)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let seconds = days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(seconds * 1_000_000 + us)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Any RFC 3339 time (an imported round's, say) in microseconds, and
/// whether the text is exactly the canonical form of that instant (else the
/// text must be kept beside it for the chain).
pub fn micros(text: &str) -> Option<(i64, bool)> {
    if let Some(us) = canonical_micros(text) {
        return Some((us, true));
    }
    let t: jiff::Timestamp = text.parse().ok()?;
    Some((t.as_microsecond(), false))
}

/// The rows of `rounds` not yet written.
pub struct RoundRows {
    schema: SchemaRef,
    schema_version: Int32Builder,
    text: [StringBuilder; 8],
    round_seq: Int64Builder,
    created_at: TimestampMicrosecondBuilder,
    outcome: [StringBuilder; 3],
    event_count: Int32Builder,
    facts_text: [StringBuilder; 3],
    auth_level: Int32Builder,
    confirmations_required: Int32Builder,
    reply: StringBuilder,
    head_hash: StringBuilder,
    len: usize,
}

impl RoundRows {
    pub fn new() -> Self {
        Self {
            schema: rounds_schema(),
            schema_version: Int32Builder::new(),
            text: Default::default(),
            round_seq: Int64Builder::new(),
            created_at: TimestampMicrosecondBuilder::new().with_timezone(TIMEZONE),
            outcome: Default::default(),
            event_count: Int32Builder::new(),
            facts_text: Default::default(),
            auth_level: Int32Builder::new(),
            confirmations_required: Int32Builder::new(),
            reply: StringBuilder::new(),
            head_hash: StringBuilder::new(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, round: &RoundRecord, created_at: i64, events: &[EventRecord]) {
        let facts = RoundFacts::of(events);
        self.schema_version
            .append_value(i32::try_from(round.schema_version).unwrap_or(i32::MAX));
        // The header's text columns, in the schema's order.
        let [
            library,
            bucket,
            conversation,
            round_id,
            state_in,
            state_out,
            audio,
            channel,
        ] = &mut self.text;
        library.append_value(&round.library_id);
        bucket.append_value(&round.bucket_id);
        conversation.append_value(&round.conversation_id);
        round_id.append_value(&round.round_id);
        state_in.append_value(&round.state_in);
        state_out.append_option(round.state_out.as_deref());
        audio.append_option(round.audio_id.as_deref());
        channel.append_value(&round.channel);
        self.round_seq.append_value(round.round_seq);
        self.created_at.append_value(created_at);
        let [status, code, reason] = &mut self.outcome;
        status.append_value(&round.status);
        code.append_option(round.failure_code.as_deref());
        reason.append_option(round.failure_reason.as_deref());
        self.event_count
            .append_value(i32::try_from(events.len()).unwrap_or(i32::MAX));
        let [input, route, command] = &mut self.facts_text;
        input.append_option(facts.input);
        route.append_option(facts.route_code);
        command.append_option(facts.command_id);
        self.auth_level.append_option(facts.auth_level);
        self.confirmations_required
            .append_option(facts.confirmations_required);
        self.reply.append_option(facts.reply);
        self.head_hash
            .append_option(events.last().map(|e| e.hash.as_str()));
        self.len += 1;
    }

    /// The rows so far as one batch; the builders start empty again.
    pub fn take(&mut self) -> Result<RecordBatch, ArrowError> {
        let [
            library,
            bucket,
            conversation,
            round_id,
            state_in,
            state_out,
            audio,
            channel,
        ] = &mut self.text;
        let [status, code, reason] = &mut self.outcome;
        let [input, route, command] = &mut self.facts_text;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.schema_version.finish()),
            Arc::new(library.finish()),
            Arc::new(bucket.finish()),
            Arc::new(conversation.finish()),
            Arc::new(round_id.finish()),
            Arc::new(self.round_seq.finish()),
            Arc::new(state_in.finish()),
            Arc::new(state_out.finish()),
            Arc::new(audio.finish()),
            Arc::new(channel.finish()),
            Arc::new(self.created_at.finish()),
            Arc::new(status.finish()),
            Arc::new(code.finish()),
            Arc::new(reason.finish()),
            Arc::new(self.event_count.finish()),
            Arc::new(input.finish()),
            Arc::new(route.finish()),
            Arc::new(command.finish()),
            Arc::new(self.auth_level.finish()),
            Arc::new(self.confirmations_required.finish()),
            Arc::new(self.reply.finish()),
            Arc::new(self.head_hash.finish()),
        ];
        self.len = 0;
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

impl Default for RoundRows {
    fn default() -> Self {
        Self::new()
    }
}

/// The rows of `events` not yet written.
pub struct EventRows {
    schema: SchemaRef,
    schema_version: Int32Builder,
    ids: [StringBuilder; 3],
    seqs: [Int64Builder; 2],
    event_type: StringBuilder,
    call_id: StringBuilder,
    timestamp: TimestampMicrosecondBuilder,
    text: [StringBuilder; 7],
    len: usize,
}

impl EventRows {
    pub fn new() -> Self {
        Self {
            schema: events_schema(),
            schema_version: Int32Builder::new(),
            ids: Default::default(),
            seqs: Default::default(),
            event_type: StringBuilder::new(),
            call_id: StringBuilder::new(),
            timestamp: TimestampMicrosecondBuilder::new().with_timezone(TIMEZONE),
            text: Default::default(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One event of a round of `library_id`; `None` if its timestamp is not
    /// a time (a store written by hand), which the caller reports.
    pub fn push(&mut self, library_id: &str, e: &EventRecord) -> Option<()> {
        let (at, canonical) = micros(&e.timestamp)?;
        self.schema_version
            .append_value(i32::try_from(e.schema_version).unwrap_or(i32::MAX));
        let [library, conversation, round] = &mut self.ids;
        library.append_value(library_id);
        conversation.append_value(&e.conversation_id);
        round.append_value(&e.round_id);
        let [round_seq, event_seq] = &mut self.seqs;
        round_seq.append_value(e.round_seq);
        event_seq.append_value(e.event_seq);
        self.event_type.append_value(&e.event_type);
        self.call_id.append_option(e.call_id.as_deref());
        self.timestamp.append_value(at);
        let [text, payload, status, code, reason, prev, hash] = &mut self.text;
        text.append_option((!canonical).then_some(e.timestamp.as_str()));
        payload.append_value(&e.payload);
        status.append_value(&e.status);
        code.append_option(e.failure_code.as_deref());
        reason.append_option(e.failure_reason.as_deref());
        prev.append_option(e.prev_hash.as_deref());
        hash.append_value(&e.hash);
        self.len += 1;
        Some(())
    }

    /// The rows so far as one batch; the builders start empty again.
    pub fn take(&mut self) -> Result<RecordBatch, ArrowError> {
        let [library, conversation, round] = &mut self.ids;
        let [round_seq, event_seq] = &mut self.seqs;
        let [text, payload, status, code, reason, prev, hash] = &mut self.text;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.schema_version.finish()),
            Arc::new(library.finish()),
            Arc::new(conversation.finish()),
            Arc::new(round.finish()),
            Arc::new(round_seq.finish()),
            Arc::new(event_seq.finish()),
            Arc::new(self.event_type.finish()),
            Arc::new(self.call_id.finish()),
            Arc::new(self.timestamp.finish()),
            Arc::new(text.finish()),
            Arc::new(payload.finish()),
            Arc::new(status.finish()),
            Arc::new(code.finish()),
            Arc::new(reason.finish()),
            Arc::new(prev.finish()),
            Arc::new(hash.finish()),
        ];
        self.len = 0;
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

impl Default for EventRows {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_timestamps_read_as_jiff_reads_them() {
        for text in [
            "1970-01-01T00:00:00.000000Z",
            "2026-11-21T23:21:49.123456Z",
            "2000-02-29T12:00:00.000001Z",
            "2099-12-31T23:59:59.999999Z",
            "1969-12-31T23:59:59.500000Z",
        ] {
            let t: jiff::Timestamp = text.parse().unwrap();
            assert_eq!(canonical_micros(text), Some(t.as_microsecond()), "{text}");
            assert_eq!(micros(text), Some((t.as_microsecond(), true)));
        }
        // Other spellings of a time are read, and marked to be kept as text.
        let (us, canonical) = micros("2026-11-21T23:21:49.1Z").unwrap();
        assert_eq!(us, canonical_micros("2026-11-21T23:21:49.100000Z").unwrap());
        assert!(!canonical);
        assert_eq!(
            micros("2026-11-21T23:21:49+00:00").map(|m| m.1),
            Some(false)
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00.000000Z",
            "2026-11-21T23:21:49.12345xZ",
        ] {
            assert_eq!(canonical_micros(bad), None, "{bad}");
        }
        assert_eq!(micros("yesterday"), None);
    }
}
