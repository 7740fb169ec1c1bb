//! Timers and reminders ring: in a running `caal serve` (the live stream and
//! the voice socket of the conversation hear it), after a restart (late, and
//! saying so), in `caal chat`, and when `caal say` next runs.

use std::{
    io::{BufRead, BufReader},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tungstenite::Message;

use crate::{
    support::Sandbox,
    voice::{connect, next_json},
};

const TOKEN: &str = "time-test-token-0123456789abcdef";

fn agent() -> ureq::Agent {
    crate::support::agent(30)
}

fn chat(url: &str, conversation: &str, text: &str) -> Value {
    agent()
        .post(&format!("{url}/api/chat"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send_json(json!({"conversation_id": conversation, "text": text}))
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap()
}

fn get(url: &str, path: &str) -> (u16, Value) {
    let mut r = agent()
        .get(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .call()
        .unwrap();
    (r.status().as_u16(), r.body_mut().read_json().unwrap())
}

/// The live stream's (event type, data) as they come, from a reader thread.
fn live(url: &str) -> mpsc::Receiver<(String, Value)> {
    let (tx, rx) = mpsc::channel();
    let response = ureq::Agent::config_builder()
        .timeout_global(None)
        .build()
        .new_agent()
        .get(&format!("{url}/api/events"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .call()
        .unwrap();
    thread::spawn(move || {
        let mut kind = String::new();
        for line in BufReader::new(response.into_body().into_reader()).lines() {
            let Ok(line) = line else { return };
            if let Some(k) = line.strip_prefix("event:") {
                kind = k.trim().to_owned();
            } else if let Some(d) = line.strip_prefix("data:")
                && tx
                    .send((
                        kind.clone(),
                        serde_json::from_str(d.trim()).unwrap_or(Value::Null),
                    ))
                    .is_err()
            {
                return;
            }
        }
    });
    rx
}

#[test]
fn a_two_second_timer_rings_on_the_live_stream_and_the_voice_socket() {
    let sb = Sandbox::new();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();
    let stream = live(&url);

    // A voice client of the kitchen conversation, and one of another conversation.
    let start = |conversation: &str| {
        let mut socket = connect(&url);
        socket
            .send(Message::text(
                json!({"type": "start", "token": TOKEN, "conversation_id": conversation, "tts": true})
                    .to_string(),
            ))
            .unwrap();
        assert_eq!(next_json(&mut socket)["type"], "ready");
        socket
    };
    let mut kitchen = start("kitchen");
    let mut hall = start("hall");

    let set = chat(&url, "kitchen", "set a timer for 2 seconds");
    let set_at = Instant::now();
    assert_eq!(set["reply"], "Timer set for 2 seconds.");
    let (status, timers) = get(&url, "/api/timers?conversation=kitchen");
    assert_eq!(status, 200);
    assert_eq!(timers["timers"][0]["label"], "2 second timer", "{timers}");
    assert!(timers["timers"][0]["left_ms"].as_i64().unwrap() <= 2000);

    // The voice client hears it unasked: the notification, then its WAV.
    let rang = next_json(&mut kitchen);
    let after = set_at.elapsed();
    assert_eq!(rang["type"], "notification", "{rang}");
    let n = &rang["notification"];
    assert_eq!(n["text"], "Your 2 second timer is done.");
    assert_eq!(n["kind"], "timer");
    assert!(
        after >= Duration::from_millis(1900) && after < Duration::from_secs(5),
        "rang after {after:?}"
    );
    let announced = next_json(&mut kitchen);
    assert_eq!(announced["type"], "reply_audio", "{announced}");
    let wav = next_json(&mut kitchen);
    assert_eq!(wav["wav"], true);
    assert_eq!(wav["binary"], announced["bytes"]);

    // The live stream carried the ringing round's events.
    let deadline = Instant::now() + Duration::from_secs(10);
    let fired = loop {
        let (kind, data) = stream
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("schedule.fired on the live stream");
        if kind == "schedule.fired" {
            break data;
        }
    };
    assert_eq!(fired["conversation_id"], "kitchen");
    assert_eq!(fired["round_id"], n["round_id"]);
    assert_eq!(fired["payload"]["set_in_round"], set["round_id"]);

    // The other conversation's client heard nothing of it.
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = hall.get_ref() {
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
    }
    assert!(
        hall.read().is_err(),
        "the hall client was told of the kitchen's timer"
    );

    // Cancelling over the API is a recorded round; an unknown id is a 404.
    chat(&url, "kitchen", "set a pasta timer for 10 minutes");
    let (_, timers) = get(&url, "/api/timers");
    let id = timers["timers"][0]["id"].as_i64().unwrap();
    let mut cancelled = agent()
        .post(&format!("{url}/api/timers/{id}/cancel"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send_empty()
        .unwrap();
    assert_eq!(cancelled.status().as_u16(), 200);
    let body: Value = cancelled.body_mut().read_json().unwrap();
    assert_eq!(body["reply"], "The pasta timer was cancelled.");
    let again = agent()
        .post(&format!("{url}/api/timers/{id}/cancel"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send_empty()
        .unwrap();
    assert_eq!(again.status().as_u16(), 404);
    let (status, _) = get(&url, "/api/timers?conversation=no%20such");
    assert_eq!(status, 400);
    let (status, _) = served.terminate();
    assert!(status.success());
}

#[test]
fn a_timer_due_while_caal_was_down_rings_at_start_late_and_saying_so() {
    let sb = Sandbox::new();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    assert_eq!(
        chat(&served.url, "den", "set a timer for 2 seconds")["reply"],
        "Timer set for 2 seconds."
    );
    // Killed outright, well before it is due.
    drop(served);
    thread::sleep(Duration::from_secs(5));
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let started = Instant::now();
    let rang = loop {
        let (_, rounds) = get(&served.url, "/api/conversations/den/rounds");
        let found = rounds["rounds"]
            .as_array()
            .into_iter()
            .flatten()
            // Its round is listed from its start; read it once it has ended.
            .find(|r| r["channel"] == "system" && r["status"] != "open")
            .cloned();
        if let Some(r) = found {
            break r;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{rounds}");
        thread::sleep(Duration::from_millis(100));
    };
    let (_, round) = get(
        &served.url,
        &format!("/api/rounds/{}", rang["round_id"].as_str().unwrap()),
    );
    let events = round["events"].as_array().unwrap();
    let fired = events
        .iter()
        .find(|e| e["event_type"] == "schedule.fired")
        .unwrap();
    let late = fired["payload"]["late_ms"].as_i64().unwrap();
    assert!((2_500..20_000).contains(&late), "late by {late} ms");
    let said = events
        .iter()
        .find(|e| e["event_type"] == "output.emitted")
        .unwrap();
    let text = said["payload"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Your 2 second timer is done. It was due ")
            && text.ends_with(" ago, while CAAL was not running."),
        "{text}"
    );
    let (status, _) = served.terminate();
    assert!(status.success());
    // The chain holds, ringing and all.
    assert_eq!(sb.run(&["trace", "verify"]).code, 0);
}

#[test]
fn say_rings_what_is_overdue_and_chat_rings_while_open() {
    let sb = Sandbox::new();
    let run = sb.run(&["say", "set a timer for 1 second"]).ok();
    assert_eq!(run.stdout.trim(), "Timer set for 1 second.");
    let listed = sb.run(&["timers", "list", "--json"]).ok().json();
    assert_eq!(listed["timers"][0]["label"], "1 second timer");
    thread::sleep(Duration::from_millis(1200));
    let said = sb.say("default", "turn on the kitchen lights");
    assert_eq!(said["reply"], "Okay, the kitchen lights are on.");
    // On a loaded machine the bell may come late enough to say so.
    let rung = said["notifications"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(rung.starts_with("Your 1 second timer is done."), "{said}");
    assert!(
        sb.run(&["say", "hello"]).ok().stdout.lines().count() == 1,
        "rung once only"
    );

    // `caal chat` rings while it is open, between lines.
    let stdout = sb.chat_open_for(
        "desk",
        "set a tea timer for 2 seconds",
        Duration::from_secs(4),
    );
    assert!(
        stdout.contains("caal> Tea timer set for 2 seconds."),
        "{stdout}"
    );
    assert!(stdout.contains("🔔 Your tea timer is done."), "{stdout}");

    // Operators cancel by id; a wrong id says where to look.
    sb.run(&["say", "remind me to call mom in 2 hours"]).ok();
    let listed = sb.run(&["timers", "list", "--json"]).ok().json();
    let id = listed["reminders"][0]["id"].as_i64().unwrap().to_string();
    let cancelled = sb.run(&["timers", "cancel", "--reminder", &id]).ok();
    assert_eq!(
        cancelled.stdout.trim(),
        "The reminder to call mom was cancelled."
    );
    let again = sb.run(&["timers", "cancel", "--reminder", &id]);
    assert_eq!(again.code, 2);
    assert!(
        again.stderr.contains("caal timers list"),
        "{}",
        again.stderr
    );
    assert_eq!(sb.run(&["trace", "verify"]).code, 0);
}

#[test]
fn a_research_job_killed_mid_answer_is_queued_again_and_told_after_the_restart() {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };
    // The model: the first question hangs (the process is killed under it),
    // later ones answer at once.
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let model = crate::support::Peer::start(move |_, _| {
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            thread::sleep(Duration::from_secs(6));
        }
        (
            200,
            json!({"model": "smol", "choices": [{"index": 0, "finish_reason": "stop",
                   "message": {"role": "assistant", "content": "The Nile is about 6,650 km long."}}]})
            .to_string(),
        )
    });
    let sb = Sandbox::new();
    let env = [
        ("CAAL_API_TOKEN", TOKEN),
        ("CAAL_LLM_LOCAL_URL", model.url.as_str()),
    ];
    let served = sb.serve(&env);
    let r = chat(&served.url, "study", "look up how long the nile is");
    assert_eq!(r["route_code"], "intent.research");
    assert_eq!(r["reply"], "I'll look that up and tell you when I have it.");
    let started = Instant::now();
    while asked.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the job never asked the model"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let (_, jobs) = get(&served.url, "/api/jobs");
    assert_eq!(jobs["jobs"][0]["state"], "running", "{jobs}");
    // kill -9 while the model thinks.
    drop(served);

    let served = sb.serve(&env);
    let started = Instant::now();
    let job = loop {
        let (_, jobs) = get(&served.url, "/api/jobs");
        if jobs["jobs"][0]["state"] == "done" {
            break jobs["jobs"][0].clone();
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{jobs}");
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(job["attempts"], 2, "{job}");
    assert_eq!(job["result"], "The Nile is about 6,650 km long.");
    // Told in a round of the conversation that asked.
    let (_, told) = get(
        &served.url,
        &format!("/api/rounds/{}", job["result_round_id"].as_str().unwrap()),
    );
    assert_eq!(told["round"]["conversation_id"], "study");
    assert_eq!(told["round"]["channel"], "system");
    let said = told["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_type"] == "output.emitted")
        .unwrap();
    assert_eq!(said["payload"]["text"], "The Nile is about 6,650 km long.");
    let (status, _) = get(&served.url, "/api/jobs/no-such-job");
    assert_eq!(status, 404);
    let (status, _) = served.terminate();
    assert!(status.success());
    // The first attempt's work round was left open by the kill: recorded as
    // crashed, and every chain still holds.
    let shown = sb
        .run(&["jobs", "show", job["job_id"].as_str().unwrap()])
        .ok();
    assert!(
        shown.stdout.contains("state done, attempts 2"),
        "{}",
        shown.stdout
    );
    assert_eq!(sb.run(&["trace", "verify"]).code, 0);
}

#[test]
fn caal_voice_rings_what_is_overdue_after_its_rounds() {
    let sb = Sandbox::new();
    sb.run(&["say", "set an egg timer for 1 second"]).ok();
    thread::sleep(Duration::from_millis(1500));
    let wav = crate::voice::espeak(sb.path(), "kitchen.wav", "turn on the kitchen lights");
    let run = sb.run(&["voice", wav.to_str().unwrap()]).ok();
    assert!(
        run.stdout.contains("Okay, the kitchen lights are on."),
        "{}",
        run.stdout
    );
    // The bell comes after the round's reply. Whisper's load can take the
    // timer past its lateness threshold, which the bell then says.
    let last = run.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("🔔 Your egg timer is done."),
        "{}",
        run.stdout
    );
}
