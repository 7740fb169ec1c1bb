//! Opening what a command works on: the engine (with its router compiled
//! once and the model tiers guarded), the state beside a running writer.

use std::path::Path;

use anyhow::{Result, bail};
use caal::{
    config::Config,
    ids::ConversationId,
    llm::Tiers,
    round::{Engine, EngineOptions},
    router::Router,
    state::{STATE_FILE, StateDb},
};

pub fn parse_conversation(id: &str) -> Result<ConversationId> {
    Ok(id.parse::<ConversationId>()?)
}

/// When the local model's server starts.
#[derive(Clone, Copy, PartialEq)]
pub enum Start {
    /// At the first question that needs it (`caal say`: most rounds need none).
    Lazy,
    /// Now, in the background, so the first question does not wait for it;
    /// a remote tier is probed too (a warning if it does not answer).
    Warm,
}

pub fn open_engine(data_dir: &Path, config: Config, start: Start) -> Result<Engine> {
    // The start-up guard: a route that needs a model when none can be had
    // stops here, naming the config key to set.
    // Compiled once: the guard reads it, the engine runs it.
    let router = std::sync::Arc::new(configured_router(&config)?);
    let guarded = Tiers::guard(
        &config.llm,
        &router,
        &|k| std::env::var(k).ok(),
        start == Start::Warm,
    )?;
    for warning in &guarded.warnings {
        eprintln!("caal: warning: {warning}");
    }
    if start == Start::Warm
        && let Some(tiers) = guarded.tiers.clone()
    {
        std::thread::spawn(move || {
            if let Some(Err(e)) = tiers.local.as_ref().map(|t| t.warm_up()) {
                eprintln!("caal: warning: {e}");
            }
        });
    }
    let options = EngineOptions {
        llm: guarded.tiers,
        router: Some(router),
        ..EngineOptions::default()
    };
    let engine = Engine::open(data_dir, config, options)?;
    if start == Start::Warm
        && let Some(semantic) = engine.router().semantic()
    {
        std::thread::spawn(semantic.warmer());
    }
    say_recovered(&engine);
    Ok(engine)
}

/// The engine for work that asks no model (an import): no model guard, no
/// tier; the stores opened (and a crash recovered) as for any round.
pub fn open_engine_offline(data_dir: &Path, config: Config) -> Result<Engine> {
    let options = EngineOptions {
        llm: None,
        router: Some(std::sync::Arc::new(configured_router(&config)?)),
        ..EngineOptions::default()
    };
    let engine = Engine::open(data_dir, config, options)?;
    say_recovered(&engine);
    Ok(engine)
}

/// Names each round a crash left open, which opening the store recorded as failed.
fn say_recovered(engine: &Engine) {
    for (conversation, round_seq) in engine.store().recovered() {
        eprintln!(
            "caal: conversation {conversation} round {round_seq} was left open by a crash; recorded as round.failed (crash.recovered)"
        );
    }
}

/// The state database, for reading beside a running writer.
pub fn open_state(data_dir: &Path) -> Result<StateDb> {
    let path = data_dir.join(STATE_FILE);
    if !path.exists() {
        bail!(
            "no state at {}; run `caal say \"hello\"` to create it, or point --data-dir at a data dir",
            path.display()
        );
    }
    Ok(StateDb::open(&path)?)
}

/// The router the configuration asks for, with a warning for each part
/// (sentence library, embedding model) that could not be loaded.
pub fn configured_router(config: &Config) -> Result<Router> {
    let (router, warnings) = Router::configured(config, &|k| std::env::var(k).ok())?;
    for warning in warnings {
        eprintln!("caal: warning: {warning}");
    }
    Ok(router)
}
