//! The GPUs a `bench` run spreads its cells over (`--devices 0,1,2,3` or `all`): numbered as
//! `nvidia-smi` numbers them, found through NVML with their UUIDs, so each cell's process can be
//! pinned to its board with `CUDA_VISIBLE_DEVICES=<uuid>`, whatever order CUDA would put the
//! boards in.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which GPUs to use, as a flag or a plan names them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeviceRequest {
    /// These `nvidia-smi` indices (`[0, 1]` in a plan).
    List(Vec<usize>),
    /// `"all"` (or `"0,1"`) in a plan.
    Word(String),
}

impl FromStr for DeviceRequest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "all" {
            return Ok(DeviceRequest::Word(s.into()));
        }
        let mut ids = vec![];
        for part in s.split(',').map(str::trim) {
            let id = part.parse::<usize>().map_err(|_| {
                format!("{part:?} is not a GPU index (--devices takes 0,1,2,3 or all)")
            })?;
            if ids.contains(&id) {
                return Err(format!("GPU {id} is named twice"));
            }
            ids.push(id);
        }
        Ok(DeviceRequest::List(ids))
    }
}

impl fmt::Display for DeviceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceRequest::List(ids) => {
                let ids: Vec<String> = ids.iter().map(usize::to_string).collect();
                write!(f, "{}", ids.join(","))
            }
            DeviceRequest::Word(w) => write!(f, "{w}"),
        }
    }
}

/// One GPU a cell can be pinned to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSlot {
    /// Its index as `nvidia-smi` and NVML number it.
    pub index: usize,
    /// Its UUID (`GPU-…`): how the cell's process is pinned to it.
    pub(crate) uuid: String,
    /// Its model, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
}

/// Every GPU NVML lists on this machine, or why it cannot say.
pub(crate) fn machine_gpus() -> Result<Vec<GpuSlot>> {
    let nvml = crate::cuda::identity::nvml().map_err(|e| {
        anyhow::anyhow!(
            "--devices: NVML is not readable here ({e}); is the NVIDIA driver installed?"
        )
    })?;
    let count = nvml.device_count()?;
    let mut gpus = vec![];
    for index in 0..count {
        let device = nvml.device_by_index(index)?;
        gpus.push(GpuSlot {
            index: index as usize,
            uuid: device.uuid()?,
            name: device.name()?,
        });
    }
    Ok(gpus)
}

/// Whether `visible` (a `CUDA_VISIBLE_DEVICES` value: indices, or UUIDs or their prefixes) names
/// `gpu`.
fn named_by(visible: &str, gpu: &GpuSlot) -> bool {
    visible.split(',').map(str::trim).any(|entry| {
        entry
            .parse::<usize>()
            .map(|i| i == gpu.index)
            .unwrap_or(false)
            || (entry.starts_with("GPU-") && gpu.uuid.starts_with(entry))
    })
}

