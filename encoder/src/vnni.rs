//! Dense layers in integers, where the CPU has AVX-512 VNNI: int8 weights
//! (one scale per output row) times the tokens' activations as int16 (one
//! scale per token), summed in int32 by `vpdpwssd`, 32 multiply-adds an
//! instruction. The f32 kernel (`DenseRows`) widens each weight to f32 and
//! reached about a third of its peak on this 2-core machine (a 7-token
//! sentence 3.3 ms warm, the same sentence here about 1 ms). No crate does
//! int8×int16 products for one short sentence: hand-written for that.
//!
//! The weights are laid out for it at load ([`pack`]): sixteen output rows
//! side by side, two inputs each, so one 512-bit register holds a pair of
//! inputs for sixteen outputs, each token's pair is broadcast to it, and the
//! sixteen sums stay in sixteen lanes (no sum across a register per output).
//!
//! int16 activations, not int8: a sentence's activations have a few large
//! dimensions, and int8 would round the rest coarsely. At 13–15 bits the
//! rounding is far below the weights' own (int8); the sums cannot overflow
//! because each token's scale is chosen for it (`limit`).

use std::arch::x86_64::{
    __m256i, __m512, _mm512_add_ps, _mm512_cvtepi8_epi16, _mm512_cvtepi32_ps, _mm512_dpwssd_epi32,
    _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_si512,
};

/// Output rows side by side in the packed layout.
pub const ROWS: usize = 16;
/// Most tokens summed against one pass over the weights.
const TOKENS: usize = 16;

/// Whether this CPU runs the kernel.
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// Whether a layer of this shape can be packed.
pub fn fits(inputs: usize, outputs: usize) -> bool {
    inputs.is_multiple_of(2) && outputs.is_multiple_of(ROWS)
}

/// Row-major int8 weights (`outputs × inputs`) in the kernel's layout:
/// for each block of 16 rows, for each pair of inputs, the 16 rows' two
/// weights. [`weight`] reads one back.
pub fn pack(rows: &[i8], inputs: usize, outputs: usize) -> Vec<i8> {
    let mut packed = vec![0i8; rows.len()];
    for o in 0..outputs {
        for i in 0..inputs {
            packed[at(inputs, o, i)] = rows[o * inputs + i];
        }
    }
    packed
}

/// Where weight (row `o`, input `i`) is in the packed layout.
pub fn at(inputs: usize, o: usize, i: usize) -> usize {
    let (block, r) = (o / ROWS, o % ROWS);
    (block * inputs / 2 + i / 2) * 2 * ROWS + r * 2 + i % 2
}

/// The tokens of one layer's input, each row as int16 with its own scale,
/// read in pairs (one i32 holds two neighbouring inputs).
pub struct Quantized {
    pairs: Vec<i32>,
    scale: Vec<f32>,
    inputs: usize,
}

/// The largest int16 magnitude whose products with int8 weights (|w| ≤
/// 127) summed over `inputs` stay inside i32.
pub(crate) fn limit(inputs: usize) -> f32 {
    (f64::from(i32::MAX) / (127.0 * inputs.max(1) as f64))
        .floor()
        .min(f64::from(i16::MAX)) as f32
}

impl Quantized {
    /// `x` is token-major, `inputs` (even) values a token.
    #[inline(always)]
    pub fn new(x: &[f32], inputs: usize) -> Self {
        let limit = limit(inputs);
        let mut pairs = Vec::with_capacity(x.len() / 2);
        let mut scale = Vec::with_capacity(x.len() / inputs.max(1));
        for row in x.chunks_exact(inputs) {
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if max > 0.0 { max / limit } else { 1.0 };
            let inv = 1.0 / s;
            // In range by construction: |v / s| ≤ limit ≤ i16::MAX. Rounded
            // half away from zero by hand: `round` is a libm call on
            // baseline x86-64, one per value.
            let q = |v: f32| i32::from((v * inv + 0.5f32.copysign(v)) as i16);
            let at = pairs.len();
            pairs.resize(at + inputs / 2, 0);
            for (pair, v) in pairs[at..].iter_mut().zip(row.chunks_exact(2)) {
                *pair = (q(v[0]) & 0xffff) | (q(v[1]) << 16);
            }
            scale.push(s);
        }
        Self {
            pairs,
            scale,
            inputs,
        }
    }

