//! The calibration cache: TensorRT's text format, keyed in its file name and a JSON sidecar.
//!
//! The `.cache` file is what trtexec `--calib` and polygraphy read: a header line naming the
//! calibrator (`TRT-<version>-EntropyCalibration2`) and one `tensor_name: <scale>` line per
//! tensor, the scale written as the 8 hex digits of its float32 bits. Next to it,
//! `<file>.json` holds the full key and the SHA-256 of the cache file (a keyed artifact): a
//! cache is reused only when every field of the key matches and its bytes are the ones the key
//! file vouches for, and a mismatch is reported field by field.

use crate::atomic_file::write_atomic;
use crate::data::preprocess::{preprocess_fields, Preprocess};
use crate::keyed_artifact::{self, Durability, KeyFile, Lookup};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The TensorRT version number written in headers (TensorRT 10.x style, `TRT-100000-…`).
pub(crate) const TRT_VERSION_TAG: u32 = 100000;

/// Calibrator names accepted in a cache header.
pub(crate) const KNOWN_CALIBRATORS: &[&str] = &[
    "EntropyCalibration2",
    "EntropyCalibration",
    "MinMaxCalibration",
    "LegacyCalibration",
];

/// Per-tensor INT8 scales (amax / 127), by tensor name, with the calibrator that made them.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationTable {
    /// Calibrator name in the header, e.g. `EntropyCalibration2`.
    pub(crate) calibrator: String,
    /// Scale of each tensor, sorted by name.
    pub scales: BTreeMap<String, f32>,
}

impl CalibrationTable {
    /// The cache file's text.
    pub(crate) fn to_text(&self) -> String {
        let mut out = format!("TRT-{TRT_VERSION_TAG}-{}\n", self.calibrator);
        for (name, scale) in &self.scales {
            out += &format!("{name}: {:08x}\n", scale.to_bits());
        }
        out
    }

    /// Parses a cache file's text; errors name the line (1-based) and what is wrong with it.
    pub fn parse(text: &str) -> Result<Self> {
        let mut lines = text.lines().enumerate();
        let Some((_, header)) = lines.next() else {
            bail!("line 1: the file is empty (expected a 'TRT-<version>-<calibrator>' header)");
        };
        let calibrator = parse_header(header).context("line 1")?;
        let mut scales = BTreeMap::new();
        for (i, line) in lines {
            let n = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let Some((name, hex)) = line.rsplit_once(':') else {
                bail!("line {n}: expected 'tensor_name: <8 hex digits>', got {line:?}");
            };
            let (name, hex) = (name.trim(), hex.trim());
            if name.is_empty() {
                bail!("line {n}: the tensor name is empty");
            }
            if hex.len() != 8 {
                bail!(
                    "line {n}: scale of '{name}' is {hex:?}, expected 8 hex digits (the file may be truncated)"
                );
            }
            let bits = u32::from_str_radix(hex, 16)
                .map_err(|_| anyhow::anyhow!("line {n}: scale of '{name}' is not hex: {hex:?}"))?;
            let scale = f32::from_bits(bits);
            if let Some(why) = implausible_scale(scale) {
                bail!("line {n}: scale of tensor '{name}' is {scale:e} ({hex}), {why}");
            }
            if scales.insert(name.to_string(), scale).is_some() {
                bail!("line {n}: tensor '{name}' appears twice");
            }
        }
        if !text.ends_with('\n') && !scales.is_empty() {
            bail!(
                "line {}: the last line is not terminated (the file may be truncated)",
                text.lines().count()
            );
        }
        Ok(CalibrationTable { calibrator, scales })
    }

