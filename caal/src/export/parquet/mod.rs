//! The trace as Parquet (`caal trace export --format parquet --out DIR`),
//! for the engines fleets already run (DuckDB, ClickHouse, Spark, Trino):
//! a `rounds` and an `events` table (`tables`), partitioned Hive-style by
//! home and by the round's UTC day:
//!
//! ```text
//! DIR/rounds/library_id=<id>/day=YYYY-MM-DD/part-00000.parquet
//! DIR/events/library_id=<id>/day=YYYY-MM-DD/part-00000.parquet
//! ```
//!
//! A round's events sit in its own partition (by the round's day), so a
//! partition joins to itself. Rows stream: batches of `Options::batch_rows`
//! go through a channel of a few slots to Parquet's writer on a thread of
//! its own (`files`), which flushes a row group as it fills, and at
//! most `Options::open_partitions` partitions are open at once (the least
//! recently used is closed, a later round of it starts the next part), so
//! memory stays flat however large the trace. Every file is written under a
//! hidden temporary name in its partition, fsynced, and renamed only once
//! the whole export has succeeded; then files of an earlier export of the
//! same kind in those partitions are removed, so exporting again replaces.
//! Payloads are as stored: already scrubbed of secrets.

mod files;
pub mod tables;

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    fs::{self, File},
    io,
    path::{Path, PathBuf},
    sync::mpsc::SyncSender,
    thread::JoinHandle,
};

use sha2::{Digest, Sha256};

use crate::ids::ConversationId;
use crate::trace::{EventRecord, ExportStats, RoundRecord, StoreError, TraceReader};
use files::{FilesDone, ToFiles};
use tables::{EventRows, RoundRows};

/// The schema document's id, written into every file's metadata.
pub const SCHEMA_ID: &str = "caal:export/parquet/v1";

/// What went wrong, and how to put it right.
#[derive(Debug, thiserror::Error)]
pub enum ParquetExportError {
    #[error(
        "{} is a file; --out takes a directory (created if missing): remove the file or choose another path",
        path.display()
    )]
    OutIsFile { path: PathBuf },
    #[error(
        "cannot create the directory {}: {source}; choose a path you can write to, or create it first",
        path.display()
    )]
    OutNotCreatable { path: PathBuf, source: io::Error },
    #[error(
        "cannot write in {}: {source}; make it writable (chmod u+w) or choose another --out",
        path.display()
    )]
    OutNotWritable { path: PathBuf, source: io::Error },
    #[error("writing {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("encoding {}: {source}", path.display())]
    Encode {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    #[error(
        "round {round_id}: {what} {value:?} is not an RFC 3339 time; `caal trace verify` checks the store"
    )]
    BadTime {
        round_id: String,
        what: &'static str,
        value: String,
    },
    #[error("the thread writing the Parquet files stopped unexpectedly; run the export again")]
    FilesStopped,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How the export batches and bounds its memory.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Rows gathered before they go to Parquet's writer.
    pub batch_rows: usize,
    /// Rows in a row group (fewer if it reaches `row_group_bytes` first).
    pub row_group_rows: usize,
    pub row_group_bytes: usize,
    /// Partitions open at once.
    pub open_partitions: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            batch_rows: 8192,
            row_group_rows: 128 * 1024,
            row_group_bytes: 32 << 20,
            open_partitions: 8,
        }
    }
}

/// What an export wrote.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ParquetStats {
    pub rounds: u64,
    pub events: u64,
    /// Files written (rounds and events).
    pub files: usize,
    /// Distinct (library_id, day) partitions.
    pub partitions: usize,
    /// Files of an earlier export of the same kind removed from those partitions.
    pub replaced: usize,
}

/// Writes every round (of one conversation, or all) and its events under
/// `out` as partitioned Parquet. `progress` gets the events read so far.
pub fn export(
    reader: &TraceReader,
    conversation: Option<&ConversationId>,
    out: &Path,
    options: Options,
    progress: &mut dyn FnMut(u64),
) -> Result<ParquetStats, ParquetExportError> {
    prepare_out_dir(out)?;
    let mut sink = PartitionedSink::new(out, file_prefix(conversation), options)?;
    let mut failed: Option<ParquetExportError> = None;
    let read = reader.each_round(conversation, progress, &mut |round, events| {
        sink.push(round, events).map_err(|e| {
            failed = Some(e);
            // Stops the read; the writer's own error is returned below.
            StoreError::Io {
                what: "the Parquet export stopped".into(),
                source: io::Error::other("writing failed"),
            }
        })
    });
    let stats = match (read, failed) {
        (_, Some(e)) => return Err(sink.abandon(e)),
        (Err(e), None) => return Err(sink.abandon(e.into())),
        (Ok(stats), None) => stats,
    };
    sink.finish(stats)
}

