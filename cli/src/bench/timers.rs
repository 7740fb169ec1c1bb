//! `caal bench timers`: many timers due in the same second, rung by the
//! running scheduler as rounds of their own, on real SQLite files. Reports
//! how late each rang (its notification received minus its due time), the
//! span from the first due time to the last ringing, and whether they rang
//! in due order, each once.

use std::{collections::HashMap, path::Path, time::Duration};

use caal::{
    config::Config,
    round::{Engine, EngineOptions},
    schedule,
    state::{Clock, SystemClock},
    stats::percentile,
    trace::StoreError,
};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct TimersBenchReport {
    pub timers: usize,
    pub spread_ms: u64,
    pub conversations: usize,
    /// Rang (each once) out of `timers`.
    pub rang: usize,
    pub in_due_order: bool,
    pub late_p50_ms: f64,
    pub late_p99_ms: f64,
    pub late_max_ms: f64,
    /// From the first due time to the last ringing heard.
    pub span_ms: f64,
    /// Firing rounds written per second while they rang.
    pub rounds_per_s: f64,
}

/// `timers` timers over `conversations` conversations, due one after
/// another across `spread_ms` (0: all at the same instant) starting 1.5 s
/// from now.
pub fn run(
    dir: &Path,
    timers: usize,
    conversations: usize,
    spread_ms: u64,
) -> Result<TimersBenchReport, String> {
    let mut config = Config::defaults().map_err(|e| e.to_string())?;
    // No sentence library: the timers are set directly, not said.
    config.understand.templates = false;
    config.understand.semantic.model = String::new();
    let engine = Engine::open(
        dir,
        config,
        EngineOptions {
            library_id: Some("bench-timers".into()),
            ..EngineOptions::bench()
        },
    )
    .map_err(|e| e.to_string())?;
    let conversations = conversations.max(1);
    let first_due = SystemClock.now_ms() + 1_500;
    let step = spread_ms as f64 / timers.max(1) as f64;
    let due_of: HashMap<i64, i64> = engine
        .state()
        .transaction(|c| {
            let mut due_of = HashMap::new();
            for i in 0..timers {
                let due = first_due + (i as f64 * step) as i64;
                let id = schedule::add_timer(
                    c,
                    &format!("kitchen-{}", i % conversations),
                    None,
                    1,
                    due - 1_000,
                    "bench",
                )?;
                due_of.insert(id, due);
            }
            Ok(due_of)
        })
        .map_err(|e: StoreError| e.to_string())?;
    let mut heard = engine.notifications();
    let scheduler = engine.start_scheduler().map_err(|e| e.to_string())?;
    let mut rang: Vec<(i64, i64)> = Vec::with_capacity(timers); // (id, heard at)
    let deadline = first_due + 30_000;
    while rang.len() < timers && SystemClock.now_ms() < deadline {
        match heard.try_recv() {
            Ok(n) => rang.push((n.id, SystemClock.now_ms())),
            Err(tokio::sync::broadcast::error::TryRecvError::Empty) => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => return Err(format!("notifications lost: {e}")),
        }
    }
    drop(scheduler);
    let mut late: Vec<f64> = rang
        .iter()
        .map(|(id, at)| (at - due_of[id]) as f64)
        .collect();
    let in_due_order = rang.windows(2).all(|w| due_of[&w[0].0] <= due_of[&w[1].0]);
    let mut ids: Vec<i64> = rang.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    ids.dedup();
    late.sort_by(f64::total_cmp);
    let first_heard = rang.first().map_or(0, |r| r.1);
    let last_heard = rang.last().map_or(0, |r| r.1);
    Ok(TimersBenchReport {
        timers,
        spread_ms,
        conversations,
        rang: ids.len().min(rang.len()),
        in_due_order,
        late_p50_ms: percentile(&late, 0.5),
        late_p99_ms: percentile(&late, 0.99),
        late_max_ms: late.last().copied().unwrap_or(f64::NAN),
        span_ms: (last_heard - first_due) as f64,
        rounds_per_s: rang.len() as f64 / ((last_heard - first_heard).max(1) as f64 / 1000.0),
    })
}