    pub fn tokens(&self) -> usize {
        self.scale.len()
    }
}

/// One dense layer's weights as the kernel reads them.
pub struct Weights<'a> {
    /// As [`pack`] lays them out.
    pub packed: &'a [i8],
    pub scale: &'a [f32],
    pub bias: &'a [f32],
}

/// `out[t] = x[t]·Wᵀ + b` for every token `t`, token-major (as many
/// outputs a token as `w.scale` has rows).
pub fn dense(w: &Weights, x: &Quantized, out: &mut [f32]) {
    let (k, n, tokens) = (x.inputs, w.scale.len(), x.tokens());
    assert!(
        available()
            && k.is_multiple_of(2)
            && n.is_multiple_of(ROWS)
            && w.packed.len() == n * k
            && w.bias.len() == n
            && out.len() == tokens * n,
        "the VNNI kernel needs AVX-512 VNNI, weights packed for it and whole blocks of {ROWS} rows"
    );
    for block in 0..n / ROWS {
        let mut t = 0;
        while t < tokens {
            let count = (tokens - t).min(TOKENS);
            let mut sums = [[0f32; ROWS]; TOKENS];
            // SAFETY: the CPU has the features the function is compiled
            // for (asserted above); it reads only through checked slices.
            unsafe {
                match count {
                    1 => block_sums::<1>(w, x, block, t, &mut sums),
                    2 => block_sums::<2>(w, x, block, t, &mut sums),
                    3 => block_sums::<3>(w, x, block, t, &mut sums),
                    4 => block_sums::<4>(w, x, block, t, &mut sums),
                    5 => block_sums::<5>(w, x, block, t, &mut sums),
                    6 => block_sums::<6>(w, x, block, t, &mut sums),
                    7 => block_sums::<7>(w, x, block, t, &mut sums),
                    8 => block_sums::<8>(w, x, block, t, &mut sums),
                    9 => block_sums::<9>(w, x, block, t, &mut sums),
                    10 => block_sums::<10>(w, x, block, t, &mut sums),
                    11 => block_sums::<11>(w, x, block, t, &mut sums),
                    12 => block_sums::<12>(w, x, block, t, &mut sums),
                    13 => block_sums::<13>(w, x, block, t, &mut sums),
                    14 => block_sums::<14>(w, x, block, t, &mut sums),
                    15 => block_sums::<15>(w, x, block, t, &mut sums),
                    _ => block_sums::<16>(w, x, block, t, &mut sums),
                }
            }
            for (r, token) in sums[..count].iter().enumerate() {
                let at = (t + r) * n + block * ROWS;
                out[at..at + ROWS].copy_from_slice(token);
            }
            t += count;
        }
    }
}

/// Rows `block*16..block*16+16` against tokens `t..t + N`, scaled and
/// biased: `sums[token][row]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn block_sums<const N: usize>(
    w: &Weights,
    x: &Quantized,
    block: usize,
    t: usize,
    sums: &mut [[f32; ROWS]; TOKENS],
) {
    let k = x.inputs;
    let half = k / 2;
    let packed = &w.packed[block * k * ROWS..(block + 1) * k * ROWS];
    let xs: [&[i32]; N] = std::array::from_fn(|r| &x.pairs[(t + r) * half..(t + r + 1) * half]);
    let mut acc = [_mm512_setzero_si512(); N];
    for (p, pair) in packed.chunks_exact(2 * ROWS).enumerate() {
        let narrow: __m256i = bytemuck::pod_read_unaligned(bytemuck::cast_slice(pair));
        let wide = _mm512_cvtepi8_epi16(narrow);
        for r in 0..N {
            acc[r] = _mm512_dpwssd_epi32(acc[r], wide, _mm512_set1_epi32(xs[r][p]));
        }
    }
    let at = block * ROWS..(block + 1) * ROWS;
    let scale: __m512 = bytemuck::pod_read_unaligned(bytemuck::cast_slice(&w.scale[at.clone()]));
    let bias: __m512 = bytemuck::pod_read_unaligned(bytemuck::cast_slice(&w.bias[at]));
    for r in 0..N {
        let token = _mm512_mul_ps(scale, _mm512_set1_ps(x.scale[t + r]));
        let v = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[r]), token), bias);
        sums[r] = bytemuck::cast(v);
    }
}
