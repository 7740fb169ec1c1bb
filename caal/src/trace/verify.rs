//! Chain verification: walks each conversation's events in (round_seq,
//! event_seq) order, recomputes every hash and link, and names the first
//! broken link of each broken conversation.

use std::{collections::BTreeMap, fmt};

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::{
    EventType, StoreError, TraceReader,
    chain::EventRecord,
    reader::{EVENT_COLUMNS, event_from_row},
};
use crate::ids::ConversationId;

/// What is wrong at a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    /// The event's content no longer hashes to its stored hash: it was edited.
    HashMismatch,
    /// The event does not point at the hash of the event before it.
    PrevHashMismatch,
    /// An event_seq or round_seq is skipped: an event or a round was removed.
    Gap,
    /// An event that must exist does not (a round's start or end, a round's events).
    MissingEvent,
    /// The round header disagrees with the `round.started` event bound into the chain.
    HeaderMismatch,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Problem::HashMismatch => "hash mismatch",
            Problem::PrevHashMismatch => "prev_hash mismatch",
            Problem::Gap => "gap",
            Problem::MissingEvent => "missing event",
            Problem::HeaderMismatch => "header mismatch",
        })
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BrokenLink {
    pub conversation_id: String,
    pub round_seq: i64,
    pub event_seq: i64,
    pub problem: Problem,
    pub detail: String,
}

impl fmt::Display for BrokenLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "conversation {} round_seq {} event_seq {}: {}: {}",
            self.conversation_id, self.round_seq, self.event_seq, self.problem, self.detail
        )
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct VerifyReport {
    pub ok: bool,
    pub conversations: u64,
    pub rounds: u64,
    pub events: u64,
    /// The first broken link of each broken conversation, in conversation order.
    pub broken: Vec<BrokenLink>,
    /// Rounds that have not ended yet (in progress, or their last event lost:
    /// a chain cannot tell a truncated tail from one not yet written).
    pub open_rounds: Vec<(String, i64)>,
}

#[derive(Default)]
struct Walk {
    conversation: String,
    prev_hash: Option<String>,
    round_seq: i64,
    last_event_seq: i64,
    last_terminal: bool,
    broken: bool,
}

