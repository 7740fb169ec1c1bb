//! `caal bench serve`: level-1 text rounds through `POST /api/chat` on a real
//! server on 127.0.0.1, from keep-alive clients in many conversations, while
//! one client follows `/api/events`: rounds per second, latency
//! percentiles, and whether the live stream lost anything.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use caal::{
    config::Config,
    round::{Engine, EngineOptions},
    server::{AppState, protocols::wyoming, serve},
    stats::percentile,
    trace::Durability,
};
use serde::Serialize;
use serde_json::json;

#[derive(Clone, Debug, Serialize)]
pub struct ServeBenchReport {
    pub clients: usize,
    pub seconds: f64,
    pub rounds: u64,
    pub rounds_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
    /// Events committed during the run, and how many the live stream delivered.
    pub events_committed: i64,
    pub events_streamed: u64,
    pub stream_lost: i64,
}

const TOKEN: &str = "bench-token-0123456789abcdef";

/// A server on 127.0.0.1 (a port of its own) in a thread of its own, for
/// benchmarks that measure it from outside, as a client would.
pub(crate) struct Running {
    pub addr: std::net::SocketAddr,
    /// Where the Wyoming door listens, when started with it.
    #[cfg_attr(not(feature = "whisper"), allow(dead_code))]
    pub wyoming: Option<std::net::SocketAddr>,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: thread::JoinHandle<Result<(), String>>,
}

impl Running {
    pub(crate) fn start(state: AppState) -> Result<Self, String> {
        Self::start_doors(state, false)
    }

    /// With the Wyoming door as well, on a port of its own.
    #[cfg_attr(not(feature = "whisper"), allow(dead_code))]
    pub(crate) fn start_with_wyoming(state: AppState) -> Result<Self, String> {
        Self::start_doors(state, true)
    }

    fn start_doors(state: AppState, wyoming: bool) -> Result<Self, String> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, bound) = mpsc::channel();
        let thread = thread::spawn(move || -> Result<(), String> {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(|e| e.to_string())?;
                let door = if wyoming {
                    let door = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .map_err(|e| e.to_string())?;
                    let at = door.local_addr().map_err(|e| e.to_string())?;
                    // On loopback with no secret set: loopback peers are let in.
                    tokio::spawn(wyoming::serve(door, state.clone(), Default::default()));
                    Some(at)
                } else {
                    None
                };
                let _ = ready.send(
                    listener
                        .local_addr()
                        .map(|a| (a, door))
                        .map_err(|e| e.to_string()),
                );
                serve(listener, state, async move {
                    let _ = stopped.await;
                })
                .await
                .map_err(|e| e.to_string())
            })
        });
        let (addr, wyoming) = bound
            .recv()
            .map_err(|_| "the server did not start".to_owned())??;
        Ok(Self {
            addr,
            wyoming,
            stop,
            thread,
        })
    }

    /// Stops it (requests in flight finish) and waits until it has.
    pub(crate) fn stop(self) -> Result<(), String> {
        let _ = self.stop.send(());
        self.thread
            .join()
            .map_err(|_| "the server panicked".to_owned())?
    }
}

