//! `GET /voice/stream`: speech over a WebSocket, and LiveKit's webhooks.
//!
//! The client sends JSON control messages and binary frames of 16-bit
//! little-endian mono PCM:
//!
//! - `{"type":"start","token":T,"conversation_id":C,"sample_rate":R,"tts":B,"wake":W}`
//!   first (the API token goes here: a browser cannot set headers on a
//!   WebSocket); then PCM frames at rate R. `wake` (default: on when
//!   `voice.wake.model` names one) hears only speech that says the wake
//!   word or starts within `voice.wake.listen_ms` of it, or answers a
//!   question: a `wake` message when the phrase is heard (it stops a reply
//!   being spoken), `not_addressed` for an utterance dropped unheard (not
//!   transcribed, kept or recorded); the phrase is taken off the transcript;
//! - `{"type":"end"}` when the speaker is done (push-to-talk released): an
//!   utterance under way ends there instead of after the silence.
//!
//! The server answers `ready` (with the wake phrase, if one is on), then
//! per utterance `speech_started`,
//! `partial` transcripts while it goes on, `final` (text, confidence, audio
//! id and hash), `result` (the round, as `POST /api/chat` returns it) or
//! `no_speech`, and with `tts` the spoken reply sentence by sentence: per
//! piece a `reply_audio` message (`piece`, `pieces`, `ms`, `round_id`)
//! followed by the piece as one binary WAV message, the first sent as soon
//! as it is spoken, for the client to play one after another. Speech that
//! starts while a reply is playing stops it (barge-in): no more pieces are
//! sent, a `barge_in` message tells the client to stop what it plays, and
//! the new utterance is heard whole, its round recording the reply it
//! stopped (`input.received.interrupted`). When a timer or reminder of the
//! conversation rings, a `notification` message (and with `tts` its
//! spoken pieces) comes unasked. Errors are `error` messages with a code;
//! a bad start closes the socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::{
    body::Bytes,
    extract::{
        State,
        ws::{Message, WebSocket, WebSocketUpgrade},
    },
    http::HeaderMap,
    response::Response,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{AppError, AppState, auth};
use crate::ids::ConversationId;
use crate::trace::events::Interruption;
use crate::voice::{
    Stt, VadEvent, audio,
    tts::Speaker,
    wake::{WakeStream, WakeWord},
};

/// Longest a client may wait before sending `start`.
const START_WITHIN: Duration = Duration::from_secs(10);
/// Largest binary frame accepted (a second of 48 kHz audio is 96 KB).
const MAX_FRAME: usize = 256 * 1024;

#[derive(Deserialize)]
struct Start {
    token: String,
    conversation_id: Option<String>,
    sample_rate: Option<u32>,
    #[serde(default)]
    tts: bool,
    /// Hear only speech that says the wake word (or starts soon after
    /// it); unset: as `voice.wake.model` says.
    wake: Option<bool>,
    /// The area the microphone is in ("turn on the lights" acts there).
    area: Option<String>,
}

pub(super) async fn stream(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(MAX_FRAME)
        .on_upgrade(move |socket| session(state, socket))
}

async fn send(socket: &mut WebSocket, v: Value) -> bool {
    socket
        .send(Message::Text(v.to_string().into()))
        .await
        .is_ok()
}

async fn refuse(mut socket: WebSocket, code: &str, message: &str) {
    let _ = send(
        &mut socket,
        json!({"type": "error", "code": code, "message": message}),
    )
    .await;
    let _ = socket.send(Message::Close(None)).await;
}

