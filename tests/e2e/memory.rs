//! Bucket memory through the real binary: spoken commands with `caal say`,
//! every `caal bucket` subcommand in text and JSON, bad input refused with
//! exit 2 and nothing lost, and reads beside a running service.

use crate::support::Sandbox;

#[test]
fn what_is_said_is_remembered_and_every_bucket_command_shows_it() {
    let sb = Sandbox::new();
    let said = sb.say("home", "Remember that the spare key is under the Blue Pot");
    assert_eq!(said["route_code"], "intent.memory");
    sb.say("home", "remember that the bins go out on tuesday");

    let list = sb.run(&["bucket", "list", "--json"]).ok().json();
    assert_eq!(list[0]["bucket_id"], "bucket:home");
    assert_eq!(list[0]["item_count"], 2);
    let human = sb.run(&["bucket", "list"]).ok().stdout;
    assert!(
        human.contains("bucket:home") && human.contains("2 memories"),
        "{human}"
    );

    // The operator adds a pinned item with a ref, from the command line.
    let added = sb
        .run(&[
            "bucket",
            "add",
            "home",
            "--pin",
            "--ref",
            "file:/home/ana/boiler.pdf",
            "--excerpt",
            "service every march",
            "--json",
            "the",
            "boiler",
            "manual",
            "is",
            "in",
            "the",
            "hall",
        ])
        .ok()
        .json();
    assert_eq!(
        (added["op"].as_str(), added["pinned"].as_bool()),
        (Some("add"), Some(true))
    );
    let item_id = added["item_id"].as_str().unwrap().to_owned();

    let show = sb.run(&["bucket", "show", "home", "--json"]).ok().json();
    let items = show["items"].as_array().unwrap();
    assert_eq!(items[0]["content"], "the boiler manual is in the hall");
    assert_eq!(items[0]["why"], "pinned");
    assert_eq!(
        items[0]["metadata"]["refs"][0]["target"],
        "/home/ana/boiler.pdf"
    );
    assert!(
        items[0]["score"]["explanation"]
            .as_str()
            .unwrap()
            .starts_with("pinned 100.00")
    );
    assert!(
        show["short_context"]
            .as_str()
            .unwrap()
            .contains("(file: /home/ana/boiler.pdf — service every march)")
    );
    assert!(
        show["register_summary"]
            .as_str()
            .unwrap()
            .starts_with("3 memories, 1 pinned")
    );
    let human = sb.run(&["bucket", "show", "bucket:home"]).ok().stdout;
    assert!(
        human.contains("pinned/short") && human.contains(&item_id),
        "{human}"
    );

    let found = sb
        .run(&["bucket", "search", "spare", "keys", "--json"])
        .ok()
        .json();
    assert_eq!(found.as_array().unwrap().len(), 1);
    assert_eq!(found[0]["content"], "the spare key is under the Blue Pot");
    let none = sb
        .run(&[
            "bucket", "search", "spare", "bins", "--bucket", "home", "--json",
        ])
        .ok()
        .json();
    assert!(none.as_array().unwrap().is_empty());
    let any = sb
        .run(&["bucket", "search", "spare", "bins", "--any", "--json"])
        .ok()
        .json();
    assert_eq!(any.as_array().unwrap().len(), 2);

    let dump = sb.run(&["bucket", "dump", "home", "--json"]).ok().json();
    assert_eq!(dump.as_array().unwrap().len(), 3);
    assert!(
        dump.as_array()
            .unwrap()
            .iter()
            .all(|i| i["score"]["total"].as_f64().unwrap() > 0.0)
    );

    let registers = sb.run(&["bucket", "register", "--json"]).ok().json();
    assert!(registers[0]["summary"].as_str().unwrap().chars().count() <= 140);
    let one = sb.run(&["bucket", "register", "home"]).ok().stdout;
    assert!(
        one.starts_with("bucket:home  3 memories, 1 pinned"),
        "{one}"
    );

    sb.run(&["bucket", "unpin", "home", &item_id]).ok();
    sb.run(&["bucket", "pin", "home", &item_id, "--json"]).ok();
    let forgot = sb
        .run(&["bucket", "forget", "home", &item_id, "--json"])
        .ok()
        .json();
    assert_eq!(forgot["op"], "forget");
    let left = sb.run(&["bucket", "dump", "home", "--json"]).ok().json();
    assert_eq!(left.as_array().unwrap().len(), 2);

    // Spoken recall after the operator's changes, and the trace still verifies.
    let recall = sb.say("home", "what do you remember about the bins");
    assert_eq!(
        recall["reply"],
        "About the bins, I remember: the bins go out on tuesday."
    );
    sb.run(&["trace", "verify"]).ok();
    let export = sb
        .run(&["trace", "export", "--conversation", "operator"])
        .ok()
        .stdout;
    assert!(export.contains("\"memory.forgotten\"") && export.contains("\"channel\":\"cli\""));
    assert!(
        !export.contains("service every march"),
        "refs stay in memory, not the trace"
    );
}

#[test]
fn bad_input_is_refused_with_a_fix_and_loses_nothing() {
    let sb = Sandbox::new();
    let empty = sb.run(&["bucket", "list"]);
    assert_eq!(empty.code, 2);
    assert!(
        empty.stderr.contains("nothing remembered yet"),
        "{}",
        empty.stderr
    );

    sb.say("home", "remember that the gate code is in the red folder");
    for (args, says) in [
        (
            vec!["bucket", "pin", "home", "mem_nope"],
            "bucket:home has no item mem_nope",
        ),
        (
            vec!["bucket", "search", "the", "of"],
            "no words to look for",
        ),
        (
            vec!["bucket", "show", "no spaces allowed"],
            "neither a bucket id",
        ),
        (
            vec!["bucket", "add", "home", "--ref", "nocolon", "x"],
            "needs KIND:TARGET",
        ),
        (
            vec!["bucket", "add", "home", "--ref", "fax:123", "x"],
            "is not a ref kind",
        ),
        (
            vec!["bucket", "register", "elsewhere"],
            "bucket:elsewhere has nothing remembered",
        ),
    ] {
        let run = sb.run(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
    let long = "x".repeat(2001);
    let run = sb.run(&["bucket", "add", "home", &long]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("memory.max_item_chars"),
        "{}",
        run.stderr
    );

    let dump = sb.run(&["bucket", "dump", "home", "--json"]).ok().json();
    assert_eq!(
        dump.as_array().unwrap().len(),
        1,
        "nothing was lost or added"
    );
    sb.run(&["trace", "verify"]).ok();
}

#[test]
fn buckets_are_read_beside_a_running_service_and_written_through_it() {
    let sb = Sandbox::new();
    sb.say("home", "remember that the plumber is called dave");
    let served = sb.serve(&[]);
    let list = sb.run(&["bucket", "list", "--json"]).ok().json();
    assert_eq!(list[0]["item_count"], 1);
    let blocked = sb.run(&["bucket", "add", "home", "the cat eats at six"]);
    assert_eq!(blocked.code, 2);
    assert!(
        blocked
            .stderr
            .contains("open for writing by another caal process"),
        "{}",
        blocked.stderr
    );
    drop(served);
    sb.run(&["bucket", "add", "home", "the cat eats at six"])
        .ok();
    assert_eq!(
        sb.run(&["bucket", "dump", "home", "--json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
