//! `caal bench wake`: a wake word heard when said and not otherwise.
//!
//! - **False rejects**: the phrase said before an everyday request ("hey
//!   jarvis, turn on the kitchen lights"), by the Piper voice and three
//!   espeak-ng voices, in quiet and in white noise at 10 dB SNR, each clip
//!   a stream of its own: the share where it is not heard.
//! - **False accepts per hour**: ordinary speech that never says it,
//!   streamed whole: recorded human speech (Allison Smith's prompts in
//!   Debian's `asterisk-core-sounds-en-wav`, CC-BY-SA 3.0; the clips of
//!   `pocketsphinx-testdata`), and every line of the understanding suites
//!   said by two espeak-ng voices and (the first `--piper-lines`) the Piper
//!   voice; the times it is heard per hour of that speech.
//!
//! Both at the configured threshold and a few around it, from one pass;
//! and with the voice socket's second check: where the phrase is heard,
//! whisper must hear it at the start of what was said (a false wake's
//! speech is transcribed and dropped), so the figures are given with it.
//! Built on the library's public API.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use caal::config::Config;
use caal::voice::{audio, stt, wake};

use super::voice::Mouth;
use serde::Serialize;

/// Thresholds reported beside the configured one.
const SWEEP: &[f32] = &[0.3, 0.5, 0.7, 0.9];
/// Quiet between lines of a stream of ordinary speech.
const GAP_S: f32 = 0.4;

#[derive(Serialize)]
pub struct Report {
    pub model: String,
    pub phrase: String,
    pub threshold: f32,
    pub positives: Vec<Said>,
    pub negatives: Vec<Ordinary>,
    /// Per threshold: the share of positive clips not heard, and the
    /// false accepts per hour of all ordinary speech.
    pub sweep: Vec<Point>,
    pub false_reject_rate: f64,
    pub false_accepts_per_hour: f64,
    /// With whisper's check, as the voice socket hears it (at
    /// `voice.wake.margin`), and at other margins.
    pub margin: f32,
    pub checked_false_reject_rate: f64,
    pub checked_false_accepts_per_hour: f64,
    pub margin_sweep: Vec<Point>,
    pub hours_of_ordinary_speech: f64,
    /// Milliseconds of one core per second of audio the wake word reads.
    pub ms_per_audio_second: f64,
    /// Clips the phrase was said in and not heard at the threshold.
    pub missed: Vec<String>,
}

#[derive(Serialize)]
pub struct Said {
    pub voice: String,
    pub clips: usize,
    pub heard: usize,
    /// Median of each clip's best score.
    pub median_score: f32,
}

#[derive(Serialize)]
pub struct Ordinary {
    pub source: String,
    pub minutes: f64,
    pub false_accepts: usize,
    /// The highest score anywhere in it.
    pub best_score: f32,
    /// What was said where it was heard at the threshold (the line, or the
    /// recording's file), and what whisper heard there.
    pub heard_in: Vec<(String, String)>,
}

/// Figures at one setting: a threshold (`sweep`) or a margin (`margin_sweep`).
#[derive(Serialize)]
pub struct Point {
    pub at: f32,
    pub false_reject_rate: f64,
    pub false_accepts_per_hour: f64,
}

/// Requests said after the phrase.
const REQUESTS: &[&str] = &[
    "turn on the kitchen lights",
    "what time is it",
    "set a timer for ten minutes",
    "lock the front door",
    "add milk to the shopping list",
    "turn off the bedroom lamp",
    "what's the weather like today",
    "pause the timer",
    "dim the living room lights to thirty percent",
    "remind me to call mum at six",
];

