//! The settings of a bench run, each declared once: its plan-file key, its flag, its default,
//! and whether (and how) it takes part in the cell key. From that one table come the plan file
//! as written ([`PlanFile`]), the flags that set the same keys ([`SettingFlags`]), how a plan
//! file and flags are layered, what every cell measures with ([`CellSettings`]) and the digest
//! of those settings in each cell's key ([`CellSettings::digest`]). A new setting is one entry.

use super::devices::DeviceRequest;
use crate::backend::select::Runtime;
use crate::data::dataset::Annotations;
use crate::data::preprocess::PreprocessRequest;
use crate::digest::sha256_hex16;
use crate::number::{self, seconds_value};
use crate::onnx::shape::{parse_input_shapes, NamedDim, ShapeRequest};
use crate::tensor::Precision;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How a cell setting takes part in the cell key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InKey {
    /// Always: a changed value is a new cell.
    Always,
    /// Only when set (not empty): plans that leave it unset keep the keys they had before the
    /// setting existed.
    WhenSet,
    /// In the key of `trt` cells only (what shapes the engines TensorRT builds alone).
    TrtOnly,
    /// Never: it does not change the numbers (monitoring) or names this machine's paths.
    Never,
}

/// Default calibration data when the plan names none: seeded random inputs.
pub(crate) const DEFAULT_CALIB_DATA: &str = "synthetic:0";

/// A number of seconds that must be finite, not negative, and no more than a `Duration` holds.
pub(super) fn seconds(v: f64, what: &str) -> Result<f64> {
    if !v.is_finite() || seconds_value(v).is_err() {
        bail!("{what} must be a non-negative number of seconds a timer can hold, not {v:?}");
    }
    Ok(v)
}

/// A rate in hertz that must be finite and not negative.
pub(super) fn hertz(v: f64, what: &str) -> Result<f64> {
    if !(v.is_finite() && v >= 0.0) {
        bail!("{what} must be a non-negative number of hertz, not {v:?}");
    }
    Ok(v)
}

/// The swept axes of `top` over those of `base`, axis by axis (`--dim seq=64` replaces the
/// file's `seq` only).
fn merge_dims(
    top: Option<BTreeMap<String, Vec<i64>>>,
    base: Option<BTreeMap<String, Vec<i64>>>,
) -> Option<BTreeMap<String, Vec<i64>>> {
    match (top, base) {
        (Some(top), Some(mut base)) => {
            base.extend(top);
            Some(base)
        }
        (top, base) => top.or(base),
    }
}

/// The preprocessing settings of `top` over those of `base`, setting by setting.
fn merge_preprocess(
    top: Option<PreprocessRequest>,
    base: Option<PreprocessRequest>,
) -> Option<PreprocessRequest> {
    match (top, base) {
        (Some(top), Some(base)) => Some(top.with_defaults_from(&base)),
        (top, base) => top.or(base),
    }
}

/// The value a cell setting takes: the plan's, else its default, checked where it has a check.
macro_rules! resolved {
    ($v:expr, $name:expr, $ty:ty) => {
        Ok::<_, anyhow::Error>($v)
    };
    ($v:expr, $name:expr, $ty:ty, $default:expr) => {
        Ok::<_, anyhow::Error>($v.unwrap_or_else(|| {
            let d: $ty = $default;
            d
        }))
    };
    ($v:expr, $name:expr, $ty:ty, $default:expr, $check:path) => {
        $check(
            $v.unwrap_or_else(|| {
                let d: $ty = $default;
                d
            }),
            $name,
        )
    };
}

