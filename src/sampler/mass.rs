//! The top-p boundary rule, decided on exact sums so that every path keeps the same set.
//!
//! Top-p keeps the tie group of value `v` iff `mass{p > v} < top_p × total`. Computed with
//! floating-point sums, the answer depends on the order of the additions: the sort path summed
//! in `f32` from the top, the rejection path in `f64` by blocks of the row, the candidate path
//! over its K values, and near the cut they disagreed (issue 22: 22 tokens, 2.7e-4 of the mass,
//! dropped by the sort path on an ordinary 152k row). Here the rule is stated on integers, so it
//! has one answer whatever the order:
//!
//! * Every value `p` of a row becomes the fixed-point integer `⌊p · 2^(64 − E)⌋`, where `2^E`
//!   is the smallest power of two above the row's maximum ([`Fixed::for_max`]). A pipeline row
//!   (unnormalised `e = exp(x/T − max/T)`, maximum exactly 1) has unit `2⁻⁶³`; only values below
//!   that unit (`e < 1.1e-19` of the maximum) lose anything, at most one unit each.
//! * Masses are `u128` sums of those integers: addition is associative, so the sort path (in
//!   sorted order), the rejection path (by blocks) and the candidate path (over K values and a
//!   bracket of the rest) compute the same numbers.
//! * The comparison `above ≥ top_p × total` is exact: `top_p = m · 2⁻ᵏ` with an integer `m`,
//!   so it is `above · 2ᵏ ≥ m · total` in integers ([`top_p_drops`]).
//!
//! The difference from the real-number rule on the `f32` values is at most `n` units
//! (`n · 2⁻⁶³` of the maximum, 3e-14 at 262k), far below any `f32` rounding; a float64
//! reference agrees except where it is itself within its own rounding of the threshold.
//!
//! The hot paths do not run this per element: they keep their fast `f64` sums and call the
//! exact rule only when the fast sum lies within [`FAST_TOLERANCE`] of the threshold
//! ([`Decision`]), where the fast sum's error could flip the answer.

/// Relative tolerance (of the row total) inside which a fast floating-point mass is not trusted
/// and the exact sums decide. It bounds, with a wide margin, the error of the rejection pass's
/// sums (`f32` partial sums of 16 entries per lane, relative error below 2⁻²⁰, accumulated in
/// `f64`) plus the `n` units of truncation of the fixed point.
pub(crate) const FAST_TOLERANCE: f64 = 1.0 / 65_536.0;

/// The fixed-point conversion of one row: `⌊p · 2^shift⌋` with `shift = 64 − E`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fixed {
    shift: i32,
}

impl Fixed {
    /// The conversion for a row whose largest value is `max` (finite, `>= 0`).
    pub(crate) fn for_max(max: f32) -> Fixed {
        // E = exponent of the smallest power of two strictly above `max`.
        let e = if max > 0.0 && max.is_finite() {
            let bits = max.to_bits();
            let biased = (bits >> 23) as i32;
            if biased == 0 {
                // Subnormal: max < 2^-126; its highest set bit gives the exponent.
                let m = bits & 0x7f_ffff;
                (31 - m.leading_zeros() as i32) - 149 + 1
            } else {
                biased - 127 + 1
            }
        } else {
            0
        };
        Fixed { shift: 64 - e }
    }

    /// `⌊p · 2^shift⌋` for a finite `p >= 0` (at most `2^64`).
    #[inline]
    pub(crate) fn of(self, p: f32) -> u128 {
        let bits = p.to_bits() & 0x7fff_ffff;
        let biased = (bits >> 23) as i32;
        let (m, e) = if biased == 0 {
            (u64::from(bits & 0x7f_ffff), -149)
        } else {
            (u64::from((bits & 0x7f_ffff) | 0x80_0000), biased - 150)
        };
        // p = m · 2^e, so p · 2^shift = m · 2^(e + shift).
        let s = e + self.shift;
        let v = if s >= 0 {
            if s >= 64 {
                // Only reachable for values above the declared maximum; saturate.
                u64::MAX
            } else {
                m.checked_shl(s as u32).filter(|&x| x >> s == m).unwrap_or(u64::MAX)
            }
        } else if s <= -64 {
            0
        } else {
            m >> (-s) as u32
        };
        u128::from(v)
    }

