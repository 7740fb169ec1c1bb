//! Configuration: the defaults embedded from `config/caal.toml`, then a user
//! file laid over them (tables merge; rules, sentences, intent mappings and
//! word lists gain the file's entries, other lists are replaced:
//! `layers`), then `CAAL_*`
//! environment variables. Every problem names the key or rule and the fix.
//! Cross-references (rules to commands and macros, captures to parameters,
//! states) are checked by compiling the router: `Config::check`.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

mod kinds;
mod layers;

pub use kinds::{Durability, ProviderKind, SafetyAction, models_dir, peer_range, time_zone};
pub use layers::{Origin as EntryOrigin, Provenance};

/// The default configuration, as shipped in `config/caal.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../../config/caal.toml");

/// The language packs, as shipped in `config/lang/<code>.toml`: what is
/// said differently in each language, the defaults of
/// `[understand.languages.<code>]`.
pub const LANGUAGE_PACKS: &[(&str, &str)] = &[
    ("en", include_str!("../../../config/lang/en.toml")),
    ("de", include_str!("../../../config/lang/de.toml")),
];

/// The built-in defaults as one table: `config/caal.toml` with each
/// language pack in its place under `understand.languages`.
fn defaults() -> Result<toml::Table, ConfigError> {
    let mut merged = parse(DEFAULT_TOML, "defaults (built in)")?;
    let understand = merged
        .entry("understand")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let languages = understand
        .as_table_mut()
        .map(|u| {
            u.entry("languages")
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        })
        .and_then(toml::Value::as_table_mut)
        .ok_or_else(|| ConfigError::Parse {
            origin: "defaults (built in)".into(),
            message: "[understand.languages] is not a table".into(),
        })?;
    for (code, text) in LANGUAGE_PACKS {
        let pack = parse(text, &format!("config/lang/{code}.toml (built in)"))?;
        languages.insert((*code).to_owned(), toml::Value::Table(pack));
    }
    Ok(merged)
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub store: StoreConfig,
    pub conversation: ConversationConfig,
    pub router: RouterConfig,
    pub authority: AuthorityConfig,
    pub safety: SafetyConfig,
    pub llm: LlmConfig,
    pub memory: MemoryConfig,
    pub reasoning: ReasoningConfig,
    pub voice: VoiceConfig,
    #[serde(default)]
    pub states: BTreeMap<String, StateConfig>,
    #[serde(default)]
    pub executors: ExecutorsConfig,
    #[serde(default)]
    pub commands: BTreeMap<String, CommandConfig>,
    #[serde(default)]
    pub macros: BTreeMap<String, MacroConfig>,
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// The home: areas and devices that parameters resolve against.
    #[serde(default)]
    pub home: HomeConfig,
    /// The layers below the rules: sentence templates and what their intents run.
    pub understand: UnderstandConfig,
    /// Timers and reminders.
    #[serde(default)]
    pub schedule: ScheduleConfig,
    /// What each way in allows: agents' confirmations, the host names the
    /// page answers to, Wyoming's peers and connections.
    #[serde(default)]
    pub doors: DoorsConfig,
    /// Live shipping of ended rounds to an OTLP/HTTP receiver.
    #[serde(default)]
    pub ship: ShipConfig,
    /// `sha256:` of the effective configuration (defaults, file and
    /// environment merged, canonical JSON): receipts name the rules they ran under.
    #[serde(skip)]
    pub hash: String,
    /// Where each entry of the lists that add came from (defaults or the file).
    #[serde(skip)]
    pub provenance: Provenance,
}

/// What each door allows beyond its token.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoorsConfig {
    /// Whether an agent over MCP may confirm a level-3/4 command (its own);
    /// off: a person confirms it on the page.
    #[serde(default)]
    pub agents_confirm: bool,
    /// Host names the page, the API and the doors over HTTP answer to,
    /// besides localhost, loopback addresses and the address `serve` binds
    /// (a guard against DNS rebinding). `CAAL_HOSTS` (comma-separated) adds.
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub wyoming: WyomingConfig,
}

/// Who may talk to CAAL over Wyoming, and for how long.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WyomingConfig {
    /// Peers (addresses or CIDR ranges: "192.168.1.20", "10.0.0.0/24")
    /// let in by their address, as Home Assistant is (it sends no secret).
    #[serde(default)]
    pub allow: Vec<String>,
    /// The environment variable holding the shared secret a peer not on the
    /// list sends first (`{"type": "caal-auth", "data": {"token": …}}`).
    #[serde(default = "default_wyoming_token_env")]
    pub token_env: String,
    /// Connections served at once; more are closed on arrival.
    #[serde(default = "default_wyoming_connections")]
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed.
    #[serde(default = "default_wyoming_idle")]
    pub idle_seconds: u64,
    /// The area each satellite is in, by its address or Home Assistant's
    /// satellite id ("192.168.1.31" = "kitchen", "assist_satellite.hall" =
    /// "hall"): "turn on the lights" from it acts there. A handled text's
    /// `context.area` says it instead.
    #[serde(default)]
    pub areas: BTreeMap<String, String>,
}

impl Default for WyomingConfig {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            token_env: default_wyoming_token_env(),
            max_connections: default_wyoming_connections(),
            idle_seconds: default_wyoming_idle(),
            areas: BTreeMap::new(),
        }
    }
}

fn default_wyoming_token_env() -> String {
    "CAAL_WYOMING_TOKEN".into()
}

fn default_wyoming_connections() -> usize {
    32
}

fn default_wyoming_idle() -> u64 {
    120
}

impl DoorsConfig {
    fn check(&self) -> Result<(), ConfigError> {
        for peer in &self.wyoming.allow {
            if peer_range(peer).is_none() {
                return Err(ConfigError::Value {
                    key: "doors.wyoming.allow".into(),
                    problem: format!(
                        "{peer:?} is not an address or a CIDR range; use e.g. \"192.168.1.20\" or \"192.168.1.0/24\""
                    ),
                });
            }
        }
        if self.wyoming.max_connections == 0 || self.wyoming.idle_seconds == 0 {
            return Err(ConfigError::Value {
                key: "doors.wyoming".into(),
                problem: "max_connections and idle_seconds must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// Live shipping (`caal serve --ship URL`): ended rounds, as the OTLP
/// export's spans, to an OTLP/HTTP receiver such as an OpenTelemetry Collector.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShipConfig {
    /// The receiver's base URL (`http://collector:4318`); batches go to
    /// `{url}/v1/traces`. Empty: no shipping unless `--ship` gives one.
    #[serde(default)]
    pub url: String,
    /// Rounds per request, at most.
    #[serde(default = "default_ship_batch")]
    pub batch_size: usize,
    /// How long a part batch waits for more rounds before it is sent.
    #[serde(default = "default_ship_flush")]
    pub flush_interval_ms: u64,
    /// One request's limit, connecting included.
    #[serde(default = "default_ship_timeout")]
    pub timeout_ms: u64,
    /// The first retry's wait; each next one doubles, up to `max_backoff_ms`.
    #[serde(default = "default_ship_base_backoff")]
    pub base_backoff_ms: u64,
    #[serde(default = "default_ship_max_backoff")]
    pub max_backoff_ms: u64,
    /// After a refusal (a 4xx but 408/429, an untrusted certificate), how
    /// long until the same batch is offered again: the receiver's side may
    /// be mended meanwhile (its credential list, its path, its certificate)
    /// and no home need restart for it. 0: stop until the service restarts.
    #[serde(default = "default_ship_refused_retry")]
    pub refused_retry_s: u64,
    /// The header the credential is sent in.
    #[serde(default = "default_ship_header")]
    pub header: String,
    /// The environment variable holding the header's whole value
    /// ("Bearer TOKEN", an API key). Never logged, never in the trace.
    #[serde(default)]
    pub credential_env: Option<String>,
    /// Or a file whose first line is that value.
    #[serde(default)]
    pub credential_file: Option<PathBuf>,
    /// Over https, trust only this CA file's certificates (PEM): a fleet's
    /// receiver with its own CA. Without it, the system's trusted certificates.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

impl Default for ShipConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            batch_size: default_ship_batch(),
            flush_interval_ms: default_ship_flush(),
            timeout_ms: default_ship_timeout(),
            base_backoff_ms: default_ship_base_backoff(),
            max_backoff_ms: default_ship_max_backoff(),
            refused_retry_s: default_ship_refused_retry(),
            header: default_ship_header(),
            credential_env: None,
            credential_file: None,
            ca_file: None,
        }
    }
}

fn default_ship_batch() -> usize {
    512
}
fn default_ship_flush() -> u64 {
    500
}
fn default_ship_timeout() -> u64 {
    10_000
}
fn default_ship_base_backoff() -> u64 {
    200
}
fn default_ship_max_backoff() -> u64 {
    30_000
}
fn default_ship_refused_retry() -> u64 {
    300
}
fn default_ship_header() -> String {
    "Authorization".into()
}

impl ShipConfig {
    /// The URL names a receiver over http(s) without a password in it, the
    /// numbers are in range, and the credential comes from one place.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, problem: String| ConfigError::Value {
            key: format!("ship.{key}"),
            problem,
        };
        if !self.url.is_empty() {
            check_ship_url(&self.url).map_err(|p| bad("url", p))?;
        }
        if !(1..=10_000).contains(&self.batch_size) {
            return Err(bad("batch_size", "must be between 1 and 10000".into()));
        }
        for (key, value) in [
            ("flush_interval_ms", self.flush_interval_ms),
            ("timeout_ms", self.timeout_ms),
            ("base_backoff_ms", self.base_backoff_ms),
        ] {
            if value == 0 {
                return Err(bad(key, "must be at least 1".into()));
            }
        }
        if self.max_backoff_ms < self.base_backoff_ms {
            return Err(bad(
                "max_backoff_ms",
                "must be at least base_backoff_ms".into(),
            ));
        }
        if self.header.is_empty()
            || !self
                .header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(bad(
                "header",
                format!(
                    "{:?} is not an HTTP header name; use e.g. \"Authorization\"",
                    self.header
                ),
            ));
        }
        if self.credential_env.is_some() && self.credential_file.is_some() {
            return Err(bad(
                "credential_env",
                "give credential_env or credential_file, not both".into(),
            ));
        }
        if self
            .credential_env
            .as_deref()
            .is_some_and(|v| v.trim().is_empty())
        {
            return Err(bad("credential_env", "names no variable".into()));
        }
        if self.ca_file.is_some() && self.url.to_ascii_lowercase().starts_with("http://") {
            return Err(bad(
                "ca_file",
                "is given but url is not https; remove ca_file or use an https URL".into(),
            ));
        }
        Ok(())
    }
}

