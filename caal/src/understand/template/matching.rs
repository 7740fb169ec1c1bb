//! Matching a parsed template against normalised text: every reading kept
//! as a set of states, slot lists (values, ranges, wildcards) filled where
//! the rest of the sentence still fits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::Expr;
use crate::understand::{Lang, numbers};

/// The values a `{list}` takes.
#[derive(Clone, Debug)]
pub enum SlotList {
    Values(Vec<ListValue>),
    Range(RangeList),
    Wildcard,
    /// A duration in any words `numbers::parse_duration` reads ("an hour
    /// and a half", "ten minutes", "1h30"), as seconds. CAAL's own list.
    Duration,
    /// A time of day `clock::parse` reads ("6 pm", "half past six",
    /// "tomorrow at 9"), as its kept form ("18:00"). CAAL's own list.
    TimeOfDay,
}

/// One value of a list: what is said (a template), the value it gives,
/// and what it carries for context checks (an entity's domain and area).
#[derive(Clone, Debug)]
pub struct ListValue {
    pub said: Expr,
    pub value: Value,
    pub context: Option<Arc<BTreeMap<String, String>>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RangeList {
    pub from: f64,
    pub to: f64,
    pub step: f64,
    pub multiplier: f64,
    /// Halves ("21.5") or tenths allowed; else whole numbers only.
    pub fractions: Option<f64>,
}

impl RangeList {
    fn accepts(&self, x: f64) -> bool {
        if x < self.from || x > self.to {
            return false;
        }
        let unit = self.fractions.unwrap_or(self.step.max(1.0));
        let steps = (x - self.from) / unit;
        (steps - steps.round()).abs() < 1e-9
    }
}

/// A slot filled by a match.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    pub slot: Box<str>,
    pub value: Value,
    /// The words it was said with.
    pub said: String,
    pub context: Option<Arc<BTreeMap<String, String>>>,
    /// Where it was said in the input (bytes), and whether a wildcard took it.
    pub span: (usize, usize),
    pub wildcard: bool,
}

/// One way a template matched the whole input.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub slots: Vec<Bound>,
    /// Characters matched by the template's own words and list values.
    pub literal_chars: u32,
    /// Characters taken by wildcards.
    pub wildcard_chars: u32,
}

#[derive(Clone)]
struct State {
    pos: usize,
    slots: Vec<Bound>,
    literal: u32,
    wild: u32,
}

/// Where list and rule names are looked up, innermost first.
pub struct Scope<'a> {
    pub lang: Lang,
    pub rules: &'a [&'a HashMap<String, Expr>],
    pub lists: &'a [&'a HashMap<String, SlotList>],
}

impl Scope<'_> {
    fn rule(&self, name: &str) -> Option<&Expr> {
        self.rules.iter().find_map(|r| r.get(name))
    }

    fn list(&self, name: &str) -> Option<&SlotList> {
        self.lists.iter().find_map(|l| l.get(name))
    }
}

/// The most states kept between two steps: enough for every reading of a
/// household sentence, bounded so a pathological input stays linear.
const MAX_STATES: usize = 256;
/// Expansion rules nest this deep at most (they may not refer to themselves).
pub(super) const MAX_DEPTH: u32 = 24;

/// Every way `expr` matches all of normalised `input`.
pub fn match_all(expr: &Expr, input: &str, scope: &Scope<'_>) -> Vec<Reading> {
    let start = State {
        pos: 0,
        slots: Vec::new(),
        literal: 0,
        wild: 0,
    };
    run(expr, input, vec![start], scope, 0)
        .into_iter()
        .filter(|s| s.pos == input.len())
        .map(|mut s| Reading {
            slots: {
                for b in &mut s.slots {
                    b.said = input[b.span.0..b.span.1].to_owned();
                }
                s.slots
            },
            literal_chars: s.literal,
            wildcard_chars: s.wild,
        })
        .collect()
}

