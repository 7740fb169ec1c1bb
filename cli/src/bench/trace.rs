//! `caal bench trace`: what the trace store sustains, measured in one run.
//!
//! 1. Chained, schema-checked appends through the real store (durability
//!    `normal`): rounds of 10 events over 64 conversations, each
//!    conversation's next round starting once the previous one is durable.
//! 2. The ceiling: bare rusqlite prepared inserts of the very same rows into a
//!    fresh file with the same schema, in one transaction, with no hashing and
//!    no validation.
//! 3. Rounds of 5 events with durability `fsync` under 64 concurrent
//!    conversations, each waiting for its round to be fsynced (group commit).

use std::{
    collections::VecDeque,
    path::Path,
    sync::atomic::Ordering,
    thread,
    time::{Duration, Instant},
};

use caal::{
    ids::{CallId, ConversationId, LibraryId},
    trace::{
        Durability, Durable, EventDraft, EventType, RoundSpec, StoreError, TraceStore,
        bare_connection,
    },
};
use rusqlite::Connection;
use serde::Serialize;
use serde_json::json;

#[derive(Clone, Debug, Serialize)]
pub struct TraceBenchReport {
    pub events: u64,
    pub chained_events_per_s: f64,
    pub chained_commits: u64,
    /// Share of the chained run's wall time the writer thread was busy.
    pub chained_writer_busy: f64,
    pub bare_inserts_per_s: f64,
    pub ratio: f64,
    pub fsync_conversations: u64,
    pub fsync_rounds: u64,
    pub fsync_rounds_per_s: f64,
    pub fsync_rounds_per_commit: f64,
}

const CONVERSATIONS: usize = 64;
/// Threads producing rounds in the chained run.
const PRODUCERS: usize = 2;

pub(crate) fn spec(conversation: &ConversationId) -> RoundSpec {
    RoundSpec::typed(conversation)
}

/// The eight middle events of a typical command round.
pub(crate) fn command_round_events(i: usize) -> Vec<EventDraft> {
    let call = CallId::new();
    vec![
        EventDraft::untyped(EventType::InputReceived, json!({"raw_text": format!("Turn on the kitchen lights {i}"), "channel": "text"})),
        EventDraft::untyped(EventType::InputNormalized, json!({"normalized_text": format!("turn on the kitchen lights {i}")})),
        EventDraft::untyped(
            EventType::RouteSelected,
            json!({"route_code": "intent.command", "source_rule": "lights.switch", "topic": null, "auth_level": 1,
                   "macro": null, "command_id": "lights.set", "params": {"room": "kitchen", "state": "on"}}),
        ),
        EventDraft::untyped(EventType::ValidatorRan, json!({"validator_id": "params", "code": "validator.ok", "status": "ok", "message": "parameters valid"})),
        EventDraft::untyped(EventType::ToolRequest, json!({"tool_id": "lights", "call_id": call.to_string(), "inputs": {"room": "kitchen", "on": true}}))
            .with_call(call),
        EventDraft::untyped(
            EventType::ToolResponse,
            json!({"tool_id": "lights", "call_id": call.to_string(), "latency_ms": 1.25, "result": {"ok": true}, "status": "ok"}),
        )
        .with_call(call),
        EventDraft::untyped(
            EventType::CommandExecuted,
            json!({"command_id": "lights.set", "status": "ok", "result": {"room": "kitchen", "state": "on"}, "auth_level": 1}),
        )
        .with_call(call),
        EventDraft::untyped(EventType::OutputEmitted, json!({"text": "Okay, the kitchen lights are on.", "channel": "text"})),
    ]
}

