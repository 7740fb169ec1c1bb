//! Pending confirmations and undo records, kept in `state.db` so they
//! survive a restart. One pending confirmation per conversation.

use std::collections::BTreeMap;

use rusqlite::OptionalExtension;

use super::Pending;
use crate::{
    ids::ConversationId,
    state::{StateDb, lock},
    trace::StoreError,
};

pub(crate) fn corrupt(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
}

impl StateDb {
    pub fn pending(&self, conversation: &ConversationId) -> Result<Option<Pending>, StoreError> {
        let cached = lock(&self.pendings).get(conversation.as_str()).cloned();
        let body = match cached {
            Some(body) => body,
            None => {
                let body = self.read_pending(conversation)?;
                lock(&self.pendings).insert(conversation.to_string(), body.clone());
                body
            }
        };
        Ok(body
            .map(|b| serde_json::from_str(&b).map_err(corrupt))
            .transpose()?)
    }

    fn read_pending(&self, conversation: &ConversationId) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            c.prepare_cached("SELECT body FROM pending_confirmations WHERE conversation_id = ?1")?
                .query_row([conversation.as_str()], |r| r.get(0))
                .optional()
        })
    }

    /// Pending confirmations, of one conversation or all, oldest first.
    pub fn pendings(
        &self,
        conversation: Option<&ConversationId>,
    ) -> Result<Vec<(String, Pending)>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT conversation_id, body FROM pending_confirmations
                 WHERE ?1 IS NULL OR conversation_id = ?1 ORDER BY expires_at_ms",
            )?;
            let rows = stmt.query_map([conversation.map(|c| c.as_str())], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?;
            rows.map(|row| {
                let (conversation, body) = row?;
                Ok((conversation, serde_json::from_str(&body).map_err(corrupt)?))
            })
            .collect()
        })
    }

    /// The conversation's most recent level-2 command not undone yet, whatever its age.
    pub fn last_undoable(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<UndoRecord>, StoreError> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT id, conversation_id, command_id, call_id, summary, undo_command, undo_params, executed_at_ms, expires_at_ms
                 FROM undo_records WHERE conversation_id = ?1 AND undone_at_ms IS NULL ORDER BY id DESC LIMIT 1",
            )?
            .query_row([conversation.as_str()], |r| {
                let params: String = r.get(6)?;
                Ok(UndoRecord {
                    id: r.get(0)?,
                    conversation_id: r.get(1)?,
                    command_id: r.get(2)?,
                    call_id: r.get(3)?,
                    summary: r.get(4)?,
                    undo_command: r.get(5)?,
                    undo_params: serde_json::from_str(&params).map_err(corrupt)?,
                    executed_at_ms: r.get(7)?,
                    expires_at_ms: r.get(8)?,
                })
            })
            .optional()
        })
    }
}

/// A level-2 command that ran, and how to reverse it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UndoRecord {
    /// Its row in `state.db` (0 until it is stored; not part of the trace).
    #[serde(skip)]
    pub id: i64,
    pub conversation_id: String,
    pub command_id: String,
    pub call_id: String,
    pub summary: String,
    pub undo_command: String,
    pub undo_params: BTreeMap<String, String>,
    pub executed_at_ms: i64,
    pub expires_at_ms: i64,
}
