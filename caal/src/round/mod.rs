//! The round lifecycle: intake (ids, `state_in` fixed), normalisation,
//! routing, the authority gate, execution through the tools, and the reply,
//! each step appended to the trace as it happens. The reply is released only
//! once the round's terminal event is durable; the conversation's state, its
//! pending confirmation and its undo records change only then, at the round
//! boundary, never in the middle of a round.

use std::{path::Path, sync::Arc};

use serde::Serialize;
use serde_json::{Value, json};

use crate::{
    auth::{
        self, AuthLevel, Command, CommandChain, GateAction, Pending, Resolution, Utterance,
        boundary::{Boundary, PendingChange, Undone},
        store::UndoRecord,
    },
    config::{Config, ConfigError, RouteType},
    ids::{BucketId, CallId, ConversationId, LibraryId, LibraryIdError},
    llm::{Tiers, toolbox::Toolbox, validate::Validator},
    memory::{MEMORY_FILE, MemoryError, MemoryStore},
    reasoning::{
        RoundReasoning, ToolDecision,
        receipt::{ReceiptError, load_or_create_key},
    },
    router::{CommandSpec, Intent, RouteDecision, Router, normalize, render, render_with},
    safety::Sanitizer,
    state::{Clock, STATE_FILE, StateDb, SystemClock, rfc3339_ms},
    tools::{EnvLookup, ToolCall, ToolStatus, Tools},
    trace::{
        DB_FILE, EventDraft, EventStatus, EventType, OpenRound, RoundSpec, SCHEMA_VERSION,
        StoreError, TraceStore,
    },
};

/// Why a person confirmed an action whose reasoning failed its checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideReason {
    FalsePositive,
    AcceptedRisk,
    EmergencyOverride,
    ThresholdTooStrict,
}

impl OverrideReason {
    pub fn as_str(self) -> &'static str {
        match self {
            OverrideReason::FalsePositive => "false_positive",
            OverrideReason::AcceptedRisk => "accepted_risk",
            OverrideReason::EmergencyOverride => "emergency_override",
            OverrideReason::ThresholdTooStrict => "threshold_too_strict",
        }
    }
}

/// Where an utterance came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Text,
    Voice,
    Ui,
    Api,
    /// The operator, from `caal bucket` and `caal audio`.
    Cli,
    /// CAAL itself or a service it trusts (LiveKit's verified webhooks).
    System,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Text => "text",
            Channel::Voice => "voice",
            Channel::Ui => "ui",
            Channel::Api => "api",
            Channel::Cli => "cli",
            Channel::System => "system",
        }
    }
}

/// A confirmation the round left waiting.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PendingView {
    pub confirmation_id: String,
    pub summary: String,
    pub prompt: String,
    pub auth_level: AuthLevel,
    pub confirmations_required: u8,
    pub confirmations_received: u8,
    pub expires_at: String,
}

impl PendingView {
    pub fn of(p: &Pending) -> Self {
        Self {
            confirmation_id: p.confirmation_id.clone(),
            summary: p.chain.summary.clone(),
            prompt: p.prompt.clone(),
            auth_level: p.chain.chain_level,
            confirmations_required: p.required,
            confirmations_received: p.received,
            expires_at: rfc3339_ms(p.expires_at_ms),
        }
    }
}

/// One command the round ran (or refused to run).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CommandRun {
    pub command_id: String,
    pub call_id: Option<String>,
    pub status: String,
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
    pub pending_confirmation: Option<PendingView>,
    pub commands: Vec<CommandRun>,
    /// What asking a model came to, when the round asked one.
    pub llm: Option<LlmSummary>,
    /// Attempts that were tried again (model answers, read-only tool calls), and why.
    pub retries: Vec<RetryNote>,
    /// The round's tool decisions with their rationale and outcome (absent
    /// when the round decided and ran no command).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<RoundReasoning>,
}

impl RoundResult {
    /// The routing decision's part of the result.
    fn decided(&mut self, d: &RouteDecision) {
        self.route_code = d.route_code.clone();
        self.source_rule = d.source_rule.clone();
        self.command_id = d.command_id.clone();
        self.auth_level = d.auth_level.get();
    }
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

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    LibraryId(#[from] LibraryIdError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Receipt(#[from] ReceiptError),
    #[error("cannot create the data dir {path}: {source}; choose another with --data-dir")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
}

/// How an engine reaches the world: the environment (for tokens) and the clock.
pub struct EngineOptions {
    pub library_id: Option<String>,
    pub env: EnvLookup,
    pub clock: Arc<dyn Clock>,
    /// The model tiers (from `Tiers::guard`); none: routes that need a model
    /// say their fallback.
    pub llm: Option<Arc<Tiers>>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            library_id: std::env::var("CAAL_LIBRARY_ID").ok(),
            env: Arc::new(|k| std::env::var(k).ok()),
            clock: Arc::new(SystemClock),
            llm: None,
        }
    }
}

