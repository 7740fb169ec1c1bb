//! Understanding what people say, below the rules: the home model (areas,
//! devices and their other names), Home Assistant's open sentence library
//! matched by a Rust implementation of its template syntax, CAAL's own
//! sentences in the same syntax, numbers and durations in words, and
//! several requests in one sentence. Pure: no I/O but loading the library
//! file once; the router turns what is understood into commands.

pub mod clock;
pub mod embed;
pub mod home;
pub mod layer;
pub mod lexicon;
pub mod library;
pub mod mentions;
pub mod names;
pub mod numbers;
pub mod reading;
pub mod semantic;
pub mod sounds;
pub mod spelling;
pub mod suite;
pub mod template;
pub mod words;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

pub use embed::Embedder;
pub use home::Home;
pub use layer::Layer;
pub use library::{Library, LibraryError};
pub use reading::{Reading, Rewrite};
pub use semantic::Semantic;

/// Lower case, single spaces, no surrounding punctuation: what rules match.
pub fn lowered(text: &str) -> String {
    let lowered = text.to_lowercase();
    let words: Vec<&str> = lowered.split_whitespace().collect();
    words
        .join(" ")
        // A sentence's closing "." or "?" goes; "40%" keeps its sign.
        .trim_matches(|c: char| {
            c.is_ascii_punctuation() && c != '\'' && c != '%' || c.is_whitespace()
        })
        .to_owned()
}

/// A language the sentence library and the number reader both know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    En,
    De,
}

impl Lang {
    pub fn parse(code: &str) -> Option<Self> {
        match code.to_ascii_lowercase().split(['-', '_']).next() {
            Some("en") => Some(Lang::En),
            Some("de") => Some(Lang::De),
            _ => None,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::De => "de",
        }
    }

    /// "%" as a word.
    pub fn percent(self) -> &'static str {
        match self {
            Lang::En => "percent",
            Lang::De => "prozent",
        }
    }
}

/// What templates match: lower case, typographic quotes made plain,
/// punctuation a space (but `'` inside words, `.`, `,`, `/` and `:` between
/// digits, `%`, `°`), hyphens a space, single spaces, trimmed.
pub fn normalize(text: &str) -> String {
    normalize_mapped(text).0
}

/// `normalize`, with where each of its bytes came from in `text` (one entry
/// more: the end), so a wildcard's words can be taken as they were said.
pub fn normalize_mapped(text: &str) -> (String, Vec<usize>) {
    // Lower-casing can change a character's length; keep the original offset of each.
    let mut chars: Vec<(usize, char)> = Vec::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        for lower in c.to_lowercase() {
            let lower = match lower {
                '’' | '‘' | '`' | '´' => '\'',
                c => c,
            };
            chars.push((at, lower));
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len() + 1);
    for (i, &(at, c)) in chars.iter().enumerate() {
        let before = i.checked_sub(1).map(|j| chars[j].1);
        let after = chars.get(i + 1).map(|x| x.1);
        let between = |f: fn(char) -> bool| before.is_some_and(f) && after.is_some_and(f);
        let keep = c.is_alphanumeric()
            || matches!(c, '%' | '°' | '½')
            || (c == '\'' && between(char::is_alphanumeric))
            || (matches!(c, '.' | ',' | '/' | ':') && between(|c| c.is_ascii_digit()));
        if keep {
            out.push(c);
            map.extend(std::iter::repeat_n(at, c.len_utf8()));
        } else if !out.ends_with(' ') && !out.is_empty() {
            out.push(' ');
            map.push(at);
        }
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    map.truncate(trimmed);
    // The end: just past the last character kept.
    let end = match (out.chars().last(), map.last()) {
        (Some(last), Some(&at)) => {
            at + text[at..]
                .chars()
                .next()
                .map_or(last.len_utf8(), char::len_utf8)
        }
        _ => 0,
    };
    map.push(end);
    (out, map)
}

/// What ends a clause.
pub const CLAUSE_MARKS: [char; 5] = [',', ';', '?', '!', '.'];

/// ` w1 w2 … `: a sentence's words between single spaces, its clause marks
/// left out, to find whole words and phrases in.
pub fn padded_words(text: &str) -> String {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || CLAUSE_MARKS.contains(&c))
        .filter(|w| !w.is_empty())
        .collect();
    format!(" {} ", words.join(" "))
}

/// A slot of an understood request: its value and the words it was said with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Slot {
    pub value: Value,
    pub said: String,
    /// What the value carries for context checks (an entity's domain and area).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<BTreeMap<String, String>>,
    /// Where a wildcard took it in the prepared input (until the value is taken as given).
    #[serde(skip)]
    pub wildcard_span: Option<(usize, usize)>,
}

impl Slot {
    /// A value taken from `said` (empty when the meaning fixed it or the
    /// client gave it), with nothing for context checks.
    pub fn taken(value: Value, said: &str) -> Slot {
        Slot {
            value,
            said: said.to_owned(),
            context: None,
            wildcard_span: None,
        }
    }

