//! What the INT8 triage's measurements run on: the model, its calibration cache, the samples
//! and how they are split, the reference backend, and the options that fit the INT8 model to
//! the samples (fallback, weight ranges and rounding, bias correction, scale search).

use crate::backend::select::BackendOptions;
use crate::data::preprocess::PreprocessRequest;
use crate::onnx::rewrite::qdq::WeightClipping;
use crate::quantize::plan::Fallback;
use crate::quantize::scale_search::ScaleSearch;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What the measurements of INT8 variants run on.
#[derive(Clone, Debug)]
pub struct EvalConfig {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// Its calibration cache (the activation scales).
    pub cache: PathBuf,
    /// Samples as `calibrate` takes them: images, .npy/.npz, or `synthetic:SEED`.
    pub(crate) eval_data: String,
    /// Samples used (default 64).
    pub samples: Option<usize>,
    /// Samples per inference.
    pub batch_size: usize,
    /// How images become model input.
    pub preprocess: PreprocessRequest,
    /// The reference backend that runs the float model and every variant (its batch is set to
    /// `batch_size`).
    pub backend: BackendOptions,
    /// What the nodes left in float compute in.
    pub fallback: Fallback,
    /// How the weights' per-channel ranges are chosen.
    pub(crate) weight_clip: WeightClipping,
    /// Correct the biases of the INT8 convolutions for their weights' rounding (the input
    /// channel means measured on these samples).
    pub bias_correction: bool,
    /// Search the activation scales on these samples (the cache's are the starting point).
    pub scale_search: ScaleSearch,
    /// How each weight is rounded within its channel's range.
    pub weight_rounding: WeightRounding,
    /// Where the samples that decide whether a target is met come from.
    pub check: CheckSet,
}

/// How each weight's INT8 value is chosen within its channel's range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightRounding {
    /// To the nearest step.
    #[default]
    Nearest,
    /// Up or down, whichever way (weight by weight) makes the layer's output on the tuning
    /// samples closest to the float layer's ([`crate::quantize::adaptive_rounding`]).
    Adaptive,
}

/// The default number of samples the variants are measured on (tuning and check parts
/// together, or each source when the check set is separate).
pub(crate) const DEFAULT_EVAL_SAMPLES: usize = 64;

/// The share of the samples kept apart for the check by default.
pub const DEFAULT_CHECK_FRACTION: f64 = 0.25;

/// Where the check samples come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckSet {
    /// A seeded random share of the evaluation samples, kept apart from tuning.
    Split {
        /// The share, in (0, 1).
        fraction: f64,
        /// The shuffle's seed.
        seed: u64,
    },
    /// A separate source, read as `--eval-data` is.
    Data(String),
    /// No check: scores and targets are on the samples the search tuned on.
    Off,
}

impl Default for CheckSet {
    fn default() -> Self {
        CheckSet::Split {
            fraction: DEFAULT_CHECK_FRACTION,
            seed: 0,
        }
    }
}

impl std::fmt::Display for CheckSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckSet::Split { fraction, seed } => write!(
                f,
                "{:.0}% of the samples kept apart (seed {seed})",
                fraction * 100.0
            ),
            CheckSet::Data(source) => write!(f, "{source}"),
            CheckSet::Off => write!(f, "none (--check-fraction 0)"),
        }
    }
}
