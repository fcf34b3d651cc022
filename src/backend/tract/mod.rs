//! The tract backend: pure-Rust ONNX inference, the reference every other backend is
//! compared against. Always available on the CPU, where it uses the cores two ways: a fixed
//! batch is split into chunks run side by side, and each chunk's matrix products run on
//! tract-linalg's multithreaded executor. `Device::Cuda` runs tract's CUDA runtime instead.
//! Outputs can be handed to a visitor as their nodes run, so a caller that reads many tensors need
//! not hold them all.

use super::{Backend, Device, OutputVisitor, RunOutput};
use crate::data::batch_axis::{concat, slice_padded_on, truncate};
use crate::error::{fix_with, Setting};
use crate::error::{ErrorKind, TypedError};
use crate::onnx::shape::{model_inputs, shaped, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::tensor::{check_input_count, HostTensor, IoSpec};
use crate::tensor::{BatchAxes, BatchAxisRequest, Dim};
use anyhow::{bail, Context, Result};
use convert::{run_plan, spec_of, to_host};
use refusal::analysis_error;
use std::time::{Duration, Instant};
use threads::{on_workers, runs_per_sample, ThreadPlan};
use tract_linalg::multithread::Executor;
use tract_onnx::prelude::*;
use visit::{keep_only_needed_outputs, no_batch_axis, visit_f32, CpuPlan};

mod convert;
mod refusal;
mod threads;
mod visit;

/// How to prepare a model for tract.
#[derive(Clone, Debug, Default)]
pub struct TractOptions {
    /// `--input-shape` overrides, applied before anything else.
    pub input_shapes: ShapeRequest,
    /// Fix the batch axis to this size (a dynamic model then runs as a static one).
    pub batch: Option<usize>,
    /// Batch axes given by hand, over what the model's named axes say.
    pub batch_axes: BatchAxisRequest,
    /// CPU or CUDA (tract's CUDA runtime).
    pub device: Device,
    /// CPU threads; `None` uses every core. Ignored on CUDA.
    pub threads: Option<usize>,
    /// On the CPU, the model outputs from this index on are only visited (the calibration
    /// run's captured activations): [`Backend::run_visit`] hands each to the visitor as its
    /// node runs, and tract frees it after its last reader instead of keeping it to the end of
    /// the run. [`Backend::run`] then returns the outputs before it (and any of the others
    /// nothing reads); [`Backend::outputs`] still lists them all, as the visitor numbers them.
    pub visit_only_from: Option<usize>,
}

/// `model` as tract parses it: its value_info ignored (trtkit's shape passes decide the
/// shapes), external data read beside the model file.
pub(super) fn parse(model: &OnnxModel) -> Result<tract_onnx::model::ParseResult> {
    let dir = model.base_dir().to_string_lossy().into_owned();
    tract_onnx::onnx()
        .with_ignore_value_info(true)
        .parse(&model.proto, Some(&dir))
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .with_context(|| {
            let message = format!("{}: tract cannot load the model", model.path.display());
            TypedError::new(ErrorKind::BackendRefusedModel, message)
        })
}

/// A model prepared for tract on the CPU or on CUDA.
pub struct TractBackend {
    plan: Box<dyn Runnable>,
    /// The same plan on the CPU, run node by node by [`Backend::run_visit`]; `None` on CUDA.
    cpu_plan: Option<CpuPlan>,
    /// What [`Backend::run`] returns: the outputs the plan keeps (all of them, unless
    /// [`TractOptions::visit_only_from`] made some visit-only).
    returned: Vec<IoSpec>,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    device: Device,
    threads: ThreadPlan,
    batch: Option<usize>,
    batch_axes: BatchAxes,
}

/// Checks that tract's CUDA runtime can run here; the error says what is missing.
pub(crate) fn cuda_runtime() -> Result<&'static dyn Runtime> {
    let missing = |e: anyhow::Error| {
        fix_with(
            Setting::Device,
            format!("running on CUDA needs an NVIDIA GPU with a CUDA 13 driver and the CUDA libraries (cudart, nvrtc, cublas, cudnn): {e:#}"),
        )
    };
    tract_cuda::utils::ensure_cuda_runtime_dependencies("tract-cuda").map_err(missing)?;
    let rt = runtime_for_name("cuda")
        .map_err(|e| anyhow::anyhow!("{e:#}"))?
        .context("tract's CUDA runtime is not compiled into this binary")?;
    rt.check().map_err(missing)?;
    Ok(rt)
}

