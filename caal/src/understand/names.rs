//! Names a sentence gives to a thing of its own that is not the home's: a
//! timer's ("the pasta timer", "a timer called bread", "a timer for the
//! eggs"), found as a span before a meaning is chosen, so whichever layer
//! reads the request (a template, the nearest example) keeps the name. The
//! words are the language pack's (`timer_words`, `name_leads`,
//! `name_follows`, `not_names`).

use super::{Lang, lowered, numbers};
use crate::config::LanguageConfig;

/// How the language says a timer's name.
#[derive(Clone, Debug, Default)]
pub struct TimerNames {
    lang: Option<Lang>,
    /// The words for a timer ("timer", "countdown").
    nouns: Vec<String>,
    /// Words a name follows anywhere ("called", "named").
    leads: Vec<String>,
    /// Words a name follows before a timer word ("the", "my").
    follows: Vec<String>,
    /// Words that are never part of a name ("me", "for", "please").
    not_names: Vec<String>,
}

/// At most this many words make a name ("chocolate cake").
const NAME_WORDS: usize = 3;

impl TimerNames {
    pub fn compile(words: &LanguageConfig, lang: Lang) -> TimerNames {
        let list = |l: &[String]| l.iter().map(|w| lowered(w)).collect();
        TimerNames {
            lang: Some(lang),
            nouns: list(&words.timer_words),
            leads: list(&words.name_leads),
            follows: list(&words.name_follows),
            not_names: list(&words.not_names),
        }
    }

    /// Whether `word` (normalised) is a word for a timer ("timer").
    pub fn is_timer_word(&self, word: &str) -> bool {
        self.nouns.iter().any(|n| n == word)
    }

    /// The timer's name `text` (normalised) gives, if it gives one:
    /// after a lead ("called bread"); after a timer word and the word "for"
    /// ("a timer for the eggs", "timer for pasta 12 minutes"); or between a
    /// word a name follows, or a length of time, and a timer word ("how's
    /// the bread timer going", "a 12 minute pasta timer"), or the start of
    /// a sentence that sets a length ("pasta timer 12 minutes"). A number, a
    /// length of time or a word of `not_names` is never part of one.
    pub fn find(&self, text: &str) -> Option<String> {
        let lang = self.lang?;
        let words: Vec<&str> = text
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''))
            .filter(|w| !w.is_empty())
            .collect();
        let is = |list: &[String], w: &str| list.iter().any(|x| x == w);
        let measure = |w: &str| {
            !numbers::numbers_in(lang, w).is_empty()
                || numbers::parse_duration(lang, &format!("2 {w}")).is_some()
        };
        let fits = |w: &str| {
            !measure(w)
                && !is(&self.not_names, w)
                && !is(&self.nouns, w)
                && !is(&self.leads, w)
                && !is(&self.follows, w)
        };
        // The words from `at` on that can be a name, at most NAME_WORDS.
        let name_from = |at: usize| -> Option<String> {
            let mut at = at;
            while words.get(at).is_some_and(|w| is(&self.follows, w)) {
                at += 1;
            }
            let taken: Vec<&str> = words[at.min(words.len())..]
                .iter()
                .take_while(|w| fits(w))
                .take(NAME_WORDS)
                .copied()
                .collect();
            (!taken.is_empty()).then(|| taken.join(" "))
        };
        if let Some(at) = words.iter().position(|w| is(&self.leads, w))
            && let Some(name) = name_from(at + 1)
        {
            return Some(name);
        }
        for (i, w) in words.iter().enumerate() {
            if !is(&self.nouns, w) {
                continue;
            }
            if words.get(i + 1) == Some(&"for")
                && let Some(name) = name_from(i + 2)
            {
                return Some(name);
            }
            let mut start = i;
            while start > 0 && i - start < NAME_WORDS && fits(words[start - 1]) {
                start -= 1;
            }
            let before = start.checked_sub(1).map(|b| words[b]);
            // At the start of a sentence that sets a length ("pasta timer
            // 12 minutes"), a name needs nothing before it.
            let sets_a_length = || words[i + 1..].iter().any(|w| measure(w));
            if start < i
                && match before {
                    Some(b) => is(&self.follows, b) || measure(b),
                    None => sets_a_length(),
                }
            {
                return Some(words[start..i].join(" "));
            }
        }
        None
    }
}

impl TimerNames {
    /// A timer said by its name alone at the end of a sentence that says no
    /// timer word ("how long is left on the pasta", "pause the pasta"): the
    /// name (after a word a name follows, at most NAME_WORDS words that can
    /// be one) and the sentence with a timer word put after it.
    pub fn named_alone(&self, text: &str) -> Option<(String, String)> {
        let lang = self.lang?;
        let noun = self.nouns.first()?;
        let words: Vec<&str> = text.split_whitespace().collect();
        let is = |list: &[String], w: &str| list.iter().any(|x| x == w);
        if words.iter().any(|w| is(&self.nouns, w)) {
            return None;
        }
        let fits = |w: &str| {
            numbers::numbers_in(lang, w).is_empty()
                && numbers::parse_duration(lang, &format!("2 {w}")).is_none()
                && !is(&self.not_names, w)
                && !is(&self.leads, w)
                && !is(&self.follows, w)
        };
        let mut start = words.len();
        while start > 0 && words.len() - start < NAME_WORDS && fits(words[start - 1]) {
            start -= 1;
        }
        let before = start.checked_sub(1).map(|b| words[b])?;
        (start < words.len() && is(&self.follows, before)).then(|| {
            (
                words[start..].join(" "),
                format!("{} {noun}", words.join(" ")),
            )
        })
    }

