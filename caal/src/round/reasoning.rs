//! Reasoning in rounds: every command a round decides becomes a tool
//! decision with a rationale (a rule's words or the model's, scrubbed), each
//! step a `reasoning.step` event linked to what it concerns, each batch a
//! `reasoning.update`, and each governed action, once its fate is settled,
//! a signed `receipt.issued`.

use super::RoundError;
use serde_json::{Value, json};

use crate::{
    auth::{CommandChain, Resolution, StoredChain},
    llm::toolbox::{ToolChoice, governed, tool_name},
    reasoning::{
        Decision, Phase, RoundReasoning, Step, StepType, ToolDecision, cap_step,
        justify::{self, Applied},
        receipt::{ReceiptDraft, sign},
    },
    state::rfc3339_ms,
    trace::{
        EventDraft, EventStatus, OpenRound, StoreError,
        events::{ReasoningStep, ReasoningUpdate, ReceiptIssued, ValidatorRan, name_of},
    },
};

use super::Engine;

/// Where a step came from.
#[derive(Clone, Copy)]
pub(super) enum Source {
    Model,
    Engine,
}

impl Engine {
    /// One reasoning step, scrubbed and capped, linked to what it concerns.
    pub(super) fn step(
        &self,
        round: &OpenRound,
        step: Step,
        source: Source,
        links: Value,
    ) -> Result<(), StoreError> {
        let scrubbed = crate::safety::global()
            .scrub(step.content.trim())
            .into_owned();
        if scrubbed.is_empty() {
            return Ok(());
        }
        let max = self.config.reasoning.max_step_chars.max(1);
        let content = cap_step(&scrubbed, max);
        round.append(EventDraft::new(ReasoningStep {
            phase: step.phase.as_str().into(),
            step_type: name_of(&step.step_type),
            content,
            source: match source {
                Source::Model => "model",
                Source::Engine => "engine",
            }
            .into(),
            links,
            truncated: scrubbed.chars().count() > max,
        }))
    }

    /// A command that ran: an `execute` step (an `error` step when it failed)
    /// linked to its call.
    pub(super) fn tool_result_step(
        &self,
        round: &OpenRound,
        command_id: &str,
        call_id: &str,
        outcome: &crate::tools::ToolOutcome,
        step_type: StepType,
    ) -> Result<(), StoreError> {
        let ok = outcome.status == crate::tools::ToolStatus::Ok;
        let phase = if ok { Phase::Execute } else { Phase::Error };
        let content = format!(
            "{} -> {}: {}",
            tool_name(command_id),
            outcome.status.as_str(),
            outcome.message
        );
        self.step(
            round,
            Step::new(phase, content).typed(step_type),
            Source::Engine,
            json!({"call_id": call_id, "command_id": command_id}),
        )
    }

    /// The model's own thinking, parsed into steps.
    pub(super) fn model_thinking(
        &self,
        round: &OpenRound,
        thinking: &str,
    ) -> Result<(), RoundError> {
        for step in crate::reasoning::parse_thinking(thinking) {
            self.step(round, step, Source::Model, json!({}))?;
        }
        Ok(())
    }

    /// Commands a rule decided: their rationale is the rule and the words it matched.
    pub(super) fn decide_by_rule(
        &self,
        chain: &mut CommandChain,
        rule: Option<&str>,
        words: &str,
        round_id: &str,
    ) {
        let group = (chain.commands.len() > 1).then_some(0);
        for command in &mut chain.commands {
            if command.decision.is_some() {
                continue;
            }
            let is_governed = self
                .router
                .command(&command.command_id)
                .is_some_and(|spec| governed(spec, &self.config.reasoning));
            // A chain of several requests: each command names its own rule or template.
            let own = command.source_rule.clone();
            let rule = rule.or(own.as_deref());
            // A layer of understanding names itself and the meaning it
            // found ("semantic:HassLightSet"); a configured rule its name.
            let how =
                rule.and_then(|r| r.split_once(':'))
                    .and_then(|(layer, intent)| match layer {
                        "template" => Some(format!("as {intent} (sentence template)")),
                        "semantic" => Some(format!("by its meaning, nearest {intent}'s examples")),
                        "model" => Some(format!(
                            "as {intent}, chosen by the model among the nearest meanings"
                        )),
                        _ => None,
                    });
            let summary = &command.summary;
            let rationale = match (how, rule, &chain.macro_name) {
                (Some(how), _, _) => format!("Understood '{words}' {how}: {summary}."),
                (None, Some(rule), Some(m)) => {
                    format!("Rule {rule} matched '{words}': macro {m}, step {summary}.")
                }
                (None, Some(rule), None) => format!("Rule {rule} matched '{words}': {summary}."),
                (None, None, _) => format!("Asked for in '{words}': {summary}."),
            };
            command.decision = Some(Decision {
                decided_by: "rule".into(),
                tool_name: tool_name(&command.command_id),
                rationale,
                input: json!({"rule": rule, "words": words, "command_id": command.command_id,
                              "arguments": command.raw_params}),
                justification: None,
                evaluation: None,
                governed: is_governed,
                parallel_group: group,
                decided_in_round: round_id.to_owned(),
            });
        }
    }

