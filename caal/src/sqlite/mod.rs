//! Opening caal's SQLite files: each database names itself with an
//! `application_id`, carries its schema version in `user_version`, and is
//! brought up to date by numbered migrations embedded at build time.
//! Driver errors that mean "this is not our database" become messages that say so.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

mod error;

pub use error::StoreError;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}
pub(crate) use embedded::EVENT_SCHEMAS;

/// One kind of caal database.
pub(crate) struct DbSchema {
    pub application_id: i32,
    pub migrations: &'static [(u32, &'static str, &'static str)],
}

/// `traces.db`: rounds and events ("CAA1").
pub(crate) const TRACE: DbSchema = DbSchema {
    application_id: 0x4341_4131,
    migrations: embedded::TRACE_MIGRATIONS,
};
/// `state.db`: the assistant's mutable state ("CAS1").
pub(crate) const STATE: DbSchema = DbSchema {
    application_id: 0x4341_5331,
    migrations: embedded::STATE_MIGRATIONS,
};
/// `memory.db`: bucket memory ("CAM1").
pub(crate) const MEMORY: DbSchema = DbSchema {
    application_id: 0x4341_4D31,
    migrations: embedded::MEMORY_MIGRATIONS,
};

/// Switches a connection to WAL, or says why it cannot be.
pub(crate) fn enable_wal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        Err(StoreError::NoWal {
            path: path.to_owned(),
            mode,
        })
    }
}

pub(crate) fn open_connection(path: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let flags = flags | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    Connection::open_with_flags(path, flags).map_err(|e| classify(path, e))
}

/// Maps "this is not our database" driver errors to messages that say so.
pub(crate) fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => StoreError::NotADatabase {
            path: path.to_owned(),
        },
        Some(rusqlite::ErrorCode::CannotOpen) | Some(rusqlite::ErrorCode::PermissionDenied) => {
            StoreError::Open {
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string()),
            }
        }
        _ => StoreError::from(e),
    }
}

impl DbSchema {
    pub fn latest(&self) -> u32 {
        self.migrations
            .iter()
            .map(|(n, _, _)| *n)
            .max()
            .unwrap_or(0)
    }
}

/// Checks the file is this kind of caal database (or empty), of a schema this build reads.
pub(crate) fn check_identity(
    conn: &Connection,
    path: &Path,
    schema: &DbSchema,
    may_migrate: bool,
) -> Result<(), StoreError> {
    let app_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let supported = schema.latest();
    if app_id != schema.application_id && !(app_id == 0 && tables == 0) {
        let detail = if app_id == 0 {
            format!("{tables} schema objects, no caal application id")
        } else {
            format!("application_id {app_id:#x}")
        };
        return Err(StoreError::ForeignDatabase {
            path: path.to_owned(),
            detail,
        });
    }
    if version > supported {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found: version,
            supported,
        });
    }
    if version < supported && !may_migrate {
        return Err(StoreError::OlderSchema {
            path: path.to_owned(),
            found: version,
            supported,
        });
    }
    Ok(())
}

/// Applies, in order and each in its own transaction, the migrations newer
/// than the file's `user_version`.
pub(crate) fn migrate(conn: &Connection, schema: &DbSchema) -> Result<(), StoreError> {
    let current: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (number, name, sql) in schema.migrations.iter().filter(|(n, _, _)| *n > current) {
        let batch = format!(
            "BEGIN IMMEDIATE;\n{sql}\nPRAGMA application_id = {};\nPRAGMA user_version = {number};\nCOMMIT;",
            schema.application_id
        );
        if let Err(e) = conn.execute_batch(&batch) {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(StoreError::Migration {
                name: (*name).to_owned(),
                message: e.to_string(),
            });
        }
    }
    Ok(())
}