    /// The value as a command parameter's text.
    pub fn text(&self) -> String {
        match &self.value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// What the template layer understood.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Understood {
    /// The intent, in Home Assistant's names (`HassTurnOn`) or CAAL's own.
    pub intent: String,
    pub slots: BTreeMap<String, Slot>,
    /// The template that matched, as written.
    pub template: String,
    /// `library` (Home Assistant's sentences) or `config` (CAAL's own).
    pub source: &'static str,
    /// How much of the sentence the template's own words matched, 0–1:
    /// 1 when no wildcard took any of it.
    pub confidence: f64,
    /// The template means "here" and the round does not know where it was said.
    pub needs_area: bool,
}

/// What the round knows about where it was said (a satellite's area) and
/// what was asked just before it in the conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Context {
    pub area: Option<String>,
    /// Said aloud and heard by speech to text (not typed): a word may be
    /// one that sounds like what was said.
    pub spoken: bool,
    /// The conversation's last requests, oldest first, as said: what "turn
    /// them off" or "is it locked" points back at.
    pub earlier: Vec<String>,
    /// What the conversation's last round asked back: "the kitchen" or
    /// "the desk lamp" now answers it.
    pub asked: Option<Asked>,
    /// For speech, how well other words fit the audio: readings of a
    /// mishearing are weighed against what was heard.
    pub listen: Option<Listen>,
    /// For speech, the words whisper heard surely (each word's least sure
    /// token at `voice.min_value_word` or above), lower case; `None` when
    /// typed or not known. A name a wildcard took of words heard surely is
    /// taken as said, not read by sound as another ("set a pizza timer").
    pub sure_words: Option<Vec<String>>,
    /// When the round's time to understand runs out: the layers still to
    /// run are skipped and what was said goes to the fallback.
    pub deadline: Option<std::time::Instant>,
}

/// A sentence of more words than this is not read whole by the sentence
/// layers (templates, spans, sounds, meaning): only its clauses are, each
/// within this bound, so the work per round stays bounded whatever is sent
/// (the longest request in any suite here is 12 words).
pub const MAX_WORDS: usize = 48;

impl Context {
    /// Whether every word of `words` was heard surely (false when typed, or
    /// when nothing is known of how surely it was heard).
    pub fn heard_surely(&self, words: &str) -> bool {
        let Some(sure) = &self.sure_words else {
            return false;
        };
        // Cut as whisper's tokens are made words, so the two compare.
        let mut pieces = crate::trace::events::HeardWord::pieces(words)
            .filter(|w| !w.is_empty())
            .peekable();
        pieces.peek().is_some() && pieces.all(|w| sure.iter().any(|s| s.eq_ignore_ascii_case(w)))
    }

    /// Whether the round's time to understand has run out.
    pub fn out_of_time(&self) -> bool {
        self.deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
    }
}

/// A question the conversation's last round asked back.
#[derive(Clone, Debug, PartialEq)]
pub enum Asked {
    /// "Which room?", about this request (as said).
    Room(String),
    /// "Did you mean … or …?": the requests it could be.
    Choice(Vec<String>),
}

/// Whisper's log-likelihood of each text as the transcript of the speech a
/// round heard (higher fits better); `None` when it could not be scored.
#[derive(Clone)]
pub struct Listen(std::sync::Arc<Scorer>);

/// Scores texts against speech: one log-likelihood a text.
type Scorer = dyn Fn(&[String]) -> Option<Vec<f32>> + Send + Sync;

impl Listen {
    pub fn new(score: impl Fn(&[String]) -> Option<Vec<f32>> + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(score))
    }

    pub fn score(&self, texts: &[String]) -> Option<Vec<f32>> {
        (self.0)(texts).filter(|s| s.len() == texts.len())
    }
}

impl std::fmt::Debug for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listen(..)")
    }
}

impl PartialEq for Listen {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_words_map_back_to_what_was_said() {
        let said = "Add SECRET_REF:github_token:d00b to the List";
        let (n, map) = normalize_mapped(said);
        assert_eq!(n, "add secret ref github token d00b to the list");
        let start = n.find("secret").unwrap();
        let end = n.find(" to the").unwrap();
        assert_eq!(&said[map[start]..map[end]], "SECRET_REF:github_token:d00b");
        assert_eq!(map[n.len()], said.len());
    }

    #[test]
    fn normalizing_keeps_what_templates_need() {
        assert_eq!(
            normalize("  Can you turn on the Kitchen-Lights?! "),
            "can you turn on the kitchen lights"
        );
        assert_eq!(
            normalize("What’s the temp? Set it to 21.5°"),
            "what's the temp set it to 21.5°"
        );
        assert_eq!(
            normalize("50% brightness, please."),
            "50% brightness please"
        );
        assert_eq!(normalize("a 1/2 hour timer"), "a 1/2 hour timer");
        assert_eq!(normalize("'quoted' words"), "quoted words");
        assert_eq!(
            normalize("Schalte das Licht in der Küche ein"),
            "schalte das licht in der küche ein"
        );
    }
}
