//! Which side of a pair of opposite words, or of two directions, a text
//! says: a meaning whose examples say one side is never taken for a
//! sentence that says only the other.

use std::collections::BTreeMap;

/// Whether a text says the first word of a pair, and the second.
pub(super) type Sides = (bool, bool);

/// Which words of each pair `text` says.
pub(super) fn sides(pairs: &[[String; 2]], text: &str) -> Vec<Sides> {
    // A side may be a phrase ("a timer" against "the timer").
    let padded = format!(" {text} ");
    let has = |w: &str| padded.contains(&format!(" {w} "));
    pairs.iter().map(|[a, b]| (has(a), has(b))).collect()
}

/// The words of the pairs `sides` says (of `pairs`) without any word paired
/// with them: "the light is still on, turn it off" says neither "on" nor
/// "off" so.
pub(super) fn side_words<'a>(pairs: &'a [[String; 2]], sides: &[Sides]) -> Vec<&'a str> {
    let said: Vec<&str> = (pairs.iter().zip(sides))
        .flat_map(|([a, b], (x, y))| [x.then_some(a.as_str()), y.then_some(b.as_str())])
        .flatten()
        .collect();
    let paired = |w: &str| {
        pairs.iter().any(|[a, b]| {
            (a == w && said.contains(&b.as_str())) || (b == w && said.contains(&a.as_str()))
        })
    };
    let mut alone: Vec<&str> = said.iter().copied().filter(|w| !paired(w)).collect();
    alone.sort_unstable();
    alone.dedup();
    alone
}

/// Which side of each pair of directions `text` says.
pub(super) fn direction_sides(directions: &[[Vec<String>; 2]], text: &str) -> Vec<Sides> {
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
pub(super) fn crossed(text: &[Sides], example: &[Sides]) -> bool {
    text.iter().zip(example).any(|(&t, &e)| {
        (t == (true, false) && e == (false, true)) || (t == (false, true) && e == (true, false))
    })
}

impl super::Semantic {
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
    pub(super) fn turned_away(&self, said: &[Sides], group: usize) -> bool {
        self.group_sides
            .get(group)
            .is_some_and(|g| crossed(said, g))
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
        self.group_opposites = (0..self.groups.len())
            .map(|g| {
                let mut counts: BTreeMap<String, usize> = BTreeMap::new();
                let of_group = self.examples.iter().zip(&self.example_sides);
                for (_, sides) in of_group.filter(|(e, _)| e.group == g) {
                    for w in side_words(&self.opposites, sides) {
                        *counts.entry(w.to_owned()).or_default() += 1;
                    }
                }
                counts
            })
            .collect();
        self
    }

    /// Of the pairs of opposites, those that say which state a thing is put
    /// in (`state_opposites`: "on" and "off"), for `group_opposed`.
    pub fn with_state_opposites(mut self, pairs: impl IntoIterator<Item = [String; 2]>) -> Self {
        self.state_opposites = pairs.into_iter().collect();
        self
    }

    /// Whether at least two of a request's examples say the opposite (of
    /// a pair of `state_opposites`) of a word the sentence says alone
    /// (`alone`, its `side_words`): then
    /// only its examples that say a word of the pairs the sentence says are
    /// near it (`shares_a_side`). "Put
    /// the countertop lights on" is not near "douse the lights in the
    /// lounge", which says neither "on" nor "off", as its fellows say "off";
    /// "the garage light is still on" stays near "the garage light is still
    /// on, turn it off". One example is no side: an idiom ("max out the
    /// lights") may say a word so. Talk that is no request (`-`), and a
    /// meaning about no kind of device (`domain`), is never turned away so.
    pub(super) fn group_opposed(&self, alone: &[&str], group: usize) -> bool {
        let Some(counts) = self.group_opposites.get(group) else {
            return false;
        };
        // Only a meaning about a kind of device has its states ("read out
        // the shopping list" says no state against "what's on the list").
        let group = &self.groups[group];
        if group.intent == "-" || !group.slots.contains_key("domain") {
            return false;
        }
        alone.iter().any(|&w| {
            let partners = self
                .state_opposites
                .iter()
                .filter_map(|[a, b]| (a == w).then_some(b).or_else(|| (b == w).then_some(a)));
            partners
                .map(|p| counts.get(p).copied().unwrap_or(0))
                .sum::<usize>()
                >= 2
        })
    }

    /// Whether example `i` says a word of the pairs the sentence says.
    pub(super) fn shares_a_side(&self, said: &[Sides], i: usize) -> bool {
        self.example_sides.get(i).is_some_and(|e| {
            said.iter()
                .zip(e)
                .any(|(&(x, y), &(a, b))| (x && a) || (y && b))
        })
    }

    /// Whether one says a word of a pair of opposites and the other its
    /// opposite (and not the word itself): "make the bedroom darker" and
    /// "make the office brighter", "take bread off the list" and "put
    /// {item} on the list". Embeddings weigh such a word like any other.
    /// `said` is `sides` of the sentence.
    pub(super) fn opposed(&self, said: &[Sides], example: usize) -> bool {
        self.example_sides
            .get(example)
            .is_some_and(|e| crossed(said, e))
    }
}
