//! Numbers and durations as people say them: digits ("21.5", "1/2"), words
//! ("fifty", "twenty-one", "a hundred", "two and a half"; German
//! "einundzwanzig", "zweieinhalb"), and durations ("ten minutes", "an hour
//! and a half", "half an hour", "1h30", "90 seconds").
//!
//! Hand-written: the crates that read number words (none well kept for
//! Rust) cover one language each and do not report where a number ends,
//! which the template matcher needs to try every reading ("twenty" and
//! "twenty one" both start "twenty one minutes").

use super::Lang;

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
        Lang::En => english_at(text, pos, &mut out),
        Lang::De => german_at(text, pos, &mut out),
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
fn words_from(text: &str, pos: usize, max: usize) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let mut start = pos;
    while out.len() < max && start < text.len() {
        let end = text[start..].find(' ').map_or(text.len(), |i| start + i);
        out.push((&text[start..end], end));
        start = end + 1;
    }
    out
}

fn english_unit(word: &str) -> Option<f64> {
    Some(match word {
        "zero" => 0.0,
        "one" => 1.0,
        "two" => 2.0,
        "three" => 3.0,
        "four" => 4.0,
        "five" => 5.0,
        "six" => 6.0,
        "seven" => 7.0,
        "eight" => 8.0,
        "nine" => 9.0,
        "ten" => 10.0,
        "eleven" => 11.0,
        "twelve" => 12.0,
        "thirteen" => 13.0,
        "fourteen" => 14.0,
        "fifteen" => 15.0,
        "sixteen" => 16.0,
        "seventeen" => 17.0,
        "eighteen" => 18.0,
        "nineteen" => 19.0,
        _ => return None,
    })
}

fn english_tens(word: &str) -> Option<f64> {
    Some(match word {
        "twenty" => 20.0,
        "thirty" => 30.0,
        "forty" | "fourty" => 40.0,
        "fifty" => 50.0,
        "sixty" => 60.0,
        "seventy" => 70.0,
        "eighty" => 80.0,
        "ninety" => 90.0,
        _ => return None,
    })
}

/// Where an English number word stands in the number being read.
#[derive(Clone, Copy, PartialEq)]
enum Last {
    Nothing,
    Unit,
    Tens,
    /// "hundred", "thousand", or "and" after them: a unit or tens may follow.
    Scale,
}

/// English number words: a small state machine over the words from `pos`,
/// recording every prefix that is a whole number ("twenty", "twenty one").
fn english_at(text: &str, pos: usize, out: &mut Vec<(f64, usize)>) {
    let words = words_from(text, pos, 10);
    // "a couple of degrees", "a couple of minutes": two.
    if let [(a, _), ("couple", couple), rest @ ..] = words.as_slice()
        && matches!(*a, "a" | "another")
    {
        let end = match rest.first() {
            Some(("of", of)) => *of,
            _ => *couple,
        };
        out.push((2.0, end));
        return;
    }
    let mut total = 0.0; // thousands, done
    let mut current = 0.0; // below a thousand, in progress
    let mut last = Last::Nothing;
    let mut i = 0;
    while i < words.len() {
        let (w, end) = words[i];
        let next = words.get(i + 1).map(|(w, _)| *w);
        if let Some(u) = english_unit(w) {
            let fits = match last {
                Last::Nothing | Last::Scale => true,
                Last::Tens => (1.0..10.0).contains(&u),
                Last::Unit => false,
            };
            if !fits {
                break;
            }
            current += u;
            last = Last::Unit;
        } else if let Some(t) = english_tens(w) {
            if !matches!(last, Last::Nothing | Last::Scale) {
                break;
            }
            current += t;
            last = Last::Tens;
        } else if matches!(w, "a" | "an")
            && last == Last::Nothing
            && matches!(next, Some("hundred" | "thousand" | "dozen"))
        {
            current = 1.0;
            last = Last::Unit;
            i += 1;
            continue;
        } else if matches!(w, "hundred" | "dozen")
            && matches!(last, Last::Unit | Last::Tens)
            && current % 100.0 != 0.0
            && current < 100.0
        {
            current *= if w == "hundred" { 100.0 } else { 12.0 };
            last = Last::Scale;
        } else if w == "thousand" && last != Last::Nothing && current > 0.0 {
            total += current * 1000.0;
            current = 0.0;
            last = Last::Scale;
        } else if w == "and" && last != Last::Nothing {
            // "two and a half", "one hundred and five"
            if matches!(next, Some("a" | "one"))
                && words.get(i + 2).map(|(w, _)| *w) == Some("half")
            {
                out.push((total + current + 0.5, words[i + 2].1));
                return;
            }
            if last != Last::Scale {
                break;
            }
            i += 1;
            continue;
        } else if w == "point" && last != Last::Nothing {
            // "twenty one point five": one digit after the point is what people say.
            if let Some((d, dend)) = words
                .get(i + 1)
                .and_then(|(w, e)| english_unit(w).filter(|d| *d < 10.0).map(|d| (d, *e)))
            {
                out.push((total + current + d / 10.0, dend));
            }
            return;
        } else if w == "half" && last == Last::Nothing {
            // "half" alone is a number only where a range asks for one.
            out.push((0.5, end));
            return;
        } else {
            break;
        }
        out.push((total + current, end));
        i += 1;
    }
}

