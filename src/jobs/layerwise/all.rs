//! `compare --layerwise` in a workspace: the graph each FP16 or INT8 build kept beside its
//! engine, layer by layer against the FP32 model it was built from.

use super::{layerwise, LayerwiseConfig, LayerwiseReport};
use crate::jobs::compare::SideConfig;
use crate::progress::Progress;
use crate::tensor::Precision;
use crate::trt::built_engines::list;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a workspace's layerwise comparison needs.
#[derive(Clone, Debug)]
pub struct LayerwiseAllConfig {
    /// The FP32 model, the reference.
    pub model: PathBuf,
    /// The folder of the engines built from it.
    pub engines: PathBuf,
    /// Everything else; its A is replaced by each kept graph, its B by `model`.
    pub base: LayerwiseConfig,
}

/// One kept graph against the FP32 model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionLayerwise {
    /// The precision its engine was built at.
    pub precision: Precision,
    /// The engine whose build kept the graph.
    pub engine: String,
    /// The comparison (A: the kept graph, B: the FP32 model).
    pub report: LayerwiseReport,
}

/// Every kept graph of a workspace against its FP32 model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerwiseAllReport {
    /// The FP32 model.
    pub model: String,
    /// One comparison per kept graph, FP16 before INT8.
    pub graphs: Vec<PrecisionLayerwise>,
    /// Engines left out, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Compares the graph every FP16 or INT8 build of `config.model` kept with the model, layer by
/// layer; an error when no build kept one.
pub(crate) fn layerwise_all(
    config: &LayerwiseAllConfig,
    progress: &dyn Progress,
) -> Result<LayerwiseAllReport> {
    let built = list(&config.engines, &config.model)?;
    let mut notes: Vec<String> = built
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.engine.display(), s.why))
        .collect();
    let mut graphs = vec![];
    for b in built
        .current
        .iter()
        .filter(|b| b.precision() != Precision::Fp32)
    {
        let Some(graph) = &b.graph else {
            notes.push(format!(
                "{}: its build kept no intact graph beside it",
                b.engine.display()
            ));
            continue;
        };
        let mut one = config.base.clone();
        one.compare.a = SideConfig {
            path: graph.clone(),
            backend: one.compare.a.backend.clone(),
        };
        one.compare.b.path = config.model.clone();
        graphs.push(PrecisionLayerwise {
            precision: b.precision(),
            engine: b.engine.display().to_string(),
            report: layerwise(&one, progress)?,
        });
    }
    if graphs.is_empty() {
        bail!(
            "{}: no FP16 or INT8 engine built from {} kept its graph (build one with trtkit build --fp16 or --int8), and layerwise needs two ONNX graphs",
            config.engines.display(),
            config.model.display()
        );
    }
    Ok(LayerwiseAllReport {
        model: config.model.display().to_string(),
        graphs,
        notes,
    })
}
