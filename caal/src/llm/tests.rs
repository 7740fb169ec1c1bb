//! Providers against local servers that speak the real wire formats.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::testing::{NO_DELAY, Server};

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::new("system", "You run a home."),
            ChatMessage::new("user", "turn on the kitchen lights"),
        ],
        tools: vec![ToolSpec {
            name: "lights_set".into(),
            description: "Switch lights".into(),
            parameters: json!({"type": "object", "required": ["room", "state"],
                               "properties": {"room": {"type": "string"}, "state": {"enum": ["on", "off"]}}}),
        }],
        max_tokens: Some(64),
        temperature: Some(0.2),
        tool_required: false,
    }
}

#[test]
fn openai_compatible_chat_with_tool_calls() {
    let server = Server::start(|_, _| {
        let body = json!({
            "model": "smol-135m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant",
                "content": "I'll switch the kitchen lights on.",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "lights_set", "arguments": "{\"room\":\"kitchen\",\"state\":\"on\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "lights_set", "arguments": "{room: kitchen"}}
                ]}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 9}
        });
        (200, body.to_string(), NO_DELAY)
    });
    let provider = Provider::new(
        ProviderKind::OpenAi,
        &format!("{}/", server.url),
        "smol-135m",
        Some("sk-test-key-abcdef012345".into()),
        2_000,
    );
    let r = provider.chat(&request()).unwrap();
    assert_eq!(
        r.text, "I'll switch the kitchen lights on.",
        "the turn narrative is kept"
    );
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(
        r.tool_calls[0].arguments,
        json!({"room": "kitchen", "state": "on"})
    );
    assert_eq!(
        r.tool_calls[1].arguments,
        json!("{room: kitchen"),
        "bad arguments are kept for the validators"
    );
    assert_eq!(r.tool_calls[0].id.as_deref(), Some("call_1"));
    assert_eq!(r.usage.unwrap()["prompt_tokens"], 42);
    assert!(!r.truncated);

    let seen = &server.seen()[0];
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        seen.header("Authorization"),
        Some("Bearer sk-test-key-abcdef012345")
    );
    assert_eq!(seen.body["model"], "smol-135m");
    assert_eq!(seen.body["stream"], false);
    assert_eq!(seen.body["max_tokens"], 64);
    assert_eq!(
        seen.body["messages"][1],
        json!({"role": "user", "content": "turn on the kitchen lights"})
    );
    assert_eq!(seen.body["tools"][0]["type"], "function");
    assert_eq!(
        seen.body["tools"][0]["function"]["parameters"]["required"],
        json!(["room", "state"])
    );
    // The key goes to its provider and nowhere else.
    assert!(
        !crate::safety::global()
            .scrub("key sk-test-key-abcdef012345")
            .contains("sk-test-key-abcdef012345")
    );
}

#[test]
fn ollama_chat_with_tool_calls() {
    let server = Server::start(|_, _| {
        let body = json!({
            "model": "qwen2.5:0.5b", "done": true, "done_reason": "length",
            "message": {"role": "assistant", "content": "", "thinking": "The user wants the hall dark.",
                        "tool_calls": [{"function": {"name": "lights_set", "arguments": {"room": "hall", "state": "off"}}}]},
            "prompt_eval_count": 30, "eval_count": 12
        });
        (200, body.to_string(), NO_DELAY)
    });
    let provider = Provider::new(
        ProviderKind::Ollama,
        &server.url,
        "qwen2.5:0.5b",
        None,
        2_000,
    );
    let r = provider.chat(&request()).unwrap();
    assert_eq!(r.tool_calls[0].name, "lights_set");
    assert_eq!(
        r.tool_calls[0].arguments,
        json!({"room": "hall", "state": "off"})
    );
    assert!(r.truncated, "done_reason length");
    assert_eq!(
        r.reasoning.as_deref(),
        Some("The user wants the hall dark.")
    );
    assert_eq!(
        r.usage.unwrap(),
        json!({"prompt_tokens": 30, "completion_tokens": 12})
    );
    let seen = &server.seen()[0];
    assert_eq!(seen.path, "/api/chat");
    assert_eq!(seen.header("Authorization"), None);
    assert_eq!(
        seen.body["options"],
        json!({"num_predict": 64, "temperature": 0.2f32})
    );
    assert_eq!(seen.body["tools"][0]["function"]["name"], "lights_set");
}

