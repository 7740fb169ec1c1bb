//! Bucket memory, in `memory.db`: what people asked the assistant to keep,
//! per bucket, each item scored from its signals (see `score`), searchable
//! (SQLite FTS5), summarised in a register of at most 140 characters and
//! offered to prompts as a cached context package (see `package`).
//!
//! Every item passes through the secret scanner before it is stored. Writes
//! to one bucket are serialised (the bucket's lock is held across the
//! transaction and the invalidation of its cached package), so concurrent
//! writers lose nothing; buckets share only SQLite's single writer for the
//! commit. Readers use their own connections and never wait on writers.
//! Every change is recorded in the trace by whoever asked for it (a round).

mod package;
mod score;
#[cfg(test)]
mod tests;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

pub use package::{
    Budget, ContextPackage, PackagedItem, REGISTER_MAX_CHARS, Tier, Why, register_summary,
};
pub use score::{Score, Scoring, Signal, Signals};

use crate::{
    config::MemoryConfig,
    ids::BucketId,
    sqlite::{MEMORY, check_identity, migrate, open_connection},
    state::{lock, rfc3339_ms},
    trace::{SCHEMA_VERSION, StoreError},
};

/// The memory database's file name inside a data dir.
pub const MEMORY_FILE: &str = "memory.db";

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "nothing to remember: the text is empty; say what to keep, such as \"remember that the spare key is in the blue box\""
    )]
    Empty,
    #[error(
        "that is {chars} characters; a memory holds at most {max} (memory.max_item_chars); keep it shorter or attach the document as a ref"
    )]
    TooLong { chars: usize, max: usize },
    #[error("{bucket_id} has no item {item_id}; `caal bucket show {bucket_id}` lists its items")]
    NoSuchItem { bucket_id: String, item_id: String },
    #[error(
        "the search {query:?} has no words to look for (common words such as \"the\" are left out); search for words, such as \"door code\""
    )]
    EmptyQuery { query: String },
    #[error("memory at {} is open read-only; writes go through the process that owns the data dir", path.display())]
    ReadOnly { path: PathBuf },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for MemoryError {
    fn from(e: rusqlite::Error) -> Self {
        MemoryError::Store(StoreError::from(e))
    }
}

/// What a ref points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    Document,
    File,
    Url,
}

impl std::fmt::Display for RefKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RefKind::Document => "document",
            RefKind::File => "file",
            RefKind::Url => "url",
        })
    }
}

impl std::str::FromStr for RefKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "document" | "doc" => Ok(RefKind::Document),
            "file" => Ok(RefKind::File),
            "url" => Ok(RefKind::Url),
            _ => Err(format!(
                "{s:?} is not a ref kind; use document, file or url"
            )),
        }
    }
}

/// A document or file an item refers to, with an optional excerpt or summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ItemRef {
    pub kind: RefKind,
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemMetadata {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<ItemRef>,
    /// Where the item came from: `round:<round_id>` or `cli`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl ItemMetadata {
    /// Every string scrubbed of secrets; the kinds replaced.
    fn scrub(&mut self) -> Vec<&'static str> {
        let safety = crate::safety::global();
        let mut kinds = Vec::new();
        let mut one = |s: &mut String| {
            let (clean, found) = safety.scrub_counted(s);
            if !found.is_empty() {
                *s = clean.into_owned();
                kinds.extend(found);
            }
        };
        for r in &mut self.refs {
            one(&mut r.target);
            for s in [r.excerpt.as_mut(), r.summary.as_mut()]
                .into_iter()
                .flatten()
            {
                one(s);
            }
        }
        kinds
    }

    fn words(&self) -> String {
        self.refs
            .iter()
            .flat_map(|r| [Some(&r.target), r.excerpt.as_ref(), r.summary.as_ref()])
            .flatten()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One remembered thing (`BucketMemoryItem`).
#[derive(Clone, Debug, Serialize)]
pub struct MemoryItem {
    pub item_id: String,
    pub bucket_id: String,
    pub schema_version: u32,
    pub content: String,
    pub metadata: ItemMetadata,
    pub pinned: bool,
    pub topic_hits: u32,
    pub citations: u32,
    pub created_at: String,
    pub last_updated: String,
    #[serde(skip)]
    pub signals: Signals,
    #[serde(skip)]
    pub last_updated_ms: i64,
}

/// An item with its score at one moment.
#[derive(Clone, Debug, Serialize)]
pub struct ScoredItem {
    #[serde(flatten)]
    pub item: MemoryItem,
    /// The score's total.
    pub reference_score: f64,
    /// What is left of its signals since the last one (0–1).
    pub recency: f64,
    pub score: Score,
}

/// A search result: the item and how well it matched (bm25, lower is better).
#[derive(Clone, Debug, Serialize)]
pub struct Hit {
    #[serde(flatten)]
    pub scored: ScoredItem,
    pub match_rank: f64,
}

/// A bucket as `caal bucket list` shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Register {
    pub bucket_id: String,
    pub schema_version: u32,
    pub summary: String,
    pub item_count: u64,
    pub pinned_count: u64,
    pub last_updated: String,
}

