//! `caal`: parses arguments, wires the engine and prints. The logic lives in
//! the `caal` library; each command (or group of commands) is a module here
//! with its own arguments and a `run`, and `run` below returns the exit code
//! as a value: 0 done, 1 a verified chain or receipt is broken, 2 bad input or
//! setup (an error, printed scrubbed).

mod bench;
mod bucket;
mod config;
mod engine;
mod export;
mod home;
mod jobs;
mod mcp;
mod output;
mod reasoning;
mod remote;
mod say;
mod scan;
mod serve;
mod ship;
mod state;
mod timers;
mod trace;
mod voice;

use std::{io, path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use caal::config::{Config, ConfigSource};
use clap::{Args, Parser, Subcommand};

/// mimalloc rather than glibc's malloc: memory allocated by one thread and
/// freed by another (a round's events, freed by the trace writer; a request's
/// buffers, freed by the runtime's other worker) led the profiles of
/// `caal bench trace` and `bash .ci/bench-serve`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        /// Where it is said (an area of the home, by a name or another
        /// name): "turn on the lights" and "in here" act there.
        #[arg(long)]
        area: Option<String>,
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
        /// Read TEXT as speech to text heard it: a word may be one that
        /// sounds like what was said (the sound layer is on).
        #[arg(long)]
        spoken: bool,
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
        /// Also serve Wyoming (Home Assistant's voice protocol: speech to
        /// text, conversation, text to speech) on HOST:PORT, e.g.
        /// 127.0.0.1:10300. Off by default; Wyoming has no authentication.
        #[arg(long, env = "CAAL_WYOMING", value_name = "HOST:PORT")]
        wyoming: Option<String>,
        /// Ship every ended round, as OTLP/HTTP protobuf, to the receiver
        /// at URL (an OpenTelemetry Collector: http://HOST:4318); over
        /// [ship] url. The trace is the queue: `caal ship status`.
        #[arg(long, env = "CAAL_SHIP", value_name = "URL")]
        ship: Option<String>,
    },
    /// Serve MCP (the Model Context Protocol) on stdin/stdout, for agent
    /// tools: say, trace_search, trace_verify, round_show, bucket_search,
    /// remember; conversations and rounds as resources. `caal serve` serves
    /// the same at /mcp.
    Mcp,
    /// Talk to the assistant line by line (/quit to leave).
    Chat {
        #[command(flatten)]
        conversation: ConversationArg,
    },
    /// Say a round was right (good) or wrong (bad), with an optional note:
    /// recorded as `feedback.recorded` in that round's conversation, read by
    /// `caal export training` (`--only good`, `--negatives`).
    Feedback {
        /// The round judged, as `caal trace list` shows it.
        round_id: String,
        /// good or bad.
        #[arg(value_parser = |s: &str| s.parse::<caal::config::Verdict>())]
        verdict: caal::config::Verdict,
        /// Why (scrubbed of secrets before it is stored).
        #[arg(long)]
        note: Option<String>,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Route every stored input again through this configuration (give it
    /// with --config), in memory, running nothing and asking no model, and
    /// print what would change: route, command, parameters, authority level.
    Replay {
        /// Only this conversation.
        #[arg(long)]
        conversation: Option<String>,
        /// Rounds created on or after this date (YYYY-MM-DD, or an RFC 3339 time).
        #[arg(long)]
        since: Option<String>,
        /// Changed rounds listed (all of them with --json).
        #[arg(long, default_value_t = 20)]
        show: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The trace for other uses: training data.
    #[command(subcommand)]
    Export(export::ExportCommand),
    /// Bring older data in once: a JSONL export of CAAL (`caal trace
    /// export`, any schema version this build reads; its chain checked
    /// first), or the Python CAAL's SQLite traces.db (rounds, events) and
    /// memory store. Each original round becomes a new round marked
    /// `round.imported` with the file's SHA-256 and the original ids, chained
    /// like any other; importing the same data again imports nothing. A file
    /// that is not a known format, or whose chain breaks, exits 2 naming the
    /// line and imports nothing.
    Import {
        /// The file to import.
        file: PathBuf,
        /// Check it and say what would be imported, importing nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
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
    Trace(trace::TraceCommand),
    /// Live shipping to an OTLP receiver (`caal serve --ship URL`): its backlog.
    #[command(subcommand)]
    Ship(ship::ShipCommand),
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
    Config(config::ConfigCommand),
    /// Measure what the engine sustains on this machine.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
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

/// `caal trace export | head`: a reader that stops early ends the command
/// quietly, as it would any Unix tool. Rust ignores SIGPIPE, so a print to
/// the closed pipe fails and `println!` panics with a backtrace; the default
/// disposition ends the process at that write instead. Not for `caal
/// serve`, whose clients may go away mid-answer (a socket's write then fails
/// as an error, which it handles).
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: sets a signal's disposition to the default before any thread
    // is started; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// How a command that did its work came out (an error is exit code 2).
pub enum Outcome {
    Done,
    /// A verified chain or receipt is broken: exit code 1.
    Broken,
}

/// What CAAL writes is evidence (transcripts, memory, pending
/// confirmations, keys): readable by its owner only. Every file and folder
/// the process creates (the data dir 0700, the databases with their WAL and
/// SHM, `library_id`, `serve.json`, exports 0600) follows from the mask.
fn private_files() {
    #[cfg(unix)]
    // SAFETY: sets the process's file mode mask; no memory is touched.
    unsafe {
        libc::umask(0o077);
    }
}

fn main() -> ExitCode {
    private_files();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. }) {
        quiet_on_closed_pipe();
    }
    match run(cli) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Broken) => ExitCode::from(1),
        Err(e) => {
            // Errors can quote what was given; secrets in it never reach the terminal or a log.
            eprintln!("caal: {}", caal::safety::global().scrub(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<Outcome> {
    let source = ConfigSource::standard(cli.config.clone());
    let env = |k: &str| std::env::var(k).ok();
    let load_with_file =
        || -> Result<(Config, Option<PathBuf>)> { Ok(Config::load(&source, &env)?) };
    let load_config = || -> Result<Config> { Ok(load_with_file()?.0) };
    let data_dir = cli.data_dir.as_path();
    match cli.command {
        Command::Say {
            conversation,
            area,
            json,
            text,
        } => say::say(
            data_dir,
            &load_config,
            (&conversation.conversation, area.as_deref()),
            &text,
            json,
        )?,
        Command::Mcp => mcp::mcp(data_dir, load_config()?)?,
        Command::Chat { conversation } => {
            say::chat(data_dir, &load_config, &conversation.conversation)?
        }
        Command::Understand {
            area,
            spoken,
            json,
            text,
        } => config::understand(&load_config()?, area, spoken, json, &text)?,
        Command::Serve {
            bind,
            wyoming,
            ship,
        } => serve::serve(
            data_dir,
            load_config()?,
            &bind,
            (wyoming.as_deref(), ship.as_deref()),
        )?,
        Command::Ship(command) => ship::run(data_dir, command)?,
        Command::Pending { conversation, json } => state::pending(data_dir, conversation, json)?,
        Command::Export(command) => export::run(data_dir, &load_config()?, command)?,
        Command::Import {
            file,
            dry_run,
            json,
        } => export::import(data_dir, load_config()?, &file, dry_run, json)?,
        Command::Replay {
            conversation,
            since,
            show,
            json,
        } => export::replay(data_dir, &load_config()?, conversation, since, show, json)?,
        Command::Feedback {
            round_id,
            verdict,
            note,
            json,
        } => {
            let engine = engine::open_engine(data_dir, load_config()?, engine::Start::Lazy)?;
            let done = engine.feedback(
                &round_id,
                verdict,
                note.as_deref(),
                caal::round::Channel::Cli,
            )?;
            if json {
                println!("{}", serde_json::to_string(&done)?);
            } else {
                println!(
                    "Noted: round {} was {} (recorded in round {} of {}).",
                    done.judged_round_id,
                    if done.verdict == caal::config::Verdict::Good {
                        "right"
                    } else {
                        "wrong"
                    },
                    done.round_id,
                    done.conversation_id
                );
            }
        }
        Command::State { conversation, json } => {
            state::state(data_dir, &load_config()?, &conversation.conversation, json)?
        }
        Command::Scan { file, json } => scan::scan(file.as_deref(), json)?,
        Command::Trace(command) => return trace::run(data_dir, &load_config, command),
        Command::Bucket(command) => bucket::run(data_dir, load_config()?, command)?,
        Command::Reasoning(command) => reasoning::run(data_dir, command)?,
        Command::Receipt(command) => {
            if !reasoning::receipt(data_dir, command)? {
                return Ok(Outcome::Broken);
            }
        }
        Command::Voice {
            conversation,
            json,
            file,
        } => voice::voice(
            data_dir,
            load_config()?,
            &conversation.conversation,
            &file,
            json,
        )?,
        Command::Audio(command) => voice::audio(data_dir, load_config()?, command)?,
        Command::Timers(command) => timers::run(data_dir, load_config()?, command)?,
        Command::Jobs(command) => jobs::run(data_dir, load_config()?, command)?,
        Command::Model(command) => voice::model(&load_config()?, command)?,
        Command::Home(command) => home::run(&load_config()?, command)?,
        Command::Livekit(command) => voice::livekit(command)?,
        Command::Config(config::ConfigCommand::Check { json }) => {
            config::check(&load_with_file, json)?
        }
        Command::Bench(command) => bench::run(data_dir, &load_config, command)?,
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
    }
    Ok(Outcome::Done)
}

#[cfg(test)]
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
