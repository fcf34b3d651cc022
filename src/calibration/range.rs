//! Range algorithms: from a histogram of |x| to the clipping threshold `amax` of a tensor.
//!
//! The INT8 scale is `amax / 127` (symmetric, zero point 0; `onnx::rewrite::qdq::scale_of`).

use super::histogram::Histogram;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Quantized levels on one side of zero for symmetric INT8 (TensorRT uses 128).
pub(crate) const QUANTIZED_LEVELS: usize = 128;

/// How a tensor's clipping threshold is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "algo", rename_all = "lowercase")]
pub(crate) enum Algorithm {
    /// KL-divergence threshold search (TensorRT's EntropyCalibration2).
    Entropy,
    /// The largest |x| seen.
    MinMax,
    /// The given percentile of |x| (e.g. 99.99).
    Percentile {
        /// Percent of values that must fall below the threshold.
        percent: f64,
    },
}

impl Algorithm {
    /// Short name used in cache file names: `entropy`, `minmax`, `percentile99.99`.
    pub(crate) fn file_tag(&self) -> String {
        match self {
            Algorithm::Entropy => "entropy".into(),
            Algorithm::MinMax => "minmax".into(),
            Algorithm::Percentile { percent } => format!("percentile{percent}"),
        }
    }

    /// The calibrator name TensorRT writes in a cache header for the nearest calibrator.
    pub(crate) fn trt_calibrator(&self) -> &'static str {
        match self {
            Algorithm::Entropy => "EntropyCalibration2",
            Algorithm::MinMax => "MinMaxCalibration",
            Algorithm::Percentile { .. } => "LegacyCalibration",
        }
    }

    /// The threshold for one tensor's histogram.
    pub fn amax(&self, h: &Histogram) -> f32 {
        match self {
            Algorithm::Entropy => entropy_amax(h),
            Algorithm::MinMax => h.max_abs(),
            Algorithm::Percentile { percent } => percentile_amax(h, *percent),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::Entropy => f.write_str("entropy"),
            Algorithm::MinMax => f.write_str("minmax"),
            Algorithm::Percentile { percent } => write!(f, "percentile {percent}"),
        }
    }
}

/// The upper edge of the bin where the cumulative count first reaches `percent`% of values,
/// capped at the largest value seen.
pub(crate) fn percentile_amax(h: &Histogram, percent: f64) -> f32 {
    if h.total() == 0 {
        return 0.0;
    }
    let target = (percent / 100.0 * h.total() as f64).ceil() as u64;
    let mut seen = 0u64;
    for (i, c) in h.counts().iter().enumerate() {
        seen += c;
        if seen >= target {
            return ((i + 1) as f32 * h.bin_width()).min(h.max_abs());
        }
    }
    h.max_abs()
}

/// The KL-divergence threshold search of NVIDIA's "8-bit Inference with TensorRT".
///
/// For every candidate threshold `i` bins wide (from 128 bins up to all of them): the
/// reference distribution P is the first `i` bins with every count beyond them added to the
/// last one (clipping); the candidate Q merges those `i` bins into 128 levels and spreads each
/// level back uniformly over the bins of its group that were non-empty. The threshold whose Q
/// is closest to P (least KL divergence) wins; `amax` is its upper edge.
///
/// Exact zeros are left out of both distributions: every threshold quantizes them exactly, and
/// after a ReLU they are about half the values, a spike in bin 0 whose spreading over the
/// first level would otherwise dominate the divergence and drag the threshold down (to 1.5σ
/// instead of 4.4σ on a ReLU'd Gaussian; NVIDIA's pytorch-quantization flattens bin 0 for the
/// same reason).
pub(crate) fn entropy_amax(h: &Histogram) -> f32 {
    let mut counts = h.counts().to_vec();
    counts[0] -= h.zeros();
    let levels = QUANTIZED_LEVELS.min(counts.len());
    if h.total() == h.zeros() || h.max_abs() == 0.0 {
        return 0.0;
    }
    // Bins past the last non-empty one give the same P and Q as the last one; stop there.
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0) + 1;
    let stop = last.max(levels);
    let search = Divergences::new(&counts, levels);
    let mut best = (f64::INFINITY, stop);
    for i in levels..=stop {
        let d = search.at(i);
        if d < best.0 {
            best = (d, i);
        }
    }
    (best.1 as f32 * h.bin_width()).min(h.max_abs())
}

/// Smallest share of Q a bin is given where P has mass and Q none: the divergence is then
/// large but finite.
const Q_FLOOR: f64 = 1e-12;

/// The divergence of every candidate threshold in O(levels) each instead of O(bins).
///
/// Written out, with `N` every count, `C` the counts of the first `i` bins, `S_g` and `n_g`
/// the sum and the non-empty bins of level `g`, and `t = N - C` the clipped tail:
///
/// `KL(P‖Q) = (Σ P_j ln P_j − Σ_g S_g ln(S_g / (n_g C)) − t ln q_last) / N − ln N`
///
/// because every non-empty bin of a level holds the same share of Q, and P differs from the
/// counts only in its last bin. The first sum is a prefix sum but for that last bin, and the
/// group sums and non-empty counts come from prefix sums too.
struct Divergences<'a> {
    counts: &'a [u64],
    levels: usize,
    /// `sums[j]`: counts of bins `0..j`.
    sums: Vec<u64>,
    /// `nonzero[j]`: non-empty bins among `0..j`.
    nonzero: Vec<u32>,
    /// `entropy[j]`: Σ c ln c over bins `0..j`.
    entropy: Vec<f64>,
}

