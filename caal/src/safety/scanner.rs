//! The secret scanner: one pass over the text finds every detector's anchor
//! (a prefix like `ghp_`, a keyword like `password`); each anchor is checked
//! by its detector's shape in a bounded window starting there, never by
//! rescanning the text per pattern. Then one pass over long token-like runs
//! finds high-entropy strings, with guards for what only looks random: UUIDs,
//! hex digests and commit ids, ULIDs, and this project's own ids, hashes and
//! `secret_ref` tokens.
//!
//! The anchor pass is a trigram filter in front of an Aho–Corasick
//! automaton: an automaton walking every byte waits on one dependent table
//! load per byte (about 500 MB/s here), while the filter's lookups are
//! independent of each other, so the processor overlaps them; the automaton
//! then runs anchored only where an anchor's first three bytes could start.
//!
//! Shapes are small sequences of literals and bounded runs of a byte class,
//! matched greedily without backtracking (the formats are built so that
//! none is needed). A regex engine did the same job at 150–1,000 ns per
//! check; a shape takes a few tens.

use aho_corasick::{
    AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, Anchored, Input, MatchKind, StartKind,
};
use serde::Serialize;

/// One secret found: its kind and byte offsets (never its value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: &'static str,
    pub start: usize,
    pub end: usize,
}

/// A set of bytes, as a lookup table.
type Class = [bool; 256];

/// The bytes of `spec`, where `x-y` is a range (a `-` first or last is itself).
const fn class(spec: &[u8]) -> Class {
    let mut t = [false; 256];
    let mut i = 0;
    while i < spec.len() {
        if i + 2 < spec.len() && spec[i + 1] == b'-' {
            let mut c = spec[i];
            while c <= spec[i + 2] {
                t[c as usize] = true;
                c += 1;
            }
            i += 3;
        } else {
            t[spec[i] as usize] = true;
            i += 1;
        }
    }
    t
}

/// Every byte but those of `spec` (non-ASCII bytes included).
const fn except(spec: &[u8]) -> Class {
    let mut t = class(spec);
    let mut i = 0;
    while i < 256 {
        t[i] = !t[i];
        i += 1;
    }
    t
}

static ALNUM: Class = class(b"A-Za-z0-9");
static WORD: Class = class(b"A-Za-z0-9_");
static ALNUM_DASH: Class = class(b"A-Za-z0-9-");
static B64URL: Class = class(b"A-Za-z0-9_-");
static B64: Class = class(b"A-Za-z0-9+/=");
static DIGIT: Class = class(b"0-9");
static HEX: Class = class(b"0-9a-fA-F");
static LOWER_HEX: Class = class(b"0-9a-f");
static UPPER_DIGIT: Class = class(b"A-Z0-9");
static UPPER_DIGIT_SPACE: Class = class(b"A-Z0-9 ");
static NAME: Class = class(b"A-Za-z_");
static SPACE: Class = class(b" \t\n\r\x0b\x0c");
static BEARER: Class = class(b"A-Za-z0-9._~+/-");
static EQUALS: Class = class(b"=");
/// Base64, base64url and most token alphabets.
static TOKEN_BYTES: Class = class(b"A-Za-z0-9_+/=-");
/// A value after `password=`: up to whitespace, a quote, a comma or a semicolon.
static VALUE: Class = except(b" \t\n\r\x0b\x0c\"',;");
static URL_USER: Class = except(b" \t\n\r\x0b\x0c:/@?#");
static URL_PASSWORD: Class = except(b" \t\n\r\x0b\x0c@/?#");
const MAX: usize = usize::MAX;

/// One step of a detector's shape.
enum Part {
    /// One of these literals, exactly.
    Lit(&'static [&'static str]),
    /// One of these literals, in any ASCII case.
    Word(&'static [&'static str]),
    /// At least `min` characters and at most `max` bytes of the class, as
    /// many as there are.
    Run(&'static Class, usize, usize),
    /// The first of these sequences that matches (an empty one always does).
    Alt(&'static [&'static [Part]]),
    /// Bytes of the class, at most `max`, then the literal.
    Until(&'static str, usize, &'static Class),
    /// Anything up to and including the first place the sequence matches,
    /// or everything to the end of the window if it never does.
    Through(&'static [Part]),
    /// A word boundary, as regex's `\b`.
    Boundary,
    /// The secret begins here (else where the shape begins).
    Begin,
    /// The secret ends here (else where the shape ends).
    Finish,
}

