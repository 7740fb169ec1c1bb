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
    /// Its agent, or why there is none (a CA file that cannot be read).
    home_assistant: Option<(HomeAssistantConfig, Result<Agent, String>)>,
    webhooks: BTreeMap<String, (WebhookConfig, Agent)>,
    env: EnvLookup,
}

/// An agent that gives up after `timeout_ms`; over https it trusts the
/// certificates of `ca` when given, else Mozilla's roots.
pub(super) fn agent(timeout_ms: u64, ca: Option<&[ureq::tls::Certificate<'static>]>) -> Agent {
    Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(timeout_ms)))
        .http_status_as_error(false)
        .tls_config(super::tls::ureq_tls(ca))
        .build()
        .into()
}

impl HttpExecutors {
    pub fn new(config: &ExecutorsConfig, env: EnvLookup) -> Self {
        Self {
            home_assistant: config.home_assistant.clone().map(|c| {
                let ca = c.ca_file.as_deref().map(super::tls::ca_certificates);
                let a = ca.transpose().map(|ca| agent(c.timeout_ms, ca.as_deref()));
                (c, a)
            }),
            webhooks: config
                .webhooks
                .iter()
                .map(|(n, c)| (n.clone(), (c.clone(), agent(c.timeout_ms, None))))
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
        let agent = match agent {
            Ok(a) => a,
            Err(why) => return ToolOutcome::failed(why.clone(), false),
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
    // Not transient: asking again meets the same certificate.
    if let Err(e) = &sent
        && let Some(detail) = super::tls::certificate_problem(e)
    {
        return ToolOutcome::failed(
            format!(
                "{who} showed a certificate this machine does not trust ({detail}); set its ca_file to the CA certificate (PEM) that signed it"
            ),
            false,
        );
    }
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
