//! `caal bench parquet`: `caal trace export --format parquet` as a whole
//! process over a synthetic trace (command rounds of 10 events, as `caal
//! bench trace` writes them, over 64 conversations), at a quarter of the
//! rounds asked for and at all of them: rounds a minute, and peak resident
//! memory, which streaming keeps flat. Then, if the clients' venv has DuckDB
//! (`bash .ci/setup`), the operator's first question (rounds per home per
//! day) over the larger export, timed.
//!
//! The trace is built by a child process too (this binary with the hidden
//! `--build-trace`): a child's peak (`wait4`) counts its parent's, so the
//! parent stays small throughout.

use std::{
    collections::VecDeque,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, Result};
use caal::{
    ids::{ConversationId, LibraryId},
    trace::{DB_FILE, Durability, Durable, TraceStore},
};
use serde::Serialize;

use super::median;
use super::trace::{command_round_events, spec};

/// The export at one size.
#[derive(Clone, Debug, Serialize)]
pub struct ExportRuns {
    pub rounds: u64,
    pub build_seconds: f64,
    pub seconds: Vec<f64>,
    pub rounds_per_min_median: f64,
    pub peak_rss_mb: Vec<f64>,
    pub export_mb: f64,
}

/// DuckDB's time for rounds per home per day over the larger export, and
/// each of the operator's queries in docs/fleet.md in the engine it names.
#[derive(Clone, Debug, Serialize)]
pub struct DuckdbQuery {
    pub rounds_counted: u64,
    pub groups: u64,
    pub seconds: Vec<f64>,
    pub median_seconds: f64,
    /// Engine ("duckdb", "chdb") → the query's name → median seconds.
    pub doc_queries: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ParquetBenchReport {
    pub sizes: Vec<ExportRuns>,
    pub duckdb: Option<DuckdbQuery>,
    /// Why there is no DuckDB figure.
    pub duckdb_skipped: Option<String>,
}

const CONVERSATIONS: usize = 64;

/// Appends `rounds` command rounds to a fresh store in `data_dir` (the
/// hidden `--build-trace`, run as a child of the benchmark).
pub fn build_trace(data_dir: &Path, rounds: u64) -> Result<()> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let library = LibraryId::load_or_create(data_dir, Some("bench-home"))?;
    let store = TraceStore::open(&data_dir.join(DB_FILE), library, Durability::Normal)?;
    let conversations: Vec<ConversationId> = (0..CONVERSATIONS)
        .map(|i| format!("bench-{i}").parse())
        .collect::<Result<_, _>>()?;
    // One round in flight per conversation, as the trace benchmark keeps them.
    let mut pending: VecDeque<Durable> = VecDeque::new();
    for n in 0..usize::try_from(rounds)? {
        if pending.len() >= CONVERSATIONS
            && let Some(previous) = pending.pop_front()
        {
            previous.wait()?;
        }
        let round = store.begin_round(spec(&conversations[n % CONVERSATIONS]))?;
        for draft in command_round_events(n) {
            round.append(draft)?;
        }
        pending.push_back(round.complete_nowait("default")?);
    }
    pending.into_iter().try_for_each(Durable::wait)?;
    Ok(())
}

