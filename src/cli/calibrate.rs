//! `trtkit calibrate MODEL --calib-data SRC --batch-size N`: INT8 ranges into a keyed cache;
//! flags into a [`CalibrateConfig`], the report rendered by [`crate::report::calibration`].

use crate::cli::args::calibration::{AlgoArg, CalibrationArgs};
use crate::cli::args::output::JsonArgs;
use crate::cli::args::shapes::ShapeArgs;
use crate::cli::workspace::for_model;
use crate::jobs::calibrate::{calibrate, CalibrateConfig};
use crate::report::calibration::render;
use crate::report::progress::Bar;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Flags of `calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The FP32 ONNX model to calibrate.
    pub model: PathBuf,
    /// Calibration data: a folder of JPEG/PNG images (any layout; decoded with the ImageNet
    /// evaluation preprocessing scaled to the model's input), a folder of .npy/.npz files (each
    /// [C,H,W] or [n,C,H,W], preprocessed; an .npz gives the array named after the model input
    /// or its only one), one such file, or `synthetic:SEED` for N(0,1) inputs. A model with
    /// several or integer inputs (token ids, masks) takes .npz files with an array per input,
    /// or `synthetic:SEED` for inputs drawn the way its graph says.
    #[arg(long, value_name = "SRC")]
    pub(crate) calib_data: String,
    /// Batch size the model runs at; part of the cache key.
    #[arg(long, value_name = "N")]
    pub batch_size: usize,
    /// Range algorithm(s), comma-separated: `entropy,minmax,percentile` calibrates all three
    /// from one run over the data, one cache each.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "entropy")]
    pub algo: Vec<AlgoArg>,
    /// Images, algorithm settings, cache folder, backend and preprocessing.
    #[command(flatten)]
    pub calibration: CalibrationArgs,
    /// Input shapes and named axes (`--dim seq=128`): calibration runs at fixed sample dims.
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// Also time the plain model (no captured tensors) over the same batches on the same
    /// backend: the baseline the calibration overhead is reported against.
    #[arg(long)]
    pub(crate) measure_plain: bool,
    /// Output format.
    #[command(flatten)]
    pub output: JsonArgs,
}

/// The calibration job these flags describe (a model inside a workspace takes its
/// preprocessing and cache folder where no flag sets them).
pub fn config(args: &CalibrateArgs) -> Result<CalibrateConfig> {
    let config = args.calibration.config(
        args.model.clone(),
        args.calib_data.clone(),
        args.batch_size,
        &args.algo,
        args.shapes.one_shape("calibrate")?,
        for_model(Some(&args.model))?.as_ref(),
    )?;
    Ok(CalibrateConfig {
        measure_plain: args.measure_plain,
        ..config
    })
}

/// Runs `calibrate`; `verbose` prints every tensor's range.
pub fn run(args: CalibrateArgs, verbose: bool) -> Result<()> {
    let config = config(&args)?;
    let report = calibrate(&config, &Bar::new("batches", args.output.json))?;
    args.output.print(&report, || render(&report, verbose))
}
