//! Connections, bounded: how many a door serves at once, how long a peer
//! may take to send a request, and what happens when the process runs out
//! of descriptors. Shared by the HTTP service and the Wyoming door.
//!
//! A door serves at most `cap` connections ([`Slots`]). A newcomer at the
//! cap takes the slot of the connection that has waited longest with no
//! request in flight (headers never finished, a keep-alive left open, a
//! peer that never said who it is), which is closed; with every slot busy,
//! the newcomer is closed on arrival. So a flood of silent connections
//! cannot lock people out, and the process keeps descriptors for its
//! databases and for `/api/health`. Accept errors (out of descriptors) are
//! waited out with growing pauses ([`Backoff`]) and logged once a series,
//! never in a loop.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::Notify;

/// One connection's place: whether it has a request in flight, since
/// when it has been idle, and the signal that closes it.
#[derive(Debug)]
pub(crate) struct Slot {
    busy: AtomicUsize,
    idle_since: Mutex<Instant>,
    evicted: Notify,
}

impl Slot {
    /// A request (or an event) is being served; idle again when the guard drops.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    /// Resolves when a newcomer took this slot: close the connection.
    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await;
    }

    fn idle_for(&self, now: Instant) -> Option<Duration> {
        (self.busy.load(Ordering::SeqCst) == 0).then(|| {
            let since = *self.idle_since.lock().unwrap_or_else(|p| p.into_inner());
            now.saturating_duration_since(since)
        })
    }
}

/// Held while a request is served.
pub(crate) struct Busy(Arc<Slot>);

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The connections one door serves.
#[derive(Debug)]
pub(crate) struct Slots {
    cap: usize,
    held: Mutex<Vec<Arc<Slot>>>,
}

/// A connection's hold on its slot; the slot is free when this drops.
pub(crate) struct Held {
    slots: Arc<Slots>,
    pub(crate) slot: Arc<Slot>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|s| !Arc::ptr_eq(s, &self.slot));
    }
}

/// What became of a newcomer.
pub(crate) enum Admitted {
    /// Served; `evicted` says whether an idle connection gave way to it.
    Yes { held: Held, evicted: bool },
    /// Every slot is busy: closed on arrival.
    Full,
}

impl Slots {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap: cap.max(1),
            held: Mutex::new(Vec::new()),
        })
    }

    /// How many connections hold a slot now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// A slot for a newcomer, if one is free or an idle connection gives
    /// way (the one idle longest).
    pub(crate) fn admit(self: &Arc<Self>) -> Admitted {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut evicted = false;
        if held.len() >= self.cap {
            let now = Instant::now();
            let oldest = held
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.idle_for(now).map(|idle| (i, idle)))
                .max_by_key(|(_, idle)| *idle);
            let Some((i, _)) = oldest else {
                return Admitted::Full;
            };
            let gone = held.swap_remove(i);
            // notify_one keeps the signal if the connection is not waiting yet.
            gone.evicted.notify_one();
            evicted = true;
        }
        let slot = Arc::new(Slot {
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            evicted: Notify::new(),
        });
        held.push(slot.clone());
        Admitted::Yes {
            held: Held {
                slots: self.clone(),
                slot,
            },
            evicted,
        }
    }
}

/// Pauses between failed accepts, growing from 10 ms to a second, and one
/// log line a series (with how many failed), so running out of descriptors
/// neither spins a core nor floods the log.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    pause: Option<Duration>,
    failed: u64,
    said_at: Option<Instant>,
}

impl Backoff {
    /// An accept went through: the next failure starts a new series.
    pub(crate) fn reset(&mut self) {
        if self.failed > 0 {
            tracing::info!(failed = self.failed, "accepting connections again");
        }
        self.pause = None;
        self.failed = 0;
    }

    /// Something worth a warning that can happen in a flood: said at most
    /// every ten seconds.
    pub(crate) fn note(&mut self, what: &str) {
        let now = Instant::now();
        if self
            .said_at
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(10))
        {
            tracing::warn!("{what}");
            self.said_at = Some(now);
        }
    }

    /// An accept failed: say so (once a series), then wait.
    pub(crate) async fn wait(&mut self, what: &str) {
        self.failed += 1;
        self.note(what);
        let pause = self.pause.map_or(Duration::from_millis(10), |p| {
            (p * 2).min(Duration::from_secs(1))
        });
        self.pause = Some(pause);
        tokio::time::sleep(pause).await;
    }
}