/// A receiver's URL: http or https, a host, and no user or password (a
/// credential in a URL ends up in logs; `credential_env` keeps it out).
pub fn check_ship_url(url: &str) -> Result<(), String> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err(format!(
            "{url:?} is not an http:// or https:// URL; use e.g. \"http://collector:4318\""
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(format!("{url:?} names no host"));
    }
    if authority.contains('@') {
        return Err(
            "holds a user or password; put the credential in [ship] credential_env or credential_file instead".into(),
        );
    }
    Ok(())
}

/// Timers and reminders that ring.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    /// The IANA time zone reminders at a time of day are in ("Europe/Berlin");
    /// empty: the machine's. `CAAL_TIME_ZONE` overrides it.
    #[serde(default)]
    pub time_zone: String,
    /// Background jobs (research) run on this many worker threads at once.
    #[serde(default = "default_job_workers")]
    pub job_workers: usize,
    /// A job is tried this many times (a process that died under it counts).
    #[serde(default = "default_job_attempts")]
    pub job_attempts: u32,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            time_zone: String::new(),
            job_workers: default_job_workers(),
            job_attempts: default_job_attempts(),
        }
    }
}

fn default_job_workers() -> usize {
    2
}

fn default_job_attempts() -> u32 {
    2
}

/// Reasoning steps, justifications and receipts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasoningConfig {
    /// Each reasoning step keeps at most this many characters.
    pub max_step_chars: usize,
    /// Governed beyond levels 3 and 4: these commands' tools require
    /// `_justification`, and their actions get signed receipts.
    #[serde(default)]
    pub governed_commands: Vec<String>,
    pub on_missing_justification: Policy,
    pub on_check_error: Policy,
    pub min_justification_chars: usize,
    pub parroting_blocklist: Vec<String>,
    /// Ask a model tier how well the justification supports the action.
    pub coherence_check: bool,
    pub coherence_threshold: f64,
}

/// What happens to a governed command whose justification is missing or fails a check.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Not run; the person is told why.
    Block,
    /// Run only after one more confirmation than its level asks.
    Escalate,
    /// Run as its level says; the receipt records the failed checks.
    Allow,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Block => "block",
            Policy::Escalate => "escalate",
            Policy::Allow => "allow",
        }
    }
}

/// Voice: speech to text, the audio kept, spoken replies.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoiceConfig {
    /// The whisper model: a ggml file in the models dir, or a path.
    pub model: String,
    /// What `caal model install` converts it from: a CTranslate2 Whisper
    /// model's directory in the models dir, or a path.
    pub model_source: String,
    /// Spoken language (`en`), or `auto` to detect it.
    pub language: String,
    /// A transcript heard less surely than this is taken for noise that
    /// whisper made words of: no round, no audio kept.
    pub min_speech_confidence: f32,
    /// Threads whisper uses (0: as many as the machine has cores).
    pub threads: usize,
    /// Whisper's decoding: 1 for greedy, more for a beam search over that
    /// many hypotheses (slower, and surer on short commands).
    pub beam_size: u32,
    /// What people say here, given to whisper as its first words;
    /// `{names}` in it becomes the home's rooms and devices. Empty for none.
    pub prompt: String,
    /// A level-3 or level-4 command heard with a lower confidence (mean
    /// token probability) is asked again instead of confirmed.
    pub min_confidence: f32,
    /// A request guessed below the templates (by meaning, among other
    /// words, by a model) from a transcript whose least sure word scored
    /// below this is asked about first.
    pub min_guess_word: f32,
    /// A spoken request one of whose values (a name, an item, a number)
    /// was heard with a word below this is asked about first, however it
    /// was understood: the value is whatever was heard.
    pub min_value_word: f32,
    /// A thing's value (a list's item, a timer's name) that the language
    /// pack's `known_things` does not hold is held to this bar instead,
    /// when it is higher: whisper writes a sure-sounding word for one it
    /// misheard ("out milk"), and a thing nobody buys is the likelier slip.
    pub min_unknown_thing_word: f32,
    /// Audio files are deleted by `caal audio sweep` after this many days
    /// unless pinned (`AUDIO_RETENTION_DAYS` overrides).
    pub retention_days: u32,
    /// Where audio files go; empty: `audio/` in the data dir.
    pub audio_dir: String,
    /// The Piper voice that speaks replies: a model in the models dir or
    /// a path, its JSON beside it; empty: espeak-ng speaks.
    #[serde(default)]
    pub piper: String,
    /// ONNX Runtime's library (Piper runs on it): in the models dir or a path.
    #[serde(default)]
    pub onnxruntime: String,
    /// espeak-ng's voice where no Piper voice can be had; empty (with
    /// `piper` empty): no spoken replies.
    pub tts_voice: String,
    /// While someone speaks, a partial transcript this often (0: none).
    pub partial_every_ms: u32,
    pub vad: VadConfig,
    #[serde(default)]
    pub wake: WakeConfig,
}

/// The wake word (see `voice::wake`): off unless a model is named.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WakeConfig {
    /// A phrase's classifier, in the models dir or a path (the setup
    /// installs openWakeWord's: `openwakeword-0.5.1/hey_jarvis_v0.1.onnx`,
    /// `alexa_v0.1.onnx`, `hey_mycroft_v0.1.onnx`, `hey_rhasspy_v0.1.onnx`;
    /// CC BY-NC-SA 4.0, non-commercial). Empty: no wake word, every
    /// utterance is heard.
    pub model: String,
    /// The classifier's score from which the phrase is heard.
    pub threshold: f32,
    /// After the phrase, speech that starts within this long is heard;
    /// after a question (a confirmation), the answer too.
    pub listen_ms: u32,
    /// Where the phrase is heard, whisper must hear it too: written at the
    /// transcript's start, or fitting the audio within this (log-likelihood)
    /// of what whisper wrote in its place.
    pub margin: f32,
}

impl Default for WakeConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            threshold: 0.5,
            listen_ms: 8_000,
            margin: 8.0,
        }
    }
}

/// Where an utterance starts and ends (see `voice::vad`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VadConfig {
    /// Silero VAD's model (in the models dir, or a path): it judges speech
    /// where installed; empty: energy alone.
    #[serde(default)]
    pub model: String,
    /// Silero's probability from which a chunk is speech.
    #[serde(default = "default_vad_threshold")]
    pub threshold: f32,
    /// A frame quieter than this (dBFS) is never speech.
    pub threshold_db: f32,
    /// Speech is this many dB above the noise floor.
    pub snr_db: f32,
    /// Speech shorter than this is a click, not an utterance.
    pub min_speech_ms: u32,
    /// An utterance with less voiced sound than this is noise (a fan, a hiss).
    pub min_voiced_ms: u32,
    /// A streamed utterance ends after this much quiet (a short wait: the
    /// reply is waiting on it).
    pub silence_ms: u32,
    /// A WAV file is split where it is quiet this long (no one waits on a
    /// file, so a pause mid-sentence stays inside its utterance).
    pub file_silence_ms: u32,
    /// Audio kept from before speech was detected.
    pub pre_roll_ms: u32,
    /// An utterance is cut here.
    pub max_utterance_ms: u32,
}

/// Bucket memory: how items are scored and how much of a bucket goes into a prompt.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// A signal (a write, a topic hit, a citation) counts half as much after this many days.
    pub half_life_days: f64,
    pub weights: MemoryWeights,
    /// The context package holds up to this many pinned, high-score and recent items.
    pub package_pinned: usize,
    pub package_top: usize,
    pub package_recent: usize,
    /// The short part of the package goes into every prompt; the long part
    /// only when the prompt has room. Sizes in `budget_unit`.
    pub short_budget: usize,
    pub long_budget: usize,
    pub budget_unit: BudgetUnit,
    /// The longest item, in characters.
    pub max_item_chars: usize,
}

