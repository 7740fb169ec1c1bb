//! Reasoning in rounds against a local server speaking OpenAI's wire
//! format: per-tool rationale and parallel groups, the model's thinking as
//! steps, justification policies, receipts for every settled governed
//! action, and retention behind signed tombstones.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{OverrideReason, tests::Home};
use crate::{
    config::Config,
    llm::{Provider, ProviderKind, Tier, Tiers},
    reasoning::receipt::verify,
    testing::{NO_DELAY, Server},
    trace::Problem,
};

pub(crate) fn tool_calls(
    narrative: &str,
    calls: &[(&str, Value)],
    reasoning: Option<&str>,
) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    json!({"model": "smol", "choices": [{"index": 0, "finish_reason": "tool_calls",
           "message": {"role": "assistant", "content": narrative, "reasoning_content": reasoning,
                       "tool_calls": calls}}]})
    .to_string()
}

pub(crate) fn home_with_model(config: &str, answer: String) -> (Home, Server) {
    home_with_script(
        config,
        Server::start(move |_, _| (200, answer.clone(), NO_DELAY)),
    )
}

/// A home whose local tier is `local`, a scripted server speaking OpenAI's format.
fn home_with_script(config: &str, local: Server) -> (Home, Server) {
    let tiers = Arc::new(Tiers {
        local: Some(Tier::fixed(
            "local",
            Provider::new(ProviderKind::OpenAi, &local.url, "smol", None, 400),
        )),
        remote: None,
    });
    // The scripted model stands for a tier trusted to propose commands.
    let mut config = Config::from_toml_over_defaults(config).unwrap();
    config.llm.propose_with = vec!["local".into()];
    let home = Home::with_llm(config, Arc::new(|_| None), Some(tiers));
    (home, local)
}

const GOOD: &str = "The user's friend is waiting at the front door and asked to be let in.";

