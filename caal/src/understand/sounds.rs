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

use std::collections::{HashMap, HashSet};

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
    lexicon: Lexicon,
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
        lexicon: Lexicon,
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
            grammar: std::sync::OnceLock::new(),
        }))
    }

    /// The sentences by sound, compiled by `build` over the dictionary the
    /// first time; `None` (said once in the log) when the dictionary cannot be read.
    pub fn grammar(&self, build: impl FnOnce(Lexicon) -> SoundGrammar) -> Option<&SoundGrammar> {
        self.grammar
            .get_or_init(|| match Lexicon::load(&self.path) {
                Ok(lexicon) => Some(build(lexicon)),
                Err(e) => {
                    tracing::warn!("the sound layer is off: {e}");
                    None
                }
            })
            .as_ref()
    }
}

/// Builds one sentence's graph.
struct Builder<'a> {
    lexicon: &'a Lexicon,
    scope: &'a SoundScope<'a>,
    spoken: &'a HashMap<String, Expr>,
    words: &'a mut Vec<Box<str>>,
    word_ids: &'a mut HashMap<String, u32>,
    edges: Vec<(u32, Edge)>,
    nodes: u32,
    /// Each word's ways to say it, looked up once.
    said: HashMap<String, Vec<Vec<Phone>>>,
}

/// A template as characters, before words are found in it.
#[derive(Clone, Copy)]
enum CharEdge {
    Char(char),
    Space,
    Skip,
    List(usize),
}

#[derive(Default)]
struct Chars<'e> {
    edges: Vec<(u32, u32, CharEdge)>,
    nodes: u32,
    lists: Vec<&'e str>,
}

impl<'e> Chars<'e> {
    fn node(&mut self) -> u32 {
        self.nodes += 1;
        self.nodes - 1
    }

    fn build(
        &mut self,
        expr: &'e Expr,
        from: u32,
        rules: &dyn Fn(&str) -> Option<&'e Expr>,
        depth: u32,
    ) -> Result<u32, ()> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        Ok(match expr {
            Expr::Text(t) => {
                let mut at = from;
                for c in t.chars() {
                    let next = self.node();
                    let kind = if c == ' ' {
                        CharEdge::Space
                    } else {
                        CharEdge::Char(c)
                    };
                    self.edges.push((at, next, kind));
                    at = next;
                }
                at
            }
            Expr::Seq(items) => {
                let mut at = from;
                for item in items {
                    at = self.build(item, at, rules, depth)?;
                }
                at
            }
            Expr::Alt(options) => {
                let mut ends = Vec::with_capacity(options.len());
                for option in options {
                    ends.push(self.build(option, from, rules, depth)?);
                }
                let join = self.node();
                for end in ends {
                    self.edges.push((end, join, CharEdge::Skip));
                }
                join
            }
            Expr::Rule(name) => match rules(name) {
                Some(body) => self.build(body, from, rules, depth + 1)?,
                // A rule no one defines matches nothing: a dead end.
                None => self.node(),
            },
            Expr::List { list, .. } => {
                let next = self.node();
                self.lists.push(list);
                self.edges
                    .push((from, next, CharEdge::List(self.lists.len() - 1)));
                next
            }
        })
    }
}

