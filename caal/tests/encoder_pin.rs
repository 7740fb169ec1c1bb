//! The sentence encoder's vectors, pinned: a change to `encoder/` (or to the
//! tokenizer's use) that moves what all-MiniLM-L6-v2 says of a sentence fails
//! here, not quietly in the meaning layer's figures. The reference vectors in
//! `tests/data/encoder-pin.json` were made by this encoder's f32 kernel
//! (`CAAL_ENCODER_F32=1`) on 2026-11-27, when an independent numpy BERT
//! from the same weights agreed with it to a cosine of 0.998–0.9997 (issue 45).
//! Both kernels (f32, and the integer one on AVX-512 VNNI) must stay within
//! a cosine of 0.99995 and 0.002 in every dimension of them.
//!
//! To make the reference again after a deliberate change:
//! `CAAL_ENCODER_F32=1 CAAL_PIN_ENCODER=write cargo test -p caal --test encoder_pin`.

use std::path::PathBuf;

use caal::understand::{Embedder, embed::MODEL_DIR};

const SENTENCES: &[&str] = &[
    "turn on the kitchen lights",
    "set a timer for ten minutes",
    "is the front door locked?",
    "what's the weather like in Lisbon tomorrow",
    "Add oat milk, eggs and flour to the shopping list",
];

fn reference_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/encoder-pin.json")
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn the_encoders_vectors_stay_where_they_were_pinned() {
    let dir = caal::config::models_dir(&|k| std::env::var(k).ok()).join(MODEL_DIR);
    let embedder = Embedder::load(&dir)
        .unwrap_or_else(|e| panic!("the embedding model is needed ({e}); run `bash .ci/setup`"));
    let vectors = embedder.embed(SENTENCES).expect("embedding");
    if std::env::var("CAAL_PIN_ENCODER").as_deref() == Ok("write") {
        let rounded: Vec<Vec<f64>> = vectors
            .iter()
            .map(|v| {
                v.iter()
                    .map(|x| (f64::from(*x) * 1e6).round() / 1e6)
                    .collect()
            })
            .collect();
        let pinned = serde_json::json!({
            "model": MODEL_DIR,
            "kernel": caal_encoder::kernel(),
            "sentences": SENTENCES,
            "vectors": rounded,
        });
        std::fs::write(
            reference_file(),
            serde_json::to_string(&pinned).unwrap() + "\n",
        )
        .expect("writing the reference");
        return;
    }
    let pinned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference_file()).expect("the reference"))
            .expect("the reference is JSON");
    assert_eq!(pinned["sentences"], serde_json::json!(SENTENCES));
    for (i, (sentence, got)) in SENTENCES.iter().zip(&vectors).enumerate() {
        let want: Vec<f32> = serde_json::from_value(pinned["vectors"][i].clone()).unwrap();
        assert_eq!(got.len(), want.len(), "{sentence:?}: dimensions");
        let c = cosine(got, &want);
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            c >= 0.99995 && worst <= 0.002,
            "{sentence:?} moved from its pinned vector ({} kernel): cosine {c:.7}, largest change {worst:.5}",
            caal_encoder::kernel()
        );
    }
    // And the vectors still say what they mean: the two requests about
    // the home are nearer each other than either is to the weather.
    assert!(cosine(&vectors[0], &vectors[2]) > cosine(&vectors[0], &vectors[3]));
}
