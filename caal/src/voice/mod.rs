//! Voice: WAV and streamed PCM in, utterances found, transcribed in-process
//! by whisper, kept as hashed audio artifacts, and spoken replies out.
//!
//! `audio` decodes and resamples, `vad` finds utterances, `stt` transcribes
//! (whisper.cpp, cargo feature `whisper`), `convert` turns the CTranslate2
//! model the setup fetches into whisper.cpp's ggml file, `store` keeps the
//! clips, `tts` speaks with espeak-ng, `livekit` mints room tokens and checks
//! LiveKit's webhooks. `Engine::voice_round` (round/voice.rs) runs a round
//! from what was heard.

pub mod audio;
#[cfg(feature = "whisper")]
pub mod bench;
pub mod convert;
pub mod livekit;
pub mod store;
pub mod stt;
pub mod tts;
pub mod vad;

#[cfg(test)]
mod tests;

pub use audio::{AudioError, Clip};
pub use store::AudioArtifact;
pub use stt::{Stt, SttError, Transcript};
pub use vad::{Utterance, Vad, VadEvent};

/// Why a voice round could not run.
#[derive(Debug, thiserror::Error)]
pub enum VoiceError {
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Stt(#[from] SttError),
    #[error(transparent)]
    Round(#[from] crate::round::RoundError),
    #[error(transparent)]
    Store(#[from] crate::trace::StoreError),
    #[error("no audio {id}; `caal audio list` shows the audio ids")]
    NoSuchAudio { id: String },
}

/// One utterance heard and what came of it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Heard {
    pub start_ms: u64,
    pub end_ms: u64,
    pub transcript: Transcript,
    /// None when the transcript held no speech (nothing worth a round, and
    /// no audio kept for it).
    pub round: Option<crate::round::RoundResult>,
    pub audio_id: Option<String>,
    pub audio_sha256: Option<String>,
}

/// A clip heard: the artifact kept (none if nothing in it was speech) and
/// each utterance's round.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Listened {
    pub audio: Option<AudioArtifact>,
    pub utterances: Vec<Heard>,
}
