//! What is checked before an engine is handed to TensorRT, each refusal one line that names the
//! file, what is wrong and what to do: is it an engine at all, of the flavour this binary runs,
//! whole (its bytes are the ones its sidecar describes), built by the TensorRT version found
//! here, and is there a GPU whose compute capability runs it. No TensorRT call is made here.

use super::engine_file::{engine_flavour, read_sidecar, sidecar_path, EngineSidecar};
use super::loader::{can_run_on, Flavour, BOUND};
use crate::cuda::info::GpuInfo;
use crate::digest::sha256_hex;
use crate::error::{ErrorKind, TypedError};
use crate::onnx::model::sniff_foreign_format;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// An engine file read whole and checked against its sidecar.
pub(crate) struct EngineBytes {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// SHA-256 of the bytes (the key of TensorRT-RTX's runtime cache; a build for NVIDIA's
    /// TensorRT, the `tensorrt` feature, has none).
    #[cfg_attr(feature = "tensorrt", allow(dead_code))]
    pub(crate) sha256: String,
    /// The sidecar trtkit wrote beside it, when there is one.
    pub sidecar: Option<EngineSidecar>,
}

/// Reads the engine at `path` and refuses what cannot be an engine this binary runs: an empty
/// or foreign file, an engine of the other TensorRT flavour, or one whose bytes differ from
/// what its sidecar describes (truncated or changed after the build).
pub(crate) fn read_engine(path: &Path) -> Result<EngineBytes> {
    let shown = path.display();
    let bytes = std::fs::read(path).with_context(|| format!("{shown}: cannot read"))?;
    let Some(flavour) = engine_flavour(&bytes) else {
        let what = if bytes.is_empty() {
            "an empty file".to_string()
        } else {
            sniff_foreign_format(&bytes)
                .map(str::to_string)
                .unwrap_or_else(|| format!("it starts with {:02x?}", &bytes[..bytes.len().min(4)]))
        };
        bail!("{shown}: not a TensorRT engine ({what}); TensorRT engines start with 'ftrt' or 'vtrt' — build one with `trtkit build MODEL.onnx`");
    };
    if flavour != BOUND.flavour {
        bail!("{shown}: {}", flavour_mismatch(flavour));
    }
    let sha256 = sha256_hex(&bytes);
    let sidecar = match read_sidecar(path) {
        Ok(s) => Some(s),
        Err(_) if !sidecar_path(path).exists() => None,
        Err(e) => {
            tracing::warn!("{shown}: its sidecar is unreadable, so the engine's integrity is not checked ({e:#})");
            None
        }
    };
    if let Some(s) = &sidecar {
        check_integrity(path, bytes.len() as u64, &sha256, s)?;
    }
    Ok(EngineBytes {
        bytes,
        sha256,
        sidecar,
    })
}

/// Why an engine of `flavour` cannot run in this binary, and what to do.
pub(crate) fn flavour_mismatch(flavour: Flavour) -> String {
    match flavour {
        Flavour::TensorRt => "a TensorRT (libnvinfer) engine; this trtkit runs TensorRT-RTX engines: build trtkit with `--features tensorrt` to run it, or rebuild the engine with `trtkit build`".into(),
        Flavour::TensorRtRtx => "a TensorRT-RTX engine; this trtkit is built for NVIDIA TensorRT (`--features tensorrt`): run it with a default trtkit build, or rebuild the engine with this one".into(),
    }
}

/// How the engine's bytes differ from the sidecar's description, if they do.
pub(crate) fn integrity_problem(len: u64, sha256: &str, sidecar: &EngineSidecar) -> Option<String> {
    let facts = &sidecar.facts;
    if len != facts.engine_bytes {
        Some(format!(
            "it has {len} bytes, its sidecar describes {}",
            facts.engine_bytes
        ))
    } else if sha256 != facts.engine_sha256 {
        Some(format!(
            "its {len} bytes are not the ones its sidecar describes (another SHA-256)"
        ))
    } else {
        None
    }
}

/// Refuses the engine at `path` (of `len` bytes hashing to `sha256`) when it is not what its
/// sidecar describes: one line naming the file, what differs and how to rebuild it.
pub(crate) fn check_integrity(
    path: &Path,
    len: u64,
    sha256: &str,
    sidecar: &EngineSidecar,
) -> Result<()> {
    if let Some(why) = integrity_problem(len, sha256, sidecar) {
        bail!(
            "{}: {why} ({}): the engine was truncated or changed after trtkit built it; rebuild it with `trtkit build {}`",
            path.display(),
            sidecar_path(path).display(),
            sidecar.facts.source_model
        );
    }
    Ok(())
}

