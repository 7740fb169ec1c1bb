//! The commands offered to a model as tools: a JSON Schema per command from
//! its typed parameters, and the way back from a model's tool call to a
//! command the authority gate can judge. Every tool takes an optional
//! `_rationale` (why this tool); a governed command's tool requires a
//! `_justification`. Both are taken out of the arguments before the
//! command is built, so no executor ever sees them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::{
    auth::Command,
    command::CommandSpec,
    config::{ParamKind, ReasoningConfig},
    router::Router,
};

use super::{ModelToolCall, ToolSpec};

struct Entry {
    spec: ToolSpec,
    command_id: String,
    /// Checks arguments; `_justification` is optional here so that its
    /// absence is judged by the reasoning policy, not retried as malformed.
    schema: jsonschema::Validator,
    governed: bool,
}

/// The argument that carries a model's reason for a tool.
pub const RATIONALE_ARG: &str = "_rationale";
/// The argument a governed tool requires: why the action is warranted.
pub const JUSTIFICATION_ARG: &str = "_justification";

/// A tool call made into a command, with what the model said about it.
#[derive(Clone, Debug)]
pub struct ToolChoice {
    pub command: Command,
    pub tool_name: String,
    /// The arguments without `_rationale` and `_justification`.
    pub arguments: Value,
    pub rationale: Option<String>,
    pub justification: Option<String>,
    pub governed: bool,
}

/// Whether a command is governed: level 3 or 4, or named in `[reasoning] governed_commands`.
pub fn governed(spec: &CommandSpec, config: &ReasoningConfig) -> bool {
    spec.level.get() >= 3 || config.governed_commands.contains(&spec.id)
}

/// Every command, as a tool (or the few offered for one question).
pub struct Toolbox {
    entries: Vec<std::sync::Arc<Entry>>,
}

/// Why a tool call cannot become a command.
#[derive(Clone, Debug, PartialEq)]
pub struct CallProblem {
    pub code: &'static str,
    pub message: String,
}

/// Tool names allow `[a-zA-Z0-9_-]` only: `lights.set` is offered as `lights_set`.
pub fn tool_name(command_id: &str) -> String {
    command_id.replace('.', "_")
}

impl Toolbox {
    pub fn new(router: &Router, reasoning: &ReasoningConfig) -> Self {
        let entries = router
            .commands()
            .map(|spec| {
                let governed = governed(spec, reasoning);
                let checked = parameters_schema(spec, router, governed, false);
                let schema = jsonschema::validator_for(&checked)
                    .expect("schemas built from parameter specs compile");
                std::sync::Arc::new(Entry {
                    spec: ToolSpec {
                        name: tool_name(&spec.id),
                        description: describe(spec),
                        parameters: parameters_schema(spec, router, governed, governed),
                    },
                    command_id: spec.id.clone(),
                    schema,
                    governed,
                })
            })
            .collect();
        Self { entries }
    }

    /// Only the tools of these commands (ids or tool names), in the
    /// toolbox's order: what a model is offered when the meaning layer found
    /// a few requests near what was said. A call of any other tool is then
    /// an unknown tool.
    pub fn only(&self, commands: &[String]) -> Self {
        Self {
            entries: self
                .entries
                .iter()
                .filter(|e| {
                    commands
                        .iter()
                        .any(|c| *c == e.command_id || *c == e.spec.name)
                })
                .cloned()
                .collect(),
        }
    }

