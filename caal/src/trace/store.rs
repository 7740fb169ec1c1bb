//! The writing side of the trace store.
//!
//! One process owns a store for writing (an exclusive lock on
//! `traces.db.lock`); inside it, one writer thread owns the SQLite write
//! connection. Rounds send it operations over a channel; it applies every
//! operation waiting at that moment in one transaction and commits once, so
//! concurrent rounds share a commit (and, with `fsync` durability, one fsync).
//! A round's intermediate events are not waited on; finishing a round waits
//! until its terminal event is committed, and only then is the reply released.
//!
//! A conversation runs one round at a time (its slot is held from
//! `begin_round` until the round finishes), so the open round owns its
//! conversation's chain tail: it numbers its events and hashes them on the
//! caller's thread, and the writer only inserts. Concurrent conversations
//! hash in parallel. If the writer cannot insert or commit, it rolls the
//! whole batch back and refuses every later write, so no hole is ever
//! committed; the next start recovers the rounds left open.

use std::{
    collections::HashMap,
    fs::{self, File, OpenOptions},
    io::{Read as _, Seek as _, SeekFrom, Write as _},
    path::{Path, PathBuf},
    sync::{
        Arc, Condvar, Mutex, MutexGuard, RwLock,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, Receiver, SyncSender},
    },
    thread::{self, JoinHandle},
    time::{Duration, SystemTime},
};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::Value;

use crate::sqlite::{TRACE, check_identity, migrate, open_connection};

use super::{
    EventType, Payload, SCHEMA_VERSION, StoreError, TraceReader,
    chain::{EventRecord, canonical_json, sha256_tagged},
    events::{RoundCompleted, RoundFailed, RoundStarted},
};
pub use crate::config::Durability;
use crate::ids::{AudioId, BucketId, CallId, ConversationId, LibraryId, RoundId};

/// RFC 3339 UTC with microseconds, e.g. `2026-11-21T23:21:49.123456Z`.
pub fn now_timestamp() -> String {
    humantime::format_rfc3339_micros(SystemTime::now()).to_string()
}

/// The outcome of one event, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventStatus {
    Ok,
    Failed,
    Skipped,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Ok => "ok",
            EventStatus::Failed => "failed",
            EventStatus::Skipped => "skipped",
        }
    }
}

/// An event a round wants recorded; checked against its schema on append.
#[derive(Clone, Debug)]
pub struct EventDraft {
    pub event_type: EventType,
    pub payload: Value,
    pub call_id: Option<CallId>,
    pub status: EventStatus,
    pub failure: Option<(String, String)>,
}

impl EventDraft {
    /// An event of a typed payload (see [`super::events`]).
    pub fn new(payload: impl Into<Payload>) -> Self {
        let payload = payload.into();
        let value = payload.to_value();
        // Every test build checks that what is written reads back as written.
        debug_assert_eq!(
            Payload::parse(payload.event_type(), &value)
                .map(|p| p.to_value())
                .ok(),
            Some(value.clone()),
            "{} does not read back into its struct",
            payload.event_type()
        );
        Self::untyped(payload.event_type(), value)
    }

    /// An event from loose JSON: for what arrives as JSON already (an
    /// import) and for tests of the schema check itself. Rounds use `new`.
    pub fn untyped(event_type: EventType, payload: Value) -> Self {
        Self {
            event_type,
            payload,
            call_id: None,
            status: EventStatus::Ok,
            failure: None,
        }
    }

    pub fn with_call(mut self, call_id: CallId) -> Self {
        self.call_id = Some(call_id);
        self
    }

    pub fn with_status(mut self, status: EventStatus) -> Self {
        self.status = status;
        self
    }

    pub fn failed(mut self, code: &str, reason: &str) -> Self {
        self.status = EventStatus::Failed;
        self.failure = Some((code.to_owned(), reason.to_owned()));
        self
    }

    /// Scrubs, validates and canonicalises: after this, the writer cannot
    /// refuse it for its content, and no secret is left in it. Every event
    /// passes here, so every path (input, tools, models, reasoning) is
    /// scrubbed before anything is stored.
    fn prepare(mut self) -> Result<PreparedEvent, StoreError> {
        let safety = crate::safety::global();
        safety.scrub_json(&mut self.payload);
        self.event_type.validate(&self.payload)?;
        // What the schema accepts, the typed payload reads: checked on every
        // event of every test run (the schemas and `events.rs` agree on
        // real rounds, not only on the examples in `events_tests.rs`).
        #[cfg(debug_assertions)]
        if let Err(e) = Payload::parse(self.event_type, &self.payload) {
            panic!(
                "a {} payload the schema accepts does not read into its struct: {e}: {}",
                self.event_type, self.payload
            );
        }
        let (failure_code, failure_reason) = self
            .failure
            .map(|(code, reason)| {
                (
                    safety.scrub(&code).into_owned(),
                    safety.scrub(&reason).into_owned(),
                )
            })
            .unzip();
        Ok(PreparedEvent {
            event_type: self.event_type,
            call_id: self.call_id.map(|c| c.to_string()),
            timestamp: now_timestamp(),
            payload: canonical_json(&self.payload),
            status: self.status,
            failure_code,
            failure_reason,
        })
    }
}

