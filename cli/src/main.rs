//! `caal`: parses arguments, wires the engine and prints. The logic lives in
//! the `caal` library.

mod bucket;
mod home;
mod jobs;
mod output;
mod reasoning;
mod remote;
mod timers;
mod voice;

use std::{
    fs,
    io::{self, BufRead, BufWriter, IsTerminal, Read, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, Result, bail};
use caal::{
    config::{Config, ConfigSource},
    ids::ConversationId,
    llm::Tiers,
    round::{Channel, Engine, EngineOptions, PendingView},
    router::Router,
    state::{STATE_FILE, StateDb},
    trace::{DB_FILE, TraceReader},
};
use clap::{Args, Parser, Subcommand};

/// CAAL, the thinking router: every utterance a round, every step an event.
#[derive(Parser)]
#[command(name = "caal", version, about)]
struct Cli {
    /// Where traces.db and audio live. Default: ./data under the current directory.
    #[arg(long, global = true, env = "CAAL_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,

    /// A configuration file merged over the built-in defaults. Without it,
    /// ./config/caal.toml, then $XDG_CONFIG_HOME/caal/caal.toml, are used if present.
    #[arg(long, global = true, env = "CAAL_CONFIG")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one round from text and print the reply.
    Say {
        #[command(flatten)]
        conversation: ConversationArg,
        /// Print the round result as one JSON object.
        #[arg(long)]
        json: bool,
        /// What you would say to the assistant.
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Show what the router understands in TEXT, layer by layer, without
    /// running anything: the decision, and every sentence template that matched.
    Understand {
        /// Where it is said (an area of the home), for "the lights here".
        #[arg(long)]
        area: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// The sentence to understand.
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Serve the HTTP API, the live event stream and the web page.
    Serve {
        /// Address to listen on. A non-loopback address needs CAAL_API_TOKEN set.
        #[arg(long, env = "CAAL_BIND", default_value = "127.0.0.1:8377")]
        bind: String,
    },
    /// Talk to the assistant line by line (/quit to leave).
    Chat {
        #[command(flatten)]
        conversation: ConversationArg,
    },
    /// List confirmations waiting for a "yes".
    Pending {
        /// Only this conversation's.
        #[arg(long)]
        conversation: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show a conversation's state, and the states there are.
    State {
        #[command(flatten)]
        conversation: ConversationArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Replace secrets in a text with secret_ref tokens, or list them.
    Scan {
        /// A file to read; `-` or nothing reads standard input.
        file: Option<PathBuf>,
        /// List the findings (kind and byte offsets, never the value) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Inspect, export and verify recorded rounds.
    #[command(subcommand)]
    Trace(TraceCommand),
    /// What each bucket remembers: list, show, add, pin, unpin, forget, search, dump, register.
    #[command(subcommand)]
    Bucket(bucket::BucketCommand),
    /// The reasoning ledger: Markdown export, replay, one step, sessions.
    #[command(subcommand)]
    Reasoning(reasoning::ReasoningCommand),
    /// Signed receipts of governed actions: the public key, verification.
    #[command(subcommand)]
    Receipt(reasoning::ReceiptCommand),
    /// Run rounds from speech in a WAV file (any rate, any channels): each
    /// utterance transcribed by whisper and routed; the audio kept, its hash in the chain.
    Voice {
        #[command(flatten)]
        conversation: ConversationArg,
        /// Print what was heard and each round as one JSON object.
        #[arg(long)]
        json: bool,
        /// A WAV file of speech (any rate and channels; it is resampled to 16 kHz mono).
        file: PathBuf,
    },
    /// The audio voice rounds kept: list, show, pin, unpin, sweep.
    #[command(subcommand)]
    Audio(voice::AudioCommand),
    /// Timers and reminders to come: list, cancel.
    #[command(subcommand)]
    Timers(timers::TimersCommand),
    /// Background jobs ("look up …"): list, show, cancel.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// The speech model: install (convert) it.
    #[command(subcommand)]
    Model(voice::ModelCommand),
    /// The home: the areas and devices in effect; their import from Home Assistant.
    #[command(subcommand)]
    Home(home::HomeCommand),
    /// LiveKit: tokens for clients joining a room.
    #[command(subcommand)]
    Livekit(voice::LivekitCommand),
    /// Check the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Measure what the engine sustains on this machine.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print a shell completion script (e.g. `caal completions bash > ~/.local/share/bash-completion/completions/caal`).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; e.g. `caal man > caal.1 && man ./caal.1`).
    Man,
}

#[derive(Args)]
struct ConversationArg {
    /// The conversation to continue (rounds, state and memory follow it).
    #[arg(long, env = "CAAL_CONVERSATION_ID", default_value = "default")]
    conversation: String,
}

#[derive(Subcommand)]
enum TraceCommand {
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
    /// Show one round and its events.
    Show {
        /// The round (`caal trace list` shows them).
        round_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write rounds and events as JSONL (a round line, then its events).
    Export {
        /// The conversation (its id).
        #[arg(long)]
        conversation: Option<String>,
        /// Write here instead of standard output (written whole, then renamed into place).
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

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate the configuration in effect and say where it came from.
    Check {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
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
    /// The secret scrubber on a corpus it generates: recall, clean lines
    /// altered, throughput on one core.
    Scan {
        /// Lines in the generated corpus (a fifth of them carry a secret).
        #[arg(long, default_value_t = 200_000)]
        lines: usize,
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
        /// Say each line with espeak-ng and transcribe it with whisper first.
        #[arg(long)]
        spoken: bool,
        /// The model layer on: where the meaning layer is not sure, the
        /// first model tier ([llm.local], or CAAL_LLM_LOCAL_MODEL) chooses
        /// among the nearest meanings.
        #[arg(long)]
        model: bool,
        /// Lines listed that were not understood right, per suite.
        #[arg(long, default_value_t = 10)]
        misses: usize,
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

/// Exit codes: 0 done, 1 a verified chain or receipt is broken, 2 bad input or setup.
enum Failure {
    Broken,
    Error(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Error(e)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Broken) => ExitCode::from(1),
        Err(Failure::Error(e)) => {
            // Errors can quote what was given; secrets in it never reach the terminal or a log.
            eprintln!("caal: {}", caal::safety::global().scrub(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let load_config = || -> Result<(Config, Option<PathBuf>)> {
        Ok(Config::load(
            &ConfigSource::standard(cli.config.clone()),
            &|k| std::env::var(k).ok(),
        )?)
    };
    match cli.command {
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "caal", &mut io::stdout());
        }
        Command::Man => {
            let command = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(command)
                .render(&mut io::stdout())
                .context("cannot write the manual page")?;
        }
        Command::Say {
            conversation,
            json,
            text,
        } => {
            // Everything the person gave is checked before the store is opened.
            let conversation = parse_conversation(&conversation.conversation)?;
            let text = text.join(" ");
            if text.trim().is_empty() {
                return Err(anyhow::Error::from(caal::round::RoundError::EmptyInput).into());
            }
            let engine = match open_engine(&cli.data_dir, load_config()?.0, Start::Lazy) {
                Ok(engine) => engine,
                // `caal serve` holds the data dir: the round goes through it.
                Err(e) if remote::is_locked(&e) => {
                    let remote = remote::Remote::find(&cli.data_dir, e)?;
                    return Ok(remote::say(&remote, &conversation, &text, json)?);
                }
                Err(e) => return Err(e.into()),
            };
            let result = engine
                .text_round(&conversation, &text, Channel::Text)
                .map_err(anyhow::Error::from)?;
            if !json {
                println!("{}", result.reply);
            }
            timers::ring_and_print(&engine, &result, json, conversation.as_str())?;
        }
        Command::Chat { conversation } => {
            let conversation = parse_conversation(&conversation.conversation)?;
            match open_engine(&cli.data_dir, load_config()?.0, Start::Warm) {
                Ok(engine) => chat(&engine, &conversation)?,
                Err(e) if remote::is_locked(&e) => {
                    remote::chat(&remote::Remote::find(&cli.data_dir, e)?, &conversation)?
                }
                Err(e) => return Err(e.into()),
            }
        }
        Command::Trace(TraceCommand::Prune {
            older_than_days,
            dry_run,
            json,
        }) => {
            let engine = open_engine(&cli.data_dir, load_config()?.0, Start::Lazy)?;
            let cutoff = caal::trace::cutoff_days_ago(older_than_days);
            let report = engine
                .store()
                .prune(&cutoff, engine.receipt_key(), dry_run)
                .map_err(anyhow::Error::from)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?
                );
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
        Command::Trace(command) => trace(&cli.data_dir, command)?,
        Command::Bucket(command) => bucket::run(&cli.data_dir, load_config()?.0, command)?,
        Command::Voice {
            conversation,
            json,
            file,
        } => voice::voice(
            &cli.data_dir,
            load_config()?.0,
            &conversation.conversation,
            &file,
            json,
        )?,
        Command::Audio(command) => voice::audio(&cli.data_dir, load_config()?.0, command)?,
        Command::Timers(command) => timers::run(&cli.data_dir, load_config()?.0, command)?,
        Command::Jobs(command) => jobs::run(&cli.data_dir, load_config()?.0, command)?,
        Command::Model(command) => voice::model(&load_config()?.0, command)?,
        Command::Home(command) => home::run(&load_config()?.0, command)?,
        Command::Livekit(command) => voice::livekit(command)?,
        Command::Reasoning(command) => reasoning::run(&cli.data_dir, command)?,
        Command::Receipt(command) => {
            if !reasoning::receipt(&cli.data_dir, command)? {
                return Err(Failure::Broken);
            }
        }
        Command::Bench(BenchCommand::Memory { items, runs, json }) => {
            let dir = bench_dir(&cli.data_dir, "memory")?;
            let report =
                caal::memory::bench::run(&dir, items.max(1), runs.max(1), &load_config()?.0.memory);
            let _ = fs::remove_dir_all(&dir);
            let report = report.map_err(anyhow::Error::from)?;
            output::print_memory_bench(&report);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            }
        }
        Command::Serve { bind } => serve(&cli.data_dir, load_config()?.0, &bind)?,
        Command::Understand { area, json, text } => {
            let config = load_config()?.0;
            let router = configured_router(&config)?;
            let text = text.join(" ");
            let context = caal::understand::Context {
                area: area.map(|a| caal::understand::normalize(&a)),
            };
            let normalized = caal::router::normalize(&text);
            let decision =
                router.route_in(&normalized, &config.conversation.default_state, &context);
            let matches = router
                .library()
                .understand(&normalized, router.home(), &context);
            // What the meaning layer found nearest, whether or not it decided.
            let nearest = match router.semantic() {
                Some(s) => Some(
                    s.understand(&normalized, router.home(), &context)
                        .map_err(anyhow::Error::from)?
                        .nearest_json(5),
                ),
                None => None,
            };
            output::print_understanding(&text, &decision, &matches, nearest.as_ref(), json);
        }
        Command::Config(ConfigCommand::Check { json }) => {
            let (config, file) = load_config()?;
            let origin = file.as_ref().map_or("built-in defaults".to_owned(), |f| {
                format!("defaults + {}", f.display())
            });
            let router = configured_router(&config)?;
            let guarded = Tiers::guard(&config.llm, &router, &|k| std::env::var(k).ok(), true)
                .map_err(anyhow::Error::from)?;
            for warning in &guarded.warnings {
                eprintln!("caal: warning: {warning}");
            }
            let tiers: Vec<(String, String)> = guarded.tiers.as_deref().map_or(Vec::new(), |t| {
                t.local
                    .iter()
                    .chain(t.remote.iter())
                    .map(|tier| (tier.name.to_owned(), tier.model().to_string()))
                    .collect()
            });
            if json {
                let doc = serde_json::json!({
                    "ok": true,
                    "origin": origin,
                    "file": file,
                    "config_hash": config.hash,
                    "rules": config.rules.len(),
                    "commands": config.commands.len(),
                    "durability": config.store.durability,
                    "model_tiers": tiers.iter().map(|(name, model)| serde_json::json!({"name": name, "model": model})).collect::<Vec<_>>(),
                    "sentence_library": router.library().sentence_count(),
                    "warnings": guarded.warnings,
                });
                println!("{doc}");
            } else {
                let names: Vec<String> = tiers
                    .iter()
                    .map(|(name, model)| format!("{name} ({model})"))
                    .collect();
                let names = if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                };
                println!(
                    "config ok: {} rules, durability {:?}, model tiers: {names} ({origin})",
                    config.rules.len(),
                    config.store.durability
                );
            }
        }
        Command::Bench(BenchCommand::Trace {
            events,
            fsync_seconds,
            json,
        }) => {
            bench_trace(&cli.data_dir, events, fsync_seconds, json)?;
        }
        Command::Bench(BenchCommand::Say { runs, json }) => bench_say(&cli.data_dir, runs, json)?,
        Command::Bench(BenchCommand::Timers {
            timers,
            conversations,
            spread_ms,
            json,
        }) => {
            if timers == 0 {
                return Err(anyhow::anyhow!("--timers must be at least 1").into());
            }
            let dir = bench_dir(&cli.data_dir, "timers")?;
            let report = caal::round::schedule_bench::run(&dir, timers, conversations, spread_ms);
            let _ = fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!(e))?;
            output::print_timers_bench(&report);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            }
        }
        Command::Bench(BenchCommand::Serve {
            clients,
            seconds,
            json,
        }) => {
            let report =
                caal::server::bench::run(&load_config()?.0, &cli.data_dir, clients, seconds)
                    .map_err(anyhow::Error::msg)?;
            output::print_serve_bench(&report);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            }
        }
        Command::Bench(BenchCommand::Voice { runs, json }) => {
            #[cfg(feature = "whisper")]
            {
                let models = caal::llm::tiers::models_dir(&|k| std::env::var(k).ok());
                let report = caal::voice::bench::run(&load_config()?.0, &models, runs.max(1))
                    .map_err(anyhow::Error::msg)?;
                output::print_voice_bench(&report);
                if json {
                    println!(
                        "{}",
                        serde_json::to_string(&report).map_err(anyhow::Error::from)?
                    );
                }
            }
            #[cfg(not(feature = "whisper"))]
            {
                let _ = (runs, json);
                return Err(anyhow::Error::from(caal::voice::SttError::NotBuilt).into());
            }
        }
        Command::Bench(BenchCommand::Understand {
            suite,
            spoken,
            model,
            misses,
            json,
        }) => {
            let mut config = load_config()?.0;
            config.understand.model.enabled = model;
            let env = |k: &str| std::env::var(k).ok();
            let router = configured_router(&config)?;
            let tiers = if model {
                let guarded =
                    Tiers::guard(&config.llm, &router, &env, false).map_err(anyhow::Error::from)?;
                for warning in &guarded.warnings {
                    eprintln!("caal: warning: {warning}");
                }
                Some(guarded.tiers.ok_or_else(|| {
                    anyhow::anyhow!(
                        "--model needs a model tier: install the local model (`bash .ci/setup`) or configure [llm.remote]"
                    )
                })?)
            } else {
                None
            };
            let consult_with = |said: &str, d: &caal::router::RouteDecision| {
                let tiers = tiers.as_ref()?;
                let tier = tiers.local.as_ref().or(tiers.remote.as_ref())?;
                let offers = caal::llm::choose::offers(&d.choices);
                let m = &config.understand.model;
                caal::llm::choose::ask(tier, m.method, &m.prompt, said, &offers, m.max_tokens)
                    .picked
                    .ok()
            };
            let consult: Option<caal::understand::bench::Consult<'_>> =
                model.then_some(&consult_with as _);
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
            let report = if spoken {
                #[cfg(feature = "whisper")]
                {
                    let models = caal::llm::tiers::models_dir(&env);
                    let hear = caal::voice::bench::hearing(&config, &models)
                        .map_err(anyhow::Error::msg)?;
                    let spoken = caal::understand::bench::Spoken {
                        hear: &hear,
                        min_guess_word: config.voice.min_guess_word,
                    };
                    caal::understand::bench::run(&router, given, Some(spoken), consult)
                }
                #[cfg(not(feature = "whisper"))]
                {
                    return Err(anyhow::Error::from(caal::voice::SttError::NotBuilt).into());
                }
            } else {
                caal::understand::bench::run(&router, given, None, consult)
            }
            .map_err(anyhow::Error::msg)?;
            output::print_understand_bench(&report, misses);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            }
        }
        Command::Bench(BenchCommand::Scan { lines, json }) => {
            let report = caal::safety::bench::run(lines.max(1), 0x0CAA_15EC);
            output::print_scan_bench(&report);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            }
        }
        Command::Scan { file, json } => scan(file.as_deref(), json)?,
        Command::Bench(BenchCommand::Llm {
            runs,
            rounds,
            instant_rounds,
            json,
        }) => {
            let report = caal::llm::bench::run(
                &load_config()?.0,
                &cli.data_dir,
                runs.max(1),
                rounds.max(1),
                instant_rounds.max(2),
            )
            .map_err(anyhow::Error::msg)?;
            output::print_llm_bench(&report);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            }
        }
        Command::Bench(BenchCommand::Router {
            decisions,
            rounds,
            json,
        }) => {
            let report =
                caal::router::bench::run(&load_config()?.0, &cli.data_dir, decisions, rounds)
                    .map_err(anyhow::Error::from)?;
            output::print_router_bench(&report);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            }
        }
        Command::Pending { conversation, json } => {
            let conversation = conversation
                .as_deref()
                .map(parse_conversation)
                .transpose()?;
            let state = open_state(&cli.data_dir)?;
            let pending = state
                .pendings(conversation.as_ref())
                .map_err(anyhow::Error::from)?;
            let views: Vec<serde_json::Value> = pending
                .iter()
                .map(|(c, p)| serde_json::json!({"conversation_id": c, "pending": PendingView::of(p)}))
                .collect();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&views).map_err(anyhow::Error::from)?
                );
            } else {
                output::print_pending(&pending);
            }
        }
        Command::State { conversation, json } => {
            let conversation = parse_conversation(&conversation.conversation)?;
            let config = load_config()?.0;
            let state = open_state(&cli.data_dir)?;
            let current = state
                .conversation_state(&conversation)
                .map_err(anyhow::Error::from)?
                .unwrap_or_else(|| config.conversation.default_state.clone());
            if json {
                let doc = serde_json::json!({
                    "conversation_id": conversation, "state": current,
                    "states": config.states,
                });
                println!(
                    "{}",
                    serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
                );
            } else {
                output::print_state(conversation.as_str(), &current, &config.states);
            }
        }
    }
    Ok(())
}