use Part::*;

const OPT_QUOTE: Part = Alt(&[&[Lit(&["\"", "'"])], &[]]);
const SPACES: Part = Run(&SPACE, 0, MAX);
/// What joins a key's name to its value: `=`, `: `, `" = "`, `':'`.
const ASSIGNED: Part = Alt(&[&[OPT_QUOTE, SPACES, Lit(&[":", "="]), SPACES, OPT_QUOTE]]);

struct Detector {
    kind: &'static str,
    anchors: &'static [&'static str],
    /// Matched from the anchor's first byte on.
    shape: &'static [Part],
    /// How far past the anchor the shape may reach.
    window: usize,
}

/// The built-in detectors, most specific first where anchors are shared.
static DETECTORS: &[Detector] = &[
    Detector {
        kind: "pem_private_key",
        anchors: &["-----BEGIN"],
        shape: &[
            Lit(&["-----BEGIN "]),
            Until("PRIVATE KEY", 40, &UPPER_DIGIT_SPACE),
            Alt(&[&[Lit(&[" BLOCK"])], &[]]),
            Lit(&["-----"]),
            Through(&[
                Lit(&["-----END "]),
                Until("PRIVATE KEY", 40, &UPPER_DIGIT_SPACE),
                Alt(&[&[Lit(&[" BLOCK"])], &[]]),
                Lit(&["-----"]),
            ]),
        ],
        window: 16 * 1024,
    },
    Detector {
        kind: "aws_access_key_id",
        anchors: &["AKIA", "ASIA", "ABIA", "ACCA"],
        shape: &[
            Lit(&["AKIA", "ASIA", "ABIA", "ACCA"]),
            Run(&UPPER_DIGIT, 16, 16),
            Boundary,
        ],
        window: 24,
    },
    Detector {
        kind: "aws_secret_access_key",
        anchors: &["aws_secret_access_key", "aws_secret_key", "secretaccesskey"],
        shape: &[
            Run(&NAME, 1, MAX),
            ASSIGNED,
            Begin,
            Run(&B64, 40, 40),
            Boundary,
        ],
        window: 120,
    },
    Detector {
        kind: "google_api_key",
        anchors: &["AIza"],
        shape: &[Lit(&["AIza"]), Run(&B64URL, 35, 35)],
        window: 40,
    },
    Detector {
        kind: "google_oauth_token",
        anchors: &["ya29."],
        shape: &[Lit(&["ya29."]), Run(&B64URL, 20, MAX)],
        window: 512,
    },
    Detector {
        kind: "azure_storage_key",
        anchors: &["AccountKey="],
        shape: &[Lit(&["AccountKey="]), Begin, Run(&B64, 40, MAX)],
        window: 200,
    },
    Detector {
        kind: "github_pat",
        anchors: &["github_pat_"],
        shape: &[Lit(&["github_pat_"]), Run(&WORD, 22, MAX)],
        window: 128,
    },
    Detector {
        kind: "github_token",
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        shape: &[
            Lit(&["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
            Run(&ALNUM, 36, MAX),
        ],
        window: 64,
    },
    Detector {
        kind: "gitlab_token",
        anchors: &["glpat-"],
        shape: &[Lit(&["glpat-"]), Run(&B64URL, 20, MAX)],
        window: 64,
    },
    Detector {
        kind: "npm_token",
        anchors: &["npm_"],
        shape: &[Lit(&["npm_"]), Run(&ALNUM, 36, 36)],
        window: 48,
    },
    Detector {
        kind: "pypi_token",
        anchors: &["pypi-AgEIcHlwaS5vcmc"],
        shape: &[Lit(&["pypi-AgEIcHlwaS5vcmc"]), Run(&B64URL, 50, MAX)],
        window: 512,
    },
    Detector {
        kind: "slack_webhook",
        anchors: &["hooks.slack.com/services/"],
        shape: &[
            Lit(&["hooks.slack.com/services/T"]),
            Run(&WORD, 1, MAX),
            Lit(&["/B"]),
            Run(&WORD, 1, MAX),
            Lit(&["/"]),
            Run(&WORD, 16, MAX),
        ],
        window: 160,
    },
    Detector {
        kind: "slack_token",
        anchors: &["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"],
        shape: &[
            Lit(&["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"]),
            Run(&ALNUM_DASH, 10, MAX),
        ],
        window: 256,
    },
    Detector {
        kind: "slack_app_token",
        anchors: &["xapp-"],
        shape: &[
            Lit(&["xapp-"]),
            Run(&DIGIT, 1, 1),
            Lit(&["-"]),
            Run(&ALNUM, 1, MAX),
            Lit(&["-"]),
            Run(&DIGIT, 1, MAX),
            Lit(&["-"]),
            Run(&ALNUM, 1, MAX),
        ],
        window: 256,
    },
    Detector {
        kind: "discord_webhook",
        anchors: &["discord.com/api/webhooks/", "discordapp.com/api/webhooks/"],
        shape: &[
            Lit(&["discord.com/api/webhooks/", "discordapp.com/api/webhooks/"]),
            Run(&DIGIT, 1, MAX),
            Lit(&["/"]),
            Run(&B64URL, 20, MAX),
        ],
        window: 200,
    },
    Detector {
        kind: "stripe_key",
        anchors: &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
        shape: &[
            Lit(&["sk_live_", "sk_test_", "rk_live_", "rk_test_"]),
            Run(&ALNUM, 16, MAX),
        ],
        window: 160,
    },
    Detector {
        kind: "stripe_webhook_secret",
        anchors: &["whsec_"],
        shape: &[Lit(&["whsec_"]), Run(&ALNUM, 24, MAX)],
        window: 96,
    },
    Detector {
        kind: "anthropic_key",
        anchors: &["sk-ant-"],
        shape: &[
            Lit(&["sk-ant-"]),
            Lit(&["api", "admin"]),
            Run(&DIGIT, 2, 2),
            Lit(&["-"]),
            Run(&B64URL, 32, MAX),
        ],
        window: 256,
    },
    Detector {
        kind: "openai_key",
        anchors: &["sk-"],
        // `sk-proj-`, `sk-svcacct-`, `sk-admin-`: the kinds' names are in the class.
        shape: &[Lit(&["sk-"]), Run(&B64URL, 20, MAX)],
        window: 256,
    },
    Detector {
        kind: "huggingface_token",
        anchors: &["hf_"],
        shape: &[Lit(&["hf_"]), Run(&ALNUM, 30, MAX)],
        window: 64,
    },
    Detector {
        kind: "groq_key",
        anchors: &["gsk_"],
        shape: &[Lit(&["gsk_"]), Run(&ALNUM, 40, MAX)],
        window: 96,
    },
    Detector {
        kind: "replicate_token",
        anchors: &["r8_"],
        shape: &[Lit(&["r8_"]), Run(&ALNUM, 30, MAX)],
        window: 64,
    },
    Detector {
        kind: "perplexity_key",
        anchors: &["pplx-"],
        shape: &[Lit(&["pplx-"]), Run(&ALNUM, 40, MAX)],
        window: 96,
    },
    Detector {
        kind: "xai_key",
        anchors: &["xai-"],
        shape: &[Lit(&["xai-"]), Run(&ALNUM, 60, MAX)],
        window: 128,
    },
    Detector {
        kind: "sendgrid_key",
        anchors: &["SG."],
        shape: &[
            Lit(&["SG."]),
            Run(&B64URL, 22, 22),
            Lit(&["."]),
            Run(&B64URL, 43, 43),
        ],
        window: 80,
    },
    Detector {
        kind: "twilio_api_key",
        // Three bytes at least, for the trigram filter: `SK` and a hex digit.
        anchors: &[
            "SK0", "SK1", "SK2", "SK3", "SK4", "SK5", "SK6", "SK7", "SK8", "SK9", "SKa", "SKb",
            "SKc", "SKd", "SKe", "SKf",
        ],
        shape: &[Lit(&["SK"]), Run(&HEX, 32, 32), Boundary],
        window: 36,
    },
    Detector {
        kind: "mailgun_key",
        anchors: &["key-"],
        shape: &[Lit(&["key-"]), Run(&ALNUM, 32, 32), Boundary],
        window: 40,
    },
    Detector {
        kind: "digitalocean_token",
        anchors: &["dop_v1_", "doo_v1_", "dor_v1_"],
        shape: &[
            Lit(&["dop_v1_", "doo_v1_", "dor_v1_"]),
            Run(&LOWER_HEX, 64, 64),
        ],
        window: 72,
    },
    Detector {
        kind: "shopify_token",
        anchors: &["shpat_", "shpca_", "shppa_", "shpss_"],
        shape: &[
            Lit(&["shpat_", "shpca_", "shppa_", "shpss_"]),
            Run(&HEX, 32, 32),
        ],
        window: 40,
    },
    Detector {
        kind: "jwt",
        anchors: &["eyJ"],
        shape: &[
            Lit(&["eyJ"]),
            Run(&B64URL, 8, MAX),
            Lit(&[".eyJ"]),
            Run(&B64URL, 8, MAX),
            Lit(&["."]),
            Run(&B64URL, 8, MAX),
        ],
        window: 8 * 1024,
    },
    Detector {
        kind: "bearer_token",
        anchors: &["bearer "],
        shape: &[
            Word(&["bearer"]),
            Run(&SPACE, 1, MAX),
            Begin,
            Run(&BEARER, 16, MAX),
            Run(&EQUALS, 0, MAX),
        ],
        window: 4 * 1024,
    },
    Detector {
        kind: "url_password",
        anchors: &["://"],
        shape: &[
            Lit(&["://"]),
            Run(&URL_USER, 1, 128),
            Lit(&[":"]),
            Begin,
            Run(&URL_PASSWORD, 3, 256),
            Finish,
            Lit(&["@"]),
        ],
        window: 400,
    },
    Detector {
        kind: "password_assignment",
        anchors: &["password", "passwd", "pwd", "passphrase"],
        shape: &[
            Word(&["passphrase", "password", "passwd", "pwd"]),
            OPT_QUOTE,
            SPACES,
            Alt(&[&[Lit(&[":", "="])], &[Boundary, Word(&["is"]), Boundary]]),
            SPACES,
            OPT_QUOTE,
            Begin,
            Run(&VALUE, 6, MAX),
        ],
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
        shape: &[
            Word(&[
                "api_key",
                "api-key",
                "apikey",
                "access_key",
                "secret_key",
                "client_secret",
                "private_key",
            ]),
            ASSIGNED,
            Begin,
            Run(&VALUE, 8, MAX),
        ],
        window: 300,
    },
    Detector {
        kind: "token_assignment",
        anchors: &["token", "secret"],
        shape: &[
            Word(&["token", "secret"]),
            ASSIGNED,
            Begin,
            Run(&VALUE, 8, MAX),
        ],
        window: 300,
    },
];

/// What one scan has already walked, so that anchors inside one long run
/// (`-eyJ-eyJ…`, a PEM header repeated without an end line) don't each walk
/// it again to their window's edge: the work stays linear in the text.
#[derive(Default)]
struct Walked {
    /// Per class, the last run found: bytes `start..end` are all of the
    /// class, and the byte at `end` is not (or `end` is the text's end).
    runs: [Option<(&'static Class, usize, usize)>; 8],
    /// The last search of a `Through` sequence (only PEM blocks have one).
    through: Option<Search>,
}

/// From `from` on, the first place the sequence matches, if it does
/// anywhere in the text.
type Search = (&'static [Part], usize, Option<(usize, usize)>);

impl Walked {
    /// Where the run of `class` that holds byte `i` ends.
    fn run_end(&mut self, class: &'static Class, text: &[u8], i: usize) -> usize {
        // A detector's classes are few; a slot per class, the first free
        // one for a new class (a ninth shares the last slot).
        let slot = self
            .runs
            .iter()
            .position(|r| r.is_none_or(|(c, _, _)| std::ptr::eq(c, class)))
            .unwrap_or(self.runs.len() - 1);
        if let Some((c, start, end)) = self.runs[slot]
            && std::ptr::eq(c, class)
            && start <= i
            && i < end
        {
            return end;
        }
        let end = text[i..]
            .iter()
            .position(|c| !class[usize::from(*c)])
            .map_or(text.len(), |n| i + n);
        self.runs[slot] = Some((class, i, end));
        end
    }
}

/// Matches a detector's shape in `text[..edge]`, marking where the secret is.
struct Matcher<'a> {
    text: &'a [u8],
    edge: usize,
    marks: [Option<usize>; 2],
    walked: &'a mut Walked,
}

impl Matcher<'_> {
    /// Where `parts` match from `i`: the end.
    fn parts(&mut self, parts: &'static [Part], mut i: usize) -> Option<usize> {
        let (b, edge) = (&self.text[..self.edge], self.edge);
        for part in parts {
            i = match *part {
                Lit(alts) => {
                    i + alts
                        .iter()
                        .find(|a| b[i..].starts_with(a.as_bytes()))?
                        .len()
                }
                Word(alts) => {
                    i + alts
                        .iter()
                        .find(|a| {
                            edge - i >= a.len()
                                && b[i..i + a.len()].eq_ignore_ascii_case(a.as_bytes())
                        })?
                        .len()
                }
                Run(class, min, max) => {
                    let end = self
                        .walked
                        .run_end(class, self.text, i)
                        .min(edge)
                        .min(i.saturating_add(max));
                    // At least `min` characters: UTF-8 continuation bytes don't
                    // count (and 4 bytes hold at least one character).
                    let chars = || {
                        self.text[i..end]
                            .iter()
                            .filter(|c| (**c as i8) >= -0x40)
                            .count()
                    };
                    if end - i < min || (end - i < 4 * min && chars() < min) {
                        return None;
                    }
                    end
                }
                Alt(seqs) => seqs.iter().find_map(|seq| self.parts(seq, i))?,
                Until(lit, max, class) => {
                    let limit = edge.min(i + max + lit.len());
                    let at = b[i..limit]
                        .windows(lit.len())
                        .position(|w| w == lit.as_bytes())?;
                    if !b[i..i + at].iter().all(|c| class[usize::from(*c)]) {
                        return None;
                    }
                    i + at + lit.len()
                }
                Through(seq) => match self.through(seq, i) {
                    Some((_, end)) if end <= edge => end,
                    _ => edge,
                },
                Boundary => {
                    let word = |c: Option<&u8>| c.is_some_and(|c| WORD[usize::from(*c)]);
                    if word(i.checked_sub(1).and_then(|p| b.get(p))) == word(b.get(i)) {
                        return None;
                    }
                    i
                }
                Begin => {
                    self.marks[0] = Some(i);
                    i
                }
                Finish => {
                    self.marks[1] = Some(i);
                    i
                }
            };
        }
        Some(i)
    }

    /// The first place from `i` on, in the whole text, where `seq` matches.
    fn through(&mut self, seq: &'static [Part], i: usize) -> Option<(usize, usize)> {
        if let Some((s, from, found)) = self.walked.through
            && std::ptr::eq(s, seq)
            // The same first match serves every start between `from` and it.
            && from <= i
            && found.is_none_or(|(start, _)| i <= start)
        {
            return found;
        }
        let edge = std::mem::replace(&mut self.edge, self.text.len());
        let found = match seq.first() {
            // A sequence that opens with one literal ("-----END "): only
            // where it is said can the sequence match, found by memmem (a
            // PEM header with no end had every later byte tried, 37% of
            // `caal scan` on source code that quotes such headers).
            Some(Lit([lit])) => {
                let finder = memchr::memmem::Finder::new(lit.as_bytes());
                let mut from = i;
                let mut found = None;
                while let Some(at) = finder.find(&self.text[from..]).map(|at| at + from) {
                    if let Some(end) = self.parts(seq, at) {
                        found = Some((at, end));
                        break;
                    }
                    from = at + 1;
                }
                found
            }
            _ => (i..self.text.len()).find_map(|j| Some((j, self.parts(seq, j)?))),
        };
        self.edge = edge;
        self.walked.through = Some((seq, i, found));
        found
    }
}

/// What a `secret_ref` token looks like; the scanner leaves these alone.
pub const REF_PREFIX: &str = "secret_ref:";

pub struct Scanner {
    /// Where an anchor's first three bytes may begin.
    trigrams: Trigrams,
    /// Every anchor, in any ASCII case, searched anchored where the filter passes.
    automaton: AhoCorasick,
    /// For each anchor (by pattern id): the detectors to try there, most
    /// specific first: its own, then those whose anchor is a prefix of it.
    anchors: Vec<Vec<usize>>,
    ref_id: usize,
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
        // Built-in detectors and anchors are part of the build; tests build them.
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::DFA))
            .start_kind(StartKind::Anchored)
            .build(&anchor_texts)
            .expect("the built-in anchors build an automaton");
        Self {
            trigrams: Trigrams::new(&anchor_texts),
            automaton,
            anchors,
            ref_id,
            entropy_min_len: 24,
            entropy_min_bits: 3.9,
        }
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
        // Made on the first anchor: most texts have none.
        let mut walked: Option<Walked> = None;
        self.each_anchor(text, |id, at| {
            if id == self.ref_id {
                let end = ref_end(bytes, at);
                protected.push((at, end));
                return end;
            }
            for &d in &self.anchors[id] {
                if let Some(finding) =
                    self.try_detector(text, at, d, walked.get_or_insert_default())
                {
                    found.push((finding, d));
                    break;
                }
            }
            at + 1
        });
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

    /// Detector `d` at an anchor: the secret it finds there, if any.
    fn try_detector(
        &self,
        text: &str,
        at: usize,
        d: usize,
        walked: &mut Walked,
    ) -> Option<Finding> {
        let bytes = text.as_bytes();
        // Keywords may sit inside a longer word (`auth_token`); a prefix
        // anchor must begin a token (`xsk-…` is not `sk-…`).
        if starts_a_token(DETECTORS[d].kind) && at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
            return None;
        }
        let edge = floor_boundary(text, at.saturating_add(DETECTORS[d].window).min(text.len()));
        let mut matcher = Matcher {
            text: bytes,
            edge,
            marks: [None, None],
            walked,
        };
        let shape_end = matcher.parts(DETECTORS[d].shape, at)?;
        let (start, mut end) = (
            matcher.marks[0].unwrap_or(at),
            matcher.marks[1].unwrap_or(shape_end),
        );
        // A secret that runs into its window's edge goes on to the end of its
        // token: a 6 KB bearer token is removed whole, not cut at 4 KB.
        if end == edge && edge < bytes.len() {
            end = walked.run_end(&TOKEN_BYTES, bytes, end);
        }
        // Runs of ASCII classes end on ASCII bytes; one of `VALUE` may stop at
        // the window's edge, which is a character boundary too.
        if start >= end
            || !text.is_char_boundary(start)
            || !text.is_char_boundary(end)
            || text[start..end].starts_with(REF_PREFIX)
        {
            return None;
        }
        Some(Finding {
            kind: DETECTORS[d].kind,
            start,
            end,
        })
    }

    /// Calls `f(anchor, start)` for each anchor in `text` (the longest one
    /// where several start at the same byte); `f` says where to look on from,
    /// so anchors may overlap (`ask` + `api_key`). The automaton runs
    /// anchored only where the trigram filter passes.
    fn each_anchor(&self, text: &str, mut f: impl FnMut(usize, usize) -> usize) {
        let bytes = text.as_bytes();
        // The last three bytes seen, folded, and how many of them are valid.
        let (mut window, mut seen) = (0u32, 0usize);
        let mut i = 0;
        while i < bytes.len() {
            window = (window << 8 | u32::from(bytes[i])) & FOLD;
            i += 1;
            seen += 1;
            if seen >= 3 && self.trigrams.may_start(window) {
                let at = i - 3;
                let input = Input::new(text)
                    .span(at..bytes.len())
                    .anchored(Anchored::Yes);
                // Anchored searches are what the automaton was built for.
                if let Ok(Some(hit)) = self.automaton.try_find(input) {
                    i = f(hit.pattern().as_usize(), at).max(at + 1);
                    seen = 0;
                }
            }
        }
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
            let mut seen = TOKEN[usize::from(bytes[probe])];
            if seen == 0 {
                i = probe + 1;
                continue;
            }
            // Walk the run both ways, noting which classes of bytes it holds.
            let mut start = probe;
            while start > i {
                let class = TOKEN[usize::from(bytes[start - 1])];
                if class == 0 {
                    break;
                }
                seen |= class;
                start -= 1;
            }
            let mut end = probe + 1;
            while end < bytes.len() {
                let class = TOKEN[usize::from(bytes[end])];
                if class == 0 {
                    break;
                }
                seen |= class;
                end += 1;
            }
            i = end + 1;
            // Cheapest test first: hex digests, UUIDs, ULIDs and most paths
            // have at most two of lower case, upper case and digits.
            if end - start < min || (seen & (LOWER | UPPER | DIGIT_BIT)).count_ones() < 3 {
                continue;
            }
            let (s, e) = trim_run(bytes, start, end);
            let run = &bytes[s..e];
            if e - s < self.entropy_min_len
                || overlaps(&found_spans, &mut fi, s, e)
                || overlaps(protected, &mut pi, s, e)
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

/// A set of byte trigrams, case folded and hashed into 2^16 bits
/// (8 KiB, in the first-level cache): a false "maybe" costs one anchored
/// automaton step, a "no" is one independent load.
struct Trigrams {
    bits: Box<[u64; 1024]>,
}

impl Trigrams {
    fn new(anchors: &[&str]) -> Self {
        let mut bits = Box::new([0u64; 1024]);
        for anchor in anchors {
            let a = anchor.as_bytes();
            assert!(a.len() >= 3, "anchor {anchor:?} is shorter than a trigram");
            let k = Self::key(Self::window(a[0], a[1], a[2]));
            bits[k >> 6] |= 1 << (k & 63);
        }
        Self { bits }
    }

    /// Three bytes as the scan's rolling window holds them: folded, first highest.
    fn window(a: u8, b: u8, c: u8) -> u32 {
        (u32::from(a) << 16 | u32::from(b) << 8 | u32::from(c)) & FOLD
    }

    fn key(window: u32) -> usize {
        (window.wrapping_mul(0x9E37_79B1) >> 16) as usize
    }

    fn may_start(&self, window: u32) -> bool {
        let k = Self::key(window);
        self.bits[k >> 6] & (1 << (k & 63)) != 0
    }
}

/// Three bytes without their case bit: ASCII letters fold to upper case.
/// Other bytes fold together in pairs (`-` with a control byte), which only
/// makes the filter pass a little more often, never less.
const FOLD: u32 = 0xDF_DFDF;

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

const LOWER: u8 = 1;
const UPPER: u8 = 2;
const DIGIT_BIT: u8 = 4;
const SEPARATOR: u8 = 8;

/// Characters of base64, base64url and most token alphabets, by class
/// (lower case, upper case, digit, separator); 0 for every other byte.
const TOKEN: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match b {
            b'a'..=b'z' => LOWER,
            b'A'..=b'Z' => UPPER,
            b'0'..=b'9' => DIGIT_BIT,
            b'_' | b'-' | b'+' | b'/' | b'=' => SEPARATOR,
            _ => 0,
        };
        i += 1;
    }
    t
};

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

    /// One example of each format, written as `before[secret]after`.
    const EXAMPLES: &[(&str, &str)] = &[
        (
            "pem_private_key",
            "key: [-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----] done",
        ),
        (
            "pem_private_key",
            "[-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA]",
        ),
        ("aws_access_key_id", "id=[AKIAIOSFODNN7EXAMPLE] "),
        (
            "aws_secret_access_key",
            "aws_secret_access_key = \"[wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY]\"",
        ),
        (
            "google_api_key",
            "[AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW]",
        ),
        ("google_oauth_token", "[ya29.a0AfH6SMBx3kL9mQ2vR7tY1uI0oP]"),
        (
            "azure_storage_key",
            "AccountName=x;AccountKey=[Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8=];EndpointSuffix",
        ),
        (
            "github_pat",
            "[github_pat_11ABCDEFG0123456789abc_defghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01234]",
        ),
        ("github_token", "[ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789]"),
        ("gitlab_token", "[glpat-xYz12345678901234567]"),
        ("npm_token", "[npm_abcdefghijklmnopqrstuvwxyz0123456789]"),
        (
            "pypi_token",
            "[pypi-AgEIcHlwaS5vcmcCJGE0ZjY5ZTQwLWU5YjUtNGQxNC1hN2E0LTM5ZjBiYzM1NzYxMgACKlszLCJmMjRl]",
        ),
        (
            "slack_webhook",
            "https://[hooks.slack.com/services/T0ABCDEFG/B0HIJKLMN/abcdefghijklmnopqrstuvwx]",
        ),
        (
            "slack_token",
            "[xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx]",
        ),
        (
            "slack_app_token",
            "[xapp-1-A0123ABCDEF-1234567890123-abcdef0123456789]",
        ),
        (
            "discord_webhook",
            "https://[discord.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz_-0123]",
        ),
        ("stripe_key", "[sk_live_4eC39HqLyjWDarjtT1zdp7dc]"),
        (
            "stripe_webhook_secret",
            "[whsec_abcdefghijklmnopqrstuvwxyz0123]",
        ),
        (
            "anthropic_key",
            "[sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH]",
        ),
        ("openai_key", "[sk-proj-abcdefghijklmnopqrstuvwxyz0123]"),
        (
            "huggingface_token",
            "[hf_abcdefghijklmnopqrstuvwxyzABCDEFGH]",
        ),
        (
            "groq_key",
            "[gsk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP]",
        ),
        ("replicate_token", "[r8_abcdefghijklmnopqrstuvwxyzABCDEF]"),
        (
            "perplexity_key",
            "[pplx-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP]",
        ),
        (
            "xai_key",
            "[xai-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789]",
        ),
        (
            "sendgrid_key",
            "[SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ]",
        ),
        ("twilio_api_key", "[SK0123456789abcdef0123456789abcdef] "),
        ("mailgun_key", "[key-0123456789abcdefghijklmnopqrstuv]"),
        (
            "digitalocean_token",
            "[dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef]",
        ),
        ("shopify_token", "[shpat_0123456789abcdef0123456789abcdef]"),
        (
            "jwt",
            "[eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U]",
        ),
        (
            "bearer_token",
            "Authorization: BEARER [abcdefghijklmnop1234567890==]",
        ),
        (
            "url_password",
            "postgres://app:[hunter2pass]@db.local:5432/app",
        ),
        ("password_assignment", "PASSWORD is [correct-horse]"),
        ("password_assignment", "{\"passwd\": \"[s3cr3t!!]\"}"),
        ("api_key_assignment", "X-Api-Key: [0123456789abcdef]"),
        ("token_assignment", "auth_token='[abcdefgh12345678]'"),
    ];

    #[test]
    fn at_least_twenty_five_formats_each_found_where_it_is() {
        assert!(Scanner::kinds().len() >= 25, "{}", Scanner::kinds().len());
        let scanner = Scanner::new();
        for kind in Scanner::kinds() {
            assert!(
                EXAMPLES.iter().any(|(k, _)| *k == kind),
                "no example of {kind}"
            );
        }
        for (kind, example) in EXAMPLES {
            let (start, end) = (example.find('[').unwrap(), example.find(']').unwrap());
            let text = example.replacen('[', "", 1).replacen(']', "", 1);
            let found = scanner.scan(&text);
            assert_eq!(
                found,
                [Finding {
                    kind,
                    start,
                    end: end - 1
                }],
                "{kind} in {text}"
            );
        }
    }

    #[test]
    fn the_trigram_filter_lets_every_anchor_through_in_any_case() {
        let scanner = Scanner::new();
        for detector in DETECTORS {
            for anchor in detector.anchors {
                for variant in [
                    anchor.to_string(),
                    anchor.to_ascii_lowercase(),
                    anchor.to_ascii_uppercase(),
                ] {
                    let text = format!("at {variant}");
                    let mut hits = Vec::new();
                    scanner.each_anchor(&text, |id, at| {
                        hits.push((id, at));
                        at + 1
                    });
                    let ids: Vec<usize> = hits.iter().filter(|h| h.1 == 3).map(|h| h.0).collect();
                    assert!(
                        ids.len() == 1
                            && scanner.anchors[ids[0]]
                                .iter()
                                .any(|d| DETECTORS[*d].kind == detector.kind),
                        "{variant}: {hits:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn an_anchor_that_overlaps_another_does_not_hide_it() {
        // `ska` (a Twilio prefix, any case) and `api_key`; `ACCA` and `AccountKey`.
        let text = "the key you askapi_key: YuYfXudPf0h1pjsOJJyiXQx6tzuTqIng ok";
        assert_eq!(kinds(text), ["api_key_assignment"]);
        let text = "b40987accAccountKey=ZF25gmU3L5vZxN/ic7rLHmNbaI2JIjT2XNrVva96ntxc40rTy==";
        assert_eq!(kinds(text), ["azure_storage_key"]);
    }

    #[test]
    fn a_secret_longer_than_its_window_is_found_whole() {
        let token = "aB3dE5gH7jK9".repeat(500); // 6,000 characters; the window is 4 KB
        let text = format!("Authorization: Bearer {token}\nnext line");
        let found = Scanner::new().scan(&text);
        assert_eq!(found.len(), 1);
        assert_eq!(&text[found[0].start..found[0].end], token);
    }

    #[test]
    fn a_shape_that_does_not_fit_finds_nothing() {
        for text in [
            "AKIAIOSFODNN7EXAMPLEX", // one character too many
            "ghp_short",
            "xsk-proj-abcdefghijklmnopqrstuvwxyz0123", // inside a word
            "SG.abc.def",
            "-----BEGIN PUBLIC KEY-----",
            "https://example.com:8443/path",
            "password is short",
            "SK_LIVE_abcdefghijklmnopqrstuvwxyz", // the format's case matters
        ] {
            assert_eq!(kinds(text), Vec::<&str>::new(), "{text}");
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
