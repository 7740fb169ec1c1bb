//! Audio decoding, resampling, voice activity, the model converter and
//! whisper on real espeak-ng speech.

use super::audio::{self, RATE};
use super::vad;
use crate::config::Config;

fn sine(freq: f32, rate: u32, seconds: f32, amp: f32) -> Vec<f32> {
    (0..(rate as f32 * seconds) as usize)
        .map(|i| amp * (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin())
        .collect()
}

fn wav(samples: &[f32], rate: u32, channels: u16) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for s in samples {
        for _ in 0..channels {
            w.write_sample((s * 32_767.0) as i16).unwrap();
        }
    }
    w.finalize().unwrap();
    out.into_inner()
}

/// Energy of `samples` at `freq` (a single DFT bin), normalised.
fn power_at(samples: &[f32], freq: f32, rate: u32) -> f32 {
    let (mut re, mut im) = (0.0f64, 0.0f64);
    for (i, s) in samples.iter().enumerate() {
        let p = 2.0 * std::f64::consts::PI * f64::from(freq) * i as f64 / f64::from(rate);
        re += f64::from(*s) * p.cos();
        im += f64::from(*s) * p.sin();
    }
    ((re * re + im * im).sqrt() / samples.len() as f64 * 2.0) as f32
}

/// A WAV espeak-ng says (22,050 Hz mono).
pub(crate) fn espeak(text: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("say.wav");
    let status = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "150", "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng is installed by .ci/setup");
    assert!(status.success());
    std::fs::read(path).unwrap()
}

#[test]
fn stereo_44k_becomes_16k_mono_with_the_tone_kept() {
    let tone = sine(440.0, 44_100, 1.0, 0.5);
    let clip = audio::decode_wav(&wav(&tone, 44_100, 2), "tone.wav").unwrap();
    assert_eq!(
        (clip.source_rate, clip.channels, clip.codec.as_str()),
        (44_100, 2, "pcm_s16le")
    );
    assert_eq!(clip.samples.len(), 16_000, "one second at 16 kHz");
    let mid = &clip.samples[2_000..14_000];
    let at_440 = power_at(mid, 440.0, RATE);
    assert!((at_440 - 0.5).abs() < 0.02, "amplitude at 440 Hz: {at_440}");
    assert!(power_at(mid, 1_000.0, RATE) < 0.01);
}

#[test]
fn downsampling_removes_what_16k_cannot_hold() {
    // 10 kHz is above 16 kHz's Nyquist (8 kHz): it must not fold back to 6 kHz.
    let tone = sine(10_000.0, 48_000, 0.5, 0.5);
    let out = audio::resample(&tone, 48_000, RATE);
    let mid = &out[1_000..7_000];
    assert!(power_at(mid, 6_000.0, RATE) < 0.01, "aliased into 6 kHz");
    let rms = (mid.iter().map(|s| s * s).sum::<f32>() / mid.len() as f32).sqrt();
    assert!(rms < 0.02, "10 kHz left in: rms {rms}");
}

#[test]
fn streamed_audio_resamples_as_the_whole_clip_does() {
    // A voice with harmonics and a little noise, 2.3 s.
    let voice = |rate: u32| -> Vec<f32> {
        let mut seed = 0x5EED_u32;
        (0..(rate as usize * 23 / 10))
            .map(|i| {
                let t = i as f32 / rate as f32;
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                let noise = (seed as f32 / u32::MAX as f32 - 0.5) * 0.02;
                0.4 * (2.0 * std::f32::consts::PI * 180.0 * t).sin()
                    + 0.2 * (2.0 * std::f32::consts::PI * 540.0 * t).sin()
                    + noise
            })
            .collect()
    };
    for rate in [48_000, 22_050, 44_100] {
        let clip = voice(rate);
        let whole = audio::resample(&clip, rate, RATE);
        // The page's 4,096-sample frames, and frames of every size.
        let mut sizes = vec![4_096usize; clip.len() / 4_096 + 1];
        let mut odd = [1usize, 7, 160, 333, 4_096, 10_000, 2, 999]
            .into_iter()
            .cycle();
        sizes.extend(std::iter::from_fn(|| odd.next()).take(400));
        for frames in [
            &sizes[..clip.len() / 4_096 + 1],
            &sizes[clip.len() / 4_096 + 1..],
        ] {
            let mut r = audio::Resampler::new(rate, RATE);
            let (mut streamed, mut at) = (Vec::new(), 0);
            for &n in frames.iter().cycle() {
                if at >= clip.len() {
                    break;
                }
                let end = (at + n).min(clip.len());
                streamed.extend(r.push(&clip[at..end]));
                at = end;
            }
            streamed.extend(r.finish());
            assert_eq!(streamed.len(), whole.len(), "{rate} Hz");
            let worst = streamed
                .iter()
                .zip(&whole)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst <= 1e-3, "{rate} Hz: off by {worst}");
        }
    }
    // Frame by frame with the old per-frame padding, the first sample of
    // each frame was off: one frame of a 48 kHz stream is no clip of its own.
    let clip = voice(48_000);
    let per_frame: Vec<f32> = clip
        .chunks(4_096)
        .flat_map(|f| audio::resample(f, 48_000, RATE))
        .collect();
    let whole = audio::resample(&clip, 48_000, RATE);
    assert!(
        per_frame.len() != whole.len()
            || per_frame
                .iter()
                .zip(&whole)
                .any(|(a, b)| (a - b).abs() > 1e-2),
        "resampling each frame alone should differ from the whole"
    );
}

