//! Metrics: top-k accuracy, closeness of two outputs (numpy `isclose`, errors, cosine, top-k
//! rank agreement), latency statistics, bootstrap intervals of scores, layer-by-layer divergence.

pub mod accuracy;
pub mod bootstrap;
pub mod closeness;
pub mod compare;
pub mod detection;
pub mod latency;
pub mod layerwise;
pub mod non_finite;
pub mod segmentation;
pub mod task;
pub mod topk;
