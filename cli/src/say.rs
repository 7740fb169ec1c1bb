//! `caal say` and `caal chat`: rounds from text, run here, or through the
//! running `caal serve` when it holds the data dir (remote.rs).

use std::{
    io::{self, BufRead, IsTerminal, Write},
    path::Path,
};

use anyhow::Result;
use caal::{
    config::Config,
    ids::ConversationId,
    reasoning::RoundReasoning,
    round::{Channel, Engine},
    trace::{DB_FILE, TraceReader},
};

use crate::{
    engine::{Start, open_engine, parse_conversation},
    reasoning, remote, timers,
};

/// `caal say`: one round, its reply (or with --json its result), and what
/// rang while it ran.
pub fn say(
    data_dir: &Path,
    load_config: &dyn Fn() -> Result<Config>,
    (conversation, area): (&str, Option<&str>),
    text: &[String],
    json: bool,
) -> Result<()> {
    // Everything the person gave is checked before the store is opened.
    let conversation = parse_conversation(conversation)?;
    let text = text.join(" ");
    if text.trim().is_empty() {
        return Err(caal::round::RoundError::EmptyInput.into());
    }
    let engine = match open_engine(data_dir, load_config()?, Start::Lazy) {
        Ok(engine) => engine,
        // `caal serve` holds the data dir: the round goes through it.
        Err(e) if remote::is_locked(&e) => {
            let remote = remote::Remote::find(data_dir, e)?;
            return remote::say(&remote, (&conversation, area), &text, json);
        }
        Err(e) => return Err(e),
    };
    let area = match area {
        Some(said) => Some(engine.area(said).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let origin = engine.local_origin().in_area(area);
    let result = engine.round_from(&origin, &conversation, &text, Channel::Text)?;
    if !json {
        println!("{}", result.reply);
    }
    let rang = timers::ring_and_print(&engine, &result, json, conversation.as_str());
    engine.close_at_exit();
    rang
}

/// `caal chat`: line by line, here or through the service.
pub fn chat(
    data_dir: &Path,
    load_config: &dyn Fn() -> Result<Config>,
    conversation: &str,
) -> Result<()> {
    let conversation = parse_conversation(conversation)?;
    match open_engine(data_dir, load_config()?, Start::Warm) {
        Ok(engine) => {
            let interactive = io::stdin().is_terminal();
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
            repl(
                &Answerer::Here(&engine),
                engine.store().reader(),
                &conversation,
            )
        }
        Err(e) if remote::is_locked(&e) => {
            let remote = remote::Remote::find(data_dir, e)?;
            // The service writes; the trace is read beside it for /reasoning.
            let reader = TraceReader::open(&data_dir.join(DB_FILE))?;
            remote.ring_while_open(&conversation, io::stdin().is_terminal());
            repl(&Answerer::Service(&remote), &reader, &conversation)
        }
        Err(e) => Err(e),
    }
}

/// What answers a chat's lines.
enum Answerer<'a> {
    Here(&'a Engine),
    /// The running `caal serve` (its timers ring through its live stream).
    Service(&'a remote::Remote),
}

impl Answerer<'_> {
    /// The reply to one line, and the reasoning of its round.
    fn answer(
        &self,
        conversation: &ConversationId,
        text: &str,
    ) -> Result<(String, Option<RoundReasoning>)> {
        match self {
            Answerer::Here(engine) => {
                let result = engine.text_round(conversation, text, Channel::Text)?;
                Ok((result.reply, result.reasoning))
            }
            Answerer::Service(remote) => {
                let result = remote.say(conversation, text)?;
                let reasoning = serde_json::from_value(result["reasoning"].clone()).ok();
                Ok((
                    result["reply"].as_str().unwrap_or_default().to_owned(),
                    reasoning,
                ))
            }
        }
    }

    fn banner(&self, conversation: &ConversationId) -> String {
        match self {
            Answerer::Here(_) => format!("caal chat, conversation {conversation}. /quit to leave."),
            Answerer::Service(remote) => format!(
                "caal chat, conversation {conversation}, through caal serve at {}. /quit to leave.",
                remote.url()
            ),
        }
    }
}

/// The chat's loop: a round a line; /reasoning, /help and /quit.
fn repl(
    answerer: &Answerer<'_>,
    reader: &TraceReader,
    conversation: &ConversationId,
) -> Result<()> {
    let interactive = io::stdin().is_terminal();
    if interactive {
        println!("{}", answerer.banner(conversation));
    }
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
                if let Err(e) = reasoning::slash(reader, conversation, arg) {
                    eprintln!("caal: {e}");
                }
            }
            _ => match answerer.answer(conversation, text) {
                Ok((reply, reasoning)) => {
                    println!("caal> {reply}");
                    if let Some(r) = &reasoning {
                        println!();
                        reasoning::print_block(r);
                    }
                }
                Err(e) => eprintln!("caal: {e:#}"),
            },
        }
    }
    Ok(())
}
