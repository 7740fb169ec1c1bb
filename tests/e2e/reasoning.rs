//! Reasoning through the real binary, with a local server speaking
//! OpenAI's wire format as the model: the chat's reasoning block with a
//! parallel batch and `/reasoning`, the Markdown export, replay, one step,
//! sessions, receipts verified and refused, and pruning behind a tombstone.

use std::fs;

use serde_json::{Value, json};

use crate::support::{Peer, Sandbox};

/// A model that calls two tools at once, with a narrative, the first time,
/// and asks to unlock the door (justified) the second.
fn model() -> Peer {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    Peer::start(move |_, _| {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let tools = if n == 0 {
            json!([
                {"id": "a", "type": "function", "function": {"name": "lights_set",
                 "arguments": json!({"room": "porch", "state": "on", "_rationale": "the guest needs light"}).to_string()}},
                {"id": "b", "type": "function", "function": {"name": "thermostat_set",
                 "arguments": json!({"temperature": 21, "_rationale": "it is cold tonight"}).to_string()}}
            ])
        } else {
            json!([{"id": "c", "type": "function", "function": {"name": "door_unlock",
                 "arguments": json!({"door": "front door", "_justification": "The guest is at the front door and the user asked to let them in."}).to_string()}}])
        };
        (200, json!({"model": "fake", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": "Getting the house ready.",
                        "reasoning_content": "[思考] A guest is coming.\n[計画] 1. porch light\n2. heating",
                        "tool_calls": tools}}]}).to_string())
    })
}

