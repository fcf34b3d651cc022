//! Element-wise closeness of two outputs, numpy `isclose` semantics with B as the reference:
//! `|a − b| <= atol + rtol·|b|`.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Tolerances for `isclose`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Relative tolerance (times `|b|`).
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Whether NaN equals NaN.
    pub equal_nan: bool,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            rtol: 1e-3,
            atol: 1e-8,
            equal_nan: false,
        }
    }
}

/// numpy's `isclose(a, b)` for one pair of elements (B is the reference).
pub fn isclose(a: f64, b: f64, tol: &Tolerance) -> bool {
    if a.is_nan() || b.is_nan() {
        return tol.equal_nan && a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= tol.atol + tol.rtol * b.abs()
}

/// Closeness of one output tensor of A against the same tensor of B.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Closeness {
    /// Number of elements compared.
    pub elements: usize,
    /// Elements where `isclose` holds, in percent.
    pub equal_pct: f64,
    /// Samples (rows along axis 0) compared.
    pub samples: usize,
    /// Samples whose elements are all close, in percent.
    pub(crate) all_close_samples_pct: f64,
    /// Largest `|a − b|` over elements finite on both sides; NaN or +Inf when
    /// [`Closeness::non_finite_mismatches`] is not 0.
    #[serde(with = "super::non_finite")]
    pub max_abs_err: f64,
    /// Largest `|a − b| / |b|` over finite elements with `b ≠ 0`; NaN or +Inf as `max_abs_err`.
    #[serde(with = "super::non_finite")]
    pub max_rel_err: f64,
    /// Mean `|a − b|` over elements finite on both sides; NaN or +Inf as `max_abs_err`.
    #[serde(with = "super::non_finite")]
    pub(crate) mean_abs_err: f64,
    /// Cosine similarity of the two flattened tensors (1 when both are zero), over the elements
    /// finite on both sides; NaN when [`Closeness::non_finite_mismatches`] is not 0, so an
    /// overflow never reads as agreement.
    #[serde(with = "super::non_finite")]
    pub cosine: f64,
    /// Elements where A or B is NaN or ±Inf and `isclose` does not hold (the same infinity on
    /// both sides, or NaN on both with `equal_nan`, agrees and is left out of the errors).
    #[serde(default)]
    pub(crate) non_finite_mismatches: usize,
    /// NaN count in A.
    pub nan_a: usize,
    /// NaN count in B.
    pub(crate) nan_b: usize,
    /// ±Inf count in A.
    pub inf_a: usize,
    /// ±Inf count in B.
    pub inf_b: usize,
}

#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    close: usize,
    all_close_samples: usize,
    finite: usize,
    max_abs: f64,
    max_rel: f64,
    sum_abs: f64,
    dot: f64,
    aa: f64,
    bb: f64,
    nan_a: usize,
    nan_b: usize,
    inf_a: usize,
    inf_b: usize,
    /// Disagreeing pairs where either side is NaN.
    nan_mismatch: usize,
    /// Disagreeing pairs where either side is ±Inf and neither is NaN.
    inf_mismatch: usize,
}

impl Acc {
    fn sample(a: &[f64], b: &[f64], tol: &Tolerance) -> Acc {
        let mut s = Acc::default();
        for (&x, &y) in a.iter().zip(b) {
            s.nan_a += x.is_nan() as usize;
            s.nan_b += y.is_nan() as usize;
            s.inf_a += x.is_infinite() as usize;
            s.inf_b += y.is_infinite() as usize;
            let close = isclose(x, y, tol);
            s.close += close as usize;
            if !close && (x.is_nan() || y.is_nan()) {
                s.nan_mismatch += 1;
            } else if !close && (x.is_infinite() || y.is_infinite()) {
                s.inf_mismatch += 1;
            }
            if x.is_finite() && y.is_finite() {
                let d = (x - y).abs();
                s.finite += 1;
                s.sum_abs += d;
                s.max_abs = s.max_abs.max(d);
                if y != 0.0 {
                    s.max_rel = s.max_rel.max(d / y.abs());
                }
                s.dot += x * y;
                s.aa += x * x;
                s.bb += y * y;
            }
        }
        s.all_close_samples = (s.close == a.len()) as usize;
        s
    }

