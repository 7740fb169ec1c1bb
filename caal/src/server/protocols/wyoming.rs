//! The Wyoming door (`caal serve --wyoming HOST:PORT`, off by default): the
//! peer-to-peer protocol of Home Assistant's voice pipeline and its
//! satellites, so Home Assistant can add CAAL as a Wyoming integration for
//! speech to text (CAAL's whisper), conversation (CAAL's rounds) and text to
//! speech (the Piper voice, espeak-ng as its fallback).
//!
//! An event is a JSON line (`type`, and `data_length` / `payload_length`
//! when data or a binary payload follow it), then that many bytes of JSON
//! data, then that many bytes of payload (audio). Served here:
//! - `describe` → `info` (what CAAL offers);
//! - `transcribe`, `audio-start`, `audio-chunk`…, `audio-stop` → `transcript`
//!   (16-bit PCM, any rate and channel count; resampled to whisper's 16 kHz
//!   mono). Speech heard is kept and hashed like the voice socket's, and
//!   remembered for two minutes: when its text comes back for handling, as
//!   Home Assistant's pipeline sends it, the round is a voice round linked to
//!   that audio (its id and hash in `input.received`);
//! - `transcript` (text to handle; `context.conversation_id` names the
//!   conversation, as Home Assistant sends it) → `handled` with the reply, or
//!   `not-handled` when CAAL did not understand or the round failed;
//! - `synthesize` → `audio-start`, `audio-chunk`…, `audio-stop` (the Piper
//!   voice at its rate, else espeak-ng);
//! - `ping` → `pong`. Other events are dropped, as the protocol asks.
//!
//! Wyoming itself has no authentication, so the door lets peers in by
//! their address (`[doors.wyoming] allow`: Home Assistant's) or by a shared
//! secret they send first (`{"type": "caal-auth", "data": {"token": …}}`,
//! the secret in `CAAL_WYOMING_TOKEN`); with no secret set, loopback peers
//! too. `caal serve` refuses a non-loopback address with neither. Each peer
//! is a client of its own: its conversations are `wyoming:…` (no other door
//! reaches them), a confirmation it was asked is answered only by it (or on
//! the page), and speech it sent links only to its own text.
//!
//! Bounded: at most `max_connections` at once (a newcomer at the cap takes
//! the place of the connection idle longest; with every one busy it is
//! closed on arrival), a connection silent for `idle_seconds` is closed, accept errors (out of
//! descriptors) are waited out with growing pauses, a transcription takes a
//! minute of audio at most, speech to and from text runs one job per spare
//! core, and `synthesize` speaks a piece at a time (at most
//! `tts::MAX_CHARS`). A malformed event gets an `error` event, is logged
//! (scrubbed), and closes that connection only; the framing cannot be
//! trusted after it.

use std::{
    collections::VecDeque,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Map, Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
};

use crate::{
    auth::Door as AuthDoor,
    config::WyomingConfig,
    ids::ConversationId,
    round::{Channel, Engine, RoundResult},
    server::{
        AppState,
        conns::{Admitted, Slot, Slots},
    },
    voice::{AudioArtifact, Transcript, audio, tts},
};

/// The `wyoming` package version whose events these were checked against.
pub const PROTOCOL_VERSION: &str = "1.10.2";

/// Limits that keep one connection from exhausting the service.
const MAX_HEADER: u64 = 64 * 1024;
const MAX_DATA: usize = 1024 * 1024;
const MAX_PAYLOAD: usize = 4 * 1024 * 1024;
/// A minute of 16 kHz mono (a request, not a dictation): longer audio is refused.
const MAX_SAMPLES: usize = audio::RATE as usize * 60;
/// How long a peer not let in by its address has to send the secret.
const AUTH_WITHIN: Duration = Duration::from_secs(10);
/// How long a transcription waits for its text to come back for handling.
const LINK_WITHIN: Duration = Duration::from_secs(120);
/// Samples per `audio-chunk` of synthesized speech (64 ms at 16 kHz).
const CHUNK_SAMPLES: usize = 1024;

/// One Wyoming event.
#[derive(Debug, Default)]
pub struct Event {
    pub kind: String,
    pub data: Map<String, Value>,
    pub payload: Vec<u8>,
}

