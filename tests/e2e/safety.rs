//! Secrets through the real binary: scrubbed in replies, traces, files and errors.

use std::fs;

use crate::support::Sandbox;

const KEY: &str = "ghp_Rk2mN8vQ4xT6zB1cD9fH3jL5pS7wY0aE2gU4";

#[test]
fn a_secret_said_to_caal_reaches_no_file_no_export_and_no_output() {
    let sb = Sandbox::new();
    let said = sb
        .run(&["say", "--json", &format!("add {KEY} to the shopping list")])
        .ok();
    assert!(
        !said.stdout.contains(KEY) && said.stdout.contains("secret_ref:github_token:"),
        "{}",
        said.stdout
    );
    let listed = sb.run(&["say", "what's on the shopping list"]).ok();
    assert!(!listed.stdout.contains(KEY));
    let export = sb.run(&["trace", "export"]).ok();
    assert!(!export.stdout.contains(KEY) && export.stdout.contains("safety.redacted"));
    for entry in fs::read_dir(sb.data()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{} holds the secret",
            path.display()
        );
    }
    // A credential is refused as an id, and the error does not repeat it.
    let run = sb.run(&["say", "--conversation", KEY, "hello"]);
    assert_eq!(run.code, 2);
    assert!(
        !run.stderr.contains(KEY) && run.stderr.contains("conversation_id"),
        "{}",
        run.stderr
    );
}

/// Every secret kind through typed text, a tool result, a model's answer and
/// a model's tool call, in a running `caal serve`: none reaches the database
/// or its WAL, the log, the export, an HTTP response or the model; the tools
/// that need secrets get the real ones.
#[test]
fn every_secret_kind_on_every_path_reaches_no_file_log_export_response_or_model() {
    use caal::safety::corpus::every_secret;
    use serde_json::{Value, json};

    use crate::support::Peer;

    let secrets = every_secret(0x5EC2E7);
    let all_in_one = json!({"devices": secrets.iter().map(|(kind, full, _)| json!({"name": kind, "credential": full})).collect::<Vec<_>>()});
    let tool_result = all_in_one.to_string();
    let hook = Peer::start(move |_, _| (200, tool_result.clone()));
    let ha = Peer::start(|_, _| (200, "[]".into()));
    // The model answers with a secret in words, or asks for a tool with one in its arguments.
    let leaked: Vec<String> = secrets.iter().map(|(_, full, _)| full.clone()).collect();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let model = Peer::start(move |_, body| {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let secret = &leaked[n % leaked.len()];
        let message = if body.contains("please buy") {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "shopping_add", "arguments": json!({"item": secret}).to_string()}}]})
        } else {
            json!({"role": "assistant", "content": format!("Noted, your key is {secret}.")})
        };
        let reply = json!({"model": "fake", "choices": [{"index": 0, "finish_reason": "stop", "message": message}]});
        (200, reply.to_string())
    });
    let ha_token = "eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJob21lIiwiaWF0IjoxNzAwMDAwMDAwfQ.c2lnbmF0dXJlLXNpZ25hdHVyZS14eXo";

    let sb = Sandbox::new();
    fs::create_dir_all(sb.path().join("config")).unwrap();
    fs::write(
        sb.path().join("config/caal.toml"),
        format!(
            r#"
[executors.webhooks.hook]
url = "{hook}/hook"
timeout_ms = 3000
[executors.home_assistant]
url = "{ha}"
token_env = "CAAL_HA_TOKEN"
timeout_ms = 3000
[commands."shopping.add"]
executor = "webhook:hook"
[commands."home.status"]
executor = "webhook:hook"
[commands."door.lock"]
executor = "home_assistant"
service = "lock.lock"
data = {{ entity_id = "lock.{{door}}_door" }}
[llm]
tool_auth_floor = 1
answer_with = ["local"]
"#,
            hook = hook.url,
            ha = ha.url
        ),
    )
    .unwrap();
    let served = sb.serve(&[
        ("CAAL_LLM_LOCAL_URL", model.url.as_str()),
        ("CAAL_HA_TOKEN", ha_token),
        ("CAAL_LOG", "debug"),
    ]);
    let token = sb.api_token();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(20)))
        .build()
        .into();
    let mut responses = String::new();
    let mut say = |text: &str| -> Value {
        let body = agent
            .post(&format!("{}/api/chat", served.url))
            .header("Authorization", &format!("Bearer {token}"))
            .send_json(json!({"conversation_id": "house", "text": text}))
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        responses.push_str(&body);
        serde_json::from_str(&body).unwrap()
    };
    // Typed, each kind: the model is asked, and answers with another secret.
    for (_, full, _) in &secrets {
        say(&format!("here is the key you asked for: {full}"));
    }
    // Typed into a command's argument: the webhook needs the real value.
    let (_, typed, _) = &secrets[3];
    say(&format!("add {typed} to the shopping list"));
    // A tool result full of secrets.
    let status = say("home status");
    assert_eq!(status["status"], "ok", "{status}");
    // A model's tool call with a secret in its arguments.
    let bought = say("please buy something for the party");
    assert_eq!(bought["command_id"], "shopping.add", "{bought}");
    // A tool that needs the Home Assistant token.
    say("lock the front door");
    for path in [
        "/api/trace/export",
        "/api/conversations/house/rounds?limit=100",
        "/api/conversations",
    ] {
        let body = agent
            .get(&format!("{}{path}", served.url))
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        responses.push_str(&body);
    }
    // The files while the server runs (the WAL holds the recent rounds).
    let mut files = String::new();
    let read_files = |files: &mut String| {
        for entry in fs::read_dir(sb.data()).unwrap() {
            let path = entry.unwrap().path();
            files.push_str(&String::from_utf8_lossy(&fs::read(&path).unwrap()));
        }
    };
    assert!(sb.data().join("traces.db-wal").exists());
    read_files(&mut files);
    let (status, log) = served.terminate();
    assert!(status.success());
    read_files(&mut files);
    let log = log.join("\n");
    let export = sb.run(&["trace", "export"]).ok().stdout;
    let model_saw: String = model.seen().into_iter().map(|(_, _, body)| body).collect();
    assert!(
        model_saw.contains("secret_ref:"),
        "the model saw references"
    );

    // The whole secret, and 12-character runs of its random body from its
    // start, middle and end (every run of every haystack is too slow for a
    // debug build; the scrubber's own benchmark checks every run).
    let runs = |body: &str| -> Vec<String> {
        let chars: Vec<char> = body.chars().collect();
        if chars.len() < 12 {
            return vec![body.to_owned()];
        }
        [0, chars.len() / 2 - 6, chars.len() - 12]
            .iter()
            .map(|&i| chars[i..i + 12].iter().collect())
            .collect()
    };
    for (kind, full, body) in &secrets {
        let runs = runs(body);
        for (place, text) in [
            ("an HTTP response", &responses),
            ("the data dir's files", &files),
            ("the log", &log),
            ("the export", &export),
            ("the model", &model_saw),
        ] {
            assert!(
                !text.contains(full.as_str()) && runs.iter().all(|r| !text.contains(r.as_str())),
                "a {kind} secret reached {place}"
            );
        }
    }
    // The tools got the real values: the typed one and the model's, through
    // the webhook; the token, through Home Assistant's Authorization header.
    let hook_saw: String = hook.seen().into_iter().map(|(_, _, body)| body).collect();
    assert!(hook_saw.contains(typed.as_str()), "{hook_saw}");
    assert!(!hook_saw.contains("secret_ref:"), "{hook_saw}");
    let ha_saw = ha.seen();
    assert_eq!(ha_saw.len(), 1);
    assert!(
        ha_saw[0].1.contains(&format!("Bearer {ha_token}")),
        "{:?}",
        ha_saw[0]
    );
    assert!(export.contains("safety.redacted") && export.contains("llm.response"));
}

