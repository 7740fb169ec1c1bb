//! The wake word: a phrase ("hey jarvis") that tells CAAL the speech that
//! follows is meant for it, so a microphone left open hears nothing else.
//!
//! openWakeWord's models (the PyPI package `openwakeword` 0.5.1, installed
//! by the setup), on ONNX Runtime like Silero and Piper:
//! its melspectrogram and Google's speech embedding turn each 80 ms of
//! 16 kHz audio into a 96-number embedding; a small classifier per phrase
//! scores the last 16 of them (1.28 s). The code is Apache-2.0; every
//! model, the front-end's too, is CC BY-NC-SA 4.0 (non-commercial), so no
//! wake word is on unless configured (`voice.wake.model`).
//!
//! Hand-written on the `ort` already in the build: the crates that run
//! these models bring a second inference engine (`oww-rs` and
//! `livekit-wakeword` run on tract) or a second ONNX Runtime (`aria-wake`
//! pins ort 2.0.0-rc.13). The streaming follows openWakeWord's own
//! (`utils.AudioFeatures._streaming_features`): 480 samples of the chunk
//! before go into each chunk's melspectrogram, which is scaled by
//! `x / 10 + 2`; the buffers start as openWakeWord's do (mels of ones,
//! embeddings of low noise), and the first five scores are not used.

use std::{collections::VecDeque, path::Path};

use ort::value::Tensor;

use super::onnx::{Model, OnnxError};

/// Samples of 16 kHz audio per step (80 ms): one embedding each.
pub const CHUNK: usize = 1280;
/// Samples of the step before that each melspectrogram reads too.
const LOOKBACK: usize = 480;
const MEL_BINS: usize = 32;
/// Mel frames per embedding, and per step (one every 10 ms).
const MEL_WINDOW: usize = 76;
const MELS_PER_CHUNK: usize = 8;
/// Embeddings the classifier reads, and their size.
const FEATURES: usize = 16;
const EMBEDDING: usize = 96;
/// Scores before this many steps are not used (the buffers still hold
/// their start), as openWakeWord does.
const WARM_UP: u64 = 5;
/// After the phrase is heard, it is not heard again for this long (its
/// score stays high for a few steps).
const REFRACTORY_MS: u64 = 2_000;

/// The loaded models of one wake phrase.
pub struct WakeWord {
    mel: Model,
    embedding: Model,
    classifier: Model,
    /// The classifier's name (`hey_jarvis_v0.1`).
    pub name: String,
    /// The words said, from the name ("hey jarvis").
    pub phrase: String,
    /// Embeddings a stream starts with.
    start: Vec<[f32; EMBEDDING]>,
}

/// The phrase heard in a stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Heard {
    /// When, from the start of the stream (the end of the step that
    /// scored it).
    pub at_ms: u64,
    /// The classifier's score, 0–1.
    pub score: f32,
}

/// One stream's place: the audio not yet a whole step, the last
/// `LOOKBACK` samples, the mel frames and embeddings so far.
pub struct WakeStream {
    pending: Vec<f32>,
    lookback: Vec<f32>,
    mels: VecDeque<[f32; MEL_BINS]>,
    features: VecDeque<[f32; EMBEDDING]>,
    steps: u64,
    last_heard_ms: Option<u64>,
    /// The highest score so far (for benchmarks and logs).
    pub best: f32,
}

impl WakeWord {
    /// The classifier at `model`, the melspectrogram and embedding models
    /// beside it, on ONNX Runtime from `library`.
    pub fn load(model: &Path, library: &Path) -> Result<Self, OnnxError> {
        let [classifier, mel, embedding] = files(model);
        let mel = Model::load(&mel, library, 1, "the wake word's melspectrogram")?;
        let embedding = Model::load(&embedding, library, 1, "the wake word's embedding")?;
        let classifier = Model::load(&classifier, library, 1, "the wake word's classifier")?;
        let name = model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut wake = Self {
            mel,
            embedding,
            classifier,
            phrase: phrase_of(&name),
            name,
            start: Vec::new(),
        };
        // openWakeWord starts from the embeddings of 4 s of low noise.
        let noise: Vec<f32> = super::audio::white_noise(4 * 16_000, 1000.0 / 3f32.sqrt(), 7)
            .map(|s| s.round())
            .collect();
        let mels = wake.mels(&noise)?;
        let mut start = Vec::new();
        for window in (0..mels.len()).step_by(MELS_PER_CHUNK) {
            if let Some(w) = mels.get(window..window + MEL_WINDOW) {
                start.push(wake.embed(w)?);
            }
        }
        wake.start = start;
        Ok(wake)
    }