#[test]
fn bad_wav_files_are_named_and_refused() {
    let err = audio::decode_wav(b"this is plain text, not audio", "notes.txt").unwrap_err();
    assert!(matches!(err, audio::AudioError::NotWav { .. }), "{err}");
    assert!(err.to_string().contains("notes.txt") && err.to_string().contains("sox"));

    let whole = wav(&sine(300.0, 16_000, 1.0, 0.3), 16_000, 1);
    let cut = &whole[..whole.len() / 2];
    let err = audio::decode_wav(cut, "cut.wav").unwrap_err();
    assert!(matches!(err, audio::AudioError::Truncated { .. }), "{err}");

    let err = audio::decode_wav(&wav(&[], 16_000, 1), "empty.wav").unwrap_err();
    assert!(matches!(err, audio::AudioError::Empty { .. }), "{err}");

    // A claimed rate no microphone records at is refused, not resampled for minutes.
    let err = audio::decode_wav(&wav(&[0.1; 8], 1_000_000_000, 1), "odd.wav").unwrap_err();
    assert!(
        matches!(
            err,
            audio::AudioError::Rate {
                rate: 1_000_000_000,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("sox odd.wav -r 16000"), "{err}");
}

#[test]
fn float_samples_past_full_scale_are_clipped_and_nan_is_silence() {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for s in [0.5f32, 1e37, -3.0, f32::NAN, f32::INFINITY] {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    let clip = audio::decode_wav(&out.into_inner(), "float.wav").unwrap();
    assert_eq!(clip.samples, vec![0.5, 1.0, -1.0, 0.0, 1.0]);
}

#[test]
fn encoded_wav_decodes_to_the_same_samples() {
    let tone = sine(200.0, RATE, 0.25, 0.4);
    let back = audio::decode_wav(&audio::encode_wav(&tone), "x").unwrap();
    assert_eq!(back.samples.len(), tone.len());
    let worst = tone
        .iter()
        .zip(&back.samples)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "{worst}");
}

#[test]
fn vad_finds_two_utterances_and_nothing_in_silence() {
    let cfg = Config::defaults().unwrap().voice.vad;
    let quiet = vec![0.0f32; RATE as usize];
    assert!(
        vad::split(&quiet, &cfg).is_empty(),
        "silence is no utterance"
    );
    let hiss: Vec<f32> = (0..RATE as usize)
        .map(|i| 0.002 * ((i * 7919 % 1000) as f32 / 500.0 - 1.0))
        .collect();
    assert!(
        vad::split(&hiss, &cfg).is_empty(),
        "quiet noise is no utterance"
    );

    let mut stream = quiet.clone();
    stream.extend(sine(300.0, RATE, 0.8, 0.3));
    stream.extend(vec![0.0; RATE as usize]);
    stream.extend(sine(500.0, RATE, 0.6, 0.3));
    stream.extend(vec![0.0; RATE as usize / 2]);
    let found = vad::split(&stream, &cfg);
    assert_eq!(
        found.len(),
        2,
        "{:?}",
        found
            .iter()
            .map(|u| (u.start_ms, u.end_ms))
            .collect::<Vec<_>>()
    );
    assert!(
        (800..=1_000).contains(&found[0].start_ms),
        "{}",
        found[0].start_ms
    );
    let len_ms = found[0].samples.len() as u64 * 1000 / u64::from(RATE);
    assert!(
        (800..=1_200).contains(&len_ms),
        "first utterance {len_ms} ms"
    );

    // A click (30 ms) is not speech.
    let mut click = quiet.clone();
    click.extend(sine(1_000.0, RATE, 0.03, 0.8));
    click.extend(quiet);
    assert!(vad::split(&click, &cfg).is_empty());
}

#[test]
fn vad_drops_loud_noise_and_keeps_voiced_sound() {
    let cfg = Config::defaults().unwrap().voice.vad;
    // A loud hiss (a fan, rain): energy enough, but it crosses zero all the time.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut noise = vec![0.0f32; 8_000];
    noise.extend((0..24_000).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 * 0.6 - 0.3
    }));
    noise.extend(vec![0.0f32; 8_000]);
    assert!(
        vad::split(&noise, &cfg).is_empty(),
        "noise is not an utterance"
    );
    let mut v = vad::Vad::new(cfg.clone());
    let events = v.push(&noise);
    assert!(
        matches!(events.first(), Some(vad::VadEvent::Started { .. })),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(vad::VadEvent::Dropped { .. })),
        "{events:?}"
    );

    // A voiced sound (low frequencies) at the same loudness is one.
    let mut voiced = vec![0.0f32; 8_000];
    voiced.extend(sine(180.0, RATE, 1.5, 0.3));
    voiced.extend(vec![0.0f32; 8_000]);
    assert_eq!(vad::split(&voiced, &cfg).len(), 1);
}

