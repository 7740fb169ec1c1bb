//! Voice rounds: what was heard, with the audio's hash, becomes a round;
//! the audio kept is swept when its time is up; LiveKit's room events are
//! recorded once their signature holds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::{Channel, Engine, OPERATOR_CONVERSATION, RoundError, RoundResult, Steps};
use crate::auth::Origin;
use crate::ids::{AudioId, ConversationId};
use crate::router::Intent;
use crate::trace::{
    EventDraft, EventStatus, OpenRound, StoreError,
    events::{AudioRetention, LivekitWebhook, OutputEmitted, ValidatorRan},
};
use crate::voice::{
    AudioArtifact, Clip, Stt, SttError, Transcript, audio, store, stt, tts::Speaker, vad,
};

/// Why a voice round could not run.
#[derive(Debug, thiserror::Error)]
pub enum VoiceError {
    #[error(transparent)]
    Audio(#[from] crate::voice::AudioError),
    #[error(transparent)]
    Stt(#[from] SttError),
    #[error(transparent)]
    Round(#[from] RoundError),
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
    pub round: Option<RoundResult>,
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

/// Said when a governed command was heard too unsurely to confirm.
pub const SAY_AGAIN: &str =
    "Sorry, I'm not sure I heard that right, and it needs your confirmation. Please say it again.";

/// A round's audio: the clip it came from and what whisper made of it.
pub struct VoiceInput {
    pub audio_id: AudioId,
    pub audio_sha256: String,
    pub transcript: Transcript,
    /// The speech it was heard in (16 kHz mono), to weigh other readings
    /// of a mishearing against.
    pub samples: Option<Arc<[f32]>>,
}

/// The engine's voice parts: where audio goes, where models are, and the
/// whisper model once loaded.
pub(crate) struct VoiceParts {
    audio_dir: PathBuf,
    pub(crate) models_dir: PathBuf,
    stt: Mutex<Option<Arc<Stt>>>,
    /// Who speaks replies, loaded the first time one is spoken.
    speaker: std::sync::OnceLock<Arc<Speaker>>,
    /// What judges speech, loaded the first time audio is heard.
    detector: std::sync::OnceLock<vad::Detector>,
    /// The wake word (`voice.wake.model`), loaded the first time a stream
    /// asks for it; why it could not be, if so.
    wake: std::sync::OnceLock<Result<Option<Arc<crate::voice::wake::WakeWord>>, String>>,
}

impl VoiceParts {
    pub(crate) fn new(audio_dir: PathBuf, models_dir: PathBuf) -> Self {
        Self {
            audio_dir,
            models_dir,
            stt: Mutex::new(None),
            speaker: std::sync::OnceLock::new(),
            detector: std::sync::OnceLock::new(),
            wake: std::sync::OnceLock::new(),
        }
    }
}

/// A path as configured: absolute as it is, else in the models dir; empty stays empty.
fn in_models(models_dir: &Path, configured: &str) -> PathBuf {
    if configured.is_empty() {
        PathBuf::new()
    } else {
        models_dir.join(configured)
    }
}

/// What an operator does to kept audio.
#[derive(Clone, Debug)]
pub enum AudioAction {
    Pin(String),
    Unpin(String),
    /// Delete expired, unpinned files (or only list them: `dry_run`).
    Sweep {
        dry_run: bool,
    },
}

/// What a sweep, pin or unpin did.
#[derive(Clone, Debug, Serialize)]
pub struct RetentionReport {
    pub action: String,
    pub audio_ids: Vec<String>,
    pub bytes_freed: u64,
    /// Pinned clips past their time, kept.
    pub kept_pinned: u64,
    pub dry_run: bool,
    pub round_id: Option<String>,
}

/// Whisper's names for what is not speech ("[BLANK_AUDIO]", "(music)").
fn speech_in(text: &str) -> Option<String> {
    let mut kept = String::with_capacity(text.len());
    let (mut depth, mut starred) = (0i32, false);
    for c in text.chars() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth = (depth - 1).max(0),
            '*' => starred = !starred,
            _ if depth == 0 && !starred => kept.push(c),
            _ => {}
        }
    }
    let kept = kept.trim().to_owned();
    kept.chars().any(char::is_alphanumeric).then_some(kept)
}

impl Engine {
    pub fn models_dir(&self) -> &Path {
        &self.voice.models_dir
    }

    pub fn audio_dir(&self) -> &Path {
        &self.voice.audio_dir
    }

    /// The whisper model, loaded on first use (converted first from the
    /// fetched CTranslate2 model if it is not there yet).
    /// Who speaks replies: the Piper voice where it is installed, else
    /// espeak-ng (loaded once, the first time a reply is spoken).
    pub fn speaker(&self) -> Arc<Speaker> {
        self.voice
            .speaker
            .get_or_init(|| {
                let cfg = &self.config.voice;
                let models = &self.voice.models_dir;
                Arc::new(Speaker::load(
                    &in_models(models, &cfg.piper),
                    &in_models(models, &cfg.onnxruntime),
                    &cfg.tts_voice,
                    cfg.threads.max(1),
                ))
            })
            .clone()
    }

    /// What judges speech in audio: Silero VAD where installed, else
    /// energy (why Silero could not be had is logged once).
    pub fn vad_detector(&self) -> vad::Detector {
        self.voice
            .detector
            .get_or_init(|| {
                let cfg = &self.config.voice;
                let model = in_models(&self.voice.models_dir, &cfg.vad.model);
                if model.as_os_str().is_empty() {
                    return vad::Detector::Energy;
                }
                let library = in_models(&self.voice.models_dir, &cfg.onnxruntime);
                match crate::voice::silero::Silero::load(&model, &library) {
                    Ok(silero) => vad::Detector::Silero(Arc::new(silero)),
                    Err(e) => {
                        tracing::warn!(error = %e, "Silero VAD is not at hand; speech is found by energy");
                        vad::Detector::Energy
                    }
                }
            })
            .clone()
    }

    /// The configured wake word: None when `voice.wake.model` is empty;
    /// an error naming the fix when it cannot be loaded.
    pub fn wake_word(&self) -> Result<Option<Arc<crate::voice::wake::WakeWord>>, String> {
        self.voice
            .wake
            .get_or_init(|| {
                let cfg = &self.config.voice;
                if cfg.wake.model.is_empty() {
                    return Ok(None);
                }
                let models = &self.voice.models_dir;
                crate::voice::wake::WakeWord::load(
                    &in_models(models, &cfg.wake.model),
                    &in_models(models, &cfg.onnxruntime),
                )
                .map(|w| Some(Arc::new(w)))
                .map_err(|e| {
                    format!("the wake word (voice.wake.model) cannot be loaded: {e}; `bash .ci/setup` installs openWakeWord's models, or set voice.wake.model = \"\"")
                })
            })
            .clone()
    }

    /// A detector of speech for one stream.
    pub fn vad(&self) -> vad::Vad {
        vad::Vad::with(self.config.voice.vad.clone(), self.vad_detector())
    }

    pub fn stt(&self) -> Result<Arc<Stt>, SttError> {
        let mut slot = self.voice.stt.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(stt) = slot.as_ref() {
            return Ok(stt.clone());
        }
        if !stt::BUILT_IN {
            return Err(SttError::NotBuilt);
        }
        // Whisper is told what people say here, with the home's words.
        let mut cfg = self.config.voice.clone();
        cfg.prompt = stt::prompt_for(&cfg, self.router.home());
        let cfg = &cfg;
        stt::install(cfg, &self.voice.models_dir, false)?;
        let loaded = Arc::new(Stt::load(
            &stt::model_path(cfg, &self.voice.models_dir),
            cfg,
        )?);
        *slot = Some(loaded.clone());
        Ok(loaded)
    }

    /// How well other words fit a voice round's speech, for the router to
    /// weigh readings of a mishearing with (when `understand.sounds.listen`
    /// says so): the model that heard it scores them. None without the
    /// samples or a loaded model; a failure to score is logged and weighs
    /// nothing.
    pub(super) fn listening(&self, voice: &VoiceInput) -> Option<crate::understand::Listen> {
        let samples = voice.samples.clone()?;
        let stt = self
            .voice
            .stt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        Some(crate::understand::Listen::new(move |texts| {
            stt.score(&samples, texts)
                .map_err(|e| tracing::warn!(error = %e, "weighing readings against the audio"))
                .ok()
        }))
    }

    /// The speech in a transcript, if it was heard surely enough to be
    /// speech (`voice.min_speech_confidence`) and holds more than whisper's
    /// names for noise; None: nothing worth a round or keeping its audio.
    pub fn speech_of(&self, transcript: &Transcript) -> Option<String> {
        let heard_surely = transcript.confidence >= self.config.voice.min_speech_confidence;
        speech_in(&transcript.text).filter(|_| heard_surely)
    }

    /// Keeps streamed speech (16 kHz mono samples, as the voice socket and
    /// the Wyoming door receive it) as a 16-bit WAV, like a clip.
    pub fn keep_streamed(&self, samples: &[f32]) -> Result<AudioArtifact, StoreError> {
        let wav = audio::encode_wav(samples);
        let clip = crate::voice::Clip {
            samples: samples.to_vec(),
            source_rate: audio::RATE,
            channels: 1,
            bits: 16,
            codec: "pcm_s16le".into(),
        };
        self.keep_audio(&wav, &clip)
    }

    /// Keeps a clip's file and metadata for `voice.retention_days`.
    pub fn keep_audio(&self, bytes: &[u8], clip: &Clip) -> Result<AudioArtifact, StoreError> {
        store::keep(
            &self.state,
            &self.voice.audio_dir,
            &store::NewClip {
                bytes,
                duration_ms: clip.duration_ms(),
                codec: &clip.codec,
                sample_rate: clip.source_rate,
                channels: clip.channels,
                samples: &clip.samples,
            },
            self.clock.now_ms(),
            self.config.voice.retention_days,
        )
    }

    /// A round from speech: the transcript is the input, and the audio's
    /// id and hash go into the chain with it; its samples, when at hand,
    /// weigh readings of a mishearing.
    pub fn voice_round(
        &self,
        origin: &Origin,
        conversation: &ConversationId,
        transcript: &Transcript,
        audio: &AudioArtifact,
        samples: Option<Arc<[f32]>>,
    ) -> Result<RoundResult, RoundError> {
        let audio_id: AudioId = audio.audio_id.parse().map_err(StoreError::Id)?;
        let input = VoiceInput {
            audio_id,
            audio_sha256: audio.sha256.clone(),
            transcript: transcript.clone(),
            samples,
        };
        self.round_with(
            origin,
            conversation,
            &transcript.text,
            Channel::Voice,
            None,
            Some(&input),
        )
    }

    /// A WAV file heard: each utterance in it transcribed and, when it says
    /// something, run as a round. Silence keeps nothing and runs nothing.
    pub fn listen_wav(
        &self,
        conversation: &ConversationId,
        bytes: &[u8],
        what: &str,
    ) -> Result<Listened, VoiceError> {
        let clip = audio::decode_wav(bytes, what)?;
        let mut cfg = self.config.voice.vad.clone();
        cfg.silence_ms = cfg.file_silence_ms.max(cfg.silence_ms);
        let utterances = vad::split_with(&clip.samples, &cfg, self.vad_detector());
        if utterances.is_empty() {
            return Ok(Listened {
                audio: None,
                utterances: Vec::new(),
            });
        }
        let stt = self.stt()?;
        let origin = self.local_origin();
        // The clip is kept once, and only if something in it was speech.
        let mut kept: Option<AudioArtifact> = None;
        let mut heard = Vec::with_capacity(utterances.len());
        for u in utterances {
            let transcript = stt.transcribe(&u.samples)?;
            let samples: Arc<[f32]> = Arc::from(u.samples);
            let mut keep = || -> Result<AudioArtifact, StoreError> {
                if kept.is_none() {
                    kept = Some(self.keep_audio(bytes, &clip)?);
                }
                Ok(kept.clone().expect("kept just now"))
            };
            heard.push(self.heard(
                &origin,
                conversation,
                (u.start_ms, u.end_ms),
                transcript,
                Some(samples),
                &mut keep,
            )?);
        }
        Ok(Listened {
            audio: kept,
            utterances: heard,
        })
    }

    /// One transcribed utterance: when it holds speech, its audio is kept
    /// (`keep`) and it is run as a round; noise keeps nothing.
    pub fn heard(
        &self,
        origin: &Origin,
        conversation: &ConversationId,
        (start_ms, end_ms): (u64, u64),
        mut transcript: Transcript,
        samples: Option<Arc<[f32]>>,
        keep: &mut dyn FnMut() -> Result<AudioArtifact, StoreError>,
    ) -> Result<Heard, VoiceError> {
        let (round, audio) = match self.speech_of(&transcript) {
            Some(text) => {
                transcript.text = text;
                let artifact = keep()?;
                let round =
                    self.voice_round(origin, conversation, &transcript, &artifact, samples)?;
                (Some(round), Some(artifact))
            }
            None => (None, None),
        };
        Ok(Heard {
            start_ms,
            end_ms,
            transcript,
            round,
            audio_id: audio.as_ref().map(|a| a.audio_id.clone()),
            audio_sha256: audio.map(|a| a.sha256),
        })
    }

    /// A level-3 or level-4 command heard less surely than
    /// `voice.min_confidence` is asked again instead of offered for
    /// confirmation. (The "yes" itself is not held to it: one short word
    /// scores low on its own, and a confirmation only lets through what was
    /// heard clearly in the first place.)
    pub(super) fn unsure_hearing(
        &self,
        round: &OpenRound,
        voice: Option<&VoiceInput>,
        intent: &Intent,
    ) -> Result<Option<Steps>, RoundError> {
        let Some(v) = voice else { return Ok(None) };
        let min = self.config.voice.min_confidence;
        let governed = matches!(intent, Intent::Chain(chain) if chain.chain_level.get() >= 3);
        if !governed || v.transcript.confidence >= min {
            return Ok(None);
        }
        round.append(
            EventDraft::new(ValidatorRan {
                validator_id: "transcript_confidence".into(),
                code: "validator.low_confidence".into(),
                status: "retry".into(),
                message: format!(
                    "heard with confidence {:.2}, below voice.min_confidence {min:.2}: asked again instead of confirming",
                    v.transcript.confidence
                ),
                ..ValidatorRan::default()
            })
            .with_status(EventStatus::Failed),
        )?;
        Ok(Some(Steps::reply(SAY_AGAIN)))
    }

    /// Pins, unpins or sweeps kept audio; each change is recorded as a
    /// round of the `operator` conversation (a dry run changes and records
    /// nothing). `progress(done, total)` follows a sweep.
    pub fn audio_retention(
        &self,
        action: AudioAction,
        progress: &dyn Fn(u64, u64),
    ) -> Result<RetentionReport, VoiceError> {
        let now = self.clock.now_ms();
        let (name, said) = match &action {
            AudioAction::Pin(id) => ("pin", format!("caal audio pin {id}")),
            AudioAction::Unpin(id) => ("unpin", format!("caal audio unpin {id}")),
            AudioAction::Sweep { .. } => ("sweep", "caal audio sweep".to_owned()),
        };
        let mut report = RetentionReport {
            action: name.into(),
            audio_ids: Vec::new(),
            bytes_freed: 0,
            kept_pinned: store::pinned_past_due(&self.state, now)?,
            dry_run: matches!(action, AudioAction::Sweep { dry_run: true }),
            round_id: None,
        };
        let due = match &action {
            AudioAction::Sweep { .. } => store::expired(&self.state, now)?,
            AudioAction::Pin(id) | AudioAction::Unpin(id) => {
                vec![
                    store::get(&self.state, id)?
                        .ok_or_else(|| VoiceError::NoSuchAudio { id: id.clone() })?,
                ]
            }
        };
        if report.dry_run {
            report.audio_ids = due.iter().map(|a| a.audio_id.clone()).collect();
            report.bytes_freed = due.iter().map(|a| a.bytes).sum();
            return Ok(report);
        }
        let (round, state) =
            self.recorded_round(OPERATOR_CONVERSATION, None, Channel::Cli, &said)?;
        let total = due.len() as u64;
        for (i, a) in due.iter().enumerate() {
            let done = match &action {
                AudioAction::Pin(id) => store::set_pinned(&self.state, id, true).map(|_| ()),
                AudioAction::Unpin(id) => store::set_pinned(&self.state, id, false).map(|_| ()),
                AudioAction::Sweep { .. } => store::delete_file(&self.state, a, now),
            };
            if let Err(e) = done {
                round.fail("audio.retention", &e.to_string())?;
                return Err(e.into());
            }
            if matches!(action, AudioAction::Sweep { .. }) {
                report.bytes_freed += a.bytes;
            }
            report.audio_ids.push(a.audio_id.clone());
            progress(i as u64 + 1, total);
        }
        let hashes = due.iter().map(|a| a.sha256.clone()).collect();
        round.append(EventDraft::new(AudioRetention {
            action: name.into(),
            audio_ids: report.audio_ids.clone(),
            sha256: hashes,
            bytes_freed: report.bytes_freed,
            kept_pinned: report.kept_pinned,
        }))?;
        let text = match name {
            "sweep" => format!(
                "deleted {} audio file(s), {} bytes; kept {} pinned",
                report.audio_ids.len(),
                report.bytes_freed,
                report.kept_pinned
            ),
            _ => format!("{name} {}", report.audio_ids.join(", ")),
        };
        round.append(EventDraft::new(OutputEmitted {
            text,
            channel: Channel::Cli.as_str().into(),
            was_escalated: None,
        }))?;
        report.round_id = Some(round.header().round_id.to_string());
        round.complete(&state)?;
        Ok(report)
    }

    /// A LiveKit room event whose signature held, recorded as a round of
    /// the `livekit` conversation.
    pub fn livekit_event(
        &self,
        event: &crate::voice::livekit::RoomEvent,
    ) -> Result<String, StoreError> {
        let scrub = |s: &str| crate::safety::global().scrub(s).into_owned();
        let said = format!(
            "livekit webhook: {} in room {}",
            scrub(&event.event),
            scrub(event.room.as_deref().unwrap_or("-"))
        );
        let (round, state) = self.recorded_round("livekit", None, Channel::System, &said)?;
        round.append(EventDraft::new(LivekitWebhook {
            event: scrub(&event.event),
            event_id: scrub(&event.event_id),
            room: event.room.as_deref().map(scrub),
            participant: event.participant.as_deref().map(scrub),
            created_at: event.created_at,
            signature: "verified".into(),
        }))?;
        let round_id = round.header().round_id.to_string();
        round.complete(&state)?;
        Ok(round_id)
    }
}

#[cfg(test)]
mod tests {
    use super::speech_in;
    use crate::config::Config;
    use crate::round::{Engine, EngineOptions};
    use crate::voice::{Transcript, audio};
    use std::sync::Arc;

    /// A transcript is input like typed text: every secret kind spoken (as
    /// whisper would write it) reaches no file, WAL or export, and the audio
    /// and its hash are kept all the same.
    #[test]
    fn secrets_in_a_transcript_reach_no_file_and_no_export() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(
            dir.path(),
            Config::defaults().unwrap(),
            EngineOptions {
                library_id: Some("lib-voice".into()),
                env: Arc::new(|_| None),
                clock: Arc::new(crate::state::SystemClock),
                llm: None,
                router: None,
            },
        )
        .unwrap();
        let samples: Vec<f32> = (0..16_000).map(|i| (i as f32 * 0.05).sin() * 0.3).collect();
        let wav = audio::encode_wav(&samples);
        let clip = audio::decode_wav(&wav, "tone").unwrap();
        let artifact = engine.keep_audio(&wav, &clip).unwrap();
        let conversation = "spoken".parse().unwrap();
        let secrets = crate::safety::corpus::every_secret(0x7A1C);
        for (kind, secret, _) in &secrets {
            let transcript = Transcript {
                text: format!("remember that my {kind} is {secret}"),
                model: "ggml-tiny.en-q8_0.bin".into(),
                language: "en".into(),
                confidence: 0.9,
                least: 0.8,
                words: Vec::new(),
                audio_ms: 1_000,
                stt_ms: 100.0,
                no_speech: 0.01,
            };
            let heard = engine
                .heard(
                    &engine.local_origin(),
                    &conversation,
                    (0, 1_000),
                    transcript,
                    None,
                    &mut || Ok(artifact.clone()),
                )
                .unwrap();
            let round = heard.round.expect("a round");
            assert!(
                !round.reply.contains(secret.as_str()),
                "{kind} in the reply"
            );
        }
        let mut export = Vec::new();
        engine
            .store()
            .reader()
            .export(None, &mut export, &mut |_| {})
            .unwrap();
        let export = String::from_utf8(export).unwrap();
        assert!(
            export.contains(&artifact.sha256),
            "the audio hash is in the chain"
        );
        let mut files = vec![String::from_utf8_lossy(export.as_bytes()).into_owned()];
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                files.push(String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned());
            }
        }
        for (kind, secret, body) in &secrets {
            for (i, f) in files.iter().enumerate() {
                assert!(
                    !f.contains(secret.as_str()),
                    "{kind} found whole in file {i}"
                );
                assert!(
                    !f.contains(body.as_str()),
                    "{kind}'s random body found in file {i}"
                );
            }
        }
    }

    #[test]
    fn whisper_non_speech_markers_are_not_speech() {
        assert_eq!(speech_in("[BLANK_AUDIO]"), None);
        assert_eq!(speech_in(" (wind blowing) "), None);
        assert_eq!(speech_in("*music*"), None);
        assert_eq!(
            speech_in(" Turn on the kitchen lights."),
            Some("Turn on the kitchen lights.".into())
        );
        assert_eq!(
            speech_in("[BLANK_AUDIO] unlock the door"),
            Some("unlock the door".into())
        );
    }
}
