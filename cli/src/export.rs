//! `caal export training`: the trace as fine-tuning data, with a manifest
//! that ties every line to the rounds and event hashes it came from; and
//! `caal replay`: the trace routed again through another configuration.

use std::{
    fs,
    io::{self, BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use caal::{
    config::Config,
    export::training::{self, Format, Only},
    trace::TraceReader,
};
use clap::{Subcommand, ValueEnum};

use crate::output;

#[derive(Subcommand)]
pub enum ExportCommand {
    /// Training data: one JSON line per round (or conversation) in the OpenAI
    /// chat fine-tuning shape or ShareGPT's, tool calls with their arguments
    /// and results, secrets as their secret_ref tokens; with --out, a
    /// manifest beside it (FILE.manifest.json) names each line's rounds and
    /// event hashes. Rounds marked bad are left out (or, with --negatives,
    /// labelled "bad" with their assistant turns weighted 0).
    Training {
        /// openai-chat (OpenAI's chat fine-tuning lines) or sharegpt.
        #[arg(long, value_enum, default_value_t = TrainingFormat::OpenaiChat)]
        format: TrainingFormat,
        /// Only this conversation.
        #[arg(long)]
        conversation: Option<String>,
        /// Which rounds: all (not marked bad), ok (completed ok), confirmed
        /// (a "yes" given, exported after the question), good (marked good).
        #[arg(long, value_enum, default_value_t = TrainingOnly::All)]
        only: TrainingOnly,
        /// Rounds created on or after this date (YYYY-MM-DD, or an RFC 3339 time).
        #[arg(long)]
        since: Option<String>,
        /// Export rounds marked bad too, labelled "bad".
        #[arg(long)]
        negatives: bool,
        /// One line per conversation instead of per round.
        #[arg(long)]
        by_conversation: bool,
        /// Write here (and the manifest to FILE.manifest.json) instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace FILE (and its manifest) if they exist.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum TrainingFormat {
    OpenaiChat,
    Sharegpt,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum TrainingOnly {
    All,
    Ok,
    Confirmed,
    Good,
}

pub fn run(data_dir: &Path, config: &Config, command: ExportCommand) -> Result<()> {
    let ExportCommand::Training {
        format,
        conversation,
        only,
        since,
        negatives,
        by_conversation,
        out,
        force,
    } = command;
    let (conversation, since) = narrowed(conversation, since)?;
    let manifest_path = out.as_ref().map(|p| {
        let mut name = p.as_os_str().to_owned();
        name.push(".manifest.json");
        PathBuf::from(name)
    });
    if let (Some(out), Some(manifest), false) = (&out, &manifest_path, force) {
        for path in [out, manifest] {
            if path.exists() {
                bail!(
                    "{} exists; pass --force to replace it, or choose another --out",
                    path.display()
                );
            }
        }
    }
    let reader = TraceReader::open(&data_dir.join("traces.db"))?;
    let router = crate::engine::configured_router(config)?;
    let options = training::Options {
        format: match format {
            TrainingFormat::OpenaiChat => Format::OpenaiChat,
            TrainingFormat::Sharegpt => Format::Sharegpt,
        },
        only: match only {
            TrainingOnly::All => Only::All,
            TrainingOnly::Ok => Only::Ok,
            TrainingOnly::Confirmed => Only::Confirmed,
            TrainingOnly::Good => Only::Good,
        },
        since,
        negatives,
        by_conversation,
        system_prompt: config.llm.system_prompt.clone(),
        tools: caal::llm::toolbox::Toolbox::new(&router, &config.reasoning)
            .offered()
            .collect(),
        config_hash: config.hash.clone(),
    };
    let total = reader.count_rounds(conversation.as_ref())?;
    let bar = output::progress_bar(total, "exporting");
    let mut progress = |done: u64| bar.set_position(done);
    let (Some(out), Some(manifest_path)) = (out, manifest_path) else {
        let stdout = io::stdout();
        let mut sink = BufWriter::with_capacity(1 << 16, stdout.lock());
        training::export(
            &reader,
            conversation.as_ref(),
            &options,
            &mut sink,
            None,
            &mut progress,
        )?;
        sink.flush()?;
        bar.finish_and_clear();
        return Ok(());
    };
    // Both written beside their targets and renamed: never half an export.
    let partial = |p: &Path| {
        let mut name = p.as_os_str().to_owned();
        name.push(".partial");
        PathBuf::from(name)
    };
    let (tmp, tmp_manifest) = (partial(&out), partial(&manifest_path));
    let create = |p: &Path| {
        fs::File::create(p)
            .map(|f| BufWriter::with_capacity(1 << 16, f))
            .with_context(|| format!("cannot write {}", p.display()))
    };
    let (mut sink, mut manifest) = (create(&tmp)?, create(&tmp_manifest)?);
    let stats = training::export(
        &reader,
        conversation.as_ref(),
        &options,
        &mut sink,
        Some(&mut manifest),
        &mut progress,
    )?;
    for (w, tmp, path) in [
        (sink, &tmp, &out),
        (manifest, &tmp_manifest, &manifest_path),
    ] {
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        fs::rename(tmp, path)
            .with_context(|| format!("cannot move the export into {}", path.display()))?;
    }
    bar.finish_and_clear();
    eprintln!(
        "exported {} lines ({} rounds, {} negatives) of {} rounds read to {}; manifest {}",
        stats.lines,
        stats.rounds_exported,
        stats.negatives,
        stats.rounds_seen,
        out.display(),
        manifest_path.display()
    );
    Ok(())
}

pub fn replay(
    data_dir: &Path,
    config: &Config,
    conversation: Option<String>,
    since: Option<String>,
    show: usize,
    json: bool,
) -> Result<()> {
    let (conversation, since) = narrowed(conversation, since)?;
    let reader = TraceReader::open(&data_dir.join("traces.db"))?;
    let router = crate::engine::configured_router(config)?;
    let total = reader.count_rounds(conversation.as_ref())?;
    let bar = output::progress_bar(total, "replaying");
    let mut progress = |done: u64| bar.set_position(done);
    let report = caal::router::replay::replay(
        &reader,
        &router,
        caal::router::Bars::of(&config.voice),
        conversation.as_ref(),
        since,
        &mut progress,
    )?;
    bar.finish_and_clear();
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    output::print_replay(&report, show);
    Ok(())
}

/// `--conversation` and `--since` as given to export, replay and search,
/// each checked (a bad one is named, exit 2).
pub fn narrowed(
    conversation: Option<String>,
    since: Option<String>,
) -> Result<(Option<caal::ids::ConversationId>, Option<jiff::Timestamp>)> {
    let conversation = conversation
        .map(|c| crate::engine::parse_conversation(&c))
        .transpose()?;
    let since = since
        .map(|s| training::parse_since(&s))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    Ok((conversation, since))
}

/// `caal import FILE`: older data brought in once (see `caal::export::import`).
pub fn import(
    data_dir: &Path,
    config: Config,
    file: &Path,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    let max_item_chars = config.memory.max_item_chars;
    let engine = crate::engine::open_engine_offline(data_dir, config)?;
    let report = caal::export::import::import(
        engine.store(),
        engine.memory(),
        max_item_chars,
        file,
        dry_run,
    )?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let would = if report.dry_run {
        "would import"
    } else {
        "imported"
    };
    println!(
        "{} ({}, {}): {would} {} rounds ({} events as their own, {} kept inside their round.imported) and {} memory items; already here: {} rounds, {} memory items.",
        report.file,
        report.formats.join(" + "),
        report.sha256,
        report.rounds,
        report.events,
        report.events_kept_in_record,
        report.memory_items,
        report.rounds_already_here,
        report.memory_already_here,
    );
    if !report.conversations.is_empty() {
        println!("conversations: {}", report.conversations.join(", "));
    }
    Ok(())
}
