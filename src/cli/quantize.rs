//! `trtkit quantize MODEL --int8 --calibration-cache FILE -o OUT.onnx` and
//! `trtkit quantize MODEL --fp16 -o OUT.onnx`: the precision rewrites as ONNX in, ONNX out.

use crate::backend::tract::{TractBackend, TractOptions};
use crate::calibration::cache::{check_cache_model, CalibrationTable};
use crate::cli::UsageError;
use crate::onnx::model::file_sha256;
use crate::onnx::rewrite::fp16::{Fp16, Fp16Options, Fp16Report, DEFAULT_KEEP_FP32};
use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::rewrite::plan::plan_int8;
use crate::onnx::rewrite::qdq::Qdq;
use crate::onnx::OnnxModel;
use crate::report::format::json;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
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
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `quantize` reports.
#[derive(Debug, Serialize)]
pub struct QuantizeReport {
    /// Input model.
    pub model: String,
    /// Written model.
    pub output: String,
    /// `int8` or `fp16`.
    pub precision: String,
    /// INT8: activation tensors with a Q/DQ pair.
    pub quantized_activations: Option<usize>,
    /// INT8: weights quantized per channel.
    pub quantized_weights: Option<usize>,
    /// FP16: what the rewrite did.
    pub fp16: Option<Fp16Report>,
    /// FP16: the ops kept in float32.
    pub keep_fp32: Option<Vec<String>>,
    /// Whether the result was loaded in tract as a check.
    pub checked: bool,
}

/// Runs `quantize`.
pub fn run(args: QuantizeArgs) -> Result<()> {
    if args.int8 == args.fp16 {
        return Err(UsageError("give one of --int8 or --fp16".into()).into());
    }
    let mut model = OnnxModel::load(&args.model)?;
    let shown = args.model.display().to_string();
    model.inline_external_data()?;
    let mut report = QuantizeReport {
        model: shown.clone(),
        output: args.output.display().to_string(),
        precision: if args.int8 { "int8" } else { "fp16" }.into(),
        quantized_activations: None,
        quantized_weights: None,
        fp16: None,
        keep_fp32: None,
        checked: !args.no_check,
    };
    let out = if args.int8 {
        let cache_path = args
            .calibration_cache
            .as_ref()
            .ok_or_else(|| UsageError("--int8 needs --calibration-cache FILE".into()))?;
        let table = CalibrationTable::load(cache_path)?;
        check_cache_model(cache_path, &args.model, &file_sha256(&args.model)?)?;
        let plan = plan_int8(model.graph());
        if plan.is_empty() {
            bail!("{shown}: no quantizable ops (Conv, ConvTranspose, Gemm, MatMul); nothing to quantize");
        }
        report.quantized_activations = Some(plan.activations.len());
        report.quantized_weights = Some(plan.weights.len());
        let qdq = Qdq {
            plan,
            scales: table.scales,
        };
        qdq.run(model)
            .with_context(|| format!("{shown} with {}", cache_path.display()))?
            .0
    } else {
        let keep = keep_fp32_list(args.keep_fp32.as_deref());
        let options = Fp16Options {
            keep_fp32: keep.clone(),
            fp16_io: args.fp16_io,
        };
        let (m, r) = Fp16(options).run(model).with_context(|| shown.clone())?;
        report.fp16 = match r {
            PassReport::Fp16(r) => Some(r),
            _ => None,
        };
        report.keep_fp32 = Some(keep);
        m
    };
    let out = OnnxModel::from_proto(out.proto, &args.output);
    if !args.no_check {
        TractBackend::load(
            &out,
            &TractOptions {
                batch: Some(1),
                ..Default::default()
            },
        )
        .context("the rewritten model does not load in the reference backend (use --no-check to write it anyway)")?;
    }
    out.save(&args.output)?;
    if args.json {
        print!("{}", json(&report)?);
    } else if let Some(r) = &report.fp16 {
        println!(
            "wrote {} (fp16): {} initializers converted, {} casts, {} nodes kept in float32{}",
            report.output,
            r.converted_initializers,
            r.casts,
            r.kept_fp32_nodes,
            if r.clamped.is_empty() {
                String::new()
            } else {
                format!(", clamped to ±65504: {}", r.clamped.join(", "))
            }
        );
    } else {
        println!(
            "wrote {} (int8): {} activations and {} weights quantized",
            report.output,
            report.quantized_activations.unwrap_or(0),
            report.quantized_weights.unwrap_or(0)
        );
    }
    Ok(())
}

/// The ops `--keep-fp32` keeps in float32: the list given, none for `none`, else the defaults.
pub fn keep_fp32_list(flag: Option<&[String]>) -> Vec<String> {
    match flag {
        Some([only]) if only == "none" => vec![],
        Some(list) => list.iter().map(|s| s.trim().to_string()).collect(),
        None => DEFAULT_KEEP_FP32.iter().map(|s| s.to_string()).collect(),
    }
}
