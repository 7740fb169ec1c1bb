//! The home as Home Assistant knows it: areas (with their other names and
//! floors) from the area registry, and the entities a person would talk
//! to, each with its name, domain, area (its own, else its device's),
//! device class and other names, read from Home Assistant's WebSocket API
//! (`config/area_registry/list`, `config/floor_registry/list`,
//! `config/device_registry/list`, `config/entity_registry/list`) and its
//! REST `GET /api/states` (friendly names, and which entities exist now).
//! The result is CAAL's own `[home]` configuration, device ids being entity
//! ids, so a person can read it, keep it, and edit it.
//!
//! Left out: entities that are disabled or hidden, configuration and
//! diagnostic entities, entities not exposed to Assist, and domains no
//! sentence speaks of.

use std::{
    collections::BTreeMap,
    net::{TcpStream, ToSocketAddrs},
    sync::Arc,
    time::Duration,
};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

use super::tls;

use crate::config::{AreaConfig, DeviceConfig, HomeAssistantConfig, HomeConfig};

/// Domains a person talks to an assistant about.
pub const DOMAINS: &[&str] = &[
    "light",
    "switch",
    "fan",
    "lock",
    "cover",
    "climate",
    "todo",
    "media_player",
    "vacuum",
    "valve",
    "scene",
    "script",
];

#[derive(Debug, thiserror::Error)]
pub enum HaImportError {
    #[error(
        "no Home Assistant token: set {0} to a long-lived access token (Home Assistant: your profile, Security, Long-lived access tokens)"
    )]
    NoToken(String),
    #[error(
        "Home Assistant's URL {0:?} is not http://host[:port] or https://host[:port]; set [executors.home_assistant] url"
    )]
    Url(String),
    #[error("cannot reach Home Assistant at {url} ({detail}); is it running there?")]
    Unreachable { url: String, detail: String },
    #[error(
        "Home Assistant at {url} showed a certificate this machine does not trust ({detail}); set [executors.home_assistant] ca_file to the CA certificate (PEM) that signed it"
    )]
    Untrusted { url: String, detail: String },
    #[error("{0}")]
    CaFile(String),
    #[error(
        "Home Assistant refused the token in {token_env}: {message}; make a new long-lived access token"
    )]
    AuthInvalid { token_env: String, message: String },
    #[error("Home Assistant answered {what} with something unexpected: {detail}")]
    Protocol { what: String, detail: String },
}

/// Where Home Assistant is: its WebSocket API's address (`ws://`, or
/// `wss://` for https), the base of its REST API, and the host and port to
/// connect to.
#[derive(Debug, PartialEq)]
struct Address {
    ws_url: String,
    base: String,
    host: String,
    port: u16,
    tls: bool,
}

fn addresses(url: &str) -> Result<Address, HaImportError> {
    let base = url.trim().trim_end_matches('/');
    let bad = || HaImportError::Url(url.to_owned());
    let (tls, rest) = match base.split_once("://") {
        Some(("http", rest)) => (false, rest),
        Some(("https", rest)) => (true, rest),
        _ => return Err(bad()),
    };
    if rest.is_empty() || rest.contains('/') {
        return Err(bad());
    }
    // "[::1]:8123", "homeassistant.local:8123", "ha.example.org"
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && !p.contains(']') => {
            (h, p.parse::<u16>().map_err(|_| bad())?)
        }
        _ => (rest, if tls { 443 } else { 80 }),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok(Address {
        ws_url: format!("{}://{rest}/api/websocket", if tls { "wss" } else { "ws" }),
        base: base.to_owned(),
        host: host.to_owned(),
        port,
        tls,
    })
}

/// One WebSocket session: authenticated, then a command at a time.
struct Session {
    socket: WebSocket<tls::Stream>,
    next_id: u64,
}

