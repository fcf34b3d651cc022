//! trtkit: take an ONNX model to a validated TensorRT engine and prove how fast and how
//! accurate it is. The modules follow the pipeline: `tensor` (the bottom: element types, host
//! tensors, dims, precisions), `onnx` (load, inspect, rewrite passes), `data`, `backend`,
//! `cuda`, `calibration`, `quantize` (the FP16/INT8 rewrites and the INT8 searches), `trt` (the
//! TensorRT build job, engine files, the engine backend; with `cuda` the only places with
//! `unsafe`), `jobs` (run, validate, compare, inspect: the jobs that open a model from a path),
//! `metrics` (pure arithmetic), `bench`, `report` (rendering reports and progress), and `cli`
//! (flags and configs). Leaves beside them: `progress`, `atomic_file`, `keyed_artifact`, `setting`,
//! `units`, `digest` (SHA-256, the one hash), `number` (the float flags' value parser), `host_memory`, `this_host`, `error_kind`
//! (errors that carry the condition code acts on).
//! `tests/module_layers.rs` keeps the imports between modules, and between the files of each
//! module, free of cycles.
//! The public modules are those the binary, tests, benchmarks and examples use; the rest are
//! `pub(crate)`, and `tests/public_surface.rs` keeps that list.

#![deny(unsafe_code)]

pub(crate) mod atomic_file;
pub mod backend;
pub mod bench;
pub mod calibration;
pub mod cli;
pub mod cuda;
pub mod data;
pub mod digest;
pub(crate) mod error;
#[cfg(any(test, feature = "test-support"))]
pub mod fuzz_targets;
pub(crate) mod host_memory;
pub mod jobs;
pub mod keyed_artifact;
pub mod metrics;
pub(crate) mod number;
pub mod onnx;
pub(crate) mod output_path;
pub mod progress;
pub mod quantize;
pub mod report;
pub mod tensor;
pub(crate) mod this_host;
pub mod trt;
pub(crate) mod units;
pub(crate) mod workspace;
