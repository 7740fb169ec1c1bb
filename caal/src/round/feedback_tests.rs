//! Feedback said in a conversation and given by round id: each a
//! `feedback.recorded` event in the judged round's conversation's chain.

use super::tests::Home;
use super::{Channel, FeedbackError};
use crate::config::Verdict;

#[test]
fn what_is_said_of_the_round_before_is_recorded_against_it() {
    let home = Home::new();
    let first = home.say("c", "turn on the kitchen lights");
    for (said, verdict) in [
        ("no, that's not what I meant", "bad"),
        ("That was wrong.", "bad"),
        ("you misheard me", "bad"),
        ("good job", "good"),
        ("that's exactly what I wanted", "good"),
    ] {
        let r = home.say("c", said);
        assert_eq!(r.route_code, super::FEEDBACK_ROUTE, "{said:?}: {r:?}");
        // Nothing ran, and the lights were not touched again.
        assert!(r.commands.is_empty(), "{said:?}");
        let recorded = home.of_type("c", "feedback.recorded");
        let last = recorded.last().unwrap();
        // Each judges the request, never the feedback round before it.
        assert_eq!(last["round_id"], first.round_id.as_str(), "{said:?}");
        assert_eq!(last["round_seq"], first.round_seq);
        assert_eq!(last["verdict"], verdict, "{said:?}");
        assert_eq!(last["code"], format!("feedback.{verdict}"));
        assert_eq!(last["by"], "said");
    }
    assert_eq!(home.executed("c", "lights.set"), 1);
    // Words about lights that merely contain "wrong" are no verdict.
    let r = home.say("c", "what's wrong with the kitchen lights");
    assert_ne!(r.route_code, super::FEEDBACK_ROUTE);
    // A conversation with nothing before: nothing to judge, nothing recorded.
    let alone = home.say("fresh", "that was wrong");
    assert_eq!(
        alone.reply,
        "There's nothing before this for me to learn from."
    );
    assert!(home.of_type("fresh", "feedback.recorded").is_empty());
    assert!(home.engine.store().reader().verify(None).unwrap().ok);
}

#[test]
fn feedback_by_round_id_lands_in_that_rounds_conversation_scrubbed() {
    let home = Home::new();
    let judged = home.say("kitchen", "add eggs to the shopping list");
    let done = home
        .engine
        .feedback(
            &judged.round_id,
            Verdict::Bad,
            Some("I said legs; my key is AKIAIOSFODNN7EXAMPLE"),
            Channel::Cli,
        )
        .unwrap();
    assert_eq!(done.conversation_id, "kitchen");
    assert_eq!(done.judged_round_id, judged.round_id);
    let recorded = home.of_type("kitchen", "feedback.recorded");
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0]["by"], "cli");
    let note = recorded[0]["note"].as_str().unwrap();
    assert!(
        note.starts_with("I said legs; my key is secret_ref:aws_access_key_id:"),
        "{note}"
    );
    // The verdict is found from the round it judges.
    let on = home
        .engine
        .store()
        .reader()
        .feedback_on(&judged.round_id)
        .unwrap();
    assert_eq!(
        (on.len(), on[0].round_id.as_str()),
        (1, done.round_id.as_str())
    );
    let verdicts = home.engine.store().reader().verdicts().unwrap();
    assert_eq!(
        verdicts.get(&judged.round_id).map(String::as_str),
        Some("bad")
    );
    // A later verdict stands.
    home.engine
        .feedback(&judged.round_id, Verdict::Good, None, Channel::Ui)
        .unwrap();
    let verdicts = home.engine.store().reader().verdicts().unwrap();
    assert_eq!(
        verdicts.get(&judged.round_id).map(String::as_str),
        Some("good")
    );

    // No such round, or a round that is itself feedback: refused, nothing recorded.
    let before = home.events("kitchen").len();
    assert!(matches!(
        home.engine.feedback(
            "01a20d6a-0000-7000-8000-000000000000",
            Verdict::Bad,
            None,
            Channel::Api
        ),
        Err(FeedbackError::NoSuchRound(_))
    ));
    assert!(matches!(
        home.engine
            .feedback(&done.round_id, Verdict::Bad, None, Channel::Api),
        Err(FeedbackError::OnFeedback(_))
    ));
    assert_eq!(home.events("kitchen").len(), before);
}
