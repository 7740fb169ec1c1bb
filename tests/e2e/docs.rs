//! The commands README.md and docs/*.md give, run.
//!
//! A command a reader may copy is a line of a ```sh block whose first word is
//! `caal` (after any `NAME=value` words), or a `$ caal …` line of a
//! ```console block (whose other lines are what it printed). Each page's
//! commands run in the order the page gives them, in a `Sandbox` of the
//! page's own (so a page can first say something, then show its trace), and
//! must exit 0, or the code the line's comment states (`# exits 2`).
//! `ROUND_ID` in a command is the newest round's id in that sandbox.
//!
//! A command that cannot run in a test says why in its comment, which
//! contains `not run by tests: REASON`:
//!
//! ```sh
//! caal serve                # not run by tests: serves until stopped
//! ```
//!
//! Such are the commands that serve until stopped, need the speech model,
//! the local model, Home Assistant or a file the reader brings, and the
//! benchmarks. For them `caal SUBCOMMAND… --help` must exist and list every
//! `--flag` the line gives. A line that runs is one command: a pipe, a
//! redirection or a `;` is for lines not run. A line that is neither (it
//! fails, hangs, or is more than one command) fails this test naming its
//! page and line.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
    process::Stdio,
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::support::Sandbox;

/// What a line must say for its command not to be run.
const NOT_RUN: &str = "not run by tests:";

/// Longer than this, a command is taken to wait for something a test lacks.
const PATIENCE: Duration = Duration::from_secs(30);

/// The repository's root: README.md and docs/.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md, then docs/*.md in name order, as (name, text).
fn pages() -> Vec<(String, String)> {
    let mut names: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_owned());
    names
        .into_iter()
        .map(|name| {
            let text = fs::read_to_string(root().join(&name)).unwrap();
            (name, text)
        })
        .collect()
}

/// A `caal` command found on a page.
#[derive(Debug)]
struct Line {
    /// Where: page and line number, as a reader finds it.
    at: String,
    /// The line as written (continuations joined).
    text: String,
    /// `NAME=value` words before `caal`.
    env: Vec<(String, String)>,
    /// The arguments after `caal`, quotes removed.
    args: Vec<String>,
    /// A pipe, redirection, `;`, `&&` or `$(…)` follows the first command.
    compound: bool,
    /// The comment after `#`, if any.
    comment: String,
}

impl Line {
    /// Why it is not run, if its comment says so.
    fn not_run(&self) -> Option<&str> {
        self.comment
            .find(NOT_RUN)
            .map(|at| self.comment[at + NOT_RUN.len()..].trim())
    }

    /// The exit code its comment states (`exits N`), else 0.
    fn expected_code(&self) -> i32 {
        self.comment
            .split("exits ")
            .nth(1)
            .and_then(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .unwrap_or(0)
    }
}

/// Every `caal` command of a page's ```sh and ```console blocks, in order.
fn commands(page: &str, text: &str) -> Vec<Line> {
    let mut found = Vec::new();
    // The block's language while inside one.
    let mut block: Option<String> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(info.split_whitespace().next().unwrap_or("").to_owned()),
            };
            continue;
        }
        let Some(lang) = block.as_deref() else {
            continue;
        };
        let command = match lang {
            "sh" | "bash" | "shell" => trimmed.strip_prefix("$ ").unwrap_or(trimmed),
            "console" => match (trimmed.strip_prefix("$ "), &pending) {
                (Some(command), _) => command,
                // A continuation of the command above.
                (None, Some(_)) => trimmed,
                (None, None) => continue,
            },
            _ => continue,
        };
        let (number, joined) = match pending.take() {
            Some((number, before)) => (number, format!("{before} {command}")),
            None => (i + 1, command.to_owned()),
        };
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((number, head.trim_end().to_owned()));
            continue;
        }
        if let Some(line) = parse(&format!("{page}:{number}"), &joined) {
            found.push(line);
        }
    }
    found
}