#[derive(Debug)]
struct PreparedEvent {
    event_type: EventType,
    call_id: Option<String>,
    timestamp: String,
    payload: String,
    status: EventStatus,
    failure_code: Option<String>,
    failure_reason: Option<String>,
}

/// What a new round is, fixed at intake.
#[derive(Clone, Debug)]
pub struct RoundSpec {
    pub conversation_id: ConversationId,
    pub bucket_id: BucketId,
    pub state_in: String,
    pub channel: String,
    pub audio_id: Option<AudioId>,
}

impl RoundSpec {
    /// A typed round of `conversation` in the default state, in the
    /// conversation's own bucket (what the benchmarks and tests append).
    pub fn typed(conversation: &ConversationId) -> Self {
        Self {
            conversation_id: conversation.clone(),
            bucket_id: BucketId::for_conversation(conversation),
            state_in: "default".into(),
            channel: "text".into(),
            audio_id: None,
        }
    }
}

/// The header of a round, written once at intake.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RoundHeader {
    pub schema_version: u32,
    pub library_id: LibraryId,
    pub bucket_id: BucketId,
    pub conversation_id: ConversationId,
    pub round_id: RoundId,
    pub round_seq: i64,
    pub state_in: String,
    pub audio_id: Option<AudioId>,
    pub channel: String,
    pub created_at: String,
}

type Reply = SyncSender<Result<(), StoreError>>;

/// Records are boxed: the bounded channel allocates every slot up front, so
/// slots stay a few words wide.
enum WriteOp {
    Begin {
        header: Box<RoundHeader>,
        started: Box<EventRecord>,
    },
    Append(Box<EventRecord>),
    /// Events made together, sent as one message: one wake-up of the writer.
    AppendMany(Vec<EventRecord>),
    Finish {
        event: Box<EventRecord>,
        done: Option<Reply>,
    },
    Sync {
        done: Reply,
    },
    Close {
        done: Reply,
    },
}

/// Per conversation: the last round_seq handed out, the chain's last hash as
/// of the last finished round, and whether a round is open.
struct ConversationSlot {
    last_round_seq: i64,
    head: Option<String>,
    open: bool,
}

struct StoreInner {
    path: PathBuf,
    library_id: LibraryId,
    ops: SyncSender<WriteOp>,
    writer: Mutex<Option<JoinHandle<()>>>,
    slots: Mutex<HashMap<ConversationId, ConversationSlot>>,
    slot_freed: Condvar,
    reader: TraceReader,
    recovered: Vec<(String, i64)>,
    /// The rounds mark of the oldest session that crashed, when the last
    /// open found one: rounds after it may have ended without their state
    /// changes applied (`Engine::open` reconciles them).
    crashed_since: Option<i64>,
    stats: Arc<WriterStats>,
    commit_hook: CommitHook,
    checkpointer: Mutex<Option<(SyncSender<()>, JoinHandle<()>)>>,
    _lock: File,
}

/// Called by the writer after each commit with the highest event id now
/// durable: live streams wake on it and read what they missed from the store.
type CommitHook = Arc<RwLock<Option<Box<dyn Fn(i64) + Send + Sync>>>>;

/// Counters the writer keeps: how well group commit is batching.
#[derive(Debug, Default)]
pub struct WriterStats {
    pub commits: AtomicU64,
    pub events: AtomicU64,
    /// Time spent applying and committing batches, in nanoseconds.
    pub busy_ns: AtomicU64,
}

/// The trace store, open for writing. Cheap to clone; the last clone closes it.
#[derive(Clone)]
pub struct TraceStore(Arc<StoreInner>);

/// How long `begin_round` waits for a conversation's previous round.
const ROUND_WAIT: Duration = Duration::from_secs(30);
/// Operations queued for the writer before senders wait (backpressure).
const OP_QUEUE: usize = 8_192;
/// Most operations applied in one transaction.
const MAX_BATCH: usize = 16_384;

