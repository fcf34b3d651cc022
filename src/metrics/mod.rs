//! Metrics over outputs: closeness (numpy `isclose`, errors, cosine) and top-k rank agreement.

pub mod closeness;
pub mod compare;
pub mod topk;