    /// The length a timer is known by that `text` (normalised) says
    /// before a timer word, after a word a name follows ("get rid of the
    /// 20 minute timer": 1200 seconds); none when it says none.
    pub fn start_of(&self, text: &str) -> Option<u64> {
        let lang = self.lang?;
        let words: Vec<&str> = text.split_whitespace().collect();
        let is = |list: &[String], w: &str| list.iter().any(|x| x == w);
        words.iter().enumerate().find_map(|(i, w)| {
            if !is(&self.nouns, w) {
                return None;
            }
            (i.saturating_sub(NAME_WORDS + 1)..i).find_map(|j| {
                let after_a_lead = j > 0 && is(&self.follows, words[j - 1]);
                after_a_lead
                    .then(|| numbers::parse_duration(lang, &words[j..i].join(" ")))
                    .flatten()
            })
        })
    }

    /// Whether words a wildcard took for a name are none: they hold a word
    /// a name follows after their first ("hold the timer for a sec" names
    /// no timer "hold the", "pause the cake timer for a sec" none "pause the
    /// cake": what comes before such a word is no part of a name), or are
    /// all words never part of one ("set me a timer": no timer "me").
    pub fn cut_short(&self, said: &str) -> bool {
        let words: Vec<String> = said.split_whitespace().map(str::to_lowercase).collect();
        let is = |list: &[String], w: &String| list.iter().any(|x| x == w);
        words.iter().skip(1).any(|w| is(&self.follows, w))
            || (!words.is_empty() && words.iter().all(|w| is(&self.not_names, w)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> TimerNames {
        let words = LanguageConfig {
            timer_words: vec!["timer".into(), "countdown".into()],
            name_leads: vec!["called".into(), "named".into()],
            name_follows: vec!["the".into(), "my".into(), "a".into(), "an".into()],
            not_names: vec!["me".into(), "for".into(), "please".into(), "going".into()],
            ..LanguageConfig::default()
        };
        TimerNames::compile(&words, Lang::En)
    }

    #[test]
    fn a_timer_is_named_before_its_word_after_a_lead_or_after_for() {
        let n = names();
        assert_eq!(
            n.find("how's the bread timer going").as_deref(),
            Some("bread")
        );
        assert_eq!(n.find("a 12 minute pasta timer").as_deref(), Some("pasta"));
        assert_eq!(
            n.find("make a timer called bread for 40 minutes")
                .as_deref(),
            Some("bread")
        );
        assert_eq!(
            n.find("timer for pasta 12 minutes").as_deref(),
            Some("pasta")
        );
        assert_eq!(
            n.find("start my chocolate cake timer").as_deref(),
            Some("chocolate cake")
        );
        assert_eq!(n.find("pasta timer 12 minutes").as_deref(), Some("pasta"));
    }

    #[test]
    fn a_timer_said_by_its_name_alone_is_read_with_its_word() {
        let n = names();
        assert_eq!(
            n.named_alone("how long is left on the pasta"),
            Some((
                "pasta".to_owned(),
                "how long is left on the pasta timer".to_owned()
            ))
        );
        assert_eq!(
            n.named_alone("pause the chocolate cake").map(|(n, _)| n),
            Some("chocolate cake".to_owned())
        );
        // A timer word said, a number at the end, or nothing a name follows: none.
        assert_eq!(n.named_alone("how long is left on the timer"), None);
        assert_eq!(n.named_alone("add 5 minutes"), None);
        assert_eq!(n.named_alone("how long is left"), None);
    }

    #[test]
    fn a_timer_known_by_its_length_is_found_by_it() {
        let n = names();
        assert_eq!(n.start_of("get rid of the 20 minute timer"), Some(1200));
        assert_eq!(n.start_of("how's the one hour timer doing"), Some(3600));
        assert_eq!(n.start_of("set a timer for 20 minutes"), None);
        assert_eq!(n.start_of("stop the pasta timer"), None);
        assert!(n.cut_short("hold the"));
        assert!(n.cut_short("pause the cake"));
        assert!(!n.cut_short("the cake"));
        assert!(n.cut_short("me"));
        assert!(!n.cut_short("pasta"));
    }

    #[test]
    fn words_that_only_say_which_timer_or_how_long_are_no_name() {
        let n = names();
        for said in [
            "set a timer for 10 minutes",
            "set a 10 minute timer",
            "stop the timer",
            "kill timer",
            "kill timer now",
            "set a timer for me please",
            "pause the one hour timer",
        ] {
            assert_eq!(n.find(said), None, "{said}");
        }
    }
}
