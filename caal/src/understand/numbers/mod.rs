//! Numbers and durations as people say them: digits ("21.5", "1/2"), words
//! ("fifty", "twenty-one", "a hundred", "two and a half"; German
//! "einundzwanzig", "zweieinhalb"), and durations ("ten minutes", "an hour
//! and a half", "half an hour", "1h30", "90 seconds").
//!
//! Hand-written: the crates that read number words (none well kept for
//! Rust) cover one language each and do not report where a number ends,
//! which the template matcher needs to try every reading ("twenty" and
//! "twenty one" both start "twenty one minutes").

mod de;
mod durations;
mod en;

pub use durations::parse_duration;

use super::Lang;

/// The words the number and duration grammars read in `lang` (the
/// duration units are of both languages; German number words, compounds,
/// are not listed): a slip may be of one ("fiften minutes").
pub fn known_words(lang: Lang) -> impl Iterator<Item = &'static str> {
    let english = matches!(lang, Lang::En);
    let numbers = (en::UNITS.iter().chain(&en::TENS))
        .map(|(w, _)| *w)
        .chain(en::SCALES)
        .filter(move |_| english);
    numbers.chain(
        durations::UNITS
            .iter()
            .map(|(w, _)| *w)
            .filter(|w| w.len() > 2),
    )
}

/// Whether `word` is one a length of time is said in ("minutes", "hrs").
pub fn says_a_length_of_time(word: &str) -> bool {
    word.len() > 2 && durations::UNITS.iter().any(|(w, _)| *w == word)
}

/// Every number said in `text` where a word begins, as (value, start,
/// end), the longest reading at each.
pub fn numbers_in(lang: Lang, text: &str) -> Vec<(f64, usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < text.len() {
        if let Some(&(n, end)) = numbers_at(lang, text, pos).iter().max_by_key(|r| r.1) {
            out.push((n, pos, end));
            pos = end;
        }
        match text[pos..].find(' ') {
            Some(sp) => pos += sp + 1,
            None => break,
        }
    }
    out
}

/// Every number that starts at byte `pos` of normalised `text` (lower case,
/// single spaces), with the byte where it ends; longest readings last.
pub fn numbers_at(lang: Lang, text: &str, pos: usize) -> Vec<(f64, usize)> {
    let mut out = Vec::new();
    if let Some((n, end)) = digits_at(text, pos) {
        out.push((n, end));
        // "18 and a half", as speech to text writes "eighteen and a half".
        let tails: &[&str] = match lang {
            Lang::En => &[" and a half", " and one half"],
            Lang::De => &[" und ein halb", " einhalb"],
        };
        if n.fract() == 0.0
            && let Some(tail) = tails.iter().find(|t| {
                text[end..].starts_with(*t)
                    && text[end + t.len()..]
                        .chars()
                        .next()
                        .is_none_or(|c| !c.is_alphanumeric())
            })
        {
            out.push((n + 0.5, end + tail.len()));
        }
        return out;
    }
    match lang {
        Lang::En => en::english_at(text, pos, &mut out),
        Lang::De => de::german_at(text, pos, &mut out),
    }
    out
}

/// "21", "21.5", "21,5", "1/2", "½" at `pos` (ending at a word boundary or before `%`/`°`).
fn digits_at(text: &str, pos: usize) -> Option<(f64, usize)> {
    let b = text.as_bytes();
    if text[pos..].starts_with('½') {
        return Some((0.5, pos + '½'.len_utf8()));
    }
    let mut end = pos;
    while end < b.len() && b[end].is_ascii_digit() {
        end += 1;
    }
    if end == pos {
        return None;
    }
    let whole: f64 = text[pos..end].parse().ok()?;
    let mut value = whole;
    if end + 1 < b.len() && (b[end] == b'.' || b[end] == b',') && b[end + 1].is_ascii_digit() {
        let mut frac_end = end + 1;
        while frac_end < b.len() && b[frac_end].is_ascii_digit() {
            frac_end += 1;
        }
        value = format!("{}.{}", &text[pos..end], &text[end + 1..frac_end])
            .parse()
            .ok()?;
        end = frac_end;
    } else if end + 1 < b.len() && b[end] == b'/' && b[end + 1].is_ascii_digit() {
        let mut den_end = end + 1;
        while den_end < b.len() && b[den_end].is_ascii_digit() {
            den_end += 1;
        }
        let den: f64 = text[end + 1..den_end].parse().ok()?;
        if den == 0.0 {
            return None;
        }
        value = whole / den;
        end = den_end;
    }
    if end < b.len() && b[end].is_ascii_alphabetic() {
        return None;
    }
    Some((value, end))
}

/// The words from `pos` on, each with the byte where it ends (at most `max`).
pub(super) fn words_from(text: &str, pos: usize, max: usize) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let mut start = pos;
    while out.len() < max && start < text.len() {
        let end = text[start..].find(' ').map_or(text.len(), |i| start + i);
        out.push((&text[start..end], end));
        start = end + 1;
    }
    out
}

#[cfg(test)]
mod tests;

/// A brightness: a number said with "percent" or "%" if there is one, else
/// the only number from 0 to 100.
pub fn percent(lang: Lang, text: &str) -> Option<f64> {
    let found = numbers_in(lang, text);
    let said_as_percent = found.iter().find(|&&(_, _, end)| {
        let rest = text[end..].trim_start();
        rest.starts_with('%') || rest.starts_with("percent") || rest.starts_with("prozent")
    });
    match said_as_percent {
        Some(n) => Some(n.0),
        None => match found.as_slice() {
            // "The bedroom one" picks a lamp: "one" alone is no level.
            [one] if &text[one.1..one.2] != "one" => {
                // A fraction said alone is of the whole: "half" is 50%.
                Some(if one.0 > 0.0 && one.0 < 1.0 {
                    one.0 * 100.0
                } else {
                    one.0
                })
            }
            _ => None,
        },
    }
    .filter(|n| (0.0..=100.0).contains(n))
}