impl TractBackend {
    /// Prepares `model` (shape overrides, batch, parse, optimize) for running on the CPU.
    pub fn load(model: &OnnxModel, options: &TractOptions) -> Result<Self> {
        let (model, batch_axes, threads) = shaped(
            model.clone(),
            &options.input_shapes,
            &options.batch_axes,
            |model, axes| {
                let threads = thread_plan(model, options, axes);
                // Each chunk runs the prepared batch; one chunk runs the whole.
                let chunked = threads.chunks > 1;
                let batch = options
                    .batch
                    .map(|n| if chunked { threads.chunk_batch } else { n });
                (batch, threads)
            },
        )?;
        let cuda = match options.device {
            Device::Cuda => Some(cuda_runtime()?),
            Device::Cpu => None,
        };
        let shown = model.path.display().to_string();
        let parsed = parse(&model)?;
        // The CPU plan is optimized for tract's CPU kernels (weights packed for them); the CUDA
        // runtime needs the decluttered graph with plain constants and optimizes it itself.
        let typed = match cuda {
            None => parsed.model.into_optimized(),
            Some(_) => parsed.model.into_typed().and_then(|m| m.into_decluttered()),
        }
        .map_err(|e| analysis_error(&model, &batch_axes, &format!("{e:#}")))?;
        let (inputs, outputs) = io_specs(&typed)?;
        let (plan, cpu_plan) = prepare(typed, cuda, &threads, options, &shown)?;
        tracing::info!(
            "tract on {:?}: {} chunk(s) of batch {}, {} side by side, {} thread(s) each",
            options.device,
            threads.chunks,
            threads.chunk_batch,
            threads.workers,
            threads.intra
        );
        let returned = match &cpu_plan {
            Some(cpu) => cpu.kept.iter().map(|&i| outputs[i].clone()).collect(),
            None => outputs.clone(),
        };
        let mut backend = TractBackend {
            plan,
            cpu_plan,
            returned,
            inputs,
            outputs,
            device: options.device,
            threads,
            batch: options.batch,
            batch_axes,
        };
        if let Some(n) = options.batch {
            backend.show_asked_batch(n);
        }
        Ok(backend)
    }

    /// Makes the specs show the batch the caller asked for, `n`, not the chunk size.
    fn show_asked_batch(&mut self, n: usize) {
        let threads = self.threads;
        for spec in self
            .inputs
            .iter_mut()
            .chain(self.outputs.iter_mut())
            .chain(self.returned.iter_mut())
        {
            if threads.chunks > 1
                && spec.dims.first() == Some(&Dim::Fixed(threads.chunk_batch as i64))
            {
                spec.dims[0] = Dim::Fixed(n as i64);
            }
        }
    }
}

/// How `options` spends the threads on `model` (shape overrides applied): only a dynamic batch
/// on axis 0 can be split into chunks (inputs with no batch axis go whole to every chunk), a
/// fixed one, or one on another axis, runs as the model says.
fn thread_plan(model: &OnnxModel, options: &TractOptions, axes: &BatchAxes) -> ThreadPlan {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batch_is_dynamic = axes.all_on_axis_0()
        && model_inputs(model)
            .iter()
            .all(|i| match axes.axis(&i.name) {
                Ok(Some(_)) => !matches!(
                    i.dims.as_deref().and_then(|d| d.first()),
                    Some(Dim::Fixed(_))
                ),
                Ok(None) => true,
                Err(_) => false,
            })
        && model_inputs(model)
            .iter()
            .any(|i| matches!(axes.axis(&i.name), Ok(Some(_))));
    let splittable = options.batch.filter(|_| batch_is_dynamic);
    match options.device {
        Device::Cpu => ThreadPlan::new(
            options.threads.unwrap_or(cores),
            splittable,
            runs_per_sample(model),
        ),
        Device::Cuda => ThreadPlan::new(1, None, false),
    }
}