    /// A stream starting now.
    pub fn stream(&self) -> WakeStream {
        WakeStream {
            pending: Vec::with_capacity(CHUNK),
            lookback: Vec::new(),
            mels: std::iter::repeat_n([1.0; MEL_BINS], MEL_WINDOW).collect(),
            features: self
                .start
                .iter()
                .rev()
                .take(FEATURES)
                .rev()
                .copied()
                .collect(),
            steps: 0,
            last_heard_ms: None,
            best: 0.0,
        }
    }

    /// The next `samples` (16 kHz, in [-1, 1]) of `stream`: when the phrase
    /// is heard in them with a score of at least `threshold`.
    pub fn push(
        &self,
        stream: &mut WakeStream,
        samples: &[f32],
        threshold: f32,
    ) -> Result<Option<Heard>, OnnxError> {
        let mut heard = None;
        for step in self.steps(stream, samples)? {
            if heard_again(stream.last_heard_ms, &step, threshold) {
                stream.last_heard_ms = Some(step.at_ms);
                heard.get_or_insert(step);
            }
        }
        Ok(heard)
    }

    /// Every 80 ms step the next `samples` of `stream` complete, scored
    /// (but the first `WARM_UP` of the stream).
    pub fn steps(&self, stream: &mut WakeStream, samples: &[f32]) -> Result<Vec<Heard>, OnnxError> {
        let mut steps = Vec::new();
        for &s in samples {
            // openWakeWord reads 16-bit sample values.
            stream.pending.push((s.clamp(-1.0, 1.0) * 32767.0).round());
            if stream.pending.len() < CHUNK {
                continue;
            }
            let mut input = std::mem::take(&mut stream.lookback);
            input.append(&mut stream.pending);
            stream.lookback = input[input.len().saturating_sub(LOOKBACK)..].to_vec();
            for frame in self.mels(&input)? {
                stream.mels.push_back(frame);
            }
            while stream.mels.len() > MEL_WINDOW {
                stream.mels.pop_front();
            }
            let window: Vec<[f32; MEL_BINS]> = stream.mels.iter().copied().collect();
            stream.features.push_back(self.embed(&window)?);
            while stream.features.len() > FEATURES {
                stream.features.pop_front();
            }
            stream.steps += 1;
            let score = self.score(&stream.features)?;
            if stream.steps > WARM_UP {
                stream.best = stream.best.max(score);
                let at_ms = stream.steps * CHUNK as u64 * 1000 / 16_000;
                steps.push(Heard { at_ms, score });
            }
        }
        Ok(steps)
    }

    /// The mel frames of `samples` (16-bit values), scaled as openWakeWord
    /// scales them.
    fn mels(&self, samples: &[f32]) -> Result<Vec<[f32; MEL_BINS]>, OnnxError> {
        self.mel.run(|session, failed| {
            let input =
                Tensor::from_array(([1usize, samples.len()], samples.to_vec())).map_err(failed)?;
            let out = session.run(ort::inputs![input]).map_err(failed)?;
            let (_, values) = out[0].try_extract_tensor::<f32>().map_err(failed)?;
            Ok(values
                .chunks_exact(MEL_BINS)
                .map(|c| std::array::from_fn(|i| c[i] / 10.0 + 2.0))
                .collect())
        })
    }

    /// The embedding of `MEL_WINDOW` mel frames.
    fn embed(&self, window: &[[f32; MEL_BINS]]) -> Result<[f32; EMBEDDING], OnnxError> {
        let flat: Vec<f32> = window.iter().flatten().copied().collect();
        self.embedding.run(|session, failed| {
            let input =
                Tensor::from_array(([1usize, MEL_WINDOW, MEL_BINS, 1], flat)).map_err(failed)?;
            let out = session.run(ort::inputs![input]).map_err(failed)?;
            let (_, values) = out[0].try_extract_tensor::<f32>().map_err(failed)?;
            Ok(std::array::from_fn(|i| {
                values.get(i).copied().unwrap_or(0.0)
            }))
        })
    }