#[test]
fn vad_streams_frame_by_frame_like_the_whole_clip() {
    let cfg = Config::defaults().unwrap().voice.vad;
    let mut stream = vec![0.0f32; 8_000];
    stream.extend(sine(300.0, RATE, 1.0, 0.3));
    stream.extend(vec![0.0; 16_000]);
    let whole = vad::split(&stream, &cfg);
    let mut v = vad::Vad::new(cfg);
    let mut events = Vec::new();
    for chunk in stream.chunks(1_234) {
        events.extend(v.push(chunk));
    }
    assert!(matches!(
        events.first(),
        Some(vad::VadEvent::Started { .. })
    ));
    let ended: Vec<_> = events
        .into_iter()
        .filter_map(|e| match e {
            vad::VadEvent::Ended(u) => Some(u),
            _ => None,
        })
        .collect();
    assert_eq!(ended, whole);
}

#[test]
fn vad_says_when_speech_under_way_has_paused() {
    // The voice socket skips a partial transcript then: the final one would wait on it.
    let cfg = Config::defaults().unwrap().voice.vad;
    let mut v = vad::Vad::new(cfg);
    v.push(&vec![0.0f32; 8_000]);
    assert!(!v.pausing(), "no speech yet");
    v.push(&sine(300.0, RATE, 0.6, 0.3));
    assert!(v.in_speech() && !v.pausing());
    v.push(&vec![0.0f32; 1_600]); // 100 ms of quiet: not yet the end
    assert!(v.in_speech() && v.pausing());
    v.push(&sine(300.0, RATE, 0.3, 0.3));
    assert!(!v.pausing(), "speaking again");
}

