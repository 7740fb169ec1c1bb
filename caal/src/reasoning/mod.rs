//! Reasoning you can see and verify. Each round's reasoning is a sequence of
//! `reasoning.step` events in the same hash-chained log as everything else:
//! a phase (`thinking`, `plan`, `waiting_approval`, `execute`, `error`), a
//! finer step type, scrubbed content, and links to the call, confirmation
//! or policy decision it concerns. Every command decided in a round (by a
//! rule or by a model) is a tool decision with a rationale; a round's
//! decisions so far are summed up in `reasoning.update` after each batch.
//! Governed actions get signed receipts (`receipt`), their justifications
//! checked first (`justify`).

pub mod justify;
pub mod ledger;
pub mod receipt;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The five phases of the audit-log design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Thinking,
    Plan,
    WaitingApproval,
    Execute,
    Error,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Thinking => "thinking",
            Phase::Plan => "plan",
            Phase::WaitingApproval => "waiting_approval",
            Phase::Execute => "execute",
            Phase::Error => "error",
        }
    }

    /// The bracket label of the Markdown export.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Thinking => "[思考]",
            Phase::Plan => "[計画]",
            Phase::WaitingApproval => "[承認待ち]",
            Phase::Execute => "[実行]",
            Phase::Error => "[エラー]",
        }
    }

    fn from_label(label: &str) -> Option<Self> {
        [
            Phase::Thinking,
            Phase::Plan,
            Phase::WaitingApproval,
            Phase::Execute,
            Phase::Error,
        ]
        .into_iter()
        .find(|p| p.label() == label)
    }
}

/// The ledger design's finer step types, where they fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepType {
    Observation,
    Hypothesis,
    Reasoning,
    PlanStep,
    Decision,
    ToolCall,
    ToolResult,
    Action,
    Error,
    Correction,
    Summary,
    FinalAnswer,
}

impl StepType {
    /// What a parsed phase is, absent anything finer.
    pub fn of_phase(phase: Phase) -> Self {
        match phase {
            Phase::Thinking => StepType::Reasoning,
            Phase::Plan => StepType::PlanStep,
            Phase::WaitingApproval => StepType::Decision,
            Phase::Execute => StepType::Action,
            Phase::Error => StepType::Error,
        }
    }
}

/// One step of a round's reasoning, before it is recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub phase: Phase,
    pub step_type: StepType,
    pub content: String,
}

impl Step {
    pub fn new(phase: Phase, content: impl Into<String>) -> Self {
        Self {
            phase,
            step_type: StepType::of_phase(phase),
            content: content.into(),
        }
    }

    pub fn typed(mut self, step_type: StepType) -> Self {
        self.step_type = step_type;
        self
    }
}

fn marker() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\[(?:思考|計画|承認待ち|実行|エラー)\]").expect("the marker pattern compiles")
    })
}

fn list_item() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^(?:[0-9０-９]+[.)．）]|[-*•・])\s*\S").expect("the list pattern compiles")
    })
}

fn plan_word() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\b(?:plan|plans|planning|steps)\b|手順|計画")
            .expect("the plan pattern compiles")
    })
}

fn error_word() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\b(?:error|errors|failed|failure)\b|エラー|失敗")
            .expect("the error pattern compiles")
    })
}

/// Free-form thinking as steps: bracket markers first (they decide the
/// phase of everything up to the next marker); elsewhere, numbered or
/// bulleted lines after a line that speaks of a plan or steps (手順) are a
/// plan, lines with error words (English or Japanese) an error, and
/// anything else thinking, one step per paragraph.
pub fn parse_thinking(text: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut at = 0;
    let mut phase: Option<Phase> = None;
    for m in marker().find_iter(text) {
        push_segment(&mut steps, phase, &text[at..m.start()]);
        phase = Phase::from_label(m.as_str());
        at = m.end();
    }
    push_segment(&mut steps, phase, &text[at..]);
    steps
}

fn push_segment(steps: &mut Vec<Step>, phase: Option<Phase>, segment: &str) {
    let content = segment.trim();
    match phase {
        Some(p) if !content.is_empty() => steps.push(Step::new(p, content)),
        Some(_) => {}
        None => steps.extend(heuristic_steps(segment)),
    }
}