impl TraceStore {
    /// Opens (creating if needed) the store at `path`, applies pending
    /// migrations, and recovers rounds a crashed process left open.
    pub fn open(
        path: &Path,
        library_id: LibraryId,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|source| StoreError::Open {
                path: dir.to_owned(),
                source,
            })?;
        }
        let lock = acquire_lock(path)?;
        let conn = open_connection(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        check_identity(&conn, path, &TRACE, true)?;
        configure_writer(&conn, path, durability)?;
        migrate(&conn, &TRACE)?;

        let mut writer = Writer {
            conn,
            session_id: 0,
            poisoned: None,
            stats: Arc::default(),
            round_rows: HashMap::new(),
            commit_hook: Arc::default(),
            last_event_id: 0,
            indexed_to: 0,
        };
        let commit_hook = writer.commit_hook.clone();
        let stats = writer.stats.clone();
        let (recovered, crashed_since) = writer.recover_and_start_session()?;

        let reader = TraceReader::open_alongside_writer(path)?;
        let checkpointer = spawn_checkpointer(path, stats.clone())?;
        let (ops, rx) = mpsc::sync_channel(OP_QUEUE);
        let handle = thread::Builder::new()
            .name("caal-trace-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| StoreError::Open {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self(Arc::new(StoreInner {
            path: path.to_owned(),
            library_id,
            ops,
            writer: Mutex::new(Some(handle)),
            slots: Mutex::new(HashMap::new()),
            slot_freed: Condvar::new(),
            reader,
            recovered,
            crashed_since,
            stats,
            commit_hook,
            checkpointer: Mutex::new(Some(checkpointer)),
            _lock: lock,
        })))
    }

    pub fn path(&self) -> &Path {
        &self.0.path
    }

    pub fn library_id(&self) -> &LibraryId {
        &self.0.library_id
    }

    /// Rounds that the last open found left open by a crash, as
    /// (conversation_id, round_seq); each now ends in `round.failed`.
    pub fn recovered(&self) -> &[(String, i64)] {
        &self.0.recovered
    }

    /// When the last open found a crashed session: the rounds mark it began
    /// at (every round after it may need its state changes reconciled).
    pub fn crashed_since(&self) -> Option<i64> {
        self.0.crashed_since
    }

    /// Calls `hook` after every commit with the highest durable event id.
    pub fn on_commit(&self, hook: impl Fn(i64) + Send + Sync + 'static) {
        *self
            .0
            .commit_hook
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(hook));
    }

    /// Commits and events written since open.
    pub fn writer_stats(&self) -> &WriterStats {
        &self.0.stats
    }

    /// A reader over committed data.
    pub fn reader(&self) -> &TraceReader {
        &self.0.reader
    }

    /// Starts a round: allocates its `round_seq` (waiting while the
    /// conversation has a round open) and records its header and `round.started`.
    pub fn begin_round(&self, spec: RoundSpec) -> Result<OpenRound, StoreError> {
        let inner = &*self.0;
        // Everything that can be refused is checked before a round_seq is
        // handed out, so a refusal never leaves a gap in the numbering.
        let started = EventDraft::new(RoundStarted {
            library_id: inner.library_id.to_string(),
            bucket_id: spec.bucket_id.to_string(),
            state_in: spec.state_in.clone(),
            channel: spec.channel.clone(),
            audio_id: spec.audio_id.as_ref().map(ToString::to_string),
        })
        .prepare()?;
        let (round_seq, head) = {
            let mut slots = lock(&inner.slots);
            if !slots.contains_key(&spec.conversation_id) {
                // First round of this conversation in this process: nothing of
                // it is in flight, so the committed state is the whole truth.
                let (last_round_seq, head) = inner.reader.chain_tail(&spec.conversation_id)?;
                slots.insert(
                    spec.conversation_id.clone(),
                    ConversationSlot {
                        last_round_seq,
                        head,
                        open: false,
                    },
                );
            }
            let (mut slots, waited) = inner
                .slot_freed
                .wait_timeout_while(slots, ROUND_WAIT, |s| {
                    s.get(&spec.conversation_id).is_some_and(|slot| slot.open)
                })
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let Some(slot) = slots.get_mut(&spec.conversation_id) else {
                unreachable!("slots are inserted above and never removed")
            };
            if waited.timed_out() && slot.open {
                return Err(StoreError::RoundBusy {
                    conversation: spec.conversation_id.to_string(),
                    round_seq: slot.last_round_seq,
                    waited_s: ROUND_WAIT.as_secs(),
                });
            }
            slot.last_round_seq += 1;
            slot.open = true;
            (slot.last_round_seq, slot.head.clone())
        };
        let header = RoundHeader {
            schema_version: SCHEMA_VERSION,
            library_id: inner.library_id.clone(),
            bucket_id: spec.bucket_id,
            conversation_id: spec.conversation_id,
            round_id: RoundId::new(),
            round_seq,
            state_in: spec.state_in,
            audio_id: spec.audio_id,
            channel: spec.channel,
            // The header and its round.started event carry the same instant.
            created_at: started.timestamp.clone(),
        };
        let mut tail = ChainTail {
            round_id: header.round_id.to_string(),
            conversation_id: header.conversation_id.to_string(),
            round_seq,
            next_event_seq: 1,
            head,
        };
        let started = tail.link(started);
        let round = OpenRound {
            store: self.clone(),
            header: header.clone(),
            tail: Mutex::new(tail),
            finished: false,
        };
        self.send(WriteOp::Begin {
            header: Box::new(header),
            started: Box::new(started),
        })?;
        Ok(round)
    }

    /// Waits until everything sent so far is committed.
    pub fn sync(&self) -> Result<(), StoreError> {
        let (done, wait) = mpsc::sync_channel(1);
        self.send(WriteOp::Sync { done })?;
        wait.recv().map_err(|_| StoreError::WriterGone)?
    }

    fn send(&self, op: WriteOp) -> Result<(), StoreError> {
        self.0.ops.send(op).map_err(|_| StoreError::WriterGone)
    }

    /// Frees the conversation for its next round, which chains onto `head`.
    fn release_slot(&self, conversation: &ConversationId, head: Option<String>) {
        if let Some(slot) = lock(&self.0.slots).get_mut(conversation) {
            slot.open = false;
            slot.head = head;
        }
        self.0.slot_freed.notify_all();
    }
}