impl Session {
    fn open(
        at: &Address,
        tls_config: Option<Arc<rustls::ClientConfig>>,
        token: &str,
        token_env: &str,
        timeout: Duration,
    ) -> Result<Self, HaImportError> {
        let ws_url = at.ws_url.as_str();
        let unreachable = |detail: String| HaImportError::Unreachable {
            url: ws_url.to_owned(),
            detail,
        };
        let tcp = (at.host.as_str(), at.port)
            .to_socket_addrs()
            .map_err(|e| unreachable(e.to_string()))?
            .find_map(|a| TcpStream::connect_timeout(&a, timeout).ok())
            .ok_or_else(|| unreachable("no address of it answered".into()))?;
        tcp.set_read_timeout(Some(timeout))
            .and_then(|()| tcp.set_write_timeout(Some(timeout)))
            .map_err(|e| unreachable(e.to_string()))?;
        let stream =
            match tls_config {
                Some(config) => tls::Stream::tls(tcp, &at.host, config).map_err(|e| {
                    match tls::certificate_problem(&e) {
                        Some(detail) => HaImportError::Untrusted {
                            url: ws_url.to_owned(),
                            detail,
                        },
                        None => unreachable(e.to_string()),
                    }
                })?,
                None => tls::Stream::Plain(tcp),
            };
        let (socket, _) = tungstenite::client(ws_url, stream).map_err(|e| match e {
            tungstenite::HandshakeError::Failure(e) => unreachable(e.to_string()),
            tungstenite::HandshakeError::Interrupted(_) => {
                unreachable("the handshake did not finish in time".into())
            }
        })?;
        let mut session = Self { socket, next_id: 1 };
        let hello = session.read("the connection")?;
        if hello["type"] != "auth_required" {
            return Err(protocol("the connection", &hello));
        }
        session.send(json!({"type": "auth", "access_token": token}))?;
        let answer = session.read("the token")?;
        match answer["type"].as_str() {
            Some("auth_ok") => Ok(session),
            Some("auth_invalid") => Err(HaImportError::AuthInvalid {
                token_env: token_env.to_owned(),
                message: answer["message"]
                    .as_str()
                    .unwrap_or("invalid token")
                    .to_owned(),
            }),
            _ => Err(protocol("the token", &answer)),
        }
    }

    fn send(&mut self, message: Value) -> Result<(), HaImportError> {
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(|e| HaImportError::Protocol {
                what: "a message sent".into(),
                detail: e.to_string(),
            })
    }

    fn read(&mut self, what: &str) -> Result<Value, HaImportError> {
        loop {
            let message = self.socket.read().map_err(|e| HaImportError::Protocol {
                what: what.to_owned(),
                detail: e.to_string(),
            })?;
            match message {
                Message::Text(text) => {
                    return serde_json::from_str(text.as_str()).map_err(|e| {
                        HaImportError::Protocol {
                            what: what.to_owned(),
                            detail: format!("not JSON: {e}"),
                        }
                    });
                }
                Message::Close(_) => {
                    return Err(HaImportError::Protocol {
                        what: what.to_owned(),
                        detail: "the connection was closed".into(),
                    });
                }
                _ => continue,
            }
        }
    }

    /// A command's result (a list); `optional` commands that Home Assistant
    /// does not know (older versions have no floors) give an empty list.
    fn list(&mut self, command: &str, optional: bool) -> Result<Vec<Value>, HaImportError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"id": id, "type": command}))?;
        loop {
            let answer = self.read(command)?;
            // Events or answers to nothing we asked are skipped.
            if answer["id"].as_u64() != Some(id) || answer["type"] != "result" {
                continue;
            }
            if answer["success"] != true {
                if optional {
                    return Ok(Vec::new());
                }
                return Err(HaImportError::Protocol {
                    what: command.to_owned(),
                    detail: answer["error"].to_string(),
                });
            }
            return answer["result"]
                .as_array()
                .cloned()
                .ok_or_else(|| protocol(command, &answer));
        }
    }
}

fn protocol(what: &str, got: &Value) -> HaImportError {
    let mut detail = got.to_string();
    detail.truncate(200);
    HaImportError::Protocol {
        what: what.to_owned(),
        detail,
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(text).collect())
        .unwrap_or_default()
}

