//! The clause layer: a longer sentence read clause by clause, and a
//! question asked inside one (a request found among other words is
//! `span.rs`'s).

use super::*;

/// How sure a clause's own reading must be: a template that matched it
/// (a wildcard may take part of it, inside the clause).
pub(in crate::router) const SURE_CLAUSE: f64 = 0.5;

/// The most clauses a sentence is read in; more is no request (a list
/// read out, a pasted text).
const MAX_CLAUSES: usize = 12;

pub(in crate::router) fn clauses(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if CLAUSE_MARKS.contains(&char::from(*b))
            && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace())
        {
            out.push(&text[start..i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|c| c.chars().any(char::is_alphanumeric))
        .collect()
}

/// One clause's decision, saying which clause it was and what it pointed back at.
fn clause_decision(
    d: RouteDecision,
    clause: &str,
    said: &str,
    referent: Option<String>,
) -> RouteDecision {
    decided_by(d, Layer::Clause, |u| {
        u.clause = Some(clause.to_owned());
        if referent.is_some() {
            u.said = Some(said.to_owned());
            u.referent = referent;
        }
    })
}

impl Router {
    /// A longer sentence in clauses, at `,` `;` `?` `!` `.` ("tea's brewing,
    /// remind me in four minutes"): the clauses a template understands whole
    /// are the request (several, one chain), the others what was said around
    /// it. A clause may point back at what an earlier one named: "it" or
    /// "them" at a device of the home or at what "we need" or "we're out of"
    /// named, "there" at a room ("is the front door locked? lock it" is "lock
    /// the front door"). Never in a sentence that says "not" (but in a clause
    /// said aside, or before a clause that asks: its reason), nor in a story.
    /// `as_said`: the sentence as it was said or typed (not a reading of a
    /// mishearing or a slip), whose clauses may be read by `several_meant`.
    pub(in crate::router) fn by_clause(
        &self,
        text: &str,
        context: &Context,
        as_said: bool,
    ) -> Option<RouteDecision> {
        let clauses = clauses(text);
        if let Some(named) = self.named_after(&clauses) {
            return self.read_named(named, clauses.len(), context, as_said);
        }
        // "Don't leave the garage open all night, close it": a clause that
        // says "not" before one that asks for something is the reason for
        // it, no request of its own.
        let reason = |i: usize| {
            (clauses[i + 1..].iter()).any(|c| !self.says_not(c) && self.asks_in_words(c))
        };
        if !(2..=MAX_CLAUSES).contains(&clauses.len())
            || (clauses.iter().enumerate())
                .any(|(i, c)| self.says_not(c) && !self.not_so_aside(i, c) && !reason(i))
            || self.tells_a_story(text)
        {
            return None;
        }
        // Each command with the part (clause understood) it came from.
        let mut commands: Vec<(usize, crate::auth::Command)> = Vec::new();
        let mut parts = Vec::new();
        let mut last = None;
        // Whether a clause understood took a level its sentence fixes
        // ("dim the bedroom a bit" is 30%), and another said a number.
        let (mut level_fixed, mut number_aside) = (false, false);
        // Whether a clause that only names a device ("bedroom lamp", by the
        // library a wish to turn it on) was read, and one was not understood.
        let (mut named_alone, mut unread) = (false, false);
        for (i, clause) in clauses.iter().enumerate() {
            if context.out_of_time() {
                return None;
            }
            // A clause longer than a sentence is read (see MAX_WORDS) is no
            // request, nor is one that says "not" (above: said aside or a reason).
            if clause.split_whitespace().nth(MAX_WORDS).is_some() || self.says_not(clause) {
                continue;
            }
            // "The porch light, can you put it at 40 percent": a clause that
            // only names what a later one points back at is what that one is
            // about, no request of its own.
            if self.only_names(clause) && clauses[i + 1..].iter().any(|c| self.points_back(c)) {
                continue;
            }
            let (mut said, mut referent) = match self.resolve_reference(clause, &clauses[..i]) {
                Some((resolved, referent)) => (resolved, Some(referent)),
                None => (clause.to_string(), None),
            };
            // "Milk, add it to the list": a word that stands for a thing
            // is the phrase an earlier clause said alone.
            if referent.is_none()
                && let Some((resolved, phrase)) =
                    self.item_said_before(clause, &clauses[..i], context)
            {
                said = resolved;
                referent = Some(phrase);
            }
            let Some(mut d) = self.clause_read(&said, referent.is_some(), context, as_said) else {
                number_aside |= self.says_a_number(clause);
                unread = true;
                continue;
            };
            level_fixed |= fixes_a_level(&d);
            if let Some((placed, put, placed_d)) = self.said_beside(&d, &said, &clauses, i, context)
            {
                (said, referent, d) = (placed, Some(put), placed_d);
            }
            match &d.intent {
                Intent::Chain(chain) => {
                    // Said twice ("it's dark in here, lights on in here"): done once.
                    for c in &chain.commands {
                        if !commands
                            .iter()
                            .any(|(_, k)| k.command_id == c.command_id && k.params == c.params)
                        {
                            commands.push((parts.len(), c.clone()));
                        }
                    }
                }
                // A clause whose parameters were refused, or that is ambiguous, answers for all.
                _ => return Some(clause_decision(d, clause, &said, referent)),
            }
            named_alone |= self.only_names(clause);
            parts.push(Part {
                clause: Some(clause.to_string()),
                said: Some(said.clone()),
                referent: referent.clone(),
                layer: d.layer,
                source_rule: d.source_rule.clone(),
                understood: d.understood.clone(),
            });
            last = Some((d, clause.to_string(), said, referent));
        }
        // "Bedroom lamp, office": what was said of the name is in the words
        // not understood (heard for "off"), not in the name alone.
        if named_alone && unread {
            return None;
        }
        let (commands, parts, last_answered) = self.without_parts_acted_on(commands, parts);
        // "Make it a bit warmer, like one degree": the level is the one said
        // aside, read with the request it qualifies (the clauses as one
        // sentence, when a template reads it so); else by the meaning layer
        // from the whole.
        if level_fixed && number_aside {
            return self
                .command_of(&clauses.join(" "), context)
                .filter(|d| matches!(d.intent, Intent::Chain(_)) && d.confidence >= SURE_CLAUSE)
                .map(|d| decided_by(d, Layer::Clause, |u| u.clause = Some(clauses.join(", "))));
        }
        let (d, clause, said, referent) = last?;
        if parts.len() == 1 && !last_answered {
            return Some(clause_decision(d, &clause, &said, referent));
        }
        Some(several_parts(commands, Layer::Clause, parts))
    }

    /// What another clause says that the request `said` in clause `i` (its
    /// decision `d`) asked for: the room, for one that asked which
    /// (`in_room_said_beside`), or the length, for one that asked how long
    /// (`length_said_beside`); the request so read, the words put and its
    /// decision.
    fn said_beside(
        &self,
        d: &RouteDecision,
        said: &str,
        clauses: &[&str],
        i: usize,
        context: &Context,
    ) -> Option<(String, String, RouteDecision)> {
        let asks_how_long = matches!(&d.intent, Intent::Invalid { problem, .. }
            if problem.code == "validator.missing_param");
        if d.route_code == "intent.clarify" {
            self.in_room_said_beside(said, clauses, i, context)
        } else if asks_how_long {
            self.length_said_beside(said, clauses, i, context)
        } else {
            None
        }
    }

    /// A clause's request: as a template reads it, else as the split reads
    /// a sentence ("…, switch on the bedroom lamp and lock the side door";
    /// as said, with a part the meaning layer reads); a clause that asks
    /// for something and points back (`pointed`) by its meaning where no
    /// template reads it ("…, can you put it at 40 percent").
    fn clause_read(
        &self,
        said: &str,
        pointed: bool,
        context: &Context,
        as_said: bool,
    ) -> Option<RouteDecision> {
        let chain = |d: &RouteDecision| matches!(d.intent, Intent::Chain(_));
        let asks = || {
            (self.words.request_verbs.iter()).any(|v| {
                said.strip_prefix(v.as_str())
                    .is_some_and(|r| r.starts_with(' '))
            })
        };
        self.command_of(said, context)
            .filter(|d| d.confidence >= SURE_CLAUSE)
            .or_else(|| self.several(said, context).filter(chain))
            .or_else(|| as_said.then(|| self.several_meant(said, context)).flatten())
            .or_else(|| {
                (as_said && pointed && asks())
                    .then(|| self.by_meaning(said, context).decided)
                    .flatten()
                    .filter(chain)
            })
    }

    /// The sentence with a clause that named the request before it said
    /// inside it (`named_after`), read again.
    fn read_named(
        &self,
        named: String,
        clauses: usize,
        context: &Context,
        as_said: bool,
    ) -> Option<RouteDecision> {
        if clauses > 2 {
            return self.by_clause(&named, context, as_said);
        }
        self.command_of(&named, context)
            .filter(|d| matches!(d.intent, Intent::Chain(_)) && d.confidence >= SURE_CLAUSE)
            .map(|d| decided_by(d, Layer::Clause, |u| u.clause = Some(named)))
    }

    /// The clauses again with one that names what the clause before asked
    /// for (`naming_leads`) said inside it: "start a timer for 12 minutes,
    /// call it potatoes" is "start a timer for 12 minutes called potatoes".
    fn named_after(&self, clauses: &[&str]) -> Option<String> {
        let (at, said) = clauses.iter().enumerate().skip(1).find_map(|(i, c)| {
            self.words.naming_leads.iter().find_map(|(lead, said)| {
                let name = c.strip_prefix(lead.as_str())?.strip_prefix(' ')?;
                Some((i, format!("{} {said} {name}", clauses[i - 1])))
            })
        })?;
        let mut out: Vec<String> = clauses[..at - 1].iter().map(|c| (*c).to_owned()).collect();
        out.push(said);
        out.extend(clauses[at + 1..].iter().map(|c| (*c).to_owned()));
        Some(out.join(", "))
    }

    /// Whether `text` says a number, in digits or words.
    fn says_a_number(&self, text: &str) -> bool {
        !crate::understand::numbers::numbers_in(self.library.lang, text).is_empty()
    }

    /// `clause` with its word that stands for a thing (`refer_to_item`)
    /// read as the phrase the nearest earlier clause said alone ("milk, add
    /// it to the list"), and that phrase; kept only where the clause so
    /// read is a request that takes the phrase as a parameter.
    fn item_said_before(
        &self,
        clause: &str,
        earlier: &[&str],
        context: &Context,
    ) -> Option<(String, String)> {
        let padded = format!(" {clause} ");
        let word =
            (self.words.refer_to_item.iter()).find(|w| padded.contains(&format!(" {w} ")))?;
        let phrase = earlier
            .iter()
            .rev()
            .find_map(|c| self.said_alone(c, context))?;
        let resolved = padded
            .replacen(&format!(" {word} "), &format!(" {phrase} "), 1)
            .trim()
            .to_owned();
        let d = self.command_of(&resolved, context)?;
        let Intent::Chain(chain) = &d.intent else {
            return None;
        };
        chain
            .commands
            .iter()
            .any(|c| c.params.values().any(|v| v.to_string() == phrase))
            .then_some((resolved, phrase))
    }

    /// A clause that only names a thing ("and sparkling water"): a few
    /// words after its joining ones, none the home's, no request.
    fn said_alone(&self, clause: &str, context: &Context) -> Option<String> {
        let clause = normalize(clause);
        let joining = |w: &&str| {
            self.words.split_words.iter().any(|s| s == w)
                || self.words.heard_fillers.iter().any(|s| s == w)
        };
        let words: Vec<&str> = clause.split_whitespace().skip_while(joining).collect();
        if words.is_empty() || words.len() > 4 {
            return None;
        }
        let phrase = words.join(" ");
        let names_the_home =
            !crate::understand::mentions::mentions(&self.home, &phrase, None).is_empty();
        (!names_the_home && self.command_of(&phrase, context).is_none()).then_some(phrase)
    }
}