impl Event {
    pub fn new(kind: &str, data: Value) -> Self {
        Self {
            kind: kind.into(),
            data: match data {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            payload: Vec::new(),
        }
    }

    /// The bytes on the wire: the header line, the data, the payload.
    pub fn encode(&self) -> Vec<u8> {
        let data = (!self.data.is_empty())
            .then(|| serde_json::to_vec(&self.data).expect("a JSON object serialises"));
        let mut header = json!({"type": self.kind, "version": PROTOCOL_VERSION});
        if let Some(d) = &data {
            header["data_length"] = json!(d.len());
        }
        if !self.payload.is_empty() {
            header["payload_length"] = json!(self.payload.len());
        }
        let mut out = header.to_string().into_bytes();
        out.push(b'\n');
        out.extend(data.unwrap_or_default());
        out.extend(&self.payload);
        out
    }
}

/// Why an event could not be read; the connection ends after it.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("the event header is not valid: {0}")]
    Header(String),
    #[error("the event header is longer than {MAX_HEADER} bytes")]
    HeaderTooLong,
    #[error("{what} of {len} bytes is more than the {max} bytes allowed")]
    TooLarge {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("the event's data is not a JSON object: {0}")]
    Data(String),
    #[error("the connection closed inside an event")]
    Truncated,
}

impl FrameError {
    pub fn code(&self) -> &'static str {
        match self {
            FrameError::Header(_) | FrameError::HeaderTooLong => "event.invalid",
            FrameError::TooLarge { .. } => "event.too_large",
            FrameError::Data(_) => "event.data_invalid",
            FrameError::Truncated => "event.truncated",
        }
    }
}

/// Reads one event; `Ok(None)` at a clean end of the stream.
pub async fn read_event<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> Result<Option<Event>, FrameError> {
    let mut line = Vec::new();
    // Blank lines between events carry nothing (a loop: any number of them).
    while line.iter().all(u8::is_ascii_whitespace) {
        line.clear();
        let n = (&mut *reader)
            .take(MAX_HEADER + 1)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|_| FrameError::Truncated)?;
        if n == 0 {
            return Ok(None);
        }
        if line.last() != Some(&b'\n') {
            return Err(if n as u64 > MAX_HEADER {
                FrameError::HeaderTooLong
            } else {
                FrameError::Truncated
            });
        }
    }
    let header: Value =
        serde_json::from_slice(&line).map_err(|e| FrameError::Header(e.to_string()))?;
    let kind = header["type"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| FrameError::Header("it needs a \"type\" string".into()))?
        .to_owned();
    let length = |field: &'static str, max: usize| -> Result<usize, FrameError> {
        match &header[field] {
            Value::Null => Ok(0),
            v => {
                let len = v.as_u64().ok_or_else(|| {
                    FrameError::Header(format!("{field} must be a non-negative integer"))
                })?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                if len > max {
                    return Err(FrameError::TooLarge {
                        what: field,
                        len,
                        max,
                    });
                }
                Ok(len)
            }
        }
    };
    let data_length = length("data_length", MAX_DATA)?;
    let payload_length = length("payload_length", MAX_PAYLOAD)?;
    let mut data = match &header["data"] {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ => return Err(FrameError::Data("\"data\" in the header".into())),
    };
    if data_length > 0 {
        let mut bytes = vec![0; data_length];
        reader
            .read_exact(&mut bytes)
            .await
            .map_err(|_| FrameError::Truncated)?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(more)) => data.extend(more),
            Ok(_) => return Err(FrameError::Data("not an object".into())),
            Err(e) => return Err(FrameError::Data(e.to_string())),
        }
    }
    let mut payload = vec![0; payload_length];
    reader
        .read_exact(&mut payload)
        .await
        .map_err(|_| FrameError::Truncated)?;
    Ok(Some(Event {
        kind,
        data,
        payload,
    }))
}

/// Speech transcribed here, waiting for its text to come back for handling.
struct Heard {
    /// The client it was heard from: only its own text links to it.
    client: String,
    text: String,
    transcript: Transcript,
    audio: AudioArtifact,
    samples: std::sync::Arc<[f32]>,
    at: Instant,
}

/// Who may use the door: peers on the allow-list by their address, a peer
/// that sends the shared secret first, and (with no secret set) loopback.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    allow: Vec<ipnet::IpNet>,
    token: Option<Arc<String>>,
}

/// The event a peer not let in by its address sends first, with the secret.
pub const AUTH_EVENT: &str = "caal-auth";

