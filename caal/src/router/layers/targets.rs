//! Targets not in the home: a room or device the sentence names that the
//! home does not have, answered by naming what it has.

use super::*;

/// Slots the semantic layer reads by kind; any other it reads where an example marks it.
pub(in crate::router) const READ_BY_KIND: &[&str] = &[
    "area",
    "name",
    "brightness",
    "temperature",
    "seconds",
    "state",
    "timer",
];

/// The key of the lights' words in the language's `topic_words`.
const LIGHTS_TOPIC: &str = "lights";

/// Whether words taken by an open slot could be a room's or a device's
/// name: a few words, none of them a function word or the home's own kinds
/// ("the", "lights", "temperature"), so "set the temperature to 19.5" is not
/// read as a device called "the temperature".
fn plausible_name(said: &str, words: &Words) -> bool {
    let said: Vec<&str> = said.split(' ').filter(|w| !w.is_empty()).collect();
    let said = match said.split_first() {
        Some((first, rest)) if words.definites.iter().any(|d| d == first) => rest,
        _ => &said,
    };
    // A lone verb that asks for something ("get the lights on": "get") names nothing.
    let a_verb = matches!(said, [w] if words.is_request_verb(w));
    !said.is_empty()
        && !a_verb
        && said.len() <= 3
        && said.iter().all(|w| {
            !words.not_device_names.iter().any(|n| n == w) && !w.chars().any(|c| c.is_ascii_digit())
        })
}

impl Router {
    /// The room a clause names (the longest name or alias said), as named in the home.
    pub(in crate::router) fn area_in(&self, clause: &str) -> Option<String> {
        let padded = format!(" {} ", normalize(clause));
        self.home
            .areas
            .iter()
            .flat_map(|a| {
                std::iter::once(&a.name)
                    .chain(&a.aliases)
                    .map(move |n| (a, n))
            })
            .filter(|(_, n)| padded.contains(&format!(" {n} ")))
            .max_by_key(|(_, n)| n.len())
            .map(|(a, _)| a.name.clone())
    }

    /// A device a clause names (the longest name or alias said), as said with "the".
    pub(in crate::router) fn device_in(&self, clause: &str) -> Option<String> {
        let padded = format!(" {} ", normalize(clause));
        self.home
            .devices
            .iter()
            .flat_map(|d| std::iter::once(&d.name).chain(&d.aliases))
            .filter(|n| padded.contains(&format!(" {n} ")))
            .max_by_key(|n| n.len())
            .map(|n| format!("the {n}"))
    }

    /// The item a request named ("add eggs to the list": eggs), as its
    /// command took it.
    pub(in crate::router) fn item_asked_in(&self, clause: &str) -> Option<String> {
        let one = self.one_command_of(clause)?;
        one.params.get("item").map(ToString::to_string)
    }

    /// The one command a template or rule reads in a clause, if one.
    pub(in crate::router) fn one_command_of(&self, clause: &str) -> Option<crate::auth::Command> {
        let d = self.command_of(clause, &Context::default())?;
        let Intent::Chain(chain) = d.intent else {
            return None;
        };
        let [one] = <[_; 1]>::try_from(chain.commands).ok()?;
        Some(one)
    }

    /// The lights a clause speaks of, as `refer_to_lights` says them: a
    /// room's ("the kitchen lights"), else all of them.
    pub(in crate::router) fn lights_in(&self, clause: &str) -> Option<String> {
        let padded = format!(" {} ", normalize(clause));
        if !self
            .words
            .light_words
            .iter()
            .any(|w| padded.contains(&format!(" {w} ")))
        {
            return None;
        }
        match (self.area_in(clause), self.words.refer_to_lights.as_slice()) {
            (Some(area), [with_room, ..]) => Some(with_room.replace("{area}", &area)),
            (None, [_, all, ..]) => Some(all.clone()),
            _ => None,
        }
    }

    /// The timer a clause names ("don't bother with the roast timer
    /// anymore": the roast timer), by its name where it gives one.
    pub(in crate::router) fn timer_in(&self, clause: &str) -> Option<String> {
        let said = normalize(clause);
        let word = (said.split_whitespace()).find(|w| self.timer_names.is_timer_word(w))?;
        Some(match self.timer_names.find(&said) {
            Some(name) => format!("the {name} {word}"),
            None => format!("the {word}"),
        })
    }

