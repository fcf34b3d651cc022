//! ONNX Runtime's CUDA provider on a machine that cannot run it (CI has no GPU and the CPU
//! build of ONNX Runtime): every command that asks for it says in one line what is missing and
//! exits 1, a bench cell records that reason, and `doctor` lists what the provider needs.
//! On a GPU machine with `onnxruntime-gpu` these commands run instead (the GPU suite).

mod support;

use serde_json::Value;
use support::{assert_clean_error, save, trtkit, trtkit_in};
use trtkit::onnx::test_models::classifier;

/// Whether this machine can run ONNX Runtime's CUDA provider (then the refusals below cannot
/// be checked here; the GPU suite covers that machine).
fn ort_cuda_runs_here() -> bool {
    trtkit::backend::ort_cuda::ort_cuda_usable(0)
}

/// What the refusal must name on this machine: the GPU when there is none, else the GPU build.
fn missing_needles() -> Vec<&'static str> {
    if trtkit::cuda::device::Gpu::open(0).is_err() {
        vec!["ort-cuda", "needs an NVIDIA GPU"]
    } else {
        vec!["onnxruntime-gpu"]
    }
}

#[test]
fn run_compare_validate_and_calibrate_on_ort_cuda_say_what_is_missing() {
    if ort_cuda_runs_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", classifier(None));
    let m = model.to_str().unwrap();
    let needles = missing_needles();
    let mut with_file = needles.clone();
    with_file.push("c.onnx");
    for args in [
        vec![
            "run",
            m,
            "--backend",
            "ort",
            "--device",
            "cuda",
            "--iterations",
            "1",
        ],
        vec![
            "run",
            m,
            "--backend",
            "ort",
            "--device",
            "cuda",
            "--cuda-graph",
        ],
        vec!["compare", m, m, "--a-backend", "ort", "--a-device", "cuda"],
        vec![
            "calibrate",
            m,
            "--calib-data",
            "synthetic:1",
            "--batch-size",
            "2",
            "--backend",
            "ort",
            "--device",
            "cuda",
            "--cache-dir",
            dir.path().to_str().unwrap(),
        ],
    ] {
        let out = trtkit(&args);
        assert_clean_error(&out, 1, &with_file);
    }
    let images = dir.path().join("val");
    for class in ["a", "b"] {
        std::fs::create_dir_all(images.join(class)).unwrap();
        support::write_jpeg(&images.join(class).join("x.jpg"), 40, 30, [9, 90, 200], 1);
    }
    let out = trtkit(&[
        "validate",
        m,
        "--dataset",
        images.to_str().unwrap(),
        "--backend",
        "ort",
        "--device",
        "cuda",
    ]);
    assert_clean_error(&out, 1, &needles);
}

#[test]
fn a_bench_cell_on_ort_cuda_records_the_same_reason() {
    if ort_cuda_runs_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "dyn.onnx", classifier(None));
    let out = trtkit_in(
        dir.path(),
        &[
            "bench",
            "--models",
            model.to_str().unwrap(),
            "--precisions",
            "fp32",
            "--batch-sizes",
            "2",
            "--targets",
            "ort-cuda,ort-cpu",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--name",
            "gpu",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let journal = std::fs::read_to_string(dir.path().join("results/gpu/journal.jsonl")).unwrap();
    let cells: Vec<Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cells.len(), 2, "{stdout}");
    let cell = |target: &str| {
        cells
            .iter()
            .find(|c| c["key"]["target"] == target)
            .unwrap_or_else(|| panic!("no {target} cell: {journal}"))
    };
    assert_eq!(cell("ort-cpu")["status"], "ok", "{journal}");
    let gpu = cell("ort-cuda");
    assert_eq!(gpu["status"], "failed");
    assert_eq!(gpu["failure"]["kind"], "missing", "{}", gpu["failure"]);
    let reason = gpu["failure"]["reason"].as_str().unwrap();
    for n in missing_needles() {
        assert!(reason.contains(n), "{reason}");
    }
}

#[test]
fn doctor_lists_onnx_runtime_and_what_its_cuda_provider_needs() {
    let out = trtkit(&["doctor", "--json"]);
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ort = &r["onnxruntime"];
    assert!(r["backends"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b == "ort-cuda"));
    let libs: Vec<&str> = ort["cuda_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["library"].as_str().unwrap())
        .collect();
    assert_eq!(
        libs,
        [
            "libcudart.so.13",
            "libcublasLt.so.13",
            "libcublas.so.13",
            "libcurand.so.10",
            "libcudnn.so.9"
        ]
    );
    let text = String::from_utf8_lossy(&trtkit(&["doctor"]).stdout).to_string();
    if ort["library"]["cuda_provider"].is_null() {
        // The CPU build (what CI installs): doctor says so, with the line that installs the GPU one.
        let why = ort["cuda_missing"].as_str().unwrap();
        assert!(why.contains("CPU build"), "{why}");
        assert!(
            why.contains("pip install 'onnxruntime-gpu[cuda,cudnn]==1.31.1'"),
            "{why}"
        );
        assert!(text.contains("ort-cuda     not available: "), "{text}");
        assert!(
            text.contains("1.31.1") && text.contains("CPU build"),
            "{text}"
        );
    }
}

#[test]
fn doctor_check_without_a_gpu_says_so_and_succeeds() {
    if trtkit::cuda::device::Gpu::open(0).is_ok() {
        return;
    }
    let out = trtkit(&["doctor", "--check", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["check"]["gpus"].as_array().unwrap().len(), 0);
    assert!(r["check"]["no_gpu"]
        .as_str()
        .unwrap()
        .contains("CUDA driver"));
    let text = String::from_utf8_lossy(&trtkit(&["doctor", "--check"]).stdout).to_string();
    assert!(text.contains("no GPU checked: "), "{text}");
}
