//! English number words ("twenty-one", "a hundred and five", "two and a
//! half", "a couple of").

use super::words_from;

/// The English number words below twenty, and the tens.
pub(super) const UNITS: [(&str, f64); 20] = [
    ("zero", 0.0),
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("thirteen", 13.0),
    ("fourteen", 14.0),
    ("fifteen", 15.0),
    ("sixteen", 16.0),
    ("seventeen", 17.0),
    ("eighteen", 18.0),
    ("nineteen", 19.0),
];
pub(super) const TENS: [(&str, f64); 9] = [
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("forty", 40.0),
    ("fourty", 40.0),
    ("fifty", 50.0),
    ("sixty", 60.0),
    ("seventy", 70.0),
    ("eighty", 80.0),
    ("ninety", 90.0),
];
/// The other words a number is said with.
pub(super) const SCALES: [&str; 6] = ["hundred", "thousand", "dozen", "half", "couple", "point"];

fn english_unit(word: &str) -> Option<f64> {
    UNITS.iter().find(|(w, _)| *w == word).map(|(_, v)| *v)
}

fn english_tens(word: &str) -> Option<f64> {
    TENS.iter().find(|(w, _)| *w == word).map(|(_, v)| *v)
}

/// Where an English number word stands in the number being read.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Last {
    Nothing,
    Unit,
    Tens,
    /// "hundred", "thousand", or "and" after them: a unit or tens may follow.
    Scale,
}

/// English number words: a small state machine over the words from `pos`,
/// recording every prefix that is a whole number ("twenty", "twenty one").
pub(super) fn english_at(text: &str, pos: usize, out: &mut Vec<(f64, usize)>) {
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
