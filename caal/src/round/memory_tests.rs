//! Memory in rounds: the spoken commands end to end through the router,
//! topic hits, the package a prompt receives (and the event saying which
//! items went in), citations, and the operator's writes.

use std::sync::Arc;

use serde_json::json;

use super::{
    Channel, OperatorError, OperatorWrite,
    tests::{Home, START_MS},
};
use crate::{
    config::Config,
    ids::BucketId,
    llm::{Provider, ProviderKind, Tier, Tiers},
    memory::{MemoryError, Why},
    testing::{NO_DELAY, Server},
};

fn bucket(conversation: &str) -> BucketId {
    BucketId::for_conversation(&conversation.parse().unwrap())
}

fn contents(home: &Home, conversation: &str) -> Vec<String> {
    home.engine
        .memory()
        .items(&bucket(conversation), START_MS)
        .unwrap()
        .into_iter()
        .map(|i| i.item.content)
        .collect()
}

#[test]
fn remember_recall_pin_and_forget_by_saying_so() {
    let home = Home::new();
    let r = home.say("c", "Remember that the spare key is under the Blue Pot.");
    assert_eq!(r.route_code, "intent.memory");
    assert_eq!(
        r.reply,
        "Okay, I'll remember that the spare key is under the Blue Pot."
    );
    // As said, not as the router saw it (lower case, punctuation trimmed).
    assert_eq!(
        contents(&home, "c"),
        vec!["the spare key is under the Blue Pot"]
    );
    let written = &home.of_type("c", "memory.written")[0];
    assert_eq!(
        (written["op"].as_str(), written["source"].as_str()),
        (Some("add"), Some("round"))
    );

    home.say("c", "remember the bins go out on tuesday");
    let r = home.say("c", "What do you remember about the spare key?");
    assert_eq!(
        r.reply,
        "About the spare key, I remember: the spare key is under the Blue Pot."
    );
    let read = home.of_type("c", "memory.read");
    assert_eq!(read.last().unwrap()["op"], "recall");
    let hit = home.of_type("c", "memory.referenced");
    assert_eq!(hit[0]["signal"], "topic_hit");
    assert_eq!(hit[0]["item_ids"], read.last().unwrap()["item_ids"]);

    let r = home.say("c", "pin the bins");
    assert_eq!(r.reply, "Pinned: the bins go out on tuesday.");
    let p = home
        .engine
        .memory()
        .package(&bucket("c"), START_MS)
        .unwrap();
    assert_eq!(p.items[0].why, Why::Pinned);
    assert_eq!(p.items[0].scored.item.content, "the bins go out on tuesday");
    assert_eq!(
        home.say("c", "pin the bins").reply,
        "That's already pinned: the bins go out on tuesday."
    );

    let r = home.say("c", "what do you remember");
    assert_eq!(
        r.reply,
        "I remember: the bins go out on tuesday; the spare key is under the Blue Pot."
    );

    let r = home.say("c", "forget the spare key");
    assert_eq!(r.reply, "Okay, I've forgotten it.");
    assert_eq!(contents(&home, "c"), vec!["the bins go out on tuesday"]);
    let forgotten = home.of_type("c", "memory.forgotten");
    assert_eq!(forgotten.len(), 1);
    assert!(
        !forgotten[0].to_string().contains("Blue Pot"),
        "the event says that, never what: {}",
        forgotten[0]
    );
    assert_eq!(
        home.say("c", "what do you remember about the blue pot")
            .reply,
        "I don't remember anything about the blue pot."
    );
    let register = home
        .engine
        .memory()
        .register(&bucket("c"))
        .unwrap()
        .unwrap();
    assert_eq!((register.item_count, register.pinned_count), (1, 1));
    // Another conversation has its own bucket.
    assert_eq!(
        home.say("d", "what do you remember").reply,
        "I don't remember anything yet. Say \"remember that …\" and I will."
    );
}

#[test]
fn forgetting_something_unclear_asks_which_and_forgets_nothing() {
    let home = Home::new();
    home.say("c", "remember that the green bin is for garden waste");
    home.say("c", "remember that the black bin is collected on monday");
    let r = home.say("c", "forget the bin");
    assert_eq!(
        r.reply,
        "I remember 2 things about the bin: \"the green bin is for garden waste\"; \"the black bin is collected on monday\". Which one should I forget? Say more of its words."
    );
    assert_eq!(contents(&home, "c").len(), 2);
    assert!(home.of_type("c", "memory.forgotten").is_empty());
    assert_eq!(
        home.say("c", "forget the green bin").reply,
        "Okay, I've forgotten it."
    );
    assert_eq!(
        contents(&home, "c"),
        vec!["the black bin is collected on monday"]
    );
    assert_eq!(
        home.say("c", "forget the dentist").reply,
        "I don't remember anything about the dentist."
    );
}

#[test]
fn a_secret_said_to_be_remembered_is_kept_as_a_ref() {
    let home = Home::new();
    let key = "AKIAIOSFODNN7EXAMPLE";
    let r = home.say("c", &format!("remember that the backup key is {key}"));
    assert!(!r.reply.contains(key));
    let stored = contents(&home, "c");
    assert!(
        stored[0].starts_with("the backup key is secret_ref:aws_access_key_id:"),
        "{stored:?}"
    );
}

