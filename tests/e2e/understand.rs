//! Understanding through the real binary, on the sentence library the
//! setup installs: how people say things, the home model, several requests
//! in one sentence, negations, German, and the benchmark's contract.

use std::fs;

use serde_json::{Value, json};

use crate::support::Sandbox;

fn commands(result: &Value) -> Vec<String> {
    result["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["command_id"].as_str().unwrap(),
                c["status"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn everyday_phrasings_run_the_command_they_mean() {
    let sb = Sandbox::new();
    let mut last_round = String::new();
    for (said, reply, source) in [
        (
            "can you turn on the kitchen lights?",
            "Okay, the kitchen lights are on.",
            "template:HassTurnOn",
        ),
        (
            "kitchen lights on",
            "Okay, the kitchen lights are on.",
            "template:HassTurnOn",
        ),
        (
            "turn off all the lights",
            "Okay, all the lights are off.",
            "template:HassTurnOff",
        ),
        (
            "set a timer for ten minutes.",
            "Timer set for 10 minutes.",
            "template:HassStartTimer",
        ),
        (
            "set a timer for an hour and a half",
            "Timer set for 1 hour 30 minutes.",
            "template:HassStartTimer",
        ),
        (
            "could you set the lounge lights to fifty percent",
            "The living room lights are at 50%.",
            "template:HassLightSet",
        ),
        // A device whose name begins with its room's is the device, not the
        // room's lights.
        (
            "dim the bedroom lamp to 20 percent",
            "The bedroom lamp is at 20%.",
            "template:HassLightSet",
        ),
        (
            "dim the bedroom lights to 20 percent",
            "The bedroom lights are at 20%.",
            "template:HassLightSet",
        ),
        // The home's locks by name.
        (
            "lock the back door",
            "The back door is locked.",
            "template:HassTurnOn",
        ),
        (
            "it's too dark in the office",
            "Okay, the office lights are on.",
            "template:HassTurnOn",
        ),
        (
            "switch off the desk lamp",
            "Okay, the desk lamp is off.",
            "template:HassTurnOff",
        ),
    ] {
        let r = sb.say("c", said);
        assert_eq!(r["reply"], reply, "{said}: {r}");
        assert_eq!(r["source_rule"], source, "{said}");
        assert_eq!(
            r["auth_level"], 1,
            "{said}: a template match runs at its level, no model floor"
        );
        assert_eq!(commands(&r).len(), 1, "{said}");
        assert!(r["pending_confirmation"].is_null(), "{said}");
        last_round = r["round_id"].as_str().unwrap().to_owned();
    }
    // One door of several, not named: asked which, naming them; nothing runs.
    let which = sb.say("d", "lock the door");
    assert!(
        which["reply"]
            .as_str()
            .unwrap()
            .contains("say which door (front door, back door or side door)"),
        "{which}"
    );
    assert_eq!(commands(&which), Vec::<String>::new(), "{which}");
    // What the template layer matched is evidence: route.selected says it.
    let shown = sb
        .run(&["trace", "show", "--json", &last_round])
        .ok()
        .json();
    let routes: Vec<&Value> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "route.selected")
        .collect();
    let last = &routes.last().unwrap()["payload"];
    assert_eq!(last["layer"], "template");
    assert_eq!(last["understood"]["intent"], "HassTurnOff");
    assert_eq!(last["understood"]["slots"]["name"]["said"], "desk lamp");
    assert_eq!(last["understood"]["confidence"], 1.0);
    sb.run(&["trace", "verify"]).ok();
}

#[test]
fn the_home_model_answers_for_what_is_not_there_and_asks_what_is_unclear() {
    let sb = Sandbox::new();
    let attic = sb.say("h", "turn on the attic lights");
    assert!(commands(&attic).is_empty(), "{attic}");
    let reply = attic["reply"].as_str().unwrap();
    assert!(
        reply.contains("no attic here; the rooms are kitchen, living room"),
        "{reply}"
    );

    let lamp = sb.say("h", "turn on the lamp");
    assert!(
        commands(&lamp).is_empty(),
        "nothing runs on a guess: {lamp}"
    );
    let reply = lamp["reply"].as_str().unwrap();
    for which in ["bedroom lamp", "living room lamp", "desk lamp"] {
        assert!(reply.contains(which), "{reply}");
    }
    // "bedroom lamp" said as area + "lamp" is the one lamp in that room.
    let bedroom = sb.say("h", "turn off bedroom lamp");
    assert_eq!(bedroom["reply"], "Okay, the bedroom lamp is off.");

    // A device that is not there is named as not there, with what is.
    let tv = sb.say("h", "turn on the jukebox");
    assert!(commands(&tv).is_empty(), "{tv}");
    assert!(tv["reply"].as_str().unwrap().contains("jukebox"), "{tv}");

    // A rule whose pattern took more than a room ("brightness of the
    // bedroom") yields to what the sentence means, rooms resolved; an
    // unknown room in the same words is still named as not there.
    for said in [
        "set the brightness of the bedroom lights to 40%",
        "turn the brightness on the bedroom lights to 40 percent",
    ] {
        let set = sb.say("h", said);
        assert_eq!(
            set["reply"], "The bedroom lights are at 40%.",
            "{said:?}: {set}"
        );
        // The reasoning says which layer understood it, not "rule".
        let why = set["reasoning"]["tool_decisions"][0]["rationale"]
            .as_str()
            .unwrap();
        assert!(why.contains("by its meaning"), "{why}");
    }
    let attic = sb.say("h", "set the brightness of the attic lights to 40%");
    assert!(commands(&attic).is_empty(), "{attic}");
    assert!(
        attic["reply"].as_str().unwrap().contains("the rooms are"),
        "{attic}"
    );
}

#[test]
fn several_requests_in_one_sentence_are_one_chain_and_negations_never_run() {
    let sb = Sandbox::new();
    let both = sb.say(
        "s",
        "turn on the kitchen lights and set the thermostat to 21",
    );
    assert_eq!(commands(&both), vec!["lights.set ok", "thermostat.set ok"]);
    assert_eq!(
        both["reply"],
        "Okay, the kitchen lights are on. The thermostat is set to 21 °C."
    );
    let borrowed = sb.say("s", "turn on the living room lights and the hall lights");
    assert_eq!(commands(&borrowed), vec!["lights.set ok", "lights.set ok"]);

    // One chain, gated once at its highest level: the unlock asks, nothing runs yet.
    let gated = sb.say("s", "turn off the porch light and unlock the back door");
    assert!(commands(&gated).is_empty(), "{gated}");
    assert_eq!(gated["auth_level"], 3);
    let done = sb.say("s", "yes");
    assert_eq!(commands(&done), vec!["light.set ok", "door.unlock ok"]);

    for said in [
        "don't unlock the front door",
        "do not turn on the lights",
        "never open the garage",
        "please don't lock the back door",
    ] {
        let r = sb.say("s", said);
        assert!(commands(&r).is_empty(), "{said}: {r}");
        assert!(r["pending_confirmation"].is_null(), "{said}");
        assert_eq!(r["route_code"], "intent.negated", "{said}");
        assert!(
            r["reply"].as_str().unwrap().starts_with("Okay, I won't "),
            "{said}: {r}"
        );
    }
}

#[test]
fn german_is_understood_with_the_german_library() {
    let sb = Sandbox::new();
    let cfg = sb.path().join("de.toml");
    fs::write(
        &cfg,
        r#"
[understand]
language = "de"

[home]
areas = [
    { name = "kitchen", aliases = ["küche"] },
    { name = "living room", aliases = ["wohnzimmer"] },
    { name = "hall", aliases = ["flur"] },
]
devices = [
    { name = "front door", id = "front", domain = "lock", aliases = ["haustür"] },
    { name = "thermostat", domain = "climate", aliases = ["heizung"] },
]
"#,
    )
    .unwrap();
    let say = |text: &str| {
        sb.run(&[
            "--config",
            cfg.to_str().unwrap(),
            "say",
            "--json",
            "--conversation",
            "de",
            text,
        ])
        .ok()
        .json()
    };
    let light = say("Schalte bitte das Licht in der Küche ein");
    assert_eq!(commands(&light), vec!["lights.set ok"]);
    assert_eq!(light["reply"], "Okay, the kitchen lights are on.");
    let timer = say("Stelle einen Timer für zehn Minuten");
    assert_eq!(commands(&timer), vec!["timer.set ok"]);
    let heat = say("Stell die Heizung auf einundzwanzig Grad");
    assert_eq!(heat["reply"], "The thermostat is set to 21 °C.");
    let two = say("Schalte das Licht im Wohnzimmer aus und schließ die Haustür ab");
    assert_eq!(commands(&two), vec!["lights.set ok", "door.lock ok"]);
}

#[test]
fn caal_understand_explains_and_the_benchmark_scores_a_suite() {
    let sb = Sandbox::new();
    let shown = sb
        .run(&["understand", "--json", "switch on the study lights"])
        .ok()
        .json();
    assert_eq!(shown["layer"], "template");
    assert_eq!(shown["commands"][0]["command_id"], "lights.set");
    assert_eq!(
        shown["commands"][0]["params"]["room"], "office",
        "an area's other name"
    );
    let text = sb
        .run(&["understand", "turn on the lights here", "--area", "kitchen"])
        .ok()
        .stdout;
    assert!(
        text.contains("lights.set {\"room\":\"kitchen\",\"state\":\"on\"}"),
        "{text}"
    );
    let nowhere = sb
        .run(&["understand", "--json", "turn on the lights here"])
        .ok()
        .json();
    assert_eq!(
        nowhere["route_code"], "intent.clarify",
        "where is unknown: it asks, {nowhere}"
    );

    let suite = sb.path().join("suite.jsonl");
    fs::write(
        &suite,
        concat!(
            "# mine\n",
            "{\"text\": \"turn on the kitchen lights\", \"command\": \"lights.set\", \"params\": {\"room\": \"kitchen\", \"state\": \"on\"}}\n",
            "{\"text\": \"set the thermostat to 19\", \"command\": \"thermostat.set\", \"params\": {\"temperature\": 20}}\n",
            "{\"text\": \"my sister is coming tomorrow\", \"command\": \"-\"}\n",
        ),
    )
    .unwrap();
    let report = sb
        .run(&[
            "bench",
            "understand",
            "--suite",
            suite.to_str().unwrap(),
            "--json",
        ])
        .ok();
    let json: Value = serde_json::from_str(report.stdout.lines().last().unwrap()).unwrap();
    let s = &json["suites"][0];
    assert_eq!(s["lines"], 3);
    assert_eq!(s["command_accuracy"], 1.0);
    assert_eq!(
        s["command_params_accuracy"], 0.5,
        "19 is not the 20 the suite wants"
    );
    assert_eq!(s["ood_executed"], 0);
    assert!(
        report.stdout.contains("miss: \"set the thermostat to 19\""),
        "{}",
        report.stdout
    );

    fs::write(&suite, "{\"text\": \"fine\"}\nnot a line\n").unwrap();
    let bad = sb.run(&["bench", "understand", "--suite", suite.to_str().unwrap()]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("line 2"), "{}", bad.stderr);
}

#[test]
fn what_no_template_foresaw_is_understood_by_its_meaning() {
    let sb = Sandbox::new();
    // Near an example of a request, and sure: it runs, its slots read from what was said.
    let oil = sb.say("m", "we're out of olive oil");
    assert_eq!(commands(&oil), vec!["shopping.add ok"], "{oil}");
    assert_eq!(oil["source_rule"], "semantic:HassShoppingListAddItem");
    let spare = sb.say("m", "get the lights in the spare room");
    assert_eq!(
        spare["reply"], "Okay, the guest room lights are on.",
        "{spare}"
    );
    assert_eq!(spare["auth_level"], 1, "sure: the command's own level");

    // Why: route.selected names the layer, the similarity and the nearest examples.
    let shown = sb
        .run(&[
            "trace",
            "show",
            "--json",
            spare["round_id"].as_str().unwrap(),
        ])
        .ok()
        .json();
    let route = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|e| e["event_type"] == "route.selected")
        .unwrap()["payload"]
        .clone();
    assert_eq!(route["layer"], "semantic", "{route}");
    assert_eq!(route["understood"]["slots"]["area"]["value"], "guest room");
    let nearest = route["understood"]["nearest"].as_array().unwrap();
    assert_eq!(nearest.len(), 3, "{route}");
    assert_eq!(nearest[0]["intent"], "HassTurnOn");
    let first = nearest[0]["similarity"].as_f64().unwrap();
    assert!(
        (0.8..=1.0).contains(&first) && nearest[1]["similarity"].as_f64().unwrap() <= first,
        "{route}"
    );

    // Near a request but not sure: it only asks, and "no" leaves it undone.
    let unsure = sb.say("u", "it's a bit gloomy in the office");
    assert!(commands(&unsure).is_empty(), "{unsure}");
    assert_eq!(
        unsure["pending_confirmation"]["confirmations_required"], 1,
        "{unsure}"
    );
    let no = sb.say("u", "no");
    assert!(commands(&no).is_empty(), "{no}");

    // Talk near examples that are no request, a story about the past (near
    // "it's dark in the office"), and negated requests: nothing.
    for said in [
        "my brother is coming next week",
        "it was dark when I left the office",
        "leave the porch light as it is",
        "no need for the garage door to be open",
    ] {
        let r = sb.say("t", said);
        assert!(commands(&r).is_empty(), "{said}: {r}");
        assert!(r["pending_confirmation"].is_null(), "{said}: {r}");
    }
    // ...but a saying with a negation word that asks is read: "never mind".
    sb.say("n", "set a timer for ten minutes");
    let never_mind = sb.say("n", "never mind the timer");
    assert_eq!(
        commands(&never_mind),
        vec!["timer.cancel ok"],
        "{never_mind}"
    );

    // `caal understand` shows the nearest meanings; with no model configured the layer is off.
    let shown = sb
        .run(&["understand", "--json", "we're out of olive oil"])
        .ok()
        .json();
    assert_eq!(shown["layer"], "semantic");
    assert_eq!(shown["nearest"][0]["intent"], "HassShoppingListAddItem");
    let off = sb.path().join("off.toml");
    fs::write(&off, "[understand.semantic]\nmodel = \"\"\n").unwrap();
    let without = sb
        .run(&[
            "--config",
            off.to_str().unwrap(),
            "understand",
            "--json",
            "we're out of olive oil",
        ])
        .ok()
        .json();
    assert_eq!(without["layer"], "none", "{without}");
    assert!(without["nearest"].is_null());
}

#[test]
fn a_missing_embedding_model_is_named_and_routing_goes_on_without_it() {
    let sb = Sandbox::new();
    let empty = sb.path().join("no-models");
    fs::create_dir_all(&empty).unwrap();
    let models = empty.to_str().unwrap();
    let run = sb.run_env(
        &["understand", "turn on the kitchen lights"],
        &[("CAAL_MODELS_DIR", models)],
    );
    let run = run.ok();
    assert!(
        run.stderr.contains("the embedding model is not in")
            && run.stderr.contains("bash .ci/setup")
            && run.stderr.contains("understand.semantic.model = \"\""),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("lights.set"),
        "templates still route: {}",
        run.stdout
    );
}

/// A model server for the model layer: `/v1/completions` scores each
/// continuation word by word, every word -1 but the preferred option's
/// words (when it follows what was said) -0.1, so the preferred option wins
/// by the same arithmetic a real model's log probabilities go through;
/// `/v1/chat/completions` answers in words.
fn scoring_model(prefer: std::sync::Arc<std::sync::Mutex<String>>) -> crate::support::Peer {
    crate::support::Peer::start(move |path, body| {
        let body: Value = serde_json::from_str(body).unwrap_or_default();
        if path != "/v1/completions" {
            let answer = serde_json::json!({"model": "fake", "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "That sounds like a long day."}}]});
            return (200, answer.to_string());
        }
        let prefer = prefer.lock().unwrap().clone();
        let choices: Vec<Value> = body["prompt"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let p = p.as_str().unwrap();
                let cut = p.rfind(" to do is").unwrap() + " to do is".len();
                let said = p.contains("said to their home assistant: \"");
                let favoured = said && p[cut..] == prefer;
                let (mut tokens, mut offsets, mut logprobs) = (vec![], vec![], vec![]);
                let mut at = 0;
                for word in p.split_inclusive(' ') {
                    tokens.push(word.to_owned());
                    offsets.push(at);
                    let lp = if at >= cut && favoured { -0.1 } else { -1.0 };
                    logprobs.push(if at == 0 {
                        Value::Null
                    } else {
                        serde_json::json!(lp)
                    });
                    at += word.len();
                }
                serde_json::json!({"index": i, "text": p, "logprobs": {"tokens": tokens,
                    "token_logprobs": logprobs, "text_offset": offsets}})
            })
            .collect();
        (
            200,
            serde_json::json!({"model": "fake", "choices": choices}).to_string(),
        )
    })
}

#[test]
fn what_the_meaning_layer_is_not_sure_of_a_model_chooses() {
    let sb = Sandbox::new();
    let prefer = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let model = scoring_model(prefer.clone());
    let on = sb.path().join("model.toml");
    // (The fake model's words are given: `answer_with`.)
    fs::write(
        &on,
        "[understand.model]\nenabled = true\n[llm]\nanswer_with = [\"local\"]\n",
    )
    .unwrap();
    let on = on.to_str().unwrap();
    let said = "it's a bit gloomy in the office";
    let shown = sb
        .run(&["--config", on, "understand", "--json", said])
        .ok()
        .json();
    let labels: Vec<&str> = shown["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert!(
        labels.contains(&"turn on the office lights")
            && labels.last() == Some(&"none of these: not a request to do something"),
        "{shown}"
    );
    let say = |conversation: &str, url: &str| {
        sb.run_env(
            &[
                "--config",
                on,
                "say",
                "--json",
                "--conversation",
                conversation,
                said,
            ],
            &[("CAAL_LLM_LOCAL_URL", url)],
        )
        .ok()
        .json()
    };
    let route_by_model = |round: &Value| {
        let shown = sb
            .run(&[
                "trace",
                "show",
                "--json",
                round["round_id"].as_str().unwrap(),
            ])
            .ok()
            .json();
        let events = shown["events"].as_array().unwrap().clone();
        let asked = events
            .iter()
            .find(|e| e["event_type"] == "llm.request" && e["payload"]["purpose"] == "choose")
            .cloned();
        let route = events
            .iter()
            .find(|e| e["event_type"] == "route.selected" && e["payload"]["decided_by"] == "model")
            .map(|e| e["payload"].clone());
        (asked, route)
    };

    // The model finds it no request: nothing runs or waits, the chat answers.
    *prefer.lock().unwrap() = " nothing: it is not a request.".into();
    let talk = say("a", &model.url);
    assert!(commands(&talk).is_empty(), "{talk}");
    assert!(talk["pending_confirmation"].is_null(), "{talk}");
    assert_eq!(talk["reply"], "That sounds like a long day.", "{talk}");
    let (asked, route) = route_by_model(&talk);
    assert_eq!(asked.unwrap()["payload"]["method"], "score");
    let route = route.expect("the model's decision is recorded");
    assert_eq!(route["layer"], "model", "{route}");
    assert_eq!(route["understood"]["intent"], "-", "{route}");

    // The model picks the meaning layer's own nearest: two layers agree, it runs at its level.
    *prefer.lock().unwrap() = " turn on the office lights.".into();
    let agreed = say("b", &model.url);
    assert_eq!(commands(&agreed), vec!["lights.set ok"], "{agreed}");
    assert_eq!(agreed["auth_level"], 1, "{agreed}");
    let (_, route) = route_by_model(&agreed);
    let route = route.unwrap();
    let options = route["understood"]["choice"]["options"].as_array().unwrap();
    let picked = &options[route["understood"]["choice"]["picked"].as_u64().unwrap() as usize];
    assert_eq!(picked["label"], "turn on the office lights", "{route}");
    assert_eq!(picked["rank"], 0, "the meaning layer's nearest: {route}");

    // It picks another meaning: that one, but only asked about.
    *prefer.lock().unwrap() = " turn off the office lights.".into();
    let other = say("c", &model.url);
    assert!(commands(&other).is_empty(), "{other}");
    assert_eq!(
        other["pending_confirmation"]["summary"], "turn off the office lights",
        "{other}"
    );

    // No model to ask: the meaning layer's own decision stands (asked about, as before).
    let alone = say("d", crate::support::NO_MODEL_URL);
    assert!(commands(&alone).is_empty(), "{alone}");
    assert_eq!(
        alone["pending_confirmation"]["summary"], "turn on the office lights",
        "{alone}"
    );
    let scored = model
        .seen()
        .iter()
        .filter(|(path, _, _)| path == "/v1/completions")
        .count();
    assert_eq!(scored, 3, "one scoring request per round asked");
}

#[test]
fn a_request_said_among_other_words_is_found_and_talk_around_a_name_is_not() {
    let sb = Sandbox::new();
    let done = sb.say("s", "switch off the dining room, we're done eating");
    assert_eq!(commands(&done), vec!["lights.set ok"], "{done}");
    assert_eq!(done["reply"], "Okay, the dining room lights are off.");
    let shown = sb
        .run(&[
            "understand",
            "--json",
            "switch off the dining room, we're done eating",
        ])
        .ok()
        .json();
    // Its own clause: the clause layer takes it whole.
    assert_eq!(shown["layer"], "clause", "{shown}");
    assert_eq!(
        shown["understood"]["clause"], "switch off the dining room",
        "{shown}"
    );

    // A governed command found this way is still asked about at its level.
    let plumber = sb.say("p", "unlock the side door for the plumber");
    assert!(commands(&plumber).is_empty(), "{plumber}");
    assert_eq!(
        plumber["pending_confirmation"]["summary"], "unlock the side door",
        "{plumber}"
    );
    // Talk around a device's name, and a negation, run nothing.
    for said in [
        "leave the porch light as it is",
        "don't unlock the side door for the plumber",
        // "deactivate the lights" as whisper heard it: not "activate the lights".
        "the activate the lights",
    ] {
        let r = sb.say("t", said);
        assert!(commands(&r).is_empty(), "{said}: {r}");
        assert!(r["pending_confirmation"].is_null(), "{said}: {r}");
    }
}

#[test]
fn a_clause_is_understood_with_what_an_earlier_one_named() {
    let sb = Sandbox::new();
    for (said, ran, reply) in [
        (
            "is the front door locked? lock it",
            "door.lock ok",
            "The front door is locked.",
        ),
        (
            "we need bread, add it to the shopping list",
            "shopping.add ok",
            "Added bread to the shopping list.",
        ),
        (
            "no one's in the guest room, lights off there",
            "lights.set ok",
            "Okay, the guest room lights are off.",
        ),
        (
            "the kitchen is dark, turn on the lights",
            "lights.set ok",
            "Okay, the kitchen lights are on.",
        ),
        (
            "tea's brewing, remind me in four minutes",
            "timer.set ok",
            "",
        ),
        // What is no longer needed is stopped: not a negation.
        ("I don't need the timer anymore", "timer.cancel ok", ""),
        (
            "no need for the lights in the garden anymore",
            "lights.set ok",
            "Okay, the outside lights are off.",
        ),
    ] {
        let r = sb.say("c", said);
        assert_eq!(commands(&r), vec![ran], "{said}: {r}");
        if !reply.is_empty() {
            assert_eq!(r["reply"], reply, "{said}");
        }
    }
    // What was put back is shown, with the clause it was put in.
    let shown = sb
        .run(&["understand", "--json", "is the front door locked? lock it"])
        .ok()
        .json();
    assert_eq!(shown["layer"], "clause", "{shown}");
    assert_eq!(
        shown["understood"]["said"], "lock the front door",
        "{shown}"
    );
    assert_eq!(shown["understood"]["referent"], "the front door", "{shown}");
    // A negation or a story anywhere in the sentence: nothing runs.
    for said in [
        "don't lock it, the front door is fine",
        "the front door was open yesterday, so I locked it",
        "we need bread, don't add it to the list yet",
    ] {
        let r = sb.say("n", said);
        assert!(commands(&r).is_empty(), "{said}: {r}");
        assert!(r["pending_confirmation"].is_null(), "{said}: {r}");
    }
    // Near a light command in meaning, but about heat: no light is touched.
    let cold = sb.say("n", "the bedroom is cold, turn it up");
    assert!(commands(&cold).is_empty(), "{cold}");
    assert!(cold["pending_confirmation"].is_null(), "{cold}");
    // A request that waits on something is not run now, and says so.
    for said in [
        "if it gets dark, turn on the porch light",
        "when I get home, unlock the front door",
        "turn off the kitchen lights when the timer rings",
    ] {
        let r = sb.say("w", said);
        assert!(commands(&r).is_empty(), "{said}: {r}");
        assert!(r["pending_confirmation"].is_null(), "{said}: {r}");
        assert_eq!(r["route_code"], "intent.conditional", "{said}: {r}");
        assert!(
            r["reply"].as_str().unwrap().contains("waits on something"),
            "{r}"
        );
    }
    // "When is…" asks a question: no condition.
    let when = sb.say("w", "when is the timer done");
    assert_ne!(when["route_code"], "intent.conditional", "{when}");
    // A device asked for what its kind does not do is named with what it does.
    let door = sb.say("n", "open the front door");
    assert!(commands(&door).is_empty(), "{door}");
    assert!(door["pending_confirmation"].is_null(), "{door}");
    assert_eq!(
        door["reply"],
        "The front door is a lock; I can lock or unlock it."
    );
}

#[test]
fn a_misheard_or_mistyped_word_is_read_as_the_word_it_is_nearest() {
    let sb = Sandbox::new();
    let typed = sb.say("h", "turn on the kitchn lights");
    assert_eq!(commands(&typed), vec!["lights.set ok"], "{typed}");
    assert_eq!(typed["reply"], "Okay, the kitchen lights are on.");
    let shown = sb
        .run(&["understand", "--json", "Thermos tap to 20. Please."])
        .ok()
        .json();
    assert_eq!(shown["layer"], "heard_as", "{shown}");
    assert_eq!(
        shown["commands"][0]["command_id"], "thermostat.set",
        "{shown}"
    );
    assert_eq!(
        shown["understood"]["words"][0]["heard"], "thermos tap",
        "{shown}"
    );
    assert_eq!(
        shown["understood"]["words"][0]["read"], "thermostat",
        "{shown}"
    );
    let heard = sb.say("h", "Reminds me to water the plants in an hour.");
    assert_eq!(commands(&heard), vec!["reminder.add ok"], "{heard}");
    // A word near none the sentences know is left as said: the home answers for it.
    let jukebox = sb.say("h", "turn on the jukebox");
    assert!(commands(&jukebox).is_empty(), "{jukebox}");
    assert!(
        jukebox["reply"].as_str().unwrap().contains("jukebox"),
        "{jukebox}"
    );
}

/// How speech to text mishears a request, read again only where nothing
/// understood what it heard: two known words heard for one ("the activate"
/// is deactivate, never activate), a last letter heard as the next word's
/// first ("light sun"), a first sound voiced ("but"), a word heard before
/// the request, a short word as it sounds ("mac" door: back, the one the
/// home has), a name of the home heard as other words ("best lamp"). Each is kept only when the sentence so read is a request;
/// talk so read stays talk.
#[test]
fn a_request_misheard_by_speech_to_text_is_read_as_it_sounds() {
    let sb = Sandbox::new();
    let read = |said: &str| -> Value { sb.run(&["understand", "--json", said]).ok().json() };
    let cases: [(&str, &str, Value, &str); 9] = [
        (
            "The activate the lights in the kitchen.",
            "lights.set",
            json!({"room": "kitchen", "state": "off"}),
            "deactivate the lights in the kitchen",
        ),
        (
            "Living room light sun.",
            "lights.set",
            json!({"room": "living room", "state": "on"}),
            "living room lights on",
        ),
        (
            "Kitchen light, south.",
            "lights.set",
            json!({"room": "kitchen", "state": "off"}),
            "kitchen lights out",
        ),
        (
            "But toilet paper on the list.",
            "shopping.add",
            json!({"item": "toilet paper"}),
            "put toilet paper on the list",
        ),
        (
            "They illuminate all areas in the house.",
            "lights.set",
            json!({"room": "all", "state": "on"}),
            "illuminate all areas in the house",
        ),
        (
            "Lock the Mac door.",
            "door.lock",
            json!({"door": "back door"}),
            "lock the back door",
        ),
        // No template says it: the meaning layer knows a door is to be
        // locked but not which, and "mac" read as "back" names one.
        (
            "Make sure the Mac door is locked.",
            "door.lock",
            json!({"door": "back door"}),
            "make sure the back door is locked",
        ),
        // A name of the home heard as other words.
        (
            "Best lamp on.",
            "light.set",
            json!({"device": "desk lamp", "state": "on"}),
            "desk lamp on",
        ),
        (
            "turn off the kitchen sealing light",
            "light.set",
            json!({"device": "kitchen ceiling", "state": "off"}),
            "turn off the kitchen ceiling light",
        ),
    ];
    for (said, command, params, read_as) in cases {
        let shown = read(said);
        assert_eq!(shown["layer"], "heard_as", "{said:?}: {shown}");
        assert_eq!(
            shown["commands"][0]["command_id"], command,
            "{said:?}: {shown}"
        );
        assert_eq!(shown["commands"][0]["params"], params, "{said:?}: {shown}");
        assert_eq!(shown["understood"]["read_as"], read_as, "{said:?}: {shown}");
    }
    // Run as a round: the reply says what was done.
    let off = sb.say("m", "The activate the lights in the kitchen.");
    assert_eq!(commands(&off), vec!["lights.set ok"], "{off}");
    assert_eq!(off["reply"], "Okay, the kitchen lights are off.");
    // Talk read the same ways is still talk; a word near nothing stays.
    for said in [
        "The sun is out today.",
        "But that was last week.",
        "The kitchen light sounds funny.",
        "turn on the jukebox",
    ] {
        let shown = read(said);
        assert_ne!(shown["layer"], "heard_as", "{said:?}: {shown}");
        assert!(
            shown["commands"].as_array().unwrap().is_empty(),
            "{said:?}: {shown}"
        );
    }
    // Which door, when no word was misheard, is still asked: nothing runs,
    // and the doors that lock are named (not the garage's, a cover).
    let which = read("make sure the door is locked");
    assert_eq!(which["route_code"], "intent.ambiguous", "{which}");
    for said in [
        "make sure the door is locked",
        "make sure the max door is locked",
    ] {
        let shown = read(said);
        assert!(
            shown["commands"].as_array().unwrap().is_empty(),
            "{said:?}: {shown}"
        );
        // What is asked back ("asks which: …", or "reply: …, there are …").
        let explained = sb.run(&["understand", said]).ok().stdout;
        let asked = explained
            .lines()
            .find(|l| l.contains("asks which:") || l.contains("reply:"))
            .unwrap_or_else(|| panic!("{said:?} asked nothing: {explained}"));
        for door in ["front door", "back door", "side door"] {
            assert!(asked.contains(door), "{said:?}: {asked}");
        }
        assert!(!asked.contains("garage"), "{said:?}: {asked}");
    }
}

/// Talk no layer understood goes to the model offered only the commands
/// the meaning layer found near it: none for a joke or a question about a
/// thing, a few light commands for a remark about a room; a call of a tool
/// that was not offered proposes nothing.
#[test]
fn talk_no_layer_understood_is_offered_only_the_commands_near_it() {
    let sb = Sandbox::new();
    let model = crate::support::Peer::start(|_, _| {
        let call = serde_json::json!({"model": "fake", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "door_unlock", "arguments": "{\"door\": \"front door\", \"_justification\": \"The user wants it open.\"}"}}]}}]});
        (200, call.to_string())
    });
    // With no tier trusted to answer in words (the default), talk near no
    // request never reaches the model: CAAL says what it can do.
    let r = sb
        .run_env(
            &["say", "--json", "--conversation", "t", "tell me a joke"],
            &[("CAAL_LLM_LOCAL_URL", &model.url)],
        )
        .ok()
        .json();
    assert!(model.seen().is_empty(), "{r}");
    assert!(r["llm"].is_null(), "{r}");
    assert!(
        r["reply"]
            .as_str()
            .unwrap()
            .starts_with("I can't help with that. I look after the lights"),
        "{r}"
    );
    // A tier that answers in words is asked, offered only what is near.
    sb.configure("[llm]\nanswer_with = [\"local\"]\n");
    let offered = |said: &str| -> (Vec<String>, Value) {
        let before = model.seen().len();
        let r = sb
            .run_env(
                &["say", "--json", "--conversation", "t", said],
                &[("CAAL_LLM_LOCAL_URL", &model.url)],
            )
            .ok()
            .json();
        let seen = model.seen();
        assert!(seen.len() > before, "{said:?} never reached the model: {r}");
        let body: Value = serde_json::from_str(&seen[before].2).unwrap();
        let tools = body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        (tools, r)
    };
    for said in ["tell me a joke", "what does a thermostat do", "uh um uh"] {
        let (tools, r) = offered(said);
        assert!(tools.is_empty(), "{said:?} was offered {tools:?}");
        assert!(r["pending_confirmation"].is_null(), "{said:?}: {r}");
    }
    let (tools, r) = offered("the kitchen is a mess");
    assert!(
        !tools.is_empty() && tools.len() <= 4,
        "a few tools, not all: {tools:?}"
    );
    assert!(tools.iter().all(|t| t.starts_with("light")), "{tools:?}");
    // The model called a tool it was not offered: nothing is proposed.
    assert!(r["pending_confirmation"].is_null(), "{r}");
    assert!(r["commands"].as_array().unwrap().is_empty(), "{r}");

    // The model layer's options are held to the same floor: a joke is no
    // choice between requests (it was offered the grocery list, far below).
    let on = sb.path().join("model.toml");
    fs::write(&on, "[understand.model]\nenabled = true\n").unwrap();
    let shown = sb
        .run(&[
            "--config",
            on.to_str().unwrap(),
            "understand",
            "--json",
            "tell me a joke",
        ])
        .ok()
        .json();
    assert_eq!(shown["choices"], serde_json::json!([]), "{shown}");
}

