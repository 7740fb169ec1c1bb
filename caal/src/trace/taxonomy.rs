//! The event taxonomy: every `event_type` a round may record, each with a JSON
//! Schema of its payload (in `schemas/events/`, embedded at build time).
//! An append is validated here before it reaches the store, so nothing is ever
//! stored half-valid. Later capabilities (reasoning steps, tool decisions,
//! receipts) add variants here and a schema file there: same table, same chain.

use std::{fmt, str::FromStr, sync::OnceLock};

use serde_json::Value;

use super::StoreError;

/// The version written on every row and export line produced by this build.
pub const SCHEMA_VERSION: u32 = 1;

macro_rules! event_types {
    ($($variant:ident = $name:literal),+ $(,)?) => {
        /// One kind of step in a round.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventType { $($variant),+ }

        impl EventType {
            pub const ALL: &'static [EventType] = &[$(EventType::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $(EventType::$variant => $name),+ }
            }
        }

        /// A typed payload: one variant per event type, each its struct in
        /// [`super::events`] of the same name.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Payload { $($variant(super::events::$variant)),+ }

        impl Payload {
            pub fn event_type(&self) -> EventType {
                match self { $(Payload::$variant(_) => EventType::$variant),+ }
            }

            /// The JSON object stored for it.
            pub fn to_value(&self) -> Value {
                let value = match self { $(Payload::$variant(p) => serde_json::to_value(p)),+ };
                // Plain structs of strings, numbers and JSON values: serde_json
                // cannot fail on them (no maps with non-string keys).
                value.expect("an event payload serialises")
            }

            /// Reads a stored payload back into its struct; an unknown or
            /// missing field is an error naming it.
            pub fn parse(event_type: EventType, payload: &Value) -> Result<Payload, serde_json::Error> {
                Ok(match event_type {
                    $(EventType::$variant => Payload::$variant(serde_json::from_value(payload.clone())?)),+
                })
            }
        }

        #[cfg(test)]
        impl Payload {
            /// The JSON field names of an event type's struct.
            pub(crate) fn fields(event_type: EventType) -> &'static [&'static str] {
                match event_type {
                    $(EventType::$variant => serde_aux::serde_introspection::serde_introspect::<super::events::$variant>()),+
                }
            }

            /// An event type's struct with every field at its default.
            pub(crate) fn default_of(event_type: EventType) -> Payload {
                match event_type { $(EventType::$variant => Payload::$variant(Default::default())),+ }
            }
        }

        $(impl From<super::events::$variant> for Payload {
            fn from(p: super::events::$variant) -> Payload { Payload::$variant(p) }
        })+
    };
}

event_types! {
    RoundStarted = "round.started",
    InputReceived = "input.received",
    InputNormalized = "input.normalized",
    RouteSelected = "route.selected",
    ValidatorRan = "validator.ran",
    LlmRequest = "llm.request",
    LlmResponse = "llm.response",
    ToolRequest = "tool.request",
    ToolResponse = "tool.response",
    JobEnqueued = "job.enqueued",
    JobProgress = "job.progress",
    JobResult = "job.result",
    ConfirmRequested = "confirm.requested",
    ConfirmReceived = "confirm.received",
    CommandExecuted = "command.executed",
    CommandReversed = "command.reversed",
    OutputEmitted = "output.emitted",
    RoundFailed = "round.failed",
    RoundCompleted = "round.completed",
    SafetyRedacted = "safety.redacted",
    SafetyChecked = "safety.checked",
    MemoryWritten = "memory.written",
    MemoryForgotten = "memory.forgotten",
    MemoryRead = "memory.read",
    MemoryReferenced = "memory.referenced",
    MemoryInjected = "memory.injected",
    ReasoningStep = "reasoning.step",
    ReasoningUpdate = "reasoning.update",
    ReceiptIssued = "receipt.issued",
    AudioRetention = "audio.retention",
    LivekitWebhook = "livekit.webhook",
    ScheduleFired = "schedule.fired",
    ScheduleCancelled = "schedule.cancelled",
    FeedbackRecorded = "feedback.recorded",
    RoundImported = "round.imported",
}

