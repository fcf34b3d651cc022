//! Finding the TensorRT libraries at run time (dlopen) and reading their versions.
//!
//! Two flavours exist: NVIDIA's TensorRT (`libnvinfer`, engines start with `ftrt`) and
//! TensorRT-RTX (`libtensorrt_rtx`, engines start with `vtrt`). trtkit binds one of them through
//! the `trtx` crate ([`BOUND`]): TensorRT-RTX 1.7 by default, TensorRT 11 with the `tensorrt`
//! cargo feature; the other is only reported. The bound libraries are looked for, in order:
//! `--tensorrt-dir DIR` or `TRTKIT_TENSORRT_DIR`, then `LD_LIBRARY_PATH` and the system's library
//! path, then the Python package of `python3` that ships them (`tensorrt_rtx_libs` from the
//! `tensorrt-rtx-cu13-libs` wheel; `tensorrt_libs` from `tensorrt-cu13-libs`).

pub(crate) use super::flavour::Flavour;
use super::sys::{open_library, read_version_symbol};
use crate::error::{fix_with, Setting};
use anyhow::{Context, Result};
use libloading::Library;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Names tried, newest first, for the TensorRT inference library.
pub(crate) const NVINFER_NAMES: &[&str] =
    &["libnvinfer.so.11", "libnvinfer.so.10", "libnvinfer.so"];
/// Names tried, newest first, for the TensorRT ONNX parser.
pub(crate) const NVONNXPARSER_NAMES: &[&str] = &[
    "libnvonnxparser.so.11",
    "libnvonnxparser.so.10",
    "libnvonnxparser.so",
];
/// File name of the TensorRT-RTX runtime and builder library (as the PyPI wheel ships it).
pub(crate) const RTX_RUNTIME: &str = "libtensorrt_rtx.so.1";
/// File name of the TensorRT-RTX ONNX parser library.
pub(crate) const RTX_PARSER: &str = "libtensorrt_onnxparser_rtx.so.1";
/// The TensorRT-RTX version this binary's headers (through `trtx`) were written for.
pub(crate) const RTX_BOUND_VERSION: (u32, u32) = (1, 7);
/// What to install when TensorRT-RTX is missing.
pub(crate) const RTX_PIP: &str = "python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116";
/// The environment variable naming a folder that holds the TensorRT libraries.
pub const DIR_ENV: &str = "TRTKIT_TENSORRT_DIR";

/// The TensorRT libraries a trtkit binary drives: which flavour, their file names, the Python
/// package that ships them, how to install them, and the version its headers were written for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BoundLibraries {
    /// The flavour.
    pub flavour: Flavour,
    /// The runtime and builder library's file name.
    pub runtime: &'static str,
    /// The ONNX parser library's file name.
    pub parser: &'static str,
    /// The Python package (of `python3`) whose folder holds both.
    pub(crate) python_package: &'static str,
    /// What to do when they are missing.
    pub install: &'static str,
    /// The (major, minor) version of the headers; a library of another major, or an older
    /// minor, is refused.
    pub version: (u32, u32),
}

/// TensorRT-RTX 1.7, what a default build binds.
pub(crate) const RTX_LIBRARIES: BoundLibraries = BoundLibraries {
    flavour: Flavour::TensorRtRtx,
    runtime: RTX_RUNTIME,
    parser: RTX_PARSER,
    python_package: "tensorrt_rtx_libs",
    install: RTX_PIP,
    version: RTX_BOUND_VERSION,
};

/// NVIDIA TensorRT 11, what a build with `--features tensorrt` binds (trtx's headers are 11.4).
/// The `tensorrt-cu13-libs` wheel puts both libraries in `site-packages/tensorrt_libs/`; PyPI holds
/// only a placeholder of it that fetches the real wheel from NVIDIA's index (pypi.nvidia.com), so
/// the install fails where that index cannot be reached (then `TRTKIT_TENSORRT_DIR` names a
/// TensorRT 11 tar package's lib folder).
pub(crate) const TENSORRT_LIBRARIES: BoundLibraries = BoundLibraries {
    flavour: Flavour::TensorRt,
    runtime: "libnvinfer.so.11",
    parser: "libnvonnxparser.so.11",
    python_package: "tensorrt_libs",
    install: "python3 -m pip install --extra-index-url https://pypi.nvidia.com 'tensorrt-cu13-libs>=11.4,<12'",
    version: (11, 4),
};

