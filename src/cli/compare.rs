//! `trtkit compare A B`: flags into a [`CompareConfig`]; the closeness report is rendered by
//! [`crate::report::closeness`], and the verdict (all-NaN outputs, `--fail-below`) fails the run
//! after it is printed.

use crate::backend::select::BackendOptions;
use crate::cli::args::backend::{BackendArgs, EngineArgs, SideABackendArgs, SideBBackendArgs};
use crate::cli::args::batch_axis::BatchAxisArgs;
use crate::cli::args::output::OutputArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::args::shapes::ShapeArgs;
use crate::cli::args::task::TaskArgs;
use crate::cli::outputs::{check_outputs, MaybePath};
use crate::cli::usage;
use crate::cli::workspace::{blame_preprocess_file, for_model, required};
use crate::data::dataset::DatasetOptions;
use crate::data::preprocess::PreprocessRequest;
use crate::data::synthetic::{InputDistribution, RandomInputs};
use crate::jobs::compare::{
    compare, compare_many, is_model, side_labels, verdict, CompareConfig, CompareManyReport,
    InputSource, Saves, SideConfig, Verdict, DEFAULT_BATCH,
};
use crate::jobs::layerwise::all::{layerwise_all, LayerwiseAllConfig};
use crate::jobs::layerwise::{layerwise, LayerwiseConfig, DEFAULT_COSINE};
use crate::jobs::precision_compare::{compare_all, gate, CompareAllConfig};
use crate::jobs::validate::{ValidateConfig, WarmupBatches};
use crate::metrics::closeness::Tolerance;
use crate::metrics::detection::outputs::DetectOptions;
use crate::number;
use crate::report::closeness::{render, render_many};
use crate::report::layerwise::{plot_path_for, render as render_layerwise, render_all, write_plot};
use crate::report::precisions::render_compare;
use crate::report::progress::Bar;
use crate::tensor::IntInput;
use crate::workspace::{read_settings, Workspace};
use anyhow::Result;
use clap::Args;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

