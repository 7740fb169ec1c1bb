//! The stages of a round, in the order `Engine::run_steps` calls them:
//! **screen** (secrets out, the sanitizer, normalisation, incoherent input),
//! **route** (rules, templates, meanings; a model narrows an unsure meaning),
//! **consult the model** (a question or a request no layer understood),
//! **authorize** (the gate: a chain, a confirmation, a denial), **act** (run
//! the chain, ask, cancel, or answer), **emit** (the reasoning update and the
//! reply). Each takes what the one before decided and returns what it
//! decided; each appends its events as it goes. What they come to
//! ([`Outcome`]) is turned into the round's result once, at its end.

use super::RoundError;
use serde_json::{Value, json};

use super::{
    Channel, CommandRun, Engine, OverrideReason, Steps, VoiceInput, jobs,
    reasoning::{self, Source},
    think::{LlmSummary, RetryNote},
};
use crate::{
    auth::{
        self, CommandChain, DoorPolicy, GateAction, GateOutcome, Gating, Origin, Pending, Refusal,
        Resolution, Utterance, boundary::PendingChange,
    },
    config::RouteType,
    reasoning::{Phase, RoundReasoning, Step, ToolDecision},
    retry::Incoherence,
    router::{Bars, Hearing, Intent, RouteDecision, normalize},
    state::rfc3339_ms,
    trace::{
        EventDraft, EventStatus, OpenRound,
        events::{
            ConfirmReceived, ConfirmRequested, Heard, InputNormalized, InputReceived,
            OutputEmitted, RouteSelected, SafetyChecked, SafetyRedacted, StatePolicy, ValidatorRan,
            name_of,
        },
    },
};

/// What the screen leaves of what was said.
pub(super) struct Screened {
    /// Secrets replaced and the sanitizer's changes made: what is routed,
    /// asked of a model, remembered.
    pub text: String,
    pub normalized: String,
    /// Why the input carries no request, when it carries none.
    pub incoherent: Option<Incoherence>,
}

/// How the round was decided, as its result reports it.
#[derive(Clone, Debug)]
pub(super) struct Decided {
    pub route_code: String,
    pub source_rule: Option<String>,
    pub command_id: Option<String>,
    pub auth_level: u8,
}

impl Decided {
    fn of(d: &RouteDecision) -> Self {
        Self {
            route_code: d.route_code.clone(),
            source_rule: d.source_rule.clone(),
            command_id: d.command_id.clone(),
            auth_level: d.auth_level.get(),
        }
    }

    fn chain(self, chain: &CommandChain) -> Self {
        Self {
            command_id: chain.command_id().map(str::to_owned),
            auth_level: chain.chain_level.get(),
            ..self
        }
    }
}

/// The route stage's decision, carried through the stages after it.
pub(super) struct Routed {
    pub decision: RouteDecision,
    pub decided: Decided,
}

/// What asking the model came to (nothing, when no model was asked).
#[derive(Default)]
pub(super) struct Considered {
    pub llm: Option<LlmSummary>,
    pub retries: Vec<RetryNote>,
    /// What the model said alongside its tool calls.
    pub narrative: Option<String>,
    /// Tool calls the reasoning policy refused.
    pub decisions: Vec<ToolDecision>,
}

/// What the act stage did.
pub(super) struct Acted {
    pub steps: Steps,
    pub decided: Decided,
    pub decisions: Vec<ToolDecision>,
}

/// What a round came to, turned into its result once.
pub(super) struct Outcome {
    pub steps: Steps,
    pub decided: Decided,
    pub llm: Option<LlmSummary>,
    /// The model's retries, then the steps' own.
    pub retries: Vec<RetryNote>,
    pub reasoning: Option<RoundReasoning>,
}

