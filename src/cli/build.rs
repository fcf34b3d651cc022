//! `trtkit build MODEL.onnx [--fp16 | --int8 …] [--input-shape -1 3 224 224]`: flags into a
//! [`BuildConfig`]; the report is rendered by [`crate::report::build`].

use crate::cli::args::calibration::{AlgoArg, CalibrationArgs};
use crate::cli::args::fp16::Fp16Args;
use crate::cli::args::int8::Int8RecipeArgs;
use crate::cli::args::output::JsonArgs;
use crate::cli::args::search_result::SearchResultArgs;
use crate::cli::args::shapes::ShapeArgs;
use crate::cli::outputs::check_outputs;
use crate::cli::stdout::FirstFailure;
use crate::cli::usage;
use crate::cli::workspace::{for_model, required};
use crate::jobs::build::{build, calibration_shapes, BuildConfig, BuildObservers};
use crate::onnx::shape::{parse_named_shapes, DimValues, NamedDim, ShapeRequest};
use crate::progress::Progress;
use crate::quantize::plan::{Fp16Plan, Int8Source, PrecisionPlan};
use crate::report::build::render;
use crate::report::progress::Bar;
use crate::trt::engine_file::BuilderSettings;
use crate::trt::loader::DIR_ENV;
use crate::trt::profile::{AxisRange, BatchRange, BatchRequest, ExplicitShapes};
use crate::workspace::ENGINES_DIR;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The ONNX model (default: the workspace's, see `trtkit init`).
    pub model: Option<PathBuf>,
    /// Input shapes (`-1 3 224 224`: dynamic batch, `32 3 224 224`: static; a fixed-batch
    /// model given -1 becomes dynamic) and named axes (`--dim seq=128` fixes it,
    /// `--dim seq=16:128:512` makes it a profile range).
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// Smallest batch of a dynamic-batch engine (default 1).
    #[arg(long, value_name = "N")]
    pub(crate) min_batch: Option<i64>,
    /// Batch the engine is tuned for (default 32, within min..max).
    #[arg(long, value_name = "N")]
    pub(crate) opt_batch: Option<i64>,
    /// Largest batch of a dynamic-batch engine (default 64).
    #[arg(long, value_name = "N")]
    pub max_batch: Option<i64>,
    /// trtexec-style minimum shapes: `name:1x3x224x224[,name2:…]`.
    #[arg(long, value_name = "SHAPES")]
    pub(crate) min_shapes: Vec<String>,
    /// trtexec-style optimum shapes.
    #[arg(long, value_name = "SHAPES")]
    pub(crate) opt_shapes: Vec<String>,
    /// trtexec-style maximum shapes.
    #[arg(long, value_name = "SHAPES")]
    pub(crate) max_shapes: Vec<String>,
    /// FP16: trtkit's FP16 rewrite, then a strongly typed build.
    #[arg(long, conflicts_with = "int8")]
    pub fp16: bool,
    /// The FP16 rewrite's options.
    #[command(flatten)]
    pub(crate) fp16_options: Fp16Args,
    /// INT8: calibrate (keyed cache, reused when its key matches), insert Q/DQ, then build.
    #[arg(long)]
    pub int8: bool,
    /// INT8 calibration data: a folder of images, of .npy/.npz arrays, one such file, or
    /// `synthetic:SEED`.
    #[arg(
        long,
        value_name = "SRC",
        requires = "int8",
        conflicts_with = "calibration_cache"
    )]
    pub(crate) calib_data: Option<String>,
    /// INT8: use this calibration cache (TensorRT's text format) instead of calibrating.
    #[arg(long, value_name = "FILE", requires = "int8")]
    pub(crate) calibration_cache: Option<PathBuf>,
    /// INT8: batch size the calibration runs at (part of the cache key).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub batch_size: usize,
    /// INT8: the range algorithm.
    #[arg(long, value_enum, default_value = "entropy")]
    pub algo: AlgoArg,
    /// INT8: images, algorithm settings, cache folder, backend and preprocessing.
    #[command(flatten)]
    pub calibration: CalibrationArgs,
    /// INT8: the nodes left in float, what they compute in, the weights' ranges.
    #[command(flatten)]
    pub(crate) int8_recipe: Int8RecipeArgs,
    /// A target search's float nodes, kept in float.
    #[command(flatten)]
    pub(crate) search_result: SearchResultArgs,
    /// Builder workspace memory limit in MiB, at least 1 (default: TensorRT's).
    #[arg(long, value_name = "MiB", value_parser = workspace_mib)]
    pub workspace: Option<u64>,
    /// Builder optimization level 0–5 (default: TensorRT's, 3).
    #[arg(long, value_name = "LEVEL", value_parser = clap::value_parser!(i32).range(0..=5))]
    pub(crate) builder_optimization_level: Option<i32>,
    /// Engine file to write (default: a keyed name in --engine-dir).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Folder of keyed engines (default: the workspace's engines/, else ./engines).
    #[arg(long, value_name = "DIR")]
    pub engine_dir: Option<PathBuf>,
    /// Build even if an engine with the same key exists.
    #[arg(long)]
    pub rebuild: bool,
    /// Folder holding libtensorrt_rtx.so.1 and libtensorrt_onnxparser_rtx.so.1.
    #[arg(long, value_name = "DIR", env = DIR_ENV)]
    pub tensorrt_dir: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// The shapes a build fixes, and the named axes it makes profile ranges of: `--dim seq=128`
