//! From traces to training: feedback said, given by id and on the API, and
//! the training export with its manifest tying every line to the evidence.

use std::fs;

use serde_json::Value;

use crate::support::Sandbox;

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The JSONL trace export's last event hash of each round, by round id.
fn last_hashes(sb: &Sandbox) -> std::collections::HashMap<String, String> {
    let mut last = std::collections::HashMap::new();
    for l in lines(&sb.run(&["trace", "export"]).ok().stdout) {
        if l["type"] == "event" {
            last.insert(
                l["round_id"].as_str().unwrap().to_owned(),
                l["hash"].as_str().unwrap().to_owned(),
            );
        }
    }
    last
}

#[test]
fn feedback_and_the_training_export_trace_back_to_the_evidence() {
    let sb = Sandbox::new();
    let say = |text: &str| -> Value {
        sb.run(&["say", "--json", "--conversation", "k", text])
            .ok()
            .json()
    };
    let lights = say("turn on the kitchen lights");
    let wrong = say("no, that's not what I meant");
    assert_eq!(wrong["route_code"], "intent.feedback");
    say("unlock the front door");
    say("yes");
    let eggs = say("add eggs to the shopping list");
    say("what's on my shopping list");
    say("my key is AKIAIOSFODNN7EXAMPLE");
    // Feedback by id: the CLI names a missing round and a bad verdict, exit 2.
    let eggs_id = eggs["round_id"].as_str().unwrap();
    let good = sb
        .run(&["feedback", eggs_id, "good", "--note", "exactly"])
        .ok();
    assert!(good.stdout.contains("was right"), "{}", good.stdout);
    let missing = sb.run(&["feedback", "01a20d6a-0000-7000-8000-000000000000", "bad"]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("no round"), "{}", missing.stderr);
    let meh = sb.run(&["feedback", eggs_id, "meh"]);
    assert_eq!(meh.code, 2);
    assert!(meh.stderr.contains("say good or bad"), "{}", meh.stderr);
    // trace show lists what was said of a round.
    let shown = sb
        .run(&["trace", "show", lights["round_id"].as_str().unwrap()])
        .ok();
    assert!(
        shown.stdout.contains("feedback bad (said")
            && shown.stdout.contains("no, that's not what I meant"),
        "{}",
        shown.stdout
    );

    // The export: a line per round someone spoke in, but the one marked bad
    // and the feedback itself.
    let out = sb.path().join("train.jsonl");
    let run = sb
        .run(&["export", "training", "--out", out.to_str().unwrap()])
        .ok();
    assert!(run.stderr.contains("exported 5 lines"), "{}", run.stderr);
    let text = fs::read_to_string(&out).unwrap();
    assert!(
        !text.contains("AKIAIOSFODNN7EXAMPLE"),
        "a secret was exported"
    );
    assert!(text.contains("secret_ref:aws_access_key_id:"), "{text}");
    let examples = lines(&text);
    let users: Vec<&str> = examples
        .iter()
        .map(|e| {
            let m = e["messages"].as_array().unwrap();
            assert_eq!(m[0]["role"], "system");
            m[1]["content"].as_str().unwrap()
        })
        .collect();
    assert_eq!(users.len(), 5, "{users:?}");
    assert!(
        !users.contains(&"turn on the kitchen lights"),
        "marked bad: {users:?}"
    );
    assert!(!users.iter().any(|u| u.contains("not what I meant")));
    // A command run is a tool call with its arguments, then its result.
    let eggs_line = examples
        .iter()
        .find(|e| {
            e["messages"][1]["content"]
                .as_str()
                .unwrap()
                .starts_with("add eggs")
        })
        .unwrap();
    let m = eggs_line["messages"].as_array().unwrap();
    let call = &m[2]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "shopping_add");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["item"], "eggs");
    assert_eq!(m[3]["role"], "tool");
    assert_eq!(m[3]["tool_call_id"], call["id"]);
    assert_eq!(m[4]["role"], "assistant");
    assert_eq!(eggs_line["tools"][0]["function"]["name"], "shopping_add");

    // The manifest: filters, configuration, and each line's rounds with the
    // hash of their last event, as the chained trace holds it.
    let manifest: Value = serde_json::from_str(
        &fs::read_to_string(sb.path().join("train.jsonl.manifest.json")).unwrap(),
    )
    .unwrap();
    assert!(
        manifest["options"]["config_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(manifest["counts"]["lines"], 5);
    assert_eq!(manifest["counts"]["skipped"]["marked bad"], 1);
    assert_eq!(manifest["counts"]["skipped"]["feedback"], 1);
    let hashes = last_hashes(&sb);
    let entries = manifest["lines"].as_array().unwrap();
    assert_eq!(entries.len(), 5);
    for entry in entries {
        for r in entry["rounds"].as_array().unwrap() {
            assert_eq!(
                hashes[r["round_id"].as_str().unwrap()],
                r["event_hash"].as_str().unwrap(),
                "{entry}"
            );
        }
    }

    // The path exists: refused without --force, nothing changed.
    let again = sb.run(&["export", "training", "--out", out.to_str().unwrap()]);
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    assert_eq!(fs::read_to_string(&out).unwrap(), text);

    // Filters: good; confirmed (the "yes" after its question); negatives.
    let only = |args: &[&str]| {
        lines(
            &sb.run(&[&["export", "training"], args].concat())
                .ok()
                .stdout,
        )
    };
    let good = only(&["--only", "good"]);
    assert_eq!(good.len(), 1);
    assert!(
        good[0]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .starts_with("add eggs")
    );
    let confirmed = only(&["--only", "confirmed"]);
    assert_eq!(confirmed.len(), 1);
    let said: Vec<&str> = confirmed[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(said, ["unlock the front door", "yes"]);
    assert!(
        confirmed[0]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["tool_calls"][0]["function"]["name"] == "door_unlock")
    );
    let negatives = only(&["--negatives"]);
    assert_eq!(negatives.len(), 6);
    let bad = negatives.iter().find(|l| l["label"] == "bad").unwrap();
    assert_eq!(bad["messages"][1]["content"], "turn on the kitchen lights");
    assert!(
        bad["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .all(|m| m["weight"] == 0)
    );
    // ShareGPT, a conversation a line.
    let share = only(&["--format", "sharegpt", "--by-conversation"]);
    assert_eq!(share.len(), 1);
    let from: Vec<&str> = share[0]["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["from"].as_str().unwrap())
        .collect();
    assert_eq!(from.first(), Some(&"human"));
    assert!(
        from.contains(&"function_call") && from.contains(&"observation") && from.contains(&"gpt")
    );
    // Since: a date to come exports nothing; a bad date is named.
    assert!(only(&["--since", "2999-01-01"]).is_empty());
    let bad_since = sb.run(&["export", "training", "--since", "last week"]);
    assert_eq!(bad_since.code, 2);
    assert!(
        bad_since.stderr.contains("YYYY-MM-DD"),
        "{}",
        bad_since.stderr
    );
}

#[test]
fn replay_shows_what_a_new_configuration_would_decide_and_runs_nothing() {
    let sb = Sandbox::new();
    for said in [
        "turn on the kitchen lights",
        "unlock the front door",
        "no",
        "add milk to the shopping list",
        "turn off the kitchen lights",
    ] {
        sb.run(&["say", "--conversation", "k", said]).ok();
    }
    let before = sb.run(&["trace", "export"]).ok().stdout;
    // The same configuration: nothing would change.
    let same = sb.run(&["replay", "--json"]).ok().json();
    assert_eq!(same["replayed"], 5, "{same}");
    assert_eq!(same["unchanged"], 5, "{same}");
    assert_eq!(same["changed"], serde_json::json!([]));
    // Switching lights now asks first: the two light rounds change level, only.
    let stricter = sb.path().join("stricter.toml");
    fs::write(&stricter, "[commands.\"lights.set\"]\nauth_level = 3\n").unwrap();
    let report = sb
        .run(&["--config", stricter.to_str().unwrap(), "replay", "--json"])
        .ok()
        .json();
    assert_eq!(report["replayed"], 5);
    assert_eq!(
        report["changed_by"],
        serde_json::json!({"level": 2}),
        "{report}"
    );
    let changed = report["changed"].as_array().unwrap();
    assert_eq!(changed.len(), 2);
    for c in changed {
        assert_eq!(c["before"]["command_id"], "lights.set");
        assert_eq!(
            (
                c["before"]["auth_level"].as_u64(),
                c["after"]["auth_level"].as_u64()
            ),
            (Some(1), Some(3))
        );
        assert_eq!(c["before"]["params"], c["after"]["params"]);
    }
    let text = sb
        .run(&["--config", stricter.to_str().unwrap(), "replay"])
        .ok()
        .stdout;
    assert!(
        text.contains("2 would change") && text.contains("level 2"),
        "{text}"
    );
    assert!(text.contains("\"turn on the kitchen lights\""), "{text}");
    // Nothing ran or was recorded.
    assert_eq!(sb.run(&["trace", "export"]).ok().stdout, before);
    // A configuration that does not validate is refused, naming the key.
    let broken = sb.path().join("broken.toml");
    fs::write(&broken, "[commands.\"lights.set\"]\nauth_level = 9\n").unwrap();
    let refused = sb.run(&["--config", broken.to_str().unwrap(), "replay"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("lights.set") && refused.stderr.contains("auth_level"),
        "{}",
        refused.stderr
    );
}

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(fs::read(path).unwrap());
    format!(
        "sha256:{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// Rounds in the data dir (none when there is no trace store yet).
fn round_count(sb: &Sandbox) -> usize {
    let run = sb.run(&["trace", "list", "--json"]);
    if run.code == 2 && run.stderr.contains("no trace store") {
        return 0;
    }
    run.ok().json().as_array().map_or(0, Vec::len)
}

#[test]
fn an_export_imported_elsewhere_is_chained_there_once_and_a_broken_one_is_refused() {
    let a = Sandbox::new();
    for said in [
        "turn on the kitchen lights",
        "no, that's not what I meant",
        "add eggs to the shopping list",
        "unlock the front door",
        "yes",
    ] {
        a.run(&["say", "--conversation", "k", said]).ok();
    }
    let file = a.path().join("k.jsonl");
    a.run(&["trace", "export", "--out", file.to_str().unwrap()])
        .ok();
    let text = fs::read_to_string(&file).unwrap();
    let original = lines(&text);
    let original_ids: Vec<&str> = original
        .iter()
        .filter(|l| l["type"] == "round")
        .map(|l| l["round_id"].as_str().unwrap())
        .collect();

    // Into another data dir: new rounds of imported:k, chained there.
    let b = Sandbox::new();
    let report = b
        .run(&["import", "--json", file.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(report["rounds"], 5, "{report}");
    assert_eq!(report["formats"][0], "caal-jsonl");
    assert_eq!(report["sha256"], sha256_of(&file));
    assert_eq!(report["conversations"][0], "imported:k");
    // Another library's receipt stays whole inside round.imported.
    assert!(
        report["events_kept_in_record"].as_u64().unwrap() >= 1,
        "{report}"
    );
    b.run(&["trace", "verify"]).ok();
    let imported = lines(&b.run(&["trace", "export"]).ok().stdout);
    let records: Vec<&Value> = imported
        .iter()
        .filter(|l| l["event_type"] == "round.imported")
        .map(|l| &l["payload"])
        .collect();
    assert_eq!(records.len(), 5);
    for (record, id) in records.iter().zip(&original_ids) {
        assert_eq!(record["source"]["sha256"], report["sha256"]);
        assert_eq!(record["original"]["round_id"], *id);
        assert_eq!(record["keys"][0], format!("round:{id}"));
        // Every original event is named with its original hash.
        let hashes: Vec<&Value> = record["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["hash"])
            .collect();
        let from_file: Vec<&Value> = original
            .iter()
            .filter(|l| l["type"] == "event" && l["round_id"] == **id)
            .map(|l| &l["hash"])
            .collect();
        assert_eq!(hashes, from_file);
    }
    let rounds = b.run(&["trace", "list", "--json"]).ok().json();
    let rounds = rounds.as_array().unwrap();
    assert!(
        rounds
            .iter()
            .all(|r| r["channel"] == "import" && r["conversation_id"] == "imported:k"),
        "{rounds:?}"
    );
    // The feedback judges the imported round: the training export leaves it out.
    let out = b.path().join("train.jsonl");
    b.run(&["export", "training", "--out", out.to_str().unwrap()])
        .ok();
    let users: Vec<String> = lines(&fs::read_to_string(&out).unwrap())
        .iter()
        .map(|e| e["messages"][1]["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        users.contains(&"add eggs to the shopping list".to_owned()),
        "{users:?}"
    );
    assert!(
        !users.contains(&"turn on the kitchen lights".to_owned()),
        "{users:?}"
    );

    // Again, and back into the data dir it came from: nothing.
    for sb in [&b, &a] {
        let again = sb
            .run(&["import", "--json", file.to_str().unwrap()])
            .ok()
            .json();
        assert_eq!(again["rounds"], 0, "{again}");
        assert_eq!(again["rounds_already_here"], 5, "{again}");
    }
    assert_eq!(round_count(&b), 5);

    // A changed line, a missing event, a newer schema, not an export: exit 2
    // naming the line, nothing imported.
    let c = Sandbox::new();
    // A dry run says what would come in, and brings nothing.
    let dry = c
        .run(&["import", "--dry-run", "--json", file.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(
        (dry["rounds"].as_u64(), dry["dry_run"].as_bool()),
        (Some(5), Some(true))
    );
    assert_eq!(round_count(&c), 0);
    let bad = c.path().join("bad.jsonl");
    let eggs_line = text.lines().position(|l| l.contains("add eggs")).unwrap() + 1;
    for (content, expect) in [
        (
            text.replace("add eggs", "add legs"),
            format!("line {eggs_line}: the chain breaks"),
        ),
        (
            text.lines()
                .enumerate()
                .filter(|(i, _)| *i != eggs_line - 1)
                .map(|(_, l)| format!("{l}\n"))
                .collect(),
            // The line after the one removed is now that line.
            format!("line {eggs_line}: event_seq"),
        ),
        (
            text.replacen("\"schema_version\":1", "\"schema_version\":7", 1),
            "line 1: schema_version 7 is newer than this caal reads".to_owned(),
        ),
        (
            "round,conversation\nr1,k\n".to_owned(),
            "is not a format caal import reads".to_owned(),
        ),
    ] {
        fs::write(&bad, content).unwrap();
        let run = c.run(&["import", bad.to_str().unwrap()]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(&expect), "{expect:?} in {}", run.stderr);
        assert!(
            run.stderr.contains("nothing was imported"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(round_count(&c), 0);
}

#[test]
fn the_python_ancestors_traces_and_memory_come_in_once() {
    let sb = Sandbox::new();
    let db = sb.path().join("ancestor-traces.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE rounds (round_id TEXT PRIMARY KEY, library_id TEXT, bucket_id TEXT,
               conversation_id TEXT, round_seq INTEGER, audio_id TEXT, schema_version INTEGER,
               state_in TEXT, state_out TEXT, status TEXT, failure_code TEXT, failure_reason TEXT,
               created_at TEXT, guard_state TEXT);
             CREATE TABLE events (id INTEGER PRIMARY KEY, round_id TEXT, event_seq INTEGER,
               event_type TEXT, call_id TEXT, payload TEXT, timestamp TEXT, status TEXT);
             CREATE TABLE memory_items (item_id TEXT, bucket_id TEXT, content TEXT, pinned INTEGER,
               metadata TEXT, created_at TEXT);
             INSERT INTO rounds VALUES
               ('r-2', 'lib-py', 'bucket:kitchen', 'kitchen', 2, NULL, 1, 'action', 'default', 'failed',
                'tool.timeout', 'the lights did not answer', '2025-03-02T08:00:00Z', 'ACTION'),
               ('r-1', 'lib-py', 'bucket:kitchen', 'kitchen', 1, NULL, 1, 'default', 'action', 'ok',
                NULL, NULL, '2025-03-02T07:59:00Z', 'DEFAULT');
             INSERT INTO events (round_id, event_seq, event_type, payload, timestamp, status) VALUES
               ('r-1', 1, 'input.received', '{\"channel\":\"text\",\"raw_text\":\"lights on in the kitchen\"}', '2025-03-02T07:59:00Z', 'ok'),
               ('r-1', 2, 'intent.routed', '{\"intent\":\"lights_on\",\"score\":0.91}', '2025-03-02T07:59:00Z', 'ok'),
               ('r-1', 3, 'output.emitted', '{\"channel\":\"text\",\"text\":\"Kitchen lights on.\"}', '2025-03-02T07:59:01Z', 'ok'),
               ('r-2', 1, 'input.received', '{\"channel\":\"text\",\"raw_text\":\"my key is AKIAIOSFODNN7EXAMPLE, dim them\"}', '2025-03-02T08:00:00Z', 'ok'),
               ('r-2', 2, 'tool.call', '{\"tool\":\"lights\",\"args\":{\"level\":20},\"note\":\"key AKIAIOSFODNN7EXAMPLE\"}', '2025-03-02T08:00:01Z', 'failed');
             INSERT INTO memory_items VALUES
               ('m-1', 'bucket:kitchen', 'the spare key is under the blue pot', 1, '{}', '2025-03-01'),
               ('m-2', 'bucket:kitchen', 'the alarm code is AKIAIOSFODNN7EXAMPLE', 0, NULL, '2025-03-01');",
        )
        .unwrap();
    }
    let report = sb
        .run(&["import", "--json", db.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(report["rounds"], 2, "{report}");
    assert_eq!(report["memory_items"], 2, "{report}");
    assert_eq!(report["events"], 3, "{report}");
    assert_eq!(report["events_kept_in_record"], 2, "{report}");
    assert_eq!(
        report["formats"],
        serde_json::json!(["caal-python-traces", "caal-python-memory"])
    );
    sb.run(&["trace", "verify"]).ok();
    let export = sb.run(&["trace", "export"]).ok().stdout;
    assert!(!export.contains("AKIAIOSFODNN7EXAMPLE"), "a secret came in");
    let events = lines(&export);
    // In the conversation's order (round_seq), whatever the rows' order.
    let inputs: Vec<&str> = events
        .iter()
        .filter(|l| l["event_type"] == "input.received")
        .map(|l| l["payload"]["raw_text"].as_str().unwrap())
        .collect();
    assert_eq!(inputs[0], "lights on in the kitchen");
    assert!(
        inputs[1].contains("secret_ref:aws_access_key_id:"),
        "{inputs:?}"
    );
    // The ancestor's own event types are kept whole, with why.
    let record = events
        .iter()
        .find(|l| {
            l["event_type"] == "round.imported" && l["payload"]["original"]["round_id"] == "r-1"
        })
        .unwrap();
    assert_eq!(record["payload"]["format"], "caal-python-traces");
    assert_eq!(record["payload"]["original"]["guard_state"], "DEFAULT");
    let kept = &record["payload"]["events"][1];
    assert_eq!(kept["event_type"], "intent.routed");
    assert_eq!(kept["kept"], "here");
    assert_eq!(kept["payload"]["intent"], "lights_on");
    // The failed round stays failed, with its code.
    let failed = events
        .iter()
        .find(|l| l["event_type"] == "round.failed")
        .unwrap();
    assert_eq!(failed["failure_code"], "tool.timeout");
    // Memory: in its bucket, pinned as it was, the secret scrubbed.
    let shown = sb
        .run(&["bucket", "show", "bucket:kitchen", "--json"])
        .ok()
        .stdout;
    assert!(
        shown.contains("the spare key is under the blue pot"),
        "{shown}"
    );
    assert!(!shown.contains("AKIAIOSFODNN7EXAMPLE"), "{shown}");
    assert!(shown.contains("secret_ref:aws_access_key_id:"), "{shown}");

    // Again: nothing.
    let again = sb
        .run(&["import", "--json", db.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(
        (again["rounds"].as_u64(), again["memory_items"].as_u64()),
        (Some(0), Some(0)),
        "{again}"
    );
    assert_eq!(
        (
            again["rounds_already_here"].as_u64(),
            again["memory_already_here"].as_u64()
        ),
        (Some(2), Some(2))
    );

    // An event of a round the file does not have: named by row, nothing imported.
    let fresh = Sandbox::new();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "INSERT INTO events (round_id, event_seq, event_type, payload) VALUES ('r-9', 1, 'input.received', '{}')",
            [],
        )
        .unwrap();
    }
    let run = fresh.run(&["import", db.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("events row 6: its round r-9 is not in rounds"),
        "{}",
        run.stderr
    );
    assert_eq!(round_count(&fresh), 0);
    // CAAL's own trace store: told to export it first.
    let run = fresh.run(&["import", sb.db().to_str().unwrap()]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("trace export"), "{}", run.stderr);
}
