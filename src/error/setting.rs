//! The settings a library error can point the user at. The library says what is wrong and which
//! setting fixes it, in its own terms; the command line turns the setting into its flag (and a
//! workspace can turn it into its `trtkit.toml` key), reading it from the error's
//! [`Hint`](super::Hint).

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
    /// How images become model input as a whole (resize, crop, mean and std, layout).
    Preprocess,
    /// The nodes the FP16 rewrite keeps in float32 by name or pattern.
    KeepFp32Nodes,
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