/// Runs rounds against one data dir with one configuration.
#[derive(Clone)]
pub struct Engine {
    store: TraceStore,
    state: Arc<StateDb>,
    memory: Arc<MemoryStore>,
    router: Arc<Router>,
    tools: Arc<Tools>,
    sanitizer: Arc<Sanitizer>,
    config: Arc<Config>,
    clock: Arc<dyn Clock>,
    llm: Option<Arc<Tiers>>,
    toolbox: Arc<Toolbox>,
    validators: Arc<Vec<Box<dyn Validator>>>,
    receipt_key: Arc<ed25519_dalek::SigningKey>,
    voice: Arc<voice::VoiceParts>,
    /// What the scheduler rang, for clients of its conversation.
    notify: tokio::sync::broadcast::Sender<schedule::Notification>,
    wake: Arc<schedule::Wake>,
}

/// What the steps of a round came to.
struct Steps {
    reply: String,
    failure: Option<(String, String)>,
    boundary: Boundary,
    commands: Vec<CommandRun>,
    retries: Vec<RetryNote>,
    /// Commands run outside a gated chain (an undo's compensating command).
    decisions: Vec<ToolDecision>,
}

impl Steps {
    fn reply(reply: impl Into<String>) -> Self {
        Self {
            reply: reply.into(),
            failure: None,
            boundary: Boundary::default(),
            commands: Vec::new(),
            retries: Vec::new(),
            decisions: Vec::new(),
        }
    }

    fn failed(reply: impl Into<String>, code: &str, reason: impl Into<String>) -> Self {
        Self {
            failure: Some((code.to_owned(), reason.into())),
            ..Self::reply(reply)
        }
    }
}

impl Engine {
    /// Opens the data dir: its trace store (recovering crashed rounds), its state, the executors.
    pub fn open(
        data_dir: &Path,
        config: Config,
        options: EngineOptions,
    ) -> Result<Self, OpenError> {
        std::fs::create_dir_all(data_dir).map_err(|source| OpenError::DataDir {
            path: data_dir.display().to_string(),
            source,
        })?;
        let library = LibraryId::load_or_create(data_dir, options.library_id.as_deref())?;
        let store = TraceStore::open(&data_dir.join(DB_FILE), library, config.store.durability)?;
        let state = Arc::new(StateDb::open(&data_dir.join(STATE_FILE))?);
        auth::boundary::arm_crash_points(&*options.env);
        // A process that stopped between a round's trace and its state
        // changes left the state behind the trace: bring it level.
        if let Some(mark) = store.crashed_since() {
            let recorded = store.reader().boundaries_after(mark)?;
            let applied = state.reconcile(&recorded)?;
            if applied > 0 {
                tracing::warn!(
                    "applied the state changes of {applied} round(s) that a stopped process had recorded but not applied"
                );
            }
        }
        let memory = Arc::new(MemoryStore::open(
            &data_dir.join(MEMORY_FILE),
            &config.memory,
        )?);
        let key = Arc::new(load_or_create_key(data_dir)?);
        let audio_dir = crate::voice::store::audio_dir(&config.voice, data_dir);
        Ok(Self::new(
            store, state, memory, key, audio_dir, config, options,
        )?)
    }

    fn new(
        store: TraceStore,
        state: Arc<StateDb>,
        memory: Arc<MemoryStore>,
        receipt_key: Arc<ed25519_dalek::SigningKey>,
        audio_dir: std::path::PathBuf,
        config: Config,
        options: EngineOptions,
    ) -> Result<Self, ConfigError> {
        let library =
            crate::understand::library::load_configured(&config.understand, &*options.env)
                .unwrap_or_else(|e| {
                    tracing::warn!("{e}");
                    None
                });
        let embedder = crate::understand::embed::load_configured(&config.understand, &*options.env)
            .unwrap_or_else(|e| {
                tracing::warn!("{e}");
                None
            });
        let router = Router::compile_with(&config, library, embedder)?;
        // Known secrets are scrubbed wherever they appear, whatever their shape.
        let safety = crate::safety::global();
        let token_env = config
            .executors
            .home_assistant
            .as_ref()
            .map(|h| h.token_env.clone());
        for name in config.safety.secret_env.iter().chain(token_env.iter()) {
            if let Some(value) = (options.env)(name) {
                safety.seed(&name.to_lowercase(), &value);
            }
        }
        if let Some(secret) = (options.env)(crate::voice::livekit::SECRET_ENV) {
            safety.seed("livekit_api_secret", &secret);
        }
        let models_dir = crate::llm::tiers::models_dir(&*options.env);
        let voice = Arc::new(voice::VoiceParts::new(audio_dir, models_dir));
        let time_zone =
            crate::understand::clock::time_zone(&config.schedule.time_zone).map_err(|problem| {
                ConfigError::Value {
                    key: "schedule.time_zone".into(),
                    problem,
                }
            })?;
        let tools = Tools::new(state.clone(), &config.executors, options.env)
            .with_home(router.home())
            .with_time_zone(time_zone);
        let toolbox = Toolbox::new(&router, &config.reasoning);
        Ok(Self {
            store,
            state,
            memory,
            receipt_key,
            toolbox: Arc::new(toolbox),
            validators: Arc::new(crate::llm::validate::builtin()),
            llm: options.llm,
            router: Arc::new(router),
            tools: Arc::new(tools),
            sanitizer: Arc::new(Sanitizer::new(config.safety.sanitizer())),
            config: Arc::new(config),
            clock: options.clock,
            voice,
            notify: tokio::sync::broadcast::channel(4096).0,
            wake: Arc::default(),
        })
    }

