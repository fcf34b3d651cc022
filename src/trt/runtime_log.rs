//! The one process-wide TensorRT logger of the engine runtime, and the errors it collected:
//! what TensorRT said when it refused something, for trtkit's messages.

use super::engine_builder::LogCollector;
use anyhow::{anyhow, Result};
use std::sync::OnceLock;
use trtx::Logger;

/// One process-wide logger for every runtime: TensorRT keeps a pointer to it, so it must
/// outlive every engine, which `'static` guarantees. Its errors are collected for messages.
pub(crate) fn logger() -> Result<&'static (Logger, LogCollector)> {
    static LOGGER: OnceLock<(Logger, LogCollector)> = OnceLock::new();
    if let Some(l) = LOGGER.get() {
        return Ok(l);
    }
    let collector = LogCollector::default();
    let logger = Logger::new(collector.clone()).map_err(|e| anyhow!("TensorRT logger: {e}"))?;
    Ok(LOGGER.get_or_init(|| (logger, collector)))
}

/// TensorRT's errors logged since the last call, leaving none (refusals that trtkit expects,
/// such as probing a profile, are taken and dropped).
pub(crate) fn take_log() -> Vec<String> {
    logger().map(|l| l.1.take()).unwrap_or_default()
}

/// TensorRT's own errors since the last call, on one line, or `fallback` when it said none.
pub(crate) fn logged_errors_or(fallback: impl std::fmt::Display) -> String {
    let errors = take_log();
    if errors.is_empty() {
        fallback.to_string()
    } else {
        errors.join("; ").replace('\n', " ")
    }
}