/// Flags of `compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The side under test: an .onnx model, a TensorRT engine, or an .npz of saved outputs.
    /// Left out with B in a workspace: every engine built from its model (or the graph its
    /// build kept) against its FP32 ONNX model.
    #[arg(requires = "b")]
    pub a: Option<PathBuf>,
    /// The reference: an .onnx model, a TensorRT engine, or an .npz of saved outputs. With
    /// more paths after it, B is under test too and the last path is the reference.
    pub b: Option<PathBuf>,
    /// More sides (C, D, …): `compare A B C` compares A and B each with C, the last, which runs
    /// once.
    #[arg(value_name = "MORE")]
    pub more: Vec<PathBuf>,
    /// Backend, device and threads for every side (A's and B's own flags win).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Overrides for A.
    #[command(flatten)]
    pub(crate) a_side: SideABackendArgs,
    /// Overrides for B.
    #[command(flatten)]
    pub(crate) b_side: SideBBackendArgs,
    /// GPU and TensorRT libraries for an engine side.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Input shapes and named axes (`--dim seq=128`) of the model sides.
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// Where inputs and outputs hold their samples, where the model's named axes do not say.
    #[command(flatten)]
    pub batch_axes: BatchAxisArgs,
    /// The task (classify, detect, segment) and how detections are decoded.
    #[command(flatten)]
    pub task: TaskArgs,
    /// Samples per inference (default: the model's fixed batch, else up to 32).
    #[arg(long, alias = "batch")]
    pub batch_size: Option<usize>,
    /// Inputs from an .npz (arrays named after the model inputs) or .npy (one-input models).
    #[arg(long, value_name = "FILE")]
    pub inputs: Option<PathBuf>,
    /// Compare over the images of this folder (any layout; labels are not read), at most
    /// --num-samples of them, preprocessed as validate preprocesses them: the preprocessing
    /// flags, over a --config file's or the workspace's [preprocess].
    #[arg(long, value_name = "DIR", conflicts_with = "inputs")]
    pub dataset: Option<PathBuf>,
    /// How --dataset's images become model input (as in validate).
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// A trtkit.toml whose [preprocess] the --dataset images take (flags win over it; in a
    /// workspace, it wins over the workspace's).
    #[arg(long, value_name = "FILE", requires = "dataset")]
    pub(crate) config: Option<PathBuf>,
    /// Number of random samples (when no --inputs), or of images with --dataset.
    #[arg(
        long = "num-samples",
        alias = "num-inputs",
        default_value_t = 64,
        value_name = "N"
    )]
    pub(crate) num_samples: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Draw random inputs from a normal distribution instead of a uniform one.
    #[arg(long)]
    pub normal: bool,
    /// Uniform range LOW HIGH, or normal MEAN STD with --normal.
    #[arg(long, num_args = 2, allow_negative_numbers = true, value_names = ["LOW", "HIGH"], default_values_t = [0.0, 1.0], value_parser = number::finite)]
    pub range: Vec<f64>,
    /// Relative tolerance of isclose (times |B|).
    #[arg(long, default_value_t = 1e-3, value_parser = number::non_negative)]
    pub rtol: f64,
    /// Absolute tolerance of isclose.
    #[arg(long, default_value_t = 1e-8, value_parser = number::non_negative)]
    pub atol: f64,
    /// NaN on both sides counts as equal.
    #[arg(long)]
    pub equal_nan: bool,
    /// Ranks in the top-k table of [batch, classes] outputs.
    #[arg(long, default_value_t = 10)]
    pub topk: usize,
    /// Fail (exit 1) when any output's equality % or top-1 agreement % is below PCT.
    #[arg(long, value_name = "PCT", value_parser = number::percent)]
    pub(crate) fail_below: Option<f64>,
    /// Values of an integer input, over what the graph says (token ids inside the embedding
    /// table, masks of ones then padding, segment ids of zeros): NAME:LO,HI draws [LO, HI).
    #[arg(long, value_name = "NAME:LO,HI", value_parser = int_range)]
    pub(crate) int_range: Vec<(String, IntInput)>,
    /// Save the inputs used as .npz.
    #[arg(long, value_name = "FILE")]
    pub(crate) save_inputs: Option<PathBuf>,
    /// Save A's outputs as .npz (two sides only: with more, each side under test is its own).
    #[arg(long, value_name = "FILE")]
    pub(crate) save_outputs: Option<PathBuf>,
    /// Save the reference's (B's, or the last side's) outputs as .npz.
    #[arg(long, value_name = "FILE")]
    pub(crate) save_reference: Option<PathBuf>,
    /// Layer by layer (A and B both ONNX graphs): every float tensor of the reference becomes
    /// an output, is matched with A's tensor holding its value, and the first tensor whose
    /// cosine falls below --layerwise-cosine is named. In a workspace (no A and B): every graph
    /// an FP16 or INT8 build kept, against the model.
    #[arg(long, conflicts_with_all = ["dataset", "save_inputs", "save_outputs", "save_reference", "fail_below"])]
    pub layerwise: bool,
    /// With --layerwise: only the reference tensors whose name matches REGEX.
    #[arg(long, value_name = "REGEX", requires = "layerwise")]
    pub tensors: Option<String>,
    /// With --layerwise: a tensor whose cosine is below X diverges.
    #[arg(long, value_name = "X", default_value_t = DEFAULT_COSINE, value_parser = number::finite)]
    pub(crate) layerwise_cosine: f64,
    /// With --layerwise: write each tensor's 1 − cosine against its depth as an SVG.
    #[arg(long, value_name = "FILE.svg", requires = "layerwise")]
    pub plot: Option<PathBuf>,
    /// With --layerwise: the most bytes of marked outputs held at once (tests force groups).
    #[arg(long, hide = true, value_name = "BYTES", requires = "layerwise")]
    pub(crate) layerwise_group_bytes: Option<u64>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The comparison these flags describe; every flag check of `compare` is here. In the