impl Engine {
    /// Screen: secrets are replaced before the text is stored, routed or
    /// sent; the sanitizer's checks are recorded; the text is normalised.
    pub(super) fn screen(
        &self,
        round: &OpenRound,
        said: &str,
        channel: Channel,
        origin: &Origin,
        voice: Option<&VoiceInput>,
    ) -> Result<Screened, RoundError> {
        let said_chars = said.chars().count();
        let (text, kinds) = crate::safety::global().scrub_counted(said);
        let mut received = InputReceived {
            raw_text: text.to_string(),
            channel: channel.as_str().into(),
            door: Some(origin.door().as_str().into()),
            client: Some(scrubbed(&origin.client.id)),
            area: origin.area.clone(),
            arrived_at: Some(rfc3339_ms(origin.arrived_ms)),
            interrupted: origin.interrupted.clone(),
            ..InputReceived::default()
        };
        if let Some(v) = voice {
            // The audio's hash goes into the chain with what was heard.
            received.audio_id = Some(v.audio_id.to_string());
            received.audio_sha256 = Some(v.audio_sha256.clone());
            received.transcript = Some(Heard {
                model: v.transcript.model.clone(),
                language: v.transcript.language.clone(),
                confidence: v.transcript.confidence,
                least: v.transcript.least,
                audio_ms: v.transcript.audio_ms,
                stt_ms: v.transcript.stt_ms,
                // The words are the transcript's: kept only if it held no secret.
                words: if kinds.is_empty() {
                    v.transcript.words.clone()
                } else {
                    Vec::new()
                },
            });
        }
        round.append(EventDraft::new(received))?;
        if !kinds.is_empty() {
            let mut distinct = kinds.clone();
            distinct.sort_unstable();
            distinct.dedup();
            round.append(EventDraft::new(SafetyRedacted {
                count: kinds.len() as u64,
                kinds: distinct.iter().map(ToString::to_string).collect(),
                field: "input".into(),
            }))?;
        }
        let (text, decisions) = self.sanitizer.check(&text);
        for d in &decisions {
            round.append(EventDraft::new(SafetyChecked {
                check: d.check.into(),
                action: name_of(&d.action),
                rules: d.rules.iter().map(ToString::to_string).collect(),
                message: d.message.clone(),
                field: "input".into(),
                needs_review: d.action == crate::safety::Action::Review,
            }))?;
        }
        let normalized = normalize(&text);
        round.append(EventDraft::new(InputNormalized {
            normalized_text: normalized.clone(),
        }))?;
        let incoherent =
            crate::retry::absurd_length(said_chars, self.config.safety.max_input_chars)
                .or_else(|| crate::retry::incoherence(&text));
        Ok(Screened {
            text: text.into_owned(),
            normalized,
            incoherent,
        })
    }

    /// Input that carries no request is asked for again, not routed; it
    /// changes nothing, so a confirmation waiting for a "yes" still waits.
    pub(super) fn ask_again(
        &self,
        round: &OpenRound,
        incoherent: &Incoherence,
        state_in: &str,
    ) -> Result<(Steps, Decided), RoundError> {
        round.append(
            EventDraft::new(ValidatorRan {
                validator_id: "incoherent_input".into(),
                code: incoherent.code.to_string(),
                status: "retry".into(),
                message: incoherent.message.to_string(),
                ..ValidatorRan::default()
            })
            .with_status(EventStatus::Failed),
        )?;
        round.append(EventDraft::new(RouteSelected {
            route_code: "intent.incoherent".into(),
            auth_level: 1,
            params: json!({}),
            state: state_in.into(),
            ..RouteSelected::default()
        }))?;
        let decided = Decided {
            route_code: "intent.incoherent".into(),
            source_rule: None,
            command_id: None,
            auth_level: 1,
        };
        Ok((Steps::reply(crate::retry::REPEAT_PLEASE), decided))
    }

