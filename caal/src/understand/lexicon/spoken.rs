//! Numbers and words no dictionary has, as they are said: digits as
//! number words ("21" is "twenty one", "3rd" "third") and letter rules.

use super::*;

pub(super) const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
pub(super) const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// A whole number in English words, up to 9,999 ("21": twenty one).
pub fn number_words(n: u64) -> String {
    match n {
        0..=19 => ONES[n as usize].to_owned(),
        20..=99 => {
            let tens = TENS[(n / 10) as usize];
            if n.is_multiple_of(10) {
                tens.to_owned()
            } else {
                format!("{tens} {}", ONES[(n % 10) as usize])
            }
        }
        100..=999 => in_units(n, 100, "hundred"),
        1000..=9999 => in_units(n, 1000, "thousand"),
        _ => n.to_string(),
    }
}

/// `n` as a count of `unit` ("three hundred") and the rest in words.
pub(super) fn in_units(n: u64, unit: u64, name: &str) -> String {
    let counted = format!("{} {name}", ONES[(n / unit) as usize]);
    match n % unit {
        0 => counted,
        rest => format!("{counted} {}", number_words(rest)),
    }
}

/// A token written in digits as it is said: "45" forty five, "21.5" twenty
/// one point five, "1/2" one half, "50%" fifty percent, "20°" twenty
/// degrees, "3rd" third; `None` for a token that is no number.
pub fn spell_number(token: &str) -> Option<String> {
    let (body, unit) = if let Some(b) = token.strip_suffix('%') {
        (b, " percent")
    } else if let Some(b) = token.strip_suffix('°') {
        (b, " degrees")
    } else {
        (token, "")
    };
    if body.is_empty() {
        return match token {
            "%" => Some("percent".into()),
            "°" => Some("degrees".into()),
            _ => None,
        };
    }
    let whole = |s: &str| -> Option<String> {
        (!s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok().map(number_words))
            .flatten()
    };
    let spoken = if let Some(w) = whole(body) {
        w
    } else if let Some((a, b)) = body.split_once(['.', ',']) {
        let digits: Vec<String> = b
            .bytes()
            .filter(u8::is_ascii_digit)
            .map(|d| ONES[usize::from(d - b'0')].to_owned())
            .collect();
        (digits.len() == b.len()).then_some(())?;
        format!("{} point {}", whole(a)?, digits.join(" "))
    } else if let Some((a, b)) = body.split_once('/') {
        let over = match b {
            "2" => "half".to_owned(),
            "3" => "third".to_owned(),
            "4" => "quarter".to_owned(),
            other => format!("over {}", whole(other)?),
        };
        format!("{} {over}", whole(a)?)
    } else {
        let n = body.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let suffix = &body[n.len()..];
        if !matches!(suffix, "st" | "nd" | "rd" | "th") {
            return None;
        }
        ordinal(&whole(n)?)?
    };
    Some(format!("{spoken}{unit}"))
}

/// "twenty one" as "twenty first".
pub(super) fn ordinal(words: &str) -> Option<String> {
    let (head, last) = match words.rsplit_once(' ') {
        Some((h, l)) => (format!("{h} "), l),
        None => (String::new(), words),
    };
    let last = match last {
        "one" => "first".to_owned(),
        "two" => "second".to_owned(),
        "three" => "third".to_owned(),
        "five" => "fifth".to_owned(),
        "eight" => "eighth".to_owned(),
        "nine" => "ninth".to_owned(),
        "twelve" => "twelfth".to_owned(),
        w if w.ends_with('y') => format!("{}ieth", &w[..w.len() - 1]),
        w => format!("{w}th"),
    };
    Some(format!("{head}{last}"))
}

/// Letter rules for a word no dictionary has: the longest spelling first
/// ("tch", "sh", "ee"), a silent final "e", "c" and "g" soft before e, i, y.
pub(super) fn by_letters(word: &str) -> Vec<Phone> {
    const RULES: &[(&str, &[&str])] = &[
        ("tch", &["CH"]),
        ("sch", &["S", "K"]),
        ("ch", &["CH"]),
        ("sh", &["SH"]),
        ("th", &["TH"]),
        ("ph", &["F"]),
        ("wh", &["W"]),
        ("ck", &["K"]),
        ("ng", &["NG"]),
        ("qu", &["K", "W"]),
        ("gh", &[]),
        ("ee", &["IY"]),
        ("ea", &["IY"]),
        ("oo", &["UW"]),
        ("ou", &["AW"]),
        ("ow", &["OW"]),
        ("ai", &["EY"]),
        ("ay", &["EY"]),
        ("oi", &["OY"]),
        ("oy", &["OY"]),
        ("au", &["AO"]),
        ("aw", &["AO"]),
        ("ie", &["IY"]),
        ("ei", &["EY"]),
        ("ue", &["UW"]),
        ("ew", &["UW"]),
        ("ar", &["AA", "R"]),
        ("er", &["ER"]),
        ("ir", &["ER"]),
        ("ur", &["ER"]),
        ("or", &["AO", "R"]),
        ("a", &["AE"]),
        ("e", &["EH"]),
        ("i", &["IH"]),
        ("o", &["AA"]),
        ("u", &["AH"]),
        ("b", &["B"]),
        ("d", &["D"]),
        ("f", &["F"]),
        ("g", &["G"]),
        ("h", &["HH"]),
        ("j", &["JH"]),
        ("k", &["K"]),
        ("l", &["L"]),
        ("m", &["M"]),
        ("n", &["N"]),
        ("p", &["P"]),
        ("r", &["R"]),
        ("s", &["S"]),
        ("t", &["T"]),
        ("v", &["V"]),
        ("w", &["W"]),
        ("x", &["K", "S"]),
        ("z", &["Z"]),
    ];
    let w = word.to_lowercase();
    let b = w.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &w[i..];
        let soft = |c: u8| matches!(b.get(i + 1), Some(b'e' | b'i' | b'y')) && b[i] == c;
        if soft(b'c') {
            out.push(ph("S"));
            i += 1;
            continue;
        }
        if soft(b'g') {
            out.push(ph("JH"));
            i += 1;
            continue;
        }
        if b[i] == b'e' && i + 1 == b.len() && i > 1 {
            break; // a silent final e
        }
        // A doubled consonant is said once ("pizza").
        if i > 0 && b[i] == b[i - 1] && !b"aeiou".contains(&b[i]) {
            i += 1;
            continue;
        }
        // A final "a" is unstressed.
        if b[i] == b'a' && i + 1 == b.len() && i > 0 {
            out.push(ph("AH"));
            break;
        }
        if b[i] == b'y' {
            out.push(if i == 0 { ph("Y") } else { ph("IY") });
            i += 1;
            continue;
        }
        match RULES
            .iter()
            .find(|(spelling, _)| rest.starts_with(spelling))
        {
            Some((spelling, phones)) => {
                out.extend(phones.iter().map(|p| ph(p)));
                i += spelling.len();
            }
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    out
}
