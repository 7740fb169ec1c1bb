//! `caal import FILE`: older data brought in once, into new rounds of this
//! store, chained like any other (plan §7, "older data can be imported once
//! into the new schema").
//!
//! Three sources, told apart by their bytes, never by the file's name:
//! - **CAAL's JSONL export** (`caal trace export`), any schema version this
//!   build reads (each migrated line by line to the current one; version 1 is
//!   the only one so far). Its chain is checked before anything is written:
//!   every hash recomputed, every `prev_hash` linked within its conversation.
//! - **The Python ancestor's `traces.db`** (CAAL/Atlas2: tables `rounds` and
//!   `events`, columns matched by name, see [`ANCESTOR_COLUMNS`]).
//! - **The Python ancestor's memory store**: a SQLite table with `bucket_id`
//!   and `content` columns (and, when present, `item_id`, `pinned`,
//!   `metadata`, `created_at`), in the same file or its own.
//!
//! Each original round becomes a new round of conversation
//! `imported:<original conversation>` on channel `import`, whose first event
//! after `round.started` is `round.imported`: the file, its SHA-256, the
//! line or row, the original ids and every original event with its original
//! hash. The original events follow as events of their own types when this
//! build's schemas take them (so the training export, replay and search see
//! imported rounds like any others); what they do not take (another
//! library's receipts, types the ancestor had) stays whole inside
//! `round.imported`. Secrets are scrubbed on the way in, as on every append.
//!
//! All of the file is read and checked first: a file that is not a known
//! format, a line that is not JSON, or a chain that breaks is refused naming
//! the line (or table and row), and nothing is imported. The keys in each
//! `round.imported` (`round:<original id>`, `memory:<bucket>:<item id>`)
//! make a second import of the same data import nothing.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    str::FromStr,
};

use rusqlite::{OpenFlags, types::ValueRef};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::{
    crypto::{canonical_json, sha256_tagged},
    ids::{BucketId, CallId, ConversationId},
    memory::{ItemMetadata, MemoryError, MemoryStore},
    trace::{
        Durable, EventDraft, EventRecord, EventStatus, EventType, Payload, RoundSpec,
        SCHEMA_VERSION, StoreError, TraceStore,
        events::{ImportSource, ImportedEvent, RoundImported},
    },
};

/// The channel imported rounds are recorded on.
pub const IMPORT_CHANNEL: &str = "import";
/// The conversation imported memory is recorded in.
pub const MEMORY_CONVERSATION: &str = "imported:memory";

/// The ancestor's columns this import reads, by the names it tries in order
/// (the first a table has wins). Any other column is kept in the round's
/// `original` as it was.
pub const ANCESTOR_COLUMNS: &[(&str, &[&str])] = &[
    ("round_id", &["round_id", "id"]),
    ("conversation_id", &["conversation_id", "conversation"]),
    ("round_seq", &["round_seq", "seq"]),
    ("bucket_id", &["bucket_id", "bucket"]),
    ("state_in", &["state_in", "state"]),
    ("state_out", &["state_out"]),
    ("status", &["status"]),
    ("failure_code", &["failure_code", "error_code"]),
    (
        "failure_reason",
        &["failure_reason", "error", "error_message"],
    ),
    ("event_seq", &["event_seq", "seq"]),
    ("event_type", &["event_type", "type", "kind", "code"]),
    ("payload", &["payload", "payload_json", "data"]),
    ("timestamp", &["timestamp", "ts", "created_at", "time"]),
    ("call_id", &["call_id"]),
    ("content", &["content", "text", "value"]),
    ("item_id", &["item_id", "id"]),
    ("pinned", &["pinned", "pin"]),
    ("metadata", &["metadata", "meta"]),
    ("created_at", &["created_at", "created", "created_ms"]),
];

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error(
        "{file} is not a format caal import reads ({why}); it reads CAAL's JSONL export (`caal trace export --out F.jsonl`) and the Python CAAL's SQLite traces.db and memory store; nothing was imported"
    )]
    UnknownFormat { file: String, why: String },
    #[error("{file} {at}: {problem}; nothing was imported")]
    Bad {
        file: String,
        at: String,
        problem: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// What an import did (or, with `dry_run`, would do).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ImportReport {
    pub file: String,
    pub sha256: String,
    /// The formats found in the file.
    pub formats: Vec<&'static str>,
    pub dry_run: bool,
    /// Rounds imported, and their original events (appended as their own
    /// types, or kept inside `round.imported`).
    pub rounds: u64,
    pub events: u64,
    pub events_kept_in_record: u64,
    pub memory_items: u64,
    /// Already here: imported before, or recorded in this store.
    pub rounds_already_here: u64,
    pub memory_already_here: u64,
    /// The conversations imported rounds went to.
    pub conversations: Vec<String>,
}

