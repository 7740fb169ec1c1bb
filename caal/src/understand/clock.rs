//! Times of day as people say them ("6 pm", "half past six", "18:30",
//! "tomorrow at 9", "noon"), and when that is next, in a time zone.
//!
//! Hand-written: the crates that read times in words (none well kept) do
//! not read English clock phrases ("quarter to seven"); the calendar
//! arithmetic (days, time zones, daylight saving) is `jiff`'s.

pub use crate::config::time_zone;
use std::{fmt, str::FromStr};

use jiff::{Timestamp, ZonedDateTime, civil::Date, tz::TimeZone};

use super::{Lang, normalize, numbers::numbers_at};

/// A time of day someone asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeOfDay {
    /// 0–23.
    pub hour: u8,
    pub minute: u8,
    /// "at 6": 6:00 or 18:00, whichever comes first.
    pub either_half: bool,
    pub tomorrow: bool,
}

/// As kept in a command's parameters: `[tomorrow ]HH:MM[?]` (`?`: or twelve hours later).
impl fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tomorrow {
            f.write_str("tomorrow ")?;
        }
        write!(f, "{:02}:{:02}", self.hour, self.minute)?;
        if self.either_half {
            f.write_str("?")?;
        }
        Ok(())
    }
}

impl FromStr for TimeOfDay {
    type Err = String;

