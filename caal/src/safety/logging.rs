//! Logs that cannot leak: every log line is scrubbed as a whole, after it is
//! formatted and before it is written, so a secret in any field or message
//! (a request path, an error quoting input) never reaches the log.

use std::{
    io::{self, Write},
    sync::{Arc, Mutex},
};

use tracing_subscriber::{EnvFilter, fmt::MakeWriter};

/// Wraps a writer factory so every log line is scrubbed before it is written.
pub struct Scrubbed<M>(pub M);

/// One log line, gathered, then scrubbed and written when dropped.
pub struct ScrubbedLine<W: Write> {
    inner: W,
    line: Vec<u8>,
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Scrubbed<M> {
    type Writer = ScrubbedLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbedLine {
            inner: self.0.make_writer(),
            line: Vec::with_capacity(256),
        }
    }
}

impl<W: Write> Write for ScrubbedLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for ScrubbedLine<W> {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let clean = super::global().scrub(&text);
        let _ = self.inner.write_all(clean.as_bytes());
        let _ = self.inner.flush();
    }
}

/// Installs the process's logger on standard error: scrubbed lines, filtered
/// by `filter` (e.g. `info`, `caal=debug`; from `CAAL_LOG`). A second call is a no-op.
pub fn init(filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false)
        .with_writer(Scrubbed(io::stderr))
        .try_init();
}

/// A log destination in memory, for tests that read what was logged.
#[derive(Clone, Default)]
pub struct MemoryLog(pub Arc<Mutex<Vec<u8>>>);

impl MemoryLog {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

impl Write for MemoryLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for MemoryLog {
    type Writer = MemoryLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_in_any_part_of_a_log_line_is_scrubbed() {
        let memory = MemoryLog::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(Scrubbed(memory.clone()))
            .finish();
        let key = "ghp_Rk2mN8vQ4xT6zB1cD9fH3jL5pS7wY0aE2gU4";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(path = %format!("/api/rounds/{key}"), "request");
            tracing::warn!("could not use {key}");
        });
        let text = memory.text();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(!text.contains(key), "{text}");
        assert!(text.contains("secret_ref:github_token:"), "{text}");
    }
}
