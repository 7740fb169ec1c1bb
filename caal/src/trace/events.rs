//! The payload of every event type, one struct each: what a round records is
//! built from these, never from loose JSON, so a misspelt field or a missing
//! one is a compile error. Each serialises to the object its schema in
//! `schemas/events/` describes (those files stay the contract; the tests in
//! `events_tests.rs` hold the two together both ways, and read every event of
//! real rounds back into these structs).
//!
//! Field rules, the same everywhere: a field the schema requires is a plain
//! field (an `Option` when it may be `null`); a field always written that
//! the schema lets older payloads leave out is `#[serde(default)]`; an
//! optional detail only some rounds have is `#[serde(default,
//! skip_serializing_if = "Option::is_none")]`, absent when it has no value.
//! The trace sits below the domain modules, so fields are plain values
//! (strings, numbers, JSON), not the engine's types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `round.started`: the round's header facts, first in its chain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundStarted {
    pub library_id: String,
    pub bucket_id: String,
    pub state_in: String,
    pub channel: String,
    pub audio_id: Option<String>,
}

/// What whisper made of the audio of a spoken round.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heard {
    pub model: String,
    pub language: String,
    pub confidence: f32,
    pub least: f32,
    pub audio_ms: u64,
    pub stt_ms: f64,
    /// Each word as heard and how surely (kept only where nothing was
    /// scrubbed from the transcript: the words are its text's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<HeardWord>,
}

/// A word of a transcript and how surely it was heard: the probability of
/// its least sure token (0–1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeardWord {
    pub word: String,
    pub p: f32,
}

impl HeardWord {
    /// Text cut where heard words break: at anything but letters, digits
    /// and an apostrophe (pieces may be empty). Whisper's tokens are made
    /// words by it, and what a value was read from is looked for by it.
    pub fn pieces(text: &str) -> impl Iterator<Item = &str> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
    }
}

/// `input.received`: what was said (scrubbed), and for speech, the audio's
/// hash and what was heard.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputReceived {
    pub raw_text: String,
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<Heard>,
    /// The door it came in by (`api`, `wyoming`, `mcp`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door: Option<String>,
    /// The door's name for the client behind it (a Wyoming peer's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The area the client said it is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub area: Option<String>,
    /// When it reached the door, before it waited for its conversation: a
    /// "yes" counts only if it arrived after the question was given out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrived_at: Option<String>,
    /// A spoken reply this speech stopped by starting over it (barge-in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interruption>,
}

/// A reply stopped by the person speaking over it (barge-in), as the
/// speech that stopped it records it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interruption {
    /// The round whose reply was being spoken (a timer's ringing is a round too).
    pub round_id: String,
    /// Its number in the conversation, when it was an answer to the speaker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_seq: Option<i64>,
    /// How much of the reply had played when the speech began, and its length.
    pub played_ms: u64,
    pub reply_ms: u64,
    /// From the speech's onset (the detector's start less its pre-roll),
    /// in the audio received, to the reply stopped: the detector's lag.
    pub stopped_in_ms: f64,
}

/// `input.normalized`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputNormalized {
    pub normalized_text: String,
}

/// The conversation state's policy in force when a route was chosen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatePolicy {
    pub unmatched: String,
    pub escalation: String,
    pub prefer_local: bool,
}

/// `route.selected`: one shape whoever decided (the router's layers, the
/// model choosing among the nearest meanings, or the model's own tool call).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSelected {
    pub route_code: String,
    pub source_rule: Option<String>,
    pub topic: Option<String>,
    pub auth_level: u8,
    /// The macro's name (older rounds may hold its steps as an array).
    #[serde(rename = "macro")]
    pub macro_name: Option<Value>,
    pub command_id: Option<String>,
    #[serde(default)]
    pub params: Value,
    #[serde(default)]
    pub state: String,
    /// `model` (chose among the router's nearest) or `llm` (its tool call);
    /// absent when the router decided alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_policy: Option<StatePolicy>,
    /// The devices an ambiguous name could mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Value>,
    /// The router layer that decided (`rule`, `template`, `meaning`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// What the layer understood, with its confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub understood: Option<Value>,
}

/// `validator.ran`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorRan {
    pub validator_id: String,
    pub code: String,
    pub status: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
}

