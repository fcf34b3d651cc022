//! Calibration caches vouch for their contents: a cache changed after trtkit wrote it is
//! recalibrated, not reused; a scale no activation can have is refused naming its tensor.

mod support;

use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, stdout_of_success as stdout, trtkit, trtkit_in};
use trtkit::onnx::test_models;

/// `calibrate` of `model` on synthetic data into `cdir`; returns its stdout.
fn calibrate(model: &Path, cdir: &Path) -> String {
    stdout(&trtkit(&[
        "calibrate",
        model.to_str().unwrap(),
        "--calib-data",
        "synthetic:1",
        "--batch-size",
        "8",
        "--num-images",
        "32",
        "--cache-dir",
        cdir.to_str().unwrap(),
    ]))
}

/// The one `.cache` file under `cdir`.
fn the_cache(cdir: &Path) -> PathBuf {
    let caches: Vec<PathBuf> = std::fs::read_dir(cdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cache"))
        .collect();
    assert_eq!(caches.len(), 1, "{caches:?}");
    caches[0].clone()
}

/// The cache's text with the scale of its tensor `flat` set to `hex`.
fn with_scale(text: &str, hex: &str) -> String {
    let changed: String = text
        .lines()
        .map(|l| match l.strip_prefix("flat: ") {
            Some(_) => format!("flat: {hex}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    assert_ne!(changed, text, "no line of tensor 'flat' in {text}");
    changed
}

#[test]
fn a_tampered_cache_is_recalibrated_and_an_untouched_one_reused() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let cdir = dir.path().join("cal");
    calibrate(&model, &cdir);
    let cache = the_cache(&cdir);
    let original = std::fs::read_to_string(&cache).unwrap();

    let again = calibrate(&model, &cdir);
    assert!(
        again.contains("reusing") && again.contains("key matches"),
        "{again}"
    );

    // One scale changed, the key file kept as it was.
    std::fs::write(&cache, with_scale(&original, "7f7fffff")).unwrap();
    let redone = calibrate(&model, &cdir);
    assert!(!redone.contains("reusing"), "{redone}");
    let shown = cache.display().to_string();
    let line = redone
        .lines()
        .find(|l| l.starts_with("recalibrating:"))
        .unwrap_or_else(|| panic!("no recalibrating line: {redone}"));
    assert!(line.contains(&shown) && line.contains("tampered"), "{line}");
    assert_eq!(std::fs::read_to_string(&cache).unwrap(), original);
}

#[test]
fn a_key_file_without_the_cache_hash_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let cdir = dir.path().join("cal");
    calibrate(&model, &cdir);
    let cache = the_cache(&cdir);
    let side = PathBuf::from(format!("{}.json", cache.display()));
    let mut key: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&side).unwrap()).unwrap();
    assert!(key["cache_sha256"].is_string(), "{key}");
    key.as_object_mut().unwrap().remove("cache_sha256");
    std::fs::write(&side, key.to_string()).unwrap();

    let redone = calibrate(&model, &cdir);
    assert!(!redone.contains("reusing"), "{redone}");
    assert!(
        redone.contains("recalibrating:") && redone.contains("holds no SHA-256"),
        "{redone}"
    );
    // The rewritten key file vouches for the cache again.
    assert!(calibrate(&model, &cdir).contains("reusing"));
}

#[test]
fn implausible_scales_are_refused_naming_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let cdir = dir.path().join("cal");
    calibrate(&model, &cdir);
    let original = std::fs::read_to_string(the_cache(&cdir)).unwrap();
    // A cache without a key file, given by path: read as it is, its scales checked.
    for hex in ["00000001", "7f7fffff"] {
        let given = dir.path().join(format!("given-{hex}.cache"));
        std::fs::write(&given, with_scale(&original, hex)).unwrap();
        let out = trtkit(&[
            "quantize",
            model.to_str().unwrap(),
            "--int8",
            "--calibration-cache",
            given.to_str().unwrap(),
            "--output",
            dir.path().join("q.onnx").to_str().unwrap(),
        ]);
        assert_clean_error(&out, 1, &[given.to_str().unwrap(), "'flat'", hex]);
        assert!(!dir.path().join("q.onnx").exists());
    }
}

#[test]
fn an_int8_build_recalibrates_a_tampered_cache_instead_of_building_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    save(d, "clf.onnx", test_models::classifier(Some(4)));
    let build = |extra: &[&str]| {
        let args = [
            &[
                "build",
                "clf.onnx",
                "--int8",
                "--calib-data",
                "synthetic:1",
                "--batch-size",
                "4",
                "--num-images",
                "16",
                "--json",
            ][..],
            extra,
        ]
        .concat();
        let v: serde_json::Value = serde_json::from_str(&stdout(&trtkit_in(d, &args))).unwrap();
        v["int8"]["calibration"]["caches"][0].clone()
    };
    let first = build(&[]);
    assert_eq!(first["reused"], false, "{first}");
    let cache = d.join(first["cache"].as_str().unwrap());
    let original = std::fs::read_to_string(&cache).unwrap();
    assert_eq!(build(&["--rebuild"])["reused"], true);

    std::fs::write(&cache, with_scale(&original, "7f7fffff")).unwrap();
    let redone = build(&["--rebuild"]);
    assert_eq!(redone["reused"], false, "{redone}");
    assert!(
        redone["recalibrated_because"]
            .to_string()
            .contains("tampered"),
        "{redone}"
    );
    assert_eq!(std::fs::read_to_string(&cache).unwrap(), original);
}
