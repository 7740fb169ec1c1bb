//! What was said read with the library: normalised, its skip words taken
//! off, matched against every sentence that could match it, and what each
//! match understood (its intent, slots and context checked).

use super::*;

impl Library {
    /// `text` normalised, with skip words ("please", "can you") removed.
    pub fn prepare(&self, text: &str) -> String {
        self.prepare_mapped(text).0
    }

    /// `prepare`, with where each of its bytes came from in `text` (one
    /// entry more: the end), so wildcards can take words as they were given.
    fn prepare_mapped(&self, text: &str) -> (String, Vec<usize>) {
        let (normalized, map) = crate::understand::normalize_mapped(text);
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
                // Not the mark a clause ended with ("for the snags, 15 minutes").
                let given = given.trim().trim_end_matches(super::super::CLAUSE_MARKS);
                slot.value = Value::String(given.trim_end().to_owned());
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

pub(super) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
