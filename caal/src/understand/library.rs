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

    /// Home Assistant's compiled intents for `lang`, from the file the setup installed.
    pub fn load(path: &Path, lang: Lang) -> Result<Self, LibraryError> {
        let text = std::fs::read_to_string(path).map_err(|source| LibraryError::Missing {
            path: path.to_owned(),
            source,
        })?;
        let format = |problem: String| LibraryError::Format {
            path: path.to_owned(),
            problem,
        };
        let json: Value = serde_json::from_str(&text).map_err(|e| format(e.to_string()))?;
        let mut lib = Self::empty(lang);
        lib.lists.insert("duration".into(), SlotList::Duration);
        lib.lists.insert("time".into(), SlotList::TimeOfDay);
        lib.origin = format!(
            "home-assistant-intents {HA_INTENTS_VERSION} ({})",
            lang.code()
        );
        for (name, body) in json["expansion_rules"].as_object().into_iter().flatten() {
            let body = body
                .as_str()
                .ok_or_else(|| format(format!("expansion rule {name} is not text")))?;
            lib.rules.insert(name.clone(), parse(body)?);
        }
        for (name, list) in json["lists"].as_object().into_iter().flatten() {
            lib.lists.insert(
                name.clone(),
                slot_list(list).map_err(|p| format(format!("list {name}: {p}")))??,
            );
        }
        for word in json["skip_words"].as_array().into_iter().flatten() {
            if let Some(w) = word.as_str() {
                lib.add_skip_word(w);
            }
        }
        let intents = json["intents"]
            .as_object()
            .ok_or_else(|| format("no \"intents\" object".into()))?;
        for (intent, body) in intents {
            let intent: Arc<str> = intent.as_str().into();
            for data in body["data"].as_array().into_iter().flatten() {
                let object = |key: &str| -> BTreeMap<String, Value> {
                    data[key]
                        .as_object()
                        .map(|o| o.clone().into_iter().collect())
                        .unwrap_or_default()
                };
                if data.get("lists").is_some() || data.get("expansion_rules").is_some() {
                    // Intent-local lists and rules: none in the languages CAAL reads; say so rather than misread.
                    return Err(format(format!(
                        "{intent} has intent-local lists or rules, which this reader does not take"
                    )));
                }
                for s in data["sentences"].as_array().into_iter().flatten() {
                    let Some(s) = s.as_str() else { continue };
                    lib.push(
                        intent.clone(),
                        s,
                        object("slots"),
                        object("requires_context"),
                        object("excludes_context"),
                        "library",
                    )?;
                }
            }
        }
        Ok(lib)
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
    /// whether the sound layer may read a mishearing as one of them.
    pub fn add_sentences(
        &mut self,
        intent: &str,
        sentences: &[String],
        slots: &BTreeMap<String, String>,
        by_sound: bool,
    ) -> Result<(), template::TemplateError> {
        let intent: Arc<str> = intent.into();
        let slots: BTreeMap<String, Value> = slots
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        for s in sentences {
            self.push(
                intent.clone(),
                s,
                slots.clone(),
                BTreeMap::new(),
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

    /// `text` normalised, with skip words ("please", "can you") removed.
    pub fn prepare(&self, text: &str) -> String {
        self.prepare_mapped(text).0
    }

    /// `prepare`, with where each of its bytes came from in `text` (one
    /// entry more: the end), so wildcards can take words as they were given.
    fn prepare_mapped(&self, text: &str) -> (String, Vec<usize>) {
        let (normalized, map) = super::normalize_mapped(text);
        let mut words: Vec<(usize, &str)> = Vec::new();
        let mut at = 0;
        for w in normalized.split(' ') {
            if !w.is_empty() {
                words.push((at, w));
            }
            at += w.len() + 1;
        }
        let mut out = String::with_capacity(normalized.len());
        let mut out_map = Vec::with_capacity(normalized.len() + 1);
        let mut last_end = 0;
        let mut i = 0;
        while i < words.len() {
            if let Some(skip) = self.skip_words.iter().find(|s| {
                words.len() >= i + s.len() && s.iter().zip(&words[i..]).all(|(a, (_, b))| a == b)
            }) {
                i += skip.len();
                continue;
            }
            let (start, w) = words[i];
            if !out.is_empty() {
                out.push(' ');
                out_map.push(map[start]);
            }
            out.push_str(w);
            out_map.extend_from_slice(&map[start..start + w.len()]);
            last_end = map[start + w.len()];
            i += 1;
        }
        out_map.push(last_end);
        (out, out_map)
    }

    /// Everything the sentences understand in `text`, best first.
    pub fn understand(&self, text: &str, home: &Home, context: &Context) -> Vec<Understood> {
        let (input, map) = self.prepare_mapped(text);
        let mut found = self.run(&input, home.lists(), context, |_| true);
        said_as_given(&mut found, text, &map);
        found
    }

    /// After nothing matched: the same with any words taken as an area or a
    /// device name, so "the attic lights" is told apart from chat.
    pub fn understand_open(&self, text: &str, home: &Home, context: &Context) -> Vec<Understood> {
        let (input, map) = self.prepare_mapped(text);
        let open = home.open_lists();
        let mut found = self.run(&input, &open, context, |s| s.names_home);
        said_as_given(&mut found, text, &map);
        found
    }

    fn run(
        &self,
        input: &str,
        home_lists: &HashMap<String, SlotList>,
        context: &Context,
        wanted: impl Fn(&Sentence) -> bool,
    ) -> Vec<Understood> {
        if input.is_empty() {
            return Vec::new();
        }
        let rules = [&self.rules];
        let lists = [home_lists, &self.lists];
        let scope = Scope {
            lang: self.lang,
            rules: &rules,
            lists: &lists,
        };
        let mut found: Vec<(Understood, u32)> = Vec::new();
        // Whether each list could be in the input, worked out once per input.
        let mut possible: HashMap<&str, bool> = HashMap::new();
        let mut has = vec![false; self.words.len()];
        match self
            .finder
            .get_or_init(|| aho_corasick::AhoCorasick::new(&self.words).ok())
        {
            Some(finder) => {
                for m in finder.find_overlapping_iter(input) {
                    has[m.pattern().as_usize()] = true;
                }
            }
            None => {
                for (has, w) in has.iter_mut().zip(&self.words) {
                    *has = input.contains(w.as_str());
                }
            }
        }
        for s in &self.sentences {
            if context.out_of_time() {
                break;
            }
            if !wanted(s)
                || !s
                    .required
                    .iter()
                    .all(|clause| clause.iter().any(|&w| has[w]))
            {
                continue;
            }
            let lists_fit = s.required_lists.iter().all(|name| {
                *possible.entry(name.as_str()).or_insert_with(|| {
                    lists
                        .iter()
                        .find_map(|l| l.get(name.as_str()))
                        .is_some_and(|list| template::list_possible(list, input))
                })
            });
            if !lists_fit {
                continue;
            }
            for reading in match_all(&s.expr, input, &scope) {
                if let Some(u) = understood(s, &reading, context) {
                    found.push((u, reading.literal_chars));
                }
            }
        }
        // Surest first; then the reading whose own words covered most; then
        // one that names a device over one that names only its room ("the
        // bedroom lamp" is the lamp, not the bedroom's lights and a word
        // for light); then the one that fills more slots (more specific);
        // library order last.
        let device = |u: &Understood| u.slots.contains_key("name");
        found.sort_by(|(a, la), (b, lb)| {
            a.needs_area
                .cmp(&b.needs_area)
                .then(b.confidence.total_cmp(&a.confidence))
                .then(lb.cmp(la))
                .then(device(b).cmp(&device(a)))
                .then(b.slots.len().cmp(&a.slots.len()))
        });
        found.into_iter().map(|(u, _)| u).collect()
    }
}

/// What wildcards took ("add SECRET_REF:… to the list"), as it was given:
/// normalising made the words matchable, not the value.
fn said_as_given(found: &mut [Understood], text: &str, map: &[usize]) {
    for u in found {
        for slot in u.slots.values_mut() {
            if let Some((start, end)) = slot.wildcard_span.take()
                && let (Some(&a), Some(&b)) = (map.get(start), map.get(end))
                && a <= b
                && let Some(given) = text.get(a..b)
            {
                slot.value = Value::String(given.trim().to_owned());
            }
        }
    }
}

/// A reading as an understood request, if its context requirements hold.
fn understood(s: &Sentence, reading: &Reading, context: &Context) -> Option<Understood> {
    let mut slots: BTreeMap<String, Slot> = s
        .slots
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                Slot {
                    value: v.clone(),
                    said: String::new(),
                    context: None,
                    wildcard_span: None,
                },
            )
        })
        .collect();
    let mut contexts: Vec<&BTreeMap<String, String>> = Vec::new();
    let mut needs_area = false;
    for b in &reading.slots {
        if let Some(c) = &b.context {
            contexts.push(c);
        }
        slots.insert(
            b.slot.to_string(),
            Slot {
                value: b.value.clone(),
                said: b.said.clone(),
                context: b.context.as_deref().cloned(),
                wildcard_span: b.wildcard.then_some(b.span),
            },
        );
    }
    for (key, want) in &s.requires_context {
        if key == "area" && want.get("slot").and_then(Value::as_bool) == Some(true) {
            // "turn on the lights here": the area is where it was said; when
            // that is not known, the router asks for it if the command needs one.
            match &context.area {
                Some(area) => {
                    slots.entry("area".into()).or_insert(Slot {
                        value: Value::String(area.clone()),
                        said: String::new(),
                        context: None,
                        wildcard_span: None,
                    });
                }
                None => needs_area = true,
            }
            continue;
        }
        let allowed = values_of(want);
        let known: Vec<&String> = contexts.iter().filter_map(|c| c.get(key)).collect();
        if !known.is_empty() && !known.iter().all(|v| allowed.iter().any(|a| a == *v)) {
            return None;
        }
    }
    for (key, not) in &s.excludes_context {
        let excluded = values_of(not);
        if contexts
            .iter()
            .filter_map(|c| c.get(key))
            .any(|v| excluded.iter().any(|e| e == v))
        {
            return None;
        }
    }
    // A device's kind is the request's domain unless the template says it.
    if !slots.contains_key("domain")
        && let Some(domain) = contexts.iter().find_map(|c| c.get("domain"))
        && slots.contains_key("name")
    {
        slots.insert(
            "domain".into(),
            Slot {
                value: Value::String(domain.clone()),
                said: String::new(),
                context: None,
                wildcard_span: None,
            },
        );
    }
    let total = reading.literal_chars + reading.wildcard_chars;
    let confidence = if total == 0 {
        1.0
    } else {
        f64::from(reading.literal_chars) / f64::from(total)
    };
    Some(Understood {
        intent: s.intent.to_string(),
        slots,
        template: s.text.clone(),
        source: s.source,
        confidence,
        needs_area,
    })
}

