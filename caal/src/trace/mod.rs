//! The trace store: round headers and their ordered, append-only,
//! hash-chained events in SQLite, with the taxonomy that checks every
//! payload, export to JSONL, and chain verification.
//!
//! Write through [`TraceStore`] (one writer per database, group commit);
//! read through [`TraceReader`] (any number, beside the writer).

pub mod chain;
pub mod events;
mod reader;
mod retention;
mod shipping;
mod store;
pub mod taxonomy;
mod verify;

#[cfg(test)]
mod events_tests;
#[cfg(test)]
mod tests;

pub use crate::sqlite::StoreError;
pub use chain::EventRecord;
pub use reader::{
    ConversationSummary, ExportStats, RoundRecord, RoundSummary, RoutingInput, SEARCHED,
    SearchFilter, SearchHit, TraceReader,
};
pub use retention::{PruneReport, Tombstone, cutoff_days_ago};
pub use shipping::{QueuedRound, ShipQueue, ShipStatus};
pub use store::{
    Durability, Durable, EventDraft, EventStatus, OpenRound, RoundHeader, RoundSpec, TraceStore,
    bare_connection, now_timestamp,
};
pub use taxonomy::{EventType, Payload, SCHEMA_VERSION};
pub use verify::{BrokenLink, Problem, VerifyReport};

/// The trace database's file name inside a data dir.
pub const DB_FILE: &str = "traces.db";
