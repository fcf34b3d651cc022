//! The jobs, one module or folder each, named after the subcommand they serve: `build` (ONNX →
//! keyed engine), `calibrate` (keyed INT8 calibration caches, also run on demand by the INT8
//! builds), `quantize` (the precision rewrites on their own, and the one entry for every
//! quantize request), `run` (latency), `validate` (accuracy), `compare` (closeness), `layerwise`
//! (`compare --layerwise`: divergence tensor by tensor), every precision of one model side by side
//! (`precision_compare`, `precision_table`), `init` (a workspace made), the GPU check behind `doctor --check`, and `inspect`
//! (an ONNX model or an engine file); with the one function that opens a file by its kind. Each
//! takes a plain config and returns a report that serializes both ways; none of it knows about
//! flags or terminals. They sit above `backend/`, `trt/`, `quantize/`, `calibration/` and `data/`
//! at once, which hold the machinery the jobs call.
//!
//! One job lives elsewhere, for the cycle it would otherwise make: `report` (`report::job`),
//! because `report/` renders every job's report and the page is made of those renderers.
//! `calibrate`'s config and report types stay in `calibration::request` (re-exported here), because
//! an INT8 precision plan in `quantize/`, below the jobs, carries a calibration request.

pub mod build;
pub mod calibrate;
pub mod compare;
pub mod doctor;
pub mod init;
pub mod inspect;
pub mod layerwise;
pub mod precision_compare;
pub mod precision_table;
pub mod quantize;
pub mod run;
pub mod validate;
