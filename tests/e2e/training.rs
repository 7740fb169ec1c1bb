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
