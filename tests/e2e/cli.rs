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
