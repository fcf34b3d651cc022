//! trtkit: take an ONNX model to a validated TensorRT engine and prove how fast and how
//! accurate it is. The modules follow the pipeline: `onnx` (load, inspect, rewrite), `cuda`
//! and `trt` (the GPU side, the only places with `unsafe`), `report` (tables and JSON), and
//! `cli` (one file per subcommand).

pub mod atomic_file;
pub mod backend;
pub mod calibration;
pub mod cli;
pub mod cuda;
pub mod data;
pub mod measure;
pub mod metrics;
pub mod onnx;
pub mod report;
pub mod tensor;
pub mod trt;
