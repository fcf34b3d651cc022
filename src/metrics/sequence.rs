//! Sequence agreement: two runs' `[N, T, C]` class scores per step (a text recogniser's output,
//! read with CTC) compared step by step (does the best class agree) and sequence by sequence
//! (after the CTC reading: best class per step, repeats collapsed, the blank class dropped).
//! Fed batch by batch; nothing but counts is kept.

use crate::tensor::HostTensor;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// The class CTC reserves for "no symbol" unless told otherwise.
pub(crate) const DEFAULT_BLANK: usize = 0;

/// How two runs' sequences agree, B's taken as the reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SequenceComparison {
    /// The output compared (B's name).
    pub output: String,
    /// Sequences compared.
    pub samples: usize,
    /// Steps per sequence (T).
    pub steps: usize,
    /// Classes per step (C).
    pub classes: usize,
    /// The class dropped by the CTC reading.
    pub blank: usize,
    /// Steps whose best class is the same on both sides, percent of every step.
    pub step_agreement_pct: f64,
    /// Sequences whose CTC reading is the same on both sides, percent.
    pub exact_match_pct: f64,
    /// Mean edit distance (insertions, deletions, substitutions) between the two readings.
    pub mean_edit_distance: f64,
    /// Mean length of B's reading, in symbols.
    pub mean_length_b: f64,
}

/// Whether `t` is class scores per step: a float `[N, T, C]` with at least two classes.
pub(crate) fn is_step_scores(t: &HostTensor) -> bool {
    t.elem_type().is_float() && matches!(t.shape.as_slice(), [_, _, c] if *c >= 2)
}

/// Whether every step of `t` (`[N, T, C]`) is a probability distribution over its classes:
/// probabilities in [0, 1] summing to 1, or log-probabilities (at most 0) whose exponentials
/// sum to 1 — a softmax or log-softmax over the last axis. A detector's head never is: its
/// box coordinates are not a distribution.
pub(crate) fn is_distribution_per_step(t: &HostTensor) -> bool {
    if !is_step_scores(t) || t.shape[1] < 2 || t.data.is_empty() {
        return false;
    }
    let classes = t.shape[2];
    let values = t.data.as_f32();
    let close = |s: f64| (s - 1.0).abs() <= 1e-3;
    let probabilities = values.chunks_exact(classes).all(|row| {
        row.iter().all(|v| (0.0..=1.0).contains(v))
            && close(row.iter().map(|&v| f64::from(v)).sum())
    });
    probabilities
        || values.chunks_exact(classes).all(|row| {
            row.iter().all(|&v| v <= 0.0) && close(row.iter().map(|&v| f64::from(v).exp()).sum())
        })
}

/// The best class of one step: the highest score, the lowest index on a tie, NaN lowest.
fn best(row: &[f32]) -> usize {
    let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let mut at = 0;
    for (i, &v) in row.iter().enumerate() {
        if key(v) > key(row[at]) {
            at = i;
        }
    }
    at
}

/// The CTC reading of one sequence's best classes: repeats collapsed, `blank` dropped.
pub(crate) fn ctc_reading(classes: &[usize], blank: usize) -> Vec<usize> {
    let mut out = vec![];
    let mut prev = None;
    for &c in classes {
        if Some(c) != prev && c != blank {
            out.push(c);
        }
        prev = Some(c);
    }
    out
}

/// The edit (Levenshtein) distance between two readings.
pub(crate) fn edit_distance(a: &[usize], b: &[usize]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(x != y));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Sequence agreement counted batch by batch.
#[derive(Clone, Debug)]
pub(crate) struct SequenceAccumulator {
    output: Option<String>,
    blank: usize,
    samples: usize,
    steps: usize,
    classes: usize,
    agreeing_steps: usize,
    exact: usize,
    edits: usize,
    length_b: usize,
}

impl SequenceAccumulator {
    /// An empty count; `blank` is the class the CTC reading drops.
    pub fn new(blank: usize) -> Self {
        SequenceAccumulator {
            output: None,
            blank,
            samples: 0,
            steps: 0,
            classes: 0,
            agreeing_steps: 0,
            exact: 0,
            edits: 0,
            length_b: 0,
        }
    }

    /// Adds one batch: A's and B's outputs for the same samples.
    pub fn add(&mut self, a: &[HostTensor], b: &[HostTensor]) -> Result<()> {
        let (ta, tb) = (step_scores(a, "A")?, step_scores(b, "B")?);
        if ta.shape != tb.shape {
            bail!(
                "A's '{}' has shape {:?}, B's '{}' {:?}: the sequences cannot be compared",
                ta.name,
                ta.shape,
                tb.name,
                tb.shape
            );
        }
        let (steps, classes) = (tb.shape[1], tb.shape[2]);
        if self.blank >= classes {
            bail!(
                "the blank class {} is not one of the {classes} classes of '{}' (give it with --blank)",
                self.blank,
                tb.name
            );
        }
        if self.output.is_some() && (steps, classes) != (self.steps, self.classes) {
            bail!(
                "'{}' has {steps} steps of {classes} classes in one batch and {} of {} in another",
                tb.name,
                self.steps,
                self.classes
            );
        }
        if self.output.is_none() {
            self.output = Some(tb.name.clone());
        }
        (self.steps, self.classes) = (steps, classes);
        let (va, vb) = (ta.data.as_f32(), tb.data.as_f32());
        let per_sample = steps * classes;
        for (sa, sb) in va.chunks_exact(per_sample).zip(vb.chunks_exact(per_sample)) {
            let best_a: Vec<usize> = sa.chunks_exact(classes).map(best).collect();
            let best_b: Vec<usize> = sb.chunks_exact(classes).map(best).collect();
            self.agreeing_steps += best_a.iter().zip(&best_b).filter(|(x, y)| x == y).count();
            let (ra, rb) = (
                ctc_reading(&best_a, self.blank),
                ctc_reading(&best_b, self.blank),
            );
            self.exact += usize::from(ra == rb);
            self.edits += edit_distance(&ra, &rb);
            self.length_b += rb.len();
            self.samples += 1;
        }
        Ok(())
    }

