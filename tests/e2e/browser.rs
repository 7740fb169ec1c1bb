//! The web page in headless Chromium, driven over WebDriver (chromedriver,
//! installed by .ci/setup): a round sent through the API appears on the page,
//! and a level-3 command is confirmed with a click.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::support::Sandbox;

const TOKEN: &str = "browser-test-token-0123456789";

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn agent() -> ureq::Agent {
    crate::support::agent(30)
}

/// A round in the default conversation through `POST /api/chat`: its result.
fn chat(url: &str, text: &str) -> Value {
    let mut r = agent()
        .post(&format!("{url}/api/chat"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send_json(json!({"conversation_id": "default", "text": text}))
        .unwrap();
    serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
}

/// One WebDriver command: (method, path under /session/{id}, body) -> value.
struct Browser {
    base: String,
    session: String,
}

impl Browser {
    /// chromedriver on a free port and a headless Chromium session through
    /// it. Bind as `let (_driver, browser)`: locals drop in reverse order, so
    /// the session ends before its driver is killed.
    fn launch(extra_args: &[String]) -> (Killed, Self) {
        assert!(
            std::path::Path::new("/usr/bin/chromium").exists()
                && std::path::Path::new("/usr/bin/chromedriver").exists(),
            "chromium and chromedriver are missing: run `bash .ci/setup`"
        );
        let driver_port = free_port();
        let driver = Killed(
            Command::new("chromedriver")
                .arg(format!("--port={driver_port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver runs"),
        );
        let started = Instant::now();
        while agent()
            .get(&format!("http://127.0.0.1:{driver_port}/status"))
            .call()
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            thread::sleep(Duration::from_millis(100));
        }
        (driver, Self::start(driver_port, extra_args))
    }

    fn start(driver_port: u16, extra_args: &[String]) -> Self {
        let base = format!("http://127.0.0.1:{driver_port}");
        let profile = tempfile::tempdir().unwrap().keep();
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
        ]
        .map(str::to_owned)
        .to_vec();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.extend_from_slice(extra_args);
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}
        }}});
        let mut response = agent()
            .post(&format!("{base}/session"))
            .send_json(&caps)
            .unwrap();
        let body: Value =
            serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        let session = body["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {body}"))
            .to_owned();
        Self { base, session }
    }

    fn command(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut response = match method {
            "GET" => agent().get(&url).call().unwrap(),
            "DELETE" => agent().delete(&url).call().unwrap(),
            _ => agent().post(&url).send_json(&body).unwrap(),
        };
        let value: Value =
            serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        value["value"].clone()
    }

    /// Runs a script in the page and returns its value.
    fn script(&self, source: &str) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            json!({"script": source, "args": []}),
        )
    }

    /// The page at `url`, signed in with the token, its live stream connected.
    fn open_page(&self, url: &str) {
        self.command(
            "POST",
            "/url",
            json!({"url": format!("{url}/#token={TOKEN}")}),
        );
        self.wait_for(
            "the live stream connected",
            "return document.getElementById('live').textContent === 'live'",
        );
    }

    /// Waits until `source` returns something truthy in the page.
    /// A real click (WebDriver's, not a script's) on the element `css` finds.
    fn click(&self, css: &str) {
        let found = self.command(
            "POST",
            "/element",
            json!({"using": "css selector", "value": css}),
        );
        let element = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap()
            .to_owned();
        self.command("POST", &format!("/element/{element}/click"), json!({}));
    }

    /// Whether `source` gives something within `limit`.
    fn shows_within(&self, source: &str, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            let value = self.script(source);
            if !(value.is_null() || value == json!(false) || value == json!("")) {
                return true;
            }
            thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn wait_for(&self, what: &str, source: &str) -> Value {
        let started = Instant::now();
        loop {
            let value = self.script(source);
            if !(value.is_null() || value == json!(false) || value == json!("")) {
                return value;
            }
            // Generous: whisper and the voice on a busy 2-core machine
            // take seconds; the test is about what the page shows, not when.
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the page never showed {what}"
            );
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = agent()
            .delete(&format!("{}/session/{}", self.base, self.session))
            .call();
    }
}

