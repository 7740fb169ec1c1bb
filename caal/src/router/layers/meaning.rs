//! The meaning layer: the nearest examples in meaning, their doubt, and
//! the model layer's choice among them.

use super::*;

/// Each text of `saids` (a reading, and the words heard) with each word of
/// an opposite pair it holds put as the other ("pause the timer": "unpause
/// the timer", "resume the timer"), each reading once.
///
/// Where the word follows one that speech to text writes for a prefix
/// (`heard_as`: "and lock" for "unlock") and its other side is it with a
/// prefix, that word is dropped too ("and lock the door": "unlock the door").
fn opposite_readings<'a>(
    pairs: &[[String; 2]],
    heard_as: &[String],
    saids: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut keep = |text: String| {
        if !out.contains(&text) {
            out.push(text);
        }
    };
    for said in saids {
        let words: Vec<&str> = said.split(' ').collect();
        for (i, w) in words.iter().enumerate() {
            for [a, b] in pairs {
                let other = if w == a {
                    b
                } else if w == b {
                    a
                } else {
                    continue;
                };
                let mut swapped = words.clone();
                swapped[i] = other;
                keep(swapped.join(" "));
                let prefixed = other.len() > w.len() && other.ends_with(*w);
                if prefixed && i > 0 && heard_as.iter().any(|h| h == words[i - 1]) {
                    swapped.remove(i - 1);
                    keep(swapped.join(" "));
                }
            }
        }
    }
    out
}

