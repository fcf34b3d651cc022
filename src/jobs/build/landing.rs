//! What a build leaves on disk, and in which order: the graph TensorRT parsed (for FP16 and
//! INT8 builds) is written and hashed while TensorRT builds, staged beside the engine; once the
//! build has succeeded it lands first, then the engine and its sidecar, which holds both hashes.
//! A build killed in between leaves a graph that no sidecar vouches for, never a wrong pair; a
//! build that fails leaves the folder as it was.

use super::lock::hold_before_landing;
use crate::atomic_file::{remove_if_present, stage_unsynced, StagedFile};
use crate::digest::sha256_hex;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::tensor::Precision;
use crate::trt::engine_builder::{build_engine, BuildLog, BuiltEngine};
use crate::trt::engine_file::{
    kept_graph_path, sidecar_path, store, BuilderSettings, EngineFacts, EngineKey, EngineSidecar,
};
use anyhow::{bail, Result};
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

/// The kept graph staged beside the engine (not yet in place), with its SHA-256.
pub(super) type StagedGraph = (StagedFile, String);

/// TensorRT builds the engine from `onnx` while, on another thread, the graph it parses is
/// written beside the engine and hashed (for every build that rewrote the model): the graph is
/// staged, and lands only once the caller commits it after a successful build. The engine's
/// bytes live as long as `log`.
#[allow(clippy::too_many_arguments)]
pub(super) fn build_with_kept_graph<'log>(
    log: &'log BuildLog,
    precision: Precision,
    settings: &BuilderSettings,
    model: &OnnxModel,
    onnx: &[u8],
    key: &EngineKey,
    path: &Path,
    progress: Arc<dyn Progress>,
) -> (Result<BuiltEngine<'log>>, Option<Result<StagedGraph>>) {
    std::thread::scope(|s| {
        let kept = (precision != Precision::Fp32).then(|| {
            s.spawn(|| -> Result<StagedGraph> {
                let staged = stage_unsynced(&kept_graph_path(path), onnx)?;
                Ok((staged, sha256_hex(onnx)))
            })
        });
        let built = build_engine(log, onnx, model.graph(), &key.profile, settings, progress);
        let kept = kept.map(|h| h.join().expect("writing the graph does not panic"));
        (built, kept)
    })
}

/// A build refused for a Reshape that pins the batch made dynamic says how to fix the model.
pub(super) fn explain_pinned_batch(
    e: anyhow::Error,
    released_batch: &Option<String>,
) -> anyhow::Error {
    match released_batch {
        // reads words, not a kind: TensorRT says it only in its parser's words.
        Some(input) if format!("{e:#}").contains("reshape would change volume") => e.context(format!(
            "input '{input}' was exported with a fixed batch and a Reshape in the graph still pins it: re-export the model with a dynamic batch axis, or build it static (an input shape with the batch it was exported with)"
        )),
        _ => e,
    }
}

/// The facts of the engine being landed that the build job knows.
pub(super) struct Landing<'a> {
    /// Where the engine goes.
    pub path: &'a Path,
    /// The model as the user named it.
    pub(crate) source_model: String,
    /// Nodes of the graph TensorRT parsed.
    pub(crate) onnx_nodes: usize,
    /// Parameters of the model.
    pub parameters: u64,
}

/// Puts a successful build in place: the old sidecar goes first (nothing is vouched for from
/// then on), then the staged graph lands, then the engine and its sidecar, which is returned.
pub(super) fn land(
    landing: Landing,
    kept_graph: Option<StagedGraph>,
    built: BuiltEngine,
    key: EngineKey,
) -> Result<EngineSidecar> {
    hold_before_landing();
    remove_if_present(&sidecar_path(landing.path))?;
    let graph_sha256 = match kept_graph {
        Some((staged, hash)) => {
            staged.commit_replacing()?;
            Some(hash)
        }
        None => None,
    };
    let facts = EngineFacts {
        source_model: landing.source_model,
        build_s: built.build_s,
        engine_bytes: 0,
        engine_sha256: String::new(),
        onnx_nodes: landing.onnx_nodes,
        parameters: landing.parameters,
        network_layers: built.layers,
        io: built.io,
        graph_sha256,
    };
    store(landing.path, &built.bytes, EngineSidecar { key, facts })
}

/// Fails early (before a long build) when the engine's folder cannot be written: its nearest
/// existing ancestor must be a folder we can create files in. Nothing is created here.
pub(super) fn check_writable(engine: &Path) -> Result<()> {
    let mut dir = match engine.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    while !dir.exists() {
        match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => dir = p.to_path_buf(),
            _ => {
                dir = PathBuf::from(".");
                break;
            }
        }
    }
    if !dir.is_dir() {
        bail!(
            "{}: cannot write the engine there: {} is not a folder",
            engine.display(),
            dir.display()
        );
    }
    let meta = std::fs::metadata(&dir)?;
    if meta.permissions().readonly() {
        bail!(
            "{}: cannot write the engine there: {} is read-only",
            engine.display(),
            dir.display()
        );
    }
    Ok(())
}
