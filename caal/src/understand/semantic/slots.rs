//! The slots of a meaning read from what was said: the home's rooms and
//! devices, numbers, durations, states, timers' names and the free text an
//! example marks, and the room the speaker is in.

use std::collections::BTreeMap;

use serde_json::json;

use super::{Group, Semantic};
use crate::understand::mentions::{Mention, mentions};
use crate::understand::numbers::{numbers_in, parse_duration, percent};
use crate::understand::{Context, Home, Lang, Slot, Understood, normalize};

impl Semantic {
    /// The phrases that say each state of each kind of device ("locked
    /// up" is `locked`), for the slot `state` an example finds.
    pub fn with_states(mut self, words: &BTreeMap<String, BTreeMap<String, Vec<String>>>) -> Self {
        self.states = words
            .iter()
            .map(|(domain, states)| {
                let mut said: Vec<(String, String)> = states
                    .iter()
                    .flat_map(|(value, phrases)| {
                        phrases.iter().map(move |p| (normalize(p), value.clone()))
                    })
                    .collect();
                said.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
                (domain.clone(), said)
            })
            .collect();
        self
    }

    /// The state of a `domain` device `text` says, by its longest phrase.
    fn state_said(&self, domain: Option<&str>, text: &str) -> Option<Slot> {
        let padded = crate::understand::padded_words(text);
        let (phrase, value) = self
            .states
            .get(domain?)?
            .iter()
            .find(|(p, _)| padded.contains(&format!(" {p} ")))?;
        Some(Slot {
            value: json!(value),
            said: phrase.clone(),
            context: None,
            wildcard_span: None,
        })
    }