fn heuristic_steps(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    // The step being gathered: thinking (a paragraph) or a plan (a list).
    let mut current: Option<(Phase, Vec<String>)> = None;
    let flush = |steps: &mut Vec<Step>, current: &mut Option<(Phase, Vec<String>)>| {
        if let Some((phase, lines)) = current.take()
            && !lines.is_empty()
        {
            steps.push(Step::new(phase, lines.join("\n")));
        }
    };
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            flush(&mut steps, &mut current);
            continue;
        }
        let is_item = list_item().is_match(t);
        match &mut current {
            Some((Phase::Plan, lines)) if is_item => {
                lines.push(t.to_owned());
                continue;
            }
            Some((Phase::Thinking, lines))
                if is_item && lines.last().is_some_and(|l| plan_word().is_match(l)) =>
            {
                // "The plan:" then a list: the announcing line starts the plan.
                let announce = lines.pop().unwrap_or_default();
                flush(&mut steps, &mut current);
                current = Some((Phase::Plan, vec![announce, t.to_owned()]));
                continue;
            }
            _ => {}
        }
        if error_word().is_match(t) {
            flush(&mut steps, &mut current);
            steps.push(Step::new(Phase::Error, t));
            continue;
        }
        match &mut current {
            Some((Phase::Thinking, lines)) => lines.push(t.to_owned()),
            _ => {
                flush(&mut steps, &mut current);
                current = Some((Phase::Thinking, vec![t.to_owned()]));
            }
        }
    }
    flush(&mut steps, &mut current);
    steps
}

/// One command decided in a round, and what became of it (the summary
/// exposure design's tool decision).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDecision {
    pub tool_name: String,
    pub command_id: String,
    /// Why: the model's words (scrubbed) or a rule's, never empty.
    pub rationale: String,
    pub parameters: Value,
    /// `ok`, `failed`, `skipped`, `awaiting_confirmation`, `blocked`, `denied`, …
    pub outcome: String,
    /// Commands decided together (one model answer or one macro) share a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_group: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// `rule` or `llm`.
    pub decided_by: String,
}

/// Why a command was chosen. It travels with the command, through a pending
/// confirmation, until the command runs or is refused, and ends in its
/// receipt when the command is governed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// `rule` or `llm`.
    pub decided_by: String,
    pub tool_name: String,
    pub rationale: String,
    /// What was decided, as the rule or model gave it: `{tool, arguments}`
    /// (without the justification) or `{rule, words}`.
    pub input: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<justify::Evaluation>,
    pub governed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_group: Option<u32>,
    pub decided_in_round: String,
}

/// A round's reasoning, as the chat, the history endpoint and the stream show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundReasoning {
    pub conversation_id: String,
    pub round_id: String,
    pub round_seq: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrative: Option<String>,
    pub tool_decisions: Vec<ToolDecision>,
}

/// A recorded step, as read back from the trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordedStep {
    pub round_id: String,
    pub round_seq: i64,
    /// 0-based within the round, in chain order.
    pub step_number: usize,
    pub event_seq: i64,
    pub phase: Phase,
    pub step_type: StepType,
    pub content: String,
    pub links: Value,
    pub source: String,
    pub timestamp: String,
}

/// A round's steps for the Markdown export.
pub struct MarkdownRound<'a> {
    pub round_id: &'a str,
    pub round_seq: i64,
    pub created_at: &'a str,
    pub steps: &'a [RecordedStep],
}

/// The audit-log design's human-readable export: a heading per round, then
/// each step behind its bracket label; a plan's list on one line.
pub fn markdown(rounds: &[MarkdownRound<'_>]) -> String {
    let mut out = String::new();
    for r in rounds {
        out.push_str(&format!(
            "## Round {} · {} ({})\n\n",
            r.round_seq, r.round_id, r.created_at
        ));
        if r.steps.is_empty() {
            out.push_str("(no reasoning recorded)\n\n");
        }
        for s in r.steps {
            let content = if s.phase == Phase::Plan {
                s.content
                    .lines()
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join("  ")
            } else {
                s.content.clone()
            };
            let link = s
                .links
                .get("call_id")
                .and_then(Value::as_str)
                .map(|c| format!(" (call: {c})"))
                .or_else(|| {
                    s.links
                        .get("confirmation_id")
                        .and_then(Value::as_str)
                        .map(|c| format!(" (confirmation: {c})"))
                })
                .unwrap_or_default();
            out.push_str(&format!("{} {content}{link}\n\n", s.phase.label()));
        }
    }
    out
}

/// `content` cut to `max` characters, saying how much was cut.
pub fn cap_step(content: &str, max: usize) -> String {
    let total = content.chars().count();
    if total <= max {
        return content.to_owned();
    }
    let kept: String = content.chars().take(max).collect();
    format!("{kept}… [{} more characters not kept]", total - max)
}
