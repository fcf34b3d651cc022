//! `trtkit bench`: the matrix completes, a failing or crashing cell is recorded with its reason
//! while the rest runs, a killed run resumes with only the missing cells, and `--print-cells`
//! hands cells to a scheduler. Asserted on the journal, the file a run leaves behind.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{assert_clean_error, save, trtkit_in, write_jpeg};
use trtkit::onnx::test_models::classifier;

/// A dynamic-batch and a batch-1 classifier in `dir`.
fn models(dir: &Path) -> (PathBuf, PathBuf) {
    (
        save(dir, "dyn.onnx", classifier(None)),
        save(dir, "fixed.onnx", classifier(Some(1))),
    )
}

fn journal(dir: &Path, name: &str) -> Vec<Value> {
    let path = dir.join("results").join(name).join("journal.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn label(r: &Value) -> String {
    format!(
        "{}/{}/b{}/{}",
        r["model"].as_str().unwrap(),
        r["key"]["precision"].as_str().unwrap(),
        r["key"]["batch"],
        r["key"]["target"].as_str().unwrap()
    )
}

/// Quick cells: one warm-up, two measured iterations, a small calibration.
const QUICK: &[&str] = &["--warmup", "1", "--iterations", "2", "--calib-samples", "8"];

fn bench(dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["bench"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(extra);
    trtkit_in(dir, &args)
}

fn spawn_bench(dir: &Path, quick: bool, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .current_dir(dir)
        .arg("bench")
        .args(if quick { QUICK } else { &[] })
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "waited too long for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pids of running cell processes whose command line mentions `folder`.
fn cell_pids(folder: &str) -> Vec<String> {
    let mut pids = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("bench-cell") && cmd.contains(folder) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn the_matrix_completes_records_refused_cells_and_resumes_without_rerunning() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, fixed) = models(dir.path());
    let matrix = [
        "--models",
        dynamic.to_str().unwrap(),
        fixed.to_str().unwrap(),
        "--precisions",
        "fp32,fp16,int8",
        "--batch-sizes",
        "1,4",
        "--targets",
        "tract-cpu,ort-cpu",
        "--compare",
        "--name",
        "m",
    ];
    let out = bench(dir.path(), &matrix);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = journal(dir.path(), "m");
    assert_eq!(lines.len(), 24, "{stdout}");
    for r in &lines {
        let l = label(r);
        let refused = l.starts_with("fixed/") && r["key"]["batch"] == 4;
        if refused {
            assert_eq!(r["status"], "failed", "{l}");
            assert_eq!(r["failure"]["kind"], "batch", "{l}: {}", r["failure"]);
            assert!(r["failure"]["log"].as_str().unwrap().starts_with("logs/"));
        } else {
            assert_eq!(r["status"], "ok", "{l}: {}", r["failure"]);
            let m = &r["metrics"];
            assert!(m["samples_per_s"].as_f64().unwrap() > 0.0, "{l}");
            assert_eq!(m["iterations"], 2, "{l}");
            assert!(m["host_rss_peak_mib"].as_f64().unwrap() > 1.0, "{l}");
            let setup = &m["setup"];
            let total = setup["total_ms"].as_f64().unwrap();
            assert!(setup["open_ms"].as_f64().unwrap() > 0.0, "{l}: {setup}");
            assert_eq!(setup["first_iteration_ms"], m["first_iteration_ms"], "{l}");
            assert!(
                total > 0.0 && total <= r["wall_s"].as_f64().unwrap() * 1e3,
                "{l}: {setup}"
            );
            let file = m["artifact"]["file"].as_str().unwrap();
            match r["key"]["precision"].as_str().unwrap() {
                "fp32" => assert!(
                    file.ends_with(".onnx") && !file.contains("results"),
                    "{file}"
                ),
                "fp16" => assert!(file.ends_with("-fp16.onnx"), "{file}"),
                _ => assert!(file.contains("-int8-"), "{file}"),
            }
            let c = &m["closeness"];
            assert_eq!(c["reference"], "fp32 on tract-cpu");
            let equal = c["equal_pct"].as_f64().unwrap();
            if r["key"]["precision"] == "fp32" {
                assert!(equal > 99.0, "{l}: {equal}");
            }
            assert!(m["artifact"]["parameters"].as_u64().unwrap() > 0);
        }
    }
    assert!(
        stdout.contains("FAILED  fixed/fp32/b4/tract-cpu: batch refused"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "24 cells in the plan: 0 already in the journal, 24 run now (18 ok, 6 failed)"
        ),
        "{stdout}"
    );

    // The report has every cell: one CSV row each, the refused ones with their reason.
    let csv = trtkit_in(dir.path(), &["report", "results/m", "--csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout).to_string();
    assert_eq!(csv.lines().count(), 25, "{csv}");
    assert_eq!(
        csv.lines()
            .filter(|l| l.contains(",failed,batch refused,"))
            .count(),
        6,
        "{csv}"
    );
    // The page renders in headless Chromium: the screenshot is mostly ink, not a blank page.
    let page = dir.path().join("page.html");
    let out = trtkit_in(
        dir.path(),
        &["report", "results/m", "-o", page.to_str().unwrap()],
    );
    assert!(out.status.success());
    let shot = dir.path().join("page.png");
    let status = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/screenshot_report.sh"))
        .args([&page, &shot])
        .arg("1200,2000")
        .status()
        .expect("bash");
    assert!(status.success(), "no screenshot (apt-get install chromium)");
    let inked = inked_share(&shot);
    assert!(inked > 0.02, "the screenshot is nearly blank: {inked}");

    // The same command again runs nothing; --retry-failed runs the six failures only.
    let again = bench(dir.path(), &matrix);
    assert!(String::from_utf8_lossy(&again.stdout).contains("24 already in the journal, 0 run now"));
    assert_eq!(journal(dir.path(), "m").len(), 24);
    let retry = bench(
        dir.path(),
        &[&matrix[..], &["--retry-failed", "--json"]].concat(),
    );
    let report: Value = serde_json::from_slice(&retry.stdout).unwrap();
    assert_eq!(report["ran"], 6);
    assert_eq!(report["already_done"], 18);
    assert_eq!(journal(dir.path(), "m").len(), 30);
}

/// The share of a PNG's pixels that are not near-white.
fn inked_share(path: &Path) -> f64 {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let inked = pixels
        .chunks(channels)
        .filter(|p| p.iter().take(3).any(|&c| c < 200))
        .count();
    inked as f64 / (pixels.len() / channels) as f64
}

#[test]
fn a_killed_run_resumes_with_only_the_missing_cells() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let matrix = [
        "--models",
        dynamic.to_str().unwrap(),
        "--precisions",
        "fp32",
        "--batch-sizes",
        "1,2,3,4,5,6",
        "--targets",
        "tract-cpu",
        "--name",
        "k",
    ];
    let mut parent = spawn_bench(dir.path(), true, &matrix);
    wait_for("two journal lines", || journal(dir.path(), "k").len() >= 2);
    parent.kill().unwrap();
    parent.wait().unwrap();
    let before: Vec<String> = journal(dir.path(), "k").iter().map(label).collect();
    assert!(before.len() < 6, "the run finished before it was killed");
    let out = bench(dir.path(), &[&matrix[..], &["--json"]].concat());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ran"].as_u64().unwrap() as usize, 6 - before.len());
    let after: Vec<String> = journal(dir.path(), "k").iter().map(label).collect();
    assert_eq!(&after[..before.len()], &before[..]);
    let mut unique = after.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 6, "{after:?}");
}

#[test]
fn a_crashed_or_slow_cell_is_recorded_and_the_rest_completes() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let folder = dir.path().join("results").join("c");
    // The first cell measures for ever: it is killed with SIGABRT from outside, as a crash of a
    // native library would end it (Rust handles SIGSEGV itself, so a sent one is not a crash).
    let mut parent = spawn_bench(
        dir.path(),
        false,
        &[
            "--models",
            dynamic.to_str().unwrap(),
            "--precisions",
            "fp32",
            "--batch-sizes",
            "1,2",
            "--targets",
            "tract-cpu",
            "--iterations",
            "100000000",
            "--cell-timeout",
            "8",
            "--name",
            "c",
        ],
    );
    let folder_text = "results/c/cells/".to_string();
    let _ = &folder;
    wait_for("the first cell's process", || {
        !cell_pids(&folder_text).is_empty()
    });
    for pid in cell_pids(&folder_text) {
        Command::new("kill").args(["-ABRT", &pid]).status().unwrap();
    }
    assert!(parent.wait().unwrap().success());
    let lines = journal(dir.path(), "c");
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["failure"]["kind"], "signal", "{}", lines[0]);
    assert_eq!(lines[0]["failure"]["signal"], 6);
    assert!(lines[0]["failure"]["reason"]
        .as_str()
        .unwrap()
        .contains("SIGABRT"));
    // The second ran into the time limit.
    assert_eq!(lines[1]["failure"]["kind"], "timeout", "{}", lines[1]);
    let wall = lines[1]["wall_s"].as_f64().unwrap();
    assert!((8.0..30.0).contains(&wall), "{wall}");
}

