//! TensorRT, loaded at run time: the binary never links against TensorRT, so it builds and runs
//! everywhere and TensorRT commands fail with a clear message where it is missing.
//!
//! `loader` finds the libraries; `model_file` maps and hashes the ONNX file a build reads; `profile` turns shape flags into an optimization profile;
//! `engine_builder` drives TensorRT-RTX's parser and builder (through the `trtx` crate);
//! `engine_file` names, keys, checks and writes engines and their sidecars; `built_engines` lists
//! the engines of a folder built from one model, by their sidecars; `build` is the job that chains
//! them with the precision rewrite of [`crate::quantize`], `build_landing` what it leaves on disk
//! and in which order, and `build_report` what it reports;
//! `inspect` describes an engine file; `flavour` says which TensorRT a GPU's compute capability
//! needs and which one this binary loads; `support` says what this machine offers (driver, GPUs,
//! libraries, which engines run where). Running engines: `preflight` checks a file before
//! TensorRT sees it, `engine_io` maps its tensors to trtkit's I/O specs and checks batches
//! against its profile, `runtime_cache` keeps TensorRT-RTX's compiled kernels beside it
//! (`engine_runtime_cache`: for one opened engine), `runtime_log` holds the runtime's logger and
//! what TensorRT said, and `backend` is the engine behind the one `Backend` trait. The calls the
//! compiler cannot check (loading libraries, mapping files, binding device buffers and queueing
//! an engine) sit behind safe functions in two small modules, the only ones allowed `unsafe`.

pub mod backend;
pub mod build;
mod build_landing;
mod build_lock;
pub mod build_report;
pub mod built_engines;
pub mod engine_builder;
pub mod engine_file;
pub mod engine_io;
#[cfg(not(feature = "tensorrt"))]
mod engine_runtime_cache;
#[allow(unsafe_code)]
mod ffi;
pub mod flavour;
pub mod inspect;
pub mod loader;
pub mod model_file;
pub mod preflight;
pub mod profile;
pub mod runtime_cache;
mod runtime_log;
pub mod support;
#[allow(unsafe_code)]
mod sys;