/// One streaming voice conversation.
async fn session(state: AppState, mut socket: WebSocket) {
    let first = tokio::time::timeout(START_WITHIN, socket.recv()).await;
    let start: Start = match first {
        Ok(Some(Ok(Message::Text(t)))) => match serde_json::from_str(&t) {
            Ok(s) => s,
            Err(e) => {
                return refuse(
                    socket,
                    "start.invalid",
                    &format!("the first message must be {{\"type\":\"start\",\"token\":…}}: {e}"),
                )
                .await;
            }
        },
        _ => {
            return refuse(
                socket,
                "start.missing",
                "send {\"type\":\"start\",\"token\":…} first",
            )
            .await;
        }
    };
    if !auth::authorized(Some(&format!("Bearer {}", start.token)), &state.token) {
        return refuse(
            socket,
            "unauthorized",
            "the token is wrong; it is in the data dir's api_token",
        )
        .await;
    }
    let conversation: ConversationId = match start
        .conversation_id
        .as_deref()
        .unwrap_or("default")
        .parse()
    {
        Ok(c) => c,
        Err(e) => return refuse(socket, "conversation_id.invalid", &format!("{e}")).await,
    };
    let area = match start.area.as_deref().map(|a| state.engine.area(a)) {
        Some(Err(e)) => return refuse(socket, "area.unknown", &e).await,
        Some(Ok(area)) => Some(area),
        None => None,
    };
    let rate = start.sample_rate.unwrap_or(audio::RATE);
    if !(8_000..=192_000).contains(&rate) {
        return refuse(
            socket,
            "sample_rate.invalid",
            "sample_rate must be between 8000 and 192000",
        )
        .await;
    }
    let engine = state.engine.clone();
    let stt = match tokio::task::spawn_blocking(move || engine.stt()).await {
        Ok(Ok(stt)) => stt,
        Ok(Err(e)) => return refuse(socket, "stt.unavailable", &e.to_string()).await,
        Err(e) => return refuse(socket, "stt.unavailable", &e.to_string()).await,
    };
    let engine = state.engine.clone();
    let wake_word = match tokio::task::spawn_blocking(move || engine.wake_word()).await {
        Ok(Ok(w)) => w,
        Ok(Err(e)) if start.wake != Some(false) => {
            return refuse(socket, "wake.unavailable", &e).await;
        }
        Ok(Err(_)) => None,
        Err(e) => return refuse(socket, "wake.unavailable", &e.to_string()).await,
    };
    let mut wake = match (start.wake, wake_word) {
        (Some(false), _) => None,
        (_, Some(word)) => Some(Wakeful::new(word, &state.engine.config().voice.wake)),
        (Some(true), None) => {
            return refuse(
                socket,
                "wake.unavailable",
                "no wake word is configured: set voice.wake.model (e.g. \"openwakeword-0.5.1/hey_jarvis_v0.1.onnx\", installed by `bash .ci/setup`; CC BY-NC-SA 4.0, non-commercial)",
            )
            .await;
        }
        (None, None) => None,
    };
    // The voice is loaded while the person speaks (its first use waits for
    // it then), not before "ready": the microphone is already on.
    let engine = state.engine.clone();
    let mut speaker = Voice::Loading(tokio::task::spawn_blocking(move || {
        if start.tts {
            engine.speaker()
        } else {
            Arc::new(Speaker::Silent)
        }
    }));
    let cfg = state.engine.config().voice.clone();
    if !send(
        &mut socket,
        json!({"type": "ready", "model": stt.model(), "sample_rate": rate,
               "wake": wake.as_ref().map(|w| w.word.phrase.clone())}),
    )
    .await
    {
        return;
    }
    let mut vad = state.engine.vad();
    // A transcription started when the speaker paused, and a partial
    // transcript being made (each stopped when dropped).
    let mut guess: Option<Guess> = None;
    let mut partial: Option<Transcribing> = None;
    // One resampler for the whole stream: frames join as the audio was.
    let mut resampler = audio::Resampler::new(rate, audio::RATE);
    let mut heard_ms = 0u64;
    let mut last_partial_ms = 0u64;
    let mut rang = state.engine.notifications();
    // The reply being spoken, and the one speech stopped (for its round).
    let mut playing: Option<Playing> = None;
    let mut barged: Option<Interruption> = None;
    loop {
        let message = tokio::select! {
            m = socket.recv() => match m {
                Some(Ok(m)) => m,
                _ => break,
            },
            // A timer or reminder of this conversation rang: say so.
            n = rang.recv() => {
                if let Ok(n) = n
                    && n.conversation_id == conversation.as_str()
                {
                    if !send(&mut socket, json!({"type": "notification", "notification": n})).await {
                        return;
                    }
                    if start.tts {
                        let rang = (n.round_id.clone(), None);
                        playing = Playing::start(speaker.get().await, n.text.clone(), rang);
                    }
                }
                continue;
            }
            // The next piece of the reply is spoken: send it.
            piece = next_piece(&mut playing) => {
                // An answer is awaited after the reply is heard.
                if let (Some(w), Some(Ok((_, ms)))) = (wake.as_mut(), &piece) {
                    w.window.extend(*ms);
                }
                if let Some(p) = playing.as_mut()
                    && !p.send(&mut socket, piece).await
                {
                    return;
                }
                continue;
            }
        };
        let events = match message {
            Message::Binary(bytes) => {
                let samples = resampler.push(&audio::pcm16_to_f32(&bytes));
                heard_ms += samples.len() as u64 * 1000 / u64::from(audio::RATE);
                // The wake word first: an utterance it is in ends later.
                if let Some(w) = wake.as_mut() {
                    match w.hear(&samples) {
                        Ok(Some(heard)) => {
                            // Said over a reply, it stops it.
                            let mut ok = true;
                            if let Some(p) = playing.take_if(|p| p.audible()) {
                                let stopped = p.stop(heard_ms.saturating_sub(heard.at_ms) as f64);
                                ok = send(&mut socket, barge_in(&stopped)).await;
                                barged = Some(stopped);
                            }
                            if !ok
                                || !send(
                                    &mut socket,
                                    json!({"type": "wake", "phrase": w.word.phrase,
                                "score": heard.score, "at_ms": heard.at_ms}),
                                )
                                .await
                            {
                                return;
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let _ = send(&mut socket, json!({"type": "error", "code": "wake.failed", "message": e.to_string()})).await;
                            return;
                        }
                    }
                }
                vad.push(&samples)
            }
            Message::Text(t) => match serde_json::from_str::<Value>(&t)
                .ok()
                .and_then(|v| v["type"].as_str().map(str::to_owned))
                .as_deref()
            {
                Some("end") => {
                    let mut events = vad.push(&resampler.finish());
                    resampler = audio::Resampler::new(rate, audio::RATE);
                    events.extend(vad.finish().map(VadEvent::Ended));
                    events
                }
                _ => {
                    if !send(&mut socket, json!({"type": "error", "code": "message.unknown", "message": "send PCM frames, or {\"type\":\"end\"}"})).await {
                        return;
                    }
                    continue;
                }
            },
            Message::Close(_) => break,
            _ => continue,
        };
        for event in events {
            let ok = match event {
                VadEvent::Started { at_ms } => {
                    last_partial_ms = heard_ms;
                    // Speech over a reply stops it (barge-in).
                    // (With a wake word, only the wake word does.)
                    let mut ok = true;
                    if wake.is_none()
                        && let Some(p) = playing.take_if(|p| p.audible())
                    {
                        // The detector's start keeps its pre-roll before the onset.
                        let onset = at_ms + u64::from(cfg.vad.pre_roll_ms);
                        let stopped = p.stop(heard_ms.saturating_sub(onset) as f64);
                        ok = send(&mut socket, barge_in(&stopped)).await;
                        barged = Some(stopped);
                    }
                    ok && send(
                        &mut socket,
                        json!({"type": "speech_started", "at_ms": at_ms}),
                    )
                    .await
                }
                VadEvent::Dropped { .. } => send(&mut socket, json!({"type": "no_speech"})).await,
                VadEvent::Ended(u) if wake.as_ref().is_some_and(|w| !w.window.takes(&u)) => {
                    // Not said to CAAL: dropped unheard (no transcript,
                    // no audio kept, nothing recorded).
                    guess = None;
                    send(&mut socket, json!({"type": "not_addressed", "start_ms": u.start_ms, "end_ms": u.end_ms})).await
                }
                VadEvent::Ended(u) => {
                    // Its transcript needs the cores now.
                    partial = None;
                    let word = wake
                        .as_mut()
                        .map(|w| (w.word.clone(), w.window.must_prove(&u), w.margin));
                    let heard = utterance(
                        &state,
                        &mut socket,
                        (&stt, guess.take(), word),
                        (&conversation, area.as_deref()),
                        u,
                        barged.take(),
                    )
                    .await;
                    // A round ends what the wake word opened; a question
                    // keeps it open for the answer (from now, and while
                    // the question is spoken); a false wake closes it.
                    if let Some(w) = wake.as_mut() {
                        match &heard {
                            Some(Outcome::Round(r)) if r.pending_confirmation.is_some() => {
                                w.window.open_from(heard_ms)
                            }
                            Some(Outcome::Round(_) | Outcome::FalseWake) => w.window.close(),
                            _ => {}
                        }
                    }
                    match heard {
                        None => false,
                        Some(Outcome::Round(round)) if start.tts && !round.reply.is_empty() => {
                            playing = Playing::start(
                                speaker.get().await,
                                round.reply.clone(),
                                (round.round_id.clone(), Some(round.round_seq)),
                            );
                            true
                        }
                        Some(_) => true,
                    }
                }
            };
            if !ok {
                return;
            }
        }
        // The speaker paused: transcribe what was said so far now, while
        // the silence that may end the utterance runs (200 ms); if it ends,
        // the transcript is (nearly) ready. Speech again drops the guess.
        let for_caal = wake.as_ref().is_none_or(|w| w.window.is_open());
        if !for_caal {
            continue;
        }
        if vad.pausing() {
            // A partial still running goes on through a pause (most end
            // within one word); it is stopped when the utterance ends.
            if guess.is_none()
                && let Some(so_far) = vad.current().map(<[f32]>::to_vec)
                && let Ok(turn) = state.speech.clone().try_acquire_owned()
            {
                let samples: Arc<[f32]> = Arc::from(so_far);
                let job = Transcribing::start(&stt, samples.clone(), Some(turn));
                guess = Some(Guess { samples, job });
            }
        } else if vad.in_speech() {
            // Speech again: the guess is stopped (dropped), its cores and
            // turn freed for the speech that goes on.
            guess = None;
        }
        // A partial transcript done: sent.
        if partial.as_ref().is_some_and(Transcribing::done)
            && let Some(mut p) = partial.take()
            && let Some(t) = p.result().await
            && !send(
                &mut socket,
                json!({"type": "partial", "text": crate::safety::global().scrub(&t.text)}),
            )
            .await
        {
            return;
        }
        // While someone speaks, now and then what was heard so far, beside
        // the stream (never holding it up), one at a time; not once they
        // have paused.
        if cfg.partial_every_ms > 0
            && partial.is_none()
            && vad.in_speech()
            && !vad.pausing()
            && heard_ms - last_partial_ms >= u64::from(cfg.partial_every_ms)
            && let Some(so_far) = vad.current()
        {
            last_partial_ms = heard_ms;
            partial = Some(Transcribing::start(&stt, Arc::from(so_far), None));
        }
    }
    // The stream closed mid-utterance: what was said still counts.
    let tail = resampler.finish();
    let mut ended: Vec<crate::voice::Utterance> = vad
        .push(&tail)
        .into_iter()
        .filter_map(|e| match e {
            VadEvent::Ended(u) => Some(u),
            _ => None,
        })
        .collect();
    ended.extend(vad.finish());
    for u in ended {
        if wake.as_ref().is_some_and(|w| !w.window.takes(&u)) {
            continue;
        }
        let word = wake
            .as_mut()
            .map(|w| (w.word.clone(), w.window.must_prove(&u), w.margin));
        utterance(
            &state,
            &mut socket,
            (&stt, None, word),
            (&conversation, area.as_deref()),
            u,
            barged.take(),
        )
        .await;
    }
}

/// The message that a reply was stopped.
fn barge_in(stopped: &Interruption) -> Value {
    json!({"type": "barge_in", "round_id": stopped.round_id,
           "played_ms": stopped.played_ms, "reply_ms": stopped.reply_ms,
           "stopped_in_ms": stopped.stopped_in_ms})
}

/// The wake word on a voice stream: the model's state, and the window it
/// opens.
struct Wakeful {
    word: Arc<WakeWord>,
    stream: WakeStream,
    threshold: f32,
    /// Whisper's check of the phrase (`voice.wake.margin`).
    margin: f32,
    window: Window,
}

impl Wakeful {
    fn new(word: Arc<WakeWord>, cfg: &crate::config::WakeConfig) -> Self {
        Self {
            stream: word.stream(),
            word,
            threshold: cfg.threshold,
            margin: cfg.margin,
            window: Window::new(u64::from(cfg.listen_ms)),
        }
    }

    /// The next samples: the phrase heard in them opens the stream from
    /// there (the utterance it is in, and one starting within `listen_ms`).
    fn hear(
        &mut self,
        samples: &[f32],
    ) -> Result<Option<crate::voice::wake::Heard>, crate::voice::onnx::OnnxError> {
        let heard = self.word.push(&mut self.stream, samples, self.threshold)?;
        if let Some(h) = &heard {
            self.window.detected(h.at_ms);
        }
        Ok(heard)
    }
}

/// When speech on a stream is for CAAL (ms from the stream's start), and
/// which utterance must prove the wake word was said.
#[derive(Debug)]
struct Window {
    listen_ms: u64,
    /// Speech that ends after the first and starts before the second.
    open: Option<(u64, u64)>,
    /// The classifier heard the phrase and no utterance has been taken
    /// since: the next one must carry it (whisper's check).
    unproven: bool,
}

impl Window {
    fn new(listen_ms: u64) -> Self {
        Self {
            listen_ms,
            open: None,
            unproven: false,
        }
    }

    /// The classifier heard the phrase at `at_ms`.
    fn detected(&mut self, at_ms: u64) {
        self.open = Some((at_ms, at_ms + self.listen_ms));
        self.unproven = true;
    }

    fn takes(&self, u: &crate::voice::Utterance) -> bool {
        self.open
            .is_some_and(|(from, until)| u.end_ms >= from && u.start_ms <= until)
    }

    /// `u` is taken: whether whisper must hear the phrase at its start.
    /// The first utterance taken after a detection must: it holds the
    /// detection (the score comes a few steps after the words) or, if
    /// the classifier fired in a pause or in noise, it is the speech the
    /// false wake would let in. After one that proves it ("hey jarvis"
    /// alone), the next is heard as it is.
    fn must_prove(&mut self, u: &crate::voice::Utterance) -> bool {
        debug_assert!(self.takes(u));
        std::mem::take(&mut self.unproven)
    }

    fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Open for an answer: speech starting within `listen_ms` of `now_ms`.
    fn open_from(&mut self, now_ms: u64) {
        self.open = Some((now_ms, now_ms + self.listen_ms));
    }

    /// A question being spoken: the wait for its answer starts later.
    fn extend(&mut self, ms: u64) {
        if let Some((_, until)) = self.open.as_mut() {
            *until += ms;
        }
    }

    fn close(&mut self) {
        self.open = None;
        self.unproven = false;
    }
}

/// A transcription started when the speaker paused (of what was said until
/// then): the utterance's, if the pause ends it.
struct Guess {
    samples: Arc<[f32]>,
    job: Transcribing,
}

/// A transcription running beside the stream; dropped, it stops (whisper
/// gives up after its current step), so speech that went on never waits
/// for a transcript of less of it.
struct Transcribing {
    stop: Arc<AtomicBool>,
    job: tokio::task::JoinHandle<Result<crate::voice::Transcript, crate::voice::SttError>>,
}

impl Transcribing {
    /// Transcribes `samples` on a blocking thread, holding `turn` (a
    /// speech turn) while it runs.
    fn start(
        stt: &Arc<Stt>,
        samples: Arc<[f32]>,
        turn: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (stt, stopped) = (stt.clone(), stop.clone());
        let job = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            stt.transcribe_unless(&samples, &stopped)
        });
        Self { stop, job }
    }

    fn done(&self) -> bool {
        self.job.is_finished()
    }

    /// The transcript (waited for); none if it failed or stopped.
    async fn result(&mut self) -> Option<crate::voice::Transcript> {
        (&mut self.job).await.ok()?.ok()
    }
}

