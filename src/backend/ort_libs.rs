//! Finding ONNX Runtime on this machine: its library (`ORT_DYLIB_PATH`, else the `onnxruntime`
//! Python package, CPU or GPU build), whether its CUDA provider is beside it, and the CUDA and
//! cuDNN libraries that provider loads, with where each was found. Nothing is downloaded: what
//! is missing is said with the `pip install` line that brings it.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How to get the CPU build, said when no ONNX Runtime can be found.
pub(crate) const HOW_TO_GET: &str = "install it with `python3 -m pip install onnxruntime==1.31.1` (or `onnxruntime-gpu==1.31.1` on a machine with an NVIDIA GPU) or set ORT_DYLIB_PATH to libonnxruntime.so";

/// The one line that installs ONNX Runtime's CUDA provider and every library it loads.
pub(crate) const INSTALL_GPU: &str = "python3 -m pip uninstall -y onnxruntime; python3 -m pip install 'onnxruntime-gpu[cuda,cudnn]==1.31.1' 'nvidia-cublas~=13.0'";

/// The shared libraries ONNX Runtime's CUDA provider needs, in the order they must be loaded
/// (each after those it links against), with the wheel that ships each.
pub(crate) const CUDA_DEPENDENCIES: [(&str, &str); 5] = [
    ("libcudart.so.13", "nvidia-cuda-runtime~=13.0"),
    ("libcublasLt.so.13", "nvidia-cublas~=13.0"),
    ("libcublas.so.13", "nvidia-cublas~=13.0"),
    ("libcurand.so.10", "nvidia-curand~=10.0"),
    ("libcudnn.so.9", "nvidia-cudnn-cu13~=9.0"),
];

/// cuDNN 9's sub-libraries, which `libcudnn.so.9` opens by name from wherever it was found.
const CUDNN_PARTS: [&str; 7] = [
    "libcudnn_graph.so.9",
    "libcudnn_ops.so.9",
    "libcudnn_heuristic.so.9",
    "libcudnn_adv.so.9",
    "libcudnn_cnn.so.9",
    "libcudnn_engines_precompiled.so.9",
    "libcudnn_engines_runtime_compiled.so.9",
];

/// The CUDA provider's file name, beside `libonnxruntime.so` in a GPU build.
pub(crate) const CUDA_PROVIDER: &str = "libonnxruntime_providers_cuda.so";

/// Where the Python side of this machine keeps packages: the `onnxruntime` package (if any) and
/// the site-packages folders, read once from `python3` without importing anything heavy.
#[derive(Clone, Debug, Default)]
struct PythonFacts {
    onnxruntime_dir: Option<PathBuf>,
    site_dirs: Vec<PathBuf>,
}

fn python_facts() -> &'static PythonFacts {
    static FACTS: OnceLock<PythonFacts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let script = "import importlib.util, site, sys\n\
            s = importlib.util.find_spec('onnxruntime')\n\
            print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')\n\
            dirs = list(getattr(site, 'getsitepackages', lambda: [])()) + [site.getusersitepackages()]\n\
            print('\\n'.join(dirs))";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .stderr(std::process::Stdio::null())
            .output();
        match out.ok().filter(|o| o.status.success()) {
            Some(o) => parse_python_facts(&String::from_utf8_lossy(&o.stdout)),
            None => PythonFacts::default(),
        }
    })
}

fn parse_python_facts(text: &str) -> PythonFacts {
    let mut lines = text.lines();
    let ort = lines.next().unwrap_or("").trim();
    PythonFacts {
        onnxruntime_dir: (!ort.is_empty()).then(|| PathBuf::from(ort)),
        site_dirs: lines
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect(),
    }
}

/// The newest `libonnxruntime.so*` in a Python package's `capi/` folder.
pub(crate) fn capi_library(package_dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(package_dir.join("capi"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// The ONNX Runtime library found, and how.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrtLibrary {
    /// `libonnxruntime.so*`.
    pub path: PathBuf,
    /// `ORT_DYLIB_PATH` or `the onnxruntime Python package`.
    pub source: String,
    /// The CUDA provider beside it, if this is a GPU build.
    pub cuda_provider: Option<PathBuf>,
}

/// Finds the ONNX Runtime shared library: `ORT_DYLIB_PATH`, else the Python package.
pub(crate) fn locate_library() -> Result<OrtLibrary> {
    let (path, source) = if let Some(p) =
        std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty())
    {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "ORT_DYLIB_PATH={} does not exist; {HOW_TO_GET}",
                p.display()
            );
        }
        (p, "ORT_DYLIB_PATH".to_string())
    } else {
        match python_facts()
                .onnxruntime_dir
                .as_deref()
                .and_then(capi_library)
            {
                Some(p) => (p, "the onnxruntime Python package".to_string()),
                None => bail!("ONNX Runtime library not found (no ORT_DYLIB_PATH, no onnxruntime Python package); {HOW_TO_GET}"),
            }
    };
    let provider = path.parent().map(|d| d.join(CUDA_PROVIDER));
    Ok(OrtLibrary {
        cuda_provider: provider.filter(|p| p.is_file()),
        path,
        source,
    })
}

