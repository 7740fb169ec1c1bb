//! Heard as: a word no sentence knows read as a known word spelled or
//! sounding near it (typed slips and mishearings), kept only where the
//! sentence so read is understood.

use super::*;

/// One reading of what was heard: the words changed, as (first word, how
/// many, read as).
type Reading = Vec<(usize, usize, String)>;

/// What was heard, word by word, with the words the sentences know.
pub(in crate::router) struct Heard<'a> {
    vocabulary: &'a Vocabulary,
    lang: crate::understand::Lang,
    /// Each word lower case, without the marks around it.
    bare: Vec<String>,
}

impl Heard<'_> {
    /// A word the sentences, the home or the numbers know.
    pub(in crate::router) fn known(&self, w: &str) -> bool {
        w.is_empty()
            || self.vocabulary.contains_key(w)
            || w.chars().any(|c| c.is_ascii_digit())
            || !crate::understand::numbers::numbers_at(self.lang, w, 0).is_empty()
    }

    /// Words no sentence knows, each read as the one known word nearest
    /// in spelling; two words heard for one ("thermos tap"). Several as
    /// near, or a short word: each is tried, and the one the sentence is
    /// understood with is taken ("lock the mac door": back, not max).
    fn unknown_words(&self) -> Vec<Reading> {
        let (bare, vocabulary) = (&self.bare, self.vocabulary);
        let mut first = Vec::new();
        let mut alternatives = Vec::new();
        let mut i = 0;
        while i < bare.len() {
            let w = &bare[i];
            if let Some(next) = bare.get(i + 1)
                && (!self.known(w) || !self.known(next))
                && let [one] = nearest_words(vocabulary, &format!("{w}{next}"), 4).as_slice()
            {
                first.push((i, 2, one.clone()));
                i += 2;
                continue;
            }
            if !self.known(w) {
                match nearest_words(vocabulary, w, 3).as_slice() {
                    [] => {}
                    [one] if w.chars().count() >= 4 => first.push((i, 1, one.clone())),
                    several => alternatives.extend(several.iter().map(|c| (i, 1, c.clone()))),
                }
            }
            i += 1;
        }
        let mut readings = Vec::new();
        if !first.is_empty() {
            readings.push(first.clone());
        }
        for alt in alternatives {
            let mut r = first.clone();
            r.push(alt);
            readings.push(r);
        }
        readings
    }
}

impl Router {
    /// A word no sentence, name or example knows, read as the one word it is
    /// nearest in spelling ("reminds me" as "remind me", "thermos tap" as
    /// "thermostat", a typed "kitchn"): whisper mishears, people mistype.
    /// Only when the sentence so read is understood whole, and only words of
    /// four letters or more, within one edit (two from eight letters), the
    /// nearest unique; words in two joined when together they are one.
    /// A question of whether ("is everything off in the office") is never
    /// read as the change it asks about (its "is" heard as a filler).
    pub(in crate::router) fn heard_as(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let asks = self.asks_whether(text);
        self.read_as_heard(text, true, !context.spoken, |read| {
            self.understood(read, context)
                .or_else(|| self.by_clause(read, context, false))
                .filter(|d| !asks || !self.changes_something(d))
        })
    }

    /// A request the meaning layer found but whose door, device or room it
    /// could not tell ("make sure the mac door is locked": which door?),
    /// read as whisper may have misheard it, and understood by meaning
    /// then: "mac" is "back", the one door that fits.
    pub(in crate::router) fn heard_as_meant(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        self.read_as_heard(text, true, !context.spoken, self.meant_by(text, context))
    }

