//! Live shipping end to end: `caal serve --ship URL` pushing to a receiver
//! that decodes with OpenTelemetry's own Python messages
//! (tests/clients/otlp_receiver.py), while rounds keep coming. The receiver
//! goes down three times and CAAL is killed (SIGKILL) three times; once
//! it drains, the receiver holds every ended round of the trace (the ones
//! the service answered among them), and nothing else.

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::support::{Sandbox, Served, TestCa, client_python};

/// The Python receiver as a process on a fixed port, so it can come back there.
struct Receiver(Child);

impl Receiver {
    fn start(port: u16, out: &Path) -> Self {
        Self::start_with(port, out, &[])
    }

    /// Over TLS with this certificate and key (PEM files).
    fn start_tls(port: u16, out: &Path, cert: &Path, key: &Path) -> Self {
        Self::start_with(port, out, &[cert, key])
    }

    fn start_with(port: u16, out: &Path, tls: &[&Path]) -> Self {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/clients/otlp_receiver.py");
        let mut child = Command::new(client_python())
            .arg(script)
            .arg(port.to_string())
            .arg(out)
            .args(tls)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("listening"), "the receiver said {line:?}");
        Self(child)
    }

    /// SIGKILL: whatever it was in the middle of is cut off.
    fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Sends rounds to whichever service is up (its URL in `url`) until
/// `stop`; returns the round ids it got answers for.
fn load(
    url: Arc<Mutex<String>>,
    token: String,
    conversation: String,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Vec<String>> {
    thread::spawn(move || {
        let agent = crate::support::agent(10);
        let mut answered = Vec::new();
        let texts = [
            "turn on the hall lights",
            "turn off the hall lights",
            "what time is it",
        ];
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            let at = url.lock().unwrap().clone();
            n += 1;
            let sent = agent
                .post(&format!("{at}/api/chat"))
                .header("Authorization", &format!("Bearer {token}"))
                .send_json(
                    json!({"conversation_id": conversation, "text": texts[n % texts.len()]}),
                );
            match sent {
                Ok(mut r) if r.status().as_u16() == 200 => {
                    let body: Value =
                        serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default())
                            .unwrap_or_default();
                    if let Some(id) = body["round_id"].as_str() {
                        answered.push(id.replace('-', ""));
                    }
                }
                // The service is down (killed) or busy: try again shortly.
                _ => thread::sleep(Duration::from_millis(20)),
            }
        }
        answered
    })
}

fn ship_status(sb: &Sandbox) -> Value {
    sb.run(&["ship", "status", "--json"]).ok().json()
}

#[test]
fn every_ended_round_arrives_once_over_three_outages_and_three_kills() {
    let sb = Sandbox::new();
    // Quick retries, so the test's outages cost seconds.
    sb.configure("[ship]\nbatch_size = 64\nflush_interval_ms = 50\nbase_backoff_ms = 20\nmax_backoff_ms = 400\n");
    let out = sb.path().join("received.txt");
    let port = free_port();
    let ship = format!("http://127.0.0.1:{port}");
    let env = [("CAAL_SHIP", ship.as_str())];
    let mut receiver = Some(Receiver::start(port, &out));
    let mut served: Option<Served> = Some(sb.serve(&env));
    let url = Arc::new(Mutex::new(served.as_ref().unwrap().url.clone()));
    let token = sb.api_token();
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..3)
        .map(|i| {
            load(
                url.clone(),
                token.clone(),
                format!("load-{i}"),
                stop.clone(),
            )
        })
        .collect();

    for _ in 0..3 {
        thread::sleep(Duration::from_millis(1500));
        // The receiver goes down for a while; rounds keep being answered.
        receiver.take().unwrap().kill();
        thread::sleep(Duration::from_millis(1000));
        receiver = Some(Receiver::start(port, &out));
        thread::sleep(Duration::from_millis(700));
        // CAAL is killed mid-flight and started again on the same data.
        drop(served.take());
        served = Some(sb.serve(&env));
        *url.lock().unwrap() = served.as_ref().unwrap().url.clone();
    }
    thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::SeqCst);
    let answered: BTreeSet<String> = senders
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();

    // Drained: nothing ended is left unacknowledged.
    let start = Instant::now();
    loop {
        let status = ship_status(&sb);
        if status["backlog"] == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "never drained: {status}"
        );
        thread::sleep(Duration::from_millis(200));
    }
    let (_, log) = served.take().unwrap().terminate();
    drop(receiver);
    assert!(
        !log.iter().any(|l| l.contains("shipping stopped")),
        "no permanent refusal: {log:?}"
    );

    let lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let received: BTreeSet<String> = lines.iter().cloned().collect();
    let export = sb.run(&["trace", "export"]).ok();
    let rounds: Vec<Value> = export
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "round")
        .collect();
    let ended: BTreeSet<String> = rounds
        .iter()
        .filter(|r| r["status"] != "open")
        .map(|r| r["round_id"].as_str().unwrap().replace('-', ""))
        .collect();
    let duplicates = lines.len() - received.len();
    eprintln!(
        "shipped through 3 outages and 3 kills: {} rounds in the trace ({} answered), {} requests' worth of ids received, {} duplicates before dedup by trace id",
        ended.len(),
        answered.len(),
        lines.len(),
        duplicates
    );
    assert!(
        answered.len() >= 30,
        "the load ran: {} answered",
        answered.len()
    );
    assert_eq!(
        rounds.len(),
        ended.len(),
        "every round ended (a killed one as failed)"
    );
    let missing: Vec<_> = answered.difference(&received).collect();
    assert!(
        missing.is_empty(),
        "answered rounds never arrived: {missing:?}"
    );
    assert_eq!(
        received, ended,
        "the receiver holds exactly the trace's ended rounds"
    );
    let status = ship_status(&sb);
    assert_eq!(status["backlog"], 0);
    assert!(
        status["rounds_acked"].as_u64().unwrap() >= ended.len() as u64,
        "{status}"
    );
}

