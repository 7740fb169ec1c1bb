//! What a sentence names, found before what it asks: the home's rooms and
//! devices as spans (longest first: "the living room lamp" is the lamp, not
//! the room), and the speaker's place said as "here" or "this room". A
//! reading that names a room the sentence's spans do not hold is no
//! reading of it. The phrases are the language's (`speaker_place`); a
//! name taken back is `layers/repair.rs`'s.

use crate::understand::{Context, mentions::mentions};

use super::{Intent, RouteDecision, Router};
use crate::understand::{Rewrite, Understood};

impl Router {
    /// `text` with its speaker's-place phrase ("in here", "this room") put
    /// as the room the client said it is in, when it names no room itself;
    /// `None` when there is no such phrase or no room is known.
    pub(super) fn here_said(&self, text: &str, context: &Context) -> Option<String> {
        let area = context.area.as_deref()?;
        let padded = format!(" {text} ");
        // The phrase between spaces, or before a clause mark ("in here, take it down").
        let at = |phrase: &str| {
            let needle = format!(" {phrase}");
            padded.match_indices(&needle).map(|(at, _)| at).find(|&at| {
                let next = padded[at + needle.len()..].chars().next();
                next.is_some_and(|c| c == ' ' || crate::understand::CLAUSE_MARKS.contains(&c))
            })
        };
        let (start, phrase, put) = (self.words.speaker_place.iter())
            .find_map(|(phrase, put)| Some((at(phrase)?, phrase, put)))?;
        if mentions(&self.home, text, None)
            .iter()
            .any(|m| m.slot == "area")
        {
            return None;
        }
        let end = start + 1 + phrase.len();
        let with = format!(
            "{} {}{}",
            &padded[..start],
            put.replace("{area}", area),
            &padded[end..]
        );
        Some(with.trim().to_owned())
    }