/// What a score is made of: each signal's weight.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryWeights {
    /// Added, undecayed, while an item is pinned.
    pub pin: f64,
    /// Each time the item is written (remembered again, updated).
    pub write: f64,
    /// Each time a round's topic finds the item.
    pub topic_hit: f64,
    /// Each time a model's answer quotes the item.
    pub citation: f64,
}

/// How memory budgets are counted.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BudgetUnit {
    Chars,
    /// Estimated as one token per four characters, rounded up.
    Tokens,
}

impl BudgetUnit {
    /// The size of `text` in this unit.
    pub fn measure(self, text: &str) -> usize {
        let chars = text.chars().count();
        match self {
            BudgetUnit::Chars => chars,
            BudgetUnit::Tokens => chars.div_ceil(4),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BudgetUnit::Chars => "chars",
            BudgetUnit::Tokens => "tokens",
        }
    }
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
    pub chat_reply: String,
    /// Said for a request that waits on something to happen first ("if it
    /// gets dark, turn on the porch light"): nothing runs now.
    #[serde(default = "default_conditional_reply")]
    pub conditional_reply: String,
    /// A backstop: the most time the layers take to understand one round
    /// (ms); then the rest are skipped and what was said goes to the
    /// fallback. The layers' work is bounded by words (`MAX_WORDS`), so this
    /// is reached only by a machine far slower than expected.
    #[serde(default = "default_understand_ms")]
    pub understand_ms: u64,
}

fn default_vad_threshold() -> f32 {
    0.5
}

fn default_understand_ms() -> u64 {
    10_000
}

fn default_conditional_reply() -> String {
    "That waits on something happening first, and I can't watch for that yet; ask me when it's time.".into()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityConfig {
    pub confirmation_ttl_seconds: u64,
    pub undo_window_seconds: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyConfig {
    pub max_input_chars: usize,
    pub on_long_input: SafetyAction,
    pub on_injection: SafetyAction,
    /// Environment variables holding secrets, scrubbed wherever their values appear.
    #[serde(default)]
    pub secret_env: Vec<String>,
}

/// Where input that no rule matches goes in a state.
/// The model tiers, the retry policy around them, and what a prompt holds.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    pub system_prompt: String,
    pub clarify_reply: String,
    pub max_prompt_chars: usize,
    pub max_tokens: u32,
    pub local_retries: u32,
    pub remote_retries: u32,
    pub tool_retries: u32,
    /// Commands an LLM proposes need at least this authority level.
    pub tool_auth_floor: u8,
    /// The tiers (`local`, `remote`) offered every command for talk no
    /// layer understood; the others are offered only the commands the
    /// meaning layer found near it.
    pub offer_all_tools_to: Vec<String>,
    /// The tiers whose words answer talk no layer understood (questions
    /// about the world, remarks). Another tier may still propose one of the
    /// commands near what was said, but its words are not given: CAAL says
    /// what it can do instead (`cannot_help` of the language). A small
    /// local model answers such talk with nonsense.
    pub answer_with: Vec<String>,
    /// The tiers asked to propose a command near talk no layer understood
    /// (asked first, at `tool_auth_floor`). The embedded 135M model's
    /// proposals were guesses ("where does the shopping list get saved":
    /// add "Item 1"), and it rescued no request the layers missed: not
    /// asked by default.
    pub propose_with: Vec<String>,
    pub local: LocalTierConfig,
    pub remote: Option<RemoteTierConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalTierConfig {
    pub enabled: bool,
    /// A GGUF file: a path, or a file name looked up in the models dir.
    pub model: String,
    /// An OpenAI-compatible server already running; empty: caal starts caal-llm.
    #[serde(default)]
    pub url: String,
    /// The caal-llm binary; empty: beside the caal binary.
    #[serde(default)]
    pub server_bin: String,
    /// A chat template llama.cpp knows by name ("gemma", "chatml"); empty:
    /// the model file's own. Base models' files carry none.
    #[serde(default)]
    pub chat_template: String,
    /// caal-llm loads the model's weights requantized to this llama.cpp
    /// type, made once beside the model ("q8_0": prompts decode about 1.4x
    /// faster than from Q4_1); empty: the file as it is.
    #[serde(default)]
    pub requantize: String,
    pub threads: usize,
    pub ctx: u32,
    pub timeout_ms: u64,
    pub start_timeout_ms: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteTierConfig {
    pub kind: ProviderKind,
    pub url: String,
    pub model: String,
    /// The environment variable holding the API key, if the service needs one.
    #[serde(default)]
    pub api_key_env: Option<String>,
    pub timeout_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unmatched {
    Fallback,
    Chat,
}

/// How soon questions escalate to the stronger model in a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Escalation {
    Early,
    Normal,
    Late,
}

/// A conversation state, with what UIs show of it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    pub label: String,
    pub icon: String,
    pub description: String,
    pub unmatched: Unmatched,
    pub escalation: Escalation,
    #[serde(default)]
    pub prefer_local: bool,
    /// Whether a model asked in this state is offered the commands as tools.
    #[serde(default = "yes")]
    pub offer_tools: bool,
    /// The tiers whose words answer talk in this state, instead of
    /// `[llm] answer_with` (a state for chatting gives any model's words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_with: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorsConfig {
    pub home_assistant: Option<HomeAssistantConfig>,
    #[serde(default)]
    pub webhooks: BTreeMap<String, WebhookConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HomeAssistantConfig {
    /// `http://host[:port]` or `https://host[:port]`.
    pub url: String,
    /// The environment variable holding the long-lived access token.
    pub token_env: String,
    pub timeout_ms: u64,
    /// Over https: the CA certificate (PEM) that signed Home Assistant's
    /// certificate, trusted instead of the public roots (a home
    /// installation's own certificate). Without it, the public roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    pub url: String,
    pub timeout_ms: u64,
}

/// What a person can ask for: its authority level, where it runs, its typed parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandConfig {
    pub summary: String,
    pub reply: String,
    /// The one reply for a chain that ran this command on several things
    /// ("lock up": "The {door} are locked." with "front door, back door and
    /// side door"); a parameter that differs between the runs is their
    /// values joined. Without it each run replies.
    pub reply_many: Option<String>,
    #[serde(default = "one")]
    pub auth_level: u8,
    /// `builtin` (default), `home_assistant`, or `webhook:<name>`.
    #[serde(default = "builtin")]
    pub executor: String,
    /// Home Assistant `domain.service`, e.g. `lock.unlock`.
    pub service: Option<String>,
    /// Home Assistant service data; values are templates over the parameters.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    #[serde(default)]
    pub params: BTreeMap<String, ParamSpec>,
    pub undo: Option<UndoConfig>,
    /// What "don't …" of this command asks for, when it asks for something
    /// ("don't remind me to call mom": cancel that reminder); without it a
    /// negated request is only acknowledged and nothing runs.
    pub negation: Option<UndoConfig>,
    /// False for read-only commands: those are retried after transient failures.
    #[serde(default = "yes")]
    pub side_effects: bool,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    String,
    Enum,
    Integer,
    Number,
    Duration,
    /// The name of a configured conversation state.
    State,
    /// An area of the home (or "all"); an unknown one is refused naming the areas there are.
    Area,
    /// A device of the home, of the kinds in `values` (domains) if given.
    Device,
    /// A time of day ("6 pm", "half past six", "tomorrow at 9"), kept as
    /// `[tomorrow ]HH:MM[?]`.
    Time,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    #[serde(rename = "type")]
    pub kind: ParamKind,
    #[serde(default)]
    pub values: Vec<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub unit: Option<String>,
    pub default: Option<String>,
    /// May be left unsaid: the command then runs without it.
    #[serde(default)]
    pub optional: bool,
    /// Takes one thing at a time: a list said in it ("eggs, flour and
    /// milk") is one command per thing (the language's `list_joins`).
    #[serde(default)]
    pub several: bool,
}

/// The compensating command that undoes a level-2 command.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndoConfig {
    pub command: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MacroConfig {
    pub summary: String,
    pub steps: Vec<MacroStep>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MacroStep {
    pub command: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// The home model: areas (rooms) and devices, with the other names people use.
#[derive(Clone, Debug, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct HomeConfig {
    #[serde(default)]
    pub areas: Vec<AreaConfig>,
    #[serde(default)]
    pub devices: Vec<DeviceConfig>,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AreaConfig {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<String>,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    pub name: String,
    /// Home Assistant's domain: light, lock, cover, climate, switch, fan, ...
    pub domain: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub area: Option<String>,
    /// What commands receive for it (e.g. `front` for the front door's lock); default: the name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_class: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

/// The understanding layers below the rules.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnderstandConfig {
    /// Match Home Assistant's sentence library (installed by the setup).
    pub templates: bool,
    /// The library's language (and the number words'): "en" or "de".
    pub language: String,
    /// Rules of this priority or below yield to a template match.
    pub priority: i32,
    /// What is said differently in each language: skip words, split
    /// words, negations, expansion rules, CAAL's own sentences.
    #[serde(default)]
    pub languages: BTreeMap<String, LanguageConfig>,
    /// What an understood intent runs.
    #[serde(default)]
    pub intents: Vec<IntentMapConfig>,
    /// The semantic layer: what templates miss, by the nearest examples.
    #[serde(default)]
    pub semantic: SemanticConfig,
    /// The model layer: what the semantic layer is not sure of, decided by
    /// a language model choosing among its nearest meanings.
    #[serde(default)]
    pub model: ModelChoiceConfig,
    /// The sound layer: what speech to text heard and no layer above
    /// understood, read as the sentence it sounds nearest.
    #[serde(default)]
    pub sounds: SoundsConfig,
}

/// The sound layer (`[understand.sounds]`): a transcript no layer above
/// understood is compared by sound (phones, from a pronunciation
/// dictionary) with every sentence the templates can say; the nearest,
/// when near enough, is read instead and understood by the templates.
/// Only for speech: typed words were not misheard.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SoundsConfig {
    /// The pronunciation dictionary (CMUdict's `cmudict.dict`) under the
    /// models dir, or a path; "" turns the layer off.
    pub lexicon: String,
    /// Above this distance (the alignment's cost over its length) no
    /// sentence is near enough to be what was said.
    pub threshold: f64,
    /// At or below it a command runs at its level; further, it asks first.
    /// A reading whose wildcard takes heard words must be this near, and a
    /// template match whose wildcard took words yields to a reading this
    /// near that fills every slot from the home's names and numbers.
    pub sure: f64,
    /// A meaning the meaning layer finds at least this similar to what was
    /// heard, as it was heard, stands: the words made sense as they were.
    pub meaning_over: f64,
    /// For speech with its audio at hand (voice rounds), the readings
    /// within `listen_threshold` are weighed by how well whisper finds
    /// each fits the audio, and the best fitting is read; off, the nearest
    /// within `threshold`.
    pub listen: bool,
    /// How far a reading may sound from what was heard and still be read
    /// when it fits the audio (always asked about first).
    pub listen_threshold: f64,
    /// Beyond `threshold`, a reading is read only if it fits the audio no
    /// more than this much worse (whisper's log-likelihood) than the words
    /// it wrote.
    pub listen_margin: f64,
    /// A spoken request that says one word of an opposite pair ("pause",
    /// "on", "unlock") is asked about first when the request with the
    /// other word fits the audio no more than this much worse (whisper's
    /// log-likelihood): hearing which side was said is in doubt. 0: never.
    #[serde(default = "default_doubt_margin")]
    pub doubt_margin: f64,
}

fn default_doubt_margin() -> f64 {
    2.0
}

impl Default for SoundsConfig {
    fn default() -> Self {
        Self {
            lexicon: String::new(),
            threshold: 0.15,
            sure: 0.1,
            meaning_over: 0.8,
            listen: true,
            listen_threshold: 0.3,
            listen_margin: 4.5,
            doubt_margin: default_doubt_margin(),
        }
    }
}

/// The model layer (`[understand.model]`): when the nearest meanings are
/// not clearly apart, or not near enough to be sure, a model tier is shown
/// the few nearest (each as the command it would run, with the example it
/// is nearest to) and a way out ("none of these"), and picks one; its reply
/// is held to that choice by the tool's JSON Schema (a grammar, locally).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelChoiceConfig {
    pub enabled: bool,
    /// `score`: the model's likelihood of each option after what was said
    /// (`/v1/completions` with log probabilities; best for small local
    /// models); `choose`: the model picks one in a tool call held to the
    /// options (for chat-only services).
    pub method: ChoiceMethod,
    /// How many of the nearest meanings the model chooses among.
    pub candidates: usize,
    /// Below this similarity to the nearest example the model is not asked
    /// (the sentence is too far from every meaning to be one of them).
    pub floor: f64,
    /// The instruction the model is given before the options.
    pub prompt: String,
    pub max_tokens: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChoiceMethod {
    Score,
    Choose,
}

impl Default for ModelChoiceConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            method: ChoiceMethod::Score,
            candidates: 3,
            floor: 0.45,
            prompt: String::new(),
            max_tokens: 48,
        }
    }
}

