//! The sound layer (speech only): readings of what was heard by how it
//! sounds, weighed against the audio by whisper's decoder.

use super::*;

/// At most this many readings of a misheard sentence are tried (each a
/// template match, well under a millisecond).
pub(in crate::router) const MAX_READINGS: usize = 16;

/// At most this many readings by sound are weighed against the audio
/// (each a few milliseconds of whisper's decoder a token).
const LISTENED: usize = 6;

/// Words as whisper writes a sentence, to weigh against the audio: numbers
/// spelled as said, the first letter capital, a full stop at the end.
fn as_written(words: &str) -> String {
    let said: Vec<String> = words
        .split_whitespace()
        .map(|w| crate::understand::lexicon::spell_number(w).unwrap_or_else(|| w.to_owned()))
        .collect();
    let said = said.join(" ");
    let mut chars = said.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => String::new(),
    }
}

impl Router {
    /// What speech to text heard, read as the sentence of the library it
    /// sounds nearest ("Set the bedroom lamp, write us to 50%": brightness;
    /// "Activate the lights in our phone": home), when that sentence is
    /// within `understand.sounds.threshold` and the templates understand it
    /// as a request. Further than `sure`, it asks first (a question further
    /// than `sure` that names a room or device not heard is not read by
    /// sound at all); a wildcard may take
    /// heard words only within `sure` (`by_name`: none at all, and within
    /// `sure`). Never a heard word read as its opposite ("turn on" as "turn
    /// out"); only for speech, never for a sentence that says "not" or
    /// tells a story. The trace's `understood` keeps what was heard, what it
    /// was read as, the sentence it sounds like, and how near.
    pub(in crate::router) fn by_sound(
        &self,
        text: &str,
        context: &Context,
        by_name: bool,
    ) -> Option<RouteDecision> {
        let sounds = self.sounds.as_ref().filter(|_| context.spoken)?;
        if self.says_not(text) || self.tells_a_story(text) {
            return None;
        }
        let grammar = sounds.grammar(|lexicon| self.sound_grammar(lexicon))?;
        let prepared = self.library.prepare(text);
        let config = &sounds.config;
        let (threshold, sure) = (config.threshold, config.sure);
        let listen = context.listen.as_ref().filter(|_| config.listen);
        let limit = match (by_name, listen) {
            (true, _) => sure,
            (false, Some(_)) => threshold.max(config.listen_threshold),
            (false, None) => threshold,
        };
        let found = grammar.nearest(&prepared, MAX_READINGS, limit as f32);
        let mut readings = found.into_iter().filter_map(|near| {
            let wild_ok = if by_name {
                near.wild_words == 0
            } else {
                near.wild_words == 0 || f64::from(near.distance) <= sure
            };
            if !wild_ok
                || by_name && !names_near(grammar, &prepared, &near.reading)
                || crate::understand::semantic::opposed(
                    &self.words.opposites,
                    &prepared,
                    &near.reading,
                )
            {
                return None;
            }
            let d = self
                .understood(&near.reading, context)
                .filter(sure_request)?;
            Some((near, d))
        });
        let (near, mut d, fit) = match listen {
            None => {
                let (near, d) = readings.next()?;
                (near, d, None)
            }
            Some(listen) => {
                let readings: Vec<_> = readings.take(LISTENED).collect();
                self.listened(&prepared, readings, listen, config)?
            }
        };
        let distance = f64::from(near.distance);
        // A question read further than `sure` that names a room or device
        // not heard is no question asked: an answer can't be asked about
        // first, and would answer what no one asked ("what's the capital of
        // France": the kitchen cabinets).
        if distance > sure && !self.changes_something(&d) && names_unheard(&d, text) {
            return None;
        }
        // Near, but a side ("on", "out", "lock") no heard sound went to
        // is a guess: asked about, never run on it; so is one further
        // than `sure`, however well it fits the audio. A question is
        // answered (beyond `sure`, only one whose names were heard): the
        // answer says what was understood, and changes nothing.
        let guessed = near
            .unheard
            .iter()
            .any(|w| self.words.opposites.iter().any(|pair| pair.contains(w)))
            || replaces_sure_words(&prepared, &near.reading, context);
        if (distance > sure || guessed)
            && self.changes_something(&d)
            && let Intent::Chain(chain) = &mut d.intent
            && chain.chain_level < AuthLevel::CONFIRM
        {
            chain.chain_level = AuthLevel::CONFIRM;
            d.auth_level = AuthLevel::CONFIRM;
        }
        d.confidence = (1.0 - distance).clamp(0.0, 1.0);
        Some(decided_by(d, Layer::Sounds, |u| {
            u.heard_text = Some(text.to_owned());
            u.read_as = Some(near.reading.clone());
            u.distance = Some(round3(distance));
            u.sounds_like = Some(near.template.clone());
            u.fits_audio = fit.map(|fit| (f64::from(fit) * 100.0).round() / 100.0);
        }))
    }

