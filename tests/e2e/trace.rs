//! Text rounds, the trace CLI, verification, export and bad input.

use std::{collections::HashMap, fs, process::Stdio, thread};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::Sandbox;

#[test]
fn say_runs_a_round_and_reports_its_ids() {
    let sb = Sandbox::new();
    let first = sb.say("kitchen", "Turn on the kitchen lights");
    assert_eq!(first["reply"], "Okay, the kitchen lights are on.");
    assert_eq!(first["route_code"], "intent.command");
    assert_eq!(first["command_id"], "lights.set");
    assert_eq!(first["status"], "ok");
    assert_eq!(first["round_seq"], 1);
    assert_eq!(first["conversation_id"], "kitchen");
    assert_eq!(first["bucket_id"], "bucket:kitchen");
    let round_id = first["round_id"].as_str().unwrap();
    assert_eq!(round_id.len(), 36);
    assert_eq!(&round_id[14..15], "7", "round_id is a UUIDv7");

    let second = sb.say("kitchen", "turn the kitchen lights off");
    assert_eq!(second["round_seq"], 2);
    assert_eq!(
        second["library_id"], first["library_id"],
        "library id persists across runs"
    );
    assert_eq!(
        sb.say("hall", "hello")["round_seq"],
        1,
        "round_seq counts per conversation"
    );

    // The library id lives in the data dir, and CAAL_LIBRARY_ID overrides it.
    let stored = fs::read_to_string(sb.data().join("library_id")).unwrap();
    assert_eq!(stored.trim(), first["library_id"].as_str().unwrap());
    let out = sb.run_env(&["say", "--json", "hi"], &[("CAAL_LIBRARY_ID", "lab-7")]);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["library_id"], "lab-7");

    // Nothing understands it and no tier is trusted to answer in words (the
    // embedded small model is not): CAAL says what it can do.
    let plain = sb.run(&["say", "sing", "me", "a", "song"]).ok();
    assert!(
        plain.stdout.trim().starts_with(
            "I can't help with that. I look after the lights, the heating, the doors, the garage, timers"
        ),
        "{}",
        plain.stdout
    );
}

#[test]
fn concurrent_processes_in_one_data_dir_are_serialised_by_the_writer_lock() {
    // One writer per database: a second process is told who holds it.
    let sb = Sandbox::new();
    sb.say("c", "hello");
    let mut chat = sb
        .command()
        .args(["chat", "--conversation", "c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the chat process holds the store (it has written its session).
    let lock = sb.data().join("traces.db.lock");
    let pid = chat.id().to_string();
    for _ in 0..200 {
        if fs::read_to_string(&lock).is_ok_and(|s| s.trim() == pid) {
            break;
        }
        thread::sleep(std::time::Duration::from_millis(10));
    }
    let refused = sb.run(&["say", "hello"]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains(&format!("pid {pid}")),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("another caal process"),
        "{}",
        refused.stderr
    );
    // Readers still work beside the writer.
    let list = sb.run(&["trace", "list", "--json"]).ok().json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    drop(chat.stdin.take());
    assert!(chat.wait().unwrap().success());
    sb.run(&["say", "hello"]).ok();
}

#[test]
fn chat_reads_lines_until_quit() {
    let sb = Sandbox::new();
    let run = sb
        .run_with_stdin(
            &["chat", "--conversation", "room"],
            "hello\n\nturn on the hall light\n/quit\nnot read\n",
        )
        .ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "caal> Hello! Ask me to turn on a light, set a timer, or add something to the shopping list.",
            "caal> Okay, the hall lights are on.",
            "",
            "  ┄ Reasoning (round 2)",
            "  ┄ lights_set  \"Understood 'turn on the hall light' as HassTurnOn (sentence template): turn on the hall lights.\"",
            "      params: {\"room\":\"hall\",\"state\":\"on\"}",
        ]
    );
    assert!(lines[6].starts_with("      → ok (call "), "{}", lines[6]);
    assert_eq!(
        lines.len(),
        7,
        "a greeting decides no command: no reasoning block"
    );
    let rounds = sb
        .run(&["trace", "list", "--conversation", "room", "--json"])
        .ok()
        .json();
    assert_eq!(rounds.as_array().unwrap().len(), 2);
}

