//! `caal bench voice`: speech to text on this machine, on espeak-ng speech.
//!
//! - Real-time factor of CAAL's whole path (WAV decoded, resampled, voice
//!   activity found, transcribed) on utterances of 3–10 s, against bare
//!   `whisper-rs` (the same model and decoding parameters, on the same
//!   samples, in the same run, alternating).
//! - End of speech to route decision: a 2 s utterance streamed over the
//!   voice WebSocket of a real server on 127.0.0.1 at real-time pace, then
//!   silence; timed from the moment the last spoken sample was sent to the
//!   moment the round's result arrived (the voice-activity hangover,
//!   transcription and the round all inside).

use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use caal::{
    config::{Config, VadConfig, VoiceConfig},
    round::{Engine, EngineOptions},
    server::AppState,
    state::SystemClock,
    stats::percentile,
    understand::{Home, Listen},
    voice::{audio, piper, silero, stt, tts, vad},
};
use serde::Serialize;
use serde_json::{Value, json};

use super::{serve::Running, understand::Heard};

/// Sentences espeak-ng says in about 3, 5, 8 and 10 seconds.
const SENTENCES: [&str; 4] = [
    "turn on the kitchen lights and the hall lights",
    "set the thermostat to twenty one degrees and remind me to water the plants tonight",
    "what is the weather going to be like tomorrow morning, and should I take an umbrella when I walk the dog before work",
    "please lock the front door, turn off every light downstairs, set the alarm for six thirty, and tell me if any windows are still open before I go to bed",
];
/// About 2 s.
const STREAMED: &str = "turn on the kitchen lights please";
const TOKEN: &str = "bench-voice-token-0123456789";

