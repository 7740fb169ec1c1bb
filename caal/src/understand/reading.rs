//! What the understanding layers read in a sentence, typed: which layer
//! decided, the intent and its slots, how sure, and how it was reached (a
//! clause, an answer, a reading of a mishearing, the nearest examples, a
//! model's choice, a doubt of hearing). The router carries a `Reading` on
//! each decision and reads it by field; the trace stores it as the
//! `understood` object of `route.selected` (the names below are the keys
//! stored; a field not set is left out).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Layer, Understood};

/// What a layer read. Built by the layer that decided, added to by what
/// came after (a split, a doubt of hearing, a condition).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Reading {
    pub layer: Layer,
    /// The intent, in Home Assistant's names (`HassTurnOn`) or CAAL's own;
    /// `-` when a model chose "none of these".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// The template that matched, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// `library` (Home Assistant's sentences) or `config` (CAAL's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// How much of the sentence the template's own words matched, 0–1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub slots: BTreeMap<String, ReadSlot>,
    /// What "it" or "there" in a request pointed back at, found in an
    /// earlier request of the conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub earlier: Option<Said>,
    /// A reminder said without its verb ("don't forget the milk").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remembered: Option<Remembered>,
    /// The clause of a longer sentence this is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clause: Option<String>,
    /// The sentence as it was taken: a clause with what it pointed back at
    /// put in, an answer said again as the request it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub said: Option<String>,
    /// What a clause's "it" pointed back at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub referent: Option<String>,
    /// The question an answer answers, or asked indirectly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
    /// The options "which one?" offered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Each request of a sentence that holds several, with its own reading.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
    /// The things a list request named ("eggs and flour"), one each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub several: Vec<String>,
    /// A request found among other words: the words, and how much of the
    /// sentence they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covered: Option<f64>,
    /// What a negation would have run ("don't turn off the lights").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negated: Option<String>,
    /// The command a negation asks for instead, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asks: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// A request said under a condition: not run, `would_run` named.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub conditional: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_run: Option<String>,
    /// A room or device the home does not have: what was said of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The sentence as a layer read it: a mishearing or a slip read as
    /// known words (`heard_as`, `sounds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_as: Option<String>,
    /// Why the sentence was read as `read_as` when no layer of speech did
    /// (a room's name said inside a device's, a span's own words).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_because: Option<Rewrite>,
    /// Each word changed to reach `read_as`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<WordRead>,
    /// The sound layer: what was heard, the template it sounds like, how
    /// far, and how well the reading fits the audio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heard_text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sounds_like: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distance: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fits_audio: Option<f64>,
    /// How sure speech to text was, where it was unsure enough to ask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heard: Option<HeardDoubt>,
    /// The meaning layer's nearest examples.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nearest: Vec<Nearest>,
    /// A model's choice among the nearest meanings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<ModelChoice>,
    /// The opposite reading that fits the audio about as well.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doubt: Option<Doubt>,
}

/// Why a sentence was read as other words (`Reading::read_as`) by a step
/// of `layer::ORDER` that rewrites and reads again, or a layer's own
/// second reading. Stored by these names (snake case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rewrite {
    /// Words that open a request ("ok", "would you mind" before a verb in
    /// -ing) taken off.
    Opening,
    /// Speech: "in" before a room heard as another word, put back.
    InHeardAsAnother,
    /// "Here", "this room": the room the client said it is in.
    SpeakersPlace,
    /// A name or a value taken back ("the kitchen, sorry, the dining
    /// room", "12 minutes, no wait, make that 14"); stored under the name
    /// it had when only names were.
    NameTakenBack,
    /// A phrase broken off and resumed ("add juice to the, Ava no, to the list").
    Resumed,
    /// A typing slip (letters swapped, a key beside) read as the known word.
    TypingSlip,
    /// A timer said by its name alone ("pause the cake").
    TimerByName,
    /// A clause said aside after a comma ("…, I've already done it") that
    /// a wildcard took, left out.
    SaidAside,
}

impl Reading {
    /// A reading by `layer` with nothing read yet.
    pub fn by(layer: Layer) -> Self {
        Self {
            layer,
            ..Self::default()
        }
    }

    /// What a template (or the meaning layer's example, read as one) understood.
    pub fn of(u: &Understood, layer: Layer) -> Self {
        Self {
            intent: Some(u.intent.clone()),
            template: Some(u.template.clone()),
            source: Some(u.source),
            confidence: Some(u.confidence),
            slots: u
                .slots
                .iter()
                .map(|(k, s)| {
                    let slot = ReadSlot {
                        value: s.value.clone(),
                        said: s.said.clone(),
                    };
                    (k.clone(), slot)
                })
                .collect(),
            ..Self::by(layer)
        }
    }

    /// What the sentence said for slot `name` (empty when the template fixed it).
    pub fn said_for(&self, name: &str) -> Option<&str> {
        self.slots.get(name).map(|s| s.said.as_str())
    }

    /// Every word the slots took from the sentence.
    pub fn slot_words(&self) -> impl Iterator<Item = &str> {
        self.slots.values().flat_map(|s| s.said.split(' '))
    }

    /// As stored in the trace.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// One slot: its value (an area's or device's id, a number; a list of ids
/// when a name fits several) and the words that said it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReadSlot {
    pub value: Value,
    pub said: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Said {
    pub said: String,
    pub referent: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Remembered {
    /// The words that led ("don't forget").
    pub lead: String,
    /// The request it was taken as.
    pub said: String,
}

/// One request of several in a sentence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Part {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub said: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub referent: Option<String>,
    pub layer: Layer,
    pub source_rule: Option<String>,
    pub understood: Option<Reading>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WordRead {
    pub heard: String,
    pub read: String,
}

/// Where speech to text was least sure, against the bars it is held to.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeardDoubt {
    pub least: f64,
    pub bar: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<ValueDoubt>,
}

/// A parameter's value heard with too little certainty.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValueDoubt {
    pub param: String,
    pub said: String,
    pub p: f64,
    pub bar: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Nearest {
    pub intent: String,
    pub slots: BTreeMap<String, String>,
    pub example: String,
    pub similarity: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelChoice {
    /// The option the model picked (an index into `options`), if any.
    pub picked: Option<usize>,
    pub options: Vec<Offered>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Offered {
    pub label: String,
    pub example: String,
    pub rank: usize,
    pub similarity: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Doubt {
    /// The reading with the other side of the pair.
    pub other: String,
    /// How much better what was read fits the audio (log-likelihood).
    pub fits_better_by: f64,
    pub margin: f64,
}

/// `x` to three places, as the trace shows a measure.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_stores_the_fields_set_and_leaves_out_the_rest() {
        let mut r = Reading::by(Layer::Clause);
        r.clause = Some("lock it".into());
        r.slots.insert(
            "name".into(),
            ReadSlot {
                value: Value::String("front door".into()),
                said: "the front door".into(),
            },
        );
        let json = r.to_json();
        assert_eq!(
            json,
            serde_json::json!({"layer": "clause", "clause": "lock it",
                "slots": {"name": {"value": "front door", "said": "the front door"}}})
        );
        assert_eq!(r.said_for("name"), Some("the front door"));
        assert_eq!(r.slot_words().collect::<Vec<_>>(), ["the", "front", "door"]);
    }
}
