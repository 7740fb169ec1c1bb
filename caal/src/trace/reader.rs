//! The reading side of the trace store: listing, showing and exporting rounds.
//! Readers never write; any number may run beside the one writer (WAL).

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::{LazyLock, Mutex},
};

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::{EventType, StoreError, chain::EventRecord};
use crate::ids::ConversationId;
use crate::sqlite::{TRACE, check_identity, classify, open_connection};

/// A round as exported: the header written at intake, with its status and
/// `state_out` read from its terminal event.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RoundRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub schema_version: u32,
    pub library_id: String,
    pub bucket_id: String,
    pub conversation_id: String,
    pub round_id: String,
    pub round_seq: i64,
    pub state_in: String,
    pub state_out: Option<String>,
    pub audio_id: Option<String>,
    pub channel: String,
    pub created_at: String,
    /// `open` (no terminal event yet), `ok`, `partial` (recovered after a crash) or `failed`.
    pub status: String,
    pub failure_code: Option<String>,
    pub failure_reason: Option<String>,
}

/// One line of `caal trace list`.
#[derive(Clone, Debug, Serialize)]
pub struct RoundSummary {
    #[serde(flatten)]
    pub round: RoundRecord,
    pub input: Option<String>,
    pub route_code: Option<String>,
    pub reply: Option<String>,
}

/// What `TraceReader::each_routing` hands each round to: the payloads
/// (canonical JSON) of its input, its normalized input and its first route.
#[derive(Clone, Debug, Default)]
pub struct RoutingInput {
    pub round_id: String,
    pub conversation_id: String,
    pub round_seq: i64,
    pub state_in: String,
    pub created_at: String,
    pub received: Option<String>,
    pub normalized: Option<String>,
    pub route: Option<String>,
}

/// What `TraceReader::each_round` hands each round to.
pub type RoundVisitor<'a> = dyn FnMut(&RoundRecord, &[EventRecord]) -> Result<(), StoreError> + 'a;

/// One input or reply that matched a search.
#[derive(Clone, Debug, Serialize)]
pub struct SearchHit {
    pub round_id: String,
    pub conversation_id: String,
    pub round_seq: i64,
    /// `input.received` (what was said), `output.emitted` (the answer) or
    /// `route.selected` (the decision: route, command, layer, parameters).
    pub event_type: String,
    pub timestamp: String,
    pub text: String,
    /// The text around the words found, each in `[…]`.
    pub snippet: String,
}

/// The event types search covers.
pub const SEARCHED: [&str; 3] = ["input.received", "output.emitted", "route.selected"];

/// What a search is narrowed to.
#[derive(Clone, Debug, Default)]
pub struct SearchFilter<'a> {
    pub conversation: Option<&'a ConversationId>,
    /// One of `SEARCHED`.
    pub event_type: Option<&'a str>,
    pub since: Option<jiff::Timestamp>,
    pub limit: usize,
}

/// The words of a query or a text as search sees them: runs of letters
/// and digits, lower-cased.
fn query_words(text: &str) -> Vec<String> {
    word_runs(text).map(str::to_lowercase).collect()
}

