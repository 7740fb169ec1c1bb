//! `caal bench hear`: the speech models' word error rate on recorded human
//! speech: the labelled clips of Debian's `pocketsphinx-testdata` (BSD-2,
//! CMU: five card names said in a room, five sentences of a LibriVox
//! reading of *Sense and Sensibility*), heard as voice rounds hear (the
//! home's words in whisper's prompt, the configured decoding). Transcripts
//! and references are compared as whisper's English normaliser would:
//! lower case, no punctuation, numbers as words, "Mr." as "mister". Built
//! on the library's public API.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use caal::config::Config;
use caal::voice::{audio, stt};
use serde::Serialize;

/// Its labelled sets: the transcript file, and the folder of the clips.
const SETS: &[(&str, &str)] = &[
    ("cards", "cards/cards.transcription"),
    ("librivox", "librivox/transcription"),
];

#[derive(Serialize)]
pub struct Report {
    pub data: String,
    pub models: Vec<Heard>,
}

#[derive(Serialize)]
pub struct Heard {
    pub model: String,
    pub clips: usize,
    pub words: usize,
    /// Substitutions, deletions and insertions against the reference.
    pub errors: usize,
    pub wer: f64,
    pub per_set: Vec<SetWer>,
    /// Transcribing time over the clips' length, all clips.
    pub real_time_factor: f64,
    pub clip_list: Vec<Clip>,
}

#[derive(Serialize)]
pub struct SetWer {
    pub set: String,
    pub words: usize,
    pub errors: usize,
    pub wer: f64,
}

#[derive(Serialize)]
pub struct Clip {
    pub id: String,
    pub said: String,
    pub heard: String,
    pub errors: usize,
}

/// A labelled clip: its set, id, the words said, and its WAV.
type Labelled = (String, String, Vec<String>, PathBuf);

/// Every labelled clip.
fn clips(data: &Path) -> Result<Vec<Labelled>> {
    let mut out = Vec::new();
    for (set, listing) in SETS {
        let path = data.join(listing);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {}; `bash .ci/setup` installs the Debian package pocketsphinx-testdata",
                path.display()
            )
        })?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            // "<s> ten of clubs </s> (001)"
            let (words, id) = line
                .rsplit_once('(')
                .with_context(|| format!("{}: no clip id in {line:?}", path.display()))?;
            let id = id.trim().trim_end_matches(')').to_owned();
            let said = normalise(&words.replace("<s>", " ").replace("</s>", " "));
            let folder = path.parent().unwrap_or(data);
            out.push((
                set.to_string(),
                id.clone(),
                said,
                folder.join(format!("{id}.wav")),
            ));
        }
    }
    Ok(out)
}

/// Words as whisper's English normaliser compares them.
pub fn normalise(text: &str) -> Vec<String> {
    let spaced: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '\'' {
                c
            } else {
                ' '
            }
        })
        .collect();
    spaced
        .split_whitespace()
        .flat_map(|w| {
            let w = w.trim_matches('\'').to_lowercase();
            match w.as_str() {
                "mr" => vec!["mister".to_owned()],
                "mrs" => vec!["missus".to_owned()],
                "dr" => vec!["doctor".to_owned()],
                _ => match w.parse::<u64>() {
                    Ok(n) if n < 10_000 => caal::understand::lexicon::number_words(n)
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect(),
                    _ => vec![w],
                },
            }
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word edit distance: substitutions, deletions and insertions.
pub fn word_errors(said: &[String], heard: &[String]) -> usize {
    let mut row: Vec<usize> = (0..=heard.len()).collect();
    for (i, s) in said.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, h) in heard.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(s != h)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[heard.len()]
}

pub fn run(config: &Config, data: &Path, names: &[String]) -> Result<Report> {
    let models_dir = caal::llm::tiers::models_dir(&|k| std::env::var(k).ok());
    let clips = clips(data)?;
    if clips.is_empty() {
        bail!("no labelled clips under {}", data.display());
    }
    let names: Vec<String> = if names.is_empty() {
        stt::SPEECH_MODELS
            .iter()
            .map(|m| m.name.to_owned())
            .collect()
    } else {
        names.to_vec()
    };
    let mut models = Vec::new();
    for name in &names {
        let known = stt::speech_model(name)?;
        let mut with = config.clone();
        with.voice = stt::with_model(&config.voice, known);
        let cfg = super::voice::as_rounds_hear(&with, &models_dir).map_err(anyhow::Error::msg)?;
        let model = stt::Stt::load(&stt::model_path(&cfg, &models_dir), &cfg)?;
        let (mut words, mut errors, mut spent, mut length) = (0, 0, 0.0, 0.0);
        let mut per_set: Vec<SetWer> = Vec::new();
        let mut clip_list = Vec::new();
        for (set, id, said, wav) in &clips {
            let bytes =
                std::fs::read(wav).with_context(|| format!("cannot read {}", wav.display()))?;
            let clip = audio::decode_wav(&bytes, &wav.display().to_string())?;
            let started = Instant::now();
            let heard = model.transcribe(&clip.samples)?;
            spent += started.elapsed().as_secs_f64();
            length += clip.samples.len() as f64 / f64::from(audio::RATE);
            let e = word_errors(said, &normalise(&heard.text));
            words += said.len();
            errors += e;
            match per_set.iter_mut().find(|s| &s.set == set) {
                Some(s) => {
                    s.words += said.len();
                    s.errors += e;
                }
                None => per_set.push(SetWer {
                    set: set.clone(),
                    words: said.len(),
                    errors: e,
                    wer: 0.0,
                }),
            }
            clip_list.push(Clip {
                id: format!("{set}/{id}"),
                said: said.join(" "),
                heard: heard.text,
                errors: e,
            });
        }
        for s in &mut per_set {
            s.wer = s.errors as f64 / s.words.max(1) as f64;
        }
        models.push(Heard {
            model: known.name.to_owned(),
            clips: clips.len(),
            words,
            errors,
            wer: errors as f64 / words.max(1) as f64,
            per_set,
            real_time_factor: spent / length.max(1e-3),
            clip_list,
        });
    }
    Ok(Report {
        data: data.display().to_string(),
        models,
    })
}

pub fn print(report: &Report) {
    println!(
        "word error rate on recorded human speech ({}), heard as voice rounds hear",
        report.data
    );
    for m in &report.models {
        let sets: Vec<String> = m
            .per_set
            .iter()
            .map(|s| format!("{} {:.1}% of {} words", s.set, s.wer * 100.0, s.words))
            .collect();
        println!(
            "  {:<8} WER {:.1}% ({} errors in {} words, {} clips; {}), real-time factor {:.3}",
            m.model,
            m.wer * 100.0,
            m.errors,
            m.words,
            m.clips,
            sets.join(", "),
            m.real_time_factor
        );
        for c in m.clip_list.iter().filter(|c| c.errors > 0) {
            println!(
                "      {} said {:?}, heard {:?} ({} errors)",
                c.id, c.said, c.heard, c.errors
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcripts_compare_as_words_said() {
        assert_eq!(
            normalise("And Mr. John Dashwood had 10, or 42 of clubs."),
            "and mister john dashwood had ten or forty two of clubs"
                .split(' ')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        );
        let said = normalise("eight of spades four of clubs");
        assert_eq!(word_errors(&said, &said), 0);
        // One substitution, one deletion, one insertion.
        assert_eq!(word_errors(&said, &normalise("8 of spades for clubs")), 2);
        assert_eq!(
            word_errors(&said, &normalise("the eight of spades four of clubs")),
            1
        );
        assert_eq!(word_errors(&said, &[]), said.len());
    }
}
