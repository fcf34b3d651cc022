//! `trtkit inspect MODEL.onnx|ENGINE`: flags into an [`InspectConfig`]; the summary of an ONNX
//! model, or of an engine file, is rendered by [`crate::report::inspect`].

use crate::cli::args::output::JsonArgs;
use crate::cli::args::shapes::ShapeArgs;
use crate::cli::hints::free_axis_fix;
use crate::jobs::inspect::{inspect, InspectConfig, InspectReport};
use crate::onnx::macs::MacsUnknown;
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
    /// Input shapes and axis sizes to count the MACs at (`--dim x:3=320`).
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// The inspection these flags describe.
pub fn config(args: &InspectArgs) -> anyhow::Result<InspectConfig> {
    Ok(InspectConfig {
        path: args.model.clone(),
        layers: args.layers,
        tensorrt_dir: args.tensorrt_dir.clone(),
        shapes: args.shapes.one_shape("inspect")?,
    })
}

/// Runs `inspect`.
pub fn run(args: InspectArgs) -> anyhow::Result<()> {
    let mut report = inspect(&config(&args)?)?;
    if let InspectReport::Onnx(summary) = &mut report {
        summary.macs_fix = summary.macs_unknown.as_ref().and_then(macs_fix);
    }
    args.format.print(&report, || render_report(&report))
}

/// The flags that let the MACs be counted: the size of the free axis, or the input's shape.
fn macs_fix(why: &MacsUnknown) -> Option<String> {
    match why {
        MacsUnknown::Unfixed(axis) => {
            Some(format!("give it with {}", free_axis_fix(&axis.free_axis())))
        }
        MacsUnknown::Undeclared(input) => {
            Some(format!("give its shape with --input-shape {input}:DIMS"))
        }
        MacsUnknown::Inference(_) => None,
    }
}