impl Admission {
    /// From `[doors.wyoming]` and the secret in its `token_env`.
    pub fn new(config: &WyomingConfig, env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            allow: config
                .allow
                .iter()
                .filter_map(|p| crate::config::peer_range(p))
                .collect(),
            token: env(&config.token_env)
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .map(Arc::new),
        }
    }

    /// A door bound at `addr` serves only if it can tell its peers apart:
    /// loopback, or a list or a secret to let them in by.
    pub fn check_bind(&self, addr: SocketAddr, token_env: &str) -> Result<(), String> {
        if addr.ip().is_loopback() || !self.allow.is_empty() || self.token.is_some() {
            return Ok(());
        }
        Err(format!(
            "refusing to serve Wyoming on {addr}: anyone who reaches it could unlock the doors. \
             Name the peers that may connect ([doors.wyoming] allow = [\"192.168.1.20\"], \
             Home Assistant's address), or set {token_env} to a long random secret that \
             satellites send first, or bind 127.0.0.1"
        ))
    }

    /// Let in by address alone.
    fn by_address(&self, peer: IpAddr) -> bool {
        self.allow.iter().any(|range| range.contains(&peer))
            || (self.token.is_none() && peer.is_loopback())
    }

    /// The secret, compared in constant time.
    fn by_token(&self, given: Option<&str>) -> bool {
        match (&self.token, given) {
            (Some(token), Some(given)) => {
                crate::server::auth::same_secret(given.trim(), token.as_str())
            }
            _ => false,
        }
    }
}

/// The door: the engine, who may use it, what was heard lately, and the
/// limits that keep one peer from exhausting the service.
#[derive(Clone)]
struct Door {
    state: AppState,
    admission: Admission,
    heard: Arc<Mutex<VecDeque<Heard>>>,
    /// Connections served at once.
    connections: Arc<Slots>,
    /// A connection silent this long is closed.
    idle: Duration,
}

impl Door {
    fn remember(&self, heard: Heard) {
        let mut recent = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|h| h.at.elapsed() < LINK_WITHIN);
        recent.push_back(heard);
        while recent.len() > 64 {
            recent.pop_front();
        }
    }

    /// The audio a text to handle was heard in, if this client's speech was
    /// heard here lately.
    fn heard_as(&self, client: &str, text: &str) -> Option<Heard> {
        let key = key_of(text);
        let mut recent = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|h| h.at.elapsed() < LINK_WITHIN);
        let at = recent
            .iter()
            .rposition(|h| h.client == client && h.text == key)?;
        recent.remove(at)
    }
}

fn key_of(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Serves Wyoming on `listener` until the service closes; `admission`
/// says who may use it.
pub async fn serve(listener: TcpListener, state: AppState, admission: Admission) {
    let mut closing = state.closing.subscribe();
    let limits = state.engine.config().doors.wyoming.clone();
    let door = Door {
        state,
        admission,
        heard: Arc::new(Mutex::new(VecDeque::new())),
        connections: Slots::new(limits.max_connections),
        idle: Duration::from_secs(limits.idle_seconds),
    };
    let mut backoff = crate::server::Backoff::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    backoff.reset();
                    // At the cap, the connection idle longest gives way; with
                    // every one busy, the new one is closed at once.
                    let held = match door.connections.admit() {
                        Admitted::Yes { held, evicted } => {
                            if evicted {
                                backoff.note("wyoming: at the connection cap: the longest idle connection gave way to a new one");
                            }
                            held
                        }
                        Admitted::Full => {
                            backoff.note("wyoming: at the connection cap with every connection busy: a new one was closed on arrival");
                            continue;
                        }
                    };
                    let door = door.clone();
                    tokio::spawn(async move {
                        let _ = stream.set_nodelay(true);
                        let slot = held.slot.clone();
                        tokio::select! {
                            () = connection(door, stream, peer, &slot) => {}
                            () = slot.evicted() => {}
                        }
                        drop(held);
                    });
                }
                // Out of descriptors (or another passing failure): wait a
                // little longer each time rather than spin, and say so once.
                Err(e) => backoff.wait(&format!("wyoming: cannot accept a connection: {e}")).await,
            },
            _ = closing.changed() => {
                if *closing.borrow() {
                    return;
                }
            }
        }
    }
}

/// Audio being received for a transcription.
struct Listening {
    width: u16,
    channels: u16,
    /// Its chunks join as the audio was (one resampler for the stream).
    resampler: audio::Resampler,
    samples: Vec<f32>,
    language: Option<String>,
}

/// Whether the peer may go on: by its address, or by the secret in its
/// first event (which is then answered by nothing, as the protocol drops
/// events it does not know).
async fn admitted(
    door: &Door,
    reader: &mut BufReader<OwnedReadHalf>,
    write: &mut OwnedWriteHalf,
    peer: SocketAddr,
) -> bool {
    if door.admission.by_address(peer.ip()) {
        return true;
    }
    let first = tokio::time::timeout(AUTH_WITHIN, read_event(reader)).await;
    let token = match &first {
        Ok(Ok(Some(e))) if e.kind == AUTH_EVENT => e.data.get("token").and_then(Value::as_str),
        _ => None,
    };
    if door.admission.by_token(token) {
        return true;
    }
    let (code, text) = if token.is_some() {
        ("auth.failed", "the secret is wrong".to_owned())
    } else {
        (
            "auth.required",
            format!(
                "{} may not use CAAL's Wyoming door: add it to [doors.wyoming] allow, or send \
                 {{\"type\": \"{AUTH_EVENT}\", \"data\": {{\"token\": …}}}} first with the shared secret",
                peer.ip()
            ),
        )
    };
    tracing::warn!(peer = %peer.ip(), code, "wyoming: peer refused");
    let _ = send(write, &error(code, &text)).await;
    false
}

