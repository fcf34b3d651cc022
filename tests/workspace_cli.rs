//! The workspace (`trtkit init`, `trtkit.toml`) and the three commands users type in it,
//! verbatim: `trtkit build --fp16 --input-shape -1 3 224 224`, `trtkit validate --dataset val/`,
//! `trtkit compare --rtol 1e-3`. Real TensorRT-RTX builds on the CPU; no GPU, so the engine rows
//! say why they did not run and the kept FP16/INT8 graphs run instead, on ONNX Runtime's CPU
//! build where it is installed (else on tract).
//!
//! Needs TensorRT-RTX (`python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`; CI installs it).

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Output;
use support::{assert_clean_error, save, trtkit_in, write_jpeg};
use trtkit::onnx::test_models;

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("JSON report")
}

/// A workspace in `dir/ws` for the 224×224 test classifier with custom preprocessing, a
/// two-class dataset and synthetic calibration data.
fn workspace(dir: &Path) -> std::path::PathBuf {
    save(dir, "clf.onnx", test_models::classifier_sized(None, 224));
    let ws = dir.join("ws");
    for (class, rgb) in [("a", [200, 40, 40]), ("b", [40, 40, 200])] {
        for i in 0..2 {
            let folder = ws.join("val").join(class);
            std::fs::create_dir_all(&folder).unwrap();
            write_jpeg(&folder.join(format!("{i}.jpg")), 256, 256, rgb, i);
        }
    }
    let out = trtkit_in(
        &ws,
        &[
            "init",
            "../clf.onnx",
            "--dataset",
            "val",
            "--calib-data",
            "synthetic:1",
            "--mean",
            "0.5",
            "0.5",
            "0.5",
            "--std",
            "0.5",
            "0.5",
            "0.5",
        ],
    );
    assert!(ok(&out).contains("made a trtkit workspace"));
    ws
}

/// Without a GPU the kept graphs run on ONNX Runtime's CPU build where it is installed (`ort`),
/// else on tract; the FP16 graph's float16 tensors rounded as FP16 holds them.
fn check_graph_backend(row: &serde_json::Value, ort: bool) {
    let backend = row["backend"].as_str().unwrap();
    let (base, note) = match backend.strip_suffix(", fp16 emulated") {
        Some(base) => (base, true),
        None => (backend, false),
    };
    assert_eq!(note, row["precision"] == "fp16", "{row}");
    if ort {
        assert_eq!(base, "ort-cpu", "{row}");
    } else {
        assert!(base.starts_with("tract-cpu"), "{row}");
    }
}

#[test]
fn the_three_lines_work_verbatim_in_a_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    assert!(ws.join("onnx/clf.onnx").is_file() && ws.join("engines").is_dir());

    // The three lines, verbatim, plus the other two precisions.
    let built = ok(&trtkit_in(
        &ws,
        &["build", "--fp16", "--input-shape", "-1", "3", "224", "224"],
    ));
    assert!(
        built.contains("engines/clf-") && built.contains("-fp16-b1_32_64.engine"),
        "{built}"
    );
    ok(&trtkit_in(
        &ws,
        &["build", "--input-shape", "-1", "3", "224", "224"],
    ));
    ok(&trtkit_in(
        &ws,
        &[
            "build",
            "--int8",
            "--input-shape",
            "-1",
            "3",
            "224",
            "224",
            "--batch-size",
            "4",
            "--num-samples",
            "8",
        ],
    ));
    // The calibration cache landed in the workspace and was calibrated with its preprocessing.
    assert!(std::fs::read_dir(ws.join("calibration")).unwrap().count() >= 2);

    let text = ok(&trtkit_in(&ws, &["validate", "--dataset", "val/"]));
    for column in [
        "Latency-all (ms) mean / max",
        "Latency-model (ms) mean / max",
        "size (MB)",
        "Prec@1",
        "Prec@5",
        "# layers",
        "# parameters",
    ] {
        assert!(text.contains(column), "{column} missing: {text}");
    }
    let report = json(&trtkit_in(
        &ws,
        &["validate", "--dataset", "val/", "--json"],
    ));
    let rows = report["tables"][0]["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "fp32 onnx",
            "fp32 engine",
            "fp16 engine",
            "fp16 graph",
            "int8 engine",
            "int8 graph"
        ]
    );
    let no_gpu = trtkit::cuda::info::driver_info().gpus.is_empty();
    let ort = trtkit::backend::ort::available().is_ok();
    for r in rows {
        let ran = r["accuracy"].is_object();
        match r["kind"].as_str().unwrap() {
            "engine" if no_gpu => {
                assert!(!ran, "{r}");
                assert_eq!(r["unavailable"], "no usable GPU here");
            }
            "onnx" | "graph" => {
                assert!(ran, "{r}");
                assert_eq!(r["accuracy"]["images"], 4);
                assert!(r["layers"].as_u64().unwrap() > 0 && r["parameters"].as_u64().unwrap() > 0);
            }
            _ => {}
        }
        if r["kind"] == "graph" && no_gpu {
            check_graph_backend(r, ort);
        }
    }
    // Two batch sizes give two tables.
    let two = json(&trtkit_in(
        &ws,
        &["validate", "--batch-size", "1,2", "--json"],
    ));
    assert_eq!(two["tables"].as_array().unwrap().len(), 2);

    let cmp = ok(&trtkit_in(&ws, &["compare", "--rtol", "1e-3"]));
    assert!(
        cmp.contains("equal %") && cmp.contains("fp16 graph MAE / Disg %"),
        "{cmp}"
    );
    let cmp = json(&trtkit_in(&ws, &["compare", "--rtol", "1e-3", "--json"]));
    let rows = cmp["rows"].as_array().unwrap();
    let fp16 = rows.iter().find(|r| r["label"] == "fp16 graph").unwrap();
    assert!(
        fp16["top1_agreement_pct"].as_f64().unwrap() >= 90.0,
        "{fp16}"
    );
    assert_eq!(fp16["ranks"].as_array().unwrap().len(), 10);
    assert!(rows.iter().any(|r| r["label"] == "int8 graph"));
    assert_eq!(cmp["tolerance"]["rtol"].as_f64(), Some(1e-3));

    // Over the dataset's images instead of random inputs; markdown is the two tables alone.
    let images = json(&trtkit_in(&ws, &["compare", "--dataset", "val", "--json"]));
    assert_eq!(
        images["inputs"],
        "4 images of val, preprocessed for the model"
    );
    let md = ok(&trtkit_in(&ws, &["compare", "--markdown"]));
    assert!(md.trim_start().starts_with("| Precision"), "{md}");
    assert_eq!(md.matches("| Rank").count(), 1, "{md}");
    let md = ok(&trtkit_in(&ws, &["validate", "--markdown"]));
    assert!(md.trim_start().starts_with("**batch size 32**"), "{md}");
}

