//! Voice activity detection: where speech starts and ends in a stream.
//!
//! Energy against an adaptive noise floor, in 30 ms frames: a frame is
//! speech when it is louder than an absolute floor and than the noise floor
//! by a margin. An utterance starts after `min_speech_ms` of speech (a click
//! is not one), keeps `pre_roll_ms` before it (the start of a word is quiet)
//! and ends after `silence_ms` of quiet, or at `max_utterance_ms`.
//!
//! Loud is not enough: a fan, rain or a hiss is loud too, and whisper
//! turns such noise into words ("I'm", "you"). Voiced speech crosses zero
//! rarely (its energy is in the low hundreds of hertz); noise crosses it
//! about every other sample. An utterance with less than `min_voiced_ms` of
//! loud, rarely-crossing frames is dropped as noise.
//!
//! Where Silero VAD is installed (`voice.vad.model`), it judges each 32 ms
//! chunk instead ([`Detector::Silero`]): speech starts where its
//! probability reaches `voice.vad.threshold` and goes on until it falls
//! below that less 0.15 (its own wrapper's hysteresis), so speech in noise
//! is neither cut nor taken for noise. The same pre-roll, minimum speech
//! and trailing silence frame it; energy stays the fallback.

use std::sync::Arc;

use super::{
    audio::RATE,
    silero::{self, Silero},
};
use crate::config::VadConfig;

/// Samples of a frame the energy detector judges (30 ms).
const ENERGY_FRAME: usize = (RATE as usize) * 30 / 1000;

/// How a frame is judged speech.
#[derive(Clone, Default)]
pub enum Detector {
    /// Energy against an adaptive noise floor, voiced by its zero
    /// crossings, in 30 ms frames.
    #[default]
    Energy,
    /// Silero VAD's probability, in 32 ms chunks.
    Silero(Arc<Silero>),
}

impl Detector {
    fn frame_len(&self) -> usize {
        match self {
            Detector::Energy => ENERGY_FRAME,
            Detector::Silero(_) => silero::CHUNK,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Detector::Energy => "energy",
            Detector::Silero(_) => "silero",
        }
    }
}

/// One utterance found in a stream, with where it was.
#[derive(Clone, Debug, PartialEq)]
pub struct Utterance {
    pub start_ms: u64,
    pub end_ms: u64,
    pub samples: Vec<f32>,
}

/// What a push of audio changed.
#[derive(Clone, Debug, PartialEq)]
pub enum VadEvent {
    /// Speech began (partial transcripts may follow).
    Started { at_ms: u64 },
    /// Speech ended: the utterance, ready to transcribe.
    Ended(Utterance),
    /// What started was loud but not voiced (noise): nothing to transcribe.
    Dropped { at_ms: u64 },
}

/// Zero crossings per sample above which a frame is not voiced speech.
const VOICED_MAX_ZCR: f32 = 0.25;

/// A streaming detector: push 16 kHz mono samples as they arrive.
pub struct Vad {
    cfg: VadConfig,
    detector: Detector,
    /// Silero's state for this stream.
    stream: silero::Stream,
    /// Samples a frame (the detector's).
    frame_len: usize,
    pending: Vec<f32>,
    /// Recent frames before speech began, kept for the pre-roll.
    history: std::collections::VecDeque<Vec<f32>>,
    noise_db: f32,
    frames_seen: u64,
    speech_run: usize,
    /// Voiced frames in `speech_run`, then in the utterance.
    voiced: usize,
    silence_run: usize,
    utterance: Option<(u64, Vec<f32>)>,
}

impl Vad {
    /// A detector judging by energy (see the module doc).
    pub fn new(cfg: VadConfig) -> Self {
        Self::with(cfg, Detector::Energy)
    }

    /// A detector judging by `detector`.
    pub fn with(cfg: VadConfig, detector: Detector) -> Self {
        let frame_len = detector.frame_len();
        Self {
            cfg,
            detector,
            stream: silero::Stream::default(),
            frame_len,
            pending: Vec::with_capacity(frame_len),
            history: std::collections::VecDeque::new(),
            noise_db: -60.0,
            frames_seen: 0,
            speech_run: 0,
            voiced: 0,
            silence_run: 0,
            utterance: None,
        }
    }

    /// Whether an utterance is under way.
    pub fn in_speech(&self) -> bool {
        self.utterance.is_some()
    }

    /// Speech under way has gone quiet: it may be about to end.
    pub fn pausing(&self) -> bool {
        self.utterance.is_some() && self.silence_run > 0
    }

    /// The utterance heard so far (for a partial transcript).
    pub fn current(&self) -> Option<&[f32]> {
        self.utterance.as_ref().map(|(_, s)| s.as_slice())
    }

    /// Milliseconds of a frame.
    fn frame_ms(&self) -> u64 {
        self.frame_len as u64 * 1000 / u64::from(RATE)
    }

    /// Frames in `ms` (at least one).
    fn frames(&self, ms: u32) -> usize {
        (u64::from(ms).div_ceil(self.frame_ms()) as usize).max(1)
    }

    fn at_ms(&self) -> u64 {
        self.frames_seen * self.frame_ms()
    }

    pub fn push(&mut self, samples: &[f32]) -> Vec<VadEvent> {
        let mut events = Vec::new();
        let mut rest = samples;
        while !rest.is_empty() {
            let take = (self.frame_len - self.pending.len()).min(rest.len());
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.pending.len() == self.frame_len {
                let frame =
                    std::mem::replace(&mut self.pending, Vec::with_capacity(self.frame_len));
                self.frame(frame, &mut events);
            }
        }
        events
    }

