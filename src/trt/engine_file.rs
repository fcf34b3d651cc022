//! Engine files and their keys: the name trtkit gives an engine, the JSON sidecar beside it
//! (the key it was built under and the facts of the build), the lookup that reuses an engine
//! only when its key matches and its bytes are the ones the sidecar describes, and the write of
//! both (an engine is a keyed artifact, its sidecar the key file).

use super::loader::Flavour;
use super::profile::ShapeProfile;
use crate::keyed_artifact::{self, Durability, KeyFile, Lookup};
use crate::tensor::Precision;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The first four bytes of an engine file and the flavour they mean.
pub(crate) const MAGICS: &[(&[u8; 4], Flavour)] = &[
    (b"ftrt", Flavour::TensorRt),
    (b"vtrt", Flavour::TensorRtRtx),
];

/// The flavour of an engine, from its first bytes; `None` when it is not an engine.
pub(crate) fn engine_flavour(bytes: &[u8]) -> Option<Flavour> {
    MAGICS
        .iter()
        .find(|(m, _)| bytes.starts_with(*m))
        .map(|(_, f)| *f)
}

/// Reads the flavour of the engine file at `path` (its first four bytes).
pub(crate) fn file_flavour(path: &Path) -> Result<Option<Flavour>> {
    use std::io::Read;
    let mut head = [0u8; 4];
    let mut f =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let n = f
        .read(&mut head)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(engine_flavour(&head[..n]))
}

/// Builder settings that change the engine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuilderSettings {
    /// Workspace memory pool limit in MiB (`None`: TensorRT's default).
    pub(crate) workspace_mib: Option<u64>,
    /// Builder optimization level 0–5 (`None`: TensorRT's default, 3).
    pub(crate) optimization_level: Option<i32>,
}

/// Everything an engine depends on: equal keys mean the same engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineKey {
    /// SHA-256 of the source ONNX file.
    pub model_sha256: String,
    /// The precision rewrite applied.
    pub precision: Precision,
    /// Settings of that rewrite (FP16: the ops kept in float32 and the I/O type), as text.
    pub rewrite: Option<String>,
    /// INT8: SHA-256 of the calibration cache's key file (model, data, preprocessing,
    /// algorithm, batch) or, for a cache given by hand, of the cache itself.
    pub calibration: Option<String>,
    /// The optimization profile.
    pub profile: ShapeProfile,
    /// Builder settings.
    pub builder: BuilderSettings,
    /// TensorRT flavour that built the engine.
    pub tensorrt_flavour: Flavour,
    /// Its version.
    pub tensorrt_version: String,
    /// trtkit's version.
    pub trtkit_version: String,
}

impl EngineKey {
    /// The first 8 hex digits of the model hash (what engine names carry).
    pub(crate) fn model_hash8(&self) -> &str {
        &self.model_sha256[..8.min(self.model_sha256.len())]
    }
}

/// One engine input or output as the network declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTensor {
    /// Tensor name.
    pub name: String,
    /// `input` or `output`.
    pub io: String,
    /// Element type, e.g. `float32`.
    pub dtype: String,
    /// Dims, `-1` where dynamic.
    pub dims: Vec<i64>,
}

/// What the build found and produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineFacts {
    /// The source model as given.
    pub(crate) source_model: String,
    /// Seconds spent in TensorRT's builder.
    pub(crate) build_s: f64,
    /// Size of the engine file.
    pub engine_bytes: u64,
    /// SHA-256 of the engine file: the sidecar describes exactly these bytes.
    pub(crate) engine_sha256: String,
    /// Nodes of the ONNX graph that was built (after the rewrite).
    pub(crate) onnx_nodes: usize,
    /// Parameters of the source model (initializer elements).
    pub parameters: u64,
    /// Layers of the parsed TensorRT network.
    pub(crate) network_layers: usize,
    /// Inputs and outputs of the network.
    pub io: Vec<EngineTensor>,
    /// SHA-256 of the rewritten ONNX graph kept beside the engine ([`kept_graph_path`]; FP16
    /// and INT8 builds), so that graph can run on a reference backend where the engine cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) graph_sha256: Option<String>,
}

/// The JSON beside an engine: its key and the facts of its build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineSidecar {
    /// What the engine depends on.
    pub key: EngineKey,
    /// What the build found.
    pub facts: EngineFacts,
}

