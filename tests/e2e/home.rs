//! The home imported from Home Assistant: a local server that speaks Home
//! Assistant's wire protocol (the WebSocket API's auth and registry
//! commands, REST `GET /api/states` with a bearer token) stands in for it,
//! over plain http or over https with a certificate its own CA signed
//! (rustls, the CA and certificate made by rcgen), as a home installation
//! with its own certificate runs.

use std::io::{BufRead, BufReader, Cursor, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::{fs, thread};

use serde_json::{Value, json};
use tungstenite::Message;

use crate::support::Sandbox;

const TOKEN: &str = "ha-test-token-0123456789";

fn registries(command: &str) -> Option<Value> {
    Some(match command {
        "config/area_registry/list" => json!([
            {"area_id": "kitchen", "name": "Kitchen", "aliases": ["cookhouse"], "floor_id": "ground", "icon": null},
            {"area_id": "nursery", "name": "Nursery", "aliases": [], "floor_id": "upstairs", "icon": null},
            {"area_id": "den", "name": "Den", "aliases": ["snug"], "floor_id": null, "icon": null}
        ]),
        "config/floor_registry/list" => json!([
            {"floor_id": "ground", "name": "Ground floor", "level": 0},
            {"floor_id": "upstairs", "name": "Upstairs", "level": 1}
        ]),
        "config/device_registry/list" => json!([
            {"id": "d-nightlight", "area_id": "nursery", "name": "Night light hub", "name_by_user": null}
        ]),
        "config/entity_registry/list" => json!([
            {"entity_id": "light.kitchen_island", "area_id": "kitchen", "device_id": null, "name": null,
             "aliases": ["island lights"], "disabled_by": null, "hidden_by": null, "entity_category": null, "options": {}},
            {"entity_id": "light.night_light", "area_id": null, "device_id": "d-nightlight", "name": "Night light",
             "aliases": [], "disabled_by": null, "hidden_by": null, "entity_category": null, "options": {}},
            {"entity_id": "lock.den_door", "area_id": "den", "device_id": null, "name": null, "aliases": [],
             "disabled_by": null, "hidden_by": null, "entity_category": null, "options": {}},
            {"entity_id": "switch.kitchen_firmware", "area_id": "kitchen", "device_id": null, "name": null,
             "aliases": [], "disabled_by": null, "hidden_by": null, "entity_category": "config", "options": {}},
            {"entity_id": "light.secret_lab", "area_id": "den", "device_id": null, "name": null, "aliases": [],
             "disabled_by": null, "hidden_by": null, "entity_category": null,
             "options": {"conversation": {"should_expose": false}}}
        ]),
        _ => return None,
    })
}

fn states() -> Value {
    json!([
        {"entity_id": "light.kitchen_island", "state": "off", "attributes": {"friendly_name": "Kitchen island"}},
        {"entity_id": "light.night_light", "state": "on", "attributes": {"friendly_name": "Night light"}},
        {"entity_id": "lock.den_door", "state": "locked", "attributes": {"friendly_name": "Den door"}},
        {"entity_id": "switch.kitchen_firmware", "state": "off", "attributes": {"friendly_name": "Firmware update"}},
        {"entity_id": "light.secret_lab", "state": "off", "attributes": {"friendly_name": "Secret lab"}},
        {"entity_id": "sensor.outside_temperature", "state": "4", "attributes": {"friendly_name": "Outside"}}
    ])
}

/// One WebSocket session as Home Assistant runs it: auth_required, auth,
/// auth_ok (or auth_invalid and close), then `{id, type}` commands each
/// answered with `{id, type: "result", success, result}`.
fn websocket<S: Read + Write>(stream: S) {
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    let send = |ws: &mut tungstenite::WebSocket<S>, v: Value| {
        ws.send(Message::text(v.to_string())).is_ok()
    };
    if !send(
        &mut ws,
        json!({"type": "auth_required", "ha_version": "2026.11.0"}),
    ) {
        return;
    }
    let Ok(Message::Text(auth)) = ws.read() else {
        return;
    };
    let auth: Value = serde_json::from_str(auth.as_str()).unwrap_or_default();
    if auth["type"] != "auth" || auth["access_token"] != TOKEN {
        send(
            &mut ws,
            json!({"type": "auth_invalid", "message": "Invalid access token or password"}),
        );
        let _ = ws.close(None);
        return;
    }
    send(
        &mut ws,
        json!({"type": "auth_ok", "ha_version": "2026.11.0"}),
    );
    while let Ok(message) = ws.read() {
        let Message::Text(text) = message else {
            continue;
        };
        let asked: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
        let id = asked["id"].clone();
        let answer = match registries(asked["type"].as_str().unwrap_or_default()) {
            Some(result) => json!({"id": id, "type": "result", "success": true, "result": result}),
            None => json!({"id": id, "type": "result", "success": false,
                           "error": {"code": "unknown_command", "message": "Unknown command."}}),
        };
        if !send(&mut ws, answer) {
            return;
        }
    }
}

type Calls = Arc<Mutex<Vec<(String, Value)>>>;

/// A plain HTTP exchange with the bearer token: `GET /api/states`, or a
/// service call `POST /api/services/<domain>/<service>` (kept in `calls`).
fn rest(mut stream: impl Write, head: &str, body: &str, calls: &Calls) {
    let authorized = head
        .lines()
        .any(|l| l.to_ascii_lowercase() == format!("authorization: bearer {TOKEN}"));
    let service = head
        .strip_prefix("POST /api/services/")
        .and_then(|r| r.split_whitespace().next());
    let (status, body) = if !authorized {
        ("401 Unauthorized", "401: Unauthorized".to_owned())
    } else if head.starts_with("GET /api/states ") {
        ("200 OK", states().to_string())
    } else if let Some(service) = service {
        let data: Value = serde_json::from_str(body).unwrap_or_default();
        calls.lock().unwrap().push((service.to_owned(), data));
        ("200 OK", "[]".to_owned())
    } else {
        ("404 Not Found", "{\"message\": \"not found\"}".to_owned())
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A request head already read, then the rest of the connection: what the
/// WebSocket handshake reads from when the head said it is one.
struct Rewound<S> {
    head: Cursor<Vec<u8>>,
    inner: S,
}

impl<S: Read> Read for Rewound<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.head.read(buf)? {
            0 => self.inner.read(buf),
            n => Ok(n),
        }
    }
}

impl<S: Write> Write for Rewound<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One connection: a WebSocket session or a REST exchange, by its head.
fn connection<S: Read + Write>(mut stream: S, calls: &Calls) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16_384 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    if text.starts_with("GET /api/websocket ") {
        websocket(Rewound {
            head: Cursor::new(head),
            inner: stream,
        });
        return;
    }
    let mut lines = String::new();
    let mut reader = BufReader::new(Cursor::new(head));
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 2 {
        lines.push_str(line.trim_end());
        lines.push('\n');
        line.clear();
    }
    let length = lines
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .and_then(|n| n.trim().parse::<usize>().ok())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    let _ = stream.read_exact(&mut body);
    rest(&mut stream, &lines, &String::from_utf8_lossy(&body), calls);
    let _ = stream.flush();
}

