//! The API through a real server on 127.0.0.1:0 and a real HTTP client.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    sync::mpsc,
    thread,
    time::Duration,
};

use serde_json::{Value, json};
use ureq::Agent;

use super::*;
use crate::round::tests::Home;

const TOKEN: &str = "test-token-0123456789abcdef";

struct TestServer {
    home: Home,
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<thread::JoinHandle<()>>,
}

impl TestServer {
    fn start() -> Self {
        Self::start_with(Home::new())
    }

    fn start_with(home: Home) -> Self {
        let state = AppState::new(home.engine.clone(), TOKEN.into());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, addr) = mpsc::channel();
        let handle = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready.send(listener.local_addr().unwrap()).unwrap();
                serve(listener, state, async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            });
        });
        let addr = addr.recv().unwrap();
        Self {
            home,
            addr,
            stop: Some(stop),
            handle: Some(handle),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn agent() -> Agent {
        Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into()
    }

    /// (status, JSON body) of an authorised call.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let agent = Self::agent();
        let auth = format!("Bearer {TOKEN}");
        let response = match (method, body) {
            ("GET", _) => agent
                .get(&self.url(path))
                .header("Authorization", &auth)
                .call(),
            ("DELETE", _) => agent
                .delete(&self.url(path))
                .header("Authorization", &auth)
                .call(),
            (_, Some(b)) => agent
                .post(&self.url(path))
                .header("Authorization", &auth)
                .send_json(&b),
            (_, None) => agent
                .post(&self.url(path))
                .header("Authorization", &auth)
                .send_empty(),
        };
        let mut response = response.unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// The id of the first confirmation `GET /api/pending` lists.
    fn first_pending_id(&self) -> String {
        let (_, pending) = self.call("GET", "/api/pending", None);
        pending["pending"][0]["pending"]["confirmation_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no confirmation is waiting: {pending}"))
            .to_owned()
    }

    fn say(&self, conversation: &str, text: &str) -> Value {
        let (status, body) = self.call(
            "POST",
            "/api/chat",
            Some(json!({"conversation_id": conversation, "text": text})),
        );
        assert_eq!(status, 200, "{body}");
        body
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn every_call_needs_the_token_and_errors_have_one_shape() {
    let server = TestServer::start();
    let agent = TestServer::agent();
    for path in [
        "/api/health",
        "/api/conversations",
        "/api/events",
        "/api/openapi.json",
    ] {
        for auth in [None, Some("Bearer wrong-token"), Some(TOKEN)] {
            let mut request = agent.get(&server.url(path));
            if let Some(a) = auth {
                request = request.header("Authorization", a);
            }
            let mut response = request.call().unwrap();
            assert_eq!(response.status().as_u16(), 401, "{path} with {auth:?}");
            let body: Value =
                serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
            assert_eq!(body["code"], "auth.required");
        }
    }
    let huge = json!({"text": "x".repeat(MAX_BODY_BYTES + 10)});
    let (status, body) = server.call("POST", "/api/chat", Some(huge));
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("body.too_large"))
    );
    let (status, body) = server.call("POST", "/api/chat", Some(json!({"txt": "hello"})));
    assert_eq!((status, body["code"].as_str()), (400, Some("body.invalid")));
    let (status, body) = server.call("POST", "/api/chat", Some(json!({"text": "   "})));
    assert_eq!((status, body["code"].as_str()), (400, Some("input.empty")));
    let (status, body) = server.call(
        "POST",
        "/api/chat",
        Some(json!({"text": "hi", "conversation_id": "no spaces"})),
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("conversation_id.invalid"))
    );
    let (status, body) = server.call(
        "GET",
        "/api/rounds/0190c8e4-7b7a-7000-8000-000000000000",
        None,
    );
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    let (status, _) = server.call("GET", "/api/nothing-here", None);
    assert_eq!(status, 404);
}

