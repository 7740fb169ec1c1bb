//! Home Assistant's sentence-template language (hassil), parsed and matched
//! in Rust: alternatives `(a|b)`, optional parts `[a]`, permutations
//! `(a;b)`, slot lists `{list}` / `{list:slot}` (values, numeric ranges,
//! wildcards), expansion rules `<rule>`, escapes `\x`.
//!
//! Matching works on normalised text (`super::normalize`) byte by byte with
//! every reading kept (a backtracking matcher written as a set of states),
//! so a wildcard or a number may end wherever the rest of the sentence
//! still fits. A space in a template is a word boundary: it takes the
//! input's space, or none at the start, the end, or after a space already
//! taken, so "on" never matches the start of "one". No crate implements
//! this syntax in Rust; the Python reference is the `hassil` package.

mod matching;
mod required;

pub use matching::*;
pub use required::*;

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// Normalised literal text; a space is a word boundary.
    Text(Box<str>),
    Seq(Vec<Expr>),
    /// One of; an optional part is an `Alt` with an empty `Seq`.
    Alt(Vec<Expr>),
    /// `{list}` or `{list:slot}`.
    List {
        list: Box<str>,
        slot: Box<str>,
    },
    /// `<rule>`.
    Rule(Box<str>),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("template {template:?}: {problem}")]
pub struct TemplateError {
    pub template: String,
    pub problem: String,
}

/// Parses one template.
pub fn parse(template: &str) -> Result<Expr, TemplateError> {
    let mut p = Parser {
        chars: template.chars().collect(),
        at: 0,
    };
    let fail = |problem: String| TemplateError {
        template: template.to_owned(),
        problem,
    };
    // A template may be alternatives at its top level ("a|b"), as a group is.
    let expr = p.group(None).map_err(fail)?;
    if p.at < p.chars.len() {
        return Err(fail(format!(
            "unexpected {:?} at character {}",
            p.chars[p.at],
            p.at + 1
        )));
    }
    Ok(expr)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn seq(&mut self, stop: &[char]) -> Result<Expr, String> {
        let mut items = Vec::new();
        let mut text = String::new();
        let flush = |text: &mut String, items: &mut Vec<Expr>| {
            if !text.is_empty() {
                items.push(Expr::Text(std::mem::take(text).into()));
            }
        };
        while let Some(&c) = self.chars.get(self.at) {
            if stop.contains(&c) {
                break;
            }
            self.at += 1;
            match c {
                '(' | '[' => {
                    flush(&mut text, &mut items);
                    let close = if c == '(' { ')' } else { ']' };
                    let group = self.group(Some(close))?;
                    items.push(if c == '[' {
                        Expr::Alt(vec![group, Expr::Seq(vec![])])
                    } else {
                        group
                    });
                }
                '{' | '<' => {
                    flush(&mut text, &mut items);
                    let close = if c == '{' { '}' } else { '>' };
                    let start = self.at;
                    while self.chars.get(self.at).is_some_and(|&x| x != close) {
                        self.at += 1;
                    }
                    if self.at >= self.chars.len() {
                        return Err(format!("{c} is never closed with {close}"));
                    }
                    let name: String = self.chars[start..self.at].iter().collect();
                    self.at += 1;
                    let name = name.trim();
                    if name.is_empty() {
                        return Err(format!("an empty {c}{close}"));
                    }
                    items.push(if c == '{' {
                        let (list, slot) = name.split_once(':').unwrap_or((name, name));
                        Expr::List {
                            list: list.trim().into(),
                            slot: slot.trim().into(),
                        }
                    } else {
                        Expr::Rule(name.into())
                    });
                }
                '\\' => {
                    if let Some(&next) = self.chars.get(self.at) {
                        self.at += 1;
                        push_normalized(&mut text, next);
                    }
                }
                ')' | ']' | '|' | ';' | '}' | '>' => {
                    return Err(format!("{c:?} without its opening bracket"));
                }
                _ => push_normalized(&mut text, c),
            }
        }
        flush(&mut text, &mut items);
        Ok(match items.len() {
            1 => items.pop().unwrap_or(Expr::Seq(vec![])),
            _ => Expr::Seq(items),
        })
    }

    /// The inside of `( … )` or `[ … ]` (or a whole template, `close`
    /// none): alternatives split by `|`, permutation items by `;`.
    fn group(&mut self, close: Option<char>) -> Result<Expr, String> {
        let mut alts = Vec::new();
        let mut items = Vec::new();
        let stops: Vec<char> = ['|', ';'].into_iter().chain(close).collect();
        loop {
            alts.push(self.seq(&stops)?);
            match (self.chars.get(self.at), close) {
                (Some('|'), _) => self.at += 1,
                (Some(';'), _) => {
                    self.at += 1;
                    items.push(one_of(std::mem::take(&mut alts)));
                }
                (Some(c), Some(close)) if *c == close => {
                    self.at += 1;
                    break;
                }
                (None, None) => break,
                (_, Some(close)) => return Err(format!("a group is never closed with {close}")),
                (Some(c), None) => return Err(format!("{c:?} without its opening bracket")),
            }
        }
        if items.is_empty() {
            return Ok(one_of(alts));
        }
        items.push(one_of(alts));
        if items.len() > 5 {
            return Err("a permutation of more than 5 parts".into());
        }
        // Every order of the items, a word boundary between them.
        let mut orders = Vec::new();
        permute(&mut (0..items.len()).collect::<Vec<_>>(), 0, &mut orders);
        Ok(Expr::Alt(
            orders
                .into_iter()
                .map(|order| {
                    let mut seq = Vec::new();
                    for (n, i) in order.into_iter().enumerate() {
                        if n > 0 {
                            seq.push(Expr::Text(" ".into()));
                        }
                        seq.push(items[i].clone());
                    }
                    Expr::Seq(seq)
                })
                .collect(),
        ))
    }
}

fn one_of(mut alts: Vec<Expr>) -> Expr {
    if alts.len() == 1 {
        alts.pop().unwrap_or(Expr::Seq(vec![]))
    } else {
        Expr::Alt(alts)
    }
}

fn permute(order: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
    if k == order.len() {
        out.push(order.clone());
        return;
    }
    for i in k..order.len() {
        order.swap(k, i);
        permute(order, k + 1, out);
        order.swap(k, i);
    }
}

/// A template's literal character as the input is normalised: lower case,
/// a hyphen or punctuation is a space, spaces never doubled.
fn push_normalized(text: &mut String, c: char) {
    let c = match c {
        '-' | ',' | '!' | '?' | '¿' | '¡' | '"' | '\t' | '\n' => ' ',
        '’' => '\'',
        c => c,
    };
    if c == ' ' {
        if !text.ends_with(' ') {
            text.push(' ');
        }
        return;
    }
    text.extend(c.to_lowercase());
}

#[cfg(test)]
mod tests;
