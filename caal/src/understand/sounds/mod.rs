//! What was heard compared by sound with every sentence the library can
//! say: the sentence templates (their alternatives, optional parts,
//! permutations, expansion rules and lists: the home's rooms and devices,
//! numbers, durations, times of day) compiled into graphs of phones, and a
//! transcript aligned with each by a weighted edit distance over phones
//! (`lexicon::substitution`, `lexicon::gap`). Speech to text mishears a
//! word as words that sound like it ("status" as "the sun", "one hour" as
//! "well hour", "brightness" as "write us"); read by sound, the sentence
//! nearest is the one that was said. A wildcard takes whole words as heard,
//! at a cost a word. The sentence so read is understood by the templates
//! again (the router's `by_sound`): this only finds the words.
//!
//! The search is dynamic programming over each sentence's graph (a DAG: a
//! template has no repetition) and the heard phones: a column of costs per
//! phone heard, the graph's nodes in topological order. No crate aligns a
//! sequence with a graph of alternatives; hand-written.

mod align;
mod build;

use std::collections::HashMap;

use align::{Output, Table};
use build::Builder;

use super::lexicon::{self, Lexicon, Phone, Said};
use super::template::{self, Expr, SlotList};

/// What a word of the sentence costs when its first sound is heard inside
/// a short heard word (three phones or fewer) whose sounds before it went
/// to the word before ("start at well hour" is "start a one hour", the "t"
/// heard too many, not "start a twelve hour", the "t" of "at" taken for
/// twelve's). After a sound heard too many it costs nothing; inside a
/// longer word neither, where whisper runs words together ("blamping the
/// lounge": lamp in the lounge).
const WORD_SPLIT: f32 = 1.0;
/// What a heard word a wildcard takes costs (a wildcard takes any words,
/// so a reading that spells them out is preferred when it sounds as near).
const WILD_WORD: f32 = 0.5;
/// A sentence whose graph grows past this many edges is left out (none of
/// the library's does; a guard against a list or rule that multiplies).
const MAX_EDGES: usize = 400_000;
/// Expansion rules nest this deep at most.
const MAX_DEPTH: u32 = 24;
/// The cheapest sentences aligned again to read their words and length.
const SHORTLIST: usize = 24;

/// How numbers, lengths of time and times of day are said, as templates
/// (English), for the lists the library reads by value rather than by word.
const SPOKEN_RULES: &[(&str, &str)] = &[
    ("digit", "(one|two|three|four|five|six|seven|eight|nine)"),
    (
        "teen",
        "(ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen)",
    ),
    (
        "tens",
        "(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)",
    ),
    ("below_hundred", "(zero|<digit>|<teen>|<tens> [<digit>])"),
    (
        "number",
        "(<below_hundred>|[(a|<digit>)] hundred [[and] <below_hundred>]) [point <digit>] [and a half]",
    ),
    ("unit", "(second|seconds|minute|minutes|hour|hours)"),
    (
        "duration",
        "(<number> <unit>|(a|an) (second|minute|hour)|half (a|an) (minute|hour)|(a|one) quarter [of] (an|a) hour|an hour and a half) [[and] (<number> <unit>|a half)]",
    ),
    (
        "time",
        "[at] (<number> [<below_hundred>] [(a m|p m|o'clock)]|noon|midnight|half past <number>|(quarter|<number>) (past|to) <number>) [(today|tomorrow|tonight|this (morning|afternoon|evening))]",
    ),
];

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A phone, and whether it is its word's first.
    Phone(Phone, bool),
    /// A word of the reading ends here (an index into `SoundGrammar::words`).
    Word(u32),
    Skip,
    /// Any heard words, one or more, taken as heard.
    Wild,
}

#[derive(Clone, Copy, Debug)]
struct Edge {
    to: u32,
    kind: Kind,
}

/// One sentence's sounds: nodes in topological order, edges by source.
struct Graph {
    /// Edges out of node `v` are `edges[first[v]..first[v + 1]]`.
    first: Vec<u32>,
    edges: Vec<Edge>,
    start: u32,
    end: u32,
    /// Fewest and most phones a path says (wildcards say none).
    min_len: u32,
    max_len: u32,
    wild: bool,
}

/// Where a sentence came from.
#[derive(Clone, Debug)]
pub struct SoundSource {
    pub intent: String,
    pub template: String,
}

/// Every sentence the library can say, by sound.
pub struct SoundGrammar {
    graphs: Vec<Graph>,
    sources: Vec<SoundSource>,
    words: Vec<Box<str>>,
    lexicon: std::sync::Arc<Lexicon>,
}