/// Silero VAD as installed by the setup: speech found whole, in quiet and
/// in noise at 10 dB SNR, its end found after `silence_ms` (200 ms) of
/// quiet and Silero's lag; loud noise alone is no speech.
#[test]
fn silero_finds_speech_whole_in_noise_and_its_end_soon_after() {
    let cfg = Config::defaults().unwrap().voice;
    let models = crate::llm::tiers::models_dir(&|k| std::env::var(k).ok());
    let model = crate::voice::silero::Silero::load(
        &models.join(&cfg.vad.model),
        &models.join(&cfg.onnxruntime),
    )
    .expect("`bash .ci/setup` installs Silero VAD and ONNX Runtime");
    let detector = vad::Detector::Silero(std::sync::Arc::new(model));
    let speech = audio::decode_wav(
        &espeak("turn on the kitchen lights and lock the front door"),
        "espeak",
    )
    .unwrap()
    .samples;
    // espeak-ng's own silence before and after is no speech: quiet is
    // below the level the detector calls quiet (`threshold_db`).
    let quiet = 10f32.powf(cfg.vad.threshold_db / 20.0);
    let loud = |s: &&f32| s.abs() > quiet;
    let first = speech.iter().position(|s| loud(&s)).unwrap();
    let last = speech.len() - speech.iter().rev().position(|s| loud(&s)).unwrap();
    let speech = speech[first..last].to_vec();
    let second = RATE as usize;
    // One seeded stream of noise, each stretch the next part of it at its
    // own level. (The end in noise is found 370 ms after the speech with
    // this draw; other draws put it at 410 ms: Silero's lag in noise varies
    // by a chunk or so.)
    let mut unit = audio::white_noise(usize::MAX, 1.0, 0x9E37_79B9_7F4A_7C15);
    let mut noise =
        |n: usize, rms: f32| -> Vec<f32> { unit.by_ref().take(n).map(|u| u * rms).collect() };
    let speech_rms = (speech.iter().map(|s| s * s).sum::<f32>() / speech.len() as f32).sqrt();
    for (name, floor) in [
        ("quiet", 0.0f32),
        ("10 dB SNR", speech_rms / 10f32.powf(0.5)),
    ] {
        let mut clip = noise(second, floor);
        let starts = clip.len();
        for (s, n) in speech.iter().zip(noise(speech.len(), floor)) {
            clip.push(s + n);
        }
        let ends = clip.len();
        clip.extend(noise(second, floor));
        // Streamed in 20 ms frames, as the voice socket hears it.
        let mut v = vad::Vad::with(cfg.vad.clone(), detector.clone());
        let mut found = Vec::new();
        let mut heard = 0usize;
        let mut ended_at = None;
        for frame in clip.chunks(320) {
            heard += frame.len();
            for e in v.push(frame) {
                if let vad::VadEvent::Ended(u) = e {
                    ended_at.get_or_insert(heard);
                    found.push(u);
                }
            }
        }
        found.extend(v.finish());
        assert_eq!(
            found.len(),
            1,
            "{name}: {:?}",
            found
                .iter()
                .map(|u| (u.start_ms, u.end_ms))
                .collect::<Vec<_>>()
        );
        let u = &found[0];
        let (start_ms, end_ms) = (starts as u64 * 1000 / 16_000, ends as u64 * 1000 / 16_000);
        assert!(
            u.start_ms <= start_ms + 100,
            "{name}: started at {} ms, speech at {start_ms}",
            u.start_ms
        );
        let kept_ms = u.samples.len() as u64 * 1000 / 16_000;
        assert!(
            kept_ms + 150 >= end_ms - start_ms,
            "{name}: {kept_ms} ms kept of {} ms",
            end_ms - start_ms
        );
        // The end is found after `silence_ms` of quiet, counted in whole
        // 32 ms chunks (the last one holding the end of the word), and
        // Silero's own lag: a chunk or two in quiet, about five in noise
        // (measured: 270 ms and 370 ms after the last sound).
        let late_ms = (ended_at.expect("ended while streaming") - ends) as u64 * 1000 / 16_000;
        eprintln!("silero: {name}: the end found {late_ms} ms after the speech");
        assert!(
            late_ms <= u64::from(cfg.vad.silence_ms) + 200,
            "{name}: ended {late_ms} ms after speech"
        );
    }
    // Loud noise alone: no speech.
    let hiss = noise(3 * second, 0.2);
    assert!(vad::split_with(&hiss, &cfg.vad, detector).is_empty());
}

#[test]
fn mel_filters_are_slaney_triangles() {
    let f = super::convert::mel_filters(80);
    assert_eq!(f.len(), 80 * 201);
    for m in 0..80 {
        let row = &f[m * 201..(m + 1) * 201];
        let peak = row.iter().cloned().fold(0.0f32, f32::max);
        assert!(peak > 0.0, "filter {m} is empty");
        // One rise and one fall: a triangle.
        let top = row.iter().position(|v| *v == peak).unwrap();
        assert!(row[..top].windows(2).all(|w| w[0] <= w[1]));
        assert!(row[top..].windows(2).all(|w| w[0] >= w[1]));
    }
    // Peaks and row sums of librosa.filters.mel(sr=16000, n_fft=400, n_mels=80)
    // (librosa 0.11), where OpenAI's mel_filters.npz comes from.
    for (m, k, peak, sum) in [
        (0, 1, 0.024_862_595, 0.024_862_595),
        (10, 10, 0.019_908_218, 0.024_862_593),
        (40, 43, 0.014_735_566, 0.026_664_86),
        (60, 93, 0.006_591_093, 0.025_101_54),
        (79, 192, 0.003_164_712, 0.024_925_34),
    ] {
        let row = &f[m * 201..(m + 1) * 201];
        assert!(
            (row[k] - peak).abs() < 1e-6,
            "filter {m} at {k}: {}",
            row[k]
        );
        let total: f32 = row.iter().sum();
        assert!((total - sum).abs() < 1e-6, "filter {m} sums to {total}");
    }
}

