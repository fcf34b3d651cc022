//! Image data for validation and calibration: datasets (ImageFolder, labels files), decoding,
//! preprocessing presets and the parallel loader.

pub mod dataset;
pub mod decode;
pub mod loader;
pub mod preprocess;
pub mod resize;