#[test]
fn trace_list_and_show_reconstruct_the_round() {
    let sb = Sandbox::new();
    let said = sb.say("c", "switch on the porch lights");
    let list = sb.run(&["trace", "list", "--json"]).ok().json();
    let row = &list[0];
    assert_eq!(row["round_id"], said["round_id"]);
    assert_eq!(row["input"], "switch on the porch lights");
    assert_eq!(row["route_code"], "intent.command");
    assert_eq!(row["status"], "ok");
    assert_eq!(row["reply"], "Okay, the porch lights are on.");

    let shown = sb
        .run(&[
            "trace",
            "show",
            said["round_id"].as_str().unwrap(),
            "--json",
        ])
        .ok()
        .json();
    let types: Vec<&str> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "round.started",
            "input.received",
            "input.normalized",
            "route.selected",
            "reasoning.step",
            "validator.ran",
            "tool.request",
            "tool.response",
            "command.executed",
            "reasoning.step",
            "reasoning.update",
            "output.emitted",
            "round.completed"
        ]
    );
    let route = &shown["events"][3]["payload"];
    assert_eq!(route["source_rule"], "template:HassTurnOn");
    assert_eq!(route["layer"], "template");
    assert_eq!(route["understood"]["intent"], "HassTurnOn");
    assert_eq!(route["understood"]["slots"]["area"]["said"], "porch");
    assert_eq!(route["params"]["room"], "porch");
    assert_eq!(shown["round"]["state_out"], "default");
    let call_id = &shown["events"][6]["call_id"];
    assert!(call_id.is_string(), "a tool call carries its call_id");
    for i in [7, 8] {
        assert_eq!(
            &shown["events"][i]["call_id"], call_id,
            "request, response and command share it"
        );
    }

    let human = sb
        .run(&["trace", "show", said["round_id"].as_str().unwrap()])
        .ok();
    assert!(
        human.stdout.contains("route.selected") && human.stdout.contains("chain head sha256:"),
        "{}",
        human.stdout
    );
    let missing = sb.run(&["trace", "show", "0190c8e4-7b7a-7000-8000-000000000000"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("caal trace list"),
        "{}",
        missing.stderr
    );
}

/// A file's digest: compared instead of its bytes, so a failure prints two lines.
fn digest(path: &std::path::Path) -> String {
    sha256_tagged(&fs::read(path).unwrap())
}

fn sha256_tagged(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

#[test]
fn exported_jsonl_recomputes_to_the_same_hashes_from_its_own_bytes() {
    let sb = Sandbox::new();
    for (c, t) in [
        ("a", "hello"),
        ("b", "turn on the garage lights"),
        ("a", "turn off the garage lights"),
        ("a", "what"),
    ] {
        sb.say(c, t);
    }
    let out = sb.path().join("export.jsonl");
    let run = sb
        .run(&["trace", "export", "--out", out.to_str().unwrap()])
        .ok();
    assert!(run.stderr.contains("exported 4 rounds"), "{}", run.stderr);
    let text = fs::read_to_string(&out).unwrap();
    assert!(!sb.path().join("export.jsonl.partial").exists());

    // Recompute with an independent RFC 8785 implementation and SHA-256.
    let mut heads: HashMap<String, Value> = HashMap::new();
    let mut rounds = 0;
    let mut current_round = Value::Null;
    let mut last_event_seq = 0;
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        match v["type"].as_str().unwrap() {
            "round" => {
                rounds += 1;
                for key in [
                    "schema_version",
                    "library_id",
                    "bucket_id",
                    "round_id",
                    "round_seq",
                    "state_in",
                    "status",
                    "created_at",
                ] {
                    assert!(!v[key].is_null(), "round line lacks {key}: {line}");
                }
                current_round = v;
                last_event_seq = 0;
            }
            "event" => {
                for key in [
                    "schema_version",
                    "round_id",
                    "conversation_id",
                    "round_seq",
                    "event_seq",
                    "event_type",
                    "call_id",
                    "timestamp",
                    "payload",
                    "status",
                    "failure_code",
                    "failure_reason",
                    "prev_hash",
                    "hash",
                ] {
                    assert!(v.get(key).is_some(), "event line lacks {key}: {line}");
                }
                assert_eq!(
                    v["round_id"], current_round["round_id"],
                    "events follow their round line"
                );
                assert_eq!(
                    v["event_seq"].as_i64().unwrap(),
                    last_event_seq + 1,
                    "events in order"
                );
                last_event_seq += 1;
                let ts = v["timestamp"].as_str().unwrap();
                assert!(
                    ts.ends_with('Z') && ts.len() == 27,
                    "RFC 3339 UTC with microseconds: {ts}"
                );
                let hash = v.as_object_mut().unwrap().remove("hash").unwrap();
                let canonical = serde_json_canonicalizer::to_string(&v).unwrap();
                assert_eq!(
                    Value::String(sha256_tagged(canonical.as_bytes())),
                    hash,
                    "{line}"
                );
                let conversation = v["conversation_id"].as_str().unwrap().to_owned();
                let prev = heads.insert(conversation, hash).unwrap_or(Value::Null);
                assert_eq!(
                    v["prev_hash"], prev,
                    "prev_hash links to the previous event of the conversation"
                );
            }
            other => panic!("unknown line type {other}"),
        }
    }
    assert_eq!(rounds, 4);
    assert_eq!(heads.len(), 2);

    // Standard output carries the same bytes.
    let stdout = sb.run(&["trace", "export"]).ok();
    assert_eq!(stdout.stdout, text);
    let only_b = sb.run(&["trace", "export", "--conversation", "b"]).ok();
    assert_eq!(
        only_b.stdout.lines().count(),
        1 + 13,
        "a round line and the command round's 13 events (with its decision, execution and reasoning update)"
    );
}

