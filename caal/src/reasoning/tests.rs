//! The thinking parser's heuristics (English, Japanese and both), the
//! Markdown export against its golden file, the justification checks, and
//! receipts: signed, verified, and refused when tampered with or checked
//! against another key.

use serde_json::{Value, json};

use super::{
    MarkdownRound, Phase, RecordedStep, StepType,
    justify::{Applied, Assurance, evaluate, parse_score},
    markdown, parse_thinking,
    receipt::{ReceiptDraft, ReceiptError, hash_of, load_or_create_key, sign, verify},
};
use crate::config::{Config, Policy};

fn phases(text: &str) -> Vec<(Phase, String)> {
    parse_thinking(text)
        .into_iter()
        .map(|s| (s.phase, s.content))
        .collect()
}

#[test]
fn bracket_markers_decide_the_phase_of_what_follows_them() {
    let text = "[思考] The user wants the porch lit.\n[計画] 1. Call lights_set\n2. Confirm\n[承認待ち] Waiting for a yes.\n[実行] lights_set -> ok\n[エラー] The webhook timed out.";
    assert_eq!(
        phases(text),
        vec![
            (Phase::Thinking, "The user wants the porch lit.".into()),
            (Phase::Plan, "1. Call lights_set\n2. Confirm".into()),
            (Phase::WaitingApproval, "Waiting for a yes.".into()),
            (Phase::Execute, "lights_set -> ok".into()),
            (Phase::Error, "The webhook timed out.".into()),
        ]
    );
    // A marker's text is not re-read by the heuristics: "failed" inside [実行] stays execute.
    assert_eq!(
        phases("[実行] the retry failed once, then worked"),
        vec![(Phase::Execute, "the retry failed once, then worked".into())]
    );
    // Text before the first marker goes through the heuristics.
    assert_eq!(
        phases("Some context first.\n[計画] do it"),
        vec![
            (Phase::Thinking, "Some context first.".into()),
            (Phase::Plan, "do it".into())
        ]
    );
}

#[test]
fn a_list_after_a_plan_or_steps_line_is_a_plan() {
    assert_eq!(
        phases(
            "The user is cold.\nMy plan:\n1. Check the thermostat\n2) Raise it to 21\n\nThen answer."
        ),
        vec![
            (Phase::Thinking, "The user is cold.".into()),
            (
                Phase::Plan,
                "My plan:\n1. Check the thermostat\n2) Raise it to 21".into()
            ),
            (Phase::Thinking, "Then answer.".into()),
        ]
    );
    assert_eq!(
        phases("Steps\n- lock the door\n* close the garage\n• dim the hall"),
        vec![(
            Phase::Plan,
            "Steps\n- lock the door\n* close the garage\n• dim the hall".into()
        )]
    );
    // A list with no plan before it is just thinking.
    assert_eq!(
        phases("Options I see:\n1. do nothing\n2. ask again"),
        vec![(
            Phase::Thinking,
            "Options I see:\n1. do nothing\n2. ask again".into()
        )]
    );
}

#[test]
fn error_words_in_english_and_japanese_make_an_error_step() {
    assert_eq!(
        phases("I called the lights.\nThe call failed with a timeout.\nI will retry."),
        vec![
            (Phase::Thinking, "I called the lights.".into()),
            (Phase::Error, "The call failed with a timeout.".into()),
            (Phase::Thinking, "I will retry.".into()),
        ]
    );
    assert_eq!(
        phases("照明を呼び出しました。\n接続エラーが発生しました。\n書き込みに失敗。"),
        vec![
            (Phase::Thinking, "照明を呼び出しました。".into()),
            (Phase::Error, "接続エラーが発生しました。".into()),
            (Phase::Error, "書き込みに失敗。".into()),
        ]
    );
    // Whole words only: "terrorist" and "errorless" are not errors.
    assert_eq!(
        phases("A story about a terrorist plot.")[0].0,
        Phase::Thinking
    );
}

#[test]
fn mixed_japanese_and_english_thinking_is_split_by_every_heuristic() {
    let text = "ユーザーは帰宅した。The lights should come on.\n手順:\n１．玄関の照明をつける\n2. set the heating to 21\n\nheating API error: 503\n[承認待ち] 玄関の鍵を開ける前に確認";
    assert_eq!(
        phases(text),
        vec![
            (
                Phase::Thinking,
                "ユーザーは帰宅した。The lights should come on.".into()
            ),
            (
                Phase::Plan,
                "手順:\n１．玄関の照明をつける\n2. set the heating to 21".into()
            ),
            (Phase::Error, "heating API error: 503".into()),
            (Phase::WaitingApproval, "玄関の鍵を開ける前に確認".into()),
        ]
    );
    assert!(parse_thinking("  \n\n ").is_empty());
}

