//! WAV in, 16 kHz mono out: what whisper listens to.

use std::io::Cursor;

/// The rate speech is transcribed at.
pub const RATE: u32 = 16_000;

#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    #[error(
        "{what} is not a WAV file ({detail}); record or convert it to WAV, e.g. `sox input.mp3 -r 16000 -c 1 out.wav`"
    )]
    NotWav { what: String, detail: String },
    #[error(
        "{what} is cut short: its header promises more samples than it holds ({detail}); record it again or repair it with `sox {what} fixed.wav`"
    )]
    Truncated { what: String, detail: String },
    #[error("{what} holds no samples; record some speech first")]
    Empty { what: String },
    #[error(
        "{what} says it was recorded at {rate} Hz; only 1,000 to 384,000 Hz is read: convert it, e.g. `sox {what} -r 16000 -c 1 out.wav`"
    )]
    Rate { what: String, rate: u32 },
}

/// Sample rates read: beyond them a file is broken or a trap (resampling a
/// claimed 4 GHz to 16 kHz would take millions of filter taps a sample).
const RATES: std::ops::RangeInclusive<u32> = 1_000..=384_000;

/// A decoded clip: the samples at 16 kHz mono, and what it was before.
#[derive(Clone, Debug)]
pub struct Clip {
    pub samples: Vec<f32>,
    pub source_rate: u32,
    pub channels: u16,
    pub bits: u16,
    /// `pcm_s16le`, `pcm_f32le`, …
    pub codec: String,
}

impl Clip {
    pub fn duration_ms(&self) -> u64 {
        self.samples.len() as u64 * 1000 / u64::from(RATE)
    }
}

/// Decodes a WAV file's bytes (any rate, any channel count, 8–32-bit
/// integer or 32-bit float), mixes it to mono and resamples it to 16 kHz.
pub fn decode_wav(bytes: &[u8], what: &str) -> Result<Clip, AudioError> {
    let reader = hound::WavReader::new(Cursor::new(bytes)).map_err(|e| AudioError::NotWav {
        what: what.to_owned(),
        detail: e.to_string(),
    })?;
    let spec = reader.spec();
    if !RATES.contains(&spec.sample_rate) {
        return Err(AudioError::Rate {
            what: what.to_owned(),
            rate: spec.sample_rate,
        });
    }
    let channels = spec.channels.max(1);
    let truncated = |e: hound::Error| AudioError::Truncated {
        what: what.to_owned(),
        detail: e.to_string(),
    };
    let interleaved: Vec<f32> = match spec.sample_format {
        // A float file may hold anything: what is not a number is silence,
        // what is past full scale is clipped (found by the WAV fuzz target;
        // whisper given 1e37 hears nothing useful and NaN poisons the mix).
        hound::SampleFormat::Float => reader
            .into_samples::<f32>()
            .map(|s| s.map(|s| if s.is_nan() { 0.0 } else { s.clamp(-1.0, 1.0) }))
            .collect::<Result<_, _>>()
            .map_err(truncated)?,
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32;
            reader
                .into_samples::<i32>()
                .map(|s| s.map(|s| s as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(truncated)?
        }
    };
    if interleaved.is_empty() {
        return Err(AudioError::Empty {
            what: what.to_owned(),
        });
    }
    let mono: Vec<f32> = interleaved
        .chunks(usize::from(channels))
        .map(|frame| frame.iter().sum::<f32>() / f32::from(channels))
        .collect();
    let codec = match spec.sample_format {
        hound::SampleFormat::Float => format!("pcm_f{}le", spec.bits_per_sample),
        hound::SampleFormat::Int if spec.bits_per_sample == 8 => "pcm_u8".to_owned(),
        hound::SampleFormat::Int => format!("pcm_s{}le", spec.bits_per_sample),
    };
    Ok(Clip {
        // The resampler's filter rings past full scale on a clipped edge.
        samples: resample(&mono, spec.sample_rate, RATE)
            .into_iter()
            .map(|s| s.clamp(-1.0, 1.0))
            .collect(),
        source_rate: spec.sample_rate,
        channels,
        bits: spec.bits_per_sample,
        codec,
    })
}

/// 16-bit little-endian PCM (what the browser streams) as floats.
pub fn pcm16_to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32_768.0)
        .collect()
}

/// A sample in -1..1 as 16-bit PCM (clipped, rounded).
pub fn to_i16(sample: f32) -> i16 {
    (sample.clamp(-1.0, 1.0) * 32_767.0).round() as i16
}