#[test]
fn verify_passes_and_names_the_first_broken_link_after_tampering() {
    let sb = Sandbox::new();
    for t in ["hello", "turn on the den lights", "turn off the den lights"] {
        sb.say("den", t);
    }
    sb.say("other", "hello");
    let ok = sb.run(&["trace", "verify"]).ok();
    assert!(
        ok.stdout
            .contains("ok: every chain intact (2 conversations, 4 rounds"),
        "{}",
        ok.stdout
    );
    let report = sb.run(&["trace", "verify", "--json"]).ok().json();
    assert_eq!(report["ok"], true);

    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    let refused = conn
        .execute("UPDATE events SET payload = '{}' WHERE round_seq = 2", [])
        .unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
    conn.execute_batch(
        "DROP TRIGGER events_append_only_update;
         UPDATE events SET payload = json_set(payload, '$.raw_text', 'open the garage')
         WHERE conversation_id = 'den' AND round_seq = 2 AND event_type = 'input.received';",
    )
    .unwrap();
    drop(conn);
    let broken = sb.run(&["trace", "verify"]);
    assert_eq!(broken.code, 1, "{}{}", broken.stdout, broken.stderr);
    assert!(
        broken
            .stdout
            .contains("BROKEN conversation den round_seq 2 event_seq 2: hash mismatch"),
        "{}",
        broken.stdout
    );
    let json = sb.run(&["trace", "verify", "--json"]);
    assert_eq!(json.code, 1);
    let report = json.json();
    assert_eq!(report["broken"][0]["problem"], "hash_mismatch");
    assert_eq!(report["broken"][0]["event_seq"], 2);
    // The untouched conversation still verifies on its own.
    sb.run(&["trace", "verify", "--conversation", "other"]).ok();
}

#[test]
fn verify_names_a_deleted_event() {
    let sb = Sandbox::new();
    for t in ["hello", "turn on the den lights"] {
        sb.say("den", t);
    }
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    conn.execute_batch(
        "DROP TRIGGER events_append_only_delete;
         DELETE FROM events WHERE conversation_id = 'den' AND round_seq = 2 AND event_seq = 4;",
    )
    .unwrap();
    drop(conn);
    let broken = sb.run(&["trace", "verify"]);
    assert_eq!(broken.code, 1);
    assert!(
        broken
            .stdout
            .contains("BROKEN conversation den round_seq 2 event_seq 4: gap"),
        "{}",
        broken.stdout
    );
}

