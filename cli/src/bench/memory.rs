//! `caal bench memory`: a bucket of N items (100,000 by default) in a fresh
//! `memory.db`; the context package computed cold and served from the
//! cache, full-text search, and one write (with its register), as p50/p95.

use std::{path::Path, time::Instant};

use caal::{
    config::MemoryConfig,
    ids::BucketId,
    memory::{MEMORY_FILE, Match, MemoryError, MemoryStore, Signal, Signals, is_stopword},
    safety::corpus::Rng,
    stats::percentile,
};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct MemoryBenchReport {
    pub items: usize,
    pub fill_s: f64,
    pub package_items: usize,
    pub package_cold_p50_ms: f64,
    pub package_cold_p95_ms: f64,
    pub package_cached_p50_us: f64,
    pub package_cached_p95_us: f64,
    pub search_all_p50_ms: f64,
    pub search_all_p95_ms: f64,
    pub search_any_p50_ms: f64,
    pub search_any_p95_ms: f64,
    /// The commonest searchable word ("kitchen"): in how many items, and one search for it.
    pub common_word_items: usize,
    pub search_common_ms: f64,
    pub write_p50_ms: f64,
    pub db_bytes: u64,
}

/// Words of things people ask a home assistant to remember, commonest first.
const WORDS: &[&str] = &[
    "the",
    "is",
    "in",
    "a",
    "to",
    "of",
    "and",
    "on",
    "at",
    "for",
    "with",
    "my",
    "it",
    "we",
    "our",
    "from",
    "by",
    "this",
    "that",
    "your",
    "be",
    "are",
    "was",
    "kitchen",
    "key",
    "door",
    "code",
    "garage",
    "blue",
    "box",
    "drawer",
    "wifi",
    "password",
    "bin",
    "day",
    "tuesday",
    "plumber",
    "number",
    "dentist",
    "appointment",
    "milk",
    "oat",
    "spare",
    "shelf",
    "cupboard",
    "boiler",
    "service",
    "filter",
    "bike",
    "lock",
    "school",
    "pickup",
    "friday",
    "birthday",
    "anna",
    "tom",
    "gift",
    "recipe",
    "lasagne",
    "oven",
    "timer",
    "plant",
    "water",
    "monday",
    "window",
    "cleaner",
    "insurance",
    "renewal",
    "march",
    "car",
    "tyre",
    "pressure",
    "passport",
    "folder",
    "attic",
    "ladder",
    "paint",
    "colour",
    "hallway",
    "sage",
    "green",
    "fuse",
    "meter",
    "reading",
    "electricity",
    "gas",
    "landlord",
    "email",
    "vet",
    "cat",
    "food",
    "allergy",
    "peanut",
    "neighbour",
    "parcel",
    "porch",
    "thermostat",
    "schedule",
    "night",
    "alarm",
    "battery",
    "smoke",
    "detector",
    "loft",
    "hatch",
    "printer",
    "ink",
    "cartridge",
    "model",
    "bookcase",
    "screws",
    "toolbox",
    "red",
    "yellow",
    "train",
    "ticket",
    "platform",
    "holiday",
    "cottage",
    "address",
    "postcode",
    "doctor",
    "surgery",
    "prescription",
    "pharmacy",
    "refill",
];

/// Words drawn as in real text (Zipf's law, s = 1): the words above
/// first (function words, then things), then 5,000 made-up ones (names,
/// places, brands).
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new(rng: &mut Rng) -> Self {
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mer", "tin", "sa", "bru", "vel", "do", "ran", "pi", "qua", "zen", "fo",
            "ly", "gar", "ne", "sho", "wil", "ter", "ma",
        ];
        let mut words: Vec<String> = WORDS.iter().map(|w| (*w).to_owned()).collect();
        while words.len() < WORDS.len() + 5_000 {
            let n = 2 + rng.below(2);
            let w: String = (0..n).map(|_| *rng.pick(SYLLABLES)).collect();
            words.push(w);
        }
        let mut total = 0.0;
        let cumulative = (0..words.len())
            .map(|r| {
                total += 1.0 / (r as f64 + 1.0);
                total
            })
            .collect();
        Self { words, cumulative }
    }

    /// A word people would search for (not a stop word).
    fn searchable(&self, rng: &mut Rng) -> &str {
        loop {
            let w = self.word(rng);
            if !is_stopword(w) {
                return w;
            }
        }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let u = rng.below(1_000_000) as f64 / 1_000_000.0 * total;
        let i = self.cumulative.partition_point(|c| *c < u);
        &self.words[i.min(self.words.len() - 1)]
    }
}

