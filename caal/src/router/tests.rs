use super::*;
use crate::{command::ParamValue, trace::events::HeardWord, understand::Rewrite};

fn router() -> Router {
    Router::compile(&Config::defaults().unwrap()).unwrap()
}

fn route(text: &str) -> RouteDecision {
    router().route(&normalize(text), "default")
}

fn chain(d: &RouteDecision) -> &CommandChain {
    match &d.intent {
        Intent::Chain(c) => c,
        other => panic!("expected a chain, got {other:?}"),
    }
}

/// Why a configuration is refused: by its own checks, or when its router is compiled.
fn config_error(overlay: &str) -> String {
    match Config::from_toml_over_defaults(overlay).and_then(|c| Router::compile(&c)) {
        Ok(_) => panic!("accepted:\n{overlay}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn normalises_case_space_and_punctuation() {
    assert_eq!(
        normalize("  Turn ON   the Kitchen lights!  "),
        "turn on the kitchen lights"
    );
    assert_eq!(normalize("what's up?"), "what's up");
    assert_eq!(normalize("..."), "");
    // A percent sign at the end is part of what was said.
    assert_eq!(
        normalize("Dim the bedroom, like 40%."),
        "dim the bedroom, like 40%"
    );
}

#[test]
fn home_commands_route_with_typed_parameters() {
    let d = route("Turn on the kitchen lights");
    assert_eq!(
        (d.route_code.as_str(), d.command_id.as_deref()),
        ("intent.command", Some("lights.set"))
    );
    assert_eq!(d.params, json!({"room": "kitchen", "state": "on"}));
    assert_eq!(chain(&d).commands[0].summary, "turn on the kitchen lights");

    assert_eq!(
        route("turn off the lights").params,
        json!({"room": "all", "state": "off"})
    );
    assert_eq!(
        route("set the living room lights to 40%").params,
        json!({"room": "living room", "level": 40})
    );
    assert_eq!(
        route("set the thermostat to 21.5 degrees").params,
        json!({"temperature": 21.5})
    );
    assert_eq!(
        route("set a timer for 10 minutes").params,
        json!({"duration": 600})
    );
    assert_eq!(
        route("remind me to call mum in 2 hours").params,
        json!({"what": "call mum", "duration": 7200})
    );
    let d = route("add oat milk to the shopping list");
    assert_eq!(
        (d.auth_level, d.topic.as_deref()),
        (AuthLevel::UNDOABLE, Some("oat milk"))
    );
    assert_eq!(route("unlock the back door").auth_level, AuthLevel::CONFIRM);
    assert_eq!(
        route("unlock the back door").params,
        json!({"door": "back door"})
    );
    // Which door, when the home has several: asked, naming them.
    let which = route("unlock the door");
    assert!(
        format!("{:?}", which.intent)
            .contains("say which door (front door, back door or side door)"),
        "{which:?}"
    );
    assert_eq!(
        route("open the garage").auth_level,
        AuthLevel::DOUBLE_CONFIRM
    );
    let d = route("switch to research mode");
    assert_eq!(
        (d.route_code.as_str(), d.params.clone()),
        ("intent.state", json!({"state": "research"}))
    );
    for (text, intent) in [
        ("yes", Intent::Confirm),
        ("no thanks", Intent::Deny),
        ("undo that", Intent::Undo),
    ] {
        assert_eq!(route(text).intent, intent, "{text}");
    }
}

#[test]
fn out_of_range_and_unknown_values_are_refused_with_a_reason() {
    let d = route("set the thermostat to 400 degrees");
    match d.intent {
        Intent::Invalid {
            command_id,
            problem,
        } => {
            assert_eq!(command_id, "thermostat.set");
            assert_eq!(problem.code, "validator.out_of_range");
            assert_eq!(
                problem.message,
                "the temperature must be between 10 and 30 °C, not 400 °C"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        route("set the kitchen lights to 140%").intent,
        Intent::Invalid { .. }
    ));
    assert!(matches!(
        route("switch to party mode").intent,
        Intent::Invalid { .. }
    ));
}

#[test]
fn macros_are_chains_gated_at_their_highest_level() {
    let d = route("I'm home");
    let c = chain(&d);
    assert_eq!(c.macro_name.as_deref(), Some("arrive_home"));
    assert_eq!(c.commands.len(), 2);
    assert_eq!(
        c.chain_level,
        AuthLevel::CONFIRM,
        "door.unlock (3) with lights.set (1)"
    );
    assert_eq!(d.auth_level, AuthLevel::CONFIRM);
    assert_eq!(d.command_id, None);
    let night = route("good night");
    assert_eq!(chain(&night).chain_level, AuthLevel::RUN);
    assert_eq!(chain(&night).commands.len(), 3);
}

#[test]
fn unmatched_input_follows_the_state() {
    let r = router();
    // The action state keeps to commands; the others ask a model.
    let d = r.route("tell me a story", "action");
    assert_eq!(d.route_code, "intent.unmatched");
    assert!(matches!(d.intent, Intent::Reply(_)));
    let d = r.route("tell me a story", "conversation");
    assert_eq!(d.route_code, "intent.chat");
    assert!(matches!(
        d.intent,
        Intent::Think {
            route: RouteType::Chat,
            fallback: Some(_)
        }
    ));
    assert_eq!(
        r.route("look up the weather", "default").intent,
        Intent::Think {
            route: RouteType::Research,
            fallback: None
        }
    );
    // A chat rule with a fixed reply needs no model.
    assert!(matches!(
        r.route("hello", "default").intent,
        Intent::Reply(_)
    ));
}

#[test]
fn equal_priority_rules_naming_different_commands_ask_which() {
    // A user's rules join the defaults' (none of which says "open the garage").
    let config = Config::from_toml_over_defaults(
        r#"
        [[rules]]
        name = "garage.open"
        pattern = '^open the garage$'
        route = "command"
        command = "garage.open"
        priority = 10
        [[rules]]
        name = "garage.open.again"
        pattern = '^open the (?:garage)$'
        route = "command"
        command = "garage.open"
        priority = 10
        [[rules]]
        name = "lights.garage"
        pattern = '^open the garage$'
        route = "command"
        command = "timer.cancel"
        priority = 10
        "#,
    )
    .unwrap();
    let r = Router::compile(&config).unwrap();
    let d = r.route("open the garage", "default");
    assert_eq!(d.route_code, "intent.ambiguous");
    match d.intent {
        Intent::Ambiguous { candidates } => {
            assert_eq!(candidates, ["open the garage door", "cancel the timer"])
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_configuration_names_the_rule_and_the_problem() {
    let rule = |body: &str| format!("[[rules]]\nname = \"r1\"\n{body}\n");
    let err = config_error(&rule("pattern = '(oops'\nroute = \"chat\""));
    assert!(
        err.contains("rule \"r1\"") && err.contains("invalid pattern"),
        "{err}"
    );
    let err = config_error(&rule(
        "pattern = 'x'\nroute = \"command\"\ncommand = \"lights.set\"\nauth_level = 7",
    ));
    assert!(err.contains("r1") && err.contains("outside 1–4"), "{err}");
    let err = config_error(&format!(
        "{}{}",
        rule("pattern = 'a'\nroute = \"chat\""),
        rule("pattern = 'b'\nroute = \"chat\"")
    ));
    assert!(err.contains("r1") && err.contains("another rule"), "{err}");
    let err = config_error(&rule(
        "pattern = 'x'\nroute = \"command\"\ncommand = \"toaster.on\"",
    ));
    assert!(
        err.contains("toaster.on") && err.contains("not defined"),
        "{err}"
    );
    let err = config_error(&rule(
        "pattern = '^turn (?P<state>on|off)$'\nroute = \"command\"\ncommand = \"thermostat.set\"",
    ));
    assert!(err.contains("temperature"), "{err}");
    let err =
        config_error("[macros.bad]\nsummary = \"x\"\nsteps = [{ command = \"toaster.on\" }]\n");
    assert!(
        err.contains("macro \"bad\"") && err.contains("toaster.on"),
        "{err}"
    );
    let err = config_error("[commands.\"garage.open\"]\nauth_level = 0\n");
    assert!(
        err.contains("garage.open") && err.contains("outside 1–4"),
        "{err}"
    );
    let err = config_error("[commands.\"timer.cancel\"]\nauth_level = 2\n");
    assert!(
        err.contains("timer.cancel") && err.contains("undo"),
        "{err}"
    );
    let err = config_error("[commands.\"x.y\"]\nsummary = \"s\"\nreply = \"r\"\n");
    assert!(
        err.contains("x.y") && err.contains("no built-in executor"),
        "{err}"
    );
    let err = config_error(
        "[commands.\"x.y\"]\nsummary = \"s\"\nreply = \"r\"\nexecutor = \"webhook:nope\"\n",
    );
    assert!(err.contains("x.y") && err.contains("nope"), "{err}");
}

#[test]
fn a_stored_chain_rebuilds_at_no_lower_level() {
    let r = router();
    let d = r.route("unlock the back door", "default");
    let stored = chain(&d).stored();
    let rebuilt = r.rebuild(&stored).unwrap();
    assert_eq!(rebuilt.chain_id, stored.chain_id);
    assert_eq!(rebuilt.chain_level, AuthLevel::CONFIRM);
    assert_eq!(
        rebuilt.commands[0].params["door"],
        ParamValue::Text("back door".into())
    );
}

#[test]
fn the_model_layers_numbers_are_checked_naming_the_key() {
    let floor = config_error("[understand.model]\nfloor = 1.5\n");
    assert!(floor.contains("understand.model.floor"), "{floor}");
    let candidates = config_error("[understand.model]\ncandidates = 0\n");
    assert!(
        candidates.contains("understand.model.candidates"),
        "{candidates}"
    );
    let method = config_error("[understand.model]\nmethod = \"guess\"\n");
    assert!(
        method.contains("guess") || method.contains("method"),
        "{method}"
    );
}

#[test]
fn the_model_layer_is_offered_only_what_the_meaning_layer_was_not_sure_of() {
    // Without a semantic layer (no embedding model in unit tests) there is
    // nothing to choose among: templates and rules decide as before.
    let mut config = Config::defaults().unwrap();
    config.understand.model.enabled = true;
    let router = Router::compile(&config).unwrap();
    let d = router.route(&normalize("turn on the kitchen lights"), "default");
    assert!(d.choices.is_empty(), "{d:?}");
    // A pick with no choices keeps the decision as it was.
    let kept = router.chosen(d.clone(), Some(0), "default");
    assert_eq!(kept, d);
}

#[test]
fn a_guess_from_a_word_heard_unsurely_is_asked_about_first() {
    let router = router();
    let matched = route("turn on the kitchen lights");
    let bars = Bars {
        guess: 0.3,
        value: 0.3,
        unknown: 0.3,
    };
    let hearing = |least: f32| Hearing {
        least,
        words: &[],
        bars,
    };
    // (Unit tests have no sentence library: the command rules match it.)
    assert!(matched.layer.matched_whole(), "{matched:?}");
    // Every word matched a rule or template: the transcript's weakest word does not matter.
    assert_eq!(router.heard(matched.clone(), &hearing(0.05)), matched);
    // The same request guessed by a layer below is asked about when a word was unsure ...
    let mut guessed = matched.clone();
    guessed.layer = Layer::Semantic;
    let asked = router.heard(guessed.clone(), &hearing(0.12));
    assert_eq!(asked.auth_level, AuthLevel::CONFIRM);
    assert_eq!(chain(&asked).chain_level, AuthLevel::CONFIRM);
    assert_eq!(
        asked.understood.as_ref().unwrap().to_json()["heard"],
        serde_json::json!({"least": 0.12, "bar": 0.3})
    );
    // ... and runs at its level when every word was heard surely enough.
    assert_eq!(router.heard(guessed, &hearing(0.3)), {
        let mut same = matched;
        same.layer = Layer::Semantic;
        same
    });
}

#[test]
fn a_value_heard_unsurely_is_asked_about_however_it_was_matched() {
    let router = router();
    let matched = route("add oat milk to the shopping list");
    assert!(
        chain(&matched).chain_level < AuthLevel::CONFIRM,
        "{matched:?}"
    );
    let heard = |item: f32| -> Vec<HeardWord> {
        [
            ("add", 0.9),
            ("oat", item),
            ("milk", 0.8),
            ("to", 0.99),
            ("the", 0.99),
            ("shopping", 0.95),
            ("list", 0.97),
        ]
        .iter()
        .map(|(w, p)| HeardWord {
            word: (*w).to_owned(),
            p: *p,
        })
        .collect()
    };
    let bars = Bars {
        guess: 0.3,
        value: 0.3,
        unknown: 0.3,
    };
    // The item's words heard surely: it runs as matched.
    let sure = heard(0.7);
    let hearing = Hearing {
        least: 0.7,
        words: &sure,
        bars,
    };
    assert_eq!(router.heard(matched.clone(), &hearing), matched);
    // A word of the item heard unsurely: asked, and why is kept.
    let unsure = heard(0.11);
    let hearing = Hearing {
        least: 0.11,
        words: &unsure,
        bars,
    };
    let asked = router.heard(matched.clone(), &hearing);
    assert_eq!(asked.auth_level, AuthLevel::CONFIRM);
    assert_eq!(chain(&asked).chain_level, AuthLevel::CONFIRM);
    let heard = asked.understood.as_ref().unwrap().heard.as_ref();
    let why = heard.and_then(|h| h.value.as_ref()).unwrap();
    assert_eq!(why.param, "item", "{why:?}");
    assert_eq!(why.said, "oat milk", "{why:?}");
    assert_eq!(why.p, 0.11, "{why:?}");
    // Below another value's bar only: the same words, a bar under them.
    let lenient = Hearing {
        bars: Bars {
            guess: 0.3,
            value: 0.1,
            unknown: 0.1,
        },
        ..hearing
    };
    assert_eq!(router.heard(matched.clone(), &lenient), matched);
}

#[test]
fn a_long_input_is_read_by_its_clauses_only_and_else_goes_to_the_fallback() {
    let router = router();
    // 2,000 characters of words that requests are made of, with no clause
    // in them: no sentence layer reads it whole (the work would grow with
    // the cube of its length), so it is the state's fallback.
    let words = "turn on the kitchen lights and lock the front door please set a timer";
    let long: String = words
        .split(' ')
        .cycle()
        .take(600)
        .collect::<Vec<_>>()
        .join(" ");
    let long = &long[..2_000];
    let d = router.route(&normalize(long), "default");
    assert!(!matches!(d.intent, Intent::Chain(_)), "{d:?}");
    assert_eq!(d.layer, Layer::None);
    // A request in a clause of its own is still heard, after a long story.
    let story: String = ["we had a long day"; 15].join(" and ");
    let said = format!("{story}. turn on the kitchen lights");
    let d = router.route(&normalize(&said), "default");
    let c = chain(&d);
    assert_eq!(c.commands[0].command_id, "lights.set", "{d:?}");
    // More clauses than a request has is no request.
    let many = ["turn on the kitchen lights"; 13].join(", ");
    assert!(!matches!(
        router.route(&normalize(&many), "default").intent,
        Intent::Chain(_)
    ));
}

#[test]
fn a_side_word_heard_surely_is_not_weighed_against_the_audio_again() {
    use crate::trace::events::HeardWord;
    let router = configured();
    let weighed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = weighed.clone();
    // The audio would leave "on" in doubt, were it weighed.
    let listen = crate::understand::Listen::new(move |texts: &[String]| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(vec![-5.0; texts.len()])
    });
    let spoken = crate::understand::Context {
        spoken: true,
        listen: Some(listen),
        ..Default::default()
    };
    let words = |said: &str, on: f32| -> Vec<HeardWord> {
        said.split(' ')
            .map(|w| HeardWord {
                word: w.into(),
                p: if w == "on" || w == "lock" { on } else { 0.99 },
            })
            .collect()
    };
    let heard = normalize("turn on the kitchen lights");
    let decided = router.route_in(&heard, "default", &spoken);
    assert_eq!(decided.auth_level, AuthLevel::RUN, "{decided:?}");
    // "On" heard at 0.995: "off" is behind by ln(0.995/0.005) = 5.3 there
    // alone, over twice the margin (2.0): it runs, nothing weighed.
    let sure = words(&heard, 0.995);
    let d = router.doubted(decided.clone(), (&heard, &sure), &spoken);
    assert_eq!(d.auth_level, AuthLevel::RUN, "{d:?}");
    assert_eq!(weighed.load(std::sync::atomic::Ordering::Relaxed), 0);
    // At 0.95 (a gap of 2.9) it is weighed, and the audio leaves it in doubt.
    let unsure = words(&heard, 0.95);
    let d = router.doubted(decided.clone(), (&heard, &unsure), &spoken);
    assert_eq!(d.auth_level, AuthLevel::CONFIRM, "{d:?}");
    assert_eq!(weighed.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Not found among the words heard: weighed.
    let d = router.doubted(decided, (&heard, &[]), &spoken);
    assert_eq!(d.auth_level, AuthLevel::CONFIRM, "{d:?}");
    // After a word "un" is heard as, the doubt is in that word, however
    // sure the side word was: weighed.
    let heard = normalize("and lock the front door");
    let decided = router.route_in(&heard, "default", &spoken);
    let before = weighed.load(std::sync::atomic::Ordering::Relaxed);
    let d = router.doubted(decided, (&heard, &words(&heard, 0.999)), &spoken);
    assert_eq!(
        weighed.load(std::sync::atomic::Ordering::Relaxed),
        before + 1
    );
    assert_eq!(d.auth_level, AuthLevel::CONFIRM, "{d:?}");
}

#[test]
fn a_side_of_an_opposite_pair_the_audio_leaves_in_doubt_is_asked_about() {
    // The sound layer (its dictionary installed by the setup) holds the margin.
    let router = configured();
    let heard = normalize("pause the timer");
    let scored = |pause: f32, resume: f32| {
        crate::understand::Listen::new(move |texts: &[String]| {
            Some(
                texts
                    .iter()
                    .map(|t| {
                        if t.starts_with("pause") {
                            pause
                        } else {
                            resume
                        }
                    })
                    .collect(),
            )
        })
    };
    let spoken = |listen| crate::understand::Context {
        spoken: true,
        listen: Some(listen),
        ..Default::default()
    };
    let decided = router.route_in(&heard, "default", &spoken(scored(-5.0, -30.0)));
    assert_eq!(decided.auth_level, AuthLevel::RUN, "{decided:?}");
    // Clearly "pause": it runs.
    let d = router.doubted(decided.clone(), (&heard, &[]), &spoken(scored(-5.0, -30.0)));
    assert_eq!(d.auth_level, AuthLevel::RUN);
    // "Resume" fits about as well: asked first, and why is recorded.
    let d = router.doubted(decided.clone(), (&heard, &[]), &spoken(scored(-5.0, -6.0)));
    assert_eq!(d.auth_level, AuthLevel::CONFIRM);
    assert_eq!(chain(&d).chain_level, AuthLevel::CONFIRM);
    let doubt = d.understood.as_ref().unwrap().doubt.as_ref().unwrap();
    assert!(doubt.other.contains("timer"), "{doubt:?}");
    // Typed (no audio) nothing is weighed.
    let typed = crate::understand::Context::default();
    assert_eq!(
        router.doubted(decided, (&heard, &[]), &typed).auth_level,
        AuthLevel::RUN
    );
}

#[test]
fn a_name_taken_back_is_put_where_the_one_it_corrects_was() {
    let r = router();
    let fix = |t: &str| r.corrected(&normalize(t), &Context::default());
    assert_eq!(
        fix("turn on the kitchen, sorry, the dining room lights").as_deref(),
        Some("turn on the dining room lights")
    );
    assert_eq!(
        fix("switch off the desk lamp, i mean the bedroom lamp").as_deref(),
        Some("switch off the bedroom lamp")
    );
    // No name after it: what follows is the request.
    assert_eq!(
        fix("lights on, no wait, lights off").as_deref(),
        Some("lights off")
    );
    // An apology before the request corrects nothing.
    assert_eq!(fix("sorry, turn on the lights"), None);
    assert_eq!(fix("turn on the lights"), None);
}

#[test]
fn here_is_the_speakers_room_only_where_no_room_is_named() {
    let r = router();
    let at = |area: Option<&str>, t: &str| {
        let context = Context {
            area: area.map(str::to_owned),
            ..Context::default()
        };
        r.here_said(&normalize(t), &context)
    };
    assert_eq!(
        at(Some("office"), "it's too dark in here").as_deref(),
        Some("it's too dark in the office")
    );
    assert_eq!(
        at(Some("office"), "light this room up").as_deref(),
        Some("light the office up")
    );
    assert_eq!(at(None, "it's too dark in here"), None);
    assert_eq!(at(Some("office"), "turn on the kitchen lights here"), None);
}

#[test]
fn a_language_with_examples_says_what_entities_are_embedded_as() {
    let e = config_error("[understand.languages.en]\ngeneric = { room = \"\" }\n");
    assert!(
        e.contains("understand.languages.en.generic.room") && e.contains("is empty"),
        "{e}"
    );
    // A language with no examples has no meaning layer, and needs none.
    let c = Config::from_toml_over_defaults("[understand]\nlanguage = \"de\"\n").unwrap();
    assert!(c.understand.languages["de"].examples.is_empty());
    Router::compile(&c).unwrap();
}

#[test]
fn a_list_thing_loses_the_words_before_it_that_are_no_part_of_it() {
    // The configured rules (this router has no sentence library loaded).
    let items = |text: &str| -> Vec<ParamValue> {
        chain(&route(text))
            .commands
            .iter()
            .map(|c| c.params["item"].clone())
            .collect()
    };
    let text = |s: &str| ParamValue::Text(s.into());
    assert_eq!(
        items("add the bananas to the shopping list"),
        vec![text("bananas")]
    );
    assert_eq!(
        items("take the milk off the shopping list"),
        vec![text("milk")]
    );
    assert_eq!(
        items("add some milk and the eggs to the shopping list"),
        vec![text("milk"), text("eggs")]
    );
    // A thing that is one though joined keeps its words.
    assert_eq!(
        items("add mac and cheese to the shopping list"),
        vec![text("mac and cheese")]
    );
}

#[test]
fn an_unlock_heard_as_and_lock_is_weighed_against_unlock_before_it_runs() {
    let router = configured();
    let heard = normalize("and lock the front door");
    // The audio fits "unlock" about as well as what was heard.
    let listen = crate::understand::Listen::new(|texts: &[String]| {
        Some(
            texts
                .iter()
                .map(|t| match t.as_str() {
                    "and lock the front door" | "lock the front door" => -5.0,
                    t if t.starts_with("unlock") => -6.0,
                    _ => -20.0,
                })
                .collect(),
        )
    });
    let spoken = crate::understand::Context {
        spoken: true,
        listen: Some(listen),
        ..Default::default()
    };
    let decided = router.route_in(&heard, "default", &spoken);
    assert_eq!(chain(&decided).commands[0].command_id, "door.lock");
    let d = router.doubted(decided, (&heard, &[]), &spoken);
    assert_eq!(d.auth_level, AuthLevel::CONFIRM, "{d:?}");
    let doubt = d.understood.as_ref().unwrap().doubt.as_ref().unwrap();
    assert_eq!(doubt.other, "unlock the front door");
}

#[test]
fn in_heard_as_and_before_a_room_is_put_back_only_for_speech() {
    let r = configured();
    let spoken = crate::understand::Context {
        spoken: true,
        ..Default::default()
    };
    assert_eq!(
        r.in_heard_as(&normalize("turn off the lights and the kitchen"))
            .as_deref(),
        Some("turn off the lights in the kitchen")
    );
    let d = r.route_in(
        &normalize("turn off the lights and the kitchen"),
        "default",
        &spoken,
    );
    let c = chain(&d);
    assert_eq!(c.commands.len(), 1, "{d:?}");
    assert_eq!(
        c.commands[0].params["room"],
        ParamValue::Text("kitchen".into())
    );
    // Typed, "and" is read as written.
    let typed = r.route_in(
        &normalize("turn off the lights and the kitchen"),
        "default",
        &crate::understand::Context::default(),
    );
    let why = |d: &RouteDecision| d.understood.as_ref().and_then(|u| u.read_because);
    assert_eq!(why(&d), Some(Rewrite::InHeardAsAnother), "{d:?}");
    assert_ne!(why(&typed), Some(Rewrite::InHeardAsAnother), "{typed:?}");
    // A device named before it: the room is a second thing asked for.
    assert_eq!(
        r.in_heard_as(&normalize("turn on the porch light and the kitchen")),
        None
    );
    // More than a room after it: another request.
    assert_eq!(
        r.in_heard_as(&normalize(
            "turn off the lights and the kitchen fan is loud too"
        )),
        None
    );
    assert_eq!(
        r.in_heard_as(&normalize("turn the lights and living room on"))
            .as_deref(),
        Some("turn the lights in living room on")
    );
}

#[test]
fn a_name_heard_surely_is_not_read_by_sound_as_another() {
    let router = configured();
    let heard = normalize("add 10 minutes to the chicken timer");
    let name = |context: &crate::understand::Context| {
        let d = router.route_in(&heard, "default", context);
        chain(&d).commands[0].params.get("name").cloned()
    };
    let sure = crate::understand::Context {
        spoken: true,
        sure_words: Some(
            ["add", "10", "minutes", "to", "the", "chicken", "timer"]
                .map(str::to_owned)
                .to_vec(),
        ),
        ..Default::default()
    };
    assert_eq!(name(&sure), Some(ParamValue::Text("chicken".into())));
    // "chicken" heard unsurely: a name of the home it sounds like may be meant.
    let unsure = crate::understand::Context {
        sure_words: Some(vec!["add".into(), "timer".into()]),
        ..sure.clone()
    };
    assert_eq!(name(&unsure), Some(ParamValue::Text("kitchen".into())));
}

/// The router as `caal serve` builds it: the sentence library, the meaning
/// layer and the dictionary the setup installs.
fn configured() -> Router {
    let config = Config::defaults().unwrap();
    Router::configured(&config, &|k| std::env::var(k).ok())
        .unwrap()
        .0
}

fn typed(r: &Router, text: &str) -> RouteDecision {
    r.route_in(
        &normalize(text),
        "default",
        &crate::understand::Context::default(),
    )
}

#[test]
fn words_that_open_a_request_are_taken_off_and_a_verb_in_ing_read_as_the_verb() {
    let r = configured();
    let d = typed(&r, "ok, resume the cake timer");
    assert_eq!(d.command_id.as_deref(), Some("timer.resume"), "{d:?}");
    assert_eq!(d.params, json!({"name": "cake"}));
    // "Setting" is no timer's name ("sitting", read as heard).
    let d = typed(&r, "would you mind setting a timer for 5 minutes");
    assert_eq!(d.command_id.as_deref(), Some("timer.set"), "{d:?}");
    assert_eq!(d.params, json!({"duration": 300}));
    let d = typed(&r, "so would you mind opening the garage door");
    assert_eq!(d.command_id.as_deref(), Some("garage.open"), "{d:?}");
    assert_eq!(
        r.opened("would you mind closing the door").as_deref(),
        Some("close the door")
    );
    assert_eq!(
        r.opened("how about dimming the lamp").as_deref(),
        Some("dim the lamp")
    );
    // A lead with no verb in -ing after it, or nothing after the opening
    // word, opens nothing.
    assert_eq!(r.opened("would you mind the noise"), None);
    assert_eq!(r.opened("okay"), None);
    assert_eq!(r.opened("turn on the lights"), None);
}

#[test]
fn a_meaning_whose_examples_say_the_other_state_is_near_only_by_those_saying_this_one() {
    let r = configured();
    // Near "douse the lights in the lounge" (HassTurnOff), which says
    // neither word; its fellows say "off": never turned off.
    let d = typed(&r, "um can you put the countertop lights on in the kitchen");
    assert_eq!(d.command_id.as_deref(), Some("light.set"), "{d:?}");
    assert_eq!(d.params["state"], "on", "{d:?}");
    // Its example that says "on" too stays near.
    let d = typed(&r, "the garage light is still on");
    assert_eq!(d.params["state"], "off", "{d:?}");
    // A meaning about no kind of device has no states: "read out" is no
    // "off" against "what's on the list".
    let d = typed(&r, "read out the shopping list");
    assert_eq!(d.command_id.as_deref(), Some("shopping.list"), "{d:?}");
}

#[test]
fn a_question_of_state_names_the_one_device_its_sentence_names() {
    let r = configured();
    let d = typed(&r, "is the garage door open");
    assert_eq!(
        d.params,
        json!({"kind": "cover", "device": "garage door", "state": "open"})
    );
    let d = typed(&r, "what's the thermostat set to");
    assert_eq!(d.params, json!({"kind": "climate", "device": "thermostat"}));
    // No device said: none named.
    let d = typed(&r, "are any lights on");
    assert_eq!(d.command_id.as_deref(), Some("home.state"), "{d:?}");
    assert!(d.params.get("device").is_none(), "{d:?}");
}

#[test]
fn a_timer_request_among_other_words_keeps_its_verb_and_name() {
    let r = configured();
    // Not "a timer for a sec" called "pause the cake".
    let d = typed(&r, "pause the cake timer for a sec");
    assert_eq!(d.command_id.as_deref(), Some("timer.pause"), "{d:?}");
    assert_eq!(d.params, json!({"name": "cake"}));
    let d = typed(&r, "pasta timer, eight minutes");
    assert_eq!(d.command_id.as_deref(), Some("timer.set"), "{d:?}");
    assert_eq!(d.params["duration"], 480);
    // "Another" is one more of what the request before asked.
    let d = typed(
        &r,
        "set a timer for 10 minutes for the rice and another for 25 minutes for the chicken",
    );
    let set: Vec<_> = chain(&d)
        .commands
        .iter()
        .map(|c| c.params.clone())
        .collect();
    assert_eq!(set.len(), 2, "{d:?}");
    assert_eq!(set[0]["name"], ParamValue::Text("rice".into()));
    assert_eq!(set[1]["name"], ParamValue::Text("chicken".into()));
    assert_eq!(set[1]["duration"], ParamValue::Seconds(1500));
}

#[test]
fn a_typed_slip_changes_no_more_words_than_the_request_needs() {
    let r = configured();
    let d = typed(&r, "add eggs to the shoppign list");
    assert_eq!(d.command_id.as_deref(), Some("shopping.add"), "{d:?}");
    assert_eq!(d.params, json!({"item": "eggs"}));
}

/// Each command of `d` with its parameters, in order.
fn commands(d: &RouteDecision) -> Vec<(String, serde_json::Value)> {
    match &d.intent {
        Intent::Chain(c) => c
            .commands
            .iter()
            .map(|c| {
                (
                    c.command_id.clone(),
                    serde_json::to_value(&c.params).unwrap(),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// That `d` runs the one command `id` with `params`.
fn runs(d: &RouteDecision, id: &str, params: serde_json::Value) {
    assert_eq!(commands(d), [(id.to_owned(), params)], "{d:?}");
}

/// That each sentence, typed, runs the one command given.
fn each_runs(r: &Router, cases: &[(&str, &str, serde_json::Value)]) {
    for (text, id, params) in cases {
        runs(&typed(r, text), id, params.clone());
    }
}

#[test]
fn a_clause_or_a_part_of_several_requests_is_read_whole() {
    let r = configured();
    // A clause that holds two requests, after one that holds one.
    let d = typed(
        &r,
        "turn off the desk lamp, switch on the bedroom lamp and lock the side door",
    );
    let ids: Vec<String> = commands(&d).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["light.set", "light.set", "door.lock"], "{d:?}");
    // A part no template reads, opening with a request's verb, beside one
    // a template reads: read by meaning, and with a clause said aside.
    let d = typed(
        &r,
        "lock the front door and shut the garage, I'm off to bed",
    );
    let ids: Vec<String> = commands(&d).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["door.lock", "garage.close"], "{d:?}");
    let d = typed(&r, "shut the garage and lock the back door");
    let ids: Vec<String> = commands(&d).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["garage.close", "door.lock"], "{d:?}");
}

#[test]
fn words_said_aside_are_no_part_of_what_a_wildcard_takes() {
    let r = configured();
    let d = typed(
        &r,
        "delete the reminder to pay the gas bill, I've already done it",
    );
    runs(&d, "reminder.cancel", json!({"what": "pay the gas bill"}));
    assert_eq!(
        d.understood.as_ref().and_then(|u| u.read_because),
        Some(Rewrite::SaidAside)
    );
    // After a length of time a wildcard took.
    let d = typed(
        &r,
        "could you remind me to order flowers in 45 minutes once I'm off this call",
    );
    runs(
        &d,
        "reminder.add",
        json!({"what": "order flowers", "duration": 2700}),
    );
    // A comma in a list of things opens no clause: all of it is the reminder.
    let d = typed(&r, "remind me to buy eggs, milk and bread");
    runs(
        &d,
        "reminder.add",
        json!({"what": "buy eggs, milk and bread"}),
    );
}

#[test]
fn a_typed_slip_in_a_number_or_among_a_wildcards_words_is_mended() {
    let r = configured();
    let d = typed(&r, "set a timer for fiften minutes");
    runs(&d, "timer.set", json!({"duration": 900}));
    let d = typed(&r, "remind me to feed the cat in 10 minutrs");
    runs(
        &d,
        "reminder.add",
        json!({"what": "feed the cat", "duration": 600}),
    );
    // A word the dictionary has is what was typed: "eggs" stays eggs.
    let d = typed(&r, "start a timer called eggs for seven minutes");
    runs(&d, "timer.set", json!({"name": "eggs", "duration": 420}));
}

#[test]
fn a_question_finds_a_request_among_its_words_only_where_it_changes_nothing() {
    let r = configured();
    let d = typed(&r, "what's on the grocery list at the moment");
    assert_eq!(d.command_id.as_deref(), Some("shopping.list"), "{d:?}");
    assert_eq!(d.layer, Layer::Span);
    // "Did I lock the back door" asks about locking it: never locks it.
    let d = typed(&r, "did I lock the back door earlier on today or not");
    assert_ne!(d.command_id.as_deref(), Some("door.lock"), "{d:?}");
    // Anyone of the house may be asked about.
    let d = typed(&r, "did somebody leave the garage light on?");
    runs(
        &d,
        "home.state",
        json!({"kind": "light", "device": "garage light", "state": "on"}),
    );
}

#[test]
fn a_change_of_temperature_said_by_or_aside_is_a_change() {
    let r = configured();
    let d = typed(&r, "drop the temperature by three");
    runs(&d, "thermostat.adjust", json!({"change": -3.0}));
    let d = typed(&r, "make it a bit cooler, like two degrees");
    runs(&d, "thermostat.adjust", json!({"change": -2.0}));
    let d = typed(&r, "make it warmer, about 3 degrees");
    runs(&d, "thermostat.adjust", json!({"change": 3.0}));
}

#[test]
fn a_condition_holds_back_a_change_but_not_a_report() {
    let r = configured();
    let d = typed(&r, "give me an update on the house before I head to bed");
    assert_eq!(d.command_id.as_deref(), Some("home.status"), "{d:?}");
    let d = typed(&r, "turn off the porch light after I head to bed");
    assert_eq!(d.route_code, "intent.conditional", "{d:?}");
    // Before it is now: done before then.
    let d = typed(&r, "turn off the porch light before I head to bed");
    runs(
        &d,
        "light.set",
        json!({"device": "porch light", "state": "off"}),
    );
}

#[test]
fn a_thing_the_language_does_not_know_is_held_to_a_higher_bar() {
    let r = configured();
    let bars = Bars {
        guess: 0.3,
        value: 0.4,
        unknown: 0.65,
    };
    let heard = |words: &[(&str, f32)]| -> Vec<HeardWord> {
        words
            .iter()
            .map(|(w, p)| HeardWord {
                word: (*w).to_owned(),
                p: *p,
            })
            .collect()
    };
    let list = [
        ("to", 0.99),
        ("the", 0.99),
        ("shopping", 0.99),
        ("list", 0.97),
    ];
    // "Out milk", heard at 0.59: nobody buys it, so it is asked about.
    let out = heard(&[&[("add", 0.97), ("out", 0.59), ("milk", 0.94)][..], &list].concat());
    let d = typed(&r, "add out milk to the shopping list");
    let hearing = Hearing {
        least: 0.59,
        words: &out,
        bars,
    };
    let asked = r.heard(d, &hearing);
    assert_eq!(asked.auth_level, AuthLevel::CONFIRM, "{asked:?}");
    let why = asked.understood.as_ref().unwrap().heard.as_ref().unwrap();
    assert_eq!(why.value.as_ref().unwrap().bar, 0.65);
    // "Oat milk" heard as surely is a thing people buy: it runs.
    let oat = heard(&[&[("add", 0.97), ("oat", 0.59), ("milk", 0.94)][..], &list].concat());
    let d = typed(&r, "add oat milk to the shopping list");
    let hearing = Hearing {
        least: 0.59,
        words: &oat,
        bars,
    };
    assert_eq!(r.heard(d.clone(), &hearing), d);
    // Said as one or as several, a thing is known.
    assert!(r.words.knows_thing("egg") && r.words.knows_thing("eggs"));
    assert!(!r.words.knows_thing("red"));
}

#[test]
fn a_question_the_change_after_it_answers_is_not_asked() {
    let r = configured();
    // "It" is the garage door the question asked about, though it said "the garage".
    let d = typed(&r, "did we leave the garage open? shut it please");
    runs(&d, "garage.close", json!({}));
    // A question about several lights is still answered beside the change.
    let d = typed(&r, "are any lights on? turn off the kitchen lights");
    assert_eq!(commands(&d).len(), 2, "{d:?}");
}

#[test]
fn a_question_asked_indirectly_or_in_the_perfect_never_runs_a_change() {
    let r = configured();
    let d = typed(
        &r,
        "I wonder whether the kitchen lights have been switched off",
    );
    runs(
        &d,
        "home.state",
        json!({"kind": "light", "room": "kitchen", "state": "off"}),
    );
    let d = typed(&r, "can you tell me if the back door has been locked");
    runs(
        &d,
        "home.state",
        json!({"kind": "lock", "device": "back door", "state": "locked"}),
    );
    // More than a question is still a request.
    let d = typed(
        &r,
        "check whether the lights are on in the kitchen and turn them off",
    );
    runs(&d, "lights.set", json!({"room": "kitchen", "state": "off"}));
}

#[test]
fn a_state_question_carries_the_state_and_the_device_it_names() {
    let r = configured();
    let d = typed(&r, "is the heating still on");
    runs(
        &d,
        "home.state",
        json!({"kind": "climate", "device": "thermostat", "state": "on"}),
    );
    let d = typed(&r, "has the garage door been shut");
    assert_eq!(commands(&d)[0].1["device"], json!("garage door"), "{d:?}");
}

#[test]
fn a_level_said_as_a_word_is_never_left_out_of_a_request() {
    let r = configured();
    let d = typed(&r, "put the desk lamp on full");
    runs(
        &d,
        "light.brightness",
        json!({"device": "desk lamp", "level": 100}),
    );
    let d = typed(&r, "get the dining room lights up to max");
    runs(
        &d,
        "lights.brightness",
        json!({"room": "dining room", "level": 100}),
    );
}

#[test]
fn polite_words_closing_a_request_are_neither_a_condition_nor_a_not() {
    let r = configured();
    let d = typed(&r, "lock the back door if you don't mind");
    runs(&d, "door.lock", json!({"door": "back door"}));
    let d = typed(&r, "set a timer for 20 minutes, that's when the bus comes");
    runs(&d, "timer.set", json!({"duration": 1200}));
    let d = typed(&r, "could you change to conversation mode please");
    runs(&d, "mode.set", json!({"state": "conversation"}));
}

#[test]
fn clauses_that_name_point_back_or_say_what_is_not_so_aside() {
    let r = configured();
    // A clause that only names what the next points back at.
    let d = typed(&r, "the porch light, can you put it at 40 percent");
    runs(
        &d,
        "light.brightness",
        json!({"device": "porch light", "level": 40}),
    );
    // A statement pointing back is no request of its own.
    let d = typed(&r, "turn off the office lights, someone left them on again");
    runs(&d, "lights.set", json!({"room": "office", "state": "off"}));
    // A clause that names what the one before asked for.
    let d = typed(&r, "set a timer for 8 minutes, call it pasta");
    runs(&d, "timer.set", json!({"duration": 480, "name": "pasta"}));
    // Something not of the home said not to be so, after the request.
    let d = typed(
        &r,
        "put five more minutes on the timer, the rice is not done",
    );
    runs(&d, "timer.add", json!({"duration": 300}));
    // "Except" leaves out what no command can: never run as said.
    let d = typed(&r, "turn every light off except the kitchen");
    assert!(commands(&d).is_empty(), "{d:?}");
    // A reason after a length of time is no part of a reminder.
    let d = typed(
        &r,
        "remind me to put the bins out in an hour, the truck comes early",
    );
    runs(
        &d,
        "reminder.add",
        json!({"duration": 3600, "what": "put the bins out"}),
    );
}

#[test]
fn a_shared_name_said_with_a_room_is_the_device_in_that_room() {
    let r = configured();
    let d = typed(&r, "I'd like the lamp in the office switched on");
    runs(
        &d,
        "light.set",
        json!({"device": "desk lamp", "state": "on"}),
    );
    let d = typed(&r, "what day of the week is it");
    runs(&d, "clock.now", json!({"what": "date"}));
}

fn said_in(r: &Router, area: &str, text: &str) -> RouteDecision {
    let context = Context {
        area: Some(area.to_owned()),
        ..Context::default()
    };
    r.route_in(&normalize(text), "default", &context)
}

#[test]
fn a_value_taken_back_is_put_where_the_one_it_corrects_was() {
    let r = configured();
    // A number said again keeps what it counted.
    each_runs(
        &r,
        &[
            (
                "set a pizza timer for 12 minutes, no wait, make that 14",
                "timer.set",
                json!({"duration": 840, "name": "pizza"}),
            ),
            (
                "set the bedroom lamp to 30, actually make that 55",
                "light.brightness",
                json!({"device": "bedroom lamp", "level": 55}),
            ),
            // A time taken back between stops, the request going on after it.
            (
                "remind me at 6 pm, no, 8 pm, to water the plants",
                "reminder.add",
                json!({"at": "20:00", "what": "water the plants"}),
            ),
            // As speech to text writes it: a stop for the comma.
            (
                "Turn the thermostat to 23. No, 19.5.",
                "thermostat.set",
                json!({"temperature": 19.5}),
            ),
            // A thing of a list.
            (
                "add butter to the list, actually make it margarine",
                "shopping.add",
                json!({"item": "margarine"}),
            ),
        ],
    );
    // "No" that is not between two stops takes nothing back.
    assert_eq!(
        r.corrected("add no salt crisps to the list", &Context::default()),
        None
    );
}

#[test]
fn a_phrase_broken_off_and_resumed_is_read_without_the_words_between() {
    let r = configured();
    assert_eq!(
        r.resumed("add oat milk to the, Sam not now, to the shopping list")
            .as_deref(),
        Some("add oat milk to the shopping list")
    );
    each_runs(
        &r,
        &[
            (
                "set a timer for, put that down please, for 9 minutes",
                "timer.set",
                json!({"duration": 540}),
            ),
            (
                "lock the, Max get down! lock the side door",
                "door.lock",
                json!({"door": "side door"}),
            ),
        ],
    );
    // A phrase that ends whole is not broken off.
    assert_eq!(
        r.resumed("turn on the porch light, turn on the porch light"),
        None
    );
}

#[test]
fn polite_leads_tags_and_a_reason_after_a_request_are_no_part_of_it() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "Good morning, would you be so kind as to switch on the desk lamp, if it's no trouble at all",
                "light.set",
                json!({"device": "desk lamp", "state": "on"}),
            ),
            (
                "I'd be grateful if you could lock the side door",
                "door.lock",
                json!({"door": "side door"}),
            ),
            (
                "is the back door locked or not",
                "home.state",
                json!({"device": "back door", "kind": "lock", "state": "locked"}),
            ),
            (
                "turn on the hall lights so we don't trip over the bags",
                "lights.set",
                json!({"room": "hall", "state": "on"}),
            ),
        ],
    );
    // A remark with a reason asks for nothing.
    let d = typed(
        &r,
        "the office lights are really dim since we moved the desk",
    );
    assert!(commands(&d).is_empty(), "{d:?}");
}

#[test]
fn a_statement_that_is_the_reason_for_a_change_after_it_is_not_a_change() {
    let r = configured();
    // "It" after a room said with light is the room's lights.
    let d = said_in(
        &r,
        "kitchen",
        "a bit too bright in here, take it down to 35",
    );
    runs(
        &d,
        "lights.brightness",
        json!({"level": 35, "room": "kitchen"}),
    );
    let d = typed(&r, "the dining room, can you dim it");
    assert_eq!(d.command_id.as_deref(), Some("lights.brightness"), "{d:?}");
    // A lone verb names no room; the speaker's room is the one.
    let d = said_in(&r, "office", "it's so dark in here, get the lights on");
    runs(&d, "lights.set", json!({"room": "office", "state": "on"}));
}

#[test]
fn a_timers_name_that_says_a_length_or_only_points_names_no_timer() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "add a minute to the 6 minute timer",
                "timer.add",
                json!({"duration": 60, "start": 360}),
            ),
            (
                "set one timer for 3 minutes",
                "timer.set",
                json!({"duration": 180}),
            ),
            (
                "start a timer for the rice, 12 minutes",
                "timer.set",
                json!({"duration": 720, "name": "rice"}),
            ),
            (
                "chuck some teabags on the list",
                "shopping.add",
                json!({"item": "teabags"}),
            ),
            (
                "make the heating three degrees lower",
                "thermostat.adjust",
                json!({"change": -3.0}),
            ),
        ],
    );
}