fn recorded(round: &str, n: usize, phase: Phase, content: &str, links: Value) -> RecordedStep {
    RecordedStep {
        round_id: round.into(),
        round_seq: 1,
        step_number: n,
        event_seq: n as i64 + 4,
        phase,
        step_type: StepType::of_phase(phase),
        content: content.into(),
        links,
        source: "engine".into(),
        timestamp: "2026-02-23T10:30:00.000000Z".into(),
    }
}

#[test]
fn the_markdown_export_matches_its_golden_file() {
    let first = vec![
        recorded(
            "01JXYZ-1",
            0,
            Phase::Thinking,
            "The user asked me to check the house. I should verify the doors first,\nthen the lights.",
            json!({}),
        ),
        recorded(
            "01JXYZ-1",
            1,
            Phase::Plan,
            "[計画] plan:\n1. Call door_lock\n2. Call lights_set",
            json!({}),
        ),
        recorded(
            "01JXYZ-1",
            2,
            Phase::WaitingApproval,
            "Waiting for confirmation 1 of 1: lock the front door",
            json!({"confirmation_id": "01JXYZ-CF1"}),
        ),
    ];
    let second = vec![
        recorded(
            "01JXYZ-2",
            0,
            Phase::Execute,
            "door_lock -> ok: The front door is locked.",
            json!({"call_id": "01JXYZ-TC1"}),
        ),
        recorded(
            "01JXYZ-2",
            1,
            Phase::Error,
            "lights_set -> failed: the webhook timed out",
            json!({"call_id": "01JXYZ-TC2"}),
        ),
    ];
    let text = markdown(&[
        MarkdownRound {
            round_id: "01JXYZ-1",
            round_seq: 1,
            created_at: "2026-02-23T10:30:00.000000Z",
            steps: &first,
        },
        MarkdownRound {
            round_id: "01JXYZ-2",
            round_seq: 2,
            created_at: "2026-02-23T10:30:09.000000Z",
            steps: &second,
        },
        MarkdownRound {
            round_id: "01JXYZ-3",
            round_seq: 3,
            created_at: "2026-02-23T10:31:00.000000Z",
            steps: &[],
        },
    ]);
    let golden = include_str!("golden/reasoning-export.md");
    assert_eq!(
        text, golden,
        "regenerate the golden file only when the format is meant to change"
    );
}

fn reasoning_config(extra: &str) -> crate::config::ReasoningConfig {
    Config::from_toml_over_defaults(extra).unwrap().reasoning
}

#[test]
fn justifications_are_checked_for_presence_substance_and_parroting() {
    let config = reasoning_config("");
    let good = evaluate(
        Some("The user's friend is at the front door and asked to be let in."),
        "unlock the front door",
        &config,
        None,
    );
    assert_eq!(
        (good.passed, good.assurance, good.applied),
        (true, Assurance::Full, Applied::None)
    );
    assert_eq!(good.checks.len(), 3);

    let missing = evaluate(None, "unlock the front door", &config, None);
    assert_eq!(
        (missing.passed, missing.assurance, missing.applied),
        (false, Assurance::None, Applied::Blocked)
    );
    assert_eq!(
        missing.reason.as_deref(),
        Some("no justification was given")
    );

    let short = evaluate(Some("needed"), "unlock the front door", &config, None);
    assert_eq!(
        (short.assurance, short.applied),
        (Assurance::Partial, Applied::Escalated)
    );
    assert!(short.reason.unwrap().contains("glc_002_minimum_substance"));

    let parroted = evaluate(
        Some("I am doing this because you asked me to do it."),
        "unlock the front door",
        &config,
        None,
    );
    assert!(!parroted.passed);
    let check = parroted
        .checks
        .iter()
        .find(|c| c.check_id == "glc_003_no_parroting")
        .unwrap();
    assert!(
        !check.passed
            && check
                .detail
                .as_deref()
                .unwrap()
                .contains("because you asked")
    );

    // Each policy setting for a missing justification.
    for (policy, applied) in [
        ("block", Applied::Blocked),
        ("escalate", Applied::Escalated),
        ("allow", Applied::Allowed),
    ] {
        let c = reasoning_config(&format!(
            "[reasoning]\non_missing_justification = \"{policy}\""
        ));
        assert_eq!(c.on_missing_justification.as_str(), policy);
        assert_eq!(
            evaluate(Some("   "), "x", &c, None).applied,
            applied,
            "{policy}"
        );
    }
    let blocklist = reasoning_config(
        "[reasoning]\nparroting_blocklist = [\"per instructions\"]\non_check_error = \"block\"",
    );
    assert_eq!(blocklist.on_check_error, Policy::Block);
    let caught = evaluate(
        Some("Unlocking the door per instructions from earlier."),
        "x",
        &blocklist,
        None,
    );
    assert_eq!(caught.applied, Applied::Blocked);
}