/// What `remember` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteOp {
    /// A new item.
    Add,
    /// The same content was remembered again: its write signal grew.
    Update,
    Pin,
    Unpin,
}

impl WriteOp {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteOp::Add => "add",
            WriteOp::Update => "update",
            WriteOp::Pin => "pin",
            WriteOp::Unpin => "unpin",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Written {
    pub item: MemoryItem,
    pub op: WriteOp,
    /// Secret kinds replaced before storing.
    pub redacted: Vec<&'static str>,
}

impl Written {
    /// The `memory.written` event that records this write, made by `source`.
    pub fn event(&self, source: &str) -> crate::trace::events::MemoryWritten {
        crate::trace::events::MemoryWritten {
            bucket_id: self.item.bucket_id.to_string(),
            item_id: self.item.item_id.clone(),
            op: self.op.as_str().into(),
            pinned: self.item.pinned,
            chars: self.item.content.chars().count() as u64,
            source: source.into(),
            redacted_kinds: self.redacted.iter().map(ToString::to_string).collect(),
        }
    }
}

/// How search words combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// Every word (forget, pin: acting on the wrong item is worse than asking).
    All,
    /// Any word, best first (recall, topic hits).
    Any,
}

#[derive(Default)]
struct BucketSlot {
    /// Held across a write's transaction and its cache invalidation.
    write: Mutex<()>,
    cache: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    /// Bumped by every write; a package computed under an older one is not kept.
    generation: u64,
    package: Option<Arc<ContextPackage>>,
}

pub struct MemoryStore {
    path: PathBuf,
    writer: Option<Mutex<Connection>>,
    readers: Mutex<Vec<Connection>>,
    scoring: Scoring,
    config: MemoryConfig,
    buckets: Mutex<HashMap<String, Arc<BucketSlot>>>,
}

const REGISTER_COLUMNS: &str =
    "bucket_id, schema_version, summary, item_count, pinned_count, last_updated_ms";

const COLUMNS: &str = "item_id, bucket_id, schema_version, content, metadata, pinned, topic_hits, citations, \
                       v_write, v_topic, v_citation, touched_ms, created_ms, last_updated_ms";

fn item_of(row: &Row<'_>) -> rusqlite::Result<MemoryItem> {
    let metadata: String = row.get(4)?;
    let created_ms: i64 = row.get(12)?;
    let last_updated_ms: i64 = row.get(13)?;
    let topic_hits: u32 = row.get(6)?;
    let citations: u32 = row.get(7)?;
    Ok(MemoryItem {
        item_id: row.get(0)?,
        bucket_id: row.get(1)?,
        schema_version: row.get(2)?,
        content: row.get(3)?,
        metadata: serde_json::from_str(&metadata).unwrap_or_default(),
        pinned: row.get(5)?,
        topic_hits,
        citations,
        created_at: rfc3339_ms(created_ms),
        last_updated: rfc3339_ms(last_updated_ms),
        signals: Signals {
            v_write: row.get(8)?,
            v_topic: row.get(9)?,
            v_citation: row.get(10)?,
            touched_ms: row.get(11)?,
            topic_hits,
            citations,
        },
        last_updated_ms,
    })
}

