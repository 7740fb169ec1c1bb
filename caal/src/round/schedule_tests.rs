//! Timers and reminders said as people say them, rung by the scheduler as
//! rounds of their own: on real SQLite files, with the sentence library the
//! setup installs and a hand-turned clock.

use std::sync::Arc;

use serde_json::json;

use super::tests::{Home, START_MS};
use crate::config::Config;

/// The engine with the installed sentence library (found as the CLI finds it).
fn home_with(config: Config) -> Home {
    let env: crate::tools::EnvLookup = Arc::new(|k| {
        matches!(
            k,
            "HOME" | "XDG_DATA_HOME" | "CAAL_MODELS_DIR" | "CAAL_INTENTS_DIR"
        )
        .then(|| std::env::var(k).ok())
        .flatten()
    });
    let home = Home::with(config, env);
    assert!(
        home.engine
            .router()
            .library()
            .origin
            .starts_with("home-assistant-intents"),
        "the sentence library is not installed: run `bash .ci/setup`"
    );
    home
}

fn home() -> Home {
    home_with(Config::defaults().unwrap())
}

const MIN: i64 = 60_000;

#[test]
fn timers_are_set_named_paused_resumed_extended_asked_about_and_cancelled() {
    let h = home();
    assert_eq!(
        h.say("k", "set a timer for 10 minutes").reply,
        "Timer set for 10 minutes."
    );
    assert_eq!(
        h.say("k", "set a pasta timer for 8 minutes").reply,
        "Pasta timer set for 8 minutes."
    );
    h.clock.advance(2 * MIN);
    assert_eq!(
        h.say("k", "how much time is left on my timers").reply,
        "2 timers: the pasta timer (6 minutes left) and the 10 minute timer (8 minutes left)."
    );
    // Two run and nothing says which: asked, nothing done.
    let r = h.say("k", "cancel the timer");
    assert_eq!(r.status, "failed");
    assert!(
        r.reply.contains("there are 2 timers, the pasta timer (6 minutes left) and the 10 minute timer (8 minutes left); say which"),
        "{}",
        r.reply
    );
    assert_eq!(
        h.say("k", "pause the pasta timer").reply,
        "Pasta timer paused, with 6 minutes left."
    );
    h.clock.advance(5 * MIN);
    // A paused timer keeps what it had left.
    assert_eq!(
        h.say("k", "how long is left on the pasta timer").reply,
        "6 minutes left on your pasta timer, which is paused."
    );
    // Only one is paused: "resume the timer" means it.
    assert_eq!(
        h.say("k", "resume the timer").reply,
        "Pasta timer resumed, with 6 minutes left."
    );
    assert_eq!(
        h.say("k", "add 5 minutes to the pasta timer").reply,
        "Added 5 minutes to the pasta timer: 11 minutes left."
    );
    assert_eq!(
        h.say("k", "take 2 minutes off the 10 minute timer").reply,
        "Took 2 minutes off the 10 minute timer: 1 minute left."
    );
    // Another conversation's timers are its own.
    assert_eq!(
        h.say("other", "how much time is left on my timers").reply,
        "There are no timers running."
    );
    assert_eq!(
        h.say("k", "cancel the pasta timer").reply,
        "Pasta timer cancelled."
    );
    assert_eq!(
        h.say("k", "cancel all timers").reply,
        "10 minute timer cancelled."
    );
    assert!(h.engine.scheduled(None).unwrap().timers.is_empty());
}

#[test]
fn a_due_timer_rings_as_a_round_of_its_conversation_once() {
    let h = home();
    let mut rang = h.engine.notifications();
    let set = h.say("kitchen", "set an egg timer for 7 minutes");
    assert_eq!(set.reply, "Egg timer set for 7 minutes.");
    h.clock.advance(7 * MIN - 1);
    assert!(h.engine.fire_due().unwrap().is_empty(), "not due yet");
    h.clock.advance(1);
    let fired = h.engine.fire_due().unwrap();
    assert_eq!(fired.len(), 1);
    let n = &fired[0];
    assert_eq!(
        (
            n.conversation_id.as_str(),
            n.kind,
            n.text.as_str(),
            n.late_ms
        ),
        ("kitchen", "timer", "Your egg timer is done.", 0)
    );
    assert_eq!(
        rang.try_recv().unwrap(),
        *n,
        "clients of the conversation are told"
    );
    // Rung once only.
    h.clock.advance(MIN);
    assert!(h.engine.fire_due().unwrap().is_empty());
    // The ringing is a round in the chain: system channel, its events, its reply.
    let reader = h.engine.store().reader();
    let (round, events) = reader.round(&n.round_id).unwrap().unwrap();
    assert_eq!(round.channel, "system");
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "round.started",
            "input.received",
            "schedule.fired",
            "output.emitted",
            "round.completed"
        ]
    );
    let fired = super::tests::payload(&events[2]);
    assert_eq!(fired["kind"], "timer");
    assert_eq!(fired["name"], "egg");
    assert_eq!(fired["seconds"], 420);
    assert_eq!(fired["set_in_round"], json!(set.round_id));
    assert_eq!(
        super::tests::payload(&events[3])["text"],
        "Your egg timer is done."
    );
    assert!(reader.verify(None).unwrap().ok);
}