impl Drop for Transcribing {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// An utterance ended: transcribe (or take the transcript started at the
/// pause that ended it), keep the audio, run the round, answer with its
/// result; the round, if there was one (None: the socket is gone).
async fn utterance(
    state: &AppState,
    socket: &mut WebSocket,
    (stt, guess, wake): (&Arc<Stt>, Option<Guess>, Option<WakeCheck>),
    (conversation, area): (&ConversationId, Option<&str>),
    u: crate::voice::Utterance,
    interrupted: Option<Interruption>,
) -> Option<Outcome> {
    let ended = Instant::now();
    let (start_ms, end_ms) = (u.start_ms, u.end_ms);
    // Said when the speech ended, whatever the transcription takes.
    let origin = state
        .engine
        .origin(crate::auth::Door::VoiceSocket, "token")
        .interrupting(interrupted)
        .in_area(area.map(str::to_owned));
    let (engine, stt, conversation) = (state.engine.clone(), stt.clone(), conversation.clone());
    // The transcript started at the pause, with the speech it heard (the
    // utterance less part of its trailing silence).
    let guessed = match guess {
        Some(mut g) => g.job.result().await.map(|t| (t, g.samples)),
        None => None,
    };
    // One transcription per core at a time, across every door.
    let turn = match &guessed {
        Some(_) => None,
        None => Some(state.speech.clone().acquire_owned().await.ok()?),
    };
    let done = tokio::task::spawn_blocking(move || -> Result<_, crate::round::VoiceError> {
        let _turn = turn;
        let (mut transcript, samples) = match guessed {
            Some(guessed) => guessed,
            None => (stt.transcribe(&u.samples)?, Arc::from(u.samples)),
        };
        // The request is what follows the wake word ("hey jarvis" alone:
        // nothing to run; what comes next is heard). Where the wake word
        // was heard in this utterance, whisper must have heard it too, at
        // its start: else the classifier took other words for it (a
        // second check; the transcript is dropped, nothing kept).
        if let Some((w, said_here, margin)) = &wake {
            let fits = |texts: &[String]| stt.score(&samples, texts).ok();
            match w.said_first(&transcript.text, fits, *margin) {
                Some(request) => transcript.text = request.to_owned(),
                None if *said_here => return Ok(None),
                None => {}
            }
        }
        let mut keep = || engine.keep_streamed(&samples);
        engine
            .heard(
                &origin,
                &conversation,
                (u.start_ms, u.end_ms),
                transcript,
                Some(samples.clone()),
                &mut keep,
            )
            .map(Some)
    })
    .await;
    let failed =
        |message: String| json!({"type": "error", "code": "voice.failed", "message": message});
    let heard = match done {
        Ok(Ok(Some(h))) => h,
        Ok(Ok(None)) => {
            return send(
                socket,
                json!({"type": "not_addressed", "start_ms": start_ms, "end_ms": end_ms, "false_wake": true}),
            )
            .await
            .then_some(Outcome::FalseWake);
        }
        Ok(Err(e)) => {
            let message = crate::safety::global().scrub(&e.to_string()).into_owned();
            return send(socket, failed(message))
                .await
                .then_some(Outcome::Nothing);
        }
        Err(e) => {
            return send(socket, failed(e.to_string()))
                .await
                .then_some(Outcome::Nothing);
        }
    };
    let t = &heard.transcript;
    let final_msg = json!({"type": "final", "text": crate::safety::global().scrub(&t.text), "confidence": t.confidence,
        "language": t.language, "model": t.model, "stt_ms": t.stt_ms, "start_ms": heard.start_ms, "end_ms": heard.end_ms,
        "audio_id": heard.audio_id, "audio_sha256": heard.audio_sha256});
    if !send(socket, final_msg).await {
        return None;
    }
    let Some(round) = heard.round else {
        return send(socket, json!({"type": "no_speech"}))
            .await
            .then_some(Outcome::Nothing);
    };
    let after_end_ms = ended.elapsed().as_secs_f64() * 1000.0;
    send(
        socket,
        json!({"type": "result", "round": round, "ms_after_speech_ended": after_end_ms}),
    )
    .await
    .then_some(Outcome::Round(Box::new(round)))
}

/// The wake word on an utterance: the phrase, whether the classifier
/// heard it in this utterance (so whisper must hear it too), the margin.
type WakeCheck = (Arc<WakeWord>, bool, f32);

/// What became of an utterance.
enum Outcome {
    Round(Box<crate::round::RoundResult>),
    /// No round (noise, the wake word alone, an error told the client).
    Nothing,
    /// The wake word was heard in it, but whisper did not hear it said.
    FalseWake,
}

/// A piece of a reply, spoken: its WAV and length, or why it could not be.
type Piece = Result<(Vec<u8>, u64), String>;

/// A reply being spoken to the client: its pieces (`tts::pieces`, a
/// sentence or so each) spoken one after another in the background and
/// sent as each is ready; the client plays them back to back from the
/// first. Dropped, it stops speaking.
struct Playing {
    /// The round it speaks for, and its number if it answered the speaker.
    round: (String, Option<i64>),
    pieces: tokio::sync::mpsc::Receiver<Piece>,
    task: tokio::task::JoinHandle<()>,
    count: usize,
    sent: usize,
    /// When the first piece went out, and how long what went out plays.
    first_sent: Option<Instant>,
    sent_ms: u64,
    done: bool,
}

impl Playing {
    /// `text` spoken by `speaker`, piece by piece (None: nobody speaks).
    fn start(speaker: Arc<Speaker>, text: String, round: (String, Option<i64>)) -> Option<Self> {
        if matches!(*speaker, Speaker::Silent) || text.trim().is_empty() {
            return None;
        }
        let pieces: Vec<String> = crate::voice::tts::pieces(&text)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let count = pieces.len();
        // One piece ahead of the client: the next is spoken while this plays.
        let (tx, rx) = tokio::sync::mpsc::channel::<Piece>(1);
        let task = tokio::spawn(async move {
            for piece in pieces {
                let speaker = speaker.clone();
                let spoken = tokio::task::spawn_blocking(move || {
                    let samples = speaker.speak(&piece).map_err(|e| e.to_string())?;
                    let ms = samples.len() as u64 * 1000 / u64::from(speaker.rate());
                    Ok((audio::encode_wav_at(&samples, speaker.rate()), ms))
                })
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
                let failed = spoken.is_err();
                if tx.send(spoken).await.is_err() || failed {
                    return;
                }
            }
        });
        Some(Self {
            round,
            pieces: rx,
            task,
            count,
            sent: 0,
            first_sent: None,
            sent_ms: 0,
            done: false,
        })
    }