/// fixes the axis, `--dim seq=16:128:512` gives its range; a list is refused (one engine).
fn build_dims(shapes: &ShapeArgs) -> Result<(ShapeRequest, Vec<AxisRange>)> {
    let mut request = ShapeRequest::shapes(shapes.input_shapes()?);
    let mut axes = vec![];
    for d in shapes.dims()? {
        match d.values {
            DimValues::Sizes(sizes) if sizes.len() == 1 => request.dims.push(NamedDim {
                symbol: d.symbol,
                size: sizes[0],
            }),
            DimValues::Sizes(_) => {
                return Err(usage(format!(
                    "--dim {}: `build` makes one engine; give one size, or a range MIN:OPT:MAX for its profile",
                    d.symbol
                )))
            }
            DimValues::Range { min, opt, max } => axes.push(AxisRange {
                symbol: d.symbol,
                range: BatchRange { min, opt, max },
            }),
        }
    }
    Ok((request, axes))
}

/// The profile flags, each range checked before any work starts (a usage error naming the
/// flags): the batch range, and the shapes given per input by `--min/opt/max-shapes`. (`--dim`
/// ranges are checked as they are parsed.)
fn profile_flags(args: &BuildArgs, axes: Vec<AxisRange>) -> Result<(BatchRequest, ExplicitShapes)> {
    let batch = BatchRequest {
        min: args.min_batch,
        opt: args.opt_batch,
        max: args.max_batch,
    };
    batch
        .resolve()
        .map_err(|e| usage(format!("--min-batch/--opt-batch/--max-batch: {e:#}")))?;
    let explicit = ExplicitShapes {
        min: parse_named_shapes("--min-shapes", &args.min_shapes).map_err(usage)?,
        opt: parse_named_shapes("--opt-shapes", &args.opt_shapes).map_err(usage)?,
        max: parse_named_shapes("--max-shapes", &args.max_shapes).map_err(usage)?,
        axes,
    };
    explicit
        .check_ranges()
        .map_err(|e| usage(format!("--min-shapes/--opt-shapes/--max-shapes: {e:#}")))?;
    Ok((batch, explicit))
}

/// `--workspace`: a whole number of MiB, at least 1 (TensorRT cannot compile with none).
fn workspace_mib(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err(
            "the builder needs some workspace: give at least 1 MiB, or leave --workspace out to \
             let TensorRT choose"
                .into(),
        ),
        Ok(mib) => Ok(mib),
        Err(_) => Err(format!("'{text}' is not a whole number of MiB")),
    }
}

