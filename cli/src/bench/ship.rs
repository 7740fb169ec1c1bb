//! `caal bench ship`: live shipping against a receiver inside the bench (a
//! small HTTP/1.1 server on 127.0.0.1 that reads each request and answers
//! 200, as a Collector's otlphttp receiver acknowledges), over real rounds:
//!
//! 1. the service benchmark (`caal bench serve`) with no shipping: its
//!    rounds are the backlog, and its p99 the baseline;
//! 2. that backlog shipped from the trace store as fast as it goes: rounds
//!    acknowledged per second, requests, compressed bytes per round;
//! 3. the service benchmark again with shipping on, so its rounds ship as
//!    they end: its p99 beside the baseline, and how far shipping lagged;
//! 4. the service benchmark once more with no shipping (the trace is
//!    bigger by then), so a difference that is only the trace's growth shows.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use caal::{
    config::Config,
    export::ship::{ShipOptions, Shipper},
    round::Engine,
};
use serde::Serialize;

use super::serve::{ServeBenchReport, load, open_engine};

#[derive(Clone, Debug, Serialize)]
pub struct ShipBenchReport {
    pub batch_size: usize,
    /// The backlog shipped in step 2, and how fast.
    pub backlog_rounds: u64,
    pub ship_seconds: f64,
    pub rounds_per_s: f64,
    pub requests: u64,
    pub bytes_per_round: f64,
    pub serve_before: ServeBenchReport,
    pub serve_shipping: ServeBenchReport,
    pub serve_after: ServeBenchReport,
    /// After the shipping run ended: how long until its last round was acknowledged.
    pub drain_after_ms: f64,
}

pub fn run(
    config: &Config,
    data_dir: &Path,
    clients: usize,
    seconds: f64,
) -> Result<ShipBenchReport, String> {
    let dir = data_dir.join(format!("bench-ship-{}", std::process::id()));
    let result = run_in(config, &dir, clients.max(1), seconds);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(
    config: &Config,
    dir: &Path,
    clients: usize,
    seconds: f64,
) -> Result<ShipBenchReport, String> {
    let engine = open_engine(config, dir)?;
    let receiver = Acknowledger::start()?;
    let mut options = ShipOptions::resolve(&config.ship, Some(&receiver.url), &|_| None)
        .map_err(|e| e.to_string())?
        .ok_or("no receiver")?;
    // The last part batch is not held back: the figure is the sending.
    options.flush_interval = Duration::from_millis(5);

    let serve_before = load(&engine, clients, seconds)?;
    let backlog_rounds = status(&engine)?.backlog;
    let started = Instant::now();
    let shipper =
        Shipper::start(engine.store().path(), options.clone()).map_err(|e| e.to_string())?;
    wait_acked(&engine, backlog_rounds)?;
    let ship_seconds = started.elapsed().as_secs_f64();
    let requests = receiver.requests.load(Ordering::Relaxed);
    let bytes = receiver.bytes.load(Ordering::Relaxed);
    drained(&engine)?;

    let serve_shipping = load(&engine, clients, seconds)?;
    let ended = Instant::now();
    wait_acked(&engine, backlog_rounds + serve_shipping.rounds)?;
    drained(&engine)?;
    let drain_after_ms = ended.elapsed().as_secs_f64() * 1e3;
    drop(shipper);

    let serve_after = load(&engine, clients, seconds)?;
    receiver.stop();
    Ok(ShipBenchReport {
        batch_size: options.batch_size,
        backlog_rounds,
        ship_seconds,
        rounds_per_s: backlog_rounds as f64 / ship_seconds,
        requests,
        bytes_per_round: bytes as f64 / backlog_rounds.max(1) as f64,
        serve_before,
        serve_shipping,
        serve_after,
        drain_after_ms,
    })
}

fn status(engine: &Engine) -> Result<caal::trace::ShipStatus, String> {
    engine
        .store()
        .reader()
        .ship_status()
        .map_err(|e| e.to_string())
}

/// Polls (one row read) until `rounds` have been acknowledged in all.
fn wait_acked(engine: &Engine, rounds: u64) -> Result<(), String> {
    let started = Instant::now();
    let reader = engine.store().reader();
    while reader.ship_acked().map_err(|e| e.to_string())? < rounds {
        if started.elapsed() > DRAIN_LIMIT {
            return Err(format!(
                "shipping did not reach {rounds} rounds in {DRAIN_LIMIT:?}"
            ));
        }
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Polls the whole status until nothing waits (a round that failed
/// rather than answered counts too).
fn drained(engine: &Engine) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let s = status(engine)?;
        if s.backlog == 0 {
            return Ok(());
        }
        if started.elapsed() > DRAIN_LIMIT {
            return Err(format!(
                "shipping did not drain in {DRAIN_LIMIT:?}: {} rounds left, last error {:?}",
                s.backlog, s.last_error
            ));
        }
        thread::sleep(Duration::from_millis(10));
    }
}

const DRAIN_LIMIT: Duration = Duration::from_secs(120);

/// A receiver that reads each request whole and answers 200 with an empty
/// body, counting requests and the bytes of their bodies.
struct Acknowledger {
    url: String,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

impl Acknowledger {
    fn start() -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (requests, bytes, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (r, b, s) = (requests.clone(), bytes.clone(), stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(conn) = conn {
                    let (r, b) = (r.clone(), b.clone());
                    thread::spawn(move || acknowledge(conn, &r, &b));
                }
            }
        });
        Ok(Self {
            url: format!("http://{addr}"),
            requests,
            bytes,
            stop,
            addr,
        })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Serves one keep-alive connection: headers, then Content-Length bytes, then 200.
fn acknowledge(conn: TcpStream, requests: &AtomicU64, bytes: &AtomicU64) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        requests.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(length as u64, Ordering::Relaxed);
        if out
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}
