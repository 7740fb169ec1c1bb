//! Home Assistant's sentence-template language (hassil), parsed and matched
//! in Rust: alternatives `(a|b)`, optional parts `[a]`, permutations
//! `(a;b)`, slot lists `{list}` / `{list:slot}` (values, numeric ranges,
//! wildcards), expansion rules `<rule>`, escapes `\x`.
//!
//! Matching works on normalised text (`super::normalize`) byte by byte with
//! every reading kept (a backtracking matcher written as a set of states),
//! so a wildcard or a number may end wherever the rest of the sentence
//! still fits. A space in a template is a word boundary: it takes the
//! input's space, or none at the start, the end, or after a space already
//! taken, so "on" never matches the start of "one". No crate implements
//! this syntax in Rust; the Python reference is the `hassil` package.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::{Lang, numbers};

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// Normalised literal text; a space is a word boundary.
    Text(Box<str>),
    Seq(Vec<Expr>),
    /// One of; an optional part is an `Alt` with an empty `Seq`.
    Alt(Vec<Expr>),
    /// `{list}` or `{list:slot}`.
    List {
        list: Box<str>,
        slot: Box<str>,
    },
    /// `<rule>`.
    Rule(Box<str>),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("template {template:?}: {problem}")]
pub struct TemplateError {
    pub template: String,
    pub problem: String,
}

/// Parses one template.
pub fn parse(template: &str) -> Result<Expr, TemplateError> {
    let mut p = Parser {
        chars: template.chars().collect(),
        at: 0,
    };
    let fail = |problem: String| TemplateError {
        template: template.to_owned(),
        problem,
    };
    // A template may be alternatives at its top level ("a|b"), as a group is.
    let expr = p.group(None).map_err(fail)?;
    if p.at < p.chars.len() {
        return Err(fail(format!(
            "unexpected {:?} at character {}",
            p.chars[p.at],
            p.at + 1
        )));
    }
    Ok(expr)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn seq(&mut self, stop: &[char]) -> Result<Expr, String> {
        let mut items = Vec::new();
        let mut text = String::new();
        let flush = |text: &mut String, items: &mut Vec<Expr>| {
            if !text.is_empty() {
                items.push(Expr::Text(std::mem::take(text).into()));
            }
        };
        while let Some(&c) = self.chars.get(self.at) {
            if stop.contains(&c) {
                break;
            }
            self.at += 1;
            match c {
                '(' | '[' => {
                    flush(&mut text, &mut items);
                    let close = if c == '(' { ')' } else { ']' };
                    let group = self.group(Some(close))?;
                    items.push(if c == '[' {
                        Expr::Alt(vec![group, Expr::Seq(vec![])])
                    } else {
                        group
                    });
                }
                '{' | '<' => {
                    flush(&mut text, &mut items);
                    let close = if c == '{' { '}' } else { '>' };
                    let start = self.at;
                    while self.chars.get(self.at).is_some_and(|&x| x != close) {
                        self.at += 1;
                    }
                    if self.at >= self.chars.len() {
                        return Err(format!("{c} is never closed with {close}"));
                    }
                    let name: String = self.chars[start..self.at].iter().collect();
                    self.at += 1;
                    let name = name.trim();
                    if name.is_empty() {
                        return Err(format!("an empty {c}{close}"));
                    }
                    items.push(if c == '{' {
                        let (list, slot) = name.split_once(':').unwrap_or((name, name));
                        Expr::List {
                            list: list.trim().into(),
                            slot: slot.trim().into(),
                        }
                    } else {
                        Expr::Rule(name.into())
                    });
                }
                '\\' => {
                    if let Some(&next) = self.chars.get(self.at) {
                        self.at += 1;
                        push_normalized(&mut text, next);
                    }
                }
                ')' | ']' | '|' | ';' | '}' | '>' => {
                    return Err(format!("{c:?} without its opening bracket"));
                }
                _ => push_normalized(&mut text, c),
            }
        }
        flush(&mut text, &mut items);
        Ok(match items.len() {
            1 => items.pop().unwrap_or(Expr::Seq(vec![])),
            _ => Expr::Seq(items),
        })
    }

    /// The inside of `( … )` or `[ … ]` (or a whole template, `close`
    /// none): alternatives split by `|`, permutation items by `;`.
    fn group(&mut self, close: Option<char>) -> Result<Expr, String> {
        let mut alts = Vec::new();
        let mut items = Vec::new();
        let stops: Vec<char> = ['|', ';'].into_iter().chain(close).collect();
        loop {
            alts.push(self.seq(&stops)?);
            match (self.chars.get(self.at), close) {
                (Some('|'), _) => self.at += 1,
                (Some(';'), _) => {
                    self.at += 1;
                    items.push(one_of(std::mem::take(&mut alts)));
                }
                (Some(c), Some(close)) if *c == close => {
                    self.at += 1;
                    break;
                }
                (None, None) => break,
                (_, Some(close)) => return Err(format!("a group is never closed with {close}")),
                (Some(c), None) => return Err(format!("{c:?} without its opening bracket")),
            }
        }
        if items.is_empty() {
            return Ok(one_of(alts));
        }
        items.push(one_of(alts));
        if items.len() > 5 {
            return Err("a permutation of more than 5 parts".into());
        }
        // Every order of the items, a word boundary between them.
        let mut orders = Vec::new();
        permute(&mut (0..items.len()).collect::<Vec<_>>(), 0, &mut orders);
        Ok(Expr::Alt(
            orders
                .into_iter()
                .map(|order| {
                    let mut seq = Vec::new();
                    for (n, i) in order.into_iter().enumerate() {
                        if n > 0 {
                            seq.push(Expr::Text(" ".into()));
                        }
                        seq.push(items[i].clone());
                    }
                    Expr::Seq(seq)
                })
                .collect(),
        ))
    }
}

