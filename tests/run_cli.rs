//! `trtkit run` end to end on the CPU backends, and its bad-input errors.

mod support;

use std::process::Command;
use support::{assert_clean_error, save, stdout_of_success, trtkit};
use trtkit::onnx::test_models;

#[test]
fn runs_two_batch_sizes_on_the_cpu_and_says_what_was_timed() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let times = dir.path().join("times.csv");
    let out = trtkit(&[
        "run",
        model.to_str().unwrap(),
        "--backend",
        "tract",
        "--batch-size",
        "1,4",
        "--warmup-iterations",
        "1",
        "--iterations",
        "5",
        "--export-times",
        times.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("tract-cpu (") && stdout.contains("): wall clock"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("1 ") || l.starts_with("4 "))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for batch in [1, 4] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("batch {batch}: set-up ")))
            .unwrap_or_else(|| panic!("no set-up line for batch {batch} in {stdout}"));
        assert!(
            line.contains("(open ")
                && line.contains(", first inference ")
                && line.ends_with(") — not in the figures"),
            "{line}"
        );
    }
    let csv = std::fs::read_to_string(&times).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 10, "{csv}");
    assert!(lines[1].starts_with("1,0,0,,,,"), "{csv}");
    assert!(lines[10].starts_with("4,4,0,,,,"), "{csv}");
}

#[test]
fn json_report_has_statistics_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let times = dir.path().join("times.json");
    let out = trtkit(&[
        "run",
        model.to_str().unwrap(),
        "--batch-size",
        "2",
        "--iterations",
        "3",
        "--warmup-iterations",
        "0",
        "--json",
        "--export-times",
        times.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["batch"], 2);
    assert_eq!(r["iterations"], 3);
    assert_eq!(r["timing"], "wall-clock");
    let all = &r["latency_ms"]["all"];
    assert!(all["min"].as_f64().unwrap() <= all["p50"].as_f64().unwrap());
    assert!(all["p99"].as_f64().unwrap() <= all["max"].as_f64().unwrap());
    assert!(r["latency_ms"]["compute"].is_null());
    let thr = r["throughput"].as_f64().unwrap();
    let mean = all["mean"].as_f64().unwrap();
    assert!(
        thr > 0.0 && thr <= 2.0 / (mean / 1e3) * 1.01,
        "{thr} vs {mean}"
    );
    let setup = &r["setup"];
    let part = |name: &str| {
        setup[name]
            .as_f64()
            .unwrap_or_else(|| panic!("{name}: {setup}"))
    };
    assert!(part("open_ms") > 0.0, "{setup}");
    assert_eq!(
        part("first_iteration_ms"),
        r["first_iteration_ms"].as_f64().unwrap()
    );
    assert!(
        (part("total_ms") - part("open_ms") - part("first_iteration_ms")).abs() < 1e-6,
        "{setup}"
    );
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&times).unwrap()).unwrap();
    assert_eq!(t[0]["iterations"].as_array().unwrap().len(), 3);
}

#[test]
fn a_file_named_engine_that_is_none_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let engine = dir.path().join("m.engine");
    std::fs::write(&engine, b"not an engine").unwrap();
    let out = trtkit(&["run", engine.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &["m.engine", "not a TensorRT engine", "trtkit build"],
    );
}

#[test]
fn fixed_batch_model_refuses_another_batch() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "fixed.onnx", test_models::classifier(Some(1)));
    let out = trtkit(&["run", model.to_str().unwrap(), "--batch-size", "8"]);
    assert_clean_error(&out, 1, &["fixed.onnx", "batch 8", "fixed batch of 1"]);
}

#[test]
fn gpu_flags_on_the_cpu_backend_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    for flag in [
        &["--cuda-graph"][..],
        &["--device-id", "3"],
        &["--streams", "2"],
    ] {
        let mut args = vec!["run", model.to_str().unwrap(), "--iterations", "1"];
        args.extend_from_slice(flag);
        let out = trtkit(&args);
        assert_clean_error(
            &out,
            2,
            &[
                flag[0],
                "needs a backend that enqueues on trtkit's CUDA streams",
                "ort-cpu",
            ],
        );
    }
    let out = trtkit(&["run", model.to_str().unwrap(), "--batch-size", "0"]);
    assert_clean_error(&out, 2, &["--batch-size"]);
    let out = trtkit(&["run", dir.path().join("missing.onnx").to_str().unwrap()]);
    assert_clean_error(&out, 1, &["missing.onnx"]);
}