#[test]
fn a_file_that_is_not_a_ct2_model_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("model.bin"), b"\x06\x00\x00\x00garbage").unwrap();
    std::fs::write(dir.path().join("vocabulary.txt"), "a\n").unwrap();
    let err = super::convert::convert(dir.path(), &dir.path().join("out.bin")).unwrap_err();
    assert!(
        err.to_string().contains("not a CTranslate2 Whisper model"),
        "{err}"
    );
    assert!(
        !dir.path().join("out.bin").exists(),
        "nothing half-written is left"
    );
}

/// Noise for `caal bench understand --spoken --snr`: at the asked ratio
/// to the speech's loud part, the same for the same seed, none for silence.
#[test]
fn noise_is_mixed_at_the_ratio_asked_and_repeats_with_its_seed() {
    // A second of "speech" (a 200 Hz tone at 0.3 RMS) after a second of quiet.
    let tone: Vec<f32> = (0..RATE)
        .map(|i| 0.3 * 2f32.sqrt() * (i as f32 * 200.0 * std::f32::consts::TAU / RATE as f32).sin())
        .collect();
    let clip = [vec![0.0; RATE as usize], tone.clone()].concat();
    for snr in [0.0f32, 10.0, 20.0] {
        let mut noisy = clip.clone();
        audio::add_noise(&mut noisy, snr, 7);
        let quiet = &noisy[..RATE as usize];
        let noise_rms = (quiet.iter().map(|s| s * s).sum::<f32>() / quiet.len() as f32).sqrt();
        let measured = 20.0 * (0.3 / noise_rms).log10();
        assert!(
            (measured - snr).abs() < 0.3,
            "asked {snr} dB, got {measured:.2}"
        );
        let mut again = clip.clone();
        audio::add_noise(&mut again, snr, 7);
        assert_eq!(noisy, again);
        let mut other = clip.clone();
        audio::add_noise(&mut other, snr, 8);
        assert_ne!(noisy, other);
    }
    let mut silent = vec![0.0f32; 1000];
    audio::add_noise(&mut silent, 10.0, 7);
    assert!(silent.iter().all(|s| *s == 0.0));
}

/// `caal model install NAME`: the known models by name or file; the
/// source of a model follows from its file unless configured.
#[test]
fn speech_models_are_known_by_name_and_their_source_follows_the_file() {
    use super::stt;
    let cfg = Config::defaults().unwrap().voice;
    let models = std::path::Path::new("/models");
    assert_eq!(stt::speech_model("base").unwrap().file, "ggml-base.bin");
    assert_eq!(
        stt::speech_model("ggml-tiny.en.bin").unwrap().name,
        "tiny.en"
    );
    let unknown = stt::speech_model("small").unwrap_err().to_string();
    assert!(
        unknown.contains("tiny.en, tiny.en-q8_0, base, base-q8_0"),
        "{unknown}"
    );
    assert_eq!(
        stt::speech_model("tiny.en-q8_0").unwrap().source,
        "whisper-tiny.en-ct2"
    );
    assert_eq!(
        stt::source_path(&cfg, models),
        models.join("whisper-tiny.en-ct2")
    );
    let base = stt::with_model(&cfg, stt::speech_model("base").unwrap());
    assert_eq!(
        stt::source_path(&base, models),
        models.join("whisper-base-ct2")
    );
    let mut own = cfg.clone();
    own.model = "ggml-medium.en.bin".into();
    assert_eq!(
        stt::source_path(&own, models),
        models.join("whisper-medium.en-ct2")
    );
    own.model_source = "/elsewhere/ct2".into();
    assert_eq!(
        stt::source_path(&own, models),
        std::path::PathBuf::from("/elsewhere/ct2")
    );
}

#[cfg(feature = "whisper")]
mod whisper {
    use super::*;
    use crate::voice::stt::{self, Stt};
    use std::sync::Arc;

    fn model() -> Stt {
        let cfg = Config::defaults().unwrap().voice;
        let models = crate::llm::tiers::models_dir(&|k| std::env::var(k).ok());
        stt::install(&cfg, &models, false).expect("`bash .ci/setup` fetches the speech model");
        Stt::load(&stt::model_path(&cfg, &models), &cfg).unwrap()
    }

    #[test]
    fn the_converted_model_transcribes_espeak_speech() {
        let stt = model();
        for said in ["turn on the kitchen lights", "unlock the front door"] {
            let clip = audio::decode_wav(&espeak(said), "espeak").unwrap();
            let heard = stt.transcribe(&clip.samples).unwrap();
            let words = crate::router::normalize(&heard.text);
            assert_eq!(words, said, "heard {:?}", heard.text);
            assert!(heard.confidence > 0.5, "{heard:?}");
            assert_eq!(
                (heard.language.as_str(), heard.model.as_str()),
                ("en", "ggml-tiny.en-q8_0.bin")
            );
        }
    }

