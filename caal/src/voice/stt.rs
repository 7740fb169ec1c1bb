//! Speech to text in-process: whisper.cpp through `whisper-rs` (cargo
//! feature `whisper`, on in the `caal` binary).

use std::path::{Path, PathBuf};

/// What was heard.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct Transcript {
    pub text: String,
    /// The model file's name (`ggml-tiny.en.bin`).
    pub model: String,
    pub language: String,
    /// Mean probability of the transcript's words' tokens, 0–1.
    pub confidence: f32,
    /// The probability of its least sure word token, 0–1: one misheard
    /// word ("the activate" for "deactivate") shows here, not in the mean.
    pub least: f32,
    /// Whisper's own estimate that the audio held no speech at all, 0–1.
    pub no_speech: f32,
    pub audio_ms: u64,
    /// How long transcribing took.
    pub stt_ms: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum SttError {
    #[error(
        "this caal was built without speech to text; build it with its default features (`cargo build -p caal-cli`)"
    )]
    NotBuilt,
    #[error(
        "no whisper model at {path}: run `caal model install` (the setup command fetches what it converts)"
    )]
    NoModel { path: String },
    #[error(transparent)]
    Convert(#[from] super::convert::ConvertError),
    #[error("whisper failed on {what}: {detail}")]
    Whisper { what: String, detail: String },
}

/// Where the model is (`voice.model`: a path, or a name in the models dir).
pub fn model_path(cfg: &crate::config::VoiceConfig, models_dir: &Path) -> PathBuf {
    resolve(&cfg.model, models_dir)
}

/// Where the model is converted from (`voice.model_source`).
pub fn source_path(cfg: &crate::config::VoiceConfig, models_dir: &Path) -> PathBuf {
    resolve(&cfg.model_source, models_dir)
}

fn resolve(name: &str, models_dir: &Path) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() || name.contains('/') {
        p.to_owned()
    } else {
        models_dir.join(name)
    }
}

/// Converts the model from its source unless it is there already (or
/// `force`); returns whether it converted.
pub fn install(
    cfg: &crate::config::VoiceConfig,
    models_dir: &Path,
    force: bool,
) -> Result<Option<super::convert::Converted>, SttError> {
    let model = model_path(cfg, models_dir);
    if model.is_file() && !force {
        return Ok(None);
    }
    let source = source_path(cfg, models_dir);
    if !source.join("model.bin").is_file() {
        return Err(SttError::NoModel {
            path: format!(
                "{} (nor its source {}: run `bash .ci/setup`)",
                model.display(),
                source.display()
            ),
        });
    }
    Ok(Some(super::convert::convert(&source, &model)?))
}

/// What whisper wrote, tidied of two habits of small models on short
/// commands: the sentence said again and again ("Lights off. Lights off.",
/// "bed room lamp, half, bed room lamp, half, bed room"), kept once; and a
/// fraction spelled out between digits ("1 slash 2 hour"), written as one;
/// and a number said as tens and units written with a dash ("20-2" for
/// "twenty-two"), written as the number.
pub fn tidy(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let plain: Vec<String> = words
        .iter()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect()
        })
        .collect();
    let n = words.len();
    // The shortest run of words the whole transcript repeats, at least twice
    // in full (the last copy may be cut short).
    let period = (1..=n / 2).find(|&p| (p..n).all(|i| plain[i] == plain[i % p]));
    let kept: Vec<&str> = match period {
        Some(p) => words[..p].to_vec(),
        None => words,
    };
    let mut out: Vec<String> = Vec::with_capacity(kept.len());
    let mut i = 0;
    while i < kept.len() {
        let numeric = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit());
        if i + 2 < kept.len()
            && numeric(kept[i])
            && kept[i + 1].eq_ignore_ascii_case("slash")
            && numeric(kept[i + 2].trim_end_matches(|c: char| !c.is_ascii_digit()))
        {
            out.push(format!("{}/{}", kept[i], kept[i + 2]));
            i += 3;
        } else {
            out.push(tens_and_units(kept[i]).unwrap_or_else(|| kept[i].to_owned()));
            i += 1;
        }
    }
    let mut joined = out.join(" ");
    if period.is_some() {
        // The copy kept ends as the transcript did, not mid-list.
        let end = text
            .trim_end()
            .chars()
            .last()
            .filter(|c| ".?!".contains(*c));
        while joined.ends_with([',', ';', '.', '?', '!']) {
            joined.pop();
        }
        if let Some(c) = end {
            joined.push(c);
        }
    }
    joined
}

