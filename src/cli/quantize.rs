//! `trtkit quantize MODEL --int8 --calibration-cache FILE -o OUT.onnx` (with `--exclude…`
//! and `--fallback`), `trtkit quantize MODEL --fp16 -o OUT.onnx`, and the INT8 triage on real
//! samples: `--sensitivity` (the per-node table) and `--target-cosine` / `--target-agreement`
//! (the smallest float part that meets it), `--fp16 --target-cosine` (the fewest nodes kept in
//! float32 that meet it), and `--equalize` (cross-layer equalisation, a float rewrite before
//! calibration). Flags into the job's config, and its rendering.

use crate::backend::select::BackendOptions;
use crate::cli::args::backend::BackendArgs;
use crate::cli::args::fp16::Fp16Args;
use crate::cli::args::int8::Int8RecipeArgs;
use crate::cli::args::output::JsonArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::args::search_result::SearchResultArgs;
use crate::cli::args::shapes::ShapeArgs;
use crate::cli::outputs::check_outputs;
use crate::cli::usage;
use crate::jobs::quantize::request::{run_request, QuantizeRequest};
use crate::jobs::quantize::{QuantizeConfig, Rewrite};
use crate::number;
use crate::quantize::eval_config::{CheckSet, DEFAULT_CHECK_FRACTION};
use crate::quantize::evaluate::{EvalConfig, WeightRounding};
use crate::quantize::fp16_search::Fp16TargetConfig;
use crate::quantize::plan::{Fp16Plan, Int8Source, PrecisionPlan};
use crate::quantize::scale_search::ScaleSearch;
use crate::quantize::target_search::{Goal, Strategy, TargetConfig};
use crate::report::progress::Bar;
use crate::report::quantize::render_outcome;
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
    /// Cross-layer equalisation: even out the channel ranges of Conv → Relu → Conv pairs
    /// (same function, still float32); calibrate the result, then quantize it with --int8.
    #[arg(long, conflicts_with_all = ["int8", "fp16"])]
    pub equalize: bool,
    /// Calibration cache written by `trtkit calibrate` (or TensorRT) for --int8.
    #[arg(long, value_name = "FILE")]
    pub(crate) calibration_cache: Option<PathBuf>,
    /// Where to write the rewritten model (all but --sensitivity).
    #[arg(
        short,
        long,
        value_name = "OUT.onnx",
        required_unless_present = "sensitivity"
    )]
    pub output: Option<PathBuf>,
    /// With --int8: the nodes left in float, what they compute in, the weights' ranges.
    #[command(flatten)]
    pub(crate) int8_recipe: Int8RecipeArgs,
    /// With --int8: measure every quantized node on --eval-data (its damage alone in INT8,
    /// what leaving it alone in float recovers) and print the sorted table; writes no model.
    #[arg(long, requires = "int8", requires = "eval_data", conflicts_with_all = ["target_cosine", "target_agreement"])]
    pub sensitivity: bool,
    /// Leave the fewest nodes in float (with --int8) or keep the fewest in float32 (with
    /// --fp16) that keep this cosine with the FP32 model's output on --eval-data, and write that
    /// model.
    #[arg(
        long,
        requires = "eval_data",
        conflicts_with = "target_agreement",
        value_name = "COSINE",
        value_parser = number::finite
    )]
    pub(crate) target_cosine: Option<f64>,
    /// As --target-cosine, for this top-1 agreement with the FP32 model, %.
    #[arg(long, requires = "eval_data", value_name = "PCT", value_parser = number::percent)]
    pub(crate) target_agreement: Option<f64>,
    /// Samples the INT8 or FP16 variants are measured on: images, .npy/.npz, or synthetic:SEED (as
    /// `calibrate --calib-data` takes them).
    #[arg(long, value_name = "SRC")]
    pub(crate) eval_data: Option<String>,
    /// How many of them (default 64; every one counts, a short last batch is padded).
    #[arg(long, value_name = "N", requires = "eval_data")]
    pub eval_samples: Option<usize>,
    /// Samples the scores that decide "met" come from, kept apart from everything the search
    /// tunes (read as --eval-data is, up to --eval-samples). Default: a seeded share of
    /// --eval-data (--check-fraction).
    #[arg(
        long,
        value_name = "SRC",
        requires = "eval_data",
        conflicts_with = "check_fraction"
    )]
    pub(crate) check_data: Option<String>,
    /// The share of --eval-data kept apart for the check, in [0, 1): 0 keeps none (targets
    /// are then judged on the samples the search tuned on). Default 0.25.
    #[arg(long, value_name = "F", requires = "eval_data", value_parser = number::finite)]
    pub(crate) check_fraction: Option<f64>,
    /// The seed of the shuffle that picks the check samples.
    #[arg(long, value_name = "N", requires = "eval_data", default_value_t = 0)]
    pub(crate) split_seed: u64,
    /// Samples per inference while measuring (default 8).
    #[arg(long, value_name = "N", requires = "eval_data")]
    pub batch_size: Option<usize>,
    /// The reference backend of the measurements (--backend tract|ort, --threads).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Input shapes and named axes the samples of --eval-data are made and measured at
    /// (`--dim seq=128` for a token model); for a plain rewrite, the sizes the check opens the
    /// result at (the model written keeps its own shapes).
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// With --eval-data: correct each INT8 convolution's bias for its weights' rounding (the
    /// mean shift `ΔW · E[x]`, input means measured on --eval-data).
    #[arg(long, requires = "eval_data")]
    pub bias_correction: bool,
    /// With --eval-data: how the activation scales are chosen: layer (each searched for the
    /// least output error of the layers that read it, on up to 32 of the samples, starting
    /// from the cache's), or off (the calibration cache's as they are).
    #[arg(long, requires = "eval_data", value_enum, default_value = "layer")]
    pub scale_search: ScaleSearch,
    /// With --eval-data: how each weight is rounded within its channel's range: nearest, or
    /// adaptive (up or down, weight by weight, for the least output error of its layer on up
    /// to 32 of the tuning samples).
    #[arg(long, requires = "eval_data", value_enum, default_value = "nearest")]
    pub weight_rounding: WeightRounding,
    /// With a target: how the float part is searched for: greedy (one node at a time, each
    /// the best of the ranking's next four measured together with the float part so far), or
    /// bisect (the shortest prefix of the nodes ranked by what each recovers alone: fewer
    /// variants, often more nodes in float). Default: greedy.
    #[arg(long, value_enum)]
    pub search: Option<Strategy>,
    /// Search for the target again even if a kept result answers it.
    #[arg(long)]
    pub research: bool,
    /// How images of --eval-data become model input (`validate`'s flags).
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// The FP16 rewrite's options.
    #[command(flatten)]
    pub(crate) fp16_options: Fp16Args,
    /// A target search's float nodes, kept in float.
    #[command(flatten)]
    pub(crate) search_result: SearchResultArgs,
    /// Skip opening the result on the default CPU backend (ONNX Runtime where installed, else
    /// tract) as a check before it is written.
    #[arg(long)]
    pub(crate) no_check: bool,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// Where the check samples come from, as the flags say.