    pub fn store(&self) -> &TraceStore {
        &self.store
    }

    pub fn state(&self) -> &StateDb {
        &self.state
    }

    pub fn memory(&self) -> &MemoryStore {
        &self.memory
    }

    /// The key receipts are signed with.
    pub fn receipt_key(&self) -> &ed25519_dalek::SigningKey {
        &self.receipt_key
    }

    /// The engine's clock (injectable in tests).
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn router(&self) -> &Router {
        &self.router
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The conversation's current state (its last round's `state_out`).
    pub fn conversation_state(&self, conversation: &ConversationId) -> Result<String, StoreError> {
        Ok(self
            .state
            .conversation_state(conversation)?
            .unwrap_or_else(|| self.config.conversation.default_state.clone()))
    }

    /// One typed round in `conversation`.
    pub fn text_round(
        &self,
        conversation: &ConversationId,
        text: &str,
        channel: Channel,
    ) -> Result<RoundResult, RoundError> {
        self.round_with(conversation, text, channel, None, None)
    }

    /// A confirmation answered from a UI: "yes" or "no" in its conversation;
    /// a "yes" that overrides failed reasoning checks may say why
    /// (`false_positive`, `accepted_risk`, `emergency_override`,
    /// `threshold_too_strict`), and the receipt records it.
    pub fn answer_confirmation(
        &self,
        conversation: &ConversationId,
        accept: bool,
        channel: Channel,
        override_reason: Option<OverrideReason>,
    ) -> Result<RoundResult, RoundError> {
        let text = if accept { "yes" } else { "no" };
        self.round_with(conversation, text, channel, override_reason, None)
    }