#[test]
fn what_must_not_be_left_so_and_a_not_before_a_request_are_a_request() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "never leave the desk lamp on when we go out",
                "light.set",
                json!({"device": "desk lamp", "state": "off"}),
            ),
            (
                "don't leave the side door unlocked overnight",
                "door.lock",
                json!({"door": "side door"}),
            ),
            (
                "don't leave the hall lights on",
                "lights.set",
                json!({"room": "hall", "state": "off"}),
            ),
            // A clause that says "not" before one that asks is its reason;
            // "it" points at the room said for its door.
            (
                "do not leave the garage open again, shut it please",
                "garage.close",
                json!({}),
            ),
            (
                "I don't need the bedroom lamp anymore, switch it off",
                "light.set",
                json!({"device": "bedroom lamp", "state": "off"}),
            ),
        ],
    );
    // A "not" after the request takes it back; one alone refuses it.
    for text in [
        "switch on the porch light, no don't",
        "don't switch on the porch light",
    ] {
        let d = typed(&r, text);
        assert!(commands(&d).is_empty(), "{d:?}");
    }
}

#[test]
fn hints_and_a_timers_name_said_around_its_length_are_read() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "is there any way you could switch the desk lamp on",
                "light.set",
                json!({"device": "desk lamp", "state": "on"}),
            ),
            (
                "I wouldn't mind a reminder to phone the bank at 4pm",
                "reminder.add",
                json!({"at": "16:00", "what": "phone the bank"}),
            ),
            (
                "give me a 9 minute timer for the muffins",
                "timer.set",
                json!({"duration": 540, "name": "muffins"}),
            ),
            (
                "stick a timer on for 6 minutes for the toast",
                "timer.set",
                json!({"duration": 360, "name": "toast"}),
            ),
            (
                "countdown, 25 minutes, for the bread",
                "timer.set",
                json!({"duration": 1500, "name": "bread"}),
            ),
        ],
    );
    // A name that opens with a request's verb is that request, not a name.
    let d = typed(
        &r,
        "stop the soup timer for a second, someone's at the door",
    );
    assert!(
        commands(&d).iter().all(|(id, _)| id != "timer.set"),
        "{d:?}"
    );
    // Said of what was done, a request's words are a story.
    let d = typed(&r, "I switched the office lights off myself earlier");
    assert!(commands(&d).is_empty(), "{d:?}");
}

