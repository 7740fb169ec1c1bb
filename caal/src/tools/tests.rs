//! Webhook and Home Assistant executors against real HTTP servers on 127.0.0.1.

use std::{sync::Arc, time::Duration};

use serde_json::json;

use super::*;
use crate::{
    auth::AuthLevel,
    config::Config,
    round::tests::{Home, payload},
    router::Router,
};

use crate::testing::{NO_DELAY, Server};

fn wired(webhook: &str, home_assistant: &str) -> Config {
    Config::from_toml_over_defaults(&format!(
        r#"
        [executors.webhooks.n8n]
        url = "{webhook}/webhook/caal"
        timeout_ms = 400
        [executors.home_assistant]
        url = "{home_assistant}/"
        token_env = "TEST_HA_TOKEN"
        timeout_ms = 400
        [commands."lights.set"]
        executor = "webhook:n8n"
        [commands."door.unlock"]
        executor = "home_assistant"
        service = "lock.unlock"
        data = {{ entity_id = "lock.{{door.id}}_door" }}
        "#
    ))
    .unwrap()
}

fn token(value: Option<&'static str>) -> EnvLookup {
    Arc::new(move |k| {
        (k == "TEST_HA_TOKEN")
            .then(|| value.map(str::to_owned))
            .flatten()
    })
}

