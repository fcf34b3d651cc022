//! `calibrate` and `quantize` end to end: keyed caches, rewrites that run, and bad input.

mod support;

use support::{assert_clean_error, files, save, trtkit};
use trtkit::backend::tract::{TractBackend, TractOptions};
use trtkit::backend::Backend;
use trtkit::calibration::sample_source::normal_values;
use trtkit::onnx::test_models;
use trtkit::onnx::OnnxModel;
use trtkit::tensor::{HostTensor, TensorData};

use support::stdout_of_success as stdout;

fn logits(path: &std::path::Path, x: &[f32], batch: usize) -> Vec<f32> {
    let m = OnnxModel::load(path).unwrap();
    let mut b = TractBackend::load(
        &m,
        &TractOptions {
            batch: Some(batch),
            ..Default::default()
        },
    )
    .unwrap();
    let t = HostTensor::new("input", vec![batch, 3, 16, 16], TensorData::F32(x.to_vec())).unwrap();
    match &b.run(&[t]).unwrap().outputs[0].data {
        TensorData::F32(v) => v.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cache_is_keyed_reused_and_recalibrated_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let cdir = dir.path().join("cal");
    let base = |extra: &[&str]| {
        let data = if extra.contains(&"synthetic:2") {
            vec![]
        } else {
            vec!["--calib-data", "synthetic:1"]
        };
        let mut a = vec![
            "calibrate",
            model.to_str().unwrap(),
            "--cache-dir",
            cdir.to_str().unwrap(),
            "--num-images",
            "32",
        ];
        a.extend(data);
        a.extend(extra);
        trtkit(&a)
    };
    let first = stdout(&base(&["--batch-size", "8"]));
    assert!(first.contains("calibrated 2 tensors"), "{first}");
    let names = files(&cdir);
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("clf-") && names[0].ends_with("-entropy-b8.cache"));
    assert_eq!(names[1], format!("{}.json", names[0]));
    let text = std::fs::read_to_string(cdir.join(&names[0])).unwrap();
    assert!(
        text.starts_with("TRT-100000-EntropyCalibration2\n"),
        "{text}"
    );
    assert!(
        text.contains("\ninput: ") && text.contains("\nflat: "),
        "{text}"
    );

    let again = stdout(&base(&["--batch-size", "8"]));
    assert!(
        again.contains("reusing") && again.contains("key matches"),
        "{again}"
    );
    // Another batch size is another file.
    stdout(&base(&["--batch-size", "4"]));
    assert_eq!(files(&cdir).len(), 4);
    // Same file name, different key: recalibrated, and the reason is said.
    let stale = stdout(&base(&["--batch-size", "8", "--calib-data", "synthetic:2"]));
    assert!(
        stale.contains("recalibrating") && stale.contains("dataset"),
        "{stale}"
    );
    let forced = stdout(&base(&[
        "--batch-size",
        "8",
        "--calib-data",
        "synthetic:2",
        "--recalibrate",
    ]));
    assert!(forced.contains("--recalibrate given"), "{forced}");
    // JSON and per-tensor ranges.
    let json = stdout(&base(&["--batch-size", "8", "--json", "--algo", "minmax"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let c = &v["caches"][0];
    assert_eq!(c["reused"], false);
    assert_eq!(c["algorithm"], "minmax");
    assert_eq!(c["tensors"].as_array().unwrap().len(), 2);
    assert_eq!(c["key"]["batch_size"], 8);
    let verbose = stdout(&base(&["--batch-size", "8", "-v", "--algo", "percentile"]));
    assert!(
        verbose.contains("amax") && verbose.contains("flat"),
        "{verbose}"
    );
}

#[test]
fn int8_and_fp16_rewrites_run_and_agree_with_fp32() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let cdir = dir.path().join("cal");
    let json = stdout(&trtkit(&[
        "calibrate",
        model.to_str().unwrap(),
        "--calib-data",
        "synthetic:1",
        "--batch-size",
        "16",
        "--num-images",
        "128",
        "--cache-dir",
        cdir.to_str().unwrap(),
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cache = v["caches"][0]["cache"].as_str().unwrap().to_string();
    let int8 = dir.path().join("int8.onnx");
    let fp16 = dir.path().join("fp16.onnx");
    let out = stdout(&trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--int8",
        "--calibration-cache",
        &cache,
        "-o",
        int8.to_str().unwrap(),
    ]));
    assert!(out.contains("2 activations and 2 weights"), "{out}");
    stdout(&trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--fp16",
        "-o",
        fp16.to_str().unwrap(),
    ]));
    // Held-out inputs (another seed than calibration).
    let batch = 64;
    let x = normal_values(99, batch * 768);
    let reference = logits(&model, &x, batch);
    let top1 = |v: &[f32]| -> Vec<usize> {
        v.chunks(10)
            .map(|r| (0..10).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap())
            .collect()
    };
    let spread = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (path, tol, min_agree) in [(&fp16, 2e-3, 0.98), (&int8, 0.05, 0.85)] {
        let got = logits(path, &x, batch);
        let worst = got
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            worst <= tol * spread,
            "{}: max |Δlogit| {worst} > {tol} × {spread}",
            path.display()
        );
        let agree = top1(&got)
            .iter()
            .zip(top1(&reference))
            .filter(|(a, b)| **a == *b)
            .count() as f64
            / batch as f64;
        assert!(
            agree >= min_agree,
            "{}: top-1 agreement {agree}",
            path.display()
        );
        // The same check through `trtkit compare`, rewritten model (A) against FP32 (B).
        let v: serde_json::Value = serde_json::from_str(&stdout(&trtkit(&[
            "compare",
            path.to_str().unwrap(),
            model.to_str().unwrap(),
            "--num-inputs",
            "64",
            "--batch",
            "16",
            "--json",
        ])))
        .unwrap();
        let o = &v["outputs"][0];
        assert_eq!(o["closeness"]["samples"], 64);
        let cmp_agree = o["topk"]["top1_agreement_pct"].as_f64().unwrap();
        let cosine = o["closeness"]["cosine"].as_f64().unwrap();
        assert!(
            cmp_agree >= min_agree * 100.0 && cosine > 0.99,
            "{}: compare says top-1 agreement {cmp_agree}%, cosine {cosine}",
            path.display()
        );
    }
    // FP16 of an FP16 graph.
    let out = trtkit(&["quantize", fp16.to_str().unwrap(), "--fp16", "-o", "x.onnx"]);
    assert_clean_error(&out, 1, &["fp16.onnx", "already FP16"]);
}

