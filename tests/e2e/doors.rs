//! CAAL's doors to the ecosystem, each driven by a client nobody on this
//! project wrote: the official `openai` Python package against
//! `/v1/chat/completions` and `/v1/models` of a real `caal serve`.
//! The clients live in the virtual environment `.ci/setup` makes
//! (tests/clients/requirements.txt, installed by hash).

use std::{path::PathBuf, process::Command};

use serde_json::Value;

use crate::support::Sandbox;

/// The Python of the clients' virtual environment.
pub fn client_python() -> PathBuf {
    // Beside the models dir, as .ci/setup puts it.
    let caal = match std::env::var_os("CAAL_MODELS_DIR") {
        Some(models) => PathBuf::from(models).parent().unwrap().to_owned(),
        None => std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".local/share"))
            .join("caal"),
    };
    let python = caal.join("clients-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing; run `bash .ci/setup` (it installs the protocol clients)",
        python.display()
    );
    python
}

/// Runs a client script from tests/clients with these arguments; the last
/// line it prints is a JSON object of what it saw.
fn client(script: &str, args: &[&str]) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/clients")
        .join(script);
    let out = Command::new(client_python())
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script} printed no JSON last ({e}): {stdout}"))
}

#[test]
fn the_openai_package_talks_to_caal_whole_streamed_and_through_a_confirmation() {
    let sb = Sandbox::new();
    let served = sb.serve(&[]);
    let seen = client("openai_door.py", &[&served.url, &sb.api_token()]);

    assert_eq!(seen["models"], serde_json::json!(["caal"]));
    assert_eq!(seen["reply"], "Okay, the kitchen lights are on.");
    assert_eq!(seen["finish_reason"], "stop");
    assert_eq!(seen["object"], "chat.completion");
    assert_eq!(seen["caal"]["conversation_id"], "kitchen-door");
    assert_eq!(seen["caal"]["route_code"], "intent.command");
    let round_id = seen["caal"]["round_id"].as_str().unwrap().to_owned();

    // Streamed: the history the client resent is not run again; the last
    // message is the round.
    assert_eq!(seen["streamed"], "Okay, the kitchen lights are off.");
    assert_eq!(seen["stream_finish"], "stop");
    assert!(seen["stream_chunks"].as_u64().unwrap() >= 3, "{seen}");

    // A level-3 command asks; the next message's "yes" runs it, in the
    // conversation derived from the thread's first message.
    assert_eq!(seen["asked"], "Unlock the front door? Say yes to confirm.");
    assert_eq!(seen["pending"], true);
    let derived = seen["derived_conversation"].as_str().unwrap();
    assert!(derived.starts_with("openai-"), "{seen}");
    assert_eq!(seen["confirmed"], "The front door is unlocked.");
    assert_eq!(seen["confirmed_conversation"], derived);

    // OpenAI's own errors.
    assert_eq!(seen["empty_messages"]["status"], 400, "{seen}");
    assert_eq!(seen["empty_messages"]["param"], "messages", "{seen}");
    assert_eq!(seen["wrong_key"]["status"], 401, "{seen}");

    // Every round is in the trace like any other: the API's channel, the
    // chain intact, the round the client was told about there.
    let shown = sb.run(&["trace", "show", &round_id, "--json"]).ok().json();
    assert_eq!(shown["round"]["channel"], "api");
    assert_eq!(shown["round"]["conversation_id"], "kitchen-door");
    let (status, log) = served.terminate();
    assert!(status.success());
    // Refusals are logged, the token never.
    let token = sb.api_token();
    assert!(
        log.iter().any(|l| l.contains("openai request refused")),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains(&token)));
    assert_eq!(sb.run(&["trace", "verify"]).code, 0);
    // Two rounds in kitchen-door, on and off: the resent history was not run again.
    let list = sb
        .run(&["trace", "list", "--conversation", "kitchen-door", "--json"])
        .ok()
        .json();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
}

#[test]
fn the_doors_benchmark_times_both_doors_and_prints_json_last() {
    let sb = Sandbox::new();
    let run = sb.run(&["bench", "doors", "--rounds", "5", "--json"]).ok();
    assert!(
        run.stdout.contains("the OpenAI door adds"),
        "{}",
        run.stdout
    );
    let report: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["rounds"], 5);
    for key in ["api_p50_ms", "openai_p50_ms"] {
        assert!(report[key].as_f64().unwrap() > 0.0, "{report}");
    }
    let added = report["openai_p50_ms"].as_f64().unwrap() - report["api_p50_ms"].as_f64().unwrap();
    assert!((report["openai_added_p50_ms"].as_f64().unwrap() - added).abs() < 1e-9);
}
