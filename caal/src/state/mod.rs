//! `state.db`: the assistant's mutable state. The trace is evidence and never
//! changes; this is what the next round reads: each conversation's state,
//! pending confirmations and undo records (`auth::store`), the built-in home
//! and the tool-call ledger (`tools`). Every change made here is also
//! recorded as an event in the trace. Only the process that holds the data
//! dir's writer lock opens it.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicI64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::{
    ids::ConversationId,
    sqlite::{STATE, check_identity, enable_wal, migrate, open_connection},
    trace::StoreError,
};

/// The state database's file name inside a data dir.
pub const STATE_FILE: &str = "state.db";

pub struct StateDb {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// Every round reads its conversation's state and pending confirmation;
    /// the process that holds the writer lock is the only one changing them,
    /// so it keeps them here, written through.
    pub(crate) states: Mutex<HashMap<String, Option<String>>>,
    /// Pending confirmations as their stored JSON bodies (`auth::store`
    /// reads them; this layer does not know their type).
    pub(crate) pendings: Mutex<HashMap<String, Option<String>>>,
}

impl StateDb {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = open_connection(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        check_identity(&conn, path, &STATE, true)?;
        enable_wal(&conn, path)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")?;
        conn.busy_timeout(Duration::from_secs(5))?;
        migrate(&conn, &STATE)?;
        Ok(Self {
            path: path.to_owned(),
            conn: Mutex::new(conn),
            states: Mutex::default(),
            pendings: Mutex::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection; the driver's errors become `StoreError`.
    pub fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        Ok(f(&conn)?)
    }

    /// Runs `f` in one transaction: all of it or none of it.
    pub fn transaction<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn.transaction()?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// The conversation's state, if it has one yet.
    pub fn conversation_state(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<String>, StoreError> {
        if let Some(state) = lock(&self.states).get(conversation.as_str()) {
            return Ok(state.clone());
        }
        let state: Option<String> = self.with(|c| {
            c.prepare_cached("SELECT state FROM conversations WHERE conversation_id = ?1")?
                .query_row([conversation.as_str()], |r| r.get(0))
                .optional()
        })?;
        lock(&self.states).insert(conversation.to_string(), state.clone());
        Ok(state)
    }

    /// Every conversation that has left its starting state, with its state.
    pub fn conversation_states(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        self.with(|c| {
            c.prepare(
                "SELECT conversation_id, state, updated_at FROM conversations ORDER BY updated_at",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect()
        })
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Time as the engine sees it, in milliseconds since the Unix epoch.
/// Expiry and undo windows read it; tests turn it by hand.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> i64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that moves only when told.
#[derive(Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        Self(AtomicI64::new(start_ms))
    }

    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// RFC 3339 UTC (milliseconds) of a clock reading, for people and payloads.
pub fn rfc3339_ms(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}
