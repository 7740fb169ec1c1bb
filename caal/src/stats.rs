//! Figures for benchmarks: percentiles of sorted samples.

/// The `q` quantile (0–1) of ascending `sorted` samples (nearest rank); NaN when there are none.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize]
}
