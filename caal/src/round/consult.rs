//! The model layer inside a round: when the meaning layer was not sure, the
//! first model tier the state's plan names is asked once which of the
//! nearest meanings was meant (`llm::choose`: by the likelihood of each, or
//! by a tool call held to them), the exchange recorded as `llm.request` /
//! `llm.response` (`purpose: "choose"`, with the scores), and the router
//! turns the pick into the decision (`Router::chosen`), recorded as a
//! second `route.selected` (`decided_by: "model"`). A model that cannot be
//! reached, or answers with no choice, leaves the meaning layer's decision
//! as it was: this layer only ever narrows what the one below it found.

use super::RoundError;

use crate::{
    config::Escalation,
    llm::{cap_prompt, choose},
    router::RouteDecision,
    trace::{
        EventDraft, EventStatus, OpenRound,
        events::{LlmRequest, LlmResponse, RouteSelected, name_of},
    },
};

use super::Engine;

/// What asking the model came to.
pub(super) struct Consulted {
    pub decision: RouteDecision,
    /// Whether the model's pick replaced the decision.
    pub decided: bool,
}

impl Engine {
    pub(super) fn consult(
        &self,
        round: &OpenRound,
        said: &str,
        decision: RouteDecision,
        state: &str,
    ) -> Result<Consulted, RoundError> {
        let keep = |decision| {
            Ok(Consulted {
                decision,
                decided: false,
            })
        };
        let Some(tiers) = self.llm.as_ref() else {
            return keep(decision);
        };
        let escalation = self
            .router
            .state(state)
            .map_or(Escalation::Normal, |p| p.escalation);
        let Some((tier, _)) = tiers.plan(escalation, &self.config.llm).into_iter().next() else {
            return keep(decision);
        };
        let cfg = &self.config.understand.model;
        let offers = choose::offers(&decision.choices);
        // What is asked, for the trace: the options and what was said.
        let asked: String = offers
            .iter()
            .map(|o| format!("- {}\n", o.label))
            .chain(std::iter::once(format!("said: {said}\n")))
            .collect();
        let capped = cap_prompt(&asked, self.config.llm.max_prompt_chars);
        round.append(EventDraft::new(LlmRequest {
            model: tier.model().to_string(),
            prompt_hash: capped.hash,
            prompt_head: capped.head,
            prompt_tail: capped.tail,
            prompt_truncated: false,
            tier: tier.name.to_string(),
            attempt: 1,
            tools: vec![choose::TOOL.into()],
            purpose: Some("choose".into()),
            method: Some(name_of(&cfg.method)),
        }))?;
        let answer = choose::ask(tier, cfg.method, &cfg.prompt, said, &offers, cfg.max_tokens);
        let picked = answer.picked;
        let response = LlmResponse {
            model: tier.model().to_string(),
            latency_ms: answer.latency_ms,
            tier: tier.name.to_string(),
            attempt: 1,
            purpose: Some("choose".into()),
            method: Some(name_of(&cfg.method)),
            evidence: Some(answer.evidence).filter(|e| !e.is_null()),
            picked: picked.as_ref().ok().map(|&p| p as u64),
            error: picked.as_ref().err().cloned(),
            transient: answer.failed.as_ref().map(|f| f.transient()),
            ..LlmResponse::default()
        };
        round.append(EventDraft::new(response).with_status(if picked.is_ok() {
            EventStatus::Ok
        } else {
            EventStatus::Failed
        }))?;
        let Ok(pick) = picked else {
            return keep(decision);
        };
        let chosen = self.router.chosen(decision, Some(pick), state);
        round.append(EventDraft::new(RouteSelected {
            decided_by: Some("model".into()),
            ..super::stages::route_selected(&chosen, state)
        }))?;
        Ok(Consulted {
            decision: chosen,
            decided: true,
        })
    }
}