impl Builder<'_> {
    fn node(&mut self) -> u32 {
        self.nodes += 1;
        self.nodes - 1
    }

    fn edge(&mut self, from: u32, to: u32, kind: Kind) -> Result<(), ()> {
        if self.edges.len() >= MAX_EDGES {
            return Err(());
        }
        self.edges.push((from, Edge { to, kind }));
        Ok(())
    }

    /// `expr`'s sounds between nodes `from` and `to`: its characters, the
    /// words they spell (a word may span parts: "light[s]"), each word's
    /// ways to say it, and its lists' values.
    fn expr_into(&mut self, expr: &Expr, from: u32, to: u32, depth: u32) -> Result<(), ()> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        let mut chars = Chars {
            nodes: 1,
            ..Chars::default()
        };
        let scope = self.scope;
        let spoken = self.spoken;
        let rules = |name: &str| {
            scope
                .rules
                .iter()
                .find_map(|r| r.get(name))
                .or_else(|| spoken.get(name))
        };
        let end = chars.build(expr, 0, &rules, depth)?;
        let mut out: Vec<Vec<(u32, CharEdge)>> = vec![Vec::new(); chars.nodes as usize];
        for &(a, b, kind) in &chars.edges {
            out[a as usize].push((b, kind));
        }
        // Global nodes for the characters' nodes: the start and end given.
        let mut map: Vec<Option<u32>> = vec![None; chars.nodes as usize];
        map[0] = Some(from);
        map[end as usize] = Some(to);
        let mut global =
            |b: &mut Self, v: u32| -> u32 { *map[v as usize].get_or_insert_with(|| b.node()) };
        // Words start at the start and after every space and list.
        let mut starts: Vec<u32> = vec![0];
        for &(_, b, kind) in &chars.edges {
            if matches!(kind, CharEdge::Space | CharEdge::List(_)) {
                starts.push(b);
            }
        }
        starts.sort_unstable();
        starts.dedup();
        let mut spelled: HashSet<(u32, u32, String)> = HashSet::new();
        for &s in &starts {
            let mut stack: Vec<(u32, String)> = vec![(s, String::new())];
            let mut seen: HashSet<(u32, String)> = HashSet::new();
            while let Some((v, acc)) = stack.pop() {
                if !seen.insert((v, acc.clone())) {
                    continue;
                }
                if v == end || out[v as usize].is_empty() {
                    spelled.insert((s, v, acc.clone()));
                }
                for &(b, kind) in &out[v as usize] {
                    match kind {
                        CharEdge::Char(c) => {
                            let mut next = acc.clone();
                            next.push(c);
                            stack.push((b, next));
                        }
                        CharEdge::Skip => stack.push((b, acc.clone())),
                        CharEdge::Space | CharEdge::List(_) => {
                            spelled.insert((s, v, acc.clone()));
                        }
                    }
                }
            }
        }
        let mut spelled: Vec<(u32, u32, String)> = spelled.into_iter().collect();
        spelled.sort();
        for (s, v, word) in spelled {
            if s == v && word.is_empty() {
                continue;
            }
            let (a, b) = (global(self, s), global(self, v));
            if word.is_empty() {
                self.edge(a, b, Kind::Skip)?;
                continue;
            }
            self.word_into(&word, a, b)?;
        }
        for &(x, y, kind) in &chars.edges {
            match kind {
                CharEdge::Space => {
                    let (a, b) = (global(self, x), global(self, y));
                    self.edge(a, b, Kind::Skip)?;
                }
                CharEdge::List(i) => {
                    let (a, b) = (global(self, x), global(self, y));
                    self.list_into(chars.lists[i], a, b, depth)?;
                }
                CharEdge::Char(_) | CharEdge::Skip => {}
            }
        }
        Ok(())
    }

    /// A word's ways to say it between `from` and `to`, the word itself
    /// marked at the end (a symbol said as words: "%" percent).
    fn word_into(&mut self, word: &str, from: u32, to: u32) -> Result<(), ()> {
        let ways = match self.said.get(word) {
            Some(w) => w.clone(),
            None => {
                let w = self.lexicon.say_word(word);
                self.said.insert(word.to_owned(), w.clone());
                w
            }
        };
        let id = match self.word_ids.get(word) {
            Some(&id) => id,
            None => {
                self.words.push(word.into());
                let id = (self.words.len() - 1) as u32;
                self.word_ids.insert(word.to_owned(), id);
                id
            }
        };
        if ways.is_empty() {
            return self.edge(from, to, Kind::Word(id));
        }
        for phones in ways {
            let mut at = from;
            for (i, p) in phones.into_iter().enumerate() {
                let next = self.node();
                self.edge(at, next, Kind::Phone(p, i == 0))?;
                at = next;
            }
            self.edge(at, to, Kind::Word(id))?;
        }
        Ok(())
    }

    /// A list's values between `from` and `to`: each value as said; a
    /// number range, a length of time or a time of day as they are said in
    /// words; a wildcard takes heard words.
    fn list_into(&mut self, name: &str, from: u32, to: u32, depth: u32) -> Result<(), ()> {
        let Some(list) = self.scope.lists.iter().find_map(|l| l.get(name)) else {
            // A list no one defines matches nothing.
            return Ok(());
        };
        let spoken = |rule: &str| Expr::Rule(rule.into());
        match list {
            SlotList::Values(values) => {
                for v in values {
                    self.expr_into(&v.said, from, to, depth + 1)?;
                }
                Ok(())
            }
            SlotList::Range(_) => self.expr_into(&spoken("number"), from, to, depth + 1),
            SlotList::Duration => self.expr_into(&spoken("duration"), from, to, depth + 1),
            SlotList::TimeOfDay => self.expr_into(&spoken("time"), from, to, depth + 1),
            SlotList::Wildcard => self.edge(from, to, Kind::Wild),
        }
    }

    /// The graph in topological order (Kahn's), with its length bounds;
    /// `None` when the end cannot be reached.
    fn finish(self, start: u32, end: u32) -> Option<Graph> {
        let n = self.nodes as usize;
        let mut indegree = vec![0u32; n];
        let mut out: Vec<Vec<Edge>> = vec![Vec::new(); n];
        for (from, e) in self.edges {
            indegree[e.to as usize] += 1;
            out[from as usize].push(e);
        }
        let mut order = Vec::with_capacity(n);
        let mut ready: Vec<u32> = (0..n as u32)
            .filter(|&v| indegree[v as usize] == 0)
            .collect();
        while let Some(v) = ready.pop() {
            order.push(v);
            for e in &out[v as usize] {
                indegree[e.to as usize] -= 1;
                if indegree[e.to as usize] == 0 {
                    ready.push(e.to);
                }
            }
        }
        if order.len() != n {
            return None; // a cycle: no template makes one
        }
        let mut rank = vec![0u32; n];
        for (i, &v) in order.iter().enumerate() {
            rank[v as usize] = i as u32;
        }
        let mut first = Vec::with_capacity(n + 1);
        let mut edges = Vec::new();
        for &v in &order {
            first.push(edges.len() as u32);
            edges.extend(out[v as usize].iter().map(|e| Edge {
                to: rank[e.to as usize],
                kind: e.kind,
            }));
        }
        first.push(edges.len() as u32);
        // Fewest and most phones from the start to each node.
        let (start, end) = (rank[start as usize] as usize, rank[end as usize] as usize);
        let mut short = vec![u32::MAX; n];
        let mut long = vec![0u32; n];
        let mut reach = vec![false; n];
        let mut wild = false;
        short[start] = 0;
        reach[start] = true;
        for v in 0..n {
            if !reach[v] {
                continue;
            }
            for e in &edges[first[v] as usize..first[v + 1] as usize] {
                let step = u32::from(matches!(e.kind, Kind::Phone(..)));
                wild |= matches!(e.kind, Kind::Wild);
                let t = e.to as usize;
                reach[t] = true;
                short[t] = short[t].min(short[v] + step);
                long[t] = long[t].max(long[v] + step);
            }
        }
        if !reach[end] {
            return None;
        }
        Some(Graph {
            first,
            edges,
            start: start as u32,
            end: end as u32,
            min_len: short[end],
            max_len: long[end],
            wild,
        })
    }
}

