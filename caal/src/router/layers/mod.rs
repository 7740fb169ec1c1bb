//! The understanding layers as the router reads them, a file each (the
//! order they are asked in is `understand::layer::ORDER`): what a layer
//! found becomes a routing decision here, an intent mapped to a command by
//! `[[understand.intents]]`, its parameters filled from the slots and
//! checked against the home.

mod about;
mod asking;
mod checks;
mod clause;
mod described;
mod earlier;
mod heard;
mod meaning;
mod opening;
mod repair;
mod restated;
mod sound;
mod span;
mod split;
mod targets;
mod templates;
mod topics;
mod vocabulary;

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};

use super::{Choice, Intent, RouteDecision, Router, hearing::sides_heard_surely, normalize};
use crate::{
    auth::{AuthLevel, CommandChain},
    config::{ConfigError, IntentMapConfig, LanguageConfig, SemanticConfig},
    trace::events::HeardWord,
    understand::{
        Context, Lang, Layer, MAX_WORDS, Reading, Understood,
        home::value_names,
        reading::{Doubt, ModelChoice, Offered, Part, Remembered, Said, WordRead, round3},
        sounds::SoundMatch,
        spelling::{
            Vocabulary, alphabetic, heard_distance, heard_within, nearest_words, sound_spelling,
            sounds_near,
        },
        words::Words,
    },
};

/// The model layer's way out: the sentence is none of the meanings offered.
pub const NONE_OF_THESE: &str = "none of these: not a request to do something";

/// What the meaning layer made of a sentence: a decision if it was near
/// enough and clearly apart, and, when the model layer is on and it was not
/// sure, the nearest meanings for a model to choose among.
#[derive(Default)]
pub(in crate::router) struct Meaning {
    pub decided: Option<RouteDecision>,
    pub choices: Vec<Choice>,
    /// The commands of the requests found near (`RouteDecision::near`).
    pub near: Option<Vec<String>>,
}

/// A decision reached by routing other words than were said (what "it"
/// pointed back at put in, a lead taken off): kept only when it is a request
/// (to run, or one whose target is named as missing or asked about), with
/// how it was reached noted in its `understood` under `key`.
pub(in crate::router) fn answered_with(
    mut d: RouteDecision,
    how: impl FnOnce(&mut Reading),
) -> Option<RouteDecision> {
    if !matches!(
        d.intent,
        Intent::Chain(_) | Intent::Invalid { .. } | Intent::Ambiguous { .. }
    ) {
        return None;
    }
    how(d.understood.get_or_insert_with(|| Reading::by(d.layer)));
    Some(d)
}

/// Several requests found by `layer` (a split, clauses) as one chain, gated
/// once at its highest level, with each part's own reading.
pub(in crate::router) fn several_parts(
    commands: Vec<crate::auth::Command>,
    layer: Layer,
    parts: Vec<Part>,
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
        understood: Some(Reading {
            parts,
            ..Reading::by(layer)
        }),
        confidence: 1.0,
        choices: Vec::new(),
        near: None,
    }
}

use crate::understand::{CLAUSE_MARKS, padded_words};

/// `word` without the mark said after it ("off." "lights,"): the marks a
/// word is read without where it is compared with the language's words.
pub(in crate::router) fn without_mark(word: &str) -> &str {
    word.trim_end_matches([',', '.', '?', '!'])
}

/// `d` as the layer `layer` decided it, its `understood` recording the
/// layer and, by `read`, what that layer read.
pub(in crate::router) fn decided_by(
    mut d: RouteDecision,
    layer: Layer,
    read: impl FnOnce(&mut Reading),
) -> RouteDecision {
    d.layer = layer;
    let u = d.understood.get_or_insert_with(|| Reading::by(layer));
    u.layer = layer;
    read(u);
    d
}

/// The free values of `d`'s commands (a wildcard's: a timer's name, an
/// item, what to be reminded of), as text.
pub(in crate::router) fn free_values(d: &RouteDecision) -> impl Iterator<Item = &str> {
    let commands = match &d.intent {
        Intent::Chain(chain) => chain.commands.as_slice(),
        _ => &[],
    };
    (commands.iter().flat_map(|c| c.params.values())).filter_map(|v| match v {
        crate::command::ParamValue::Text(t) => Some(t.as_str()),
        _ => None,
    })
}

