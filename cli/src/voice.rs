//! `caal voice`, `caal audio`, `caal model`, `caal livekit`: speech in,
//! the audio kept, the speech model, LiveKit tokens.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use caal::config::Config;
use caal::round::AudioAction;
use caal::state::StateDb;
use caal::{
    round::Listened,
    voice::{AudioArtifact, store},
};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum AudioCommand {
    /// The audio kept, newest first.
    List {
        /// Show at most this many (the most recent).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One clip: file, hash, format, retention, loudness preview.
    Show {
        /// The audio (`caal audio list` shows them).
        audio_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Keep a clip past its retention (sweeps leave it).
    Pin {
        /// The audio (`caal audio list` shows them).
        audio_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Let a pinned clip expire again.
    Unpin {
        /// The audio (`caal audio list` shows them).
        audio_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete expired, unpinned audio files (their hash and metadata stay).
    Sweep {
        /// List what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Convert a fetched CTranslate2 Whisper model into the ggml file
    /// whisper.cpp loads; nothing to do if it is there.
    Install {
        /// The speech model (`caal model list`: tiny.en, base); without it,
        /// the configured one (voice.model, from voice.model_source).
        name: Option<String>,
        /// Convert again even if the model is there.
        #[arg(long)]
        force: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The speech models known: size, licence, languages, whether fetched
    /// and converted, and which one is configured.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum LivekitCommand {
    /// A token for a client to join a LiveKit room (LIVEKIT_API_KEY and
    /// LIVEKIT_API_SECRET sign it).
    Token {
        /// The LiveKit room.
        #[arg(long)]
        room: String,
        /// Who joins (the participant identity).
        #[arg(long)]
        identity: String,
        /// How long the token is valid, in minutes.
        #[arg(long, default_value_t = 360)]
        ttl_minutes: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `caal voice FILE.wav`: every utterance in the file, a round each.
pub fn voice(
    data_dir: &Path,
    config: Config,
    conversation: &str,
    file: &Path,
    json: bool,
) -> Result<()> {
    let conversation = crate::engine::parse_conversation(conversation)?;
    // The file is read and checked before the store is opened: a bad file records nothing.
    let bytes = std::fs::read(file).with_context(|| {
        format!(
            "cannot read {}; give the path of a WAV file",
            file.display()
        )
    })?;
    let what = file.display().to_string();
    caal::voice::audio::decode_wav(&bytes, &what)?;
    let engine = crate::engine::open_engine(data_dir, config, crate::engine::Start::Lazy)?;
    let listened: Listened = engine.listen_wav(&conversation, &bytes, &what)?;
    if !json {
        if listened.utterances.is_empty() {
            eprintln!("no speech heard in {what}; nothing was recorded");
        }
        for u in &listened.utterances {
            match &u.round {
                Some(r) => println!(
                    "heard: {} ({:.0}% sure)\n{}",
                    u.transcript.text,
                    u.transcript.confidence * 100.0,
                    r.reply
                ),
                None => println!("heard nothing to act on ({})", u.transcript.text),
            }
        }
    }
    crate::timers::ring_and_print(&engine, &listened, json, conversation.as_str())?;
    Ok(())
}

fn print_artifact(a: &AudioArtifact) {
    let state = match (&a.deleted_at, a.pinned) {
        (Some(at), _) => format!("deleted {at}"),
        (None, true) => "pinned".into(),
        (None, false) => format!("kept until {}", a.expires_at),
    };
    println!(
        "{}  {}  {} ms  {} Hz × {}  {}  {}",
        a.audio_id,
        a.created_at,
        a.duration_ms.unwrap_or(0),
        a.sample_rate,
        a.channels,
        a.sha256,
        state
    );
}

pub fn audio(data_dir: &Path, config: Config, command: AudioCommand) -> Result<()> {
    let state = || -> Result<StateDb> {
        let path = data_dir.join("state.db");
        if !path.exists() {
            bail!(
                "no data dir at {}: run `caal voice FILE.wav` or `caal say` first, or point --data-dir at one",
                data_dir.display()
            );
        }
        Ok(StateDb::open(&path)?)
    };
    let change = |action: AudioAction, json: bool| -> Result<()> {
        let engine =
            crate::engine::open_engine(data_dir, config.clone(), crate::engine::Start::Lazy)?;
        let sweeping = matches!(action, AudioAction::Sweep { dry_run: false });
        let bar = std::cell::RefCell::new(None::<indicatif::ProgressBar>);
        let report = engine.audio_retention(action, &|done, total| {
            if sweeping {
                let mut bar = bar.borrow_mut();
                let b =
                    bar.get_or_insert_with(|| crate::output::progress_bar(total, "deleting audio"));
                b.set_position(done);
            }
        })?;
        if let Some(b) = bar.borrow().as_ref() {
            b.finish_and_clear();
        }
        if json {
            println!("{}", serde_json::to_string(&report)?);
        } else if report.action == "sweep" {
            let verb = if report.dry_run {
                "would delete"
            } else {
                "deleted"
            };
            println!(
                "{verb} {} audio file(s), {} bytes; {} pinned past their time kept",
                report.audio_ids.len(),
                report.bytes_freed,
                report.kept_pinned
            );
            for id in &report.audio_ids {
                println!("  {id}");
            }
        } else {
            println!("{} {}", report.action, report.audio_ids.join(", "));
        }
        Ok(())
    };
    match command {
        AudioCommand::List { limit, json } => {
            let list = store::list(&state()?, limit)?;
            if json {
                println!("{}", serde_json::to_string(&list)?);
            } else if list.is_empty() {
                println!("no audio kept yet");
            } else {
                list.iter().for_each(print_artifact);
            }
        }
        AudioCommand::Show { audio_id, json } => {
            let Some(a) = store::get(&state()?, &audio_id)? else {
                bail!("no audio {audio_id}; `caal audio list` shows the audio ids");
            };
            if json {
                let mut v = serde_json::to_value(&a)?;
                v["file_present"] = a.file_present().into();
                v["file_matches"] = store::file_matches(&a).into();
                println!("{v}");
            } else {
                print_artifact(&a);
                let file = match (a.file_present(), store::file_matches(&a)) {
                    (false, _) => "deleted; its hash stays",
                    (true, true) => "present, its hash matches",
                    (true, false) => {
                        "present, BUT ITS HASH DOES NOT MATCH (changed since it was recorded)"
                    }
                };
                println!("file: {} ({file})", a.path);
                println!("codec: {}, {} bytes, peak {:.3}", a.codec, a.bytes, a.peak);
                let bars: String = a
                    .rms_preview
                    .iter()
                    .map(|r| {
                        let level = ((r / a.peak.max(1e-6)) * 7.0).round() as usize;
                        ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'][level.min(7)]
                    })
                    .collect();
                println!("loudness: {bars}");
            }
        }
        AudioCommand::Pin { audio_id, json } => change(AudioAction::Pin(audio_id), json)?,
        AudioCommand::Unpin { audio_id, json } => change(AudioAction::Unpin(audio_id), json)?,
        AudioCommand::Sweep { dry_run, json } => change(AudioAction::Sweep { dry_run }, json)?,
    }
    Ok(())
}

pub fn model(config: &Config, command: ModelCommand) -> Result<()> {
    use caal::voice::stt;
    let models = caal::llm::tiers::models_dir(&|k| std::env::var(k).ok());
    let (name, force, json) = match command {
        ModelCommand::Install { name, force, json } => (name, force, json),
        ModelCommand::List { json } => return model_list(config, &models, json),
    };
    let cfg = match &name {
        Some(name) => stt::with_model(&config.voice, stt::speech_model(name)?),
        None => config.voice.clone(),
    };
    let target = stt::model_path(&cfg, &models);
    let source = stt::source_path(&cfg, &models);
    let done = stt::install(&cfg, &models, force)?;
    let configured = stt::model_path(&config.voice, &models) == target;
    if json {
        let doc = serde_json::json!({
            "model": target,
            "converted": done.is_some(),
            "source": source,
            "details": done,
            "configured": configured,
        });
        println!("{doc}");
        return Ok(());
    }
    match done {
        None => println!("{} is installed", target.display()),
        Some(done) => println!(
            "converted {} into {} ({} tensors, {} tokens, {} + {} layers)",
            source.display(),
            target.display(),
            done.tensors,
            done.n_vocab,
            done.audio_layers,
            done.text_layers
        ),
    }
    if !configured {
        println!(
            "voice rounds use {}; to use this one, set [voice] model = {:?} in the configuration",
            config.voice.model, cfg.model
        );
    }
    Ok(())
}

fn model_list(config: &Config, models: &Path, json: bool) -> Result<()> {
    use caal::voice::stt;
    let configured = stt::model_path(&config.voice, models);
    let rows: Vec<serde_json::Value> = stt::SPEECH_MODELS
        .iter()
        .map(|m| {
            let cfg = stt::with_model(&config.voice, m);
            let file = stt::model_path(&cfg, models);
            let source = stt::source_path(&cfg, models);
            serde_json::json!({
                "name": m.name, "file": file, "source": source,
                "fetched": source.join("model.bin").is_file(),
                "installed": file.is_file(),
                "bytes": std::fs::metadata(&file).map(|f| f.len()).ok(),
                "configured": file == configured,
                "parameters": m.parameters, "languages": m.languages,
                "license": m.license, "package": m.package,
            })
        })
        .collect();
    if json {
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    let width = rows
        .iter()
        .map(|r| r["name"].as_str().map_or(0, str::len))
        .max()
        .unwrap_or(0);
    for r in &rows {
        let state = match (r["installed"].as_bool(), r["fetched"].as_bool()) {
            (Some(true), _) => "installed",
            (_, Some(true)) => "fetched; `caal model install NAME` converts it",
            _ => "not fetched; `bash .ci/setup` fetches it",
        };
        println!(
            "{}{:<width$} {} parameters, {}, {}; {} ({})",
            if r["configured"].as_bool() == Some(true) {
                "* "
            } else {
                "  "
            },
            r["name"].as_str().unwrap_or_default(),
            r["parameters"].as_str().unwrap_or_default(),
            r["languages"].as_str().unwrap_or_default(),
            r["license"].as_str().unwrap_or_default(),
            state,
            r["package"].as_str().unwrap_or_default(),
        );
    }
    Ok(())
}

pub fn livekit(command: LivekitCommand) -> Result<()> {
    let LivekitCommand::Token {
        room,
        identity,
        ttl_minutes,
        json,
    } = command;
    let keys = caal::voice::livekit::Keys::from_env(&|k| std::env::var(k).ok())?;
    let ttl = Duration::from_secs(ttl_minutes.max(1) * 60);
    let token = caal::voice::livekit::token(&keys, &room, &identity, ttl)?;
    if json {
        println!(
            "{}",
            serde_json::json!({"token": token, "room": room, "identity": identity,
                               "api_key": keys.api_key, "ttl_seconds": ttl.as_secs()})
        );
    } else {
        println!("{token}");
    }
    Ok(())
}
