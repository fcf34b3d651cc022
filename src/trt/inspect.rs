//! Describing an engine file: its flavour (from the magic), the sidecar trtkit wrote beside
//! it (key, build facts, I/O, profile; only when the engine's bytes are the ones it
//! describes), and — where this machine's GPU can deserialize it —
//! the layer list from TensorRT's engine inspector.

use super::engine_builder::LogCollector;
use super::engine_file::{file_flavour, read_sidecar, sidecar_path, EngineSidecar};
use super::loader::{can_run_on, locate_usable, Flavour, BOUND};
use super::preflight::check_integrity;
use crate::cuda::info::driver_info;
use crate::digest::sha256_hex;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use trtx::{LayerInformationFormat, Logger, Runtime};

/// What `inspect` says about an engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineInspection {
    /// The engine file.
    pub path: String,
    /// TensorRT or TensorRT-RTX, from the magic.
    pub flavour: Flavour,
    /// File size.
    pub(crate) file_bytes: u64,
    /// The sidecar, when trtkit built the engine.
    pub sidecar: Option<EngineSidecar>,
    /// Why there is no usable sidecar.
    pub(crate) sidecar_problem: Option<String>,
    /// The engine inspector's one line per layer (with `--layers`, where it could run).
    pub layers: Option<Vec<String>>,
    /// Why the layers could not be listed (with `--layers`).
    pub layers_unavailable: Option<String>,
}

/// Reads what can be read about the engine at `path`; `layers` also deserializes it (GPU only).
pub(crate) fn inspect_engine(
    path: &Path,
    layers: bool,
    tensorrt_dir: Option<&Path>,
) -> Result<EngineInspection> {
    let shown = path.display().to_string();
    let Some(flavour) = file_flavour(path)? else {
        bail!("{shown}: not a TensorRT engine (no ftrt/vtrt magic)");
    };
    let file_bytes = std::fs::metadata(path)?.len();
    let (sidecar, sidecar_problem) = match read_sidecar(path) {
        Ok(s) => {
            // What the sidecar says is shown only of the bytes it describes.
            let bytes = std::fs::read(path).with_context(|| format!("{shown}: cannot read"))?;
            check_integrity(path, bytes.len() as u64, &sha256_hex(&bytes), &s)?;
            (Some(s), None)
        }
        Err(_) if !sidecar_path(path).exists() => (
            None,
            Some("no sidecar: the engine was not built by trtkit, so its key and build facts are unknown".into()),
        ),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    let mut out = EngineInspection {
        path: shown,
        flavour,
        file_bytes,
        sidecar,
        sidecar_problem,
        layers: None,
        layers_unavailable: None,
    };
    if layers {
        match layer_list(path, flavour, tensorrt_dir) {
            Ok(l) => out.layers = Some(l),
            Err(e) => out.layers_unavailable = Some(format!("{e:#}")),
        }
    }
    Ok(out)
}

fn layer_list(path: &Path, flavour: Flavour, tensorrt_dir: Option<&Path>) -> Result<Vec<String>> {
    if flavour != BOUND.flavour {
        bail!("{}", super::preflight::flavour_mismatch(flavour));
    }
    let driver = driver_info();
    let Some(gpu) = driver.gpus.first() else {
        bail!(
            "no GPU here ({}); TensorRT-RTX deserializes engines only on a GPU",
            driver.error.unwrap_or_else(|| "none visible".into())
        );
    };
    let (ok, why) = can_run_on(flavour, &gpu.name, &gpu.compute_capability);
    if !ok {
        bail!("{why}");
    }
    let libs = locate_usable(tensorrt_dir)?;
    super::engine_builder::load(&libs)?;
    let bytes = std::fs::read(path)?;
    let errors = LogCollector::default();
    let logger = Logger::new(errors.clone()).map_err(|e| anyhow!("TensorRT logger: {e}"))?;
    let mut runtime = Runtime::new(&logger).map_err(|e| anyhow!("TensorRT runtime: {e}"))?;
    let engine = runtime.deserialize_cuda_engine(&bytes).map_err(|e| {
        let said = errors.take().join("; ").replace('\n', " ");
        anyhow!(
            "TensorRT-RTX could not deserialize it on {} (compute capability {}): {}",
            gpu.name,
            gpu.compute_capability,
            if said.is_empty() { e.to_string() } else { said }
        )
    })?;
    let inspector = engine
        .create_engine_inspector()
        .map_err(|e| anyhow!("engine inspector: {e}"))?;
    let text = inspector
        .engine_information(LayerInformationFormat::kONELINE)
        .map_err(|e| anyhow!("engine inspector: {e}"))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}
