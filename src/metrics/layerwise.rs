//! Layer-by-layer divergence, the arithmetic: per intermediate tensor, running sums over the
//! batches as they come (so no sample's tensors are kept), then cosine, errors, isclose %,
//! non-finite counts and the share of the reference's values float16 cannot hold; and the first
//! tensor, in graph order, whose cosine falls below a threshold.

use super::closeness::{isclose, Tolerance};
use serde::{Deserialize, Serialize};

/// The largest finite float16 value: reference values beyond ±this overflow in FP16.
pub(crate) const FP16_MAX: f64 = 65504.0;

/// Running statistics of one tensor of A against the same tensor of the reference B, summed
/// over batches ([`TensorStats::add`]); [`TensorStats::merge`] joins two partial sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct TensorStats {
    elements: u64,
    close: u64,
    dot: f64,
    aa: f64,
    bb: f64,
    max_abs: f64,
    max_rel: f64,
    nan_a: u64,
    nan_b: u64,
    inf_a: u64,
    inf_b: u64,
    nan_mismatch: u64,
    inf_mismatch: u64,
    beyond_fp16: u64,
}

impl TensorStats {
    /// Adds one batch: `a` against the reference `b`, element by element (same length).
    pub fn add(&mut self, a: &[f32], b: &[f32], tol: &Tolerance) {
        debug_assert_eq!(a.len(), b.len());
        for (&x, &y) in a.iter().zip(b) {
            let (x, y) = (f64::from(x), f64::from(y));
            self.elements += 1;
            self.nan_a += x.is_nan() as u64;
            self.nan_b += y.is_nan() as u64;
            self.inf_a += x.is_infinite() as u64;
            self.inf_b += y.is_infinite() as u64;
            self.beyond_fp16 += (y.abs() > FP16_MAX) as u64;
            let close = isclose(x, y, tol);
            self.close += close as u64;
            if !close && (x.is_nan() || y.is_nan()) {
                self.nan_mismatch += 1;
            } else if !close && (x.is_infinite() || y.is_infinite()) {
                self.inf_mismatch += 1;
            }
            if x.is_finite() && y.is_finite() {
                let d = (x - y).abs();
                self.max_abs = self.max_abs.max(d);
                if y != 0.0 {
                    self.max_rel = self.max_rel.max(d / y.abs());
                }
                self.dot += x * y;
                self.aa += x * x;
                self.bb += y * y;
            }
        }
    }

    #[cfg(test)]
    /// Joins the sums of `other` into these.
    pub(crate) fn merge(&mut self, other: &TensorStats) {
        self.elements += other.elements;
        self.close += other.close;
        self.dot += other.dot;
        self.aa += other.aa;
        self.bb += other.bb;
        self.max_abs = self.max_abs.max(other.max_abs);
        self.max_rel = self.max_rel.max(other.max_rel);
        self.nan_a += other.nan_a;
        self.nan_b += other.nan_b;
        self.inf_a += other.inf_a;
        self.inf_b += other.inf_b;
        self.nan_mismatch += other.nan_mismatch;
        self.inf_mismatch += other.inf_mismatch;
        self.beyond_fp16 += other.beyond_fp16;
    }

    /// The figures of the sums, as [`crate::metrics::closeness::closeness`] gives them: a
    /// NaN or ±Inf on one side only makes the cosine NaN (an overflow never reads as
    /// agreement) and the errors NaN or +Inf.
    pub fn figures(&self) -> Figures {
        let spoiled = if self.nan_mismatch > 0 {
            Some(f64::NAN)
        } else if self.inf_mismatch > 0 {
            Some(f64::INFINITY)
        } else {
            None
        };
        let norm = (self.aa * self.bb).sqrt();
        let cosine = if spoiled.is_some() {
            f64::NAN
        } else if norm > 0.0 {
            (self.dot / norm).min(1.0)
        } else if self.aa == self.bb {
            1.0
        } else {
            0.0
        };
        let pct = |n: u64| {
            if self.elements == 0 {
                0.0
            } else {
                100.0 * n as f64 / self.elements as f64
            }
        };
        Figures {
            elements: self.elements,
            cosine,
            max_abs_err: spoiled.unwrap_or(self.max_abs),
            max_rel_err: spoiled.unwrap_or(self.max_rel),
            close_pct: if self.elements == 0 {
                100.0
            } else {
                pct(self.close)
            },
            nan_a: self.nan_a,
            nan_b: self.nan_b,
            inf_a: self.inf_a,
            inf_b: self.inf_b,
            beyond_fp16_pct: pct(self.beyond_fp16),
        }
    }
}