/// A batch size far beyond the images runs the images (no padding to a size nobody asked
/// for), in `validate` and in `compare` over them.
#[test]
fn a_huge_batch_size_runs_the_images() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let shape = ["--input-shape", "-1", "3", "224", "224"];
    ok(&trtkit_in(
        &ws,
        &[&["build", "--fp16"][..], &shape].concat(),
    ));
    let huge = ["--dataset", "val", "--batch-size", "1000000000", "--json"];
    let images = json(&trtkit_in(&ws, &[&["compare"][..], &huge].concat()));
    assert_eq!(
        images["inputs"],
        "4 images of val, preprocessed for the model"
    );
    let r = json(&trtkit_in(
        &ws,
        &[&["validate", "onnx/clf.onnx"][..], &huge].concat(),
    ));
    assert_eq!(
        (r["images"].as_u64(), r["batch_size"].as_u64()),
        (Some(4), Some(4))
    );
}

#[test]
fn flags_win_over_the_file_and_the_file_fills_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let r = json(&trtkit_in(&ws, &["validate", "onnx/clf.onnx", "--json"]));
    assert_eq!(r["preprocess"]["mean"], serde_json::json!([0.5, 0.5, 0.5]));
    let r = json(&trtkit_in(
        &ws,
        &[
            "validate",
            "onnx/clf.onnx",
            "--json",
            "--mean",
            "0.2",
            "0.2",
            "0.2",
        ],
    ));
    assert_eq!(
        r["preprocess"]["mean"][0]
            .as_f64()
            .map(|m| (m * 10.0).round()),
        Some(2.0)
    );
    assert_eq!(r["preprocess"]["std"], serde_json::json!([0.5, 0.5, 0.5]));
    let shown = json(&trtkit_in(
        &ws,
        &["init", "--show", "--json", "--std", "0.3", "0.3", "0.3"],
    ));
    let source = |name: &str| {
        shown
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()["source"]
            .clone()
    };
    assert_eq!(source("preprocess.std"), "command-line");
    assert_eq!(source("preprocess.mean"), "workspace");
    assert_eq!(source("dataset"), "workspace");
    assert_eq!(source("preprocess.crop"), "default");
}

#[test]
fn an_engine_of_an_older_model_is_stale_and_not_validated() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    ok(&trtkit_in(
        &ws,
        &["build", "--input-shape", "-1", "3", "224", "224"],
    ));
    // The model changes under the same name: its engine is now stale.
    let mut changed = test_models::classifier_sized(None, 224);
    changed.doc_string = "retrained".into();
    save(&ws.join("onnx"), "clf.onnx", changed);
    let r = json(&trtkit_in(&ws, &["validate", "--json"]));
    let rows = r["tables"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "only the ONNX row: {rows:?}");
    let skipped = r["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert!(
        skipped[0].as_str().unwrap().contains("stale"),
        "{skipped:?}"
    );
}

#[test]
fn no_workspace_and_two_models_are_said_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = trtkit_in(d, &["validate", "--dataset", "val"]);
    assert_clean_error(&out, 2, &["trtkit.toml", "onnx/", "trtkit init MODEL.onnx"]);
    let out = trtkit_in(d, &["build", "--fp16"]);
    assert_clean_error(&out, 2, &["trtkit.toml", "trtkit init"]);
    std::fs::create_dir(d.join("onnx")).unwrap();
    save(&d.join("onnx"), "a.onnx", test_models::classifier(None));
    save(&d.join("onnx"), "b.onnx", test_models::classifier(None));
    let out = trtkit_in(d, &["compare"]);
    assert_clean_error(&out, 2, &["a.onnx, b.onnx", "trtkit.toml"]);
}