/// Refuses an engine built by another TensorRT version than the one found here (from the
/// sidecar; engines do not move between versions).
pub(crate) fn check_built_version(path: &Path, sidecar: &EngineSidecar, found: &str) -> Result<()> {
    let built = &sidecar.key.tensorrt_version;
    if built != found {
        bail!(
            "{}: built with {} {built}, but this machine has {found}: engines do not move between TensorRT versions; rebuild it here with `trtkit build {}`",
            path.display(),
            sidecar.key.tensorrt_flavour,
            sidecar.facts.source_model
        );
    }
    Ok(())
}

/// The refusal when no GPU can run the engine: no driver, or no GPU at all.
pub fn no_gpu(path: &Path, why: &str) -> String {
    format!(
        "{}: a {} engine runs on an NVIDIA GPU, and this machine has none usable ({why}); {}",
        path.display(),
        BOUND.flavour,
        what_runs_it(BOUND.flavour)
    )
}

/// Where engines of a flavour run, for the end of a refusal.
fn what_runs_it(flavour: Flavour) -> &'static str {
    match flavour {
        Flavour::TensorRtRtx => "run it on a machine with an NVIDIA driver and a GPU of compute capability 8.0, 8.6, 8.9 or 12.x (A100, RTX 30/40/50, L4-class Ada)",
        Flavour::TensorRt => "run it on the machine (and GPU model) it was built on",
    }
}

/// The refusal for a GPU whose compute capability the engine's flavour does not run on, naming
/// the file, the GPU, its compute capability, what the engine needs and what to do; `said` is
/// what TensorRT itself reported, when it was asked.
pub(crate) fn gpu_refusal(path: &Path, gpu: &GpuInfo, said: Option<&str>) -> Option<String> {
    let (runs, why) = can_run_on(BOUND.flavour, &gpu.name, &gpu.compute_capability);
    if runs {
        return None;
    }
    let said = said
        .filter(|s| !s.is_empty())
        .map(|s| format!(" ({} said: {s})", BOUND.flavour))
        .unwrap_or_default();
    Some(format!(
        "{} cannot run on GPU {}: {why}{said}",
        path.display(),
        gpu.index
    ))
}

#[cfg(test)]
/// The message when TensorRT refused to deserialize the engine on `gpu`, saying `said`: the GPU
/// refusal when the engine's flavour does not run on this GPU and TensorRT's words are about
/// that (or it said nothing); otherwise the engine itself is damaged or from another version,
/// and the GPU's own limit is added when it has one.
pub(crate) fn deserialize_refusal(path: &Path, gpu: &GpuInfo, version: &str, said: &str) -> String {
    deserialize_error(path, gpu, version, said).to_string()
}