/// How close one tensor of A is to the reference's, over every sample run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Elements compared (all samples).
    pub elements: u64,
    /// Cosine similarity over the elements finite on both sides (1 when both are zero); NaN
    /// when a NaN or ±Inf is on one side only.
    #[serde(with = "super::non_finite")]
    pub cosine: f64,
    /// Largest `|a − b|` over elements finite on both sides (NaN or +Inf as the cosine).
    #[serde(with = "super::non_finite")]
    pub max_abs_err: f64,
    /// Largest `|a − b| / |b|` over finite elements with `b ≠ 0` (NaN or +Inf as above).
    #[serde(with = "super::non_finite")]
    pub max_rel_err: f64,
    /// Elements where `isclose` holds, percent.
    pub close_pct: f64,
    /// NaN count in A.
    pub nan_a: u64,
    /// NaN count in the reference.
    pub(crate) nan_b: u64,
    /// ±Inf count in A.
    pub inf_a: u64,
    /// ±Inf count in the reference.
    pub inf_b: u64,
    /// The reference's values beyond ±65504 (what float16 cannot hold), percent.
    pub beyond_fp16_pct: f64,
}

/// One intermediate tensor of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorDivergence {
    /// The tensor's name in the reference.
    pub name: String,
    /// The tensor of A it was matched with (the same name, or the value a rewrite put in its
    /// place).
    pub matched: String,
    /// The reference node that makes it.
    pub node: String,
    /// That node's op type.
    pub op: String,
    /// Its place in the reference's node order.
    pub order: usize,
    /// Nodes on the longest path from the inputs to it.
    pub depth: usize,
    /// Its shape in the reference's first batch.
    pub shape: Vec<usize>,
    /// How close A's values are.
    #[serde(flatten)]
    pub figures: Figures,
}

impl TensorDivergence {
    /// Whether this tensor's cosine is below `threshold` (a NaN cosine is below any).
    pub(crate) fn diverges(&self, threshold: f64) -> bool {
        self.figures.cosine.is_nan() || self.figures.cosine < threshold
    }

    /// `1 − cosine`, the error plotted against depth (1 where the cosine is NaN).
    pub(crate) fn cosine_error(&self) -> f64 {
        let c = self.figures.cosine;
        if c.is_nan() {
            1.0
        } else {
            (1.0 - c).max(0.0)
        }
    }
}

/// The first tensor in `tensors` (graph order) whose cosine is below `threshold`.
pub fn first_divergence(tensors: &[TensorDivergence], threshold: f64) -> Option<usize> {
    tensors.iter().position(|t| t.diverges(threshold))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol() -> Tolerance {
        Tolerance::default()
    }

    #[test]
    fn batches_summed_give_the_figures_of_the_whole() {
        let a: Vec<f32> = (0..100).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = a.iter().map(|x| x * 1.01 + 0.001).collect();
        let mut whole = TensorStats::default();
        whole.add(&a, &b, &tol());
        let mut parts = TensorStats::default();
        for (x, y) in a.chunks(7).zip(b.chunks(7)) {
            let mut p = TensorStats::default();
            p.add(x, y, &tol());
            parts.merge(&p);
        }
        let (w, p) = (whole.figures(), parts.figures());
        assert!((w.cosine - p.cosine).abs() < 1e-12);
        assert!(w.cosine < 1.0 && w.cosine > 0.99);
        assert_eq!(w.max_abs_err, p.max_abs_err);
        assert_eq!(w.close_pct, p.close_pct);
        assert_eq!(w.elements, 100);
    }

    #[test]
    fn identical_is_one_and_overflow_is_nan_and_counted() {
        let a = [1.0f32, -2.0, 3.0];
        let mut s = TensorStats::default();
        s.add(&a, &a, &tol());
        let f = s.figures();
        assert_eq!((f.cosine, f.max_abs_err, f.close_pct), (1.0, 0.0, 100.0));
        let mut s = TensorStats::default();
        s.add(&[f32::INFINITY, 1.0], &[70000.0, 1.0], &tol());
        let f = s.figures();
        assert!(f.cosine.is_nan());
        assert_eq!((f.inf_a, f.inf_b), (1, 0));
        assert_eq!(f.beyond_fp16_pct, 50.0);
    }

    #[test]
    fn first_divergence_takes_nan_as_below() {
        let row = |name: &str, cosine: f64| TensorDivergence {
            name: name.into(),
            matched: name.into(),
            node: name.into(),
            op: "Relu".into(),
            order: 0,
            depth: 1,
            shape: vec![1],
            figures: Figures {
                elements: 1,
                cosine,
                max_abs_err: 0.0,
                max_rel_err: 0.0,
                close_pct: 100.0,
                nan_a: 0,
                nan_b: 0,
                inf_a: 0,
                inf_b: 0,
                beyond_fp16_pct: 0.0,
            },
        };
        let rows = [row("a", 1.0), row("b", f64::NAN), row("c", 0.5)];
        assert_eq!(first_divergence(&rows, 0.999), Some(1));
        assert_eq!(first_divergence(&rows[..1], 0.999), None);
        assert_eq!(rows[1].cosine_error(), 1.0);
        let text = serde_json::to_string(&rows[1]).unwrap();
        let back: TensorDivergence = serde_json::from_str(&text).unwrap();
        assert!(back.figures.cosine.is_nan());
        assert_eq!(back.name, "b");
    }
}