impl<'a> Divergences<'a> {
    fn new(counts: &'a [u64], levels: usize) -> Self {
        let n = counts.len();
        let (mut sums, mut nonzero, mut entropy) = (
            Vec::with_capacity(n + 1),
            Vec::with_capacity(n + 1),
            Vec::with_capacity(n + 1),
        );
        let (mut s, mut z, mut e) = (0u64, 0u32, 0f64);
        for &c in counts {
            sums.push(s);
            nonzero.push(z);
            entropy.push(e);
            s += c;
            z += (c > 0) as u32;
            e += x_ln_x(c as f64);
        }
        sums.push(s);
        nonzero.push(z);
        entropy.push(e);
        Divergences {
            counts,
            levels,
            sums,
            nonzero,
            entropy,
        }
    }

    /// KL(P‖Q) of the threshold `i` bins wide (`levels <= i <= bins`).
    fn at(&self, i: usize) -> f64 {
        let total = self.sums[self.counts.len()] as f64;
        let kept = self.sums[i] as f64;
        if total == 0.0 || kept == 0.0 {
            return f64::INFINITY;
        }
        let tail = total - kept;
        let last = self.counts[i - 1] as f64;
        let p_ln_p = self.entropy[i - 1] + x_ln_x(last + tail);
        let mut p_ln_q = 0.0;
        let mut q_last = Q_FLOOR;
        for level in 0..self.levels {
            let start = level * i / self.levels;
            let end = ((level + 1) * i / self.levels).max(start + 1).min(i);
            let sum = (self.sums[end] - self.sums[start]) as f64;
            if sum == 0.0 {
                continue;
            }
            let nonzero = (self.nonzero[end] - self.nonzero[start]) as f64;
            let q = (sum / (nonzero * kept)).max(Q_FLOOR);
            p_ln_q += sum * q.ln();
            if end == i && last > 0.0 {
                q_last = q;
            }
        }
        if tail > 0.0 {
            p_ln_q += tail * q_last.ln();
        }
        (p_ln_p - p_ln_q) / total - total.ln()
    }
}

