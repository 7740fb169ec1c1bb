//! Rounds that ask a model, against local HTTP servers speaking the real
//! OpenAI and Ollama wire formats, with scripted faults: retries counted and
//! bounded, escalation taken, a clarification after the last retry, and no
//! side-effecting call repeated.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};

use super::tests::Home;
use crate::{
    config::Config,
    llm::{Provider, ProviderKind, Tier, Tiers},
    testing::{NO_DELAY, Server},
};

fn openai_answer(text: &str) -> String {
    json!({"model": "smol", "choices": [{"index": 0, "finish_reason": "stop",
           "message": {"role": "assistant", "content": text}}],
           "usage": {"prompt_tokens": 30, "completion_tokens": 8}})
    .to_string()
}

fn openai_tool(name: &str, arguments: Value) -> String {
    json!({"model": "smol", "choices": [{"index": 0, "finish_reason": "tool_calls",
           "message": {"role": "assistant", "content": "Doing that now.", "tool_calls": [
               {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}}]})
    .to_string()
}

fn ollama_answer(text: &str) -> String {
    json!({"model": "big", "message": {"role": "assistant", "content": text}, "done": true,
           "done_reason": "stop", "prompt_eval_count": 30, "eval_count": 8})
    .to_string()
}

fn tiers(local: Option<&Server>, remote: Option<&Server>) -> Arc<Tiers> {
    Arc::new(Tiers {
        local: local.map(|s| {
            Tier::fixed(
                "local",
                Provider::new(ProviderKind::OpenAi, &s.url, "smol", None, 400),
            )
        }),
        remote: remote.map(|s| {
            Tier::fixed(
                "remote",
                Provider::new(ProviderKind::Ollama, &s.url, "big", None, 2_000),
            )
        }),
    })
}

fn home(config: &str, local: Option<&Server>, remote: Option<&Server>) -> Home {
    Home::with_llm(
        Config::from_toml_over_defaults(config).unwrap(),
        Arc::new(|_| None),
        Some(tiers(local, remote)),
    )
}

#[test]
fn a_question_is_answered_by_the_local_tier_and_every_step_recorded() {
    let local = Server::start(|_, _| {
        (
            200,
            openai_answer("Paris is the capital of France."),
            NO_DELAY,
        )
    });
    // A tier trusted to answer in words (`[llm] answer_with`).
    let home = home("[llm]\nanswer_with = [\"local\"]\n", Some(&local), None);
    let key = "AKIAIOSFODNN7EXAMPLE";
    let r = home.say(
        "c",
        &format!("what is the capital of france, my key is {key}"),
    );
    assert_eq!(r.reply, "Paris is the capital of France.");
    assert_eq!(r.route_code, "intent.chat");
    let llm = r.llm.clone().unwrap();
    assert_eq!(
        (
            llm.tier.as_deref(),
            llm.attempts,
            llm.escalated,
            llm.outcome.as_str()
        ),
        (Some("local"), 1, false, "answer")
    );
    assert!(r.retries.is_empty());

    // The model got the system prompt, the scrubbed question and the commands as tools.
    let seen = local.seen();
    assert_eq!(
        (seen.len(), seen[0].path.as_str()),
        (1, "/v1/chat/completions")
    );
    let body = seen[0].body.to_string();
    assert!(!body.contains(key), "a secret reached the model: {body}");
    assert!(body.contains("secret_ref:aws_access_key_id:"), "{body}");
    assert!(body.contains("You are CAAL"), "{body}");
    let tools: Vec<&str> = seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"lights_set") && tools.contains(&"door_unlock"),
        "{tools:?}"
    );

    let request = &home.of_type("c", "llm.request")[0];
    assert!(
        request["prompt_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        request["prompt_head"]
            .as_str()
            .unwrap()
            .starts_with("system: You are CAAL")
    );
    assert_eq!(
        (request["tier"].as_str(), request["attempt"].as_u64()),
        (Some("local"), Some(1))
    );
    let response = &home.of_type("c", "llm.response")[0];
    assert_eq!(response["text"], "Paris is the capital of France.");
    assert_eq!(response["usage"]["completion_tokens"], 8);
    let verdicts = home.of_type("c", "validator.ran");
    let ids: Vec<&str> = verdicts
        .iter()
        .map(|v| v["validator_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "output_shape",
            "refusal_garbage",
            "tool_call",
            "secret_ref_leak",
            "prompt_or_code",
            "claims_change",
            "grounded",
            "off_topic"
        ]
    );
    assert!(verdicts.iter().all(|v| v["status"] == "ok"), "{verdicts:?}");
}

#[test]
fn faults_are_retried_a_bounded_number_of_times_then_escalated() {
    // 500, malformed JSON, a timeout (the tier waits 400 ms): three local attempts.
    let local = Server::start(|n, _| match n {
        1 => (500, "upstream exploded".into(), NO_DELAY),
        2 => (200, "{\"choices\": [".into(), NO_DELAY),
        _ => (200, openai_answer("too late"), Duration::from_millis(1500)),
    });
    let remote = Server::start(|_, _| {
        (
            200,
            ollama_answer("Paris is the capital of France."),
            NO_DELAY,
        )
    });
    let home = home("", Some(&local), Some(&remote));
    let r = home.say("c", "what is the capital of france");
    assert_eq!(r.reply, "Paris is the capital of France.");
    let llm = r.llm.unwrap();
    assert_eq!(
        (
            llm.tier.as_deref(),
            llm.model.as_deref(),
            llm.attempts,
            llm.escalated
        ),
        (Some("remote"), Some("big"), 4, true)
    );
    assert_eq!(local.seen().len(), 3, "1 attempt + local_retries (2)");
    assert_eq!(remote.seen().len(), 1);
    assert_eq!(remote.seen()[0].path, "/api/chat");
    let reasons: Vec<String> = r.retries.iter().map(|n| n.reason.clone()).collect();
    assert_eq!(r.retries.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("HTTP 500"), "{reasons:?}");
    assert!(reasons[1].contains("not a chat response"), "{reasons:?}");
    assert!(
        reasons[2].contains("did not answer within 400 ms"),
        "{reasons:?}"
    );
    let failed = home
        .events("c")
        .iter()
        .filter(|e| e.event_type == "llm.response" && e.status == "failed")
        .count();
    assert_eq!(failed, 3);
}

#[test]
fn with_no_remote_tier_the_user_is_asked_to_rephrase_after_the_last_retry() {
    let local = Server::start(|_, _| (200, openai_answer("   "), NO_DELAY));
    let home = home(
        "[llm]\nlocal_retries = 1\nanswer_with = [\"local\"]\n",
        Some(&local),
        None,
    );
    let r = home.say("c", "what is the capital of france");
    assert_eq!(
        r.reply,
        "I'm not sure I understood that. Could you say it another way?"
    );
    let llm = r.llm.unwrap();
    assert!(llm.clarified);
    assert_eq!(llm.attempts, 2, "1 attempt + local_retries (1)");
    assert_eq!(local.seen().len(), 2);
    assert_eq!(r.retries.len(), 2);
    assert!(r.retries[0].reason.contains("validator.empty"));
    let verdicts = home.of_type("c", "validator.ran");
    let last = verdicts.last().unwrap();
    assert_eq!(
        (last["code"].as_str(), last["status"].as_str()),
        (Some("validator.exhausted"), Some("error"))
    );
    // The retry told the model what was wrong.
    let second = local.seen()[1].body["messages"].to_string();
    assert!(
        second.contains("not usable") && second.contains("validator.empty"),
        "{second}"
    );
    // Retries vary: the first attempt is greedy, the next is not.
    assert_eq!(local.seen()[0].body["temperature"], 0.0);
    assert!(local.seen()[1].body["temperature"].as_f64().unwrap() > 0.0);
}

#[test]
fn wrong_tool_arguments_are_retried_and_the_command_runs_once() {
    let local = Server::start(|n, _| match n {
        1 => (
            200,
            openai_tool("lights_set", json!({"room": "kitchen", "state": "purple"})),
            NO_DELAY,
        ),
        2 => (200, openai_tool("open_everything", json!({})), NO_DELAY),
        _ => (
            200,
            openai_tool("lights_set", json!({"room": "kitchen", "state": "on"})),
            NO_DELAY,
        ),
    });
    let home = home(
        "[llm]\ntool_auth_floor = 1\npropose_with = [\"local\"]\n",
        Some(&local),
        None,
    );
    let r = home.say("c", "could you make it bright in the kitchen");
    assert_eq!(r.reply, "Okay, the kitchen lights are on.");
    assert_eq!(
        (r.route_code.as_str(), r.command_id.as_deref()),
        ("intent.command", Some("lights.set"))
    );
    assert_eq!(local.seen().len(), 3);
    assert_eq!(r.retries.len(), 2);
    assert!(
        r.retries[0].reason.contains("validator.bad_arguments"),
        "{:?}",
        r.retries
    );
    assert!(
        r.retries[1].reason.contains("validator.unknown_tool"),
        "{:?}",
        r.retries
    );
    assert_eq!(home.executed("c", "lights.set"), 1);
    // The model's decision is a route of its own, and its narrative is kept.
    let routes = home.of_type("c", "route.selected");
    assert_eq!(routes.len(), 2);
    assert_eq!(
        (
            routes[1]["decided_by"].as_str(),
            routes[1]["command_id"].as_str()
        ),
        (Some("llm"), Some("lights.set"))
    );
    let answers = home.of_type("c", "llm.response");
    assert_eq!(answers[2]["narrative"], "Doing that now.");
    assert_eq!(
        answers[2]["tool_calls"][0]["arguments"],
        json!({"room": "kitchen", "state": "on"})
    );
}

#[test]
fn a_small_models_guess_at_a_command_is_not_taken_unless_its_tier_proposes() {
    let local = Server::start(|_, _| {
        (
            200,
            openai_tool("lights_set", json!({"room": "kitchen", "state": "on"})),
            NO_DELAY,
        )
    });
    let home = home("", Some(&local), None);
    let r = home.say("c", "it's gloomy by the stove");
    assert!(
        r.reply.starts_with("I can't help with that."),
        "{}",
        r.reply
    );
    assert!(r.pending_confirmation.is_none());
    assert_eq!(home.executed("c", "lights.set"), 0);
    // It was asked (its words may quote memory), and what it proposed is
    // kept for the operator, marked withheld.
    assert_eq!(local.seen().len(), 1);
    assert_eq!(r.llm.as_ref().unwrap().outcome, "withheld");
    let steps = home.of_type("c", "reasoning.step");
    assert!(
        steps.iter().any(|s| s["content"]
            .as_str()
            .unwrap_or("")
            .contains("not in [llm] propose_with")),
        "{steps:?}"
    );
}

#[test]
fn a_command_a_model_picks_still_passes_the_authority_gate() {
    let local = Server::start(|_, _| {
        (
            200,
            openai_tool(
                "door_unlock",
                json!({"door": "front door", "_justification": "The user's friend is waiting at the front door to be let in."}),
            ),
            NO_DELAY,
        )
    });
    // A tier asked to propose commands for talk (`[llm] propose_with`).
    let home = home("[llm]\npropose_with = [\"local\"]\n", Some(&local), None);
    let asked = home.say("c", "let my friend in");
    assert_eq!(asked.reply, "Unlock the front door? Say yes to confirm.");
    assert_eq!(home.executed("c", "door.unlock"), 0);
    let done = home.say("c", "yes");
    assert_eq!(done.reply, "The front door is unlocked.");
    assert_eq!(home.executed("c", "door.unlock"), 1);
    assert_eq!(
        local.seen().len(),
        1,
        "the yes was routed by rules, not asked of the model"
    );

    // The default floor: even a level-1 command a model picks is confirmed first.
    let local = Server::start(|_, _| {
        (
            200,
            openai_tool("lights_set", json!({"state": "off"})),
            NO_DELAY,
        )
    });
    let home = super::llm_tests::home("[llm]\npropose_with = [\"local\"]\n", Some(&local), None);
    let asked = home.say("c", "it's too bright");
    assert_eq!(asked.auth_level, 3);
    assert_eq!(asked.reply, "Turn off all the lights? Say yes to confirm.");
    assert_eq!(home.executed("c", "lights.set"), 0);
    // In the conversation state no tools are offered at all.
    home.say("c", "no");
    home.say("c", "switch to conversation mode");
    home.say("c", "it's too bright");
    assert!(local.seen().last().unwrap().body.get("tools").is_none());
}

#[test]
fn a_refusal_escalates_at_once_and_research_goes_to_the_remote_tier_first() {
    let local = Server::start(|_, _| {
        (
            200,
            openai_answer("As an AI language model, I cannot know that."),
            NO_DELAY,
        )
    });
    let remote = Server::start(|_, _| {
        (
            200,
            ollama_answer("The Eiffel Tower is 330 metres tall."),
            NO_DELAY,
        )
    });
    let home = home("", Some(&local), Some(&remote));
    let r = home.say("c", "how tall is the eiffel tower");
    assert_eq!(r.reply, "The Eiffel Tower is 330 metres tall.");
    assert_eq!(
        local.seen().len(),
        1,
        "a refusal is not retried on the same tier"
    );
    assert!(r.retries[0].reason.contains("validator.refusal"));

    // Research runs as a job: the round answers at once, the job asks the remote tier first.
    let r = home.say("c", "look up the height of the eiffel tower");
    assert_eq!(r.route_code, "intent.research");
    assert_eq!(r.reply, super::jobs::ACCEPTED);
    assert!(r.llm.is_none(), "the asking round asks no model");
    let told = home.engine.run_jobs_now().unwrap();
    assert_eq!(told[0].text, "The Eiffel Tower is 330 metres tall.");
    assert_eq!((local.seen().len(), remote.seen().len()), (1, 2));
    // Research is answered in words: no tools are offered.
    assert!(remote.seen()[1].body.get("tools").is_none());
}

#[test]
fn research_runs_as_a_job_retried_like_a_read_only_call_and_told_in_its_own_round() {
    // The model is busy once (503), then answers.
    let local = Server::start(|n, _| match n {
        1 => (503, "busy".into(), NO_DELAY),
        _ => (
            200,
            openai_answer("Mount Everest is 8,849 metres high."),
            NO_DELAY,
        ),
    });
    let home = home("", Some(&local), None);
    let mut heard = home.engine.notifications();
    let asked = home.say("c", "look up how high mount everest is");
    assert_eq!(asked.reply, super::jobs::ACCEPTED);
    let enqueued = home.of_type("c", "job.enqueued");
    assert_eq!(enqueued.len(), 1);
    assert_eq!(enqueued[0]["class"], "research");
    let job_id = enqueued[0]["job_id"].as_str().unwrap().to_owned();
    // Meanwhile the conversation goes on: a command runs while the job waits.
    assert_eq!(
        home.say("c", "turn on the kitchen lights").reply,
        "Okay, the kitchen lights are on."
    );
    assert!(local.seen().is_empty(), "nothing asked a model yet");

    let told = home.engine.run_jobs_now().unwrap();
    assert_eq!(told.len(), 1);
    let n = &told[0];
    assert_eq!(
        (n.kind, n.text.as_str(), n.conversation_id.as_str()),
        ("job", "Mount Everest is 8,849 metres high.", "c")
    );
    assert_eq!(heard.try_recv().unwrap(), *n);
    // The work: its own conversation, the failed attempt and the retry recorded.
    let job = &home.engine.jobs(10).unwrap()[0];
    assert_eq!((job.state.as_str(), job.attempts), ("done", 1));
    let work = home.events(&format!("job-{}", job.id));
    let types: Vec<&str> = work
        .iter()
        .map(|e| e.event_type.as_str())
        .filter(|t| *t != "validator.ran")
        .collect();
    assert_eq!(
        types,
        [
            "round.started",
            "input.received",
            "job.progress",
            "llm.request",
            "llm.response",
            "llm.request",
            "llm.response",
            "job.result",
            "round.completed"
        ]
    );
    let responses: Vec<Value> = work
        .iter()
        .filter(|e| e.event_type == "llm.response")
        .map(super::tests::payload)
        .collect();
    assert_eq!(responses.len(), 2, "one retry after the 503");
    assert_eq!(local.seen().len(), 2);
    // The telling: a system round of the asking conversation naming the work round.
    let result = home.of_type("c", "job.result");
    assert_eq!(result.len(), 1);
    assert_eq!(result[0]["job_id"], job_id);
    assert_eq!(result[0]["status"], "done");
    assert_eq!(
        result[0]["result"]["work_round_id"],
        json!(job.work_round_id)
    );
    assert!(home.engine.store().reader().verify(None).unwrap().ok);
}

#[test]
fn a_cancelled_job_stops_and_says_so_and_a_dead_processes_job_is_queued_again_or_failed() {
    let local = Server::start(|_, _| (200, openai_answer("It is 42."), NO_DELAY));
    let home = home("", Some(&local), None);
    home.say("c", "look up the answer to everything");
    let job = home.engine.jobs(1).unwrap().remove(0);
    let said = home
        .engine
        .cancel_job(&job.job_id, super::Channel::Cli)
        .unwrap();
    assert_eq!(
        said.as_deref(),
        Some("I stopped looking up the answer to everything.")
    );
    assert!(
        home.engine.run_jobs_now().unwrap().is_empty(),
        "a cancelled job never runs"
    );
    assert!(local.seen().is_empty());
    assert_eq!(
        home.engine
            .cancel_job(&job.job_id, super::Channel::Cli)
            .unwrap(),
        None
    );
    let results = home.of_type("c", "job.result");
    assert_eq!(results[0]["status"], "cancelled");

    // A job claimed when the process died: queued again at the next start, and run.
    home.say("d", "look up the meaning of life");
    let claimed = home
        .engine
        .state()
        .transaction(|c| crate::schedule::jobs::claim_next(c, 0))
        .unwrap()
        .unwrap();
    assert_eq!(claimed.attempts, 1);
    let home = home.restart();
    let scheduler = home.engine.start_scheduler().unwrap();
    let mut heard = home.engine.notifications();
    let n = loop {
        let n = heard.blocking_recv().unwrap();
        if n.kind == "job" {
            break n;
        }
    };
    drop(scheduler);
    assert_eq!(
        (n.conversation_id.as_str(), n.text.as_str()),
        ("d", "It is 42.")
    );
    assert_eq!(
        home.engine
            .jobs(10)
            .unwrap()
            .iter()
            .find(|j| j.id == claimed.id)
            .unwrap()
            .attempts,
        2
    );

    // Its attempts spent when the process died again: failed, and told so.
    home.say("e", "look up the tallest tree");
    let claimed = home.engine.state().transaction(|c| {
        crate::schedule::jobs::claim_next(c, 0)?;
        c.execute("UPDATE jobs SET attempts = 2 WHERE state = 'running'", [])?;
        Ok(())
    });
    claimed.unwrap();
    let home = home.restart();
    drop(home.engine.start_scheduler().unwrap());
    let said = home.of_type("e", "output.emitted");
    assert_eq!(
        said.last().unwrap()["text"],
        "I couldn't look up the tallest tree: CAAL stopped while it ran, and it has been tried as often as it may be."
    );
    assert_eq!(home.of_type("e", "job.result")[0]["status"], "failed");
}

#[test]
fn executor_faults_repeat_only_read_only_commands() {
    // The webhook fails with 503 twice, then answers.
    let hook = Server::start(|n, _| match n {
        1 | 2 => (503, "busy".into(), NO_DELAY),
        _ => (200, r#"{"ok":true,"items":[]}"#.into(), NO_DELAY),
    });
    let config = format!(
        r#"
        [executors.webhooks.n8n]
        url = "{}/hook"
        timeout_ms = 400
        [commands."shopping.list"]
        executor = "webhook:n8n"
        [commands."lights.set"]
        executor = "webhook:n8n"
        "#,
        hook.url
    );
    let home = Home::with(
        Config::from_toml_over_defaults(&config).unwrap(),
        Arc::new(|_| None),
    );
    let r = home.say("c", "what's on the shopping list");
    assert_eq!(r.status, "ok", "{r:?}");
    assert_eq!(hook.seen().len(), 3, "read-only: 1 call + tool_retries (2)");
    assert_eq!(r.retries.len(), 2);
    assert_eq!(r.retries[0].stage, "tool");
    let calls: Vec<String> = home
        .of_type("c", "tool.request")
        .iter()
        .map(|p| p["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls.len(), 3);
    assert!(
        calls[0] != calls[1] && calls[1] != calls[2],
        "each attempt is its own call"
    );

    // A command with side effects is never repeated: it fails once and says so.
    let hook = Server::start(|_, _| (503, "busy".into(), NO_DELAY));
    let home = Home::with(
        Config::from_toml_over_defaults(&config.replace(&hook_url_of(&config), &hook.url)).unwrap(),
        Arc::new(|_| None),
    );
    let r = home.say("c", "turn on the kitchen lights");
    assert_eq!(r.status, "failed");
    assert_eq!(hook.seen().len(), 1);
    assert!(r.retries.is_empty());
}

fn hook_url_of(config: &str) -> String {
    let start = config.find("http://").unwrap();
    let end = config[start..].find("/hook").unwrap();
    config[start..start + end].to_owned()
}

#[test]
fn incoherent_or_absurdly_long_input_never_reaches_a_model() {
    let local = Server::start(|_, _| (200, openai_answer("Fine."), NO_DELAY));
    let home = home("[llm]\nanswer_with = [\"local\"]\n", Some(&local), None);
    for said in [
        "[BLANK_AUDIO]".to_owned(),
        "um um um um um".to_owned(),
        "tell me a story ".repeat(1_500),
    ] {
        let r = home.say("c", &said);
        assert_eq!(
            (r.route_code.as_str(), r.reply.as_str()),
            ("intent.incoherent", crate::retry::REPEAT_PLEASE)
        );
        assert!(r.llm.is_none());
    }
    let codes: Vec<String> = home
        .of_type("c", "validator.ran")
        .iter()
        .map(|v| v["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        codes,
        [
            "validator.noise",
            "validator.repetition",
            "validator.too_long"
        ]
    );
    assert!(local.seen().is_empty());
    // Something that makes sense does reach it.
    assert_eq!(home.say("c", "tell me a story").reply, "Fine.");
}

#[test]
fn a_tier_not_trusted_with_words_never_answers_talk_and_caal_says_what_it_can_do() {
    // The embedded small model's kind of answer (seen from SmolLM2-135M).
    let local = Server::start(|_, _| {
        (
            200,
            openai_answer("You can find all the tools in your home."),
            NO_DELAY,
        )
    });
    // Asked for a command near what was said (`propose_with`): its words
    // are still not given.
    let small = home("[llm]\npropose_with = [\"local\"]\n", Some(&local), None);
    let r = small.say("c", "how many seconds are in a minute");
    assert_eq!(r.route_code, "intent.chat");
    let offers = "I can't help with that. I look after the lights, the heating, the doors, \
                  the garage, timers, reminders and the shopping list.";
    assert!(r.reply.starts_with(offers), "{}", r.reply);
    assert!(!r.reply.contains("tools in your home"), "{}", r.reply);
    // The model was asked (unit tests have no meaning layer to say nothing
    // is near), and what it said is kept for the operator, marked withheld.
    assert_eq!(local.seen().len(), 1);
    let llm = r.llm.clone().unwrap();
    assert_eq!(
        (llm.tier.as_deref(), llm.outcome.as_str()),
        (Some("local"), "withheld")
    );
    let response = &small.of_type("c", "llm.response")[0];
    assert_eq!(response["text"], "You can find all the tools in your home.");
    let steps = small.of_type("c", "reasoning.step");
    assert!(
        steps.iter().any(|s| s["step_type"] == "decision"
            && s["source"] == "engine"
            && s["content"].as_str().unwrap().contains("answer_with")),
        "{steps:?}"
    );
    // A state chosen for chatting gives its words.
    small.say("c", "switch to conversation mode");
    assert_eq!(
        small.say("c", "how many seconds are in a minute").reply,
        "You can find all the tools in your home."
    );
    // Named to propose (`propose_with`), a tool call it makes is a
    // proposal, asked first.
    let proposing = Server::start(|_, _| {
        (
            200,
            openai_tool("lights_set", json!({"room": "kitchen", "state": "on"})),
            NO_DELAY,
        )
    });
    let proposed = home(
        "[llm]\npropose_with = [\"local\"]\n",
        Some(&proposing),
        None,
    );
    let r = proposed.say("c", "it's gloomy by the stove");
    assert!(r.pending_confirmation.is_some(), "{r:?}");
    // A remote tier answers in words by default.
    let remote = Server::start(|_, _| (200, ollama_answer("Sixty."), NO_DELAY));
    let broken = Server::start(|_, _| (500, "{}".into(), NO_DELAY));
    let answered = home("", Some(&broken), Some(&remote));
    assert_eq!(
        answered.say("c", "how many seconds are in a minute").reply,
        "Sixty."
    );
}
