//! The semantic layer: what no template foresaw ("can I get some light in
//! the kitchen", "lock up the front door"), understood by the examples it
//! is nearest to in meaning. Each configured group of examples is one
//! meaning (an intent with fixed slots, or `-`: talk that is no request);
//! the sentence and every example are embedded (`embed.rs`), and the
//! nearest group decides if it is near enough and clearly nearer than any
//! other meaning. The slots that vary are read from what was said: the
//! home's rooms and devices, numbers, durations, and a free-text slot an
//! example marks (`we're out of {item}`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::embed::{EmbedError, Embedder, cosine};
use super::names::TimerNames;
use super::numbers::{numbers_in, parse_duration};
use super::{Context, Home, Lang, Slot, Understood, normalize};
use crate::config::{ExampleConfig, SemanticConfig};

/// A free-text slot an example marks; embedded as this word.
const FILLER: &str = "something";

struct Group {
    intent: String,
    slots: BTreeMap<String, String>,
    find: Vec<String>,
    needs_area: bool,
    question: bool,
}

struct Example {
    group: usize,
    /// Normalised, with `{slot}` marks kept (for reading free text).
    text: String,
    /// What is embedded: marks filled, rooms made generic.
    embedded: String,
}

/// The examples of every meaning, embedded on first use.
pub struct Semantic {
    embedder: Arc<Embedder>,
    pub config: SemanticConfig,
    lang: Lang,
    groups: Vec<Group>,
    examples: Vec<Example>,
    /// Shared so a background thread can fill it (`warmer`).
    vectors: Arc<OnceLock<Result<Vec<Vec<f32>>, String>>>,
    /// Words of opposite meaning: an example saying one is not near a
    /// sentence saying the other.
    opposites: Vec<[String; 2]>,
    /// Which of those words each example says, read once (comparing words
    /// for every example at every sentence took a third of the meaning
    /// layer's time once the encoder was fast).
    example_sides: Vec<Vec<Sides>>,
    /// The words that say each state of a kind of device (`state_words`):
    /// domain, then the state's value, then its phrases, longest first.
    states: BTreeMap<String, Vec<(String, String)>>,
    /// How a timer's name is said, for the slot `timer` an example finds
    /// (read as the intent's `name`).
    timer_names: TimerNames,
    /// The sides of each pair of `directions` each group's examples say
    /// (`Semantic::with_directions`).
    directions: Vec<[Vec<String>; 2]>,
    group_sides: Vec<Vec<Sides>>,
    /// Words that say every room or thing at once ("all", "everywhere").
    all_words: Vec<String>,
    /// Words that name no thing of their own: alone ("it", "that"), or
    /// first ("anything from the shop"). Never a free slot's value.
    points_back: Vec<String>,
    indefinites: Vec<String>,
}

/// Which words of each pair of opposites a text says.
type Sides = (bool, bool);

/// The nearest example of one meaning.
#[derive(Clone, Debug, PartialEq)]
pub struct Near {
    pub intent: String,
    pub slots: BTreeMap<String, String>,
    pub example: String,
    pub score: f64,
    /// Which group and example (for reading this meaning's slots later).
    group: usize,
    example_at: usize,
}

/// What the semantic layer found: the nearest meanings, best first (one
/// entry per meaning), and, when the best is a request whose slots could
/// be read, what it understood.
#[derive(Clone, Debug)]
pub struct Found {
    pub nearest: Vec<Near>,
    pub understood: Option<Understood>,
}

impl Found {
    /// The trace's view: the nearest few with their similarity.
    pub fn nearest_read(&self, n: usize) -> Vec<super::reading::Nearest> {
        self.nearest
            .iter()
            .take(n)
            .map(|m| super::reading::Nearest {
                intent: m.intent.clone(),
                slots: m.slots.clone(),
                example: m.example.clone(),
                similarity: super::reading::round3(m.score),
            })
            .collect()
    }
}

impl Semantic {
    pub fn new(
        embedder: Arc<Embedder>,
        config: SemanticConfig,
        lang: Lang,
        groups: &[ExampleConfig],
        home: &Home,
    ) -> Self {
        let mut g = Vec::new();
        let mut examples = Vec::new();
        for (i, group) in groups.iter().enumerate() {
            g.push(Group {
                intent: group.intent.clone(),
                slots: group.slots.clone(),
                find: group.find.clone(),
                needs_area: group.needs_area,
                question: group.question,
            });
            for e in &group.examples {
                let text = normalize_marked(e);
                examples.push(Example {
                    group: i,
                    embedded: generic(home, lang, &unmark(&text, FILLER)),
                    text,
                });
            }
        }
        Self {
            embedder,
            config,
            lang,
            groups: g,
            examples,
            vectors: Arc::new(OnceLock::new()),
            opposites: Vec::new(),
            example_sides: Vec::new(),
            states: BTreeMap::new(),
            timer_names: TimerNames::default(),
            directions: Vec::new(),
            group_sides: Vec::new(),
            all_words: Vec::new(),
            points_back: Vec::new(),
            indefinites: Vec::new(),
        }
    }

