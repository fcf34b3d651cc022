//! Quantization, in one place: the precision recipe a strongly typed TensorRT build needs (FP16
//! autocast, or INT8 Q/DQ from a calibration cache, with its exclusions and fallback), applied
//! alike by the `build` and `quantize` jobs (in `jobs/`). Beside it, the INT8 evaluator that scores a rewrite against the FP32 model on
//! real samples (a check part kept apart from the tuning part, every variant scored against the
//! float model's outputs) and what is searched with it: which nodes stay in float for a target
//! closeness (a precision-blind search, which also finds the nodes an FP16 model keeps in
//! float32), per-layer activation scales, the per-node sensitivity table, and each weight's int8
//! rounding for the least error of its layer's output. Search results are kept under their keys.
//! The graph passes themselves are in `onnx::rewrite`; the calibration ranges in `calibration`.

pub mod adaptive_rounding;
pub(crate) mod already_quantized;
pub mod check_split;
pub mod eval_config;
pub mod eval_samples;
pub mod evaluate;
pub(crate) mod fp16_eval;
pub mod fp16_search;
pub(crate) mod kept_result;
pub(crate) mod load_check;
pub mod plan;
pub mod reference;
pub mod scale_search;
pub mod search;
pub(crate) mod search_float_nodes;
pub mod search_report;
pub mod sensitivity_scan;
pub mod target_search;
