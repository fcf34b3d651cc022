//! Rank agreement for `[batch, classes]` outputs: for ranks 1..k ordered by the reference
//! (B), the mean absolute difference of the scores at that rank's label and how often A puts a
//! different label at that rank (ArtTRT's "TOP-k MAE / disagreement" table).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// One rank of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankRow {
    /// Rank, 1-based.
    pub rank: usize,
    /// Mean over samples of `|a[l] − b[l]|`, `l` the reference's label at this rank.
    pub mae: f64,
    /// Samples where A's label at this rank differs from the reference's, in percent.
    pub(crate) disagreement_pct: f64,
}

/// The rank table of one output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopK {
    /// Samples compared.
    pub samples: usize,
    /// Classes per sample.
    pub classes: usize,
    /// Ranks 1..k.
    pub ranks: Vec<RankRow>,
    /// Samples where A's and B's top-1 labels agree, in percent.
    pub top1_agreement_pct: f64,
}

/// Indices of the `k` largest values, largest first; NaN counts as smallest, ties keep the
/// lower index first.
pub(crate) fn top_indices(row: &[f64], k: usize) -> Vec<usize> {
    let key = |i: usize| {
        let v = row[i];
        if v.is_nan() {
            f64::NEG_INFINITY
        } else {
            v
        }
    };
    let order = |x: &usize, y: &usize| key(*y).total_cmp(&key(*x)).then(x.cmp(y));
    let mut idx: Vec<usize> = (0..row.len()).collect();
    let k = k.min(row.len());
    if k == 0 {
        return vec![];
    }
    if k < idx.len() {
        idx.select_nth_unstable_by(k - 1, order);
        idx.truncate(k);
    }
    idx.sort_by(order);
    idx
}

/// The rank table for `a` against the reference `b`, both `samples × classes` row-major.
pub fn topk(a: &[f64], b: &[f64], samples: usize, classes: usize, k: usize) -> TopK {
    let mut acc = TopKAccumulator::new(classes, k);
    acc.add(a, b, samples);
    acc.finish()
}

/// The rank table counted batch by batch: after every batch is added, the table [`topk`] gives
/// over the batches joined (each sample's error is added in sample order, as there).
#[derive(Clone, Debug)]
pub(crate) struct TopKAccumulator {
    classes: usize,
    k: usize,
    samples: usize,
    error_sums: Vec<f64>,
    disagreements: Vec<usize>,
}

impl TopKAccumulator {
    /// Nothing counted yet, for rows of `classes` scores and ranks 1..`k` (at most `classes`).
    pub fn new(classes: usize, k: usize) -> Self {
        let k = k.min(classes);
        TopKAccumulator {
            classes,
            k,
            samples: 0,
            error_sums: vec![0.0; k],
            disagreements: vec![0; k],
        }
    }

    /// Adds `samples` rows of A against the reference B.
    pub fn add(&mut self, a: &[f64], b: &[f64], samples: usize) {
        let classes = self.classes;
        assert_eq!(a.len(), samples * classes, "topk: A has the wrong length");
        assert_eq!(b.len(), samples * classes, "topk: B has the wrong length");
        let k = self.k;
        let per_sample: Vec<(Vec<f64>, Vec<bool>)> = a
            .par_chunks(classes.max(1))
            .zip(b.par_chunks(classes.max(1)))
            .map(|(ra, rb)| {
                let ib = top_indices(rb, k);
                let ia = top_indices(ra, k);
                let err = ib.iter().map(|&l| (ra[l] - rb[l]).abs()).collect();
                let differ = ib.iter().zip(&ia).map(|(x, y)| x != y).collect();
                (err, differ)
            })
            .collect();
        for (err, differ) in &per_sample {
            for r in 0..k {
                self.error_sums[r] += err[r];
                self.disagreements[r] += usize::from(differ[r]);
            }
        }
        self.samples += samples;
    }

    /// The table over every batch added.
    pub fn finish(&self) -> TopK {
        let n = self.samples.max(1) as f64;
        let ranks = (0..self.k)
            .map(|r| RankRow {
                rank: r + 1,
                mae: self.error_sums[r] / n,
                disagreement_pct: 100.0 * self.disagreements[r] as f64 / n,
            })
            .collect::<Vec<_>>();
        let top1_agreement_pct = ranks.first().map_or(100.0, |r| 100.0 - r.disagreement_pct);
        TopK {
            samples: self.samples,
            classes: self.classes,
            ranks,
            top1_agreement_pct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_indices_orders_largest_first() {
        assert_eq!(
            top_indices(&[0.1, 0.9, 0.5, f64::NAN, 0.7], 3),
            vec![1, 4, 2]
        );
        assert_eq!(top_indices(&[1.0, 1.0, 0.0], 2), vec![0, 1]);
        assert_eq!(top_indices(&[3.0, 1.0], 10), vec![0, 1]);
    }

    #[test]
    fn ranks_follow_the_reference() {
        // Sample 0: same order. Sample 1: A swaps ranks 1 and 2.
        let b = [0.9, 0.5, 0.1, 0.2, 0.8, 0.3];
        let a = [0.9, 0.5, 0.1, 0.2, 0.25, 0.3];
        let t = topk(&a, &b, 2, 3, 2);
        assert_eq!(t.ranks.len(), 2);
        assert_eq!(t.ranks[0].disagreement_pct, 50.0);
        assert_eq!(t.ranks[1].disagreement_pct, 50.0);
        assert_eq!(t.top1_agreement_pct, 50.0);
        // Rank 1 labels of B: 0 and 1; |a−b| there: 0 and 0.55.
        assert!((t.ranks[0].mae - 0.275).abs() < 1e-12);
        assert_eq!(t.ranks[1].mae, 0.0);
        let same = topk(&b, &b, 2, 3, 10);
        assert_eq!(same.ranks.len(), 3);
        assert_eq!(same.top1_agreement_pct, 100.0);
        // Sample by sample, the same table.
        let mut acc = TopKAccumulator::new(3, 2);
        acc.add(&a[..3], &b[..3], 1);
        acc.add(&a[3..], &b[3..], 1);
        assert_eq!(acc.finish(), t);
    }
}