fn values_of(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(value_text).collect(),
        other => vec![value_text(other)],
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A list as the compiled JSON gives it: values, a range, or a wildcard.
fn slot_list(list: &Value) -> Result<Result<SlotList, template::TemplateError>, String> {
    if list.get("wildcard").and_then(Value::as_bool) == Some(true) {
        return Ok(Ok(SlotList::Wildcard));
    }
    if let Some(r) = list.get("range") {
        let num = |k: &str| r.get(k).and_then(Value::as_f64);
        let from = num("from").ok_or("a range without from")?;
        let to = num("to").ok_or("a range without to")?;
        let fractions = match r.get("fractions").and_then(Value::as_str) {
            Some("halves") => Some(0.5),
            Some("tenths") => Some(0.1),
            _ => None,
        };
        return Ok(Ok(SlotList::Range(RangeList {
            from,
            to,
            step: num("step").unwrap_or(1.0),
            multiplier: num("multiplier").unwrap_or(1.0),
            fractions,
        })));
    }
    let values = list
        .get("values")
        .and_then(Value::as_array)
        .ok_or("neither values, range nor wildcard")?;
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        let (said, value, context) = match v {
            Value::String(s) => (s.clone(), Value::String(s.clone()), None),
            Value::Object(o) => {
                let said = o
                    .get("in")
                    .and_then(Value::as_str)
                    .ok_or("a value without \"in\"")?
                    .to_owned();
                let value = o
                    .get("out")
                    .cloned()
                    .unwrap_or_else(|| Value::String(said.clone()));
                let context = o.get("context").and_then(Value::as_object).map(|c| {
                    Arc::new(
                        c.iter()
                            .map(|(k, v)| (k.clone(), value_text(v)))
                            .collect::<BTreeMap<_, _>>(),
                    )
                });
                (said, value, context)
            }
            _ => return Err("a value that is neither text nor an object".into()),
        };
        let said = match parse(&said) {
            Ok(e) => e,
            Err(e) => return Ok(Err(e)),
        };
        out.push(ListValue {
            said,
            value,
            context,
        });
    }
    Ok(Ok(SlotList::Values(out)))
}
