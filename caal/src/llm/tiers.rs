//! The model tiers: the local one (caal-llm, started and supervised here, or
//! a server already running) and an optional remote one; the order and the
//! number of attempts each gets in a conversation state; the start-up guard.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};

use crate::{
    config::{Escalation, LlmConfig, LocalTierConfig},
    router::Router,
};

use super::{ChatRequest, ChatResponse, LlmError, Provider, ProviderKind};

/// The caal-llm server binary's name.
pub const SERVER_BIN: &str = "caal-llm";

pub use crate::config::models_dir;

/// A model setting: a path as given, or a bare file name in the models dir.
pub fn resolve_model(model: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let path = Path::new(model);
    if path.components().count() > 1 || path.is_absolute() {
        path.to_path_buf()
    } else {
        models_dir(env).join(model)
    }
}

/// A model's name: its file's stem (caal-llm names it the same way).
fn model_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "local".into())
}

/// The caal-llm binary: as configured, else beside this executable (or one
/// folder up, where cargo puts binaries when tests run from `deps/`).
pub fn server_bin(configured: &str) -> PathBuf {
    if !configured.is_empty() {
        return PathBuf::from(configured);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    let beside = dir.join(SERVER_BIN);
    if beside.is_file() {
        return beside;
    }
    dir.parent()
        .map(|p| p.join(SERVER_BIN))
        .filter(|p| p.is_file())
        .unwrap_or(beside)
}

/// Start-up problems that stop CAAL, each naming the key to set.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error(
        "{needer} needs a language model, but none can be had: {why}. Set llm.local.enabled = true with an installed model, or configure [llm.remote] (CAAL_LLM_REMOTE_URL and CAAL_LLM_REMOTE_MODEL)"
    )]
    NoTier { needer: String, why: String },
}

struct Running {
    child: Child,
    url: String,
    provider: Arc<Provider>,
}

/// caal-llm as a child process: started on first use, restarted if it died,
/// killed when CAAL ends (and it ends itself when CAAL's pipe closes).
pub struct LocalServer {
    bin: PathBuf,
    model: PathBuf,
    threads: usize,
    ctx: u32,
    chat_template: String,
    requantize: String,
    timeout_ms: u64,
    start_timeout_ms: u64,
    running: Mutex<Option<Running>>,
}

impl LocalServer {
    fn provider(&self) -> Result<Arc<Provider>, LlmError> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = running.as_mut() {
            match r.child.try_wait() {
                Ok(None) => return Ok(r.provider.clone()),
                Ok(Some(status)) => {
                    tracing::warn!(%status, "caal-llm exited; starting it again");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "caal-llm cannot be polled; starting it again")
                }
            }
        }
        let started = self.start()?;
        let provider = started.provider.clone();
        *running = Some(started);
        Ok(provider)
    }

    fn start(&self) -> Result<Running, LlmError> {
        let fail = |detail: String| LlmError::Start {
            bin: self.bin.display().to_string(),
            detail,
        };
        let mut command = Command::new(&self.bin);
        if !self.chat_template.is_empty() {
            command.args(["--chat-template", &self.chat_template]);
        }
        if !self.requantize.is_empty() {
            command.args(["--requantize", &self.requantize]);
        }
        let mut child = command
            .arg("--model")
            .arg(&self.model)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(["--threads", &self.threads.to_string()])
            .args(["--ctx", &self.ctx.to_string()])
            .arg("--exit-with-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| fail(e.to_string()))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Drain whatever else it prints until it ends.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(Duration::from_millis(self.start_timeout_ms)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().ok();
                return Err(fail(format!(
                    "it did not report ready within {} ms (exit: {status:?}); its messages are above",
                    self.start_timeout_ms
                )));
            }
        };
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .ok_or_else(|| fail(format!("unexpected ready line {line:?}")))?
            .to_owned();
        let model = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("model="))
            .unwrap_or("local")
            .to_owned();
        tracing::info!(%url, %model, "caal-llm started");
        let provider = Provider::new(ProviderKind::OpenAi, &url, &model, None, self.timeout_ms);
        Ok(Running {
            child,
            url,
            provider: Arc::new(provider),
        })
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Some(r) = self
            .running
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}

enum Endpoint {
    Fixed(Provider),
    Local(LocalServer),
}

