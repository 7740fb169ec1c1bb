//! Audio artifacts: the clips voice rounds heard, kept on disk for a while
//! and described (hash, format, loudness) in `state.db` for good.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use crate::ids::AudioId;
use crate::state::{StateDb, rfc3339_ms};
use crate::trace::StoreError;

const SCHEMA_VERSION: u32 = 1;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Buckets in an artifact's loudness preview.
pub const PREVIEW_BUCKETS: usize = 32;

/// One kept clip, as `AudioArtifact` in the design.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AudioArtifact {
    pub audio_id: String,
    pub schema_version: u32,
    pub path: String,
    /// `sha256:` of the file's bytes, as the trace records it.
    pub sha256: String,
    pub bytes: u64,
    pub duration_ms: Option<u64>,
    pub codec: String,
    pub sample_rate: u32,
    pub channels: u16,
    pub created_at: String,
    /// Days the file is kept unless pinned.
    pub retention_ttl_days: u32,
    pub expires_at: String,
    pub pinned: bool,
    /// RMS of equal slices of the clip (0–1), and its peak.
    pub rms_preview: Vec<f32>,
    pub peak: f32,
    /// When a sweep deleted the file (the hash and this row stay).
    pub deleted_at: Option<String>,
}

impl AudioArtifact {
    pub fn file_present(&self) -> bool {
        self.deleted_at.is_none() && Path::new(&self.path).is_file()
    }
}

/// Whether the file is there and still hashes to what was recorded.
pub fn file_matches(a: &AudioArtifact) -> bool {
    a.deleted_at.is_none()
        && std::fs::read(&a.path)
            .is_ok_and(|bytes| crate::trace::chain::sha256_tagged(&bytes) == a.sha256)
}

/// What a new clip is.
pub struct NewClip<'a> {
    pub bytes: &'a [u8],
    pub duration_ms: u64,
    pub codec: &'a str,
    pub sample_rate: u32,
    pub channels: u16,
    /// 16 kHz mono samples, for the preview.
    pub samples: &'a [f32],
}

const COLUMNS: &str =
    "audio_id, schema_version, path, sha256, bytes, duration_ms, codec, sample_rate, channels,
    created_at, retention_days, expires_at_ms, pinned, rms_preview, peak, deleted_at";

fn artifact(r: &Row<'_>) -> rusqlite::Result<AudioArtifact> {
    let preview: String = r.get(13)?;
    Ok(AudioArtifact {
        audio_id: r.get(0)?,
        schema_version: r.get(1)?,
        path: r.get(2)?,
        sha256: r.get(3)?,
        bytes: r.get(4)?,
        duration_ms: r.get(5)?,
        codec: r.get(6)?,
        sample_rate: r.get(7)?,
        channels: r.get(8)?,
        created_at: r.get(9)?,
        retention_ttl_days: r.get(10)?,
        expires_at: rfc3339_ms(r.get(11)?),
        pinned: r.get(12)?,
        rms_preview: serde_json::from_str(&preview).unwrap_or_default(),
        peak: r.get(14)?,
        deleted_at: r.get(15)?,
    })
}

/// Where clips go: `voice.audio_dir`, else `audio/` in the data dir.
pub fn audio_dir(cfg: &crate::config::VoiceConfig, data_dir: &Path) -> PathBuf {
    if cfg.audio_dir.is_empty() {
        data_dir.join("audio")
    } else {
        PathBuf::from(&cfg.audio_dir)
    }
}