    /// The conversation's last `limit` rounds before this one said within
    /// `window_ms` of it, oldest first.
    fn recent_rounds(
        &self,
        round: &OpenRound,
        limit: usize,
        window_ms: i64,
    ) -> Result<Vec<crate::trace::RoundSummary>, RoundError> {
        let header = round.header();
        let rounds = self
            .store
            .reader()
            .rounds(Some(&header.conversation_id), limit)?;
        let current = header.round_id.to_string();
        // Both instants are the trace's own (the engine's clock may be a test's).
        let at = |stamp: &str| stamp.parse::<jiff::Timestamp>().map(|t| t.as_millisecond());
        let now = at(&header.created_at).unwrap_or(i64::MAX);
        Ok(rounds
            .into_iter()
            .filter(|r| r.round.round_id != current)
            .filter(|r| at(&r.round.created_at).is_ok_and(|t| now - t <= window_ms))
            .collect())
    }

    /// The conversation's requests of the last few rounds before this one,
    /// oldest first, said within `EARLIER_WINDOW_MS`: what "turn them off" or
    /// "is it locked?" points back at.
    fn earlier_requests(&self, round: &OpenRound) -> Result<Vec<String>, RoundError> {
        /// A request older than this is not what "it" means now.
        const EARLIER_WINDOW_MS: i64 = 10 * 60 * 1000;
        Ok(self
            .recent_rounds(round, 4, EARLIER_WINDOW_MS)?
            .into_iter()
            .filter(|r| r.route_code.as_deref() == Some("intent.command"))
            .filter_map(|r| r.input)
            .map(|text| normalize(&text))
            .collect())
    }

    /// What the conversation's round just before this one asked back
    /// (within `ASKED_WINDOW_MS`): "Which room?" about what it was asked
    /// for, or which of the requests it named was meant.
    fn asked_before(
        &self,
        round: &OpenRound,
    ) -> Result<Option<crate::understand::Asked>, RoundError> {
        /// An answer later than this is a new request.
        const ASKED_WINDOW_MS: i64 = 5 * 60 * 1000;
        let rounds = self.recent_rounds(round, 2, ASKED_WINDOW_MS)?;
        // The round just before this one, if said within the window.
        let Some(before) = rounds.into_iter().next_back() else {
            return Ok(None);
        };
        Ok(match before.route_code.as_deref() {
            Some("intent.clarify") => before
                .input
                .map(|text| crate::understand::Asked::Room(normalize(&text))),
            Some("intent.ambiguous") => {
                let events = self
                    .store
                    .reader()
                    .round(&before.round.round_id)?
                    .map(|(_, events)| events)
                    .unwrap_or_default();
                events
                    .iter()
                    .rev()
                    .find(|e| e.event_type == "route.selected")
                    .and_then(|e| {
                        let payload: serde_json::Value = serde_json::from_str(&e.payload).ok()?;
                        payload.get("candidates")?.as_array().cloned()
                    })
                    .map(|c| {
                        crate::understand::Asked::Choice(
                            c.iter()
                                .filter_map(|v| Some(normalize(v.as_str()?)))
                                .collect(),
                        )
                    })
            }
            _ => None,
        })
    }