pub fn run(config: &Config, piper_lines: usize) -> Result<Report> {
    let cfg = &config.voice;
    let models_dir = caal::llm::tiers::models_dir(&|k| std::env::var(k).ok());
    let model_name = if cfg.wake.model.is_empty() {
        "openwakeword-0.5.1/hey_jarvis_v0.1.onnx"
    } else {
        cfg.wake.model.as_str()
    };
    let model = models_dir.join(model_name);
    let wake = wake::WakeWord::load(&model, &models_dir.join(&cfg.onnxruntime))
        .map_err(|e| anyhow::anyhow!("{e}; `bash .ci/setup` installs openWakeWord's models"))?;
    let mut work = Work::default();
    // Whisper as the voice socket's with this wake word on.
    let mut woken = config.clone();
    woken.voice.wake.model = model_name.to_owned();
    let hear_cfg = super::voice::as_rounds_hear(&woken, &models_dir).map_err(anyhow::Error::msg)?;
    let whisper = stt::Stt::load(&stt::model_path(&hear_cfg, &models_dir), &hear_cfg)?;
    // Whether whisper hears the phrase at the start of `samples` (as the
    // voice socket checks it), and what it heard.
    let says_it = |samples: &[f32]| -> Result<(f32, String)> {
        let text = whisper.transcribe(samples)?.text;
        let fits = |texts: &[String]| whisper.score(samples, texts).ok();
        let worse_by = wake.phrase_fit(&text, fits).map_or(f32::INFINITY, |f| f.0);
        Ok((worse_by, text))
    };
    let margin = cfg.wake.margin;

    let piper = Mouth::piper(config, &models_dir).map_err(anyhow::Error::msg)?;
    let voices = [
        piper.clone(),
        Mouth::espeak(),
        Mouth::espeak_as("en-us+f3", 170),
        Mouth::espeak_as("en-gb+m3", 140),
    ];
    let mut positives = Vec::new();
    // Per clip: its name, every step's score, and how much worse the
    // phrase fits than what whisper wrote (0: it wrote it).
    let mut clips: Vec<(String, Vec<wake::Heard>, f32)> = Vec::new();
    for noisy in [false, true] {
        for voice in &voices {
            let mouth = if noisy {
                voice
                    .clone()
                    .in_noise(10.0, config, &models_dir)
                    .map_err(anyhow::Error::msg)?
            } else {
                voice.clone()
            };
            let mut best = Vec::new();
            let mut heard = 0;
            for request in REQUESTS {
                let text = format!("{}, {request}", wake.phrase);
                // A second of the room first: the stream is open before
                // anyone speaks.
                let said = mouth.say(&text).map_err(anyhow::Error::msg)?;
                let lead = room(&said, noisy);
                let steps = work.steps(&wake, &[lead.as_slice(), &said].concat())?;
                let top = steps.iter().map(|s| s.score).fold(0.0f32, f32::max);
                best.push(top);
                if wake::times_heard(&steps, cfg.wake.threshold) > 0 {
                    heard += 1;
                }
                let (worse_by, whisper_text) = says_it(&said)?;
                let name = format!(
                    "{} / {text} (whisper: {whisper_text:?}, the phrase fits {worse_by:.1} worse)",
                    mouth.name()
                );
                clips.push((name, steps, worse_by));
            }
            best.sort_by(f32::total_cmp);
            positives.push(Said {
                voice: mouth.name(),
                clips: REQUESTS.len(),
                heard,
                median_score: best[best.len() / 2],
            });
        }
    }

    let mut negatives = Vec::new();
    // Per stream: every step's score, the part of the stream each step is
    // in, and the parts it was heard in at the lowest threshold, with
    // whether whisper heard the phrase there.
    type Checked = std::collections::BTreeMap<usize, (String, f32, String)>;
    let mut ordinary: Vec<(Vec<wake::Heard>, Vec<usize>, Checked)> = Vec::new();
    let mut add = |source: String, (samples, said): Spans, work: &mut Work| -> Result<()> {
        let steps = work.steps(&wake, &samples)?;
        // Where it was heard: the line or file whose span holds it (the
        // step ends up to 80 ms after the speech that made it), and
        // whether whisper hears the phrase there.
        let span = |ms: u64| {
            let at = (ms * u64::from(audio::RATE) / 1000) as usize;
            said.partition_point(|(start, _)| *start <= at)
                .saturating_sub(1)
        };
        // Per part heard in (at the lowest threshold): what it is, and
        // whether whisper hears the phrase there and what it heard.
        let mut checked: Checked = std::collections::BTreeMap::new();
        for ms in wake::heard_at(&steps, SWEEP[0].min(cfg.wake.threshold)) {
            let i = span(ms);
            let Some((start, what)) = said.get(i) else {
                continue;
            };
            if checked.contains_key(&i) {
                continue;
            }
            let end = said.get(i + 1).map_or(samples.len(), |(s, _)| *s);
            let (says, text) = says_it(&samples[*start..end])?;
            checked.insert(i, (what.clone(), says, text));
        }
        let parts: Vec<usize> = wake::heard_at(&steps, cfg.wake.threshold)
            .into_iter()
            .map(span)
            .collect();
        negatives.push(Ordinary {
            source,
            minutes: samples.len() as f64 / f64::from(audio::RATE) / 60.0,
            false_accepts: wake::times_heard(&steps, cfg.wake.threshold),
            best_score: steps.iter().map(|s| s.score).fold(0.0f32, f32::max),
            heard_in: parts
                .iter()
                .filter_map(|i| checked.get(i))
                .map(|c| {
                    (
                        c.0.clone(),
                        format!("{} (the phrase fits {:.1} worse)", c.2, c.1),
                    )
                })
                .collect(),
        });
        let spans: Vec<usize> = steps.iter().map(|s| span(s.at_ms)).collect();
        ordinary.push((steps, spans, checked));
        Ok(())
    };
    add(
        "recorded human speech: asterisk-core-sounds-en-wav (Allison Smith's prompts)".into(),
        recorded(Path::new("/usr/share/asterisk/sounds/en_US_f_Allison"))?,
        &mut work,
    )?;
    add(
        "recorded human speech: pocketsphinx-testdata (cards, LibriVox)".into(),
        recorded(Path::new("/usr/share/pocketsphinx/test/data"))?,
        &mut work,
    )?;
    let lines: Vec<String> = super::understand::suites(None)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .flat_map(|(_, cases)| cases.into_iter().map(|c| c.text))
        .collect();
    for (mouth, count) in [
        (Mouth::espeak(), lines.len()),
        (Mouth::espeak_as("en-us+f3", 170), lines.len()),
        (piper, piper_lines.min(lines.len())),
    ] {
        let mut samples = Vec::new();
        let mut said = Vec::new();
        for line in &lines[..count] {
            said.push((samples.len(), line.clone()));
            samples.extend(mouth.say(line).map_err(anyhow::Error::msg)?);
            samples.extend(std::iter::repeat_n(
                0.0,
                (GAP_S * audio::RATE as f32) as usize,
            ));
        }
        add(
            format!("the suites' {count} lines said by {}", mouth.name()),
            (samples, said),
            &mut work,
        )?;
    }

    let hours: f64 = negatives.iter().map(|n| n.minutes).sum::<f64>() / 60.0;
    let at = |threshold: f32| Point {
        at: threshold,
        false_reject_rate: clips
            .iter()
            .filter(|(_, steps, _)| wake::times_heard(steps, threshold) == 0)
            .count() as f64
            / clips.len() as f64,
        false_accepts_per_hour: ordinary
            .iter()
            .map(|(steps, _, _)| wake::times_heard(steps, threshold))
            .sum::<usize>() as f64
            / hours,
    };
    let here = at(cfg.wake.threshold);
    let threshold = cfg.wake.threshold;
    // A clip the phrase was said in is missed by the socket when the
    // classifier does not hear it, or whisper's check finds it not said.
    let rejected = |steps: &[wake::Heard], worse: f32, margin: f32| {
        wake::times_heard(steps, threshold) == 0 || worse > margin
    };
    let checked = |margin: f32| Point {
        at: margin,
        false_reject_rate: clips
            .iter()
            .filter(|(_, steps, worse)| rejected(steps, *worse, margin))
            .count() as f64
            / clips.len() as f64,
        false_accepts_per_hour: ordinary
            .iter()
            .map(|(steps, spans, checked)| {
                wake::heard_at(steps, threshold)
                    .iter()
                    .filter(|ms| {
                        let i = steps.iter().position(|s| s.at_ms == **ms).map(|k| spans[k]);
                        i.and_then(|i| checked.get(&i))
                            .is_some_and(|c| c.1 <= margin)
                    })
                    .count()
            })
            .sum::<usize>() as f64
            / hours,
    };
    let with_check = checked(margin);
    Ok(Report {
        model: model_name.to_owned(),
        phrase: wake.phrase.clone(),
        threshold,
        missed: clips
            .iter()
            .filter(|(_, steps, worse)| rejected(steps, *worse, margin))
            .map(|(name, steps, _)| {
                if wake::times_heard(steps, threshold) == 0 {
                    name.clone()
                } else {
                    format!("{name}: whisper did not hear the phrase within the margin")
                }
            })
            .collect(),
        positives,
        negatives,
        sweep: SWEEP.iter().map(|&t| at(t)).collect(),
        false_reject_rate: here.false_reject_rate,
        false_accepts_per_hour: here.false_accepts_per_hour,
        margin,
        checked_false_reject_rate: with_check.false_reject_rate,
        checked_false_accepts_per_hour: with_check.false_accepts_per_hour,
        margin_sweep: [0.0, 1.0, 2.0, 3.0, 5.0, 8.0]
            .iter()
            .map(|&m| checked(m))
            .collect(),
        hours_of_ordinary_speech: hours,
        ms_per_audio_second: work.busy_ms / work.audio_s.max(1e-9),
    })
}

