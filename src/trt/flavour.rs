//! Which TensorRT runs engines on a GPU, from its compute capability alone, and which one this
//! binary loads: the one table `doctor` and `scripts/install.sh` (through
//! `trtkit doctor --tensorrt-flavour`) decide by.
//!
//! The table, for the CUDA 13 libraries trtkit loads (`tensorrt-rtx-cu13-libs`, and NVIDIA's
//! TensorRT 11 in `tensorrt-cu13-libs`):
//!
//! | compute capability | runs engines | GPUs |
//! | --- | --- | --- |
//! | 8.0, 8.6, 8.9, 12.x | TensorRT-RTX | A100, RTX 30/40/50, L4/L40, RTX PRO, DGX Spark |
//! | 7.5 (and 7.x from 7.5) | TensorRT 11 | T4, RTX 20 |
//! | 8.7 | TensorRT 11 | Jetson Orin |
//! | 9.0, 10.x | TensorRT 11 | H100, H200, GH200, B200, GB200, B300 |
//! | 11.x, 13.x and later | TensorRT 11 | not known yet |
//! | below 7.5 | none | Volta, Pascal and older |
//!
//! Why: TensorRT-RTX refuses Hopper (9.0) and data-center Blackwell (10.x) at deserialization,
//! and ships for x86-64 Linux and Windows only (no Jetson, 8.7). NVIDIA lists Turing (7.5) for
//! TensorRT-RTX only with engines built for Turing alone: its portable engines, which trtkit
//! builds (on any machine, no GPU needed), leave Turing out, so a Turing GPU is sent to
//! TensorRT 11, which builds for the GPU it runs on. A compute capability the table does not know
//! is sent to TensorRT 11 too: TensorRT-RTX refuses whatever its support list does not name,
//! while NVIDIA's TensorRT has covered every architecture from 7.5 on, so that is where such a
//! GPU has a chance. Below 7.5 neither runs: CUDA 13, which both libraries are built on, dropped
//! Volta (7.0, 7.2) and everything older, and TensorRT 10 already needed 7.5.
//!
//! [`Flavour`] lives here too: the loader re-exports it.

use serde::{Deserialize, Serialize};

/// Which TensorRT a library or an engine belongs to (serialized `tensor-rt` and `tensor-rt-rtx`,
/// as engine sidecars' keys hold it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flavour {
    /// NVIDIA TensorRT (`libnvinfer`).
    TensorRt,
    /// NVIDIA TensorRT for RTX (`libtensorrt_rtx`).
    TensorRtRtx,
}

impl std::fmt::Display for Flavour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flavour::TensorRt => "TensorRT",
            Flavour::TensorRtRtx => "TensorRT-RTX",
        })
    }
}

/// The TensorRT a GPU needs to run engines: one of the two flavours, or none that trtkit loads.
/// Serialized as the word `trtkit doctor --tensorrt-flavour` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Needed {
    /// TensorRT-RTX (what a default trtkit build loads).
    #[serde(rename = "tensorrt-rtx")]
    TensorRtRtx,
    /// NVIDIA's TensorRT 11 (what a build with `--features tensorrt` loads).
    #[serde(rename = "tensorrt")]
    TensorRt,
    /// Neither runs on this GPU.
    #[serde(rename = "none")]
    Unsupported,
}

impl Needed {
    /// The one word for it: `tensorrt-rtx`, `tensorrt` or `none`.
    pub fn word(self) -> &'static str {
        match self {
            Needed::TensorRtRtx => "tensorrt-rtx",
            Needed::TensorRt => "tensorrt",
            Needed::Unsupported => "none",
        }
    }

    /// Its name in a sentence: `TensorRT-RTX`, `NVIDIA TensorRT 11` or `no TensorRT`.
    pub fn name(self) -> &'static str {
        match self {
            Needed::TensorRtRtx => "TensorRT-RTX",
            Needed::TensorRt => "NVIDIA TensorRT 11",
            Needed::Unsupported => "no TensorRT",
        }
    }

    /// The flavour, when there is one.
    pub fn flavour(self) -> Option<Flavour> {
        match self {
            Needed::TensorRtRtx => Some(Flavour::TensorRtRtx),
            Needed::TensorRt => Some(Flavour::TensorRt),
            Needed::Unsupported => None,
        }
    }
}

