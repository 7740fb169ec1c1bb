//! One POST of a batch to the receiver, and what its answer means: 2xx is
//! an acknowledgement; 429, 408, 5xx and a connection that failed are worth
//! another try (after `Retry-After` when the receiver gives one); any other
//! 4xx is permanent (a wrong URL, a refused credential, a body it cannot
//! read): sending the same again cannot succeed, so it is reported instead.

use std::{fmt, time::Duration};

use ureq::Agent;

/// The header and value a receiver wants (a bearer token, an API key),
/// from the environment or a file. Its `Debug` hides the value, and the
/// value goes nowhere but that header: never a log, a status or the trace.
#[derive(Clone)]
pub struct Credential {
    pub header: String,
    value: String,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("header", &self.header)
            .field("value", &"[redacted]")
            .finish()
    }
}

impl Credential {
    pub fn new(header: &str, value: &str) -> Self {
        Self {
            header: header.to_owned(),
            value: value.trim().to_owned(),
        }
    }

    /// The value, to compare in tests and to scrub from what is written.
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// What a receiver made of a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Sent {
    /// 2xx: the batch is the receiver's. It may still say it dropped some
    /// spans (an OTLP partial success): sending them again would not help.
    Acked { rejected: Option<(i64, String)> },
    /// Try again, after `after` if the receiver said when.
    Retry {
        reason: String,
        after: Option<Duration>,
    },
    /// Sending it again cannot succeed.
    Refused { reason: String },
}

/// An OTLP/HTTP traces endpoint.
pub struct Receiver {
    agent: Agent,
    endpoint: String,
    credential: Option<Credential>,
}

/// The traces endpoint of a receiver's base URL, as OTLP exporters read
/// `OTEL_EXPORTER_OTLP_ENDPOINT`: `{url}/v1/traces`, unless the URL names it.
pub fn traces_endpoint(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.ends_with("/v1/traces") {
        url.to_owned()
    } else {
        format!("{url}/v1/traces")
    }
}

impl Receiver {
    /// Over https, rustls trusting `trust` (the system's certificates, or
    /// a CA file's: `ShipOptions::resolve`).
    pub fn new(
        url: &str,
        timeout: Duration,
        credential: Option<Credential>,
        trust: &crate::tls::Trust,
    ) -> Self {
        let agent = Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .tls_config(trust.ureq())
            .build()
            .into();
        Self {
            agent,
            endpoint: traces_endpoint(url),
            credential,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `sent` with the credential's value cut out of its reason, should a
    /// receiver quote the header back: the reason is logged and kept.
    fn unquoted(&self, sent: Sent) -> Sent {
        let Some(c) = self.credential.as_ref().filter(|c| !c.value.is_empty()) else {
            return sent;
        };
        let cut = |reason: String| reason.replace(&c.value, "[credential]");
        match sent {
            Sent::Retry { reason, after } => Sent::Retry {
                reason: cut(reason),
                after,
            },
            Sent::Refused { reason } => Sent::Refused {
                reason: cut(reason),
            },
            acked => acked,
        }
    }

    /// POSTs one gzip-compressed `ExportTraceServiceRequest`.
    pub fn send(&self, body: &[u8]) -> Sent {
        let mut request = self
            .agent
            .post(&self.endpoint)
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "gzip");
        if let Some(c) = &self.credential {
            request = request.header(c.header.as_str(), c.value.as_str());
        }
        match request.send(body) {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, jiff::Timestamp::now()));
                // Read to the end, so the connection is reused.
                let answer = response
                    .into_body()
                    .with_config()
                    .limit(1 << 20)
                    .read_to_vec()
                    .unwrap_or_default();
                self.unquoted(classify(status, retry_after, &answer))
            }
            // A certificate nobody trusted is no outage: waiting will not
            // change it. Refused, with the fix named.
            Err(e) => match crate::tls::certificate_problem(&e) {
                Some(problem) => Sent::Refused {
                    reason: format!(
                        "the receiver's certificate is not trusted ({problem}); give its CA as [ship] ca_file (PEM), or give the receiver a certificate the system trusts"
                    ),
                },
                None => Sent::Retry {
                    reason: format!("cannot reach {}: {e}", self.endpoint),
                    after: None,
                },
            },
        }
    }
}