/// The time the wake word takes over the audio it reads.
#[derive(Default)]
struct Work {
    busy_ms: f64,
    audio_s: f64,
}

impl Work {
    /// Every step's score of `samples` streamed from their start.
    fn steps(&mut self, wake: &wake::WakeWord, samples: &[f32]) -> Result<Vec<wake::Heard>> {
        let mut stream = wake.stream();
        let started = Instant::now();
        let mut steps = Vec::new();
        // In the page's frames (4,096 samples at 48 kHz is 85 ms).
        for frame in samples.chunks(1365) {
            steps.extend(wake.steps(&mut stream, frame)?);
        }
        self.busy_ms += started.elapsed().as_secs_f64() * 1000.0;
        self.audio_s += samples.len() as f64 / f64::from(audio::RATE);
        Ok(steps)
    }
}

/// A second of the room before `said`: quiet, or the noise it is in.
fn room(said: &[f32], noisy: bool) -> Vec<f32> {
    let second = audio::RATE as usize;
    if !noisy {
        return vec![0.0; second];
    }
    // The noise of the clip's own lead-in (half a second of room), twice.
    let lead = &said[..said.len().min(second / 2)];
    [lead, lead].concat()
}

/// Speech streamed whole, and where each part of it starts (in samples)
/// with what it is.
type Spans = (Vec<f32>, Vec<(usize, String)>);

