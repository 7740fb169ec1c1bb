//! A CTranslate2 Whisper model (faster-whisper's `model.bin` + `vocabulary.txt`)
//! rewritten as the ggml file whisper.cpp loads.
//!
//! No ggml Whisper model is published where this project can fetch from, but
//! a CTranslate2 one is. The two hold the same weights under other names:
//! CTranslate2 fuses the self-attention query/key/value projections into one
//! matrix (and cross-attention's key/value into another), keeps a zero bias
//! for the key (Whisper's key has none), and leaves out the mel filters,
//! which whisper.cpp reads from its file. So: split the fused weights, drop
//! the key's bias, compute the 80 Slaney mel filters for a 400-point FFT at
//! 16 kHz (as librosa does, which is where OpenAI's filters come from), and
//! write the byte-level BPE vocabulary as raw bytes.
//!
//! The big matrices are written as f16, or (a file named `…-q8_0.bin`) as
//! ggml's Q8_0: blocks of 32 values, each an f16 scale and 32 signed bytes,
//! which whisper.cpp multiplies with integer dot products. Hand-written: no
//! crate writes ggml's block formats, and the block is ggml's reference
//! quantizer (`quantize_row_q8_0_ref`) line for line.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

const GGML_MAGIC: u32 = 0x6767_6d6c;
/// ggml's tensor types and file types, and the version of its block
/// formats a file type carries (`ftype + 1000 × version`).
const GGML_TYPE_F16: usize = 1;
const GGML_TYPE_Q8_0: usize = 8;
const GGML_FTYPE_MOSTLY_F16: usize = 1;
const GGML_FTYPE_MOSTLY_Q8_0: usize = 7;
const GGML_QNT_VERSION: usize = 2;
const GGML_QNT_VERSION_FACTOR: usize = 1000;
const Q8_0_BLOCK: usize = 32;

/// How the big matrices (the layers' and the token embedding) are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    F16,
    /// 8 bits a value in blocks of 32 with an f16 scale each.
    Q8_0,
}

impl Weights {
    /// As a model file's name says: `…-q8_0.bin` is Q8_0, any other f16.
    pub fn of_file(path: &Path) -> Weights {
        let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase());
        match name {
            Some(n) if n.ends_with("-q8_0.bin") => Weights::Q8_0,
            _ => Weights::F16,
        }
    }
}

/// `values` (a whole number of blocks) as Q8_0 blocks.
fn q8_0(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() / Q8_0_BLOCK * (2 + Q8_0_BLOCK));
    for block in values.chunks(Q8_0_BLOCK) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&half::f16::from_f32(d).to_le_bytes());
        // `as` saturates and the value is within ±127: the cast is exact.
        out.extend(block.iter().map(|v| (v * id).round() as i8 as u8));
    }
    out
}
const SAMPLE_RATE: f64 = 16_000.0;
const N_FFT: usize = 400;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("cannot read {path}: {source}; run `caal model install` (it fetches the model)")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a CTranslate2 Whisper model: {problem}")]
    Format { path: String, problem: String },
}

/// One variable of a CTranslate2 model.
struct Variable<'a> {
    dims: Vec<usize>,
    dtype: u8,
    bytes: &'a [u8],
}

impl Variable<'_> {
    /// The values as f32 (CTranslate2 stores weights as f32 or f16).
    fn floats(&self) -> Option<Vec<f32>> {
        match self.dtype {
            0 => Some(
                self.bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            4 => Some(
                self.bytes
                    .chunks_exact(2)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect(),
            ),
            _ => None,
        }
    }

    /// A scalar integer variable (`num_heads`).
    fn int(&self) -> Option<usize> {
        match (self.dtype, self.bytes) {
            (1, [b]) => Some(usize::from(*b)),
            (2, [a, b]) => usize::try_from(i16::from_le_bytes([*a, *b])).ok(),
            (3, [a, b, c, d]) => usize::try_from(i32::from_le_bytes([*a, *b, *c, *d])).ok(),
            _ => None,
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let bytes = self.data.get(self.at..end)?;
        self.at = end;
        Some(bytes)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A length-prefixed, NUL-terminated string.
    fn string(&mut self) -> Option<&'a str> {
        let len = usize::from(self.u16()?);
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes.strip_suffix(&[0])?).ok()
    }
}