impl Drop for StoreInner {
    fn drop(&mut self) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.ops.send(WriteOp::Close { done }).is_ok() {
            let _ = wait.recv();
        }
        if let Some(handle) = lock(&self.writer).take() {
            let _ = handle.join();
        }
        if let Some((stop, handle)) = lock(&self.checkpointer).take() {
            drop(stop);
            let _ = handle.join();
        }
    }
}

/// How often the checkpointer looks for committed work to move into the
/// database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);
/// A WAL this large is checkpointed even while the writer is busy.
const CHECKPOINT_WAL_BYTES: u64 = 32 << 20;

/// Checkpoints run on their own thread and connection (PASSIVE: never
/// blocking the writer), so copying the WAL into the database file, and the
/// fsync that comes with it, stay off the path that commits rounds.
fn spawn_checkpointer(
    path: &Path,
    stats: Arc<WriterStats>,
) -> Result<(SyncSender<()>, JoinHandle<()>), StoreError> {
    let conn = open_connection(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    let (stop, stopped) = mpsc::sync_channel::<()>(0);
    let handle = thread::Builder::new()
        .name("caal-checkpoint".into())
        .spawn(move || {
            let mut seen = 0;
            let mut pending_pages = false;
            // Runs until the store drops `stop`; once more at the end.
            loop {
                let closing = !matches!(
                    stopped.recv_timeout(CHECKPOINT_EVERY),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
                let commits = stats.commits.load(Ordering::Relaxed);
                let busy = commits != seen;
                seen = commits;
                pending_pages |= busy;
                let wal_bytes = fs::metadata(&wal).map_or(0, |m| m.len());
                // During a burst, only a large WAL is worth the copy (and the
                // fsync that comes with it); once the writer rests, catch up.
                if closing || (pending_pages && (!busy || wal_bytes >= CHECKPOINT_WAL_BYTES)) {
                    let mode = if closing { "TRUNCATE" } else { "PASSIVE" };
                    let _ =
                        conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()));
                    pending_pages = busy;
                }
                if closing {
                    return;
                }
            }
        })
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
    Ok((stop, handle))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not stop the recording of evidence.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The end of one conversation's chain while a round of it is open.
struct ChainTail {
    round_id: String,
    conversation_id: String,
    round_seq: i64,
    next_event_seq: i64,
    head: Option<String>,
}

impl ChainTail {
    /// Numbers and hashes the next event onto the chain.
    fn link(&mut self, event: PreparedEvent) -> EventRecord {
        let record = chain_event(
            &self.round_id,
            &self.conversation_id,
            self.round_seq,
            self.next_event_seq,
            self.head.take(),
            event,
        );
        self.next_event_seq += 1;
        self.head = Some(record.hash.clone());
        record
    }
}

/// Builds the stored record of `event` at that place in the chain.
fn chain_event(
    round_id: &str,
    conversation_id: &str,
    round_seq: i64,
    event_seq: i64,
    prev_hash: Option<String>,
    event: PreparedEvent,
) -> EventRecord {
    let mut record = EventRecord {
        schema_version: SCHEMA_VERSION,
        round_id: round_id.to_owned(),
        conversation_id: conversation_id.to_owned(),
        round_seq,
        event_seq,
        event_type: event.event_type.as_str().to_owned(),
        call_id: event.call_id,
        timestamp: event.timestamp,
        payload: event.payload,
        status: event.status.as_str().to_owned(),
        failure_code: event.failure_code,
        failure_reason: event.failure_reason,
        prev_hash,
        hash: String::new(),
    };
    record.hash = sha256_tagged(record.canonical_without_hash(&record.payload).as_bytes());
    record
}

/// A round in progress. Finish it with [`OpenRound::complete`] or
/// [`OpenRound::fail`]; dropped unfinished, it is recorded as failed.
pub struct OpenRound {
    store: TraceStore,
    header: RoundHeader,
    tail: Mutex<ChainTail>,
    finished: bool,
}

/// Wait for a finished round to be durable.
pub struct Durable(Option<Receiver<Result<(), StoreError>>>);

impl Durable {
    pub fn wait(self) -> Result<(), StoreError> {
        match self.0 {
            Some(rx) => rx.recv().map_err(|_| StoreError::WriterGone)?,
            None => Ok(()),
        }
    }
}

/// A draft a round may append itself (its start and end are recorded by the
/// round), checked against its schema.
fn appendable(draft: EventDraft) -> Result<PreparedEvent, StoreError> {
    if draft.event_type.is_terminal() || draft.event_type == EventType::RoundStarted {
        return Err(StoreError::InvalidPayload {
            event_type: draft.event_type.as_str(),
            field: "(event_type)".into(),
            problem: "recorded by the round itself; use complete() or fail()".into(),
        });
    }
    draft.prepare()
}

impl OpenRound {
    pub fn header(&self) -> &RoundHeader {
        &self.header
    }

    /// Records one event. A payload that does not match its schema is refused
    /// here, before anything is stored.
    pub fn append(&self, draft: EventDraft) -> Result<(), StoreError> {
        let event = appendable(draft)?;
        let record = lock(&self.tail).link(event);
        self.store.send(WriteOp::Append(Box::new(record)))
    }

    /// Appends several events in order as one message to the writer: events
    /// made together (an answer and its validators' verdicts) cost one
    /// wake-up of the writer thread, not one each. All are checked first;
    /// if one is refused, none is appended.
    pub fn append_all(&self, drafts: Vec<EventDraft>) -> Result<(), StoreError> {
        let mut prepared = Vec::with_capacity(drafts.len());
        for draft in drafts {
            prepared.push(appendable(draft)?);
        }
        let records = {
            let mut tail = lock(&self.tail);
            prepared.into_iter().map(|e| tail.link(e)).collect()
        };
        self.store.send(WriteOp::AppendMany(records))
    }

    /// Ends the round with `round.completed` and waits until it is durable.
    pub fn complete(self, state_out: &str) -> Result<(), StoreError> {
        self.complete_nowait(state_out)?.wait()
    }

    /// Ends the round with `round.failed` and waits until it is durable.
    pub fn fail(self, failure_code: &str, failure_reason: &str) -> Result<(), StoreError> {
        self.fail_nowait(failure_code, failure_reason)?.wait()
    }

    /// Ends the round with `round.completed` carrying the state changes it
    /// makes (`boundary`), waits until durable, then applies them (`apply`;
    /// again on the next open should the process stop in between). A round
    /// that changes state frees its conversation only once they are
    /// applied: the next round of it (a "yes" sent at the same moment) must
    /// read the confirmation this one left, not the one before.
    pub fn complete_with(
        self,
        state_out: &str,
        boundary: Option<Value>,
        apply: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let changes = boundary.is_some();
        let completed = RoundCompleted {
            status: "ok".into(),
            state_out: state_out.into(),
            boundary,
        };
        self.finish_applying(EventDraft::new(completed), changes, apply)
    }

    /// Ends the round with `round.failed` carrying its state changes, as `complete_with`.
    pub fn fail_with(
        self,
        failure_code: &str,
        failure_reason: &str,
        boundary: Option<Value>,
        apply: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let changes = boundary.is_some();
        self.finish_applying(
            failure_draft(failure_code, failure_reason, boundary),
            changes,
            apply,
        )
    }

    /// The terminal event, durable; then `apply` when it records state
    /// changes, with the conversation held until they are applied.
    fn finish_applying(
        self,
        draft: EventDraft,
        changes: bool,
        apply: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let (durable, held) = self.finish_holding(draft, changes)?;
        durable.wait()?;
        let applied = if changes { apply() } else { Ok(()) };
        drop(held);
        applied
    }

    /// Ends the round with `round.completed`; the returned ticket waits for durability.
    pub fn complete_nowait(self, state_out: &str) -> Result<Durable, StoreError> {
        let completed = RoundCompleted {
            status: "ok".into(),
            state_out: state_out.into(),
            boundary: None,
        };
        self.finish(EventDraft::new(completed), true)
    }

    pub fn fail_nowait(
        self,
        failure_code: &str,
        failure_reason: &str,
    ) -> Result<Durable, StoreError> {
        self.finish(failure_draft(failure_code, failure_reason, None), true)
    }

    fn finish(self, draft: EventDraft, wait: bool) -> Result<Durable, StoreError> {
        Ok(self.finish_holding_with(draft, wait, false)?.0)
    }

    /// `finish`, waiting for durability, the conversation held (when
    /// `hold`) until the returned guard drops.
    fn finish_holding(
        self,
        draft: EventDraft,
        hold: bool,
    ) -> Result<(Durable, Option<Held>), StoreError> {
        self.finish_holding_with(draft, true, hold)
    }

    fn finish_holding_with(
        mut self,
        draft: EventDraft,
        wait: bool,
        hold: bool,
    ) -> Result<(Durable, Option<Held>), StoreError> {
        let event = draft.prepare()?;
        self.finished = true;
        let (done, rx) = if wait {
            let (tx, rx) = mpsc::sync_channel(1);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let mut tail = lock(&self.tail);
        let event = tail.link(event);
        let head = tail.head.clone();
        drop(tail);
        let sent = self.store.send(WriteOp::Finish {
            event: Box::new(event),
            done,
        });
        let held = Held {
            store: self.store.clone(),
            conversation: self.header.conversation_id.clone(),
            head,
        };
        let held = if hold && sent.is_ok() {
            Some(held)
        } else {
            drop(held);
            None
        };
        sent.map(|()| (Durable(rx), held))
    }
}

/// A conversation whose last round has ended but whose state changes are
/// still being applied: freed for its next round when this drops.
struct Held {
    store: TraceStore,
    conversation: ConversationId,
    head: Option<String>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.store
            .release_slot(&self.conversation, self.head.take());
    }
}

fn failure_draft(code: &str, reason: &str, boundary: Option<Value>) -> EventDraft {
    EventDraft::new(RoundFailed {
        failure_code: code.into(),
        failure_reason: reason.into(),
        boundary,
    })
    .failed(code, reason)
}

impl Drop for OpenRound {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // A round dropped without an outcome (an early return, a panic)
        // still gets its terminal event, so the chain never stays open.
        let draft = failure_draft(
            "round.abandoned",
            "the round ended without recording an outcome",
            None,
        );
        let mut tail = lock(&self.tail);
        if let Ok(event) = draft.prepare() {
            let event = tail.link(event);
            let _ = self.store.send(WriteOp::Finish {
                event: Box::new(event),
                done: None,
            });
        }
        let head = tail.head.clone();
        drop(tail);
        self.store.release_slot(&self.header.conversation_id, head);
    }
}

