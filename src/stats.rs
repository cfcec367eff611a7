//! Latency summaries: mean and nearest-rank percentiles of per-step timings, one type for every
//! figure grammask prints (mask latency in the CLI and the decode loop, MaskBench mask and
//! compile times, benchmarks), so that all of them are computed the same way.
//!
//! The `p`-th percentile is the smallest sample such that at least `p`% of the samples are at
//! most it (nearest rank, no interpolation): p100 is the max and every reported value is a real
//! measurement.

use std::fmt;

/// The nearest-rank `p`-th percentile (`0.0 <= p <= 100.0`, clamped) of `sorted` (ascending).
///
/// Returns `None` for an empty slice.
///
/// # Example
/// ```
/// use grammask::stats::percentile;
/// let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
/// assert_eq!(percentile(&v, 50.0), Some(5));
/// assert_eq!(percentile(&v, 90.0), Some(9));
/// assert_eq!(percentile(&v, 99.0), Some(10));
/// assert_eq!(percentile(&v, 0.0), Some(1));
/// ```
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    // Rank in 1..=n; a tiny epsilon keeps exact ranks (50% of 10 = 5) from rounding up through
    // floating-point error.
    let rank = ((p / 100.0) * sorted.len() as f64 - 1e-9).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// Mean and percentiles of a set of samples, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest sample.
    pub max: f64,
}

impl Summary {
    /// Summarise samples in µs (any order; NaNs are ignored).
    pub fn of(samples: &[f64]) -> Summary {
        let mut s: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
        s.sort_by(f64::total_cmp);
        let mean = s.iter().sum::<f64>() / s.len().max(1) as f64;
        Summary::of_sorted(&s, mean, |&v| v)
    }

    /// Summarise nanosecond samples (any order; sorted in place), reported in µs.
    ///
    /// # Example
    /// ```
    /// use grammask::stats::Summary;
    /// let mut ns = vec![3_000, 1_000, 2_000];
    /// let s = Summary::from_nanos(&mut ns);
    /// assert_eq!((s.n, s.mean, s.p50, s.max), (3, 2.0, 2.0, 3.0));
    /// ```
    pub fn from_nanos(samples: &mut [u64]) -> Summary {
        samples.sort_unstable();
        let total: u128 = samples.iter().map(|&x| u128::from(x)).sum();
        let mean = total as f64 / samples.len().max(1) as f64 / 1_000.0;
        Summary::of_sorted(samples, mean, |&ns| ns as f64 / 1_000.0)
    }

    fn of_sorted<T: Copy>(sorted: &[T], mean: f64, us: impl Fn(&T) -> f64) -> Summary {
        if sorted.is_empty() {
            return Summary::default();
        }
        let at = |p: f64| percentile(sorted, p).map_or(0.0, |v| us(&v));
        Summary {
            n: sorted.len(),
            mean,
            p50: at(50.0),
            p90: at(90.0),
            p99: at(99.0),
            p999: at(99.9),
            max: at(100.0),
        }
    }

    /// `{"mean":…,"p50":…,"p99":…,"max":…}` (µs, two decimals), as the CLI's JSON output uses.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "mean": round2(self.mean),
            "p50": round2(self.p50),
            "p99": round2(self.p99),
            "max": round2(self.max),
        })
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl fmt::Display for Summary {
    /// One line: `n=… mean … p50 … p90 … p99 … p99.9 … max …` with units chosen per value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n={} mean {} p50 {} p90 {} p99 {} p99.9 {} max {}",
            self.n,
            fmt_us(self.mean),
            fmt_us(self.p50),
            fmt_us(self.p90),
            fmt_us(self.p99),
            fmt_us(self.p999),
            fmt_us(self.max)
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
    fn percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&v);
        assert_eq!(s.n, 100);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.max, 100.0);
        assert!((s.mean - 50.5).abs() < 1e-9);
        assert_eq!(Summary::of(&[]), Summary::default());
        assert_eq!(Summary::of(&[f64::NAN, 2.0]).n, 1);
    }

    #[test]
    fn percentile_edges() {
        assert_eq!(percentile::<u64>(&[], 50.0), None);
        assert_eq!(percentile(&[7], 0.0), Some(7));
        assert_eq!(percentile(&[7], 99.9), Some(7));
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&v, 99.9), Some(999));
        assert_eq!(percentile(&v, 99.0), Some(990));
        assert_eq!(percentile(&v, 100.0), Some(1000));
    }

    #[test]
    fn nanos_and_micros_agree() {
        let mut ns: Vec<u64> = (1..=1000).map(|i| i * 1_000).collect();
        let us: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(Summary::from_nanos(&mut ns), Summary::of(&us));
    }

    #[test]
    fn summary_units() {
        assert_eq!(fmt_us(12.34), "12.3 µs");
        assert_eq!(fmt_us(4_560.0), "4.56 ms");
        assert_eq!(fmt_us(1_200_000.0), "1.20 s");
        assert_eq!(Summary::from_nanos(&mut []).n, 0);
    }
}