    /// The group's meaning with its varying slots read from `text`; none
    /// when one it needs is not there.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read(
        &self,
        group: &Group,
        g: usize,
        example: usize,
        text: &str,
        home: &Home,
        context: &Context,
        score: f64,
    ) -> Option<Understood> {
        let mut slots: BTreeMap<String, Slot> = group
            .slots
            .iter()
            .map(|(k, v)| (k.clone(), Slot::taken(json!(v), "")))
            .collect();
        let domain = group.slots.get("domain").map(String::as_str);
        let mentions = mentions(home, text, domain);
        // A number said beats a meaning's fixed one ("bring the office
        // lights down to 30" is near "dim the office lights by half").
        let readable = ["brightness", "temperature", "seconds"];
        let said_over_fixed = group
            .slots
            .keys()
            .filter(|k| readable.contains(&k.as_str()) && !group.find.contains(k));
        let wanted: Vec<(&String, bool)> = group
            .find
            .iter()
            .map(|w| (w, true))
            .chain(said_over_fixed.map(|w| (w, false)))
            .collect();
        for (want, needed) in wanted {
            let slot = self.slot_said(want, needed, (g, example), domain, text, &mentions);
            // A timer known by its length ("the 20 minute timer"), where
            // the meaning does not set one: its `start`, as a template reads it.
            if want == "timer"
                && !group.find.iter().any(|f| f == "seconds")
                && let Some(start) = self.timer_names.start_of(text)
            {
                slots.insert("start_seconds".into(), Slot::taken(json!(start), text));
            }
            match slot {
                // A timer's name is the intent's `name`, as a template reads it.
                Some(s) if want == "timer" => {
                    slots.insert("name".into(), s);
                }
                Some(s) => {
                    slots.insert(want.clone(), s);
                }
                // Rooms, devices, states and names are optional (the
                // mapping decides); the rest are needed.
                None if !needed || matches!(want.as_str(), "area" | "name" | "state" | "timer") => {
                }
                None => return None,
            }
        }
        let every_room_unsaid =
            self.speakers_area(group, text, (home, context), &mentions, &mut slots);
        let needs_area = every_room_unsaid
            || (group.needs_area && !slots.contains_key("area") && !slots.contains_key("name"));
        Some(Understood {
            intent: group.intent.clone(),
            slots,
            template: unmark(&self.examples[example].text, "…"),
            source: "semantic",
            confidence: score,
            needs_area,
        })
    }

    /// The slot `want` as `text` says it, `needed` when the meaning finds
    /// it (not a fixed level a said one may beat); `at` is the group and its
    /// nearest example, whose marked words show where a free slot sits.
    fn slot_said(
        &self,
        want: &str,
        needed: bool,
        (g, example): (usize, usize),
        domain: Option<&str>,
        text: &str,
        mentions: &[Mention],
    ) -> Option<Slot> {
        match want {
            "area" | "name" => mentions.iter().find(|m| m.slot == want).map(|m| Slot {
                context: m.context.clone(),
                ..Slot::taken(m.value.clone(), &m.said)
            }),
            // Over a fixed level, only a level said as one ("half" is the group's 50).
            "brightness" => percent(self.lang, text)
                .filter(|n| needed || *n >= 1.0)
                .map(|n| number_slot(n, text)),
            "temperature" => first_number(self.lang, text).map(|n| number_slot(n, text)),
            "state" => self.state_said(domain, text),
            "timer" => self
                .timer_names
                .find(text)
                .map(|name| Slot::taken(json!(name), &name)),
            "seconds" => longest_duration(self.lang, text).map(|s| Slot::taken(json!(s), text)),
            free => {
                let value = self
                    .marked_examples(g, example, free)
                    .find_map(|e| align(text, e, free))
                    .filter(|v| !is_duration(self.lang, v) && !self.names_nothing(v))?;
                Some(Slot::taken(json!(value), &value))
            }
        }
    }

    /// The room the client said it is in, put in `slots`: for a meaning that
    /// finds a room the sentence did not name, and for one that fixes every
    /// room, near a sentence that says none of `all_words` ("kill the
    /// lights" in the kitchen). A meaning that fixes every room, for a
    /// sentence that says none of them but names a device or a room, is
    /// what it names ("kill the porch light" is not every light; "the lamp in
    /// the office" is the office's lamp, the room where no lamp is); said where
    /// the client gave no room, it is asked for (true: "kill the lights" is
    /// not every light in the house either).
    fn speakers_area(
        &self,
        group: &Group,
        text: &str,
        (home, context): (&Home, &Context),
        mentions: &[Mention],
        slots: &mut BTreeMap<String, Slot>,
    ) -> bool {
        let padded = format!(" {text} ");
        let says_all = self
            .all_words
            .iter()
            .any(|w| padded.contains(&format!(" {w} ")));
        let every_room_unsaid = !says_all
            && slots
                .get("area")
                .is_some_and(|s| s.said.is_empty() && s.value == json!("all"));
        // One device named whole is what it names, wherever it is; a name
        // several share is narrowed by the room said, else the room's.
        let name = mentions.iter().find(|m| m.slot == "name");
        let whole = name.is_some_and(|m| m.value.is_string());
        let area = mentions
            .iter()
            .find(|m| m.slot == "area")
            .filter(|_| !whole);
        if every_room_unsaid && (name.is_some() || area.is_some()) {
            slots.remove("area");
            for m in name.into_iter().chain(area) {
                let said = Slot::taken(m.value.clone(), &m.said);
                slots.insert(
                    m.slot.to_owned(),
                    Slot {
                        context: m.context.clone(),
                        ..said
                    },
                );
            }
            home.device_by_area(slots);
            if slots.contains_key("area") && slots.get("name").is_some_and(|s| s.value.is_array()) {
                slots.remove("name");
            }
            return false;
        }
        let room_unsaid = !slots.contains_key("area")
            && group.find.iter().any(|f| f == "area")
            && !slots.contains_key("name");
        match &context.area {
            Some(area) if every_room_unsaid || room_unsaid => {
                slots.insert("area".into(), Slot::taken(json!(area), ""));
                false
            }
            None if every_room_unsaid => {
                slots.remove("area");
                true
            }
            _ => false,
        }
    }

    /// The group's examples that mark `slot`, the nearest first.
    fn marked_examples<'a>(
        &'a self,
        g: usize,
        nearest: usize,
        slot: &'a str,
    ) -> impl Iterator<Item = &'a str> + 'a {
        let mark = format!("{{{slot}}}");
        std::iter::once(nearest)
            .chain((0..self.examples.len()).filter(move |&i| i != nearest))
            .filter(move |&i| self.examples[i].group == g)
            .map(|i| self.examples[i].text.as_str())
            .filter(move |t| t.contains(&mark))
    }
}

/// The slot an example marks, if any (`{item}`: "item").
pub(super) fn marked_slot(example: &str) -> Option<&str> {
    let open = example.find('{')?;
    let close = example[open..].find('}')? + open;
    Some(&example[open + 1..close])
}

