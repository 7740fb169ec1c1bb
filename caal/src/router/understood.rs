//! What the understanding layers found, as routing decisions: an intent
//! mapped to a command by `[[understand.intents]]`, its parameters filled
//! from the slots and checked against the home; a negated request that is
//! never run; several requests in one sentence as one chain; a room or
//! device that is not in the home answered by naming what is.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};

use super::{Choice, Intent, RouteDecision, Router, normalize};
use crate::{
    auth::{AuthLevel, CommandChain},
    config::{ConfigError, ExampleConfig, IntentMapConfig, SemanticConfig},
    understand::{
        Context, Lang, Layer, MAX_WORDS, Understood, home::value_names, sounds::SoundMatch,
    },
};

/// The model layer's way out: the sentence is none of the meanings offered.
pub const NONE_OF_THESE: &str = "none of these: not a request to do something";

/// What the meaning layer made of a sentence: a decision if it was near
/// enough and clearly apart, and, when the model layer is on and it was not
/// sure, the nearest meanings for a model to choose among.
#[derive(Default)]
pub(super) struct Meaning {
    pub decided: Option<RouteDecision>,
    pub choices: Vec<Choice>,
    /// The commands of the requests found near (`RouteDecision::near`).
    pub near: Option<Vec<String>>,
}

/// How sure a clause's own reading must be: a template that matched it
/// (a wildcard may take part of it, inside the clause).
const SURE_CLAUSE: f64 = 0.5;
/// At most this many readings of a misheard sentence are tried (each a
/// template match, well under a millisecond).
const MAX_READINGS: usize = 16;
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

/// The words a router knows (its sentences', its home's names', its
/// examples' and its word lists'), each with its spelling as it sounds
/// (`sound_spelling`), made once: spelling the whole vocabulary again for
/// every unknown word was most of what reading a mishearing cost.
pub(super) type Vocabulary = std::collections::HashMap<String, String>;

fn vocabulary_of(router: &Router) -> Vocabulary {
    let words = vocabulary_words(router);
    words
        .into_iter()
        .map(|w| {
            let sound = sound_spelling(&w);
            (w, sound)
        })
        .collect()
}

fn vocabulary_words(router: &Router) -> std::collections::HashSet<String> {
    let mut out = router.library.vocabulary();
    let mut add = |text: &str| {
        for w in normalize(text).split(' ') {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
            if !w.is_empty() && !w.contains('{') {
                out.insert(w.to_owned());
            }
        }
    };
    for a in &router.home.areas {
        add(&a.name);
        a.aliases.iter().for_each(|x| add(x));
    }
    for d in &router.home.devices {
        add(&d.name);
        d.aliases.iter().for_each(|x| add(x));
    }
    for list in [
        &router.example_sentences,
        &router.split_words,
        &router.negations,
        &router.negation_idioms,
        &router.narrative_words,
        &router.request_verbs,
        &router.refer_to_thing,
        &router.refer_to_place,
        &router.item_leads,
        &router.remember_leads,
    ] {
        list.iter().for_each(|x| add(x));
    }
    out
}

/// A decision reached by routing other words than were said (what "it"
/// pointed back at put in, a lead taken off): kept only when it is a request
/// (to run, or one whose target is named as missing or asked about), with
/// how it was reached noted in its `understood` under `key`.
fn answered_with(mut d: RouteDecision, key: &str, how: Value) -> Option<RouteDecision> {
    if !matches!(
        d.intent,
        Intent::Chain(_) | Intent::Invalid { .. } | Intent::Ambiguous { .. }
    ) {
        return None;
    }
    let mut u = d
        .understood
        .take()
        .unwrap_or_else(|| json!({"layer": d.layer}));
    if let Some(obj) = u.as_object_mut() {
        obj.insert(key.into(), how);
    }
    d.understood = Some(u);
    Some(d)
}

/// The words of `vocabulary` nearest `w` in spelling (one edit; two from
/// eight letters), all those as near; none for a word shorter than
/// `shortest` letters, or one with digits. Known words of fewer than
/// `shortest` letters are never given either.
fn nearest_words(vocabulary: &Vocabulary, w: &str, shortest: usize) -> Vec<String> {
    let len = w.chars().count();
    if len < shortest || !w.chars().all(|c| c.is_alphabetic() || c == '\'') {
        return Vec::new();
    }
    let most = if len >= 8 { 2 } else { 1 };
    let mut best: Vec<&str> = Vec::new();
    let mut best_d = usize::MAX;
    let sound = sound_spelling(w);
    for (v, v_sound) in vocabulary {
        if v.len().abs_diff(w.len()) > most || v.chars().count() < shortest.max(3) {
            continue;
        }
        let Some(d) = heard_within((w, &sound), (v, v_sound), most) else {
            continue;
        };
        if d == 0 || d > best_d {
            continue;
        }
        if d < best_d {
            best.clear();
            best_d = d;
        }
        best.push(v);
    }
    best.sort_unstable();
    best.into_iter().map(str::to_owned).collect()
}

/// A lower bound of the edit distance between two words: how many letters
/// one has that the other lacks, the larger way round (each edit changes
/// that by one at most). Counted for ASCII letters; 0 (no bound) otherwise.
/// Most of the vocabulary is this far from a word, and counting is cheaper
/// than the distance itself, which reading a mishearing computed for every
/// known word of about the same length.
fn bag_distance(a: &str, b: &str) -> usize {
    if !a.is_ascii() || !b.is_ascii() {
        return 0;
    }
    let mut count = [0i16; 128];
    for c in a.bytes() {
        count[usize::from(c)] += 1;
    }
    for c in b.bytes() {
        count[usize::from(c)] -= 1;
    }
    let (more, fewer) = count.iter().fold((0usize, 0usize), |(m, f), &n| {
        if n > 0 {
            (m + n as usize, f)
        } else {
            (m, f + n.unsigned_abs() as usize)
        }
    });
    more.max(fewer)
}

/// A word spelled as it sounds, for comparing what was heard with what is
/// known: "ck", a hard "c" (not in "ch") and "q" as "k", "ph" as "f", doubled letters
/// once ("mac" and "back" are then one sound apart, as they are said).
fn sound_spelling(w: &str) -> String {
    let chars: Vec<char> = w.chars().collect();
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        let (sound, skip) = match (c, next) {
            ('c', Some('k')) => ('k', 2),
            ('p', Some('h')) => ('f', 2),
            ('c', Some('e' | 'i' | 'y')) => ('s', 1),
            ('c', Some('h')) => ('c', 1),
            ('c' | 'q', _) => ('k', 1),
            _ => (c, 1),
        };
        if !out.ends_with(sound) {
            out.push(sound);
        }
        i += skip;
    }
    out
}

/// How far apart two words are, in letters (a swap of two is one edit) or
/// in sound, whichever is nearer.
fn heard_distance(a: &str, b: &str) -> usize {
    let (sa, sb) = (sound_spelling(a), sound_spelling(b));
    heard_within((a, &sa), (b, &sb), usize::MAX).unwrap_or(usize::MAX)
}

/// `heard_distance` of two words given with their sound spellings, if it
/// is at most `most`: the letters they do not share rule most pairs out
/// before either distance is computed.
fn heard_within(
    (a, a_sound): (&str, &str),
    (b, b_sound): (&str, &str),
    most: usize,
) -> Option<usize> {
    if bag_distance(a, b) > most && bag_distance(a_sound, b_sound) > most {
        return None;
    }
    // Letters: two swapped are one slip ("mintues", "lgihts"; optimal
    // string alignment), as typed and as written out; sounds: edits.
    // Levenshtein first: it is the cheaper, and a swap saves one edit at
    // most per two, so only a pair within twice the bound can gain by it
    // (computing the alignment for every near pair quadrupled talk's time).
    let letters = strsim::levenshtein(a, b);
    let letters = if letters > most && letters <= 2 * most {
        strsim::osa_distance(a, b)
    } else {
        letters
    };
    let d = letters.min(strsim::levenshtein(a_sound, b_sound));
    (d <= most).then_some(d)
}

/// Short known words one edit from `rest` ("un": on, in, an), a vowel for
/// a vowel first (the sound most often misheard), at most three.
fn sounds_near(vocabulary: &Vocabulary, rest: &str) -> Vec<String> {
    let vowel = |c: char| "aeiouy".contains(c);
    let mut near: Vec<(bool, &str)> = vocabulary
        .keys()
        .filter(|v| v.len().abs_diff(rest.len()) <= 1 && v.len() >= 2)
        .filter(|v| strsim::levenshtein(rest, v) == 1)
        .map(|v| {
            let vowel_for_vowel = v.len() == rest.len()
                && v.chars()
                    .zip(rest.chars())
                    .all(|(a, b)| a == b || (vowel(a) && vowel(b)));
            (!vowel_for_vowel, v.as_str())
        })
        .collect();
    near.sort_unstable();
    near.into_iter()
        .take(3)
        .map(|(_, v)| v.to_owned())
        .collect()
}

/// Several requests found by `layer` (a split, clauses) as one chain, gated
/// once at its highest level, with each part's own reading.
fn several_parts(
    commands: Vec<crate::auth::Command>,
    layer: Layer,
    parts: Vec<Value>,
) -> RouteDecision {
    let chain = CommandChain::new(commands, None, None);
    RouteDecision {
        route_code: "intent.command".into(),
        source_rule: None,
        topic: None,
        auth_level: chain.chain_level,
        macro_name: None,
        command_id: chain.command_id().map(str::to_owned),
        params: json!({}),
        intent: Intent::Chain(chain),
        layer,
        understood: Some(json!({"layer": layer, "parts": parts})),
        confidence: 1.0,
        choices: Vec::new(),
        near: None,
    }
}

