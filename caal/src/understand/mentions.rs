//! The home's rooms and devices said in a sentence, found before any
//! intent is chosen (entities first): the meaning layer and the router read
//! the rooms and devices they fill slots with from these spans.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Home, Lang};
use crate::config::GenericWords;

/// `text` with the home's rooms, lights and locks said as the language's
/// generic words (`words`: "room", "light", "door" in English): the meaning
/// is in the words around them ("put the office light on" is nearer "turn
/// the room light on" than "shut the office light" once the names no
/// longer weigh). A room that also names
/// a door ("garage") is kept, and so are other devices: their name is
/// what they do.
pub fn generic(home: &Home, lang: Lang, words: &GenericWords, text: &str) -> String {
    let mut out = String::new();
    let mut at = 0;
    for m in mentions(home, text, None) {
        let kind = m
            .context
            .as_ref()
            .and_then(|c| c.get("domain"))
            .map(String::as_str);
        let word = match (m.slot, kind) {
            ("area", _)
                if !home.devices.iter().any(|d| {
                    d.domain != "light" && d.name.split(' ').next() == Some(m.said.as_str())
                }) =>
            {
                &words.room
            }
            ("name", Some("light")) => &words.light,
            ("name", Some("lock")) => &words.door,
            _ => continue,
        };
        let (start, end) = m.span();
        out.push_str(&text[at..start]);
        out.push_str(word);
        at = end;
    }
    out.push_str(&text[at..]);
    // "40%" said as the examples say it ("40 percent"): the two are
    // different tokens to the encoder, and "dim the bedroom, like 40%"
    // was as near "dim the lounge to half" as "dim the hallway to 25 percent".
    if out.contains('%') {
        out = out
            .replace('%', &format!(" {} ", lang.percent()))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
    }
    out
}

/// A room or device said in `text`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mention {
    pub slot: &'static str,
    pub value: Value,
    pub said: String,
    pub context: Option<BTreeMap<String, String>>,
    start: usize,
    end: usize,
}

impl Mention {
    /// Where it is said in the text it was found in (bytes, start and end).
    pub fn span(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

/// The home's rooms and devices said in `text`, longest first where they
/// overlap ("the bedroom lamp" is the lamp, not the bedroom); devices of
/// another kind than `domain` are not taken.
pub fn mentions(home: &Home, text: &str, domain: Option<&str>) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    // "dim the bedroom, like 40 percent": a name ends at a clause mark too
    // (each a byte, as the space for it, so offsets hold).
    let padded = format!(" {} ", text.replace([',', ';', ':', '!', '?', '.'], " "));
    // A name's value and context are made only when the name is said (most
    // are not: this runs for every example when the layer is built).
    let mut add = |slot: &'static str,
                   said: &str,
                   value: &dyn Fn() -> Value,
                   context: &dyn Fn() -> BTreeMap<String, String>| {
        let needle = format!(" {said} ");
        let mut from = 0;
        while let Some(at) = padded[from..].find(&needle).map(|i| i + from) {
            found.push(Mention {
                slot,
                value: value(),
                said: said.to_owned(),
                context: Some(context()),
                start: at,
                end: at + said.len(),
            });
            from = at + 1;
        }
    };
    for a in &home.areas {
        for said in std::iter::once(&a.name).chain(&a.aliases) {
            add("area", said, &|| json!(a.name), &|| {
                BTreeMap::from([("area".to_string(), a.name.clone())])
            });
        }
    }
    let of_kind: Vec<_> = home
        .devices
        .iter()
        .filter(|d| domain.is_none_or(|k| d.domain == k))
        .collect();
    for d in &of_kind {
        let context = || {
            let mut context = BTreeMap::from([("domain".to_string(), d.domain.clone())]);
            if let Some(area) = &d.area {
                context.insert("area".into(), area.clone());
            }
            context
        };
        for said in std::iter::once(&d.name).chain(&d.aliases) {
            add("name", said, &|| json!(d.id), &context);
        }
        // A name that begins with its room's is said with the room's other
        // names too: the living room lamp is the "lounge lamp".
        let room = d
            .area
            .as_ref()
            .and_then(|name| home.areas.iter().find(|a| &a.name == name));
        if let Some(room) = room
            && let Some(rest) = d.name.strip_prefix(&format!("{} ", room.name))
        {
            for alias in &room.aliases {
                add(
                    "name",
                    &format!("{alias} {rest}"),
                    &|| json!(d.id),
                    &context,
                );
            }
        }
    }
    // A device's last word ("lamp", "door") names the one there is, or all of them (to ask).
    let mut by_last: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for d in &of_kind {
        if let Some((_, last)) = d.name.rsplit_once(' ')
            && !home.is_kind_word(last)
        {
            by_last.entry(last).or_default().push(d.id.as_str());
        }
    }
    for (word, ids) in by_last {
        let value = || match ids.as_slice() {
            [one] => json!(one),
            many => json!(many),
        };
        add("name", word, &value, &BTreeMap::new);
    }
    found.sort_by(|a, b| {
        (b.end - b.start)
            .cmp(&(a.end - a.start))
            .then(a.start.cmp(&b.start))
    });
    let mut kept: Vec<Mention> = Vec::new();
    for m in found {
        if kept.iter().all(|k| m.end <= k.start || m.start >= k.end) {
            kept.push(m);
        }
    }
    kept.sort_by_key(|m| m.start);
    kept
}
