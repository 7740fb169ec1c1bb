//! Live shipping (`caal serve --ship URL`, `[ship]`): every ended round,
//! as the spans of the OTLP export, POSTed to an OTLP/HTTP receiver (an
//! OpenTelemetry Collector) in gzip-compressed protobuf batches, on a
//! thread of its own so the service's answers never wait for it.
//!
//! The trace store is the queue (`trace::ShipQueue`): a batch is read from
//! it, sent, and only when the receiver answers 2xx does each conversation's
//! mark move. An outage is waited out with exponential backoff and jitter
//! (or the receiver's `Retry-After`); a kill loses nothing, as the next
//! start sends again from the marks; what was sent but not marked is sent
//! twice, with the same trace and span ids, so the receiver's side can drop
//! the copy. A refusal (a 4xx other than 408/429, a certificate nobody
//! trusts) is reported (`caal ship status`, the page, the log) and not
//! retried at the outage's pace: the same batch is offered again only every
//! `[ship] refused_retry_s` (5 minutes), so a receiver mended on its side is
//! found again without a restart; the rounds wait in the store meanwhile.

mod send;
pub mod wire;

use std::{
    path::Path,
    sync::{Arc, Condvar, Mutex},
    thread::{self, JoinHandle},
    time::Duration,
};

pub use send::{
    Credential, Receiver, Sent, backoff, classify, jitter_unit, retry_after, traces_endpoint,
};

use crate::config::ShipConfig;
use crate::export::otlp::round_spans;
use crate::tls::Trust;
use crate::trace::{QueuedRound, ShipQueue, StoreError};

/// How shipping runs, resolved from `[ship]`, `--ship` and the credential.
#[derive(Clone, Debug)]
pub struct ShipOptions {
    pub url: String,
    pub batch_size: usize,
    pub flush_interval: Duration,
    pub timeout: Duration,
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// How long after a refusal the batch is offered again; `None`: never
    /// (until the service restarts).
    pub refused_retry: Option<Duration>,
    pub credential: Option<Credential>,
    /// Whom the receiver's certificate must be signed by, over https.
    pub trust: Trust,
}

/// Why shipping cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ShipError {
    #[error(
        "[ship] credential_env names {0}, which is not set; export it (the header's whole value, e.g. \"Bearer TOKEN\") or remove credential_env"
    )]
    MissingEnv(String),
    #[error(
        "cannot read [ship] credential_file {path}: {source}; give a file holding the header's value"
    )]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("[ship] credential_file {0} is empty; write the header's value into it")]
    EmptyFile(String),
    #[error("[ship] ca_file: {0}")]
    CaFile(String),
    #[error(
        "[ship] ca_file is given but the receiver {0} is not https; remove ca_file or use an https URL"
    )]
    CaFileOverHttp(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ShipOptions {
    /// Shipping as configured, with `url` (from `--ship`) over `[ship] url`;
    /// `None` when neither names a receiver.
    pub fn resolve(
        config: &ShipConfig,
        url: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ShipError> {
        let Some(url) = url.or((!config.url.is_empty()).then_some(config.url.as_str())) else {
            return Ok(None);
        };
        let value = match (&config.credential_env, &config.credential_file) {
            (Some(var), _) => Some(
                env(var)
                    .filter(|v| !v.trim().is_empty())
                    .ok_or_else(|| ShipError::MissingEnv(var.clone()))?,
            ),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|source| ShipError::File {
                    path: path.display().to_string(),
                    source,
                })?;
                let line = text.lines().next().unwrap_or("").trim().to_owned();
                if line.is_empty() {
                    return Err(ShipError::EmptyFile(path.display().to_string()));
                }
                Some(line)
            }
            (None, None) => None,
        };
        let trust = trust_for(config, url)?;
        Ok(Some(Self {
            trust,
            url: url.to_owned(),
            batch_size: config.batch_size,
            flush_interval: Duration::from_millis(config.flush_interval_ms),
            timeout: Duration::from_millis(config.timeout_ms),
            base_backoff: Duration::from_millis(config.base_backoff_ms),
            max_backoff: Duration::from_millis(config.max_backoff_ms),
            refused_retry: (config.refused_retry_s > 0)
                .then(|| Duration::from_secs(config.refused_retry_s)),
            credential: value.map(|v| Credential::new(&config.header, &v)),
        }))
    }
}

