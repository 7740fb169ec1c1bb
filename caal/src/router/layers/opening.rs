//! Words that open a request and are no part of it: "ok", "so" before it
//! ("ok, resume the cake timer"), and a lead that asks with the verb in
//! -ing ("would you mind opening the garage door"), read as the request
//! itself ("open the garage door"). The words are the language's
//! (`opening_words`, `gerund_leads`, `gerund_endings`).

use super::*;

impl Router {
    /// `text` without the words that open it (`opening_words`), and with
    /// a lead that asks with the verb in -ing (`gerund_leads`) said as the
    /// verb itself; `None` when nothing opens it, or nothing is left.
    pub(in crate::router) fn opened(&self, text: &str) -> Option<String> {
        let mut rest = text;
        while let Some(after) = lead_off(rest, &self.words.opening_words) {
            rest = after;
        }
        if let Some(after) = lead_off(rest, &self.words.gerund_leads) {
            let (word, tail) = after.split_once(' ').unwrap_or((after, ""));
            if let Some(verb) = self.verb_of_gerund(word) {
                return Some(format!("{verb} {tail}").trim_end().to_owned());
            }
        }
        (rest.len() < text.len()).then(|| rest.to_owned())
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

/// `text` after the first of `phrases` (longest first) it opens with, a
/// comma or stop after it allowed ("ok, turn …"); none when nothing follows.
fn lead_off<'t>(text: &'t str, phrases: &[String]) -> Option<&'t str> {
    phrases.iter().find_map(|phrase| {
        let after = text.strip_prefix(phrase.as_str())?;
        let after = after
            .trim_start_matches([',', '.', '!'])
            .strip_prefix(' ')?;
        (!after.trim().is_empty()).then_some(after)
    })
}