/// The I/O specs of an analysed model: its inputs, then its outputs (named by their outlet
/// labels where they have one).
fn io_specs(typed: &TypedModel) -> Result<(Vec<IoSpec>, Vec<IoSpec>)> {
    let input_names: Vec<String> = typed
        .inputs
        .iter()
        .map(|o| typed.node(o.node).name.clone())
        .collect();
    let output_names: Vec<String> = typed
        .outputs
        .iter()
        .map(|o| {
            typed
                .outlet_label(*o)
                .map(String::from)
                .unwrap_or_else(|| typed.node(o.node).name.clone())
        })
        .collect();
    let inputs = input_names
        .iter()
        .enumerate()
        .map(|(i, n)| spec_of(n, typed.input_fact(i)?))
        .collect::<Result<Vec<_>>>()?;
    let outputs = output_names
        .iter()
        .enumerate()
        .map(|(i, n)| spec_of(n, typed.output_fact(i)?))
        .collect::<Result<Vec<_>>>()?;
    Ok((inputs, outputs))
}

/// The runnable plan of `typed`: on the CPU (`cuda` is `None`) with its node-by-node twin for
/// visits, else on tract's CUDA runtime; `threads.intra` threads for its matrix products.
fn prepare(
    mut typed: TypedModel,
    cuda: Option<&'static dyn Runtime>,
    threads: &ThreadPlan,
    options: &TractOptions,
    shown: &str,
) -> Result<(Box<dyn Runnable>, Option<CpuPlan>)> {
    let executor = if threads.intra > 1 {
        Executor::multithread(threads.intra)
    } else {
        Executor::SingleThread
    };
    let run_options = RunOptions {
        executor: Some(executor),
        ..Default::default()
    };
    Ok(match cuda {
        None => {
            let all_outputs = typed.outputs.clone();
            let kept = match options.visit_only_from {
                Some(from) => keep_only_needed_outputs(&mut typed, from)?,
                None => (0..all_outputs.len()).collect(),
            };
            let plan = typed
                .into_runnable_with_options(&run_options)
                .map_err(|e| anyhow::anyhow!("{e:#}"))
                .with_context(|| format!("{shown}: tract cannot prepare the model"))?;
            let cpu = CpuPlan::new(plan.clone(), &all_outputs, kept);
            (Box::new(plan), Some(cpu))
        }
        Some(rt) => (
            rt.prepare_with_options(typed, &run_options)
                .map_err(|e| anyhow::anyhow!("{e:#}"))
                .with_context(|| format!("{shown}: tract cannot prepare the model for CUDA"))?,
            None,
        ),
    })
}

impl Backend for TractBackend {
    fn name(&self) -> String {
        match self.device {
            Device::Cpu => format!(
                "tract-cpu ({} thread{})",
                self.threads.threads(),
                if self.threads.threads() == 1 { "" } else { "s" }
            ),
            Device::Cuda => "tract-cuda".into(),
        }
    }

    fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    fn batch_axes(&self) -> BatchAxes {
        self.batch_axes.clone()
    }

