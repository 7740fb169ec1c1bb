//! Background jobs in `state.db`: queued by the round that asked, claimed
//! by a worker, ended done, failed or cancelled. The work itself (a model
//! asked, in a round of the job's own conversation) and the telling (a round
//! of the conversation that asked) are `round::jobs`.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// A job and where it stands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    pub id: i64,
    pub job_id: String,
    pub conversation_id: String,
    /// What kind of work: `research`.
    pub class: String,
    pub topic: String,
    pub query: String,
    /// `queued`, `running`, `done`, `failed` or `cancelled`.
    pub state: String,
    pub attempts: i64,
    pub enqueued_in_round: Option<String>,
    pub work_round_id: Option<String>,
    pub result_round_id: Option<String>,
    pub result: Option<String>,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
}

const COLUMNS: &str =
    "id, job_id, conversation_id, class, topic, query, state, attempts, enqueued_in_round,
    work_round_id, result_round_id, result, created_at_ms, started_at_ms, finished_at_ms FROM jobs";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        job_id: r.get(1)?,
        conversation_id: r.get(2)?,
        class: r.get(3)?,
        topic: r.get(4)?,
        query: r.get(5)?,
        state: r.get(6)?,
        attempts: r.get(7)?,
        enqueued_in_round: r.get(8)?,
        work_round_id: r.get(9)?,
        result_round_id: r.get(10)?,
        result: r.get(11)?,
        created_at_ms: r.get(12)?,
        started_at_ms: r.get(13)?,
        finished_at_ms: r.get(14)?,
    })
}

/// Queues a job; its row.
pub fn enqueue(
    c: &Connection,
    conversation: &str,
    class: &str,
    topic: &str,
    query: &str,
    round_id: &str,
    now_ms: i64,
) -> rusqlite::Result<Job> {
    let job_id = uuid::Uuid::now_v7().hyphenated().to_string();
    c.prepare_cached(
        "INSERT INTO jobs (schema_version, job_id, conversation_id, class, topic, query, state, enqueued_in_round, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?8)",
    )?
    .execute(params![
        crate::trace::SCHEMA_VERSION,
        job_id,
        conversation,
        class,
        topic,
        query,
        round_id,
        now_ms
    ])?;
    Ok(get(c, &job_id)?.expect("just inserted"))
}

/// A job by its `job_id` (or its number).
pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Job>> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} WHERE job_id = ?1 OR CAST(id AS TEXT) = ?1"
    ))?
    .query_row([id], row)
    .optional()
}

/// Jobs, newest first: those queued or running first.
pub fn list(c: &Connection, limit: usize) -> rusqlite::Result<Vec<Job>> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} ORDER BY state NOT IN ('queued', 'running'), id DESC LIMIT ?1"
    ))?
    .query_map([i64::try_from(limit).unwrap_or(i64::MAX)], row)?
    .collect()
}

/// The oldest queued job, now running (one more attempt).
pub fn claim_next(c: &Connection, now_ms: i64) -> rusqlite::Result<Option<Job>> {
    let Some(id): Option<i64> = c
        .prepare_cached("SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1")?
        .query_row([], |r| r.get(0))
        .optional()?
    else {
        return Ok(None);
    };
    c.prepare_cached(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at_ms = ?2 WHERE id = ?1",
    )?
    .execute(params![id, now_ms])?;
    get(c, &id.to_string())
}

pub fn set_work_round(c: &Connection, id: i64, round_id: &str) -> rusqlite::Result<()> {
    c.prepare_cached("UPDATE jobs SET work_round_id = ?2 WHERE id = ?1")?
        .execute(params![id, round_id])?;
    Ok(())
}

/// Ends a running job (`done` or `failed`); false if it was cancelled meanwhile.
pub fn finish(
    c: &Connection,
    id: i64,
    state: &str,
    result: &str,
    result_round: Option<&str>,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached(
        "UPDATE jobs SET state = ?2, result = ?3, result_round_id = ?4, finished_at_ms = ?5
          WHERE id = ?1 AND state IN ('queued', 'running')",
    )?
    .execute(params![id, state, result, result_round, now_ms])?
        == 1)
}

/// Whether the job was cancelled (a worker checks before it tells anyone).
pub fn cancelled(c: &Connection, id: i64) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT state = 'cancelled' FROM jobs WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
}

/// Jobs a dead process left running: queued again while they have attempts
/// left, else returned to be failed.
pub fn recover(c: &Connection, max_attempts: i64) -> rusqlite::Result<Vec<Job>> {
    c.execute(
        "UPDATE jobs SET state = 'queued' WHERE state = 'running' AND attempts < ?1",
        [max_attempts],
    )?;
    c.prepare_cached(&format!("SELECT {COLUMNS} WHERE state = 'running'"))?
        .query_map([], row)?
        .collect()
}
