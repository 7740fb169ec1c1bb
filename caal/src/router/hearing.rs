//! How surely a spoken request was heard, and what that does to it: a
//! guess from a transcript with an unsure word, or a request whose own
//! values (a timer's name, an item, a number) were heard unsurely, is
//! asked about before it runs ("Set a timer named price for 18 minutes?").
//! What the templates matched word for word is held to the values' words
//! only: the other words were matched, the values are whatever was heard.

use super::{Intent, RouteDecision, Router};
use crate::{
    auth::AuthLevel,
    command::ParamValue,
    trace::events::HeardWord,
    understand::{
        Reading,
        reading::{HeardDoubt, ValueDoubt, round3},
    },
};

/// What whisper heard of a spoken request, and the bars it is held to.
#[derive(Clone, Copy, Debug)]
pub struct Hearing<'a> {
    /// The transcript's least sure word token.
    pub least: f32,
    pub words: &'a [HeardWord],
    pub bars: Bars,
}

/// How surely a spoken request's words must be heard for it to run
/// without asking: `voice.min_guess_word` for a guessed request's least
/// sure word, `voice.min_value_word` for each of its values' words.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bars {
    pub guess: f32,
    pub value: f32,
    /// A thing's value the language does not know (`known_things`).
    pub unknown: f32,
}

impl Bars {
    pub fn of(voice: &crate::config::VoiceConfig) -> Self {
        Self {
            guess: voice.min_guess_word,
            value: voice.min_value_word,
            unknown: voice.min_unknown_thing_word,
        }
    }
}

/// A value of a request heard below its bar.
#[derive(Debug, PartialEq)]
struct Unsure {
    param: String,
    said: String,
    p: f32,
    bar: f32,
}

impl Router {
    /// A spoken request is asked about first (raised to one confirmation)
    /// when it was guessed (by meaning, among other words, or by a model)
    /// from a transcript whose least sure word was heard below the guess
    /// bar ("the activate the lights" near "activate the lights"), or when
    /// the words of one of its values were heard below the value bar: a
    /// name, an item or a number misheard is set as heard, and a template
    /// matches every other word ("price timer" for "rice timer"). Why is
    /// kept in `understood.heard`.
    pub fn heard(&self, mut d: RouteDecision, hearing: &Hearing<'_>) -> RouteDecision {
        let guessed = d.layer.guessed();
        let Intent::Chain(chain) = &mut d.intent else {
            return d;
        };
        if chain.chain_level >= AuthLevel::CONFIRM {
            return d;
        }
        let unsure_guess = guessed && hearing.least < hearing.bars.guess;
        let unsure_value = chain
            .commands
            .iter()
            .flat_map(|c| {
                c.params.iter().filter_map(|(param, value)| {
                    let said = c.raw_params.get(param);
                    let said = said.map(String::as_str);
                    let p = value_heard(value, said, hearing.words, is_free_text(param))?;
                    let bar = self.value_bar(param, value, hearing.bars);
                    (p < bar).then(|| Unsure {
                        param: param.clone(),
                        said: said.map_or_else(|| value.to_string(), str::to_owned),
                        p,
                        bar,
                    })
                })
            })
            .min_by(|a, b| a.p.total_cmp(&b.p));
        if !unsure_guess && unsure_value.is_none() {
            return d;
        }
        chain.chain_level = AuthLevel::CONFIRM;
        d.auth_level = AuthLevel::CONFIRM;
        let shown = |x: f32| round3(f64::from(x));
        let heard = HeardDoubt {
            least: shown(hearing.least),
            bar: shown(hearing.bars.guess),
            value: unsure_value.map(|u| ValueDoubt {
                param: u.param,
                said: u.said,
                p: shown(u.p),
                bar: shown(u.bar),
            }),
        };
        d.understood
            .get_or_insert_with(|| Reading::by(d.layer))
            .heard = Some(heard);
        d
    }

    /// The bar a value's words are held to: a thing's (a list's item, a
    /// timer's name) that the language does not know is held to the higher
    /// of the two ("out milk", heard at 0.59 for "oat milk").
    fn value_bar(&self, param: &str, value: &ParamValue, bars: Bars) -> f32 {
        match value {
            ParamValue::Text(t)
                if matches!(param, "item" | "name")
                    && !self.words.knows_thing(&t.to_lowercase()) =>
            {
                bars.value.max(bars.unknown)
            }
            _ => bars.value,
        }
    }
}

/// A parameter whose value is words as said (a list's item, a timer's
/// name, what to be reminded of), not a word of the home's.
fn is_free_text(param: &str) -> bool {
    matches!(param, "item" | "name" | "what")
}

/// The words of a transcript heard at `bar` or above, lower case (what
/// `Context::sure_words` holds).
pub fn sure_words(words: &[HeardWord], bar: f32) -> Vec<String> {
    words
        .iter()
        .filter(|w| w.p >= bar)
        .map(|w| w.word.to_lowercase())
        .collect()
}

