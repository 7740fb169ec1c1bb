//! The memory store on real SQLite files: package ordering under pins,
//! citations and decay (time is a parameter), the register's bound, cache
//! invalidation, concurrent writers, search, forgetting and secrets.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::config::Config;

const DAY: i64 = 86_400_000;
const T0: i64 = 1_800_000_000_000;

fn config(extra: &str) -> MemoryConfig {
    Config::from_toml_over_defaults(extra).unwrap().memory
}

fn store_with(extra: &str) -> (tempfile::TempDir, MemoryStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::open(&dir.path().join(MEMORY_FILE), &config(extra)).unwrap();
    (dir, store)
}

fn store() -> (tempfile::TempDir, MemoryStore) {
    store_with("")
}

fn bucket(name: &str) -> BucketId {
    format!("bucket:{name}").parse().unwrap()
}

fn add(store: &MemoryStore, b: &BucketId, content: &str, at: i64) -> String {
    store
        .remember(b, content, ItemMetadata::default(), false, at)
        .unwrap()
        .item
        .item_id
}

fn order(p: &ContextPackage) -> Vec<(String, Why)> {
    p.items
        .iter()
        .map(|i| (i.scored.item.content.clone(), i.why))
        .collect()
}

#[test]
fn pinned_come_first_then_high_scores_then_recent() {
    let (_d, store) = store_with("[memory]\npackage_top = 1\npackage_recent = 1");
    let b = bucket("home");
    let cited = add(&store, &b, "the boiler manual is in the hall cupboard", T0);
    add(&store, &b, "the bins go out on tuesday", T0 + DAY);
    let pinned = add(&store, &b, "anna is allergic to peanuts", T0);
    add(&store, &b, "the plumber is called dave", T0 + 2 * DAY);
    store.set_pinned(&b, &pinned, true, T0 + 2 * DAY).unwrap();
    for _ in 0..3 {
        store
            .reference(
                &b,
                std::slice::from_ref(&cited),
                Signal::Citation,
                T0 + 2 * DAY,
            )
            .unwrap();
    }
    let p = store.compute_package(&b, T0 + 3 * DAY).unwrap();
    assert_eq!(
        order(&p),
        vec![
            ("anna is allergic to peanuts".into(), Why::Pinned),
            (
                "the boiler manual is in the hall cupboard".into(),
                Why::HighScore
            ),
            ("the plumber is called dave".into(), Why::Recent),
        ]
    );
    let scores: Vec<f64> = p.items.iter().map(|i| i.scored.reference_score).collect();
    assert!(scores[0] > 100.0, "the pin weight counts: {scores:?}");
    assert!(
        scores[1] > scores[2],
        "citations outweigh one recent write: {scores:?}"
    );
    let cited_score = &p.items[1].scored.score;
    assert!(cited_score.citation > 0.0 && cited_score.explanation.contains("3 citations"));
}

#[test]
fn old_signals_decay_below_a_fresh_write_and_the_half_life_is_configurable() {
    let (_d, store) = store_with("[memory]\nhalf_life_days = 7.0\npackage_recent = 0");
    let b = bucket("home");
    let popular = add(&store, &b, "the spare key is under the blue pot", T0);
    for _ in 0..4 {
        store
            .reference(&b, std::slice::from_ref(&popular), Signal::TopicHit, T0)
            .unwrap();
    }
    // A week later the popular item still leads a fresh one...
    add(&store, &b, "milk is out", T0 + 7 * DAY);
    let p = store.compute_package(&b, T0 + 7 * DAY).unwrap();
    assert_eq!(p.items[0].scored.item.item_id, popular);
    // 1 write + 4 hits × 0.5 = 3.0, halved after one half-life.
    assert!((p.items[0].scored.reference_score - 1.5).abs() < 1e-6);
    assert!((p.items[0].scored.recency - 0.5).abs() < 1e-6);
    // ...but eight weeks after its last signal a new write outranks it.
    add(&store, &b, "the car is booked for a service", T0 + 56 * DAY);
    let p = store.compute_package(&b, T0 + 56 * DAY).unwrap();
    assert_eq!(
        p.items[0].scored.item.content,
        "the car is booked for a service"
    );
    let scores: Vec<f64> = p.items.iter().map(|i| i.scored.reference_score).collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "ordered by score: {scores:?}"
    );
    // The order of two items never changes with the clock alone.
    let later = store.compute_package(&b, T0 + 400 * DAY).unwrap();
    assert_eq!(order(&later), order(&p));
}

