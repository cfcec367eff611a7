//! `/metrics`: the server's counters in the Prometheus text format, kept by the `prometheus`
//! crate (its registry and text encoder, no hand-written exposition). What is counted is listed
//! in `docs/server.md`.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    /// Requests by endpoint and HTTP status.
    pub requests: IntCounterVec,
    /// Prompt tokens of finished requests.
    pub prompt_tokens: IntCounter,
    /// Generated tokens of finished requests.
    pub completion_tokens: IntCounter,
    /// Requests waiting for a slot.
    pub queue_depth: IntGauge,
    /// Requests decoding.
    pub active: IntGauge,
    /// Full mask fills, seconds each.
    pub mask_seconds: Histogram,
    /// Constraint compilations (cache misses), seconds each.
    pub compile_seconds: Histogram,
    /// Compile-cache hits.
    pub compile_cache_hits: IntCounter,
    /// Sequences per forward step.
    pub batch_size: Histogram,
    /// Seconds per forward step (all its sequences).
    pub forward_seconds: Histogram,
    /// Bytes held by the KV caches.
    pub kv_bytes: IntGauge,
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // The names and buckets below are fixed and valid; a failure is a bug here.
    r.expect("valid metric definition")
}

impl Metrics {
    /// A fresh registry with every metric at zero.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let requests = must(IntCounterVec::new(
            Opts::new("grammask_requests_total", "HTTP requests by endpoint and status"),
            &["endpoint", "status"],
        ));
        let counter = |name: &str, help: &str| must(IntCounter::new(name, help));
        let gauge = |name: &str, help: &str| must(IntGauge::new(name, help));
        let hist = |name: &str, help: &str, buckets: Vec<f64>| {
            must(Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)))
        };
        let m = Metrics {
            requests,
            prompt_tokens: counter("grammask_prompt_tokens_total", "prompt tokens"),
            completion_tokens: counter("grammask_completion_tokens_total", "generated tokens"),
            queue_depth: gauge("grammask_queue_depth", "requests waiting for a slot"),
            active: gauge("grammask_active_requests", "requests decoding"),
            mask_seconds: hist(
                "grammask_mask_seconds",
                "time of one full mask fill",
                prometheus::exponential_buckets(1e-6, 4.0, 10).expect("buckets"),
            ),
            compile_seconds: hist(
                "grammask_compile_seconds",
                "time to compile a constraint (cache misses)",
                prometheus::exponential_buckets(1e-4, 4.0, 10).expect("buckets"),
            ),
            compile_cache_hits: counter(
                "grammask_compile_cache_hits_total",
                "constraints found compiled in the cache",
            ),
            batch_size: hist(
                "grammask_batch_sequences",
                "sequences per forward step",
                vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
            ),
            forward_seconds: hist(
                "grammask_forward_seconds",
                "time of one forward step",
                prometheus::exponential_buckets(1e-3, 2.0, 12).expect("buckets"),
            ),
            kv_bytes: gauge("grammask_kv_cache_bytes", "bytes held by the KV caches"),
            registry,
        };
        let r = &m.registry;
        must(r.register(Box::new(m.requests.clone())));
        must(r.register(Box::new(m.prompt_tokens.clone())));
        must(r.register(Box::new(m.completion_tokens.clone())));
        must(r.register(Box::new(m.queue_depth.clone())));
        must(r.register(Box::new(m.active.clone())));
        must(r.register(Box::new(m.mask_seconds.clone())));
        must(r.register(Box::new(m.compile_seconds.clone())));
        must(r.register(Box::new(m.compile_cache_hits.clone())));
        must(r.register(Box::new(m.batch_size.clone())));
        must(r.register(Box::new(m.forward_seconds.clone())));
        must(r.register(Box::new(m.kv_bytes.clone())));
        m
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