/// A question about a request is not the request, a word of opposite
/// meaning is not read as its opposite, and a mark that frames nothing
/// reads no item: "did I lock the back door" locks nothing, "make the
/// bedroom darker" does not turn it to full, "everything off, we're going
/// out" adds nothing to the shopping list.
#[test]
fn questions_and_opposite_words_are_not_taken_for_the_request_they_mention() {
    let sb = Sandbox::new();
    let read = |said: &str| -> Value { sb.run(&["understand", "--json", said]).ok().json() };
    // Questions of whether it is or was so: no request taken out of them
    // (at most the question, answered), no room read from their first words.
    for said in [
        "did I lock the back door",
        "did you turn off the porch light",
        "have you locked the front door",
        "did someone leave the lights on in the kitchen",
        "are the kitchen lights on",
    ] {
        let shown = read(said);
        assert_ne!(shown["route_code"], "intent.unknown_target", "{shown}");
        for c in shown["commands"].as_array().unwrap() {
            assert_eq!(c["command_id"], "home.state", "{said:?}: {shown}");
        }
    }
    // A request asked politely as a question is still one; a question asking
    // for a report still gets it.
    for (said, command) in [
        ("is it possible to turn on the kitchen lights", "lights.set"),
        ("is the house okay", "home.status"),
    ] {
        let shown = read(said);
        assert_eq!(
            shown["commands"][0]["command_id"], command,
            "{said:?}: {shown}"
        );
    }
    // Opposite words: darker is dimmed, never full brightness.
    for said in [
        "could you make the bedroom a bit darker",
        "turn the lights down in the bedroom",
    ] {
        let shown = read(said);
        assert_eq!(
            shown["commands"][0]["command_id"], "lights.brightness",
            "{said:?}: {shown}"
        );
        let level = shown["commands"][0]["params"]["level"].as_i64().unwrap();
        assert!(level < 50, "{said:?}: {shown}");
    }
    // Off the list is not onto it.
    let off = read("take bread off the list");
    assert_eq!(off["commands"][0]["command_id"], "shopping.remove", "{off}");
    assert_eq!(off["commands"][0]["params"]["item"], "bread", "{off}");
    // A sentence no example's words frame is no shopping item.
    let out = read("everything off, we're going out");
    assert!(
        out["commands"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["command_id"] != "shopping.add"),
        "{out}"
    );
}

