//! The round lifecycle. A round is `intake → screen → route → consult the
//! model → authorize → act → emit` (`stages`; the act stage's work is in
//! `act`): intake fixes its ids and `state_in`, and each stage appends its
//! events to the trace as it happens. What the stages come to is turned into
//! the round's result once. The reply is released only once the round's
//! terminal event is durable; the conversation's state, its pending
//! confirmation and its undo records change only then, at the round boundary
//! (`auth::boundary`: recorded in the terminal event, applied in one
//! transaction, reconciled after a crash), never in the middle of a round.

use std::{path::Path, sync::Arc};

use serde::Serialize;

use crate::{
    auth::{
        self, AuthLevel, Client, Door, Origin, Pending,
        boundary::{Boundary, PendingChange},
    },
    config::{Config, ConfigError},
    ids::{BucketId, ConversationId, LibraryId, LibraryIdError},
    llm::{Tiers, toolbox::Toolbox, validate::Validator},
    memory::{MEMORY_FILE, MemoryError, MemoryStore},
    reasoning::{
        RoundReasoning, ToolDecision,
        receipt::{ReceiptError, load_or_create_key},
    },
    router::Router,
    safety::Sanitizer,
    state::{Clock, STATE_FILE, StateDb, SystemClock, rfc3339_ms},
    tools::{EnvLookup, Tools},
    trace::{DB_FILE, EventDraft, OpenRound, RoundSpec, SCHEMA_VERSION, StoreError, TraceStore},
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

#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    #[error(
        "nothing to say: the text is empty; type a request such as \"turn on the kitchen lights\""
    )]
    EmptyInput,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
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
    /// The router already compiled from this configuration (the caller
    /// needed it first, for `Tiers::guard`); none: the engine compiles it.
    pub router: Option<Arc<Router>>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            library_id: std::env::var("CAAL_LIBRARY_ID").ok(),
            env: Arc::new(|k| std::env::var(k).ok()),
            clock: Arc::new(SystemClock),
            llm: None,
            router: None,
        }
    }
}