    /// Route: the router's layers decide; what was heard below the voice
    /// bar is not guessed at; an unsure meaning is narrowed by a model.
    pub(super) fn route(
        &self,
        round: &OpenRound,
        screened: &Screened,
        (state_in, area): (&str, Option<&str>),
        voice: Option<&VoiceInput>,
        now: i64,
    ) -> Result<Routed, RoundError> {
        // The trace is read only for a sentence that points back.
        let earlier = if self.router.points_back(&screened.normalized) {
            self.earlier_requests(round)?
        } else {
            Vec::new()
        };
        // Nor is it read for what was asked back unless a few words could answer it.
        let asked = if self.router.could_answer(&screened.normalized) {
            self.asked_before(round)?
        } else {
            None
        };
        let context = crate::understand::Context {
            area: area.map(str::to_owned),
            spoken: voice.is_some(),
            earlier,
            asked,
            listen: voice.and_then(|v| self.listening(v)),
            sure_words: voice.map(|v| {
                crate::router::sure_words(&v.transcript.words, self.config.voice.min_value_word)
            }),
            deadline: Some(
                std::time::Instant::now()
                    + std::time::Duration::from_millis(self.config.router.understand_ms.max(1)),
            ),
        };
        let mut decision = self
            .router
            .route_in(&screened.normalized, state_in, &context);
        let hearing = voice.map(|v| Hearing {
            least: v.transcript.least,
            words: &v.transcript.words,
            bars: Bars::of(&self.config.voice),
        });
        if let Some(hearing) = &hearing {
            decision = self.router.heard(decision, hearing);
            decision =
                self.router
                    .doubted(decision, (&screened.normalized, hearing.words), &context);
        }
        let policy = self.router.state(state_in);
        round.append(EventDraft::new(RouteSelected {
            state_policy: policy.map(|p| StatePolicy {
                unmatched: name_of(&p.unmatched),
                escalation: name_of(&p.escalation),
                prefer_local: p.prefer_local,
            }),
            candidates: match &decision.intent {
                Intent::Ambiguous { candidates } => Some(json!(candidates)),
                _ => None,
            },
            ..route_selected(&decision, state_in)
        }))?;
        let mut decided = Decided::of(&decision);
        // The meaning layer was not sure: a model chooses among its nearest.
        if !decision.choices.is_empty() {
            let consulted = self.consult(round, &screened.text, decision, state_in)?;
            decision = consulted.decision;
            if let Some(hearing) = &hearing {
                decision = self.router.heard(decision, hearing);
            }
            if consulted.decided {
                decided = Decided::of(&decision);
            }
        }
        if let Some(topic) = &decision.topic
            && !matches!(decision.intent, Intent::Memory { .. })
        {
            self.topic_hits(round, topic, now)?;
        }
        Ok(Routed { decision, decided })
    }