/// Heard by speech to text, with the words of `text` heard surely but `unsure`.
fn heard_but(text: &str, unsure: &[&str]) -> Context {
    Context {
        spoken: true,
        sure_words: Some(
            normalize(text)
                .split(' ')
                .filter(|w| !unsure.contains(w))
                .map(str::to_owned)
                .collect(),
        ),
        ..Default::default()
    }
}

#[test]
fn a_reading_by_sound_never_drops_a_name_nor_runs_over_a_word_heard_surely() {
    let r = configured();
    // "rice" heard unsurely: a reading by sound that only drops it accounts
    // for none of its words; the name stays (asked about, as heard unsurely).
    let heard = "set a rice timer for 18 minutes";
    let d = r.route_in(&normalize(heard), "default", &heard_but(heard, &["rice"]));
    assert_eq!(
        chain(&d).commands[0].params.get("name"),
        Some(&ParamValue::Text("rice".into())),
        "{d:?}"
    );
    // "take" heard surely and read as another word: a guess, asked first.
    let heard = "let's take bananas on the shopping list";
    let d = r.route_in(&normalize(heard), "default", &heard_but(heard, &["let's"]));
    if d.layer == Layer::Sounds {
        assert_eq!(d.auth_level, AuthLevel::CONFIRM, "{d:?}");
    }
    assert!(
        d.auth_level == AuthLevel::CONFIRM
            || commands(&d).iter().all(|(id, _)| id != "shopping.remove"),
        "{d:?}"
    );
}