#[test]
fn parallel_tool_calls_carry_their_rationale_narrative_and_group() {
    let answer = tool_calls(
        "I'll light the porch and warm the house.",
        &[
            (
                "lights_set",
                json!({"room": "porch", "state": "on", "_rationale": "the porch is dark for the guest"}),
            ),
            ("thermostat_set", json!({"temperature": 21})),
        ],
        Some("[思考] A guest is coming.\n[計画] 1. porch light\n2. heating"),
    );
    let (home, local) = home_with_model("", answer);
    let asked = home.say("c", "get the house ready for a guest");
    let r = asked
        .reasoning
        .clone()
        .expect("a round that decided commands has reasoning");
    assert_eq!(
        r.narrative.as_deref(),
        Some("I'll light the porch and warm the house.")
    );
    let d = &r.tool_decisions;
    assert_eq!(d.len(), 2);
    assert_eq!(
        (d[0].tool_name.as_str(), d[0].rationale.as_str()),
        ("lights_set", "the porch is dark for the guest")
    );
    // No _rationale: the narrative stands in.
    assert_eq!(d[1].rationale, "I'll light the porch and warm the house.");
    assert!(
        d.iter()
            .all(|x| x.parallel_group == Some(0) && x.decided_by == "llm")
    );
    assert!(
        d.iter().all(|x| x.outcome == "awaiting_confirmation"),
        "{d:?}"
    );
    assert_eq!(
        d[0].parameters,
        json!({"room": "porch", "state": "on"}),
        "_rationale is not a parameter"
    );
    // The rationale never reaches the tool schema's parameters sent to executors,
    // and the offered tools ask for it.
    let offered = &local.seen()[0].body["tools"];
    let lights = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "lights_set")
        .unwrap();
    assert!(lights["function"]["parameters"]["properties"]["_rationale"].is_object());
    let door = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "door_unlock")
        .unwrap();
    assert!(
        door["function"]["parameters"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("_justification"))
    );

    // The model's thinking became steps, with its phases.
    let steps = home.of_type("c", "reasoning.step");
    let model: Vec<(&str, &str)> = steps
        .iter()
        .filter(|s| s["source"] == "model" && s["step_type"] != "decision")
        .map(|s| (s["phase"].as_str().unwrap(), s["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        model,
        vec![
            ("thinking", "A guest is coming."),
            ("plan", "1. porch light\n2. heating")
        ]
    );
    let waiting = steps
        .iter()
        .find(|s| s["phase"] == "waiting_approval")
        .unwrap();
    assert!(waiting["links"]["confirmation_id"].is_string());

    // "yes": both run, each an execute step linked to its call, the rationale kept.
    let done = home.say("c", "yes");
    let r = done.reasoning.unwrap();
    assert_eq!(r.tool_decisions.len(), 2);
    assert!(
        r.tool_decisions
            .iter()
            .all(|x| x.outcome == "ok" && x.call_id.is_some())
    );
    assert_eq!(
        r.tool_decisions[0].rationale,
        "the porch is dark for the guest"
    );
    let executed: Vec<Value> = home
        .of_type("c", "reasoning.step")
        .into_iter()
        .filter(|s| s["phase"] == "execute")
        .collect();
    assert_eq!(executed.len(), 2);
    assert!(executed.iter().all(|s| s["links"]["call_id"].is_string()));
    // Neither command is governed: no receipt.
    assert!(home.of_type("c", "receipt.issued").is_empty());
}

#[test]
fn a_governed_call_is_justified_checked_stripped_and_receipted() {
    let answer = tool_calls(
        "",
        &[(
            "door_unlock",
            json!({"door": "front door", "_justification": GOOD}),
        )],
        None,
    );
    let (home, _local) = home_with_model("", answer);
    let asked = home.say("c", "let my friend in");
    assert_eq!(asked.reply, "Unlock the front door? Say yes to confirm.");
    let check = &home
        .of_type("c", "validator.ran")
        .into_iter()
        .find(|v| v["validator_id"] == "justification")
        .unwrap();
    assert_eq!(
        (
            check["status"].as_str(),
            check["details"]["assurance"].as_str()
        ),
        (Some("ok"), Some("full"))
    );
    home.say("c", "yes");
    let request = home.of_type("c", "tool.request").pop().unwrap();
    assert!(
        !request.to_string().contains("_justification"),
        "stripped before the tool ran: {request}"
    );

    let receipts = home.of_type("c", "receipt.issued");
    assert_eq!(receipts.len(), 1);
    let receipt = &receipts[0]["receipt"];
    let v = verify(receipt, Some(&home.engine.receipt_key().verifying_key())).unwrap();
    assert_eq!(
        (v.decision.as_str(), v.assurance.as_str()),
        ("confirmed", "full")
    );
    assert_eq!(receipt["reasoning"]["text"], GOOD);
    assert_eq!(receipt["reasoning"]["justification_stripped"], true);
    assert_eq!(receipt["action"]["outcome"], "ok");
    assert_eq!(
        receipt["action"]["command"],
        json!({"command_id": "door.unlock", "params": {"door": "front door"}})
    );
    assert_eq!(receipt["input"]["arguments"], json!({"door": "front door"}));
    assert_eq!(receipt["confirmation"]["confirmations"], 1);
    assert_eq!(
        receipt["enforcement"]["config_hash"],
        home.engine.config().hash.as_str()
    );
    assert!(
        receipt["receipt_triad"]["context_limitation"]
            .as_str()
            .unwrap()
            .starts_with("router_boundary")
    );
    assert!(
        receipt["audio_sha256"].is_null(),
        "a typed round has no audio"
    );
}

#[test]
fn a_missing_justification_is_blocked_escalated_or_allowed_as_configured() {
    let bare = tool_calls("", &[("door_unlock", json!({"door": "front door"}))], None);
    // block (the default): nothing runs, the person hears why, a receipt says so.
    let (home, _l) = home_with_model("", bare.clone());
    let r = home.say("c", "let my friend in");
    assert_eq!(
        r.reply,
        "I won't unlock the front door: no justification was given. Ask me directly if you want it done."
    );
    assert!(r.pending_confirmation.is_none());
    assert_eq!(r.reasoning.unwrap().tool_decisions[0].outcome, "blocked");
    let receipt = &home.of_type("c", "receipt.issued")[0]["receipt"];
    assert_eq!(
        (
            receipt["confirmation"]["decision"].as_str(),
            receipt["action"]["outcome"].as_str()
        ),
        (Some("blocked"), Some("not_run"))
    );
    assert_eq!(receipt["reasoning_evaluation"]["assurance"], "none");
    let error = home
        .of_type("c", "reasoning.step")
        .into_iter()
        .find(|s| s["phase"] == "error")
        .unwrap();
    assert_eq!(error["links"]["policy"], "reasoning.blocked");

    // escalate: one more confirmation than level 3 asks.
    let (home, _l) = home_with_model(
        "[reasoning]\non_missing_justification = \"escalate\"",
        bare.clone(),
    );
    let r = home.say("c", "let my friend in");
    assert_eq!(r.pending_confirmation.unwrap().confirmations_required, 2);
    home.say("c", "yes");
    home.say("c", "yes");
    let receipt = &home.of_type("c", "receipt.issued")[0]["receipt"];
    assert_eq!(
        (
            receipt["confirmation"]["confirmations"].as_u64(),
            receipt["enforcement"]["applied"].as_str()
        ),
        (Some(2), Some("escalated"))
    );

    // allow: as its level says, the receipt records what failed.
    let (home, _l) = home_with_model("[reasoning]\non_missing_justification = \"allow\"", bare);
    let r = home.say("c", "let my friend in");
    assert_eq!(r.pending_confirmation.unwrap().confirmations_required, 1);
    home.say("c", "yes");
    let receipt = &home.of_type("c", "receipt.issued")[0]["receipt"];
    assert_eq!(
        (
            receipt["enforcement"]["applied"].as_str(),
            receipt["reasoning_evaluation"]["passed"].as_bool()
        ),
        (Some("allowed"), Some(false))
    );
}

#[test]
fn a_parroted_justification_is_caught_and_an_override_is_recorded() {
    let parrot = tool_calls(
        "",
        &[(
            "door_unlock",
            json!({"door": "front door", "_justification": "Unlocking it because you asked me to, as always."}),
        )],
        None,
    );
    let (home, _l) = home_with_model("", parrot);
    let r = home.say("c", "let my friend in");
    let check = home
        .of_type("c", "validator.ran")
        .into_iter()
        .find(|v| v["validator_id"] == "justification")
        .unwrap();
    assert_eq!(check["status"], "error");
    assert!(
        check["message"]
            .as_str()
            .unwrap()
            .contains("glc_003_no_parroting"),
        "{check}"
    );
    // on_check_error = escalate (the default): two confirmations.
    assert_eq!(r.pending_confirmation.unwrap().confirmations_required, 2);
    let c = "c".parse().unwrap();
    let ui = || home.engine.origin(crate::auth::Door::Ui, "token");
    home.engine
        .answer_confirmation(&ui(), &c, true, None)
        .unwrap();
    home.engine
        .answer_confirmation(&ui(), &c, true, Some(OverrideReason::AcceptedRisk))
        .unwrap();
    let receipt = &home.of_type("c", "receipt.issued")[0]["receipt"];
    assert_eq!(receipt["confirmation"]["override_reason"], "accepted_risk");
    assert_eq!(receipt["reasoning_evaluation"]["assurance"], "partial");
    verify(receipt, Some(&home.engine.receipt_key().verifying_key())).unwrap();
}

#[test]
fn governed_commands_a_rule_decided_get_receipts_when_run_or_denied() {
    let home = Home::new();
    home.say("c", "unlock the front door");
    home.say("c", "yes");
    home.say("c", "open the garage");
    home.say("c", "no");
    let receipts: Vec<Value> = home
        .of_type("c", "receipt.issued")
        .into_iter()
        .map(|p| p["receipt"].clone())
        .collect();
    let seen: Vec<(&str, &str, &str)> = receipts
        .iter()
        .map(|r| {
            (
                r["action"]["command"]["command_id"].as_str().unwrap(),
                r["confirmation"]["decision"].as_str().unwrap(),
                r["decided_by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("door.unlock", "confirmed", "rule"),
            ("garage.open", "denied", "rule")
        ]
    );
    assert!(
        receipts[0]["reasoning"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Rule door.unlock matched 'unlock the front door'")
    );
    for r in &receipts {
        verify(r, Some(&home.engine.receipt_key().verifying_key())).unwrap();
    }
    // Level-1 commands are not governed unless configured.
    home.say("c", "turn on the kitchen lights");
    assert_eq!(home.of_type("c", "receipt.issued").len(), 2);
    let configured = Home::with(
        Config::from_toml_over_defaults("[reasoning]\ngoverned_commands = [\"lights.set\"]")
            .unwrap(),
        Arc::new(|_| None),
    );
    configured.say("c", "turn on the kitchen lights");
    let r = &configured.of_type("c", "receipt.issued")[0]["receipt"];
    assert_eq!(
        (
            r["confirmation"]["decision"].as_str(),
            r["enforcement"]["governed_by"].as_str()
        ),
        (Some("not_required"), Some("config"))
    );
}

#[test]
fn reasoning_text_is_scrubbed_and_capped() {
    let key = "AKIAIOSFODNN7EXAMPLE";
    let thinking = format!("The key {key} is in the note.\n{}", "x".repeat(500));
    let answer = tool_calls(
        "",
        &[(
            "lights_set",
            json!({"state": "on", "_rationale": format!("use {key}")}),
        )],
        Some(&thinking),
    );
    let (home, _l) = home_with_model("[reasoning]\nmax_step_chars = 100", answer);
    let r = home.say("c", "lights please");
    let all = serde_json::to_string(&home.of_type("c", "reasoning.step")).unwrap();
    assert!(!all.contains(key), "a secret reached a reasoning step");
    assert!(!serde_json::to_string(&r.reasoning).unwrap().contains(key));
    let capped = home
        .of_type("c", "reasoning.step")
        .into_iter()
        .find(|s| s["truncated"] == true)
        .unwrap();
    assert!(
        capped["content"]
            .as_str()
            .unwrap()
            .contains("more characters not kept")
    );
}

#[test]
fn pruned_conversations_leave_signed_tombstones_and_the_rest_still_verifies() {
    let home = Home::new();
    home.say("old", "turn on the kitchen lights");
    home.say("old", "turn off the kitchen lights");
    home.say("kept", "hello");
    let store = home.engine.store();
    let reader = store.reader();
    // Nothing deletes without a tombstone.
    let raw = rusqlite::Connection::open(store.path()).unwrap();
    let refused = raw
        .execute("DELETE FROM events WHERE conversation_id = 'old'", [])
        .unwrap_err();
    assert!(
        refused.to_string().contains("signed tombstone"),
        "{refused}"
    );

    // Search sees what was said before the prune (FTS5, kept in step by triggers).
    let search = |q: &str| {
        reader
            .search(
                q,
                &crate::trace::SearchFilter {
                    limit: 50,
                    ..Default::default()
                },
            )
            .unwrap()
    };
    let found = search("kitchen lights");
    // Said, decided and answered, twice, newest first.
    assert_eq!(found.len(), 6, "{found:?}");
    assert!(found.iter().all(|h| h.conversation_id == "old"));
    assert_eq!(found[0].text, "Okay, the kitchen lights are off.");
    assert_eq!(found[0].snippet, "Okay, the [kitchen] [lights] are off.");

    // "Older than" every round so far, except we keep "kept" by pruning only what predates its round.
    let cutoff = reader.rounds(Some(&"kept".parse().unwrap()), 1).unwrap()[0]
        .round
        .created_at
        .clone();
    let report = store
        .prune(&cutoff, home.engine.receipt_key(), false)
        .unwrap();
    assert_eq!(report.removed.len(), 1);
    let t = &report.removed[0];
    assert_eq!(
        (
            t.conversation_id.as_str(),
            t.rounds_removed,
            t.last_round_seq
        ),
        ("old", 2, 2)
    );
    assert!(
        reader
            .rounds(Some(&"old".parse().unwrap()), 10)
            .unwrap()
            .is_empty()
    );
    let verified = reader.verify(None).unwrap();
    assert!(verified.ok, "{:?}", verified.broken);
    // What the tombstone removed is gone from search too.
    assert!(search("kitchen lights").is_empty());
    let kept = search("hello");
    assert!(
        !kept.is_empty() && kept.iter().all(|h| h.conversation_id == "kept"),
        "{kept:?}"
    );

    // The conversation goes on from the tombstone's head.
    let next = home.say("old", "hello");
    assert_eq!(next.round_seq, 3);
    assert!(reader.verify(None).unwrap().ok);
    let first = reader.round(&next.round_id).unwrap().unwrap().1;
    assert_eq!(first[0].prev_hash.as_deref(), Some(t.head_hash.as_str()));

    // An edited tombstone fails verification.
    raw.execute_batch(
        "DROP TRIGGER tombstones_append_only_update; UPDATE tombstones SET rounds_removed = 1;",
    )
    .unwrap();
    let broken = reader.verify(None).unwrap();
    assert!(!broken.ok);
    assert_eq!(broken.broken[0].problem, Problem::TombstoneInvalid);
    assert_eq!(broken.broken[0].conversation_id, "old");
}

#[test]
fn the_coherence_check_asks_the_model_tier_and_a_low_score_escalates() {
    let local = Server::start(|_, seen| {
        let judging = seen.body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You judge"));
        let answer = if judging {
            json!({"model": "smol", "choices": [{"index": 0, "finish_reason": "stop",
                   "message": {"role": "assistant", "content": "0.2"}}]})
            .to_string()
        } else {
            tool_calls(
                "",
                &[(
                    "door_unlock",
                    json!({"door": "front door", "_justification": GOOD}),
                )],
                None,
            )
        };
        (200, answer, NO_DELAY)
    });
    let (home, local) = home_with_script("[reasoning]\ncoherence_check = true", local);
    let r = home.say("c", "let my friend in");
    assert_eq!(
        r.pending_confirmation.unwrap().confirmations_required,
        2,
        "escalated"
    );
    let asked: Vec<String> = local
        .seen()
        .iter()
        .map(|s| s.body["messages"][1]["content"].to_string())
        .collect();
    assert!(
        asked
            .iter()
            .any(|m| m.contains("Action: unlock the front door") && m.contains(GOOD)),
        "{asked:?}"
    );
    let check = home
        .of_type("c", "validator.ran")
        .into_iter()
        .find(|v| v["validator_id"] == "justification")
        .unwrap();
    let coherence = check["details"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check_id"] == "glc_005_llm_coherence")
        .unwrap()
        .clone();
    assert_eq!(
        (coherence["passed"].as_bool(), coherence["score"].as_f64()),
        (Some(false), Some(0.2))
    );
}

#[test]
fn verify_names_a_tampered_reasoning_step_by_its_number() {
    let home = Home::new();
    home.say("c", "turn on the kitchen lights");
    let raw = rusqlite::Connection::open(home.engine.store().path()).unwrap();
    // The round's second reasoning step (its execution) is edited.
    raw.execute_batch(
        "DROP TRIGGER events_append_only_update;
         UPDATE events SET payload = replace(payload, 'lights_set -> ok', 'lights_set -> failed')
         WHERE event_type = 'reasoning.step' AND payload LIKE '%lights_set -> ok%';",
    )
    .unwrap();
    let report = home.engine.store().reader().verify(None).unwrap();
    let broken = &report.broken[0];
    assert_eq!(
        (broken.problem, broken.reasoning_step),
        (Problem::HashMismatch, Some(1))
    );
    assert!(
        broken
            .to_string()
            .contains("(reasoning step 1): hash mismatch"),
        "{broken}"
    );
}

#[test]
fn an_undo_is_a_tool_decision_with_its_reason() {
    let home = Home::new();
    home.say("c", "add oat milk to the shopping list");
    let undone = home.say("c", "undo");
    let r = undone.reasoning.expect("the undo ran a command");
    let d = &r.tool_decisions[0];
    assert_eq!(
        (d.command_id.as_str(), d.outcome.as_str()),
        ("shopping.remove", "ok")
    );
    assert!(
        d.rationale
            .starts_with("Asked to undo \"add oat milk to the shopping list\""),
        "{}",
        d.rationale
    );
    let step = home
        .of_type("c", "reasoning.step")
        .into_iter()
        .find(|s| s["step_type"] == "correction")
        .unwrap();
    assert_eq!(
        step["links"]["call_id"],
        d.call_id.clone().unwrap().as_str()
    );
}