    /// Reads and parses a cache file; errors start with its path.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("{}: cannot read the calibration cache", path.display()))?;
        CalibrationTable::from_bytes(path, &bytes)
    }

    /// Parses the bytes of the cache file at `path`; errors start with the path.
    fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self> {
        let invalid = || format!("{}: not a valid calibration cache", path.display());
        let text = std::str::from_utf8(bytes)
            .map_err(|e| anyhow::anyhow!("the file is not text ({e})"))
            .with_context(invalid)?;
        CalibrationTable::parse(text).with_context(invalid)
    }

    /// Writes the cache atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomic(path, self.to_text().as_bytes())
    }
}

/// Why `scale` cannot be an activation's INT8 scale, if it cannot: not a positive finite
/// number, subnormal (below any range a float32 activation is calibrated to), or so large that
/// 127 steps of it overflow float32.
pub(crate) fn implausible_scale(scale: f32) -> Option<&'static str> {
    if !scale.is_finite() || scale <= 0.0 {
        Some("expected a positive finite number")
    } else if !scale.is_normal() {
        Some("subnormal: no activation's range is that small")
    } else if !(scale * 127.0).is_finite() {
        Some("too large: 127 steps of it overflow float32")
    } else {
        None
    }
}

fn parse_header(header: &str) -> Result<String> {
    let parts: Vec<&str> = header.trim().splitn(3, '-').collect();
    match parts.as_slice() {
        ["TRT", version, calibrator] if version.chars().all(|c| c.is_ascii_digit()) => {
            if KNOWN_CALIBRATORS.contains(calibrator) {
                Ok(calibrator.to_string())
            } else {
                bail!(
                    "unknown calibrator '{calibrator}' in the header (known: {})",
                    KNOWN_CALIBRATORS.join(", ")
                )
            }
        }
        _ => bail!("expected a 'TRT-<version>-<calibrator>' header, got {header:?}"),
    }
}

/// The field a key difference in the preprocessing starts with: `preprocessing.mean was …,
/// now …` names the setting, `preprocessing was …, now …` the whole when it is not of images.
pub(crate) const PREPROCESSING: &str = "preprocessing";

/// Everything a calibration result depends on; a cache is reused only when all of it matches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheKey {
    /// SHA-256 of the model file, hex.
    pub model_sha256: String,
    /// How the calibration inputs were made from the source (preprocessing).
    pub preprocessing: String,
    /// Fingerprint of the calibration data (its files' names and contents, or the seed).
    pub dataset_fingerprint: String,
    /// Images (samples) used.
    pub image_count: usize,
    /// Range algorithm, e.g. `entropy` or `percentile 99.99`.
    pub algorithm: String,
    /// Batch size the model ran at.
    pub batch_size: usize,
    /// trtkit version that wrote the cache.
    pub trtkit_version: String,
}

impl CacheKey {
    /// The first 8 hex digits of the model hash, used in file names.
    pub(crate) fn model_hash8(&self) -> &str {
        &self.model_sha256[..8.min(self.model_sha256.len())]
    }

    /// The key as it is compared: an image preprocessing (JSON in the key) as its settings, each
    /// as people write it, so that a difference names the setting.
    fn fields(&self) -> serde_json::Value {
        let mut fields = serde_json::to_value(self).unwrap_or_default();
        if let Ok(pre) = serde_json::from_str::<Preprocess>(&self.preprocessing) {
            let settings: serde_json::Map<String, serde_json::Value> = preprocess_fields(&pre)
                .into_iter()
                .map(|(name, value)| (name.to_string(), value.into()))
                .collect();
            fields[PREPROCESSING] = settings.into();
        }
        fields
    }
}

/// `calibration/<model-stem>-<model-hash8>-<algo>-b<N>.cache` under `dir`.
pub(crate) fn cache_path(dir: &Path, model_stem: &str, key: &CacheKey, algo_tag: &str) -> PathBuf {
    dir.join(format!(
        "{model_stem}-{}-{algo_tag}-b{}.cache",
        key.model_hash8(),
        key.batch_size
    ))
}

