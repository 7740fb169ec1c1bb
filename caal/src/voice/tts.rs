//! Spoken replies: espeak-ng, as a WAV.

use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    #[error(
        "cannot run espeak-ng ({0}); install it (`bash .ci/setup` does) or set voice.tts_voice = \"\""
    )]
    Missing(std::io::Error),
    #[error("espeak-ng failed: {0}")]
    Failed(String),
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