#[test]
fn a_changed_half_life_rekeys_the_order_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(MEMORY_FILE);
    let b = bucket("home");
    {
        let store = MemoryStore::open(&path, &config("[memory]\nhalf_life_days = 1000.0")).unwrap();
        let old = add(&store, &b, "an old note cited often", T0);
        for _ in 0..5 {
            store
                .reference(&b, std::slice::from_ref(&old), Signal::Citation, T0)
                .unwrap();
        }
        add(&store, &b, "a new note", T0 + 30 * DAY);
        let p = store.compute_package(&b, T0 + 30 * DAY).unwrap();
        assert_eq!(p.items[0].scored.item.content, "an old note cited often");
    }
    let store = MemoryStore::open(&path, &config("[memory]\nhalf_life_days = 1.0")).unwrap();
    let p = store.compute_package(&b, T0 + 30 * DAY).unwrap();
    assert_eq!(p.items[0].scored.item.content, "a new note");
}

#[test]
fn the_package_is_cached_until_a_write_to_its_bucket() {
    let (_d, store) = store();
    let (kitchen, garage) = (bucket("kitchen"), bucket("garage"));
    let first = add(
        &store,
        &kitchen,
        "the kettle descaler is under the sink",
        T0,
    );
    add(&store, &garage, "the bike pump is on the hook", T0);
    let a = store.package(&kitchen, T0).unwrap();
    let g = store.package(&garage, T0).unwrap();
    assert!(Arc::ptr_eq(&a, &store.package(&kitchen, T0 + 5).unwrap()));

    type Write<'a> = Box<dyn Fn(&MemoryStore) + 'a>;
    let writes: Vec<Write> = vec![
        Box::new(|s| {
            add(s, &kitchen, "the oven timer beeps twice", T0 + 10);
        }),
        Box::new(|s| {
            s.set_pinned(&kitchen, &first, true, T0 + 20).unwrap();
        }),
        Box::new(|s| {
            s.reference(
                &kitchen,
                std::slice::from_ref(&first),
                Signal::TopicHit,
                T0 + 30,
            )
            .unwrap();
        }),
        Box::new(|s| {
            s.forget(&kitchen, &first, T0 + 40).unwrap();
        }),
    ];
    let mut before = a;
    for write in writes {
        write(&store);
        let after = store.package(&kitchen, T0 + 50).unwrap();
        assert!(
            !Arc::ptr_eq(&before, &after),
            "a write drops the cached package"
        );
        before = after;
    }
    assert!(!before.items.iter().any(|i| i.scored.item.item_id == first));
    assert_eq!(before.items.len(), 1);
    // The other bucket's package was never touched.
    assert!(Arc::ptr_eq(&g, &store.package(&garage, T0 + 60).unwrap()));
}

