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
//! The writer alone computes `event_seq` and the chain hashes, so a gap or a
//! fork cannot be produced from outside. `round_seq` is allocated under the
//! per-conversation slot lock, and a conversation runs one round at a time,
//! which keeps each chain in (round_seq, event_seq) order.

use std::{
    collections::{HashMap, hash_map::Entry},
    fs::{self, File, OpenOptions},
    io::{Read as _, Seek as _, SeekFrom, Write as _},
    path::{Path, PathBuf},
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, Receiver, SyncSender},
    },
    thread::{self, JoinHandle},
    time::{Duration, SystemTime},
};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::{Value, json};

use super::{
    EventType, SCHEMA_VERSION, StoreError, TraceReader,
    chain::{EventRecord, canonical_json, sha256_tagged},
    taxonomy::MIGRATIONS,
};
use crate::ids::{AudioId, BucketId, CallId, ConversationId, LibraryId, RoundId};

/// `application_id` stamped into every caal trace database ("CAA1").
pub const APPLICATION_ID: i32 = 0x4341_4131;

/// How far a finished round is guaranteed to survive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// WAL with synchronous=NORMAL: survives a killed process, not a power cut.
    Normal,
    /// WAL with synchronous=FULL: every commit is fsynced; survives power loss.
    /// Concurrent rounds share one fsync (group commit).
    Fsync,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "normal" => Ok(Self::Normal),
            "fsync" => Ok(Self::Fsync),
            other => Err(format!("unknown durability {other:?}: use \"normal\" or \"fsync\"")),
        }
    }
}

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
    pub fn new(event_type: EventType, payload: Value) -> Self {
        Self { event_type, payload, call_id: None, status: EventStatus::Ok, failure: None }
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

    /// Validates and canonicalises: after this, the writer cannot refuse it
    /// for its content.
    fn prepare(self) -> Result<PreparedEvent, StoreError> {
        self.event_type.validate(&self.payload)?;
        let (failure_code, failure_reason) = self.failure.unzip();
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

enum WriteOp {
    Begin { header: RoundHeader, started: PreparedEvent },
    Append { round_id: RoundId, event: PreparedEvent },
    Finish { round_id: RoundId, event: PreparedEvent, done: Option<Reply> },
    Sync { done: Reply },
    Close { done: Reply },
}

/// Per conversation: the last round_seq handed out and whether a round is open.
struct ConversationSlot {
    last_round_seq: i64,
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
    stats: Arc<WriterStats>,
    _lock: File,
}

/// Counters the writer keeps: how well group commit is batching.
#[derive(Debug, Default)]
pub struct WriterStats {
    pub commits: AtomicU64,
    pub events: AtomicU64,
}

/// The trace store, open for writing. Cheap to clone; the last clone closes it.
#[derive(Clone)]
pub struct TraceStore(Arc<StoreInner>);

/// How long `begin_round` waits for a conversation's previous round.
const ROUND_WAIT: Duration = Duration::from_secs(30);
/// Most operations applied in one transaction.
const MAX_BATCH: usize = 16_384;

impl TraceStore {
    /// Opens (creating if needed) the store at `path`, applies pending
    /// migrations, and recovers rounds a crashed process left open.
    pub fn open(path: &Path, library_id: LibraryId, durability: Durability) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|source| StoreError::Open { path: dir.to_owned(), source })?;
        }
        let lock = acquire_lock(path)?;
        let conn = open_connection(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE)?;
        check_identity(&conn, path, true)?;
        configure_writer(&conn, durability)?;
        migrate(&conn)?;

        let mut writer = Writer::new(conn);
        let stats = writer.stats.clone();
        let recovered = writer.recover_and_start_session()?;

        let reader = TraceReader::open_alongside_writer(path)?;
        let (ops, rx) = mpsc::sync_channel(65_536);
        let handle = thread::Builder::new()
            .name("caal-trace-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| StoreError::Open { path: path.to_owned(), source })?;
        Ok(Self(Arc::new(StoreInner {
            path: path.to_owned(),
            library_id,
            ops,
            writer: Mutex::new(Some(handle)),
            slots: Mutex::new(HashMap::new()),
            slot_freed: Condvar::new(),
            reader,
            recovered,
            stats,
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

    /// Commits and events written since open.
    pub fn writer_stats(&self) -> &WriterStats {
        &self.0.stats
    }

    /// A reader over committed data.
    pub fn reader(&self) -> &TraceReader {
        &self.0.reader
    }

    /// Starts a round: allocates its `round_seq` (waiting if the conversation
    /// has a round open) and records its header and `round.started`.
    pub fn begin_round(&self, spec: RoundSpec) -> Result<OpenRound, StoreError> {
        let inner = &*self.0;
        // Everything that can be refused is checked before a round_seq is
        // handed out, so a refusal never leaves a gap in the numbering.
        let started = EventDraft::new(
            EventType::RoundStarted,
            json!({
                "library_id": inner.library_id,
                "bucket_id": spec.bucket_id,
                "state_in": spec.state_in,
                "channel": spec.channel,
                "audio_id": spec.audio_id,
            }),
        )
        .prepare()?;
        let round_seq = {
            let mut slots = lock(&inner.slots);
            if !slots.contains_key(&spec.conversation_id) {
                let last = inner.reader.last_round_seq(&spec.conversation_id)?;
                slots.insert(spec.conversation_id.clone(), ConversationSlot { last_round_seq: last, open: false });
            }
            let (mut slots, timeout) = inner
                .slot_freed
                .wait_timeout_while(slots, ROUND_WAIT, |s| s.get(&spec.conversation_id).is_some_and(|slot| slot.open))
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let slot = match slots.entry(spec.conversation_id.clone()) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(_) => unreachable!("slot inserted above and never removed"),
            };
            if timeout.timed_out() && slot.open {
                return Err(StoreError::RoundBusy {
                    conversation: spec.conversation_id.to_string(),
                    round_seq: slot.last_round_seq,
                    waited_s: ROUND_WAIT.as_secs(),
                });
            }
            slot.last_round_seq += 1;
            slot.open = true;
            slot.last_round_seq
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
        let round = OpenRound { store: self.clone(), header: header.clone(), finished: false };
        self.send(WriteOp::Begin { header, started })?;
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

    fn release_slot(&self, conversation: &ConversationId) {
        if let Some(slot) = lock(&self.0.slots).get_mut(conversation) {
            slot.open = false;
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
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not stop the recording of evidence.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A round in progress. Finish it with [`OpenRound::complete`] or
/// [`OpenRound::fail`]; dropped unfinished, it is recorded as failed.
pub struct OpenRound {
    store: TraceStore,
    header: RoundHeader,
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

impl OpenRound {
    pub fn header(&self) -> &RoundHeader {
        &self.header
    }

    /// Records one event. A payload that does not match its schema is refused
    /// here, before anything is stored.
    pub fn append(&self, draft: EventDraft) -> Result<(), StoreError> {
        if draft.event_type.is_terminal() || draft.event_type == EventType::RoundStarted {
            return Err(StoreError::InvalidPayload {
                event_type: draft.event_type.as_str(),
                field: "(event_type)".into(),
                problem: "recorded by the round itself; use complete() or fail()".into(),
            });
        }
        let event = draft.prepare()?;
        self.store.send(WriteOp::Append { round_id: self.header.round_id, event })
    }

    /// Ends the round with `round.completed` and waits until it is durable.
    pub fn complete(self, state_out: &str) -> Result<(), StoreError> {
        self.complete_nowait(state_out)?.wait()
    }

    /// Ends the round with `round.failed` and waits until it is durable.
    pub fn fail(self, failure_code: &str, failure_reason: &str) -> Result<(), StoreError> {
        self.fail_nowait(failure_code, failure_reason)?.wait()
    }

    /// Ends the round with `round.completed`; the returned ticket waits for durability.
    pub fn complete_nowait(self, state_out: &str) -> Result<Durable, StoreError> {
        let draft = EventDraft::new(EventType::RoundCompleted, json!({"status": "ok", "state_out": state_out}));
        self.finish(draft, true)
    }

    pub fn fail_nowait(self, failure_code: &str, failure_reason: &str) -> Result<Durable, StoreError> {
        let draft =
            EventDraft::new(EventType::RoundFailed, json!({"failure_code": failure_code, "failure_reason": failure_reason}))
                .failed(failure_code, failure_reason);
        self.finish(draft, true)
    }

    fn finish(mut self, draft: EventDraft, wait: bool) -> Result<Durable, StoreError> {
        let event = draft.prepare()?;
        self.finished = true;
        let (done, rx) = if wait {
            let (tx, rx) = mpsc::sync_channel(1);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let sent = self.store.send(WriteOp::Finish { round_id: self.header.round_id, event, done });
        self.store.release_slot(&self.header.conversation_id);
        sent.map(|()| Durable(rx))
    }
}

impl Drop for OpenRound {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let draft = EventDraft::new(
            EventType::RoundFailed,
            json!({"failure_code": "round.abandoned", "failure_reason": "the round ended without recording an outcome"}),
        )
        .failed("round.abandoned", "the round ended without recording an outcome");
        let store = self.store.clone();
        let header = self.header.clone();
        // Best effort: a dropped round still gets its terminal event.
        if let Ok(event) = draft.prepare() {
            let _ = store.send(WriteOp::Finish { round_id: header.round_id, event, done: None });
        }
        store.release_slot(&header.conversation_id);
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
        .map_err(|source| StoreError::Open { path: path.clone(), source })?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.set_len(0).and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()));
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
            Err(StoreError::Locked { path: db.to_owned(), holder })
        }
        Err(fs::TryLockError::Error(source)) => Err(StoreError::Open { path, source }),
    }
}

pub(super) fn open_connection(path: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let flags = flags | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    Connection::open_with_flags(path, flags).map_err(|e| classify(path, e))
}

/// Maps "this is not our database" driver errors to messages that say so.
pub(super) fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => StoreError::NotADatabase { path: path.to_owned() },
        Some(rusqlite::ErrorCode::CannotOpen) | Some(rusqlite::ErrorCode::PermissionDenied) => StoreError::Open {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string()),
        },
        _ => StoreError::from(e),
    }
}

/// Checks the file is a caal trace store (or empty), of a schema this build reads.
pub(super) fn check_identity(conn: &Connection, path: &Path, may_migrate: bool) -> Result<(), StoreError> {
    let app_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(|e| classify(path, e))?;
    let version: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| classify(path, e))?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let supported = latest_migration();
    if app_id != APPLICATION_ID && !(app_id == 0 && tables == 0) {
        let detail = if app_id == 0 {
            format!("{tables} schema objects, no caal application id")
        } else {
            format!("application_id {app_id:#x}")
        };
        return Err(StoreError::ForeignDatabase { path: path.to_owned(), detail });
    }
    if version > supported {
        return Err(StoreError::NewerSchema { path: path.to_owned(), found: version, supported });
    }
    if version < supported && !may_migrate {
        return Err(StoreError::OlderSchema { path: path.to_owned(), found: version, supported });
    }
    Ok(())
}

pub(super) fn configure_writer(conn: &Connection, durability: Durability) -> Result<(), StoreError> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Sqlite(format!("could not switch to WAL (journal_mode is {mode})")));
    }
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Fsync => "FULL",
    };
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync};
         PRAGMA foreign_keys = OFF;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -32000;
         PRAGMA journal_size_limit = 67108864;"
    ))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(())
}

