//! `trtkit inspect MODEL.onnx|ENGINE`: the summary of an ONNX model, or of an engine file
//! (recognised by its magic, whatever its name), rendered by [`crate::report::inspect`].

use crate::backend::mac_count::model_macs;
use crate::cli::args::output::JsonArgs;
use crate::onnx::shape::ShapeRequest;
use crate::onnx::summary::summarize;
use crate::onnx::OnnxModel;
use crate::report::inspect::{render, render_engine};
use crate::trt::engine_file::file_flavour;
use crate::trt::inspect::inspect_engine;
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

/// Runs `inspect`.
pub fn run(args: InspectArgs) -> anyhow::Result<()> {
    if args.model.is_file() && file_flavour(&args.model)?.is_some() {
        let found = inspect_engine(&args.model, args.layers, args.tensorrt_dir.as_deref())?;
        return args.format.print(&found, || render_engine(&found));
    }
    let model = OnnxModel::load(&args.model)?;
    let summary =
        summarize(&model, args.layers).with_macs(model_macs(&model, &ShapeRequest::default()));
    args.format.print(&summary, || render(&summary))
}