/// The GPUs `request` picks out of `available` (this machine's): `all` is every one that
/// `visible` (`CUDA_VISIBLE_DEVICES`, when set) leaves; indices must exist. All of them must be
/// the same model: a cell's key names its GPU model, and a cell must not change key with the
/// board it lands on.
pub fn select(
    request: &DeviceRequest,
    available: &[GpuSlot],
    visible: Option<&str>,
) -> Result<Vec<GpuSlot>> {
    let picked: Vec<GpuSlot> = match request {
        DeviceRequest::Word(w) if w == "all" => available
            .iter()
            .filter(|g| visible.is_none_or(|v| named_by(v, g)))
            .cloned()
            .collect(),
        // A plan's word as the flag reads it (`" all "`, `"0,1"`): exactly `all`, or a list.
        DeviceRequest::Word(w) => match w.parse::<DeviceRequest>() {
            Ok(request) => return select(&request, available, visible),
            Err(e) => bail!("devices: {e}"),
        },
        DeviceRequest::List(ids) => {
            let mut out = vec![];
            for &id in ids {
                match available.iter().find(|g| g.index == id) {
                    Some(g) => out.push(g.clone()),
                    None => bail!(
                        "--devices: there is no GPU {id}: this machine has {} (indices as nvidia-smi lists them)",
                        match available.len() {
                            0 => "none".to_string(),
                            1 => "one, GPU 0".to_string(),
                            n => format!("{n}, 0–{}", n - 1),
                        }
                    ),
                }
            }
            out
        }
    };
    if picked.is_empty() {
        bail!(
            "--devices {request}: no GPU to use (NVML lists {}{})",
            available.len(),
            visible
                .map(|v| format!("; CUDA_VISIBLE_DEVICES={v} leaves none of them"))
                .unwrap_or_default()
        );
    }
    if let Some(other) = picked.iter().find(|g| g.name != picked[0].name) {
        bail!(
            "--devices {request}: GPU {} is an {} and GPU {} an {}: run one bench per GPU model (a cell's figures and key belong to one)",
            picked[0].index,
            picked[0].name,
            other.index,
            other.name
        );
    }
    Ok(picked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(names: &[&str]) -> Vec<GpuSlot> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| GpuSlot {
                index: i,
                uuid: format!("GPU-{i}{i}{i}{i}-aaaa"),
                name: n.to_string(),
            })
            .collect()
    }

    #[test]
    fn flags_parse_to_indices_or_all() {
        assert_eq!(
            "0, 2,3".parse::<DeviceRequest>(),
            Ok(DeviceRequest::List(vec![0, 2, 3]))
        );
        assert_eq!(
            "all".parse::<DeviceRequest>(),
            Ok(DeviceRequest::Word("all".into()))
        );
        assert!("0,0"
            .parse::<DeviceRequest>()
            .unwrap_err()
            .contains("twice"));
        assert!("gpu1"
            .parse::<DeviceRequest>()
            .unwrap_err()
            .contains("0,1,2,3 or all"));
    }

    #[test]
    fn all_is_every_gpu_that_cuda_visible_devices_leaves() {
        let h100 = gpus(&["H100"; 4]);
        let all = DeviceRequest::Word("all".into());
        let idx = |v: Vec<GpuSlot>| v.iter().map(|g| g.index).collect::<Vec<_>>();
        assert_eq!(idx(select(&all, &h100, None).unwrap()), [0, 1, 2, 3]);
        assert_eq!(idx(select(&all, &h100, Some("1,3")).unwrap()), [1, 3]);
        assert_eq!(idx(select(&all, &h100, Some("GPU-2222")).unwrap()), [2]);
        let err = select(&all, &h100, Some("7")).unwrap_err().to_string();
        assert!(err.contains("CUDA_VISIBLE_DEVICES=7"), "{err}");
        let err = select(&all, &[], None).unwrap_err().to_string();
        assert!(err.contains("no GPU to use"), "{err}");
    }

    #[test]
    fn indices_must_exist_and_name_one_gpu_model() {
        let h100 = gpus(&["H100"; 2]);
        let two = DeviceRequest::List(vec![1, 0]);
        let picked = select(&two, &h100, Some("0")).unwrap();
        assert_eq!(picked[0].uuid, "GPU-1111-aaaa");
        let err = select(&DeviceRequest::List(vec![2]), &h100, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no GPU 2") && err.contains("2, 0–1"), "{err}");
        let mixed = gpus(&["H100", "A100"]);
        let err = select(&two, &mixed, None).unwrap_err().to_string();
        assert!(err.contains("one bench per GPU model"), "{err}");
        let word = DeviceRequest::Word("0,1".into());
        assert_eq!(select(&word, &h100, None).unwrap().len(), 2);
        let spaced = DeviceRequest::Word(" all ".into());
        assert_eq!(select(&spaced, &h100, None).unwrap().len(), 2);
        let bad = DeviceRequest::Word("first".into());
        let err = select(&bad, &h100, None).unwrap_err().to_string();
        assert!(
            err.contains("devices: \"first\" is not a GPU index"),
            "{err}"
        );
        let plan: toml::Value = toml::from_str("devices = [0, 1]").unwrap();
        let from_plan: DeviceRequest = plan["devices"].clone().try_into().unwrap();
        assert_eq!(from_plan, DeviceRequest::List(vec![0, 1]));
    }
}
