//! Spoken replies: the Piper voice (`piper`) where it is installed, else
//! espeak-ng; a piece at a time (`pieces`), so the first audio goes out
//! while the rest is still being spoken and a long text is never one long
//! buffer.

use std::{
    path::Path,
    process::{Command, Stdio},
};

use super::piper;

/// Who speaks CAAL's replies.
pub enum Speaker {
    /// The Piper voice (natural speech, 22,050 Hz for the default voice).
    Piper(piper::Voice),
    /// espeak-ng in this voice (22,050 Hz), when no Piper voice can be had.
    Espeak(String),
    /// Nobody: `voice.tts_voice` and `voice.piper` are both empty.
    Silent,
}

impl Speaker {
    /// The Piper voice at `model` (a path in or under the models dir) on
    /// ONNX Runtime at `library`, else espeak-ng in `espeak_voice` (the
    /// fallback; why the voice could not be had is logged once).
    pub fn load(model: &Path, library: &Path, espeak_voice: &str, threads: usize) -> Self {
        if !model.as_os_str().is_empty() {
            match piper::Voice::load(model, library, threads) {
                Ok(voice) => return Speaker::Piper(voice),
                Err(e) => {
                    let said = crate::safety::global().scrub(&e.to_string()).into_owned();
                    tracing::warn!(error = %said, "the Piper voice is not at hand; replies are spoken by espeak-ng");
                }
            }
        }
        if espeak_voice.is_empty() {
            Speaker::Silent
        } else {
            Speaker::Espeak(espeak_voice.to_owned())
        }
    }

    /// What speaks, as its Wyoming program and voice are named.
    pub fn name(&self) -> (&'static str, &str) {
        match self {
            Speaker::Piper(v) => ("piper", v.name.as_str()),
            Speaker::Espeak(voice) => ("espeak-ng", voice.as_str()),
            Speaker::Silent => ("none", ""),
        }
    }

    /// Samples per second of what it speaks.
    pub fn rate(&self) -> u32 {
        match self {
            Speaker::Piper(v) => v.rate(),
            _ => ESPEAK_RATE,
        }
    }

    /// One piece (see `pieces`) spoken, at `rate()`.
    pub fn speak(&self, piece: &str) -> Result<Vec<f32>, TtsError> {
        match self {
            Speaker::Piper(v) => v.speak(piece).map_err(|e| TtsError::Failed(e.to_string())),
            Speaker::Espeak(voice) => samples_of(&speak(piece, voice)?),
            Speaker::Silent => Ok(Vec::new()),
        }
    }

    /// All of `text`, piece by piece, as one WAV at `rate()`.
    pub fn speak_wav(&self, text: &str) -> Result<Vec<u8>, TtsError> {
        let mut samples = Vec::new();
        for piece in pieces(text) {
            samples.extend(self.speak(piece)?);
        }
        Ok(super::audio::encode_wav_at(&samples, self.rate()))
    }
}

/// espeak-ng's rate.
const ESPEAK_RATE: u32 = 22_050;

/// A 16-bit WAV's samples as they are (no resampling).
fn samples_of(wav: &[u8]) -> Result<Vec<f32>, TtsError> {
    let reader = hound::WavReader::new(std::io::Cursor::new(wav))
        .map_err(|e| TtsError::Failed(format!("espeak-ng's WAV: {e}")))?;
    reader
        .into_samples::<i16>()
        .map(|s| s.map(|s| f32::from(s) / 32_768.0))
        .collect::<Result<_, _>>()
        .map_err(|e| TtsError::Failed(format!("espeak-ng's WAV: {e}")))
}

#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    #[error(
        "cannot run espeak-ng ({0}); install it (`bash .ci/setup` does) or set voice.tts_voice = \"\""
    )]
    Missing(std::io::Error),
    #[error("espeak-ng failed: {0}")]
    Failed(String),
}

/// The most text one request may have spoken (about four minutes of
/// speech); more is refused by name rather than buffered.
pub const MAX_CHARS: usize = 4_000;

/// A piece of speech is at most this many characters.
const PIECE_CHARS: usize = 300;

/// `text` in the pieces it is spoken in, one after another, so a long text
/// never becomes one long buffer: its sentences, and a sentence longer than
/// a piece cut before a word that would take it over. Offsets come from
/// `char_indices`, so no piece ends inside a character.
pub fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut last_space = None;
    for (i, c) in text.char_indices() {
        let end = i + c.len_utf8();
        if c.is_whitespace() {
            last_space = Some(i);
        }
        let sentence_ends = matches!(c, '.' | '!' | '?' | ';' | '\n')
            && text[end..].chars().next().is_none_or(char::is_whitespace);
        if sentence_ends {
            out.push(&text[start..end]);
            start = end;
            last_space = None;
        } else if end - start > PIECE_CHARS {
            let cut = last_space.filter(|&s| s > start).unwrap_or(i);
            out.push(&text[start..cut]);
            start = cut;
            last_space = None;
        }
    }
    out.push(&text[start..]);
    out.retain(|p| !p.trim().is_empty());
    out
}

/// `text` spoken by espeak-ng in `voice`, as WAV bytes. The text is passed
/// as an argument after `--`, never through a shell.
pub fn speak(text: &str, voice: &str) -> Result<Vec<u8>, TtsError> {
    let out = Command::new("espeak-ng")
        .args(["-v", voice, "--stdout", "--"])
        .arg(text)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(TtsError::Missing)?;
    if !out.status.success() || out.stdout.len() < 44 {
        return Err(TtsError::Failed(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(fix_sizes(out.stdout))
}

/// espeak-ng writing to a pipe cannot go back to fill in the RIFF and
/// `data` sizes, and leaves placeholders; a WAV reader would take the clip
/// for truncated. Sets both from the bytes there are.
fn fix_sizes(mut wav: Vec<u8>) -> Vec<u8> {
    let len = wav.len();
    if len < 12 || &wav[0..4] != b"RIFF" || &wav[8..12] != b"WAVE" {
        return wav;
    }
    wav[4..8].copy_from_slice(&u32::try_from(len - 8).unwrap_or(u32::MAX).to_le_bytes());
    let mut at = 12;
    while at + 8 <= len {
        let size =
            u32::from_le_bytes([wav[at + 4], wav[at + 5], wav[at + 6], wav[at + 7]]) as usize;
        if &wav[at..at + 4] == b"data" {
            let actual = u32::try_from(len - at - 8).unwrap_or(u32::MAX);
            wav[at + 4..at + 8].copy_from_slice(&actual.to_le_bytes());
            break;
        }
        at += 8 + size + (size & 1);
    }
    wav
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_spoken_in_bounded_pieces_that_keep_every_word() {
        let said = "The kitchen lights are on. Is that all? ";
        assert_eq!(
            pieces(said),
            ["The kitchen lights are on.", " Is that all?"]
        );
        assert_eq!(pieces("3.5 degrees"), ["3.5 degrees"]);
        // No full stop in 20,000 characters of words, some of several bytes.
        let long = "émincé ｙｅｓ kitchen ".repeat(1_000);
        let cut = pieces(&long);
        assert!(cut.len() > 60, "{}", cut.len());
        assert!(
            cut.iter().all(|p| p.len() <= PIECE_CHARS + 4),
            "a piece too long"
        );
        assert_eq!(cut.concat().trim_end(), long.trim_end());
        // One word longer than a piece is cut inside it, at a character.
        let word = "ж".repeat(1_000);
        assert_eq!(pieces(&word).concat(), word);
    }
}
