//! The flag groups several commands share (backend, output format, timing, preprocessing, the
//! FP16 and INT8 rewrites' options, a
//! target search's result applied to them), the
//! shared sample-count flag, and the command-line names of library enums.

pub mod backend;
pub mod batch_axis;
pub mod calibration;
pub mod fp16;
pub mod int8;
pub mod ort_cuda;
pub mod output;
pub mod preprocess;
pub mod samples;
pub(crate) mod search_result;
pub mod shapes;
pub mod slurm;
pub mod task;
pub mod timing;
pub mod values;
