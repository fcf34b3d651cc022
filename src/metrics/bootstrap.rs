//! Scores of a model's output against a reference with their uncertainty: per-sample sums
//! from which the cosine of the flattened outputs, top-1 agreement and the mean absolute error
//! of any subset of the samples follow, with 95% intervals: a percentile bootstrap of the
//! cosine (the samples resampled with replacement, the cosine recomputed on each resample) and
//! the Wilson score interval of top-1 agreement (a proportion: the bootstrap of 12 samples that
//! all agree would say [100, 100]; Wilson says [76, 100]). With a handful of samples the
//! intervals are wide, which is the point: three photos decide nothing.

use crate::metrics::topk::topk;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Resamples drawn for an interval.
pub(crate) const RESAMPLES: usize = 1000;

/// One sample's share of the scores.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct SampleSums {
    /// Σ out·ref over the sample's values.
    pub(crate) dot: f64,
    /// Σ out².
    pub(crate) out_sq: f64,
    /// Σ ref².
    pub(crate) ref_sq: f64,
    /// Σ |out − ref| over the finite differences.
    pub(crate) abs_err: f64,
    /// Finite differences counted in `abs_err`.
    pub finite: usize,
    /// Values where either side is NaN and the two differ.
    pub(crate) nan_mismatches: usize,
    /// Values where either side is ±Inf (neither NaN) and the two differ.
    pub(crate) inf_mismatches: usize,
    /// Whether the top-1 classes agree (`None` when the output is not `[samples, classes]`).
    pub(crate) top1_agrees: Option<bool>,
}

/// The per-sample sums of `out` against `reference`, both `samples` rows of equal length;
/// `classes` is the row length when the rows are class scores (top-1 agreement is counted).
pub(crate) fn sample_sums(
    out: &[f64],
    reference: &[f64],
    samples: usize,
    classes: Option<usize>,
) -> Vec<SampleSums> {
    let row = out.len() / samples.max(1);
    out.chunks(row.max(1))
        .zip(reference.chunks(row.max(1)))
        .map(|(a, b)| {
            let mut s = SampleSums::default();
            for (&x, &y) in a.iter().zip(b) {
                if x.is_finite() && y.is_finite() {
                    s.dot += x * y;
                    s.out_sq += x * x;
                    s.ref_sq += y * y;
                    s.abs_err += (x - y).abs();
                    s.finite += 1;
                } else if x.is_nan() || y.is_nan() {
                    s.nan_mismatches += 1;
                } else if x != y {
                    s.inf_mismatches += 1;
                }
                // The same infinity on both sides agrees and is left out.
            }
            s.top1_agrees = classes
                .filter(|&k| k > 1 && a.len() == k)
                .map(|k| topk(a, b, 1, k, 1).top1_agreement_pct >= 100.0);
            s
        })
        .collect()
}

/// The cosine of the outputs of the samples `picked` (indices into `sums`), flattened; NaN
/// when a picked sample has NaN or ±Inf where the two differ.
fn cosine_of(sums: &[SampleSums], picked: impl Iterator<Item = usize>) -> f64 {
    let (mut dot, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for i in picked {
        if sums[i].nan_mismatches + sums[i].inf_mismatches > 0 {
            return f64::NAN;
        }
        dot += sums[i].dot;
        aa += sums[i].out_sq;
        bb += sums[i].ref_sq;
    }
    let norm = (aa * bb).sqrt();
    if norm > 0.0 {
        dot / norm
    } else if aa == bb {
        1.0
    } else {
        0.0
    }
}

/// Top-1 agreement, %, of the samples `picked` (`None` without class scores).
fn agreement_of(sums: &[SampleSums], picked: impl Iterator<Item = usize>) -> Option<f64> {
    let (mut agree, mut n) = (0usize, 0usize);
    for i in picked {
        agree += usize::from(sums[i].top1_agrees?);
        n += 1;
    }
    (n > 0).then(|| 100.0 * agree as f64 / n as f64)
}

/// The scores of a set of samples, each with its 95% interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalScores {
    /// Cosine similarity of the flattened outputs; NaN where they differ in NaN or ±Inf values.
    #[serde(with = "super::non_finite")]
    pub cosine: f64,
    /// Its percentile bootstrap 95% interval (NaN to NaN with the cosine).
    #[serde(default, with = "super::non_finite::pair")]
    pub cosine_interval: [f64; 2],
    /// Samples whose top-1 class agrees, %.
    pub top1_agreement_pct: Option<f64>,
    /// Its Wilson score 95% interval.
    #[serde(default)]
    pub top1_agreement_interval: Option<[f64; 2]>,
    /// Mean absolute difference over values finite on both sides; NaN where the outputs differ
    /// in NaN values, else +Inf where they differ in infinite ones.
    #[serde(with = "super::non_finite")]
    pub mae: f64,
    /// Samples scored.
    #[serde(default)]
    pub samples: usize,
}

/// The 2.5th and 97.5th percentiles of `values` (sorted in place), widened to take in `point`
/// where resampling noise leaves it just outside.
fn percentile_interval(values: &mut [f64], point: f64) -> [f64; 2] {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    [at(0.025).min(point), at(0.975).max(point)]
}

/// The Wilson score 95% interval of a proportion, %: `agree` of `n`.
pub(crate) fn wilson_interval(agree: usize, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 100.0];
    }
    const Z: f64 = 1.959964;
    let (n, p) = (n as f64, agree as f64 / n as f64);
    let z2 = Z * Z;
    let center = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    [
        (100.0 * (center - half)).clamp(0.0, 100.0 * p),
        (100.0 * (center + half)).clamp(100.0 * p, 100.0),
    ]
}

