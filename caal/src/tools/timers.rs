//! The built-in timers and reminders: set, cancel one or all, pause,
//! resume, add or take away time, say what is left; remind in a while or at
//! a time of day. Each works on the timers of the conversation that asks;
//! the scheduler (`round::schedule`) rings them.

use jiff::tz::TimeZone;
use rusqlite::Connection;
use serde_json::json;

use super::{ToolCall, ToolOutcome};
use crate::{
    command::{ParamValue, human_duration},
    schedule::{self, Selector, Timer, human_left},
    state::rfc3339_ms,
    understand::clock,
};

pub const COMMANDS: &[&str] = &[
    "timer.set",
    "timer.cancel",
    "timer.cancel_all",
    "timer.pause",
    "timer.resume",
    "timer.add",
    "timer.subtract",
    "timer.status",
    "reminder.add",
    "reminder.list",
    "reminder.cancel",
    "clock.now",
];

fn seconds(call: &ToolCall<'_>, name: &str) -> Option<u64> {
    match call.command.params.get(name) {
        Some(ParamValue::Seconds(s)) if *s > 0 => Some(*s),
        _ => None,
    }
}

fn selector(call: &ToolCall<'_>) -> Selector {
    Selector {
        name: call.text("name").map(schedule::name_key),
        start_seconds: seconds(call, "start"),
    }
}

/// "the pasta timer (3 minutes left)", "the 10 minute timer (paused, 7 minutes left)".
fn described(t: &Timer, now_ms: i64) -> String {
    format!(
        "the {} ({}{} left)",
        t.label(),
        if t.paused() { "paused, " } else { "" },
        human_left(t.left_ms(now_ms))
    )
}

fn listed(timers: &[&Timer], now_ms: i64) -> String {
    let parts: Vec<String> = timers.iter().map(|t| described(t, now_ms)).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    crate::command::join_with(&parts, "and")
}

/// The one timer a request means, or why it cannot be told. Where nothing
/// names it, `fits` narrows the choice (pausing means a running one).
fn pick<'t>(
    timers: &'t [Timer],
    sel: &Selector,
    fits: impl Fn(&Timer) -> bool,
    now_ms: i64,
) -> Result<&'t Timer, String> {
    if timers.is_empty() {
        return Err("there is no timer running".into());
    }
    let all: Vec<&Timer> = timers.iter().collect();
    let mut found = sel.select(timers);
    if found.is_empty() {
        let there = if all.len() == 1 {
            "there is"
        } else {
            "there are"
        };
        return Err(format!(
            "there is no {}; {there} {}",
            sel.said(),
            listed(&all, now_ms)
        ));
    }
    if found.len() > 1 && sel.is_empty() {
        let fitting: Vec<&Timer> = found.iter().copied().filter(|t| fits(t)).collect();
        match fitting.as_slice() {
            [one] => return Ok(one),
            _ => {
                return Err(format!(
                    "there are {} timers, {}; say which",
                    found.len(),
                    listed(&found, now_ms)
                ));
            }
        }
    }
    // Named alike ("the 5 minute timer" twice): the one that rings first.
    found.sort_by_key(|t| t.left_ms(now_ms));
    Ok(found[0])
}

fn capitalised_label(t: &Timer) -> String {
    crate::auth::capitalise(&t.label())
}

