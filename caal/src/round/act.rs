//! The act stage's work: running a chain of commands in order (each an
//! `execute` step, a governed one with its receipt), one tool call with its
//! bounded retries, undo inside its window, and what is not a matter of
//! authority (a reply, invalid parameters, an ambiguity, memory).

use super::RoundError;
use serde_json::json;

use super::{CommandRun, Engine, OverrideReason, RetryNote, Steps};
use crate::{
    auth::{Command, CommandChain, boundary::Undone, store::UndoRecord},
    command::CommandSpec,
    command::{render, render_with},
    ids::CallId,
    reasoning::ToolDecision,
    router::{Intent, RouteDecision},
    tools::{ToolCall, ToolOutcome, ToolStatus},
    trace::{
        EventDraft, EventStatus, OpenRound, StoreError,
        events::{CommandExecuted, CommandReversed, ToolRequest, ToolResponse, ValidatorRan},
    },
};

impl Engine {
    /// Input that is not a matter of authority.
    pub(super) fn proceed(
        &self,
        round: &OpenRound,
        text: &str,
        decision: &RouteDecision,
        now: i64,
    ) -> Result<Steps, RoundError> {
        Ok(match &decision.intent {
            Intent::Reply(text) => Steps::reply(text.clone()),
            Intent::Invalid {
                command_id,
                problem,
            } => {
                round.append(
                    EventDraft::new(ValidatorRan {
                        validator_id: "params".into(),
                        code: problem.code.to_string(),
                        status: "error".into(),
                        message: problem.message.clone(),
                        details: Some(json!({"command_id": command_id, "param": problem.param})),
                        ..ValidatorRan::default()
                    })
                    .with_status(EventStatus::Failed),
                )?;
                Steps::failed(
                    format!("I can't do that: {}.", problem.message),
                    "params.invalid",
                    problem.message.clone(),
                )
            }
            Intent::Ambiguous { candidates } => {
                let options = candidates
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect::<Vec<_>>()
                    .join(" or ");
                Steps::reply(format!("Did you mean {options}? Say which."))
            }
            Intent::Undo => self.undo(round, now)?,
            Intent::Feedback(verdict) => self.said_feedback(round, *verdict, text)?,
            Intent::Memory { op, subject } => {
                self.memory_command(round, text, *op, subject.as_deref(), now)?
            }
            Intent::Unsupported(route) => Steps::failed(
                format!("I can't do {} requests yet.", route.as_str()),
                "route.unsupported",
                format!(
                    "the {} route needs a capability this build does not have yet",
                    route.as_str()
                ),
            ),
            Intent::Chain(_) | Intent::Confirm | Intent::Deny => {
                unreachable!("the gate decides chains, confirmations and denials")
            }
            Intent::Think { .. } => unreachable!("a model was asked (or not) before the gate"),
        })
    }

    pub(super) fn record_params_ok(
        &self,
        round: &OpenRound,
        chain: &CommandChain,
    ) -> Result<(), StoreError> {
        round.append(EventDraft::new(ValidatorRan {
            validator_id: "params".into(),
            code: "validator.ok".into(),
            status: "ok".into(),
            message: format!(
                "parameters of {} command(s) are valid",
                chain.commands.len()
            ),
            ..ValidatorRan::default()
        }))
    }

