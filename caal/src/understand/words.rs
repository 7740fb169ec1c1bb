//! The language pack, compiled: the words and phrases the understanding
//! layers read a sentence with (`[understand.languages.<code>]`, shipped in
//! `config/lang/<code>.toml`), each normalised once and, where the longest
//! must be tried first, sorted so.

use std::collections::BTreeMap;

use super::lowered as normalize;
use crate::config::{LanguageConfig, OfferConfig};

/// A language's words, as the layers use them.
#[derive(Clone, Debug, Default)]
pub struct Words {
    pub split_words: Vec<String>,
    pub negations: Vec<String>,
    pub negation_idioms: Vec<String>,
    pub narrative_words: Vec<String>,
    pub narrative_subjects: Vec<String>,
    pub past_endings: Vec<String>,
    pub request_verbs: Vec<String>,
    pub question_words: Vec<String>,
    pub refer_to_thing: Vec<String>,
    pub refer_to_place: Vec<String>,
    /// Words that stand for a thing said elsewhere, never a thing's name.
    pub refer_to_item: Vec<String>,
    /// The speaker's place said ("in here"), and what it is read as
    /// (`in the {area}`), longest phrase first.
    pub speaker_place: Vec<(String, String)>,
    /// How a room is said after a request (`in the {area}`; empty: not read so).
    pub in_room: String,
    /// Words that take back a name or a value just said ("sorry", "I mean").
    pub corrections: Vec<String>,
    /// … only between two stops (", no, ").
    pub corrections_between_stops: Vec<String>,
    /// Longest first.
    pub correction_leads: Vec<String>,
    pub broken_endings: Vec<String>,
    pub reason_words: Vec<String>,
    /// Typed slips that make another word, and the word meant.
    pub word_slips: Vec<(String, String)>,
    pub refer_to_lights: Vec<String>,
    pub light_words: Vec<String>,
    pub item_leads: Vec<String>,
    /// Longest first, so "don't forget to" is taken before "don't forget".
    pub remember_leads: Vec<String>,
    pub remind_with: String,
    /// `cannot_help` with its offers said, `try_saying`, and the offers.
    pub cannot_help: String,
    pub try_saying: String,
    pub list_joins: Vec<String>,
    pub joined_items: Vec<String>,
    pub offers: Vec<OfferConfig>,
    pub heard_fillers: Vec<String>,
    pub joined_prefixes: Vec<String>,
    pub prefix_heard_as: Vec<String>,
    /// Words that sound alike and mean different things ("18", "80").
    pub heard_alike: Vec<[String; 2]>,
    pub in_heard_as: Vec<String>,
    /// The word `in_heard_as` puts back ("in").
    pub in_word: String,
    /// Longest first.
    pub opening_words: Vec<String>,
    /// Longest first.
    pub another_words: Vec<String>,
    pub aside_openers: Vec<String>,
    pub level_words: Vec<String>,
    /// Longest first.
    pub closing_words: Vec<String>,
    pub be_contractions: Vec<String>,
    pub be_in_full: BTreeMap<String, String>,
    pub condition_told: Vec<String>,
    pub naming_leads: BTreeMap<String, String>,
    pub known_things: std::collections::HashSet<String>,
    pub gerund_leads: Vec<String>,
    pub gerund_endings: Vec<String>,
    pub habit_words: Vec<String>,
    pub asking_modals: Vec<String>,
    pub text_words: BTreeMap<String, String>,
    pub text_digit_after: Vec<String>,
    /// Longest first.
    pub behalf_people: Vec<String>,
    /// Longest lead first.
    pub behalf_leads: Vec<(String, String)>,
    pub passive_needs: Vec<String>,
    /// Longest first.
    pub passive_be: Vec<String>,
    pub passive_people: BTreeMap<String, String>,
    pub thing_pointers: Vec<String>,
    pub back_words: Vec<String>,
    pub back_before: Vec<String>,
    /// Longest first.
    pub said_to_others: Vec<String>,
    /// Longest first.
    pub wish_leads: Vec<String>,
    pub wish_verbs: Vec<String>,
    pub carried_letters: Vec<String>,
    pub sound_pairs: Vec<Vec<String>>,
    pub first_heard_as: BTreeMap<String, Vec<String>>,
    pub number_heard_as: BTreeMap<String, String>,
    pub number_units: Vec<String>,
    pub place_particles: Vec<String>,
    pub place_prepositions: Vec<String>,
    pub approximate_before: Vec<String>,
    /// Longest first.
    pub approximate_after: Vec<String>,
    pub clause_leads: Vec<String>,
    pub checking_words: Vec<String>,
    /// Longest first.
    pub question_tags: Vec<String>,
    pub described_kinds: BTreeMap<String, String>,
    /// Longest first.
    pub described_by: Vec<String>,
    /// Longest first.
    pub same_for: Vec<String>,
    pub addressed_leads: Vec<String>,
    /// Longest first.
    pub addressed_kinds: Vec<String>,
    pub addressed_to: String,
    pub addressed_that: Vec<String>,
    pub for_length: String,
    pub demonstratives: Vec<String>,
    pub of_words: Vec<String>,
    pub hesitations: Vec<String>,
    /// Both words of each of `state_opposites` ("on", "off", "lock").
    pub state_words: Vec<String>,
    pub conditions: Vec<String>,
    pub asking_words: Vec<String>,
    pub whether_words: Vec<String>,
    pub polite_asks: Vec<String>,
    pub did_subjects: Vec<String>,
    pub did_word: String,
    pub past_forms: BTreeMap<String, String>,
    pub perfect_forms: BTreeMap<String, String>,
    pub be_verbs: Vec<String>,
    pub condition_questions: Vec<String>,
    pub determiners: Vec<String>,
    pub definites: Vec<String>,
    pub answer_fillers: Vec<String>,
    pub ordinals: Vec<String>,
    pub last_words: Vec<String>,
    pub all_answers: Vec<String>,
    pub everywhere: String,
    pub in_area: String,
    pub answer_leads: Vec<String>,
    pub answer_tails: Vec<String>,
    pub not_device_names: Vec<String>,
    pub item_fillers: Vec<String>,
    pub negative_words: Vec<String>,
    pub not_negative: Vec<String>,
    pub kind_names: BTreeMap<String, String>,
    /// Words of opposite meaning (the sound layer never reads one as the other).
    pub opposites: Vec<[String; 2]>,
    pub topic_words: BTreeMap<String, Vec<String>>,
    pub remark_needs: BTreeMap<String, Vec<String>>,
    /// The semantic examples' sentences, for the vocabulary.
    pub example_sentences: Vec<String>,
}

