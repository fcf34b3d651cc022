//! The jobs that run a model opened from a path and measure it: `run` (latency), `validate`
//! (accuracy), `compare` (closeness), every precision of one model side by side, and the GPU
//! check behind `doctor --check`; with the one function that opens a backend from a file and the
//! batch runner the comparator and the accuracy evaluation share. They sit above `backend/`,
//! `trt/` and `data/` at once, which is why they have a folder of their own rather than a place
//! in one of those. Each job takes a plain config and returns a report that serializes both
//! ways; none of it knows about flags or terminals.

pub mod batch_runner;
pub mod compare;
pub mod doctor_check;
pub mod open;
pub mod precision_table;
pub mod run;
pub mod validate;
