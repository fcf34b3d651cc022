//! What a build reports: the engine and its key, whether it was reused or why it was built
//! again, the TensorRT used, the precision rewrites' summaries and where the time went.

use crate::calibration::request::CalibrateReport;
use crate::onnx::rewrite::fp16::Fp16Report;
use crate::quantize::plan::Int8Rewrite;
use crate::trt::engine_file::{EngineFacts, EngineKey};
use crate::trt::loader::{Flavour, TrtLibraries, BOUND};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The TensorRT that built (or would have built) the engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TensorRtUsed {
    /// Flavour.
    pub flavour: Flavour,
    /// Version.
    pub version: String,
    /// The runtime library's path.
    pub library: String,
}

/// INT8: the calibration behind the scales.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Int8Summary {
    /// The calibration cache used.
    pub cache: String,
    /// The calibration run (absent for a cache given by hand).
    pub calibration: Option<CalibrateReport>,
    /// What the rewrite did (its counts and float nodes absent when the engine was reused, its
    /// float nodes when none were left out; its fallback where it is not float32).
    #[serde(flatten)]
    pub rewrite: Int8Rewrite,
}

/// Where the time went, in seconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BuildTiming {
    /// Finding TensorRT, reading, hashing and decoding the model, the shape pass.
    pub(crate) load_s: f64,
    /// INT8 calibration (or the cache lookup).
    pub(crate) calibrate_s: f64,
    /// The precision rewrite and serializing the model handed to TensorRT.
    pub(crate) rewrite_s: f64,
    /// TensorRT's ONNX parser.
    pub(crate) parse_s: f64,
    /// TensorRT's builder.
    pub(crate) build_s: f64,
    /// Writing the engine and its sidecar (or checking the existing one).
    pub(crate) write_s: f64,
    /// Everything, from the job's start.
    pub total_s: f64,
}

/// What `build` reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BuildReport {
    /// The source model.
    pub model: String,
    /// The engine file.
    pub engine: String,
    /// Its sidecar.
    pub sidecar: String,
    /// Size of the engine in bytes.
    pub engine_bytes: u64,
    /// Whether an existing engine with the same key was reused.
    pub reused: bool,
    /// Why an existing engine at that path was not reused (empty when there was none).
    pub rebuilt_because: Vec<String>,
    /// Whether the batch range came from the defaults.
    pub(crate) default_batch_range: bool,
    /// The key the engine is stored under.
    pub key: EngineKey,
    /// The facts of the build (from the sidecar when reused).
    pub facts: EngineFacts,
    /// The TensorRT used.
    pub tensorrt: TensorRtUsed,
    /// FP16: what the rewrite did (absent when reused).
    pub fp16: Option<Fp16Report>,
    /// INT8: the scales and what the rewrite did.
    pub int8: Option<Int8Summary>,
    /// Where the time went.
    pub timing: BuildTiming,
}

/// The report of a build of `model` into `path`, before the engine is looked up or built.
pub(super) fn new_report(
    shown: &str,
    path: &Path,
    key: EngineKey,
    default_batch_range: bool,
    tensorrt: TensorRtUsed,
    int8: Option<Int8Summary>,
    timing: BuildTiming,
) -> BuildReport {
    let sidecar = crate::trt::engine_file::sidecar_path(path);
    BuildReport {
        model: shown.to_string(),
        engine: path.display().to_string(),
        sidecar: sidecar.display().to_string(),
        engine_bytes: 0,
        reused: false,
        rebuilt_because: vec![],
        default_batch_range,
        key,
        facts: EngineFacts {
            source_model: shown.to_string(),
            build_s: 0.0,
            engine_bytes: 0,
            engine_sha256: String::new(),
            onnx_nodes: 0,
            parameters: 0,
            network_layers: 0,
            io: vec![],
            graph_sha256: None,
        },
        tensorrt,
        fp16: None,
        int8,
        timing,
    }
}

/// The TensorRT a build uses, as its report says (`libs`: `None` while not yet waited for).
pub(super) fn tensorrt_used(libs: Option<&TrtLibraries>) -> TensorRtUsed {
    TensorRtUsed {
        flavour: BOUND.flavour,
        version: libs.map(|l| l.version.clone()).unwrap_or_default(),
        library: libs
            .map(|l| l.runtime.display().to_string())
            .unwrap_or_default(),
    }
}