    fn round_with(
        &self,
        conversation: &ConversationId,
        text: &str,
        channel: Channel,
        override_reason: Option<OverrideReason>,
        voice: Option<&VoiceInput>,
    ) -> Result<RoundResult, RoundError> {
        if text.trim().is_empty() {
            return Err(RoundError::EmptyInput);
        }
        let state_in = self.conversation_state(conversation)?;
        let round = self.store.begin_round(RoundSpec {
            conversation_id: conversation.clone(),
            bucket_id: BucketId::for_conversation(conversation),
            state_in: state_in.clone(),
            channel: channel.as_str().into(),
            audio_id: voice.map(|v| v.audio_id),
        })?;
        // Read after the round began: rounds of one conversation run one at
        // a time, so nothing changes this until the round ends.
        let pending = self.state.pending(conversation)?;
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
            audio_id: voice.map(|v| v.audio_id.to_string()),
            pending_confirmation: None,
            commands: Vec::new(),
            llm: None,
            retries: Vec::new(),
            reasoning: None,
        };
        let steps = match self.run_steps(
            &round,
            text,
            channel,
            &state_in,
            pending.as_ref(),
            override_reason,
            voice,
            &mut result,
        ) {
            Ok(steps) => steps,
            Err(e) => {
                round.fail("round.error", &e.to_string())?;
                return Err(e.into());
            }
        };
        let mut boundary = steps.boundary;
        boundary.state_out = boundary.state_out.filter(|s| *s != state_in);
        // Replies quote tools and people; what reaches a screen or a speaker is scrubbed too.
        result.reply = crate::safety::global().scrub(&steps.reply).into_owned();
        result.commands = steps.commands;
        result.retries.extend(steps.retries);
        if let Some(state) = &boundary.state_out {
            result.state_out = state.clone();
        }
        let pending_after = match &boundary.pending {
            Some(PendingChange::Set(next)) => Some(next),
            Some(PendingChange::Cleared) => None,
            None => pending.as_ref(),
        };
        result.pending_confirmation = pending_after.map(PendingView::of);
        let recorded = boundary.to_json();
        auth::boundary::crash_point("round.before_end");
        match &steps.failure {
            None => round.complete_with(&result.state_out, recorded)?,
            Some((code, reason)) => {
                result.status = "failed".into();
                result.failure_code = Some(code.clone());
                result.failure_reason = Some(reason.clone());
                round.fail_with(code, reason, recorded)?;
            }
        }
        // The round is durable: now the conversation may change, all at once.
        if !boundary.is_empty() {
            self.state
                .apply_boundary(conversation, header.round_seq, &boundary)?;
        }
        // It may have set, moved or cancelled a timer.
        self.wake.poke();
        Ok(result)
    }

    /// A round the engine records of something done to it rather than said
    /// to the assistant (an operator's command, a service's webhook): begun
    /// in `conversation` (in `bucket`, else the conversation's own) with
    /// `said` as its input. Returns the open round and the conversation's
    /// state, which such a round leaves as it is.
    pub(crate) fn recorded_round(
        &self,
        conversation: &str,
        bucket: Option<&BucketId>,
        channel: Channel,
        said: &str,
    ) -> Result<(OpenRound, String), StoreError> {
        let conversation: ConversationId = conversation
            .parse()
            .map_err(|e: crate::ids::InvalidId| StoreError::Sqlite(e.to_string()))?;
        let state = self.conversation_state(&conversation)?;
        let round = self.store.begin_round(RoundSpec {
            bucket_id: bucket
                .cloned()
                .unwrap_or_else(|| BucketId::for_conversation(&conversation)),
            conversation_id: conversation,
            state_in: state.clone(),
            channel: channel.as_str().into(),
            audio_id: None,
        })?;
        round.append(EventDraft::new(
            EventType::InputReceived,
            json!({"raw_text": said, "channel": channel.as_str()}),
        ))?;
        Ok((round, state))
    }

    #[allow(clippy::too_many_arguments)]
    fn run_steps(
        &self,
        round: &OpenRound,
        text: &str,
        channel: Channel,
        state_in: &str,
        pending: Option<&Pending>,
        override_reason: Option<OverrideReason>,
        voice: Option<&VoiceInput>,
        result: &mut RoundResult,
    ) -> Result<Steps, StoreError> {
        let now = self.clock.now_ms();
        let said_chars = text.chars().count();
        // Secrets are replaced before the text is stored, routed or sent.
        let (text, kinds) = crate::safety::global().scrub_counted(text);
        let mut received = json!({"raw_text": text, "channel": channel.as_str()});
        if let Some(v) = voice {
            // The audio's hash goes into the chain with what was heard.
            received["audio_id"] = json!(v.audio_id);
            received["audio_sha256"] = json!(v.audio_sha256);
            received["transcript"] = json!({
                "model": v.transcript.model,
                "language": v.transcript.language,
                "confidence": v.transcript.confidence,
                "least": v.transcript.least,
                "audio_ms": v.transcript.audio_ms,
                "stt_ms": v.transcript.stt_ms,
            });
        }
        round.append(EventDraft::new(EventType::InputReceived, received))?;
        if !kinds.is_empty() {
            let mut distinct = kinds.clone();
            distinct.sort_unstable();
            distinct.dedup();
            round.append(EventDraft::new(
                EventType::SafetyRedacted,
                json!({"count": kinds.len(), "kinds": distinct, "field": "input"}),
            ))?;
        }
        let (text, decisions) = self.sanitizer.check(&text);
        for d in &decisions {
            round.append(EventDraft::new(
                EventType::SafetyChecked,
                json!({"check": d.check, "action": d.action, "rules": d.rules, "message": d.message,
                       "field": "input", "needs_review": d.action == crate::safety::Action::Review}),
            ))?;
        }
        let normalized = normalize(&text);
        round.append(EventDraft::new(
            EventType::InputNormalized,
            json!({"normalized_text": normalized}),
        ))?;
        // Input that carries no request is asked for again, not routed; it
        // changes nothing, so a confirmation waiting for a "yes" still waits.
        let incoherent =
            crate::retry::absurd_length(said_chars, self.config.safety.max_input_chars)
                .or_else(|| crate::retry::incoherence(&text));
        if let Some(incoherent) = incoherent {
            round.append(
                EventDraft::new(
                    EventType::ValidatorRan,
                    json!({"validator_id": "incoherent_input", "code": incoherent.code, "status": "retry",
                           "message": incoherent.message}),
                )
                .with_status(EventStatus::Failed),
            )?;
            round.append(EventDraft::new(
                EventType::RouteSelected,
                json!({"route_code": "intent.incoherent", "source_rule": null, "topic": null, "auth_level": 1,
                       "macro": null, "command_id": null, "params": {}, "state": state_in}),
            ))?;
            result.route_code = "intent.incoherent".into();
            let steps = Steps::reply(crate::retry::REPEAT_PLEASE);
            round.append(EventDraft::new(
                EventType::OutputEmitted,
                json!({"text": steps.reply, "channel": channel.as_str()}),
            ))?;
            return Ok(steps);
        }
        let mut decision = self.router.route(&normalized, state_in);
        let bar = self.config.voice.min_guess_word;
        if let Some(v) = voice {
            decision = self.router.heard(decision, v.transcript.least, bar);
        }
        let policy = self.router.state(state_in);
        let candidates = match &decision.intent {
            Intent::Ambiguous { candidates } => json!(candidates),
            _ => Value::Null,
        };
        round.append(EventDraft::new(
            EventType::RouteSelected,
            json!({
                "route_code": decision.route_code,
                "source_rule": decision.source_rule,
                "topic": decision.topic,
                "auth_level": decision.auth_level,
                "macro": decision.macro_name,
                "command_id": decision.command_id,
                "params": decision.params,
                "state": state_in,
                "state_policy": policy.map(|p| json!({"unmatched": p.unmatched, "escalation": p.escalation, "prefer_local": p.prefer_local})),
                "candidates": candidates,
                "layer": decision.layer,
                "understood": decision.understood,
            }),
        ))?;
        result.decided(&decision);
        // The meaning layer was not sure: a model chooses among its nearest.
        if !decision.choices.is_empty() {
            let consulted = self.consult(round, &text, decision, state_in)?;
            decision = consulted.decision;
            if let Some(v) = voice {
                decision = self.router.heard(decision, v.transcript.least, bar);
            }
            if consulted.decided {
                result.decided(&decision);
            }
        }
        if let Some(topic) = &decision.topic
            && !matches!(decision.intent, Intent::Memory { .. })
        {
            self.topic_hits(round, topic, now)?;
        }

        let mut narrative: Option<String> = None;
        let mut decisions: Vec<ToolDecision> = Vec::new();
        if let Intent::Think { route, fallback } = &decision.intent {
            decision.intent = match (&self.llm, fallback) {
                // Research runs beside the conversation; this round answers now.
                (Some(_), _) if *route == RouteType::Research => {
                    self.enqueue_research(round, &text, decision.topic.as_deref())?;
                    Intent::Reply(jobs::ACCEPTED.into())
                }
                (Some(_), _) => {
                    let thought = self.think(round, &text, *route, state_in)?;
                    result.llm = Some(thought.summary);
                    result.retries = thought.retries;
                    narrative = thought.narrative;
                    if !thought.blocked.is_empty() {
                        self.record_decisions(round, &thought.blocked)?;
                        for c in &thought.blocked {
                            decisions.push(reasoning::tool_decision(c, "blocked", None));
                            if let Some(d) = &c.decision {
                                self.receipt(
                                    round,
                                    &c.command_id,
                                    json!(c.params),
                                    d,
                                    None,
                                    "not_run",
                                    "blocked",
                                    0,
                                    None,
                                )?;
                            }
                        }
                    }
                    if let Intent::Chain(chain) = &thought.intent {
                        // The model chose what to do: that decision is recorded too.
                        round.append(EventDraft::new(
                            EventType::RouteSelected,
                            json!({
                                "route_code": "intent.command",
                                "source_rule": null,
                                "decided_by": "llm",
                                "topic": decision.topic,
                                "auth_level": chain.chain_level,
                                "macro": null,
                                "command_id": chain.command_id(),
                                "params": chain.commands.first().filter(|_| chain.commands.len() == 1).map_or(json!({}), |c| json!(c.params)),
                                "state": state_in,
                            }),
                        ))?;
                        result.route_code = "intent.command".into();
                        result.command_id = chain.command_id().map(str::to_owned);
                        result.auth_level = chain.chain_level.get();
                    }
                    thought.intent
                }
                (None, Some(reply)) => Intent::Reply(reply.clone()),
                (None, None) => Intent::Unsupported(*route),
            };
        }
        if let Some(steps) = self.unsure_hearing(round, voice, &decision.intent, channel)? {
            return Ok(steps);
        }
        let source_rule = decision.source_rule.clone();
        if let Intent::Chain(chain) = &mut decision.intent {
            let round_id = round.header().round_id.to_string();
            self.decide_by_rule(chain, source_rule.as_deref(), &normalized, &round_id);
            self.record_decisions(round, &chain.commands)?;
            self.record_params_ok(round, chain)?;
        }
        let utterance = match &decision.intent {
            Intent::Chain(chain) => Utterance::Chain(chain),
            Intent::Confirm => Utterance::Confirm,
            Intent::Deny => Utterance::Deny,
            _ => Utterance::Other,
        };
        let ttl_ms = i64::try_from(self.config.authority.confirmation_ttl_seconds)
            .unwrap_or(i64::MAX / 4)
            * 1000;
        let gated = auth::gate(
            pending,
            utterance,
            round.header().round_seq,
            now,
            ttl_ms,
            || uuid::Uuid::now_v7().hyphenated().to_string(),
        );
        if let Some((p, resolution)) = &gated.resolved {
            let received = if *resolution == Resolution::Confirmed {
                p.received + 1
            } else {
                p.received
            };
            let by = match resolution {
                Resolution::Expired | Resolution::Superseded => "system",
                _ => channel.as_str(),
            };
            round.append(EventDraft::new(
                EventType::ConfirmReceived,
                json!({
                    "confirmation_id": p.confirmation_id,
                    "accepted": resolution.accepted(),
                    "channel": by,
                    "resolution": resolution,
                    "chain_id": p.chain.chain_id,
                    "confirmations_received": received,
                    "confirmations_required": p.required,
                }),
            ))?;
        }
        if let Some((p, resolution)) = &gated.resolved {
            self.receipts_not_run(round, &p.chain, *resolution, p.received)?;
        }
        let resolved_pending = gated.resolved.as_ref().map(|(p, _)| p);
        let mut steps = match gated.action {
            GateAction::Execute {
                chain_level_confirmations,
            } => {
                let chain = match (&decision.intent, resolved_pending) {
                    (Intent::Chain(chain), _) => Ok(chain.clone()),
                    (_, Some(p)) => self
                        .router
                        .rebuild(&p.chain)
                        .map_err(|problem| (p.chain.summary.clone(), problem)),
                    (_, None) => unreachable!(
                        "the gate executes a chain it was given or one that was pending"
                    ),
                };
                match chain {
                    Ok(chain) => {
                        result.auth_level = chain.chain_level.get();
                        result.command_id = chain.command_id().map(str::to_owned);
                        let steps = self.execute_chain(
                            round,
                            &chain,
                            chain_level_confirmations,
                            override_reason,
                            now,
                        )?;
                        for (c, run) in chain.commands.iter().zip(&steps.commands) {
                            decisions.push(reasoning::tool_decision(
                                c,
                                &run.status,
                                run.call_id.clone(),
                            ));
                        }
                        steps
                    }
                    Err((summary, problem)) => Steps::failed(
                        format!("I can't {summary} any more: {}.", problem.message),
                        problem.code,
                        problem.message,
                    ),
                }
            }
            GateAction::Ask => {
                let Some(p) = gated.pending.clone() else {
                    unreachable!("Ask always carries the pending confirmation")
                };
                round.append(EventDraft::new(
                    EventType::ConfirmRequested,
                    json!({
                        "confirmation_id": p.confirmation_id,
                        "chain_id": p.chain.chain_id,
                        "command_id": p.chain.steps.first().filter(|_| p.chain.steps.len() == 1).map(|s| s.command_id.clone()),
                        "macro": p.chain.macro_name,
                        "auth_level": p.chain.chain_level,
                        "summary": p.chain.summary,
                        "prompt": p.prompt,
                        "expires_at": rfc3339_ms(p.expires_at_ms),
                        "confirmations_required": p.required,
                        "confirmations_received": p.received,
                    }),
                ))?;
                result.auth_level = p.chain.chain_level.get();
                let asked = match &decision.intent {
                    Intent::Chain(chain) => Some(chain.clone()),
                    _ => self.router.rebuild(&p.chain).ok(),
                };
                for c in asked.iter().flat_map(|chain| chain.commands.iter()) {
                    decisions.push(reasoning::tool_decision(c, "awaiting_confirmation", None));
                }
                self.step(
                    round,
                    crate::reasoning::Step::new(
                        crate::reasoning::Phase::WaitingApproval,
                        format!(
                            "Waiting for confirmation {} of {}: {}",
                            p.received + 1,
                            p.required,
                            p.chain.summary
                        ),
                    ),
                    reasoning::Source::Engine,
                    json!({"confirmation_id": p.confirmation_id}),
                )?;
                Steps::reply(p.prompt.clone())
            }
            GateAction::Cancelled => {
                let summary = resolved_pending
                    .map(|p| p.chain.summary.clone())
                    .unwrap_or_default();
                Steps::reply(format!("Okay, I won't {summary}."))
            }
            GateAction::NothingToConfirm { expired: true } => {
                let summary = resolved_pending
                    .map(|p| p.chain.summary.clone())
                    .unwrap_or_default();
                Steps::reply(format!(
                    "That confirmation expired, so I did not {summary}. Ask again if you still want it."
                ))
            }
            GateAction::NothingToConfirm { expired: false } => {
                Steps::reply("There's nothing waiting for a confirmation.")
            }
            GateAction::Proceed => {
                let mut steps = self.proceed(round, &text, &decision, now)?;
                decisions.append(&mut steps.decisions);
                steps
            }
        };
        // A pending confirmation that this round resolved, replaced or started.
        if gated.resolved.is_some() || gated.pending.is_some() {
            steps.boundary.pending = Some(match gated.pending {
                Some(p) => PendingChange::Set(p),
                None => PendingChange::Cleared,
            });
        }
        result.reasoning = self.reasoning_update(round, narrative.as_deref(), &decisions)?;
        round.append(EventDraft::new(
            EventType::OutputEmitted,
            json!({"text": steps.reply, "channel": channel.as_str()}),
        ))?;
        Ok(steps)
    }

    /// Input that is not a matter of authority.
    fn proceed(
        &self,
        round: &OpenRound,
        text: &str,
        decision: &RouteDecision,
        now: i64,
    ) -> Result<Steps, StoreError> {
        Ok(match &decision.intent {
            Intent::Reply(text) => Steps::reply(text.clone()),
            Intent::Invalid {
                command_id,
                problem,
            } => {
                round.append(
                    EventDraft::new(
                        EventType::ValidatorRan,
                        json!({"validator_id": "params", "code": problem.code, "status": "error", "message": problem.message,
                               "details": {"command_id": command_id, "param": problem.param}}),
                    )
                    .with_status(EventStatus::Failed),
                )?;
                Steps::failed(
                    format!("I can't do that: {}.", problem.message),
                    "params.invalid",
                    problem.message.clone(),
                )
            }
            Intent::Ambiguous { candidates } => {
                let options = candidates
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect::<Vec<_>>()
                    .join(" or ");
                Steps::reply(format!(
                    "Did you mean {options}? Please say it another way."
                ))
            }
            Intent::Undo => self.undo(round, now)?,
            Intent::Memory { op, subject } => {
                self.memory_command(round, text, *op, subject.as_deref(), now)?
            }
            Intent::Unsupported(route) => Steps::failed(
                format!("I can't do {} requests yet.", route.as_str()),
                "route.unsupported",
                format!(
                    "the {} route needs a capability this build does not have yet",
                    route.as_str()
                ),
            ),
            Intent::Chain(_) | Intent::Confirm | Intent::Deny => {
                unreachable!("the gate decides chains, confirmations and denials")
            }
            Intent::Think { .. } => unreachable!("a model was asked (or not) before the gate"),
        })
    }

    fn record_params_ok(&self, round: &OpenRound, chain: &CommandChain) -> Result<(), StoreError> {
        round.append(EventDraft::new(
            EventType::ValidatorRan,
            json!({"validator_id": "params", "code": "validator.ok", "status": "ok",
                   "message": format!("parameters of {} command(s) are valid", chain.commands.len())}),
        ))
    }

    /// Runs a chain in order; a failure skips the rest. Each command run is
    /// an `execute` (or `error`) step, and a governed one gets its receipt.
    fn execute_chain(
        &self,
        round: &OpenRound,
        chain: &CommandChain,
        confirmations: u8,
        override_reason: Option<OverrideReason>,
        now: i64,
    ) -> Result<Steps, StoreError> {
        let mut steps = Steps::reply("");
        let mut replies = Vec::new();
        let header = round.header();
        for command in &chain.commands {
            if let Some((_, reason)) = &steps.failure {
                round.append(
                    EventDraft::new(
                        EventType::CommandExecuted,
                        json!({"command_id": command.command_id, "status": "skipped", "auth_level": command.auth_level,
                               "result": {"reason": format!("not run: {reason}")}, "chain_id": chain.chain_id}),
                    )
                    .with_status(EventStatus::Skipped),
                )?;
                steps.commands.push(CommandRun {
                    command_id: command.command_id.clone(),
                    call_id: None,
                    status: "skipped".into(),
                });
                continue;
            }
            let Some(spec) = self.router.command(&command.command_id) else {
                continue;
            };
            let (call_id, outcome) =
                self.run_tool(round, command, spec, now, &mut steps.retries)?;
            let ok = outcome.status == ToolStatus::Ok;
            round.append(
                EventDraft::new(
                    EventType::CommandExecuted,
                    json!({
                        "command_id": command.command_id,
                        "status": if ok { "ok" } else { "failed" },
                        "result": outcome.result,
                        "auth_level": command.auth_level,
                        "chain_id": chain.chain_id,
                        "chain_level": chain.chain_level,
                        "confirmations": confirmations,
                    }),
                )
                .with_call(call_id)
                .with_status(if ok {
                    EventStatus::Ok
                } else {
                    EventStatus::Failed
                }),
            )?;
            steps.commands.push(CommandRun {
                command_id: command.command_id.clone(),
                call_id: Some(call_id.to_string()),
                status: outcome.status.as_str().into(),
            });
            self.tool_result_step(
                round,
                &command.command_id,
                &call_id.to_string(),
                &outcome,
                crate::reasoning::StepType::ToolResult,
            )?;
            if let Some(d) = &command.decision {
                let settled = if confirmations > 0 {
                    "confirmed"
                } else {
                    "not_required"
                };
                self.receipt(
                    round,
                    &command.command_id,
                    json!(command.params),
                    d,
                    Some(call_id.to_string()),
                    if ok { "ok" } else { "failed" },
                    settled,
                    confirmations,
                    override_reason.map(OverrideReason::as_str),
                )?;
            }
            if !ok {
                replies.push(format!(
                    "I couldn't {}: {}.",
                    command.summary, outcome.message
                ));
                steps.failure = Some((
                    "tool.failed".into(),
                    format!("{}: {}", command.command_id, outcome.message),
                ));
                continue;
            }
            replies.push(crate::router::all_the(render_with(
                &spec.config.reply,
                |name| match name {
                    "result" => Some(outcome.message.clone()),
                    _ => command.params.get(name).map(ToString::to_string),
                },
            )));
            if let Some(state) = outcome.state_out {
                steps.boundary.state_out = Some(state);
            }
            if command.auth_level.undoable()
                && let Some(undo) = &spec.config.undo
            {
                let window = i64::try_from(self.config.authority.undo_window_seconds)
                    .unwrap_or(i64::MAX / 4)
                    * 1000;
                steps.boundary.undo.push(UndoRecord {
                    id: 0,
                    conversation_id: header.conversation_id.to_string(),
                    command_id: command.command_id.clone(),
                    call_id: call_id.to_string(),
                    summary: command.summary.clone(),
                    undo_command: undo.command.clone(),
                    undo_params: undo
                        .params
                        .iter()
                        .map(|(k, t)| (k.clone(), render(t, &command.params)))
                        .collect(),
                    executed_at_ms: now,
                    expires_at_ms: now + window,
                });
            }
        }
        steps.reply = replies.join(" ");
        Ok(steps)
    }

    /// A new call of `command`: `tool.request`, the call, `tool.response`.
    /// A read-only command whose executor failed transiently is called again
    /// (a new call id each time, up to `llm.tool_retries`, with backoff); a
    /// command with side effects never is: the user asks again, and the
    /// gate asks again for whatever needs a confirmation.
    fn run_tool(
        &self,
        round: &OpenRound,
        command: &Command,
        spec: &CommandSpec,
        now: i64,
        retries: &mut Vec<RetryNote>,
    ) -> Result<(CallId, crate::tools::ToolOutcome), StoreError> {
        let header = round.header();
        let round_id = header.round_id.to_string();
        let max_attempts = if spec.config.side_effects {
            1
        } else {
            1 + self.config.llm.tool_retries
        };
        let mut attempt = 1;
        loop {
            let call = &ToolCall {
                call_id: CallId::new(),
                command,
                spec,
                conversation_id: header.conversation_id.as_str(),
                round_id: &round_id,
                now_ms: now,
            };
            let (tool_id, inputs) = self.tools.describe(call);
            let call_id = call.call_id.to_string();
            round.append(
                EventDraft::new(
                    EventType::ToolRequest,
                    json!({"tool_id": tool_id, "call_id": call_id, "inputs": inputs, "attempt": attempt,
                           "side_effects": spec.config.side_effects}),
                )
                .with_call(call.call_id),
            )?;
            let outcome = self.tools.execute(call)?;
            let ok = outcome.status == ToolStatus::Ok;
            round.append(
                EventDraft::new(
                    EventType::ToolResponse,
                    json!({"tool_id": tool_id, "call_id": call_id, "latency_ms": outcome.latency_ms, "result": outcome.result,
                           "status": outcome.status, "transient": outcome.transient, "attempt": attempt}),
                )
                .with_call(call.call_id)
                .with_status(if ok { EventStatus::Ok } else { EventStatus::Failed }),
            )?;
            if ok || !outcome.transient || attempt >= max_attempts {
                return Ok((call.call_id, outcome));
            }
            retries.push(RetryNote {
                stage: "tool".into(),
                tier: None,
                attempt,
                reason: format!("{}: {}", command.command_id, outcome.message),
            });
            std::thread::sleep(std::time::Duration::from_millis(
                100 << (attempt - 1).min(4),
            ));
            attempt += 1;
        }
    }

    /// Reverses the conversation's last level-2 command, inside its window.
    fn undo(&self, round: &OpenRound, now: i64) -> Result<Steps, StoreError> {
        let conversation = round.header().conversation_id.clone();
        let Some(record) = self.state.last_undoable(&conversation)? else {
            return Ok(Steps::reply("There's nothing to undo."));
        };
        let window_s = self.config.authority.undo_window_seconds;
        if now > record.expires_at_ms {
            round.append(
                EventDraft::new(
                    EventType::CommandReversed,
                    json!({"command_id": record.command_id, "status": "skipped", "original_call_id": record.call_id,
                           "reason": format!("the undo window of {window_s} s had passed")}),
                )
                .with_status(EventStatus::Skipped),
            )?;
            return Ok(Steps::reply(format!(
                "It's too late to undo \"{}\": changes can be undone for {}.",
                record.summary,
                crate::router::human_duration(window_s)
            )));
        }
        let command = match self.router.resolve_command(
            &record.undo_command,
            record.undo_params.clone(),
            None,
            None,
        ) {
            Ok(c) => c,
            Err(problem) => {
                return Ok(Steps::failed(
                    format!("I can't undo \"{}\": {}.", record.summary, problem.message),
                    problem.code,
                    problem.message,
                ));
            }
        };
        let Some(spec) = self.router.command(&command.command_id) else {
            return Ok(Steps::reply("There's nothing to undo."));
        };
        let mut retries = Vec::new();
        let (call_id, outcome) = self.run_tool(round, &command, spec, now, &mut retries)?;
        let ok = outcome.status == ToolStatus::Ok;
        self.tool_result_step(
            round,
            &command.command_id,
            &call_id.to_string(),
            &outcome,
            crate::reasoning::StepType::Correction,
        )?;
        let undo_decision = ToolDecision {
            tool_name: crate::llm::toolbox::tool_name(&command.command_id),
            command_id: command.command_id.clone(),
            rationale: format!(
                "Asked to undo \"{}\" (call {}), inside its undo window.",
                record.summary, record.call_id
            ),
            parameters: json!(command.params),
            outcome: outcome.status.as_str().into(),
            parallel_group: None,
            call_id: Some(call_id.to_string()),
            decided_by: "rule".into(),
        };
        round.append(
            EventDraft::new(
                EventType::CommandReversed,
                json!({"command_id": record.command_id, "status": if ok { "ok" } else { "failed" }, "reason": "undo requested",
                       "undo_command": command.command_id, "original_call_id": record.call_id}),
            )
            .with_call(call_id)
            .with_status(if ok { EventStatus::Ok } else { EventStatus::Failed }),
        )?;
        let run = CommandRun {
            command_id: command.command_id.clone(),
            call_id: Some(call_id.to_string()),
            status: outcome.status.as_str().into(),
        };
        let mut steps = if ok {
            let mut s = Steps::reply(format!("Undone: {}.", record.summary));
            s.boundary.undone = Some(Undone {
                call_id: record.call_id.clone(),
                at_ms: self.clock.now_ms(),
            });
            s
        } else {
            Steps::failed(
                format!(
                    "I couldn't undo \"{}\": {}.",
                    record.summary, outcome.message
                ),
                "tool.failed",
                outcome.message,
            )
        };
        steps.commands.push(run);
        steps.retries = retries;
        steps.decisions.push(undo_decision);
        Ok(steps)
    }
}

mod consult;
mod jobs;
mod memory;
mod reasoning;
mod schedule;
pub mod schedule_bench;
mod think;
mod voice;

pub use memory::{OPERATOR_CONVERSATION, OperatorError, OperatorOutcome, OperatorWrite};
pub use schedule::{
    Notification, Scheduled, ScheduledReminder, ScheduledTimer, Scheduler, scheduled_in,
};
pub use think::{LlmSummary, RetryNote};
pub use voice::{AudioAction, RetentionReport, VoiceInput};

#[cfg(test)]
mod llm_tests;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
pub(crate) mod reasoning_tests;
#[cfg(test)]
mod schedule_tests;
#[cfg(test)]
pub(crate) mod tests;