/// Descriptors the process keeps for itself (databases, models, logs,
/// the caal-llm pipe) whatever the doors hold.
const RESERVED_DESCRIPTORS: u64 = 128;

/// The process's limit on open descriptors (its soft limit).
pub(crate) fn descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and reads nothing else.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    if ok { limit.rlim_cur } else { 1024 }
}

/// Raises the soft descriptor limit to the hard one (as servers do at
/// start); returns the limit in force.
pub fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as above; setrlimit reads the struct it is given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                ..limit
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    descriptor_limit()
}

/// HTTP connections served at once under a descriptor limit of `limit`,
/// with `wyoming` more for that door: what is left after the process's own,
/// at most 2,048.
pub(crate) fn http_cap(limit: u64, wyoming: usize) -> usize {
    let spare = usize::try_from(limit.saturating_sub(RESERVED_DESCRIPTORS)).unwrap_or(usize::MAX);
    spare.saturating_sub(wyoming).clamp(8, 2_048)
}

/// An accept error that concerns one connection only (it went away
/// first): nothing to wait out.
pub(crate) fn passing(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// One HTTP/1 connection: headers within `HEADER_WITHIN` (an idle
/// keep-alive too), upgrades (the voice socket), closed when a newcomer
/// takes its slot, finished gracefully when the service closes. `_ended`
/// is dropped when it is done.
pub(crate) async fn serve_http(
    stream: tokio::net::TcpStream,
    app: axum::Router,
    held: Held,
    mut closing: tokio::sync::watch::Receiver<bool>,
    _ended: tokio::sync::watch::Receiver<()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt;

    let _ = stream.set_nodelay(true);
    let slot = held.slot.clone();
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let busy = slot.busy();
            let app = app.clone();
            async move {
                let response = app.oneshot(request.map(axum::body::Body::new)).await;
                drop(busy);
                response
            }
        });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(super::HEADER_WITHIN)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let mut connection = std::pin::pin!(connection);
    let mut asked_to_finish = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => break,
            // Dropping the connection closes it.
            () = held.slot.evicted() => break,
            changed = closing.changed(), if !asked_to_finish => {
                asked_to_finish = true;
                if changed.is_err() || *closing.borrow() {
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newcomer_at_the_cap_takes_the_slot_idle_longest_never_a_busy_one() {
        let slots = Slots::new(2);
        let Admitted::Yes { held: first, .. } = slots.admit() else {
            panic!("a free slot")
        };
        std::thread::sleep(Duration::from_millis(5));
        let Admitted::Yes { held: second, .. } = slots.admit() else {
            panic!("a free slot")
        };
        // The first is serving a request: the second, idle, gives way.
        let serving = first.slot.busy();
        let Admitted::Yes {
            held: third,
            evicted,
        } = slots.admit()
        else {
            panic!("an idle slot gives way")
        };
        assert!(evicted);
        assert_eq!(slots.len(), 2);
        // Its connection hears it at once (the signal was kept for it).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), second.slot.evicted())
                .await
                .expect("the evicted connection is told")
        });
        drop(second);
        assert_eq!(
            slots.len(),
            2,
            "dropping an evicted hold frees nothing twice"
        );
        // Both busy: the next is closed on arrival.
        let _also = third.slot.busy();
        assert!(matches!(slots.admit(), Admitted::Full));
        drop(serving);
        assert!(matches!(slots.admit(), Admitted::Yes { evicted: true, .. }));
    }

    #[test]
    fn the_http_cap_leaves_the_process_its_own_descriptors() {
        assert_eq!(http_cap(256, 32), 96);
        assert_eq!(http_cap(20_000, 32), 2_048);
        assert_eq!(http_cap(64, 32), 8, "never below a few");
        assert!(descriptor_limit() > 0);
    }
}
