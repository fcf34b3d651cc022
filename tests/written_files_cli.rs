//! Files an earlier trtkit wrote are still read: a calibration cache with its key file, an
//! engine with its sidecar and a kept INT8 target search, as trtkit 0.1.0 wrote them
//! (`tests/fixtures/written_by_0.1.0/`, its README says how), are reused by today's commands,
//! and a changed setting makes them stale, naming what changed.
//!
//! Needs TensorRT-RTX (`python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`).

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{stdout_of_success, trtkit_in};

/// The folder of files written by trtkit 0.1.0.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/written_by_0.1.0")
}

/// The model every fixture was made from (`test_models::classifier(None)`, as saved then).
const MODEL: &str = "clf.onnx";

/// The words of `line` (no word of it holds a space), then `extra`.
fn words(line: &str, extra: &[&str]) -> Vec<String> {
    let all = line.split_whitespace().chain(extra.iter().copied());
    all.map(String::from).collect()
}

/// `calibrate` of the model on `images` synthetic samples into `calibration/`.
fn calibrate_args(images: &str) -> Vec<String> {
    let line = format!(
        "calibrate {MODEL} --calib-data synthetic:1 --batch-size 8 --num-images {images} --cache-dir calibration --json"
    );
    words(&line, &[])
}

/// `build` of the model at FP32 with a dynamic batch up to `max_batch`, `extra` appended.
fn build_args(max_batch: &str, extra: &[&str]) -> Vec<String> {
    let line = format!("build {MODEL} --input-shape -1 3 16 16 --max-batch {max_batch} --json");
    words(&line, extra)
}

/// The INT8 target search of the model with the calibration cache `cache`, `extra` appended.
fn target_args(cache: &str, extra: &[&str]) -> Vec<String> {
    let line = format!(
        "quantize {MODEL} --int8 --calibration-cache {cache} --target-cosine 0.9 --eval-data synthetic:7 --eval-samples 16 -o int8.onnx --json"
    );
    words(&line, extra)
}

/// Runs trtkit in `dir` with `args`; its JSON report.
fn json_in(dir: &Path, args: &[String]) -> Value {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = stdout_of_success(&trtkit_in(dir, &args));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Every file under `dir` (relative path, bytes), sorted.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = vec![];
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The fixtures copied into a fresh folder (tests change what they find there), each
/// `NAME.zip` unpacked as the file `NAME` it holds.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, bytes) in contents(&fixtures()) {
        let to = dir.path().join(&rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        match rel.strip_suffix(".zip") {
            Some(inner) => {
                let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
                let mut file = zip.by_index(0).unwrap();
                assert_eq!(
                    Some(file.name()),
                    Path::new(inner).file_name().unwrap().to_str()
                );
                let mut out = std::fs::File::create(dir.path().join(inner)).unwrap();
                std::io::copy(&mut file, &mut out).unwrap();
            }
            None => std::fs::write(to, bytes).unwrap(),
        }
    }
    dir
}

/// `bytes` as a zip archive holding one deflated file named `name`.
fn zipped(name: &str, bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file(name, options).unwrap();
    zip.write_all(bytes).unwrap();
    zip.finish().unwrap().into_inner()
}

/// The one file under `dir` whose name holds `part` and ends with `suffix`, relative to `root`.
fn the_file(root: &Path, dir: &str, part: &str, suffix: &str) -> String {
    let found: Vec<String> = std::fs::read_dir(root.join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(part) && n.ends_with(suffix))
        .collect();
    assert_eq!(found.len(), 1, "{dir}/*{part}*{suffix}: {found:?}");
    format!("{dir}/{}", found[0])
}

