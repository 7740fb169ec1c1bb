//! The span layer: a request found among other words ("so anyway turn the
//! lights off would you"), a run of at least half the sentence that a
//! template reads whole, with a room said outside the run taken as the
//! request's.

use super::*;
use crate::understand::mentions::mentions;

/// The longest sentence a run of half of it may be the request in.
const SPAN_WORDS: usize = 24;

impl Router {
    /// A request said among other words ("unlock the side door for the
    /// plumber", "switch off the dining room, we're done eating"): the
    /// longest run of the sentence's words that a template matches whole,
    /// with no wildcard taking any of it, and at least half the sentence (a
    /// few words inside a story are no request: "leave the porch light as
    /// it is"). Never in a sentence that says "not": the run could leave it
    /// out; nor in a story ("I turned the kitchen lights off myself
    /// earlier": a run of it is what was done); nor a run that leaves out a
    /// level or a number said ("put the desk lamp on | full"); in a
    /// question of whether it is or was so, only a run that changes nothing
    /// ("did I lock the back door" asks about locking it).
    pub(in crate::router) fn by_span(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        if self.says_not(text) || self.tells_a_story(text) {
            return None;
        }
        // A question of whether finds only a run that changes nothing ("what's
        // on the grocery list | at the moment"): "did I lock the back door"
        // asks about locking it; "is it dark in the hall" asks how it is.
        let asks = self.asks_whether(text) || self.asks_how_it_is(text);
        let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
        let n = words.len();
        // Half the sentence is the request: a request is a few words, so a
        // longer sentence is no request in a story (and its runs, about n²/8
        // of them, would each be matched against every template).
        if !(3..=SPAN_WORDS).contains(&n) {
            return None;
        }
        // The sentence's names, found once, and where each word starts and
        // ends in it: a run's names outside it are those that end before its
        // first word or start after its last.
        let named = mentions(&self.home, text, None);
        // A timer's name found in the sentence: a run whose only wildcard
        // took it is read as sure as one of the template's own words ("pause
        // the cake timer | for a sec").
        let timer_name = self.timer_names.find(text);
        let bounds = word_bounds(text);
        // What longer runs read with free words (a wildcard) asked: a shorter
        // run of another command is no reading of the sentence ("he'll
        // remind me in 45 minutes to move the car" is no 45-minute timer).
        let mut wild: Vec<String> = Vec::new();
        for len in (n.div_ceil(2).max(2)..n).rev() {
            if context.out_of_time() {
                return None;
            }
            for start in 0..=n - len {
                // A run right after an article is not a clause of its own:
                // "the activate the lights" is a mishearing of "deactivate".
                if start > 0 && self.words.determiners.iter().any(|d| d == words[start - 1]) {
                    continue;
                }
                // Nor one that opens with a kind's word right after another
                // word, after a verb of a request: "pause the cake | timer for
                // a sec" is the cake timer's, and pauses it; "turn the kitchen
                // | lights on" is the kitchen's (a comma ends what came
                // before: "pasta timer, eight minutes").
                if start > 0
                    && !words[start - 1].ends_with(',')
                    && self.kind_word(words[start])
                    && (words[..start].iter()).any(|w| self.words.is_request_verb(w))
                {
                    continue;
                }
                let span = words[start..start + len].join(" ");
                // A room said outside the run is the request's: the run is
                // read with it said after it (`in_room`: "turn the lights off
                // | out on the porch"). A run is no request of its own beside
                // a name it cannot take.
                let (from, to) = (bounds[start].0, bounds[start + len - 1].1);
                let outside: Vec<_> = named
                    .iter()
                    .filter(|m| m.span().1 <= from || m.span().0 >= to)
                    .collect();
                // A level or a number said outside the run is one it leaves
                // out: "put the desk lamp on | full".
                let level_left_out = (words[..start].iter().chain(&words[start + len..]))
                    .any(|w| self.says_a_level(w));
                let request = |d: &RouteDecision| {
                    !level_left_out
                        && (d.confidence >= 1.0 || only_the_name_wild(d, timer_name.as_deref()))
                        && matches!(d.intent, Intent::Chain(_))
                        && asks_something(&span, d, &self.words)
                        && (!asks || !self.changes_something(d))
                };
                // A run no template reads alone is not read joined to a room
                // either (talk's runs are read once).
                let Some(alone) = self.by_templates(&span, context) else {
                    continue;
                };
                if let Some(id) = alone.command_id.as_deref()
                    && alone.confidence < 1.0
                    && asks_something(&span, &alone, &self.words)
                {
                    wild.push(id.to_owned());
                }
                if (alone.command_id.as_deref()).is_some_and(|id| wild.iter().any(|w| w != id)) {
                    continue;
                }
                let d = match outside.as_slice() {
                    [] => Some(alone).filter(request),
                    // Joined to the room said apart; else as it is, where it
                    // names a device of that room ("turn the ceiling light on
                    // | in the kitchen").
                    [room] if room.slot == "area" && !self.words.in_room.is_empty() => {
                        let area = room.value.as_str().unwrap_or_default();
                        let joined =
                            format!("{span} {}", self.words.in_room.replace("{area}", area));
                        self.by_templates(&joined, context)
                            .filter(request)
                            .or_else(|| Some(alone).filter(|d| request(d) && self.acts_in(d, area)))
                    }
                    _ => None,
                };
                let Some(d) = d else {
                    continue;
                };
                let covered = len as f64 / n as f64;
                let mut d = decided_by(d, Layer::Span, |u| {
                    let span = span.trim_matches(|c: char| !c.is_alphanumeric());
                    u.span = Some(span.to_owned());
                    u.covered = Some(round3(covered));
                });
                d.confidence = covered;
                return Some(d);
            }
        }
        None
    }

