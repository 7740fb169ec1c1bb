//! Asking a model: the prompt (capped, hashed), the tiers in the order the
//! conversation state wants, every attempt as `llm.request` / `llm.response`,
//! every validator's verdict as `validator.ran`, bounded retries, escalation,
//! and a clarification question when nothing usable came back. A tool call
//! becomes a command chain for the authority gate; nothing runs here, so a
//! retry never repeats a side effect.

use super::RoundError;
use serde::Serialize;
use serde_json::json;

use std::sync::Arc;

use crate::{
    auth::{AuthLevel, CommandChain},
    config::{Escalation, LlmConfig, RouteType, StateConfig},
    llm::{
        ChatMessage, ChatRequest, ChatResponse, LlmError, Tier, ToolSpec, cap_prompt,
        toolbox::Toolbox,
        validate::{Candidate, Status},
    },
    memory::ContextPackage,
    router::Intent,
    trace::{
        EventDraft, EventStatus, OpenRound,
        events::{LlmRequest, LlmResponse, ValidatorRan, name_of},
    },
};

use super::Engine;

/// One attempt that did not give the answer, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RetryNote {
    /// `llm` (a model attempt) or `tool` (an executor call).
    pub stage: String,
    pub tier: Option<String>,
    pub attempt: u32,
    pub reason: String,
}

/// What asking the model came to, for the round's result.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LlmSummary {
    /// The tier whose answer was used (none if the user was asked to rephrase).
    pub tier: Option<String>,
    pub model: Option<String>,
    pub attempts: u32,
    pub escalated: bool,
    /// No usable answer: the user was asked to say it another way.
    pub clarified: bool,
    /// `answer`, `tool_call`, `clarify`, or `withheld` (words not given:
    /// no tier of `[llm] answer_with`).
    pub outcome: String,
    /// Time spent in HTTP exchanges with models, all attempts together.
    pub latency_ms: f64,
}

pub(super) struct Thought {
    pub intent: Intent,
    pub summary: LlmSummary,
    pub retries: Vec<RetryNote>,
    /// What the model said alongside its tool calls.
    pub narrative: Option<String>,
    /// Tool calls the reasoning policy refused (their justification failed).
    pub blocked: Vec<crate::auth::Command>,
    /// Its words quote what the user asked to remember (they are grounded
    /// in it, whatever tier said them).
    pub remembered: bool,
}

/// One round's questioning of the models: the prompt every attempt starts
/// from, what the bucket's memory put in it, and what the attempts have come
/// to so far. Built once by `Engine::asking`; each attempt reads it and adds
/// to it (a retry note, the feedback for the next attempt, its time).
struct Asking<'a> {
    round: &'a OpenRound,
    cfg: &'a LlmConfig,
    question: &'a str,
    /// The system prompt and the question, capped to fit.
    base: Vec<ChatMessage>,
    /// The question was cut to fit the prompt.
    question_truncated: bool,
    /// What the bucket remembers, as the prompt says it: the text, the
    /// package it came from, and whether its long part went in.
    memory: Option<(String, Arc<ContextPackage>, bool)>,
    now: i64,
    retries: Vec<RetryNote>,
    /// Why the last answer was turned down ("Your previous reply was not
    /// usable: …"), said to the next attempt.
    feedback: Option<String>,
    attempts: u32,
    /// Time spent in HTTP exchanges with models, all attempts together.
    latency_ms: f64,
}

/// Where the questioning goes after an attempt that got no answer.
enum Next {
    /// The same tier again (a timeout, a rate limit, a garbled answer).
    Attempt,
    /// The next tier: this one will not do better (a refused key, say).
    Tier,
}

/// What the validators made of an answer: the worst status any gave
/// (`Ok` uses it, `Retry` asks again, `Escalate` moves to the next tier),
/// and what the failed ones said, for the next attempt's feedback.
struct Verdict {
    worst: Status,
    complaints: Vec<String>,
}