impl EngineOptions {
    /// What a benchmark's engine runs with: its own library id, no
    /// environment (no tokens), the real clock, no model.
    pub fn bench() -> Self {
        Self {
            library_id: Some("bench".into()),
            env: Arc::new(|_| None),
            clock: Arc::new(SystemClock),
            llm: None,
            router: None,
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

/// Creates `dir` (and its parents) readable by its owner only: it holds
/// every transcript, memory and pending confirmation.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
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
        private_dir(data_dir).map_err(|source| OpenError::DataDir {
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
        let router = match options.router {
            Some(router) => router,
            None => {
                let (router, warnings) = Router::configured(&config, &*options.env)?;
                for warning in warnings {
                    tracing::warn!("{warning}");
                }
                Arc::new(router)
            }
        };
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
            router,
            tools: Arc::new(tools),
            sanitizer: Arc::new(Sanitizer::new((&config.safety).into())),
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

    /// Closes the engine (its stores end their sessions cleanly) but
    /// leaves the compiled router to the process's exit: a command that
    /// runs one round and ends (`caal say`) does not spend its last
    /// milliseconds freeing the sentence library's many small allocations
    /// (about a tenth of `caal say`, measured by perf). Never for a
    /// process that goes on.
    pub fn close_at_exit(self) {
        std::mem::forget(Arc::clone(&self.router));
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

    /// One typed round in `conversation`, said here (the CLI's door).
    pub fn text_round(
        &self,
        conversation: &ConversationId,
        text: &str,
        channel: Channel,
    ) -> Result<RoundResult, RoundError> {
        self.round_from(&self.local_origin(), conversation, text, channel)
    }

    /// One typed round in `conversation` from a door's client.
    pub fn round_from(
        &self,
        origin: &Origin,
        conversation: &ConversationId,
        text: &str,
        channel: Channel,
    ) -> Result<RoundResult, RoundError> {
        self.round_with(origin, conversation, text, channel, None, None)
    }

    /// Who says what is said here, in this process, now.
    pub fn local_origin(&self) -> Origin {
        Origin::new(Client::new(Door::Local, "local"), self.now_ms())
    }

    /// A request from `door`'s `client` that arrives now.
    pub fn origin(&self, door: Door, client: impl Into<String>) -> Origin {
        Origin::new(Client::new(door, client), self.now_ms())
    }

    /// The area a client says it is in, as the home names it (by its name
    /// or another name); one the home lacks is named with those it has.
    pub fn area(&self, said: &str) -> Result<String, String> {
        let home = self.router.home();
        home.area_named(said).map(str::to_owned).ok_or_else(|| {
            format!(
                "the home has no area {said:?}; its areas are {} ([home] areas in the configuration)",
                home.area_names().join(", ")
            )
        })
    }

    /// A confirmation answered from a UI: "yes" or "no" in its conversation;
    /// a "yes" that overrides failed reasoning checks may say why
    /// (`false_positive`, `accepted_risk`, `emergency_override`,
    /// `threshold_too_strict`), and the receipt records it.
    pub fn answer_confirmation(
        &self,
        origin: &Origin,
        conversation: &ConversationId,
        accept: bool,
        override_reason: Option<OverrideReason>,
    ) -> Result<RoundResult, RoundError> {
        let text = if accept { "yes" } else { "no" };
        self.round_with(
            origin,
            conversation,
            text,
            Channel::Ui,
            override_reason,
            None,
        )
    }

    fn round_with(
        &self,
        origin: &Origin,
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
        let outcome = match self.run_steps(
            &round,
            text,
            (channel, origin),
            &state_in,
            pending.as_ref(),
            override_reason,
            voice,
        ) {
            Ok(outcome) => outcome,
            Err(e) => {
                round.fail("round.error", &e.to_string())?;
                return Err(e);
            }
        };
        let Outcome {
            steps,
            decided,
            llm,
            retries,
            reasoning,
        } = outcome;
        let mut boundary = steps.boundary;
        boundary.state_out = boundary.state_out.filter(|s| *s != state_in);
        // The question is given out when the round ends: a "yes" that
        // arrived before now was not said to it.
        if let Some(PendingChange::Set(p)) = &mut boundary.pending {
            p.asked_at_ms = p.asked_at_ms.max(self.clock.now_ms());
        }
        let pending_after = match &boundary.pending {
            Some(PendingChange::Set(next)) => Some(&**next),
            Some(PendingChange::Cleared) => None,
            None => pending.as_ref(),
        };
        let (failure_code, failure_reason) = steps.failure.unzip();
        let result = RoundResult {
            schema_version: SCHEMA_VERSION,
            library_id: header.library_id.to_string(),
            bucket_id: header.bucket_id.to_string(),
            conversation_id: header.conversation_id.to_string(),
            round_id: header.round_id.to_string(),
            round_seq: header.round_seq,
            route_code: decided.route_code,
            source_rule: decided.source_rule,
            command_id: decided.command_id,
            auth_level: decided.auth_level,
            status: if failure_code.is_some() {
                "failed"
            } else {
                "ok"
            }
            .into(),
            // Replies quote tools and people; what reaches a screen or a speaker is scrubbed too.
            reply: crate::safety::global().scrub(&steps.reply).into_owned(),
            state_out: boundary
                .state_out
                .clone()
                .unwrap_or_else(|| state_in.clone()),
            state_in,
            failure_code,
            failure_reason,
            audio_id: voice.map(|v| v.audio_id.to_string()),
            pending_confirmation: pending_after.map(PendingView::of),
            commands: steps.commands,
            llm,
            retries,
            reasoning,
        };
        let recorded = boundary.to_json();
        auth::boundary::crash_point("round.before_end");
        // Once the round is durable the conversation changes, all at once,
        // before its next round may begin.
        let apply = || {
            self.state
                .apply_boundary(conversation, header.round_seq, &boundary)
        };
        match (&result.failure_code, &result.failure_reason) {
            (Some(code), Some(reason)) => round.fail_with(code, reason, recorded, apply)?,
            _ => round.complete_with(&result.state_out, recorded, apply)?,
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
        let conversation: ConversationId = conversation.parse().map_err(StoreError::Id)?;
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
        round.append(EventDraft::new(crate::trace::events::InputReceived {
            raw_text: said.into(),
            channel: channel.as_str().into(),
            ..Default::default()
        }))?;
        Ok((round, state))
    }

    /// A round's stages, in order (see `stages`): each appends its events
    /// and hands the next what it decided.
    #[allow(clippy::too_many_arguments)]
    fn run_steps(
        &self,
        round: &OpenRound,
        said: &str,
        (channel, origin): (Channel, &Origin),
        state_in: &str,
        pending: Option<&Pending>,
        override_reason: Option<OverrideReason>,
        voice: Option<&VoiceInput>,
    ) -> Result<Outcome, RoundError> {
        let now = self.clock.now_ms();
        let screened = self.screen(round, said, channel, origin, voice)?;
        if let Some(incoherent) = &screened.incoherent {
            let (steps, decided) = self.ask_again(round, incoherent, state_in)?;
            return self.emit(
                round,
                channel,
                steps,
                decided,
                Considered::default(),
                Vec::new(),
            );
        }
        let routed = self.route(
            round,
            &screened,
            (state_in, origin.area.as_deref()),
            voice,
            now,
        )?;
        let (routed, considered) = self.consult_model(round, &screened.text, routed, state_in)?;
        if let Some(steps) = self.unsure_hearing(round, voice, &routed.decision.intent)? {
            return self.emit(
                round,
                channel,
                steps,
                routed.decided,
                considered,
                Vec::new(),
            );
        }
        let (routed, gated) = self.authorize(
            round,
            routed,
            &screened.normalized,
            pending,
            (channel, origin),
            now,
        )?;
        let acted = self.act(round, routed, gated, override_reason, &screened.text, now)?;
        self.emit(
            round,
            channel,
            acted.steps,
            acted.decided,
            considered,
            acted.decisions,
        )
    }
}

mod act;
mod consult;
mod feedback;
mod jobs;
mod memory;
mod reasoning;
mod schedule;
mod stages;
mod think;
mod voice;

pub use feedback::{FEEDBACK_ROUTE, FeedbackError, FeedbackOutcome};
pub use memory::{OPERATOR_CONVERSATION, OperatorError, OperatorOutcome, OperatorWrite};
pub use schedule::{
    Notification, Scheduled, ScheduledReminder, ScheduledTimer, Scheduler, scheduled_in,
};
use stages::{Considered, Outcome};
pub use think::{LlmSummary, RetryNote};
pub use voice::{AudioAction, Heard, Listened, RetentionReport, VoiceError, VoiceInput};

#[cfg(test)]
mod feedback_tests;
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