/// The semantic layer (`[understand.semantic]`): an utterance no template
/// matched is compared with each language's examples by a sentence
/// embedding; the nearest decide, if they are near enough.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SemanticConfig {
    /// The embedding model's folder under the models dir (or a path); "" turns the layer off.
    pub model: String,
    /// Below this similarity to the nearest example, nothing is understood.
    pub threshold: f64,
    /// At or above it, a command runs at its configured level; between
    /// `threshold` and `sure` it asks first (level 3).
    pub sure: f64,
    /// The nearest example of another meaning must be this much further away.
    pub margin: f64,
}

impl Default for SemanticConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            threshold: 0.6,
            sure: 0.8,
            margin: 0.03,
        }
    }
}

/// Something CAAL can do, as it offers it when it cannot help.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferConfig {
    /// The commands it stands for (offered if any is configured).
    pub commands: Vec<String>,
    /// How it is said in the list of offers ("switch the lights").
    pub says: String,
    /// A request of it a person may say ("turn on the kitchen lights").
    pub example: String,
}

/// The words the meaning layer says an entity as, so that the words around
/// it weigh ("put the office light on" is "turn the room light on"): a room,
/// a light, a lock and a free-text slot an example marks (`{item}`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericWords {
    #[serde(default)]
    pub room: String,
    #[serde(default)]
    pub light: String,
    #[serde(default)]
    pub door: String,
    #[serde(default)]
    pub thing: String,
}

