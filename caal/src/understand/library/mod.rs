//! The sentence library: Home Assistant's compiled intents for one language
//! (the `home-assistant-intents` package, CC BY 4.0, installed by the
//! setup: its `data/<lang>.json`) and CAAL's own sentences from
//! configuration, in the same template syntax; matched against what was
//! said with the home's lists, its skip words removed, context checked.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::template::{
    self, Expr, ListValue, RangeList, Reading, Scope, SlotList, match_all, parse,
};
use super::{Context, Home, Lang, Slot, Understood, normalize};

mod load;
mod reading;

#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    #[error(
        "the sentence library {path} is not there ({source}); run `bash .ci/setup` to install it, or set understand.templates = false"
    )]
    Missing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the sentence library {path} is not Home Assistant's compiled intents JSON: {problem}")]
    Format { path: PathBuf, problem: String },
    #[error("language {0:?} has no number reader here; use \"en\" or \"de\"")]
    Language(String),
    #[error(transparent)]
    Template(#[from] template::TemplateError),
}

struct Sentence {
    intent: Arc<str>,
    text: String,
    expr: Expr,
    /// Words the input must have, one of each clause, as indices into
    /// `Library::words`.
    required: Vec<Vec<usize>>,
    /// Lists every reading fills: none of a list's values in the input, no match.
    required_lists: Vec<String>,
    slots: BTreeMap<String, Value>,
    requires_context: BTreeMap<String, Value>,
    excludes_context: BTreeMap<String, Value>,
    source: &'static str,
    /// Whether it names the home's areas or devices (for the open pass).
    names_home: bool,
    /// Whether the sound layer may read what was heard as it.
    by_sound: bool,
}

/// Compiled sentences for one language.
pub struct Library {
    pub lang: Lang,
    /// Where the sentences came from, for `caal config check` and the trace.
    pub origin: String,
    rules: HashMap<String, Expr>,
    lists: HashMap<String, SlotList>,
    skip_words: Vec<Vec<String>>,
    sentences: Vec<Sentence>,
    /// Every word some sentence requires, once: each input is searched for
    /// each of them once (sentences share most; searching the input again
    /// for every sentence was most of what matching cost on input nothing
    /// matched).
    words: Vec<String>,
    word_at: HashMap<String, usize>,
    /// All of `words` found in one pass over the input (made at first use;
    /// a word added empties it).
    finder: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>>,
}

/// The package version the setup installs; its data is looked for in
/// `<intents dir>/home-assistant-intents-<version>/data/<lang>.json`.
pub const HA_INTENTS_VERSION: &str = "2026.10.27";

/// Where the setup puts the sentence library: `$CAAL_INTENTS_DIR`, else
/// beside the models (`$XDG_DATA_HOME/caal/intents`).
pub fn library_path(env: &dyn Fn(&str) -> Option<String>, lang: Lang) -> PathBuf {
    let dir = env("CAAL_INTENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            crate::config::models_dir(env)
                .parent()
                .map_or_else(|| PathBuf::from("intents"), |p| p.join("intents"))
        });
    dir.join(format!("home-assistant-intents-{HA_INTENTS_VERSION}"))
        .join("data")
        .join(format!("{}.json", lang.code()))
}

