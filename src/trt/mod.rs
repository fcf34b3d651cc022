//! TensorRT, loaded at run time: the binary never links against TensorRT, so it builds and runs
//! everywhere and TensorRT commands fail with a clear message where it is missing.
//!
//! It finds the libraries and says which TensorRT a GPU's compute capability needs and which
//! one this binary loads, turns shape flags into an optimization profile, maps and hashes ONNX
//! files, drives TensorRT's parser and builder (through the `trtx` crate) for the `build` job
//! (`jobs::build`), names and keys engine files, lists the engines a folder holds for one model,
//! and describes an engine file. For running engines (the engine backend is `backend::engine`)
//! it checks a file before TensorRT sees it, maps its tensors to trtkit's I/O specs and its
//! profile, and keeps TensorRT-RTX's compiled kernels beside it. The calls the compiler cannot
//! check (loading libraries, mapping files, binding device buffers and queueing an engine) sit
//! behind safe functions in two small modules, the only ones allowed `unsafe`.

pub(crate) mod built_engines;
pub(crate) mod engine_builder;
pub mod engine_file;
pub(crate) mod engine_io;
#[cfg(not(feature = "tensorrt"))]
pub(crate) mod engine_runtime_cache;
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
pub(crate) mod runtime_log;
#[allow(unsafe_code)]
mod sys;

// The engine backend (`backend::engine`) holds an opened engine's objects.
pub(crate) use ffi::{EngineObjects, EnqueueError};