/// [`deserialize_refusal`] as an error, of kind [`ErrorKind::GpuCannotRunEngine`] when it is
/// the GPU refusal.
pub(crate) fn deserialize_error(
    path: &Path,
    gpu: &GpuInfo,
    version: &str,
    said: &str,
) -> anyhow::Error {
    // reads words, not a kind: TensorRT's, its only account of why it refused.
    let about_gpu = said.is_empty() || said.to_ascii_lowercase().contains("compute capabilit");
    match gpu_refusal(path, gpu, Some(said)) {
        Some(refusal) if about_gpu => TypedError::new(ErrorKind::GpuCannotRunEngine, refusal).into(),
        other => anyhow::anyhow!(
            "{}: {} {version} could not deserialize it on {} (compute capability {}): {said}; the file may be damaged or from another TensorRT version: rebuild it with `trtkit build`{}",
            path.display(),
            BOUND.flavour,
            gpu.name,
            gpu.compute_capability,
            if other.is_some() {
                " (and this GPU cannot run such engines anyway: see `trtkit doctor`)"
            } else {
                ""
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::engine_file::{EngineFacts, EngineKey};
    use super::super::profile::ShapeProfile;
    use super::*;
    use crate::tensor::Precision;

    fn sidecar(bytes: &[u8]) -> EngineSidecar {
        EngineSidecar {
            key: EngineKey {
                model_sha256: "ab".repeat(32),
                precision: Precision::Fp32,
                rewrite: None,
                calibration: None,
                profile: ShapeProfile { inputs: vec![] },
                builder: Default::default(),
                tensorrt_flavour: Flavour::TensorRtRtx,
                tensorrt_version: "1.7.1.116".into(),
                trtkit_version: "0.1.0".into(),
            },
            facts: EngineFacts {
                source_model: "m.onnx".into(),
                build_s: 0.1,
                engine_bytes: bytes.len() as u64,
                engine_sha256: sha256_hex(bytes),
                onnx_nodes: 1,
                parameters: 1,
                network_layers: 1,
                io: vec![],
                graph_sha256: None,
            },
        }
    }

    #[test]
    fn integrity_names_how_the_bytes_differ() {
        let whole = b"vtrt whole engine";
        let s = sidecar(whole);
        assert_eq!(integrity_problem(17, &sha256_hex(whole), &s), None);
        let short = integrity_problem(9, "x", &s).unwrap();
        assert_eq!(short, "it has 9 bytes, its sidecar describes 17");
        let other = integrity_problem(17, "x", &s).unwrap();
        assert!(other.contains("another SHA-256"), "{other}");
    }

    #[test]
    fn foreign_files_and_truncations_are_refused_before_tensorrt() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("p.engine");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\nrest").unwrap();
        let err = read_engine(&png).err().unwrap().to_string();
        assert!(
            err.contains("p.engine") && err.contains("a PNG image"),
            "{err}"
        );
        let empty = dir.path().join("e.engine");
        std::fs::write(&empty, b"").unwrap();
        let err = read_engine(&empty).err().unwrap().to_string();
        assert!(err.contains("an empty file"), "{err}");

        let other = dir.path().join("o.engine");
        let magic: &[u8] = if cfg!(feature = "tensorrt") {
            b"vtrt..."
        } else {
            b"ftrt..."
        };
        std::fs::write(&other, magic).unwrap();
        let err = read_engine(&other).err().unwrap().to_string();
        assert!(
            err.contains("o.engine") && err.contains("--features tensorrt"),
            "{err}"
        );

        let path = dir.path().join("m.engine");
        let whole: &[u8] = if cfg!(feature = "tensorrt") {
            b"ftrt the whole engine"
        } else {
            b"vtrt the whole engine"
        };
        super::super::engine_file::store(&path, whole, sidecar(whole)).unwrap();
        assert_eq!(read_engine(&path).unwrap().bytes, whole);
        std::fs::write(&path, &whole[..10]).unwrap();
        let err = read_engine(&path).err().unwrap().to_string();
        assert!(
            err.contains("m.engine: it has 10 bytes, its sidecar describes 21")
                && err.contains("truncated")
                && err.contains("trtkit build m.onnx"),
            "{err}"
        );
    }

    #[test]
    fn version_and_gpu_refusals_say_what_to_do() {
        let s = sidecar(b"x");
        let p = Path::new("engines/m.engine");
        check_built_version(p, &s, "1.7.1.116").unwrap();
        let err = check_built_version(p, &s, "1.8.0.3")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("1.7.1.116") && err.contains("1.8.0.3") && err.contains("rebuild"),
            "{err}"
        );
        let h200 = GpuInfo {
            index: 0,
            name: "NVIDIA H200".into(),
            memory_bytes: 1,
            compute_capability: "9.0".into(),
            uuid: None,
        };
        let a100 = GpuInfo {
            name: "NVIDIA A100".into(),
            compute_capability: "8.0".into(),
            ..h200.clone()
        };
        if cfg!(feature = "tensorrt") {
            assert_eq!(gpu_refusal(p, &h200, None), None);
        } else {
            let m = gpu_refusal(p, &h200, Some("engine refused")).unwrap();
            assert!(
                m.starts_with("engines/m.engine cannot run on GPU 0: ")
                    && m.contains("NVIDIA H200")
                    && m.contains("compute capability 9.0")
                    && m.contains("8.0, 8.6, 8.9 and 12.x")
                    && m.contains("said: engine refused"),
                "{m}"
            );
            assert_eq!(gpu_refusal(p, &a100, None), None);
        }
        let cc = "Error Code 6: API Usage Error (The engine cannot run on this GPU, which has compute capability 9.0.)";
        let broken = "Error Code 1: Serialization (Serialization assertion plan.header.size == blobSize failed.)";
        let on_a100 = deserialize_refusal(p, &a100, "1.7.1.116", broken);
        assert!(
            on_a100.contains("could not deserialize it on NVIDIA A100")
                && on_a100.contains("blobSize")
                && on_a100.contains("damaged")
                && !on_a100.contains("anyway"),
            "{on_a100}"
        );
        if !cfg!(feature = "tensorrt") {
            let m = deserialize_refusal(p, &h200, "1.7.1.116", cc);
            assert!(
                m.contains("cannot run on GPU 0") && m.contains("said: Error Code 6"),
                "{m}"
            );
            let m = deserialize_refusal(p, &h200, "1.7.1.116", broken);
            assert!(
                m.contains("damaged") && m.contains("cannot run such engines anyway"),
                "{m}"
            );
        }
        let m = no_gpu(p, "no CUDA driver (libcuda.so) could be loaded");
        assert!(
            m.starts_with("engines/m.engine: ") && m.contains("libcuda"),
            "{m}"
        );
    }
}
