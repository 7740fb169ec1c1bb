//! The BERT encoder behind the sentence vectors of CAAL's semantic layer
//! (`caal/src/understand/embed.rs`), written out for the one shape CAAL
//! runs: one short sentence (a handful of tokens) on a CPU core or two.
//!
//! Hand-written on purpose (the rule is a crate unless a benchmark says
//! otherwise). candle's BertModel, used before, runs a general matmul that
//! packs each weight matrix for every call: a 7-token sentence took 9–12 ms
//! (about 6 GFLOP/s for ~75 M multiply-adds), and the semantic layer's
//! decision p50 in `caal bench understand` was 13–15 ms. Here the weights
//! are int8 with one scale per row (10 MB, where f32's 42 MB came from
//! memory), and the dense layers run either
//!
//! - in integers where the CPU has AVX-512 VNNI (`vnni.rs`): activations
//!   as int16, 32 multiply-adds an instruction, on one thread: a 7-token
//!   sentence about 1.0 ms warm (3 tokens 0.53, 15 tokens 2.4), or
//! - in f32 elsewhere (`DenseRows`): each weight row widened in L1 and
//!   dotted with four tokens at a time, the bigger layers split between
//!   two cores: the same sentence 3.3 ms.
//!
//! With f32 weights this code gave candle's vectors to a cosine of 1.000000
//! (checked once, side by side); int8 rows move them by a cosine of
//! 0.9983–0.9997 and left every figure of `caal bench understand` unchanged,
//! and so did int16 activations (2026-11-25). int8 activations (twice as
//! fast again) and 4-bit weights (half the memory) were measured and
//! dropped: each lost lines of the benchmark's suites.
//!
//! A crate of its own so that test builds optimise it (an unoptimised
//! encoder is ~100× slower) while the rest of CAAL keeps fast debug builds.
//!
//! Layout follows the safetensors names of Hugging Face's `BertModel`
//! (with or without a `bert.` prefix); `hidden_act` must be `gelu` (erf).

use std::path::Path;

use pulp::Simd;
use safetensors::{Dtype, SafeTensors};

#[cfg(target_arch = "x86_64")]
mod vnni;

/// Whether dense layers run in integers (AVX-512 VNNI, see `vnni.rs`);
/// `CAAL_ENCODER_F32=1` keeps the f32 kernel (to compare the two).
#[cfg(target_arch = "x86_64")]
fn integers() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| vnni::available() && std::env::var_os("CAAL_ENCODER_F32").is_none())
}

/// Which kernel runs the dense layers on this CPU (vectors from different
/// kernels differ in their last digits: a cache of vectors names it).
pub fn kernel() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if integers() {
        return "int8 rows x int16 activations (AVX-512 VNNI)";
    }
    "int8 rows widened to f32"
}

/// The model's shape, from its `config.json`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Shape {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_act")]
    pub hidden_act: String,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_act() -> String {
    "gelu".into()
}

/// A dense layer `y = x·Wᵀ + b`.
struct Dense {
    /// int8, one scale per output row: row per output, or laid out for the
    /// integer kernel (`vnni::pack`) when `packed`.
    weights: Vec<i8>,
    packed: bool,
    scale: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// A loaded encoder.
pub struct Encoder {
    shape: Shape,
    /// Word vectors, one row per token id, f32 (only the sentence's rows
    /// are read).
    words: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
}

/// The tensors of one safetensors file, looked up by name.
struct Tensors<'a> {
    file: SafeTensors<'a>,
    prefix: &'static str,
}

