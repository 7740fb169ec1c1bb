//! The scheduler: timers and reminders ring when they are due, each as a
//! round of its own in the conversation that set it (channel `system`):
//! `input.received`, `schedule.fired` (with how late it rang), the spoken
//! `output.emitted`, `round.completed`. So a ringing is in the chain, the
//! export and the live stream like anything said; clients of the
//! conversation (the voice socket, `caal chat`) hear it from
//! `Engine::notifications`.
//!
//! One thread per process that holds the data dir (`caal serve`, `caal
//! chat`) waits for the next due time, woken early when a round ends (it
//! may have set a timer). `caal say` rings what is overdue once, after its
//! round.

use std::{
    sync::{Arc, Condvar, Mutex},
    thread::JoinHandle,
    time::Duration,
};

use serde::Serialize;

use super::{Channel, Engine};
use crate::{
    schedule::{self, Due},
    state::rfc3339_ms,
    trace::{
        EventDraft, StoreError,
        events::{OutputEmitted, ScheduleCancelled, ScheduleFired},
    },
};

/// What rang, as clients of its conversation are told.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Notification {
    pub conversation_id: String,
    pub round_id: String,
    /// `timer`, `reminder` or `job` (what a background job found).
    pub kind: &'static str,
    pub id: i64,
    /// What is said: "Your 10 minute timer is done."
    pub text: String,
    pub due_at: String,
    pub late_ms: i64,
}