#[test]
fn bad_calibration_inputs_fail_cleanly_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let two = save(dir.path(), "two.onnx", test_models::two_input(None));
    let clf = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let cdir = dir.path().join("cal");
    let c = cdir.to_str().unwrap();
    let out = trtkit(&[
        "calibrate",
        two.to_str().unwrap(),
        "--calib-data",
        "synthetic:1",
        "--batch-size",
        "2",
        "--cache-dir",
        c,
    ]);
    assert_clean_error(
        &out,
        1,
        &["two.onnx", "no quantizable ops", "no cache written"],
    );
    let out = trtkit(&[
        "calibrate",
        clf.to_str().unwrap(),
        "--calib-data",
        "synthetic:1",
        "--batch-size",
        "8",
        "--num-images",
        "3",
        "--cache-dir",
        dir.path().join("cal3").to_str().unwrap(),
    ]);
    // Fewer samples than one batch still calibrate, every one of them.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("over 3 images at batch 8"), "{text}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = trtkit(&[
        "calibrate",
        clf.to_str().unwrap(),
        "--calib-data",
        empty.to_str().unwrap(),
        "--batch-size",
        "1",
        "--cache-dir",
        c,
    ]);
    assert_clean_error(&out, 1, &["empty", "no .npy or .npz files"]);
    assert!(files(&cdir).is_empty());
}

#[test]
fn npy_and_npz_folder_calibrates() {
    let dir = tempfile::tempdir().unwrap();
    let clf = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let stack = |name: &str, i: u64| {
        HostTensor::new(
            name,
            vec![4, 3, 16, 16],
            TensorData::F32(normal_values(i, 4 * 768)),
        )
        .unwrap()
    };
    for i in 0..2 {
        let npy = trtkit::data::npy::encode(&stack("x", i));
        std::fs::write(data.join(format!("{i}.npy")), npy).unwrap();
    }
    // An .npz beside them: its array named after the model input is used.
    trtkit::data::npz::save(
        &data.join("2.npz"),
        &[stack("labels", 9), stack("input", 2)],
    )
    .unwrap();
    let out = stdout(&trtkit(&[
        "calibrate",
        clf.to_str().unwrap(),
        "--calib-data",
        data.to_str().unwrap(),
        "--batch-size",
        "6",
        "--cache-dir",
        dir.path().join("cal").to_str().unwrap(),
    ]));
    assert!(out.contains("over 12 images at batch 6"), "{out}");
}

