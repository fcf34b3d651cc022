//! `trtkit inspect MODEL.onnx|ENGINE`: flags into an [`InspectConfig`]; the summary of an ONNX
//! model, or of an engine file, is rendered by [`crate::report::inspect`].

use crate::cli::args::output::JsonArgs;
use crate::jobs::inspect::{inspect, InspectConfig};
use crate::report::inspect::render_report;
use crate::trt::loader::DIR_ENV;
use clap::Args;
use std::path::PathBuf;

/// Flags of `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The ONNX model or engine to summarize.
    pub model: PathBuf,
    /// Also list every node (ONNX: name, op, inputs → outputs; engine: the engine
    /// inspector's layers, where this machine's GPU can deserialize it).
    #[arg(long)]
    pub layers: bool,
    /// Folder holding the TensorRT-RTX libraries (engines with --layers).
    #[arg(long, value_name = "DIR", env = DIR_ENV)]
    pub tensorrt_dir: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// The inspection these flags describe.
pub fn config(args: &InspectArgs) -> InspectConfig {
    InspectConfig {
        path: args.model.clone(),
        layers: args.layers,
        tensorrt_dir: args.tensorrt_dir.clone(),
    }
}

/// Runs `inspect`.
pub fn run(args: InspectArgs) -> anyhow::Result<()> {
    let report = inspect(&config(&args))?;
    args.format.print(&report, || render_report(&report))
}
