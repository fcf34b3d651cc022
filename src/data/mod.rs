//! Data that goes into backends: image datasets (ImageFolder, labels files), decoding,
//! preprocessing presets and the parallel loader; `.npy`/`.npz` and ONNX `TensorProto` files,
//! seeded random inputs, and batch slicing.

pub(crate) mod batch_axis;
pub mod coco;
pub mod dataset;
pub mod decode;
pub mod decode_budget;
pub(crate) mod image_size;
pub(crate) mod labels_file;
pub mod loader;
pub mod masks;
pub mod npy;
pub mod npz;
pub(crate) mod npz_spool;
pub(crate) mod png_rows;
pub mod preprocess;
pub mod proto;
pub(crate) mod random_window;
pub mod resize;
pub mod row_sink;
pub mod sample;
pub mod synthetic;
pub mod walk;
