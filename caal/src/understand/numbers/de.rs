//! German number words, compounds included ("einundzwanzig", "zweieinhalb").

use super::words_from;

pub(super) fn german_basic(word: &str) -> Option<f64> {
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
pub(super) fn german_word(word: &str) -> Option<f64> {
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

pub(super) fn german_at(text: &str, pos: usize, out: &mut Vec<(f64, usize)>) {
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
