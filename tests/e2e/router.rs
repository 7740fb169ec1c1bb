//! Routing, confirmations, undo and states through the real binary: every
//! `caal say` is a new process, so what waits for a "yes" survives restarts.

use std::fs;

use serde_json::Value;

use crate::support::Sandbox;

#[test]
fn a_governed_command_waits_across_processes_for_its_confirmations() {
    let sb = Sandbox::new();
    let asked = sb.say("home", "open the garage");
    assert_eq!(asked["auth_level"], 4);
    assert_eq!(asked["pending_confirmation"]["confirmations_required"], 2);
    assert!(
        asked["reply"]
            .as_str()
            .unwrap()
            .contains("two confirmations")
    );

    let pending = sb.run(&["pending", "--json"]).ok().json();
    assert_eq!(pending[0]["conversation_id"], "home");
    assert_eq!(pending[0]["pending"]["summary"], "open the garage door");
    let human = sb.run(&["pending"]).ok();
    assert!(
        human
            .stdout
            .contains("home: open the garage door (level 4, 0 of 2 confirmations"),
        "{}",
        human.stdout
    );

    let first = sb.run(&["say", "--conversation", "home", "yes"]).ok();
    assert_eq!(
        first.stdout.trim(),
        "To be sure: open the garage door. Say yes again to confirm."
    );
    let done = sb.say("home", "yes");
    assert_eq!(done["reply"], "The garage door is opening.");
    assert_eq!(done["commands"][0]["command_id"], "garage.open");
    assert!(done["pending_confirmation"].is_null());
    assert_eq!(
        sb.run(&["pending", "--json"]).ok().json(),
        Value::Array(vec![])
    );
    assert!(
        sb.run(&["say", "--conversation", "home", "status"])
            .ok()
            .stdout
            .contains("The garage is open.")
    );
    sb.run(&["trace", "verify"]).ok();
}

#[test]
fn undo_and_shopping_list_through_the_cli() {
    let sb = Sandbox::new();
    sb.say("k", "add coffee to the shopping list");
    sb.say("k", "add bread to the shopping list");
    assert_eq!(
        sb.say("k", "undo")["reply"],
        "Undone: add bread to the shopping list."
    );
    assert_eq!(
        sb.say("k", "what's on the shopping list")["reply"],
        "On the shopping list: coffee."
    );
}

#[test]
fn state_shows_the_conversation_state_and_the_states_there_are() {
    let sb = Sandbox::new();
    let switched = sb.say("c", "switch to conversation mode");
    assert_eq!(
        (
            switched["state_in"].as_str(),
            switched["state_out"].as_str()
        ),
        (Some("default"), Some("conversation"))
    );
    let state = sb
        .run(&["state", "--conversation", "c", "--json"])
        .ok()
        .json();
    assert_eq!(state["state"], "conversation");
    for name in ["default", "conversation", "action", "research"] {
        let s = &state["states"][name];
        assert!(
            s["label"].is_string() && s["icon"].is_string() && s["description"].is_string(),
            "{name}: {s}"
        );
    }
    let human = sb.run(&["state", "--conversation", "c"]).ok();
    assert!(
        human
            .stdout
            .starts_with("c: 💬 Conversation (conversation)"),
        "{}",
        human.stdout
    );
    assert_eq!(sb.say("c", "how was your day")["route_code"], "intent.chat");
    assert_eq!(
        sb.run(&["state", "--conversation", "other", "--json"])
            .ok()
            .json()["state"],
        "default"
    );
}

#[test]
fn config_check_names_the_rule_and_the_problem() {
    let sb = Sandbox::new();
    let check = |name: &str, body: &str, expect: &[&str]| {
        fs::write(sb.path().join(name), body).unwrap();
        let run = sb.run(&["--config", name, "config", "check"]);
        assert_eq!(run.code, 2, "{name}: {}", run.stdout);
        for e in expect {
            assert!(run.stderr.contains(e), "{name}: {} lacks {e}", run.stderr);
        }
        let say = sb.run(&["--config", name, "say", "hello"]);
        assert_eq!(say.code, 2, "startup refuses it too");
    };
    check(
        "regex.toml",
        "[[rules]]\nname = \"bad.regex\"\npattern = '(unclosed'\nroute = \"chat\"\n",
        &["bad.regex", "invalid pattern"],
    );
    check(
        "macro.toml",
        "[macros.party]\nsummary = \"party\"\nsteps = [{ command = \"disco.ball\" }]\n",
        &["macro \"party\"", "disco.ball"],
    );
    check(
        "level.toml",
        "[[rules]]\nname = \"too.high\"\npattern = '^x$'\nroute = \"command\"\ncommand = \"garage.close\"\nauth_level = 5\n",
        &["too.high", "outside 1–4"],
    );
    check(
        "dupe.toml",
        "[[rules]]\nname = \"twice\"\npattern = '^a$'\nroute = \"chat\"\n[[rules]]\nname = \"twice\"\npattern = '^b$'\nroute = \"chat\"\n",
        &["twice", "another rule"],
    );
    let ok = sb.run(&["config", "check"]).ok();
    assert!(ok.stdout.starts_with("config ok:"), "{}", ok.stdout);
}

#[test]
fn the_router_benchmark_prints_its_figures_as_a_last_json_line() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "bench",
            "router",
            "--decisions",
            "2000",
            "--rounds",
            "50",
            "--json",
        ])
        .ok();
    let last: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["generated_rules"], 200);
    for key in [
        "default_p50_us",
        "default_p99_us",
        "generated_p50_us",
        "generated_p99_us",
        "round_p50_ms",
        "round_p99_ms",
    ] {
        assert!(last[key].as_f64().unwrap() > 0.0, "{key} in {last}");
    }
    assert!(last["generated_p99_us"].as_f64() >= last["generated_p50_us"].as_f64());
}