/// workspace form both sides are the workspace's model (the job replaces A per precision).
pub fn config(args: &CompareArgs, ws: Option<&Workspace>) -> Result<CompareConfig> {
    let batch_size = match args.batch_size {
        Some(b) => {
            Some(NonZeroUsize::new(b).ok_or_else(|| usage("--batch-size must be at least 1"))?)
        }
        None => None,
    };
    if args.inputs.is_none() && args.num_samples == 0 {
        return Err(usage("--num-samples must be at least 1"));
    }
    let (a, b) = match (&args.a, &args.b, ws) {
        (Some(a), Some(b), _) => (a.clone(), b.clone()),
        (_, _, Some(ws)) => (ws.model.clone(), ws.model.clone()),
        _ => return Err(usage("compare takes A and B, or neither in a workspace")),
    };
    let runs_none = [&a, &b].into_iter().chain(&args.more).all(|p| !is_model(p));
    if runs_none && args.inputs.is_some() {
        tracing::warn!("--inputs is ignored: every side is saved outputs");
    }
    if runs_none && args.dataset.is_some() && args.a.is_some() {
        tracing::warn!("--dataset is ignored: every side is saved outputs");
    }
    let (x, y) = (args.range[0], args.range[1]);
    let dist = if args.normal {
        InputDistribution::Normal { mean: x, std: y }
    } else {
        InputDistribution::Uniform { low: x, high: y }
    };
    let batch_axes = args.batch_axes.request()?;
    Ok(CompareConfig {
        a: SideConfig {
            path: a,
            backend: BackendOptions {
                batch_axes: batch_axes.clone(),
                ..args
                    .engine
                    .apply(args.a_side.with_defaults_from(&args.backend).options(None))
            },
        },
        b: SideConfig {
            path: b,
            backend: BackendOptions {
                batch_axes,
                ..args
                    .engine
                    .apply(args.b_side.with_defaults_from(&args.backend).options(None))
            },
        },
        input_shapes: args.shapes.one_shape("compare")?,
        batch_size,
        inputs: match (&args.inputs, &args.dataset, &args.a) {
            (Some(p), _, _) => InputSource::File(p.clone()),
            (None, Some(dir), Some(_)) => InputSource::Images(Box::new(side_images(args, dir)?)),
            _ => InputSource::Random {
                random: RandomInputs {
                    dist,
                    seed: args.seed,
                },
                int_inputs: args.int_range.iter().cloned().collect(),
                samples: args.num_samples,
            },
        },
        tolerance: Tolerance {
            rtol: args.rtol,
            atol: args.atol,
            equal_nan: args.equal_nan,
        },
        topk: args.topk,
        task: args.task.request(DetectOptions::agreement())?,
    })
}

/// The images `--dataset` compares over, fed to `model`'s image input as `preprocess` says:
/// at most `--num-samples` of them, loaded with the reference side's backend at the shapes
/// given.
fn images(
    args: &CompareArgs,
    model: &Path,
    dir: &Path,
    preprocess: PreprocessRequest,
    dataset_options: DatasetOptions,
) -> Result<ValidateConfig> {
    let mut backend = args
        .engine
        .apply(args.b_side.with_defaults_from(&args.backend).options(None));
    backend.input_shapes = args.shapes.one_shape("compare")?;
    Ok(ValidateConfig {
        model: model.to_path_buf(),
        dataset: dir.to_path_buf(),
        dataset_options,
        shuffle_seed: None,
        limit: Some(args.num_samples),
        batch_size: args.batch_size.unwrap_or(DEFAULT_BATCH),
        backend,
        warmup: WarmupBatches::Count(0),
        preprocess,
        prefetch: 4,
        keep_predictions: false,
        detect: DetectOptions::evaluation(),
    })
}