#[test]
fn a_number_heard_alike_with_another_is_weighed_against_it() {
    let router = configured();
    let heard = normalize("set a timer for 80 minutes");
    let scored = |eighty: f32, eighteen: f32| {
        crate::understand::Listen::new(move |texts: &[String]| {
            Some(
                (texts.iter())
                    .map(|t| if t.contains("80") { eighty } else { eighteen })
                    .collect(),
            )
        })
    };
    let spoken = |listen| Context {
        spoken: true,
        listen: Some(listen),
        ..Default::default()
    };
    let decided = router.route_in(&heard, "default", &spoken(scored(-5.0, -30.0)));
    assert_eq!(decided.auth_level, AuthLevel::RUN, "{decided:?}");
    let d = router.doubted(decided.clone(), (&heard, &[]), &spoken(scored(-5.0, -30.0)));
    assert_eq!(d.auth_level, AuthLevel::RUN);
    // "18" fits about as well: asked first.
    let d = router.doubted(decided, (&heard, &[]), &spoken(scored(-5.0, -5.5)));
    assert_eq!(d.auth_level, AuthLevel::CONFIRM);
    let doubt = d.understood.as_ref().unwrap().doubt.as_ref().unwrap();
    assert!(doubt.other.contains("18"), "{doubt:?}");
}

