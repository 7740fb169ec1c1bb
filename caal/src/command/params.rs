//! Typed command parameters: what a rule captured, as text, becomes a
//! number, a duration, one of a set of values, or a state name, and is
//! checked against the command's declared range before anything runs.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{ParamValue, human_duration, join_with};
use crate::config::{ParamKind, ParamSpec};
use crate::understand::Home;

/// What parameters are checked against: the conversation states and the home.
#[derive(Clone, Copy)]
pub struct Known<'a> {
    pub states: &'a BTreeSet<String>,
    pub home: &'a Home,
    /// Words that only point back at a thing said elsewhere ("it",
    /// "that"): never the text of a parameter ("add it to the list" adds
    /// nothing called "it").
    pub points_back: &'a [String],
}

/// "10 minutes", "ten minutes", "an hour and a half", "1h30", "90 secs" -> seconds
/// (English, and German where the words are German).
pub fn parse_duration(text: &str) -> Option<u64> {
    use crate::understand::{Lang, numbers};
    numbers::parse_duration(Lang::En, text).or_else(|| numbers::parse_duration(Lang::De, text))
}

/// Why a command's parameters were refused; `code` is a `validator.*` code.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParamProblem {
    pub param: String,
    pub code: &'static str,
    pub message: String,
}

/// Types and checks `raw` against `specs`; the first problem wins.
pub fn parse_params(
    specs: &BTreeMap<String, ParamSpec>,
    raw: &BTreeMap<String, String>,
    known: Known<'_>,
) -> Result<BTreeMap<String, ParamValue>, ParamProblem> {
    let mut out = BTreeMap::new();
    for (name, spec) in specs {
        let given = raw.get(name).map(|s| s.trim()).filter(|s| !s.is_empty());
        // A device not named where the home has just one of its kind: that one.
        let only = || match devices_of(spec, known.home).as_slice() {
            [one] if spec.kind == ParamKind::Device => Some(*one),
            _ => None,
        };
        if given.is_none() && spec.optional {
            continue;
        }
        let Some(text) = given.or(spec.default.as_deref()).or_else(only) else {
            return Err(ParamProblem {
                param: name.clone(),
                code: "validator.missing_param",
                message: match spec.kind {
                    ParamKind::Device if !known.home.devices.is_empty() => format!(
                        "say which {name} ({})",
                        join_with(&devices_of(spec, known.home), "or")
                    ),
                    ParamKind::Area if !known.home.areas.is_empty() => {
                        let rooms = known.home.area_names();
                        format!("say which room ({})", join_with(&rooms, "or"))
                    }
                    _ => format!("I need the {name}"),
                },
            });
        };
        let value = parse_one(name, spec, text, known)?;
        // An optional duration of nothing ("0h0m0s": a template said no
        // length) is as good as unsaid.
        if spec.optional && value == ParamValue::Seconds(0) {
            continue;
        }
        out.insert(name.clone(), value);
    }
    Ok(out)
}

/// The home's devices a device parameter may name.
fn devices_of<'h>(spec: &ParamSpec, home: &'h Home) -> Vec<&'h str> {
    home.devices
        .iter()
        .filter(|d| spec.values.is_empty() || spec.values.contains(&d.domain))
        .map(|d| d.name.as_str())
        .collect()
}

/// One parameter's text, typed and checked against its spec: "21.5" for
/// a number between 10 and 30 °C is `Number(21.5)`, "ten minutes" for a
/// duration is `Seconds(600)`, "the kitchen" for an area is the home's
/// "kitchen". The problem names the parameter and says what would do.
fn parse_one(
    name: &str,
    spec: &ParamSpec,
    text: &str,
    known: Known<'_>,
) -> Result<ParamValue, ParamProblem> {
    let bad = |message: String| ParamProblem {
        param: name.to_owned(),
        code: "validator.bad_value",
        message,
    };
    let unit = unit_of(spec);
    match spec.kind {
        ParamKind::String => {
            if text.chars().count() > 200 {
                return Err(bad(format!("the {name} is too long")));
            }
            if known
                .points_back
                .iter()
                .any(|w| w.eq_ignore_ascii_case(text.trim()))
            {
                return Err(ParamProblem {
                    param: name.to_owned(),
                    code: "validator.missing_param",
                    message: format!("say what the {name} is (\"{text}\" names nothing said)"),
                });
            }
            Ok(ParamValue::Text(text.to_owned()))
        }
        ParamKind::Enum => {
            if spec.values.iter().any(|v| v == text) {
                Ok(ParamValue::Text(text.to_owned()))
            } else {
                Err(bad(format!(
                    "the {name} must be one of {}, not {text:?}",
                    spec.values.join(", ")
                )))
            }
        }
        ParamKind::Area => area_named(name, text, known.home),
        ParamKind::Device => device_named(name, spec, text, known.home),
        ParamKind::Time => text
            .parse::<crate::understand::clock::TimeOfDay>()
            .map(|t| ParamValue::Text(t.to_string()))
            .map_err(bad),
        ParamKind::State => {
            if known.states.contains(text) {
                Ok(ParamValue::Text(text.to_owned()))
            } else {
                let known: Vec<&str> = known.states.iter().map(String::as_str).collect();
                Err(bad(format!(
                    "there is no {text} mode; the modes are {}",
                    known.join(", ")
                )))
            }
        }
        ParamKind::Integer => {
            let n: i64 = text
                .parse()
                .map_err(|_| bad(format!("the {name} must be a whole number, not {text:?}")))?;
            in_range(name, spec, n as f64, format!("{n}{unit}"))?;
            Ok(ParamValue::Integer(n))
        }
        ParamKind::Number => {
            let x: f64 = text
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite())
                .ok_or_else(|| bad(format!("the {name} must be a number, not {text:?}")))?;
            in_range(name, spec, x, format!("{}{unit}", trim(x)))?;
            Ok(ParamValue::Number(x))
        }
        ParamKind::Duration => {
            let s = parse_duration(text)
                .ok_or_else(|| bad(format!("I could not read {text:?} as a duration")))?;
            // "Set a timer": no length said (a template's "0h0m0s").
            if s == 0 && !spec.optional {
                return Err(ParamProblem {
                    param: name.to_owned(),
                    code: "validator.missing_param",
                    message: "say how long, for example \"for 10 minutes\"".into(),
                });
            }
            in_range(name, spec, s as f64, human_duration(s))?;
            Ok(ParamValue::Seconds(s))
        }
    }
}