#[test]
fn print_cells_hands_each_missing_cell_to_a_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    std::fs::write(
        dir.path().join("plan.toml"),
        "models = [\"dyn.onnx\"]\nprecisions = [\"fp32\"]\nbatch_sizes = [1, 2]\ntargets = [\"tract-cpu\", \"trt\"]\n",
    )
    .unwrap();
    let _ = dynamic;
    let out = bench(dir.path(), &["plan.toml", "--print-cells"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let commands: Vec<&str> = text.lines().collect();
    assert_eq!(commands.len(), 4, "{text}");
    assert!(
        commands[0].ends_with("--cell dyn/fp32/b1/tract-cpu"),
        "{text}"
    );
    assert!(!text.contains("--print-cells"));
    // Run two of them as a scheduler would: words split by the shell, no other state. The
    // TensorRT cell fails here, and says so by its exit status, as a scheduler's accounts need.
    for (c, measures) in [(commands[0], true), (commands[2], false)] {
        let words: Vec<&str> = c.split(' ').skip(1).collect();
        let out = trtkit_in(dir.path(), &words);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), measures, "{c}: {stderr}");
        assert_eq!(
            stderr.contains("error: the cell failed: "),
            !measures,
            "{stderr}"
        );
    }
    let folder = dir.path().join("results").join("plan");
    let journals: Vec<String> = support::files(&folder)
        .into_iter()
        .filter(|f| f.starts_with("journal-"))
        .collect();
    assert_eq!(journals.len(), 2, "{journals:?}");
    // The TensorRT cell built its engine here and could not run it: recorded with the reason.
    let trt: Value = journals
        .iter()
        .map(|j| std::fs::read_to_string(folder.join(j)).unwrap())
        .find(|text| text.contains("\"trt\""))
        .map(|text| serde_json::from_str(text.trim()).unwrap())
        .unwrap();
    assert_eq!(trt["status"], "failed");
    assert!(
        ["missing", "unsupported-gpu"].contains(&trt["failure"]["kind"].as_str().unwrap()),
        "{}",
        trt["failure"]
    );
    let left = bench(dir.path(), &["plan.toml", "--print-cells"]);
    assert_eq!(String::from_utf8_lossy(&left.stdout).lines().count(), 2);
}

