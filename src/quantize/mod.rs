//! Quantization, in one place: the precision recipe a strongly typed TensorRT build needs
//! (`plan`: FP16 autocast or INT8 Q/DQ from a calibration, with its exclusions and fallback,
//! applied alike by `build` and the `quantize` job in `job`), the
//! INT8 evaluator that scores a rewrite against the FP32 model on real samples (`evaluate`), and
//! what is searched with it: which nodes stay in float for a target closeness (`target_search`,
//! through the precision-blind `search`), per-layer scales (`scale_search`) and the per-node
//! sensitivity table (`sensitivity_scan`). The same search finds the nodes an FP16 model keeps in
//! float32 (`fp16_eval` scores FP16 variants, `fp16_search` runs it). `request` is the one entry
//! that runs any of them for a caller. The graph passes themselves are in `onnx::rewrite`; the
//! calibration ranges in `calibration`. `eval_config` says what the measurements run on,
//! `eval_samples` reads the samples and keeps a check part apart from the tuning part,
//! `reference` holds them with the float model's outputs, `kept_result` keeps search results
//! under their keys, and `adaptive_rounding` chooses the weights' int8 values for the least error
//! of each layer's output.

pub mod adaptive_rounding;
pub mod eval_config;
pub mod eval_samples;
pub mod evaluate;
pub mod fp16_eval;
pub mod fp16_search;
pub mod job;
pub mod kept_result;
pub mod plan;
pub mod reference;
pub mod request;
pub mod scale_search;
pub mod search;
pub mod sensitivity_scan;
pub mod target_search;