/// A sentence nearest by sound to what was heard.
#[derive(Clone, Debug, PartialEq)]
pub struct SoundMatch {
    /// The sentence's words as the alignment read them (wildcards' words as heard).
    pub reading: String,
    /// Cost over the aligned length, 0 (the same sounds) and up.
    pub distance: f32,
    pub intent: String,
    pub template: String,
    /// Heard words a wildcard took.
    pub wild_words: u32,
    /// The reading's words no heard sound went to (said by the reading
    /// alone: "out" in "turn the lights in our living room out").
    pub unheard: Vec<String>,
}

/// What a template's sounds are made from: its expansion rules and lists.
pub struct SoundScope<'a> {
    pub rules: &'a [&'a HashMap<String, Expr>],
    pub lists: &'a [&'a HashMap<String, SlotList>],
}

impl SoundGrammar {
    /// The graphs of `sentences` (intent, template as written, parsed), said
    /// with `lexicon`; a sentence too large to compile is left out.
    pub fn build<'s>(
        lexicon: std::sync::Arc<Lexicon>,
        scope: &SoundScope<'_>,
        sentences: impl Iterator<Item = (&'s str, &'s str, &'s Expr)>,
    ) -> Self {
        let spoken: HashMap<String, Expr> = SPOKEN_RULES
            .iter()
            .filter_map(|(name, body)| Some(((*name).to_owned(), template::parse(body).ok()?)))
            .collect();
        let mut grammar = Self {
            graphs: Vec::new(),
            sources: Vec::new(),
            words: Vec::new(),
            lexicon,
        };
        let mut word_ids: HashMap<String, u32> = HashMap::new();
        for (intent, text, expr) in sentences {
            let mut b = Builder {
                lexicon: &grammar.lexicon,
                scope,
                spoken: &spoken,
                words: &mut grammar.words,
                word_ids: &mut word_ids,
                edges: Vec::new(),
                nodes: 2,
                said: HashMap::new(),
            };
            if b.expr_into(expr, 0, 1, 0).is_err() {
                continue;
            }
            if let Some(graph) = b.finish(0, 1) {
                grammar.graphs.push(graph);
                grammar.sources.push(SoundSource {
                    intent: intent.to_owned(),
                    template: text.to_owned(),
                });
            }
        }
        grammar
    }

    pub fn len(&self) -> usize {
        self.graphs.len()
    }

    /// How far apart two words sound: the least weighted edit distance
    /// over phones between the ways each is said, over the longer one's
    /// phones (0 the same sounds, about 1 nothing alike): "rice" and
    /// "hall" are far, "lasagne" and "lasagna" near.
    pub fn word_distance(&self, a: &str, b: &str) -> f32 {
        let (said_a, said_b) = (self.lexicon.say_word(a), self.lexicon.say_word(b));
        (said_a.iter())
            .flat_map(|x| said_b.iter().map(move |y| phone_distance(x, y)))
            .fold(f32::INFINITY, f32::min)
    }

    pub fn is_empty(&self) -> bool {
        self.graphs.is_empty()
    }

    /// The sentences within `limit` of `prepared` (normalised, skip words
    /// removed) by sound, nearest first, at most `k` (one per reading).
    pub fn nearest(&self, prepared: &str, k: usize, limit: f32) -> Vec<SoundMatch> {
        let said = self.lexicon.say(prepared);
        if said.phones.is_empty() {
            return Vec::new();
        }
        let n = said.phones.len();
        // Within `limit`, an alignment costs at most this: every phone it
        // adds to its length costs at least half, so cost ≤ limit·(n + 2·cost).
        let most = limit * n as f32 / (1.0 - 2.0 * limit).max(0.1);
        let mut table = Table::default();
        let mut cheapest: Vec<(f32, usize)> = Vec::new();
        for (i, graph) in self.graphs.iter().enumerate() {
            // Each phone too many or too few costs at least half.
            let (short, long) = (graph.min_len as usize, graph.max_len as usize);
            let bound = if graph.wild {
                short.saturating_sub(n)
            } else {
                short.saturating_sub(n).max(n.saturating_sub(long))
            } as f32
                * 0.5;
            if bound > most {
                continue;
            }
            if let Some(cost) = table.cost(graph, &said, most) {
                cheapest.push((cost, i));
            }
        }
        cheapest.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut found: Vec<SoundMatch> = Vec::new();
        for &(_, i) in cheapest.iter().take(SHORTLIST) {
            let (graph, source) = (&self.graphs[i], &self.sources[i]);
            let Some(path) = table.align(graph, &said) else {
                continue;
            };
            let distance = path.cost / path.norm.max(1.0);
            if distance > limit {
                continue;
            }
            let reading = path
                .output
                .iter()
                .map(|o| match o {
                    Output::Word(w, _) => self.words[*w as usize].to_string(),
                    Output::Heard(a, b) => said.words[*a..*b].join(" "),
                })
                .collect::<Vec<_>>()
                .join(" ");
            let unheard = path
                .output
                .iter()
                .filter_map(|o| match o {
                    Output::Word(w, false) => Some(self.words[*w as usize].to_string()),
                    _ => None,
                })
                .collect();
            if let Some(same) = found.iter_mut().find(|f| f.reading == reading) {
                if distance < same.distance {
                    same.distance = distance;
                }
                continue;
            }
            found.push(SoundMatch {
                reading,
                distance,
                intent: source.intent.clone(),
                template: source.template.clone(),
                wild_words: path.wild_words,
                unheard,
            });
        }
        found.sort_by(|a, b| a.distance.total_cmp(&b.distance));
        found.truncate(k);
        found
    }
}