#[test]
fn scan_prints_scrubbed_text_or_findings_without_values() {
    let sb = Sandbox::new();
    let file = sb.path().join("notes.txt");
    fs::write(
        &file,
        format!("line one\nexport GITHUB_TOKEN={KEY}\npassword=hunter2hunter2\n"),
    )
    .unwrap();
    let out = sb.run(&["scan", file.to_str().unwrap()]).ok();
    assert!(
        out.stdout
            .starts_with("line one\nexport GITHUB_TOKEN=secret_ref:github_token:"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(KEY) && !out.stdout.contains("hunter2hunter2"));
    let json = sb.run(&["scan", "--json", file.to_str().unwrap()]).ok();
    assert!(!json.stdout.contains(KEY));
    let findings = json.json();
    assert_eq!(findings[0]["kind"], "github_token");
    assert_eq!(findings[0]["line"], 2);
    assert_eq!(findings[1]["kind"], "password_assignment");
    let start = findings[0]["start"].as_u64().unwrap() as usize;
    let end = findings[0]["end"].as_u64().unwrap() as usize;
    assert_eq!(
        &fs::read_to_string(&file).unwrap()[start..end],
        KEY,
        "offsets point at the secret"
    );
    let stdin = sb
        .run_with_stdin(&["scan", "-"], &format!("token: {KEY}"))
        .ok();
    assert!(!stdin.stdout.contains(KEY));
    let missing = sb.run(&["scan", "nope.txt"]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("nope.txt"));
}

#[test]
fn the_scan_benchmark_prints_recall_and_false_alterations() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "bench",
            "scan",
            "--lines",
            "5000",
            "--process-mb",
            "4",
            "--json",
        ])
        .ok();
    let last: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert!(last["recall"].as_f64().unwrap() > 0.99, "{last}");
    assert!(
        last["clean_altered_share"].as_f64().unwrap() < 0.01,
        "{last}"
    );
    assert!(last["mb_per_s"].as_f64().unwrap() > 0.0);
    assert!(last["worst_case_mb_per_s"].as_f64().unwrap() > 0.0);
    // `caal scan FILE` run whole, over a megabyte and then four.
    let runs = last["whole_process"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{last}");
    assert!(runs[0]["bytes"].as_u64().unwrap() >= 1_000_000, "{last}");
    assert!(runs[1]["bytes"].as_u64().unwrap() >= 4_000_000, "{last}");
    assert!(runs[1]["secrets"].as_u64().unwrap() > runs[0]["secrets"].as_u64().unwrap());
    assert!(
        runs.iter()
            .all(|r| r["peak_rss_mb"].as_f64().unwrap() > 0.0),
        "{last}"
    );
}
