//! Timers and reminders that ring, kept in `state.db`: which are running,
//! paused or due, and the claim the scheduler takes on what is due before
//! its firing round is recorded (`Engine::fire_due`, in `round/`). Times of
//! day ("at 6 pm", "tomorrow at 9") are read by `understand::clock`.
//!
//! A firing is claimed (`fired_at_ms`), then recorded as a round, then
//! settled (`fired_round_id`). A claim left unsettled by a crash is released
//! when the next process starts, so a timer rings at least once.

pub mod jobs;

use rusqlite::{Connection, params};
use serde::Serialize;

use crate::command::human_duration;

/// A timer not yet rung nor cancelled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timer {
    pub id: i64,
    pub conversation_id: String,
    pub name: Option<String>,
    /// The length it was set for, in seconds (before any time was added).
    pub seconds: i64,
    pub due_at_ms: i64,
    /// While paused: what was left when it was paused.
    pub paused_left_ms: Option<i64>,
    /// The round that set it.
    pub set_in_round: Option<String>,
}

impl Timer {
    /// What is left, in milliseconds (never below zero).
    pub fn left_ms(&self, now_ms: i64) -> i64 {
        self.paused_left_ms
            .unwrap_or(self.due_at_ms - now_ms)
            .max(0)
    }

    pub fn paused(&self) -> bool {
        self.paused_left_ms.is_some()
    }

    /// How people call it: "pasta timer", "10 minute timer".
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("{name} timer"),
            None => format!(
                "{} timer",
                adjective(u64::try_from(self.seconds).unwrap_or(0))
            ),
        }
    }
}

/// "10 minutes" as it stands before a noun: "10 minute".
pub fn adjective(seconds: u64) -> String {
    human_duration(seconds)
        .split(' ')
        .map(|w| match w {
            "seconds" => "second",
            "minutes" => "minute",
            "hours" => "hour",
            "days" => "day",
            w => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What is left, said the way a person would: exact under a minute, to the
/// second under ten minutes, to the minute above.
pub fn human_left(ms: i64) -> String {
    let s = u64::try_from((ms + 999) / 1000).unwrap_or(0);
    if s >= 600 {
        human_duration((s + 30) / 60 * 60)
    } else {
        human_duration(s)
    }
}

/// What someone asked to be reminded of, said back to them: "take my
/// pills" → "take your pills".
pub fn said_back(what: &str) -> String {
    what.split(' ')
        .map(|w| match w {
            "my" => "your",
            "me" => "you",
            "i" | "I" => "you",
            "i'm" | "I'm" => "you're",
            "myself" => "yourself",
            "mine" => "yours",
            "our" => "your",
            "us" => "you",
            w => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A reminder not yet rung nor cancelled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reminder {
    pub id: i64,
    pub conversation_id: String,
    pub what: String,
    pub due_at_ms: i64,
    /// The round that set it.
    pub set_in_round: Option<String>,
}

fn timer_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Timer> {
    Ok(Timer {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        name: r.get(2)?,
        seconds: r.get(3)?,
        due_at_ms: r.get(4)?,
        paused_left_ms: r.get(5)?,
        set_in_round: r.get(6)?,
    })
}

fn reminder_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Reminder> {
    Ok(Reminder {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        what: r.get(2)?,
        due_at_ms: r.get(3)?,
        set_in_round: r.get(4)?,
    })
}

const REMINDER_COLUMNS: &str = "id, conversation_id, what, due_at_ms, set_in_round FROM reminders";

const TIMER_COLUMNS: &str =
    "id, conversation_id, name, seconds, due_at_ms, paused_left_ms, set_in_round FROM timers";

/// Timers running or paused, of one conversation or all, soonest first.
pub fn timers(c: &Connection, conversation: Option<&str>) -> rusqlite::Result<Vec<Timer>> {
    c.prepare_cached(&format!(
        "SELECT {TIMER_COLUMNS} WHERE fired_at_ms IS NULL AND cancelled = 0
           AND (?1 IS NULL OR conversation_id = ?1)
         ORDER BY paused_left_ms IS NOT NULL, due_at_ms, id"
    ))?
    .query_map([conversation], timer_row)?
    .collect()
}

/// Reminders to come, of one conversation or all, soonest first.
pub fn reminders(c: &Connection, conversation: Option<&str>) -> rusqlite::Result<Vec<Reminder>> {
    c.prepare_cached(&format!(
        "SELECT {REMINDER_COLUMNS}
          WHERE fired_at_ms IS NULL AND cancelled = 0 AND (?1 IS NULL OR conversation_id = ?1)
          ORDER BY due_at_ms, id"
    ))?
    .query_map([conversation], reminder_row)?
    .collect()
}

/// A new running timer; its id.
pub fn add_timer(
    c: &Connection,
    conversation: &str,
    name: Option<&str>,
    seconds: u64,
    now_ms: i64,
    round_id: &str,
) -> rusqlite::Result<i64> {
    let ms = i64::try_from(seconds).unwrap_or(i64::MAX / 2_000) * 1000;
    c.prepare_cached(
        "INSERT INTO timers (schema_version, seconds, due_at_ms, created_at, conversation_id, name, set_in_round)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        crate::trace::SCHEMA_VERSION,
        i64::try_from(seconds).unwrap_or(i64::MAX),
        now_ms + ms,
        crate::trace::now_timestamp(),
        conversation,
        name,
        round_id
    ])?;
    Ok(c.last_insert_rowid())
}

/// A new reminder; its id.
pub fn add_reminder(
    c: &Connection,
    conversation: &str,
    what: &str,
    due_at_ms: i64,
    round_id: &str,
) -> rusqlite::Result<i64> {
    c.prepare_cached(
        "INSERT INTO reminders (schema_version, what, due_at_ms, created_at, conversation_id, set_in_round)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        crate::trace::SCHEMA_VERSION,
        what,
        due_at_ms,
        crate::trace::now_timestamp(),
        conversation,
        round_id
    ])?;
    Ok(c.last_insert_rowid())
}

pub fn cancel_timer(c: &Connection, id: i64) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached(
        "UPDATE timers SET cancelled = 1 WHERE id = ?1 AND cancelled = 0 AND fired_at_ms IS NULL",
    )?
    .execute([id])?
        == 1)
}

pub fn cancel_reminder(c: &Connection, id: i64) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached(
        "UPDATE reminders SET cancelled = 1 WHERE id = ?1 AND cancelled = 0 AND fired_at_ms IS NULL",
    )?
    .execute([id])?
        == 1)
}

