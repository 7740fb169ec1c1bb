//! `caal say` and `caal chat` while `caal serve` holds the data dir: one
//! process writes a data dir, so instead of refusing, their rounds go through
//! the running service's API (`POST /api/chat`, its bearer token from the data
//! dir) and print what it answers, as they would have printed it themselves.
//! `caal serve` says where it listens in `serve.json` beside its data. A chat
//! through it rings what rings there, read from its live stream.

use std::{
    fs,
    io::{self, BufRead, BufReader, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result, anyhow};
use caal::{ids::ConversationId, round::OpenError, trace::StoreError};
use serde_json::{Value, json};

/// Where a running `caal serve` says it listens (removed when it stops).
pub const SERVE_FILE: &str = "serve.json";

/// Written while `caal serve` runs; removed when it stops cleanly.
pub struct Announced(PathBuf);

impl Drop for Announced {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Says where this process serves the data dir.
pub fn announce(data_dir: &Path, url: &str) -> Result<Announced> {
    let path = data_dir.join(SERVE_FILE);
    let doc = json!({"url": url, "pid": std::process::id()});
    fs::write(&path, format!("{doc}\n"))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Announced(path))
}

/// Whether opening the data dir failed because another process writes it.
pub fn is_locked(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<OpenError>(),
        Some(OpenError::Store(StoreError::Locked { .. }))
    ) || matches!(
        e.downcast_ref::<StoreError>(),
        Some(StoreError::Locked { .. })
    )
}

/// The running service of a data dir, reached through its API.
pub struct Remote {
    url: String,
    token: String,
    agent: ureq::Agent,
}

impl Remote {
    /// The service that holds `data_dir`; `locked` is the error that said
    /// another process holds it (returned as it was when that process is
    /// not a `caal serve` this can reach).
    pub fn find(data_dir: &Path, locked: anyhow::Error) -> Result<Self> {
        let Ok(text) = fs::read_to_string(data_dir.join(SERVE_FILE)) else {
            return Err(locked);
        };
        let doc: Value = serde_json::from_str(&text).map_err(|_| locked)?;
        let url = doc["url"]
            .as_str()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_owned();
        let token = fs::read_to_string(data_dir.join(caal::server::auth::TOKEN_FILE))
            .with_context(|| {
                format!(
                    "caal serve holds {} but its API token is not there",
                    data_dir.display()
                )
            })?
            .trim()
            .to_owned();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build()
            .into();
        Ok(Self { url, token, agent })
    }

    /// Rings, while a chat through the service is open, what rings in the
    /// service (timers and reminders are rounds whose reply goes out on the
    /// `system` channel): its live stream from now on, read in a thread of
    /// its own; a bell line each, as `caal chat` prints them on its own.
    pub fn ring_while_open(&self, conversation: &ConversationId, interactive: bool) {
        let (url, auth, mine) = (
            self.url.clone(),
            format!("Bearer {}", self.token),
            conversation.to_string(),
        );
        // No overall timeout: the stream stays open as long as the chat.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        std::thread::spawn(move || {
            let Ok(mut health) = agent
                .get(&format!("{url}/api/health"))
                .header("Authorization", &auth)
                .call()
            else {
                return;
            };
            let last = health
                .body_mut()
                .read_json::<Value>()
                .ok()
                .and_then(|h| h["last_event_id"].as_i64())
                .unwrap_or(0);
            let Ok(stream) = agent
                .get(&format!("{url}/api/events"))
                .header("Authorization", &auth)
                .header("Last-Event-ID", &last.to_string())
                .call()
            else {
                return;
            };
            let mut kind = String::new();
            for line in BufReader::new(stream.into_body().into_reader()).lines() {
                let Ok(line) = line else { return };
                if let Some(k) = line.strip_prefix("event:") {
                    kind = k.trim().to_owned();
                } else if let Some(data) = line.strip_prefix("data:")
                    && kind == "output.emitted"
                    && let Ok(event) = serde_json::from_str::<Value>(data.trim())
                    && event["payload"]["channel"] == "system"
                {
                    let text = event["payload"]["text"].as_str().unwrap_or_default();
                    let from = event["conversation_id"].as_str().unwrap_or_default();
                    if from == mine {
                        println!("\n🔔 {text}");
                    } else {
                        println!("\n🔔 ({from}) {text}");
                    }
                    if interactive {
                        print!("you> ");
                    }
                    let _ = io::stdout().flush();
                } else if line.is_empty() {
                    kind.clear();
                }
            }
        });
    }

    /// Where the service listens.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One round through the service: its result, as `caal say --json` prints it.
    pub fn say(&self, conversation: &ConversationId, text: &str) -> Result<Value> {
        self.say_in(conversation, None, text)
    }

    /// A round in the client's `area` (None: none said).
    pub fn say_in(
        &self,
        conversation: &ConversationId,
        area: Option<&str>,
        text: &str,
    ) -> Result<Value> {
        let mut body = json!({"conversation_id": conversation, "text": text});
        if let Some(area) = area {
            body["area"] = json!(area);
        }
        let mut response = self
            .agent
            .post(&format!("{}/api/chat", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .send_json(body)
            .map_err(|e| {
                anyhow!(
                    "the data dir is held by caal serve at {}, which does not answer ({e}); is it still running?",
                    self.url
                )
            })?;
        let status = response.status().as_u16();
        let body: Value = response.body_mut().read_json().with_context(|| {
            format!(
                "caal serve at {} answered something that is not JSON",
                self.url
            )
        })?;
        if status != 200 {
            let message = body["error"]
                .as_str()
                .unwrap_or("the service refused the round");
            return Err(anyhow!("{message}"));
        }
        Ok(body)
    }
}

/// `caal say` through the service.
pub fn say(
    remote: &Remote,
    (conversation, area): (&ConversationId, Option<&str>),
    text: &str,
    json: bool,
) -> Result<()> {
    let result = remote.say_in(conversation, area, text)?;
    if json {
        println!("{result}");
    } else {
        println!("{}", result["reply"].as_str().unwrap_or_default());
    }
    Ok(())
}
