//! The built-in home: lights, thermostat, doors, garage, timers, reminders
//! and the shopping list, kept in `state.db`. It is what the default
//! configuration controls out of the box; real devices are reached through
//! Home Assistant or a webhook instead.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;

use super::{ToolCall, ToolOutcome};
use crate::{
    command::ParamValue,
    trace::{SCHEMA_VERSION, now_timestamp},
};

pub const COMMANDS: &[&str] = &[
    "lights.set",
    "lights.brightness",
    "light.set",
    "light.brightness",
    "thermostat.set",
    "thermostat.adjust",
    "shopping.add",
    "shopping.remove",
    "shopping.list",
    "shopping.clear",
    "home.status",
    "home.state",
    "mode.set",
    "door.lock",
    "door.unlock",
    "garage.open",
    "garage.close",
];

pub fn supports(command_id: &str) -> bool {
    COMMANDS.contains(&command_id) || super::timers::COMMANDS.contains(&command_id)
}

fn text<'a>(call: &'a ToolCall<'_>, name: &str) -> &'a str {
    call.text(name).unwrap_or("")
}

fn number(call: &ToolCall<'_>, name: &str) -> f64 {
    match call.command.params.get(name) {
        Some(ParamValue::Number(x)) => *x,
        Some(ParamValue::Integer(n)) => *n as f64,
        Some(ParamValue::Seconds(s)) => *s as f64,
        _ => 0.0,
    }
}

