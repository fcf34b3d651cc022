//! The engine backend: a deserialized engine behind the one [`Backend`] trait, and its
//! [`GpuEnqueue`] side for the event-timed harness. One execution context per stream slot;
//! input shapes set per batch and checked against the engine's optimization profile; tensor
//! addresses bound to trtkit's device buffers; `enqueueV3` on trtkit's own stream, so the
//! harness's events bracket exactly the engine. TensorRT-RTX's runtime cache (the kernels it
//! compiles on the first run) is read from beside the engine and saved back by [`Backend::finish`].
//!
//! Everything before TensorRT is asked anything lives in `preflight` and `engine_io`, which
//! run (and are tested) on any machine; this file is the thin part that needs a GPU.

use super::{Backend, RunOutput};
use crate::cuda::device::{Gpu, Stream};
use crate::cuda::enqueue::{GpuEnqueue, IoBindings, TensorBinding};
use crate::cuda::info::{driver_info, GpuInfo};
use crate::cuda::memory::{copy_from_host, copy_to_host, DeviceBuffer};
use crate::error::{ErrorKind, TypedError};
use crate::tensor::{check_input_count, HostTensor, IoSpec};
use crate::trt::engine_builder::load;
use crate::trt::engine_io::{
    batch_outside_profile, buffer_sizes, elem_type, in_profile, input_shape_at, io_spec,
    probe_batch_range,
};
#[cfg(not(feature = "tensorrt"))]
use crate::trt::engine_runtime_cache::{runtime_cache_key, RuntimeCacheState};
use crate::trt::loader::{locate_usable, Flavour, BOUND};
use crate::trt::preflight::{
    check_built_version, deserialize_error, gpu_refusal, no_gpu, read_engine,
};
use crate::trt::profile::{InputProfile, ShapeProfile};
use crate::trt::runtime_log::{logged_errors_or, logger, take_log};
use crate::trt::{EngineObjects, EnqueueError};
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use trtx::trtx_sys::Dims64;
use trtx::{CudaEngine, Runtime, TensorIOMode};

/// Where an engine runs and where TensorRT is.
#[derive(Clone, Debug, Default)]
pub struct TrtOptions {
    /// GPU ordinal.
    pub device_id: usize,
    /// Folder holding the TensorRT libraries (`--tensorrt-dir`), else the usual search.
    pub tensorrt_dir: Option<PathBuf>,
}

/// Buffers and a stream for [`Backend::run`] on host tensors.
struct HostSlot {
    stream: Stream,
    inputs: Vec<Arc<DeviceBuffer>>,
    outputs: Vec<Arc<DeviceBuffer>>,
}

/// A TensorRT engine opened on a GPU.
pub struct TrtBackend {
    // Fields drop in order: buffers before the TensorRT objects.
    host: Option<HostSlot>,
    trt: EngineObjects,
    gpu: Gpu,
    path: PathBuf,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    /// The engine's input dims (`-1` where dynamic), in input order.
    input_dims: Vec<Vec<i64>>,
    /// The optimization profile, from the sidecar, when trtkit built the engine.
    profile: Option<ShapeProfile>,
    /// Whether the harness prepared the contexts for a batch (a host run takes context 0 back).
    prepared: bool,
    notes: Vec<String>,
}

