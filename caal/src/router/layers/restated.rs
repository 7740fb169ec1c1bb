//! Requests said otherwise than a template says them, restated before they
//! are read: a word stammered or a word looked for ("b-b-bananas", "the,
//! the", "the... what is it, the pizza timer"), written as texts are ("milk
//! n eggs 2 the list pls"), asked for someone else ("my wife wants the
//! heating up"), said of the thing that needs it ("the back door needs
//! locking", "the garage should be shut"), with a word that says where, not
//! which way ("turn off the lights up in the yard"), a return to how it
//! was ("put the heating back up to 20"), a number said near
//! enough ("about ten minutes"), or clipped ("lights. office. on."). The
//! words are the language's (`broken_endings`, `hesitations`, `text_words`,
//! `text_digit_after`, `behalf_people`, `behalf_leads`, `passive_needs`,
//! `passive_be`, `passive_people`, `place_particles`, `place_prepositions`,
//! `back_words`, `back_before`, `approximate_before`, `approximate_after`).
//! Each restatement is kept only where the sentence so read is understood.

use super::*;
use crate::understand::mentions::mentions;

/// At most this many words say the thing that needs something done.
const THING_WORDS: usize = 5;

impl Router {
    /// `text` with a stammered word said once: its broken-off starts
    /// ("b-b-bananas", "c-can") and a short word said twice across a comma
    /// or dots (`broken_endings`: "turn the, the lounge lights off", "the...
    /// the"), without words said while looking for the next (`hesitations`).
    pub(in crate::router) fn unstammered(&self, text: &str) -> Option<String> {
        // Words said while looking for the next, with their mark ("what is it,").
        let mut said = text.to_owned();
        for h in &self.words.hesitations {
            for mark in [",", "..."] {
                said = said.replace(&format!(" {h}{mark} "), " ");
            }
        }
        let mut out: Vec<String> = Vec::new();
        for word in said.split(' ') {
            let parts: Vec<&str> = word.split('-').collect();
            let last = parts[parts.len() - 1];
            let stammered = parts.len() > 1
                && parts[..parts.len() - 1]
                    .iter()
                    .all(|p| !p.is_empty() && p.len() <= 2 && last.starts_with(p));
            let word = if stammered { last } else { word };
            let again = out.last().is_some_and(|before| {
                before.trim_end_matches([',', '.']) == word
                    && before.ends_with([',', '.'])
                    && self.words.broken_endings.iter().any(|b| b == word)
            });
            if again {
                out.pop();
            }
            out.push(word.to_owned());
        }
        let said = out.join(" ");
        (said != text).then_some(said)
    }

    /// `text` with words written as texts are read as said (`text_words`:
    /// "n", "pls"); a digit written for a word ("2" for "to") only before a
    /// determiner or after one of `text_digit_after` ("remind me 2 call
    /// gran", "oat milk 2 the list").
    pub(in crate::router) fn texted(&self, text: &str) -> Option<String> {
        let w = &self.words;
        let words: Vec<&str> = text.split(' ').collect();
        let said: Vec<&str> = (words.iter().enumerate())
            .map(|(i, word)| {
                let bare = without_mark(word);
                let Some(meant) = w.text_words.get(bare) else {
                    return *word;
                };
                let digit = bare.chars().all(|c| c.is_ascii_digit());
                let before_determiner =
                    (words.get(i + 1)).is_some_and(|next| w.determiners.iter().any(|d| d == next));
                let after_object = i > 0 && w.text_digit_after.iter().any(|a| a == words[i - 1]);
                if digit && !before_determiner && !after_object || bare != *word {
                    *word
                } else {
                    meant.as_str()
                }
            })
            .collect();
        let said = said.join(" ");
        (said != text).then_some(said)
    }

    /// A request asked for someone else (`behalf_people` and one of
    /// `behalf_leads`), said as the speaker's own: "my wife wants the
    /// heating up a couple of degrees" is "I want the heating up a couple of
    /// degrees"; "my dad's asking if the garage is closed" is "can you check
    /// if the garage is closed".
    pub(in crate::router) fn on_behalf(&self, text: &str) -> Option<String> {
        let w = &self.words;
        let rest = (w.behalf_people.iter()).find_map(|p| text.strip_prefix(p.as_str()))?;
        w.behalf_leads.iter().find_map(|(lead, said)| {
            let after = match lead.strip_prefix('\'') {
                Some(_) => rest.strip_prefix(lead.as_str()),
                None => rest.strip_prefix(' ')?.strip_prefix(lead.as_str()),
            }?;
            let after = after.strip_prefix(' ')?;
            Some(format!("{said} {after}").trim_start().to_owned())
        })
    }