#[test]
fn bad_input_is_named_with_its_fix_and_exit_2_touching_nothing() {
    let sb = Sandbox::new();
    sb.say("c", "hello");
    // A config file in ./config/ is picked up by default.
    fs::create_dir_all(sb.path().join("config")).unwrap();
    fs::write(
        sb.path().join("config/caal.toml"),
        "[llm]\nclarify_reply = \"Pardon?\"\nanswer_with = [\"local\"]\n",
    )
    .unwrap();
    assert_eq!(sb.run(&["say", "blah"]).ok().stdout.trim(), "Pardon?");
    assert!(
        sb.run(&["config", "check"])
            .ok()
            .stdout
            .contains("config/caal.toml")
    );
    fs::remove_dir_all(sb.path().join("config")).unwrap();

    let db_before = digest(&sb.db());

    // Malformed and invalid configuration.
    fs::write(sb.path().join("bad.toml"), "[store\n").unwrap();
    let run = sb.run(&["--config", "bad.toml", "say", "hello"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("bad.toml") && run.stderr.contains("not valid"),
        "{}",
        run.stderr
    );
    fs::write(
        sb.path().join("rule.toml"),
        "[[rules]]\nname = \"x\"\npattern = \"(oops\"\nroute = \"chat\"\n",
    )
    .unwrap();
    let run = sb.run(&["--config", "rule.toml", "config", "check"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("rule \"x\"") && run.stderr.contains("invalid pattern"),
        "{}",
        run.stderr
    );
    let run = sb.run(&["--config", "missing.toml", "say", "hello"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("missing.toml"), "{}", run.stderr);
    let run = sb.run_env(&["say", "hello"], &[("CAAL_DURABILITY", "often")]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("CAAL_DURABILITY"));
    // Bad ids and empty text.
    let run = sb.run(&["say", "--conversation", "no spaces", "hello"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("conversation_id"), "{}", run.stderr);
    let run = sb.run(&["say", "  "]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("empty"), "{}", run.stderr);
    assert_eq!(
        digest(&sb.db()),
        db_before,
        "refused commands wrote nothing"
    );

    // A newer schema, a foreign database, a file that is no database.
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    conn.execute_batch("PRAGMA user_version = 42").unwrap();
    drop(conn);
    let newer = digest(&sb.db());
    for args in [&["say", "hello"][..], &["trace", "list"][..]] {
        let run = sb.run(args);
        assert_eq!(run.code, 2);
        assert!(
            run.stderr.contains("newer caal") && run.stderr.contains("schema 42"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(digest(&sb.db()), newer);

    let other = Sandbox::new();
    fs::create_dir_all(other.data()).unwrap();
    let conn = rusqlite::Connection::open(other.db()).unwrap();
    conn.execute_batch("CREATE TABLE photos (id INTEGER)")
        .unwrap();
    drop(conn);
    let run = other.run(&["say", "hello"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("another program") && run.stderr.contains("--data-dir"),
        "{}",
        run.stderr
    );
    fs::write(other.db(), vec![b'x'; 4096]).unwrap();
    let run = other.run(&["trace", "verify"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("not a SQLite database"),
        "{}",
        run.stderr
    );
    assert!(
        fs::read(other.db()).unwrap() == vec![b'x'; 4096],
        "the foreign file is untouched"
    );

    let empty = Sandbox::new();
    let run = empty.run(&["trace", "list"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("no trace store") && run.stderr.contains("caal say"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_trace_benchmark_prints_its_figures_as_a_last_json_line() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "bench",
            "trace",
            "--events",
            "2000",
            "--fsync-seconds",
            "0.2",
            "--json",
        ])
        .ok();
    let last: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    for key in [
        "chained_events_per_s",
        "bare_inserts_per_s",
        "ratio",
        "fsync_rounds_per_s",
    ] {
        assert!(last[key].as_f64().unwrap() > 0.0, "{key} in {last}");
    }
    assert_eq!(last["events"], 2000);
    assert!(run.stdout.contains("chained, schema-checked appends"));
    // It cleans up after itself.
    assert_eq!(
        fs::read_dir(sb.data())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("bench-"))
            .count(),
        0
    );
}

#[test]
fn a_raw_sqlite3_shell_cannot_update_or_delete_evidence() {
    let sb = Sandbox::new();
    sb.say("c", "hello");
    let before = digest(&sb.db());
    for sql in [
        "UPDATE events SET payload = '{}';",
        "DELETE FROM events;",
        "DELETE FROM rounds;",
        "UPDATE rounds SET state_in = 'x';",
    ] {
        let out = std::process::Command::new("sqlite3")
            .arg(sb.db())
            .arg(sql)
            .output()
            .expect("sqlite3 is installed by .ci/setup");
        assert!(!out.status.success(), "{sql} was allowed");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("append-only evidence"), "{sql}: {stderr}");
    }
    assert_eq!(digest(&sb.db()), before);
    sb.run(&["trace", "verify"]).ok();
}

#[test]
fn the_say_benchmark_times_whole_processes() {
    let sb = Sandbox::new();
    let run = sb.run(&["bench", "say", "--runs", "5", "--json"]).ok();
    let last: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["runs"], 5);
    assert!(last["say_median_ms"].as_f64().unwrap() > 0.0);
    assert!(last["say_p90_ms"].as_f64().unwrap() >= last["say_median_ms"].as_f64().unwrap());
}
