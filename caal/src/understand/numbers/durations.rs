//! Lengths of time as people say them ("ten minutes", "an hour and a
//! half", "half an hour", "1h30", "90 seconds").

use super::*;

/// A duration as people say it, in seconds: "10 minutes", "ten minutes",
/// "an hour and a half", "an hour and a quarter", "half an hour", "1 hour 30 minutes", "1h30",
/// "a minute and a half", "90 secs", "2 days", "zehn Minuten".
pub fn parse_duration(lang: Lang, text: &str) -> Option<u64> {
    let text = crate::understand::normalize(text);
    let text = text.as_str();
    if text.is_empty() {
        return None;
    }
    if let Some(s) = compact_duration(text) {
        return Some(s);
    }
    let mut pos = 0;
    let mut total = 0.0;
    let mut any = false;
    while pos < text.len() {
        let rest = &text[pos..];
        // Joiners and fillers between parts.
        if let Some(r) = ["and ", ", ", "und "]
            .iter()
            .find_map(|j| rest.strip_prefix(j))
        {
            pos = text.len() - r.len();
            continue;
        }
        // "half an hour", "a quarter of an hour", "eine halbe Stunde"
        let (amount, after) = duration_amount(lang, text, pos)?;
        let rest = text[after..].trim_start();
        let at = text.len() - rest.len();
        let (unit, unit_end) = duration_unit(rest)?;
        let mut amount = amount;
        let mut end = at + unit_end;
        // "an hour and a half": the half is of the unit just said.
        // "an hour and a quarter", "… and three quarters" too.
        for (tail, part) in [
            (" and a half", 0.5),
            (" and one half", 0.5),
            (" and a quarter", 0.25),
            (" and three quarters", 0.75),
            (" und ein halb", 0.5),
            (" einhalb", 0.5),
            (" und ein viertel", 0.25),
        ] {
            if text[end..].starts_with(tail) {
                amount += part;
                end += tail.len();
            }
        }
        total += amount * unit;
        any = true;
        pos = end;
        while pos < text.len() && text.as_bytes()[pos] == b' ' {
            pos += 1;
        }
    }
    (any && (0.0..1e12).contains(&total)).then(|| total.round() as u64)
}

/// The number in front of a duration unit: digits, words, "a"/"an",
/// "another", "half a(n)", "a quarter of a(n)", "three quarters of a(n)".
fn duration_amount(lang: Lang, text: &str, pos: usize) -> Option<(f64, usize)> {
    let rest = &text[pos..];
    // "another minute", "one more hour": one of the unit said next.
    for phrase in ["another ", "one more "] {
        if rest
            .strip_prefix(phrase)
            .is_some_and(|after| duration_unit(after).is_some())
        {
            return Some((1.0, pos + phrase.len()));
        }
    }
    for (phrase, value) in [
        ("a couple of ", 2.0),
        ("a couple ", 2.0),
        ("half an ", 0.5),
        ("half a ", 0.5),
        ("a half ", 0.5),
        ("a quarter of an ", 0.25),
        ("a quarter of a ", 0.25),
        ("quarter of an ", 0.25),
        ("quarter of a ", 0.25),
        ("quarter ", 0.25),
        ("three quarters of an ", 0.75),
        ("three quarters of a ", 0.75),
        // As speech to text writes it.
        ("3 quarters of an ", 0.75),
        ("3 quarters of a ", 0.75),
        ("an ", 1.0),
        ("a ", 1.0),
        ("eine halbe ", 0.5),
        ("einer halben ", 0.5),
        ("eine viertel ", 0.25),
        ("einer viertel ", 0.25),
        ("eine dreiviertel ", 0.75),
        ("dreiviertel ", 0.75),
        ("halbe ", 0.5),
    ] {
        if rest.starts_with(phrase) {
            return Some((value, pos + phrase.len()));
        }
    }
    numbers_at(lang, text, pos)
        .into_iter()
        .rev()
        .find(|(_, end)| duration_unit(text[*end..].trim_start()).is_some())
}

/// A unit word at the start of `rest` ("five more minutes", "two extra
/// hours": the word between is skipped), its length in seconds and where it ends.
/// The words a length of time is said in, with their seconds (English and German).
pub(super) const UNITS: [(&str, f64); 30] = [
    ("s", 1.0),
    ("sec", 1.0),
    ("secs", 1.0),
    ("second", 1.0),
    ("seconds", 1.0),
    ("sekunde", 1.0),
    ("sekunden", 1.0),
    ("m", 60.0),
    ("min", 60.0),
    ("mins", 60.0),
    ("minute", 60.0),
    ("minutes", 60.0),
    ("minuten", 60.0),
    ("h", 3_600.0),
    ("hr", 3_600.0),
    ("hrs", 3_600.0),
    ("hour", 3_600.0),
    ("hours", 3_600.0),
    ("stunde", 3_600.0),
    ("stunden", 3_600.0),
    ("d", 86_400.0),
    ("day", 86_400.0),
    ("days", 86_400.0),
    ("tag", 86_400.0),
    ("tage", 86_400.0),
    ("tagen", 86_400.0),
    ("week", 604_800.0),
    ("weeks", 604_800.0),
    ("woche", 604_800.0),
    ("wochen", 604_800.0),
];

fn duration_unit(rest: &str) -> Option<(f64, usize)> {
    if let Some(after) = ["more ", "extra "]
        .iter()
        .find_map(|w| rest.strip_prefix(w))
    {
        let skipped = rest.len() - after.len();
        return duration_unit(after).map(|(s, end)| (s, skipped + end));
    }
    let word_end = rest.find(' ').unwrap_or(rest.len());
    let word = &rest[..word_end];
    let (_, seconds) = UNITS.iter().find(|(w, _)| *w == word)?;
    Some((*seconds, word_end))
}

/// "1h30", "1h30m", "90s", "10min", "2d", "1:30:00" (h:m:s) or "5:00" (m:s).
fn compact_duration(text: &str) -> Option<u64> {
    if text.contains(':') {
        let parts: Vec<u64> = text
            .split(':')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        return match parts.as_slice() {
            [m, s] if *s < 60 => Some(m * 60 + s),
            [h, m, s] if *m < 60 && *s < 60 => Some(h * 3600 + m * 60 + s),
            _ => None,
        };
    }
    if text.contains(' ') || !text.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut total = 0u64;
    let mut rest = text;
    let mut last_scale = None;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match (&rest[..unit_len], last_scale) {
            ("", Some(3_600)) => 60, // "1h30"
            ("", Some(60)) => 1,     // "5m30"
            (u, _) => duration_unit(u).map(|(s, _)| s as u64)?,
        };
        total = total.checked_add(n.checked_mul(scale)?)?;
        last_scale = Some(scale);
        rest = &rest[unit_len..];
    }
    Some(total)
}
