//! The settings of a bench run, each declared once in the table below: its plan-file key, its
//! flag, its default, and whether (and how) it takes part in the cell key. The types are written
//! out plainly: the plan file as written ([`PlanFile`]), the flags that set the same keys
//! ([`FlagValues`], behind [`SettingFlags`]), what every cell measures with ([`CellSettings`]).
//! The table fills them: the defaults, how a plan file and flags are layered, each cell
//! setting's check, and the digest of those settings in each cell's key
//! ([`CellSettings::digest`]). A new setting is a field in each struct it lives in and one entry
//! in the table; a field without an entry does not compile.

use super::devices::DeviceRequest;
use crate::backend::select::Runtime;
use crate::data::dataset::Annotations;
use crate::data::preprocess::PreprocessRequest;
use crate::digest::sha256_hex16;
use crate::number::seconds_value;
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

/// A plan as written: every key optional, so a file and flags can be layered. A key with a
/// flag of its own means what that flag's help says ([`FlagValues`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanFile {
    /// ONNX models (FP32).
    pub models: Option<Vec<PathBuf>>,
    /// Precisions: fp32, fp16, int8.
    pub precisions: Option<Vec<Precision>>,
    /// Batch sizes.
    pub batch_sizes: Option<Vec<usize>>,
    /// Targets: trt, ort-cuda, tract-cuda, tract-cpu, ort-cpu.
    pub targets: Option<Vec<Runtime>>,
    /// Compare each cell's outputs with the FP32 model.
    pub compare: Option<bool>,
    /// Where the FP32 reference of `compare` runs.
    pub reference: Option<Runtime>,
    /// Time limit of one cell in seconds, preparation included.
    pub cell_timeout: Option<f64>,
    /// The GPUs the GPU cells are spread over.
    pub devices: Option<DeviceRequest>,
    /// With `devices`: how many CPU-target cells run at once beside the GPU cells.
    pub cpu_cells: Option<usize>,
    /// Name of the run.
    pub name: Option<String>,
    /// Folder of results folders.
    pub results: Option<PathBuf>,
    /// Input shapes as `--input-shape` takes them (`input_ids:-1x128`), for every cell.
    pub input_shapes: Option<Vec<String>>,
    /// Named axes to sweep, a `[dims]` table (`seq = [64, 128, 256, 512]`): every model
    /// whose inputs carry the axis runs at each size.
    pub dims: Option<BTreeMap<String, Vec<i64>>>,
    /// How images become model input, for the dataset and image calibration data (a
    /// `[preprocess]` table with `validate`'s settings; unset ones follow the model's input).
    pub preprocess: Option<PreprocessRequest>,
    /// ImageNet-style folder: top-1/top-5 per cell.
    pub dataset: Option<PathBuf>,
    /// Segmentation: PNG masks of the dataset's images.
    pub masks: Option<PathBuf>,
    /// Detection: COCO annotations of the dataset's images.
    pub coco: Option<PathBuf>,
    /// Images of the dataset per cell.
    pub limit: Option<usize>,
    /// Samples compared per cell.
    pub compare_samples: Option<usize>,
    /// INT8 calibration data: images, .npy/.npz, or synthetic:SEED.
    pub calib_data: Option<String>,
    /// Calibration samples.
    pub calib_samples: Option<usize>,
    /// Warm-up iterations per cell.
    pub warmup: Option<u64>,
    /// Measured iterations per cell (instead of `duration`).
    pub iterations: Option<u64>,
    /// Seconds measured per cell.
    pub duration: Option<f64>,
    /// CPU threads of CPU targets.
    pub threads: Option<usize>,
    /// NVML sampling rate on GPU targets, Hz.
    pub nvml_hz: Option<f64>,
    /// The GPU.
    pub device_id: Option<usize>,
    /// Folder holding the TensorRT libraries.
    pub tensorrt_dir: Option<PathBuf>,
}

/// What every cell of a plan measures and how: one field per `cell` entry of the settings
/// table (its value or default, checked), then the [`Derived`] ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSettings {
    /// ImageNet-style folder: top-1/top-5 per cell.
    pub dataset: Option<PathBuf>,
    /// Segmentation: PNG masks of the dataset's images (accuracy becomes mIoU).
    pub masks: Option<PathBuf>,
    /// Detection: COCO annotations of the dataset's images (accuracy becomes mAP).
    pub coco: Option<PathBuf>,
    /// Images of the dataset per cell.
    pub limit: Option<usize>,
    /// Samples compared per cell (default: the batch size, at least 8).
    pub compare_samples: Option<usize>,
    /// INT8 calibration data: images, .npy/.npz, or synthetic:SEED.
    pub calib_data: String,
    /// Calibration samples (default: all; 512 for synthetic data).
    pub calib_samples: Option<usize>,
    /// Warm-up iterations per cell.
    pub warmup: u64,
    /// Measured iterations per cell (instead of --duration).
    pub iterations: Option<u64>,
    /// Seconds measured per cell; at least one iteration runs.
    pub duration_s: f64,
    /// CPU threads of CPU targets (default: every core).
    pub threads: Option<usize>,
    /// NVML sampling rate on GPU targets, Hz; 0 turns it off.
    pub nvml_hz: f64,
    /// The GPU.
    pub device_id: usize,
    /// Folder holding the TensorRT libraries.
    pub tensorrt_dir: Option<PathBuf>,
    /// Compare with FP32 on this target (`None`: no comparison).
    pub compare_on: Option<Runtime>,
    /// Smallest and largest batch of the plan: the range every engine is built for, so
    /// adding a batch size beyond it re-measures the engines (built anew for the wider
    /// range) but not the cells of the other backends.
    pub batch_range: (usize, usize),
    /// Input shapes as `--input-shape` takes them, for every cell.
    pub input_shapes: Vec<String>,
    /// Largest size of each swept axis: calibration runs there, so every cell of a model
    /// shares its INT8 scales.
    pub dim_max: BTreeMap<String, i64>,
    /// How images become model input (dataset and image calibration data).
    pub preprocess: PreprocessRequest,
}