    /// A model's tool calls as decided commands: the rationale is the
    /// model's (its `_rationale`, its justification, or its narrative), a
    /// governed command's justification is checked, and the policy applied.
    /// Returns the commands to gate and those the policy blocked.
    pub(super) fn decide_by_model(
        &self,
        choices: Vec<ToolChoice>,
        narrative: Option<&str>,
        round_id: &str,
    ) -> (Vec<crate::auth::Command>, Vec<crate::auth::Command>) {
        let group = (choices.len() > 1).then_some(0);
        let safety = crate::safety::global();
        let clean = |s: &str| Some(safety.scrub(s.trim()).into_owned()).filter(|s| !s.is_empty());
        let (mut run, mut blocked) = (Vec::new(), Vec::new());
        for choice in choices {
            let mut command = choice.command;
            let justification = choice.justification.as_deref().and_then(clean);
            let rationale = choice
                .rationale
                .as_deref()
                .and_then(clean)
                .or_else(|| justification.clone())
                .or_else(|| narrative.and_then(clean))
                .unwrap_or_else(|| {
                    format!(
                        "The model chose {} to {}.",
                        choice.tool_name, command.summary
                    )
                });
            let evaluation = choice.governed.then(|| {
                let ask = |reason: &str, action: &str| self.coherence(reason, action);
                justify::evaluate(
                    justification.as_deref(),
                    &command.summary,
                    &self.config.reasoning,
                    Some(&ask),
                )
            });
            let applied = evaluation.as_ref().map_or(Applied::None, |e| e.applied);
            if applied == Applied::Escalated {
                // One more confirmation than its level asks: a person decides.
                let level = command.auth_level.get().max(2) + 1;
                command.auth_level =
                    crate::auth::AuthLevel::new(level.min(4)).unwrap_or(command.auth_level);
            }
            command.decision = Some(Decision {
                decided_by: "llm".into(),
                tool_name: choice.tool_name,
                rationale,
                input: json!({"tool": tool_name(&command.command_id), "arguments": choice.arguments}),
                justification,
                evaluation,
                governed: choice.governed,
                parallel_group: group,
                decided_in_round: round_id.to_owned(),
            });
            if applied == Applied::Blocked {
                blocked.push(command);
            } else {
                run.push(command);
            }
        }
        (run, blocked)
    }

    /// Asks the first model tier to score how well `reason` supports `action`.
    fn coherence(&self, reason: &str, action: &str) -> Result<f64, String> {
        let tiers = self.llm.as_ref().ok_or("no model tier is configured")?;
        let tier = tiers
            .local
            .as_ref()
            .or(tiers.remote.as_ref())
            .ok_or("no model tier is configured")?;
        let request = crate::llm::ChatRequest {
            messages: vec![
                crate::llm::ChatMessage::new(
                    "system",
                    "You judge whether a reason justifies an action. Reply with one number from 0 (no justification) to 1 (fully justified), nothing else.",
                ),
                crate::llm::ChatMessage::new("user", format!("Action: {action}\nReason: {reason}")),
            ],
            tools: Vec::new(),
            max_tokens: Some(8),
            temperature: Some(0.0),
            tool_required: false,
        };
        let answer = tier.chat(&request).map_err(|e| e.to_string())?;
        justify::parse_score(&answer.text)
    }