/// The JSON sidecar that holds a cache's full key: `<cache>.json`.
pub(crate) fn sidecar_path(cache: &Path) -> PathBuf {
    keyed_artifact::key_file_path::<CacheSidecar>(cache)
}

/// What a cache's key file (`<cache>.json`) holds: the key, and the SHA-256 of the cache file
/// it vouches for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CacheSidecar {
    /// Everything the scales depend on.
    #[serde(flatten)]
    pub key: CacheKey,
    /// SHA-256 of the cache file's bytes, hex; absent in key files written before trtkit
    /// recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_sha256: Option<String>,
}

impl KeyFile for CacheSidecar {
    const SUFFIX: &'static str = ".json";

    fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).context("not a valid cache key file")
    }

    fn encode(&self, _cache: &Path) -> Result<Vec<u8>> {
        Ok((serde_json::to_string_pretty(self)? + "\n").into_bytes())
    }

    fn key_fields(&self) -> serde_json::Value {
        self.key.fields()
    }

    fn artifact_sha256(&self) -> Option<&str> {
        self.cache_sha256.as_deref()
    }
}

/// Looks for a reusable cache at `path` for `key`. Missing, keyless or unreadable caches, key
/// mismatches and caches whose bytes are not the ones their key file vouches for are
/// `Stale`/`Missing` with the reason, never silently reused.
pub fn lookup(path: &Path, key: &CacheKey) -> Lookup<CalibrationTable> {
    keyed_artifact::lookup::<CacheSidecar>(path, &key.fields())
        .and_then(|found| CalibrationTable::from_bytes(path, &found.bytes))
}

/// Writes the cache and then its key file (the key and the cache's SHA-256), each atomically
/// (see [`keyed_artifact::store`]).
pub(crate) fn store(path: &Path, key: &CacheKey, table: &CalibrationTable) -> Result<()> {
    keyed_artifact::store(
        path,
        table.to_text().as_bytes(),
        Durability::Synced,
        |hash| CacheSidecar {
            key: key.clone(),
            cache_sha256: Some(hash),
        },
    )?;
    Ok(())
}

