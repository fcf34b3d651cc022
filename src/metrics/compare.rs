//! Pairs the outputs of two runs (A under test, B the reference) and computes every metric
//! `compare` reports: closeness per tensor, and the top-k rank table for `[batch, classes]`.

use super::closeness::{Closeness, ClosenessAccumulator, Tolerance};
use super::topk::{TopK, TopKAccumulator};
use crate::tensor::HostTensor;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// The comparison of one output tensor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutputComparison {
    /// Output name (B's name when the two differ).
    pub name: String,
    /// Shape (the same on both sides).
    pub shape: Vec<usize>,
    /// A's element type.
    pub dtype_a: String,
    /// B's element type.
    pub dtype_b: String,
    /// Element-wise closeness.
    pub closeness: Closeness,
    /// Rank table, for `[batch, classes]` outputs.
    pub topk: Option<TopK>,
}

impl OutputComparison {
    /// Whether every element of A (`a_side`) or B is NaN, a sign the run is broken.
    pub(crate) fn all_nan(&self, a_side: bool) -> bool {
        let n = if a_side {
            self.closeness.nan_a
        } else {
            self.closeness.nan_b
        };
        self.closeness.elements > 0 && n == self.closeness.elements
    }
}

fn pair<'a>(a: &'a [HostTensor], wanted: &HostTensor, single: bool) -> Result<&'a HostTensor> {
    if let Some(t) = a.iter().find(|t| t.name == wanted.name) {
        return Ok(t);
    }
    if single {
        return Ok(&a[0]);
    }
    let names: Vec<&str> = a.iter().map(|t| t.name.as_str()).collect();
    bail!(
        "output '{}' of B is missing from A (A has: {})",
        wanted.name,
        names.join(", ")
    )
}

/// One output's counts so far.
#[derive(Clone, Debug)]
struct OutputCounts {
    name: String,
    /// The shape of the batches joined so far.
    shape: Vec<usize>,
    /// The batch axis of B's output (`None`: it has none and only the first batch counts).
    axis: Option<usize>,
    dtype_a: String,
    dtype_b: String,
    closeness: ClosenessAccumulator,
    topk: Option<TopKAccumulator>,
}

/// The comparison of every output of A with the reference B's, counted batch by batch: after
/// every batch is added, what [`compare_outputs`] gives over the batches joined. No output is
/// kept.
#[derive(Clone, Debug)]
pub(crate) struct OutputsAccumulator {
    tolerance: Tolerance,
    k: usize,
    outputs: Vec<OutputCounts>,
}

impl OutputsAccumulator {
    /// Nothing counted yet; `k` ranks in the top-k table of `[batch, classes]` outputs.
    pub fn new(tolerance: Tolerance, k: usize) -> Self {
        OutputsAccumulator {
            tolerance,
            k,
            outputs: vec![],
        }
    }

    /// Adds one batch: every output of the reference `b` against the output of `a` of the
    /// same name (or the only output of each, when both have one); shape and kind (float vs
    /// integer) must match. `axis_of` gives the batch axis of B's outputs: one with none counts
    /// in the first batch only.
    pub fn add(
        &mut self,
        a: &[HostTensor],
        b: &[HostTensor],
        axis_of: &dyn Fn(&HostTensor) -> Result<Option<usize>>,
    ) -> Result<()> {
        if a.is_empty() || b.is_empty() {
            bail!(
                "nothing to compare: A has {} outputs, B has {}",
                a.len(),
                b.len()
            );
        }
        let first = self.outputs.is_empty();
        if !first && self.outputs.len() != b.len() {
            bail!(
                "B gave {} outputs in one batch, {} in the first",
                b.len(),
                self.outputs.len()
            );
        }
        let single = a.len() == 1 && b.len() == 1;
        for (i, tb) in b.iter().enumerate() {
            let ta = pair(a, tb, single)?;
            check_pair(ta, tb)?;
            if first {
                self.outputs.push(self.counts_for(ta, tb, axis_of(tb)?));
            }
            let counts = &mut self.outputs[i];
            if counts.name != tb.name {
                bail!(
                    "B gave '{}' where the first batch gave '{}'",
                    tb.name,
                    counts.name
                );
            }
            match counts.axis {
                Some(k) if !first => counts.shape[k] += tb.shape[k],
                None if !first => continue,
                _ => {}
            }
            let (va, vb) = (ta.data.to_f64(), tb.data.to_f64());
            let samples = tb.shape.first().copied().unwrap_or(1);
            counts.closeness.add(&va, &vb, samples);
            if let Some(table) = &mut counts.topk {
                table.add(&va, &vb, samples);
            }
        }
        Ok(())
    }