    /// What a thing is said to need, as the request for it: "the back door
    /// needs locking" (`passive_needs` and a verb in -ing) and "the garage
    /// should be shut" (`passive_be` and the verb as done to it) are "lock
    /// the back door" and "shut the garage"; the words after the verb stay
    /// after the thing ("the porch light needs to be switched on": "switch
    /// the porch light on").
    pub(in crate::router) fn passive_off(&self, text: &str) -> Option<String> {
        let w = &self.words;
        // After "should be" the verb may be as it is ("shut"); after
        // "needs" it is said in -ing ("I need light" is no "light me").
        let forms = [
            (&w.passive_be, &w.past_endings, true),
            (&w.passive_needs, &w.gerund_endings, false),
        ];
        forms.into_iter().find_map(|(leads, endings, bare)| {
            leads.iter().find_map(|lead| {
                let (thing, after) = text.split_once(&format!(" {lead} "))?;
                // Someone who needs it done to them is whom it is done to
                // ("I'll need reminding": "remind me").
                let thing = w.passive_people.get(thing).map_or(thing, String::as_str);
                // The thing is a few words that ask nothing themselves ("remind
                // me … that the car needs moving" is no request to move), and
                // no one ("we need to be …").
                if thing.split(' ').count() > THING_WORDS
                    || self.asks_in_words(thing)
                    || w.did_subjects.iter().any(|s| s == thing)
                {
                    return None;
                }
                let (word, tail) = after.split_once(' ').unwrap_or((after, ""));
                let verb = (bare.then(|| self.verb_of(word, &[])).flatten())
                    .or_else(|| self.verb_of(word, endings).filter(|v| v != word))?;
                Some(format!("{verb} {thing} {tail}").trim_end().to_owned())
            })
        })
    }

    /// A word that says where, not which way (`place_particles`), before a
    /// word of place (`place_prepositions`) and a room or the speaker's
    /// place, left out where another word says a state (`state_opposites`):
    /// "turn off the lights up in the yard" is "turn off the lights in the
    /// yard"; "turn the lights up in the kitchen" stays as said.
    pub(in crate::router) fn placed_off(&self, text: &str) -> Option<String> {
        let w = &self.words;
        let words: Vec<&str> = text.split(' ').collect();
        let at = (0..words.len().saturating_sub(2)).find(|&i| {
            if !is_one_of(&w.place_particles, words[i])
                || !is_one_of(&w.place_prepositions, words[i + 1])
            {
                return false;
            }
            let rest = &words[i + 2..];
            let determiners = (rest.iter())
                .take_while(|d| w.determiners.iter().any(|x| x == *d))
                .count();
            let named = rest[determiners..].join(" ");
            let lead = format!("{} ", w.in_word);
            let place = w.speaker_place.iter().any(|(phrase, _)| {
                phrase.strip_prefix(&lead).is_some_and(|p| {
                    without_mark(&named) == p || named.starts_with(&format!("{p} "))
                })
            });
            let room = mentions(&self.home, &named, None)
                .iter()
                .any(|m| m.slot == "area" && m.span().0 == 0);
            let state_elsewhere = (words.iter().enumerate())
                .any(|(j, word)| j != i && is_one_of(&w.state_words, word));
            (place || room) && state_elsewhere
        })?;
        let mut said = words;
        said.remove(at);
        Some(said.join(" "))
    }

    /// `text` without a word that says a thing returns to how it was
    /// (`back_words`) before a word of state, direction or level
    /// (`back_before`): "put the heating back up to 20", "turn the kitchen
    /// lights back on"; "the back door" stays.
    pub(in crate::router) fn back_off(&self, text: &str) -> Option<String> {
        let w = &self.words;
        let words: Vec<&str> = text.split(' ').collect();
        let at = (0..words.len().saturating_sub(1)).find(|&i| {
            i > 0 && is_one_of(&w.back_words, words[i]) && is_one_of(&w.back_before, words[i + 1])
        })?;
        let mut said = words;
        said.remove(at);
        Some(said.join(" "))
    }

