//! `caal serve`: the HTTP API, the live event stream and the page, until
//! Ctrl-C or SIGTERM; timers ring from here.

use std::{io::IsTerminal, path::Path};

use anyhow::{Context, Result, bail};
use caal::config::Config;

use crate::{
    engine::{Start, open_engine},
    remote,
};

pub fn serve(
    data_dir: &Path,
    config: Config,
    bind: &str,
    (wyoming, ship): (Option<&str>, Option<&str>),
) -> Result<()> {
    let addr: std::net::SocketAddr = bind
        .parse()
        .with_context(|| format!("--bind {bind:?} is not host:port; use e.g. 127.0.0.1:8377"))?;
    let wyoming: Option<std::net::SocketAddr> = wyoming
        .map(|w| {
            w.parse().with_context(|| {
                format!("--wyoming {w:?} is not host:port; use e.g. 127.0.0.1:10300")
            })
        })
        .transpose()?;
    let explicit = std::env::var("CAAL_API_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty());
    if !addr.ip().is_loopback() && explicit.is_none() {
        bail!(
            "refusing to listen on {addr} without a configured token: set CAAL_API_TOKEN to a long random value, or bind 127.0.0.1"
        );
    }
    let env = |k: &str| std::env::var(k).ok();
    if let Some(url) = ship {
        caal::config::check_ship_url(url).map_err(|p| anyhow::anyhow!("--ship: {p}"))?;
    }
    let shipping = caal::export::ship::ShipOptions::resolve(&config.ship, ship, &env)?;
    let admission = caal::server::protocols::wyoming::Admission::new(&config.doors.wyoming, &env);
    if let Some(w) = wyoming {
        admission
            .check_bind(w, &config.doors.wyoming.token_env)
            .map_err(anyhow::Error::msg)?;
    }
    caal::safety::logging::init(&std::env::var("CAAL_LOG").unwrap_or_else(|_| "info".into()));
    // Room for the connections the doors may hold, beside the process's own files.
    caal::server::raise_descriptor_limit();
    let engine = open_engine(data_dir, config, Start::Warm)?;
    let token = caal::server::auth::load_or_create(data_dir, explicit.as_deref())?;
    // Timers and reminders ring from here; what came due while CAAL was
    // stopped rings at once, saying how late it is.
    let _scheduler = engine.start_scheduler()?;
    // Ended rounds go to the receiver from a thread of their own; stopped
    // (after the request in flight) when the service stops.
    let endpoint = shipping
        .as_ref()
        .map(|o| caal::export::ship::traces_endpoint(&o.url));
    let _shipper = shipping
        .map(|o| caal::export::ship::Shipper::start(engine.store().path(), o))
        .transpose()?;
    if let Some(e) = &endpoint {
        eprintln!(
            "caal serve: shipping ended rounds to {e} (`caal ship status` shows the backlog)"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}; is another caal serve running? choose another with --bind"))?;
        let local = listener.local_addr()?;
        let state = caal::server::AppState::new(engine, token.clone()).with_shipping(endpoint);
        if let Some(w) = wyoming {
            let door = tokio::net::TcpListener::bind(w)
                .await
                .with_context(|| format!("cannot listen for Wyoming on {w}; choose another with --wyoming"))?;
            let at = door.local_addr()?;
            eprintln!("caal serve: Wyoming on tcp://{at} (Home Assistant: add the Wyoming Protocol integration with this host and port; its address must be in [doors.wyoming] allow unless it runs on this machine)");
            tokio::spawn(caal::server::protocols::wyoming::serve(door, state.clone(), admission));
        }
        // Said before the address is printed: whoever reads it can reach the service.
        let _announced = remote::announce(data_dir, &format!("http://{local}"))?;
        let token_file = data_dir.join(caal::server::auth::TOKEN_FILE);
        if std::io::stderr().is_terminal() {
            // A person at a terminal gets the page's address ready to open; the
            // token rides in the fragment, which browsers never send to a server.
            eprintln!(
                "caal serve: listening on http://{local}/\n  the page:  http://{local}/#token={token}\n  the voice: http://{local}/voice#token={token}\n  (the API token is kept in {})",
                token_file.display()
            );
        } else {
            // A log keeps no secrets: the token stays in its file.
            eprintln!(
                "caal serve: listening on http://{local}/ (API token in {}; open the page with #token=TOKEN, or it asks once; http://{local}/voice talks through the microphone)",
                token_file.display()
            );
        }
        caal::server::serve(listener, state, shutdown_signal()).await?;
        eprintln!("caal serve: stopped; every finished round is stored");
        Ok::<(), anyhow::Error>(())
    })
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