    /// The lights of the room a clause names, where it or the clause that
    /// points back at it speaks of light without naming one (the lights'
    /// `topic_words`: "bit too bright in the living room, take it down to
    /// 40", "the lounge, can you dim it a bit").
    pub(in crate::router) fn room_lit_in(&self, clause: &str, pointing: &str) -> Option<String> {
        let area = self.area_in(clause)?;
        let topic = self.words.topic_words.get(LIGHTS_TOPIC)?;
        let said = format!(" {} {} ", normalize(clause), normalize(pointing));
        let speaks_of_light =
            (said.split(|c: char| !c.is_alphanumeric())).any(|w| topic.iter().any(|t| t == w));
        let with_room = self.words.refer_to_lights.first()?;
        speaks_of_light.then(|| with_room.replace("{area}", &area))
    }

    /// What a clause says is wanted ("we need bread": bread): the words
    /// after one of `item_leads` to the clause's end, at most four.
    pub(in crate::router) fn item_in(&self, clause: &str) -> Option<String> {
        let padded = format!(" {} ", normalize(clause));
        let rest = self.words.item_leads.iter().find_map(|lead| {
            padded
                .find(&format!(" {lead} "))
                .map(|at| &padded[at + lead.len() + 2..])
        })?;
        let words: Vec<&str> = rest
            .split(' ')
            .filter(|w| !w.is_empty())
            .skip_while(|w| self.words.item_fillers.iter().any(|f| f == w))
            .collect();
        (!words.is_empty() && words.len() <= 4).then(|| words.join(" "))
    }

    /// The device of the home, of any kind, that words name by its id, name
    /// or an alias: "prop the front door open" is about the front door (a
    /// lock), never "a device I don't know".
    pub(in crate::router) fn device_named(
        &self,
        said: &str,
    ) -> Option<&crate::understand::home::Device> {
        let said = normalize(said);
        let said = self.without_determiner(&said);
        self.home.devices.iter().find(|d| {
            d.id == said
                || normalize(&d.name) == said
                || d.aliases.iter().any(|a| normalize(a) == said)
        })
    }

    /// What a device asked for something its kind does not do can do:
    /// "The front door is a lock; I can lock or unlock it."
    fn what_it_does(&self, device: &crate::understand::home::Device) -> String {
        let mut verbs: Vec<&str> = Vec::new();
        for m in self
            .intent_maps
            .iter()
            .filter(|m| m.when.get("domain") == Some(&device.domain))
        {
            // What it does: a question about it ("is it locked") is no doing.
            if let Some(verb) = self
                .commands
                .get(&m.command)
                .filter(|c| c.config.side_effects)
                .and_then(|c| c.config.summary.split(' ').next())
                && !verbs.contains(&verb)
            {
                verbs.push(verb);
            }
        }
        let kind = (self.words.kind_names.get(&device.domain)).unwrap_or(&device.domain);
        // A kind whose intents name no domain (the thermostat's): its
        // commands are named by it ("thermostat.set", "thermostat.adjust").
        if verbs.is_empty() {
            let prefix = format!("{kind}.");
            for (_, c) in self
                .commands
                .iter()
                .filter(|(id, c)| c.config.side_effects && id.starts_with(&prefix))
            {
                if let Some(verb) = c.config.summary.split(' ').next()
                    && !verbs.contains(&verb)
                {
                    verbs.push(verb);
                }
            }
        }
        // "The thermostat is a thermostat" says nothing.
        let is = if normalize(&device.name) == *kind {
            format!("That isn't something the {} does", device.name)
        } else {
            format!("The {} is a {kind}", device.name)
        };
        match verbs.as_slice() {
            [] => format!("{is}; that isn't something I can do with it."),
            [one] => format!("{is}; I can {one} it."),
            [rest @ .., last] => format!("{is}; I can {} or {last} it.", rest.join(", ")),
        }
    }