/// The build job these flags describe, in the workspace when the model is left out (or lies in
/// one): its model, input shape, calibration data and preprocessing under the flags given.
pub fn config(args: &BuildArgs) -> Result<BuildConfig> {
    args.fp16_options.keep_nodes.check(args.fp16)?;
    args.int8_recipe.check(args.int8)?;
    let (model, ws) = match &args.model {
        Some(m) => (m.clone(), for_model(Some(m))?),
        None => {
            let ws = required()?;
            (ws.model.clone(), Some(ws))
        }
    };
    let shapes = match &ws {
        Some(ws) if args.shapes.input_shape.is_empty() => ShapeArgs {
            input_shape: ws.settings.input_shape.clone(),
            dim: args.shapes.dim.clone(),
        },
        _ => args.shapes.clone(),
    };
    let (input_shapes, axes) = build_dims(&shapes)?;
    let calib_data = args
        .calib_data
        .clone()
        .or_else(|| ws.as_ref().and_then(|w| w.calib_data()));
    let int8 = match (&calib_data, &args.calibration_cache) {
        _ if !args.int8 => None,
        (_, Some(cache)) if args.calib_data.is_none() => Some(Int8Source::Cache(cache.clone())),
        (Some(src), _) => Some(Int8Source::Calibrate(Box::new(args.calibration.config(
            model.clone(),
            src.clone(),
            args.batch_size,
            &[args.algo],
            calibration_shapes(&input_shapes, &axes),
            ws.as_ref(),
        )?))),
        (None, _) => {
            return Err(usage(
                "--int8 needs calibration data (--calib-data DIR, a folder of images or .npy/.npz, or synthetic:SEED) or an existing cache (--calibration-cache FILE)",
            ))
        }
    };
    if let (Some(output), Some(dir)) = (&args.output, &args.engine_dir) {
        return Err(usage(format!(
            "-o {} and --engine-dir {} conflict: -o names the engine file itself (its folder included), --engine-dir the folder of keyed names; give one",
            output.display(),
            dir.display()
        )));
    }
    let (batch, explicit_shapes) = profile_flags(args, axes)?;
    let engine_dir = args
        .engine_dir
        .clone()
        .or_else(|| ws.as_ref().map(|w| w.engines()))
        .unwrap_or_else(|| PathBuf::from(ENGINES_DIR));
    Ok(BuildConfig {
        model,
        input_shapes,
        batch,
        explicit_shapes,
        plan: precision_plan(args, int8)?,
        builder: BuilderSettings {
            workspace_mib: args.workspace,
            optimization_level: args.builder_optimization_level,
        },
        output: args.output.clone(),
        engine_dir,
        rebuild: args.rebuild,
        tensorrt_dir: args.tensorrt_dir.clone(),
    })
}

/// The precision recipe the flags ask for; `int8`: the INT8 scales' source (given with
/// `--int8`).
fn precision_plan(args: &BuildArgs, int8: Option<Int8Source>) -> Result<PrecisionPlan> {
    let search_result = args.search_result.float_nodes_from.clone();
    Ok(match int8 {
        Some(scales) => PrecisionPlan::Int8(args.int8_recipe.plan(scales, search_result)?),
        None if args.fp16 => PrecisionPlan::Fp16(Fp16Plan {
            options: args.fp16_options.options(),
            search_result,
        }),
        None => PrecisionPlan::Fp32,
    })
}

/// Runs `build`.
pub fn run(args: BuildArgs) -> Result<()> {
    check_outputs(
        &[("-o", args.output.as_deref())],
        &[
            ("MODEL", args.model.as_deref()),
            ("--calibration-cache", args.calibration_cache.as_deref()),
        ],
    )?;
    let config = config(&args)?;
    let bar = Arc::new(Bar::new("steps", args.format.json));
    let calibration = Bar::new("batches", args.format.json);
    let quiet = args.format.json;
    let printed = FirstFailure::default();
    let note = |line: &str| {
        if !quiet {
            printed.keep(crate::cli::stdout::println(line));
        }
    };
    let report = build(
        &config,
        &BuildObservers {
            calibration: &calibration,
            builder: bar.clone(),
            note: &note,
        },
    );
    bar.finish();
    let report = report?;
    printed.check()?;
    args.format.print(&report, || render(&report))
}
