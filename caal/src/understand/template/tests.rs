use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::*;
use crate::understand::{Lang, normalize};
use serde_json::json;

fn values(pairs: &[(&str, Value)]) -> SlotList {
    SlotList::Values(
        pairs
            .iter()
            .map(|(said, value)| ListValue {
                said: parse(said).unwrap(),
                value: value.clone(),
                context: None,
            })
            .collect(),
    )
}

fn matches(template: &str, said: &str) -> Vec<BTreeMap<String, Value>> {
    let rules = HashMap::from([
        ("the".to_string(), parse("(the|my|our)").unwrap()),
        ("light".to_string(), parse("(light|lights|lamp)").unwrap()),
        ("turn".to_string(), parse("(turn|switch)").unwrap()),
    ]);
    let lists = HashMap::from([
        (
            "area".to_string(),
            values(&[
                ("kitchen", json!("Kitchen")),
                ("living room", json!("Living Room")),
            ]),
        ),
        (
            "brightness".to_string(),
            SlotList::Range(RangeList {
                from: 0.0,
                to: 100.0,
                step: 1.0,
                multiplier: 1.0,
                fractions: None,
            }),
        ),
        ("item".to_string(), SlotList::Wildcard),
    ]);
    let scope = Scope {
        lang: Lang::En,
        rules: &[&rules],
        lists: &[&lists],
    };
    match_all(&parse(template).unwrap(), &normalize(said), &scope)
        .into_iter()
        .map(|r| {
            r.slots
                .into_iter()
                .map(|b| (b.slot.to_string(), b.value))
                .collect()
        })
        .collect()
}

#[test]
fn alternatives_optionals_and_rules() {
    let t = "<turn> on [<the>] {area} <light>";
    assert_eq!(
        matches(t, "Turn on the kitchen lights!"),
        vec![BTreeMap::from([("area".into(), json!("Kitchen"))])]
    );
    assert_eq!(matches(t, "switch on living room lamp").len(), 1);
    assert!(matches(t, "turn on the garage lights").is_empty());
    // A word boundary: "on" is not the start of "one".
    assert!(matches("turn on", "turn one").is_empty());
    assert_eq!(matches("fan[s] on", "fans on").len(), 1);
    assert_eq!(matches("fan[s] on", "fan on").len(), 1);
    assert!(matches("fan[s] on", "fanon").is_empty());
    assert_eq!(matches("day[ ]light", "daylight").len(), 1);
    assert_eq!(matches("day[ ]light", "day light").len(), 1);
}

#[test]
fn a_template_may_be_alternatives_at_its_top_level() {
    assert_eq!(
        matches("in the {area}|{area} lights", "kitchen lights").len(),
        1
    );
    assert_eq!(
        matches("in the {area}|{area} lights", "in the kitchen").len(),
        1
    );
}

#[test]
fn permutations_take_every_order() {
    let t = "<turn> (on;[<the>] {area} <light>)";
    assert_eq!(matches(t, "turn on the kitchen lights").len(), 1);
    assert_eq!(matches(t, "turn the kitchen lights on").len(), 1);
    assert!(matches(t, "turn the kitchen on lights").is_empty());
}

#[test]
fn ranges_read_digits_and_words() {
    let t = "set [<the>] {area} <light> to {brightness}[%| percent]";
    for said in [
        "set the kitchen lights to 50%",
        "set the kitchen lights to fifty percent",
        "set kitchen light to 50 percent",
    ] {
        let got = matches(t, said);
        assert_eq!(got.len(), 1, "{said}");
        assert_eq!(got[0]["brightness"], json!(50), "{said}");
    }
    assert!(matches(t, "set the kitchen lights to 150%").is_empty());
}

#[test]
fn wildcards_end_where_the_rest_fits() {
    let got = matches(
        "add {item} to [<the>] shopping list",
        "add oat milk and eggs to my shopping list",
    );
    assert_eq!(
        got,
        vec![BTreeMap::from([(
            "item".into(),
            json!("oat milk and eggs")
        )])]
    );
    assert!(matches("add {item} to the list", "add to the list").is_empty());
}

#[test]
fn bad_templates_name_the_problem() {
    assert!(
        parse("turn (on|off")
            .unwrap_err()
            .problem
            .contains("never closed")
    );
    assert!(
        parse("turn on]")
            .unwrap_err()
            .problem
            .contains("without its opening")
    );
    assert!(parse("{area").unwrap_err().problem.contains("never closed"));
    assert!(parse("{}").is_err());
}

#[test]
fn required_words_skip_templates_that_cannot_match() {
    let rules = HashMap::from([("turn".to_string(), parse("(turn|switch)").unwrap())]);
    let req = required(&parse("<turn> on [the] {area} lights").unwrap(), &rules, 0);
    assert_eq!(
        req,
        vec![
            vec!["turn".to_string(), "switch".into()],
            vec!["on".into()],
            vec!["lights".into()]
        ]
    );
}