/// The images of `compare A B --dataset DIR`, preprocessed for the reference's input (or, when
/// B is saved outputs, the first side that runs a model): the flags over the `--config` file's
/// [preprocess], else over the workspace's when B lies in one.
fn side_images(args: &CompareArgs, dir: &Path) -> Result<ValidateConfig> {
    let given = args.preprocess.request()?;
    let preprocess = match &args.config {
        Some(_) => flags_over_config(args.config.as_deref(), &given)?,
        None => match for_model(args.b.as_deref())? {
            Some(ws) => ws.preprocess_under(&given),
            None => given,
        },
    };
    let sides = [&args.a, &args.b].into_iter().flatten().chain(&args.more);
    let mut models = sides.filter(|p| is_model(p));
    let model = match args.b.as_ref().filter(|b| is_model(b)) {
        Some(b) => b.clone(),
        None => models
            .next()
            .cloned()
            .unwrap_or_else(|| args.b.clone().unwrap_or_default()),
    };
    images(args, &model, dir, preprocess, DatasetOptions::default())
}

/// The preprocessing flags `given` over the [preprocess] of the `--config` file, if one is
/// given.
fn flags_over_config(file: Option<&Path>, given: &PreprocessRequest) -> Result<PreprocessRequest> {
    Ok(match file {
        Some(file) => given.with_defaults_from(&read_settings(file)?.preprocess),
        None => given.clone(),
    })
}

/// `--int-range NAME:LO,HI`: integers drawn from `[LO, HI)` for input NAME.
fn int_range(text: &str) -> Result<(String, IntInput), String> {
    let bad = || {
        format!("--int-range {text:?}: expected NAME:LO,HI with LO < HI, e.g. input_ids:0,30522")
    };
    let (name, range) = text.rsplit_once(':').ok_or_else(bad)?;
    let (low, high) = range.split_once(',').ok_or_else(bad)?;
    let low: i64 = low.trim().parse().map_err(|_| bad())?;
    let high: i64 = high.trim().parse().map_err(|_| bad())?;
    if name.is_empty() || low >= high {
        return Err(bad());
    }
    Ok((name.to_string(), IntInput::Range { low, high }))
}

/// Runs `compare --layerwise`: prints the report and writes the plot asked for. Without A and
/// B, in a workspace: every kept FP16 or INT8 graph against the model.
fn run_layerwise(args: &CompareArgs, bar: &Bar) -> Result<()> {
    if !(0.0..=1.0).contains(&args.layerwise_cosine) {
        return Err(usage("--layerwise-cosine must be within [0, 1]"));
    }
    if !args.more.is_empty() {
        return Err(usage(
            "--layerwise compares two ONNX graphs, A against the reference B; give two",
        ));
    }
    let ws = match args.a {
        Some(_) => None,
        None => Some(required()?),
    };
    let base = LayerwiseConfig {
        compare: config(args, ws.as_ref())?,
        tensors: args.tensors.clone(),
        cosine_threshold: args.layerwise_cosine,
        group_bytes: args.layerwise_group_bytes,
    };
    let Some(ws) = ws else {
        let report = layerwise(&base, bar)?;
        if let Some(path) = &args.plot {
            write_plot(&report, path)?;
        }
        return args
            .output
            .print(&report, |markdown| render_layerwise(&report, markdown));
    };
    let all = layerwise_all(
        &LayerwiseAllConfig {
            model: ws.model.clone(),
            engines: ws.engines(),
            base,
        },
        bar,
    )?;
    if let Some(path) = &args.plot {
        for g in &all.graphs {
            write_plot(&g.report, &plot_path_for(path, &g.engine))?;
        }
    }
    args.output
        .print(&all, |markdown| render_all(&all, markdown))
}

/// The sides of `compare A B C …`, each with its backend: `--a-…` sets A's and `--b-…` B's, as
/// in the two-side form; the others take the shared `--backend`/`--device`/`--threads`.
fn sides(args: &CompareArgs) -> Vec<SideConfig> {
    let paths = [&args.a, &args.b]
        .into_iter()
        .flatten()
        .chain(&args.more)
        .cloned();
    paths
        .zip(side_labels(args.more.len() + 2))
        .map(|(path, label)| {
            let backend = match label.as_str() {
                "A" => args.a_side.with_defaults_from(&args.backend),
                "B" => args.b_side.with_defaults_from(&args.backend),
                _ => args.backend.clone(),
            };
            SideConfig {
                path,
                backend: args.engine.apply(backend.options(None)),
            }
        })
        .collect()
}

