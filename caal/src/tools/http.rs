//! Executors reached over HTTP: webhooks (POST JSON, the call_id as
//! `Idempotency-Key`) and Home Assistant (`POST /api/services/<domain>/<service>`
//! with a bearer token read from the environment, never recorded).

use std::{collections::BTreeMap, time::Duration};

use serde::Serialize;
use serde_json::{Value, json};
use ureq::Agent;

use super::{EnvLookup, ToolCall, ToolOutcome, ToolStatus};
use crate::config::{ExecutorsConfig, HomeAssistantConfig, WebhookConfig};

pub struct HttpExecutors {
    home_assistant: Option<(HomeAssistantConfig, Agent)>,
    webhooks: BTreeMap<String, (WebhookConfig, Agent)>,
    env: EnvLookup,
}

pub(super) fn agent(timeout_ms: u64) -> Agent {
    Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(timeout_ms)))
        .http_status_as_error(false)
        .build()
        .into()
}

impl HttpExecutors {
    pub fn new(config: &ExecutorsConfig, env: EnvLookup) -> Self {
        Self {
            home_assistant: config.home_assistant.clone().map(|c| {
                let a = agent(c.timeout_ms);
                (c, a)
            }),
            webhooks: config
                .webhooks
                .iter()
                .map(|(n, c)| (n.clone(), (c.clone(), agent(c.timeout_ms))))
                .collect(),
            env,
        }
    }

    pub fn webhook(&self, name: &str, call: &ToolCall<'_>, body: &impl Serialize) -> ToolOutcome {
        let Some((config, agent)) = self.webhooks.get(name) else {
            return ToolOutcome::failed(format!("webhook {name} is not configured"), false);
        };
        let sent = agent
            .post(&config.url)
            .header("Idempotency-Key", &call.call_id.to_string())
            .header("X-Caal-Call-Id", &call.call_id.to_string())
            .send_json(body);
        outcome(&format!("the {name} webhook"), sent)
    }

    /// `service` as rendered over the call's parameters ("light.turn_{state}").
    pub fn home_assistant(&self, service: &str, data: &Value) -> ToolOutcome {
        let Some((config, agent)) = &self.home_assistant else {
            return ToolOutcome::failed(
                "Home Assistant is not configured ([executors.home_assistant])",
                false,
            );
        };
        let Some((domain, name)) = service.split_once('.') else {
            return ToolOutcome::failed(
                format!("service {service:?} is not <domain>.<service>"),
                false,
            );
        };
        let Some(token) = (self.env)(&config.token_env).filter(|t| !t.trim().is_empty()) else {
            return ToolOutcome::failed(
                format!(
                    "no Home Assistant token: set {} to a long-lived access token",
                    config.token_env
                ),
                false,
            );
        };
        let url = format!(
            "{}/api/services/{domain}/{name}",
            config.url.trim_end_matches('/')
        );
        let sent = agent
            .post(&url)
            .header("Authorization", &format!("Bearer {}", token.trim()))
            .send_json(data);
        outcome("Home Assistant", sent)
    }
}

/// Turns an HTTP exchange into an outcome: 2xx ok; 429 and 5xx transient; a
/// timeout or a refused connection transient; anything else a plain failure.
fn outcome(who: &str, sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> ToolOutcome {
    match sent {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            if (200..300).contains(&status) {
                ToolOutcome::ok(json!({"http_status": status, "body": body}), "")
            } else {
                let transient = status == 429 || status >= 500;
                let mut out =
                    ToolOutcome::failed(format!("{who} answered HTTP {status}"), transient);
                out.result = json!({"http_status": status, "body": body});
                out
            }
        }
        Err(ureq::Error::Timeout(_)) => {
            let mut out = ToolOutcome::failed(format!("{who} did not answer in time"), true);
            out.status = ToolStatus::Timeout;
            out
        }
        Err(ureq::Error::Io(e)) => ToolOutcome::failed(format!("cannot reach {who}: {e}"), true),
        Err(ureq::Error::ConnectionFailed) | Err(ureq::Error::HostNotFound) => {
            ToolOutcome::failed(format!("cannot reach {who}"), true)
        }
        Err(e) => ToolOutcome::failed(format!("{who} call failed: {e}"), false),
    }
}
