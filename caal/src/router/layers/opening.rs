//! Words that open a request and are no part of it: "ok", "so" before it
//! ("ok, resume the cake timer"), and a lead that asks with the verb in
//! -ing ("would you mind opening the garage door"), read as the request
//! itself ("open the garage door"); and polite words that close it ("…, if
//! you don't mind"), neither a condition nor a "not", and a reason said
//! after it ("… so it's not pitch black when I get in"). The words are the
//! language's (`opening_words`, `gerund_leads`, `gerund_endings`,
//! `closing_words`, `reason_words`).

use super::*;

impl Router {
    /// `text` without the words that open it (`opening_words`) or close it
    /// (`closing_words`), and with a lead that asks with the verb in -ing
    /// (`gerund_leads`) said as the verb itself; `None` when nothing opens
    /// or closes it, or nothing is left.
    pub(in crate::router) fn opened(&self, text: &str) -> Option<String> {
        let mut rest = text;
        while let Some(after) = lead_off(rest, &self.words.opening_words) {
            rest = after;
        }
        while let Some(before) = tail_off(rest, &self.words.closing_words) {
            rest = before;
        }
        if let Some(before) = self.reason_off(rest) {
            rest = before;
        }
        if let Some(after) = lead_off(rest, &self.words.gerund_leads) {
            let (word, tail) = after.split_once(' ').unwrap_or((after, ""));
            if let Some(verb) = self.verb_of_gerund(word) {
                return Some(format!("{verb} {tail}").trim_end().to_owned());
            }
        }
        (rest.len() < text.len()).then(|| rest.to_owned())
    }

    /// `text` before the reason or purpose it closes with (`reason_words`
    /// and someone or something it is about, an `aside_openers` word or a
    /// determiner: "turn on the living room lights so it's not pitch black
    /// when I get in", "… because the baby's asleep"); `None` when it
    /// closes with none, or what is before it asks for nothing in words
    /// (`request_verbs`).
    fn reason_off<'t>(&self, text: &'t str) -> Option<&'t str> {
        let w = &self.words;
        let about = |word: &str| {
            let word = word.split('\'').next().unwrap_or_default();
            (w.aside_openers.iter().chain(&w.determiners)).any(|o| o == word)
        };
        w.reason_words.iter().find_map(|reason| {
            let (before, after) = text.split_once(&format!(" {reason} "))?;
            let before = before.trim_end_matches([',', ' ']);
            // A request said in words: "the kitchen lights are really bright
            // since we changed the bulbs" is a remark.
            (self.asks_in_words(before) && about(after.split(' ').next()?)).then_some(before)
        })
    }

    /// The verb a template knows that `word` is a form of (`gerund_endings`):
    /// the ending taken off ("opening": open), an "e" put back ("closing":
    /// close), or a doubled last letter made single ("setting": set).
    fn verb_of_gerund(&self, word: &str) -> Option<String> {
        let vocabulary = self.vocabulary.get_or_init(|| vocabulary_of(self));
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric());
        self.words.gerund_endings.iter().find_map(|ending| {
            let stem = bare
                .strip_suffix(ending.as_str())
                .filter(|s| s.len() >= 2)?;
            let mut last_two = stem.chars().rev().take(2);
            let doubled = last_two.next() == last_two.next();
            let forms = [
                Some(stem.to_owned()),
                Some(format!("{stem}e")),
                doubled.then(|| stem[..stem.len() - 1].to_owned()),
            ];
            forms
                .into_iter()
                .flatten()
                .find(|verb| vocabulary.contains_key(verb))
        })
    }
}

/// `text` before the first of `phrases` (longest first) it closes with, a
/// comma before it and a stop after it allowed ("…, if you don't mind?");
/// none when nothing is before it.
fn tail_off<'t>(text: &'t str, phrases: &[String]) -> Option<&'t str> {
    let text = text.trim_end_matches(['.', '!', '?', ' ']);
    phrases.iter().find_map(|phrase| {
        let before = text.strip_suffix(phrase.as_str())?.strip_suffix(' ')?;
        let before = before.trim_end_matches([',', ' ']);
        (!before.is_empty()).then_some(before)
    })
}

/// `text` after the first of `phrases` (longest first) it opens with, a
/// comma or stop after it allowed ("ok, turn …"); none when nothing follows.
pub(super) fn lead_off<'t>(text: &'t str, phrases: &[String]) -> Option<&'t str> {
    phrases.iter().find_map(|phrase| {
        let after = text.strip_prefix(phrase.as_str())?;
        let after = after
            .trim_start_matches([',', '.', '!'])
            .strip_prefix(' ')?;
        (!after.trim().is_empty()).then_some(after)
    })
}
