//! Secrets through the real binary: scrubbed in replies, traces, files and errors.

use std::fs;

use crate::support::Sandbox;

const KEY: &str = "ghp_Rk2mN8vQ4xT6zB1cD9fH3jL5pS7wY0aE2gU4";

#[test]
fn a_secret_said_to_caal_reaches_no_file_no_export_and_no_output() {
    let sb = Sandbox::new();
    let said = sb
        .run(&["say", "--json", &format!("add {KEY} to the shopping list")])
        .ok();
    assert!(
        !said.stdout.contains(KEY) && said.stdout.contains("secret_ref:github_token:"),
        "{}",
        said.stdout
    );
    let listed = sb.run(&["say", "what's on the shopping list"]).ok();
    assert!(!listed.stdout.contains(KEY));
    let export = sb.run(&["trace", "export"]).ok();
    assert!(!export.stdout.contains(KEY) && export.stdout.contains("safety.redacted"));
    for entry in fs::read_dir(sb.data()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{} holds the secret",
            path.display()
        );
    }
    // A credential is refused as an id, and the error does not repeat it.
    let run = sb.run(&["say", "--conversation", KEY, "hello"]);
    assert_eq!(run.code, 2);
    assert!(
        !run.stderr.contains(KEY) && run.stderr.contains("conversation_id"),
        "{}",
        run.stderr
    );
}

#[test]
fn scan_prints_scrubbed_text_or_findings_without_values() {
    let sb = Sandbox::new();
    let file = sb.path().join("notes.txt");
    fs::write(
        &file,
        format!("line one\nexport GITHUB_TOKEN={KEY}\npassword=hunter2hunter2\n"),
    )
    .unwrap();
    let out = sb.run(&["scan", file.to_str().unwrap()]).ok();
    assert!(
        out.stdout
            .starts_with("line one\nexport GITHUB_TOKEN=secret_ref:github_token:"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(KEY) && !out.stdout.contains("hunter2hunter2"));
    let json = sb.run(&["scan", "--json", file.to_str().unwrap()]).ok();
    assert!(!json.stdout.contains(KEY));
    let findings = json.json();
    assert_eq!(findings[0]["kind"], "github_token");
    assert_eq!(findings[0]["line"], 2);
    assert_eq!(findings[1]["kind"], "password_assignment");
    let start = findings[0]["start"].as_u64().unwrap() as usize;
    let end = findings[0]["end"].as_u64().unwrap() as usize;
    assert_eq!(
        &fs::read_to_string(&file).unwrap()[start..end],
        KEY,
        "offsets point at the secret"
    );
    let stdin = sb
        .run_with_stdin(&["scan", "-"], &format!("token: {KEY}"))
        .ok();
    assert!(!stdin.stdout.contains(KEY));
    let missing = sb.run(&["scan", "nope.txt"]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("nope.txt"));
}

#[test]
fn the_scan_benchmark_prints_recall_and_false_alterations() {
    let sb = Sandbox::new();
    let run = sb.run(&["bench", "scan", "--lines", "5000", "--json"]).ok();
    let last: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert!(last["recall"].as_f64().unwrap() > 0.99, "{last}");
    assert!(
        last["clean_altered_share"].as_f64().unwrap() < 0.01,
        "{last}"
    );
    assert!(last["mb_per_s"].as_f64().unwrap() > 0.0);
}