fn run(expr: &Expr, input: &str, states: Vec<State>, scope: &Scope<'_>, depth: u32) -> Vec<State> {
    if states.is_empty() || depth > MAX_DEPTH {
        return Vec::new();
    }
    match expr {
        Expr::Text(t) => states
            .into_iter()
            .filter_map(|mut s| {
                let end = match_text(input, s.pos, t)?;
                s.literal += t.bytes().filter(|b| *b != b' ').count() as u32;
                s.pos = end;
                Some(s)
            })
            .collect(),
        Expr::Seq(items) => {
            let mut states = states;
            for item in items {
                states = dedup(run(item, input, states, scope, depth));
                if states.is_empty() {
                    break;
                }
            }
            states
        }
        Expr::Alt(options) => {
            let mut out = Vec::new();
            for option in options {
                out.extend(run(option, input, states.clone(), scope, depth));
            }
            out
        }
        Expr::Rule(name) => match scope.rule(name) {
            Some(body) => run(body, input, states, scope, depth + 1),
            None => Vec::new(),
        },
        Expr::List { list, slot } => {
            let Some(values) = scope.list(list) else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for s in states {
                fill_slot(values, slot, input, s, scope, depth, &mut out);
            }
            out
        }
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80 || b == b'\''
}

/// Literal text at `pos`; a space is a word boundary (see the module doc).
fn match_text(input: &str, pos: usize, text: &str) -> Option<usize> {
    let b = input.as_bytes();
    let mut p = pos;
    for &c in text.as_bytes() {
        if c == b' ' {
            if p < b.len() && b[p] == b' ' {
                p += 1;
            } else if !(p == 0 || p == b.len() || b[p - 1] == b' ') {
                return None;
            }
        } else if p < b.len() && b[p] == c {
            p += 1;
        } else {
            return None;
        }
    }
    Some(p)
}

fn fill_slot(
    values: &SlotList,
    slot: &str,
    input: &str,
    s: State,
    scope: &Scope<'_>,
    depth: u32,
    out: &mut Vec<State>,
) {
    let b = input.as_bytes();
    let mut start = s.pos;
    if start < b.len() && b[start] == b' ' {
        start += 1;
    }
    if start >= b.len() || (start > 0 && is_word_byte(b[start - 1])) {
        return;
    }
    let ends_word = |e: usize| e == b.len() || !is_word_byte(b[e]);
    let mut bind = |end: usize,
                    value: Value,
                    context: Option<Arc<BTreeMap<String, String>>>,
                    wildcard: bool| {
        // The words themselves are taken once the whole sentence matched.
        let said = String::new();
        let span = (start, start + input[start..end].trim_end().len());
        let chars = input[span.0..span.1].bytes().filter(|b| *b != b' ').count() as u32;
        let mut next = s.clone();
        next.pos = end;
        if wildcard {
            next.wild += chars;
        } else {
            next.literal += chars;
        }
        next.slots.push(Bound {
            slot: slot.into(),
            value,
            said,
            context,
            span,
            wildcard,
        });
        out.push(next);
    };
    match values {
        SlotList::Values(list) => {
            for v in list {
                let from = State {
                    pos: start,
                    slots: Vec::new(),
                    literal: 0,
                    wild: 0,
                };
                for end in run(&v.said, input, vec![from], scope, depth + 1) {
                    if end.pos > start && ends_word(end.pos) {
                        bind(end.pos, v.value.clone(), v.context.clone(), false);
                    }
                }
            }
        }
        SlotList::Range(range) => {
            for (x, end) in numbers::numbers_at(scope.lang, input, start) {
                if range.accepts(x) && ends_word(end) {
                    bind(end, number_value(x * range.multiplier), None, false);
                }
            }
        }
        SlotList::Duration => {
            for end in word_ends(input, start).take(SPOKEN_AMOUNT_WORDS) {
                if let Some(seconds) = numbers::parse_duration(scope.lang, &input[start..end]) {
                    bind(end, Value::from(seconds), None, false);
                }
            }
        }
        SlotList::TimeOfDay => {
            for end in word_ends(input, start).take(SPOKEN_AMOUNT_WORDS) {
                if let Some(t) = crate::understand::clock::parse(&input[start..end]) {
                    bind(end, Value::String(t.to_string()), None, false);
                }
            }
        }
        SlotList::Wildcard => {
            // Every run of whole words from here, up to a bound.
            for end in word_ends(input, start).take(WILDCARD_WORDS) {
                bind(end, Value::String(input[start..end].to_owned()), None, true);
            }
        }
    }
}

/// The most words a length of time or a time of day is said in ("two
/// hours and thirty five minutes", "a quarter past seven in the evening").
const SPOKEN_AMOUNT_WORDS: usize = 8;

/// The most words a wildcard (a name, an item, what to be reminded of)
/// takes: bounds the readings of a long input (each slot would otherwise
/// try every run of words to the end).
const WILDCARD_WORDS: usize = 24;

/// Where each run of whole words that begins at `start` ends: at every
/// space after it, then at the end of the input. The offsets come from the
/// matcher, so a word that begins with a letter of several bytes ("émincé",
/// "Élodie", "ｙｅｓ") is never cut inside it.
fn word_ends(input: &str, start: usize) -> impl Iterator<Item = usize> + '_ {
    input[start..]
        .match_indices(' ')
        .map(move |(i, _)| start + i)
        .filter(move |&end| end > start)
        .chain(std::iter::once(input.len()))
}

/// Whole numbers as integers, so "50" is `50`, not `50.0`.
pub fn number_value(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// Drops states that are the same reading reached twice, and bounds the rest.
fn dedup(states: Vec<State>) -> Vec<State> {
    if states.len() < 2 {
        return states;
    }
    use std::hash::{Hash, Hasher};
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(states.len().min(MAX_STATES));
    for s in states {
        // Same place, same slots over the same words: the same reading.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        s.pos.hash(&mut h);
        for b in &s.slots {
            b.slot.hash(&mut h);
            b.span.hash(&mut h);
        }
        if seen.insert(h.finish()) {
            out.push(s);
            if out.len() == MAX_STATES {
                break;
            }
        }
    }
    out
}
