//! What a sentence speaks of, and whether it asks for it: the kind of
//! thing a command acts on said in the sentence (`topic_words`), the device
//! it speaks of by those words, and a remark about a thing that is no
//! request (`remark_needs`).

use super::*;

impl Router {
    /// The device a clause speaks of by its topic's words (`topic_words`
    /// kept under a device's name: "I don't want it that hot": the
    /// thermostat).
    pub(in crate::router) fn device_of_topic(&self, clause: &str) -> Option<String> {
        let said = normalize(clause);
        let says = |words: &Vec<String>| {
            said.split_whitespace()
                .any(|w| words.contains(&w.to_owned()))
        };
        (self.words.topic_words.iter())
            .filter(|(name, _)| self.home.devices.iter().any(|d| &&d.name == name))
            .find(|(_, words)| says(words))
            .map(|(name, _)| format!("the {name}"))
    }

    /// Whether a sentence could be about the kind of thing `d` acts on: not
    /// when it speaks only of another kind (`topic_words`, by the first part
    /// of a command's id): "the bedroom is cold, turn it up" is near "turn
    /// the bedroom lights up" in meaning, but speaks of heat, not light.
    pub(in crate::router) fn speaks_of_its_kind(&self, text: &str, d: &RouteDecision) -> bool {
        let Some(kind) = d.command_id.as_deref().and_then(|c| c.split('.').next()) else {
            return true;
        };
        let Some(own) = self.words.topic_words.get(kind) else {
            return true;
        };
        let padded = padded_words(text);
        let said = |w: &String| padded.contains(&format!(" {w} "));
        if own.iter().any(said) {
            return true;
        }
        !self
            .words
            .topic_words
            .iter()
            .filter(|(k, _)| k.as_str() != kind)
            .any(|(_, words)| words.iter().filter(|w| !own.contains(w)).any(said))
    }

    /// Whether `text` says how something is: a verb of being after its
    /// first word ("our garage door is older than I am").
    pub(in crate::router) fn says_how_it_is(&self, text: &str) -> bool {
        (padded_words(text).split_whitespace().skip(1)).any(|x| self.words.is_being(x))
    }

    /// Whether `text`, asking nothing in words, is only a remark about
    /// what `d` would change or read: it says none of the words that make
    /// it a wish for `d`'s kind (`remark_needs`: "the garage is still full
    /// of boxes"; a number is one), or it opens with a
    /// verb of being and `d` changes
    /// something ("is 21 degrees a normal temperature for a house?").
    pub(in crate::router) fn only_remarks(&self, text: &str, d: &RouteDecision) -> bool {
        if self.asks_in_words(text) || self.asks_whether(text) {
            return false;
        }
        let padded = padded_words(text);
        if self.a_clause_opens_with_being(text) && self.changes_something(d) {
            return true;
        }
        let Some(kind) = d.command_id.as_deref().and_then(|c| c.split('.').next()) else {
            return false;
        };
        let says = |w: &String| padded.contains(&format!(" {w} "));
        let valued = padded.contains(|c: char| c.is_ascii_digit());
        (self.words.remark_needs.get(kind)).is_some_and(|needs| !valued && !needs.iter().any(says))
    }

    /// Whether the meaning layer's decision `d` for `text` is no request
    /// but a remark: one not sure enough to run that is only a remark
    /// (`only_remarks`), or one that says or asks how something is ("is it
    /// dark in the hall" changes nothing) or what a thing did.
    pub(in crate::router) fn remarked(&self, text: &str, d: &RouteDecision, sure: bool) -> bool {
        // `only_remarks` holds for nothing that asks in words.
        (!sure
            || self.a_clause_opens_with_being(text)
            || self.says_how_it_is(text)
            || self.says_what_a_thing_did(text))
            && self.only_remarks(text, d)
    }

    /// Whether `text` asks how something is: it, or one of its clauses,
    /// opens with a verb of being (`be_verbs`), and it asks for nothing in
    /// words ("is it dark in the hall", "the lights in this room, are they
    /// on?"; not "is it possible to set a timer").
    pub(in crate::router) fn asks_how_it_is(&self, text: &str) -> bool {
        self.a_clause_opens_with_being(text) && !self.asks_in_words(text)
    }

    /// Whether `text`, or one of its clauses, opens with a verb of being
    /// (`be_verbs`).
    fn a_clause_opens_with_being(&self, text: &str) -> bool {
        let opens_with_being = |clause: &str| {
            (padded_words(clause).split_whitespace().next())
                .is_some_and(|first| self.words.be_verbs.iter().any(|b| b == first))
        };
        super::clause::clauses(text)
            .into_iter()
            .any(opens_with_being)
    }

    /// Whether `text` says what a thing did: a thing said with a word that
    /// points at it (`thing_pointers`: "that timer", "the lights"), words of
    /// habit or time between (`habit_words`: "just"), then a verb in the
    /// past ("that timer just scared the life out of me").
    fn says_what_a_thing_did(&self, text: &str) -> bool {
        let w = &self.words;
        let padded = padded_words(text);
        let words: Vec<&str> = padded.split_whitespace().collect();
        (0..words.len().saturating_sub(2)).any(|i| {
            if !w.thing_pointers.iter().any(|p| p == words[i]) {
                return false;
            }
            let after = words[i + 2..]
                .iter()
                .skip_while(|x| w.habit_words.iter().any(|h| h == *x));
            after.take(1).any(|x| w.is_past(x))
        })
    }
}
