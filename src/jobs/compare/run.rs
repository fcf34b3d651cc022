//! What the runner runs and what a run gives: the sources and their shared inputs, and per
//! source a run result (its named output tensors, when kept, and how the run went). Saved
//! outputs are a source like any other, and a run result saves as the `.npz` that reads back as
//! one.

use super::inputs::InputSource;
use super::sources::SourceConfig;
use crate::data::npz;
use crate::onnx::shape::ShapeRequest;
use crate::tensor::HostTensor;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

/// What the runner runs, on what.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The sources, run in this order.
    pub sources: Vec<SourceConfig>,
    /// Input shape overrides applied to every model (before its own passes).
    pub input_shapes: ShapeRequest,
    /// Samples per inference; `None`: a model's fixed batch, else up to
    /// [`DEFAULT_BATCH`](super::inputs::DEFAULT_BATCH).
    pub batch_size: Option<NonZeroUsize>,
    /// The inputs, made once for every source.
    pub inputs: InputSource,
}

/// One source's run: its outputs and how it went.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// How the reports name the source.
    pub label: String,
    /// The file that ran (or was read).
    pub source: PathBuf,
    /// Backend name, or `saved outputs`.
    pub backend: String,
    /// Samples run (0 for saved outputs).
    pub samples: usize,
    /// Samples per inference (0 for saved outputs).
    pub batch: usize,
    /// Inference time summed over batches, seconds.
    pub inference_s: f64,
    /// The outputs, by name.
    pub outputs: Vec<HostTensor>,
    /// What the reports say of the run (inputs converted to the float type the model takes).
    pub notes: Vec<String>,
}

/// One side of a comparison, as reported: a run result without its tensors.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SideReport {
    /// `A`, `B`, … (the last of the command line is the reference).
    pub label: String,
    /// The file.
    pub source: String,
    /// Backend name, or `saved outputs`.
    pub backend: String,
    /// Samples run (0 for saved outputs).
    pub samples: usize,
    /// Batch size per inference (0 for saved outputs).
    pub batch: usize,
    /// Inference time summed over batches, seconds.
    pub inference_s: f64,
    /// Samples per second of inference time.
    pub samples_per_s: f64,
}

impl RunResult {
    /// Outputs saved earlier (read from an `.npz`, or already in memory) as a run result.
    pub fn saved(label: impl Into<String>, source: &Path, outputs: Vec<HostTensor>) -> RunResult {
        RunResult {
            label: label.into(),
            source: source.to_path_buf(),
            backend: "saved outputs".into(),
            samples: 0,
            batch: 0,
            inference_s: 0.0,
            outputs,
            notes: vec![],
        }
    }

    /// The run result an `.npz` saved by [`RunResult::save`] (or numpy) holds.
    pub fn load(label: impl Into<String>, path: &Path) -> Result<RunResult> {
        let mut tensors = npz::load(path)?;
        super::inputs_stamp::take_stamp(&mut tensors);
        Ok(RunResult::saved(label, path, tensors))
    }

    /// Saves the outputs as an `.npz`, one array per output name (written atomically).
    pub fn save(&self, path: &Path) -> Result<()> {
        npz::save(path, &self.outputs)
    }

    /// The run as a report line.
    pub fn side(&self) -> SideReport {
        SideReport {
            label: self.label.clone(),
            source: self.source.display().to_string(),
            backend: self.backend.clone(),
            samples: self.samples,
            batch: self.batch,
            inference_s: self.inference_s,
            samples_per_s: if self.inference_s > 0.0 {
                self.samples as f64 / self.inference_s
            } else {
                0.0
            },
        }
    }
}

/// Everything the runner ran: the inputs (none when every source is saved outputs) and one
/// result per source, in order.
#[derive(Clone, Debug)]
pub struct Runs {
    /// The inputs fed to the models.
    pub inputs: Option<Vec<HostTensor>>,
    /// Where the inputs came from, as the report says it.
    pub(crate) inputs_note: String,
    /// One result per source.
    pub results: Vec<RunResult>,
}

impl Runs {
    /// Saves the tensors asked for as `.npz`: the inputs (when a model ran) and the last
    /// result's outputs (the reference's).
    pub fn save(&self, inputs: Option<&Path>, reference: Option<&Path>) -> Result<()> {
        if let (Some(p), Some(t)) = (inputs, &self.inputs) {
            npz::save(p, t)?;
        }
        if let (Some(p), Some(r)) = (reference, self.results.last()) {
            r.save(p)?;
        }
        Ok(())
    }
}