impl MemoryStore {
    /// Opens (creating and migrating) `memory.db` for reading and writing.
    /// Only the process that holds the data dir's writer lock does this.
    pub fn open(path: &Path, config: &MemoryConfig) -> Result<Self, MemoryError> {
        let conn = open_connection(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        check_identity(&conn, path, &MEMORY, true)?;
        crate::sqlite::enable_wal(&conn, path)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
        conn.busy_timeout(Duration::from_secs(5))?;
        migrate(&conn, &MEMORY)?;
        let store = Self::with_connections(path, Some(conn), config);
        store.rekey_if_half_life_changed()?;
        Ok(store)
    }

    /// Opens an existing `memory.db` for reading only (the CLI, while a
    /// service may be writing).
    pub fn open_read_only(path: &Path, config: &MemoryConfig) -> Result<Self, MemoryError> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_owned(),
            }
            .into());
        }
        let store = Self::with_connections(path, None, config);
        let conn = store.reader()?;
        check_identity(&conn, path, &MEMORY, false)?;
        store.give_back(conn);
        Ok(store)
    }

    fn with_connections(path: &Path, writer: Option<Connection>, config: &MemoryConfig) -> Self {
        Self {
            path: path.to_owned(),
            writer: writer.map(Mutex::new),
            readers: Mutex::default(),
            scoring: Scoring::from_config(config),
            config: config.clone(),
            buckets: Mutex::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn scoring(&self) -> &Scoring {
        &self.scoring
    }

    fn reader(&self) -> Result<Connection, MemoryError> {
        if let Some(conn) = lock(&self.readers).pop() {
            return Ok(conn);
        }
        let conn = open_connection(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        Ok(conn)
    }

    fn give_back(&self, conn: Connection) {
        lock(&self.readers).push(conn);
    }

    fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let conn = self.reader()?;
        let out = f(&conn);
        self.give_back(conn);
        out
    }

    fn slot(&self, bucket: &str) -> Arc<BucketSlot> {
        lock(&self.buckets)
            .entry(bucket.to_owned())
            .or_default()
            .clone()
    }

    /// Runs `f` in one transaction as the bucket's only writer, then drops
    /// the bucket's cached package.
    fn write<T>(
        &self,
        bucket: &str,
        f: impl FnOnce(&Connection) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let Some(writer) = &self.writer else {
            return Err(MemoryError::ReadOnly {
                path: self.path.clone(),
            });
        };
        let slot = self.slot(bucket);
        let _serial = lock(&slot.write);
        let out = {
            let mut conn = lock(writer);
            let tx = conn.transaction()?;
            let out = f(&tx)?;
            tx.commit()?;
            out
        };
        let mut cache = lock(&slot.cache);
        cache.generation += 1;
        cache.package = None;
        Ok(out)
    }

    /// The half-life orders items (`rank_key`); when the configuration
    /// changed it, every key is computed again.
    fn rekey_if_half_life_changed(&self) -> Result<(), MemoryError> {
        let Some(writer) = &self.writer else {
            return Ok(());
        };
        let mut conn = lock(writer);
        let stored: Option<f64> = conn
            .query_row(
                "SELECT value FROM memory_meta WHERE key = 'half_life_ms'",
                [],
                |r| r.get::<_, String>(0),
            )
            .optional()?
            .and_then(|v| v.parse().ok());
        if stored == Some(self.scoring.half_life_ms) {
            return Ok(());
        }
        let tx = conn.transaction()?;
        {
            let mut read =
                tx.prepare("SELECT id, v_write, v_topic, v_citation, touched_ms FROM items")?;
            let mut update = tx.prepare("UPDATE items SET rank_key = ?2 WHERE id = ?1")?;
            let rows = read.query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    Signals {
                        v_write: r.get(1)?,
                        v_topic: r.get(2)?,
                        v_citation: r.get(3)?,
                        touched_ms: r.get(4)?,
                        ..Signals::default()
                    },
                ))
            })?;
            for row in rows {
                let (id, signals) = row?;
                update.execute(params![id, signals.rank_key(&self.scoring)])?;
            }
        }
        tx.execute(
            "INSERT INTO memory_meta (key, value) VALUES ('half_life_ms', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [self.scoring.half_life_ms.to_string()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Keeps `content` in `bucket` (scrubbed of secrets first). The same
    /// content again is not a second item: its write signal grows.
    pub fn remember(
        &self,
        bucket: &BucketId,
        content: &str,
        mut metadata: ItemMetadata,
        pinned: bool,
        now_ms: i64,
    ) -> Result<Written, MemoryError> {
        let content = package::one_line(content);
        if content.is_empty() {
            return Err(MemoryError::Empty);
        }
        let chars = content.chars().count();
        if chars > self.config.max_item_chars {
            return Err(MemoryError::TooLong {
                chars,
                max: self.config.max_item_chars,
            });
        }
        let (content, mut redacted) = crate::safety::global().scrub_counted(&content);
        let content = content.into_owned();
        redacted.extend(metadata.scrub());
        let scoring = self.scoring;
        let bucket_id = bucket.as_str();
        self.write(bucket_id, |tx| {
            let existing = tx
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM items WHERE bucket_id = ?1 AND content_key = ?2 AND content = ?3"
                ))?
                .query_row(params![bucket_id, content_key(&content), content], item_of)
                .optional()?;
            let (item_id, op, pinned_delta, added) = match existing {
                Some(item) => {
                    let signals = item.signals.with(&scoring, Signal::Write, now_ms);
                    let mut merged = item.metadata.clone();
                    for r in &metadata.refs {
                        if !merged.refs.contains(r) {
                            merged.refs.push(r.clone());
                        }
                    }
                    let pin = item.pinned || pinned;
                    tx.prepare_cached(
                        "UPDATE items SET metadata = ?2, refs_text = ?3, pinned = ?4, v_write = ?5, v_topic = ?6,
                         v_citation = ?7, touched_ms = ?8, rank_key = ?9, last_updated_ms = ?10 WHERE item_id = ?1",
                    )?
                    .execute(params![
                        item.item_id,
                        serde_json::to_string(&merged).unwrap_or_default(),
                        merged.words(),
                        pin,
                        signals.v_write,
                        signals.v_topic,
                        signals.v_citation,
                        signals.touched_ms,
                        signals.rank_key(&scoring),
                        now_ms,
                    ])?;
                    (item.item_id, WriteOp::Update, i64::from(pin && !item.pinned), 0)
                }
                None => {
                    let item_id = format!("mem_{}", uuid::Uuid::now_v7().simple());
                    let signals = Signals::written(&scoring, now_ms);
                    tx.prepare_cached(
                        "INSERT INTO items (item_id, bucket_id, bucket_tag, schema_version, content, content_key, metadata,
                         refs_text, pinned, v_write, touched_ms, rank_key, created_ms, last_updated_ms)
                         VALUES (?1, ?2, ?13, ?3, ?4, ?12, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
                    )?
                    .execute(params![
                        item_id,
                        bucket_id,
                        SCHEMA_VERSION,
                        content,
                        serde_json::to_string(&metadata).unwrap_or_default(),
                        metadata.words(),
                        pinned,
                        signals.v_write,
                        signals.touched_ms,
                        signals.rank_key(&scoring),
                        now_ms,
                        content_key(&content),
                        bucket_tag(bucket_id),
                    ])?;
                    (item_id, WriteOp::Add, i64::from(pinned), 1)
                }
            };
            refresh_register(tx, bucket_id, added, pinned_delta, now_ms)?;
            let item = load(tx, bucket_id, &item_id)?;
            Ok(Written { item, op, redacted })
        })
    }

    /// Pins or unpins an item.
    pub fn set_pinned(
        &self,
        bucket: &BucketId,
        item_id: &str,
        pinned: bool,
        now_ms: i64,
    ) -> Result<Written, MemoryError> {
        let bucket_id = bucket.as_str();
        self.write(bucket_id, |tx| {
            let before = load(tx, bucket_id, item_id)?;
            tx.prepare_cached(
                "UPDATE items SET pinned = ?3, last_updated_ms = ?4 WHERE bucket_id = ?1 AND item_id = ?2",
            )?
            .execute(params![bucket_id, item_id, pinned, now_ms])?;
            let delta = i64::from(pinned) - i64::from(before.pinned);
            refresh_register(tx, bucket_id, 0, delta, now_ms)?;
            Ok(Written {
                item: load(tx, bucket_id, item_id)?,
                op: if pinned { WriteOp::Pin } else { WriteOp::Unpin },
                redacted: Vec::new(),
            })
        })
    }

    /// Removes an item (and its words from the search index); returns it as it was.
    pub fn forget(
        &self,
        bucket: &BucketId,
        item_id: &str,
        now_ms: i64,
    ) -> Result<MemoryItem, MemoryError> {
        let bucket_id = bucket.as_str();
        self.write(bucket_id, |tx| {
            let item = load(tx, bucket_id, item_id)?;
            tx.prepare_cached("DELETE FROM items WHERE bucket_id = ?1 AND item_id = ?2")?
                .execute(params![bucket_id, item_id])?;
            refresh_register(tx, bucket_id, -1, -i64::from(item.pinned), now_ms)?;
            Ok(item)
        })
    }

    /// Adds `signal` to each of `item_ids` found in `bucket`; returns those found.
    pub fn reference(
        &self,
        bucket: &BucketId,
        item_ids: &[String],
        signal: Signal,
        now_ms: i64,
    ) -> Result<Vec<String>, MemoryError> {
        if item_ids.is_empty() {
            return Ok(Vec::new());
        }
        let scoring = self.scoring;
        let bucket_id = bucket.as_str();
        self.write(bucket_id, |tx| {
            let mut found = Vec::new();
            for id in item_ids {
                let Some(item) = tx
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM items WHERE bucket_id = ?1 AND item_id = ?2"
                    ))?
                    .query_row(params![bucket_id, id], item_of)
                    .optional()?
                else {
                    continue;
                };
                let s = item.signals.with(&scoring, signal, now_ms);
                tx.prepare_cached(
                    "UPDATE items SET topic_hits = ?2, citations = ?3, v_write = ?4, v_topic = ?5, v_citation = ?6,
                     touched_ms = ?7, rank_key = ?8 WHERE item_id = ?1",
                )?
                .execute(params![
                    id,
                    s.topic_hits,
                    s.citations,
                    s.v_write,
                    s.v_topic,
                    s.v_citation,
                    s.touched_ms,
                    s.rank_key(&scoring),
                ])?;
                found.push(id.clone());
            }
            Ok(found)
        })
    }

    /// One item, scored at `now_ms`.
    pub fn item(
        &self,
        bucket: &BucketId,
        item_id: &str,
        now_ms: i64,
    ) -> Result<ScoredItem, MemoryError> {
        self.read(|c| load(c, bucket.as_str(), item_id))
            .map(|item| self.scored(item, now_ms))
    }

    pub fn scored(&self, item: MemoryItem, now_ms: i64) -> ScoredItem {
        let score = item.signals.score(&self.scoring, item.pinned, now_ms);
        ScoredItem {
            reference_score: score.total,
            recency: score.decay,
            score,
            item,
        }
    }

    /// Every item of a bucket: pinned first, then by score.
    pub fn items(&self, bucket: &BucketId, now_ms: i64) -> Result<Vec<ScoredItem>, MemoryError> {
        let items = self.read(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {COLUMNS} FROM items WHERE bucket_id = ?1 ORDER BY pinned DESC, rank_key DESC"
            ))?;
            let rows = stmt.query_map([bucket.as_str()], item_of)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })?;
        Ok(items.into_iter().map(|i| self.scored(i, now_ms)).collect())
    }

    /// Every bucket's register, most recently written first.
    pub fn registers(&self) -> Result<Vec<Register>, MemoryError> {
        self.read(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {REGISTER_COLUMNS} FROM registers ORDER BY last_updated_ms DESC, bucket_id"
            ))?;
            let rows = stmt.query_map([], register_of)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    /// One bucket's register (a bucket nothing was written to has none).
    pub fn register(&self, bucket: &BucketId) -> Result<Option<Register>, MemoryError> {
        self.read(|c| Ok(register_in(c, bucket.as_str())?))
    }

    /// Full-text search over content and refs, best match first; in one
    /// bucket or in all.
    pub fn search(
        &self,
        query: &str,
        bucket: Option<&BucketId>,
        how: Match,
        limit: usize,
        now_ms: i64,
    ) -> Result<Vec<Hit>, MemoryError> {
        let Some(fts) = fts_query(query, how) else {
            return Err(MemoryError::EmptyQuery {
                query: query.to_owned(),
            });
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // In one bucket, the bucket's token is part of the query, so FTS5
        // ranks and limits by itself; items are read for the top hits only.
        let fts = match bucket {
            Some(b) => format!("bucket_tag:{} AND ({fts})", bucket_tag(b.as_str())),
            None => fts,
        };
        let rows = self.read(|c| {
            let columns = COLUMNS
                .split(", ")
                .map(|col| format!("items.{}", col.trim()))
                .collect::<Vec<_>>()
                .join(", ");
            // bm25() named outright (refs count half, the bucket token not at
            // all): measurably faster here than FTS5's `rank` column.
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {columns}, hits.relevance FROM (
                     SELECT rowid, bm25(items_fts, 1.0, 0.5, 0.0) AS relevance FROM items_fts
                     WHERE items_fts MATCH ?1 ORDER BY relevance LIMIT ?2
                 ) AS hits JOIN items ON items.id = hits.rowid ORDER BY hits.relevance"
            ))?;
            let rows = stmt.query_map(params![fts, limit], |r| {
                Ok((item_of(r)?, r.get::<_, f64>(14)?))
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })?;
        Ok(rows
            .into_iter()
            .map(|(item, rank)| Hit {
                scored: self.scored(item, now_ms),
                match_rank: (rank * 10_000.0).round() / 10_000.0,
            })
            .collect())
    }

    /// The bucket's context package: from the cache, or computed at `now_ms`
    /// (and cached until the bucket is next written).
    pub fn package(
        &self,
        bucket: &BucketId,
        now_ms: i64,
    ) -> Result<Arc<ContextPackage>, MemoryError> {
        let slot = self.slot(bucket.as_str());
        let generation = {
            let cache = lock(&slot.cache);
            if let Some(p) = &cache.package {
                return Ok(p.clone());
            }
            cache.generation
        };
        let package = Arc::new(self.compute_package(bucket, now_ms)?);
        let mut cache = lock(&slot.cache);
        if cache.generation == generation {
            cache.package = Some(package.clone());
        }
        Ok(package)
    }

    /// The package computed now, never from the cache.
    pub fn compute_package(
        &self,
        bucket: &BucketId,
        now_ms: i64,
    ) -> Result<ContextPackage, MemoryError> {
        let c = &self.config;
        let bucket_id = bucket.as_str();
        let (pinned, top, recent, register) = self.read(|conn| {
            let query = |sql: &str, limit: usize| -> Result<Vec<MemoryItem>, MemoryError> {
                let mut stmt = conn
                    .prepare_cached(&format!("SELECT {COLUMNS} FROM items WHERE {sql} LIMIT ?2"))?;
                let rows = stmt.query_map(
                    params![bucket_id, i64::try_from(limit).unwrap_or(i64::MAX)],
                    item_of,
                )?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            };
            let pinned = query(
                "bucket_id = ?1 AND pinned = 1 ORDER BY rank_key DESC",
                c.package_pinned,
            )?;
            let top = query(
                "bucket_id = ?1 AND pinned = 0 ORDER BY rank_key DESC",
                c.package_top,
            )?;
            // Recent items that are also high-score are listed once, so ask for enough.
            let recent = query(
                "bucket_id = ?1 AND pinned = 0 ORDER BY last_updated_ms DESC",
                c.package_recent + c.package_top,
            )?;
            let register = register_in(conn, bucket_id)?;
            Ok((pinned, top, recent, register))
        })?;
        let mut seen: HashSet<String> = HashSet::new();
        let mut ordered = Vec::new();
        for (items, why, cap) in [
            (pinned, Why::Pinned, c.package_pinned),
            (top, Why::HighScore, c.package_top),
            (recent, Why::Recent, c.package_recent),
        ] {
            let mut taken = 0;
            for item in items {
                if taken == cap || !seen.insert(item.item_id.clone()) {
                    continue;
                }
                taken += 1;
                ordered.push((self.scored(item, now_ms), why));
            }
        }
        let (summary, last_updated) = match register {
            Some(r) => (r.summary, Some(r.last_updated)),
            None => (register_summary(0, 0, None, None), None),
        };
        Ok(ContextPackage::assemble(
            bucket_id,
            summary,
            ordered,
            c.budget_unit,
            (c.short_budget, c.long_budget),
            last_updated,
            rfc3339_ms(now_ms),
        ))
    }

    /// Adds many items to a bucket in one transaction (benchmarks, imports);
    /// each is scrubbed like any other.
    pub fn bulk_add(
        &self,
        bucket: &BucketId,
        items: impl IntoIterator<Item = (String, bool, Signals, i64)>,
    ) -> Result<usize, MemoryError> {
        let scoring = self.scoring;
        let bucket_id = bucket.as_str();
        self.write(bucket_id, |tx| {
            let mut insert = tx.prepare_cached(
                "INSERT INTO items (item_id, bucket_id, bucket_tag, schema_version, content, content_key, metadata,
                 refs_text, pinned, topic_hits, citations, v_write, v_topic, v_citation, touched_ms, rank_key,
                 created_ms, last_updated_ms)
                 VALUES (?1, ?2, ?15, ?3, ?4, ?14, '{}', '', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
            )?;
            let (mut added, mut pinned_added, mut last) = (0i64, 0i64, 0i64);
            for (content, pinned, s, written_ms) in items {
                let content = crate::safety::global().scrub(&package::one_line(&content)).into_owned();
                insert.execute(params![
                    format!("mem_{}", uuid::Uuid::now_v7().simple()),
                    bucket_id,
                    SCHEMA_VERSION,
                    content,
                    pinned,
                    s.topic_hits,
                    s.citations,
                    s.v_write,
                    s.v_topic,
                    s.v_citation,
                    s.touched_ms,
                    s.rank_key(&scoring),
                    written_ms,
                    content_key(&content),
                    bucket_tag(bucket_id),
                ])?;
                added += 1;
                pinned_added += i64::from(pinned);
                last = last.max(written_ms);
            }
            refresh_register(tx, bucket_id, added, pinned_added, last)?;
            Ok(usize::try_from(added).unwrap_or(0))
        })
    }
}