// ---------------------------------------------------------------- opening

fn acquire_lock(db: &Path) -> Result<File, StoreError> {
    let path = db.with_extension("db.lock");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file
                .set_len(0)
                .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()));
            let _ = writeln!(file, "{}", std::process::id());
            Ok(file)
        }
        Err(fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let holder = match pid.trim() {
                "" => String::new(),
                pid => format!(" (pid {pid})"),
            };
            Err(StoreError::Locked {
                path: db.to_owned(),
                holder,
            })
        }
        Err(fs::TryLockError::Error(source)) => Err(StoreError::Open { path, source }),
    }
}

/// A connection to the trace database at `path` (created if missing), set
/// up as the store's writer sets up its own (WAL, `durability`, the same
/// pragmas) and migrated to the current schema, with nothing of the store
/// around it: no lock, no chain, no schema checks, no writer thread. For
/// `caal bench trace`, which inserts the store's rows through it to measure
/// the store against the bare database.
pub fn bare_connection(path: &Path, durability: Durability) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    configure_writer(&conn, path, durability)?;
    migrate(&conn, &TRACE)?;
    Ok(conn)
}

fn configure_writer(
    conn: &Connection,
    path: &Path,
    durability: Durability,
) -> Result<(), StoreError> {
    crate::sqlite::enable_wal(conn, path)?;
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Fsync => "FULL",
    };
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync};
         PRAGMA foreign_keys = OFF;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -32000;
         PRAGMA journal_size_limit = 67108864;
         PRAGMA wal_autocheckpoint = 0;"
    ))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(())
}