/// Runs a built-in command inside the caller's transaction.
pub fn run_in(
    c: &Connection,
    call: &ToolCall<'_>,
    tz: &jiff::tz::TimeZone,
) -> rusqlite::Result<ToolOutcome> {
    if super::timers::COMMANDS.contains(&call.command.command_id.as_str()) {
        return super::timers::run_in(c, call, tz);
    }
    let now = now_timestamp();
    let v = SCHEMA_VERSION;
    Ok(match call.command.command_id.as_str() {
        "lights.set" | "lights.brightness" | "light.set" | "light.brightness" => {
            // One device is kept under its own name, beside the rooms.
            let room = match text(call, "device") {
                "" => text(call, "room"),
                device => device,
            };
            let (is_on, level) = if call.command.command_id.ends_with(".set") {
                (text(call, "state") == "on", None)
            } else {
                let level = number(call, "level") as i64;
                (level > 0, Some(level))
            };
            let changed = if room == "all" {
                c.prepare_cached("UPDATE lights SET is_on = ?1, brightness = coalesce(?2, brightness), updated_at = ?3")?.execute(params![is_on, level, now])?
            } else {
                c.prepare_cached("INSERT INTO lights (room, schema_version, is_on, brightness, updated_at) VALUES (?1, ?2, ?3, coalesce(?4, 100), ?5)
                     ON CONFLICT (room) DO UPDATE SET is_on = excluded.is_on,
                       brightness = coalesce(?4, lights.brightness), updated_at = excluded.updated_at")?.execute(params![room, v, is_on, level, now])?
            };
            ToolOutcome::ok(
                json!({"room": room, "on": is_on, "brightness": level, "lights_changed": changed}),
                "",
            )
        }
        "thermostat.set" => {
            let t = number(call, "temperature");
            set_thermostat(c, t, &now)?;
            ToolOutcome::ok(json!({"temperature": t}), "")
        }
        "thermostat.adjust" => {
            // From where it is (20 °C if never set), within the range
            // `thermostat.set` allows.
            let (low, high) = (10.0, 30.0);
            let now_at = thermostat_at(c)?.unwrap_or(20.0);
            let t = (now_at + number(call, "change")).clamp(low, high);
            set_thermostat(c, t, &now)?;
            let at = ParamValue::Number(t);
            let message = if t == now_at {
                let end = if t >= high { "highest" } else { "lowest" };
                format!("The thermostat is already at {at} °C, its {end}.")
            } else {
                format!("The thermostat is now at {at} °C.")
            };
            ToolOutcome::ok(json!({"temperature": t, "was": now_at}), message)
        }
        "shopping.add" => {
            let item = text(call, "item");
            let added = c.prepare_cached("INSERT INTO shopping_list (item, schema_version, added_at) VALUES (?1, ?2, ?3) ON CONFLICT (item) DO NOTHING")?.execute(params![item, v, now])?;
            ToolOutcome::ok(json!({"item": item, "added": added == 1}), "")
        }
        "shopping.remove" => {
            let item = text(call, "item");
            match c
                .prepare_cached("DELETE FROM shopping_list WHERE item = ?1")?
                .execute([item])?
            {
                0 => ToolOutcome::failed(format!("{item} is not on the shopping list"), false),
                _ => ToolOutcome::ok(json!({"item": item, "removed": true}), ""),
            }
        }
        "shopping.list" => {
            let items = shopping_items(c)?;
            let message = if items.is_empty() {
                "The shopping list is empty.".to_owned()
            } else {
                format!("On the shopping list: {}.", items.join(", "))
            };
            ToolOutcome::ok(json!({"items": items}), message)
        }
        "shopping.clear" => {
            let items = shopping_items(c)?;
            c.prepare_cached("DELETE FROM shopping_list")?.execute([])?;
            let message = if items.is_empty() {
                "The shopping list was already empty.".to_owned()
            } else {
                format!("Cleared the shopping list: {}.", items.join(", "))
            };
            ToolOutcome::ok(json!({"removed": items}), message)
        }
        "home.status" => {
            let message = status(c, call.now_ms)?;
            ToolOutcome::ok(json!({"summary": message}), message)
        }
        "home.state" => {
            let message = state_answer(
                c,
                call.now_ms,
                text(call, "kind"),
                text(call, "device"),
                text(call, "room"),
                text(call, "state"),
            )?;
            ToolOutcome::ok(json!({"answer": message}), message)
        }
        "mode.set" => {
            let state = text(call, "state").to_owned();
            let mut outcome = ToolOutcome::ok(json!({"state_out": state}), "");
            outcome.state_out = Some(state);
            outcome
        }
        "door.lock" | "door.unlock" => {
            let door = text(call, "door");
            let locked = call.command.command_id == "door.lock";
            c.prepare_cached("INSERT INTO doors (door, schema_version, locked, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (door) DO UPDATE SET locked = excluded.locked, updated_at = excluded.updated_at")?.execute(params![door, v, locked, now])?;
            ToolOutcome::ok(json!({"door": door, "locked": locked}), "")
        }
        "garage.open" | "garage.close" => {
            let open = call.command.command_id == "garage.open";
            c.prepare_cached("INSERT INTO garage (id, schema_version, is_open, updated_at) VALUES (1, ?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET is_open = excluded.is_open, updated_at = excluded.updated_at")?.execute(params![v, open, now])?;
            ToolOutcome::ok(json!({"open": open}), "")
        }
        other => ToolOutcome::failed(format!("{other} has no built-in executor"), false),
    })
}

fn shopping_items(c: &Connection) -> rusqlite::Result<Vec<String>> {
    c.prepare("SELECT item FROM shopping_list ORDER BY added_at, item")?
        .query_map([], |r| r.get(0))?
        .collect()
}

/// Where the thermostat is set, if it ever was.
fn thermostat_at(c: &Connection) -> rusqlite::Result<Option<f64>> {
    c.query_row("SELECT temperature FROM thermostat WHERE id = 1", [], |r| {
        r.get(0)
    })
    .optional()
}

fn set_thermostat(c: &Connection, t: f64, now: &str) -> rusqlite::Result<()> {
    c.prepare_cached("INSERT INTO thermostat (id, schema_version, temperature, updated_at) VALUES (1, ?1, ?2, ?3)
         ON CONFLICT (id) DO UPDATE SET temperature = excluded.temperature, updated_at = excluded.updated_at")?
        .execute(params![SCHEMA_VERSION, t, now])?;
    Ok(())
}

/// The doors a command left unlocked (a door none touched is locked).
fn unlocked_doors(c: &Connection) -> rusqlite::Result<Vec<String>> {
    c.prepare("SELECT door FROM doors WHERE locked = 0 ORDER BY door")?
        .query_map([], |r| r.get(0))?
        .collect()
}

/// Whether the garage was left open (never opened: closed).
fn garage_open(c: &Connection) -> rusqlite::Result<bool> {
    Ok(
        c.query_row("SELECT is_open FROM garage WHERE id = 1", [], |r| r.get(0))
            .optional()?
            .unwrap_or(false),
    )
}

/// The answer to a question about one kind of thing ("is the back door
/// locked", "which lights are on", "what's the temperature"), from what the
/// built-in home last did, as `home.status` reports it: a door no command
/// has unlocked is locked, a light never turned on is off, the garage never
/// opened is closed. `asked` is the state the question names, if any: the
/// answer then starts "Yes" or "No".
fn state_answer(
    c: &Connection,
    now_ms: i64,
    kind: &str,
    device: &str,
    room: &str,
    asked: &str,
) -> rusqlite::Result<String> {
    let reply = |subject: &str, verb: &str, actual: &str, more: &str| {
        let said = format!("{subject} {verb} {actual}{more}.");
        match asked {
            "" => crate::auth::capitalise(&said),
            a if a == actual => format!("Yes, {said}"),
            _ => format!("No, {said}"),
        }
    };
    Ok(match kind {
        "lock" if !device.is_empty() => {
            let locked = c
                .query_row("SELECT locked FROM doors WHERE door = ?1", [device], |r| {
                    r.get::<_, bool>(0)
                })
                .optional()?
                .unwrap_or(true);
            let actual = if locked { "locked" } else { "unlocked" };
            reply(&format!("the {device}"), "is", actual, "")
        }
        "lock" => {
            let unlocked = unlocked_doors(c)?;
            let names: Vec<&str> = unlocked.iter().map(String::as_str).collect();
            let which = format!(
                "the {} {} unlocked",
                crate::command::join_with(&names, "and"),
                if names.len() == 1 { "is" } else { "are" }
            );
            match (names.is_empty(), asked) {
                (true, "locked") => "Yes, all the doors are locked.".to_owned(),
                (true, "unlocked") => "No, all the doors are locked.".to_owned(),
                (true, _) => "All the doors are locked.".to_owned(),
                (false, "locked") => format!("No, {which}."),
                (false, "unlocked") => format!("Yes, {which}."),
                (false, _) => format!("Unlocked: {}.", names.join(", ")),
            }
        }
        "cover" => {
            let open = garage_open(c)?;
            reply(
                "the garage door",
                "is",
                if open { "open" } else { "closed" },
                "",
            )
        }
        // "Is the heating on": on once the thermostat is set, to what it is set to.
        "climate" => match (thermostat_at(c)?, asked) {
            (Some(t), "") => format!("The thermostat is set to {} °C.", ParamValue::Number(t)),
            (Some(t), _) => reply(
                "the heating",
                "is",
                "on",
                &format!(", set to {} °C", ParamValue::Number(t)),
            ),
            (None, "") => "The thermostat has not been set yet.".to_owned(),
            (None, _) => reply(
                "the heating",
                "is",
                "off",
                ": the thermostat has not been set",
            ),
        },
        "light" if !device.is_empty() || (!room.is_empty() && room != "all") => {
            // One device is kept under its own name, beside the rooms.
            let key = if device.is_empty() { room } else { device };
            let row = c
                .query_row(
                    "SELECT is_on, brightness FROM lights WHERE room = ?1",
                    [key],
                    |r| Ok((r.get::<_, bool>(0)?, r.get::<_, i64>(1)?)),
                )
                .optional()?;
            let (on, level) = row.unwrap_or((false, 0));
            let more = if on && level < 100 {
                format!(", at {level}%")
            } else {
                String::new()
            };
            let (subject, verb) = if device.is_empty() {
                (format!("the {room} lights"), "are")
            } else {
                (format!("the {device}"), "is")
            };
            reply(&subject, verb, if on { "on" } else { "off" }, &more)
        }
        "light" => {
            let on: Vec<String> = c
                .prepare("SELECT room FROM lights WHERE is_on = 1 ORDER BY room")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            match (on.as_slice(), asked) {
                ([], "off") => "Yes, all the lights are off.".to_owned(),
                ([], _) => "No lights are on.".to_owned(),
                (rooms, _) => format!("Lights on: {}.", rooms.join(", ")),
            }
        }
        _ => status(c, now_ms)?,
    })
}

/// The home in a few sentences.
fn status(c: &Connection, now_ms: i64) -> rusqlite::Result<String> {
    let mut parts = Vec::new();
    let on: Vec<String> = c
        .prepare("SELECT room, brightness FROM lights WHERE is_on = 1 ORDER BY room")?
        .query_map([], |r| {
            Ok(format!(
                "{} ({}%)",
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?
            ))
        })?
        .collect::<Result<_, _>>()?;
    parts.push(if on.is_empty() {
        "All lights are off.".to_owned()
    } else {
        format!("Lights on: {}.", on.join(", "))
    });
    if let Some(t) = thermostat_at(c)? {
        parts.push(format!(
            "The thermostat is at {} °C.",
            ParamValue::Number(t)
        ));
    }
    let unlocked = unlocked_doors(c)?;
    if !unlocked.is_empty() {
        parts.push(format!("Unlocked: {}.", unlocked.join(", ")));
    }
    if garage_open(c)? {
        parts.push("The garage is open.".into());
    }
    let timers = crate::schedule::timers(c, None)?;
    if !timers.is_empty() {
        let left: Vec<String> = timers
            .iter()
            .map(|t| {
                format!(
                    "{} {} left",
                    t.label(),
                    crate::schedule::human_left(t.left_ms(now_ms))
                )
            })
            .collect();
        parts.push(format!("Timers: {}.", left.join(", ")));
    }
    let items = shopping_items(c)?;
    if !items.is_empty() {
        parts.push(format!("{} on the shopping list.", items.len()));
    }
    Ok(parts.join(" "))
}