/// One library the CUDA provider needs, and where it was found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CudaDependency {
    /// Its soname, e.g. `libcudnn.so.9`.
    pub library: String,
    /// The file found, or `None`.
    pub path: Option<PathBuf>,
    /// The pip requirement that ships it.
    pub wheel: String,
}

/// The folders searched for the provider's CUDA libraries, in the dynamic linker's order:
/// `LD_LIBRARY_PATH`, the CUDA toolkit and the system folders, then the NVIDIA wheels in every
/// site-packages folder (CUDA 13's `nvidia/cu13/lib`, cuDNN's `nvidia/cudnn/lib`, and the
/// per-library folders) for what the system lacks. The system's copy comes first so that every
/// user of a library in one process (tract's CUDA runtime opens cuDNN by name too) gets the
/// same one: two cuDNN builds in one process refuse to work together.
pub(crate) fn cuda_search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
    ] {
        dirs.push(PathBuf::from(d));
    }
    for site in &python_facts().site_dirs {
        for sub in [
            "cu13/lib",
            "cudnn/lib",
            "cublas/lib",
            "cuda_runtime/lib",
            "curand/lib",
        ] {
            dirs.push(site.join("nvidia").join(sub));
        }
    }
    dirs.retain(|d| d.is_dir());
    dirs.dedup();
    dirs
}

/// Where each of [`CUDA_DEPENDENCIES`] is, searched in `dirs`.
pub(crate) fn find_cuda_dependencies(dirs: &[PathBuf]) -> Vec<CudaDependency> {
    CUDA_DEPENDENCIES
        .iter()
        .map(|(library, wheel)| CudaDependency {
            library: library.to_string(),
            path: dirs.iter().map(|d| d.join(library)).find(|p| p.exists()),
            wheel: wheel.to_string(),
        })
        .collect()
}

/// The one-line reason the CUDA provider cannot run here, or `None` when everything it needs
/// was found: no GPU build of ONNX Runtime, or missing CUDA libraries (named, with the line
/// that installs them).
pub(crate) fn cuda_provider_missing(lib: &OrtLibrary, deps: &[CudaDependency]) -> Option<String> {
    if lib.cuda_provider.is_none() {
        return Some(format!(
            "the ONNX Runtime at {} ({}) is the CPU build: it has no {CUDA_PROVIDER} beside it; install the GPU build: {INSTALL_GPU}",
            lib.path.display(),
            lib.source
        ));
    }
    let missing: Vec<&str> = deps
        .iter()
        .filter(|d| d.path.is_none())
        .map(|d| d.library.as_str())
        .collect();
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "ONNX Runtime's CUDA provider needs {}, which is not installed (searched LD_LIBRARY_PATH, /usr/local/cuda/lib64, the system folders and the nvidia wheels in site-packages); install it: {INSTALL_GPU}",
        missing.join(", ")
    ))
}

/// Makes the provider's CUDA libraries loadable by name: each one the dynamic linker finds by
/// name (or that is loaded already) is left to it; one it cannot find is loaded from where
/// [`find_cuda_dependencies`] found it (for cuDNN, with its sub-libraries from the same folder),
/// whatever `LD_LIBRARY_PATH` says. Errors name the library that would not load.
pub(crate) fn preload_cuda_dependencies(deps: &[CudaDependency]) -> Result<()> {
    for dep in deps {
        if ort::util::preload_dylib(dep.library.as_str()).is_ok() {
            continue;
        }
        let Some(path) = &dep.path else { continue };
        ort::util::preload_dylib(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot load it: {e}", path.display()))?;
        if dep.library == "libcudnn.so.9" {
            let dir = path.parent().unwrap_or(Path::new("."));
            for part in CUDNN_PARTS {
                let p = dir.join(part);
                if p.exists() {
                    ort::util::preload_dylib(&p)
                        .map_err(|e| anyhow::anyhow!("{}: cannot load it: {e}", p.display()))?;
                }
            }
        }
    }
    Ok(())
}

/// What `doctor` says about ONNX Runtime: the library, its version, whether it loads, and
/// for the CUDA provider every library it needs with where it was found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrtProbe {
    /// The library found, if any.
    pub library: Option<OrtLibrary>,
    /// Its version, read from the file name (`libonnxruntime.so.1.31.1`).
    pub version: Option<String>,
    /// Why it cannot be found or loaded.
    pub error: Option<String>,
    /// The CUDA provider's libraries and where each is.
    pub cuda_libraries: Vec<CudaDependency>,
    /// Why `ort-cuda` cannot run here (`None`: it can, as far as files go).
    pub cuda_missing: Option<String>,
}