#[test]
fn bad_plans_are_one_line_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    models(dir.path());
    std::fs::write(
        dir.path().join("p.toml"),
        "models = [\"dyn.onnx\"]\nbatch = 3\n",
    )
    .unwrap();
    assert_clean_error(&bench(dir.path(), &["p.toml"]), 2, &["p.toml", "batch"]);
    assert_clean_error(
        &bench(
            dir.path(),
            &[
                "--models",
                "nope.onnx",
                "--precisions",
                "fp32",
                "--batch-sizes",
                "1",
                "--targets",
                "tract-cpu",
            ],
        ),
        2,
        &["nope.onnx", "not found"],
    );
    // The same matrix of dyn.onnx on `target`, with `extra` flags.
    let matrix_with = |target: &str, extra: &[&str]| {
        let mut args = vec![
            "--models",
            "dyn.onnx",
            "--precisions",
            "fp32",
            "--batch-sizes",
            "1",
            "--targets",
            target,
        ];
        args.extend_from_slice(extra);
        bench(dir.path(), &args)
    };
    let typo = matrix_with("tract-gpu", &[]);
    assert_eq!(typo.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(
        stderr.contains("unknown target \"tract-gpu\"") && stderr.contains("tract-cuda"),
        "{stderr}"
    );
    // Where cells run: flags that cannot go together, and boards that are not there.
    let with = |extra: &[&str]| matrix_with("tract-cpu", extra);
    let both = with(&["--devices", "0", "--device-id", "1"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("--device-id"));
    let word = with(&["--devices", "gpu1"]);
    assert_eq!(word.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&word.stderr).contains("0,1,2,3 or all"));
    let slurm_and_devices = with(&["--slurm", "--devices", "all"]);
    assert_eq!(slurm_and_devices.status.code(), Some(2));
    let zero = with(&["--devices", "all", "--cpu-cells", "0"]);
    assert_clean_error(&zero, 2, &["cpu-cells must be at least 1"]);
    // No board 64 here, whether this machine has GPUs (NVML answers) or none (it does not).
    let missing = with(&["--devices", "64"]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("there is no GPU 64") || stderr.contains("NVML is not readable"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(!missing.status.success());
}

#[test]
fn a_dataset_gives_every_cell_its_top_k() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    for (class, rgb) in [("a", [200, 30, 30]), ("b", [30, 200, 30])] {
        std::fs::create_dir_all(dir.path().join("val").join(class)).unwrap();
        for i in 0..3 {
            let path = dir.path().join("val").join(class).join(format!("{i}.jpg"));
            write_jpeg(&path, 40, 32, rgb, i);
        }
    }
    let out = bench(
        dir.path(),
        &[
            "--models",
            dynamic.to_str().unwrap(),
            "--precisions",
            "fp32,fp16",
            "--batch-sizes",
            "2",
            "--targets",
            "ort-cpu",
            "--dataset",
            "val",
            "--limit",
            "4",
            "--name",
            "d",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = journal(dir.path(), "d");
    assert_eq!(lines.len(), 2);
    for r in &lines {
        let a = &r["metrics"]["accuracy"];
        assert_eq!(a["images"], 4, "{}", label(r));
        let (top1, top5) = (
            a["top1_pct"].as_f64().unwrap(),
            a["top5_pct"].as_f64().unwrap(),
        );
        assert!(
            (0.0..=100.0).contains(&top1) && top5 >= top1,
            "{top1} {top5}"
        );
    }
    // The report has the accuracy tables.
    let md = trtkit_in(dir.path(), &["report", "results/d", "--markdown"]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("top-1 %") && md.contains("top-5 %"), "{md}");
}

/// A token model's sequence axis is a matrix axis: `--dim seq=16,64` makes a cell per length
/// (the image classifier beside it keeps one per batch), the INT8 cells of both lengths share
/// one calibration, each cell's comparison runs at its length, the report has a column per
/// length, and TensorRT gets one engine per length.
#[test]
fn a_sequence_axis_makes_a_cell_and_a_column_per_length() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let token = save(
        dir.path(),
        "bert.onnx",
        trtkit::onnx::test_models::token_classifier(),
    );
    let out = bench(
        dir.path(),
        &[
            "--models",
            token.to_str().unwrap(),
            dynamic.to_str().unwrap(),
            "--precisions",
            "fp32,int8",
            "--batch-sizes",
            "2",
            "--dim",
            "seq=64,16",
            "--targets",
            "ort-cpu",
            "--compare",
            "--name",
            "s",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = journal(dir.path(), "s");
    let labels: Vec<String> = lines.iter().map(label).collect();
    assert_eq!(lines.len(), 6, "{labels:?}");
    let mut scales = vec![];
    for r in &lines {
        let l = label(r);
        assert_eq!(r["status"], "ok", "{l}: {}", r["failure"]);
        let dims = &r["key"]["dims"];
        if l.starts_with("bert/") {
            let seq = dims["seq"].as_i64().unwrap();
            assert!(seq == 16 || seq == 64, "{l}: {dims}");
        } else {
            assert!(dims.is_null(), "{l}: {dims}");
        }
        let c = &r["metrics"]["closeness"];
        assert!(c["samples"].as_u64().unwrap() >= 8, "{l}: {c}");
        if r["key"]["precision"] == "fp32" {
            assert!(c["equal_pct"].as_f64().unwrap() > 99.0, "{l}: {c}");
        }
        if l.starts_with("bert/int8") {
            let notes: Vec<&str> = r["metrics"]["notes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|n| n.as_str())
                .filter(|n| n.starts_with("int8 scales: "))
                .collect();
            scales.push(notes[0].split(" (").next().unwrap().to_string());
        }
    }
    assert_eq!(scales.len(), 2);
    assert_eq!(scales[0], scales[1], "both lengths share the calibration");
    assert!(
        stdout.contains("bert/fp32/b2/seq=16/ort-cpu"),
        "cells are named with their length: {stdout}"
    );

    let md = trtkit_in(dir.path(), &["report", "results/s", "--markdown"]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("| target | precision | batch 2 seq 16 | batch 2 seq 64 |"),
        "{md}"
    );
    assert!(md.contains("| target | precision | batch 2 |"), "{md}");
    let csv = trtkit_in(dir.path(), &["report", "results/s", "--csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert!(
        csv.starts_with("model,target,precision,batch,seq,status,"),
        "{csv}"
    );

    // TensorRT: one engine per length, each static in the sequence axis (the cells then fail
    // here, where no GPU runs TensorRT-RTX engines).
    let trt = bench(
        dir.path(),
        &[
            "--models",
            token.to_str().unwrap(),
            "--precisions",
            "fp32",
            "--batch-sizes",
            "1,2",
            "--dim",
            "seq=16,64",
            "--targets",
            "trt",
            "--name",
            "e",
        ],
    );
    assert!(trt.status.success() || trt.status.code() == Some(1));
    let engines = dir.path().join("results/e/engines");
    let sidecars: Vec<Value> = support::files(&engines)
        .into_iter()
        .filter(|f| f.ends_with(".json"))
        .map(|f| serde_json::from_str(&std::fs::read_to_string(engines.join(f)).unwrap()).unwrap())
        .collect();
    assert_eq!(sidecars.len(), 2, "{:?}", support::files(&engines));
    let mut seq_of_profiles: Vec<Value> = sidecars
        .iter()
        .map(|s| {
            let input = &s["key"]["profile"]["inputs"][0];
            assert_eq!(input["min"][0], 1, "{input}");
            assert_eq!(input["max"][0], 2, "{input}");
            assert_eq!(input["min"][1], input["max"][1], "{input}");
            input["min"][1].clone()
        })
        .collect();
    seq_of_profiles.sort_by_key(|v| v.as_i64());
    assert_eq!(seq_of_profiles, [16, 64]);
}

#[test]
fn a_swept_axis_no_model_has_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let out = bench(
        dir.path(),
        &[
            "--models",
            dynamic.to_str().unwrap(),
            "--precisions",
            "fp32",
            "--batch-sizes",
            "1",
            "--targets",
            "ort-cpu",
            "--dim",
            "seq=16",
        ],
    );
    assert_clean_error(
        &out,
        2,
        &[
            "no model of the plan has an input axis named 'seq'",
            "dyn.onnx",
        ],
    );
}

/// The one-cell matrix of dyn.onnx on tract-cpu at `batches`, named `name`.
fn small_matrix<'a>(model: &'a str, batches: &'a str, name: &'a str) -> Vec<&'a str> {
    vec![
        "--models",
        model,
        "--precisions",
        "fp32",
        "--batch-sizes",
        batches,
        "--targets",
        "tract-cpu",
        "--name",
        name,
    ]
}

/// `kill -9` of a run takes the cell it was running with it within seconds; while a run lives,
/// a second run on its results folder is refused in one line that names it.
#[test]
fn a_killed_bench_takes_its_cell_with_it_and_a_live_one_keeps_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let mut matrix = small_matrix(dynamic.to_str().unwrap(), "1", "w");
    matrix.extend(["--iterations", "100000000", "--cell-timeout", "300"]);
    let mut parent = spawn_bench(dir.path(), false, &matrix);
    let cells = "results/w/cells/";
    wait_for("the cell's process", || !cell_pids(cells).is_empty());
    let mut second = vec!["bench"];
    second.extend(&matrix);
    let refused = trtkit_in(dir.path(), &second);
    let holder = format!("pid {}", parent.id());
    assert_clean_error(&refused, 1, &[&holder, "bench.lock", "another bench"]);
    parent.kill().unwrap();
    parent.wait().unwrap();
    let start = Instant::now();
    while !cell_pids(cells).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the cell outlived its bench: {:?}",
            cell_pids(cells)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The folder is free again.
    let out = bench(
        dir.path(),
        &small_matrix(dynamic.to_str().unwrap(), "1", "w"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A journal whose last line a crash cut short keeps every whole record on resume: the cut line
/// is set aside in `journal.jsonl.torn`, only the missing cells run, and the new records read.
#[test]
fn a_torn_last_journal_line_is_set_aside_and_only_missing_cells_run() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let model = dynamic.to_str().unwrap();
    let out = bench(dir.path(), &small_matrix(model, "1,2,4", "t"));
    assert!(out.status.success());
    let path = dir.path().join("results/t/journal.jsonl");
    let text = std::fs::read(&path).unwrap();
    let cut = &text[..text.len() - 40];
    std::fs::write(&path, cut).unwrap();
    let torn_line = &cut[cut[..cut.len()].iter().rposition(|&b| b == b'\n').unwrap() + 1..];
    // One more batch size, beyond the old range: the tract cells already measured stay.
    let mut resume = small_matrix(model, "1,2,4,8", "t");
    resume.push("--json");
    let out = bench(dir.path(), &resume);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (report["already_done"].as_u64(), report["ran"].as_u64()),
        (Some(2), Some(2)),
        "{report}"
    );
    assert!(stderr.contains("journal.jsonl.torn"), "{stderr}");
    // Every line reads as a record (the helper parses each), one per batch size.
    let mut labels: Vec<String> = journal(dir.path(), "t").iter().map(label).collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            "dyn/fp32/b1/tract-cpu",
            "dyn/fp32/b2/tract-cpu",
            "dyn/fp32/b4/tract-cpu",
            "dyn/fp32/b8/tract-cpu"
        ]
    );
    let kept = std::fs::read(dir.path().join("results/t/journal.jsonl.torn")).unwrap();
    assert_eq!(kept, [torn_line, b"\n"].concat());
}

/// Flags that cannot run (a board that is not there, a cell not in the plan) are refused before
/// the results folder is made: nothing is left behind.
#[test]
fn refused_flags_leave_no_results_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let model = dynamic.to_str().unwrap();
    let mut devices = small_matrix(model, "1", "d");
    devices.extend(["--devices", "7"]);
    let out = bench(dir.path(), &devices);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("there is no GPU 7") || stderr.contains("NVML is not readable"),
        "{stderr}"
    );
    assert_clean_error(&out, 1, &["--devices"]);
    let mut cell = small_matrix(model, "1", "d");
    cell.extend(["--cell", "dyn/fp32/b9/tract-cpu"]);
    assert_clean_error(&bench(dir.path(), &cell), 1, &["no cell", "b9"]);
    // Values every cell would fail on.
    for (flags, needles) in [
        (
            &["--cell-timeout", "0"][..],
            &["cell-timeout", "more than 0"][..],
        ),
        (
            &["--compare", "--compare-samples", "0"],
            &["compare-samples"],
        ),
        (
            &["--dataset", ".", "--masks", "nope"],
            &["masks nope", "no such folder"],
        ),
        (
            &["--dataset", ".", "--coco", "nope.json"],
            &["coco nope.json"],
        ),
        (
            &["--precisions", "int8", "--calib-data", "nope"],
            &["calib-data nope"],
        ),
        (&["--tensorrt-dir", "nope"], &["tensorrt-dir nope"]),
    ] {
        let mut args = small_matrix(model, "1", "d");
        args.extend(flags);
        assert_clean_error(&bench(dir.path(), &args), 2, needles);
    }
    assert!(
        !dir.path().join("results").exists(),
        "{:?}",
        support::files(&dir.path().join("results"))
    );
}

