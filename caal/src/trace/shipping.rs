//! The trace store as the live shipper's queue (migration 6): which ended
//! rounds a receiver has not acknowledged yet, and the marks that move only
//! once it has.
//!
//! Rounds ship in the order they ended (their `round.completed` or
//! `round.failed` event's id). Within a conversation that is the order of
//! `round_seq` (one round at a time; a crashed round is failed on the next
//! start, before the conversation can go on), so a conversation's mark, its
//! last shipped `round_seq`, says every earlier round shipped too. Batches go
//! one at a time, so after an acknowledgement every round that ended at or
//! before the batch's last terminal event has shipped: the highest
//! `event_id` of the marks is where the next read starts, and a restart
//! resumes there.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;

use super::{
    EventRecord, RoundRecord, SCHEMA_VERSION, StoreError, TraceReader,
    reader::{ROUND_COLUMNS, round_events, round_from_row},
    store::now_timestamp,
};
use crate::sqlite::{TRACE, check_identity, classify, open_connection};

/// An ended round waiting to ship, with its events in order.
#[derive(Clone, Debug)]
pub struct QueuedRound {
    pub round: RoundRecord,
    pub events: Vec<EventRecord>,
    /// The id of its terminal event: the order rounds ship in.
    pub end_event_id: i64,
}

/// What `caal ship status` and the page show.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ShipStatus {
    /// Ended rounds no receiver has acknowledged yet.
    pub backlog: u64,
    /// The same, per conversation that has any (conversation_id, rounds).
    pub backlog_by_conversation: Vec<(String, u64)>,
    /// Rounds acknowledged since shipping began on this trace.
    pub rounds_acked: u64,
    pub last_ack_at: Option<String>,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
}

/// The terminal events, as SQL.
const ENDED: &str = "('round.completed', 'round.failed')";

/// The shipper's own connection to `traces.db`: it reads batches and writes
/// marks beside the store's writer (WAL; the mark's transaction is small).
pub struct ShipQueue {
    conn: Connection,
    /// Every round that ended at or before this event id has shipped.
    cursor: i64,
}

