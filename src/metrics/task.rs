//! Which task a model's outputs serve (classification, detection, segmentation, sequences of
//! class scores), given or guessed from their shapes, and the task-aware comparison of two runs:
//! matched boxes for a detector, pixel agreement and IoU for a segmenter, step and CTC-reading
//! agreement for a sequence.

use super::detection::matching::DetectionAgreement;
use super::detection::outputs::{find_head, DetectOptions, NmsOutputs};
use super::segmentation::{argmax_labels, SegmentAgreement};
use super::sequence::DEFAULT_BLANK;
use super::sequence::{is_distribution_per_step, SequenceComparison};
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a model's outputs are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// `[N, classes]` scores.
    Classify,
    /// Boxes: a raw YOLO head or a model's own NMS outputs.
    Detect,
    /// Per-pixel (or per-voxel) classes: `[N, C, H, W]`, `[N, C, D, H, W]` logits or masks.
    Segment,
    /// Class scores per step, `[N, T, C]` (a text recogniser read with CTC).
    Sequence,
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Task::Classify => "classify",
            Task::Detect => "detect",
            Task::Segment => "segment",
            Task::Sequence => "sequence",
        })
    }
}

impl FromStr for Task {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "classify" => Ok(Task::Classify),
            "detect" => Ok(Task::Detect),
            "segment" => Ok(Task::Segment),
            "sequence" => Ok(Task::Sequence),
            other => Err(format!(
                "unknown task '{other}': expected classify, detect, segment or sequence"
            )),
        }
    }
}

/// The task asked for (`None`: guess it) and how detections are decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskRequest {
    /// The task; `None` guesses from the reference's output shapes.
    pub task: Option<Task>,
    /// Decoding and filtering of detections.
    pub detect: DetectOptions,
    /// The class a sequence's CTC reading drops.
    pub blank: usize,
}

impl Default for TaskRequest {
    fn default() -> Self {
        TaskRequest {
            task: None,
            detect: DetectOptions::agreement(),
            blank: DEFAULT_BLANK,
        }
    }
}

/// The task used and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskChoice {
    /// The task, `None` when nothing could be guessed.
    pub task: Option<Task>,
    /// Whether it was guessed (not given).
    pub guessed: bool,
    /// In words: which output and shape decided it.
    pub reason: String,
}

/// Whether a float output is per-pixel class scores: `[N, C, spatial…]` with at least two
/// spatial axes of 2 or more; C = 1 is a foreground probability (a text or object map).
fn is_logit_map(t: &HostTensor) -> bool {
    t.elem_type().is_float() && t.shape.len() >= 4 && t.shape[2..].iter().all(|&d| d >= 2)
}

/// A one-channel map's pixels are foreground (class 1) above this probability.
pub(crate) const FOREGROUND_PROBABILITY: f32 = 0.5;

/// Whether an integer output is a mask of classes: `[N, H, W]`, `[N, 1, H, W]` or a volume.
fn is_label_map(t: &HostTensor) -> bool {
    !t.elem_type().is_float()
        && t.shape.len() >= 3
        && t.shape[t.shape.len() - 2..].iter().all(|&d| d >= 2)
}

/// The task the outputs look like, in order: NMS outputs (detect), a float `[N, T, C]` whose
/// every step is a distribution over the classes (sequence: a softmax or log-softmax over the
/// last axis, which a detector's box coordinates never are), a raw YOLO head (detect), logits
/// or integer masks per pixel (segment), `[N, classes]` scores (classify).
pub(crate) fn guess(outputs: &[HostTensor]) -> TaskChoice {
    let choice = |task, reason: String| TaskChoice {
        task: Some(task),
        guessed: true,
        reason,
    };
    if NmsOutputs::find(outputs).is_some() {
        return choice(Task::Detect, "boxes, scores and labels outputs".into());
    }
    if let Some(t) = outputs.iter().find(|t| is_distribution_per_step(t)) {
        return choice(
            Task::Sequence,
            format!(
                "output '{}' {:?} is a distribution over {} classes at each of {} steps",
                t.name, t.shape, t.shape[2], t.shape[1]
            ),
        );
    }
    if let Some((head, _)) = find_head(outputs) {
        return choice(
            Task::Detect,
            format!(
                "output '{}' {:?} reads as a YOLO head",
                head.name, head.shape
            ),
        );
    }
    if let Some(t) = outputs.iter().find(|t| is_logit_map(t) || is_label_map(t)) {
        return choice(
            Task::Segment,
            format!("output '{}' {:?} is a class per pixel", t.name, t.shape),
        );
    }
    if let Some(t) = outputs
        .iter()
        .find(|t| t.elem_type().is_float() && t.shape.len() == 2 && t.shape[1] > 1)
    {
        return choice(
            Task::Classify,
            format!("output '{}' {:?} is class scores", t.name, t.shape),
        );
    }
    TaskChoice {
        task: None,
        guessed: true,
        reason: "no output reads as class scores, boxes or a class per pixel".into(),
    }
}

