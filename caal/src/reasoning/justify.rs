//! A model's justification for a governed command, checked before anything
//! runs: present, of some substance, not a parroted phrase, and (when
//! configured) coherent with the action according to a model tier. The
//! verdict decides, by `on_missing_justification` and `on_check_error`,
//! whether the command is blocked, escalated (one more confirmation) or
//! allowed, and goes into the action's receipt.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::{Policy, ReasoningConfig};

/// One check's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub check_id: String,
    pub method: String,
    pub passed: bool,
    pub score: f64,
    pub latency_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `full` (every check passed), `partial`, or `none` (all failed, or none ran).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Assurance {
    Full,
    Partial,
    None,
}

/// What the policy did with the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Applied {
    /// Everything passed: nothing to apply.
    None,
    Blocked,
    Escalated,
    Allowed,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub assurance: Assurance,
    pub overall_score: f64,
    pub passed: bool,
    pub checks: Vec<CheckResult>,
    pub applied: Applied,
    /// Why the policy applied, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Asks a model how well a reason supports an action (0–1); an error is a check error.
pub type Coherence<'a> = &'a dyn Fn(&str, &str) -> Result<f64, String>;

fn check(id: &str, method: &str, passed: bool, score: f64, started: Instant) -> CheckResult {
    CheckResult {
        check_id: id.into(),
        method: method.into(),
        passed,
        score: (score.clamp(0.0, 1.0) * 1000.0).round() / 1000.0,
        latency_ms: (started.elapsed().as_secs_f64() * 1e6).round() / 1e3,
        detail: None,
    }
}

/// Runs the configured checks on `justification` for `action` (its summary).
pub fn evaluate(
    justification: Option<&str>,
    action: &str,
    config: &ReasoningConfig,
    coherence: Option<Coherence<'_>>,
) -> Evaluation {
    let text = justification.map(str::trim).filter(|t| !t.is_empty());
    let started = Instant::now();
    let mut checks = vec![check(
        "glc_001_justification_present",
        "deterministic_presence",
        text.is_some(),
        if text.is_some() { 1.0 } else { 0.0 },
        started,
    )];
    let Some(text) = text else {
        return conclude(
            checks,
            config.on_missing_justification,
            "no justification was given".into(),
        );
    };
    let started = Instant::now();
    let chars = text.chars().count();
    let min = config.min_justification_chars.max(1);
    let mut substance = check(
        "glc_002_minimum_substance",
        "deterministic_length",
        chars >= min,
        chars as f64 / min as f64,
        started,
    );
    substance.detail = Some(format!("{chars} characters; at least {min} needed"));
    checks.push(substance);

    let started = Instant::now();
    let lower = text.to_lowercase();
    let parroted = config
        .parroting_blocklist
        .iter()
        .find(|phrase| lower.contains(&phrase.to_lowercase()));
    let mut parrot = check(
        "glc_003_no_parroting",
        "deterministic_blocklist",
        parroted.is_none(),
        if parroted.is_none() { 1.0 } else { 0.0 },
        started,
    );
    parrot.detail = parroted.map(|p| format!("says {p:?}, which explains nothing"));
    checks.push(parrot);

    if let (true, Some(ask)) = (config.coherence_check, coherence) {
        let started = Instant::now();
        let mut c = match ask(text, action) {
            Ok(score) => check(
                "glc_005_llm_coherence",
                "llm_coherence",
                score >= config.coherence_threshold,
                score,
                started,
            ),
            Err(e) => {
                let mut c = check(
                    "glc_005_llm_coherence",
                    "llm_coherence",
                    false,
                    0.0,
                    started,
                );
                c.detail = Some(format!("the check could not run: {e}"));
                c
            }
        };
        if c.detail.is_none() {
            c.detail = Some(format!("threshold {}", config.coherence_threshold));
        }
        checks.push(c);
    }
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| match &c.detail {
            Some(d) => format!("{} ({d})", c.check_id),
            None => c.check_id.clone(),
        })
        .collect();
    let reason = format!("the justification failed {}", failed.join(", "));
    conclude(checks, config.on_check_error, reason)
}

fn conclude(checks: Vec<CheckResult>, policy: Policy, reason: String) -> Evaluation {
    let passed_count = checks.iter().filter(|c| c.passed).count();
    let passed = passed_count == checks.len() && !checks.is_empty();
    let assurance = match passed_count {
        0 => Assurance::None,
        n if n == checks.len() => Assurance::Full,
        _ => Assurance::Partial,
    };
    let overall_score = if checks.is_empty() {
        0.0
    } else {
        let mean = checks.iter().map(|c| c.score).sum::<f64>() / checks.len() as f64;
        (mean * 1000.0).round() / 1000.0
    };
    let applied = if passed {
        Applied::None
    } else {
        match policy {
            Policy::Block => Applied::Blocked,
            Policy::Escalate => Applied::Escalated,
            Policy::Allow => Applied::Allowed,
        }
    };
    Evaluation {
        assurance,
        overall_score,
        passed,
        checks,
        applied,
        reason: (!passed).then_some(reason),
    }
}

/// Reads a model's coherence answer: the first number in it, 0–1 (or 0–10, 0–100).
pub fn parse_score(answer: &str) -> Result<f64, String> {
    let number: String = answer
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let value: f64 = number
        .parse()
        .map_err(|_| format!("the model's answer has no score: {answer:?}"))?;
    Ok(match value {
        v if v <= 1.0 => v,
        v if v <= 10.0 => v / 10.0,
        v if v <= 100.0 => v / 100.0,
        _ => return Err(format!("the model's score {value} is out of range")),
    })
}
