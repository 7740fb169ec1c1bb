//! Research as a background job. The round that asks answers at once ("I'll
//! look that up…") and records `job.enqueued`; a worker then asks the model
//! in a round of the job's own conversation (`job-<n>`: `job.progress`,
//! the `llm.*` events with their retries, `job.result`), so the asking
//! conversation is never held up while a model thinks; and the answer is
//! told in a round of the asking conversation (channel `system`:
//! `job.result` naming the work round, `output.emitted`), heard like a
//! timer's ringing (`Engine::notifications`, kind `job`).
//!
//! A job cancelled before its work ends is told as cancelled and its answer
//! is dropped. One found running at start (the process died under it) is
//! queued again while it has attempts left, else failed and told so.

use super::RoundError;
use serde_json::json;

use super::{Channel, Engine, Notification};
use crate::{
    config::RouteType,
    ids::BucketId,
    router::Intent,
    schedule::jobs::{self, Job},
    state::rfc3339_ms,
    trace::{
        EventDraft, OpenRound, StoreError,
        events::{JobEnqueued, JobProgress, JobResult},
    },
};

/// What the asking round says.
pub(super) const ACCEPTED: &str = "I'll look that up and tell you when I have it.";

impl Engine {
    /// Queues research asked in `round` and records `job.enqueued`.
    pub(super) fn enqueue_research(
        &self,
        round: &OpenRound,
        query: &str,
        topic: Option<&str>,
    ) -> Result<Job, RoundError> {
        let header = round.header();
        let now = self.clock.now_ms();
        let topic = topic.unwrap_or(query);
        let job = self.state.transaction(|c| {
            jobs::enqueue(
                c,
                header.conversation_id.as_str(),
                "research",
                topic,
                query,
                &header.round_id.to_string(),
                now,
            )
        })?;
        round.append(EventDraft::new(JobEnqueued {
            job_id: job.job_id.clone(),
            class: job.class.clone(),
            topic: job.topic.clone(),
            query: job.query.clone(),
        }))?;
        Ok(job)
    }

    /// Runs every queued job now, one after another (what `caal say` does
    /// after its round); returns what was told.
    pub fn run_jobs_now(&self) -> Result<Vec<Notification>, RoundError> {
        let mut told = Vec::new();
        while let Some(n) = self.run_next_job()? {
            told.extend(n);
        }
        Ok(told)
    }

    /// Claims and runs the oldest queued job. None: nothing was queued.
    pub(super) fn run_next_job(&self) -> Result<Option<Option<Notification>>, RoundError> {
        let now = self.clock.now_ms();
        let Some(job) = self.state.transaction(|c| jobs::claim_next(c, now))? else {
            return Ok(None);
        };
        Ok(Some(self.run_job(&job)?))
    }

    /// The work in the job's own conversation, then (unless it was
    /// cancelled meanwhile) the telling in the asking conversation.
    fn run_job(&self, job: &Job) -> Result<Option<Notification>, RoundError> {
        let asked = job.conversation_id.as_str();
        let conversation: crate::ids::ConversationId = asked.parse().map_err(StoreError::Id)?;
        let bucket = BucketId::for_conversation(&conversation);
        let work_conversation = format!("job-{}", job.id);
        let (work, _) = self.recorded_round(
            &work_conversation,
            Some(&bucket),
            Channel::System,
            &job.query,
        )?;
        let work_id = work.header().round_id.to_string();
        self.state
            .transaction(|c| jobs::set_work_round(c, job.id, &work_id))?;
        work.append(EventDraft::new(JobProgress {
            job_id: job.job_id.clone(),
            status: "running".into(),
            progress: Some(0.0),
            attempt: job.attempts,
            asked_in: asked.to_string(),
        }))?;
        let state = self.conversation_state(&conversation)?;
        let (status, text) = match &self.llm {
            None => (
                "failed",
                "no model is configured to look things up with".to_owned(),
            ),
            Some(_) => {
                let thought = self.think(&work, &job.query, RouteType::Research, None, &state)?;
                match thought.intent {
                    Intent::Reply(text) if !thought.summary.clarified => ("done", text),
                    _ => ("failed", "no model gave a usable answer".to_owned()),
                }
            }
        };
        let cancelled = self.state.with(|c| jobs::cancelled(c, job.id))?;
        let status = if cancelled { "cancelled" } else { status };
        work.append(EventDraft::new(JobResult {
            job_id: job.job_id.clone(),
            status: status.into(),
            result: json!({"text": text}),
        }))?;
        work.complete(&state)?;
        if cancelled {
            return Ok(None);
        }
        let said = match status {
            "done" => text.clone(),
            _ => format!("I couldn't look up {}: {text}.", job.topic),
        };
        let n = self.tell(job, status, &said, Some(&work_id))?;
        let now = self.clock.now_ms();
        self.state
            .transaction(|c| jobs::finish(c, job.id, status, &text, Some(&n.round_id), now))?;
        let _ = self.notify.send(n.clone());
        Ok(Some(n))
    }

