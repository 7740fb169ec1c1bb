//! The layers that read a sentence, as one type and one table: which layer
//! decided is a `Layer`, never a string, and `ORDER` is the order the
//! router asks them in (what each one reads is in the router's method named
//! beside it). The names are what the trace, the API, replay and the bench
//! print, so they stay as they were when layers were strings.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which layer of understanding decided a sentence.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// A configured rule (a regular expression in `[[rules]]`).
    Rule,
    /// A negated request ("don't turn off the lights"): never run.
    Negation,
    /// A sentence template (Home Assistant's library or CAAL's own).
    Template,
    /// Several requests in one sentence, each matching a template whole.
    Split,
    /// The clauses of a longer sentence, each read on its own.
    Clause,
    /// An answer to "which one?" asked just before.
    Answer,
    /// A question asked indirectly ("do you know if the door is locked").
    Indirect,
    /// A word no sentence knows, read as a known word it is spelled near.
    HeardAs,
    /// What was heard read by how it sounds (speech only).
    Sounds,
    /// A room or device the home does not have (a reply naming what it has).
    Home,
    /// The nearest examples in meaning (sentence embeddings).
    Semantic,
    /// A request found among other words.
    Span,
    /// A model chose among the nearest meanings.
    Model,
    /// No layer understood.
    #[default]
    None,
}

