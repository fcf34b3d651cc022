//! On a CPU host `validate` shares the cores between its image loader and the model: the JSON
//! report says how (`cpu_split`), and `-v` says it on an info line. Left alone, trtkit chooses
//! the model's threads; `--threads N` is the user's choice and is reported as such.

mod support;

use std::path::Path;
use support::{save, stdout_of_success, trtkit, write_jpeg};
use trtkit::onnx::test_models::classifier;

/// 40 small JPEGs in two class folders: 20 batches of 2, enough for the first stretch that the
/// choice is measured on and the batches after it.
fn dataset(root: &Path) {
    for (i, class) in ["0_a", "1_b"].iter().enumerate() {
        for k in 0..20u64 {
            let path = root.join(class).join(format!("{k}.jpg"));
            write_jpeg(&path, 40, 30, [200, 60 * i as u8, 30], k);
        }
    }
}

fn validate(model: &Path, data: &Path, extra: &[&str]) -> (serde_json::Value, String) {
    let mut args = vec![
        "validate",
        model.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--batch-size",
        "2",
        "--json",
        "-v",
    ];
    args.extend_from_slice(extra);
    let out = trtkit(&args);
    let json = serde_json::from_str(&stdout_of_success(&out)).unwrap();
    (json, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn validate_on_the_cpu_reports_the_split_it_chose() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "classifier.onnx", classifier(None));
    let data = d.path().join("val");
    dataset(&data);
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    for backend in ["ort", "tract"] {
        let (r, stderr) = validate(&model, &data, &["--backend", backend]);
        assert_eq!(r["images"], 40, "{backend}");
        let split = &r["cpu_split"];
        let threads = split["model_threads"].as_u64().unwrap();
        assert!((1..=cores).contains(&threads), "{backend}: {split}");
        assert!(split["loader_threads"].as_u64().unwrap() >= 1, "{split}");
        assert_eq!(split["chosen_by"], "trtkit", "{split}");
        let why = split["why"].as_str().unwrap();
        // Spinning goes off with a loader-bound choice only (and tract never spins).
        let loader_bound = why.starts_with("loader-bound");
        let spins = backend == "ort" && !loader_bound;
        assert_eq!(split["spinning"], spins, "{backend}: {split}");
        assert!(
            why.starts_with("model-bound") || why.starts_with("loader-bound"),
            "{backend}: 20 batches are enough to measure: {why}"
        );
        assert!(stderr.contains("CPU split: model on"), "{stderr}");
    }
}

#[test]
fn threads_given_are_the_users_choice() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "classifier.onnx", classifier(None));
    let data = d.path().join("val");
    dataset(&data);
    let (r, _) = validate(&model, &data, &["--backend", "ort", "--threads", "1"]);
    let split = &r["cpu_split"];
    assert_eq!(split["model_threads"], 1, "{split}");
    assert_eq!(split["chosen_by"], "user", "{split}");
    assert_eq!(split["spinning"], true, "ONNX Runtime's default: {split}");
    assert!(
        split["why"].as_str().unwrap().contains("--threads 1"),
        "{split}"
    );
}

#[test]
fn calibrate_on_images_reports_the_split_and_synthetic_data_none() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "classifier.onnx", classifier(None));
    let data = d.path().join("val");
    dataset(&data);
    let run = |src: &str, extra: &[&str]| {
        let cache = d.path().join("cache");
        let mut args = vec![
            "calibrate",
            model.to_str().unwrap(),
            "--calib-data",
            src,
            "--batch-size",
            "2",
            "--cache-dir",
            cache.to_str().unwrap(),
            "--recalibrate",
            "--json",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str::<serde_json::Value>(&stdout_of_success(&trtkit(&args))).unwrap()
    };
    let r = run(data.to_str().unwrap(), &[]);
    let split = &r["cpu_split"];
    assert!(split["model_threads"].as_u64().unwrap() >= 1, "{split}");
    assert_eq!(split["chosen_by"], "trtkit", "{split}");
    let r = run(data.to_str().unwrap(), &["--threads", "1"]);
    assert_eq!(r["cpu_split"]["model_threads"], 1);
    assert_eq!(r["cpu_split"]["chosen_by"], "user");
    let r = run("synthetic:3", &["--num-samples", "8"]);
    assert!(
        r.get("cpu_split").is_none(),
        "no loader beside the model: {r}"
    );
}