/// The libraries this binary binds.
pub(crate) const BOUND: BoundLibraries = if cfg!(feature = "tensorrt") {
    TENSORRT_LIBRARIES
} else {
    RTX_LIBRARIES
};

/// What was found for one TensorRT library.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LibraryProbe {
    /// Library being looked for, e.g. `libnvinfer`.
    pub library: String,
    /// Which TensorRT it belongs to.
    pub flavour: Flavour,
    /// Whether one of the candidate names loaded.
    pub found: bool,
    /// Full path of the loaded file.
    pub path: Option<String>,
    /// Version reported by the library, e.g. `10.13.3` or `1.7.1.116`.
    pub version: Option<String>,
    /// Where it was found (`TRTKIT_TENSORRT_DIR`, `system`, `python package`…).
    pub source: Option<String>,
    /// Names or places that were tried.
    pub(crate) tried: Vec<String>,
}

/// Decodes a TensorRT version integer: `major*10000 + minor*100 + patch` since TensorRT 10,
/// `major*1000 + minor*100 + patch` before.
pub(crate) fn decode_version(v: i32) -> String {
    if v >= 100_000 {
        format!("{}.{}.{}", v / 10_000, (v / 100) % 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, (v / 100) % 10, v % 100)
    }
}

/// Where a loaded library lives, read from `/proc/self/maps`.
fn loaded_path(stem: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.rsplit('/').next().is_some_and(|f| f.starts_with(stem)))
        .map(String::from)
}

/// The version of a loaded TensorRT or TensorRT-RTX runtime library: `major.minor.patch.build`
/// (from the per-part symbols both have), else the packed `getInferLibVersion`.
fn library_version(lib: &Library) -> Option<String> {
    rtx_version(lib)
        .or_else(|| read_version_symbol(lib, b"getInferLibVersion\0").map(decode_version))
}

fn rtx_version(lib: &Library) -> Option<String> {
    let major = read_version_symbol(lib, b"getInferLibMajorVersion\0")?;
    let minor = read_version_symbol(lib, b"getInferLibMinorVersion\0")?;
    let patch = read_version_symbol(lib, b"getInferLibPatchVersion\0")?;
    let build = read_version_symbol(lib, b"getInferLibBuildVersion\0");
    Some(match build {
        Some(b) => format!("{major}.{minor}.{patch}.{b}"),
        None => format!("{major}.{minor}.{patch}"),
    })
}

fn probe_names(library: &str, names: &[&str], version_symbol: &[u8]) -> LibraryProbe {
    let tried: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    for name in names {
        let Some(lib) = open_library(name.as_ref()) else {
            continue;
        };
        let version = read_version_symbol(&lib, version_symbol).map(decode_version);
        std::mem::forget(lib);
        return LibraryProbe {
            library: library.into(),
            flavour: Flavour::TensorRt,
            found: true,
            path: loaded_path(library),
            version,
            source: Some("system".into()),
            tried,
        };
    }
    LibraryProbe {
        library: library.into(),
        flavour: Flavour::TensorRt,
        found: false,
        path: None,
        version: None,
        source: None,
        tried,
    }
}

/// The bound TensorRT's two libraries, found and opened.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrtLibraries {
    /// The runtime and builder (`libtensorrt_rtx.so.1`, or `libnvinfer.so.11`).
    pub runtime: PathBuf,
    /// The ONNX parser (`libtensorrt_onnxparser_rtx.so.1`, or `libnvonnxparser.so.11`).
    pub parser: PathBuf,
    /// `major.minor.patch.build` as the library reports it.
    pub version: String,
    /// Where they were found.
    pub source: String,
}

/// The folder of a Python package of `python3` (such as `tensorrt_rtx_libs`), found without importing
/// it (importing would load the libraries into Python for nothing).
fn python_package_dir(package: &str) -> Option<PathBuf> {
    let code = format!(
        "import importlib.util as u; s = u.find_spec('{package}'); print(list(s.submodule_search_locations)[0] if s else '')"
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &code])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// Opens the bound TensorRT from a folder holding both libraries.
fn open_in(dir: &Path, source: &str) -> Result<TrtLibraries> {
    let runtime = dir.join(BOUND.runtime);
    let parser = dir.join(BOUND.parser);
    for lib in [&runtime, &parser] {
        if !lib.is_file() {
            return Err(fix_with(
                Setting::TensorrtDir,
                format!(
                    "{}: no {} there ({source}); {}: `{}`, or point {DIR_ENV} at the folder that holds {} and {}",
                    dir.display(),
                    lib.file_name().unwrap_or_default().to_string_lossy(),
                    BOUND.flavour,
                    BOUND.install,
                    BOUND.runtime,
                    BOUND.parser
                ),
            ));
        }
    }
    let lib = open_library(runtime.as_os_str()).with_context(|| {
        format!(
            "{}: cannot be loaded (a damaged or foreign library?)",
            runtime.display()
        )
    })?;
    let version = library_version(&lib).unwrap_or_else(|| "unknown".into());
    std::mem::forget(lib);
    Ok(TrtLibraries {
        runtime,
        parser,
        version,
        source: source.into(),
    })
}

