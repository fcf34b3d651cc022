//! Metrics: top-k accuracy, closeness of two outputs, latency statistics.

pub mod accuracy;
pub mod latency;