/// Said phone `p` heard as the phone at `col`; a word's first phone heard
/// inside a short heard word, right after a phone the word before took
/// (`after_said`), costs `WORD_SPLIT` more.
fn substitution(p: Phone, first: bool, after_said: bool, said: &Said, col: usize) -> f32 {
    let split = if first && after_said && said.inside_short[col] {
        WORD_SPLIT
    } else {
        0.0
    };
    lexicon::substitution(p, said.phones[col]) + split
}

/// What the path said, in order.
#[derive(Clone, Copy, Debug)]
enum Output {
    /// A word of the reading, and whether any heard sound went to it.
    Word(u32, bool),
    /// Heard words `a..b`, taken by a wildcard.
    Heard(usize, usize),
}

struct Path {
    cost: f32,
    norm: f32,
    wild_words: u32,
    output: Vec<Output>,
}

#[derive(Clone, Copy, Default)]
struct Back {
    node: u32,
    col: u16,
    /// 0 none, 1 a heard phone not said, 2 a said phone not heard, 3 a
    /// phone said and heard, 4 an edge that says nothing, 5 a wildcard.
    op: u8,
    edge: u32,
}

/// The cost and back-pointer tables, kept between sentences.
#[derive(Default)]
struct Table {
    cost: Vec<f32>,
    back: Vec<Back>,
    /// Whether the phone heard before each cell went to a phone said
    /// (`substitution`'s `after_said`), beside `cost`.
    after: Vec<bool>,
    /// Two columns of costs, and of `after`, for the first pass.
    cur: Vec<f32>,
    next: Vec<f32>,
    cur_after: Vec<bool>,
    next_after: Vec<bool>,
}

