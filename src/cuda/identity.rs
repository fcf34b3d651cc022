//! Which GPU is which: a board's UUID as NVML writes it, the one NVML handle of the process,
//! and the way from a CUDA ordinal or a UUID to that board's NVML device. CUDA's numbering
//! changes with `CUDA_VISIBLE_DEVICES` and NVML's does not, so a GPU is found in NVML by its
//! UUID wherever the UUID is known.

use nvml_wrapper::{Device, Nvml};
use std::sync::OnceLock;

/// 16 UUID bytes written as NVML writes a GPU's UUID: `GPU-` and 8-4-4-4-12 hex digits.
pub(crate) fn nvml_uuid(bytes: &[u8; 16]) -> String {
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

/// NVML, opened the first time it is asked for and kept for the life of the process; `Err`
/// holds NVML's reason when it cannot be opened (asked once: a refusal is not retried).
pub fn nvml() -> Result<&'static Nvml, String> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| Nvml::init().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

/// A GPU as NVML finds it: by index, or by UUID (a cell pinned to a board, whose CUDA device 0
/// may be any of NVML's indices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NvmlGpu {
    /// NVML's (and `nvidia-smi`'s) index.
    Index(usize),
    /// The board's UUID, `GPU-…`.
    Uuid(String),
}

impl NvmlGpu {
    /// The board behind CUDA device `ordinal`: by its UUID where the driver gives one (under a
    /// scheduler's `CUDA_VISIBLE_DEVICES`, CUDA device 0 may be any of NVML's), else NVML's
    /// device of that index.
    pub(crate) fn of_cuda_ordinal(ordinal: usize, uuid: Option<String>) -> NvmlGpu {
        match uuid {
            Some(uuid) => NvmlGpu::Uuid(uuid),
            None => NvmlGpu::Index(ordinal),
        }
    }

    /// The NVML device of this GPU, or why NVML cannot give it.
    pub fn device(&self) -> Result<Device<'static>, String> {
        let nvml = nvml()?;
        match self {
            NvmlGpu::Index(i) => nvml
                .device_by_index(*i as u32)
                .map_err(|e| format!("NVML has no GPU {i} ({e})")),
            NvmlGpu::Uuid(u) => nvml
                .device_by_uuid(u.as_str())
                .map_err(|e| format!("NVML has no GPU {u} ({e})")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_written_as_nvml_writes_them() {
        let bytes: [u8; 16] = core::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(
            nvml_uuid(&bytes),
            "GPU-00112233-4455-6677-8899-aabbccddeeff"
        );
    }

    #[test]
    fn a_cuda_ordinal_is_found_by_its_uuid_when_there_is_one() {
        assert_eq!(
            NvmlGpu::of_cuda_ordinal(1, Some("GPU-ab".into())),
            NvmlGpu::Uuid("GPU-ab".into())
        );
        assert_eq!(NvmlGpu::of_cuda_ordinal(1, None), NvmlGpu::Index(1));
    }

    #[test]
    fn nvml_is_opened_once_and_answers_the_same_every_time() {
        match (nvml(), nvml()) {
            (Ok(a), Ok(b)) => assert!(std::ptr::eq(a, b)),
            (Err(a), Err(b)) => assert_eq!(a, b),
            _ => panic!("NVML opened once and failed once"),
        }
    }
}
