//! `caal ship status`: what live shipping (`caal serve --ship URL`) has
//! left to send, read from the trace store that is its queue; works while
//! the service runs.

use std::path::Path;

use anyhow::Result;
use caal::trace::{DB_FILE, ShipStatus, TraceReader};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum ShipCommand {
    /// The backlog (ended rounds no receiver has acknowledged, per
    /// conversation), the last acknowledgement and the last error.
    Status {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(data_dir: &Path, command: ShipCommand) -> Result<()> {
    match command {
        ShipCommand::Status { json } => {
            let status = TraceReader::open(&data_dir.join(DB_FILE))?.ship_status()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status_json(&status))?);
            } else {
                print!("{}", status_text(&status));
            }
        }
    }
    Ok(())
}

fn status_json(s: &ShipStatus) -> serde_json::Value {
    serde_json::json!({
        "backlog": s.backlog,
        "backlog_by_conversation": s.backlog_by_conversation.iter()
            .map(|(c, n)| serde_json::json!({"conversation_id": c, "rounds": n}))
            .collect::<Vec<_>>(),
        "rounds_acked": s.rounds_acked,
        "last_ack_at": s.last_ack_at,
        "last_error": s.last_error,
        "last_error_at": s.last_error_at,
    })
}

fn status_text(s: &ShipStatus) -> String {
    let mut out = format!(
        "backlog: {} rounds not yet acknowledged ({} conversations)\nacknowledged: {} rounds, last at {}\n",
        s.backlog,
        s.backlog_by_conversation.len(),
        s.rounds_acked,
        s.last_ack_at.as_deref().unwrap_or("never"),
    );
    if let Some(e) = &s.last_error {
        out.push_str(&format!(
            "last error: {e} ({})\n",
            s.last_error_at.as_deref().unwrap_or("")
        ));
    }
    for (c, n) in s.backlog_by_conversation.iter().take(20) {
        out.push_str(&format!("  {c}: {n}\n"));
    }
    if s.backlog_by_conversation.len() > 20 {
        out.push_str(&format!(
            "  … and {} more conversations (--json lists all)\n",
            s.backlog_by_conversation.len() - 20
        ));
    }
    out
}