/// A shell line as words, if its command is `caal`. Quotes and backslashes
/// as the shell reads them; a word starting with `#` starts the comment.
fn parse(at: &str, text: &str) -> Option<Line> {
    let mut words: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut compound = false;
    let mut comment = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at_byte, c)) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for (_, c) in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    w.push(c);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some((_, c)) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some((_, next)) = chars.next() {
                                if !matches!(next, '"' | '\\' | '$' | '`') {
                                    w.push('\\');
                                }
                                w.push(next);
                            }
                        }
                        '$' if chars.peek().is_some_and(|&(_, n)| n == '(') => {
                            compound = true;
                            w.push(c);
                        }
                        _ => w.push(c),
                    }
                }
            }
            '\\' => {
                if let Some((_, next)) = chars.next() {
                    word.get_or_insert_with(String::new).push(next);
                }
            }
            '#' if word.is_none() => {
                comment = text[at_byte + 1..].trim().to_owned();
                break;
            }
            ';' | '|' | '&' | '>' | '<' | '`' => {
                compound = true;
                // The first command is what is checked; the rest is the shell's.
                if let Some(w) = word.take() {
                    words.push(w);
                }
                if let Some(hash) = text[at_byte..].find(" #") {
                    comment = text[at_byte + hash + 2..].trim().to_owned();
                }
                break;
            }
            '$' if chars.peek().is_some_and(|&(_, n)| n == '(') => {
                compound = true;
                word.get_or_insert_with(String::new).push(c);
            }
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = word.take() {
        words.push(w);
    }
    let mut env = Vec::new();
    let mut words = words.into_iter().peekable();
    while let Some((name, value)) = words.peek().and_then(|w| w.split_once('=')) {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            break;
        }
        env.push((name.to_owned(), value.to_owned()));
        words.next();
    }
    if words.next().as_deref() != Some("caal") {
        return None;
    }
    Some(Line {
        at: at.to_owned(),
        text: text.to_owned(),
        env,
        args: words.collect(),
        compound,
        comment,
    })
}

/// `caal PATH… --help`: its text and subcommands, asked once per path.
#[derive(Clone)]
struct Help {
    text: String,
    subcommands: Vec<String>,
}

type HelpCache = Mutex<HashMap<Vec<String>, Option<Help>>>;

fn help(sb: &Sandbox, path: &[String], cache: &HelpCache) -> Option<Help> {
    if let Some(known) = cache.lock().unwrap().get(path) {
        return known.clone();
    }
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let run = sb.run(&args);
    let found = (run.code == 0).then(|| {
        // clap lists them under "Commands:", a name a line, until a blank line.
        let subcommands = run
            .stdout
            .lines()
            .skip_while(|l| l.trim() != "Commands:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| *name != "help")
            .map(str::to_owned)
            .collect();
        Help {
            text: run.stdout,
            subcommands,
        }
    });
    cache.lock().unwrap().insert(path.to_vec(), found.clone());
    found
}

/// Where `flag` is an option of a help text (on a line of its own that
/// opens with options: `-h, --help`, `--json`), not a word of prose:
/// the text right after it (` <VALUE>` when it takes one).
fn option<'a>(help: &'a str, flag: &str) -> Option<&'a str> {
    help.lines()
        .filter(|line| line.trim_start().starts_with('-'))
        .find_map(|line| {
            line.match_indices(flag).find_map(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = &line[at + flag.len()..];
                let whole_before = before.is_none_or(|c| c.is_whitespace() || c == ',');
                let whole_after = after
                    .chars()
                    .next()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'));
                (whole_before && whole_after).then_some(after)
            })
        })
}