    /// A batch cut into pieces runs only the pieces its samples fill.
    fn runs_short_batch(&self, n: usize) -> bool {
        self.threads.chunks > 1 && self.batch.is_some_and(|b| (1..=b).contains(&n))
    }

    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
        check_input_count(&self.inputs, inputs)?;
        let Some(n) = self.batch.filter(|_| self.threads.chunks > 1) else {
            let start = Instant::now();
            let outputs = to_host(&run_plan(self.plan.as_ref(), inputs)?, &self.returned)?;
            return Ok(RunOutput {
                outputs,
                elapsed: start.elapsed(),
            });
        };
        let (given, chunks) = self.chunk_inputs(inputs, n)?;
        let start = Instant::now();
        let plan = self.plan.as_ref();
        let specs = &self.returned;
        let results: Vec<Vec<HostTensor>> = on_workers(self.threads.workers, &chunks, |_, c| {
            to_host(&run_plan(plan, c)?, specs)
        })?;
        let elapsed = start.elapsed();
        let step = self.threads.chunk_batch;
        // Each output's pieces, moved out of the per-piece results (not copied).
        let mut pieces: Vec<Vec<HostTensor>> = specs
            .iter()
            .map(|_| Vec::with_capacity(results.len()))
            .collect();
        for result in results {
            for (i, t) in result.into_iter().enumerate() {
                pieces[i].push(t);
            }
        }
        let mut outputs = Vec::with_capacity(specs.len());
        for (spec, parts) in specs.iter().zip(pieces) {
            if parts.iter().any(|p| p.shape.first() != Some(&step)) {
                bail!("{}", no_batch_axis(&spec.name, step));
            }
            outputs.push(truncate(concat(parts)?, given)?);
        }
        Ok(RunOutput { outputs, elapsed })
    }

    /// Visits each chunk's outputs inside the worker that ran it, so nothing is copied or
    /// concatenated and the visits run side by side like the chunks.
    fn run_visit(&mut self, inputs: &[HostTensor], visit: &OutputVisitor) -> Result<Duration> {
        check_input_count(&self.inputs, inputs)?;
        let plan = self.plan.as_ref();
        let cpu = self.cpu_plan.as_ref();
        let specs = &self.outputs;
        // On the CPU each output is visited as soon as its node has run, while it is still in
        // this core's cache; on CUDA after the run.
        let run_and_visit = |piece: &[HostTensor], chunk: Option<(usize, usize)>| match cpu {
            Some(cpu) => cpu.run_visit(piece, specs, chunk, visit),
            None => visit_f32(&run_plan(plan, piece)?, specs, chunk, visit),
        };
        let Some(n) = self.batch.filter(|_| self.threads.chunks > 1) else {
            let start = Instant::now();
            run_and_visit(inputs, None)?;
            return Ok(start.elapsed());
        };
        let (given, chunks) = self.chunk_inputs(inputs, n)?;
        let start = Instant::now();
        let step = self.threads.chunk_batch;
        on_workers(self.threads.workers, &chunks, |c, chunk| {
            // The last chunk may be padded past the batch; its padding is not visited.
            let real = (given - c * step).min(step);
            run_and_visit(chunk, Some((step, real)))
        })?;
        Ok(start.elapsed())
    }
}

impl TractBackend {
    /// Splits a batch into the chunks the worker pool runs (the last one padded): the batch
    /// of `prepared` samples the backend was prepared for, or fewer, which fill fewer chunks.
    /// Returns the number of samples given and the chunks.
    fn chunk_inputs(
        &self,
        inputs: &[HostTensor],
        prepared: usize,
    ) -> Result<(usize, Vec<Vec<HostTensor>>)> {
        // Chunks are only planned where every batch axis is axis 0 (see `thread_plan`); an input
        // with no batch axis goes whole to every chunk.
        let batched: Vec<bool> = inputs
            .iter()
            .map(|t| Ok(self.batch_axes.axis(&t.name)?.is_some() && !t.shape.is_empty()))
            .collect::<Result<_>>()?;
        let given = inputs
            .iter()
            .zip(&batched)
            .find(|(_, b)| **b)
            .and_then(|(t, _)| t.shape.first().copied())
            .unwrap_or(prepared);
        for t in inputs
            .iter()
            .zip(&batched)
            .filter(|(_, b)| **b)
            .map(|(t, _)| t)
        {
            if t.shape.first() != Some(&given) || !(1..=prepared).contains(&given) {
                bail!(
                    "input '{}' has shape {:?}; this backend was prepared for batches of 1 to {prepared}, the same for every input",
                    t.name,
                    t.shape
                );
            }
        }
        let step = self.threads.chunk_batch;
        let chunks = (0..given)
            .step_by(step)
            .map(|s| {
                inputs
                    .iter()
                    .zip(&batched)
                    .map(|(t, &b)| slice_padded_on(t, b.then_some(0), s, step))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<_>>()?;
        Ok((given, chunks))
    }
}

/// The first output of `model` on tract for one input `input` of `shape` filled with
/// `test_models::deterministic_weights(seed, …)`: for tests of rewrites that must keep what a
/// model computes.
#[cfg(test)]
pub(crate) fn first_output(model: &OnnxModel, input: &str, shape: &[usize], seed: u64) -> Vec<f64> {
    let mut b = TractBackend::load(
        model,
        &TractOptions {
            batch: Some(shape[0]),
            ..Default::default()
        },
    )
    .unwrap();
    let n = shape.iter().product();
    let x = HostTensor::new(
        input,
        shape.to_vec(),
        crate::tensor::TensorData::F32(crate::onnx::test_models::deterministic_weights(
            seed, n, 1.0,
        )),
    )
    .unwrap();
    b.run(&[x]).unwrap().outputs.remove(0).data.to_f64()
}

#[cfg(test)]
mod tests;
