//! The TensorRT calls that run an engine and that the compiler cannot check, behind one safe
//! type: the objects of an opened engine, whose execution contexts are bound only to trtkit's
//! device buffers, checked against the tensors' sizes, before an inference is queued.

#[cfg(not(feature = "tensorrt"))]
use super::engine_runtime_cache::RuntimeCacheState;
use crate::cuda::device::Stream;
use crate::cuda::enqueue::TensorBinding;
use crate::tensor::IoSpec;
use anyhow::{anyhow, bail, Result};
use std::collections::BTreeSet;
use trtx::{CudaEngine, ExecutionContext, Runtime};

/// The TensorRT objects of one opened engine. Fields drop in order: contexts before the
/// engine, the engine before the runtime, as TensorRT requires.
pub(crate) struct EngineObjects {
    /// One execution context per stream slot.
    pub(crate) contexts: Vec<ExecutionContext<'static>>,
    /// The buffers each context was last bound to, kept alive until it is bound again.
    bound: Vec<Vec<TensorBinding>>,
    /// TensorRT-RTX's runtime cache for this engine.
    #[cfg(not(feature = "tensorrt"))]
    pub cache: RuntimeCacheState,
    /// The deserialized engine.
    pub engine: CudaEngine<'static>,
    /// The runtime that deserialized it.
    _runtime: Runtime<'static>,
}

// SAFETY: every TensorRT object here (runtime, engine, contexts, runtime config and cache) is
// owned by this value and reached only through `&mut self` or `&self` methods that TensorRT
// documents as thread-safe to call from one thread at a time; the `Rc` inside the contexts is
// shared only among the contexts and the cache state of this same value, so moving the whole
// value to another thread moves every clone with it.
unsafe impl Send for EngineObjects {}

/// Why an inference could not be queued.
pub(crate) enum EnqueueError {
    /// The buffers do not fit the context's tensors, or TensorRT refused an address.
    Binding(anyhow::Error),
    /// TensorRT refused to queue the inference.
    Enqueue(trtx::Error),
}

impl EngineObjects {
    /// The objects of `engine`, deserialized by `runtime`, with no context yet.
    pub fn new(
        runtime: Runtime<'static>,
        engine: CudaEngine<'static>,
        #[cfg(not(feature = "tensorrt"))] cache: RuntimeCacheState,
    ) -> Self {
        EngineObjects {
            contexts: vec![],
            bound: vec![],
            #[cfg(not(feature = "tensorrt"))]
            cache,
            engine,
            _runtime: runtime,
        }
    }

    /// Checks that `tensors` name every I/O tensor of the engine once, each with a buffer on
    /// GPU `gpu_id` that holds the tensor at the shapes set on context `slot`.
    fn check(
        &self,
        slot: usize,
        gpu_id: usize,
        tensors: &[(&IoSpec, &TensorBinding)],
    ) -> Result<()> {
        let Some(ctx) = self.contexts.get(slot) else {
            bail!("execution context {slot} does not exist");
        };
        let count = self.engine.nb_io_tensors().map_err(|e| anyhow!("{e}"))?;
        let names: BTreeSet<&str> = tensors.iter().map(|(s, _)| s.name.as_str()).collect();
        if names.len() != tensors.len() || tensors.len() != count.max(0) as usize {
            bail!(
                "{} buffers bound for the engine's {count} tensors",
                tensors.len()
            );
        }
        for (spec, b) in tensors {
            if b.name != spec.name {
                bail!("buffer '{}' bound to tensor '{}'", b.name, spec.name);
            }
            if b.buffer().device_id() != gpu_id {
                bail!(
                    "tensor '{}': its buffer is on GPU {}, the engine on GPU {gpu_id}",
                    b.name,
                    b.buffer().device_id()
                );
            }
            let dims = ctx
                .tensor_shape(&spec.name)
                .map_err(|e| anyhow!("tensor '{}': {e}", spec.name))?;
            let dims = &dims.d[..dims.nbDims.max(0) as usize];
            if dims.iter().any(|&d| d < 0) {
                bail!("tensor '{}' has no shape yet ({dims:?})", spec.name);
            }
            let need = dims.iter().product::<i64>() as usize * spec.elem_type.size();
            if b.bytes() < need {
                bail!(
                    "tensor '{}': a {}-byte buffer for {need} bytes",
                    b.name,
                    b.bytes()
                );
            }
        }
        Ok(())
    }

    /// Binds every tensor of context `slot` to its buffer in `tensors` (checked first: each
    /// of the engine's tensors once, on GPU `gpu_id`, large enough at the context's shapes) and
    /// queues the engine on `stream`, a stream of that GPU. The buffers stay alive at least
    /// until the context is bound again.
    pub(crate) fn bind_and_enqueue(
        &mut self,
        slot: usize,
        gpu_id: usize,
        stream: &Stream,
        tensors: &[(&IoSpec, &TensorBinding)],
    ) -> Result<(), EnqueueError> {
        self.check(slot, gpu_id, tensors)
            .map_err(EnqueueError::Binding)?;
        let ctx = &mut self.contexts[slot];
        for (_, b) in tensors {
            let address = b.buffer().device_ptr() as *mut std::ffi::c_void;
            // SAFETY: `address` is the start of `b`'s live device allocation on this GPU, at
            // least as large as the tensor at the shapes set on `ctx` (checked above); a clone
            // of `b` is kept below until the context is bound again, and freeing device memory
            // waits for the work queued on it.
            unsafe { ctx.set_tensor_address(&b.name, address) }
                .map_err(|e| EnqueueError::Binding(anyhow!("tensor '{}': {e}", b.name)))?;
        }
        if self.bound.len() <= slot {
            self.bound.resize(slot + 1, vec![]);
        }
        self.bound[slot] = tensors.iter().map(|(_, b)| (*b).clone()).collect();
        // SAFETY: `stream` is a live stream (borrowed for the call, and TensorRT keeps no
        // reference to it past the queued work, which the stream's owner waits for), and every
        // I/O tensor of `ctx` was bound above to memory that outlives the queued work.
        unsafe { ctx.enqueue_v3(stream.raw() as *mut std::ffi::c_void) }
            .map_err(EnqueueError::Enqueue)
    }
}