/// The runs of letters and digits in `text`, as FTS5's unicode61 splits it.
fn word_runs(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// `text` with each of `words` it holds in `[…]`, if it holds them all
/// (as FTS5's snippet marks them; for the unindexed tail).
fn marked(text: &str, words: &[String]) -> Option<String> {
    let held = query_words(text);
    if !words.iter().all(|w| held.contains(w)) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if words.contains(&word.to_lowercase()) {
            out.push('[');
            out.push_str(word);
            out.push(']');
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    Some(out)
}

/// The words of what a person typed, each quoted (FTS5's own syntax is not
/// theirs to get wrong: "what's" or "lights.set" are words, not operators).
fn fts_query(query: &str) -> Result<String, StoreError> {
    let words: Vec<String> = word_runs(query).map(|w| format!("\"{w}\"")).collect();
    if words.is_empty() {
        return Err(StoreError::Search(format!(
            "{query:?} has no words to search for; give one or more, e.g. \"kitchen lights\""
        )));
    }
    Ok(words.join(" "))
}

/// A conversation: how many rounds, and when its first and last were.
#[derive(Clone, Debug, Serialize)]
pub struct ConversationSummary {
    pub conversation_id: String,
    pub rounds: i64,
    pub first_round_at: String,
    pub last_round_at: String,
}

/// The columns `event_from_row` reads, from `events` aliased as `e`.
pub(super) const EVENT_COLUMNS: &str = "e.schema_version, e.round_id, e.conversation_id, e.round_seq, e.event_seq,
    e.event_type, e.call_id, e.timestamp, e.payload, e.status, e.failure_code, e.failure_reason, e.prev_hash, e.hash";

pub(super) fn event_from_row(r: &Row<'_>) -> rusqlite::Result<EventRecord> {
    Ok(EventRecord {
        schema_version: r.get(0)?,
        round_id: r.get(1)?,
        conversation_id: r.get(2)?,
        round_seq: r.get(3)?,
        event_seq: r.get(4)?,
        event_type: r.get(5)?,
        call_id: r.get(6)?,
        timestamp: r.get(7)?,
        payload: r.get(8)?,
        status: r.get(9)?,
        failure_code: r.get(10)?,
        failure_reason: r.get(11)?,
        prev_hash: r.get(12)?,
        hash: r.get(13)?,
    })
}

pub(super) const ROUND_COLUMNS: &str =
    "r.schema_version, r.library_id, r.bucket_id, r.conversation_id, r.round_id, r.round_seq,
    r.state_in, r.audio_id, r.channel, r.created_at";

/// `rounds_before`'s two statements: within a conversation (by its
/// `(conversation_id, round_seq)` index, newest first, so a round reads only
/// the rounds it asks for), and across all of them (newest by id). Each
/// prepared once per connection: the service reads a conversation's last
/// rounds every round, and one statement for both, with `?1 IS NULL OR …`,
/// walked the whole trace back from its newest round (a profile of
/// `bash .ci/bench-serve`: 15% of the service's time).
static ROUNDS_BEFORE: LazyLock<(String, String)> = LazyLock::new(|| {
    let select = |filter: &str, order: &str| {
        format!(
            "SELECT {ROUND_COLUMNS}, e.event_type, e.payload, e.failure_code, e.failure_reason,
                (SELECT json_extract(payload, '$.raw_text') FROM events x
                   WHERE x.round_row = r.id AND x.event_type = 'input.received' LIMIT 1),
                (SELECT json_extract(payload, '$.route_code') FROM events x
                   WHERE x.round_row = r.id AND x.event_type = 'route.selected' ORDER BY x.event_seq DESC LIMIT 1),
                (SELECT json_extract(payload, '$.text') FROM events x
                   WHERE x.round_row = r.id AND x.event_type = 'output.emitted' ORDER BY x.event_seq DESC LIMIT 1)
             FROM rounds r
             LEFT JOIN events e ON e.round_row = r.id
               AND e.event_seq = (SELECT max(event_seq) FROM events m WHERE m.round_row = r.id)
             WHERE {filter} AND (?3 IS NULL OR r.round_seq < ?3)
             ORDER BY {order} DESC LIMIT ?2"
        )
    };
    (
        select("r.conversation_id = ?1", "r.round_seq"),
        select("?1 IS NULL", "r.id"),
    )
});

/// The header columns (first ten) of a row; the outcome is filled in later.
pub(super) fn round_from_row(r: &Row<'_>) -> rusqlite::Result<RoundRecord> {
    Ok(RoundRecord {
        kind: "round",
        schema_version: r.get(0)?,
        library_id: r.get(1)?,
        bucket_id: r.get(2)?,
        conversation_id: r.get(3)?,
        round_id: r.get(4)?,
        round_seq: r.get(5)?,
        state_in: r.get(6)?,
        audio_id: r.get(7)?,
        channel: r.get(8)?,
        created_at: r.get(9)?,
        state_out: None,
        status: "open".into(),
        failure_code: None,
        failure_reason: None,
    })
}

impl RoundRecord {
    /// Fills status, state_out and failure fields from the round's last event.
    fn apply_outcome(
        &mut self,
        last_type: Option<&str>,
        payload: Option<&str>,
        code: Option<String>,
        reason: Option<String>,
    ) {
        let payload: Value = payload
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        match last_type.and_then(|t| t.parse::<EventType>().ok()) {
            Some(EventType::RoundCompleted) => {
                self.status = payload["status"].as_str().unwrap_or("ok").to_owned();
                self.state_out = payload["state_out"].as_str().map(str::to_owned);
            }
            Some(EventType::RoundFailed) => {
                // A crashed round kept what it recorded: partial, not failed.
                self.status = if code.as_deref() == Some("crash.recovered") {
                    "partial"
                } else {
                    "failed"
                }
                .into();
                self.state_out = Some(self.state_in.clone());
                self.failure_code = code;
                self.failure_reason = reason;
            }
            _ => self.status = "open".into(),
        }
    }
}

/// Read access to a trace store.
pub struct TraceReader {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl TraceReader {
    /// Opens an existing store for reading; works while another process writes.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_owned(),
            });
        }
        Self::open_alongside_writer(path)
    }

    pub(super) fn open_alongside_writer(path: &Path) -> Result<Self, StoreError> {
        // Read-write flags (never CREATE) so WAL's shared memory can be set up
        // even when no writer is running; query_only keeps it from writing.
        let conn = open_connection(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        check_identity(&conn, path, &TRACE, false)?;
        conn.execute_batch("PRAGMA query_only = ON;")
            .map_err(|e| classify(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Self {
            path: path.to_owned(),
            conn: Mutex::new(conn),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn with_conn<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&conn)
    }

    /// Runs `f` inside one read transaction: a consistent snapshot.
    pub(super) fn snapshot<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_conn(|conn| {
            conn.execute_batch("BEGIN")?;
            let result = f(conn);
            let _ = conn.execute_batch("COMMIT");
            result
        })
    }

    pub fn conversations(&self) -> Result<Vec<ConversationSummary>, StoreError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare(
                "SELECT conversation_id, count(*), min(created_at), max(created_at) FROM rounds
                 GROUP BY conversation_id ORDER BY max(id)",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(ConversationSummary {
                    conversation_id: r.get(0)?,
                    rounds: r.get(1)?,
                    first_round_at: r.get(2)?,
                    last_round_at: r.get(3)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// What was said, answered and decided that holds every word of
    /// `query` (whole words, any case, accents aside), newest first: SQLite
    /// FTS5 over `input.received`, `output.emitted` and `route.selected`
    /// (migration 4 keeps the index in step with the store). Narrowed to a
    /// conversation, an event type, and what happened at or after `since`.
    pub fn search(
        &self,
        query: &str,
        filter: &SearchFilter<'_>,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let matched = fts_query(query)?;
        if let Some(t) = filter.event_type
            && !SEARCHED.contains(&t)
        {
            return Err(StoreError::Search(format!(
                "{t:?} is not searched; use one of {}",
                SEARCHED.join(", ")
            )));
        }
        let since = filter
            .since
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string());
        let words = query_words(query);
        self.snapshot(|conn| {
            let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
            let conversation = filter.conversation.map(|c| c.as_str());
            // The writer indexes off the rounds' path: what it has not yet
            // indexed (the newest events) is read directly, newest first.
            let mark: i64 = conn.query_row(
                "SELECT coalesce(max(id), 0) FROM events_fts_docsize",
                [],
                |r| r.get(0),
            )?;
            let hit = |r: &Row<'_>| {
                Ok(SearchHit {
                    round_id: r.get(0)?,
                    conversation_id: r.get(1)?,
                    round_seq: r.get(2)?,
                    event_type: r.get(3)?,
                    timestamp: r.get(4)?,
                    text: r.get(5)?,
                    snippet: String::new(),
                })
            };
            let mut hits: Vec<SearchHit> = Vec::new();
            let mut tail = conn.prepare_cached(
                "SELECT e.round_id, e.conversation_id, e.round_seq, e.event_type, e.timestamp, v.text
                 FROM events_search_text v JOIN events e ON e.id = v.id
                 WHERE v.id > ?1 AND v.text IS NOT NULL
                   AND (?2 IS NULL OR e.conversation_id = ?2)
                   AND (?3 IS NULL OR e.event_type = ?3)
                   AND (?4 IS NULL OR e.timestamp >= ?4)
                 ORDER BY v.id DESC",
            )?;
            for h in tail.query_map(params![mark, conversation, filter.event_type, since], hit)? {
                let mut h = h?;
                if let Some(snippet) = marked(&h.text, &words) {
                    h.snippet = snippet;
                    hits.push(h);
                    if hits.len() as i64 >= limit {
                        return Ok(hits);
                    }
                }
            }
            let mut stmt = conn.prepare_cached(
                "SELECT e.round_id, e.conversation_id, e.round_seq, e.event_type, e.timestamp,
                        f.text, snippet(events_fts, 0, '[', ']', '…', 16)
                 FROM events_fts f JOIN events e ON e.id = f.rowid
                 WHERE events_fts MATCH ?1
                   AND (?2 IS NULL OR e.conversation_id = ?2)
                   AND (?3 IS NULL OR e.event_type = ?3)
                   AND (?4 IS NULL OR e.timestamp >= ?4)
                 ORDER BY f.rowid DESC LIMIT ?5",
            )?;
            let rest = limit - hits.len() as i64;
            let rows = stmt.query_map(
                params![matched, conversation, filter.event_type, since, rest],
                |r| {
                    let mut h = hit(r)?;
                    h.snippet = r.get(6)?;
                    Ok(h)
                },
            )?;
            for h in rows {
                hits.push(h?);
            }
            Ok(hits)
        })
    }

    /// The newest `limit` rounds (of one conversation, or all), newest last.
    pub fn rounds(
        &self,
        conversation: Option<&ConversationId>,
        limit: usize,
    ) -> Result<Vec<RoundSummary>, StoreError> {
        self.rounds_before(conversation, None, limit)
    }

    /// The newest `limit` rounds with round_seq below `before_seq` (within a conversation), newest last.
    fn rounds_before(
        &self,
        conversation: Option<&ConversationId>,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<Vec<RoundSummary>, StoreError> {
        // One statement: a snapshot of its own, no transaction around it.
        self.with_conn(|conn| {
            let sql = match conversation {
                Some(_) => &ROUNDS_BEFORE.0,
                None => &ROUNDS_BEFORE.1,
            };
            let mut stmt = conn.prepare_cached(sql)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(
                params![conversation.map(|c| c.as_str()), limit, before_seq],
                |r| {
                    let mut round = round_from_row(r)?;
                    let last_type: Option<String> = r.get(10)?;
                    let payload: Option<String> = r.get(11)?;
                    round.apply_outcome(
                        last_type.as_deref(),
                        payload.as_deref(),
                        r.get(12)?,
                        r.get(13)?,
                    );
                    Ok(RoundSummary {
                        round,
                        input: r.get(14)?,
                        route_code: r.get(15)?,
                        reply: r.get(16)?,
                    })
                },
            )?;
            let mut out: Vec<RoundSummary> = rows.collect::<Result<_, _>>()?;
            out.reverse();
            Ok(out)
        })
    }

    /// One round with its events in order; `None` if no such round.
    pub fn round(
        &self,
        round_id: &str,
    ) -> Result<Option<(RoundRecord, Vec<EventRecord>)>, StoreError> {
        self.snapshot(|conn| {
            let header = conn
                .prepare(&format!(
                    "SELECT {ROUND_COLUMNS}, r.id FROM rounds r WHERE r.round_id = ?1"
                ))?
                .query_row([round_id], |r| {
                    Ok((round_from_row(r)?, r.get::<_, i64>(10)?))
                })
                .optional()?;
            let Some((mut round, row)) = header else {
                return Ok(None);
            };
            let events = round_events(conn, row)?;
            round.apply_terminal(events.last());
            Ok(Some((round, events)))
        })
    }

    /// Number of events (of one conversation, or all); sizes progress bars.
    pub fn count_events(&self, conversation: Option<&ConversationId>) -> Result<u64, StoreError> {
        self.count("events", conversation)
    }

    /// Number of rounds (of one conversation, or all); sizes progress bars.
    pub fn count_rounds(&self, conversation: Option<&ConversationId>) -> Result<u64, StoreError> {
        self.count("rounds", conversation)
    }

    fn count(&self, table: &str, conversation: Option<&ConversationId>) -> Result<u64, StoreError> {
        self.with_conn(|conn| {
            let n: i64 = conn.query_row(
                &format!("SELECT count(*) FROM {table} WHERE ?1 IS NULL OR conversation_id = ?1"),
                [conversation.map(|c| c.as_str())],
                |r| r.get(0),
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    /// Writes JSONL: for each round (in the order they began) a round line,
    /// then its events in order. Streams: memory holds one round at a time.
    /// `progress` is called with the number of events written so far.
    pub fn export(
        &self,
        conversation: Option<&ConversationId>,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ExportStats, StoreError> {
        let stats = self.each_round(conversation, progress, &mut |round, events| {
            let line = serde_json::to_string(round).map_err(|source| StoreError::Json {
                what: "a round header for the export".into(),
                source,
            })?;
            writeln!(out, "{line}").map_err(export_io)?;
            for event in events {
                writeln!(out, "{}", event.to_json_line()).map_err(export_io)?;
            }
            Ok(())
        })?;
        out.flush().map_err(export_io)?;
        Ok(stats)
    }

    /// Hands `visit` each round (in the order they began) with its events,
    /// one round in memory at a time, in one read snapshot; `progress` gets
    /// the number of events visited so far.
    ///
    /// Two cursors walked side by side (rounds by row id, events by their
    /// round's row id), not a query per round: with a query per round,
    /// SQLite prepared the events statement again for every round (its
    /// plan depends on the bound row), a tenth of a Parquet export's time.
    pub fn each_round(
        &self,
        conversation: Option<&ConversationId>,
        progress: &mut dyn FnMut(u64),
        visit: &mut RoundVisitor<'_>,
    ) -> Result<ExportStats, StoreError> {
        self.snapshot(|conn| {
            let filter = conversation.map(|c| c.as_str());
            let mut rounds = conn.prepare(&format!(
                "SELECT {ROUND_COLUMNS}, r.id FROM rounds r WHERE ?1 IS NULL OR r.conversation_id = ?1 ORDER BY r.id"
            ))?;
            let mut all_events = conn.prepare(&format!(
                "SELECT {EVENT_COLUMNS}, e.round_row FROM events e
                 WHERE ?1 IS NULL OR e.conversation_id = ?1 ORDER BY e.round_row, e.event_seq"
            ))?;
            let mut event_rows = all_events.query([filter])?;
            let mut next_event = move || -> Result<Option<(i64, EventRecord)>, StoreError> {
                match event_rows.next()? {
                    Some(r) => Ok(Some((r.get(14)?, event_from_row(r)?))),
                    None => Ok(None),
                }
            };
            // The next event not yet handed out: the first of a later round.
            let mut ahead = next_event()?;
            let mut stats = ExportStats::default();
            let mut rows = rounds.query([filter])?;
            while let Some(row) = rows.next()? {
                let mut round = round_from_row(row)?;
                let round_row: i64 = row.get(10)?;
                let mut events = Vec::new();
                while let Some((of, _)) = &ahead
                    && *of <= round_row
                {
                    if let Some((of, event)) = ahead.take()
                        && of == round_row
                    {
                        events.push(event);
                    }
                    ahead = next_event()?;
                }
                round.apply_terminal(events.last());
                visit(&round, &events)?;
                stats.rounds += 1;
                stats.events += events.len() as u64;
                progress(stats.events);
            }
            Ok(stats)
        })
    }
}

fn export_io(e: std::io::Error) -> StoreError {
    StoreError::Io {
        what: "writing the export failed".into(),
        source: e,
    }
}

impl RoundRecord {
    pub(super) fn apply_terminal(&mut self, last: Option<&EventRecord>) {
        match last {
            Some(e) => self.apply_outcome(
                Some(&e.event_type),
                Some(&e.payload),
                e.failure_code.clone(),
                e.failure_reason.clone(),
            ),
            None => self.apply_outcome(None, None, None, None),
        }
    }
}

/// The events of the round stored at `round_row` (rounds.id), in order.
pub(super) fn round_events(
    conn: &Connection,
    round_row: i64,
) -> Result<Vec<EventRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM events e WHERE e.round_row = ?1 ORDER BY e.event_seq"
    ))?;
    let rows = stmt.query_map([round_row], event_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ExportStats {
    pub rounds: u64,
    pub events: u64,
}

impl TraceReader {
    /// A conversation's last round_seq and its chain's last hash, as committed.
    pub(super) fn chain_tail(
        &self,
        conversation: &ConversationId,
    ) -> Result<(i64, Option<String>), StoreError> {
        self.with_conn(|conn| {
            let last_round_seq: i64 = conn
                .prepare_cached("SELECT coalesce(max(round_seq), 0) FROM rounds WHERE conversation_id = ?1")?
                .query_row([conversation.as_str()], |r| r.get(0))?;
            let head: Option<String> = conn
                .prepare_cached(
                    "SELECT e.hash FROM rounds r JOIN events e ON e.round_row = r.id
                     WHERE r.conversation_id = ?1 ORDER BY r.round_seq DESC, e.event_seq DESC LIMIT 1",
                )?
                .query_row([conversation.as_str()], |r| r.get(0))
                .optional()?;
            if head.is_some() {
                return Ok((last_round_seq, head));
            }
            // Pruned: the conversation goes on from its tombstone's head.
            let tombstone: Option<(i64, String)> = conn
                .prepare_cached(
                    "SELECT last_round_seq, head_hash FROM tombstones WHERE conversation_id = ?1
                     ORDER BY last_round_seq DESC LIMIT 1",
                )?
                .query_row([conversation.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            Ok(match tombstone {
                Some((seq, hash)) => (seq, Some(hash)),
                None => (last_round_seq, head),
            })
        })
    }
}

impl TraceReader {
    /// Events committed after `after_id` (the global append order), oldest
    /// first: what a live stream missed, or its next batch.
    pub fn events_after(
        &self,
        after_id: i64,
        limit: usize,
    ) -> Result<Vec<(i64, EventRecord)>, StoreError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS}, e.id FROM events e WHERE e.id > ?1 ORDER BY e.id LIMIT ?2"
            ))?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(params![after_id, limit], |r| {
                Ok((r.get(14)?, event_from_row(r)?))
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Every tombstone, in conversation order.
    /// The state changes (`boundary` of `round.completed`/`round.failed`) of
    /// the rounds recorded after `rounds_mark`, in the order they ended:
    /// (conversation_id, round_seq, boundary JSON).
    pub fn boundaries_after(
        &self,
        rounds_mark: i64,
    ) -> Result<Vec<(String, i64, String)>, StoreError> {
        self.with_conn(|c| {
            let mut stmt = c.prepare(
                "SELECT r.conversation_id, r.round_seq, json_extract(e.payload, '$.boundary')
                 FROM rounds r JOIN events e ON e.round_row = r.id
                 WHERE r.id > ?1 AND e.event_type IN ('round.completed', 'round.failed')
                   AND json_extract(e.payload, '$.boundary') IS NOT NULL
                 ORDER BY e.id",
            )?;
            let rows = stmt.query_map([rounds_mark], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    pub fn tombstones(&self) -> Result<Vec<super::Tombstone>, StoreError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {} FROM tombstones ORDER BY conversation_id, last_round_seq",
                super::retention::TOMBSTONE_COLUMNS
            ))?;
            let rows = stmt.query_map([], super::retention::tombstone_from_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    /// The id of the newest committed event (0 if none).
    pub fn last_event_id(&self) -> Result<i64, StoreError> {
        self.with_conn(|conn| {
            Ok(conn.query_row("SELECT coalesce(max(id), 0) FROM events", [], |r| r.get(0))?)
        })
    }

    /// What each round's route stage was given and decided, in the order
    /// rounds began: (round, `input.received`, `input.normalized`, the
    /// first `route.selected`), the payloads as stored. Only those three
    /// types are read (replay needs nothing else, and reading every event
    /// costs more than routing them again); rounds with none are not visited.
    pub fn each_routing(
        &self,
        conversation: Option<&ConversationId>,
        visit: &mut dyn FnMut(RoutingInput) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.snapshot(|conn| {
            let mut stmt = conn.prepare(
                "SELECT e.round_row, e.round_id, e.conversation_id, e.round_seq, r.state_in,
                        r.created_at, e.event_type, e.payload
                 FROM events e JOIN rounds r ON r.id = e.round_row
                 WHERE e.event_type IN ('input.received', 'input.normalized', 'route.selected')
                   AND (?1 IS NULL OR e.conversation_id = ?1)
                 ORDER BY e.round_row, e.event_seq",
            )?;
            let mut rows = stmt.query([conversation.map(|c| c.as_str())])?;
            let mut current: Option<(i64, RoutingInput)> = None;
            while let Some(row) = rows.next()? {
                let round_row: i64 = row.get(0)?;
                if current.as_ref().is_none_or(|(r, _)| *r != round_row) {
                    if let Some((_, done)) = current.take() {
                        visit(done)?;
                    }
                    current = Some((
                        round_row,
                        RoutingInput {
                            round_id: row.get(1)?,
                            conversation_id: row.get(2)?,
                            round_seq: row.get(3)?,
                            state_in: row.get(4)?,
                            created_at: row.get(5)?,
                            ..RoutingInput::default()
                        },
                    ));
                }
                let Some((_, input)) = current.as_mut() else {
                    continue;
                };
                let event_type: String = row.get(6)?;
                let slot = match event_type.as_str() {
                    "input.received" => &mut input.received,
                    "input.normalized" => &mut input.normalized,
                    _ => &mut input.route,
                };
                if slot.is_none() {
                    *slot = Some(row.get(7)?);
                }
            }
            if let Some((_, done)) = current {
                visit(done)?;
            }
            Ok(())
        })
    }

    /// The `feedback.recorded` events that judge a round, oldest first
    /// (the last is the verdict that stands).
    pub fn feedback_on(&self, round_id: &str) -> Result<Vec<EventRecord>, StoreError> {
        self.snapshot(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events e
                 WHERE e.event_type = 'feedback.recorded'
                   AND json_extract(e.payload, '$.round_id') = ?1
                 ORDER BY e.id"
            ))?;
            let rows = stmt.query_map([round_id], event_from_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Every judged round's standing verdict (the last said), by round id.
    pub fn verdicts(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        self.snapshot(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT json_extract(payload, '$.round_id'), json_extract(payload, '$.verdict')
                 FROM events WHERE event_type = 'feedback.recorded' ORDER BY id",
            )?;
            let rows =
                stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Every key of every `round.imported` event (`round:<original id>`,
    /// `memory:…`): what a second `caal import` of the same data finds here.
    pub fn imported_keys(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        self.snapshot(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT k.value FROM events e, json_each(e.payload, '$.keys') k
                 WHERE e.event_type = 'round.imported'",
            )?;
            let keys = stmt.query_map([], |r| r.get::<_, String>(0))?;
            Ok(keys.collect::<Result<_, _>>()?)
        })
    }

    /// Whether a round of this id was recorded in this store.
    pub fn has_round(&self, round_id: &str) -> Result<bool, StoreError> {
        self.with_conn(|conn| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM rounds WHERE round_id = ?1")?
                .query_row([round_id], |_| Ok(()))
                .optional()?
                .is_some())
        })
    }

    /// A page of a conversation's rounds, newest last: those before
    /// `before_seq` (or the newest), at most `limit`, and whether older ones exist.
    pub fn rounds_page(
        &self,
        conversation: &ConversationId,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<(Vec<RoundSummary>, bool), StoreError> {
        let mut page =
            self.rounds_before(Some(conversation), before_seq, limit.saturating_add(1))?;
        let has_more = page.len() > limit;
        if has_more {
            page.remove(0);
        }
        Ok((page, has_more))
    }
}

#[cfg(test)]
mod search_tests {
    use super::*;

    #[test]
    fn the_unindexed_tail_is_matched_and_marked_as_fts5_marks_it() {
        let words = query_words("Kitchen LIGHTS");
        assert_eq!(words, ["kitchen", "lights"]);
        assert_eq!(
            marked("Okay, the kitchen lights are on.", &words).as_deref(),
            Some("Okay, the [kitchen] [lights] are on.")
        );
        // Every word, whole: "light" is not "lights", and one word missing is no hit.
        assert_eq!(marked("the kitchen light", &words), None);
        assert_eq!(marked("kitchenlights", &words), None);
        assert_eq!(
            marked("intent.command lights.set {\"room\":\"kitchen\"}", &words).as_deref(),
            Some("intent.command [lights].set {\"room\":\"[kitchen]\"}")
        );
        // Operators are words to FTS5 only when quoted; nothing typed is syntax.
        assert_eq!(
            fts_query("what's NOT \"on\"").unwrap(),
            "\"what\" \"s\" \"NOT\" \"on\""
        );
        assert!(fts_query("?!").is_err());
    }
}
