//! Templates compiled into graphs of phones: alternatives, optional parts,
//! permutations, expansion rules and lists, each word by its pronunciations.

use std::collections::{HashMap, HashSet};

use super::*;

/// Builds one sentence's graph.
pub(super) struct Builder<'a> {
    pub(super) lexicon: &'a Lexicon,
    pub(super) scope: &'a SoundScope<'a>,
    pub(super) spoken: &'a HashMap<String, Expr>,
    pub(super) words: &'a mut Vec<Box<str>>,
    pub(super) word_ids: &'a mut HashMap<String, u32>,
    pub(super) edges: Vec<(u32, Edge)>,
    pub(super) nodes: u32,
    /// Each word's ways to say it, looked up once.
    pub(super) said: HashMap<String, Vec<Vec<Phone>>>,
}

/// A template as characters, before words are found in it.
#[derive(Clone, Copy)]
pub(super) enum CharEdge {
    Char(char),
    Space,
    Skip,
    List(usize),
}

#[derive(Default)]
pub(super) struct Chars<'e> {
    edges: Vec<(u32, u32, CharEdge)>,
    nodes: u32,
    lists: Vec<&'e str>,
}

impl<'e> Chars<'e> {
    pub(super) fn node(&mut self) -> u32 {
        self.nodes += 1;
        self.nodes - 1
    }

    pub(super) fn build(
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
    pub(super) fn node(&mut self) -> u32 {
        self.nodes += 1;
        self.nodes - 1
    }

    pub(super) fn edge(&mut self, from: u32, to: u32, kind: Kind) -> Result<(), ()> {
        if self.edges.len() >= MAX_EDGES {
            return Err(());
        }
        self.edges.push((from, Edge { to, kind }));
        Ok(())
    }

    /// `expr`'s sounds between nodes `from` and `to`: its characters, the
    /// words they spell (a word may span parts: "light[s]"), each word's
    /// ways to say it, and its lists' values.
    pub(super) fn expr_into(
        &mut self,
        expr: &Expr,
        from: u32,
        to: u32,
        depth: u32,
    ) -> Result<(), ()> {
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
    pub(super) fn word_into(&mut self, word: &str, from: u32, to: u32) -> Result<(), ()> {
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
    pub(super) fn list_into(
        &mut self,
        name: &str,
        from: u32,
        to: u32,
        depth: u32,
    ) -> Result<(), ()> {
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
    pub(super) fn finish(self, start: u32, end: u32) -> Option<Graph> {
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
