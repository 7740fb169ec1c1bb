//! How a user's file is laid over the defaults, as Home Assistant's
//! `custom_sentences` are: tables merge key by key; the lists that teach
//! CAAL (rules, intent mappings, sentences, examples, offers, and every word
//! list of a language) gain the user's entries; an entry with the id of a
//! default replaces it where it stands; `[defaults] remove` drops defaults by
//! id and `[defaults] replace` takes a list whole from the file. Any other
//! list (a setting such as `[doors] hosts` or the home's areas) is the
//! file's. Each entry of those lists remembers where it came from
//! (`caal config check --json`).

use serde::Serialize;
use toml::{Table, Value};

use super::ConfigError;

/// Where an entry of a list that adds came from.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Origin {
    /// The list, by its key path (`rules`, `understand.languages.en.skip_words`).
    pub list: String,
    /// The entry's id: a rule's `name`, an entry's `id` (or its intent and
    /// slots), an offer's `says`, a word itself.
    pub id: String,
    /// `defaults` or the file's path.
    pub from: String,
    /// A default of the same id that this entry replaced.
    pub replaces_default: bool,
}

/// Every entry of the lists that add, in order, and the defaults removed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Provenance {
    pub entries: Vec<Origin>,
    /// `list:id` of each default the file removed.
    pub removed: Vec<String>,
    /// Lists the file took whole.
    pub replaced: Vec<String>,
}

pub const DEFAULTS: &str = "defaults";