    /// The stream ended: an utterance under way ends here.
    pub fn finish(&mut self) -> Option<Utterance> {
        let pending = std::mem::take(&mut self.pending);
        let (start, mut samples) = self.utterance.take()?;
        if !self.was_voiced() {
            return None;
        }
        samples.extend_from_slice(&pending);
        Some(Utterance {
            start_ms: start,
            end_ms: self.at_ms(),
            samples,
        })
    }

    fn was_voiced(&self) -> bool {
        self.voiced >= self.frames(self.cfg.min_voiced_ms)
    }

    /// Whether a frame is speech (`loud`: the utterance goes on) and voiced
    /// speech (it counts toward `min_voiced_ms`), and its level in dB.
    fn judge(&mut self, frame: &[f32]) -> (bool, bool, f32) {
        let energy = frame.iter().map(|s| s * s).sum::<f32>() / frame.len() as f32;
        let db = 10.0 * energy.max(1e-12).log10();
        let above_floor = db > self.cfg.threshold_db && db > self.noise_db + self.cfg.snr_db;
        match &self.detector {
            Detector::Energy => {
                let loud = above_floor;
                let crossings = frame
                    .windows(2)
                    .filter(|w| (w[0] >= 0.0) != (w[1] >= 0.0))
                    .count();
                let voiced = loud && (crossings as f32 / frame.len() as f32) < VOICED_MAX_ZCR;
                (loud, voiced, db)
            }
            Detector::Silero(model) => {
                let p = match model.probability(&mut self.stream, frame) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(error = %e, "Silero VAD failed on a chunk; taken as silence");
                        0.0
                    }
                };
                let threshold = self.cfg.threshold;
                // Speech starts on Silero's word alone (noise never starts
                // it); once speaking, it goes on until Silero is clearly
                // below and the frame is as quiet as the room: Silero dips
                // for a breath or a voiceless sound between words ("lights
                // | and"), where there is still sound.
                let speaking = self.utterance.is_some();
                let floor = if speaking {
                    threshold - 0.15
                } else {
                    threshold
                };
                (p >= floor || (speaking && above_floor), p >= threshold, db)
            }
        }
    }

    fn frame(&mut self, frame: Vec<f32>, events: &mut Vec<VadEvent>) {
        let (loud, voiced, db) = self.judge(&frame);
        self.frames_seen += 1;
        let (ends_after, keep_silence) = (self.frames(self.cfg.silence_ms), self.frames(150));
        if let Some((start, samples)) = &mut self.utterance {
            samples.extend_from_slice(&frame);
            self.voiced += usize::from(voiced);
            self.silence_run = if loud { 0 } else { self.silence_run + 1 };
            let long = samples.len() as u64 * 1000 / u64::from(RATE)
                >= u64::from(self.cfg.max_utterance_ms);
            if self.silence_run >= ends_after || long {
                let start = *start;
                let mut samples = std::mem::take(samples);
                // Keep a little of the silence: whisper hears the word end.
                let trailing = self.silence_run.saturating_sub(keep_silence) * self.frame_len;
                samples.truncate(samples.len() - trailing.min(samples.len()));
                self.utterance = None;
                self.silence_run = 0;
                self.speech_run = 0;
                let voiced = self.was_voiced();
                self.voiced = 0;
                events.push(if voiced {
                    VadEvent::Ended(Utterance {
                        start_ms: start,
                        end_ms: self.at_ms(),
                        samples,
                    })
                } else {
                    VadEvent::Dropped {
                        at_ms: self.at_ms(),
                    }
                });
            }
            return;
        }
        if loud {
            self.speech_run += 1;
            self.voiced += usize::from(voiced);
        } else {
            self.speech_run = 0;
            self.voiced = 0;
            // The floor follows quiet quickly down and slowly up.
            self.noise_db = if db < self.noise_db {
                db
            } else {
                self.noise_db + 0.05 * (db - self.noise_db)
            };
        }
        self.history.push_back(frame);
        let keep = self.frames(self.cfg.pre_roll_ms) + self.frames(self.cfg.min_speech_ms);
        while self.history.len() > keep {
            self.history.pop_front();
        }
        if self.speech_run >= self.frames(self.cfg.min_speech_ms) {
            let samples: Vec<f32> = self.history.drain(..).flatten().collect();
            let start = self
                .at_ms()
                .saturating_sub(samples.len() as u64 * 1000 / u64::from(RATE));
            events.push(VadEvent::Started { at_ms: start });
            self.utterance = Some((start, samples));
            self.silence_run = 0;
        }
    }
}

/// Every utterance in a whole clip, judged by energy.
pub fn split(samples: &[f32], cfg: &VadConfig) -> Vec<Utterance> {
    split_with(samples, cfg, Detector::Energy)
}

/// Every utterance in a whole clip, judged by `detector`.
pub fn split_with(samples: &[f32], cfg: &VadConfig, detector: Detector) -> Vec<Utterance> {
    let mut vad = Vad::with(cfg.clone(), detector);
    let mut out: Vec<Utterance> = vad
        .push(samples)
        .into_iter()
        .filter_map(|e| match e {
            VadEvent::Ended(u) => Some(u),
            VadEvent::Started { .. } | VadEvent::Dropped { .. } => None,
        })
        .collect();
    out.extend(vad.finish());
    out
}
