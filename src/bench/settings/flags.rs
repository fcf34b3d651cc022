//! The flags of `bench` that set plan-file keys: [`FlagValues`] as clap parses them, and
//! [`SettingFlags`], which adds to each defaulted flag's help the default the settings table
//! gives it.

use crate::backend::select::Runtime;
use crate::bench::devices::DeviceRequest;
use crate::number;
use crate::tensor::Precision;
use std::path::PathBuf;

/// The values of the flags of [`SettingFlags`], as clap parses them: one per plan-file key
/// that has a flag of its own, each `None` when not given (the settings table in
/// `bench/settings.rs` says which key each sets and its default).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct FlagValues {
    /// ONNX models (FP32).
    #[arg(long, num_args = 1.., value_name = "ONNX")]
    pub models: Option<Vec<PathBuf>>,
    /// Precisions, comma-separated: fp32, fp16, int8.
    #[arg(long, value_delimiter = ',')]
    pub precisions: Option<Vec<Precision>>,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub batch_sizes: Option<Vec<usize>>,
    /// Targets, comma-separated: trt, ort-cuda, tract-cuda, tract-cpu, ort-cpu.
    #[arg(long, value_delimiter = ',')]
    pub targets: Option<Vec<Runtime>>,
    /// Compare each cell's outputs with the FP32 model (equality %, top-1 agreement).
    #[arg(long, num_args = 0, default_missing_value = "true")]
    pub compare: Option<bool>,
    /// Where the FP32 reference of --compare runs.
    #[arg(long, value_name = "TARGET")]
    pub reference: Option<Runtime>,
    /// Time limit of one cell in seconds, preparation included.
    #[arg(long, value_name = "SECONDS", value_parser = number::seconds)]
    pub cell_timeout: Option<f64>,
    /// Spread the GPU cells over these GPUs, one cell per GPU at a time (indices as
    /// nvidia-smi lists them, comma-separated, or `all`).
    #[arg(long, value_name = "0,1,…|all", conflicts_with = "device_id")]
    pub devices: Option<DeviceRequest>,
    /// With --devices: CPU-target cells run at most this many at once beside the GPU cells,
    /// so they do not starve the GPU cells' feeding threads.
    #[arg(long, value_name = "N")]
    pub cpu_cells: Option<usize>,
    /// Name of the run (default: the plan file's name, else `bench`).
    #[arg(long)]
    pub name: Option<String>,
    /// Folder of results folders (default `results`).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// ImageNet-style folder: top-1/top-5 per cell.
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// Segmentation: PNG masks of the dataset's images (accuracy becomes mIoU).
    #[arg(long, value_name = "DIR", conflicts_with = "coco")]
    pub masks: Option<PathBuf>,
    /// Detection: COCO annotations of the dataset's images (accuracy becomes mAP).
    #[arg(long, value_name = "FILE")]
    pub coco: Option<PathBuf>,
    /// Images of the dataset per cell.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Samples compared per cell (default: the batch size, at least 8).
    #[arg(long, value_name = "N")]
    pub compare_samples: Option<usize>,
    /// INT8 calibration data: images, .npy/.npz, or synthetic:SEED.
    #[arg(long, value_name = "DIR")]
    pub calib_data: Option<String>,
    /// Calibration samples (default: all; 512 for synthetic data).
    #[arg(long, value_name = "N")]
    pub calib_samples: Option<usize>,
    /// Warm-up iterations per cell.
    #[arg(long, value_name = "N")]
    pub warmup: Option<u64>,
    /// Measured iterations per cell (instead of --duration).
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,
    /// Seconds measured per cell; at least one iteration runs.
    #[arg(long, value_name = "SECONDS", value_parser = number::seconds)]
    pub duration: Option<f64>,
    /// CPU threads of CPU targets (default: every core).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// NVML sampling rate on GPU targets, Hz; 0 turns it off.
    #[arg(long, value_name = "HZ", value_parser = number::non_negative)]
    pub nvml_hz: Option<f64>,
    /// The GPU.
    #[arg(long, value_name = "ID")]
    pub device_id: Option<usize>,
    /// Folder holding the TensorRT libraries.
    #[arg(long, value_name = "DIR")]
    pub tensorrt_dir: Option<PathBuf>,
}

/// The flags of the plan-file keys that have their own (a flag not given leaves the plan
/// file's value); the help of each flag with a default says the table's default.
#[derive(Clone, Debug, Default)]
pub struct SettingFlags(pub FlagValues);

impl SettingFlags {
    /// The plan-file keys these flags set (the grouped ones are the caller's to add).
    pub(crate) fn plan_file(&self) -> super::PlanFile {
        self.0.plan_file()
    }
}

/// `command` with each defaulted flag's help ending in its default.
fn with_defaults(mut command: clap::Command) -> clap::Command {
    for (name, default) in FlagValues::defaults() {
        command = command.mut_arg(name, |arg| {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            arg.help(format!("{help} (default {default})"))
        });
    }
    command
}

impl clap::FromArgMatches for SettingFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        FlagValues::from_arg_matches(matches).map(SettingFlags)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl clap::Args for SettingFlags {
    fn group_id() -> Option<clap::Id> {
        FlagValues::group_id()
    }

    fn augment_args(command: clap::Command) -> clap::Command {
        with_defaults(FlagValues::augment_args(command))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        with_defaults(FlagValues::augment_args_for_update(command))
    }
}