/// The library the configuration asks for: none when templates are off;
/// an error when its file is missing or unreadable (the engine logs it once
/// and routes with the rules; `caal understand` says it).
pub fn load_configured(
    config: &crate::config::UnderstandConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Library>, LibraryError> {
    if !config.templates {
        return Ok(None);
    }
    let lang = Lang::parse(&config.language)
        .ok_or_else(|| LibraryError::Language(config.language.clone()))?;
    Library::load(&library_path(env, lang), lang).map(Some)
}

impl Library {
    /// No sentences yet (CAAL's own are added from configuration).
    pub fn empty(lang: Lang) -> Self {
        Self {
            lang,
            origin: "configuration".into(),
            rules: HashMap::new(),
            lists: HashMap::from([
                ("duration".to_string(), SlotList::Duration),
                ("time".to_string(), SlotList::TimeOfDay),
            ]),
            skip_words: Vec::new(),
            sentences: Vec::new(),
            words: Vec::new(),
            word_at: HashMap::new(),
            finder: std::sync::OnceLock::new(),
        }
    }

    /// Sets expansion rules (`<turn>`), replacing the library's own; what
    /// every sentence requires is worked out again once, after all of them
    /// (done after each of the English pack's 11 rules, it was a third of
    /// `caal say`). A rule that does not parse is named, and nothing is set.
    pub fn set_rules<'a>(
        &mut self,
        rules: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), (String, template::TemplateError)> {
        let parsed = rules
            .into_iter()
            .map(|(name, body)| {
                Ok((
                    name.to_owned(),
                    parse(body).map_err(|e| (name.to_owned(), e))?,
                ))
            })
            .collect::<Result<Vec<_>, (String, template::TemplateError)>>()?;
        if parsed.is_empty() {
            return Ok(());
        }
        self.rules.extend(parsed);
        // What sentences require may have changed with them.
        let mut sentences = std::mem::take(&mut self.sentences);
        for s in &mut sentences {
            s.required = self.required_words(&s.expr);
            s.required_lists = template::required_lists(&s.expr, &self.rules, 0);
            s.required_lists.sort();
            s.required_lists.dedup();
        }
        self.sentences = sentences;
        Ok(())
    }

    /// What a sentence requires, its words by their index in `words`.
    fn required_words(&mut self, expr: &Expr) -> Vec<Vec<usize>> {
        template::required(expr, &self.rules, 0)
            .into_iter()
            .map(|clause| {
                clause
                    .into_iter()
                    .map(|w| {
                        *self.word_at.entry(w.clone()).or_insert_with(|| {
                            self.words.push(w);
                            self.finder = std::sync::OnceLock::new();
                            self.words.len() - 1
                        })
                    })
                    .collect()
            })
            .collect()
    }

    pub fn add_skip_word(&mut self, word: &str) {
        let words: Vec<String> = normalize(word)
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        if !words.is_empty() && !self.skip_words.contains(&words) {
            self.skip_words.push(words);
            // Longest first: "i'd like to" before "i'd like".
            self.skip_words.sort_by_key(|w| std::cmp::Reverse(w.len()));
        }
    }

    /// Adds CAAL's own sentences (configuration) for `intent`; `by_sound`:
    /// whether the sound layer may read a mishearing as one of them;
    /// `speakers_room`: whether the client's area is the room they mean.
    pub fn add_sentences(
        &mut self,
        intent: &str,
        sentences: &[String],
        slots: &BTreeMap<String, String>,
        by_sound: bool,
        speakers_room: bool,
    ) -> Result<(), template::TemplateError> {
        let intent: Arc<str> = intent.into();
        let slots: BTreeMap<String, Value> = slots
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let requires: BTreeMap<String, Value> = speakers_room
            .then(|| ("area".to_owned(), serde_json::json!({ "slot": true })))
            .into_iter()
            .collect();
        for s in sentences {
            self.push(
                intent.clone(),
                s,
                slots.clone(),
                requires.clone(),
                BTreeMap::new(),
                "config",
            )?;
            if let Some(added) = self.sentences.last_mut() {
                added.by_sound = by_sound;
            }
        }
        Ok(())
    }

    fn push(
        &mut self,
        intent: Arc<str>,
        text: &str,
        slots: BTreeMap<String, Value>,
        requires_context: BTreeMap<String, Value>,
        excludes_context: BTreeMap<String, Value>,
        source: &'static str,
    ) -> Result<(), template::TemplateError> {
        let expr = parse(text)?;
        let required = self.required_words(&expr);
        let mut required_lists = template::required_lists(&expr, &self.rules, 0);
        required_lists.sort();
        required_lists.dedup();
        let (mut lists, mut rules) = (Vec::new(), Vec::new());
        template::references(&expr, &mut lists, &mut rules);
        let mut names_home = lists.iter().any(|l| matches!(*l, "area" | "name"));
        let mut stack: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
        let mut seen = Vec::new();
        while let Some(r) = stack.pop() {
            if seen.contains(&r) {
                continue;
            }
            if let Some(body) = self.rules.get(&r) {
                let (mut l, mut nested) = (Vec::new(), Vec::new());
                template::references(body, &mut l, &mut nested);
                names_home |= l.iter().any(|l| matches!(*l, "area" | "name"));
                stack.extend(nested.iter().map(|n| n.to_string()));
            }
            seen.push(r);
        }
        self.sentences.push(Sentence {
            intent,
            text: text.to_owned(),
            expr,
            required,
            required_lists,
            slots,
            requires_context,
            excludes_context,
            source,
            names_home,
            by_sound: true,
        });
        Ok(())
    }

    /// Every word its sentences, rules, list values and skip words may match.
    pub fn vocabulary(&self) -> std::collections::HashSet<String> {
        let mut out = std::collections::HashSet::new();
        for s in &self.sentences {
            template::literal_words(&s.expr, &self.rules, 0, &mut out);
        }
        for list in self.lists.values() {
            if let template::SlotList::Values(values) = list {
                for v in values {
                    template::literal_words(&v.said, &self.rules, 0, &mut out);
                }
            }
        }
        out.extend(self.skip_words.iter().flatten().cloned());
        out
    }

    /// Every sentence the sound layer may read what was heard as, as
    /// (intent, template as written, parsed).
    pub fn sentences(&self) -> impl Iterator<Item = (&str, &str, &Expr)> {
        self.sentences
            .iter()
            .filter(|s| s.by_sound)
            .map(|s| (&*s.intent, s.text.as_str(), &s.expr))
    }

    /// The expansion rules and lists the sentences refer to.
    pub fn rules(&self) -> &HashMap<String, Expr> {
        &self.rules
    }

    pub fn lists(&self) -> &HashMap<String, SlotList> {
        &self.lists
    }

    pub fn sentence_count(&self) -> usize {
        self.sentences.len()
    }
}