/// One language's words for the understanding layers (`[understand.languages.en]`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanguageConfig {
    /// Words dropped before matching, on top of the library's own.
    #[serde(default)]
    pub skip_words: Vec<String>,
    /// Several requests in one sentence, split at these words.
    #[serde(default)]
    pub split_words: Vec<String>,
    /// Words that join the things of a list ("eggs and flour"), for a
    /// parameter that takes one thing at a time (`several`); a comma does too.
    #[serde(default)]
    pub list_joins: Vec<String>,
    /// Things that are one though joined ("mac and cheese").
    #[serde(default)]
    pub joined_items: Vec<String>,
    /// Said before a request that is not to be done ("don't unlock the door").
    #[serde(default)]
    pub negations: Vec<String>,
    /// Sayings with a negation word that still ask for something ("never
    /// mind the timer", "don't forget the milk"): the semantic layer, which
    /// otherwise leaves any sentence with a negation alone, reads these.
    #[serde(default)]
    pub negation_idioms: Vec<String>,
    /// Words that tell of the past ("was", "yesterday"): a sentence with one
    /// and none of `request_verbs` is a story, which the meaning layer
    /// never takes for a request ("it was dark when I left the office").
    #[serde(default)]
    pub narrative_words: Vec<String>,
    /// Who may be said to have done something, and the endings of what
    /// they did ("since we changed the bulbs"): a story too.
    #[serde(default)]
    pub narrative_subjects: Vec<String>,
    #[serde(default)]
    pub past_endings: Vec<String>,
    /// Verbs that ask for something ("turn", "lock", "add").
    #[serde(default)]
    pub request_verbs: Vec<String>,
    /// How a question of whether something is or was so opens ("did I", "is
    /// the"): a request said inside such a sentence is asked about, not
    /// asked for. No request is taken out of its words, no room read from
    /// them, and the meaning layer decides for it only a command that
    /// changes nothing (`side_effects = false`).
    #[serde(default)]
    pub question_words: Vec<String>,
    /// Words of opposite meaning ("brighter", "darker"): the meaning layer
    /// does not take an example that says one of a pair for a sentence that
    /// says the other (sentence embeddings barely tell them apart: "make
    /// the bedroom darker" is near "make the office brighter").
    #[serde(default)]
    pub opposites: Vec<[String; 2]>,
    /// Of `opposites`, the pairs that say which state a thing is put in
    /// ("on" and "off"): a meaning at least two of whose examples say one
    /// word (and not the other) is near a sentence that says only the other
    /// by none of its examples that say neither.
    #[serde(default)]
    pub state_opposites: Vec<[String; 2]>,
    /// Words that say which way a change goes, as two sides ("warmer",
    /// "up", "more" against "cooler", "down", "less"): a meaning whose
    /// examples say only one side is not what a sentence saying only the
    /// other means ("a bit warmer please" is not "less heat please").
    #[serde(default)]
    pub directions: Vec<[Vec<String>; 2]>,
    /// Words that say every room at once ("all", "everywhere"): a meaning
    /// that fixes every room is, said in a room without one of them, that
    /// room's ("kill the lights" in the kitchen).
    #[serde(default)]
    pub all_words: Vec<String>,
    /// The words for a timer ("timer", "countdown"), for finding its name.
    #[serde(default)]
    pub timer_words: Vec<String>,
    /// Words a timer's name follows anywhere ("a timer called bread").
    #[serde(default)]
    pub name_leads: Vec<String>,
    /// Words a name follows before a timer word ("the pasta timer").
    #[serde(default)]
    pub name_follows: Vec<String>,
    /// Words that are never part of a timer's name ("a timer for me").
    #[serde(default)]
    pub not_names: Vec<String>,
    /// Words in a clause that point back at a thing an earlier clause of the
    /// same sentence named ("is the front door locked? lock it").
    #[serde(default)]
    pub refer_to_thing: Vec<String>,
    /// Words that stand for a thing said elsewhere ("milk, add it to the
    /// list"): never a thing's name, and read as a phrase an earlier clause
    /// said alone.
    #[serde(default)]
    pub refer_to_item: Vec<String>,
    /// Words that name no thing when a phrase begins with them ("anything
    /// from the shop"): never a thing to add ("do we need anything").
    #[serde(default)]
    pub indefinites: Vec<String>,
    /// Words that point back at a place an earlier clause named ("no one's
    /// in the guest room, lights off there").
    #[serde(default)]
    pub refer_to_place: Vec<String>,
    /// The speaker's place said ("in here", "this room"), each with what it
    /// is read as when the client says where it is (`in the {area}`).
    #[serde(default)]
    pub speaker_place: BTreeMap<String, String>,
    /// How a room is said after a request (`in the {area}`): a room named
    /// apart from the request ("turn the lights off, out on the porch") is
    /// read joined to it so.
    #[serde(default)]
    pub in_room: String,
    /// Words that take back a name just said: "the kitchen, sorry, the
    /// dining room lights" is the dining room's.
    #[serde(default)]
    pub corrections: Vec<String>,
    /// Words that take back what was just said only between two stops
    /// ("remind me at 6 pm, no, 7 pm, …"): elsewhere they mean something else.
    #[serde(default)]
    pub corrections_between_stops: Vec<String>,
    /// Words that open what replaces the part taken back ("make that 14").
    #[serde(default)]
    pub correction_leads: Vec<String>,
    /// Words a phrase cannot end with, so a phrase ending with one was
    /// broken off ("add apple juice to the, …").
    #[serde(default)]
    pub broken_endings: Vec<String>,
    /// Words that open a reason or purpose said after a request ("so",
    /// "because"): what follows them is no part of it.
    #[serde(default)]
    pub reason_words: Vec<String>,
    /// Typed slips that make another word ("of" for "off"), tried one at a
    /// time where nothing understood the words as typed.
    #[serde(default)]
    pub word_slips: BTreeMap<String, String>,
    /// The words that say each state of a kind of device, by domain and
    /// state ("locked up" is a lock's `locked`): what a question's `state`
    /// slot is read from.
    #[serde(default)]
    pub state_words: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// What a word of `refer_to_thing` stands for when what was said before
    /// spoke of lights, not of one device: the first with the room said
    /// (`{area}`), the second without ("turn on the kitchen lights … turn
    /// them off": "the kitchen lights").
    #[serde(default)]
    pub refer_to_lights: Vec<String>,
    /// Words that speak of lights, for `refer_to_lights`.
    #[serde(default)]
    pub light_words: Vec<String>,
    /// Words after which a clause names something wanted from the shop ("we
    /// need bread, add it to the list"): what follows is what "it" is.
    #[serde(default)]
    pub item_leads: Vec<String>,
    /// Words before a request that ask it be kept in mind ("don't forget we
    /// need milk", "remember to lock the back door"): the request after them
    /// is what is asked. After a lead that ends in "to", words that are no
    /// request of their own are something to be reminded of, asked as
    /// `remind_with` ("don't forget to call mom at 5").
    #[serde(default)]
    pub remember_leads: Vec<String>,
    /// How a reminder is asked in this language, `{what}` for the rest.
    #[serde(default)]
    pub remind_with: String,
    /// What CAAL says when nothing understood what was said and no model
    /// tier answers in words (`[llm] answer_with`): `{offers}` becomes the
    /// `says` of the offers whose commands are configured, joined.
    #[serde(default)]
    pub cannot_help: String,
    /// Said after `cannot_help`, `{example}` the example of the offer
    /// nearest in meaning to what was said.
    #[serde(default)]
    pub try_saying: String,
    /// What CAAL offers to do, in this language: an `example` a person may
    /// say, for any of `commands`.
    #[serde(default)]
    pub offers: Vec<OfferConfig>,
    /// Words that make a request wait on something ("if it rains, close the
    /// garage"): the layers below the templates never run such a request now.
    #[serde(default)]
    pub conditions: Vec<String>,
    /// Words that ask about what follows "if" or "whether" ("can you check
    /// if the garage is open", "I wonder whether I locked the back door"):
    /// a question asked indirectly, not a condition.
    #[serde(default)]
    pub asking_words: Vec<String>,
    /// "If" and "whether": after `asking_words`, what follows is asked.
    #[serde(default)]
    pub whether_words: Vec<String>,
    /// Words that open an indirect request ("you could turn on the
    /// lights" asks for it).
    #[serde(default)]
    pub polite_asks: Vec<String>,
    /// Who a past deed is asked of with `did_word` ("I left the porch
    /// light on" asks "did I leave the porch light on").
    #[serde(default)]
    pub did_subjects: Vec<String>,
    #[serde(default)]
    pub did_word: String,
    /// Irregular past forms and the verb they are said with after "did".
    #[serde(default)]
    pub past_forms: BTreeMap<String, String>,
    /// A perfect said as the state it left ("whether the garage door has
    /// been closed" asks "is the garage door closed").
    #[serde(default)]
    pub perfect_forms: BTreeMap<String, String>,
    /// The verbs a statement turns into a question by going first ("the
    /// garage is open" asks "is the garage open").
    #[serde(default)]
    pub be_verbs: Vec<String>,
    /// Words right after a condition word that make it a question ("when
    /// is the timer done" sets no condition).
    #[serde(default)]
    pub condition_questions: Vec<String>,
    /// Words before a name ("the", "my"): a run of words right after one is
    /// not a clause of its own; an answer or an item starts after them.
    #[serde(default)]
    pub determiners: Vec<String>,
    /// The determiners that open the name of a thing the home has ("the
    /// porch light", "my desk lamp"); "a joke" names none.
    #[serde(default)]
    pub definites: Vec<String>,
    /// Words an answer to "which one?" may add ("the", "one", "I mean").
    #[serde(default)]
    pub answer_fillers: Vec<String>,
    /// Places in a list said as words ("first", "second"), and the word for the last one.
    #[serde(default)]
    pub ordinals: Vec<String>,
    #[serde(default)]
    pub last_words: Vec<String>,
    /// Answers to "which room?" that mean every room, and how that is said
    /// in the request again (`everywhere`).
    #[serde(default)]
    pub all_answers: Vec<String>,
    #[serde(default)]
    pub everywhere: String,
    /// A room named alone, as it is put back into a request (`{area}`).
    #[serde(default)]
    pub in_area: String,
    /// What the meaning layer puts for the entities of a sentence before it
    /// weighs its meaning (`understand::mentions::generic`).
    #[serde(default)]
    pub generic: GenericWords,
    /// Words that open a room said alone ("in the kitchen") and close it
    /// ("kitchen please").
    #[serde(default)]
    pub answer_leads: Vec<String>,
    #[serde(default)]
    pub answer_tails: Vec<String>,
    /// Words that are never a device's name, however an open slot took
    /// them ("set the temperature to 19.5" names no device "the temperature").
    #[serde(default)]
    pub not_device_names: Vec<String>,
    /// Words before an item that are no part of it ("some more milk").
    #[serde(default)]
    pub item_fillers: Vec<String>,
    /// Words that say no ("not", "never"), and sayings with them that do not ("no one").
    #[serde(default)]
    pub negative_words: Vec<String>,
    #[serde(default)]
    pub not_negative: Vec<String>,
    /// A device kind (its domain) as people say it, where the domain is
    /// not a word ("climate": "thermostat").
    #[serde(default)]
    pub kind_names: BTreeMap<String, String>,
    /// Words that tell what kind of thing a sentence is about, by the first
    /// part of command ids (`lights`, `thermostat`): the meaning layer does
    /// not decide a command of one kind for a sentence that speaks only of another.
    #[serde(default)]
    pub topic_words: BTreeMap<String, Vec<String>>,
    /// Words that make a sentence asking nothing in words a wish for a
    /// command of a kind (by the first part of command ids: "it's dark in
    /// here" for `lights`): the meaning layer proposes no command of a kind
    /// listed here for such a sentence that says none of them ("the garage
    /// is still full of boxes").
    #[serde(default)]
    pub remark_needs: BTreeMap<String, Vec<String>>,
    /// Heard by speech to text before a request that was not said ("They
    /// illuminate the entire home"): a sentence nothing understands is read
    /// again without the first word, when it is one of these.
    #[serde(default)]
    pub heard_fillers: Vec<String>,
    /// A word's last letter heard as the next word's first ("lights on"
    /// heard as "light sun"): read again with the letter moved back.
    #[serde(default)]
    pub carried_letters: Vec<String>,
    /// Sounds heard one for the other at a sentence's start ("put" heard as
    /// "but"), as pairs of letters.
    #[serde(default)]
    pub sound_pairs: Vec<[String; 2]>,
    /// Words speech to text writes at a sentence's start for others said
    /// there ("and milk to the shopping list": add; "and half an hour
    /// remind me": in): each read in its place.
    #[serde(default)]
    pub first_heard_as: BTreeMap<String, Vec<String>>,
    /// Numbers speech to text writes as words that sound like them, before
    /// a unit ("down to degrees": two).
    #[serde(default)]
    pub number_heard_as: BTreeMap<String, String>,
    /// Units a number is said before, beside lengths of time ("degrees").
    #[serde(default)]
    pub number_units: Vec<String>,
    /// Words that say where, not which way, before a word of place and a
    /// room ("turn off the lights up in the yard"): left out where the
    /// sentence says a state elsewhere.
    #[serde(default)]
    pub place_particles: Vec<String>,
    /// The words of place they come before ("in", "at").
    #[serde(default)]
    pub place_prepositions: Vec<String>,
    /// Words that say a number is near enough, before it ("about ten
    /// minutes") or after it ("twenty minutes or so", "ish"): left out.
    #[serde(default)]
    pub approximate_before: Vec<String>,
    #[serde(default)]
    pub approximate_after: Vec<String>,
    /// Words that may open what is asked after an asking word ("check
    /// that the garage is shut").
    #[serde(default)]
    pub clause_leads: Vec<String>,
    /// The asking words that ask so without "if" ("check", "confirm").
    #[serde(default)]
    pub checking_words: Vec<String>,
    /// Tags after a sentence that make it a question ("…, no?", "…,
    /// right?"): "the back door is locked, no?" asks whether it is.
    #[serde(default)]
    pub question_tags: Vec<String>,
    /// Words of a kind of device and its domain ("lamp": light), and the
    /// words of where it is said with ("by", "on my"): "the light by the
    /// bed" is the one light whose name has a word that starts so.
    #[serde(default)]
    pub described_kinds: BTreeMap<String, String>,
    #[serde(default)]
    pub described_by: Vec<String>,
    /// Words that ask a request again for another room or device ("… and
    /// the same for the dining room").
    #[serde(default)]
    pub same_for: Vec<String>,
    /// Words that pass a request to a thing of the home ("tell", "ask"),
    /// the words that name such a thing (`addressed_kinds`: "heating",
    /// "list"), the word before what it is asked to do ("to": "tell the
    /// heating to go up two" is "the heating go up two") and the words
    /// before what is said to it ("that").
    #[serde(default)]
    pub addressed_leads: Vec<String>,
    #[serde(default)]
    pub addressed_kinds: Vec<String>,
    #[serde(default)]
    pub addressed_to: String,
    #[serde(default)]
    pub addressed_that: Vec<String>,
    /// How a length of time is said after a request that asks how long
    /// ("for {length}"): "the rice takes 12 minutes, set a timer".
    #[serde(default)]
    pub for_length: String,
    /// Words that point at a thing ("that", "this"), said as "the" before
    /// a kind's word: "that 5 minute timer".
    #[serde(default)]
    pub demonstratives: Vec<String>,
    /// Words that say whose a thing is ("of"): "the lights of the kitchen"
    /// is "the kitchen lights".
    #[serde(default)]
    pub of_words: Vec<String>,
    /// Words said while looking for the next one ("what is it"), left out
    /// with the mark after them.
    #[serde(default)]
    pub hesitations: Vec<String>,
    /// Prefixes that are no words of their own, typed apart from the word
    /// they begin ("un lock the front door"): read joined to the next word
    /// when the two make a word the sentences know ("unlock"), never as
    /// the word without them ("lock").
    #[serde(default)]
    pub joined_prefixes: Vec<String>,
    /// Words speech to text writes for an opposite's prefix said ("unlock"
    /// heard "and lock"): a spoken request whose verb follows one of them
    /// is weighed against the opposite before it runs.
    #[serde(default)]
    pub prefix_heard_as: Vec<String>,
    /// Words that sound alike and mean different things ("18" and "80"): a
    /// spoken request that says one is weighed against the other before it
    /// runs, as an opposite is.
    #[serde(default)]
    pub heard_alike: Vec<[String; 2]>,
    /// Words speech to text writes for `in_word` before a room ("turn off
    /// the lights and the kitchen"): put back as it when a room follows.
    #[serde(default)]
    pub in_heard_as: Vec<String>,
    /// The word `in_heard_as` stands for ("in"); a pack that lists those
    /// words names it.
    #[serde(default)]
    pub in_word: String,
    /// Words that ask for one more of what the request before asked
    /// ("set a timer for 10 minutes and another for 5"): read as that
    /// request's words up to its kind's word ("set a timer").
    #[serde(default)]
    pub another_words: Vec<String>,
    /// Words that open a clause said aside of a request, after a comma
    /// ("…, I've already done it"): what a wildcard took from there is
    /// left out where the request is the same without it.
    #[serde(default)]
    pub aside_openers: Vec<String>,
    /// Words that say a level without a number ("full", "half"): a request
    /// found among other words is not the request where they are left out
    /// ("put the desk lamp on | full").
    #[serde(default)]
    pub level_words: Vec<String>,
    /// Polite words that close a request and are no part of it ("…, if
    /// you don't mind"): neither a condition nor a "not".
    #[serde(default)]
    pub closing_words: Vec<String>,
    /// The endings a verb of being is said with ("the cake's not done"):
    /// with `be_verbs`, what says that something is not so.
    #[serde(default)]
    pub be_contractions: Vec<String>,
    /// Each of those endings said in full, for a question asked of a
    /// clause ("whether the side door's unlocked": "is the side door
    /// unlocked").
    #[serde(default)]
    pub be_in_full: BTreeMap<String, String>,
    /// Words before a condition's word that make it tell when, not wait
    /// ("…, that's when screen time ends").
    #[serde(default)]
    pub condition_told: Vec<String>,
    /// A clause that names what the one before it asked for, and how the
    /// name is said inside a request ("…, call it potatoes": "… called
    /// potatoes").
    #[serde(default)]
    pub naming_leads: BTreeMap<String, String>,
    /// Things people commonly buy and time ("oat milk", "kitchen roll",
    /// "pasta"): a spoken item or timer name outside them is held to
    /// `voice.min_unknown_thing_word`.
    #[serde(default)]
    pub known_things: Vec<String>,
    /// Words that open a request and are no part of it ("ok", "so"): taken
    /// off a sentence's start, and the rest read alone.
    #[serde(default)]
    pub opening_words: Vec<String>,
    /// Words said between someone and what they do ("I always lock the back
    /// door", "we forget to close the garage"): a request's verb after
    /// someone and only these is what that person does, no request.
    #[serde(default)]
    pub habit_words: Vec<String>,
    /// Words before someone that ask ("can I get a timer"): the verb after
    /// them still asks.
    #[serde(default)]
    pub asking_modals: Vec<String>,
    /// Words said to someone else around a request ("one sec", "not you",
    /// "go on"): a clause at its start or end that says one is left out.
    #[serde(default)]
    pub said_to_others: Vec<String>,
    /// Words written as texts are ("n", "pls", "2"), as said; a digit only
    /// before a determiner or after one of `text_digit_after`.
    #[serde(default)]
    pub text_words: BTreeMap<String, String>,
    #[serde(default)]
    pub text_digit_after: Vec<String>,
    /// People a request is asked for ("my wife"), and what follows them
    /// ("wants": "I want"): the request said as the speaker's own.
    #[serde(default)]
    pub behalf_people: Vec<String>,
    #[serde(default)]
    pub behalf_leads: BTreeMap<String, String>,
    /// What a thing is said to need ("needs" and a verb in -ing, "should
    /// be" and the verb as done to it): read as the request for it.
    #[serde(default)]
    pub passive_needs: Vec<String>,
    #[serde(default)]
    pub passive_be: Vec<String>,
    /// Someone said to need a thing done to them, as whom it is done to
    /// ("I'll need reminding to …": "remind me to …").
    #[serde(default)]
    pub passive_people: BTreeMap<String, String>,
    /// Words that point at a thing ("that", "the"): "that timer just
    /// scared the life out of me" says what a thing did, a remark.
    #[serde(default)]
    pub thing_pointers: Vec<String>,
    /// A word that says a thing returns to how it was ("back"), before a
    /// word of state, direction or level (`back_before`): left out ("put
    /// the heating back up to 20").
    #[serde(default)]
    pub back_words: Vec<String>,
    #[serde(default)]
    pub back_before: Vec<String>,
    /// Leads that wish a state said as a condition ("I wouldn't mind if the
    /// study lights were at 60 percent"): taken off with the first of
    /// `wish_verbs` after them, the rest read as the state asked for.
    #[serde(default)]
    pub wish_leads: Vec<String>,
    /// The verbs of being that say the state after a wish lead ("were").
    #[serde(default)]
    pub wish_verbs: Vec<String>,
    /// Leads that ask with the verb in another form ("would you mind
    /// opening the garage"): taken off with that form read as the verb.
    #[serde(default)]
    pub gerund_leads: Vec<String>,
    /// The endings of that form ("ing"): a word is the verb of a template
    /// with the ending taken off, with an "e" put back ("closing"), or with
    /// a doubled last letter single ("setting").
    #[serde(default)]
    pub gerund_endings: Vec<String>,
    /// Expansion rules (`<turn>`) set over the library's own.
    #[serde(default)]
    pub rules: BTreeMap<String, String>,
    /// CAAL's own sentences, in the same template syntax.
    #[serde(default)]
    pub sentences: Vec<SentenceConfig>,
    /// The semantic layer's examples: what people mean, said as they say it.
    #[serde(default)]
    pub examples: Vec<ExampleConfig>,
}

