//! Words that open a request and are no part of it: "ok", "so" before it
//! ("ok, resume the cake timer"), and a lead that asks with the verb in
//! -ing ("would you mind opening the garage door"), read as the request
//! itself ("open the garage door"); and polite words that close it ("…, if
//! you don't mind"), neither a condition nor a "not", and a reason said
//! after it ("… so it's not pitch black when I get in"); clauses said to
//! someone else around it ("yeah one sec mum. …"), and a wish said as a
//! condition ("I wouldn't mind if the study lights were at 60 percent").
//! The words are the language's (`opening_words`, `gerund_leads`,
//! `gerund_endings`, `closing_words`, `reason_words`, `said_to_others`,
//! `wish_leads`, `wish_verbs`).

use super::*;

/// At most this many words before a reason, with no verb, may be a request
/// said without one ("thermostat to 19 before I go to sleep").
const FRAGMENT_WORDS: usize = 5;

impl Router {
    /// `text` restated where it is said otherwise (stammered, texted, for
    /// someone else, of what a thing needs, placed, near enough, clipped:
    /// restated.rs; a device by where it is, "the same for": described.rs),
    /// without clauses said to someone else or a wish's lead, without the words that open it
    /// (`opening_words`) or close it (`closing_words`), and with a lead that
    /// asks with the verb in -ing (`gerund_leads`) said as the verb itself;
    /// `None` when none of these changes it, or nothing is left.
    pub(in crate::router) fn opened(&self, text: &str) -> Option<String> {
        // Said otherwise (restated.rs), to someone else, or as a wish.
        let mut said = text.to_owned();
        for restate in [
            Self::unstammered,
            Self::texted,
            Self::others_off,
            Self::on_behalf,
            Self::wish_off,
            Self::passive_off,
            Self::placed_off,
            Self::back_off,
            Self::approximate_off,
            Self::clipped,
            Self::described_off,
            Self::same_again,
            Self::addressed_off,
            Self::pointed_off,
            Self::of_named,
            Self::tag_asked,
        ] {
            if let Some(restated) = restate(self, &said) {
                said = restated;
            }
        }
        let mut rest = said.as_str();
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
            if let Some(verb) = self.verb_of(word, &self.words.gerund_endings) {
                return Some(format!("{verb} {tail}").trim_end().to_owned());
            }
        }
        (rest != text).then(|| rest.to_owned())
    }

    /// `text` without the clauses at its start or end said to someone
    /// else (`said_to_others`, after opening or correction words, with at
    /// most two words more: "yeah one sec mum. put the garage light on.
    /// no, not you mum"); `None` when none is, or nothing else is left.
    pub(in crate::router) fn others_off(&self, text: &str) -> Option<String> {
        const MORE: usize = 2;
        let w = &self.words;
        let clauses = super::clause::clauses(text);
        let aside = |part: &[&str]| {
            let said = part.join(" ");
            let mut rest = said.as_str();
            while let Some(after) = [
                &w.opening_words,
                &w.corrections,
                &w.corrections_between_stops,
            ]
            .into_iter()
            .find_map(|leads| lead_off(rest, leads))
            {
                rest = after;
            }
            (w.said_to_others.iter()).any(|phrase| {
                rest.strip_prefix(phrase.as_str())
                    .filter(|after| after.is_empty() || after.starts_with(' '))
                    .is_some_and(|after| after.split_whitespace().count() <= MORE)
            })
        };
        let n = clauses.len();
        let start = (1..n).rev().find(|&k| aside(&clauses[..k])).unwrap_or(0);
        let end = (start + 1..n).find(|&k| aside(&clauses[k..])).unwrap_or(n);
        (start > 0 || end < n).then(|| clauses[start..end].join(", "))
    }

    /// The state a wish lead (`wish_leads`, after any opening words) says
    /// as a condition, without the verb of being (`wish_verbs`) that says
    /// it: "I wouldn't mind if the study lights were at 60 percent" is
    /// "the study lights at 60 percent"; `None` when no wish lead opens
    /// `text`, or no such verb follows.
    pub(in crate::router) fn wish_off(&self, text: &str) -> Option<String> {
        let w = &self.words;
        let mut rest = text;
        let after = loop {
            match lead_off(rest, &w.wish_leads) {
                Some(after) => break after,
                None => rest = lead_off(rest, &w.opening_words)?,
            }
        };
        let (subject, state) = (w.wish_verbs.iter())
            .filter_map(|verb| after.split_once(&format!(" {verb} ")))
            .min_by_key(|(subject, _)| subject.len())?;
        Some(format!("{subject} {state}"))
    }

    /// `text` before the reason or purpose it closes with (`reason_words`
    /// and someone or something it is about, an `aside_openers` word or a
    /// determiner: "turn on the living room lights so it's not pitch black
    /// when I get in", "… because the baby's asleep"); `None` when it
    /// closes with none, or what is before it asks for nothing in words
    /// (`request_verbs`) and is more than a few words or says how something
    /// is.
    fn reason_off<'t>(&self, text: &'t str) -> Option<&'t str> {
        let w = &self.words;
        let about = |word: &str| {
            let word = word.split('\'').next().unwrap_or_default();
            (w.aside_openers.iter().chain(&w.determiners)).any(|o| o == word)
        };
        w.reason_words.iter().find_map(|reason| {
            let (before, after) = text.split_once(&format!(" {reason} "))?;
            let before = before.trim_end_matches([',', ' ']);
            // A request said in words, or in a few words that say how
            // nothing is ("thermostat to 19 before I go to sleep"): "the
            // kitchen lights are really bright since we changed the bulbs"
            // is a remark.
            let fragment = before.split(' ').count() <= FRAGMENT_WORDS
                && !before.split(' ').any(|word| w.is_being(word));
            ((self.asks_in_words(before) || fragment) && about(after.split(' ').next()?))
                .then_some(before)
        })
    }
}

/// `text` before the first of `phrases` (longest first) it closes with, a
/// comma before it and a stop after it allowed ("…, if you don't mind?");
/// none when nothing is before it.
pub(super) fn tail_off<'t>(text: &'t str, phrases: &[String]) -> Option<&'t str> {
    let text = text.trim_end_matches(['.', '!', '?', ' ']);
    phrases.iter().find_map(|phrase| {
        let before = text.strip_suffix(phrase.as_str())?.strip_suffix(' ')?;
        let before = before.trim_end_matches([',', ' ']);
        (!before.is_empty()).then_some(before)
    })
}

/// `text` after the first of `phrases` (longest first) it opens with, a
/// comma, stop or colon after it allowed ("ok, turn …", "two things: …");
/// none when nothing follows.
pub(super) fn lead_off<'t>(text: &'t str, phrases: &[String]) -> Option<&'t str> {
    phrases.iter().find_map(|phrase| {
        let after = text.strip_prefix(phrase.as_str())?;
        let after = after
            .trim_start_matches([',', '.', '!', ':', ';'])
            .strip_prefix(' ')?;
        (!after.trim().is_empty()).then_some(after)
    })
}
