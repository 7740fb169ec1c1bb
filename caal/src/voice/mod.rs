//! Voice: WAV and streamed PCM in, utterances found, transcribed in-process
//! by whisper, kept as hashed audio artifacts, and spoken replies out.
//!
//! `audio` decodes and resamples, `vad` finds utterances, `stt` transcribes
//! (whisper.cpp, cargo feature `whisper`), `convert` turns the CTranslate2
//! model the setup fetches into whisper.cpp's ggml file, `store` keeps the
//! clips, `tts` speaks (the Piper voice, `piper`, on ONNX Runtime, `onnx`;
//! espeak-ng as the fallback), `wake` hears a wake word (openWakeWord's
//! models, off by default), `livekit` mints room tokens and checks
//! LiveKit's webhooks. `Engine::voice_round` (round/voice.rs) runs a round
//! from what was heard.

pub mod audio;
pub mod convert;
pub mod livekit;
pub mod onnx;
pub mod piper;
pub mod silero;
pub mod store;
pub mod stt;
pub mod tts;
pub mod vad;
pub mod wake;

#[cfg(test)]
mod tests;

pub use audio::{AudioError, Clip};
pub use store::AudioArtifact;
pub use stt::{Stt, SttError, Transcript};
pub use vad::{Utterance, Vad, VadEvent};