fn parse_conversation(id: &str) -> Result<ConversationId> {
    Ok(id.parse::<ConversationId>()?)
}

/// When the local model's server starts.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    /// At the first question that needs it (`caal say`: most rounds need none).
    Lazy,
    /// Now, in the background, so the first question does not wait for it;
    /// a remote tier is probed too (a warning if it does not answer).
    Warm,
}

fn open_engine(data_dir: &Path, config: Config, start: Start) -> Result<Engine> {
    // The start-up guard: a route that needs a model when none can be had
    // stops here, naming the config key to set.
    // Compiled once: the guard reads it, the engine runs it.
    let router = std::sync::Arc::new(configured_router(&config)?);
    let guarded = Tiers::guard(
        &config.llm,
        &router,
        &|k| std::env::var(k).ok(),
        start == Start::Warm,
    )?;
    for warning in &guarded.warnings {
        eprintln!("caal: warning: {warning}");
    }
    if start == Start::Warm
        && let Some(tiers) = guarded.tiers.clone()
    {
        std::thread::spawn(move || {
            if let Some(Err(e)) = tiers.local.as_ref().map(|t| t.warm_up()) {
                eprintln!("caal: warning: {e}");
            }
        });
    }
    let options = EngineOptions {
        llm: guarded.tiers,
        router: Some(router),
        ..EngineOptions::default()
    };
    let engine = Engine::open(data_dir, config, options)?;
    if start == Start::Warm
        && let Some(semantic) = engine.router().semantic()
    {
        std::thread::spawn(semantic.warmer());
    }
    for (conversation, round_seq) in engine.store().recovered() {
        eprintln!(
            "caal: conversation {conversation} round {round_seq} was left open by a crash; recorded as round.failed (crash.recovered)"
        );
    }
    Ok(engine)
}