#[test]
fn chat_shows_the_reasoning_block_and_past_rounds_on_request() {
    let sb = Sandbox::new();
    sb.offer_every_tool();
    let model = model();
    let env = [("CAAL_LLM_LOCAL_URL", model.url.as_str())];
    let run = sb
        .run_with_stdin_env(
            &["chat", "--conversation", "guest"],
            "get the house ready for a guest\nyes\nhello\n/reasoning\n/reasoning 1\n/reasoning 9\n/reasoning soon\n/quit\n",
            &env,
        )
        .ok();
    let out = run.stdout;
    assert!(
        out.contains(
            "caal> Turn on the porch lights and set the thermostat to 21 °C? Say yes to confirm."
        ),
        "{out}"
    );
    assert!(out.contains("  ┄ Reasoning (round 1)\n  Narrative: \"Getting the house ready.\"\n  ┄ [parallel batch 0]\n  ┄   ↳ lights_set  \"the guest needs light\""), "{out}");
    assert!(
        out.contains("  ┄   ↳ thermostat_set  \"it is cold tonight\""),
        "{out}"
    );
    assert!(out.contains("      → awaiting_confirmation"), "{out}");
    assert!(out.contains("  ┄ Reasoning (round 2)"), "{out}");
    assert!(out.contains("      → ok (call "), "{out}");
    assert!(
        out.contains("  ─ Round 3 had no tool calls."),
        "/reasoning is the last round: {out}"
    );
    assert_eq!(
        out.matches("  ┄ Reasoning (round 1)").count(),
        2,
        "/reasoning 1 shows it again: {out}"
    );
    assert!(
        out.contains("  ✗ No reasoning data for round 9 in this conversation."),
        "{out}"
    );
    assert!(
        run.stderr
            .contains("/reasoning takes a round number or `all`"),
        "{}",
        run.stderr
    );

    // The Markdown export, with the model's own thinking first.
    let md = sb
        .run(&["reasoning", "export", "--conversation", "guest"])
        .ok()
        .stdout;
    assert!(md.starts_with("## Round 1 · "), "{md}");
    assert!(md.contains("[思考] A guest is coming.\n\n[計画] 1. porch light  2. heating\n\n[計画] lights_set: the guest needs light"), "{md}");
    assert!(
        md.contains("[承認待ち] Waiting for confirmation 1 of 1"),
        "{md}"
    );
    assert!(md.contains("[実行] lights_set -> ok: "), "{md}");
    let out = sb.path().join("r.md");
    sb.run(&[
        "reasoning",
        "export",
        "--conversation",
        "guest",
        "--out",
        out.to_str().unwrap(),
    ])
    .ok();
    assert_eq!(fs::read_to_string(&out).unwrap(), md);

    let replay = sb
        .run(&["reasoning", "replay", "--conversation", "guest", "--json"])
        .ok()
        .json();
    assert_eq!(replay["chain_valid"], true);
    assert_eq!(replay["rounds"].as_array().unwrap().len(), 3);
    let round_id = replay["rounds"][0]["round_id"].as_str().unwrap().to_owned();
    let step = sb
        .run(&["reasoning", "step", &round_id, "0", "--json"])
        .ok()
        .json();
    assert_eq!(
        (step["phase"].as_str(), step["content"].as_str()),
        (Some("thinking"), Some("A guest is coming."))
    );
    let missing = sb.run(&["reasoning", "step", &round_id, "99"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("has no reasoning step 99"),
        "{}",
        missing.stderr
    );
    let sessions = sb.run(&["reasoning", "sessions", "--json"]).ok().json();
    assert_eq!(sessions[0]["conversation_id"], "guest");
    assert_eq!(sessions[0]["step_count"], replay["step_count"]);
    assert_eq!(sessions[0]["chain_valid"], true);
}

#[test]
fn receipts_verify_and_a_tampered_one_or_another_key_fails() {
    let sb = Sandbox::new();
    sb.offer_every_tool();
    let model = model();
    let env = [("CAAL_LLM_LOCAL_URL", model.url.as_str())];
    // The first answer is the parallel one; the second unlocks the door.
    sb.run_env(&["say", "--conversation", "door", "get ready"], &env)
        .ok();
    sb.run_env(&["say", "--conversation", "door", "no"], &env)
        .ok();
    sb.run_env(&["say", "--conversation", "door", "let my guest in"], &env)
        .ok();
    let done: Value = sb
        .run_env(&["say", "--json", "--conversation", "door", "yes"], &env)
        .ok()
        .json();
    assert_eq!(done["reply"], "The front door is unlocked.");
    let round = done["round_id"].as_str().unwrap();

    let pubkey = sb.run(&["receipt", "pubkey"]).ok().stdout.trim().to_owned();
    assert_eq!(pubkey.len(), 64);
    let verified = sb
        .run(&["receipt", "verify", "--round", round, "--json"])
        .ok()
        .json();
    assert_eq!(verified[0]["decision"], "confirmed");
    assert_eq!(verified[0]["public_key"], pubkey.as_str());

    // Receipts travel with the export; one line verifies on its own.
    let export = sb
        .run(&["trace", "export", "--conversation", "door"])
        .ok()
        .stdout;
    let line = export
        .lines()
        .find(|l| l.contains("\"receipt.issued\""))
        .unwrap();
    let file = sb.path().join("receipt.json");
    fs::write(&file, line).unwrap();
    sb.run(&["receipt", "verify", file.to_str().unwrap()]).ok();

    let mut receipt: Value =
        serde_json::from_str::<Value>(line).unwrap()["payload"]["receipt"].clone();
    receipt["action"]["command"]["params"]["door"] = json!("back");
    fs::write(&file, receipt.to_string()).unwrap();
    let tampered = sb.run(&["receipt", "verify", file.to_str().unwrap()]);
    assert_eq!(tampered.code, 1, "{}", tampered.stderr);
    assert!(
        tampered.stderr.contains("action_hash does not match"),
        "{}",
        tampered.stderr
    );

    let other = Sandbox::new();
    let other_key = other
        .run(&["receipt", "pubkey"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let wrong = sb.run(&[
        "receipt", "verify", "--round", round, "--pubkey", &other_key,
    ]);
    assert_eq!(wrong.code, 1);
    assert!(
        wrong.stderr.contains("not by this data dir's key"),
        "{}",
        wrong.stderr
    );
    let none = sb.run(&[
        "receipt",
        "verify",
        "--round",
        &done["round_id"].as_str().unwrap().replace('0', "1"),
    ]);
    assert_eq!(none.code, 2);
}

#[test]
fn pruning_leaves_a_tombstone_that_verifies_until_it_is_edited() {
    let sb = Sandbox::new();
    sb.say("old", "turn on the kitchen lights");
    sb.say("old", "hello");
    let dry = sb
        .run(&[
            "trace",
            "prune",
            "--older-than-days",
            "0",
            "--dry-run",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(dry["removed"][0]["conversation_id"], "old");
    assert_eq!(
        sb.run(&["trace", "list", "--json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .len(),
        2,
        "a dry run removes nothing"
    );
    let pruned = sb
        .run(&["trace", "prune", "--older-than-days", "0"])
        .ok()
        .stdout;
    assert!(
        pruned.contains("removed conversation old: 2 rounds"),
        "{pruned}"
    );
    assert!(
        sb.run(&["trace", "list", "--json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    sb.run(&["trace", "verify"]).ok();
    // The conversation goes on, chained to the tombstone's head.
    assert_eq!(sb.say("old", "hello")["round_seq"], 3);
    sb.run(&["trace", "verify"]).ok();

    let edit = std::process::Command::new("sqlite3")
        .arg(sb.db())
        .arg(
            "DROP TRIGGER tombstones_append_only_update; UPDATE tombstones SET events_removed = 0;",
        )
        .output()
        .unwrap();
    assert!(
        edit.status.success(),
        "{}",
        String::from_utf8_lossy(&edit.stderr)
    );
    let broken = sb.run(&["trace", "verify"]);
    assert_eq!(broken.code, 1);
    assert!(
        broken.stdout.contains("tombstone invalid") || broken.stderr.contains("tombstone invalid"),
        "{}{}",
        broken.stdout,
        broken.stderr
    );
}
