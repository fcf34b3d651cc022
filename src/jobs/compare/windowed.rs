//! The windowed runner: every source of a comparison runs over the same windows of samples
//! (one batch each), one source at a time so only one session is open; the outputs of all but
//! the last are spooled to disk, and as the last runs, each window's inputs and every source's
//! outputs go to a sink (metrics that count, an `.npz` being written) and are dropped. Memory
//! holds one session and one batch whatever the number of samples. Saved outputs are cut into
//! the same windows.

use super::inputs::{checked_batch, make_feed, Feed};
use super::inputs_stamp::{check_same_inputs, take_stamp};
use super::run::{RunConfig, RunResult};
use super::sources::{load, Loaded, SourceConfig};
use super::window_spool::WindowSpool;
use crate::backend::batch_runner::{axis_of, run_batched_from};
use crate::backend::open as open_backend;
use crate::backend::Backend;
use crate::data::batch_axis::{samples_on, slice_padded_on};
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

/// What a windowed run hands each window to.
pub(crate) trait WindowSink {
    /// Takes one window (the tensors are dropped after it returns).
    fn add(&mut self, window: &Window, layout: &Layout) -> Result<()>;
}

/// How a windowed run went: one result per source, with no outputs kept.
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
            open_backend(&model, &options)?
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
            Stepper::Saved { .. } => self.slice(start, take, source),
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

    /// Samples `start..start + take` of saved outputs (nothing for a model: it must run).
    fn slice(&self, start: usize, take: usize, source: &SourceConfig) -> Result<Vec<HostTensor>> {
        let Stepper::Saved { outputs, axes } = self else {
            bail!("{}: not saved outputs", source.side.path.display());
        };
        outputs
            .iter()
            .map(|t| slice_padded_on(t, axis_of(axes, t)?, start, take))
            .collect()
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
    // One sample drawn now: inputs that cannot be made fail before any model is opened.
    feed.window(0, 1)?;
    let by_user = config.batch_size.is_some();
    let samples = feed.samples()?;
    let batch = checked_batch(plan.batch, by_user, samples, plan.any_fixed(), specs, path)?;
    Ok((feed, note, axes, batch))
}

/// Runs every source of `config` over the same windows of inputs and hands each window, with
/// every source's outputs for it, to `sink`. The sources run one after another, each with only
/// its own session open: every source but the last spools its outputs to disk window by
/// window, then the last runs in step with the sink. Every source is loaded before anything
/// runs, so a file that cannot open fails first; when every source is saved outputs, they make
/// one window. `progress` gets one phase per source that runs a model, advancing by samples.
pub(crate) fn run_windowed(
    config: &RunConfig,
    progress: &dyn Progress,
    sink: &mut dyn WindowSink,
) -> Result<Ran> {
    let mut loaded = config
        .sources
        .iter()
        .map(|s| load(s, &config.input_shapes))
        .collect::<Result<Vec<_>>>()?;
    let stamps: Vec<Option<String>> = loaded
        .iter_mut()
        .map(|src| match src {
            Loaded::Saved(tensors) => take_stamp(tensors),
            _ => None,
        })
        .collect();
    let plan = plan(&loaded, config)?;
    let Some(probe) = plan.specs.iter().position(Option::is_some) else {
        return saved_only(config, loaded, &stamps, sink);
    };
    let (feed, inputs_note, input_axes, batch) = feed_for(config, &loaded, &plan, probe)?;
    for (stamp, source) in stamps.iter().zip(&config.sources) {
        check_same_inputs(&source.side.path, stamp.as_deref(), &inputs_note)?;
    }
    let run = Run {
        config,
        feed: &feed,
        windows: windows(feed.samples()?, batch),
        batch,
        model_axes: batch_axes(&loaded[probe], &config.sources[probe])?,
    };
    let last = loaded.len() - 1;
    let (mut earlier, mut sides, mut output_axes) = (vec![], vec![], vec![]);
    let mut loaded = loaded.into_iter();
    for (i, src) in loaded.by_ref().take(last).enumerate() {
        let (kept, axes, side) = run.spooled(src, i, plan.dynamic[i], progress)?;
        earlier.push(kept);
        output_axes.push(axes);
        sides.push(side);
    }
    let src = loaded.next().expect("a run has a source");
    let mut stepper = run.open(src, last, plan.dynamic[last])?;
    output_axes.push(stepper.axes());
    let layout = Layout {
        inputs: input_axes,
        outputs: output_axes,
    };
    progress_start(progress, &config.sources[last], &stepper, &run);
    let ran = run.in_step(&mut stepper, &earlier, &layout, progress, sink);
    progress.finish();
    ran?;
    sides.push(stepper.result(&config.sources[last], batch)?);
    sides[probe].notes.extend(layout.inputs.notes());
    Ok(Ran {
        inputs_note,
        fed: true,
        sides,
    })
}

