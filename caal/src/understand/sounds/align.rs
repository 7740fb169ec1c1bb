//! What was heard aligned with a sentence's graph of phones: dynamic
//! programming over the graph (a DAG) and the heard phones, and the path
//! back that says which heard word each said word was.

use super::*;

/// Said phone `p` heard as the phone at `col`; a word's first phone heard
/// inside a short heard word, right after a phone the word before took
/// (`after_said`), costs `WORD_SPLIT` more.
pub(super) fn substitution(
    p: Phone,
    first: bool,
    after_said: bool,
    said: &Said,
    col: usize,
) -> f32 {
    let split = if first && after_said && said.inside_short[col] {
        WORD_SPLIT
    } else {
        0.0
    };
    lexicon::substitution(p, said.phones[col]) + split
}

/// What the path said, in order.
#[derive(Clone, Copy, Debug)]
pub(super) enum Output {
    /// A word of the reading, and whether any heard sound went to it.
    Word(u32, bool),
    /// Heard words `a..b`, taken by a wildcard.
    Heard(usize, usize),
}

pub(super) struct Path {
    pub(super) cost: f32,
    pub(super) norm: f32,
    pub(super) wild_words: u32,
    pub(super) output: Vec<Output>,
}

#[derive(Clone, Copy, Default)]
pub(super) struct Back {
    node: u32,
    col: u16,
    /// 0 none, 1 a heard phone not said, 2 a said phone not heard, 3 a
    /// phone said and heard, 4 an edge that says nothing, 5 a wildcard.
    op: u8,
    edge: u32,
}

/// The cost and back-pointer tables, kept between sentences.
#[derive(Default)]
pub(super) struct Table {
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
pub(super) struct Span(usize, usize);

impl Span {
    const NONE: Span = Span(usize::MAX, 0);

    pub(super) fn add(&mut self, v: usize) {
        self.0 = self.0.min(v);
        self.1 = self.1.max(v);
    }
}

impl Table {
    /// The cost of the cheapest alignment of `said` with `g`, if at most
    /// `most`: two columns at a time, every cost above `most` dropped (a
    /// cost only grows along a path), so a sentence far from what was heard
    /// is given up within a few phones.
    pub(super) fn cost(&mut self, g: &Graph, said: &Said, most: f32) -> Option<f32> {
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
    pub(super) fn align(&mut self, g: &Graph, said: &Said) -> Option<Path> {
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
    pub(super) fn fill(&mut self, g: &Graph, said: &Said) {
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
    pub(super) fn step_from(
        &mut self,
        g: &Graph,
        said: &Said,
        boundary: &[bool],
        col: usize,
        v: usize,
    ) {
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
    pub(super) fn path_back(&self, g: &Graph, said: &Said, cost: f32) -> Option<Path> {
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
pub(super) fn cell(g: &Graph, col: usize, v: usize) -> usize {
    col * (g.first.len() - 1) + v
}

/// The heard word that starts at phone `col`, if one does ("set a timer":
/// word 1 starts at phone 3).
pub(super) fn word_at(said: &Said, col: usize) -> Option<usize> {
    said.starts.iter().position(|&s| s == col)
}