/// Finds the bound TensorRT ([`BOUND`]): `dir` (from `--tensorrt-dir`), `TRTKIT_TENSORRT_DIR`,
/// the system's library path, then `python3`'s package. A folder given explicitly must hold the
/// libraries; the error names it.
pub fn locate_libraries(dir: Option<&Path>) -> Result<TrtLibraries> {
    if let Some(d) = dir {
        return open_in(d, "--tensorrt-dir");
    }
    if let Some(d) = std::env::var_os(DIR_ENV).filter(|d| !d.is_empty()) {
        return open_in(Path::new(&d), DIR_ENV);
    }
    if let Some(lib) = open_library(BOUND.runtime.as_ref()) {
        let version = library_version(&lib).unwrap_or_else(|| "unknown".into());
        std::mem::forget(lib);
        let stem = BOUND.runtime.split(".so").next().unwrap_or(BOUND.runtime);
        if let Some(path) = loaded_path(&format!("{stem}.so")) {
            let runtime = PathBuf::from(path);
            let beside = runtime.with_file_name(BOUND.parser);
            return Ok(TrtLibraries {
                parser: if beside.is_file() {
                    beside
                } else {
                    PathBuf::from(BOUND.parser)
                },
                runtime,
                version,
                source: "system library path".into(),
            });
        }
    }
    if let Some(d) = python_package_dir(BOUND.python_package) {
        return open_in(&d, &format!("python3's {} package", BOUND.python_package));
    }
    Err(fix_with(
        Setting::TensorrtDir,
        format!(
            "{} not found (looked in {DIR_ENV}, LD_LIBRARY_PATH and the system's library path, and python3's {} package); {}: `{}`",
            BOUND.flavour, BOUND.python_package, BOUND.flavour, BOUND.install
        ),
    ))
}

/// Checks that found libraries are a version this binary's bindings were written for: the same
/// major and minor for TensorRT-RTX, the same major and at least the headers' minor for TensorRT.
pub(crate) fn check_version(libs: &TrtLibraries) -> Result<()> {
    let mut parts = libs.version.split('.').map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next().flatten(), parts.next().flatten());
    let (want_major, want_minor) = BOUND.version;
    let fits = match BOUND.flavour {
        Flavour::TensorRtRtx => (major, minor) == (Some(want_major), Some(want_minor)),
        Flavour::TensorRt => major == Some(want_major) && minor >= Some(want_minor),
    };
    if !fits {
        return Err(fix_with(
            Setting::TensorrtDir,
            format!(
                "{}: {flavour} {} found, but this trtkit is built for {flavour} {want_major}.{want_minor}; {flavour}: `{}`, or point {DIR_ENV} at a {want_major}.{want_minor} installation",
                libs.runtime.display(),
                libs.version,
                BOUND.install,
                flavour = BOUND.flavour,
            ),
        ));
    }
    Ok(())
}

/// [`locate_libraries`], then [`check_version`]: the TensorRT this binary can drive.
pub(crate) fn locate_usable(dir: Option<&Path>) -> Result<TrtLibraries> {
    let libs = locate_libraries(dir)?;
    check_version(&libs)?;
    Ok(libs)
}