/// "20-2" (and "20-2%", "20-2,") as "22": tens from 20 to 90, a unit from 1 to 9.
fn tens_and_units(word: &str) -> Option<String> {
    let (tens, rest) = word.split_once('-')?;
    let units: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let tail = &rest[units.len()..];
    let (t, u): (u32, u32) = (tens.parse().ok()?, units.parse().ok()?);
    (units.len() == 1 && (20..=90).contains(&t) && t % 10 == 0 && u > 0)
        .then(|| format!("{}{tail}", t + u))
}

/// Encoder context for `n` samples: 50 positions a second plus 128 as
/// margin, in steps of 64, at least 384, at most the full 1500. (tiny.en
/// repeated itself without end at 192 positions on 1.7 s; from 256 up it
/// transcribed what the full context did.)
pub fn audio_ctx(n: usize) -> i32 {
    let seconds = n as f64 / f64::from(super::audio::RATE);
    let ctx = ((seconds * 50.0 + 128.0) / 64.0).ceil() as i32 * 64;
    ctx.clamp(384, 1500)
}

#[cfg(feature = "whisper")]
mod engine {
    use super::{SttError, Transcript};
    use std::path::Path;
    use std::sync::Mutex;
    use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters};

    /// A loaded model, and states to run it in (one per concurrent transcription).
    pub struct Stt {
        ctx: WhisperContext,
        states: Mutex<Vec<whisper_rs::WhisperState>>,
        model: String,
        language: String,
        threads: i32,
        prompt: String,
        beam_size: u32,
    }

    /// `voice.beam_size` as whisper's decoding: 1 greedy, more a beam search.
    pub fn sampling(beam_size: u32) -> SamplingStrategy {
        if beam_size > 1 {
            SamplingStrategy::BeamSearch {
                beam_size: i32::try_from(beam_size).unwrap_or(5),
                patience: -1.0,
            }
        } else {
            SamplingStrategy::Greedy { best_of: 1 }
        }
    }

    impl Stt {
        pub fn load(path: &Path, cfg: &crate::config::VoiceConfig) -> Result<Self, SttError> {
            let (language, threads) = (cfg.language.as_str(), cfg.threads);
            static HOOKS: std::sync::Once = std::sync::Once::new();
            // whisper.cpp's own logging goes through `tracing`, not stderr.
            HOOKS.call_once(whisper_rs::install_logging_hooks);
            if !path.is_file() {
                return Err(SttError::NoModel {
                    path: path.display().to_string(),
                });
            }
            let what = path.display().to_string();
            let ctx = WhisperContext::new_with_params(&what, WhisperContextParameters::default())
                .map_err(|e| SttError::Whisper {
                what: what.clone(),
                detail: e.to_string(),
            })?;
            let threads = if threads == 0 {
                std::thread::available_parallelism().map_or(2, |n| n.get())
            } else {
                threads
            };
            Ok(Self {
                ctx,
                states: Mutex::new(Vec::new()),
                model: path
                    .file_name()
                    .map_or(what.clone(), |n| n.to_string_lossy().into_owned()),
                language: language.to_owned(),
                threads: i32::try_from(threads).unwrap_or(2),
                prompt: cfg.prompt.clone(),
                beam_size: cfg.beam_size.max(1),
            })
        }

        pub fn model(&self) -> &str {
            &self.model
        }

        /// Transcribes 16 kHz mono samples.
        pub fn transcribe(&self, samples: &[f32]) -> Result<Transcript, SttError> {
            let started = std::time::Instant::now();
            let failed = |detail: String| SttError::Whisper {
                what: self.model.clone(),
                detail,
            };
            let pooled = self.states.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let mut state = match pooled {
                Some(s) => s,
                None => self.ctx.create_state().map_err(|e| failed(e.to_string()))?,
            };
            let mut params = FullParams::new(sampling(self.beam_size));
            params.set_n_threads(self.threads);
            if !self.prompt.is_empty() {
                params.set_initial_prompt(&self.prompt);
            }
            let language = (self.language != "auto").then_some(self.language.as_str());
            params.set_language(language);
            params.set_print_progress(false);
            params.set_print_realtime(false);
            params.set_print_special(false);
            params.set_print_timestamps(false);
            params.set_no_context(true);
            params.set_single_segment(true);
            params.set_no_timestamps(true);
            params.set_suppress_nst(true);
            // The encoder attends to 30 s windows; a short utterance needs
            // only its share of them (plus a margin), which is most of the
            // speed on commands a few seconds long.
            params.set_audio_ctx(super::audio_ctx(samples.len()));
            // A bound on a decoder that does not stop (about 15 tokens a second is plenty).
            params.set_max_tokens(i32::try_from(samples.len() / 1_000 + 16).unwrap_or(i32::MAX));
            // whisper needs at least a second of audio; pad short utterances with silence.
            let min = super::super::audio::RATE as usize + super::super::audio::RATE as usize / 4;
            let padded;
            let input = if samples.len() < min {
                let mut p = samples.to_vec();
                p.resize(min, 0.0);
                padded = p;
                &padded[..]
            } else {
                samples
            };
            state
                .full(params, input)
                .map_err(|e| failed(e.to_string()))?;
            let eot = self.ctx.token_eot();
            let mut text = String::new();
            let (mut sum, mut count, mut least) = (0.0f32, 0u32, 1.0f32);
            let mut no_speech = 0.0f32;
            for segment in state.as_iter() {
                no_speech = no_speech.max(segment.no_speech_probability());
                text.push_str(&segment.to_str_lossy().map_err(|e| failed(e.to_string()))?);
                for t in 0..segment.n_tokens() {
                    // Words only: special tokens and punctuation say nothing
                    // about how surely the words were heard.
                    if let Some(token) = segment.get_token(t)
                        && token.token_id() < eot
                        && token
                            .to_str_lossy()
                            .is_ok_and(|s| s.chars().any(char::is_alphanumeric))
                    {
                        let p = token.token_probability();
                        sum += p;
                        count += 1;
                        least = least.min(p);
                    }
                }
            }
            let language = whisper_rs::get_lang_str(state.full_lang_id_from_state())
                .unwrap_or(self.language.as_str())
                .to_owned();
            self.states
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(state);
            Ok(Transcript {
                text: super::tidy(text.trim()),
                model: self.model.clone(),
                language,
                confidence: if count == 0 { 0.0 } else { sum / count as f32 },
                least: if count == 0 { 0.0 } else { least },
                no_speech,
                audio_ms: samples.len() as u64 * 1000 / u64::from(super::super::audio::RATE),
                stt_ms: started.elapsed().as_secs_f64() * 1000.0,
            })
        }
    }
}

