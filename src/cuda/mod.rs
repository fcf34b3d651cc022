//! CUDA through cudarc with dynamic loading: nothing here needs the CUDA toolkit at build time,
//! and a machine without a driver gets an error value, never a panic.
//!
//! Calls Rust cannot check (the driver's C API, raw device addresses handed to kernels or to
//! ONNX Runtime) are confined to small modules that wrap each in a safe function or a type
//! owning a sized allocation; the rest of `cuda` is safe code over them and cudarc's safe types.

pub mod device;
pub mod enqueue;
pub mod feed;
pub mod harness;
pub mod identity;
pub mod info;
pub mod kernels;
#[allow(unsafe_code)]
mod launch;
#[allow(unsafe_code)]
pub mod memory;
#[allow(unsafe_code)]
pub mod ort_stream;
#[allow(unsafe_code)]
mod sys;