    /// Words that say every room at once (normalised): a meaning that
    /// fixes every room, near a sentence said in a room that says none of
    /// them ("kill the lights" in the kitchen), is that room's.
    pub fn with_all_words(mut self, words: Vec<String>) -> Self {
        self.all_words = words;
        self
    }

    /// Words that name no thing of their own (normalised): alone
    /// (`points_back`: "it", "that") or first (`indefinites`: "anything
    /// from the shop"). An example whose free slot they would fill is not
    /// the meaning ("do we need anything" is not "we need {item}").
    pub fn with_no_things(mut self, points_back: Vec<String>, indefinites: Vec<String>) -> Self {
        self.points_back = points_back;
        self.indefinites = indefinites;
        self
    }

    /// Whether a free slot's words name no thing (`with_no_things`).
    fn names_nothing(&self, value: &str) -> bool {
        let first = value.split(' ').next().unwrap_or_default();
        self.points_back.iter().any(|w| w == value) || self.indefinites.iter().any(|w| w == first)
    }

    /// How the language names a timer, for the slot `timer`.
    pub fn with_timer_names(mut self, names: TimerNames) -> Self {
        self.timer_names = names;
        self
    }

    /// Words that say which way a change goes, as two sides (normalised):
    /// a group whose examples say only one side is never the meaning of a
    /// sentence that says only the other.
    pub fn with_directions(mut self, directions: Vec<[Vec<String>; 2]>) -> Self {
        let says = |text: &str, side: &[String]| {
            let padded = format!(" {text} ");
            side.iter().any(|w| padded.contains(&format!(" {w} ")))
        };
        self.group_sides = (0..self.groups.len())
            .map(|g| {
                let texts: Vec<&str> = self
                    .examples
                    .iter()
                    .filter(|e| e.group == g)
                    .map(|e| e.text.as_str())
                    .collect();
                directions
                    .iter()
                    .map(|[a, b]| {
                        (
                            texts.iter().any(|t| says(t, a)),
                            texts.iter().any(|t| says(t, b)),
                        )
                    })
                    .collect()
            })
            .collect();
        self.directions = directions;
        self
    }

    /// Whether the sentence's `said` sides of the directions cross the
    /// group's (see `with_directions`).
    fn turned_away(&self, said: &[Sides], group: usize) -> bool {
        self.group_sides
            .get(group)
            .is_some_and(|g| crossed(said, g))
    }

    /// The phrases that say each state of each kind of device ("locked
    /// up" is `locked`), for the slot `state` an example finds.
    pub fn with_states(mut self, words: &BTreeMap<String, BTreeMap<String, Vec<String>>>) -> Self {
        self.states = words
            .iter()
            .map(|(domain, states)| {
                let mut said: Vec<(String, String)> = states
                    .iter()
                    .flat_map(|(value, phrases)| {
                        phrases.iter().map(move |p| (normalize(p), value.clone()))
                    })
                    .collect();
                said.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
                (domain.clone(), said)
            })
            .collect();
        self
    }

    /// The state of a `domain` device `text` says, by its longest phrase.
    fn state_said(&self, domain: Option<&str>, text: &str) -> Option<Slot> {
        let padded = super::padded_words(text);
        let (phrase, value) = self
            .states
            .get(domain?)?
            .iter()
            .find(|(p, _)| padded.contains(&format!(" {p} ")))?;
        Some(Slot {
            value: json!(value),
            said: phrase.clone(),
            context: None,
            wildcard_span: None,
        })
    }

    /// Pairs of words of opposite meaning (normalised), either way round.
    pub fn with_opposites(mut self, pairs: impl IntoIterator<Item = [String; 2]>) -> Self {
        self.opposites = pairs
            .into_iter()
            .filter(|[a, b]| !a.is_empty() && !b.is_empty() && a != b)
            .collect();
        self.example_sides = self
            .examples
            .iter()
            .map(|e| sides(&self.opposites, &e.text))
            .collect();
        self
    }

