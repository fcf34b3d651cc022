//! `trtkit validate MODEL --dataset DIR`: flags into a [`ValidateConfig`]; the accuracy report
//! (table, and the per-image predictions CSV) is rendered by [`crate::report::accuracy`].

use crate::cli::args::backend::{BackendArgs, EngineArgs};
use crate::cli::args::output::OutputArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::args::samples::positive_samples;
use crate::cli::args::task::DetectArgs;
use crate::cli::args::timing::warmup_batches;
use crate::cli::outputs::check_outputs;
use crate::cli::usage;
use crate::cli::workspace::{blame_preprocess_file, for_model};
use crate::data::dataset::{Annotations, DatasetOptions};
use crate::jobs::precision_table::{validate_all, ValidateAllConfig};
use crate::jobs::validate::{validate, ValidateConfig, WarmupBatches};
use crate::metrics::detection::outputs::DetectOptions;
use crate::report::accuracy::{render, save_predictions};
use crate::report::precisions::render_validate;
use crate::report::progress::Bar;
use crate::workspace::{preprocess_in, Workspace};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Flags of `validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The model to validate: ONNX, or a TensorRT engine (.engine / .plan). Left out in a
    /// workspace: its ONNX model and every engine built from it, one row each.
    pub model: Option<PathBuf>,
    /// Dataset folder: one sub-folder per class (ImageFolder), or flat with --labels (default:
    /// the workspace's).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Images per batch; in a workspace a list (1,32) gives one table per batch size.
    #[arg(long, value_delimiter = ',', default_value = "32")]
    pub batch_size: Vec<usize>,
    /// Backend, device and threads (the image loader uses rayon's pool besides).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// GPU and TensorRT libraries for an engine.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Labels for a flat folder: `file,label` CSV, or one label per line in sorted file order.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// One class name per line (line i = model class i); maps folder or label names to indices.
    #[arg(long)]
    pub(crate) class_map: Option<PathBuf>,
    /// Segmentation: a folder of PNG masks named after the images (x.jpg → x.png), one class
    /// index per pixel (255 left out); gives mIoU and pixel accuracy.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["labels", "class_map", "coco"])]
    pub masks: Option<PathBuf>,
    /// Detection: COCO-format annotations JSON (images under --dataset by their file_name);
    /// gives mAP@0.5 and mAP@0.5:0.95. Model class k is the k-th category by ascending id.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["labels", "class_map"])]
    pub coco: Option<PathBuf>,
    /// How detections are decoded (with --coco).
    #[command(flatten)]
    pub detect: DetectArgs,
    /// Use only the first N images (after shuffling, if --shuffle-seed is given).
    #[arg(long = "num-samples", alias = "limit", value_name = "N")]
    pub(crate) num_samples: Option<usize>,
    /// Shuffle the images with this seed (the same seed picks the same subset everywhere).
    #[arg(long)]
    pub shuffle_seed: Option<u64>,
    /// Warm-up batches left out of the latency figures (default: 10% of the batches).
    #[arg(long, value_name = "N", value_parser = warmup_batches)]
    pub warmup: Option<WarmupBatches>,
    /// How images become model input.
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// Batches kept ready ahead of inference.
    #[arg(long, default_value_t = 4)]
    pub prefetch: usize,
    /// Write one line per image (file, label, top-5 classes) to this CSV file.
    #[arg(long)]
    pub(crate) save_predictions: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The validation these flags describe; every flag check of `validate` is here. In a workspace
/// its dataset and preprocessing fill what the flags leave out.
pub fn config(args: &ValidateArgs, ws: Option<&Workspace>) -> Result<ValidateConfig> {
    if args.batch_size.is_empty() || args.batch_size.contains(&0) {
        return Err(usage("--batch-size takes positive integers, e.g. 1,32"));
    }
    if args.model.is_some() && args.batch_size.len() > 1 {
        return Err(usage(
            "a list of batch sizes is for the workspace form (no MODEL); give one --batch-size",
        ));
    }
    let dataset = args
        .dataset
        .clone()
        .or_else(|| ws.and_then(Workspace::dataset))
        .ok_or_else(|| usage("--dataset DIR is needed (or dataset = \"DIR\" in trtkit.toml)"))?;
    let preprocess = args.preprocess.request()?;
    Ok(ValidateConfig {
        model: args
            .model
            .clone()
            .or_else(|| ws.map(|w| w.model.clone()))
            .ok_or_else(|| usage("validate needs a MODEL, or a workspace (trtkit init)"))?,
        dataset,
        dataset_options: DatasetOptions {
            labels: args.labels.clone(),
            class_map: args.class_map.clone(),
            annotations: Annotations::given(args.masks.clone(), args.coco.clone())
                .or_else(|| ws.map(Workspace::annotations))
                .unwrap_or_default(),
        },
        shuffle_seed: args.shuffle_seed,
        limit: positive_samples(args.num_samples)?,
        batch_size: args.batch_size[0],
        backend: args.engine.apply(args.backend.options(None)),
        warmup: args.warmup.unwrap_or(WarmupBatches::Fraction(0.1)),
        preprocess: preprocess_in(ws, preprocess),
        prefetch: args.prefetch,
        keep_predictions: args.save_predictions.is_some(),
        detect: args.detect.options(DetectOptions::evaluation())?,
    })
}

/// Runs `validate`: one model, or (no MODEL, in a workspace) every precision of its model.
pub fn run(args: ValidateArgs) -> Result<()> {
    check_outputs(
        &[("--save-predictions", args.save_predictions.as_deref())],
        &[
            ("MODEL", args.model.as_deref()),
            ("--labels", args.labels.as_deref()),
            ("--class-map", args.class_map.as_deref()),
            ("--masks", args.masks.as_deref()),
            ("--coco", args.coco.as_deref()),
        ],
    )?;
    let ws = for_model(args.model.as_deref())?;
    let given = args.preprocess.request()?;
    run_in(&args, ws.as_ref()).map_err(|e| blame_preprocess_file(e, ws.as_ref(), &given))
}

fn run_in(args: &ValidateArgs, ws: Option<&Workspace>) -> Result<()> {
    let config = config(args, ws)?;
    let bar = Bar::new("images", args.output.quiet());
    if let (None, Some(ws)) = (&args.model, &ws) {
        let report = validate_all(
            &ValidateAllConfig {
                model: ws.model.clone(),
                engines: ws.engines(),
                batch_sizes: args.batch_size.clone(),
                base: config,
            },
            &bar,
        )?;
        return args
            .output
            .print(&report, |markdown| render_validate(&report, markdown));
    }
    let report = validate(&config, &bar)?;
    if let Some(path) = &args.save_predictions {
        save_predictions(path, &report.predictions)?;
    }
    args.output
        .print(&report, |markdown| render(&report, markdown))
}