#[test]
fn what_came_due_while_caal_was_down_rings_at_start_saying_how_late() {
    let h = home();
    h.say("default", "set a timer for 2 minutes");
    h.say("default", "remind me to take the bread out in 3 minutes");
    let h = h.restart();
    h.clock.advance(10 * MIN);
    let fired = h.engine.fire_due().unwrap();
    let said: Vec<(&str, &str, i64)> = fired
        .iter()
        .map(|n| (n.kind, n.text.as_str(), n.late_ms))
        .collect();
    assert_eq!(
        said,
        [
            (
                "timer",
                "Your 2 minute timer is done. It was due 8 minutes ago, while CAAL was not running.",
                8 * MIN
            ),
            (
                "reminder",
                "Reminder: take the bread out. It was due 7 minutes ago, while CAAL was not running.",
                7 * MIN
            ),
        ]
    );
}

#[test]
fn a_claim_a_crash_left_without_its_round_rings_again_after_restart() {
    let h = home();
    h.say("default", "set a timer for 1 minute");
    h.clock.advance(MIN);
    // The scheduler claimed it, then the process died before its round was written.
    let claimed = h
        .engine
        .state()
        .transaction(|c| crate::schedule::claim_due(c, START_MS + MIN, 10))
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(
        h.engine.fire_due().unwrap().is_empty(),
        "claimed: not rung twice"
    );
    let h = h.restart();
    let scheduler = h.engine.start_scheduler().unwrap();
    let mut rang = h.engine.notifications();
    let n = rang.blocking_recv().unwrap();
    drop(scheduler);
    assert_eq!(n.text, "Your 1 minute timer is done.");
    assert_eq!(
        h.of_type("default", "schedule.fired").len(),
        1,
        "one ringing recorded"
    );
}

#[test]
fn reminders_at_a_time_of_day_come_in_the_configured_zone() {
    let mut config = Config::defaults().unwrap();
    config.schedule.time_zone = "Europe/Berlin".into();
    let h = home_with(config);
    // START_MS is 2027-01-15 08:00 UTC: 09:00 in Berlin.
    let r = h.say("default", "remind me to call mom at 6 pm");
    assert_eq!(r.reply, "I'll remind you to call mom at 6 pm.");
    let r = h.say("default", "remind me tomorrow at 9 to water the plants");
    assert_eq!(
        r.reply,
        "I'll remind you to water the plants tomorrow at 9 am."
    );
    let r = h.say("default", "remind me at half past eight to feed the cat");
    assert_eq!(r.reply, "I'll remind you to feed the cat at 8:30 pm.");
    let due: Vec<(String, String)> = h
        .engine
        .scheduled(None)
        .unwrap()
        .reminders
        .into_iter()
        .map(|r| (r.reminder.what, r.due_at))
        .collect();
    assert_eq!(
        due,
        [
            ("call mom".to_owned(), "2027-01-15T17:00:00.000Z".to_owned()),
            (
                "feed the cat".to_owned(),
                "2027-01-15T19:30:00.000Z".to_owned()
            ),
            (
                "water the plants".to_owned(),
                "2027-01-16T08:00:00.000Z".to_owned()
            ),
        ]
    );
    h.clock.advance(9 * 60 * MIN);
    let fired = h.engine.fire_due().unwrap();
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].text, "Reminder: call mom.");
    // Said back to the person; an alarm is a reminder to wake up; listed and cancelled by what.
    assert_eq!(
        h.say("default", "remind me at 9 pm to take my pills").reply,
        "I'll remind you to take your pills at 9 pm."
    );
    assert_eq!(
        h.say("default", "set an alarm for 6:45 am").reply,
        "I'll remind you to wake up tomorrow at 6:45 am."
    );
    assert_eq!(
        h.say("default", "what are my reminders").reply,
        "4 reminders: feed the cat at 8:30 pm, take your pills at 9 pm, wake up tomorrow at 6:45 am and water the plants tomorrow at 9 am."
    );
    let r = h.say("default", "cancel the reminder");
    assert_eq!(r.status, "failed", "four: it asks which");
    assert_eq!(
        h.say("default", "cancel the reminder to feed the cat")
            .reply,
        "I won't remind you to feed the cat."
    );
    // "Don't remind me to …" cancels that reminder rather than only saying it won't.
    assert_eq!(
        h.say("default", "don't remind me to take my pills").reply,
        "I won't remind you to take your pills."
    );
    assert_eq!(h.engine.scheduled(None).unwrap().reminders.len(), 2);
    assert_eq!(
        h.say("default", "don't unlock the front door").reply,
        "Okay, I won't unlock the front door."
    );
    assert_eq!(
        h.say("default", "remind me to call the plumber").reply,
        "I couldn't remind you to call the plumber: say when: \"in 20 minutes\" or \"at 6 pm\"."
    );
    assert_eq!(
        h.say("default", "set a timer").reply,
        "I can't do that: say how long, for example \"for 10 minutes\"."
    );
}

#[test]
fn an_operator_cancels_by_id_and_the_conversation_records_it() {
    let h = home();
    h.say("hall", "set a laundry timer for 40 minutes");
    let id = h.engine.scheduled(None).unwrap().timers[0].timer.id;
    let said = h
        .engine
        .cancel_scheduled("timer", id, super::Channel::Cli)
        .unwrap();
    assert_eq!(said.as_deref(), Some("The laundry timer was cancelled."));
    assert_eq!(
        h.of_type("hall", "schedule.cancelled"),
        [json!({"kind": "timer", "id": id, "name": "laundry", "by": "cli"})]
    );
    assert_eq!(
        h.engine
            .cancel_scheduled("timer", id, super::Channel::Cli)
            .unwrap(),
        None
    );
    h.clock.advance(60 * MIN);
    assert!(h.engine.fire_due().unwrap().is_empty());
}