impl TrtBackend {
    /// Opens the engine at `path` on GPU `options.device_id`: the file checks of `preflight`,
    /// TensorRT found and of the engine's version, a GPU that runs the engine's flavour, then
    /// deserialization. Every refusal is one line naming the file and what to do.
    pub fn open(path: &Path, options: &TrtOptions) -> Result<TrtBackend> {
        let shown = path.display().to_string();
        let file = read_engine(path)?;
        let libs = locate_usable(options.tensorrt_dir.as_deref()).with_context(|| {
            let message = format!("{shown}: running it needs {}", BOUND.flavour);
            TypedError::new(ErrorKind::TensorRtMissing, message)
        })?;
        if let Some(sidecar) = &file.sidecar {
            check_built_version(path, sidecar, &libs.version)?;
        }
        let driver = driver_info();
        if driver.gpus.is_empty() {
            let why = driver
                .error
                .unwrap_or_else(|| "the driver sees no GPU".into());
            return Err(TypedError::new(ErrorKind::NoGpu, no_gpu(path, &why)).into());
        }
        let info = driver
            .gpus
            .iter()
            .find(|g| g.index as usize == options.device_id)
            .cloned();
        let gpu = Gpu::open(options.device_id).with_context(|| shown.clone())?;
        let info = info.unwrap_or_else(|| GpuInfo {
            index: options.device_id as i32,
            name: gpu.name().to_string(),
            memory_bytes: 0,
            compute_capability: "?".into(),
            uuid: gpu.uuid(),
        });
        load(&libs)?;
        gpu.bind()?;
        let (logger, _) = logger()?;
        let mut runtime = Runtime::new(logger)
            .map_err(|e| anyhow!("{shown}: cannot create the {} runtime: {e}", BOUND.flavour))?;
        let engine = runtime
            .deserialize_cuda_engine(&file.bytes)
            .map_err(|e| deserialize_error(path, &info, &libs.version, &logged_errors_or(e)))?;
        if let Some(refusal) = gpu_refusal(path, &info, None) {
            tracing::warn!("{refusal} — but it deserialized, so trtkit goes on");
        }
        let (inputs, outputs, input_dims) = engine_io(&engine, &shown)?;
        #[cfg(not(feature = "tensorrt"))]
        let mut engine = engine;
        #[cfg(not(feature = "tensorrt"))]
        let cache = {
            let key = runtime_cache_key(&file.sha256, &libs.version, &info, driver.driver_version);
            RuntimeCacheState::open(&mut engine, path, key)?
        };
        #[cfg(not(feature = "tensorrt"))]
        let notes = vec![cache.opening_note()];
        #[cfg(feature = "tensorrt")]
        let notes = vec![];
        Ok(TrtBackend {
            host: None,
            trt: EngineObjects::new(
                runtime,
                engine,
                #[cfg(not(feature = "tensorrt"))]
                cache,
            ),
            gpu,
            path: path.to_path_buf(),
            inputs,
            outputs,
            input_dims,
            profile: file.sidecar.map(|s| s.key.profile),
            prepared: false,
            notes,
        })
    }

    /// Makes sure `n` execution contexts exist.
    fn ensure_contexts(&mut self, n: usize) -> Result<()> {
        self.gpu.bind()?;
        while self.trt.contexts.len() < n {
            #[cfg(not(feature = "tensorrt"))]
            let ctx = self
                .trt
                .engine
                .create_execution_context_with_config(self.trt.cache.config.clone());
            #[cfg(feature = "tensorrt")]
            let ctx = self.trt.engine.create_execution_context();
            let ctx = ctx.map_err(|e| {
                anyhow!(
                    "{}: cannot create an execution context: {}",
                    self.path.display(),
                    logged_errors_or(e)
                )
            })?;
            self.trt.contexts.push(ctx);
        }
        Ok(())
    }

    /// Sets the input shapes of context `slot`; a shape outside the optimization profile is
    /// refused with the profile's bounds (from the sidecar, else probed through TensorRT).
    fn set_shapes(&mut self, slot: usize, shapes: &[Vec<i64>]) -> Result<()> {
        let shown = self.path.display().to_string();
        for (i, shape) in shapes.iter().enumerate() {
            let name = self.inputs[i].name.clone();
            let batch = shape.first().copied().unwrap_or(1).max(0) as usize;
            let known = self
                .profile
                .as_ref()
                .and_then(|p| p.inputs.iter().find(|x| x.name == name).cloned());
            if let Some(p) = &known {
                if !in_profile(shape, p) {
                    let message = batch_outside_profile(&shown, &name, batch, Some(p));
                    return Err(TypedError::new(ErrorKind::BatchOutsideProfile, message).into());
                }
            }
            let ctx = &mut self.trt.contexts[slot];
            if ctx
                .set_input_shape(&name, &Dims64::from_slice(shape))
                .is_err()
            {
                let probed = known.or_else(|| self.probe_profile(slot, i));
                let message = batch_outside_profile(&shown, &name, batch, probed.as_ref());
                return Err(TypedError::new(ErrorKind::BatchOutsideProfile, message).into());
            }
        }
        Ok(())
    }

    /// The batch range input `i` accepts, found through `setInputShape` (engines without a
    /// sidecar); its other axes are the engine's fixed dims. The opt shape cannot be probed and
    /// is left at the min.
    fn probe_profile(&mut self, slot: usize, i: usize) -> Option<InputProfile> {
        let dims = self.input_dims[i].clone();
        let name = self.inputs[i].name.clone();
        let ctx = &mut self.trt.contexts[slot];
        let at = |b: usize| input_shape_at(&name, &dims, b).ok();
        let range = probe_batch_range(
            |b| at(b).is_some_and(|s| ctx.set_input_shape(&name, &Dims64::from_slice(&s)).is_ok()),
            1 << 16,
        );
        take_log();
        let (lo, hi) = range?;
        Some(InputProfile {
            name: name.clone(),
            min: at(lo)?,
            opt: at(lo)?,
            max: at(hi)?,
        })
    }

