//! The shipper against a scripted receiver on 127.0.0.1 and a real trace
//! store in a temp dir: marks move only after 2xx, a permanent refusal is
//! reported and not retried, and the credential reaches only its header.

use std::{
    collections::BTreeSet,
    io::Read as _,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU16, Ordering},
    },
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

use super::*;
use crate::testing::{NO_DELAY, Seen, Server};
use crate::trace::{DB_FILE, Durability, EventDraft, EventType, RoundSpec, TraceStore};

/// A trace store in a temp dir (kept while the dir lives).
fn store() -> (tempfile::TempDir, TraceStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = TraceStore::open(
        &dir.path().join(DB_FILE),
        "lib".parse().unwrap(),
        Durability::Normal,
    )
    .unwrap();
    (dir, store)
}

fn round(store: &TraceStore, conversation: &str) -> String {
    let open = store
        .begin_round(RoundSpec::typed(&conversation.parse().unwrap()))
        .unwrap();
    open.append(EventDraft::untyped(
        EventType::InputReceived,
        serde_json::json!({"raw_text": "hello", "channel": "text"}),
    ))
    .unwrap();
    let id = open.header().round_id.to_string();
    open.complete("default").unwrap();
    id
}

fn options(url: &str, credential: Option<Credential>) -> ShipOptions {
    ShipOptions {
        url: url.into(),
        batch_size: 100,
        flush_interval: Duration::from_millis(20),
        timeout: Duration::from_secs(5),
        base_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(40),
        refused_retry: None,
        credential,
        trust: crate::tls::Trust::Mozilla,
    }
}

/// The root spans' trace ids (the rounds' UUIDs, dashes dropped) a request carried.
fn trace_ids(seen: &Seen) -> Vec<String> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&seen.raw[..])
        .read_to_end(&mut raw)
        .unwrap();
    let request = ExportTraceServiceRequest::decode(&raw[..]).unwrap();
    request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .filter(|s| s.parent_span_id.is_empty())
        .map(|s| crate::crypto::hex(&s.trace_id))
        .collect()
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "waited for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_mark_moves_only_after_the_receiver_answers_2xx() {
    let (_dir, store) = store();
    let mut ids: BTreeSet<String> = ["a", "b", "a"].iter().map(|c| round(&store, c)).collect();
    // 503 until told otherwise.
    let answer = Arc::new(AtomicU16::new(503));
    let status = answer.clone();
    let receiver =
        Server::start(move |_, _| (status.load(Ordering::SeqCst), String::new(), NO_DELAY));
    let shipper = Shipper::start(store.path(), options(&receiver.url, None)).unwrap();

    until("three refused tries", || receiver.seen().len() >= 3);
    let waiting = store.reader().ship_status().unwrap();
    assert_eq!(waiting.backlog, 3, "{waiting:?}");
    assert_eq!(waiting.rounds_acked, 0);
    assert!(
        waiting.last_error.as_deref().unwrap_or("").contains("503"),
        "{waiting:?}"
    );
    assert_eq!(
        waiting.backlog_by_conversation,
        vec![("a".to_string(), 2), ("b".to_string(), 1)]
    );

    answer.store(200, Ordering::SeqCst);
    until("the backlog to drain", || {
        store.reader().ship_status().unwrap().backlog == 0
    });
    ids.insert(round(&store, "b"));
    until("the new round", || {
        store.reader().ship_status().unwrap().rounds_acked == 4
    });
    drop(shipper);

    let seen = receiver.seen();
    for s in &seen {
        assert_eq!(s.method, "POST");
        assert_eq!(s.path, "/v1/traces");
        assert_eq!(s.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(s.header("content-encoding"), Some("gzip"));
    }
    // Every try carried the same batch; after the 2xx, only the new round.
    let got: BTreeSet<String> = seen.iter().flat_map(trace_ids).collect();
    let want: BTreeSet<String> = ids.iter().map(|i| i.replace('-', "")).collect();
    assert_eq!(got, want);
    let last = store.reader().ship_status().unwrap();
    assert_eq!(
        last.last_error, None,
        "a send that got through clears the error"
    );
    assert!(last.last_ack_at.is_some());
}