/// One tier: a name for the trace and a way to reach its model.
pub struct Tier {
    pub name: &'static str,
    endpoint: Endpoint,
    /// Texts this tier's model has scored, and their sums: a model scores
    /// the same text the same way, and the options' "with nothing said"
    /// texts come back on every sentence that offers them.
    scored: Mutex<hashlink::LruCache<(String, String), f64>>,
}

/// How many scored texts a tier keeps.
const SCORED: usize = 512;

impl Tier {
    pub fn fixed(name: &'static str, provider: Provider) -> Self {
        Self {
            name,
            endpoint: Endpoint::Fixed(provider),
            scored: Mutex::new(hashlink::LruCache::new(SCORED)),
        }
    }

    /// The local server `bin` serving `model`, started on first use.
    pub fn local(bin: PathBuf, model: PathBuf, config: &LocalTierConfig) -> Self {
        Self {
            name: "local",
            endpoint: Endpoint::Local(LocalServer {
                bin,
                model,
                threads: config.threads,
                ctx: config.ctx,
                chat_template: config.chat_template.clone(),
                requantize: config.requantize.clone(),
                timeout_ms: config.timeout_ms,
                start_timeout_ms: config.start_timeout_ms,
                running: Mutex::new(None),
            }),
            scored: Mutex::new(hashlink::LruCache::new(SCORED)),
        }
    }

    /// The model's name as the trace records it before an answer names it.
    pub fn model(&self) -> String {
        match &self.endpoint {
            Endpoint::Fixed(p) => p.model().to_owned(),
            Endpoint::Local(l) => model_name(&l.model),
        }
    }

    pub fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        match &self.endpoint {
            Endpoint::Fixed(p) => p.chat(request),
            Endpoint::Local(l) => l.provider()?.chat(request),
        }
    }

    /// Scores continuations (`Provider::score`); only the texts not scored
    /// before are sent.
    pub fn score(&self, texts: &[(String, String)]) -> Result<Vec<f64>, LlmError> {
        let mut sums: Vec<Option<f64>> = {
            let mut scored = self.scored.lock().unwrap_or_else(|e| e.into_inner());
            texts.iter().map(|t| scored.get(t).copied()).collect()
        };
        let missing: Vec<(String, String)> = texts
            .iter()
            .zip(&sums)
            .filter(|(_, s)| s.is_none())
            .map(|(t, _)| t.clone())
            .collect();
        if !missing.is_empty() {
            let fresh = match &self.endpoint {
                Endpoint::Fixed(p) => p.score(&missing)?,
                Endpoint::Local(l) => l.provider()?.score(&missing)?,
            };
            let mut scored = self.scored.lock().unwrap_or_else(|e| e.into_inner());
            let mut fresh = missing.into_iter().zip(fresh);
            for sum in sums.iter_mut().filter(|s| s.is_none()) {
                let (text, value) = fresh.next().ok_or_else(|| LlmError::Malformed {
                    url: self.model(),
                    detail: "fewer scores than texts".into(),
                })?;
                scored.insert(text, value);
                *sum = Some(value);
            }
        }
        Ok(sums.into_iter().flatten().collect())
    }

    /// Starts a local server now rather than on the first question.
    pub fn warm_up(&self) -> Result<(), LlmError> {
        match &self.endpoint {
            Endpoint::Fixed(_) => Ok(()),
            Endpoint::Local(l) => l.provider().map(|_| ()),
        }
    }

    /// The server's address, and its process id if CAAL started it (once it runs).
    pub fn server(&self) -> Option<(String, Option<u32>)> {
        match &self.endpoint {
            Endpoint::Fixed(p) => Some((p.base_url().to_owned(), None)),
            Endpoint::Local(l) => l
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|r| (r.url.clone(), Some(r.child.id()))),
        }
    }

    /// Whether the endpoint answers at all (a quick GET, for start-up warnings).
    pub fn reachable(&self) -> Result<(), String> {
        match &self.endpoint {
            Endpoint::Fixed(p) => p.probe(),
            Endpoint::Local(_) => Ok(()),
        }
    }
}

/// The tiers in effect.
#[derive(Default)]
pub struct Tiers {
    pub local: Option<Tier>,
    pub remote: Option<Tier>,
}