/// The round_seqs of a page of rounds, in order.
fn round_seqs(page: &Value) -> Vec<i64> {
    page["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["round_seq"].as_i64().unwrap())
        .collect()
}

#[test]
fn the_api_runs_rounds_and_shows_them() {
    let server = TestServer::start();
    let said = server.say("kitchen", "turn on the kitchen lights");
    assert_eq!(
        (said["reply"].as_str(), said["round_seq"].as_i64()),
        (Some("Okay, the kitchen lights are on."), Some(1))
    );
    for i in 0..4 {
        server.say("kitchen", &format!("set the kitchen lights to {}", 10 + i));
    }
    server.say("hall", "hello");

    let (_, list) = server.call("GET", "/api/conversations", None);
    let names: Vec<&str> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["conversation_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kitchen", "hall"]);

    let (_, page) = server.call("GET", "/api/conversations/kitchen/rounds?limit=2", None);
    let seqs = round_seqs(&page);
    assert_eq!(
        (seqs, page["has_more"].as_bool()),
        (vec![4, 5], Some(true)),
        "newest last"
    );
    let (_, older) = server.call(
        "GET",
        &format!(
            "/api/conversations/kitchen/rounds?limit=10&before={}",
            page["before"]
        ),
        None,
    );
    let seqs = round_seqs(&older);
    assert_eq!(
        (seqs, older["has_more"].as_bool()),
        (vec![1, 2, 3], Some(false))
    );

    let (status, round) = server.call(
        "GET",
        &format!("/api/rounds/{}", said["round_id"].as_str().unwrap()),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(round["round"]["status"], "ok");
    assert_eq!(round["events"][0]["event_type"], "round.started");
    assert_eq!(
        round["events"].as_array().unwrap().last().unwrap()["event_type"],
        "round.completed"
    );

    let (_, verify) = server.call("GET", "/api/trace/verify", None);
    assert_eq!(
        (verify["ok"].as_bool(), verify["rounds"].as_i64()),
        (Some(true), Some(6))
    );

    let (_, export) = {
        let mut response = TestServer::agent()
            .get(&server.url("/api/trace/export"))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .call()
            .unwrap();
        (
            response.status().as_u16(),
            response.body_mut().read_to_string().unwrap(),
        )
    };
    let mut expected = Vec::new();
    server
        .home
        .engine
        .store()
        .reader()
        .export(None, &mut expected, &mut |_| {})
        .unwrap();
    assert_eq!(
        export,
        String::from_utf8(expected).unwrap(),
        "the same bytes as caal trace export"
    );

    let (_, health) = server.call("GET", "/api/health", None);
    assert_eq!(
        (health["ok"].as_bool(), health["library_id"].as_str()),
        (Some(true), Some("test"))
    );
    let (_, spec) = server.call("GET", "/api/openapi.json", None);
    assert_eq!(spec["openapi"], "3.1.0");
    for path in [
        "/api/chat",
        "/api/events",
        "/api/pending/{id}/confirm",
        "/api/trace/export",
        "/api/buckets/{id}/items",
        "/api/memory/search",
    ] {
        assert!(spec["paths"][path].is_object(), "{path} is documented");
    }
}

#[test]
fn confirmations_can_be_answered_from_a_ui() {
    let server = TestServer::start();
    server.say("door", "unlock the front door");
    let (_, pending) = server.call("GET", "/api/pending", None);
    assert_eq!(pending["pending"][0]["conversation_id"], "door");
    let id = server.first_pending_id();
    let (status, done) = server.call("POST", &format!("/api/pending/{id}/confirm"), None);
    assert_eq!(
        (status, done["reply"].as_str()),
        (200, Some("The front door is unlocked."))
    );
    assert_eq!(server.home.executed("door", "door.unlock"), 1);
    let received = &server.home.of_type("door", "confirm.received")[0];
    assert_eq!(received["channel"], "ui");
    let (status, _) = server.call("POST", &format!("/api/pending/{id}/confirm"), None);
    assert_eq!(
        status, 404,
        "an answered confirmation cannot be answered again"
    );

    server.say("garage", "open the garage");
    let id = server.first_pending_id();
    let (_, denied) = server.call("POST", &format!("/api/pending/{id}/deny"), None);
    assert_eq!(denied["reply"], "Okay, I won't open the garage door.");
    assert_eq!(server.home.executed("garage", "garage.open"), 0);
}

/// Reads SSE events until `count` arrived: (id, event type).
fn read_events(
    server: &TestServer,
    last_event_id: Option<&str>,
    count: usize,
    during: impl FnOnce(),
) -> Vec<(String, String, String)> {
    let mut request = TestServer::agent()
        .get(&server.url("/api/events"))
        .header("Authorization", &format!("Bearer {TOKEN}"));
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id);
    }
    let response = request.call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        let mut lines = BufReader::new(response.into_body().into_reader()).lines();
        let (mut id, mut kind, mut data) = (String::new(), String::new(), String::new());
        while let Some(Ok(line)) = lines.next() {
            if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("event:") {
                kind = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            } else if line.is_empty()
                && !id.is_empty()
                && tx
                    .send((
                        std::mem::take(&mut id),
                        std::mem::take(&mut kind),
                        std::mem::take(&mut data),
                    ))
                    .is_err()
            {
                return;
            }
        }
    });
    during();
    let events: Vec<(String, String, String)> = (0..count)
        .map_while(|_| rx.recv_timeout(Duration::from_secs(10)).ok())
        .collect();
    drop(rx);
    drop(reader);
    events
}

