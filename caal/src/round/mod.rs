//! The round lifecycle: intake (ids, `state_in` fixed), normalisation,
//! routing, execution and the reply, each step appended to the trace as it
//! happens. The round's reply is released only once its terminal event is
//! durable, and the conversation state changes only at the round boundary.

use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use crate::{
    config::{Config, ConfigError, RouteType},
    ids::{BucketId, CallId, ConversationId},
    router::{RouteDecision, Router, normalize},
    trace::{
        EventDraft, EventStatus, EventType, OpenRound, RoundSpec, SCHEMA_VERSION, StoreError,
        TraceStore,
    },
};

/// Where an utterance came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Text,
    Voice,
    Ui,
    Api,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Text => "text",
            Channel::Voice => "voice",
            Channel::Ui => "ui",
            Channel::Api => "api",
        }
    }
}

/// The result of one round, as `caal say --json` prints it and the API returns it.
#[derive(Clone, Debug, Serialize)]
pub struct RoundResult {
    pub schema_version: u32,
    pub library_id: String,
    pub bucket_id: String,
    pub conversation_id: String,
    pub round_id: String,
    pub round_seq: i64,
    pub route_code: String,
    pub source_rule: Option<String>,
    pub command_id: Option<String>,
    pub auth_level: u8,
    /// `ok` or `failed`.
    pub status: String,
    pub reply: String,
    pub state_in: String,
    pub state_out: String,
    pub failure_code: Option<String>,
    pub failure_reason: Option<String>,
    pub audio_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    #[error(
        "nothing to say: the text is empty; type a request such as \"turn on the kitchen lights\""
    )]
    EmptyInput,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Runs rounds against one trace store with one configuration.
#[derive(Clone)]
pub struct Engine {
    store: TraceStore,
    router: Arc<Router>,
    config: Arc<Config>,
}

impl Engine {
    pub fn new(store: TraceStore, config: Config) -> Result<Self, ConfigError> {
        let router = Router::compile(&config)?;
        Ok(Self {
            store,
            router: Arc::new(router),
            config: Arc::new(config),
        })
    }

    pub fn store(&self) -> &TraceStore {
        &self.store
    }

    /// One typed round in `conversation`.
    pub fn text_round(
        &self,
        conversation: &ConversationId,
        text: &str,
        channel: Channel,
    ) -> Result<RoundResult, RoundError> {
        if text.trim().is_empty() {
            return Err(RoundError::EmptyInput);
        }
        let state_in = self
            .store
            .reader()
            .last_state_out(conversation)?
            .unwrap_or_else(|| self.config.conversation.default_state.clone());
        let round = self.store.begin_round(RoundSpec {
            conversation_id: conversation.clone(),
            bucket_id: BucketId::for_conversation(conversation),
            state_in: state_in.clone(),
            channel: channel.as_str().into(),
            audio_id: None,
        })?;
        let header = round.header().clone();
        let mut result = RoundResult {
            schema_version: SCHEMA_VERSION,
            library_id: header.library_id.to_string(),
            bucket_id: header.bucket_id.to_string(),
            conversation_id: header.conversation_id.to_string(),
            round_id: header.round_id.to_string(),
            round_seq: header.round_seq,
            route_code: String::new(),
            source_rule: None,
            command_id: None,
            auth_level: 1,
            status: "ok".into(),
            reply: String::new(),
            state_in: state_in.clone(),
            state_out: state_in.clone(),
            failure_code: None,
            failure_reason: None,
            audio_id: None,
        };
        match self.run_steps(&round, text, channel, &mut result) {
            Ok(()) if result.status == "ok" => round.complete(&result.state_out)?,
            Ok(()) => {
                let code = result
                    .failure_code
                    .clone()
                    .unwrap_or_else(|| "round.failed".into());
                let reason = result
                    .failure_reason
                    .clone()
                    .unwrap_or_else(|| "the round failed".into());
                round.fail(&code, &reason)?;
            }
            Err(e) => {
                let reason = e.to_string();
                round.fail("round.error", &reason)?;
                return Err(e.into());
            }
        }
        Ok(result)
    }

    fn run_steps(
        &self,
        round: &OpenRound,
        text: &str,
        channel: Channel,
        result: &mut RoundResult,
    ) -> Result<(), StoreError> {
        round.append(EventDraft::new(
            EventType::InputReceived,
            json!({"raw_text": text, "channel": channel.as_str()}),
        ))?;
        let normalized = normalize(text);
        round.append(EventDraft::new(
            EventType::InputNormalized,
            json!({"normalized_text": normalized}),
        ))?;
        let decision = self.router.route(&normalized);
        round.append(EventDraft::new(
            EventType::RouteSelected,
            json!({
                "route_code": decision.route_code,
                "source_rule": decision.source_rule,
                "topic": decision.topic,
                "auth_level": decision.auth_level,
                "macro": null,
                "command_id": decision.command_id,
                "params": decision.params,
            }),
        ))?;
        result.route_code = decision.route_code.clone();
        result.source_rule = decision.source_rule.clone();
        result.command_id = decision.command_id.clone();
        result.auth_level = decision.auth_level;
        result.reply = match decision.route {
            None | Some(RouteType::Chat) => decision.reply.clone(),
            Some(RouteType::Command) if decision.auth_level == 1 => {
                self.execute(round, &decision)?
            }
            Some(route) => {
                // Governed commands and the other route types arrive with the
                // router and authority issue; until then nothing runs.
                result.status = "failed".into();
                result.failure_code = Some("route.unsupported".into());
                result.failure_reason = Some(format!(
                    "{} routes at authority level {} are not available in this build",
                    route.as_str(),
                    decision.auth_level
                ));
                if let Some(command_id) = &decision.command_id {
                    round.append(
                        EventDraft::new(
                            EventType::CommandExecuted,
                            json!({"command_id": command_id, "status": "skipped", "result": null, "auth_level": decision.auth_level}),
                        )
                        .with_status(EventStatus::Skipped),
                    )?;
                }
                "I can't do that yet: it needs a confirmation step this build does not have.".into()
            }
        };
        round.append(EventDraft::new(
            EventType::OutputEmitted,
            json!({"text": result.reply, "channel": channel.as_str()}),
        ))?;
        Ok(())
    }

    /// Runs a level-1 command. Devices arrive with the tool executors; for
    /// now a command's effect is its recorded parameters.
    fn execute(&self, round: &OpenRound, decision: &RouteDecision) -> Result<String, StoreError> {
        let call_id = CallId::new();
        round.append(
            EventDraft::new(
                EventType::CommandExecuted,
                json!({
                    "command_id": decision.command_id,
                    "status": "ok",
                    "result": {"params": decision.params},
                    "auth_level": decision.auth_level,
                }),
            )
            .with_call(call_id),
        )?;
        Ok(decision.reply.clone())
    }
}