/// Where a column's finite costs are: the lowest and highest node.
#[derive(Clone, Copy)]
struct Span(usize, usize);

impl Span {
    const NONE: Span = Span(usize::MAX, 0);

    fn add(&mut self, v: usize) {
        self.0 = self.0.min(v);
        self.1 = self.1.max(v);
    }
}

impl Table {
    /// The cost of the cheapest alignment of `said` with `g`, if at most
    /// `most`: two columns at a time, every cost above `most` dropped (a
    /// cost only grows along a path), so a sentence far from what was heard
    /// is given up within a few phones.
    fn cost(&mut self, g: &Graph, said: &Said, most: f32) -> Option<f32> {
        let n = said.phones.len();
        let nodes = g.first.len() - 1;
        self.cur.clear();
        self.cur.resize(nodes, f32::INFINITY);
        self.next.clear();
        self.next.resize(nodes, f32::INFINITY);
        self.cur_after.clear();
        self.cur_after.resize(nodes, false);
        self.next_after.clear();
        self.next_after.resize(nodes, false);
        // Wildcards under way: where they go, the word they began at, the cost then.
        let mut wild: Vec<(usize, usize, f32)> = Vec::new();
        let start = g.start as usize;
        self.cur[start] = 0.0;
        let mut span = Span(start, start);
        for col in 0..=n {
            let word = word_at(said, col);
            if let Some(k) = word {
                for &(t, from, c) in &wild {
                    let v = c + WILD_WORD * (k - from) as f32;
                    if from < k && v <= most && v < self.cur[t] {
                        self.cur[t] = v;
                        self.cur_after[t] = false;
                        span.add(t);
                    }
                }
            }
            let mut next_span = Span::NONE;
            let mut alive = false;
            let mut v = span.0;
            while v <= span.1 && v < nodes {
                let c = self.cur[v];
                if c > most {
                    v += 1;
                    continue;
                }
                alive = true;
                let after = self.cur_after[v];
                if col < n {
                    let ins = c + lexicon::gap(said.phones[col]);
                    if ins <= most && ins < self.next[v] {
                        self.next[v] = ins;
                        self.next_after[v] = false;
                        next_span.add(v);
                    }
                }
                for e in &g.edges[g.first[v] as usize..g.first[v + 1] as usize] {
                    let t = e.to as usize;
                    match e.kind {
                        Kind::Phone(p, first) => {
                            let del = c + lexicon::gap(p);
                            if del <= most && del < self.cur[t] {
                                self.cur[t] = del;
                                self.cur_after[t] = after;
                                span.1 = span.1.max(t);
                            }
                            if col < n {
                                let sub = c + substitution(p, first, after, said, col);
                                if sub <= most && sub < self.next[t] {
                                    self.next[t] = sub;
                                    self.next_after[t] = true;
                                    next_span.add(t);
                                }
                            }
                        }
                        Kind::Word(_) | Kind::Skip => {
                            if c < self.cur[t] {
                                self.cur[t] = c;
                                self.cur_after[t] = after;
                                span.1 = span.1.max(t);
                            }
                        }
                        Kind::Wild => {
                            if let Some(k) = word {
                                wild.push((t, k, c));
                            }
                        }
                    }
                }
                v += 1;
            }
            if col == n {
                let end = self.cur[g.end as usize];
                return (end <= most).then_some(end);
            }
            if !alive && wild.is_empty() {
                return None;
            }
            // The next column becomes this one; the old one is cleared where it was used.
            if span.0 <= span.1 {
                for x in &mut self.cur[span.0..(span.1 + 1).min(nodes)] {
                    *x = f32::INFINITY;
                }
            }
            std::mem::swap(&mut self.cur, &mut self.next);
            std::mem::swap(&mut self.cur_after, &mut self.next_after);
            span = next_span;
            // A wildcard may land in a column nothing else reaches.
            if span.0 == usize::MAX {
                span = Span(nodes, 0);
            }
        }
        None
    }