/// Runs a timer or reminder command inside the caller's transaction.
pub fn run_in(c: &Connection, call: &ToolCall<'_>, tz: &TimeZone) -> rusqlite::Result<ToolOutcome> {
    let now = call.now_ms;
    let conversation = call.conversation_id;
    let id = call.command.command_id.as_str();
    match id {
        "clock.now" => return Ok(clock_now(call, tz)),
        "reminder.add" => return remind(c, call, tz),
        "reminder.list" | "reminder.cancel" => return reminders(c, call, tz),
        _ => {}
    }
    let timers = schedule::timers(c, Some(conversation))?;
    let sel = selector(call);
    Ok(match id {
        "timer.set" => {
            let s = seconds(call, "duration").unwrap_or(0);
            let name = call
                .text("name")
                .map(schedule::name_key)
                .filter(|n| !n.is_empty());
            let timer_id =
                schedule::add_timer(c, conversation, name.as_deref(), s, now, call.round_id)?;
            let message = match &name {
                Some(n) => format!(
                    "{} timer set for {}.",
                    crate::auth::capitalise(n),
                    human_duration(s)
                ),
                None => format!("Timer set for {}.", human_duration(s)),
            };
            ToolOutcome::ok(
                json!({"timer_id": timer_id, "name": name, "seconds": s, "due_at": rfc3339_ms(now + i64::try_from(s).unwrap_or(0) * 1000)}),
                message,
            )
        }
        "timer.cancel_all" => {
            for t in &timers {
                schedule::cancel_timer(c, t.id)?;
            }
            let message = match timers.len() {
                0 => "There were no timers.".to_owned(),
                1 => format!("{} cancelled.", capitalised_label(&timers[0])),
                n => format!("All {n} timers are cancelled."),
            };
            let ids: Vec<i64> = timers.iter().map(|t| t.id).collect();
            ToolOutcome::ok(json!({"cancelled": ids}), message)
        }
        "timer.status" => {
            let found = if sel.is_empty() {
                timers.iter().collect()
            } else {
                sel.select(&timers)
            };
            let message = match found.as_slice() {
                [] if timers.is_empty() => "There are no timers running.".to_owned(),
                [] => format!(
                    "There is no {}; {} {}.",
                    sel.said(),
                    if timers.len() == 1 {
                        "there is"
                    } else {
                        "there are"
                    },
                    listed(&timers.iter().collect::<Vec<_>>(), now)
                ),
                [t] => format!(
                    "{} left on your {}{}.",
                    crate::auth::capitalise(&human_left(t.left_ms(now))),
                    t.label(),
                    if t.paused() { ", which is paused" } else { "" }
                ),
                many => format!("{} timers: {}.", many.len(), listed(many, now)),
            };
            let left: Vec<_> = found
                .iter()
                .map(|t| json!({"timer_id": t.id, "name": t.name, "left_ms": t.left_ms(now), "paused": t.paused()}))
                .collect();
            ToolOutcome::ok(json!({"timers": left}), message)
        }
        "timer.cancel" | "timer.pause" | "timer.resume" | "timer.add" | "timer.subtract" => {
            let fits = |t: &Timer| match id {
                "timer.pause" => !t.paused(),
                "timer.resume" => t.paused(),
                _ => true,
            };
            let t = match pick(&timers, &sel, fits, now) {
                Ok(t) => t,
                Err(why) => return Ok(ToolOutcome::failed(why, false)),
            };
            let label = capitalised_label(t);
            let message = match id {
                "timer.cancel" => {
                    schedule::cancel_timer(c, t.id)?;
                    format!("{label} cancelled.")
                }
                "timer.pause" if t.paused() => format!(
                    "{label} is already paused, with {} left.",
                    human_left(t.left_ms(now))
                ),
                "timer.pause" => {
                    schedule::pause_timer(c, t, now)?;
                    format!("{label} paused, with {} left.", human_left(t.left_ms(now)))
                }
                "timer.resume" if !t.paused() => format!(
                    "{label} is already running, with {} left.",
                    human_left(t.left_ms(now))
                ),
                "timer.resume" => {
                    schedule::resume_timer(c, t, now)?;
                    format!("{label} resumed, with {} left.", human_left(t.left_ms(now)))
                }
                _ => {
                    let s = seconds(call, "duration").unwrap_or(0);
                    let delta = i64::try_from(s).unwrap_or(0) * 1000;
                    let delta = if id == "timer.add" { delta } else { -delta };
                    schedule::adjust_timer(c, t, delta, now)?;
                    let left = (t.left_ms(now) + delta).max(0);
                    if id == "timer.add" {
                        format!(
                            "Added {} to the {}: {} left.",
                            human_duration(s),
                            t.label(),
                            human_left(left)
                        )
                    } else if left == 0 {
                        format!(
                            "Took {} off the {}: it is done.",
                            human_duration(s),
                            t.label()
                        )
                    } else {
                        format!(
                            "Took {} off the {}: {} left.",
                            human_duration(s),
                            t.label(),
                            human_left(left)
                        )
                    }
                }
            };
            ToolOutcome::ok(json!({"timer_id": t.id, "name": t.name}), message)
        }
        other => ToolOutcome::failed(format!("{other} has no built-in executor"), false),
    })
}

/// "remind me to call mom in 20 minutes" / "at 6 pm".
fn remind(c: &Connection, call: &ToolCall<'_>, tz: &TimeZone) -> rusqlite::Result<ToolOutcome> {
    let now = call.now_ms;
    let what = call.text("what").unwrap_or("").trim().trim_end_matches('.');
    let at = call.text("at").map(str::parse::<clock::TimeOfDay>);
    let (due, when) = match (seconds(call, "duration"), at) {
        (Some(s), _) => (
            now + i64::try_from(s).unwrap_or(i64::MAX / 4_000) * 1000,
            format!("in {}", human_duration(s)),
        ),
        (None, Some(Ok(t))) => match clock::next_at(t, now, tz) {
            Some(due) => (due, clock::describe(due, now, tz)),
            None => {
                return Ok(ToolOutcome::failed(
                    format!("{t} does not come in this time zone"),
                    false,
                ));
            }
        },
        (None, Some(Err(why))) => return Ok(ToolOutcome::failed(why, false)),
        (None, None) => {
            return Ok(ToolOutcome::failed(
                "say when: \"in 20 minutes\" or \"at 6 pm\"".to_owned(),
                false,
            ));
        }
    };
    let id = schedule::add_reminder(c, call.conversation_id, what, due, call.round_id)?;
    Ok(ToolOutcome::ok(
        json!({"reminder_id": id, "due_at": rfc3339_ms(due), "time_zone": tz.iana_name()}),
        format!("I'll remind you to {} {when}.", schedule::said_back(what)),
    ))
}