    /// `(Σ{p > v}, Σ all)` of `row` in fixed point.
    pub(crate) fn above_and_total(self, row: &[f32], v: f32) -> (u128, u128) {
        let mut above = 0u128;
        let mut total = 0u128;
        for &p in row {
            if p > 0.0 {
                let q = self.of(p);
                total += q;
                if p > v {
                    above += q;
                }
            }
        }
        (above, total)
    }
}

/// Exactly `above >= top_p × total`, for `0 < top_p < 1`: the top-p rule's "this group and
/// everything below it is dropped".
pub(crate) fn top_p_drops(above: u128, total: u128, top_p: f32) -> bool {
    // top_p = m · 2^-k with m < 2^24 (its significand) and k > 0.
    let bits = top_p.to_bits();
    let biased = (bits >> 23) as i32;
    let (m, k) = if biased == 0 {
        (u128::from(bits & 0x7f_ffff), 149)
    } else {
        (u128::from((bits & 0x7f_ffff) | 0x80_0000), 150 - biased)
    };
    let rhs = m * total; // < 2^24 · 2^96: no overflow for rows below 2^32 entries.
    if above == 0 {
        return rhs == 0;
    }
    let lead = 128 - above.leading_zeros() as i32; // above >= 2^(lead - 1)
    if lead - 1 + k >= 127 {
        // above · 2^k >= 2^127 > rhs.
        return true;
    }
    (above << k) >= rhs
}

/// A top-p decision from a fast floating-point mass: certain, or too close to call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The group is dropped (`true`) or kept (`false`) whatever the rounding.
    Sure(bool),
    /// Within [`FAST_TOLERANCE`]: ask the exact sums.
    Close,
}

/// Classify `fast_above >= top_p × fast_total` given that both sums are within
/// [`FAST_TOLERANCE`] `/ 2` of the exact values (relative to the total).
#[inline]
pub(crate) fn fast_decision(fast_above: f64, fast_total: f64, top_p: f32) -> Decision {
    let margin = fast_above - f64::from(top_p) * fast_total;
    if margin.abs() > FAST_TOLERANCE * fast_total {
        Decision::Sure(margin > 0.0)
    } else {
        Decision::Close
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_is_exact_for_the_top_of_a_row() {
        let f = Fixed::for_max(1.0);
        assert_eq!(f.of(1.0), 1u128 << 63);
        assert_eq!(f.of(0.5), 1u128 << 62);
        assert_eq!(f.of(2f32.powi(-63)), 1);
        assert_eq!(f.of(2f32.powi(-64)), 0);
        assert_eq!(f.of(0.0), 0);
        let g = Fixed::for_max(0.3);
        assert_eq!(g.of(0.25), 1u128 << 63); // 2^E = 0.5 is the power of two above 0.3
                                             // A subnormal maximum still gets 64 bits of resolution.
        let tiny = f32::from_bits(6);
        let h = Fixed::for_max(tiny);
        assert_eq!(h.of(tiny), 6u128 << 61);
        assert_eq!(h.of(f32::from_bits(1)), 1u128 << 61);
    }

    #[test]
    fn top_p_comparison_is_exact() {
        // 0.5 × 10 = 5: `above >= 5` drops.
        assert!(top_p_drops(5, 10, 0.5));
        assert!(!top_p_drops(4, 10, 0.5));
        // 0.9f32 is 15099494 · 2^-24, slightly above 0.9.
        let total = 1u128 << 80;
        let thr = (total * 15_099_494) >> 24;
        assert!(top_p_drops(thr, total, 0.9));
        assert!(!top_p_drops(thr - 1, total, 0.9));
        assert!(top_p_drops(1, 1 << 100, f32::from_bits(1)));
        assert!(!top_p_drops(0, 1, 0.5));
    }

    #[test]
    fn sums_do_not_depend_on_order() {
        let row: Vec<f32> = (0..5000).map(|i| ((i * 7919) % 1000) as f32 * 1e-3 + 1e-9).collect();
        let f = Fixed::for_max(1.0);
        let (a, t) = f.above_and_total(&row, 0.5);
        let mut rev = row.clone();
        rev.reverse();
        assert_eq!(f.above_and_total(&rev, 0.5), (a, t));
        assert!(fast_decision(0.95, 1.0, 0.9) == Decision::Sure(true));
        assert!(fast_decision(0.9, 1.0, 0.9) == Decision::Close);
    }
}
