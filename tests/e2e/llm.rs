//! The embedded local tier for real: caal-llm with the installed
//! SmolLM2-135M model, alone and started by `caal`; and the start-up guards.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
};

use serde_json::{Value, json};

use crate::support::Sandbox;

fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_caal"))
        .parent()
        .unwrap()
        .join("caal-llm")
}

/// The model as the setup script installs it.
fn model() -> PathBuf {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".local/share"));
    let path = std::env::var_os("CAAL_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| data.join("caal/models"))
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "{} is missing: run `bash .ci/setup`",
        path.display()
    );
    path
}

struct LlmServer {
    child: Child,
    url: String,
}

impl Drop for LlmServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server() -> LlmServer {
    start_server_with(&model(), &[])
}

fn start_server_with(model: &std::path::Path, args: &[&str]) -> LlmServer {
    let bin = server_bin();
    assert!(
        bin.is_file(),
        "{} is not built: `cargo build -p caal-llm-server`",
        bin.display()
    );
    let mut child = Command::new(bin)
        .arg("--model")
        .arg(model)
        .args(["--port", "0", "--threads", "1"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("caal-llm said {line:?}"))
        .to_owned();
    assert!(line.contains("model=SmolLM2-135M-Instruct.Q4_1"), "{line}");
    LlmServer { child, url }
}

fn post(url: &str, body: Value) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(120)))
        .build()
        .into();
    let mut r = agent
        .post(&format!("{url}/v1/chat/completions"))
        .send_json(body)
        .unwrap();
    (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
}