    /// The classifier's score of the last `FEATURES` embeddings.
    fn score(&self, features: &VecDeque<[f32; EMBEDDING]>) -> Result<f32, OnnxError> {
        let flat: Vec<f32> = features.iter().flatten().copied().collect();
        self.classifier.run(|session, failed| {
            let input =
                Tensor::from_array(([1usize, FEATURES, EMBEDDING], flat)).map_err(failed)?;
            let out = session.run(ort::inputs![input]).map_err(failed)?;
            let (_, values) = out[0].try_extract_tensor::<f32>().map_err(failed)?;
            Ok(values.first().copied().unwrap_or(0.0))
        })
    }

    /// The request in `transcript`, if the phrase was said at its start:
    /// whisper wrote it (`strip`), or wrote it its own way ("A jar of this,
    /// lock the door") and the phrase in place of the first words fits
    /// the audio within `margin` (log-likelihood, `fits` scoring texts
    /// against the speech) of what whisper wrote. None: the phrase was
    /// not said there (the classifier took other words for it).
    pub fn said_first<'a>(
        &self,
        transcript: &'a str,
        fits: impl FnOnce(&[String]) -> Option<Vec<f32>>,
        margin: f32,
    ) -> Option<&'a str> {
        said_first_of(&self.phrase, transcript, fits, margin)
    }

    /// How much worse (log-likelihood) the phrase fits the start of the
    /// speech than what whisper wrote there (0 when it wrote the phrase),
    /// and the request after it; None when there is nothing to weigh.
    pub fn phrase_fit<'a>(
        &self,
        transcript: &'a str,
        fits: impl FnOnce(&[String]) -> Option<Vec<f32>>,
    ) -> Option<(f32, &'a str)> {
        phrase_fit_of(&self.phrase, transcript, fits)
    }

    /// `text` without the phrase said at its start ("Hey Jarvis, turn on
    /// the lights" → "turn on the lights"): the first words whose letters
    /// are near the phrase's (a normalised edit distance of at most 0.4),
    /// as whisper writes a name it does not know ("A Jarvis", "Jarvus").
    pub fn strip<'a>(&self, text: &'a str) -> &'a str {
        strip_phrase(&self.phrase, text)
    }
}

/// The files a wake word at `model` needs: its classifier, and the
/// melspectrogram and embedding models beside it.
pub fn files(model: &Path) -> [std::path::PathBuf; 3] {
    let dir = model.parent().unwrap_or(Path::new("."));
    [
        model.to_path_buf(),
        dir.join("melspectrogram.onnx"),
        dir.join("embedding_model.onnx"),
    ]
}

/// How often the phrase is heard in a stream's `steps` at `threshold`:
/// as `WakeWord::push` hears it (not again within `REFRACTORY_MS`).
pub fn times_heard(steps: &[Heard], threshold: f32) -> usize {
    heard_at(steps, threshold).len()
}

/// When the phrase is heard in a stream's `steps` at `threshold` (ms).
pub fn heard_at(steps: &[Heard], threshold: f32) -> Vec<u64> {
    let mut at: Vec<u64> = Vec::new();
    for step in steps {
        if heard_again(at.last().copied(), step, threshold) {
            at.push(step.at_ms);
        }
    }
    at
}

/// Whether `step` is the phrase heard (again): scored at least
/// `threshold`, and `REFRACTORY_MS` after it was `last` heard.
fn heard_again(last: Option<u64>, step: &Heard, threshold: f32) -> bool {
    step.score >= threshold && last.is_none_or(|l| step.at_ms >= l + REFRACTORY_MS)
}

/// Whisper's prompt (`voice.prompt`, the words before the speaker's) with
/// the wake phrase of `voice.wake.model` said first, when one is on: told
/// nothing of it, tiny.en wrote "hey jarvis" as "Head office" or "Hey
/// Jarvis and" (so the request lost words, and the socket's check that
/// whisper heard the phrase failed). An empty prompt stays empty.
pub fn with_phrase(prompt: &str, wake_model: &str) -> String {
    let stem = Path::new(wake_model)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let phrase = phrase_of(&stem);
    if prompt.is_empty() || phrase.is_empty() {
        return prompt.to_owned();
    }
    let mut rest = prompt.chars();
    let first = rest.next().map(|c| c.to_lowercase().collect::<String>());
    format!(
        "{}, {}{}",
        written(&phrase),
        first.unwrap_or_default(),
        rest.as_str()
    )
}

