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
        let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
        let mut at = 0;
        while let Some(n) = phrase_at(&words[at..], &self.words.opening_words) {
            at += n;
        }
        let mut rest: Vec<String> = words[at..].iter().map(|w| (*w).to_owned()).collect();
        if let Some(n) = phrase_at(&rest, &self.words.gerund_leads)
            && let Some(verb) = rest.get(n).and_then(|w| self.verb_of_gerund(w))
        {
            rest.drain(..n);
            rest[0] = verb;
        } else if at == 0 {
            return None;
        }
        (!rest.is_empty()).then(|| rest.join(" "))
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

/// How many words a phrase of `phrases` (longest first) takes at the start
/// of `words`, a comma after it allowed ("ok, turn …").
fn phrase_at<S: AsRef<str>>(words: &[S], phrases: &[String]) -> Option<usize> {
    phrases.iter().find_map(|phrase| {
        let n = phrase.split(' ').count();
        let said: Vec<&str> = words
            .get(..n)?
            .iter()
            .map(|w| w.as_ref().trim_end_matches([',', '.', '!']))
            .collect();
        (said.join(" ") == *phrase && words.len() > n).then_some(n)
    })
}
