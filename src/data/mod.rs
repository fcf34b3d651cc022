//! Data that goes into and comes out of backends: `.npy`/`.npz` files, ONNX `TensorProto`
//! files, seeded random inputs, and batch slicing.

pub mod batch;
pub mod npy;
pub mod npz;
pub mod proto;
pub mod synthetic;
