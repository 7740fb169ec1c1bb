//! Test helpers shared by modules: a scripted HTTP server on 127.0.0.1.

use std::{
    sync::{Arc, Mutex},
    thread,
    time::Duration,
};

use serde_json::Value;

pub(crate) const NO_DELAY: Duration = Duration::ZERO;

/// A loopback port nobody listens on (bound, then released).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// The body's bytes as sent (a binary body is a string of nothing in `body`).
    pub raw: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A scripted HTTP server: answers each request with (status, body, delay).
pub(crate) struct Server {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    server: Arc<tiny_http::Server>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(
        script: impl Fn(usize, &Seen) -> (u16, String, Duration) + Send + Sync + 'static,
    ) -> Self {
        let script = Arc::new(script);
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let port = server.server_addr().to_ip().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s, log) = (server.clone(), seen.clone());
        let handle = thread::spawn(move || {
            for mut request in s.incoming_requests() {
                let mut raw = Vec::new();
                let _ = request.as_reader().read_to_end(&mut raw);
                let body = String::from_utf8(raw.clone()).unwrap_or_default();
                let item = Seen {
                    method: request.method().to_string(),
                    path: request.url().to_owned(),
                    headers: request
                        .headers()
                        .iter()
                        .map(|h| (h.field.to_string(), h.value.to_string()))
                        .collect(),
                    body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
                    raw,
                };
                let n = {
                    let mut log = log.lock().unwrap();
                    log.push(item.clone());
                    log.len()
                };
                let (status, reply, delay) = script(n, &item);
                // Each answer on its own thread: a slow one never holds up the next request.
                thread::spawn(move || {
                    thread::sleep(delay);
                    let _ = request
                        .respond(tiny_http::Response::from_string(reply).with_status_code(status));
                });
            }
        });
        Self {
            url: format!("http://127.0.0.1:{port}"),
            seen,
            server,
            handle: Some(handle),
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
