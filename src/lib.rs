//! trtkit: take an ONNX model to a validated TensorRT engine and prove how fast and how
//! accurate it is. The modules follow the pipeline: `tensor` (the bottom: element types, host
//! tensors, dims), `onnx` (load, inspect, rewrite passes), `data`, `backend`, `calibration`,
//! `cuda` and `trt` (the GPU side, the only places with `unsafe`), `measure` (the run, validate
//! and compare jobs), `metrics`, `report` (rendering reports and progress), and `cli` (flags
//! and configs). `tests/module_layers.rs` keeps the imports between them free of cycles.

#![deny(unsafe_code)]

pub mod atomic_file;
pub mod backend;
pub mod bench;
pub mod calibration;
pub mod cli;
pub mod cuda;
pub mod data;
pub mod jobs;
pub mod metrics;
pub mod onnx;
pub mod progress;
pub mod quantize;
pub mod report;
pub mod setting;
pub mod tensor;
pub mod trt;
pub mod units;
pub mod workspace;
