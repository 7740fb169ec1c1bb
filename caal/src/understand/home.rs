//! The home model: the areas people name (with the other names they use),
//! the devices in them (a kind, Home Assistant's domain; an area; other
//! names). Parameters resolve against it: "bedroom lamp" is a light in the
//! bedroom; "the lamp" when there are two asks which; a room that is not
//! there gets a reply naming the rooms there are.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::template::{ListValue, SlotList, parse};
use crate::config::{ConfigError, HomeConfig};

#[derive(Clone, Debug, PartialEq)]
pub struct Area {
    pub name: String,
    pub aliases: Vec<String>,
    pub floor: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// What commands receive (`front` for the front door's lock); the name if not set.
    pub id: String,
    pub name: String,
    pub domain: String,
    pub area: Option<String>,
    pub device_class: Option<String>,
    pub aliases: Vec<String>,
}

/// Areas and devices, checked, with the lists templates match against.
#[derive(Clone, Debug, Default)]
pub struct Home {
    pub areas: Vec<Area>,
    pub devices: Vec<Device>,
    lists: HashMap<String, SlotList>,
    /// Words that name a kind of device, never one device alone (the
    /// language's `light_words`: "the light" is the lights of here, or all).
    kind_words: Vec<String>,
}

fn lower(s: &str) -> String {
    super::normalize(s)
}