#[cfg(not(feature = "whisper"))]
mod engine {
    use super::{SttError, Transcript};
    use std::path::Path;

    /// Built without whisper: loading says how to get it.
    pub struct Stt(());

    impl Stt {
        pub fn load(_path: &Path, _cfg: &crate::config::VoiceConfig) -> Result<Self, SttError> {
            Err(SttError::NotBuilt)
        }

        pub fn model(&self) -> &str {
            ""
        }

        pub fn transcribe(&self, _samples: &[f32]) -> Result<Transcript, SttError> {
            Err(SttError::NotBuilt)
        }
    }
}

pub use engine::Stt;
#[cfg(feature = "whisper")]
pub use engine::sampling;

/// Whether this build can transcribe.
pub const BUILT_IN: bool = cfg!(feature = "whisper");

#[cfg(test)]
mod tidy_tests {
    use super::tidy;

    #[test]
    fn a_sentence_said_again_is_kept_once() {
        assert_eq!(
            tidy("Turn the lights in here off. Turn the lights in here off."),
            "Turn the lights in here off."
        );
        assert_eq!(
            tidy("Bed room lamp, half, bed room lamp, half, bed room lamp,"),
            "Bed room lamp, half"
        );
        // Words said twice inside a sentence are not a repeated transcript.
        assert_eq!(
            tidy("Turn off the lights, the lights in the kitchen."),
            "Turn off the lights, the lights in the kitchen."
        );
        assert_eq!(tidy("very very bright"), "very very bright");
    }

    #[test]
    fn a_fraction_spelled_out_is_written() {
        assert_eq!(
            tidy("Set a timer for 1 and 1 slash 2 hours."),
            "Set a timer for 1 and 1/2 hours."
        );
        assert_eq!(tidy("a slash b"), "a slash b");
        assert_eq!(tidy("Make it 20-2 degrees."), "Make it 22 degrees.");
        assert_eq!(tidy("lights at 40-5%"), "lights at 45%");
        // A range, or a date, stays as it was.
        assert_eq!(tidy("between 10-20 minutes"), "between 10-20 minutes");
        assert_eq!(tidy("on 2026-11-23"), "on 2026-11-23");
    }
}
