//! CUDA through cudarc with dynamic loading: nothing here needs the CUDA toolkit at build time,
//! and a machine without a driver gets an error value, never a panic.

#![allow(unsafe_code)]

pub mod device;
pub mod enqueue;
pub mod feed;
pub mod harness;
pub mod info;
pub mod kernels;
pub mod memory;
pub mod ort_stream;
