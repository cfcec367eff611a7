//! Property tests of the filters on random rows with many ties: support sizes and contents of
//! top-k, top-p and min-p, against direct restatements of their definitions.

use grammask::sampler::{
    min_p_in_place, renormalise, softmax_in_place, top_k_in_place, top_p_in_place,
};
use proptest::prelude::*;

/// A probability row built from logits on a coarse grid (so ties are frequent).
fn probs() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-8i32..=8, 2..200).prop_map(|v| {
        let mut x: Vec<f32> = v.into_iter().map(|i| i as f32 * 0.5).collect();
        softmax_in_place(&mut x, 1.0).unwrap();
        x
    })
}

fn support(p: &[f32]) -> Vec<usize> {
    (0..p.len()).filter(|&i| p[i] > 0.0).collect()
}

proptest! {
    #[test]
    fn top_k_keeps_k_highest_ties_by_lowest_id(p in probs(), k in 1usize..50) {
        let mut q = p.clone();
        top_k_in_place(&mut q, k, &mut Vec::new());
        let kept = support(&q);
        prop_assert_eq!(kept.len(), k.min(support(&p).len()));
        for &i in &kept {
            prop_assert_eq!(q[i], p[i]);
            for j in 0..p.len() {
                if q[j] == 0.0 && p[j] > 0.0 {
                    // Every dropped token ranks below every kept one.
                    prop_assert!(p[j] < p[i] || (p[j] == p[i] && j > i));
                }
            }
        }
    }

    #[test]
    fn top_p_keeps_smallest_tie_closed_nucleus(p in probs(), top_p in 0.01f32..0.99) {
        let mut q = p.clone();
        top_p_in_place(&mut q, top_p, &mut Vec::new());
        let kept = support(&q);
        prop_assert!(!kept.is_empty());
        let cut = kept.iter().map(|&i| p[i]).fold(f32::INFINITY, f32::min);
        // Closed upward and under ties: exactly the tokens at or above the cut survive.
        for j in 0..p.len() {
            prop_assert_eq!(q[j] > 0.0, p[j] >= cut && p[j] > 0.0);
        }
        let total: f64 = p.iter().map(|&x| f64::from(x)).sum();
        let mass: f64 = kept.iter().map(|&i| f64::from(p[i])).sum();
        let above: f64 = p.iter().filter(|&&x| x > cut).map(|&x| f64::from(x)).sum();
        let eps = 1e-5;
        // Enough mass, and minimal: without the tied group at the cut it would be too little.
        prop_assert!(mass + eps >= f64::from(top_p) * total);
        prop_assert!(above < f64::from(top_p) * total + eps);
    }

    #[test]
    fn min_p_keeps_tokens_above_scaled_max(p in probs(), min_p in 0.0f32..=1.0) {
        let mut q = p.clone();
        min_p_in_place(&mut q, min_p);
        let max = p.iter().cloned().fold(0.0f32, f32::max);
        for j in 0..p.len() {
            let keep = min_p <= 0.0 || p[j] >= max * min_p;
            prop_assert_eq!(q[j] > 0.0, keep && p[j] > 0.0);
        }
        prop_assert!(q.contains(&max));
    }

    #[test]
    fn renormalised_rows_sum_to_one(p in probs(), k in 1usize..10, top_p in 0.05f32..1.0) {
        let mut q = p.clone();
        top_p_in_place(&mut q, top_p, &mut Vec::new());
        top_k_in_place(&mut q, k, &mut Vec::new());
        renormalise(&mut q);
        let s: f64 = q.iter().map(|&x| f64::from(x)).sum();
        prop_assert!((s - 1.0).abs() < 1e-5);
    }
}
