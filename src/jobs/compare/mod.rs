//! The comparator behind `compare`: each side (an ONNX model on a reference backend with its
//! graph passes, a TensorRT engine, or an `.npz` of saved outputs) runs on the same inputs,
//! made once, and gives a run result of named tensors; two run results are compared without a
//! backend, and a verdict says whether the run fails. `compare A B` runs both and compares A
//! with the reference B; `compare A B C …` compares each with the last, which runs once.

pub mod inputs;
pub mod pair;
pub mod run;
pub mod sources;
pub mod verdict;

pub use inputs::{make_inputs, InputSource, DEFAULT_BATCH};
pub use pair::{compare_results, compare_with_last, CompareManyReport, CompareReport, Measures};
pub use run::{run_sources, RunConfig, RunResult, Runs, SideReport};
pub use sources::{
    declared_inputs, is_model, NotComparable, SideConfig, SourceConfig, UndeclaredShape,
};
pub use verdict::{verdict, Verdict};

use crate::data::npz;
use crate::metrics::closeness::Tolerance;
use crate::metrics::task::TaskRequest;
use crate::onnx::shape::ShapeRequest;
use crate::progress::Progress;
use crate::tensor::HostTensor;
use anyhow::Result;
use std::num::NonZeroUsize;
use std::path::Path;

/// Everything a comparison needs.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// The side under test.
    pub a: SideConfig,
    /// The reference.
    pub b: SideConfig,
    /// Input shape overrides applied to both models.
    pub input_shapes: ShapeRequest,
    /// Samples per inference; `None`: the model's fixed batch, else up to [`DEFAULT_BATCH`].
    pub batch_size: Option<NonZeroUsize>,
    /// The inputs.
    pub inputs: InputSource,
    /// isclose tolerances.
    pub tolerance: Tolerance,
    /// Ranks in the top-k table of `[batch, classes]` outputs.
    pub topk: usize,
    /// The task (given or guessed) and how detections are decoded.
    pub task: TaskRequest,
}

impl CompareConfig {
    /// What the comparisons measure.
    pub fn measures(&self) -> Measures {
        Measures {
            tolerance: self.tolerance,
            topk: self.topk,
            task: self.task,
        }
    }

    /// The runner's config for `sources` with this comparison's shapes, batch and inputs.
    pub(crate) fn runner(&self, sources: Vec<SourceConfig>) -> RunConfig {
        RunConfig {
            sources,
            input_shapes: self.input_shapes.clone(),
            batch_size: self.batch_size,
            inputs: self.inputs.clone(),
        }
    }
}

/// The tensors a comparison used and produced, for saving beside the report.
#[derive(Clone, Debug, Default)]
pub struct CompareTensors {
    /// The inputs fed to the models (none when both sides are saved outputs).
    pub inputs: Option<Vec<HostTensor>>,
    /// A's outputs.
    pub a: Vec<HostTensor>,
    /// B's outputs.
    pub b: Vec<HostTensor>,
}

impl CompareTensors {
    /// Saves the tensors asked for as `.npz`: the inputs (when a model ran), A's outputs and
    /// B's outputs.
    pub fn save(&self, inputs: Option<&Path>, a: Option<&Path>, b: Option<&Path>) -> Result<()> {
        if let (Some(p), Some(t)) = (inputs, &self.inputs) {
            npz::save(p, t)?;
        }
        if let Some(p) = a {
            npz::save(p, &self.a)?;
        }
        if let Some(p) = b {
            npz::save(p, &self.b)?;
        }
        Ok(())
    }
}

/// Runs the comparison of A with the reference B: the report, and the tensors for whoever
/// wants to save them. `progress` gets one phase per side that runs a model, advancing by
/// samples.
pub fn compare(
    config: &CompareConfig,
    progress: &dyn Progress,
) -> Result<(CompareReport, CompareTensors)> {
    let sources = vec![
        SourceConfig::new("A", config.a.clone()),
        SourceConfig::new("B", config.b.clone()),
    ];
    let runs = run_sources(&config.runner(sources), progress)?;
    let report = compare_results(
        &runs.results[0],
        &runs.results[1],
        &runs.inputs_note,
        &config.measures(),
    )?;
    let mut results = runs.results.into_iter();
    let mut outputs = || results.next().map(|r| r.outputs).unwrap_or_default();
    let tensors = CompareTensors {
        inputs: runs.inputs,
        a: outputs(),
        b: outputs(),
    };
    Ok((report, tensors))
}

/// The labels of `n` sides: `A`, `B`, … `Z`, then `S27`, `S28`, ….
pub(crate) fn side_labels(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match u8::try_from(i).ok().filter(|&i| i < 26) {
            Some(i) => char::from(b'A' + i).to_string(),
            None => format!("S{}", i + 1),
        })
        .collect()
}

/// Runs every side of `sides` on the same inputs (the last, the reference, once) and compares
/// each of the others with it; `config`'s `a` and `b` are not used. The runs come back too,
/// for whoever saves tensors.
pub(crate) fn compare_many(
    config: &CompareConfig,
    sides: &[SideConfig],
    progress: &dyn Progress,
) -> Result<(CompareManyReport, Runs)> {
    let sources = side_labels(sides.len())
        .into_iter()
        .zip(sides)
        .map(|(label, side)| SourceConfig::new(label, side.clone()))
        .collect();
    let runs = run_sources(&config.runner(sources), progress)?;
    let report = compare_with_last(&runs.results, &runs.inputs_note, &config.measures())?;
    Ok((report, runs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_are_lettered_in_order() {
        assert_eq!(side_labels(3), ["A", "B", "C"]);
        assert_eq!(side_labels(28)[25], "Z");
        assert_eq!(side_labels(28)[27], "S28");
    }
}
