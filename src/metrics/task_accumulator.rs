//! The task-aware comparison fed batch by batch: the task is chosen on the reference's first
//! batch, then each batch's boxes (kept: they are small), pixel counts or sequence counts are
//! added, and nothing of the outputs themselves is kept.

use super::detection::boxes::Detection;
use super::detection::matching::agreement_above;
use super::detection::outputs::{detections, DetectOptions};
use super::segmentation::{agreement_of, Confusion};
use super::sequence::SequenceAccumulator;
use super::task::{
    choose, pixel_classes, DetectComparison, SegmentComparison, Task, TaskChoice, TaskComparison,
    TaskRequest,
};
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use std::time::Instant;

/// Boxes of both sides, image by image, and where they came from.
struct Boxes {
    candidates: DetectOptions,
    a: Vec<Vec<Detection>>,
    b: Vec<Vec<Detection>>,
    source_a: String,
    source_b: String,
    first_batch: usize,
}

/// Pixel counts of both sides.
struct Pixels {
    output: String,
    samples: usize,
    confusion: Confusion,
}

/// What is counted for the chosen task.
enum Counts {
    None,
    Detect(Box<Boxes>),
    Segment(Pixels),
    Sequence(SequenceAccumulator),
}

/// The task-aware comparison, batch by batch.
pub(crate) struct TaskAccumulator {
    request: TaskRequest,
    choice: Option<TaskChoice>,
    counts: Counts,
    seconds: f64,
}

impl TaskAccumulator {
    /// Nothing added yet; the task is chosen on the first batch.
    pub fn new(request: TaskRequest) -> Self {
        TaskAccumulator {
            request,
            choice: None,
            counts: Counts::None,
            seconds: 0.0,
        }
    }

    /// Adds one batch: A's and the reference B's outputs for the same samples.
    pub fn add(&mut self, a: &[HostTensor], b: &[HostTensor]) -> Result<()> {
        let start = Instant::now();
        if self.choice.is_none() {
            let choice = choose(self.request.task, b);
            self.counts = match choice.task {
                None | Some(Task::Classify) => Counts::None,
                Some(Task::Detect) => Counts::Detect(Box::new(Boxes {
                    // Candidates down to the tolerance below the threshold; counted from it up.
                    candidates: DetectOptions {
                        conf: (self.request.detect.conf - self.request.detect.score_tolerance)
                            .max(0.0),
                        ..self.request.detect
                    },
                    a: vec![],
                    b: vec![],
                    source_a: String::new(),
                    source_b: String::new(),
                    first_batch: b
                        .first()
                        .and_then(|t| t.shape.first())
                        .copied()
                        .unwrap_or(0),
                })),
                Some(Task::Segment) => Counts::Segment(Pixels {
                    output: String::new(),
                    samples: 0,
                    confusion: Confusion::new(0),
                }),
                Some(Task::Sequence) => {
                    Counts::Sequence(SequenceAccumulator::new(self.request.blank))
                }
            };
            self.choice = Some(choice);
        }
        match &mut self.counts {
            Counts::None => {}
            Counts::Detect(boxes) => {
                let da = detections(a, &boxes.candidates).context("A")?;
                let db = detections(b, &boxes.candidates).context("B")?;
                boxes.a.extend(da.images);
                boxes.b.extend(db.images);
                boxes.source_a = da.source;
                boxes.source_b = db.source;
            }
            Counts::Segment(pixels) => add_pixels(pixels, a, b)?,
            Counts::Sequence(seq) => seq.add(a, b)?,
        }
        self.seconds += start.elapsed().as_secs_f64();
        Ok(())
    }

    /// Whether a task was asked for or guessed from the batches added so far (before the first
    /// batch: whether one was asked for).
    pub(crate) fn has_task(&self) -> bool {
        match &self.choice {
            Some(choice) => choice.task.is_some(),
            None => self.request.task.is_some(),
        }
    }

    /// The comparison over every batch added; `None` when no task was asked for and none could
    /// be guessed, or nothing was added.
    pub fn finish(self) -> Result<Option<TaskComparison>> {
        let Some(choice) = self.choice else {
            return Ok(None);
        };
        if choice.task.is_none() {
            return Ok(None);
        }
        let start = Instant::now();
        let (mut detect, mut segment, mut sequence) = (None, None, None);
        match self.counts {
            Counts::None => {}
            Counts::Detect(boxes) => {
                let total = boxes.b.len();
                // Each batch's source names its own shape: name the whole run's instead.
                let whole = |s: &str| {
                    s.replacen(
                        &format!("[{}, ", boxes.first_batch),
                        &format!("[{total}, "),
                        1,
                    )
                };
                detect = Some(DetectComparison {
                    conf: self.request.detect.conf,
                    score_tolerance: self.request.detect.score_tolerance,
                    agreement: agreement_above(&boxes.a, &boxes.b, self.request.detect.conf)?,
                    source_a: whole(&boxes.source_a),
                    source_b: whole(&boxes.source_b),
                });
            }
            Counts::Segment(pixels) => {
                segment = Some(SegmentComparison {
                    agreement: agreement_of(&pixels.confusion, pixels.samples),
                    output: pixels.output,
                });
            }
            Counts::Sequence(seq) => sequence = seq.finish(),
        }
        Ok(Some(TaskComparison {
            choice,
            detect,
            segment,
            sequence,
            seconds: self.seconds + start.elapsed().as_secs_f64(),
        }))
    }
}

/// Adds one batch's per-pixel classes (B's the reference) to the counts.
fn add_pixels(pixels: &mut Pixels, a: &[HostTensor], b: &[HostTensor]) -> Result<()> {
    let (name, la, na, ca) = pixel_classes(a, "A")?;
    let (name_b, lb, nb, cb) = pixel_classes(b, "B")?;
    if la.len() != lb.len() || na != nb {
        bail!(
            "A's '{name}' has {} pixels over {na} samples, B's '{name_b}' {} over {nb}",
            la.len(),
            lb.len()
        );
    }
    if nb > 0 && !lb.len().is_multiple_of(nb) {
        bail!("{} labels do not split into {nb} equal samples", lb.len());
    }
    let mut batch = Confusion::new(ca.max(cb));
    batch.add(&lb, &la, None)?;
    pixels.confusion.merge(&batch);
    pixels.samples += nb;
    pixels.output = name_b;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    fn t(name: &str, shape: Vec<usize>, data: TensorData) -> HostTensor {
        HostTensor::new(name, shape, data).unwrap()
    }

    #[test]
    fn a_one_channel_map_is_foreground_above_one_half() {
        let b = t(
            "map",
            vec![1, 1, 2, 2],
            TensorData::F32(vec![0.9, 0.6, 0.2, 0.4]),
        );
        let a = t(
            "map",
            vec![1, 1, 2, 2],
            TensorData::F32(vec![0.8, 0.4, 0.1, 0.7]),
        );
        let mut acc = TaskAccumulator::new(TaskRequest::default());
        acc.add(&[a], &[b]).unwrap();
        let r = acc.finish().unwrap().unwrap();
        let s = r.segment.unwrap().agreement;
        // B: foreground at pixels 0, 1; A at 0, 3 → 2 of 4 agree; foreground IoU 1/3.
        assert_eq!((s.classes, s.pixel_agreement_pct), (2, 50.0));
        assert_eq!(s.class_iou[1], Some(1.0 / 3.0));
    }
}
