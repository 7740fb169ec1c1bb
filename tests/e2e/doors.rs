//! CAAL's doors to the ecosystem, each driven by a client nobody on this
//! project wrote: the official `openai` Python package against
//! `/v1/chat/completions` and `/v1/models` of a real `caal serve`.
//! The clients live in the virtual environment `.ci/setup` makes
//! (tests/clients/requirements.txt, installed by hash).

use serde_json::Value;

use crate::support::{Sandbox, client, client_env};

#[test]
fn the_openai_package_talks_to_caal_whole_streamed_and_through_a_confirmation() {
    let sb = Sandbox::new();
    let served = sb.serve(&[]);
    let seen = client("openai_door.py", &[&served.url, &sb.api_token()]);

    assert_eq!(seen["models"], serde_json::json!(["caal"]));
    assert_eq!(seen["reply"], "Okay, the kitchen lights are on.");
    assert_eq!(seen["finish_reason"], "stop");
    assert_eq!(seen["object"], "chat.completion");
    assert_eq!(seen["caal"]["conversation_id"], "openai:kitchen-door");
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
    assert!(derived.starts_with("openai:"), "{seen}");
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
    assert_eq!(shown["round"]["conversation_id"], "openai:kitchen-door");
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
        .run(&[
            "trace",
            "list",
            "--conversation",
            "openai:kitchen-door",
            "--json",
        ])
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

#[test]
fn the_wyoming_package_transcribes_handles_confirms_and_speaks_through_caal() {
    let sb = Sandbox::new();
    // Where satellites are: one by Home Assistant's id, this peer by address.
    sb.configure(
        "[doors.wyoming]\nareas = { \"assist_satellite.hall\" = \"hallway\", \"127.0.0.1\" = \"office\" }\n",
    );
    let served = sb.serve(&[("CAAL_WYOMING", "127.0.0.1:0")]);
    let (host, port) = served.wyoming();
    let seen = client("wyoming_door.py", &[&host, &port]);

    // What Home Assistant's integration reads when it is added.
    assert_eq!(seen["asr"], serde_json::json!(["caal-whisper"]));
    assert_eq!(seen["asr_languages"], serde_json::json!(["en"]));
    assert_eq!(seen["handle"], serde_json::json!(["caal"]));
    assert_eq!(seen["home_control"], true);
    // The Piper voice speaks; espeak-ng is its fallback.
    assert_eq!(seen["tts"], serde_json::json!(["piper", "espeak-ng"]));

    // Speech transcribed, then handled in the conversation Home Assistant named.
    let heard = seen["heard"].as_str().unwrap().to_lowercase();
    assert!(heard.contains("kitchen lights"), "{seen}");
    let lights = &seen["lights"];
    assert_eq!(lights["handled"], true, "{seen}");
    assert_eq!(lights["text"], "Okay, the kitchen lights are on.");
    assert_eq!(
        lights["context"]["conversation_id"],
        "wyoming:01JD5Z7KXQ8M3V2N6R4T9W0ABC"
    );
    assert_eq!(lights["context"]["route_code"], "intent.command");

    // A level-3 command asks; the "yes" runs it.
    assert_eq!(
        seen["asked"]["text"], "Unlock the front door? Say yes to confirm.",
        "{seen}"
    );
    assert_eq!(seen["asked"]["context"]["pending_confirmation"], true);
    assert_eq!(seen["confirmed"]["text"], "The front door is unlocked.");
    assert_eq!(seen["confirmed"]["context"]["pending_confirmation"], false);

    // Nothing to do is not handled, and CAAL's answer goes with it.
    assert_eq!(seen["nothing"]["handled"], false, "{seen}");
    assert_eq!(
        seen["nothing"]["context"]["route_code"],
        "intent.incoherent"
    );
    assert!(!seen["nothing"]["text"].as_str().unwrap().is_empty());

    // The satellite's area: by its id, else its address, else said.
    assert_eq!(
        seen["here"]["text"], "Okay, the hall lights are off.",
        "{seen}"
    );
    assert_eq!(
        seen["by_address"]["text"], "Okay, the office lights are on.",
        "{seen}"
    );
    assert_eq!(
        seen["said_area"]["text"], "Okay, the living room lights are on.",
        "{seen}"
    );
    assert_eq!(seen["no_such_area"]["handled"], false, "{seen}");
    let refused = seen["no_such_area"]["text"].as_str().unwrap();
    assert!(
        refused.contains("attic") && refused.contains("kitchen"),
        "{seen}"
    );
    let round_id = seen["here"]["context"]["round_id"].as_str().unwrap();
    let received = &crate::voice::events_of(&sb, round_id, "input.received")[0];
    assert_eq!(received["area"], "hall", "{received}");

    // Speech synthesized by the Piper voice: 22,050 Hz 16-bit mono, about
    // as long as the sentence.
    let spoken = &seen["spoken"];
    assert_eq!(
        (
            spoken["rate"].as_u64(),
            spoken["width"].as_u64(),
            spoken["channels"].as_u64()
        ),
        (Some(22_050), Some(2), Some(1))
    );
    let seconds = spoken["seconds"].as_f64().unwrap();
    assert!((0.8..5.0).contains(&seconds), "{seen}");

    // A malformed event: Wyoming's own error, that connection closed, the
    // service still answering, and the log saying so.
    assert_eq!(seen["malformed"]["type"], "error");
    assert_eq!(seen["malformed"]["code"], "event.invalid");
    assert!(
        seen["malformed"]["text"]
            .as_str()
            .unwrap()
            .contains("payload_length")
    );
    assert_eq!(seen["malformed_closed"], true);
    assert_eq!(seen["after_malformed"], "info");
    let (status, log) = served.terminate();
    assert!(status.success(), "{log:?}");
    assert!(
        log.iter().any(|l| l.contains("wyoming: malformed event")),
        "{log:?}"
    );

    // The spoken rounds are voice rounds: their audio kept, its hash in the chain.
    let audio = sb.run(&["audio", "list", "--json"]).ok().json();
    let kept = audio.as_array().unwrap();
    assert_eq!(kept.len(), 2, "{audio}");
    let round_id = lights["context"]["round_id"].as_str().unwrap();
    let received = &crate::voice::events_of(&sb, round_id, "input.received")[0];
    assert_eq!(received["channel"], "voice");
    let clip = kept
        .iter()
        .find(|a| a["audio_id"] == received["audio_id"])
        .expect("the round's audio is kept");
    assert_eq!(received["audio_sha256"], clip["sha256"]);
    let path = std::path::Path::new(clip["path"].as_str().unwrap());
    assert_eq!(
        crate::voice::sha256_of(path),
        clip["sha256"].as_str().unwrap()
    );
    assert_eq!(received["transcript"]["model"], "ggml-tiny.en-q8_0.bin");
    // The "yes" was typed text, not heard here: no audio.
    let yes = seen["confirmed"]["context"]["round_id"].as_str().unwrap();
    let said = &crate::voice::events_of(&sb, yes, "input.received")[0];
    assert!(said.get("audio_sha256").is_none(), "{said}");
    assert_eq!(sb.run(&["trace", "verify"]).code, 0);
}

/// What `mcp_door.py` saw, the same over either transport.
fn assert_mcp_door(seen: &Value) {
    assert_eq!(seen["server"], "caal", "{seen}");
    assert_eq!(
        seen["tools"],
        serde_json::json!([
            "bucket_search",
            "remember",
            "round_show",
            "say",
            "trace_search",
            "trace_verify"
        ])
    );
    assert_eq!(seen["say_schema_required"], serde_json::json!(["text"]));
    assert_eq!(seen["lights"]["text"], "Okay, the kitchen lights are on.");
    assert_eq!(seen["lights"]["error"], false);
    assert_eq!(seen["lights"]["structured"]["command_id"], "lights.set");
    let round_id = seen["lights"]["structured"]["round_id"].as_str().unwrap();

    // A governed command asks; the agent's own "yes" does not confirm it
    // (`[doors] agents_confirm` is off): it waits for a person.
    assert_eq!(
        seen["asked"]["reply"],
        "Unlock the front door? Say yes to confirm."
    );
    assert_eq!(seen["asked"]["conversation_id"], "mcp:kitchen");
    assert_eq!(
        seen["asked"]["pending_confirmation"]["confirmations_required"],
        1
    );
    assert!(
        seen["refused"]["reply"]
            .as_str()
            .unwrap()
            .starts_with("An agent can't confirm this"),
        "{seen}"
    );
    assert!(!seen["refused"]["pending_confirmation"].is_null());

    // The trace searched (newest first: the reply, then what was said), shown, verified.
    let hits = seen["search"]["hits"].as_array().unwrap();
    // What was answered, decided and said, newest first.
    assert_eq!(hits.len(), 3, "{seen}");
    assert_eq!(hits[0]["text"], "Okay, the kitchen lights are on.");
    assert_eq!(hits[1]["event_type"], "route.selected");
    assert!(
        hits[1]["text"].as_str().unwrap().contains("lights.set"),
        "{seen}"
    );
    assert_eq!(hits[2]["text"], "turn on the kitchen lights");
    assert!(hits.iter().all(|h| h["round_id"] == round_id));
    let types: Vec<&str> = seen["shown_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"round.started"));
    assert!(
        types.contains(&"command.executed") && types.last() == Some(&"round.completed"),
        "{types:?}"
    );
    assert_eq!(seen["missing"]["error"], true);
    assert!(
        seen["missing"]["text"]
            .as_str()
            .unwrap()
            .contains("there is no round")
    );
    assert_eq!(seen["verify"]["ok"], true);

    // Memory written through MCP is found through MCP.
    assert_eq!(seen["remembered"]["op"], "add");
    assert_eq!(seen["memory"], "the spare key is under the blue pot");

    // Conversations and rounds as resources.
    let resources = seen["resources"].as_array().unwrap();
    assert!(
        resources.contains(&Value::from("caal://conversations/mcp:kitchen")),
        "{seen}"
    );
    assert_eq!(
        seen["templates"],
        serde_json::json!([
            "caal://conversations/{conversation_id}",
            "caal://rounds/{round_id}"
        ])
    );
    // Said, asked, refused (and over HTTP, confirmed on the page).
    let on_page = u64::from(seen["confirmed_on_page"].is_string());
    assert_eq!(seen["conversation_rounds"], 3 + on_page);
    assert_eq!(seen["round_resource"], round_id);

    // Wrong arguments: MCP's tool errors, naming what is wrong; an unknown
    // tool or resource: its protocol errors; the session goes on.
    let wrong = seen["wrong"].as_array().unwrap();
    assert_eq!(wrong.len(), 3);
    assert!(wrong.iter().all(|w| w["error"] == true), "{seen}");
    assert!(
        wrong[0]["text"]
            .as_str()
            .unwrap()
            .contains("unknown field `txt`")
    );
    assert!(wrong[1]["text"].as_str().unwrap().contains("invalid type"));
    assert!(
        wrong[2]["text"]
            .as_str()
            .unwrap()
            .contains("missing field `text`")
    );
    assert!(
        seen["unknown_tool"].as_str().unwrap().contains("not found"),
        "{seen}"
    );
    assert!(
        seen["bad_resource"]
            .as_str()
            .unwrap()
            .contains("is not a CAAL resource")
    );
    assert_eq!(seen["after_wrong"], "Okay, the kitchen lights are off.");
}

#[test]
fn the_mcp_sdk_talks_to_caal_serve_at_mcp_with_the_token() {
    let sb = Sandbox::new();
    let served = sb.serve(&[]);
    let seen = client("mcp_door.py", &["http", &served.url, &sb.api_token()]);
    assert_mcp_door(&seen);
    assert_eq!(seen["no_token_status"], 401);
    // What the agent asked for, a person confirmed on the page.
    assert_eq!(seen["waiting_on_page"], 1, "{seen}");
    assert_eq!(seen["confirmed_on_page"], "The front door is unlocked.");
    let (status, log) = served.terminate();
    assert!(status.success(), "{log:?}");
    assert!(
        log.iter()
            .any(|l| l.contains("mcp call refused") && l.contains("txt")),
        "{log:?}"
    );
    assert_eq!(sb.run(&["trace", "verify"]).code, 0);
}

#[test]
fn the_mcp_sdk_starts_caal_mcp_and_talks_over_stdio() {
    let sb = Sandbox::new();
    let data = sb.data();
    let xdg = sb.path().join("xdg");
    let seen = client_env(
        "mcp_door.py",
        &["stdio", env!("CARGO_BIN_EXE_caal"), data.to_str().unwrap()],
        &[
            ("CAAL_LLM_LOCAL_URL", crate::support::NO_MODEL_URL),
            ("XDG_CONFIG_HOME", xdg.to_str().unwrap()),
        ],
    );
    assert_mcp_door(&seen);
    // What it did is in the data dir's trace, chained.
    let list = sb
        .run(&["trace", "list", "--conversation", "mcp:kitchen", "--json"])
        .ok()
        .json();
    assert_eq!(list.as_array().unwrap().len(), 4, "{list}");
    assert_eq!(sb.run(&["trace", "verify"]).code, 0);
}

#[test]
fn caal_mcp_while_caal_serve_holds_the_data_dir_points_at_its_endpoint() {
    let sb = Sandbox::new();
    let served = sb.serve(&[]);
    let run = sb.run(&["mcp"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("{}/mcp", served.url)),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Authorization: Bearer"),
        "{}",
        run.stderr
    );
    drop(served);
}

#[test]
fn the_otlp_export_reads_as_opentelemetry_traces_with_genai_spans() {
    let sb = Sandbox::new();
    sb.offer_every_tool();
    // A model (OpenAI's wire format) that asks for two tools, with its usage.
    let model = crate::support::Peer::start(|_, _| {
        let tools = serde_json::json!([
            {"id": "a", "type": "function", "function": {"name": "lights_set",
             "arguments": serde_json::json!({"room": "porch", "state": "on", "_rationale": "the guest needs light"}).to_string()}},
            {"id": "b", "type": "function", "function": {"name": "thermostat_set",
             "arguments": serde_json::json!({"temperature": 21, "_rationale": "it is cold tonight"}).to_string()}}
        ]);
        (200, serde_json::json!({"model": "fake-7b", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": "Getting the house ready.", "tool_calls": tools}}],
            "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366}}).to_string())
    });
    let env = [("CAAL_LLM_LOCAL_URL", model.url.as_str())];
    sb.run_with_stdin_env(
        &["chat", "--conversation", "guest"],
        "get the house ready for a guest\nyes\nturn on the kitchen lights\n/quit\n",
        &env,
    )
    .ok();
    let file = sb.path().join("trace.otlp");
    let run = sb
        .run(&[
            "trace",
            "export",
            "--format",
            "otlp",
            "--out",
            file.to_str().unwrap(),
        ])
        .ok();
    assert!(run.stderr.contains("exported 3 rounds"), "{}", run.stderr);
    let traces = client("otlp_check.py", &[file.to_str().unwrap()]);
    let traces = traces.as_array().unwrap();
    assert_eq!(traces.len(), 3, "a round a trace");

    // Every trace: CAAL's service, its round's id as the trace id, one root.
    let exported: Vec<Value> = sb
        .run(&["trace", "export", "--conversation", "guest"])
        .ok()
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rounds: Vec<&Value> = exported.iter().filter(|l| l["type"] == "round").collect();
    for (trace, round) in traces.iter().zip(&rounds) {
        assert_eq!(trace["service"]["service.name"], "caal");
        let spans = trace["spans"].as_array().unwrap();
        let root = &spans[0];
        assert_eq!(root["name"], "invoke_agent caal");
        assert_eq!(root["kind"], "SPAN_KIND_SERVER");
        assert_eq!(root["parent"], "");
        assert_eq!(root["attributes"]["gen_ai.operation.name"], "invoke_agent");
        assert_eq!(root["attributes"]["gen_ai.conversation.id"], "guest");
        let round_id = round["round_id"].as_str().unwrap();
        assert_eq!(root["trace_id"], round_id.replace('-', ""));
        assert_eq!(root["attributes"]["caal.round_id"], round_id);
        for child in &spans[1..] {
            assert_eq!(child["parent"], root["span_id"], "{child}");
            assert_eq!(child["trace_id"], root["trace_id"]);
        }
        // Every event of the round is a span event somewhere, with its chain hash.
        let hashes: Vec<&Value> = exported
            .iter()
            .filter(|l| l["type"] == "event" && l["round_id"] == round_id)
            .map(|l| &l["hash"])
            .collect();
        let carried: Vec<&Value> = spans
            .iter()
            .flat_map(|s| s["event_hashes"].as_array().unwrap())
            .collect();
        assert_eq!(carried.len(), hashes.len(), "{trace}");
        assert!(hashes.iter().all(|h| carried.contains(h)));
    }

    // The model call: a CLIENT span with the GenAI attributes.
    let first = traces[0]["spans"].as_array().unwrap();
    let chat = first
        .iter()
        .find(|s| s["attributes"]["gen_ai.operation.name"] == "chat")
        .expect("a chat span");
    assert_eq!(chat["kind"], "SPAN_KIND_CLIENT");
    // Named by the model asked for; the model that answered beside it.
    let asked = chat["attributes"]["gen_ai.request.model"].as_str().unwrap();
    assert_eq!(chat["name"], format!("chat {asked}"));
    assert_eq!(chat["attributes"]["gen_ai.response.model"], "fake-7b");
    assert_eq!(chat["attributes"]["gen_ai.provider.name"], "llama.cpp");
    assert_eq!(chat["attributes"]["gen_ai.usage.input_tokens"], 321);
    assert_eq!(chat["attributes"]["gen_ai.usage.output_tokens"], 45);
    assert_eq!(
        chat["attributes"]["gen_ai.response.finish_reasons"],
        serde_json::json!(["tool_calls"])
    );
    assert_eq!(
        chat["events"],
        serde_json::json!(["llm.request", "llm.response"])
    );

    // The confirmed chain ran two tools: a span each.
    let second = traces[1]["spans"].as_array().unwrap();
    let tools: Vec<&Value> = second
        .iter()
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "execute_tool")
        .collect();
    assert_eq!(tools.len(), 2, "{second:?}");
    for tool in &tools {
        assert_eq!(tool["kind"], "SPAN_KIND_INTERNAL");
        assert!(tool["name"].as_str().unwrap().starts_with("execute_tool "));
        assert!(
            !tool["attributes"]["gen_ai.tool.call.id"]
                .as_str()
                .unwrap()
                .is_empty()
        );
        assert_eq!(tool["status"], 1, "ok");
        assert_eq!(
            tool["events"],
            serde_json::json!(["tool.request", "tool.response"])
        );
    }
    assert_eq!(second[0]["attributes"]["caal.route_code"], "intent.confirm");
}