    /// Runs a chain in order; a failure skips the rest. Each command run is
    /// an `execute` (or `error`) step, and a governed one gets its receipt.
    pub(super) fn execute_chain(
        &self,
        round: &OpenRound,
        chain: &CommandChain,
        confirmations: u8,
        override_reason: Option<OverrideReason>,
        now: i64,
    ) -> Result<Steps, RoundError> {
        let run = ChainRun {
            round,
            chain,
            confirmations,
            override_reason,
            now,
        };
        let mut steps = Steps::reply("");
        let mut replies = Vec::new();
        let one_reply = self.one_reply(chain);
        for command in &chain.commands {
            if let Some((_, reason)) = &steps.failure {
                steps.commands.push(run.skipped(command, reason)?);
                continue;
            }
            let Some(spec) = self.router.command(&command.command_id) else {
                continue;
            };
            let (call_id, outcome) =
                self.run_tool(round, command, spec, now, &mut steps.retries)?;
            let ok = outcome.status == ToolStatus::Ok;
            steps
                .commands
                .push(self.record_outcome(&run, command, call_id, &outcome)?);
            if !ok {
                replies.push(format!(
                    "I couldn't {}: {}.",
                    command.summary, outcome.message
                ));
                steps.failure = Some((
                    "tool.failed".into(),
                    format!("{}: {}", command.command_id, outcome.message),
                ));
                continue;
            }
            replies.push(crate::command::all_the(render_with(
                &spec.config.reply,
                |name| match name {
                    "result" => Some(outcome.message.clone()),
                    _ => command.params.get(name).map(ToString::to_string),
                },
            )));
            if let Some(state) = outcome.state_out {
                steps.boundary.state_out = Some(state);
            }
            if let Some(undo) = self.undo_record(&run, command, spec, call_id) {
                steps.boundary.undo.push(undo);
            }
        }
        steps.reply = match one_reply {
            Some(reply) if steps.failure.is_none() && steps.boundary.state_out.is_none() => {
                crate::command::all_the(reply)
            }
            _ => replies.join(" "),
        };
        Ok(steps)
    }

    /// A command of the chain that ran, recorded: `command.executed` (with
    /// the chain's level and the confirmations said), its tool-result
    /// reasoning step, and a governed command's receipt ("ok" or "failed").
    fn record_outcome(
        &self,
        run: &ChainRun<'_>,
        command: &Command,
        call_id: CallId,
        outcome: &ToolOutcome,
    ) -> Result<CommandRun, RoundError> {
        let (round, chain, confirmations) = (run.round, run.chain, run.confirmations);
        let ok = outcome.status == ToolStatus::Ok;
        round.append(
            EventDraft::new(CommandExecuted {
                command_id: command.command_id.clone(),
                status: if ok { "ok" } else { "failed" }.into(),
                result: outcome.result.clone(),
                auth_level: command.auth_level.get(),
                chain_id: chain.chain_id.clone(),
                chain_level: Some(chain.chain_level.get()),
                confirmations: Some(confirmations),
            })
            .with_call(call_id)
            .with_status(if ok {
                EventStatus::Ok
            } else {
                EventStatus::Failed
            }),
        )?;
        let ran = CommandRun {
            command_id: command.command_id.clone(),
            call_id: Some(call_id.to_string()),
            status: outcome.status.as_str().into(),
        };
        self.tool_result_step(
            round,
            &command.command_id,
            &call_id.to_string(),
            outcome,
            crate::reasoning::StepType::ToolResult,
        )?;
        if let Some(d) = &command.decision {
            let settled = if confirmations > 0 {
                "confirmed"
            } else {
                "not_required"
            };
            self.receipt(
                round,
                &command.command_id,
                json!(command.params),
                d,
                Some(call_id.to_string()),
                if ok { "ok" } else { "failed" },
                settled,
                confirmations,
                run.override_reason.map(OverrideReason::as_str),
            )?;
        }
        Ok(ran)
    }

    /// How to take back a command that ran ("unlock the door" after "lock
    /// the door"), kept for `undo_window_seconds`: only for a level that may
    /// be undone and a command whose config says how.
    fn undo_record(
        &self,
        run: &ChainRun<'_>,
        command: &Command,
        spec: &CommandSpec,
        call_id: CallId,
    ) -> Option<UndoRecord> {
        if !command.auth_level.undoable() {
            return None;
        }
        let undo = spec.config.undo.as_ref()?;
        let now = run.now;
        let window =
            i64::try_from(self.config.authority.undo_window_seconds).unwrap_or(i64::MAX / 4) * 1000;
        Some(UndoRecord {
            id: 0,
            conversation_id: run.round.header().conversation_id.to_string(),
            command_id: command.command_id.clone(),
            call_id: call_id.to_string(),
            summary: command.summary.clone(),
            undo_command: undo.command.clone(),
            undo_params: undo
                .params
                .iter()
                .map(|(k, t)| (k.clone(), render(t, &command.params)))
                .collect(),
            executed_at_ms: now,
            expires_at_ms: now + window,
        })
    }