/// The phrase as whisper writes a name: "hey jarvis" → "Hey Jarvis".
fn written(phrase: &str) -> String {
    let capital = |w: &str| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect::<String>())
            .unwrap_or_default()
    };
    phrase.split(' ').map(capital).collect::<Vec<_>>().join(" ")
}

/// `WakeWord::phrase_fit` for `phrase`.
fn phrase_fit_of<'a>(
    phrase: &str,
    transcript: &'a str,
    fits: impl FnOnce(&[String]) -> Option<Vec<f32>>,
) -> Option<(f32, &'a str)> {
    let request = strip_phrase(phrase, transcript);
    if request.len() < transcript.len() {
        return Some((0.0, request));
    }
    // The phrase in place of the first 1, 2, … words.
    let said = written(phrase);
    let mut rests = Vec::new();
    let mut rest = transcript.trim_start();
    for _ in 0..phrase.split(' ').count() + 2 {
        let Some(end) = rest.find(char::is_whitespace) else {
            break;
        };
        rest =
            rest[end..].trim_start_matches(|c: char| c.is_whitespace() || c.is_ascii_punctuation());
        if rest.is_empty() {
            break;
        }
        rests.push(rest);
    }
    if rests.is_empty() {
        return None;
    }
    let mut texts = vec![transcript.to_owned()];
    texts.extend(rests.iter().map(|r| format!("{said}, {r}")));
    let scores = fits(&texts)?;
    let (best, score) = scores
        .iter()
        .enumerate()
        .skip(1)
        .max_by(|a, b| a.1.total_cmp(b.1))?;
    Some(((scores[0] - score).max(0.0), rests[best - 1]))
}

/// `WakeWord::said_first` for `phrase`.
fn said_first_of<'a>(
    phrase: &str,
    transcript: &'a str,
    fits: impl FnOnce(&[String]) -> Option<Vec<f32>>,
    margin: f32,
) -> Option<&'a str> {
    let (worse_by, request) = phrase_fit_of(phrase, transcript, fits)?;
    (worse_by <= margin).then_some(request)
}

/// The words of a classifier's name: "hey_jarvis_v0.1" → "hey jarvis".
fn phrase_of(name: &str) -> String {
    name.split('_')
        .take_while(|w| !(w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit())))
        .collect::<Vec<_>>()
        .join(" ")
}

