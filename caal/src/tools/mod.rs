//! Tool executors: where a command actually runs. The built-in home (kept in
//! `state.db`), an HTTP webhook (n8n-style), or Home Assistant's REST API.
//! Every call has a `call_id`; the ledger in `state.db` makes sure a call_id
//! that has run is never run again, and webhooks receive it as their
//! `Idempotency-Key`.

pub mod ha_home;
mod home;
mod http;
mod timers;
mod tls;

use std::{sync::Arc, time::Instant};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{
    auth::Command,
    command::CommandSpec,
    config::{CommandConfig, ExecutorsConfig},
    ids::CallId,
    state::StateDb,
    trace::{SCHEMA_VERSION, StoreError, now_timestamp},
};

/// Reads an environment variable (injectable, so tests need not set the real environment).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Checks a command's executor at configuration time.
pub fn check_executor(
    id: &str,
    command: &CommandConfig,
    executors: &ExecutorsConfig,
) -> Result<(), String> {
    match Executor::parse(&command.executor) {
        Some(Executor::Builtin) if home::supports(id) => Ok(()),
        Some(Executor::Builtin) => Err(format!(
            "has no built-in executor; set executor = \"home_assistant\" (with service) or \"webhook:<name>\". Built in: {}",
            home::COMMANDS.join(", ")
        )),
        Some(Executor::HomeAssistant) => {
            if executors.home_assistant.is_none() {
                return Err(
                    "uses home_assistant, but [executors.home_assistant] is not configured".into(),
                );
            }
            match command.service.as_deref().and_then(|s| s.split_once('.')) {
                Some((domain, service)) if !domain.is_empty() && !service.is_empty() => Ok(()),
                _ => Err("uses home_assistant and needs service = \"<domain>.<service>\", e.g. \"lock.unlock\"".into()),
            }
        }
        Some(Executor::Webhook(name)) if executors.webhooks.contains_key(name) => Ok(()),
        Some(Executor::Webhook(name)) => Err(format!(
            "names webhook {name:?}, which is not under [executors.webhooks]"
        )),
        None => Err(format!(
            "executor {:?} is unknown; use \"builtin\", \"home_assistant\" or \"webhook:<name>\"",
            command.executor
        )),
    }
}

enum Executor<'a> {
    Builtin,
    HomeAssistant,
    Webhook(&'a str),
}

impl<'a> Executor<'a> {
    fn parse(s: &'a str) -> Option<Self> {
        match s {
            "builtin" => Some(Self::Builtin),
            "home_assistant" => Some(Self::HomeAssistant),
            _ => s
                .strip_prefix("webhook:")
                .filter(|n| !n.is_empty())
                .map(Self::Webhook),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    Ok,
    Failed,
    Timeout,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Failed => "failed",
            ToolStatus::Timeout => "timeout",
        }
    }
}

/// What running a tool call came to.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    pub status: ToolStatus,
    pub result: Value,
    /// For people: the result as a sentence, or what went wrong.
    pub message: String,
    /// A timeout, a refused connection, HTTP 5xx or 429: trying again might work.
    pub transient: bool,
    /// A conversation state this command asks for, applied at the round boundary.
    pub state_out: Option<String>,
    pub latency_ms: f64,
}

impl ToolOutcome {
    pub(crate) fn ok(result: Value, message: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Ok,
            result,
            message: message.into(),
            transient: false,
            state_out: None,
            latency_ms: 0.0,
        }
    }

    pub(crate) fn failed(message: impl Into<String>, transient: bool) -> Self {
        let message = message.into();
        Self {
            status: ToolStatus::Failed,
            result: json!({"error": message}),
            message,
            transient,
            state_out: None,
            latency_ms: 0.0,
        }
    }
}

/// One call of one command, as the executor sees it.
pub struct ToolCall<'a> {
    pub call_id: CallId,
    pub command: &'a Command,
    pub spec: &'a CommandSpec,
    pub conversation_id: &'a str,
    pub round_id: &'a str,
    pub now_ms: i64,
}

impl ToolCall<'_> {
    /// A text parameter as given, if one was (and is not blank).
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        match self.command.params.get(name) {
            Some(crate::command::ParamValue::Text(s)) if !s.trim().is_empty() => Some(s),
            _ => None,
        }
    }
}

/// The executors, configured.
pub struct Tools {
    state: Arc<StateDb>,
    http: http::HttpExecutors,
    /// The home's devices by name, with the id executors are given
    /// (`{device.id}` in Home Assistant `data`: the entity id).
    device_ids: std::collections::BTreeMap<String, String>,
    /// Reminders at a time of day are in this zone.
    time_zone: jiff::tz::TimeZone,
}

impl Tools {
    pub fn new(state: Arc<StateDb>, executors: &ExecutorsConfig, env: EnvLookup) -> Self {
        Self {
            state,
            http: http::HttpExecutors::new(executors, env),
            device_ids: Default::default(),
            time_zone: jiff::tz::TimeZone::system(),
        }
    }

    /// The zone reminders at a time of day are in.
    pub fn with_time_zone(mut self, tz: jiff::tz::TimeZone) -> Self {
        self.time_zone = tz;
        self
    }

    /// The home whose devices `{param.id}` looks up.
    pub fn with_home(mut self, home: &crate::understand::Home) -> Self {
        self.device_ids = home
            .devices
            .iter()
            .map(|d| (d.name.clone(), d.id.clone()))
            .collect();
        self
    }