    /// Each command id with its tool as OpenAI's wire offers it
    /// (`{"type": "function", "function": {name, description, parameters}}`).
    pub fn offered(&self) -> impl Iterator<Item = (String, Value)> + '_ {
        self.entries
            .iter()
            .map(|e| (e.command_id.clone(), e.spec.wire()))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.entries.iter().map(|e| e.spec.clone()).collect()
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        // Models echo the dotted id as often as the offered name.
        self.entries
            .iter()
            .find(|e| e.spec.name == name || e.command_id == name)
            .map(|e| &**e)
    }

    /// The command a tool call asks for, if its name is known and its
    /// arguments pass the tool's schema and the parameter parser.
    pub fn command(&self, router: &Router, call: &ModelToolCall) -> Result<Command, CallProblem> {
        self.choice(router, call).map(|c| c.command)
    }

    /// The command a tool call asks for, with the model's rationale and
    /// justification taken out of its arguments.
    pub fn choice(&self, router: &Router, call: &ModelToolCall) -> Result<ToolChoice, CallProblem> {
        let Some(entry) = self.entry(&call.name) else {
            return Err(CallProblem {
                code: "validator.unknown_tool",
                message: format!(
                    "there is no tool {:?}; the tools are {}",
                    call.name,
                    self.entries
                        .iter()
                        .map(|e| e.spec.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let args = match &call.arguments {
            Value::Object(_) => &call.arguments,
            Value::Null => &json!({}),
            other => {
                return Err(CallProblem {
                    code: "validator.bad_arguments",
                    message: format!(
                        "the arguments of {} are not a JSON object: {}",
                        entry.spec.name,
                        crate::safety::global().scrub(&other.to_string())
                    ),
                });
            }
        };
        let errors: Vec<String> = entry
            .schema
            .iter_errors(args)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if !errors.is_empty() {
            return Err(CallProblem {
                code: "validator.bad_arguments",
                message: format!(
                    "the arguments of {} do not fit its schema: {}",
                    entry.spec.name,
                    errors.join("; ")
                ),
            });
        }
        let mut arguments = args.clone();
        let mut said = |key: &str| {
            arguments
                .as_object_mut()
                .and_then(|o| o.remove(key))
                .and_then(|v| v.as_str().map(str::to_owned))
                .filter(|s| !s.trim().is_empty())
        };
        let rationale = said(RATIONALE_ARG);
        let justification = said(JUSTIFICATION_ARG);
        let raw: BTreeMap<String, String> = arguments
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect();
        let command = router
            .resolve_command(&entry.command_id, raw, None, None)
            .map_err(|p| CallProblem {
                code: "validator.bad_arguments",
                message: format!("{}: {}", entry.spec.name, p.message),
            })?;
        Ok(ToolChoice {
            command,
            tool_name: entry.spec.name.clone(),
            arguments,
            rationale,
            justification,
            governed: entry.governed,
        })
    }
}

fn describe(spec: &CommandSpec) -> String {
    // "turn {state} the {room} lights" -> "Turn <state> the <room> lights."
    let summary = spec.config.summary.replace('{', "<").replace('}', ">");
    let mut s = crate::auth::capitalise(&summary);
    s.push('.');
    s
}

/// A command's parameters as a JSON Schema object, with `_rationale` and,
/// for a governed command, `_justification` (`required` in what is offered).
fn parameters_schema(
    spec: &CommandSpec,
    router: &Router,
    governed: bool,
    required_justification: bool,
) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, p) in &spec.config.params {
        let mut prop = match p.kind {
            ParamKind::String => json!({"type": "string", "minLength": 1}),
            ParamKind::Enum => json!({"type": "string", "enum": p.values}),
            ParamKind::State => json!({"type": "string", "enum": router.state_names()}),
            ParamKind::Duration => {
                json!({"type": "string", "description": "a duration such as \"10 minutes\""})
            }
            ParamKind::Time => {
                json!({"type": "string", "description": "a time of day such as \"6 pm\" or \"tomorrow at 9 am\""})
            }
            ParamKind::Integer => json!({"type": "integer"}),
            ParamKind::Number => json!({"type": "number"}),
            // The home's own names: a model may only pick one that is there.
            ParamKind::Area => {
                let mut areas: Vec<&str> = router.home().area_names();
                areas.push("all");
                json!({"type": "string", "enum": areas})
            }
            ParamKind::Device => json!({"type": "string", "enum": router.home().devices.iter()
                .filter(|d| p.values.is_empty() || p.values.contains(&d.domain))
                .map(|d| d.name.as_str()).collect::<Vec<_>>()}),
        };
        if matches!(p.kind, ParamKind::Integer | ParamKind::Number) {
            if let Some(min) = p.min {
                prop["minimum"] = json!(min);
            }
            if let Some(max) = p.max {
                prop["maximum"] = json!(max);
            }
        }
        if let Some(unit) = &p.unit {
            prop["description"] = json!(format!("in {unit}"));
        }
        if p.default.is_none() && !p.optional {
            required.push(name.clone());
        }
        properties.insert(name.clone(), prop);
    }
    properties.insert(
        RATIONALE_ARG.into(),
        json!({"type": "string", "description": "why this tool, in one short sentence"}),
    );
    if governed {
        properties.insert(
            JUSTIFICATION_ARG.into(),
            json!({"type": "string", "description": "why this action is warranted now, in your own words (it is checked, and recorded in a signed receipt)"}),
        );
    }
    if required_justification {
        required.push(JUSTIFICATION_ARG.into());
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn call(name: &str, arguments: Value) -> ModelToolCall {
        ModelToolCall {
            id: None,
            name: name.into(),
            arguments,
        }
    }

    #[test]
    fn tool_calls_become_commands_only_when_name_and_arguments_fit() {
        let router = Router::compile(&Config::defaults().unwrap()).unwrap();
        let tools = Toolbox::new(&router, &Config::defaults().unwrap().reasoning);
        let spec = tools
            .specs()
            .into_iter()
            .find(|t| t.name == "lights_brightness")
            .unwrap();
        assert_eq!(spec.parameters["properties"]["level"]["maximum"], 100.0);
        assert_eq!(spec.parameters["required"], json!(["level"]));

        let ok = tools
            .command(
                &router,
                &call("lights_brightness", json!({"room": "kitchen", "level": 40})),
            )
            .unwrap();
        assert_eq!(ok.command_id, "lights.brightness");
        assert_eq!(ok.params["level"].to_string(), "40");
        // The dotted id is accepted too.
        assert!(
            tools
                .command(&router, &call("lights.set", json!({"state": "on"})))
                .is_ok()
        );

        let unknown = tools
            .command(&router, &call("open_pod_bay_doors", json!({})))
            .unwrap_err();
        assert_eq!(unknown.code, "validator.unknown_tool");
        assert!(
            unknown.message.contains("lights_set"),
            "{}",
            unknown.message
        );
        let range = tools
            .command(&router, &call("lights_brightness", json!({"level": 400})))
            .unwrap_err();
        assert_eq!(range.code, "validator.bad_arguments");
        assert!(range.message.contains("/level"), "{}", range.message);
        let missing = tools
            .command(&router, &call("lights_set", json!({"room": "hall"})))
            .unwrap_err();
        assert!(missing.message.contains("state"), "{}", missing.message);
        let not_object = tools
            .command(&router, &call("lights_set", json!("on")))
            .unwrap_err();
        assert_eq!(not_object.code, "validator.bad_arguments");
        // The parser's own checks run after the schema's: a duration that is not one.
        let duration = tools
            .command(&router, &call("timer_set", json!({"duration": "soonish"})))
            .unwrap_err();
        assert!(
            duration.message.contains("timer_set"),
            "{}",
            duration.message
        );
    }
}
