//! Running models and measuring them: the jobs behind `run` (latency), `validate` (accuracy)
//! and `compare` (closeness), the one function that opens a backend from a file, and the batch
//! runner the comparator and the accuracy evaluation share. Each job takes a plain config and
//! returns a report that serializes both ways; none of it knows about flags or terminals.

pub mod accuracy;
pub mod batches;
pub mod compare;
pub mod gpu_check;
pub mod int8_eval;
pub mod int8_target;
pub mod latency;
pub mod open;
pub mod precisions;
pub mod progress;
pub mod scale_search;
pub mod sensitivity;
