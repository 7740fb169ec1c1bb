//! `caal config check` and `caal understand`: what the configuration in
//! effect is, and what its router makes of a sentence (nothing is run).

use std::path::PathBuf;

use anyhow::Result;
use caal::{config::Config, llm::Tiers};
use clap::Subcommand;

use crate::{engine::configured_router, output};

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration in effect and say where it came from.
    Check {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub fn check(
    load_config: &dyn Fn() -> Result<(Config, Option<PathBuf>)>,
    json: bool,
) -> Result<()> {
    let (config, file) = load_config()?;
    let origin = file.as_ref().map_or("built-in defaults".to_owned(), |f| {
        format!("defaults + {}", f.display())
    });
    let router = configured_router(&config)?;
    // A wake word named but not installed would refuse every voice stream.
    let wake = &config.voice.wake.model;
    if !wake.is_empty() {
        let models_dir = caal::llm::tiers::models_dir(&|k| std::env::var(k).ok());
        if let Some(missing) = caal::voice::wake::files(&models_dir.join(wake))
            .iter()
            .find(|f| !f.is_file())
        {
            anyhow::bail!(
                "voice.wake.model = {wake:?}: {} is not there; `bash .ci/setup` installs openWakeWord's models (CC BY-NC-SA 4.0) into {}, or set voice.wake.model = \"\"",
                missing.display(),
                models_dir.join("openwakeword-0.5.1").display()
            );
        }
    }
    let guarded = Tiers::guard(&config.llm, &router, &|k| std::env::var(k).ok(), true)?;
    for warning in &guarded.warnings {
        eprintln!("caal: warning: {warning}");
    }
    let tiers: Vec<(String, String)> = guarded.tiers.as_deref().map_or(Vec::new(), |t| {
        t.local
            .iter()
            .chain(t.remote.iter())
            .map(|tier| (tier.name.to_owned(), tier.model().to_string()))
            .collect()
    });
    if json {
        let doc = serde_json::json!({
            "ok": true,
            "origin": origin,
            "file": file,
            "config_hash": config.hash,
            "rules": config.rules.len(),
            "commands": config.commands.len(),
            "durability": config.store.durability,
            "model_tiers": tiers.iter().map(|(name, model)| serde_json::json!({"name": name, "model": model})).collect::<Vec<_>>(),
            "sentence_library": router.library().sentence_count(),
            "warnings": guarded.warnings,
            // Where each rule, sentence, intent mapping, offer and word came from.
            "entries": config.provenance.entries,
            "removed": config.provenance.removed,
            "replaced": config.provenance.replaced,
        });
        println!("{doc}");
    } else {
        let names: Vec<String> = tiers
            .iter()
            .map(|(name, model)| format!("{name} ({model})"))
            .collect();
        let names = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        println!(
            "config ok: {} rules, durability {:?}, model tiers: {names} ({origin})",
            config.rules.len(),
            config.store.durability
        );
    }

    Ok(())
}

pub fn understand(
    config: &Config,
    area: Option<String>,
    spoken: bool,
    json: bool,
    text: &[String],
) -> Result<()> {
    let router = configured_router(config)?;
    let text = text.join(" ");
    let context = caal::understand::Context {
        area: area.map(|a| caal::understand::normalize(&a)),
        spoken,
        earlier: Vec::new(),
        asked: None,
        listen: None,
        sure_words: None,
        deadline: None,
    };
    let normalized = caal::router::normalize(&text);
    let decision = router.route_in(&normalized, &config.conversation.default_state, &context);
    let matches = router
        .library()
        .understand(&normalized, router.home(), &context);
    // What the meaning layer found nearest, whether or not it decided.
    let nearest = match router.semantic() {
        Some(s) => Some(
            s.understand(
                &normalized,
                router.home(),
                &context,
                router.asks_whether(&normalized),
            )?
            .nearest_read(5),
        ),
        None => None,
    };
    output::print_understanding(&text, &decision, &matches, nearest.as_ref(), json);

    Ok(())
}
