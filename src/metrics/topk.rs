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
    assert_eq!(a.len(), samples * classes, "topk: A has the wrong length");
    assert_eq!(b.len(), samples * classes, "topk: B has the wrong length");
    let k = k.min(classes);
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
    let n = samples.max(1) as f64;
    let ranks = (0..k)
        .map(|r| RankRow {
            rank: r + 1,
            mae: per_sample.iter().map(|(e, _)| e[r]).sum::<f64>() / n,
            disagreement_pct: 100.0 * per_sample.iter().filter(|(_, d)| d[r]).count() as f64 / n,
        })
        .collect::<Vec<_>>();
    let top1_agreement_pct = ranks.first().map_or(100.0, |r| 100.0 - r.disagreement_pct);
    TopK {
        samples,
        classes,
        ranks,
        top1_agreement_pct,
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
    }
}
