//! What the CUDA driver reports: its version and the GPUs it sees (for `doctor`).

use super::identity::nvml_uuid;
use super::sys::{device_facts, driver_version, init_and_count};
use cudarc::driver::result;
use serde::{Deserialize, Serialize};

/// One GPU as the driver describes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Device ordinal (what `--device-id` takes).
    pub index: i32,
    /// Marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Total device memory in bytes.
    pub(crate) memory_bytes: u64,
    /// Compute capability as `major.minor`.
    pub compute_capability: String,
    /// The board's UUID as NVML writes it (`GPU-…`): how NVML finds this device whatever
    /// `CUDA_VISIBLE_DEVICES` did to CUDA's numbering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) uuid: Option<String>,
}

/// The driver and its GPUs, or why they could not be read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DriverInfo {
    /// Whether libcuda could be loaded.
    pub driver_found: bool,
    /// CUDA version the driver supports, e.g. `13.0`.
    pub(crate) driver_cuda_version: Option<String>,
    /// Kernel driver version, e.g. `580.159.04` (from `/proc/driver/nvidia/version` on Linux).
    pub(crate) driver_version: Option<String>,
    /// GPUs visible to this process.
    pub gpus: Vec<GpuInfo>,
    /// Why the driver or the GPUs could not be read, when they could not.
    pub error: Option<String>,
}

/// The NVIDIA kernel driver version, parsed from the text the kernel module exposes.
pub(crate) fn kernel_driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_kernel_driver_version(&text)
}

/// Finds the version in `/proc/driver/nvidia/version` text: the token after `Kernel Module`.
pub(crate) fn parse_kernel_driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    let rest = line.split("Kernel Module").nth(1)?;
    rest.split_whitespace()
        .find(|t| t.contains('.') && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(String::from)
}

/// True when the CUDA driver library can be loaded on this machine.
pub(crate) fn driver_present() -> bool {
    super::sys::driver_present()
}

/// Formats a driver error as `NAME: description`.
pub fn describe(e: &result::DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}: {text}")
}

fn query_gpus() -> Result<(String, Vec<GpuInfo>), String> {
    let count = init_and_count().map_err(|(call, e)| format!("{call} failed: {}", describe(&e)))?;
    let version =
        driver_version().map_err(|e| format!("cuDriverGetVersion failed: {}", describe(&e)))?;
    let version = format!("{}.{}", version / 1000, (version % 1000) / 10);
    let mut gpus = Vec::new();
    for index in 0..count {
        let facts = device_facts(index).map_err(|e| format!("GPU {index}: {}", describe(&e)))?;
        let (major, minor) = facts.compute_capability;
        gpus.push(GpuInfo {
            index,
            name: facts.name,
            memory_bytes: facts.memory_bytes,
            compute_capability: format!("{major}.{minor}"),
            uuid: facts.uuid.as_ref().map(nvml_uuid),
        });
    }
    Ok((version, gpus))
}

/// Asks the driver what it has. Never panics: a missing driver, a missing symbol (an older
/// driver than cudarc expects) or no GPU all come back as `error`.
pub fn driver_info() -> DriverInfo {
    if !driver_present() {
        return DriverInfo {
            driver_found: false,
            driver_cuda_version: None,
            driver_version: kernel_driver_version(),
            gpus: vec![],
            error: Some("no CUDA driver (libcuda.so) could be loaded".into()),
        };
    }
    let outcome = std::panic::catch_unwind(query_gpus).unwrap_or_else(|_| {
        Err("the CUDA driver lacks a function trtkit needs (driver too old?)".into())
    });
    match outcome {
        Ok((version, gpus)) => DriverInfo {
            driver_found: true,
            driver_cuda_version: Some(version),
            driver_version: kernel_driver_version(),
            gpus,
            error: None,
        },
        Err(error) => DriverInfo {
            driver_found: true,
            driver_cuda_version: None,
            driver_version: kernel_driver_version(),
            gpus: vec![],
            error: Some(error),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_module_line() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct 30 2025\nGCC version:  gcc 12\n";
        assert_eq!(
            parse_kernel_driver_version(text).as_deref(),
            Some("580.159.04")
        );
        assert_eq!(parse_kernel_driver_version("garbage"), None);
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct 30 2025\n";
        assert_eq!(
            parse_kernel_driver_version(open).as_deref(),
            Some("580.159.04")
        );
    }
}
