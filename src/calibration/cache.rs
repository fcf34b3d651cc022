//! The calibration cache: TensorRT's text format, keyed in its file name and a JSON sidecar.
//!
//! The `.cache` file is what trtexec `--calib` and polygraphy read: a header line naming the
//! calibrator (`TRT-<version>-EntropyCalibration2`) and one `tensor_name: <scale>` line per
//! tensor, the scale written as the 8 hex digits of its float32 bits. Next to it,
//! `<file>.json` holds the full key and the SHA-256 of the cache file; a cache is reused only
//! when every field of the key matches and its bytes are the ones the key file vouches for,
//! and a mismatch is reported field by field.

use crate::atomic_file::write_atomic;
use crate::data::preprocess::{preprocess_fields, Preprocess};
use crate::onnx::model::sha256_hex;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The TensorRT version number written in headers (TensorRT 10.x style, `TRT-100000-…`).
pub const TRT_VERSION_TAG: u32 = 100000;

/// Calibrator names accepted in a cache header.
pub const KNOWN_CALIBRATORS: &[&str] = &[
    "EntropyCalibration2",
    "EntropyCalibration",
    "MinMaxCalibration",
    "LegacyCalibration",
];

/// Per-tensor INT8 scales (amax / 127), by tensor name, with the calibrator that made them.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationTable {
    /// Calibrator name in the header, e.g. `EntropyCalibration2`.
    pub calibrator: String,
    /// Scale of each tensor, sorted by name.
    pub scales: BTreeMap<String, f32>,
}

impl CalibrationTable {
    /// The cache file's text.
    pub fn to_text(&self) -> String {
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
pub fn implausible_scale(scale: f32) -> Option<&'static str> {
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

/// How a key difference in the preprocessing starts: `preprocessing mean: cache …, now …`
/// names the setting, `preprocessing: cache …, now …` the whole when it is not of images.
pub const PREPROCESSING: &str = "preprocessing";

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
    pub fn model_hash8(&self) -> &str {
        &self.model_sha256[..8.min(self.model_sha256.len())]
    }

    /// Human-readable differences from `other` (`batch size: cache 8, now 16`); empty if equal.
    pub fn differences(&self, now: &CacheKey) -> Vec<String> {
        let mut out = Vec::new();
        if self.dataset_fingerprint != now.dataset_fingerprint {
            out.push(format!(
                "dataset: cache {}, now {}",
                short(&self.dataset_fingerprint),
                short(&now.dataset_fingerprint)
            ));
        }
        let mut check = |what: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{what}: cache {a}, now {b}"));
            }
        };
        check("model", self.model_hash8().into(), now.model_hash8().into());
        match (
            serde_json::from_str::<Preprocess>(&self.preprocessing),
            serde_json::from_str::<Preprocess>(&now.preprocessing),
        ) {
            // Both are image preprocessings: name each setting that changed.
            (Ok(cached), Ok(current)) => {
                for ((name, a), (_, b)) in preprocess_fields(&cached)
                    .into_iter()
                    .zip(preprocess_fields(&current))
                {
                    check(&format!("{PREPROCESSING} {name}"), a, b);
                }
            }
            _ => check(
                PREPROCESSING,
                self.preprocessing.clone(),
                now.preprocessing.clone(),
            ),
        }
        check(
            "image count",
            self.image_count.to_string(),
            now.image_count.to_string(),
        );
        check("algorithm", self.algorithm.clone(), now.algorithm.clone());
        check(
            "batch size",
            self.batch_size.to_string(),
            now.batch_size.to_string(),
        );
        check(
            "trtkit version",
            self.trtkit_version.clone(),
            now.trtkit_version.clone(),
        );
        out
    }
}

/// A fingerprint for people: hex digests cut to 12 characters, descriptions kept whole.
fn short(s: &str) -> String {
    if s.len() > 16 && s.chars().all(|c| c.is_ascii_hexdigit()) {
        s[..12].to_string()
    } else {
        s.to_string()
    }
}

/// `calibration/<model-stem>-<model-hash8>-<algo>-b<N>.cache` under `dir`.
pub fn cache_path(dir: &Path, model_stem: &str, key: &CacheKey, algo_tag: &str) -> PathBuf {
    dir.join(format!(
        "{model_stem}-{}-{algo_tag}-b{}.cache",
        key.model_hash8(),
        key.batch_size
    ))
}

/// The JSON sidecar that holds a cache's full key: `<cache>.json`.
pub fn sidecar_path(cache: &Path) -> PathBuf {
    let mut s = cache.as_os_str().to_owned();
    s.push(".json");
    PathBuf::from(s)
}