    fn counts_for(&self, ta: &HostTensor, tb: &HostTensor, axis: Option<usize>) -> OutputCounts {
        let topk = match tb.shape.as_slice() {
            [_, classes] if *classes > 1 && tb.elem_type().is_float() && self.k > 0 => {
                Some(TopKAccumulator::new(*classes, self.k))
            }
            _ => None,
        };
        OutputCounts {
            name: tb.name.clone(),
            shape: tb.shape.clone(),
            axis: axis.filter(|&k| k < tb.shape.len()),
            dtype_a: ta.elem_type().to_string(),
            dtype_b: tb.elem_type().to_string(),
            closeness: ClosenessAccumulator::new(self.tolerance),
            topk,
        }
    }

    /// The comparison of every output over the batches added.
    pub fn finish(&self) -> Vec<OutputComparison> {
        self.outputs
            .iter()
            .map(|o| OutputComparison {
                name: o.name.clone(),
                shape: o.shape.clone(),
                dtype_a: o.dtype_a.clone(),
                dtype_b: o.dtype_b.clone(),
                closeness: o.closeness.finish(),
                topk: o.topk.as_ref().map(TopKAccumulator::finish),
            })
            .collect()
    }
}

/// Refuses to compare `ta` with `tb` when their shapes or kinds (float vs integer) differ.
fn check_pair(ta: &HostTensor, tb: &HostTensor) -> Result<()> {
    if ta.shape != tb.shape {
        bail!(
            "output '{}': A has shape {:?}, B has shape {:?}",
            tb.name,
            ta.shape,
            tb.shape
        );
    }
    if ta.elem_type().is_float() != tb.elem_type().is_float() {
        bail!(
            "output '{}': A is {}, B is {}; they cannot be compared",
            tb.name,
            ta.elem_type(),
            tb.elem_type()
        );
    }
    Ok(())
}

/// Compares every output of the reference `b` with the output of `a` of the same name (or the
/// only output of each, when both have one). Shape and kind (float vs integer) must match.
pub fn compare_outputs(
    a: &[HostTensor],
    b: &[HostTensor],
    tol: &Tolerance,
    k: usize,
) -> Result<Vec<OutputComparison>> {
    let mut acc = OutputsAccumulator::new(*tol, k);
    acc.add(a, b, &|_| Ok(Some(0)))?;
    Ok(acc.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    fn t(name: &str, shape: Vec<usize>, v: Vec<f32>) -> HostTensor {
        HostTensor::new(name, shape, TensorData::F32(v)).unwrap()
    }

    #[test]
    fn pairs_by_name_and_rejects_mismatches() {
        let b = vec![t("logits", vec![2, 3], vec![0.1, 0.5, 0.2, 0.9, 0.0, 0.3])];
        let same = compare_outputs(&b, &b, &Tolerance::default(), 10).unwrap();
        assert_eq!(same[0].closeness.equal_pct, 100.0);
        assert_eq!(same[0].topk.as_ref().unwrap().ranks.len(), 3);
        let renamed = vec![t("out", vec![2, 3], vec![0.1, 0.5, 0.2, 0.9, 0.0, 0.3])];
        assert_eq!(
            compare_outputs(&renamed, &b, &Tolerance::default(), 10).unwrap()[0].name,
            "logits"
        );
        let wrong = vec![t("logits", vec![3, 2], vec![0.0; 6])];
        let e = compare_outputs(&wrong, &b, &Tolerance::default(), 10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'logits'") && e.contains("[3, 2]") && e.contains("[2, 3]"),
            "{e}"
        );
        let ints =
            vec![HostTensor::new("logits", vec![2, 3], TensorData::I64(vec![0; 6])).unwrap()];
        let e = compare_outputs(&ints, &b, &Tolerance::default(), 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("int64") && e.contains("float32"), "{e}");
        let two = vec![b[0].clone(), t("x", vec![1], vec![1.0])];
        let e = compare_outputs(&renamed, &two, &Tolerance::default(), 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing from A"), "{e}");
        let nan = vec![t("logits", vec![2, 3], vec![f32::NAN; 6])];
        let c = compare_outputs(&nan, &b, &Tolerance::default(), 10).unwrap();
        assert!(c[0].all_nan(true) && !c[0].all_nan(false));
    }
}