/// `compare A B C …`: each side compared with the last. `--save-reference` saves the
/// reference's outputs; `--save-outputs` names one side under test, so it is refused here.
fn run_many(args: &CompareArgs, config: &CompareConfig, bar: &Bar) -> Result<()> {
    if args.save_outputs.is_some() {
        return Err(usage(format!(
            "--save-outputs saves the outputs of the one side under test; with {} sides give each its own run (compare X REFERENCE --save-outputs FILE)",
            args.more.len() + 2
        )));
    }
    let saves = Saves {
        inputs: args.save_inputs.clone(),
        tested: None,
        reference: args.save_reference.clone(),
    };
    let report = compare_many(config, &sides(args), &saves, bar)?;
    args.output
        .print(&report, |markdown| render_many(&report, markdown))?;
    many_verdict(&report, args.fail_below)
}

/// The first comparison that fails (all-NaN outputs, `--fail-below`), named by its two sides.
fn many_verdict(report: &CompareManyReport, fail_below: Option<f64>) -> Result<()> {
    for c in &report.comparisons {
        if let Err(v) = verdict(c, fail_below) {
            let pair: Vec<&str> = c.sides.iter().map(|s| s.label.as_str()).collect();
            return Err(failed(v).context(pair.join(" vs ")));
        }
    }
    Ok(())
}

/// Runs `compare`: prints the report, saves the tensors asked for, then fails on all-NaN
/// outputs or `--fail-below`.
pub fn run(args: CompareArgs) -> Result<()> {
    let sides = [("A", &args.a), ("B", &args.b)].into_iter();
    let mut inputs: Vec<MaybePath> = sides.map(|(f, p)| (f, p.as_deref())).collect();
    inputs.extend(args.more.iter().map(|p| ("MORE", Some(p.as_path()))));
    inputs.extend([
        ("--inputs", args.inputs.as_deref()),
        ("--config", args.config.as_deref()),
    ]);
    check_outputs(
        &[
            ("--save-inputs", args.save_inputs.as_deref()),
            ("--save-outputs", args.save_outputs.as_deref()),
            ("--save-reference", args.save_reference.as_deref()),
            ("--plot", args.plot.as_deref()),
        ],
        &inputs,
    )?;
    let bar = Bar::new("samples", args.output.quiet());
    if args.layerwise {
        return run_layerwise(&args, &bar);
    }
    let given = args.preprocess.request()?;
    if args.a.is_none() {
        let ws = required()?;
        let report = compare_all(
            &CompareAllConfig {
                model: ws.model.clone(),
                engines: ws.engines(),
                base: config(&args, Some(&ws))?,
                images: match &args.dataset {
                    Some(dir) => Some(images(
                        &args,
                        &ws.model,
                        dir,
                        ws.preprocess_under(&flags_over_config(args.config.as_deref(), &given)?),
                        DatasetOptions {
                            annotations: ws.annotations(),
                            ..Default::default()
                        },
                    )?),
                    None => None,
                },
            },
            &bar,
        )
        .map_err(|e| blame_preprocess_file(e, Some(&ws), &given))?;
        args.output
            .print(&report, |markdown| render_compare(&report, markdown))?;
        return gate(&report, args.fail_below);
    }
    let config = config(&args, None)?;
    if !args.more.is_empty() {
        return run_many(&args, &config, &bar);
    }
    let saves = Saves {
        inputs: args.save_inputs.clone(),
        tested: args.save_outputs.clone(),
        reference: args.save_reference.clone(),
    };
    let report = compare(&config, &saves, &bar)?;
    args.output
        .print(&report, |markdown| render(&report, markdown))?;
    verdict(&report, args.fail_below).map_err(failed)
}

/// A failed verdict as the run's error, its threshold named by the flag that set it.
fn failed(verdict: Verdict) -> anyhow::Error {
    anyhow::anyhow!("{}", verdict.said(Some("--fail-below")))
}
