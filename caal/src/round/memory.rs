//! Memory in rounds: the spoken and typed memory commands (remember, forget,
//! pin, unpin, recall), topic hits for rounds whose rule names a topic, the
//! context package injected into prompts and the citations found in
//! answers, and the operator's writes from `caal bucket`. Each change to a
//! bucket is an event of the round that made it; a forgotten item's event
//! never says what it was.

use super::RoundError;
use serde::Serialize;

use crate::{
    config::MemoryOp,
    ids::BucketId,
    memory::{
        ContextPackage, Hit, ItemMetadata, ItemRef, Match, MemoryError, Signal, Tier, Written,
    },
    router::normalize,
    trace::{
        EventDraft, EventStatus, OpenRound, StoreError,
        events::{
            Injected, MemoryForgotten, MemoryInjected, MemoryRead, MemoryReferenced, OutputEmitted,
            name_of,
        },
    },
};

use super::{Channel, Engine, Steps};

/// The conversation the operator's `caal bucket` writes are recorded in.
pub const OPERATOR_CONVERSATION: &str = "operator";

/// A write the operator asks for by hand.
#[derive(Clone, Debug)]
pub enum OperatorWrite {
    Add {
        content: String,
        refs: Vec<ItemRef>,
        pin: bool,
    },
    Pin {
        item_id: String,
    },
    Unpin {
        item_id: String,
    },
    Forget {
        item_id: String,
    },
}

/// What an operator write did, and the round that recorded it.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorOutcome {
    pub round_id: String,
    pub bucket_id: String,
    pub item_id: String,
    /// `add`, `update`, `pin`, `unpin` or `forget`.
    pub op: String,
    pub pinned: bool,
    pub redacted_kinds: Vec<&'static str>,
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The words the person said for `subject` (which the router saw lower-cased),
/// as they said them: the shortest ending of `text` that normalises to it.
fn as_said(text: &str, subject: &str) -> String {
    let starts: Vec<usize> = text
        .char_indices()
        .filter(|&(i, c)| {
            !c.is_whitespace() && (i == 0 || text[..i].ends_with(char::is_whitespace))
        })
        .map(|(i, _)| i)
        .collect();
    let said = starts
        .iter()
        .rev()
        .map(|&i| &text[i..])
        .find(|tail| normalize(tail) == subject)
        .unwrap_or(subject);
    said.trim_end_matches(|c: char| c.is_whitespace() || ".!,;:".contains(c))
        .to_owned()
}

fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Engine {
    /// A memory command said or typed in a round.
    pub(super) fn memory_command(
        &self,
        round: &OpenRound,
        text: &str,
        op: MemoryOp,
        subject: Option<&str>,
        now: i64,
    ) -> Result<Steps, RoundError> {
        let bucket = round.header().bucket_id.clone();
        match self.memory_step(round, &bucket, text, op, subject, now) {
            Ok(steps) => Ok(steps),
            Err(MemoryError::Store(e)) => Err(e.into()),
            Err(e) => Ok(Steps::failed(
                format!("I couldn't {}: {e}.", op.as_str()),
                "memory.invalid",
                e.to_string(),
            )),
        }
    }

    fn memory_step(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        text: &str,
        op: MemoryOp,
        subject: Option<&str>,
        now: i64,
    ) -> Result<Steps, MemoryError> {
        // "What do you remember about it": no word to search for is a question about everything.
        let subject = subject.filter(|s| {
            op != MemoryOp::Recall
                || crate::memory::words(s)
                    .iter()
                    .any(|w| !crate::memory::is_stopword(w))
        });
        let Some(subject) = subject else {
            return self.recall_everything(round, bucket, now);
        };
        if op == MemoryOp::Remember {
            return self.remember_said(round, bucket, text, subject, now);
        }
        let hits = self.memory_about(round, bucket, op, subject, now)?;
        if hits.is_empty() {
            return Ok(Steps::reply(format!(
                "I don't remember anything about {subject}."
            )));
        }
        match op {
            MemoryOp::Recall => self.recall_about(round, bucket, subject, &hits, now),
            MemoryOp::Forget => self.forget_one(round, bucket, subject, &hits, now),
            MemoryOp::Pin | MemoryOp::Unpin => {
                self.pin_first(round, bucket, op == MemoryOp::Pin, &hits, now)
            }
            MemoryOp::Remember => unreachable!("remember returned above"),
        }
    }

    /// A recall with no word to search for: the top three items of the
    /// bucket's package, read as `memory.read` (matched "package").
    fn recall_everything(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        now: i64,
    ) -> Result<Steps, MemoryError> {
        // "What do you remember?": the top of the package.
        let package = self.memory.package(bucket, now)?;
        let top: Vec<&str> = package
            .items
            .iter()
            .take(3)
            .map(|i| i.scored.item.content.as_str())
            .collect();
        round.append(EventDraft::new(MemoryRead {
            bucket_id: bucket.to_string(),
            op: "recall".into(),
            query: None,
            matched: "package".into(),
            item_ids: package
                .items
                .iter()
                .take(3)
                .map(|i| i.scored.item.item_id.clone())
                .collect(),
        }))?;
        Ok(Steps::reply(if top.is_empty() {
            "I don't remember anything yet. Say \"remember that …\" and I will.".to_owned()
        } else {
            format!("I remember: {}.", top.join("; "))
        }))
    }

    /// "Remember that the spare key is under the mat": `subject` kept in
    /// the words the person said, with the round as its source (an item
    /// already known is updated, and the reply says so).
    fn remember_said(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        text: &str,
        subject: &str,
        now: i64,
    ) -> Result<Steps, MemoryError> {
        let content = as_said(text, subject);
        let metadata = ItemMetadata {
            source: Some(format!("round:{}", round.header().round_id)),
            ..ItemMetadata::default()
        };
        let written = self
            .memory
            .remember(bucket, &content, metadata, false, now)?;
        self.record_written(round, &written, "round")?;
        Ok(Steps::reply(match written.op {
            crate::memory::WriteOp::Update => {
                format!(
                    "I already knew that {}; I'll keep it in mind.",
                    written.item.content
                )
            }
            _ => format!("Okay, I'll remember that {}.", written.item.content),
        }))
    }

    /// The bucket's items about `subject`, at most five, read as
    /// `memory.read`: a recall takes items with any of its words ("what do
    /// you remember about the car"), the other commands only items with all
    /// of them.
    fn memory_about(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        op: MemoryOp,
        subject: &str,
        now: i64,
    ) -> Result<Vec<Hit>, MemoryError> {
        let how = if op == MemoryOp::Recall {
            Match::Any
        } else {
            Match::All
        };
        let hits = match self.memory.search(subject, Some(bucket), how, 5, now) {
            Err(MemoryError::EmptyQuery { .. }) => Vec::new(),
            found => found?,
        };
        let ids: Vec<String> = hits.iter().map(|h| h.scored.item.item_id.clone()).collect();
        round.append(EventDraft::new(MemoryRead {
            bucket_id: bucket.to_string(),
            op: op.as_str().into(),
            query: Some(subject.to_string()),
            matched: if how == Match::All { "all" } else { "any" }.into(),
            item_ids: ids,
        }))?;
        Ok(hits)
    }

    /// "What do you remember about the car": the first three items found,
    /// said, and referenced as a topic hit.
    fn recall_about(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        subject: &str,
        hits: &[Hit],
        now: i64,
    ) -> Result<Steps, MemoryError> {
        let shown: Vec<String> = hits
            .iter()
            .take(3)
            .map(|h| h.scored.item.item_id.clone())
            .collect();
        let found = self
            .memory
            .reference(bucket, &shown, Signal::TopicHit, now)?;
        self.record_referenced(round, bucket, Signal::TopicHit, Some(subject), &found)?;
        let contents: Vec<&str> = hits[..shown.len()]
            .iter()
            .map(|h| h.scored.item.content.as_str())
            .collect();
        Ok(Steps::reply(format!(
            "About {subject}, I remember: {}.",
            contents.join("; ")
        )))
    }

    /// "Forget the spare key": the one item found is forgotten (its
    /// `memory.forgotten` never says what it was); among several, the one
    /// that is exactly what was said, else the person is asked which.
    fn forget_one(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        subject: &str,
        hits: &[Hit],
        now: i64,
    ) -> Result<Steps, MemoryError> {
        // One match, or one that is exactly what was said; else ask.
        let exact = hits
            .iter()
            .position(|h| normalize(&h.scored.item.content) == subject);
        let chosen = if hits.len() == 1 { Some(0) } else { exact };
        let Some(i) = chosen else {
            let contents: Vec<String> =
                hits.iter().map(|h| h.scored.item.content.clone()).collect();
            return Ok(Steps::reply(format!(
                "I remember {} things about {subject}: {}. Which one should I forget? Say more of its words.",
                hits.len(),
                quoted(&contents)
            )));
        };
        let item = self
            .memory
            .forget(bucket, &hits[i].scored.item.item_id, now)?;
        round.append(EventDraft::new(MemoryForgotten {
            bucket_id: bucket.to_string(),
            item_id: item.item_id.clone(),
            reason: "asked to forget".into(),
            was_pinned: item.pinned,
            source: "round".into(),
        }))?;
        Ok(Steps::reply("Okay, I've forgotten it."))
    }

    /// "Pin the spare key" (or unpin it): the first item found that is not
    /// already so is changed; if none, the reply names the first found.
    fn pin_first(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        pin: bool,
        hits: &[Hit],
        now: i64,
    ) -> Result<Steps, MemoryError> {
        let Some(hit) = hits.iter().find(|h| h.scored.item.pinned != pin) else {
            let first = &hits[0].scored.item.content;
            return Ok(Steps::reply(if pin {
                format!("That's already pinned: {first}.")
            } else {
                format!("That isn't pinned: {first}.")
            }));
        };
        let written = self
            .memory
            .set_pinned(bucket, &hit.scored.item.item_id, pin, now)?;
        self.record_written(round, &written, "round")?;
        Ok(Steps::reply(format!(
            "{}: {}.",
            if pin { "Pinned" } else { "Unpinned" },
            written.item.content
        )))
    }

    fn record_written(
        &self,
        round: &OpenRound,
        written: &Written,
        source: &str,
    ) -> Result<(), StoreError> {
        round.append(EventDraft::new(written.event(source)))
    }

    fn record_referenced(
        &self,
        round: &OpenRound,
        bucket: &BucketId,
        signal: Signal,
        topic: Option<&str>,
        ids: &[String],
    ) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        round.append(EventDraft::new(MemoryReferenced {
            bucket_id: bucket.to_string(),
            signal: signal.as_str().into(),
            topic: topic.map(str::to_owned),
            item_ids: ids.to_vec(),
        }))
    }

    /// A round whose rule names a topic raises the items that topic finds.
    pub(super) fn topic_hits(
        &self,
        round: &OpenRound,
        topic: &str,
        now: i64,
    ) -> Result<(), RoundError> {
        let bucket = round.header().bucket_id.clone();
        let found = self
            .memory
            .search(topic, Some(&bucket), Match::Any, 3, now)
            .and_then(|hits| {
                let ids: Vec<String> = hits.into_iter().map(|h| h.scored.item.item_id).collect();
                self.memory.reference(&bucket, &ids, Signal::TopicHit, now)
            });
        match found {
            Ok(ids) => {
                Ok(self.record_referenced(round, &bucket, Signal::TopicHit, Some(topic), &ids)?)
            }
            // A topic with no searchable words finds nothing; that is not a failure.
            Err(MemoryError::EmptyQuery { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The bucket's package for a prompt, and the `memory.injected` event
    /// saying which items went in and why. `room`: characters the prompt can
    /// still take. Returns the text to add and the package it came from.
    pub(super) fn memory_for_prompt(
        &self,
        round: &OpenRound,
        room: usize,
        now: i64,
    ) -> Result<Option<(String, std::sync::Arc<ContextPackage>, bool)>, RoundError> {
        let bucket = round.header().bucket_id.clone();
        let package = self.memory.package(&bucket, now)?;
        if package.short_context.is_empty() && package.long_context.is_none() {
            return Ok(None);
        }
        let mut text = package.short_context.clone();
        let with_long = package
            .long_context
            .as_ref()
            .is_some_and(|long| text.chars().count() + 1 + long.chars().count() <= room);
        if let (true, Some(long)) = (with_long, &package.long_context) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(long);
        }
        let mut parts = Vec::new();
        if !package.short_context.is_empty() {
            parts.push("short");
        }
        if with_long {
            parts.push("long");
        }
        let items = package
            .injected(with_long)
            .map(|i| Injected {
                item_id: i.scored.item.item_id.clone(),
                why: name_of(&i.why),
                score: i.scored.reference_score,
                tier: name_of(&i.tier),
            })
            .collect();
        round.append(EventDraft::new(MemoryInjected {
            bucket_id: bucket.to_string(),
            items,
            parts: parts.iter().map(ToString::to_string).collect(),
            unit: name_of(&package.budget.unit),
            short_used: package.budget.short_used as u64,
            long_used: package.budget.long_used as u64,
            long_left_out: package.long_context.is_some() && !with_long,
        }))?;
        Ok(Some((text, package, with_long)))
    }

    /// Items of the injected package that the accepted answer quotes gain a citation.
    pub(super) fn cite(
        &self,
        round: &OpenRound,
        package: &ContextPackage,
        with_long: bool,
        answer: &str,
        now: i64,
    ) -> Result<usize, RoundError> {
        let cited: Vec<String> = package
            .injected(with_long)
            .filter(|i| i.tier != Tier::Left)
            .filter(|i| crate::memory::quotes(answer, &i.scored.item.content))
            .map(|i| i.scored.item.item_id.clone())
            .collect();
        let bucket = round.header().bucket_id.clone();
        match self
            .memory
            .reference(&bucket, &cited, Signal::Citation, now)
        {
            Ok(found) => {
                self.record_referenced(round, &bucket, Signal::Citation, None, &found)?;
                Ok(cited.len())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// An operator's write (`caal bucket`, or the API), recorded as a round
    /// of the `operator` conversation, in that bucket, on `channel`.
    pub fn operator_memory(
        &self,
        bucket: &BucketId,
        write: OperatorWrite,
        channel: Channel,
    ) -> Result<OperatorOutcome, OperatorError> {
        let now = self.clock.now_ms();
        let said = match &write {
            OperatorWrite::Add { content, pin, .. } => format!(
                "caal bucket add {bucket}{} {}",
                if *pin { " --pin" } else { "" },
                crate::safety::global().scrub(content)
            ),
            OperatorWrite::Pin { item_id } => format!("caal bucket pin {bucket} {item_id}"),
            OperatorWrite::Unpin { item_id } => format!("caal bucket unpin {bucket} {item_id}"),
            OperatorWrite::Forget { item_id } => format!("caal bucket forget {bucket} {item_id}"),
        };
        let (round, state) =
            self.recorded_round(OPERATOR_CONVERSATION, Some(bucket), channel, &said)?;
        let done = match write {
            OperatorWrite::Add { content, refs, pin } => {
                let metadata = ItemMetadata {
                    refs,
                    source: Some(channel.as_str().into()),
                };
                self.memory
                    .remember(bucket, &content, metadata, pin, now)
                    .map(|w| (Some(w), None))
            }
            OperatorWrite::Pin { item_id } => self
                .memory
                .set_pinned(bucket, &item_id, true, now)
                .map(|w| (Some(w), None)),
            OperatorWrite::Unpin { item_id } => self
                .memory
                .set_pinned(bucket, &item_id, false, now)
                .map(|w| (Some(w), None)),
            OperatorWrite::Forget { item_id } => self
                .memory
                .forget(bucket, &item_id, now)
                .map(|item| (None, Some(item))),
        };
        let (written, forgotten) = match done {
            Ok(d) => d,
            Err(e) => {
                let code = match &e {
                    MemoryError::NoSuchItem { .. } => "memory.no_such_item",
                    MemoryError::Store(_) => "memory.store",
                    _ => "memory.invalid",
                };
                round.append(
                    EventDraft::new(OutputEmitted {
                        text: e.to_string(),
                        channel: channel.as_str().into(),
                        was_escalated: None,
                    })
                    .with_status(EventStatus::Failed),
                )?;
                round.fail(code, &e.to_string())?;
                return Err(e.into());
            }
        };
        let outcome = match (written, forgotten) {
            (Some(w), _) => {
                self.record_written(&round, &w, channel.as_str())?;
                OperatorOutcome {
                    round_id: round.header().round_id.to_string(),
                    bucket_id: bucket.to_string(),
                    item_id: w.item.item_id.clone(),
                    op: w.op.as_str().into(),
                    pinned: w.item.pinned,
                    redacted_kinds: w.redacted,
                }
            }
            (None, Some(item)) => {
                round.append(EventDraft::new(MemoryForgotten {
                    bucket_id: bucket.to_string(),
                    item_id: item.item_id.clone(),
                    reason: "forgotten by the operator".into(),
                    was_pinned: item.pinned,
                    source: channel.as_str().into(),
                }))?;
                OperatorOutcome {
                    round_id: round.header().round_id.to_string(),
                    bucket_id: bucket.to_string(),
                    item_id: item.item_id,
                    op: "forget".into(),
                    pinned: false,
                    redacted_kinds: Vec::new(),
                }
            }
            (None, None) => unreachable!("every operator write writes or forgets"),
        };
        round.append(EventDraft::new(OutputEmitted {
            text: format!("{} {}", outcome.op, outcome.item_id),
            channel: channel.as_str().into(),
            was_escalated: None,
        }))?;
        round.complete(&state)?;
        Ok(outcome)
    }
}
