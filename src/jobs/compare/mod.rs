//! The comparator behind `compare`: each side (an ONNX model on a reference backend with its
//! graph passes, a TensorRT engine, or an `.npz` of saved outputs) runs on the same inputs,
//! made once, and gives a run result of named tensors; two run results are compared without a
//! backend, and a verdict says whether the run fails. `compare A B` runs both and compares A
//! with the reference B; `compare A B C …` compares each with the last, which runs once.

pub(crate) mod collect;
pub mod inputs;
pub(crate) mod inputs_stamp;
pub mod pair;
pub mod run;
pub mod sources;
pub mod verdict;
pub(crate) mod window_spool;
pub(crate) mod windowed;

pub(crate) use collect::run_sources;
pub use inputs::InputSource;
pub(crate) use inputs::{make_inputs, DEFAULT_BATCH};
pub(crate) use pair::compare_results;
pub use pair::{CompareManyReport, CompareReport, Measures};
pub use run::{RunConfig, RunResult, Runs, SideReport};
pub(crate) use sources::is_model;
pub use sources::{declared_inputs, SideConfig, SourceConfig};
pub use verdict::{verdict, Verdict};

use crate::data::npz_spool::NpzSpool;
use crate::host_memory::peak_rss_bytes;
use crate::metrics::closeness::Tolerance;
use crate::metrics::task::TaskRequest;
use crate::onnx::shape::ShapeRequest;
use crate::progress::Progress;
use crate::tensor::{BatchAxes, HostTensor};
use anyhow::Result;
use pair::PairAccumulator;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use windowed::{run_windowed, Layout, Ran, Window, WindowSink};

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

/// Where a comparison saves its tensors as `.npz`, each streamed to its file window by window
/// and put in place once the comparison has succeeded.
#[derive(Clone, Debug, Default)]
pub struct Saves {
    /// The inputs fed to the models (nothing is written when every side is saved outputs).
    pub inputs: Option<PathBuf>,
    /// The outputs of the first side under test (A).
    pub tested: Option<PathBuf>,
    /// The reference's outputs (the last side's).
    pub reference: Option<PathBuf>,
}

/// Counts every comparison of a run window by window, and spools the tensors to save.
struct CompareSink {
    /// One per side under test, in order; the reference is the last side.
    pairs: Vec<PairAccumulator>,
    inputs: Option<NpzSpool>,
    tested: Option<NpzSpool>,
    reference: Option<NpzSpool>,
}

impl CompareSink {
    fn new(sides: &[SourceConfig], measures: &Measures, saves: &Saves) -> CompareSink {
        let (reference, tested) = sides.split_last().expect("a comparison has sides");
        let spool = |p: &Option<PathBuf>| p.as_deref().map(NpzSpool::new);
        CompareSink {
            pairs: tested
                .iter()
                .map(|a| PairAccumulator::new(&a.side.path, &reference.side.path, measures))
                .collect(),
            inputs: spool(&saves.inputs),
            tested: spool(&saves.tested),
            reference: spool(&saves.reference),
        }
    }

    /// The reports, one per side under test, then the saved files put in place.
    fn finish(self, ran: &Ran) -> Result<Vec<CompareReport>> {
        let (reference, tested) = ran.sides.split_last().expect("a comparison has sides");
        let reports = self
            .pairs
            .into_iter()
            .zip(tested)
            .map(|(pair, a)| pair.finish(a, reference, &ran.inputs_note))
            .collect::<Result<Vec<_>>>()?;
        // Saved outputs say which inputs made them, for a later comparison to check.
        let stamp = match ran.fed {
            true => vec![inputs_stamp::stamp(&ran.inputs_note)?],
            false => vec![],
        };
        for spool in [self.tested, self.reference].into_iter().flatten() {
            spool.finish_with(&stamp)?;
        }
        if let Some(inputs) = self.inputs.filter(|_| ran.fed) {
            inputs.finish()?;
        }
        Ok(reports)
    }
}

/// The batch axis of `t` by `axes`, none for a scalar.
fn axis_in(axes: &BatchAxes, t: &HostTensor) -> Result<Option<usize>> {
    Ok(axes.axis(&t.name)?.filter(|_| !t.shape.is_empty()))
}

impl WindowSink for CompareSink {
    fn add(&mut self, window: &Window, layout: &Layout) -> Result<()> {
        let (reference, tested) = window
            .outputs
            .split_last()
            .expect("a window has every side's outputs");
        let reference_axes = layout.outputs.last().cloned().unwrap_or_default();
        let axis_of = |t: &HostTensor| axis_in(&reference_axes, t);
        for (pair, a) in self.pairs.iter_mut().zip(tested) {
            pair.add(a, reference, &axis_of)?;
        }
        if let Some(spool) = &mut self.inputs {
            if !window.inputs.is_empty() {
                spool.add(window.inputs, |t| axis_in(&layout.inputs, t))?;
            }
        }
        if let (Some(spool), Some(a)) = (&mut self.tested, tested.first()) {
            let axes = &layout.outputs[0];
            spool.add(a, |t| axis_in(axes, t))?;
        }
        if let Some(spool) = &mut self.reference {
            spool.add(reference, axis_of)?;
        }
        Ok(())
    }
}

/// Runs `sources` (the last the reference) in windowed and compares each of the others with
/// the reference window by window, saving the tensors `saves` asks for.
fn compare_sources(
    config: &CompareConfig,
    sources: Vec<SourceConfig>,
    saves: &Saves,
    progress: &dyn Progress,
) -> Result<(Vec<CompareReport>, String)> {
    let mut sink = CompareSink::new(&sources, &config.measures(), saves);
    let ran = run_windowed(&config.runner(sources), progress, &mut sink)?;
    let reference = ran
        .sides
        .last()
        .map(|r| r.label.clone())
        .unwrap_or_default();
    let mut reports = sink.finish(&ran)?;
    for r in &mut reports {
        r.peak_rss_bytes = peak_rss_bytes();
    }
    Ok((reports, reference))
}

/// Runs the comparison of A with the reference B, window by window (memory holds one batch of
/// inputs and outputs whatever the number of samples), saving the tensors `saves` asks for.
/// `progress` advances by samples.
pub fn compare(
    config: &CompareConfig,
    saves: &Saves,
    progress: &dyn Progress,
) -> Result<CompareReport> {
    let sources = vec![
        SourceConfig::new("A", config.a.clone()),
        SourceConfig::new("B", config.b.clone()),
    ];
    let (mut reports, _) = compare_sources(config, sources, saves, progress)?;
    Ok(reports.remove(0))
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
/// each of the others with it, window by window; `config`'s `a` and `b` are not used. `saves`
/// may name the inputs and the reference's outputs (`tested` is refused by the caller).
pub(crate) fn compare_many(
    config: &CompareConfig,
    sides: &[SideConfig],
    saves: &Saves,
    progress: &dyn Progress,
) -> Result<CompareManyReport> {
    let sources = side_labels(sides.len())
        .into_iter()
        .zip(sides)
        .map(|(label, side)| SourceConfig::new(label, side.clone()))
        .collect();
    let (comparisons, reference) = compare_sources(config, sources, saves, progress)?;
    Ok(CompareManyReport {
        reference,
        comparisons,
    })
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