impl Tensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let t = self
            .file
            .tensor(&full)
            .map_err(|e| format!("tensor {full}: {e}"))?;
        if t.shape() != shape {
            return Err(format!(
                "tensor {full} has shape {:?}, the config says {shape:?}",
                t.shape()
            ));
        }
        if t.dtype() != Dtype::F32 {
            return Err(format!(
                "tensor {full} is {:?}; only F32 is read",
                t.dtype()
            ));
        }
        Ok(t.data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn dense(&self, name: &str, outputs: usize, inputs: usize) -> Result<Dense, String> {
        let w = self.get(&format!("{name}.weight"), &[outputs, inputs])?;
        let mut weights: Vec<i8> = Vec::with_capacity(w.len());
        let mut scale = Vec::with_capacity(outputs);
        for row in w.chunks_exact(inputs) {
            let max = row.iter().fold(0f32, |m, x| m.max(x.abs()));
            let s = if max > 0.0 { max / 127.0 } else { 1.0 };
            // In range by construction: |x / s| ≤ 127.
            weights.extend(row.iter().map(|x| (x / s).round() as i8));
            scale.push(s);
        }
        #[cfg(target_arch = "x86_64")]
        let packed = integers() && vnni::fits(inputs, outputs);
        #[cfg(not(target_arch = "x86_64"))]
        let packed = false;
        #[cfg(target_arch = "x86_64")]
        if packed {
            weights = vnni::pack(&weights, inputs, outputs);
        }
        Ok(Dense {
            weights,
            packed,
            scale,
            bias: self.get(&format!("{name}.bias"), &[outputs])?,
            inputs,
            outputs,
        })
    }

    fn norm(&self, name: &str, size: usize) -> Result<Norm, String> {
        Ok(Norm {
            weight: self.get(&format!("{name}.weight"), &[size])?,
            bias: self.get(&format!("{name}.bias"), &[size])?,
        })
    }
}

