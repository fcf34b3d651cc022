//! Metrics: pure functions from outputs and timings to numbers. Top-k accuracy; closeness of
//! two outputs (numpy `isclose`, errors, cosine, top-k rank agreement, non-finite values);
//! detection (box decoding, matching, COCO mAP) and segmentation (mIoU, pixels that kept their
//! class) scores; step and CTC-reading agreement of sequences; latency statistics and set-up times; bootstrap intervals of scores;
//! layer-by-layer divergence.

pub mod accuracy;
pub mod bootstrap;
pub mod closeness;
pub mod compare;
pub mod detection;
pub mod latency;
pub mod layerwise;
pub mod non_finite;
pub mod segmentation;
pub mod sequence;
pub mod setup;
pub mod task;
pub(crate) mod task_accumulator;
pub mod topk;
