//! `caal bench llm`: the local tier for real (its start, time to first token
//! and tokens per second over a stream, its memory) and what CAAL adds around
//! a model call: whole rounds that ask a model, minus the time of their HTTP
//! exchanges, as p50 and p99 — with the real model (sharing the machine's
//! cores with CAAL), and with an instant server (CAAL's own time alone).

use std::{
    io::{BufRead, BufReader},
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use caal::{
    config::Config,
    ids::ConversationId,
    llm::{Provider, ProviderKind, Tier, Tiers},
    round::{Channel, Engine, EngineOptions},
    router::Router,
    state::SystemClock,
    stats::percentile,
    trace::Durability,
};
use serde::Serialize;
use serde_json::{Value, json};

#[derive(Clone, Debug, Serialize)]
pub struct LlmBenchReport {
    pub model: String,
    pub start_ms: f64,
    pub rss_mb: Option<f64>,
    pub runs: usize,
    pub ttft_p50_ms: f64,
    pub ttft_p90_ms: f64,
    pub tokens_per_s_p50: f64,
    pub rounds: usize,
    pub round_p50_ms: f64,
    pub exchange_p50_ms: f64,
    pub overhead_p50_ms: f64,
    pub overhead_p99_ms: f64,
    pub instant_rounds: usize,
    pub instant_overhead_p50_ms: f64,
    pub instant_overhead_p99_ms: f64,
    pub tool_overhead_p50_ms: f64,
    pub tool_overhead_p99_ms: f64,
}

const QUESTIONS: &[&str] = &[
    "What is the capital of France?",
    "Give me one tip for sleeping better.",
    "What is a good name for a cat?",
    "Why is the sky blue?",
];

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// One streamed answer: (time to first token, tokens per second after it).
fn stream_once(url: &str, question: &str) -> Result<(f64, f64), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into();
    let started = Instant::now();
    let mut response = agent
        .post(&format!("{url}/v1/chat/completions"))
        .send_json(json!({"messages": [{"role": "user", "content": question}],
                          "max_tokens": 64, "stream": true}))
        .map_err(|e| e.to_string())?;
    let reader = BufReader::new(response.body_mut().as_reader());
    let mut first = None;
    let mut tokens = 0u64;
    for line in reader.lines() {
        let line = line.map_err(|e| e.to_string())?;
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        if chunk["choices"][0]["delta"]["content"].is_string() && first.is_none() {
            first = Some(started.elapsed());
        }
        if let Some(n) = chunk["usage"]["completion_tokens"].as_u64() {
            tokens = n;
        }
    }
    let first = first.ok_or("the stream carried no text")?;
    let after = started.elapsed().saturating_sub(first).as_secs_f64();
    let rate = if after > 0.0 && tokens > 1 {
        (tokens - 1) as f64 / after
    } else {
        0.0
    };
    Ok((first.as_secs_f64() * 1e3, rate))
}

fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Rounds in `state` asking `question`: (round ms, exchange ms) each.
fn rounds(
    engine: &Engine,
    conversation: &str,
    state: &str,
    n: usize,
) -> Result<Vec<(f64, f64)>, String> {
    let c: ConversationId = conversation.parse().map_err(|e| format!("{e}"))?;
    engine
        .text_round(&c, &format!("switch to {state} mode"), Channel::Text)
        .map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        let r = engine
            .text_round(&c, QUESTIONS[i % QUESTIONS.len()], Channel::Text)
            .map_err(|e| e.to_string())?;
        let total = started.elapsed().as_secs_f64() * 1e3;
        let Some(llm) = r.llm else {
            return Err(format!("round {} asked no model", r.round_id));
        };
        out.push((total, llm.latency_ms));
        // A model's guess waits for a "yes": leave it waiting no longer.
        if r.pending_confirmation.is_some() {
            engine
                .text_round(&c, "no", Channel::Text)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(out)
}

/// An OpenAI-compatible server on 127.0.0.1 that answers at once with a
/// fixed answer (HTTP/1.1, keep-alive): what remains of a round's time
/// around it is CAAL's own.
fn instant_server() -> Result<String, String> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let body = json!({"model": "instant", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Paris is the capital of France, and a fine city to visit."}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12}})
    .to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let response = response.clone();
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut stream = stream;
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    // One request: headers, then Content-Length bytes of body.
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < end + 4 + length {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..end + 4 + length);
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(url)
}

fn engine(config: &Config, dir: &Path, tiers: Arc<Tiers>) -> Result<Engine, String> {
    let mut round_config = config.clone();
    round_config.store.durability = Durability::Normal;
    Engine::open(
        dir,
        round_config,
        EngineOptions {
            library_id: Some("bench".into()),
            env: Arc::new(|_| None),
            clock: Arc::new(SystemClock),
            llm: Some(tiers),
            router: None,
        },
    )
    .map_err(|e| e.to_string())
}

/// CAAL's time around each exchange (the first round, warming caches, left out).
fn overheads(v: &[(f64, f64)]) -> Vec<f64> {
    sorted(v.iter().skip(1).map(|(t, x)| t - x).collect())
}

pub fn run(
    config: &Config,
    data_dir: &Path,
    runs: usize,
    n_rounds: usize,
    instant_rounds: usize,
) -> Result<LlmBenchReport, String> {
    let router = Router::compile(config).map_err(|e| e.to_string())?;
    let env = |k: &str| std::env::var(k).ok();
    let guarded = Tiers::guard(&config.llm, &router, &env, false).map_err(|e| e.to_string())?;
    let tiers = guarded
        .tiers
        .ok_or("no model tier is configured; the benchmark needs the local one")?;
    let local = tiers
        .local
        .as_ref()
        .ok_or("the local tier is not available: see the warnings of `caal config check`")?;
    if let Some(w) = guarded.warnings.first() {
        return Err(w.clone());
    }
    let started = Instant::now();
    local.warm_up().map_err(|e| e.to_string())?;
    let start_ms = started.elapsed().as_secs_f64() * 1e3;
    let (url, pid) = local
        .server()
        .ok_or("the local model's server did not start")?;

    // Warm the model's caches once, then time streams.
    stream_once(&url, QUESTIONS[0])?;
    let mut ttft = Vec::new();
    let mut rates = Vec::new();
    for i in 0..runs {
        let (t, r) = stream_once(&url, QUESTIONS[i % QUESTIONS.len()])?;
        ttft.push(t);
        rates.push(r);
    }
    let rss = pid.and_then(rss_mb);

    let dir = data_dir.join(format!("bench-llm-{}", std::process::id()));
    let measured = (|| -> Result<_, String> {
        // Rounds the real model answers in words.
        let with_model = engine(config, &dir.join("model"), tiers.clone())?;
        let model_rounds = rounds(&with_model, "bench-chat", "conversation", n_rounds + 1)?;
        drop(with_model);
        // The same against an instant server: answers in words, then with
        // every command offered as a tool.
        let instant_url = instant_server()?;
        let instant = Arc::new(Tiers {
            local: Some(Tier::fixed(
                "local",
                Provider::new(ProviderKind::OpenAi, &instant_url, "instant", None, 5_000),
            )),
            remote: None,
        });
        let with_instant = engine(config, &dir.join("instant"), instant)?;
        let words = rounds(
            &with_instant,
            "bench-words",
            "conversation",
            instant_rounds + 1,
        )?;
        let tools = rounds(&with_instant, "bench-tools", "default", instant_rounds + 1)?;
        Ok((model_rounds, words, tools))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (model_rounds, words, tools) = measured?;
    let model_overhead = overheads(&model_rounds);
    let words = overheads(&words);
    let tools = overheads(&tools);
    let ttft = sorted(ttft);
    Ok(LlmBenchReport {
        model: local.model(),
        start_ms,
        rss_mb: rss,
        runs,
        ttft_p50_ms: percentile(&ttft, 0.5),
        ttft_p90_ms: percentile(&ttft, 0.9),
        tokens_per_s_p50: percentile(&sorted(rates), 0.5),
        rounds: model_overhead.len(),
        round_p50_ms: percentile(
            &sorted(model_rounds.iter().skip(1).map(|p| p.0).collect()),
            0.5,
        ),
        exchange_p50_ms: percentile(
            &sorted(model_rounds.iter().skip(1).map(|p| p.1).collect()),
            0.5,
        ),
        overhead_p50_ms: percentile(&model_overhead, 0.5),
        overhead_p99_ms: percentile(&model_overhead, 0.99),
        instant_rounds: words.len(),
        instant_overhead_p50_ms: percentile(&words, 0.5),
        instant_overhead_p99_ms: percentile(&words, 0.99),
        tool_overhead_p50_ms: percentile(&tools, 0.5),
        tool_overhead_p99_ms: percentile(&tools, 0.99),
    })
}