/// The state database, for reading beside a running writer.
fn open_state(data_dir: &Path) -> Result<StateDb> {
    let path = data_dir.join(STATE_FILE);
    if !path.exists() {
        bail!(
            "no state at {}; run `caal say \"hello\"` to create it, or point --data-dir at a data dir",
            path.display()
        );
    }
    Ok(StateDb::open(&path)?)
}

fn chat(engine: &Engine, conversation: &ConversationId) -> Result<()> {
    let interactive = io::stdin().is_terminal();
    if interactive {
        println!("caal chat, conversation {conversation}. /quit to leave.");
    }
    // Timers and reminders ring while the chat is open, printed as they do.
    let mut rang = engine.notifications();
    let _scheduler = engine.start_scheduler()?;
    let mine = conversation.to_string();
    std::thread::spawn(move || {
        while let Ok(n) = rang.blocking_recv() {
            println!("\n{}", timers::bell(&n, &mine));
            if interactive {
                print!("you> ");
            }
            let _ = io::stdout().flush();
        }
    });
    let mut stdout = io::stdout();
    let mut lines = io::stdin().lock().lines();
    loop {
        if interactive {
            print!("you> ");
            stdout.flush()?;
        }
        let Some(line) = lines.next() else { break };
        let line = line?;
        let text = line.trim();
        match text {
            "" => continue,
            "/quit" | "/exit" => break,
            "/help" => println!(
                "Say anything; /quit leaves. /reasoning [N|all] shows the reasoning of the last, the Nth or every round. Every round is recorded: see `caal trace list`."
            ),
            _ if text == "/reasoning" || text.starts_with("/reasoning ") => {
                let arg = text.trim_start_matches("/reasoning").trim();
                if let Err(e) = reasoning::slash(engine.store().reader(), conversation, arg) {
                    eprintln!("caal: {e}");
                }
            }
            _ => match engine.text_round(conversation, text, Channel::Text) {
                Ok(result) => {
                    println!("caal> {}", result.reply);
                    if let Some(r) = &result.reasoning {
                        println!();
                        reasoning::print_block(r);
                    }
                }
                Err(e) => eprintln!("caal: {e}"),
            },
        }
    }
    Ok(())
}