    /// Consult the model: what no layer understood goes to a model (or to
    /// the route's fallback without one); research runs beside the
    /// conversation as a job, and this round answers at once.
    pub(super) fn consult_model(
        &self,
        round: &OpenRound,
        text: &str,
        mut routed: Routed,
        state_in: &str,
    ) -> Result<(Routed, Considered), RoundError> {
        let mut considered = Considered::default();
        let Intent::Think { route, fallback } = &routed.decision.intent else {
            return Ok((routed, considered));
        };
        // Talk no layer understood, with no tier whose words may answer it:
        // CAAL says what it can do. A model is still asked where a tier of
        // `propose_with` is there and the meaning layer found commands near
        // what was said, or where a tier plans from every command
        // (`offer_all_tools_to`): it may propose one, asked first; its
        // words are not given.
        let honest = (*route == RouteType::Chat)
            .then(|| self.router.cannot_help(&routed.decision))
            .flatten()
            .filter(|_| !self.answers_in_words(state_in));
        let intent = match (&self.llm, fallback) {
            (Some(_), _) if *route == RouteType::Research => {
                self.enqueue_research(round, text, routed.decision.topic.as_deref())?;
                Intent::Reply(jobs::ACCEPTED.into())
            }
            (Some(_), _)
                if honest.is_some()
                    && routed.decision.near.as_ref().is_some_and(Vec::is_empty)
                    && !self.tiers_named(&self.config.llm.offer_all_tools_to) =>
            {
                let reply = honest.clone().unwrap_or_default();
                self.not_answered(
                    round,
                    "no command is near what was said: no model was asked",
                )?;
                Intent::Reply(reply)
            }
            (Some(_), _) => {
                let thought = self.think(
                    round,
                    text,
                    *route,
                    routed.decision.near.as_deref(),
                    state_in,
                )?;
                let tier = thought.summary.tier.clone();
                considered.llm = Some(thought.summary);
                considered.retries = thought.retries;
                considered.narrative = thought.narrative;
                self.refused(round, &thought.blocked, &mut considered.decisions)?;
                // Talk CAAL cannot act on: a command is taken only from a
                // tier named to propose one (`propose_with`, or offered
                // every command); a small model's guess is not asked about.
                let thought_intent = thought.intent;
                let dropped = honest.is_some()
                    && matches!(thought_intent, Intent::Chain(_))
                    && !tier.as_deref().is_some_and(|t| {
                        [
                            &self.config.llm.propose_with,
                            &self.config.llm.offer_all_tools_to,
                        ]
                        .iter()
                        .any(|names| names.iter().any(|n| n == t))
                    });
                if dropped {
                    if let Some(llm) = considered.llm.as_mut() {
                        llm.outcome = "withheld".into();
                    }
                    self.not_answered(
                        round,
                        "the model's command is not taken: its tier is not in [llm] propose_with",
                    )?;
                }
                if !dropped && let Intent::Chain(chain) = &thought_intent {
                    // The model chose what to do: that decision is recorded too.
                    round.append(EventDraft::new(RouteSelected {
                        route_code: "intent.command".into(),
                        decided_by: Some("llm".into()),
                        topic: routed.decision.topic.clone(),
                        auth_level: chain.chain_level.get(),
                        command_id: chain.command_id().map(str::to_owned),
                        params: chain
                            .commands
                            .first()
                            .filter(|_| chain.commands.len() == 1)
                            .map_or(json!({}), |c| json!(c.params)),
                        state: state_in.into(),
                        ..RouteSelected::default()
                    }))?;
                    routed.decided = Decided {
                        route_code: "intent.command".into(),
                        ..routed.decided.chain(chain)
                    };
                }
                // Words that quote what the user asked to remember are
                // given, and so is why a command it called was refused.
                let withheld = !thought.remembered && thought.blocked.is_empty();
                match (thought_intent, honest) {
                    (_, Some(reply)) if dropped => Intent::Reply(reply),
                    (Intent::Reply(_), Some(reply)) if withheld => {
                        if let Some(llm) = considered.llm.as_mut() {
                            llm.outcome = "withheld".into();
                        }
                        self.not_answered(
                            round,
                            "the model proposed no command; its words are not given",
                        )?;
                        Intent::Reply(reply)
                    }
                    (intent, _) => intent,
                }
            }
            (None, Some(reply)) => Intent::Reply(reply.clone()),
            (None, None) => Intent::Unsupported(*route),
        };
        routed.decision.intent = intent;
        Ok((routed, considered))
    }

    /// Whether a tier whose words may answer talk is there (`[llm]
    /// answer_with`, or the state's own).
    fn answers_in_words(&self, state: &str) -> bool {
        let answer_with = self
            .router
            .state(state)
            .and_then(|p| p.answer_with.as_ref())
            .unwrap_or(&self.config.llm.answer_with);
        self.tiers_named(answer_with)
    }

    /// Whether a tier of `names` is there.
    fn tiers_named(&self, names: &[String]) -> bool {
        self.llm.as_ref().is_some_and(|tiers| {
            [
                ("local", tiers.local.is_some()),
                ("remote", tiers.remote.is_some()),
            ]
            .iter()
            .any(|(name, there)| *there && names.iter().any(|a| a == name))
        })
    }

    /// Why CAAL said what it can do instead of a model's answer: a
    /// decision step in the round's reasoning.
    fn not_answered(&self, round: &OpenRound, why: &str) -> Result<(), RoundError> {
        let content = format!(
            "nothing understood this; {why} (no tier in [llm] answer_with is there): said what CAAL can do"
        );
        self.step(
            round,
            crate::reasoning::Step::new(crate::reasoning::Phase::Thinking, content)
                .typed(crate::reasoning::StepType::Decision),
            super::reasoning::Source::Engine,
            json!({}),
        )?;
        Ok(())
    }