    /// The cheapest alignment of `said` with a path of `g`, and what it says.
    fn align(&mut self, g: &Graph, said: &Said) -> Option<Path> {
        self.fill(g, said);
        let at = |col: usize, v: usize| cell(g, col, v);
        let cost = self.cost[at(said.phones.len(), g.end as usize)];
        if !cost.is_finite() {
            return None;
        }
        self.path_back(g, said, cost)
    }

    /// The tables for `said` against `g`, column by column (a column per
    /// phone heard, and one before the first): the cheapest cost of each
    /// node, the step that got there, and whether that step's heard phone
    /// went to a said one.
    fn fill(&mut self, g: &Graph, said: &Said) {
        let n = said.phones.len();
        let nodes = g.first.len() - 1;
        let size = nodes * (n + 1);
        self.cost.clear();
        self.cost.resize(size, f32::INFINITY);
        self.back.clear();
        self.back.resize(size, Back::default());
        self.after.clear();
        self.after.resize(size, false);
        let boundary: Vec<bool> = {
            let mut b = vec![false; n + 1];
            for &s in &said.starts {
                b[s] = true;
            }
            b
        };
        let start = g.start as usize;
        self.cost[cell(g, 0, start)] = 0.0;
        // Columns index the cost tables, the phones and `boundary` alike.
        for col in 0..=n {
            for v in 0..nodes {
                self.step_from(g, said, &boundary, col, v);
            }
        }
    }

    /// Every step out of node `v` at column `col`, each lowering the cost
    /// of the cell it reaches if it is cheaper: a heard phone not said (1),
    /// a said phone not heard (2), a said phone heard (3), an edge that
    /// says nothing (4), a wildcard taking whole heard words from a word's
    /// start (5). `boundary` marks the columns where a heard word starts.
    fn step_from(&mut self, g: &Graph, said: &Said, boundary: &[bool], col: usize, v: usize) {
        let n = said.phones.len();
        let at = |col: usize, v: usize| cell(g, col, v);
        let c = self.cost[at(col, v)];
        if !c.is_finite() {
            return;
        }
        let after = self.after[at(col, v)];
        if col < n {
            let ins = c + lexicon::gap(said.phones[col]);
            if ins < self.cost[at(col + 1, v)] {
                self.cost[at(col + 1, v)] = ins;
                self.after[at(col + 1, v)] = false;
                self.back[at(col + 1, v)] = Back {
                    node: v as u32,
                    col: col as u16,
                    op: 1,
                    edge: 0,
                };
            }
        }
        for ei in g.first[v] as usize..g.first[v + 1] as usize {
            let e = g.edges[ei];
            let t = e.to as usize;
            let relax = |table: &mut Self, tcol: usize, value: f32, op: u8| {
                if value < table.cost[at(tcol, t)] {
                    table.cost[at(tcol, t)] = value;
                    table.after[at(tcol, t)] = match op {
                        3 => true,
                        2 | 4 => after,
                        _ => false,
                    };
                    table.back[at(tcol, t)] = Back {
                        node: v as u32,
                        col: col as u16,
                        op,
                        edge: ei as u32,
                    };
                }
            };
            match e.kind {
                Kind::Phone(p, first) => {
                    relax(self, col, c + lexicon::gap(p), 2);
                    if col < n {
                        let sub = c + substitution(p, first, after, said, col);
                        relax(self, col + 1, sub, 3);
                    }
                }
                Kind::Word(_) | Kind::Skip => relax(self, col, c, 4),
                Kind::Wild => {
                    if !boundary[col] {
                        continue;
                    }
                    let Some(w0) = word_at(said, col) else {
                        continue;
                    };
                    for (k, &end) in said.starts.iter().enumerate().skip(w0 + 1) {
                        let words = (k - w0) as f32;
                        relax(self, end, c + WILD_WORD * words, 5);
                    }
                }
            }
        }
    }

