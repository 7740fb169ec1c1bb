//! The schedule on a real state.db: what is due, claimed, settled, released.

use super::*;
use crate::state::StateDb;

fn db() -> (tempfile::TempDir, StateDb) {
    let dir = tempfile::tempdir().unwrap();
    let db = StateDb::open(&dir.path().join("state.db")).unwrap();
    (dir, db)
}

#[test]
fn due_things_are_claimed_in_due_order_once_and_released_after_a_crash() {
    let (_dir, db) = db();
    let (a, b, r) = db
        .transaction(|c| {
            Ok((
                add_timer(c, "k", Some("pasta"), 60, 1_000, "r1")?,
                add_timer(c, "k", None, 30, 1_000, "r2")?,
                add_reminder(c, "hall", "call mom", 45_000, "r3")?,
            ))
        })
        .unwrap();
    assert_eq!(db.with(next_due_ms).unwrap(), Some(31_000));
    assert!(
        db.transaction(|c| claim_due(c, 30_999, 10))
            .unwrap()
            .is_empty()
    );
    let due = db.transaction(|c| claim_due(c, 61_000, 10)).unwrap();
    let order: Vec<(&str, i64)> = due.iter().map(|d| (d.kind(), d.id())).collect();
    assert_eq!(order, [("timer", b), ("reminder", r), ("timer", a)]);
    // Claimed: not claimed again, and no longer "to come".
    assert!(
        db.transaction(|c| claim_due(c, 99_000, 10))
            .unwrap()
            .is_empty()
    );
    assert!(db.with(|c| timers(c, None)).unwrap().is_empty());
    assert_eq!(db.with(next_due_ms).unwrap(), None);
    // Two settled; the third's round never made it (a crash): released.
    db.transaction(|c| {
        settle(c, &due[0], "round-b")?;
        settle(c, &due[1], "round-r")
    })
    .unwrap();
    assert_eq!(db.transaction(release_unsettled).unwrap(), 1);
    let again = db.transaction(|c| claim_due(c, 99_000, 10)).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id(), a);
}

#[test]
fn a_batch_takes_the_soonest_and_leaves_the_rest() {
    let (_dir, db) = db();
    db.transaction(|c| {
        for i in 0..10 {
            add_timer(c, "k", None, 10 - i, 0, "r")?;
        }
        Ok(())
    })
    .unwrap();
    let first = db.transaction(|c| claim_due(c, 20_000, 4)).unwrap();
    let secs: Vec<i64> = first
        .iter()
        .map(|d| match d {
            Due::Timer(t) => t.seconds,
            Due::Reminder(_) => -1,
        })
        .collect();
    assert_eq!(secs, [1, 2, 3, 4]);
    assert_eq!(
        db.transaction(|c| claim_due(c, 20_000, 100)).unwrap().len(),
        6
    );
}

#[test]
fn paused_timers_keep_what_was_left_and_do_not_come_due() {
    let (_dir, db) = db();
    let id = db
        .transaction(|c| add_timer(c, "k", None, 600, 0, "r"))
        .unwrap();
    let t = |db: &StateDb| db.with(|c| timers(c, None)).unwrap().remove(0);
    let running = t(&db);
    db.transaction(|c| pause_timer(c, &running, 100_000))
        .unwrap();
    let paused = t(&db);
    assert!(paused.paused());
    assert_eq!(paused.left_ms(10_000_000), 500_000);
    assert!(
        db.transaction(|c| claim_due(c, 10_000_000, 10))
            .unwrap()
            .is_empty()
    );
    db.transaction(|c| adjust_timer(c, &paused, -100_000, 10_000_000))
        .unwrap();
    let shortened = t(&db);
    db.transaction(|c| resume_timer(c, &shortened, 10_000_000))
        .unwrap();
    let running = t(&db);
    assert_eq!((running.id, running.paused()), (id, false));
    assert_eq!(running.due_at_ms, 10_400_000);
    // Taking away more than is left makes it due now, never in the past.
    db.transaction(|c| adjust_timer(c, &running, -1_000_000, 10_100_000))
        .unwrap();
    assert_eq!(t(&db).due_at_ms, 10_100_000);
}

#[test]
fn timers_are_told_apart_by_name_or_length() {
    let t = |id, name: Option<&str>, seconds| Timer {
        id,
        conversation_id: "k".into(),
        name: name.map(str::to_owned),
        seconds,
        due_at_ms: 0,
        paused_left_ms: None,
        set_in_round: None,
    };
    let all = [
        t(1, Some("pasta"), 480),
        t(2, None, 600),
        t(3, Some("Egg"), 300),
    ];
    let ids = |s: Selector| s.select(&all).iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(Selector::default()), [1, 2, 3]);
    assert_eq!(
        ids(Selector {
            name: Some("the pasta timer".into()),
            start_seconds: None
        }),
        [1]
    );
    assert_eq!(
        ids(Selector {
            name: Some("egg".into()),
            start_seconds: None
        }),
        [3]
    );
    // "the 10 minute timer", whether read as a name or as a length.
    assert_eq!(
        ids(Selector {
            name: Some("10 minute".into()),
            start_seconds: None
        }),
        [2]
    );
    assert_eq!(
        ids(Selector {
            name: None,
            start_seconds: Some(600)
        }),
        [2]
    );
    assert!(
        ids(Selector {
            name: Some("rice".into()),
            start_seconds: None
        })
        .is_empty()
    );
    assert_eq!(all[1].label(), "10 minute timer");
    assert_eq!(t(4, None, 5400).label(), "1 hour 30 minute timer");
    assert_eq!(human_left(61_000), "1 minute 1 second");
    assert_eq!(human_left(754_000), "13 minutes");
}

#[test]
fn a_ringing_says_when_it_is_late() {
    let timer = Due::Timer(Timer {
        id: 1,
        conversation_id: "k".into(),
        name: None,
        seconds: 600,
        due_at_ms: 0,
        paused_left_ms: None,
        set_in_round: None,
    });
    assert_eq!(timer.announcement(150), "Your 10 minute timer is done.");
    assert_eq!(
        timer.announcement(3 * 60_000),
        "Your 10 minute timer is done. It was due 3 minutes ago, while CAAL was not running."
    );
    let reminder = Due::Reminder(Reminder {
        id: 1,
        conversation_id: "k".into(),
        what: "call mom.".into(),
        due_at_ms: 0,
        set_in_round: None,
    });
    assert_eq!(reminder.announcement(0), "Reminder: call mom.");
}
