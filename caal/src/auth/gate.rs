//! The authority gate: what one utterance does to a conversation's pending
//! confirmation. Pure: no clock, no storage; the engine persists what it returns.
//!
//! A "yes" or "no" answers a confirmation only when it comes from the door
//! and client that raised it (or from the operator on the page, by the
//! confirmation's id); a "yes" counts only when it was sent after the
//! question was given out, after what the client last heard was that
//! question (where its door shows it), and, from an agent (MCP), only when
//! the door's policy lets agents confirm. Otherwise the confirmation waits
//! on as it was, and the round says why.

use serde::{Deserialize, Serialize};

use super::{
    CommandChain, StoredChain, confirmation_prompt,
    origin::{Client, Door, DoorPolicy, Origin},
};

/// A governed chain waiting for confirmations in one conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub confirmation_id: String,
    pub chain: StoredChain,
    pub required: u8,
    pub received: u8,
    pub prompt: String,
    pub requested_at_ms: i64,
    pub expires_at_ms: i64,
    /// The round that asked last; a confirmation must come from a later one.
    pub asked_in_round: i64,
    /// Who asked: only this door and client (or the operator on the page)
    /// may answer. None in confirmations recorded before doors had names.
    #[serde(default)]
    pub raised_by: Option<Client>,
    /// When the question was given out (the end of the round that asked
    /// last): a "yes" that arrived earlier was not said to it.
    #[serde(default)]
    pub asked_at_ms: i64,
}

/// What the person said, as far as authority is concerned.
#[derive(Clone, Copy, Debug)]
pub enum Utterance<'a> {
    /// A command or chain to run.
    Chain(&'a CommandChain),
    Confirm,
    Deny,
    /// Anything else (chat, undo, a question, an ambiguity, invalid parameters).
    Other,
}

/// Why a "yes" or "no" did not answer the pending confirmation; it waits on as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// Another door or client asked for it; only that one (or the operator
    /// on the page) answers it.
    OtherClient,
    /// An agent may not confirm (`[doors] agents_confirm`, off by default).
    AgentMayNotConfirm,
    /// The "yes" was sent before the question was given out.
    BeforeAsked,
    /// What the client shows it heard last is not the question.
    NotHeard,
    /// The second "yes" of a level-4 chain was said over its restatement,
    /// which stopped before it was heard out.
    Interrupted,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::OtherClient => "other_client",
            Refusal::AgentMayNotConfirm => "agent_may_not_confirm",
            Refusal::BeforeAsked => "before_asked",
            Refusal::NotHeard => "not_heard",
            Refusal::Interrupted => "interrupted",
        }
    }
}

/// How a pending confirmation ended in this round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// A "yes" counted (the chain may still need another).
    Confirmed,
    Denied,
    /// Its time ran out before this round.
    Expired,
    /// The person moved on to something else.
    Superseded,
}

