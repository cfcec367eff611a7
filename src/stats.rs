//! Latency summaries: mean and percentiles of per-step timings, as every report prints them.

/// Mean and percentiles of a set of samples (microseconds by convention).
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

/// The `q`-quantile (0..=1) of sorted samples, nearest-rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Summary {
    /// Summarise `samples` (any order; NaNs are ignored).
    pub fn of(samples: &[f64]) -> Summary {
        let mut s: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
        if s.is_empty() {
            return Summary::default();
        }
        s.sort_by(f64::total_cmp);
        Summary {
            n: s.len(),
            mean: s.iter().sum::<f64>() / s.len() as f64,
            p50: quantile(&s, 0.50),
            p90: quantile(&s, 0.90),
            p99: quantile(&s, 0.99),
            p999: quantile(&s, 0.999),
            max: s[s.len() - 1],
        }
    }

    /// `{"mean":…,"p50":…,"p99":…,"max":…}` as the CLI's JSON output uses.
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

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mean {:.1} µs, p50 {:.1}, p99 {:.1}, max {:.1} (n = {})",
            self.mean, self.p50, self.p99, self.max, self.n
        )
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
    }
}