    /// The shape of every output of context `slot` once its inputs are set.
    fn output_shapes(&self, slot: usize) -> Result<Vec<Vec<i64>>> {
        let ctx = &self.trt.contexts[slot];
        self.outputs
            .iter()
            .map(|o| {
                let d = ctx
                    .tensor_shape(&o.name)
                    .map_err(|e| anyhow!("output '{}': {e}", o.name))?;
                Ok(d.d[..d.nbDims.max(0) as usize].to_vec())
            })
            .collect()
    }

    /// Binds every tensor of context `slot` to its buffer in `io` and queues the engine on
    /// `stream`.
    fn bind_and_enqueue(&mut self, slot: usize, stream: &Stream, io: &IoBindings) -> Result<()> {
        let specs = self.inputs.iter().chain(&self.outputs);
        let tensors: Vec<(&IoSpec, &TensorBinding)> =
            specs.zip(io.inputs.iter().chain(&io.outputs)).collect();
        let queued = self
            .trt
            .bind_and_enqueue(slot, self.gpu.id(), stream, &tensors);
        queued.map_err(|e| match e {
            EnqueueError::Binding(e) => e,
            EnqueueError::Enqueue(e) => anyhow!(
                "{}: {} could not queue the inference: {}",
                self.path.display(),
                BOUND.flavour,
                logged_errors_or(e)
            ),
        })
    }
}

/// The engine's inputs and outputs as I/O specs (in TensorRT's order), and the input dims.
#[allow(clippy::type_complexity)]
fn engine_io(
    engine: &CudaEngine<'static>,
    shown: &str,
) -> Result<(Vec<IoSpec>, Vec<IoSpec>, Vec<Vec<i64>>)> {
    let (mut inputs, mut outputs, mut dims) = (vec![], vec![], vec![]);
    let err = |e: trtx::Error| anyhow!("{shown}: reading the engine's I/O: {e}");
    for i in 0..engine.nb_io_tensors().map_err(err)? {
        let name = engine.io_tensor_name(i).map_err(err)?;
        let t = engine.tensor_data_type(&name).map_err(err)?;
        let Some(elem) = elem_type(t) else {
            bail!(
                "{shown}: tensor '{name}' is {}, which trtkit cannot move to or from the host",
                crate::trt::engine_io::dtype_name(t)
            );
        };
        let shape = engine.tensor_shape(&name).map_err(err)?;
        match engine.tensor_io_mode(&name).map_err(err)? {
            TensorIOMode::kINPUT => {
                if engine.is_shape_inference_io(&name).map_err(err)? {
                    bail!("{shown}: input '{name}' is a shape tensor; trtkit runs engines whose inputs are data tensors");
                }
                inputs.push(io_spec(&name, elem, &shape));
                dims.push(shape);
            }
            _ => outputs.push(io_spec(&name, elem, &shape)),
        }
    }
    Ok((inputs, outputs, dims))
}

impl GpuEnqueue for TrtBackend {
    fn prepare(&mut self, gpu: &Gpu, batch: usize, slots: usize) -> Result<Vec<Stream>> {
        if gpu.id() != self.gpu.id() {
            bail!(
                "{}: the engine was opened on GPU {}, not GPU {}",
                self.path.display(),
                self.gpu.id(),
                gpu.id()
            );
        }
        let shapes = self
            .inputs
            .iter()
            .zip(&self.input_dims)
            .map(|(s, d)| input_shape_at(&s.name, d, batch))
            .collect::<Result<Vec<_>>>()?;
        self.ensure_contexts(slots)?;
        for slot in 0..slots {
            self.set_shapes(slot, &shapes)?;
        }
        let outputs = self.output_shapes(0)?;
        for (spec, shape) in self.outputs.iter().zip(&outputs) {
            let expected = spec.concrete_shape(batch)?;
            if shape
                .iter()
                .map(|&d| d as usize)
                .ne(expected.iter().copied())
            {
                bail!(
                    "{}: output '{}' has shape {shape:?} at batch {batch}, not the {expected:?} its declared dims give; trtkit times engines whose outputs vary with the batch only",
                    self.path.display(),
                    spec.name
                );
            }
        }
        self.prepared = true;
        (0..slots).map(|_| gpu.new_stream()).collect()
    }