async fn connection(door: Door, stream: TcpStream, peer: SocketAddr, slot: &Arc<Slot>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    if !admitted(&door, &mut reader, &mut write, peer).await {
        return;
    }
    let client = peer.ip().to_string();
    let mut listening: Option<Listening> = None;
    let mut language: Option<String> = None;
    loop {
        let event = match tokio::time::timeout(door.idle, read_event(&mut reader)).await {
            Ok(Ok(Some(e))) => e,
            Ok(Ok(None)) => return,
            // Silent (or a byte at a time) for longer than the door waits.
            Err(_) => {
                tracing::debug!(%peer, "wyoming: idle connection closed");
                return;
            }
            Ok(Err(e)) => {
                let said = crate::safety::global().scrub(&e.to_string()).into_owned();
                tracing::warn!(%peer, code = e.code(), error = %said, "wyoming: malformed event");
                let _ = send(&mut write, &error(e.code(), &said)).await;
                return;
            }
        };
        // Busy while the event is answered: only a connection waiting for
        // its next event gives way to a newcomer.
        let _busy = slot.busy();
        let answers = match event.kind.as_str() {
            "describe" => vec![info(&door.state.engine)],
            "ping" => vec![Event::new(
                "pong",
                json!({"text": event.data.get("text").cloned().unwrap_or(Value::Null)}),
            )],
            "transcribe" => {
                language = event
                    .data
                    .get("language")
                    .and_then(|l| l.as_str())
                    .map(str::to_owned);
                Vec::new()
            }
            "audio-start" => match audio_format(&event.data) {
                Ok((rate, width, channels)) => {
                    listening = Some(Listening {
                        resampler: audio::Resampler::new(rate, audio::RATE),
                        width,
                        channels,
                        samples: Vec::new(),
                        language: language.clone(),
                    });
                    Vec::new()
                }
                Err(message) => vec![error("audio.invalid", &message)],
            },
            "audio-chunk" => match listening.as_mut() {
                Some(l) => match l.add(&event.payload) {
                    Ok(()) => Vec::new(),
                    Err(message) => {
                        listening = None;
                        vec![error("audio.invalid", &message)]
                    }
                },
                // Audio nobody asked to transcribe (a satellite's stream between
                // requests) is dropped.
                None => Vec::new(),
            },
            "audio-stop" => match listening.take() {
                Some(mut l) => {
                    let tail = l.resampler.finish();
                    l.samples.extend(tail);
                    language = None;
                    vec![transcribe(&door, &client, l).await]
                }
                None => Vec::new(),
            },
            "transcript" => vec![handle(&door, &client, &event.data).await],
            "synthesize" => {
                if synthesize(&door, &event.data, &mut write).await.is_err() {
                    return;
                }
                Vec::new()
            }
            _ => Vec::new(),
        };
        for answer in &answers {
            if send(&mut write, answer).await.is_err() {
                return;
            }
        }
    }
}

async fn send(write: &mut OwnedWriteHalf, event: &Event) -> std::io::Result<()> {
    write.write_all(&event.encode()).await?;
    write.flush().await
}

fn error(code: &str, text: &str) -> Event {
    Event::new("error", json!({"text": text, "code": code}))
}

fn audio_format(data: &Map<String, Value>) -> Result<(u32, u16, u16), String> {
    let field = |name: &str| data.get(name).and_then(Value::as_u64);
    let rate = field("rate").ok_or("audio-start needs \"rate\" (samples per second)")?;
    let width = field("width").ok_or("audio-start needs \"width\" (bytes per sample)")?;
    let channels = field("channels").ok_or("audio-start needs \"channels\"")?;
    if !(1_000..=384_000).contains(&rate) {
        return Err(format!("rate {rate} is outside 1000–384000 Hz"));
    }
    if width != 2 {
        return Err(format!(
            "width {width} is not supported; send 16-bit PCM (width 2)"
        ));
    }
    if !(1..=8).contains(&channels) {
        return Err(format!("channels {channels} is outside 1–8"));
    }
    Ok((rate as u32, width as u16, channels as u16))
}