impl Words {
    /// Whether `w` is one of `request_verbs` ("turn", "pause").
    pub fn is_request_verb(&self, w: &str) -> bool {
        self.request_verbs.iter().any(|v| v == w)
    }

    /// Whether `w` is a verb in the past: one of `past_forms` ("left"), or
    /// a word of a few letters more than a past ending that ends with it
    /// ("locked"; not "red").
    pub fn is_past(&self, w: &str) -> bool {
        (self.past_endings.iter()).any(|e| w.len() > e.len() + 2 && w.ends_with(e.as_str()))
            || self.past_forms.contains_key(w)
    }

    /// Whether `w` is a verb of being (`be_verbs`), or ends with one said
    /// as an ending (`be_contractions`: "it's", "we're").
    pub fn is_being(&self, w: &str) -> bool {
        self.be_verbs.iter().any(|b| b == w)
            || self.be_contractions.iter().any(|c| w.ends_with(c.as_str()))
    }

    /// Whether `text` opens with a request's verb ("shut the garage",
    /// "pause the cake").
    pub fn opens_with_request_verb(&self, text: &str) -> bool {
        text.split(' ')
            .next()
            .is_some_and(|w| self.is_request_verb(w))
    }

    /// Whether `thing` (lower case) is one the pack's `known_things` holds,
    /// said as one or as several ("egg", "eggs"); true when the pack lists
    /// none (nothing to judge by).
    pub fn knows_thing(&self, thing: &str) -> bool {
        let t = thing.trim();
        self.known_things.is_empty()
            || self.known_things.contains(t)
            || [format!("{t}s"), format!("{t}es")]
                .iter()
                .any(|x| self.known_things.contains(x))
            || ["es", "s"]
                .iter()
                .filter_map(|e| t.strip_suffix(e))
                .any(|x| self.known_things.contains(x))
    }

