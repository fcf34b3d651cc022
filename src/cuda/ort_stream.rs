//! ONNX Runtime sessions that compute on one of trtkit's CUDA streams, over device buffers
//! trtkit owns: the one place trtkit hands ONNX Runtime a raw stream and raw device addresses.
//!
//! A [`StreamSession`] is made with its stream (ONNX Runtime's CUDA provider takes it once, as
//! `user_compute_stream`) and keeps that stream alive for as long as the session exists. Its
//! inputs and outputs are bound (I/O binding) to the addresses the timing harness hands it, and
//! [`StreamSession::enqueue`] only queues the inference: the run options turn off ONNX
//! Runtime's synchronization at the end of a run, so the call returns once the kernels are on
//! the stream and the harness's events bracket exactly those kernels.

use super::device::Stream;
use super::enqueue::TensorBinding;
use crate::tensor::ElemType;
use anyhow::{anyhow, bail, Context, Result};
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::SessionBuilder;
use ort::session::{IoBinding, RunOptions, Session};
use ort::value::{DynValueTypeMarker, Shape, TensorRefMut, ValueRefMut};
use ort::AsPointer;
use std::ffi::CString;

/// What the CUDA provider is asked for, besides the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CudaProviderSettings {
    /// The GPU (CUDA device ordinal).
    pub device_id: usize,
    /// Let the provider run convolutions in NHWC (`prefer_nhwc`): tensor-core friendly for FP16.
    pub(crate) prefer_nhwc: bool,
    /// How cuDNN picks each convolution's algorithm.
    pub(crate) conv_algo_search: ConvAlgoSearch,
    /// Let cuDNN use as much workspace as the fastest algorithm asks for
    /// (`cudnn_conv_use_max_workspace`; otherwise ONNX Runtime's 32 MiB).
    pub(crate) max_workspace: bool,
    /// Fuse convolution, bias and activation through cuDNN (`fuse_conv_bias`).
    pub(crate) fuse_conv_bias: bool,
}

/// How cuDNN picks convolution algorithms in ONNX Runtime's CUDA provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConvAlgoSearch {
    /// Time every algorithm on the first run and keep the fastest (ONNX Runtime's default).
    #[default]
    Exhaustive,
    /// cuDNN's heuristics, no timing.
    Heuristic,
    /// The default algorithm.
    Default,
}

/// A device tensor wrapped for ONNX Runtime, bound under `name`.
struct BoundValue {
    name: CString,
    value: ValueRefMut<'static, DynValueTypeMarker>,
}

/// The binding of one set of device buffers: the addresses it was made for, and the values
/// ONNX Runtime reads and writes through (kept alive while bound).
struct Bound {
    binding: IoBinding,
    values: Vec<BoundValue>,
    key: Vec<(u64, Vec<usize>)>,
    /// The bound buffers, kept alive for as long as ONNX Runtime may reach them (dropped after
    /// the binding and the values).
    _held: Vec<TensorBinding>,
}

/// Bindings a session keeps at once: the batch feed alternates two sets of buffers on one
/// session, each bound once.
const BINDINGS_KEPT: usize = 4;

/// An ONNX Runtime session on the CUDA provider whose kernels run on `stream`.
pub(crate) struct StreamSession {
    // Field order is drop order: the bindings and their values go first, then the session, and
    // the stream the session computes on last.
    bound: Vec<Bound>,
    /// The binding the next run uses (an index into `bound`).
    active: usize,
    run_options: RunOptions,
    session: Session,
    stream: Stream,
    device_id: usize,
}

fn ort_err(e: ort::Error) -> anyhow::Error {
    anyhow!("{e}")
}

/// Wraps `b`'s device memory as an ONNX Runtime tensor of `elem` (no copy).
fn device_value(
    info: &MemoryInfo<'static>,
    b: &TensorBinding,
    elem: ElemType,
) -> Result<ValueRefMut<'static, DynValueTypeMarker>> {
    let shape = Shape::new(b.shape.iter().map(|&d| d as i64));
    let need = b.shape.iter().product::<usize>() * elem.size();
    if b.bytes() < need {
        bail!(
            "tensor '{}': a {}-byte buffer for {need} bytes",
            b.name,
            b.bytes()
        );
    }
    let ptr = b.buffer().device_ptr() as usize as *mut ort::sys::c_void;
    macro_rules! wrap {
        ($t:ty) => {{
            // SAFETY: `ptr` is the address of `b`'s live device allocation, of at least `need`
            // bytes (checked above), on the GPU `info` names (`bind` checks the buffer's GPU);
            // the binding keeps a clone of `b` (and so the allocation) until it is dropped or
            // replaced, and the value never frees it.
            let v = unsafe { TensorRefMut::<$t>::from_raw(info.clone(), ptr, shape) };
            v.map_err(ort_err)?.into_dyn()
        }};
    }
    Ok(match elem {
        ElemType::F32 => wrap!(f32),
        ElemType::F16 => wrap!(half::f16),
        ElemType::F64 => wrap!(f64),
        ElemType::I64 => wrap!(i64),
        ElemType::I32 => wrap!(i32),
        ElemType::I8 => wrap!(i8),
        ElemType::U8 => wrap!(u8),
        ElemType::Bool => wrap!(bool),
    })
}