/// One original round, read and checked.
#[derive(Debug)]
struct SourceRound {
    at: String,
    format: &'static str,
    schema_version: Option<i64>,
    round_id: String,
    conversation_id: String,
    round_seq: i64,
    bucket_id: Option<String>,
    state_in: String,
    state_out: Option<String>,
    status: String,
    failure: Option<(String, String)>,
    original: Map<String, Value>,
    events: Vec<SourceEvent>,
}

#[derive(Debug)]
struct SourceEvent {
    seq: Option<i64>,
    event_type: String,
    timestamp: Option<String>,
    call_id: Option<String>,
    status: String,
    failure: Option<(String, String)>,
    payload: Value,
    hash: Option<String>,
}

#[derive(Debug)]
struct SourceMemory {
    at: String,
    bucket_id: String,
    item_id: String,
    content: String,
    pinned: bool,
    metadata: Value,
    created_at: Option<String>,
}

#[derive(Default)]
struct Parsed {
    formats: Vec<&'static str>,
    rounds: Vec<SourceRound>,
    memory: Vec<SourceMemory>,
}

/// What one original event becomes here.
enum Fate {
    /// Appended as an event of this type.
    Event(EventType),
    /// round.started / round.completed / round.failed: the round's own.
    Round,
    /// Kept whole inside `round.imported`, with why.
    Here(String),
}

/// Reads and checks `file`, then (unless `dry_run`) imports what is not here yet.
///
/// A JSONL export is read twice, one round in memory at a time: the first
/// pass checks all of it (so a bad line imports nothing), the second
/// imports. A SQLite source is read whole (the ancestor's stores are small).
pub fn import(
    store: &TraceStore,
    memory: &MemoryStore,
    max_item_chars: usize,
    file: &Path,
    dry_run: bool,
) -> Result<ImportReport, ImportError> {
    let name = file.display().to_string();
    let (sha256, is_sqlite) = identify(file, &name)?;
    let mut importer = Importer {
        store,
        known: store.reader().imported_keys()?,
        new_ids: HashMap::new(),
        conversations: BTreeSet::new(),
        tickets: Vec::new(),
        report: ImportReport {
            file: name.clone(),
            sha256,
            dry_run,
            ..Default::default()
        },
    };
    let memory_items = if is_sqlite {
        let parsed = read_sqlite(file, &name, max_item_chars)?;
        if parsed.rounds.is_empty() && parsed.memory.is_empty() {
            return Err(empty(&name));
        }
        importer.report.formats = parsed.formats;
        for round in parsed.rounds {
            importer.round(round)?;
        }
        parsed.memory
    } else {
        let checked = read_jsonl(file, &name, &mut |_| Ok(()))?;
        if checked == 0 {
            return Err(empty(&name));
        }
        importer.report.formats = vec!["caal-jsonl"];
        read_jsonl(file, &name, &mut |round| importer.round(round))?;
        Vec::new()
    };
    for t in importer.tickets.drain(..) {
        t.wait()?;
    }
    let Importer {
        known,
        mut report,
        mut conversations,
        ..
    } = importer;
    import_memory(store, memory, &memory_items, &known, &mut report)?;
    if report.memory_items > 0 {
        conversations.insert(MEMORY_CONVERSATION.into());
    }
    report.conversations = conversations.into_iter().collect();
    Ok(report)
}

fn empty(name: &str) -> ImportError {
    ImportError::UnknownFormat {
        file: name.to_owned(),
        why: "it holds no rounds and no memory".into(),
    }
}

/// Imports rounds one at a time, in their conversation's order.
struct Importer<'a> {
    store: &'a TraceStore,
    known: HashSet<String>,
    /// Original round id → the imported round's id and seq (feedback names them).
    new_ids: HashMap<String, (String, i64)>,
    conversations: BTreeSet<String>,
    tickets: Vec<Durable>,
    report: ImportReport,
}