#[test]
fn the_coherence_check_asks_a_model_and_an_error_is_a_failed_check() {
    let config = reasoning_config("[reasoning]\ncoherence_check = true\ncoherence_threshold = 0.6");
    let reason = "The user is locked out and asked for the front door to be opened.";
    let high = |_: &str, _: &str| Ok(0.9);
    let e = evaluate(Some(reason), "unlock the front door", &config, Some(&high));
    assert_eq!((e.passed, e.checks.len()), (true, 4));
    let low = |_: &str, _: &str| Ok(0.2);
    let e = evaluate(Some(reason), "unlock the front door", &config, Some(&low));
    assert_eq!((e.passed, e.applied), (false, Applied::Escalated));
    let broken = |_: &str, _: &str| Err("timed out".to_string());
    let e = evaluate(
        Some(reason),
        "unlock the front door",
        &config,
        Some(&broken),
    );
    let c = e.checks.last().unwrap();
    assert!(!c.passed && c.detail.as_deref().unwrap().contains("timed out"));
    assert_eq!(parse_score("0.75").unwrap(), 0.75);
    assert_eq!(parse_score("Score: 8/10").unwrap(), 0.8);
    assert!(parse_score("no idea").is_err());
}

fn draft() -> ReceiptDraft {
    ReceiptDraft {
        library_id: "lib-test".into(),
        conversation_id: "door".into(),
        round_id: "r2".into(),
        round_seq: 2,
        decided_in_round: Some("r1".into()),
        decided_by: "llm".into(),
        input: json!({"tool": "door_unlock", "arguments": {"door": "front"}}),
        reasoning: "The user's friend is at the front door and asked to be let in.".into(),
        justification_stripped: true,
        action: json!({"command_id": "door.unlock", "params": {"door": "front"}}),
        call_id: Some("c1".into()),
        outcome: "ok".into(),
        evaluation: Some(evaluate(
            Some("The user's friend is at the front door and asked to be let in."),
            "unlock the front door",
            &reasoning_config(""),
            None,
        )),
        enforcement: json!({"auth_level": 3, "config_hash": "sha256:abc"}),
        decision: "confirmed".into(),
        confirmations: 1,
        override_reason: None,
        audio_sha256: None,
        issued_at: "2026-11-22T05:00:00.000Z".into(),
    }
}

#[test]
fn a_receipt_verifies_and_any_tampering_or_another_key_fails() {
    let dir = tempfile::tempdir().unwrap();
    let key = load_or_create_key(dir.path()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("receipt_key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the signing key is private");
    }
    assert_eq!(
        load_or_create_key(dir.path()).unwrap().to_bytes(),
        key.to_bytes(),
        "made once, then read"
    );
    let receipt = sign(&draft(), &key);
    assert_eq!(
        receipt["receipt_triad"]["input_hash"],
        hash_of(&receipt["input"])
    );
    assert!(
        receipt["receipt_triad"]["reasoning_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let ok = verify(&receipt, Some(&key.verifying_key())).unwrap();
    assert_eq!(
        (ok.decision.as_str(), ok.assurance.as_str()),
        ("confirmed", "full")
    );
    // Without an expected key, the receipt's own key is used.
    verify(&receipt, None).unwrap();

    // The action changed after signing: its hash no longer matches.
    let mut changed = receipt.clone();
    changed["action"]["command"]["params"]["door"] = json!("back");
    assert!(matches!(
        verify(&changed, None),
        Err(ReceiptError::HashMismatch {
            which: "action_hash",
            ..
        })
    ));
    // A field outside the triad changed: the signature no longer holds.
    let mut relabelled = receipt.clone();
    relabelled["confirmation"]["decision"] = json!("not_required");
    assert!(matches!(
        verify(&relabelled, None),
        Err(ReceiptError::BadSignature)
    ));
    // Hash and content changed together still break the signature.
    let mut rehashed = changed.clone();
    rehashed["receipt_triad"]["action_hash"] = json!(hash_of(&changed["action"]["command"]));
    assert!(matches!(
        verify(&rehashed, None),
        Err(ReceiptError::BadSignature)
    ));
    // Another data dir's key.
    let other = tempfile::tempdir().unwrap();
    let other_key = load_or_create_key(other.path()).unwrap();
    assert!(matches!(
        verify(&receipt, Some(&other_key.verifying_key())),
        Err(ReceiptError::WrongKey { .. })
    ));
    // Re-signed by another key that claims to be ours: the signature fails.
    let mut forged = sign(&draft(), &other_key);
    forged["signature"]["public_key"] = receipt["signature"]["public_key"].clone();
    assert!(matches!(
        verify(&forged, Some(&key.verifying_key())),
        Err(ReceiptError::BadSignature)
    ));
}
