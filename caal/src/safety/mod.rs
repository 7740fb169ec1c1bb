//! Safety: secrets never reach the disk, the logs, the exports or an LLM,
//! and text that tries to take over the assistant is caught.
//!
//! [`Safety::scrub`] replaces every secret the [`Scanner`] finds (and every
//! known secret seeded from the environment) with a `secret_ref:<kind>:<id>`
//! token. The id is an HMAC of the value under a key that lives only in this
//! process: stable for the same value while the process runs, not reversible
//! from anything stored. The vault maps refs back to values in memory only,
//! and [`Safety::resolve_json`] is called at the tool boundary alone, so a
//! tool receives the real value and nothing else ever does.
//!
//! One instance serves the process ([`global`]); the trace store scrubs every
//! event payload through it before anything is stored.

pub mod corpus;
pub mod logging;
mod sanitizer;
mod scanner;

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{OnceLock, RwLock},
};

use aho_corasick::AhoCorasick;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

pub use sanitizer::{Action, Decision, Sanitizer, SanitizerConfig};
pub use scanner::{Finding, REF_PREFIX, Scanner};

/// Known secrets (from the environment or configuration), matched exactly.
struct Known {
    matcher: Option<AhoCorasick>,
    /// (kind, value); kinds are few and live as long as the process.
    values: Vec<(&'static str, String)>,
}

pub struct Safety {
    scanner: Scanner,
    /// HMAC keyed once with this process's random key; cloned per ref.
    mac: Hmac<Sha256>,
    /// Secret values by the 48-bit id in their ref.
    refs: RwLock<RefMap>,
    known: RwLock<Known>,
}

/// The process's one safety layer.
pub fn global() -> &'static Safety {
    static GLOBAL: OnceLock<Safety> = OnceLock::new();
    GLOBAL.get_or_init(Safety::new)
}

impl Default for Safety {
    fn default() -> Self {
        Self::new()
    }
}

impl Safety {
    pub fn new() -> Self {
        let mut key = [0u8; 32];
        // Without randomness the refs would be guessable; refuse to run blind.
        getrandom::fill(&mut key).expect("the operating system provides random bytes");
        Self {
            scanner: Scanner::new(),
            mac: <Hmac<Sha256> as KeyInit>::new_from_slice(&key)
                .expect("HMAC takes a key of any length"),
            refs: RwLock::new(RefMap::default()),
            known: RwLock::new(Known {
                matcher: None,
                values: Vec::new(),
            }),
        }
    }

    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// Adds a secret known by value (a token from the environment): it is
    /// scrubbed wherever it appears, whatever its shape.
    pub fn seed(&self, kind: &str, value: &str) {
        let value = value.trim();
        if value.len() < 6 {
            return;
        }
        let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
        if known.values.iter().any(|(_, v)| v == value) {
            return;
        }
        // Seeded once per secret at start-up: leaking the kind's name is bounded.
        let kind: &'static str = Box::leak(kind.to_owned().into_boxed_str());
        known.values.push((kind, value.to_owned()));
        known.matcher = AhoCorasick::new(known.values.iter().map(|(_, v)| v.as_str())).ok();
    }

    /// Secrets in `text`, in order: known values first, then the scanner's.
    pub fn findings(&self, text: &str) -> Vec<(&'static str, usize, usize)> {
        let mut known_hits: Vec<(&'static str, usize, usize)> = Vec::new();
        {
            let known = self.known.read().unwrap_or_else(|p| p.into_inner());
            if let Some(m) = &known.matcher {
                for hit in m.find_iter(text) {
                    known_hits.push((
                        known.values[hit.pattern().as_usize()].0,
                        hit.start(),
                        hit.end(),
                    ));
                }
            }
        }
        let scanned = self.scanner.scan(text);
        if known_hits.is_empty() {
            return scanned
                .into_iter()
                .map(|f| (f.kind, f.start, f.end))
                .collect();
        }
        let mut out = known_hits.clone();
        for f in scanned {
            if !known_hits
                .iter()
                .any(|(_, s, e)| f.start < *e && *s < f.end)
            {
                out.push((f.kind, f.start, f.end));
            }
        }
        out.sort_by_key(|(_, s, _)| *s);
        out
    }

    /// `text` with every secret replaced by its ref.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.scrub_with(text, |_| {})
    }

