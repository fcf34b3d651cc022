//! The tract backend: pure-Rust ONNX inference, the reference every other backend is
//! compared against. Always available on the CPU, where it uses the cores two ways: a fixed
//! batch is split into chunks run side by side, and each chunk's matrix products run on
//! tract-linalg's multithreaded executor. `Device::Cuda` runs tract's CUDA runtime instead.

use super::{Backend, Device, OutputVisitor, RunOutput};
use crate::data::batch_axis::{concat, slice_padded, truncate};
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::{model_inputs, Batch, FixBatch, InputShapes, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::setting::{fix_with, Setting};
use crate::tensor::Dim;
use crate::tensor::{check_input_count, ElemType, HostTensor, IoSpec, TensorData};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tract_linalg::multithread::Executor;
use tract_onnx::prelude::*;

/// How to prepare a model for tract.
#[derive(Clone, Debug, Default)]
pub struct TractOptions {
    /// `--input-shape` overrides, applied before anything else.
    pub input_shapes: ShapeRequest,
    /// Fix the batch axis to this size (a dynamic model then runs as a static one).
    pub batch: Option<usize>,
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
        .with_context(|| format!("{}: tract cannot load the model", model.path.display()))
}

/// How the CPU threads are spent: the batch is cut into `chunks` pieces of `chunk_batch`
/// samples, `workers` of them run side by side, each with `intra` threads for its matrix
/// products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadPlan {
    /// Pieces the batch is split into.
    pub chunks: usize,
    /// Samples per piece (the batch the plan is prepared for).
    pub chunk_batch: usize,
    /// Pieces run side by side.
    pub workers: usize,
    /// Threads inside each piece.
    pub intra: usize,
}

impl ThreadPlan {
    /// The split for `threads` threads and a batch of `batch` (`None`: not fixed, no split).
    ///
    /// With `per_sample` every piece is one sample, even on one thread: tract runs a
    /// convolution over a batch axis with an unfused im2col and transposes around its 1×1
    /// convolutions, so a convolutional network takes up to twice the time per sample at batch
    /// 2 that it takes at batch 1 (ResNet-50, `examples/tract_profile.rs`). Without it the
    /// batch is cut into one piece per thread.
    pub fn new(threads: usize, batch: Option<usize>, per_sample: bool) -> ThreadPlan {
        let threads = threads.max(1);
        match batch {
            Some(n) if n > 1 && (threads > 1 || per_sample) => {
                let chunk_batch = if per_sample {
                    1
                } else {
                    n.div_ceil(threads.min(n))
                };
                let chunks = n.div_ceil(chunk_batch);
                let workers = threads.min(chunks);
                ThreadPlan {
                    chunks,
                    chunk_batch,
                    workers,
                    intra: (threads / workers).max(1),
                }
            }
            _ => ThreadPlan {
                chunks: 1,
                chunk_batch: batch.unwrap_or(0),
                workers: 1,
                intra: threads,
            },
        }
    }

    /// Threads in use: the pieces side by side times the threads inside each.
    pub fn threads(&self) -> usize {
        self.workers * self.intra
    }
}

/// Whether tract runs `model` faster one sample at a time: any convolution says so (see
/// [`ThreadPlan::new`]).
fn runs_per_sample(model: &OnnxModel) -> bool {
    model
        .graph()
        .node
        .iter()
        .any(|n| matches!(n.op_type.as_str(), "Conv" | "ConvTranspose"))
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
}

/// Checks that tract's CUDA runtime can run here; the error says what is missing.
pub fn cuda_runtime() -> Result<&'static dyn Runtime> {
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

fn elem_type_of(dt: DatumType, what: &str) -> Result<ElemType> {
    Ok(match dt {
        DatumType::F32 => ElemType::F32,
        DatumType::F16 => ElemType::F16,
        DatumType::F64 => ElemType::F64,
        DatumType::I64 => ElemType::I64,
        DatumType::I32 => ElemType::I32,
        DatumType::I8 => ElemType::I8,
        DatumType::U8 => ElemType::U8,
        DatumType::Bool => ElemType::Bool,
        other => bail!("{what} has element type {other:?}, which trtkit does not carry"),
    })
}

