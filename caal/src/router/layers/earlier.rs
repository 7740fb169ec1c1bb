//! What the conversation gives: "it", "them", "there" read as what was
//! asked before, an answer to "which one?", and a question asked indirectly.

use super::*;

impl Router {
    /// The words of `text` that point back at a place and at a thing, if any.
    fn referring_words(&self, text: &str) -> (Option<&String>, Option<&String>) {
        let padded = format!(" {text} ");
        let said = |w: &&String| padded.contains(&format!(" {w} "));
        (
            self.words.refer_to_place.iter().find(said),
            self.words.refer_to_thing.iter().find(said),
        )
    }

    /// Whether `text` says a word that points back ("it", "them", "there"):
    /// only then is what the conversation asked before worth reading.
    pub fn points_back(&self, text: &str) -> bool {
        let (place, thing) = self.referring_words(text);
        place.is_some() || thing.is_some()
    }

    /// A request that points back at what the conversation asked for just
    /// before ("turn on the kitchen lights" … "turn them off", "lock the
    /// back door" … "is it locked?"): the sentence with the words put back,
    /// when so it is a request. The decision says what it pointed at.
    pub(in crate::router) fn by_earlier(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        if context.earlier.is_empty() {
            return None;
        }
        // "We need bread, add it to the list": the sentence names it itself.
        let own = clauses(text);
        if (1..own.len()).any(|i| self.resolve_reference(own[i], &own[..i]).is_some()) {
            return None;
        }
        // "Make it a bit cooler": a template that says the word itself (no
        // slot of it took it) reads the sentence whole; "it" points nowhere.
        let (place, thing) = self.referring_words(text);
        let word = format!(" {} ", place.or(thing)?);
        if let Some(d) = self.by_templates(text, context)
            && d.confidence >= 1.0
        {
            let took_it = d.understood.as_ref().is_some_and(|u| {
                u.slots
                    .values()
                    .any(|s| format!(" {} ", s.said).contains(&word))
            });
            if !took_it {
                return None;
            }
        }
        let earlier: Vec<&str> = context.earlier.iter().map(String::as_str).collect();
        let (said, referent) = self.resolve_reference(text, &earlier)?;
        let here = Context {
            area: context.area.clone(),
            spoken: context.spoken,
            earlier: Vec::new(),
            asked: None,
            listen: context.listen.clone(),
            sure_words: context.sure_words.clone(),
            deadline: context.deadline,
        };
        let d = self.route_in(&said, state, &here);
        answered_with(d, |u| u.earlier = Some(Said { said, referent }))
    }

    /// A request said after words that ask it be kept in mind ("don't
    /// forget we need milk", "remember to lock the back door"): the request
    /// after them. After a lead that ends in "to", what is no request of its
    /// own is something to be reminded of ("don't forget to call mom at 5"
    /// is "remind me to call mom at 5"). The decision says the lead.
    pub(in crate::router) fn by_remembering(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let said = normalize(text);
        let (lead, rest) = self.words.remember_leads.iter().find_map(|lead| {
            let rest = said.strip_prefix(lead.as_str())?.strip_prefix(' ')?;
            Some((lead, rest.trim()))
        })?;
        if rest.is_empty() {
            return None;
        }
        let mut d = self.route_in(rest, state, context);
        let mut asked = rest.to_owned();
        if !matches!(d.intent, Intent::Chain(_))
            && lead.ends_with(" to")
            && self.words.remind_with.contains("{what}")
        {
            asked = self.words.remind_with.replace("{what}", rest);
            d = self.route_in(&asked, state, context);
        }
        answered_with(d, |u| {
            u.remembered = Some(Remembered {
                lead: lead.to_owned(),
                said: asked,
            })
        })
    }

    /// `clause` with a word that points back ("it", "there") replaced by
    /// what the nearest earlier clause named, and that referent; `None` when
    /// it points at nothing, or nothing earlier names one.
    pub(in crate::router) fn resolve_reference(
        &self,
        clause: &str,
        earlier: &[&str],
    ) -> Option<(String, String)> {
        let padded = format!(" {clause} ");
        let (place, thing) = self.referring_words(clause);
        let (word, referent) = if let Some(word) = place {
            let area = earlier.iter().rev().find_map(|c| self.area_in(c))?;
            (word, format!("in the {area}"))
        } else {
            let word = thing?;
            let named = earlier.iter().rev().find_map(|c| {
                self.device_in(c)
                    .or_else(|| self.lights_in(c))
                    .or_else(|| self.item_in(c))
                    .or_else(|| self.item_asked_in(c))
                    .or_else(|| self.device_asked_about(c))
                    .or_else(|| self.timer_in(c))
                    .or_else(|| self.room_lit_in(c, clause))
                    // A room said for what is in it ("don't leave the garage
                    // open, shut it"): as the room, where a sentence reads it so.
                    .or_else(|| self.area_in(c).map(|area| format!("the {area}")))
                    .or_else(|| self.device_of_topic(c))
            })?;
            (word, named)
        };
        let resolved = padded
            .replacen(&format!(" {word} "), &format!(" {referent} "), 1)
            .trim()
            .to_owned();
        Some((resolved, referent))
    }