/// Every WAV under `dir` (sorted), at 16 kHz, one after another with a
/// short quiet between.
fn recorded(dir: &Path) -> Result<Spans> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d).with_context(|| {
            format!(
                "cannot read {}; `bash .ci/setup` installs the recorded speech",
                d.display()
            )
        })?;
        for e in entries {
            let path: PathBuf = e?.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|x| x == "wav") {
                files.push(path);
            }
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("no WAV files under {}", dir.display());
    }
    let mut out = Vec::new();
    let mut said = Vec::new();
    for f in files {
        let bytes = std::fs::read(&f)?;
        let clip = audio::decode_wav(&bytes, &f.display().to_string())?;
        said.push((out.len(), f.display().to_string()));
        out.extend(clip.samples);
        out.extend(std::iter::repeat_n(
            0.0,
            (GAP_S * audio::RATE as f32) as usize,
        ));
    }
    Ok((out, said))
}

pub fn print(r: &Report) {
    println!(
        "wake word {:?} ({}), heard from a score of {}",
        r.phrase, r.model, r.threshold
    );
    println!("  said before a request (a stream each):");
    for p in &r.positives {
        println!(
            "    {:<44} heard {:>2} of {} (median best score {:.2})",
            p.voice, p.heard, p.clips, p.median_score
        );
    }
    println!("  ordinary speech, never said:");
    for n in &r.negatives {
        println!(
            "    {:<74} {:>6.1} min, heard {} times (best score {:.2})",
            n.source, n.minutes, n.false_accepts, n.best_score
        );
    }
    println!(
        "  false rejects {:.1}%, false accepts {:.2} per hour ({:.2} h of ordinary speech); {:.1} ms of one core per second of audio",
        r.false_reject_rate * 100.0,
        r.false_accepts_per_hour,
        r.hours_of_ordinary_speech,
        r.ms_per_audio_second
    );
    for p in &r.sweep {
        println!(
            "    at {:.1}: false rejects {:.1}%, false accepts {:.2}/h",
            p.at,
            p.false_reject_rate * 100.0,
            p.false_accepts_per_hour
        );
    }
    for m in &r.missed {
        println!("    not heard: {m}");
    }
    println!(
        "  with whisper's check (the voice socket's, margin {}): false rejects {:.1}%, false accepts {:.2} per hour",
        r.margin,
        r.checked_false_reject_rate * 100.0,
        r.checked_false_accepts_per_hour
    );
    for p in &r.margin_sweep {
        println!(
            "    margin {:.0}: false rejects {:.1}%, false accepts {:.2}/h",
            p.at,
            p.false_reject_rate * 100.0,
            p.false_accepts_per_hour
        );
    }
    for n in &r.negatives {
        for (said, heard) in &n.heard_in {
            println!("    heard, never said: {said:?} (whisper: {heard:?})");
        }
    }
}