#[test]
fn the_live_stream_carries_every_event_and_resumes_after_last_event_id() {
    let server = TestServer::start();
    let events = read_events(&server, None, 13, || {
        server.say("c", "turn on the kitchen lights");
    });
    let kinds: Vec<&str> = events.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"round.started"));
    assert_eq!(kinds.last(), Some(&"round.completed"));
    assert_eq!(events.len(), 13, "every event of the round");
    assert!(kinds.contains(&"reasoning_update"), "{kinds:?}");
    let ids: Vec<i64> = events
        .iter()
        .map(|(id, _, _)| id.parse().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "in order, none skipped: {ids:?}"
    );

    // Disconnected: two rounds happen meanwhile; a reconnect gets them all.
    let last = events.last().unwrap().0.clone();
    server.say("c", "hello");
    server.say("c", "unlock the front door");
    let missed = read_events(&server, Some(&last), 17, || {});
    assert_eq!(
        missed.len(),
        17,
        "6 events of the greeting and 11 of the governed request (with its decision, its wait and the update)"
    );
    assert_eq!(
        missed.first().unwrap().0.parse::<i64>().unwrap(),
        last.parse::<i64>().unwrap() + 1
    );
    let kinds: Vec<&str> = missed.iter().map(|(_, k, _)| k.as_str()).collect();
    assert!(kinds.contains(&"confirm.requested"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "round.completed").count(), 2);
}

#[test]
fn responses_carry_no_secret() {
    let server = TestServer::start();
    let key = "sk-proj-Zq9XwLm3Rt7Yv2Bn8Kp4Hs6Jd1Fg5Tc0Ve9Wq";
    let said = server.say("c", &format!("remember that my openai key is {key}"));
    assert!(!said.to_string().contains(key));
    let (_, round) = server.call(
        "GET",
        &format!("/api/rounds/{}", said["round_id"].as_str().unwrap()),
        None,
    );
    assert!(!round.to_string().contains(key));
    assert!(round.to_string().contains("secret_ref:openai_key:"));
}

