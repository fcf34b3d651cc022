//! `trtkit validate MODEL --dataset DIR`: flags into a [`ValidateConfig`]; the accuracy report
//! (table, and the per-image predictions CSV) is rendered by [`crate::report::accuracy`].

use crate::cli::args::backend::{BackendArgs, EngineArgs};
use crate::cli::args::output::OutputArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::args::samples::positive_samples;
use crate::cli::args::timing::warmup_batches;
use crate::cli::UsageError;
use crate::data::dataset::DatasetOptions;
use crate::measure::accuracy::{validate, ValidateConfig, WarmupBatches};
use crate::report::accuracy::{render, save_predictions};
use crate::report::progress::Bar;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Flags of `validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The model to validate: ONNX, or a TensorRT engine (.engine / .plan).
    pub model: PathBuf,
    /// Dataset folder: one sub-folder per class (ImageFolder), or flat with --labels.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Images per batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
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
    pub class_map: Option<PathBuf>,
    /// Use only the first N images (after shuffling, if --shuffle-seed is given).
    #[arg(long = "num-samples", alias = "limit", value_name = "N")]
    pub num_samples: Option<usize>,
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
    pub save_predictions: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The validation these flags describe; every flag check of `validate` is here.
pub fn config(args: &ValidateArgs) -> Result<ValidateConfig> {
    if args.batch_size == 0 {
        return Err(UsageError("--batch-size must be at least 1".into()).into());
    }
    Ok(ValidateConfig {
        model: args.model.clone(),
        dataset: args.dataset.clone(),
        dataset_options: DatasetOptions {
            labels: args.labels.clone(),
            class_map: args.class_map.clone(),
        },
        shuffle_seed: args.shuffle_seed,
        limit: positive_samples(args.num_samples)?,
        batch_size: args.batch_size,
        backend: args.engine.apply(args.backend.options(None)),
        warmup: args.warmup.unwrap_or(WarmupBatches::Fraction(0.1)),
        preprocess: args.preprocess.request(),
        prefetch: args.prefetch,
        keep_predictions: args.save_predictions.is_some(),
    })
}

/// Runs `validate`.
pub fn run(args: ValidateArgs) -> Result<()> {
    let config = config(&args)?;
    let report = validate(&config, &Bar::new("images", args.output.quiet()))?;
    if let Some(path) = &args.save_predictions {
        save_predictions(path, &report.predictions)?;
    }
    args.output
        .print(&report, |markdown| render(&report, markdown))
}
