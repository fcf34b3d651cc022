//! Measurements over results: latency statistics today; accuracy and closeness join later.

pub mod latency;