    /// Whether one says a word of a pair of opposites and the other its
    /// opposite (and not the word itself): "make the bedroom darker" and
    /// "make the office brighter", "take bread off the list" and "put
    /// {item} on the list". Embeddings weigh such a word like any other.
    /// `said` is `sides` of the sentence.
    fn opposed(&self, said: &[Sides], example: usize) -> bool {
        self.example_sides
            .get(example)
            .is_some_and(|e| crossed(said, e))
    }

    pub fn origin(&self) -> &str {
        &self.embedder.origin
    }

    pub fn example_count(&self) -> usize {
        self.examples.len()
    }

    /// Embeds the examples now rather than at the first sentence that needs them.
    pub fn warm(&self) -> Result<(), EmbedError> {
        self.vectors()?;
        // And the weights, which the vectors read from the cache did not need.
        self.embedder.embed_one("hello").map(|_| ())
    }

    /// The same, as work for another thread (`caal serve` starts answering
    /// while the examples are embedded; a sentence that needs them waits).
    pub fn warmer(&self) -> impl FnOnce() + Send + 'static {
        let (vectors, embedder, texts) = (
            self.vectors.clone(),
            self.embedder.clone(),
            self.example_texts(),
        );
        move || {
            vectors.get_or_init(|| embedder.embed_fixed(&texts).map_err(|e| e.to_string()));
            if let Err(e) = embedder.embed_one("hello") {
                tracing::warn!("semantic layer: {e}");
            }
        }
    }

    fn example_texts(&self) -> Vec<String> {
        self.examples.iter().map(|e| e.embedded.clone()).collect()
    }

    fn vectors(&self) -> Result<&Vec<Vec<f32>>, EmbedError> {
        self.vectors
            .get_or_init(|| {
                self.embedder
                    .embed_fixed(&self.example_texts())
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| EmbedError::Run(e.clone()))
    }

    /// The meanings nearest to `text` (normalised), and what the best
    /// understood, its slots read from what was said.
    pub fn understand(
        &self,
        text: &str,
        home: &Home,
        context: &Context,
        asks: bool,
    ) -> Result<Found, EmbedError> {
        let vectors = self.vectors()?;
        let query = self.embedder.embed_one(&generic(home, self.lang, text))?;
        let said = sides(&self.opposites, text);
        let heading = direction_sides(&self.directions, text);
        let mut best: BTreeMap<usize, (f32, usize)> = BTreeMap::new();
        for (i, v) in vectors.iter().enumerate() {
            let group = self.examples[i].group;
            if self.opposed(&said, i)
                || self.turned_away(&heading, group)
                || (self.groups[group].question && !asks)
            {
                continue;
            }
            let score = cosine(&query, v);
            let entry = best.entry(group).or_insert((f32::MIN, i));
            if score > entry.0 {
                *entry = (score, i);
            }
        }
        // A free-text slot's words ("olive oil") pull the sentence away from
        // its example ("we're out of {item}"): where an example's frame is
        // said, the sentence is also compared with those words masked.
        let mut masked: Vec<(String, usize)> = Vec::new();
        for (i, e) in self.examples.iter().enumerate() {
            let Some(slot) = marked_slot(&e.text) else {
                continue;
            };
            if self.opposed(&said, i) || self.turned_away(&heading, e.group) {
                continue;
            }
            // Words that name no thing ("do we need anything") are not
            // masked as one: the meaning stays near (a model may be offered
            // its command) but is never read with them.
            let Some(value) = align(text, &e.text, slot).filter(|v| !self.names_nothing(v)) else {
                continue;
            };
            // A room or device is no shopping item ("put the porch light on"),
            // nor is a length of time ("add 2 minutes").
            if !mentions(home, &value, None).is_empty() || is_duration(self.lang, &value) {
                continue;
            }
            let with =
                format!(" {text} ").replacen(&format!(" {value} "), &format!(" {FILLER} "), 1);
            masked.push((generic(home, self.lang, with.trim()), i));
        }
        if !masked.is_empty() {
            let mut unique: Vec<&str> = masked.iter().map(|m| m.0.as_str()).collect();
            unique.sort_unstable();
            unique.dedup();
            let embedded = self.embedder.embed(&unique)?;
            for (with, i) in &masked {
                let at = unique.binary_search(&with.as_str()).unwrap_or(0);
                let score = cosine(&embedded[at], &vectors[*i]);
                let entry = best
                    .entry(self.examples[*i].group)
                    .or_insert((f32::MIN, *i));
                if score > entry.0 {
                    *entry = (score, *i);
                }
            }
        }
        let mut ranked: Vec<(usize, f32, usize)> =
            best.into_iter().map(|(g, (s, e))| (g, s, e)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let nearest: Vec<Near> = ranked
            .iter()
            .map(|&(g, s, e)| Near {
                intent: self.groups[g].intent.clone(),
                slots: self.groups[g].slots.clone(),
                example: unmark(&self.examples[e].text, "…"),
                score: f64::from(s),
                group: g,
                example_at: e,
            })
            .collect();
        let understood = ranked.first().and_then(|&(g, s, e)| {
            let group = &self.groups[g];
            (group.intent != "-")
                .then(|| self.read(group, g, e, text, home, context, f64::from(s)))
                .flatten()
        });
        Ok(Found {
            nearest,
            understood,
        })
    }

    /// One of the nearest meanings (not only the best) with its slots read
    /// from `text`: what the model layer chooses among. None for talk that
    /// is no request, or when a slot it needs is not there.
    pub fn reading(
        &self,
        near: &Near,
        text: &str,
        home: &Home,
        context: &Context,
    ) -> Option<Understood> {
        let group = self.groups.get(near.group)?;
        (group.intent != "-")
            .then(|| {
                self.read(
                    group,
                    near.group,
                    near.example_at,
                    text,
                    home,
                    context,
                    near.score,
                )
            })
            .flatten()
    }

    /// The group's meaning with its varying slots read from `text`; none
    /// when one it needs is not there.
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        group: &Group,
        g: usize,
        example: usize,
        text: &str,
        home: &Home,
        context: &Context,
        score: f64,
    ) -> Option<Understood> {
        let mut slots: BTreeMap<String, Slot> = group
            .slots
            .iter()
            .map(|(k, v)| (k.clone(), Slot::taken(json!(v), "")))
            .collect();
        let domain = group.slots.get("domain").map(String::as_str);
        let mentions = mentions(home, text, domain);
        // A number said beats a meaning's fixed one ("bring the office
        // lights down to 30" is near "dim the office lights by half").
        let readable = ["brightness", "temperature", "seconds"];
        let said_over_fixed = group
            .slots
            .keys()
            .filter(|k| readable.contains(&k.as_str()) && !group.find.contains(k));
        let wanted: Vec<(&String, bool)> = group
            .find
            .iter()
            .map(|w| (w, true))
            .chain(said_over_fixed.map(|w| (w, false)))
            .collect();
        for (want, needed) in wanted {
            let slot = self.slot_said(want, needed, (g, example), domain, text, &mentions);
            // A timer known by its length ("the 20 minute timer"), where
            // the meaning does not set one: its `start`, as a template reads it.
            if want == "timer"
                && !group.find.iter().any(|f| f == "seconds")
                && let Some(start) = self.timer_names.start_of(text)
            {
                slots.insert("start_seconds".into(), Slot::taken(json!(start), text));
            }
            match slot {
                // A timer's name is the intent's `name`, as a template reads it.
                Some(s) if want == "timer" => {
                    slots.insert("name".into(), s);
                }
                Some(s) => {
                    slots.insert(want.clone(), s);
                }
                // Rooms, devices, states and names are optional (the
                // mapping decides); the rest are needed.
                None if !needed || matches!(want.as_str(), "area" | "name" | "state" | "timer") => {
                }
                None => return None,
            }
        }
        self.speakers_area(group, text, context, &mut slots);
        let needs_area =
            group.needs_area && !slots.contains_key("area") && !slots.contains_key("name");
        Some(Understood {
            intent: group.intent.clone(),
            slots,
            template: unmark(&self.examples[example].text, "…"),
            source: "semantic",
            confidence: score,
            needs_area,
        })
    }

    /// The slot `want` as `text` says it, `needed` when the meaning finds
    /// it (not a fixed level a said one may beat); `at` is the group and its
    /// nearest example, whose marked words show where a free slot sits.
    fn slot_said(
        &self,
        want: &str,
        needed: bool,
        (g, example): (usize, usize),
        domain: Option<&str>,
        text: &str,
        mentions: &[Mention],
    ) -> Option<Slot> {
        match want {
            "area" | "name" => mentions.iter().find(|m| m.slot == want).map(|m| Slot {
                context: m.context.clone(),
                ..Slot::taken(m.value.clone(), &m.said)
            }),
            // Over a fixed level, only a level said as one ("half" is the group's 50).
            "brightness" => percent(self.lang, text)
                .filter(|n| needed || *n >= 1.0)
                .map(|n| number_slot(n, text)),
            "temperature" => first_number(self.lang, text).map(|n| number_slot(n, text)),
            "state" => self.state_said(domain, text),
            "timer" => self
                .timer_names
                .find(text)
                .map(|name| Slot::taken(json!(name), &name)),
            "seconds" => longest_duration(self.lang, text).map(|s| Slot::taken(json!(s), text)),
            free => {
                let value = self
                    .marked_examples(g, example, free)
                    .find_map(|e| align(text, e, free))
                    .filter(|v| !is_duration(self.lang, v) && !self.names_nothing(v))?;
                Some(Slot::taken(json!(value), &value))
            }
        }
    }

    /// The room the client said it is in, put in `slots`: for a meaning that
    /// finds a room the sentence did not name, and for one that fixes every
    /// room, near a sentence that says none of `all_words` ("kill the
    /// lights" in the kitchen).
    fn speakers_area(
        &self,
        group: &Group,
        text: &str,
        context: &Context,
        slots: &mut BTreeMap<String, Slot>,
    ) {
        let padded = format!(" {text} ");
        let says_all = self
            .all_words
            .iter()
            .any(|w| padded.contains(&format!(" {w} ")));
        let every_room_unsaid = !says_all
            && slots
                .get("area")
                .is_some_and(|s| s.said.is_empty() && s.value == json!("all"));
        let room_unsaid = !slots.contains_key("area")
            && group.find.iter().any(|f| f == "area")
            && !slots.contains_key("name");
        if let Some(area) = &context.area
            && (every_room_unsaid || room_unsaid)
        {
            slots.insert("area".into(), Slot::taken(json!(area), ""));
        }
    }

    /// The group's examples that mark `slot`, the nearest first.
    fn marked_examples<'a>(
        &'a self,
        g: usize,
        nearest: usize,
        slot: &'a str,
    ) -> impl Iterator<Item = &'a str> + 'a {
        let mark = format!("{{{slot}}}");
        std::iter::once(nearest)
            .chain((0..self.examples.len()).filter(move |&i| i != nearest))
            .filter(move |&i| self.examples[i].group == g)
            .map(|i| self.examples[i].text.as_str())
            .filter(move |t| t.contains(&mark))
    }
}