impl Encoder {
    /// Reads `model.safetensors` in `dir` with the shape of its
    /// `config.json`.
    pub fn load(dir: &Path, shape: Shape) -> Result<Self, String> {
        if shape.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported (only \"gelu\")",
                shape.hidden_act
            ));
        }
        if shape.num_attention_heads == 0
            || !shape.hidden_size.is_multiple_of(shape.num_attention_heads)
        {
            return Err("hidden_size is not a multiple of num_attention_heads".into());
        }
        let bytes = std::fs::read(dir.join("model.safetensors"))
            .map_err(|e| format!("model.safetensors: {e}"))?;
        let file =
            SafeTensors::deserialize(&bytes).map_err(|e| format!("model.safetensors: {e}"))?;
        let prefix = if file.names().iter().any(|n| n.starts_with("bert.")) {
            "bert."
        } else {
            ""
        };
        let t = Tensors { file, prefix };
        let (h, i) = (shape.hidden_size, shape.intermediate_size);
        let words = {
            let full = format!("{prefix}embeddings.word_embeddings.weight");
            let info = t
                .file
                .tensor(&full)
                .map_err(|e| format!("tensor {full}: {e}"))?;
            let vocab = info.shape().first().copied().unwrap_or(0);
            t.get("embeddings.word_embeddings.weight", &[vocab, h])?
        };
        let mut layers = Vec::with_capacity(shape.num_hidden_layers);
        for n in 0..shape.num_hidden_layers {
            let at = format!("encoder.layer.{n}");
            layers.push(Layer {
                query: t.dense(&format!("{at}.attention.self.query"), h, h)?,
                key: t.dense(&format!("{at}.attention.self.key"), h, h)?,
                value: t.dense(&format!("{at}.attention.self.value"), h, h)?,
                attention_out: t.dense(&format!("{at}.attention.output.dense"), h, h)?,
                attention_norm: t.norm(&format!("{at}.attention.output.LayerNorm"), h)?,
                intermediate: t.dense(&format!("{at}.intermediate.dense"), i, h)?,
                output: t.dense(&format!("{at}.output.dense"), h, i)?,
                output_norm: t.norm(&format!("{at}.output.LayerNorm"), h)?,
            });
        }
        Ok(Self {
            words,
            positions: t.get(
                "embeddings.position_embeddings.weight",
                &[shape.max_position_embeddings, h],
            )?,
            token_type: t.get("embeddings.token_type_embeddings.weight", &[2, h])?,
            embeddings_norm: t.norm("embeddings.LayerNorm", h)?,
            layers,
            shape,
        })
    }

    /// The sentence vector of one tokenised sentence (its ids, with the
    /// tokenizer's [CLS] and [SEP]): the mean of the last layer's token
    /// vectors, made unit length.
    pub fn sentence(&self, ids: &[u32]) -> Vec<f32> {
        let run = || pulp::Arch::new().dispatch(Sentence { encoder: self, ids });
        #[cfg(target_arch = "x86_64")]
        if integers() {
            return run();
        }
        // The f32 kernel splits layers between threads: run on rayon's
        // pool, so that each layer's halves are handed between its
        // workers, never to and from this thread.
        rayon::scope(|_| run())
    }

    // Everything below is `inline(always)` so that it is compiled inside
    // the dispatch above, with the CPU's vector instructions (AVX2 and FMA
    // where there are), and LLVM vectorises the loops.
    #[inline(always)]
    fn sentence_inner<S: Simd>(&self, simd: S, ids: &[u32]) -> Vec<f32> {
        let h = self.shape.hidden_size;
        let tokens = ids.len().min(self.shape.max_position_embeddings);
        let vocab = self.words.len() / h;
        let mut x = vec![0f32; tokens * h];
        for (t, &id) in ids.iter().take(tokens).enumerate() {
            // An id outside the vocabulary reads as [UNK]-like zero.
            let id = id as usize;
            let word = (id < vocab).then(|| &self.words[id * h..(id + 1) * h]);
            let row = &mut x[t * h..(t + 1) * h];
            for (k, v) in row.iter_mut().enumerate() {
                *v = word.map_or(0.0, |w| w[k]) + self.positions[t * h + k] + self.token_type[k];
            }
        }
        let eps = self.shape.layer_norm_eps as f32;
        layer_norm(&mut x, &self.embeddings_norm, eps);
        let mut scratch = Scratch::new(tokens, &self.shape);
        for layer in &self.layers {
            self.layer(simd, layer, &mut x, tokens, &mut scratch, eps);
        }
        let mut mean = vec![0f32; h];
        for row in x.chunks_exact(h) {
            for (m, v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            mean.iter_mut().for_each(|v| *v /= norm);
        }
        mean
    }

    #[inline(always)]
    fn layer<S: Simd>(
        &self,
        simd: S,
        l: &Layer,
        x: &mut [f32],
        tokens: usize,
        s: &mut Scratch,
        eps: f32,
    ) {
        let h = self.shape.hidden_size;
        let heads = self.shape.num_attention_heads;
        let d = h / heads;
        dense(&l.query, x, &mut s.q);
        dense(&l.key, x, &mut s.k);
        dense(&l.value, x, &mut s.v);
        let scale = 1.0 / (d as f32).sqrt();
        for head in 0..heads {
            let at = head * d;
            for i in 0..tokens {
                let q = &s.q[i * h + at..i * h + at + d];
                let mut max = f32::MIN;
                for j in 0..tokens {
                    let k = &s.k[j * h + at..j * h + at + d];
                    let score = dot(simd, q, k) * scale;
                    s.scores[j] = score;
                    max = max.max(score);
                }
                let mut sum = 0.0;
                for p in &mut s.scores[..tokens] {
                    *p = (*p - max).exp();
                    sum += *p;
                }
                let out = &mut s.context[i * h + at..i * h + at + d];
                out.fill(0.0);
                for j in 0..tokens {
                    let p = s.scores[j] / sum;
                    let v = &s.v[j * h + at..j * h + at + d];
                    for (o, v) in out.iter_mut().zip(v) {
                        *o = p.mul_add(*v, *o);
                    }
                }
            }
        }
        dense(&l.attention_out, &s.context, &mut s.q);
        for (x, a) in x.iter_mut().zip(&s.q) {
            *x += a;
        }
        layer_norm(x, &l.attention_norm, eps);
        dense(&l.intermediate, x, &mut s.wide);
        for v in &mut s.wide {
            *v = gelu(*v);
        }
        dense(&l.output, &s.wide, &mut s.q);
        for (x, a) in x.iter_mut().zip(&s.q) {
            *x += a;
        }
        layer_norm(x, &l.output_norm, eps);
    }
}

