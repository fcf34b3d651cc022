//! Segmentation metrics on label maps: per-pixel argmax of class logits,
//! confusion matrices, pixel agreement, and per-class and mean IoU.

use anyhow::{bail, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Pixels handled by one task in the parallel loops.
const BLOCK: usize = 1 << 14;

/// Per-pixel class labels of `[N, C, spatial...]` logits: argmax over axis 1 (ties to the lower class, NaN loses).
///
/// Returns `N × spatial` labels, sample-major. Errors when the rank is below 3,
/// there are no classes, or `logits` does not hold exactly the shape's element count.
pub(crate) fn argmax_labels(logits: &[f32], shape: &[usize]) -> Result<Vec<u32>> {
    if shape.len() < 3 {
        bail!(
            "segmentation logits need shape [N, C, spatial...], got {shape:?} of rank {}",
            shape.len()
        );
    }
    let classes = shape[1];
    if classes == 0 {
        bail!("segmentation logits of shape {shape:?} have no classes on axis 1");
    }
    if u32::try_from(classes).is_err() {
        bail!("segmentation logits of shape {shape:?} have too many classes for u32 labels");
    }
    let Some(total) = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) else {
        bail!("segmentation logits shape {shape:?} has an element count that overflows");
    };
    if total != logits.len() {
        bail!(
            "segmentation logits of shape {shape:?} need {total} values, got {}",
            logits.len()
        );
    }
    let spatial: usize = shape[2..].iter().product();
    let samples = shape[0];
    let mut labels = vec![0u32; samples * spatial];
    if spatial == 0 {
        return Ok(labels);
    }
    labels
        .par_chunks_mut(spatial)
        .zip(logits.par_chunks(classes * spatial))
        .for_each(|(out, sample)| argmax_sample(sample, classes, spatial, out));
    Ok(labels)
}

/// Argmax over the class planes of one sample, block by block.
fn argmax_sample(sample: &[f32], classes: usize, spatial: usize, out: &mut [u32]) {
    out.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(block, out)| {
            let start = block * BLOCK;
            let end = start + out.len();
            let mut best: Vec<f32> = sample[start..end].to_vec();
            out.fill(0);
            for class in 1..classes {
                let plane = &sample[class * spatial + start..class * spatial + end];
                for ((b, o), &v) in best.iter_mut().zip(out.iter_mut()).zip(plane) {
                    if v > *b || (b.is_nan() && !v.is_nan()) {
                        *b = v;
                        *o = class as u32;
                    }
                }
            }
        });
}

/// A confusion matrix of reference labels (rows) against labels under test (columns), with an optional ignored reference value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Confusion {
    /// Number of classes; labels run from 0 to `classes - 1`.
    pub classes: usize,
    /// `classes × classes` pixel counts, row = reference label, column = label under test.
    pub counts: Vec<u64>,
    /// Reference pixels skipped because they carried the ignore value.
    pub ignored: u64,
}

/// Counts gathered by one parallel task: the matrix, ignored pixels, and whether a label was out of range.
type Partial = (Vec<u64>, u64, bool);

impl Confusion {
    /// An empty matrix for `classes` classes.
    pub fn new(classes: usize) -> Self {
        Confusion {
            classes,
            counts: vec![0; classes * classes],
            ignored: 0,
        }
    }

    /// Adds pixels; labels >= classes in either side are an error naming the label; reference pixels equal to `ignore` are counted in `ignored` and skipped.
    ///
    /// Skipped pixels are not checked on the side under test. On error nothing is added.
    pub fn add(
        &mut self,
        reference: &[u32],
        under_test: &[u32],
        ignore: Option<u32>,
    ) -> Result<()> {
        if reference.len() != under_test.len() {
            bail!(
                "label maps differ in size: {} reference pixels against {} under test",
                reference.len(),
                under_test.len()
            );
        }
        let classes = self.classes;
        let cells = classes * classes;
        let (counts, ignored, bad) = reference
            .par_chunks(BLOCK)
            .zip(under_test.par_chunks(BLOCK))
            .fold(
                || (vec![0u64; cells], 0u64, false),
                |acc, (r, u)| count_block(acc, r, u, classes, ignore),
            )
            .reduce(|| (vec![0u64; cells], 0u64, false), merge_partials);
        if bad {
            return Err(first_out_of_range(reference, under_test, classes, ignore));
        }
        for (total, add) in self.counts.iter_mut().zip(counts) {
            *total += add;
        }
        self.ignored += ignored;
        Ok(())
    }