#[test]
fn the_page_shows_rounds_live_and_confirms_with_a_click() {
    let sb = Sandbox::new();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();

    let (_driver, browser) = Browser::launch(&[]);
    browser.open_page(&url);

    // A round through the API appears on the page, live.
    let chat = |text: &str| chat(&url, text);
    chat("turn on the kitchen lights");
    browser.wait_for(
        "the round",
        "return [...document.querySelectorAll('.round')].some(r => r.textContent.includes('Okay, the kitchen lights are on.'))",
    );

    // What the conversation's bucket remembers shows beside its rounds.
    chat("remember that the spare key is under the blue pot");
    browser.wait_for(
        "the memory panel",
        "return document.getElementById('memory').textContent.includes('the spare key is under the blue pot')",
    );
    let register = browser.script("return document.querySelector('#memory .register').textContent");
    assert_eq!(
        register,
        "1 memory. latest: the spare key is under the blue pot"
    );

    // A level-3 command waits; a click on Confirm runs it.
    let asked = chat("unlock the front door");
    assert_eq!(asked["reply"], "Unlock the front door? Say yes to confirm.");
    browser.wait_for(
        "the pending confirmation",
        "return document.querySelector('.pending button.confirm') !== null",
    );
    browser.click(".pending button.confirm");
    browser.wait_for(
        "the confirmed round",
        "return [...document.querySelectorAll('.round')].some(r => r.textContent.includes('The front door is unlocked.'))",
    );
    // Each round with tool calls shows why each command was chosen and what became of it.
    browser.wait_for(
        "the reasoning of the confirmed round",
        "return [...document.querySelectorAll('.round .reasoning')].some(r => r.textContent.includes(\"door_unlock “Understood 'unlock the front door' as HassTurnOff (sentence template): unlock the front door.” → ok\"))",
    );
    browser.wait_for(
        "no pending confirmation",
        "return document.querySelector('.pending') === null",
    );

    let mut pending = agent()
        .get(&format!("{url}/api/pending"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .call()
        .unwrap();
    let pending: Value =
        serde_json::from_str(&pending.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(pending["pending"], json!([]));
}

/// The voice page listening in Chromium to a fake microphone: `said` by
/// espeak-ng after `quiet_before` seconds of quiet and before `quiet_after`
/// seconds of it (Chrome plays the file again and again), at 48 kHz.
fn voice_page(
    sb: &Sandbox,
    said: &str,
    (quiet_before, quiet_after): (&str, &str),
    conversation: &str,
) -> (crate::support::Served, Killed, Browser) {
    let spoken = crate::voice::espeak(sb.path(), "said.wav", said);
    let mic = sb.path().join("mic.wav");
    assert!(
        Command::new("sox")
            .arg(&spoken)
            .args(["-r", "48000", "-c", "1"])
            .arg(&mic)
            .args(["pad", quiet_before, quiet_after])
            .status()
            .unwrap()
            .success()
    );
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();
    let (driver, browser) = Browser::launch(&[
        "--use-fake-ui-for-media-stream".into(),
        "--use-fake-device-for-media-stream".into(),
        format!("--use-file-for-fake-audio-capture={}", mic.display()),
        "--autoplay-policy=no-user-gesture-required".into(),
    ]);
    browser.command(
        "POST",
        "/url",
        json!({"url": format!("{url}/voice#token={TOKEN}&conversation={conversation}&autostart=1")}),
    );
    (served, driver, browser)
}

#[test]
fn the_voice_page_streams_the_microphone_and_shows_the_round() {
    let sb = Sandbox::new();
    // Said the moment the page listens, before the server is ready: the
    // page keeps what it hears until then, so no word is lost. Long quiet
    // after: Chrome plays the file again, and the request said again before
    // the reply goes out would stop it (barge-in).
    let (_served, _driver, browser) =
        voice_page(&sb, "turn on the kitchen lights", ("0", "20"), "browser");
    let found = browser.wait_for(
        "the round from the microphone",
        "return window.caal && window.caal.results.length > 0 && JSON.stringify({results: window.caal.results, finals: window.caal.finals})",
    );
    let seen: Value = serde_json::from_str(found.as_str().unwrap()).unwrap();
    let round = &seen["results"][0];
    // Heard whole, its first word too.
    let heard = seen["finals"][0]["text"].as_str().unwrap().to_lowercase();
    assert!(heard.starts_with("turn on the kitchen light"), "{seen}");
    assert_eq!(round["command_id"], "lights.set", "{seen}");
    assert_eq!(round["conversation_id"], "browser");
    assert_eq!(round["reply"], "Okay, the kitchen lights are on.", "{seen}");
    assert!(
        seen["finals"][0]["audio_sha256"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{seen}"
    );
    // The page shows it, and plays the spoken reply.
    browser.wait_for(
        "the reply on the page",
        "return document.getElementById('turns').textContent.includes('Okay, the kitchen lights are on.')",
    );
    browser.wait_for("the spoken reply", "return window.caal.replyAudio > 0");
    let errors = browser.script("return window.caal.errors");
    assert_eq!(errors, json!([]), "{errors}");
}

/// The page plays a reply piece by piece and stops it when the person
/// speaks over it: the fake microphone says the request again (Chrome
/// loops the file) while the two-sentence reply still plays.
#[test]
fn the_voice_page_stops_a_reply_the_person_speaks_over() {
    let sb = Sandbox::new();
    let (_served, _driver, browser) =
        voice_page(&sb, "unlock the front door", ("0.5", "1.2"), "barge");
    let found = browser.wait_for(
        "the reply stopped by speech",
        "return window.caal && window.caal.bargeIns.length > 0 && JSON.stringify({barge: window.caal.bargeIns[0], results: window.caal.results, audio: window.caal.replyAudio, playing: queued.length})",
    );
    let seen: Value = serde_json::from_str(found.as_str().unwrap()).unwrap();
    let asked = &seen["results"][0];
    assert_eq!(
        asked["reply"], "Unlock the front door? Say yes to confirm.",
        "{seen}"
    );
    assert_eq!(seen["barge"]["round_id"], asked["round_id"], "{seen}");
    // Nothing of the stopped reply plays on, pieces decoded late included.
    thread::sleep(Duration::from_millis(500));
    let playing = browser.script("return window.caal.bargeIns.length === 1 ? queued.length : 0");
    assert_eq!(
        playing,
        json!(0),
        "nothing plays on after the barge-in: {seen}"
    );
    let errors = browser.script("return window.caal.errors");
    assert_eq!(errors, json!([]), "{errors}");
}

#[test]
fn the_page_counts_a_timer_down_and_rings_when_it_is_done() {
    let sb = Sandbox::new();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();
    let (_driver, browser) = Browser::launch(&[]);
    browser.open_page(&url);
    let said = chat(&url, "set a timer for 4 seconds");
    assert_eq!(said["reply"], "Timer set for 4 seconds.");
    // Shown running, counting down from what was left.
    let shown = browser.wait_for(
        "the running timer",
        "const t = document.querySelector('#timers .timer'); return t && t.textContent",
    );
    let shown = shown.as_str().unwrap();
    assert!(shown.contains("4 second timer"), "{shown}");
    assert!(
        ["0:04", "0:03", "0:02", "0:01"]
            .iter()
            .any(|c| shown.contains(c)),
        "{shown}"
    );
    // It rings on the page: a banner (a chime and a notification beside it), and it is gone from the list.
    let ring = browser.wait_for(
        "the ringing",
        "const r = document.querySelector('#ringing .ring'); return r && r.textContent",
    );
    assert_eq!(ring, "🔔 Your 4 second timer is done. ");
    browser.wait_for(
        "no timer left",
        "return document.querySelector('#timers .timer') === null",
    );
}

#[test]
fn the_page_takes_a_thumbs_down_with_a_note_on_a_round() {
    let sb = Sandbox::new();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();
    let (_driver, browser) = Browser::launch(&[]);
    browser.open_page(&url);
    let said = chat(&url, "turn on the kitchen lights");
    let round_id = said["round_id"].as_str().unwrap().to_owned();
    browser.wait_for(
        "the round's feedback bar",
        &format!(
            "return document.querySelector('#round-{round_id} .feedback button.bad') !== null"
        ),
    );
    // A note typed, then a click on 👎 (a real click, through WebDriver).
    browser.script(&format!(
        "const n = document.querySelector('#round-{round_id} .feedback input.note'); \
         n.value = 'I meant the kitchen lamp'; n.dispatchEvent(new Event('input')); return true"
    ));
    // The note outlives the page redrawing its rounds (live events do, as a
    // person types).
    browser.script(&format!(
        "document.querySelector('#round-{round_id} .feedback input.note').dataset.drawn = 'before'; \
         refresh(); return true"
    ));
    browser.wait_for(
        "the note kept when the rounds were drawn again",
        &format!("const n = document.querySelector('#round-{round_id} .feedback input.note'); \
                  return n !== null && n.dataset.drawn !== 'before' && n.value === 'I meant the kitchen lamp'"),
    );
    // A click that met a button the page had just drawn again is clicked
    // again (a person would); the verdict shows once it lands.
    let verdict = format!(
        "return [...document.querySelectorAll('#round-{round_id} .feedback .standing')].some(s => s.textContent === 'marked bad: I meant the kitchen lamp')"
    );
    for _ in 0..3 {
        browser.click(&format!("#round-{round_id} .feedback button.bad"));
        if browser.shows_within(&verdict, Duration::from_secs(5)) {
            break;
        }
    }
    browser.wait_for("the verdict shown", &verdict);
    // Recorded in the round's conversation, from the page, naming the round.
    let mut shown = agent()
        .get(&format!("{url}/api/rounds/{round_id}"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .call()
        .unwrap();
    let shown: Value = serde_json::from_str(&shown.body_mut().read_to_string().unwrap()).unwrap();
    let feedback = &shown["feedback"][0];
    assert_eq!(feedback["conversation_id"], "default", "{shown}");
    assert_eq!(feedback["payload"]["verdict"], "bad");
    assert_eq!(feedback["payload"]["by"], "ui");
    assert_eq!(feedback["payload"]["round_id"], round_id.as_str());
    assert_eq!(feedback["payload"]["note"], "I meant the kitchen lamp");
    // The page, reloaded, shows the verdict that stands.
    browser.open_page(&url);
    browser.wait_for(
        "the verdict after a reload",
        &format!("return document.querySelector('#round-{round_id} .feedback .standing')?.textContent === 'marked bad: I meant the kitchen lamp'"),
    );
}

#[test]
fn the_page_searches_the_trace_and_plays_what_a_round_heard() {
    let sb = Sandbox::new();
    // A voice round, kept audio and all, before the service holds the store.
    let said = crate::voice::espeak(sb.path(), "said.wav", "turn on the kitchen lights");
    let heard = sb
        .run(&[
            "voice",
            "--json",
            "--conversation",
            "den",
            said.to_str().unwrap(),
        ])
        .ok()
        .json();
    let voice_round = heard["utterances"][0]["round"]["round_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let kept_sha = heard["audio"]["sha256"].as_str().unwrap().to_owned();
    let audio_id = heard["audio"]["audio_id"].as_str().unwrap().to_owned();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();
    let get = |path: &str| {
        agent()
            .get(&format!("{url}{path}"))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .call()
    };
    // The API: the audio, byte for byte what was kept, its hash in a header.
    let mut audio = get(&format!("/api/audio/{audio_id}")).unwrap();
    assert_eq!(audio.headers()["content-type"], "audio/wav");
    assert_eq!(audio.headers()["x-caal-sha256"], kept_sha.as_str());
    let bytes = audio.body_mut().read_to_vec().unwrap();
    let file = sb.path().join("fetched.wav");
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(crate::voice::sha256_of(&file), kept_sha);
    assert_eq!(get("/api/audio/nope").unwrap().status(), 404);
    // Search through the API: what was said and decided, newest first.
    let mut found = get("/api/trace/search?q=kitchen+lights&type=input.received").unwrap();
    let found: Value = serde_json::from_str(&found.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(
        found["hits"][0]["round_id"],
        voice_round.as_str(),
        "{found}"
    );
    assert_eq!(get("/api/trace/search?q=%21%21").unwrap().status(), 400);

    // The page: the search box finds the round; a hit opens it; the round
    // plays what it heard, with the hash the trace recorded.
    let (_driver, browser) = Browser::launch(&[]);
    browser.open_page(&url);
    browser.script(
        "document.getElementById('query').value = 'kitchen lights'; document.getElementById('search').requestSubmit(); return true",
    );
    browser.wait_for(
        "a search hit",
        &format!("return document.querySelector('#search-results .hit[data-round=\"{voice_round}\"] mark') !== null"),
    );
    browser.script(&format!(
        "document.querySelector('#search-results .hit[data-round=\"{voice_round}\"]').click(); return true"
    ));
    browser.wait_for(
        "the round opened",
        &format!("return document.querySelector('#round-{voice_round}.open') !== null"),
    );
    browser.script(&format!(
        "document.querySelector('#round-{voice_round} .heard button.play').click(); return true"
    ));
    browser.wait_for(
        "the audio player with the recorded hash",
        &format!("return document.querySelector('#round-{voice_round} .heard audio')?.src.startsWith('blob:') && document.querySelector('#round-{voice_round} .heard .hash').textContent.trim() === '{kept_sha}'"),
    );
}

#[test]
fn the_page_verifies_receipts_in_the_browser_and_shows_the_chain() {
    let sb = Sandbox::new();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();
    let (_driver, browser) = Browser::launch(&[]);
    browser.open_page(&url);
    chat(&url, "unlock the front door");
    let done = chat(&url, "yes");
    assert_eq!(done["reply"], "The front door is unlocked.");
    let round_id = done["round_id"].as_str().unwrap().to_owned();
    browser.wait_for(
        "the chain verified",
        "return document.getElementById('chain').textContent.startsWith('chain ✓')",
    );
    browser.wait_for(
        "the confirmed round",
        &format!("return document.querySelector('#round-{round_id} header') !== null"),
    );
    browser.click(&format!("#round-{round_id} header"));
    // The receipt, its decision and assurance, and the browser's own check.
    let verdict = browser.wait_for(
        "the receipt checked",
        &format!("const v = document.querySelector('#round-{round_id} .receipt .verdict'); return v && v.textContent !== 'checking…' && v.textContent"),
    );
    assert_eq!(
        verdict, "✓ signature and hashes verified in this browser",
        "{verdict}"
    );
    let shown = browser.script(&format!(
        "return document.querySelector('#round-{round_id} .receipt').textContent"
    ));
    let shown = shown.as_str().unwrap();
    assert!(
        shown.contains("door.unlock")
            && shown.contains("confirmed")
            && shown.contains("assurance none"),
        "{shown}"
    );
    // The same check refuses a receipt changed after signing, or one whose
    // content no longer matches its hashes (WebCrypto, in the page).
    let refused = browser.command(
        "POST",
        "/execute/async",
        json!({"script": format!(
            "const done = arguments[0];
             fetch('/api/rounds/{round_id}', {{headers: {{Authorization: 'Bearer {TOKEN}'}}}}).then(r => r.json()).then(async d => {{
               const receipt = d.events.find(e => e.event_type === 'receipt.issued').payload.receipt;
               const signed = await window.caal.verifyReceipt(receipt, receipt.signature.public_key);
               const relevel = JSON.parse(JSON.stringify(receipt)); relevel.enforcement.auth_level = 1;
               const redoor = JSON.parse(JSON.stringify(receipt)); redoor.action.command.params.door = 'back door';
               const otherKey = await window.caal.verifyReceipt(receipt, '00'.repeat(32));
               done([signed.ok, (await window.caal.verifyReceipt(relevel)).why, (await window.caal.verifyReceipt(redoor)).why, otherKey.ok]);
             }});"), "args": []}),
    );
    assert_eq!(refused[0], true, "{refused}");
    assert!(
        refused[1]
            .as_str()
            .unwrap()
            .contains("signature does not verify"),
        "{refused}"
    );
    assert!(
        refused[2].as_str().unwrap().contains("action_hash"),
        "{refused}"
    );
    assert_eq!(refused[3], false, "{refused}");
}

#[test]
fn the_page_shows_what_a_replay_with_another_configuration_would_change() {
    let sb = Sandbox::new();
    let served = sb.serve(&[("CAAL_API_TOKEN", TOKEN)]);
    let url = served.url.clone();
    let (_driver, browser) = Browser::launch(&[]);
    browser.open_page(&url);
    let lights = chat(&url, "turn on the kitchen lights");
    chat(&url, "add milk to the shopping list");
    let round_id = lights["round_id"].as_str().unwrap();
    browser.wait_for(
        "the rounds",
        &format!("return document.querySelector('#round-{round_id}') !== null"),
    );
    browser.script(
        "document.getElementById('replay').open = true; document.getElementById('replay-config').value = '[commands.\"lights.set\"]\\nauth_level = 3\\n'; return true",
    );
    browser.click("#replay-run");
    let summary = browser.wait_for(
        "the replay",
        "const s = document.querySelector('#replay-result .summary'); return s && s.textContent",
    );
    assert_eq!(summary, "replayed 2 rounds: 1 unchanged, 1 would change");
    let change = browser.script(&format!(
        "return document.querySelector('#replay-result .change[data-round=\"{round_id}\"]').textContent"
    ));
    let change = change.as_str().unwrap();
    assert!(
        change.contains("(level)") && change.contains("(level 1)") && change.contains("(level 3)"),
        "{change}"
    );
    // A configuration that does not validate is named, and nothing is replayed.
    browser.script(
        "document.getElementById('replay-config').value = '[commands.\"lights.set\"]\\nauth_level = 9\\n'; return true",
    );
    browser.click("#replay-run");
    let refused = browser.wait_for(
        "the refusal",
        "const t = document.getElementById('replay-result').textContent; return t.includes('auth_level') && t",
    );
    assert!(
        refused.as_str().unwrap().contains("lights.set"),
        "{refused}"
    );
}