/// Everything, in `dir`: the two traces, their exports, the query.
pub fn run(dir: &Path, rounds: u64, runs: usize) -> Result<ParquetBenchReport> {
    let exe = std::env::current_exe().context("cannot find this binary to run it")?;
    let mut sizes = Vec::new();
    for size in [(rounds / 4).max(1), rounds.max(1)] {
        let data = dir.join(format!("trace-{size}"));
        let mut build = Command::new(&exe);
        build.args([
            "bench",
            "parquet",
            "--rounds",
            &size.to_string(),
            "--build-trace",
        ]);
        build.arg(&data);
        let (build_seconds, _) = super::measured(build)?;
        let out = dir.join(format!("export-{size}"));
        let (mut seconds, mut peak_rss_mb) = (Vec::new(), Vec::new());
        for _ in 0..runs.max(1) {
            let mut export = Command::new(&exe);
            export.arg("--data-dir").arg(&data);
            export.args(["trace", "export", "--format", "parquet", "--out"]);
            export.arg(&out);
            let (s, rss) = super::measured(export)?;
            seconds.push(s);
            peak_rss_mb.push(rss);
        }
        let median = median(&seconds);
        sizes.push(ExportRuns {
            rounds: size,
            build_seconds,
            rounds_per_min_median: size as f64 / median * 60.0,
            seconds,
            peak_rss_mb,
            export_mb: bytes_under(&out) as f64 / 1e6,
        });
        // The smaller trace and export are done with; the larger is queried.
        if size != rounds.max(1) {
            let _ = std::fs::remove_dir_all(&data);
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    let export = dir.join(format!("export-{}", rounds.max(1)));
    let (duckdb, duckdb_skipped) = match duckdb_query(&export, runs.max(1)) {
        Ok(q) => (Some(q), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    Ok(ParquetBenchReport {
        sizes,
        duckdb,
        duckdb_skipped,
    })
}

fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// The clients' venv's Python, where `.ci/setup` puts it.
fn clients_python() -> Option<PathBuf> {
    let caal = match std::env::var_os("CAAL_MODELS_DIR") {
        Some(models) => PathBuf::from(models).parent()?.to_owned(),
        None => std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?
            .join("caal"),
    };
    Some(caal.join("clients-venv/bin/python")).filter(|p| p.exists())
}

/// The same script the end-to-end test reads the export with, built in.
const CHECK_SCRIPT: &str = include_str!("../../../tests/clients/parquet_check.py");
/// The operator's queries, as the docs give them (and the test runs them).
const FLEET_DOC: &str = include_str!("../../../docs/fleet.md");

fn duckdb_query(export: &Path, runs: usize) -> Result<DuckdbQuery> {
    let python =
        clients_python().context("no clients venv with DuckDB (bash .ci/setup installs it)")?;
    let doc = export.with_extension("fleet.md");
    std::fs::write(&doc, FLEET_DOC)?;
    let started = Instant::now();
    let mut child = Command::new(&python)
        .arg("-")
        .args(["time", &export.display().to_string(), &runs.to_string()])
        .arg(&doc)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", python.display()))?;
    child
        .stdin
        .take()
        .context("no stdin to the Python child")?
        .write_all(CHECK_SCRIPT.as_bytes())?;
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "the DuckDB query failed after {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(last)
        .with_context(|| format!("the query printed no JSON: {stdout}"))?;
    let seconds: Vec<f64> = v["seconds"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    let doc_queries = v["doc"]
        .as_object()
        .map(|engines| {
            engines
                .iter()
                .map(|(engine, queries)| {
                    let medians = queries
                        .as_object()
                        .map(|q| {
                            q.iter()
                                .map(|(name, secs)| {
                                    let secs: Vec<f64> = secs
                                        .as_array()
                                        .map(|a| {
                                            a.iter().filter_map(serde_json::Value::as_f64).collect()
                                        })
                                        .unwrap_or_default();
                                    (name.clone(), median(&secs))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    (engine.clone(), medians)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(DuckdbQuery {
        doc_queries,
        rounds_counted: v["rows"].as_u64().unwrap_or(0),
        groups: v["groups"].as_u64().unwrap_or(0),
        median_seconds: median(&seconds),
        seconds,
    })
}

pub fn print(r: &ParquetBenchReport) {
    println!("caal trace export --format parquet, whole process (median of the runs)");
    for s in &r.sizes {
        let secs: Vec<String> = s.seconds.iter().map(|x| format!("{x:.2}")).collect();
        let rss: Vec<String> = s.peak_rss_mb.iter().map(|x| format!("{x:.1}")).collect();
        println!(
            "  {} rounds ({} events): {:.0} rounds/min [{} s]; peak resident {} MB; {:.1} MB written (trace built in {:.1} s)",
            s.rounds,
            s.rounds * 10,
            s.rounds_per_min_median,
            secs.join(" / "),
            rss.join(" / "),
            s.export_mb,
            s.build_seconds
        );
    }
    match (&r.duckdb, &r.duckdb_skipped) {
        (Some(q), _) => {
            let secs: Vec<String> = q.seconds.iter().map(|x| format!("{x:.3}")).collect();
            println!(
                "  DuckDB, rounds per home per day over {} rounds ({} groups): median {:.3} s [{} s]",
                q.rounds_counted,
                q.groups,
                q.median_seconds,
                secs.join(" / ")
            );
            for (engine, queries) in &q.doc_queries {
                for (name, median) in queries {
                    println!("  {engine}, {name} (docs/fleet.md): median {median:.3} s");
                }
            }
        }
        (None, Some(why)) => println!("  DuckDB query skipped: {why}"),
        (None, None) => {}
    }
}