/// Questions of state ("is the back door locked", "which lights are on",
/// "did I leave the lights on in the kitchen") are answered from what the
/// home last did, and change nothing.
#[test]
fn questions_of_state_are_answered_from_what_the_home_last_did() {
    let sb = Sandbox::new();
    let answer = |said: &str| -> String {
        let r = sb.say("h", said);
        assert_eq!(commands(&r), vec!["home.state ok"], "{said:?}: {r}");
        r["reply"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        answer("is the back door locked"),
        "Yes, the back door is locked."
    );
    assert_eq!(answer("which lights are on"), "No lights are on.");
    assert_eq!(
        answer("is the garage door open"),
        "No, the garage door is closed."
    );
    sb.say("h", "dim the kitchen to 40 percent");
    sb.say("h", "unlock the back door");
    let yes = sb.say("h", "yes");
    assert_eq!(commands(&yes), vec!["door.unlock ok"], "{yes}");
    assert_eq!(
        answer("did I lock the back door"),
        "No, the back door is unlocked."
    );
    assert_eq!(
        answer("did I leave the lights on in the kitchen"),
        "Yes, the kitchen lights are on, at 40%."
    );
    assert_eq!(
        answer("are the bedroom lights on"),
        "No, the bedroom lights are off."
    );
    assert_eq!(answer("which lights are on"), "Lights on: kitchen.");
    sb.say("h", "set the thermostat to 21");
    assert_eq!(
        answer("what is the temperature"),
        "The thermostat is set to 21 °C."
    );
    // Asking changed nothing: the door is still unlocked.
    assert_eq!(
        answer("is the back door unlocked"),
        "Yes, the back door is unlocked."
    );
    // Said in ways no template has: answered by meaning, with no yes or no
    // to a state the question did not name ("open" of a lock), and with
    // one to a state it named in its own words.
    assert_eq!(
        answer("is the back door open"),
        "The back door is unlocked."
    );
    assert_eq!(
        answer("is the porch light still on"),
        "No, the porch light is off."
    );
    assert_eq!(
        answer("is the back door locked up"),
        "No, the back door is unlocked."
    );
    assert_eq!(
        answer("did someone leave the garage open"),
        "No, the garage door is closed."
    );
}

/// "Turn the heat up", "make it a bit cooler": a degree from where the
/// thermostat is, within its range; asking whether to is no request.
#[test]
fn the_heat_is_turned_up_or_down_from_where_it_is() {
    let sb = Sandbox::new();
    let turned = |said: &str| -> String {
        let r = sb.say("t", said);
        assert_eq!(commands(&r), vec!["thermostat.adjust ok"], "{said:?}: {r}");
        r["reply"].as_str().unwrap().to_owned()
    };
    sb.say("t", "set the thermostat to 21");
    assert_eq!(
        turned("turn the heat up"),
        "The thermostat is now at 22 °C."
    );
    assert_eq!(
        turned("make it a bit cooler"),
        "The thermostat is now at 21 °C."
    );
    assert_eq!(
        turned("turn down the heating"),
        "The thermostat is now at 20 °C."
    );
    // By as many degrees as said, a couple being two; anywhere warmed is the house.
    assert_eq!(
        turned("turn the heat up two degrees"),
        "The thermostat is now at 22 °C."
    );
    assert_eq!(
        turned("drop the temperature a couple of degrees"),
        "The thermostat is now at 20 °C."
    );
    assert_eq!(
        turned("warm it up in here"),
        "The thermostat is now at 21 °C."
    );
    assert_eq!(
        turned("cool the bedroom down by one degree"),
        "The thermostat is now at 20 °C."
    );
    let far = sb.say("t", "raise the temperature by 8 degrees");
    assert!(commands(&far).is_empty(), "{far}");
    assert!(
        far["reply"].as_str().unwrap().contains("between -5 and 5"),
        "{far}"
    );
    // A thermostat has no on or off: what it does is said.
    let on = sb.say("t", "put the heating on");
    assert!(commands(&on).is_empty(), "{on}");
    assert_eq!(
        on["reply"],
        "That isn't something the thermostat does; I can change or set it."
    );
    let r = sb.say("t", "what is the temperature");
    assert_eq!(r["reply"], "The thermostat is set to 20 °C.", "{r}");
    sb.say("t", "set the thermostat to 30");
    assert_eq!(
        turned("crank the heat up"),
        "The thermostat is already at 30 °C, its highest."
    );
    // A question about doing it does nothing.
    let asked = sb.say("t", "should I turn the heating up");
    assert!(commands(&asked).is_empty(), "{asked}");
    // Fahrenheit said where Celsius is meant: refused, with the fix.
    let f = sb.say("t", "set the thermostat to 68");
    assert!(commands(&f).is_empty(), "{f}");
    assert!(
        f["reply"]
            .as_str()
            .unwrap()
            .ends_with("not 68 °C; 68 °F is about 20 °C, so say 20."),
        "{f}"
    );
}

/// "Lock up" and "lock all the doors" lock each of the home's locks as one
/// chain ("unlock all the doors" asks once, at the unlock's level); "is
/// everything locked" answers for them all; the time and date are read from
/// the clock where the home is.
#[test]
fn every_lock_at_once_and_the_time_and_date_are_understood() {
    let sb = Sandbox::new();
    let locked = vec!["door.lock ok"; 3];
    for said in ["lock up", "lock all the doors", "secure the house"] {
        let r = sb.say("h", said);
        assert_eq!(commands(&r), locked, "{said:?}: {r}");
        // One reply for the chain (`reply_many`), the doors joined.
        assert_eq!(
            r["reply"], "The front door, back door and side door are locked.",
            "{said:?}"
        );
    }
    let ask = sb.say("h", "unlock all the doors");
    assert!(commands(&ask).is_empty(), "asked first: {ask}");
    assert_eq!(
        ask["reply"],
        "Unlock the front door, unlock the back door and unlock the side door? Say yes to confirm."
    );
    let yes = sb.say("h", "yes");
    assert_eq!(commands(&yes), vec!["door.unlock ok"; 3], "{yes}");
    assert_eq!(
        yes["reply"],
        "The front door, back door and side door are unlocked."
    );
    sb.say("h", "lock the back door");
    for said in ["is everything locked", "are the doors locked"] {
        let r = sb.say("h", said);
        assert_eq!(commands(&r), vec!["home.state ok"], "{said:?}: {r}");
        assert_eq!(
            r["reply"], "No, the front door and side door are unlocked.",
            "{said:?}"
        );
    }
    sb.say("h", "lock up");
    let r = sb.say("h", "did I lock up");
    assert_eq!(r["reply"], "Yes, all the doors are locked.", "{r}");

    // The clock, in the home's time zone (not the machine's UTC).
    let zone = "Pacific/Auckland";
    let tz = jiff::tz::TimeZone::get(zone).unwrap();
    let clock = |t: &jiff::ZonedDateTime| {
        let (h, m) = (t.hour(), t.minute());
        let h12 = if h % 12 == 0 { 12 } else { h % 12 };
        let half = if h < 12 { "am" } else { "pm" };
        match (h, m) {
            (12, 0) => "It's noon.".to_owned(),
            (0, 0) => "It's midnight.".to_owned(),
            (_, 0) => format!("It's {h12} {half}."),
            _ => format!("It's {h12}:{m:02} {half}."),
        }
    };
    let date = |t: &jiff::ZonedDateTime| format!("It's {}.", t.strftime("%A %-d %B %Y"));
    for (said, read) in [
        (
            "what time is it",
            &clock as &dyn Fn(&jiff::ZonedDateTime) -> String,
        ),
        ("do you know what time it is", &clock),
        ("what's the date today", &date),
        ("what day is it", &date),
    ] {
        let before = jiff::Timestamp::now().to_zoned_datetime(tz.clone());
        let r = sb
            .run_env(
                &["say", "--json", "--conversation", "t", said],
                &[("CAAL_TIME_ZONE", zone)],
            )
            .ok()
            .json();
        let after = jiff::Timestamp::now().to_zoned_datetime(tz.clone());
        assert_eq!(commands(&r), vec!["clock.now ok"], "{said:?}: {r}");
        let reply = r["reply"].as_str().unwrap();
        assert!(
            reply == read(&before) || reply == read(&after),
            "{said:?}: {reply} (expected {})",
            read(&before)
        );
    }
    // Elsewhere: a city of the time zone database; a place not in it is named.
    let tokyo = jiff::tz::TimeZone::get("Asia/Tokyo").unwrap();
    let before = jiff::Timestamp::now().to_zoned_datetime(tokyo.clone());
    let r = sb.say("t", "what time is it in Tokyo");
    let after = jiff::Timestamp::now().to_zoned_datetime(tokyo);
    let reply = r["reply"].as_str().unwrap();
    let there = |t: &jiff::ZonedDateTime| clock(t).replace('.', " in Tokyo.");
    assert!(
        reply == there(&before) || reply == there(&after),
        "{reply} (expected {})",
        there(&before)
    );
    let r = sb.say("t", "what's the time in Springfield");
    assert_eq!(commands(&r), vec!["clock.now ok"], "{r}");
    assert!(
        r["reply"]
            .as_str()
            .unwrap()
            .starts_with("I don't know which time zone Springfield is in"),
        "{r}"
    );
}

/// A follow-up points back at what the conversation just asked for: "turn
/// them off" after "turn on the kitchen lights", "is it locked?" after
/// "lock the back door"; a sentence that names "it" itself keeps its own;
/// another conversation has nothing to point back at. "Cancel that" answers
/// a confirmation.
#[test]
fn a_follow_up_points_back_at_what_was_just_asked() {
    let sb = Sandbox::new();
    let params = |r: &Value| r["reasoning"]["tool_decisions"][0]["parameters"].clone();
    sb.say("c", "turn on the kitchen lights");
    let off = sb.say("c", "turn them off");
    assert_eq!(off["reply"], "Okay, the kitchen lights are off.", "{off}");
    assert_eq!(params(&off), json!({"room": "kitchen", "state": "off"}));
    let brighter = sb.say("c", "make them brighter");
    assert_eq!(params(&brighter)["room"], "kitchen", "{brighter}");

    sb.say("c", "turn on the desk lamp");
    let dim = sb.say("c", "dim it to 20 percent");
    assert_eq!(
        params(&dim),
        json!({"device": "desk lamp", "level": 20}),
        "{dim}"
    );

    sb.say("c", "lock the back door");
    let asked = sb.say("c", "is it locked");
    assert_eq!(asked["reply"], "Yes, the back door is locked.", "{asked}");
    let unlock = sb.say("c", "unlock it");
    assert_eq!(
        unlock["reply"], "Unlock the back door? Say yes to confirm.",
        "{unlock}"
    );
    let cancel = sb.say("c", "cancel that");
    assert_eq!(
        cancel["reply"], "Okay, I won't unlock the back door.",
        "{cancel}"
    );
    assert!(commands(&cancel).is_empty(), "{cancel}");

    // The sentence's own "it" is what it named, not the last round's.
    sb.say("c", "put milk on the list");
    let bread = sb.say("c", "we need bread, add it to the list");
    assert_eq!(params(&bread), json!({"item": "bread"}), "{bread}");

    // Within one sentence too: a room's lights are what "them" is.
    let both = sb.say("e", "are the lights on in the kitchen? turn them off");
    assert_eq!(
        params(&both),
        json!({"room": "kitchen", "state": "off"}),
        "{both}"
    );

    // Another conversation: "them" points at nothing there.
    let elsewhere = sb.say("d", "turn them off");
    assert!(
        commands(&elsewhere)
            .iter()
            .all(|c| !c.starts_with("lights.set")),
        "{elsewhere}"
    );
}

#[test]
fn what_is_to_be_kept_in_mind_is_asked_and_how_warm_it_feels_moves_the_heat() {
    let sb = Sandbox::new();
    let understand = |said: &str| sb.run(&["understand", "--json", said]).ok().json();
    let first = |r: &Value| {
        (
            r["commands"][0]["command_id"]
                .as_str()
                .unwrap_or("-")
                .to_owned(),
            r["commands"][0]["params"].clone(),
        )
    };
    // The request after "don't forget" / "remember to" is what is asked.
    let milk = understand("don't forget we need milk");
    assert_eq!(
        first(&milk),
        ("shopping.add".into(), json!({"item": "milk"})),
        "{milk}"
    );
    assert_eq!(milk["understood"]["remembered"]["lead"], "don't forget");
    let lock = understand("remember to lock the back door");
    assert_eq!(
        first(&lock),
        ("door.lock".into(), json!({"door": "back door"})),
        "{lock}"
    );
    // No request of its own after "to": something to be reminded of.
    let call = understand("don't forget to call mom at 5pm");
    assert_eq!(
        first(&call),
        (
            "reminder.add".into(),
            json!({"at": "17:00", "what": "call mom"})
        ),
        "{call}"
    );
    assert_eq!(
        call["understood"]["remembered"]["said"],
        "remind me to call mom at 5pm"
    );
    // A negation is still never the command it negates.
    let unlock = understand("don't unlock the door");
    assert!(
        unlock["commands"].as_array().unwrap().is_empty(),
        "{unlock}"
    );
    // "We need to talk" names nothing to buy.
    let talk = understand("we need to talk");
    assert!(talk["commands"].as_array().unwrap().is_empty(), "{talk}");

    // How warm it feels indoors moves the heat a degree; the weather outside does not.
    let cold = understand("it's freezing in here");
    assert_eq!(
        first(&cold),
        ("thermostat.adjust".into(), json!({"change": 1.0})),
        "{cold}"
    );
    let hot = understand("it's way too hot in here");
    assert_eq!(
        first(&hot),
        ("thermostat.adjust".into(), json!({"change": -1.0})),
        "{hot}"
    );
    let outside = understand("it's freezing outside today");
    assert!(
        outside["commands"].as_array().unwrap().is_empty(),
        "{outside}"
    );
    // "Add …" alone is for the list, but a length of time is never a thing to buy.
    let soap = understand("add dish soap please");
    assert_eq!(
        first(&soap),
        ("shopping.add".into(), json!({"item": "dish soap"})),
        "{soap}"
    );
    let minutes = understand("add 2 minutes");
    assert_ne!(first(&minutes).0, "shopping.add", "{minutes}");
    let resume = understand("carry on with the timer");
    assert_eq!(first(&resume).0, "timer.resume", "{resume}");
}

/// "40%" is read like "40 percent" wherever it stands (a closing "%" was
/// taken for punctuation, and the encoder weighs "%" unlike the examples'
/// "percent"); a list is no thing on itself; "everything off" is every
/// light, or a room's when one is named, also before talk; what the time
/// is given for names a timer, and "me" or "it" never does.
#[test]
fn a_percent_sign_is_a_percent_everything_off_is_the_lights_and_a_list_no_item() {
    let sb = Sandbox::new();
    let understand = |said: &str| sb.run(&["understand", "--json", said]).ok().json();
    for said in [
        "make the bedroom a bit dimmer, like 40%",
        "Make the bedroom a bit dimmer, like 40 %.",
        // As speech to text wrote it: "dim the kitchen lights" (to 30) is
        // as near, but fixes only what was said outright.
        "Make the bedroom light sub it dimmer, like 40%.",
    ] {
        let r = understand(said);
        assert_eq!(r["commands"][0]["command_id"], "lights.brightness", "{r}");
        assert_eq!(
            r["commands"][0]["params"],
            json!({"level": 40, "room": "bedroom"}),
            "{r}"
        );
    }
    for (said, room) in [
        ("everything off, we're going out", "all"),
        ("turn off everything in the kitchen", "kitchen"),
        ("everything off in the bedroom", "bedroom"),
    ] {
        let r = understand(said);
        assert_eq!(r["commands"][0]["command_id"], "lights.set", "{r}");
        assert_eq!(
            r["commands"][0]["params"],
            json!({"room": room, "state": "off"}),
            "{r}"
        );
        assert_eq!(r["commands"][0]["auth_level"], 1, "{r}");
    }
    for (said, command, params) in [
        (
            "give me 3 minutes for the eggs",
            "timer.set",
            json!({"duration": 180, "name": "eggs"}),
        ),
        (
            "give me five minutes",
            "timer.set",
            json!({"duration": 300}),
        ),
        (
            "give it another 5 minutes",
            "timer.add",
            json!({"duration": 300}),
        ),
        (
            "give the rice five more minutes",
            "timer.add",
            json!({"duration": 300, "name": "rice"}),
        ),
    ] {
        let r = understand(said);
        assert_eq!(r["commands"][0]["command_id"], command, "{r}");
        assert_eq!(r["commands"][0]["params"], params, "{r}");
    }
    for said in ["work on the shopping list", "work on the grocery list"] {
        let r = understand(said);
        assert!(
            r["commands"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["command_id"] != "shopping.add"),
            "{said}: {r}"
        );
    }
}

/// "Clear the shopping list" takes everything off at once: asked about
/// first (no undo brings the items back), the items named in the reply
/// and kept in the call's result; an empty list says so.
#[test]
fn the_whole_shopping_list_is_cleared_after_asking() {
    let sb = Sandbox::new();
    for item in ["milk", "eggs"] {
        let r = sb.say("c", &format!("add {item} to the shopping list"));
        assert_eq!(commands(&r), vec!["shopping.add ok"], "{r}");
    }
    for said in [
        "empty my grocery list",
        "start a fresh shopping list",
        "we bought everything, clear the list",
        "get rid of everything on the shopping list",
    ] {
        let r = sb.run(&["understand", "--json", said]).ok().json();
        assert_eq!(
            r["commands"][0]["command_id"], "shopping.clear",
            "{said}: {r}"
        );
    }
    let asked = sb.say("c", "clear the shopping list");
    assert_eq!(asked["auth_level"], 3, "{asked}");
    assert!(!asked["pending_confirmation"].is_null(), "{asked}");
    assert_eq!(
        commands(&asked),
        Vec::<String>::new(),
        "nothing ran yet: {asked}"
    );
    let done = sb.say("c", "yes");
    assert_eq!(
        done["reply"], "Cleared the shopping list: milk, eggs.",
        "{done}"
    );
    let read = sb.say("c", "what's on the shopping list");
    assert!(
        !read["reply"].as_str().unwrap().contains("milk"),
        "the list is empty now: {read}"
    );
    sb.say("c", "empty the shopping list");
    let again = sb.say("c", "yes");
    assert_eq!(
        again["reply"], "The shopping list was already empty.",
        "{again}"
    );
    // Taking one thing off is still one thing.
    sb.say("c", "add bread to the shopping list");
    let one = sb.say("c", "remove bread from the shopping list");
    assert_eq!(commands(&one), vec!["shopping.remove ok"], "{one}");
}

/// What speech to text heard and no layer above understood is read as
/// the sentence of the library it sounds nearest (`--spoken`: as a voice
/// round routes it); typed, the same words are not. A heard word is never
/// read as its opposite, talk stays talk, a negation never runs.
#[test]
fn a_transcript_no_layer_understood_is_read_as_the_sentence_it_sounds_like() {
    let sb = Sandbox::new();
    let spoken = |said: &str| -> Value {
        sb.run(&["understand", "--spoken", "--json", said])
            .ok()
            .json()
    };
    // As whisper tiny.en wrote espeak-ng's speech of the suites' lines.
    let cases: [(&str, &str, Value, &str); 5] = [
        (
            "Set the bedroom lamp. Write us to 50%.",
            "light.brightness",
            json!({"device": "bedroom lamp", "level": 50}),
            "set the bedroom lamp brightness to fifty percent",
        ),
        (
            "Activate the lights in our phone.",
            "lights.set",
            json!({"room": "all", "state": "on"}),
            "activate the lights in our home",
        ),
        (
            "Take 5 minutes of kitchen timer.",
            "timer.subtract",
            json!({"duration": 300, "name": "kitchen"}),
            "take five minutes off kitchen timer",
        ),
        // "at" heard for "an" (the template's "a[n]"): its "t" is no part
        // of the number.
        (
            "Start at well-hour timer.",
            "timer.set",
            json!({"duration": 3600}),
            "start an one hour timer",
        ),
        // A template matched with "what our" as the timer's name; read by
        // sound, every slot is filled by a number.
        (
            "Pause what our timer.",
            "timer.pause",
            json!({"start": 3600}),
            "pause one hour timer",
        ),
    ];
    for (said, command, params, read_as) in cases {
        let shown = spoken(said);
        assert_eq!(shown["layer"], "sounds", "{said:?}: {shown}");
        assert_eq!(
            shown["commands"][0]["command_id"], command,
            "{said:?}: {shown}"
        );
        assert_eq!(shown["commands"][0]["params"], params, "{said:?}: {shown}");
        let u = &shown["understood"];
        assert_eq!(u["read_as"], read_as, "{said:?}: {shown}");
        assert!(u["distance"].as_f64().unwrap() <= 0.1, "{said:?}: {shown}");
        assert_eq!(shown["auth_level"], 1, "near enough to run: {shown}");
        // Typed, the same words are not read by sound.
        let typed = sb.run(&["understand", "--json", said]).ok().json();
        assert_ne!(typed["layer"], "sounds", "{said:?}: {typed}");
    }
    // Heard right, "on" is not read as "out" (all the lights off).
    let on = spoken("Turn on the house lights everywhere.");
    assert_eq!(on["commands"][0]["params"]["state"], "on", "{on}");
    // Near, but "out" is the reading's alone (no heard sound went to it):
    // which way is a guess, asked about first.
    let guess = spoken("Turn the lights in our living room.");
    assert_eq!(guess["layer"], "sounds", "{guess}");
    assert_eq!(
        guess["understood"]["read_as"], "turn the lights in our living room out",
        "{guess}"
    );
    assert!(
        guess["understood"]["distance"].as_f64().unwrap() <= 0.1,
        "{guess}"
    );
    assert_eq!(guess["auth_level"], 3, "asked first: {guess}");
    // Talk stays talk; a wildcard takes heard words only when very near;
    // a negation is never run.
    for said in [
        "Remind me what we talk to mount.",
        "I'll lock the door myself later.",
        "Tell me one fact, turn out the moon.",
        "Don't set the bedroom lamp, write us to 50%.",
    ] {
        let shown = spoken(said);
        assert!(
            shown["commands"].as_array().unwrap().is_empty(),
            "{said:?}: {shown}"
        );
    }
    // A round records what was heard, what it was read as, and how near.
    let r = sb
        .run(&[
            "understand",
            "--spoken",
            "--json",
            "Set the bedroom lamp. Write us to 50%.",
        ])
        .ok()
        .json();
    assert_eq!(
        r["understood"]["heard_text"], "set the bedroom lamp. write us to 50%",
        "{r}"
    );
    assert!(
        r["understood"]["sounds_like"]
            .as_str()
            .unwrap()
            .contains("{brightness}"),
        "the template it sounds like: {r}"
    );
}

/// `--heard FILE` routes what an earlier spoken run heard as speech, with
/// no whisper: the sound layer reads it; a line the file lacks, or a file
/// that is not transcripts, is named with the fix.
#[test]
fn kept_transcripts_are_routed_again_as_speech() {
    let sb = Sandbox::new();
    let suite = sb.path().join("suite.jsonl");
    fs::write(
        &suite,
        concat!(
            "{\"text\": \"set the bedroom lamp brightness to 50%\", \"command\": \"light.brightness\", \"params\": {\"device\": \"bedroom lamp\", \"level\": 50}}\n",
            "{\"text\": \"take five minutes off the kitchen timer\", \"command\": \"timer.subtract\", \"params\": {\"duration\": 300, \"name\": \"kitchen\"}}\n",
        ),
    )
    .unwrap();
    let heard = sb.path().join("heard.jsonl");
    fs::write(
        &heard,
        concat!(
            "{\"text\": \"set the bedroom lamp brightness to 50%\", \"heard\": \"Set the bedroom lamp. Write us to 50%.\", \"least\": 0.9}\n",
            "{\"text\": \"take five minutes off the kitchen timer\", \"heard\": \"Take 5 minutes of kitchen timer.\", \"least\": 0.9}\n",
        ),
    )
    .unwrap();
    let bench = |heard: &std::path::Path| {
        sb.run(&[
            "bench",
            "understand",
            "--suite",
            suite.to_str().unwrap(),
            "--heard",
            heard.to_str().unwrap(),
            "--json",
        ])
    };
    let report = bench(&heard).ok();
    let json: Value = serde_json::from_str(report.stdout.lines().last().unwrap()).unwrap();
    let s = &json["suites"][0];
    assert_eq!(s["lines"], 2, "{json}");
    assert_eq!(s["command_params_accuracy"], 1.0, "{}", report.stdout);

    fs::write(
        &heard,
        "{\"text\": \"set the bedroom lamp brightness to 50%\", \"heard\": \"Set the bedroom lamp.\", \"least\": 0.9}\n",
    )
    .unwrap();
    let missing = bench(&heard);
    assert_ne!(missing.code, 0);
    assert!(
        missing.stderr.contains("no transcript of") && missing.stderr.contains("--save-heard"),
        "{}",
        missing.stderr
    );
    fs::write(&heard, "{\"text\": \"x\"}\n").unwrap();
    let bad = bench(&heard);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("line 1") && bad.stderr.contains("--save-heard"),
        "{}",
        bad.stderr
    );
}