#[test]
fn a_name_said_beside_words_not_understood_is_no_wish_to_turn_it_on() {
    let r = configured();
    // Alone, or with words that only close it, a name turns its light on.
    runs(
        &typed(&r, "desk lamp, thanks"),
        "light.set",
        json!({"device": "desk lamp", "state": "on"}),
    );
    // Beside words no layer understood, what was said of it is in those.
    let d = typed(&r, "the porch light, we have guests");
    assert!(
        !commands(&d).contains(&(
            "light.set".to_owned(),
            json!({"device": "porch light", "state": "on"})
        )),
        "{d:?}"
    );
}

#[test]
fn a_wish_said_as_a_condition_or_as_a_thing_going_so_is_asked_for() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "it'd be great if the hall lights were off",
                "lights.set",
                json!({"room": "hall", "state": "off"}),
            ),
            (
                "I'd prefer it if the desk lamp was at 30 percent",
                "light.brightness",
                json!({"device": "desk lamp", "level": 30}),
            ),
            (
                "could the bedroom lamp come on",
                "light.set",
                json!({"device": "bedroom lamp", "state": "on"}),
            ),
            (
                "the kitchen lights can go off now",
                "lights.set",
                json!({"room": "kitchen", "state": "off"}),
            ),
            // A state said before the device, with no verb.
            (
                "off the porch light",
                "light.set",
                json!({"device": "porch light", "state": "off"}),
            ),
        ],
    );
}

