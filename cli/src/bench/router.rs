//! `caal bench router`: route-decision time for the configured rules and
//! for 200 generated rules, and a whole level-1 text round in-process
//! (durability `normal`), as p50 and p99.

use std::{path::Path, time::Instant};

use anyhow::Result;
use caal::{
    config::{Config, RouteType, RuleConfig},
    ids::ConversationId,
    round::{Channel, Engine, EngineOptions, OpenError},
    router::{Router, normalize},
    stats::percentile,
    trace::Durability,
};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct RouterBenchReport {
    pub decisions: usize,
    pub default_rules: usize,
    pub default_p50_us: f64,
    pub default_p99_us: f64,
    pub generated_rules: usize,
    pub generated_p50_us: f64,
    pub generated_p99_us: f64,
    pub rounds: usize,
    pub round_p50_ms: f64,
    pub round_p99_ms: f64,
}

/// Utterances people say to the default rules, matched and not.
const SAID: &[&str] = &[
    "Turn on the kitchen lights",
    "switch the living room light off",
    "set the bedroom lights to 40%",
    "Set the thermostat to 21 degrees.",
    "set a timer for 10 minutes",
    "add oat milk to the shopping list",
    "what's on my shopping list?",
    "unlock the front door",
    "open the garage",
    "yes",
    "no",
    "undo that",
    "good night",
    "switch to research mode",
    "hello",
    "tell me a joke about penguins",
    "what is the capital of australia",
];

fn time_decisions(router: &Router, texts: &[String], n: usize) -> (f64, f64) {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let text = &texts[i % texts.len()];
        let started = Instant::now();
        let decision = router.route(text, "default");
        samples.push(started.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(decision);
    }
    samples.sort_by(f64::total_cmp);
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

/// 200 rules in the shape of real ones: devices by name, each its own rule.
pub fn generated_config(base: &Config, count: usize) -> Config {
    let mut config = base.clone();
    config.rules = (0..count)
        .map(|i| RuleConfig {
            name: format!("generated.{i}"),
            pattern: format!(r"^(?:please )?(?:turn|switch) (?P<state>on|off) (?:the )?(?P<room>zone{i}(?: [a-z]+)?) lights?$"),
            route: RouteType::Command,
            command: Some("lights.set".into()),
            macro_name: None,
            auth_level: None,
            priority: i32::try_from(i % 7).unwrap_or(0),
            reply: None,
            topic: None,
            memory: None,
            feedback: None,
        })
        .collect();
    config
}

pub fn run(
    config: &Config,
    data_dir: &Path,
    decisions: usize,
    rounds: usize,
) -> Result<RouterBenchReport> {
    let decisions = decisions.max(1);
    let rounds = rounds.max(1);
    let router = Router::compile(config)?;
    let said: Vec<String> = SAID.iter().map(|s| normalize(s)).collect();
    let (default_p50_us, default_p99_us) = time_decisions(&router, &said, decisions);

    let generated = generated_config(config, 200);
    let big = Router::compile(&generated)?;
    let texts: Vec<String> = (0..400)
        .map(|i| match i % 4 {
            0 => format!("turn on the zone{} lights", (i * 37) % 200),
            1 => format!("switch off zone{} kitchen light", (i * 53) % 200),
            2 => "what is the weather like tomorrow".to_owned(),
            _ => format!("turn on the zone{} lights please", i % 200),
        })
        .collect();
    let (generated_p50_us, generated_p99_us) = time_decisions(&big, &texts, decisions);

    let dir = data_dir.join(format!("bench-router-{}", std::process::id()));
    let mut round_config = config.clone();
    round_config.store.durability = Durability::Normal;
    let options = EngineOptions::bench();
    let timed = (|| -> Result<Vec<f64>> {
        let engine = Engine::open(&dir, round_config, options)?;
        let conversation: ConversationId = "bench".parse().map_err(|e| OpenError::DataDir {
            path: dir.display().to_string(),
            source: std::io::Error::other(format!("{e}")),
        })?;
        let mut samples = Vec::with_capacity(rounds);
        for i in 0..rounds + 50 {
            let text = if i % 2 == 0 {
                "turn on the kitchen lights"
            } else {
                "turn off the kitchen lights"
            };
            let started = Instant::now();
            let result = engine.text_round(&conversation, text, Channel::Text)?;
            if i >= 50 {
                samples.push(started.elapsed().as_secs_f64() * 1e3);
            }
            std::hint::black_box(result);
        }
        Ok(samples)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let mut samples = timed?;
    samples.sort_by(f64::total_cmp);
    Ok(RouterBenchReport {
        decisions,
        default_rules: router.rule_count(),
        default_p50_us,
        default_p99_us,
        generated_rules: big.rule_count(),
        generated_p50_us,
        generated_p99_us,
        rounds,
        round_p50_ms: percentile(&samples, 0.5),
        round_p99_ms: percentile(&samples, 0.99),
    })
}