/// Pauses a running timer, keeping what is left.
pub fn pause_timer(c: &Connection, t: &Timer, now_ms: i64) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE timers SET paused_left_ms = ?2 WHERE id = ?1 AND paused_left_ms IS NULL",
    )?
    .execute(params![t.id, t.left_ms(now_ms)])?;
    Ok(())
}

/// Runs a paused timer again from what was left.
pub fn resume_timer(c: &Connection, t: &Timer, now_ms: i64) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE timers SET due_at_ms = ?2 + paused_left_ms, paused_left_ms = NULL
          WHERE id = ?1 AND paused_left_ms IS NOT NULL",
    )?
    .execute(params![t.id, now_ms])?;
    Ok(())
}

/// Adds (or, negative, takes away) time; what is left never goes below zero.
pub fn adjust_timer(c: &Connection, t: &Timer, delta_ms: i64, now_ms: i64) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE timers SET due_at_ms = max(?3, due_at_ms + ?2),
                paused_left_ms = CASE WHEN paused_left_ms IS NULL THEN NULL ELSE max(0, paused_left_ms + ?2) END
          WHERE id = ?1",
    )?
    .execute(params![t.id, delta_ms, now_ms])?;
    Ok(())
}

/// What the scheduler rings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Due {
    Timer(Timer),
    Reminder(Reminder),
}

impl Due {
    pub fn due_at_ms(&self) -> i64 {
        match self {
            Due::Timer(t) => t.due_at_ms,
            Due::Reminder(r) => r.due_at_ms,
        }
    }

    pub fn conversation_id(&self) -> &str {
        match self {
            Due::Timer(t) => &t.conversation_id,
            Due::Reminder(r) => &r.conversation_id,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Due::Timer(_) => "timer",
            Due::Reminder(_) => "reminder",
        }
    }

    pub fn id(&self) -> i64 {
        match self {
            Due::Timer(t) => t.id,
            Due::Reminder(r) => r.id,
        }
    }

    /// What is said when it rings; `late_ms` past its due time says so.
    pub fn announcement(&self, late_ms: i64) -> String {
        let said = match self {
            Due::Timer(t) => format!("Your {} is done.", t.label()),
            Due::Reminder(r) => format!("Reminder: {}.", said_back(r.what.trim_end_matches('.'))),
        };
        if late_ms >= LATE_MS {
            format!(
                "{said} It was due {} ago, while CAAL was not running.",
                human_left(late_ms)
            )
        } else {
            said
        }
    }
}