/// Examples of one meaning for the semantic layer: an intent (as templates
/// name them; `-` for talk that is no request) with the slots every example
/// fills. Other slots are read from what was said: the home's rooms and
/// devices, numbers, durations, and a `{slot}` an example marks.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExampleConfig {
    /// Its id, for a user's file to replace or remove it by (default: the
    /// intent with its slots or conditions; `caal config check --json` lists them).
    #[serde(default)]
    pub id: Option<String>,
    pub intent: String,
    #[serde(default)]
    pub slots: BTreeMap<String, String>,
    /// Slots read from what was said: `area`, `name`, `brightness`,
    /// `temperature`, `seconds`, or one an example marks as `{item}`.
    #[serde(default)]
    pub find: Vec<String>,
    /// No room said: ask which (as "turn on the lights" does), not all of them.
    #[serde(default)]
    pub needs_area: bool,
    /// Questions: taken only for a sentence that asks (opens with one of
    /// `question_words`), so a story that names the same door ("the front
    /// door was open yesterday, so I locked it") is not answered as one.
    #[serde(default)]
    pub question: bool,
    pub examples: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentenceConfig {
    /// Its id, for a user's file to replace or remove it by (default: the
    /// intent with its slots or conditions; `caal config check --json` lists them).
    #[serde(default)]
    pub id: Option<String>,
    pub intent: String,
    pub sentences: Vec<String>,
    /// Slots every one of these sentences fills.
    #[serde(default)]
    pub slots: BTreeMap<String, String>,
    /// Whether the sound layer may read what was heard as one of these
    /// (default true). Not for sentences that fix a level they do not say
    /// ("dim the lights in the living room" is 30%): heard "turn the lights
    /// in our living room", a verb read as "dim" would set a level no one said.
    #[serde(default = "yes")]
    pub by_sound: bool,
    /// Whether these sentences name no room and mean the speaker's (default
    /// false): the client's area fills `area` ("lights to full" said in the
    /// bathroom); without one the router asks which room, as Home
    /// Assistant's sentences that require the satellite's area do.
    #[serde(default)]
    pub speakers_room: bool,
}