    /// Whether `word` is a level (`level_words`: "full") or a number.
    fn says_a_level(&self, word: &str) -> bool {
        let w = word.trim_matches(|c: char| !c.is_alphanumeric());
        self.words.level_words.iter().any(|l| l == w) || w.chars().any(|c| c.is_ascii_digit())
    }

    /// Whether `word` names a kind of thing a name comes before ("timer",
    /// "lights": `timer_words`, `light_words`).
    pub(in crate::router) fn kind_word(&self, word: &str) -> bool {
        let w = word.trim_matches(|c: char| !c.is_alphanumeric());
        self.timer_names.is_timer_word(w) || self.words.light_words.iter().any(|l| l == w)
    }

    /// Whether `d` acts in `area`: on it, or on a device of it.
    fn acts_in(&self, d: &RouteDecision, area: &str) -> bool {
        let Some(u) = &d.understood else {
            return false;
        };
        let value = |k: &str| u.slots.get(k).and_then(|s| s.value.as_str());
        value("area") == Some(area)
            || value("name")
                .and_then(|id| self.home.device(id))
                .is_some_and(|dev| dev.area.as_deref() == Some(area))
    }
}

/// Whether the only words of `d`'s template a wildcard took are the timer's
/// name the sentence gives (`name`).
fn only_the_name_wild(d: &RouteDecision, name: Option<&str>) -> bool {
    let (Some(name), Some(u)) = (name, &d.understood) else {
        return false;
    };
    let taken = u.slots.get("name").map(|s| s.said.as_str());
    taken == Some(name)
        && u.template
            .as_deref()
            .is_some_and(|t| t.matches('{').count() == 1)
}

/// Where each word of `text` (split at single spaces) starts and ends.
fn word_bounds(text: &str) -> Vec<(usize, usize)> {
    let mut bounds = Vec::new();
    let mut at = 0;
    for w in text.split(' ') {
        if !w.is_empty() {
            bounds.push((at, at + w.len()));
        }
        at += w.len() + 1;
    }
    bounds
}