/// "what are my reminders", "cancel the reminder [to call mom]".
fn reminders(c: &Connection, call: &ToolCall<'_>, tz: &TimeZone) -> rusqlite::Result<ToolOutcome> {
    let now = call.now_ms;
    let all = schedule::reminders(c, Some(call.conversation_id))?;
    let described = |r: &schedule::Reminder| {
        format!(
            "{} {}",
            schedule::said_back(&r.what),
            clock::describe(r.due_at_ms, now, tz)
        )
    };
    let listed = |rs: &[&schedule::Reminder]| {
        let parts: Vec<String> = rs.iter().map(|r| described(r)).collect();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        crate::command::join_with(&parts, "and")
    };
    let every: Vec<&schedule::Reminder> = all.iter().collect();
    if call.command.command_id == "reminder.list" {
        let message = match every.as_slice() {
            [] => "You have no reminders.".to_owned(),
            [one] => format!("One reminder: {}.", described(one)),
            many => format!("{} reminders: {}.", many.len(), listed(many)),
        };
        let ids: Vec<i64> = all.iter().map(|r| r.id).collect();
        return Ok(ToolOutcome::ok(json!({"reminders": ids}), message));
    }
    let wanted = call.text("what").map(crate::understand::normalize);
    let found: Vec<&schedule::Reminder> = every
        .iter()
        .copied()
        .filter(|r| {
            wanted.as_deref().is_none_or(|w| {
                let have = crate::understand::normalize(&r.what);
                have.contains(w) || w.contains(have.as_str())
            })
        })
        .collect();
    Ok(match (found.as_slice(), every.len()) {
        (_, 0) => ToolOutcome::failed("you have no reminders".to_owned(), false),
        ([], _) => ToolOutcome::failed(
            format!("no reminder is about that; you have {}", listed(&every)),
            false,
        ),
        ([one], _) => {
            schedule::cancel_reminder(c, one.id)?;
            ToolOutcome::ok(
                json!({"reminder_id": one.id}),
                format!("I won't remind you to {}.", schedule::said_back(&one.what)),
            )
        }
        (many, _) => ToolOutcome::failed(
            format!(
                "you have {} reminders, {}; say which",
                many.len(),
                listed(many)
            ),
            false,
        ),
    })
}

/// "What time is it", "what's the date": the time or date where the home
/// is (`time_zone`), or in a `place` named by a city of the time zone
/// database ("what time is it in Tokyo": Asia/Tokyo).
fn clock_now(call: &ToolCall<'_>, tz: &TimeZone) -> ToolOutcome {
    let Ok(now) = jiff::Timestamp::from_millisecond(call.now_ms) else {
        return ToolOutcome::ok(json!({}), "I can't tell the time: the clock is unreadable.");
    };
    let place = call.text("place").map(str::trim).filter(|p| !p.is_empty());
    let (zone, there) = match place {
        None => (tz.clone(), String::new()),
        Some(place) => match zone_of(place) {
            Some((name, zone)) => (zone, format!(" in {}", city_of(&name))),
            None => {
                // Said as a name is written ("springfield": Springfield).
                let named: Vec<String> = place.split(' ').map(crate::auth::capitalise).collect();
                return ToolOutcome::ok(
                    json!({"place": place, "zone": null}),
                    format!(
                        "I don't know which time zone {} is in; name a city of it, like Tokyo or New York.",
                        named.join(" ")
                    ),
                );
            }
        },
    };
    let now = now.to_zoned_datetime(zone.clone());
    let (what, message) = match call.text("what") {
        Some("date") => (
            "date",
            format!("It's {}{there}.", now.strftime("%A %-d %B %Y")),
        ),
        _ => (
            "time",
            format!("It's {}{there}.", clock::spoken_clock(&now)),
        ),
    };
    ToolOutcome::ok(
        json!({"what": what, "zone": zone.iana_name(),
               "now": now.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()}),
        message,
    )
}

/// The time zone a city names: the database's zone whose last part is that
/// city ("new york": America/New_York), as said in any case.
fn zone_of(place: &str) -> Option<(String, TimeZone)> {
    let said = crate::understand::normalize(place);
    let said = said.strip_prefix("the ").unwrap_or(&said);
    let name = jiff::tz::db().available().find(|name| {
        let name = name.as_str();
        name.contains('/') && city_of(name).to_lowercase() == said
    })?;
    let zone = jiff::tz::db().get(name.as_str()).ok()?;
    Some((name.as_str().to_owned(), zone))
}

/// "America/New_York" -> "New York".
fn city_of(zone: &str) -> String {
    zone.rsplit('/').next().unwrap_or(zone).replace('_', " ")
}