impl EventType {
    /// A round ends with exactly one of these, and nothing follows it.
    pub fn is_terminal(self) -> bool {
        matches!(self, EventType::RoundCompleted | EventType::RoundFailed)
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Checks `payload` against this type's schema.
    pub fn validate(self, payload: &Value) -> Result<(), StoreError> {
        let validator = validator(self);
        if validator.is_valid(payload) {
            return Ok(());
        }
        let refused = |field: String, problem: String| StoreError::InvalidPayload {
            event_type: self.as_str(),
            field,
            problem,
        };
        match validator.iter_errors(payload).next() {
            Some(error) => {
                let path = error.instance_path().to_string();
                let field = match error.kind() {
                    jsonschema::error::ValidationErrorKind::Required { property } => {
                        let name = property
                            .as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| property.to_string());
                        format!("{}{}", path.trim_start_matches('/').replace('/', "."), name)
                    }
                    _ if path.is_empty() => "(payload)".to_owned(),
                    _ => path.trim_start_matches('/').replace('/', "."),
                };
                Err(refused(field, error.to_string()))
            }
            None => Err(refused(
                "(payload)".into(),
                "does not match the schema".into(),
            )),
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventType {
    type Err = StoreError;
    fn from_str(name: &str) -> Result<Self, StoreError> {
        EventType::ALL
            .iter()
            .copied()
            .find(|t| t.as_str() == name)
            .ok_or_else(|| StoreError::UnknownEventType {
                name: name.to_owned(),
                known: EventType::ALL
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

use crate::sqlite::EVENT_SCHEMAS;

/// Schemas compile on first use, so a process that records three kinds of
/// event never pays for the other sixteen.
fn validator(event_type: EventType) -> &'static jsonschema::Validator {
    static VALIDATORS: OnceLock<Vec<OnceLock<jsonschema::Validator>>> = OnceLock::new();
    let slots = VALIDATORS.get_or_init(|| EventType::ALL.iter().map(|_| OnceLock::new()).collect());
    slots[event_type.index()].get_or_init(|| {
        let text = schema_text(event_type);
        // The schemas are part of this build; tests compile every one of them.
        let schema: Value = serde_json::from_str(text).expect("embedded schema is JSON");
        jsonschema::validator_for(&schema).expect("embedded schema compiles")
    })
}

/// The JSON Schema text of an event type's payload at `SCHEMA_VERSION`.
pub fn schema_text(event_type: EventType) -> &'static str {
    EVENT_SCHEMAS
        .iter()
        .find(|(name, version, _)| *name == event_type.as_str() && *version == SCHEMA_VERSION)
        .map(|(_, _, text)| *text)
        .unwrap_or_else(|| {
            panic!(
                "schemas/events/{}.v{SCHEMA_VERSION}.json is missing",
                event_type.as_str()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_type_has_exactly_one_compiling_schema_and_every_schema_a_type() {
        for t in EventType::ALL {
            let _ = validator(*t);
            assert_eq!(t.as_str().parse::<EventType>().unwrap(), *t);
        }
        for (name, _, _) in EVENT_SCHEMAS {
            assert!(
                name.parse::<EventType>().is_ok(),
                "schema {name} has no event type"
            );
        }
        assert_eq!(EVENT_SCHEMAS.len(), EventType::ALL.len());
    }

    #[test]
    fn the_export_lines_schema_names_every_event_type() {
        // schemas/event.v1.json is what people validate export lines with:
        // a type missing there makes a valid export fail their check.
        let envelope: Value =
            serde_json::from_str(include_str!("../../../schemas/event.v1.json")).unwrap();
        let mut listed: Vec<&str> = envelope["properties"]["event_type"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let mut all: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
        listed.sort_unstable();
        all.sort_unstable();
        assert_eq!(listed, all);
    }

    #[test]
    fn unknown_type_is_named_with_the_known_ones() {
        let err = "input.recieved"
            .parse::<EventType>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"input.recieved\"") && err.contains("input.received"),
            "{err}"
        );
    }

    #[test]
    fn missing_and_wrong_fields_are_named() {
        let err = EventType::InputReceived
            .validate(&json!({"channel": "text"}))
            .unwrap_err();
        assert!(err.to_string().contains("`raw_text`"), "{err}");
        let err = EventType::RouteSelected
            .validate(
                &json!({"route_code": "intent.command", "source_rule": null, "auth_level": 9}),
            )
            .unwrap_err();
        assert!(err.to_string().contains("`auth_level`"), "{err}");
        assert!(err.to_string().contains("route.selected"), "{err}");
        let err = EventType::OutputEmitted
            .validate(&json!("text"))
            .unwrap_err();
        assert!(err.to_string().contains("(payload)"), "{err}");
    }

    #[test]
    fn valid_payloads_pass() {
        EventType::RouteSelected
            .validate(&json!({"route_code": "intent.command", "source_rule": "lights", "auth_level": 1, "topic": null}))
            .unwrap();
        EventType::ConfirmRequested
            .validate(&json!({"command_id": "door.unlock", "auth_level": 3, "summary": "Unlock"}))
            .unwrap();
        assert!(
            EventType::ConfirmRequested
                .validate(&json!({"auth_level": 3, "summary": "Unlock"}))
                .is_err()
        );
    }
}
