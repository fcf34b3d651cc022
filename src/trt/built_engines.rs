//! What was built from a workspace's model: the engines in its engine folder whose sidecar
//! records the model's SHA-256 (current), those built from another version of the same model
//! (stale: listed, never run by mistake), and the rewritten graph each FP16 or INT8 build kept
//! beside its engine, when its bytes are the ones the sidecar vouches for.

use super::engine_file::{is_engine_name, kept_graph_path, sidecar_path, EngineSidecar};
use crate::digest::{file_sha256, sha256_hex};
use crate::keyed_artifact;
use crate::tensor::Precision;
use std::path::{Path, PathBuf};

/// An engine built from the model as it is now.
#[derive(Clone, Debug)]
pub(crate) struct Built {
    /// The engine file.
    pub engine: PathBuf,
    /// Its sidecar.
    pub sidecar: EngineSidecar,
    /// The rewritten ONNX graph kept beside it, when present and intact.
    pub graph: Option<PathBuf>,
}

impl Built {
    /// The engine's precision.
    pub fn precision(&self) -> Precision {
        self.sidecar.key.precision
    }
}

/// An engine in the folder that cannot be counted as built from the model as it is now.
#[derive(Clone, Debug)]
pub(crate) struct Skipped {
    /// The engine file.
    pub engine: PathBuf,
    /// Why it is skipped.
    pub why: String,
}

/// The engines of a workspace's engine folder, sorted by precision (fp32, fp16, int8) then name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Artifacts {
    /// Built from the model as it is now.
    pub current: Vec<Built>,
    /// Built from another version of the model, or of unknown origin.
    pub skipped: Vec<Skipped>,
}

/// Lists the engines in `engines` against the model at `model`. Engines of other models (another
/// file name in their sidecar) are left out silently.
pub fn list(engines: &Path, model: &Path) -> anyhow::Result<Artifacts> {
    let model_sha = file_sha256(model)?;
    let model_name = model.file_name().map(|n| n.to_os_string());
    let mut out = Artifacts::default();
    for (engine, sidecar) in keyed_artifact::list::<EngineSidecar>(engines, is_engine_name) {
        let sidecar = match sidecar {
            Ok(s) => s,
            Err(_) => {
                out.skipped.push(Skipped {
                    why: format!(
                        "no readable sidecar ({}), so the model it was built from is unknown",
                        sidecar_path(&engine).display()
                    ),
                    engine,
                });
                continue;
            }
        };
        if sidecar.key.model_sha256 == model_sha {
            let graph = kept_graph_path(&engine);
            let intact = sidecar.facts.graph_sha256.as_ref().is_some_and(|want| {
                std::fs::read(&graph).is_ok_and(|bytes| &sha256_hex(&bytes) == want)
            });
            out.current.push(Built {
                engine,
                sidecar,
                graph: intact.then_some(graph),
            });
        } else if Path::new(&sidecar.facts.source_model).file_name() == model_name.as_deref() {
            out.skipped.push(Skipped {
                why: format!(
                    "stale: built from another version of the model (SHA-256 {}…, the model is now {}…); rebuild it",
                    &sidecar.key.model_sha256[..8.min(sidecar.key.model_sha256.len())],
                    &model_sha[..8]
                ),
                engine,
            });
        }
    }
    let rank = |p: Precision| match p {
        Precision::Fp32 => 0,
        Precision::Fp16 => 1,
        Precision::Int8 => 2,
    };
    out.current
        .sort_by(|a, b| (rank(a.precision()), &a.engine).cmp(&(rank(b.precision()), &b.engine)));
    Ok(out)
}
