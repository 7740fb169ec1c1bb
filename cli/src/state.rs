//! `caal pending` and `caal state`: what waits for a "yes", and where a
//! conversation is; read beside a running writer.

use std::path::Path;

use anyhow::Result;
use caal::{config::Config, round::PendingView};

use crate::{
    engine::{open_state, parse_conversation},
    output,
};

pub fn pending(data_dir: &Path, conversation: Option<String>, json: bool) -> Result<()> {
    let conversation = conversation
        .as_deref()
        .map(parse_conversation)
        .transpose()?;
    let state = open_state(data_dir)?;
    let pending = state.pendings(conversation.as_ref())?;
    let views: Vec<serde_json::Value> = pending
        .iter()
        .map(|(c, p)| serde_json::json!({"conversation_id": c, "pending": PendingView::of(p)}))
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&views)?);
    } else {
        output::print_pending(&pending);
    }

    Ok(())
}

pub fn state(data_dir: &Path, config: &Config, conversation: &str, json: bool) -> Result<()> {
    let conversation = parse_conversation(conversation)?;
    let state = open_state(data_dir)?;
    let current = state
        .conversation_state(&conversation)?
        .unwrap_or_else(|| config.conversation.default_state.clone());
    if json {
        let doc = serde_json::json!({
            "conversation_id": conversation, "state": current,
            "states": config.states,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        output::print_state(conversation.as_str(), &current, &config.states);
    }

    Ok(())
}