/// What Home Assistant's registries and states say, as CAAL's `[home]`.
pub fn home_from(
    areas: &[Value],
    floors: &[Value],
    devices: &[Value],
    entities: &[Value],
    states: &[Value],
) -> HomeConfig {
    let floor_names: BTreeMap<String, String> = floors
        .iter()
        .filter_map(|f| Some((text(&f["floor_id"])?, text(&f["name"])?)))
        .collect();
    let area_names: BTreeMap<String, String> = areas
        .iter()
        .filter_map(|a| Some((text(&a["area_id"])?, text(&a["name"])?)))
        .collect();
    let device_areas: BTreeMap<String, String> = devices
        .iter()
        .filter_map(|d| Some((text(&d["id"])?, text(&d["area_id"])?)))
        .collect();
    let registry: BTreeMap<String, &Value> = entities
        .iter()
        .filter_map(|e| Some((text(&e["entity_id"])?, e)))
        .collect();
    let mut home = HomeConfig {
        areas: areas
            .iter()
            .filter_map(|a| {
                Some(AreaConfig {
                    name: text(&a["name"])?,
                    aliases: strings(&a["aliases"]),
                    floor: text(&a["floor_id"]).and_then(|f| floor_names.get(&f).cloned()),
                })
            })
            .collect(),
        devices: Vec::new(),
    };
    let mut taken: Vec<String> = Vec::new();
    for state in states {
        let Some(entity_id) = text(&state["entity_id"]) else {
            continue;
        };
        let Some((domain, _)) = entity_id.split_once('.') else {
            continue;
        };
        if !DOMAINS.contains(&domain) {
            continue;
        }
        let entry = registry.get(&entity_id).copied().unwrap_or(&Value::Null);
        let left_out = !entry["disabled_by"].is_null()
            || !entry["hidden_by"].is_null()
            || !entry["entity_category"].is_null()
            || entry["options"]["conversation"]["should_expose"] == false;
        if left_out {
            continue;
        }
        let attributes = &state["attributes"];
        let Some(name) = text(&entry["name"]).or_else(|| text(&attributes["friendly_name"])) else {
            continue;
        };
        // Two entities of one name ("Lamp" in two rooms) are told apart by their area.
        let area_id = text(&entry["area_id"])
            .or_else(|| text(&entry["device_id"]).and_then(|d| device_areas.get(&d).cloned()));
        let area = area_id.and_then(|a| area_names.get(&a).cloned());
        let lower = name.to_lowercase();
        let name = if taken.contains(&lower) {
            match &area {
                Some(area) if !taken.contains(&format!("{} {lower}", area.to_lowercase())) => {
                    format!("{area} {name}")
                }
                _ => entity_id.clone(),
            }
        } else {
            name
        };
        taken.push(name.to_lowercase());
        home.devices.push(DeviceConfig {
            name,
            domain: domain.to_owned(),
            area,
            id: Some(entity_id),
            device_class: text(&attributes["device_class"])
                .or_else(|| text(&entry["device_class"]))
                .or_else(|| text(&entry["original_device_class"])),
            aliases: strings(&entry["aliases"]),
        });
    }
    home
}

