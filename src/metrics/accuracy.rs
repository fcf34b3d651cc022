//! Top-k accuracy over a stream of (logits, label) pairs.

use serde::{Deserialize, Serialize};

/// The `k` highest-scoring class indices of `scores`, best first. Ties go to the lower index;
/// NaN ranks below every number. `k` larger than the number of classes gives them all.
pub(crate) fn top_k(scores: &[f32], k: usize) -> Vec<usize> {
    let key = |i: usize| {
        let v = scores[i];
        if v.is_nan() {
            f32::NEG_INFINITY
        } else {
            v
        }
    };
    let mut best: Vec<usize> = Vec::with_capacity(k + 1);
    for i in 0..scores.len() {
        let v = key(i);
        // Position where i goes: after every kept index with a score >= v (stable on ties).
        let pos = best.partition_point(|&j| key(j) >= v);
        if pos < k {
            best.insert(pos, i);
            best.truncate(k);
        }
    }
    best
}

/// Counts top-1 and top-5 hits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopKAccuracy {
    /// Samples seen.
    pub total: u64,
    /// Samples whose label is the best-scoring class.
    pub top1_hits: u64,
    /// Samples whose label is among the five best-scoring classes.
    pub top5_hits: u64,
}

impl TopKAccuracy {
    /// Records one sample; returns its top-5 classes (best first).
    pub fn update(&mut self, scores: &[f32], label: usize) -> Vec<usize> {
        let top = top_k(scores, 5);
        self.record(&top, label);
        top
    }

    /// Counts one image whose five best classes (best first) are `top`.
    pub fn record(&mut self, top: &[usize], label: usize) {
        self.total += 1;
        if top.first() == Some(&label) {
            self.top1_hits += 1;
        }
        if top.contains(&label) {
            self.top5_hits += 1;
        }
    }

    /// Top-1 accuracy in [0,1] (0 when nothing was seen).
    pub fn top1(&self) -> f64 {
        ratio(self.top1_hits, self.total)
    }

    /// Top-5 accuracy in [0,1] (0 when nothing was seen).
    pub fn top5(&self) -> f64 {
        ratio(self.top5_hits, self.total)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn top_k_orders_and_breaks_ties_low_first() {
        assert_eq!(top_k(&[0.1, 0.9, 0.5, 0.9, -1.0], 3), vec![1, 3, 2]);
        assert_eq!(top_k(&[f32::NAN, 0.0, -5.0], 2), vec![1, 2]);
        assert_eq!(top_k(&[1.0, 2.0], 5), vec![1, 0]);
        assert!(top_k(&[], 5).is_empty());
    }

    #[test]
    fn counts_hits() {
        let mut acc = TopKAccuracy::default();
        let scores: Vec<f32> = (0..10).map(|i| i as f32).collect(); // best is 9, then 8...
        acc.update(&scores, 9); // top-1 and top-5
        acc.update(&scores, 5); // top-5 only (9,8,7,6,5)
        acc.update(&scores, 4); // neither
        assert_eq!((acc.total, acc.top1_hits, acc.top5_hits), (3, 1, 2));
        assert!((acc.top1() - 1.0 / 3.0).abs() < 1e-12);
        assert!((acc.top5() - 2.0 / 3.0).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn top_k_agrees_with_a_full_sort(scores in proptest::collection::vec(-100i32..100, 0..40), k in 0usize..8) {
            let scores: Vec<f32> = scores.into_iter().map(|v| v as f32).collect();
            let mut idx: Vec<usize> = (0..scores.len()).collect();
            idx.sort_by(|&a, &b| scores[b].partial_cmp(&scores[a]).unwrap().then(a.cmp(&b)));
            idx.truncate(k);
            prop_assert_eq!(top_k(&scores, k), idx);
        }
    }
}
