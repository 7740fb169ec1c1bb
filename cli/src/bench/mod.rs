//! `caal bench`: what the engine sustains on this machine, each a figure
//! printed, and with --json one JSON object last.

pub mod attack;
#[cfg(feature = "whisper")]
pub mod hear;
pub mod llm;
pub mod memory;
pub mod parquet;
pub mod router;
pub mod scan;
pub mod serve;
pub mod ship;
pub mod speak;
pub mod timers;
pub mod trace;
pub mod understand;
#[cfg(feature = "whisper")]
pub mod voice;
#[cfg(feature = "whisper")]
pub mod wake;

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use caal::{config::Config, llm::Tiers};
use clap::Subcommand;

use crate::{engine::configured_router, output};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Timers due in the same second, rung by the scheduler as rounds: how
    /// late each rang, in due order or not.
    Timers {
        /// How many timers to set.
        #[arg(long, default_value_t = 1000)]
        timers: usize,
        /// Spread over this many conversations.
        #[arg(long, default_value_t = 10)]
        conversations: usize,
        /// Due one after another across this many milliseconds (0: all at once).
        #[arg(long, default_value_t = 1000)]
        spread_ms: u64,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// Trace store throughput: chained appends vs bare inserts, and fsync rounds.
    Trace {
        /// Events to append in the chained and bare runs.
        #[arg(long, default_value_t = 200_000)]
        events: u64,
        /// Seconds to run the fsync-durable rounds.
        #[arg(long, default_value_t = 3.0)]
        fsync_seconds: f64,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// The local model tier for real: start, time to first token, tokens/s,
    /// memory; and what a round adds around a model call.
    Llm {
        /// Streamed answers timed.
        #[arg(long, default_value_t = 8)]
        runs: usize,
        /// Whole rounds the real model answers.
        #[arg(long, default_value_t = 8)]
        rounds: usize,
        /// Rounds against an instant server, in each of two states (words; tools offered).
        #[arg(long, default_value_t = 300)]
        instant_rounds: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// Route-decision time for the configured rules and for 200 generated
    /// rules, and a whole level-1 text round in-process.
    Router {
        /// Decisions timed per rule set.
        #[arg(long, default_value_t = 200_000)]
        decisions: usize,
        /// Whole rounds timed.
        #[arg(long, default_value_t = 5_000)]
        rounds: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// `caal trace export --format parquet` as a whole process over a
    /// synthetic trace at a quarter of --rounds and at --rounds: rounds a
    /// minute and peak resident memory; then, with DuckDB in the clients'
    /// venv, rounds per home per day queried over the larger export.
    Parquet {
        /// Rounds (of 10 events) in the larger trace.
        #[arg(long, default_value_t = 1_000_000)]
        rounds: u64,
        /// Exports (and queries) at each size; the medians are printed.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
        /// Only build the synthetic trace in this data dir (the benchmark runs
        /// itself so to keep its own memory small).
        #[arg(long, hide = true)]
        build_trace: Option<PathBuf>,
    },
    /// The secret scrubber on a corpus it generates: recall, clean lines
    /// altered, throughput on one core; and `caal scan FILE` as a whole
    /// process at two sizes (speed, peak memory).
    Scan {
        /// Lines in the generated corpus (a fifth of them carry a secret).
        #[arg(long, default_value_t = 200_000)]
        lines: usize,
        /// Megabytes of that corpus for `caal scan FILE` as a whole process
        /// (run at a quarter of this and at this; 0 skips it).
        #[arg(long, default_value_t = 64)]
        process_mb: u64,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// Level-1 rounds through POST /api/chat on a real server, with a live
    /// event stream following: rounds/s, latency percentiles, events lost.
    Serve {
        /// Concurrent keep-alive clients, each in its own conversation.
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// Live shipping to a receiver inside the bench: the backlog of a
    /// service run shipped (rounds/s), and the service's latency with
    /// shipping on beside runs without it; then the Parquet export's
    /// benchmark (`caal bench parquet`). Ends with the goals, met or not.
    Ship {
        /// Concurrent keep-alive clients of each service run.
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// Seconds of each service run.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Runs (each: without shipping, the backlog shipped, with shipping);
        /// the medians are printed. The Parquet part runs as many exports.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Rounds in the larger trace of the Parquet part (as `caal bench
        /// parquet --rounds`); 0 skips it.
        #[arg(long, default_value_t = 1_000_000)]
        parquet_rounds: u64,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// The same level-1 round through POST /api/chat and through the
    /// OpenAI-compatible POST /v1/chat/completions, interleaved from one
    /// keep-alive client: what the door adds.
    Doors {
        /// Timed rounds through each door (after 20 untimed of each).
        #[arg(long, default_value_t = 500)]
        rounds: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// Bucket memory at size: the context package cold and cached, search,
    /// and one write, on a bucket it fills in a temporary directory.
    Memory {
        /// Items in the bucket.
        #[arg(long, default_value_t = 100_000)]
        items: usize,
        /// Timed runs of each measurement (the cached package: 50 times as many).
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// Speech to text on espeak-ng speech: real-time factor on 3–10 s
    /// utterances against bare whisper-rs, and end of speech to route
    /// decision over the voice WebSocket of a real server.
    Voice {
        /// Timed runs of each measurement.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// How well the router understands what people say: command and
    /// parameter accuracy on Home Assistant's English intent tests (the
    /// default home's domains), CAAL's paraphrases and out-of-domain talk;
    /// proposals, confirmations asked, and decision time per layer.
    Understand {
        /// A suite of your own: JSON lines {"text", "command", "params"}
        /// ("command": "-" for no command).
        #[arg(long)]
        suite: Option<PathBuf>,
        /// Say each line with espeak-ng (or --voice) and transcribe it with
        /// whisper first.
        #[arg(long)]
        spoken: bool,
        /// With --spoken (and --heard, whose readings are weighed against the
        /// line said again): who says the lines: espeak-ng, or piper (the
        /// voice replies are spoken in, voice.piper).
        #[arg(long, value_enum, default_value = "espeak-ng")]
        voice: SpokenBy,
        /// With --spoken (and --heard): white noise mixed in this many dB
        /// below the speech (10: a loud room), the speech then found by
        /// Silero VAD as the voice socket finds it.
        #[arg(long, value_name = "DB")]
        snr: Option<f32>,
        /// With --spoken: keep what whisper heard of each line in FILE (JSON
        /// lines {"text", "heard", "least"}), to route again with --heard.
        #[arg(long, value_name = "FILE", requires = "spoken")]
        save_heard: Option<PathBuf>,
        /// Route what an earlier --spoken run heard (--save-heard FILE) as
        /// speech, without saying or transcribing anything: the same
        /// transcripts for every router change (whisper's vary a little
        /// from run to run).
        #[arg(long, value_name = "FILE", conflicts_with = "spoken")]
        heard: Option<PathBuf>,
        /// The model layer on: where the meaning layer is not sure, the
        /// first model tier ([llm.local], or CAAL_LLM_LOCAL_MODEL) chooses
        /// among the nearest meanings.
        #[arg(long)]
        model: bool,
        /// What no layer understood runs as a whole round with the model
        /// (the chat path: the model answers, offered the commands near
        /// what was said), as `caal serve` does with the local model on.
        #[arg(long)]
        rounds: bool,
        /// Lines listed that were not understood right, per suite.
        #[arg(long, default_value_t = 10)]
        misses: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// `caal export training` as a whole process over a trace of real
    /// rounds (level-1 commands, reads, confirmations, feedback): rounds per
    /// minute and the exporting process's peak memory; then `caal replay`
    /// over the same trace: rounds routed again per second; then searches
    /// of it (FTS5): time per search; then `caal import` of its JSONL export
    /// into a new data dir: rounds per second and peak memory.
    Training {
        /// Events in the trace exported (rounds are run until there are this many).
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// What a hostile peer can cost the service (issue 41's probe):
    /// routing time of 400–2,000 characters of hostile input; resident
    /// memory of `caal serve` while three peers ask its Wyoming door to
    /// speak 125 KB and 4,000-character texts; `/api/health` while a
    /// thousand connections hold a 256-descriptor `caal serve`, and after.
    Attack {
        /// Timed routings of each input.
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// The voice that speaks replies: from a reply to its first audio, the
    /// real-time factor, load time and memory of the Piper voice, beside
    /// espeak-ng (its fallback).
    Speak {
        /// Times each of five replies is spoken.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// The speech models' word error rate on recorded human speech (the
    /// labelled clips of Debian's pocketsphinx-testdata), heard as voice
    /// rounds hear.
    Hear {
        /// The speech models to measure (`caal model list`); all by default.
        #[arg(long = "model", value_name = "NAME")]
        models: Vec<String>,
        /// Where the clips and their transcripts are.
        #[arg(long, default_value = "/usr/share/pocketsphinx/test/data")]
        data: PathBuf,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// The wake word (`voice.wake.model`, else openWakeWord's "hey
    /// jarvis"): false rejects of the phrase said before requests by four
    /// voices in quiet and noise, and false accepts per hour of ordinary
    /// speech (recorded human prompts, the suites' lines said).
    Wake {
        /// Lines of the suites the Piper voice says among the ordinary
        /// speech (espeak-ng's two voices say them all).
        #[arg(long, default_value_t = 150)]
        piper_lines: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
    /// `caal say` as a whole process (start, open, round, durable, exit).
    Say {
        /// Timed runs, after three untimed warm-up runs.
        #[arg(long, default_value_t = 50)]
        runs: usize,
        /// End with one JSON object of the figures.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(
    data_dir: &Path,
    load_config: &dyn Fn() -> Result<Config>,
    command: BenchCommand,
) -> Result<()> {
    match command {
        BenchCommand::Trace {
            events,
            fsync_seconds,
            json,
        } => {
            bench_trace(data_dir, events, fsync_seconds, json)?;
        }
        BenchCommand::Say { runs, json } => bench_say(data_dir, runs, json)?,
        BenchCommand::Hear { models, data, json } => {
            #[cfg(feature = "whisper")]
            {
                let report = hear::run(&load_config()?, &data, &models)?;
                figures(&report, hear::print, json)?;
            }
            #[cfg(not(feature = "whisper"))]
            {
                let _ = (models, data, json);
                return Err(caal::voice::SttError::NotBuilt.into());
            }
        }
        BenchCommand::Wake { piper_lines, json } => {
            #[cfg(feature = "whisper")]
            {
                let report = wake::run(&load_config()?, piper_lines)?;
                figures(&report, wake::print, json)?;
            }
            #[cfg(not(feature = "whisper"))]
            {
                let _ = (piper_lines, json);
                return Err(caal::voice::SttError::NotBuilt.into());
            }
        }
        BenchCommand::Speak { runs, json } => {
            let report = speak::run(&load_config()?, runs)?;
            figures(&report, speak::print, json)?;
        }
        BenchCommand::Attack { runs, json } => {
            let report = attack::run(&load_config()?, data_dir, runs)?;
            figures(&report, attack::print, json)?;
        }
        BenchCommand::Training { events, json } => {
            bench_training(data_dir, &load_config()?, events, json)?
        }
        BenchCommand::Llm {
            runs,
            rounds,
            instant_rounds,
            json,
        } => {
            let report = llm::run(
                &load_config()?,
                data_dir,
                runs.max(1),
                rounds.max(1),
                instant_rounds.max(2),
            )
            .map_err(anyhow::Error::msg)?;
            figures(&report, output::print_llm_bench, json)?;
        }
        BenchCommand::Router {
            decisions,
            rounds,
            json,
        } => {
            let report = router::run(&load_config()?, data_dir, decisions, rounds)?;
            figures(&report, output::print_router_bench, json)?;
        }
        BenchCommand::Parquet {
            rounds,
            runs,
            json,
            build_trace,
        } => {
            if let Some(data) = build_trace {
                return parquet::build_trace(&data, rounds);
            }
            let dir = bench_dir(data_dir, "parquet")?;
            let report = parquet::run(&dir, rounds, runs);
            let _ = fs::remove_dir_all(&dir);
            figures(&report?, parquet::print, json)?;
        }
        BenchCommand::Scan {
            lines,
            process_mb,
            json,
        } => {
            // The whole process first, while this one is small: a child's
            // peak resident memory (wait4's ru_maxrss) counts the memory of
            // the process that spawned it, which never shrinks.
            let whole_process = if process_mb > 0 {
                let dir = bench_dir(data_dir, "scan")?;
                let runs = scan::whole_process(&dir, process_mb, 0x0CAA_15EC);
                let _ = fs::remove_dir_all(&dir);
                runs?
            } else {
                Vec::new()
            };
            let mut report = scan::run(lines.max(1), 0x0CAA_15EC);
            report.whole_process = whole_process;
            figures(&report, output::print_scan_bench, json)?;
        }
        BenchCommand::Serve {
            clients,
            seconds,
            json,
        } => {
            let report = serve::run(&load_config()?, data_dir, clients, seconds)
                .map_err(anyhow::Error::msg)?;
            figures(&report, output::print_serve_bench, json)?;
        }
        BenchCommand::Ship {
            clients,
            seconds,
            runs,
            parquet_rounds,
            json,
        } => {
            // The Parquet part first, while this process is small: its
            // children's peak memory counts this process's (see `measured`).
            let parquet = if parquet_rounds > 0 {
                let dir = bench_dir(data_dir, "parquet")?;
                let parquet = parquet::run(&dir, parquet_rounds, runs);
                let _ = fs::remove_dir_all(&dir);
                Some(parquet?)
            } else {
                None
            };
            let mut report = ship::run(&load_config()?, data_dir, clients, seconds, runs)
                .map_err(anyhow::Error::msg)?;
            report.parquet = parquet;
            figures(&report, output::print_ship_bench, json)?;
        }
        BenchCommand::Doors { rounds, json } => {
            let report =
                serve::doors(&load_config()?, data_dir, rounds).map_err(anyhow::Error::msg)?;
            println!(
                "{} level-1 rounds each, interleaved, one keep-alive client: POST /api/chat p50 {:.3} ms (p99 {:.3}); POST /v1/chat/completions p50 {:.3} ms (p99 {:.3}); the OpenAI door adds {:.3} ms at p50",
                report.rounds,
                report.api_p50_ms,
                report.api_p99_ms,
                report.openai_p50_ms,
                report.openai_p99_ms,
                report.openai_added_p50_ms
            );
            if json {
                println!("{}", serde_json::to_string(&report)?);
            }
        }
        BenchCommand::Memory { items, runs, json } => {
            let dir = bench_dir(data_dir, "memory")?;
            let report = memory::run(&dir, items.max(1), runs.max(1), &load_config()?.memory);
            let _ = fs::remove_dir_all(&dir);
            let report = report?;
            figures(&report, output::print_memory_bench, json)?;
        }
        BenchCommand::Timers {
            timers,
            conversations,
            spread_ms,
            json,
        } => {
            if timers == 0 {
                bail!("--timers must be at least 1");
            }
            let dir = bench_dir(data_dir, "timers")?;
            let report = timers::run(&dir, timers, conversations, spread_ms);
            let _ = fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!(e))?;
            figures(&report, output::print_timers_bench, json)?;
        }
        BenchCommand::Voice { runs, json } => {
            #[cfg(feature = "whisper")]
            {
                let models = caal::llm::tiers::models_dir(&|k| std::env::var(k).ok());
                let report = voice::run(&load_config()?, &models, runs.max(1))
                    .map_err(anyhow::Error::msg)?;
                figures(&report, output::print_voice_bench, json)?;
            }
            #[cfg(not(feature = "whisper"))]
            {
                let _ = (runs, json);
                return Err(caal::voice::SttError::NotBuilt.into());
            }
        }
        BenchCommand::Understand {
            suite,
            spoken,
            voice,
            snr,
            save_heard,
            heard,
            model,
            rounds,
            misses,
            json,
        } => {
            let mut config = load_config()?;
            config.understand.model.enabled = model;
            let env = |k: &str| std::env::var(k).ok();
            let router = std::sync::Arc::new(configured_router(&config)?);
            let tiers = if model || rounds {
                let guarded = Tiers::guard(&config.llm, &router, &env, false)?;
                for warning in &guarded.warnings {
                    eprintln!("caal: warning: {warning}");
                }
                Some(guarded.tiers.ok_or_else(|| {
                    anyhow::anyhow!(
                        "--model and --rounds need a model tier: install the local model (`bash .ci/setup`) or configure [llm.remote]"
                    )
                })?)
            } else {
                None
            };
            // As `caal serve` does at start: the local server is up before the
            // first line, so its start is not a line's decision time.
            if let Some(local) = tiers.as_ref().and_then(|t| t.local.as_ref()) {
                local
                    .warm_up()
                    .map_err(|e| anyhow::anyhow!("starting the local model: {e}"))?;
            }
            let consult_with = |said: &str, d: &caal::router::RouteDecision| {
                let tiers = tiers.as_ref()?;
                let tier = tiers.local.as_ref().or(tiers.remote.as_ref())?;
                let offers = caal::llm::choose::offers(&d.choices);
                let m = &config.understand.model;
                caal::llm::choose::ask(tier, m.method, &m.prompt, said, &offers, m.max_tokens)
                    .picked
                    .ok()
            };
            let consult: Option<understand::Consult<'_>> = model.then_some(&consult_with as _);
            // The chat path: what no layer understood runs as a whole round
            // (its own data dir, a fresh conversation per line) with the model.
            let chat_dir = bench_dir(data_dir, "understand")?;
            let engine = match tiers.as_ref().filter(|_| rounds) {
                Some(tiers) => {
                    let mut round_config = config.clone();
                    round_config.store.durability = caal::config::Durability::Normal;
                    Some(caal::round::Engine::open(
                        &chat_dir,
                        round_config,
                        caal::round::EngineOptions {
                            llm: Some(tiers.clone()),
                            router: Some(router.clone()),
                            ..caal::round::EngineOptions::bench()
                        },
                    )?)
                }
                None => None,
            };
            let lines = std::cell::Cell::new(0u32);
            let chat_with = |said: &str| -> Result<understand::Chatted, String> {
                let engine = engine.as_ref().ok_or("no engine")?;
                lines.set(lines.get() + 1);
                chat_round(engine, &format!("bench-{}", lines.get()), said)
                    .map_err(|e| e.to_string())
            };
            let chat: Option<understand::Chat<'_>> = engine.is_some().then_some(&chat_with as _);
            let given = match &suite {
                Some(path) => Some((
                    path.display().to_string(),
                    std::fs::read_to_string(path).map_err(|e| {
                        anyhow::anyhow!("cannot read the suite {}: {e}", path.display())
                    })?,
                )),
                None => None,
            };
            let given = given.as_ref().map(|(n, t)| (n.as_str(), t.as_str()));
            let report = if let Some(path) = &heard {
                let text = fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!(
                        "cannot read the transcripts {}: {e}; record them with `caal bench understand --spoken --save-heard FILE`",
                        path.display()
                    )
                })?;
                let kept = understand::KeptHearing::parse(&text, &path.display().to_string())
                    .map_err(anyhow::Error::msg)?;
                let hear = |said: &str| kept.hear(said);
                #[cfg(feature = "whisper")]
                let ear = ear(&config, &env, voice, snr)?;
                #[cfg(feature = "whisper")]
                let listener = |said: &str| ear.as_ref().map(|e| e.listen(said));
                #[cfg(feature = "whisper")]
                let listen = ear.is_some().then_some(&listener as &dyn Fn(&str) -> _);
                #[cfg(not(feature = "whisper"))]
                let listen = None;
                let spoken = understand::Spoken {
                    hear: &hear,
                    bars: caal::router::Bars::of(&config.voice),
                    listen,
                };
                understand::run(&router, given, Some(spoken), consult, chat)
            } else if spoken {
                #[cfg(feature = "whisper")]
                {
                    let models = caal::llm::tiers::models_dir(&env);
                    let ear = voice::Ear::with(
                        &config,
                        &models,
                        mouth(voice, snr, &config, &models)?,
                    )
                    .map_err(anyhow::Error::msg)?;
                    let saved = match &save_heard {
                        Some(path) => Some(std::cell::RefCell::new(fs::File::create(path).map_err(
                            |e| anyhow::anyhow!("cannot write the transcripts to {}: {e}", path.display()),
                        )?)),
                        None => None,
                    };
                    let keep = |said: &str| -> Result<understand::Heard, String> {
                        let heard = ear.hear(said)?;
                        if let Some(file) = &saved {
                            use std::io::Write;
                            let line = understand::KeptHearing::line(said, &heard);
                            writeln!(file.borrow_mut(), "{line}").map_err(|e| e.to_string())?;
                        }
                        Ok(heard)
                    };
                    let listener = |said: &str| Some(ear.listen(said));
                    let listen = config
                        .understand
                        .sounds
                        .listen
                        .then_some(&listener as &dyn Fn(&str) -> _);
                    let spoken = understand::Spoken {
                        hear: &keep,
                        bars: caal::router::Bars::of(&config.voice),
                        listen,
                    };
                    understand::run(&router, given, Some(spoken), consult, chat)
                }
                #[cfg(not(feature = "whisper"))]
                {
                    let _ = (save_heard, voice, snr);
                    return Err(caal::voice::SttError::NotBuilt.into());
                }
            } else {
                understand::run(&router, given, None, consult, chat)
            }
            .map_err(anyhow::Error::msg);
            drop(engine);
            let _ = fs::remove_dir_all(&chat_dir);
            let report = report?;
            output::print_understand_bench(&report, misses);
            if json {
                println!("{}", serde_json::to_string(&report)?);
            }
        }
    }
    Ok(())
}

/// With `understand.sounds.listen`, what weighs readings of a mishearing
/// against each line's speech (said again, as it was heard), as voice
/// rounds weigh them against theirs.
#[cfg(feature = "whisper")]
fn ear(
    config: &caal::config::Config,
    env: &dyn Fn(&str) -> Option<String>,
    voice: SpokenBy,
    snr: Option<f32>,
) -> Result<Option<voice::Ear>> {
    if !config.understand.sounds.listen {
        return Ok(None);
    }
    let models = caal::llm::tiers::models_dir(env);
    let mouth = mouth(voice, snr, config, &models)?;
    let ear = voice::Ear::with(config, &models, mouth).map_err(anyhow::Error::msg)?;
    Ok(Some(ear))
}

/// Who says `--spoken` lines (`--voice`), in what noise (`--snr`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SpokenBy {
    EspeakNg,
    Piper,
}

#[cfg(feature = "whisper")]
fn mouth(
    voice: SpokenBy,
    snr: Option<f32>,
    config: &caal::config::Config,
    models: &Path,
) -> Result<voice::Mouth> {
    use voice::Mouth;
    let mouth = match voice {
        SpokenBy::EspeakNg => Mouth::espeak(),
        SpokenBy::Piper => Mouth::piper(config, models).map_err(anyhow::Error::msg)?,
    };
    let mouth = match snr {
        Some(db) => mouth
            .in_noise(db, config, models)
            .map_err(anyhow::Error::msg)?,
        None => mouth,
    };
    eprintln!("said by {}", mouth.name());
    Ok(mouth)
}

/// One line through a whole round, and what the model decided in it: the
/// commands of its `route.selected` (`decided_by: "llm"`), at the level the
/// round gave them.
fn chat_round(
    engine: &caal::round::Engine,
    conversation: &str,
    said: &str,
) -> Result<understand::Chatted> {
    let conversation: caal::ids::ConversationId =
        conversation.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    let result = engine.text_round(&conversation, said, caal::round::Channel::Text)?;
    let mut chatted = understand::Chatted {
        reply: result.reply.clone(),
        ..Default::default()
    };
    let Some((_, events)) = engine.store().reader().round(&result.round_id)? else {
        return Ok(chatted);
    };
    for e in events.iter().filter(|e| e.event_type == "route.selected") {
        let selected: caal::trace::events::RouteSelected = serde_json::from_str(&e.payload)?;
        if selected.decided_by.as_deref() != Some("llm") {
            continue;
        }
        if let Some(command) = selected.command_id {
            chatted.decided = vec![caal::understand::suite::Expected {
                command,
                params: serde_json::from_value(selected.params).unwrap_or_default(),
            }];
        }
        chatted.level = caal::auth::AuthLevel::new(selected.auth_level);
    }
    Ok(chatted)
}

/// A fresh directory for a benchmark, on the data dir's disk; the caller removes it.
/// The middle of `values` (the upper middle of an even count; NaN if none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn bench_dir(data_dir: &Path, name: &str) -> Result<PathBuf> {
    let dir = data_dir.join(format!("bench-{name}-{}", std::process::id()));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

fn bench_trace(data_dir: &Path, events: u64, fsync_seconds: f64, json: bool) -> Result<()> {
    if events == 0 {
        bail!("--events must be at least 1");
    }
    // On the data dir's disk, so the fsync figure is the real disk's.
    let dir = bench_dir(data_dir, "trace")?;
    let report = trace::run(&dir, events, fsync_seconds);
    let _ = fs::remove_dir_all(&dir);
    let report = report?;
    figures(&report, output::print_trace_bench, json)?;
    Ok(())
}

fn bench_say(data_dir: &Path, runs: usize, json: bool) -> Result<()> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let exe = std::env::current_exe().context("cannot find this caal binary to time it")?;
    let dir = data_dir.join(format!("bench-say-{}", std::process::id()));
    let mut times_ms = Vec::with_capacity(runs);
    let result = (|| -> Result<()> {
        for i in 0..runs + 3 {
            let started = std::time::Instant::now();
            let status = std::process::Command::new(&exe)
                .arg("--data-dir")
                .arg(&dir)
                .args([
                    "say",
                    "--json",
                    "--conversation",
                    "bench",
                    "turn on the kitchen lights",
                ])
                .stdout(std::process::Stdio::null())
                .status()
                .context("cannot run caal say")?;
            let elapsed = started.elapsed().as_secs_f64() * 1e3;
            if !status.success() {
                bail!("caal say failed ({status}) during the benchmark");
            }
            if i >= 3 {
                times_ms.push(elapsed);
            }
        }
        Ok(())
    })();
    let _ = fs::remove_dir_all(&dir);
    result?;
    times_ms.sort_by(f64::total_cmp);
    let at = |q: f64| caal::stats::percentile(&times_ms, q);
    let (median, p90) = (at(0.5), at(0.9));
    println!(
        "caal say, whole process, {runs} runs (warm cache): median {median:.1} ms, p90 {p90:.1} ms, min {:.1} ms",
        times_ms[0]
    );
    if json {
        println!(
            "{}",
            serde_json::json!({"runs": runs, "say_median_ms": median, "say_p90_ms": p90, "say_min_ms": times_ms[0]})
        );
    }
    Ok(())
}

fn bench_training(data_dir: &Path, config: &Config, events: u64, json: bool) -> Result<()> {
    let dir = bench_dir(data_dir, "training")?;
    let result = (|| -> Result<serde_json::Value> {
        // The trace: real rounds through the engine, a hundred conversations.
        let mut round_config = config.clone();
        round_config.store.durability = caal::config::Durability::Normal;
        let engine =
            caal::round::Engine::open(&dir, round_config, caal::round::EngineOptions::bench())?;
        const SAID: [&str; 8] = [
            "turn on the kitchen lights",
            "add milk to the shopping list",
            "what's on my shopping list",
            "unlock the front door",
            "yes",
            "set the thermostat to 21",
            "that was wrong",
            "turn off the kitchen lights",
        ];
        let started = std::time::Instant::now();
        let mut rounds = 0u64;
        while engine.store().reader().count_events(None)? < events {
            for _ in 0..1000 {
                let conversation: caal::ids::ConversationId = format!("c{}", rounds % 100)
                    .parse()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let said = SAID[(rounds / 100) as usize % SAID.len()];
                engine.text_round(&conversation, said, caal::round::Channel::Text)?;
                rounds += 1;
            }
        }
        let made_s = started.elapsed().as_secs_f64();
        let total = engine.store().reader().count_events(None)?;
        drop(engine);
        eprintln!("caal: {rounds} rounds, {total} events made in {made_s:.0} s; exporting");
        // The export, as a process of its own, its memory sampled as it runs.
        let exe = std::env::current_exe().context("cannot find this caal binary to time it")?;
        let out = dir.join("train.jsonl");
        let (export_s, peak_kb, status) = watched(
            std::process::Command::new(&exe)
                .arg("--data-dir")
                .arg(&dir)
                .args(["export", "training", "--force", "--out"])
                .arg(&out),
            &dir.join("export.stderr"),
        )
        .context("cannot run caal export training")?;
        if !status.success() {
            bail!("caal export training failed ({status}) during the benchmark");
        }
        let lines = fs::read_to_string(&out)?.lines().count();
        // Replay, the same configuration: every decision again, compared.
        let replayed = std::process::Command::new(&exe)
            .arg("--data-dir")
            .arg(&dir)
            .args(["replay", "--json"])
            .stderr(std::process::Stdio::null())
            .output()
            .context("cannot run caal replay")?;
        if !replayed.status.success() {
            bail!(
                "caal replay failed ({}) during the benchmark",
                replayed.status
            );
        }
        let replay: serde_json::Value = serde_json::from_slice(&replayed.stdout)?;
        let replay_s = replay["seconds"].as_f64().unwrap_or(f64::NAN);
        // Search: everyday words, rare and common, newest 20 hits each.
        let reader = caal::trace::TraceReader::open(&dir.join("traces.db"))?;
        let queries = [
            "kitchen lights",
            "shopping list",
            "thermostat 21",
            "front door",
            "milk",
            "wrong",
            "lights.set",
            "nothing matches this",
        ];
        let mut search_ms = Vec::new();
        for round in 0..25 {
            for q in queries {
                let filter = caal::trace::SearchFilter {
                    limit: 20,
                    conversation: None,
                    event_type: None,
                    since: None,
                };
                let started = std::time::Instant::now();
                let hits = reader.search(q, &filter)?;
                if round > 0 {
                    search_ms.push(started.elapsed().as_secs_f64() * 1e3);
                }
                std::hint::black_box(hits);
            }
        }
        search_ms.sort_by(f64::total_cmp);
        // Import: the whole trace exported as JSONL, brought into a new data
        // dir (every hash checked in a first pass, then every round written).
        let jsonl = dir.join("trace.jsonl");
        let exported = std::process::Command::new(&exe)
            .arg("--data-dir")
            .arg(&dir)
            .args(["trace", "export", "--out"])
            .arg(&jsonl)
            .stderr(std::process::Stdio::null())
            .status()
            .context("cannot run caal trace export")?;
        if !exported.success() {
            bail!("caal trace export failed ({exported}) during the benchmark");
        }
        let (import_s, import_peak_kb, status) = watched(
            std::process::Command::new(&exe)
                .arg("--data-dir")
                .arg(dir.join("imported"))
                .arg("import")
                .arg(&jsonl),
            &dir.join("import.stderr"),
        )
        .context("cannot run caal import")?;
        if !status.success() {
            bail!("caal import failed ({status}) during the benchmark");
        }
        let (search_p50, search_p90) = (
            caal::stats::percentile(&search_ms, 0.5),
            caal::stats::percentile(&search_ms, 0.9),
        );
        Ok(
            serde_json::json!({"rounds": rounds, "events": total, "lines": lines,
            "export_s": export_s, "rounds_per_min": rounds as f64 / export_s * 60.0,
            "peak_rss_mb": peak_kb as f64 / 1024.0,
            "replayed": replay["replayed"], "replay_changed": replay["changed"].as_array().map_or(0, Vec::len),
            "replay_s": replay_s, "searches": search_ms.len(),
            "search_p50_ms": search_p50, "search_p90_ms": search_p90,
            "replay_rounds_per_s": replay["replayed"].as_f64().unwrap_or(0.0) / replay_s,
            "import_s": import_s, "import_rounds_per_s": rounds as f64 / import_s,
            "import_peak_rss_mb": import_peak_kb as f64 / 1024.0}),
        )
    })();
    let _ = fs::remove_dir_all(&dir);
    let r = result?;
    println!(
        "caal export training, whole process: {} rounds ({} events, {} lines) in {:.2} s: {:.0} rounds/min, peak RSS {:.1} MB",
        r["rounds"],
        r["events"],
        r["lines"],
        r["export_s"].as_f64().unwrap_or(0.0),
        r["rounds_per_min"].as_f64().unwrap_or(0.0),
        r["peak_rss_mb"].as_f64().unwrap_or(0.0)
    );
    println!(
        "caal replay, same configuration: {} rounds routed again in {:.2} s: {:.0} rounds/s, {} changed",
        r["replayed"],
        r["replay_s"].as_f64().unwrap_or(0.0),
        r["replay_rounds_per_s"].as_f64().unwrap_or(0.0),
        r["replay_changed"]
    );
    println!(
        "caal trace search, the same trace: {} searches, p50 {:.2} ms, p90 {:.2} ms",
        r["searches"],
        r["search_p50_ms"].as_f64().unwrap_or(0.0),
        r["search_p90_ms"].as_f64().unwrap_or(0.0)
    );
    println!(
        "caal import, the same trace as JSONL into a new data dir, whole process: {:.2} s: {:.0} rounds/s, peak RSS {:.1} MB",
        r["import_s"].as_f64().unwrap_or(0.0),
        r["import_rounds_per_s"].as_f64().unwrap_or(0.0),
        r["import_peak_rss_mb"].as_f64().unwrap_or(0.0)
    );
    if json {
        println!("{r}");
    }
    Ok(())
}

/// Runs `command` to its end, sampling its peak resident set (VmHWM) as it
/// runs: seconds taken, peak kB, exit status. Its stderr is shown when it fails.
fn watched(
    command: &mut std::process::Command,
    stderr_file: &Path,
) -> std::io::Result<(f64, u64, std::process::ExitStatus)> {
    let started = std::time::Instant::now();
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(stderr_file)?)
        .spawn()?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        // VmHWM: the process's peak resident set so far.
        if let Ok(text) = fs::read_to_string(&status_file)
            && let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    if !status.success() {
        eprint!("{}", fs::read_to_string(stderr_file).unwrap_or_default());
    }
    Ok((started.elapsed().as_secs_f64(), peak_kb, status))
}

/// A benchmark's figures: printed for a person, and with --json one JSON
/// object last.
fn figures<T: serde::Serialize>(report: &T, print: fn(&T), json: bool) -> Result<()> {
    print(report);
    if json {
        println!("{}", serde_json::to_string(report)?);
    }
    Ok(())
}

/// Runs `command` to its end with its output discarded: the seconds it took
/// and its peak resident memory in MB, from `wait4`'s rusage. That peak is
/// an upper bound: Linux counts the spawning process's own peak in a
/// child's, so a benchmark spawns while it is small.
pub fn measured(mut command: std::process::Command) -> Result<(f64, f64)> {
    use std::process::Stdio;
    let what = format!("{command:?}");
    let started = std::time::Instant::now();
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let pid = libc::pid_t::try_from(child.id()).context("a process id out of range")?;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child spawned above, which nothing else reaps
    // (std's Child is dropped without waiting); both pointers are ours.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        reaped == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{what} did not exit 0"
    );
    // ru_maxrss is in kilobytes on Linux.
    Ok((seconds, usage.ru_maxrss as f64 / 1024.0))
}