impl Resolution {
    pub fn accepted(self) -> bool {
        self == Resolution::Confirmed
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum GateAction {
    /// Run the chain now; `confirmations` were received for it.
    Execute { chain_level_confirmations: u8 },
    /// Ask (again): the new pending confirmation is in `GateOutcome::pending`.
    Ask,
    /// A "no" cancelled the pending chain.
    Cancelled,
    /// "yes" or "no" with nothing to confirm; `expired` if it came too late.
    NothingToConfirm { expired: bool },
    /// Not a matter of authority: route the utterance as usual.
    Proceed,
    /// A "yes" or "no" that does not answer the pending confirmation (see
    /// [`Refusal`]); the confirmation stays as it was.
    Refused(Refusal),
}

#[derive(Clone, Debug, PartialEq)]
pub struct GateOutcome {
    /// The previously pending confirmation, if this round resolved it or counted a "yes".
    pub resolved: Option<(Pending, Resolution)>,
    pub action: GateAction,
    /// What is pending after this round (with `Refused`, the one that was).
    pub pending: Option<Pending>,
}

/// The round being gated: its number, the time, how long a prompt waits,
/// who said it and what their door allows.
#[derive(Clone, Debug)]
pub struct Gating {
    pub round_seq: i64,
    pub now_ms: i64,
    pub ttl_ms: i64,
    pub from: Origin,
    pub policy: DoorPolicy,
}

/// Why `from` may not answer `p` with a yes (`confirm`) or a no.
fn refusal(p: &Pending, confirm: bool, at: &Gating) -> Option<Refusal> {
    let from = &at.from;
    let raiser = p.raised_by.as_ref();
    if from.door() != Door::Ui && raiser.is_some_and(|c| *c != from.client) {
        return Some(Refusal::OtherClient);
    }
    if !confirm {
        return None;
    }
    if from.door() == Door::Mcp && !at.policy.agents_confirm {
        return Some(Refusal::AgentMayNotConfirm);
    }
    if from.arrived_ms < p.asked_at_ms {
        return Some(Refusal::BeforeAsked);
    }
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    if from
        .heard
        .as_deref()
        .is_some_and(|h| words(h) != words(&p.prompt))
    {
        return Some(Refusal::NotHeard);
    }
    // A level-4 restatement is heard out before its "yes" counts; a first
    // question may be answered over ("Turn on all the lights? Say y–" "yes").
    if p.received >= 1
        && from
            .interrupted
            .as_ref()
            .is_some_and(|i| i.round_seq == Some(p.asked_in_round))
    {
        return Some(Refusal::Interrupted);
    }
    None
}

/// Decides one round; `new_id` names a new confirmation.
pub fn gate(
    pending: Option<&Pending>,
    utterance: Utterance<'_>,
    at: &Gating,
    new_id: impl FnOnce() -> String,
) -> GateOutcome {
    let (round_seq, now_ms, ttl_ms) = (at.round_seq, at.now_ms, at.ttl_ms);
    // A confirmation from the round that asked would not be a separate round.
    let pending = pending.filter(|p| p.asked_in_round < round_seq);
    let (live, expired) = match pending {
        Some(p) if now_ms >= p.expires_at_ms => (None, Some(p.clone())),
        other => (other, None),
    };
    let mut resolved = expired.map(|p| (p, Resolution::Expired));

    let ask = |chain: &CommandChain| {
        let required = chain.chain_level.confirmations_required();
        Pending {
            confirmation_id: new_id(),
            chain: chain.stored(),
            required,
            received: 0,
            prompt: confirmation_prompt(&chain.summary, required, 0),
            requested_at_ms: now_ms,
            expires_at_ms: now_ms + ttl_ms,
            asked_in_round: round_seq,
            raised_by: Some(at.from.client.clone()),
            asked_at_ms: now_ms,
        }
    };

    if let (Utterance::Confirm | Utterance::Deny, Some(p)) = (utterance, live)
        && let Some(why) = refusal(p, matches!(utterance, Utterance::Confirm), at)
    {
        return GateOutcome {
            resolved: None,
            action: GateAction::Refused(why),
            pending: Some(p.clone()),
        };
    }
    match (utterance, live) {
        (Utterance::Confirm, Some(p)) => {
            let received = p.received + 1;
            resolved = Some((p.clone(), Resolution::Confirmed));
            if received >= p.required {
                GateOutcome {
                    resolved,
                    action: GateAction::Execute {
                        chain_level_confirmations: received,
                    },
                    pending: None,
                }
            } else {
                let next = Pending {
                    received,
                    prompt: confirmation_prompt(&p.chain.summary, p.required, received),
                    expires_at_ms: now_ms + ttl_ms,
                    asked_in_round: round_seq,
                    asked_at_ms: now_ms,
                    ..p.clone()
                };
                GateOutcome {
                    resolved,
                    action: GateAction::Ask,
                    pending: Some(next),
                }
            }
        }
        (Utterance::Deny, Some(p)) => GateOutcome {
            resolved: Some((p.clone(), Resolution::Denied)),
            action: GateAction::Cancelled,
            pending: None,
        },
        (Utterance::Confirm | Utterance::Deny, None) => {
            let expired = resolved.is_some();
            GateOutcome {
                resolved,
                action: GateAction::NothingToConfirm { expired },
                pending: None,
            }
        }
        (Utterance::Chain(chain), live) => {
            if let Some(p) = live {
                resolved = Some((p.clone(), Resolution::Superseded));
            }
            if chain.chain_level.confirmations_required() == 0 {
                GateOutcome {
                    resolved,
                    action: GateAction::Execute {
                        chain_level_confirmations: 0,
                    },
                    pending: None,
                }
            } else {
                GateOutcome {
                    resolved,
                    action: GateAction::Ask,
                    pending: Some(ask(chain)),
                }
            }
        }
        (Utterance::Other, live) => {
            if let Some(p) = live {
                resolved = Some((p.clone(), Resolution::Superseded));
            }
            GateOutcome {
                resolved,
                action: GateAction::Proceed,
                pending: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;

    use super::*;
    use crate::auth::{AuthLevel, Command};

    fn command(id: &str, level: u8) -> Command {
        Command {
            command_id: id.into(),
            auth_level: AuthLevel::new(level).unwrap(),
            summary: id.into(),
            params: BTreeMap::new(),
            raw_params: BTreeMap::new(),
            source_rule: None,
            decision: None,
        }
    }

    fn chain(levels: &[u8]) -> CommandChain {
        CommandChain::new(
            levels
                .iter()
                .enumerate()
                .map(|(i, l)| command(&format!("c{i}.l{l}"), *l))
                .collect(),
            None,
            None,
        )
    }

    const TTL: i64 = 60_000;

    /// Round `round_seq` at `now`, said at once by the test's own client.
    fn at(round_seq: i64, now_ms: i64) -> Gating {
        by(Client::new(Door::Local, "test"), round_seq, now_ms)
    }

    fn by(client: Client, round_seq: i64, now_ms: i64) -> Gating {
        Gating {
            round_seq,
            now_ms,
            ttl_ms: TTL,
            from: Origin::new(client, now_ms),
            policy: DoorPolicy::default(),
        }
    }

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("k{n}")
        }
    }

    #[test]
    fn level_three_runs_after_one_yes_in_a_later_round() {
        let c = chain(&[3]);
        let mut id = ids();
        let asked = gate(None, Utterance::Chain(&c), &at(1, 0), &mut id);
        assert_eq!(asked.action, GateAction::Ask);
        let p = asked.pending.unwrap();
        assert_eq!((p.required, p.received), (1, 0));
        // The same round cannot confirm itself.
        let same = gate(Some(&p), Utterance::Confirm, &at(1, 10), &mut id);
        assert_eq!(same.action, GateAction::NothingToConfirm { expired: false });
        let yes = gate(Some(&p), Utterance::Confirm, &at(2, 10), &mut id);
        assert_eq!(
            yes.action,
            GateAction::Execute {
                chain_level_confirmations: 1
            }
        );
        assert_eq!(yes.resolved.unwrap().1, Resolution::Confirmed);
        assert_eq!(yes.pending, None);
    }

    #[test]
    fn level_four_needs_two_yeses_and_restates_the_action() {
        let c = chain(&[1, 4, 2]);
        assert_eq!(c.chain_level, AuthLevel::DOUBLE_CONFIRM);
        let mut id = ids();
        let p = gate(None, Utterance::Chain(&c), &at(1, 0), &mut id)
            .pending
            .unwrap();
        let first = gate(Some(&p), Utterance::Confirm, &at(2, 1_000), &mut id);
        assert_eq!(first.action, GateAction::Ask);
        let p2 = first.pending.unwrap();
        assert_eq!(p2.received, 1);
        assert!(p2.prompt.starts_with("To be sure:"), "{}", p2.prompt);
        assert_eq!(
            p2.expires_at_ms,
            1_000 + TTL,
            "each prompt gets its own time"
        );
        let second = gate(Some(&p2), Utterance::Confirm, &at(3, 2_000), &mut id);
        assert_eq!(
            second.action,
            GateAction::Execute {
                chain_level_confirmations: 2
            }
        );
    }

    #[test]
    fn expiry_denial_and_moving_on_end_a_confirmation() {
        let c = chain(&[3]);
        let mut id = ids();
        let p = gate(None, Utterance::Chain(&c), &at(1, 0), &mut id)
            .pending
            .unwrap();
        let late = gate(Some(&p), Utterance::Confirm, &at(2, TTL), &mut id);
        assert_eq!(late.action, GateAction::NothingToConfirm { expired: true });
        assert_eq!(late.resolved.unwrap().1, Resolution::Expired);
        let no = gate(Some(&p), Utterance::Deny, &at(2, 5), &mut id);
        assert_eq!(
            (no.action, no.resolved.unwrap().1),
            (GateAction::Cancelled, Resolution::Denied)
        );
        let other = gate(Some(&p), Utterance::Other, &at(2, 5), &mut id);
        assert_eq!(
            (other.action, other.resolved.unwrap().1),
            (GateAction::Proceed, Resolution::Superseded)
        );
        let l1 = chain(&[1]);
        let next = gate(Some(&p), Utterance::Chain(&l1), &at(2, 5), &mut id);
        assert_eq!(
            next.action,
            GateAction::Execute {
                chain_level_confirmations: 0
            }
        );
        assert_eq!(next.resolved.unwrap().1, Resolution::Superseded);
    }

    #[test]
    fn only_the_client_that_asked_answers_and_only_after_it_was_asked() {
        let c = chain(&[4]);
        let mut id = ids();
        let satellite = Client::new(Door::Wyoming, "192.168.1.20");
        let p = gate(
            None,
            Utterance::Chain(&c),
            &by(satellite.clone(), 1, 0),
            &mut id,
        )
        .pending
        .unwrap();
        assert_eq!(p.raised_by.as_ref(), Some(&satellite));
        // Another peer, another door: neither yes nor no counts, the
        // confirmation waits on unchanged.
        for other in [
            Client::new(Door::Wyoming, "192.168.1.66"),
            Client::new(Door::Api, "token"),
            Client::new(Door::Local, "test"),
        ] {
            for said in [Utterance::Confirm, Utterance::Deny] {
                let out = gate(Some(&p), said, &by(other.clone(), 2, 5), &mut id);
                assert_eq!(out.action, GateAction::Refused(Refusal::OtherClient));
                assert_eq!((out.resolved, out.pending.as_ref()), (None, Some(&p)));
            }
        }
        // The operator, on the page, by the confirmation's id.
        let ui = gate(
            Some(&p),
            Utterance::Confirm,
            &by(Client::new(Door::Ui, "token"), 2, 5),
            &mut id,
        );
        assert_eq!(ui.action, GateAction::Ask);
        // The asker's first yes restates; a second yes sent before the
        // restatement was given out does not count, one sent after does.
        let first = gate(
            Some(&p),
            Utterance::Confirm,
            &by(satellite.clone(), 2, 10),
            &mut id,
        );
        let restated = first.pending.unwrap();
        assert_eq!(restated.asked_at_ms, 10);
        let mut early = by(satellite.clone(), 3, 20);
        early.from.arrived_ms = 9;
        let out = gate(Some(&restated), Utterance::Confirm, &early, &mut id);
        assert_eq!(out.action, GateAction::Refused(Refusal::BeforeAsked));
        // A no sent early still cancels: it can only stop something.
        let no = gate(Some(&restated), Utterance::Deny, &early, &mut id);
        assert_eq!(no.action, GateAction::Cancelled);
        let second = gate(
            Some(&restated),
            Utterance::Confirm,
            &by(satellite.clone(), 3, 20),
            &mut id,
        );
        assert_eq!(
            second.action,
            GateAction::Execute {
                chain_level_confirmations: 2
            }
        );
    }

    #[test]
    fn a_second_yes_said_over_the_restatement_does_not_count() {
        let c = chain(&[4]);
        let mut id = ids();
        let socket = Client::new(Door::VoiceSocket, "token");
        let p = gate(
            None,
            Utterance::Chain(&c),
            &by(socket.clone(), 1, 0),
            &mut id,
        )
        .pending
        .unwrap();
        let over = |seq: i64, asked_in: i64| {
            let mut g = by(socket.clone(), seq, 20);
            g.from.interrupted = Some(crate::trace::events::Interruption {
                round_id: "r".into(),
                round_seq: Some(asked_in),
                played_ms: 300,
                reply_ms: 2_000,
                stopped_in_ms: 90.0,
            });
            g
        };
        // The first yes may be said over the question: it only restates.
        let first = gate(Some(&p), Utterance::Confirm, &over(2, 1), &mut id);
        assert_eq!(first.action, GateAction::Ask);
        let restated = first.pending.unwrap();
        // The second, said over the restatement, does not count and leaves
        // it waiting; over another round's reply, or heard out, it does.
        let out = gate(Some(&restated), Utterance::Confirm, &over(3, 2), &mut id);
        assert_eq!(out.action, GateAction::Refused(Refusal::Interrupted));
        assert_eq!(out.pending.as_ref(), Some(&restated));
        for g in [over(3, 1), by(socket.clone(), 3, 20)] {
            let out = gate(Some(&restated), Utterance::Confirm, &g, &mut id);
            assert_eq!(
                out.action,
                GateAction::Execute {
                    chain_level_confirmations: 2
                }
            );
        }
    }

    #[test]
    fn a_yes_after_something_else_or_from_an_agent_does_not_confirm() {
        let c = chain(&[3]);
        let mut id = ids();
        let thread = Client::new(Door::OpenAi, "token");
        let p = gate(
            None,
            Utterance::Chain(&c),
            &by(thread.clone(), 1, 0),
            &mut id,
        )
        .pending
        .unwrap();
        let mut elsewhere = by(thread.clone(), 2, 5);
        elsewhere.from.heard = Some("Hi! How can I help?".into());
        let out = gate(Some(&p), Utterance::Confirm, &elsewhere, &mut id);
        assert_eq!(out.action, GateAction::Refused(Refusal::NotHeard));
        let mut heard = by(thread, 2, 5);
        heard.from.heard = Some(format!(" {}\n", p.prompt));
        let out = gate(Some(&p), Utterance::Confirm, &heard, &mut id);
        assert_eq!(
            out.action,
            GateAction::Execute {
                chain_level_confirmations: 1
            }
        );

        let agent = Client::new(Door::Mcp, "session-1");
        let p = gate(
            None,
            Utterance::Chain(&c),
            &by(agent.clone(), 1, 0),
            &mut id,
        )
        .pending
        .unwrap();
        let out = gate(
            Some(&p),
            Utterance::Confirm,
            &by(agent.clone(), 2, 5),
            &mut id,
        );
        assert_eq!(out.action, GateAction::Refused(Refusal::AgentMayNotConfirm));
        let mut allowed = by(agent.clone(), 2, 5);
        allowed.policy.agents_confirm = true;
        let out = gate(Some(&p), Utterance::Confirm, &allowed, &mut id);
        assert_eq!(
            out.action,
            GateAction::Execute {
                chain_level_confirmations: 1
            }
        );
        // An agent may always say no to what it asked.
        let out = gate(Some(&p), Utterance::Deny, &by(agent, 2, 5), &mut id);
        assert_eq!(out.action, GateAction::Cancelled);
    }

    // ------------------------------------------------------------ the property

    #[derive(Clone, Debug)]
    enum Step {
        Say {
            conversation: usize,
            levels: Vec<u8>,
        },
        Yes {
            conversation: usize,
        },
        /// A yes from another client of the same conversation.
        YesElsewhere {
            conversation: usize,
        },
        /// A yes sent before the question it would answer was given out.
        YesEarly {
            conversation: usize,
        },
        No {
            conversation: usize,
        },
        Chat {
            conversation: usize,
        },
        Wait {
            ms: i64,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        let conversation = 0usize..3;
        prop_oneof![
            3 => (conversation.clone(), prop::collection::vec(1u8..=4, 1..4)).prop_map(|(conversation, levels)| Step::Say { conversation, levels }),
            4 => conversation.clone().prop_map(|conversation| Step::Yes { conversation }),
            1 => conversation.clone().prop_map(|conversation| Step::YesElsewhere { conversation }),
            1 => conversation.clone().prop_map(|conversation| Step::YesEarly { conversation }),
            1 => conversation.clone().prop_map(|conversation| Step::No { conversation }),
            1 => conversation.prop_map(|conversation| Step::Chat { conversation }),
            1 => prop_oneof![Just(1_000i64), Just(30_000), Just(59_999), Just(60_000), Just(120_000)].prop_map(|ms| Step::Wait { ms }),
        ]
    }

    /// An independent oracle: per conversation, the chain last asked about and
    /// the "yes" rounds said since, each before its prompt's deadline.
    #[derive(Default, Clone)]
    struct Oracle {
        asked: Option<(String, u8, u8)>, // chain_id, level, yeses counted
        deadline: i64,
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 100_000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Over random utterance sequences across conversations: no level-3
        /// chain runs without a confirmation, no level-4 chain without two (in
        /// separate rounds), nothing runs after expiry, denial or moving on,
        /// and a chain is gated at its highest level.
        #[test]
        fn no_governed_execution_without_its_confirmations(steps in prop::collection::vec(step(), 1..24)) {
            let mut pending: HashMap<usize, Pending> = HashMap::new();
            let mut oracle: HashMap<usize, Oracle> = HashMap::new();
            let mut round_seq: HashMap<usize, i64> = HashMap::new();
            let mut now = 0i64;
            let mut id = ids();
            for step in steps {
                let mut at = at(0, now);
                let (conversation, utterance_chain, utterance) = match &step {
                    Step::Wait { ms } => { now += ms; continue; }
                    Step::YesElsewhere { conversation } => {
                        at.from.client = Client::new(Door::Wyoming, "192.168.1.66");
                        (*conversation, None, Some(Utterance::Confirm))
                    }
                    Step::YesEarly { conversation } => {
                        at.from.arrived_ms = pending.get(conversation).map_or(now, |p| p.asked_at_ms - 1);
                        (*conversation, None, Some(Utterance::Confirm))
                    }
                    Step::Say { conversation, levels } => (*conversation, Some(chain(levels)), None),
                    Step::Yes { conversation } => (*conversation, None, Some(Utterance::Confirm)),
                    Step::No { conversation } => (*conversation, None, Some(Utterance::Deny)),
                    Step::Chat { conversation } => (*conversation, None, Some(Utterance::Other)),
                };
                let seq = round_seq.entry(conversation).or_insert(0);
                *seq += 1;
                let utterance = utterance.unwrap_or_else(|| Utterance::Chain(utterance_chain.as_ref().unwrap()));
                at.round_seq = *seq;
                let out = gate(pending.get(&conversation), utterance, &at, &mut id);
                let o = oracle.entry(conversation).or_default();

                // What the oracle allows.
                match (&step, &out.action) {
                    (Step::Say { levels, .. }, GateAction::Execute { chain_level_confirmations }) => {
                        let max = *levels.iter().max().unwrap();
                        prop_assert!(max <= 2, "a level-{max} chain ran on being asked");
                        prop_assert_eq!(*chain_level_confirmations, 0);
                        o.asked = None;
                    }
                    (Step::Say { levels, .. }, GateAction::Ask) => {
                        let max = *levels.iter().max().unwrap();
                        prop_assert!(max >= 3, "a level-{max} chain asked for confirmation");
                        let p = out.pending.as_ref().unwrap();
                        prop_assert_eq!(p.required, if max == 4 { 2 } else { 1 }, "gated at the highest level");
                        o.asked = Some((p.chain.chain_id.clone(), max, 0));
                        o.deadline = now + TTL;
                    }
                    (Step::Yes { .. }, GateAction::Execute { chain_level_confirmations }) => {
                        let (chain_id, level, yeses) = o.asked.clone().expect("ran with nothing asked");
                        prop_assert!(now < o.deadline, "ran after expiry");
                        let yeses = yeses + 1;
                        let required = if level == 4 { 2 } else { 1 };
                        prop_assert_eq!(yeses, required, "ran with the wrong number of confirmations");
                        prop_assert_eq!(*chain_level_confirmations, required);
                        prop_assert_eq!(&out.resolved.as_ref().unwrap().0.chain.chain_id, &chain_id);
                        o.asked = None;
                    }
                    (Step::Yes { .. }, GateAction::Ask) => {
                        let (chain_id, level, yeses) = o.asked.clone().expect("asked again with nothing asked");
                        prop_assert!(now < o.deadline, "counted a yes after expiry");
                        prop_assert_eq!(level, 4, "only level 4 asks twice");
                        prop_assert_eq!(yeses, 0);
                        o.asked = Some((chain_id, level, 1));
                        o.deadline = now + TTL;
                    }
                    (Step::Yes { .. } | Step::No { .. }, GateAction::NothingToConfirm { .. }) => {
                        prop_assert!(o.asked.is_none() || now >= o.deadline, "a live confirmation was ignored");
                        o.asked = None;
                    }
                    (Step::No { .. }, GateAction::Cancelled) => {
                        prop_assert!(o.asked.is_some() && now < o.deadline);
                        o.asked = None;
                    }
                    (Step::Chat { .. }, GateAction::Proceed) => o.asked = None,
                    (Step::YesElsewhere { .. } | Step::YesEarly { .. }, GateAction::Refused(_)) => {
                        prop_assert!(o.asked.is_some() && now < o.deadline, "refused with nothing live");
                        prop_assert!(out.resolved.is_none());
                    }
                    (Step::YesElsewhere { .. } | Step::YesEarly { .. }, GateAction::NothingToConfirm { .. }) => {
                        prop_assert!(o.asked.is_none() || now >= o.deadline, "a live confirmation was ignored");
                        o.asked = None;
                    }
                    (step, action) => prop_assert!(false, "unexpected {action:?} for {step:?}"),
                }
                match out.pending {
                    Some(p) => { pending.insert(conversation, p); }
                    None => { pending.remove(&conversation); }
                }
            }
        }
    }
}
