//! Home Assistant's compiled intents read from the file the setup
//! installed: its expansion rules, lists and sentences.

use super::reading::value_text;
use super::*;

impl Library {
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