/// Which words of each pair `text` says.
fn sides(pairs: &[[String; 2]], text: &str) -> Vec<Sides> {
    // A side may be a phrase ("a timer" against "the timer").
    let padded = format!(" {text} ");
    let has = |w: &str| padded.contains(&format!(" {w} "));
    pairs.iter().map(|[a, b]| (has(a), has(b))).collect()
}

/// Which side of each pair of directions `text` says.
fn direction_sides(directions: &[[Vec<String>; 2]], text: &str) -> Vec<Sides> {
    let padded = format!(" {text} ");
    let has = |side: &[String]| side.iter().any(|w| padded.contains(&format!(" {w} ")));
    directions.iter().map(|[a, b]| (has(a), has(b))).collect()
}

/// Whether `a` says a word of a pair of `pairs` (normalised) and `b` only
/// its opposite, or the other way round: "turn on the lights" and "turn
/// off the lights" (see `Semantic::opposed`).
pub fn opposed(pairs: &[[String; 2]], a: &str, b: &str) -> bool {
    crossed(&sides(pairs, a), &sides(pairs, b))
}

/// Whether, for some pair, one text says only one word and the other only
/// the other.
fn crossed(text: &[Sides], example: &[Sides]) -> bool {
    text.iter().zip(example).any(|(&t, &e)| {
        (t == (true, false) && e == (false, true)) || (t == (false, true) && e == (true, false))
    })
}