fn trace(data_dir: &Path, command: TraceCommand) -> Result<(), Failure> {
    let reader = TraceReader::open(&data_dir.join(DB_FILE)).map_err(anyhow::Error::from)?;
    let conversation_filter = |c: Option<String>| c.as_deref().map(parse_conversation).transpose();
    match command {
        TraceCommand::Prune { .. } => {
            unreachable!("prune writes: run() opens the engine for it, not a reader")
        }
        TraceCommand::List {
            conversation,
            limit,
            json,
        } => {
            let rounds = reader
                .rounds(conversation_filter(conversation)?.as_ref(), limit)
                .map_err(anyhow::Error::from)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&rounds).map_err(anyhow::Error::from)?
                );
            } else {
                output::print_round_list(&rounds);
            }
        }
        TraceCommand::Show { round_id, json } => {
            let Some((round, events)) = reader.round(&round_id).map_err(anyhow::Error::from)?
            else {
                return Err(anyhow::anyhow!(
                    "no round {round_id:?} in {}; list rounds with `caal trace list`",
                    reader.path().display()
                )
                .into());
            };
            if json {
                let events: Vec<serde_json::Value> = events
                    .iter()
                    .map(|e| serde_json::from_str(&e.to_json_line()))
                    .collect::<Result<_, _>>()
                    .map_err(anyhow::Error::from)?;
                let doc = serde_json::json!({"round": round, "events": events});
                println!(
                    "{}",
                    serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
                );
            } else {
                output::print_round(&round, &events);
            }
        }
        TraceCommand::Export { conversation, out } => {
            let conversation = conversation_filter(conversation)?;
            export(&reader, conversation.as_ref(), out.as_deref())?;
        }
        TraceCommand::Verify { conversation, json } => {
            let report = reader
                .verify(conversation_filter(conversation)?.as_ref())
                .map_err(anyhow::Error::from)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            } else {
                output::print_verify(&report);
            }
            if !report.ok {
                return Err(Failure::Broken);
            }
        }
    }
    Ok(())
}

