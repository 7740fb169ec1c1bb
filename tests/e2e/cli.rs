//! The command line's own habits: shell completions and the manual page,
//! generated from the one clap definition, so they name every command.

use crate::support::Sandbox;

#[test]
fn completions_and_the_man_page_name_every_command() {
    let sb = Sandbox::new();
    let bash = sb.run(&["completions", "bash"]).ok();
    assert!(bash.stdout.contains("complete -F _caal"), "{}", bash.stdout);
    let zsh = sb.run(&["completions", "zsh"]).ok();
    assert!(
        zsh.stdout.starts_with("#compdef caal"),
        "{}",
        &zsh.stdout[..80]
    );
    let fish = sb.run(&["completions", "fish"]).ok();
    let man = sb.run(&["man"]).ok();
    assert!(
        man.stdout.starts_with(".ie \\n(.g .ds Aq") || man.stdout.contains(".TH caal"),
        "{}",
        &man.stdout[..200]
    );
    for command in ["say", "serve", "trace", "timers", "jobs", "completions"] {
        assert!(bash.stdout.contains(command), "bash completes {command}");
        assert!(
            fish.stdout.contains(&format!("-a \"{command}\"")),
            "fish completes {command}"
        );
        assert!(man.stdout.contains(command), "the man page names {command}");
    }
    // Nothing is written to the data dir for these.
    assert!(!sb.data().exists());
    let bad = sb.run(&["completions", "cmd.exe"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("possible values") && bad.stderr.contains("bash"),
        "{}",
        bad.stderr
    );
}

#[test]
fn config_check_and_model_install_speak_json_too() {
    let sb = Sandbox::new();
    let check = sb.run(&["config", "check", "--json"]).ok().json();
    assert_eq!(check["ok"], true);
    assert!(check["rules"].as_u64().unwrap() > 0, "{check}");
    assert!(
        check["config_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // A rule whose pattern does not compile is refused, naming it, exit 2.
    std::fs::write(
        sb.path().join("bad.toml"),
        "[[rules]]\nname = \"broken\"\npattern = \"(unclosed\"\nroute = \"chat\"\n",
    )
    .unwrap();
    let bad = sb.run(&["--config", "bad.toml", "config", "check", "--json"]);
    assert_eq!(bad.code, 2, "{}", bad.stdout);
    assert!(bad.stderr.contains("broken"), "{}", bad.stderr);
    // The speech model the setup installed: nothing to convert.
    let model = sb.run(&["model", "install", "--json"]).ok().json();
    assert_eq!(model["converted"], false, "{model}");
    assert!(
        model["model"].as_str().unwrap().ends_with(".bin"),
        "{model}"
    );
}

/// `caal man | head -1`: a reader that stops early ends the command as it
/// would any Unix tool (the pipe's signal), not with a panic's backtrace.
#[cfg(unix)]
#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let sb = Sandbox::new();
    for args in [
        &["man"][..],
        &["understand", "turn on the kitchen lights"][..],
    ] {
        let mut child = sb
            .command()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reading end closed before anything was written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(
            out.status.signal(),
            Some(13),
            "{args:?} ends at the closed pipe (SIGPIPE): {:?} {stderr}",
            out.status
        );
    }
}