    /// Tool calls the reasoning policy refused: their decisions, and a
    /// receipt for each governed one, settled `blocked`.
    fn refused(
        &self,
        round: &OpenRound,
        blocked: &[auth::Command],
        decisions: &mut Vec<ToolDecision>,
    ) -> Result<(), RoundError> {
        if blocked.is_empty() {
            return Ok(());
        }
        self.record_decisions(round, blocked)?;
        for c in blocked {
            decisions.push(reasoning::tool_decision(c, "blocked", None));
            if let Some(d) = &c.decision {
                self.receipt(
                    round,
                    &c.command_id,
                    json!(c.params),
                    d,
                    None,
                    "not_run",
                    "blocked",
                    0,
                    None,
                )?;
            }
        }
        Ok(())
    }

    /// Authorize: a chain's decisions and parameters are recorded, then the
    /// gate decides against the pending confirmation; a confirmation it
    /// resolves is recorded, with receipts for governed commands not run.
    pub(super) fn authorize(
        &self,
        round: &OpenRound,
        mut routed: Routed,
        normalized: &str,
        pending: Option<&Pending>,
        (channel, origin): (Channel, &Origin),
        now: i64,
    ) -> Result<(Routed, GateOutcome), RoundError> {
        let source_rule = routed.decision.source_rule.clone();
        if let Intent::Chain(chain) = &mut routed.decision.intent {
            let round_id = round.header().round_id.to_string();
            self.decide_by_rule(chain, source_rule.as_deref(), normalized, &round_id);
            self.record_decisions(round, &chain.commands)?;
            self.record_params_ok(round, chain)?;
        }
        let utterance = match &routed.decision.intent {
            Intent::Chain(chain) => Utterance::Chain(chain),
            Intent::Confirm => Utterance::Confirm,
            Intent::Deny => Utterance::Deny,
            _ => Utterance::Other,
        };
        let ttl_ms = i64::try_from(self.config.authority.confirmation_ttl_seconds)
            .unwrap_or(i64::MAX / 4)
            * 1000;
        let at = Gating {
            round_seq: round.header().round_seq,
            now_ms: now,
            ttl_ms,
            from: origin.clone(),
            policy: DoorPolicy {
                agents_confirm: self.config.doors.agents_confirm,
            },
        };
        let gated = auth::gate(pending, utterance, &at, || {
            uuid::Uuid::now_v7().hyphenated().to_string()
        });
        if let (GateAction::Refused(why), Some(p)) = (&gated.action, &gated.pending) {
            round.append(EventDraft::new(ConfirmReceived {
                confirmation_id: p.confirmation_id.clone(),
                accepted: false,
                channel: channel.as_str().into(),
                resolution: "refused".into(),
                chain_id: p.chain.chain_id.clone(),
                confirmations_received: p.received,
                confirmations_required: p.required,
                refused: Some(why.as_str().into()),
                door: Some(origin.door().as_str().into()),
                client: Some(scrubbed(&origin.client.id)),
            }))?;
        }
        if let Some((p, resolution)) = &gated.resolved {
            let received = if *resolution == Resolution::Confirmed {
                p.received + 1
            } else {
                p.received
            };
            let by = match resolution {
                Resolution::Expired | Resolution::Superseded => "system",
                _ => channel.as_str(),
            };
            let answered = !matches!(resolution, Resolution::Expired | Resolution::Superseded);
            round.append(EventDraft::new(ConfirmReceived {
                confirmation_id: p.confirmation_id.clone(),
                accepted: resolution.accepted(),
                channel: by.into(),
                resolution: name_of(resolution),
                chain_id: p.chain.chain_id.clone(),
                confirmations_received: received,
                confirmations_required: p.required,
                refused: None,
                door: answered.then(|| origin.door().as_str().into()),
                client: answered.then(|| scrubbed(&origin.client.id)),
            }))?;
            self.receipts_not_run(round, &p.chain, *resolution, p.received)?;
        }
        Ok((routed, gated))
    }