#[test]
fn a_rule_topic_raises_the_items_it_finds() {
    let home = Home::new();
    home.say("c", "remember that the boiler service is due in march");
    home.say("c", "look up boiler service costs");
    let hits = home.of_type("c", "memory.referenced");
    assert_eq!(hits.len(), 1);
    assert_eq!(
        (hits[0]["signal"].as_str(), hits[0]["topic"].as_str()),
        (Some("topic_hit"), Some("boiler service costs"))
    );
    let item = &home.engine.memory().items(&bucket("c"), START_MS).unwrap()[0];
    assert_eq!(item.item.topic_hits, 1);
}

fn openai_answer(text: &str) -> String {
    json!({"model": "smol", "choices": [{"index": 0, "finish_reason": "stop",
           "message": {"role": "assistant", "content": text}}]})
    .to_string()
}

#[test]
fn a_prompt_receives_the_bucket_and_an_answer_quoting_it_cites_it() {
    let local = Server::start(|_, _| {
        (
            200,
            openai_answer("Your spare key is under the blue pot."),
            NO_DELAY,
        )
    });
    let tiers = Arc::new(Tiers {
        local: Some(Tier::fixed(
            "local",
            Provider::new(ProviderKind::OpenAi, &local.url, "smol", None, 400),
        )),
        remote: None,
    });
    let home = Home::with_llm(Config::defaults().unwrap(), Arc::new(|_| None), Some(tiers));
    home.say("c", "remember that the spare key is under the blue pot");
    home.say("c", "remember that the wifi is called meadow");
    let r = home.say("c", "where did I leave the spare key");
    assert_eq!(r.route_code, "intent.chat");
    assert_eq!(r.reply, "Your spare key is under the blue pot.");

    let system = local.seen()[0].body["messages"][0]["content"].to_string();
    assert!(
        system.contains("- the spare key is under the blue pot"),
        "{system}"
    );
    assert!(system.contains("- the wifi is called meadow"), "{system}");
    let injected = &home.of_type("c", "memory.injected")[0];
    assert_eq!(injected["parts"], json!(["short"]));
    let items = injected["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(
        items
            .iter()
            .all(|i| i["why"] == "high_score" || i["why"] == "recent")
    );
    assert!(
        items
            .iter()
            .all(|i| i["tier"] == "short" && i["score"].as_f64().unwrap() > 0.0)
    );

    let cited = home.of_type("c", "memory.referenced");
    assert_eq!(cited.len(), 1);
    assert_eq!(cited[0]["signal"], "citation");
    let all = home.engine.memory().items(&bucket("c"), START_MS).unwrap();
    let key = all
        .iter()
        .find(|i| i.item.content.contains("spare key"))
        .unwrap();
    let wifi = all
        .iter()
        .find(|i| i.item.content.contains("wifi"))
        .unwrap();
    assert_eq!(cited[0]["item_ids"], json!([key.item.item_id]));
    assert_eq!((key.item.citations, wifi.item.citations), (1, 0));

    // A conversation with nothing remembered sends no memory and records no injection.
    home.say("empty", "where did I leave the spare key");
    assert!(home.of_type("empty", "memory.injected").is_empty());
    let system = local.seen().last().unwrap().body["messages"][0]["content"].to_string();
    assert!(!system.contains("remember"), "{system}");
}

#[test]
fn operator_writes_are_rounds_and_a_bad_item_id_fails_its_round_only() {
    let home = Home::new();
    let b = bucket("kitchen");
    let added = home
        .engine
        .operator_memory(
            &b,
            OperatorWrite::Add {
                content: "the descaler is under the sink".into(),
                refs: vec![],
                pin: true,
            },
            Channel::Cli,
        )
        .unwrap();
    assert_eq!((added.op.as_str(), added.pinned), ("add", true));
    let unpinned = home
        .engine
        .operator_memory(
            &b,
            OperatorWrite::Unpin {
                item_id: added.item_id.clone(),
            },
            Channel::Cli,
        )
        .unwrap();
    assert!(!unpinned.pinned);
    let missing = home
        .engine
        .operator_memory(
            &b,
            OperatorWrite::Forget {
                item_id: "mem_nope".into(),
            },
            Channel::Cli,
        )
        .unwrap_err();
    assert!(matches!(
        missing,
        OperatorError::Memory(MemoryError::NoSuchItem { .. })
    ));

    let rounds = home
        .engine
        .store()
        .reader()
        .rounds(Some(&"operator".parse().unwrap()), 10)
        .unwrap();
    let statuses: Vec<(&str, &str)> = rounds
        .iter()
        .map(|r| (r.round.status.as_str(), r.round.bucket_id.as_str()))
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("ok", "bucket:kitchen"),
            ("ok", "bucket:kitchen"),
            ("failed", "bucket:kitchen")
        ]
    );
    let written = home.of_type("operator", "memory.written");
    assert_eq!(
        written
            .iter()
            .map(|w| w["op"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["add", "unpin"]
    );
    assert_eq!(written[0]["source"], "cli");
    assert_eq!(home.engine.memory().items(&b, START_MS).unwrap().len(), 1);
}
