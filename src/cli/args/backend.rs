//! The backend group (`--backend`, `--device`, `--threads`) of every command that runs one
//! model, and the per-side overrides `compare` builds from the same group.

use crate::backend::select::{BackendKind, BackendOptions};
use crate::backend::Device;
use clap::Args;

/// Which backend runs the model, where, and on how many CPU threads.
#[derive(Clone, Debug, Args)]
pub struct BackendArgs {
    /// Backend that runs an ONNX model.
    #[arg(long, value_enum, default_value = "tract")]
    pub backend: BackendKind,
    /// Where the backend runs: cpu, or cuda (tract's CUDA runtime).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// CPU threads for CPU backends (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl BackendArgs {
    /// The options that open this backend (at a fixed batch size, if given).
    pub fn options(&self, batch: Option<usize>) -> BackendOptions {
        BackendOptions {
            kind: self.backend,
            device: self.device,
            threads: self.threads,
            input_shapes: vec![],
            batch,
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
            pub fn over(&self, shared: &BackendArgs) -> BackendArgs {
                BackendArgs {
                    backend: self.backend.unwrap_or(shared.backend),
                    device: self.device.unwrap_or(shared.device),
                    threads: self.threads.or(shared.threads),
                }
            }
        }
    };
}

side_backend_args!(SideABackendArgs, "A", "a-backend", "a-device", "a-threads");
side_backend_args!(SideBBackendArgs, "B", "b-backend", "b-device", "b-threads");