impl ShipQueue {
    /// Opens the queue of the store at `path`; the store must exist and be
    /// migrated (the service opens it first).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = open_connection(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        check_identity(&conn, path, &TRACE, false)?;
        // NORMAL in WAL: a kill keeps every committed mark; a power cut may
        // lose the last ones, and then rounds are sent again (ids make that
        // idempotent downstream), never lost.
        conn.execute_batch("PRAGMA synchronous = NORMAL;")
            .map_err(|e| classify(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let cursor = conn.query_row(
            "SELECT coalesce(max(event_id), 0) FROM ship_marks",
            [],
            |r| r.get(0),
        )?;
        Ok(Self { conn, cursor })
    }

    /// The next at most `limit` ended rounds not yet acknowledged, oldest
    /// ending first, read in one snapshot.
    pub fn next_batch(&mut self, limit: usize) -> Result<Vec<QueuedRound>, StoreError> {
        self.conn.execute_batch("BEGIN")?;
        let batch = read_batch(&self.conn, self.cursor, limit);
        let _ = self.conn.execute_batch("COMMIT");
        batch
    }

    /// Records that a receiver acknowledged `batch`: each conversation's
    /// mark moves to its last round in it, in one transaction.
    pub fn acknowledge(&mut self, batch: &[QueuedRound]) -> Result<(), StoreError> {
        let Some(last) = batch.iter().map(|q| q.end_event_id).max() else {
            return Ok(());
        };
        let now = now_timestamp();
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let written = (|| -> Result<(), StoreError> {
            let mut mark = self.conn.prepare_cached(
                "INSERT INTO ship_marks (conversation_id, schema_version, round_seq, event_id, acked_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (conversation_id) DO UPDATE SET
                   round_seq = max(round_seq, excluded.round_seq),
                   event_id = max(event_id, excluded.event_id),
                   acked_at = excluded.acked_at",
            )?;
            for q in batch {
                mark.execute(params![
                    q.round.conversation_id,
                    SCHEMA_VERSION,
                    q.round.round_seq,
                    q.end_event_id,
                    now
                ])?;
            }
            self.conn.execute(
                "INSERT INTO ship_state (id, schema_version, last_ack_at, rounds_acked) VALUES (1, ?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET last_ack_at = excluded.last_ack_at,
                   rounds_acked = rounds_acked + excluded.rounds_acked",
                params![SCHEMA_VERSION, now, batch.len() as i64],
            )?;
            Ok(())
        })();
        match written {
            Ok(()) => {
                self.conn.execute_batch("COMMIT")?;
                self.cursor = self.cursor.max(last);
                Ok(())
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Records why the last send failed (a reason, never a credential), or
    /// clears it with `None` once a send got through.
    pub fn record_error(&self, reason: Option<&str>) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO ship_state (id, schema_version, last_error, last_error_at) VALUES (1, ?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET last_error = excluded.last_error,
               last_error_at = coalesce(excluded.last_error_at, last_error_at)",
            params![SCHEMA_VERSION, reason, reason.map(|_| now_timestamp())],
        )?;
        Ok(())
    }
}

fn read_batch(
    conn: &Connection,
    cursor: i64,
    limit: usize,
) -> Result<Vec<QueuedRound>, StoreError> {
    let mut ended = conn.prepare_cached(&format!(
        "SELECT e.id, e.round_row FROM events e JOIN rounds r ON r.id = e.round_row
         LEFT JOIN ship_marks m ON m.conversation_id = r.conversation_id
         WHERE e.id > ?1 AND e.event_type IN {ENDED} AND r.round_seq > coalesce(m.round_seq, 0)
         ORDER BY e.id LIMIT ?2"
    ))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows: Vec<(i64, i64)> = ended
        .query_map(params![cursor, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut header = conn.prepare_cached(&format!(
        "SELECT {ROUND_COLUMNS} FROM rounds r WHERE r.id = ?1"
    ))?;
    let mut batch = Vec::with_capacity(rows.len());
    for (end_event_id, round_row) in rows {
        let mut round = header.query_row([round_row], round_from_row)?;
        let events = round_events(conn, round_row)?;
        round.apply_terminal(events.last());
        batch.push(QueuedRound {
            round,
            events,
            end_event_id,
        });
    }
    Ok(batch)
}

impl TraceReader {
    /// Rounds acknowledged so far: one row read, for a caller that polls.
    pub fn ship_acked(&self) -> Result<u64, StoreError> {
        self.with_conn(|conn| {
            let n: Option<i64> = conn
                .query_row(
                    "SELECT rounds_acked FROM ship_state WHERE id = 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(n.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
        })
    }

    /// The shipping backlog and the last acknowledgement and error.
    pub fn ship_status(&self) -> Result<ShipStatus, StoreError> {
        self.snapshot(|conn| {
            let mut by = conn.prepare(&format!(
                "SELECT r.conversation_id, count(*) FROM events e JOIN rounds r ON r.id = e.round_row
                 LEFT JOIN ship_marks m ON m.conversation_id = r.conversation_id
                 WHERE e.id > (SELECT coalesce(max(event_id), 0) FROM ship_marks)
                   AND e.event_type IN {ENDED} AND r.round_seq > coalesce(m.round_seq, 0)
                 GROUP BY r.conversation_id ORDER BY min(e.id)"
            ))?;
            let backlog_by_conversation: Vec<(String, u64)> = by
                .query_map([], |r| {
                    Ok((r.get(0)?, u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0)))
                })?
                .collect::<Result<_, _>>()?;
            let state = conn
                .query_row(
                    "SELECT rounds_acked, last_ack_at, last_error, last_error_at FROM ship_state WHERE id = 1",
                    [],
                    |r| {
                        Ok((
                            u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                        ))
                    },
                )
                .optional()?;
            let (rounds_acked, last_ack_at, last_error, last_error_at) =
                state.unwrap_or_default();
            Ok(ShipStatus {
                backlog: backlog_by_conversation.iter().map(|(_, n)| n).sum(),
                backlog_by_conversation,
                rounds_acked,
                last_ack_at,
                last_error,
                last_error_at,
            })
        })
    }
}