/// The version in a library file name such as `libonnxruntime.so.1.31.1`.
pub(crate) fn version_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let v = name.split(".so.").nth(1)?;
    (v.matches('.').count() >= 1).then(|| v.to_string())
}

/// Looks for ONNX Runtime and its CUDA provider's libraries; `load` tries loading the library
/// too, and its error goes in the report. Never fails: what is missing is in the report.
pub(crate) fn probe(load: impl FnOnce() -> Result<()>) -> OrtProbe {
    let deps = find_cuda_dependencies(&cuda_search_dirs());
    match locate_library() {
        Ok(lib) => {
            let error = load().err().map(|e| format!("{e:#}"));
            OrtProbe {
                version: version_of(&lib.path),
                cuda_missing: cuda_provider_missing(&lib, &deps),
                library: Some(lib),
                error,
                cuda_libraries: deps,
            }
        }
        Err(e) => OrtProbe {
            library: None,
            version: None,
            error: Some(format!("{e:#}")),
            cuda_missing: Some(format!("{e:#}")),
            cuda_libraries: deps,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_library_in_a_python_package_layout() {
        let dir = tempfile::tempdir().unwrap();
        assert!(capi_library(dir.path()).is_none());
        std::fs::create_dir(dir.path().join("capi")).unwrap();
        std::fs::write(dir.path().join("capi/libonnxruntime.so.1.31.1"), b"").unwrap();
        std::fs::write(dir.path().join("capi/other.so"), b"").unwrap();
        assert_eq!(
            capi_library(dir.path()).unwrap(),
            dir.path().join("capi/libonnxruntime.so.1.31.1")
        );
    }

    #[test]
    fn versions_are_read_from_library_names() {
        assert_eq!(
            version_of(Path::new("/a/libonnxruntime.so.1.31.1")),
            Some("1.31.1".into())
        );
        assert_eq!(version_of(Path::new("/a/libonnxruntime.so")), None);
        assert_eq!(version_of(Path::new("/a/libonnxruntime.so.1")), None);
    }

    #[test]
    fn python_facts_read_the_package_and_the_site_folders() {
        let f = parse_python_facts("/x/onnxruntime\n/site/a\n\n/site/b\n");
        assert_eq!(f.onnxruntime_dir, Some(PathBuf::from("/x/onnxruntime")));
        assert_eq!(
            f.site_dirs,
            vec![PathBuf::from("/site/a"), PathBuf::from("/site/b")]
        );
        let none = parse_python_facts("\n/site/a\n");
        assert_eq!(none.onnxruntime_dir, None);
    }

    #[test]
    fn dependencies_are_found_in_the_first_folder_that_has_them() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(b.path().join("libcudart.so.13"), b"").unwrap();
        std::fs::write(a.path().join("libcudnn.so.9"), b"").unwrap();
        std::fs::write(b.path().join("libcudnn.so.9"), b"").unwrap();
        let deps = find_cuda_dependencies(&[a.path().into(), b.path().into()]);
        let at = |name: &str| {
            deps.iter()
                .find(|d| d.library == name)
                .unwrap()
                .path
                .clone()
        };
        assert_eq!(
            at("libcudart.so.13"),
            Some(b.path().join("libcudart.so.13"))
        );
        assert_eq!(at("libcudnn.so.9"), Some(a.path().join("libcudnn.so.9")));
        assert_eq!(at("libcublas.so.13"), None);
    }

    #[test]
    fn a_cpu_build_or_a_missing_library_is_said_with_the_install_line() {
        let cpu = OrtLibrary {
            path: "/p/capi/libonnxruntime.so.1.31.1".into(),
            source: "the onnxruntime Python package".into(),
            cuda_provider: None,
        };
        let said = cuda_provider_missing(&cpu, &[]).unwrap();
        assert!(
            said.contains("CPU build") && said.contains(INSTALL_GPU),
            "{said}"
        );
        let gpu = OrtLibrary {
            cuda_provider: Some("/p/capi/libonnxruntime_providers_cuda.so".into()),
            ..cpu
        };
        let mut deps = find_cuda_dependencies(&[]);
        let said = cuda_provider_missing(&gpu, &deps).unwrap();
        assert!(
            said.contains("libcudnn.so.9") && said.contains("libcublas.so.13"),
            "{said}"
        );
        for d in &mut deps {
            d.path = Some(PathBuf::from("/lib").join(&d.library));
        }
        assert_eq!(cuda_provider_missing(&gpu, &deps), None);
    }
}
