//! What the CUDA driver reports: its version and the GPUs it sees (for `doctor`).

use cudarc::driver::{result, sys};
use serde::{Deserialize, Serialize};

/// One GPU as the driver describes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Device ordinal (what `--device-id` takes).
    pub index: i32,
    /// Marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Total device memory in bytes.
    pub memory_bytes: u64,
    /// Compute capability as `major.minor`.
    pub compute_capability: String,
    /// The board's UUID as NVML writes it (`GPU-…`): how NVML finds this device whatever
    /// `CUDA_VISIBLE_DEVICES` did to CUDA's numbering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// The driver and its GPUs, or why they could not be read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DriverInfo {
    /// Whether libcuda could be loaded.
    pub driver_found: bool,
    /// CUDA version the driver supports, e.g. `13.0`.
    pub driver_cuda_version: Option<String>,
    /// Kernel driver version, e.g. `580.159.04` (from `/proc/driver/nvidia/version` on Linux).
    pub driver_version: Option<String>,
    /// GPUs visible to this process.
    pub gpus: Vec<GpuInfo>,
    /// Why the driver or the GPUs could not be read, when they could not.
    pub error: Option<String>,
}

/// The NVIDIA kernel driver version, parsed from the text the kernel module exposes.
pub fn kernel_driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_kernel_driver_version(&text)
}

/// Finds the version in `/proc/driver/nvidia/version` text: the token after `Kernel Module`.
pub fn parse_kernel_driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    let rest = line.split("Kernel Module").nth(1)?;
    rest.split_whitespace()
        .find(|t| t.contains('.') && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(String::from)
}

/// True when the CUDA driver library can be loaded on this machine.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda under its usual names; loads no symbol.
    unsafe { sys::is_culib_present() }
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
    result::init().map_err(|e| format!("cuInit failed: {}", describe(&e)))?;
    let mut version = 0;
    // SAFETY: cuDriverGetVersion writes one int through a valid pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| format!("cuDriverGetVersion failed: {}", describe(&e)))?;
    let version = format!("{}.{}", version / 1000, (version % 1000) / 10);
    let count = result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount failed: {}", describe(&e)))?;
    let mut gpus = Vec::new();
    for index in 0..count {
        let gpu = (|| -> Result<GpuInfo, result::DriverError> {
            let dev = result::device::get(index)?;
            let name = result::device::get_name(dev)?;
            // SAFETY: `dev` is a valid device handle from cuDeviceGet after cuInit.
            let memory_bytes = unsafe { result::device::total_mem(dev)? } as u64;
            use sys::CUdevice_attribute::*;
            // SAFETY: as above; the attributes are plain integer queries.
            let (major, minor) = unsafe {
                (
                    result::device::get_attribute(
                        dev,
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    )?,
                    result::device::get_attribute(
                        dev,
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    )?,
                )
            };
            let uuid = result::device::get_uuid(dev)
                .ok()
                .map(|u| nvml_uuid(&u.bytes.map(|b| b as u8)));
            Ok(GpuInfo {
                index,
                name,
                memory_bytes,
                compute_capability: format!("{major}.{minor}"),
                uuid,
            })
        })()
        .map_err(|e| format!("GPU {index}: {}", describe(&e)))?;
        gpus.push(gpu);
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

/// 16 UUID bytes written as NVML writes a GPU's UUID: `GPU-` and 8-4-4-4-12 hex digits.
pub fn nvml_uuid(bytes: &[u8; 16]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex[..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..].concat()
    )
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

    #[test]
    fn uuids_are_written_as_nvml_writes_them() {
        let bytes: [u8; 16] = core::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(
            nvml_uuid(&bytes),
            "GPU-00112233-4455-6677-8899-aabbccddeeff"
        );
    }
}
