//! A command as configured, with its level checked.

use super::AuthLevel;
use crate::config::CommandConfig;

/// A command as configured, with its level checked.
#[derive(Clone, Debug)]
pub struct CommandSpec {
    pub id: String,
    pub level: AuthLevel,
    pub config: CommandConfig,
}
