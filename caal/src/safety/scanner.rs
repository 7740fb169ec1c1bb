//! The secret scanner: one pass over the text with an Aho–Corasick prefilter
//! over every detector's anchor (a prefix like `ghp_`, a keyword like
//! `password`); each anchor hit is checked by its detector's pattern in a
//! bounded window starting there, never by rescanning the text per pattern.
//! Then one pass over long token-like runs finds high-entropy strings, with
//! guards for what only looks random: UUIDs, hex digests and commit ids,
//! ULIDs, and this project's own ids, hashes and `secret_ref` tokens.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use std::sync::OnceLock;

use regex::Regex;
use serde::Serialize;

/// One secret found: its kind and byte offsets (never its value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: &'static str,
    pub start: usize,
    pub end: usize,
}

struct Detector {
    kind: &'static str,
    anchors: &'static [&'static str],
    /// Anchored at the hit (`^`); the secret is capture group 1 if present, else the whole match.
    pattern: &'static str,
    /// How far past the hit the pattern may reach.
    window: usize,
}

/// The built-in detectors, most specific first where anchors are shared.
const DETECTORS: &[Detector] = &[
    Detector {
        kind: "pem_private_key",
        anchors: &["-----BEGIN"],
        pattern: r"^-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        window: 16 * 1024,
    },
    Detector {
        kind: "aws_access_key_id",
        anchors: &["AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"^(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        window: 24,
    },
    Detector {
        kind: "aws_secret_access_key",
        anchors: &["aws_secret_access_key", "aws_secret_key", "secretaccesskey"],
        pattern: r#"(?i)^[a-z_]+["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})\b"#,
        window: 120,
    },
    Detector {
        kind: "google_api_key",
        anchors: &["AIza"],
        pattern: r"^AIza[0-9A-Za-z_-]{35}",
        window: 40,
    },
    Detector {
        kind: "google_oauth_token",
        anchors: &["ya29."],
        pattern: r"^ya29\.[0-9A-Za-z_-]{20,}",
        window: 512,
    },
    Detector {
        kind: "azure_storage_key",
        anchors: &["AccountKey="],
        pattern: r"^AccountKey=([A-Za-z0-9+/=]{40,})",
        window: 200,
    },
    Detector {
        kind: "github_pat",
        anchors: &["github_pat_"],
        pattern: r"^github_pat_[A-Za-z0-9_]{22,}",
        window: 128,
    },
    Detector {
        kind: "github_token",
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        pattern: r"^gh[pousr]_[A-Za-z0-9]{36,}",
        window: 64,
    },
    Detector {
        kind: "gitlab_token",
        anchors: &["glpat-"],
        pattern: r"^glpat-[A-Za-z0-9_-]{20,}",
        window: 64,
    },
    Detector {
        kind: "npm_token",
        anchors: &["npm_"],
        pattern: r"^npm_[A-Za-z0-9]{36}",
        window: 48,
    },
    Detector {
        kind: "pypi_token",
        anchors: &["pypi-AgEIcHlwaS5vcmc"],
        pattern: r"^pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        window: 512,
    },
    Detector {
        kind: "slack_webhook",
        anchors: &["hooks.slack.com/services/"],
        pattern: r"^hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]{16,}",
        window: 160,
    },
    Detector {
        kind: "slack_token",
        anchors: &["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"],
        pattern: r"^xox[bparse]-[A-Za-z0-9-]{10,}",
        window: 256,
    },
    Detector {
        kind: "slack_app_token",
        anchors: &["xapp-"],
        pattern: r"^xapp-\d-[A-Za-z0-9]+-\d+-[A-Za-z0-9]+",
        window: 256,
    },
    Detector {
        kind: "discord_webhook",
        anchors: &["discord.com/api/webhooks/", "discordapp.com/api/webhooks/"],
        pattern: r"^discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
        window: 200,
    },
    Detector {
        kind: "stripe_key",
        anchors: &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
        pattern: r"^[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
        window: 160,
    },
    Detector {
        kind: "stripe_webhook_secret",
        anchors: &["whsec_"],
        pattern: r"^whsec_[A-Za-z0-9]{24,}",
        window: 96,
    },
    Detector {
        kind: "anthropic_key",
        anchors: &["sk-ant-"],
        pattern: r"^sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{32,}",
        window: 256,
    },
    Detector {
        kind: "openai_key",
        anchors: &["sk-"],
        pattern: r"^sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}",
        window: 256,
    },
    Detector {
        kind: "huggingface_token",
        anchors: &["hf_"],
        pattern: r"^hf_[A-Za-z0-9]{30,}",
        window: 64,
    },
    Detector {
        kind: "groq_key",
        anchors: &["gsk_"],
        pattern: r"^gsk_[A-Za-z0-9]{40,}",
        window: 96,
    },
    Detector {
        kind: "replicate_token",
        anchors: &["r8_"],
        pattern: r"^r8_[A-Za-z0-9]{30,}",
        window: 64,
    },
    Detector {
        kind: "perplexity_key",
        anchors: &["pplx-"],
        pattern: r"^pplx-[A-Za-z0-9]{40,}",
        window: 96,
    },
    Detector {
        kind: "xai_key",
        anchors: &["xai-"],
        pattern: r"^xai-[A-Za-z0-9]{60,}",
        window: 128,
    },
    Detector {
        kind: "sendgrid_key",
        anchors: &["SG."],
        pattern: r"^SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        window: 80,
    },
    Detector {
        kind: "twilio_api_key",
        anchors: &["SK"],
        pattern: r"^SK[0-9a-fA-F]{32}\b",
        window: 36,
    },
    Detector {
        kind: "mailgun_key",
        anchors: &["key-"],
        pattern: r"^key-[0-9a-zA-Z]{32}\b",
        window: 40,
    },
    Detector {
        kind: "digitalocean_token",
        anchors: &["dop_v1_", "doo_v1_", "dor_v1_"],
        pattern: r"^do[opr]_v1_[a-f0-9]{64}",
        window: 72,
    },
    Detector {
        kind: "shopify_token",
        anchors: &["shpat_", "shpca_", "shppa_", "shpss_"],
        pattern: r"^shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        window: 40,
    },
    Detector {
        kind: "jwt",
        anchors: &["eyJ"],
        pattern: r"^eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        window: 8 * 1024,
    },
    Detector {
        kind: "bearer_token",
        anchors: &["bearer "],
        pattern: r"(?i)^bearer\s+([A-Za-z0-9._~+/-]{16,}=*)",
        window: 4 * 1024,
    },
    Detector {
        kind: "url_password",
        anchors: &["://"],
        pattern: r"^://[^\s:/@?#]{1,128}:([^\s@/?#]{3,256})@",
        window: 400,
    },
    Detector {
        kind: "password_assignment",
        anchors: &["password", "passwd", "pwd", "passphrase"],
        pattern: r#"(?i)^(?:password|passwd|pwd|passphrase)["']?\s*(?:[:=]|\bis\b)\s*["']?([^\s"',;]{6,})"#,
        window: 300,
    },
    Detector {
        kind: "api_key_assignment",
        anchors: &[
            "api_key",
            "apikey",
            "api-key",
            "access_key",
            "secret_key",
            "client_secret",
            "private_key",
        ],
        pattern: r#"(?i)^(?:api[_-]?key|access_key|secret_key|client_secret|private_key)["']?\s*[:=]\s*["']?([^\s"',;]{8,})"#,
        window: 300,
    },
    Detector {
        kind: "token_assignment",
        anchors: &["token", "secret"],
        pattern: r#"(?i)^(?:[a-z_]*token|secret)["']?\s*[:=]\s*["']?([^\s"',;]{8,})"#,
        window: 300,
    },
];

/// What a `secret_ref` token looks like; the scanner leaves these alone.
pub const REF_PREFIX: &str = "secret_ref:";

pub struct Scanner {
    prefilter: AhoCorasick,
    /// For each anchor (by pattern id): the detectors to try there, most
    /// specific first: its own, then those whose anchor is a prefix of it.
    anchors: Vec<Vec<usize>>,
    ref_id: usize,
    /// Compiled on first use: most texts never wake most detectors, and a
    /// short-lived process should not pay for all of them.
    patterns: Vec<OnceLock<Regex>>,
    /// Shortest token run the entropy detector looks at.
    pub entropy_min_len: usize,
    /// Least Shannon entropy, in bits per character, of a run it reports.
    pub entropy_min_bits: f64,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    pub fn new() -> Self {
        let mut anchor_texts: Vec<&str> = Vec::new();
        for detector in DETECTORS {
            for anchor in detector.anchors {
                if !anchor_texts.iter().any(|a| a.eq_ignore_ascii_case(anchor)) {
                    anchor_texts.push(anchor);
                }
            }
        }
        // The search is leftmost-longest and does not overlap, so an anchor
        // also stands for every shorter anchor it begins with.
        let anchors: Vec<Vec<usize>> = anchor_texts
            .iter()
            .map(|hit| {
                (0..DETECTORS.len())
                    .filter(|d| {
                        DETECTORS[*d]
                            .anchors
                            .iter()
                            .any(|a| hit.len() >= a.len() && hit[..a.len()].eq_ignore_ascii_case(a))
                    })
                    .collect()
            })
            .collect();
        let ref_id = anchor_texts.len();
        anchor_texts.push(REF_PREFIX);
        // Built-in detectors and anchors are part of the build; tests compile them all.
        let prefilter = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::DFA))
            .prefilter(false)
            .build(&anchor_texts)
            .expect("the built-in anchors build an automaton");
        let patterns = DETECTORS.iter().map(|_| OnceLock::new()).collect();
        Self {
            prefilter,
            anchors,
            ref_id,
            patterns,
            entropy_min_len: 24,
            entropy_min_bits: 3.9,
        }
    }

    fn pattern(&self, d: usize) -> &Regex {
        // The built-in patterns are part of the build; a test compiles every one.
        self.patterns[d]
            .get_or_init(|| Regex::new(DETECTORS[d].pattern).expect("built-in detector compiles"))
    }

    /// How many credential formats are detected (the entropy detector aside).
    pub fn kinds() -> Vec<&'static str> {
        DETECTORS.iter().map(|d| d.kind).collect()
    }

    /// Every secret in `text`, in order, without overlaps.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let bytes = text.as_bytes();
        // (finding, detector index): equal spans go to the more specific, earlier detector.
        let mut found: Vec<(Finding, usize)> = Vec::new();
        let mut protected: Vec<(usize, usize)> = Vec::new();
        for hit in self.prefilter.find_iter(text) {
            let id = hit.pattern().as_usize();
            if id == self.ref_id {
                protected.push((hit.start(), ref_end(bytes, hit.start())));
                continue;
            }
            for &d in &self.anchors[id] {
                if let Some(finding) = self.try_detector(text, hit.start(), d) {
                    found.push((finding, d));
                    break;
                }
            }
        }
        if found.is_empty() && protected.is_empty() {
            let mut merged = Vec::new();
            self.entropy_pass(text, &mut merged, &protected);
            return merged;
        }
        found.sort_by_key(|(f, d)| (f.start, std::cmp::Reverse(f.end), *d));
        let mut merged: Vec<Finding> = Vec::with_capacity(found.len());
        let mut pi = 0;
        for (f, _) in found {
            while pi < protected.len() && protected[pi].1 <= f.start {
                pi += 1;
            }
            if pi < protected.len() && protected[pi].0 < f.end {
                continue;
            }
            match merged.last_mut() {
                // Overlapping candidates become one finding, named after the larger.
                Some(last) if f.start < last.end => {
                    if f.end - f.start > last.end - last.start {
                        last.kind = f.kind;
                    }
                    last.end = last.end.max(f.end);
                }
                _ => merged.push(f),
            }
        }
        self.entropy_pass(text, &mut merged, &protected);
        merged
    }

    /// Detector `d` at an anchor hit: the secret it finds there, if any.
    fn try_detector(&self, text: &str, at: usize, d: usize) -> Option<Finding> {
        let bytes = text.as_bytes();
        // Keywords may sit inside a longer word (`auth_token`); a prefix
        // anchor must begin a token (`xsk-…` is not `sk-…`).
        if starts_a_token(DETECTORS[d].kind) && at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
            return None;
        }
        let end = floor_boundary(text, (at + DETECTORS[d].window).min(text.len()));
        let window = &text[at..end];
        // A plain find runs on the lazy DFA; captures only where the secret is a group.
        let pattern = self.pattern(d);
        let (start, end) = if pattern.captures_len() > 1 {
            let m = pattern.captures(window)?.get(1)?;
            (at + m.start(), at + m.end())
        } else {
            let m = pattern.find(window)?;
            (at + m.start(), at + m.end())
        };
        if text[start..end].starts_with(REF_PREFIX) {
            return None;
        }
        Some(Finding {
            kind: DETECTORS[d].kind,
            start,
            end,
        })
    }

    fn entropy_pass(&self, text: &str, found: &mut Vec<Finding>, protected: &[(usize, usize)]) {
        let bytes = text.as_bytes();
        let mut extra = Vec::new();
        // Runs come in order, as do findings and protected spans (both sorted
        // by start): cursors keep the overlap checks linear.
        let (mut fi, mut pi) = (0, 0);
        let overlaps = |spans: &[(usize, usize)], cursor: &mut usize, s: usize, e: usize| {
            while *cursor < spans.len() && spans[*cursor].1 <= s {
                *cursor += 1;
            }
            *cursor < spans.len() && spans[*cursor].0 < e
        };
        let found_spans: Vec<(usize, usize)> = found.iter().map(|f| (f.start, f.end)).collect();
        // Only runs of at least `min` token bytes matter, so probe the byte
        // `min - 1` ahead: if it is not a token byte, no such run can hold it,
        // and the search jumps past it. Prose costs about one probe per `min`
        // bytes. Invariant: the byte before `i` is not a token byte.
        let min = self.entropy_min_len.max(1);
        let mut i = 0;
        while i + min <= bytes.len() {
            let probe = i + min - 1;
            if !is_token_byte(bytes[probe]) {
                i = probe + 1;
                continue;
            }
            let mut start = probe;
            while start > i && is_token_byte(bytes[start - 1]) {
                start -= 1;
            }
            let mut end = probe + 1;
            while end < bytes.len() && is_token_byte(bytes[end]) {
                end += 1;
            }
            i = end + 1;
            if end - start < min {
                continue;
            }
            let (s, e) = trim_run(bytes, start, end);
            // Cheapest test first: hex digests, UUIDs, ULIDs and most paths
            // have at most two of lower case, upper case and digits.
            let run = &bytes[s..e];
            if e - s < self.entropy_min_len
                || overlaps(&found_spans, &mut fi, s, e)
                || overlaps(protected, &mut pi, s, e)
                || classes(run) < 3
                || shannon_bits(run) < self.entropy_min_bits
                || looks_like_an_id(&text[s..e])
            {
                continue;
            }
            extra.push(Finding {
                kind: "high_entropy",
                start: s,
                end: e,
            });
        }
        if !extra.is_empty() {
            found.extend(extra);
            found.sort_by_key(|f| f.start);
        }
    }
}

