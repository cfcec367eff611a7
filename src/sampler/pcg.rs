//! The per-request random number generator: PCG-XSH-RR 64/32 (O'Neill 2014).
//!
//! The sampler needs one uniform draw per step, reproducible from a 64-bit request seed, with
//! no `rand` dependency. PCG32 is 16 bytes of state, passes the statistical batteries that
//! matter here, and has a public reference implementation (`pcg_basic.c`) whose outputs we test
//! against, so the stream is pinned forever.

/// The stream selector used by [`Pcg32::new`]: the increment of the reference
/// `PCG32_INITIALIZER` (`0xda3e39cb94b95bdb`), passed as `initseq`.
pub const DEFAULT_STREAM: u64 = 0xda3e_39cb_94b9_5bdb;

const MULTIPLIER: u64 = 6_364_136_223_846_793_005;

/// PCG-XSH-RR with 64-bit state and 32-bit output (O'Neill 2014, "PCG: A Family of Simple Fast
/// Space-Efficient Statistically Good Algorithms for Random Number Generation", §6.3.1).
///
/// One instance per request, threaded through every decode step so the stream is contiguous.
///
/// # Example
/// ```
/// use grammask::sampler::Pcg32;
/// // The reference demo (pcg32-demo.c): seed 42, sequence 54.
/// let mut rng = Pcg32::with_stream(42, 54);
/// assert_eq!(rng.next_u32(), 0xa15c02b7);
/// let u = rng.next_f32();
/// assert!((0.0..1.0).contains(&u));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pcg32 {
    state: u64,
    inc: u64,
}

impl Pcg32 {
    /// A generator seeded with `seed` on [`DEFAULT_STREAM`].
    pub fn new(seed: u64) -> Pcg32 {
        Pcg32::with_stream(seed, DEFAULT_STREAM)
    }

    /// The reference seeding `pcg32_srandom_r(initstate, initseq)`: the stream is selected by
    /// `initseq` (its low 63 bits), the position by `initstate`.
    pub fn with_stream(initstate: u64, initseq: u64) -> Pcg32 {
        let mut rng = Pcg32 { state: 0, inc: (initseq << 1) | 1 };
        rng.next_u32();
        rng.state = rng.state.wrapping_add(initstate);
        rng.next_u32();
        rng
    }

    /// The next 32 uniformly distributed bits (`pcg32_random_r`).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old.wrapping_mul(MULTIPLIER).wrapping_add(self.inc);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        let rot = (old >> 59) as u32;
        xorshifted.rotate_right(rot)
    }

    /// A uniform `f32` in `[0, 1)`: the top 24 bits of [`next_u32`](Pcg32::next_u32) times
    /// 2⁻²⁴, so every value is exactly representable and 1.0 is never returned.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first six outputs of the reference `pcg32-demo` (seed 42, sequence 54).
    #[test]
    fn reference_vector() {
        let mut rng = Pcg32::with_stream(42, 54);
        let want = [0xa15c02b7u32, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e];
        for w in want {
            assert_eq!(rng.next_u32(), w);
        }
    }

    #[test]
    fn f32_range() {
        let mut rng = Pcg32::new(0);
        for _ in 0..10_000 {
            let u = rng.next_f32();
            assert!((0.0..1.0).contains(&u));
        }
        // The largest possible value is 1 - 2^-24, still below 1.
        assert!(((u32::MAX >> 8) as f32 * (1.0 / (1u32 << 24) as f32)) < 1.0);
    }
}
