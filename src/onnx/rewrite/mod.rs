//! Graph passes: each takes a model and gives a new one with a report ([`pass::Pass`]).
//!
//! - [`pass`]: the pass trait and running a declared list of passes.
//! - [`report`]: what each pass reports (a leaf: the passes import it, it imports none of them).
//! - [`plan`]: which tensors INT8 quantizes (activations and weights) and where.
//! - [`capture`]: exposes the activations to quantize as extra graph outputs (calibration).
//! - [`mark`]: marks intermediate tensors as outputs with their own types (layerwise compare).
//! - [`opset`]: raises opsets 9–12 to 13 (per-channel Q/DQ) where no node changes meaning.
//! - [`qdq`]: inserts QuantizeLinear/DequantizeLinear pairs with calibrated scales.
//! - [`probe`]: one node at several activation scales, for the scale search.
//! - [`constant_weights`]: weights held by Constant nodes moved into initializers (before INT8).
//! - [`bias`]: bias correction of the convolutions whose weights INT8 quantizes.
//! - [`equalize`]: cross-layer equalisation of conv pairs (a float rewrite before calibration).
//! - [`fold_bn`]: BatchNormalization folded into the Conv before it (equalisation needs it).
//! - [`fp16`]: converts a float32 graph to float16, keeping chosen ops in float32 (and, by
//!   `fp16_keep`, what must stay float32 whatever is chosen).
//!   `fp16_values` converts the values, on every core.
//! - [`fp16_emulate`]: FP16 numerics in float32: a float16 graph computed wide, every float16
//!   tensor rounded to float16 (for backends that would widen it).
//! - `gemm_to_matmul`: Gemm as MatMul and Add, before the FP16 rewrite (tract cannot run a
//!   float16 Gemm).
//! - [`types`]: element types of every tensor, which the passes above rely on.
//! - [`initializer`]: reading and writing initializer values.
//!
//! The passes on input declarations (shapes, batch) live in [`crate::onnx::shape`].

pub mod bias;
pub mod capture;
pub mod constant_weights;
pub mod equalize;
pub mod fold_bn;
pub mod fp16;
pub mod fp16_emulate;
mod fp16_keep;
mod fp16_values;
mod gemm_to_matmul;
pub mod initializer;
pub mod mark;
pub mod opset;
pub mod pass;
pub mod plan;
pub mod probe;
pub mod qdq;
pub mod report;
pub mod types;