    /// The tool's id and the inputs it will be given: recorded as `tool.request`.
    pub fn describe(&self, call: &ToolCall<'_>) -> (String, Value) {
        let c = &call.spec.config;
        match Executor::parse(&c.executor) {
            Some(Executor::HomeAssistant) => {
                let service = self.ha_service(call);
                (
                    format!("home_assistant:{service}"),
                    json!({"service": service, "data": self.ha_data(call)}),
                )
            }
            Some(Executor::Webhook(name)) => (format!("webhook:{name}"), json!(webhook_body(call))),
            _ => (
                format!("builtin:{}", call.command.command_id),
                json!(call.command.params),
            ),
        }
    }

    /// Runs the call once. A call_id that has already run is refused.
    ///
    /// A built-in call claims its call_id, acts and records the result in one
    /// transaction. An HTTP call's claim is committed before the request
    /// leaves, so even a crash mid-request never lets the call_id run again.
    pub fn execute(&self, call: &ToolCall<'_>) -> Result<ToolOutcome, StoreError> {
        let (tool_id, _) = self.describe(call);
        let call_id = call.call_id.to_string();
        let started = Instant::now();
        let executor = Executor::parse(&call.spec.config.executor);
        if matches!(executor, Some(Executor::Builtin) | None) {
            return self.state.transaction(|c| {
                if !claim(c, &call_id, &tool_id)? {
                    return Ok(already_ran(&call_id));
                }
                let mut outcome = home::run_in(c, call, &self.time_zone)?;
                outcome.latency_ms = started.elapsed().as_secs_f64() * 1e3;
                finish(c, &call_id, &outcome)?;
                Ok(outcome)
            });
        }
        if !self.state.with(|c| claim(c, &call_id, &tool_id))? {
            return Ok(already_ran(&call_id));
        }
        // The tool boundary: only here do secret_refs become the real values,
        // and what comes back is scrubbed before it is recorded or shown.
        let safety = crate::safety::global();
        let mut outcome = match executor {
            Some(Executor::HomeAssistant) => {
                let mut data = self.ha_data(call);
                safety.resolve_json(&mut data);
                self.http.home_assistant(&self.ha_service(call), &data)
            }
            Some(Executor::Webhook(name)) => {
                let mut body = json!(webhook_body(call));
                safety.resolve_json(&mut body);
                self.http.webhook(name, call, &body)
            }
            Some(Executor::Builtin) | None => unreachable!("built-in calls returned above"),
        };
        safety.scrub_json(&mut outcome.result);
        outcome.message = safety.scrub(&outcome.message).into_owned();
        outcome.latency_ms = started.elapsed().as_secs_f64() * 1e3;
        self.state.with(|c| finish(c, &call_id, &outcome))?;
        Ok(outcome)
    }

    /// How a call_id ended, if it ran: (status, result).
    pub fn call_status(
        &self,
        call_id: &str,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        self.state.with(|c| {
            c.query_row(
                "SELECT status, result FROM tool_calls WHERE call_id = ?1",
                [call_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }
}

/// Records that `call_id` starts; false if it was already recorded.
fn claim(c: &Connection, call_id: &str, tool_id: &str) -> rusqlite::Result<bool> {
    let inserted = c
        .prepare_cached(
            "INSERT INTO tool_calls (call_id, schema_version, tool_id, status, started_at) VALUES (?1, ?2, ?3, 'started', ?4)
             ON CONFLICT (call_id) DO NOTHING",
        )?
        .execute(params![call_id, SCHEMA_VERSION, tool_id, now_timestamp()])?;
    Ok(inserted == 1)
}

fn finish(c: &Connection, call_id: &str, outcome: &ToolOutcome) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE tool_calls SET status = ?2, finished_at = ?3, result = ?4 WHERE call_id = ?1",
    )?
    .execute(params![
        call_id,
        outcome.status.as_str(),
        now_timestamp(),
        outcome.result.to_string()
    ])?;
    Ok(())
}

fn already_ran(call_id: &str) -> ToolOutcome {
    ToolOutcome::failed(
        format!("call {call_id} has already run; it is never run twice"),
        false,
    )
}

impl Tools {
    /// A Home Assistant service call's `data`: the command's `data`
    /// templates over its parameters; `{device.id}` is the id of the device
    /// a parameter names (an entity id, for a home imported from Home
    /// Assistant), `{device}` its name.
    fn ha_data(&self, call: &ToolCall<'_>) -> Value {
        let lookup = |name: &str| self.ha_value(call, name);
        let data: serde_json::Map<String, Value> = call
            .spec
            .config
            .data
            .iter()
            .map(|(k, template)| {
                (
                    k.clone(),
                    Value::String(crate::command::render_with(template, lookup)),
                )
            })
            .collect();
        Value::Object(data)
    }

    /// The service, its placeholders filled the same way ("light.turn_{state}").
    fn ha_service(&self, call: &ToolCall<'_>) -> String {
        let service = call.spec.config.service.as_deref().unwrap_or_default();
        crate::command::render_with(service, |name| self.ha_value(call, name))
    }

    fn ha_value(&self, call: &ToolCall<'_>, name: &str) -> Option<String> {
        let params = &call.command.params;
        match name.strip_suffix(".id") {
            Some(param) => params.get(param).map(|v| {
                let said = v.to_string();
                self.device_ids.get(&said).cloned().unwrap_or(said)
            }),
            None => params.get(name).map(ToString::to_string),
        }
    }
}

#[derive(Serialize)]
struct WebhookBody<'a> {
    call_id: String,
    command_id: &'a str,
    params: &'a std::collections::BTreeMap<String, crate::command::ParamValue>,
    conversation_id: &'a str,
    round_id: &'a str,
}

fn webhook_body<'a>(call: &'a ToolCall<'a>) -> WebhookBody<'a> {
    WebhookBody {
        call_id: call.call_id.to_string(),
        command_id: &call.command.command_id,
        params: &call.command.params,
        conversation_id: call.conversation_id,
        round_id: call.round_id,
    }
}

#[cfg(test)]
mod tests;