/// The cell settings made from several plan-file keys (the plan works them out; the
/// `derived` entries of the settings table say how each is in the key).
#[derive(Clone, Debug)]
pub(crate) struct Derived {
    /// Compare with FP32 on this target (`None`: no comparison).
    pub compare_on: Option<Runtime>,
    /// Smallest and largest batch of the plan.
    pub batch_range: (usize, usize),
    /// Input shapes as `--input-shape` takes them, for every cell.
    pub input_shapes: Vec<String>,
    /// Largest size of each swept axis.
    pub dim_max: BTreeMap<String, i64>,
    /// How images become model input.
    pub preprocess: PreprocessRequest,
}

/// The value a cell setting takes: the plan's, else its default, checked where it has a check.
macro_rules! resolved {
    ($v:expr, $name:expr) => {
        Ok::<_, anyhow::Error>($v)
    };
    ($v:expr, $name:expr, $default:expr) => {
        Ok::<_, anyhow::Error>($v.unwrap_or_else(|| $default))
    };
    ($v:expr, $name:expr, $default:expr, $check:path) => {
        $check($v.unwrap_or_else(|| $default), $name)
    };
}

/// Fills the structs above from the settings table. `run`: plan-file keys with a flag of the
/// same name that shape the matrix or where and how long it runs, with their defaults.
/// `grouped`: plan-file keys whose flags belong to a group shared with other commands, each
/// with how a flag's value is laid over the file's. `cell`: plan-file keys with a flag that
/// every cell measures with: the cell setting they become, its default and check, and how it
/// is in the key. `derived`: cell settings made from several keys, and how each is in the key.
/// Every struct is built or taken apart whole here, so a field the table leaves out, or an
/// entry with no field, does not compile.
macro_rules! bench_settings {
    (
        run { $( $rfield:ident $(= $rdefault:expr)?; )* }
        grouped { $( $gfield:ident merged by $merge:path; )* }
        cell { $(
            $cfield:ident => $cell:ident,
            $(default $default:expr, $(check $check:path,)?)?
            key $ckey:ident;
        )* }
        derived { $( $dfield:ident, key $dkey:ident; )* }
    ) => {
        impl PlanFile {
            /// The defaults of the keys that shape the run, for a plan to lie over.
            pub(crate) fn run_defaults() -> PlanFile {
                PlanFile {
                    $( $rfield: None $(.or(Some($rdefault)))?, )*
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

        impl FlagValues {
            /// The plan-file keys these flags set (the grouped ones are the caller's to add).
            pub(crate) fn plan_file(&self) -> PlanFile {
                let FlagValues { $( $rfield, )* $( $cfield, )* } = self.clone();
                PlanFile {
                    $( $rfield, )*
                    $( $cfield, )*
                    ..PlanFile::default()
                }
            }

            /// Each flag that has a default, with the default as its help says it.
            fn defaults() -> Vec<(&'static str, String)> {
                vec![
                    $($( (stringify!($rfield), $rdefault.to_string()), )?)*
                    $($( (stringify!($cfield), $default.to_string()), )?)*
                ]
            }
        }

        impl CellSettings {
            /// The cell settings of a plan: each key's value or default, checked, and the
            /// settings `derived` from several keys.
            pub(crate) fn from_plan(p: &PlanFile, derived: Derived) -> Result<CellSettings> {
                let Derived { $( $dfield, )* } = derived;
                Ok(CellSettings {
                    $( $cell: resolved!(
                        p.$cfield.clone(),
                        &stringify!($cfield).replace('_', "-")
                        $(, $default $(, $check)?)?
                    )?, )*
                    $( $dfield, )*
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
        models;
        precisions;
        batch_sizes;
        targets;
        compare;
        reference = Runtime::TractCpu;
        cell_timeout = 600.0;
        devices;
        cpu_cells = 1;
        name;
        results;
    }
    grouped {
        input_shapes merged by Option::or;
        dims merged by merge_dims;
        preprocess merged by merge_preprocess;
    }
    cell {
        dataset => dataset, key Always;
        masks => masks, key WhenSet;
        coco => coco, key WhenSet;
        limit => limit, key Always;
        compare_samples => compare_samples, key Always;
        calib_data => calib_data, default DEFAULT_CALIB_DATA.to_string(), key Always;
        calib_samples => calib_samples, key Always;
        warmup => warmup, default 3, key Always;
        iterations => iterations, key Always;
        duration => duration_s, default 2.0, check seconds, key Always;
        threads => threads, key Always;
        nvml_hz => nvml_hz, default 20.0, check hertz, key Never;
        device_id => device_id, default 0, key Never;
        tensorrt_dir => tensorrt_dir, key Never;
    }
    derived {
        compare_on, key Always;
        batch_range, key TrtOnly;
        input_shapes, key WhenSet;
        dim_max, key WhenSet;
        preprocess, key Always;
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

mod flags;
pub use flags::{FlagValues, SettingFlags};

#[cfg(test)]
mod tests;
