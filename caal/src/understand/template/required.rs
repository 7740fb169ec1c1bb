//! What a template needs of a sentence before it is matched: the literal
//! words it must contain and the lists it reads, to skip templates cheaply.

use std::collections::HashMap;

use super::matching::MAX_DEPTH;

use super::*;

/// Literal strings the input must contain for `expr` to match it, as
/// clauses (each: at least one of these appears), to skip templates cheaply.
pub fn required(expr: &Expr, rules: &HashMap<String, Expr>, depth: u32) -> Vec<Vec<String>> {
    if depth > MAX_DEPTH {
        return Vec::new();
    }
    match expr {
        Expr::Text(t) => {
            let t = t.trim();
            if t.is_empty() {
                Vec::new()
            } else {
                vec![vec![t.to_owned()]]
            }
        }
        Expr::Seq(items) => items
            .iter()
            .flat_map(|i| required(i, rules, depth))
            .collect(),
        Expr::Alt(options) => {
            // At least one option matched, so at least one of their first clauses holds.
            let mut clause = Vec::new();
            for o in options {
                match required(o, rules, depth).into_iter().next() {
                    Some(first) => clause.extend(first),
                    None => return Vec::new(),
                }
            }
            vec![clause]
        }
        Expr::Rule(name) => rules
            .get(&**name)
            .map(|body| required(body, rules, depth + 1))
            .unwrap_or_default(),
        Expr::List { .. } => Vec::new(),
    }
}

/// Every literal word `expr` may match, on any path through it (its rules
/// followed), into `out`: the words a sentence library knows.
pub fn literal_words(
    expr: &Expr,
    rules: &HashMap<String, Expr>,
    depth: u32,
    out: &mut std::collections::HashSet<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match expr {
        Expr::Text(t) => out.extend(t.split(' ').filter(|w| !w.is_empty()).map(str::to_owned)),
        Expr::Seq(items) | Expr::Alt(items) => {
            for i in items {
                literal_words(i, rules, depth, out);
            }
        }
        Expr::Rule(name) => {
            if let Some(body) = rules.get(&**name) {
                literal_words(body, rules, depth + 1, out);
            }
        }
        Expr::List { .. } => {}
    }
}

/// The lists every reading of `expr` fills (on every path through it), to
/// skip a template when none of a list's values is in the input.
pub fn required_lists(expr: &Expr, rules: &HashMap<String, Expr>, depth: u32) -> Vec<String> {
    if depth > MAX_DEPTH {
        return Vec::new();
    }
    match expr {
        Expr::Text(_) => Vec::new(),
        Expr::Seq(items) => items
            .iter()
            .flat_map(|i| required_lists(i, rules, depth))
            .collect(),
        Expr::Alt(options) => {
            let mut sets = options.iter().map(|o| required_lists(o, rules, depth));
            let Some(first) = sets.next() else {
                return Vec::new();
            };
            sets.fold(first, |kept, next| {
                kept.into_iter().filter(|l| next.contains(l)).collect()
            })
        }
        Expr::Rule(name) => rules
            .get(&**name)
            .map(|body| required_lists(body, rules, depth + 1))
            .unwrap_or_default(),
        Expr::List { list, .. } => vec![list.to_string()],
    }
}

/// Whether some value of `list` could be in `input`: each value's words
/// (one of its first clause) looked for; lists of numbers, durations and
/// wildcards are always possible.
pub fn list_possible(list: &SlotList, input: &str) -> bool {
    let SlotList::Values(values) = list else {
        return true;
    };
    let none = HashMap::new();
    values
        .iter()
        .any(|v| match required(&v.said, &none, 0).into_iter().next() {
            Some(clause) => clause.iter().any(|w| input.contains(w.as_str())),
            None => true,
        })
}

/// The list and rule names a template uses (for checks at load time).
pub fn references<'a>(expr: &'a Expr, lists: &mut Vec<&'a str>, rules: &mut Vec<&'a str>) {
    match expr {
        Expr::Text(_) => {}
        Expr::Seq(items) | Expr::Alt(items) => {
            for i in items {
                references(i, lists, rules);
            }
        }
        Expr::List { list, .. } => lists.push(list),
        Expr::Rule(name) => rules.push(name),
    }
}
