//! How much an item matters now: its signals (a pin, each write, each topic
//! hit, each citation), each decaying with the configured half-life from the
//! moment it happened, and a breakdown that says what the score is made of.
//!
//! The store keeps the decayed sum of each signal at `touched_ms`; adding a
//! signal first decays what is there to the new moment. The sum at any later
//! time is the kept sum times one decay factor, so items can be ordered for
//! every `now` alike by `rank_key` (see the migration).

use serde::Serialize;

use crate::config::MemoryConfig;

/// A signal that raises an item's score.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// The item was remembered (again).
    Write,
    /// A round's topic found the item.
    TopicHit,
    /// A model's answer quoted the item.
    Citation,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Write => "write",
            Signal::TopicHit => "topic_hit",
            Signal::Citation => "citation",
        }
    }
}

/// The weights and half-life scores are computed with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scoring {
    pub half_life_ms: f64,
    pub pin: f64,
    pub write: f64,
    pub topic_hit: f64,
    pub citation: f64,
}

impl Scoring {
    pub fn from_config(c: &MemoryConfig) -> Self {
        Self {
            half_life_ms: c.half_life_days * 86_400_000.0,
            pin: c.weights.pin,
            write: c.weights.write,
            topic_hit: c.weights.topic_hit,
            citation: c.weights.citation,
        }
    }

    fn weight(&self, signal: Signal) -> f64 {
        match signal {
            Signal::Write => self.write,
            Signal::TopicHit => self.topic_hit,
            Signal::Citation => self.citation,
        }
    }

    /// How much of a signal is left after `from_ms` → `to_ms` (1 if time went backwards).
    pub fn decay(&self, from_ms: i64, to_ms: i64) -> f64 {
        let elapsed = (to_ms - from_ms).max(0) as f64;
        (-elapsed / self.half_life_ms).exp2()
    }
}

/// An item's decayed signal sums at `touched_ms`, and how many of each it had.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Signals {
    pub v_write: f64,
    pub v_topic: f64,
    pub v_citation: f64,
    pub touched_ms: i64,
    pub topic_hits: u32,
    pub citations: u32,
}

impl Signals {
    /// A new item's signals: one write, now.
    pub fn written(scoring: &Scoring, now_ms: i64) -> Self {
        Self {
            v_write: scoring.write,
            touched_ms: now_ms,
            ..Self::default()
        }
    }

    /// The signals after `signal` happened at `now_ms`.
    pub fn with(mut self, scoring: &Scoring, signal: Signal, now_ms: i64) -> Self {
        let at = now_ms.max(self.touched_ms);
        let d = scoring.decay(self.touched_ms, at);
        self.v_write *= d;
        self.v_topic *= d;
        self.v_citation *= d;
        self.touched_ms = at;
        let w = scoring.weight(signal);
        match signal {
            Signal::Write => self.v_write += w,
            Signal::TopicHit => {
                self.v_topic += w;
                self.topic_hits += 1;
            }
            Signal::Citation => {
                self.v_citation += w;
                self.citations += 1;
            }
        }
        self
    }

    /// Orders items by their (unpinned) score at any moment: log2 of the
    /// score at time t, plus t / half-life, which does not depend on t.
    pub fn rank_key(&self, scoring: &Scoring) -> f64 {
        let sum = (self.v_write + self.v_topic + self.v_citation).max(f64::MIN_POSITIVE);
        sum.log2() + self.touched_ms as f64 / scoring.half_life_ms
    }

    /// The score at `now_ms`, with what it is made of.
    pub fn score(&self, scoring: &Scoring, pinned: bool, now_ms: i64) -> Score {
        let decay = scoring.decay(self.touched_ms, now_ms);
        let pin = if pinned { scoring.pin } else { 0.0 };
        let write = self.v_write * decay;
        let topic = self.v_topic * decay;
        let citation = self.v_citation * decay;
        let total = pin + write + topic + citation;
        let age_days = (now_ms - self.touched_ms).max(0) as f64 / 86_400_000.0;
        let half_life_days = scoring.half_life_ms / 86_400_000.0;
        let plural =
            |n: u32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let explanation = format!(
            "{}writes {write:.2} + {} {topic:.2} + {} {citation:.2} \
             (decayed ×{decay:.3}: last signal {age_days:.1} days ago, half-life {half_life_days} days) = {total:.2}",
            if pinned {
                format!("pinned {pin:.2} + ")
            } else {
                String::new()
            },
            plural(self.topic_hits, "topic hit", "topic hits"),
            plural(self.citations, "citation", "citations"),
        );
        Score {
            total: round4(total),
            pin: round4(pin),
            write: round4(write),
            topic: round4(topic),
            citation: round4(citation),
            decay: round4(decay),
            age_days: round4(age_days),
            explanation,
        }
    }
}

/// A score at one moment, signal by signal.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Score {
    pub total: f64,
    /// While pinned: the pin weight, undecayed.
    pub pin: f64,
    /// From being remembered (and remembered again), decayed.
    pub write: f64,
    /// From rounds whose topic found the item, decayed.
    pub topic: f64,
    /// From answers that quoted the item, decayed.
    pub citation: f64,
    /// What is left of the signals since the last one (0–1).
    pub decay: f64,
    /// Days since the last signal.
    pub age_days: f64,
    /// The sum, in words.
    pub explanation: String,
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}