/// Whom an https receiver's certificate must be signed by: the CA file's
/// certificates when `[ship] ca_file` is given, else the system's (Mozilla's
/// roots where the system has none, said in the log).
fn trust_for(config: &ShipConfig, url: &str) -> Result<Trust, ShipError> {
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    match (&config.ca_file, https) {
        (Some(_), false) => Err(ShipError::CaFileOverHttp(url.to_owned())),
        (Some(path), true) => Ok(Trust::CaFile(
            crate::tls::ca_certificates(path).map_err(ShipError::CaFile)?,
        )),
        // Plain http trusts nobody's certificates: none are asked for.
        (None, false) => Ok(Trust::Mozilla),
        (None, true) => {
            let (trust, why) = Trust::system();
            if let Some(why) = why {
                tracing::warn!("shipping: {why}");
            }
            Ok(trust)
        }
    }
}

/// The longest a receiver's `Retry-After` is obeyed for at once.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(600);

/// Tells the shipping thread to stop, and wakes it from a wait.
#[derive(Default)]
struct StopFlag {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl StopFlag {
    /// Waits up to `d`; true if told to stop.
    fn wait(&self, d: Duration) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, d, |s| !*s)
            .unwrap_or_else(|p| p.into_inner());
        *stopped
    }

    fn set(&self) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_all();
    }
}

/// The shipping thread. Dropping it stops it (after the request in
/// flight, at most the configured timeout).
pub struct Shipper {
    stop: Arc<StopFlag>,
    handle: Option<JoinHandle<()>>,
}

impl Shipper {
    /// Starts shipping the store at `trace_path` (open and migrated by the
    /// service already).
    pub fn start(trace_path: &Path, options: ShipOptions) -> Result<Self, ShipError> {
        let queue = ShipQueue::open(trace_path)?;
        let stop = Arc::new(StopFlag::default());
        let flag = stop.clone();
        // The thread logs where its starter logs (the service's subscriber, a test's).
        let logs = tracing::dispatcher::get_default(Clone::clone);
        let handle = thread::Builder::new()
            .name("caal-ship".into())
            .spawn(move || tracing::dispatcher::with_default(&logs, || run(queue, &options, &flag)))
            .map_err(|source| {
                ShipError::Store(StoreError::Io {
                    what: "cannot start the shipping thread".into(),
                    source,
                })
            })?;
        Ok(Self {
            stop,
            handle: Some(handle),
        })
    }

