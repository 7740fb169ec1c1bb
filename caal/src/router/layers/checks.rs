//! Checks of the understanding configuration made when the router is built:
//! intent mappings against the commands, the model layer's choice, the
//! meaning layer's examples.

use super::*;

/// Every mapping names a command there is, with parameters it has.
pub(in crate::router) fn check_maps(
    maps: &[IntentMapConfig],
    commands: &BTreeMap<String, crate::command::CommandSpec>,
) -> Result<(), ConfigError> {
    for m in maps {
        let problem = |problem: String| ConfigError::Item {
            what: "understand.intents entry for",
            name: m.intent.clone(),
            problem,
        };
        let spec = commands.get(&m.command).ok_or_else(|| {
            problem(format!(
                "command {:?} is not defined under [commands]",
                m.command
            ))
        })?;
        for name in m.params.keys() {
            if !spec.config.params.contains_key(name) {
                return Err(problem(format!(
                    "`{name}` is not a parameter of command {}",
                    m.command
                )));
            }
        }
    }
    Ok(())
}

/// The model layer's numbers are ones it can use.
pub(in crate::router) fn check_model_choice(
    m: &crate::config::ModelChoiceConfig,
) -> Result<(), ConfigError> {
    let value = |key: &str, problem: String| ConfigError::Value {
        key: format!("understand.model.{key}"),
        problem,
    };
    if !(0.0..=1.0).contains(&m.floor) {
        return Err(value(
            "floor",
            format!("{} is outside 0–1 (a cosine similarity)", m.floor),
        ));
    }
    if !(1..=8).contains(&m.candidates) {
        return Err(value(
            "candidates",
            format!(
                "{} is not 1–8 (a model is shown that many meanings)",
                m.candidates
            ),
        ));
    }
    if m.max_tokens == 0 {
        return Err(value("max_tokens", "must be at least 1".into()));
    }
    Ok(())
}

/// Every example group means something a mapping runs (or `-`), a
/// free-text slot it reads is marked in one of its examples, and the
/// language says what entities are embedded as (`generic`).
pub(in crate::router) fn check_examples(
    words: &LanguageConfig,
    maps: &[IntentMapConfig],
    semantic: &SemanticConfig,
    lang: Lang,
) -> Result<(), ConfigError> {
    let value = |key: &str, problem: String| ConfigError::Value {
        key: format!("understand.semantic.{key}"),
        problem,
    };
    for (key, v) in [
        ("threshold", semantic.threshold),
        ("sure", semantic.sure),
        ("margin", semantic.margin),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(value(
                key,
                format!("{v} is outside 0–1 (a cosine similarity)"),
            ));
        }
    }
    if semantic.sure < semantic.threshold {
        return Err(value(
            "sure",
            format!(
                "{} is below threshold {}; a match sure enough to run must also be near enough to count",
                semantic.sure, semantic.threshold
            ),
        ));
    }
    let groups = &words.examples;
    let generic = &words.generic;
    for (key, word) in [
        ("room", &generic.room),
        ("light", &generic.light),
        ("door", &generic.door),
        ("thing", &generic.thing),
    ] {
        if !groups.is_empty() && word.trim().is_empty() {
            return Err(ConfigError::Value {
                key: format!("understand.languages.{}.generic.{key}", lang.code()),
                problem: "is empty, and the meaning layer says an entity of this kind as it before weighing a sentence; give the language's word for it (English: generic = { room = \"room\", light = \"light\", door = \"door\", thing = \"something\" })".into(),
            });
        }
    }
    for g in groups {
        let problem = |problem: String| ConfigError::Item {
            what: "understand.languages examples for",
            name: format!("{} ({})", g.intent, lang.code()),
            problem,
        };
        if g.examples.is_empty() {
            return Err(problem("has no examples".into()));
        }
        if g.intent != "-" && !maps.iter().any(|m| m.intent == g.intent) {
            return Err(problem(
                "no [[understand.intents]] entry maps this intent to a command; add one, or use intent = \"-\" for talk that is no request".into(),
            ));
        }
        for slot in &g.find {
            let mark = format!("{{{slot}}}");
            if !READ_BY_KIND.contains(&slot.as_str())
                && !g.examples.iter().any(|e| e.contains(&mark))
            {
                return Err(problem(format!(
                    "finds `{slot}`, which is read only where an example marks it; write it as {mark} in an example, or find one of {}",
                    READ_BY_KIND.join(", ")
                )));
            }
        }
    }
    Ok(())
}