/// Samples as 16-bit little-endian PCM (what the voice socket and Wyoming
/// carry); the inverse of `pcm16_to_f32`.
pub fn f32_to_pcm16(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .flat_map(|s| to_i16(*s).to_le_bytes())
        .collect()
}

/// A 16 kHz mono 16-bit WAV of `samples` (how streamed audio is kept).
pub fn encode_wav(samples: &[f32]) -> Vec<u8> {
    encode_wav_at(samples, RATE)
}

/// A mono 16-bit WAV of `samples` at `rate` (spoken replies, at their voice's rate).
pub fn encode_wav_at(samples: &[f32], rate: u32) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = Cursor::new(Vec::with_capacity(44 + samples.len() * 2));
    {
        let mut w = hound::WavWriter::new(&mut out, spec).expect("writing to memory");
        for s in samples {
            w.write_sample(to_i16(*s)).expect("writing to memory");
        }
        w.finalize().expect("writing to memory");
    }
    out.into_inner()
}

/// Band-limited resampling of a whole clip: what [`Resampler`] gives for
/// it pushed at once and finished.
pub fn resample(input: &[f32], from: u32, to: u32) -> Vec<f32> {
    if from == to || input.is_empty() || from == 0 || to == 0 {
        return input.to_vec();
    }
    let mut r = Resampler::new(from, to);
    let mut out = r.push(input);
    out.extend(r.finish());
    out
}

/// Band-limited resampling that keeps its state across frames, so audio
/// streamed in frames of any size comes out as the whole clip resampled at
/// once (to the bit: each output sample is the same sum over the same
/// input). A Hann-windowed sinc, its cut-off at the lower of the two
/// Nyquist frequencies (so downsampling does not alias), its taps computed
/// once per phase (polyphase: `to / gcd` phases). An output sample is made
/// once every input sample its taps reach has arrived, so a stream lags by
/// half the filter (16 zero crossings: 0.3 ms at 48 kHz); `finish` makes
/// the rest, counting what is past the end as silence.
///
/// Hand-written (kept over the `rubato` crate): its chunked resamplers take
/// fixed-size input, carry a delay and leave a short tail, and this one
/// was already measured and tested against the whole-clip path it now is.
pub struct Resampler {
    up: u64,
    down: u64,
    half: i64,
    cutoff: f64,
    /// Taps per phase (empty past 4,096 phases: computed per sample).
    table: Vec<Vec<f32>>,
    /// The input still needed, and the stream index of its first sample.
    kept: Vec<f32>,
    kept_from: i64,
    /// Input samples received in all.
    received: u64,
    /// The next output sample's index.
    next: u64,
}

impl Resampler {
    pub fn new(from: u32, to: u32) -> Self {
        const ZERO_CROSSINGS: f64 = 16.0;
        let (from, to) = (from.max(1), to.max(1));
        let g = gcd(from, to);
        let (up, down) = (u64::from(to / g), u64::from(from / g));
        let cutoff = (up as f64 / down as f64).min(1.0);
        let half = (ZERO_CROSSINGS / cutoff).ceil() as i64;
        let mut r = Self {
            up,
            down,
            half,
            cutoff,
            table: Vec::new(),
            kept: Vec::new(),
            kept_from: 0,
            received: 0,
            next: 0,
        };
        // Odd rates have many phases; past this many, taps are computed per sample.
        if up <= 4096 {
            r.table = (0..up).map(|phase| r.weights(phase)).collect();
        }
        r
    }

    fn weights(&self, phase: u64) -> Vec<f32> {
        let (half, cutoff) = (self.half, self.cutoff);
        let frac = phase as f64 / self.up as f64;
        let mut w: Vec<f64> = (-half..=half)
            .map(|k| {
                let t = k as f64 - frac;
                let arg = t * cutoff;
                let sinc = if arg.abs() < 1e-9 {
                    1.0
                } else {
                    let p = std::f64::consts::PI * arg;
                    p.sin() / p
                };
                let window = if t.abs() >= half as f64 {
                    0.0
                } else {
                    0.5 + 0.5 * (std::f64::consts::PI * t / half as f64).cos()
                };
                sinc * window
            })
            .collect();
        let sum: f64 = w.iter().sum();
        w.iter_mut().for_each(|x| *x /= sum);
        w.into_iter().map(|x| x as f32).collect()
    }

    /// Output for `input` (the next samples of the stream): every output
    /// sample whose taps it now covers.
    pub fn push(&mut self, input: &[f32]) -> Vec<f32> {
        if self.up == self.down {
            return input.to_vec();
        }
        self.kept.extend_from_slice(input);
        self.received += input.len() as u64;
        let mut out = Vec::with_capacity(input.len() * self.up as usize / self.down as usize + 1);
        while let Some(first) = self.first_tap(self.next) {
            // Its last tap is still to come.
            if first + 2 * self.half + 1 > self.received as i64 {
                break;
            }
            out.push(self.sample(self.next, first));
            self.next += 1;
        }
        self.forget();
        out
    }