    /// A transcription whose audio is no longer wanted stops when told
    /// (set before it starts, or while it runs), and the model transcribes
    /// as before afterwards (the stopped run's state is used again).
    #[test]
    fn a_transcription_stops_when_told_and_the_next_is_whole() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stt = Arc::new(model());
        let said = "set a timer for 10 minutes and turn off the lights in the living room";
        let clip = audio::decode_wav(&espeak(said), "espeak").unwrap();
        let whole = stt.transcribe(&clip.samples).unwrap();
        let stopped = AtomicBool::new(true);
        assert!(matches!(
            stt.transcribe_unless(&clip.samples, &stopped),
            Err(stt::SttError::Stopped)
        ));
        // Told while it runs, from another thread (as the voice socket
        // does when the speaker goes on).
        let stop = Arc::new(AtomicBool::new(false));
        let (running, flag, samples) = (stt.clone(), stop.clone(), clip.samples.clone());
        let job = std::thread::spawn(move || running.transcribe_unless(&samples, &flag));
        std::thread::sleep(std::time::Duration::from_millis(5));
        stop.store(true, Ordering::Relaxed);
        assert!(matches!(job.join().unwrap(), Err(stt::SttError::Stopped)));
        let again = stt.transcribe(&clip.samples).unwrap();
        assert_eq!(again.text, whole.text);
        assert_eq!(crate::router::normalize(&again.text), said, "{again:?}");
    }

    /// Words weighed against speech: what was said fits it better than
    /// its opposite or other words; scored after transcribing (the
    /// encoding reused) as scored alone; a text's score does not depend
    /// on the others scored with it.
    #[test]
    fn the_words_said_fit_their_speech_best() {
        let stt = model();
        let clip = audio::decode_wav(&espeak("unlock the front door"), "espeak").unwrap();
        let texts = [
            "Unlock the front door.",
            "Lock the front door.",
            "Turn on the kitchen lights.",
        ]
        .map(String::from);
        let alone = stt.score(&clip.samples, &texts).unwrap();
        assert_eq!(alone.len(), 3);
        assert!(alone.iter().all(|s| s.is_finite() && *s < 0.0), "{alone:?}");
        assert!(alone[0] > alone[1] + 1.0, "unlock over lock: {alone:?}");
        assert!(
            alone[1] > alone[2] + 10.0,
            "the door over the lights: {alone:?}"
        );

        stt.transcribe(&clip.samples).unwrap();
        let after = stt.score(&clip.samples, &texts).unwrap();
        for (a, b) in alone.iter().zip(&after) {
            assert!(
                (a - b).abs() < 0.1,
                "alone {alone:?}, after transcribing {after:?}"
            );
        }
        let one = stt.score(&clip.samples, &texts[1..2]).unwrap();
        assert!((one[0] - alone[1]).abs() < 0.1, "{one:?} vs {alone:?}");
        assert_eq!(stt.score(&clip.samples, &[]).unwrap(), Vec::<f32>::new());
    }

    /// The default model, its matrices in 8-bit blocks (its file named
    /// `…-q8_0.bin`), is little more than half the size of the same model
    /// in f16 and hears what that one hears.
    #[test]
    fn a_model_in_8_bit_blocks_hears_what_the_f16_one_hears() {
        let cfg = Config::defaults().unwrap().voice;
        let models = crate::llm::tiers::models_dir(&|k| std::env::var(k).ok());
        let quantized = model();
        let installed = stt::model_path(&cfg, &models);
        assert!(
            installed.ends_with("ggml-tiny.en-q8_0.bin"),
            "{installed:?}"
        );
        let q8 = std::fs::metadata(&installed).unwrap().len();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("ggml-tiny.en.bin");
        let source = stt::source_path(&cfg, &models);
        let done = super::super::convert::convert(&source, &out).unwrap();
        assert_eq!(done.tensors, 7 + 4 * 15 + 4 + 4 * 24);
        let f16 = std::fs::metadata(&out).unwrap().len();
        assert!(q8 * 10 < f16 * 6, "{q8} bytes against {f16}");
        let whole = Stt::load(&out, &cfg).unwrap();
        for said in ["turn on the kitchen lights", "set a timer for ten minutes"] {
            let clip = audio::decode_wav(&espeak(said), "espeak").unwrap();
            let heard = quantized.transcribe(&clip.samples).unwrap();
            let words = crate::router::normalize(&heard.text);
            let as_f16 = crate::router::normalize(&whole.transcribe(&clip.samples).unwrap().text);
            assert_eq!(words, as_f16, "q8_0 heard {:?}", heard.text);
            assert!(heard.confidence > 0.5, "{heard:?}");
        }
    }

    /// whisper keeps only a long prompt's last `n_text_ctx / 2 - 1` (223)
    /// tokens: a prompt of 400 words and one of 224 are the same 223
    /// tokens to the decoder (" the" each; the first word has no space),
    /// so they hear and weigh alike. Scoring that placed its words after
    /// the whole prompt would read keys and values whisper never wrote.
    #[test]
    fn a_prompt_longer_than_whisper_keeps_scores_as_whisper_decodes() {
        let cfg = Config::defaults().unwrap().voice;
        let models = crate::llm::tiers::models_dir(&|k| std::env::var(k).ok());
        stt::install(&cfg, &models, false).expect("`bash .ci/setup` fetches the speech model");
        let with = |words: usize| {
            let mut cfg = cfg.clone();
            cfg.prompt = vec!["the"; words].join(" ");
            Stt::load(&stt::model_path(&cfg, &models), &cfg).unwrap()
        };
        let (long, kept) = (with(400), with(224));
        let clip = audio::decode_wav(&espeak("unlock the front door"), "espeak").unwrap();
        let texts = ["Unlock the front door.", "Lock the front door."].map(String::from);
        let a = long.score(&clip.samples, &texts).unwrap();
        let b = kept.score(&clip.samples, &texts).unwrap();
        for (a, b) in a.iter().zip(&b) {
            assert!((a - b).abs() < 0.01, "400 words {a}, 224 words {b}");
        }
        assert!(a.iter().all(|s| s.is_finite() && *s < 0.0), "{a:?}");
        // After transcribing (the prompt's keys and values from whisper's own decoding).
        let heard = long.transcribe(&clip.samples).unwrap();
        assert_eq!(heard.text, kept.transcribe(&clip.samples).unwrap().text);
        let after = long.score(&clip.samples, &texts).unwrap();
        assert!((after[0] - a[0]).abs() < 0.1, "{after:?} vs {a:?}");
    }

    /// The Piper voice, as installed by the setup, speaks what it is given:
    /// whisper hears its words back, its sentence is as long as speech of
    /// it is, and espeak-ng speaks where the voice cannot be had.
    #[test]
    fn the_piper_voice_speaks_words_whisper_hears_back() {
        let cfg = Config::defaults().unwrap().voice;
        let models = crate::llm::tiers::models_dir(&|k| std::env::var(k).ok());
        let speaker = crate::voice::tts::Speaker::load(
            &models.join(&cfg.piper),
            &models.join(&cfg.onnxruntime),
            "en-us",
            2,
        );
        let crate::voice::tts::Speaker::Piper(voice) = &speaker else {
            panic!("`bash .ci/setup` installs the Piper voice and ONNX Runtime");
        };
        assert_eq!(
            (voice.name.as_str(), speaker.rate()),
            ("en_US-joe-medium", 22_050)
        );
        // The ids Piper's own phonemizer gives the voice for this sentence.
        assert_eq!(
            voice.ids("Hello, world!").unwrap(),
            [
                1, 0, 20, 0, 59, 0, 24, 0, 120, 0, 27, 0, 100, 0, 8, 0, 3, 0, 35, 0, 120, 0, 62, 0,
                122, 0, 24, 0, 17, 0, 4, 0, 2
            ]
        );
        let stt = model();
        for said in [
            "The kitchen lights are on.",
            "Lock the front door? Say yes to confirm.",
            "The timer for the pasta has four minutes left.",
        ] {
            // The voice samples its prosody (VITS's noise), so each time it
            // speaks a little differently, and whisper tiny.en may mishear a
            // word ("the pasta has" once came back "the pass to ask"): of
            // three times it says the line, most of the words come back at
            // least once. Numbers compare as words ("4" is "four").
            let words = |t: &str| -> Vec<String> {
                crate::router::normalize(t)
                    .split(' ')
                    .map(|w| w.trim_matches('.'))
                    .map(|w| match w.parse::<u64>() {
                        Ok(n) => crate::understand::lexicon::number_words(n),
                        Err(_) => w.to_owned(),
                    })
                    .collect()
            };
            let said_words = words(said);
            let mut heard_best = (0, String::new());
            for _ in 0..3 {
                let spoken = speaker.speak(said).unwrap();
                let seconds = spoken.len() as f32 / 22_050.0;
                assert!((0.8..6.0).contains(&seconds), "{said}: {seconds} s");
                assert!(spoken.iter().all(|s| s.abs() <= 1.0));
                let heard = stt
                    .transcribe(&audio::resample(&spoken, 22_050, RATE))
                    .unwrap();
                let heard_words = words(&heard.text);
                let back = said_words
                    .iter()
                    .filter(|w| heard_words.contains(w))
                    .count();
                if back > heard_best.0 {
                    heard_best = (back, heard.text);
                }
                if back * 4 >= said_words.len() * 3 {
                    break;
                }
            }
            assert!(
                heard_best.0 * 4 >= said_words.len() * 3,
                "{said}: heard at best {:?}",
                heard_best.1
            );
        }
        // A WAV of several pieces at the voice's rate.
        let wav = speaker
            .speak_wav("The garage door is opening. It will be open in a moment.")
            .unwrap();
        let clip = audio::decode_wav(&wav, "piper").unwrap();
        assert_eq!(clip.source_rate, 22_050);
        // No voice where it is said to be: espeak-ng speaks.
        let fallback = crate::voice::tts::Speaker::load(
            &models.join("no-such-voice.onnx"),
            &models.join(&cfg.onnxruntime),
            "en-us",
            2,
        );
        assert_eq!(fallback.name(), ("espeak-ng", "en-us"));
        assert!(
            !fallback
                .speak("The kitchen lights are on.")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn conversion_matches_the_model_it_came_from() {
        // A second conversion into a fresh file is byte-identical, and
        // holds every tensor whisper.cpp's tiny model has (4 + 4 layers).
        let cfg = Config::defaults().unwrap().voice;
        let models = crate::llm::tiers::models_dir(&|k| std::env::var(k).ok());
        stt::install(&cfg, &models, false).expect("`bash .ci/setup` fetches the speech model");
        let dir = tempfile::tempdir().unwrap();
        let installed = stt::model_path(&cfg, &models);
        // The same name, so the same weights (`…-q8_0.bin`: 8-bit blocks).
        let out = dir.path().join(installed.file_name().unwrap());
        let done = super::super::convert::convert(&stt::source_path(&cfg, &models), &out).unwrap();
        assert_eq!(
            (
                done.n_vocab,
                done.audio_layers,
                done.text_layers,
                done.state
            ),
            (51_864, 4, 4, 384)
        );
        // encoder: conv 4 + pos 1 + ln_post 2 + 4 × 15; decoder: pos, tokens, ln 2 + 4 × 24.
        assert_eq!(done.tensors, 7 + 4 * 15 + 4 + 4 * 24);
        let a = std::fs::read(&out).unwrap();
        let b = std::fs::read(&installed).unwrap();
        assert!(
            a == b,
            "the installed model differs from a fresh conversion"
        );
    }
}

/// openWakeWord's "hey jarvis" as the setup installs it, streamed in the
/// page's frames: heard when said before a request (once, however long
/// its score stays high), not in the request alone; the phrase's words
/// come from the model's name.
#[test]
fn the_wake_word_is_heard_when_said_and_not_otherwise() {
    let cfg = Config::defaults().unwrap().voice;
    let models = crate::llm::tiers::models_dir(&|k| std::env::var(k).ok());
    let wake = crate::voice::wake::WakeWord::load(
        &models.join("openwakeword-0.5.1/hey_jarvis_v0.1.onnx"),
        &models.join(&cfg.onnxruntime),
    )
    .expect("`bash .ci/setup` installs openWakeWord's models and ONNX Runtime");
    assert_eq!(wake.phrase, "hey jarvis");
    let heard = |text: &str| {
        let said = audio::decode_wav(&espeak(text), "espeak").unwrap().samples;
        let clip = [vec![0.0; RATE as usize], said, vec![0.0; RATE as usize / 2]].concat();
        let mut stream = wake.stream();
        let mut times = Vec::new();
        for frame in clip.chunks(1365) {
            times.extend(wake.push(&mut stream, frame, 0.5).unwrap());
        }
        (times, stream.best)
    };
    let (times, best) = heard("hey jarvis, turn on the kitchen lights");
    assert_eq!(times.len(), 1, "{times:?}");
    // Heard at the end of the phrase, before the request is over.
    assert!(
        times[0].at_ms > 1_000 && times[0].at_ms < 2_600,
        "{times:?}"
    );
    assert!(best > 0.9, "{best}");
    let (times, best) = heard("turn on the kitchen lights");
    assert!(times.is_empty(), "{times:?}");
    assert!(best < 0.1, "{best}");
}
