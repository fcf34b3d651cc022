//! The lockstep runner: every source of a comparison is opened at once and fed the same window
//! of samples in turn; each window's inputs and outputs go to a sink (metrics that count, an
//! `.npz` being spooled) and are dropped, so memory holds one batch whatever the number of
//! samples. Saved outputs are cut into the same windows.

use super::inputs::{checked_batch, make_feed, Feed};
use super::run::{RunConfig, RunResult};
use super::sources::{load, Loaded, SourceConfig};
use crate::backend::batch_runner::{axis_of, run_batched_from};
use crate::backend::Backend;
use crate::data::batch_axis::{samples_on, slice_padded_on};
use crate::jobs::open::open_model;
use crate::onnx::input_roles::int_input_roles;
use crate::onnx::shape::model_batch_axes;
use crate::progress::{NoProgress, Progress};
use crate::tensor::{conversion_note, BatchAxes, FloatConversion, HostTensor, IoSpec};
use anyhow::{bail, Context, Result};
use std::num::NonZeroUsize;
use std::time::Duration;

/// One window of the run: the inputs fed, and each source's outputs for them.
pub(crate) struct Window<'a> {
    /// The inputs of the window (none when every source is saved outputs).
    pub inputs: &'a [HostTensor],
    /// One list of outputs per source, in source order.
    pub outputs: &'a [Vec<HostTensor>],
}

/// Where the run's tensors hold their samples.
pub(crate) struct Layout {
    /// The inputs' batch axes.
    pub inputs: BatchAxes,
    /// Each source's outputs' batch axes, in source order.
    pub outputs: Vec<BatchAxes>,
}

/// What a lockstep run hands each window to.
pub(crate) trait WindowSink {
    /// Takes one window (the tensors are dropped after it returns).
    fn add(&mut self, window: &Window, layout: &Layout) -> Result<()>;
}

/// How a lockstep run went: one result per source, with no outputs kept.
pub(crate) struct Ran {
    /// Where the inputs came from, as the report says it.
    pub inputs_note: String,
    /// Whether any source ran a model on inputs.
    pub fed: bool,
    /// One result per source, in order, its outputs left empty.
    pub sides: Vec<RunResult>,
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

/// Where the inputs and outputs of a loaded source hold their samples.
fn batch_axes(loaded: &Loaded, source: &SourceConfig) -> Result<BatchAxes> {
    Ok(match loaded {
        Loaded::Model(boxed) => model_batch_axes(&boxed.0, &source.side.backend.batch_axes)?,
        Loaded::Engine(backend) => backend.batch_axes(),
        Loaded::Saved(_) => BatchAxes::default(),
    })
}

/// A source ready to run windows.
enum Stepper {
    /// A model or engine on its backend, and what its windows have taken so far.
    Backend {
        backend: Box<dyn Backend>,
        inference: Duration,
        samples: usize,
        converted: Vec<FloatConversion>,
    },
    /// Saved outputs, cut into the windows on `axes`.
    Saved {
        outputs: Vec<HostTensor>,
        axes: BatchAxes,
    },
}

/// Opens `loaded` for the run: a model at `batch` when its batch is `dynamic`.
fn open(loaded: Loaded, dynamic: bool, batch: usize, model_axes: &BatchAxes) -> Result<Stepper> {
    let backend = match loaded {
        Loaded::Model(boxed) => {
            let (model, mut options) = *boxed;
            if dynamic {
                options.batch = Some(batch);
            }
            open_model(&model, &options)?
        }
        Loaded::Engine(engine) => engine,
        Loaded::Saved(outputs) => {
            return Ok(Stepper::Saved {
                outputs,
                axes: model_axes.clone(),
            })
        }
    };
    Ok(Stepper::Backend {
        backend,
        inference: Duration::ZERO,
        samples: 0,
        converted: vec![],
    })
}

impl Stepper {
    /// Where this source's outputs hold their samples.
    fn axes(&self) -> BatchAxes {
        match self {
            Stepper::Backend { backend, .. } => backend.batch_axes(),
            Stepper::Saved { axes, .. } => axes.clone(),
        }
    }

