//! Several requests in one sentence: split at the configured words where
//! every part is a request of its own ("turn on the kitchen lights and set
//! the thermostat to 21"), a part borrowing the first part's opening words
//! or said as "another"; and, below the templates, two requests one of which
//! only the meaning layer reads ("lock the front door and shut the garage").

use super::*;

impl Router {
    /// Several requests in one sentence ("turn on the kitchen lights and set
    /// the thermostat to 21"): split at the configured words where every
    /// part is a request of its own; one chain, gated at its highest level.
    pub(in crate::router) fn several(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let parts = self.split(text, context, 0)?;
        if parts.len() < 2 {
            return None;
        }
        Some(one_chain(parts))
    }

    /// Two requests joined by a split word, one of which no template reads
    /// and the meaning layer does, opening with a request's verb: "lock the
    /// front door and shut the garage". Asked of the sentence as said (the
    /// clause layer, below the templates), never of a reading of a
    /// mishearing or a slip, where it would read words no one said.
    pub(in crate::router) fn several_meant(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        for word in &self.words.split_words {
            let sep = format!(" {word} ");
            for (at, _) in text.match_indices(&sep) {
                let (left, right) = (&text[..at], &text[at + sep.len()..]);
                let (first, one) = (
                    self.command_of(left, context),
                    self.command_of(right, context),
                );
                let parts = match (first, one) {
                    (Some(first), None) => {
                        self.part_meant(right, context).map(|one| vec![first, one])
                    }
                    (None, Some(one)) => {
                        self.part_meant(left, context).map(|first| vec![first, one])
                    }
                    _ => None,
                };
                if let Some(parts) = parts {
                    return Some(one_chain(parts));
                }
            }
        }
        None
    }
}

/// Requests found in parts of one sentence as one chain (a part whose
/// parameters were refused refuses the whole).
fn one_chain(parts: Vec<RouteDecision>) -> RouteDecision {
    let mut commands = Vec::new();
    let mut understood = Vec::new();
    for part in parts {
        match part.intent {
            Intent::Chain(chain) => commands.extend(chain.commands),
            // A part whose parameters were refused refuses the whole.
            _ => return part,
        }
        understood.push(Part {
            clause: None,
            said: None,
            referent: None,
            layer: part.layer,
            source_rule: part.source_rule,
            understood: part.understood,
        });
    }
    several_parts(commands, Layer::Split, understood)
}

impl Router {
    pub(in crate::router) fn split(
        &self,
        text: &str,
        context: &Context,
        depth: usize,
    ) -> Option<Vec<RouteDecision>> {
        if depth > 4 {
            return None;
        }
        for word in &self.words.split_words {
            let sep = format!(" {word} ");
            let mut from = 0;
            while let Some(at) = text[from..].find(&sep).map(|i| from + i) {
                let (left, right) = (&text[..at], &text[at + sep.len()..]);
                from = at + 1;
                let Some(first) = self.command_of(left, context) else {
                    continue;
                };
                if let Some(one) = self.command_of(right, context) {
                    return Some(vec![first, one]);
                }
                // "Turn on the kitchen lights and the hall lights": the second
                // part borrows the first part's opening words.
                let words: Vec<&str> = left.split(' ').collect();
                for k in 1..=3.min(words.len().saturating_sub(1)) {
                    let borrowed = format!("{} {right}", words[..k].join(" "));
                    // Not where a wildcard takes all that part ("remind me to
                    // buy eggs, milk and bread": no reminder "bread").
                    if let Some(one) = self.command_of(&borrowed, context)
                        && !takes_whole(&one, right)
                    {
                        return Some(vec![first, one]);
                    }
                }
                // "Set a timer for 10 minutes and another for 5": "another"
                // is the first part's words up to its kind's word.
                if let Some(one) = self.another(&words, right, context) {
                    return Some(vec![first, one]);
                }
                if let Some(mut rest) = self.split(right, context, depth + 1) {
                    rest.insert(0, first);
                    return Some(rest);
                }
            }
        }
        None
    }

    /// A part of a split that opens with a request's verb ("shut the
    /// garage"), read by the meaning layer: only a request it decides.
    fn part_meant(&self, part: &str, context: &Context) -> Option<RouteDecision> {
        if !self.words.opens_with_request_verb(part) {
            return None;
        }
        let d = self.by_meaning(part, context).decided?;
        matches!(d.intent, Intent::Chain(_)).then_some(d)
    }

    /// `right` said as "another" (`another_words`) of what `left` (its
    /// words) asks: "another" put as `left`'s words up to its first kind's
    /// word ("set a timer"), the request that then reads; a number it ends
    /// with said in the unit `left` said its number in ("… for the pasta
    /// for 10 minutes and one for the sauce for 25": 25 minutes).
    fn another(&self, left: &[&str], right: &str, context: &Context) -> Option<RouteDecision> {
        let rest = self.words.another_words.iter().find_map(|a| {
            right
                .strip_prefix(a.as_str())
                .filter(|r| r.is_empty() || r.starts_with(' '))
        })?;
        let kind = left.iter().position(|w| self.kind_word(w))?;
        let asked = format!("{}{rest}", left[..=kind].join(" "));
        let runs = |d: &RouteDecision| matches!(d.intent, Intent::Chain(_));
        let read = self.command_of(&asked, context);
        if read.as_ref().is_some_and(runs) {
            return read;
        }
        self.unit_said(left)
            .and_then(|unit| self.command_of(&format!("{asked} {unit}"), context))
            .filter(runs)
            .or(read)
    }

    /// The unit `words` say a number in ("10 minutes": minutes; "50
    /// percent"), where `words` say one.
    fn unit_said<'w>(&self, words: &[&'w str]) -> Option<&'w str> {
        let lang = self.library.lang;
        let number = |w: &str| !crate::understand::numbers::numbers_in(lang, w).is_empty();
        words.windows(2).find_map(|pair| {
            let unit = pair[1];
            let is_unit = crate::understand::numbers::says_a_length_of_time(unit)
                || self.words.number_units.iter().any(|u| u == unit);
            (number(pair[0]) && is_unit).then_some(unit)
        })
    }
}

/// Whether a free value of `d` (a wildcard's) is all of `part`.
fn takes_whole(d: &RouteDecision, part: &str) -> bool {
    free_values(d).any(|t| t.trim() == part.trim())
}