impl StreamSession {
    /// Makes a session of `model_bytes` whose CUDA provider computes on `stream`. Registering
    /// the provider must succeed (no silent fallback to the CPU).
    pub fn new(
        builder: SessionBuilder,
        model_bytes: &[u8],
        cuda: &CudaProviderSettings,
        stream: Stream,
    ) -> Result<StreamSession> {
        let provider = ort::ep::CUDA::default()
            .with_device_id(cuda.device_id as i32)
            .with_prefer_nhwc(cuda.prefer_nhwc)
            .with_conv_algorithm_search(match cuda.conv_algo_search {
                ConvAlgoSearch::Exhaustive => ort::ep::cuda::ConvAlgorithmSearch::Exhaustive,
                ConvAlgoSearch::Heuristic => ort::ep::cuda::ConvAlgorithmSearch::Heuristic,
                ConvAlgoSearch::Default => ort::ep::cuda::ConvAlgorithmSearch::Default,
            })
            .with_conv_max_workspace(cuda.max_workspace)
            .with_fuse_conv_bias(cuda.fuse_conv_bias);
        // SAFETY: the stream handle stays valid for the session's whole life: the session is
        // stored beside a clone of `stream` (which owns the CUstream), and dropped before it.
        let provider = unsafe { provider.with_compute_stream(stream.raw() as *mut ()) };
        let mut builder = builder
            .with_execution_providers([provider.build().error_on_failure()])
            .map_err(|e| anyhow!("{e}"))?;
        let session = builder.commit_from_memory(model_bytes).map_err(ort_err)?;
        let mut run_options = RunOptions::new().map_err(ort_err)?;
        run_options.disable_device_sync().map_err(ort_err)?;
        Ok(StreamSession {
            bound: vec![],
            active: 0,
            run_options,
            session,
            stream,
            device_id: cuda.device_id,
        })
    }

    /// The session, for runs on host tensors (ONNX Runtime copies in and out and waits).
    pub(crate) fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The stream the session computes on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Binds the inputs and outputs to `inputs`/`outputs` (of the given element types) for the
    /// next run; a binding to exactly those buffers made earlier is used again.
    pub(crate) fn bind(
        &mut self,
        inputs: &[(TensorBinding, ElemType)],
        outputs: &[(TensorBinding, ElemType)],
    ) -> Result<()> {
        let key: Vec<(u64, Vec<usize>)> = inputs
            .iter()
            .chain(outputs)
            .map(|(b, _)| (b.buffer().device_ptr(), b.shape.clone()))
            .collect();
        if let Some(k) = self.bound.iter().position(|b| b.key == key) {
            self.active = k;
            return Ok(());
        }
        if self.bound.len() >= BINDINGS_KEPT {
            self.bound.clear();
        }
        let info = MemoryInfo::new(
            AllocationDevice::CUDA,
            self.device_id as i32,
            AllocatorType::Device,
            MemoryType::Default,
        )
        .map_err(ort_err)?;
        if let Some((b, _)) = inputs
            .iter()
            .chain(outputs)
            .find(|(b, _)| b.buffer().device_id() != self.device_id)
        {
            bail!(
                "tensor '{}': its buffer is on GPU {}, the session on GPU {}",
                b.name,
                b.buffer().device_id(),
                self.device_id
            );
        }
        let mut binding = self.session.create_binding().map_err(ort_err)?;
        let mut values = vec![];
        for (is_input, list) in [(true, inputs), (false, outputs)] {
            for (b, elem) in list {
                let value = BoundValue {
                    name: CString::new(b.name.as_str())
                        .map_err(|_| anyhow!("tensor name '{}' holds a NUL byte", b.name))?,
                    value: device_value(&info, b, *elem).with_context(|| {
                        format!("tensor '{}' ({elem}) cannot be bound on the GPU", b.name)
                    })?,
                };
                let api = ort::api();
                let call = if is_input {
                    api.BindInput
                } else {
                    api.BindOutput
                };
                // SAFETY: the binding, the name and the value are live; ONNX Runtime keeps its
                // own reference to the value's tensor, whose memory the binding keeps alive.
                let status =
                    unsafe { call(binding.ptr_mut(), value.name.as_ptr(), value.value.ptr()) };
                // SAFETY: `status` is what the API call above returned.
                unsafe { ort::Error::result_from_status(status) }
                    .map_err(|e| anyhow!("binding '{}': {e}", b.name))?;
                values.push(value);
            }
        }
        self.active = self.bound.len();
        self.bound.push(Bound {
            binding,
            values,
            key,
            _held: inputs
                .iter()
                .chain(outputs)
                .map(|(b, _)| b.clone())
                .collect(),
        });
        Ok(())
    }

    /// Queues one inference over the bound buffers on the session's stream and returns
    /// without waiting for it.
    pub fn enqueue(&mut self) -> Result<()> {
        let Some(bound) = self.bound.get(self.active) else {
            bail!("the ONNX Runtime session was run before its buffers were bound");
        };
        debug_assert_eq!(bound.values.len(), bound.key.len());
        // SAFETY: session, run options and binding are live and belong together; RunWithBinding
        // only reads them and writes the bound output buffers.
        let status = unsafe {
            (ort::api().RunWithBinding)(
                self.session.ptr_mut(),
                self.run_options.ptr(),
                bound.binding.ptr(),
            )
        };
        // SAFETY: `status` is what the API call above returned.
        unsafe { ort::Error::result_from_status(status) }
            .map_err(|e| anyhow!("ONNX Runtime inference failed: {e}"))
    }
}
