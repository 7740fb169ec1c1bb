//! The round boundary: what a round changes in `state.db` (its
//! conversation's state, its pending confirmation, its undo records),
//! recorded in the round's terminal trace event, then applied in one
//! transaction that also moves the conversation's applied mark. A process
//! that stops between the two leaves changes the trace has and the state
//! lacks; [`StateDb::reconcile`] applies them on the next open, so the state
//! is always what the trace says: a pending confirmation exists exactly when
//! a round that ended asked for it and no later round resolved, expired or
//! replaced it.
//!
//! Named crash points (`fail` crate, as raft-engine's failpoints; armed with
//! `CAAL_FAILPOINTS="boundary.before_state=return"`) abort the process at each
//! step (`round.before_end`, `boundary.before_state`, `boundary.in_state`,
//! `boundary.after_state`), and the end-to-end tests restart after each.

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::{
    Pending,
    store::{UndoRecord, corrupt},
};
use crate::{
    ids::ConversationId,
    state::{StateDb, lock},
    trace::{SCHEMA_VERSION, StoreError, now_timestamp},
};

/// What a round changes, applied all at once when the round is durable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Boundary {
    /// The conversation's new state, when it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_out: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingChange>,
    /// Level-2 commands that ran, with their compensating commands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undo: Vec<UndoRecord>,
    /// The earlier command this round reversed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone: Option<Undone>,
}

/// The conversation's pending confirmation, set or cleared by this round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingChange {
    Set(Box<Pending>),
    Cleared,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Undone {
    pub call_id: String,
    pub at_ms: i64,
}

impl Boundary {
    pub fn is_empty(&self) -> bool {
        self == &Boundary::default()
    }

    /// What the terminal event records (nothing when nothing changes).
    pub fn to_json(&self) -> Option<serde_json::Value> {
        (!self.is_empty()).then(|| serde_json::to_value(self).expect("a boundary serialises"))
    }
}

/// Aborts the process at a named point when the point is armed (tests):
/// no destructor runs, so the trace sees a crashed session as after kill -9.
pub fn crash_point(name: &str) {
    fail::fail_point!(name, |_| {
        eprintln!("caal: crash point {name} reached; aborting");
        std::process::abort()
    });
}

/// Arms crash points from `CAAL_FAILPOINTS` (`name=return;name=off`): for
/// tests that kill the process at a step and check what a restart makes of it.
pub fn arm_crash_points(env: &dyn Fn(&str) -> Option<String>) {
    let Some(spec) = env("CAAL_FAILPOINTS") else {
        return;
    };
    for entry in spec.split(';').filter(|e| !e.trim().is_empty()) {
        if let Some((name, action)) = entry.split_once('=')
            && let Err(e) = fail::cfg(name.trim(), action.trim())
        {
            tracing::warn!("CAAL_FAILPOINTS: {name}: {e}");
        }
    }
}

impl StateDb {
    /// Applies one round's changes in one transaction, with the
    /// conversation's applied mark; what was cached is updated after commit.
    pub fn apply_boundary(
        &self,
        conversation: &ConversationId,
        round_seq: i64,
        b: &Boundary,
    ) -> Result<(), StoreError> {
        crash_point("boundary.before_state");
        self.transaction(|tx| {
            write(tx, conversation, round_seq, b)?;
            crash_point("boundary.in_state");
            Ok(())
        })?;
        if let Some(state) = &b.state_out {
            lock(&self.states).insert(conversation.to_string(), Some(state.clone()));
        }
        if let Some(change) = &b.pending {
            let pending = match change {
                PendingChange::Set(p) => Some(serde_json::to_string(p).map_err(corrupt)?),
                PendingChange::Cleared => None,
            };
            lock(&self.pendings).insert(conversation.to_string(), pending);
        }
        crash_point("boundary.after_state");
        Ok(())
    }

    /// The last round of `conversation` whose changes are applied.
    pub fn applied_round(&self, conversation: &str) -> Result<i64, StoreError> {
        self.with(|c| {
            c.prepare_cached("SELECT round_seq FROM round_boundaries WHERE conversation_id = ?1")?
                .query_row([conversation], |r| r.get(0))
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(0),
                    e => Err(e),
                })
        })
    }

    /// Applies the recorded changes (from the trace, in the order the rounds
    /// ended) that this database has not applied yet; returns how many.
    pub fn reconcile(&self, recorded: &[(String, i64, String)]) -> Result<usize, StoreError> {
        let mut applied = 0;
        for (conversation, round_seq, json) in recorded {
            if *round_seq <= self.applied_round(conversation)? {
                continue;
            }
            let conversation: ConversationId = conversation.parse()?;
            let b: Boundary = serde_json::from_str(json).map_err(|source| StoreError::Json {
                what: format!("the state changes recorded for round {round_seq} of {conversation}"),
                source,
            })?;
            self.apply_boundary(&conversation, *round_seq, &b)?;
            applied += 1;
        }
        Ok(applied)
    }
}

fn write(
    c: &Connection,
    conversation: &ConversationId,
    round_seq: i64,
    b: &Boundary,
) -> rusqlite::Result<()> {
    let conversation = conversation.as_str();
    let now = now_timestamp();
    if let Some(state) = &b.state_out {
        c.prepare_cached(
            "INSERT INTO conversations (conversation_id, schema_version, state, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (conversation_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
        )?
        .execute(params![conversation, SCHEMA_VERSION, state, now])?;
    }
    match &b.pending {
        None => {}
        Some(PendingChange::Cleared) => {
            c.prepare_cached("DELETE FROM pending_confirmations WHERE conversation_id = ?1")?
                .execute([conversation])?;
        }
        Some(PendingChange::Set(p)) => {
            let body = serde_json::to_string(p).map_err(corrupt)?;
            c.prepare_cached(
                "INSERT INTO pending_confirmations (conversation_id, schema_version, confirmation_id, body, expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (conversation_id) DO UPDATE SET confirmation_id = excluded.confirmation_id,
                   body = excluded.body, expires_at_ms = excluded.expires_at_ms",
            )?
            .execute(params![conversation, SCHEMA_VERSION, p.confirmation_id, body, p.expires_at_ms])?;
        }
    }
    for undo in &b.undo {
        c.prepare_cached(
            "INSERT INTO undo_records (schema_version, conversation_id, command_id, call_id, summary, undo_command,
               undo_params, executed_at_ms, expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            SCHEMA_VERSION,
            undo.conversation_id,
            undo.command_id,
            undo.call_id,
            undo.summary,
            undo.undo_command,
            serde_json::to_string(&undo.undo_params).map_err(corrupt)?,
            undo.executed_at_ms,
            undo.expires_at_ms,
        ])?;
    }
    if let Some(undone) = &b.undone {
        c.prepare_cached(
            "UPDATE undo_records SET undone_at_ms = ?3 WHERE call_id = ?1 AND conversation_id = ?2",
        )?
        .execute(params![undone.call_id, conversation, undone.at_ms])?;
    }
    c.prepare_cached(
        "INSERT INTO round_boundaries (conversation_id, schema_version, round_seq, applied_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (conversation_id) DO UPDATE SET round_seq = excluded.round_seq, applied_at = excluded.applied_at",
    )?
    .execute(params![conversation, SCHEMA_VERSION, round_seq, now])?;
    Ok(())
}
