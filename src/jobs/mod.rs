//! The jobs that run a model opened from a path and measure it: `run` (latency), `validate`
//! (accuracy), `compare` (closeness), `compare --layerwise` (divergence tensor by tensor), every precision of one model side by side, the GPU
//! check behind `doctor --check`, and `inspect` (an ONNX model or an engine file, told apart as
//! every other job tells them); with the one function that opens a file by its kind. They sit above `backend/`,
//! `trt/` and `data/` at once, which is why they have a folder of their own rather than a place
//! in one of those. Each job takes a plain config and returns a report that serializes both
//! ways; none of it knows about flags or terminals.

pub mod batch_memory;
pub mod compare;
pub mod doctor_check;
pub mod inspect;
pub mod layerwise;
pub mod layerwise_all;
mod layerwise_match;
pub mod open;
pub mod precision_compare;
pub mod precision_table;
pub mod run;
pub mod validate;
pub mod validate_feed;
pub(crate) mod validate_scoring;