impl Importer<'_> {
    fn round(&mut self, round: SourceRound) -> Result<(), ImportError> {
        let store = self.store;
        let report = &mut self.report;
        let key = format!("round:{}", round.round_id);
        if self.known.contains(&key) || store.reader().has_round(&round.round_id)? {
            report.rounds_already_here += 1;
            return Ok(());
        }
        let conversation = imported_conversation(&round.conversation_id);
        self.conversations.insert(conversation.to_string());
        let fates: Vec<Fate> = round.events.iter().map(|e| fate(round.format, e)).collect();
        report.rounds += 1;
        for f in &fates {
            match f {
                Fate::Event(_) => report.events += 1,
                Fate::Here(_) => report.events_kept_in_record += 1,
                Fate::Round => {}
            }
        }
        if report.dry_run {
            return Ok(());
        }
        let bucket = round
            .bucket_id
            .as_deref()
            .and_then(|b| BucketId::from_str(b).ok())
            .unwrap_or_else(|| BucketId::for_conversation(&conversation));
        let open = store.begin_round(RoundSpec {
            conversation_id: conversation.clone(),
            bucket_id: bucket,
            state_in: round.state_in.clone(),
            channel: IMPORT_CHANNEL.into(),
            audio_id: None,
        })?;
        self.new_ids.insert(
            round.round_id.clone(),
            (open.header().round_id.to_string(), open.header().round_seq),
        );
        let record = RoundImported {
            code: "import.round".into(),
            format: round.format.into(),
            source: ImportSource {
                file: report.file.clone(),
                sha256: report.sha256.clone(),
                at: round.at.clone(),
                schema_version: round.schema_version,
            },
            original: Value::Object(round.original.clone()),
            keys: vec![key],
            events: round
                .events
                .iter()
                .zip(&fates)
                .map(|(e, f)| ImportedEvent {
                    event_seq: e.seq,
                    event_type: e.event_type.clone(),
                    timestamp: e.timestamp.clone(),
                    hash: e.hash.clone(),
                    kept: match f {
                        Fate::Event(_) => "event",
                        Fate::Round => "round",
                        Fate::Here(_) => "here",
                    }
                    .into(),
                    why: match f {
                        Fate::Here(why) => Some(why.clone()),
                        _ => None,
                    },
                    payload: match f {
                        Fate::Here(_) => Some(e.payload.clone()),
                        _ => None,
                    },
                })
                .collect(),
        };
        let mut drafts = vec![EventDraft::new(record)];
        for (e, f) in round.events.into_iter().zip(&fates) {
            let Fate::Event(t) = f else { continue };
            let mut payload = e.payload;
            // Feedback judges a round by id: the imported one, when it came along.
            if *t == EventType::FeedbackRecorded
                && let Some((id, seq)) = payload["round_id"]
                    .as_str()
                    .and_then(|judged| self.new_ids.get(judged))
            {
                payload["round_id"] = Value::from(id.clone());
                payload["round_seq"] = Value::from(*seq);
            }
            let mut draft = EventDraft::untyped(*t, payload);
            if let Some(call) = e.call_id.as_deref().and_then(|c| CallId::from_str(c).ok()) {
                draft = draft.with_call(call);
            }
            draft = match (e.status.as_str(), e.failure) {
                ("failed", Some((code, reason))) => draft.failed(&code, &reason),
                ("failed", None) => draft.with_status(EventStatus::Failed),
                ("skipped", _) => draft.with_status(EventStatus::Skipped),
                _ => draft,
            };
            drafts.push(draft);
        }
        open.append_all(drafts)?;
        let state_out = round.state_out.unwrap_or(round.state_in);
        let done = match (round.status.as_str(), &round.failure) {
            ("ok" | "completed" | "complete" | "success", _) => open.complete_nowait(&state_out)?,
            ("failed" | "error", Some((code, reason))) => open.fail_nowait(code, reason)?,
            ("failed" | "error", None) => {
                open.fail_nowait("import.failed", "the original round failed")?
            }
            (other, _) => open.fail_nowait(
                "import.unfinished",
                &format!("the original round had not finished (status {other})"),
            )?,
        };
        self.tickets.push(done);
        if self.tickets.len() >= 512 {
            for t in self.tickets.drain(..) {
                t.wait()?;
            }
        }
        Ok(())
    }
}