/// An example normalised with its `{slot}` marks kept.
pub(super) fn normalize_marked(example: &str) -> String {
    // Normalise the words between marks, keep the marks.
    let mut text = String::new();
    let mut rest = example;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| c + open) else {
            break;
        };
        text.push_str(&normalize(&rest[..open]));
        text.push(' ');
        text.push_str(&rest[open..=close].to_lowercase());
        text.push(' ');
        rest = &rest[close + 1..];
    }
    text.push_str(&normalize(rest));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An example with its marks replaced by `with`.
pub(super) fn unmark(example: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = example;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| c + open) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(with);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The words of `text` where `example` has `{slot}`: after the last place
/// `text` says the word before the mark, up to the word after it ("we're
/// all out of oat milk" by "we're out of {item}": "oat milk").
/// Whether free text read for a slot is a length of time ("2 minutes",
/// "an hour": `align` has taken the article off): no thing to buy.
/// Whether `value` is a length of time ("hour", "2 minutes") or holds one
/// ("three minutes to the rice"): never a thing for a list.
pub(super) fn is_duration(lang: Lang, value: &str) -> bool {
    ["", "a ", "an "]
        .iter()
        .any(|a| parse_duration(lang, &format!("{a}{value}")).is_some())
        || longest_duration(lang, value).is_some()
}

pub(super) fn align(text: &str, example: &str, slot: &str) -> Option<String> {
    let mark = format!("{{{slot}}}");
    let (before, after) = example.split_once(&mark)?;
    let words: Vec<&str> = text.split(' ').collect();
    let start = match before.split_whitespace().last() {
        None => 0,
        Some(b) => words.iter().rposition(|w| *w == b)? + 1,
    };
    // Some word of the frame around the mark must be said: "{item} needs
    // to go on the grocery list" frames nothing in "everything off, we're
    // going out". After a word before it ("pick up {item} next time"), the
    // word after may go unsaid ("pick up bread").
    let after_at = after.split_whitespace().next().map(|a| {
        words[start..]
            .iter()
            .position(|w| *w == a)
            .map(|p| start + p)
    });
    let end = match after_at {
        None => words.len(),
        Some(Some(at)) => at,
        Some(None) if before.trim().is_empty() => return None,
        Some(None) => words.len(),
    };
    let mut taken: &[&str] = words.get(start..end)?;
    while let Some((first, rest)) = taken.split_first()
        && matches!(*first, "some" | "more" | "the" | "a" | "an" | "any" | "of")
    {
        taken = rest;
    }
    // "add it to the list" names nothing: what "it" is was said elsewhere;
    // nor does a word that only joins others ("put in on the list", as
    // speech to text may hear "put it on the list").
    let pronoun = matches!(
        taken,
        [w] if matches!(*w, "it" | "them" | "that" | "this" | "these" | "those" | "one" | "something"
            | "in" | "on" | "at" | "for" | "with" | "off" | "up" | "out")
    );
    // "We need to talk": what follows "to" is something to do, no thing.
    let to_do = taken.first() == Some(&"to");
    // The list is no thing on it ("work on the shopping list", as "what's
    // on the shopping list" may be heard).
    let the_list = taken.last() == Some(&"list");
    (!taken.is_empty() && taken.len() <= 6 && !pronoun && !to_do && !the_list)
        .then(|| taken.join(" "))
}

fn number_slot(n: f64, text: &str) -> Slot {
    let value = if n.fract() == 0.0 {
        json!(n as i64)
    } else {
        json!(n)
    };
    Slot::taken(value, text)
}

pub(super) fn first_number(lang: Lang, text: &str) -> Option<f64> {
    numbers_in(lang, text).first().map(|n| n.0)
}

/// The longest run of words that is a duration ("for an hour and a half").
pub(super) fn longest_duration(lang: Lang, text: &str) -> Option<u64> {
    let words: Vec<&str> = text.split(' ').collect();
    let mut best: Option<(usize, u64)> = None;
    for i in 0..words.len() {
        for j in (i + 1..=words.len().min(i + 8)).rev() {
            if best.is_some_and(|(len, _)| len >= j - i) {
                break;
            }
            if let Some(s) = parse_duration(lang, &words[i..j].join(" "))
                && s > 0
            {
                best = Some((j - i, s));
                break;
            }
        }
    }
    best.map(|b| b.1)
}