impl Listening {
    /// Appends a chunk as 16 kHz mono.
    fn add(&mut self, pcm: &[u8]) -> Result<(), String> {
        let frame = usize::from(self.width) * usize::from(self.channels);
        if !pcm.len().is_multiple_of(frame) {
            return Err(format!(
                "an audio-chunk of {} bytes is not whole frames of {frame} bytes",
                pcm.len()
            ));
        }
        let interleaved = audio::pcm16_to_f32(pcm);
        let channels = usize::from(self.channels);
        let mono: Vec<f32> = interleaved
            .chunks_exact(channels)
            .map(|f| f.iter().sum::<f32>() / channels as f32)
            .collect();
        let resampled = self.resampler.push(&mono);
        if self.samples.len() + resampled.len() > MAX_SAMPLES {
            return Err(
                "more than a minute of audio in one transcription; send one request at a time"
                    .into(),
            );
        }
        self.samples.extend(resampled);
        Ok(())
    }
}

/// Whisper hears what was sent (one transcription at a time per spare
/// core: `AppState::speech`); speech is kept and remembered for handling.
async fn transcribe(door: &Door, client: &str, l: Listening) -> Event {
    let Ok(_turn) = door.state.speech.clone().acquire_owned().await else {
        return error("stt.failed", "the service is closing");
    };
    let engine = door.state.engine.clone();
    let samples: std::sync::Arc<[f32]> = std::sync::Arc::from(l.samples);
    let heard_in = samples.clone();
    let done = tokio::task::spawn_blocking(move || -> Result<_, String> {
        let stt = engine.stt().map_err(|e| e.to_string())?;
        let transcript = stt.transcribe(&samples).map_err(|e| e.to_string())?;
        let Some(text) = engine.speech_of(&transcript) else {
            return Ok((String::new(), transcript, None));
        };
        let kept = engine.keep_streamed(&samples).map_err(|e| e.to_string())?;
        Ok((text, transcript, Some(kept)))
    })
    .await;
    match done {
        Ok(Ok((text, mut transcript, kept))) => {
            let text = crate::safety::global().scrub(&text).into_owned();
            let language = l.language.unwrap_or_else(|| transcript.language.clone());
            if let Some(audio) = kept {
                transcript.text = text.clone();
                door.remember(Heard {
                    client: client.to_owned(),
                    text: key_of(&text),
                    transcript,
                    audio,
                    samples: heard_in,
                    at: Instant::now(),
                });
            }
            Event::new("transcript", json!({"text": text, "language": language}))
        }
        Ok(Err(e)) => {
            let said = crate::safety::global().scrub(&e).into_owned();
            tracing::warn!(error = %said, "wyoming: transcription failed");
            error("stt.failed", &said)
        }
        Err(e) => error("stt.failed", &e.to_string()),
    }
}

/// A text to handle is a round of this client's; heard from it here
/// lately, a voice round with its audio.
async fn handle(door: &Door, client: &str, data: &Map<String, Value>) -> Event {
    // Arrived now, whatever the round waits for.
    let origin = door.state.engine.origin(AuthDoor::Wyoming, client);
    // Where the satellite is: what it says, else where it is configured to
    // be (by Home Assistant's satellite id, else by its address).
    let context = data.get("context");
    let said_area = context.and_then(|c| c.get("area")).and_then(Value::as_str);
    let areas = &door.state.engine.config().doors.wyoming.areas;
    let configured = context
        .and_then(|c| c.get("satellite_id"))
        .and_then(Value::as_str)
        .and_then(|s| areas.get(s))
        .or_else(|| areas.get(client));
    let area = match said_area.or(configured.map(String::as_str)) {
        Some(said) => match door.state.engine.area(said) {
            Ok(area) => Some(area),
            // Said back, as Home Assistant speaks a text it was not handled with.
            Err(e) => return Event::new("not-handled", json!({"text": e})),
        },
        None => None,
    };
    let origin = origin.in_area(area);
    let Some(text) = data.get("text").and_then(Value::as_str) else {
        return error(
            "transcript.invalid",
            "a transcript to handle needs \"text\"",
        );
    };
    let given = data
        .get("context")
        .and_then(|c| c.get("conversation_id"))
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty());
    let conversation = match conversation_of(given, client) {
        Ok(c) => c,
        Err(message) => return error("conversation_id.invalid", &message),
    };
    let heard = door.heard_as(client, text);
    let (engine, text, id) = (
        door.state.engine.clone(),
        text.to_owned(),
        conversation.clone(),
    );
    let done = tokio::task::spawn_blocking(move || match heard {
        Some(h) => engine.voice_round(&origin, &id, &h.transcript, &h.audio, Some(h.samples)),
        None => engine.round_from(&origin, &id, &text, Channel::Api),
    })
    .await;
    match done {
        Ok(Ok(round)) => answered(&round, &conversation),
        Ok(Err(e)) => {
            let said = crate::safety::global().scrub(&e.to_string()).into_owned();
            tracing::warn!(error = %said, "wyoming: the round failed");
            Event::new("not-handled", json!({"text": said}))
        }
        Err(e) => error("round.failed", &e.to_string()),
    }
}

