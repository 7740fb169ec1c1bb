use proptest::prelude::*;
use serde_json::json;

use super::{corpus, *};

#[test]
fn a_secret_becomes_a_stable_ref_that_only_the_tool_boundary_resolves() {
    let safety = Safety::new();
    let key = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
    let once = safety.scrub(&format!("use {key} please")).into_owned();
    let twice = safety.scrub(&format!("again {key}")).into_owned();
    assert!(!once.contains(key) && !once.contains("aBcDeFgH"), "{once}");
    let reference = once.split_whitespace().nth(1).unwrap().to_owned();
    assert!(
        reference.starts_with("secret_ref:github_token:")
            && reference.len() == "secret_ref:github_token:".len() + 12
    );
    assert!(
        twice.ends_with(&reference),
        "same value, same ref within the process"
    );
    let other = Safety::new().scrub(key).into_owned();
    assert_ne!(other, reference, "another process (key) gives another ref");
    let mut inputs = json!({"item": format!("token {reference}"), "n": 1});
    safety.resolve_json(&mut inputs);
    assert_eq!(inputs["item"], format!("token {key}"));
}

#[test]
fn seeded_secrets_are_scrubbed_whatever_their_shape() {
    let safety = Safety::new();
    safety.seed("home_assistant_token", "plainwordsecret");
    let out = safety
        .scrub("the ha token is plainwordsecret, ok")
        .into_owned();
    assert!(
        out.contains("secret_ref:home_assistant_token:") && !out.contains("plainwordsecret"),
        "{out}"
    );
    let mut v = json!({"a": ["x plainwordsecret y"], "b": {"c": "plainwordsecret"}});
    let kinds = safety.scrub_json(&mut v);
    assert_eq!(kinds.len(), 2);
    assert!(!v.to_string().contains("plainwordsecret"));
}

#[test]
fn every_generated_secret_kind_is_removed_and_clean_lines_are_kept() {
    let safety = Safety::new();
    let mut seen = std::collections::BTreeSet::new();
    for line in corpus::generate(7, 4_000, 0.5) {
        let out = safety.scrub(&line.text);
        match &line.secret {
            Some(body) if line.kind != "high_entropy" => {
                assert!(
                    corpus::removed(body, &out),
                    "{} survived in {out}",
                    line.kind
                );
                seen.insert(line.kind);
            }
            Some(_) => {}
            None => assert_eq!(out, line.text.as_str(), "a clean line was altered"),
        }
    }
    assert!(seen.len() >= 25, "{} kinds exercised", seen.len());
}

fn corpus_line() -> impl Strategy<Value = String> {
    any::<u64>().prop_map(|seed| {
        let mut r = corpus::Rng::new(seed);
        if seed % 2 == 0 {
            corpus::secret_line(&mut r).text
        } else {
            corpus::clean_line(&mut r)
        }
    })
}

proptest! {
    #[test]
    fn scrubbing_is_idempotent(text in prop_oneof![corpus_line(), "\\PC{0,200}", "[a-zA-Z0-9_=+/ -]{0,120}"]) {
        let safety = global();
        let once = safety.scrub(&text).into_owned();
        let twice = safety.scrub(&once).into_owned();
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn scrubbing_never_panics_on_arbitrary_utf8(text in any::<String>(), bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = global().scrub(&text);
        let lossy = String::from_utf8_lossy(&bytes).into_owned();
        let _ = global().scrub(&lossy);
    }

    #[test]
    fn text_without_secrets_is_left_unchanged(seed in any::<u64>()) {
        let mut r = corpus::Rng::new(seed);
        let line = corpus::clean_line(&mut r);
        let out = global().scrub(&line).into_owned();
        prop_assert_eq!(out, line);
    }
}