    /// The path `fill` found, read back from its end (whose cost is
    /// `cost`): what it said, in order (its words, and the heard words a
    /// wildcard took), and how long it was, for `Path::norm`.
    fn path_back(&self, g: &Graph, said: &Said, cost: f32) -> Option<Path> {
        let at = |col: usize, v: usize| cell(g, col, v);
        let (start, end) = (g.start as usize, g.end as usize);
        // Back along the path: what it said, and how long it was.
        let (mut subs, mut ins, mut dels, mut wild_phones, mut wild_words) =
            (0u32, 0u32, 0u32, 0usize, 0u32);
        let mut output = Vec::new();
        // Backwards, a word's edge comes before its phones: the phones
        // heard after it (until the next edge) are its own.
        let mut word: Option<usize> = None;
        let (mut col, mut v) = (said.phones.len(), end);
        while col > 0 || v != start {
            let b = self.back[at(col, v)];
            match b.op {
                1 => ins += 1,
                2 => dels += 1,
                3 => {
                    subs += 1;
                    if let Some(Output::Word(_, heard)) = word.and_then(|i| output.get_mut(i)) {
                        *heard = true;
                    }
                }
                4 => {
                    word = None;
                    if let Kind::Word(w) = g.edges[b.edge as usize].kind {
                        word = Some(output.len());
                        output.push(Output::Word(w, false));
                    }
                }
                5 => {
                    word = None;
                    let (a, z) = (word_at(said, b.col as usize)?, word_at(said, col)?);
                    output.push(Output::Heard(a, z));
                    wild_phones += col - b.col as usize;
                    wild_words += (z - a) as u32;
                }
                _ => return None,
            }
            col = b.col as usize;
            v = b.node as usize;
        }
        output.reverse();
        let norm = (subs + ins.max(dels)) as f32 + wild_phones as f32;
        Some(Path {
            cost,
            norm,
            wild_words,
            output,
        })
    }
}

/// Where node `v` at column `col` is in `Table`'s cost, back-pointer and
/// `after` tables for `g`: one column of `g`'s nodes after another.
fn cell(g: &Graph, col: usize, v: usize) -> usize {
    col * (g.first.len() - 1) + v
}