/// What CAAL asks back is answered in a few words: "Which room?" by a room
/// or "all of them" (said where each request of the sentence ends), "Did you
/// mean … or …?" by what only one of them says or by its place; a few words
/// after anything else are a request of their own. A question asked
/// indirectly ("can you check if …", "I wonder whether I left …") is
/// answered and changes nothing; "I wonder if you could …" asks for it.
/// Dimmer or brighter with no level said is 30% or full, and a level said
/// aside ("like 40 percent") is the level.
#[test]
fn what_is_asked_back_is_answered_in_a_few_words_and_questions_asked_indirectly_are_answered() {
    let sb = Sandbox::new();
    let asked = sb.say("r", "turn off the lights and lock the front door");
    assert!(commands(&asked).is_empty(), "{asked}");
    assert!(
        asked["reply"].as_str().unwrap().starts_with("Which room?"),
        "{asked}"
    );
    let both = sb.say("r", "the kitchen please");
    assert_eq!(
        commands(&both),
        vec!["lights.set ok", "door.lock ok"],
        "{both}"
    );
    assert_eq!(
        both["reply"],
        "Okay, the kitchen lights are off. The front door is locked."
    );
    sb.say("r", "turn on the lights");
    let all = sb.say("r", "all of them");
    assert_eq!(all["reply"], "Okay, all the lights are on.", "{all}");
    // Answered once: the room said again is no answer to anything.
    let again = sb.say("r", "all of them");
    assert_ne!(again["reply"], "Okay, all the lights are on.", "{again}");

    let lamp = sb.say("l", "turn on the lamp");
    assert!(
        lamp["reply"].as_str().unwrap().ends_with("Say which."),
        "{lamp}"
    );
    let picked = sb.say("l", "the bedroom one");
    assert_eq!(picked["reply"], "Okay, the bedroom lamp is on.", "{picked}");
    sb.say("l", "turn off the lamp");
    let second = sb.say("l", "the second one");
    assert_eq!(
        second["reply"], "Okay, the living room lamp is off.",
        "{second}"
    );
    // The trace says what was asked and which was taken.
    let round = second["round_id"].as_str().unwrap();
    let shown = sb.run(&["trace", "show", "--json", round]).ok().json();
    let route = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_type"] == "route.selected")
        .unwrap();
    let understood = &route["payload"]["understood"];
    assert_eq!(understood["layer"], "answer", "{route}");
    assert_eq!(
        understood["said"], "turn off the living room lamp",
        "{route}"
    );

    for (said, answer) in [
        ("can you check if the garage is open", "is the garage open"),
        (
            "I wonder whether I left the porch light on",
            "did i leave the porch light on",
        ),
        (
            "not sure if we locked the back door",
            "did we lock the back door",
        ),
    ] {
        let r = sb.say("q", said);
        assert_eq!(commands(&r), vec!["home.state ok"], "{said:?}: {r}");
        let shown = sb
            .run(&["trace", "show", "--json", r["round_id"].as_str().unwrap()])
            .ok()
            .json();
        let route = shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event_type"] == "route.selected")
            .unwrap()
            .clone();
        assert_eq!(route["payload"]["understood"]["asked"], answer, "{route}");
    }
    // Asked of everything or anything: answered, never the change it names
    // ("is" is no filler heard before "everything off in the office").
    for said in [
        "is everything off in the office",
        "is anything on in the living room",
    ] {
        let r = sb.say("q", said);
        assert_eq!(commands(&r), vec!["home.state ok"], "{said:?}: {r}");
    }
    let polite = sb.say("q", "I wonder if you could turn on the kitchen lights");
    assert_eq!(commands(&polite), vec!["lights.set ok"], "{polite}");
    // A condition is still a condition, and a question with a request after it is not taken as the question.
    for said in [
        "turn on the porch light if it gets dark",
        "check if the garage is open and close it",
    ] {
        let r = sb.say("q", said);
        assert!(commands(&r).is_empty(), "{said:?}: {r}");
    }

    for (said, reply) in [
        ("dim the lounge a bit", "The living room lights are at 30%."),
        ("brighten up the kitchen", "The kitchen lights are at 100%."),
        (
            "dim the bedroom, like 40 percent",
            "The bedroom lights are at 40%.",
        ),
    ] {
        let r = sb.say("d", said);
        assert_eq!(r["reply"], reply, "{said:?}: {r}");
    }
}

