//! Fuzz targets: what CAAL reads from outside, fed arbitrary bytes.
//!
//! Each target takes the bytes a fuzzer made and checks what must hold for
//! any input (beyond "does not panic"): an error names the problem, a
//! result is well formed. The same functions run in two places:
//! `fuzz/` (cargo-fuzz, libFuzzer, coverage-guided, for long runs) and
//! `caal/tests/fuzz.rs` (the test command: each target over its corpus in
//! `fuzz/corpus/` and a few thousand mutations of it).

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
};

use crate::{
    config::Config,
    reasoning::parse_thinking,
    router::Router,
    server::{AppState, app},
    understand::{
        Lang,
        suite::parse_suite,
        template::{self, Scope},
    },
    voice::audio::decode_wav,
};

/// A fuzz target: takes any bytes, panics when what must hold does not.
pub type Target = fn(&[u8]);

/// The targets by name (the names of `fuzz/fuzz_targets/*.rs` and of the
/// corpus folders).
pub const TARGETS: &[(&str, Target)] = &[
    ("thinking", thinking),
    ("config", config),
    ("wav", wav),
    ("jsonl", jsonl),
    ("http_body", http_body),
    ("template", template),
    ("wyoming", wyoming),
];

/// A model's free-form thinking as steps: every step has content, and the
/// content is text the model wrote.
pub fn thinking(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for step in parse_thinking(&text) {
        assert!(!step.content.trim().is_empty(), "an empty step");
        for line in step.content.lines() {
            assert!(text.contains(line.trim()), "{line:?} was not in the text");
        }
    }
}

/// A configuration file: it loads or says why; one that loads and checks
/// compiles into a router that routes.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml_over_defaults(text) {
        Ok(config) => {
            if config.check().is_ok()
                && let Ok(router) = Router::compile(&config)
            {
                let state = &config.conversation.default_state;
                let _ = router.route("turn on the kitchen lights", state);
            }
        }
        Err(e) => assert!(!e.to_string().is_empty(), "an error that says nothing"),
    }
}

/// A WAV file: decoded to 16 kHz mono samples in [-1, 1], or an error
/// naming the file.
pub fn wav(data: &[u8]) {
    match decode_wav(data, "fuzz.wav") {
        Ok(clip) => {
            assert!(clip.channels >= 1);
            for s in &clip.samples {
                assert!((-1.01..=1.01).contains(s), "sample {s} out of range");
            }
        }
        Err(e) => assert!(e.to_string().contains("fuzz.wav"), "{e}"),
    }
}

/// A JSONL suite (`caal bench understand --suite FILE`): read, or an error
/// naming the file and the line.
pub fn jsonl(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = parse_suite(&text, "fuzz.jsonl") {
        assert!(e.starts_with("fuzz.jsonl line "), "{e}");
    }
}

/// A sentence template (Home Assistant's syntax) and a sentence, on the
/// first line and the rest: parsed or refused with where; a parsed one
/// matches within the sentence's bounds.
pub fn template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (template, sentence) = text.split_once('\n').unwrap_or((&text, ""));
    match template::parse(template) {
        Ok(expr) => {
            // Free words, lengths of time and times of day: the slots whose
            // ends are found by walking the sentence.
            let rules = HashMap::new();
            let lists: HashMap<String, template::SlotList> = [
                ("what", template::SlotList::Wildcard),
                ("item", template::SlotList::Wildcard),
                ("name", template::SlotList::Wildcard),
                ("duration", template::SlotList::Duration),
                ("time", template::SlotList::TimeOfDay),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            let scope = Scope {
                lang: Lang::En,
                rules: &[&rules],
                lists: &[&lists],
            };
            let sentence = crate::router::normalize(sentence);
            for reading in template::match_all(&expr, &sentence, &scope) {
                for slot in reading.slots {
                    assert!(slot.span.0 <= slot.span.1 && slot.span.1 <= sentence.len());
                }
            }
        }
        Err(e) => assert!(!e.problem.is_empty()),
    }
}

/// One engine and HTTP application for every input (a data dir of its own,
/// the defaults, no model).
struct Served {
    _dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    app: axum::Router,
}

const TOKEN: &str = "fuzz-token-0123456789abcdef";

fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary data dir");
        let config = Config::defaults().expect("the defaults load");
        let engine = crate::round::Engine::open(
            dir.path(),
            config,
            crate::round::EngineOptions {
                env: Arc::new(|_| None),
                ..Default::default()
            },
        )
        .expect("the engine opens");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let app = app(AppState::new(engine, TOKEN.into()));
        Served {
            _dir: dir,
            runtime,
            app,
        }
    })
}

/// A request body (or query) the API reads, to the endpoint the first byte
/// picks: never a server error, never a panic, and every refusal in the
/// API's error shape (`{"error", "code"}`).
pub fn http_body(data: &[u8]) {
    use axum::body::Body;
    use tower::ServiceExt;

    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let query: String = body
        .iter()
        .map(|b| format!("%{b:02X}"))
        .collect::<Vec<_>>()
        .join("");
    let (method, uri, body) = match pick % 8 {
        0 => ("POST", "/api/chat".to_owned(), body.to_vec()),
        1 => (
            "POST",
            "/api/pending/nope/confirm".to_owned(),
            body.to_vec(),
        ),
        2 => ("POST", "/api/buckets/notes/items".to_owned(), body.to_vec()),
        3 => ("POST", "/livekit/webhook".to_owned(), body.to_vec()),
        4 => (
            "GET",
            format!("/api/trace/export?conversation={query}"),
            vec![],
        ),
        5 => ("GET", format!("/api/events?conversation={query}"), vec![]),
        6 => ("GET", format!("/api/memory/search?q={query}"), vec![]),
        _ => ("GET", format!("/api/rounds/{query}"), vec![]),
    };
    let s = served();
    let request = axum::http::Request::builder()
        .method(method)
        .uri(&uri)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a request");
    let (status, bytes) = s.runtime.block_on(async {
        let response = s.app.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        if uri.starts_with("/api/events") && status.is_success() {
            // A live stream: the status is the answer.
            return (status, Vec::new());
        }
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default();
        (status, bytes)
    });
    assert!(
        !status.is_server_error(),
        "{method} {uri}: {status} {}",
        String::from_utf8_lossy(&bytes)
    );
    if status.is_client_error() {
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{method} {uri}: {status} is not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert!(
            v["error"].is_string() && v["code"].is_string(),
            "{method} {uri}: {v}"
        );
    }
}

/// Wyoming events as a peer sends them (`server::protocols::wyoming`):
/// events are read until the stream ends or one is refused with a named
/// code; each event read encodes back to bytes that read as the same event.
pub fn wyoming(data: &[u8]) {
    use crate::server::protocols::wyoming::{Event, read_event};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut reader = data;
        loop {
            match read_event(&mut reader).await {
                Ok(None) => return,
                Ok(Some(event)) => {
                    assert!(!event.kind.is_empty(), "an event without a type");
                    let bytes = event.encode();
                    let again: Event = read_event(&mut bytes.as_slice())
                        .await
                        .expect("an encoded event reads")
                        .expect("an encoded event is there");
                    assert_eq!(
                        (&again.kind, &again.data, &again.payload),
                        (&event.kind, &event.data, &event.payload)
                    );
                }
                Err(e) => {
                    assert!(e.code().starts_with("event."), "{e}");
                    return;
                }
            }
        }
    });
}
