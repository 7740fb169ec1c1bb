//! The order the router reads a sentence in, as one table: each step names
//! the steps of `understand::layer::ORDER` it runs (a test holds the two
//! in the same order, every step of `ORDER` run by one of these), and the
//! function that runs them. A step decides, or gives none and the next is
//! asked; the last always decides.

use std::collections::HashSet;

use super::{Intent, Meant, RouteDecision, Router, spans};
use crate::understand::{Context, Layer, Rewrite};

/// One step: the `ORDER` steps it runs, and how.
pub(super) struct Step {
    // Read by the test that holds `STEPS` to `ORDER`: the names are the link.
    #[cfg_attr(not(test), allow(dead_code))]
    pub covers: &'static [&'static str],
    pub read: fn(&Router, &str, &str, &Context) -> Option<RouteDecision>,
}

/// The steps, first to last.
pub(super) const STEPS: &[Step] = &[
    Step {
        covers: &["long"],
        read: long,
    },
    Step {
        covers: &["joined"],
        read: joined,
    },
    Step {
        covers: &["opening"],
        read: opening,
    },
    Step {
        covers: &["in heard as"],
        read: in_heard_as,
    },
    Step {
        covers: &["here"],
        read: here,
    },
    Step {
        covers: &["resumed"],
        read: resumed,
    },
    Step {
        covers: &["corrected"],
        read: corrected,
    },
    Step {
        covers: &["earlier", "remembered"],
        read: earlier,
    },
    Step {
        covers: &["answer"],
        read: |r, text, state, context| r.answers_which(text, state, context),
    },
    Step {
        covers: &["indirect"],
        read: |r, text, state, context| r.asked_indirectly(text, state, context),
    },
    Step {
        covers: &[
            "strong rules",
            "negation",
            "templates",
            "split",
            "weak rules",
        ],
        read: rules_and_templates,
    },
    Step {
        covers: &[
            "clauses",
            "several meant",
            "heard as",
            "sounds",
            "not in the home",
            "meaning",
            "span",
            "slips",
            "unmatched",
        ],
        read: |r, text, state, context| Some(below_templates(r, text, state, context)),
    },
];

/// A sentence longer than the sentence layers read: a strong rule or its clauses.
fn long(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    text.split_whitespace()
        .nth(crate::understand::MAX_WORDS)
        .map(|_| r.route_long(text, state, context))
}

/// A prefix typed apart from its word ("un lock") joined to it and read again.
fn joined(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    r.joined_prefix(text)
        .map(|joined| r.route_in(&joined, state, context))
}

/// Words that open a request and are no part of it ("ok", "so", "would
/// you mind" before the verb in -ing) taken off; kept only where the rest
/// is understood.
fn opening(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    let rest = r.opened(text)?;
    let d = r.route_in(&rest, state, context);
    (d.layer != Layer::None).then(|| spans::read_as(d, &rest, Rewrite::Opening))
}

/// Speech: "in" before a room heard as another word ("turn off the lights
/// and the kitchen", "lights off and here"), and a number before a unit
/// ("down to degrees"), put back; kept only when the sentence so read is
/// understood.
fn in_heard_as(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    if !context.spoken {
        return None;
    }
    let meant = (r.number_heard_as(text))
        .map(|numbered| r.in_heard_as(&numbered).unwrap_or(numbered))
        .or_else(|| r.in_heard_as(text))?;
    let d = r.route_in(&meant, state, context);
    (d.layer != Layer::None).then(|| spans::read_as(d, &meant, Rewrite::InHeardAsAnother))
}

/// "Here", "this room": the speaker's place, when a client gave it; kept
/// only where the sentence so read is understood. A template that says
/// "here" itself reads it as it was written.
fn here(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    let here = r
        .here_said(text, context)
        .filter(|_| r.by_templates(text, context).is_none())?;
    let d = r.route_in(&here, state, context);
    (d.layer != Layer::None).then(|| spans::read_as(d, &here, Rewrite::SpeakersPlace))
}

/// A phrase broken off and resumed after words to someone else ("add apple
/// juice to the, Ava I said no, to the shopping list") read as resumed.
fn resumed(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    let meant = r.resumed(text)?;
    let d = r.route_in(&meant, state, context);
    (d.layer != Layer::None).then(|| spans::read_as(d, &meant, Rewrite::Resumed))
}

/// A name or a value taken back ("the kitchen, sorry, the dining room", "12
/// minutes, no wait, make that 14") read as corrected.
fn corrected(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    let meant = r.corrected(text, context)?;
    let d = r.route_in(&meant, state, context);
    (d.layer != Layer::None).then(|| spans::read_as(d, &meant, Rewrite::NameTakenBack))
}

/// "It", "them", "there" read as what the conversation asked before; a
/// request asked to be kept in mind ("don't forget we need milk").
fn earlier(r: &Router, text: &str, state: &str, context: &Context) -> Option<RouteDecision> {
    r.by_earlier(text, state, context)
        .or_else(|| r.by_remembering(text, state, context))
}