impl From<Flavour> for Needed {
    fn from(f: Flavour) -> Self {
        match f {
            Flavour::TensorRtRtx => Needed::TensorRtRtx,
            Flavour::TensorRt => Needed::TensorRt,
        }
    }
}

/// The TensorRT that runs engines on a GPU of compute capability `major.minor` (the table in
/// this module's documentation).
pub(crate) fn needed_for(major: u32, minor: u32) -> Needed {
    match (major, minor) {
        (8, 0) | (8, 6) | (8, 9) | (12, _) => Needed::TensorRtRtx,
        (0..=6, _) | (7, 0..=4) => Needed::Unsupported,
        _ => Needed::TensorRt,
    }
}

/// Reads a compute capability written `major.minor` (as the driver and `nvidia-smi` write it).
pub(crate) fn parse_compute_capability(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// [`needed_for`] a compute capability written `major.minor`; one that cannot be read is an
/// unknown GPU, sent to TensorRT 11 like every other one the table does not know.
pub(crate) fn needed_for_text(compute_capability: &str) -> Needed {
    match parse_compute_capability(compute_capability) {
        Some((major, minor)) => needed_for(major, minor),
        None => Needed::TensorRt,
    }
}

/// Whether a flavour's engines run on a GPU of this compute capability: TensorRT-RTX only where
/// the table sends a GPU to it, NVIDIA's TensorRT 11 on every GPU of 7.5 or later (it also runs on
/// the GPUs the table gives TensorRT-RTX).
pub(crate) fn runs_on(flavour: Flavour, compute_capability: &str) -> bool {
    let needed = needed_for_text(compute_capability);
    match flavour {
        Flavour::TensorRtRtx => needed == Needed::TensorRtRtx,
        Flavour::TensorRt => needed != Needed::Unsupported,
    }
}

/// The flavour this binary loads: NVIDIA's TensorRT when built with `--features tensorrt`,
/// TensorRT-RTX otherwise.
pub(crate) const fn this_binary() -> Flavour {
    if cfg!(feature = "tensorrt") {
        Flavour::TensorRt
    } else {
        Flavour::TensorRtRtx
    }
}

/// The one command, run in trtkit's source folder, that installs the TensorRT a GPU needs and a
/// trtkit that loads it (`scripts/install.sh` asks this binary which one, as `doctor` does).
pub(crate) const FIX_COMMAND: &str = "bash scripts/install.sh";

/// What `scripts/install.sh` runs for NVIDIA's TensorRT 11, by hand (in trtkit's source folder).
pub(crate) const TENSORRT_BY_HAND: &str = "python3 -m pip install --extra-index-url https://pypi.nvidia.com 'tensorrt-cu13-libs>=11.4,<12' && cargo install --locked --path . --features tensorrt";

/// What `scripts/install.sh` runs for TensorRT-RTX, by hand (in trtkit's source folder).
pub(crate) const RTX_BY_HAND: &str =
    "python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116 && cargo install --locked --path .";

/// How to get a trtkit for a GPU that needs `needed` when this binary loads `binary`: `None`
/// when it already fits, or when no flavour runs there (nothing to install fixes that).
pub(crate) fn fix(binary: Flavour, needed: Needed) -> Option<String> {
    let by_hand = match needed {
        Needed::Unsupported => return None,
        _ if needed == Needed::from(binary) => return None,
        Needed::TensorRt => TENSORRT_BY_HAND,
        Needed::TensorRtRtx => RTX_BY_HAND,
    };
    Some(format!(
        "`{FIX_COMMAND}` in trtkit's source folder (by hand: `{by_hand}`)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table() {
        let rtx = [(8, 0), (8, 6), (8, 9), (12, 0), (12, 1), (12, 9)];
        for (major, minor) in rtx {
            assert_eq!(
                needed_for(major, minor),
                Needed::TensorRtRtx,
                "{major}.{minor}"
            );
        }
        let tensorrt = [
            (7, 5),
            (7, 9),
            (8, 7),
            (9, 0),
            (10, 0),
            (10, 3),
            (11, 0),
            (13, 0),
        ];
        for (major, minor) in tensorrt {
            assert_eq!(
                needed_for(major, minor),
                Needed::TensorRt,
                "{major}.{minor}"
            );
        }
        let none = [(0, 0), (3, 5), (5, 2), (6, 1), (7, 0), (7, 2), (7, 4)];
        for (major, minor) in none {
            assert_eq!(
                needed_for(major, minor),
                Needed::Unsupported,
                "{major}.{minor}"
            );
        }
    }

    #[test]
    fn unknown_minors_of_ampere_and_ada_go_to_tensorrt() {
        for minor in [1, 2, 5, 8] {
            assert_eq!(needed_for(8, minor), Needed::TensorRt, "8.{minor}");
        }
    }

    #[test]
    fn compute_capabilities_are_read_as_the_driver_writes_them() {
        assert_eq!(parse_compute_capability("9.0"), Some((9, 0)));
        assert_eq!(parse_compute_capability(" 12.0\n"), Some((12, 0)));
        assert_eq!(parse_compute_capability("10.3"), Some((10, 3)));
        assert_eq!(parse_compute_capability("9"), None);
        assert_eq!(parse_compute_capability("a.b"), None);
        assert_eq!(needed_for_text("8.9"), Needed::TensorRtRtx);
        assert_eq!(needed_for_text("9.0"), Needed::TensorRt);
        assert_eq!(needed_for_text("garbage"), Needed::TensorRt);
    }

    #[test]
    fn tensorrt_runs_wherever_cuda_13_does() {
        assert!(runs_on(Flavour::TensorRt, "8.9"));
        assert!(runs_on(Flavour::TensorRt, "9.0"));
        assert!(!runs_on(Flavour::TensorRt, "7.0"));
        assert!(runs_on(Flavour::TensorRtRtx, "12.0"));
        assert!(!runs_on(Flavour::TensorRtRtx, "9.0"));
        assert!(!runs_on(Flavour::TensorRtRtx, "7.5"));
    }

    #[test]
    fn words_are_what_the_flag_prints_and_the_json_holds() {
        for n in [Needed::TensorRtRtx, Needed::TensorRt, Needed::Unsupported] {
            assert_eq!(serde_json::to_value(n).unwrap(), n.word());
            assert_eq!(
                serde_json::from_value::<Needed>(n.word().into()).unwrap(),
                n
            );
        }
        assert_eq!(
            Needed::from(Flavour::TensorRt).flavour(),
            Some(Flavour::TensorRt)
        );
        assert_eq!(Needed::Unsupported.flavour(), None);
    }

    #[test]
    fn the_fix_names_the_install_script_only_where_the_flavours_differ() {
        assert_eq!(fix(Flavour::TensorRtRtx, Needed::TensorRtRtx), None);
        assert_eq!(fix(Flavour::TensorRtRtx, Needed::Unsupported), None);
        let to_tensorrt = fix(Flavour::TensorRtRtx, Needed::TensorRt).unwrap();
        assert!(to_tensorrt.contains(FIX_COMMAND), "{to_tensorrt}");
        assert!(to_tensorrt.contains("--features tensorrt"), "{to_tensorrt}");
        assert!(to_tensorrt.contains("pypi.nvidia.com"), "{to_tensorrt}");
        let to_rtx = fix(Flavour::TensorRt, Needed::TensorRtRtx).unwrap();
        assert!(to_rtx.contains("tensorrt-rtx-cu13-libs"), "{to_rtx}");
        assert!(!to_rtx.contains("--features"), "{to_rtx}");
    }

    #[test]
    fn this_binary_is_the_bound_flavour() {
        assert_eq!(this_binary(), crate::trt::loader::BOUND.flavour);
        assert!(RTX_BY_HAND.starts_with(crate::trt::loader::RTX_PIP));
        assert!(TENSORRT_BY_HAND.starts_with(crate::trt::loader::TENSORRT_LIBRARIES.install));
    }
}
