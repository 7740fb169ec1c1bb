//! A realistic corpus the repo generates itself, for `caal bench scan`:
//! assistant transcripts, JSON tool outputs, shell lines and URLs, full of
//! things that look random but are not secrets (UUIDs, commit ids, digests,
//! ULIDs, this project's ids), and, in some lines, secrets of every kind
//! the scanner knows plus unprefixed random keys. Deterministic for a seed.

/// One line; `secret` is the random body of the secret it carries, if any.
pub struct Line {
    pub text: String,
    pub secret: Option<String>,
    pub kind: &'static str,
}

/// xorshift64*: small, fast and deterministic; no cryptographic use.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn chars(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const HEX: &[u8] = b"0123456789abcdef";
const UPPER_NUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const CROCKFORD: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

const ROOMS: &[&str] = &[
    "kitchen",
    "living room",
    "hall",
    "bedroom",
    "porch",
    "attic",
    "garage",
    "office",
];
const ITEMS: &[&str] = &[
    "oat milk",
    "eggs",
    "coffee",
    "bread",
    "batteries",
    "tomatoes",
    "dish soap",
    "rice",
];
const CITIES: &[&str] = &[
    "Lisbon",
    "Osaka",
    "Toronto",
    "Nairobi",
    "Berlin",
    "Melbourne",
];
const WORDS: &[&str] = &[
    "the",
    "weather",
    "tomorrow",
    "meeting",
    "calendar",
    "please",
    "remind",
    "dinner",
    "music",
    "volume",
    "playlist",
    "temperature",
    "window",
    "package",
    "delivery",
    "tonight",
    "morning",
    "schedule",
    "update",
    "report",
];

fn uuid(r: &mut Rng) -> String {
    let h = r.chars(HEX, 32);
    format!(
        "{}-{}-7{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[13..16],
        &h[16..20],
        &h[20..]
    )
}

/// A line with nothing secret in it.
pub fn clean_line(r: &mut Rng) -> String {
    match r.below(14) {
        0 => format!("turn on the {} lights", r.pick(ROOMS)),
        1 => format!("add {} to the shopping list", r.pick(ITEMS)),
        2 => format!(
            "what's the weather like in {} tomorrow morning?",
            r.pick(CITIES)
        ),
        3 => {
            let n = 6 + r.below(10);
            (0..n).map(|_| *r.pick(WORDS)).collect::<Vec<_>>().join(" ")
        }
        4 => format!(
            r#"{{"status":"ok","id":"{}","sha":"{}","etag":"{}","count":{}}}"#,
            uuid(r),
            r.chars(HEX, 40),
            r.chars(HEX, 32),
            r.below(500)
        ),
        5 => format!(
            r#"{{"entity_id":"light.{}","state":"on","attributes":{{"brightness":{},"last_changed":"2026-11-21T23:{:02}:{:02}.{}Z"}}}}"#,
            r.pick(ROOMS).replace(' ', "_"),
            r.below(256),
            r.below(60),
            r.below(60),
            r.below(1_000_000)
        ),
        6 => format!(
            "git commit -m \"fix {} in {}\" && git push origin {}",
            r.pick(WORDS),
            r.pick(WORDS),
            r.chars(HEX, 7)
        ),
        7 => format!(
            "docker run --rm -p {}:80 -v /srv/caal/data:/data nginx:1.{}",
            8000 + r.below(999),
            r.below(30)
        ),
        8 => format!(
            "curl -s https://api.example.com/v1/items?page={}&per_page=50&sort=updated",
            r.below(90)
        ),
        9 => format!(
            "https://github.com/caal-home/router/commit/{}",
            r.chars(HEX, 40)
        ),
        10 => format!(
            "round {} in conversation lib-{} chained sha256:{}",
            uuid(r),
            uuid(r),
            r.chars(HEX, 64)
        ),
        11 => format!(
            "job {} finished: ulid {} took {} ms",
            uuid(r),
            r.chars(CROCKFORD, 26),
            r.below(5000)
        ),
        12 => format!(
            "export PATH=/usr/local/cargo/bin:/usr/local/bin:$PATH; cd /home/user/projects/caal-{}",
            r.pick(WORDS)
        ),
        _ => format!(
            "ssh deploy@10.0.{}.{} 'systemctl restart caal-serve'",
            r.below(255),
            r.below(255)
        ),
    }
}

/// A secret of some kind: (kind, full value, random body).
/// How many kinds `secret_of` makes (the entropy detector's included).
pub const SECRET_KINDS: usize = 28;

/// One secret of every kind the corpus makes: (kind, the whole secret, its random body).
pub fn every_secret(seed: u64) -> Vec<(&'static str, String, String)> {
    let mut r = Rng::new(seed);
    (0..SECRET_KINDS).map(|i| secret_of(&mut r, i)).collect()
}

fn secret(r: &mut Rng) -> (&'static str, String, String) {
    let i = r.below(SECRET_KINDS);
    secret_of(r, i)
}