/// Typing slips: two letters swapped are one slip, read as the known word
/// where the sentence so read is understood; a slip in talk reads nothing.
#[test]
fn two_letters_swapped_are_read_as_the_word_meant() {
    let sb = Sandbox::new();
    let read = |said: &str| -> Value { sb.run(&["understand", "--json", said]).ok().json() };
    for (said, command, param, value) in [
        (
            "set a timer for 5 mintues",
            "timer.set",
            "duration",
            json!(300),
        ),
        (
            "trun off the bedroom lamp",
            "light.set",
            "state",
            json!("off"),
        ),
        (
            "turn on the lgihts in the kitchen",
            "lights.set",
            "room",
            json!("kitchen"),
        ),
    ] {
        let shown = read(said);
        assert_eq!(shown["layer"], "heard_as", "{said:?}: {shown}");
        assert_eq!(
            shown["commands"][0]["command_id"], command,
            "{said:?}: {shown}"
        );
        assert_eq!(
            shown["commands"][0]["params"][param], value,
            "{said:?}: {shown}"
        );
    }
    let shown = read("the dgo is barking again");
    assert!(shown["commands"].as_array().unwrap().is_empty(), "{shown}");
}

/// Several things said to a list are added (or taken off) one by one, in
/// one chain; a thing that is one though joined ("mac and cheese") stays
/// whole.
#[test]
fn several_things_said_to_the_list_are_each_added() {
    let sb = Sandbox::new();
    let shown = sb
        .run(&[
            "understand",
            "--json",
            "put eggs, flour and milk on the list",
        ])
        .ok()
        .json();
    let items: Vec<&str> = shown["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["command_id"], "shopping.add", "{shown}");
            c["params"]["item"].as_str().unwrap()
        })
        .collect();
    assert_eq!(items, ["eggs", "flour", "milk"], "{shown}");
    sb.say("l", "add mac and cheese to the shopping list");
    sb.say("l", "put eggs and flour on the list");
    sb.say("l", "take eggs and mac and cheese off the list");
    let listed = sb.say("l", "what's on the shopping list")["reply"].clone();
    assert_eq!(listed, "On the shopping list: flour.", "{listed}");
}

