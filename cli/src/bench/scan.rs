//! `caal bench scan`: recall and false alterations of the scrubber on the
//! generated corpus, its throughput on one core, and `caal scan` as a whole
//! process over files of two sizes (its speed, and whether its memory stays
//! flat as the input grows).

use std::{
    io::{BufWriter, Write as _},
    path::Path,
    process::Command,
    time::Instant,
};

use caal::safety::{Safety, corpus};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct ScanBenchReport {
    pub lines: usize,
    pub bytes: usize,
    pub secrets: usize,
    /// Secrets of which no 12-character run of the random body survived.
    pub secrets_removed: usize,
    pub recall: f64,
    pub clean_lines: usize,
    pub clean_lines_altered: usize,
    pub clean_altered_share: f64,
    /// The whole corpus (a fifth of its lines carry a secret).
    pub mb_per_s: f64,
    /// Lines without secrets only: the common case of real traffic.
    pub clean_mb_per_s: f64,
    /// Lines with a secret only: finding, checking and replacing it.
    pub secret_mb_per_s: f64,
    /// The slowest of the pathological texts (a megabyte each of one anchor
    /// repeated, so that every anchor's window overlaps the next).
    pub worst_case_mb_per_s: f64,
    /// Which of them that was.
    pub worst_case: String,
    /// Kinds that missed at least once, with how often.
    pub missed: Vec<(String, usize)>,
    /// `caal scan FILE` run as its own process, a smaller file then a
    /// larger one (empty when not asked for).
    pub whole_process: Vec<WholeProcess>,
}

/// One run of `caal scan FILE > /dev/null`, timed from spawn to exit.
#[derive(Clone, Debug, Serialize)]
pub struct WholeProcess {
    pub bytes: u64,
    pub secrets: usize,
    pub seconds: f64,
    pub mb_per_s: f64,
    /// The process's peak resident memory, from `wait4`'s rusage: at most
    /// this (Linux counts the spawning process's own peak in it, so the
    /// benchmark spawns before it grows).
    pub peak_rss_mb: f64,
}

/// Texts made to be slow: one anchor repeated, each inside the last one's
/// window (a scanner that walks each window anew does quadratic work).
const PATHOLOGICAL: &[(&str, &str)] = &[
    (
        "PEM headers without an end line",
        "-----BEGIN RSA PRIVATE KEY-----",
    ),
    ("JWT starts in one long run", "-eyJ"),
    ("password assignments", "password="),
    ("URL user parts", "://a:"),
    ("OpenAI prefixes", "sk-"),
    ("Slack prefixes", "xoxb-"),
    ("Azure keys", "AccountKey="),
    ("a random token", "aB3x9Qz7"),
];

/// Runs `caal scan` (this very binary) over a generated corpus repeated to
/// `mb` megabytes and to a quarter of that, in `dir`.
pub fn whole_process(dir: &Path, mb: u64, seed: u64) -> anyhow::Result<Vec<WholeProcess>> {
    use anyhow::Context as _;
    // One line in a hundred with a secret: about four times as dense as the
    // 53 MB of source and prose issue 45 measured (1,405 secrets), and the
    // secrets of 21 kinds the generator makes.
    let corpus = corpus::generate(seed, 20_000, 0.01);
    let secrets_per_pass = corpus.iter().filter(|l| l.secret.is_some()).count();
    let pass_bytes: u64 = corpus.iter().map(|l| l.text.len() as u64 + 1).sum();
    let exe = std::env::current_exe().context("cannot find this binary to run it as caal scan")?;
    let mut runs = Vec::new();
    for size in [(mb / 4).max(1), mb.max(1)] {
        let path = dir.join(format!("scan-{size}mb.txt"));
        let mut out = BufWriter::new(
            std::fs::File::create(&path)
                .with_context(|| format!("cannot write {}", path.display()))?,
        );
        let (mut bytes, mut secrets) = (0u64, 0usize);
        while bytes < size * 1_000_000 {
            for line in &corpus {
                writeln!(out, "{}", line.text)?;
            }
            bytes += pass_bytes;
            secrets += secrets_per_pass;
        }
        out.flush()?;
        drop(out);
        let mut command = Command::new(&exe);
        command.arg("scan").arg(&path);
        let (seconds, peak_rss_mb) = super::measured(command)?;
        std::fs::remove_file(&path).ok();
        runs.push(WholeProcess {
            bytes,
            secrets,
            seconds,
            mb_per_s: bytes as f64 / 1e6 / seconds,
            peak_rss_mb,
        });
    }
    Ok(runs)
}

pub fn run(lines: usize, seed: u64) -> ScanBenchReport {
    let safety = Safety::new();
    let corpus = corpus::generate(seed, lines, 0.2);
    let bytes: usize = corpus.iter().map(|l| l.text.len() + 1).sum();
    // Throughput: scrub everything once, timed, on this thread.
    let started = Instant::now();
    // Clean text comes back borrowed, as it does for every caller.
    let scrubbed: Vec<std::borrow::Cow<'_, str>> =
        corpus.iter().map(|l| safety.scrub(&l.text)).collect();
    let secs = started.elapsed().as_secs_f64();
    let rate = |with_secret: bool| {
        let part: Vec<&str> = corpus
            .iter()
            .filter(|l| l.secret.is_some() == with_secret)
            .map(|l| l.text.as_str())
            .collect();
        let part_bytes: usize = part.iter().map(|l| l.len() + 1).sum();
        let started = Instant::now();
        for line in &part {
            std::hint::black_box(safety.scrub(line));
        }
        part_bytes as f64 / 1e6 / started.elapsed().as_secs_f64()
    };
    let (clean_mb_per_s, secret_mb_per_s) = (rate(false), rate(true));

    let mut report = ScanBenchReport {
        lines,
        bytes,
        secrets: 0,
        secrets_removed: 0,
        recall: 0.0,
        clean_lines: 0,
        clean_lines_altered: 0,
        clean_altered_share: 0.0,
        mb_per_s: bytes as f64 / 1e6 / secs,
        clean_mb_per_s,
        secret_mb_per_s,
        worst_case_mb_per_s: f64::INFINITY,
        worst_case: String::new(),
        missed: Vec::new(),
        whole_process: Vec::new(),
    };
    for (name, unit) in PATHOLOGICAL {
        let text = unit.repeat(1_000_000 / unit.len());
        let started = Instant::now();
        std::hint::black_box(safety.scrub(&text));
        let rate = text.len() as f64 / 1e6 / started.elapsed().as_secs_f64();
        if rate < report.worst_case_mb_per_s {
            (report.worst_case_mb_per_s, report.worst_case) = (rate, (*name).to_owned());
        }
    }
    let mut missed = std::collections::BTreeMap::<String, usize>::new();
    for (line, out) in corpus.iter().zip(&scrubbed) {
        match &line.secret {
            Some(body) => {
                report.secrets += 1;
                if corpus::removed(body, out) {
                    report.secrets_removed += 1;
                } else {
                    *missed.entry(line.kind.to_owned()).or_default() += 1;
                }
            }
            None => {
                report.clean_lines += 1;
                if out.as_ref() != line.text {
                    report.clean_lines_altered += 1;
                }
            }
        }
    }
    report.recall = report.secrets_removed as f64 / report.secrets.max(1) as f64;
    report.clean_altered_share =
        report.clean_lines_altered as f64 / report.clean_lines.max(1) as f64;
    report.missed = missed.into_iter().collect();
    report
}