/// `llm.request`: what was asked of a model, by hash with a capped head and tail.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmRequest {
    pub model: String,
    pub prompt_hash: String,
    pub prompt_head: String,
    pub prompt_tail: String,
    #[serde(default)]
    pub prompt_truncated: bool,
    #[serde(default)]
    pub tier: String,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub tools: Vec<String>,
    /// `choose` when the model picks among the router's nearest meanings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// `llm.response`: what came back (or the error), scrubbed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmResponse {
    pub model: String,
    pub latency_ms: f64,
    pub text: String,
    pub usage: Option<Value>,
    #[serde(default)]
    pub truncated: bool,
    #[serde(default)]
    pub tier: String,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrative: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transient: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Value>,
    /// The rank the model chose among the offered meanings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub picked: Option<u64>,
}

/// `tool.request`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRequest {
    pub tool_id: String,
    pub call_id: String,
    pub inputs: Value,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub side_effects: bool,
}

/// `tool.response`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResponse {
    pub tool_id: String,
    pub call_id: String,
    pub latency_ms: f64,
    pub result: Value,
    pub status: String,
    #[serde(default)]
    pub transient: bool,
    #[serde(default)]
    pub attempt: u32,
}

/// `job.enqueued`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobEnqueued {
    pub job_id: String,
    pub class: String,
    pub topic: String,
    pub query: String,
}

/// `job.progress`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobProgress {
    pub job_id: String,
    pub status: String,
    pub progress: Option<f64>,
    #[serde(default)]
    pub attempt: i64,
    /// The conversation that asked.
    #[serde(default)]
    pub asked_in: String,
}

/// `job.result`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobResult {
    pub job_id: String,
    pub status: String,
    pub result: Value,
}

/// `confirm.requested`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmRequested {
    #[serde(default)]
    pub confirmation_id: String,
    #[serde(default)]
    pub chain_id: String,
    pub command_id: Option<String>,
    #[serde(rename = "macro")]
    pub macro_name: Option<String>,
    pub auth_level: u8,
    pub summary: String,
    #[serde(default)]
    pub prompt: String,
    #[serde(default)]
    pub expires_at: String,
    #[serde(default)]
    pub confirmations_required: u8,
    #[serde(default)]
    pub confirmations_received: u8,
    /// The door and client that asked: only they (or the operator on the
    /// page) may answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// `confirm.received`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmReceived {
    pub confirmation_id: String,
    pub accepted: bool,
    pub channel: String,
    #[serde(default)]
    pub resolution: String,
    #[serde(default)]
    pub chain_id: String,
    #[serde(default)]
    pub confirmations_received: u8,
    #[serde(default)]
    pub confirmations_required: u8,
    /// Why a yes or no did not answer it (`resolution` "refused").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The door and client that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// `command.executed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandExecuted {
    pub command_id: String,
    pub status: String,
    pub result: Value,
    pub auth_level: u8,
    #[serde(default)]
    pub chain_id: String,
    /// The chain's gate level (absent for a command skipped after a failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_level: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmations: Option<u8>,
}

/// `command.reversed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandReversed {
    pub command_id: String,
    pub status: String,
    pub reason: String,
    #[serde(default)]
    pub original_call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_command: Option<String>,
}

/// `output.emitted`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputEmitted {
    pub text: String,
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub was_escalated: Option<bool>,
}

/// `round.failed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundFailed {
    pub failure_code: String,
    pub failure_reason: String,
    /// The state changes the round makes (see `round/boundary.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<Value>,
}

/// `round.completed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundCompleted {
    pub status: String,
    pub state_out: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<Value>,
}

/// `safety.redacted`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyRedacted {
    pub count: u64,
    pub kinds: Vec<String>,
    pub field: String,
}

/// `safety.checked`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyChecked {
    pub check: String,
    pub action: String,
    pub rules: Vec<String>,
    pub message: String,
    #[serde(default)]
    pub field: String,
    #[serde(default)]
    pub needs_review: bool,
}

/// `memory.written`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryWritten {
    pub bucket_id: String,
    pub item_id: String,
    pub op: String,
    pub pinned: bool,
    #[serde(default)]
    pub chars: u64,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub redacted_kinds: Vec<String>,
}