    /// The rest of the stream: the output samples past the last input,
    /// whose taps reach beyond it (silence).
    pub fn finish(&mut self) -> Vec<f32> {
        if self.up == self.down {
            return Vec::new();
        }
        let total = (self.received * self.up).div_ceil(self.down);
        let mut out = Vec::with_capacity((total - self.next.min(total)) as usize);
        while self.next < total {
            let first = self.first_tap(self.next).unwrap_or(0);
            out.push(self.sample(self.next, first));
            self.next += 1;
        }
        out
    }

    /// The stream index of output `n`'s first tap.
    fn first_tap(&self, n: u64) -> Option<i64> {
        let i0 = i64::try_from(n.checked_mul(self.down)? / self.up).ok()?;
        Some(i0 - self.half)
    }

    fn sample(&self, n: u64, first: i64) -> f32 {
        let phase = (n * self.down) % self.up;
        let computed;
        let w: &[f32] = if self.table.is_empty() {
            computed = self.weights(phase);
            &computed
        } else {
            &self.table[phase as usize]
        };
        let taps = w.len() as i64;
        let received = self.received as i64;
        let at = first - self.kept_from;
        if first >= 0 && first + taps <= received {
            dot(&self.kept[at as usize..(at + taps) as usize], w)
        } else {
            // The edges: taps outside the stream count as silence.
            let mut acc = 0.0f32;
            for (j, weight) in w.iter().enumerate() {
                let k = first + j as i64;
                if k >= 0 && k < received {
                    acc += weight * self.kept[(k - self.kept_from) as usize];
                }
            }
            acc
        }
    }

    /// Drops the input no output sample still to come reaches.
    fn forget(&mut self) {
        let Some(needed) = self.first_tap(self.next) else {
            return;
        };
        let drop = (needed - self.kept_from).clamp(0, self.kept.len() as i64);
        if drop > 4_096 {
            self.kept.drain(..drop as usize);
            self.kept_from += drop;
        }
    }
}

/// A dot product in eight lanes (so the compiler can keep them in vector registers).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// White noise mixed into `samples`, `snr_db` below the speech in them
/// (the RMS of the 20 ms windows within 30 dB of the loudest, at 16 kHz),
/// from a xorshift generator seeded with `seed`: the same clip and seed
/// give the same noise.
pub fn add_noise(samples: &mut [f32], snr_db: f32, seed: u64) {
    let window = (RATE / 50) as usize;
    let energies: Vec<f32> = samples
        .chunks(window)
        .map(|c| c.iter().map(|s| s * s).sum::<f32>() / c.len() as f32)
        .collect();
    let loudest = energies.iter().copied().fold(0.0f32, f32::max);
    let speech: Vec<f32> = energies
        .into_iter()
        .filter(|e| *e > 0.0 && *e >= loudest / 1000.0)
        .collect();
    if speech.is_empty() {
        return;
    }
    let speech_rms = (speech.iter().sum::<f32>() / speech.len() as f32).sqrt();
    let noise_rms = speech_rms / 10f32.powf(snr_db / 20.0);
    let noise = white_noise(samples.len(), noise_rms, seed);
    for (s, n) in samples.iter_mut().zip(noise) {
        *s += n;
    }
}

/// `n` samples of white noise of RMS `rms`, from a xorshift generator
/// seeded with `seed` (the same seed, the same noise).
pub fn white_noise(n: usize, rms: f32, seed: u64) -> impl Iterator<Item = f32> {
    let mut state = seed | 1;
    (0..n).map(move |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Uniform in ±√3·rms has that RMS.
        let u = (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
        u * rms * 3f32.sqrt()
    })
}

/// Loudness at a glance: the RMS of `buckets` equal slices, and the peak.
pub fn preview(samples: &[f32], buckets: usize) -> (Vec<f32>, f32) {
    let peak = samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    if samples.is_empty() || buckets == 0 {
        return (Vec::new(), peak);
    }
    let size = samples.len().div_ceil(buckets);
    let rms = samples
        .chunks(size)
        .map(|c| {
            let r = (c.iter().map(|s| s * s).sum::<f32>() / c.len() as f32).sqrt();
            (r * 1000.0).round() / 1000.0
        })
        .collect();
    (rms, (peak * 1000.0).round() / 1000.0)
}
