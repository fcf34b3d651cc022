//! The settings a library error can point the user at. The library says what is wrong and which
//! setting fixes it, in its own terms; the command line turns the setting into its flag (and a
//! workspace can turn it into its `trtkit.toml` key). Imports nothing else of the crate.

/// A user-facing setting, by what it controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// CPU or CUDA.
    Device,
    /// Which GPU.
    DeviceId,
    /// CPU threads.
    Threads,
    /// Samples per inference.
    BatchSize,
    /// How many samples a comparison draws.
    Samples,
    /// Input shape overrides.
    InputShape,
    /// Labels of a flat dataset folder.
    Labels,
    /// Class names to indices.
    ClassMap,
    /// Center-crop size of the image preprocessing.
    Crop,
    /// NCHW or NHWC.
    Layout,
    /// INT8 calibration data.
    CalibData,
    /// INT8 precision.
    Int8,
    /// The batch range of a dynamic-batch engine.
    BatchRange,
    /// Per-input shape ranges of an engine's profile.
    ShapeRanges,
    /// Where TensorRT-RTX is installed.
    TensorrtDir,
    /// Compute only, inputs resident on the device (GPU backends only).
    NoTransfers,
    /// Replaying a captured CUDA graph (GPU backends only).
    CudaGraph,
    /// Several concurrent streams (GPU backends only).
    Streams,
}

/// An error that a different value of `setting` would fix.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct FixWith {
    /// What is wrong, without naming any flag.
    pub message: String,
    /// The setting that fixes it.
    pub setting: Setting,
}

/// An `anyhow` error saying `message`, fixable with `setting`.
pub(crate) fn fix_with(setting: Setting, message: impl Into<String>) -> anyhow::Error {
    FixWith {
        message: message.into(),
        setting,
    }
    .into()
}
