//! The round boundary under crashes: the process is aborted at each point of
//! a round's end (before its terminal event, after it but before the state
//! transaction, inside that transaction, after it), restarted, and the state
//! must be what the trace says: the confirmation asked for is waiting exactly
//! when the round that asked for it ended, and an undoable command can be
//! undone exactly when its round ended.

use std::collections::BTreeSet;

use rusqlite::Connection;

use crate::support::Sandbox;

/// Where a process can stop at the end of a round, and whether the trace
/// has the round's end by then.
const POINTS: [(&str, bool); 4] = [
    ("round.before_end", false),
    ("boundary.before_state", true),
    ("boundary.in_state", true),
    ("boundary.after_state", true),
];

/// Runs `caal say` with a crash point armed; it must stop there.
fn say_and_crash(sb: &Sandbox, conversation: &str, text: &str, point: &str) {
    let run = sb.run_env(
        &["say", "--json", "--conversation", conversation, text],
        &[("CAAL_FAILPOINTS", &format!("{point}=return"))],
    );
    assert_ne!(
        run.code, 0,
        "{point}: the process should have stopped\n{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(&format!("crash point {point} reached")),
        "{point}: {}",
        run.stderr
    );
}

/// Pending confirmation ids and undoable call ids.
type Sides = (BTreeSet<String>, BTreeSet<String>);

/// What the trace says should be waiting and undoable, and what state.db
/// has: (pending confirmation ids, undoable call ids), each side.
fn agreement(sb: &Sandbox, conversation: &str) -> (Sides, Sides) {
    let trace = Connection::open(sb.db()).unwrap();
    // Events of rounds that ended on their own (not closed by crash recovery).
    let events: Vec<(String, String, Option<String>)> = trace
        .prepare(
            "SELECT e.event_type, e.payload, e.call_id FROM events e WHERE e.conversation_id = ?1
               AND NOT EXISTS (SELECT 1 FROM events t WHERE t.round_row = e.round_row
                               AND t.event_type = 'round.failed' AND t.failure_code = 'crash.recovered')
             ORDER BY e.round_seq, e.event_seq",
        )
        .unwrap()
        .query_map([conversation], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut waiting = BTreeSet::new();
    let mut undoable = BTreeSet::new();
    for (kind, payload, call_id) in &events {
        let p: serde_json::Value = serde_json::from_str(payload).unwrap();
        match kind.as_str() {
            "confirm.requested" => {
                waiting.clear();
                waiting.insert(p["confirmation_id"].as_str().unwrap().to_owned());
            }
            "confirm.received" => {
                waiting.remove(p["confirmation_id"].as_str().unwrap());
            }
            "command.executed" if p["status"] == "ok" && p["auth_level"] == 2 => {
                undoable.insert(call_id.clone().unwrap());
            }
            "command.reversed" if p["status"] == "ok" => {
                undoable.remove(p["original_call_id"].as_str().unwrap());
            }
            _ => {}
        }
    }
    let state = Connection::open(sb.data().join("state.db")).unwrap();
    let pending: BTreeSet<String> = state
        .prepare("SELECT confirmation_id FROM pending_confirmations WHERE conversation_id = ?1")
        .unwrap()
        .query_map([conversation], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let undo: BTreeSet<String> = state
        .prepare(
            "SELECT call_id FROM undo_records WHERE conversation_id = ?1 AND undone_at_ms IS NULL",
        )
        .unwrap()
        .query_map([conversation], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    ((waiting, undoable), (pending, undo))
}

#[test]
fn a_confirmation_survives_a_crash_at_every_point_of_the_round_boundary() {
    for (point, ended) in POINTS {
        let sb = Sandbox::new();
        say_and_crash(&sb, "c", "unlock the front door", point);
        // The next process reconciles on open, then hears the "yes".
        let yes = sb.say("c", "yes");
        let (trace, state) = agreement(&sb, "c");
        assert_eq!(trace, state, "{point}: state.db and the trace disagree");
        if ended {
            assert_eq!(
                yes["reply"], "The front door is unlocked.",
                "{point}: {yes}"
            );
            assert_eq!(yes["commands"][0]["status"], "ok", "{point}");
        } else {
            assert_eq!(
                yes["reply"], "There's nothing waiting for a confirmation.",
                "{point}: the round that asked never ended, so nothing waits: {yes}"
            );
        }
        let verify = sb.run(&["trace", "verify"]);
        assert_eq!(
            verify.code, 0,
            "{point}: {}{}",
            verify.stdout, verify.stderr
        );
    }
}

#[test]
fn an_undoable_command_survives_a_crash_at_every_point_of_the_round_boundary() {
    for (point, ended) in POINTS {
        let sb = Sandbox::new();
        say_and_crash(&sb, "c", "add milk to the shopping list", point);
        let before = sb
            .run(&[
                "say",
                "--json",
                "--conversation",
                "other",
                "what's on the shopping list",
            ])
            .ok()
            .json();
        // The command ran before the process stopped, whatever the point.
        assert!(
            before["reply"].as_str().unwrap().contains("milk"),
            "{point}: {before}"
        );
        let undo = sb.say("c", "undo");
        let (trace, state) = agreement(&sb, "c");
        assert_eq!(trace, state, "{point}: state.db and the trace disagree");
        if ended {
            assert_eq!(
                undo["reply"], "Undone: add milk to the shopping list.",
                "{point}: {undo}"
            );
        } else {
            assert_eq!(undo["reply"], "There's nothing to undo.", "{point}: {undo}");
        }
    }
}