    /// Adds another matrix's counts; a matrix with more classes widens this one.
    pub(crate) fn merge(&mut self, other: &Confusion) {
        if other.classes > self.classes {
            let mut wider = Confusion::new(other.classes);
            for row in 0..self.classes {
                for col in 0..self.classes {
                    wider.counts[row * other.classes + col] = self.counts[row * self.classes + col];
                }
            }
            wider.ignored = self.ignored;
            *self = wider;
        }
        for row in 0..other.classes {
            for col in 0..other.classes {
                let add = other
                    .counts
                    .get(row * other.classes + col)
                    .copied()
                    .unwrap_or(0);
                self.counts[row * self.classes + col] += add;
            }
        }
        self.ignored += other.ignored;
    }

    /// Pixels counted in the matrix (ignored pixels excluded).
    pub fn pixels(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Share of counted pixels whose labels agree (the diagonal), in [0, 1]; 0 when no pixels.
    pub fn agreement(&self) -> f64 {
        let pixels = self.pixels();
        if pixels == 0 {
            return 0.0;
        }
        let diagonal: u64 = (0..self.classes).map(|k| self.cell(k, k)).sum();
        diagonal as f64 / pixels as f64
    }

    /// IoU per class: TP / (TP + FP + FN); None for a class absent from both sides.
    pub fn class_iou(&self) -> Vec<Option<f64>> {
        self.class_changes().into_iter().map(|c| c.iou).collect()
    }

    /// Mean of the present classes' IoU (None when no class is present).
    pub(crate) fn mean_iou(&self) -> Option<f64> {
        let present: Vec<f64> = self.class_iou().into_iter().flatten().collect();
        if present.is_empty() {
            None
        } else {
            Some(present.iter().sum::<f64>() / present.len() as f64)
        }
    }

    /// Per-class pixel totals, changed pixels and IoU, one entry per class in class order.
    pub(crate) fn class_changes(&self) -> Vec<ClassChange> {
        let n = self.classes;
        (0..n)
            .map(|k| {
                let tp = self.cell(k, k);
                let reference: u64 = (0..n).map(|c| self.cell(k, c)).sum();
                let under_test: u64 = (0..n).map(|r| self.cell(r, k)).sum();
                let union = reference + under_test - tp;
                ClassChange {
                    class: k,
                    pixels_reference: reference,
                    pixels_under_test: under_test,
                    changed: union - tp,
                    iou: (union > 0).then(|| tp as f64 / union as f64),
                }
            })
            .collect()
    }

    /// The count at (reference `row`, under-test `col`); 0 outside a short `counts`.
    fn cell(&self, row: usize, col: usize) -> u64 {
        self.counts
            .get(row * self.classes + col)
            .copied()
            .unwrap_or(0)
    }
}

/// Counts one block of pixels into a task's partial result.
fn count_block(
    acc: Partial,
    reference: &[u32],
    under_test: &[u32],
    classes: usize,
    ignore: Option<u32>,
) -> Partial {
    let (mut counts, mut ignored, mut bad) = acc;
    if bad {
        return (counts, ignored, bad);
    }
    for (&r, &u) in reference.iter().zip(under_test) {
        if Some(r) == ignore {
            ignored += 1;
            continue;
        }
        let (r, u) = (r as usize, u as usize);
        if r >= classes || u >= classes {
            bad = true;
            break;
        }
        counts[r * classes + u] += 1;
    }
    (counts, ignored, bad)
}

/// Sums two partial results.
fn merge_partials(a: Partial, b: Partial) -> Partial {
    let (mut counts, ignored, bad) = a;
    for (total, add) in counts.iter_mut().zip(&b.0) {
        *total += add;
    }
    (counts, ignored + b.1, bad || b.2)
}

/// The error for the first out-of-range label, scanning in pixel order.
fn first_out_of_range(
    reference: &[u32],
    under_test: &[u32],
    classes: usize,
    ignore: Option<u32>,
) -> anyhow::Error {
    for (pixel, (&r, &u)) in reference.iter().zip(under_test).enumerate() {
        if Some(r) == ignore {
            continue;
        }
        for (side, label) in [("reference", r), ("under test", u)] {
            if label as usize >= classes {
                return anyhow::anyhow!(
                    "label {label} at pixel {pixel} ({side}) is out of range for {classes} classes"
                );
            }
        }
    }
    anyhow::anyhow!("a label is out of range for {classes} classes")
}

/// How one class's pixels moved between the reference and the labels under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassChange {
    /// The class label.
    pub class: usize,
    /// Pixels of this class in the reference.
    pub(crate) pixels_reference: u64,
    /// Pixels of this class in the labels under test.
    pub(crate) pixels_under_test: u64,
    /// reference pixels of this class given another class, plus pixels given this class where the reference has another
    pub changed: u64,
    /// This class's IoU; None when absent from both sides.
    pub iou: Option<f64>,
}

