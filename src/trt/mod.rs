//! TensorRT, loaded at run time: the binary never links against TensorRT, so it builds and runs
//! everywhere and TensorRT commands fail with a clear message where it is missing.
//!
//! `loader` finds the libraries; `profile` turns shape flags into an optimization profile;
//! `builder` drives TensorRT-RTX's parser and builder (through the `trtx` crate);
//! `engine_file` names, keys, checks and writes engines; `precision` picks the FP16 or INT8
//! rewrite (and is the `quantize` job); `build` is the `build` job that chains them; `inspect`
//! describes an engine file; `support` says what this machine offers (driver, GPUs, libraries,
//! which engines run where).

#![allow(unsafe_code)]

pub mod build;
pub mod builder;
pub mod engine_file;
pub mod inspect;
pub mod loader;
pub mod precision;
pub mod profile;
pub mod support;