    /// Sends a piece spoken (None: all were); false if the socket is gone.
    async fn send(&mut self, socket: &mut WebSocket, piece: Option<Piece>) -> bool {
        match piece {
            None => {
                self.done = true;
                true
            }
            Some(Err(e)) => {
                self.done = true;
                send(
                    socket,
                    json!({"type": "error", "code": "tts.failed", "message": e}),
                )
                .await
            }
            Some(Ok((wav, ms))) => {
                let announced = json!({"type": "reply_audio", "format": "wav", "bytes": wav.len(),
                    "ms": ms, "piece": self.sent, "pieces": self.count,
                    "round_id": self.round.0});
                self.first_sent.get_or_insert_with(Instant::now);
                self.sent += 1;
                self.sent_ms += ms;
                send(socket, announced).await
                    && socket.send(Message::Binary(Bytes::from(wav))).await.is_ok()
            }
        }
    }

    /// How much the client has played, as far as the server can tell.
    fn played_ms(&self) -> u64 {
        self.first_sent
            .map_or(0, |t| (t.elapsed().as_millis() as u64).min(self.sent_ms))
    }

    /// Still speaking: pieces to come, or what was sent still playing.
    fn audible(&self) -> bool {
        !self.done || self.played_ms() < self.sent_ms
    }