    /// Words said without the definite word they open with ("the dining room").
    pub(in crate::router) fn without_determiner<'s>(&self, said: &'s str) -> &'s str {
        (self.words.definites.iter())
            .find_map(|d| said.strip_prefix(d.as_str())?.strip_prefix(' '))
            .unwrap_or(said)
    }

    /// Whether words said name one of the home's rooms ("the dining room").
    fn is_area(&self, said: &str) -> bool {
        (self.home.area_named(self.without_determiner(said))).is_some()
    }

    /// After nothing else matched: a request for a room or device the home
    /// does not have gets a reply naming what it has; nothing runs.
    pub(in crate::router) fn unknown_target(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        // "are the kitchen lights on" names no room "are": a question is not read so.
        if self.asks_whether(text) {
            return None;
        }
        let mut found = self.library.understand_open(text, &self.home, context);
        // A word of a name the home has ("counter" of "the counter lights")
        // is no room or thing it lacks.
        let spans = crate::understand::mentions::mentions(&self.home, text, None);
        let of_a_name = |said: &str| {
            let said = self.without_determiner(said);
            spans
                .iter()
                .any(|m| format!(" {} ", m.said).contains(&format!(" {said} ")))
        };
        // As sure either way ("turn on the jukebox"): a thing is likelier than a room.
        found.sort_by(|a, b| {
            b.confidence.total_cmp(&a.confidence).then(
                a.slots
                    .contains_key("area")
                    .cmp(&b.slots.contains_key("area")),
            )
        });
        for u in found {
            if !self.intent_maps.iter().any(|m| m.intent == u.intent) || u.confidence < 0.5 {
                continue;
            }
            // The device of the home this reading is about: named by one
            // slot, or by two together ("open the front door": "front" read
            // as a room and "door" as a kind).
            let device = u
                .slots
                .get("name")
                .and_then(|n| {
                    self.device_named(&n.text())
                        .or_else(|| self.device_named(&n.said))
                })
                .or_else(|| {
                    u.slots.values().find_map(|a| {
                        u.slots
                            .values()
                            .filter(|b| !std::ptr::eq(*b, a))
                            .find_map(|b| self.device_named(&format!("{} {}", a.said, b.said)))
                    })
                });
            let reply = if let Some(device) = device {
                // A device of the home, asked for what its kind does not do.
                match u.slots.get("domain").map(|d| d.text()) {
                    Some(domain) if domain != device.domain => self.what_it_does(device),
                    _ => continue,
                }
            } else if let Some(area) = u.slots.get("area")
                && self.home.areas.iter().all(|a| a.name != area.text())
                && plausible_name(&area.said, &self.words)
                && !of_a_name(&area.said)
            {
                let said = area.said.strip_prefix("the ").unwrap_or(&area.said);
                format!(
                    "There's no {said} here; the rooms are {}.",
                    self.home.area_names().join(", ")
                )
            } else if let Some(name) = u.slots.get("name")
                && plausible_name(&name.said, &self.words)
                && !self.is_area(&name.said)
                && !of_a_name(&name.said)
            {
                let said = name.said.strip_prefix("the ").unwrap_or(&name.said);
                // The devices this request could be for: the kind the reading
                // says, else the kinds its intent runs commands on.
                let said_kind = u.slots.get("domain").map(|d| d.text());
                let kinds: Vec<&str> = match &said_kind {
                    Some(kind) => vec![kind.as_str()],
                    None => self
                        .intent_maps
                        .iter()
                        .filter(|m| m.intent == u.intent)
                        .filter_map(|m| m.when.get("domain").map(String::as_str))
                        .collect(),
                };
                let names: Vec<&str> = self
                    .home
                    .devices
                    .iter()
                    .filter(|d| kinds.is_empty() || kinds.contains(&d.domain.as_str()))
                    .map(|d| d.name.as_str())
                    .collect();
                format!(
                    "I don't know a device called {said}; there are {}.",
                    names.join(", ")
                )
            } else {
                continue;
            };
            let mut d = RouteDecision::simple(
                "intent.unknown_target",
                Some(format!("template:{}", u.intent)),
                Intent::Reply(reply.clone()),
            );
            d.layer = Layer::Home;
            d.understood = Some(Reading {
                intent: Some(u.intent.clone()),
                template: Some(u.template.clone()),
                reply: Some(reply),
                ..Reading::by(Layer::Home)
            });
            return Some(d);
        }
        None
    }
}