/// One sentence's run, as pulp's dispatch takes it: `with_simd` is
/// compiled once per instruction set and the best the CPU has is called.
struct Sentence<'a> {
    encoder: &'a Encoder,
    ids: &'a [u32],
}

impl pulp::WithSimd for Sentence<'_> {
    type Output = Vec<f32>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Vec<f32> {
        self.encoder.sentence_inner(simd, self.ids)
    }
}

/// Buffers reused by every layer of one sentence.
struct Scratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    context: Vec<f32>,
    wide: Vec<f32>,
    scores: Vec<f32>,
}

impl Scratch {
    fn new(tokens: usize, shape: &Shape) -> Self {
        let h = tokens * shape.hidden_size;
        Self {
            q: vec![0.0; h],
            k: vec![0.0; h],
            v: vec![0.0; h],
            context: vec![0.0; h],
            wide: vec![0.0; tokens * shape.intermediate_size],
            scores: vec![0.0; tokens],
        }
    }
}

/// One dot product, in the CPU's vector width.
#[inline(always)]
fn dot<S: Simd>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let ((ha, ta), (hb, tb)) = (S::as_simd_f32s(a), S::as_simd_f32s(b));
    let mut acc = simd.splat_f32s(0.0);
    for (x, y) in ha.iter().zip(hb) {
        acc = simd.mul_add_f32s(*x, *y, acc);
    }
    simd.reduce_sum_f32s(acc) + ta.iter().zip(tb).map(|(x, y)| x * y).sum::<f32>()
}

/// Below this many multiply-adds a dense layer is not split between
/// threads: the hand-over would cost more than it saves.
const SPLIT_AT: usize = 1 << 19;

/// `out[t] = x[t]·Wᵀ + b` for every token row of `x`. In integers where the
/// weights are packed for them, on this thread (two threads were no faster:
/// handing half a layer to the other core cost what it saved); else in
/// f32, the output rows split in two halves run side by side (rayon) when
/// the layer is big enough. Inlined into the dispatched layer, so the
/// quantisation is compiled with the CPU's vector instructions.
#[inline(always)]
fn dense(layer: &Dense, x: &[f32], out: &mut [f32]) {
    let (k, n) = (layer.inputs, layer.outputs);
    let tokens = x.len() / k;
    #[cfg(target_arch = "x86_64")]
    if layer.packed {
        let w = vnni::Weights {
            packed: &layer.weights,
            scale: &layer.scale,
            bias: &layer.bias,
        };
        vnni::dense(&w, &vnni::Quantized::new(x, k), out);
        return;
    }
    let run = |rows: std::ops::Range<usize>| DenseRows::run(layer, x, rows);
    let halves = if tokens * n * k >= SPLIT_AT {
        let (a, b) = rayon::join(|| run(0..n / 2), || run(n / 2..n));
        [(0, a), (n / 2, b)]
    } else {
        [(0, run(0..n)), (n, Vec::new())]
    };
    // Each half is output-major; `out` is token-major.
    for (start, rows) in halves {
        for (i, row) in rows.chunks_exact(tokens.max(1)).enumerate() {
            for (t, v) in row.iter().enumerate() {
                out[t * n + start + i] = *v;
            }
        }
    }
}

/// Some output rows of one dense layer, as pulp's dispatch takes it
/// (compiled per instruction set, the best the CPU has is run).
struct DenseRows<'a> {
    layer: &'a Dense,
    x: &'a [f32],
    rows: std::ops::Range<usize>,
}

impl DenseRows<'_> {
    fn run(layer: &Dense, x: &[f32], rows: std::ops::Range<usize>) -> Vec<f32> {
        pulp::Arch::new().dispatch(DenseRows { layer, x, rows })
    }
}