    /// A `plan`/`decision` step for each decided command (and why a blocked one was refused).
    pub(super) fn record_decisions(
        &self,
        round: &OpenRound,
        commands: &[crate::auth::Command],
    ) -> Result<(), RoundError> {
        for c in commands {
            let Some(d) = &c.decision else { continue };
            self.step(
                round,
                Step::new(Phase::Plan, format!("{}: {}", d.tool_name, d.rationale))
                    .typed(StepType::Decision),
                if d.decided_by == "llm" {
                    Source::Model
                } else {
                    Source::Engine
                },
                json!({"command_id": c.command_id}),
            )?;
            if let Some(e) = &d.evaluation {
                round.append(
                    EventDraft::new(ValidatorRan {
                        validator_id: "justification".into(),
                        code: if e.passed {
                            "validator.ok"
                        } else {
                            "validator.justification"
                        }
                        .into(),
                        status: if e.passed { "ok" } else { "error" }.into(),
                        message: e
                            .reason
                            .clone()
                            .unwrap_or_else(|| "the justification passed every check".into()),
                        details: Some(json!({"command_id": c.command_id, "assurance": e.assurance,
                                             "applied": e.applied, "checks": e.checks})),
                        ..ValidatorRan::default()
                    })
                    .with_status(if e.passed {
                        EventStatus::Ok
                    } else {
                        EventStatus::Failed
                    }),
                )?;
                if let (false, Some(reason)) = (e.passed, &e.reason) {
                    let policy = match e.applied {
                        Applied::Blocked => "blocked",
                        Applied::Escalated => "escalated",
                        _ => "allowed",
                    };
                    let phase = if e.applied == Applied::Blocked {
                        Phase::Error
                    } else {
                        Phase::WaitingApproval
                    };
                    self.step(
                        round,
                        Step::new(phase, format!("{}: {policy}, {reason}.", d.tool_name)).typed(StepType::Decision),
                        Source::Engine,
                        json!({"command_id": c.command_id, "policy": format!("reasoning.{policy}")}),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// The round's decisions so far, as `reasoning.update` and for the round result.
    pub(super) fn reasoning_update(
        &self,
        round: &OpenRound,
        narrative: Option<&str>,
        decisions: &[ToolDecision],
    ) -> Result<Option<RoundReasoning>, RoundError> {
        if decisions.is_empty() {
            return Ok(None);
        }
        let header = round.header();
        let narrative = narrative
            .map(|n| crate::safety::global().scrub(n.trim()).into_owned())
            .filter(|n| !n.is_empty());
        round.append(EventDraft::new(ReasoningUpdate {
            round_seq: header.round_seq as u64,
            narrative: narrative.clone(),
            tool_decisions: json!(decisions),
        }))?;
        Ok(Some(RoundReasoning {
            conversation_id: header.conversation_id.to_string(),
            round_id: header.round_id.to_string(),
            round_seq: header.round_seq,
            narrative,
            tool_decisions: decisions.to_vec(),
        }))
    }

    /// Signs and records the receipt of a governed command whose fate is settled.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn receipt(
        &self,
        round: &OpenRound,
        command_id: &str,
        params: Value,
        decision: &Decision,
        call_id: Option<String>,
        outcome: &str,
        settled: &str,
        confirmations: u8,
        override_reason: Option<&str>,
    ) -> Result<(), StoreError> {
        if !decision.governed {
            return Ok(());
        }
        let header = round.header();
        let level = self.router.command(command_id).map(|s| s.level.get());
        let enforcement = json!({
            "auth_level": level,
            "governed_by": if level.is_some_and(|l| l >= 3) { "level" } else { "config" },
            "on_missing_justification": self.config.reasoning.on_missing_justification.as_str(),
            "on_check_error": self.config.reasoning.on_check_error.as_str(),
            "applied": decision.evaluation.as_ref().map_or(Applied::None, |e| e.applied),
            "config_hash": self.config.hash,
        });
        let draft = ReceiptDraft {
            library_id: header.library_id.to_string(),
            conversation_id: header.conversation_id.to_string(),
            round_id: header.round_id.to_string(),
            round_seq: header.round_seq,
            decided_in_round: Some(decision.decided_in_round.clone()),
            decided_by: decision.decided_by.clone(),
            input: decision.input.clone(),
            reasoning: decision
                .justification
                .clone()
                .unwrap_or_else(|| decision.rationale.clone()),
            justification_stripped: decision.justification.is_some(),
            action: json!({"command_id": command_id, "params": params}),
            call_id,
            outcome: outcome.into(),
            evaluation: decision.evaluation.clone(),
            enforcement,
            decision: settled.into(),
            confirmations,
            override_reason: override_reason.map(str::to_owned),
            // A spoken command's receipt names the audio it was heard in.
            audio_sha256: match &round.header().audio_id {
                Some(id) => {
                    crate::voice::store::get(&self.state, &id.to_string())?.map(|a| a.sha256)
                }
                None => None,
            },
            issued_at: rfc3339_ms(self.clock.now_ms()),
        };
        let receipt = sign(&draft, &self.receipt_key);
        round.append(EventDraft::new(ReceiptIssued {
            receipt: json!(receipt),
        }))
    }

    /// Receipts for the governed commands of a chain that will not run.
    pub(super) fn receipts_not_run(
        &self,
        round: &OpenRound,
        stored: &StoredChain,
        resolution: Resolution,
        confirmations: u8,
    ) -> Result<(), RoundError> {
        let settled = match resolution {
            Resolution::Denied => "denied",
            Resolution::Expired => "expired",
            Resolution::Superseded => "superseded",
            Resolution::Confirmed => return Ok(()),
        };
        for s in &stored.steps {
            if let Some(d) = &s.decision {
                self.receipt(
                    round,
                    &s.command_id,
                    json!(s.raw_params),
                    d,
                    None,
                    "not_run",
                    settled,
                    confirmations,
                    None,
                )?;
            }
        }
        Ok(())
    }
}

/// A decided command as a tool decision with `outcome`.
pub(super) fn tool_decision(
    c: &crate::auth::Command,
    outcome: &str,
    call_id: Option<String>,
) -> ToolDecision {
    let fallback = || Decision {
        decided_by: "rule".into(),
        tool_name: tool_name(&c.command_id),
        rationale: format!("{}.", c.summary),
        input: Value::Null,
        justification: None,
        evaluation: None,
        governed: false,
        parallel_group: None,
        decided_in_round: String::new(),
    };
    let d = c.decision.clone().unwrap_or_else(fallback);
    ToolDecision {
        tool_name: d.tool_name,
        command_id: c.command_id.clone(),
        rationale: d.rationale,
        parameters: json!(c.params),
        outcome: outcome.into(),
        parallel_group: d.parallel_group,
        call_id,
        decided_by: d.decided_by,
    }
}
