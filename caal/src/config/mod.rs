//! Configuration: the defaults embedded from `config/caal.toml`, then a user
//! file merged over them (tables merge, lists replace), then `CAAL_*`
//! environment variables. Every problem names the key or rule and the fix.

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde::Deserialize;

use crate::trace::Durability;

/// The default configuration, as shipped in `config/caal.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../../config/caal.toml");

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub store: StoreConfig,
    pub conversation: ConversationConfig,
    pub router: RouterConfig,
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    pub durability: Durability,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationConfig {
    pub default_state: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    pub fallback_reply: String,
}

/// What kind of thing a rule routes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteType {
    Command,
    Memory,
    Llm,
    Research,
    Chat,
    State,
    Confirm,
    Deny,
    Undo,
}

impl RouteType {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteType::Command => "command",
            RouteType::Memory => "memory",
            RouteType::Llm => "llm",
            RouteType::Research => "research",
            RouteType::Chat => "chat",
            RouteType::State => "state",
            RouteType::Confirm => "confirm",
            RouteType::Deny => "deny",
            RouteType::Undo => "undo",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    pub name: String,
    pub pattern: String,
    pub route: RouteType,
    pub command: Option<String>,
    #[serde(default = "one")]
    pub auth_level: u8,
    #[serde(default)]
    pub priority: i32,
    pub reply: Option<String>,
    /// Name of the capture that holds the topic, if any.
    pub topic: Option<String>,
}

fn one() -> u8 {
    1
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}; check the path given with --config", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {origin} is not valid: {message}; compare with config/caal.toml")]
    Parse { origin: String, message: String },
    #[error("config rule {rule:?}: {problem}")]
    Rule { rule: String, problem: String },
    #[error("config key {key}: {problem}")]
    Value { key: String, problem: String },
}

/// Where configuration is looked for, after the embedded defaults.
#[derive(Clone, Debug, Default)]
pub struct ConfigSource {
    /// `--config FILE`: must exist.
    pub explicit: Option<PathBuf>,
    /// Looked for in order when no file is explicit; the first that exists is used.
    pub candidates: Vec<PathBuf>,
}

impl ConfigSource {
    /// `config/caal.toml` under the working directory, then
    /// `$XDG_CONFIG_HOME/caal/caal.toml` (default `~/.config`).
    pub fn standard(explicit: Option<PathBuf>) -> Self {
        let mut candidates = vec![PathBuf::from("config/caal.toml")];
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")));
        if let Some(base) = xdg {
            candidates.push(base.join("caal/caal.toml"));
        }
        Self {
            explicit,
            candidates,
        }
    }
}

impl Config {
    /// Loads defaults, the first config file found, and the environment.
    pub fn load(
        source: &ConfigSource,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Self, Option<PathBuf>), ConfigError> {
        let mut merged: toml::Table = parse(DEFAULT_TOML, "defaults (built in)")?;
        let file = match &source.explicit {
            Some(path) => Some(path.clone()),
            None => source.candidates.iter().find(|p| p.is_file()).cloned(),
        };
        if let Some(path) = &file {
            let text = fs::read_to_string(path).map_err(|e| ConfigError::Read {
                path: path.clone(),
                source: e,
            })?;
            let overlay = parse(&text, &path.display().to_string())?;
            merge(&mut merged, overlay);
        }
        let mut config: Config =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Parse {
                    origin: file
                        .as_ref()
                        .map_or("defaults".into(), |p| p.display().to_string()),
                    message: e.message().to_owned(),
                })?;
        if let Some(d) = env("CAAL_DURABILITY") {
            config.store.durability = d.parse().map_err(|problem| ConfigError::Value {
                key: "CAAL_DURABILITY".into(),
                problem,
            })?;
        }
        config.check()?;
        Ok((config, file))
    }

    /// The embedded defaults alone.
    pub fn defaults() -> Result<Self, ConfigError> {
        Self::load(&ConfigSource::default(), &|_| None).map(|(c, _)| c)
    }

    /// Checks what serde cannot: rule names unique, levels in range, patterns compile.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.conversation.default_state.trim().is_empty() {
            return Err(ConfigError::Value {
                key: "conversation.default_state".into(),
                problem: "is empty; name a state such as \"default\"".into(),
            });
        }
        crate::router::Router::compile(self).map(|_| ())
    }
}

fn parse(text: &str, origin: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| ConfigError::Parse {
        origin: origin.to_owned(),
        message: e.to_string(),
    })
}

/// Tables merge key by key; anything else (lists included) is replaced.
fn merge(base: &mut toml::Table, overlay: toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_with(file: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("caal.toml");
        fs::write(&path, file).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::load(
            &ConfigSource {
                explicit: Some(path),
                candidates: vec![],
            },
            &|k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
        )
        .map(|(c, _)| c)
    }

    #[test]
    fn defaults_load_and_have_rules() {
        let c = Config::defaults().unwrap();
        assert_eq!(c.store.durability, Durability::Normal);
        assert!(
            c.rules
                .iter()
                .any(|r| r.command.as_deref() == Some("lights.set"))
        );
    }

    #[test]
    fn file_merges_over_defaults_and_env_wins() {
        let c = load_with("[store]\ndurability = \"fsync\"\n", &[]).unwrap();
        assert_eq!(c.store.durability, Durability::Fsync);
        assert!(!c.rules.is_empty(), "rules kept from defaults");
        let c = load_with(
            "[store]\ndurability = \"fsync\"\n",
            &[("CAAL_DURABILITY", "normal")],
        )
        .unwrap();
        assert_eq!(c.store.durability, Durability::Normal);
        let err = load_with("", &[("CAAL_DURABILITY", "sometimes")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CAAL_DURABILITY") && err.contains("\"fsync\""),
            "{err}"
        );
    }

    #[test]
    fn malformed_and_unknown_keys_are_named() {
        let err = load_with("[store\n", &[]).unwrap_err().to_string();
        assert!(
            err.contains("caal.toml") && err.contains("not valid"),
            "{err}"
        );
        let err = load_with("[store]\ndurabilty = \"fsync\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("durabilty"), "{err}");
        let err = Config::load(
            &ConfigSource {
                explicit: Some("/nonexistent/caal.toml".into()),
                candidates: vec![],
            },
            &|_| None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/nonexistent/caal.toml") && err.contains("--config"),
            "{err}"
        );
    }
}