/// A cell whose log cannot be written (a full disk) is still recorded with its own error line.
#[test]
fn a_cell_whose_log_cannot_be_written_keeps_its_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, fixed) = models(dir.path());
    let matrix = small_matrix(fixed.to_str().unwrap(), "2", "f");
    assert!(bench(dir.path(), &matrix).status.success());
    let first = &journal(dir.path(), "f")[0];
    assert_eq!(first["failure"]["kind"], "batch", "{first}");
    let log = dir
        .path()
        .join("results/f")
        .join(first["failure"]["log"].as_str().unwrap());
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink("/dev/full", &log).unwrap();
    let again = [&matrix[..], &["--retry-failed"]].concat();
    assert!(bench(dir.path(), &again).status.success());
    let lines = journal(dir.path(), "f");
    let failure = &lines.last().unwrap()["failure"];
    assert_eq!(lines.len(), 2);
    assert_eq!(failure["kind"], "batch", "{failure}");
    assert_eq!(failure["reason"], first["failure"]["reason"], "{failure}");
    let tail = failure["stderr_tail"].as_str().unwrap();
    assert!(tail.contains("log could not be written"), "{tail}");
}

/// What `bench` prints going nowhere (a full disk under stdout) is one error line and exit 1.
#[test]
fn a_full_stdout_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let mut args = vec!["bench"];
    args.extend(small_matrix(dynamic.to_str().unwrap(), "1", "o"));
    for extra in [&["--print-cells"][..], &[]] {
        let out = Command::new(env!("CARGO_BIN_EXE_trtkit"))
            .current_dir(dir.path())
            .args(&args)
            .args(QUICK)
            .args(extra)
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_clean_error(
            &out,
            1,
            &["cannot write to standard output", "No space left"],
        );
    }
}

