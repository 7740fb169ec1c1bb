//! A command's authority level: what the gate asks before it runs.

use std::fmt;

use serde::{Deserialize, Serialize};

/// 1 run; 2 run with undo; 3 one confirmation; 4 two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct AuthLevel(u8);

impl AuthLevel {
    pub const RUN: AuthLevel = AuthLevel(1);
    pub const UNDOABLE: AuthLevel = AuthLevel(2);
    pub const CONFIRM: AuthLevel = AuthLevel(3);
    pub const DOUBLE_CONFIRM: AuthLevel = AuthLevel(4);

    pub fn new(level: u8) -> Option<Self> {
        (1..=4).contains(&level).then_some(Self(level))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    /// How many confirmations, each in its own round, must precede execution.
    pub fn confirmations_required(self) -> u8 {
        match self.0 {
            3 => 1,
            4 => 2,
            _ => 0,
        }
    }

    pub fn undoable(self) -> bool {
        self.0 == 2
    }
}

impl TryFrom<u8> for AuthLevel {
    type Error = String;
    fn try_from(level: u8) -> Result<Self, String> {
        Self::new(level).ok_or_else(|| format!("authority level {level} is outside 1–4"))
    }
}

impl From<AuthLevel> for u8 {
    fn from(level: AuthLevel) -> u8 {
        level.0
    }
}

impl fmt::Display for AuthLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
