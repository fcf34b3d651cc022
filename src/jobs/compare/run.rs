//! The runner: every source of a comparison on the same inputs, made once, each giving a run
//! result (its named output tensors and how the run went). Saved outputs are a source like any
//! other, and a run result saves as the `.npz` that reads back as one.

use super::inputs::{checked_batch, make_inputs, InputSource};
use super::sources::{load, Loaded, SourceConfig};
use crate::backend::batch_runner::{run_batched, samples_on_axes};
use crate::data::npz;
use crate::jobs::open::open_model;
use crate::onnx::input_roles::int_input_roles;
use crate::onnx::shape::{model_batch_axes, ShapeRequest};
use crate::progress::Progress;
use crate::tensor::{conversion_note, BatchAxes, HostTensor, IoSpec};
use anyhow::{bail, Context, Result};
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
        Ok(RunResult::saved(label, path, npz::load(path)?))
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

/// The batch the loaded sources agree on and what each declares.
struct Plan {
    /// The batch so far: asked for, or fixed by a model.
    batch: Option<usize>,
    /// Per source: its inputs (`None` for saved outputs) and whether its batch is dynamic.
    specs: Vec<Option<Vec<IoSpec>>>,
    dynamic: Vec<bool>,
}

impl Plan {
    fn any_fixed(&self) -> bool {
        self.specs
            .iter()
            .zip(&self.dynamic)
            .any(|(s, d)| s.is_some() && !d)
    }
}

/// The batch, decided once from the models and used on all of them: a model's fixed batch must
/// be the one asked for.
fn plan(loaded: &[Loaded], config: &RunConfig) -> Result<Plan> {
    let mut plan = Plan {
        batch: config.batch_size.map(NonZeroUsize::get),
        specs: vec![],
        dynamic: vec![],
    };
    for (src, source) in loaded.iter().zip(&config.sources) {
        let Some(declared) = src.inputs() else {
            plan.specs.push(None);
            plan.dynamic.push(false);
            continue;
        };
        let (declared, fixed) = declared?;
        match (fixed, plan.batch) {
            (Some(f), Some(b)) if f != b => bail!(
                "{}: the model's batch is fixed to {f}, a batch size of {b} cannot apply (make the batch axis dynamic with an input shape of -1 ...)",
                source.side.path.display()
            ),
            (Some(f), _) => plan.batch = Some(f),
            (None, _) => {}
        }
        plan.dynamic.push(fixed.is_none());
        plan.specs.push(Some(declared));
    }
    Ok(plan)
}

/// Runs `loaded` (a model or an engine) over `inputs` at `batch`; `dynamic` opens a model at it.
fn run_one(
    loaded: Loaded,
    source: &SourceConfig,
    dynamic: bool,
    inputs: &[HostTensor],
    batch: usize,
    progress: &dyn Progress,
) -> Result<RunResult> {
    let path = &source.side.path;
    let mut backend = match loaded {
        Loaded::Model(boxed) => {
            let (model, mut options) = *boxed;
            if dynamic {
                options.batch = Some(batch);
            }
            open_model(&model, &options)?
        }
        Loaded::Engine(engine) => engine,
        Loaded::Saved(saved) => return Ok(RunResult::saved(&source.label, path, saved)),
    };
    progress.start(
        &format!("{}: {}", source.label, backend.name()),
        Some(samples_on_axes(inputs, &backend.batch_axes())? as u64),
    );
    let ran = run_batched(backend.as_mut(), inputs, batch, progress)
        .with_context(|| path.display().to_string());
    progress.finish();
    let ran = ran?;
    for note in backend.finish()? {
        tracing::info!("{}: {note}", path.display());
    }
    Ok(RunResult {
        label: source.label.clone(),
        source: path.clone(),
        backend: backend.name(),
        samples: ran.samples,
        batch,
        inference_s: ran.inference.as_secs_f64(),
        outputs: ran.outputs,
        notes: conversion_note(&ran.converted, &source.label)
            .into_iter()
            .collect(),
    })
}

/// Where the inputs and outputs of a loaded source hold their samples.
fn batch_axes(loaded: &Loaded, source: &SourceConfig) -> Result<BatchAxes> {
    Ok(match loaded {
        Loaded::Model(boxed) => model_batch_axes(&boxed.0, &source.side.backend.batch_axes)?,
        Loaded::Engine(backend) => backend.batch_axes(),
        Loaded::Saved(_) => BatchAxes::default(),
    })
}