/// The ancestor's memory, one round per bucket in `imported:memory`.
fn import_memory(
    store: &TraceStore,
    memory: &MemoryStore,
    items: &[SourceMemory],
    known: &HashSet<String>,
    report: &mut ImportReport,
) -> Result<(), ImportError> {
    let mut by_bucket: Vec<(String, Vec<&SourceMemory>)> = Vec::new();
    for item in items {
        let key = memory_key(item);
        if known.contains(&key) {
            report.memory_already_here += 1;
            continue;
        }
        report.memory_items += 1;
        match by_bucket.iter_mut().find(|(b, _)| *b == item.bucket_id) {
            Some((_, list)) => list.push(item),
            None => by_bucket.push((item.bucket_id.clone(), vec![item])),
        }
    }
    if report.dry_run {
        return Ok(());
    }
    let conversation: ConversationId = MEMORY_CONVERSATION
        .parse()
        .expect("a valid conversation id");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    for (bucket_id, list) in by_bucket {
        let bucket = BucketId::from_str(&bucket_id).expect("checked on reading");
        let open = store.begin_round(RoundSpec {
            conversation_id: conversation.clone(),
            bucket_id: bucket.clone(),
            state_in: "default".into(),
            channel: IMPORT_CHANNEL.into(),
            audio_id: None,
        })?;
        let record = RoundImported {
            code: "import.memory".into(),
            format: "caal-python-memory".into(),
            source: ImportSource {
                file: report.file.clone(),
                sha256: report.sha256.clone(),
                at: list.first().map_or_else(String::new, |i| i.at.clone()),
                schema_version: None,
            },
            original: json!({
                "bucket_id": bucket_id,
                "items": list.iter().map(|i| json!({
                    "item_id": i.item_id, "at": i.at, "pinned": i.pinned,
                    "created_at": i.created_at, "metadata": i.metadata,
                })).collect::<Vec<_>>(),
            }),
            keys: list.iter().map(|i| memory_key(i)).collect(),
            events: Vec::new(),
        };
        let mut drafts = vec![EventDraft::new(record)];
        for item in &list {
            let metadata = ItemMetadata {
                refs: serde_json::from_value(item.metadata["refs"].clone()).unwrap_or_default(),
                source: Some(format!("import:{}", item.item_id)),
            };
            let written = memory.remember(&bucket, &item.content, metadata, item.pinned, now)?;
            drafts.push(EventDraft::new(written.event(IMPORT_CHANNEL)));
        }
        open.append_all(drafts)?;
        open.complete("default")?;
    }
    Ok(())
}

fn memory_key(item: &SourceMemory) -> String {
    format!("memory:{}:{}", item.bucket_id, item.item_id)
}

/// `imported:<original>`, or of its hash when that is not a usable id.
fn imported_conversation(original: &str) -> ConversationId {
    format!("imported:{original}").parse().unwrap_or_else(|_| {
        let hash = sha256_tagged(original.as_bytes());
        format!("imported:{}", &hash["sha256:".len().."sha256:".len() + 16])
            .parse()
            .expect("hex is a valid id")
    })
}

fn fate(format: &'static str, e: &SourceEvent) -> Fate {
    let Ok(t) = EventType::from_str(&e.event_type) else {
        return Fate::Here(format!(
            "{} is not an event type of this build",
            e.event_type
        ));
    };
    match t {
        EventType::RoundStarted | EventType::RoundCompleted | EventType::RoundFailed => Fate::Round,
        // Signed by the library it came from: verifiable with that key, not this one's.
        EventType::ReceiptIssued => {
            Fate::Here("a receipt signed by the library it came from".into())
        }
        // A CAAL export's events were held to this build's schemas as they were read.
        _ if format == "caal-jsonl" => Fate::Event(t),
        _ => match fits(t, &e.payload) {
            Ok(()) => Fate::Event(t),
            Err(why) => Fate::Here(why),
        },
    }
}

/// Whether this build takes `payload` as an event of type `t`: its schema,
/// and its struct (which refuses fields the schema leaves open).
fn fits(t: EventType, payload: &Value) -> Result<(), String> {
    t.validate(payload).map_err(|e| e.to_string())?;
    Payload::parse(t, payload)
        .map(|_| ())
        .map_err(|e| format!("its {t} payload does not read: {e}"))
}