#[test]
fn the_local_server_answers_in_words_with_tool_calls_and_as_a_stream() {
    let server = start_server();
    let (status, body) = post(
        &server.url,
        json!({"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 24}),
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!text.trim().is_empty(), "{v}");
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() <= 24);
    assert!(v["timings"]["predicted_per_second"].as_f64().unwrap() > 0.0);

    // With tools, the grammar makes the reply a valid call of an offered tool
    // (or an answer): whatever the model picks, it parses.
    let tools = json!([{"type": "function", "function": {"name": "lights_set", "description": "Turn <state> the <room> lights.",
        "parameters": {"type": "object", "properties": {"room": {"type": "string"}, "state": {"type": "string", "enum": ["on", "off"]}},
                       "required": ["state"], "additionalProperties": false}}}]);
    let (status, body) = post(
        &server.url,
        json!({"messages": [{"role": "user", "content": "turn on the kitchen lights"}], "tools": tools, "max_tokens": 64}),
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let message = &v["choices"][0]["message"];
    match message["tool_calls"].as_array() {
        Some(calls) => {
            assert_eq!(calls[0]["function"]["name"], "lights_set");
            let args: Value =
                serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
            assert!(
                ["on", "off"].contains(&args["state"].as_str().unwrap()),
                "{args}"
            );
            assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        }
        None => assert!(message["content"].is_string(), "{v}"),
    }

    let (status, body) = post(
        &server.url,
        json!({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 12, "stream": true}),
    );
    assert_eq!(status, 200);
    let chunks: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(chunks.last(), Some(&"[DONE]"), "{body}");
    let streamed: String = chunks
        .iter()
        .filter_map(|c| serde_json::from_str::<Value>(c).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(!streamed.trim().is_empty(), "{body}");

    let (status, body) = post(&server.url, json!({"messages": []}));
    assert_eq!(status, 400);
    assert!(body.contains("messages"), "{body}");
}

/// The log probability of each token of `text` after the ones before it.
fn token_logprobs(url: &str, text: &str) -> Vec<f64> {
    let mut r = ureq::post(&format!("{url}/v1/completions"))
        .send_json(json!({"prompt": [text], "max_tokens": 0, "echo": true, "logprobs": 0}))
        .unwrap();
    let v: Value = r.body_mut().read_json().unwrap();
    v["choices"][0]["logprobs"]["token_logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|l| l.as_f64().unwrap())
        .collect()
}

#[test]
fn requantized_weights_are_written_once_beside_the_model_and_score_as_the_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    std::fs::copy(model(), &copy).unwrap();
    let made = dir.path().join("SmolLM2-135M-Instruct.Q4_1.q8_0.gguf");
    let text = "Someone said to their home assistant: \"it is too dark in here\"\nWhat they want the assistant to do is turn on the lights.";

    let as_shipped = token_logprobs(&start_server_with(&copy, &[]).url, text);
    assert!(!made.exists(), "nothing is written without --requantize");
    let requantized = {
        let server = start_server_with(&copy, &["--requantize", "q8_0"]);
        token_logprobs(&server.url, text)
    };
    // Q8_0 is finer than the Q4_1 it is made from: the same model, its log
    // probabilities a tenth of a nat apart on average (the activations are
    // rounded differently for each type), none by half a nat.
    assert_eq!(as_shipped.len(), requantized.len());
    let apart: Vec<f64> = as_shipped
        .iter()
        .zip(&requantized)
        .map(|(a, b)| (a - b).abs())
        .collect();
    let mean = apart.iter().sum::<f64>() / apart.len() as f64;
    let worst = apart.iter().copied().fold(0.0, f64::max);
    assert!(
        mean < 0.15 && worst < 0.5,
        "mean {mean}, worst {worst}: {as_shipped:?} vs {requantized:?}"
    );
    assert!(
        as_shipped != requantized,
        "the requantized weights were not the ones loaded"
    );
    let size = std::fs::metadata(&made).unwrap().len();
    assert!(
        size > std::fs::metadata(&copy).unwrap().len(),
        "Q8_0 is larger than Q4_1: {size}"
    );
    let when = std::fs::metadata(&made).unwrap().modified().unwrap();
    let again = start_server_with(&copy, &["--requantize", "q8_0"]);
    assert_eq!(token_logprobs(&again.url, text), requantized);
    assert_eq!(
        std::fs::metadata(&made).unwrap().modified().unwrap(),
        when,
        "made once, then reused"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let out = Command::new(server_bin())
        .arg("--model")
        .arg(&copy)
        .args(["--requantize", "q5_k"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("q5_k") && err.contains("q8_0"), "{err}");
}

#[test]
fn a_chat_question_gets_an_answer_through_the_local_model_started_by_caal() {
    let _ = model();
    let sb = Sandbox::with_real_model();
    sb.say("c", "switch to conversation mode");
    let r = sb.say("c", "What is the capital of France?");
    assert_eq!(r["route_code"], "intent.chat");
    assert_eq!(r["status"], "ok");
    let llm = &r["llm"];
    assert_eq!(llm["tier"], "local", "{r}");
    assert_eq!(llm["model"], "SmolLM2-135M-Instruct.Q4_1");
    assert!(!r["reply"].as_str().unwrap().trim().is_empty(), "{r}");

    // The trace holds the exchange.
    let round_id = r["round_id"].as_str().unwrap();
    let shown = sb.run(&["trace", "show", round_id, "--json"]).ok().json();
    let types: Vec<&str> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"llm.request") && types.contains(&"llm.response"),
        "{types:?}"
    );
}

#[test]
fn start_up_guards_name_the_key_to_set() {
    let sb = Sandbox::with_real_model();
    // A route needs a model and the configured one is not there: stop, naming the keys.
    let out = sb.run_env(
        &["say", "hello"],
        &[("CAAL_LLM_LOCAL_MODEL", "/nonexistent/model.gguf")],
    );
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(
        err.contains("llm.local.model")
            && err.contains(".ci/setup")
            && err.contains("[llm.remote]"),
        "{err}"
    );
    assert!(!sb.db().exists(), "nothing was recorded");

    // Without any route that needs a model, none is needed.
    std::fs::create_dir_all(sb.path().join("config")).unwrap();
    std::fs::write(
        sb.path().join("config/caal.toml"),
        r#"
[llm.local]
enabled = false
[states.default]
unmatched = "fallback"
[states.conversation]
unmatched = "fallback"
[states.research]
unmatched = "fallback"
"#,
    )
    .unwrap();
    let out = sb.run_env(
        &["say", "turn on the hall lights"],
        &[("CAAL_LLM_LOCAL_MODEL", "/nonexistent/model.gguf")],
    );
    // The research rule still routes to a model, so that is the needer named.
    let err = &out.stderr;
    assert_eq!(out.code, 2, "{err}");
    assert!(err.contains("rule \"research\""), "{err}");
    assert!(err.contains("llm.local.enabled is false"), "{err}");

    // A remote tier that does not answer is a warning, not a stop.
    let out = sb.run_env(
        &["config", "check"],
        &[
            ("CAAL_LLM_LOCAL_ENABLED", "true"),
            ("CAAL_LLM_REMOTE_URL", "http://127.0.0.1:9"),
            ("CAAL_LLM_REMOTE_MODEL", "big"),
        ],
    );
    let err = &out.stderr;
    assert_eq!(out.code, 0, "{err}");
    assert!(
        err.contains("warning")
            && err.contains("does not answer")
            && err.contains("llm.remote.url"),
        "{err}"
    );
    assert!(
        out.stdout
            .contains("model tiers: local (SmolLM2-135M-Instruct.Q4_1), remote (big)")
    );
}