/// The conversation, in the door's own namespace: the one Home Assistant
/// names (its ULID, as `wyoming:01J…`), else this client's own.
fn conversation_of(given: Option<&str>, client: &str) -> Result<ConversationId, String> {
    let namespace = AuthDoor::Wyoming.namespace().unwrap_or_default();
    let Some(id) = given else {
        return format!("{namespace}{client}")
            .parse()
            .map_err(|e: crate::ids::InvalidId| e.to_string());
    };
    let id = id.trim();
    let id = id.strip_prefix(namespace).unwrap_or(id);
    format!("{namespace}{id}")
        .parse::<ConversationId>()
        .or_else(|_| {
            // Characters CAAL's ids do not take: the same conversation under a
            // derived name.
            let hash = crate::crypto::sha256_tagged(id.as_bytes());
            format!("{namespace}h-{}", &hash.trim_start_matches("sha256:")[..16])
                .parse()
                .map_err(|e: crate::ids::InvalidId| e.to_string())
        })
}

/// Routes that mean CAAL did not understand: Home Assistant is told so
/// (`not-handled`), with what CAAL said.
const NOT_UNDERSTOOD: &[&str] = &["intent.clarify", "intent.incoherent", "intent.unmatched"];

fn answered(round: &RoundResult, conversation: &ConversationId) -> Event {
    let handled = round.status != "failed" && !NOT_UNDERSTOOD.contains(&round.route_code.as_str());
    let context = json!({
        "conversation_id": conversation.as_str(),
        "round_id": round.round_id,
        "route_code": round.route_code,
        "status": round.status,
        "pending_confirmation": round.pending_confirmation.is_some(),
    });
    Event::new(
        if handled { "handled" } else { "not-handled" },
        json!({"text": round.reply, "context": context}),
    )
}

/// The speaker (the Piper voice, else espeak-ng) speaks the text, a piece
/// at a time (`tts::pieces`), each sent as mono 16-bit chunks at its rate
/// as soon as it is spoken: a long text never becomes one long buffer.
/// Text over `tts::MAX_CHARS` is refused by name.
/// `Err` when the peer went away.
async fn synthesize(
    door: &Door,
    data: &Map<String, Value>,
    write: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    let Some(text) = data.get("text").and_then(Value::as_str) else {
        return send(
            write,
            &error("synthesize.invalid", "synthesize needs \"text\""),
        )
        .await;
    };
    let chars = text.chars().count();
    if chars > tts::MAX_CHARS {
        let said = format!(
            "the text to speak is {chars} characters; at most {} are spoken at once, so send it in parts",
            tts::MAX_CHARS
        );
        return send(write, &error("synthesize.too_long", &said)).await;
    }
    let engine = &door.state.engine;
    // The configured speaker (the Piper voice, else espeak-ng); a voice
    // named that is not its own is espeak-ng's, as before Piper.
    let mut speaker = engine.speaker();
    if let Some(named) = data
        .get("voice")
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .filter(|n| *n != speaker.name().1)
    {
        speaker = Arc::new(tts::Speaker::Espeak(named.to_owned()));
    }
    if matches!(*speaker, tts::Speaker::Silent) {
        return send(
            write,
            &error(
                "tts.unavailable",
                "no voice is configured (voice.piper and voice.tts_voice are empty)",
            ),
        )
        .await;
    }
    let format = json!({"rate": speaker.rate(), "width": 2, "channels": 1});
    send(write, &Event::new("audio-start", format.clone())).await?;
    for piece in tts::pieces(text) {
        let Ok(turn) = door.state.speech.clone().acquire_owned().await else {
            break;
        };
        let (piece, speaker) = (piece.to_owned(), speaker.clone());
        let spoken = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            speaker.speak(&piece).map_err(|e| e.to_string())
        })
        .await;
        let samples = match spoken {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return send(write, &error("tts.failed", &e)).await,
            Err(e) => return send(write, &error("tts.failed", &e.to_string())).await,
        };
        for chunk in samples.chunks(CHUNK_SAMPLES) {
            let mut e = Event::new("audio-chunk", format.clone());
            e.payload = audio::f32_to_pcm16(chunk);
            send(write, &e).await?;
        }
    }
    send(write, &Event::new("audio-stop", json!({}))).await
}