    /// Stopped by speech that began `stopped_in_ms` ago.
    fn stop(self, stopped_in_ms: f64) -> Interruption {
        let (round_id, round_seq) = self.round.clone();
        Interruption {
            round_id,
            round_seq,
            played_ms: self.played_ms(),
            reply_ms: self.sent_ms,
            stopped_in_ms,
        }
    }
}

impl Drop for Playing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The next piece of the reply playing; pending while none plays.
async fn next_piece(playing: &mut Option<Playing>) -> Option<Piece> {
    match playing.as_mut().filter(|p| !p.done) {
        Some(p) => p.pieces.recv().await,
        None => std::future::pending().await,
    }
}

/// The voice that speaks a socket's replies, loading in the background
/// until a reply first needs it.
enum Voice {
    Loading(tokio::task::JoinHandle<Arc<Speaker>>),
    Ready(Arc<Speaker>),
}

impl Voice {
    async fn get(&mut self) -> Arc<Speaker> {
        if let Voice::Loading(loading) = self {
            let speaker = loading.await.unwrap_or_else(|_| Arc::new(Speaker::Silent));
            *self = Voice::Ready(speaker);
        }
        match self {
            Voice::Ready(speaker) => speaker.clone(),
            Voice::Loading(_) => Arc::new(Speaker::Silent),
        }
    }
}

/// `POST /livekit/webhook`: a room event from LiveKit, recorded once its
/// signature (the `Authorization` JWT and the body's SHA-256) holds.
pub(super) async fn livekit_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<axum::Json<Value>, AppError> {
    let keys = state.livekit.clone().ok_or_else(|| AppError::Conflict {
        code: "livekit.not_configured",
        message: crate::voice::livekit::LiveKitError::NoKeys.to_string(),
    })?;
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = String::from_utf8(body.to_vec())
        .map_err(|_| AppError::bad_request("body.invalid", "the webhook body is not UTF-8"))?;
    let event = crate::voice::livekit::receive(&keys, &body, &authorization).map_err(|e| {
        tracing::warn!(error = %e, "livekit webhook refused");
        AppError::Unauthorized
    })?;
    let engine = state.engine.clone();
    let recorded = event.clone();
    let round_id = super::blocking(move || Ok(engine.livekit_event(&recorded)?)).await?;
    Ok(axum::Json(
        json!({"ok": true, "event": event.event, "round_id": round_id}),
    ))
}

#[cfg(test)]
mod tests {
    use super::Window;
    use crate::voice::Utterance;