/// The output of `child` once it ends, or a failure naming `what` when it still runs after
/// `secs` seconds (then it is killed).
fn output_within(mut child: Child, secs: u64, what: &str) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{what} still runs after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A run killed when the test ends, passed or failed.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `bench` in `dir` with `args`, its stdout and stderr kept.
fn spawn_piped(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .current_dir(dir)
        .arg("bench")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// While `bench --cell` measures a cell, a second run of that cell is refused in one line that
/// names it, and so is a whole run of the folder; a run of another cell of the folder starts
/// beside it (the tasks of a job array).
#[test]
fn a_cell_run_keeps_its_cell_to_itself_and_shares_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (dynamic, _) = models(dir.path());
    let mut matrix = small_matrix(dynamic.to_str().unwrap(), "1,2", "c");
    matrix.extend(["--iterations", "100000000", "--cell-timeout", "300"]);
    let cell = |label: &'static str| [&matrix[..], &["--cell", label]].concat();
    let cells = "results/c/cells/";
    let first = Killed(spawn_bench(
        dir.path(),
        false,
        &cell("dyn/fp32/b1/tract-cpu"),
    ));
    wait_for("the cell's process", || cell_pids(cells).len() == 1);

    let again = spawn_piped(dir.path(), &cell("dyn/fp32/b1/tract-cpu"));
    let again = output_within(again, 60, "a second run of the cell");
    assert_clean_error(
        &again,
        1,
        &[
            ".lock",
            "another bench run is measuring cell dyn/fp32/b1/tract-cpu",
        ],
    );
    let whole = output_within(spawn_piped(dir.path(), &matrix), 60, "a whole run");
    assert_clean_error(&whole, 1, &["bench.lock", "another bench"]);

    let mut other = Killed(spawn_bench(
        dir.path(),
        false,
        &cell("dyn/fp32/b2/tract-cpu"),
    ));
    let start = Instant::now();
    while cell_pids(cells).len() < 2 {
        let ended = other.0.try_wait().unwrap();
        assert!(ended.is_none(), "the run of another cell ended: {ended:?}");
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "waited too long for the other cell's process"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop((first, other));
    let start = Instant::now();
    while !cell_pids(cells).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a cell outlived its bench: {:?}",
            cell_pids(cells)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
