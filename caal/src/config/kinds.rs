//! Leaf types the configuration names (how durable the trace is, what the
//! sanitizer does, which protocol a model speaks, the time zone): defined
//! here, at the bottom, and re-exported where they are used, so the
//! configuration imports nothing above it.

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

/// How far a finished round is guaranteed to survive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// WAL with synchronous=NORMAL: survives a killed process, not a power cut.
    Normal,
    /// WAL with synchronous=FULL: every commit is fsynced; survives power loss.
    /// Concurrent rounds share one fsync (group commit).
    Fsync,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "normal" => Ok(Self::Normal),
            "fsync" => Ok(Self::Fsync),
            other => Err(format!(
                "unknown durability {other:?}: use \"normal\" or \"fsync\""
            )),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// What the sanitizer does with a text that trips a check.
pub enum SafetyAction {
    /// Replace the whole text with a fixed fallback.
    Block,
    /// Record, keep the text.
    Warn,
    /// Record for a person to look at, keep the text.
    Review,
    /// Remove what matched (or cut what is too long), keep the rest.
    Sanitize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// The wire protocol a model tier speaks.
pub enum ProviderKind {
    /// `POST {url}/v1/chat/completions`
    OpenAi,
    /// `POST {url}/api/chat`
    Ollama,
}

/// The configured zone (an IANA name), else the machine's.
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    if name.trim().is_empty() {
        return Ok(TimeZone::system());
    }
    TimeZone::get(name.trim()).map_err(|e| {
        format!("{name:?} is not a time zone this machine knows ({e}); use an IANA name such as \"Europe/Berlin\" or \"America/New_York\", or leave it empty for the machine's")
    })
}

/// Where model files are installed: `$CAAL_MODELS_DIR`, else
/// `$XDG_DATA_HOME/caal/models`, else `~/.local/share/caal/models`.
pub fn models_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(dir) = env("CAAL_MODELS_DIR") {
        return PathBuf::from(dir);
    }
    let data = env("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("caal/models")
}

/// A peer the Wyoming door lets in by address: one address
/// ("192.168.1.20", "::1") or a CIDR range ("192.168.1.0/24").
pub fn peer_range(text: &str) -> Option<ipnet::IpNet> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>().ok().or_else(|| {
        text.parse::<std::net::IpAddr>()
            .ok()
            .map(ipnet::IpNet::from)
    })
}

#[cfg(test)]
mod peer_tests {
    use super::peer_range;

    #[test]
    fn peers_are_addresses_or_ranges() {
        let lan = peer_range("192.168.1.0/24").unwrap();
        assert!(lan.contains(&"192.168.1.77".parse::<std::net::IpAddr>().unwrap()));
        assert!(!lan.contains(&"192.168.2.1".parse::<std::net::IpAddr>().unwrap()));
        let one = peer_range(" 10.0.0.5 ").unwrap();
        assert!(one.contains(&"10.0.0.5".parse::<std::net::IpAddr>().unwrap()));
        assert!(!one.contains(&"10.0.0.6".parse::<std::net::IpAddr>().unwrap()));
        assert!(peer_range("::1").is_some());
        for bad in ["", "kitchen", "10.0.0.0/33", "10.0.0"] {
            assert!(peer_range(bad).is_none(), "{bad}");
        }
    }
}