/// Reads the home from the Home Assistant `config` names, with the token
/// from the environment variable it names.
pub fn import(
    config: &HomeAssistantConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<HomeConfig, HaImportError> {
    let token = env(&config.token_env)
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| HaImportError::NoToken(config.token_env.clone()))?;
    let at = addresses(&config.url)?;
    let timeout = Duration::from_millis(config.timeout_ms.max(1));
    let ca = config
        .ca_file
        .as_deref()
        .map(tls::ca_certificates)
        .transpose()
        .map_err(HaImportError::CaFile)?;
    let tls_config = at
        .tls
        .then(|| tls::rustls_client(ca.as_deref()))
        .transpose()
        .map_err(HaImportError::CaFile)?;
    let mut session = Session::open(&at, tls_config, &token, &config.token_env, timeout)?;
    let areas = session.list("config/area_registry/list", false)?;
    let floors = session.list("config/floor_registry/list", true)?;
    let devices = session.list("config/device_registry/list", false)?;
    let entities = session.list("config/entity_registry/list", false)?;
    let _ = session.socket.close(None);
    let agent = super::http::agent(config.timeout_ms.max(1), ca.as_deref());
    let url = format!("{}/api/states", at.base);
    let mut response = agent
        .get(&url)
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .map_err(|e| match tls::certificate_problem(&e) {
            Some(detail) => HaImportError::Untrusted {
                url: url.clone(),
                detail,
            },
            None => HaImportError::Unreachable {
                url: url.clone(),
                detail: e.to_string(),
            },
        })?;
    let status = response.status().as_u16();
    if status == 401 || status == 403 {
        return Err(HaImportError::AuthInvalid {
            token_env: config.token_env.clone(),
            message: format!("GET /api/states answered HTTP {status}"),
        });
    }
    let body = response.body_mut().read_to_string().unwrap_or_default();
    let states: Value = serde_json::from_str(&body).map_err(|e| HaImportError::Protocol {
        what: "GET /api/states".into(),
        detail: format!("HTTP {status}, not JSON: {e}"),
    })?;
    let states = states
        .as_array()
        .ok_or_else(|| protocol("GET /api/states", &states))?;
    Ok(home_from(&areas, &floors, &devices, &entities, states))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_and_states_become_the_home() {
        let areas = vec![
            json!({"area_id": "kitchen", "name": "Kitchen", "aliases": [], "floor_id": "ground"}),
            json!({"area_id": "bedroom", "name": "Bedroom", "aliases": ["master bedroom"], "floor_id": null}),
        ];
        let floors = vec![json!({"floor_id": "ground", "name": "Ground Floor"})];
        let devices = vec![json!({"id": "dev1", "area_id": "bedroom"})];
        let entities = vec![
            json!({"entity_id": "light.ceiling", "area_id": "kitchen", "device_id": null, "name": null,
                   "aliases": ["big light"], "disabled_by": null, "hidden_by": null, "entity_category": null}),
            json!({"entity_id": "light.bedside", "area_id": null, "device_id": "dev1", "name": "Bedside lamp",
                   "aliases": [], "disabled_by": null, "hidden_by": null, "entity_category": null}),
            json!({"entity_id": "light.old", "disabled_by": "user"}),
            json!({"entity_id": "switch.firmware", "entity_category": "config"}),
            json!({"entity_id": "lock.back", "options": {"conversation": {"should_expose": false}}}),
        ];
        let states = vec![
            json!({"entity_id": "light.ceiling", "state": "off", "attributes": {"friendly_name": "Ceiling"}}),
            json!({"entity_id": "light.bedside", "state": "on", "attributes": {"friendly_name": "Bedside"}}),
            json!({"entity_id": "light.old", "state": "off", "attributes": {"friendly_name": "Old"}}),
            json!({"entity_id": "switch.firmware", "state": "off", "attributes": {"friendly_name": "Firmware"}}),
            json!({"entity_id": "lock.back", "state": "locked", "attributes": {"friendly_name": "Back door"}}),
            json!({"entity_id": "sensor.temp", "state": "20", "attributes": {"friendly_name": "Temperature"}}),
            json!({"entity_id": "cover.garage", "state": "closed",
                   "attributes": {"friendly_name": "Garage door", "device_class": "garage"}}),
        ];
        let home = home_from(&areas, &floors, &devices, &entities, &states);
        assert_eq!(home.areas.len(), 2);
        assert_eq!(home.areas[0].floor.as_deref(), Some("Ground Floor"));
        assert_eq!(home.areas[1].aliases, vec!["master bedroom"]);
        let names: Vec<(&str, &str, Option<&str>)> = home
            .devices
            .iter()
            .map(|d| {
                (
                    d.name.as_str(),
                    d.id.as_deref().unwrap_or_default(),
                    d.area.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("Ceiling", "light.ceiling", Some("Kitchen")),
                ("Bedside lamp", "light.bedside", Some("Bedroom")),
                ("Garage door", "cover.garage", None),
            ]
        );
        assert_eq!(home.devices[0].aliases, vec!["big light"]);
        assert_eq!(home.devices[2].device_class.as_deref(), Some("garage"));
    }

    #[test]
    fn two_entities_of_one_name_are_told_apart_by_their_area() {
        let areas = vec![
            json!({"area_id": "a", "name": "Office"}),
            json!({"area_id": "b", "name": "Bedroom"}),
        ];
        let entities = vec![
            json!({"entity_id": "light.lamp_1", "area_id": "a"}),
            json!({"entity_id": "light.lamp_2", "area_id": "b"}),
            json!({"entity_id": "light.lamp_3"}),
        ];
        let states: Vec<Value> = ["light.lamp_1", "light.lamp_2", "light.lamp_3"]
            .iter()
            .map(|id| json!({"entity_id": id, "attributes": {"friendly_name": "Lamp"}}))
            .collect();
        let home = home_from(&areas, &[], &[], &entities, &states);
        let names: Vec<&str> = home.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, vec!["Lamp", "Bedroom Lamp", "light.lamp_3"]);
    }

    #[test]
    fn http_and_https_addresses_are_taken_and_nothing_else() {
        let at = addresses("http://homeassistant.local:8123/").unwrap();
        assert_eq!(at.ws_url, "ws://homeassistant.local:8123/api/websocket");
        assert_eq!(at.base, "http://homeassistant.local:8123");
        assert_eq!(
            (at.host.as_str(), at.port, at.tls),
            ("homeassistant.local", 8123, false)
        );
        let at = addresses("https://ha.example").unwrap();
        assert_eq!(at.ws_url, "wss://ha.example/api/websocket");
        assert_eq!(
            (at.host.as_str(), at.port, at.tls),
            ("ha.example", 443, true)
        );
        let at = addresses("https://[::1]:8443").unwrap();
        assert_eq!((at.host.as_str(), at.port), ("::1", 8443));
        for bad in [
            "ha:8123",
            "ftp://ha",
            "http://",
            "http://ha/path",
            "https://ha:port",
        ] {
            assert!(
                matches!(addresses(bad), Err(HaImportError::Url(_))),
                "{bad}"
            );
        }
    }
}
