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

use super::audio::RATE;
use crate::config::VadConfig;

const FRAME: usize = (RATE as usize) * 30 / 1000;

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

fn frames(ms: u32) -> usize {
    (ms as usize).div_ceil(30).max(1)
}

impl Vad {
    pub fn new(cfg: VadConfig) -> Self {
        Self {
            cfg,
            pending: Vec::with_capacity(FRAME),
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

    fn at_ms(&self) -> u64 {
        self.frames_seen * 30
    }

    pub fn push(&mut self, samples: &[f32]) -> Vec<VadEvent> {
        let mut events = Vec::new();
        let mut rest = samples;
        while !rest.is_empty() {
            let take = (FRAME - self.pending.len()).min(rest.len());
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.pending.len() == FRAME {
                let frame = std::mem::replace(&mut self.pending, Vec::with_capacity(FRAME));
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
        self.voiced >= frames(self.cfg.min_voiced_ms)
    }

    fn frame(&mut self, frame: Vec<f32>, events: &mut Vec<VadEvent>) {
        let energy = frame.iter().map(|s| s * s).sum::<f32>() / frame.len() as f32;
        let db = 10.0 * energy.max(1e-12).log10();
        let loud = db > self.cfg.threshold_db && db > self.noise_db + self.cfg.snr_db;
        let crossings = frame
            .windows(2)
            .filter(|w| (w[0] >= 0.0) != (w[1] >= 0.0))
            .count();
        let voiced = loud && (crossings as f32 / frame.len() as f32) < VOICED_MAX_ZCR;
        self.frames_seen += 1;
        if let Some((start, samples)) = &mut self.utterance {
            samples.extend_from_slice(&frame);
            self.voiced += usize::from(voiced);
            self.silence_run = if loud { 0 } else { self.silence_run + 1 };
            let long = samples.len() as u64 * 1000 / u64::from(RATE)
                >= u64::from(self.cfg.max_utterance_ms);
            if self.silence_run >= frames(self.cfg.silence_ms) || long {
                let start = *start;
                let mut samples = std::mem::take(samples);
                // Keep a little of the silence: whisper hears the word end.
                let trailing = self.silence_run.saturating_sub(frames(150)) * FRAME;
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
        let keep = frames(self.cfg.pre_roll_ms) + frames(self.cfg.min_speech_ms);
        while self.history.len() > keep {
            self.history.pop_front();
        }
        if self.speech_run >= frames(self.cfg.min_speech_ms) {
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

/// Every utterance in a whole clip.
pub fn split(samples: &[f32], cfg: &VadConfig) -> Vec<Utterance> {
    let mut vad = Vad::new(cfg.clone());
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