    /// A round of the asking conversation that tells how a job ended.
    fn tell(
        &self,
        job: &Job,
        status: &str,
        said: &str,
        work_round: Option<&str>,
    ) -> Result<Notification, StoreError> {
        let round_id = self.announce(
            &job.conversation_id,
            Channel::System,
            &format!("job {} {status}: {}", job.id, job.topic),
            EventDraft::new(JobResult {
                job_id: job.job_id.clone(),
                status: status.into(),
                result: json!({"text": said, "work_conversation": format!("job-{}", job.id),
                               "work_round_id": work_round}),
            }),
            said,
        )?;
        Ok(Notification {
            conversation_id: job.conversation_id.clone(),
            round_id,
            kind: "job",
            id: job.id,
            text: said.to_owned(),
            due_at: rfc3339_ms(job.created_at_ms),
            late_ms: 0,
        })
    }

    /// Stops a queued or running job (by its `job_id` or number), told in
    /// the conversation that asked. None: no such job, or it has ended.
    pub fn cancel_job(&self, id: &str, channel: Channel) -> Result<Option<String>, StoreError> {
        let now = self.clock.now_ms();
        let Some(job) = self.state.with(|c| jobs::get(c, id))? else {
            return Ok(None);
        };
        if !matches!(job.state.as_str(), "queued" | "running") {
            return Ok(None);
        }
        let said = format!("I stopped looking up {}.", job.topic);
        if !self
            .state
            .transaction(|c| jobs::finish(c, job.id, "cancelled", "", None, now))?
        {
            return Ok(None);
        }
        self.announce(
            &job.conversation_id,
            channel,
            &format!("cancel job {}", job.id),
            EventDraft::new(JobResult {
                job_id: job.job_id.clone(),
                status: "cancelled".into(),
                result: json!({"text": said, "by": channel.as_str()}),
            }),
            &said,
        )?;
        Ok(Some(said))
    }

    /// Jobs a dead process left running: queued again, or (attempts spent)
    /// failed and told so.
    pub(super) fn recover_jobs(&self) -> Result<(), StoreError> {
        let attempts = i64::from(self.config.schedule.job_attempts);
        let spent = self.state.transaction(|c| jobs::recover(c, attempts))?;
        for job in spent {
            let why = "CAAL stopped while it ran, and it has been tried as often as it may be";
            let said = format!("I couldn't look up {}: {why}.", job.topic);
            let n = self.tell(&job, "failed", &said, job.work_round_id.as_deref())?;
            let now = self.clock.now_ms();
            self.state
                .transaction(|c| jobs::finish(c, job.id, "failed", why, Some(&n.round_id), now))?;
        }
        Ok(())
    }

    /// Jobs, queued and running first, then the newest.
    pub fn jobs(&self, limit: usize) -> Result<Vec<Job>, StoreError> {
        self.state.with(|c| jobs::list(c, limit))
    }
}