/// Who speaks: the Piper voice when it is loaded, and espeak-ng (its
/// fallback, and any espeak-ng voice a request names).
fn tts_programs(engine: &Engine, language: &str) -> Value {
    let espeak = json!({"name": "eSpeak NG", "url": "https://github.com/espeak-ng/espeak-ng"});
    let mut programs = Vec::new();
    let speaker = engine.speaker();
    if let tts::Speaker::Piper(voice) = &*speaker {
        let piper = json!({"name": "Piper", "url": "https://github.com/OHF-Voice/piper1-gpl"});
        programs.push(json!({
            "name": "piper", "description": "Piper, CAAL's natural voice (ONNX Runtime), a sentence at a time",
            "attribution": piper, "installed": true, "version": null,
            "voices": [{"name": voice.name, "description": "Piper voice", "attribution": piper,
                        "installed": true, "version": null, "languages": [language]}],
            "supports_synthesize_streaming": false,
        }));
    }
    let fallback = &engine.config().voice.tts_voice;
    let fallback = if fallback.is_empty() {
        "en-us"
    } else {
        fallback
    };
    programs.push(json!({
        "name": "espeak-ng", "description": "espeak-ng, CAAL's fallback voice",
        "attribution": espeak, "installed": true, "version": null,
        "voices": [{"name": fallback, "description": "espeak-ng voice", "attribution": espeak,
                    "installed": true, "version": null, "languages": [language]}],
        "supports_synthesize_streaming": false,
    }));
    Value::Array(programs)
}