fn strip_phrase<'a>(phrase: &str, text: &'a str) -> &'a str {
    let letters = |t: &str| -> String {
        t.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let said = letters(phrase);
    let n = phrase.split_whitespace().count();
    // The first k words (k up to two more than the phrase has) whose
    // letters are nearest the phrase's, near enough: whisper writes an
    // unknown name its own way ("A Jarvis", "Stay Jarvis", "Hey, Jarvus").
    let mut best: Option<(f64, usize)> = None;
    let mut end = 0;
    let mut prefix = String::new();
    for _ in 0..n + 2 {
        let rest = &text[end..];
        let Some(start) = rest.find(|c: char| !c.is_whitespace()) else {
            break;
        };
        let len = rest[start..]
            .find(char::is_whitespace)
            .unwrap_or(rest.len() - start);
        end += start + len;
        prefix.push_str(&letters(&rest[start..start + len]));
        let near = strsim::normalized_levenshtein(&said, &prefix);
        if near >= 0.6 && best.is_none_or(|(b, _)| near > b) {
            best = Some((near, end));
        }
    }
    match best {
        Some((_, end)) => {
            text[end..].trim_start_matches(|c: char| c.is_whitespace() || c.is_ascii_punctuation())
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A score that stays high is heard once; heard again only after
    /// `REFRACTORY_MS`.
    #[test]
    fn a_phrase_is_heard_once_however_long_its_score_stays_high() {
        let steps: Vec<Heard> = [0.1, 0.6, 0.9, 0.95, 0.7, 0.2]
            .iter()
            .chain([0.8; 30].iter())
            .enumerate()
            .map(|(i, &score)| Heard {
                at_ms: i as u64 * 80,
                score,
            })
            .collect();
        assert_eq!(heard_at(&steps, 0.5), vec![80, 2_080]);
        assert_eq!(times_heard(&steps, 0.92), 1);
        assert_eq!(times_heard(&steps, 0.99), 0);
    }

    /// Whisper's check: the phrase written at the start passes unscored;
    /// written its own way, it passes where the phrase in place of the
    /// first words fits the speech within the margin.
    #[test]
    fn the_phrase_must_fit_the_start_of_the_speech() {
        fn wake_phrase(
            t: &str,
            scores: Option<Vec<f32>>,
            margin: f32,
        ) -> (Option<&str>, Vec<String>) {
            let texts = std::cell::RefCell::new(Vec::new());
            let said = said_first_of(
                "hey jarvis",
                t,
                |x: &[String]| {
                    texts.replace(x.to_vec());
                    scores
                },
                margin,
            );
            (said, texts.into_inner())
        }
        let (said, asked) = wake_phrase("Hey Jarvis, lock the door.", None, 3.0);
        assert_eq!(said, Some("lock the door."));
        assert!(asked.is_empty());
        // "A jar of this, lock the door": its phrase in place of 1..4 words.
        let (said, asked) = wake_phrase(
            "A jar of this, lock the door.",
            Some(vec![-10.0, -30.0, -25.0, -20.0, -11.5]),
            3.0,
        );
        assert_eq!(said, Some("lock the door."));
        assert_eq!(asked[4], "Hey Jarvis, lock the door.");
        assert_eq!(asked.len(), 5);
        // Not said: every reading with the phrase fits far worse.
        let (said, _) = wake_phrase(
            "Make the kitchen cabinets brighter.",
            Some(vec![-8.0, -20.0, -22.0, -25.0, -30.0]),
            3.0,
        );
        assert_eq!(said, None);
        // No scores (no model): not taken for said.
        assert_eq!(wake_phrase("Make it brighter.", None, 3.0).0, None);
    }

    #[test]
    fn the_phrase_comes_from_the_name_and_leaves_what_follows_it() {
        assert_eq!(phrase_of("hey_jarvis_v0.1"), "hey jarvis");
        assert_eq!(phrase_of("alexa_v0.1"), "alexa");
        assert_eq!(
            strip_phrase("hey jarvis", "Hey, Jarvis. Turn on the lights."),
            "Turn on the lights."
        );
        assert_eq!(
            strip_phrase("hey jarvis", "Hey Jarvus turn on the lights"),
            "turn on the lights"
        );
        assert_eq!(strip_phrase("hey jarvis", "Hey Jarvis."), "");
        assert_eq!(
            strip_phrase("alexa", "Alexa, what time is it?"),
            "what time is it?"
        );
        // Words of the request stay, however they start.
        assert_eq!(
            strip_phrase("hey jarvis", "turn on the lights"),
            "turn on the lights"
        );
        // As whisper writes a name it does not know.
        assert_eq!(
            strip_phrase("hey jarvis", "A Jarvis, turn off the bedroom lamp."),
            "turn off the bedroom lamp."
        );
        assert_eq!(
            strip_phrase("hey jarvis", "Stay Jarvis, lock the front door."),
            "lock the front door."
        );
        assert_eq!(strip_phrase("hey jarvis", "Jarvis, lock it"), "lock it");
        assert_eq!(strip_phrase("alexa", "Alex, lock it"), "lock it");
        // Speech that does not start with it is left whole.
        for whole in [
            "Make the kitchen cabinet slider.",
            "Switch off every single light in the phone.",
            "Hey, turn on the lights",
            "A jar of jam",
        ] {
            assert_eq!(strip_phrase("hey jarvis", whole), whole);
        }
        assert_eq!(
            with_phrase(
                "Turn the lights off. Lights on.",
                "openwakeword-0.5.1/hey_jarvis_v0.1.onnx"
            ),
            "Hey Jarvis, turn the lights off. Lights on."
        );
        assert_eq!(with_phrase("", "hey_jarvis_v0.1.onnx"), "");
        assert_eq!(with_phrase("Lights on.", ""), "Lights on.");
    }
}