/// 16 hex digits of the sha256 of `text`: an index key, not a secret.
fn short_hash(text: &str) -> String {
    // `sha256:` and the first 8 bytes, in hex.
    crate::trace::chain::sha256_tagged(text.as_bytes())[7..23].to_owned()
}

/// What finds the same content again in a bucket.
fn content_key(content: &str) -> String {
    short_hash(content)
}

/// The bucket as one search token.
fn bucket_tag(bucket_id: &str) -> String {
    format!("b{}", short_hash(bucket_id))
}

/// A bucket's register, read on `conn`.
fn register_in(conn: &Connection, bucket_id: &str) -> rusqlite::Result<Option<Register>> {
    conn.prepare_cached(&format!(
        "SELECT {REGISTER_COLUMNS} FROM registers WHERE bucket_id = ?1"
    ))?
    .query_row([bucket_id], register_of)
    .optional()
}

fn register_of(r: &Row<'_>) -> rusqlite::Result<Register> {
    Ok(Register {
        bucket_id: r.get(0)?,
        schema_version: r.get(1)?,
        summary: r.get(2)?,
        item_count: r.get(3)?,
        pinned_count: r.get(4)?,
        last_updated: rfc3339_ms(r.get(5)?),
    })
}

fn load(c: &Connection, bucket_id: &str, item_id: &str) -> Result<MemoryItem, MemoryError> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM items WHERE bucket_id = ?1 AND item_id = ?2"
    ))?
    .query_row(params![bucket_id, item_id], item_of)
    .optional()?
    .ok_or_else(|| MemoryError::NoSuchItem {
        bucket_id: bucket_id.to_owned(),
        item_id: item_id.to_owned(),
    })
}

