//! `caal trace`: list, show, export, verify and prune recorded rounds.

use std::{
    fs,
    io::{self, BufWriter},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use caal::{
    config::Config,
    ids::ConversationId,
    trace::{DB_FILE, TraceReader},
};
use clap::Subcommand;

use crate::{
    Outcome,
    engine::{Start, open_engine, parse_conversation},
    output,
};

#[derive(Subcommand)]
pub enum TraceCommand {
    /// List recent rounds, newest last.
    List {
        /// The conversation (its id).
        #[arg(long)]
        conversation: Option<String>,
        /// How many of the newest rounds.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Search what was said, answered and decided (every word of QUERY,
    /// any case), newest first; the words found are shown in […].
    Search {
        /// Words to find.
        query: String,
        /// The conversation (its id).
        #[arg(long)]
        conversation: Option<String>,
        /// Only input.received (said), output.emitted (answered) or route.selected (decided).
        #[arg(long = "type")]
        event_type: Option<String>,
        /// What happened on or after this date (YYYY-MM-DD, or an RFC 3339 time).
        #[arg(long)]
        since: Option<String>,
        /// At most this many hits.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show one round and its events.
    Show {
        /// The round (`caal trace list` shows them).
        round_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write rounds and events as JSONL (a round line, then its events), as
    /// OpenTelemetry traces (OTLP/JSON, a round a line), or as Parquet tables
    /// (`rounds` and `events`, by home and day) in a directory.
    Export {
        /// The conversation (its id).
        #[arg(long)]
        conversation: Option<String>,
        /// `jsonl`: CAAL's own lines, chained and verifiable. `otlp`: a round
        /// a trace, model and tool calls as spans (GenAI semantic
        /// conventions), every event a span event with its hash. `parquet`:
        /// `rounds/` and `events/` tables under --out, partitioned
        /// `library_id=…/day=YYYY-MM-DD/` (schemas/parquet.v1.json).
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Write here instead of standard output (written whole, then renamed
        /// into place); for parquet, the directory (required; made if missing;
        /// an earlier export's files in the partitions written are replaced).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Remove whole conversations whose last round is older than N days,
    /// each behind a signed tombstone (what remains still verifies).
    Prune {
        /// Only what is older than this many days.
        #[arg(long)]
        older_than_days: u64,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Recompute every hash chain; exit 1 naming the first broken link.
    Verify {
        /// The conversation (its id).
        #[arg(long)]
        conversation: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(
    data_dir: &Path,
    load_config: &dyn Fn() -> Result<Config>,
    command: TraceCommand,
) -> Result<Outcome> {
    if let TraceCommand::Prune { .. } = command {
        // Pruning writes: it opens the engine, not a reader.
        return prune(data_dir, load_config, command);
    }
    let reader = TraceReader::open(&data_dir.join(DB_FILE))?;
    let conversation_filter = |c: Option<String>| c.as_deref().map(parse_conversation).transpose();
    match command {
        TraceCommand::Prune { .. } => unreachable!("handled above"),
        TraceCommand::List {
            conversation,
            limit,
            json,
        } => {
            let rounds = reader.rounds(conversation_filter(conversation)?.as_ref(), limit)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rounds)?);
            } else {
                output::print_round_list(&rounds);
            }
        }
        TraceCommand::Search {
            query,
            conversation,
            event_type,
            since,
            limit,
            json,
        } => {
            let (conversation, since) = crate::export::narrowed(conversation, since)?;
            let hits = reader.search(
                &query,
                &caal::trace::SearchFilter {
                    conversation: conversation.as_ref(),
                    event_type: event_type.as_deref(),
                    since,
                    limit: limit.max(1),
                },
            )?;
            if json {
                println!("{}", serde_json::to_string(&hits)?);
            } else if hits.is_empty() {
                println!("nothing in the trace holds those words");
            } else {
                for h in &hits {
                    println!(
                        "{}  {} #{}  {:<15} {}  {}",
                        output::seconds(&h.timestamp),
                        h.conversation_id,
                        h.round_seq,
                        h.event_type,
                        h.round_id,
                        h.snippet
                    );
                }
            }
        }
        TraceCommand::Show { round_id, json } => {
            let Some((round, events)) = reader.round(&round_id)? else {
                bail!(
                    "no round {round_id:?} in {}; list rounds with `caal trace list`",
                    reader.path().display()
                );
            };
            // What people said of this round, recorded in later rounds.
            let feedback = reader.feedback_on(&round_id)?;
            if json {
                let lines = |events: &[caal::trace::EventRecord]| {
                    events
                        .iter()
                        .map(|e| serde_json::from_str(&e.to_json_line()))
                        .collect::<Result<Vec<serde_json::Value>, _>>()
                };
                let doc = serde_json::json!({"round": round, "events": lines(&events)?,
                    "feedback": lines(&feedback)?});
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                output::print_round(&round, &events);
                output::print_feedback(&feedback);
            }
        }
        TraceCommand::Export {
            conversation,
            format,
            out,
        } => {
            let conversation = conversation_filter(conversation)?;
            export(&reader, conversation.as_ref(), format, out.as_deref())?;
        }
        TraceCommand::Verify { conversation, json } => {
            let report = reader.verify(conversation_filter(conversation)?.as_ref())?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                output::print_verify(&report);
            }
            if !report.ok {
                return Ok(Outcome::Broken);
            }
        }
    }
    Ok(Outcome::Done)
}

/// `caal trace prune`.
fn prune(
    data_dir: &Path,
    load_config: &dyn Fn() -> Result<Config>,
    command: TraceCommand,
) -> Result<Outcome> {
    match command {
        TraceCommand::Prune {
            older_than_days,
            dry_run,
            json,
        } => {
            let engine = open_engine(data_dir, load_config()?, Start::Lazy)?;
            let cutoff = caal::trace::cutoff_days_ago(older_than_days);
            let report = engine
                .store()
                .prune(&cutoff, engine.receipt_key(), dry_run)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                for t in &report.removed {
                    println!(
                        "{} conversation {}: {} rounds, {} events; tombstone head {} (round_seq {})",
                        if dry_run { "would remove" } else { "removed" },
                        t.conversation_id,
                        t.rounds_removed,
                        t.events_removed,
                        t.head_hash,
                        t.last_round_seq
                    );
                }
                for c in &report.skipped_open {
                    println!("left conversation {c}: a round of it is still open");
                }
                if report.removed.is_empty() {
                    println!("no conversation's last round is before {cutoff}");
                }
            }
        }
        _ => unreachable!("only prune comes here"),
    }
    Ok(Outcome::Done)
}

/// What `caal trace export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Otlp,
    Parquet,
}

fn export(
    reader: &TraceReader,
    conversation: Option<&ConversationId>,
    format: ExportFormat,
    out: Option<&Path>,
) -> Result<()> {
    if format == ExportFormat::Parquet {
        let Some(dir) = out else {
            bail!("--format parquet writes a directory of files; add --out DIR");
        };
        return export_parquet(reader, conversation, dir);
    }
    let write = |sink: &mut dyn io::Write, progress: &mut dyn FnMut(u64)| match format {
        ExportFormat::Jsonl => reader.export(conversation, sink, progress),
        ExportFormat::Otlp => caal::export::otlp::export(reader, conversation, sink, progress),
        ExportFormat::Parquet => unreachable!("written above"),
    };
    let total = reader.count_events(conversation)?;
    let bar = output::progress_bar(total, "exporting");
    let mut progress = |done: u64| bar.set_position(done);
    match out {
        None => {
            let stdout = io::stdout();
            let mut sink = BufWriter::with_capacity(1 << 16, stdout.lock());
            write(&mut sink, &mut progress)?;
        }
        Some(path) => {
            // Written beside the target and renamed: a reader never sees half an export.
            let tmp = path.with_extension("jsonl.partial");
            let file = fs::File::create(&tmp)
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            let mut sink = BufWriter::with_capacity(1 << 16, file);
            let stats = write(&mut sink, &mut progress)?;
            sink.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            fs::rename(&tmp, path)
                .with_context(|| format!("cannot move the export into {}", path.display()))?;
            bar.finish_and_clear();
            eprintln!(
                "exported {} rounds, {} events to {}",
                stats.rounds,
                stats.events,
                path.display()
            );
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// `caal trace export --format parquet --out DIR` (see `caal::export::parquet`).
fn export_parquet(
    reader: &TraceReader,
    conversation: Option<&ConversationId>,
    dir: &Path,
) -> Result<()> {
    // The directory is checked before the trace is read: a bad --out fails at once.
    caal::export::parquet::prepare_out_dir(dir)?;
    let total = reader.count_events(conversation)?;
    let bar = output::progress_bar(total, "exporting");
    let mut progress = |done: u64| bar.set_position(done);
    let stats = caal::export::parquet::export(
        reader,
        conversation,
        dir,
        caal::export::parquet::Options::default(),
        &mut progress,
    )?;
    bar.finish_and_clear();
    eprintln!(
        "exported {} rounds, {} events to {}: {} files in {} partitions (rounds/ and events/, by library_id and day){}",
        stats.rounds,
        stats.events,
        dir.display(),
        stats.files,
        stats.partitions,
        match stats.replaced {
            0 => String::new(),
            n => format!("; {n} files of an earlier export replaced"),
        }
    );
    Ok(())
}