    /// `text` without the words that say a number is near enough
    /// (`approximate_before` a number or a length of time, `approximate_after`
    /// one, and "-ish" on a number): "set a timer for about ten minutes",
    /// "remind me in twenty minutes or so", "ten-ish minutes".
    pub(in crate::router) fn approximate_off(&self, text: &str) -> Option<String> {
        let w = &self.words;
        // Every sentence is read here first: one that holds none of the
        // words is left before any word is parsed as a number.
        if !(w.approximate_before.iter().chain(&w.approximate_after))
            .any(|a| text.contains(a.as_str()))
        {
            return None;
        }
        let lang = self.library.lang;
        let words: Vec<&str> = text.split(' ').collect();
        let number = |word: &str| {
            !crate::understand::numbers::numbers_in(lang, without_mark(word)).is_empty()
        };
        let amount = |word: &str| {
            let word = without_mark(word);
            number(word)
                || w.number_units.iter().any(|u| u == word)
                || crate::understand::numbers::parse_duration(lang, &format!("2 {word}")).is_some()
        };
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let rest = words[i..].join(" ");
            let before = (w.approximate_before.iter()).find(|a| {
                rest.strip_prefix(a.as_str())
                    .and_then(|after| after.strip_prefix(' '))
                    .is_some_and(|after| {
                        // A number, or a length of time said from here ("an hour").
                        let next: Vec<&str> = after.split(' ').take(4).collect();
                        number(next[0])
                            || (2..=next.len()).any(|n| {
                                let said = next[..n].join(" ");
                                crate::understand::numbers::parse_duration(lang, &said).is_some()
                            })
                    })
            });
            let after = (out.last()).filter(|last| amount(last)).and_then(|_| {
                (w.approximate_after.iter()).find(|a| {
                    rest.strip_prefix(a.as_str()).is_some_and(|after| {
                        after.is_empty() || after.starts_with([' ', ',', '.', '?', '!'])
                    })
                })
            });
            if let Some(phrase) = before.or(after) {
                let n = phrase.split(' ').count();
                // A mark after the phrase stays with the word before it.
                let mark =
                    &words[i + n - 1][phrase.split(' ').next_back().unwrap_or_default().len()..];
                if let Some(last) = out.last_mut() {
                    last.push_str(mark);
                }
                i += n;
                continue;
            }
            let word = words[i];
            let stem = without_mark(word);
            let mark = &word[stem.len()..];
            // Said on the number itself: "ten-ish".
            let number_said = (w.approximate_after.iter())
                .filter(|a| !a.contains(' '))
                .find_map(|a| stem.strip_suffix(a.as_str()))
                .map(|s| s.trim_end_matches('-'))
                .filter(|s| number(s));
            match number_said {
                Some(number_said) => out.push(format!("{number_said}{mark}")),
                None => out.push(word.to_owned()),
            }
            i += 1;
        }
        let said = out.join(" ");
        (said != text).then_some(said)
    }

    /// A request clipped to a few words, stops between them ("lights.
    /// office. on. now.", "lights. off. off!"), read as one phrase with a
    /// word said again once, and the room it names first ("office lights
    /// on"). At least two pieces of a few words, no question, and no verb
    /// that asks (`request_verbs`): that is a sentence.
    pub(in crate::router) fn clipped(&self, text: &str) -> Option<String> {
        const CLIPPED_WORDS: usize = 5;
        const PIECE_WORDS: usize = 3;
        let w = &self.words;
        // Pieces of a few words between stops, at least two, no question.
        let pieces: Vec<&str> = (text.split(['.', ',', '!']))
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        if pieces.len() < 2
            || text.contains('?')
            || (pieces.iter()).any(|p| p.split(' ').count() > PIECE_WORDS)
        {
            return None;
        }
        let mut words: Vec<&str> = Vec::new();
        let mut again = false;
        for word in text.split(' ') {
            let bare = word.trim_matches(|c: char| crate::understand::CLAUSE_MARKS.contains(&c));
            if words.last() == Some(&bare) {
                again = true;
            } else if !bare.is_empty() {
                words.push(bare);
            }
        }
        if words.len() > CLIPPED_WORDS
            || (words.iter()).any(|word| w.request_verbs.iter().any(|v| v == word))
        {
            return None;
        }
        let said = words.join(" ");
        let named = mentions(&self.home, &said, None);
        // Read so only where a word was said again or the room comes later.
        let rooms: Vec<_> = named.iter().filter(|m| m.slot == "area").collect();
        let room = match rooms.as_slice() {
            [m] if m.span().0 > 0 => *m,
            _ => return again.then_some(said),
        };
        let (start, end) = room.span();
        let rest = format!("{} {}", &said[..start], &said[end..]);
        let rest = rest.split_whitespace().collect::<Vec<_>>().join(" ");
        let said = format!("{} {rest}", &said[start..end]);
        (said != text).then_some(said)
    }

    /// The verb a template knows that `word` is a form of, by `endings`:
    /// the word itself ("shut"), or the ending taken off ("opening": open),
    /// an "e" put back ("closing": close), or a doubled last letter made
    /// single ("setting": set).
    pub(in crate::router) fn verb_of(&self, word: &str, endings: &[String]) -> Option<String> {
        let vocabulary = self.vocabulary.get_or_init(|| vocabulary_of(self));
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric());
        let is_verb = |v: &String| {
            vocabulary.contains_key(v) && self.words.request_verbs.iter().any(|r| r == v)
        };
        if is_verb(&bare.to_owned()) {
            return Some(bare.to_owned());
        }
        endings.iter().find_map(|ending| {
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

/// Whether `word`, without its mark, is one of `list`.
fn is_one_of(list: &[String], word: &str) -> bool {
    list.iter().any(|l| l == without_mark(word))
}