/// Timers and reminders to come, as `caal timers list` and `GET /api/timers` show them.
#[derive(Clone, Debug, Serialize)]
pub struct Scheduled {
    pub timers: Vec<ScheduledTimer>,
    pub reminders: Vec<ScheduledReminder>,
    pub now: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ScheduledTimer {
    #[serde(flatten)]
    pub timer: schedule::Timer,
    pub label: String,
    pub left_ms: i64,
    pub paused: bool,
    pub due_at: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ScheduledReminder {
    #[serde(flatten)]
    pub reminder: schedule::Reminder,
    pub left_ms: i64,
    pub due_at: String,
}

/// Timers and reminders to come in `state`, of one conversation or all
/// (a reader beside a running writer may call this).
pub fn scheduled_in(
    state: &crate::state::StateDb,
    conversation: Option<&str>,
    now: i64,
) -> Result<Scheduled, StoreError> {
    let (timers, reminders) = state.with(|c| {
        Ok((
            schedule::timers(c, conversation)?,
            schedule::reminders(c, conversation)?,
        ))
    })?;
    Ok(Scheduled {
        timers: timers
            .into_iter()
            .map(|t| ScheduledTimer {
                label: t.label(),
                left_ms: t.left_ms(now),
                paused: t.paused(),
                due_at: (!t.paused()).then(|| rfc3339_ms(t.due_at_ms)),
                timer: t,
            })
            .collect(),
        reminders: reminders
            .into_iter()
            .map(|r| ScheduledReminder {
                left_ms: (r.due_at_ms - now).max(0),
                due_at: rfc3339_ms(r.due_at_ms),
                reminder: r,
            })
            .collect(),
        now: rfc3339_ms(now),
    })
}

/// Wakes the scheduler thread early: a round ended, or it is time to stop.
#[derive(Default)]
pub(crate) struct Wake {
    state: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl Wake {
    pub(crate) fn poke(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 = s.0.wrapping_add(1);
        self.cv.notify_all();
    }

    fn stop(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.1 = true;
        self.cv.notify_all();
    }

    /// Waits up to `ms` or until poked; false once stopped.
    fn wait(&self, seen: &mut u64, ms: u64) -> bool {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (s, _) = self
            .cv
            .wait_timeout_while(s, Duration::from_millis(ms), |s| s.0 == *seen && !s.1)
            .unwrap_or_else(|p| p.into_inner());
        *seen = s.0;
        !s.1
    }
}

/// Looked at again at least this often, so a timer another process set
/// (one that held the data dir before) is not missed.
const POLL_MS: i64 = 500;
/// Claimed and recorded together; the rest follow at once.
const BATCH: usize = 256;

/// The running scheduler and job workers; dropping it stops the threads
/// (a job under way finishes first).
pub struct Scheduler {
    wake: Arc<Wake>,
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.wake.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Engine {
    /// Everything rung from now on (subscribe before it may ring).
    pub fn notifications(&self) -> tokio::sync::broadcast::Receiver<Notification> {
        self.notify.subscribe()
    }

    /// Rings what is due now, in due order; returns what rang.
    pub fn fire_due(&self) -> Result<Vec<Notification>, StoreError> {
        let mut rang = Vec::new();
        loop {
            let now = self.clock.now_ms();
            let batch = self
                .state
                .transaction(|c| schedule::claim_due(c, now, BATCH))?;
            if batch.is_empty() {
                return Ok(rang);
            }
            let mut rounds = Vec::with_capacity(batch.len());
            for due in &batch {
                let n = self.ring(due, now)?;
                tracing::info!(kind = n.kind, id = n.id, conversation = %n.conversation_id,
                               late_ms = n.late_ms, round = %n.round_id, "rang");
                rounds.push(n.round_id.clone());
                rang.push(n);
            }
            self.state.transaction(|c| {
                for (due, round_id) in batch.iter().zip(&rounds) {
                    schedule::settle(c, due, round_id)?;
                }
                Ok(())
            })?;
            for n in &rang[rang.len() - batch.len()..] {
                // No one listening is fine: the round is the record.
                let _ = self.notify.send(n.clone());
            }
        }
    }

    /// One ringing, as a round of its conversation.
    fn ring(&self, due: &Due, now: i64) -> Result<Notification, StoreError> {
        let late = (now - due.due_at_ms()).max(0);
        let text = due.announcement(late);
        let mut fired = ScheduleFired {
            kind: due.kind().into(),
            id: due.id(),
            due_at: rfc3339_ms(due.due_at_ms()),
            fired_at: rfc3339_ms(now),
            late_ms: late,
            ..ScheduleFired::default()
        };
        let said = match due {
            Due::Timer(t) => {
                fired.name = t.name.clone();
                fired.seconds = Some(t.seconds);
                fired.set_in_round = t.set_in_round.clone();
                format!("{} due", t.label())
            }
            Due::Reminder(r) => {
                fired.what = Some(r.what.clone());
                fired.set_in_round = r.set_in_round.clone();
                format!("reminder due: {}", r.what)
            }
        };
        let round_id = self.announce(
            due.conversation_id(),
            Channel::System,
            &said,
            EventDraft::new(fired),
            &text,
        )?;
        Ok(Notification {
            conversation_id: due.conversation_id().to_owned(),
            round_id,
            kind: due.kind(),
            id: due.id(),
            text,
            due_at: rfc3339_ms(due.due_at_ms()),
            late_ms: late,
        })
    }

    /// Starts ringing timers and reminders from this process: what came due
    /// while nothing ran rings at once (late, and saying so).
    pub fn start_scheduler(&self) -> Result<Scheduler, StoreError> {
        let released = self.state.transaction(schedule::release_unsettled)?;
        if released > 0 {
            tracing::warn!(
                released,
                "timers or reminders claimed before a crash, without their round, ring again"
            );
        }
        self.recover_jobs()?;
        let mut threads = Vec::new();
        for n in 0..self.config.schedule.job_workers {
            let engine = self.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("caal-job-{n}"))
                    .spawn(move || {
                        let mut seen = 0;
                        loop {
                            match engine.run_next_job() {
                                Ok(Some(_)) => continue,
                                Ok(None) => {}
                                Err(e) => tracing::error!("a job could not run: {e}"),
                            }
                            if !engine.wake.wait(&mut seen, POLL_MS as u64) {
                                return;
                            }
                        }
                    })
                    .map_err(|e| StoreError::Io {
                        what: "cannot start a job worker thread".into(),
                        source: e,
                    })?,
            );
        }
        let engine = self.clone();
        let wake = self.wake.clone();
        let thread = std::thread::Builder::new()
            .name("caal-scheduler".into())
            .spawn(move || {
                let mut seen = 0;
                loop {
                    if let Err(e) = engine.fire_due() {
                        tracing::error!("the scheduler could not ring what is due: {e}");
                    }
                    let now = engine.clock.now_ms();
                    let next = engine.state.with(schedule::next_due_ms).ok().flatten();
                    let wait = next.map_or(POLL_MS, |d| (d - now).clamp(0, POLL_MS));
                    if !engine
                        .wake
                        .wait(&mut seen, u64::try_from(wait).unwrap_or(0))
                    {
                        return;
                    }
                }
            })
            .map_err(|source| StoreError::Io {
                what: "cannot start the scheduler thread".into(),
                source,
            })?;
        threads.push(thread);
        Ok(Scheduler { wake, threads })
    }

    /// Timers and reminders to come, of one conversation or all.
    pub fn scheduled(&self, conversation: Option<&str>) -> Result<Scheduled, StoreError> {
        scheduled_in(&self.state, conversation, self.clock.now_ms())
    }

    /// An operator cancels a timer or reminder by its id (`kind`: `timer`
    /// or `reminder`), recorded as a round in the conversation that set it.
    /// None: there is no such one to come.
    pub fn cancel_scheduled(
        &self,
        kind: &str,
        id: i64,
        channel: Channel,
    ) -> Result<Option<String>, StoreError> {
        let found = self.state.with(|c| {
            Ok(match kind {
                "timer" => schedule::timers(c, None)?
                    .into_iter()
                    .find(|t| t.id == id)
                    .map(Due::Timer),
                _ => schedule::reminders(c, None)?
                    .into_iter()
                    .find(|r| r.id == id)
                    .map(Due::Reminder),
            })
        })?;
        let Some(due) = found else {
            return Ok(None);
        };
        let by = match channel {
            Channel::Api | Channel::Ui => "api",
            _ => "cli",
        };
        let mut payload = ScheduleCancelled {
            kind: due.kind().into(),
            id,
            by: by.into(),
            ..ScheduleCancelled::default()
        };
        let (said, text) = match &due {
            Due::Timer(t) => {
                payload.name = t.name.clone();
                (
                    format!("caal timers cancel timer {id}"),
                    format!("The {} was cancelled.", t.label()),
                )
            }
            Due::Reminder(r) => {
                payload.what = Some(r.what.clone());
                (
                    format!("caal timers cancel reminder {id}"),
                    format!("The reminder to {} was cancelled.", r.what),
                )
            }
        };
        let cancelled = self.state.transaction(|c| match &due {
            Due::Timer(_) => schedule::cancel_timer(c, id),
            Due::Reminder(_) => schedule::cancel_reminder(c, id),
        })?;
        if !cancelled {
            return Ok(None);
        }
        self.announce(
            due.conversation_id(),
            channel,
            &said,
            EventDraft::new(payload),
            &text,
        )?;
        Ok(Some(text))
    }

    /// A round of something CAAL did or was told rather than said to it (a
    /// ringing, a job's answer, an operator's cancellation): `said` as its
    /// input, `event`, then `text` said on `channel`. Its round id.
    pub(super) fn announce(
        &self,
        conversation: &str,
        channel: Channel,
        said: &str,
        event: EventDraft,
        text: &str,
    ) -> Result<String, StoreError> {
        let (round, state) = self.recorded_round(conversation, None, channel, said)?;
        round.append(event)?;
        round.append(EventDraft::new(OutputEmitted {
            text: text.into(),
            channel: channel.as_str().into(),
            was_escalated: None,
        }))?;
        let round_id = round.header().round_id.to_string();
        round.complete(&state)?;
        Ok(round_id)
    }
}
