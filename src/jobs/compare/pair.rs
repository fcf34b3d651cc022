//! Comparing two run results: closeness per output, the top-k rank table and the task-aware
//! agreement (matched boxes, pixel agreement) of the result under test against the reference.
//! Pure arithmetic over tensors: no backend runs here.

use super::run::{RunResult, SideReport};
use crate::metrics::closeness::Tolerance;
use crate::metrics::compare::{OutputComparison, OutputsAccumulator};
use crate::metrics::task::{Task, TaskComparison, TaskRequest};
use crate::metrics::task_accumulator::TaskAccumulator;
use crate::tensor::HostTensor;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What a comparison of two results measures.
#[derive(Clone, Debug, Default)]
pub struct Measures {
    /// isclose tolerances.
    pub tolerance: Tolerance,
    /// Ranks in the top-k table of `[batch, classes]` outputs.
    pub topk: usize,
    /// The task (given or guessed) and how detections are decoded.
    pub task: TaskRequest,
}

/// Everything the comparison of one result with the reference found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareReport {
    /// The side under test, then the reference.
    pub sides: Vec<SideReport>,
    /// Where the inputs came from.
    pub inputs: String,
    /// Tolerances used.
    pub tolerance: Tolerance,
    /// One entry per output.
    pub outputs: Vec<OutputComparison>,
    /// The task-aware agreement (matched boxes, pixel agreement), when a task applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskComparison>,
    /// Inputs a side took converted to its model's float type, and what could not be compared
    /// and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The process's peak resident memory over the whole comparison, where the system tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
}

/// Every result under test compared with one reference (`compare A B C`: A and B against C).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareManyReport {
    /// The reference's label.
    pub reference: String,
    /// One two-side report per result under test, in order.
    pub comparisons: Vec<CompareReport>,
}

/// The comparison of a source under test with the reference, counted window by window: the
/// task-aware agreement and every output's closeness and top-k table. No output is kept.
pub(crate) struct PairAccumulator {
    /// "A vs B" by file, for errors.
    pair: String,
    measures: Measures,
    task: TaskAccumulator,
    outputs: OutputsAccumulator,
    /// Why the outputs cannot be compared element by element, once known.
    no_closeness: Option<anyhow::Error>,
}

impl PairAccumulator {
    /// Nothing counted yet of `a` (under test) against the reference `b`.
    pub fn new(a: &Path, b: &Path, measures: &Measures) -> Self {
        PairAccumulator {
            pair: format!("{} vs {}", a.display(), b.display()),
            measures: measures.clone(),
            task: TaskAccumulator::new(measures.task),
            outputs: OutputsAccumulator::new(measures.tolerance, measures.topk),
            no_closeness: None,
        }
    }

    /// Adds one window: A's outputs and the reference B's for the same samples; `axis_of` gives
    /// the batch axis of B's outputs. When the outputs cannot be compared element by element
    /// but a task compares something (two layouts of one detector's head), the closeness is
    /// left out; with no task, that is an error at once.
    pub fn add(
        &mut self,
        a: &[HostTensor],
        b: &[HostTensor],
        axis_of: &dyn Fn(&HostTensor) -> Result<Option<usize>>,
    ) -> Result<()> {
        self.task.add(a, b).with_context(|| self.pair.clone())?;
        if self.no_closeness.is_none() {
            if let Err(e) = self.outputs.add(a, b, axis_of) {
                if !self.task.has_task() {
                    return Err(e.context(self.pair.clone()));
                }
                self.no_closeness = Some(e);
            }
        }
        Ok(())
    }

    /// The report of `a` (under test) against the reference `b` over every window added, with
    /// both runs' notes; `inputs` says where the inputs came from.
    pub fn finish(self, a: &RunResult, b: &RunResult, inputs: &str) -> Result<CompareReport> {
        let pair = self.pair;
        let task = self.task.finish().with_context(|| pair.clone())?;
        let mut notes: Vec<String> = a.notes.iter().chain(&b.notes).cloned().collect();
        let compared = match self.no_closeness {
            None => self.outputs.finish(),
            Some(e)
                if task
                    .as_ref()
                    .is_some_and(TaskComparison::compared_something) =>
            {
                notes.push(format!("no element-wise closeness: {e:#}"));
                vec![]
            }
            Some(e) => return Err(e.context(pair)),
        };
        let measures = &self.measures;
        if let Some(note) = no_topk_note(task.as_ref(), &compared, measures.topk) {
            notes.push(note);
        }
        if let Some(note) = no_boxes_note(task.as_ref(), inputs) {
            notes.push(note);
        }
        Ok(CompareReport {
            sides: vec![a.side(), b.side()],
            inputs: inputs.to_string(),
            tolerance: measures.tolerance,
            outputs: compared,
            task,
            notes,
            peak_rss_bytes: None,
        })
    }
}

/// Compares `a` (under test) with the reference `b`, both whole; `inputs` says where the inputs
/// came from ([`PairAccumulator`] over one window).
pub(crate) fn compare_results(
    a: &RunResult,
    b: &RunResult,
    inputs: &str,
    measures: &Measures,
) -> Result<CompareReport> {
    let mut acc = PairAccumulator::new(&a.source, &b.source, measures);
    acc.add(&a.outputs, &b.outputs, &|_| Ok(Some(0)))?;
    acc.finish(a, b, inputs)
}