    fn enqueue(&mut self, slot: usize, stream: &Stream, io: &IoBindings) -> Result<()> {
        if !self.prepared {
            bail!("the engine backend was not prepared for a batch");
        }
        // The bindings' count, names, GPU and sizes are checked where they are bound.
        self.bind_and_enqueue(slot, stream, io)
    }
}

impl Backend for TrtBackend {
    fn name(&self) -> String {
        match BOUND.flavour {
            Flavour::TensorRt => "tensorrt".into(),
            Flavour::TensorRtRtx => "tensorrt-rtx".into(),
        }
    }

    fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
        check_input_count(&self.inputs, inputs)?;
        let start = Instant::now();
        for (spec, t) in self.inputs.iter().zip(inputs) {
            if spec.elem_type != t.elem_type() {
                bail!(
                    "{}: input '{}' is {} in the engine, got {}",
                    self.path.display(),
                    spec.name,
                    spec.elem_type,
                    t.elem_type()
                );
            }
        }
        let shapes: Vec<Vec<i64>> = inputs
            .iter()
            .map(|t| t.shape.iter().map(|&d| d as i64).collect())
            .collect();
        self.ensure_contexts(1)?;
        self.set_shapes(0, &shapes)?;
        let out_shapes = self.output_shapes(0)?;
        let out_bytes = buffer_sizes(&self.outputs, &out_shapes)?;
        let mut host = match self.host.take() {
            Some(h) => h,
            None => HostSlot {
                stream: self.gpu.new_stream()?,
                inputs: vec![],
                outputs: vec![],
            },
        };
        let fit = |bufs: &mut Vec<Arc<DeviceBuffer>>, sizes: &[usize], gpu: &Gpu| -> Result<()> {
            if bufs.len() != sizes.len() || bufs.iter().zip(sizes).any(|(b, &n)| b.len() != n) {
                *bufs = sizes
                    .iter()
                    .map(|&n| DeviceBuffer::new(gpu, n).map(Arc::new))
                    .collect::<Result<_>>()?;
            }
            Ok(())
        };
        let in_bytes: Vec<usize> = inputs.iter().map(HostTensor::byte_len).collect();
        fit(&mut host.inputs, &in_bytes, &self.gpu)?;
        fit(&mut host.outputs, &out_bytes, &self.gpu)?;
        for (t, buf) in inputs.iter().zip(&host.inputs) {
            copy_from_host(&t.to_le_bytes(), buf, &host.stream)?;
        }
        let binding = |spec: &IoSpec, shape: &[i64], buf: &Arc<DeviceBuffer>| {
            let shape = shape.iter().map(|&d| d as usize).collect();
            TensorBinding::new(spec.name.clone(), shape, buf.clone())
        };
        let io = IoBindings {
            inputs: self
                .inputs
                .iter()
                .zip(&shapes)
                .zip(&host.inputs)
                .map(|((s, shape), b)| binding(s, shape, b))
                .collect(),
            outputs: self
                .outputs
                .iter()
                .zip(&out_shapes)
                .zip(&host.outputs)
                .map(|((s, shape), b)| binding(s, shape, b))
                .collect(),
        };
        let ran = self
            .bind_and_enqueue(0, &host.stream, &io)
            .and_then(|()| host.stream.synchronize());
        let outputs = ran.and_then(|()| {
            self.outputs
                .iter()
                .zip(&out_shapes)
                .zip(&host.outputs)
                .map(|((spec, shape), buf)| {
                    let mut bytes = vec![0u8; buf.len()];
                    copy_to_host(buf, &mut bytes, &host.stream)?;
                    let shape = shape.iter().map(|&d| d as usize).collect();
                    HostTensor::from_le_bytes(&spec.name, shape, spec.elem_type, &bytes)
                })
                .collect::<Result<Vec<_>>>()
        });
        self.host = Some(host);
        // The harness binds its own buffers to context 0 when it prepares; forget ours.
        self.prepared = false;
        Ok(RunOutput {
            outputs: outputs?,
            elapsed: start.elapsed(),
        })
    }

    fn gpu(&mut self) -> Option<&mut dyn GpuEnqueue> {
        Some(self)
    }

    fn finish(&mut self) -> Result<Vec<String>> {
        #[cfg(not(feature = "tensorrt"))]
        {
            let saved = self.trt.cache.save()?;
            self.notes.extend(saved);
        }
        Ok(std::mem::take(&mut self.notes))
    }
}
