//! `caal timers`: the timers and reminders to come, and cancelling one by
//! its id (recorded as a round of the conversation that set it). They ring
//! from `caal serve` and `caal chat`; `caal say` rings what is overdue.

use std::path::Path;

use anyhow::{Result, bail};
use caal::{
    config::Config,
    round::{Channel, Engine, Notification, Scheduled, scheduled_in},
    schedule::human_left,
    state::{Clock, SystemClock},
};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum TimersCommand {
    /// Timers (running and paused) and reminders to come, soonest first.
    List {
        /// Only this conversation's.
        #[arg(long)]
        conversation: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a timer (or, with --reminder, a reminder) by the id `list` shows.
    Cancel {
        /// The timer's (or reminder's) id, as `caal timers list` shows it.
        id: i64,
        /// The id is a reminder's.
        #[arg(long)]
        reminder: bool,
    },
}

pub fn run(data_dir: &Path, config: Config, command: TimersCommand) -> Result<()> {
    match command {
        TimersCommand::List { conversation, json } => {
            if let Some(c) = &conversation {
                crate::engine::parse_conversation(c)?;
            }
            let state = crate::engine::open_state(data_dir)?;
            let now = SystemClock.now_ms();
            let scheduled = scheduled_in(&state, conversation.as_deref(), now)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&scheduled)?);
            } else {
                print_list(&scheduled);
            }
        }
        TimersCommand::Cancel { id, reminder } => {
            let engine = crate::engine::open_engine(data_dir, config, crate::engine::Start::Lazy)?;
            let kind = if reminder { "reminder" } else { "timer" };
            match engine.cancel_scheduled(kind, id, Channel::Cli)? {
                Some(said) => println!("{said}"),
                None => bail!(
                    "there is no {kind} {id} to come (it rang, was cancelled, or never was); see `caal timers list`"
                ),
            }
        }
    }
    Ok(())
}

fn print_list(s: &Scheduled) {
    if s.timers.is_empty() && s.reminders.is_empty() {
        println!("No timers or reminders to come.");
        return;
    }
    for t in &s.timers {
        println!(
            "timer {:>4}  {} {:>18}  {}  conversation {}",
            t.timer.id,
            crate::output::cell(&t.label, 24),
            format!("{} left", human_left(t.left_ms)),
            if t.paused {
                "paused".to_owned()
            } else {
                format!("due {}", t.due_at.as_deref().unwrap_or("-"))
            },
            t.timer.conversation_id
        );
    }
    for r in &s.reminders {
        println!(
            "reminder {:>1}  {} {:>18}  due {}  conversation {}",
            r.reminder.id,
            crate::output::cell(&r.reminder.what, 24),
            format!("in {}", human_left(r.left_ms)),
            r.due_at,
            r.reminder.conversation_id
        );
    }
}

/// How a ringing is printed where someone typed: the conversation named
/// when it is not theirs.
pub fn bell(n: &Notification, mine: &str) -> String {
    if n.conversation_id == mine {
        format!("🔔 {}", n.text)
    } else {
        format!("🔔 ({}) {}", n.conversation_id, n.text)
    }
}

/// After a one-shot command's rounds (`caal say`, `caal voice`): nothing else
/// rings while it holds the data dir, so what is overdue rings now and a job
/// it (or an earlier one) queued runs now. With `json`, `result` is printed
/// with those as `notifications`; else (the replies already printed) a bell
/// line each.
pub fn ring_and_print(
    engine: &Engine,
    result: &impl serde::Serialize,
    json: bool,
    mine: &str,
) -> Result<()> {
    let mut rang = engine.fire_due()?;
    rang.extend(engine.run_jobs_now()?);
    if json {
        let mut out = serde_json::to_value(result)?;
        if !rang.is_empty() {
            out["notifications"] = serde_json::json!(rang);
        }
        println!("{out}");
    } else {
        for n in &rang {
            println!("{}", bell(n, mine));
        }
    }
    Ok(())
}
