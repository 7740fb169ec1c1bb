//! CAAL, the thinking router: every utterance becomes a round that is
//! routed, gated, executed and answered, and every step of it is recorded as
//! an ordered, append-only, hash-chained event.
//!
//! The binary (`cli/`) only parses, wires these parts and prints.

pub mod auth;
pub mod command;
pub mod config;
pub mod crypto;
pub mod export;
#[doc(hidden)]
pub mod fuzz;
pub mod ids;
pub mod llm;
pub mod memory;
pub mod reasoning;
pub mod retry;
pub mod round;
pub mod router;
pub mod safety;
pub mod schedule;
pub mod server;
mod sqlite;
pub mod state;
pub mod stats;
#[cfg(test)]
pub(crate) mod testing;
pub mod tls;
pub mod tools;
pub mod trace;
pub mod understand;
pub mod voice;