/// Whether a detector's anchor must begin a token (`sk-…`, not `xsk-…`).
/// Keywords and anchors inside URLs and connection strings need not.
fn starts_a_token(kind: &str) -> bool {
    !matches!(
        kind,
        "url_password"
            | "slack_webhook"
            | "discord_webhook"
            | "azure_storage_key"
            | "aws_secret_access_key"
            | "password_assignment"
            | "api_key_assignment"
            | "token_assignment"
    )
}

/// Characters of base64, base64url and most token alphabets.
const TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/' | b'=');
        i += 1;
    }
    t
};

fn is_token_byte(b: u8) -> bool {
    TOKEN[usize::from(b)]
}

/// A run without the separators it may begin or end with (`/path/`, `--flag`).
fn trim_run(bytes: &[u8], mut s: usize, mut e: usize) -> (usize, usize) {
    while s < e && matches!(bytes[s], b'-' | b'/' | b'+' | b'=' | b'_') {
        s += 1;
    }
    while e > s && matches!(bytes[e - 1], b'-' | b'/' | b'+' | b'_') {
        e -= 1;
    }
    (s, e)
}

fn ref_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + REF_PREFIX.len();
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b':')) {
        i += 1;
    }
    i
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn classes(run: &[u8]) -> u8 {
    let mut seen = 0u8;
    for b in run {
        seen |= match b {
            b'a'..=b'z' => 1,
            b'A'..=b'Z' => 2,
            b'0'..=b'9' => 4,
            _ => 0,
        };
        if seen == 7 {
            break;
        }
    }
    seen.count_ones() as u8
}