#[derive(Clone, Debug, Serialize)]
pub struct Utterance {
    pub text: String,
    pub heard: String,
    pub audio_s: f64,
    /// Medians over the runs.
    pub caal_ms: f64,
    /// Of `caal_ms`: decoding, resampling and finding the speech.
    pub prep_ms: f64,
    pub bare_ms: f64,
    pub rtf: f64,
    pub ratio_to_bare: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct VoiceBenchReport {
    pub model: String,
    pub threads: usize,
    pub runs: usize,
    pub utterances: Vec<Utterance>,
    /// Worst of the utterances' median real-time factors, and ratios to bare whisper-rs.
    pub rtf_max: f64,
    pub ratio_to_bare_max: f64,
    /// The streamed utterance's length, and end of speech to route decision.
    pub streamed_audio_s: f64,
    pub end_to_route_p50_ms: f64,
    pub end_to_route_max_ms: f64,
    /// Of it, transcribing the utterance (median).
    pub end_stt_p50_ms: f64,
    /// End of speech to the voice socket's `final` transcript (median; the
    /// silence that ends an utterance is in it).
    pub end_to_final_p50_ms: f64,
    /// The same speech over Wyoming: `audio-stop` to `transcript` (median),
    /// and its ratio to the voice socket's end of speech to `final` (goal ≤ 1.1).
    pub wyoming_stop_to_transcript_p50_ms: f64,
    pub wyoming_ratio: f64,
    pub vad_silence_ms: u32,
    /// Barge-in: the same utterance said again as soon as the first piece
    /// of its spoken reply arrived. From the first sample of that speech
    /// sent to the `barge_in` message back (median, worst; goal ≤ 150 ms),
    /// and the server's own figure (speech detected, stream time).
    pub barge_in_p50_ms: f64,
    pub barge_in_max_ms: f64,
    pub barge_in_detected_p50_ms: f64,
    /// Runs whose speech over the reply was transcribed as the first was
    /// (heard whole), of `runs`.
    pub barged_heard_whole: usize,
    /// End of speech to the first piece of the spoken reply arriving on the
    /// socket (median, worst; goal ≤ 800 ms): the utterance's first saying
    /// in the barge-in runs, replies spoken by `reply_voice`.
    pub end_to_reply_audio_p50_ms: f64,
    pub end_to_reply_audio_max_ms: f64,
    /// The voice that spoke the replies.
    pub reply_voice: String,
}

fn espeak(text: &str) -> Result<Vec<u8>, String> {
    espeak_as("en-us", 150, text)
}

/// `text` said by espeak-ng's `voice` at `wpm` words a minute, as WAV.
fn espeak_as(voice: &str, wpm: u32, text: &str) -> Result<Vec<u8>, String> {
    let dir = tempfile_dir()?;
    let path = dir.join("said.wav");
    let status = std::process::Command::new("espeak-ng")
        .args(["-v", voice, "-s", &wpm.to_string(), "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .map_err(|e| format!("cannot run espeak-ng ({e}); run `bash .ci/setup`"))?;
    if !status.success() {
        return Err("espeak-ng failed".into());
    }
    let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(bytes)
}

fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!(
        "caal-bench-voice-{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// Bare whisper-rs: the same model and parameters CAAL uses (decoding,
/// prompt), nothing else.
fn bare(
    state: &mut whisper_rs::WhisperState,
    samples: &[f32],
    threads: i32,
    cfg: &VoiceConfig,
) -> Result<f64, String> {
    use whisper_rs::FullParams;
    let started = Instant::now();
    let mut params = FullParams::new(stt::sampling(cfg.beam_size));
    params.set_n_threads(threads);
    if !cfg.prompt.is_empty() {
        params.set_initial_prompt(&cfg.prompt);
    }
    params.set_language(Some("en"));
    params.set_print_progress(false);
    params.set_print_realtime(false);
    params.set_print_special(false);
    params.set_print_timestamps(false);
    params.set_no_context(true);
    params.set_single_segment(true);
    params.set_no_timestamps(true);
    params.set_suppress_nst(true);
    params.set_audio_ctx(stt::audio_ctx(samples.len()));
    params.set_max_tokens(i32::try_from(samples.len() / 1_000 + 16).unwrap_or(i32::MAX));
    state.full(params, samples).map_err(|e| e.to_string())?;
    let mut text = String::new();
    for segment in state.as_iter() {
        text.push_str(&segment.to_str_lossy().map_err(|e| e.to_string())?);
    }
    std::hint::black_box(text);
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Speech as the voice socket hears it, for `caal bench understand
/// --spoken`: text said by espeak-ng, cut by the voice activity detector,
/// transcribed by whisper; and the same speech scored against readings of
/// a mishearing, as voice rounds weigh them (`understand.sounds.listen`).
pub struct Ear {
    stt: std::sync::Arc<stt::Stt>,
    vad: VadConfig,
    mouth: Mouth,
    /// The line heard last and its speech: the router weighs a line's
    /// readings right after it is heard (replays say it again).
    said: std::sync::Mutex<Option<(String, std::sync::Arc<[f32]>)>>,
}

/// The voice settings as voice rounds hear with them (whisper told the
/// home's words), the model installed.
pub fn as_rounds_hear(config: &Config, models_dir: &Path) -> Result<VoiceConfig, String> {
    let mut cfg = config.voice.clone();
    let home = Home::from_config(&config.home).map_err(|e| e.to_string())?;
    cfg.prompt = stt::prompt_for(&cfg, &home);
    stt::install(&cfg, models_dir, false).map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// Who says a line for `--spoken` (espeak-ng at 150 words a minute, or
/// the Piper voice replies are spoken in), and the noise mixed in.
#[derive(Clone)]
pub struct Mouth {
    /// None: espeak-ng.
    piper: Option<Arc<tts::Speaker>>,
    /// espeak-ng's voice and words a minute.
    espeak: (String, u32),
    /// White noise this many dB below the speech, before, under and after
    /// it; the speech then found by Silero, as the voice socket finds it.
    snr_db: Option<f32>,
    silero: vad::Detector,
}

impl Mouth {
    /// espeak-ng, in quiet.
    pub fn espeak() -> Self {
        Self::espeak_as("en-us", 150)
    }

    /// espeak-ng's `voice` ("en-us+f3") at `wpm` words a minute, in quiet.
    pub fn espeak_as(voice: &str, wpm: u32) -> Self {
        Self {
            piper: None,
            espeak: (voice.to_owned(), wpm),
            snr_db: None,
            silero: vad::Detector::Energy,
        }
    }

    /// The configured Piper voice (`voice.piper`), in quiet; an error if it
    /// cannot be loaded (no silent fallback to espeak-ng here).
    pub fn piper(config: &Config, models_dir: &Path) -> Result<Self, String> {
        let cfg = &config.voice;
        let voice = piper::Voice::load(
            &models_dir.join(&cfg.piper),
            &models_dir.join(&cfg.onnxruntime),
            cfg.threads.max(1),
        )
        .map_err(|e| format!("{e}; `bash .ci/setup` installs the Piper voice"))?;
        Ok(Self {
            piper: Some(Arc::new(tts::Speaker::Piper(voice))),
            ..Self::espeak()
        })
    }

    /// The same voice with white noise `snr_db` below it, the speech found
    /// by Silero VAD (`voice.vad.model`).
    pub fn in_noise(self, snr_db: f32, config: &Config, models_dir: &Path) -> Result<Self, String> {
        let cfg = &config.voice;
        let silero = silero::Silero::load(
            &models_dir.join(&cfg.vad.model),
            &models_dir.join(&cfg.onnxruntime),
        )
        .map_err(|e| format!("{e}; `bash .ci/setup` installs Silero VAD"))?;
        Ok(Self {
            snr_db: Some(snr_db),
            silero: vad::Detector::Silero(Arc::new(silero)),
            ..self
        })
    }

    /// Who speaks and in what, for the report.
    pub fn name(&self) -> String {
        let who = match &self.piper {
            Some(p) => format!("piper {}", p.name().1),
            None if self.espeak == ("en-us".to_owned(), 150) => "espeak-ng".to_owned(),
            None => format!("espeak-ng {} at {} wpm", self.espeak.0, self.espeak.1),
        };
        match self.snr_db {
            Some(db) => format!("{who}, white noise at {db} dB SNR"),
            None => format!("{who}, quiet"),
        }
    }

    /// `text` said, at 16 kHz, with its noise; cut as the voice would be.
    fn speech(&self, vad_cfg: &VadConfig, text: &str) -> Result<Vec<f32>, String> {
        let samples = self.say(text)?;
        let detector = match self.snr_db {
            Some(_) => self.silero.clone(),
            None => vad::Detector::Energy,
        };
        let mut file_vad = vad_cfg.clone();
        file_vad.silence_ms = file_vad.file_silence_ms.max(file_vad.silence_ms);
        Ok(vad::split_with(&samples, &file_vad, detector)
            .into_iter()
            .flat_map(|u| u.samples)
            .collect())
    }

    /// `text` said, at 16 kHz; in noise, with half a second of the room
    /// before and after, the noise seeded by the line so a replay hears
    /// the same.
    pub fn say(&self, text: &str) -> Result<Vec<f32>, String> {
        let mut samples = match &self.piper {
            Some(p) => {
                let mut said = Vec::new();
                for piece in tts::pieces(text) {
                    said.extend(p.speak(piece).map_err(|e| e.to_string())?);
                }
                audio::resample(&said, p.rate(), audio::RATE)
            }
            None => {
                audio::decode_wav(&espeak_as(&self.espeak.0, self.espeak.1, text)?, "espeak")
                    .map_err(|e| e.to_string())?
                    .samples
            }
        };
        if let Some(db) = self.snr_db {
            let pad = vec![0.0; audio::RATE as usize / 2];
            samples = [pad.as_slice(), &samples, &pad].concat();
            let seed = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            audio::add_noise(&mut samples, db, seed);
        }
        Ok(samples)
    }
}

impl Ear {
    /// Lines said by `mouth`.
    pub fn with(config: &Config, models_dir: &Path, mouth: Mouth) -> Result<Self, String> {
        let cfg = as_rounds_hear(config, models_dir)?;
        let stt =
            stt::Stt::load(&stt::model_path(&cfg, models_dir), &cfg).map_err(|e| e.to_string())?;
        Ok(Self {
            stt: std::sync::Arc::new(stt),
            vad: cfg.vad,
            mouth,
            said: Default::default(),
        })
    }

    /// What whisper heard of `text` said, and how surely it heard each word.
    pub fn hear(&self, text: &str) -> Result<Heard, String> {
        let speech: std::sync::Arc<[f32]> = self.mouth.speech(&self.vad, text)?.into();
        let heard = self.stt.transcribe(&speech).map_err(|e| e.to_string())?;
        *self.said.lock().unwrap_or_else(|p| p.into_inner()) = Some((text.to_owned(), speech));
        Ok(Heard {
            heard: heard.text,
            least: heard.least,
            words: heard.words,
        })
    }

    /// The speech of `text` to weigh readings against: as heard in this
    /// run (whisper's encoding of it reused), else said again when the
    /// router asks (a replay).
    pub fn listen(&self, text: &str) -> Listen {
        let heard = self
            .said
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|(said, _)| said == text)
            .map(|(_, speech)| speech.clone());
        let (stt, vad, text) = (self.stt.clone(), self.vad.clone(), text.to_owned());
        let mouth = self.mouth.clone();
        let speech = std::sync::OnceLock::new();
        Listen::new(move |texts| {
            let samples = speech.get_or_init(|| {
                heard
                    .clone()
                    .or_else(|| mouth.speech(&vad, &text).ok().map(Into::into))
            });
            stt.score(samples.as_ref()?, texts).ok()
        })
    }
}

pub fn run(config: &Config, models_dir: &Path, runs: usize) -> Result<VoiceBenchReport, String> {
    let cfg = &as_rounds_hear(config, models_dir)?;
    let model_path = stt::model_path(cfg, models_dir);
    let ours = stt::Stt::load(&model_path, cfg).map_err(|e| e.to_string())?;
    let ctx = whisper_rs::WhisperContext::new_with_params(
        model_path.display().to_string(),
        whisper_rs::WhisperContextParameters::default(),
    )
    .map_err(|e| e.to_string())?;
    let mut state = ctx.create_state().map_err(|e| e.to_string())?;
    let threads = if cfg.threads == 0 {
        thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        cfg.threads
    };

    let mut utterances = Vec::new();
    for text in SENTENCES {
        let wav = espeak(text)?;
        let clip = audio::decode_wav(&wav, "espeak").map_err(|e| e.to_string())?;
        let samples = clip.samples.clone();
        // One untimed run of each warms caches.
        let mut heard = ours.transcribe(&samples).map_err(|e| e.to_string())?.text;
        bare(&mut state, &samples, threads as i32, cfg)?;
        let (mut caal_ms, mut bare_ms, mut prep_ms) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let started = Instant::now();
            let clip = audio::decode_wav(&wav, "espeak").map_err(|e| e.to_string())?;
            let mut file_vad = cfg.vad.clone();
            file_vad.silence_ms = file_vad.file_silence_ms.max(file_vad.silence_ms);
            let found = vad::split(&clip.samples, &file_vad);
            let speech: Vec<f32> = found.into_iter().flat_map(|u| u.samples).collect();
            prep_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            heard = ours.transcribe(&speech).map_err(|e| e.to_string())?.text;
            caal_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            bare_ms.push(bare(&mut state, &samples, threads as i32, cfg)?);
        }
        let audio_s = samples.len() as f64 / f64::from(audio::RATE);
        let (caal, bare) = (median(caal_ms), median(bare_ms));
        utterances.push(Utterance {
            text: text.into(),
            heard,
            audio_s,
            caal_ms: caal,
            prep_ms: median(prep_ms),
            bare_ms: bare,
            rtf: caal / 1000.0 / audio_s,
            ratio_to_bare: caal / bare,
        });
    }
    drop(state);

    let streamed = streamed(config, runs)?;
    let mut sorted = streamed.latencies.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(VoiceBenchReport {
        model: ours.model().to_owned(),
        threads,
        runs,
        rtf_max: utterances.iter().map(|u| u.rtf).fold(0.0, f64::max),
        ratio_to_bare_max: utterances
            .iter()
            .map(|u| u.ratio_to_bare)
            .fold(0.0, f64::max),
        utterances,
        streamed_audio_s: streamed.audio_s,
        end_stt_p50_ms: median(streamed.transcribing),
        end_to_final_p50_ms: median(streamed.to_final.clone()),
        wyoming_stop_to_transcript_p50_ms: median(streamed.wyoming.clone()),
        wyoming_ratio: median(streamed.wyoming) / median(streamed.to_final),
        end_to_route_p50_ms: percentile(&sorted, 0.5),
        end_to_route_max_ms: sorted.last().copied().unwrap_or(0.0),
        vad_silence_ms: cfg.vad.silence_ms,
        barge_in_p50_ms: median(streamed.barge_in.wall.clone()),
        barge_in_max_ms: streamed.barge_in.wall.iter().copied().fold(0.0, f64::max),
        barge_in_detected_p50_ms: median(streamed.barge_in.detected),
        barged_heard_whole: streamed.barge_in.heard_whole,
        end_to_reply_audio_p50_ms: median(streamed.barge_in.reply_audio.clone()),
        end_to_reply_audio_max_ms: streamed
            .barge_in
            .reply_audio
            .iter()
            .copied()
            .fold(0.0, f64::max),
        reply_voice: streamed.barge_in.voice,
    })
}

/// A 2 s utterance over the voice socket at real-time pace, `runs` times.
struct Streamed {
    audio_s: f64,
    /// End of speech to the round's result, each run.
    latencies: Vec<f64>,
    /// Of it, transcribing the utterance (the `final` message's `stt_ms`).
    transcribing: Vec<f64>,
    /// End of speech to the `final` transcript, each run.
    to_final: Vec<f64>,
    /// The same speech over Wyoming: `audio-stop` to `transcript`, each run.
    wyoming: Vec<f64>,
    barge_in: BargedIn,
}

#[derive(Default)]
struct BargedIn {
    /// First sample of the speech over the reply sent → `barge_in`, each run.
    wall: Vec<f64>,
    /// The server's `stopped_in_ms`, each run.
    detected: Vec<f64>,
    heard_whole: usize,
    /// End of the first saying's speech → the first piece of its reply audio.
    reply_audio: Vec<f64>,
    voice: String,
}

fn streamed(config: &Config, runs: usize) -> Result<Streamed, String> {
    let dir = tempfile_dir()?;
    let result = streamed_in(config, &dir, runs);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn streamed_in(config: &Config, dir: &Path, runs: usize) -> Result<Streamed, String> {
    let options = EngineOptions {
        library_id: Some("bench".into()),
        env: Arc::new(|k| std::env::var(k).ok()),
        clock: Arc::new(SystemClock),
        llm: None,
        router: None,
    };
    let engine = Engine::open(dir, config.clone(), options).map_err(|e| e.to_string())?;
    engine.stt().map_err(|e| e.to_string())?;
    // The voice loaded before the clock runs, as a socket's first reply finds it.
    let voice = {
        let speaker = engine.speaker();
        let (program, name) = speaker.name();
        format!("{program} {name}")
    };
    let running = Running::start_with_wyoming(AppState::new(engine, TOKEN.into()))?;
    let addr = running.addr;

    let clip = audio::decode_wav(&espeak(STREAMED)?, "espeak").map_err(|e| e.to_string())?;
    // Where the speech ends: the last sample louder than -50 dBFS.
    let end = clip
        .samples
        .iter()
        .rposition(|s| s.abs() > 0.003)
        .unwrap_or(clip.samples.len());
    let speech = &clip.samples[..end];
    let (mut latencies, mut transcribing, mut to_final) =
        (Vec::with_capacity(runs), Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let mut socket = open_socket(addr, "bench", false)?;
        let started = Instant::now();
        let mut sent = 0usize;
        let mut speech_ended = None;
        let total = speech.len() + audio::RATE as usize * 2;
        let mut result = None;
        let mut seen = Vec::new();
        while sent < total && result.is_none() {
            sent += send_paced(&mut socket, speech, sent, started)?;
            if sent >= speech.len() && speech_ended.is_none() {
                speech_ended = Some(Instant::now());
            }
            result = poll_seen(&mut socket, "result", &mut seen)?;
        }
        let arrived = match result {
            Some(at) => at,
            None => wait_seen(&mut socket, "result", Duration::from_secs(30), &mut seen)?,
        };
        let ended = speech_ended.ok_or("the speech never ended")?;
        latencies.push(arrived.duration_since(ended).as_secs_f64() * 1000.0);
        if let Some((m, at)) = seen.iter().rfind(|(m, _)| m["type"] == "final") {
            transcribing.extend(m["stt_ms"].as_f64());
            to_final.push(at.duration_since(ended).as_secs_f64() * 1000.0);
        }
        let _ = socket.close(None);
    }
    // The same speech through the Wyoming door: all of it, then audio-stop.
    let door = running.wyoming.ok_or("the Wyoming door did not start")?;
    let mut wyoming = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) + 1 {
        wyoming.push(wyoming_transcript(door, speech)?);
    }
    wyoming.remove(0); // the first warms the connection path
    let barge_in = BargedIn {
        voice,
        ..barge_in(addr, speech, runs)?
    };
    running.stop()?;
    Ok(Streamed {
        audio_s: speech.len() as f64 / f64::from(audio::RATE),
        latencies,
        transcribing,
        to_final,
        wyoming,
        barge_in,
    })
}

/// `speech` streamed at real-time pace with spoken replies on; as soon as
/// the first piece of the reply arrives, `speech` again over it: how soon
/// the reply is stopped, and whether the second is heard as the first was.
fn barge_in(addr: std::net::SocketAddr, speech: &[f32], runs: usize) -> Result<BargedIn, String> {
    let onset = speech.iter().position(|s| s.abs() > 0.003).unwrap_or(0);
    let mut out = BargedIn::default();
    for _ in 0..runs.max(1) {
        let mut socket = open_socket(addr, "bench-barge", true)?;
        let mut seen = Vec::new();
        // Says `speech` then quiet at real-time pace until each of `kinds`
        // has arrived, in order: when the speech's first loud sample went,
        // when its last went, and when each arrived.
        let say = |socket: &mut Socket,
                   seen: &mut Vec<(Value, Instant)>,
                   kinds: &[&str]|
         -> Result<(Instant, Instant, Vec<Instant>), String> {
            let started = Instant::now();
            let mut sent = 0usize;
            let (mut onset_sent, mut end_sent) = (None, None);
            let mut arrived = Vec::new();
            while arrived.len() < kinds.len() {
                let went = send_paced(socket, speech, sent, started)?;
                if sent <= onset && onset < sent + went {
                    onset_sent = Some(Instant::now());
                }
                sent += went;
                if sent >= speech.len() && end_sent.is_none() {
                    end_sent = Some(Instant::now());
                }
                while arrived.len() < kinds.len()
                    && let Some(at) = poll_seen(socket, kinds[arrived.len()], seen)?
                {
                    arrived.push(at);
                }
                if sent > speech.len() + audio::RATE as usize * 30 {
                    return Err(format!("no {kinds:?} from the voice socket"));
                }
            }
            let onset_sent = onset_sent.unwrap_or(started);
            Ok((onset_sent, end_sent.unwrap_or(onset_sent), arrived))
        };
        let final_text = |seen: &[(Value, Instant)]| {
            seen.iter()
                .rfind(|(m, _)| m["type"] == "final")
                .map(|(m, _)| m["text"].clone())
        };
        let (_, ended, replied) = say(&mut socket, &mut seen, &["reply_audio"])?;
        out.reply_audio
            .push(replied[0].duration_since(ended).as_secs_f64() * 1000.0);
        let first = final_text(&seen);
        // The same words again over the reply: stopped, then heard.
        let mut again = Vec::new();
        let (onset_at, _, arrived) = say(&mut socket, &mut again, &["barge_in", "result"])?;
        out.wall
            .push(arrived[0].duration_since(onset_at).as_secs_f64() * 1000.0);
        if let Some((m, _)) = again.iter().find(|(m, _)| m["type"] == "barge_in") {
            out.detected.extend(m["stopped_in_ms"].as_f64());
        }
        if first.is_some() && first == final_text(&again) {
            out.heard_whole += 1;
        }
        let _ = socket.close(None);
    }
    Ok(out)
}

/// A voice socket on `addr`, started and ready, its reads polling.
fn open_socket(
    addr: std::net::SocketAddr,
    conversation: &str,
    tts: bool,
) -> Result<Socket, String> {
    let (mut socket, _) =
        tungstenite::connect(format!("ws://{addr}/voice/stream")).map_err(|e| e.to_string())?;
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = socket.get_ref() {
        s.set_read_timeout(Some(Duration::from_millis(5)))
            .map_err(|e| e.to_string())?;
    }
    socket
        .send(tungstenite::Message::text(
            json!({"type": "start", "token": TOKEN, "conversation_id": conversation,
                   "sample_rate": audio::RATE, "tts": tts})
            .to_string(),
        ))
        .map_err(|e| e.to_string())?;
    wait_for(&mut socket, "ready", Duration::from_secs(30))?;
    Ok(socket)
}

/// The next 20 ms of `speech` (then of silence) after `sent` samples,
/// sent when due at real-time pace from `started`; how many samples went.
fn send_paced(
    socket: &mut Socket,
    speech: &[f32],
    sent: usize,
    started: Instant,
) -> Result<usize, String> {
    let frame = audio::RATE as usize / 50; // 20 ms, as a browser sends
    let due = started + Duration::from_secs_f64(sent as f64 / f64::from(audio::RATE));
    if let Some(wait) = due.checked_duration_since(Instant::now()) {
        thread::sleep(wait);
    }
    let silence = [0.0f32; audio::RATE as usize / 50];
    let chunk = if sent < speech.len() {
        &speech[sent..(sent + frame).min(speech.len())]
    } else {
        &silence[..]
    };
    socket
        .send(tungstenite::Message::binary(audio::f32_to_pcm16(chunk)))
        .map_err(|e| e.to_string())?;
    Ok(chunk.len())
}

/// Sends `speech` for transcription over Wyoming as Home Assistant does;
/// the time from `audio-stop` to the `transcript`.
fn wyoming_transcript(door: std::net::SocketAddr, speech: &[f32]) -> Result<f64, String> {
    use caal::server::protocols::wyoming::Event;
    use std::io::{BufRead, BufReader, Read, Write};
    let mut stream = TcpStream::connect(door).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let format = json!({"rate": audio::RATE, "width": 2, "channels": 1});
    let mut out = Event::new("transcribe", json!({"language": "en"})).encode();
    out.extend(Event::new("audio-start", format.clone()).encode());
    for chunk in speech.chunks(audio::RATE as usize / 10) {
        let mut e = Event::new("audio-chunk", format.clone());
        e.payload = audio::f32_to_pcm16(chunk);
        out.extend(e.encode());
    }
    stream.write_all(&out).map_err(|e| e.to_string())?;
    stream
        .write_all(&Event::new("audio-stop", json!({})).encode())
        .map_err(|e| e.to_string())?;
    let stopped = Instant::now();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("the Wyoming door closed before its transcript".into());
        }
        let header: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        let skip = header["data_length"].as_u64().unwrap_or(0)
            + header["payload_length"].as_u64().unwrap_or(0);
        let mut rest = vec![0; skip as usize];
        reader.read_exact(&mut rest).map_err(|e| e.to_string())?;
        match header["type"].as_str() {
            Some("transcript") => return Ok(stopped.elapsed().as_secs_f64() * 1000.0),
            Some("error") => {
                return Err(format!(
                    "the Wyoming door said: {}",
                    String::from_utf8_lossy(&rest)
                ));
            }
            _ => {}
        }
    }
}

type Socket = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

/// Reads what has arrived, keeping every message in `seen`; the time a
/// message of `kind` arrived, if one did.
fn poll_seen(
    socket: &mut Socket,
    kind: &str,
    seen: &mut Vec<(Value, Instant)>,
) -> Result<Option<Instant>, String> {
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Text(t)) => {
                let v: Value = serde_json::from_str(&t).map_err(|e| e.to_string())?;
                if v["type"] == "error" {
                    return Err(format!("the voice socket said: {v}"));
                }
                let (found, at) = (v["type"] == kind, Instant::now());
                seen.push((v, at));
                if found {
                    return Ok(Some(at));
                }
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn wait_for(socket: &mut Socket, kind: &str, within: Duration) -> Result<Instant, String> {
    wait_seen(socket, kind, within, &mut Vec::new())
}

fn wait_seen(
    socket: &mut Socket,
    kind: &str,
    within: Duration,
    seen: &mut Vec<(Value, Instant)>,
) -> Result<Instant, String> {
    let started = Instant::now();
    while started.elapsed() < within {
        if let Some(at) = poll_seen(socket, kind, seen)? {
            return Ok(at);
        }
    }
    Err(format!("no {kind} from the voice socket within {within:?}"))
}