/// `x ln x`, 0 at 0.
fn x_ln_x(x: f64) -> f64 {
    if x > 0.0 {
        x * x.ln()
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::histogram::DEFAULT_BINS;
    use super::*;
    use crate::onnx::rewrite::qdq::scale_of;

    /// A seeded uniform in (0, 1).
    struct Rng(u64);
    impl Rng {
        fn unit(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f32 {
            let (u, v) = (self.unit(), self.unit());
            ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
        }
        fn laplace(&mut self) -> f32 {
            let u = self.unit() - 0.5;
            (-u.signum() * (1.0 - 2.0 * u.abs()).ln()) as f32
        }
    }

    /// Mean squared error of fake-quantizing `values` with threshold `amax`.
    fn quant_mse(values: &[f32], amax: f32) -> f64 {
        let s = scale_of(amax);
        values
            .iter()
            .map(|&v| {
                let q = (v / s).round().clamp(-127.0, 127.0) * s;
                ((q - v) as f64).powi(2)
            })
            .sum::<f64>()
            / values.len() as f64
    }

    /// The divergence of threshold `i` computed as the method describes it: P and Q built
    /// bin by bin, then Σ p·ln(p/q) over the normalised distributions.
    fn naive_divergence(counts: &[u64], levels: usize, i: usize) -> f64 {
        let tail: u64 = counts[i..].iter().sum();
        let mut p: Vec<f64> = counts[..i].iter().map(|&c| c as f64).collect();
        p[i - 1] += tail as f64;
        let mut q = vec![0f64; i];
        for level in 0..levels {
            let start = level * i / levels;
            let end = ((level + 1) * i / levels).max(start + 1).min(i);
            let group = &counts[start..end];
            let sum: u64 = group.iter().sum();
            let nonzero = group.iter().filter(|&&c| c > 0).count();
            for (j, &c) in group.iter().enumerate() {
                if c > 0 {
                    q[start + j] = sum as f64 / nonzero as f64;
                }
            }
        }
        let (ps, qs): (f64, f64) = (p.iter().sum(), q.iter().sum());
        if ps == 0.0 || qs == 0.0 {
            return f64::INFINITY;
        }
        p.iter()
            .zip(&q)
            .filter(|(p, _)| **p > 0.0)
            .map(|(p, q)| {
                let p = p / ps;
                p * (p / (q / qs).max(Q_FLOOR)).ln()
            })
            .sum()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// The prefix-sum divergence equals the bin-by-bin one at every threshold, on sparse
        /// and dense histograms, with and without a clipped tail.
        #[test]
        fn divergences_match_the_bin_by_bin_definition(
            counts in proptest::collection::vec(
                proptest::prop_oneof![3 => proptest::prelude::Just(0u64), 5 => 0u64..1_000_000],
                256..=512,
            ),
            levels in proptest::prop_oneof![proptest::prelude::Just(128usize), 2usize..64],
        ) {
            let d = Divergences::new(&counts, levels);
            for i in levels..=counts.len() {
                let (fast, slow) = (d.at(i), naive_divergence(&counts, levels, i));
                if slow.is_infinite() {
                    proptest::prop_assert!(fast.is_infinite(), "i {i}: {fast} vs {slow}");
                } else {
                    proptest::prop_assert!(
                        (fast - slow).abs() <= 1e-9 * slow.abs().max(1.0),
                        "i {i}: {fast} vs {slow}"
                    );
                }
            }
        }
    }

    #[test]
    fn minmax_is_the_largest_value() {
        let h = Histogram::from_values(DEFAULT_BINS, &[0.5, -7.25, 3.0]);
        assert_eq!(Algorithm::MinMax.amax(&h), 7.25);
    }

    #[test]
    fn percentile_of_a_gaussian_matches_the_normal_quantile() {
        let mut rng = Rng(1);
        let v: Vec<f32> = (0..400_000).map(|_| rng.normal()).collect();
        let h = Histogram::from_values(DEFAULT_BINS, &v);
        // P(|x| < 2.5758) = 99% for a standard normal; bins are 8/2048 wide.
        let a = percentile_amax(&h, 99.0);
        assert!((a - 2.5758).abs() < 0.03, "99th percentile of |x|: {a}");
        let a = percentile_amax(&h, 100.0);
        assert_eq!(a, h.max_abs());
    }

    #[test]
    fn entropy_on_a_gaussian_keeps_the_bulk() {
        let mut rng = Rng(2);
        let v: Vec<f32> = (0..400_000).map(|_| rng.normal()).collect();
        let h = Histogram::from_values(DEFAULT_BINS, &v);
        let a = entropy_amax(&h);
        // With no outliers the search must not clip the bulk (|x| < 2.5σ holds 98.8% of
        // the values) and must do no worse than the maximum on quantization error.
        assert!(
            a > 2.5 && a <= h.max_abs(),
            "entropy amax {a}, max {}",
            h.max_abs()
        );
        assert!(quant_mse(&v, a) <= quant_mse(&v, h.max_abs()) * 1.0001);
    }

    /// After a ReLU about half the values are exact zeros. They are one spike in bin 0 that no
    /// threshold quantizes differently (zero is always exact), so they must not move the
    /// threshold: a ReLU'd Gaussian gets about the threshold of the half-normal alone.
    #[test]
    fn entropy_ignores_the_zero_spike_of_a_relu() {
        let mut rng = Rng(4);
        let half: Vec<f32> = (0..300_000).map(|_| rng.normal().abs()).collect();
        let mut relu = half.clone();
        relu.extend(std::iter::repeat_n(0.0, 300_000));
        let a_half = entropy_amax(&Histogram::from_values(DEFAULT_BINS, &half));
        let a_relu = entropy_amax(&Histogram::from_values(DEFAULT_BINS, &relu));
        assert!(
            (a_relu / a_half - 1.0).abs() < 0.02,
            "half-normal {a_half}, with zeros {a_relu}"
        );
    }

    #[test]
    fn entropy_clips_rare_outliers_and_beats_minmax_on_the_bulk() {
        let mut rng = Rng(3);
        let mut v: Vec<f32> = (0..200_000).map(|_| rng.laplace()).collect();
        // 20 outliers far out (0.01% of values).
        for k in 0..20 {
            v[k * 9973] = if k % 2 == 0 { 150.0 } else { -120.0 };
        }
        let bulk: Vec<f32> = v.iter().copied().filter(|x| x.abs() < 20.0).collect();
        let h = Histogram::from_values(DEFAULT_BINS, &v);
        let entropy = entropy_amax(&h);
        let minmax = Algorithm::MinMax.amax(&h);
        assert_eq!(minmax, 150.0);
        assert!(entropy < 40.0, "entropy kept the outliers: {entropy}");
        assert!(entropy > 5.0, "entropy clipped the bulk: {entropy}");
        let (e, m) = (quant_mse(&bulk, entropy), quant_mse(&bulk, minmax));
        assert!(e < m / 4.0, "bulk MSE entropy {e} vs minmax {m}");
    }

    #[test]
    fn degenerate_histograms() {
        let empty = Histogram::new(DEFAULT_BINS);
        assert_eq!(entropy_amax(&empty), 0.0);
        let zeros = Histogram::from_values(DEFAULT_BINS, &[0.0; 10]);
        assert_eq!(entropy_amax(&zeros), 0.0);
        assert_eq!(scale_of(0.0), 1.0);
        let one = Histogram::from_values(DEFAULT_BINS, &[3.0; 10]);
        let a = entropy_amax(&one);
        assert!(a > 0.0 && a <= 3.0, "{a}");
    }
}