/// Checks `--out` before anything is read: a directory (made if missing)
/// this process can write in.
pub fn prepare_out_dir(out: &Path) -> Result<(), ParquetExportError> {
    if out.exists() && !out.is_dir() {
        return Err(ParquetExportError::OutIsFile {
            path: out.to_owned(),
        });
    }
    fs::create_dir_all(out).map_err(|source| ParquetExportError::OutNotCreatable {
        path: out.to_owned(),
        source,
    })?;
    // Permission bits do not say it all (read-only mounts, ACLs, root):
    // only a file actually made there does.
    let probe = out.join(format!(".caal-write-probe-{}", std::process::id()));
    File::create(&probe)
        .and_then(|_| fs::remove_file(&probe))
        .map_err(|source| ParquetExportError::OutNotWritable {
            path: out.to_owned(),
            source,
        })
}

/// File names start with `part` for a whole export and with
/// `part-conv-<12 hex of the conversation id's SHA-256>` for one
/// conversation's, so neither replaces the other's files.
fn file_prefix(conversation: Option<&ConversationId>) -> String {
    match conversation {
        None => "part".into(),
        Some(c) => {
            let digest = Sha256::digest(c.as_str().as_bytes());
            let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
            format!("part-conv-{hex}")
        }
    }
}

/// A home's day.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PartitionKey {
    library_id: String,
    /// Days since 1970-01-01, UTC.
    day: i64,
}

impl PartitionKey {
    /// `library_id=…/day=YYYY-MM-DD`, the id percent-encoded beyond
    /// `[A-Za-z0-9._-]` (Hive's escaping; a UUID needs none).
    fn dir(&self) -> PathBuf {
        let mut id = String::with_capacity(self.library_id.len());
        for b in self.library_id.bytes() {
            if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
                id.push(char::from(b));
            } else {
                id.push_str(&format!("%{b:02X}"));
            }
        }
        let date = jiff::Timestamp::from_second(self.day * 86_400)
            .map(|t| t.strftime("%Y-%m-%d").to_string())
            .unwrap_or_else(|_| format!("{}", self.day));
        PathBuf::from(format!("library_id={id}")).join(format!("day={date}"))
    }
}

/// A partition's two files (by number, on the files' side) and the rows
/// not yet handed to them.
struct OpenPartition {
    key: PartitionKey,
    last_used: u64,
    rounds: usize,
    round_rows: RoundRows,
    events: usize,
    event_rows: EventRows,
}

/// The partitions being written; the files themselves are on `files`' thread.
struct PartitionedSink {
    root: PathBuf,
    prefix: String,
    options: Options,
    open: Vec<OpenPartition>,
    /// The next part number of each partition this export touched.
    parts: HashMap<PartitionKey, u32>,
    to_files: SyncSender<ToFiles>,
    files: JoinHandle<FilesDone>,
    next_file: usize,
    clock: u64,
}

impl PartitionedSink {
    fn new(root: &Path, prefix: String, options: Options) -> Result<Self, ParquetExportError> {
        let (to_files, files) = files::start(options)?;
        Ok(Self {
            root: root.to_owned(),
            prefix,
            options,
            open: Vec::new(),
            parts: HashMap::new(),
            to_files,
            files,
            next_file: 0,
            clock: 0,
        })
    }

    /// Hands a message to the files' side; if that side stopped (a file
    /// failed), its own error is what `finish` or `abandon` return.
    fn send(&self, message: ToFiles) -> Result<(), ParquetExportError> {
        self.to_files
            .send(message)
            .map_err(|_| ParquetExportError::FilesStopped)
    }

    fn push(
        &mut self,
        round: &RoundRecord,
        events: &[EventRecord],
    ) -> Result<(), ParquetExportError> {
        let bad_time = |what, value: &str| ParquetExportError::BadTime {
            round_id: round.round_id.clone(),
            what,
            value: value.to_owned(),
        };
        let (created_at, _) = tables::micros(&round.created_at)
            .ok_or_else(|| bad_time("created_at", &round.created_at))?;
        let key = PartitionKey {
            library_id: round.library_id.clone(),
            day: created_at.div_euclid(86_400_000_000),
        };
        let at = self.partition(key)?;
        let p = &mut self.open[at];
        p.round_rows.push(round, created_at, events);
        for e in events {
            p.event_rows
                .push(&round.library_id, e)
                .ok_or_else(|| bad_time("an event's timestamp", &e.timestamp))?;
        }
        self.hand_over(at, false)
    }

    /// Sends the rows of the partition at `at` to its files: those of a
    /// table that reached a batch, or (`all`) whatever there is.
    fn hand_over(&mut self, at: usize, all: bool) -> Result<(), ParquetExportError> {
        let batch = self.options.batch_rows.max(1);
        let p = &mut self.open[at];
        let mut ready = Vec::new();
        if p.event_rows.len() >= batch || (all && !p.event_rows.is_empty()) {
            ready.push((p.events, p.event_rows.take()));
        }
        if p.round_rows.len() >= batch || (all && !p.round_rows.is_empty()) {
            ready.push((p.rounds, p.round_rows.take()));
        }
        for (file, rows) in ready {
            let batch = rows.map_err(|e| ParquetExportError::Encode {
                path: self.root.clone(),
                source: e.into(),
            })?;
            self.send(ToFiles::Rows { file, batch })?;
        }
        Ok(())
    }