impl Layer {
    /// Every layer, in the order `ORDER` asks them.
    pub const ALL: [Layer; 14] = [
        Layer::Rule,
        Layer::Negation,
        Layer::Template,
        Layer::Split,
        Layer::Clause,
        Layer::Answer,
        Layer::Indirect,
        Layer::HeardAs,
        Layer::Sounds,
        Layer::Home,
        Layer::Semantic,
        Layer::Span,
        Layer::Model,
        Layer::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Rule => "rule",
            Layer::Negation => "negation",
            Layer::Template => "template",
            Layer::Split => "split",
            Layer::Clause => "clause",
            Layer::Answer => "answer",
            Layer::Indirect => "indirect",
            Layer::HeardAs => "heard_as",
            Layer::Sounds => "sounds",
            Layer::Home => "home",
            Layer::Semantic => "semantic",
            Layer::Span => "span",
            Layer::Model => "model",
            Layer::None => "none",
        }
    }

    /// Whether the layer guessed at the meaning (nearest examples, a span
    /// among other words, a model's choice) rather than matched it.
    pub fn guessed(self) -> bool {
        matches!(self, Layer::Semantic | Layer::Span | Layer::Model)
    }

    /// Whether the layer read the whole sentence against a known form (a
    /// rule or a template) rather than parts of it or its meaning.
    pub fn matched_whole(self) -> bool {
        matches!(self, Layer::Rule | Layer::Template)
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of the order the router reads a sentence in: what it does and
/// the layer it decides as (none for a step that only rewrites what was
/// said and reads it again).
pub struct Step {
    pub name: &'static str,
    pub decides_as: Option<Layer>,
    pub what: &'static str,
}

/// The order of reading, first to last (the router's `order::STEPS` runs
/// it, a test holding the two alike; another checks every layer that
/// decides is in it).
pub const ORDER: &[Step] = &[
    Step {
        name: "long",
        decides_as: Option::None,
        what: "a sentence longer than the sentence layers read: a strong rule or its clauses",
    },
    Step {
        name: "joined",
        decides_as: Option::None,
        what: "a prefix typed apart from its word (\"un lock\") joined to it and read again",
    },
    Step {
        name: "opening",
        decides_as: Option::None,
        what: "words that open a request (\"ok\", \"so\", \"would you mind\" before the verb in -ing) taken off and the rest read alone",
    },
    Step {
        name: "in heard as",
        decides_as: Option::None,
        what: "speech: \"in\" before a room heard as another word (\"turn off the lights and the kitchen\") put back",
    },
    Step {
        name: "here",
        decides_as: Option::None,
        what: "\"here\" or \"this room\" read as the speaker's place, when a client gave it",
    },
    Step {
        name: "resumed",
        decides_as: Option::None,
        what: "a phrase broken off and resumed after words to someone else (\"add juice to the, Ava no, to the list\") read as resumed",
    },
    Step {
        name: "corrected",
        decides_as: Option::None,
        what: "a name or a value taken back (\"the kitchen, sorry, the dining room\", \"12 minutes, no wait, make that 14\") read as corrected",
    },
    Step {
        name: "earlier",
        decides_as: Option::None,
        what: "\"it\", \"them\", \"there\" read as what the conversation asked before",
    },
    Step {
        name: "remembered",
        decides_as: Option::None,
        what: "a request asked to be kept in mind (\"don't forget we need milk\") read as the request",
    },
    Step {
        name: "answer",
        decides_as: Some(Layer::Answer),
        what: "an answer to \"which one?\" asked just before",
    },
    Step {
        name: "indirect",
        decides_as: Some(Layer::Indirect),
        what: "a question asked indirectly, read as the question",
    },
    Step {
        name: "strong rules",
        decides_as: Some(Layer::Rule),
        what: "rules above the template priority",
    },
    Step {
        name: "negation",
        decides_as: Some(Layer::Negation),
        what: "a negated request: never run",
    },
    Step {
        name: "templates",
        decides_as: Some(Layer::Template),
        what: "the sentence templates, with the home's names found first",
    },
    Step {
        name: "split",
        decides_as: Some(Layer::Split),
        what: "several requests in one sentence",
    },
    Step {
        name: "weak rules",
        decides_as: Some(Layer::Rule),
        what: "the remaining rules",
    },
    Step {
        name: "clauses",
        decides_as: Some(Layer::Clause),
        what: "the clauses of a longer sentence, each on its own",
    },
    Step {
        name: "several meant",
        decides_as: Some(Layer::Split),
        what: "two requests joined, one of them read by the meaning layer (\"lock the front door and shut the garage\")",
    },
    Step {
        name: "heard as",
        decides_as: Some(Layer::HeardAs),
        what: "a word no sentence knows read as one spelled near it",
    },
    Step {
        name: "sounds",
        decides_as: Some(Layer::Sounds),
        what: "speech: what was heard read by how it sounds",
    },
    Step {
        name: "not in the home",
        decides_as: Some(Layer::Home),
        what: "a room or device that is not in the home",
    },
    Step {
        name: "meaning",
        decides_as: Some(Layer::Semantic),
        what: "the nearest examples in meaning (a model may choose when unsure)",
    },
    Step {
        name: "span",
        decides_as: Some(Layer::Span),
        what: "a request found among other words",
    },
    Step {
        name: "slips",
        decides_as: Option::None,
        what: "typed: a slipped word read as the known word, kept only where templates, rules or heard-as then read it; else a word no sentence knows read as the nearest in spelling, kept only where the meaning layer is then sure",
    },
    Step {
        name: "unmatched",
        decides_as: Some(Layer::None),
        what: "the conversation state's unmatched route",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_is_stored_and_read_back_by_its_name() {
        for layer in Layer::ALL {
            let stored = serde_json::json!(layer.as_str());
            assert_eq!(serde_json::to_value(layer).unwrap(), stored);
            assert_eq!(serde_json::from_value::<Layer>(stored).unwrap(), layer);
        }
        assert!(serde_json::from_value::<Layer>(serde_json::json!("regex")).is_err());
    }

    #[test]
    fn every_layer_but_the_model_decides_in_the_order() {
        let in_order: Vec<Layer> = ORDER.iter().filter_map(|s| s.decides_as).collect();
        for layer in Layer::ALL {
            // A model chooses within the meaning step; it is no step of its own.
            assert_eq!(
                in_order.contains(&layer),
                layer != Layer::Model,
                "{layer} in ORDER"
            );
        }
    }
}
