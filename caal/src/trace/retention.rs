//! Retention: whole conversations whose last round is older than a cutoff
//! are removed, each behind a signed tombstone recording the removed
//! chain's head (last round_seq, event_seq and hash) and how much went.
//! Nothing else can delete (the triggers refuse any delete a tombstone does
//! not cover); a conversation that goes on continues from the tombstone's
//! head, and verification checks every tombstone's signature.

use ed25519_dalek::SigningKey;
use rusqlite::{OpenFlags, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::{SCHEMA_VERSION, StoreError, TraceStore, now_timestamp};
use crate::{
    crypto::{public_key_hex, sign_value},
    sqlite::open_connection,
};

/// One removed conversation.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Tombstone {
    pub schema_version: u32,
    pub conversation_id: String,
    pub last_round_seq: i64,
    pub last_event_seq: i64,
    pub head_hash: String,
    pub rounds_removed: i64,
    pub events_removed: i64,
    pub removed_at: String,
    pub public_key: String,
    pub signature: String,
}

impl Tombstone {
    /// What the signature covers: every field but the signature.
    pub fn signed_part(&self) -> Value {
        json!({
            "schema_version": self.schema_version, "conversation_id": self.conversation_id,
            "last_round_seq": self.last_round_seq, "last_event_seq": self.last_event_seq,
            "head_hash": self.head_hash, "rounds_removed": self.rounds_removed,
            "events_removed": self.events_removed, "removed_at": self.removed_at,
            "public_key": self.public_key,
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PruneReport {
    pub cutoff: String,
    pub dry_run: bool,
    pub removed: Vec<Tombstone>,
    /// Old conversations left alone because a round of theirs is still open.
    pub skipped_open: Vec<String>,
}

pub(super) const TOMBSTONE_COLUMNS: &str =
    "schema_version, conversation_id, last_round_seq, last_event_seq, head_hash,
    rounds_removed, events_removed, removed_at, public_key, signature";

pub(super) fn tombstone_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Tombstone> {
    Ok(Tombstone {
        schema_version: r.get(0)?,
        conversation_id: r.get(1)?,
        last_round_seq: r.get(2)?,
        last_event_seq: r.get(3)?,
        head_hash: r.get(4)?,
        rounds_removed: r.get(5)?,
        events_removed: r.get(6)?,
        removed_at: r.get(7)?,
        public_key: r.get(8)?,
        signature: r.get(9)?,
    })
}

/// The moment `days` ago, as round headers write `created_at`.
pub fn cutoff_days_ago(days: u64) -> String {
    let then = std::time::SystemTime::now()
        .checked_sub(std::time::Duration::from_secs(days.saturating_mul(86_400)))
        .unwrap_or(std::time::UNIX_EPOCH);
    humantime::format_rfc3339_micros(then).to_string()
}

impl TraceStore {
    /// Removes every conversation whose last round began before `cutoff`
    /// (RFC 3339), each behind a tombstone signed with `key`. The store must
    /// be this process's (the writer lock is held), so no round is written meanwhile.
    pub fn prune(
        &self,
        cutoff: &str,
        key: &SigningKey,
        dry_run: bool,
    ) -> Result<PruneReport, StoreError> {
        let mut conn = open_connection(self.path(), OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let mut report = PruneReport {
            cutoff: cutoff.to_owned(),
            dry_run,
            removed: Vec::new(),
            skipped_open: Vec::new(),
        };
        let old: Vec<String> = conn
            .prepare(
                "SELECT conversation_id FROM rounds GROUP BY conversation_id
                 HAVING max(created_at) < ?1 ORDER BY conversation_id",
            )?
            .query_map([cutoff], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let public_key = public_key_hex(&key.verifying_key());
        for conversation in old {
            let tx = conn.transaction()?;
            let (last_round_seq, last_event_seq, head_hash, last_type): (i64, i64, String, String) = tx.query_row(
                "SELECT e.round_seq, e.event_seq, e.hash, e.event_type FROM rounds r JOIN events e ON e.round_row = r.id
                 WHERE r.conversation_id = ?1 ORDER BY r.round_seq DESC, e.event_seq DESC LIMIT 1",
                [&conversation],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?;
            if last_type != "round.completed" && last_type != "round.failed" {
                report.skipped_open.push(conversation);
                continue;
            }
            let (rounds_removed, events_removed): (i64, i64) = tx.query_row(
                "SELECT (SELECT count(*) FROM rounds WHERE conversation_id = ?1),
                        (SELECT count(*) FROM events WHERE conversation_id = ?1)",
                [&conversation],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let mut tombstone = Tombstone {
                schema_version: SCHEMA_VERSION,
                conversation_id: conversation.clone(),
                last_round_seq,
                last_event_seq,
                head_hash,
                rounds_removed,
                events_removed,
                removed_at: now_timestamp(),
                public_key: public_key.clone(),
                signature: String::new(),
            };
            tombstone.signature = sign_value(&tombstone.signed_part(), key);
            if !dry_run {
                tx.execute(
                    &format!("INSERT INTO tombstones ({TOMBSTONE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
                    params![
                        tombstone.schema_version,
                        tombstone.conversation_id,
                        tombstone.last_round_seq,
                        tombstone.last_event_seq,
                        tombstone.head_hash,
                        tombstone.rounds_removed,
                        tombstone.events_removed,
                        tombstone.removed_at,
                        tombstone.public_key,
                        tombstone.signature,
                    ],
                )?;
                tx.execute(
                    "DELETE FROM events WHERE conversation_id = ?1",
                    [&conversation],
                )?;
                tx.execute(
                    "DELETE FROM rounds WHERE conversation_id = ?1",
                    [&conversation],
                )?;
                tx.commit()?;
            }
            report.removed.push(tombstone);
        }
        Ok(report)
    }
}