/// The file's hash, and whether it is a SQLite database (else JSONL).
fn identify(file: &Path, name: &str) -> Result<(String, bool), ImportError> {
    use sha2::{Digest, Sha256};
    let read_err = |source| ImportError::Read {
        file: name.to_owned(),
        source,
    };
    let mut f = std::fs::File::open(file).map_err(read_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut head = Vec::with_capacity(16);
    loop {
        let n = f.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        if head.len() < 16 {
            head.extend_from_slice(&buf[..n.min(16 - head.len())]);
        }
        hasher.update(&buf[..n]);
    }
    let sha256 = format!("sha256:{}", crate::crypto::hex(&hasher.finalize()));
    Ok((sha256, head == b"SQLite format 3\0"))
}

fn bad(file: &str, at: impl Into<String>, problem: impl Into<String>) -> ImportError {
    ImportError::Bad {
        file: file.to_owned(),
        at: at.into(),
        problem: problem.into(),
    }
}

/// Brings a line of an older schema version to the current one. Version 1 is
/// the only one CAAL has written so far; the next version adds its step here.
fn migrate(version: i64, line: Value) -> Result<Value, String> {
    match version {
        1 => Ok(line),
        v if v > i64::from(SCHEMA_VERSION) => Err(format!(
            "schema_version {v} is newer than this caal reads ({SCHEMA_VERSION}); import it with a newer caal"
        )),
        v => Err(format!("schema_version {v} is not one CAAL has written")),
    }
}

/// Reads a JSONL export line by line, checking every line and the chain,
/// handing `visit` each round once all its events are read; returns the
/// number of rounds.
fn read_jsonl(
    file: &Path,
    name: &str,
    visit: &mut dyn FnMut(SourceRound) -> Result<(), ImportError>,
) -> Result<u64, ImportError> {
    let f = std::fs::File::open(file).map_err(|source| ImportError::Read {
        file: name.to_owned(),
        source,
    })?;
    let mut current: Option<SourceRound> = None;
    let mut count = 0u64;
    // The chain's last hash per conversation, and the line it was on.
    let mut heads: HashMap<String, (String, usize)> = HashMap::new();
    let mut seen_rounds: HashMap<String, usize> = HashMap::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let n = i + 1;
        let at = format!("line {n}");
        let line = line.map_err(|source| ImportError::Read {
            file: name.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        // What is wrong on line 1 says the file is no export at all.
        let refused = |problem: String| {
            if n == 1 {
                ImportError::UnknownFormat {
                    file: name.to_owned(),
                    why: format!("line 1: {problem}"),
                }
            } else {
                bad(name, &at, problem)
            }
        };
        let value: Value =
            serde_json::from_str(&line).map_err(|e| refused(format!("not JSON: {e}")))?;
        let Some(kind) = value.get("type").and_then(Value::as_str).map(str::to_owned) else {
            return Err(refused("no \"type\" (round or event)".into()));
        };
        let version = value
            .get("schema_version")
            .and_then(Value::as_i64)
            .ok_or_else(|| bad(name, &at, "no schema_version"))?;
        let value = migrate(version, value).map_err(|p| bad(name, &at, p))?;
        let text = |field: &str| -> Result<String, ImportError> {
            value
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| bad(name, &at, format!("no {field}")))
        };
        let opt_text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_owned);
        let int = |field: &str| -> Result<i64, ImportError> {
            value
                .get(field)
                .and_then(Value::as_i64)
                .ok_or_else(|| bad(name, &at, format!("no {field}")))
        };
        match kind.as_str() {
            "round" => {
                let round_id = text("round_id")?;
                if let Some(first) = seen_rounds.insert(round_id.clone(), n) {
                    return Err(bad(
                        name,
                        &at,
                        format!("round {round_id} is on line {first} already"),
                    ));
                }
                if let Some(done) = current.take() {
                    finish(name, done, visit)?;
                    count += 1;
                }
                let failure = opt_text("failure_code").map(|c| {
                    let reason = opt_text("failure_reason").unwrap_or_default();
                    (c, reason)
                });
                let mut original = value.as_object().cloned().unwrap_or_default();
                original.remove("type");
                current = Some(SourceRound {
                    at: at.clone(),
                    format: "caal-jsonl",
                    schema_version: Some(version),
                    conversation_id: text("conversation_id")?,
                    round_seq: int("round_seq")?,
                    bucket_id: opt_text("bucket_id"),
                    state_in: text("state_in")?,
                    state_out: opt_text("state_out"),
                    status: text("status")?,
                    failure,
                    original,
                    events: Vec::new(),
                    round_id,
                });
            }
            "event" => {
                let Some(round) = current.as_mut() else {
                    return Err(refused("an event before any round line".into()));
                };
                let record = event_record(&value).map_err(|p| bad(name, &at, p))?;
                if record.round_id != round.round_id
                    || record.conversation_id != round.conversation_id
                    || record.round_seq != round.round_seq
                {
                    return Err(bad(
                        name,
                        &at,
                        format!(
                            "this event is of round {} but follows round {} ({})",
                            record.round_id, round.round_id, round.at
                        ),
                    ));
                }
                let expected_seq = round.events.len() as i64 + 1;
                if record.event_seq != expected_seq {
                    return Err(bad(
                        name,
                        &at,
                        format!(
                            "event_seq {} where {expected_seq} comes next: an event is missing or out of order",
                            record.event_seq
                        ),
                    ));
                }
                let recomputed = record
                    .recompute_hash()
                    .map_err(|e| bad(name, &at, format!("its payload is not JSON: {e}")))?;
                if recomputed != record.hash {
                    return Err(bad(
                        name,
                        &at,
                        format!(
                            "the chain breaks: its hash {} is not the hash of its content ({recomputed}); the line was changed after it was recorded",
                            record.hash
                        ),
                    ));
                }
                if let Some((head, head_line)) = heads.get(&record.conversation_id)
                    && record.prev_hash.as_deref() != Some(head.as_str())
                {
                    return Err(bad(
                        name,
                        &at,
                        format!(
                            "the chain breaks: prev_hash {} is not the hash of the event before it in conversation {} (line {head_line})",
                            record.prev_hash.as_deref().unwrap_or("null"),
                            record.conversation_id
                        ),
                    ));
                }
                heads.insert(record.conversation_id.clone(), (record.hash.clone(), n));
                let event_type = EventType::from_str(&record.event_type)
                    .map_err(|e| bad(name, &at, e.to_string()))?;
                let payload = value["payload"].clone();
                if !matches!(
                    event_type,
                    EventType::RoundStarted
                        | EventType::RoundCompleted
                        | EventType::RoundFailed
                        | EventType::ReceiptIssued
                ) {
                    fits(event_type, &payload).map_err(|p| bad(name, &at, p))?;
                }
                round.events.push(SourceEvent {
                    seq: Some(record.event_seq),
                    event_type: record.event_type,
                    timestamp: Some(record.timestamp),
                    call_id: record.call_id,
                    status: record.status,
                    failure: record
                        .failure_code
                        .map(|c| (c, record.failure_reason.unwrap_or_default())),
                    payload,
                    hash: Some(record.hash),
                });
            }
            other => {
                return Err(refused(format!(
                    "type {other:?} is neither round nor event"
                )));
            }
        }
    }
    if let Some(done) = current.take() {
        finish(name, done, visit)?;
        count += 1;
    }
    Ok(count)
}

