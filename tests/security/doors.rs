//! Who may talk to CAAL, and who may confirm what it asks.

use serde_json::Value;

use crate::{
    chat, doors_state, events_of, serving,
    support::{Sandbox, client},
};

/// Finding 1: anyone who reached the Wyoming port could unlock the front
/// door. A non-loopback address with neither a peer list nor a secret is
/// refused at start, naming both fixes; nothing is served.
#[test]
fn wyoming_on_the_lan_without_a_peer_list_or_a_secret_does_not_start() {
    let sb = Sandbox::new();
    let run = sb.run_env(
        &["serve", "--bind", "127.0.0.1:0"],
        &[("CAAL_WYOMING", "0.0.0.0:0")],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("[doors.wyoming] allow") && run.stderr.contains("CAAL_WYOMING_TOKEN"),
        "{}",
        run.stderr
    );
    // With a peer list it starts.
    sb.configure("[doors.wyoming]\nallow = [\"192.168.1.20\"]\n");
    let served = sb.serve(&[("CAAL_WYOMING", "0.0.0.0:0")]);
    let (host, _) = served.wyoming();
    assert_eq!(host, "0.0.0.0");
}

/// Finding 1: with a secret set, a peer that does not send it first (or
/// sends another) gets Wyoming's own error, by name, and is closed; one
/// that sends it is served as Home Assistant is.
#[test]
fn a_wyoming_peer_without_the_secret_is_refused_by_name() {
    let secret = "a-long-shared-secret-for-satellites";
    let (_sb, served, _) = serving(
        "",
        &[
            ("CAAL_WYOMING", "127.0.0.1:0"),
            ("CAAL_WYOMING_TOKEN", secret),
        ],
    );
    let (host, port) = served.wyoming();
    let seen = client("wyoming_attack.py", &["auth", &host, &port, secret]);
    assert_eq!(seen["none"]["code"], "auth.required", "{seen}");
    assert!(
        seen["none"]["text"].as_str().unwrap().contains("caal-auth"),
        "{seen}"
    );
    assert_eq!(seen["none_closed"], true);
    assert_eq!(seen["wrong"]["code"], "auth.failed", "{seen}");
    assert_eq!(seen["wrong_closed"], true);
    assert_eq!(seen["right"], "info");
    assert_eq!(seen["handled"], "Okay, the kitchen lights are on.");
    let (_, log) = served.terminate();
    assert!(
        !log.iter().any(|l| l.contains(secret)),
        "the secret was logged"
    );
    assert!(
        log.iter().any(|l| l.contains("wyoming: peer refused")),
        "{log:?}"
    );
}

/// Findings 1 and 9: another peer cannot answer a satellite's
/// confirmation (yes or no), cannot link the satellite's speech to its own
/// words, and cannot reach another door's conversations by naming them.
#[test]
fn only_the_wyoming_peer_that_was_asked_answers_and_no_other_door_reaches_its_conversations() {
    let (_sb, served, token) = serving("", &[("CAAL_WYOMING", "127.0.0.1:0")]);
    // The API starts an unlock in "default"; a Wyoming peer naming "default"
    // is in its own door's "wyoming:default".
    let (_, asked) = chat(&served, &token, "default", "unlock the front door");
    assert!(asked["pending_confirmation"].is_object(), "{asked}");
    let (host, port) = served.wyoming();
    let seen = client("wyoming_attack.py", &["peers", &host, &port]);

    let asked = &seen["asked"];
    assert_eq!(
        asked["text"], "Unlock the front door? Say yes to confirm.",
        "{seen}"
    );
    for other in ["other_yes", "other_no"] {
        assert!(
            seen[other]["text"]
                .as_str()
                .unwrap()
                .contains("only the one that asked"),
            "{other}: {seen}"
        );
        assert_eq!(
            seen[other]["context"]["pending_confirmation"], true,
            "{seen}"
        );
    }
    assert_eq!(
        seen["own_yes"]["text"], "The front door is unlocked.",
        "{seen}"
    );

    // The satellite's speech linked to its own text only.
    let other = seen["other_text"]["context"]["round_id"].as_str().unwrap();
    let received = &events_of(&served, &token, other, "input.received")[0];
    assert!(received.get("audio_id").is_none(), "{received}");
    assert_eq!(received["door"], "wyoming");
    assert_eq!(received["client"], "127.0.0.2");
    let own = seen["own_text"]["context"]["round_id"].as_str().unwrap();
    let received = &events_of(&served, &token, own, "input.received")[0];
    assert!(received["audio_id"].is_string(), "{received}");
    assert_eq!(received["client"], "127.0.0.1");

    // "default" over Wyoming is the door's own: nothing waits there.
    assert_eq!(
        seen["named_default"]["context"]["conversation_id"],
        "wyoming:default"
    );
    assert_eq!(
        seen["named_default"]["text"],
        "There's nothing waiting for a confirmation."
    );
    // And the API cannot speak in the Wyoming door's conversations.
    let (status, refused) = chat(&served, &token, "wyoming:01JD5Z7KXQ8M3V2N6R4T9W0XYZ", "yes");
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["code"], "conversation_id.reserved");
    // The refused answers are in the trace, with who gave them.
    let refusal = seen["other_yes"]["context"]["round_id"].as_str().unwrap();
    let confirm = &events_of(&served, &token, refusal, "confirm.received")[0];
    assert_eq!(confirm["resolution"], "refused");
    assert_eq!(confirm["refused"], "other_client");
    assert_eq!(
        (&confirm["door"], &confirm["client"]),
        (&Value::from("wyoming"), &Value::from("127.0.0.2"))
    );
    // The API's own unlock still waits, unanswered by anyone else.
    let pending = crate::get(&served, &token, "/api/pending");
    assert!(
        pending["pending"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["conversation_id"] == "default"),
        "{pending}"
    );
}