/// The slot an example marks, if any (`{item}`: "item").
fn marked_slot(example: &str) -> Option<&str> {
    let open = example.find('{')?;
    let close = example[open..].find('}')? + open;
    Some(&example[open + 1..close])
}

/// An example normalised with its `{slot}` marks kept.
fn normalize_marked(example: &str) -> String {
    // Normalise the words between marks, keep the marks.
    let mut text = String::new();
    let mut rest = example;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| c + open) else {
            break;
        };
        text.push_str(&normalize(&rest[..open]));
        text.push(' ');
        text.push_str(&rest[open..=close].to_lowercase());
        text.push(' ');
        rest = &rest[close + 1..];
    }
    text.push_str(&normalize(rest));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An example with its marks replaced by `with`.
fn unmark(example: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = example;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| c + open) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(with);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The words of `text` where `example` has `{slot}`: after the last place
/// `text` says the word before the mark, up to the word after it ("we're
/// all out of oat milk" by "we're out of {item}": "oat milk").
/// Whether free text read for a slot is a length of time ("2 minutes",
/// "an hour": `align` has taken the article off): no thing to buy.
fn is_duration(lang: Lang, value: &str) -> bool {
    ["", "a ", "an "]
        .iter()
        .any(|a| parse_duration(lang, &format!("{a}{value}")).is_some())
}

