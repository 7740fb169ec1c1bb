//! The template layers: the sentence templates (with the home's names),
//! a negated request (never run), a prefix typed apart joined to its word,
//! and a request said on a condition (several requests: `split.rs`).

use super::*;

impl Router {
    /// The best template match that maps to a command; one that names a
    /// device only by a word several devices share comes after the others.
    pub(in crate::router) fn by_templates(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let mut found = self.library.understand(text, &self.home, context);
        self.rooms_as_named(text, &mut found);
        // A typed timer's name cut short at a word a name follows is no
        // name ("hold the timer for a sec": no timer "hold the"). Heard, it
        // is a name misheard ("beat the timer" for "pizza timer"): the
        // template's request stands, and names no timer there is.
        // A timer's name that opens with a request's verb ("pause the cake
        // timer for a sec": a timer named "pause the cake") is that request.
        found.retain(|u| {
            let name = (u.slots.get("name")).filter(|_| u.template.contains("{timer_name"));
            name.is_none_or(|s| {
                (context.spoken || !self.timer_names.cut_short(&s.said))
                    && !self.words.opens_with_request_verb(&s.said)
            })
        });
        let mut said = None;
        for u in &mut found {
            self.timer_name_read(u);
            // "The bedroom lamp" said as area + "lamp": the one in that area.
            self.home.narrow_by_area(&mut u.slots);
            self.device_said(text, u, &mut said);
        }
        // Among equally sure readings: a request before a question that was
        // not asked as one ("all the lights off" turns them off; "are all the
        // lights off" asks); one device named whole ("the garage light")
        // before the area's lights; a word several devices share last.
        let asked = self.asks_whether(text);
        found.sort_by(|a, b| {
            let rank = |u: &Understood| {
                let shared = u.slots.values().any(|s| s.value.is_array());
                let device = u.slots.get("name").is_some_and(|s| s.value.is_string());
                let unasked = !asked
                    && self
                        .map_for(u)
                        .and_then(|m| self.commands.get(&m.command))
                        .is_some_and(|c| !c.config.side_effects);
                (unasked, u.needs_area, shared, !device)
            };
            b.confidence
                .total_cmp(&a.confidence)
                .then(rank(a).cmp(&rank(b)))
        });
        found.iter().find_map(|u| self.template_command(u))
    }

    /// A timer's name that says a length of time ("add a minute to the 8
    /// minute timer") is the length it was started with, the slot the
    /// library's sentences give it (`start_seconds`), never its name; one
    /// that only points ("set one timer", "pause that timer":
    /// `refer_to_item`) names none.
    fn timer_name_read(&self, u: &mut Understood) {
        const START: &str = "start_seconds";
        if !u.template.contains("{timer_name") {
            return;
        }
        let Some(name) = u.slots.get("name") else {
            return;
        };
        let original = name.said.clone();
        let said = self.without_determiner(&original).to_owned();
        if self.words.refer_to_item.contains(&said) {
            u.slots.remove("name");
            return;
        }
        // A name is what the timer is for, without "the" ("the timer for
        // the pasta": pasta).
        if said != original
            && let Some(slot) = u.slots.get_mut("name")
        {
            slot.value = json!(said);
            slot.said = said.clone();
        }
        let said = said.as_str();
        let lang = self.library.lang;
        if let Some(seconds) = crate::understand::numbers::parse_duration(lang, said) {
            u.slots.remove("name");
            u.slots.insert(
                START.into(),
                crate::understand::Slot::taken(json!(seconds), &original),
            );
            // The wildcard's words read whole as a length, no free words:
            // as sure as the template's own (speech is not read again by sound).
            u.confidence = 1.0;
        }
    }

    /// "Don't unlock the door": the request it negates, never run.
    pub(in crate::router) fn negated(
        &self,
        text: &str,
        context: &Context,
    ) -> Option<RouteDecision> {
        let rest = self.words.negations.iter().find_map(|n| {
            text.strip_prefix(n.as_str())
                .filter(|r| r.starts_with(' '))
                .map(str::trim)
        })?;
        let inner = self.command_of(rest, context)?;
        // A command whose "don't" asks for something ("don't remind me to
        // call mom": cancel that reminder) becomes that request.
        if let Intent::Chain(chain) = &inner.intent
            && let [command] = chain.commands.as_slice()
            && let Some(negation) = self
                .commands
                .get(&command.command_id)
                .and_then(|spec| spec.config.negation.as_ref())
        {
            let raw: BTreeMap<String, String> = negation
                .params
                .iter()
                .map(|(k, t)| (k.clone(), crate::command::render(t, &command.params)))
                .collect();
            let source = Some(format!("negation:{}", command.command_id));
            let built = self
                .resolve_command(&negation.command, raw.clone(), source.clone(), None)
                .map(|c| CommandChain::new(vec![c], None, None))
                .map_err(|problem| (negation.command.clone(), problem));
            let mut d = self.chain_decision("intent.command", source, built, &raw);
            d.layer = Layer::Negation;
            d.understood = Some(Reading {
                negated: Some(command.command_id.clone()),
                asks: Some(negation.command.clone()),
                ..Reading::by(Layer::Negation)
            });
            return Some(d);
        }
        let summary = match &inner.intent {
            Intent::Chain(chain) => chain.summary.clone(),
            _ => rest.to_owned(),
        };
        let mut d = RouteDecision::simple(
            "intent.negated",
            inner.source_rule.clone(),
            Intent::Reply(format!("Okay, I won't {summary}.")),
        );
        d.layer = Layer::Negation;
        d.understood = Some(Reading {
            negated: inner.command_id.clone(),
            summary: Some(summary),
            ..Reading::by(Layer::Negation)
        });
        Some(d)
    }