/// The variables of a CTranslate2 `model.bin` (binary version 6), by name,
/// aliases resolved.
fn parse_model(data: &[u8]) -> Result<HashMap<String, Variable<'_>>, String> {
    let mut r = Reader { data, at: 0 };
    let truncated = || "the file ends early".to_owned();
    let version = r.u32().ok_or_else(truncated)?;
    if version != 6 {
        return Err(format!("binary version {version}, expected 6"));
    }
    let spec = r.string().ok_or_else(truncated)?;
    if spec != "WhisperSpec" {
        return Err(format!("its spec is {spec:?}, expected \"WhisperSpec\""));
    }
    let _revision = r.u32().ok_or_else(truncated)?;
    let count = r.u32().ok_or_else(truncated)?;
    let mut vars = HashMap::new();
    for _ in 0..count {
        let name = r.string().ok_or_else(truncated)?.to_owned();
        let rank = usize::from(r.u8().ok_or_else(truncated)?);
        let dims = (0..rank)
            .map(|_| r.u32().map(|d| d as usize))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(truncated)?;
        let dtype = r.u8().ok_or_else(truncated)?;
        let len = r.u32().ok_or_else(truncated)? as usize;
        let bytes = r.take(len).ok_or_else(truncated)?;
        vars.insert(name, Variable { dims, dtype, bytes });
    }
    if let Some(aliases) = r.u32() {
        for _ in 0..aliases {
            let alias = r.string().ok_or_else(truncated)?.to_owned();
            let target = r.string().ok_or_else(truncated)?;
            if let Some(v) = vars.get(target) {
                let copy = Variable {
                    dims: v.dims.clone(),
                    dtype: v.dtype,
                    bytes: v.bytes,
                };
                vars.insert(alias, copy);
            }
        }
    }
    Ok(vars)
}

/// GPT-2's byte-level alphabet, reversed: each printable stand-in character
/// back to the byte it stands for.
fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).expect("256..=323 are characters")
        };
        map.insert(c, b);
    }
    map
}

fn hz_to_mel(hz: f64) -> f64 {
    // Slaney's scale: linear below 1 kHz, logarithmic above.
    let f_sp = 200.0 / 3.0;
    let min_log_mel = 1000.0 / f_sp;
    let log_step = 6.4f64.ln() / 27.0;
    if hz >= 1000.0 {
        min_log_mel + (hz / 1000.0).ln() / log_step
    } else {
        hz / f_sp
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    let f_sp = 200.0 / 3.0;
    let min_log_mel = 1000.0 / f_sp;
    let log_step = 6.4f64.ln() / 27.0;
    if mel >= min_log_mel {
        1000.0 * ((mel - min_log_mel) * log_step).exp()
    } else {
        mel * f_sp
    }
}

/// `librosa.filters.mel(sr=16000, n_fft=400, n_mels)`: Slaney-normalised
/// triangular filters, `n_mels` rows of `N_FFT / 2 + 1` weights.
pub fn mel_filters(n_mels: usize) -> Vec<f32> {
    let bins = N_FFT / 2 + 1;
    let fft_freqs: Vec<f64> = (0..bins)
        .map(|i| i as f64 * (SAMPLE_RATE / 2.0) / (bins - 1) as f64)
        .collect();
    let top = hz_to_mel(SAMPLE_RATE / 2.0);
    let mel_f: Vec<f64> = (0..n_mels + 2)
        .map(|i| mel_to_hz(top * i as f64 / (n_mels + 1) as f64))
        .collect();
    let mut weights = Vec::with_capacity(n_mels * bins);
    for m in 0..n_mels {
        let enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
        for &f in &fft_freqs {
            let lower = (f - mel_f[m]) / (mel_f[m + 1] - mel_f[m]);
            let upper = (mel_f[m + 2] - f) / (mel_f[m + 2] - mel_f[m + 1]);
            weights.push((lower.min(upper).max(0.0) * enorm) as f32);
        }
    }
    weights
}

/// What a converted model is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Converted {
    pub n_vocab: usize,
    pub audio_layers: usize,
    pub text_layers: usize,
    pub state: usize,
    pub tensors: usize,
}

/// Writes `out` (through a temporary file renamed into place, so a reader
/// never sees half a model) from the CTranslate2 model in `ct2_dir`, its
/// matrices stored as its name says (`Weights::of_file`).
pub fn convert(ct2_dir: &Path, out: &Path) -> Result<Converted, ConvertError> {
    convert_as(ct2_dir, out, Weights::of_file(out))
}