    /// The command's `reply_many` for a chain of several runs of the same
    /// command, each parameter that differs between them joined ("front
    /// door, back door and side door"); `None` otherwise.
    fn one_reply(&self, chain: &CommandChain) -> Option<String> {
        let [first, rest @ ..] = chain.commands.as_slice() else {
            return None;
        };
        if rest.is_empty() || rest.iter().any(|c| c.command_id != first.command_id) {
            return None;
        }
        let template = self
            .router
            .command(&first.command_id)?
            .config
            .reply_many
            .as_deref()?;
        Some(crate::command::render_with(template, |name| {
            let mut values: Vec<String> = Vec::new();
            for c in &chain.commands {
                let v = c.params.get(name)?.to_string();
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            Some(crate::command::join_with(&values, "and"))
        }))
    }

    /// A new call of `command`: `tool.request`, the call, `tool.response`.
    /// A read-only command whose executor failed transiently is called again
    /// (a new call id each time, up to `llm.tool_retries`, with backoff); a
    /// command with side effects never is: the user asks again, and the
    /// gate asks again for whatever needs a confirmation.
    fn run_tool(
        &self,
        round: &OpenRound,
        command: &Command,
        spec: &CommandSpec,
        now: i64,
        retries: &mut Vec<RetryNote>,
    ) -> Result<(CallId, crate::tools::ToolOutcome), RoundError> {
        let header = round.header();
        let round_id = header.round_id.to_string();
        let max_attempts = if spec.config.side_effects {
            1
        } else {
            1 + self.config.llm.tool_retries
        };
        let mut attempt = 1;
        loop {
            let call = &ToolCall {
                call_id: CallId::new(),
                command,
                spec,
                conversation_id: header.conversation_id.as_str(),
                round_id: &round_id,
                now_ms: now,
            };
            let (tool_id, inputs) = self.tools.describe(call);
            let call_id = call.call_id.to_string();
            round.append(
                EventDraft::new(ToolRequest {
                    tool_id: tool_id.clone(),
                    call_id: call_id.clone(),
                    inputs,
                    attempt,
                    side_effects: spec.config.side_effects,
                })
                .with_call(call.call_id),
            )?;
            let outcome = self.tools.execute(call)?;
            let ok = outcome.status == ToolStatus::Ok;
            round.append(
                EventDraft::new(ToolResponse {
                    tool_id,
                    call_id,
                    latency_ms: outcome.latency_ms,
                    result: outcome.result.clone(),
                    status: outcome.status.as_str().into(),
                    transient: outcome.transient,
                    attempt,
                })
                .with_call(call.call_id)
                .with_status(if ok {
                    EventStatus::Ok
                } else {
                    EventStatus::Failed
                }),
            )?;
            if ok || !outcome.transient || attempt >= max_attempts {
                return Ok((call.call_id, outcome));
            }
            retries.push(RetryNote {
                stage: "tool".into(),
                tier: None,
                attempt,
                reason: format!("{}: {}", command.command_id, outcome.message),
            });
            std::thread::sleep(std::time::Duration::from_millis(
                100 << (attempt - 1).min(4),
            ));
            attempt += 1;
        }
    }

    /// Reverses the conversation's last level-2 command, inside its window.
    fn undo(&self, round: &OpenRound, now: i64) -> Result<Steps, RoundError> {
        let conversation = round.header().conversation_id.clone();
        let Some(record) = self.state.last_undoable(&conversation)? else {
            return Ok(Steps::reply("There's nothing to undo."));
        };
        let window_s = self.config.authority.undo_window_seconds;
        if now > record.expires_at_ms {
            round.append(
                EventDraft::new(CommandReversed {
                    command_id: record.command_id.clone(),
                    status: "skipped".into(),
                    reason: format!("the undo window of {window_s} s had passed"),
                    original_call_id: record.call_id.clone(),
                    undo_command: None,
                })
                .with_status(EventStatus::Skipped),
            )?;
            return Ok(Steps::reply(format!(
                "It's too late to undo \"{}\": changes can be undone for {}.",
                record.summary,
                crate::command::human_duration(window_s)
            )));
        }
        let command = match self.router.resolve_command(
            &record.undo_command,
            record.undo_params.clone(),
            None,
            None,
        ) {
            Ok(c) => c,
            Err(problem) => {
                return Ok(Steps::failed(
                    format!("I can't undo \"{}\": {}.", record.summary, problem.message),
                    problem.code,
                    problem.message,
                ));
            }
        };
        let Some(spec) = self.router.command(&command.command_id) else {
            return Ok(Steps::reply("There's nothing to undo."));
        };
        let mut retries = Vec::new();
        let (call_id, outcome) = self.run_tool(round, &command, spec, now, &mut retries)?;
        let ok = outcome.status == ToolStatus::Ok;
        self.tool_result_step(
            round,
            &command.command_id,
            &call_id.to_string(),
            &outcome,
            crate::reasoning::StepType::Correction,
        )?;
        let undo_decision = ToolDecision {
            tool_name: crate::llm::toolbox::tool_name(&command.command_id),
            command_id: command.command_id.clone(),
            rationale: format!(
                "Asked to undo \"{}\" (call {}), inside its undo window.",
                record.summary, record.call_id
            ),
            parameters: json!(command.params),
            outcome: outcome.status.as_str().into(),
            parallel_group: None,
            call_id: Some(call_id.to_string()),
            decided_by: "rule".into(),
        };
        round.append(
            EventDraft::new(CommandReversed {
                command_id: record.command_id.clone(),
                status: if ok { "ok" } else { "failed" }.into(),
                reason: "undo requested".into(),
                original_call_id: record.call_id.clone(),
                undo_command: Some(command.command_id.clone()),
            })
            .with_call(call_id)
            .with_status(if ok {
                EventStatus::Ok
            } else {
                EventStatus::Failed
            }),
        )?;
        let run = CommandRun {
            command_id: command.command_id.clone(),
            call_id: Some(call_id.to_string()),
            status: outcome.status.as_str().into(),
        };
        let mut steps = if ok {
            let mut s = Steps::reply(format!("Undone: {}.", record.summary));
            s.boundary.undone = Some(Undone {
                call_id: record.call_id.clone(),
                at_ms: self.clock.now_ms(),
            });
            s
        } else {
            Steps::failed(
                format!(
                    "I couldn't undo \"{}\": {}.",
                    record.summary, outcome.message
                ),
                "tool.failed",
                outcome.message,
            )
        };
        steps.commands.push(run);
        steps.retries = retries;
        steps.decisions.push(undo_decision);
        Ok(steps)
    }
}

/// What every command of a chain is run with: the round that records it,
/// the chain, and how the gate let it through (the confirmations said, an
/// override's reason), at the round's time.
struct ChainRun<'a> {
    round: &'a OpenRound,
    chain: &'a CommandChain,
    confirmations: u8,
    override_reason: Option<OverrideReason>,
    now: i64,
}

impl ChainRun<'_> {
    /// A command not run because one before it failed: `command.executed`
    /// as skipped, with the failure as its reason.
    fn skipped(&self, command: &Command, reason: &str) -> Result<CommandRun, StoreError> {
        self.round.append(
            EventDraft::new(CommandExecuted {
                command_id: command.command_id.clone(),
                status: "skipped".into(),
                result: json!({"reason": format!("not run: {reason}")}),
                auth_level: command.auth_level.get(),
                chain_id: self.chain.chain_id.clone(),
                ..CommandExecuted::default()
            })
            .with_status(EventStatus::Skipped),
        )?;
        Ok(CommandRun {
            command_id: command.command_id.clone(),
            call_id: None,
            status: "skipped".into(),
        })
    }
}