#[test]
fn a_heater_or_a_timer_turned_like_a_dial_changes_by_what_is_said() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "turn the heat down two",
                "thermostat.adjust",
                json!({"change": -2.0}),
            ),
            (
                "push the pasta timer up by 3 minutes",
                "timer.add",
                json!({"duration": 180, "name": "pasta"}),
            ),
            (
                "knock the egg timer down 30 seconds",
                "timer.subtract",
                json!({"duration": 30, "name": "egg"}),
            ),
            // "To" a number is a setting, not a change.
            (
                "turn the heating up to 23",
                "thermostat.set",
                json!({"temperature": 23.0}),
            ),
            (
                "keep the thermostat on 20",
                "thermostat.set",
                json!({"temperature": 20.0}),
            ),
        ],
    );
}

#[test]
fn what_someone_does_as_a_habit_is_no_request_but_a_question_of_it_is_asked() {
    let r = configured();
    for text in [
        "we always close the garage at night",
        "I usually switch the porch light on",
        "I forget to lock the side door sometimes",
    ] {
        let d = typed(&r, text);
        assert!(commands(&d).is_empty(), "{text}: {d:?}");
    }
    each_runs(
        &r,
        &[
            (
                "can I get a timer for 4 minutes",
                "timer.set",
                json!({"duration": 240}),
            ),
            (
                "did we leave any lights on",
                "home.state",
                json!({"kind": "light", "state": "on"}),
            ),
            (
                "um, basically, lock the side door",
                "door.lock",
                json!({"door": "side door"}),
            ),
            ("can I get a quick status update", "home.status", json!({})),
            (
                "what's the heating on right now",
                "home.state",
                json!({"device": "thermostat", "kind": "climate"}),
            ),
        ],
    );
}

#[test]
fn it_points_at_the_timer_or_the_device_an_earlier_clause_speaks_of() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "don't worry about the bread timer, cancel it",
                "timer.cancel",
                json!({"name": "bread"}),
            ),
            (
                "it's far too hot in here, turn it down to 18",
                "thermostat.set",
                json!({"temperature": 18.0}),
            ),
        ],
    );
}