/// How a list at `path` takes a user's entries: `None` when the file's list
/// replaces it (a setting).
fn adds(path: &[&str]) -> Option<Ids> {
    match path {
        ["rules"] => Some(Ids::Key("name")),
        ["understand", "intents"] => Some(Ids::Entry),
        ["understand", "languages", _, "sentences" | "examples"] => Some(Ids::Entry),
        ["understand", "languages", _, "offers"] => Some(Ids::Key("says")),
        ["understand", "languages", _, _] => Some(Ids::Word),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Ids {
    /// A table's field names it.
    Key(&'static str),
    /// `id`, or the intent with its slots or conditions (`HassTurnOn(domain=light)`).
    Entry,
    /// A string is its own id; anything else its TOML text.
    Word,
}

impl Ids {
    fn of(self, v: &Value) -> String {
        match (self, v) {
            (Self::Key(k), Value::Table(t)) => t.get(k).map_or_else(String::new, plain),
            (Self::Entry, Value::Table(t)) => {
                if let Some(id) = t.get("id") {
                    return plain(id);
                }
                let intent = t.get("intent").map_or_else(String::new, plain);
                let slots = t.get("when").or_else(|| t.get("slots"));
                match slots {
                    Some(Value::Table(s)) if !s.is_empty() => {
                        let s: Vec<String> =
                            s.iter().map(|(k, v)| format!("{k}={}", plain(v))).collect();
                        format!("{intent}({})", s.join(","))
                    }
                    _ => intent,
                }
            }
            (_, v) => plain(v),
        }
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The ids of a list's entries in order, the second of a same id marked `#2`
/// (so every default has one).
fn ids(ids: Ids, list: &[Value]) -> Vec<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    list.iter()
        .map(|v| {
            let id = ids.of(v);
            let n = seen.entry(id.clone()).or_default();
            *n += 1;
            if *n == 1 { id } else { format!("{id}#{n}") }
        })
        .collect()
}

/// The entries of the defaults' lists that add, all from `defaults`.
pub fn of_defaults(defaults: &Table) -> Provenance {
    let mut p = Provenance::default();
    walk(defaults, &mut Vec::new(), &mut |path, ids_of, list| {
        for id in ids(ids_of, list) {
            p.entries.push(Origin {
                list: path.to_owned(),
                id,
                from: DEFAULTS.into(),
                replaces_default: false,
            });
        }
    });
    p
}

fn walk<'a>(table: &'a Table, path: &mut Vec<&'a str>, seen: &mut dyn FnMut(&str, Ids, &[Value])) {
    for (key, value) in table {
        path.push(key);
        match value {
            Value::Table(t) => walk(t, path, seen),
            Value::Array(list) => {
                if let Some(ids) = adds(path) {
                    seen(&path.join("."), ids, list);
                }
            }
            _ => {}
        }
        path.pop();
    }
}

/// Lays `overlay` (from `origin`) over `base`, recording in `p` where each
/// entry of a list that adds came from.
pub fn merge(
    base: &mut Table,
    mut overlay: Table,
    origin: &str,
    p: &mut Provenance,
) -> Result<(), ConfigError> {
    if let Some(defaults) = overlay.remove("defaults") {
        drop_defaults(base, &defaults, origin, p)?;
    }
    merge_at(base, overlay, &mut Vec::new(), origin, p);
    Ok(())
}

fn merge_at(
    base: &mut Table,
    overlay: Table,
    path: &mut Vec<String>,
    origin: &str,
    p: &mut Provenance,
) {
    for (key, value) in overlay {
        path.push(key.clone());
        let at: Vec<&str> = path.iter().map(String::as_str).collect();
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge_at(b, o, path, origin, p),
            (Some(Value::Array(b)), Value::Array(o)) if adds(&at).is_some() => {
                let list = at.join(".");
                add_entries(b, o, adds(&at).unwrap_or(Ids::Word), &list, origin, p);
            }
            (_, v) => {
                if let (Value::Array(o), Some(ids_of)) = (&v, adds(&at)) {
                    // A list the defaults lack: all of it is the file's.
                    let list = at.join(".");
                    p.entries.retain(|e| e.list != list);
                    for id in ids(ids_of, o) {
                        p.entries.push(Origin {
                            list: list.clone(),
                            id,
                            from: origin.into(),
                            replaces_default: false,
                        });
                    }
                }
                base.insert(key, v);
            }
        }
        path.pop();
    }
}

/// The file's entries join the list; one with the id of an entry already
/// there replaces it in place. Two of the file's own with one id both join
/// (the checks that follow name the clash).
fn add_entries(
    base: &mut Vec<Value>,
    overlay: Vec<Value>,
    ids_of: Ids,
    list: &str,
    origin: &str,
    p: &mut Provenance,
) {
    let before = ids(ids_of, base);
    for entry in overlay {
        let id = ids_of.of(&entry);
        let same = before.iter().position(|b| *b == id);
        match (same, ids_of) {
            // A word already there is there once.
            (Some(_), Ids::Word) => continue,
            (Some(at), _) => {
                base[at] = entry;
                if let Some(o) = p.entries.iter_mut().find(|e| e.list == list && e.id == id) {
                    o.replaces_default = o.from == DEFAULTS || o.replaces_default;
                    o.from = origin.into();
                }
            }
            (None, _) => {
                base.push(entry);
                p.entries.push(Origin {
                    list: list.into(),
                    id,
                    from: origin.into(),
                    replaces_default: false,
                });
            }
        }
    }
}

/// `[defaults] remove = ["list:id", …]` and `replace = ["list", …]`.
fn drop_defaults(
    base: &mut Table,
    defaults: &Value,
    origin: &str,
    p: &mut Provenance,
) -> Result<(), ConfigError> {
    let bad = |problem: String| ConfigError::Value {
        key: format!("[defaults] in {origin}"),
        problem,
    };
    let Value::Table(d) = defaults else {
        return Err(bad(
            "must be a table with `remove` and `replace` lists".into()
        ));
    };
    for key in d.keys() {
        if key != "remove" && key != "replace" {
            return Err(bad(format!(
                "unknown key {key:?}; it takes `remove = [\"list:id\"]` and `replace = [\"list\"]`"
            )));
        }
    }
    let strings = |key: &str| -> Result<Vec<String>, ConfigError> {
        match d.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad(format!("{key} takes strings, not {v}")))
                })
                .collect(),
            Some(v) => Err(bad(format!("{key} takes a list of strings, not {v}"))),
        }
    };
    for target in strings("remove")? {
        let Some((list, id)) = target.split_once(':') else {
            return Err(bad(format!(
                "remove {target:?}: say the list and the id, as \"rules:lights.switch\"; `caal config check --json` lists every id"
            )));
        };
        let path: Vec<&str> = list.split('.').collect();
        let Some(ids_of) = adds(&path) else {
            return Err(bad(format!(
                "remove {target:?}: {list} is not a list that adds (rules, understand.intents, understand.languages.LANG.sentences, examples, offers or a word list)"
            )));
        };
        let entries = list_at(base, &path).ok_or_else(|| {
            bad(format!(
                "remove {target:?}: the defaults have no list {list}"
            ))
        })?;
        let at = ids(ids_of, entries).iter().position(|i| i == id).ok_or_else(|| {
            bad(format!(
                "remove {target:?}: no default in {list} has the id {id:?}; `caal config check --json` lists every id"
            ))
        })?;
        entries.remove(at);
        p.entries.retain(|e| !(e.list == list && e.id == id));
        p.removed.push(target);
    }
    for list in strings("replace")? {
        let path: Vec<&str> = list.split('.').collect();
        if adds(&path).is_none() {
            return Err(bad(format!(
                "replace {list:?}: not a list that adds; any other list is already the file's when the file sets it"
            )));
        }
        let entries = list_at(base, &path)
            .ok_or_else(|| bad(format!("replace {list:?}: the defaults have no such list")))?;
        entries.clear();
        p.entries.retain(|e| e.list != list);
        p.replaced.push(list);
    }
    Ok(())
}

