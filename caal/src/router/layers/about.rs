//! What a request is about: the devices and rooms a command acts on or
//! asks of, though its sentence names them by other words; a question the
//! change beside it answers; a clause that only names one (what a later
//! clause points back at); the room another clause says.

use std::collections::BTreeMap;

use super::*;

impl Router {
    /// What a command is about: the rooms and devices its parameters name;
    /// else a question of a kind is about the home's one device of that
    /// kind, and a change about the devices its intent mappings select
    /// ("did I leave the garage open? close it": both the garage door).
    pub(in crate::router) fn about(&self, c: &crate::auth::Command) -> Vec<String> {
        let named: Vec<String> = (c.params.iter())
            .filter(|(k, _)| matches!(k.as_str(), "device" | "door" | "room"))
            .map(|(_, v)| v.to_string())
            .collect();
        if !named.is_empty() {
            return named;
        }
        let devices = &self.home.devices;
        if let Some(kind) = c.params.get("kind").map(ToString::to_string) {
            let of_kind: Vec<_> = devices.iter().filter(|d| d.domain == kind).collect();
            return match of_kind.as_slice() {
                [one] => vec![one.name.clone()],
                _ => Vec::new(),
            };
        }
        let selects = |when: &BTreeMap<String, String>, d: &crate::understand::home::Device| {
            when.iter().all(|(slot, want)| match slot.as_str() {
                "domain" => &d.domain == want,
                "device_class" => d.device_class.as_ref() == Some(want),
                "name" => &d.id == want || &d.name == want,
                _ => false,
            })
        };
        let mut about: Vec<String> = (self.intent_maps.iter())
            .filter(|m| m.command == c.command_id && m.params.is_empty() && !m.when.is_empty())
            .flat_map(|m| devices.iter().filter(|d| selects(&m.when, d)))
            .map(|d| d.name.clone())
            .collect();
        about.dedup();
        about
    }

    /// "Is the front door locked? Lock it": the question says what the
    /// request is about, and doing it answers it. "It's too bright in the
    /// living room, take it down to 40": a statement that asks for nothing
    /// in words (no `request_verbs`) is the reason for the change after it
    /// to the same things, not a change of its own. The commands and parts
    /// without the questions and reasons so acted on, and whether the last
    /// part was one.
    pub(in crate::router) fn without_parts_acted_on(
        &self,
        mut commands: Vec<(usize, crate::auth::Command)>,
        parts: Vec<Part>,
    ) -> (Vec<crate::auth::Command>, Vec<Part>, bool) {
        let targets = |c: &crate::auth::Command| self.about(c);
        let acted_on = |after: Option<usize>| -> Vec<String> {
            (commands.iter())
                .filter(|(at, c)| after.is_none_or(|p| *at > p) && self.changes(c))
                .flat_map(|(_, c)| targets(c))
                .collect()
        };
        let everywhere = acted_on(None);
        let asked = |c: &crate::auth::Command| {
            !self.changes(c) && targets(c).iter().any(|t| everywhere.contains(t))
        };
        let states = |p: usize| !self.asks_in_words(parts[p].clause.as_deref().unwrap_or_default());
        let a_reason = |p: usize, c: &crate::auth::Command| {
            let later = acted_on(Some(p));
            let of = targets(c);
            self.changes(c) && !of.is_empty() && of.iter().all(|t| later.contains(t))
        };
        let answered: Vec<usize> = (0..parts.len())
            .filter(|&p| {
                let of_part = || commands.iter().filter(|(at, _)| *at == p);
                of_part().count() > 0
                    && (of_part().all(|(_, c)| asked(c))
                        || states(p) && of_part().all(|(_, c)| a_reason(p, c)))
            })
            .collect();
        commands.retain(|(at, c)| !asked(c) && !answered.contains(at));
        let last_answered = answered.contains(&parts.len().saturating_sub(1));
        let parts = parts
            .into_iter()
            .enumerate()
            .filter(|(p, _)| !answered.contains(p))
            .map(|(_, part)| part)
            .collect();
        let commands = commands.into_iter().map(|(_, c)| c).collect();
        (commands, parts, last_answered)
    }