    /// Of readings of a mishearing, the one that fits the audio best, and
    /// by how much better than the words heard (log-likelihood). Read: any
    /// within `threshold`, and one up to `listen_threshold` that fits no
    /// more than `listen_margin` worse than the words heard. A reading
    /// whose wildcard took heard words fits as they were heard, so it is
    /// weighed only when no other is near. Unscored (no audio), the nearest
    /// within `threshold`.
    fn listened(
        &self,
        prepared: &str,
        readings: Vec<(SoundMatch, RouteDecision)>,
        listen: &crate::understand::Listen,
        config: &crate::config::SoundsConfig,
    ) -> Option<(SoundMatch, RouteDecision, Option<f32>)> {
        let within = |near: &SoundMatch| f64::from(near.distance) <= config.threshold;
        let filled = readings.iter().any(|(near, _)| near.wild_words == 0);
        let readings: Vec<_> = readings
            .into_iter()
            .filter(|(near, _)| !filled || near.wild_words == 0)
            .collect();
        if readings.is_empty() {
            return None;
        }
        let texts: Vec<String> = std::iter::once(prepared)
            .chain(readings.iter().map(|(near, _)| near.reading.as_str()))
            .map(as_written)
            .collect();
        let Some(scores) = listen.score(&texts) else {
            return readings
                .into_iter()
                .find(|(near, _)| within(near))
                .map(|(near, d)| (near, d, None));
        };
        let heard = scores[0];
        readings
            .into_iter()
            .zip(&scores[1..])
            .map(|((near, d), score)| (near, d, score - heard))
            .filter(|(near, _, fit)| within(near) || f64::from(*fit) >= -config.listen_margin)
            .max_by(|a, b| a.2.total_cmp(&b.2))
            .map(|(near, d, fit)| (near, d, Some(fit)))
    }

    /// The library's sentences that run a command, by sound.
    fn sound_grammar(
        &self,
        lexicon: std::sync::Arc<crate::understand::lexicon::Lexicon>,
    ) -> crate::understand::sounds::SoundGrammar {
        let rules = [self.library.rules()];
        let lists = [self.home.lists(), self.library.lists()];
        let scope = crate::understand::sounds::SoundScope {
            rules: &rules,
            lists: &lists,
        };
        let mapped: HashSet<&str> = self.intent_maps.iter().map(|m| m.intent.as_str()).collect();
        crate::understand::sounds::SoundGrammar::build(
            lexicon,
            &scope,
            self.library
                .sentences()
                .filter(|(intent, _, _)| mapped.contains(intent)),
        )
    }
}

/// How far by sound (`SoundGrammar::word_distance`) a word a reading puts
/// for a name heard unsurely may be from a word heard.
const NAME_NEAR: f32 = 0.5;

/// Whether each word `reading` puts where `heard` had another sounds near
/// one of the heard words it left out: a name read by sound is near what
/// was heard ("the rice timer" is never read "the hall timer"). A number
/// in digits is weighed by the sentence's sound, not word by word.
fn names_near(
    grammar: &crate::understand::sounds::SoundGrammar,
    heard: &str,
    reading: &str,
) -> bool {
    let heard_words: Vec<&str> = heard.split_whitespace().collect();
    let read_words: Vec<&str> = reading.split_whitespace().collect();
    let left: Vec<&str> = (heard_words.iter().copied())
        .filter(|w| !read_words.contains(w))
        .collect();
    (read_words.iter().copied())
        .filter(|w| !heard_words.contains(w) && !w.chars().any(|c| c.is_ascii_digit()))
        .all(|w| (left.iter()).any(|h| grammar.word_distance(w, h) <= NAME_NEAR))
}

/// Whether `d` names a room, device or door whose words were not all heard.
fn names_unheard(d: &RouteDecision, heard: &str) -> bool {
    let Intent::Chain(chain) = &d.intent else {
        return false;
    };
    let heard: Vec<&str> = heard
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .collect();
    (chain.commands.iter().flat_map(|c| c.params.iter()))
        .filter(|(k, _)| matches!(k.as_str(), "device" | "room" | "door"))
        .any(|(_, v)| v.to_string().split(' ').any(|w| !heard.contains(&w)))
}

/// Whether `reading` puts other words where a word heard surely was
/// ("let's take bananas on the list", "take" heard at 0.79, read "check
/// bananas on the list"): whisper was sure of what the reading says it
/// misheard, so the reading is a guess. Words only dropped are no guess.
fn replaces_sure_words(heard: &str, reading: &str, context: &Context) -> bool {
    let mut missing: Vec<&str> = heard.split_whitespace().collect();
    let mut added = false;
    for w in reading.split_whitespace() {
        match missing.iter().position(|m| *m == w) {
            Some(i) => {
                missing.swap_remove(i);
            }
            None => added = true,
        }
    }
    added && missing.iter().any(|w| context.heard_surely(w))
}