impl Engine {
    /// The question put to the models, tier by tier in the order the state
    /// wants, until an answer passes the validators; when none does, the
    /// user is asked to say it another way.
    pub(super) fn think(
        &self,
        round: &OpenRound,
        question: &str,
        route: RouteType,
        near: Option<&[String]>,
        state: &str,
    ) -> Result<Thought, RoundError> {
        let cfg = &self.config.llm;
        let tiers = self.llm.as_ref().expect("think is called only with tiers");
        let policy = self.router.state(state);
        let escalation = match (route, policy) {
            (RouteType::Research, _) => Escalation::Early,
            (_, Some(p)) => p.escalation,
            (_, None) => Escalation::Normal,
        };
        // Research is answered in words; other questions may pick a command
        // where the state offers them. Talk no layer understood (chat) is
        // offered only the commands the meaning layer found near it, if
        // any: a small model offered every tool proposes one for anything
        // ("uh um" became "Cancel the timer?"). The tiers in
        // `llm.offer_all_tools_to`, a rule that sends its sentences to the
        // model (route "llm"), and a router without a meaning layer offer
        // them all.
        let offer = route != RouteType::Research && policy.is_none_or(|p| p.offer_tools);
        let narrowed = near
            .filter(|_| route == RouteType::Chat)
            .map(|near| self.toolbox.only(near));
        let toolbox_for = |tier: &str| -> Option<&Toolbox> {
            if !offer {
                return None;
            }
            match &narrowed {
                _ if cfg.offer_all_tools_to.iter().any(|t| t == tier) => Some(&self.toolbox),
                Some(few) => (!few.is_empty()).then_some(few),
                None => Some(&self.toolbox),
            }
        };
        let mut asking = self.asking(round, question, policy)?;
        let plan = tiers.plan(escalation, cfg);
        let first_tier = plan.first().map(|(t, _)| t.name);
        for (tier, tier_attempts) in plan {
            let toolbox = toolbox_for(tier.name);
            let tools = toolbox.map(|t| t.specs()).unwrap_or_default();
            for attempt in 1..=tier_attempts {
                asking.attempts += 1;
                let request = asking.request(tier, attempt, &tools)?;
                let response = match asking.exchange(tier, &request) {
                    Ok(r) => scrubbed(r),
                    Err(e) => match asking.failed(tier, attempt, &e)? {
                        Next::Attempt => continue,
                        Next::Tier => break,
                    },
                };
                let verdict = self.verdict(&asking, tier, attempt, toolbox, &response)?;
                if verdict.worst < Status::Retry {
                    let escalated = Some(tier.name) != first_tier;
                    return self.accepted(asking, tier, toolbox, &response, escalated);
                }
                asking.rejected(tier, attempt, &verdict.complaints);
                if verdict.worst == Status::Escalate {
                    break;
                }
            }
        }
        asking.clarify()
    }