/// An intent (with slot conditions) mapped to a command and its parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentMapConfig {
    /// Its id, for a user's file to replace or remove it by (default: the
    /// intent with its slots or conditions; `caal config check --json` lists them).
    #[serde(default)]
    pub id: Option<String>,
    pub intent: String,
    /// Slot values that must hold (`domain = "light"`); `*` for "present", `-` for "absent".
    #[serde(default)]
    pub when: BTreeMap<String, String>,
    pub command: String,
    /// Parameters as templates over the slots: `{area}`; `{minutes|0}` with
    /// a default; a parameter whose slot is missing is left to its default.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// What kind of thing a rule routes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
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
    /// "that was wrong", "good job": a verdict on the round before.
    Feedback,
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
            RouteType::Feedback => "feedback",
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
    #[serde(rename = "macro")]
    pub macro_name: Option<String>,
    /// Raises the command's level for this phrasing; never lowers it.
    pub auth_level: Option<u8>,
    #[serde(default)]
    pub priority: i32,
    pub reply: Option<String>,
    /// Name of the capture that holds the topic, if any.
    pub topic: Option<String>,
    /// What a memory route does: remember, forget, pin, unpin or recall.
    pub memory: Option<MemoryOp>,
    /// What a feedback route says of the round before: good or bad.
    pub feedback: Option<Verdict>,
}

/// A person's verdict on a round: it did what they meant, or it did not.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Good,
    Bad,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
        }
    }
}

impl std::str::FromStr for Verdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "good" | "right" | "up" | "+1" => Ok(Verdict::Good),
            "bad" | "wrong" | "down" | "-1" => Ok(Verdict::Bad),
            other => Err(format!("{other:?} is not a verdict; say good or bad")),
        }
    }
}

/// The memory commands people can say or type.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MemoryOp {
    Remember,
    Forget,
    Pin,
    Unpin,
    Recall,
}

impl MemoryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryOp::Remember => "remember",
            MemoryOp::Forget => "forget",
            MemoryOp::Pin => "pin",
            MemoryOp::Unpin => "unpin",
            MemoryOp::Recall => "recall",
        }
    }
}

fn one() -> u8 {
    1
}

fn builtin() -> String {
    "builtin".into()
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
    #[error("config {what} {name:?}: {problem}")]
    Item {
        what: &'static str,
        name: String,
        problem: String,
    },
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
        let mut merged = defaults()?;
        let mut provenance = layers::of_defaults(&merged);
        let file = match &source.explicit {
            Some(path) => Some(path.clone()),
            None => source.candidates.iter().find(|p| p.is_file()).cloned(),
        };
        if let Some(path) = &file {
            let text = fs::read_to_string(path).map_err(|e| ConfigError::Read {
                path: path.clone(),
                source: e,
            })?;
            let origin = path.display().to_string();
            layers::merge(
                &mut merged,
                parse(&text, &origin)?,
                &origin,
                &mut provenance,
            )?;
        }
        let mut config = Self::from_table(merged, file.as_deref(), env)?;
        config.provenance = provenance;
        Ok((config, file))
    }

    /// Builds a configuration from TOML text merged over the defaults (tests, tools).
    pub fn from_toml_over_defaults(text: &str) -> Result<Self, ConfigError> {
        let mut merged = defaults()?;
        let mut provenance = layers::of_defaults(&merged);
        let origin = "(given text)";
        layers::merge(&mut merged, parse(text, origin)?, origin, &mut provenance)?;
        let mut config = Self::from_table(merged, None, &|_| None)?;
        config.provenance = provenance;
        Ok(config)
    }

    fn from_table(
        merged: toml::Table,
        file: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let canonical = serde_json::to_value(&merged).unwrap_or_default();
        let mut config: Config =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Parse {
                    origin: file.map_or("defaults".into(), |p| p.display().to_string()),
                    message: e.message().to_owned(),
                })?;
        if let Some(d) = env("CAAL_DURABILITY") {
            config.store.durability = d.parse().map_err(|problem| ConfigError::Value {
                key: "CAAL_DURABILITY".into(),
                problem,
            })?;
        }
        config.llm.apply_env(env)?;
        if let Some(tz) = env("CAAL_TIME_ZONE") {
            config.schedule.time_zone = tz;
        }
        if let Some(hosts) = env("CAAL_HOSTS") {
            config.doors.hosts.extend(
                hosts
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(str::to_owned),
            );
        }
        if let Some(days) = env("AUDIO_RETENTION_DAYS") {
            config.voice.retention_days = days.parse().map_err(|_| ConfigError::Value {
                key: "AUDIO_RETENTION_DAYS".into(),
                problem: format!("{days:?} is not a number of days; use e.g. 30"),
            })?;
        }
        config.hash = crate::crypto::hash_of(&serde_json::json!({
            "config": canonical,
            "durability": format!("{:?}", config.store.durability),
            "llm": {"local": config.llm.local.model, "local_url": config.llm.local.url,
                    "remote": config.llm.remote.as_ref().map(|r| (&r.url, &r.model))},
        }));
        config.check()?;
        Ok(config)
    }

    /// The embedded defaults alone.
    pub fn defaults() -> Result<Self, ConfigError> {
        Self::load(&ConfigSource::default(), &|_| None).map(|(c, _)| c)
    }

    /// Checks what serde cannot: names unique, levels in range, patterns
    /// compile, every reference resolves.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !self.states.contains_key(&self.conversation.default_state) {
            return Err(ConfigError::Value {
                key: "conversation.default_state".into(),
                problem: format!(
                    "{:?} is not a configured state; use one of: {}",
                    self.conversation.default_state,
                    self.states.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        if self.authority.confirmation_ttl_seconds == 0 {
            return Err(ConfigError::Value {
                key: "authority.confirmation_ttl_seconds".into(),
                problem: "must be at least 1".into(),
            });
        }
        self.memory.check()?;
        self.doors.check()?;
        self.ship.check()?;
        for (peer, area) in &self.doors.wyoming.areas {
            if peer.trim().is_empty() || peer.contains(char::is_whitespace) {
                return Err(ConfigError::Value {
                    key: "doors.wyoming.areas".into(),
                    problem: format!(
                        "{peer:?} names no satellite; name each by its address or Home Assistant's satellite id, e.g. \"192.168.1.31\" = \"kitchen\""
                    ),
                });
            }
            let named = |a: &AreaConfig| {
                std::iter::once(&a.name)
                    .chain(&a.aliases)
                    .any(|n| n.eq_ignore_ascii_case(area.trim()))
            };
            if !self.home.areas.iter().any(named) {
                let areas: Vec<&str> = self.home.areas.iter().map(|a| a.name.as_str()).collect();
                return Err(ConfigError::Value {
                    key: "doors.wyoming.areas".into(),
                    problem: format!(
                        "{peer} is said to be in {area:?}, which is no area of the home; its areas are {}",
                        areas.join(", ")
                    ),
                });
            }
        }
        if !["", "q8_0", "q4_0"].contains(&self.llm.local.requantize.as_str()) {
            return Err(ConfigError::Value {
                key: "llm.local.requantize".into(),
                problem: format!(
                    "{:?} is not a type caal-llm writes; use \"q8_0\", \"q4_0\", or \"\" to load the model file as it is",
                    self.llm.local.requantize
                ),
            });
        }
        let sounds = &self.understand.sounds;
        for (key, value) in [
            ("threshold", sounds.threshold),
            ("sure", sounds.sure),
            ("listen_threshold", sounds.listen_threshold),
        ] {
            if !(0.0..=0.45).contains(&value) {
                return Err(ConfigError::Value {
                    key: format!("understand.sounds.{key}"),
                    problem: format!(
                        "{value} must be between 0 and 0.45 (a distance by sound: 0 the same sounds; 0.15 reads a word or two misheard)"
                    ),
                });
            }
        }
        if !(sounds.listen_margin.is_finite() && sounds.listen_margin >= 0.0) {
            return Err(ConfigError::Value {
                key: "understand.sounds.listen_margin".into(),
                problem: format!(
                    "{} must be 0 or more (how much worse, in whisper's log-likelihood, a reading may fit the audio than the words heard)",
                    sounds.listen_margin
                ),
            });
        }
        if !(0.0..=1.0).contains(&self.voice.min_confidence) {
            return Err(ConfigError::Value {
                key: "voice.min_confidence".into(),
                problem: format!("{} must be between 0 and 1", self.voice.min_confidence),
            });
        }
        if self.voice.vad.silence_ms == 0 || self.voice.vad.max_utterance_ms == 0 {
            return Err(ConfigError::Value {
                key: "voice.vad".into(),
                problem: "silence_ms and max_utterance_ms must be at least 1".into(),
            });
        }
        for id in &self.reasoning.governed_commands {
            if !self.commands.contains_key(id) {
                return Err(ConfigError::Value {
                    key: "reasoning.governed_commands".into(),
                    problem: format!("{id:?} is not a command under [commands]"),
                });
            }
        }
        if !(0.0..=1.0).contains(&self.reasoning.coherence_threshold) {
            return Err(ConfigError::Value {
                key: "reasoning.coherence_threshold".into(),
                problem: format!(
                    "{} must be between 0 and 1",
                    self.reasoning.coherence_threshold
                ),
            });
        }
        if self.schedule.job_workers == 0 || self.schedule.job_attempts == 0 {
            return Err(ConfigError::Value {
                key: "schedule.job_workers".into(),
                problem: "job_workers and job_attempts must be at least 1".into(),
            });
        }
        time_zone(&self.schedule.time_zone).map_err(|problem| ConfigError::Value {
            key: "schedule.time_zone".into(),
            problem,
        })?;
        if let Some(ha) = &self.executors.home_assistant {
            ha.check()?;
        }
        Ok(())
    }
}

impl HomeAssistantConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let url = self.url.trim();
        let https = url.starts_with("https://");
        if !(https || url.starts_with("http://")) {
            return Err(ConfigError::Value {
                key: "executors.home_assistant.url".into(),
                problem: format!(
                    "{:?} is not an http:// or https:// address; use e.g. \"http://homeassistant.local:8123\"",
                    self.url
                ),
            });
        }
        if let Some(ca) = &self.ca_file {
            if !https {
                return Err(ConfigError::Value {
                    key: "executors.home_assistant.ca_file".into(),
                    problem: format!(
                        "a CA file is for an https:// address, and the url is {:?}; remove ca_file or use https",
                        self.url
                    ),
                });
            }
            if !ca.is_file() {
                return Err(ConfigError::Value {
                    key: "executors.home_assistant.ca_file".into(),
                    problem: format!(
                        "{} is not a file; give the path of the CA certificate (PEM) that signed Home Assistant's certificate",
                        ca.display()
                    ),
                });
            }
        }
        Ok(())
    }
}