fn export(
    reader: &TraceReader,
    conversation: Option<&ConversationId>,
    out: Option<&Path>,
) -> Result<()> {
    let total = reader.count_events(conversation)?;
    let bar = output::progress_bar(total, "exporting");
    let mut progress = |done: u64| bar.set_position(done);
    match out {
        None => {
            let stdout = io::stdout();
            let mut sink = BufWriter::with_capacity(1 << 16, stdout.lock());
            reader.export(conversation, &mut sink, &mut progress)?;
        }
        Some(path) => {
            // Written beside the target and renamed: a reader never sees half an export.
            let tmp = path.with_extension("jsonl.partial");
            let file = fs::File::create(&tmp)
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            let mut sink = BufWriter::with_capacity(1 << 16, file);
            let stats = reader.export(conversation, &mut sink, &mut progress)?;
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

/// The router the configuration asks for, with a warning for each part
/// (sentence library, embedding model) that could not be loaded.
fn configured_router(config: &Config) -> Result<Router> {
    let (router, warnings) = Router::configured(config, &|k| std::env::var(k).ok())?;
    for warning in warnings {
        eprintln!("caal: warning: {warning}");
    }
    Ok(router)
}

/// A fresh directory for a benchmark, on the data dir's disk; the caller removes it.
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
    let report = caal::trace::bench::run(&dir, events, fsync_seconds);
    let _ = fs::remove_dir_all(&dir);
    let report = report?;
    output::print_trace_bench(&report);
    if json {
        println!("{}", serde_json::to_string(&report)?);
    }
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

fn scan(file: Option<&Path>, json: bool) -> Result<()> {
    let mut text = String::new();
    match file {
        None => io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?,
        Some(p) if p == Path::new("-") => io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?,
        Some(p) => fs::File::open(p)
            .and_then(|mut f| f.read_to_string(&mut text))
            .with_context(|| format!("cannot read {} as UTF-8 text", p.display()))?,
    };
    let safety = caal::safety::global();
    if json {
        let findings: Vec<serde_json::Value> = safety
            .findings(&text)
            .into_iter()
            .map(|(kind, start, end)| {
                let line = text[..start].matches('\n').count() + 1;
                serde_json::json!({"kind": kind, "start": start, "end": end, "line": line})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print!("{}", safety.scrub(&text));
    }
    Ok(())
}

fn serve(data_dir: &Path, config: Config, bind: &str) -> Result<()> {
    let addr: std::net::SocketAddr = bind
        .parse()
        .with_context(|| format!("--bind {bind:?} is not host:port; use e.g. 127.0.0.1:8377"))?;
    let explicit = std::env::var("CAAL_API_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty());
    if !addr.ip().is_loopback() && explicit.is_none() {
        bail!(
            "refusing to listen on {addr} without a configured token: set CAAL_API_TOKEN to a long random value, or bind 127.0.0.1"
        );
    }
    caal::safety::logging::init(&std::env::var("CAAL_LOG").unwrap_or_else(|_| "info".into()));
    let engine = open_engine(data_dir, config, Start::Warm)?;
    let token = caal::server::auth::load_or_create(data_dir, explicit.as_deref())?;
    // Timers and reminders ring from here; what came due while CAAL was
    // stopped rings at once, saying how late it is.
    let _scheduler = engine.start_scheduler()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}; is another caal serve running? choose another with --bind"))?;
        let local = listener.local_addr()?;
        // Said before the address is printed: whoever reads it can reach the service.
        let _announced = remote::announce(data_dir, &format!("http://{local}"))?;
        let token_file = data_dir.join(caal::server::auth::TOKEN_FILE);
        if io::stderr().is_terminal() {
            // A person at a terminal gets the page's address ready to open; the
            // token rides in the fragment, which browsers never send to a server.
            eprintln!(
                "caal serve: listening on http://{local}/\n  the page:  http://{local}/#token={token}\n  the voice: http://{local}/voice#token={token}\n  (the API token is kept in {})",
                token_file.display()
            );
        } else {
            // A log keeps no secrets: the token stays in its file.
            eprintln!(
                "caal serve: listening on http://{local}/ (API token in {}; open the page with #token=TOKEN, or it asks once; http://{local}/voice talks through the microphone)",
                token_file.display()
            );
        }
        caal::server::serve(listener, caal::server::AppState::new(engine, token), shutdown_signal()).await?;
        eprintln!("caal serve: stopped; every finished round is stored");
        Ok::<(), anyhow::Error>(())
    })
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every option and argument of every command says what it is for.
    #[test]
    fn every_option_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "caal", &mut missing);
        assert!(
            missing.is_empty(),
            "without help text:\n{}",
            missing.join("\n")
        );
    }
}
