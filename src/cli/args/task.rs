//! The task flags: `--task` and `--blank` (compare), and how detections are decoded (`--conf`, `--iou`,
//! `--boxes`, `--head`; compare and validate).

use crate::cli::usage;
use crate::metrics::detection::boxes::BoxFormat;
use crate::metrics::detection::decode::HeadLayout;
use crate::metrics::detection::outputs::DetectOptions;
use crate::metrics::task::{Task, TaskRequest};
use crate::number;
use anyhow::Result;
use clap::Args;

/// How detections are decoded: thresholds, box layout, head layout.
#[derive(Clone, Debug, Args)]
pub struct DetectArgs {
    /// Detections scoring below this are dropped (default 0.25 in compare, 0.001 in validate).
    #[arg(long, value_name = "SCORE", value_parser = number::finite_f32)]
    pub conf: Option<f32>,
    /// IoU above which NMS suppresses a same-class box (default 0.45 in compare, 0.6 in validate).
    #[arg(long, value_name = "IOU", value_parser = number::finite_f32)]
    pub iou: Option<f32>,
    /// How box coordinates are laid out (default: cxcywh for raw heads, xyxy for NMS outputs).
    #[arg(long, value_parser = |s: &str| s.parse::<BoxFormat>())]
    pub boxes: Option<BoxFormat>,
    /// The raw head's layout: anchors-first ([N, anchors, 5+classes], with objectness) or
    /// anchors-last ([N, 4+classes, anchors]) (default: guessed, the longer axis being anchors).
    #[arg(long, value_name = "LAYOUT", value_parser = |s: &str| s.parse::<HeadLayout>())]
    pub head: Option<HeadLayout>,
}

impl DetectArgs {
    /// The options these flags give over `defaults` (the command's own thresholds); a
    /// threshold outside [0, 1] is refused.
    pub fn options(&self, defaults: DetectOptions) -> Result<DetectOptions> {
        unit_interval(&[("--conf", self.conf), ("--iou", self.iou)])?;
        Ok(DetectOptions {
            conf: self.conf.unwrap_or(defaults.conf),
            iou: self.iou.unwrap_or(defaults.iou),
            boxes: self.boxes,
            layout: self.head,
            max_detections: defaults.max_detections,
            score_tolerance: defaults.score_tolerance,
        })
    }
}

/// The task flag and how detections are decoded.
#[derive(Clone, Debug, Args)]
pub struct TaskArgs {
    /// What the model does: classify, detect, segment or sequence ([N, steps, classes] scores
    /// read with CTC) (default: guessed from the outputs, and the guess printed).
    #[arg(long, value_parser = |s: &str| s.parse::<Task>())]
    pub task: Option<Task>,
    /// Detection decoding.
    #[command(flatten)]
    pub detect: DetectArgs,
    /// A box scoring down to --conf minus this on one side still pairs with the other side's
    /// box, so a score that only crossed --conf counts as a shift, not a lost box (default
    /// 0.01; 0 counts strictly at --conf).
    #[arg(long, value_name = "SCORE", value_parser = number::finite_f32)]
    pub(crate) score_tolerance: Option<f32>,
    /// The blank class of a sequence's CTC reading (dropped after repeats are collapsed).
    #[arg(long, value_name = "CLASS", default_value_t = 0)]
    pub(crate) blank: usize,
}

impl TaskArgs {
    /// The request these flags make over `defaults` (the command's own thresholds).
    pub fn request(&self, defaults: DetectOptions) -> Result<TaskRequest> {
        unit_interval(&[("--score-tolerance", self.score_tolerance)])?;
        Ok(TaskRequest {
            task: self.task,
            detect: DetectOptions {
                score_tolerance: self.score_tolerance.unwrap_or(defaults.score_tolerance),
                ..self.detect.options(defaults)?
            },
            blank: self.blank,
        })
    }
}

/// Refuses a flag whose value is outside [0, 1].
fn unit_interval(flags: &[(&str, Option<f32>)]) -> Result<()> {
    for (flag, value) in flags {
        if let Some(v) = value {
            if !(0.0..=1.0).contains(v) {
                return Err(usage(format!("{flag} {v}: must be between 0 and 1")));
            }
        }
    }
    Ok(())
}