/// What the start-up guard found.
pub struct Guarded {
    pub tiers: Option<Arc<Tiers>>,
    /// Printed at start; nothing stops.
    pub warnings: Vec<String>,
}

impl Tiers {
    pub fn is_empty(&self) -> bool {
        self.local.is_none() && self.remote.is_none()
    }

    /// The tiers of `config`, checked: a tier that cannot work is left out
    /// with a warning; if a route needs a model and none is left, that is an
    /// error naming the keys to set. `probe_remote` also checks that a remote
    /// tier answers (a warning if not).
    pub fn guard(
        config: &LlmConfig,
        router: &Router,
        env: &dyn Fn(&str) -> Option<String>,
        probe_remote: bool,
    ) -> Result<Guarded, GuardError> {
        let mut warnings = Vec::new();
        let mut problems = Vec::new();
        let mut tiers = Tiers::default();
        let local = &config.local;
        if !local.enabled {
            problems.push("llm.local.enabled is false".to_owned());
        } else if !local.url.is_empty() {
            let name = model_name(&resolve_model(&local.model, env));
            tiers.local = Some(Tier::fixed(
                "local",
                Provider::new(
                    ProviderKind::OpenAi,
                    &local.url,
                    &name,
                    None,
                    local.timeout_ms,
                ),
            ));
        } else {
            let model = resolve_model(&local.model, env);
            let bin = server_bin(&local.server_bin);
            if !model.is_file() {
                problems.push(format!(
                    "the local model {} is not installed (llm.local.model; `bash .ci/setup` installs it, or set CAAL_LLM_LOCAL_MODEL to a GGUF file)",
                    model.display()
                ));
            } else if !bin.is_file() {
                problems.push(format!(
                    "the local model's server {} is not built (llm.local.server_bin; `cargo build --release -p caal-llm-server` builds it, or set CAAL_LLM_SERVER_BIN)",
                    bin.display()
                ));
            } else {
                tiers.local = Some(Tier::local(bin, model, local));
            }
        }
        if let Some(remote) = &config.remote {
            let key = remote.api_key_env.as_deref().and_then(env);
            let tier = Tier::fixed(
                "remote",
                Provider::new(
                    remote.kind,
                    &remote.url,
                    &remote.model,
                    key,
                    remote.timeout_ms,
                ),
            );
            if probe_remote && let Err(e) = tier.reachable() {
                warnings.push(format!(
                    "the remote model tier at {} does not answer ({e}); questions stay on the local tier until it does (llm.remote.url)",
                    remote.url
                ));
            }
            tiers.remote = Some(tier);
        }
        let needer = router.needs_llm();
        if tiers.is_empty() {
            return match needer {
                Some(needer) => Err(GuardError::NoTier {
                    needer,
                    why: problems.join("; "),
                }),
                None => Ok(Guarded {
                    tiers: None,
                    warnings,
                }),
            };
        }
        if tiers.local.is_none() && local.enabled {
            warnings.extend(problems);
        }
        Ok(Guarded {
            tiers: Some(Arc::new(tiers)),
            warnings,
        })
    }

    /// The tiers to try, in order, and how many attempts each gets, for a
    /// state's escalation: `early` goes to the remote tier first; `normal`
    /// tries the local tier 1 + `local_retries` times, then the remote;
    /// `late` gives the local tier one attempt more before escalating.
    pub fn plan(&self, escalation: Escalation, config: &LlmConfig) -> Vec<(&Tier, u32)> {
        let local = self.local.as_ref();
        let remote = self.remote.as_ref();
        let local_attempts = 1 + config.local_retries;
        let remote_attempts = 1 + config.remote_retries;
        let mut plan = Vec::new();
        match escalation {
            Escalation::Early => {
                plan.extend(remote.map(|t| (t, remote_attempts)));
                plan.extend(local.map(|t| (t, local_attempts)));
            }
            Escalation::Normal => {
                plan.extend(local.map(|t| (t, local_attempts)));
                plan.extend(remote.map(|t| (t, remote_attempts)));
            }
            Escalation::Late => {
                plan.extend(local.map(|t| (t, local_attempts + 1)));
                plan.extend(remote.map(|t| (t, remote_attempts)));
            }
        }
        plan
    }
}