#[test]
fn faults_are_classified_for_the_retry_policy() {
    let server = Server::start(|n, _| match n {
        1 => (200, "{}".into(), Duration::from_millis(800)),
        2 => (500, "overloaded".into(), NO_DELAY),
        3 => (429, "slow down".into(), NO_DELAY),
        4 => (400, "bad request".into(), NO_DELAY),
        5 => (200, "this is not json".into(), NO_DELAY),
        _ => (200, json!({"choices": []}).to_string(), NO_DELAY),
    });
    let provider = Provider::new(ProviderKind::OpenAi, &server.url, "m", None, 300);
    let outcomes: Vec<LlmError> = (0..6)
        .map(|_| provider.chat(&request()).unwrap_err())
        .collect();
    assert!(
        matches!(outcomes[0], LlmError::Timeout { .. }),
        "{}",
        outcomes[0]
    );
    assert!(matches!(outcomes[1], LlmError::Http { status: 500, .. }));
    assert!(matches!(outcomes[2], LlmError::Http { status: 429, .. }));
    assert!(matches!(outcomes[3], LlmError::Http { status: 400, .. }));
    assert!(matches!(outcomes[4], LlmError::Malformed { .. }));
    assert!(matches!(outcomes[5], LlmError::Malformed { .. }));
    let transient: Vec<bool> = outcomes.iter().map(LlmError::transient).collect();
    assert_eq!(transient, [true, true, true, false, false, false]);
    assert!(outcomes[0].to_string().contains("300 ms"));

    let port = crate::testing::free_port();
    let nobody = Provider::new(
        ProviderKind::Ollama,
        &format!("http://127.0.0.1:{port}"),
        "m",
        None,
        300,
    );
    let err = nobody.chat(&request()).unwrap_err();
    assert!(
        matches!(err, LlmError::Unreachable { .. }) && err.transient(),
        "{err}"
    );
    assert!(
        err.to_string().contains("is the model server running"),
        "{err}"
    );
}

#[test]
fn prompts_are_capped_keeping_head_tail_and_the_hash_of_the_whole() {
    let short = cap_prompt("turn on the lights", 8_000);
    assert_eq!(
        (short.text.as_str(), short.truncated),
        ("turn on the lights", false)
    );
    assert!(short.hash.starts_with("sha256:"));
    let long: String = (0..5_000).map(|i| format!("{i:05} ")).collect();
    let capped = cap_prompt(&long, 8_000);
    assert!(capped.truncated);
    assert!(
        capped.text.chars().count() <= 8_000,
        "{}",
        capped.text.chars().count()
    );
    assert!(capped.text.starts_with("00000 00001"));
    assert!(capped.text.ends_with("04999 "));
    assert!(
        capped.text.contains(&capped.hash),
        "the marker names the whole prompt's hash"
    );
    assert_eq!(
        capped.hash,
        crate::trace::chain::sha256_tagged(long.as_bytes())
    );
    assert_eq!(
        (capped.head.chars().count(), capped.tail.chars().count()),
        (200, 200)
    );
    let multibyte = cap_prompt(&"é😀".repeat(10_000), 1_000);
    assert!(multibyte.text.chars().count() <= 1_000);
}

/// A stand-in for caal-llm: a script that prints the ready line naming `url`
/// (a scripted server speaking the wire format), then waits, or says nothing.
fn fake_server_bin(dir: &std::path::Path, url: Option<&str>) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("caal-llm");
    let body = match url {
        Some(url) => format!(
            "#!/bin/sh\necho \"caal-llm listening on {url} model=fake-model\"\nexec sleep 600\n"
        ),
        None => "#!/bin/sh\nexec sleep 600\n".to_owned(),
    };
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn local_config(start_timeout_ms: u64) -> crate::config::LocalTierConfig {
    let mut c = crate::config::Config::defaults().unwrap().llm.local;
    c.start_timeout_ms = start_timeout_ms;
    c.timeout_ms = 2_000;
    c
}