#[test]
fn names_are_found_before_what_is_asked() {
    let sb = Sandbox::new();
    let said_in = |area: &str, text: &str| {
        sb.run(&[
            "say",
            "--json",
            "--conversation",
            area,
            "--area",
            area,
            text,
        ])
        .ok()
        .json()
    };
    // "Here" is the room the client says it is in, for what no template
    // reads with "here" itself; the decision says how it was read.
    let dark = said_in("bedroom", "it's dark in here");
    assert_eq!(dark["reply"], "Okay, the bedroom lights are on.", "{dark}");
    let shown = sb
        .run(&[
            "trace",
            "show",
            "--json",
            dark["round_id"].as_str().unwrap(),
        ])
        .ok()
        .json();
    let route = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_type"] == "route.selected")
        .unwrap();
    assert_eq!(
        route["payload"]["understood"]["read_as"], "it's dark in the bedroom",
        "{route}"
    );
    assert!(
        route["payload"]["understood"]["read_because"].is_string(),
        "{route}"
    );
    // Said nowhere in particular, "here" is not a room made up.
    let nowhere = sb.say("n", "it's dark in here");
    assert!(commands(&nowhere).is_empty(), "{nowhere}");

    for (said, reply) in [
        // A name taken back and said again.
        (
            "turn on the kitchen, sorry, the dining room lights",
            "Okay, the dining room lights are on.",
        ),
        // A device whose name holds a room's is the device, whatever the
        // template that reads the room.
        (
            "living room lamp at 40 percent please",
            "The living room lamp is at 40%.",
        ),
        // A typed slip that makes another word, read where nothing else reads it.
        (
            "turn of the bathroom lights",
            "Okay, the bathroom lights are off.",
        ),
        // "A couple of" is two; a reminder set as one is asked for.
        (
            "make it a couple of degrees cooler please",
            "The thermostat is now at 18 °C.",
        ),
    ] {
        let r = sb.say("c", said);
        assert_eq!(r["reply"], reply, "{said}: {r}");
    }
    let later = sb.say("c", "set a reminder for the bins in 3 hours");
    assert_eq!(commands(&later), vec!["reminder.add ok"], "{later}");
    assert!(
        later["reply"].as_str().unwrap().contains("the bins"),
        "{later}"
    );

    // The state a question says is what it asks about.
    sb.say("q", "lock the side door");
    let locked = sb.say("q", "is the side door locked up");
    assert!(
        locked["reply"].as_str().unwrap().starts_with("Yes"),
        "{locked}"
    );

    // Talk with a slip-word in it is still talk: no reading of a part runs.
    let talk = sb.say("t", "my kids left every light on in the house");
    assert!(commands(&talk).is_empty(), "{talk}");
}