#[test]
fn bad_caches_fail_with_the_line_or_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let clf = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let m = clf.to_str().unwrap();
    let cache = dir.path().join("c.cache");
    let run = |text: &str| {
        std::fs::write(&cache, text).unwrap();
        trtkit(&[
            "quantize",
            m,
            "--int8",
            "--calibration-cache",
            cache.to_str().unwrap(),
            "-o",
            "never.onnx",
        ])
    };
    let out = run("TRT-100000-EntropyCalibration2\ninput: 3c000000\nflat: 3c0");
    assert_clean_error(&out, 1, &["c.cache", "line 3"]);
    let out =
        run("TRT-100000-EntropyCalibration2\ninput: 3c000000\nflat: 3c000000\nbogus: 3c000000\n");
    assert_clean_error(&out, 1, &["'bogus'", "not in the model"]);
    let out = run("TRT-100000-EntropyCalibration2\ninput: 3c000000\n");
    assert_clean_error(&out, 1, &["no scale for tensor 'flat'"]);
    assert!(!std::path::Path::new("never.onnx").exists());
    // A cache made for another model (its key file says so).
    let other = save(dir.path(), "other.onnx", test_models::classifier(Some(2)));
    let cdir = dir.path().join("cal");
    let json = stdout(&trtkit(&[
        "calibrate",
        other.to_str().unwrap(),
        "--calib-data",
        "synthetic:1",
        "--batch-size",
        "2",
        "--num-images",
        "4",
        "--cache-dir",
        cdir.to_str().unwrap(),
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let out = trtkit(&[
        "quantize",
        m,
        "--int8",
        "--calibration-cache",
        v["caches"][0]["cache"].as_str().unwrap(),
        "-o",
        "never.onnx",
    ]);
    assert_clean_error(&out, 1, &["calibrated for another model"]);
    let out = trtkit(&["quantize", m, "-o", "never.onnx"]);
    assert_clean_error(&out, 2, &["--int8, --fp16 or --equalize"]);
}

#[test]
fn image_folder_calibrates_and_its_fingerprint_follows_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let clf = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let images = dir.path().join("images");
    for i in 0..8u64 {
        let class = if i % 2 == 0 { "a" } else { "b" };
        let rgb = [(i * 30) as u8, 120, (255 - i * 30) as u8];
        support::write_jpeg(&images.join(class).join(format!("{i}.jpg")), 40, 30, rgb, i);
    }
    let cache_dir = dir.path().join("cal");
    let run = || {
        stdout(&trtkit(&[
            "calibrate",
            clf.to_str().unwrap(),
            "--calib-data",
            images.to_str().unwrap(),
            "--batch-size",
            "4",
            "--cache-dir",
            cache_dir.to_str().unwrap(),
        ]))
    };
    let first = run();
    assert!(first.contains("over 8 images at batch 4"), "{first}");
    let sidecar = files(&cache_dir)
        .into_iter()
        .find(|f| f.ends_with(".json"))
        .unwrap();
    let key = std::fs::read_to_string(cache_dir.join(&sidecar)).unwrap();
    assert!(key.contains("\\\"crop\\\":[16,16]"), "{key}");
    assert!(run().contains("reusing"));
    support::write_jpeg(&images.join("a").join("0.jpg"), 40, 30, [1, 2, 3], 99);
    let third = run();
    assert!(third.contains("recalibrating"), "{third}");
}

/// The `amax` of every tensor in one cache entry of a `calibrate --json` report.
fn amaxes(cache: &serde_json::Value) -> Vec<(String, f64)> {
    cache["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tensor"].as_str().unwrap().to_string(),
                t["amax"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn three_algorithms_from_one_run_then_reused_and_ort_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "clf.onnx", test_models::classifier(None));
    let cdir = dir.path().join("cal");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "calibrate",
            model.to_str().unwrap(),
            "--calib-data",
            "synthetic:3",
            "--num-images",
            "48",
            "--batch-size",
            "8",
            "--cache-dir",
            cdir.to_str().unwrap(),
            "--json",
        ];
        a.extend_from_slice(extra);
        let v: serde_json::Value = serde_json::from_str(&stdout(&trtkit(&a))).unwrap();
        v
    };
    let v = run(&["--algo", "entropy,minmax,percentile", "--measure-plain"]);
    let caches = v["caches"].as_array().unwrap();
    let algos: Vec<&str> = caches
        .iter()
        .map(|c| c["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(algos, ["entropy", "minmax", "percentile 99.99"]);
    assert!(caches.iter().all(|c| c["reused"] == false));
    assert_eq!(v["timing"]["batches"], 6, "one run over the 6 batches");
    assert!(v["timing"]["overhead_percent"].is_number());
    // Three cache files and their key sidecars.
    assert_eq!(files(&cdir).len(), 6, "{:?}", files(&cdir));
    // minmax is the largest |x|, which no other threshold exceeds.
    let (e, m, p) = (amaxes(&caches[0]), amaxes(&caches[1]), amaxes(&caches[2]));
    for ((name, mm), ((_, en), (_, pc))) in m.iter().zip(e.iter().zip(&p)) {
        assert!(
            en <= mm && pc <= mm,
            "{name}: entropy {en}, percentile {pc}, minmax {mm}"
        );
    }
    // Every key matches now: nothing runs again.
    let again = run(&["--algo", "minmax,entropy"]);
    assert!(again["timing"].is_null());
    assert!(again["caches"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["reused"] == true));
    // ONNX Runtime as the reference backend sees the same tensors: the same minmax ranges up
    // to float rounding.
    let ort = run(&["--algo", "minmax", "--recalibrate", "--backend", "ort"]);
    assert_eq!(ort["backend"], "ort-cpu");
    for ((name, a), (_, b)) in amaxes(&ort["caches"][0]).iter().zip(&m) {
        assert!(
            (a - b).abs() <= 1e-4 * b.abs().max(1.0),
            "{name}: ort {a} vs tract {b}"
        );
    }
}
