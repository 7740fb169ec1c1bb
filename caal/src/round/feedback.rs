//! Feedback: a person says a round was wrong ("that was wrong", "that's not
//! what I meant") or right ("good job"), in conversation, on the page
//! (👍/👎 with a note), through the API or with `caal feedback`. Each is a
//! `feedback.recorded` event in the chain of the judged round's
//! conversation, naming that round; the training export reads it
//! (`--only good`, `--negatives`).

use serde::Serialize;

use super::{Channel, Engine, RoundError, Steps};
use crate::{
    config::Verdict,
    ids::ConversationId,
    trace::{EventDraft, OpenRound, StoreError, events::FeedbackRecorded},
};

pub use crate::trace::events::FEEDBACK_ROUTE;

/// What `Engine::feedback` recorded.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FeedbackOutcome {
    /// The round that carries the verdict (in the judged round's conversation).
    pub round_id: String,
    pub judged_round_id: String,
    pub conversation_id: String,
    pub verdict: Verdict,
}

/// Why feedback was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum FeedbackError {
    #[error("there is no round {0}; `caal trace list` shows the rounds there are")]
    NoSuchRound(String),
    #[error("round {0} is itself feedback; judge the round it is about")]
    OnFeedback(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn payload(
    verdict: Verdict,
    round_id: &str,
    round_seq: i64,
    by: &str,
    note: Option<&str>,
) -> FeedbackRecorded {
    let note = note.map(str::trim).filter(|n| !n.is_empty()).map(|n| {
        crate::safety::global()
            .scrub(n)
            .chars()
            .take(2000)
            .collect()
    });
    FeedbackRecorded {
        code: format!("feedback.{}", verdict.as_str()),
        verdict: verdict.as_str().into(),
        round_id: round_id.into(),
        round_seq,
        by: by.into(),
        note,
    }
}

impl Engine {
    /// A verdict on a round by its id, from outside the conversation (the
    /// page, the API, the CLI, MCP): a round of its own in that round's
    /// conversation, on `channel`.
    pub fn feedback(
        &self,
        round_id: &str,
        verdict: Verdict,
        note: Option<&str>,
        channel: Channel,
    ) -> Result<FeedbackOutcome, FeedbackError> {
        let Some((judged, events)) = self.store.reader().round(round_id)? else {
            return Err(FeedbackError::NoSuchRound(round_id.into()));
        };
        if events.iter().any(|e| e.event_type == "feedback.recorded") {
            return Err(FeedbackError::OnFeedback(round_id.into()));
        }
        let event = payload(
            verdict,
            &judged.round_id,
            judged.round_seq,
            channel.as_str(),
            note,
        );
        let said = format!(
            "caal feedback {round_id} {}{}",
            verdict.as_str(),
            event
                .note
                .as_ref()
                .map(|n| format!(" --note {n:?}"))
                .unwrap_or_default()
        );
        let text = match verdict {
            Verdict::Good => "Noted: that round was right.",
            Verdict::Bad => "Noted: that round was wrong.",
        };
        let feedback_round = self.announce(
            &judged.conversation_id,
            channel,
            &said,
            EventDraft::new(event),
            text,
        )?;
        Ok(FeedbackOutcome {
            round_id: feedback_round,
            judged_round_id: judged.round_id,
            conversation_id: judged.conversation_id,
            verdict,
        })
    }

    /// "That was wrong" said in a conversation: the verdict on the round
    /// before this one (not itself feedback), recorded in this round.
    pub(super) fn said_feedback(
        &self,
        round: &OpenRound,
        verdict: Verdict,
        said: &str,
    ) -> Result<Steps, RoundError> {
        let header = round.header();
        let judged = self.round_before(&header.conversation_id, header.round_seq)?;
        let Some(judged) = judged else {
            return Ok(Steps::reply(
                "There's nothing before this for me to learn from.",
            ));
        };
        let note = (verdict == Verdict::Bad).then_some(said);
        round.append(EventDraft::new(payload(
            verdict, &judged.0, judged.1, "said", note,
        )))?;
        Ok(Steps::reply(match verdict {
            Verdict::Good => "Thanks, I've noted that.",
            Verdict::Bad => {
                "Sorry about that. I've noted it was wrong; you can say it another way."
            }
        }))
    }

    /// The newest round of a conversation before `seq` that is not feedback.
    fn round_before(
        &self,
        conversation: &ConversationId,
        seq: i64,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let (page, _) = self
            .store
            .reader()
            .rounds_page(conversation, Some(seq), 20)?;
        Ok(page
            .into_iter()
            .rev()
            .find(|r| {
                r.route_code.as_deref() != Some(FEEDBACK_ROUTE)
                    && !r
                        .input
                        .as_deref()
                        .is_some_and(|i| i.starts_with("caal feedback "))
            })
            .map(|r| (r.round.round_id, r.round.round_seq)))
    }
}