/// The default path of an engine: `DIR/<stem>-<hash8>-<precision>-<shapes>.engine`. When the
/// build set input dims the file leaves open or declares otherwise (`reshaped`: `--dim seq=64`,
/// `--input-shape -1x3x320x320`), the batch-range tag alone would name engines of other shapes
/// alike, so a hash of the whole profile follows it (`b1_8_8-p1a2b3c4d`).
pub(crate) fn engine_path(
    dir: &Path,
    model_stem: &str,
    key: &EngineKey,
    reshaped: bool,
) -> PathBuf {
    let mut shapes = key.profile.file_tag();
    if reshaped && shapes.starts_with('b') {
        shapes = format!("{shapes}-{}", key.profile.hash_tag());
    }
    dir.join(format!(
        "{model_stem}-{}-{}-{shapes}.engine",
        key.model_hash8(),
        key.precision,
    ))
}

/// File extensions of serialized TensorRT engines.
pub const ENGINE_EXTENSIONS: [&str; 3] = ["engine", "plan", "trt"];

/// Whether `path` is named like an engine file.
pub(crate) fn is_engine_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ENGINE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The rewritten ONNX graph an FP16 or INT8 build keeps beside its engine: `<engine>.onnx`.
pub(crate) fn kept_graph_path(engine: &Path) -> PathBuf {
    let mut name = engine.as_os_str().to_owned();
    name.push(".onnx");
    PathBuf::from(name)
}

/// The sidecar of an engine: `<engine>.json`.
pub(crate) fn sidecar_path(engine: &Path) -> PathBuf {
    keyed_artifact::key_file_path::<EngineSidecar>(engine)
}

/// Reads an engine's sidecar.
pub(crate) fn read_sidecar(engine: &Path) -> Result<EngineSidecar> {
    keyed_artifact::read_key_file(engine)
}

/// A sidecar as written: its fields and a seal, the SHA-256 of those fields, so a hand edit
/// (another precision, another batch range) is told from what the build wrote. A sidecar with no
/// seal (written by an older trtkit) is read as it is.
#[derive(Serialize, Deserialize)]
struct SealedSidecar {
    #[serde(flatten)]
    sidecar: EngineSidecar,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seal: Option<String>,
}

/// The seal of `sidecar`: the SHA-256 of its fields as compact JSON.
fn seal_of(sidecar: &EngineSidecar) -> Result<String> {
    Ok(crate::digest::sha256_hex(&serde_json::to_vec(sidecar)?))
}

impl KeyFile for EngineSidecar {
    const SUFFIX: &'static str = ".json";

    fn parse(bytes: &[u8]) -> Result<Self> {
        let sealed: SealedSidecar =
            serde_json::from_slice(bytes).context("not a trtkit engine sidecar")?;
        if let Some(seal) = &sealed.seal {
            if *seal != seal_of(&sealed.sidecar)? {
                bail!(
                    "edited after the build: what it says of the engine no longer matches what \
                     the build wrote, so it is not used; rebuild the engine, or delete this file \
                     to run the engine without it"
                );
            }
        }
        Ok(sealed.sidecar)
    }

    fn encode(&self, _engine: &Path) -> Result<Vec<u8>> {
        let sealed = SealedSidecar {
            sidecar: self.clone(),
            seal: Some(seal_of(self)?),
        };
        Ok(serde_json::to_vec_pretty(&sealed)?)
    }

    fn key_fields(&self) -> serde_json::Value {
        serde_json::to_value(&self.key).unwrap_or_default()
    }

    fn artifact_sha256(&self) -> Option<&str> {
        Some(&self.facts.engine_sha256)
    }
}

/// Looks up the engine at `path` for `key`: a hit holds its sidecar.
pub fn lookup(path: &Path, key: &EngineKey) -> Lookup<Box<EngineSidecar>> {
    let now = serde_json::to_value(key).unwrap_or_default();
    keyed_artifact::lookup::<EngineSidecar>(path, &now)
        .and_then(|found| Ok(Box::new(found.key_file)))
}

/// Writes an engine and its sidecar so that no interruption leaves a pair a later run trusts
/// ([`keyed_artifact::store`]): the old sidecar goes first, then the engine lands atomically,
/// then the new sidecar, which holds the engine's SHA-256 (computed on a second thread while the
/// engine is written, and checked on every reuse). Neither is flushed to disk before its rename
/// (a large engine's fsync costs more than the build of a small one); the hash check is what
/// makes that safe. Returns the sidecar as written.
pub(crate) fn store(
    path: &Path,
    bytes: &[u8],
    mut sidecar: EngineSidecar,
) -> Result<EngineSidecar> {
    if engine_flavour(bytes).is_none() {
        bail!(
            "{}: TensorRT returned bytes that do not start with an engine magic; nothing written",
            path.display()
        );
    }
    keyed_artifact::store(path, bytes, Durability::Unsynced, |hash| {
        sidecar.facts.engine_bytes = bytes.len() as u64;
        sidecar.facts.engine_sha256 = hash;
        sidecar
    })
}