impl MemoryConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let positive = |key: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(ConfigError::Value {
                    key: format!("memory.{key}"),
                    problem: format!("{v} must be a number above 0"),
                })
            }
        };
        positive("half_life_days", self.half_life_days)?;
        positive("weights.write", self.weights.write)?;
        for (key, v) in [
            ("weights.pin", self.weights.pin),
            ("weights.topic_hit", self.weights.topic_hit),
            ("weights.citation", self.weights.citation),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ConfigError::Value {
                    key: format!("memory.{key}"),
                    problem: format!("{v} must be a number of 0 or more"),
                });
            }
        }
        if self.max_item_chars == 0 {
            return Err(ConfigError::Value {
                key: "memory.max_item_chars".into(),
                problem: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

impl LlmConfig {
    /// `CAAL_LLM_*` overrides: the local model and server, and a remote tier
    /// (`CAAL_LLM_REMOTE_URL` and `CAAL_LLM_REMOTE_MODEL` make one).
    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = env("CAAL_LLM_LOCAL_ENABLED") {
            self.local.enabled = match v.as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(ConfigError::Value {
                        key: "CAAL_LLM_LOCAL_ENABLED".into(),
                        problem: format!("{v:?} is not a switch; use true or false"),
                    });
                }
            };
        }
        if let Some(v) = env("CAAL_LLM_LOCAL_MODEL") {
            self.local.model = v;
        }
        if let Some(v) = env("CAAL_LLM_LOCAL_URL") {
            self.local.url = v;
        }
        if let Some(v) = env("CAAL_LLM_SERVER_BIN") {
            self.local.server_bin = v;
        }
        if let Some(v) = env("CAAL_LLM_CHAT_TEMPLATE") {
            self.local.chat_template = v;
        }
        let url = env("CAAL_LLM_REMOTE_URL");
        let model = env("CAAL_LLM_REMOTE_MODEL");
        if url.is_some() || model.is_some() {
            let base = self.remote.clone().unwrap_or(RemoteTierConfig {
                kind: ProviderKind::OpenAi,
                url: String::new(),
                model: String::new(),
                api_key_env: Some("CAAL_LLM_API_KEY".into()),
                timeout_ms: 20_000,
            });
            self.remote = Some(RemoteTierConfig {
                url: url.unwrap_or(base.url.clone()),
                model: model.unwrap_or(base.model.clone()),
                ..base
            });
        }
        if let (Some(kind), Some(remote)) = (env("CAAL_LLM_REMOTE_KIND"), self.remote.as_mut()) {
            remote.kind = match kind.as_str() {
                "openai" => ProviderKind::OpenAi,
                "ollama" => ProviderKind::Ollama,
                _ => {
                    return Err(ConfigError::Value {
                        key: "CAAL_LLM_REMOTE_KIND".into(),
                        problem: format!("{kind:?} is not a provider; use openai or ollama"),
                    });
                }
            };
        }
        if let Some(remote) = &self.remote
            && (remote.url.is_empty() || remote.model.is_empty())
        {
            return Err(ConfigError::Value {
                key: "llm.remote".into(),
                problem: "a remote tier needs both `url` and `model` (or CAAL_LLM_REMOTE_URL and CAAL_LLM_REMOTE_MODEL)".into(),
            });
        }
        for (key, tiers) in [
            ("llm.offer_all_tools_to", &self.offer_all_tools_to),
            ("llm.answer_with", &self.answer_with),
            ("llm.propose_with", &self.propose_with),
        ] {
            if let Some(t) = tiers
                .iter()
                .find(|t| !matches!(t.as_str(), "local" | "remote"))
            {
                return Err(ConfigError::Value {
                    key: key.into(),
                    problem: format!("{t:?} is not a tier; name \"local\" or \"remote\""),
                });
            }
        }
        if !(1..=4).contains(&self.tool_auth_floor) {
            return Err(ConfigError::Value {
                key: "llm.tool_auth_floor".into(),
                problem: format!(
                    "{} is not an authority level; use 1 to 4",
                    self.tool_auth_floor
                ),
            });
        }
        Ok(())
    }
}

fn parse(text: &str, origin: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| ConfigError::Parse {
        origin: origin.to_owned(),
        message: e.to_string(),
    })
}

/// Tables merge key by key; anything else (lists included) is replaced.
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
    fn defaults_load_with_commands_rules_and_states() {
        let c = Config::defaults().unwrap();
        assert_eq!(c.store.durability, Durability::Normal);
        assert!(
            c.rules
                .iter()
                .any(|r| r.command.as_deref() == Some("lights.set"))
        );
        assert_eq!(c.commands["door.unlock"].auth_level, 3);
        assert_eq!(c.commands["garage.open"].auth_level, 4);
        assert_eq!(c.commands["shopping.add"].auth_level, 2);
        for state in ["default", "conversation", "action", "research"] {
            assert!(c.states.contains_key(state), "{state}");
        }
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
        let c = load_with("[states.party]\nlabel = \"Party\"\nicon = \"🎉\"\ndescription = \"Loud.\"\nunmatched = \"chat\"\nescalation = \"late\"\n", &[]).unwrap();
        assert!(
            c.states.contains_key("party") && c.states.contains_key("default"),
            "states extend"
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
        let err = load_with("[conversation]\ndefault_state = \"sleepy\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("sleepy") && err.contains("research"), "{err}");
        let err = load_with("[llm.local]\nrequantize = \"q5_k\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("llm.local.requantize") && err.contains("q5_k") && err.contains("q8_0"),
            "{err}"
        );
        let err = load_with("[understand.sounds]\nlisten_threshold = 0.6\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("understand.sounds.listen_threshold") && err.contains("0.45"),
            "{err}"
        );
        let err = load_with("[understand.sounds]\nlisten_margin = -1.0\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("understand.sounds.listen_margin"), "{err}");
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