/// `convert`, the matrices stored as `weights`.
pub fn convert_as(ct2_dir: &Path, out: &Path, weights: Weights) -> Result<Converted, ConvertError> {
    let read = |name: &str| {
        let path = ct2_dir.join(name);
        std::fs::read(&path).map_err(|source| ConvertError::Read {
            path: path.display().to_string(),
            source,
        })
    };
    let model_path = ct2_dir.join("model.bin").display().to_string();
    let bad = |problem: String| ConvertError::Format {
        path: model_path.clone(),
        problem,
    };
    let data = read("model.bin")?;
    let vocabulary = String::from_utf8(read("vocabulary.txt")?)
        .map_err(|_| bad("vocabulary.txt is not UTF-8".into()))?;
    let vars = parse_model(&data).map_err(&bad)?;

    let get = |name: &str| {
        vars.get(name)
            .ok_or_else(|| bad(format!("it has no variable {name}")))
    };
    let floats = |name: &str| {
        get(name)?
            .floats()
            .ok_or_else(|| bad(format!("{name} is neither f32 nor f16")))
    };
    let dim = |name: &str, i: usize| {
        get(name)?
            .dims
            .get(i)
            .copied()
            .ok_or_else(|| bad(format!("{name} has fewer than {} dimensions", i + 1)))
    };
    let layers = |prefix: &str| {
        (0..)
            .take_while(|i| vars.contains_key(&format!("{prefix}/layer_{i}/ffn/linear_0/weight")))
            .count()
    };
    let heads = |name: &str| {
        get(name)?
            .int()
            .ok_or_else(|| bad(format!("{name} is not an integer")))
    };

    let n_vocab = dim("decoder/embeddings/weight", 0)?;
    let state = dim("decoder/embeddings/weight", 1)?;
    let audio_state = dim("encoder/position_encodings/encodings", 1)?;
    let n_mels = dim("encoder/conv1/weight", 1)?;
    let audio_layers = layers("encoder");
    let text_layers = layers("decoder");
    if audio_layers == 0 || text_layers == 0 {
        return Err(bad("it has no encoder or decoder layers".into()));
    }
    let hparams = [
        n_vocab,
        dim("encoder/position_encodings/encodings", 0)?,
        audio_state,
        heads("encoder/num_heads")?,
        audio_layers,
        dim("decoder/position_encodings/encodings", 0)?,
        state,
        heads("decoder/num_heads")?,
        text_layers,
        n_mels,
        match weights {
            Weights::F16 => GGML_FTYPE_MOSTLY_F16,
            Weights::Q8_0 => GGML_FTYPE_MOSTLY_Q8_0 + GGML_QNT_VERSION_FACTOR * GGML_QNT_VERSION,
        },
    ];
    // Q8_0 blocks run along a matrix's rows: every row a whole number of them.
    if weights == Weights::Q8_0 && (state % Q8_0_BLOCK != 0 || audio_state % Q8_0_BLOCK != 0) {
        return Err(bad(format!(
            "its widths ({state}, {audio_state}) are no multiple of {Q8_0_BLOCK}: convert it to f16 (a file name without -q8_0)"
        )));
    }

    let byte_of = unicode_to_byte();
    // Ordinary tokens and <|endoftext|>; whisper.cpp names the special
    // tokens after it itself (it adds them as "extra tokens").
    let mut tokens = Vec::new();
    for (i, line) in vocabulary.lines().enumerate() {
        let bytes = if line.starts_with("<|") {
            line.as_bytes().to_vec()
        } else {
            line.chars()
                .map(|c| byte_of.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| {
                    bad(format!(
                        "vocabulary.txt line {} ({line:?}) is not byte-level BPE",
                        i + 1
                    ))
                })?
        };
        let end = line == "<|endoftext|>";
        tokens.push(bytes);
        if end {
            break;
        }
    }

    // A name of its own, so two processes converting at once do not collide.
    let tmp = out.with_extension(format!(
        "part-{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    ));
    let write_err = |source: std::io::Error| ConvertError::Write {
        path: out.display().to_string(),
        source,
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(write_err)?;
    }
    let file = std::fs::File::create(&tmp).map_err(write_err)?;
    let mut w = GgmlWriter {
        out: BufWriter::new(file),
        tensors: 0,
        weights,
    };
    let mut body = || -> Result<(), ConvertError> {
        w.u32(GGML_MAGIC).map_err(write_err)?;
        for h in hparams {
            w.i32(h).map_err(write_err)?;
        }
        w.i32(n_mels).map_err(write_err)?;
        w.i32(N_FFT / 2 + 1).map_err(write_err)?;
        for f in mel_filters(n_mels) {
            w.out.write_all(&f.to_le_bytes()).map_err(write_err)?;
        }
        w.i32(tokens.len()).map_err(write_err)?;
        for t in &tokens {
            w.i32(t.len()).map_err(write_err)?;
            w.out.write_all(t).map_err(write_err)?;
        }

        // Encoder.
        let conv = |w: &mut GgmlWriter, n: usize| -> Result<(), ConvertError> {
            let weight = format!("encoder/conv{n}/weight");
            let dims = get(&weight)?.dims.clone();
            w.tensor(
                &format!("encoder.conv{n}.weight"),
                &dims,
                &floats(&weight)?,
                true,
            )
            .map_err(write_err)?;
            let bias = floats(&format!("encoder/conv{n}/bias"))?;
            w.tensor(
                &format!("encoder.conv{n}.bias"),
                &[bias.len(), 1],
                &bias,
                false,
            )
            .map_err(write_err)
        };
        conv(&mut w, 1)?;
        conv(&mut w, 2)?;
        let pe = floats("encoder/position_encodings/encodings")?;
        w.tensor(
            "encoder.positional_embedding",
            &get("encoder/position_encodings/encodings")?.dims,
            &pe,
            false,
        )
        .map_err(write_err)?;
        for i in 0..audio_layers {
            let (from, to) = (format!("encoder/layer_{i}"), format!("encoder.blocks.{i}"));
            w.self_attention(&floats, &from, &to, audio_state)?;
            w.feed_forward(&floats, &from, &to, audio_state)?;
        }
        w.norm(&floats, "encoder/layer_norm", "encoder.ln_post")?;

        // Decoder.
        let pe = floats("decoder/position_encodings/encodings")?;
        w.tensor(
            "decoder.positional_embedding",
            &get("decoder/position_encodings/encodings")?.dims,
            &pe,
            false,
        )
        .map_err(write_err)?;
        let embeddings = floats("decoder/embeddings/weight")?;
        w.matrix(
            "decoder.token_embedding.weight",
            &[n_vocab, state],
            &embeddings,
        )?;
        for i in 0..text_layers {
            let (from, to) = (format!("decoder/layer_{i}"), format!("decoder.blocks.{i}"));
            w.self_attention(&floats, &from, &to, state)?;
            w.norm(
                &floats,
                &format!("{from}/attention/layer_norm"),
                &format!("{to}.cross_attn_ln"),
            )?;
            w.linear(
                &floats,
                &format!("{from}/attention/linear_0"),
                &format!("{to}.cross_attn.query"),
                state,
            )?;
            w.fused(
                &floats,
                &format!("{from}/attention/linear_1"),
                &format!("{to}.cross_attn"),
                &["key", "value"],
                state,
            )?;
            w.linear(
                &floats,
                &format!("{from}/attention/linear_2"),
                &format!("{to}.cross_attn.out"),
                state,
            )?;
            w.feed_forward(&floats, &from, &to, state)?;
        }
        w.norm(&floats, "decoder/layer_norm", "decoder.ln")?;
        w.out.flush().map_err(write_err)?;
        w.out.get_ref().sync_all().map_err(write_err)
    };
    let written = body();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(write_err)?;
    Ok(Converted {
        n_vocab,
        audio_layers,
        text_layers,
        state,
        tensors: w.tensors,
    })
}

struct GgmlWriter {
    out: BufWriter<std::fs::File>,
    tensors: usize,
    weights: Weights,
}

type Floats<'f> = dyn Fn(&str) -> Result<Vec<f32>, ConvertError> + 'f;

impl GgmlWriter {
    fn u32(&mut self, v: u32) -> std::io::Result<()> {
        self.out.write_all(&v.to_le_bytes())
    }

    fn i32(&mut self, v: usize) -> std::io::Result<()> {
        let v = i32::try_from(v).map_err(std::io::Error::other)?;
        self.out.write_all(&v.to_le_bytes())
    }

    /// One tensor: dims as PyTorch has them (outermost first), written
    /// innermost first as ggml wants; f16 for matrices, f32 otherwise.
    fn tensor(
        &mut self,
        name: &str,
        dims: &[usize],
        data: &[f32],
        f16: bool,
    ) -> std::io::Result<()> {
        let ttype = if f16 { GGML_TYPE_F16 } else { 0 };
        self.header(name, dims, ttype)?;
        if f16 {
            for v in data {
                self.out.write_all(&half::f16::from_f32(*v).to_le_bytes())?;
            }
        } else {
            for v in data {
                self.out.write_all(&v.to_le_bytes())?;
            }
        }
        self.tensors += 1;
        Ok(())
    }

    fn header(&mut self, name: &str, dims: &[usize], ttype: usize) -> std::io::Result<()> {
        self.i32(dims.len())?;
        self.i32(name.len())?;
        self.i32(ttype)?;
        for d in dims.iter().rev() {
            self.i32(*d)?;
        }
        self.out.write_all(name.as_bytes())
    }

    /// A matrix whisper.cpp keeps in the file's weight type (`weights`).
    fn matrix(&mut self, name: &str, dims: &[usize], data: &[f32]) -> Result<(), ConvertError> {
        let written = match self.weights {
            Weights::F16 => self.tensor(name, dims, data, true),
            Weights::Q8_0 => self
                .header(name, dims, GGML_TYPE_Q8_0)
                .and_then(|()| self.out.write_all(&q8_0(data)))
                .map(|()| self.tensors += 1),
        };
        written.map_err(|source| ConvertError::Write {
            path: name.to_owned(),
            source,
        })
    }

    /// A layer's self-attention: its norm, the fused query/key/value, the output.
    fn self_attention(
        &mut self,
        floats: &Floats<'_>,
        from: &str,
        to: &str,
        state: usize,
    ) -> Result<(), ConvertError> {
        self.norm(
            floats,
            &format!("{from}/self_attention/layer_norm"),
            &format!("{to}.attn_ln"),
        )?;
        self.fused(
            floats,
            &format!("{from}/self_attention/linear_0"),
            &format!("{to}.attn"),
            &["query", "key", "value"],
            state,
        )?;
        self.linear(
            floats,
            &format!("{from}/self_attention/linear_1"),
            &format!("{to}.attn.out"),
            state,
        )
    }

    /// A layer's feed-forward block: its norm and the two linear layers.
    fn feed_forward(
        &mut self,
        floats: &Floats<'_>,
        from: &str,
        to: &str,
        state: usize,
    ) -> Result<(), ConvertError> {
        self.norm(
            floats,
            &format!("{from}/ffn/layer_norm"),
            &format!("{to}.mlp_ln"),
        )?;
        self.linear(
            floats,
            &format!("{from}/ffn/linear_0"),
            &format!("{to}.mlp.0"),
            state,
        )?;
        self.linear(
            floats,
            &format!("{from}/ffn/linear_1"),
            &format!("{to}.mlp.2"),
            4 * state,
        )
    }

    fn norm(&mut self, floats: &Floats<'_>, from: &str, to: &str) -> Result<(), ConvertError> {
        let gamma = floats(&format!("{from}/gamma"))?;
        let beta = floats(&format!("{from}/beta"))?;
        self.write(&format!("{to}.weight"), &[gamma.len()], &gamma)?;
        self.write(&format!("{to}.bias"), &[beta.len()], &beta)
    }

    /// A linear layer whose weight is `[rows, cols]`.
    fn linear(
        &mut self,
        floats: &Floats<'_>,
        from: &str,
        to: &str,
        cols: usize,
    ) -> Result<(), ConvertError> {
        let weight = floats(&format!("{from}/weight"))?;
        let bias = floats(&format!("{from}/bias"))?;
        self.matrix(
            &format!("{to}.weight"),
            &[weight.len() / cols, cols],
            &weight,
        )?;
        self.write(&format!("{to}.bias"), &[bias.len()], &bias)
    }

    /// A fused projection split into its parts (`state` rows each); the key
    /// has no bias in Whisper, so its (zero) bias is left out.
    fn fused(
        &mut self,
        floats: &Floats<'_>,
        from: &str,
        to: &str,
        parts: &[&str],
        state: usize,
    ) -> Result<(), ConvertError> {
        let weight = floats(&format!("{from}/weight"))?;
        let bias = floats(&format!("{from}/bias"))?;
        for (i, part) in parts.iter().enumerate() {
            let rows = &weight[i * state * state..(i + 1) * state * state];
            self.matrix(&format!("{to}.{part}.weight"), &[state, state], rows)?;
            if *part != "key" {
                let b = &bias[i * state..(i + 1) * state];
                self.write(&format!("{to}.{part}.bias"), &[state], b)?;
            }
        }
        Ok(())
    }

    /// A vector (a norm's weights, a bias), kept as f32.
    fn write(&mut self, name: &str, dims: &[usize], data: &[f32]) -> Result<(), ConvertError> {
        self.tensor(name, dims, data, false)
            .map_err(|source| ConvertError::Write {
                path: name.to_owned(),
                source,
            })
    }
}