/// What CAAL offers: speech to text, handling, text to speech.
fn info(engine: &Engine) -> Event {
    let config = engine.config();
    let version = env!("CARGO_PKG_VERSION");
    let caal = json!({"name": "CAAL", "url": ""});
    let language = config.understand.language.clone();
    let asr_languages = match config.voice.language.as_str() {
        "auto" => vec![language.clone()],
        l => vec![l.to_owned()],
    };
    let model = config.voice.model.clone();
    Event::new(
        "info",
        json!({
            "asr": [{
                "name": "caal-whisper",
                "description": "CAAL's speech to text (whisper.cpp); speech is kept and hashed in CAAL's trace",
                "attribution": caal, "installed": true, "version": version,
                "models": [{
                    "name": model, "description": format!("whisper {model}"),
                    "attribution": {"name": "OpenAI Whisper", "url": "https://github.com/openai/whisper"},
                    "installed": true, "version": null, "languages": asr_languages,
                }],
                "supports_transcript_streaming": false,
            }],
            "handle": [{
                "name": "caal",
                "description": "CAAL: each request understood, gated by its authority level, run and recorded",
                "attribution": caal, "installed": true, "version": version,
                "models": [{
                    "name": "caal-router", "description": "CAAL's router (rules, sentence templates, meaning, model)",
                    "attribution": caal, "installed": true, "version": version,
                    "languages": [language],
                }],
                "supports_handled_streaming": false,
                "supports_home_control": true,
            }],
            "tts": tts_programs(engine, &language),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<Option<Event>, FrameError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut reader = bytes;
        runtime.block_on(read_event(&mut reader))
    }

    #[test]
    fn an_event_reads_back_as_written_with_data_and_payload() {
        let mut e = Event::new(
            "audio-chunk",
            json!({"rate": 16000, "width": 2, "channels": 1}),
        );
        e.payload = vec![1, 2, 3, 4];
        let back = read(&e.encode()).unwrap().unwrap();
        assert_eq!(back.kind, "audio-chunk");
        assert_eq!(back.data["rate"], 16000);
        assert_eq!(back.payload, vec![1, 2, 3, 4]);
        // Data in the header line (older peers) merges with data after it.
        let older = b"{\"type\":\"transcript\",\"data\":{\"text\":\"hi\"}}\n";
        assert_eq!(read(older).unwrap().unwrap().data["text"], "hi");
        assert!(read(b"").unwrap().is_none());
    }

    #[test]
    fn malformed_events_are_named_errors_never_panics() {
        let cases: &[(&[u8], &str)] = &[
            (b"not json\n", "event.invalid"),
            (b"{\"data\":{}}\n", "event.invalid"),
            (b"{\"type\":\"x\",\"payload_length\":-1}\n", "event.invalid"),
            (
                b"{\"type\":\"x\",\"payload_length\":99999999}\n",
                "event.too_large",
            ),
            (
                b"{\"type\":\"x\",\"data_length\":5}\nabc",
                "event.truncated",
            ),
            (
                b"{\"type\":\"x\",\"data_length\":2}\n[]",
                "event.data_invalid",
            ),
            (b"{\"type\":\"x\"", "event.truncated"),
        ];
        for (bytes, code) in cases {
            let err = read(bytes).expect_err("refused");
            assert_eq!(
                err.code(),
                *code,
                "{}: {err}",
                String::from_utf8_lossy(bytes)
            );
        }
        // A million blank lines are skipped, not recursed into.
        let blank = [vec![b'\n'; 1_000_000], b"{\"type\":\"ping\"}\n".to_vec()].concat();
        assert_eq!(read(&blank).unwrap().unwrap().kind, "ping");
        let long = [b"{\"type\":\"".as_slice(), &vec![b'a'; 70_000], b"\"}\n"].concat();
        assert_eq!(read(&long).unwrap_err().code(), "event.invalid");
    }

    #[test]
    fn audio_formats_outside_16_bit_pcm_are_refused_by_name() {
        let format = |v: Value| audio_format(v.as_object().unwrap());
        assert!(format(json!({"rate": 22050, "width": 2, "channels": 2})).is_ok());
        assert!(
            format(json!({"rate": 16000, "width": 4, "channels": 1}))
                .unwrap_err()
                .contains("16-bit")
        );
        assert!(
            format(json!({"rate": 16000, "width": 2}))
                .unwrap_err()
                .contains("channels")
        );
        let mut l = Listening {
            resampler: audio::Resampler::new(16000, audio::RATE),
            width: 2,
            channels: 2,
            samples: Vec::new(),
            language: None,
        };
        assert!(l.add(&[0, 0, 0]).unwrap_err().contains("whole frames"));
        l.add(&[0, 64, 0, 64]).unwrap();
        assert_eq!(l.samples.len(), 1);
    }

    #[test]
    fn home_assistants_conversation_ids_are_kept_or_mapped_in_the_doors_namespace() {
        let peer = "192.168.1.20";
        assert_eq!(
            conversation_of(None, peer).unwrap().as_str(),
            "wyoming:192.168.1.20"
        );
        assert_eq!(
            conversation_of(Some("01JD5Z7KXQ8M3V2N6R4T9W0ABC"), peer)
                .unwrap()
                .as_str(),
            "wyoming:01JD5Z7KXQ8M3V2N6R4T9W0ABC"
        );
        // No peer reaches another door's conversations by naming them.
        for other in ["default", "openai:ab12cd", "mcp:default"] {
            let named = conversation_of(Some(other), peer).unwrap();
            assert_eq!(named.as_str(), format!("wyoming:{other}"));
        }
        assert_eq!(
            conversation_of(Some("wyoming:abc"), peer).unwrap().as_str(),
            "wyoming:abc"
        );
        let mapped = conversation_of(Some("kitchen satellite #1"), peer).unwrap();
        assert!(mapped.as_str().starts_with("wyoming:h-"), "{mapped:?}");
        assert_eq!(
            mapped,
            conversation_of(Some("kitchen satellite #1"), peer).unwrap()
        );
    }

    #[test]
    fn peers_are_let_in_by_list_by_secret_or_on_loopback_without_one() {
        let config = |allow: &[&str]| WyomingConfig {
            allow: allow.iter().map(|a| a.to_string()).collect(),
            ..WyomingConfig::default()
        };
        let ip = |a: &str| a.parse::<IpAddr>().unwrap();
        let open = Admission::new(&config(&[]), &|_| None);
        assert!(open.by_address(ip("127.0.0.1")) && open.by_address(ip("::1")));
        assert!(!open.by_address(ip("192.168.1.20")));
        let lan: SocketAddr = "0.0.0.0:10300".parse().unwrap();
        let refused = open.check_bind(lan, "CAAL_WYOMING_TOKEN").unwrap_err();
        assert!(
            refused.contains("allow") && refused.contains("CAAL_WYOMING_TOKEN"),
            "{refused}"
        );
        assert!(
            open.check_bind("127.0.0.1:10300".parse().unwrap(), "X")
                .is_ok()
        );

        let listed = Admission::new(&config(&["192.168.1.0/24"]), &|_| None);
        assert!(listed.by_address(ip("192.168.1.20")) && !listed.by_address(ip("10.0.0.1")));
        assert!(listed.check_bind(lan, "X").is_ok());

        let secret = Admission::new(&config(&[]), &|k| {
            (k == "CAAL_WYOMING_TOKEN").then(|| "a-long-shared-secret".to_owned())
        });
        // With a secret set, loopback sends it too.
        assert!(!secret.by_address(ip("127.0.0.1")));
        assert!(secret.by_token(Some("a-long-shared-secret")));
        assert!(!secret.by_token(Some("a-long-shared-secreT")) && !secret.by_token(None));
        assert!(!open.by_token(Some("anything")));
        assert!(secret.check_bind(lan, "X").is_ok());
    }
}