    /// The prompt every attempt of a round starts from: the system prompt,
    /// the state's mode ("Mode: research (…)"), what the bucket remembers,
    /// and the question, capped to fit `llm.max_prompt_chars`.
    fn asking<'a>(
        &'a self,
        round: &'a OpenRound,
        question: &'a str,
        policy: Option<&StateConfig>,
    ) -> Result<Asking<'a>, RoundError> {
        let cfg = &self.config.llm;
        let mut system = cfg.system_prompt.clone();
        if let Some(p) = policy {
            system.push_str(&format!(" Mode: {} ({}).", p.label, p.description));
        }
        // What the bucket remembers: the short part always, the long part
        // when the prompt has room for it next to the question.
        let now = self.clock.now_ms();
        let room = cfg
            .max_prompt_chars
            .saturating_sub(system.chars().count() + question.chars().count() + 80);
        let memory = self.memory_for_prompt(round, room, now)?;
        if let Some((text, _, _)) = &memory {
            system.push_str("\nWhat the user asked you to remember (use it when it helps):\n");
            system.push_str(text);
        }
        let room = cfg.max_prompt_chars.saturating_sub(system.chars().count());
        let capped_question = cap_prompt(question, room.max(400));
        Ok(Asking {
            round,
            cfg,
            question,
            base: vec![
                ChatMessage::new("system", system),
                ChatMessage::new("user", capped_question.text),
            ],
            question_truncated: capped_question.truncated,
            memory,
            now,
            retries: Vec::new(),
            feedback: None,
            attempts: 0,
            latency_ms: 0.0,
        })
    }

    /// A model's answer checked by every validator: one `llm.response`,
    /// then a `validator.ran` per validator (failed where it asks for
    /// another try).
    fn verdict(
        &self,
        asking: &Asking<'_>,
        tier: &Tier,
        attempt: u32,
        toolbox: Option<&Toolbox>,
        response: &ChatResponse,
    ) -> Result<Verdict, RoundError> {
        // The answer and its verdicts go to the trace together.
        let mut drafts = vec![answer_event(tier, attempt, response)];
        let candidate = Candidate {
            question: asking.question,
            response,
            toolbox,
            router: &self.router,
            system_prompt: &asking.cfg.system_prompt,
        };
        let mut worst = Status::Ok;
        let mut complaints = Vec::new();
        for v in self.validators.iter() {
            let r = v.check(&candidate);
            let failed = r.status >= Status::Retry;
            drafts.push(
                EventDraft::new(ValidatorRan {
                    validator_id: r.validator_id.clone(),
                    code: r.code.clone(),
                    status: name_of(&r.status),
                    message: r.message.clone(),
                    details: Some(r.details.clone()).filter(|d| !d.is_null()),
                    tier: Some(tier.name.to_string()),
                    attempt: Some(attempt),
                })
                .with_status(if failed {
                    EventStatus::Failed
                } else {
                    EventStatus::Ok
                }),
            );
            if failed {
                complaints.push(format!("{} ({})", r.message, r.code));
            }
            worst = worst.max(r.status);
        }
        asking.round.append_all(drafts)?;
        Ok(Verdict { worst, complaints })
    }

    /// The answer the validators passed, as the round's thought: the
    /// remembered items its words quote are cited, the model's thinking
    /// becomes reasoning steps, and its tool calls are decided ("turn on
    /// the porch light" as a chain, or a reply saying why not).
    fn accepted(
        &self,
        asking: Asking<'_>,
        tier: &Tier,
        toolbox: Option<&Toolbox>,
        response: &ChatResponse,
        escalated: bool,
    ) -> Result<Thought, RoundError> {
        let round = asking.round;
        let mut cited = 0;
        if let Some((_, package, with_long)) = &asking.memory
            && response.tool_calls.is_empty()
        {
            cited = self.cite(round, package, *with_long, &response.text, asking.now)?;
        }
        let outcome = if response.tool_calls.is_empty() {
            "answer"
        } else {
            "tool_call"
        };
        if let Some(thinking) = &response.reasoning {
            self.model_thinking(round, thinking)?;
        }
        let narrative = (!response.tool_calls.is_empty())
            .then(|| response.text.trim().to_owned())
            .filter(|t| !t.is_empty());
        let (intent, blocked) = self.intent_of(
            toolbox,
            response,
            narrative.as_deref(),
            &round.header().round_id.to_string(),
        );
        Ok(Thought {
            intent,
            remembered: cited > 0,
            narrative,
            blocked,
            summary: LlmSummary {
                tier: Some(tier.name.into()),
                model: Some(response.model.clone()),
                attempts: asking.attempts,
                escalated,
                clarified: false,
                outcome: outcome.into(),
                latency_ms: asking.latency_ms,
            },
            retries: asking.retries,
        })
    }

    /// An accepted answer: its words, or its tool calls as one chain of
    /// decided commands (and those the reasoning policy blocked); a call of
    /// a tool not offered is none.
    fn intent_of(
        &self,
        toolbox: Option<&crate::llm::toolbox::Toolbox>,
        response: &ChatResponse,
        narrative: Option<&str>,
        round_id: &str,
    ) -> (Intent, Vec<crate::auth::Command>) {
        if response.tool_calls.is_empty() {
            return (Intent::Reply(response.text.trim().to_owned()), Vec::new());
        }
        let floor = AuthLevel::new(self.config.llm.tool_auth_floor).unwrap_or(AuthLevel::RUN);
        let choices = response
            .tool_calls
            .iter()
            .filter_map(|call| toolbox?.choice(&self.router, call).ok())
            .map(|mut c| {
                c.command.auth_level = c.command.auth_level.max(floor);
                c
            })
            .collect();
        let (run, blocked) = self.decide_by_model(choices, narrative, round_id);
        let intent = if run.is_empty() {
            let reason = blocked
                .iter()
                .find_map(|c| c.decision.as_ref()?.evaluation.as_ref()?.reason.clone())
                .unwrap_or_else(|| "its reason did not hold up".into());
            Intent::Reply(format!(
                "I won't {}: {reason}. Ask me directly if you want it done.",
                crate::command::join_summaries(blocked.iter().map(|c| c.summary.as_str()))
            ))
        } else {
            Intent::Chain(CommandChain::new(run, None, None))
        };
        (intent, blocked)
    }
}