    /// The language's words; `offers` are the offers whose commands are
    /// configured (what `cannot_help` names).
    pub fn compile(words: &LanguageConfig, offers: Vec<OfferConfig>) -> Words {
        let compiled = Words {
            split_words: normalized(&words.split_words),
            negations: normalized(&words.negations),
            negation_idioms: normalized(&words.negation_idioms),
            narrative_words: normalized(&words.narrative_words),
            narrative_subjects: normalized(&words.narrative_subjects),
            past_endings: normalized(&words.past_endings),
            request_verbs: normalized(&words.request_verbs),
            question_words: normalized(&words.question_words),
            refer_to_thing: normalized(&words.refer_to_thing),
            refer_to_place: normalized(&words.refer_to_place),
            refer_to_item: normalized(&words.refer_to_item),
            speaker_place: longest_first(
                (words.speaker_place.iter())
                    .map(|(k, v)| (normalize(k), v.clone()))
                    .collect(),
                |(k, _)| k,
            ),
            in_room: words.in_room.clone(),
            corrections: normalized(&words.corrections),
            corrections_between_stops: normalized(&words.corrections_between_stops),
            correction_leads: longest(&words.correction_leads),
            broken_endings: normalized(&words.broken_endings),
            reason_words: normalized(&words.reason_words),
            word_slips: pairs(&words.word_slips).into_iter().collect(),
            refer_to_lights: words.refer_to_lights.clone(),
            light_words: normalized(&words.light_words),
            item_leads: normalized(&words.item_leads),
            remember_leads: longest(&words.remember_leads),
            remind_with: words.remind_with.clone(),
            cannot_help: words.cannot_help.replace(
                "{offers}",
                &crate::command::join_summaries(offers.iter().map(|o| o.says.as_str())),
            ),
            try_saying: words.try_saying.clone(),
            list_joins: normalized(&words.list_joins),
            joined_items: normalized(&words.joined_items),
            offers,
            heard_fillers: normalized(&words.heard_fillers),
            joined_prefixes: normalized(&words.joined_prefixes),
            prefix_heard_as: normalized(&words.prefix_heard_as),
            heard_alike: two_each(&words.heard_alike),
            in_heard_as: normalized(&words.in_heard_as),
            in_word: normalize(&words.in_word),
            opening_words: longest(&words.opening_words),
            another_words: longest(&words.another_words),
            aside_openers: normalized(&words.aside_openers),
            level_words: normalized(&words.level_words),
            closing_words: longest(&words.closing_words),
            be_contractions: normalized(&words.be_contractions),
            be_in_full: pairs(&words.be_in_full),
            condition_told: normalized(&words.condition_told),
            naming_leads: pairs(&words.naming_leads),
            known_things: normalized(&words.known_things).into_iter().collect(),
            gerund_leads: longest(&words.gerund_leads),
            gerund_endings: normalized(&words.gerund_endings),
            habit_words: normalized(&words.habit_words),
            asking_modals: normalized(&words.asking_modals),
            carried_letters: normalized(&words.carried_letters),
            sound_pairs: words.sound_pairs.iter().map(|p| normalized(p)).collect(),
            first_heard_as: lists(&words.first_heard_as),
            number_heard_as: pairs(&words.number_heard_as),
            number_units: normalized(&words.number_units),
            clause_leads: normalized(&words.clause_leads),
            checking_words: normalized(&words.checking_words),
            question_tags: longest(&words.question_tags),
            state_words: normalized(&words.state_opposites.concat()),
            conditions: normalized(&words.conditions),
            asking_words: normalized(&words.asking_words),
            whether_words: normalized(&words.whether_words),
            polite_asks: longest(&words.polite_asks),
            did_subjects: normalized(&words.did_subjects),
            did_word: normalize(&words.did_word),
            past_forms: pairs(&words.past_forms),
            perfect_forms: pairs(&words.perfect_forms),
            be_verbs: normalized(&words.be_verbs),
            condition_questions: normalized(&words.condition_questions),
            determiners: normalized(&words.determiners),
            definites: normalized(&words.definites),
            answer_fillers: normalized(&words.answer_fillers),
            ordinals: normalized(&words.ordinals),
            last_words: normalized(&words.last_words),
            all_answers: normalized(&words.all_answers),
            everywhere: normalize(&words.everywhere),
            in_area: words.in_area.clone(),
            answer_leads: normalized(&words.answer_leads),
            answer_tails: normalized(&words.answer_tails),
            not_device_names: normalized(&words.not_device_names),
            item_fillers: normalized(&words.item_fillers),
            negative_words: normalized(&words.negative_words),
            not_negative: longest(&words.not_negative),
            kind_names: words.kind_names.clone(),
            opposites: two_each(&words.opposites),
            topic_words: lists(&words.topic_words),
            remark_needs: lists(&words.remark_needs),
            example_sentences: (words.examples.iter())
                .flat_map(|e| e.examples.clone())
                .collect(),
            ..Words::default()
        };
        compiled.with_restatements(words)
    }

