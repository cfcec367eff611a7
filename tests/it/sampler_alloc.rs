//! "No allocation per decode step": with a warmed-up `Sampler` (or `SamplerScratch`), every
//! path — greedy, masked greedy, penalties, each filter, logprobs, speculative verification —
//! runs without touching the allocator. Checked with a counting global allocator that counts
//! only the test thread's allocations (the harness allocates concurrently on its own thread).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use grammask::sampler::{Logits, Pcg32, PenaltyConfig, Sampler, SamplerConfig};
use grammask::{TokenId, TokenMask};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn warmed_up_steps_do_not_allocate() {
    // The largest vocabulary we target (Gemma-3) in release; smaller in an unoptimised build,
    // where the same code paths run and 262k would only cost time.
    const N: usize = if cfg!(debug_assertions) { 32_768 } else { 262_144 };
    let mut rng = Pcg32::new(5);
    let logits: Vec<f32> = (0..N).map(|_| rng.next_f32() * 8.0 - 4.0).collect();
    let draft: Vec<f32> = logits.iter().map(|x| x * 0.9).collect();
    let mut mask = TokenMask::full(N);
    for t in (0..N).step_by(3) {
        mask.remove(TokenId::from_index(t));
    }
    let recent: Vec<TokenId> = (0..25).map(|i| TokenId(i * 7)).collect();
    let pen = PenaltyConfig::default()
        .with_repetition_penalty(1.1)
        .with_presence_penalty(0.2)
        .with_frequency_penalty(0.1)
        .with_bias(TokenId(1), 1.0);
    let hot = SamplerConfig::default().with_temperature(0.8).with_top_logprobs(20);
    let configs = [
        (SamplerConfig::default(), PenaltyConfig::default()),
        (SamplerConfig::default(), pen.clone()),
        (hot.clone(), PenaltyConfig::default()),
        (hot.clone().with_top_p(0.9), PenaltyConfig::default()),
        (hot.clone().with_min_p(0.05), PenaltyConfig::default()),
        (hot.clone().with_top_k(40).with_top_p(0.9), pen.clone()),
        // The top-k candidate path (issue 7), with and without the copy into scratch.
        (hot.clone().with_top_k(20).with_top_p(0.9), PenaltyConfig::default()),
        (hot.clone().with_top_k(32).with_min_p(0.05), pen),
    ];
    for (cfg, pen) in configs {
        let label = format!("{cfg:?} {pen:?}");
        let mut s = Sampler::new(cfg, pen).unwrap();
        for mask in [None, Some(&mask)] {
            // Warm-up: buffers grow to the vocabulary size.
            s.sample_with_logprobs(Logits::F32(&logits), mask, &recent).unwrap();
            s.verify_draft(Logits::F32(&logits), Logits::F32(&draft), mask, &recent, TokenId(2))
                .unwrap();
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            COUNTING.with(|c| c.set(true));
            for _ in 0..3 {
                s.sample_with_logprobs(Logits::F32(&logits), mask, &recent).unwrap();
                s.verify_draft(
                    Logits::F32(&logits),
                    Logits::F32(&draft),
                    mask,
                    &recent,
                    TokenId(2),
                )
                .unwrap();
            }
            COUNTING.with(|c| c.set(false));
            let after = ALLOCATIONS.load(Ordering::Relaxed);
            assert_eq!(after, before, "{label} (mask: {}) allocated", mask.is_some());
        }
    }
}
