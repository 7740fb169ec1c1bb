//! `caal bench attack`: what a hostile peer can cost the service, measured
//! as the probe of issue 41 did it. Three figures:
//! - routing time of hostile input up to the sanitizer's 2,000 characters
//!   (words that requests are made of, many clauses, scripts of several
//!   bytes a letter, one endless word), in process through the configured
//!   router (the whole sentence library and meaning layer);
//! - the resident memory of a real `caal serve` while peers ask its
//!   Wyoming door to speak (125 KB texts, refused; 4,000-character texts,
//!   spoken a piece at a time), three at once;
//! - a real `caal serve` limited to 256 descriptors while a thousand
//!   connections to both doors are held open or left silent: how long
//!   `/api/health` takes meanwhile, how long after they go, and how many
//!   lines it logged about it.
//!
//! Built on the library's public API and the `caal` binary itself.

use std::{
    io::{BufRead, BufReader, Write},
    net::TcpStream,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use caal::{config::Config, server::protocols::wyoming::Event};
use serde::Serialize;
use serde_json::json;

use crate::engine::configured_router;

#[derive(Serialize)]
pub struct Report {
    /// Per kind of input: its length and the routing time (p50 and the
    /// slowest of the runs), in ms.
    pub routing: Vec<Routing>,
    pub routing_worst_ms: f64,
    pub synthesize: Vec<Speaking>,
    pub descriptors: Descriptors,
}

#[derive(Serialize)]
pub struct Routing {
    pub input: &'static str,
    pub chars: usize,
    pub p50_ms: f64,
    pub max_ms: f64,
}

#[derive(Serialize)]
pub struct Speaking {
    pub what: String,
    pub parallel: usize,
    pub rss_before_mib: f64,
    pub rss_peak_mib: f64,
    pub rss_after_mib: f64,
    /// How each request ended (`audio-stop`, or the error's code).
    pub ended: Vec<String>,
}

#[derive(Serialize)]
pub struct Descriptors {
    pub limit: u64,
    pub connections_held: usize,
    /// `/api/health` while they are held: the median and slowest of its answers.
    pub health_held_p50_ms: f64,
    pub health_held_max_ms: f64,
    pub health_failures: usize,
    /// From letting them go to the next answer of `/api/health`.
    pub recovery_ms: f64,
    pub warnings_logged: usize,
}

/// Hostile inputs of `chars` characters.
fn inputs(chars: usize) -> Vec<(&'static str, String)> {
    let cut = |s: String| -> String { s.chars().take(chars).collect() };
    let words = "turn on the kitchen lights and lock the front door please set a timer for five minutes add milk to the shopping list";
    let many = |sep: &str| -> String {
        cut(std::iter::repeat_n(words, chars / 20 + 2)
            .collect::<Vec<_>>()
            .join(sep))
    };
    vec![
        ("request words, no punctuation", many(" ")),
        ("request words in clauses", many(", ")),
        (
            "clauses of 47 words",
            cut(std::iter::repeat_n(
                words
                    .split(' ')
                    .cycle()
                    .take(47)
                    .collect::<Vec<_>>()
                    .join(" "),
                8,
            )
            .collect::<Vec<_>>()
            .join(". ")),
        ),
        (
            "letters of several bytes",
            cut(
                "add émincé ｙｅｓ молоко 牛奶 حليب 🚪 to the shopping list "
                    .repeat(chars / 30 + 1),
            ),
        ),
        ("one endless word", "a".repeat(chars)),
    ]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn routing(config: &Config, runs: usize) -> Result<Vec<Routing>> {
    let router = configured_router(config)?;
    let state = &config.conversation.default_state;
    let mut out = Vec::new();
    for chars in [400, 1_000, 2_000] {
        for (input, text) in inputs(chars) {
            let normalized = caal::router::normalize(&text);
            // Once untimed: what a layer builds the first time it meets a
            // kind of sentence (the vocabulary, ~0.2 s) is not a round's cost.
            let _ = router.route(&normalized, state);
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                let started = Instant::now();
                let _ = router.route(&normalized, state);
                times.push(started.elapsed().as_secs_f64() * 1e3);
            }
            times.sort_by(f64::total_cmp);
            out.push(Routing {
                input,
                chars: text.chars().count(),
                p50_ms: percentile(&times, 0.5),
                max_ms: times.last().copied().unwrap_or(0.0),
            });
        }
    }
    Ok(out)
}

/// A `caal serve` of this binary on a data dir of its own, with the
/// Wyoming door on loopback: its address, the Wyoming address, and the
/// lines it logs.
struct Served {
    child: Child,
    url: String,
    wyoming: String,
    token: String,
    log: std::sync::mpsc::Receiver<String>,
}

impl Served {
    fn start(dir: &Path, descriptors: Option<u64>) -> Result<Self> {
        let exe = std::env::current_exe().context("cannot find this caal binary")?;
        let mut command = Command::new(exe);
        command
            .arg("--data-dir")
            .arg(dir)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env("CAAL_WYOMING", "127.0.0.1:0")
            .env("CAAL_LOG", "warn")
            // The doors are measured, not the model: no local model server
            // is started (its URL is one nobody answers).
            .env("CAAL_LLM_LOCAL_URL", "http://127.0.0.1:9")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(n) = descriptors {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit runs between fork and exec; it
            // allocates nothing and takes no lock.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = command.spawn().context("cannot start caal serve")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (mut url, mut wyoming) = (None, None);
        let mut said = Vec::new();
        while url.is_none() {
            let Ok(line) = log.recv_timeout(Duration::from_secs(120)) else {
                bail!("caal serve did not start: {}", said.join("\n"));
            };
            said.push(line.clone());
            if let Some(at) = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("tcp://"))
            {
                wyoming = Some(at.to_owned());
            }
            if line.contains("listening on") {
                url = line
                    .split_whitespace()
                    .find(|w| w.starts_with("http://"))
                    .map(|u| u.trim_end_matches('/').to_owned());
            }
        }
        let token = std::fs::read_to_string(dir.join("api_token"))?
            .trim()
            .to_owned();
        Ok(Self {
            child,
            url: url.context("no address")?,
            wyoming: wyoming.context("no Wyoming address")?,
            token,
            log,
        })
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    fn health(&self) -> Option<f64> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into();
        let started = Instant::now();
        let ok = agent
            .get(format!("{}/api/health", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .is_ok();
        ok.then(|| started.elapsed().as_secs_f64() * 1e3)
    }

    /// A round through the API and a sentence through Wyoming, then a
    /// moment for the models loaded at start to settle.
    fn warm(&self) -> Result<()> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        agent
            .post(format!("{}/api/chat", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .send_json(json!({"conversation_id": "warm", "text": "turn on the kitchen lights"}))
            .context("the warm-up round")?;
        speak(&self.wyoming, "The kitchen lights are on.")?;
        std::thread::sleep(Duration::from_secs(1));
        Ok(())
    }

    fn warnings(&self) -> usize {
        self.log.try_iter().filter(|l| l.contains("WARN")).count()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asks the Wyoming door to speak `text`; how it ended.
fn speak(wyoming: &str, text: &str) -> Result<String> {
    use tokio::io::AsyncWriteExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut stream = tokio::net::TcpStream::connect(wyoming).await?;
        let asked = Event::new("synthesize", json!({"text": text}));
        stream.write_all(&asked.encode()).await?;
        let mut reader = tokio::io::BufReader::new(stream);
        loop {
            match caal::server::protocols::wyoming::read_event(&mut reader).await {
                Ok(Some(e)) if e.kind == "audio-stop" => return Ok("audio-stop".to_owned()),
                Ok(Some(e)) if e.kind == "error" => {
                    return Ok(e.data["code"].as_str().unwrap_or("error").to_owned());
                }
                Ok(Some(_)) => {}
                Ok(None) => return Ok("closed".to_owned()),
                Err(e) => bail!("{e}"),
            }
        }
    })
}

fn synthesize(dir: &Path) -> Result<Vec<Speaking>> {
    let served = Served::start(&dir.join("speak"), None)?;
    // Warm: a round and a sentence spoken, so what is measured is the load.
    served.warm()?;
    let mut out = Vec::new();
    let sentence = "The kitchen lights are on and the front door is locked. ";
    for (what, chars) in [("125 KB of text", 125_000), ("4,000 characters", 4_000)] {
        let text: String = sentence.repeat(chars / sentence.len() + 1)[..chars].to_owned();
        let before = served.rss_mib();
        let peak = std::sync::Mutex::new(before);
        let ended = std::thread::scope(|s| {
            let talking: Vec<_> = (0..3)
                .map(|_| s.spawn(|| speak(&served.wyoming, &text)))
                .collect();
            while !talking.iter().all(|t| t.is_finished()) {
                let now = served.rss_mib();
                let mut p = peak.lock().unwrap_or_else(|e| e.into_inner());
                *p = p.max(now);
                drop(p);
                std::thread::sleep(Duration::from_millis(20));
            }
            talking
                .into_iter()
                .map(|t| {
                    t.join()
                        .map_err(|_| anyhow::anyhow!("a speaker panicked"))?
                })
                .collect::<Result<Vec<_>>>()
        })?;
        std::thread::sleep(Duration::from_millis(500));
        out.push(Speaking {
            what: what.into(),
            parallel: 3,
            rss_before_mib: before,
            rss_peak_mib: peak.into_inner().unwrap_or(before),
            rss_after_mib: served.rss_mib(),
            ended,
        });
    }
    Ok(out)
}

fn descriptors(dir: &Path) -> Result<Descriptors> {
    const LIMIT: u64 = 256;
    let served = Served::start(&dir.join("descriptors"), Some(LIMIT))?;
    let http = served.url.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    for i in 0..1_000 {
        let to = if i % 2 == 0 { &http } else { &served.wyoming };
        if let Ok(mut s) = TcpStream::connect(to) {
            if i % 2 == 0 {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
            }
            held.push(s);
        }
    }
    let mut times = Vec::new();
    let mut failures = 0;
    for _ in 0..10 {
        match served.health() {
            Some(ms) => times.push(ms),
            None => failures += 1,
        }
    }
    times.sort_by(f64::total_cmp);
    let connections_held = held.len();
    let released = Instant::now();
    drop(held);
    while served.health().is_none() && released.elapsed() < Duration::from_secs(60) {}
    let recovery_ms = released.elapsed().as_secs_f64() * 1e3;
    std::thread::sleep(Duration::from_millis(200));
    Ok(Descriptors {
        limit: LIMIT,
        connections_held,
        health_held_p50_ms: percentile(&times, 0.5),
        health_held_max_ms: times.last().copied().unwrap_or(0.0),
        health_failures: failures,
        recovery_ms,
        warnings_logged: served.warnings(),
    })
}

pub fn run(config: &Config, data_dir: &Path, runs: usize) -> Result<Report> {
    let routing = routing(config, runs.max(1))?;
    let dir = data_dir.join(format!("bench-attack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let measured = (|| Ok::<_, anyhow::Error>((synthesize(&dir)?, descriptors(&dir)?)))();
    let _ = std::fs::remove_dir_all(&dir);
    let (synthesize, descriptors) = measured?;
    let routing_worst_ms = routing.iter().map(|r| r.max_ms).fold(0.0, f64::max);
    Ok(Report {
        routing,
        routing_worst_ms,
        synthesize,
        descriptors,
    })
}

pub fn print(report: &Report) {
    println!("Routing hostile input (in process, the configured router):");
    for r in &report.routing {
        println!(
            "  {:>5} chars, {:<32} p50 {:>7.3} ms, slowest {:>7.3} ms",
            r.chars, r.input, r.p50_ms, r.max_ms
        );
    }
    println!("  the slowest of all: {:.3} ms", report.routing_worst_ms);
    println!("Wyoming synthesize, {} at once:", 3);
    for s in &report.synthesize {
        println!(
            "  {}: resident {:.1} MiB before, {:.1} MiB at most, {:.1} MiB after; ended {}",
            s.what,
            s.rss_before_mib,
            s.rss_peak_mib,
            s.rss_after_mib,
            s.ended.join(", ")
        );
    }
    let d = &report.descriptors;
    println!(
        "Descriptor limit {}: {} connections held (half partial HTTP headers, half silent Wyoming): /api/health p50 {:.1} ms, slowest {:.1} ms, {} unanswered of 10; answered {:.1} ms after they went; {} warnings logged",
        d.limit,
        d.connections_held,
        d.health_held_p50_ms,
        d.health_held_max_ms,
        d.health_failures,
        d.recovery_ms,
        d.warnings_logged
    );
}