/// A hand-written workspace for the 16×16 test classifier, with `toml` as its `trtkit.toml`
/// and a one-class dataset in `val/`.
fn workspace_with(dir: &Path, toml: &str) {
    std::fs::create_dir_all(dir.join("onnx")).unwrap();
    save(&dir.join("onnx"), "clf.onnx", test_models::classifier(None));
    write_jpeg(&dir.join("val/a/0.jpg"), 32, 32, [200, 40, 40], 0);
    std::fs::write(
        dir.join("trtkit.toml"),
        format!("model = \"onnx/clf.onnx\"\n{toml}"),
    )
    .unwrap();
}

/// A bad value in trtkit.toml is said as the file's, naming the file and the key, not as a
/// flag the user never typed.
#[test]
fn bad_values_in_the_file_name_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    workspace_with(ws, "input_shape = [\"-1\", \"3\", \"abc\", \"16\"]\n");
    let out = trtkit_in(ws, &["build"]);
    assert_clean_error(
        &out,
        1,
        &["trtkit.toml", "input_shape", "'abc' is not a dimension"],
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("--input-shape"));

    workspace_with(ws, "[preprocess]\ncrop = 10\n");
    let out = trtkit_in(ws, &["validate", "--dataset", "val"]);
    assert_clean_error(&out, 1, &["10×10 crop", "[preprocess] crop", "trtkit.toml"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("--crop"));
    let out = trtkit_in(ws, &["compare", "--dataset", "val"]);
    assert_clean_error(&out, 1, &["10×10 crop", "[preprocess] crop", "trtkit.toml"]);
    // The flag, given, is the user's own mistake and says so.
    let out = trtkit_in(ws, &["validate", "--dataset", "val", "--crop", "12"]);
    assert_clean_error(&out, 2, &["12×12 crop"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("trtkit.toml"));
}

/// The workspace comparison runs the reference once and compares every precision with it in
/// memory: nothing is written to the temporary folder (with none to write to, it still runs),
/// and each row's figures are those of the two-side `compare` of the same files.
#[test]
fn the_workspace_comparison_writes_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    ok(&trtkit_in(
        &ws,
        &["build", "--fp16", "--input-shape", "-1", "3", "224", "224"],
    ));
    let run = |tmp: &Path, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_trtkit"))
            .current_dir(&ws)
            .args(args)
            .env("TRTKIT_TENSORRT_DIR", support::tensorrt_dir())
            .env("TMPDIR", tmp)
            .output()
            .unwrap()
    };
    let empty = dir.path().join("tmp");
    std::fs::create_dir(&empty).unwrap();
    // What trtkit left there: ONNX Runtime itself keeps a session id in `.ses` whenever it runs.
    let left = |tmp: &Path| {
        let mut names = support::files(tmp);
        names.retain(|n| n != ".ses");
        names
    };
    let samples = ["--num-samples", "6", "--seed", "2", "--json"];
    let all = json(&run(&empty, &[&["compare"][..], &samples].concat()));
    assert_eq!(left(&empty), Vec::<String>::new());
    let images = json(&run(&empty, &["compare", "--dataset", "val", "--json"]));
    assert_eq!(left(&empty), Vec::<String>::new());
    assert_eq!(
        images["inputs"],
        "4 images of val, preprocessed for the model"
    );
    // No temporary folder at all: a temporary file would fail the run.
    let missing = dir.path().join("no-such-folder");
    let again = json(&run(&missing, &[&["compare"][..], &samples].concat()));
    assert!(!missing.exists());
    // The same figures (all but the time the task comparison took).
    let untimed = |report: &Value| {
        let mut rows = report["rows"].clone();
        for r in rows.as_array_mut().unwrap() {
            if let Some(task) = r["task"].as_object_mut() {
                task.remove("seconds");
            }
        }
        rows
    };
    assert_eq!(untimed(&again), untimed(&all));

    let rows = all["rows"].as_array().unwrap();
    let ran: Vec<&Value> = rows.iter().filter(|r| r["unavailable"].is_null()).collect();
    assert!(!ran.is_empty(), "{all}");
    for row in ran {
        let file = row["file"].as_str().unwrap();
        let pair = json(&run(
            &empty,
            &[&["compare", file, "onnx/clf.onnx"][..], &samples].concat(),
        ));
        let o = &pair["outputs"][0];
        assert_eq!(row["equal_pct"], o["closeness"]["equal_pct"], "{row}");
        assert_eq!(row["max_abs_err"], o["closeness"]["max_abs_err"], "{row}");
        assert_eq!(row["top1_agreement_pct"], o["topk"]["top1_agreement_pct"]);
        assert_eq!(row["backend"], pair["sides"][0]["backend"]);
        assert_eq!(all["reference_backend"], pair["sides"][1]["backend"]);
        assert_eq!(all["inputs"], pair["inputs"]);
    }
}
