//! Metrics: top-k accuracy, closeness of two outputs (numpy `isclose`, errors, cosine, top-k
//! rank agreement), latency statistics.

pub mod accuracy;
pub mod closeness;
pub mod compare;
pub mod latency;
pub mod topk;