    /// Whether the sentence says "not", "never", "no" or a configured
    /// negation anywhere, other than in a saying that asks ("never mind the
    /// timer") or says who is there ("no one's in the guest room").
    pub(in crate::router) fn says_not(&self, text: &str) -> bool {
        // Words before a comma are words ("no, leave it").
        let mut padded = padded_words(text);
        for idiom in &self.words.negation_idioms {
            padded = padded.replace(&format!(" {idiom} "), " ");
        }
        for nobody in &self.words.not_negative {
            padded = padded.replace(&format!(" {nobody} "), " ");
        }
        (self.words.negative_words.iter())
            .chain(&self.words.negations)
            .any(|n| padded.contains(&format!(" {n} ")))
    }

    /// Whether clause `i` after a request says that something not of the
    /// home is not so ("put ten more minutes on the timer, the cake's not
    /// done"): said aside, its "not" negates no request.
    pub(in crate::router) fn not_so_aside(&self, i: usize, clause: &str) -> bool {
        let words: Vec<&str> = clause.split_whitespace().collect();
        let w = &self.words;
        let stated = words
            .windows(2)
            .any(|pair| w.negative_words.contains(&pair[1].to_owned()) && w.is_being(pair[0]));
        i > 0
            && stated
            && crate::understand::mentions::mentions(&self.home, clause, None).is_empty()
    }

    /// Whether the sentence tells of the past (a narrative word) and asks
    /// for nothing (no request verb): "my timer at work went off three
    /// times today" is a story, not a wish to cancel the timers.
    pub(in crate::router) fn tells_a_story(&self, text: &str) -> bool {
        // "I forgot to buy milk yesterday, typical": a word before a comma counts.
        let padded = padded_words(text);
        let has = |w: &String| padded.contains(&format!(" {w} "));
        (self.words.narrative_words.iter().any(has) || self.says_what_was_done(&padded))
            && !self.asks_in_words(text)
    }

    /// Whether `text` asks for something in words: one of `request_verbs`
    /// said as a request's verb (`asks_with`).
    pub(in crate::router) fn asks_in_words(&self, text: &str) -> bool {
        let mut padded = padded_words(text);
        // A word of a name of the home is no verb ("the porch light").
        let mut names: Vec<(usize, usize)> =
            (crate::understand::mentions::mentions(&self.home, &padded, None).iter())
                .map(|m| m.span())
                .collect();
        names.sort_unstable();
        let mut before = padded.len();
        for (start, end) in names.into_iter().rev() {
            // Overlapping names (none, as found) would shift what is left.
            if end <= before {
                padded.replace_range(start..end, "_");
                before = start;
            }
        }
        (self.words.request_verbs.iter()).any(|v| self.asks_with(&padded, v))
    }

    /// Whether `verb` is said in `padded` words as a request's verb: not
    /// as a word of how something is, one or two words after a verb of
    /// being ("the office lights are really dim"), nor as what someone
    /// does (`habit_before`: "I always lock the back door").
    fn asks_with(&self, padded: &str, verb: &str) -> bool {
        let words: Vec<&str> = padded.split_whitespace().collect();
        let being = |x: &str| self.words.is_being(x);
        let n = verb.split(' ').count();
        (0..words.len().saturating_sub(n - 1)).any(|i| {
            let before = &words[..i];
            let of_being = i >= 1 && being(words[i - 1]) || i >= 2 && being(words[i - 2]);
            let of_someone = self.habit_before(before) || self.told_before(before);
            words[i..i + n].join(" ") == verb && !of_being && !of_someone
        })
    }

    /// Whether `before` (the words before a verb) ends with words a story
    /// is told in (`narrative_words`: "the porch light used to | switch off
    /// by itself").
    fn told_before(&self, before: &[&str]) -> bool {
        let said = format!(" {}", before.join(" "));
        (self.words.narrative_words.iter()).any(|n| said.ends_with(&format!(" {n}")))
    }

