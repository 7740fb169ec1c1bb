//! The format of an understanding suite: what people say and what it
//! should become, one JSON object a line (`{"text", "command", "params"}`;
//! a `command` of `"-"`: no command; `"chain"`: several commands in order;
//! `"context"`: where it was said). `caal bench understand --suite FILE`
//! reads one; the fuzz target `jsonl` feeds the reader arbitrary bytes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A command a line should become, with the parameters it should carry.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Expected {
    pub command: String,
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
}

/// One line of a suite.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Case {
    pub text: String,
    /// `-` for no command.
    #[serde(default = "none")]
    pub command: String,
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// Several commands, in order (instead of `command`).
    #[serde(default)]
    pub chain: Vec<Expected>,
    #[serde(default)]
    pub context: BTreeMap<String, String>,
}

fn none() -> String {
    "-".into()
}

impl Case {
    /// The commands the line should become, in order (none for `-`).
    pub fn expected(&self) -> Vec<Expected> {
        if !self.chain.is_empty() {
            return self.chain.clone();
        }
        if self.command == "-" {
            return Vec::new();
        }
        vec![Expected {
            command: self.command.clone(),
            params: self.params.clone(),
        }]
    }
}

/// Reads a suite: one JSON object a line; blank lines and `#` comments skipped.
pub fn parse_suite(text: &str, origin: &str) -> Result<Vec<Case>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                format!(
                    "{origin} line {}: {e}; each line is {{\"text\": ..., \"command\": ..., \"params\": {{...}}}}",
                    i + 1
                )
            })
        })
        .collect()
}