#[test]
fn words_to_someone_else_and_a_name_taken_back_by_what_it_is_not_are_left_out() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "hang on love. switch the hall lights off. not you, love",
                "lights.set",
                json!({"room": "hall", "state": "off"}),
            ),
            (
                "turn the kitchen lights on. sorry, carry on",
                "lights.set",
                json!({"room": "kitchen", "state": "on"}),
            ),
            (
                "not the bedroom, the office lights on please",
                "lights.set",
                json!({"room": "office", "state": "on"}),
            ),
            (
                "lock the side door, not the back door",
                "door.lock",
                json!({"door": "side door"}),
            ),
            (
                "hold the pizza timer for a moment",
                "timer.pause",
                json!({"name": "pizza"}),
            ),
        ],
    );
    // "Not" and a name with no other name beside it still refuses.
    let d = typed(&r, "not the back door");
    assert!(commands(&d).is_empty(), "{d:?}");
}

#[test]
fn a_word_heard_for_another_at_the_start_or_for_a_number_before_a_unit_is_put_back() {
    let r = configured();
    let spoken = |text: &str| {
        let heard = normalize(text);
        r.route_in(&heard, "default", &heard_but(&heard, &[]))
    };
    let add = |item: &str| ("shopping.add".to_owned(), json!({ "item": item }));
    assert_eq!(
        commands(&spoken("And eggs and flour to the shopping list.")),
        [add("eggs"), add("flour")]
    );
    runs(
        &spoken("And 20 minutes remind me to turn the oven off."),
        "reminder.add",
        json!({"duration": 1200, "what": "turn the oven off"}),
    );
    runs(
        &spoken("Turn the heating up to degrees."),
        "thermostat.adjust",
        json!({"change": 2.0}),
    );
    // "To" before a number is read as said; typed, "to degrees" is not a number.
    runs(
        &spoken("Turn the heating up to 21 degrees."),
        "thermostat.set",
        json!({"temperature": 21.0}),
    );
    assert_eq!(r.number_heard_as(&normalize("set the heating to 21")), None);
    let typed = typed(&r, "turn the heating up to degrees");
    assert!(
        commands(&typed)
            .iter()
            .all(|(_, p)| p["change"] != json!(2.0)),
        "{typed:?}"
    );
}

#[test]
fn words_of_other_englishes_and_a_request_before_what_was_done_are_read() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "could you nudge the thermostat down a degree",
                "thermostat.adjust",
                json!({"change": -1.0}),
            ),
            (
                "remind me at 4 tomorrow arvo to ring the vet",
                "reminder.add",
                json!({"at": "tomorrow 16:00", "what": "ring the vet"}),
            ),
            (
                "start one timer for 3 minutes",
                "timer.set",
                json!({"duration": 180}),
            ),
            // A request before what someone did is no story.
            (
                "take the batteries off the list, I bought some",
                "shopping.remove",
                json!({"item": "batteries"}),
            ),
        ],
    );
}

#[test]
fn a_remark_about_a_thing_is_no_request_but_words_of_a_need_are() {
    let r = configured();
    for text in [
        "our garage door is ancient",
        "is 22 degrees normal for a living room",
        "the shopping list keeps getting longer",
        "this timer thing is brilliant",
        "the list has loads on it",
        "that timer's beep is so annoying",
    ] {
        let d = typed(&r, text);
        assert!(commands(&d).is_empty(), "{text}: {d:?}");
    }
    each_runs(
        &r,
        &[
            (
                "we're out of coffee",
                "shopping.add",
                json!({"item": "coffee"}),
            ),
            ("the timer is going off", "timer.cancel", json!({})),
            // A state asked about with no verb is a question, not a change.
            (
                "the hall lights still on?",
                "home.state",
                json!({"kind": "light", "room": "hall", "state": "on"}),
            ),
            (
                "garage door still open",
                "home.state",
                json!({"device": "garage door", "kind": "cover", "state": "open"}),
            ),
            (
                "bedroom lamp at 10%",
                "light.brightness",
                json!({"device": "bedroom lamp", "level": 10}),
            ),
        ],
    );
    let d = typed(&r, "it's freezing in here");
    assert!(
        commands(&d)
            .iter()
            .any(|(id, _)| id.starts_with("thermostat.")),
        "{d:?}"
    );
}

#[test]
fn a_request_stammered_texted_asked_for_someone_else_or_said_of_what_needs_it_is_read() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "p-p-put the, the porch light on",
                "light.set",
                json!({"device": "porch light", "state": "on"}),
            ),
            (
                "remind me 2 ring the dentist in an hour",
                "reminder.add",
                json!({"duration": 3600, "what": "ring the dentist"}),
            ),
            (
                "my husband wants the bedroom lamp off",
                "light.set",
                json!({"device": "bedroom lamp", "state": "off"}),
            ),
            (
                "the side door needs locking",
                "door.lock",
                json!({"door": "side door"}),
            ),
            (
                "the hall lights need to be turned off",
                "lights.set",
                json!({"room": "hall", "state": "off"}),
            ),
            (
                "set a timer for two hours and a quarter",
                "timer.set",
                json!({"duration": 8100}),
            ),
        ],
    );
    let add = |item: &str| ("shopping.add".to_owned(), json!({ "item": item }));
    assert_eq!(
        commands(&typed(&r, "add eggs n flour to the list pls")),
        [add("eggs"), add("flour")]
    );
    // Someone who needs something is no thing that needs doing.
    runs(
        &typed(&r, "I need light in the hall"),
        "lights.set",
        json!({"room": "hall", "state": "on"}),
    );
    // A digit before a thing is a number; a request about something that
    // needs doing is that request.
    runs(
        &typed(&r, "add 2 lemons to the list"),
        "shopping.add",
        json!({"item": "2 lemons"}),
    );
    runs(
        &typed(&r, "remind me in an hour that the bins need taking out"),
        "reminder.add",
        json!({"duration": 3600, "what": "the bins need taking out"}),
    );
}

#[test]
fn a_word_of_where_a_number_said_near_enough_and_another_minute_are_read() {
    let r = configured();
    each_runs(
        &r,
        &[
            // "Up", "down", "over" say where, beside a state said.
            (
                "switch the lights off down in the dining room",
                "lights.set",
                json!({"room": "dining room", "state": "off"}),
            ),
            (
                "turn on the lights over in the guest room",
                "lights.set",
                json!({"room": "guest room", "state": "on"}),
            ),
            // Near enough: before the number, after it, on it.
            (
                "set a timer for roughly twelve minutes",
                "timer.set",
                json!({"duration": 720}),
            ),
            (
                "remind me in half an hour or so to water the plants",
                "reminder.add",
                json!({"duration": 1800, "what": "water the plants"}),
            ),
            (
                "put the heating on about 21",
                "thermostat.set",
                json!({"temperature": 21.0}),
            ),
            (
                "give the timer another minute",
                "timer.add",
                json!({"duration": 60}),
            ),
            // A timer's name is what it is for, without "the".
            (
                "pause the timer for the rice",
                "timer.pause",
                json!({"name": "rice"}),
            ),
        ],
    );
    // With no state said, "down" is which way: the lights are turned down.
    let d = typed(&r, "turn the lights down in the bedroom");
    assert_eq!(d.command_id.as_deref(), Some("lights.brightness"), "{d:?}");
    // "Up" is never read as "out" (off).
    let d = typed(&r, "lights up in the kitchen");
    let off = commands(&d).into_iter().any(|(_, p)| p["state"] == "off");
    assert!(!off, "{d:?}");
}

#[test]
fn a_clipped_request_a_greeting_and_a_habit_of_someone_else_are_read_as_meant() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "lamp. bedroom. off.",
                "light.set",
                json!({"device": "bedroom lamp", "state": "off"}),
            ),
            (
                "lights, kitchen on",
                "lights.set",
                json!({"room": "kitchen", "state": "on"}),
            ),
            (
                "good night, lock the side door",
                "door.lock",
                json!({"door": "side door"}),
            ),
            (
                "close the lights in the study",
                "lights.set",
                json!({"room": "office", "state": "off"}),
            ),
            (
                "open the bedroom lights",
                "lights.set",
                json!({"room": "bedroom", "state": "on"}),
            ),
            (
                "heating down to 18 before I go to bed",
                "thermostat.set",
                json!({"temperature": 18.0}),
            ),
            (
                "pause the pasta timer while I take this call",
                "timer.pause",
                json!({"name": "pasta"}),
            ),
            (
                "set the desk lamp to 80, actually no, 60",
                "light.brightness",
                json!({"device": "desk lamp", "level": 60}),
            ),
            ("what time now", "clock.now", json!({"what": "time"})),
            (
                "put yourself in research mode",
                "mode.set",
                json!({"state": "research"}),
            ),
        ],
    );
    let add = |item: &str| ("shopping.add".to_owned(), json!({ "item": item }));
    assert_eq!(
        commands(&typed(&r, "add rice, um, beans and tortillas to the list")),
        [add("rice"), add("beans"), add("tortillas")]
    );
    runs(
        &said_in(&r, "guest room", "switch this room's lights on"),
        "lights.set",
        json!({"room": "guest room", "state": "on"}),
    );
    // Said again across stops, the room the client gave.
    runs(
        &said_in(&r, "kitchen", "lights. on. on."),
        "lights.set",
        json!({"room": "kitchen", "state": "on"}),
    );
    // What someone else always does, or never remembers, is no request; a
    // "no" is no name of a device.
    for text in [
        "my wife never remembers to lock the front door",
        "he always forgets to switch off the porch light",
        "turn the lights on, no",
    ] {
        let d = typed(&r, text);
        assert!(commands(&d).is_empty(), "{text}: {d:?}");
    }
}