#[test]
fn a_token_model_is_timed_with_named_input_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let m = support::save(
        dir.path(),
        "tok.onnx",
        trtkit::onnx::test_models::token_classifier(),
    );
    let m = m.to_str().unwrap();
    let out = support::trtkit(&[
        "run",
        m,
        "--input-shape",
        "input_ids:-1x16",
        "attention_mask:-1x16",
        "--batch-size",
        "1,2",
        "--iterations",
        "3",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[1]["batch"], 2);
    assert_eq!(results[1]["iterations"], 3);
    // Token ids inside the vocabulary and a real mask, said in the notes.
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("input_ids: integers in [0, 50)")
            && notes.contains("attention_mask: attention mask"),
        "{notes}"
    );
    // Without the sequence length the model cannot be timed: said in one line, no panic.
    let out = support::trtkit(&["run", m, "--iterations", "1"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && stderr.trim().lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn a_named_axis_is_swept_and_reported_per_size() {
    let dir = tempfile::tempdir().unwrap();
    let m = support::save(
        dir.path(),
        "tok.onnx",
        trtkit::onnx::test_models::token_classifier(),
    );
    let m = m.to_str().unwrap();
    let csv = dir.path().join("times.csv");
    let out = support::trtkit(&[
        "run",
        m,
        "--dim",
        "seq=16,64",
        "--batch-size",
        "1,2",
        "--iterations",
        "2",
        "--json",
        "--export-times",
        csv.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points: Vec<(u64, u64)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["batch"].as_u64().unwrap(),
                r["dims"]["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(points, [(1, 16), (1, 64), (2, 16), (2, 64)]);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("batch,seq,iteration,"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("2,64,1,")), "{text}");
    // The table has a column for the swept axis.
    let out = support::trtkit(&["run", m, "--dim", "seq=8,32", "--iterations", "1"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    let header = table.lines().find(|l| l.contains("iters")).unwrap();
    assert!(
        header.split_whitespace().take(2).eq(["batch", "seq"]),
        "{table}"
    );
    assert!(table.contains("batch 1 seq 32"), "{table}");
    // An axis the model does not have, and the batch axis, are one-line errors naming the names.
    for (bad, needle) in [
        ("sequence=8", "named axes: batch, seq"),
        ("batch=8", "--batch-size"),
    ] {
        let out = support::trtkit(&["run", m, "--dim", bad, "--iterations", "1"]);
        support::assert_clean_error(&out, 1, &[needle]);
    }
}

#[test]
fn the_default_cpu_backend_is_onnx_runtime_and_tract_where_it_cannot_load() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let args = [
        "run",
        model.to_str().unwrap(),
        "--iterations",
        "2",
        "--json",
    ];
    let backend_of = |out: &std::process::Output| {
        let v: serde_json::Value = serde_json::from_str(&stdout_of_success(out)).unwrap();
        v["results"][0]["backend"].as_str().unwrap().to_string()
    };
    assert!(backend_of(&trtkit(&args)).starts_with("ort-cpu"));
    let missing = dir.path().join("libonnxruntime.so");
    let out = Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .args(args)
        .env("ORT_DYLIB_PATH", &missing)
        .output()
        .unwrap();
    assert!(backend_of(&out).starts_with("tract-cpu"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tract runs the model") && stderr.contains("libonnxruntime.so"),
        "{stderr}"
    );
}

/// A batch far past the machine's memory is refused before anything is allocated for it: one
/// line naming the flag and the bytes, exit 2, instead of an aborted allocation.
#[test]
fn a_batch_too_large_for_memory_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let m = model.to_str().unwrap();
    let out = trtkit(&["run", m, "--batch-size", "1000000000", "--iterations", "1"]);
    // (3·16·16 + 10) float32 values a sample: 3,112 bytes, 2.8 TiB for the batch.
    assert_clean_error(
        &out,
        2,
        &[
            "c.onnx",
            "--batch-size",
            "2.8 TiB of host memory",
            "3.0 KiB a sample",
        ],
    );
    // A list is checked whole before its first batch is measured (for a minute, were it run).
    let started = std::time::Instant::now();
    let list = ["run", m, "--batch-size", "1,1000000000", "--duration", "60"];
    assert_clean_error(
        &trtkit(&list),
        2,
        &["c.onnx", "--batch-size", "batch 1000000000"],
    );
    assert!(
        started.elapsed().as_secs() < 30,
        "batch 1 was measured first"
    );
    // (`compare --num-samples` holds one batch at a time whatever the count: tests/compare_memory_cli.rs.)
    // A batch the input shape fixes pads the samples up to it.
    let fixed = "1000000000x3x16x16";
    let out = trtkit(&["compare", m, m, "--input-shape", fixed]);
    assert_clean_error(&out, 2, &["c.onnx", "--input-shape", "host memory"]);
}

/// `--op-profile` reads ONNX Runtime's own profile of the runs after the first and says the
/// time per op type in a note; tract has no such profiler, and saying so beats a silent nothing.
#[test]
fn op_profile_says_the_time_per_op_type_of_the_runs_after_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let model = model.to_str().unwrap();
    let common = ["run", model, "--warmup", "1", "--iterations", "4"];
    let out = trtkit(&[&common[..], &["--backend", "ort", "--op-profile", "--json"]].concat());
    let v: serde_json::Value = serde_json::from_str(&stdout_of_success(&out)).unwrap();
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    let profile = notes
        .iter()
        .find(|n| n.contains("op profile"))
        .unwrap_or_else(|| panic!("no op profile note in {notes:?}"));
    // One first run left out, one warm-up and four measured counted.
    assert!(profile.contains("op profile over 5 runs"), "{profile}");
    assert!(
        profile.contains("Conv ") && profile.contains("%"),
        "{profile}"
    );
    let plain = trtkit(&[&common[..], &["--backend", "ort", "--json"]].concat());
    assert!(!stdout_of_success(&plain).contains("op profile"));
    let tract = trtkit(&[&common[..], &["--backend", "tract", "--op-profile"]].concat());
    support::assert_clean_error(&tract, 2, &["--op-profile", "ONNX Runtime"]);
    // Without ONNX Runtime the default backend is tract: the run says nothing was profiled.
    let fallback = Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .args([&common[..], &["--op-profile", "--json"]].concat())
        .env("ORT_DYLIB_PATH", dir.path().join("libonnxruntime.so"))
        .output()
        .unwrap();
    let text = stdout_of_success(&fallback);
    assert!(text.contains("op profile: nothing profiled"), "{text}");
}