impl Home {
    pub fn from_config(config: &HomeConfig) -> Result<Self, ConfigError> {
        let problem = |what: &str, name: &str, problem: String| ConfigError::Item {
            what: if what == "area" {
                "home area"
            } else {
                "home device"
            },
            name: name.to_owned(),
            problem,
        };
        let mut areas: Vec<Area> = Vec::new();
        for a in &config.areas {
            let name = lower(&a.name);
            if name.is_empty() {
                return Err(problem("area", &a.name, "has an empty name".into()));
            }
            if areas.iter().any(|x| x.name == name) {
                return Err(problem("area", &a.name, "is listed twice".into()));
            }
            areas.push(Area {
                name,
                aliases: a.aliases.iter().map(|s| lower(s)).collect(),
                floor: a.floor.as_deref().map(lower),
            });
        }
        let mut devices: Vec<Device> = Vec::new();
        for d in &config.devices {
            let name = lower(&d.name);
            if name.is_empty() {
                return Err(problem("device", &d.name, "has an empty name".into()));
            }
            if devices.iter().any(|x| x.name == name) {
                return Err(problem("device", &d.name, "is listed twice".into()));
            }
            let area = d.area.as_deref().map(lower);
            if let Some(area) = &area
                && !areas.iter().any(|a| &a.name == area)
            {
                return Err(problem(
                    "device",
                    &d.name,
                    format!(
                        "is in area {area:?}, which is not under [[home.areas]]; the areas are {}",
                        areas
                            .iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            devices.push(Device {
                id: d.id.clone().unwrap_or_else(|| name.clone()),
                name,
                domain: d.domain.trim().to_owned(),
                area,
                device_class: d.device_class.clone(),
                aliases: d.aliases.iter().map(|s| lower(s)).collect(),
            });
        }
        let mut home = Home {
            areas,
            devices,
            lists: HashMap::new(),
            kind_words: Vec::new(),
        };
        home.rebuild_lists()?;
        Ok(home)
    }

    /// The home with `words` (normalised) as the words that name a kind of
    /// device: a device's last word that is one of them ("desk light") does
    /// not name the device alone.
    pub fn with_kind_words(mut self, words: &[String]) -> Result<Self, ConfigError> {
        self.kind_words = words.iter().map(|w| lower(w)).collect();
        self.rebuild_lists()?;
        Ok(self)
    }

    /// The lists templates match, made again from the areas, devices and kind words.
    fn rebuild_lists(&mut self) -> Result<(), ConfigError> {
        self.lists = self.build_lists().map_err(|e| ConfigError::Value {
            key: "home".into(),
            problem: e.to_string(),
        })?;
        Ok(())
    }

    /// Whether `word` names a kind of device rather than one (`with_kind_words`).
    pub fn is_kind_word(&self, word: &str) -> bool {
        self.kind_words.iter().any(|w| w == word)
    }

    /// The lists templates name: `area`, `floor`, `name`.
    pub fn lists(&self) -> &HashMap<String, SlotList> {
        &self.lists
    }

    fn build_lists(&self) -> Result<HashMap<String, SlotList>, super::template::TemplateError> {
        let literal = |s: &str| parse(&escape(s));
        let mut areas = Vec::new();
        for a in &self.areas {
            for said in std::iter::once(&a.name).chain(&a.aliases) {
                areas.push(ListValue {
                    said: literal(said)?,
                    value: json!(a.name),
                    context: Some(Arc::new(BTreeMap::from([("area".into(), a.name.clone())]))),
                });
            }
        }
        let mut floors: Vec<String> = self.areas.iter().filter_map(|a| a.floor.clone()).collect();
        floors.sort();
        floors.dedup();
        let floors = floors
            .iter()
            .map(|f| {
                Ok(ListValue {
                    said: literal(f)?,
                    value: json!(f),
                    context: None,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut names = Vec::new();
        for d in &self.devices {
            let context = Arc::new(device_context(d));
            for said in std::iter::once(&d.name).chain(&d.aliases) {
                names.push(ListValue {
                    said: literal(said)?,
                    value: json!(d.id),
                    context: Some(context.clone()),
                });
            }
        }
        // A device's last word alone ("lamp") names it when it is the only
        // one, and names all of them, to ask which, when it is not.
        let mut by_last_word: BTreeMap<String, Vec<&Device>> = BTreeMap::new();
        for d in &self.devices {
            if let Some((_, last)) = d.name.rsplit_once(' ') {
                by_last_word.entry(last.to_owned()).or_default().push(d);
            }
        }
        for (word, found) in by_last_word {
            // "the light" is the lights (of here, or all), not one device.
            if self.is_kind_word(&word)
                || self
                    .devices
                    .iter()
                    .any(|d| d.name == word || d.aliases.contains(&word))
                || self.areas.iter().any(|a| a.name == word)
            {
                continue;
            }
            let (value, context) = match found.as_slice() {
                [one] => (json!(one.id), device_context(one)),
                many => {
                    let mut context = BTreeMap::new();
                    if many.iter().all(|d| d.domain == many[0].domain) {
                        context.insert("domain".into(), many[0].domain.clone());
                    }
                    (
                        json!(many.iter().map(|d| d.id.clone()).collect::<Vec<_>>()),
                        context,
                    )
                }
            };
            names.push(ListValue {
                said: literal(&word)?,
                value,
                context: Some(Arc::new(context)),
            });
        }
        Ok(HashMap::from([
            ("area".to_string(), SlotList::Values(areas)),
            ("floor".to_string(), SlotList::Values(floors)),
            ("name".to_string(), SlotList::Values(names)),
        ]))
    }

    /// "The lamp in the office" said as "lamp" and an area: of the devices
    /// a slot holds, the one in that area.
    pub fn narrow_by_area(&self, slots: &mut BTreeMap<String, super::Slot>) {
        let Some(area) = slots.get("area").map(super::Slot::text) else {
            return;
        };
        for slot in slots.values_mut() {
            if !slot.value.is_array() {
                continue;
            }
            let here: Vec<String> = value_names(&slot.value)
                .into_iter()
                .filter(|id| {
                    self.device(id)
                        .is_some_and(|d| d.area.as_deref() == Some(area.as_str()))
                })
                .collect();
            if let [one] = here.as_slice() {
                slot.value = Value::String(one.clone());
            }
        }
    }

    /// As `narrow_by_area`, and the area then left out where it picked the
    /// one device named: the request is that device's, not the room's.
    pub fn device_by_area(&self, slots: &mut BTreeMap<String, super::Slot>) {
        let shared = slots.get("name").is_some_and(|s| s.value.is_array());
        self.narrow_by_area(slots);
        if shared && slots.get("name").is_some_and(|s| s.value.is_string()) {
            slots.remove("area");
        }
    }

    pub fn device(&self, id: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.id == id)
    }

    /// The area a client says it is in, by its name or another name
    /// ("lounge": the living room), as the router names it; None if the
    /// home has no such area.
    pub fn area_named(&self, said: &str) -> Option<&str> {
        let said = lower(said.trim());
        self.areas
            .iter()
            .find(|a| a.name == said || a.aliases.contains(&said))
            .map(|a| a.name.as_str())
    }

    /// Every name and other name of the home's areas and devices.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        (self.areas.iter())
            .flat_map(|a| std::iter::once(&a.name).chain(&a.aliases))
            .chain((self.devices.iter()).flat_map(|d| std::iter::once(&d.name).chain(&d.aliases)))
    }

    pub fn area_names(&self) -> Vec<&str> {
        self.areas.iter().map(|a| a.name.as_str()).collect()
    }

    /// Devices of a kind, by name ("front door, back door").
    pub fn device_names(&self, domain: Option<&str>) -> Vec<&str> {
        self.devices
            .iter()
            .filter(|d| domain.is_none_or(|k| d.domain == k))
            .map(|d| d.name.as_str())
            .collect()
    }

    /// Whisper's prompt from `voice.prompt`: `{names}` there becomes the
    /// home's rooms and devices ("Kitchen, living room, desk lamp").
    pub fn speech_prompt(&self, template: &str) -> String {
        let mut names: Vec<&str> = self.area_names();
        names.extend(self.devices.iter().map(|d| d.name.as_str()));
        let names = super::super::auth::capitalise(&names.join(", "));
        template.replace("{names}", &names).trim().to_owned()
    }

    /// The template lists with `area` and `name` open to any words: used
    /// only after nothing matched, to tell a room or device that is not in
    /// the home from talk that is not a request.
    pub fn open_lists(&self) -> HashMap<String, SlotList> {
        let mut lists = self.lists.clone();
        lists.insert("area".into(), SlotList::Wildcard);
        lists.insert("name".into(), SlotList::Wildcard);
        lists
    }
}

fn device_context(d: &Device) -> BTreeMap<String, String> {
    let mut c = BTreeMap::from([
        ("domain".to_string(), d.domain.clone()),
        ("name".to_string(), d.name.clone()),
    ]);
    if let Some(area) = &d.area {
        c.insert("area".into(), area.clone());
    }
    if let Some(class) = &d.device_class {
        c.insert("device_class".into(), class.clone());
    }
    c
}

/// A name as a template that matches just itself.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "()[]{}<>|;\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The value a slot named a device with, for replies.
pub fn value_names(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Value::String(s) => vec![s.clone()],
        other => vec![other.to_string()],
    }
}