fn align(text: &str, example: &str, slot: &str) -> Option<String> {
    let mark = format!("{{{slot}}}");
    let (before, after) = example.split_once(&mark)?;
    let words: Vec<&str> = text.split(' ').collect();
    let start = match before.split_whitespace().last() {
        None => 0,
        Some(b) => words.iter().rposition(|w| *w == b)? + 1,
    };
    // Some word of the frame around the mark must be said: "{item} needs
    // to go on the grocery list" frames nothing in "everything off, we're
    // going out". After a word before it ("pick up {item} next time"), the
    // word after may go unsaid ("pick up bread").
    let after_at = after.split_whitespace().next().map(|a| {
        words[start..]
            .iter()
            .position(|w| *w == a)
            .map(|p| start + p)
    });
    let end = match after_at {
        None => words.len(),
        Some(Some(at)) => at,
        Some(None) if before.trim().is_empty() => return None,
        Some(None) => words.len(),
    };
    let mut taken: &[&str] = words.get(start..end)?;
    while let Some((first, rest)) = taken.split_first()
        && matches!(*first, "some" | "more" | "the" | "a" | "an" | "any" | "of")
    {
        taken = rest;
    }
    // "add it to the list" names nothing: what "it" is was said elsewhere;
    // nor does a word that only joins others ("put in on the list", as
    // speech to text may hear "put it on the list").
    let pronoun = matches!(
        taken,
        [w] if matches!(*w, "it" | "them" | "that" | "this" | "these" | "those" | "one" | "something"
            | "in" | "on" | "at" | "for" | "with" | "off" | "up" | "out")
    );
    // "We need to talk": what follows "to" is something to do, no thing.
    let to_do = taken.first() == Some(&"to");
    // The list is no thing on it ("work on the shopping list", as "what's
    // on the shopping list" may be heard).
    let the_list = taken.last() == Some(&"list");
    (!taken.is_empty() && taken.len() <= 6 && !pronoun && !to_do && !the_list)
        .then(|| taken.join(" "))
}

fn number_slot(n: f64, text: &str) -> Slot {
    let value = if n.fract() == 0.0 {
        json!(n as i64)
    } else {
        json!(n)
    };
    Slot::taken(value, text)
}

fn first_number(lang: Lang, text: &str) -> Option<f64> {
    numbers_in(lang, text).first().map(|n| n.0)
}

/// A brightness: a number said with "percent" or "%" if there is one, else
/// the only number from 0 to 100.
fn percent(lang: Lang, text: &str) -> Option<f64> {
    let found = numbers_in(lang, text);
    found
        .iter()
        .find(|&&(_, _, end)| {
            let rest = text[end..].trim_start();
            rest.starts_with('%') || rest.starts_with("percent") || rest.starts_with("prozent")
        })
        .or(match found.as_slice() {
            // "The bedroom one" picks a lamp: "one" alone is no level.
            [one] if &text[one.1..one.2] != "one" => Some(one),
            _ => None,
        })
        .map(|n| n.0)
        .filter(|n| (0.0..=100.0).contains(n))
}

/// The longest run of words that is a duration ("for an hour and a half").
fn longest_duration(lang: Lang, text: &str) -> Option<u64> {
    let words: Vec<&str> = text.split(' ').collect();
    let mut best: Option<(usize, u64)> = None;
    for i in 0..words.len() {
        for j in (i + 1..=words.len().min(i + 8)).rev() {
            if best.is_some_and(|(len, _)| len >= j - i) {
                break;
            }
            if let Some(s) = parse_duration(lang, &words[i..j].join(" "))
                && s > 0
            {
                best = Some((j - i, s));
                break;
            }
        }
    }
    best.map(|b| b.1)
}

/// `text` with the home's rooms said as "room" and its lights and locks
/// as "light" and "door": the meaning is in the words around them ("put
/// the office light on" is nearer "turn the room light on" than "shut the
/// office light" once the names no longer weigh). A room that also names
/// a door ("garage") is kept, and so are other devices: their name is
/// what they do.
fn generic(home: &Home, lang: Lang, text: &str) -> String {
    let mut out = String::new();
    let mut at = 0;
    for m in mentions(home, text, None) {
        let kind = m
            .context
            .as_ref()
            .and_then(|c| c.get("domain"))
            .map(String::as_str);
        let word = match (m.slot, kind) {
            ("area", _)
                if !home.devices.iter().any(|d| {
                    d.domain != "light" && d.name.split(' ').next() == Some(m.said.as_str())
                }) =>
            {
                "room"
            }
            ("name", Some("light")) => "light",
            ("name", Some("lock")) => "door",
            _ => continue,
        };
        out.push_str(&text[at..m.start]);
        out.push_str(word);
        at = m.end;
    }
    out.push_str(&text[at..]);
    // "40%" said as the examples say it ("40 percent"): the two are
    // different tokens to the encoder, and "dim the bedroom, like 40%"
    // was as near "dim the lounge to half" as "dim the hallway to 25 percent".
    if out.contains('%') {
        out = out
            .replace('%', &format!(" {} ", lang.percent()))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
    }
    out
}