fn german_basic(word: &str) -> Option<f64> {
    Some(match word {
        "null" => 0.0,
        "ein" | "eins" | "eine" | "einen" | "einem" | "einer" => 1.0,
        "zwei" | "zwo" => 2.0,
        "drei" => 3.0,
        "vier" => 4.0,
        "fünf" | "fuenf" => 5.0,
        "sechs" => 6.0,
        "sieben" => 7.0,
        "acht" => 8.0,
        "neun" => 9.0,
        "zehn" => 10.0,
        "elf" => 11.0,
        "zwölf" | "zwoelf" => 12.0,
        "dreizehn" => 13.0,
        "vierzehn" => 14.0,
        "fünfzehn" | "fuenfzehn" => 15.0,
        "sechzehn" => 16.0,
        "siebzehn" => 17.0,
        "achtzehn" => 18.0,
        "neunzehn" => 19.0,
        "zwanzig" => 20.0,
        "dreißig" | "dreissig" => 30.0,
        "vierzig" => 40.0,
        "fünfzig" | "fuenfzig" => 50.0,
        "sechzig" => 60.0,
        "siebzig" => 70.0,
        "achtzig" => 80.0,
        "neunzig" => 90.0,
        "halb" | "halbe" | "halben" => 0.5,
        _ => return None,
    })
}

/// One German number word, compounds included: "einundzwanzig",
/// "hundertfünfzig", "zweitausend", "zweieinhalb".
fn german_word(word: &str) -> Option<f64> {
    if word.is_empty() {
        return None;
    }
    if let Some(v) = german_basic(word) {
        return Some(v);
    }
    if let Some(head) = word.strip_suffix("einhalb") {
        return if head.is_empty() {
            Some(1.5)
        } else {
            german_word(head).map(|v| v + 0.5)
        };
    }
    for (unit, scale) in [("tausend", 1000.0), ("hundert", 100.0)] {
        if let Some(at) = word.find(unit) {
            let (head, tail) = (&word[..at], &word[at + unit.len()..]);
            let times = if head.is_empty() {
                1.0
            } else {
                german_word(head)?
            };
            let rest = if tail.is_empty() {
                0.0
            } else {
                german_word(tail)?
            };
            return Some(times * scale + rest);
        }
    }
    let (unit, tens) = word.split_once("und")?;
    let u = german_basic(unit).filter(|u| (1.0..10.0).contains(u))?;
    let t = german_basic(tens).filter(|t| *t >= 20.0 && *t % 10.0 == 0.0)?;
    Some(u + t)
}

fn german_at(text: &str, pos: usize, out: &mut Vec<(f64, usize)>) {
    let words = words_from(text, pos, 3);
    let Some(&(first, end)) = words.first() else {
        return;
    };
    let Some(value) = german_word(first) else {
        return;
    };
    out.push((value, end));
    // "zwei komma fünf", "zwei und ein halb"
    match (words.get(1), words.get(2)) {
        (Some(("komma", _)), Some((d, dend))) => {
            if let Some(d) = german_basic(d).filter(|d| *d < 10.0) {
                out.push((value + d / 10.0, *dend));
            }
        }
        (Some(("einhalb", hend)), _) => out.push((value + 0.5, *hend)),
        _ => {}
    }
}