fn check_set(args: &QuantizeArgs) -> Result<CheckSet> {
    if let Some(source) = &args.check_data {
        return Ok(CheckSet::Data(source.clone()));
    }
    match args.check_fraction {
        Some(0.0) => Ok(CheckSet::Off),
        Some(f) if !(0.0..1.0).contains(&f) => Err(usage(format!(
            "--check-fraction {f}: give a share in [0, 1) (0 keeps no check set)"
        ))),
        f => Ok(CheckSet::Split {
            fraction: f.unwrap_or(DEFAULT_CHECK_FRACTION),
            seed: args.split_seed,
        }),
    }
}

/// The job these flags describe; every flag check of `quantize` is here.
pub fn job(args: &QuantizeArgs) -> Result<QuantizeRequest> {
    args.fp16_options.keep_nodes.check(args.fp16)?;
    args.int8_recipe.check(args.int8)?;
    let target = args.target_cosine.is_some() || args.target_agreement.is_some();
    if args.research && !target {
        return Err(usage(
            "--research searches a target again; give --target-cosine or --target-agreement",
        ));
    }
    if args.search.is_some() && !target {
        return Err(usage(
            "--search says how --target-cosine or --target-agreement searches; give one",
        ));
    }
    if args.search_result.float_nodes_from.is_some() && (args.eval_data.is_some() || args.equalize)
    {
        return Err(usage(
            "--float-nodes-from applies a target search's result to an FP16 or INT8 rewrite; leave out --eval-data and --equalize",
        ));
    }
    let Some(eval_data) = &args.eval_data else {
        if args.no_check && !args.shapes.one_shape("quantize")?.is_empty() {
            return Err(usage(
                "--input-shape and --dim set the sizes the check opens the rewritten model at; leave out --no-check (the model written keeps its own shapes)",
            ));
        }
        return Ok(QuantizeRequest::Rewrite(config(args)?));
    };
    if args.fp16 && !args.int8 {
        return fp16_target(args, eval_config(args, eval_data, PathBuf::new())?);
    }
    let Some(cache) = &args.calibration_cache else {
        return Err(usage(
            "--eval-data measures INT8 variants (--int8 --calibration-cache FILE) or an FP16 target search (--fp16 --target-cosine X)",
        ));
    };
    let eval = eval_config(args, eval_data, cache.clone())?;
    if args.sensitivity {
        return Ok(QuantizeRequest::Sensitivity {
            eval,
            exclude: args.int8_recipe.exclusion(),
        });
    }
    let Some(goal) = goal(args)? else {
        let output = args
            .output
            .clone()
            .expect("clap requires -o without --sensitivity");
        return Ok(QuantizeRequest::Measured {
            eval,
            exclude: args.int8_recipe.exclusion(),
            output,
        });
    };
    if !args.int8_recipe.exclusion().is_empty() {
        return Err(usage("--target-cosine and --target-agreement choose the float nodes themselves; leave out --exclude"));
    }
    Ok(QuantizeRequest::Target(TargetConfig {
        result_dir: None,
        eval,
        goal,
        output: args
            .output
            .clone()
            .expect("clap requires -o without --sensitivity"),
        research: args.research,
        strategy: args.search.unwrap_or_default(),
    }))
}

