//! The backend group (`--backend`, `--device`, `--threads`) of every command that runs one
//! model, the per-side overrides `compare` builds from the same group, and the engine group
//! (`--device-id`, `--tensorrt-dir`) of the commands that run TensorRT engines.

use super::ort_cuda::OrtCudaArgs;
use crate::backend::select::{
    default_calibration_kind, default_kind, BackendKind, BackendOptions, Fp16Compute,
    TransformerFusionPolicy,
};
use crate::backend::Device;
use clap::Args;
use std::path::PathBuf;

/// Which backend runs the model, where, and on how many CPU threads.
#[derive(Clone, Debug, Args)]
pub struct BackendArgs {
    /// Backend that runs an ONNX model (default: ONNX Runtime where it is installed, else tract;
    /// calibration runs on tract on the CPU; on cuda, ONNX Runtime's CUDA provider where it is
    /// installed, else tract's CUDA runtime).
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Where the backend runs: cpu, or cuda (an NVIDIA GPU).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// CPU threads for the model on a CPU backend (default: every core; where an image loader
    /// runs beside the model, as `validate` and `calibrate` do, trtkit measures the first
    /// batches and gives a loader-bound model fewer).
    #[arg(long)]
    pub threads: Option<usize>,
    /// ONNX Runtime's CUDA provider: layout and cuDNN settings.
    #[command(flatten)]
    pub ort_cuda: OrtCudaArgs,
    /// How ONNX Runtime's CPU build and tract compute a float16 model: emulate (the default)
    /// rounds every float16 tensor to float16 as FP16 hardware holds it (overflow to inf
    /// included); backend runs it as they do, widened to float32 (ONNX Runtime's CUDA provider
    /// computes FP16 itself either way).
    #[arg(long, value_enum, value_name = "HOW", default_value = "emulate")]
    pub(crate) fp16_compute: Fp16Compute,
    /// Whether ONNX Runtime (CPU and CUDA) runs exported transformer encoders with its fused
    /// attention and LayerNorm operators: on (the default) rewrites the attention blocks and
    /// residual LayerNorms it recognises before the session opens; off runs the graph as the
    /// file has it. TensorRT engines are built from the file as it is either way.
    #[arg(long, value_enum, value_name = "ON|OFF", default_value = "on")]
    pub transformer_fusion: TransformerFusionPolicy,
}

impl BackendArgs {
    /// The options that open this backend (at a fixed batch size, if given).
    pub fn options(&self, batch: Option<usize>) -> BackendOptions {
        self.options_with_default(batch, default_kind)
    }

    /// [`BackendArgs::options`] for a calibration run, whose default backend differs on the CPU
    /// (see [`default_calibration_kind`]).
    pub(crate) fn calibration_options(&self, batch: Option<usize>) -> BackendOptions {
        self.options_with_default(batch, default_calibration_kind)
    }

    fn options_with_default(
        &self,
        batch: Option<usize>,
        default: fn(Device) -> BackendKind,
    ) -> BackendOptions {
        BackendOptions {
            kind: self.backend.unwrap_or_else(|| default(self.device)),
            device: self.device,
            threads: self.threads,
            spinning: None,
            input_shapes: Default::default(),
            batch,
            batch_axes: Default::default(),
            device_id: None,
            tensorrt_dir: None,
            cuda_tuning: self.ort_cuda.tuning(),
            kind_is_default: self.backend.is_none(),
            fp16_compute: self.fp16_compute,
            transformer_fusion: self.transformer_fusion,
            op_profile: false,
        }
    }
}

/// Where a TensorRT engine runs and where TensorRT is (`run`, `validate`, `compare`).
#[derive(Clone, Debug, Default, Args)]
pub struct EngineArgs {
    /// GPU that runs a TensorRT engine or a GPU backend (default: GPU 0).
    #[arg(long, value_name = "N")]
    pub device_id: Option<usize>,
    /// Folder holding the TensorRT libraries, for engines (default: TRTKIT_TENSORRT_DIR, the
    /// library path, then python3's tensorrt_rtx_libs package).
    #[arg(long, value_name = "DIR")]
    pub tensorrt_dir: Option<PathBuf>,
}

impl EngineArgs {
    /// `options` with this group's GPU and TensorRT folder.
    pub fn apply(&self, options: BackendOptions) -> BackendOptions {
        BackendOptions {
            device_id: self.device_id,
            tensorrt_dir: self.tensorrt_dir.clone(),
            ..options
        }
    }
}

/// Declares the overrides of the backend group for one side of `compare`: the same three
/// settings, each flag prefixed with the side's letter, each falling back to the shared flag.
macro_rules! side_backend_args {
    ($name:ident, $side:literal, $backend:literal, $device:literal, $threads:literal) => {
        #[doc = concat!("The backend group's overrides for side ", $side, ".")]
        #[derive(Clone, Debug, Default, Args)]
        pub struct $name {
            #[doc = concat!("Backend for ", $side, " (overrides --backend).")]
            #[arg(long = $backend, id = $backend, value_enum, value_name = "BACKEND", help = concat!("Backend for ", $side, " (overrides --backend)"))]
            pub backend: Option<BackendKind>,
            #[doc = concat!("Device for ", $side, " (overrides --device).")]
            #[arg(long = $device, id = $device, value_enum, value_name = "DEVICE", help = concat!("Device for ", $side, " (overrides --device)"))]
            pub device: Option<Device>,
            #[doc = concat!("CPU threads for ", $side, " (overrides --threads).")]
            #[arg(long = $threads, id = $threads, value_name = "N", help = concat!("CPU threads for ", $side, " (overrides --threads)"))]
            pub threads: Option<usize>,
        }

        impl $name {
            /// The shared group with this side's overrides applied.
            pub(crate) fn with_defaults_from(&self, shared: &BackendArgs) -> BackendArgs {
                BackendArgs {
                    backend: self.backend.or(shared.backend),
                    device: self.device.unwrap_or(shared.device),
                    threads: self.threads.or(shared.threads),
                    ort_cuda: shared.ort_cuda.clone(),
                    fp16_compute: shared.fp16_compute,
                    transformer_fusion: shared.transformer_fusion,
                }
            }
        }
    };
}

side_backend_args!(SideABackendArgs, "A", "a-backend", "a-device", "a-threads");
side_backend_args!(SideBBackendArgs, "B", "b-backend", "b-device", "b-threads");