    /// The kept form (a two-digit hour is the 24-hour clock), or anything `parse` reads.
    fn from_str(s: &str) -> Result<Self, String> {
        let (tomorrow, rest) = match s.trim().strip_prefix("tomorrow ") {
            Some(rest) => (true, rest),
            None => (false, s.trim()),
        };
        let (either_half, rest) = match rest.strip_suffix('?') {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        if let Some((h, m)) = rest.split_once(':')
            && h.len() == 2
            && m.len() == 2
            && let (Ok(hour @ 0..=23), Ok(minute @ 0..=59)) = (h.parse::<u8>(), m.parse::<u8>())
        {
            return Ok(TimeOfDay {
                hour,
                minute,
                either_half,
                tomorrow,
            });
        }
        parse(s).ok_or_else(|| {
            format!(
                "{s:?} is not a time of day; say it like \"6 pm\", \"18:30\" or \"half past six\""
            )
        })
    }
}

/// Reads a time of day (English). None when it is not one.
pub fn parse(text: &str) -> Option<TimeOfDay> {
    let mut t = format!(" {} ", normalize(text));
    for (from, to) in [
        (" a m ", " am "),
        (" p m ", " pm "),
        (" o'clock ", " oclock "),
        (" o clock ", " oclock "),
    ] {
        t = t.replace(from, to);
    }
    let mut tomorrow = false;
    let mut half: Option<bool> = None; // Some(true): afternoon/evening
    for (word, day, pm) in [
        (" tomorrow morning ", true, Some(false)),
        (" tomorrow evening ", true, Some(true)),
        (" tomorrow night ", true, Some(true)),
        (" tomorrow afternoon ", true, Some(true)),
        (" tomorrow arvo ", true, Some(true)),
        (" tomorrow ", true, None),
        (" today ", false, None),
        (" tonight ", false, Some(true)),
        (" this evening ", false, Some(true)),
        (" in the evening ", false, Some(true)),
        (" this afternoon ", false, Some(true)),
        (" this arvo ", false, Some(true)),
        (" in the afternoon ", false, Some(true)),
        (" at night ", false, Some(true)),
        (" this morning ", false, Some(false)),
        (" in the morning ", false, Some(false)),
    ] {
        if t.contains(word) {
            t = t.replacen(word, " ", 1);
            tomorrow |= day;
            half = half.or(pm);
        }
    }
    let mut words: Vec<&str> = t.split_whitespace().collect();
    while let Some(w) = words.first()
        && ["at", "by", "around", "about", "for", "on"].contains(w)
    {
        words.remove(0);
    }
    let mut core = words.join(" ");
    // "6pm", "6:30pm", "6 pm"
    for (suffix, pm) in [("am", false), ("pm", true)] {
        if let Some(rest) = core.strip_suffix(suffix) {
            let rest = rest.trim_end();
            if rest.ends_with(|c: char| c.is_ascii_digit()) || rest.ends_with(' ') || rest != core {
                core = rest.to_owned();
                half = Some(pm);
                break;
            }
        }
    }
    let core = core.strip_suffix(" oclock").unwrap_or(&core).trim();
    let (hour, minute) = match core {
        "noon" | "midday" => return Some(definite(12, 0, tomorrow)),
        "midnight" => {
            return Some(TimeOfDay {
                hour: 0,
                minute: 0,
                either_half: false,
                tomorrow: true,
            });
        }
        // "930" alone may be a count ("buy 500"); with "pm" or "tomorrow" it is a time.
        c if c.bytes().all(|b| b.is_ascii_digit())
            && c.len() > 2
            && half.is_none()
            && !tomorrow =>
        {
            return None;
        }
        _ => clock_words(core)?,
    };
    if hour > 23 || minute > 59 {
        return None;
    }
    Some(match half {
        Some(_) if hour == 0 || hour > 12 => return None,
        Some(pm) => definite(hour % 12 + if pm { 12 } else { 0 }, minute, tomorrow),
        None if hour == 0 || hour > 12 => definite(hour, minute, tomorrow),
        None => TimeOfDay {
            hour,
            minute,
            either_half: true,
            tomorrow,
        },
    })
}

fn definite(hour: u8, minute: u8, tomorrow: bool) -> TimeOfDay {
    TimeOfDay {
        hour,
        minute,
        either_half: false,
        tomorrow,
    }
}

/// "6", "18:30", "6.30", "six thirty", "half past six", "half six",
/// "quarter to 7", "ten past six", "20 to 7" → (hour, minute) as said
/// (12-hour or 24-hour).
fn clock_words(core: &str) -> Option<(u8, u8)> {
    if let Some((h, m)) = core.split_once([':', '.'])
        && m.len() == 2
    {
        return Some((h.parse().ok()?, m.parse().ok()?));
    }
    // "930", "1830" (how speech to text writes "nine thirty", "eighteen thirty").
    if (3..=4).contains(&core.len()) && core.bytes().all(|b| b.is_ascii_digit()) {
        let (h, m) = core.split_at(core.len() - 2);
        return Some((h.parse().ok()?, m.parse().ok()?));
    }
    for (word, after) in [
        (" past ", true),
        (" after ", true),
        (" to ", false),
        (" before ", false),
    ] {
        if let Some((minutes, hour)) = core.split_once(word) {
            let minutes = match minutes.strip_suffix(" minutes").unwrap_or(minutes) {
                "half" => 30,
                "quarter" | "a quarter" => 15,
                m => whole_numbers(m).filter(|n| n.len() == 1)?[0],
            };
            let [hour] = whole_numbers(hour)?[..] else {
                return None;
            };
            if minutes == 0 || minutes > 59 || (!after && minutes == 30) {
                return None;
            }
            return Some(if after {
                (u8::try_from(hour).ok()?, u8::try_from(minutes).ok()?)
            } else {
                let h = if hour == 0 { 23 } else { hour - 1 };
                (u8::try_from(h).ok()?, u8::try_from(60 - minutes).ok()?)
            });
        }
    }
    // "half six": half past six, as British English says it.
    if let Some(hour) = core.strip_prefix("half ")
        && let [h] = whole_numbers(hour)?[..]
    {
        return Some((u8::try_from(h).ok()?, 30));
    }
    match whole_numbers(core)?[..] {
        [h] => Some((u8::try_from(h).ok()?, 0)),
        // "six thirty", "6 30", "seven oh five" is read as 7 and 5 too
        [h, m] if m < 60 => Some((u8::try_from(h).ok()?, u8::try_from(m).ok()?)),
        _ => None,
    }
}

/// The whole text as one or two whole numbers ("six thirty" → [6, 30]).
fn whole_numbers(text: &str) -> Option<Vec<u32>> {
    fn from(text: &str, pos: usize, left: usize) -> Option<Vec<u32>> {
        if pos >= text.len() {
            return Some(Vec::new());
        }
        if left == 0 {
            return None;
        }
        let rest = &text[pos..];
        if let Some(after) = rest.strip_prefix("oh ") {
            return from(text, text.len() - after.len(), left);
        }
        // Longest readings first: "twenty five" before "twenty".
        for (x, end) in numbers_at(Lang::En, text, pos).into_iter().rev() {
            if x.fract() != 0.0 || !(0.0..=59.0).contains(&x) {
                continue;
            }
            let next = if end < text.len() { end + 1 } else { end };
            if end < text.len() && text.as_bytes()[end] != b' ' {
                continue;
            }
            if let Some(mut more) = from(text, next, left - 1) {
                more.insert(0, x as u32);
                return Some(more);
            }
        }
        None
    }
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    from(text, 0, 2)
}

/// When `t` next comes after `now_ms` in `tz` (milliseconds since the epoch).
pub fn next_at(t: TimeOfDay, now_ms: i64, tz: &TimeZone) -> Option<i64> {
    let now = Timestamp::from_millisecond(now_ms)
        .ok()?
        .to_zoned_datetime(tz.clone());
    let today = now.date();
    let hours: Vec<u8> = if !t.either_half {
        vec![t.hour]
    } else if t.tomorrow {
        // "tomorrow at 9" is the morning, "tomorrow at 3" the afternoon.
        vec![if (1..=6).contains(&t.hour) {
            t.hour + 12
        } else {
            t.hour % 12 + if t.hour == 12 { 12 } else { 0 }
        }]
    } else {
        vec![t.hour % 12, t.hour % 12 + 12]
    };
    let days: &[i64] = if t.tomorrow { &[1] } else { &[0, 1] };
    let mut best: Option<i64> = None;
    for &d in days {
        let date = today.checked_add(jiff::Span::new().days(d)).ok()?;
        for &h in &hours {
            let ms = at(date, h, t.minute, tz)?;
            if (ms > now_ms || t.tomorrow) && best.is_none_or(|b| ms < b) {
                best = Some(ms);
            }
        }
        if best.is_some() {
            break;
        }
    }
    best
}

fn at(date: Date, hour: u8, minute: u8, tz: &TimeZone) -> Option<i64> {
    let dt = date.at(i8::try_from(hour).ok()?, i8::try_from(minute).ok()?, 0, 0);
    Some(
        dt.to_zoned_datetime(tz.clone())
            .ok()?
            .timestamp()
            .as_millisecond(),
    )
}

/// "6 pm", "6:30 pm", "noon", "midnight".
pub fn spoken_clock(t: &ZonedDateTime) -> String {
    let (h, m) = (t.hour(), t.minute());
    match (h, m) {
        (12, 0) => "noon".to_owned(),
        (0, 0) => "midnight".to_owned(),
        _ => {
            let h12 = if h % 12 == 0 { 12 } else { h % 12 };
            let half = if h < 12 { "am" } else { "pm" };
            if m == 0 {
                format!("{h12} {half}")
            } else {
                format!("{h12}:{m:02} {half}")
            }
        }
    }
}

/// "at 6 pm", "at 6:30 pm", "tomorrow at 9 am", "on Friday 28 November at 7 am".
pub fn describe(due_ms: i64, now_ms: i64, tz: &TimeZone) -> String {
    let (Ok(due), Ok(now)) = (
        Timestamp::from_millisecond(due_ms),
        Timestamp::from_millisecond(now_ms),
    ) else {
        return String::new();
    };
    let (due, now): (ZonedDateTime, ZonedDateTime) = (
        due.to_zoned_datetime(tz.clone()),
        now.to_zoned_datetime(tz.clone()),
    );
    let clock = spoken_clock(&due);
    let today = now.date();
    if due.date() == today {
        format!("at {clock}")
    } else if today.tomorrow().ok() == Some(due.date()) {
        format!("tomorrow at {clock}")
    } else {
        format!("on {} at {clock}", due.strftime("%A %-d %B"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> String {
        parse(s).map_or("-".into(), |t| t.to_string())
    }

    #[test]
    fn clock_phrases_read_as_people_mean_them() {
        assert_eq!(p("6 pm"), "18:00");
        assert_eq!(p("6pm"), "18:00");
        assert_eq!(p("6 p.m."), "18:00");
        assert_eq!(p("at 6:30 pm"), "18:30");
        assert_eq!(p("18:30"), "18:30");
        assert_eq!(p("6.30"), "06:30?");
        assert_eq!(p("6"), "06:00?");
        assert_eq!(p("six"), "06:00?");
        assert_eq!(p("six thirty"), "06:30?");
        assert_eq!(p("seven oh five am"), "07:05");
        assert_eq!(p("half past six"), "06:30?");
        // British: "half six" is half past six, never six.
        assert_eq!(p("half six"), "06:30?");
        assert_eq!(p("half 8 tonight"), "20:30");
        assert_eq!(p("quarter to seven in the evening"), "18:45");
        assert_eq!(p("ten past 6 tonight"), "18:10");
        assert_eq!(p("twenty five to eight"), "07:35?");
        assert_eq!(p("7 o'clock"), "07:00?");
        assert_eq!(p("noon"), "12:00");
        assert_eq!(p("midnight"), "tomorrow 00:00");
        assert_eq!(p("tomorrow at 9"), "tomorrow 09:00?");
        assert_eq!(p("9 am tomorrow"), "tomorrow 09:00");
        assert_eq!(p("tomorrow morning at 7"), "tomorrow 07:00");
        assert_eq!(p("0:15"), "00:15");
        assert_eq!(p("930 tomorrow morning"), "tomorrow 09:30");
        assert_eq!(p("630 pm"), "18:30");
        assert_eq!(p("1830"), "-");
        assert_eq!(p("500"), "-");
        assert_eq!(p("960 pm"), "-");
        // Not times.
        assert_eq!(p("25:00"), "-");
        assert_eq!(p("13 pm"), "-");
        assert_eq!(p("the evening"), "-");
        assert_eq!(p("call mom"), "-");
        assert_eq!(p("6:75"), "-");
        // The kept form reads back as itself.
        for kept in [
            "18:30",
            "06:30?",
            "06:30",
            "tomorrow 09:00?",
            "tomorrow 00:00",
        ] {
            assert_eq!(kept.parse::<TimeOfDay>().unwrap().to_string(), kept);
        }
    }

    #[test]
    fn the_next_time_comes_in_the_zone_and_across_daylight_saving() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let ms = |s: &str| {
            s.parse::<ZonedDateTime>()
                .unwrap()
                .timestamp()
                .as_millisecond()
        };
        let now = ms("2026-03-28T14:00:00+01:00[Europe/Berlin]");
        let next = |s: &str| {
            let t = next_at(parse(s).unwrap(), now, &tz).unwrap();
            Timestamp::from_millisecond(t)
                .unwrap()
                .to_zoned_datetime(tz.clone())
                .to_string()
        };
        // At 2 pm, "6" is this evening; "9" tonight; "1 pm" tomorrow.
        assert_eq!(next("6"), "2026-03-28T18:00:00+01:00[Europe/Berlin]");
        assert_eq!(next("9"), "2026-03-28T21:00:00+01:00[Europe/Berlin]");
        assert_eq!(next("1 pm"), "2026-03-29T13:00:00+02:00[Europe/Berlin]");
        // The clocks go forward that night: 9 am tomorrow is 23 hours away, not 19+.
        assert_eq!(
            next("tomorrow at 9"),
            "2026-03-29T09:00:00+02:00[Europe/Berlin]"
        );
        assert_eq!(
            next("tomorrow at 3"),
            "2026-03-29T15:00:00+02:00[Europe/Berlin]"
        );
        let due = next_at(parse("6:30 pm").unwrap(), now, &tz).unwrap();
        assert_eq!(describe(due, now, &tz), "at 6:30 pm");
        let due = next_at(parse("tomorrow at 9").unwrap(), now, &tz).unwrap();
        assert_eq!(describe(due, now, &tz), "tomorrow at 9 am");
        assert!(time_zone("Mars/Olympus").unwrap_err().contains("IANA"));
    }
}
