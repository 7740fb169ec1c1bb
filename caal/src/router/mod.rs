//! The rule router: configured rules matched against the normalised
//! utterance in one pass (a `RegexSet`), the highest priority winning. Named
//! captures become typed-later parameters and fill the reply template.

use std::collections::{BTreeMap, HashSet};

use regex::{Regex, RegexSet};
use serde::Serialize;

use crate::config::{Config, ConfigError, RouteType, RuleConfig};

struct CompiledRule {
    config: RuleConfig,
    regex: Regex,
}

pub struct Router {
    set: RegexSet,
    rules: Vec<CompiledRule>,
    fallback_reply: String,
}

/// What the router decided for one utterance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteDecision {
    /// Namespaced: `intent.<route type>`, or `intent.unmatched`.
    pub route_code: String,
    pub route: Option<RouteType>,
    pub source_rule: Option<String>,
    pub command_id: Option<String>,
    pub auth_level: u8,
    pub topic: Option<String>,
    pub params: BTreeMap<String, String>,
    pub reply: String,
}

impl Router {
    pub fn compile(config: &Config) -> Result<Self, ConfigError> {
        let mut seen = HashSet::new();
        let mut rules = Vec::with_capacity(config.rules.len());
        for rule in &config.rules {
            let problem = |problem: String| ConfigError::Rule {
                rule: rule.name.clone(),
                problem,
            };
            if rule.name.trim().is_empty() {
                return Err(ConfigError::Value {
                    key: "rules.name".into(),
                    problem: "a rule has an empty name".into(),
                });
            }
            if !seen.insert(rule.name.as_str()) {
                return Err(problem(
                    "the name is used by another rule; give each rule its own name".into(),
                ));
            }
            if !(1..=4).contains(&rule.auth_level) {
                return Err(problem(format!(
                    "auth_level {} is outside 1–4",
                    rule.auth_level
                )));
            }
            if rule.route == RouteType::Command && rule.command.is_none() {
                return Err(problem(
                    "route \"command\" needs `command = \"...\"`".into(),
                ));
            }
            let regex =
                Regex::new(&rule.pattern).map_err(|e| problem(format!("invalid pattern: {e}")))?;
            if let Some(topic) = &rule.topic
                && !regex.capture_names().flatten().any(|n| n == topic)
            {
                return Err(problem(format!(
                    "topic names the capture {topic:?}, which the pattern does not have"
                )));
            }
            rules.push(CompiledRule {
                config: rule.clone(),
                regex,
            });
        }
        let set = RegexSet::new(rules.iter().map(|r| r.config.pattern.as_str())).map_err(|e| {
            ConfigError::Value {
                key: "rules".into(),
                problem: e.to_string(),
            }
        })?;
        Ok(Self {
            set,
            rules,
            fallback_reply: config.router.fallback_reply.clone(),
        })
    }

    /// Routes one normalised utterance.
    pub fn route(&self, text: &str) -> RouteDecision {
        let best = self
            .set
            .matches(text)
            .into_iter()
            .map(|i| &self.rules[i])
            // Highest priority; among equals, the first in the configuration.
            .fold(None::<&CompiledRule>, |best, r| match best {
                Some(b) if b.config.priority >= r.config.priority => Some(b),
                _ => Some(r),
            });
        let Some(rule) = best else {
            return RouteDecision {
                route_code: "intent.unmatched".into(),
                route: None,
                source_rule: None,
                command_id: None,
                auth_level: 1,
                topic: None,
                params: BTreeMap::new(),
                reply: self.fallback_reply.clone(),
            };
        };
        let mut params = BTreeMap::new();
        if let Some(caps) = rule.regex.captures(text) {
            for name in rule.regex.capture_names().flatten() {
                if let Some(m) = caps.name(name) {
                    params.insert(name.to_owned(), m.as_str().trim().to_owned());
                }
            }
        }
        let topic = rule
            .config
            .topic
            .as_ref()
            .and_then(|t| params.get(t).cloned());
        let reply = render(rule.config.reply.as_deref().unwrap_or("Done."), &params);
        RouteDecision {
            route_code: format!("intent.{}", rule.config.route.as_str()),
            route: Some(rule.config.route),
            source_rule: Some(rule.config.name.clone()),
            command_id: rule.config.command.clone(),
            auth_level: rule.config.auth_level,
            topic,
            params,
            reply,
        }
    }
}

/// Lower case, single spaces, no surrounding punctuation: what rules match.
pub fn normalize(text: &str) -> String {
    let lowered = text.to_lowercase();
    let words: Vec<&str> = lowered.split_whitespace().collect();
    words
        .join(" ")
        .trim_matches(|c: char| c.is_ascii_punctuation() && c != '\'' || c.is_whitespace())
        .to_owned()
}

/// Fills `{name}` placeholders from the parameters; unknown names stay as written.
pub fn render(template: &str, params: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if params.contains_key(&after[..close]) => {
                out.push_str(&params[&after[..close]]);
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> Router {
        Router::compile(&Config::defaults().unwrap()).unwrap()
    }

    #[test]
    fn normalises_case_space_and_punctuation() {
        assert_eq!(
            normalize("  Turn ON   the Kitchen lights!  "),
            "turn on the kitchen lights"
        );
        assert_eq!(normalize("what's up?"), "what's up");
        assert_eq!(normalize("..."), "");
    }

    #[test]
    fn routes_lights_with_parameters() {
        let d = router().route("turn on the kitchen lights");
        assert_eq!(d.route_code, "intent.command");
        assert_eq!(d.command_id.as_deref(), Some("lights.set"));
        assert_eq!(d.params["room"], "kitchen");
        assert_eq!(d.params["state"], "on");
        assert_eq!(d.reply, "Okay, the kitchen lights are on.");
        let d = router().route("switch the living room light off");
        assert_eq!(
            (d.params["room"].as_str(), d.params["state"].as_str()),
            ("living room", "off")
        );
    }

    #[test]
    fn unmatched_falls_back() {
        let d = router().route("sing me a song");
        assert_eq!(d.route_code, "intent.unmatched");
        assert_eq!(d.source_rule, None);
    }

    #[test]
    fn bad_rules_are_named() {
        let mut c = Config::defaults().unwrap();
        c.rules[0].pattern = "(unclosed".into();
        let err = Router::compile(&c).err().unwrap().to_string();
        assert!(
            err.contains(&c.rules[0].name) && err.contains("invalid pattern"),
            "{err}"
        );
        let mut c = Config::defaults().unwrap();
        c.rules[1].name = c.rules[0].name.clone();
        assert!(
            Router::compile(&c)
                .err()
                .unwrap()
                .to_string()
                .contains("another rule")
        );
        let mut c = Config::defaults().unwrap();
        c.rules[0].auth_level = 5;
        assert!(
            Router::compile(&c)
                .err()
                .unwrap()
                .to_string()
                .contains("outside 1–4")
        );
    }

    #[test]
    fn render_leaves_unknown_placeholders() {
        let p = BTreeMap::from([("a".to_string(), "x".to_string())]);
        assert_eq!(render("{a} {b} {", &p), "x {b} {");
    }
}