/// A command not run: its subcommands exist and every flag it gives is one
/// they take. The problems found, as sentences.
fn check_by_help(sb: &Sandbox, line: &Line, cache: &HelpCache) -> Vec<String> {
    let mut problems = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let Some(mut level) = help(sb, &path, cache) else {
        return vec!["`caal --help` failed".to_owned()];
    };
    // Every help text along the path: a global option is in any of them.
    let mut texts = vec![level.text.clone()];
    let mut args = line.args.iter();
    let mut lost = false;
    while let Some(arg) = args.next() {
        if arg.starts_with('-') && arg.len() > 1 {
            let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
            match texts.iter().find_map(|t| option(t, flag)) {
                None => problems.push(format!("`{} --help` has no {flag}", shown(&path))),
                // `--config <CONFIG>`: the next word is its value.
                Some(after) if after.starts_with(" <") && !arg.contains('=') => {
                    args.next();
                }
                Some(_) => {}
            }
        } else if !level.subcommands.is_empty() {
            if !level.subcommands.contains(arg) {
                problems.push(format!(
                    "`{}` has no subcommand {arg:?} (it has {})",
                    shown(&path),
                    level.subcommands.join(", ")
                ));
                lost = true;
                break;
            }
            path.push(arg.clone());
            match help(sb, &path, cache) {
                Some(next) => {
                    texts.push(next.text.clone());
                    level = next;
                }
                None => {
                    problems.push(format!("`{} --help` failed", shown(&path)));
                    lost = true;
                    break;
                }
            }
        }
    }
    if !lost && !level.subcommands.is_empty() && !line.args.iter().any(|a| a == "--help") {
        problems.push(format!(
            "`{}` needs one of its subcommands: {}",
            shown(&path),
            level.subcommands.join(", ")
        ));
    }
    problems
}

