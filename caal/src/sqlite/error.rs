//! The storage layer's error type (trace, state and memory databases).
//! Driver errors keep their `rusqlite::Error` as their source (`Db`); every
//! message says what is wrong and how to fix it.

use std::{io, path::PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unknown event type {name:?}; known types: {known}")]
    UnknownEventType { name: String, known: String },

    /// A search that cannot be made (no words, a type not searched).
    #[error("search: {0}")]
    Search(String),

    #[error("event {event_type} refused: payload field `{field}`: {problem}; nothing was stored")]
    InvalidPayload {
        event_type: &'static str,
        field: String,
        problem: String,
    },

    #[error("{} is not a SQLite database (damaged, or another kind of file); move it away and caal starts a fresh store there", path.display())]
    NotADatabase { path: PathBuf },

    #[error("{} is a database of another program ({detail}); point --data-dir (or CAAL_DATA_DIR) at a caal data dir", path.display())]
    ForeignDatabase { path: PathBuf, detail: String },

    #[error("{} was written by a newer caal (schema {found}; this build knows up to {supported}); upgrade caal to read it", path.display())]
    NewerSchema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error("{} is from an older caal (schema {found}; this build needs {supported}); run any writing command (`caal say`) once to migrate it", path.display())]
    OlderSchema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error("no trace store at {}; run `caal say \"hello\"` to create one, or point --data-dir at an existing data dir", path.display())]
    Missing { path: PathBuf },

    #[error("the trace store {} is open for writing by another caal process{holder}; send rounds through that process (its API) or stop it first", path.display())]
    Locked { path: PathBuf, holder: String },

    #[error("cannot open {}: {source}; check that the path exists and is readable and writable", path.display())]
    Open { path: PathBuf, source: io::Error },

    #[error("migration {name} failed: {message}; the store was left at its previous schema")]
    Migration { name: String, message: String },

    #[error(
        "conversation {conversation} still has round {round_seq} open after {waited_s} s; wait for it to finish"
    )]
    RoundBusy {
        conversation: String,
        round_seq: i64,
        waited_s: u64,
    },

    #[error(
        "the trace store stopped accepting writes after a failed commit ({reason}); restart caal, which recovers open rounds"
    )]
    Poisoned { reason: String },

    #[error("the trace store's writer has stopped; restart caal")]
    WriterGone,

    #[error("{} could not be switched to WAL (journal_mode is {mode}); keep the data dir on a local file system", path.display())]
    NoWal { path: PathBuf, mode: String },

    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },

    #[error(
        "{what}: not JSON this build reads ({source}); run `caal trace verify` to see whether the store was changed"
    )]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },

    #[error("the database holds an id that cannot be: {0}; run `caal trace verify`")]
    Id(#[from] crate::ids::InvalidId),

    #[error("{what}; run `caal trace verify` to see whether the store was changed")]
    Inconsistent { what: String },

    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
}
