//! LiveKit: access tokens for clients that join a room (CAAL's voice agent
//! listens there), and the webhooks LiveKit sends about rooms, checked
//! against its signature before anything is recorded.
//!
//! The keys come from `LIVEKIT_API_KEY` and `LIVEKIT_API_SECRET` (the
//! secret is seeded into the vault, so it is scrubbed wherever it appears).

use std::time::Duration;

use livekit_api::access_token::{AccessToken, TokenVerifier, VideoGrants};
use livekit_api::webhooks::WebhookReceiver;
use serde::Serialize;

pub const KEY_ENV: &str = "LIVEKIT_API_KEY";
pub const SECRET_ENV: &str = "LIVEKIT_API_SECRET";

#[derive(Debug, thiserror::Error)]
pub enum LiveKitError {
    #[error(
        "no LiveKit keys: set {KEY_ENV} and {SECRET_ENV} (from your LiveKit server's config or `livekit-server --dev`: devkey / secret)"
    )]
    NoKeys,
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("cannot mint the token: {0}")]
    Token(String),
    #[error("webhook refused: {0}")]
    Refused(String),
}

/// The API key and secret.
#[derive(Clone)]
pub struct Keys {
    pub api_key: String,
    api_secret: String,
}

impl Keys {
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, LiveKitError> {
        match (env(KEY_ENV), env(SECRET_ENV)) {
            (Some(k), Some(s)) if !k.is_empty() && !s.is_empty() => Ok(Self {
                api_key: k,
                api_secret: s,
            }),
            _ => Err(LiveKitError::NoKeys),
        }
    }
}

/// A token to join `room` as `identity`, publishing and subscribing, valid for `ttl`.
pub fn token(
    keys: &Keys,
    room: &str,
    identity: &str,
    ttl: Duration,
) -> Result<String, LiveKitError> {
    if room.trim().is_empty() {
        return Err(LiveKitError::Empty("--room"));
    }
    if identity.trim().is_empty() {
        return Err(LiveKitError::Empty("--identity"));
    }
    AccessToken::with_api_key(&keys.api_key, &keys.api_secret)
        .with_identity(identity)
        .with_name(identity)
        .with_ttl(ttl)
        .with_grants(VideoGrants {
            room_join: true,
            room: room.to_owned(),
            can_publish: Some(true),
            can_subscribe: Some(true),
            can_publish_data: Some(true),
            ..Default::default()
        })
        .to_jwt()
        .map_err(|e| LiveKitError::Token(e.to_string()))
}

/// What a verified webhook said.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RoomEvent {
    /// `room_started`, `participant_joined`, `track_published`, …
    pub event: String,
    pub event_id: String,
    pub room: Option<String>,
    pub participant: Option<String>,
    pub created_at: i64,
}

/// Checks a webhook: the `Authorization` JWT signed with the API secret,
/// whose `sha256` claim is the body's hash. Only then is the body read.
pub fn receive(keys: &Keys, body: &str, authorization: &str) -> Result<RoomEvent, LiveKitError> {
    let token = authorization
        .strip_prefix("Bearer ")
        .unwrap_or(authorization)
        .trim();
    let receiver =
        WebhookReceiver::new(TokenVerifier::with_api_key(&keys.api_key, &keys.api_secret));
    let event = receiver
        .receive(body, token)
        .map_err(|e| LiveKitError::Refused(e.to_string()))?;
    Ok(RoomEvent {
        event: event.event,
        event_id: event.id,
        room: event.room.map(|r| r.name),
        participant: event.participant.map(|p| p.identity),
        created_at: event.created_at,
    })
}

/// What a token grants, once its signature holds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Grant {
    pub identity: String,
    pub room: String,
    pub can_publish: bool,
    pub can_subscribe: bool,
}

/// Checks a token (signed with the secret, not expired) and says what it grants.
pub fn verify(keys: &Keys, token: &str) -> Result<Grant, LiveKitError> {
    let claims = TokenVerifier::with_api_key(&keys.api_key, &keys.api_secret)
        .verify(token)
        .map_err(|e| LiveKitError::Refused(e.to_string()))?;
    Ok(Grant {
        identity: claims.sub,
        room: claims.video.room,
        // Unset means allowed, as LiveKit reads a grant.
        can_publish: claims.video.can_publish.unwrap_or(true),
        can_subscribe: claims.video.can_subscribe.unwrap_or(true),
    })
}

/// The `Authorization` value LiveKit's server sends with a webhook: a JWT
/// signed with the API secret whose `sha256` claim is the body's hash
/// (base64). The tests send webhooks as LiveKit does with it.
pub fn sign_webhook(keys: &Keys, body: &str) -> Result<String, LiveKitError> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash =
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body.as_bytes()));
    AccessToken::with_api_key(&keys.api_key, &keys.api_secret)
        .with_sha256(&hash)
        .to_jwt()
        .map_err(|e| LiveKitError::Token(e.to_string()))
}

impl Keys {
    /// Keys given directly (tests, and callers that read them elsewhere).
    pub fn new(api_key: &str, api_secret: &str) -> Self {
        Self {
            api_key: api_key.to_owned(),
            api_secret: api_secret.to_owned(),
        }
    }
}