#[test]
fn a_device_said_by_where_it_is_and_a_request_asked_again_for_another_are_read() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "dim the lamp next to the bed to 20 percent",
                "light.brightness",
                json!({"device": "bedroom lamp", "level": 20}),
            ),
            (
                "turn the lamp on the desk on",
                "light.set",
                json!({"device": "desk lamp", "state": "on"}),
            ),
            (
                "switch off the lamp in the bedroom",
                "light.set",
                json!({"device": "bedroom lamp", "state": "off"}),
            ),
            // The light of a room is its lights.
            (
                "switch off the light in the bedroom",
                "lights.set",
                json!({"room": "bedroom", "state": "off"}),
            ),
            (
                "check the side door is locked",
                "home.state",
                json!({"kind": "lock", "device": "side door", "state": "locked"}),
            ),
            (
                "fifteen minutes for the lentils",
                "timer.set",
                json!({"duration": 900, "name": "lentils"}),
            ),
            (
                "chuck another two minutes on the rice timer",
                "timer.add",
                json!({"duration": 120, "name": "rice"}),
            ),
        ],
    );
    let set = |room: &str| {
        (
            "lights.set".to_owned(),
            json!({"room": room, "state": "on"}),
        )
    };
    assert_eq!(
        commands(&typed(
            &r,
            "put the bathroom lights on and do the same for the hall"
        )),
        [set("bathroom"), set("hall")]
    );
    let lock = |door: &str| ("door.lock".to_owned(), json!({ "door": door }));
    assert_eq!(
        commands(&typed(
            &r,
            "a couple of things: lock the back door and the same for the front door"
        )),
        [lock("back door"), lock("front door")]
    );
    // "Make sure" asks for it; what someone left is a story.
    runs(
        &typed(&r, "make sure the side door is locked"),
        "door.lock",
        json!({"door": "side door"}),
    );
    let d = typed(&r, "somebody left the garage light on again");
    assert!(commands(&d).is_empty(), "{d:?}");
}

#[test]
fn shorthand_technical_words_and_a_word_looked_for_are_read() {
    let r = configured();
    each_runs(
        &r,
        &[
            ("set timer 5 min rn", "timer.set", json!({"duration": 300})),
            (
                "gimme a timer of 12 minutes for the dal",
                "timer.set",
                json!({"duration": 720, "name": "dal"}),
            ),
            (
                "decrement the egg timer by a minute",
                "timer.subtract",
                json!({"duration": 60, "name": "egg"}),
            ),
            (
                "set the setpoint to 19",
                "thermostat.set",
                json!({"temperature": 19.0}),
            ),
            (
                "could the heating go up a degree",
                "thermostat.adjust",
                json!({"change": 1.0}),
            ),
            (
                "chuck the porch light on",
                "light.set",
                json!({"device": "porch light", "state": "on"}),
            ),
            (
                "lock the, what's it called, the side door",
                "door.lock",
                json!({"door": "side door"}),
            ),
            (
                "add bin bags to the list asap",
                "shopping.add",
                json!({"item": "bin bags"}),
            ),
        ],
    );
    let d = typed(&r, "lemme see my reminders");
    assert_eq!(d.command_id.as_deref(), Some("reminder.list"), "{d:?}");
    // What used to be is a story.
    let d = typed(&r, "the porch light used to switch off by itself");
    assert!(commands(&d).is_empty(), "{d:?}");
}

#[test]
fn a_request_passed_to_a_thing_a_length_said_beside_and_a_tag_question_are_read() {
    let r = configured();
    each_runs(
        &r,
        &[
            (
                "tell the heating to go up three degrees",
                "thermostat.adjust",
                json!({"change": 3.0}),
            ),
            ("ask the garage door to close", "garage.close", json!({})),
            (
                "tell the grocery list that we need rice",
                "shopping.add",
                json!({"item": "rice"}),
            ),
            (
                "the potatoes need 25 minutes, timer for the potatoes",
                "timer.set",
                json!({"duration": 1500, "name": "potatoes"}),
            ),
            (
                "we need ten minutes for the garlic bread, set a timer",
                "timer.set",
                json!({"duration": 600, "name": "garlic bread"}),
            ),
            (
                "the side door is unlocked, right?",
                "home.state",
                json!({"device": "side door", "kind": "lock", "state": "unlocked"}),
            ),
            (
                "can you check whether the garage's open",
                "home.state",
                json!({"kind": "cover", "state": "open"}),
            ),
            (
                "we'll need oat milk, add it to the list",
                "shopping.add",
                json!({"item": "oat milk"}),
            ),
            (
                "we'll need reminding to put the bins out at 8pm",
                "reminder.add",
                json!({"what": "put the bins out", "at": "20:00"}),
            ),
            (
                "turn the office lights back on",
                "lights.set",
                json!({"room": "office", "state": "on"}),
            ),
            (
                "make the study dark",
                "lights.set",
                json!({"room": "office", "state": "off"}),
            ),
            (
                "desk lamp at half",
                "light.brightness",
                json!({"device": "desk lamp", "level": 50}),
            ),
            (
                "oops, would you mind locking the back door",
                "door.lock",
                json!({"door": "back door"}),
            ),
        ],
    );
    each_runs(
        &r,
        &[
            (
                "take a minute off that 10 minute timer",
                "timer.subtract",
                json!({"duration": 60, "start": 600}),
            ),
            (
                "switch on the lights of the garage",
                "lights.set",
                json!({"room": "garage", "state": "on"}),
            ),
            (
                "add lemons to the list of the shopping",
                "shopping.add",
                json!({"item": "lemons"}),
            ),
            (
                "make the lights out in the kitchen",
                "lights.set",
                json!({"room": "kitchen", "state": "off"}),
            ),
            (
                "put the porch light on before everyone arrives",
                "light.set",
                json!({"device": "porch light", "state": "on"}),
            ),
            (
                "lock the back door, pet",
                "door.lock",
                json!({"door": "back door"}),
            ),
            ("which reminders we got", "reminder.list", json!({})),
        ],
    );
    // "One" for another of the same, its number in the first one's unit.
    let d = typed(
        &r,
        "set a timer for the rice for 12 minutes and one for the fish for 8",
    );
    assert_eq!(
        commands(&d),
        [
            (
                "timer.set".to_owned(),
                json!({"duration": 720, "name": "rice"})
            ),
            (
                "timer.set".to_owned(),
                json!({"duration": 480, "name": "fish"})
            ),
        ],
        "{d:?}"
    );
    // Passed to a person, it is no request to the home; a length asked for
    // with none said is asked about.
    let d = typed(&r, "set a timer for the potatoes");
    assert!(commands(&d).is_empty(), "{d:?}");
    assert!(matches!(d.intent, Intent::Invalid { .. }), "{d:?}");
    // A tag after a request asks nothing of it.
    let d = typed(&r, "the garage is open, yeah?");
    assert_eq!(d.command_id.as_deref(), Some("home.state"), "{d:?}");
}

#[test]
fn a_remark_about_what_a_thing_did_or_a_question_of_how_it_is_changes_nothing() {
    let r = configured();
    for said in [
        "that timer nearly made me jump out of my skin",
        "the porch light flickered all night",
        "is it dark in the kitchen",
        "I love how cosy the lounge gets in winter",
        "the lights in the garage, are they on?",
    ] {
        let d = typed(&r, said);
        assert!(
            !r.changes_something(&d) || !matches!(d.intent, Intent::Chain(_)),
            "{said}: {d:?}"
        );
    }
    // Asked whether it is cold: answered with the temperature.
    let d = typed(&r, "is it getting chilly in here");
    assert_eq!(
        commands(&d),
        [("home.state".to_owned(), json!({"kind": "climate"}))]
    );
    // A reminder pointed at is the reminder.
    let d = typed(&r, "delete that reminder to water the plants");
    assert_eq!(
        commands(&d),
        [(
            "reminder.cancel".to_owned(),
            json!({"what": "water the plants"})
        )]
    );
    // "The back door" keeps its "back".
    let d = typed(&r, "lock the back door");
    assert_eq!(
        commands(&d),
        [("door.lock".to_owned(), json!({"door": "back door"}))]
    );
}

#[test]
fn the_speakers_room_fills_a_level_said_with_no_room() {
    let r = configured();
    let in_room = |text: &str, area: Option<&str>| {
        r.route_in(
            &normalize(text),
            "default",
            &crate::understand::Context {
                area: area.map(str::to_owned),
                ..Default::default()
            },
        )
    };
    let d = in_room("set the lights to 40 percent", Some("bathroom"));
    assert_eq!(
        commands(&d),
        [(
            "lights.brightness".to_owned(),
            json!({"room": "bathroom", "level": 40})
        )]
    );
    let d = in_room("lights to full", Some("kitchen"));
    assert_eq!(
        commands(&d),
        [(
            "lights.brightness".to_owned(),
            json!({"room": "kitchen", "level": 100})
        )]
    );
    // With no room known, it asks which, never every room.
    let d = in_room("set the lights to 40 percent", None);
    assert!(commands(&d).is_empty(), "{d:?}");
}