/// Finding 8: eight "yes" at once to a level-4 command. The first counts
/// and the action is restated; a "yes" counts as the second only if it was
/// sent after the restatement was given out.
#[test]
fn a_level_four_second_yes_counts_only_after_the_restatement_was_given_out() {
    let (_sb, served, token) = serving("", &[]);
    let (_, asked) = chat(&served, &token, "garage", "open the garage door");
    assert_eq!(
        asked["pending_confirmation"]["confirmations_required"], 2,
        "{asked}"
    );
    let answers: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| chat(&served, &token, "garage", "yes").1))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let restated = answers
        .iter()
        .filter(|a| a["reply"].as_str().unwrap().starts_with("To be sure"))
        .count();
    assert_eq!(restated, 1, "{answers:?}");
    // Each other yes was refused as sent before the restatement, or (sent
    // after it was given out) counted as the second, or came after that.
    let (mut opened, mut after) = (0, 0);
    for a in &answers {
        let reply = a["reply"].as_str().unwrap();
        if reply.starts_with("To be sure") {
            continue;
        }
        if reply == "There's nothing waiting for a confirmation." {
            after += 1;
            continue;
        }
        let round = a["round_id"].as_str().unwrap();
        let confirm = &events_of(&served, &token, round, "confirm.received")[0];
        if reply == "The garage door is opening." {
            opened += 1;
            assert_eq!(confirm["confirmations_received"], 2);
        } else {
            assert!(
                reply.starts_with("That yes came before the question"),
                "{reply}"
            );
            assert_eq!(confirm["refused"], "before_asked", "{confirm}");
        }
    }
    assert!(after == 0 || opened == 1, "{answers:?}");
    assert!(opened <= 1);
    let (_, garage_open) = doors_state(&served, &token);
    assert_eq!(garage_open, opened == 1);
    if opened == 0 {
        // A yes said after hearing the restatement opens it.
        let (_, yes) = chat(&served, &token, "garage", "yes");
        assert_eq!(yes["reply"], "The garage door is opening.", "{yes}");
    }
}

/// Finding 9: two OpenAI threads that open with the same words share a
/// conversation; the other thread's "yes" (after something other than the
/// question) does not unlock, the thread that heard the question does.
#[test]
fn another_openai_thread_that_opened_alike_cannot_confirm() {
    let (_sb, served, token) = serving("", &[]);
    let seen = client("agent_attack.py", &["threads", &served.url, &token]);
    assert_eq!(
        seen["a_asked"], "Unlock the front door? Say yes to confirm.",
        "{seen}"
    );
    assert_eq!(seen["a_conversation"], seen["b_conversation"]);
    assert!(
        seen["a_conversation"]
            .as_str()
            .unwrap()
            .starts_with("openai:")
    );
    assert!(
        seen["b_yes"]
            .as_str()
            .unwrap()
            .starts_with("That yes doesn't answer what I asked last"),
        "{seen}"
    );
    assert_eq!(seen["still_pending"], true);
    assert_eq!(seen["a_yes"], "The front door is unlocked.");
}

/// Findings 8 and 9: an MCP agent that asked for an unlock cannot confirm
/// it with its own "yes"; a secret given as a conversation id is not
/// echoed in the tool's error.
#[test]
fn an_agent_cannot_confirm_its_own_unlock_and_its_errors_keep_secrets() {
    let (_sb, served, token) = serving("", &[]);
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let seen = client("agent_attack.py", &["mcp", &served.url, &token, secret]);
    assert_eq!(
        seen["asked"]["reply"], "Unlock the front door? Say yes to confirm.",
        "{seen}"
    );
    assert!(
        seen["yes"]["reply"]
            .as_str()
            .unwrap()
            .starts_with("An agent can't confirm"),
        "{seen}"
    );
    assert!(seen["yes"]["pending_confirmation"].is_object());
    assert_eq!(seen["bad_error"], true);
    for said in [&seen["bad_text"], &seen["search_text"]] {
        let said = said.as_str().unwrap();
        assert!(!said.contains(secret), "{said}");
        assert!(said.contains("conversation_id"), "{said}");
    }
    let (front_locked, _) = doors_state(&served, &token);
    assert!(front_locked, "the agent's own yes unlocked the door");
    let (_, log) = served.terminate();
    assert!(!log.iter().any(|l| l.contains(secret)));
}