/// Whether `d` took a level (a brightness, a temperature or a change of
/// it) that its sentence fixes rather than one said.
pub(in crate::router) fn fixes_a_level(d: &RouteDecision) -> bool {
    let said = |k: &str| d.understood.as_ref().and_then(|u| u.said_for(k));
    let levels = ["brightness", "temperature", "change"];
    // A level slot the sentence fixed, or a level parameter filled with
    // no level said ("warmer": a degree).
    let fixed_slot = levels.iter().any(|k| said(k).is_some_and(str::is_empty));
    let said_one = levels
        .iter()
        .any(|k| said(k).is_some_and(|s| !s.is_empty()));
    let level_param = matches!(&d.intent, Intent::Chain(chain) if chain.commands.iter().any(|c| {
        ["level", "temperature", "change"].iter().any(|p| c.params.contains_key(*p))
    }));
    fixed_slot || (level_param && !said_one)
}

/// Whether a reading of what was heard is a request sure enough to take
/// (`heard_as`, `by_sound`).
pub(in crate::router) fn sure_request(d: &RouteDecision) -> bool {
    matches!(d.intent, Intent::Chain(_)) && d.confidence >= SURE_CLAUSE
}

/// Whether a run of words says more than the names its template read: a
/// bare "the porch light" inside "leave the porch light as it is" asks
/// for nothing.
pub(in crate::router) fn asks_something(span: &str, d: &RouteDecision, words: &Words) -> bool {
    let said: Vec<&str> = d.understood.iter().flat_map(Reading::slot_words).collect();
    span.split(' ')
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .any(|w| {
            let filler = words
                .determiners
                .iter()
                .chain(&words.answer_tails)
                .any(|f| f == w);
            !w.is_empty() && !filler && !said.contains(&w)
        })
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

impl Router {
    pub(in crate::router) fn map_for(&self, u: &Understood) -> Option<&IntentMapConfig> {
        self.intent_maps
            .iter()
            .find(|m| m.intent == u.intent && m.when.iter().all(|(k, v)| slot_is(u, k, v)))
    }

    pub(in crate::router) fn template_command(&self, u: &Understood) -> Option<RouteDecision> {
        self.intent_command(u, Layer::Template, None, |_| {})
    }

    /// An understood intent as a decision of `layer`: the command its
    /// mapping names, asked about when a device is ambiguous or a room is
    /// needed, its level raised to `raise_to` if given.
    pub(in crate::router) fn intent_command(
        &self,
        u: &Understood,
        layer: Layer,
        raise_to: Option<AuthLevel>,
        extra: impl FnOnce(&mut Reading),
    ) -> Option<RouteDecision> {
        let map = self.map_for(u)?;
        let source = Some(format!("{layer}:{}", u.intent));
        let mut reading = Reading::of(u, layer);
        extra(&mut reading);
        let understood = Some(reading);
        // "the lamp" when there are two: ask which, naming them.
        if let Some(slot) = u.slots.values().find(|s| s.value.is_array()) {
            // Only devices of the kind the reading is about ("make sure the
            // door is locked" is no question of the garage door, a cover).
            let domain = u.slots.get("domain").map(|d| d.text());
            let of_kind = |id: &String| {
                domain
                    .as_deref()
                    .is_none_or(|k| self.home.device(id).is_none_or(|d| d.domain == k))
            };
            let candidates = value_names(&slot.value)
                .into_iter()
                .filter(of_kind)
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

    pub(in crate::router) fn raw_params(
        &self,
        map: &IntentMapConfig,
        u: &Understood,
    ) -> BTreeMap<String, String> {
        map.params
            .iter()
            .filter_map(|(k, t)| fill(t, u).map(|v| (k.clone(), v)))
            .collect()
    }

    /// One request as a command chain, by the layers in their order: rules
    /// above the template priority, templates, then the fallback rules.
    pub(in crate::router) fn command_of(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
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
            .map(|d| self.said_aside(&text, &d, context).unwrap_or(d))
            .or_else(|| ruled.map(|(_, d)| d).filter(is_request))
    }

    /// Whether a decision runs a command that changes something (a
    /// question may ask for a report, "is my timer almost done", never for a
    /// change: "did you turn off the porch light").
    pub(in crate::router) fn changes_something(&self, d: &RouteDecision) -> bool {
        match &d.intent {
            Intent::Chain(chain) => chain.commands.iter().any(|c| self.changes(c)),
            _ => false,
        }
    }

    /// Whether running a command changes something (its `side_effects`).
    pub(in crate::router) fn changes(&self, c: &crate::auth::Command) -> bool {
        self.commands
            .get(&c.command_id)
            .is_none_or(|spec| spec.config.side_effects)
    }
}

use asking::as_questions;
pub(in crate::router) use checks::{check_examples, check_maps, check_model_choice};
use clause::{SURE_CLAUSE, clauses};
use sound::MAX_READINGS;
use targets::READ_BY_KIND;
use vocabulary::vocabulary_of;