    /// Refuses saved outputs that do not hold `samples` samples on their batch axes.
    fn check_samples(&self, source: &SourceConfig, samples: usize) -> Result<()> {
        let Stepper::Saved { outputs, axes } = self else {
            return Ok(());
        };
        for t in outputs {
            if let Some(axis) = axis_of(axes, t)? {
                let held = samples_on(t, axis)?;
                if held != samples {
                    bail!(
                        "{}: saved output '{}' {:?} holds {held} samples on axis {axis}, the inputs {samples}",
                        source.side.path.display(),
                        t.name,
                        t.shape
                    );
                }
            }
        }
        Ok(())
    }

    /// The outputs for samples `start..start + inputs' samples` of the run.
    fn step(
        &mut self,
        inputs: &[HostTensor],
        start: usize,
        take: usize,
        batch: usize,
        source: &SourceConfig,
    ) -> Result<Vec<HostTensor>> {
        match self {
            Stepper::Saved { outputs, axes } => outputs
                .iter()
                .map(|t| slice_padded_on(t, axis_of(axes, t)?, start, take))
                .collect(),
            Stepper::Backend {
                backend,
                inference,
                samples,
                converted,
            } => {
                let ran = run_batched_from(backend.as_mut(), inputs, batch, start, &NoProgress)
                    .with_context(|| source.side.path.display().to_string())?;
                if *samples == 0 {
                    *converted = ran.converted;
                }
                *inference += ran.inference;
                *samples += ran.samples;
                Ok(ran.outputs)
            }
        }
    }

