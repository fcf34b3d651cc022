//! Helpers shared by the integration tests: writing test models and running the binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;
use trtkit::onnx::pb::ModelProto;
use trtkit::onnx::OnnxModel;

/// Saves a model proto under `dir` and returns its path.
pub fn save(dir: &Path, name: &str, proto: ModelProto) -> PathBuf {
    let path = dir.join(name);
    OnnxModel::from_proto(proto, &path).save(&path).unwrap();
    path
}

/// Runs the trtkit binary with `args`.
pub fn trtkit(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .args(args)
        .output()
        .unwrap()
}

/// The stdout of a run that must have succeeded (its stderr in the failure).
pub fn stdout_of_success(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The folder holding TensorRT-RTX, found the way trtkit finds it (the tests that build or run
/// engines need it: `python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`).
pub fn tensorrt_dir() -> PathBuf {
    let libs = trtkit::trt::loader::locate_libraries(None)
        .expect("TensorRT-RTX is needed: python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116");
    libs.runtime.parent().unwrap().to_path_buf()
}

/// Runs the trtkit binary in `dir` with `args`, TensorRT-RTX's folder in the environment.
pub fn trtkit_in(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .current_dir(dir)
        .args(args)
        .env("TRTKIT_TENSORRT_DIR", tensorrt_dir())
        .output()
        .unwrap()
}

/// Asserts a failed run: the exit code, one line on stderr that mentions every `needles`, no panic.
pub fn assert_clean_error(out: &Output, code: i32, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "expected one line, got: {stderr}"
    );
    for n in needles {
        assert!(stderr.contains(n), "stderr lacks {n:?}: {stderr}");
    }
}

/// The sorted names of the entries of `dir` (empty when it does not exist).
pub fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every `.onnx` file under `dir`, at any depth, appended to `out`.
pub fn models_under(dir: &Path, out: &mut Vec<PathBuf>) {
    files_under(dir, "onnx", out);
}

/// Every `.rs` file under `dir`, at any depth, appended to `out` (the source rules read them).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_under(dir, "rs", out);
}

/// Every file under `dir` whose extension is `ext`, at any depth, appended to `out`.
fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// Where the fetched ONNX backend test data lives.
pub fn onnx_test_data() -> PathBuf {
    std::env::var_os("TRTKIT_ONNX_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx-test-data"))
}

/// Noisy solid-colour RGB pixels (xorshift jitter of ±20 around `rgb`).
pub fn noisy(w: usize, h: usize, rgb: [u8; 3], seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..w * h * 3)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let jitter = (state % 41) as i32 - 20;
            (rgb[i % 3] as i32 + jitter).clamp(0, 255) as u8
        })
        .collect()
}

/// Writes a noisy solid-colour JPEG (quality 90), creating its folder.
pub fn write_jpeg(path: &Path, w: usize, h: usize, rgb: [u8; 3], seed: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    jpeg_encoder::Encoder::new_file(path, 90)
        .unwrap()
        .encode(
            &noisy(w, h, rgb, seed),
            w as u16,
            h as u16,
            jpeg_encoder::ColorType::Rgb,
        )
        .unwrap();
}

/// The channel-scaled test model saved under `dir` and a min-max calibration cache of it made
/// on N(0, 1) inputs (min-max makes the one big channel set the scale of `conv_2`'s input).
pub fn scaled_model_and_cache(dir: &Path) -> (PathBuf, String) {
    let model = save(
        dir,
        "scaled.onnx",
        trtkit::onnx::test_models::channel_scaled_convs(),
    );
    let out = trtkit(&[
        "calibrate",
        model.to_str().unwrap(),
        "--calib-data",
        "synthetic:1",
        "--batch-size",
        "16",
        "--num-samples",
        "64",
        "--algo",
        "minmax",
        "--cache-dir",
        dir.join("cal").to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout_of_success(&out)).unwrap();
    (model, v["caches"][0]["cache"].as_str().unwrap().to_string())
}

/// `trtkit quantize MODEL --int8 --calibration-cache CACHE ARGS… --json`, which must succeed,
/// parsed.
pub fn int8_json(model: &Path, cache: &str, args: &[&str]) -> serde_json::Value {
    let model = model.to_str().unwrap();
    let head = ["quantize", model, "--int8", "--calibration-cache", cache];
    let out = trtkit(&[&head[..], args, &["--json"]].concat());
    serde_json::from_str(&stdout_of_success(&out)).unwrap()
}
