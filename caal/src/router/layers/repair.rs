//! What a person takes back or breaks off and says again (speech repairs).
//! A name or a value taken back is put in place of what it corrects: "turn
//! on the kitchen, sorry, the dining room lights", "a pizza timer for 12
//! minutes, no wait, make that 14", "add cheddar to the list, actually
//! make it mozzarella". A phrase broken off, words said to someone else,
//! then the phrase resumed is read as resumed: "add apple juice to the,
//! Ava I said no, to the shopping list". The words are the language's
//! (`corrections`, `corrections_between_stops`, `correction_leads`,
//! `broken_endings`). Each reading is kept only where it is understood.

use super::clause::clauses;
use super::*;
use crate::understand::{mentions::mentions, numbers::numbers_in};

impl Router {
    /// What follows a correction word ("sorry", "I mean", "no wait"), with
    /// a lead that says it replaces something ("make that") taken off, put
    /// in place of what it corrects: a number said (the last one before
    /// it, with what it counted: "12 minutes … make that 14" is 14
    /// minutes), a name of the home (the last one said before it of the
    /// same kind), a thing of a list (the request before read, its thing
    /// replaced); else, when it names none of these, everything before it
    /// ("lights on, no wait, lights off"). `None` when no correction word
    /// is said between two parts.
    pub(in crate::router) fn corrected(&self, text: &str, context: &Context) -> Option<String> {
        if let Some(contrasted) = self.contrasted(text) {
            return Some(contrasted);
        }
        // A stop speech to text writes for a comma ("… to 60. Actually make
        // that 45.") counts as one: the clauses, joined by commas.
        let padded = format!(" {} ", clauses(text).join(" , "));
        let marks = |w: &String, alone: bool| {
            let forms = [format!(" , {w} , "), format!(" , {w} "), format!(" {w} , ")];
            let n = if alone { 1 } else { 3 };
            forms.into_iter().take(n).collect::<Vec<_>>()
        };
        let words = &self.words;
        let (at, word) = (words.corrections.iter().flat_map(|w| marks(w, false)))
            .chain(
                words
                    .corrections_between_stops
                    .iter()
                    .flat_map(|w| marks(w, true)),
            )
            .filter_map(|marked| padded.find(&marked).map(|at| (at, marked)))
            .min_by_key(|(at, marked)| (*at, usize::MAX - marked.len()))?;
        let before = tidy(&padded[..at]);
        let after = tidy(&padded[at + word.len()..]);
        if before.is_empty() || after.is_empty() {
            return None;
        }
        let value = super::opening::lead_off(&after, &words.correction_leads).unwrap_or(&after);
        if let Some(v) = self.number_taken_back(&before, value) {
            return Some(v);
        }
        let named_after = mentions(&self.home, value, None);
        let Some(first) = named_after.first() else {
            return Some(
                self.thing_taken_back(&before, value, context)
                    .unwrap_or(after),
            );
        };
        let named_before = mentions(&self.home, &before, None);
        let Some(last) = named_before.iter().rev().find(|m| m.slot == first.slot) else {
            return Some(after);
        };
        // "the kitchen, sorry, the dining room lights": from the start of
        // the name before, what follows the name after takes over.
        let start = first.span().0;
        Some(format!("{}{}", &before[..last.span().0], &value[start..]))
    }

    /// A name taken back by saying which it is not: "no, not the kitchen,
    /// the dining room lights. off." (or "… the dining room lights, not the
    /// kitchen"): a clause of a negative word (`negative_words`) and only a
    /// name of the home, beside a clause that names another of the same
    /// kind, is left out, with a lone "no" before it. `None` when no
    /// clause so takes a name back.
    fn contrasted(&self, text: &str) -> Option<String> {
        let w = &self.words;
        let clauses = clauses(text);
        let not_a_name = |c: &str| {
            let rest = (w.negative_words.iter())
                .find_map(|n| c.strip_prefix(n.as_str())?.strip_prefix(' '))?;
            let named = mentions(&self.home, rest, None);
            let [m] = named.as_slice() else {
                return None;
            };
            let (start, end) = m.span();
            let around = format!("{} {}", &rest[..start], &rest[end..]);
            (around.split_whitespace())
                .all(|x| w.determiners.iter().any(|d| d == x))
                .then_some(m.slot)
        };
        let (at, slot) =
            (clauses.iter().enumerate()).find_map(|(i, c)| Some((i, not_a_name(c)?)))?;
        let named_beside = (clauses.iter().enumerate())
            .any(|(i, c)| i != at && mentions(&self.home, c, None).iter().any(|m| m.slot == slot));
        let lone_no = at > 0
            && w.corrections_between_stops
                .iter()
                .any(|n| n == clauses[at - 1]);
        let from = if lone_no { at - 1 } else { at };
        let kept: Vec<&str> = clauses[..from]
            .iter()
            .chain(&clauses[at + 1..])
            .copied()
            .collect();
        (named_beside && !kept.is_empty()).then(|| kept.join(" "))
    }

