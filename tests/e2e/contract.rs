//! What `caal say --json` prints is what schemas/round-result.v1.json says,
//! field for field (the schema refuses fields it does not describe), for
//! rounds of every kind: a command, an undoable one, a chain, refused
//! parameters, input that carries no request, a confirmation asked for and
//! given, and a round after which a timer rang.

use serde_json::Value;

use crate::support::Sandbox;

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(include_str!("../../schemas/round-result.v1.json"))
        .expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

#[test]
fn say_json_prints_what_the_round_result_schema_describes() {
    let sb = Sandbox::new();
    let schema = validator();
    let mut kinds = std::collections::BTreeSet::new();
    for text in [
        "turn on the kitchen lights",
        "add eggs to the shopping list",
        "turn off the office lights and set the thermostat to 20",
        "set the thermostat to 99",
        "zxcv qwer asdf",
        "unlock the front door",
        "yes",
        "set a timer for 1 second",
    ] {
        let out = sb.say("c", text);
        let problems: Vec<String> = schema
            .iter_errors(&out)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(problems.is_empty(), "{text}: {problems:?}\n{out:#}");
        kinds.insert(format!(
            "{}/{}",
            out["status"].as_str().unwrap(),
            if out["pending_confirmation"].is_null() {
                "none"
            } else {
                "waiting"
            }
        ));
    }
    assert!(kinds.len() >= 3, "{kinds:?}");
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let out = sb.say("c", "what time is it");
    assert_eq!(out["notifications"][0]["kind"], "timer", "{out:#}");
    let problems: Vec<String> = schema.iter_errors(&out).map(|e| e.to_string()).collect();
    assert!(problems.is_empty(), "{problems:?}\n{out:#}");
}