#[test]
fn concurrent_writers_on_one_bucket_lose_nothing() {
    let (_d, store) = store();
    let store = Arc::new(store);
    let b = bucket("busy");
    let target = add(&store, &b, "the shared note", T0);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (store, b, target) = (store.clone(), b.clone(), target.clone());
            std::thread::spawn(move || {
                for i in 0..40 {
                    add(&store, &b, &format!("note {i} from writer {t}"), T0 + i);
                    store
                        .reference(&b, std::slice::from_ref(&target), Signal::TopicHit, T0 + i)
                        .unwrap();
                    // Readers in between see whole writes only.
                    let p = store.package(&b, T0 + i).unwrap();
                    assert!(!p.items.is_empty());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(store.items(&b, T0).unwrap().len(), 1 + 8 * 40);
    let register = store.register(&b).unwrap().unwrap();
    assert_eq!(register.item_count, 1 + 8 * 40);
    let shared = store.item(&b, &target, T0 + 40).unwrap();
    assert_eq!(shared.item.topic_hits, 8 * 40);
    let p = store.package(&b, T0 + 40).unwrap();
    assert_eq!(
        p.items[0].scored.item.item_id, target,
        "the most referenced leads"
    );
}

#[test]
fn the_register_stays_current_and_short() {
    let (_d, store) = store();
    let b = bucket("home");
    assert!(store.register(&b).unwrap().is_none());
    let key = add(&store, &b, "the spare key is under the blue pot", T0);
    assert_eq!(
        store.register(&b).unwrap().unwrap().summary,
        "1 memory. latest: the spare key is under the blue pot"
    );
    store.set_pinned(&b, &key, true, T0 + 1).unwrap();
    let long = "é".repeat(300);
    add(&store, &b, &long, T0 + 2);
    let r = store.register(&b).unwrap().unwrap();
    assert_eq!((r.item_count, r.pinned_count), (2, 1));
    assert!(r.summary.starts_with(
        "2 memories, 1 pinned. pinned: the spare key is under the blue pot. latest: éé"
    ));
    assert!(r.summary.chars().count() <= REGISTER_MAX_CHARS);
    assert!(r.summary.ends_with('…'));
    store.forget(&b, &key, T0 + 3).unwrap();
    let r = store.register(&b).unwrap().unwrap();
    assert_eq!((r.item_count, r.pinned_count), (1, 0));
    assert!(!r.summary.contains("spare key"));
}

proptest! {
    #[test]
    fn a_register_is_never_over_140_characters(
        count in 0u64..10_000_000,
        pinned in 0u64..100,
        top in proptest::option::of("\\PC{0,400}"),
        latest in proptest::option::of("(\\PC|\\s|[😀-🙏é漢])*"),
    ) {
        let s = register_summary(count, pinned.min(count), top.as_deref(), latest.as_deref());
        prop_assert!(s.chars().count() <= REGISTER_MAX_CHARS, "{} chars: {s}", s.chars().count());
        prop_assert!(!s.contains('\n'));
    }
}

#[test]
fn search_finds_words_and_stems_in_one_bucket_or_all() {
    let (_d, store) = store();
    let (home, work) = (bucket("home"), bucket("work"));
    add(&store, &home, "the hallway lights use warm white bulbs", T0);
    add(&store, &home, "the garage door code is in the blue box", T0);
    add(&store, &work, "the office light switch sticks", T0);
    let hits = |q: &str, b: Option<&BucketId>, how| -> Vec<String> {
        store
            .search(q, b, how, 10, T0)
            .unwrap()
            .into_iter()
            .map(|h| h.scored.item.content)
            .collect()
    };
    assert_eq!(
        hits("light", Some(&home), Match::All),
        vec!["the hallway lights use warm white bulbs"]
    );
    assert_eq!(hits("light", None, Match::All).len(), 2);
    assert!(hits("garage lights", Some(&home), Match::All).is_empty());
    assert_eq!(hits("garage lights", Some(&home), Match::Any).len(), 2);
    // What people type is words, never FTS syntax.
    assert_eq!(hits("door* OR \"code", Some(&home), Match::All).len(), 1);
    assert!(matches!(
        store.search("the of it", Some(&home), Match::All, 10, T0),
        Err(MemoryError::EmptyQuery { .. })
    ));
}

#[test]
fn remembering_the_same_thing_again_reinforces_it_and_forgetting_removes_it_from_search() {
    let (_d, store) = store();
    let b = bucket("home");
    let first = store
        .remember(
            &b,
            "  the wifi is called  Meadow ",
            ItemMetadata::default(),
            false,
            T0,
        )
        .unwrap();
    let again = store
        .remember(
            &b,
            "the wifi is called Meadow",
            ItemMetadata::default(),
            false,
            T0,
        )
        .unwrap();
    assert_eq!((first.op, again.op), (WriteOp::Add, WriteOp::Update));
    assert_eq!(first.item.item_id, again.item.item_id);
    assert_eq!(
        store
            .item(&b, &first.item.item_id, T0)
            .unwrap()
            .reference_score,
        2.0
    );
    let forgotten = store.forget(&b, &first.item.item_id, T0).unwrap();
    assert_eq!(forgotten.content, "the wifi is called Meadow");
    assert!(
        store
            .search("meadow", None, Match::Any, 10, T0)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.forget(&b, &first.item.item_id, T0),
        Err(MemoryError::NoSuchItem { .. })
    ));
    assert!(matches!(
        store.remember(&b, " \n ", ItemMetadata::default(), false, T0),
        Err(MemoryError::Empty)
    ));
    assert!(matches!(
        store.remember(&b, &"x".repeat(2001), ItemMetadata::default(), false, T0),
        Err(MemoryError::TooLong {
            chars: 2001,
            max: 2000
        })
    ));
}

#[test]
fn secrets_are_replaced_before_an_item_or_its_refs_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(MEMORY_FILE);
    let store = MemoryStore::open(&path, &config("")).unwrap();
    let b = bucket("home");
    for (kind, secret, body) in crate::safety::corpus::every_secret(11) {
        let metadata = ItemMetadata {
            refs: vec![ItemRef {
                kind: RefKind::Document,
                target: "router-setup.pdf".into(),
                excerpt: Some(format!("admin login {secret}")),
                summary: None,
            }],
            source: None,
        };
        let w = store
            .remember(
                &b,
                &format!("the {kind} for the router is {secret}"),
                metadata,
                false,
                T0,
            )
            .unwrap();
        assert!(!w.redacted.is_empty(), "{kind} was not found");
        assert!(!w.item.content.contains(&body), "{kind} stored raw");
        assert!(w.item.content.contains("secret_ref"), "{}", w.item.content);
    }
    drop(store);
    for file in ["memory.db", "memory.db-wal"] {
        let Ok(bytes) = std::fs::read(dir.path().join(file)) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for (kind, _, body) in crate::safety::corpus::every_secret(11) {
            assert!(!text.contains(&body), "{kind} reached {file}");
        }
    }
}

#[test]
fn the_package_splits_into_a_short_and_a_long_part_within_budget() {
    let (_d, store) = store_with("[memory]\nshort_budget = 60\nlong_budget = 100");
    let b = bucket("home");
    for i in 0..8 {
        add(
            &store,
            &b,
            &format!("note number {i} about the garden shed"),
            T0 + i,
        );
    }
    let p = store.compute_package(&b, T0 + 10).unwrap();
    let tiers: Vec<Tier> = p.items.iter().map(|i| i.tier).collect();
    assert_eq!(tiers.iter().filter(|t| **t == Tier::Short).count(), 1);
    assert_eq!(tiers.iter().filter(|t| **t == Tier::Long).count(), 2);
    assert!(p.short_context.chars().count() <= 60 && p.budget.short_used <= 60);
    assert!(p.long_context.as_ref().unwrap().chars().count() <= 100);
    assert_eq!(p.injected(false).count(), 1);
    assert_eq!(p.injected(true).count(), 3);

    let (_d, tokens) =
        store_with("[memory]\nshort_budget = 15\nlong_budget = 0\nbudget_unit = \"tokens\"");
    for i in 0..4 {
        add(
            &tokens,
            &b,
            &format!("note number {i} about the garden shed"),
            T0 + i,
        );
    }
    let p = tokens.compute_package(&b, T0 + 10).unwrap();
    // Each line is 40 characters: 10 tokens; one fits in 15.
    assert_eq!(p.injected(true).count(), 1);
    assert_eq!(p.budget.short_used, 10);
}

#[test]
fn an_answer_quotes_an_item_only_by_its_words_in_order() {
    let item = "The spare key is under the blue pot";
    assert!(quotes(
        "You said the spare key is under the blue pot.",
        item
    ));
    assert!(quotes("It's under the BLUE POT by the door.", item));
    assert!(!quotes("The key is blue.", item));
    assert!(
        !quotes("It is under the table.", item),
        "stop words alone are not a quote"
    );
    assert!(quotes("Your dentist is Dr Lee.", "Dr Lee"));
}

#[test]
fn a_read_only_store_reads_beside_the_writer_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(MEMORY_FILE);
    assert!(matches!(
        MemoryStore::open_read_only(&path, &config("")),
        Err(MemoryError::Store(StoreError::Missing { .. }))
    ));
    let writer = MemoryStore::open(&path, &config("")).unwrap();
    let b = bucket("home");
    add(&writer, &b, "the recycling goes out on friday", T0);
    let reader = MemoryStore::open_read_only(&path, &config("")).unwrap();
    assert_eq!(reader.items(&b, T0).unwrap().len(), 1);
    add(&writer, &b, "the bins go out on tuesday", T0 + 1);
    assert_eq!(reader.compute_package(&b, T0 + 1).unwrap().items.len(), 2);
    assert!(matches!(
        reader.remember(&b, "nope", ItemMetadata::default(), false, T0),
        Err(MemoryError::ReadOnly { .. })
    ));
}