/// The summary `compare` reports for segmentation outputs: B is the reference, A is under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentAgreement {
    /// Samples (images) compared.
    pub samples: usize,
    /// Number of classes.
    pub classes: usize,
    /// Pixels compared.
    pub pixels: u64,
    /// Percentage of pixels with the same label on both sides.
    pub pixel_agreement_pct: f64,
    /// Mean IoU over the classes present on either side.
    pub miou: Option<f64>,
    /// IoU per class; None for a class absent from both sides.
    pub class_iou: Vec<Option<f64>>,
    /// at most 5, most changed first, only classes with changed > 0
    pub most_changed: Vec<ClassChange>,
}

/// Compares labels under test `a` against reference labels `b` (same length, `samples` equal-sized label maps).
#[cfg(test)]
pub(crate) fn segment_agreement(
    a: &[u32],
    b: &[u32],
    samples: usize,
    classes: usize,
) -> Result<SegmentAgreement> {
    if a.len() != b.len() {
        bail!(
            "segmentation outputs differ in size: {} labels under test against {} in the reference",
            a.len(),
            b.len()
        );
    }
    // `is_multiple_of(0)` holds only for 0, so zero samples need zero labels.
    if !a.len().is_multiple_of(samples) {
        bail!(
            "{} labels do not split into {samples} equal samples",
            a.len()
        );
    }
    let mut confusion = Confusion::new(classes);
    confusion.add(b, a, None)?;
    Ok(agreement_of(&confusion, samples))
}

/// The agreement a confusion matrix of `samples` samples (rows: the reference) holds.
pub(crate) fn agreement_of(confusion: &Confusion, samples: usize) -> SegmentAgreement {
    let mut most_changed: Vec<ClassChange> = confusion
        .class_changes()
        .into_iter()
        .filter(|c| c.changed > 0)
        .collect();
    most_changed.sort_by(|x, y| y.changed.cmp(&x.changed).then(x.class.cmp(&y.class)));
    most_changed.truncate(5);
    SegmentAgreement {
        samples,
        classes: confusion.classes,
        pixels: confusion.pixels(),
        pixel_agreement_pct: confusion.agreement() * 100.0,
        miou: confusion.mean_iou(),
        class_iou: confusion.class_iou(),
        most_changed,
    }
}

/// Accuracy against ground-truth masks: mIoU and pixel accuracy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentAccuracy {
    /// Images evaluated.
    pub images: usize,
    /// Pixels counted (ignored pixels excluded).
    pub pixels: u64,
    /// Ground-truth pixels skipped for carrying the ignore value.
    pub ignored: u64,
    /// Share of counted pixels labelled correctly, in [0, 1].
    pub pixel_accuracy: f64,
    /// Mean IoU over the classes present in the ground truth or the predictions.
    pub miou: Option<f64>,
    /// IoU per class; None for a class absent from both sides.
    pub class_iou: Vec<Option<f64>>,
}

impl SegmentAccuracy {
    /// The accuracy summary of a confusion matrix whose rows are the ground truth.
    pub(crate) fn from_confusion(c: &Confusion, images: usize) -> Self {
        SegmentAccuracy {
            images,
            pixels: c.pixels(),
            ignored: c.ignored,
            pixel_accuracy: c.agreement(),
            miou: c.mean_iou(),
            class_iou: c.class_iou(),
        }
    }
}

#[cfg(test)]
mod tests;