/// What a cache's key file (`<cache>.json`) holds: the key, and the SHA-256 of the cache file
/// it vouches for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheSidecar {
    /// Everything the scales depend on.
    #[serde(flatten)]
    pub key: CacheKey,
    /// SHA-256 of the cache file's bytes, hex; absent in key files written before trtkit
    /// recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_sha256: Option<String>,
}

/// Reads the key file of `cache`.
fn read_sidecar(cache: &Path) -> Result<CacheSidecar> {
    let side = sidecar_path(cache);
    let text = std::fs::read_to_string(&side)
        .with_context(|| format!("{}: cannot read", side.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a valid cache key file", side.display()))
}

/// Why the cache at `path` (whose bytes are `bytes`) is not the file its key file vouches for,
/// if it is not.
fn content_problem(path: &Path, bytes: &[u8], sidecar: &CacheSidecar) -> Option<String> {
    let side = sidecar_path(path);
    match &sidecar.cache_sha256 {
        None => Some(format!(
            "{} holds no SHA-256 of {} (written by an older trtkit), so its scales cannot be checked",
            side.display(),
            path.display()
        )),
        Some(hash) if *hash != sha256_hex(bytes) => Some(format!(
            "{} is not the file {} vouches for (another SHA-256): changed since trtkit wrote it, stale or tampered",
            path.display(),
            side.display()
        )),
        Some(_) => None,
    }
}

/// What was found at a cache path for a given key.
#[derive(Debug)]
pub enum Lookup {
    /// A cache with the same key: reuse it.
    Hit(CalibrationTable),
    /// No cache there.
    Missing,
    /// A cache is there but must be redone; the reasons, one per line.
    Stale(Vec<String>),
}

/// Looks for a reusable cache at `path` for `key`. Missing, keyless or unreadable caches, key
/// mismatches and caches whose bytes are not the ones their key file vouches for are
/// `Stale`/`Missing` with the reason, never silently reused.
pub fn lookup(path: &Path, key: &CacheKey) -> Lookup {
    if !path.exists() {
        return Lookup::Missing;
    }
    let stored = match read_sidecar(path) {
        Ok(k) => k,
        Err(e) => {
            return Lookup::Stale(vec![format!(
                "its key file {} is missing or unreadable ({e:#})",
                sidecar_path(path).display()
            )])
        }
    };
    let diffs = stored.key.differences(key);
    if !diffs.is_empty() {
        return Lookup::Stale(diffs);
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return Lookup::Stale(vec![format!("{}: cannot read ({e})", path.display())]),
    };
    if let Some(why) = content_problem(path, &bytes, &stored) {
        return Lookup::Stale(vec![why]);
    }
    match CalibrationTable::from_bytes(path, &bytes) {
        Ok(t) => Lookup::Hit(t),
        Err(e) => Lookup::Stale(vec![format!("{e:#}")]),
    }
}

/// Writes the cache and then its key file (the key and the cache's SHA-256), each atomically:
/// a run interrupted between the two leaves a key file that does not vouch for the new cache.
pub fn store(path: &Path, key: &CacheKey, table: &CalibrationTable) -> Result<()> {
    let text = table.to_text();
    write_atomic(path, text.as_bytes())?;
    let sidecar = CacheSidecar {
        key: key.clone(),
        cache_sha256: Some(sha256_hex(text.as_bytes())),
    };
    let json = serde_json::to_string_pretty(&sidecar)? + "\n";
    write_atomic(&sidecar_path(path), json.as_bytes())
}

/// When `cache` has a trtkit key file, its model hash must be `model_sha256` (the hash of
/// `model`) and, where the key file holds one, the cache's SHA-256 must match it: a cache
/// calibrated for another model, or changed after it was written, is refused, naming both.
pub fn check_cache_model(cache: &Path, model: &Path, model_sha256: &str) -> Result<()> {
    if !sidecar_path(cache).exists() {
        tracing::info!(
            "{}: no key file; cannot check that the cache belongs to this model",
            cache.display()
        );
        return Ok(());
    }
    let sidecar = read_sidecar(cache)?;
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
        if let Some(why) = content_problem(cache, &bytes, &sidecar) {
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
            Lookup::Stale(why) => {
                assert_eq!(why.len(), 2, "{why:?}");
                assert!(why[1].contains("image count: cache 64, now 32"), "{why:?}");
            }
            o => panic!("{o:?}"),
        }
        std::fs::write(&path, "TRT-8601-EntropyCalibration2\nx: 12\n").unwrap();
        match lookup(&path, &k) {
            Lookup::Stale(why) => assert!(why[0].contains("tampered"), "{why:?}"),
            o => panic!("{o:?}"),
        }
        std::fs::remove_file(sidecar_path(&path)).unwrap();
        assert!(matches!(lookup(&path, &k), Lookup::Stale(_)));
    }
}
