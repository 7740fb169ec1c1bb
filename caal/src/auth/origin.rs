//! Where a request came from: the door it came in by (the CLI, the API, the
//! page, the voice socket, the OpenAI-compatible door, MCP, Wyoming), the
//! client behind that door, when it arrived, and (where the door can know
//! it) what that client last heard CAAL say. A pending confirmation records
//! who raised it, and the gate counts a "yes" only from that door and client,
//! sent after the question was given out (see `gate`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A way into CAAL. Each door keeps its conversations in its own namespace
/// (`Door::namespace`), so one door cannot name another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Door {
    /// `caal say`, `caal chat`, `caal voice`: whoever can read the data dir.
    Local,
    /// `/api/chat` (and the page's chat), behind the service's token.
    Api,
    /// A confirmation answered on the page by its id (`/api/pending/{id}/…`):
    /// the operator, behind the token, who sees what is asked.
    Ui,
    /// The page's microphone (`/voice/stream`), behind the token.
    VoiceSocket,
    /// `/v1/chat/completions`, behind the token.
    OpenAi,
    /// An agent over MCP (`/mcp` behind the token, or `caal mcp` on stdio).
    Mcp,
    /// Home Assistant and satellites over Wyoming (its own peers: a shared
    /// secret or an allow-list, see `server::protocols::wyoming`).
    Wyoming,
    /// CAAL itself or a service it trusts (the scheduler, LiveKit's signed webhooks).
    System,
}

impl Door {
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Local => "local",
            Door::Api => "api",
            Door::Ui => "ui",
            Door::VoiceSocket => "voice_socket",
            Door::OpenAi => "openai",
            Door::Mcp => "mcp",
            Door::Wyoming => "wyoming",
            Door::System => "system",
        }
    }

    /// The prefix of the conversations this door opens (`wyoming:…`), for
    /// the doors whose peers name conversations themselves and must not
    /// reach another door's.
    pub fn namespace(self) -> Option<&'static str> {
        match self {
            Door::OpenAi => Some("openai:"),
            Door::Mcp => Some("mcp:"),
            Door::Wyoming => Some("wyoming:"),
            _ => None,
        }
    }

    /// The door whose namespace `conversation` is in, if any.
    pub fn owning(conversation: &str) -> Option<Door> {
        [Door::OpenAi, Door::Mcp, Door::Wyoming]
            .into_iter()
            .find(|d| d.namespace().is_some_and(|n| conversation.starts_with(n)))
    }
}

impl fmt::Display for Door {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A door and the client behind it: who raised a confirmation, and who may
/// answer it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Client {
    pub door: Door,
    /// The door's name for its peer: `token` (the API token's holder), a
    /// Wyoming peer's address, an MCP session.
    pub id: String,
}

impl Client {
    pub fn new(door: Door, id: impl Into<String>) -> Self {
        Self {
            door,
            id: id.into(),
        }
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.door, self.id)
    }
}

/// One request as it came in.
#[derive(Clone, Debug, PartialEq)]
pub struct Origin {
    pub client: Client,
    /// When the request reached the door, before it waited for its
    /// conversation (the engine's clock): a "yes" sent before the question
    /// was given out does not answer it.
    pub arrived_ms: i64,
    /// What this client shows it last heard CAAL say, where the door
    /// carries it (an OpenAI thread's last assistant message); a "yes" after
    /// something other than the question does not answer it.
    pub heard: Option<String>,
    /// The spoken reply this input stopped by starting over it (barge-in).
    pub interrupted: Option<crate::trace::events::Interruption>,
    /// The area the client is in (a satellite's room), as the home names
    /// it: "turn on the lights", "in here" act there.
    pub area: Option<String>,
}

impl Origin {
    pub fn new(client: Client, arrived_ms: i64) -> Self {
        Self {
            client,
            arrived_ms,
            heard: None,
            interrupted: None,
            area: None,
        }
    }

    /// In the client's area (checked against the home by the engine).
    pub fn in_area(self, area: Option<String>) -> Self {
        Self { area, ..self }
    }

    /// Said over the reply of an earlier round, which stopped it.
    pub fn interrupting(self, interrupted: Option<crate::trace::events::Interruption>) -> Self {
        Self {
            interrupted,
            ..self
        }
    }

    /// With what the client last heard (None: the door cannot tell).
    pub fn heard(self, heard: Option<String>) -> Self {
        Self { heard, ..self }
    }

    pub fn door(&self) -> Door {
        self.client.door
    }
}

/// What a door allows beyond its token: whether an agent may confirm a
/// level-3/4 command it asked for (off: a person confirms it on the page).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DoorPolicy {
    pub agents_confirm: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_door_owns_its_namespace_and_no_other() {
        assert_eq!(Door::owning("wyoming:01JD5Z7K"), Some(Door::Wyoming));
        assert_eq!(Door::owning("openai:ab12"), Some(Door::OpenAi));
        assert_eq!(Door::owning("mcp:default"), Some(Door::Mcp));
        for free in [
            "default",
            "kitchen",
            "wyoming",
            "mcp-kitchen",
            "openai-ab12",
        ] {
            assert_eq!(Door::owning(free), None, "{free}");
        }
        assert_eq!(Door::Api.namespace(), None);
        assert_eq!(
            serde_json::to_value(Door::VoiceSocket).unwrap(),
            "voice_socket"
        );
    }
}