/// `memory.forgotten`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryForgotten {
    pub bucket_id: String,
    pub item_id: String,
    pub reason: String,
    #[serde(default)]
    pub was_pinned: bool,
    #[serde(default)]
    pub source: String,
}

/// `memory.read`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryRead {
    pub bucket_id: String,
    pub op: String,
    pub query: Option<String>,
    #[serde(rename = "match")]
    #[serde(default)]
    pub matched: String,
    pub item_ids: Vec<String>,
}

/// `memory.referenced`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryReferenced {
    pub bucket_id: String,
    pub signal: String,
    pub topic: Option<String>,
    pub item_ids: Vec<String>,
}

/// One memory item put in a prompt, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Injected {
    pub item_id: String,
    pub why: String,
    pub score: f64,
    pub tier: String,
}

/// `memory.injected`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryInjected {
    pub bucket_id: String,
    pub items: Vec<Injected>,
    pub parts: Vec<String>,
    #[serde(default)]
    pub unit: String,
    #[serde(default)]
    pub short_used: u64,
    #[serde(default)]
    pub long_used: u64,
    #[serde(default)]
    pub long_left_out: bool,
}

/// `reasoning.step`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasoningStep {
    pub phase: String,
    pub step_type: String,
    pub content: String,
    pub source: String,
    #[serde(default)]
    pub links: Value,
    #[serde(default)]
    pub truncated: bool,
}

/// `reasoning.update`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasoningUpdate {
    pub round_seq: u64,
    pub narrative: Option<String>,
    pub tool_decisions: Value,
}

/// `receipt.issued`: the signed receipt, as signed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptIssued {
    pub receipt: Value,
}

/// `audio.retention`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioRetention {
    pub action: String,
    pub audio_ids: Vec<String>,
    pub sha256: Vec<String>,
    pub bytes_freed: u64,
    pub kept_pinned: u64,
}

/// `livekit.webhook`: a room event whose signature held (scrubbed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LivekitWebhook {
    pub event: String,
    pub event_id: String,
    pub room: Option<String>,
    pub participant: Option<String>,
    #[serde(default)]
    pub created_at: i64,
    pub signature: String,
}

/// `schedule.fired`: a timer (name, seconds) or a reminder (what) rang.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFired {
    pub kind: String,
    pub id: i64,
    pub due_at: String,
    pub fired_at: String,
    pub late_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    pub set_in_round: Option<String>,
}

/// `schedule.cancelled`: by an operator (`cli`) or through the API (`api`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleCancelled {
    pub kind: String,
    pub id: i64,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
}

/// The route code of a round that judged the one before it ("that was wrong").
pub const FEEDBACK_ROUTE: &str = "intent.feedback";

/// `feedback.recorded`: a person's verdict on an earlier round of the same
/// conversation ("that was wrong", 👎 on the page, `caal feedback`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackRecorded {
    /// `feedback.good` or `feedback.bad`.
    pub code: String,
    /// `good` or `bad`.
    pub verdict: String,
    /// The round judged.
    pub round_id: String,
    pub round_seq: i64,
    /// Where the verdict came from: `said` (in conversation), `ui`, `api`, `cli`, `mcp`.
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `round.imported`: the first event after `round.started` of a round `caal
/// import` brought in: the source file and its hash, the original ids, and
/// every original event with its original hash (those this build cannot
/// take as events of their own kept here whole).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundImported {
    /// `import.round` or `import.memory`.
    pub code: String,
    /// `caal-jsonl`, `caal-python-traces` or `caal-python-memory`.
    pub format: String,
    pub source: ImportSource,
    /// The original ids and header, as the source had them.
    pub original: Value,
    /// What a second import of the same data finds already here.
    pub keys: Vec<String>,
    pub events: Vec<ImportedEvent>,
}

/// Where an imported round came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportSource {
    /// The file as it was named to `caal import`.
    pub file: String,
    /// `sha256:` and the hex of the whole file.
    pub sha256: String,
    /// `line 12`, `rounds row 4`, `items row 9`.
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<i64>,
}

/// One original event of an imported round.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportedEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_seq: Option<i64>,
    pub event_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// `event`: appended after this one as an event of its type; `round`:
    /// the round's own start or end; `here`: kept in this payload whole.
    pub kept: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

/// The name serde writes for a unit enum variant (a status, a phase, an
/// action), for the string fields above.
pub fn name_of(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}
