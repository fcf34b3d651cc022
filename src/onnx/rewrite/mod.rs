//! Graph passes: each takes a model and gives a new one with a report ([`pass::Pass`]), run as
//! declared lists; the reports sit in a leaf the passes import. The INT8 rewrite (which tensors
//! to quantize and where, QuantizeLinear/DequantizeLinear pairs with calibrated scales, opsets
//! raised to 13 where no node changes meaning, Constant-node weights moved into initializers,
//! bias correction), what calibration and the scale search run (activations exposed as graph
//! outputs, one node probed at several scales), the float rewrites before calibration
//! (BatchNormalization folding, cross-layer equalisation), the FP16 rewrite (chosen nodes kept
//! in float32, Gemm as MatMul and Add where tract cannot run a float16 Gemm) and its emulation
//! in float32 for backends that would widen it, and intermediate tensors marked as outputs for
//! the layerwise comparison. Element types of every tensor and initializer values are read
//! here for all of them.
//!
//! The passes on input declarations (shapes, batch) live in [`crate::onnx::shape`].

pub mod bias;
pub(crate) mod capture;
pub(crate) mod constant_weights;
pub mod equalize;
pub(crate) mod fold_bn;
pub mod fp16;
pub(crate) mod fp16_emulate;
mod fp16_keep;
mod fp16_subgraphs;
mod fp16_values;
mod fresh_names;
mod gemm_to_matmul;
pub mod initializer;
pub(crate) mod mark;
pub mod opset;
pub mod pass;
pub mod plan;
pub(crate) mod probe;
pub mod qdq;
pub mod report;
pub mod transformer_fusion;
pub mod types;