    /// How a reading is understood by meaning alone: a decision, never the
    /// change a question of whether asks about.
    fn meant_by<'a>(
        &'a self,
        text: &str,
        context: &'a Context,
    ) -> impl Fn(&str) -> Option<RouteDecision> + 'a {
        let asks = self.asks_whether(text);
        move |read| {
            self.by_meaning(read, context)
                .decided
                .filter(|d| !asks || !self.changes_something(d))
        }
    }

    /// A typed slip among the words a wildcard took ("remind me to feed
    /// the cat in 10 minutrs"), read mended: the same command as `d`, with
    /// more of the sentence the template's own words. Spelling only, of
    /// words no dictionary has.
    pub(in crate::router) fn wildcard_slip_mended(
        &self,
        text: &str,
        d: &RouteDecision,
        context: &Context,
    ) -> Option<RouteDecision> {
        self.read_as_heard(text, false, true, |read| {
            self.understood(read, context)
                .filter(|m| m.command_id == d.command_id && m.confidence > d.confidence)
        })
    }

    /// A typed word no sentence knows read as the word nearest in spelling,
    /// understood by meaning where no template reads it ("opne the garage"
    /// is "open the garage", which only the meaning layer knows). Typed
    /// words only: no reading by sound, and only a request sure enough to run.
    pub(in crate::router) fn typed_as_meant(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        // Only where a word is no word of the dictionary's (most talk is
        // all words; nothing is read again for it).
        let sounds = self.sounds.as_ref()?;
        let slips = text
            .split(' ')
            .map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                    .to_lowercase()
            })
            .filter(|w| w.chars().any(char::is_alphabetic))
            .any(|w| sounds.knows(&w) == Some(false));
        if !slips {
            return None;
        }
        self.read_as_heard(text, false, true, self.meant_by(text, context))
    }

    /// The first reading of `text` as speech to text may have misheard it
    /// (or, not `by_sound`, as it may have been mistyped: spelling only)
    /// that `understand` takes as a request sure enough to run; with
    /// `fewest`, with no more words changed than it needs.
    fn read_as_heard(
        &self,
        text: &str,
        by_sound: bool,
        fewest: bool,
        understand: impl Fn(&str) -> Option<RouteDecision>,
    ) -> Option<RouteDecision> {
        let vocabulary = self.vocabulary.get_or_init(|| vocabulary_of(self));
        if vocabulary.is_empty() {
            return None;
        }
        let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
        let heard = Heard {
            vocabulary,
            lang: self.library.lang,
            bare: words
                .iter()
                .map(|w| {
                    w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                        .to_lowercase()
                })
                .collect(),
        };
        let mut readings = heard.unknown_words();
        if by_sound {
            readings.extend(self.names_heard(&heard));
            readings.extend(self.sounds_heard(&heard));
        } else {
            // Typed: only words no dictionary has are slips ("opne"); a word
            // it has was meant ("the kitchen is a mess" is not "less").
            let Some(sounds) = &self.sounds else {
                return None;
            };
            readings.retain(|edits| {
                edits.iter().all(|(at, n, _)| {
                    heard.bare[*at..at + n]
                        .iter()
                        .all(|w| sounds.knows(w) == Some(false))
                })
            });
        }
        let bare = &heard.bare;
        let apply = |edits: &Reading| applied(&words, bare, edits);
        readings
            .into_iter()
            .take(MAX_READINGS)
            .find_map(|mut edits| {
                let (mut read, mut changed) = apply(&edits);
                let mut d = understand(&read).filter(sure_request)?;
                // Typed, only the words the request needs are read otherwise: a
                // change it is the same command without is undone ("add eggs to
                // the shoppign list" adds eggs, not egg).
                let mut i = 0;
                while fewest && edits.len() > 1 && i < edits.len() {
                    let mut fewer = edits.clone();
                    fewer.remove(i);
                    let (r, c) = apply(&fewer);
                    let same = |n: &RouteDecision| n.command_id == d.command_id;
                    match understand(&r).filter(sure_request).filter(same) {
                        Some(n) => (edits, read, changed, d) = (fewer, r, c, n),
                        None => i += 1,
                    }
                }
                Some(decided_by(d, Layer::HeardAs, |u| {
                    u.read_as = Some(read);
                    u.words = changed;
                }))
            })
    }

    /// A name of the home heard as other words ("mad room": bedroom,
    /// "best lamp": desk lamp), one or two words within two edits of a
    /// name of six letters or more, spelled or sounded.
    fn names_heard(&self, heard: &Heard) -> Vec<Reading> {
        let bare = &heard.bare;
        let names: Vec<String> = self.home.names().map(|n| normalize(n)).collect();
        let said = format!(" {} ", bare.join(" "));
        let mut readings = Vec::new();
        for n in 1..=2 {
            for i in 0..bare.len().saturating_sub(n - 1) {
                let window = bare[i..i + n].concat();
                if !alphabetic(&window) || window.len() < 4 {
                    continue;
                }
                let near: Vec<&String> = names
                    .iter()
                    .filter(|name| {
                        let joined: String = name.split(' ').collect();
                        joined.len() >= 6
                            && joined != window
                            // A name said as it is is no mishearing.
                            && !said.contains(&format!(" {name} "))
                            && joined.len().abs_diff(window.len()) <= 2
                            && heard_distance(&window, &joined) <= 2
                    })
                    .collect();
                if let [name] = near.as_slice() {
                    readings.push(vec![(i, n, (*name).clone())]);
                }
            }
        }
        readings
    }

    /// Sounds heard as other known words (every reading here changes
    /// words that are known, so only a sentence then understood counts).
    fn sounds_heard(&self, heard: &Heard) -> Vec<Reading> {
        let (bare, vocabulary) = (&heard.bare, heard.vocabulary);
        let mut readings = Vec::new();
        // - two words heard for one longer one ("the activate": deactivate);
        for i in 0..bare.len().saturating_sub(1) {
            let joined = format!("{}{}", bare[i], bare[i + 1]);
            if heard.known(&bare[i])
                && heard.known(&bare[i + 1])
                && alphabetic(&joined)
                && let [one] = nearest_words(vocabulary, &joined, 8).as_slice()
            {
                readings.push(vec![(i, 2, one.clone())]);
            }
        }
        // - a word's last letter heard as the next word's first ("light sun":
        //   lights on, "light south": lights out);
        for i in 0..bare.len().saturating_sub(1) {
            for letter in &self.words.carried_letters {
                let (a, b) = (&bare[i], &bare[i + 1]);
                let Some(rest) = b.strip_prefix(letter.as_str()) else {
                    continue;
                };
                let longer = format!("{a}{letter}");
                if rest.is_empty() || !alphabetic(a) || !vocabulary.contains_key(&longer) {
                    continue;
                }
                let rests = if vocabulary.contains_key(rest) {
                    vec![rest.to_owned()]
                } else {
                    sounds_near(vocabulary, rest)
                };
                for r in rests {
                    readings.push(vec![(i, 2, format!("{longer} {r}"))]);
                }
            }
        }
        // - the first word's first sound voiced or not ("but toilet paper
        //   on the list": put);
        if let Some(w) = bare.first() {
            for pair in &self.words.sound_pairs {
                let [x, y] = pair.as_slice() else { continue };
                for (from, to) in [(x, y), (y, x)] {
                    if let Some(rest) = w.strip_prefix(from.as_str()) {
                        let other = format!("{to}{rest}");
                        if vocabulary.contains_key(&other) {
                            readings.push(vec![(0, 1, other)]);
                        }
                    }
                }
            }
        }
        // - the first word one speech to text writes for another said there
        //   ("and milk to the shopping list": add);
        if let Some(said) = bare.first().and_then(|w| self.words.first_heard_as.get(w)) {
            readings.extend(said.iter().map(|w| vec![(0, 1, w.clone())]));
        }
        // - a word heard before the request that was not said ("they
        //   illuminate the entire home").
        //   Never when the two first words may be one heard as two ("the
        //   activate" is deactivate, "and lock" may be unlock: the second
        //   word alone would be the opposite), within two edits.
        let one_heard_as_two = |joined: &str| {
            let sound = sound_spelling(joined);
            vocabulary.iter().any(|(v, v_sound)| {
                v.len() >= 5
                    && v.len().abs_diff(joined.len()) <= 2
                    && heard_within((joined, &sound), (v, v_sound), 2).is_some()
            })
        };
        if bare.len() > 2
            && self.words.heard_fillers.contains(&bare[0])
            && !one_heard_as_two(&format!("{}{}", bare[0], bare[1]))
        {
            readings.push(vec![(0, 1, String::new())]);
        }
        readings
    }
}

/// `words` with a reading's changes made, and the words it changed (`bare`:
/// the words as compared).
fn applied(words: &[&str], bare: &[String], edits: &Reading) -> (String, Vec<WordRead>) {
    let (mut out, mut changed, mut i) = (Vec::with_capacity(words.len()), Vec::new(), 0);
    while i < words.len() {
        match edits.iter().find(|(at, _, _)| *at == i) {
            Some((_, n, read)) => {
                let heard = bare[i..i + n].join(" ");
                let read_as = read.to_string();
                changed.push(WordRead {
                    heard,
                    read: read_as,
                });
                out.extend((!read.is_empty()).then_some(read.as_str()));
                i += n;
            }
            None => {
                out.push(words[i]);
                i += 1;
            }
        }
    }
    (out.join(" "), changed)
}
