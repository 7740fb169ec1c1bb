//! Canonical identifiers that correlate everything CAAL records.
//!
//! `library_id` names one installation (generated once, persisted in the data
//! dir, overridable by `CAAL_LIBRARY_ID`); `conversation_id` groups rounds and
//! owns one hash chain; `bucket_id` names a memory bucket (by default
//! `bucket:{conversation_id}`); `round_id`, `call_id`, `job_id` and `audio_id`
//! are UUIDv7, so they sort by creation time.

use std::{fmt, fs, io, path::Path, str::FromStr};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A name given from outside (a person, a config file, the environment) that
/// is not usable as an id.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid {what} {value:?}: use 1 to 128 characters from letters, digits and . _ : - (for example `kitchen-1`)"
)]
pub struct InvalidId {
    pub what: &'static str,
    pub value: String,
}

fn check_name(what: &'static str, value: &str) -> Result<(), InvalidId> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if !ok {
        // The refused name is shown back: a secret in it is not.
        return Err(InvalidId {
            what,
            value: crate::safety::global().scrub(value).into_owned(),
        });
    }
    // An id is shown and stored everywhere: a credential must never become one.
    if !crate::safety::global().scanner().scan(value).is_empty() {
        return Err(InvalidId {
            what,
            value: crate::safety::global().scrub(value).into_owned(),
        });
    }
    Ok(())
}

macro_rules! named_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, InvalidId> {
                check_name($what, s)?;
                Ok(Self(s.to_owned()))
            }
        }
        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(s: String) -> Result<Self, InvalidId> {
                check_name($what, &s)?;
                Ok(Self(s))
            }
        }
        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

macro_rules! time_ordered_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh UUIDv7: monotonic within this process.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }
        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }
        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, InvalidId> {
                Uuid::parse_str(s)
                    .map(Self)
                    .map_err(|_| InvalidId { what: $what, value: s.to_owned() })
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }
    };
}

named_id!(
    /// One CAAL installation; every round header carries it.
    LibraryId,
    "library_id"
);
named_id!(
    /// A conversation: its rounds are numbered 1, 2, 3 … and its events form one chain.
    ConversationId,
    "conversation_id"
);
named_id!(
    /// A memory bucket; by default one per conversation.
    BucketId,
    "bucket_id"
);
time_ordered_id!(
    /// One round: one utterance and everything it caused.
    RoundId,
    "round_id"
);
time_ordered_id!(
    /// One tool, LLM or worker call inside a round.
    CallId,
    "call_id"
);
time_ordered_id!(
    /// A background job.
    JobId,
    "job_id"
);
time_ordered_id!(
    /// A captured audio clip.
    AudioId,
    "audio_id"
);

impl ConversationId {
    /// A new conversation named by a UUIDv7.
    pub fn generate() -> Self {
        Self(Uuid::now_v7().hyphenated().to_string())
    }
}

impl BucketId {
    /// The default bucket of a conversation: `bucket:{conversation_id}`.
    pub fn for_conversation(conversation: &ConversationId) -> Self {
        Self(format!("bucket:{conversation}"))
    }
}

/// File in the data dir that keeps the generated library id.
pub const LIBRARY_ID_FILE: &str = "library_id";

impl LibraryId {
    /// The library id: `override_id` (from `CAAL_LIBRARY_ID`) if given,
    /// else the one persisted in `data_dir`, else a new one written there.
    pub fn load_or_create(
        data_dir: &Path,
        override_id: Option<&str>,
    ) -> Result<Self, LibraryIdError> {
        if let Some(id) = override_id {
            return Ok(id.parse()?);
        }
        let path = data_dir.join(LIBRARY_ID_FILE);
        match fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|e: InvalidId| LibraryIdError::Corrupt {
                    path: path.display().to_string(),
                    source: e,
                }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let id = Self(format!("lib-{}", Uuid::now_v7().hyphenated()));
                // Write then rename, so a crash never leaves a half-written id.
                let tmp = data_dir.join(format!("{LIBRARY_ID_FILE}.tmp"));
                fs::write(&tmp, format!("{id}\n"))
                    .and_then(|()| fs::rename(&tmp, &path))
                    .map_err(|e| LibraryIdError::Io {
                        path: path.display().to_string(),
                        source: e,
                    })?;
                Ok(id)
            }
            Err(e) => Err(LibraryIdError::Io {
                path: path.display().to_string(),
                source: e,
            }),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LibraryIdError {
    #[error(transparent)]
    Invalid(#[from] InvalidId),
    #[error(
        "the library id file {path} is damaged ({source}); delete it to generate a new id, or set CAAL_LIBRARY_ID"
    )]
    Corrupt { path: String, source: InvalidId },
    #[error(
        "cannot read or write the library id file {path}: {source}; check the data dir's permissions"
    )]
    Io { path: String, source: io::Error },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_reject_what_would_break_paths_and_logs() {
        for bad in ["", "a b", "x/../y", "tab\t", &"x".repeat(129), "ünï"] {
            assert!(bad.parse::<ConversationId>().is_err(), "{bad:?} accepted");
        }
        for good in [
            "default",
            "kitchen-1",
            "a:b.c_d",
            "0190c8e4-7b7a-7000-8000-000000000000",
        ] {
            assert_eq!(good.parse::<ConversationId>().unwrap().as_str(), good);
        }
    }

    #[test]
    fn default_bucket_follows_the_conversation() {
        let c: ConversationId = "kitchen".parse().unwrap();
        assert_eq!(BucketId::for_conversation(&c).as_str(), "bucket:kitchen");
    }

    #[test]
    fn round_ids_are_v7_and_increase() {
        let ids: Vec<RoundId> = (0..1000).map(|_| RoundId::new()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ids[0].0.get_version_num(), 7);
    }

    #[test]
    fn library_id_is_created_once_and_overridable() {
        let dir = tempfile::tempdir().unwrap();
        let first = LibraryId::load_or_create(dir.path(), None).unwrap();
        let again = LibraryId::load_or_create(dir.path(), None).unwrap();
        assert_eq!(first, again);
        let forced = LibraryId::load_or_create(dir.path(), Some("home-lib")).unwrap();
        assert_eq!(forced.as_str(), "home-lib");
        assert!(LibraryId::load_or_create(dir.path(), Some("bad id")).is_err());
    }
}
