//! Things said otherwise than by their names: a device said by where it
//! is ("the light by the bed", "the lamp on my desk": `described_kinds`,
//! `described_by`), and a request asked again for another room or device
//! ("… and the same for the dining room": `same_for`), and a request
//! passed to a thing of the home ("tell the heating to go up two":
//! `addressed_leads`), a thing pointed at ("that 5 minute timer":
//! `demonstratives`), and a name said with "of" ("the lights of the
//! kitchen": `of_words`). Each is restated before it is read (step
//! `opening`), kept only where understood.

use super::*;
use crate::understand::mentions::mentions;

impl Router {
    /// A device said by where it is (`described_kinds`, `described_by`):
    /// "the light by the bed" is the bedroom lamp, the one light whose
    /// name's first word "bed" starts; "the lamp on my desk" the desk
    /// lamp; "the lamp in the living room" the one lamp of that room ("the
    /// light in the garage" stays the garage's lights: `light_words`).
    pub(in crate::router) fn described_off(&self, text: &str) -> Option<String> {
        const PLACE_WORDS: usize = 2;
        const MIN_START: usize = 3;
        let w = &self.words;
        let words: Vec<&str> = text.split(' ').collect();
        for (i, kind_said) in words.iter().enumerate() {
            let Some(domain) = w.described_kinds.get(without_mark(kind_said)) else {
                continue;
            };
            let rest = words[i + 1..].join(" ");
            let Some(by) = (w.described_by.iter()).find(|by| {
                rest.strip_prefix(by.as_str())
                    .is_some_and(|r| r.starts_with(' '))
            }) else {
                continue;
            };
            let at = i + 1 + by.split(' ').count();
            let skip = (words[at..].iter())
                .take_while(|d| w.determiners.iter().any(|x| x == *d))
                .count();
            let place = &words[at + skip..];
            let lights = w.light_words.iter().any(|l| l == without_mark(kind_said));
            let kind = || (self.home.devices.iter()).filter(|d| d.domain == *domain);
            // The home's names are normalised as it is read.
            let room_of = |n: usize| self.home.area_named(without_mark(&place[..n].join(" ")));
            // "The light in the living room" is the room's lights.
            let names_room = (1..=PLACE_WORDS.min(place.len())).any(|n| room_of(n).is_some());
            if lights && names_room {
                continue;
            }
            // The place in one word or two: the device of the kind whose
            // name's first word it starts, or (a lamp) the one of that room.
            let found = (1..=PLACE_WORDS.min(place.len())).rev().find_map(|n| {
                let said = place[..n].join(" ");
                let said = without_mark(&said);
                let room = room_of(n);
                let by_name: Vec<_> = kind()
                    .filter(|d| {
                        n == 1
                            && said.len() >= MIN_START
                            && (d.name.split(' ').next())
                                .is_some_and(|first| first.starts_with(said))
                    })
                    .collect();
                let by_room: Vec<_> = kind()
                    .filter(|d| !lights && room.is_some_and(|r| d.area.as_deref() == Some(r)))
                    .collect();
                match (by_name.as_slice(), by_room.as_slice()) {
                    ([d], _) | ([], [d]) => Some((d.name.clone(), n)),
                    _ => None,
                }
            });
            let Some((name, n)) = found else {
                continue;
            };
            let end = at + skip + n;
            let last = words[end - 1];
            let mark = &last[without_mark(last).len()..];
            let mut out: Vec<String> = (words[..i].iter()).map(|x| (*x).to_owned()).collect();
            out.push(format!("{name}{mark}"));
            out.extend(words[end..].iter().map(|x| (*x).to_owned()));
            return Some(out.join(" "));
        }
        None
    }

    /// A request asked again for another room or device (`same_for`):
    /// "turn off the kitchen lights and the same for the dining room" is
    /// "turn off the kitchen lights and turn off the dining room lights";
    /// only where the request names one thing of the same slot (a room for
    /// a room, a device for a device) and nothing follows the other.
    pub(in crate::router) fn same_again(&self, text: &str) -> Option<String> {
        let padded = format!(" {text}");
        let (at, phrase) = (self.words.same_for.iter())
            .find_map(|p| padded.find(&format!(" {p} ")).map(|at| (at, p)))?;
        let before = padded[..at].trim().trim_end_matches(',').trim_end();
        let other = padded[at + phrase.len() + 2..]
            .trim()
            .trim_end_matches(['.', '!', ',']);
        let said = mentions(&self.home, before, None);
        let then = mentions(&self.home, other, None);
        let [new] = then.as_slice() else {
            return None;
        };
        let rest = format!("{}{}", &other[..new.span().0], &other[new.span().1..]);
        if rest
            .split_whitespace()
            .any(|w| !self.words.determiners.iter().any(|d| d == w))
        {
            return None;
        }
        let [old] = said.as_slice() else {
            return None;
        };
        if old.slot != new.slot {
            return None;
        }
        let (start, end) = old.span();
        // Said again without the words that opened it ("two things: …").
        let mut opened = &before[..start];
        while let Some(after) = super::opening::lead_off(opened, &self.words.opening_words) {
            opened = after;
        }
        let again = format!("{opened}{}{}", new.said, &before[end..]);
        let and = self.words.list_joins.first()?;
        Some(format!("{before} {and} {again}"))
    }