/// The spec's unit as said after a number (" °C"), or nothing.
fn unit_of(spec: &ParamSpec) -> String {
    spec.unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default()
}

/// `x` checked against the spec's `min` and `max`; out of range, the
/// problem says the bounds and `shown` ("the temperature must be between
/// 10 and 30 °C, not 400 °C"), and a Celsius value said in Fahrenheit gets
/// a hint.
fn in_range(name: &str, spec: &ParamSpec, x: f64, shown: String) -> Result<(), ParamProblem> {
    let below = spec.min.is_some_and(|min| x < min);
    let above = spec.max.is_some_and(|max| x > max);
    if below || above {
        let unit = unit_of(spec);
        let bounds = match (spec.min, spec.max) {
            (Some(min), Some(max)) => format!("between {} and {}{unit}", trim(min), trim(max)),
            (Some(min), None) => format!("at least {}{unit}", trim(min)),
            (None, Some(max)) => format!("at most {}{unit}", trim(max)),
            (None, None) => String::new(),
        };
        // "Set the thermostat to 68": said in Fahrenheit, most likely.
        let celsius = (x - 32.0) * 5.0 / 9.0;
        let fahrenheit = spec.unit.as_deref() == Some("°C")
            && spec.min.is_none_or(|min| celsius >= min)
            && spec.max.is_none_or(|max| celsius <= max);
        let hint = if fahrenheit {
            let c = (celsius * 2.0).round() / 2.0;
            format!(
                "; {} °F is about {} °C, so say {}",
                trim(x),
                trim(c),
                trim(c)
            )
        } else {
            String::new()
        };
        return Err(ParamProblem {
            param: name.to_owned(),
            code: "validator.out_of_range",
            message: format!("the {name} must be {bounds}, not {shown}{hint}"),
        });
    }
    Ok(())
}

/// The home's area an area parameter names, by name or other name ("the
/// lounge" for the living room); any text where the home has no areas,
/// and "all" for every room.
fn area_named(name: &str, text: &str, home: &Home) -> Result<ParamValue, ParamProblem> {
    let said = crate::understand::normalize(text);
    let said = said.strip_prefix("the ").unwrap_or(&said);
    if home.areas.is_empty() || said == "all" {
        return Ok(ParamValue::Text(said.to_owned()));
    }
    match home
        .areas
        .iter()
        .find(|a| a.name == said || a.aliases.iter().any(|x| x == said))
    {
        Some(area) => Ok(ParamValue::Text(area.name.clone())),
        None => Err(ParamProblem {
            param: name.to_owned(),
            code: "validator.unknown_area",
            message: format!(
                "there is no {said} here; the rooms are {}",
                home.area_names().join(", ")
            ),
        }),
    }
}

/// The home's device a device parameter names, as its name ("kitchen
/// island"), another of its names, or its id, among the spec's domains;
/// any text where the home has no devices.
fn device_named(
    name: &str,
    spec: &ParamSpec,
    text: &str,
    home: &Home,
) -> Result<ParamValue, ParamProblem> {
    let said = crate::understand::normalize(text);
    let said = said.strip_prefix("the ").unwrap_or(&said);
    if said.is_empty() || home.devices.is_empty() {
        return Ok(ParamValue::Text(said.to_owned()));
    }
    // An id as given ("light.kitchen_island", which normalising would
    // change), or a name or other name as said.
    let found = home.devices.iter().find(|d| {
        (d.id == text.trim()
            || d.id == said
            || d.name == said
            || d.aliases.iter().any(|x| x == said))
            && (spec.values.is_empty() || spec.values.contains(&d.domain))
    });
    match found {
        Some(d) => Ok(ParamValue::Text(d.name.clone())),
        None => {
            let kind = spec.values.first().map(String::as_str);
            Err(ParamProblem {
                param: name.to_owned(),
                code: "validator.unknown_device",
                message: format!(
                    "I don't know a {} called {said}; there are {}",
                    kind.unwrap_or("device"),
                    home.device_names(kind).join(", ")
                ),
            })
        }
    }
}

