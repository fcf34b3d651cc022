//! The calibration group shared by `calibrate` and `build --int8`: how many images, which
//! range algorithm settings, the cache folder, the backend and the preprocessing. The data
//! source, the batch size and the algorithm list differ per command and stay there.

use crate::backend::select::BackendOptions;
use crate::calibration::range::Algorithm;
use crate::cli::args::backend::BackendArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::args::samples::positive_samples;
use crate::cli::usage;
use crate::jobs::calibrate::CalibrateConfig;
use crate::number;
use crate::onnx::shape::ShapeRequest;
use crate::workspace::{preprocess_in, Workspace, CALIBRATION_DIR};
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

/// Calibration settings both commands take.
#[derive(Clone, Debug, Args)]
pub struct CalibrationArgs {
    /// Use at most this many calibration images (default: all; 512 for synthetic data).
    #[arg(long = "num-samples", alias = "num-images", value_name = "K")]
    pub(crate) num_samples: Option<usize>,
    /// The percentile for --algo percentile.
    #[arg(long, default_value_t = 99.99, value_parser = number::finite)]
    pub percentile: f64,
    /// Calibrate even if a cache with the same key exists.
    #[arg(long)]
    pub recalibrate: bool,
    /// Folder of calibration caches (default: the workspace's calibration/, else ./calibration).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The reference backend the calibration runs on.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// How calibration images are preprocessed (image folders only; part of the cache key).
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
}

impl CalibrationArgs {
    /// The calibration job of `model` on `calib_data` at `batch_size` with the algorithms
    /// `algo`; in a workspace, its preprocessing and cache folder fill what was not given.
    pub fn config(
        &self,
        model: PathBuf,
        calib_data: String,
        batch_size: usize,
        algo: &[AlgoArg],
        shapes: ShapeRequest,
        workspace: Option<&Workspace>,
    ) -> Result<CalibrateConfig> {
        if batch_size == 0 {
            return Err(usage("--batch-size must be at least 1"));
        }
        Ok(CalibrateConfig {
            model,
            calib_data,
            batch_size,
            num_images: positive_samples(self.num_samples)?,
            algorithms: algorithms(algo, self.percentile)?,
            recalibrate: self.recalibrate,
            cache_dir: self
                .cache_dir
                .clone()
                .or_else(|| workspace.map(Workspace::calibration))
                .unwrap_or_else(|| PathBuf::from(CALIBRATION_DIR)),
            measure_plain: false,
            backend: BackendOptions {
                input_shapes: shapes,
                ..self.backend.calibration_options(Some(batch_size))
            },
            preprocess: preprocess_in(workspace, self.preprocess.request()?),
        })
    }
}

/// The requested algorithms, each once, in the order given.
fn algorithms(algo: &[AlgoArg], percentile: f64) -> Result<Vec<Algorithm>> {
    if !(percentile > 0.0 && percentile <= 100.0) {
        return Err(usage(format!(
            "--percentile {percentile} is not in (0, 100]"
        )));
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