pub fn run(
    config: &Config,
    data_dir: &Path,
    clients: usize,
    seconds: f64,
) -> Result<ServeBenchReport, String> {
    let dir = data_dir.join(format!("bench-serve-{}", std::process::id()));
    let result = run_in(config, &dir, clients.max(1), seconds);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(
    config: &Config,
    dir: &Path,
    clients: usize,
    seconds: f64,
) -> Result<ServeBenchReport, String> {
    let engine = open_engine(config, dir)?;
    load(&engine, clients, seconds)
}

/// The engine the service benchmarks run, in `dir` (WAL, synchronous NORMAL).
pub(crate) fn open_engine(config: &Config, dir: &Path) -> Result<Engine, String> {
    let mut config = config.clone();
    config.store.durability = Durability::Normal;
    Engine::open(dir, config, EngineOptions::bench()).map_err(|e| e.to_string())
}

/// `clients` keep-alive clients sending level-1 rounds to a server of
/// `engine` for `seconds`, one following the live stream.
pub(crate) fn load(
    engine: &Engine,
    clients: usize,
    seconds: f64,
) -> Result<ServeBenchReport, String> {
    let running = Running::start(AppState::new(engine.clone(), TOKEN.into()))?;
    let addr = running.addr;
    let base = format!("http://{addr}");
    let auth = format!("Bearer {TOKEN}");

    // The live stream, from the event committed last before the run.
    let start_id = engine
        .store()
        .reader()
        .last_event_id()
        .map_err(|e| e.to_string())?;
    let (streamed, follower) = follow(&base, &auth, start_id);

    let deadline = Duration::from_secs_f64(seconds);
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<thread::JoinHandle<Vec<f64>>> = (0..clients)
        .map(|c| {
            let (url, auth, errors) = (format!("{base}/api/chat"), auth.clone(), errors.clone());
            thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(10)))
                    .build()
                    .into();
                let mut latencies = Vec::new();
                let mut i = 0u64;
                while started.elapsed() < deadline {
                    let text = if i.is_multiple_of(2) {
                        "turn on the kitchen lights"
                    } else {
                        "turn off the kitchen lights"
                    };
                    let body = json!({"conversation_id": format!("bench-{c}"), "text": text});
                    let sent = Instant::now();
                    match agent
                        .post(&url)
                        .header("Authorization", &auth)
                        .send_json(&body)
                    {
                        Ok(mut r) if r.status().as_u16() == 200 => {
                            let _ = r.body_mut().read_to_vec();
                            latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<f64> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap_or_default())
        .collect();
    let elapsed = started.elapsed().as_secs_f64();

    // Let the stream drain what was committed, then stop everything.
    let committed = engine
        .store()
        .reader()
        .last_event_id()
        .map_err(|e| e.to_string())?
        - start_id;
    let drain = Instant::now();
    while (streamed.load(Ordering::Relaxed) as i64) < committed
        && drain.elapsed() < Duration::from_secs(10)
    {
        thread::sleep(Duration::from_millis(10));
    }
    let _ = running.stop();
    let _ = follower.join();

    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| {
        latencies
            .get(((latencies.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let streamed = streamed.load(Ordering::Relaxed);
    Ok(ServeBenchReport {
        clients,
        seconds: elapsed,
        rounds: latencies.len() as u64,
        rounds_per_s: latencies.len() as f64 / elapsed,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        errors: errors.load(Ordering::Relaxed),
        events_committed: committed,
        events_streamed: streamed,
        stream_lost: committed - streamed as i64,
    })
}

/// Follows `/api/events` from after `start_id`, counting the events it
/// delivers; returns once the stream is open.
fn follow(base: &str, auth: &str, start_id: i64) -> (Arc<AtomicU64>, thread::JoinHandle<()>) {
    let streamed = Arc::new(AtomicU64::new(0));
    let stream_ready = Arc::new(AtomicBool::new(false));
    let follower = {
        let (streamed, stream_ready, url, auth) = (
            streamed.clone(),
            stream_ready.clone(),
            format!("{base}/api/events"),
            auth.to_owned(),
        );
        thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            let Ok(response) = agent
                .get(&url)
                .header("Authorization", &auth)
                .header("Last-Event-ID", &start_id.to_string())
                .call()
            else {
                return;
            };
            stream_ready.store(true, Ordering::SeqCst);
            for line in BufReader::new(response.into_body().into_reader()).lines() {
                match line {
                    Ok(l) if l.starts_with("id:") => {
                        streamed.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        })
    };
    while !stream_ready.load(Ordering::SeqCst) && !follower.is_finished() {
        thread::sleep(Duration::from_millis(5));
    }
    (streamed, follower)
}

/// `caal bench doors`: the same level-1 round through `POST /api/chat` and
/// through the OpenAI-compatible `POST /v1/chat/completions`, interleaved
/// from one keep-alive client, so the door's own cost is the difference.
#[derive(Clone, Debug, Serialize)]
pub struct DoorsBenchReport {
    pub rounds: usize,
    pub api_p50_ms: f64,
    pub api_p99_ms: f64,
    pub openai_p50_ms: f64,
    pub openai_p99_ms: f64,
    /// `openai_p50_ms - api_p50_ms`: what the door adds (the goal: ≤ 1 ms).
    pub openai_added_p50_ms: f64,
}

pub fn doors(config: &Config, data_dir: &Path, rounds: usize) -> Result<DoorsBenchReport, String> {
    let dir = data_dir.join(format!("bench-doors-{}", std::process::id()));
    let result = doors_in(config, &dir, rounds.max(1));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn doors_in(config: &Config, dir: &Path, rounds: usize) -> Result<DoorsBenchReport, String> {
    let mut config = config.clone();
    config.store.durability = Durability::Normal;
    let options = EngineOptions::bench();
    let engine = Engine::open(dir, config, options).map_err(|e| e.to_string())?;
    let running = Running::start(AppState::new(engine, TOKEN.into()))?;
    let base = format!("http://{}", running.addr);
    let auth = format!("Bearer {TOKEN}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let timed = |path: &str, body: serde_json::Value| -> Result<f64, String> {
        let sent = Instant::now();
        let mut r = agent
            .post(&format!("{base}{path}"))
            .header("Authorization", &auth)
            .send_json(&body)
            .map_err(|e| e.to_string())?;
        let answer = r.body_mut().read_to_vec().map_err(|e| e.to_string())?;
        let ms = sent.elapsed().as_secs_f64() * 1e3;
        if r.status().as_u16() != 200 {
            return Err(format!(
                "{path} answered {}: {}",
                r.status(),
                String::from_utf8_lossy(&answer)
            ));
        }
        Ok(ms)
    };
    let (mut api, mut openai) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for i in 0..rounds + 20 {
        let text = if i % 2 == 0 {
            "turn on the kitchen lights"
        } else {
            "turn off the kitchen lights"
        };
        let a = timed(
            "/api/chat",
            json!({"conversation_id": "bench-api", "text": text}),
        )?;
        let o = timed(
            "/v1/chat/completions",
            json!({"model": "caal", "user": "bench-openai", "messages": [{"role": "user", "content": text}]}),
        )?;
        // The first 20 of each warm the connection, the caches and the pages.
        if i >= 20 {
            api.push(a);
            openai.push(o);
        }
    }
    running.stop()?;
    api.sort_by(f64::total_cmp);
    openai.sort_by(f64::total_cmp);
    let p = percentile;
    Ok(DoorsBenchReport {
        rounds,
        api_p50_ms: p(&api, 0.5),
        api_p99_ms: p(&api, 0.99),
        openai_p50_ms: p(&openai, 0.5),
        openai_p99_ms: p(&openai, 0.99),
        openai_added_p50_ms: p(&openai, 0.5) - p(&api, 0.5),
    })
}