/// When `cache` has a trtkit key file, its model hash must be `model_sha256` (the hash of
/// `model`) and, where the key file holds one, the cache's SHA-256 must match it: a cache
/// calibrated for another model, or changed after it was written, is refused, naming both.
pub(crate) fn check_cache_model(cache: &Path, model: &Path, model_sha256: &str) -> Result<()> {
    if !sidecar_path(cache).exists() {
        tracing::info!(
            "{}: no key file; cannot check that the cache belongs to this model",
            cache.display()
        );
        return Ok(());
    }
    let sidecar: CacheSidecar = keyed_artifact::read_key_file(cache)?;
    let key = &sidecar.key;
    if key.model_sha256 != model_sha256 {
        bail!(
            "{}: calibrated for another model (hash {}, {} is {}); run trtkit calibrate on this model",
            cache.display(),
            key.model_hash8(),
            model.display(),
            &model_sha256[..8.min(model_sha256.len())]
        );
    }
    if sidecar.cache_sha256.is_some() {
        let bytes =
            std::fs::read(cache).with_context(|| format!("{}: cannot read", cache.display()))?;
        let hash = sidecar.cache_sha256.as_deref();
        if let Some(why) = keyed_artifact::vouch_problem(cache, &bytes, hash, &sidecar_path(cache))
        {
            bail!("{why}; run trtkit calibrate again");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CacheKey {
        CacheKey {
            model_sha256: "0123456789abcdef".repeat(4),
            preprocessing: "npy as stored".into(),
            dataset_fingerprint: "fff".into(),
            image_count: 64,
            algorithm: "entropy".into(),
            batch_size: 8,
            trtkit_version: "0.1.0".into(),
        }
    }

    fn table() -> CalibrationTable {
        CalibrationTable {
            calibrator: "EntropyCalibration2".into(),
            scales: [
                ("input".to_string(), 0.0078125f32),
                ("conv:0".into(), 1.5e-3),
            ]
            .into_iter()
            .collect(),
        }
    }

    #[test]
    fn text_format_round_trips_bit_exactly() {
        let t = table();
        let text = t.to_text();
        assert!(text.starts_with("TRT-100000-EntropyCalibration2\n"));
        assert!(text.contains("input: 3c000000\n"), "{text}");
        assert_eq!(CalibrationTable::parse(&text).unwrap(), t);
    }

    #[test]
    fn reads_a_trtexec_style_cache() {
        let text = "TRT-8601-EntropyCalibration2\ninput.1: 3c010a14\n(Unnamed Layer* 2) [Activation]_output: 3d8f1c71\n";
        let t = CalibrationTable::parse(text).unwrap();
        assert_eq!(t.scales.len(), 2);
        assert_eq!(t.scales["input.1"].to_bits(), 0x3c010a14);
        assert!(t
            .scales
            .contains_key("(Unnamed Layer* 2) [Activation]_output"));
    }

    #[test]
    fn corrupted_caches_name_the_line() {
        let cases = [
            ("", "line 1"),
            ("hello\n", "line 1"),
            ("TRT-1-Foo\n", "unknown calibrator"),
            (
                "TRT-8601-EntropyCalibration2\na: 3c010a14\nb 3c01\n",
                "line 3",
            ),
            ("TRT-8601-EntropyCalibration2\na: 3c01", "line 2"),
            (
                "TRT-8601-EntropyCalibration2\na: 3c010a14\nb: zzzzzzzz\n",
                "line 3",
            ),
            (
                "TRT-8601-EntropyCalibration2\na: 3c010a14\na: 3c010a14\n",
                "twice",
            ),
            ("TRT-8601-EntropyCalibration2\na: 7fc00000\n", "line 2"),
            ("TRT-8601-EntropyCalibration2\na: 00000001\n", "subnormal"),
            ("TRT-8601-EntropyCalibration2\na: 7f7fffff\n", "overflow"),
            ("TRT-8601-EntropyCalibration2\na: bf800000\n", "positive"),
            ("TRT-8601-EntropyCalibration2\na: 3c010a14", "truncated"),
        ];
        for (text, needle) in cases {
            let err = format!("{:#}", CalibrationTable::parse(text).unwrap_err());
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn keyed_file_names_and_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let k = key();
        let path = cache_path(dir.path(), "model", &k, "entropy");
        assert_eq!(
            path.file_name().unwrap().to_str().unwrap(),
            "model-01234567-entropy-b8.cache"
        );
        assert!(matches!(lookup(&path, &k), Lookup::Missing));
        store(&path, &k, &table()).unwrap();
        match lookup(&path, &k) {
            Lookup::Hit(t) => assert_eq!(t, table()),
            other => panic!("{other:?}"),
        }
        let mut other = k.clone();
        other.image_count = 32;
        other.preprocessing = "imagenet".into();
        match lookup(&path, &other) {
            Lookup::Stale(stale) => {
                let why = stale.reasons();
                assert_eq!(why.len(), 2, "{why:?}");
                assert!(
                    why.contains(&"image_count was 64, now 32".into()),
                    "{why:?}"
                );
                assert!(
                    why.contains(&"preprocessing was npy as stored, now imagenet".into()),
                    "{why:?}"
                );
            }
            o => panic!("{o:?}"),
        }
        std::fs::write(&path, "TRT-8601-EntropyCalibration2\nx: 12\n").unwrap();
        match lookup(&path, &k) {
            Lookup::Stale(stale) => assert!(stale.reasons()[0].contains("tampered"), "{stale:?}"),
            o => panic!("{o:?}"),
        }
        std::fs::remove_file(sidecar_path(&path)).unwrap();
        assert!(matches!(lookup(&path, &k), Lookup::Stale(_)));
    }
}