pub fn run(
    dir: &Path,
    items: usize,
    runs: usize,
    config: &MemoryConfig,
) -> Result<MemoryBenchReport, MemoryError> {
    let store = MemoryStore::open(&dir.join(MEMORY_FILE), config)?;
    let bucket: BucketId = "bucket:bench".parse().map_err(|_| MemoryError::Empty)?;
    let scoring = *store.scoring();
    let now: i64 = 1_790_000_000_000;
    let year_ms = 365 * 86_400_000_i64;
    let mut rng = Rng::new(7);
    let vocabulary = Vocabulary::new(&mut rng);
    let generated: Vec<(String, bool, Signals, i64)> = (0..items)
        .map(|i| {
            let len = 6 + rng.below(14);
            let mut words: Vec<&str> = (0..len).map(|_| vocabulary.word(&mut rng)).collect();
            let id = format!("note{i}");
            words.push(&id);
            let written = now - (rng.below(year_ms as usize) as i64);
            let mut s = Signals::written(&scoring, written);
            let hits = rng.below(4);
            for h in 0..hits {
                let at = written + (h as i64 + 1) * rng.below(86_400_000) as i64;
                s = s.with(&scoring, Signal::TopicHit, at.min(now));
            }
            if rng.below(10) == 0 {
                s = s.with(
                    &scoring,
                    Signal::Citation,
                    now - rng.below(year_ms as usize) as i64,
                );
            }
            (words.join(" "), i % 5000 == 0, s, written)
        })
        .collect();
    let common_word_items = generated
        .iter()
        .filter(|(c, ..)| c.split(' ').any(|w| w == "kitchen"))
        .count();
    let started = Instant::now();
    store.bulk_add(&bucket, generated)?;
    let fill_s = started.elapsed().as_secs_f64();

    let mut cold = Vec::with_capacity(runs);
    let mut package_items = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let p = store.compute_package(&bucket, now)?;
        cold.push(t.elapsed().as_secs_f64() * 1e3);
        package_items = p.items.len();
    }
    store.package(&bucket, now)?;
    let mut cached = Vec::with_capacity(runs * 50);
    for _ in 0..runs * 50 {
        let t = Instant::now();
        let p = store.package(&bucket, now)?;
        cached.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(p);
    }
    let mut search = |how: Match| -> Result<Vec<f64>, MemoryError> {
        let mut times = Vec::with_capacity(runs);
        for i in 0..runs {
            let query = if i % 2 == 0 {
                format!(
                    "{} {}",
                    vocabulary.searchable(&mut rng),
                    vocabulary.searchable(&mut rng)
                )
            } else {
                vocabulary.searchable(&mut rng).to_owned()
            };
            let t = Instant::now();
            let hits = store.search(&query, Some(&bucket), how, 10, now)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(hits);
        }
        Ok(times)
    };
    let mut all = search(Match::All)?;
    let mut common = Vec::with_capacity(5);
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(store.search("kitchen", Some(&bucket), Match::All, 10, now)?);
        common.push(t.elapsed().as_secs_f64() * 1e3);
    }
    common.sort_by(f64::total_cmp);
    let mut any = search(Match::Any)?;
    let mut writes = Vec::with_capacity(runs);
    for i in 0..runs {
        let t = Instant::now();
        store.remember(
            &bucket,
            &format!("the bench wrote note number {i}"),
            Default::default(),
            false,
            now + i as i64,
        )?;
        writes.push(t.elapsed().as_secs_f64() * 1e3);
    }
    for v in [&mut cold, &mut cached, &mut all, &mut any, &mut writes] {
        v.sort_by(f64::total_cmp);
    }
    let db_bytes = ["", "-wal"]
        .iter()
        .filter_map(|s| {
            std::fs::metadata(dir.join(format!("{}{s}", MEMORY_FILE)))
                .ok()
                .map(|m| m.len())
        })
        .sum();
    Ok(MemoryBenchReport {
        items,
        fill_s,
        package_items,
        package_cold_p50_ms: percentile(&cold, 0.5),
        package_cold_p95_ms: percentile(&cold, 0.95),
        package_cached_p50_us: percentile(&cached, 0.5),
        package_cached_p95_us: percentile(&cached, 0.95),
        search_all_p50_ms: percentile(&all, 0.5),
        search_all_p95_ms: percentile(&all, 0.95),
        search_any_p50_ms: percentile(&any, 0.5),
        search_any_p95_ms: percentile(&any, 0.95),
        write_p50_ms: percentile(&writes, 0.5),
        common_word_items,
        search_common_ms: percentile(&common, 0.5),
        db_bytes,
    })
}