    /// Act on the gate's decision: run the chain (given now, or the one
    /// confirmed), ask for a confirmation, cancel, or answer what is not a
    /// matter of authority. The pending confirmation this round resolved,
    /// replaced or started changes at the boundary.
    pub(super) fn act(
        &self,
        round: &OpenRound,
        routed: Routed,
        gated: GateOutcome,
        override_reason: Option<OverrideReason>,
        text: &str,
        now: i64,
    ) -> Result<Acted, RoundError> {
        let Routed {
            decision,
            mut decided,
        } = routed;
        let mut decisions = Vec::new();
        let resolved_pending = gated.resolved.as_ref().map(|(p, _)| p);
        let mut steps = match gated.action {
            GateAction::Execute {
                chain_level_confirmations,
            } => {
                let chain = match (&decision.intent, resolved_pending) {
                    (Intent::Chain(chain), _) => Ok(chain.clone()),
                    (_, Some(p)) => self
                        .router
                        .rebuild(&p.chain)
                        .map_err(|problem| (p.chain.summary.clone(), problem)),
                    (_, None) => unreachable!(
                        "the gate executes a chain it was given or one that was pending"
                    ),
                };
                match chain {
                    Ok(chain) => {
                        decided = decided.chain(&chain);
                        let steps = self.execute_chain(
                            round,
                            &chain,
                            chain_level_confirmations,
                            override_reason,
                            now,
                        )?;
                        decisions.extend(chain.commands.iter().zip(&steps.commands).map(
                            |(c, run): (_, &CommandRun)| {
                                reasoning::tool_decision(c, &run.status, run.call_id.clone())
                            },
                        ));
                        steps
                    }
                    Err((summary, problem)) => Steps::failed(
                        format!("I can't {summary} any more: {}.", problem.message),
                        problem.code,
                        problem.message,
                    ),
                }
            }
            GateAction::Ask => {
                let Some(p) = gated.pending.as_ref() else {
                    unreachable!("Ask always carries the pending confirmation")
                };
                decided.auth_level = p.chain.chain_level.get();
                let asked = match &decision.intent {
                    Intent::Chain(chain) => Some(chain.clone()),
                    _ => self.router.rebuild(&p.chain).ok(),
                };
                for c in asked.iter().flat_map(|chain| chain.commands.iter()) {
                    decisions.push(reasoning::tool_decision(c, "awaiting_confirmation", None));
                }
                self.ask(round, p)?
            }
            GateAction::Cancelled => {
                let summary = resolved_pending
                    .map(|p| p.chain.summary.clone())
                    .unwrap_or_default();
                Steps::reply(format!("Okay, I won't {summary}."))
            }
            GateAction::NothingToConfirm { expired: true } => {
                let summary = resolved_pending
                    .map(|p| p.chain.summary.clone())
                    .unwrap_or_default();
                Steps::reply(format!(
                    "That confirmation expired, so I did not {summary}. Ask again if you still want it."
                ))
            }
            GateAction::NothingToConfirm { expired: false } => {
                Steps::reply("There's nothing waiting for a confirmation.")
            }
            GateAction::Proceed => {
                let mut steps = self.proceed(round, text, &decision, now)?;
                decisions.append(&mut steps.decisions);
                steps
            }
            GateAction::Refused(why) => {
                let Some(p) = gated.pending.as_ref() else {
                    unreachable!("a refusal carries the confirmation it leaves waiting")
                };
                Steps::reply(refused_reply(why, p))
            }
        };
        let unchanged = matches!(gated.action, GateAction::Refused(_));
        if !unchanged && (gated.resolved.is_some() || gated.pending.is_some()) {
            steps.boundary.pending = Some(match gated.pending {
                Some(p) => PendingChange::Set(Box::new(p)),
                None => PendingChange::Cleared,
            });
        }
        Ok(Acted {
            steps,
            decided,
            decisions,
        })
    }