impl Asking<'_> {
    /// Attempt `attempt` of `tier`, recorded as `llm.request` before it is
    /// sent: the base prompt, the last rejection's feedback, the tools on
    /// offer.
    fn request(
        &self,
        tier: &Tier,
        attempt: u32,
        tools: &[ToolSpec],
    ) -> Result<ChatRequest, RoundError> {
        let mut messages = self.base.clone();
        if let Some(f) = &self.feedback {
            messages.push(ChatMessage::new("user", f.clone()));
        }
        let request = ChatRequest {
            messages,
            tools: tools.to_vec(),
            max_tokens: Some(self.cfg.max_tokens),
            // The first attempt is deterministic; retries vary.
            temperature: Some(if attempt == 1 { 0.0 } else { 0.7 }),
            tool_required: false,
        };
        let whole: String = request
            .messages
            .iter()
            .map(|m| format!("{}: {}\n", m.role, m.content))
            .collect();
        let capped = cap_prompt(&whole, self.cfg.max_prompt_chars);
        self.round.append(EventDraft::new(LlmRequest {
            model: tier.model().to_string(),
            prompt_hash: capped.hash.clone(),
            prompt_head: capped.head.clone(),
            prompt_tail: capped.tail.clone(),
            prompt_truncated: self.question_truncated,
            tier: tier.name.to_string(),
            attempt,
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            ..LlmRequest::default()
        }))?;
        Ok(request)
    }

    /// `tier`'s answer to `request`, the exchange's time added to the round's.
    fn exchange(&mut self, tier: &Tier, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let exchange = std::time::Instant::now();
        let answer = tier.chat(request);
        self.latency_ms += exchange.elapsed().as_secs_f64() * 1e3;
        answer
    }

    /// An attempt that got no answer (the model unreachable, rate limited,
    /// its reply unreadable): a failed `llm.response` and a retry note, and
    /// whether the same tier is worth asking again.
    fn failed(&mut self, tier: &Tier, attempt: u32, e: &LlmError) -> Result<Next, RoundError> {
        let transient = e.transient();
        self.round.append(
            EventDraft::new(LlmResponse {
                model: tier.model().to_string(),
                tier: tier.name.to_string(),
                attempt,
                error: Some(e.to_string()),
                transient: Some(transient),
                ..LlmResponse::default()
            })
            .with_status(EventStatus::Failed),
        )?;
        self.retries.push(RetryNote {
            stage: "llm".into(),
            tier: Some(tier.name.into()),
            attempt,
            reason: e.to_string(),
        });
        if matches!(e, LlmError::Http { status: 429, .. }) {
            // Rate limited: back off before the next attempt.
            std::thread::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)));
        }
        if !transient && !matches!(e, LlmError::Malformed { .. }) {
            return Ok(Next::Tier); // this tier will not do better: escalate
        }
        Ok(Next::Attempt)
    }

    /// An answer the validators turned down: a retry note, and the feedback
    /// the next attempt is given ("Your previous reply was not usable: …").
    fn rejected(&mut self, tier: &Tier, attempt: u32, complaints: &[String]) {
        let reason = complaints.join("; ");
        self.retries.push(RetryNote {
            stage: "llm".into(),
            tier: Some(tier.name.into()),
            attempt,
            reason: reason.clone(),
        });
        self.feedback = Some(format!(
            "{}: {reason}. {}",
            crate::llm::validate::RETRY_NOT_USABLE,
            crate::llm::validate::RETRY_AGAIN
        ));
    }

    /// No tier gave a usable answer: `validator.exhausted` goes to the
    /// trace, and the user is asked to say it another way
    /// (`llm.clarify_reply`).
    fn clarify(self) -> Result<Thought, RoundError> {
        let attempts = self.attempts;
        self.round.append(
            EventDraft::new(ValidatorRan {
                validator_id: "retry_policy".into(),
                code: "validator.exhausted".into(),
                status: "error".into(),
                message: format!(
                    "no usable answer after {attempts} attempt(s); asking the user to say it another way"
                ),
                details: Some(json!({"attempts": attempts})),
                ..ValidatorRan::default()
            })
            .with_status(EventStatus::Failed),
        )?;
        Ok(Thought {
            intent: Intent::Reply(self.cfg.clarify_reply.clone()),
            remembered: false,
            summary: LlmSummary {
                tier: None,
                model: None,
                attempts,
                escalated: false,
                clarified: true,
                outcome: "clarify".into(),
                latency_ms: self.latency_ms,
            },
            retries: self.retries,
            narrative: None,
            blocked: Vec::new(),
        })
    }
}

/// A model's answer as `llm.response`: its words, tool calls and thinking,
/// and the words it said alongside tool calls as their narrative.
fn answer_event(tier: &Tier, attempt: u32, response: &ChatResponse) -> EventDraft {
    EventDraft::new(LlmResponse {
        model: response.model.clone(),
        latency_ms: response.latency_ms,
        text: response.text.clone(),
        usage: response.usage.clone(),
        truncated: response.truncated,
        tier: tier.name.to_string(),
        attempt,
        tool_calls: Some(json!(response.tool_calls)),
        reasoning: response.reasoning.clone(),
        narrative: (!response.tool_calls.is_empty() && !response.text.trim().is_empty())
            .then(|| response.text.clone()),
        ..LlmResponse::default()
    })
}

/// A model's output is scrubbed before anything stores or shows it.
fn scrubbed(mut r: ChatResponse) -> ChatResponse {
    let safety = crate::safety::global();
    r.text = safety.scrub(&r.text).into_owned();
    r.reasoning = r.reasoning.map(|t| safety.scrub(&t).into_owned());
    for call in &mut r.tool_calls {
        safety.scrub_json(&mut call.arguments);
    }
    r
}
