//! TensorRT, loaded at run time: the binary never links against libnvinfer, so it builds and
//! runs everywhere and TensorRT commands fail with a clear message where it is missing.

pub mod loader;