/// The sound layer as configured: the dictionary's place, read and the
/// sentences compiled the first time speech needs them (a process that
/// never hears anything never pays for it).
pub struct Sounds {
    path: std::path::PathBuf,
    pub config: crate::config::SoundsConfig,
    /// The dictionary, read the first time anything asks (`None`, said once
    /// in the log, when it cannot be).
    lexicon: std::sync::OnceLock<Option<std::sync::Arc<Lexicon>>>,
    grammar: std::sync::OnceLock<Option<SoundGrammar>>,
}

impl Sounds {
    /// The layer `config` asks for: none when it is off; an error naming
    /// the fix when the dictionary is not there (the router goes on without it).
    pub fn configured(
        config: &crate::config::SoundsConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, lexicon::LexiconError> {
        if config.lexicon.trim().is_empty() {
            return Ok(None);
        }
        let path = lexicon::lexicon_path(env, &config.lexicon);
        std::fs::metadata(&path).map_err(|source| lexicon::LexiconError::Missing {
            path: path.clone(),
            source,
        })?;
        Ok(Some(Self {
            path,
            config: config.clone(),
            lexicon: std::sync::OnceLock::new(),
            grammar: std::sync::OnceLock::new(),
        }))
    }

    /// The sentences by sound, compiled by `build` over the dictionary the
    /// first time; `None` (said once in the log) when the dictionary cannot be read.
    pub fn grammar(
        &self,
        build: impl FnOnce(std::sync::Arc<Lexicon>) -> SoundGrammar,
    ) -> Option<&SoundGrammar> {
        self.grammar
            .get_or_init(|| self.lexicon().map(build))
            .as_ref()
    }

    fn lexicon(&self) -> Option<std::sync::Arc<Lexicon>> {
        self.lexicon
            .get_or_init(|| match Lexicon::load(&self.path) {
                Ok(lexicon) => Some(std::sync::Arc::new(lexicon)),
                Err(e) => {
                    tracing::warn!("the sound layer is off: {e}");
                    None
                }
            })
            .clone()
    }

    /// Whether the dictionary has `word` (lower case; a possessive by its
    /// base): a typed word it has is a word, not a slip of another ("mess"
    /// is no mistyped "less"). `None` when the dictionary cannot be read.
    pub fn knows(&self, word: &str) -> Option<bool> {
        Some(self.lexicon()?.has(word))
    }
}

/// The weighted edit distance of two phone sequences over the longer's
/// length (`lexicon::substitution`, `lexicon::gap`). Hand-written: two
/// rows of a small table; the graph alignment is for sentences, not words.
fn phone_distance(a: &[Phone], b: &[Phone]) -> f32 {
    let longer = a.len().max(b.len());
    if longer == 0 {
        return 0.0;
    }
    let mut row: Vec<f32> = std::iter::once(0.0)
        .chain(b.iter().scan(0.0, |sum, &p| {
            *sum += lexicon::gap(p);
            Some(*sum)
        }))
        .collect();
    for &pa in a {
        let mut next = vec![row[0] + lexicon::gap(pa)];
        for (j, &pb) in b.iter().enumerate() {
            let cost = (row[j] + lexicon::substitution(pa, pb))
                .min(row[j + 1] + lexicon::gap(pa))
                .min(next[j] + lexicon::gap(pb));
            next.push(cost);
        }
        row = next;
    }
    row[b.len()] / longer as f32
}

#[cfg(test)]
mod tests;