/// A device kind as people say it.
fn kind_word(domain: &str) -> &str {
    match domain {
        "climate" => "thermostat",
        "cover" => "door or blind that opens",
        "media_player" => "media player",
        other => other,
    }
}

use crate::understand::{CLAUSE_MARKS, padded_words};

/// A sentence's clauses, at a clause mark followed by a space or the end
/// ("21.5" and "1,000" are numbers, not clauses).
/// `said` with each word of an opposite pair it holds put as the other
/// ("pause the timer": "unpause the timer", "resume the timer").
fn opposite_readings(pairs: &[[String; 2]], said: &str) -> Vec<String> {
    let words: Vec<&str> = said.split(' ').collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        for [a, b] in pairs {
            let other = if w == a {
                b
            } else if w == b {
                a
            } else {
                continue;
            };
            let mut swapped = words.clone();
            swapped[i] = other;
            let text = swapped.join(" ");
            if !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out
}

/// The most clauses a sentence is read in; more is no request (a list
/// read out, a pasted text).
const MAX_CLAUSES: usize = 12;

/// The longest sentence a run of half of it may be the request in.
const SPAN_WORDS: usize = 24;

fn clauses(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if CLAUSE_MARKS.contains(&char::from(*b))
            && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace())
        {
            out.push(&text[start..i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|c| c.chars().any(char::is_alphanumeric))
        .collect()
}

/// One clause's decision, saying which clause it was and what it pointed back at.
fn clause_decision(
    d: RouteDecision,
    clause: &str,
    said: &str,
    referent: Option<String>,
) -> RouteDecision {
    let mut fields = vec![("clause", json!(clause))];
    if referent.is_some() {
        fields.extend([("said", json!(said)), ("referent", json!(referent))]);
    }
    decided_by(d, Layer::Clause, fields)
}

/// `d` as the layer `layer` decided it, its `understood` recording the
/// layer and `fields` (what that layer read).
fn decided_by(
    mut d: RouteDecision,
    layer: Layer,
    fields: impl IntoIterator<Item = (&'static str, Value)>,
) -> RouteDecision {
    d.layer = layer;
    let mut u = d.understood.take().unwrap_or_else(|| json!({}));
    if let Some(obj) = u.as_object_mut() {
        obj.insert("layer".into(), json!(layer));
        for (key, value) in fields {
            obj.insert(key.into(), value);
        }
    }
    d.understood = Some(u);
    d
}

/// Whether `d` took a level (a brightness, a temperature or a change of
/// it) that its sentence fixes rather than one said.
fn fixes_a_level(d: &RouteDecision) -> bool {
    let slots = d.understood.as_ref().and_then(|u| u.get("slots"));
    ["brightness", "temperature", "change"].iter().any(|k| {
        slots
            .and_then(|s| s.get(*k))
            .and_then(|s| s.get("said"))
            .and_then(Value::as_str)
            .is_some_and(str::is_empty)
    })
}

/// What a clause after "if" or "whether" asks, as questions to try in
/// turn, and whether it asks for something to be done ("you could turn on
/// the lights" is "turn on the lights"): "the garage is open" is "is the
/// garage open"; "I left the porch light on" is "did I leave the porch
/// light on"; "we locked the door" is "did we lock …" (or "locke …": the
/// one a layer understands is taken).
fn as_questions(clause: &str) -> (Vec<String>, bool) {
    const POLITE: &[&str] = &[
        "you could ",
        "you can ",
        "you would ",
        "you'd ",
        "you might ",
    ];
    if let Some(rest) = POLITE.iter().find_map(|p| clause.strip_prefix(p)) {
        return (vec![rest.to_owned()], true);
    }
    let words: Vec<&str> = clause.split(' ').collect();
    let mut asked = Vec::new();
    const SUBJECTS: &[&str] = &[
        "i", "we", "you", "someone", "somebody", "anyone", "anybody", "they", "he", "she",
    ];
    if let [subject, verb, rest @ ..] = words.as_slice()
        && SUBJECTS.contains(subject)
    {
        let rest = rest.join(" ");
        // A past tense asked with "did": the few irregular ones said of a
        // home's things, else "-ed" taken off ("locked", "closed").
        let bases: Vec<String> = match *verb {
            "left" => vec!["leave".into()],
            "shut" | "put" | "set" => vec![(*verb).into()],
            "forgot" => vec!["forget".into()],
            v if v.ends_with("ed") => vec![v[..v.len() - 2].into(), v[..v.len() - 1].into()],
            _ => Vec::new(),
        };
        for base in bases {
            asked.push(format!("did {subject} {base} {rest}").trim().to_owned());
        }
    }
    // "The garage is open": the verb first.
    if let Some(at) = words
        .iter()
        .position(|w| matches!(*w, "is" | "are" | "was" | "were"))
        .filter(|&at| at > 0)
    {
        let mut q = vec![words[at]];
        q.extend(&words[..at]);
        q.extend(&words[at + 1..]);
        asked.push(q.join(" "));
    }
    (asked, false)
}

/// Whether a reading of what was heard is a request sure enough to take
/// (`heard_as`, `by_sound`).
fn sure_request(d: &RouteDecision) -> bool {
    matches!(d.intent, Intent::Chain(_)) && d.confidence >= SURE_CLAUSE
}

/// Slots the semantic layer reads by kind; any other it reads where an example marks it.
const READ_BY_KIND: &[&str] = &[
    "area",
    "name",
    "brightness",
    "temperature",
    "seconds",
    "state",
];

/// Whether words taken by an open slot could be a room's or a device's
/// name: a few words, none of them a function word or the home's own kinds
/// ("the", "lights", "temperature"), so "set the temperature to 19.5" is not
/// read as a device called "the temperature".
fn plausible_name(said: &str) -> bool {
    const NOT_NAMES: &[&str] = &[
        "the",
        "a",
        "an",
        "my",
        "our",
        "your",
        "to",
        "of",
        "in",
        "on",
        "at",
        "all",
        "every",
        "each",
        "light",
        "lights",
        "lighting",
        "lamp",
        "lamps",
        "temperature",
        "temp",
        "brightness",
        "it",
        "this",
        "that",
        "here",
        "there",
        "me",
        "house",
        "home",
        "everything",
        "percent",
        "degrees",
        // "turn the kitchen down": a direction, not part of a name.
        "up",
        "down",
    ];
    let words: Vec<&str> = said.split(' ').filter(|w| !w.is_empty()).collect();
    let words: &[&str] = match words.first() {
        Some(&("the" | "my" | "our")) => &words[1..],
        _ => &words,
    };
    !words.is_empty()
        && words.len() <= 3
        && words
            .iter()
            .all(|w| !NOT_NAMES.contains(w) && !w.chars().any(|c| c.is_ascii_digit()))
}

/// Every mapping names a command there is, with parameters it has.
pub(super) fn check_maps(
    maps: &[IntentMapConfig],
    commands: &BTreeMap<String, super::CommandSpec>,
) -> Result<(), ConfigError> {
    for m in maps {
        let problem = |problem: String| ConfigError::Item {
            what: "understand.intents entry for",
            name: m.intent.clone(),
            problem,
        };
        let spec = commands.get(&m.command).ok_or_else(|| {
            problem(format!(
                "command {:?} is not defined under [commands]",
                m.command
            ))
        })?;
        for name in m.params.keys() {
            if !spec.config.params.contains_key(name) {
                return Err(problem(format!(
                    "`{name}` is not a parameter of command {}",
                    m.command
                )));
            }
        }
    }
    Ok(())
}

/// The model layer's numbers are ones it can use.
pub(super) fn check_model_choice(m: &crate::config::ModelChoiceConfig) -> Result<(), ConfigError> {
    let value = |key: &str, problem: String| ConfigError::Value {
        key: format!("understand.model.{key}"),
        problem,
    };
    if !(0.0..=1.0).contains(&m.floor) {
        return Err(value(
            "floor",
            format!("{} is outside 0–1 (a cosine similarity)", m.floor),
        ));
    }
    if !(1..=8).contains(&m.candidates) {
        return Err(value(
            "candidates",
            format!(
                "{} is not 1–8 (a model is shown that many meanings)",
                m.candidates
            ),
        ));
    }
    if m.max_tokens == 0 {
        return Err(value("max_tokens", "must be at least 1".into()));
    }
    Ok(())
}

/// Every example group means something a mapping runs (or `-`), and a
/// free-text slot it reads is marked in one of its examples.
pub(super) fn check_examples(
    groups: &[ExampleConfig],
    maps: &[IntentMapConfig],
    semantic: &SemanticConfig,
    lang: Lang,
) -> Result<(), ConfigError> {
    let value = |key: &str, problem: String| ConfigError::Value {
        key: format!("understand.semantic.{key}"),
        problem,
    };
    for (key, v) in [
        ("threshold", semantic.threshold),
        ("sure", semantic.sure),
        ("margin", semantic.margin),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(value(
                key,
                format!("{v} is outside 0–1 (a cosine similarity)"),
            ));
        }
    }
    if semantic.sure < semantic.threshold {
        return Err(value(
            "sure",
            format!(
                "{} is below threshold {}; a match sure enough to run must also be near enough to count",
                semantic.sure, semantic.threshold
            ),
        ));
    }
    for g in groups {
        let problem = |problem: String| ConfigError::Item {
            what: "understand.languages examples for",
            name: format!("{} ({})", g.intent, lang.code()),
            problem,
        };
        if g.examples.is_empty() {
            return Err(problem("has no examples".into()));
        }
        if g.intent != "-" && !maps.iter().any(|m| m.intent == g.intent) {
            return Err(problem(
                "no [[understand.intents]] entry maps this intent to a command; add one, or use intent = \"-\" for talk that is no request".into(),
            ));
        }
        for slot in &g.find {
            let mark = format!("{{{slot}}}");
            if !READ_BY_KIND.contains(&slot.as_str())
                && !g.examples.iter().any(|e| e.contains(&mark))
            {
                return Err(problem(format!(
                    "finds `{slot}`, which is read only where an example marks it; write it as {mark} in an example, or find one of {}",
                    READ_BY_KIND.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// Whether a run of words says more than the names its template read: a
/// bare "the porch light" inside "leave the porch light as it is" asks
/// for nothing.
fn asks_something(span: &str, d: &RouteDecision) -> bool {
    let said: Vec<&str> = d
        .understood
        .as_ref()
        .and_then(|u| u["slots"].as_object())
        .map(|slots| {
            slots
                .values()
                .filter_map(|s| s["said"].as_str())
                .flat_map(|s| s.split(' '))
                .collect()
        })
        .unwrap_or_default();
    span.split(' ')
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .any(|w| !w.is_empty() && !["the", "a", "my", "please"].contains(&w) && !said.contains(&w))
}

/// Whether slot `key` satisfies a mapping's condition: `*` (present),
/// or one of `a|b|c` (case-insensitive).
fn slot_is(u: &Understood, key: &str, want: &str) -> bool {
    let Some(slot) = u.slots.get(key) else {
        return want == "-";
    };
    if want == "-" {
        return false;
    }
    want == "*"
        || want
            .split('|')
            .any(|w| w.eq_ignore_ascii_case(&slot.text()))
}

/// A mapping's parameter template over the slots: `{slot}` or
/// `{slot|default}`; none when a slot without a default is missing.
fn fill(template: &str, u: &Understood) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}')? + open;
        let inner = &rest[open + 1..close];
        let (slot, default) = match inner.split_once('|') {
            Some((s, d)) => (s, Some(d)),
            None => (inner, None),
        };
        match (u.slots.get(slot), default) {
            (Some(s), _) => out.push_str(&s.text()),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return None,
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

fn understood_json(u: &Understood, layer: Layer) -> Value {
    json!({
        "layer": layer,
        "intent": u.intent,
        "template": u.template,
        "source": u.source,
        "confidence": u.confidence,
        "slots": u.slots.iter().map(|(k, s)| (k.clone(), json!({"value": s.value, "said": s.said}))).collect::<serde_json::Map<_, _>>(),
    })
}

/// One reading of what was heard: the words changed, as (first word, how
/// many, read as).
type Reading = Vec<(usize, usize, String)>;

/// Whether a word is letters (and apostrophes) only.
fn alphabetic(w: &str) -> bool {
    !w.is_empty() && w.chars().all(|c| c.is_alphabetic() || c == '\'')
}

/// What was heard, word by word, with the words the sentences know.
struct Heard<'a> {
    vocabulary: &'a Vocabulary,
    lang: crate::understand::Lang,
    /// Each word lower case, without the marks around it.
    bare: Vec<String>,
}

impl Heard<'_> {
    /// A word the sentences, the home or the numbers know.
    fn known(&self, w: &str) -> bool {
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
    fn map_for(&self, u: &Understood) -> Option<&IntentMapConfig> {
        self.intent_maps
            .iter()
            .find(|m| m.intent == u.intent && m.when.iter().all(|(k, v)| slot_is(u, k, v)))
    }

    /// The best template match that maps to a command; one that names a
    /// device only by a word several devices share comes after the others.
    pub(super) fn by_templates(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let mut found = self.library.understand(text, &self.home, context);
        self.rooms_as_named(text, &mut found);
        for u in &mut found {
            self.narrow_by_area(u);
        }
        // Among equally sure readings: one device named whole ("the garage
        // light") before the area's lights; a word several devices share last.
        found.sort_by(|a, b| {
            let rank = |u: &Understood| {
                let shared = u.slots.values().any(|s| s.value.is_array());
                let device = u.slots.get("name").is_some_and(|s| s.value.is_string());
                (u.needs_area, shared, !device)
            };
            b.confidence
                .total_cmp(&a.confidence)
                .then(rank(a).cmp(&rank(b)))
        });
        found.iter().find_map(|u| self.template_command(u))
    }

    /// "The bedroom lamp" said as area + "lamp": of the lamps, the one in that area.
    fn narrow_by_area(&self, u: &mut Understood) {
        let Some(area) = u.slots.get("area").map(|a| a.text()) else {
            return;
        };
        for slot in u.slots.values_mut() {
            if !slot.value.is_array() {
                continue;
            }
            let here: Vec<String> = value_names(&slot.value)
                .into_iter()
                .filter(|id| {
                    self.home
                        .device(id)
                        .is_some_and(|d| d.area.as_deref() == Some(area.as_str()))
                })
                .collect();
            if let [one] = here.as_slice() {
                slot.value = Value::String(one.clone());
            }
        }
    }

    fn template_command(&self, u: &Understood) -> Option<RouteDecision> {
        self.intent_command(u, Layer::Template, None, None)
    }

    /// An understood intent as a decision of `layer`: the command its
    /// mapping names, asked about when a device is ambiguous or a room is
    /// needed, its level raised to `raise_to` if given.
    fn intent_command(
        &self,
        u: &Understood,
        layer: Layer,
        raise_to: Option<AuthLevel>,
        extra: Option<(&str, Value)>,
    ) -> Option<RouteDecision> {
        let map = self.map_for(u)?;
        let source = Some(format!("{layer}:{}", u.intent));
        let mut json = understood_json(u, layer);
        if let (Some((key, value)), Some(obj)) = (extra, json.as_object_mut()) {
            obj.insert(key.to_owned(), value);
        }
        let understood = Some(json);
        // "the lamp" when there are two: ask which, naming them.
        if let Some(slot) = u.slots.values().find(|s| s.value.is_array()) {
            let candidates = value_names(&slot.value)
                .into_iter()
                .map(|id| {
                    let mut one = u.clone();
                    if let Some(s) = one.slots.values_mut().find(|s| s.value.is_array()) {
                        s.value = Value::String(id.clone());
                    }
                    let raw = self.raw_params(map, &one);
                    self.resolve_command(&map.command, raw, None, None)
                        .map(|c| c.summary)
                        .unwrap_or(id)
                })
                .collect();
            let mut d =
                RouteDecision::simple("intent.ambiguous", source, Intent::Ambiguous { candidates });
            d.layer = layer;
            d.understood = understood;
            d.confidence = u.confidence;
            return Some(d);
        }
        // "Turn on the lights" said where CAAL does not know the room, for a
        // command that needs one: ask, rather than guess "all".
        if u.needs_area
            && map.params.values().any(|t| t.contains("{area"))
            && !u.slots.contains_key("area")
        {
            let reply = format!(
                "Which room? The rooms are {}; or say all of them.",
                self.home.area_names().join(", ")
            );
            let mut d = RouteDecision::simple("intent.clarify", source, Intent::Reply(reply));
            d.layer = layer;
            d.understood = understood;
            d.confidence = u.confidence;
            return Some(d);
        }
        let raw = self.raw_params(map, u);
        let built = self
            .resolve_commands(&map.command, raw.clone(), source.clone(), raise_to)
            .map(|c| CommandChain::new(c, None, None))
            .map_err(|problem| (map.command.clone(), problem));
        let mut d = self.chain_decision("intent.command", source, built, &raw);
        d.layer = layer;
        d.understood = understood;
        d.confidence = u.confidence;
        Some(d)
    }

    fn raw_params(&self, map: &IntentMapConfig, u: &Understood) -> BTreeMap<String, String> {
        map.params
            .iter()
            .filter_map(|(k, t)| fill(t, u).map(|v| (k.clone(), v)))
            .collect()
    }

    /// One request as a command chain, by the layers in their order: rules
    /// above the template priority, templates, then the fallback rules.
    fn command_of(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let text = normalize(text);
        let is_request = |d: &RouteDecision| {
            matches!(
                d.intent,
                Intent::Chain(_) | Intent::Invalid { .. } | Intent::Ambiguous { .. }
            )
        };
        let ruled = self.by_rules(&text);
        if let Some((priority, d)) = &ruled
            && *priority > self.template_priority
        {
            return is_request(d).then(|| d.clone());
        }
        self.by_templates(&text, context)
            .or_else(|| ruled.map(|(_, d)| d).filter(is_request))
    }

    /// "Don't unlock the door": the request it negates, never run.
    pub(super) fn negated(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let rest = self.negations.iter().find_map(|n| {
            text.strip_prefix(n.as_str())
                .filter(|r| r.starts_with(' '))
                .map(str::trim)
        })?;
        let inner = self.command_of(rest, context)?;
        // A command whose "don't" asks for something ("don't remind me to
        // call mom": cancel that reminder) becomes that request.
        if let Intent::Chain(chain) = &inner.intent
            && let [command] = chain.commands.as_slice()
            && let Some(negation) = self
                .commands
                .get(&command.command_id)
                .and_then(|spec| spec.config.negation.as_ref())
        {
            let raw: BTreeMap<String, String> = negation
                .params
                .iter()
                .map(|(k, t)| (k.clone(), crate::router::render(t, &command.params)))
                .collect();
            let source = Some(format!("negation:{}", command.command_id));
            let built = self
                .resolve_command(&negation.command, raw.clone(), source.clone(), None)
                .map(|c| CommandChain::new(vec![c], None, None))
                .map_err(|problem| (negation.command.clone(), problem));
            let mut d = self.chain_decision("intent.command", source, built, &raw);
            d.layer = Layer::Negation;
            d.understood = Some(json!({"layer": "negation", "negated": command.command_id,
                                       "asks": negation.command}));
            return Some(d);
        }
        let summary = match &inner.intent {
            Intent::Chain(chain) => chain.summary.clone(),
            _ => rest.to_owned(),
        };
        let mut d = RouteDecision::simple(
            "intent.negated",
            inner.source_rule.clone(),
            Intent::Reply(format!("Okay, I won't {summary}.")),
        );
        d.layer = Layer::Negation;
        d.understood =
            Some(json!({"layer": "negation", "negated": inner.command_id, "summary": summary}));
        Some(d)
    }

    /// Several requests in one sentence ("turn on the kitchen lights and set
    /// the thermostat to 21"): split at the configured words where every
    /// part is a request of its own; one chain, gated at its highest level.
    pub(super) fn several(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let parts = self.split(text, context, 0)?;
        if parts.len() < 2 {
            return None;
        }
        let mut commands = Vec::new();
        let mut understood = Vec::new();
        for part in parts {
            match part.intent {
                Intent::Chain(chain) => commands.extend(chain.commands),
                // A part whose parameters were refused refuses the whole.
                _ => return Some(part),
            }
            understood.push(json!({"layer": part.layer, "source_rule": part.source_rule,
                                   "understood": part.understood}));
        }
        Some(several_parts(commands, Layer::Split, understood))
    }

    fn split(&self, text: &str, context: &Context, depth: usize) -> Option<Vec<RouteDecision>> {
        if depth > 4 {
            return None;
        }
        for word in &self.split_words {
            let sep = format!(" {word} ");
            let mut from = 0;
            while let Some(at) = text[from..].find(&sep).map(|i| from + i) {
                let (left, right) = (&text[..at], &text[at + sep.len()..]);
                from = at + 1;
                let Some(first) = self.command_of(left, context) else {
                    continue;
                };
                if let Some(one) = self.command_of(right, context) {
                    return Some(vec![first, one]);
                }
                // "Turn on the kitchen lights and the hall lights": the second
                // part borrows the first part's opening words.
                let words: Vec<&str> = left.split(' ').collect();
                for k in 1..=3.min(words.len().saturating_sub(1)) {
                    let borrowed = format!("{} {right}", words[..k].join(" "));
                    if let Some(one) = self.command_of(&borrowed, context) {
                        return Some(vec![first, one]);
                    }
                }
                if let Some(mut rest) = self.split(right, context, depth + 1) {
                    rest.insert(0, first);
                    return Some(rest);
                }
            }
        }
        None
    }

    /// What no template matched, by the examples nearest in meaning: a
    /// request when the nearest is one, near enough, clearly nearer than any
    /// other meaning, and its slots could be read; asked about first (level
    /// 3) unless it is sure. Never for a sentence that says "not" or a
    /// negation: nearness in meaning does not see them. When it is not sure
    /// (or not near enough, or not clearly apart) and the model layer is on,
    /// the nearest meanings come back as choices for a model.
    pub(super) fn by_meaning(&self, text: &str, context: &Context) -> Meaning {
        let Some(semantic) = self.semantic.as_ref() else {
            return Meaning::default();
        };
        // The meaning layer is there: what it leaves out is near nothing.
        let nothing = Meaning {
            near: Some(Vec::new()),
            ..Meaning::default()
        };
        // Embeddings barely tell "lock the door" from "don't lock the door",
        // or "it was dark in the office" from "it's dark in the office": a
        // sentence with a negation, or a story, is left to the other layers.
        if self.says_not(text) || self.tells_a_story(text) {
            return nothing;
        }
        let asks = self.asks_whether(text);
        let found = match semantic.understand(text, &self.home, context, asks) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!("semantic layer: {e}");
                return nothing;
            }
        };
        let cfg = &semantic.config;
        let Some(best) = found.nearest.first() else {
            return nothing;
        };
        // A meaning that fixes what the sentence says outright ("dim the
        // kitchen lights", to 30, when "like 40 percent" was said) yields to
        // the same meaning, as near, that reads it ("dim the hallway to 25
        // percent").
        let mut understood = found.understood.clone();
        let reads_it = found
            .nearest
            .iter()
            .skip(1)
            .take_while(|n| best.score - n.score < cfg.margin)
            .filter(|n| {
                n.intent == best.intent
                    && n.slots.len() < best.slots.len()
                    && n.slots.iter().all(|(k, v)| best.slots.get(k) == Some(v))
            })
            .find_map(|n| {
                let u = semantic.reading(n, text, &self.home, context)?;
                best.slots
                    .keys()
                    .filter(|k| !n.slots.contains_key(*k))
                    .all(|k| u.slots.get(k).is_some_and(|s| !s.said.is_empty()))
                    .then_some((n, u))
            });
        let best = match reads_it {
            Some((n, u)) => {
                understood = Some(u);
                n
            }
            None => best,
        };
        // And a meaning that only fixes what the sentence says outright is
        // no rival of one that reads it.
        let said = |k: &String| {
            understood
                .as_ref()
                .and_then(|u| u.slots.get(k))
                .is_some_and(|s| !s.said.is_empty())
        };
        let other = found.nearest.iter().find(|n| {
            let fixes_what_is_said = n.intent == best.intent
                && best.slots.iter().all(|(k, v)| n.slots.get(k) == Some(v))
                && n.slots.iter().all(|(k, v)| {
                    best.slots.get(k) == Some(v) || (!best.slots.contains_key(k) && said(k))
                });
            (n.intent != best.intent || n.slots != best.slots) && !fixes_what_is_said
        });
        let apart = other.is_none_or(|o| best.score - o.score >= cfg.margin);
        let decided = understood
            .as_ref()
            .filter(|_| best.score >= cfg.threshold && apart)
            .and_then(|u| {
                let raise_to = (best.score < cfg.sure).then_some(AuthLevel::CONFIRM);
                let mut d = self.intent_command(
                    u,
                    Layer::Semantic,
                    raise_to,
                    Some(("nearest", found.nearest_json(3))),
                )?;
                d.confidence = best.score;
                Some(d)
            })
            .filter(|d| self.speaks_of_its_kind(text, d))
            .filter(|d| !self.asks_whether(text) || !self.changes_something(d));
        let sure = decided.as_ref().is_some_and(|_| best.score >= cfg.sure);
        let m = &self.model_choice;
        let choices = if m.enabled && !sure && best.score >= m.floor {
            self.choices(semantic, &found, text, context)
        } else {
            Vec::new()
        };
        let near = Some(self.near_commands(&found.nearest));
        Meaning {
            decided,
            choices,
            near,
        }
    }

    /// The commands of the requests at least the model layer's `floor`
    /// near and not clearly (by the margin) further than the nearest talk,
    /// nearest first, at most `candidates` of them: each intent's commands
    /// whose `when` the meaning's slots do not contradict.
    fn near_commands(&self, nearest: &[crate::understand::semantic::Near]) -> Vec<String> {
        let m = &self.model_choice;
        // Talk clearly nearer than a request says what this is.
        let margin = self.semantic.as_ref().map_or(0.0, |s| s.config.margin);
        let talk = nearest
            .iter()
            .find(|n| n.intent == "-")
            .map_or(0.0, |n| n.score);
        let mut near: Vec<String> = Vec::new();
        for n in nearest
            .iter()
            .filter(|n| n.intent != "-" && n.score >= m.floor && n.score + margin >= talk)
        {
            for command in self.commands_of(n) {
                if !near.contains(&command) {
                    near.push(command);
                }
            }
            if near.len() >= m.candidates {
                break;
            }
        }
        near
    }

    /// The commands a meaning maps to: its intent's, whose `when` its slots
    /// do not contradict.
    fn commands_of<'a>(
        &'a self,
        n: &'a crate::understand::semantic::Near,
    ) -> impl Iterator<Item = String> + 'a {
        self.intent_maps
            .iter()
            .filter(|map| {
                map.intent == n.intent
                    && map
                        .when
                        .iter()
                        .all(|(k, v)| v == "*" || n.slots.get(k).is_none_or(|s| s == v))
            })
            .map(|map| map.command.clone())
    }

    /// The nearest meanings as choices for a model: each request at least
    /// the floor near, as the command it would run (its summary), in the
    /// order of their words, then one way out ("none of these") with the
    /// nearest talk example. No request near enough: no choices.
    fn choices(
        &self,
        semantic: &crate::understand::Semantic,
        found: &crate::understand::semantic::Found,
        text: &str,
        context: &Context,
    ) -> Vec<Choice> {
        let mut choices: Vec<Choice> = Vec::new();
        let mut talk: Option<Choice> = None;
        for (rank, near) in found.nearest.iter().enumerate() {
            if talk.is_some() && choices.len() >= self.model_choice.candidates {
                break;
            }
            if near.intent == "-" {
                talk.get_or_insert(Choice {
                    label: NONE_OF_THESE.into(),
                    example: near.example.clone(),
                    similarity: near.score,
                    rank,
                    understood: None,
                });
                continue;
            }
            // A request below the floor is no candidate, however it ranks.
            if choices.len() >= self.model_choice.candidates || near.score < self.model_choice.floor
            {
                continue;
            }
            let Some(u) = semantic.reading(near, text, &self.home, context) else {
                continue;
            };
            let Some(d) = self.intent_command(&u, Layer::Model, None, None) else {
                continue;
            };
            let label = match &d.intent {
                Intent::Chain(chain) => chain.summary.clone(),
                _ => continue,
            };
            if choices.iter().any(|c| c.label == label) {
                continue;
            }
            choices.push(Choice {
                label,
                example: near.example.clone(),
                similarity: near.score,
                rank,
                understood: Some(u),
            });
        }
        if choices.is_empty() {
            return choices;
        }
        choices.sort_by(|a, b| a.label.cmp(&b.label));
        choices.push(talk.unwrap_or_else(|| Choice {
            label: NONE_OF_THESE.into(),
            example: String::new(),
            similarity: 0.0,
            rank: found.nearest.len(),
            understood: None,
        }));
        choices
    }

    /// A spoken request run at level 1 or 2 whose words say one side of an
    /// opposite pair ("pause the timer", "lights off") is asked about
    /// first when the same words with the other side fit the audio about
    /// as well (within `doubt_margin` of whisper's log-likelihood): a
    /// mishearing there would run the opposite of what was said. The
    /// words are the reading the sound layer took, else what was heard.
    pub fn doubted(&self, mut d: RouteDecision, heard: &str, context: &Context) -> RouteDecision {
        let Some(sounds) = self.sounds.as_ref() else {
            return d;
        };
        let margin = sounds.config.doubt_margin;
        let Some(listen) = context.listen.as_ref().filter(|_| margin > 0.0) else {
            return d;
        };
        let Intent::Chain(chain) = &d.intent else {
            return d;
        };
        if chain.chain_level >= AuthLevel::CONFIRM {
            return d;
        }
        let said = d
            .understood
            .as_ref()
            .and_then(|u| u.get("read_as"))
            .and_then(Value::as_str)
            .map(normalize)
            .unwrap_or_else(|| heard.to_owned());
        let others = opposite_readings(&self.opposites, &said);
        if others.is_empty() {
            return d;
        }
        let mut texts = vec![said.clone()];
        texts.extend(others.iter().cloned());
        let Some(scores) = listen.score(&texts) else {
            return d;
        };
        let (best, fit) = scores[1..]
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, s)| (i, f64::from(scores[0] - s)))
            .unwrap_or((0, f64::INFINITY));
        if fit > margin {
            return d;
        }
        if let Intent::Chain(chain) = &mut d.intent {
            chain.chain_level = AuthLevel::CONFIRM;
        }
        d.auth_level = AuthLevel::CONFIRM;
        let doubt = json!({"other": others[best], "fits_better_by": (fit * 100.0).round() / 100.0,
                           "margin": margin});
        match &mut d.understood {
            Some(Value::Object(u)) => {
                u.insert("doubt".into(), doubt);
            }
            other => *other = Some(json!({"layer": d.layer, "doubt": doubt})),
        }
        d
    }

    /// The decision after a model chose among `d.choices` (`pick`: the
    /// index chosen; none when the model gave no usable answer, which keeps
    /// `d`). The meaning layer's own nearest, chosen by the model too and
    /// near enough to count, runs at its configured level: two layers
    /// agree. Any other request chosen is asked about first (level 3).
    /// "None of these" is no request: the state's unmatched route.
    pub fn chosen(&self, d: RouteDecision, pick: Option<usize>, state: &str) -> RouteDecision {
        let Some(choice) = pick.and_then(|i| d.choices.get(i)) else {
            return d;
        };
        let threshold = self
            .semantic
            .as_ref()
            .map_or(f64::INFINITY, |s| s.config.threshold);
        let options: Vec<Value> = d
            .choices
            .iter()
            .map(|c| {
                json!({"label": c.label, "example": c.example, "rank": c.rank,
                            "similarity": (c.similarity * 1000.0).round() / 1000.0})
            })
            .collect();
        let evidence = json!({"picked": pick, "options": options});
        let Some(u) = &choice.understood else {
            let mut none = self.unmatched(state);
            none.layer = Layer::Model;
            none.understood = Some(json!({"layer": "model", "intent": "-", "choice": evidence}));
            none.confidence = choice.similarity;
            return none;
        };
        let agreed = choice.rank == 0 && choice.similarity >= threshold;
        let raise_to = (!agreed).then_some(AuthLevel::CONFIRM);
        match self.intent_command(u, Layer::Model, raise_to, Some(("choice", evidence))) {
            Some(mut decided) => {
                decided.confidence = choice.similarity;
                decided
            }
            None => d,
        }
    }

    /// Whether the sentence says "not", "never", "no" or a configured
    /// negation anywhere, other than in a saying that asks ("never mind the
    /// timer") or says who is there ("no one's in the guest room").
    fn says_not(&self, text: &str) -> bool {
        // Words before a comma are words ("no, leave it").
        let mut padded = padded_words(text);
        for idiom in &self.negation_idioms {
            padded = padded.replace(&format!(" {idiom} "), " ");
        }
        for nobody in [" no one ", " no one's ", " no-one ", " no-one's "] {
            padded = padded.replace(nobody, " nobody ");
        }
        ["not", "never", "no"]
            .into_iter()
            .chain(self.negations.iter().map(String::as_str))
            .any(|n| padded.contains(&format!(" {n} ")))
    }

    /// Whether the sentence tells of the past (a narrative word) and asks
    /// for nothing (no request verb): "my timer at work went off three
    /// times today" is a story, not a wish to cancel the timers.
    fn tells_a_story(&self, text: &str) -> bool {
        // "I forgot to buy milk yesterday, typical": a word before a comma counts.
        let padded = padded_words(text);
        let has = |w: &String| padded.contains(&format!(" {w} "));
        self.narrative_words.iter().any(has) && !self.request_verbs.iter().any(has)
    }

    /// Whether a decision runs a command that changes something (a
    /// question may ask for a report, "is my timer almost done", never for a
    /// change: "did you turn off the porch light").
    fn changes_something(&self, d: &RouteDecision) -> bool {
        match &d.intent {
            Intent::Chain(chain) => chain.commands.iter().any(|c| self.changes(c)),
            _ => false,
        }
    }

    /// Whether running a command changes something (its `side_effects`).
    fn changes(&self, c: &crate::auth::Command) -> bool {
        self.commands
            .get(&c.command_id)
            .is_none_or(|spec| spec.config.side_effects)
    }

    /// Whether the sentence opens with words that ask whether something is
    /// or was so: "did I lock the back door", "is the garage door open" (but
    /// not "is it possible to…", a request asked politely).
    pub fn asks_whether(&self, text: &str) -> bool {
        let padded = format!("{text} ");
        self.question_words
            .iter()
            .any(|q| padded.starts_with(&format!("{q} ")))
    }

    /// A request said among other words ("unlock the side door for the
    /// plumber", "switch off the dining room, we're done eating"): the
    /// longest run of the sentence's words that a template matches whole,
    /// with no wildcard taking any of it, and at least half the sentence (a
    /// few words inside a story are no request: "leave the porch light as
    /// it is"). Never in a sentence that says "not": the run could leave it
    /// out; nor in a question of whether it is or was so ("did I lock the
    /// back door" asks about locking it).
    /// `text` with a prefix typed apart from its word joined to it ("un
    /// lock the front door": "unlock …"), when the prefix is no word the
    /// sentences know and the two together are; `None` when nothing joins.
    /// The vocabulary is consulted only when a prefix stands alone.
    pub(super) fn joined_prefix(&self, text: &str) -> Option<String> {
        let words: Vec<&str> = text.split(' ').collect();
        let alone = |w: &str| self.joined_prefixes.iter().any(|p| p == w);
        if !words[..words.len().saturating_sub(1)]
            .iter()
            .any(|w| alone(w))
        {
            return None;
        }
        let vocabulary = self.vocabulary.get_or_init(|| vocabulary_of(self));
        let mut out: Vec<String> = Vec::with_capacity(words.len());
        let mut joined = false;
        let mut rest = words.iter().peekable();
        while let Some(w) = rest.next() {
            if alone(w)
                && !vocabulary.contains_key(*w)
                && let Some(next) = rest.peek()
            {
                let whole = format!("{w}{next}");
                if vocabulary.contains_key(&whole) {
                    out.push(whole);
                    rest.next();
                    joined = true;
                    continue;
                }
            }
            out.push((*w).to_owned());
        }
        joined.then(|| out.join(" "))
    }

    pub(super) fn by_span(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        if self.says_not(text) || self.asks_whether(text) {
            return None;
        }
        let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
        let n = words.len();
        // Half the sentence is the request: a request is a few words, so a
        // longer sentence is no request in a story (and its runs, about n²/8
        // of them, would each be matched against every template).
        if !(3..=SPAN_WORDS).contains(&n) {
            return None;
        }
        for len in (n.div_ceil(2).max(2)..n).rev() {
            if context.out_of_time() {
                return None;
            }
            for start in 0..=n - len {
                // A run right after an article is not a clause of its own:
                // "the activate the lights" is a mishearing of "deactivate".
                if start > 0 && ["the", "a", "an", "my", "our", "your"].contains(&words[start - 1])
                {
                    continue;
                }
                let span = words[start..start + len].join(" ");
                let Some(mut d) = self
                    .by_templates(&span, context)
                    .filter(|d| d.confidence >= 1.0 && matches!(d.intent, Intent::Chain(_)))
                    .filter(|d| asks_something(&span, d))
                else {
                    continue;
                };
                let covered = len as f64 / n as f64;
                d.layer = Layer::Span;
                d.confidence = covered;
                if let Some(Value::Object(u)) = &mut d.understood {
                    u.insert("layer".into(), json!("span"));
                    let span = span.trim_matches(|c: char| !c.is_alphanumeric());
                    u.insert("span".into(), json!(span));
                    u.insert("covered".into(), json!((covered * 1000.0).round() / 1000.0));
                }
                return Some(d);
            }
        }
        None
    }

    /// A longer sentence in clauses, at `,` `;` `?` `!` `.` ("tea's brewing,
    /// remind me in four minutes"): the clauses a template understands whole
    /// are the request (several, one chain), the others what was said around
    /// it. A clause may point back at what an earlier one named: "it" or
    /// "them" at a device of the home or at what "we need" or "we're out of"
    /// named, "there" at a room ("is the front door locked? lock it" is "lock
    /// the front door"). Never in a sentence that says "not", nor in a story.
    pub(super) fn by_clause(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let clauses = clauses(text);
        if !(2..=MAX_CLAUSES).contains(&clauses.len())
            || self.says_not(text)
            || self.tells_a_story(text)
        {
            return None;
        }
        // Each command with the part (clause understood) it came from.
        let mut commands: Vec<(usize, crate::auth::Command)> = Vec::new();
        let mut parts = Vec::new();
        let mut last = None;
        // Whether a clause understood took a level its sentence fixes
        // ("dim the bedroom a bit" is 30%), and another said a number.
        let (mut level_fixed, mut number_aside) = (false, false);
        for (i, clause) in clauses.iter().enumerate() {
            if context.out_of_time() {
                return None;
            }
            // A clause longer than a sentence is read (see MAX_WORDS) is no request.
            if clause.split_whitespace().nth(MAX_WORDS).is_some() {
                continue;
            }
            let (mut said, mut referent) = match self.resolve_reference(clause, &clauses[..i]) {
                Some((resolved, referent)) => (resolved, Some(referent)),
                None => (clause.to_string(), None),
            };
            let Some(mut d) = self
                .command_of(&said, context)
                .filter(|d| d.confidence >= SURE_CLAUSE)
            else {
                number_aside |= self.says_a_number(clause);
                continue;
            };
            level_fixed |= fixes_a_level(&d);
            // "The kitchen is dark, turn on the lights": the room asked for is the one said before.
            if d.route_code == "intent.clarify"
                && let Some(area) = clauses[..i].iter().rev().find_map(|c| self.area_in(c))
                && let Some(placed) = self
                    .command_of(&format!("{said} in the {area}"), context)
                    .filter(|d| matches!(d.intent, Intent::Chain(_)))
            {
                said = format!("{said} in the {area}");
                referent = Some(format!("in the {area}"));
                d = placed;
            }
            match &d.intent {
                Intent::Chain(chain) => {
                    // Said twice ("it's dark in here, lights on in here"): done once.
                    for c in &chain.commands {
                        if !commands
                            .iter()
                            .any(|(_, k)| k.command_id == c.command_id && k.params == c.params)
                        {
                            commands.push((parts.len(), c.clone()));
                        }
                    }
                }
                // A clause whose parameters were refused, or that is ambiguous, answers for all.
                _ => return Some(clause_decision(d, clause, &said, referent)),
            }
            parts.push(json!({"clause": clause, "said": said, "referent": referent,
                              "layer": d.layer, "source_rule": d.source_rule, "understood": d.understood}));
            last = Some((d, clause.to_string(), said, referent));
        }
        // "Is the front door locked? Lock it": the question says what the
        // request is about, and doing it answers it.
        let targets = |c: &crate::auth::Command| -> Vec<String> {
            c.params
                .iter()
                .filter(|(k, _)| matches!(k.as_str(), "device" | "door" | "room"))
                .map(|(_, v)| v.to_string())
                .collect()
        };
        let acted_on: Vec<String> = commands
            .iter()
            .filter(|(_, c)| self.changes(c))
            .flat_map(|(_, c)| targets(c))
            .collect();
        let asked = |c: &crate::auth::Command| {
            !self.changes(c) && targets(c).iter().any(|t| acted_on.contains(t))
        };
        let answered: Vec<usize> = (0..parts.len())
            .filter(|p| {
                let of_part = || commands.iter().filter(|(at, _)| at == p);
                of_part().count() > 0 && of_part().all(|(_, c)| asked(c))
            })
            .collect();
        commands.retain(|(_, c)| !asked(c));
        let last_answered = answered.contains(&parts.len().saturating_sub(1));
        let parts: Vec<Value> = parts
            .into_iter()
            .enumerate()
            .filter(|(p, _)| !answered.contains(p))
            .map(|(_, part)| part)
            .collect();
        // "Make the bedroom a bit dimmer, like forty percent": the level is
        // the one said aside, which the meaning layer reads from the whole.
        if level_fixed && number_aside {
            return None;
        }
        let (d, clause, said, referent) = last?;
        if parts.len() == 1 && !last_answered {
            return Some(clause_decision(d, &clause, &said, referent));
        }
        let commands = commands.into_iter().map(|(_, c)| c).collect();
        Some(several_parts(commands, Layer::Clause, parts))
    }

    /// Whether `text` says a number, in digits or words.
    fn says_a_number(&self, text: &str) -> bool {
        !crate::understand::numbers::numbers_in(self.library.lang, text).is_empty()
    }

    /// The words of `text` that point back at a place and at a thing, if any.
    fn referring_words(&self, text: &str) -> (Option<&String>, Option<&String>) {
        let padded = format!(" {text} ");
        let said = |w: &&String| padded.contains(&format!(" {w} "));
        (
            self.refer_to_place.iter().find(said),
            self.refer_to_thing.iter().find(said),
        )
    }

    /// Whether `text` says a word that points back ("it", "them", "there"):
    /// only then is what the conversation asked before worth reading.
    pub fn points_back(&self, text: &str) -> bool {
        let (place, thing) = self.referring_words(text);
        place.is_some() || thing.is_some()
    }

    /// A request that points back at what the conversation asked for just
    /// before ("turn on the kitchen lights" … "turn them off", "lock the
    /// back door" … "is it locked?"): the sentence with the words put back,
    /// when so it is a request. The decision says what it pointed at.
    pub(super) fn by_earlier(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        if context.earlier.is_empty() {
            return None;
        }
        // "We need bread, add it to the list": the sentence names it itself.
        let own = clauses(text);
        if (1..own.len()).any(|i| self.resolve_reference(own[i], &own[..i]).is_some()) {
            return None;
        }
        // "Make it a bit cooler": a template that says the word itself (no
        // slot of it took it) reads the sentence whole; "it" points nowhere.
        let (place, thing) = self.referring_words(text);
        let word = format!(" {} ", place.or(thing)?);
        if let Some(d) = self.by_templates(text, context)
            && d.confidence >= 1.0
        {
            let slots = d.understood.as_ref().and_then(|u| u.get("slots"));
            let took_it = slots.and_then(Value::as_object).is_some_and(|slots| {
                slots.values().any(|s| {
                    let said = s.get("said").and_then(Value::as_str).unwrap_or("");
                    format!(" {said} ").contains(&word)
                })
            });
            if !took_it {
                return None;
            }
        }
        let earlier: Vec<&str> = context.earlier.iter().map(String::as_str).collect();
        let (said, referent) = self.resolve_reference(text, &earlier)?;
        let here = Context {
            area: context.area.clone(),
            spoken: context.spoken,
            earlier: Vec::new(),
            asked: None,
            listen: context.listen.clone(),
            deadline: context.deadline,
        };
        let d = self.route_in(&said, state, &here);
        answered_with(d, "earlier", json!({"said": said, "referent": referent}))
    }

    /// A request said after words that ask it be kept in mind ("don't
    /// forget we need milk", "remember to lock the back door"): the request
    /// after them. After a lead that ends in "to", what is no request of its
    /// own is something to be reminded of ("don't forget to call mom at 5"
    /// is "remind me to call mom at 5"). The decision says the lead.
    pub(super) fn by_remembering(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let said = normalize(text);
        let (lead, rest) = self.remember_leads.iter().find_map(|lead| {
            let rest = said.strip_prefix(lead.as_str())?.strip_prefix(' ')?;
            Some((lead, rest.trim()))
        })?;
        if rest.is_empty() {
            return None;
        }
        let mut d = self.route_in(rest, state, context);
        let mut asked = rest.to_owned();
        if !matches!(d.intent, Intent::Chain(_))
            && lead.ends_with(" to")
            && self.remind_with.contains("{what}")
        {
            asked = self.remind_with.replace("{what}", rest);
            d = self.route_in(&asked, state, context);
        }
        answered_with(d, "remembered", json!({"lead": lead, "said": asked}))
    }

    /// `clause` with a word that points back ("it", "there") replaced by
    /// what the nearest earlier clause named, and that referent; `None` when
    /// it points at nothing, or nothing earlier names one.
    fn resolve_reference(&self, clause: &str, earlier: &[&str]) -> Option<(String, String)> {
        let padded = format!(" {clause} ");
        let (place, thing) = self.referring_words(clause);
        let (word, referent) = if let Some(word) = place {
            let area = earlier.iter().rev().find_map(|c| self.area_in(c))?;
            (word, format!("in the {area}"))
        } else {
            let word = thing?;
            let named = earlier.iter().rev().find_map(|c| {
                self.device_in(c)
                    .or_else(|| self.lights_in(c))
                    .or_else(|| self.item_in(c))
                    .or_else(|| self.item_asked_in(c))
            })?;
            (word, named)
        };
        let resolved = padded
            .replacen(&format!(" {word} "), &format!(" {referent} "), 1)
            .trim()
            .to_owned();
        Some((resolved, referent))
    }

    /// A word no sentence, name or example knows, read as the one word it is
    /// nearest in spelling ("reminds me" as "remind me", "thermos tap" as
    /// "thermostat", a typed "kitchn"): whisper mishears, people mistype.
    /// Only when the sentence so read is understood whole, and only words of
    /// four letters or more, within one edit (two from eight letters), the
    /// nearest unique; words in two joined when together they are one.
    /// A question of whether ("is everything off in the office") is never
    /// read as the change it asks about (its "is" heard as a filler).
    pub(super) fn heard_as(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let asks = self.asks_whether(text);
        self.read_as_heard(text, |read| {
            self.understood(read, context)
                .or_else(|| self.by_clause(read, context))
                .filter(|d| !asks || !self.changes_something(d))
        })
    }

    /// A request the meaning layer found but whose door, device or room it
    /// could not tell ("make sure the mac door is locked": which door?),
    /// read as whisper may have misheard it, and understood by meaning
    /// then: "mac" is "back", the one door that fits.
    pub(super) fn heard_as_meant(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        let asks = self.asks_whether(text);
        self.read_as_heard(text, |read| {
            self.by_meaning(read, context)
                .decided
                .filter(|d| !asks || !self.changes_something(d))
        })
    }

    /// The first reading of `text` as speech to text may have misheard it
    /// that `understand` takes as a request sure enough to run.
    fn read_as_heard(
        &self,
        text: &str,
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
        readings.extend(self.names_heard(&heard));
        readings.extend(self.sounds_heard(&heard));
        let bare = &heard.bare;
        readings.into_iter().take(MAX_READINGS).find_map(|edits| {
            let mut out: Vec<&str> = Vec::with_capacity(words.len());
            let mut changed = Vec::new();
            let mut i = 0;
            while i < words.len() {
                if let Some((_, n, read)) = edits.iter().find(|(at, _, _)| *at == i) {
                    changed.push(json!({"heard": bare[i..i + n].join(" "), "read": read}));
                    if !read.is_empty() {
                        out.push(read);
                    }
                    i += n;
                } else {
                    out.push(words[i]);
                    i += 1;
                }
            }
            let read = out.join(" ");
            let d = understand(&read).filter(sure_request)?;
            Some(decided_by(
                d,
                Layer::HeardAs,
                [("read_as", json!(read)), ("words", json!(changed))],
            ))
        })
    }

    /// A name of the home heard as other words ("mad room": bedroom,
    /// "best lamp": desk lamp), one or two words within two edits of a
    /// name of six letters or more, spelled or sounded.
    fn names_heard(&self, heard: &Heard) -> Vec<Reading> {
        let bare = &heard.bare;
        let names: Vec<String> = self
            .home
            .areas
            .iter()
            .flat_map(|a| std::iter::once(&a.name).chain(&a.aliases))
            .chain(
                self.home
                    .devices
                    .iter()
                    .flat_map(|d| std::iter::once(&d.name).chain(&d.aliases)),
            )
            .map(|n| normalize(n))
            .collect();
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
            for letter in &self.carried_letters {
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
            for pair in &self.sound_pairs {
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
            && self.heard_fillers.contains(&bare[0])
            && !one_heard_as_two(&format!("{}{}", bare[0], bare[1]))
        {
            readings.push(vec![(0, 1, String::new())]);
        }
        readings
    }

    /// What speech to text heard, read as the sentence of the library it
    /// sounds nearest ("Set the bedroom lamp, write us to 50%": brightness;
    /// "Activate the lights in our phone": home), when that sentence is
    /// within `understand.sounds.threshold` and the templates understand it
    /// as a request. Further than `sure`, it asks first; a wildcard may take
    /// heard words only within `sure` (`by_name`: none at all, and within
    /// `sure`). Never a heard word read as its opposite ("turn on" as "turn
    /// out"); only for speech, never for a sentence that says "not" or
    /// tells a story. The trace's `understood` keeps what was heard, what it
    /// was read as, the sentence it sounds like, and how near.
    pub(super) fn by_sound(
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
                || crate::understand::semantic::opposed(&self.opposites, &prepared, &near.reading)
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
        // Near, but a side ("on", "out", "lock") no heard sound went to
        // is a guess: asked about, never run on it; so is one further
        // than `sure`, however well it fits the audio. A question is
        // answered: the answer says what was understood, and changes nothing.
        let guessed = near
            .unheard
            .iter()
            .any(|w| self.opposites.iter().any(|pair| pair.contains(w)));
        if (distance > sure || guessed)
            && self.changes_something(&d)
            && let Intent::Chain(chain) = &mut d.intent
            && chain.chain_level < AuthLevel::CONFIRM
        {
            chain.chain_level = AuthLevel::CONFIRM;
            d.auth_level = AuthLevel::CONFIRM;
        }
        d.confidence = (1.0 - distance).clamp(0.0, 1.0);
        let mut fields = vec![
            ("heard", json!(text)),
            ("read_as", json!(near.reading)),
            ("distance", json!((distance * 1000.0).round() / 1000.0)),
            ("sounds_like", json!(near.template)),
        ];
        if let Some(fit) = fit {
            fields.push((
                "fits_audio",
                json!((f64::from(fit) * 100.0).round() / 100.0),
            ));
        }
        Some(decided_by(d, Layer::Sounds, fields))
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
        lexicon: crate::understand::lexicon::Lexicon,
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

    /// The room a clause names (the longest name or alias said), as named in the home.
    fn area_in(&self, clause: &str) -> Option<String> {
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
    fn device_in(&self, clause: &str) -> Option<String> {
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
    fn item_asked_in(&self, clause: &str) -> Option<String> {
        let d = self.command_of(clause, &Context::default())?;
        let Intent::Chain(chain) = &d.intent else {
            return None;
        };
        match chain.commands.as_slice() {
            [one] => one.params.get("item").map(ToString::to_string),
            _ => None,
        }
    }

    /// The lights a clause speaks of, as `refer_to_lights` says them: a
    /// room's ("the kitchen lights"), else all of them.
    fn lights_in(&self, clause: &str) -> Option<String> {
        let padded = format!(" {} ", normalize(clause));
        if !self
            .light_words
            .iter()
            .any(|w| padded.contains(&format!(" {w} ")))
        {
            return None;
        }
        match (self.area_in(clause), self.refer_to_lights.as_slice()) {
            (Some(area), [with_room, ..]) => Some(with_room.replace("{area}", &area)),
            (None, [_, all, ..]) => Some(all.clone()),
            _ => None,
        }
    }

    /// What a clause says is wanted ("we need bread": bread): the words
    /// after one of `item_leads` to the clause's end, at most four.
    fn item_in(&self, clause: &str) -> Option<String> {
        let padded = format!(" {} ", normalize(clause));
        let rest = self.item_leads.iter().find_map(|lead| {
            padded
                .find(&format!(" {lead} "))
                .map(|at| &padded[at + lead.len() + 2..])
        })?;
        let words: Vec<&str> = rest
            .split(' ')
            .filter(|w| !w.is_empty())
            .skip_while(|w| ["some", "more", "a", "an", "the", "of"].contains(w))
            .collect();
        (!words.is_empty() && words.len() <= 4).then(|| words.join(" "))
    }

    /// The device of the home, of any kind, that words name by its id, name
    /// or an alias: "prop the front door open" is about the front door (a
    /// lock), never "a device I don't know".
    fn device_named(&self, said: &str) -> Option<&crate::understand::home::Device> {
        let said = normalize(said);
        let said = said.strip_prefix("the ").unwrap_or(&said);
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
        let kind = kind_word(&device.domain);
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
        let is = if normalize(&device.name) == kind {
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

    /// A request found below the templates in a sentence that makes it wait
    /// on something ("if it gets dark, turn on the porch light", "turn off
    /// the lights when the timer rings") is not run now: the reply says so,
    /// and `understood` keeps what was found. A question ("when is the timer
    /// done") is no condition.
    pub(super) fn unless_conditional(&self, text: &str, d: RouteDecision) -> RouteDecision {
        if !matches!(d.intent, Intent::Chain(_)) || !self.says_condition(text) {
            return d;
        }
        let mut understood = d.understood.clone().unwrap_or_else(|| json!({}));
        if let Some(obj) = understood.as_object_mut() {
            obj.insert("conditional".into(), json!(true));
            obj.insert("would_run".into(), json!(d.command_id));
        }
        let mut out = RouteDecision::simple(
            "intent.conditional",
            d.source_rule.clone(),
            Intent::Reply(self.conditional_reply.clone()),
        );
        out.layer = d.layer;
        out.understood = Some(understood);
        out.confidence = d.confidence;
        out
    }

    /// An answer to "Which room?": what was asked for just before
    /// (`context.asked`) said again in the room now named ("turn off
    /// the lights" … "the kitchen" is "turn off the lights in the
    /// kitchen"), or everywhere ("all of them"). The room is tried where
    /// each request of it ends ("turn off the lights in the kitchen and
    /// lock the front door"); the first a layer understands is taken.
    pub(super) fn answers_which(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        // Routed as said, the question answered.
        let here = Context {
            asked: None,
            ..context.clone()
        };
        let asked = match context.asked.as_ref()? {
            crate::understand::Asked::Room(asked) => asked.as_str(),
            crate::understand::Asked::Choice(options) => {
                return self.picked(text, options, state, &here);
            }
        };
        let place = self.room_answer(text)?;
        let padded = format!(" {asked} ");
        let mut ends: Vec<usize> = self
            .split_words
            .iter()
            .flat_map(|w| {
                let needle = format!(" {w} ");
                padded
                    .match_indices(&needle)
                    .map(|(at, _)| at)
                    .collect::<Vec<_>>()
            })
            .collect();
        ends.push(padded.len() - 1);
        ends.sort_unstable();
        ends.dedup();
        ends.into_iter().find_map(|end| {
            let said = format!("{} {place}{}", &padded[..end], &padded[end..]);
            let said = said.trim();
            let d = self.route_in(said, state, &here);
            matches!(d.intent, Intent::Chain(_)).then(|| {
                decided_by(
                    d,
                    Layer::Answer,
                    [("asked", json!(asked)), ("said", json!(said))],
                )
            })
        })
    }

    /// The one of `options` ("turn on the bedroom lamp", "turn on the desk
    /// lamp") an answer picks: by the words it says that only that one
    /// has ("the bedroom one", "desk"), or by its place ("the second one",
    /// "the last"). `here`: the context with the question answered.
    fn picked(
        &self,
        text: &str,
        options: &[String],
        state: &str,
        here: &Context,
    ) -> Option<RouteDecision> {
        const ORDINALS: &[&str] = &["first", "second", "third", "fourth", "fifth"];
        const FILLERS: &[&str] = &[
            "the", "one", "please", "a", "that", "this", "i", "mean", "meant", "yes", "in",
        ];
        let said = normalize(text);
        let words: Vec<&str> = said
            .split(' ')
            .filter(|w| !w.is_empty() && !FILLERS.contains(w))
            .collect();
        let at = |w: &str| {
            ORDINALS
                .iter()
                .position(|o| *o == w)
                .or_else(|| (w == "last").then(|| options.len() - 1))
        };
        let pick = match words.as_slice() {
            [] => return None,
            [w] if at(w).is_some() => options.get(at(w)?)?,
            _ => {
                let has = |o: &String| {
                    let own = format!(" {o} ");
                    words.iter().all(|w| own.contains(&format!(" {w} ")))
                };
                let mut fit = options.iter().filter(|o| has(o));
                let one = fit.next()?;
                if fit.next().is_some() {
                    return None;
                }
                one
            }
        };
        let d = self.route_in(pick, state, here);
        matches!(d.intent, Intent::Chain(_)).then(|| {
            decided_by(
                d,
                Layer::Answer,
                [("options", json!(options)), ("said", json!(pick))],
            )
        })
    }

    /// Whether `text` is short enough to answer a question asked back
    /// (a room, "all of them", "the desk lamp", "the second one").
    pub fn could_answer(&self, text: &str) -> bool {
        (1..=5).contains(&normalize(text).split(' ').filter(|w| !w.is_empty()).count())
    }

    /// What a room said alone places a request in: "in the kitchen" for
    /// "the kitchen", "kitchen please" or "in the lounge" (as the room is
    /// named), "everywhere" for "all of them"; none for anything more.
    fn room_answer(&self, text: &str) -> Option<String> {
        const ALL: &[&str] = &[
            "all",
            "all of them",
            "everywhere",
            "every room",
            "all rooms",
            "all the rooms",
            "the whole house",
            "whole house",
            "the whole place",
            "all over",
            "everything",
        ];
        let mut said = normalize(text);
        for tail in [" please", " then", " lights", " light"] {
            if let Some(rest) = said.strip_suffix(tail) {
                said = rest.to_owned();
            }
        }
        for lead in ["in ", "the ", "my ", "our "] {
            if let Some(rest) = said.strip_prefix(lead) {
                said = rest.to_owned();
            }
        }
        if ALL.contains(&said.as_str()) || ALL.contains(&format!("the {said}").as_str()) {
            return Some("everywhere".into());
        }
        self.home
            .areas
            .iter()
            .find(|a| a.name == said || a.aliases.contains(&said))
            .map(|a| format!("in the {}", a.name))
    }

    /// A question asked indirectly: "can you check if the garage is
    /// open", "I wonder whether I left the porch light on" (after one of
    /// `asking_words`, "if" or "whether" asks; it sets no condition). What
    /// follows is asked as a question ("is the garage open", "did I leave
    /// the porch light on") and taken only as one, changing nothing; "… if
    /// you could turn on the lights" asks for it.
    pub(super) fn asked_indirectly(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let padded = padded_words(text);
        let (at, joiner) = [" if ", " whether "]
            .into_iter()
            .find_map(|j| padded.find(j).map(|at| (at, j)))?;
        let before = &padded[..at];
        if !self
            .asking_words
            .iter()
            .any(|w| before.ends_with(&format!(" {w}")))
        {
            return None;
        }
        let clause = padded[at + joiner.len()..].trim();
        // "Check if the garage is open and close it": more than a question.
        let padded_clause = format!(" {clause} ");
        if self
            .split_words
            .iter()
            .any(|w| padded_clause.contains(&format!(" {w} ")))
        {
            return None;
        }
        let (asked, polite) = as_questions(clause);
        asked.into_iter().find_map(|q| {
            let d = self.route_in(&q, state, context);
            (matches!(d.intent, Intent::Chain(_)) && (polite || !self.changes_something(&d)))
                .then(|| decided_by(d, Layer::Indirect, [("asked", json!(q))]))
        })
    }

    fn says_condition(&self, text: &str) -> bool {
        let padded = padded_words(text);
        const ASKS: &[&str] = &[
            "is", "does", "do", "will", "was", "are", "did", "should", "can", "'s",
        ];
        self.conditions.iter().any(|c| {
            let mut from = 0;
            while let Some(at) = padded[from..].find(&format!(" {c} ")).map(|i| from + i) {
                let after = padded[at + c.len() + 2..].split(' ').next().unwrap_or("");
                // "when is the timer done", "until when": a question, not a condition.
                if !(ASKS.contains(&after) || after.is_empty()) {
                    return true;
                }
                from = at + 1;
            }
            false
        })
    }

    /// Whether a sentence could be about the kind of thing `d` acts on: not
    /// when it speaks only of another kind (`topic_words`, by the first part
    /// of a command's id): "the bedroom is cold, turn it up" is near "turn
    /// the bedroom lights up" in meaning, but speaks of heat, not light.
    fn speaks_of_its_kind(&self, text: &str, d: &RouteDecision) -> bool {
        let Some(kind) = d.command_id.as_deref().and_then(|c| c.split('.').next()) else {
            return true;
        };
        let Some(own) = self.topic_words.get(kind) else {
            return true;
        };
        let padded = padded_words(text);
        let said = |w: &String| padded.contains(&format!(" {w} "));
        if own.iter().any(said) {
            return true;
        }
        !self
            .topic_words
            .iter()
            .filter(|(k, _)| k.as_str() != kind)
            .any(|(_, words)| words.iter().filter(|w| !own.contains(w)).any(said))
    }

    /// Whether words said name one of the home's rooms ("the dining room").
    fn is_area(&self, said: &str) -> bool {
        let said = said.strip_prefix("the ").unwrap_or(said);
        self.home
            .areas
            .iter()
            .any(|a| a.name == said || a.aliases.iter().any(|x| x == said))
    }

    /// After nothing else matched: a request for a room or device the home
    /// does not have gets a reply naming what it has; nothing runs.
    pub(super) fn unknown_target(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        // "are the kitchen lights on" names no room "are": a question is not read so.
        if self.asks_whether(text) {
            return None;
        }
        let mut found = self.library.understand_open(text, &self.home, context);
        // A word of a name the home has ("counter" of "the counter lights")
        // is no room or thing it lacks.
        let spans = crate::understand::semantic::mentions(&self.home, text, None);
        let of_a_name = |said: &str| {
            let said = said.strip_prefix("the ").unwrap_or(said);
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
                && plausible_name(&area.said)
                && !of_a_name(&area.said)
            {
                let said = area.said.strip_prefix("the ").unwrap_or(&area.said);
                format!(
                    "There's no {said} here; the rooms are {}.",
                    self.home.area_names().join(", ")
                )
            } else if let Some(name) = u.slots.get("name")
                && plausible_name(&name.said)
                && !self.is_area(&name.said)
                && !of_a_name(&name.said)
            {
                let said = name.said.strip_prefix("the ").unwrap_or(&name.said);
                // The devices this request could be for: the kinds its intent runs commands on.
                let kinds: Vec<&str> = self
                    .intent_maps
                    .iter()
                    .filter(|m| m.intent == u.intent)
                    .filter_map(|m| m.when.get("domain").map(String::as_str))
                    .collect();
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
            d.understood = Some(
                json!({"layer": "home", "intent": u.intent, "template": u.template,
                                       "reply": reply}),
            );
            return Some(d);
        }
        None
    }
}

#[cfg(test)]
mod sound_tests {
    use super::*;

    fn vocabulary(words: &[&str]) -> Vocabulary {
        words
            .iter()
            .map(|w| ((*w).to_owned(), sound_spelling(w)))
            .collect()
    }

    #[test]
    fn the_letters_two_words_do_not_share_never_exceed_their_distance() {
        for (a, b) in [
            ("back", "mac"),
            ("kitchen", "kichen"),
            ("thermostat", "thermos"),
            ("lounge", "lunge"),
            ("abc", "cba"),
            ("", "door"),
        ] {
            assert!(
                bag_distance(a, b) <= strsim::levenshtein(a, b),
                "{a} / {b}: {} > {}",
                bag_distance(a, b),
                strsim::levenshtein(a, b)
            );
        }
        assert_eq!(bag_distance("abc", "cba"), 0);
        assert_eq!(bag_distance("door", "doors"), 1);
        assert_eq!(bag_distance("light", "night"), 1);
        assert_eq!(bag_distance("sister", "timer"), 2);
    }

    #[test]
    fn words_are_compared_as_they_sound() {
        assert_eq!(sound_spelling("back"), "bak");
        assert_eq!(sound_spelling("mac"), "mak");
        assert_eq!(sound_spelling("phone"), "fone");
        assert_eq!(sound_spelling("kitchen"), "kitchen");
        assert_eq!(sound_spelling("dimmer"), "dimer");
        assert_eq!(sound_spelling("cellar"), "selar");
        // "mac" is two edits from "back" in letters, one in sound.
        let v = vocabulary(&["back", "front", "side"]);
        assert_eq!(nearest_words(&v, "mac", 3), vec!["back"]);
        // Tied words are all given, in order; short known words never.
        let v = vocabulary(&["max", "map", "on", "back"]);
        assert_eq!(nearest_words(&v, "mak", 3), vec!["back", "map", "max"]);
        assert!(nearest_words(&v, "of", 3).is_empty());
    }

    #[test]
    fn a_short_rest_is_read_as_the_words_it_sounds_like_vowels_first() {
        let v = vocabulary(&["on", "up", "in", "out", "off"]);
        assert_eq!(sounds_near(&v, "un"), vec!["in", "on", "up"]);
        assert_eq!(sounds_near(&v, "outh"), vec!["out"]);
        assert!(sounds_near(&v, "xyzzy").is_empty());
    }
}