/// A room or device said in `text`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mention {
    pub slot: &'static str,
    pub value: Value,
    pub said: String,
    pub context: Option<BTreeMap<String, String>>,
    start: usize,
    end: usize,
}

impl Mention {
    /// Where it is said in the text it was found in (bytes, start and end).
    pub fn span(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

/// The home's rooms and devices said in `text`, longest first where they
/// overlap ("the bedroom lamp" is the lamp, not the bedroom); devices of
/// another kind than `domain` are not taken.
pub fn mentions(home: &Home, text: &str, domain: Option<&str>) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    // "dim the bedroom, like 40 percent": a name ends at a clause mark too
    // (each a byte, as the space for it, so offsets hold).
    let padded = format!(" {} ", text.replace([',', ';', ':', '!', '?', '.'], " "));
    // A name's value and context are made only when the name is said (most
    // are not: this runs for every example when the layer is built).
    let mut add = |slot: &'static str,
                   said: &str,
                   value: &dyn Fn() -> Value,
                   context: &dyn Fn() -> BTreeMap<String, String>| {
        let needle = format!(" {said} ");
        let mut from = 0;
        while let Some(at) = padded[from..].find(&needle).map(|i| i + from) {
            found.push(Mention {
                slot,
                value: value(),
                said: said.to_owned(),
                context: Some(context()),
                start: at,
                end: at + said.len(),
            });
            from = at + 1;
        }
    };
    for a in &home.areas {
        for said in std::iter::once(&a.name).chain(&a.aliases) {
            add("area", said, &|| json!(a.name), &|| {
                BTreeMap::from([("area".to_string(), a.name.clone())])
            });
        }
    }
    let of_kind: Vec<_> = home
        .devices
        .iter()
        .filter(|d| domain.is_none_or(|k| d.domain == k))
        .collect();
    for d in &of_kind {
        let context = || {
            let mut context = BTreeMap::from([("domain".to_string(), d.domain.clone())]);
            if let Some(area) = &d.area {
                context.insert("area".into(), area.clone());
            }
            context
        };
        for said in std::iter::once(&d.name).chain(&d.aliases) {
            add("name", said, &|| json!(d.id), &context);
        }
    }
    // A device's last word ("lamp", "door") names the one there is, or all of them (to ask).
    let mut by_last: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for d in &of_kind {
        if let Some((_, last)) = d.name.rsplit_once(' ')
            && !matches!(last, "light" | "lights")
        {
            by_last.entry(last).or_default().push(d.id.as_str());
        }
    }
    for (word, ids) in by_last {
        let value = || match ids.as_slice() {
            [one] => json!(one),
            many => json!(many),
        };
        add("name", word, &value, &BTreeMap::new);
    }
    found.sort_by(|a, b| {
        (b.end - b.start)
            .cmp(&(a.end - a.start))
            .then(a.start.cmp(&b.start))
    });
    let mut kept: Vec<Mention> = Vec::new();
    for m in found {
        if kept.iter().all(|k| m.end <= k.start || m.start >= k.end) {
            kept.push(m);
        }
    }
    kept.sort_by_key(|m| m.start);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_text_is_read_where_the_example_marks_it() {
        let ex = normalize_marked("We're out of {item}");
        assert_eq!(ex, "we're out of {item}");
        assert_eq!(
            align("oh no we're all out of oat milk", &ex, "item").as_deref(),
            Some("oat milk")
        );
        let ex = normalize_marked("put {item} on the list");
        assert_eq!(
            align("could you put some eggs on the list", &ex, "item").as_deref(),
            Some("eggs")
        );
        // The word before the mark is not said: nothing is read.
        assert_eq!(align("we need eggs", &ex, "item"), None);
        assert!(is_duration(Lang::En, "hour") && is_duration(Lang::En, "2 minutes"));
        assert!(!is_duration(Lang::En, "dish soap"));
        assert_eq!(unmark(&ex, FILLER), "put something on the list");
        // A mark that opens the example: the word after it must be said,
        // or the whole sentence would be the item.
        let ex = normalize_marked("{item} needs to go on the grocery list");
        assert_eq!(align("everything off, we're going out", &ex, "item"), None);
        assert_eq!(
            align("milk needs to go on the list", &ex, "item").as_deref(),
            Some("milk")
        );
        // After the word before it, the word after may go unsaid.
        let ex = normalize_marked("pick up {item} next time, add it to the list");
        assert_eq!(
            align("pick up bread", &ex, "item").as_deref(),
            Some("bread")
        );
    }

    #[test]
    fn an_example_saying_the_opposite_word_is_not_near() {
        let pairs: Vec<[String; 2]> = [["brighter", "darker"], ["on", "off"], ["up", "down"]]
            .map(|[a, b]| [a.to_owned(), b.to_owned()])
            .to_vec();
        let opposed = |t: &str, e: &str| opposed(&pairs, t, e);
        assert!(opposed(
            "make the bedroom a bit darker",
            "make the office brighter"
        ));
        assert!(opposed("take bread off the list", "put {item} on the list"));
        assert!(opposed(
            "turn the lights down",
            "turn the lights up in the bedroom"
        ));
        // Either way round, and only whole words.
        assert!(opposed(
            "make the office brighter",
            "make the bedroom darker"
        ));
        assert!(!opposed(
            "make the office brighter",
            "the kitchen could be brighter"
        ));
        assert!(!opposed("turn on the lights", "switch the desk lamp on"));
        assert!(!opposed("put the heating up", "pick upstairs things"));
        // An example that says both is no opposite of either.
        assert!(!opposed(
            "turn off the garage light",
            "the garage light is still on turn it off"
        ));
    }

    #[test]
    fn rooms_lights_and_locks_are_made_generic_and_pronouns_are_no_items() {
        let config = crate::config::Config::defaults().unwrap();
        let home = Home::from_config(&config.home).unwrap();
        for (lang, said, embedded) in [
            (
                Lang::En,
                "put the spare room lights on",
                "put the room lights on",
            ),
            (
                Lang::En,
                "leave the porch light as it is",
                "leave the light as it is",
            ),
            (Lang::En, "lock the main door", "lock the door"),
            // "garage" also names a door: kept, or opening it would read as a room.
            (Lang::En, "open the garage", "open the garage"),
            (Lang::En, "set the heating to 20", "set the heating to 20"),
            // A percent sign said as the examples say it.
            (
                Lang::En,
                "make the bedroom dimmer, like 40%",
                "make the room dimmer, like 40 percent",
            ),
            (Lang::De, "licht auf 40 %", "licht auf 40 prozent"),
            // A room's name ends at a clause mark as at a space.
            (
                Lang::En,
                "dim the bedroom, maybe 40 percent",
                "dim the room, maybe 40 percent",
            ),
        ] {
            assert_eq!(generic(&home, lang, said), embedded, "{said}");
        }
        let said = "dim the kitchen, maybe 40 percent";
        let found = mentions(&home, said, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].slot, &said[found[0].start..found[0].end]),
            ("area", "kitchen")
        );
        let ex = normalize_marked("add {item} to the shopping list");
        assert_eq!(align("add it to the shopping list", &ex, "item"), None);
        assert_eq!(align("add in to the shopping list", &ex, "item"), None);
        let on = normalize_marked("work on {item}");
        assert_eq!(align("work on the shopping list", &on, "item"), None);
        assert_eq!(
            align("add dish soap to the shopping list", &ex, "item").as_deref(),
            Some("dish soap")
        );
        assert_eq!(marked_slot(&ex), Some("item"));
        assert_eq!(marked_slot("turn on the lights"), None);
    }

    #[test]
    fn numbers_and_durations_are_read_from_anywhere_in_the_sentence() {
        assert_eq!(
            percent(Lang::En, "bring the kitchen to 30 percent"),
            Some(30.0)
        );
        assert_eq!(
            percent(Lang::En, "set bedroom 2 to twenty five percent"),
            Some(25.0)
        );
        assert_eq!(percent(Lang::En, "about 300 watts"), None);
        assert_eq!(percent(Lang::En, "the bedroom one"), None);
        assert_eq!(percent(Lang::En, "the bedroom at one percent"), Some(1.0));
        assert_eq!(
            first_number(Lang::En, "i'd like it warmer 23 degrees"),
            Some(23.0)
        );
        assert_eq!(
            longest_duration(Lang::En, "count down an hour and a half for me"),
            Some(5400)
        );
        assert_eq!(longest_duration(Lang::En, "count down please"), None);
    }
}
