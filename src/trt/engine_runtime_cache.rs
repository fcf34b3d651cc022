//! TensorRT-RTX's runtime cache for one opened engine: read from its keyed file before the
//! first execution context, handed to every context through one runtime config, and
//! written back when the job is done if TensorRT-RTX compiled anything new.

use super::runtime_cache::{cache_path, read, write, CacheLookup, RuntimeCacheKey};
use super::runtime_log::logged_errors_or;
use crate::cuda::info::GpuInfo;
use crate::units::bytes;
use anyhow::{anyhow, Result};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use trtx::{CudaEngine, RuntimeCache, RuntimeConfig};

/// The key of the runtime cache for an engine on a GPU.
pub(crate) fn runtime_cache_key(
    engine_sha256: &str,
    version: &str,
    gpu: &GpuInfo,
    driver_version: Option<String>,
) -> RuntimeCacheKey {
    RuntimeCacheKey {
        engine_sha256: engine_sha256.into(),
        tensorrt_version: version.into(),
        gpu: gpu.name.clone(),
        compute_capability: gpu.compute_capability.clone(),
        driver_version,
    }
}

/// The runtime cache of one opened engine and what became of it.
pub(crate) struct RuntimeCacheState {
    /// The runtime config every execution context is created with.
    pub config: Rc<RuntimeConfig<'static>>,
    cache: Option<Arc<RuntimeCache>>,
    place: Option<(PathBuf, RuntimeCacheKey)>,
    loaded: Option<Vec<u8>>,
    opening: String,
}

impl RuntimeCacheState {
    /// Creates the runtime config of `engine` with a runtime cache, filled from the file
    /// for `key` beside `engine_path` when one matches.
    pub fn open(
        engine: &mut CudaEngine<'static>,
        engine_path: &Path,
        key: RuntimeCacheKey,
    ) -> Result<RuntimeCacheState> {
        let mut config = engine
            .create_runtime_config()
            .map_err(|e| anyhow!("runtime config: {}", logged_errors_or(e)))?;
        let cache = Arc::new(
            config
                .create_runtime_cache()
                .map_err(|e| anyhow!("runtime cache: {}", logged_errors_or(e)))?,
        );
        let path = cache_path(engine_path, &key);
        let shown = path.display();
        let (loaded, opening) = match read(&path, &key) {
            CacheLookup::Hit(blob) => match cache.deserialize(&blob) {
                Ok(()) => (
                    Some(blob.clone()),
                    format!("runtime cache: reusing {shown} ({} of compiled kernels for {}): its key matches", bytes(blob.len() as u64), key.gpu),
                ),
                Err(e) => (
                    None,
                    format!("runtime cache: {shown} was refused by TensorRT-RTX ({}); the first iteration compiles the kernels again", logged_errors_or(e)),
                ),
            },
            CacheLookup::Missing => (
                None,
                format!("runtime cache: none yet for this engine on {}; the first iteration compiles the kernels", key.gpu),
            ),
            CacheLookup::Stale(why) => (
                None,
                format!("runtime cache: {shown} is not reused: {why}; the first iteration compiles the kernels"),
            ),
        };
        config
            .set_runtime_cache(cache.clone())
            .map_err(|e| anyhow!("runtime cache: {}", logged_errors_or(e)))?;
        Ok(RuntimeCacheState {
            config: Rc::new(config),
            cache: Some(cache),
            place: Some((path, key)),
            loaded,
            opening,
        })
    }

    /// What was found when the engine was opened.
    pub(crate) fn opening_note(&self) -> String {
        self.opening.clone()
    }

    /// Writes the cache back when TensorRT-RTX added to it; says what was written.
    pub fn save(&mut self) -> Result<Vec<String>> {
        let (Some(cache), Some((path, key))) = (&self.cache, &self.place) else {
            return Ok(vec![]);
        };
        let blob = cache
            .serialize()
            .map_err(|e| anyhow!("runtime cache: {}", logged_errors_or(e)))?
            .as_ref()
            .to_vec();
        if blob.is_empty() || self.loaded.as_deref() == Some(&blob[..]) {
            return Ok(vec![]);
        }
        write(path, key, &blob)?;
        let note = format!(
            "runtime cache: saved {} ({}); the next run on {} skips compiling",
            path.display(),
            bytes(blob.len() as u64),
            key.gpu
        );
        self.loaded = Some(blob);
        Ok(vec![note])
    }
}