/// Writes the clip's file (durably, readable by its owner only) and its row.
pub fn keep(
    state: &StateDb,
    dir: &Path,
    clip: &NewClip<'_>,
    now_ms: i64,
    retention_days: u32,
) -> Result<AudioArtifact, StoreError> {
    let io = |source: std::io::Error| StoreError::Open {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    // Recorded absolute: the path means the same file from any working dir.
    let dir = &dir.canonicalize().map_err(io)?;
    let id = AudioId::new();
    let path = dir.join(format!("{id}.wav"));
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).map_err(io)?;
        file.write_all(clip.bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
    }
    let (rms, peak) = super::audio::preview(clip.samples, PREVIEW_BUCKETS);
    let sha = crate::trace::chain::sha256_tagged(clip.bytes);
    let expires = now_ms + i64::from(retention_days) * DAY_MS;
    state.with(|c| {
        c.prepare_cached(
            "INSERT INTO audio_artifacts (audio_id, schema_version, path, sha256, bytes, duration_ms, codec,
                sample_rate, channels, created_at, created_at_ms, retention_days, expires_at_ms, pinned, rms_preview, peak)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, ?14, ?15)",
        )?
        .execute(params![
            id.to_string(),
            SCHEMA_VERSION,
            path.display().to_string(),
            sha,
            clip.bytes.len() as u64,
            clip.duration_ms,
            clip.codec,
            clip.sample_rate,
            clip.channels,
            rfc3339_ms(now_ms),
            now_ms,
            retention_days,
            expires,
            serde_json::to_string(&rms).unwrap_or_default(),
            peak,
        ])
        .map(|_| ())
    })?;
    get(state, &id.to_string())?.ok_or_else(|| StoreError::Inconsistent {
        what: format!("audio {id} vanished after it was written"),
    })
}

pub fn get(state: &StateDb, audio_id: &str) -> Result<Option<AudioArtifact>, StoreError> {
    state.with(|c| {
        c.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM audio_artifacts WHERE audio_id = ?1"
        ))?
        .query_row([audio_id], artifact)
        .optional()
    })
}

/// The newest first.
pub fn list(state: &StateDb, limit: usize) -> Result<Vec<AudioArtifact>, StoreError> {
    state.with(|c| {
        c.prepare(&format!(
            "SELECT {COLUMNS} FROM audio_artifacts ORDER BY created_at_ms DESC, audio_id DESC LIMIT ?1"
        ))?
        .query_map([limit as i64], artifact)?
        .collect()
    })
}

/// Pins or unpins; false when there is no such clip.
pub fn set_pinned(state: &StateDb, audio_id: &str, pinned: bool) -> Result<bool, StoreError> {
    state.with(|c| {
        c.prepare_cached("UPDATE audio_artifacts SET pinned = ?2 WHERE audio_id = ?1")?
            .execute(params![audio_id, pinned])
            .map(|n| n > 0)
    })
}

/// Clips whose time is up: unpinned, not yet deleted, expired by `now_ms`.
pub fn expired(state: &StateDb, now_ms: i64) -> Result<Vec<AudioArtifact>, StoreError> {
    state.with(|c| {
        c.prepare(&format!(
            "SELECT {COLUMNS} FROM audio_artifacts
             WHERE deleted_at IS NULL AND pinned = 0 AND expires_at_ms <= ?1 ORDER BY expires_at_ms"
        ))?
        .query_map([now_ms], artifact)?
        .collect()
    })
}

/// How many clips are pinned and past their time (kept because pinned).
pub fn pinned_past_due(state: &StateDb, now_ms: i64) -> Result<u64, StoreError> {
    state.with(|c| {
        c.query_row(
            "SELECT COUNT(*) FROM audio_artifacts WHERE deleted_at IS NULL AND pinned = 1 AND expires_at_ms <= ?1",
            [now_ms],
            |r| r.get(0),
        )
    })
}

/// Deletes the clip's file and marks it deleted (its row and hash stay).
pub fn delete_file(state: &StateDb, a: &AudioArtifact, now_ms: i64) -> Result<(), StoreError> {
    match std::fs::remove_file(&a.path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(StoreError::Open {
                path: PathBuf::from(&a.path),
                source,
            });
        }
    }
    state.with(|c| {
        c.prepare_cached("UPDATE audio_artifacts SET deleted_at = ?2 WHERE audio_id = ?1")?
            .execute(params![a.audio_id, rfc3339_ms(now_ms)])
            .map(|_| ())
    })
}
