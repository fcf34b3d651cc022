//! TensorRT-RTX's runtime cache on disk. TensorRT-RTX compiles an engine's kernels for the GPU
//! the first time it runs there; its runtime cache holds them, so a later run skips that. trtkit
//! keeps it beside the engine, keyed on what the compiled kernels depend on (the engine's bytes,
//! the TensorRT-RTX version, the GPU and the driver): the key's hash is in the file name and
//! the whole key in the file's header, with the SHA-256 of the kernels that follow it (checked
//! before they are handed to TensorRT-RTX), and a file is written to a temporary name and renamed.

use crate::atomic_file::write_atomic;
use crate::digest::sha256_hex;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The first line of every runtime cache file trtkit writes.
pub(crate) const MAGIC: &[u8] = b"trtkit-runtime-cache 2\n";

/// The first line of the runtime caches of earlier trtkit versions, whose header holds no hash
/// of the kernels.
const MAGIC_WITHOUT_HASH: &[u8] = b"trtkit-runtime-cache 1\n";

/// The second line of a runtime cache file: its key and the SHA-256 of the kernels after it.
#[derive(Serialize, Deserialize)]
struct Header {
    #[serde(flatten)]
    key: RuntimeCacheKey,
    blob_sha256: String,
}

/// What a runtime cache's compiled kernels depend on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RuntimeCacheKey {
    /// SHA-256 of the engine file.
    pub(crate) engine_sha256: String,
    /// TensorRT-RTX version that compiled the kernels.
    pub tensorrt_version: String,
    /// GPU name.
    pub gpu: String,
    /// The GPU's compute capability.
    pub compute_capability: String,
    /// NVIDIA driver version, when known.
    pub(crate) driver_version: Option<String>,
}

impl RuntimeCacheKey {
    /// The fields that differ from `now`, as `field was X, now Y` (the one wording of every
    /// key kept beside a file).
    pub(crate) fn differences(&self, now: &RuntimeCacheKey) -> Vec<String> {
        let value = |key: &RuntimeCacheKey| serde_json::to_value(key).unwrap_or_default();
        crate::keyed_artifact::diff(&value(self), &value(now))
            .iter()
            .map(ToString::to_string)
            .collect()
    }
}

/// The runtime cache of `engine` for `key`: `<engine>.<hash8 of the key>.rtcache`, so caches of
/// one engine for several GPUs or drivers live side by side.
pub(crate) fn cache_path(engine: &Path, key: &RuntimeCacheKey) -> PathBuf {
    let json = serde_json::to_string(key).unwrap_or_default();
    let mut name = engine.as_os_str().to_owned();
    name.push(format!(".{}.rtcache", &sha256_hex(json.as_bytes())[..8]));
    PathBuf::from(name)
}

/// What was found at a runtime cache path.
#[derive(Debug, PartialEq)]
pub(crate) enum CacheLookup {
    /// A cache for this key: the blob TensorRT-RTX serialized.
    Hit(Vec<u8>),
    /// No file there.
    Missing,
    /// A file that cannot be used, and why (it is replaced after the run).
    Stale(String),
}

/// Reads the runtime cache at `path` and checks its header against `key` and its kernels
/// against the header's hash.
pub fn read(path: &Path, key: &RuntimeCacheKey) -> CacheLookup {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return CacheLookup::Missing,
        Err(e) => return CacheLookup::Stale(format!("it cannot be read ({e})")),
    };
    if bytes.starts_with(MAGIC_WITHOUT_HASH) {
        return CacheLookup::Stale(
            "it was written by an older trtkit, without a hash of its kernels to check them by"
                .into(),
        );
    }
    let Some(rest) = bytes.strip_prefix(MAGIC) else {
        return CacheLookup::Stale("it is not a trtkit runtime cache (no header)".into());
    };
    let Some(end) = rest.iter().position(|&b| b == b'\n') else {
        return CacheLookup::Stale("its header is cut off".into());
    };
    let blob = &rest[end + 1..];
    match serde_json::from_slice::<Header>(&rest[..end]) {
        Ok(found) if found.key != *key => CacheLookup::Stale(format!(
            "it was made for another key ({})",
            found.key.differences(key).join("; ")
        )),
        Ok(found) if found.blob_sha256 != sha256_hex(blob) => CacheLookup::Stale(
            "its kernels are not the bytes its header vouches for (another SHA-256): changed since trtkit wrote it, stale or tampered".into(),
        ),
        Ok(_) => CacheLookup::Hit(blob.to_vec()),
        Err(e) => CacheLookup::Stale(format!("its header is unreadable ({e})")),
    }
}

/// Writes `blob` as the runtime cache for `key` at `path`, atomically.
pub fn write(path: &Path, key: &RuntimeCacheKey, blob: &[u8]) -> Result<()> {
    let header = serde_json::to_vec(&Header {
        key: key.clone(),
        blob_sha256: sha256_hex(blob),
    })?;
    let mut bytes = Vec::with_capacity(MAGIC.len() + header.len() + 1 + blob.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&header);
    bytes.push(b'\n');
    bytes.extend_from_slice(blob);
    write_atomic(path, &bytes)
        .with_context(|| format!("{}: cannot write the runtime cache", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> RuntimeCacheKey {
        RuntimeCacheKey {
            engine_sha256: "ab".repeat(32),
            tensorrt_version: "1.7.1.116".into(),
            gpu: "NVIDIA GeForce RTX 4090".into(),
            compute_capability: "8.9".into(),
            driver_version: Some("580.1".into()),
        }
    }

    #[test]
    fn a_written_cache_is_read_back_only_for_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let engine = dir.path().join("m.engine");
        let path = cache_path(&engine, &key());
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            name.starts_with("m.engine.") && name.ends_with(".rtcache"),
            "{name}"
        );
        assert_eq!(read(&path, &key()), CacheLookup::Missing);

        let blob = b"\x00kernels\nwith newlines\n".to_vec();
        write(&path, &key(), &blob).unwrap();
        assert_eq!(read(&path, &key()), CacheLookup::Hit(blob.clone()));

        let other = RuntimeCacheKey {
            gpu: "NVIDIA RTX A6000".into(),
            compute_capability: "8.6".into(),
            ..key()
        };
        assert_ne!(cache_path(&engine, &other), path);
        let CacheLookup::Stale(why) = read(&path, &other) else {
            panic!("another GPU's cache must not be used")
        };
        assert!(
            why.contains("gpu was") && why.contains("compute_capability was"),
            "{why}"
        );

        // One byte of the kernels changed: not handed to TensorRT-RTX.
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(
            matches!(read(&path, &key()), CacheLookup::Stale(w) if w.contains("tampered")),
            "{:?}",
            read(&path, &key())
        );
        // A file of an earlier trtkit: its key, no hash.
        let old = [
            MAGIC_WITHOUT_HASH,
            &serde_json::to_vec(&key()).unwrap(),
            b"\n",
            &blob,
        ]
        .concat();
        std::fs::write(&path, old).unwrap();
        assert!(matches!(read(&path, &key()), CacheLookup::Stale(w) if w.contains("older trtkit")));

        std::fs::write(&path, b"junk").unwrap();
        assert!(matches!(read(&path, &key()), CacheLookup::Stale(w) if w.contains("no header")));
        std::fs::write(&path, [MAGIC, b"{\"engine"].concat()).unwrap();
        assert!(matches!(read(&path, &key()), CacheLookup::Stale(w) if w.contains("cut off")));
    }
}