#[test]
fn buckets_are_listed_shown_searched_and_written_through_the_api() {
    let server = TestServer::start();
    server.say("kitchen", "remember that the descaler is under the sink");
    let (status, list) = server.call("GET", "/api/buckets", None);
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["buckets"][0]["bucket_id"], "bucket:kitchen");
    assert_eq!(list["buckets"][0]["item_count"], 1);

    let (status, added) = server.call(
        "POST",
        "/api/buckets/bucket:kitchen/items",
        Some(json!({"content": "the oven manual is in the drawer", "pin": true,
                    "refs": [{"kind": "file", "target": "/docs/oven.pdf", "summary": "model X200"}]})),
    );
    assert_eq!(status, 200, "{added}");
    let item = added["item_id"].as_str().unwrap().to_owned();
    let (_, package) = server.call("GET", "/api/buckets/bucket:kitchen", None);
    assert_eq!(package["items"][0]["item_id"], item.as_str());
    assert_eq!(package["items"][0]["why"], "pinned");
    assert!(
        package["short_context"]
            .as_str()
            .unwrap()
            .contains("(file: /docs/oven.pdf — model X200)")
    );

    let (_, found) = server.call(
        "GET",
        "/api/memory/search?q=descaler&bucket=bucket:kitchen",
        None,
    );
    assert_eq!(
        found["hits"][0]["content"],
        "the descaler is under the sink"
    );
    let (status, bad) = server.call("GET", "/api/memory/search?q=the", None);
    assert_eq!((status, bad["code"].as_str()), (400, Some("search.empty")));

    let (status, _) = server.call(
        "POST",
        &format!("/api/buckets/bucket:kitchen/items/{item}/unpin"),
        None,
    );
    assert_eq!(status, 200);
    let (status, forgot) = server.call(
        "DELETE",
        &format!("/api/buckets/bucket:kitchen/items/{item}"),
        None,
    );
    assert_eq!((status, forgot["op"].as_str()), (200, Some("forget")));
    let (status, missing) = server.call(
        "DELETE",
        &format!("/api/buckets/bucket:kitchen/items/{item}"),
        None,
    );
    assert_eq!((status, missing["code"].as_str()), (404, Some("not_found")));
    let (_, items) = server.call("GET", "/api/buckets/bucket:kitchen/items", None);
    assert_eq!(items["items"].as_array().unwrap().len(), 1);
    let (status, _) = server.call("GET", "/api/buckets/not%20a%20bucket", None);
    assert_eq!(status, 400);
    let written = server.home.of_type("operator", "memory.written");
    assert_eq!(written[0]["source"], "api");
}

