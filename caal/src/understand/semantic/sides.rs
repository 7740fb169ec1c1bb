//! Which side of a pair of opposite words, or of two directions, a text
//! says: a meaning whose examples say one side is never taken for a
//! sentence that says only the other.

/// Whether a text says the first word of a pair, and the second.
pub(super) type Sides = (bool, bool);

/// Which words of each pair `text` says.
pub(super) fn sides(pairs: &[[String; 2]], text: &str) -> Vec<Sides> {
    // A side may be a phrase ("a timer" against "the timer").
    let padded = format!(" {text} ");
    let has = |w: &str| padded.contains(&format!(" {w} "));
    pairs.iter().map(|[a, b]| (has(a), has(b))).collect()
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
        self
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