/// A duration as people say it, in seconds: "10 minutes", "ten minutes",
/// "an hour and a half", "half an hour", "1 hour 30 minutes", "1h30",
/// "a minute and a half", "90 secs", "2 days", "zehn Minuten".
pub fn parse_duration(lang: Lang, text: &str) -> Option<u64> {
    let text = super::normalize(text);
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
        for tail in [" and a half", " and one half", " und ein halb", " einhalb"] {
            if text[end..].starts_with(tail) {
                amount += 0.5;
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

/// The number in front of a duration unit: digits, words, "a"/"an", "half
/// a(n)", "a quarter of a(n)", "three quarters of a(n)".
fn duration_amount(lang: Lang, text: &str, pos: usize) -> Option<(f64, usize)> {
    let rest = &text[pos..];
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
    let seconds = match word {
        "s" | "sec" | "secs" | "second" | "seconds" | "sekunde" | "sekunden" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" | "minuten" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" | "stunde" | "stunden" => 3_600.0,
        "d" | "day" | "days" | "tag" | "tage" | "tagen" => 86_400.0,
        "week" | "weeks" | "woche" | "wochen" => 604_800.0,
        _ => return None,
    };
    Some((seconds, word_end))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(lang: Lang, text: &str) -> Vec<f64> {
        numbers_at(lang, text, 0)
            .into_iter()
            .map(|(v, _)| v)
            .collect()
    }

    #[test]
    fn english_number_words_give_every_reading() {
        assert_eq!(read(Lang::En, "fifty percent"), vec![50.0]);
        assert_eq!(read(Lang::En, "twenty one minutes"), vec![20.0, 21.0]);
        assert_eq!(read(Lang::En, "a hundred"), vec![100.0]);
        assert_eq!(
            read(Lang::En, "one hundred and five"),
            vec![1.0, 100.0, 105.0]
        );
        assert_eq!(read(Lang::En, "two and a half hours"), vec![2.0, 2.5]);
        assert_eq!(read(Lang::En, "18 and a half"), vec![18.0, 18.5]);
        assert_eq!(read(Lang::En, "18 and a halfpipe"), vec![18.0]);
        assert_eq!(
            read(Lang::En, "twenty one point five degrees"),
            vec![20.0, 21.0, 21.5]
        );
        assert_eq!(read(Lang::En, "21.5 degrees"), vec![21.5]);
        assert_eq!(read(Lang::En, "50%"), vec![50.0]);
        assert_eq!(read(Lang::En, "1/2 a minute"), vec![0.5]);
        // Two units in a row are two numbers, not one.
        assert_eq!(read(Lang::En, "one two"), vec![1.0]);
        assert!(read(Lang::En, "lights").is_empty());
        assert!(read(Lang::En, "12abc").is_empty());
    }

    #[test]
    fn german_compounds_read_whole() {
        assert_eq!(read(Lang::De, "einundzwanzig grad"), vec![21.0]);
        assert_eq!(read(Lang::De, "hundertfünfzig"), vec![150.0]);
        assert_eq!(read(Lang::De, "zweieinhalb stunden"), vec![2.5]);
        assert_eq!(read(Lang::De, "zwanzig komma fünf"), vec![20.0, 20.5]);
        assert!(read(Lang::De, "und").is_empty());
    }

    #[test]
    fn durations_read_like_people_say_them() {
        let d = |t| parse_duration(Lang::En, t);
        assert_eq!(d("10 minutes"), Some(600));
        assert_eq!(d("ten minutes"), Some(600));
        assert_eq!(d("an hour and a half"), Some(5400));
        assert_eq!(d("five more minutes"), Some(300));
        assert_eq!(d("two extra hours"), Some(7200));
        assert_eq!(d("half an hour"), Some(1800));
        assert_eq!(d("a minute and a half"), Some(90));
        assert_eq!(d("1 hour 30 minutes"), Some(5400));
        assert_eq!(d("1 hour and 30 minutes"), Some(5400));
        assert_eq!(d("twenty five seconds"), Some(25));
        assert_eq!(d("1h30"), Some(5400));
        assert_eq!(d("90s"), Some(90));
        assert_eq!(d("2days"), Some(172_800));
        assert_eq!(d("5:30"), Some(330));
        assert_eq!(d("a quarter of an hour"), Some(900));
        assert_eq!(d("10 fortnights"), None);
        assert_eq!(d("minutes"), None);
        assert_eq!(d(""), None);
        assert_eq!(parse_duration(Lang::De, "zehn Minuten"), Some(600));
        assert_eq!(parse_duration(Lang::De, "eine halbe Stunde"), Some(1800));
    }
}
