//! Several things in one value: "put eggs, flour and milk on the list" is
//! one command per thing, in one chain, for a command whose parameter takes
//! one thing at a time (`several = true` in its spec). The words that join
//! a list and the things that are one though joined ("mac and cheese") are
//! the language's (`list_joins`, `joined_items`).

use serde_json::json;

use super::{Intent, RouteDecision, Router};
use crate::auth::{Command, CommandChain};

impl Router {
    /// `d` with each command whose `several` value was said as a list made
    /// one command per thing; `d` itself when none was, or when a thing
    /// would not make a command.
    pub(super) fn each_of_several(&self, d: RouteDecision) -> RouteDecision {
        let Intent::Chain(chain) = &d.intent else {
            return d;
        };
        if !chain.commands.iter().any(|c| self.listed(c).is_some()) {
            return d;
        }
        let mut commands: Vec<Command> = Vec::new();
        let mut things = Vec::new();
        for c in &chain.commands {
            let Some((param, items)) = self.listed(c) else {
                commands.push(c.clone());
                continue;
            };
            for item in items {
                let mut raw = c.raw_params.clone();
                raw.insert(param.clone(), item.clone());
                let Ok(mut one) = self.resolve_command(
                    &c.command_id,
                    raw,
                    c.source_rule.clone(),
                    Some(c.auth_level),
                ) else {
                    return d;
                };
                one.decision = c.decision.clone();
                commands.push(one);
                things.push(item);
            }
        }
        let new = CommandChain::new(commands, chain.macro_name.clone(), None);
        let mut understood = d
            .understood
            .clone()
            .unwrap_or_else(|| json!({"layer": d.layer}));
        if let Some(u) = understood.as_object_mut() {
            u.insert("several".into(), json!(things));
        }
        RouteDecision {
            auth_level: new.chain_level,
            command_id: new.command_id().map(str::to_owned),
            params: match new.commands.as_slice() {
                [one] => json!(one.params),
                _ => json!({}),
            },
            intent: Intent::Chain(new),
            understood: Some(understood),
            ..d
        }
    }

    /// The parameter of `c` said as a list, and its things (two or more).
    fn listed(&self, c: &Command) -> Option<(String, Vec<String>)> {
        let spec = self.command(&c.command_id)?;
        spec.config
            .params
            .iter()
            .filter(|(_, p)| p.several)
            .find_map(|(name, _)| {
                let said = c.raw_params.get(name)?;
                let things = list_of(said, &self.list_joins, &self.joined_items);
                (things.len() > 1).then(|| (name.clone(), things))
            })
    }
}

/// The things of a list as said ("eggs, flour and milk"): split at the
/// joining words and commas, a thing that is one though joined kept whole.
fn list_of(said: &str, joins: &[String], joined: &[String]) -> Vec<String> {
    let lower = said.to_lowercase();
    // Things that are one though joined are kept from the split.
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for j in joined {
        let mut from = 0;
        while let Some(at) = lower[from..].find(j.as_str()) {
            let (start, end) = (from + at, from + at + j.len());
            let bounded = |i: usize, before: bool| {
                let c = if before {
                    lower[..i].chars().next_back()
                } else {
                    lower[i..].chars().next()
                };
                c.is_none_or(|c| !c.is_alphanumeric())
            };
            if bounded(start, true) && bounded(end, false) {
                kept.push((start, end));
            }
            from = end;
        }
    }
    let inside = |i: usize| kept.iter().any(|&(s, e)| i >= s && i < e);
    let mut things = Vec::new();
    let mut thing = String::new();
    let words = said.char_indices();
    let mut word_start = 0;
    let mut word = String::new();
    let flush_word =
        |word: &mut String, start: usize, thing: &mut String, things: &mut Vec<String>| {
            if word.is_empty() {
                return;
            }
            if !inside(start) && joins.iter().any(|j| j.eq_ignore_ascii_case(word)) {
                let t = thing.trim().to_owned();
                if !t.is_empty() {
                    things.push(t);
                }
                thing.clear();
            } else {
                thing.push(' ');
                thing.push_str(word);
            }
            word.clear();
        };
    for (i, c) in words {
        if c == ',' && !inside(i) {
            flush_word(&mut word, word_start, &mut thing, &mut things);
            let t = thing.trim().to_owned();
            if !t.is_empty() {
                things.push(t);
            }
            thing.clear();
        } else if c.is_whitespace() {
            flush_word(&mut word, word_start, &mut thing, &mut things);
        } else {
            if word.is_empty() {
                word_start = i;
            }
            word.push(c);
        }
    }
    flush_word(&mut word, word_start, &mut thing, &mut things);
    let t = thing.trim().to_owned();
    if !t.is_empty() {
        things.push(t);
    }
    things
}

#[cfg(test)]
mod tests {
    use super::list_of;

    #[test]
    fn a_list_is_its_things_and_a_thing_joined_by_name_stays_whole() {
        let joins: Vec<String> = ["and", "&", "plus"].map(String::from).to_vec();
        let joined: Vec<String> = ["mac and cheese", "fish and chips"]
            .map(String::from)
            .to_vec();
        let list = |s: &str| list_of(s, &joins, &joined);
        assert_eq!(list("eggs and flour"), ["eggs", "flour"]);
        assert_eq!(list("eggs, flour, and milk"), ["eggs", "flour", "milk"]);
        assert_eq!(
            list("2 lemons & a bag of rice"),
            ["2 lemons", "a bag of rice"]
        );
        assert_eq!(list("mac and cheese"), ["mac and cheese"]);
        assert_eq!(
            list("bread and mac and cheese"),
            ["bread", "mac and cheese"]
        );
        // "android" holds "and" inside a word: no join.
        assert_eq!(list("android charger"), ["android charger"]);
        assert_eq!(list("oat milk"), ["oat milk"]);
    }
}