// ---------------------------------------------------------------- the writer

struct Writer {
    conn: Connection,
    session_id: i64,
    poisoned: Option<String>,
    stats: Arc<WriterStats>,
    /// rounds.id of each open round, by round_id.
    round_rows: HashMap<String, i64>,
    commit_hook: CommitHook,
    /// The id of the last event inserted.
    last_event_id: i64,
    /// The last event id indexed for search (FTS5, migration 4).
    indexed_to: i64,
}

/// Unindexed events the writer lets build up under load before it indexes
/// them for search anyway (when it is idle, it indexes at once).
const INDEX_LAG: i64 = 8_192;
/// How long the writer waits with nothing to write before it indexes.
const INDEX_QUIET: Duration = Duration::from_millis(20);

const INSERT_ROUND: &str = "INSERT INTO rounds (schema_version, round_id, library_id, bucket_id, conversation_id,
    round_seq, state_in, audio_id, channel, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

const INSERT_EVENT: &str =
    "INSERT INTO events (schema_version, round_id, conversation_id, round_seq, event_seq,
    event_type, call_id, timestamp, payload, status, failure_code, failure_reason, prev_hash, hash, round_row)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

impl Writer {
    /// Appends `round.failed` (`crash.recovered`) to every round a crashed
    /// session left open, closes those sessions as recovered, and starts this one.
    #[allow(clippy::type_complexity)]
    fn recover_and_start_session(
        &mut self,
    ) -> Result<(Vec<(String, i64)>, Option<i64>), StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        match self.recover_inner() {
            Ok(recovered) => {
                self.conn.execute_batch("COMMIT")?;
                Ok(recovered)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn recover_inner(&mut self) -> Result<(Vec<(String, i64)>, Option<i64>), StoreError> {
        let unclosed: Vec<(i64, i64)> = {
            let mut stmt = self.conn.prepare(
                "SELECT s.id, s.rounds_mark FROM writer_sessions s
                 WHERE NOT EXISTS (SELECT 1 FROM writer_session_ends e WHERE e.session_id = s.id)",
            )?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?
        };
        let mut recovered = Vec::new();
        let crashed_since = unclosed.iter().map(|(_, m)| *m).min();
        if let Some(mark) = crashed_since {
            let open: Vec<(String, String, i64)> = {
                let mut stmt = self.conn.prepare(
                    "SELECT r.round_id, r.conversation_id, r.round_seq FROM rounds r
                     WHERE r.id > ?1 AND NOT EXISTS (
                        SELECT 1 FROM events e
                        WHERE e.round_row = r.id
                          AND e.event_type IN ('round.completed', 'round.failed'))
                     ORDER BY r.id",
                )?;
                stmt.query_map([mark], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<_, _>>()?
            };
            let reason = "the process recording this round stopped before the round ended";
            for (round_id, conversation_id, round_seq) in open {
                // A conversation runs one round at a time, so an open round
                // is its conversation's last: the chain tail is its tail.
                let (last_seq, head): (i64, Option<String>) = self
                    .conn
                    .query_row(
                        "SELECT e.event_seq, e.hash FROM rounds r JOIN events e ON e.round_row = r.id
                         WHERE r.conversation_id = ?1 ORDER BY r.round_seq DESC, e.event_seq DESC LIMIT 1",
                        [&conversation_id],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?
                    .map_or((0, None), |(seq, hash)| (seq, Some(hash)));
                let event = failure_draft("crash.recovered", reason, None).prepare()?;
                let record = chain_event(
                    &round_id,
                    &conversation_id,
                    round_seq,
                    last_seq + 1,
                    head,
                    event,
                );
                Inserts::prepare(&self.conn)?.event(
                    &mut self.round_rows,
                    &mut self.last_event_id,
                    &record,
                    true,
                )?;
                recovered.push((conversation_id, round_seq));
            }
            let now = now_timestamp();
            for (session, _) in &unclosed {
                self.conn.execute(
                    "INSERT INTO writer_session_ends (session_id, schema_version, ended_at, how) VALUES (?1, ?2, ?3, 'recovered')",
                    params![session, SCHEMA_VERSION, now],
                )?;
            }
        }
        let mark: i64 =
            self.conn
                .query_row("SELECT coalesce(max(id), 0) FROM rounds", [], |r| r.get(0))?;
        self.conn.execute(
            "INSERT INTO writer_sessions (schema_version, started_at, pid, caal_version, rounds_mark) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![SCHEMA_VERSION, now_timestamp(), std::process::id(), env!("CARGO_PKG_VERSION"), mark],
        )?;
        self.session_id = self.conn.last_insert_rowid();
        Ok((recovered, crashed_since))
    }

    fn run(mut self, rx: Receiver<WriteOp>) {
        let mut batch = Vec::with_capacity(1024);
        loop {
            // Search is indexed off the rounds' path: after a quiet moment,
            // or when too much is unindexed (a search reads the unindexed
            // tail directly, so it never misses an event either way).
            let first = match rx.recv_timeout(INDEX_QUIET) {
                Ok(op) => op,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.index_when_free();
                    let Ok(op) = rx.recv() else { return };
                    op
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            let started = std::time::Instant::now();
            let closed = self.apply_batch(&mut batch);
            let busy = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.stats.busy_ns.fetch_add(busy, Ordering::Relaxed);
            if closed {
                return;
            }
            if self.last_event_id - self.indexed_to >= INDEX_LAG {
                self.index_when_free();
            }
        }
    }

    /// Indexes for search what was appended since the last time, in a
    /// transaction of its own; a failure is logged and tried again later
    /// (search reads the unindexed tail meanwhile).
    fn index_when_free(&mut self) {
        if self.poisoned.is_some() || self.last_event_id <= self.indexed_to {
            return;
        }
        let done = self
            .conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(StoreError::from)
            .and_then(|()| self.index_for_search())
            .and_then(|()| Ok(self.conn.execute_batch("COMMIT")?));
        if let Err(e) = done {
            let _ = self.conn.execute_batch("ROLLBACK");
            tracing::warn!("indexing the trace for search failed (tried again later): {e}");
            self.indexed_to = self.indexed_mark().unwrap_or(self.indexed_to);
        }
    }

    /// Inside a transaction: every event after the index's last one.
    fn index_for_search(&mut self) -> Result<(), StoreError> {
        let from = self.indexed_mark()?;
        self.conn
            .prepare_cached(
                "INSERT INTO events_fts (rowid, text)
                 SELECT id, text FROM events_search_text WHERE id > ?1 AND text IS NOT NULL",
            )?
            .execute([from])?;
        self.indexed_to = self.last_event_id.max(from);
        Ok(())
    }

    /// The last event id in the search index.
    fn indexed_mark(&self) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT coalesce(max(id), 0) FROM events_fts_docsize",
            [],
            |r| r.get(0),
        )?)
    }

    /// Applies a batch in one transaction, all or nothing; returns true when
    /// the store closed.
    fn apply_batch(&mut self, batch: &mut Vec<WriteOp>) -> bool {
        let mut replies: Vec<Reply> = Vec::new();
        let mut closing: Option<Reply> = None;
        let mut inserted = 0u64;
        let mut failure = self.poisoned.clone();
        if failure.is_none() {
            failure = self
                .conn
                .execute_batch("BEGIN IMMEDIATE")
                .err()
                .map(|e| e.to_string());
        }
        {
            // Prepared once a batch: a cached statement looked up per event
            // hashed its SQL text each time (a profile of `caal bench trace`).
            let mut inserts = match failure {
                None => match Inserts::prepare(&self.conn) {
                    Ok(inserts) => Some(inserts),
                    Err(e) => {
                        failure = Some(e.to_string());
                        None
                    }
                },
                Some(_) => None,
            };
            let rows = &mut self.round_rows;
            let last_event_id = &mut self.last_event_id;
            for op in batch.drain(..) {
                let inserts = match (&mut inserts, &failure) {
                    (Some(inserts), None) => inserts,
                    // Not applied, but their senders hear the failure.
                    _ => {
                        op_replies(op, &mut replies, &mut closing);
                        continue;
                    }
                };
                let write =
                    match op {
                        WriteOp::Begin { header, started } => Some(
                            inserts
                                .round(rows, &header)
                                .and_then(|()| inserts.event(rows, last_event_id, &started, false)),
                        ),
                        WriteOp::Append(event) => {
                            Some(inserts.event(rows, last_event_id, &event, false))
                        }
                        WriteOp::AppendMany(events) => Some(events.iter().try_for_each(|event| {
                            inserts.event(rows, last_event_id, event, false)
                        })),
                        WriteOp::Finish { event, done } => {
                            replies.extend(done);
                            Some(inserts.event(rows, last_event_id, &event, true))
                        }
                        WriteOp::Sync { done } => {
                            replies.push(done);
                            None
                        }
                        WriteOp::Close { done } => {
                            closing = Some(done);
                            None
                        }
                    };
                match write {
                    Some(Ok(())) => inserted += 1,
                    Some(Err(e)) => failure = Some(e.to_string()),
                    None => {}
                }
            }
        }
        // A store closing leaves nothing unindexed for search.
        if failure.is_none() && closing.is_some() {
            failure = self.index_for_search().err().map(|e| e.to_string());
        }
        if failure.is_none() && closing.is_some() {
            failure = self
                .conn
                .execute(
                    "INSERT INTO writer_session_ends (session_id, schema_version, ended_at, how) VALUES (?1, ?2, ?3, 'clean')",
                    params![self.session_id, SCHEMA_VERSION, now_timestamp()],
                )
                .err()
                .map(|e| e.to_string());
        }
        if failure.is_none() {
            failure = self
                .conn
                .execute_batch("COMMIT")
                .err()
                .map(|e| e.to_string());
        }
        match &failure {
            None => {
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                self.stats.events.fetch_add(inserted, Ordering::Relaxed);
                if inserted > 0
                    && let Some(hook) = self
                        .commit_hook
                        .read()
                        .unwrap_or_else(|p| p.into_inner())
                        .as_ref()
                {
                    hook(self.last_event_id);
                }
            }
            Some(reason) => {
                // Nothing of this batch is kept; every later write would
                // chain onto events that are not on disk, so stop writing.
                if self.poisoned.is_none() {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    self.poisoned = Some(reason.clone());
                }
            }
        }
        let result = || match &failure {
            None => Ok(()),
            Some(reason) => Err(StoreError::Poisoned {
                reason: reason.clone(),
            }),
        };
        for done in replies {
            let _ = done.send(result());
        }
        if let Some(done) = closing {
            let _ = done.send(result());
            return true;
        }
        false
    }
}

/// Where a write that is not applied still owes an answer.
fn op_replies(op: WriteOp, replies: &mut Vec<Reply>, closing: &mut Option<Reply>) {
    match op {
        WriteOp::Finish { done, .. } => replies.extend(done),
        WriteOp::Sync { done } => replies.push(done),
        WriteOp::Close { done } => *closing = Some(done),
        WriteOp::Begin { .. } | WriteOp::Append(_) | WriteOp::AppendMany(_) => {}
    }
}

/// The writer's statements, prepared once for a batch.
struct Inserts<'c> {
    round: rusqlite::CachedStatement<'c>,
    event: rusqlite::CachedStatement<'c>,
    round_row: rusqlite::CachedStatement<'c>,
}

impl<'c> Inserts<'c> {
    fn prepare(conn: &'c Connection) -> Result<Self, StoreError> {
        Ok(Self {
            round: conn.prepare_cached(INSERT_ROUND)?,
            event: conn.prepare_cached(INSERT_EVENT)?,
            round_row: conn.prepare_cached("SELECT id FROM rounds WHERE round_id = ?1")?,
        })
    }