#[test]
fn a_users_file_adds_to_the_defaults_and_says_where_each_entry_came_from() {
    let sb = Sandbox::new();
    fs::write(
        sb.path().join("mine.toml"),
        r#"
[[rules]]
name = "movie.time"
pattern = '^movie time$'
route = "chat"
reply = "Enjoy the film."
priority = 10

[understand.languages.en]
skip_words = ["yo"]

[[understand.languages.en.sentences]]
intent = "HassTurnOff"
slots = { domain = "light" }
sentences = ["blackout [the] {area}"]

[defaults]
remove = ["rules:shopping.list"]
"#,
    )
    .unwrap();
    let checked = sb
        .run(&["--config", "mine.toml", "config", "check", "--json"])
        .ok()
        .json();
    let entries = checked["entries"].as_array().unwrap();
    let from = |list: &str, id: &str| {
        entries
            .iter()
            .find(|e| e["list"] == list && e["id"] == id)
            .map(|e| e["from"].as_str().unwrap().to_owned())
    };
    // The defaults stay (31 rules before, one removed, one added).
    assert_eq!(checked["rules"], 31, "{checked}");
    assert_eq!(from("rules", "movie.time").as_deref(), Some("mine.toml"));
    assert_eq!(from("rules", "lights.switch").as_deref(), Some("defaults"));
    assert_eq!(from("rules", "shopping.list"), None);
    assert_eq!(checked["removed"], json!(["rules:shopping.list"]));
    assert_eq!(
        from("understand.languages.en.skip_words", "yo").as_deref(),
        Some("mine.toml")
    );
    assert_eq!(
        from("understand.languages.en.skip_words", "please").as_deref(),
        None,
        "the library's own, not the file's or the defaults' list"
    );
    assert_eq!(
        from("understand.languages.en.skip_words", "hey").as_deref(),
        Some("defaults")
    );
    // The file's sentence and the defaults' both understand.
    let say = |text: &str| {
        sb.run(&["--config", "mine.toml", "say", "--json", text])
            .ok()
            .json()
    };
    let off = say("yo blackout the kitchen");
    assert_eq!(off["reply"], "Okay, the kitchen lights are off.", "{off}");
    let on = say("turn on the kitchen lights");
    assert_eq!(on["reply"], "Okay, the kitchen lights are on.", "{on}");
    // A default that is not there is named, with where to find the ids.
    fs::write(
        sb.path().join("wrong.toml"),
        "[defaults]\nremove = [\"rules:no.such.rule\"]\n",
    )
    .unwrap();
    let wrong = sb.run(&["--config", "wrong.toml", "config", "check"]);
    assert_eq!(wrong.code, 2, "{}", wrong.stdout);
    assert!(
        wrong.stderr.contains("no.such.rule") && wrong.stderr.contains("caal config check --json"),
        "{}",
        wrong.stderr
    );
}