    /// Whether shipping has ended (stopped, or refused with no retry).
    pub fn finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for Shipper {
    fn drop(&mut self) {
        self.stop.set();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Reads, sends and marks batches until told to stop (or refused, when
/// refusals are not offered again).
fn run(mut queue: ShipQueue, options: &ShipOptions, stop: &StopFlag) {
    lower_priority();
    let receiver = Receiver::new(
        &options.url,
        options.timeout,
        options.credential.clone(),
        &options.trust,
    );
    tracing::info!(
        endpoint = receiver.endpoint(),
        trust = options.trust.describe(),
        "shipping ended rounds"
    );
    let mut waited_for_more = false;
    // A refusal is on record until a batch gets through.
    let mut refused = false;
    loop {
        let batch = match queue.next_batch(options.batch_size) {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!(error = %e, "shipping cannot read the trace; trying again");
                if stop.wait(options.flush_interval) {
                    return;
                }
                continue;
            }
        };
        // A part batch waits one flush interval for company: fewer, fuller requests.
        if batch.len() < options.batch_size && !waited_for_more {
            waited_for_more = true;
            if stop.wait(options.flush_interval) {
                return;
            }
            continue;
        }
        waited_for_more = false;
        if batch.is_empty() {
            continue;
        }
        match ship_batch(&mut queue, &receiver, options, stop, &batch, refused) {
            Shipped::Yes => refused = false,
            Shipped::Stopped => return,
            Shipped::Refused(reason) => match options.refused_retry {
                Some(wait) => {
                    refused = true;
                    tracing::error!(reason = %reason, retry_in_s = wait.as_secs(), "shipping refused; the rounds wait in the trace and the batch is offered again");
                    if stop.wait(wait) {
                        return;
                    }
                }
                None => {
                    tracing::error!(reason = %reason, "shipping stopped; the rounds wait in the trace until it is fixed and the service restarts");
                    return;
                }
            },
        }
    }
}

/// Shipping runs at a lower CPU priority (nice 10) than the threads that
/// answer: when the cores are busy with rounds, answers come first and
/// shipping catches up when they rest (the queue is the trace, so waiting
/// costs nothing but lag).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: sets this thread's nice value (on Linux a thread's own, named
    // by its id); no memory is touched, and a refusal only leaves it as it was.
    unsafe {
        let tid = libc::gettid();
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
    }
}

enum Shipped {
    Yes,
    Stopped,
    Refused(String),
}

/// Sends one batch until the receiver takes it (then marks it, and clears
/// an error on record: `erred`, or a retry of this batch), refuses it, or
/// the thread is told to stop.
fn ship_batch(
    queue: &mut ShipQueue,
    receiver: &Receiver,
    options: &ShipOptions,
    stop: &StopFlag,
    batch: &[QueuedRound],
    erred: bool,
) -> Shipped {
    let spans: Vec<_> = batch
        .iter()
        .map(|q| round_spans(&q.round, &q.events))
        .collect();
    let body = wire::body(&spans);
    let mut attempt = 0u32;
    loop {
        match receiver.send(&body) {
            Sent::Acked { rejected } => {
                let note = rejected.map(|(n, why)| {
                    format!("the receiver took the batch but dropped {n} spans: {why}")
                });
                if let Some(note) = &note {
                    tracing::warn!("{note}");
                }
                if erred || attempt > 0 || note.is_some() {
                    let _ = queue.record_error(note.as_deref());
                }
                return mark(queue, batch, options, stop);
            }
            Sent::Retry { reason, after } => {
                attempt = attempt.saturating_add(1);
                let wait = after.map_or_else(
                    || {
                        backoff(
                            attempt,
                            options.base_backoff,
                            options.max_backoff,
                            jitter_unit(),
                        )
                    },
                    |a| a.min(RETRY_AFTER_CAP),
                );
                tracing::warn!(reason = %reason, attempt, wait_ms = wait.as_millis() as u64, "shipping will try again");
                let _ = queue.record_error(Some(&format!("{reason}; try {attempt}")));
                if stop.wait(wait) {
                    return Shipped::Stopped;
                }
            }
            Sent::Refused { reason } => {
                let next = match options.refused_retry {
                    Some(wait) => format!(
                        "offered again every {} s (a restart offers it at once)",
                        wait.as_secs_f64()
                    ),
                    None => "shipping stopped until the service restarts".into(),
                };
                let _ = queue.record_error(Some(&format!("{reason}; {next}")));
                return Shipped::Refused(reason);
            }
        }
    }
}

/// Commits the marks of an acknowledged batch. If the store cannot take
/// them now, it tries again: a mark not written means the batch is sent
/// again after a restart (a duplicate), never lost.
fn mark(
    queue: &mut ShipQueue,
    batch: &[QueuedRound],
    options: &ShipOptions,
    stop: &StopFlag,
) -> Shipped {
    let mut attempt = 0;
    loop {
        match queue.acknowledge(batch) {
            Ok(()) => return Shipped::Yes,
            Err(e) => {
                attempt += 1;
                tracing::warn!(error = %e, "cannot record what the receiver acknowledged; trying again");
                let wait = backoff(attempt, options.base_backoff, options.max_backoff, 0.5);
                if stop.wait(wait) {
                    return Shipped::Stopped;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
