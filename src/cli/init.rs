//! `trtkit init MODEL.onnx [settings]`: flags into an [`InitConfig`]; `--show` prints the
//! settings that apply in the workspace found from here, with the flags given laid over them.

use crate::cli::args::output::JsonArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::usage;
use crate::cli::workspace::required;
use crate::jobs::init::{effective, init, InitConfig};
use crate::report::workspace::{render_effective, render_init};
use crate::workspace::Settings;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Flags of `init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The ONNX model the workspace is for (copied into onnx/).
    pub model: Option<PathBuf>,
    /// The workspace folder (created when missing).
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
    /// Link the model into onnx/ instead of copying it.
    #[arg(long)]
    pub link: bool,
    /// Replace an existing trtkit.toml (and a different model of the same name in onnx/).
    #[arg(long)]
    pub(crate) force: bool,
    /// Print the settings that apply here and where each comes from, instead of making a
    /// workspace.
    #[arg(long, conflicts_with_all = ["link", "force"])]
    pub show: bool,
    /// `build`'s input shape, e.g. `-1 3 224 224`.
    #[arg(long = "input-shape", num_args = 1.., allow_negative_numbers = true, value_name = "DIMS")]
    pub input_shape: Vec<String>,
    /// `validate`'s dataset folder.
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// PNG masks of the dataset's images, for a segmenter (`validate` scores mIoU).
    #[arg(long, value_name = "DIR", conflicts_with = "coco")]
    pub masks: Option<PathBuf>,
    /// COCO annotations of the dataset's images, for a detector (`validate` scores mAP).
    #[arg(long, value_name = "FILE")]
    pub coco: Option<PathBuf>,
    /// INT8 calibration data: a folder of images, of .npy/.npz arrays, or `synthetic:SEED`.
    #[arg(long, value_name = "SRC")]
    pub(crate) calib_data: Option<String>,
    /// How images become model input, for validate, calibrate and build --int8.
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// Runs `init`.
pub fn run(args: InitArgs) -> Result<()> {
    let settings = Settings {
        model: None,
        input_shape: args.input_shape.clone(),
        dataset: args.dataset.clone(),
        masks: args.masks.clone(),
        coco: args.coco.clone(),
        calib_data: args.calib_data.clone(),
        preprocess: args.preprocess.request()?,
    };
    if args.show {
        let ws = required()?;
        let shown = effective(&ws, &settings);
        return args.format.print(&shown, || render_effective(&shown));
    }
    let Some(model) = args.model.clone() else {
        return Err(usage(
            "init needs the ONNX model the workspace is for: trtkit init MODEL.onnx (or --show)",
        ));
    };
    let report = init(&InitConfig {
        model,
        dir: args.dir.clone(),
        link: args.link,
        force: args.force,
        settings,
    })?;
    args.format.print(&report, || render_init(&report))
}
