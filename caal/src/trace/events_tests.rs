//! The typed payloads and the schemas in `schemas/events/` hold each other
//! both ways: the same field names, every field the schema requires always
//! written, and nothing required for reading that the schema lets a payload
//! leave out. (Every event of every test run is read back into its struct as
//! well; see `EventDraft::prepare`.)

use std::collections::BTreeSet;

use serde_json::Value;

use super::{EventType, Payload, taxonomy::schema_text};

fn schema(t: EventType) -> Value {
    serde_json::from_str(schema_text(t)).expect("schema is JSON")
}

fn names(v: &Value) -> BTreeSet<String> {
    match v {
        Value::Object(m) => m.keys().cloned().collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
        _ => BTreeSet::new(),
    }
}

#[test]
fn every_struct_has_exactly_its_schemas_fields() {
    let mut wrong = Vec::new();
    for &t in EventType::ALL {
        let declared = names(&schema(t)["properties"]);
        let fields: BTreeSet<String> = Payload::fields(t).iter().map(|f| f.to_string()).collect();
        if declared != fields {
            wrong.push(format!(
                "{t}: only in the schema {:?}, only in the struct {:?}",
                declared.difference(&fields).collect::<Vec<_>>(),
                fields.difference(&declared).collect::<Vec<_>>()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn what_the_schema_requires_is_always_written_and_nothing_else_is_required_to_read() {
    let mut wrong = Vec::new();
    for &t in EventType::ALL {
        let required = names(&schema(t)["required"]);
        let written = Payload::default_of(t).to_value();
        let always = names(&written);
        for r in required.difference(&always) {
            wrong.push(format!(
                "{t}: the schema requires {r}, the struct may leave it out"
            ));
        }
        // A field is needed to read when the payload without it does not parse.
        for field in &always {
            let mut without = written.clone();
            without.as_object_mut().expect("an object").remove(field);
            if Payload::parse(t, &without).is_err() && !required.contains(field) {
                wrong.push(format!(
                    "{t}: reading needs {field}, which the schema lets a payload leave out"
                ));
            }
        }
        assert_eq!(Payload::default_of(t).event_type(), t);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_unknown_field_is_refused_by_name() {
    for &t in EventType::ALL {
        let mut written = Payload::default_of(t).to_value();
        written["colour"] = Value::from("blue");
        let err = Payload::parse(t, &written).expect_err("an unknown field is refused");
        assert!(err.to_string().contains("colour"), "{t}: {err}");
    }
}
