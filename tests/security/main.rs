//! The doors under attack (issue 41): each finding of a hostile probe of
//! `caal serve` (every door, as a local user and as a LAN peer would try
//! it) replayed against the real binary with the protocols' own clients
//! (`wyoming`, `openai`, `mcp`), so none comes back:
//! - `doors`: who may talk and who may confirm (Wyoming's peers and
//!   secret, each door's own conversations, a "yes" only from who was
//!   asked and only after the question, agents that may not confirm);
//! - `input`: words of any script, input of any length, split words, and a
//!   model that claims what never ran or names what was not said;
//! - `limits`: speech to speak, connections held open or left silent, the
//!   descriptor limit reached;
//! - `surface`: files only their owner reads, a page nobody frames, a
//!   Host the service was not told of, the bearer scheme in any case.

#[allow(dead_code)]
#[path = "../e2e/support.rs"]
mod support;

mod doors;
mod input;
mod limits;
mod surface;

use serde_json::Value;

use support::{Sandbox, Served, agent};

/// `POST /api/chat` in `conversation`: (status, body).
pub fn chat(served: &Served, token: &str, conversation: &str, text: &str) -> (u16, Value) {
    let mut response = agent(120)
        .post(format!("{}/api/chat", served.url))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(serde_json::json!({"conversation_id": conversation, "text": text}))
        .unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

/// `GET` an API path: the body as JSON.
pub fn get(served: &Served, token: &str, path: &str) -> Value {
    agent(60)
        .get(format!("{}{path}", served.url))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap()
}

/// The payloads of a round's events of one type, read through the API.
pub fn events_of(served: &Served, token: &str, round_id: &str, event_type: &str) -> Vec<Value> {
    get(served, token, &format!("/api/rounds/{round_id}"))["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == event_type)
        .map(|e| e["payload"].clone())
        .collect()
}

/// Whether the front door is locked and the garage door open, asked of
/// the home itself in a conversation of its own.
pub fn doors_state(served: &Served, token: &str) -> (bool, bool) {
    let (_, front) = chat(served, token, "state-check", "is the front door locked");
    let (_, garage) = chat(served, token, "state-check", "is the garage door open");
    let yes = |v: &Value| v["reply"].as_str().unwrap_or_default().starts_with("Yes");
    (yes(&front), yes(&garage))
}

/// A sandbox serving with `config` (TOML over the defaults) and `env`.
pub fn serving(config: &str, env: &[(&str, &str)]) -> (Sandbox, Served, String) {
    let sb = Sandbox::new();
    if !config.is_empty() {
        sb.configure(config);
    }
    let served = sb.serve(env);
    let token = sb.api_token();
    (sb, served, token)
}