fn spec_of(name: &str, fact: &TypedFact) -> Result<IoSpec> {
    let dims = fact
        .shape
        .iter()
        .map(|d| match d.to_i64() {
            Ok(n) => Dim::Fixed(n),
            Err(_) => Dim::Symbol(d.to_string()),
        })
        .collect();
    Ok(IoSpec {
        name: name.to_string(),
        elem_type: elem_type_of(fact.datum_type, name)?,
        dims,
    })
}

fn to_tract(t: &HostTensor) -> Result<Tensor> {
    let shape = &t.shape;
    Ok(match &t.data {
        TensorData::F32(v) => Tensor::from_shape(shape, v)?,
        TensorData::F16(v) => Tensor::from_shape(shape, v)?,
        TensorData::F64(v) => Tensor::from_shape(shape, v)?,
        TensorData::I64(v) => Tensor::from_shape(shape, v)?,
        TensorData::I32(v) => Tensor::from_shape(shape, v)?,
        TensorData::I8(v) => Tensor::from_shape(shape, v)?,
        TensorData::U8(v) => Tensor::from_shape(shape, v)?,
        TensorData::Bool(v) => Tensor::from_shape(shape, v)?,
    })
}

fn from_tract(name: &str, t: &Tensor) -> Result<HostTensor> {
    let shape = t.shape().to_vec();
    let plain = t
        .try_as_plain_ram()
        .map_err(|e| anyhow::anyhow!("output '{name}': {e}"))?;
    let data = match t.datum_type() {
        DatumType::F32 => TensorData::F32(plain.as_slice::<f32>()?.to_vec()),
        DatumType::F16 => TensorData::F16(plain.as_slice::<half::f16>()?.to_vec()),
        DatumType::F64 => TensorData::F64(plain.as_slice::<f64>()?.to_vec()),
        DatumType::I64 => TensorData::I64(plain.as_slice::<i64>()?.to_vec()),
        DatumType::I32 => TensorData::I32(plain.as_slice::<i32>()?.to_vec()),
        DatumType::I8 => TensorData::I8(plain.as_slice::<i8>()?.to_vec()),
        DatumType::U8 => TensorData::U8(plain.as_slice::<u8>()?.to_vec()),
        DatumType::Bool => TensorData::Bool(plain.as_slice::<bool>()?.to_vec()),
        other => bail!("output '{name}' has element type {other:?}, which trtkit does not carry"),
    };
    HostTensor::new(name, shape, data)
}

impl TractBackend {
    /// Prepares `model` (shape overrides, batch, parse, optimize) for running on the CPU.
    pub fn load(model: &OnnxModel, options: &TractOptions) -> Result<Self> {
        let mut model = model.clone();
        if !options.input_shapes.is_empty() {
            model = InputShapes(options.input_shapes.clone()).run(model)?.0;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Only a dynamic batch can be split into chunks: a fixed one runs as the model says.
        let batch_is_dynamic = model_inputs(&model).iter().all(|i| {
            !matches!(
                i.dims.as_deref().and_then(|d| d.first()),
                Some(Dim::Fixed(_))
            )
        });
        let splittable = options.batch.filter(|_| batch_is_dynamic);
        let threads = match options.device {
            Device::Cpu => ThreadPlan::new(
                options.threads.unwrap_or(cores),
                splittable,
                runs_per_sample(&model),
            ),
            Device::Cuda => ThreadPlan::new(1, None, false),
        };
        let cuda = match options.device {
            Device::Cuda => Some(cuda_runtime()?),
            Device::Cpu => None,
        };
        if let Some(n) = options.batch {
            let prepared = if threads.chunks > 1 {
                threads.chunk_batch
            } else {
                n
            };
            model = FixBatch(Batch::Static(prepared as i64)).run(model)?.0;
        }
        let shown = model.path.display().to_string();
        let parsed = parse(&model)?;
        // The CPU plan is optimized for tract's CPU kernels (weights packed for them); the CUDA
        // runtime needs the decluttered graph with plain constants and optimizes it itself.
        let mut typed = match cuda {
            None => parsed.model.into_optimized(),
            Some(_) => parsed.model.into_typed().and_then(|m| m.into_decluttered()),
        }
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .with_context(|| format!("{shown}: tract cannot analyse the model"))?;
        let names = |outlets: &[OutletId]| -> Vec<String> {
            outlets
                .iter()
                .map(|o| typed.node(o.node).name.clone())
                .collect()
        };
        let input_names = names(&typed.inputs);
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
        let executor = if threads.intra > 1 {
            Executor::multithread(threads.intra)
        } else {
            Executor::SingleThread
        };
        let run_options = RunOptions {
            executor: Some(executor),
            ..Default::default()
        };
        let (plan, cpu_plan): (Box<dyn Runnable>, _) = match cuda {
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
        };
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
        };
        if let Some(n) = options.batch {
            // The specs show the batch the caller asked for, not the chunk size.
            for spec in backend
                .inputs
                .iter_mut()
                .chain(backend.outputs.iter_mut())
                .chain(backend.returned.iter_mut())
            {
                if threads.chunks > 1
                    && spec.dims.first() == Some(&Dim::Fixed(threads.chunk_batch as i64))
                {
                    spec.dims[0] = Dim::Fixed(n as i64);
                }
            }
        }
        Ok(backend)
    }
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
        let given = inputs
            .first()
            .and_then(|t| t.shape.first().copied())
            .unwrap_or(prepared);
        for t in inputs {
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
                    .map(|t| slice_padded(t, s, step))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<_>>()?;
        Ok((given, chunks))
    }
}