/// Declares the settings. `run`: plan-file keys with a flag of the same name that shape the
/// matrix or where and how long it runs. `grouped`: plan-file keys whose flags belong to a
/// group shared with other commands, each with how a flag's value is laid over the file's.
/// `cell`: plan-file keys with a flag that every cell measures with: the cell setting they
/// become, its default and check, and how it is in the key. `derived`: cell settings made from
/// several keys, and how each is in the key.
macro_rules! bench_settings {
    (
        run { $(
            $(#[doc = $rdoc:literal])* #[arg($($rarg:tt)*)]
            $rfield:ident : $rty:ty $(= $rdefault:expr)?;
        )* }
        grouped { $( $(#[doc = $gdoc:literal])* $gfield:ident : $gty:ty, merged by $merge:path; )* }
        cell { $(
            $(#[doc = $cdoc:literal])* #[arg($($carg:tt)*)]
            $cfield:ident : $cty:ty => $cell:ident : $cellty:ty,
            $(default $default:expr, $(check $check:path,)?)?
            key $ckey:ident;
        )* }
        derived { $( $(#[doc = $ddoc:literal])* $dfield:ident : $dty:ty, key $dkey:ident; )* }
    ) => {
        /// A plan as written: every key optional, so a file and flags can be layered.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct PlanFile {
            $( $(#[doc = $rdoc])* pub $rfield: Option<$rty>, )*
            $( $(#[doc = $gdoc])* pub $gfield: Option<$gty>, )*
            $( $(#[doc = $cdoc])* pub $cfield: Option<$cty>, )*
        }

        impl PlanFile {
            /// The defaults of the keys that shape the run, for a plan to lie over.
            pub(crate) fn run_defaults() -> PlanFile {
                PlanFile {
                    $( $rfield: None $(.or(Some::<$rty>($rdefault)))?, )*
                    ..PlanFile::default()
                }
            }

            /// `self` with every key `over` sets replaced by `over`'s; the grouped ones merge
            /// setting by setting (the swept axes axis by axis).
            pub(crate) fn overridden_by(self, over: PlanFile) -> PlanFile {
                PlanFile {
                    $( $rfield: over.$rfield.or(self.$rfield), )*
                    $( $gfield: $merge(over.$gfield, self.$gfield), )*
                    $( $cfield: over.$cfield.or(self.$cfield), )*
                }
            }
        }

        /// The values of the flags of [`SettingFlags`], as clap parses them.
        #[derive(Clone, Debug, Default, clap::Args)]
        pub struct FlagValues {
            $( $(#[doc = $rdoc])* #[arg($($rarg)*)] pub $rfield: Option<$rty>, )*
            $( $(#[doc = $cdoc])* #[arg($($carg)*)] pub $cfield: Option<$cty>, )*
        }

        impl FlagValues {
            /// The plan-file keys these flags set (the grouped ones are the caller's to add).
            pub(crate) fn plan_file(&self) -> PlanFile {
                PlanFile {
                    $( $rfield: self.$rfield.clone(), )*
                    $( $cfield: self.$cfield.clone(), )*
                    ..PlanFile::default()
                }
            }

            /// Each flag that has a default, with the default as its help says it.
            fn defaults() -> Vec<(&'static str, String)> {
                vec![$($( (stringify!($rfield), {
                    let d: $rty = $rdefault;
                    d.to_string()
                }), )?)* $($( (stringify!($cfield), {
                    let d: $cty = $default;
                    d.to_string()
                }), )?)*]
            }
        }

        /// What every cell of a plan measures and how.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub struct CellSettings {
            $( $(#[doc = $cdoc])* pub $cell: $cellty, )*
            $( $(#[doc = $ddoc])* pub $dfield: $dty, )*
        }

        /// The cell settings made from several plan-file keys.
        #[derive(Clone, Debug)]
        pub(crate) struct Derived {
            $( $(#[doc = $ddoc])* pub $dfield: $dty, )*
        }

        impl CellSettings {
            /// The cell settings of a plan: each key's value or default, checked, and the
            /// settings `derived` from several keys.
            pub(crate) fn from_plan(p: &PlanFile, derived: Derived) -> Result<CellSettings> {
                Ok(CellSettings {
                    $( $cell: resolved!(
                        p.$cfield.clone(),
                        &stringify!($cfield).replace('_', "-"),
                        $cty
                        $(, $default $(, $check)?)?
                    )?, )*
                    $( $dfield: derived.$dfield, )*
                })
            }

            /// Every cell setting by its name in the key, with its value and how it is in the
            /// key, in the order they are declared.
            pub(crate) fn key_entries(&self) -> Vec<(&'static str, serde_json::Value, InKey)> {
                vec![
                    $( (stringify!($cell), serde_json::json!(self.$cell), InKey::$ckey), )*
                    $( (stringify!($dfield), serde_json::json!(self.$dfield), InKey::$dkey), )*
                ]
            }
        }
    };
}

bench_settings! {
    run {
        /// ONNX models (FP32).
        #[arg(long, num_args = 1.., value_name = "ONNX")]
        models: Vec<PathBuf>;
        /// Precisions, comma-separated: fp32, fp16, int8.
        #[arg(long, value_delimiter = ',')]
        precisions: Vec<Precision>;
        /// Batch sizes, comma-separated.
        #[arg(long, value_delimiter = ',')]
        batch_sizes: Vec<usize>;
        /// Targets, comma-separated: trt, ort-cuda, tract-cuda, tract-cpu, ort-cpu.
        #[arg(long, value_delimiter = ',')]
        targets: Vec<Runtime>;
        /// Compare each cell's outputs with the FP32 model (equality %, top-1 agreement).
        #[arg(long, num_args = 0, default_missing_value = "true")]
        compare: bool;
        /// Where the FP32 reference of --compare runs.
        #[arg(long, value_name = "TARGET")]
        reference: Runtime = Runtime::TractCpu;
        /// Time limit of one cell in seconds, preparation included.
        #[arg(long, value_name = "SECONDS", value_parser = number::seconds)]
        cell_timeout: f64 = 600.0;
        /// Spread the GPU cells over these GPUs, one cell per GPU at a time (indices as
        /// nvidia-smi lists them, comma-separated, or `all`).
        #[arg(long, value_name = "0,1,…|all", conflicts_with = "device_id")]
        devices: DeviceRequest;
        /// With --devices: CPU-target cells run at most this many at once beside the GPU cells,
        /// so they do not starve the GPU cells' feeding threads.
        #[arg(long, value_name = "N")]
        cpu_cells: usize = 1;
        /// Name of the run (default: the plan file's name, else `bench`).
        #[arg(long)]
        name: String;
        /// Folder of results folders (default `results`).
        #[arg(long, value_name = "DIR")]
        results: PathBuf;
    }
    grouped {
        /// Input shapes as `--input-shape` takes them (`input_ids:-1x128`), for every cell.
        input_shapes: Vec<String>, merged by Option::or;
        /// Named axes to sweep, a `[dims]` table (`seq = [64, 128, 256, 512]`): every model
        /// whose inputs carry the axis runs at each size.
        dims: BTreeMap<String, Vec<i64>>, merged by merge_dims;
        /// How images become model input, for the dataset and image calibration data (a
        /// `[preprocess]` table with `validate`'s settings; unset ones follow the model's input).
        preprocess: PreprocessRequest, merged by merge_preprocess;
    }
    cell {
        /// ImageNet-style folder: top-1/top-5 per cell.
        #[arg(long, value_name = "DIR")]
        dataset: PathBuf => dataset: Option<PathBuf>, key Always;
        /// Segmentation: PNG masks of the dataset's images (accuracy becomes mIoU).
        #[arg(long, value_name = "DIR", conflicts_with = "coco")]
        masks: PathBuf => masks: Option<PathBuf>, key WhenSet;
        /// Detection: COCO annotations of the dataset's images (accuracy becomes mAP).
        #[arg(long, value_name = "FILE")]
        coco: PathBuf => coco: Option<PathBuf>, key WhenSet;
        /// Images of the dataset per cell.
        #[arg(long, value_name = "N")]
        limit: usize => limit: Option<usize>, key Always;
        /// Samples compared per cell (default: the batch size, at least 8).
        #[arg(long, value_name = "N")]
        compare_samples: usize => compare_samples: Option<usize>, key Always;
        /// INT8 calibration data: images, .npy/.npz, or synthetic:SEED.
        #[arg(long, value_name = "DIR")]
        calib_data: String => calib_data: String,
            default DEFAULT_CALIB_DATA.to_string(), key Always;
        /// Calibration samples (default: all; 512 for synthetic data).
        #[arg(long, value_name = "N")]
        calib_samples: usize => calib_samples: Option<usize>, key Always;
        /// Warm-up iterations per cell.
        #[arg(long, value_name = "N")]
        warmup: u64 => warmup: u64, default 3, key Always;
        /// Measured iterations per cell (instead of --duration).
        #[arg(long, value_name = "N")]
        iterations: u64 => iterations: Option<u64>, key Always;
        /// Seconds measured per cell; at least one iteration runs.
        #[arg(long, value_name = "SECONDS", value_parser = number::seconds)]
        duration: f64 => duration_s: f64, default 2.0, check seconds, key Always;
        /// CPU threads of CPU targets (default: every core).
        #[arg(long, value_name = "N")]
        threads: usize => threads: Option<usize>, key Always;
        /// NVML sampling rate on GPU targets, Hz; 0 turns it off.
        #[arg(long, value_name = "HZ", value_parser = number::non_negative)]
        nvml_hz: f64 => nvml_hz: f64, default 20.0, check hertz, key Never;
        /// The GPU.
        #[arg(long, value_name = "ID")]
        device_id: usize => device_id: usize, default 0, key Never;
        /// Folder holding the TensorRT libraries.
        #[arg(long, value_name = "DIR")]
        tensorrt_dir: PathBuf => tensorrt_dir: Option<PathBuf>, key Never;
    }
    derived {
        /// Compare with FP32 on this target (`None`: no comparison).
        compare_on: Option<Runtime>, key Always;
        /// Smallest and largest batch of the plan: the range every engine is built for, so
        /// adding a batch size beyond it re-measures the engines (built anew for the wider
        /// range) but not the cells of the other backends.
        batch_range: (usize, usize), key TrtOnly;
        /// Input shapes as `--input-shape` takes them, for every cell.
        input_shapes: Vec<String>, key WhenSet;
        /// Largest size of each swept axis: calibration runs there, so every cell of a model
        /// shares its INT8 scales.
        dim_max: BTreeMap<String, i64>, key WhenSet;
        /// How images become model input (dataset and image calibration data).
        preprocess: PreprocessRequest, key Always;
    }
}

/// The flags of the plan-file keys that have their own (a flag not given leaves the plan
/// file's value); the help of each flag with a default says the table's default.
#[derive(Clone, Debug, Default)]
pub struct SettingFlags(pub FlagValues);

impl SettingFlags {
    /// The plan-file keys these flags set (the grouped ones are the caller's to add).
    pub(crate) fn plan_file(&self) -> PlanFile {
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

/// Whether a value counts as set for [`InKey::WhenSet`]: not null, not an empty list or table.
fn is_set(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

impl CellSettings {
    /// The ground truth beside the dataset's images.
    pub fn annotations(&self) -> Annotations {
        Annotations::given(self.masks.clone(), self.coco.clone()).unwrap_or_default()
    }

    /// The digest of the settings that change the numbers of a cell on `target`, for its key:
    /// each setting as [`CellSettings::key_entries`] says it is in the key.
    pub(crate) fn digest(&self, target: Runtime) -> String {
        let mut relevant = serde_json::Map::new();
        for (name, value, in_key) in self.key_entries() {
            let wanted = match in_key {
                InKey::Always => true,
                InKey::WhenSet => is_set(&value),
                InKey::TrtOnly => target == Runtime::Trt,
                InKey::Never => false,
            };
            if wanted {
                relevant.insert(name.to_string(), value);
            }
        }
        sha256_hex16(serde_json::Value::Object(relevant).to_string().as_bytes())
    }

    /// The fixed input shapes and these named-axis sizes, as the backends take them.
    pub(crate) fn shape_request(&self, dims: &BTreeMap<String, i64>) -> Result<ShapeRequest> {
        let named: Vec<NamedDim> = dims
            .iter()
            .map(|(symbol, &size)| NamedDim {
                symbol: symbol.clone(),
                size,
            })
            .collect();
        Ok(ShapeRequest::shapes(parse_input_shapes(&self.input_shapes)?).with_dims(&named))
    }
}

#[cfg(test)]
mod tests;
