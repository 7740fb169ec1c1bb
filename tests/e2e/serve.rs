//! `caal serve` as a process: it binds, guards its API with the token it
//! keeps in the data dir, refuses to face a network without a configured
//! token, and stops cleanly on SIGTERM.

use serde_json::{Value, json};

use crate::support::Sandbox;

fn agent() -> ureq::Agent {
    crate::support::agent(10)
}

#[test]
fn serve_answers_with_its_token_and_stops_cleanly() {
    let sb = Sandbox::new();
    let served = sb.serve(&[]);
    let url = served.url.clone();
    let token = sb.api_token();
    assert!(token.len() >= 32);
    let denied = agent().get(&format!("{url}/api/health")).call().unwrap();
    assert_eq!(denied.status().as_u16(), 401);
    let mut said = agent()
        .post(&format!("{url}/api/chat"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(json!({"conversation_id": "web", "text": "turn on the hall lights"}))
        .unwrap();
    assert_eq!(said.status().as_u16(), 200);
    let body: Value = serde_json::from_str(&said.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(body["reply"], "Okay, the hall lights are on.");
    let mut page = agent().get(&format!("{url}/")).call().unwrap();
    assert!(
        page.body_mut()
            .read_to_string()
            .unwrap()
            .contains("<title>CAAL</title>")
    );

    // SIGTERM: the server finishes and exits 0; the store was closed cleanly.
    let (status, _) = served.terminate();
    assert!(status.success(), "{status}");
    let list = sb.run(&["trace", "list", "--json"]).ok().json();
    assert_eq!(list[0]["status"], "ok");
    sb.run(&["say", "hello"]).ok();
}

#[test]
fn a_network_address_needs_a_configured_token() {
    let sb = Sandbox::new();
    let run = sb.run(&["serve", "--bind", "0.0.0.0:0"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("CAAL_API_TOKEN"), "{}", run.stderr);
    let run = sb.run(&["serve", "--bind", "not-an-address"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("host:port"), "{}", run.stderr);
}

#[test]
fn the_serve_benchmark_prints_its_figures_as_a_last_json_line() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "bench",
            "serve",
            "--clients",
            "4",
            "--seconds",
            "0.5",
            "--json",
        ])
        .ok();
    let last: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert!(last["rounds"].as_u64().unwrap() > 0, "{last}");
    assert_eq!(last["errors"], 0);
    assert_eq!(last["stream_lost"], 0, "the live stream kept up: {last}");
    assert!(last["p99_ms"].as_f64() >= last["p50_ms"].as_f64());
}

#[test]
fn the_log_has_a_line_per_request_and_no_secret() {
    let sb = Sandbox::new();
    let served = sb.serve(&[]);
    let url = served.url.clone();
    let token = sb.api_token();
    let key = "ghp_Rk2mN8vQ4xT6zB1cD9fH3jL5pS7wY0aE2gU4";
    let missing = agent()
        .get(&format!("{url}/api/rounds/{key}"))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    let _ = agent()
        .post(&format!("{url}/api/chat"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(json!({"text": format!("my key is {key}")}))
        .unwrap();
    let (status, log) = served.terminate();
    assert!(status.success(), "{status}");
    let log = log.join("\n");
    assert!(
        log.contains("request") && log.contains("status=404") && log.contains("/api/chat"),
        "{log}"
    );
    assert!(!log.contains(key), "{log}");
    assert!(!log.contains(&token), "the API token is never logged");
}

#[test]
fn say_and_chat_go_through_a_running_serve_instead_of_refusing() {
    let sb = Sandbox::new();
    let served = sb.serve(&[]);
    assert!(sb.data().join("serve.json").exists());
    // The data dir is held by serve; the round goes through its API.
    let said = sb.say("through", "turn on the kitchen lights");
    assert_eq!(said["reply"], "Okay, the kitchen lights are on.", "{said}");
    assert_eq!(said["status"], "ok");
    let plain = sb
        .run(&[
            "say",
            "--conversation",
            "through",
            "turn off the kitchen lights",
        ])
        .ok();
    assert_eq!(plain.stdout.trim(), "Okay, the kitchen lights are off.");
    let chat = sb
        .run_with_stdin(
            &["chat", "--conversation", "through"],
            "add tea to the shopping list\n/quit\n",
        )
        .ok();
    assert!(
        chat.stdout
            .contains("caal> Added tea to the shopping list."),
        "{}",
        chat.stdout
    );
    // A chat through the service rings what rings there, between lines.
    let stdout = sb.chat_open_for(
        "through",
        "set a tea timer for 2 seconds",
        std::time::Duration::from_secs(4),
    );
    assert!(
        stdout.contains("caal> Tea timer set for 2 seconds."),
        "{stdout}"
    );
    assert!(stdout.contains("🔔 Your tea timer is done."), "{stdout}");
    // Bad input is the service's own error, exit 2, nothing recorded.
    let empty = sb.run(&["say", "--conversation", "through", " "]);
    assert_eq!(empty.code, 2, "{}", empty.stderr);
    // The rounds are the service's, recorded once each.
    let rounds: Value = agent()
        .get(&format!("{}/api/conversations/through/rounds", served.url))
        .header("Authorization", &format!("Bearer {}", sb.api_token()))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(
        rounds["rounds"].as_array().map(Vec::len),
        Some(5),
        "{rounds}"
    );
    let (status, _) = served.terminate();
    assert!(status.success());
    assert!(
        !sb.data().join("serve.json").exists(),
        "a clean stop removes serve.json"
    );
    // With serve stopped, say runs in its own process again.
    let local = sb.say("through", "what's on the shopping list");
    assert!(local["reply"].as_str().unwrap().contains("tea"), "{local}");
}

/// A client says where it is: "turn on the lights" and "in here" act in
/// that area (by its name or another name); an area the home lacks is
/// refused by name, nothing run; the area is in the trace.
#[test]
fn the_clients_area_is_where_a_request_that_names_none_acts() {
    let sb = Sandbox::new();
    // Here, without the service.
    let run = sb.run(&["say", "--area", "attic", "turn", "on", "the", "lights"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("\"attic\"") && run.stderr.contains("living room"),
        "{}",
        run.stderr
    );
    let here = sb
        .run(&[
            "say",
            "--json",
            "--area",
            "study",
            "turn off the lights in here",
        ])
        .ok()
        .json();
    assert_eq!(here["reply"], "Okay, the office lights are off.", "{here}");
    // Without an area, the room is asked for, as before.
    let asked = sb.run(&["say", "turn on the lights"]).ok();
    assert!(asked.stdout.starts_with("Which room?"), "{}", asked.stdout);

    // Through the service: the API's `area`, and `caal say` going through it.
    let served = sb.serve(&[]);
    let token = sb.api_token();
    let chat = |body: Value| {
        let mut r = agent()
            .post(&format!("{}/api/chat", served.url))
            .header("Authorization", &format!("Bearer {token}"))
            .send_json(body)
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
        (status, body)
    };
    let (status, body) = chat(
        json!({"conversation_id": "hall-panel", "text": "light this room up", "area": "Hallway"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Okay, the hall lights are on.", "{body}");
    let (status, body) = chat(
        json!({"conversation_id": "hall-panel", "text": "turn on the lights", "area": "attic"}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "area.unknown", "{body}");
    let via = sb
        .run(&["say", "--json", "--area", "lounge", "turn on the lights"])
        .ok()
        .json();
    assert_eq!(
        via["reply"], "Okay, the living room lights are on.",
        "{via}"
    );
    let (status, _) = served.terminate();
    assert!(status.success());
    // The trace says where each was said; the refused one left nothing.
    let list = sb
        .run(&["trace", "list", "--conversation", "hall-panel", "--json"])
        .ok()
        .json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let round = list[0]["round_id"].as_str().unwrap();
    let received = &crate::voice::events_of(&sb, round, "input.received")[0];
    assert_eq!(received["area"], "hall", "{received}");
}