    /// Inserts a round's row and remembers its id while the round is open.
    fn round(
        &mut self,
        rows: &mut HashMap<String, i64>,
        header: &RoundHeader,
    ) -> Result<(), StoreError> {
        let row = self.round.insert(params![
            header.schema_version,
            header.round_id.to_string(),
            header.library_id.as_str(),
            header.bucket_id.as_str(),
            header.conversation_id.as_str(),
            header.round_seq,
            header.state_in,
            header.audio_id.map(|a| a.to_string()),
            header.channel,
            header.created_at,
        ])?;
        rows.insert(header.round_id.to_string(), row);
        Ok(())
    }

    /// Inserts an event of an open round; `last` forgets the round afterwards.
    fn event(
        &mut self,
        rows: &mut HashMap<String, i64>,
        last_event_id: &mut i64,
        r: &EventRecord,
        last: bool,
    ) -> Result<(), StoreError> {
        let round_row = match rows.get(&r.round_id) {
            Some(row) => *row,
            None => self.round_row.query_row([&r.round_id], |row| row.get(0))?,
        };
        if last {
            rows.remove(&r.round_id);
        }
        *last_event_id = self.event.insert(params![
            r.schema_version,
            r.round_id,
            r.conversation_id,
            r.round_seq,
            r.event_seq,
            r.event_type,
            r.call_id,
            r.timestamp,
            r.payload,
            r.status,
            r.failure_code,
            r.failure_reason,
            r.prev_hash,
            r.hash,
            round_row,
        ])?;
        Ok(())
    }
}