fn finish(
    name: &str,
    round: SourceRound,
    visit: &mut dyn FnMut(SourceRound) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    if round.events.is_empty() {
        return Err(bad(
            name,
            &round.at,
            format!("round {} has no events", round.round_id),
        ));
    }
    visit(round)
}

/// An export line's event as the chain hashes it.
fn event_record(value: &Value) -> Result<EventRecord, String> {
    let s = |f: &str| -> Result<String, String> {
        value
            .get(f)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("no {f}"))
    };
    let o = |f: &str| value.get(f).and_then(Value::as_str).map(str::to_owned);
    let i = |f: &str| {
        value
            .get(f)
            .and_then(Value::as_i64)
            .ok_or_else(|| format!("no {f}"))
    };
    let payload = value.get("payload").ok_or("no payload")?;
    Ok(EventRecord {
        schema_version: SCHEMA_VERSION,
        round_id: s("round_id")?,
        conversation_id: s("conversation_id")?,
        round_seq: i("round_seq")?,
        event_seq: i("event_seq")?,
        event_type: s("event_type")?,
        call_id: o("call_id"),
        timestamp: s("timestamp")?,
        payload: canonical_json(payload),
        status: s("status")?,
        failure_code: o("failure_code"),
        failure_reason: o("failure_reason"),
        prev_hash: o("prev_hash"),
        hash: s("hash")?,
    })
}

/// A table's columns, with the ones this import reads found by name.
struct Table {
    name: String,
    columns: Vec<String>,
}

impl Table {
    fn find(&self, what: &str) -> Option<usize> {
        let names = ANCESTOR_COLUMNS
            .iter()
            .find(|(w, _)| *w == what)
            .map_or(&[][..], |(_, n)| *n);
        names
            .iter()
            .find_map(|n| self.columns.iter().position(|c| c.eq_ignore_ascii_case(n)))
    }
}

fn json_of(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => Value::from(f),
        ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::from(format!("(blob of {} bytes)", b.len())),
    }
}

/// A column that holds JSON: its text read as JSON (kept as text when it
/// is not), any other value as it is, a missing column as null.
fn json_cell(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => {
            serde_json::from_str(s).unwrap_or_else(|_| Value::from(s.clone()))
        }
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Reads every row of `table` as (rowid, column values).
fn rows(conn: &rusqlite::Connection, table: &Table) -> Result<Vec<(i64, Vec<Value>)>, StoreError> {
    let quoted: Vec<String> = table
        .columns
        .iter()
        .map(|c| format!("\"{}\"", c.replace('"', "\"\"")))
        .collect();
    let sql = format!(
        "SELECT rowid, {} FROM \"{}\" ORDER BY rowid",
        quoted.join(", "),
        table.name.replace('"', "\"\"")
    );
    let mut stmt = conn.prepare(&sql)?;
    let width = table.columns.len();
    let out = stmt
        .query_map([], |r| {
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                values.push(json_of(r.get_ref(i + 1)?));
            }
            Ok((r.get::<_, i64>(0)?, values))
        })?
        .collect::<Result<_, _>>()?;
    Ok(out)
}