/// What `caal understand --json` decides for `text`: each command as
/// `id {params}`.
fn decided(sb: &Sandbox, text: &str) -> Vec<String> {
    let d = sb.run(&["understand", "--json", text]).ok().json();
    d["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {}", c["command_id"].as_str().unwrap(), c["params"]))
        .collect()
}

#[test]
fn a_timers_name_which_way_a_change_goes_and_a_thing_said_alone_are_kept() {
    let sb = Sandbox::new();
    // A timer's name is found before the meaning is chosen: whichever layer
    // reads the request keeps it.
    assert_eq!(
        decided(&sb, "how's the chicken timer doing"),
        vec![r#"timer.status {"name":"chicken"}"#]
    );
    assert_eq!(
        decided(&sb, "make a timer called bread for 40 minutes"),
        vec![r#"timer.set {"duration":2400,"name":"bread"}"#]
    );
    assert_eq!(
        decided(&sb, "set a 10 minute timer"),
        vec![r#"timer.set {"duration":600}"#],
        "a length is no name"
    );
    // A timer known by its length is found by it; a name cut short at
    // "the" is no name.
    assert_eq!(
        decided(&sb, "get rid of the 20 minute timer"),
        vec![r#"timer.cancel {"start":1200}"#]
    );
    assert_eq!(
        decided(&sb, "hold the timer for a sec"),
        vec!["timer.pause {}"]
    );
    // Someone said to have done something is a story: nothing is run.
    assert!(
        decided(
            &sb,
            "the kitchen lights are really bright since we changed the bulbs"
        )
        .is_empty()
    );
    // A timer put on is a new one, not time added to one.
    assert_eq!(
        decided(&sb, "put a timer on for 3 hours"),
        vec![r#"timer.set {"duration":10800}"#]
    );
    // Which way: a sentence that says only "warmer" is never a meaning
    // whose examples say only the other side ("less heat please").
    for (said, up) in [
        ("a bit warmer please", true),
        ("I'd like it warmer", true),
        ("more heat please", true),
        ("could we have it a bit cooler", false),
        ("two degrees cooler in here", false),
    ] {
        let d = decided(&sb, said);
        assert_eq!(d.len(), 1, "{said}: {d:?}");
        assert!(d[0].starts_with("thermostat.adjust"), "{said}: {d:?}");
        assert_eq!(!d[0].contains(":-"), up, "{said}: {d:?}");
    }
    // "Milk, add it to the list": "it" is the thing said alone before it;
    // with nothing said, "it" is no item.
    assert_eq!(
        decided(&sb, "cheese, put it on the list"),
        vec![r#"shopping.add {"item":"cheese"}"#]
    );
    assert_eq!(
        decided(&sb, "and sparkling water, add that to the groceries"),
        vec![r#"shopping.add {"item":"sparkling water"}"#]
    );
    // A request said without a verb is not a question that was not asked;
    // a meaning that fixes every room, said in a room without "all", is
    // that room's.
    assert_eq!(
        decided(&sb, "all the lights off"),
        vec![r#"lights.set {"room":"all","state":"off"}"#]
    );
    assert_eq!(
        decided(&sb, "are all the lights off"),
        vec![r#"home.state {"kind":"light","state":"off"}"#]
    );
    let in_kitchen = |text: &str| {
        let d = sb
            .run(&["understand", "--json", "--area", "kitchen", text])
            .ok()
            .json();
        d["commands"][0]["params"]["room"].clone()
    };
    assert_eq!(in_kitchen("kill the lights"), "kitchen");
    assert_eq!(in_kitchen("kill all the lights"), "all");
    // "Anything" names no thing: never an item to add.
    assert!(
        decided(&sb, "do we need anything from the shops")
            .iter()
            .all(|c| !c.starts_with("shopping.add"))
    );
    // A word slip and a spelling slip in the same words.
    assert_eq!(
        decided(&sb, "turn of the kitchen lihgts"),
        vec![r#"lights.set {"room":"kitchen","state":"off"}"#]
    );
    let alone = sb.say("it", "add it to the list");
    assert!(commands(&alone).is_empty(), "{alone}");
    assert!(
        alone["reply"]
            .as_str()
            .unwrap()
            .contains("names nothing said"),
        "{alone}"
    );
}

#[test]
fn a_room_is_never_every_room_unless_said_and_a_room_said_apart_is_the_requests() {
    let sb = Sandbox::new();
    let route_code = |text: &str| {
        sb.run(&["understand", "--json", text]).ok().json()["route_code"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // A bare request for the lights, said where no room is known, asks
    // which, however it is worded; every light only when said.
    for bare in [
        "turn the lights on",
        "turn on the lights",
        "lights off",
        "kill the lights",
    ] {
        assert_eq!(route_code(bare), "intent.clarify", "{bare}");
    }
    assert_eq!(
        decided(&sb, "switch all the lights off"),
        vec![r#"lights.set {"room":"all","state":"off"}"#]
    );
    let in_hall = sb
        .run(&[
            "understand",
            "--json",
            "--area",
            "hall",
            "turn the lights on",
        ])
        .ok()
        .json();
    assert_eq!(
        in_hall["commands"][0]["params"]["room"], "hall",
        "{in_hall}"
    );
    for (said, want) in [
        // A meaning of every room, for a sentence that names a device: the device.
        (
            "kill the porch light",
            r#"light.set {"device":"porch light","state":"off"}"#,
        ),
        // A room said apart from the request is the request's, and off is no level.
        (
            "turn the lights off out on the porch",
            r#"lights.set {"room":"porch","state":"off"}"#,
        ),
        // A device of the room said apart is read as it is.
        (
            "turn the ceiling light on in the kitchen",
            r#"light.set {"device":"kitchen ceiling","state":"on"}"#,
        ),
        // The room another clause says, after the request too.
        (
            "hey can you turn the lights on, I'm in the kitchen",
            r#"lights.set {"room":"kitchen","state":"on"}"#,
        ),
    ] {
        assert_eq!(decided(&sb, said), vec![want.to_owned()], "{said}");
    }
}

#[test]
fn a_state_asked_to_be_so_a_timer_by_its_name_alone_and_a_slip_only_the_meaning_reads() {
    let sb = Sandbox::new();
    for (said, want) in [
        (
            "can you make sure the front door is locked",
            r#"door.lock {"door":"front door"}"#,
        ),
        (
            "make sure the porch light is off",
            r#"light.set {"device":"porch light","state":"off"}"#,
        ),
        ("ensure the garage door is closed", "garage.close {}"),
        // A device named with its room's other name, and "half" as a level.
        (
            "lounge lamp to half",
            r#"light.brightness {"device":"living room lamp","level":50}"#,
        ),
        // A timer said by its name alone.
        (
            "how long is left on the pasta",
            r#"timer.status {"name":"pasta"}"#,
        ),
        // The state said without a verb, as "lights on" is.
        (
            "main door locked please",
            r#"door.lock {"door":"front door"}"#,
        ),
        // A typed slip where no template reads the words even when mended:
        // the meaning layer does, and is sure.
        ("opne the garage", "garage.open {}"),
    ] {
        assert_eq!(decided(&sb, said), vec![want.to_owned()], "{said}");
    }
    // A slip in talk stays talk.
    assert!(decided(&sb, "the garaeg is full of junk").is_empty());
}

/// Items crossed off the list with the verbs people use, and what is needed
/// said with the list, each item its own change; reminders asked after as
/// "any reminders set" are listed.
#[test]
fn items_crossed_off_or_needed_on_the_list_are_each_changed_and_pending_reminders_listed() {
    let sb = Sandbox::new();
    for (said, want) in [
        (
            "strike the eggs and the milk off my shopping list",
            vec![
                r#"shopping.remove {"item":"eggs"}"#,
                r#"shopping.remove {"item":"milk"}"#,
            ],
        ),
        (
            "tick bread off the list",
            vec![r#"shopping.remove {"item":"bread"}"#],
        ),
        (
            "we need oat milk and coffee beans on the grocery list",
            vec![
                r#"shopping.add {"item":"oat milk"}"#,
                r#"shopping.add {"item":"coffee beans"}"#,
            ],
        ),
        ("is there any reminders pending", vec!["reminder.list {}"]),
        (
            "do I have any reminders set for today",
            vec!["reminder.list {}"],
        ),
    ] {
        assert_eq!(decided(&sb, said), want, "{said}");
    }
    // Everything crossed off is the whole list, asked about first, never an
    // item named "everything".
    let all = sb
        .run(&["understand", "--json", "cross everything off the list"])
        .ok()
        .json();
    assert_eq!(all["commands"][0]["command_id"], "shopping.clear", "{all}");
}