#[test]
fn the_local_server_is_started_on_first_use_and_again_when_it_died() {
    let answers = Server::start(|_, _| {
        let body = json!({"model": "fake-model", "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": "Hello."}}]});
        (200, body.to_string(), NO_DELAY)
    });
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_server_bin(dir.path(), Some(&answers.url));
    let tier = Tier::local(
        bin,
        dir.path().join("fake-model.gguf"),
        &local_config(5_000),
    );
    assert!(
        tier.server().is_none(),
        "nothing starts before it is needed"
    );
    assert_eq!(tier.chat(&request()).unwrap().text, "Hello.");
    let (url, pid) = tier.server().unwrap();
    assert_eq!(url, answers.url);
    let pid = pid.unwrap();
    // The same process serves the next question.
    tier.chat(&request()).unwrap();
    assert_eq!(tier.server().unwrap().1, Some(pid));
    // It dies; the next question starts it again.
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(tier.chat(&request()).unwrap().text, "Hello.");
    let again = tier.server().unwrap().1.unwrap();
    assert_ne!(again, pid);
    assert_eq!(answers.seen().len(), 3);
    drop(tier);
    // Dropping the tier ends its server.
    std::thread::sleep(Duration::from_millis(100));
    let alive = std::path::Path::new(&format!("/proc/{again}")).exists()
        && !std::fs::read_to_string(format!("/proc/{again}/stat"))
            .unwrap_or_default()
            .contains(") Z ");
    assert!(!alive, "caal-llm outlived its tier");
}

#[test]
fn a_server_that_never_reports_ready_is_a_clear_start_error() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_server_bin(dir.path(), None);
    let tier = Tier::local(bin.clone(), dir.path().join("m.gguf"), &local_config(300));
    let err = tier.chat(&request()).unwrap_err();
    assert!(!err.transient(), "another attempt would wait again");
    let msg = err.to_string();
    assert!(
        msg.contains(&bin.display().to_string())
            && msg.contains("did not report ready within 300 ms"),
        "{msg}"
    );
    let missing = Tier::local(
        dir.path().join("nope"),
        dir.path().join("m.gguf"),
        &local_config(300),
    );
    assert!(
        missing
            .chat(&request())
            .unwrap_err()
            .to_string()
            .contains("cannot start")
    );
}

/// A scoring server: every character a token, each at log probability -0.1.
fn char_scorer() -> Server {
    Server::start(|_, seen| {
        let choices: Vec<_> = seen.body["prompt"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let p = p.as_str().unwrap();
                let offsets: Vec<usize> = p.char_indices().map(|(at, _)| at).collect();
                json!({"index": i, "text": p, "logprobs": {
                    "tokens": p.chars().map(String::from).collect::<Vec<_>>(),
                    "token_logprobs": vec![-0.1; offsets.len()],
                    "text_offset": offsets}})
            })
            .collect();
        (200, json!({"choices": choices}).to_string(), NO_DELAY)
    })
}

#[test]
fn a_tier_sends_only_the_texts_it_has_not_scored_before() {
    let server = char_scorer();
    let tier = Tier::fixed(
        "local",
        Provider::new(ProviderKind::OpenAi, &server.url, "m", None, 2_000),
    );
    let text = |p: &str, c: &str| (p.to_owned(), c.to_owned());
    let first = tier
        .score(&[
            text("said A", " on."),
            text("anyway", " on."),
            text("anyway", " off."),
        ])
        .unwrap();
    assert_eq!(first.len(), 3);
    assert!(
        (first[0] + 0.4).abs() < 1e-9 && (first[2] + 0.5).abs() < 1e-9,
        "{first:?}"
    );
    // The next sentence offers the same options: only what was said is new.
    let second = tier
        .score(&[
            text("said B", " off."),
            text("anyway", " on."),
            text("said B", " on."),
            text("anyway", " off."),
        ])
        .unwrap();
    assert_eq!(second.len(), 4);
    assert!((second[0] + 0.5).abs() < 1e-9, "{second:?}");
    assert_eq!(
        (second[1], second[3]),
        (first[1], first[2]),
        "in the order asked"
    );
    assert!((second[2] + 0.4).abs() < 1e-9, "{second:?}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].body["prompt"],
        json!(["said B off.", "said B on."]),
        "only the texts not scored before are sent"
    );
    // Everything scored before: no request at all.
    assert_eq!(
        tier.score(&[text("anyway", " off.")]).unwrap(),
        vec![first[2]]
    );
    assert_eq!(server.seen().len(), 2);
}