/// Why a classification shows no top-k table, when it shows none: top-k reads `[N, classes]`
/// outputs, and a `[N, steps, classes]` one is compared with `--task sequence`.
fn no_topk_note(
    task: Option<&TaskComparison>,
    compared: &[OutputComparison],
    k: usize,
) -> Option<String> {
    let classify = task.is_some_and(|t| t.choice.task == Some(Task::Classify));
    if !classify || compared.is_empty() || compared.iter().any(|o| o.topk.is_some()) {
        return None;
    }
    if k == 0 {
        return Some("no top-k table: --topk is 0".into());
    }
    let shapes: Vec<String> = compared
        .iter()
        .map(|o| format!("'{}' {:?}", o.name, o.shape))
        .collect();
    let steps = compared.iter().any(|o| o.shape.len() == 3);
    Some(format!(
        "no top-k table: top-k reads float [N, classes] outputs, and none is one ({}){}",
        shapes.join(", "),
        if steps {
            "; class scores per step [N, steps, classes] are compared with --task sequence"
        } else {
            ""
        }
    ))
}

/// Why a detector's comparison matched nothing, when neither side has a box: on random inputs
/// (their note is [`describe`](super::inputs::describe)'s) a detector rarely scores a box
/// above the threshold, so images are what it must be compared on.
fn no_boxes_note(task: Option<&TaskComparison>, inputs: &str) -> Option<String> {
    let d = task?.detect.as_ref()?;
    if d.agreement.boxes_a > 0 || d.agreement.boxes_b > 0 {
        return None;
    }
    let why = if inputs.contains(" random samples") {
        "random inputs rarely make detections above the score threshold; compare on images with --dataset DIR (or lower --conf)"
    } else {
        "nothing to match; lower --conf to count weaker boxes"
    };
    Some(format!(
        "no boxes on either side from score {} up over {} images: {why}",
        d.conf, d.agreement.images
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{HostTensor, TensorData};
    use std::path::Path;

    fn result(label: &str, logits: Vec<f32>) -> RunResult {
        let t = HostTensor::new("logits", vec![2, 3], TensorData::F32(logits)).unwrap();
        RunResult {
            label: label.into(),
            source: format!("{label}.onnx").into(),
            backend: "tract-cpu".into(),
            samples: 2,
            batch: 2,
            inference_s: 0.5,
            outputs: vec![t],
            notes: vec![],
        }
    }

    fn measures() -> Measures {
        Measures {
            topk: 2,
            ..Default::default()
        }
    }

    #[test]
    fn a_pair_of_hand_made_results_compares_without_a_backend() {
        let b = result("B", vec![0.1, 0.7, 0.2, 0.9, 0.05, 0.05]);
        // The second sample's top class moves from 0 to 2.
        let a = result("A", vec![0.1, 0.7, 0.2, 0.3, 0.05, 0.65]);
        let r = compare_results(&a, &b, "2 samples", &measures()).unwrap();
        assert_eq!(r.sides[0].label, "A");
        assert_eq!(r.sides[1].samples_per_s, 4.0);
        let o = &r.outputs[0];
        assert!((o.closeness.equal_pct - 400.0 / 6.0).abs() < 1e-9);
        assert_eq!(o.topk.as_ref().unwrap().top1_agreement_pct, 50.0);
        let same = compare_results(&b, &b, "2 samples", &measures()).unwrap();
        assert_eq!(same.outputs[0].closeness.equal_pct, 100.0);
    }

    #[test]
    fn a_saved_result_compares_as_the_live_one() {
        let dir = tempfile::tempdir().unwrap();
        let live = result("A", vec![0.1, 0.7, 0.2, 0.3, 0.05, 0.65]);
        let b = result("B", vec![0.1, 0.7, 0.2, 0.9, 0.05, 0.05]);
        let file = dir.path().join("a.npz");
        live.save(&file).unwrap();
        let loaded = RunResult::load("A", &file).unwrap();
        assert_eq!(loaded.outputs, live.outputs);
        assert_eq!(loaded.backend, "saved outputs");
        let m = measures();
        let from_file = compare_results(&loaded, &b, "x", &m).unwrap();
        let from_memory = compare_results(&live, &b, "x", &m).unwrap();
        assert_eq!(
            serde_json::to_value(&from_file.outputs).unwrap(),
            serde_json::to_value(&from_memory.outputs).unwrap()
        );
        assert!(Path::new(&from_file.sides[0].source).ends_with("a.npz"));
    }

    #[test]
    fn the_many_report_reads_back_from_json() {
        let c = result("C", vec![1.0; 6]);
        let a = result("A", vec![1.5; 6]);
        let r = CompareManyReport {
            reference: "C".into(),
            comparisons: vec![compare_results(&a, &c, "x", &measures()).unwrap()],
        };
        let text = serde_json::to_string(&r).unwrap();
        let back: CompareManyReport = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(back.comparisons[0].sides[1].label, "C");
    }
}
