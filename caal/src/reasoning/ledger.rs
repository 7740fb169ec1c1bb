//! Reading reasoning back from the trace (the ledger design's operations):
//! replay a conversation's steps with its chain checked, get one step, list
//! conversations with their step counts and chain validity, and each
//! round's tool decisions for the chat, the history endpoint and exports.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Phase, RecordedStep, RoundReasoning, StepType};
use crate::{
    ids::ConversationId,
    trace::{EventRecord, StoreError, TraceReader},
};

const STEP: &str = "reasoning.step";
const UPDATE: &str = "reasoning.update";

/// Steps of the given events (all `reasoning.step`), numbered within each round.
pub fn steps_of(events: &[EventRecord]) -> Vec<RecordedStep> {
    let mut counters: BTreeMap<&str, usize> = BTreeMap::new();
    events
        .iter()
        .filter(|e| e.event_type == STEP)
        .filter_map(|e| {
            let payload: Value = serde_json::from_str(&e.payload).ok()?;
            let n = counters.entry(e.round_id.as_str()).or_default();
            let step_number = *n;
            *n += 1;
            Some(RecordedStep {
                round_id: e.round_id.clone(),
                round_seq: e.round_seq,
                step_number,
                event_seq: e.event_seq,
                phase: serde_json::from_value::<Phase>(payload["phase"].clone()).ok()?,
                step_type: serde_json::from_value::<StepType>(payload["step_type"].clone()).ok()?,
                content: payload["content"].as_str().unwrap_or_default().to_owned(),
                links: payload.get("links").cloned().unwrap_or(Value::Null),
                source: payload["source"].as_str().unwrap_or_default().to_owned(),
                timestamp: e.timestamp.clone(),
            })
        })
        .collect()
}

/// A round's reasoning: its last `reasoning.update` (the cumulative one).
pub fn round_reasoning(events: &[EventRecord]) -> Option<RoundReasoning> {
    let last = events.iter().rev().find(|e| e.event_type == UPDATE)?;
    let payload: Value = serde_json::from_str(&last.payload).ok()?;
    Some(RoundReasoning {
        conversation_id: last.conversation_id.clone(),
        round_id: last.round_id.clone(),
        round_seq: last.round_seq,
        narrative: payload["narrative"].as_str().map(str::to_owned),
        tool_decisions: serde_json::from_value(payload["tool_decisions"].clone()).ok()?,
    })
}

/// A conversation replayed: every round's steps, and whether its chain holds.
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    pub conversation_id: String,
    pub chain_valid: bool,
    /// The first broken link, named (with its reasoning step when it is one).
    pub broken: Option<String>,
    pub step_count: usize,
    pub rounds: Vec<ReplayRound>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReplayRound {
    pub round_id: String,
    pub round_seq: i64,
    pub created_at: String,
    pub steps: Vec<RecordedStep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<RoundReasoning>,
}

/// A round's events, read through its header (indexed).
fn events(reader: &TraceReader, round_id: &str) -> Result<Vec<EventRecord>, StoreError> {
    Ok(reader.round(round_id)?.map(|(_, e)| e).unwrap_or_default())
}

pub fn replay(reader: &TraceReader, conversation: &ConversationId) -> Result<Replay, StoreError> {
    let report = reader.verify(Some(conversation))?;
    let mut rounds = Vec::new();
    for summary in reader.rounds(Some(conversation), usize::MAX)? {
        let r = summary.round;
        let own = events(reader, &r.round_id)?;
        rounds.push(ReplayRound {
            steps: steps_of(&own),
            reasoning: round_reasoning(&own),
            round_id: r.round_id,
            round_seq: r.round_seq,
            created_at: r.created_at,
        });
    }
    Ok(Replay {
        conversation_id: conversation.to_string(),
        chain_valid: report.ok,
        broken: report.broken.first().map(ToString::to_string),
        step_count: rounds.iter().map(|r| r.steps.len()).sum(),
        rounds,
    })
}

/// One round's reasoning, if it decided or ran commands.
pub fn reasoning_of_round(
    reader: &TraceReader,
    round_id: &str,
) -> Result<Option<RoundReasoning>, StoreError> {
    Ok(round_reasoning(&events(reader, round_id)?))
}

/// One step: the `n`th (0-based) of a round.
pub fn step(
    reader: &TraceReader,
    round_id: &str,
    n: usize,
) -> Result<Option<RecordedStep>, StoreError> {
    Ok(steps_of(&events(reader, round_id)?).into_iter().nth(n))
}

/// A conversation as the sessions list shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Session {
    pub conversation_id: String,
    pub rounds: i64,
    pub step_count: usize,
    pub first_round_at: String,
    pub last_round_at: String,
    pub chain_valid: bool,
}

/// The most recently active conversations (newest last), each with its
/// step count and whether its chain verifies.
pub fn sessions(reader: &TraceReader, limit: usize) -> Result<Vec<Session>, StoreError> {
    let conversations = reader.conversations()?;
    let skip = conversations.len().saturating_sub(limit);
    let mut out = Vec::new();
    for c in conversations.into_iter().skip(skip) {
        let id: ConversationId = c.conversation_id.parse().map_err(StoreError::Id)?;
        let mut steps = 0;
        for r in reader.rounds(Some(&id), usize::MAX)? {
            steps += steps_of(&events(reader, &r.round.round_id)?).len();
        }
        out.push(Session {
            chain_valid: reader.verify(Some(&id))?.ok,
            conversation_id: c.conversation_id,
            rounds: c.rounds,
            step_count: steps,
            first_round_at: c.first_round_at,
            last_round_at: c.last_round_at,
        });
    }
    Ok(out)
}