    fn merge(mut self, o: Acc) -> Acc {
        self.close += o.close;
        self.all_close_samples += o.all_close_samples;
        self.finite += o.finite;
        self.max_abs = self.max_abs.max(o.max_abs);
        self.max_rel = self.max_rel.max(o.max_rel);
        self.sum_abs += o.sum_abs;
        self.dot += o.dot;
        self.aa += o.aa;
        self.bb += o.bb;
        self.nan_a += o.nan_a;
        self.nan_b += o.nan_b;
        self.inf_a += o.inf_a;
        self.inf_b += o.inf_b;
        self.nan_mismatch += o.nan_mismatch;
        self.inf_mismatch += o.inf_mismatch;
        self
    }
}

fn pct(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Compares `a` against the reference `b` (same length), seen as `samples` rows of equal size.
/// `samples` of 0 or one that does not divide the length means one sample.
pub fn closeness(a: &[f64], b: &[f64], samples: usize, tol: &Tolerance) -> Closeness {
    let mut acc = ClosenessAccumulator::new(*tol);
    acc.add(a, b, samples);
    acc.finish()
}

/// Closeness counted batch by batch: after every batch of an output is added, the numbers
/// [`closeness`] gives over the batches joined (sums may differ in their last bits, being
/// added in another order).
#[derive(Clone, Debug)]
pub(crate) struct ClosenessAccumulator {
    tol: Tolerance,
    acc: Acc,
    elements: usize,
    samples: usize,
}

impl ClosenessAccumulator {
    /// Nothing counted yet.
    pub fn new(tol: Tolerance) -> Self {
        ClosenessAccumulator {
            tol,
            acc: Acc::default(),
            elements: 0,
            samples: 0,
        }
    }

    /// Adds one batch: `a` against `b` (same length) as `samples` rows of equal size (0, or a
    /// count that does not divide the length, means one).
    pub fn add(&mut self, a: &[f64], b: &[f64], samples: usize) {
        assert_eq!(a.len(), b.len(), "closeness needs equal lengths");
        let samples = if samples == 0 || !a.len().is_multiple_of(samples) {
            1
        } else {
            samples
        };
        let row = (a.len() / samples).max(1);
        let tol = self.tol;
        let batch = a
            .par_chunks(row)
            .zip(b.par_chunks(row))
            .map(|(x, y)| Acc::sample(x, y, &tol))
            .reduce(Acc::default, Acc::merge);
        self.acc = self.acc.merge(batch);
        self.elements += a.len();
        self.samples += samples;
    }

    /// The closeness of every batch added.
    pub fn finish(&self) -> Closeness {
        let acc = &self.acc;
        let samples = self.samples.max(1);
        let spoiled = if acc.nan_mismatch > 0 {
            Some(f64::NAN)
        } else if acc.inf_mismatch > 0 {
            Some(f64::INFINITY)
        } else {
            None
        };
        let norm = (acc.aa * acc.bb).sqrt();
        let cosine = if spoiled.is_some() {
            f64::NAN
        } else if norm > 0.0 {
            acc.dot / norm
        } else if acc.aa == acc.bb {
            1.0
        } else {
            0.0
        };
        Closeness {
            elements: self.elements,
            equal_pct: pct(acc.close, self.elements),
            samples,
            all_close_samples_pct: pct(acc.all_close_samples, samples),
            max_abs_err: spoiled.unwrap_or(acc.max_abs),
            max_rel_err: spoiled.unwrap_or(acc.max_rel),
            mean_abs_err: spoiled.unwrap_or(if acc.finite == 0 {
                0.0
            } else {
                acc.sum_abs / acc.finite as f64
            }),
            cosine,
            non_finite_mismatches: acc.nan_mismatch + acc.inf_mismatch,
            nan_a: acc.nan_a,
            nan_b: acc.nan_b,
            inf_a: acc.inf_a,
            inf_b: acc.inf_b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isclose_follows_numpy() {
        let t = Tolerance::default();
        assert!(isclose(1.0, 1.0005, &t));
        assert!(!isclose(1.0, 1.002, &t));
        // Asymmetric, as numpy: the tolerance scales with |b|.
        let wide = Tolerance {
            rtol: 0.5,
            atol: 0.0,
            equal_nan: false,
        };
        assert!(isclose(1.0, 2.0, &wide));
        assert!(!isclose(2.0, 1.0, &wide));
        assert!(!isclose(f64::NAN, f64::NAN, &t));
        assert!(isclose(
            f64::NAN,
            f64::NAN,
            &Tolerance {
                equal_nan: true,
                ..t
            }
        ));
        assert!(isclose(f64::INFINITY, f64::INFINITY, &t));
        assert!(!isclose(f64::INFINITY, f64::NEG_INFINITY, &t));
        assert!(!isclose(1e300, f64::INFINITY, &t));
        assert!(isclose(0.0, 1e-9, &t));
    }

    #[test]
    fn summarizes_errors_per_tensor_and_sample() {
        let b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let a = [1.0, 2.0, 3.0, 4.0, 5.5, 6.0];
        let c = closeness(&a, &b, 2, &Tolerance::default());
        assert_eq!(c.elements, 6);
        assert!((c.equal_pct - 500.0 / 6.0).abs() < 1e-9);
        assert_eq!(c.all_close_samples_pct, 50.0);
        assert_eq!(c.max_abs_err, 0.5);
        assert!((c.max_rel_err - 0.1).abs() < 1e-12);
        assert!((c.mean_abs_err - 0.5 / 6.0).abs() < 1e-12);
        assert_eq!((c.nan_a, c.nan_b, c.inf_a, c.inf_b), (0, 0, 0, 0));
        let same = closeness(&b, &b, 3, &Tolerance::default());
        assert_eq!(same.equal_pct, 100.0);
        assert!((same.cosine - 1.0).abs() < 1e-12);
        let neg: Vec<f64> = b.iter().map(|x| -x).collect();
        assert!((closeness(&neg, &b, 1, &Tolerance::default()).cosine + 1.0).abs() < 1e-12);
    }

    #[test]
    fn batches_added_one_by_one_give_the_whole_tensor_s_closeness() {
        let b: Vec<f64> = (0..24).map(|i| (i as f64 * 0.37).sin()).collect();
        let a: Vec<f64> = b
            .iter()
            .enumerate()
            .map(|(i, v)| if i % 5 == 0 { v + 0.01 } else { *v })
            .collect();
        let t = Tolerance::default();
        let whole = closeness(&a, &b, 6, &t);
        let mut acc = ClosenessAccumulator::new(t);
        acc.add(&a[..16], &b[..16], 4);
        acc.add(&a[16..], &b[16..], 2);
        let parts = acc.finish();
        assert_eq!(
            (
                parts.elements,
                parts.samples,
                parts.equal_pct,
                parts.all_close_samples_pct
            ),
            (
                whole.elements,
                whole.samples,
                whole.equal_pct,
                whole.all_close_samples_pct
            )
        );
        assert_eq!(
            (parts.max_abs_err, parts.max_rel_err),
            (whole.max_abs_err, whole.max_rel_err)
        );
        assert!((parts.mean_abs_err - whole.mean_abs_err).abs() < 1e-15);
        assert!((parts.cosine - whole.cosine).abs() < 1e-15);
    }

    #[test]
    fn non_finite_disagreements_make_every_error_and_the_cosine_non_finite() {
        let b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let t = Tolerance::default();
        let inf = closeness(&[1.0, 2.0, 3.0, 4.0, 5.0, f64::INFINITY], &b, 2, &t);
        assert!(inf.cosine.is_nan(), "{}", inf.cosine);
        assert_eq!(inf.max_abs_err, f64::INFINITY);
        assert_eq!(inf.mean_abs_err, f64::INFINITY);
        assert_eq!((inf.inf_a, inf.non_finite_mismatches), (1, 1));
        let nan = closeness(&b, &[1.0, 2.0, f64::NAN, 4.0, 5.0, 6.0], 2, &t);
        assert!(nan.cosine.is_nan() && nan.max_abs_err.is_nan() && nan.max_rel_err.is_nan());
        assert_eq!(nan.non_finite_mismatches, 1);
        // The same infinity on both sides agrees: the finite elements decide.
        let both = [1.0, 2.0, 3.0, 4.0, 5.0, f64::NEG_INFINITY];
        let same = closeness(&both, &both, 2, &t);
        assert!((same.cosine - 1.0).abs() < 1e-12);
        assert_eq!((same.max_abs_err, same.non_finite_mismatches), (0.0, 0));
    }
}
