//! Several things in one value: "put eggs, flour and milk on the list" is
//! one command per thing, in one chain, for a command whose parameter takes
//! one thing at a time (`several = true` in its spec). The words that join
//! a list and the things that are one though joined ("mac and cheese") are
//! the language's (`list_joins`, `joined_items`).

use serde_json::json;

use super::{Intent, RouteDecision, Router};
use crate::{
    auth::{Command, CommandChain},
    understand::Reading,
};

impl Router {
    /// `d` with each command whose `several` value was said as a list made
    /// one command per thing; `d` itself when none was, or when a thing
    /// would not make a command.
    pub(super) fn each_of_several(&self, d: RouteDecision) -> RouteDecision {
        let Intent::Chain(chain) = &d.intent else {
            return d;
        };
        let listed: Vec<_> = chain.commands.iter().map(|c| self.listed(c)).collect();
        if listed.iter().all(Option::is_none) {
            return d;
        }
        let mut commands: Vec<Command> = Vec::new();
        let mut things = Vec::new();
        for (c, listed) in chain.commands.iter().zip(listed) {
            let Some((param, items)) = listed else {
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
        let mut understood = d.understood.clone().unwrap_or_else(|| Reading::by(d.layer));
        understood.several = things;
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

    /// The parameter of `c` said as a list, and its things: two or more,
    /// or one said with a word before it that is no part of a thing ("the
    /// bananas", "some milk", "oh": the language's `item_fillers`).
    fn listed(&self, c: &Command) -> Option<(String, Vec<String>)> {
        let spec = self.command(&c.command_id)?;
        spec.config
            .params
            .iter()
            .filter(|(_, p)| p.several)
            .find_map(|(name, _)| {
                let said = c.raw_params.get(name)?;
                let mut things: Vec<String> =
                    list_of(said, &self.words.list_joins, &self.words.joined_items)
                        .into_iter()
                        .map(|t| self.without_fillers(&t))
                        .collect();
                // A thing of fillers alone among others is none ("milk, eggs,
                // oh and butter").
                let only_fillers = |t: &String| t.split(' ').all(|w| self.is_filler(w));
                if things.iter().any(|t| !only_fillers(t)) {
                    things.retain(|t| !only_fillers(t));
                }
                (things.len() > 1 || things.first().is_some_and(|t| t != said))
                    .then(|| (name.clone(), things))
            })
    }

    /// Whether `word` names no part of a thing (`item_fillers`: "some").
    fn is_filler(&self, word: &str) -> bool {
        (self.words.item_fillers.iter()).any(|f| f.eq_ignore_ascii_case(word))
    }

    /// A thing without the words before it that name no part of it; the
    /// thing as said when nothing else is left ("some" alone).
    fn without_fillers(&self, thing: &str) -> String {
        let words: Vec<&str> = thing.split(' ').skip_while(|w| self.is_filler(w)).collect();
        if words.is_empty() {
            thing.to_owned()
        } else {
            words.join(" ")
        }
    }
}

/// The things of a list as said ("eggs, flour and milk"): split at the
/// joining words and commas, a thing that is one though joined kept whole.
fn list_of(said: &str, joins: &[String], joined: &[String]) -> Vec<String> {
    // A comma joins as a word of its own.
    let spaced = said.replace(',', " , ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let joined: Vec<Vec<&str>> = joined
        .iter()
        .map(|j| j.split_whitespace().collect())
        .collect();
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    let mut things = Vec::new();
    let mut thing: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let whole = joined.iter().find(|j| {
            words
                .get(i..i + j.len())
                .is_some_and(|w| w.iter().zip(j.iter()).all(|(w, j)| same(w, j)))
        });
        if let Some(j) = whole {
            thing.extend(&words[i..i + j.len()]);
            i += j.len();
            continue;
        }
        if words[i] == "," || joins.iter().any(|j| same(j, words[i])) {
            if !thing.is_empty() {
                things.push(thing.join(" "));
                thing.clear();
            }
        } else {
            thing.push(words[i]);
        }
        i += 1;
    }
    if !thing.is_empty() {
        things.push(thing.join(" "));
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
