//! The `--backend`, `--device` and `--threads` flags shared by the commands that run one model.

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
    /// The options that open this backend at a fixed batch size.
    pub fn options(&self, batch: usize) -> BackendOptions {
        BackendOptions {
            kind: self.backend,
            device: self.device,
            threads: self.threads,
            input_shapes: vec![],
            batch: Some(batch),
        }
    }
}