/// The windows of a run over `samples` samples at `batch`: (first sample, samples).
fn windows(samples: usize, batch: usize) -> Vec<(usize, usize)> {
    (0..samples)
        .step_by(batch.max(1))
        .map(|start| (start, batch.min(samples - start)))
        .collect()
}

/// What every source of a run shares: the inputs, their windows and the batch.
struct Run<'a> {
    config: &'a RunConfig,
    feed: &'a Feed,
    windows: Vec<(usize, usize)>,
    batch: usize,
    /// The batch axes of the model the inputs were made for (saved outputs are cut on them).
    model_axes: BatchAxes,
}

/// The outputs of a source that ran before the last: on disk, or saved outputs in memory.
enum Earlier {
    Spooled(WindowSpool),
    Saved(Stepper),
}

impl Run<'_> {
    /// The number of samples of the run.
    fn samples(&self) -> usize {
        self.windows.iter().map(|w| w.1).sum()
    }

    /// Opens source `i` for the run, checking saved outputs hold the run's samples.
    fn open(&self, src: Loaded, i: usize, dynamic: bool) -> Result<Stepper> {
        let stepper = open(src, dynamic, self.batch, &self.model_axes)?;
        stepper.check_samples(&self.config.sources[i], self.samples())?;
        Ok(stepper)
    }

    /// Runs source `i` over every window, its outputs spooled to disk (saved outputs stay as
    /// they are); its session is closed when this returns.
    fn spooled(
        &self,
        src: Loaded,
        i: usize,
        dynamic: bool,
        progress: &dyn Progress,
    ) -> Result<(Earlier, BatchAxes, RunResult)> {
        let source = &self.config.sources[i];
        let mut stepper = self.open(src, i, dynamic)?;
        let axes = stepper.axes();
        if let Stepper::Saved { .. } = stepper {
            let side = RunResult::saved(&source.label, &source.side.path, vec![]);
            return Ok((Earlier::Saved(stepper), axes, side));
        }
        let mut spool = WindowSpool::new();
        progress_start(progress, source, &stepper, self);
        let ran = self.windows.iter().try_for_each(|&(start, take)| {
            let inputs = self.feed.window(start, take)?;
            spool.push(&stepper.step(&inputs, start, take, self.batch, source)?)?;
            progress.advance(take as u64);
            Ok::<_, anyhow::Error>(())
        });
        progress.finish();
        ran?;
        let side = stepper.result(source, self.batch)?;
        Ok((Earlier::Spooled(spool), axes, side))
    }

    /// Runs the last source over every window, each window handed to `sink` with the earlier
    /// sources' outputs for it.
    fn in_step(
        &self,
        last: &mut Stepper,
        earlier: &[Earlier],
        layout: &Layout,
        progress: &dyn Progress,
        sink: &mut dyn WindowSink,
    ) -> Result<()> {
        let source = self.config.sources.last().expect("a run has a source");
        for (w, &(start, take)) in self.windows.iter().enumerate() {
            let inputs = self.feed.window(start, take)?;
            let mut outputs = earlier
                .iter()
                .zip(&self.config.sources)
                .map(|(e, s)| match e {
                    Earlier::Spooled(spool) => spool.window(w),
                    Earlier::Saved(saved) => saved.slice(start, take, s),
                })
                .collect::<Result<Vec<_>>>()?;
            outputs.push(last.step(&inputs, start, take, self.batch, source)?);
            sink.add(
                &Window {
                    inputs: &inputs,
                    outputs: &outputs,
                },
                layout,
            )?;
            progress.advance(take as u64);
        }
        Ok(())
    }
}

/// Starts the progress phase of `source`, when it runs a model.
fn progress_start(progress: &dyn Progress, source: &SourceConfig, stepper: &Stepper, run: &Run) {
    if let Stepper::Backend { backend, .. } = stepper {
        progress.start(
            &format!("{}: {}", source.label, backend.name()),
            Some(run.samples() as u64),
        );
    }
}

/// The run when every source is saved outputs: one window of them all, whole.
fn saved_only(
    config: &RunConfig,
    loaded: Vec<Loaded>,
    stamps: &[Option<String>],
    sink: &mut dyn WindowSink,
) -> Result<Ran> {
    // Two archives that say which inputs made them must say the same.
    if let Some(first) = stamps.iter().flatten().next() {
        for (stamp, source) in stamps.iter().zip(&config.sources) {
            check_same_inputs(&source.side.path, stamp.as_deref(), first)?;
        }
    }
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