    /// A number heard as a word that sounds like it, before a unit
    /// (`number_heard_as`: "turn the heat down to degrees" for "two
    /// degrees"; a length of time or one of `number_units`), where no
    /// number is said before it: the sentence with the number put back.
    pub(super) fn number_heard_as(&self, text: &str) -> Option<String> {
        let lang = self.library.lang;
        let mut words: Vec<String> = text.split(' ').map(str::to_owned).collect();
        let is_number = |w: &str| !crate::understand::numbers::numbers_in(lang, w).is_empty();
        let unit = |w: &str| {
            let w = w.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '%');
            self.words.number_units.iter().any(|u| u == w)
                || crate::understand::numbers::parse_duration(lang, &format!("2 {w}")).is_some()
        };
        let at = (0..words.len().saturating_sub(1)).find(|&i| {
            self.words.number_heard_as.contains_key(&words[i])
                && unit(&words[i + 1])
                && !(i > 0 && is_number(&words[i - 1]))
        })?;
        words[at] = self.words.number_heard_as[&words[at]].clone();
        Some(words.join(" "))
    }

    /// "In" before a room heard as another word (`in_heard_as`: "turn off
    /// the lights and the kitchen", "lights off and here"): the sentence
    /// with "in" put back, where that word is followed by a room (or the
    /// speaker's place) and at most a few words more ("on", "for me"), and
    /// nothing before it names a room or device (then the room would be a
    /// second thing asked for: "turn on the porch light and the kitchen").
    pub(super) fn in_heard_as(&self, text: &str) -> Option<String> {
        const AFTER: usize = 3;
        let words: Vec<&str> = text.split(' ').collect();
        let i = words
            .iter()
            .position(|w| self.words.in_heard_as.iter().any(|h| h == w))
            .filter(|&i| i > 0)?;
        if !mentions(&self.home, &words[..i].join(" "), None).is_empty() {
            return None;
        }
        let rest = &words[i + 1..];
        let determiners = rest
            .iter()
            .take_while(|w| self.words.determiners.iter().any(|d| d == *w))
            .count();
        let named = rest[determiners..].join(" ");
        let lead = format!("{} ", self.words.in_word);
        let place = self.words.speaker_place.iter().find_map(|(phrase, _)| {
            let p = phrase.strip_prefix(&lead)?;
            (named == p || named.starts_with(&format!("{p} "))).then_some(p.len())
        });
        let room = mentions(&self.home, &named, None);
        let said = match place {
            Some(len) => len,
            None => match room.as_slice() {
                [m] if m.slot == "area" && m.span().0 == 0 => m.said.len(),
                _ => return None,
            },
        };
        if named[said..].split_whitespace().count() > AFTER {
            return None;
        }
        let mut meant: Vec<&str> = words[..i].to_vec();
        meant.push(&self.words.in_word);
        meant.extend(rest);
        Some(meant.join(" "))
    }

    /// What was typed read with one word that is a common slip for
    /// another ("turn of the bathroom lights"), the first such reading
    /// that a template or rule reads whole; `None` when none does.
    pub(super) fn slipped(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let words: Vec<&str> = text.split(' ').collect();
        for (i, w) in words.iter().enumerate() {
            let bare = super::layers::without_mark(w);
            let Some((_, meant)) = self.words.word_slips.iter().find(|(slip, _)| slip == bare)
            else {
                continue;
            };
            let mut read = words.clone();
            let with = format!("{meant}{}", &w[bare.len()..]);
            read[i] = &with;
            let read = read.join(" ");
            // Read whole by a template or a rule (never the nearest meaning
            // or a part of the words, which would find a request in talk: "my
            // kids left every light on"); neither embeds, so talk with such a
            // word costs little more.
            // A second slip in the same words, of spelling ("turn of the
            // kitchen lihgts"), is read as the heard-as layer reads one.
            let d = self
                .by_templates(&read, context)
                .or_else(|| self.by_rules(&read).map(|(_, d)| d))
                .or_else(|| self.heard_as(&read, context));
            if let Some(d) = d {
                return Some(read_as(d, &read, Rewrite::TypingSlip));
            }
        }
        None
    }

    /// The readings whose room is one the sentence names as a room: not
    /// part of a longer name ("living room" in "the living room lamp"). A
    /// room not said (the client's place, the conversation's) stands. The
    /// sentence's names are found once, and only when a reading says a room.
    pub(super) fn rooms_as_named(&self, text: &str, found: &mut Vec<Understood>) {
        let said_room = |u: &Understood| {
            u.slots
                .get("area")
                .map(|s| s.said.to_lowercase())
                .filter(|s| !s.is_empty())
        };
        if !found.iter().any(|u| said_room(u).is_some()) {
            return;
        }
        let spans = mentions(&self.home, text, None);
        found.retain(|u| {
            said_room(u).is_none_or(|said| {
                !spans
                    .iter()
                    .any(|m| m.slot != "area" && m.said.contains(&said) && m.said != said)
            })
        });
    }
}

impl Router {
    /// A reading with no device or room slot, of a sentence that names one
    /// device (of the reading's kind, if it has one) in words the template
    /// held as its own ("is the garage door open": a kind of cover; "what's
    /// the thermostat set to"), names that device where its mapping takes
    /// one. `said` keeps the sentence's names, found once.
    pub(super) fn device_said(
        &self,
        text: &str,
        u: &mut Understood,
        said: &mut Option<Vec<crate::understand::mentions::Mention>>,
    ) {
        if u.slots.contains_key("name") || u.slots.contains_key("area") {
            return;
        }
        let names = said.get_or_insert_with(|| mentions(&self.home, text, None));
        let domain = u.slots.get("domain").map(|d| d.text());
        let mut devices = names.iter().filter(|m| {
            m.slot == "name"
                && m.value
                    .as_str()
                    .and_then(|id| self.home.device(id))
                    .is_some_and(|d| domain.as_deref().is_none_or(|k| d.domain == k))
        });
        let (Some(m), None) = (devices.next(), devices.next()) else {
            return;
        };
        let mut named = u.clone();
        let slot = crate::understand::Slot {
            value: m.value.clone(),
            said: m.said.clone(),
            context: m.context.clone(),
            wildcard_span: None,
        };
        named.slots.insert("name".into(), slot);
        let takes =
            |map: &crate::config::IntentMapConfig| map.params.values().any(|t| t.contains("{name"));
        if self.map_for(&named).is_some_and(takes) {
            *u = named;
        }
    }
}