/// Runs all three measurements in `dir` (which should be empty and on the
/// disk being measured). `events` sizes the first two.
pub fn run(dir: &Path, events: u64, fsync_seconds: f64) -> Result<TraceBenchReport, StoreError> {
    let library = LibraryId::load_or_create(dir, Some("bench")).map_err(|e| StoreError::Io {
        what: format!("cannot create the benchmark's library id: {e}"),
        source: std::io::Error::other(e.to_string()),
    })?;

    // 1. Chained appends through the store.
    let chained_path = dir.join("chained.db");
    let rounds = events.div_ceil(10).max(1) as usize;
    let store = TraceStore::open(&chained_path, library.clone(), Durability::Normal)?;
    let conversations: Vec<ConversationId> = (0..CONVERSATIONS)
        .map(|i| format!("bench-{i}").parse().expect("valid id"))
        .collect();
    let drafts: Vec<Vec<EventDraft>> = (0..rounds).map(command_round_events).collect();
    let start = Instant::now();
    thread::scope(|scope| -> Result<(), StoreError> {
        let workers: Vec<thread::ScopedJoinHandle<'_, Result<(), StoreError>>> = (0..PRODUCERS)
            .map(|w| {
                let store = store.clone();
                let conversations = &conversations;
                let drafts = &drafts;
                thread::Builder::new()
                    .name("bench-producer".into())
                    .spawn_scoped(scope, move || -> Result<(), StoreError> {
                        let mine: Vec<&ConversationId> =
                            conversations.iter().skip(w).step_by(PRODUCERS).collect();
                        let mut pending: VecDeque<Durable> = VecDeque::new();
                        for (n, round_drafts) in
                            drafts.iter().enumerate().skip(w).step_by(PRODUCERS)
                        {
                            if pending.len() >= mine.len()
                                && let Some(previous) = pending.pop_front()
                            {
                                previous.wait()?;
                            }
                            let round =
                                store.begin_round(spec(mine[n / PRODUCERS % mine.len()]))?;
                            for draft in round_drafts {
                                round.append(draft.clone())?;
                            }
                            pending.push_back(round.complete_nowait("default")?);
                        }
                        pending.into_iter().try_for_each(Durable::wait)
                    })
            })
            .collect::<Result<_, _>>()
            .map_err(|source| StoreError::Io {
                what: "cannot start a benchmark thread".into(),
                source,
            })?;
        workers
            .into_iter()
            .try_for_each(|w| w.join().unwrap_or(Err(StoreError::WriterGone)))
    })?;
    let chained_secs = start.elapsed().as_secs_f64();
    let written = store.writer_stats().events.load(Ordering::Relaxed);
    let chained_commits = store.writer_stats().commits.load(Ordering::Relaxed);
    let chained_writer_busy =
        store.writer_stats().busy_ns.load(Ordering::Relaxed) as f64 / 1e9 / chained_secs;
    drop(store);

    // 2. The same rows, bare.
    let source = Connection::open(&chained_path)?;
    let round_rows: Vec<[rusqlite::types::Value; 10]> = source
        .prepare(
            "SELECT schema_version, round_id, library_id, bucket_id, conversation_id, round_seq, state_in, audio_id, channel, created_at
             FROM rounds ORDER BY id",
        )?
        .query_map([], |r| Ok(std::array::from_fn(|i| r.get(i).unwrap_or(rusqlite::types::Value::Null))))?
        .collect::<Result<_, _>>()?;
    let event_rows: Vec<[rusqlite::types::Value; 15]> = source
        .prepare(
            "SELECT schema_version, round_id, conversation_id, round_seq, event_seq, event_type, call_id, timestamp, payload,
                    status, failure_code, failure_reason, prev_hash, hash, round_row FROM events ORDER BY id",
        )?
        .query_map([], |r| Ok(std::array::from_fn(|i| r.get(i).unwrap_or(rusqlite::types::Value::Null))))?
        .collect::<Result<_, _>>()?;
    drop(source);
    let bare = bare_connection(&dir.join("bare.db"), Durability::Normal)?;
    let start = Instant::now();
    bare.execute_batch("BEGIN")?;
    {
        let mut insert_round = bare.prepare(
            "INSERT INTO rounds (schema_version, round_id, library_id, bucket_id, conversation_id, round_seq, state_in, audio_id, channel, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?;
        for row in &round_rows {
            insert_round.execute(rusqlite::params_from_iter(row.iter()))?;
        }
        let mut insert_event = bare.prepare(
            "INSERT INTO events (schema_version, round_id, conversation_id, round_seq, event_seq, event_type, call_id, timestamp,
                payload, status, failure_code, failure_reason, prev_hash, hash, round_row)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )?;
        for row in &event_rows {
            insert_event.execute(rusqlite::params_from_iter(row.iter()))?;
        }
    }
    bare.execute_batch("COMMIT")?;
    let bare_secs = start.elapsed().as_secs_f64();
    drop(bare);

    // 3. fsync-durable rounds, 64 concurrent conversations.
    let store = TraceStore::open(&dir.join("fsync.db"), library, Durability::Fsync)?;
    let deadline = Duration::from_secs_f64(fsync_seconds);
    let start = Instant::now();
    let fsync_rounds: u64 = thread::scope(|scope| -> Result<u64, StoreError> {
        let workers: Vec<_> = conversations
            .iter()
            .map(|conversation| {
                let store = store.clone();
                scope.spawn(move || -> Result<u64, StoreError> {
                    let mut done = 0;
                    while start.elapsed() < deadline {
                        let round = store.begin_round(spec(conversation))?;
                        let events = command_round_events(done as usize);
                        for i in [0, 2, 7] {
                            round.append(events[i].clone())?;
                        }
                        round.complete("default")?;
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(Err(StoreError::WriterGone)))
            .sum()
    })?;
    let fsync_secs = start.elapsed().as_secs_f64();
    let fsync_commits = store.writer_stats().commits.load(Ordering::Relaxed).max(1);
    drop(store);

    let chained_events_per_s = written as f64 / chained_secs;
    // Both sides insert the same round rows and event rows; both are counted
    // per event, so the ratio compares equal work.
    let bare_inserts_per_s = event_rows.len() as f64 / bare_secs;
    Ok(TraceBenchReport {
        events: written,
        chained_events_per_s,
        chained_commits,
        chained_writer_busy,
        bare_inserts_per_s,
        ratio: chained_events_per_s / bare_inserts_per_s,
        fsync_conversations: CONVERSATIONS as u64,
        fsync_rounds,
        fsync_rounds_per_s: fsync_rounds as f64 / fsync_secs,
        fsync_rounds_per_commit: fsync_rounds as f64 / fsync_commits as f64,
    })
}