/// The scores of all of `sums`: the cosine's interval from [`RESAMPLES`] resamples drawn with
/// `seed` (the same seed, the same interval), top-1 agreement's by Wilson.
pub(crate) fn interval_scores(sums: &[SampleSums], seed: u64) -> IntervalScores {
    let n = sums.len();
    let cosine = cosine_of(sums, 0..n);
    let agreement = agreement_of(sums, 0..n);
    let (abs_err, finite) = sums
        .iter()
        .fold((0.0, 0usize), |(e, f), s| (e + s.abs_err, f + s.finite));
    let mut scores = IntervalScores {
        cosine,
        cosine_interval: [cosine, cosine],
        top1_agreement_pct: agreement,
        top1_agreement_interval: agreement.map(|_| {
            let agree = sums.iter().filter(|s| s.top1_agrees == Some(true)).count();
            wilson_interval(agree, n)
        }),
        mae: if sums.iter().any(|s| s.nan_mismatches > 0) {
            f64::NAN
        } else if sums.iter().any(|s| s.inf_mismatches > 0) {
            f64::INFINITY
        } else if finite == 0 {
            0.0
        } else {
            abs_err / finite as f64
        },
        samples: n,
    };
    if n < 2 || cosine.is_nan() {
        return scores;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cosines = Vec::with_capacity(RESAMPLES);
    let mut picked = vec![0usize; n];
    for _ in 0..RESAMPLES {
        for p in picked.iter_mut() {
            *p = rng.random_range(0..n);
        }
        cosines.push(cosine_of(sums, picked.iter().copied()));
    }
    scores.cosine_interval = percentile_interval(&mut cosines, cosine);
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` samples of 4 classes; the first `wrong` have their top class moved.
    fn outputs(n: usize, wrong: usize) -> (Vec<f64>, Vec<f64>) {
        let reference: Vec<f64> = (0..n * 4).map(|i| ((i * 7) % 5) as f64 + 0.1).collect();
        let mut out = reference.clone();
        for s in 0..wrong {
            let row = &mut out[s * 4..s * 4 + 4];
            let top = (0..4).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            row[top] -= 10.0;
        }
        (out, reference)
    }

    #[test]
    fn the_sums_give_the_flattened_cosine_and_the_agreement() {
        let (out, reference) = outputs(8, 2);
        let sums = sample_sums(&out, &reference, 8, Some(4));
        let s = interval_scores(&sums, 1);
        let c = crate::metrics::closeness::closeness(&out, &reference, 8, &Default::default());
        assert!((s.cosine - c.cosine).abs() < 1e-12);
        assert_eq!(s.top1_agreement_pct, Some(75.0));
        assert!((s.mae - c.mean_abs_err).abs() < 1e-12);
        assert_eq!(s.samples, 8);
    }

    #[test]
    fn intervals_contain_the_estimate_and_narrow_with_more_samples() {
        let width = |n: usize| {
            let (out, reference) = outputs(n, n / 4);
            let s = interval_scores(&sample_sums(&out, &reference, n, Some(4)), 7);
            let [lo, hi] = s.top1_agreement_interval.unwrap();
            assert!(lo <= s.top1_agreement_pct.unwrap() && s.top1_agreement_pct.unwrap() <= hi);
            let [clo, chi] = s.cosine_interval;
            assert!(
                clo <= s.cosine && s.cosine <= chi,
                "{clo} {} {chi}",
                s.cosine
            );
            assert!(lo < hi, "some spread with a quarter of the samples wrong");
            hi - lo
        };
        let (few, many) = (width(4), width(400));
        assert!(many < few / 3.0, "4 samples: {few}, 400 samples: {many}");
    }

    #[test]
    fn the_same_seed_gives_the_same_interval() {
        let (out, reference) = outputs(12, 3);
        let sums = sample_sums(&out, &reference, 12, Some(4));
        assert_eq!(interval_scores(&sums, 3), interval_scores(&sums, 3));
        let one = interval_scores(&sums[..1], 3);
        assert_eq!(one.cosine_interval, [one.cosine, one.cosine]);
    }

    #[test]
    fn agreement_intervals_are_wilsons() {
        let [lo, hi] = wilson_interval(12, 12);
        assert!((lo - 75.75).abs() < 0.1 && hi == 100.0, "{lo} {hi}");
        let [lo, hi] = wilson_interval(5, 10);
        assert!(
            (lo - 23.66).abs() < 0.05 && (hi - 76.34).abs() < 0.05,
            "{lo} {hi}"
        );
        assert_eq!(wilson_interval(0, 4)[0], 0.0);
    }

    #[test]
    fn non_finite_differences_are_not_left_out() {
        let (mut out, reference) = outputs(8, 0);
        out[5] = f64::INFINITY;
        let s = interval_scores(&sample_sums(&out, &reference, 8, Some(4)), 1);
        assert!(s.cosine.is_nan() && s.cosine_interval[0].is_nan(), "{s:?}");
        assert_eq!(s.mae, f64::INFINITY);
        let back: IntervalScores =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert!(back.cosine.is_nan() && back.mae == f64::INFINITY);
        out[6] = f64::NAN;
        assert!(
            interval_scores(&sample_sums(&out, &reference, 8, Some(4)), 1)
                .mae
                .is_nan()
        );
        // The same infinity on both sides agrees.
        let mut both = reference.clone();
        both[5] = f64::NEG_INFINITY;
        let s = interval_scores(&sample_sums(&both, &both, 8, Some(4)), 1);
        assert!((s.cosine - 1.0).abs() < 1e-12 && s.mae == 0.0, "{s:?}");
    }
}