    /// The words of requests said otherwise (restated.rs, described.rs).
    fn with_restatements(self, words: &LanguageConfig) -> Words {
        Words {
            text_words: pairs(&words.text_words),
            text_digit_after: normalized(&words.text_digit_after),
            behalf_people: longest(&words.behalf_people),
            behalf_leads: longest_first(
                pairs(&words.behalf_leads).into_iter().collect(),
                |(k, _)| k.as_str(),
            ),
            passive_needs: normalized(&words.passive_needs),
            passive_be: longest(&words.passive_be),
            passive_people: pairs(&words.passive_people),
            thing_pointers: normalized(&words.thing_pointers),
            back_words: normalized(&words.back_words),
            back_before: normalized(&words.back_before),
            said_to_others: longest(&words.said_to_others),
            wish_leads: longest(&words.wish_leads),
            wish_verbs: normalized(&words.wish_verbs),
            place_particles: normalized(&words.place_particles),
            place_prepositions: normalized(&words.place_prepositions),
            approximate_before: normalized(&words.approximate_before),
            approximate_after: longest(&words.approximate_after),
            described_kinds: pairs(&words.described_kinds),
            described_by: longest(&words.described_by),
            same_for: longest(&words.same_for),
            addressed_leads: normalized(&words.addressed_leads),
            addressed_kinds: longest(&words.addressed_kinds),
            addressed_to: normalize(&words.addressed_to),
            addressed_that: normalized(&words.addressed_that),
            for_length: words.for_length.clone(),
            demonstratives: normalized(&words.demonstratives),
            of_words: normalized(&words.of_words),
            hesitations: longest(&words.hesitations),
            ..self
        }
    }
}

/// Each key and its word or phrase as the layers compare them.
fn pairs(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    (map.iter())
        .map(|(k, v)| (normalize(k), normalize(v)))
        .collect()
}

/// Each key and its words as the layers compare them.
fn lists(map: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, Vec<String>> {
    (map.iter())
        .map(|(k, v)| (normalize(k), normalized(v)))
        .collect()
}

/// Each pair of words as the layers compare them.
fn two_each(pairs: &[[String; 2]]) -> Vec<[String; 2]> {
    (pairs.iter())
        .map(|[a, b]| [normalize(a), normalize(b)])
        .collect()
}

/// Each word or phrase as the layers compare it (lowered, punctuation as the
/// sentence's is).
fn normalized(words: &[String]) -> Vec<String> {
    words.iter().map(|w| normalize(w)).collect()
}

/// Words normalised, longest first.
fn longest(words: &[String]) -> Vec<String> {
    longest_first(normalized(words), String::as_str)
}

/// Phrases sorted longest first, so a longer one is taken before a phrase
/// it holds ("don't forget to" before "don't forget").
fn longest_first<T>(mut phrases: Vec<T>, phrase: impl Fn(&T) -> &str) -> Vec<T> {
    phrases.sort_by_key(|p| std::cmp::Reverse(phrase(p).len()));
    phrases
}