/// The heard word that starts at phone `col`, if one does ("set a timer":
/// word 1 starts at phone 3).
fn word_at(said: &Said, col: usize) -> Option<usize> {
    said.starts.iter().position(|&s| s == col)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEXICON: &str = "\
add AE1 D
an AE1 N
a AH0
and AH0 N D
at AE1 T
brightness B R AY1 T N AH0 S
fifty F IH1 F T IY0
five F AY1 V
for F AO1 R
forty F AO1 R T IY0
half HH AE1 F
hour AW1 ER0
hour(2) AW1 R
hours AW1 ER0 Z
kitchen K IH1 CH AH0 N
lamp L AE1 M P
lights L AY1 T S
list L IH1 S T
living L IH1 V IH0 NG
milk M IH1 L K
minute M IH1 N AH0 T
minutes M IH1 N AH0 T S
one W AH1 N
out AW1 T
percent P ER0 S EH1 N T
room R UW1 M
set S EH1 T
start S T AA1 R T
the DH AH0
timer T AY1 M ER0
to T UW1
turn T ER1 N
twelve T W EH1 L V
two T UW1
us AH1 S
well W EH1 L
write R AY1 T
";

    fn grammar(templates: &[&str], lists: HashMap<String, SlotList>) -> SoundGrammar {
        let lexicon = Lexicon::parse(LEXICON).unwrap();
        let parsed: Vec<(String, Expr)> = templates
            .iter()
            .map(|t| (t.to_string(), template::parse(t).unwrap()))
            .collect();
        let rules = HashMap::new();
        let rule_sets = [&rules];
        let list_sets = [&lists];
        let scope = SoundScope {
            rules: &rule_sets,
            lists: &list_sets,
        };
        SoundGrammar::build(
            lexicon,
            &scope,
            parsed.iter().map(|(t, e)| ("Intent", t.as_str(), e)),
        )
    }

    fn lists() -> HashMap<String, SlotList> {
        HashMap::from([
            ("duration".to_string(), SlotList::Duration),
            ("item".to_string(), SlotList::Wildcard),
            (
                "brightness".to_string(),
                SlotList::Range(template::RangeList {
                    from: 0.0,
                    to: 100.0,
                    step: 1.0,
                    multiplier: 1.0,
                    fractions: None,
                }),
            ),
        ])
    }

    #[test]
    fn a_mishearing_is_read_as_the_sentence_it_sounds_like() {
        let g = grammar(
            &[
                "(start|set) [a] {duration} timer",
                "set a timer for {duration}",
                "set the lamp brightness to {brightness}[%| percent]",
                "add {item} to the list",
            ],
            lists(),
        );
        assert_eq!(g.len(), 4);
        let near = g.nearest("set a timer for well hour", 3, 0.3);
        assert_eq!(near[0].reading, "set a timer for one hour", "{near:?}");
        assert!(near[0].distance < 0.15, "{near:?}");
        let near = g.nearest("set the lamp write us to 50%", 3, 0.3);
        assert_eq!(
            near[0].reading, "set the lamp brightness to fifty percent",
            "{near:?}"
        );
        // A wildcard takes the words as heard, at a cost.
        let near = g.nearest("add milk to the list", 3, 0.3);
        assert_eq!(near[0].reading, "add milk to the list");
        assert_eq!(near[0].wild_words, 1);
        assert!(near[0].distance > 0.0);
        // Nothing near: nothing found.
        assert!(g.nearest("kitchen", 3, 0.3).is_empty());
        // What each word of the reading was heard as: "five" heard as "five",
        // "out" as nothing.
        assert!(near[0].unheard.is_empty(), "{near:?}");
        let g = grammar(
            &["turn [the] lights out", "add {item} to the list"],
            lists(),
        );
        let near = g.nearest("turn the lights", 3, 0.3);
        assert_eq!(near[0].reading, "turn the lights out", "{near:?}");
        assert_eq!(near[0].unheard, ["out"], "{near:?}");
        let near = g.nearest("turn the lights at", 3, 0.3);
        assert_eq!(near[0].reading, "turn the lights out", "{near:?}");
        assert!(near[0].unheard.is_empty(), "{near:?}");
    }

    #[test]
    fn a_word_spelled_across_parts_is_said_whole() {
        // "minute[s]": "minutes" is its own word, not "minute" and "s".
        let g = grammar(&["set a timer for five minute[s]"], HashMap::new());
        let near = g.nearest("set a timer for five minutes", 1, 0.1);
        assert_eq!(near[0].reading, "set a timer for five minutes");
        assert_eq!(near[0].distance, 0.0);
    }
}
