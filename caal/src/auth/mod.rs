//! Authority levels, confirmations, chains and undo.
//!
//! Level 1 runs at once; level 2 runs and records an undo; level 3 needs one
//! confirmation before it runs; level 4 needs two, in two separate rounds. A
//! chain (a macro, or any ordered commands) is authorised once, at the
//! highest level in it. The decision is [`gate`]: a pure function of the
//! pending confirmation, the utterance and the clock, so the same code the
//! engine runs is what the property tests exercise.

pub mod boundary;
mod gate;
pub mod origin;
pub mod store;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The level is a command's (`command::AuthLevel`); the gate reads it.
pub use crate::command::AuthLevel;
use crate::command::{ParamValue, join_summaries};
pub use gate::{GateAction, GateOutcome, Gating, Pending, Refusal, Resolution, Utterance, gate};
pub use origin::{Client, Door, DoorPolicy, Origin};

/// One command with its typed parameters, ready to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Command {
    pub command_id: String,
    pub auth_level: AuthLevel,
    /// What it does, parameters read back: "unlock the front door".
    pub summary: String,
    pub params: BTreeMap<String, ParamValue>,
    /// The parameters as said, kept so a stored chain can be checked again.
    #[serde(skip)]
    pub raw_params: BTreeMap<String, String>,
    pub source_rule: Option<String>,
    /// Why it was chosen (set once the round decides it).
    #[serde(skip)]
    pub decision: Option<crate::reasoning::Decision>,
}

/// Commands authorised together, at `chain_level = max(auth_level)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommandChain {
    pub chain_id: String,
    pub commands: Vec<Command>,
    pub chain_level: AuthLevel,
    #[serde(rename = "macro")]
    pub macro_name: Option<String>,
    pub summary: String,
}

impl CommandChain {
    pub fn new(
        commands: Vec<Command>,
        macro_name: Option<String>,
        summary: Option<String>,
    ) -> Self {
        let chain_level = commands
            .iter()
            .map(|c| c.auth_level)
            .max()
            .unwrap_or(AuthLevel::RUN);
        let summary =
            summary.unwrap_or_else(|| join_summaries(commands.iter().map(|c| c.summary.as_str())));
        Self {
            chain_id: uuid::Uuid::now_v7().hyphenated().to_string(),
            commands,
            chain_level,
            macro_name,
            summary,
        }
    }

    /// The single command's id, or the macro's name, for events and UIs.
    pub fn command_id(&self) -> Option<&str> {
        match self.commands.as_slice() {
            [one] => Some(&one.command_id),
            _ => None,
        }
    }

    /// What is stored while a confirmation is pending: enough to rebuild and
    /// re-check the chain against the configuration in force at confirmation.
    pub fn stored(&self) -> StoredChain {
        StoredChain {
            chain_id: self.chain_id.clone(),
            macro_name: self.macro_name.clone(),
            summary: self.summary.clone(),
            chain_level: self.chain_level,
            steps: self
                .commands
                .iter()
                .map(|c| StoredStep {
                    command_id: c.command_id.clone(),
                    raw_params: c.raw_params.clone(),
                    source_rule: c.source_rule.clone(),
                    decision: c.decision.clone(),
                })
                .collect(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredChain {
    pub chain_id: String,
    #[serde(rename = "macro")]
    pub macro_name: Option<String>,
    pub summary: String,
    pub chain_level: AuthLevel,
    pub steps: Vec<StoredStep>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredStep {
    pub command_id: String,
    pub raw_params: BTreeMap<String, String>,
    pub source_rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<crate::reasoning::Decision>,
}

/// "Unlock the front door" from "unlock the front door".
pub fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The prompt that asks for confirmation `received + 1` of `required`.
pub fn confirmation_prompt(summary: &str, required: u8, received: u8) -> String {
    match (required, received) {
        (2, 0) => format!(
            "{}? This needs two confirmations. Say yes to continue.",
            capitalise(summary)
        ),
        (2, _) => format!("To be sure: {summary}. Say yes again to confirm."),
        _ => format!("{}? Say yes to confirm.", capitalise(summary)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_confirmations() {
        assert_eq!(AuthLevel::new(0), None);
        assert_eq!(AuthLevel::new(5), None);
        let required: Vec<u8> = (1..=4)
            .map(|l| AuthLevel::new(l).unwrap().confirmations_required())
            .collect();
        assert_eq!(required, [0, 0, 1, 2]);
        assert!(AuthLevel::UNDOABLE.undoable() && !AuthLevel::CONFIRM.undoable());
    }

    #[test]
    fn prompts_read_the_action_back() {
        assert_eq!(
            confirmation_prompt("unlock the front door", 1, 0),
            "Unlock the front door? Say yes to confirm."
        );
        assert!(confirmation_prompt("open the garage door", 2, 0).contains("two confirmations"));
        assert_eq!(
            confirmation_prompt("open the garage door", 2, 1),
            "To be sure: open the garage door. Say yes again to confirm."
        );
        assert_eq!(join_summaries(["a", "b", "c"].into_iter()), "a, b and c");
    }
}