/// Rung this much after its due time, a firing says it is late.
pub const LATE_MS: i64 = 2_000;

/// When the next timer or reminder is due, if any.
pub fn next_due_ms(c: &Connection) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached(
        "SELECT min(d) FROM (
           SELECT min(due_at_ms) AS d FROM timers WHERE fired_at_ms IS NULL AND cancelled = 0 AND paused_left_ms IS NULL
           UNION ALL
           SELECT min(due_at_ms) FROM reminders WHERE fired_at_ms IS NULL AND cancelled = 0)",
    )?
    .query_row([], |r| r.get(0))
}

/// Claims up to `limit` of what is due at `now_ms`, in due order (call in a
/// transaction: the claim and the read are one).
pub fn claim_due(c: &Connection, now_ms: i64, limit: usize) -> rusqlite::Result<Vec<Due>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut due: Vec<Due> = c
        .prepare_cached(&format!(
            "SELECT {TIMER_COLUMNS} WHERE fired_at_ms IS NULL AND cancelled = 0 AND paused_left_ms IS NULL
               AND due_at_ms <= ?1 ORDER BY due_at_ms, id LIMIT ?2"
        ))?
        .query_map(params![now_ms, limit], timer_row)?
        .map(|t| t.map(Due::Timer))
        .collect::<rusqlite::Result<_>>()?;
    due.extend(
        c.prepare_cached(&format!(
            "SELECT {REMINDER_COLUMNS}
              WHERE fired_at_ms IS NULL AND cancelled = 0 AND due_at_ms <= ?1
              ORDER BY due_at_ms, id LIMIT ?2"
        ))?
        .query_map(params![now_ms, limit], |r| {
            reminder_row(r).map(Due::Reminder)
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?,
    );
    due.sort_by_key(|d| (d.due_at_ms(), d.kind(), d.id()));
    due.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    for d in &due {
        c.prepare_cached(&format!(
            "UPDATE {}s SET fired_at_ms = ?2 WHERE id = ?1",
            d.kind()
        ))?
        .execute(params![d.id(), now_ms])?;
    }
    Ok(due)
}

/// The firing round of a claimed timer or reminder is durable.
pub fn settle(c: &Connection, due: &Due, round_id: &str) -> rusqlite::Result<()> {
    c.prepare_cached(&format!(
        "UPDATE {}s SET fired_round_id = ?2 WHERE id = ?1",
        due.kind()
    ))?
    .execute(params![due.id(), round_id])?;
    Ok(())
}

/// Claims a crash left without their round, released to ring again.
pub fn release_unsettled(c: &Connection) -> rusqlite::Result<usize> {
    let mut n = 0;
    for table in ["timers", "reminders"] {
        n += c.execute(
            &format!(
                "UPDATE {table} SET fired_at_ms = NULL WHERE fired_at_ms IS NOT NULL AND fired_round_id IS NULL"
            ),
            [],
        )?;
    }
    Ok(n)
}

/// Which timers a request means: by name, by the length it was set for, or
/// (neither said) all of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector {
    pub name: Option<String>,
    pub start_seconds: Option<u64>,
}

impl Selector {
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.start_seconds.is_none()
    }

    /// The timers this selects among `timers`.
    pub fn select<'t>(&self, timers: &'t [Timer]) -> Vec<&'t Timer> {
        let name = self.name.as_deref().map(name_key);
        timers
            .iter()
            .filter(|t| {
                name.as_deref().is_none_or(|n| {
                    t.name.as_deref().map(name_key).as_deref() == Some(n)
                        // "the 10 minute timer" said as a name
                        || crate::command::parse_duration(n)
                            .is_some_and(|s| i64::try_from(s) == Ok(t.seconds))
                }) && self
                    .start_seconds
                    .is_none_or(|s| i64::try_from(s) == Ok(t.seconds))
            })
            .collect()
    }

    /// How the person named it, for "there is no … timer".
    pub fn said(&self) -> String {
        match (&self.name, self.start_seconds) {
            (Some(n), _) => format!("{} timer", name_key(n)),
            (None, Some(s)) => format!("{} timer", adjective(s)),
            (None, None) => "timer".into(),
        }
    }
}

/// A timer's name as compared: lower case, without "the", "my" or a trailing "timer".
pub fn name_key(name: &str) -> String {
    let n = crate::understand::normalize(name);
    let n = n
        .strip_prefix("the ")
        .or_else(|| n.strip_prefix("my "))
        .unwrap_or(&n);
    n.strip_suffix(" timer").unwrap_or(n).trim().to_owned()
}

#[cfg(test)]
mod tests;