#[test]
fn a_webhook_gets_the_call_as_json_with_its_idempotency_key() {
    let hook = Server::start(|_, _| (200, r#"{"ok":true}"#.into(), NO_DELAY));
    let home = Home::with(wired(&hook.url, "http://127.0.0.1:9"), token(None));
    let r = home.say("c", "turn on the kitchen lights");
    assert_eq!(
        (r.status.as_str(), r.reply.as_str()),
        ("ok", "Okay, the kitchen lights are on.")
    );
    let seen = hook.seen();
    assert_eq!(seen.len(), 1);
    let call_id = r.commands[0].call_id.clone().unwrap();
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/webhook/caal")
    );
    assert_eq!(seen[0].header("Idempotency-Key"), Some(call_id.as_str()));
    assert!(
        seen[0]
            .header("Content-Type")
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(seen[0].body["command_id"], "lights.set");
    assert_eq!(
        seen[0].body["params"],
        json!({"room": "kitchen", "state": "on"})
    );
    assert_eq!(seen[0].body["call_id"], call_id);
    assert_eq!(seen[0].body["round_id"], r.round_id);
    let response = &home.of_type("c", "tool.response")[0];
    assert_eq!(
        (response["tool_id"].as_str(), response["status"].as_str()),
        (Some("webhook:n8n"), Some("ok"))
    );
    assert_eq!(response["result"]["body"], json!({"ok": true}));
    assert!(response["latency_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn webhook_timeouts_server_errors_and_refused_connections_fail_clearly() {
    let hook = Server::start(|n, _| match n {
        1 => (200, "{}".into(), Duration::from_millis(1_500)),
        2 => (503, "busy".into(), NO_DELAY),
        _ => (400, r#"{"error":"bad"}"#.into(), NO_DELAY),
    });
    let home = Home::with(wired(&hook.url, "http://127.0.0.1:9"), token(None));

    let timed_out = home.say("c", "turn on the kitchen lights");
    assert_eq!(
        (timed_out.status.as_str(), timed_out.failure_code.as_deref()),
        ("failed", Some("tool.failed"))
    );
    assert!(
        timed_out.reply.contains("did not answer in time"),
        "{}",
        timed_out.reply
    );
    let response = &home.of_type("c", "tool.response")[0];
    assert_eq!(
        (response["status"].as_str(), response["transient"].as_bool()),
        (Some("timeout"), Some(true))
    );

    let unavailable = home.say("c", "turn on the kitchen lights");
    assert!(
        unavailable.reply.contains("HTTP 503"),
        "{}",
        unavailable.reply
    );
    assert_eq!(home.of_type("c", "tool.response")[1]["transient"], true);
    let rejected = home.say("c", "turn on the kitchen lights");
    assert!(rejected.reply.contains("HTTP 400"), "{}", rejected.reply);
    assert_eq!(home.of_type("c", "tool.response")[2]["transient"], false);
    assert_eq!(hook.seen().len(), 3, "no call was retried by itself");

    // Nobody listening.
    let port = crate::testing::free_port();
    let home = Home::with(
        wired(&format!("http://127.0.0.1:{port}"), "http://127.0.0.1:9"),
        token(None),
    );
    let refused = home.say("c", "turn on the kitchen lights");
    assert!(
        refused.reply.contains("cannot reach the n8n webhook"),
        "{}",
        refused.reply
    );
    assert_eq!(home.of_type("c", "tool.response")[0]["transient"], true);
}

#[test]
fn home_assistant_gets_the_service_call_with_the_bearer_token() {
    let ha = Server::start(|_, _| (200, "[]".into(), NO_DELAY));
    let home = Home::with(
        wired("http://127.0.0.1:9", &ha.url),
        token(Some("secret-token-123")),
    );
    home.say("c", "unlock the back door");
    assert!(ha.seen().is_empty(), "nothing runs before the confirmation");
    let r = home.say("c", "yes");
    assert_eq!(r.reply, "The back door is unlocked.");
    let seen = ha.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/api/services/lock/unlock")
    );
    assert_eq!(
        seen[0].header("Authorization"),
        Some("Bearer secret-token-123")
    );
    assert_eq!(seen[0].body, json!({"entity_id": "lock.back_door"}));
    let request = &home.of_type("c", "tool.request")[0];
    assert_eq!(request["tool_id"], "home_assistant:lock.unlock");
    // The token is used, never recorded.
    let mut export = Vec::new();
    home.engine
        .store()
        .reader()
        .export(None, &mut export, &mut |_| {})
        .unwrap();
    assert!(
        !String::from_utf8(export)
            .unwrap()
            .contains("secret-token-123")
    );
}

#[test]
fn home_assistant_without_a_token_or_with_a_bad_one_fails_clearly() {
    let ha = Server::start(|_, _| (401, "unauthorized".into(), NO_DELAY));
    let home = Home::with(wired("http://127.0.0.1:9", &ha.url), token(None));
    home.say("c", "unlock the front door");
    let r = home.say("c", "yes");
    assert!(r.reply.contains("set TEST_HA_TOKEN"), "{}", r.reply);
    assert!(ha.seen().is_empty());

    let home = Home::with(wired("http://127.0.0.1:9", &ha.url), token(Some("wrong")));
    home.say("c", "unlock the front door");
    let r = home.say("c", "yes");
    assert!(r.reply.contains("HTTP 401"), "{}", r.reply);
    assert_eq!(home.of_type("c", "tool.response")[0]["transient"], false);
    assert_eq!(ha.seen().len(), 1);
}

#[test]
fn a_call_id_is_never_executed_twice() {
    let hook = Server::start(|_, _| (200, "{}".into(), NO_DELAY));
    let config = wired(&hook.url, "http://127.0.0.1:9");
    let router = Router::compile(&config).unwrap();
    let home = Home::with(config.clone(), token(None));
    let tools = Tools::new(
        Arc::new(StateDb::open(&home.dir.path().join("state.db")).unwrap()),
        &config.executors,
        token(None),
    );
    for id in ["lights.set", "shopping.add"] {
        let raw = std::collections::BTreeMap::from([
            ("room".to_string(), "hall".to_string()),
            ("state".to_string(), "on".to_string()),
            ("item".to_string(), "tea".to_string()),
        ]);
        let command = router.resolve_command(id, raw, None, None).unwrap();
        let spec = router.command(id).unwrap();
        let call = ToolCall {
            call_id: CallId::new(),
            command: &command,
            spec,
            conversation_id: "c",
            round_id: "r",
            now_ms: 0,
        };
        assert_eq!(tools.execute(&call).unwrap().status, ToolStatus::Ok);
        let again = tools.execute(&call).unwrap();
        assert_eq!(again.status, ToolStatus::Failed);
        assert!(
            again.message.contains("never run twice"),
            "{}",
            again.message
        );
        assert_eq!(
            tools
                .call_status(&call.call_id.to_string())
                .unwrap()
                .unwrap()
                .0,
            "ok"
        );
        assert!(command.auth_level >= AuthLevel::RUN);
    }
    assert_eq!(hook.seen().len(), 1, "the webhook saw the call once");
    let _ = payload;
}

/// Every secret kind through typed text, and secrets through a tool's
/// parameters and its result: none reaches the database files (with their
/// WALs), the export or a reply, and the tool gets the real value.
#[test]
fn secrets_reach_the_tool_and_nothing_else() {
    use crate::safety::corpus;
    let leaked = "sk-proj-Zq9XwLm3Rt7Yv2Bn8Kp4Hs6Jd1Fg5Tc0Ve9Wq";
    let hook = Server::start(move |_, seen| {
        (
            200,
            json!({"echo": seen.body, "debug": format!("authorization: Bearer {leaked}")})
                .to_string(),
            NO_DELAY,
        )
    });
    let mut config = wired(&hook.url, "http://127.0.0.1:9");
    config.commands.get_mut("shopping.add").unwrap().executor = "webhook:n8n".into();
    let home = Home::with(config, token(Some("plain-ha-token-kitchen42")));

    // One line per kind the corpus knows, said as typed text.
    let mut lines: std::collections::BTreeMap<&str, corpus::Line> =
        std::collections::BTreeMap::new();
    for line in corpus::generate(11, 4_000, 1.0) {
        lines.entry(line.kind).or_insert(line);
    }
    assert!(lines.len() >= 27, "{} kinds", lines.len());
    let mut replies = Vec::new();
    for line in lines.values() {
        replies.push(home.say("c", &line.text).reply);
    }
    replies.push(
        home.say("c", "my home assistant token is plain-ha-token-kitchen42")
            .reply,
    );

    // Through a tool: the webhook needs the real value, and answers with secrets.
    let gh = "ghp_Rk2mN8vQ4xT6zB1cD9fH3jL5pS7wY0aE2gU4";
    let r = home.say("c", &format!("add {gh} to the shopping list"));
    let sent = hook.seen().last().unwrap().body.clone();
    assert_eq!(
        sent["params"]["item"], gh,
        "the tool received the real secret"
    );
    replies.push(r.reply.clone());
    assert!(r.reply.contains("secret_ref:github_token:"), "{}", r.reply);

    let mut haystacks: Vec<(String, String)> = Vec::new();
    for file in ["traces.db", "traces.db-wal", "state.db", "state.db-wal"] {
        if let Ok(bytes) = std::fs::read(home.dir.path().join(file)) {
            haystacks.push((file.into(), String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    let mut export = Vec::new();
    home.engine
        .store()
        .reader()
        .export(None, &mut export, &mut |_| {})
        .unwrap();
    haystacks.push(("export".into(), String::from_utf8(export).unwrap()));
    haystacks.push(("replies".into(), replies.join("\n")));
    assert!(
        haystacks.iter().any(|(f, _)| f == "traces.db-wal"),
        "the WAL is checked while it holds data"
    );
    let trace = &haystacks.iter().find(|(f, _)| f == "export").unwrap().1;
    assert!(
        trace.contains("\"event_type\":\"safety.redacted\""),
        "redactions are recorded"
    );

    for (place, text) in &haystacks {
        for line in lines.values() {
            // The body, and runs of 12 spread along it.
            let body: Vec<char> = line.secret.as_deref().unwrap().chars().collect();
            let runs = (0..=4).map(|k| k * body.len().saturating_sub(12) / 4);
            for at in runs {
                let run: String = body[at..(at + 12).min(body.len())].iter().collect();
                assert!(!text.contains(&run), "{} reached {place}", line.kind);
            }
        }
        for raw in [gh, leaked, "plain-ha-token-kitchen42"] {
            assert!(!text.contains(raw), "{raw} reached {place}");
        }
    }
}