    /// A request passed to a thing of the home (`addressed_leads`, the
    /// thing in a few words that name a room or device of the home or end
    /// with one of `addressed_kinds`), read as said to the thing itself:
    /// "tell the heating to go up two" is "the heating go up two", "tell
    /// the shopping list we need oat milk" is "we need oat milk" (what is
    /// said after `addressed_that`, or after nothing, is the request; after
    /// `addressed_to`, the thing is said with it). "Tell my wife to …"
    /// passes it to no thing of the home.
    pub(in crate::router) fn addressed_off(&self, text: &str) -> Option<String> {
        const THING_WORDS: usize = 4;
        let w = &self.words;
        let words: Vec<&str> = text.split(' ').collect();
        words
            .first()
            .filter(|l| w.addressed_leads.iter().any(|a| a == *l))?;
        let names = |thing: &str| {
            let thing = without_mark(thing);
            (w.addressed_kinds.iter()).any(|k| thing == k || thing.ends_with(&format!(" {k}")))
                || mentions(&self.home, thing, None)
                    .iter()
                    .any(|m| m.span().1 == thing.len())
        };
        // The longest few words after the lead that name a thing, and
        // something said after them.
        let end = (2..=(THING_WORDS + 1).min(words.len() - 1))
            .rev()
            .find(|&end| names(&words[1..end].join(" ")))?;
        let thing = words[1..end].join(" ");
        let thing = without_mark(&thing);
        let rest = &words[end..];
        match rest.split_first() {
            Some((to, said)) if *to == w.addressed_to && !said.is_empty() => {
                Some(format!("{thing} {}", said.join(" ")))
            }
            Some((that, said)) if w.addressed_that.iter().any(|t| t == that) => {
                (!said.is_empty()).then(|| said.join(" "))
            }
            _ => Some(rest.join(" ")),
        }
    }

    /// A thing pointed at (`demonstratives`: "that", "this") said as "the"
    /// where a word of a kind of thing (a timer's or a light's, or one of
    /// `addressed_kinds`) follows within a few words: "add a minute to
    /// that 5 minute timer", "switch off this lamp"; only in a sentence
    /// that asks in words ("that garage door's been squeaking" is a remark).
    pub(in crate::router) fn pointed_off(&self, text: &str) -> Option<String> {
        const KIND_WITHIN: usize = 4;
        let w = &self.words;
        if !w.demonstratives.iter().any(|d| text.contains(d.as_str())) || !self.asks_in_words(text)
        {
            return None;
        }
        let the = w.definites.first()?;
        let mut words: Vec<&str> = text.split(' ').collect();
        let kind = |x: &str| {
            let x = without_mark(x);
            self.kind_word(x) || w.addressed_kinds.iter().any(|k| k == x)
        };
        // "This room" is the speaker's place (`speaker_place`), read there.
        let place = |i: usize| {
            let rest = words[i..].join(" ");
            (w.speaker_place.iter()).any(|(p, _)| {
                rest.strip_prefix(p.as_str())
                    .is_some_and(|r| r.is_empty() || r.starts_with([' ', ',']))
            })
        };
        let at = (0..words.len()).find(|&i| {
            w.demonstratives.iter().any(|d| d == words[i])
                && !place(i)
                && (words[i + 1..].iter().take(KIND_WITHIN)).any(|x| kind(x))
        })?;
        words[at] = the;
        Some(words.join(" "))
    }

    /// A name said with "of" (`of_words`), as Spanish and French speakers
    /// say it: "the lights of the kitchen" is "the kitchen lights", "the
    /// list of the shopping" "the shopping list"; only where the two so
    /// joined name the home (a room and a light word, a device, or one of
    /// `addressed_kinds`).
    pub(in crate::router) fn of_named(&self, text: &str) -> Option<String> {
        const PART_WORDS: usize = 2;
        let w = &self.words;
        let words: Vec<&str> = text.split(' ').collect();
        let is_the = |x: &str| w.definites.iter().any(|d| d == x);
        for (i, of) in words.iter().enumerate() {
            if !w.of_words.iter().any(|o| o == of) || i < 2 {
                continue;
            }
            for a in 1..=PART_WORDS.min(i - 1) {
                if !is_the(words[i - a - 1]) || i + 2 >= words.len() || !is_the(words[i + 1]) {
                    continue;
                }
                for b in 1..=PART_WORDS.min(words.len() - i - 2) {
                    let thing = words[i - a..i].join(" ");
                    let owner = words[i + 2..i + 2 + b].join(" ");
                    let owner = without_mark(&owner);
                    let joined = format!("{owner} {thing}");
                    let room_lights =
                        self.home.area_named(owner).is_some() && w.light_words.contains(&thing);
                    let names = room_lights
                        || w.addressed_kinds.contains(&joined)
                        || self.home.names().any(|n| *n == joined);
                    if names {
                        let last = words[i + 1 + b];
                        let mark = &last[without_mark(last).len()..];
                        let mut out: Vec<String> =
                            (words[..i - a].iter()).map(|x| (*x).to_owned()).collect();
                        out.push(format!("{joined}{mark}"));
                        out.extend(words[i + 2 + b..].iter().map(|x| (*x).to_owned()));
                        return Some(out.join(" "));
                    }
                }
            }
        }
        None
    }
}
