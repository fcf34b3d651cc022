//! INT8 calibration: histograms of activations, range algorithms, the cache, and the run that
//! ties them to a model and a source of calibration batches.

pub mod batches;
pub mod cache;
pub mod collect;
pub mod histogram;
pub mod image_batches;
pub mod job;
pub mod multi_input;
pub mod range;