    fn said(start_ms: u64, end_ms: u64) -> Utterance {
        Utterance {
            start_ms,
            end_ms,
            samples: Vec::new(),
        }
    }

    #[test]
    fn the_first_utterance_after_a_detection_must_prove_the_phrase() {
        let mut w = Window::new(8_000);
        let before = said(0, 900);
        assert!(!w.takes(&before), "nothing is for CAAL before the phrase");
        // Detected in a pause (or in noise): the speech that follows is
        // let in only if it carries the phrase.
        w.detected(2_000);
        assert!(!w.takes(&said(500, 1_900)), "speech that ended before");
        let next = said(3_000, 4_200);
        assert!(w.takes(&next));
        assert!(w.must_prove(&next));
        // It did ("hey jarvis" alone): what follows is heard as it is.
        let request = said(5_000, 6_500);
        assert!(w.takes(&request));
        assert!(!w.must_prove(&request));
        // Beyond the window: not for CAAL.
        assert!(!w.takes(&said(10_500, 11_000)));
    }

    #[test]
    fn the_utterance_holding_a_detection_proves_it_and_a_question_needs_none() {
        let mut w = Window::new(8_000);
        // The score comes after the words, inside the utterance.
        w.detected(1_100);
        let holding = said(200, 2_600);
        assert!(w.takes(&holding));
        assert!(w.must_prove(&holding));
        // A round ends the window; a question opens it for the answer,
        // which needs no phrase.
        w.close();
        assert!(!w.is_open());
        w.open_from(4_000);
        w.extend(1_500);
        let answer = said(12_000, 12_600);
        assert!(
            w.takes(&answer),
            "the wait starts after the question is spoken"
        );
        assert!(!w.must_prove(&answer));
        // A detection again: proof again; a false wake closes everything.
        w.detected(20_000);
        w.close();
        assert!(!w.takes(&said(20_500, 21_000)));
        w.open_from(30_000);
        assert!(!w.must_prove(&said(30_100, 30_500)));
    }
}
