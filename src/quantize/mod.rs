//! Quantization, in one place: the precision rewrite a strongly typed TensorRT build needs
//! (`job`: FP16 autocast or INT8 Q/DQ from a calibration cache, and the `quantize` job), the
//! INT8 evaluator that scores a rewrite against the FP32 model on real samples (`evaluate`), and
//! what is searched with it: which nodes stay in float for a target closeness (`target_search`),
//! per-layer scales (`scale_search`) and the per-node sensitivity table (`sensitivity_scan`).
//! `request` is the one entry that runs any of them for a caller. The graph passes themselves are
//! in `onnx::rewrite`; the calibration ranges in `calibration`.

pub mod evaluate;
pub mod job;
pub mod request;
pub mod scale_search;
pub mod sensitivity_scan;
pub mod target_search;