fn shannon_bits(run: &[u8]) -> f64 {
    // Token bytes are ASCII.
    let mut counts = [0u32; 128];
    for b in run {
        counts[usize::from(*b & 0x7f)] += 1;
    }
    let n = run.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| f64::from(*c) / n)
        .map(|p| -p * p.log2())
        .sum()
}

/// Random-looking but not secret: UUIDs, hex digests and commit ids, ULIDs,
/// this project's ids (`lib-<uuid>`, `bucket:`...), paths of plain words.
fn looks_like_an_id(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |x: &[u8]| x.iter().all(u8::is_ascii_hexdigit);
    let uuid = |x: &[u8]| {
        x.len() == 36
            && x.iter().enumerate().all(|(i, c)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    *c == b'-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
    };
    if hex(b) || uuid(b) {
        return true;
    }
    // A UUID with a short prefix, like lib-<uuid> or call-<uuid>.
    if b.len() > 36 && uuid(&b[b.len() - 36..]) && b[b.len() - 37] == b'-' {
        return true;
    }
    // ULID: 26 characters of Crockford base32, upper case.
    if b.len() == 26
        && b.iter()
            .all(|c| c.is_ascii_digit() || (c.is_ascii_uppercase() && !b"ILOU".contains(c)))
    {
        return true;
    }
    // Paths and dashed identifiers made of plain words: no segment is random
    // (a short mixed segment is a name part, as in SmolLM2-135M-Instruct.Q4_1).
    let mut segments = 0;
    for seg in b
        .split(|c| matches!(c, b'/' | b'-' | b'_' | b'.' | b'='))
        .filter(|s| !s.is_empty())
    {
        if seg.len() > 12 || (classes(seg) > 2 && seg.len() > 8) {
            return false;
        }
        segments += 1;
    }
    segments >= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<&'static str> {
        Scanner::new()
            .scan(text)
            .into_iter()
            .map(|f| f.kind)
            .collect()
    }

    #[test]
    fn at_least_twenty_five_formats_and_each_compiles() {
        assert!(Scanner::kinds().len() >= 25, "{}", Scanner::kinds().len());
        let scanner = Scanner::new();
        for d in 0..DETECTORS.len() {
            let _ = scanner.pattern(d);
        }
    }

    #[test]
    fn finds_secrets_by_their_shape_and_reports_offsets_not_values() {
        let key = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
        let text = format!("my token is {key} ok");
        let found = Scanner::new().scan(&text);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].kind, &text[found[0].start..found[0].end]),
            ("github_token", key)
        );
        assert_eq!(
            kinds("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"),
            ["aws_access_key_id"]
        );
        assert_eq!(
            kinds("postgres://app:hunter2pass@db.local:5432/app"),
            ["url_password"]
        );
        assert_eq!(
            kinds("password = \"correct horse\""),
            ["password_assignment"]
        );
        assert_eq!(
            kinds("Authorization: Bearer abcdefghijklmnop1234567890"),
            ["bearer_token"]
        );
        assert_eq!(
            kinds("sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"),
            ["anthropic_key"]
        );
    }

    #[test]
    fn leaves_ids_digests_and_prose_alone() {
        for clean in [
            "turn on the kitchen lights",
            "commit 3f786850e387550fdab836ed7e6dc881de23001b merged",
            "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
            "round 01a20076-ea08-7320-9af4-87dd5170f04e and lib-01a20076-e9fb-728b-9543-4c6126316e8c",
            "ulid 01ARZ3NDEKTSV4RRFFQ69G5FAV here",
            "/usr/local/share/caal-config/default-profile",
            "the password was changed yesterday",
            "ask for a token of appreciation",
            "secret_ref:github_token:0a1b2c3d4e5f",
        ] {
            assert!(kinds(clean).is_empty(), "{clean}: {:?}", kinds(clean));
        }
    }

    #[test]
    fn model_and_file_names_are_not_secrets() {
        for name in [
            "model=SmolLM2-135M-Instruct.Q4_1",
            "/root/.local/share/caal/models/SmolLM2-135M-Instruct.Q4_1.gguf",
            "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
        ] {
            assert_eq!(kinds(name), Vec::<&str>::new(), "{name}");
        }
    }

    #[test]
    fn entropy_catches_unprefixed_random_keys() {
        assert_eq!(
            kinds("key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY used"),
            ["high_entropy"]
        );
    }
}