/// The meaning of an HTTP status from an OTLP receiver.
pub fn classify(status: u16, retry_after: Option<Duration>, answer: &[u8]) -> Sent {
    // What the receiver said, when it said it in words (a protobuf `Status` is not quoted).
    let said = || {
        let text = String::from_utf8_lossy(&answer[..answer.len().min(200)]);
        let text = text.trim();
        if text.is_empty() || text.chars().any(char::is_control) {
            String::new()
        } else {
            format!(": {text}")
        }
    };
    match status {
        200..=299 => Sent::Acked {
            rejected: super::wire::rejected(answer),
        },
        408 | 429 | 500..=599 => Sent::Retry {
            reason: format!("the receiver answered {status}{}", said()),
            after: retry_after,
        },
        _ => Sent::Refused {
            reason: format!(
                "the receiver refused the batch with {status}{} (check the URL, the credential and that it accepts OTLP/HTTP protobuf)",
                said()
            ),
        },
    }
}

/// How long `Retry-After` asks to wait: seconds, or an HTTP date.
pub fn retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(value)
        .ok()?;
    let wait = at.duration_since(now);
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

/// The wait before try `attempt` (1 for the first retry): `base` doubled
/// each time up to `max`, of which a random half ("equal jitter", `unit`
/// in [0, 1)), so homes that lost the same receiver do not all come back
/// in the same instant, and none waits less than half its step.
pub fn backoff(attempt: u32, base: Duration, max: Duration, unit: f64) -> Duration {
    let step = base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
        .min(max);
    let half = step / 2;
    half + half.mul_f64(unit.clamp(0.0, 1.0))
}

/// A number in [0, 1) for the jitter.
pub fn jitter_unit() -> f64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(30);

    #[test]
    fn backoff_doubles_up_to_its_ceiling_and_jitters_within_half() {
        let lows: Vec<Duration> = (1..=12).map(|a| backoff(a, BASE, MAX, 0.0)).collect();
        let highs: Vec<Duration> = (1..=12).map(|a| backoff(a, BASE, MAX, 0.999)).collect();
        assert_eq!(lows[0], Duration::from_millis(50));
        assert_eq!(lows[1], Duration::from_millis(100));
        assert_eq!(lows[2], Duration::from_millis(200));
        assert!(lows.windows(2).all(|w| w[0] <= w[1]), "{lows:?}");
        assert_eq!(lows[11], MAX / 2, "capped at the ceiling");
        assert!(highs[11] <= MAX && highs[11] > MAX.mul_f64(0.99));
        for (lo, hi) in lows.iter().zip(&highs) {
            assert!(hi > lo && *hi <= *lo * 2, "{lo:?} {hi:?}");
        }
        // A huge attempt count neither overflows nor passes the ceiling.
        assert!(backoff(u32::MAX, BASE, MAX, 0.5) <= MAX);
        let units: Vec<f64> = (0..100).map(|_| jitter_unit()).collect();
        assert!(units.iter().all(|u| (0.0..1.0).contains(u)));
        assert!(units.iter().any(|u| *u != units[0]), "jitter is random");
    }

    #[test]
    fn statuses_mean_ack_retry_or_refused() {
        assert_eq!(classify(200, None, b""), Sent::Acked { rejected: None });
        assert_eq!(classify(204, None, b""), Sent::Acked { rejected: None });
        let wait = Some(Duration::from_secs(7));
        for status in [429, 503, 502, 504, 500, 408] {
            match classify(status, wait, b"busy") {
                Sent::Retry { after, reason } => {
                    assert_eq!(after, wait);
                    assert!(reason.contains(&status.to_string()), "{reason}");
                }
                other => panic!("{status}: {other:?}"),
            }
        }
        for status in [400, 401, 403, 404, 413, 415] {
            assert!(
                matches!(classify(status, None, b"no"), Sent::Refused { .. }),
                "{status}"
            );
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now: jiff::Timestamp = "2026-11-28T05:00:00Z".parse().unwrap();
        assert_eq!(retry_after("12", now), Some(Duration::from_secs(12)));
        assert_eq!(
            retry_after("Sat, 28 Nov 2026 05:00:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after("Sat, 28 Nov 2026 04:00:00 GMT", now),
            Some(Duration::ZERO),
            "a date passed means now"
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn a_credential_prints_as_redacted() {
        let c = Credential::new("Authorization", "Bearer s3cr3t-value\n");
        assert_eq!(c.value(), "Bearer s3cr3t-value");
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("Authorization"));
    }

    #[test]
    fn the_endpoint_is_the_traces_path_of_the_base_url() {
        assert_eq!(traces_endpoint("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_endpoint("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_endpoint("https://c/otlp/v1/traces"),
            "https://c/otlp/v1/traces"
        );
    }
}