/// The rules and the sentence templates (with negation and splits).
fn rules_and_templates(
    r: &Router,
    text: &str,
    _state: &str,
    context: &Context,
) -> Option<RouteDecision> {
    if let Some((priority, decision)) = r.by_rules(text) {
        if priority > r.template_priority {
            return Some(decision);
        }
        return Some(r.understood(text, context).unwrap_or_else(|| {
            // A rule that took it but could not use it ("there is no
            // kitchn here", "no brightness of the kitchen here": its
            // pattern took more than a room): a mishearing read right,
            // a clause, or the meaning of the whole may be understood.
            if matches!(decision.intent, Intent::Chain(_)) {
                decision
            } else {
                r.heard_as(text, context)
                    .or_else(|| r.runnable_below(text, context))
                    .unwrap_or(decision)
            }
        }));
    }
    let d = r.understood(text, context)?;
    let d = r.said_aside(text, &d, context).unwrap_or(d);
    // A typed slip among the words a wildcard took ("remind me to feed the
    // cat in 10 minutrs"): read mended, when that is the same command
    // with more of the sentence the template's own words.
    if !context.spoken
        && d.layer == Layer::Template
        && d.confidence < 1.0
        && let Some(m) = r.wildcard_slip_mended(text, &d, context)
    {
        return Some(m);
    }
    // A device or room that is not in the home ("lock the mac door"): a
    // mishearing read right may name one that is.
    if d.route_code == "intent.unknown_target" {
        return Some(
            r.heard_as(text, context)
                .or_else(|| r.by_sound(text, context, false))
                .unwrap_or(d),
        );
    }
    // Heard words a wildcard took ("pause what our timer": a timer called
    // "what our") may be a mishearing of a slot the home or a number fills
    // ("pause one hour timer"); words heard surely are what was said ("set
    // a pizza timer": never a timer without its name, nor the kitchen's).
    // A reading by sound that only drops the name ("set a rice timer", rice
    // heard unsurely, read "set a timer") accounts for none of its words:
    // the name stays, asked about as heard unsurely.
    if d.layer == Layer::Template && d.confidence < 1.0 && !values_heard_surely(&d, context) {
        let by_sound = r.by_sound(text, context, true);
        return Some(by_sound.filter(|s| reads_the_values(s, &d)).unwrap_or(d));
    }
    Some(d)
}

/// Whether `sound` reads the words `d`'s free-text values took as something:
/// each such parameter kept (another value), or a parameter `d` has not (a
/// timer's length for "what our": "pause one hour timer").
fn reads_the_values(sound: &RouteDecision, d: &RouteDecision) -> bool {
    let keys = |d: &RouteDecision, free: bool| -> HashSet<String> {
        let Intent::Chain(chain) = &d.intent else {
            return HashSet::new();
        };
        (chain.commands.iter().flat_map(|c| c.params.iter()))
            .filter(|(_, v)| !free || matches!(v, crate::command::ParamValue::Text(_)))
            .map(|(k, _)| k.clone())
            .collect()
    };
    let (read, took) = (keys(sound, false), keys(d, false));
    keys(d, true).is_subset(&read) || !read.is_subset(&took)
}

/// Whether every free-text value of `d` (a timer's name, an item) is of
/// words heard surely.
fn values_heard_surely(d: &RouteDecision, context: &Context) -> bool {
    let mut texts = super::layers::free_values(d).peekable();
    texts.peek().is_some() && texts.all(|t| context.heard_surely(t))
}

/// What no template or rule read: clauses, a mishearing, the sound, the
/// meaning, a request among other words, then (typed) a slip; else the
/// state's unmatched route. A request that waits on a condition is not run.
fn below_templates(r: &Router, text: &str, state: &str, context: &Context) -> RouteDecision {
    let d = r
        .by_clause(text, context, true)
        .or_else(|| r.several_meant(text, context))
        .or_else(|| r.heard_as(text, context))
        .map(Meant::Decided)
        .unwrap_or_else(|| r.by_sound_or_meaning(text, context));
    let d = match d {
        Meant::Decided(d) => d,
        Meant::Meaning(meaning) => {
            let meaning = meaning.unwrap_or_else(|| r.by_meaning(text, context));
            let mut d = meaning
                .decided
                .map(|d| {
                    if d.route_code == "intent.ambiguous" {
                        r.heard_as_meant(text, context).unwrap_or(d)
                    } else {
                        d
                    }
                })
                .or_else(|| r.by_span(text, context))
                .unwrap_or_else(|| r.unmatched(state));
            if d.layer != Layer::Span {
                d.choices = meaning.choices;
            }
            if matches!(d.intent, Intent::Think { .. }) {
                d.near = meaning.near;
            }
            d
        }
    };
    let d = r.unless_conditional(text, d);
    let d = r.timer_named_alone(text, d, context);
    if d.layer == Layer::None && !context.spoken {
        return r
            .slipped(text, context)
            .or_else(|| r.typed_as_meant(text, context))
            .unwrap_or(d);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::STEPS;
    use crate::understand::layer::ORDER;

    #[test]
    fn the_steps_run_every_step_of_the_order_in_its_order() {
        let run: Vec<&str> = STEPS
            .iter()
            .flat_map(|s| s.covers.iter().copied())
            .collect();
        let order: Vec<&str> = ORDER.iter().map(|s| s.name).collect();
        assert_eq!(
            run, order,
            "router/order.rs STEPS against understand::layer::ORDER"
        );
    }

    #[test]
    fn only_the_last_step_always_decides() {
        // The last step's function is total: nothing may follow it.
        assert!(STEPS.last().unwrap().covers.contains(&"unmatched"));
    }
}