/// Runs every source of `config` on the same inputs, made once (from the first source that
/// runs a model, whose count of samples decides a dynamic batch). Every source is loaded before
/// anything runs, so a file that cannot open fails first. `progress` gets one phase per source
/// that runs a model, advancing by samples.
pub fn run_sources(config: &RunConfig, progress: &dyn Progress) -> Result<Runs> {
    let loaded = config
        .sources
        .iter()
        .map(|s| load(s, &config.input_shapes))
        .collect::<Result<Vec<_>>>()?;
    let plan = plan(&loaded, config)?;
    let any_fixed = plan.any_fixed();
    // What the integer inputs take, from whichever source is an ONNX graph.
    let graph_roles = loaded
        .iter()
        .find_map(Loaded::model)
        .map(int_input_roles)
        .unwrap_or_default();
    let mut batch = plan.batch;
    // Inputs with no batch axis, said once, on the side whose inputs were made.
    let mut axes_notes = vec![];
    let mut runs = Runs {
        inputs: None,
        inputs_note: match config.sources.len() {
            2 => "none (both sides are saved outputs)".into(),
            _ => "none (every side is saved outputs)".into(),
        },
        results: vec![],
    };
    for (i, (src, source)) in loaded.into_iter().zip(&config.sources).enumerate() {
        if let (None, Some(probe)) = (&runs.inputs, &plan.specs[i]) {
            // Inputs first: their count decides the batch of a dynamic model.
            let path = &source.side.path;
            let axes = batch_axes(&src, source)?;
            let (made, note) = make_inputs(&config.inputs, probe, path, &graph_roles, &axes)?;
            let by_user = config.batch_size.is_some();
            batch = Some(checked_batch(
                batch, by_user, &made, any_fixed, probe, path, &axes,
            )?);
            runs.inputs_note = note;
            runs.inputs = Some(made);
            axes_notes = axes.notes();
        }
        let inputs = runs.inputs.as_deref().unwrap_or_default();
        let mut ran = run_one(
            src,
            source,
            plan.dynamic[i],
            inputs,
            batch.unwrap_or(0),
            progress,
        )?;
        ran.notes.append(&mut axes_notes);
        runs.results.push(ran);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::super::sources::SideConfig;
    use super::*;
    use crate::backend::select::{BackendKind, BackendOptions};
    use crate::data::synthetic::{InputDistribution, RandomInputs};
    use crate::onnx::rewrite::capture::Capture;
    use crate::onnx::OnnxModel;
    use crate::progress::NoProgress;
    use std::sync::Arc;

    fn side(path: &Path) -> SideConfig {
        SideConfig {
            path: path.to_path_buf(),
            backend: BackendOptions {
                kind: BackendKind::Tract,
                ..Default::default()
            },
        }
    }

    fn config(sources: Vec<SourceConfig>) -> RunConfig {
        RunConfig {
            sources,
            input_shapes: Default::default(),
            batch_size: None,
            inputs: InputSource::Random {
                random: RandomInputs {
                    dist: InputDistribution::Uniform {
                        low: 0.0,
                        high: 1.0,
                    },
                    seed: 5,
                },
                int_inputs: Default::default(),
                samples: 3,
            },
        }
    }

    #[test]
    fn sources_run_on_the_same_inputs_and_a_pass_changes_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.onnx");
        let proto = crate::onnx::test_models::classifier(None);
        OnnxModel::from_proto(proto, &path).save(&path).unwrap();
        let mut captured = SourceConfig::new("B", side(&path));
        captured.passes.push(Arc::new(Capture {
            names: vec!["relu_out".into()],
        }));
        let runs = run_sources(
            &config(vec![SourceConfig::new("A", side(&path)), captured]),
            &NoProgress,
        )
        .unwrap();
        assert_eq!(runs.inputs.as_ref().unwrap()[0].shape[0], 3);
        let names =
            |r: &RunResult| -> Vec<String> { r.outputs.iter().map(|t| t.name.clone()).collect() };
        assert_eq!(names(&runs.results[0]), ["logits"]);
        assert_eq!(names(&runs.results[1]), ["logits", "relu_out"]);
        assert_eq!(runs.results[0].outputs[0], runs.results[1].outputs[0]);
        assert_eq!((runs.results[1].samples, runs.results[1].batch), (3, 3));

        // Saved outputs take no passes: refused before anything runs.
        let saved = dir.path().join("saved.npz");
        runs.results[0].save(&saved).unwrap();
        let mut bad = SourceConfig::new("S", side(&saved));
        bad.passes.push(Arc::new(Capture { names: vec![] }));
        let err = run_sources(&config(vec![bad]), &NoProgress).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "{}: graph passes (capture) apply to ONNX models only",
                saved.display()
            )
        );
        let back = RunResult::load("S", &saved).unwrap();
        assert_eq!(back.outputs, runs.results[0].outputs);
    }

    #[test]
    fn given_float32_tensors_feed_a_float16_io_graph_converted_and_noted() {
        use crate::onnx::rewrite::fp16::{Fp16, Fp16Options};
        use crate::tensor::{ElemType, TensorData};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.onnx");
        let proto = crate::onnx::test_models::classifier(None);
        OnnxModel::from_proto(proto, &path).save(&path).unwrap();
        let mut narrow = SourceConfig::new("A", side(&path));
        narrow.passes.push(Arc::new(Fp16(Fp16Options {
            fp16_io: true,
            ..Default::default()
        })));
        let n = 2 * 3 * 16 * 16;
        let values = (0..n).map(|i| (i % 17) as f32 / 17.0).collect();
        let x = HostTensor::new("input", vec![2, 3, 16, 16], TensorData::F32(values)).unwrap();
        let mut cfg = config(vec![narrow, SourceConfig::new("B", side(&path))]);
        cfg.inputs = InputSource::Given {
            tensors: vec![x.clone()],
            note: "2 images of val".into(),
        };
        let runs = run_sources(&cfg, &NoProgress).unwrap();
        // The inputs stay as given; only A's run took them as float16.
        assert_eq!(runs.inputs.as_deref(), Some(&[x][..]));
        assert_eq!(
            runs.results[0].notes,
            ["inputs converted float32 → float16 for A"]
        );
        assert!(runs.results[1].notes.is_empty());
        let (a, b) = (&runs.results[0].outputs[0], &runs.results[1].outputs[0]);
        assert_eq!(
            (a.elem_type(), b.elem_type()),
            (ElemType::F16, ElemType::F32)
        );
        let (a, b) = (a.data.to_f64(), b.data.to_f64());
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 0.05));
    }
}