/// The task asked for, or the one B's (the reference's) outputs look like.
pub fn choose(request: Option<Task>, reference: &[HostTensor]) -> TaskChoice {
    match request {
        Some(task) => TaskChoice {
            task: Some(task),
            guessed: false,
            reason: "given with --task".into(),
        },
        None => guess(reference),
    }
}

/// How the two sides' detections agree, and how they were read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectComparison {
    /// Where A's boxes came from.
    pub source_a: String,
    /// Where B's boxes came from.
    pub source_b: String,
    /// Boxes are counted from this score up.
    pub conf: f32,
    /// A box scoring this much below `conf` still pairs with the other side's.
    pub(crate) score_tolerance: f32,
    /// The agreement, B's boxes taken as ground truth.
    #[serde(flatten)]
    pub agreement: DetectionAgreement,
}

/// How the two sides' per-pixel classes agree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentComparison {
    /// The output compared.
    pub output: String,
    /// The agreement, B's classes taken as the reference.
    #[serde(flatten)]
    pub agreement: SegmentAgreement,
}

/// The task-aware part of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskComparison {
    /// The task and why.
    #[serde(flatten)]
    pub(crate) choice: TaskChoice,
    /// Detection agreement (task `detect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect: Option<DetectComparison>,
    /// Segmentation agreement (task `segment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentComparison>,
    /// Sequence agreement (task `sequence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<SequenceComparison>,
    /// Seconds spent decoding, suppressing and matching (not running the models).
    pub seconds: f64,
}

impl TaskComparison {
    /// Whether it holds boxes or pixels compared (classification adds nothing to closeness).
    pub(crate) fn compared_something(&self) -> bool {
        self.detect.is_some() || self.segment.is_some() || self.sequence.is_some()
    }
}

/// Per-pixel classes of one side's segmentation output: argmax of logits, or the mask itself.
pub(crate) fn pixel_classes(
    outputs: &[HostTensor],
    side: &str,
) -> Result<(String, Vec<u32>, usize, usize)> {
    let t = outputs
        .iter()
        .find(|t| is_logit_map(t) || is_label_map(t))
        .with_context(|| {
            format!(
                "{side}: no output is a class per pixel ([N, C, H, W] or [N, C, D, H, W] logits, or an integer mask)"
            )
        })?;
    let samples = t.shape[0];
    if t.elem_type().is_float() && t.shape[1] == 1 {
        let labels = t
            .data
            .as_f32()
            .iter()
            .map(|&p| u32::from(p > FOREGROUND_PROBABILITY))
            .collect();
        return Ok((t.name.clone(), labels, samples, 2));
    }
    if t.elem_type().is_float() {
        let labels = argmax_labels(&t.data.as_f32(), &t.shape)?;
        return Ok((t.name.clone(), labels, samples, t.shape[1]));
    }
    let values = t.data.to_f64();
    if let Some(v) = values.iter().find(|v| **v < 0.0 || **v > u32::MAX as f64) {
        bail!("{side}: mask '{}' holds {v}, not a class index", t.name);
    }
    let classes = values.iter().fold(0.0f64, |m, &v| m.max(v)) as usize + 1;
    Ok((
        t.name.clone(),
        values.into_iter().map(|v| v as u32).collect(),
        samples,
        classes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    fn t(name: &str, shape: Vec<usize>, data: TensorData) -> HostTensor {
        HostTensor::new(name, shape, data).unwrap()
    }

    fn zeros(name: &str, shape: Vec<usize>) -> HostTensor {
        let n = shape.iter().product();
        t(name, shape, TensorData::F32(vec![0.0; n]))
    }

    #[test]
    fn the_guess_reads_heads_maps_masks_and_scores_in_that_order() {
        let task = |outputs: &[HostTensor]| guess(outputs).task;
        assert_eq!(
            task(&[zeros("output0", vec![2, 6300, 85])]),
            Some(Task::Detect)
        );
        assert_eq!(
            task(&[zeros("output0", vec![2, 84, 8400])]),
            Some(Task::Detect)
        );
        assert_eq!(
            task(&[zeros("out", vec![2, 21, 8, 8])]),
            Some(Task::Segment)
        );
        assert_eq!(
            task(&[zeros("out", vec![2, 3, 4, 4, 4])]),
            Some(Task::Segment)
        );
        let mask = t("mask", vec![2, 4, 4], TensorData::I64(vec![0; 32]));
        assert_eq!(task(&[mask]), Some(Task::Segment));
        assert_eq!(
            task(&[zeros("logits", vec![2, 1000])]),
            Some(Task::Classify)
        );
        // A classifier's [N, 1000, 1, 1] is no map; a lone [N, 4] vector is nothing known.
        assert_eq!(task(&[zeros("prob", vec![2, 1000, 1, 1])]), None);
        assert_eq!(task(&[zeros("v", vec![2, 1])]), None);
        let given = choose(Some(Task::Segment), &[zeros("logits", vec![2, 10])]);
        assert_eq!((given.task, given.guessed), (Some(Task::Segment), false));
    }
}
