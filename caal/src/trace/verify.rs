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
    /// A retention tombstone's signature does not hold (it was edited, or
    /// signed by another key than this data dir's).
    TombstoneInvalid,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Problem::HashMismatch => "hash mismatch",
            Problem::PrevHashMismatch => "prev_hash mismatch",
            Problem::Gap => "gap",
            Problem::MissingEvent => "missing event",
            Problem::HeaderMismatch => "header mismatch",
            Problem::TombstoneInvalid => "tombstone invalid",
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
    /// When the broken event is a reasoning step: its number in the round (0-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_step: Option<i64>,
}

impl fmt::Display for BrokenLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = self
            .reasoning_step
            .map(|n| format!(" (reasoning step {n})"))
            .unwrap_or_default();
        write!(
            f,
            "conversation {} round_seq {} event_seq {}{step}: {}: {}",
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
            // Pruned conversations: each tombstone must be signed by this data
            // dir's key, and what remains of a conversation continues from its head.
            let expected_key = self
                .path()
                .parent()
                .and_then(crate::crypto::existing_public_key);
            let mut heads: BTreeMap<String, (i64, i64, String)> = BTreeMap::new();
            let tombstones: Vec<super::Tombstone> = conn
                .prepare(&format!(
                    "SELECT {} FROM tombstones WHERE ?1 IS NULL OR conversation_id = ?1
                     ORDER BY conversation_id, last_round_seq",
                    super::retention::TOMBSTONE_COLUMNS
                ))?
                .query_map([conversation.map(|c| c.as_str())], super::retention::tombstone_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            for t in tombstones {
                let signed = crate::crypto::signature_holds(&t.signed_part(), &t.public_key, &t.signature);
                let ours = expected_key.as_ref().is_none_or(|k| *k == t.public_key);
                if !(signed && ours) {
                    let detail = if signed {
                        format!("the tombstone is signed by key {}, not this data dir's {}", t.public_key, expected_key.clone().unwrap_or_default())
                    } else {
                        "the tombstone's signature does not hold: it was edited after signing".to_owned()
                    };
                    first_broken.entry(t.conversation_id.clone()).or_insert(BrokenLink {
                        conversation_id: t.conversation_id.clone(),
                        round_seq: t.last_round_seq,
                        event_seq: t.last_event_seq,
                        problem: Problem::TombstoneInvalid,
                        detail,
                        reasoning_step: None,
                    });
                }
                heads.insert(t.conversation_id.clone(), (t.last_round_seq, t.last_event_seq, t.head_hash.clone()));
            }
            let bad_tombstones: std::collections::BTreeSet<String> = first_broken.keys().cloned().collect();
            // Chain order through the rounds index; each event is joined
            // to the header it was written under.
            let mut events = conn.prepare(&format!(
                "SELECT {EVENT_COLUMNS}, r.conversation_id, r.round_seq, r.round_id, r.library_id, r.bucket_id,
                        r.state_in, r.channel, r.audio_id
                 FROM rounds r JOIN events e ON e.round_row = r.id
                 WHERE ?1 IS NULL OR r.conversation_id = ?1
                 ORDER BY r.conversation_id, r.round_seq, e.event_seq"
            ))?;
            let mut rows = events.query([conversation.map(|c| c.as_str())])?;
            let mut walk: Option<Walk> = None;

            let mut flag = |link: BrokenLink, walk: &mut Walk| {
                walk.broken = true;
                first_broken.entry(link.conversation_id.clone()).or_insert(link);
            };

            while let Some(row) = rows.next()? {
                let mut e = event_from_row(row)?;
                let header = Header {
                    conversation_id: row.get(14)?,
                    round_seq: row.get(15)?,
                    round_id: row.get(16)?,
                    library_id: row.get(17)?,
                    bucket_id: row.get(18)?,
                    state_in: row.get(19)?,
                    channel: row.get(20)?,
                    audio_id: row.get::<_, Option<String>>(21)?.unwrap_or_default(),
                };
                // A row that claims another place than its header's is named at
                // the header's place: that is where the chain expects it.
                let moved = header_moved(&e, &header);
                let (claimed_conversation, claimed_round) = (e.conversation_id.clone(), e.round_seq);
                e.conversation_id = header.conversation_id.clone();
                e.round_seq = header.round_seq;
                report.events += 1;
                if walk.as_ref().is_none_or(|w| w.conversation != e.conversation_id) {
                    if let Some(done) = walk.take() {
                        finish_conversation(&done, &mut report);
                    }
                    report.conversations += 1;
                    walk = Some(match heads.get(&e.conversation_id) {
                        Some((round_seq, event_seq, hash)) => Walk {
                            conversation: e.conversation_id.clone(),
                            prev_hash: Some(hash.clone()),
                            round_seq: *round_seq,
                            last_event_seq: *event_seq,
                            last_terminal: true,
                            broken: bad_tombstones.contains(&e.conversation_id),
                        },
                        None => Walk { conversation: e.conversation_id.clone(), ..Walk::default() },
                    });
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
                    reasoning_step: None,
                };
                if moved {
                    flag(
                        link(
                            e.round_seq,
                            e.event_seq,
                            Problem::HeaderMismatch,
                            format!(
                                "the event says conversation {claimed_conversation} round_seq {claimed_round}, its header says otherwise"
                            ),
                        ),
                        w,
                    );
                    continue;
                }
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
                    if let Some(problem) = header_problem(&e, &header) {
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

            // Round headers whose events are all gone, and events whose header is.
            let mut gone = conn.prepare(
                "SELECT conversation_id, round_seq, 1, 'the round header exists but none of its events do' FROM rounds r
                 WHERE (?1 IS NULL OR conversation_id = ?1) AND NOT EXISTS (SELECT 1 FROM events e WHERE e.round_row = r.id)
                 UNION ALL
                 SELECT conversation_id, round_seq, event_seq, 'the event exists but its round header does not' FROM events e
                 WHERE (?1 IS NULL OR conversation_id = ?1) AND NOT EXISTS (SELECT 1 FROM rounds r WHERE r.id = e.round_row)",
            )?;
            let rows = gone.query_map([conversation.map(|c| c.as_str())], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?))
            })?;
            for row in rows {
                let (conversation_id, round_seq, event_seq, detail) = row?;
                let link = BrokenLink {
                    conversation_id: conversation_id.clone(),
                    round_seq,
                    event_seq,
                    problem: Problem::MissingEvent,
                    detail,
                    reasoning_step: None,
                };
                let earlier = first_broken
                    .get(&conversation_id)
                    .is_some_and(|b| (b.round_seq, b.event_seq) <= (round_seq, event_seq));
                if !earlier {
                    first_broken.insert(conversation_id, link);
                }
            }
            // A broken reasoning step is named by its number in the round too.
            let mut step_of = conn.prepare(
                "SELECT (SELECT count(*) FROM events b WHERE b.conversation_id = e.conversation_id
                         AND b.round_seq = e.round_seq AND b.event_seq < e.event_seq AND b.event_type = 'reasoning.step')
                 FROM events e WHERE e.conversation_id = ?1 AND e.round_seq = ?2 AND e.event_seq = ?3
                   AND e.event_type = 'reasoning.step'",
            )?;
            for link in first_broken.values_mut() {
                link.reasoning_step = step_of
                    .query_row(params![link.conversation_id, link.round_seq, link.event_seq], |r| r.get(0))
                    .optional()?;
            }
            drop(step_of);
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

/// The round header an event was joined to.
struct Header {
    conversation_id: String,
    round_seq: i64,
    round_id: String,
    library_id: String,
    bucket_id: String,
    state_in: String,
    channel: String,
    audio_id: String,
}

/// True if the event's own (hashed) place disagrees with its header's.
fn header_moved(e: &EventRecord, h: &Header) -> bool {
    e.conversation_id != h.conversation_id || e.round_seq != h.round_seq || e.round_id != h.round_id
}

/// Compares the header row with the `round.started` event that binds it into the chain.
fn header_problem(first: &EventRecord, h: &Header) -> Option<String> {
    if first.event_type != EventType::RoundStarted.as_str() {
        return Some(format!(
            "the round starts with {} instead of round.started",
            first.event_type
        ));
    }
    let payload: Value = serde_json::from_str(&first.payload).unwrap_or(Value::Null);
    let fields = [
        ("library_id", &h.library_id),
        ("bucket_id", &h.bucket_id),
        ("state_in", &h.state_in),
        ("channel", &h.channel),
        ("audio_id", &h.audio_id),
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