    /// The source's run, as reported (its outputs went to the sink).
    fn result(self, source: &SourceConfig, batch: usize) -> Result<RunResult> {
        let path = &source.side.path;
        match self {
            Stepper::Saved { .. } => Ok(RunResult::saved(&source.label, path, vec![])),
            Stepper::Backend {
                mut backend,
                inference,
                samples,
                converted,
            } => {
                for note in backend.finish()? {
                    tracing::info!("{}: {note}", path.display());
                }
                Ok(RunResult {
                    label: source.label.clone(),
                    source: path.clone(),
                    backend: backend.name(),
                    samples,
                    batch,
                    inference_s: inference.as_secs_f64(),
                    outputs: vec![],
                    notes: conversion_note(&converted, &source.label)
                        .into_iter()
                        .collect(),
                })
            }
        }
    }
}

/// The inputs and the batch of the run, made for the first source that runs a model (`probe`
/// its index): its count of samples decides a dynamic batch.
fn feed_for(
    config: &RunConfig,
    loaded: &[Loaded],
    plan: &Plan,
    probe: usize,
) -> Result<(Feed, String, BatchAxes, usize)> {
    let source = &config.sources[probe];
    let path = &source.side.path;
    let specs = plan.specs[probe].as_deref().unwrap_or_default();
    // What the integer inputs take, from whichever source is an ONNX graph.
    let graph_roles = loaded
        .iter()
        .find_map(Loaded::model)
        .map(int_input_roles)
        .unwrap_or_default();
    let axes = batch_axes(&loaded[probe], source)?;
    let (feed, note) = make_feed(&config.inputs, specs, path, &graph_roles, &axes)?;
    let by_user = config.batch_size.is_some();
    let samples = feed.samples()?;
    let batch = checked_batch(plan.batch, by_user, samples, plan.any_fixed(), specs, path)?;
    Ok((feed, note, axes, batch))
}

/// Runs every source of `config` in lockstep over the same windows of inputs, handing each
/// window to `sink`. Every source is loaded before anything runs, so a file that cannot open
/// fails first; when every source is saved outputs, they make one window. `progress` advances
/// by samples.
pub(crate) fn run_lockstep(
    config: &RunConfig,
    progress: &dyn Progress,
    sink: &mut dyn WindowSink,
) -> Result<Ran> {
    let loaded = config
        .sources
        .iter()
        .map(|s| load(s, &config.input_shapes))
        .collect::<Result<Vec<_>>>()?;
    let plan = plan(&loaded, config)?;
    let Some(probe) = plan.specs.iter().position(Option::is_some) else {
        return saved_only(config, loaded, sink);
    };
    let (feed, inputs_note, input_axes, batch) = feed_for(config, &loaded, &plan, probe)?;
    let samples = feed.samples()?;
    let model_axes = batch_axes(&loaded[probe], &config.sources[probe])?;
    let mut steppers = vec![];
    for (i, (src, source)) in loaded.into_iter().zip(&config.sources).enumerate() {
        let stepper = open(src, plan.dynamic[i], batch, &model_axes)?;
        stepper.check_samples(source, samples)?;
        steppers.push(stepper);
    }
    let layout = Layout {
        outputs: steppers.iter().map(Stepper::axes).collect(),
        inputs: input_axes,
    };
    progress.start(&phase_name(config, &steppers), Some(samples as u64));
    let ran = run_windows(config, &feed, &mut steppers, batch, &layout, progress, sink);
    progress.finish();
    ran?;
    let mut sides = steppers
        .into_iter()
        .zip(&config.sources)
        .map(|(s, source)| s.result(source, batch))
        .collect::<Result<Vec<_>>>()?;
    sides[probe].notes.extend(layout.inputs.notes());
    Ok(Ran {
        inputs_note,
        fed: true,
        sides,
    })
}

/// Every window of the run through every source, then to `sink`.
fn run_windows(
    config: &RunConfig,
    feed: &Feed,
    steppers: &mut [Stepper],
    batch: usize,
    layout: &Layout,
    progress: &dyn Progress,
    sink: &mut dyn WindowSink,
) -> Result<()> {
    let samples = feed.samples()?;
    let mut start = 0;
    while start < samples {
        let take = batch.min(samples - start);
        let inputs = feed.window(start, take)?;
        let outputs = steppers
            .iter_mut()
            .zip(&config.sources)
            .map(|(s, source)| s.step(&inputs, start, take, batch, source))
            .collect::<Result<Vec<_>>>()?;
        sink.add(
            &Window {
                inputs: &inputs,
                outputs: &outputs,
            },
            layout,
        )?;
        progress.advance(take as u64);
        start += take;
    }
    Ok(())
}

/// The progress phase of the run: each source that runs, by label and backend.
fn phase_name(config: &RunConfig, steppers: &[Stepper]) -> String {
    let running: Vec<String> = steppers
        .iter()
        .zip(&config.sources)
        .filter_map(|(s, source)| match s {
            Stepper::Backend { backend, .. } => {
                Some(format!("{}: {}", source.label, backend.name()))
            }
            Stepper::Saved { .. } => None,
        })
        .collect();
    running.join(", ")
}

/// The run when every source is saved outputs: one window of them all, whole.
fn saved_only(config: &RunConfig, loaded: Vec<Loaded>, sink: &mut dyn WindowSink) -> Result<Ran> {
    let mut outputs = vec![];
    let mut sides = vec![];
    for (src, source) in loaded.into_iter().zip(&config.sources) {
        let Loaded::Saved(saved) = src else {
            bail!("{}: not saved outputs", source.side.path.display());
        };
        outputs.push(saved);
        sides.push(RunResult::saved(&source.label, &source.side.path, vec![]));
    }
    let layout = Layout {
        inputs: BatchAxes::default(),
        outputs: vec![BatchAxes::default(); outputs.len()],
    };
    sink.add(
        &Window {
            inputs: &[],
            outputs: &outputs,
        },
        &layout,
    )?;
    Ok(Ran {
        inputs_note: match config.sources.len() {
            2 => "none (both sides are saved outputs)".into(),
            _ => "none (every side is saved outputs)".into(),
        },
        fed: false,
        sides,
    })
}