    /// The scrubbed text and the kinds replaced, in order.
    pub fn scrub_counted<'a>(&self, text: &'a str) -> (Cow<'a, str>, Vec<&'static str>) {
        let mut kinds = Vec::new();
        let clean = self.scrub_with(text, |kind| kinds.push(kind));
        (clean, kinds)
    }

    /// `text` with every secret replaced by its ref, telling `replaced` each kind.
    fn scrub_with<'a>(&self, text: &'a str, replaced: impl FnMut(&'static str)) -> Cow<'a, str> {
        self.replace_found(text, self.findings(text), replaced)
    }

    /// Reads `input` a window at a time, never more than about a megabyte
    /// and a reach beyond it, and calls `each` with the text that is done
    /// (whole lines), the secrets found in it (offsets within that text,
    /// each whole: one that starts before the cut is read to its end in
    /// the reach, a PEM block's window being the longest) and where that
    /// text starts in the input. Memory stays flat in the input's size; the
    /// findings are those of the whole text read at once unless a secret
    /// is longer than the reach. Input that is not UTF-8 is an error naming
    /// the byte where it stops being so.
    pub fn scan_stream(
        &self,
        mut input: impl std::io::Read,
        mut each: impl FnMut(&str, Vec<(&'static str, usize, usize)>, usize) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        const CHUNK: usize = 1 << 20;
        const REACH: usize = 64 << 10;
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + REACH);
        let mut scratch = vec![0u8; 64 << 10];
        let (mut offset, mut eof) = (0usize, false);
        loop {
            while !eof && buf.len() < CHUNK + REACH {
                let room = (CHUNK + REACH - buf.len()).min(scratch.len());
                match input.read(&mut scratch[..room]) {
                    Ok(n) => {
                        buf.extend_from_slice(&scratch[..n]);
                        eof = n == 0;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if buf.is_empty() {
                return Ok(());
            }
            let valid = match std::str::from_utf8(&buf) {
                Ok(t) => t.len(),
                Err(e) if e.error_len().is_none() && !eof => e.valid_up_to(),
                Err(e) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("not UTF-8 text at byte {}", offset + e.valid_up_to()),
                    ));
                }
            };
            let text = std::str::from_utf8(&buf[..valid]).expect("checked above");
            let cut = if eof {
                valid
            } else {
                let mut limit = CHUNK.min(valid);
                while !text.is_char_boundary(limit) {
                    limit -= 1;
                }
                text[..limit].rfind('\n').map_or(limit, |at| at + 1)
            };
            let mut done = cut;
            let found: Vec<_> = self
                .findings(text)
                .into_iter()
                .filter(|(_, start, _)| *start < cut)
                .inspect(|(_, _, end)| done = done.max(*end))
                .collect();
            each(&text[..done], found, offset)?;
            buf.drain(..done);
            offset += done;
            if eof && buf.is_empty() {
                return Ok(());
            }
        }
    }

    /// `input` scrubbed into `output` a window at a time (`scan_stream`).
    pub fn scrub_stream(
        &self,
        input: impl std::io::Read,
        mut output: impl std::io::Write,
    ) -> std::io::Result<()> {
        self.scan_stream(input, |text, found, _| {
            output.write_all(self.replace_found(text, found, |_| {}).as_bytes())
        })?;
        output.flush()
    }

    /// `text` with `findings` (in order, apart) replaced by their refs.
    fn replace_found<'a>(
        &self,
        text: &'a str,
        findings: Vec<(&'static str, usize, usize)>,
        mut replaced: impl FnMut(&'static str),
    ) -> Cow<'a, str> {
        if findings.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len() + 32 * findings.len());
        let mut at = 0;
        let mut new_refs: Vec<(u64, &str)> = Vec::new();
        {
            let refs = self.refs.read().unwrap_or_else(|p| p.into_inner());
            for (kind, start, end) in findings {
                out.push_str(&text[at..start]);
                let value = &text[start..end];
                let id = self.ref_id(value);
                push_ref(&mut out, kind, id);
                if !refs.contains_key(&id) {
                    new_refs.push((id, value));
                }
                at = end;
                replaced(kind);
            }
        }
        if !new_refs.is_empty() {
            let mut refs = self.refs.write().unwrap_or_else(|p| p.into_inner());
            for (id, value) in new_refs {
                refs.entry(id).or_insert_with(|| value.to_owned());
            }
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// Scrubs every string in a JSON value, in place; returns the kinds replaced.
    pub fn scrub_json(&self, value: &mut Value) -> Vec<&'static str> {
        let mut kinds = Vec::new();
        visit_strings(value, &mut |s| {
            let (clean, found) = self.scrub_counted(s);
            if let Cow::Owned(clean) = clean {
                *s = clean;
                kinds.extend(found);
            }
        });
        kinds
    }

    /// The 48-bit id of a value's ref: an HMAC under this process's key.
    fn ref_id(&self, value: &str) -> u64 {
        let mut mac = self.mac.clone();
        mac.update(value.as_bytes());
        let digest = mac.finalize().into_bytes();
        digest[..6]
            .iter()
            .fold(0u64, |id, b| (id << 8) | u64::from(*b))
    }

    /// Puts the real values back into a tool's inputs; call only at the tool boundary.
    pub fn resolve_json(&self, value: &mut Value) {
        let refs = self.refs.read().unwrap_or_else(|p| p.into_inner());
        if refs.is_empty() {
            return;
        }
        visit_strings(value, &mut |s| {
            if !s.contains(REF_PREFIX) {
                return;
            }
            let mut out = String::with_capacity(s.len());
            let mut rest = s.as_str();
            while let Some(at) = rest.find(REF_PREFIX) {
                out.push_str(&rest[..at]);
                let token = &rest[at..];
                // secret_ref:<kind>:<12 hex>
                let resolved = token[REF_PREFIX.len()..]
                    .split_once(':')
                    .and_then(|(_, tail)| {
                        let hex = tail.get(..12)?;
                        let id = u64::from_str_radix(hex, 16).ok()?;
                        let len = REF_PREFIX.len() + token[REF_PREFIX.len()..].find(':')? + 1 + 12;
                        refs.get(&id).map(|secret| (secret, len))
                    });
                match resolved {
                    Some((secret, len)) => {
                        out.push_str(secret);
                        rest = &token[len..];
                    }
                    None => {
                        out.push_str(REF_PREFIX);
                        rest = &token[REF_PREFIX.len()..];
                    }
                }
            }
            out.push_str(rest);
            *s = out;
        });
    }
}

/// Appends `secret_ref:<kind>:<12 hex digits of id>`.
fn push_ref(out: &mut String, kind: &str, id: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str(REF_PREFIX);
    out.push_str(kind);
    out.push(':');
    for shift in (0..12).rev() {
        out.push(char::from(HEX[((id >> (shift * 4)) & 0xf) as usize]));
    }
}

/// Ref ids are HMAC outputs under a key no one else holds: already uniform
/// and unpredictable, so the map uses them as their own hash.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id;
    }
}

type RefMap = HashMap<u64, String, std::hash::BuildHasherDefault<IdHasher>>;

fn visit_strings(value: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| visit_strings(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| visit_strings(v, f)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