/// Looks for every TensorRT library trtkit knows and reports what it found (for `doctor`): the
/// bound one first, as `build` finds it, then the other flavour's.
pub(crate) fn probe_tensorrt() -> Vec<LibraryProbe> {
    let bound = locate_libraries(None);
    let rtx_tried = vec![
        DIR_ENV.to_string(),
        BOUND.runtime.to_string(),
        format!("python3: {}", BOUND.python_package),
    ];
    let name = BOUND.runtime.split(".so").next().unwrap_or(BOUND.runtime);
    let mut out = vec![match bound {
        Ok(l) => LibraryProbe {
            library: name.into(),
            flavour: BOUND.flavour,
            found: true,
            path: Some(l.runtime.display().to_string()),
            version: Some(l.version),
            source: Some(l.source),
            tried: rtx_tried,
        },
        Err(_) => LibraryProbe {
            library: name.into(),
            flavour: BOUND.flavour,
            found: false,
            path: None,
            version: None,
            source: None,
            tried: rtx_tried,
        },
    }];
    if BOUND.flavour == Flavour::TensorRt {
        return out;
    }
    out.push(probe_names(
        "libnvinfer",
        NVINFER_NAMES,
        b"getInferLibVersion\0",
    ));
    out.push(probe_names(
        "libnvonnxparser",
        NVONNXPARSER_NAMES,
        b"getNvOnnxParserVersion\0",
    ));
    out
}

/// Whether TensorRT-RTX engines run on a GPU of this compute capability (`major.minor`): the
/// table of [`super::flavour`] (8.0, 8.6, 8.9 and 12.x; Hopper 9.0 and data-center Blackwell 10.x
/// are refused at deserialization).
pub fn rtx_runs_on(compute_capability: &str) -> bool {
    super::flavour::runs_on(Flavour::TensorRtRtx, compute_capability)
}

/// One sentence on whether a flavour's engines run on a GPU of this compute capability.
pub(crate) fn can_run_on(flavour: Flavour, gpu: &str, compute_capability: &str) -> (bool, String) {
    let runs = super::flavour::runs_on(flavour, compute_capability);
    let why = match (flavour, runs) {
        (Flavour::TensorRtRtx, true) => {
            format!("TensorRT-RTX engines run on {gpu} (compute capability {compute_capability})")
        }
        (Flavour::TensorRtRtx, false) => format!(
            "TensorRT-RTX engines cannot run on {gpu}: it has compute capability {compute_capability}, and TensorRT-RTX runs on 8.0, 8.6, 8.9 and 12.x (A100, RTX 30/40/50, L4-class Ada); for this GPU use NVIDIA TensorRT (trtkit built with `--features tensorrt`; `bash scripts/install.sh` sets it up), or run the engine on one of those"
        ),
        (Flavour::TensorRt, true) => format!(
            "TensorRT engines built on {gpu} run there (compute capability {compute_capability})"
        ),
        (Flavour::TensorRt, false) => format!(
            "TensorRT engines cannot run on {gpu}: it has compute capability {compute_capability}, and TensorRT 11 (built on CUDA 13) needs 7.5 or later"
        ),
    };
    (runs, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_both_version_schemes() {
        assert_eq!(decode_version(101303), "10.13.3");
        assert_eq!(decode_version(110002), "11.0.2");
        assert_eq!(decode_version(8601), "8.6.1");
    }

    #[test]
    fn rtx_refuses_hopper_and_accepts_ampere_ada_blackwell() {
        assert!(!rtx_runs_on("9.0"));
        assert!(!rtx_runs_on("10.0"));
        assert!(!rtx_runs_on("7.5"));
        for cc in ["8.0", "8.6", "8.9", "12.0"] {
            assert!(rtx_runs_on(cc), "{cc}");
        }
        let (ok, why) = can_run_on(Flavour::TensorRtRtx, "NVIDIA H200", "9.0");
        assert!(!ok);
        assert!(why.contains("9.0") && why.contains("NVIDIA H200"), "{why}");
    }

    #[test]
    fn an_explicit_folder_without_the_libraries_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = locate_libraries(Some(dir.path())).unwrap_err().to_string();
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
        assert!(err.contains(BOUND.install), "{err}");
    }

    #[test]
    fn version_check_names_what_was_found() {
        let (old, good) = if cfg!(feature = "tensorrt") {
            ("10.13.3", "11.5.0")
        } else {
            ("1.6.0.1", "1.7.1.116")
        };
        let libs = TrtLibraries {
            runtime: PathBuf::from("/x/lib.so"),
            parser: PathBuf::from("/x/p"),
            version: old.into(),
            source: "test".into(),
        };
        let err = check_version(&libs).unwrap_err().to_string();
        let want = format!("{}.{}", BOUND.version.0, BOUND.version.1);
        assert!(err.contains(old) && err.contains(&want), "{err}");
        let ok = TrtLibraries {
            version: good.into(),
            ..libs
        };
        check_version(&ok).unwrap();
    }
}