    /// Whether `before` (the words before a verb) ends with someone
    /// (`narrative_subjects`, `behalf_people`) and only `habit_words` after them, no word
    /// that asks (`asking_modals`: "can I get …") before them.
    fn habit_before(&self, before: &[&str]) -> bool {
        let w = &self.words;
        let habit = |x: &&&str| w.habit_words.iter().any(|h| h == **x);
        let n = before.iter().rev().take_while(habit).count();
        let Some(at) = before.len().checked_sub(n + 1) else {
            return false;
        };
        let asked = at >= 1 && w.asking_modals.iter().any(|m| m == before[at - 1]);
        // Someone: "I", "she", or one of the people a request may be asked
        // for ("my husband always forgets to close the garage").
        let said = format!(" {}", before[..=at].join(" "));
        let someone = w.narrative_subjects.iter().any(|s| s == before[at])
            || (w.behalf_people.iter()).any(|p| said.ends_with(&format!(" {p}")));
        someone && !asked
    }

    /// Whether someone is said to have done something: a subject
    /// (`narrative_subjects`) and a word with a past ending right after it
    /// ("since we changed the bulbs", "I painted the hall"), or a past form
    /// the pack names (`past_forms`: "someone left the porch light on").
    fn says_what_was_done(&self, padded: &str) -> bool {
        let words: Vec<&str> = padded.split_whitespace().collect();
        words.windows(2).any(|pair| {
            self.words.narrative_subjects.iter().any(|s| s == pair[0])
                && self.words.is_past(pair[1])
        })
    }

    /// `text` with a prefix typed apart from its word joined to it ("un
    /// lock the front door": "unlock …"), when the prefix is no word the
    /// sentences know and the two together are; `None` when nothing joins.
    /// The vocabulary is consulted only when a prefix stands alone.
    pub(in crate::router) fn joined_prefix(&self, text: &str) -> Option<String> {
        let words: Vec<&str> = text.split(' ').collect();
        let alone = |w: &str| self.words.joined_prefixes.iter().any(|p| p == w);
        if !words[..words.len().saturating_sub(1)]
            .iter()
            .any(|w| alone(w))
        {
            return None;
        }
        let vocabulary = self.vocabulary.get_or_init(|| vocabulary_of(self));
        let mut out: Vec<String> = Vec::with_capacity(words.len());
        let mut joined = false;
        let mut rest = words.iter().peekable();
        while let Some(w) = rest.next() {
            if alone(w)
                && !vocabulary.contains_key(*w)
                && let Some(next) = rest.peek()
            {
                let whole = format!("{w}{next}");
                if vocabulary.contains_key(&whole) {
                    out.push(whole);
                    rest.next();
                    joined = true;
                    continue;
                }
            }
            out.push((*w).to_owned());
        }
        joined.then(|| out.join(" "))
    }

    /// A request found below the templates in a sentence that makes it wait
    /// on something ("if it gets dark, turn on the porch light", "turn off
    /// the lights when the timer rings") is not run now: the reply says so,
    /// and `understood` keeps what was found. A question ("when is the timer
    /// done") is no condition.
    pub(in crate::router) fn unless_conditional(
        &self,
        text: &str,
        d: RouteDecision,
    ) -> RouteDecision {
        // A request that changes nothing is answered now ("give me an
        // update on the house before I head to bed").
        if !self.changes_something(&d) || !self.says_condition(text) {
            return d;
        }
        let mut understood = d.understood.clone().unwrap_or_else(|| Reading::by(d.layer));
        understood.conditional = true;
        understood.would_run = d.command_id.clone();
        let mut out = RouteDecision::simple(
            "intent.conditional",
            d.source_rule.clone(),
            Intent::Reply(self.conditional_reply.clone()),
        );
        out.layer = d.layer;
        out.understood = Some(understood);
        out.confidence = d.confidence;
        out
    }

    fn says_condition(&self, text: &str) -> bool {
        let padded = padded_words(text);
        self.words.conditions.iter().any(|c| {
            let mut from = 0;
            while let Some(at) = padded[from..].find(&format!(" {c} ")).map(|i| from + i) {
                let after = padded[at + c.len() + 2..].split(' ').next().unwrap_or("");
                // "when is the timer done", "until when": a question, not a condition.
                let asks = self.words.condition_questions.iter().any(|q| q == after);
                // "…, that's when screen time ends": it tells when.
                let told = (self.words.condition_told.iter())
                    .any(|t| padded[..at].ends_with(&format!(" {t}")));
                if !(asks || told || after.is_empty()) {
                    return true;
                }
                from = at + 1;
            }
            false
        })
    }
}
