//! Replay with decision diffs: every stored input routed again through a
//! router compiled from another configuration, in memory, running nothing
//! and asking no model, and what would change: route, command, parameters,
//! authority level. How a rule or template change is tried against real
//! history before it ships (`caal replay --config NEW.toml`).
//!
//! What is routed again is what the round's route stage was given: the
//! stored `input.normalized` text, in the round's `state_in`, held to the
//! voice bar when the input was heard (`input.received.transcript.least`).
//! What it is compared with is that stage's own `route.selected` (the
//! first of the round; a model's later pick is not the router's).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Bars, Hearing, RouteDecision, Router};
use crate::{
    ids::ConversationId,
    trace::{RoutingInput, StoreError, TraceReader, events::HeardWord},
};

/// What the router decided, as `route.selected` records it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decided {
    pub route_code: String,
    pub command_id: Option<String>,
    pub params: Value,
    pub auth_level: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
}

impl Decided {
    fn of(d: &RouteDecision) -> Self {
        Self {
            route_code: d.route_code.clone(),
            command_id: d.command_id.clone(),
            params: d.params.clone(),
            auth_level: d.auth_level.get(),
            layer: Some(d.layer.as_str().to_owned()),
        }
    }

    /// What differs, by name: `route`, `command`, `params`, `level`.
    fn differences(&self, other: &Decided) -> Vec<&'static str> {
        let mut what = Vec::new();
        if self.route_code != other.route_code {
            what.push("route");
        }
        if self.command_id != other.command_id {
            what.push("command");
        }
        if !same_params(&self.params, &other.params) {
            what.push("params");
        }
        if self.auth_level != other.auth_level {
            what.push("level");
        }
        what
    }
}

/// `{}` and `null` are both "no parameters"; numbers are equal by value
/// (the trace stores canonical JSON, where 21.0 is written 21).
fn same_params(a: &Value, b: &Value) -> bool {
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(|o| o.is_empty());
    (empty(a) && empty(b)) || same(a, b)
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// One round whose decision would change.
#[derive(Clone, Debug, Serialize)]
pub struct Changed {
    pub round_id: String,
    pub conversation_id: String,
    pub round_seq: i64,
    pub input: String,
    pub state: String,
    /// `route`, `command`, `params`, `level`: what differs.
    pub what: Vec<&'static str>,
    pub before: Decided,
    pub after: Decided,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplayReport {
    pub rounds_read: u64,
    pub replayed: u64,
    /// Rounds not routed again, by why.
    pub skipped: BTreeMap<&'static str, u64>,
    pub unchanged: u64,
    /// Changed rounds by what changed (a round may count under several).
    pub changed_by: BTreeMap<&'static str, u64>,
    pub changed: Vec<Changed>,
    pub seconds: f64,
}

/// A stored round ready to be routed again.
struct Job {
    round_id: String,
    conversation_id: String,
    round_seq: i64,
    input: String,
    text: String,
    state: String,
    least: Option<f32>,
    words: Vec<HeardWord>,
    before: Decided,
}

/// Rounds routed at a time, spread over the cores (the router is shared,
/// read-only): the decisions cost far more than reading them.
const BATCH: usize = 4096;

/// Routes every stored input (of one conversation, or all; created at or
/// after `since`) again through `router`; `bars` are what heard inputs are
/// held to. `progress` gets the number of rounds read.
pub fn replay(
    reader: &TraceReader,
    router: &Router,
    bars: Bars,
    conversation: Option<&ConversationId>,
    since: Option<jiff::Timestamp>,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplayReport, StoreError> {
    let started = std::time::Instant::now();
    let mut report = ReplayReport::default();
    let mut batch: Vec<Job> = Vec::with_capacity(BATCH);
    let route = |batch: &mut Vec<Job>, report: &mut ReplayReport| {
        let decided = route_all(router, bars, batch);
        for (job, after) in batch.drain(..).zip(decided) {
            compare(report, job, after);
        }
    };
    report.rounds_read = reader.count_rounds(conversation)?;
    let mut visited = 0u64;
    reader.each_routing(conversation, &mut |input| {
        visited += 1;
        progress(visited);
        match job(input, since) {
            Ok(job) => batch.push(job),
            Err(why) => *report.skipped.entry(why).or_default() += 1,
        }
        if batch.len() >= BATCH {
            route(&mut batch, &mut report);
        }
        Ok(())
    })?;
    // Rounds with no input (an operator's, a ringing's) were not visited.
    let without = report.rounds_read.saturating_sub(visited);
    if without > 0 {
        *report.skipped.entry("no input routed").or_default() += without;
    }
    route(&mut batch, &mut report);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// What a stored round gives to route again, or why it gives nothing.
fn job(input: RoutingInput, since: Option<jiff::Timestamp>) -> Result<Job, &'static str> {
    if since.is_some_and(|s| {
        input
            .created_at
            .parse::<jiff::Timestamp>()
            .is_ok_and(|t| t < s)
    }) {
        return Err("before --since");
    }
    let parse = |p: &Option<String>| {
        p.as_deref()
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
    };
    let normalized = parse(&input.normalized).ok_or("no input routed")?;
    let stored = parse(&input.route).ok_or("not routed")?;
    // Input that carried no request was asked for again, not routed.
    if stored["route_code"] == "intent.incoherent" {
        return Err("incoherent");
    }
    let text = normalized["normalized_text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let received = parse(&input.received).unwrap_or(Value::Null);
    Ok(Job {
        round_id: input.round_id,
        conversation_id: input.conversation_id,
        round_seq: input.round_seq,
        input: received["raw_text"].as_str().unwrap_or(&text).to_owned(),
        least: received["transcript"]["least"].as_f64().map(|l| l as f32),
        words: serde_json::from_value(received["transcript"]["words"].clone()).unwrap_or_default(),
        state: input.state_in,
        before: Decided {
            route_code: stored["route_code"].as_str().unwrap_or_default().to_owned(),
            command_id: stored["command_id"].as_str().map(str::to_owned),
            params: stored["params"].clone(),
            auth_level: stored["auth_level"].as_u64().unwrap_or(1) as u8,
            layer: stored["layer"].as_str().map(str::to_owned),
        },
        text,
    })
}

/// The decisions for a batch, in its order, on every core.
fn route_all(router: &Router, bars: Bars, batch: &[Job]) -> Vec<Decided> {
    let decide = |job: &Job| {
        let mut d = router.route(&job.text, &job.state);
        if let Some(least) = job.least {
            let hearing = Hearing {
                least,
                words: &job.words,
                bars,
            };
            d = router.heard(d, &hearing);
        }
        Decided::of(&d)
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 || batch.len() < 64 {
        return batch.iter().map(decide).collect();
    }
    let per = batch.len().div_ceil(cores);
    std::thread::scope(|scope| {
        let parts: Vec<_> = batch
            .chunks(per)
            .map(|part| scope.spawn(move || part.iter().map(decide).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().expect("a routing thread panicked"))
            .collect()
    })
}

fn compare(report: &mut ReplayReport, job: Job, after: Decided) {
    report.replayed += 1;
    let what = job.before.differences(&after);
    if what.is_empty() {
        report.unchanged += 1;
        return;
    }
    for w in &what {
        *report.changed_by.entry(w).or_default() += 1;
    }
    report.changed.push(Changed {
        round_id: job.round_id,
        conversation_id: job.conversation_id,
        round_seq: job.round_seq,
        input: job.input,
        state: job.state,
        what,
        before: job.before,
        after,
    });
}