/// Whether whisper heard each word of `said` that has an opposite
/// (`pairs`: "on"/"off", "pause"/"resume") so surely that the other side
/// cannot fit the audio within `margin` (the doubt check's, in
/// log-likelihood), so weighing the two against the audio (a decode of
/// each, 70-270 ms on 2 cores) can be spared. A word heard at probability
/// `p` leaves at most `1 - p` to every other word in its place: the other
/// side is behind by ln(p / (1 - p)) there alone. Twice the margin is
/// asked, so the rest of the sentence cannot make up for it. Never sure:
/// a side word after one "un" is heard as ("and lock": the doubt is in
/// the word before), or one not found among the words heard.
pub fn sides_heard_surely(
    said: &str,
    (pairs, heard_as): (&[[String; 2]], &[String]),
    heard: &[HeardWord],
    margin: f64,
) -> bool {
    let bar = 1.0 / (1.0 + (-2.0 * margin).exp());
    let words: Vec<&str> = said.split(' ').collect();
    let mut sides = 0;
    for (i, w) in words.iter().enumerate() {
        if !pairs.iter().any(|[a, b]| a == w || b == w) {
            continue;
        }
        sides += 1;
        if i > 0 && heard_as.iter().any(|h| h == words[i - 1]) {
            return false;
        }
        let p = heard
            .iter()
            .filter(|h| h.word.eq_ignore_ascii_case(w))
            .map(|h| f64::from(h.p))
            .reduce(f64::min);
        if p.is_none_or(|p| p < bar) {
            return false;
        }
    }
    sides > 0
}

/// How surely a value's words were heard: the least sure of the words it
/// was read from, found together in the transcript; for a number not
/// found so (said as words, read as digits), the least sure of the
/// transcript's words with digits; for a free text's words a reading of
/// the transcript said in place of others, 0. None: no word to judge it by.
fn value_heard(
    value: &ParamValue,
    said: Option<&str>,
    heard: &[HeardWord],
    free_text: bool,
) -> Option<f32> {
    let text = said.map_or_else(|| value.to_string(), str::to_owned);
    let wanted: Vec<String> = HeardWord::pieces(&text)
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if !wanted.is_empty() && heard.len() >= wanted.len() {
        let found = heard
            .windows(wanted.len())
            .filter(|w| w.iter().zip(&wanted).all(|(h, want)| &h.word == want))
            .map(|w| w.iter().map(|h| h.p).fold(1.0f32, f32::min))
            .reduce(f32::min);
        if found.is_some() {
            return found;
        }
    }
    match value {
        ParamValue::Integer(_) | ParamValue::Number(_) | ParamValue::Seconds(_) => heard
            .iter()
            .filter(|h| h.word.chars().any(|c| c.is_ascii_digit()))
            .map(|h| h.p)
            .reduce(f32::min),
        // A free text's words a reading put there, not heard ("put the
        // bins out" read "put the mins out"): not heard at all. (A name of
        // the home or a state is the home's word for what was said.)
        ParamValue::Text(_) => (free_text && said.is_some()).then_some(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(said: &[(&str, f32)]) -> Vec<HeardWord> {
        said.iter()
            .map(|(w, p)| HeardWord {
                word: (*w).to_owned(),
                p: *p,
            })
            .collect()
    }

    #[test]
    fn a_value_is_judged_by_the_words_it_was_read_from() {
        let heard = words(&[
            ("set", 0.9),
            ("a", 0.95),
            ("price", 0.04),
            ("timer", 0.9),
            ("for", 0.9),
            ("18", 0.6),
            ("minutes", 0.97),
        ]);
        let name = ParamValue::Text("price".into());
        assert_eq!(value_heard(&name, Some("price"), &heard, true), Some(0.04));
        // A duration read from "18 minutes": its words together.
        let duration = ParamValue::Seconds(1080);
        assert_eq!(
            value_heard(&duration, Some("18 minutes"), &heard, true),
            Some(0.6)
        );
        // Said as words, read as a number: the transcript's digits.
        assert_eq!(
            value_heard(&duration, Some("1080"), &heard, true),
            Some(0.6)
        );
        // Text not among the words heard: nothing to judge it by.
        assert_eq!(
            value_heard(&ParamValue::Text("kitchen".into()), None, &heard, true),
            None
        );
        // Words a reading said in place of others ("mins" for "bins"):
        // not heard at all.
        assert_eq!(
            value_heard(
                &ParamValue::Text("kitchen".into()),
                Some("kitchen"),
                &heard,
                true
            ),
            Some(0.0)
        );
        // A name of the home is the home's word for what was heard.
        assert_eq!(
            value_heard(
                &ParamValue::Text("kitchen".into()),
                Some("kitchen"),
                &heard,
                false
            ),
            None
        );
        // Nothing heard as digits: no judgement of a number either.
        let plain = words(&[("lights", 0.2), ("on", 0.9)]);
        assert_eq!(
            value_heard(&ParamValue::Integer(5), None, &plain, true),
            None
        );
    }
}