pub(super) fn latest_migration() -> u32 {
    MIGRATIONS.iter().map(|(n, _, _)| *n).max().unwrap_or(0)
}

/// Applies, in order and each in its own transaction, the migrations newer
/// than the file's `user_version`.
pub(super) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let current: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (number, name, sql) in MIGRATIONS.iter().filter(|(n, _, _)| *n > current) {
        let batch = format!(
            "BEGIN IMMEDIATE;\n{sql}\nPRAGMA application_id = {APPLICATION_ID};\nPRAGMA user_version = {number};\nCOMMIT;"
        );
        if let Err(e) = conn.execute_batch(&batch) {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(StoreError::Migration { name: (*name).to_owned(), message: e.to_string() });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- the writer

struct OpenRoundState {
    conversation_id: String,
    round_seq: i64,
    next_event_seq: i64,
    error: Option<String>,
}

struct Writer {
    conn: Connection,
    /// Last hash of each conversation's chain (None: no event yet).
    heads: HashMap<String, Option<String>>,
    rounds: HashMap<RoundId, OpenRoundState>,
    session_id: i64,
    poisoned: Option<String>,
    stats: Arc<WriterStats>,
}

const INSERT_EVENT: &str = "INSERT INTO events (schema_version, round_id, conversation_id, round_seq, event_seq,
    event_type, call_id, timestamp, payload, status, failure_code, failure_reason, prev_hash, hash)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";

impl Writer {
    fn new(conn: Connection) -> Self {
        Self { conn, heads: HashMap::new(), rounds: HashMap::new(), session_id: 0, poisoned: None, stats: Arc::default() }
    }

    /// Appends `round.failed` (`crash.recovered`) to every round a crashed
    /// session left open, closes those sessions as recovered, and starts this one.
    fn recover_and_start_session(&mut self) -> Result<Vec<(String, i64)>, StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = self.recover_inner();
        match result {
            Ok(recovered) => {
                self.conn.execute_batch("COMMIT")?;
                Ok(recovered)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                self.heads.clear();
                Err(e)
            }
        }
    }

    fn recover_inner(&mut self) -> Result<Vec<(String, i64)>, StoreError> {
        let unclosed: Vec<(i64, i64)> = {
            let mut stmt = self.conn.prepare(
                "SELECT s.id, s.rounds_mark FROM writer_sessions s
                 WHERE NOT EXISTS (SELECT 1 FROM writer_session_ends e WHERE e.session_id = s.id)",
            )?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?
        };
        let mut recovered = Vec::new();
        if let Some(mark) = unclosed.iter().map(|(_, m)| *m).min() {
            let open: Vec<(String, String, i64, i64)> = {
                let mut stmt = self.conn.prepare(
                    "SELECT r.round_id, r.conversation_id, r.round_seq,
                            (SELECT max(e.event_seq) FROM events e
                              WHERE e.conversation_id = r.conversation_id AND e.round_seq = r.round_seq)
                     FROM rounds r
                     WHERE r.id > ?1 AND NOT EXISTS (
                        SELECT 1 FROM events e
                        WHERE e.conversation_id = r.conversation_id AND e.round_seq = r.round_seq
                          AND e.event_type IN ('round.completed', 'round.failed'))
                     ORDER BY r.id",
                )?;
                stmt.query_map([mark], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, Option<i64>>(3)?.unwrap_or(0))))?
                    .collect::<Result<_, _>>()?
            };
            let reason = "the process recording this round stopped before the round ended";
            for (round_id, conversation_id, round_seq, last_seq) in open {
                let event = EventDraft::new(
                    EventType::RoundFailed,
                    json!({"failure_code": "crash.recovered", "failure_reason": reason}),
                )
                .failed("crash.recovered", reason)
                .prepare()?;
                self.insert_event(&round_id, &conversation_id, round_seq, last_seq + 1, &event)?;
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
        let mark: i64 = self.conn.query_row("SELECT coalesce(max(id), 0) FROM rounds", [], |r| r.get(0))?;
        self.conn.execute(
            "INSERT INTO writer_sessions (schema_version, started_at, pid, caal_version, rounds_mark) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![SCHEMA_VERSION, now_timestamp(), std::process::id(), env!("CARGO_PKG_VERSION"), mark],
        )?;
        self.session_id = self.conn.last_insert_rowid();
        Ok(recovered)
    }

    fn run(mut self, rx: Receiver<WriteOp>) {
        let mut batch = Vec::with_capacity(1024);
        loop {
            let Ok(first) = rx.recv() else { return };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            if self.apply_batch(&mut batch) {
                return;
            }
        }
    }

    /// Applies a batch in one transaction; returns true when the store closed.
    fn apply_batch(&mut self, batch: &mut Vec<WriteOp>) -> bool {
        let mut replies: Vec<(Reply, Option<String>)> = Vec::new();
        let mut closing: Option<Reply> = None;
        let began = match &self.poisoned {
            Some(reason) => Err(reason.clone()),
            None => self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| e.to_string()),
        };
        for op in batch.drain(..) {
            let applying = began.is_ok();
            match op {
                WriteOp::Begin { header, started } if applying => self.begin(header, started),
                WriteOp::Append { round_id, event } if applying => {
                    self.append(round_id, event, false);
                }
                WriteOp::Finish { round_id, event, done } => {
                    let error = if applying { self.append(round_id, event, true) } else { None };
                    if let Some(done) = done {
                        replies.push((done, error));
                    }
                }
                WriteOp::Sync { done } => replies.push((done, None)),
                WriteOp::Close { done } => {
                    if applying {
                        self.close_session();
                    }
                    closing = Some(done);
                }
                WriteOp::Begin { .. } | WriteOp::Append { .. } => {}
            }
        }
        let failure = match began {
            Err(reason) => Some(reason),
            Ok(()) => match self.conn.execute_batch("COMMIT") {
                Ok(()) => {
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    None
                }
                Err(e) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    Some(e.to_string())
                }
            },
        };
        if let Some(reason) = &failure {
            // What was in this batch is gone; every later write would chain
            // onto state that is not on disk, so stop writing altogether.
            self.poisoned.get_or_insert_with(|| reason.clone());
            self.heads.clear();
            self.rounds.clear();
        }
        for (done, error) in replies {
            let result = match (&failure, error) {
                (Some(reason), _) => Err(StoreError::Poisoned { reason: reason.clone() }),
                (None, Some(e)) => Err(StoreError::Sqlite(e)),
                (None, None) => Ok(()),
            };
            let _ = done.send(result);
        }
        if let Some(done) = closing {
            let _ = done.send(match failure {
                Some(reason) => Err(StoreError::Poisoned { reason }),
                None => Ok(()),
            });
            return true;
        }
        false
    }

    fn begin(&mut self, header: RoundHeader, started: PreparedEvent) {
        let round_id = header.round_id.to_string();
        let conversation = header.conversation_id.to_string();
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO rounds (schema_version, round_id, library_id, bucket_id, conversation_id, round_seq,
                    state_in, audio_id, channel, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    header.schema_version,
                    round_id,
                    header.library_id.as_str(),
                    header.bucket_id.as_str(),
                    conversation,
                    header.round_seq,
                    header.state_in,
                    header.audio_id.map(|a| a.to_string()),
                    header.channel,
                    header.created_at,
                ])
            })
            .map_err(|e| e.to_string())
            .and_then(|_| {
                self.insert_event(&round_id, &conversation, header.round_seq, 1, &started).map_err(|e| e.to_string())
            });
        self.rounds.insert(
            header.round_id,
            OpenRoundState {
                conversation_id: conversation,
                round_seq: header.round_seq,
                next_event_seq: 2,
                error: inserted.err(),
            },
        );
    }

    /// Appends to an open round; returns the round's error, if it has one, when finishing.
    fn append(&mut self, round_id: RoundId, event: PreparedEvent, finish: bool) -> Option<String> {
        let Some(mut state) = self.rounds.remove(&round_id) else {
            return Some(format!("round {round_id} is not open in this store"));
        };
        if state.error.is_none() {
            let key = round_id.to_string();
            match self.insert_event(&key, &state.conversation_id, state.round_seq, state.next_event_seq, &event) {
                Ok(()) => state.next_event_seq += 1,
                Err(e) => state.error = Some(format!("recording {} failed: {e}", event.event_type)),
            }
        }
        if finish {
            state.error
        } else {
            self.rounds.insert(round_id, state);
            None
        }
    }

    fn insert_event(
        &mut self,
        round_id: &str,
        conversation_id: &str,
        round_seq: i64,
        event_seq: i64,
        event: &PreparedEvent,
    ) -> Result<(), StoreError> {
        let prev_hash = match self.heads.get(conversation_id) {
            Some(head) => head.clone(),
            None => self
                .conn
                .prepare_cached(
                    "SELECT hash FROM events WHERE conversation_id = ?1 ORDER BY round_seq DESC, event_seq DESC LIMIT 1",
                )?
                .query_row([conversation_id], |r| r.get::<_, String>(0))
                .optional()?,
        };
        let mut record = EventRecord {
            schema_version: SCHEMA_VERSION,
            round_id: round_id.to_owned(),
            conversation_id: conversation_id.to_owned(),
            round_seq,
            event_seq,
            event_type: event.event_type.as_str().to_owned(),
            call_id: event.call_id.clone(),
            timestamp: event.timestamp.clone(),
            payload: String::new(),
            status: event.status.as_str().to_owned(),
            failure_code: event.failure_code.clone(),
            failure_reason: event.failure_reason.clone(),
            prev_hash,
            hash: String::new(),
        };
        record.hash = sha256_tagged(record.canonical_without_hash(&event.payload).as_bytes());
        self.conn.prepare_cached(INSERT_EVENT)?.execute(params![
            record.schema_version,
            record.round_id,
            record.conversation_id,
            record.round_seq,
            record.event_seq,
            record.event_type,
            record.call_id,
            record.timestamp,
            event.payload,
            record.status,
            record.failure_code,
            record.failure_reason,
            record.prev_hash,
            record.hash,
        ])?;
        self.heads.insert(record.conversation_id, Some(record.hash));
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Runs inside the closing batch: rounds still open get `round.failed`,
    /// then the session is marked cleanly ended.
    fn close_session(&mut self) {
        let open: Vec<RoundId> = self.rounds.keys().copied().collect();
        let reason = "the store closed while the round was open";
        for round_id in open {
            let draft = EventDraft::new(
                EventType::RoundFailed,
                json!({"failure_code": "round.interrupted", "failure_reason": reason}),
            )
            .failed("round.interrupted", reason);
            if let Ok(event) = draft.prepare() {
                self.append(round_id, event, true);
            }
        }
        let _ = self.conn.execute(
            "INSERT INTO writer_session_ends (session_id, schema_version, ended_at, how) VALUES (?1, ?2, ?3, 'clean')",
            params![self.session_id, SCHEMA_VERSION, now_timestamp()],
        );
    }
}