/// `caal` and a subcommand path, as typed.
fn shown(path: &[String]) -> String {
    std::iter::once("caal")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The newest round's id in the sandbox, for `ROUND_ID`.
fn newest_round(sb: &Sandbox) -> Option<String> {
    let run = sb.run(&["trace", "list", "--limit", "1", "--json"]);
    let rounds: serde_json::Value = serde_json::from_str(run.stdout.trim()).ok()?;
    let id = rounds.as_array()?.last()?["round_id"].as_str()?;
    Some(id.to_owned())
}

/// Runs one command in the sandbox, its output into `out`; the problem, if
/// it did not exit as the page says.
fn run(sb: &Sandbox, line: &Line, out: &Path) -> Option<String> {
    let mut args = line.args.clone();
    if args.iter().any(|a| a.contains("ROUND_ID")) {
        let Some(id) = newest_round(sb) else {
            return Some("uses ROUND_ID, but no round was recorded before it".to_owned());
        };
        for arg in &mut args {
            *arg = arg.replace("ROUND_ID", &id);
        }
    }
    let (stdout, stderr) = (out.join("stdout"), out.join("stderr"));
    let mut command = sb.command();
    command
        .args(&args)
        .envs(line.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(fs::File::create(&stdout).unwrap())
        .stderr(fs::File::create(&stderr).unwrap());
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let said = |path: &Path| {
        let text = fs::read_to_string(path).unwrap_or_default();
        let tail: String = text.chars().rev().take(800).collect();
        tail.chars().rev().collect::<String>()
    };
    let expected = line.expected_code();
    match status.map(|s| s.code().unwrap_or(-1)) {
        None => Some(format!("did not finish in {} s", PATIENCE.as_secs())),
        Some(code) if code == expected => None,
        Some(code) => Some(format!(
            "exited {code}, not {expected}\n    stdout: {}\n    stderr: {}",
            said(&stdout).trim(),
            said(&stderr).trim()
        )),
    }
}

/// A page's commands: run in order, or checked by `--help`. Its problems,
/// and how many commands were run and checked.
fn check_page(page: &str, text: &str, cache: &HelpCache) -> (Vec<String>, usize, usize) {
    let sb = Sandbox::new();
    let out = tempfile::tempdir().unwrap();
    let (mut problems, mut ran, mut checked) = (Vec::new(), 0, 0);
    let mark = format!("mark it `# {NOT_RUN} REASON`");
    for line in commands(page, text) {
        let problem = match line.not_run() {
            Some("") => Some(format!("says it is {NOT_RUN} but not why")),
            Some(_) => {
                checked += 1;
                let found = check_by_help(&sb, &line, cache);
                (!found.is_empty()).then(|| found.join("; "))
            }
            None if line.compound => Some(format!(
                "is more than one command (a pipe, redirection, `;` or `$(…)`): \
                 write one command a line, or {mark}"
            )),
            None => {
                ran += 1;
                run(&sb, &line, out.path()).map(|p| format!("{p}\n    fix the command, or {mark}"))
            }
        };
        if let Some(problem) = problem {
            let text = line.text.split_whitespace().collect::<Vec<_>>().join(" ");
            problems.push(format!("{}: `{text}` {problem}", line.at));
        }
    }
    (problems, ran, checked)
}

#[test]
fn every_command_the_docs_give_runs_or_says_why_not() {
    let started = Instant::now();
    let pages = pages();
    let cache = HelpCache::default();
    // Pages are independent (a sandbox each): a worker a core takes the next.
    let queue = Mutex::new(pages.iter());
    // The lock is let go before the page is checked.
    let next = || queue.lock().unwrap().next();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let results: Vec<(Vec<String>, usize, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    while let Some((name, text)) = next() {
                        done.push(check_page(name, text, &cache));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let problems: Vec<&String> = results.iter().flat_map(|r| &r.0).collect();
    let ran: usize = results.iter().map(|r| r.1).sum();
    let checked: usize = results.iter().map(|r| r.2).sum();
    eprintln!(
        "{} pages: {ran} commands run, {checked} checked by --help, in {:.1} s",
        pages.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        problems.is_empty(),
        "{} of the commands the docs give do not hold:\n{}",
        problems.len(),
        problems
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(ran > 0 && checked > 0, "no command found on any page");
}

/// Every page in docs/ is one the README's table of contents links to, and
/// each links back.
#[test]
fn every_docs_page_is_linked_from_the_readme_and_back() {
    let pages = pages();
    let readme = &pages[0].1;
    for (name, text) in &pages[1..] {
        assert!(
            readme.contains(&format!("]({name})")),
            "README.md does not link to {name}"
        );
        assert!(
            text.contains("](../README.md)"),
            "{name} does not link back to the README"
        );
    }
}

#[test]
fn lines_are_read_as_the_shell_reads_them() {
    let line = parse("p:1", r#"caal say --json "it's \"on\"" 'a b'  # exits 2"#).unwrap();
    assert_eq!(line.args, ["say", "--json", "it's \"on\"", "a b"]);
    assert_eq!(line.expected_code(), 2);
    assert!(!line.compound && line.not_run().is_none());

    let line = parse(
        "p:2",
        "caal man > caal.1   # not run by tests: writes a file",
    )
    .unwrap();
    assert_eq!(line.args, ["man"]);
    assert!(line.compound);
    assert_eq!(line.not_run(), Some("writes a file"));

    let line = parse("p:3", "CAAL_API_TOKEN=t caal serve --bind 0.0.0.0:8377").unwrap();
    assert_eq!(line.env, [("CAAL_API_TOKEN".to_owned(), "t".to_owned())]);
    assert_eq!(line.args, ["serve", "--bind", "0.0.0.0:8377"]);

    assert!(parse("p:4", "bash .ci/caal say hello").is_none());
    assert!(parse("p:5", "curl http://127.0.0.1:8377/ # caal").is_none());

    let page = "```console\n$ caal say hi\nHello.\n$ espeak-ng x\n```\n\
                ```sh\ncaal trace verify \\\n  --json\n# caal trace list\n```\n\
                ```toml\ncaal = 1\n```\n";
    let found = commands("p", page);
    let args: Vec<_> = found
        .iter()
        .map(|l| (l.at.as_str(), l.args.join(" ")))
        .collect();
    assert_eq!(
        args,
        [
            ("p:2", "say hi".to_owned()),
            ("p:7", "trace verify --json".to_owned())
        ]
    );
}
