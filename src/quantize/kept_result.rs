//! Search results kept on disk: each under a key in its name, with its SHA-256 in a file beside
//! it (a keyed artifact whose key is all in its name), so a result is reused only when its bytes
//! are the ones the search wrote (a result changed since, or cut short, is searched again, and
//! the report says why).

use crate::digest::sha256_hex16;
use crate::keyed_artifact::{self, Durability, KeyFile, Lookup};
use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where a kept result of `model`'s `kind` search (`int8-target`, `fp16-target`) with `key`
/// lives in `dir`.
pub(crate) fn kept_path(dir: &Path, model: &Path, kind: &str, key: &str) -> PathBuf {
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    dir.join(format!("{stem}-{kind}-{key}.json"))
}

/// The first 16 hex digits of the SHA-256 of `key`'s JSON: a result's key in its file name.
pub(crate) fn short_key(key: &serde_json::Value) -> String {
    sha256_hex16(key.to_string().as_bytes())
}

/// Writes `report` as the kept result `kept`, its folder made first.
pub fn keep(kept: &Path, report: &impl Serialize) -> Result<()> {
    if let Some(dir) = kept.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    write_kept(kept, report)
}

/// What the file beside a kept result (`<result>.sha256`) holds: the result's SHA-256, in
/// `sha256sum`'s line (`<hex>  <file name>`).
struct HashLine {
    sha256: String,
}

impl KeyFile for HashLine {
    const SUFFIX: &'static str = ".sha256";

    fn parse(bytes: &[u8]) -> Result<Self> {
        let text = std::str::from_utf8(bytes).context("not text")?;
        let sha256 = text.split_whitespace().next().context("empty")?.to_string();
        Ok(HashLine { sha256 })
    }

    fn encode(&self, kept: &Path) -> Result<Vec<u8>> {
        let name = kept.file_name().unwrap_or_default().to_string_lossy();
        Ok(format!("{}  {name}\n", self.sha256).into_bytes())
    }

    fn key_fields(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn artifact_sha256(&self) -> Option<&str> {
        Some(&self.sha256)
    }
}

/// The kept result at `kept` when its bytes are the ones its hash file vouches for; `Err`
/// with the reason when one is there but cannot be reused, `Ok(None)` when there is none.
pub(crate) fn read_kept<T: DeserializeOwned>(kept: &Path) -> Result<Option<T>, String> {
    let found =
        keyed_artifact::lookup::<HashLine>(kept, &serde_json::Value::Null).and_then(|found| {
            serde_json::from_slice(&found.bytes)
                .with_context(|| format!("{} is unreadable", kept.display()))
        });
    match found {
        Lookup::Hit(result) => Ok(Some(result)),
        Lookup::Missing => Ok(None),
        Lookup::Stale(why) => Err(why.reasons().join("; ")),
    }
}

/// Writes a search's result and then its hash file, each atomically (see
/// [`keyed_artifact::store`]).
pub(crate) fn write_kept(kept: &Path, report: &impl Serialize) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(report)?;
    keyed_artifact::store(kept, &bytes, Durability::Synced, |sha256| HashLine {
        sha256,
    })?;
    Ok(())
}