    /// The agreement over every batch added; `None` when none was.
    pub fn finish(self) -> Option<SequenceComparison> {
        let output = self.output?;
        let per = |v: usize, n: usize| {
            if n == 0 {
                0.0
            } else {
                v as f64 / n as f64
            }
        };
        Some(SequenceComparison {
            output,
            samples: self.samples,
            steps: self.steps,
            classes: self.classes,
            blank: self.blank,
            step_agreement_pct: 100.0 * per(self.agreeing_steps, self.samples * self.steps),
            exact_match_pct: 100.0 * per(self.exact, self.samples),
            mean_edit_distance: per(self.edits, self.samples),
            mean_length_b: per(self.length_b, self.samples),
        })
    }
}

/// The class scores per step among one side's outputs: the first that is a distribution per
/// step, else the first float `[N, T, C]`.
fn step_scores<'a>(outputs: &'a [HostTensor], side: &str) -> Result<&'a HostTensor> {
    outputs
        .iter()
        .find(|t| is_distribution_per_step(t))
        .or_else(|| outputs.iter().find(|t| is_step_scores(t)))
        .ok_or_else(|| {
            let shapes: Vec<String> = outputs
                .iter()
                .map(|t| format!("'{}' {:?}", t.name, t.shape))
                .collect();
            anyhow::anyhow!(
                "{side}: no output is class scores per step (a float [N, steps, classes]); outputs: {}",
                shapes.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    /// One-hot scores `[N, T, C]` of the given best classes.
    fn one_hot(best: &[Vec<usize>], classes: usize) -> HostTensor {
        let steps = best[0].len();
        let mut data = vec![0f32; best.len() * steps * classes];
        for (i, seq) in best.iter().enumerate() {
            for (t, &c) in seq.iter().enumerate() {
                data[(i * steps + t) * classes + c] = 1.0;
            }
        }
        HostTensor::new(
            "probs",
            vec![best.len(), steps, classes],
            TensorData::F32(data),
        )
        .unwrap()
    }

    #[test]
    fn the_ctc_reading_collapses_repeats_and_drops_the_blank() {
        assert_eq!(ctc_reading(&[0, 3, 3, 0, 3, 1, 1, 0], 0), [3, 3, 1]);
        assert_eq!(ctc_reading(&[2, 2, 2], 2), Vec::<usize>::new());
        assert_eq!(edit_distance(&[1, 2, 3], &[1, 3]), 1);
        assert_eq!(edit_distance(&[1, 2, 3], &[3, 2, 1]), 2);
        assert_eq!(edit_distance(&[], &[4, 4]), 2);
    }

    #[test]
    fn steps_and_readings_are_counted_over_batches() {
        // Sample 0: same reading although step 1 moved from a repeat to the blank.
        // Sample 1: one symbol substituted. Sample 2 (second batch): identical.
        let b1 = one_hot(&[vec![1, 1, 0, 2], vec![3, 0, 3, 3]], 4);
        let a1 = one_hot(&[vec![1, 0, 0, 2], vec![3, 0, 2, 2]], 4);
        let b2 = one_hot(&[vec![0, 2, 2, 1]], 4);
        let mut acc = SequenceAccumulator::new(0);
        acc.add(&[a1], &[b1]).unwrap();
        let same = [b2];
        acc.add(&same, &same).unwrap();
        let r = acc.finish().unwrap();
        assert_eq!((r.samples, r.steps, r.classes), (3, 4, 4));
        // 12 steps, 3 differ.
        assert_eq!(r.step_agreement_pct, 75.0);
        assert!((r.exact_match_pct - 200.0 / 3.0).abs() < 1e-9);
        assert!((r.mean_edit_distance - 1.0 / 3.0).abs() < 1e-9);
        // B reads [1, 2], [3, 3], [2, 1].
        assert_eq!(r.mean_length_b, 2.0);
    }

    #[test]
    fn a_blank_beyond_the_classes_is_refused_with_the_flag() {
        let same = [one_hot(&[vec![1, 0]], 3)];
        let err = SequenceAccumulator::new(5).add(&same, &same).unwrap_err();
        assert!(err.to_string().contains("--blank"), "{err}");
    }

    #[test]
    fn softmax_and_log_softmax_steps_read_as_distributions_a_head_does_not() {
        let probs = one_hot(&[vec![1, 0, 2]], 3);
        assert!(is_distribution_per_step(&probs));
        let logs = HostTensor::new(
            "logp",
            vec![1, 2, 2],
            TensorData::F32(vec![0.5f32.ln(), 0.5f32.ln(), 0.0, f32::NEG_INFINITY]),
        )
        .unwrap();
        assert!(is_distribution_per_step(&logs));
        let head = HostTensor::new(
            "output0",
            vec![1, 6, 8],
            TensorData::F32((0..48).map(|i| i as f32).collect()),
        )
        .unwrap();
        assert!(!is_distribution_per_step(&head));
    }
}