#[test]
fn ship_status_and_the_api_show_the_backlog_while_the_receiver_is_away() {
    let sb = Sandbox::new();
    sb.configure("[ship]\nflush_interval_ms = 50\nbase_backoff_ms = 20\nmax_backoff_ms = 200\n");
    // Nobody listens here: every try fails, and the rounds wait.
    let ship = format!("http://127.0.0.1:{}", free_port());
    let served = sb.serve(&[("CAAL_SHIP", ship.as_str())]);
    let token = sb.api_token();
    let agent = crate::support::agent(10);
    for _ in 0..3 {
        let r = agent
            .post(&format!("{}/api/chat", served.url))
            .header("Authorization", &format!("Bearer {token}"))
            .send_json(json!({"conversation_id": "kitchen", "text": "turn on the hall lights"}))
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    let start = Instant::now();
    let status = loop {
        let status = ship_status(&sb);
        if status["last_error"].is_string() {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{status}");
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["backlog"], 3, "{status}");
    assert_eq!(
        status["backlog_by_conversation"][0]["conversation_id"],
        "kitchen"
    );
    assert!(
        status["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot reach"),
        "{status}"
    );
    let mut api = agent
        .get(&format!("{}/api/ship", served.url))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap();
    let api: Value = serde_json::from_str(&api.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(api["backlog"], 3, "{api}");
    assert_eq!(api["endpoint"], format!("{ship}/v1/traces"));
    let text = sb.run(&["ship", "status"]).ok();
    assert!(text.stdout.contains("backlog: 3 rounds"), "{}", text.stdout);
}

#[test]
fn a_bad_ship_section_is_refused_by_config_check() {
    let sb = Sandbox::new();
    sb.configure("[ship]\nurl = \"http://user:pw@collector:4318\"\n");
    let run = sb.run(&["config", "check"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("ship.url"), "{}", run.stderr);
    assert!(
        !run.stderr.contains("pw@"),
        "the password is not repeated: {}",
        run.stderr
    );
    sb.configure("[ship]\nurl = \"http://collector:4318\"\ncredential_env = \"X\"\ncredential_file = \"f\"\n");
    let run = sb.run(&["config", "check"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("not both"), "{}", run.stderr);
}

/// Waits for `caal ship status` to say what `done` looks for.
fn status_until(sb: &Sandbox, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let status = ship_status(sb);
        if done(&status) {
            return status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: {status}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn over_https_a_receiver_signed_by_the_ca_file_is_trusted_and_an_unknown_one_refused() {
    let sb = Sandbox::new();
    let made = TestCa::for_localhost("fleet test CA");
    let (ca, cert, key) = (
        sb.path().join("ca.pem"),
        sb.path().join("receiver.pem"),
        sb.path().join("receiver.key"),
    );
    std::fs::write(&ca, &made.ca_pem).unwrap();
    std::fs::write(&cert, &made.cert_pem).unwrap();
    std::fs::write(&key, &made.key_pem).unwrap();
    let out = sb.path().join("received.txt");
    let port = free_port();
    let _receiver = Receiver::start_tls(port, &out, &cert, &key);
    let ship = format!("https://127.0.0.1:{port}");
    let quick = "[ship]\nflush_interval_ms = 50\nbase_backoff_ms = 20\nmax_backoff_ms = 200\n";

    // The system's roots do not know the test's CA: refused, the fix named,
    // the round kept.
    sb.configure(quick);
    let served = sb.serve(&[("CAAL_SHIP", ship.as_str())]);
    let mut answer = crate::support::agent(10)
        .post(&format!("{}/api/chat", served.url))
        .header("Authorization", &format!("Bearer {}", sb.api_token()))
        .send_json(json!({"conversation_id": "porch", "text": "turn on the hall lights"}))
        .unwrap();
    let answer: Value = serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap();
    let round = answer["round_id"].as_str().unwrap().replace('-', "");
    let status = status_until(&sb, "the certificate refused", |s| {
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("not trusted"))
    });
    assert!(
        status["last_error"].as_str().unwrap().contains("ca_file"),
        "the fix is named: {status}"
    );
    assert_eq!(status["backlog"], 1, "{status}");
    drop(served.terminate());

    // Given the CA: the round arrives, and nothing is left.
    sb.configure(&format!("{quick}ca_file = \"{}\"\n", ca.display()));
    let served = sb.serve(&[("CAAL_SHIP", ship.as_str())]);
    status_until(&sb, "the round shipped over https", |s| s["backlog"] == 0);
    drop(served.terminate());
    let received = std::fs::read_to_string(&out).unwrap();
    assert!(
        received.lines().any(|l| l == round),
        "the receiver got {round}: {received:?}"
    );

    // A CA file for a receiver over plain http is refused by config check.
    sb.configure(&format!(
        "[ship]\nurl = \"http://127.0.0.1:{port}\"\nca_file = \"{}\"\n",
        ca.display()
    ));
    let run = sb.run(&["config", "check"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("ship.ca_file"), "{}", run.stderr);
}