impl Router {
    /// What no template matched, by the examples nearest in meaning: a
    /// request when the nearest is one, near enough, clearly nearer than any
    /// other meaning, and its slots could be read; asked about first (level
    /// 3) unless it is sure. Never for a sentence that says "not" or a
    /// negation: nearness in meaning does not see them. When it is not sure
    /// (or not near enough, or not clearly apart) and the model layer is on,
    /// the nearest meanings come back as choices for a model.
    pub(in crate::router) fn by_meaning(&self, text: &str, context: &Context) -> Meaning {
        let Some(semantic) = self.semantic.as_ref() else {
            return Meaning::default();
        };
        // The meaning layer is there: what it leaves out is near nothing.
        let nothing = Meaning {
            near: Some(Vec::new()),
            ..Meaning::default()
        };
        // Embeddings barely tell "lock the door" from "don't lock the door",
        // or "it was dark in the office" from "it's dark in the office": a
        // sentence with a negation, or a story, is left to the other layers.
        if self.says_not(text) || self.tells_a_story(text) {
            return nothing;
        }
        let asks = self.asks_whether(text);
        let found = match semantic.understand(text, &self.home, context, asks) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!("semantic layer: {e}");
                return nothing;
            }
        };
        let cfg = &semantic.config;
        let Some(best) = found.nearest.first() else {
            return nothing;
        };
        // A meaning that fixes what the sentence says outright ("dim the
        // kitchen lights", to 30, when "like 40 percent" was said) yields to
        // the same meaning, as near, that reads it ("dim the hallway to 25
        // percent").
        let mut understood = found.understood.clone();
        let reads_it = found
            .nearest
            .iter()
            .skip(1)
            .take_while(|n| best.score - n.score < cfg.margin)
            .filter(|n| {
                n.intent == best.intent
                    && n.slots.len() < best.slots.len()
                    && n.slots.iter().all(|(k, v)| best.slots.get(k) == Some(v))
            })
            .find_map(|n| {
                let u = semantic.reading(n, text, &self.home, context)?;
                best.slots
                    .keys()
                    .filter(|k| !n.slots.contains_key(*k))
                    .all(|k| u.slots.get(k).is_some_and(|s| !s.said.is_empty()))
                    .then_some((n, u))
            });
        let best = match reads_it {
            Some((n, u)) => {
                understood = Some(u);
                n
            }
            None => best,
        };
        // And a meaning that only fixes what the sentence says outright is
        // no rival of one that reads it.
        let said = |k: &String| {
            understood
                .as_ref()
                .and_then(|u| u.slots.get(k))
                .is_some_and(|s| !s.said.is_empty())
        };
        let other = found.nearest.iter().find(|n| {
            let fixes_what_is_said = n.intent == best.intent
                && best.slots.iter().all(|(k, v)| n.slots.get(k) == Some(v))
                && n.slots.iter().all(|(k, v)| {
                    best.slots.get(k) == Some(v) || (!best.slots.contains_key(k) && said(k))
                });
            (n.intent != best.intent || n.slots != best.slots) && !fixes_what_is_said
        });
        let apart = other.is_none_or(|o| best.score - o.score >= cfg.margin);
        let decided = understood
            .as_ref()
            .filter(|_| best.score >= cfg.threshold && apart)
            .and_then(|u| {
                let raise_to = (best.score < cfg.sure).then_some(AuthLevel::CONFIRM);
                let mut d = self.intent_command(u, Layer::Semantic, raise_to, |r| {
                    r.nearest = found.nearest_read(3)
                })?;
                d.confidence = best.score;
                Some(d)
            })
            .filter(|d| self.speaks_of_its_kind(text, d))
            .filter(|d| !self.remarked(text, d, best.score >= cfg.sure))
            .filter(|d| !self.asks_whether(text) || !self.changes_something(d));
        let sure = decided.as_ref().is_some_and(|_| best.score >= cfg.sure);
        let m = &self.model_choice;
        let choices = if m.enabled && !sure && best.score >= m.floor {
            self.choices(semantic, &found, text, context)
        } else {
            Vec::new()
        };
        let near = Some(self.near_commands(&found.nearest));
        Meaning {
            decided,
            choices,
            near,
        }
    }

    /// The commands of the requests at least the model layer's `floor`
    /// near and not clearly (by the margin) further than the nearest talk,
    /// nearest first, at most `candidates` of them: each intent's commands
    /// whose `when` the meaning's slots do not contradict.
    pub(in crate::router) fn near_commands(
        &self,
        nearest: &[crate::understand::semantic::Near],
    ) -> Vec<String> {
        let m = &self.model_choice;
        // Talk clearly nearer than a request says what this is.
        let margin = self.semantic.as_ref().map_or(0.0, |s| s.config.margin);
        let talk = nearest
            .iter()
            .find(|n| n.intent == "-")
            .map_or(0.0, |n| n.score);
        let mut near: Vec<String> = Vec::new();
        for n in nearest
            .iter()
            .filter(|n| n.intent != "-" && n.score >= m.floor && n.score + margin >= talk)
        {
            for command in self.commands_of(n) {
                if !near.contains(&command) {
                    near.push(command);
                }
            }
            if near.len() >= m.candidates {
                break;
            }
        }
        near
    }

    /// The commands a meaning maps to: its intent's, whose `when` its slots
    /// do not contradict.
    fn commands_of<'a>(
        &'a self,
        n: &'a crate::understand::semantic::Near,
    ) -> impl Iterator<Item = String> + 'a {
        self.intent_maps
            .iter()
            .filter(|map| {
                map.intent == n.intent
                    && map
                        .when
                        .iter()
                        .all(|(k, v)| v == "*" || n.slots.get(k).is_none_or(|s| s == v))
            })
            .map(|map| map.command.clone())
    }

    /// The nearest meanings as choices for a model: each request at least
    /// the floor near, as the command it would run (its summary), in the
    /// order of their words, then one way out ("none of these") with the
    /// nearest talk example. No request near enough: no choices.
    pub(in crate::router) fn choices(
        &self,
        semantic: &crate::understand::Semantic,
        found: &crate::understand::semantic::Found,
        text: &str,
        context: &Context,
    ) -> Vec<Choice> {
        let mut choices: Vec<Choice> = Vec::new();
        let mut talk: Option<Choice> = None;
        for (rank, near) in found.nearest.iter().enumerate() {
            if talk.is_some() && choices.len() >= self.model_choice.candidates {
                break;
            }
            if near.intent == "-" {
                talk.get_or_insert(Choice {
                    label: NONE_OF_THESE.into(),
                    example: near.example.clone(),
                    similarity: near.score,
                    rank,
                    understood: None,
                });
                continue;
            }
            // A request below the floor is no candidate, however it ranks.
            if choices.len() >= self.model_choice.candidates || near.score < self.model_choice.floor
            {
                continue;
            }
            let Some(u) = semantic.reading(near, text, &self.home, context) else {
                continue;
            };
            let Some(d) = self.intent_command(&u, Layer::Model, None, |_| {}) else {
                continue;
            };
            let label = match &d.intent {
                Intent::Chain(chain) => chain.summary.clone(),
                _ => continue,
            };
            if choices.iter().any(|c| c.label == label) {
                continue;
            }
            choices.push(Choice {
                label,
                example: near.example.clone(),
                similarity: near.score,
                rank,
                understood: Some(u),
            });
        }
        if choices.is_empty() {
            return choices;
        }
        choices.sort_by(|a, b| a.label.cmp(&b.label));
        choices.push(talk.unwrap_or_else(|| Choice {
            label: NONE_OF_THESE.into(),
            example: String::new(),
            similarity: 0.0,
            rank: found.nearest.len(),
            understood: None,
        }));
        choices
    }

    /// A spoken request run at level 1 or 2 whose words say one side of an
    /// opposite pair ("pause the timer", "lights off") is asked about
    /// first when the same words with the other side fit the audio about
    /// as well (within `doubt_margin` of whisper's log-likelihood): a
    /// mishearing there would run the opposite of what was said; so for a
    /// word of a pair heard alike (`heard_alike`: "18", "80"). The words are
    /// the sound layer's reading, else what was heard; the words heard, each
    /// side word surely (`sides_heard_surely`), are not weighed.
    pub fn doubted(
        &self,
        mut d: RouteDecision,
        (heard, words): (&str, &[HeardWord]),
        context: &Context,
    ) -> RouteDecision {
        let Some(sounds) = self.sounds.as_ref() else {
            return d;
        };
        let margin = sounds.config.doubt_margin;
        let Some(listen) = context.listen.as_ref().filter(|_| margin > 0.0) else {
            return d;
        };
        let Intent::Chain(chain) = &d.intent else {
            return d;
        };
        if chain.chain_level >= AuthLevel::CONFIRM {
            return d;
        }
        let said = d
            .understood
            .as_ref()
            .and_then(|u| u.read_as.as_deref())
            .map(normalize)
            .unwrap_or_else(|| heard.to_owned());
        // The words as heard too: a reading by sound may have dropped the
        // word a prefix was heard as ("and lock the door" read "lock the door").
        let w = &self.words;
        let sides: Vec<_> = w.opposites.iter().chain(&w.heard_alike).cloned().collect();
        let others = opposite_readings(&sides, &w.prefix_heard_as, [said.as_str(), heard]);
        if others.is_empty() {
            return d;
        }
        let pairs = (&sides[..], &w.prefix_heard_as[..]);
        if said == heard && sides_heard_surely(&said, pairs, words, margin) {
            return d;
        }
        let mut texts = vec![said.clone()];
        texts.extend(others.iter().cloned());
        let Some(scores) = listen.score(&texts) else {
            return d;
        };
        let (best, fit) = scores[1..]
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, s)| (i, f64::from(scores[0] - s)))
            .unwrap_or((0, f64::INFINITY));
        if fit > margin {
            return d;
        }
        if let Intent::Chain(chain) = &mut d.intent {
            chain.chain_level = AuthLevel::CONFIRM;
        }
        d.auth_level = AuthLevel::CONFIRM;
        let doubt = Doubt {
            other: others[best].clone(),
            fits_better_by: (fit * 100.0).round() / 100.0,
            margin,
        };
        d.understood
            .get_or_insert_with(|| Reading::by(d.layer))
            .doubt = Some(doubt);
        d
    }

    /// The decision after a model chose among `d.choices` (`pick`: the
    /// index chosen; none when the model gave no usable answer, which keeps
    /// `d`). The meaning layer's own nearest, chosen by the model too and
    /// near enough to count, runs at its configured level: two layers
    /// agree. Any other request chosen is asked about first (level 3).
    /// "None of these" is no request: the state's unmatched route.
    pub fn chosen(&self, d: RouteDecision, pick: Option<usize>, state: &str) -> RouteDecision {
        let Some(choice) = pick.and_then(|i| d.choices.get(i)) else {
            return d;
        };
        let threshold = self
            .semantic
            .as_ref()
            .map_or(f64::INFINITY, |s| s.config.threshold);
        let options = d
            .choices
            .iter()
            .map(|c| Offered {
                label: c.label.clone(),
                example: c.example.clone(),
                rank: c.rank,
                similarity: round3(c.similarity),
            })
            .collect();
        let evidence = ModelChoice {
            picked: pick,
            options,
        };
        let Some(u) = &choice.understood else {
            let mut none = self.unmatched(state);
            none.layer = Layer::Model;
            none.understood = Some(Reading {
                intent: Some("-".into()),
                choice: Some(evidence),
                ..Reading::by(Layer::Model)
            });
            none.confidence = choice.similarity;
            return none;
        };
        let agreed = choice.rank == 0 && choice.similarity >= threshold;
        let raise_to = (!agreed).then_some(AuthLevel::CONFIRM);
        match self.intent_command(u, Layer::Model, raise_to, |r| r.choice = Some(evidence)) {
            Some(mut decided) => {
                decided.confidence = choice.similarity;
                decided
            }
            None => d,
        }
    }
}