fn list_at<'a>(table: &'a mut Table, path: &[&str]) -> Option<&'a mut Vec<Value>> {
    let (last, tables) = path.split_last()?;
    let mut t = table;
    for key in tables {
        t = t.get_mut(*key)?.as_table_mut()?;
    }
    t.get_mut(*last)?.as_array_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        text.parse().unwrap()
    }

    const BASE: &str = r#"
        hosts = ["a"]
        [[rules]]
        name = "one"
        pattern = "x"
        [[rules]]
        name = "two"
        pattern = "y"
        [understand.languages.en]
        skip_words = ["hey", "now"]
        [[understand.intents]]
        intent = "On"
        when = { domain = "light" }
        command = "lights.set"
        [[understand.intents]]
        intent = "On"
        when = { domain = "light" }
        command = "light.set"
    "#;

    fn merged(file: &str) -> Result<(Table, Provenance), ConfigError> {
        let mut base = table(BASE);
        let mut p = of_defaults(&base);
        merge(&mut base, table(file), "mine.toml", &mut p)?;
        Ok((base, p))
    }

    fn names(t: &Table) -> Vec<String> {
        t["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_users_entries_join_the_defaults_and_an_id_replaces_its_default_in_place() {
        let (t, p) = merged(
            r#"
            hosts = ["b"]
            [[rules]]
            name = "three"
            pattern = "z"
            [[rules]]
            name = "one"
            pattern = "mine"
            [understand.languages.en]
            skip_words = ["now", "please do"]
            "#,
        )
        .unwrap();
        assert_eq!(names(&t), ["one", "two", "three"]);
        assert_eq!(t["rules"][0]["pattern"].as_str(), Some("mine"));
        // A setting's list is the file's.
        assert_eq!(t["hosts"].as_array().unwrap().len(), 1);
        assert_eq!(t["hosts"][0].as_str(), Some("b"));
        let skip = &t["understand"]["languages"]["en"]["skip_words"];
        assert_eq!(skip.as_array().unwrap().len(), 3, "{skip}");
        let one = p.entries.iter().find(|e| e.id == "one").unwrap();
        assert_eq!(
            (one.from.as_str(), one.replaces_default),
            ("mine.toml", true)
        );
        let two = p.entries.iter().find(|e| e.id == "two").unwrap();
        assert_eq!((two.from.as_str(), two.replaces_default), (DEFAULTS, false));
        assert!(
            p.entries
                .iter()
                .any(|e| e.id == "please do" && e.from == "mine.toml")
        );
        // Entries without an id are named by intent and conditions, a second
        // of the same marked.
        let intents: Vec<&str> = p
            .entries
            .iter()
            .filter(|e| e.list == "understand.intents")
            .map(|e| e.id.as_str())
            .collect();
        assert_eq!(intents, ["On(domain=light)", "On(domain=light)#2"]);
    }

    #[test]
    fn defaults_are_removed_by_id_or_a_list_taken_whole_and_a_wrong_name_says_how() {
        let (t, p) = merged(
            r#"
            [defaults]
            remove = ["rules:two", "understand.languages.en.skip_words:hey", "understand.intents:On(domain=light)#2"]
            replace = []
            "#,
        )
        .unwrap();
        assert_eq!(names(&t), ["one"]);
        assert_eq!(
            t["understand"]["languages"]["en"]["skip_words"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(t["understand"]["intents"].as_array().unwrap().len(), 1);
        assert_eq!(p.removed.len(), 3);
        assert!(!p.entries.iter().any(|e| e.id == "two"));

        let (t, p) = merged(
            "[defaults]\nreplace = [\"rules\"]\n[[rules]]\nname = \"mine\"\npattern = \"m\"\n",
        )
        .unwrap();
        assert_eq!(names(&t), ["mine"]);
        assert_eq!(p.replaced, ["rules"]);

        for (file, says) in [
            (
                "[defaults]\nremove = [\"rules:nine\"]",
                "no default in rules has the id \"nine\"",
            ),
            (
                "[defaults]\nremove = [\"rules\"]",
                "say the list and the id",
            ),
            ("[defaults]\nremove = [\"hosts:a\"]", "not a list that adds"),
            ("[defaults]\ndrop = []", "unknown key \"drop\""),
        ] {
            let err = merged(file).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("mine.toml"),
                "{file}: {err}"
            );
        }
    }
}