impl TraceReader {
    pub fn verify(
        &self,
        conversation: Option<&ConversationId>,
    ) -> Result<VerifyReport, StoreError> {
        self.snapshot(|conn| {
            let mut report = VerifyReport {
                ok: true,
                conversations: 0,
                rounds: 0,
                events: 0,
                broken: Vec::new(),
                open_rounds: Vec::new(),
            };
            let mut first_broken: BTreeMap<String, BrokenLink> = BTreeMap::new();
            let mut header = conn.prepare_cached(
                "SELECT round_id, library_id, bucket_id, state_in, channel, audio_id FROM rounds
                 WHERE conversation_id = ?1 AND round_seq = ?2",
            )?;
            let mut events = conn.prepare(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE ?1 IS NULL OR conversation_id = ?1
                 ORDER BY conversation_id, round_seq, event_seq"
            ))?;
            let mut rows = events.query([conversation.map(|c| c.as_str())])?;
            let mut walk: Option<Walk> = None;

            let mut flag = |link: BrokenLink, walk: &mut Walk| {
                walk.broken = true;
                first_broken.entry(link.conversation_id.clone()).or_insert(link);
            };

            while let Some(row) = rows.next()? {
                let e = event_from_row(row)?;
                report.events += 1;
                if walk.as_ref().is_none_or(|w| w.conversation != e.conversation_id) {
                    if let Some(done) = walk.take() {
                        finish_conversation(&done, &mut report);
                    }
                    report.conversations += 1;
                    walk = Some(Walk { conversation: e.conversation_id.clone(), ..Walk::default() });
                }
                let Some(w) = walk.as_mut() else { continue };
                if w.broken {
                    continue;
                }
                let link = |round_seq: i64, event_seq: i64, problem: Problem, detail: String| BrokenLink {
                    conversation_id: e.conversation_id.clone(),
                    round_seq,
                    event_seq,
                    problem,
                    detail,
                };
                if e.round_seq != w.round_seq {
                    if w.round_seq > 0 && !w.last_terminal {
                        flag(
                            link(
                                w.round_seq,
                                w.last_event_seq + 1,
                                Problem::MissingEvent,
                                format!(
                                    "round {} ends at event_seq {} without round.completed or round.failed, yet round {} follows",
                                    w.round_seq, w.last_event_seq, e.round_seq
                                ),
                            ),
                            w,
                        );
                        continue;
                    }
                    if e.round_seq != w.round_seq + 1 {
                        let missing = w.round_seq + 1;
                        flag(
                            link(missing, 1, Problem::Gap, format!("round_seq {missing} is missing; the next round is {}", e.round_seq)),
                            w,
                        );
                        continue;
                    }
                    if e.event_seq != 1 {
                        flag(link(e.round_seq, 1, Problem::Gap, format!("event_seq 1 is missing; the round starts at {}", e.event_seq)), w);
                        continue;
                    }
                    report.rounds += 1;
                    let stored = header
                        .query_row(params![e.conversation_id, e.round_seq], |r| {
                            Ok([r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get::<_, Option<String>>(5)?.unwrap_or_default()])
                        })
                        .optional()?;
                    if let Some(problem) = header_problem(&e, stored) {
                        flag(link(e.round_seq, 1, Problem::HeaderMismatch, problem), w);
                        continue;
                    }
                    w.round_seq = e.round_seq;
                } else if w.last_terminal {
                    flag(link(e.round_seq, e.event_seq, Problem::Gap, "an event follows the round's terminal event".into()), w);
                    continue;
                } else if e.event_seq != w.last_event_seq + 1 {
                    let missing = w.last_event_seq + 1;
                    flag(link(e.round_seq, missing, Problem::Gap, format!("event_seq {missing} is missing; the next is {}", e.event_seq)), w);
                    continue;
                }
                if e.prev_hash != w.prev_hash {
                    flag(
                        link(
                            e.round_seq,
                            e.event_seq,
                            Problem::PrevHashMismatch,
                            format!("stored {}, the previous event's hash is {}", show(&e.prev_hash), show(&w.prev_hash)),
                        ),
                        w,
                    );
                    continue;
                }
                match e.recompute_hash() {
                    Ok(h) if h == e.hash => {}
                    Ok(h) => {
                        flag(link(e.round_seq, e.event_seq, Problem::HashMismatch, format!("stored {}, recomputed {h}", e.hash)), w);
                        continue;
                    }
                    Err(err) => {
                        flag(link(e.round_seq, e.event_seq, Problem::HashMismatch, format!("payload is not JSON: {err}")), w);
                        continue;
                    }
                }
                w.prev_hash = Some(e.hash.clone());
                w.last_event_seq = e.event_seq;
                w.last_terminal = e.event_type.parse::<EventType>().is_ok_and(EventType::is_terminal);
            }
            if let Some(done) = walk.take() {
                finish_conversation(&done, &mut report);
            }
            drop(rows);

            // Round headers whose events are all gone.
            let mut empty = conn.prepare(
                "SELECT conversation_id, round_seq FROM rounds r
                 WHERE (?1 IS NULL OR conversation_id = ?1) AND NOT EXISTS (
                   SELECT 1 FROM events e WHERE e.conversation_id = r.conversation_id AND e.round_seq = r.round_seq)",
            )?;
            let rows = empty.query_map([conversation.map(|c| c.as_str())], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (conversation_id, round_seq) = row?;
                let link = BrokenLink {
                    conversation_id: conversation_id.clone(),
                    round_seq,
                    event_seq: 1,
                    problem: Problem::MissingEvent,
                    detail: "the round header exists but none of its events do".into(),
                };
                let earlier = first_broken
                    .get(&conversation_id)
                    .is_some_and(|b| (b.round_seq, b.event_seq) <= (round_seq, 1));
                if !earlier {
                    first_broken.insert(conversation_id, link);
                }
            }
            report.open_rounds.retain(|(c, _)| !first_broken.contains_key(c));
            report.broken = first_broken.into_values().collect();
            report.ok = report.broken.is_empty();
            Ok(report)
        })
    }
}

fn finish_conversation(walk: &Walk, report: &mut VerifyReport) {
    if !walk.broken && walk.round_seq > 0 && !walk.last_terminal {
        report
            .open_rounds
            .push((walk.conversation.clone(), walk.round_seq));
    }
}

fn show(hash: &Option<String>) -> &str {
    hash.as_deref().unwrap_or("null")
}

/// Compares the header row with the `round.started` event that binds it into the chain.
fn header_problem(first: &EventRecord, stored: Option<[String; 6]>) -> Option<String> {
    let Some([round_id, library_id, bucket_id, state_in, channel, audio_id]) = stored else {
        return Some("the round header is missing".into());
    };
    if first.event_type != EventType::RoundStarted.as_str() {
        return Some(format!(
            "the round starts with {} instead of round.started",
            first.event_type
        ));
    }
    if first.round_id != round_id {
        return Some(format!(
            "the header's round_id is {round_id}, the chain's {}",
            first.round_id
        ));
    }
    let payload: Value = serde_json::from_str(&first.payload).unwrap_or(Value::Null);
    let fields = [
        ("library_id", library_id),
        ("bucket_id", bucket_id),
        ("state_in", state_in),
        ("channel", channel),
        ("audio_id", audio_id),
    ];
    for (name, value) in fields {
        let chained = payload[name].as_str().unwrap_or_default();
        if chained != value {
            return Some(format!(
                "the header's {name} is {value:?}, the chain's {chained:?}"
            ));
        }
    }
    None
}