fn read_sqlite(file: &Path, name: &str, max_item_chars: usize) -> Result<Parsed, ImportError> {
    let unknown = |why: String| ImportError::UnknownFormat {
        file: name.to_owned(),
        why,
    };
    // Read-only and immutable: the import never changes its source.
    let uri = format!("file:{}?mode=ro&immutable=1", uri_path(file));
    let conn = rusqlite::Connection::open_with_flags(
        &uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(|e| unknown(format!("SQLite could not open it: {e}")))?;
    let tables = (|| -> rusqlite::Result<Vec<Table>> {
        let names: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        names
            .into_iter()
            .map(|name| {
                let columns = conn
                    .prepare(&format!("PRAGMA table_info(\"{}\")", name.replace('"', "\"\"")))?
                    .query_map([], |r| r.get::<_, String>(1))?
                    .collect::<Result<_, _>>()?;
                Ok(Table { name, columns })
            })
            .collect()
    })()
    .map_err(|e| unknown(format!("SQLite could not read its tables: {e}")))?;
    let table = |n: &str| tables.iter().find(|t| t.name.eq_ignore_ascii_case(n));
    let mut parsed = Parsed::default();
    if let (Some(rounds), Some(events)) = (table("rounds"), table("events")) {
        if events.columns.iter().any(|c| c == "round_row")
            && events.columns.iter().any(|c| c == "hash")
        {
            return Err(unknown(
                "it is a CAAL trace store; export it with `caal --data-dir DIR trace export --out F.jsonl` and import that file (its chain is checked on the way in)".into(),
            ));
        }
        read_ancestor_rounds(&conn, rounds, events, name, &mut parsed)?;
    }
    let memory_table = tables.iter().find(|t| {
        t.find("bucket_id").is_some()
            && t.find("content").is_some()
            && !["rounds", "events"]
                .iter()
                .any(|n| t.name.eq_ignore_ascii_case(n))
            && !t.name.ends_with("_fts")
    });
    if let Some(mt) = memory_table {
        read_ancestor_memory(&conn, mt, name, max_item_chars, &mut parsed)?;
    }
    if parsed.formats.is_empty() {
        return Err(unknown(format!(
            "a SQLite file without tables rounds and events or a memory table (bucket_id, content); it has: {}",
            tables
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(parsed)
}

fn uri_path(file: &Path) -> String {
    let abs: PathBuf = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    abs.display()
        .to_string()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23")
}

fn read_ancestor_rounds(
    conn: &rusqlite::Connection,
    rounds: &Table,
    events: &Table,
    name: &str,
    parsed: &mut Parsed,
) -> Result<(), ImportError> {
    let need = |t: &Table, what: &str| {
        t.find(what).ok_or_else(|| {
            bad(
                name,
                format!("table {}", t.name),
                format!(
                    "no {what} column (it has {}); the columns read are listed in docs/trace.md, \"Import\"",
                    t.columns.join(", ")
                ),
            )
        })
    };
    let r_id = need(rounds, "round_id")?;
    let r_conv = need(rounds, "conversation_id")?;
    let e_round = events
        .columns
        .iter()
        .position(|c| c.eq_ignore_ascii_case("round_id"))
        .ok_or_else(|| bad(name, format!("table {}", events.name), "no round_id column"))?;
    let e_type = need(events, "event_type")?;
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut list: Vec<SourceRound> = Vec::new();
    for (rowid, values) in rows(conn, rounds)? {
        let at = format!("rounds row {rowid}");
        let get = |what: &str| rounds.find(what).and_then(|i| text_of(&values[i]));
        let round_id = text_of(&values[r_id]).ok_or_else(|| bad(name, &at, "round_id is empty"))?;
        let conversation_id =
            text_of(&values[r_conv]).ok_or_else(|| bad(name, &at, "conversation_id is empty"))?;
        if by_id.insert(round_id.clone(), list.len()).is_some() {
            return Err(bad(
                name,
                &at,
                format!("round {round_id} is in rounds twice"),
            ));
        }
        let round_seq = match rounds.find("round_seq").map(|i| &values[i]) {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(rowid),
            Some(Value::String(s)) => s
                .parse()
                .map_err(|_| bad(name, &at, format!("round_seq {s:?} is not a number")))?,
            _ => rowid,
        };
        let status = get("status").unwrap_or_else(|| "ok".into()).to_lowercase();
        let failure = get("failure_code").map(|c| (c, get("failure_reason").unwrap_or_default()));
        let original: Map<String, Value> = rounds
            .columns
            .iter()
            .cloned()
            .zip(values.iter().cloned())
            .collect();
        list.push(SourceRound {
            at,
            format: "caal-python-traces",
            schema_version: rounds
                .columns
                .iter()
                .position(|c| c == "schema_version")
                .and_then(|i| values[i].as_i64()),
            round_id,
            conversation_id,
            round_seq,
            bucket_id: get("bucket_id"),
            state_in: get("state_in").unwrap_or_else(|| "default".into()),
            state_out: get("state_out"),
            status,
            failure,
            original,
            events: Vec::new(),
        });
    }
    let mut event_rows = rows(conn, events)?;
    // In each round's order: by event_seq where there is one, else as stored.
    let e_seq = events.find("event_seq");
    event_rows
        .sort_by_key(|(rowid, v)| (e_seq.and_then(|i| v[i].as_i64()).unwrap_or(*rowid), *rowid));
    for (rowid, values) in event_rows {
        let at = format!("events row {rowid}");
        let get = |what: &str| events.find(what).and_then(|i| text_of(&values[i]));
        let round_id =
            text_of(&values[e_round]).ok_or_else(|| bad(name, &at, "round_id is empty"))?;
        let Some(&index) = by_id.get(&round_id) else {
            return Err(bad(
                name,
                &at,
                format!("its round {round_id} is not in rounds"),
            ));
        };
        let event_type =
            text_of(&values[e_type]).ok_or_else(|| bad(name, &at, "event_type is empty"))?;
        let payload = json_cell(events.find("payload").map(|i| &values[i]));
        let status = get("status").unwrap_or_else(|| "ok".into()).to_lowercase();
        let failure = get("failure_code").map(|c| (c, get("failure_reason").unwrap_or_default()));
        list[index].events.push(SourceEvent {
            seq: e_seq.and_then(|i| values[i].as_i64()),
            event_type,
            timestamp: get("timestamp"),
            call_id: get("call_id"),
            status,
            failure,
            payload,
            hash: None,
        });
    }
    // Each conversation's rounds in their order, so its new chain follows it.
    list.sort_by(|a, b| (&a.conversation_id, a.round_seq).cmp(&(&b.conversation_id, b.round_seq)));
    if !list.is_empty() {
        parsed.formats.push("caal-python-traces");
    }
    parsed.rounds.extend(list);
    Ok(())
}

fn read_ancestor_memory(
    conn: &rusqlite::Connection,
    table: &Table,
    name: &str,
    max_item_chars: usize,
    parsed: &mut Parsed,
) -> Result<(), ImportError> {
    let bucket_col = table.find("bucket_id").expect("found above");
    let content_col = table.find("content").expect("found above");
    let mut seen = HashSet::new();
    for (rowid, values) in rows(conn, table)? {
        let at = format!("{} row {rowid}", table.name);
        let get = |what: &str| table.find(what).and_then(|i| text_of(&values[i]));
        let bucket_id =
            text_of(&values[bucket_col]).ok_or_else(|| bad(name, &at, "bucket_id is empty"))?;
        BucketId::from_str(&bucket_id).map_err(|e| bad(name, &at, e.to_string()))?;
        let content = text_of(&values[content_col])
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| bad(name, &at, "content is empty"))?;
        let chars = content.chars().count();
        if chars > max_item_chars {
            return Err(bad(
                name,
                &at,
                format!(
                    "its content is {chars} characters; a memory holds at most {max_item_chars}: raise memory.max_item_chars to import it"
                ),
            ));
        }
        let item_id = get("item_id").unwrap_or_else(|| format!("row{rowid}"));
        if !seen.insert((bucket_id.clone(), item_id.clone())) {
            return Err(bad(
                name,
                &at,
                format!("item {item_id} of {bucket_id} is in the table twice"),
            ));
        }
        let pinned = match table.find("pinned").map(|i| &values[i]) {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(0) != 0,
            Some(Value::String(s)) => matches!(s.to_lowercase().as_str(), "1" | "true" | "yes"),
            Some(Value::Bool(b)) => *b,
            _ => false,
        };
        let metadata = json_cell(table.find("metadata").map(|i| &values[i]));
        parsed.memory.push(SourceMemory {
            at,
            bucket_id,
            item_id,
            content,
            pinned,
            metadata,
            created_at: get("created_at"),
        });
    }
    if !parsed.memory.is_empty() {
        parsed.formats.push("caal-python-memory");
    }
    Ok(())
}
