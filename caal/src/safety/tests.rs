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

/// Hands out a few bytes a read, as a pipe may.
struct Trickle<'a>(&'a [u8], usize);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn streamed(safety: &Safety, text: &str, step: usize) -> Vec<(&'static str, usize, usize)> {
    let mut all = Vec::new();
    safety
        .scan_stream(Trickle(text.as_bytes(), step), |window, found, offset| {
            for (kind, start, end) in found {
                assert!(end <= window.len(), "a finding past the text handed out");
                all.push((kind, offset + start, offset + end));
            }
            Ok(())
        })
        .unwrap();
    all
}

#[test]
fn a_streamed_scan_finds_what_the_whole_text_holds_across_its_windows() {
    let safety = Safety::new();
    // Lines of filler (some with multi-byte letters) until past the first
    // window's cut (1 MiB), with secrets before, across and after it: a PEM
    // block that starts just before the cut and ends after it, a token on
    // the line the cut falls in.
    let mut text = String::new();
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvredZiKRkgwlL9xNAwxXFg0x/XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC+9aGVd+Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmwIDAQABAoIBAQCUVB4eI9Xd3oBjt2Eo/H2R+Np3L8prkMTJYXnsSSrOsjXnHPjSdlBDwQL9bGwmp/BqqovYbKu4RlgjwJRKPlT6ZxFC8ChWjYy2C4HU5GDuEZAIQ2JhWn1fMcTeUD3Wi6Sv\n-----END RSA PRIVATE KEY-----\n";
    let token = "ghp_0123456789abcdefghijABCDEFGHIJklmnop";
    let mut n = 0;
    while text.len() < (1 << 20) - 300 {
        text.push_str(&format!(
            "line {n} of ordinary words, café and naïve, nothing secret\n"
        ));
        n += 1;
    }
    text.push_str(pem);
    text.push_str(&format!("the key is {token} here\n"));
    while text.len() < (1 << 20) + 200_000 {
        text.push_str(&format!("more ordinary text on line {n}, ünïcödé\n"));
        n += 1;
    }
    text.push_str(&format!("token={token}\n"));
    let whole = safety.findings(&text);
    assert_eq!(
        whole.iter().map(|f| f.0).collect::<Vec<_>>(),
        ["pem_private_key", "github_token", "github_token"]
    );
    let pem_at = whole[0].1;
    assert!(
        pem_at < 1 << 20 && whole[0].2 > 1 << 20,
        "the PEM block straddles the cut"
    );
    for step in [7, 4096, 1 << 20] {
        assert_eq!(
            streamed(&safety, &text, step),
            whole,
            "reads of {step} bytes"
        );
    }
    // Scrubbed the same way, and whole.
    let mut out = Vec::new();
    safety
        .scrub_stream(Trickle(text.as_bytes(), 65_536), &mut out)
        .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), safety.scrub(&text));
}

#[test]
fn a_streamed_scan_names_where_the_text_stops_being_utf8() {
    let safety = Safety::new();
    let mut bytes = b"ordinary text\n".repeat(10);
    bytes.extend_from_slice(&[b'a', 0xff, b'b']);
    let e = safety
        .scan_stream(Trickle(&bytes, 5), |_, _, _| Ok(()))
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("byte 141"), "{e}");
}