/// What the measurements run on, as the flags say (`cache`: the calibration cache, empty for
/// FP16).
fn eval_config(args: &QuantizeArgs, eval_data: &str, cache: PathBuf) -> Result<EvalConfig> {
    let eval = EvalConfig {
        model: args.model.clone(),
        cache,
        eval_data: eval_data.to_string(),
        samples: args.eval_samples,
        batch_size: args.batch_size.unwrap_or(8),
        preprocess: args.preprocess.request()?,
        backend: BackendOptions {
            input_shapes: args.shapes.one_shape("quantize")?,
            ..args.backend.options(None)
        },
        fallback: args.int8_recipe.fallback,
        bias_correction: args.bias_correction,
        weight_clip: args.int8_recipe.clipping()?,
        scale_search: args.scale_search,
        weight_rounding: args.weight_rounding,
        check: check_set(args)?,
    };
    if eval.batch_size == 0 || eval.samples == Some(0) {
        return Err(usage("--batch-size and --eval-samples must be at least 1"));
    }
    Ok(eval)
}

/// The target `--target-cosine` or `--target-agreement` sets, if any.
fn goal(args: &QuantizeArgs) -> Result<Option<Goal>> {
    Ok(match (args.target_cosine, args.target_agreement) {
        (Some(c), _) if (0.0..=1.0).contains(&c) => Some(Goal::Cosine(c)),
        (Some(c), _) => {
            return Err(usage(format!(
                "--target-cosine {c}: a cosine lies in [0, 1]"
            )))
        }
        (None, Some(p)) if (0.0..=100.0).contains(&p) => Some(Goal::Agreement(p)),
        (None, Some(p)) => {
            return Err(usage(format!(
                "--target-agreement {p}: a percentage lies in [0, 100]"
            )))
        }
        (None, None) => None,
    })
}

/// `quantize --fp16 --target-cosine X --eval-data SRC`: the FP16 search.
fn fp16_target(args: &QuantizeArgs, eval: EvalConfig) -> Result<QuantizeRequest> {
    if args.sensitivity || args.bias_correction || args.weight_rounding != WeightRounding::Nearest {
        return Err(usage(
            "--sensitivity, --bias-correction and --weight-rounding measure INT8 models; with --fp16 give --target-cosine or --target-agreement",
        ));
    }
    let Some(goal) = goal(args)? else {
        return Err(usage(
            "--eval-data with --fp16 measures the FP16 variants of a target search; give --target-cosine or --target-agreement",
        ));
    };
    Ok(QuantizeRequest::Fp16Target(Fp16TargetConfig {
        eval,
        options: args.fp16_options.options(),
        goal,
        output: output(args)?,
        result_dir: None,
        research: args.research,
        strategy: args.search.unwrap_or_default(),
    }))
}

/// The rewrite these flags describe.
pub fn config(args: &QuantizeArgs) -> Result<QuantizeConfig> {
    if args.equalize {
        return Ok(QuantizeConfig {
            model: args.model.clone(),
            rewrite: Rewrite::Equalize,
            output: output(args)?,
            check: !args.no_check,
            check_shapes: args.shapes.one_shape("quantize")?,
        });
    }
    let rewrite = match (args.int8, args.fp16, &args.calibration_cache) {
        (true, _, Some(cache)) => {
            Rewrite::Precision(Box::new(PrecisionPlan::Int8(args.int8_recipe.plan(
                Int8Source::Cache(cache.clone()),
                args.search_result.float_nodes_from.clone(),
            )?)))
        }
        (true, _, None) => return Err(usage("--int8 needs --calibration-cache FILE")),
        (false, true, _) => Rewrite::Precision(Box::new(PrecisionPlan::Fp16(Fp16Plan {
            options: args.fp16_options.options(),
            search_result: args.search_result.float_nodes_from.clone(),
        }))),
        (false, false, _) => return Err(usage("give one of --int8, --fp16 or --equalize")),
    };
    Ok(QuantizeConfig {
        model: args.model.clone(),
        rewrite,
        output: output(args)?,
        check: !args.no_check,
        check_shapes: args.shapes.one_shape("quantize")?,
    })
}

/// The model `-o` names.
fn output(args: &QuantizeArgs) -> Result<PathBuf> {
    args.output
        .clone()
        .ok_or_else(|| usage("give the output model with -o OUT.onnx"))
}

/// Runs `quantize`.
pub fn run(args: QuantizeArgs) -> Result<()> {
    check_outputs(
        &[("-o", args.output.as_deref())],
        &[
            ("MODEL", Some(&args.model)),
            ("--calibration-cache", args.calibration_cache.as_deref()),
        ],
    )?;
    let bar = Bar::new("variants", args.format.json);
    let outcome = run_request(&job(&args)?, &bar)?;
    args.format.print(&outcome, || render_outcome(&outcome))
}