    /// A confirmation is asked for: recorded, with the reasoning step that waits on it.
    fn ask(&self, round: &OpenRound, p: &Pending) -> Result<Steps, RoundError> {
        round.append(EventDraft::new(ConfirmRequested {
            confirmation_id: p.confirmation_id.clone(),
            chain_id: p.chain.chain_id.clone(),
            command_id: p
                .chain
                .steps
                .first()
                .filter(|_| p.chain.steps.len() == 1)
                .map(|s| s.command_id.clone()),
            macro_name: p.chain.macro_name.clone(),
            auth_level: p.chain.chain_level.get(),
            summary: p.chain.summary.clone(),
            prompt: p.prompt.clone(),
            expires_at: rfc3339_ms(p.expires_at_ms),
            confirmations_required: p.required,
            confirmations_received: p.received,
            door: p.raised_by.as_ref().map(|c| c.door.as_str().into()),
            client: p.raised_by.as_ref().map(|c| scrubbed(&c.id)),
        }))?;
        self.step(
            round,
            Step::new(
                Phase::WaitingApproval,
                format!(
                    "Waiting for confirmation {} of {}: {}",
                    p.received + 1,
                    p.required,
                    p.chain.summary
                ),
            ),
            Source::Engine,
            json!({"confirmation_id": p.confirmation_id}),
        )?;
        Ok(Steps::reply(p.prompt.clone()))
    }

    /// Emit: the round's reasoning (the decisions of every stage) and its reply.
    pub(super) fn emit(
        &self,
        round: &OpenRound,
        channel: Channel,
        mut steps: Steps,
        decided: Decided,
        considered: Considered,
        mut decisions: Vec<ToolDecision>,
    ) -> Result<Outcome, RoundError> {
        let Considered {
            llm,
            mut retries,
            narrative,
            decisions: mut all,
        } = considered;
        all.append(&mut decisions);
        let reasoning = self.reasoning_update(round, narrative.as_deref(), &all)?;
        round.append(EventDraft::new(OutputEmitted {
            text: steps.reply.clone(),
            channel: channel.as_str().into(),
            was_escalated: None,
        }))?;
        retries.append(&mut steps.retries);
        Ok(Outcome {
            steps,
            decided,
            llm,
            retries,
            reasoning,
        })
    }
}

/// What a "yes" or "no" that did not answer `p` is told.
fn refused_reply(why: Refusal, p: &Pending) -> String {
    let door = p
        .raised_by
        .as_ref()
        .map_or("elsewhere", |c| c.door.as_str());
    match why {
        Refusal::OtherClient => format!(
            "That confirmation was asked for from another device ({door}); only the one that asked can answer it, or CAAL's page."
        ),
        Refusal::AgentMayNotConfirm => format!(
            "An agent can't confirm this: to {}, a person says yes on CAAL's page, where it waits.",
            p.chain.summary
        ),
        Refusal::BeforeAsked => format!(
            "That yes came before the question, so it doesn't count. {}",
            p.prompt
        ),
        Refusal::NotHeard => format!("That yes doesn't answer what I asked last. {}", p.prompt),
        Refusal::Interrupted => format!(
            "Hear me out before the second yes, it was said over the question. {}",
            p.prompt
        ),
    }
}

/// A client's name as the trace keeps it: scrubbed, like everything said.
fn scrubbed(id: &str) -> String {
    crate::safety::global().scrub(id).into_owned()
}

/// The router's decision as recorded: who else decided (the model) sets
/// `decided_by`; the route stage adds the state's policy and the candidates.
pub(super) fn route_selected(decision: &RouteDecision, state: &str) -> RouteSelected {
    RouteSelected {
        route_code: decision.route_code.clone(),
        source_rule: decision.source_rule.clone(),
        topic: decision.topic.clone(),
        auth_level: decision.auth_level.get(),
        macro_name: decision.macro_name.clone().map(Value::from),
        command_id: decision.command_id.clone(),
        params: decision.params.clone(),
        state: state.into(),
        layer: Some(decision.layer.as_str().into()),
        understood: decision
            .understood
            .as_ref()
            .map(crate::understand::Reading::to_json),
        ..RouteSelected::default()
    }
}
