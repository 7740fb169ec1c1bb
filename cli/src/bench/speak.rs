//! `caal bench speak`: the voice that speaks replies, as a reply is spoken.
//! For CAAL's own replies (one sentence to three), the time from the reply
//! to its first audio (the first piece spoken: what a client hears first),
//! the whole reply's real-time factor, the voice's load time and the
//! process's resident memory; the Piper voice beside espeak-ng, its
//! fallback. Built on the library's public API.

use std::time::Instant;

use anyhow::{Result, bail};
use caal::{
    config::Config,
    voice::tts::{self, Speaker},
};
use serde::Serialize;

#[derive(Serialize)]
pub struct Report {
    pub speakers: Vec<Spoken>,
}

#[derive(Serialize)]
pub struct Spoken {
    pub speaker: String,
    pub rate: u32,
    pub load_ms: f64,
    /// From the reply to its first piece spoken, over every reply and run.
    pub first_audio_p50_ms: f64,
    pub first_audio_p90_ms: f64,
    /// Time to speak a whole reply over the length of its speech.
    pub real_time_factor_p50: f64,
    pub resident_mib: f64,
}

/// Replies CAAL gives, short to long.
const REPLIES: &[&str] = &[
    "Okay, the kitchen lights are on.",
    "Unlock the front door? Say yes to confirm.",
    "The timer for the pasta has 4 minutes and 12 seconds left.",
    "To be sure: open the garage door. Say yes again to confirm.",
    "I don't know a device called alarm; there are the bedroom lamp, the desk lamp and the porch light. Which one did you mean?",
];

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

fn resident_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn measure(speaker: &Speaker, load_ms: f64, runs: usize) -> Result<Spoken> {
    let (program, voice) = speaker.name();
    // Once untimed: the first run of a model sets up its buffers.
    speaker.speak(REPLIES[0])?;
    let (mut first, mut factors) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for reply in REPLIES {
            let started = Instant::now();
            let mut samples = 0usize;
            for (i, piece) in tts::pieces(reply).into_iter().enumerate() {
                samples += speaker.speak(piece)?.len();
                if i == 0 {
                    first.push(started.elapsed().as_secs_f64() * 1e3);
                }
            }
            let spoken_s = samples as f64 / f64::from(speaker.rate());
            factors.push(started.elapsed().as_secs_f64() / spoken_s.max(1e-3));
        }
    }
    first.sort_by(f64::total_cmp);
    factors.sort_by(f64::total_cmp);
    Ok(Spoken {
        speaker: format!("{program} {voice}"),
        rate: speaker.rate(),
        load_ms,
        first_audio_p50_ms: percentile(&first, 0.5),
        first_audio_p90_ms: percentile(&first, 0.9),
        real_time_factor_p50: percentile(&factors, 0.5),
        resident_mib: resident_mib(),
    })
}

pub fn run(config: &Config, runs: usize) -> Result<Report> {
    let models = caal::llm::tiers::models_dir(&|k| std::env::var(k).ok());
    let voice = &config.voice;
    let started = Instant::now();
    let piper = Speaker::load(
        &models.join(&voice.piper),
        &models.join(&voice.onnxruntime),
        "",
        voice.threads.max(1),
    );
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    if !matches!(piper, Speaker::Piper(_)) {
        bail!(
            "the Piper voice is not installed ({}); `bash .ci/setup` installs it",
            voice.piper
        );
    }
    let mut speakers = vec![measure(&piper, load_ms, runs.max(1))?];
    let espeak = Speaker::Espeak(if voice.tts_voice.is_empty() {
        "en-us".into()
    } else {
        voice.tts_voice.clone()
    });
    speakers.push(measure(&espeak, 0.0, runs.max(1))?);
    Ok(Report { speakers })
}

pub fn print(report: &Report) {
    for s in &report.speakers {
        println!(
            "{} ({} Hz): first audio of a reply p50 {:.0} ms, p90 {:.0} ms; real-time factor p50 {:.3}; loaded in {:.0} ms; process resident {:.0} MiB",
            s.speaker,
            s.rate,
            s.first_audio_p50_ms,
            s.first_audio_p90_ms,
            s.real_time_factor_p50,
            s.load_ms,
            s.resident_mib
        );
    }
}