fn one_of(mut alts: Vec<Expr>) -> Expr {
    if alts.len() == 1 {
        alts.pop().unwrap_or(Expr::Seq(vec![]))
    } else {
        Expr::Alt(alts)
    }
}

fn permute(order: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
    if k == order.len() {
        out.push(order.clone());
        return;
    }
    for i in k..order.len() {
        order.swap(k, i);
        permute(order, k + 1, out);
        order.swap(k, i);
    }
}

/// A template's literal character as the input is normalised: lower case,
/// a hyphen or punctuation is a space, spaces never doubled.
fn push_normalized(text: &mut String, c: char) {
    let c = match c {
        '-' | ',' | '!' | '?' | '¿' | '¡' | '"' | '\t' | '\n' => ' ',
        '’' => '\'',
        c => c,
    };
    if c == ' ' {
        if !text.ends_with(' ') {
            text.push(' ');
        }
        return;
    }
    text.extend(c.to_lowercase());
}

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
const MAX_DEPTH: u32 = 24;

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
                if let Some(t) = super::clock::parse(&input[start..end]) {
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

/// Literal strings the input must contain for `expr` to match it, as
/// clauses (each: at least one of these appears), to skip templates cheaply.
pub fn required(expr: &Expr, rules: &HashMap<String, Expr>, depth: u32) -> Vec<Vec<String>> {
    if depth > MAX_DEPTH {
        return Vec::new();
    }
    match expr {
        Expr::Text(t) => {
            let t = t.trim();
            if t.is_empty() {
                Vec::new()
            } else {
                vec![vec![t.to_owned()]]
            }
        }
        Expr::Seq(items) => items
            .iter()
            .flat_map(|i| required(i, rules, depth))
            .collect(),
        Expr::Alt(options) => {
            // At least one option matched, so at least one of their first clauses holds.
            let mut clause = Vec::new();
            for o in options {
                match required(o, rules, depth).into_iter().next() {
                    Some(first) => clause.extend(first),
                    None => return Vec::new(),
                }
            }
            vec![clause]
        }
        Expr::Rule(name) => rules
            .get(&**name)
            .map(|body| required(body, rules, depth + 1))
            .unwrap_or_default(),
        Expr::List { .. } => Vec::new(),
    }
}

/// Every literal word `expr` may match, on any path through it (its rules
/// followed), into `out`: the words a sentence library knows.
pub fn literal_words(
    expr: &Expr,
    rules: &HashMap<String, Expr>,
    depth: u32,
    out: &mut std::collections::HashSet<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match expr {
        Expr::Text(t) => out.extend(t.split(' ').filter(|w| !w.is_empty()).map(str::to_owned)),
        Expr::Seq(items) | Expr::Alt(items) => {
            for i in items {
                literal_words(i, rules, depth, out);
            }
        }
        Expr::Rule(name) => {
            if let Some(body) = rules.get(&**name) {
                literal_words(body, rules, depth + 1, out);
            }
        }
        Expr::List { .. } => {}
    }
}

/// The lists every reading of `expr` fills (on every path through it), to
/// skip a template when none of a list's values is in the input.
pub fn required_lists(expr: &Expr, rules: &HashMap<String, Expr>, depth: u32) -> Vec<String> {
    if depth > MAX_DEPTH {
        return Vec::new();
    }
    match expr {
        Expr::Text(_) => Vec::new(),
        Expr::Seq(items) => items
            .iter()
            .flat_map(|i| required_lists(i, rules, depth))
            .collect(),
        Expr::Alt(options) => {
            let mut sets = options.iter().map(|o| required_lists(o, rules, depth));
            let Some(first) = sets.next() else {
                return Vec::new();
            };
            sets.fold(first, |kept, next| {
                kept.into_iter().filter(|l| next.contains(l)).collect()
            })
        }
        Expr::Rule(name) => rules
            .get(&**name)
            .map(|body| required_lists(body, rules, depth + 1))
            .unwrap_or_default(),
        Expr::List { list, .. } => vec![list.to_string()],
    }
}

/// Whether some value of `list` could be in `input`: each value's words
/// (one of its first clause) looked for; lists of numbers, durations and
/// wildcards are always possible.
pub fn list_possible(list: &SlotList, input: &str) -> bool {
    let SlotList::Values(values) = list else {
        return true;
    };
    let none = HashMap::new();
    values
        .iter()
        .any(|v| match required(&v.said, &none, 0).into_iter().next() {
            Some(clause) => clause.iter().any(|w| input.contains(w.as_str())),
            None => true,
        })
}

/// The list and rule names a template uses (for checks at load time).
pub fn references<'a>(expr: &'a Expr, lists: &mut Vec<&'a str>, rules: &mut Vec<&'a str>) {
    match expr {
        Expr::Text(_) => {}
        Expr::Seq(items) | Expr::Alt(items) => {
            for i in items {
                references(i, lists, rules);
            }
        }
        Expr::List { list, .. } => lists.push(list),
        Expr::Rule(name) => rules.push(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::understand::normalize;
    use serde_json::json;

    fn values(pairs: &[(&str, Value)]) -> SlotList {
        SlotList::Values(
            pairs
                .iter()
                .map(|(said, value)| ListValue {
                    said: parse(said).unwrap(),
                    value: value.clone(),
                    context: None,
                })
                .collect(),
        )
    }

    fn matches(template: &str, said: &str) -> Vec<BTreeMap<String, Value>> {
        let rules = HashMap::from([
            ("the".to_string(), parse("(the|my|our)").unwrap()),
            ("light".to_string(), parse("(light|lights|lamp)").unwrap()),
            ("turn".to_string(), parse("(turn|switch)").unwrap()),
        ]);
        let lists = HashMap::from([
            (
                "area".to_string(),
                values(&[
                    ("kitchen", json!("Kitchen")),
                    ("living room", json!("Living Room")),
                ]),
            ),
            (
                "brightness".to_string(),
                SlotList::Range(RangeList {
                    from: 0.0,
                    to: 100.0,
                    step: 1.0,
                    multiplier: 1.0,
                    fractions: None,
                }),
            ),
            ("item".to_string(), SlotList::Wildcard),
        ]);
        let scope = Scope {
            lang: Lang::En,
            rules: &[&rules],
            lists: &[&lists],
        };
        match_all(&parse(template).unwrap(), &normalize(said), &scope)
            .into_iter()
            .map(|r| {
                r.slots
                    .into_iter()
                    .map(|b| (b.slot.to_string(), b.value))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn alternatives_optionals_and_rules() {
        let t = "<turn> on [<the>] {area} <light>";
        assert_eq!(
            matches(t, "Turn on the kitchen lights!"),
            vec![BTreeMap::from([("area".into(), json!("Kitchen"))])]
        );
        assert_eq!(matches(t, "switch on living room lamp").len(), 1);
        assert!(matches(t, "turn on the garage lights").is_empty());
        // A word boundary: "on" is not the start of "one".
        assert!(matches("turn on", "turn one").is_empty());
        assert_eq!(matches("fan[s] on", "fans on").len(), 1);
        assert_eq!(matches("fan[s] on", "fan on").len(), 1);
        assert!(matches("fan[s] on", "fanon").is_empty());
        assert_eq!(matches("day[ ]light", "daylight").len(), 1);
        assert_eq!(matches("day[ ]light", "day light").len(), 1);
    }

    #[test]
    fn a_template_may_be_alternatives_at_its_top_level() {
        assert_eq!(
            matches("in the {area}|{area} lights", "kitchen lights").len(),
            1
        );
        assert_eq!(
            matches("in the {area}|{area} lights", "in the kitchen").len(),
            1
        );
    }

    #[test]
    fn permutations_take_every_order() {
        let t = "<turn> (on;[<the>] {area} <light>)";
        assert_eq!(matches(t, "turn on the kitchen lights").len(), 1);
        assert_eq!(matches(t, "turn the kitchen lights on").len(), 1);
        assert!(matches(t, "turn the kitchen on lights").is_empty());
    }

    #[test]
    fn ranges_read_digits_and_words() {
        let t = "set [<the>] {area} <light> to {brightness}[%| percent]";
        for said in [
            "set the kitchen lights to 50%",
            "set the kitchen lights to fifty percent",
            "set kitchen light to 50 percent",
        ] {
            let got = matches(t, said);
            assert_eq!(got.len(), 1, "{said}");
            assert_eq!(got[0]["brightness"], json!(50), "{said}");
        }
        assert!(matches(t, "set the kitchen lights to 150%").is_empty());
    }

    #[test]
    fn wildcards_end_where_the_rest_fits() {
        let got = matches(
            "add {item} to [<the>] shopping list",
            "add oat milk and eggs to my shopping list",
        );
        assert_eq!(
            got,
            vec![BTreeMap::from([(
                "item".into(),
                json!("oat milk and eggs")
            )])]
        );
        assert!(matches("add {item} to the list", "add to the list").is_empty());
    }

    #[test]
    fn bad_templates_name_the_problem() {
        assert!(
            parse("turn (on|off")
                .unwrap_err()
                .problem
                .contains("never closed")
        );
        assert!(
            parse("turn on]")
                .unwrap_err()
                .problem
                .contains("without its opening")
        );
        assert!(parse("{area").unwrap_err().problem.contains("never closed"));
        assert!(parse("{}").is_err());
    }

    #[test]
    fn required_words_skip_templates_that_cannot_match() {
        let rules = HashMap::from([("turn".to_string(), parse("(turn|switch)").unwrap())]);
        let req = required(&parse("<turn> on [the] {area} lights").unwrap(), &rules, 0);
        assert_eq!(
            req,
            vec![
                vec!["turn".to_string(), "switch".into()],
                vec!["on".into()],
                vec!["lights".into()]
            ]
        );
    }
}
