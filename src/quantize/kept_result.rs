//! Search results kept on disk: each under a key in its name, with its SHA-256 in a file beside
//! it, so a result is reused only when its bytes are the ones the search wrote (a result changed
//! since, or cut short, is searched again, and the report says why).

use crate::atomic_file::write_atomic;
use crate::onnx::model::sha256_hex;
use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where a kept result of `model`'s `kind` search (`int8-target`, `fp16-target`) with `key`
/// lives in `dir`.
pub fn kept_path(dir: &Path, model: &Path, kind: &str, key: &str) -> PathBuf {
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    dir.join(format!("{stem}-{kind}-{key}.json"))
}

/// The first 16 hex digits of the SHA-256 of `key`'s JSON: a result's key in its file name.
pub fn short_key(key: &serde_json::Value) -> String {
    sha256_hex(key.to_string().as_bytes())[..16].to_string()
}

/// Writes `report` as the kept result `kept`, its folder made first.
pub fn keep(kept: &Path, report: &impl Serialize) -> Result<()> {
    if let Some(dir) = kept.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    write_kept(kept, report)
}

/// The file beside a kept result that holds its SHA-256, as `sha256sum` writes it.
pub fn hash_path(kept: &Path) -> PathBuf {
    let mut name = kept.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// The kept result at `kept` when its bytes are the ones its hash file vouches for; `Err`
/// with the reason when one is there but cannot be reused, `Ok(None)` when there is none.
pub fn read_kept<T: DeserializeOwned>(kept: &Path) -> Result<Option<T>, String> {
    let Ok(bytes) = std::fs::read(kept) else {
        return Ok(None);
    };
    let hashes = hash_path(kept);
    let Ok(line) = std::fs::read_to_string(&hashes) else {
        return Err(format!(
            "{} has no hash file {} (written by an older trtkit, or cut short), so it cannot be checked",
            kept.display(),
            hashes.display()
        ));
    };
    if line.split_whitespace().next() != Some(sha256_hex(&bytes).as_str()) {
        return Err(format!(
            "{} is not the file {} vouches for (another SHA-256): changed since trtkit wrote it, stale or tampered",
            kept.display(),
            hashes.display()
        ));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("{} is unreadable ({e})", kept.display()))
}

/// Writes a search's result and then its hash file, each atomically: a run interrupted between
/// the two leaves a hash file that does not vouch for the new result.
pub fn write_kept(kept: &Path, report: &impl Serialize) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(report)?;
    write_atomic(kept, &bytes)?;
    let name = kept.file_name().unwrap_or_default().to_string_lossy();
    let line = format!("{}  {name}\n", sha256_hex(&bytes));
    write_atomic(&hash_path(kept), line.as_bytes())
}
