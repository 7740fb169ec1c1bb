//! A command said as words: its templates filled from its parameters,
//! several things joined as people list them.

use std::collections::BTreeMap;

use super::ParamValue;

/// Fills `{name}` placeholders from the parameters; unknown names stay as
/// written. "The {room} lights" with every room reads "all the lights".
pub fn render(template: &str, params: &BTreeMap<String, ParamValue>) -> String {
    all_the(render_with(template, |name| {
        params.get(name).map(ToString::to_string)
    }))
}

/// "the all lights" (a template's "the {room} lights" for every room) as
/// people say it: "all the lights".
pub fn all_the(text: String) -> String {
    if text.contains("the all ") || text.contains("The all ") {
        text.replace("the all ", "all the ")
            .replace("The all ", "All the ")
    } else {
        text
    }
}

/// Fills `{name}` placeholders from `lookup`; unknown names stay as written.
pub fn render_with(template: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after
            .find('}')
            .and_then(|close| lookup(&after[..close]).map(|v| (close, v)))
        {
            Some((close, value)) => {
                out.push_str(&value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// "a, b and c".
pub fn join_summaries<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    join_with(&parts.collect::<Vec<_>>(), "and")
}

/// "a, b `word` c" ("and", "or").
pub fn join_with(parts: &[&str], word: &str) -> String {
    match parts {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} {word} {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_leaves_unknown_placeholders() {
        let p = BTreeMap::from([("a".to_string(), ParamValue::Integer(3))]);
        assert_eq!(render("{a} {b} {", &p), "3 {b} {");
    }

    #[test]
    fn every_room_reads_all_the_and_a_list_joins_as_said() {
        let p = BTreeMap::from([("room".to_string(), ParamValue::Text("all".into()))]);
        assert_eq!(
            render("Turn off the {room} lights", &p),
            "Turn off all the lights"
        );
        assert_eq!(join_with(&["a", "b", "c"], "or"), "a, b or c");
        assert_eq!(join_summaries(["x"].into_iter()), "x");
    }
}