#[test]
fn a_permanent_refusal_is_reported_not_retried_and_the_credential_stays_out_of_logs() {
    let (_dir, store) = store();
    round(&store, "a");
    // A receiver that quotes the credential back in its refusal.
    let receiver = Server::start(|_, seen| {
        let quoted = format!("bad token {}", seen.header("authorization").unwrap_or(""));
        (401, quoted, NO_DELAY)
    });
    let secret = "Bearer s3cret-shipping-token-0451";
    let logs = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let shipper = tracing::subscriber::with_default(subscriber, || {
        Shipper::start(
            store.path(),
            options(
                &receiver.url,
                Some(Credential::new("Authorization", secret)),
            ),
        )
        .unwrap()
    });
    until("shipping to stop", || shipper.finished());
    std::thread::sleep(Duration::from_millis(100));
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1, "a 401 is not tried again");
    assert_eq!(
        seen[0].header("authorization"),
        Some(secret),
        "sent in its header"
    );
    let status = store.reader().ship_status().unwrap();
    assert_eq!(status.backlog, 1, "the round waits in the trace");
    let error = status.last_error.unwrap_or_default();
    assert!(
        error.contains("401") && error.contains("stopped"),
        "{error}"
    );
    let logged = logs.text();
    assert!(logged.contains("401"), "the refusal is logged: {logged}");
    for place in [&logged, &error] {
        assert!(!place.contains("s3cret"), "the credential leaked: {place}");
    }
}

#[test]
fn a_refused_batch_is_offered_again_only_after_the_refusal_wait_and_lands_once_mended() {
    let (_dir, store) = store();
    let id = round(&store, "a");
    // Refuses twice (a credential it does not know yet), then takes it.
    let times = Arc::new(Mutex::new(Vec::new()));
    let at = times.clone();
    let receiver = Server::start(move |n, _| {
        at.lock().unwrap().push(Instant::now());
        (if n <= 2 { 403 } else { 200 }, String::new(), NO_DELAY)
    });
    let wait = Duration::from_millis(300);
    let mut with_retry = options(&receiver.url, None);
    with_retry.refused_retry = Some(wait);
    let shipper = Shipper::start(store.path(), with_retry).unwrap();

    until("the first refusal recorded", || {
        store.reader().ship_status().unwrap().last_error.is_some()
    });
    let refused = store.reader().ship_status().unwrap();
    let error = refused.last_error.unwrap();
    assert!(
        error.contains("403") && error.contains("offered again"),
        "{error}"
    );
    assert!(
        !shipper.finished(),
        "a refusal with a retry wait keeps shipping alive"
    );
    until("the round acknowledged", || {
        store.reader().ship_status().unwrap().backlog == 0
    });
    drop(shipper);
    let times = times.lock().unwrap().clone();
    assert_eq!(times.len(), 3, "two refusals and the acceptance, no more");
    for pair in times.windows(2) {
        // The outage backoff here is 5-40 ms: a refusal waits its own, longer time.
        assert!(pair[1] - pair[0] >= wait, "{:?}", pair[1] - pair[0]);
    }
    let seen = receiver.seen();
    assert_eq!(trace_ids(&seen[2]), vec![id.replace('-', "")]);
    assert_eq!(store.reader().ship_status().unwrap().last_error, None);
}

#[test]
fn a_partial_success_moves_the_mark_and_says_what_the_receiver_dropped() {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceResponse,
    };
    let (_dir, store) = store();
    round(&store, "a");
    round(&store, "b");
    let answer = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: 3,
            error_message: "spans older than the retention window".into(),
        }),
    }
    .encode_to_vec();
    // The protobuf of a small varint and ASCII text is valid UTF-8.
    let body = String::from_utf8(answer).unwrap();
    let receiver = Server::start(move |_, _| (200, body.clone(), NO_DELAY));
    let shipper = Shipper::start(store.path(), options(&receiver.url, None)).unwrap();
    until("the batch acknowledged", || {
        store.reader().ship_status().unwrap().backlog == 0
    });
    drop(shipper);
    assert_eq!(
        receiver.seen().len(),
        1,
        "a partial success is not sent again"
    );
    let status = store.reader().ship_status().unwrap();
    assert_eq!(status.rounds_acked, 2);
    let note = status.last_error.unwrap_or_default();
    assert!(
        note.contains("dropped 3 spans") && note.contains("retention window"),
        "{note}"
    );
}

#[test]
fn a_restart_resumes_from_the_marks_without_resending() {
    let (_dir, store) = store();
    let first = round(&store, "a");
    let receiver = Server::start(|_, _| (200, String::new(), NO_DELAY));
    let shipper = Shipper::start(store.path(), options(&receiver.url, None)).unwrap();
    until("the first round", || {
        store.reader().ship_status().unwrap().backlog == 0
    });
    drop(shipper);
    let second = round(&store, "a");
    let shipper = Shipper::start(store.path(), options(&receiver.url, None)).unwrap();
    until("the second round", || {
        store.reader().ship_status().unwrap().rounds_acked == 2
    });
    drop(shipper);
    let got: Vec<String> = receiver.seen().iter().flat_map(trace_ids).collect();
    assert_eq!(got, vec![first.replace('-', ""), second.replace('-', "")]);
}

/// Log lines written by a test's subscriber.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = LogBuffer;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
