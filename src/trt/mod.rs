//! TensorRT, loaded at run time: the binary never links against TensorRT, so it builds and runs
//! everywhere and TensorRT commands fail with a clear message where it is missing.
//!
//! It finds the libraries and says which TensorRT a GPU's compute capability needs and which
//! one this binary loads, turns shape flags into an optimization profile, maps and hashes ONNX
//! files, drives TensorRT's parser and builder (through the `trtx` crate) for the `build` job of
//! `jobs::build`, and names and keys engine files. It lists the engines a folder holds for one model,
//! describes an engine file, says what this machine offers (driver, GPUs, libraries, which
//! engines run where), and runs engines: a file checked before TensorRT sees it, its tensors
//! mapped to trtkit's I/O specs, batches checked against its profile, TensorRT-RTX's compiled
//! kernels kept beside it, and the engine behind the one `Backend` trait. The calls the
//! compiler cannot check (loading libraries, mapping files, binding device buffers and queueing
//! an engine) sit behind safe functions in two small modules, the only ones allowed `unsafe`.

pub mod backend;
pub(crate) mod built_engines;
pub(crate) mod engine_builder;
pub mod engine_file;
pub(crate) mod engine_io;
#[cfg(not(feature = "tensorrt"))]
mod engine_runtime_cache;
#[allow(unsafe_code)]
mod ffi;
pub mod flavour;
pub mod inspect;
pub mod loader;
pub(crate) mod logged_error;
pub(crate) mod model_file;
pub(crate) mod preflight;
pub mod profile;
// TensorRT-RTX's compiled kernels; a build for NVIDIA's TensorRT (the `tensorrt` feature) has none.
#[cfg_attr(feature = "tensorrt", allow(dead_code))]
pub(crate) mod runtime_cache;
mod runtime_log;
pub mod support;
#[allow(unsafe_code)]
mod sys;
