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

mod sides;
mod slots;

pub use sides::opposed;

use sides::{Sides, direction_sides, side_words, sides};
use slots::{align, is_duration, marked_slot, normalize_marked, unmark};

use super::embed::{EmbedError, Embedder, cosine};
use super::mentions::{generic, mentions};
use super::names::TimerNames;
use super::{Context, Home, Lang, Understood};
use crate::config::{ExampleConfig, GenericWords, SemanticConfig};

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
    /// How many of each group's examples say each of those words without
    /// its opposite (`Semantic::group_opposed`).
    group_opposites: Vec<BTreeMap<String, usize>>,
    state_opposites: Vec<[String; 2]>,
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
    /// The words entities are said as before a sentence is embedded.
    generic: GenericWords,
}

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
        generic_words: GenericWords,
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
                    embedded: generic(
                        home,
                        lang,
                        &generic_words,
                        &unmark(&text, &generic_words.thing),
                    ),
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
            group_opposites: Vec::new(),
            state_opposites: Vec::new(),
            states: BTreeMap::new(),
            timer_names: TimerNames::default(),
            directions: Vec::new(),
            group_sides: Vec::new(),
            all_words: Vec::new(),
            points_back: Vec::new(),
            indefinites: Vec::new(),
            generic: generic_words,
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
        let query = self
            .embedder
            .embed_one(&generic(home, self.lang, &self.generic, text))?;
        let said = sides(&self.opposites, text);
        let heading = direction_sides(&self.directions, text);
        let alone = side_words(&self.opposites, &said);
        let away: Vec<bool> = (0..self.groups.len())
            .map(|g| self.group_opposed(&alone, g))
            .collect();
        let mut best: BTreeMap<usize, (f32, usize)> = BTreeMap::new();
        for (i, v) in vectors.iter().enumerate() {
            let group = self.examples[i].group;
            if self.opposed(&said, i)
                || (away[group] && !self.shares_a_side(&said, i))
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
            let away = away[e.group] && !self.shares_a_side(&said, i);
            if self.opposed(&said, i) || away || self.turned_away(&heading, e.group) {
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
            let with = format!(" {text} ").replacen(
                &format!(" {value} "),
                &format!(" {} ", self.generic.thing),
                1,
            );
            masked.push((generic(home, self.lang, &self.generic, with.trim()), i));
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
}

#[cfg(test)]
mod tests;