#[test]
fn parallel_tool_calls_show_their_reasoning_in_the_history_and_the_stream() {
    use crate::round::reasoning_tests::{home_with_model, tool_calls};
    let answer = tool_calls(
        "Getting the house ready.",
        &[
            (
                "lights_set",
                json!({"room": "porch", "state": "on", "_rationale": "the guest needs light"}),
            ),
            (
                "thermostat_set",
                json!({"temperature": 21, "_rationale": "it is cold"}),
            ),
        ],
        None,
    );
    let (home, _model) = home_with_model("", answer);
    let server = TestServer::start_with(home);
    server.say("guest", "get the house ready");
    server.say("guest", "yes");
    server.say("guest", "hello");
    // Replayed from the start: every event of the three rounds.
    let total = server
        .home
        .engine
        .store()
        .reader()
        .count_events(None)
        .unwrap();
    let events = read_events(&server, Some("0"), total as usize, || {});
    assert_eq!(events.len() as u64, total);
    let updates: Vec<Value> = events
        .iter()
        .filter(|(_, k, _)| k == "reasoning_update")
        .map(|(_, _, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(updates.len(), 2, "one per batch: asked, then run");
    assert_eq!(updates[0]["type"], "reasoning_update");
    assert_eq!(updates[0]["narrative"], "Getting the house ready.");
    let first = updates[0]["tool_decisions"].as_array().unwrap();
    assert_eq!(
        first
            .iter()
            .map(|d| (
                d["tool_name"].as_str().unwrap(),
                d["rationale"].as_str().unwrap(),
                d["parallel_group"].as_u64()
            ))
            .collect::<Vec<_>>(),
        vec![
            ("lights_set", "the guest needs light", Some(0)),
            ("thermostat_set", "it is cold", Some(0))
        ]
    );
    assert!(
        first.iter().all(|d| d.get("parameters").is_none()),
        "the stream leaves parameters to the history"
    );
    assert!(
        updates[1]["tool_decisions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["outcome"] == "ok")
    );

    let (status, history) = server.call("GET", "/api/conversations/guest/rounds", None);
    assert_eq!(status, 200, "{history}");
    let rounds = history["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 3);
    let asked = &rounds[0]["reasoning"];
    assert_eq!(asked["round_seq"], 1);
    assert_eq!(asked["narrative"], "Getting the house ready.");
    assert_eq!(
        asked["tool_decisions"][0]["parameters"],
        json!({"room": "porch", "state": "on"})
    );
    assert_eq!(
        asked["tool_decisions"][1]["outcome"],
        "awaiting_confirmation"
    );
    assert_eq!(rounds[1]["reasoning"]["tool_decisions"][1]["outcome"], "ok");
    assert!(
        rounds[2].get("reasoning").is_none(),
        "a greeting has no tool calls"
    );
}

/// The schema a documented response refers to, loaded from `schemas/`.
fn response_schema(spec: &Value, path: &str) -> jsonschema::Validator {
    let reference = spec["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
        ["schema"]["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{path}: the 200 response names no schema"));
    let text = match reference {
        "round-result.v1.json" => include_str!("../../../schemas/round-result.v1.json"),
        other => panic!("{path}: unknown schema {other}"),
    };
    jsonschema::validator_for(&serde_json::from_str(text).unwrap()).unwrap()
}

fn assert_valid(validator: &jsonschema::Validator, body: &Value, what: &str) {
    let problems: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(problems.is_empty(), "{what}: {problems:?}\n{body:#}");
}

#[test]
fn round_results_match_the_schema_the_openapi_document_names() {
    let server = TestServer::start();
    let (_, spec) = server.call("GET", "/api/openapi.json", None);
    let chat = response_schema(&spec, "/api/chat");
    let mut seen = std::collections::BTreeSet::new();
    for text in [
        "turn on the kitchen lights",
        "add milk to the shopping list",
        "undo",
        "turn on the kitchen lights and set the thermostat to 21",
        "set the thermostat to 99",
        "remember that the spare key is in the blue box",
        "asdf qwer zxcv",
        "unlock the front door",
    ] {
        let body = server.say("contract", text);
        assert_valid(&chat, &body, text);
        seen.insert((
            body["status"].to_string(),
            body["pending_confirmation"].is_null(),
        ));
    }
    // Both outcomes and a waiting confirmation were among them.
    assert!(seen.len() >= 3, "{seen:?}");
    let id = server.first_pending_id();
    let (status, confirmed) = server.call("POST", &format!("/api/pending/{id}/confirm"), None);
    assert_eq!(status, 200, "{confirmed}");
    assert_valid(
        &response_schema(&spec, "/api/pending/{id}/confirm"),
        &confirmed,
        "confirm",
    );
    assert_eq!(confirmed["commands"][0]["status"], "ok");

    server.say("contract", "unlock the front door");
    let id = server.first_pending_id();
    let (_, denied) = server.call("POST", &format!("/api/pending/{id}/deny"), None);
    assert_valid(
        &response_schema(&spec, "/api/pending/{id}/deny"),
        &denied,
        "deny",
    );

    // The contract holds both ways: a field the code adds and the schema
    // does not describe is refused.
    let mut extra = denied.clone();
    extra["surprise"] = json!(1);
    assert!(!chat.is_valid(&extra));
}