/// Rewrites the bucket's register after a write (inside its transaction).
fn refresh_register(
    tx: &Connection,
    bucket_id: &str,
    added: i64,
    pinned_added: i64,
    now_ms: i64,
) -> Result<(), MemoryError> {
    let (count, pinned): (i64, i64) = tx
        .prepare_cached("SELECT item_count, pinned_count FROM registers WHERE bucket_id = ?1")?
        .query_row([bucket_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or((0, 0));
    let (count, pinned) = ((count + added).max(0), (pinned + pinned_added).max(0));
    let first = |sql: &str| -> Result<Option<String>, MemoryError> {
        Ok(tx
            .prepare_cached(sql)?
            .query_row([bucket_id], |r| r.get(0))
            .optional()?)
    };
    let top_pinned = first(
        "SELECT content FROM items WHERE bucket_id = ?1 AND pinned = 1 ORDER BY rank_key DESC LIMIT 1",
    )?;
    // The latest write among pinned and unpinned items.
    let latest = first(
        "SELECT content FROM (
             SELECT * FROM (SELECT content, last_updated_ms FROM items WHERE bucket_id = ?1 AND pinned = 0
                            ORDER BY last_updated_ms DESC LIMIT 1)
             UNION ALL
             SELECT * FROM (SELECT content, last_updated_ms FROM items WHERE bucket_id = ?1 AND pinned = 1
                            ORDER BY last_updated_ms DESC LIMIT 1)
         ) ORDER BY last_updated_ms DESC LIMIT 1",
    )?;
    let summary = register_summary(
        count.unsigned_abs(),
        pinned.unsigned_abs(),
        top_pinned.as_deref(),
        latest.as_deref(),
    );
    tx.prepare_cached(
        "INSERT INTO registers (bucket_id, schema_version, summary, item_count, pinned_count, last_updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (bucket_id) DO UPDATE SET summary = excluded.summary, item_count = excluded.item_count,
             pinned_count = excluded.pinned_count, last_updated_ms = excluded.last_updated_ms",
    )?
    .execute(params![bucket_id, SCHEMA_VERSION, summary, count, pinned, now_ms])?;
    Ok(())
}

/// Words people rarely mean when they search.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "do",
    "does", "for", "from", "has", "have", "he", "her", "his", "i", "if", "in", "into", "is", "it",
    "its", "me", "my", "no", "not", "of", "on", "or", "our", "over", "she", "so", "that", "the",
    "them", "there", "they", "this", "to", "under", "up", "was", "we", "what", "when", "where",
    "which", "who", "will", "with", "you", "your",
];

/// A word search leaves out of a query ("the", "of", "my", …): it would
/// match nearly everything. Public for `caal bench memory`, which searches
/// for the other words.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// The words of `text`, lower case.
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// An FTS5 query for `text`: its words without stop words (a search for
/// "the" would match nearly everything and mean nothing), each quoted so
/// nothing in it is FTS syntax. None: no word left to look for.
fn fts_query(text: &str, how: Match) -> Option<String> {
    let chosen: Vec<String> = words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .collect();
    if chosen.is_empty() {
        return None;
    }
    let joiner = match how {
        Match::All => " AND ",
        Match::Any => " OR ",
    };
    Some(
        chosen
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(joiner),
    )
}

/// Whether `answer` quotes `content`: three words in a row from the item
/// (one of them not a stop word), or all of a shorter item's words in order.
pub fn quotes(answer: &str, content: &str) -> bool {
    let said = words(answer);
    let kept = words(content);
    if kept.is_empty() || said.is_empty() {
        return false;
    }
    let n = kept.len().min(3);
    kept.windows(n)
        .filter(|gram| gram.iter().any(|w| !is_stopword(w)))
        .any(|gram| said.windows(n).any(|s| s == gram))
}