/// Home Assistant on 127.0.0.1 over http: its URL, and the service calls it gets.
fn fake_home_assistant() -> (String, Calls) {
    serve(None)
}

/// Home Assistant on 127.0.0.1 over https, its certificate (for 127.0.0.1)
/// signed by a CA of its own: its URL, the calls it gets, and the CA's
/// certificate as PEM.
fn fake_home_assistant_tls() -> (String, Calls, String) {
    let made = crate::support::TestCa::for_localhost("Home Assistant test CA");
    let (cert, key) = (made.cert_der.clone(), made.key_der.clone());
    let ca_cert = made.ca_pem;
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.into()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.into()),
    )
    .unwrap();
    let (url, calls) = serve(Some(Arc::new(server)));
    (url, calls, ca_cert)
}

fn serve(tls: Option<Arc<rustls::ServerConfig>>) -> (String, Calls) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    let calls: Calls = Arc::default();
    let kept = calls.clone();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let calls = kept.clone();
            let tls = tls.clone();
            thread::spawn(move || match tls {
                Some(config) => {
                    let Ok(conn) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    connection(rustls::StreamOwned::new(conn, stream), &calls);
                }
                None => connection(stream, &calls),
            });
        }
    });
    (url, calls)
}

/// A configuration file `name` in the sandbox naming Home Assistant at `url`.
fn ha_config(sb: &Sandbox, name: &str, url: &str) -> String {
    let path = sb.path().join(name);
    fs::write(
        &path,
        format!(
            "[executors.home_assistant]\nurl = \"{url}\"\ntoken_env = \"CAAL_HA_TOKEN\"\ntimeout_ms = 5000\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// `caal home import --out out` with `config`: it succeeds and says it
/// found the fake's three areas and three devices.
fn imported(sb: &Sandbox, config: &str, out: &str) -> crate::support::Run {
    let imported = sb
        .run_env(
            &["--config", config, "home", "import", "--out", out],
            &[("CAAL_HA_TOKEN", TOKEN)],
        )
        .ok();
    assert!(
        imported.stderr.contains("3 areas and 3 devices"),
        "{}",
        imported.stderr
    );
    imported
}

/// "switch on the island lights" said with `config`: the reply, and the one
/// service call Home Assistant got, naming the entity.
fn island_switched_on(sb: &Sandbox, config: &str, calls: &Calls) {
    let on = sb
        .run_env(
            &["--config", config, "say", "switch on the island lights"],
            &[("CAAL_HA_TOKEN", TOKEN)],
        )
        .ok();
    assert!(on.stdout.contains("kitchen island is on"), "{}", on.stdout);
    assert_eq!(
        calls.lock().unwrap().clone(),
        vec![(
            "light/turn_on".to_owned(),
            json!({"entity_id": "light.kitchen_island"})
        )]
    );
}

#[test]
fn the_home_is_imported_from_home_assistant_and_understood() {
    let sb = Sandbox::new();
    let (ha, calls) = fake_home_assistant();
    let config = &ha_config(&sb, "ha.toml", &ha);
    let home_toml = sb.path().join("home.toml");
    let out = home_toml.to_str().unwrap();

    // Imported: areas with their other names and floors; the entities a
    // person talks to, named as Home Assistant names them, ids entity ids.
    let imported = imported(&sb, config, out);
    // The default macros name a hall this home has not: said, with the fix.
    assert!(
        imported.stderr.contains("macro \"arrive_home\"")
            && imported
                .stderr
                .contains("change that part of your configuration"),
        "{}",
        imported.stderr
    );
    // Kept as the note says: the home, and the macro made to fit it.
    let mut written = fs::read_to_string(&home_toml).unwrap();
    written.push_str(
        "\n[macros.arrive_home]\nsummary = \"turn on the kitchen lights\"\n\
         steps = [{ command = \"lights.set\", params = { room = \"kitchen\", state = \"on\" } }]\n\
         [macros.good_night]\nsummary = \"turn off all lights and lock the den door\"\n\
         steps = [{ command = \"lights.set\", params = { room = \"all\", state = \"off\" } },\n\
         { command = \"door.lock\", params = { door = \"den door\" } }]\n",
    );
    fs::write(&home_toml, &written).unwrap();
    let parsed: toml::Value = toml::from_str(&written).unwrap();
    let devices = parsed["home"]["devices"].as_array().unwrap();
    let ids: Vec<&str> = devices.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        vec!["light.kitchen_island", "light.night_light", "lock.den_door"],
        "firmware switches and what is not exposed to Assist are left out: {written}"
    );
    assert_eq!(devices[1]["area"].as_str(), Some("Nursery"), "{written}");
    assert!(
        written.contains("cookhouse") && written.contains("Upstairs"),
        "{written}"
    );
    assert!(
        !written.contains(TOKEN),
        "the token is never written: {written}"
    );

    // Asked again without --force, the file stays as it is.
    let again = sb.run_env(
        &["--config", config, "home", "import", "--out", out],
        &[("CAAL_HA_TOKEN", TOKEN)],
    );
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);

    // The imported home is the one understood: its rooms and devices by name.
    let shown = sb.run(&["--config", out, "home", "show"]).ok();
    assert!(
        shown.stdout.contains("nursery: night light"),
        "{}",
        shown.stdout
    );
    let island = sb
        .run(&[
            "--config",
            out,
            "understand",
            "--json",
            "turn on the kitchen island",
        ])
        .ok()
        .json();
    assert_eq!(island["commands"][0]["command_id"], "light.set", "{island}");
    assert_eq!(
        island["commands"][0]["params"]["device"], "kitchen island",
        "{island}"
    );
    let snug = sb
        .run(&[
            "--config",
            out,
            "understand",
            "--json",
            "turn off the lights in the snug",
        ])
        .ok()
        .json();
    assert_eq!(snug["commands"][0]["params"]["room"], "den", "{snug}");
    let attic = sb
        .run(&["--config", out, "say", "turn on the attic lights"])
        .ok();
    assert!(
        attic.stdout.contains("the rooms are kitchen, nursery, den"),
        "{}",
        attic.stdout
    );

    // Run through Home Assistant: the service call names the entity.
    let wired = sb.path().join("wired.toml");
    fs::write(
        &wired,
        format!(
            "{written}\n[executors.home_assistant]\nurl = \"{ha}\"\ntoken_env = \"CAAL_HA_TOKEN\"\ntimeout_ms = 5000\n\n\
             [commands.\"light.set\"]\nexecutor = \"home_assistant\"\nservice = \"light.turn_{{state}}\"\n\
             data = {{ entity_id = \"{{device.id}}\" }}\n\n\
             [commands.\"door.lock\"]\nexecutor = \"home_assistant\"\nservice = \"lock.lock\"\n\
             data = {{ entity_id = \"{{door.id}}\" }}\n"
        ),
    )
    .unwrap();
    island_switched_on(&sb, wired.to_str().unwrap(), &calls);
    // A lock of the imported home is a door to lock, by its name.
    let locked = sb
        .run_env(
            &[
                "--config",
                wired.to_str().unwrap(),
                "say",
                "lock the den door",
            ],
            &[("CAAL_HA_TOKEN", TOKEN)],
        )
        .ok();
    assert!(
        locked.stdout.contains("The den door is locked."),
        "{}",
        locked.stdout
    );
    assert_eq!(
        calls.lock().unwrap().last().cloned(),
        Some((
            "lock/lock".to_owned(),
            json!({"entity_id": "lock.den_door"})
        ))
    );
}

#[test]
fn a_wrong_token_or_no_home_assistant_is_named_with_the_fix() {
    let sb = Sandbox::new();
    let (ha, _) = fake_home_assistant();
    let config = &ha_config(&sb, "ha.toml", &ha);
    let wrong = sb.run_env(
        &["--config", config, "home", "import"],
        &[("CAAL_HA_TOKEN", "not-the-token")],
    );
    assert_eq!(wrong.code, 2);
    assert!(
        wrong.stderr.contains("refused the token in CAAL_HA_TOKEN")
            && wrong.stderr.contains("long-lived access token"),
        "{}",
        wrong.stderr
    );
    assert!(!wrong.stderr.contains("not-the-token"), "{}", wrong.stderr);

    let none = sb.run(&["--config", config, "home", "import"]);
    assert_eq!(none.code, 2);
    assert!(none.stderr.contains("set CAAL_HA_TOKEN"), "{}", none.stderr);

    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let away = ha_config(&sb, "away.toml", &gone);
    let unreachable = sb.run_env(
        &["--config", &away, "home", "import"],
        &[("CAAL_HA_TOKEN", TOKEN)],
    );
    assert_eq!(unreachable.code, 2);
    assert!(
        unreachable.stderr.contains("cannot reach Home Assistant"),
        "{}",
        unreachable.stderr
    );
}

#[test]
fn home_assistant_over_https_with_its_own_ca_is_imported_and_called() {
    let sb = Sandbox::new();
    let (ha, calls, ca_pem) = fake_home_assistant_tls();
    assert!(ha.starts_with("https://127.0.0.1:"), "{ha}");
    let ca = sb.path().join("ha-ca.pem");
    fs::write(&ca, &ca_pem).unwrap();
    let with_ca = |name: &str, extra: &str| {
        let path = sb.path().join(name);
        fs::write(
            &path,
            format!(
                "{extra}\n[executors.home_assistant]\nurl = \"{ha}\"\ntoken_env = \"CAAL_HA_TOKEN\"\n\
                 timeout_ms = 5000\nca_file = \"{}\"\n",
                ca.display()
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_owned()
    };

    // Imported over wss:// and https://, trusting the CA given and no other.
    let config = with_ca("ha.toml", "");
    let home_toml = sb.path().join("home.toml");
    imported(&sb, &config, home_toml.to_str().unwrap());
    let mut home = fs::read_to_string(&home_toml).unwrap();
    assert!(home.contains("light.kitchen_island"), "{home}");
    home.push_str(
        "\n[macros.arrive_home]\nsummary = \"turn on the kitchen lights\"\n\
         steps = [{ command = \"lights.set\", params = { room = \"kitchen\", state = \"on\" } }]\n\
         [macros.good_night]\nsummary = \"turn off all lights\"\n\
         steps = [{ command = \"lights.set\", params = { room = \"all\", state = \"off\" } }]\n\n\
         [commands.\"light.set\"]\nexecutor = \"home_assistant\"\nservice = \"light.turn_{state}\"\n\
         data = { entity_id = \"{device.id}\" }\n",
    );

    // A command runs through the same https address.
    let wired = with_ca("wired.toml", &home);
    island_switched_on(&sb, &wired, &calls);

    // Without the CA, its certificate is trusted by nobody: named, with the fix.
    let untrusted = ha_config(&sb, "no-ca.toml", &ha);
    let refused = sb.run_env(
        &["--config", &untrusted, "home", "import"],
        &[("CAAL_HA_TOKEN", TOKEN)],
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("does not trust")
            && refused.stderr.contains("UnknownIssuer")
            && refused.stderr.contains("ca_file"),
        "{}",
        refused.stderr
    );
    let wired_untrusted = sb.path().join("wired-no-ca.toml");
    fs::write(
        &wired_untrusted,
        format!(
            "{home}\n[executors.home_assistant]\nurl = \"{ha}\"\ntoken_env = \"CAAL_HA_TOKEN\"\ntimeout_ms = 5000\n"
        ),
    )
    .unwrap();
    let off = sb.run_env(
        &[
            "--config",
            wired_untrusted.to_str().unwrap(),
            "say",
            "--json",
            "switch off the island lights",
        ],
        &[("CAAL_HA_TOKEN", TOKEN)],
    );
    assert!(
        off.stdout.contains("does not trust") && off.stdout.contains("ca_file"),
        "{}{}",
        off.stdout,
        off.stderr
    );
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "nothing reached Home Assistant"
    );

    // A CA file that is not there, or given for plain http: named at load.
    let missing = sb.path().join("missing.toml");
    fs::write(
        &missing,
        format!(
            "[executors.home_assistant]\nurl = \"{ha}\"\ntoken_env = \"CAAL_HA_TOKEN\"\ntimeout_ms = 5000\n\
             ca_file = \"/nowhere/ca.pem\"\n"
        ),
    )
    .unwrap();
    let bad = sb.run(&["--config", missing.to_str().unwrap(), "home", "show"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("executors.home_assistant.ca_file")
            && bad.stderr.contains("/nowhere/ca.pem is not a file"),
        "{}",
        bad.stderr
    );
    let plain = sb.path().join("plain.toml");
    fs::write(
        &plain,
        format!(
            "[executors.home_assistant]\nurl = \"http://127.0.0.1:1\"\ntoken_env = \"CAAL_HA_TOKEN\"\n\
             timeout_ms = 5000\nca_file = \"{}\"\n",
            ca.display()
        ),
    )
    .unwrap();
    let bad = sb.run(&["--config", plain.to_str().unwrap(), "home", "show"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("remove ca_file or use https"),
        "{}",
        bad.stderr
    );
}