    /// "The kitchen is dark, turn on the lights", "lights on, I'm in the
    /// kitchen": the request `said` in clause `i`, which asked which room,
    /// placed in the room another clause says (the nearest before, else the
    /// first after), with the words that place it and its decision.
    pub(in crate::router) fn in_room_said_beside(
        &self,
        said: &str,
        clauses: &[&str],
        i: usize,
        context: &Context,
    ) -> Option<(String, String, RouteDecision)> {
        if self.words.in_room.is_empty() {
            return None;
        }
        let area = said_beside(clauses, i, |c| self.area_in(c))?;
        let in_room = self.words.in_room.replace("{area}", &area);
        self.put_after(said, &in_room, context)
    }

    /// The request `said` with `put` after it, the words put and its
    /// decision, where that reads as a request.
    fn put_after(
        &self,
        said: &str,
        put: &str,
        context: &Context,
    ) -> Option<(String, String, RouteDecision)> {
        let placed = format!("{said} {put}");
        let d =
            (self.command_of(&placed, context)).filter(|d| matches!(d.intent, Intent::Chain(_)))?;
        Some((placed, put.to_owned(), d))
    }

    /// "Onions need 8 minutes, timer for the onions": the request `said`
    /// in clause `i`, which asked how long, with the length another clause
    /// says (the nearest before, else the first after) put after it
    /// (`for_length`), the words so put and its decision; with what that
    /// clause says after the length where the request so read is understood
    /// ("we need twenty minutes for the cookies, set a timer": "… for
    /// twenty minutes for the cookies").
    pub(in crate::router) fn length_said_beside(
        &self,
        said: &str,
        clauses: &[&str],
        i: usize,
        context: &Context,
    ) -> Option<(String, String, RouteDecision)> {
        if self.words.for_length.is_empty() {
            return None;
        }
        let (length, after) = said_beside(clauses, i, |c| self.length_in(c))?;
        let for_length = self.words.for_length.replace("{length}", &length);
        // Said before the words that close it ("…, timer for the onions please").
        let mut said = super::opening::tail_off(said, &self.words.closing_words).unwrap_or(said);
        while let Some(before) = super::opening::tail_off(said, &self.words.answer_tails) {
            said = before;
        }
        let with_after = format!("{for_length} {after}");
        [with_after.trim(), for_length.as_str()]
            .into_iter()
            .find_map(|put| self.put_after(said, put, context))
    }

    /// The longest length of time `clause` says in a few words that end
    /// with its unit ("8 minutes", "an hour and a half"), and what the
    /// clause says after it.
    fn length_in(&self, clause: &str) -> Option<(String, String)> {
        const LENGTH_WORDS: usize = 6;
        let lang = self.library.lang;
        let said = normalize(clause);
        let words: Vec<&str> = said.split_whitespace().collect();
        (0..words.len())
            .flat_map(|start| {
                (start + 1..=words.len().min(start + LENGTH_WORDS)).map(move |end| (start, end))
            })
            .filter(|&(_, end)| crate::understand::numbers::says_a_length_of_time(words[end - 1]))
            .map(|(start, end)| (words[start..end].join(" "), words[end..].join(" ")))
            .filter(|(length, _)| {
                crate::understand::numbers::parse_duration(lang, length).is_some()
            })
            .max_by_key(|(length, _)| length.len())
    }

    /// Whether a clause only names a device or a room of the home ("um,
    /// the kitchen ceiling"), with words that open or fill around it.
    pub(in crate::router) fn only_names(&self, clause: &str) -> bool {
        let w = &self.words;
        let filler = |x: &&str| {
            (w.heard_fillers
                .iter()
                .chain(&w.opening_words)
                .chain(&w.determiners))
            .any(|f| f == x)
        };
        let said = normalize(clause);
        let named: Vec<&str> = said.split_whitespace().filter(|x| !filler(x)).collect();
        let named = named.join(" ");
        !named.is_empty() && self.home.names().any(|n| *n == named)
    }

    /// The one device a clause's request is about, though it names it by
    /// another word ("did I leave the garage open": the garage door).
    pub(in crate::router) fn device_asked_about(&self, clause: &str) -> Option<String> {
        let one = self.one_command_of(clause)?;
        match self.about(&one).as_slice() {
            [name] if self.home.devices.iter().any(|d| &d.name == name) => {
                Some(format!("the {name}"))
            }
            _ => None,
        }
    }
}

/// What `found` finds in another clause than the `i`th: the nearest before
/// it, else the first after.
fn said_beside<T>(clauses: &[&str], i: usize, found: impl FnMut(&&str) -> Option<T>) -> Option<T> {
    (clauses[..i].iter().rev())
        .chain(&clauses[i + 1..])
        .find_map(found)
}