#[cfg(test)]
mod tests {
    use super::super::profile::InputProfile;
    use super::*;
    use crate::digest::sha256_hex;

    fn key() -> EngineKey {
        EngineKey {
            model_sha256: "d36510bbaaaa".into(),
            precision: Precision::Fp16,
            rewrite: None,
            calibration: None,
            profile: ShapeProfile {
                inputs: vec![InputProfile {
                    name: "x".into(),
                    min: vec![1, 3],
                    opt: vec![8, 3],
                    max: vec![16, 3],
                }],
            },
            builder: BuilderSettings::default(),
            tensorrt_flavour: Flavour::TensorRtRtx,
            tensorrt_version: "1.7.1.116".into(),
            trtkit_version: "0.1.0".into(),
        }
    }

    fn sidecar(bytes: &[u8]) -> EngineSidecar {
        EngineSidecar {
            key: key(),
            facts: EngineFacts {
                source_model: "m.onnx".into(),
                build_s: 0.1,
                engine_bytes: bytes.len() as u64,
                engine_sha256: sha256_hex(bytes),
                onnx_nodes: 3,
                parameters: 10,
                network_layers: 2,
                io: vec![],
                graph_sha256: None,
            },
        }
    }

    #[test]
    fn names_carry_model_precision_and_shapes() {
        let p = engine_path(Path::new("engines"), "resnet50", &key(), false);
        assert_eq!(
            p,
            Path::new("engines/resnet50-d36510bb-fp16-b1_8_16.engine")
        );
        let reshaped = engine_path(Path::new("engines"), "resnet50", &key(), true);
        let name = reshaped.file_name().unwrap().to_string_lossy();
        assert!(
            name.starts_with("resnet50-d36510bb-fp16-b1_8_16-p"),
            "{name}"
        );
        let mut other = key();
        other.profile.inputs[0].min[1] = 4;
        other.profile.inputs[0].opt[1] = 4;
        other.profile.inputs[0].max[1] = 4;
        assert_ne!(
            reshaped,
            engine_path(Path::new("engines"), "resnet50", &other, true),
            "two shapes at one batch range are two files"
        );
        assert_eq!(
            sidecar_path(&p),
            Path::new("engines/resnet50-d36510bb-fp16-b1_8_16.engine.json")
        );
    }

    #[test]
    fn magic_tells_the_flavour() {
        assert_eq!(engine_flavour(b"vtrt\0\0"), Some(Flavour::TensorRtRtx));
        assert_eq!(engine_flavour(b"ftrt\0\0"), Some(Flavour::TensorRt));
        assert_eq!(engine_flavour(b"\x08\x07"), None);
    }

    #[test]
    fn lookup_reuses_only_matching_intact_engines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.engine");
        assert!(matches!(lookup(&path, &key()), Lookup::Missing));
        let bytes = b"vtrt engine bytes".to_vec();
        store(&path, &bytes, sidecar(b"ignored")).unwrap();
        assert!(matches!(lookup(&path, &key()), Lookup::Hit(_)));

        let mut other = key();
        other.profile.inputs[0].max[0] = 32;
        let Lookup::Stale(stale) = lookup(&path, &other) else {
            panic!("a changed profile must not be reused")
        };
        assert_eq!(
            stale.reasons(),
            ["profile.inputs.0.max was [16,3], now [32,3]"]
        );

        std::fs::write(&path, b"vtrt other bytes").unwrap();
        let Lookup::Stale(stale) = lookup(&path, &key()) else {
            panic!("changed bytes must not be reused")
        };
        assert!(stale.reasons()[0].contains("tampered"), "{stale:?}");

        std::fs::remove_file(&path).unwrap();
        assert!(matches!(lookup(&path, &key()), Lookup::Stale(_)));
    }

    #[test]
    fn store_refuses_bytes_that_are_not_an_engine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.engine");
        let err = store(&path, b"junk", sidecar(b"junk")).unwrap_err();
        assert!(err.to_string().contains("magic"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