/// Runs `f` on every chunk on `workers` plain threads side by side (chunk `i` on thread
/// `i % workers`, in order), the results in chunk order. Plain threads, not a rayon pool: a
/// rayon worker that waits inside tract's own multithreaded executor steals other chunks and
/// re-enters the executor's thread-local scope, which panics ("RefCell already borrowed").
fn on_workers<C: Sync, T: Send>(
    workers: usize,
    chunks: &[C],
    f: impl Fn(usize, &C) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let workers = workers.clamp(1, chunks.len().max(1));
    let mut done: Vec<Option<T>> = (0..chunks.len()).map(|_| None).collect();
    std::thread::scope(|s| -> Result<()> {
        let f = &f;
        let handles = (0..workers)
            .map(|w| {
                std::thread::Builder::new()
                    .name(format!("trtkit-tract-{w}"))
                    .spawn_scoped(s, move || {
                        (w..chunks.len())
                            .step_by(workers)
                            .map(|i| Ok((i, f(i, &chunks[i])?)))
                            .collect::<Result<Vec<_>>>()
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()
            .context("cannot start the tract worker threads")?;
        for h in handles {
            let results = h
                .join()
                .map_err(|_| anyhow::anyhow!("a tract worker thread panicked"))??;
            for (i, r) in results {
                done[i] = Some(r);
            }
        }
        Ok(())
    })?;
    Ok(done.into_iter().flatten().collect())
}

fn no_batch_axis(name: &str, step: usize) -> String {
    format!("output '{name}' has no batch axis of {step}: run this model single-threaded, at its own batch size")
}

/// Hands the float32 outputs of one run to `visit`. With `chunk = Some((step, real))` the run
/// was a chunk of `step` samples of which the first `real` are real; only those are visited.
fn visit_f32(
    out: &TVec<TValue>,
    specs: &[IoSpec],
    chunk: Option<(usize, usize)>,
    visit: &OutputVisitor,
) -> Result<()> {
    for (i, (t, spec)) in out.iter().zip(specs).enumerate() {
        visit_one(i, t, spec, chunk, visit)?;
    }
    Ok(())
}

/// Hands output `i` to `visit` if it is float32 (only its real samples, as [`visit_f32`]).
fn visit_one(
    i: usize,
    t: &Tensor,
    spec: &IoSpec,
    chunk: Option<(usize, usize)>,
    visit: &OutputVisitor,
) -> Result<()> {
    if t.datum_type() != DatumType::F32 {
        return Ok(());
    }
    let plain = t
        .try_as_plain_ram()
        .map_err(|e| anyhow::anyhow!("output '{}': {e}", spec.name))?;
    let values = plain.as_slice::<f32>()?;
    let values = match chunk {
        None => values,
        Some((step, real)) => {
            if t.shape().first() != Some(&step) {
                bail!("{}", no_batch_axis(&spec.name, step));
            }
            &values[..values.len() / step * real]
        }
    };
    visit(i, values)
}

/// Makes the outputs of `model` from index `from` on ordinary tensors, so that tract frees each
/// after its last reader: all but those nothing reads (they stay outputs, or they would not be
/// computed) and those the outputs before `from` do not need. Returns, in the order tract now
/// returns them, the index (among all the outputs) of each output kept.
fn keep_only_needed_outputs(model: &mut TypedModel, from: usize) -> Result<Vec<usize>> {
    let all = model.outputs.clone();
    let read = |o: &OutletId| !model.outlet_successors(*o).is_empty();
    let mut kept: Vec<usize> = (0..all.len())
        .filter(|&i| i < from || !read(&all[i]))
        .collect();
    let outlets = |kept: &[usize]| kept.iter().map(|&i| all[i]).collect::<Vec<_>>();
    let tract_err = |e: TractError| anyhow::anyhow!("{e:#}");
    model
        .select_output_outlets(&outlets(&kept))
        .map_err(tract_err)?;
    let computed: std::collections::HashSet<usize> =
        model.eval_order().map_err(tract_err)?.into_iter().collect();
    let uncomputed: Vec<usize> = (0..all.len())
        .filter(|i| !kept.contains(i) && !computed.contains(&all[*i].node))
        .collect();
    kept.extend(uncomputed);
    model
        .select_output_outlets(&outlets(&kept))
        .map_err(tract_err)?;
    Ok(kept)
}

/// A CPU plan with, for each node, the model outputs it produces, so that a run can hand each
/// output to a visitor right after its node, not after the whole run.
struct CpuPlan {
    plan: Arc<TypedRunnableModel>,
    /// `(node, [(slot, output index)])` for every node that produces a model output (visit-only
    /// ones included).
    outputs_of: HashMap<usize, Vec<(usize, usize)>>,
    /// The output index of each output the plan returns.
    kept: Vec<usize>,
}

impl CpuPlan {
    /// `outputs`: every model output, visit-only ones included; `kept`: the output index of
    /// each output `plan` returns.
    fn new(plan: Arc<TypedRunnableModel>, outputs: &[OutletId], kept: Vec<usize>) -> Self {
        let mut outputs_of: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
        for (i, o) in outputs.iter().enumerate() {
            outputs_of.entry(o.node).or_default().push((o.slot, i));
        }
        CpuPlan {
            plan,
            outputs_of,
            kept,
        }
    }

    /// Runs `inputs` node by node, visiting each float32 output as its node produces it;
    /// outputs no node evaluation produced (none are expected) are visited after the run.
    fn run_visit(
        &self,
        inputs: &[HostTensor],
        specs: &[IoSpec],
        chunk: Option<(usize, usize)>,
        visit: &OutputVisitor,
    ) -> Result<()> {
        let values: TVec<TValue> = inputs
            .iter()
            .map(|t| Ok(to_tract(t)?.into()))
            .collect::<Result<_>>()?;
        let mut visited = vec![false; specs.len()];
        let mut state = tract_onnx::tract_core::plan::SimpleState::new(&self.plan)
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let out = state
            .run_plan_with_eval(values, |ctx, op_state, node, inputs| -> Result<_> {
                let out = tract_onnx::tract_core::plan::eval(ctx, op_state, node, inputs)?;
                for &(slot, i) in self.outputs_of.get(&node.id).into_iter().flatten() {
                    visit_one(i, &out[slot], &specs[i], chunk, visit)?;
                    visited[i] = true;
                }
                Ok(out)
            })
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .context("tract inference failed")?;
        for (&i, t) in self.kept.iter().zip(out.iter()) {
            if !visited[i] {
                visit_one(i, t, &specs[i], chunk, visit)?;
                visited[i] = true;
            }
        }
        if let Some(i) = visited.iter().position(|v| !v) {
            bail!("tract did not compute output '{}'", specs[i].name);
        }
        Ok(())
    }
}

/// Runs `plan` on host tensors and returns tract's values (no copy out).
fn run_plan(plan: &dyn Runnable, inputs: &[HostTensor]) -> Result<TVec<TValue>> {
    let values: TVec<TValue> = inputs
        .iter()
        .map(|t| Ok(to_tract(t)?.into()))
        .collect::<Result<_>>()?;
    // tract-cuda can panic on storage it cannot read back; turn that into an error.
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan.run(values)))
        .map_err(|p| {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            anyhow::anyhow!("tract panicked: {msg}")
        })?
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .context("tract inference failed")?;
    Ok(out)
}

/// Copies tract's output values into host tensors named by `specs`.
fn to_host(out: &TVec<TValue>, specs: &[IoSpec]) -> Result<Vec<HostTensor>> {
    out.iter()
        .zip(specs)
        .map(|(t, spec)| from_tract(&spec.name, t))
        .collect()
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
        TensorData::F32(crate::onnx::test_models::deterministic_weights(
            seed, n, 1.0,
        )),
    )
    .unwrap();
    b.run(&[x]).unwrap().outputs.remove(0).data.to_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models;

    #[test]
    fn runs_the_two_input_model() {
        let model = OnnxModel::from_proto(test_models::two_input(None), "two.onnx");
        let mut b = TractBackend::load(
            &model,
            &TractOptions {
                batch: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(b.inputs().len(), 2);
        assert_eq!(b.inputs()[0].dims, vec![Dim::Fixed(2), Dim::Fixed(4)]);
        let a = HostTensor::new(
            "a",
            vec![2, 4],
            TensorData::F32(vec![1.0, -2.0, 3.0, -4.0, 0.5, 0.5, 0.5, 0.5]),
        )
        .unwrap();
        let bb = HostTensor::new("b", vec![2, 4], TensorData::F32(vec![1.0; 8])).unwrap();
        let out = b.run(&[a, bb]).unwrap();
        assert_eq!(out.outputs[0].name, "sum");
        assert_eq!(
            out.outputs[0].data,
            TensorData::F32(vec![2.0, 0.0, 4.0, 0.0, 1.5, 1.5, 1.5, 1.5])
        );
        assert_eq!(
            out.outputs[1].data,
            TensorData::F32(vec![1.0, -2.0, 3.0, -4.0, 0.5, 0.5, 0.5, 0.5])
        );
    }

    #[test]
    fn convolutional_batches_run_one_sample_a_piece() {
        let conv = ThreadPlan::new(16, Some(32), true);
        assert_eq!(
            (conv.chunks, conv.chunk_batch, conv.workers, conv.intra),
            (32, 1, 16, 1)
        );
        let conv_one_thread = ThreadPlan::new(1, Some(8), true);
        assert_eq!(
            (conv_one_thread.chunks, conv_one_thread.workers),
            (8, 1),
            "one thread still runs a sample at a time"
        );
        let few = ThreadPlan::new(16, Some(4), true);
        assert_eq!((few.chunks, few.workers, few.intra), (4, 4, 4));
        let dense = ThreadPlan::new(16, Some(32), false);
        assert_eq!(
            (dense.chunks, dense.chunk_batch, dense.workers),
            (16, 2, 16)
        );
        let dense_one_thread = ThreadPlan::new(1, Some(32), false);
        assert_eq!(
            (dense_one_thread.chunks, dense_one_thread.chunk_batch),
            (1, 32)
        );
        assert_eq!(ThreadPlan::new(16, None, true).chunks, 1);
    }

    /// Visits the float outputs of one run of `b` on `inputs`, each piece's values as seen.
    fn visited(b: &mut TractBackend, inputs: &[HostTensor]) -> Vec<(usize, Vec<f32>)> {
        let seen = std::sync::Mutex::new(Vec::new());
        b.run_visit(inputs, &|i, values| {
            seen.lock().unwrap().push((i, values.to_vec()));
            Ok(())
        })
        .unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort_by(|x, y| x.partial_cmp(y).unwrap());
        seen
    }

    /// Sorted values of output `i` of `run`.
    fn sorted_output(out: &RunOutput, i: usize) -> Vec<f32> {
        let TensorData::F32(mut v) = out.outputs[i].data.clone() else {
            panic!("float output expected");
        };
        v.sort_by(f32::total_cmp);
        v
    }

    /// The test classifier with its `flat` tensor exposed as output 1, after the logits.
    fn classifier_capturing_flat() -> OnnxModel {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let capture = crate::onnx::rewrite::capture::Capture {
            names: vec!["flat".into()],
        };
        capture.run(m).unwrap().0
    }

    /// A batch of 2 for the test classifier, seeded.
    fn classifier_batch_of_2(seed: u64) -> HostTensor {
        let values = test_models::deterministic_weights(seed, 1536, 1.0);
        HostTensor::new("input", vec![2, 3, 16, 16], TensorData::F32(values)).unwrap()
    }

    /// On the CPU an output is visited as soon as its node has run: the classifier's `flat`
    /// (exposed as output 1, after the logits) is visited before the logits in every piece,
    /// and each visit holds what `run` returns.
    #[test]
    fn outputs_are_visited_as_their_nodes_run() {
        let cap = classifier_capturing_flat();
        let mut b = TractBackend::load(
            &cap,
            &TractOptions {
                batch: Some(2),
                threads: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((b.threads.chunks, b.threads.workers), (2, 1));
        let x = classifier_batch_of_2(2);
        let expected = b.run(std::slice::from_ref(&x)).unwrap();
        let order = std::sync::Mutex::new(Vec::new());
        b.run_visit(std::slice::from_ref(&x), &|i, values| {
            order.lock().unwrap().push((i, values.to_vec()));
            Ok(())
        })
        .unwrap();
        let order = order.into_inner().unwrap();
        assert_eq!(
            order.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            [1, 0, 1, 0],
            "per piece: flat, then the logits"
        );
        for i in 0..2 {
            let mut got: Vec<f32> = order
                .iter()
                .filter(|(j, _)| *j == i)
                .flat_map(|(_, v)| v.iter().copied())
                .collect();
            got.sort_by(f32::total_cmp);
            assert_eq!(got, sorted_output(&expected, i));
        }
    }

    /// With the captured `flat` visit-only, a run returns the logits alone, and a visit still
    /// sees both outputs with the values the model computes.
    #[test]
    fn visit_only_outputs_are_visited_and_not_returned() {
        let cap = classifier_capturing_flat();
        let open = |visit_only_from| {
            TractBackend::load(
                &cap,
                &TractOptions {
                    batch: Some(2),
                    visit_only_from,
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let x = classifier_batch_of_2(3);
        let inputs = std::slice::from_ref(&x);
        let mut all = open(None);
        let mut only = open(Some(1));
        assert_eq!(
            only.outputs().len(),
            2,
            "outputs() still lists the visit-only one"
        );
        let returned = only.run(inputs).unwrap();
        let names: Vec<&str> = returned.outputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["logits"]);
        assert_eq!(returned.outputs[0].shape[0], 2);
        assert_eq!(
            sorted_output(&returned, 0),
            sorted_output(&all.run(inputs).unwrap(), 0)
        );
        assert_eq!(visited(&mut only, inputs), visited(&mut all, inputs));
    }

    /// Visiting a chunked run sees exactly the values `run` returns: every real sample once,
    /// none of the last chunk's padding.
    #[test]
    fn visiting_a_chunked_run_sees_the_outputs_once() {
        let model = OnnxModel::from_proto(test_models::two_input(None), "two.onnx");
        let mut b = TractBackend::load(
            &model,
            &TractOptions {
                batch: Some(5),
                threads: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            (b.threads.chunks, b.threads.chunk_batch),
            (2, 3),
            "batch 5 on 2 threads, no convolution: chunks of 3, one padded"
        );
        let values = test_models::deterministic_weights(4, 20, 1.0);
        let a = HostTensor::new("a", vec![5, 4], TensorData::F32(values)).unwrap();
        let ones = HostTensor::new("b", vec![5, 4], TensorData::F32(vec![1.0; 20])).unwrap();
        let inputs = [a, ones];
        let expected = b.run(&inputs).unwrap();
        let seen = visited(&mut b, &inputs);
        for output in 0..2 {
            let pieces: Vec<&Vec<f32>> = seen
                .iter()
                .filter(|(i, _)| *i == output)
                .map(|(_, v)| v)
                .collect();
            let mut sizes: Vec<usize> = pieces.iter().map(|v| v.len()).collect();
            sizes.sort();
            assert_eq!(
                sizes,
                vec![8, 12],
                "output {output}: 3 samples and 2 real ones"
            );
            let mut got: Vec<f32> = pieces.into_iter().flatten().copied().collect();
            got.sort_by(f32::total_cmp);
            assert_eq!(got, sorted_output(&expected, output));
        }
    }

    /// A convolutional model runs its batch one sample a piece, on one thread too, and gives
    /// the same logits as the whole batch at once.
    #[test]
    fn a_convolutional_batch_runs_per_sample_with_the_same_logits() {
        let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let open = |threads| {
            TractBackend::load(
                &model,
                &TractOptions {
                    batch: Some(3),
                    threads: Some(threads),
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let mut b = open(1);
        assert_eq!((b.threads.chunks, b.threads.chunk_batch), (3, 1));
        let x = HostTensor::new(
            "input",
            vec![3, 3, 16, 16],
            TensorData::F32(test_models::deterministic_weights(9, 3 * 768, 1.0)),
        )
        .unwrap();
        let pieces = b.run(std::slice::from_ref(&x)).unwrap();
        let seen = visited(&mut open(2), std::slice::from_ref(&x));
        assert_eq!(seen.len(), 3, "three pieces of one sample");
        assert!(seen.iter().all(|(i, v)| *i == 0 && v.len() == 10));
        let whole_model = FixBatch(Batch::Static(3)).run(model.clone()).unwrap().0;
        let mut whole = open_whole(&whole_model);
        let reference = whole.run(std::slice::from_ref(&x)).unwrap();
        let (TensorData::F32(p), TensorData::F32(r)) =
            (&pieces.outputs[0].data, &reference.outputs[0].data)
        else {
            panic!("float logits expected");
        };
        assert_eq!(pieces.outputs[0].shape, vec![3, 10]);
        for (p, r) in p.iter().zip(r) {
            assert!((p - r).abs() <= 1e-4 * r.abs().max(1.0), "{p} vs {r}");
        }
    }

    /// More threads than pieces: each piece runs on tract's multithreaded executor inside a
    /// plain worker thread; every piece runs, many times over, and agrees with one thread. (The
    /// rayon-pool workers this replaced aborted with "RefCell already borrowed" on the 16-core
    /// machine with real models; this tiny model does not reproduce that here.)
    #[test]
    fn pieces_on_multithreaded_executors_run_side_by_side() {
        let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let open = |threads| {
            TractBackend::load(
                &model,
                &TractOptions {
                    batch: Some(8),
                    threads: Some(threads),
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let mut b = open(32);
        assert_eq!(
            (b.threads.chunks, b.threads.workers, b.threads.intra),
            (8, 8, 4)
        );
        let x = HostTensor::new(
            "input",
            vec![8, 3, 16, 16],
            TensorData::F32(test_models::deterministic_weights(5, 8 * 768, 1.0)),
        )
        .unwrap();
        let one = open(1).run(std::slice::from_ref(&x)).unwrap();
        for _ in 0..30 {
            let out = b.run(std::slice::from_ref(&x)).unwrap();
            assert_eq!(out.outputs[0].shape, vec![8, 10]);
            assert_eq!(sorted_output(&out, 0), sorted_output(&one, 0));
            assert_eq!(visited(&mut b, std::slice::from_ref(&x)).len(), 8);
        }
    }

    /// A model with a fixed batch runs as one piece, whatever its convolutions.
    fn open_whole(model: &OnnxModel) -> TractBackend {
        let b = TractBackend::load(model, &TractOptions::default()).unwrap();
        assert_eq!(b.threads.chunks, 1);
        b
    }

    #[test]
    fn runs_the_classifier_at_batch_3() {
        let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let mut b = TractBackend::load(
            &model,
            &TractOptions {
                batch: Some(3),
                ..Default::default()
            },
        )
        .unwrap();
        let x = HostTensor::new(
            "input",
            vec![3, 3, 16, 16],
            TensorData::F32(test_models::deterministic_weights(9, 3 * 768, 1.0)),
        )
        .unwrap();
        let out = b.run(&[x]).unwrap();
        assert_eq!(out.outputs[0].shape, vec![3, 10]);
    }
}
