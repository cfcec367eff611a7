//! Latency statistics: nearest-rank percentiles over nanosecond samples, summarised in µs.
//!
//! Shared by the MaskBench harness and the CLI so every figure grammask prints (mask latency,
//! compile time) is computed the same way: the `p`-th percentile is the smallest sample such that
//! at least `p`% of the samples are at most it (nearest-rank; no interpolation), so p100 is the
//! max and every reported value is a real measurement.

use std::fmt;

/// The nearest-rank `p`-th percentile (`0.0 <= p <= 100.0`) of `sorted` (ascending).
///
/// Returns `None` for an empty slice.
///
/// # Example
/// ```
/// use grammask::bench::stats::percentile;
/// let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
/// assert_eq!(percentile(&v, 50.0), Some(5));
/// assert_eq!(percentile(&v, 90.0), Some(9));
/// assert_eq!(percentile(&v, 99.0), Some(10));
/// assert_eq!(percentile(&v, 0.0), Some(1));
/// ```
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    // Rank in 1..=n; a tiny epsilon keeps exact ranks (e.g. 50% of 10 = 5) from rounding up
    // through floating-point error.
    let rank = ((p / 100.0) * sorted.len() as f64 - 1e-9).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// Summary of a set of durations, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: usize,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Median (nearest rank).
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

impl LatencySummary {
    /// Summarise nanosecond samples (any order; sorted in place).
    ///
    /// # Example
    /// ```
    /// use grammask::bench::stats::LatencySummary;
    /// let mut ns = vec![3_000, 1_000, 2_000];
    /// let s = LatencySummary::from_nanos(&mut ns);
    /// assert_eq!(s.count, 3);
    /// assert_eq!(s.mean_us, 2.0);
    /// assert_eq!(s.p50_us, 2.0);
    /// assert_eq!(s.max_us, 3.0);
    /// ```
    pub fn from_nanos(samples: &mut [u64]) -> LatencySummary {
        if samples.is_empty() {
            return LatencySummary::default();
        }
        samples.sort_unstable();
        let us = |ns: Option<u64>| ns.unwrap_or(0) as f64 / 1_000.0;
        let total: u128 = samples.iter().map(|&x| u128::from(x)).sum();
        LatencySummary {
            count: samples.len(),
            mean_us: total as f64 / samples.len() as f64 / 1_000.0,
            p50_us: us(percentile(samples, 50.0)),
            p90_us: us(percentile(samples, 90.0)),
            p99_us: us(percentile(samples, 99.0)),
            p999_us: us(percentile(samples, 99.9)),
            max_us: us(samples.last().copied()),
        }
    }
}

impl fmt::Display for LatencySummary {
    /// One line: `n=… mean … p50 … p90 … p99 … p99.9 … max …` with units chosen per value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n={} mean {} p50 {} p90 {} p99 {} p99.9 {} max {}",
            self.count,
            fmt_us(self.mean_us),
            fmt_us(self.p50_us),
            fmt_us(self.p90_us),
            fmt_us(self.p99_us),
            fmt_us(self.p999_us),
            fmt_us(self.max_us)
        )
    }
}

/// Render a duration given in µs with a readable unit (`12.3 µs`, `4.56 ms`, `1.20 s`).
pub fn fmt_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2} s", us / 1_000_000.0)
    } else if us >= 1_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{us:.1} µs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_edges() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 0.0), Some(7));
        assert_eq!(percentile(&[7], 99.9), Some(7));
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&v, 99.9), Some(999));
        assert_eq!(percentile(&v, 99.0), Some(990));
        assert_eq!(percentile(&v, 100.0), Some(1000));
    }

    #[test]
    fn summary_units() {
        assert_eq!(fmt_us(12.34), "12.3 µs");
        assert_eq!(fmt_us(4_560.0), "4.56 ms");
        assert_eq!(fmt_us(1_200_000.0), "1.20 s");
        assert_eq!(LatencySummary::from_nanos(&mut []).count, 0);
    }
}