/// `d`, decided on the sentence as read (`read_as`), saying so in what it understood.
impl Router {
    /// "How long is left on the pasta": where a timer command without a
    /// name was understood and the sentence ends in what can be a timer's
    /// name (not a name of the home), it is read again with the timer word
    /// after that name, and taken when that reading is the same command
    /// naming it.
    pub(super) fn timer_named_alone(
        &self,
        text: &str,
        d: RouteDecision,
        context: &Context,
    ) -> RouteDecision {
        let unnamed = match &d.intent {
            Intent::Chain(chain) => {
                matches!(chain.commands.as_slice(), [c] if !c.params.contains_key("name"))
                    && d.understood
                        .as_ref()
                        .and_then(|u| u.intent.as_deref())
                        .is_some_and(|i| i.contains("Timer"))
            }
            _ => false,
        };
        let Some((name, read)) = unnamed
            .then(|| self.timer_names.named_alone(text))
            .flatten()
            .filter(|(name, _)| mentions(&self.home, name, None).is_empty())
        else {
            return d;
        };
        let command = d.command_id.clone();
        let named = self.by_templates(&read, context).filter(|n| {
            n.command_id == command
                && matches!(&n.intent, Intent::Chain(c) if c.commands.len() == 1
                    && c.commands[0].params.get("name").is_some_and(|v| v.to_string() == name))
        });
        match named {
            Some(n) => read_as(n, &read, Rewrite::TimerByName),
            None => d,
        }
    }

    /// A request whose free words (a wildcard's) took words said aside: a
    /// clause after a comma (or another clause mark) that opens with an
    /// `aside_openers` word (a contraction's first part counts: "delete the
    /// reminder to pay the gas bill, I've already done it"), or what follows
    /// a length of time ("remind me to order flowers in 45 minutes once I'm
    /// off this call"). The sentence up to there, when it is the same
    /// command (after a length of time, with more said: the time).
    pub(super) fn said_aside(
        &self,
        text: &str,
        d: &RouteDecision,
        context: &Context,
    ) -> Option<RouteDecision> {
        let params = |d: &RouteDecision| match &d.intent {
            Intent::Chain(c) => c.commands.iter().map(|c| c.params.len()).sum(),
            _ => 0,
        };
        let free: Vec<&str> = super::layers::free_values(d).collect();
        if free.is_empty() {
            return None;
        }
        // A comma, or a stop whisper wrote for one.
        let marks = text.match_indices(' ').map(|(i, _)| i).filter(|&i| {
            i > 0 && crate::understand::CLAUSE_MARKS.contains(&char::from(text.as_bytes()[i - 1]))
        });
        let after_mark = (marks.map(|i| (i - 1, i + 1)))
            .filter(|&(_, from)| {
                let next = text[from..].split([' ', '\'']).next().unwrap_or_default();
                self.words.aside_openers.iter().any(|o| o == next)
            })
            .map(|cut| (cut, 0));
        // After a length of time, and the mark said after it ("… in half an
        // hour, the street cleaners are coming").
        let marked = |c: char| crate::understand::CLAUSE_MARKS.contains(&c);
        let after_time = (text.match_indices(' ').map(|(i, _)| i))
            .filter(|&i| {
                let word = text[..i].rsplit(' ').next().unwrap_or_default();
                crate::understand::numbers::says_a_length_of_time(word.trim_end_matches(marked))
            })
            .map(|i| {
                let cut = text[..i].trim_end_matches(marked).len();
                ((cut, i + 1), 1)
            });
        after_mark
            .chain(after_time)
            .find_map(|((cut, from), more)| {
                let aside = text[from..].trim();
                if aside.is_empty() || !free.iter().any(|t| t.contains(aside)) {
                    return None;
                }
                let before = &text[..cut];
                let n = self.understood(before, context).filter(|n| {
                    matches!(n.intent, Intent::Chain(_))
                        && n.command_id == d.command_id
                        && params(n) >= params(d) + more
                })?;
                Some(read_as(n, before, Rewrite::SaidAside))
            })
    }
}

pub(super) fn read_as(mut d: RouteDecision, read_as: &str, why: Rewrite) -> RouteDecision {
    let u = d
        .understood
        .get_or_insert_with(|| crate::understand::Reading::by(d.layer));
    u.read_as = Some(read_as.to_owned());
    u.read_because = Some(why);
    d
}