    /// `before` with its last number said again as the number `value`
    /// opens with: the words after the number that `value` says too ("7
    /// pm" for "6 pm") taken from `value`, the rest of `before` kept ("14"
    /// for "12 minutes for the pasta" is "14 minutes for the pasta"), and
    /// what `value` says after them following. `None` when `value` opens
    /// with no number or `before` says none.
    fn number_taken_back(&self, before: &str, value: &str) -> Option<String> {
        let lang = self.library.lang;
        let &(_, start, end) = numbers_in(lang, value).first().filter(|n| n.1 == 0)?;
        let &(_, b_start, b_end) = numbers_in(lang, before).last()?;
        // A comma is a word of its own here: "7 pm, to feed the cat" says "pm" again.
        let (tail, said) = (
            before[b_end..].replace(',', " , "),
            value[end..].replace(',', " , "),
        );
        let tail: Vec<&str> = tail.split_whitespace().collect();
        let said: Vec<&str> = said.split_whitespace().collect();
        let same = tail.iter().zip(&said).take_while(|(a, b)| a == b).count();
        let mut out: Vec<&str> = vec![before[..b_start].trim_end(), &value[start..end]];
        out.extend(&said[..same]);
        out.extend(&tail[same..]);
        out.extend(&said[same..]);
        Some(out.join(" ").replace(" , ", ", ").trim().to_owned())
    }

    /// `before` with the thing its request adds or takes (a value said as
    /// one of several things: `several` in its command's spec) replaced by
    /// `value`: "add cheddar to the list" then "mozzarella". `None` when
    /// `value` is more than a few words, or `before` is no such request.
    fn thing_taken_back(&self, before: &str, value: &str, context: &Context) -> Option<String> {
        const MOST: usize = 3;
        if value.split_whitespace().count() > MOST {
            return None;
        }
        let d = self.route_in(before, "", context);
        let Intent::Chain(chain) = &d.intent else {
            return None;
        };
        let [c] = chain.commands.as_slice() else {
            return None;
        };
        let spec = self.command(&c.command_id)?;
        let thing = (spec.config.params.iter())
            .filter(|(_, p)| p.several)
            .find_map(|(name, _)| c.raw_params.get(name))?;
        let at = before.rfind(thing.as_str())?;
        Some(format!(
            "{}{value}{}",
            &before[..at],
            &before[at + thing.len()..]
        ))
    }

    /// A phrase broken off at a word that cannot end one (`broken_endings`:
    /// "add apple juice to the,"), words said to someone else, then the
    /// phrase resumed from that word ("…, to the shopping list"; speech to
    /// text may join the words between to it: "… to the. Of I said no to
    /// the shopping list"): the sentence with the words between left out.
    /// `None` when no clause so breaks off and is resumed.
    pub(in crate::router) fn resumed(&self, text: &str) -> Option<String> {
        const MOST: usize = 3;
        let parts = clauses(text);
        for (i, part) in parts.iter().enumerate() {
            let words: Vec<&str> = part.split_whitespace().collect();
            let last = words.last()?;
            if !self.words.broken_endings.iter().any(|e| e == last) {
                continue;
            }
            // The longest end of the broken phrase said again: where a later
            // part opens, or (two words or more) inside the next one.
            for n in (1..=MOST.min(words.len())).rev() {
                let end = &words[words.len() - n..];
                let again = parts[i + 1..].iter().enumerate().find_map(|(k, p)| {
                    let said: Vec<&str> = p.split_whitespace().collect();
                    let inside = k == 0 && n >= 2;
                    let at = if inside {
                        said.windows(n).position(|w| w == end)
                    } else {
                        said.starts_with(end).then_some(0)
                    };
                    at.map(|at| (i + 1 + k, said[at..].join(" ")))
                });
                let Some((j, resumed)) = again else {
                    continue;
                };
                let broken = words[..words.len() - n].join(" ");
                let joined = format!("{broken} {resumed}");
                let mut out: Vec<&str> = parts[..i].to_vec();
                out.push(joined.trim());
                out.extend(&parts[j + 1..]);
                return Some(out.join(", "));
            }
        }
        None
    }
}

/// Words between single spaces, a comma's spaces and the ends gone.
fn tidy(part: &str) -> String {
    part.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" ,", ",")
        .trim_matches([',', ' '])
        .to_owned()
}