impl pulp::WithSimd for DenseRows<'_> {
    type Output = Vec<f32>;

    /// Each weight row is read from memory once per sentence (as int8, a
    /// quarter of f32's bytes), widened to f32 in L1, and dotted with the
    /// tokens four at a time. Output-major: `rows × tokens`.
    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Vec<f32> {
        let Self { layer, x, rows } = self;
        let k = layer.inputs;
        let tokens = x.len() / k;
        let mut out = Vec::with_capacity(rows.len() * tokens);
        let mut w = vec![0f32; k];
        for o in rows {
            for (w, q) in w.iter_mut().zip(&layer.weights[o * k..(o + 1) * k]) {
                *w = f32::from(*q);
            }
            let mut t = 0;
            while t < tokens {
                let block = (tokens - t).min(4);
                // A short block repeats its last row; those sums are not kept.
                let rows: [&[f32]; 4] = std::array::from_fn(|r| {
                    let at = t + r.min(block - 1);
                    &x[at * k..(at + 1) * k]
                });
                let sums = dot4(simd, &w, rows);
                for sum in &sums[..block] {
                    out.push(sum * layer.scale[o] + layer.bias[o]);
                }
                t += block;
            }
        }
        out
    }
}

/// Four dot products of one weight row with four token rows, two vectors
/// at a time: eight accumulators, so the multiply-adds do not wait on each
/// other.
#[inline(always)]
fn dot4<S: Simd>(simd: S, w: &[f32], x: [&[f32]; 4]) -> [f32; 4] {
    let (wh, wt) = S::as_simd_f32s(w);
    let n = wh.len();
    let xh = x.map(|r| &S::as_simd_f32s(r).0[..n]);
    let zero = simd.splat_f32s(0.0);
    let (mut a, mut b) = ([zero; 4], [zero; 4]);
    for p in 0..n / 2 {
        let (w0, w1) = (wh[2 * p], wh[2 * p + 1]);
        for r in 0..4 {
            a[r] = simd.mul_add_f32s(w0, xh[r][2 * p], a[r]);
            b[r] = simd.mul_add_f32s(w1, xh[r][2 * p + 1], b[r]);
        }
    }
    if n % 2 == 1 {
        for r in 0..4 {
            a[r] = simd.mul_add_f32s(wh[n - 1], xh[r][n - 1], a[r]);
        }
    }
    let at = n * S::F32_LANES;
    // Plain loops, no closures: a closure is compiled without the CPU's
    // vector instructions and its every vector add became a call (a third
    // of the encoder's time in a profile).
    let mut sums = [0f32; 4];
    for r in 0..4 {
        let mut tail = 0f32;
        for i in 0..wt.len() {
            tail += wt[i] * x[r][at + i];
        }
        sums[r] = simd.reduce_sum_f32s(simd.add_f32s(a[r], b[r])) + tail;
    }
    sums
}

#[inline(always)]
fn layer_norm(x: &mut [f32], norm: &Norm, eps: f32) {
    let h = norm.weight.len();
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
            *v = (*v - mean) * inv * w + b;
        }
    }
}