fn secret_of(r: &mut Rng, i: usize) -> (&'static str, String, String) {
    let (kind, prefix, body): (&'static str, String, String) = match i {
        0 => ("aws_access_key_id", "AKIA".into(), r.chars(UPPER_NUM, 16)),
        1 => ("aws_secret_access_key", String::new(), r.chars(B64, 40)),
        2 => ("google_api_key", "AIza".into(), r.chars(B64URL, 35)),
        3 => ("github_token", "ghp_".into(), r.chars(ALNUM, 36)),
        4 => (
            "github_pat",
            "github_pat_".into(),
            r.chars(ALNUM, 22) + "_" + &r.chars(ALNUM, 59),
        ),
        5 => ("gitlab_token", "glpat-".into(), r.chars(ALNUM, 20)),
        6 => ("npm_token", "npm_".into(), r.chars(ALNUM, 36)),
        7 => (
            "pypi_token",
            "pypi-AgEIcHlwaS5vcmc".into(),
            r.chars(B64URL, 70),
        ),
        8 => (
            "slack_token",
            "xoxb-".into(),
            format!(
                "{}-{}-{}",
                r.chars(b"0123456789", 12),
                r.chars(b"0123456789", 13),
                r.chars(ALNUM, 24)
            ),
        ),
        9 => (
            "slack_webhook",
            "https://hooks.slack.com/services/".into(),
            format!(
                "T{}/B{}/{}",
                r.chars(UPPER_NUM, 8),
                r.chars(UPPER_NUM, 10),
                r.chars(ALNUM, 24)
            ),
        ),
        10 => (
            "discord_webhook",
            "https://discord.com/api/webhooks/".into(),
            format!("{}/{}", r.chars(b"0123456789", 18), r.chars(B64URL, 68)),
        ),
        11 => ("stripe_key", "sk_live_".into(), r.chars(ALNUM, 24)),
        12 => ("openai_key", "sk-proj-".into(), r.chars(B64URL, 48)),
        13 => ("anthropic_key", "sk-ant-api03-".into(), r.chars(B64URL, 93)),
        14 => ("huggingface_token", "hf_".into(), r.chars(ALNUM, 34)),
        15 => (
            "jwt",
            "eyJhbGciOiJIUzI1NiJ9.eyJ".into(),
            format!("{}.{}", r.chars(B64URL, 40), r.chars(B64URL, 43)),
        ),
        16 => ("bearer_token", "Bearer ".into(), r.chars(B64URL, 40)),
        17 => (
            "pem_private_key",
            "-----BEGIN RSA PRIVATE KEY-----\\n".into(),
            r.chars(B64, 64) + "\\n-----END RSA PRIVATE KEY-----",
        ),
        18 => ("url_password", "postgres://app:".into(), r.chars(ALNUM, 18)),
        19 => (
            "password_assignment",
            "password=".into(),
            r.chars(ALNUM, 16),
        ),
        20 => ("api_key_assignment", "api_key: ".into(), r.chars(ALNUM, 32)),
        21 => (
            "token_assignment",
            "auth_token=".into(),
            r.chars(B64URL, 30),
        ),
        22 => (
            "sendgrid_key",
            "SG.".into(),
            format!("{}.{}", r.chars(B64URL, 22), r.chars(B64URL, 43)),
        ),
        23 => ("groq_key", "gsk_".into(), r.chars(ALNUM, 52)),
        24 => ("digitalocean_token", "dop_v1_".into(), r.chars(HEX, 64)),
        25 => (
            "azure_storage_key",
            "AccountKey=".into(),
            r.chars(B64, 86) + "==",
        ),
        26 => ("stripe_webhook_secret", "whsec_".into(), r.chars(ALNUM, 32)),
        _ => ("high_entropy", String::new(), r.chars(ALNUM, 40)),
    };
    let full = match kind {
        "url_password" => format!("{prefix}{body}@db.internal:5432/app"),
        _ => format!("{prefix}{body}"),
    };
    (kind, full, body)
}

/// A line that carries one secret in a realistic place.
pub fn secret_line(r: &mut Rng) -> Line {
    let (kind, full, body) = secret(r);
    let text = match r.below(6) {
        0 => format!("here is the key you asked for: {full}"),
        1 => format!(
            r#"{{"config":{{"name":"{}","credential":"{full}","region":"eu-west-1"}}}}"#,
            r.pick(WORDS)
        ),
        2 => format!("export CAAL_{}={full}", r.pick(WORDS).to_uppercase()),
        3 => format!(
            "curl -H \"X-Api-Key: {full}\" https://api.example.com/v1/{}",
            r.pick(WORDS)
        ),
        4 => format!("remember that the {} credential is {full}", r.pick(WORDS)),
        _ => format!("{} {full} {}", r.pick(WORDS), r.pick(WORDS)),
    };
    Line {
        text,
        secret: Some(body),
        kind,
    }
}

/// `n` lines, a `secret_share` of them with a secret.
pub fn generate(seed: u64, n: usize, secret_share: f64) -> Vec<Line> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            if (r.next_u64() % 10_000) as f64 / 10_000.0 < secret_share {
                secret_line(&mut r)
            } else {
                Line {
                    text: clean_line(&mut r),
                    secret: None,
                    kind: "",
                }
            }
        })
        .collect()
}

/// True if no 12-character run of `body` survives in `scrubbed`.
pub fn removed(body: &str, scrubbed: &str) -> bool {
    let chars: Vec<char> = body.chars().collect();
    if chars.len() < 12 {
        return !scrubbed.contains(body);
    }
    chars
        .windows(12)
        .all(|w| !scrubbed.contains(&w.iter().collect::<String>()))
}
