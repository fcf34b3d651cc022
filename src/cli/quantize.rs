//! `trtkit quantize MODEL --int8 --calibration-cache FILE -o OUT.onnx` and
//! `trtkit quantize MODEL --fp16 -o OUT.onnx`: flags into a [`QuantizeConfig`], and the line
//! that says what was written.

use crate::cli::args::output::JsonArgs;
use crate::cli::UsageError;
use crate::onnx::rewrite::fp16::{Fp16Options, DEFAULT_KEEP_FP32};
use crate::trt::precision::{quantize, QuantizeConfig, QuantizeReport, Rewrite};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Flags of `quantize`.
#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// INT8: insert QuantizeLinear/DequantizeLinear with the scales of --calibration-cache.
    #[arg(long, conflicts_with = "fp16", requires = "calibration_cache")]
    pub int8: bool,
    /// FP16: convert weights and computation to float16.
    #[arg(long)]
    pub fp16: bool,
    /// Calibration cache written by `trtkit calibrate` (or TensorRT) for --int8.
    #[arg(long, value_name = "FILE")]
    pub calibration_cache: Option<PathBuf>,
    /// Where to write the rewritten model.
    #[arg(short, long, value_name = "OUT.onnx")]
    pub output: PathBuf,
    /// With --fp16: graph inputs and outputs in float16 too (default: float32 with Casts).
    #[arg(long, requires = "fp16")]
    pub fp16_io: bool,
    /// With --fp16: ops kept in float32, comma-separated (replaces the default list; give
    /// `none` for none). Default: the ops that overflow or lose precision in float16.
    #[arg(long, value_delimiter = ',', requires = "fp16", value_name = "OPS")]
    pub keep_fp32: Option<Vec<String>>,
    /// Skip loading the result in the reference backend (tract) as a check.
    #[arg(long)]
    pub no_check: bool,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// The rewrite these flags describe; every flag check of `quantize` is here.
pub fn config(args: &QuantizeArgs) -> Result<QuantizeConfig> {
    let rewrite = match (args.int8, args.fp16, &args.calibration_cache) {
        (true, _, Some(cache)) => Rewrite::Int8 {
            cache: cache.clone(),
        },
        (true, _, None) => {
            return Err(UsageError("--int8 needs --calibration-cache FILE".into()).into())
        }
        (false, true, _) => Rewrite::Fp16(Fp16Options {
            keep_fp32: keep_fp32_list(args.keep_fp32.as_deref()),
            fp16_io: args.fp16_io,
        }),
        (false, false, _) => return Err(UsageError("give one of --int8 or --fp16".into()).into()),
    };
    Ok(QuantizeConfig {
        model: args.model.clone(),
        rewrite,
        output: args.output.clone(),
        check: !args.no_check,
    })
}

/// Runs `quantize`.
pub fn run(args: QuantizeArgs) -> Result<()> {
    let report = quantize(&config(&args)?)?;
    args.format.print(&report, || render(&report))
}

/// The line that says what was written.
pub fn render(report: &QuantizeReport) -> String {
    match &report.fp16 {
        Some(r) => format!(
            "wrote {} (fp16): {} initializers converted, {} casts, {} nodes kept in float32{}\n",
            report.output,
            r.converted_initializers,
            r.casts,
            r.kept_fp32_nodes,
            if r.clamped.is_empty() {
                String::new()
            } else {
                format!(", clamped to ±65504: {}", r.clamped.join(", "))
            }
        ),
        None => format!(
            "wrote {} (int8): {} activations and {} weights quantized\n",
            report.output,
            report.quantized_activations.unwrap_or(0),
            report.quantized_weights.unwrap_or(0)
        ),
    }
}

/// The ops `--keep-fp32` keeps in float32: the list given, none for `none`, else the defaults.
pub fn keep_fp32_list(flag: Option<&[String]>) -> Vec<String> {
    match flag {
        Some([only]) if only == "none" => vec![],
        Some(list) => list.iter().map(|s| s.trim().to_string()).collect(),
        None => DEFAULT_KEEP_FP32.iter().map(|s| s.to_string()).collect(),
    }
}
