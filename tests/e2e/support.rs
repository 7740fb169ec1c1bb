//! Running the binary in an isolated working directory.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use serde_json::Value;

/// A temp working directory with its own data dir and no user config.
///
/// Its local model tier points at a port nobody listens on, so rounds that
/// ask a model fail fast and ask the user to rephrase: most tests are about
/// something else, and two cores cannot run a model per test. Tests of the
/// model itself use `with_real_model`.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    real_model: bool,
}

/// A loopback URL where nothing answers (connections are refused).
pub const NO_MODEL_URL: &str = "http://127.0.0.1:9";

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", self.stdout))
    }

    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Sandbox {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            real_model: false,
        }
    }

    /// The embedded local model, as installed by the setup script.
    pub fn with_real_model() -> Self {
        Self {
            real_model: true,
            ..Self::new()
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The local model (a fake planner in these tests) is offered every
    /// command for talk no layer understood and its words are given, as a
    /// capable remote tier's are (`llm.offer_all_tools_to`, `answer_with`):
    /// the sandbox's `config/caal.toml`.
    pub fn offer_every_tool(&self) {
        self.configure(
            "[llm]\noffer_all_tools_to = [\"local\", \"remote\"]\nanswer_with = [\"local\", \"remote\"]\n",
        );
    }

    /// The sandbox's `config/caal.toml` (merged over the defaults).
    pub fn configure(&self, toml: &str) {
        let dir = self.path().join("config");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("caal.toml"), toml).unwrap();
    }

    pub fn data(&self) -> PathBuf {
        self.path().join("data")
    }

    /// The token `caal serve` wrote into the data dir.
    pub fn api_token(&self) -> String {
        std::fs::read_to_string(self.data().join("api_token"))
            .unwrap()
            .trim()
            .to_owned()
    }

    pub fn db(&self) -> PathBuf {
        self.data().join("traces.db")
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_caal"));
        cmd.current_dir(self.path())
            .env("XDG_CONFIG_HOME", self.path().join("xdg"));
        for (key, _) in std::env::vars() {
            if key.starts_with("CAAL_") {
                cmd.env_remove(key);
            }
        }
        if !self.real_model {
            cmd.env("CAAL_LLM_LOCAL_URL", NO_MODEL_URL);
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.command().args(args).output().unwrap().into()
    }

    /// `caal ARGS` with these environment variables set.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut command = self.command();
        command.args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        command.output().unwrap().into()
    }

    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        self.run_with_stdin_env(args, stdin, &[])
    }

    /// `caal ARGS` reading `stdin`, with these environment variables set.
    pub fn run_with_stdin_env(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Run {
        let mut command = self.command();
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap().into()
    }

    /// `caal chat` in a conversation: says `line`, stays open for `open`
    /// (what rings meanwhile is printed), then quits; its standard output.
    pub fn chat_open_for(
        &self,
        conversation: &str,
        line: &str,
        open: std::time::Duration,
    ) -> String {
        let mut child = self
            .command()
            .args(["chat", "--conversation", conversation])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(open);
        writeln!(stdin, "/quit").unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `caal say --json TEXT` in a conversation.
    pub fn say(&self, conversation: &str, text: &str) -> Value {
        self.run(&["say", "--json", "--conversation", conversation, text])
            .ok()
            .json()
    }
}

/// A running `caal serve` on a port of its choosing, its log collected.
pub struct Served {
    child: std::process::Child,
    pub url: String,
    /// What it said before the line with its address.
    before: Vec<String>,
    log: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl Sandbox {
    /// Starts `caal serve --bind 127.0.0.1:0` with `env`; returns once it listens.
    pub fn serve(&self, env: &[(&str, &str)]) -> Served {
        self.serve_limited(env, None)
    }

    /// As `serve`, with at most `descriptors` open files (soft and hard
    /// limit), as a machine that runs out of them.
    pub fn serve_limited(&self, env: &[(&str, &str)], descriptors: Option<u64>) -> Served {
        use std::io::{BufRead, BufReader};
        let mut command = self.command();
        command
            .args(["serve", "--bind", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        if let Some(n) = descriptors {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec only setrlimit runs, which
            // allocates nothing and takes no lock.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        // Warnings may come first; the line that says where it listens is the one.
        let mut said = Vec::new();
        let url = loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("caal serve ended, having said {said:?}"))
                .unwrap();
            if line.contains("listening on") {
                break line
                    .split_whitespace()
                    .find(|w| w.starts_with("http://"))
                    .unwrap()
                    .trim_end_matches('/')
                    .to_owned();
            }
            said.push(line);
        };
        // Keep reading stderr, so the server never blocks on it.
        let log = std::thread::spawn(move || lines.map_while(Result::ok).collect());
        Served {
            child,
            url,
            before: said,
            log: Some(log),
        }
    }
}

impl Served {
    /// Where its Wyoming door listens (`CAAL_WYOMING` set): host and port.
    pub fn wyoming(&self) -> (String, String) {
        let at = self
            .before
            .iter()
            .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("tcp://")))
            .unwrap_or_else(|| panic!("no Wyoming address in {:?}", self.before))
            .trim_end_matches([';', ',']);
        let (host, port) = at.rsplit_once(':').unwrap();
        (host.to_owned(), port.to_owned())
    }

    /// SIGTERM, then its exit status and everything it logged.
    pub fn terminate(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = self.child.wait().unwrap();
        let log = self
            .log
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        (status, log)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP server on 127.0.0.1 answering every request with `answer(path,
/// body)`, keeping what it was sent (path, headers, body) for the test to read.
pub struct Peer {
    pub url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, String, String)>>>,
    server: std::sync::Arc<tiny_http::Server>,
}

impl Peer {
    pub fn start(answer: impl Fn(&str, &str) -> (u16, String) + Send + 'static) -> Self {
        let server = std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let url = format!("http://{}", server.server_addr().to_ip().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, log) = (server.clone(), seen.clone());
        std::thread::spawn(move || {
            for mut request in s.incoming_requests() {
                let mut body = String::new();
                let _ = std::io::Read::read_to_string(request.as_reader(), &mut body);
                let headers: String = request
                    .headers()
                    .iter()
                    .map(|h| format!("{}: {}\n", h.field, h.value))
                    .collect();
                let path = request.url().to_owned();
                log.lock()
                    .unwrap()
                    .push((path.clone(), headers, body.clone()));
                let (status, reply) = answer(&path, &body);
                let _ = request.respond(
                    tiny_http::Response::from_string(reply)
                        .with_status_code(status)
                        .with_header(
                            tiny_http::Header::from_bytes("Content-Type", "application/json")
                                .unwrap(),
                        ),
                );
            }
        });
        Self { url, seen, server }
    }

    /// (path, headers, body) of every request so far.
    pub fn seen(&self) -> Vec<(String, String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

/// An HTTP client for the tests: statuses are answers, not errors.
pub fn agent(timeout_s: u64) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(timeout_s)))
        .build()
        .into()
}

/// The Python of the clients' virtual environment.
pub fn client_python() -> PathBuf {
    // Beside the models dir, as .ci/setup puts it.
    let caal = match std::env::var_os("CAAL_MODELS_DIR") {
        Some(models) => PathBuf::from(models).parent().unwrap().to_owned(),
        None => std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".local/share"))
            .join("caal"),
    };
    let python = caal.join("clients-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing; run `bash .ci/setup` (it installs the protocol clients)",
        python.display()
    );
    python
}

/// Runs a client script from tests/clients with these arguments; the last
/// line it prints is a JSON object of what it saw.
pub fn client(script: &str, args: &[&str]) -> Value {
    client_env(script, args, &[])
}

/// As `client`, with these environment variables set for it (and for any
/// server it starts).
pub fn client_env(script: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/clients")
        .join(script);
    let mut command = Command::new(client_python());
    command.arg(&path).args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script} printed no JSON last ({e}): {stdout}"))
}

/// A certificate authority of a test's own and a server certificate it
/// signed for 127.0.0.1 (rcgen): a server nobody's roots know.
pub struct TestCa {
    pub ca_pem: String,
    pub cert_pem: String,
    pub cert_der: Vec<u8>,
    pub key_pem: String,
    pub key_der: Vec<u8>,
}

impl TestCa {
    pub fn for_localhost(name: &str) -> Self {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![rcgen::SanType::IpAddress(std::net::IpAddr::V4(
            std::net::Ipv4Addr::LOCALHOST,
        ))];
        let cert = params.signed_by(&key, &issuer).unwrap();
        Self {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        }
    }
}
