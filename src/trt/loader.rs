//! Finding the TensorRT libraries at run time (dlopen) and reading their versions.

use libloading::Library;
use serde::Serialize;

/// Names tried, newest first, for the TensorRT inference library.
pub const NVINFER_NAMES: &[&str] = &["libnvinfer.so.11", "libnvinfer.so.10", "libnvinfer.so"];
/// Names tried, newest first, for the TensorRT ONNX parser.
pub const NVONNXPARSER_NAMES: &[&str] = &[
    "libnvonnxparser.so.11",
    "libnvonnxparser.so.10",
    "libnvonnxparser.so",
];

/// What was found for one TensorRT library.
#[derive(Clone, Debug, Serialize)]
pub struct LibraryProbe {
    /// Library being looked for, e.g. `libnvinfer`.
    pub library: String,
    /// Whether one of the candidate names loaded.
    pub found: bool,
    /// Full path of the loaded file, from the process's memory map.
    pub path: Option<String>,
    /// Version reported by the library, e.g. `10.13.3`.
    pub version: Option<String>,
    /// Names that were tried.
    pub tried: Vec<String>,
}

/// Decodes a TensorRT version integer: `major*10000 + minor*100 + patch` since TensorRT 10,
/// `major*1000 + minor*100 + patch` before.
pub fn decode_version(v: i32) -> String {
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

fn probe(library: &str, names: &[&str], version_symbol: &[u8]) -> LibraryProbe {
    let tried: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    for name in names {
        // SAFETY: loading a TensorRT library runs only its static initialisers, which have no
        // preconditions; the library stays loaded for the rest of the process.
        let Ok(lib) = (unsafe { Library::new(name) }) else {
            continue;
        };
        // SAFETY: `getInferLibVersion` / `getNvOnnxParserVersion` are `extern "C" int32_t f()`
        // in NvInferRuntime.h / NvOnnxParser.h for TensorRT 8 through 11.
        let version = unsafe {
            lib.get::<unsafe extern "C" fn() -> i32>(version_symbol)
                .ok()
                .map(|f| decode_version(f()))
        };
        let path = loaded_path(library);
        std::mem::forget(lib);
        return LibraryProbe {
            library: library.into(),
            found: true,
            path,
            version,
            tried,
        };
    }
    LibraryProbe {
        library: library.into(),
        found: false,
        path: None,
        version: None,
        tried,
    }
}

/// Looks for libnvinfer and libnvonnxparser and reports what it found.
pub fn probe_tensorrt() -> Vec<LibraryProbe> {
    vec![
        probe("libnvinfer", NVINFER_NAMES, b"getInferLibVersion\0"),
        probe(
            "libnvonnxparser",
            NVONNXPARSER_NAMES,
            b"getNvOnnxParserVersion\0",
        ),
    ]
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
}
