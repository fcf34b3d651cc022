//! INT8 calibration: histograms of activations, range algorithms, the cache, and the run that
//! ties them to a model and a source of calibration batches.

pub mod cache;
pub mod collect;
pub mod histogram;
pub(crate) mod image_source;
pub(crate) mod multi_input;
pub mod range;
pub mod request;
pub mod sample_source;