/// BERT's GELU, the exact one (with erf).
#[inline(always)]
fn gelu(v: f32) -> f32 {
    0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf as a rational function of x on [-4, 4] (clamped outside, where erf
/// is ±1 within f32): Eigen's `generic_fast_erf_float`. Branch-free, so the
/// GELU loop vectorises; libm's `erff`, called once per value (~9,000 a
/// token), was a tenth of the encoder's time. Within 1e-6 of libm (test).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2.mul_add(-2.726_142_3e-10, 2.770_681_4e-8);
    p = p.mul_add(x2, -2.101_024e-6);
    p = p.mul_add(x2, -5.692_506_4e-5);
    p = p.mul_add(x2, -7.349_906_3e-4);
    p = p.mul_add(x2, -2.954_600_3e-3);
    p = p.mul_add(x2, -1.609_603_3e-2);
    let mut q = x2.mul_add(-1.456_607_2e-5, -2.133_740_6e-4);
    q = q.mul_add(x2, -1.682_827e-3);
    q = q.mul_add(x2, -7.373_329e-3);
    q = q.mul_add(x2, -1.426_474e-2);
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reproducible values in [-0.5, 0.5): a linear congruential sequence.
    fn noise(mut seed: u32) -> impl FnMut() -> f32 {
        move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        }
    }

    /// How far rounding a token's activations to int16 can move one sum
    /// (none in f32): half a step of each, times its weight.
    fn activation_error(weights: &[f32], x: &[f32], integers: bool) -> f32 {
        if !integers {
            return 0.0;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            let step = max / vnni::limit(x.len());
            weights.iter().map(|w| w.abs() * step / 2.0).sum::<f32>()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (weights, x);
            unreachable!("layers are packed for integers on x86-64 only")
        }
    }

    /// The integer kernel against the f32 one on the same int8 weights,
    /// with a block of sixteen tokens and a short one after it; and the
    /// packed layout puts every weight where `at` says.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_integer_kernel_sums_what_the_f32_kernel_sums() {
        if !vnni::available() {
            eprintln!("no AVX-512 VNNI on this CPU: only the f32 kernel runs here");
            return;
        }
        let (k, n, tokens) = (96, 48, 19);
        let mut next = noise(11);
        let rows: Vec<i8> = (0..n * k).map(|_| (next() * 254.0) as i8).collect();
        let scale: Vec<f32> = (0..n).map(|_| (next() + 0.6) / 100.0).collect();
        let bias: Vec<f32> = (0..n).map(|_| next()).collect();
        // One token far larger than the rest, one all zero.
        let mut x: Vec<f32> = (0..tokens * k).map(|_| next() * 4.0).collect();
        x[3 * k..4 * k].iter_mut().for_each(|v| *v *= 1000.0);
        x[5 * k..6 * k].fill(0.0);
        let packed = vnni::pack(&rows, k, n);
        for o in 0..n {
            for i in 0..k {
                assert_eq!(
                    packed[vnni::at(k, o, i)],
                    rows[o * k + i],
                    "row {o} input {i}"
                );
            }
        }
        let plain = Dense {
            weights: rows.clone(),
            packed: false,
            scale: scale.clone(),
            bias: bias.clone(),
            inputs: k,
            outputs: n,
        };
        let integer = Dense {
            weights: packed,
            packed: true,
            scale: scale.clone(),
            bias: bias.clone(),
            inputs: k,
            outputs: n,
        };
        let (mut want, mut got) = (vec![0f32; tokens * n], vec![0f32; tokens * n]);
        dense(&plain, &x, &mut want);
        dense(&integer, &x, &mut got);
        for t in 0..tokens {
            for o in 0..n {
                let w: Vec<f32> = rows[o * k..(o + 1) * k]
                    .iter()
                    .map(|q| f32::from(*q) * scale[o])
                    .collect();
                let bound = activation_error(&w, &x[t * k..(t + 1) * k], true)
                    + want[t * n + o].abs() * 1e-5
                    + 1e-5;
                let (a, b) = (want[t * n + o], got[t * n + o]);
                assert!(
                    (a - b).abs() <= bound,
                    "token {t} output {o}: {b} for {a} (bound {bound})"
                );
            }
        }
        // The zero token gives the biases.
        assert_eq!(&got[5 * n..6 * n], &bias[..]);
    }

    #[test]
    fn erf_is_libms_within_a_millionth() {
        let mut worst = 0f32;
        for i in -80_000..=80_000 {
            let x = i as f32 / 10_000.0;
            worst = worst.max((erf(x) - libm::erff(x)).abs());
        }
        assert!(worst < 1e-6, "erf off by {worst}");
    }

    #[test]
    fn int8_rows_come_back_within_half_a_step() {
        let dir = tempfile::tempdir().expect("temp dir");
        // A 3×5 layer whose rows have very different sizes: one scale per
        // row keeps the small row's detail.
        let w: Vec<f32> = vec![
            0.5, -0.25, 0.125, 0.0, -0.5, //
            0.001, 0.002, -0.003, 0.0005, 0.0, //
            0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        let bias = vec![0.1f32, -0.2, 0.3];
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let (wb, bb) = (bytes(&w), bytes(&bias));
        let tensors = [
            (
                "l.weight",
                safetensors::tensor::TensorView::new(Dtype::F32, vec![3, 5], &wb).expect("view"),
            ),
            (
                "l.bias",
                safetensors::tensor::TensorView::new(Dtype::F32, vec![3], &bb).expect("view"),
            ),
        ];
        let file = dir.path().join("t.safetensors");
        safetensors::serialize_to_file(tensors, None, &file).expect("write");
        let data = std::fs::read(&file).expect("read");
        let t = Tensors {
            file: SafeTensors::deserialize(&data).expect("parse"),
            prefix: "",
        };
        let layer = t.dense("l", 3, 5).expect("dense");
        for (row, orig) in w.chunks_exact(5).enumerate() {
            let step = layer.scale[row];
            for (i, x) in orig.iter().enumerate() {
                let back = f32::from(layer.weights[row * 5 + i]) * step;
                assert!(
                    (back - x).abs() <= step / 2.0 + 1e-9,
                    "row {row} col {i}: {back} for {x}"
                );
            }
        }
        // And a product through the kernel: two tokens.
        let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, -1.0, 0.5, 0.0, 2.0, 1.0];
        let mut out = [0f32; 6];
        dense(&layer, &x, &mut out);
        for t in 0..2 {
            for o in 0..3 {
                let want: f32 = (0..5).map(|i| w[o * 5 + i] * x[t * 5 + i]).sum::<f32>() + bias[o];
                let got = out[t * 3 + o];
                assert!(
                    (got - want).abs() < 0.01,
                    "token {t} output {o}: {got} for {want}"
                );
            }
        }
        // A layer big enough to be split between two threads: the halves
        // come back in their places.
        let (k, n, tokens) = (384, 384, 5);
        let mut next = noise(7);
        let big: Vec<f32> = (0..k * n).map(|_| next()).collect();
        let big_bias: Vec<f32> = (0..n).map(|_| next()).collect();
        let xs: Vec<f32> = (0..tokens * k).map(|_| next()).collect();
        assert!(tokens * n * k >= SPLIT_AT);
        let (wb, bb) = (bytes(&big), bytes(&big_bias));
        let tensors = [
            (
                "b.weight",
                safetensors::tensor::TensorView::new(Dtype::F32, vec![n, k], &wb).expect("view"),
            ),
            (
                "b.bias",
                safetensors::tensor::TensorView::new(Dtype::F32, vec![n], &bb).expect("view"),
            ),
        ];
        let file = dir.path().join("b.safetensors");
        safetensors::serialize_to_file(tensors, None, &file).expect("write");
        let data = std::fs::read(&file).expect("read");
        let b = Tensors {
            file: SafeTensors::deserialize(&data).expect("parse"),
            prefix: "",
        };
        let layer = b.dense("b", n, k).expect("dense");
        let mut out = vec![0f32; tokens * n];
        dense(&layer, &xs, &mut out);
        for t in 0..tokens {
            for o in 0..n {
                let want: f32 =
                    (0..k).map(|i| big[o * k + i] * xs[t * k + i]).sum::<f32>() + big_bias[o];
                let got = out[t * n + o];
                // Each weight is off by at most half its row's step; in
                // integers each activation by half its token's step too.
                let row = &xs[t * k..(t + 1) * k];
                let bound = layer.scale[o] / 2.0 * row.iter().map(|x| x.abs()).sum::<f32>()
                    + activation_error(&big[o * k..(o + 1) * k], row, layer.packed)
                    + 1e-4;
                assert!(
                    (got - want).abs() <= bound,
                    "token {t} output {o}: {got} for {want} (bound {bound})"
                );
            }
        }
        // A shape the file does not have is named.
        let err = t.dense("l", 5, 3).err().unwrap_or_default();
        assert!(
            err.contains("shape [3, 5]") && err.contains("[5, 3]"),
            "{err}"
        );
    }
}