fn trim(x: f64) -> String {
    ParamValue::Number(x).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ParamKind, min: Option<f64>, max: Option<f64>) -> ParamSpec {
        ParamSpec {
            kind,
            values: vec![],
            min,
            max,
            unit: Some("°C".into()),
            default: None,
            optional: false,
            several: false,
        }
    }

    #[test]
    fn numbers_are_typed_and_ranged() {
        let specs = BTreeMap::from([(
            "temperature".to_string(),
            spec(ParamKind::Number, Some(10.0), Some(30.0)),
        )]);
        let states = BTreeSet::new();
        let ok = parse_params(
            &specs,
            &BTreeMap::from([("temperature".into(), "21.5".into())]),
            Known {
                states: &states,
                home: &Home::default(),
                points_back: &[],
            },
        )
        .unwrap();
        assert_eq!(ok["temperature"], ParamValue::Number(21.5));
        let err = parse_params(
            &specs,
            &BTreeMap::from([("temperature".into(), "400".into())]),
            Known {
                states: &states,
                home: &Home::default(),
                points_back: &[],
            },
        )
        .unwrap_err();
        assert_eq!(err.code, "validator.out_of_range");
        assert_eq!(
            err.message,
            "the temperature must be between 10 and 30 °C, not 400 °C"
        );
        let err = parse_params(
            &specs,
            &BTreeMap::new(),
            Known {
                states: &states,
                home: &Home::default(),
                points_back: &[],
            },
        )
        .unwrap_err();
        assert_eq!(err.code, "validator.missing_param");
    }

    #[test]
    fn durations_read_and_print_like_people_say_them() {
        assert_eq!(parse_duration("10 minutes"), Some(600));
        assert_eq!(parse_duration("1 hour"), Some(3600));
        assert_eq!(parse_duration("90 secs"), Some(90));
        assert_eq!(parse_duration("2days"), Some(172_800));
        assert_eq!(parse_duration("ten minutes"), Some(600));
        assert_eq!(parse_duration("an hour and a half"), Some(5400));
        assert_eq!(parse_duration("10 fortnights"), None);
        assert_eq!(human_duration(5400), "1 hour 30 minutes");
        assert_eq!(human_duration(1), "1 second");
    }

    #[test]
    fn enums_states_and_defaults() {
        let mut door = spec(ParamKind::Enum, None, None);
        door.values = vec!["front".into(), "back".into()];
        door.default = Some("front".into());
        let specs = BTreeMap::from([("door".to_string(), door)]);
        let states = BTreeSet::new();
        assert_eq!(
            parse_params(
                &specs,
                &BTreeMap::new(),
                Known {
                    states: &states,
                    home: &Home::default(),
                    points_back: &[],
                }
            )
            .unwrap()["door"],
            ParamValue::Text("front".into())
        );
        let err = parse_params(
            &specs,
            &BTreeMap::from([("door".into(), "cellar".into())]),
            Known {
                states: &states,
                home: &Home::default(),
                points_back: &[],
            },
        )
        .unwrap_err();
        assert!(err.message.contains("front, back"), "{}", err.message);
        let modes = BTreeSet::from(["default".to_string(), "research".to_string()]);
        let specs = BTreeMap::from([("state".to_string(), spec(ParamKind::State, None, None))]);
        assert!(
            parse_params(
                &specs,
                &BTreeMap::from([("state".into(), "research".into())]),
                Known {
                    states: &modes,
                    home: &Home::default(),
                    points_back: &[],
                }
            )
            .is_ok()
        );
        let err = parse_params(
            &specs,
            &BTreeMap::from([("state".into(), "party".into())]),
            Known {
                states: &modes,
                home: &Home::default(),
                points_back: &[],
            },
        )
        .unwrap_err();
        assert!(err.message.contains("no party mode"), "{}", err.message);
    }

    #[test]
    fn a_word_that_only_points_back_is_no_text_of_a_parameter() {
        let specs = BTreeMap::from([("item".to_string(), spec(ParamKind::String, None, None))]);
        let states = BTreeSet::new();
        let points_back = ["it".to_string(), "that".to_string()];
        let known = Known {
            states: &states,
            home: &Home::default(),
            points_back: &points_back,
        };
        let err = parse_params(
            &specs,
            &BTreeMap::from([("item".into(), "It".into())]),
            known,
        )
        .unwrap_err();
        assert_eq!(err.code, "validator.missing_param");
        assert!(
            err.message.contains("names nothing said"),
            "{}",
            err.message
        );
        let ok = parse_params(
            &specs,
            &BTreeMap::from([("item".into(), "that cheese".into())]),
            known,
        )
        .unwrap();
        assert_eq!(ok["item"], ParamValue::Text("that cheese".into()));
    }
}
