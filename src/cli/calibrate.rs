//! `trtkit calibrate MODEL --calib-data SRC --batch-size N`: INT8 ranges into a keyed cache;
//! flags into a [`CalibrateConfig`], the report rendered by [`crate::report::calibration`].

use crate::calibration::job::{calibrate, CalibrateConfig};
use crate::calibration::range::Algorithm;
use crate::cli::args::backend::BackendArgs;
use crate::cli::args::output::print_report;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::progress::CalibrationBar;
use crate::cli::UsageError;
use crate::report::calibration::render;
use anyhow::Result;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// Range algorithm names on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlgoArg {
    /// KL-divergence threshold search (TensorRT's EntropyCalibration2).
    Entropy,
    /// Largest |x| seen.
    Minmax,
    /// A percentile of |x| (see --percentile).
    Percentile,
}

/// Flags of `calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The FP32 ONNX model to calibrate.
    pub model: PathBuf,
    /// Calibration data: a folder of JPEG/PNG images (any layout; decoded with the ImageNet
    /// evaluation preprocessing scaled to the model's input), a folder of .npy/.npz files (each
    /// [C,H,W] or [n,C,H,W], preprocessed; an .npz gives the array named after the model input
    /// or its only one), one such file, or `synthetic:SEED` for N(0,1) inputs.
    #[arg(long, value_name = "SRC")]
    pub calib_data: String,
    /// Batch size the model runs at; part of the cache key.
    #[arg(long, value_name = "N")]
    pub batch_size: usize,
    /// Use at most this many images (default: all; 512 for synthetic data).
    #[arg(long, value_name = "K")]
    pub num_images: Option<usize>,
    /// Range algorithm(s), comma-separated: `entropy,minmax,percentile` calibrates all three
    /// from one run over the data, one cache each.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "entropy")]
    pub algo: Vec<AlgoArg>,
    /// Percentile for --algo percentile.
    #[arg(long, default_value_t = 99.99)]
    pub percentile: f64,
    /// Calibrate even if a cache with the same key exists.
    #[arg(long)]
    pub recalibrate: bool,
    /// Folder of calibration caches.
    #[arg(long, default_value = "calibration", value_name = "DIR")]
    pub cache_dir: PathBuf,
    /// Also time the plain model (no captured tensors) over the same batches on the same
    /// backend: the baseline the calibration overhead is reported against.
    #[arg(long)]
    pub measure_plain: bool,
    /// The reference backend the model runs on.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// How images are preprocessed (image folders only; part of the cache key).
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The requested algorithms, each once, in the order given.
pub fn algorithms(algo: &[AlgoArg], percentile: f64) -> Result<Vec<Algorithm>> {
    if !(percentile > 0.0 && percentile <= 100.0) {
        return Err(UsageError(format!("--percentile {percentile} is not in (0, 100]")).into());
    }
    let mut algos = Vec::new();
    for a in algo {
        let algo = match a {
            AlgoArg::Entropy => Algorithm::Entropy,
            AlgoArg::Minmax => Algorithm::MinMax,
            AlgoArg::Percentile => Algorithm::Percentile {
                percent: percentile,
            },
        };
        if !algos.contains(&algo) {
            algos.push(algo);
        }
    }
    Ok(algos)
}

/// Runs `calibrate`; `verbose` prints every tensor's range.
pub fn run(args: CalibrateArgs, verbose: bool) -> Result<()> {
    let config = config(&args)?;
    let report = calibrate(&config, &CalibrationBar::new(args.json))?;
    print_report(args.json, &report, || render(&report, verbose))
}

/// The calibration job these flags describe.
pub fn config(args: &CalibrateArgs) -> Result<CalibrateConfig> {
    if args.batch_size == 0 {
        return Err(UsageError("--batch-size must be at least 1".into()).into());
    }
    Ok(CalibrateConfig {
        model: args.model.clone(),
        calib_data: args.calib_data.clone(),
        batch_size: args.batch_size,
        num_images: args.num_images,
        algorithms: algorithms(&args.algo, args.percentile)?,
        recalibrate: args.recalibrate,
        cache_dir: args.cache_dir.clone(),
        measure_plain: args.measure_plain,
        backend: args.backend.options(Some(args.batch_size)),
        preprocess: args.preprocess.request(),
    })
}