    /// The index in `open` of `key`'s partition, opened (and the least
    /// recently used one closed) if need be.
    fn partition(&mut self, key: PartitionKey) -> Result<usize, ParquetExportError> {
        self.clock += 1;
        if let Some(at) = self.open.iter().position(|p| p.key == key) {
            self.open[at].last_used = self.clock;
            return Ok(at);
        }
        if self.open.len() >= self.options.open_partitions.max(1)
            && let Some(oldest) = (0..self.open.len()).min_by_key(|&i| self.open[i].last_used)
        {
            self.close(oldest)?;
        }
        let part = self.parts.entry(key.clone()).or_insert(0);
        let name = format!("{}-{:05}.parquet", self.prefix, part);
        *part += 1;
        let dir = key.dir();
        let (rounds, events) = (self.next_file, self.next_file + 1);
        self.next_file += 2;
        for (file, table, schema) in [
            (rounds, "rounds", tables::rounds_schema()),
            (events, "events", tables::events_schema()),
        ] {
            let path = self.root.join(table).join(&dir).join(&name);
            self.send(ToFiles::Open { file, path, schema })?;
        }
        self.open.push(OpenPartition {
            key,
            last_used: self.clock,
            rounds,
            round_rows: RoundRows::new(),
            events,
            event_rows: EventRows::new(),
        });
        Ok(self.open.len() - 1)
    }

    /// Hands over the partition's last rows and closes its files.
    fn close(&mut self, at: usize) -> Result<(), ParquetExportError> {
        self.hand_over(at, true)?;
        let p = self.open.swap_remove(at);
        self.send(ToFiles::Close { file: p.rounds })?;
        self.send(ToFiles::Close { file: p.events })
    }

    /// Closes every file, renames them all into place, and removes what an
    /// earlier export of the same kind left in those partitions.
    fn finish(mut self, read: ExportStats) -> Result<ParquetStats, ParquetExportError> {
        while !self.open.is_empty() {
            if let Err(e) = self.close(self.open.len() - 1) {
                return Err(self.abandon(e));
            }
        }
        let partitions = self.parts.len();
        let prefix = self.prefix.clone();
        let mut done = self.join();
        if let Some(e) = done.error.take() {
            remove_all(&done);
            return Err(e);
        }
        let io = |path: &Path, source| ParquetExportError::Io {
            path: path.to_owned(),
            source,
        };
        for (tmp, path) in &done.closed {
            fs::rename(tmp, path).map_err(|e| io(path, e))?;
        }
        let written: HashSet<&Path> = done.closed.iter().map(|(_, p)| p.as_path()).collect();
        let dirs: BTreeSet<&Path> = written.iter().filter_map(|p| p.parent()).collect();
        let mut replaced = 0;
        for dir in dirs {
            replaced += remove_stale(dir, &prefix, &written)?;
            // The renames are durable once their directory is.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io(dir, e))?;
        }
        Ok(ParquetStats {
            rounds: read.rounds,
            events: read.events,
            files: done.closed.len(),
            partitions,
            replaced,
        })
    }

    /// Hangs up on the files' side and waits for what it leaves.
    fn join(self) -> FilesDone {
        let Self {
            to_files, files, ..
        } = self;
        drop(to_files);
        files.join().unwrap_or_else(|_| FilesDone {
            error: Some(ParquetExportError::FilesStopped),
            ..FilesDone::default()
        })
    }

    /// Stops, removes every temporary file (nothing was renamed yet), and
    /// returns the files' side's error if it had one, else `error`.
    fn abandon(self, error: ParquetExportError) -> ParquetExportError {
        let done = self.join();
        remove_all(&done);
        done.error.unwrap_or(error)
    }
}

fn remove_all(done: &FilesDone) {
    for tmp in done.closed.iter().map(|(t, _)| t).chain(&done.still_open) {
        let _ = fs::remove_file(tmp);
    }
}

/// Removes `{prefix}-NNNNN.parquet` files in `dir` this export did not write.
fn remove_stale(
    dir: &Path,
    prefix: &str,
    written: &HashSet<&Path>,
) -> Result<usize, ParquetExportError> {
    let io = |source| ParquetExportError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut removed = 0;
    for entry in fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let ours = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.strip_prefix('-'))
            .and_then(|n| n.strip_suffix(".parquet"))
            .is_some_and(|n| n.len() == 5 && n.bytes().all(|b| b.is_ascii_digit()));
        if ours && !written.contains(path.as_path()) {
            fs::remove_file(&path).map_err(io)?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests;