/// The reasons a report gives for not reusing, as one text.
fn reasons(v: &Value) -> String {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list of reasons: {v}"))
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_calibration_cache_written_by_0_1_0_is_reused_and_a_changed_setting_names_its_field() {
    let dir = workspace();
    let d = dir.path();
    let cache = the_file(d, "calibration", "", ".cache");
    let before = contents(&d.join("calibration"));

    let again = json_in(d, &calibrate_args("32"));
    let found = &again["caches"][0];
    assert_eq!(found["reused"], true, "{again:#}");
    assert_eq!(found["cache"], cache);
    assert_eq!(
        contents(&d.join("calibration")),
        before,
        "a reused cache and its key file are read, not written"
    );

    let fewer = json_in(d, &calibrate_args("16"));
    let redone = &fewer["caches"][0];
    assert_eq!(redone["reused"], false, "{fewer:#}");
    assert_eq!(
        redone["cache"], found["cache"],
        "the same file, recalibrated"
    );
    let why = reasons(&redone["recalibrated_because"]);
    assert_eq!(why.lines().count(), 1, "{why}");
    assert!(
        why.contains("image") && why.contains("32") && why.contains("16"),
        "{why}"
    );

    // Calibrated again as the fixture was, the cache and its key file are written byte for
    // byte as 0.1.0 wrote them.
    let back = json_in(d, &calibrate_args("32"));
    assert_eq!(back["caches"][0]["reused"], false, "{back:#}");
    let written: Vec<_> = contents(&d.join("calibration"))
        .into_iter()
        .filter(|(name, _)| name.contains(".cache"))
        .collect();
    let original: Vec<_> = before
        .into_iter()
        .filter(|(name, _)| name.contains(".cache"))
        .collect();
    assert_eq!(written.len(), 2);
    assert_eq!(written, original);
}

#[test]
fn an_engine_written_by_0_1_0_is_reused_and_a_changed_profile_rebuilds_it() {
    let dir = workspace();
    let d = dir.path();
    let engine = the_file(d, "engines", "", ".engine");
    let before = contents(&d.join("engines"));

    let again = json_in(d, &build_args("8", &[]));
    assert_eq!(again["reused"], true, "{again:#}");
    assert_eq!(again["engine"], engine);
    assert_eq!(
        contents(&d.join("engines")),
        before,
        "a reused engine is not written"
    );

    let wider = json_in(d, &build_args("16", &["-o", &engine]));
    assert_eq!(wider["reused"], false, "{wider:#}");
    let why = reasons(&wider["rebuilt_because"]);
    assert!(
        !why.is_empty() && why.lines().all(|l| l.starts_with("profile")),
        "{why}"
    );
}

#[test]
fn a_target_search_kept_by_0_1_0_is_reused_and_another_target_searches_again() {
    let dir = workspace();
    let d = dir.path();
    let cache = the_file(d, "calibration", "", ".cache");
    let kept = the_file(d, "calibration", "-int8-target-", ".json");
    let before = contents(&d.join("calibration"));

    let again = json_in(d, &target_args(&cache, &[]));
    assert_eq!(again["reused"], true, "{again:#}");
    assert!(
        again["result"].as_str().unwrap().ends_with(&kept),
        "{again:#}"
    );
    assert!(d.join("int8.onnx").is_file(), "the INT8 model is written");
    assert_eq!(contents(&d.join("calibration")), before);

    let other = json_in(d, &target_args(&cache, &["--search", "bisect"]));
    assert_eq!(other["reused"], false, "{other:#}");
    assert_ne!(other["result"], again["result"]);
}

/// Writes the fixtures with the trtkit built here into `TRTKIT_WRITE_FIXTURES` (a folder),
/// engines zipped (TensorRT-RTX's smallest engine is about 300 KB, 50 KB deflated): run with
/// `--run-ignored only` to make them anew for another version.
#[test]
#[ignore = "writes fixtures; run by hand"]
fn write_the_fixtures() {
    let out = PathBuf::from(std::env::var_os("TRTKIT_WRITE_FIXTURES").expect("a folder"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    support::save(d, MODEL, trtkit::onnx::test_models::classifier(None));
    let cal = json_in(d, &calibrate_args("32"));
    let cache = cal["caches"][0]["cache"].as_str().unwrap().to_string();
    json_in(d, &build_args("8", &[]));
    json_in(d, &target_args(&cache, &[]));
    std::fs::remove_file(d.join("int8.onnx")).unwrap();
    for (rel, bytes) in contents(d) {
        let to = out.join(&rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if rel.ends_with(".engine") {
            let name = to.file_name().unwrap().to_str().unwrap();
            std::fs::write(format!("{}.zip", to.display()), zipped(name, &bytes)).unwrap();
        } else {
            std::fs::write(to, bytes).unwrap();
        }
    }
}
