//! `caal jobs`: background jobs (research), queued, running and ended;
//! one in full; cancelling one (told in the conversation that asked).

use std::path::Path;

use anyhow::{Result, bail};
use caal::{config::Config, round::Channel, schedule::jobs};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum JobsCommand {
    /// Jobs, queued and running first, then the newest.
    List {
        /// Show at most this many (the most recent).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One job in full (its job_id or number).
    Show {
        /// The job (its job_id or number, as `caal jobs list` shows it).
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop a queued or running job; the conversation that asked is told.
    Cancel {
        /// The job (its job_id or number, as `caal jobs list` shows it).
        id: String,
    },
}

pub fn run(data_dir: &Path, config: Config, command: JobsCommand) -> Result<()> {
    match command {
        JobsCommand::List { limit, json } => {
            let state = crate::engine::open_state(data_dir)?;
            let list = state.with(|c| jobs::list(c, limit))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("No jobs yet; \"look up …\" starts one.");
            } else {
                for j in &list {
                    println!(
                        "job {:>4}  {:<9} {:<9} attempts {}  conversation {:<12} {}",
                        j.id, j.class, j.state, j.attempts, j.conversation_id, j.topic
                    );
                }
            }
        }
        JobsCommand::Show { id, json } => {
            let state = crate::engine::open_state(data_dir)?;
            let Some(j) = state.with(|c| jobs::get(c, &id))? else {
                bail!("there is no job {id:?}; see `caal jobs list`");
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&j)?);
            } else {
                println!("job {} ({}), {}: {}", j.id, j.job_id, j.class, j.query);
                println!(
                    "  state {}, attempts {}, conversation {}",
                    j.state, j.attempts, j.conversation_id
                );
                println!(
                    "  asked in round {}, worked in round {}, told in round {}",
                    j.enqueued_in_round.as_deref().unwrap_or("-"),
                    j.work_round_id.as_deref().unwrap_or("-"),
                    j.result_round_id.as_deref().unwrap_or("-")
                );
                if let Some(r) = &j.result {
                    println!("  result: {r}");
                }
            }
        }
        JobsCommand::Cancel { id } => {
            let engine = crate::engine::open_engine(data_dir, config, crate::engine::Start::Lazy)?;
            match engine.cancel_job(&id, Channel::Cli)? {
                Some(said) => println!("{said}"),
                None => bail!(
                    "there is no queued or running job {id:?} (it ended, or never was); see `caal jobs list`"
                ),
            }
        }
    }
    Ok(())
}