    /// An answer to "Which room?": what was asked for just before
    /// (`context.asked`) said again in the room now named ("turn off
    /// the lights" … "the kitchen" is "turn off the lights in the
    /// kitchen"), or everywhere ("all of them"). The room is tried where
    /// each request of it ends ("turn off the lights in the kitchen and
    /// lock the front door"); the first a layer understands is taken.
    pub(in crate::router) fn answers_which(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        // Routed as said, the question answered.
        let here = Context {
            asked: None,
            ..context.clone()
        };
        let asked = match context.asked.as_ref()? {
            crate::understand::Asked::Room(asked) => asked.as_str(),
            crate::understand::Asked::Choice(options) => {
                return self.picked(text, options, state, &here);
            }
        };
        let place = self.room_answer(text)?;
        let padded = format!(" {asked} ");
        let mut ends: Vec<usize> = self
            .words
            .split_words
            .iter()
            .flat_map(|w| {
                let needle = format!(" {w} ");
                padded
                    .match_indices(&needle)
                    .map(|(at, _)| at)
                    .collect::<Vec<_>>()
            })
            .collect();
        ends.push(padded.len() - 1);
        ends.sort_unstable();
        ends.dedup();
        ends.into_iter().find_map(|end| {
            let said = format!("{} {place}{}", &padded[..end], &padded[end..]);
            let said = said.trim();
            let d = self.route_in(said, state, &here);
            matches!(d.intent, Intent::Chain(_)).then(|| {
                decided_by(d, Layer::Answer, |u| {
                    u.asked = Some(asked.to_owned());
                    u.said = Some(said.to_owned());
                })
            })
        })
    }

    /// The one of `options` ("turn on the bedroom lamp", "turn on the desk
    /// lamp") an answer picks: by the words it says that only that one
    /// has ("the bedroom one", "desk"), or by its place ("the second one",
    /// "the last"). `here`: the context with the question answered.
    pub(in crate::router) fn picked(
        &self,
        text: &str,
        options: &[String],
        state: &str,
        here: &Context,
    ) -> Option<RouteDecision> {
        let pack = &self.words;
        let said = normalize(text);
        let words: Vec<&str> = said
            .split(' ')
            .filter(|w| !w.is_empty() && !pack.answer_fillers.iter().any(|f| f == w))
            .collect();
        let at = |w: &str| {
            (pack.ordinals.iter()).position(|o| o == w).or_else(|| {
                pack.last_words
                    .iter()
                    .any(|l| l == w)
                    .then(|| options.len() - 1)
            })
        };
        let pick = match words.as_slice() {
            [] => return None,
            [w] if at(w).is_some() => options.get(at(w)?)?,
            _ => {
                let has = |o: &String| {
                    let own = format!(" {o} ");
                    words.iter().all(|w| own.contains(&format!(" {w} ")))
                };
                let mut fit = options.iter().filter(|o| has(o));
                let one = fit.next()?;
                if fit.next().is_some() {
                    return None;
                }
                one
            }
        };
        let d = self.route_in(pick, state, here);
        matches!(d.intent, Intent::Chain(_)).then(|| {
            decided_by(d, Layer::Answer, |u| {
                u.options = options.to_vec();
                u.said = Some(pick.clone());
            })
        })
    }

    /// Whether `text` is short enough to answer a question asked back
    /// (a room, "all of them", "the desk lamp", "the second one").
    pub fn could_answer(&self, text: &str) -> bool {
        (1..=5).contains(&normalize(text).split(' ').filter(|w| !w.is_empty()).count())
    }

    /// What a room said alone places a request in: "in the kitchen" for
    /// "the kitchen", "kitchen please" or "in the lounge" (as the room is
    /// named), "everywhere" for "all of them"; none for anything more.
    fn room_answer(&self, text: &str) -> Option<String> {
        let pack = &self.words;
        let mut said = normalize(text);
        for tail in pack.answer_tails.iter().chain(&pack.light_words) {
            if let Some(rest) = said
                .strip_suffix(tail.as_str())
                .and_then(|r| r.strip_suffix(' '))
            {
                said = rest.to_owned();
            }
        }
        for lead in pack.answer_leads.iter().chain(&pack.determiners) {
            if let Some(rest) = said
                .strip_prefix(lead.as_str())
                .and_then(|r| r.strip_prefix(' '))
            {
                said = rest.to_owned();
            }
        }
        let everything = |s: &str| pack.all_answers.iter().any(|a| a == s);
        if everything(&said)
            || pack
                .determiners
                .iter()
                .any(|d| everything(&format!("{d} {said}")))
        {
            return Some(pack.everywhere.clone());
        }
        self.home
            .areas
            .iter()
            .find(|a| a.name == said || a.aliases.contains(&said))
            .map(|a| pack.in_area.replace("{area}", &a.name))
    }

    /// A question asked indirectly: "can you check if the garage is
    /// open", "I wonder whether I left the porch light on" (after one of
    /// `asking_words`, "if" or "whether" asks; it sets no condition). What
    /// follows is asked as a question ("is the garage open", "did I leave
    /// the porch light on") and taken only as one, changing nothing; "… if
    /// you could turn on the lights" asks for it.
    pub(in crate::router) fn asked_indirectly(
        &self,
        text: &str,
        state: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let (clause, _) = self.whether_asked(text)?;
        let clause = clause.as_str();
        // "Check if the garage is open and close it": more than a question.
        if self.says_more(clause) {
            return None;
        }
        let (asked, polite) = as_questions(clause, &self.words);
        asked.into_iter().find_map(|q| {
            let d = self.route_in(&q, state, context);
            (matches!(d.intent, Intent::Chain(_)) && (polite || !self.changes_something(&d)))
                .then(|| decided_by(d, Layer::Indirect, |u| u.asked = Some(q)))
        })
    }
}
