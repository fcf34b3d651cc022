//! `trtkit report` on hand-written journals: the markdown tables' shape and failed cells, one CSV
//! row per cell, JSON, the HTML page (plots, escaping), merging two results folders, a torn last
//! line, and clean errors. With `TRTKIT_REPORT_DEMO=page.html` the realistic page is kept there
//! (what `scripts/screenshot_report.sh` looks at).

mod support;

use std::path::Path;
use support::{assert_clean_error, trtkit};
use trtkit::backend::select::Runtime as Target;
use trtkit::bench::key::CellKey;
use trtkit::bench::record::*;
use trtkit::metrics::setup::SetupTimes;
use trtkit::tensor::Precision;

/// A measured cell: `ms` per batch of latency-all and consistent figures around it.
fn ok(model: &str, target: Target, precision: Precision, batch: usize, ms: f64) -> CellRecord {
    let gpu = target.on_gpu();
    let latency = Latency {
        mean: ms,
        p50: ms * 0.98,
        p99: ms * 1.15,
        max: ms * 1.4,
    };
    let sps = batch as f64 * 1e3 / ms;
    let top1 = 76.1
        - match precision {
            Precision::Fp32 => 0.0,
            Precision::Fp16 => 0.05,
            Precision::Int8 => 0.9,
        };
    let watts = 120.0 + 3.0 * batch as f64;
    let monitor = (0..if gpu { 40 } else { 0 })
        .map(|i| MonitorSample {
            t_s: i as f64 * 0.05,
            power_w: Some(watts + (i as f64 * 0.7).sin() * 15.0),
            sm_util_pct: Some(if i < 3 {
                20.0 * i as f64
            } else {
                92.0 + (i % 5) as f64
            }),
            memory_used_mib: Some(800.0 + 30.0 * batch as f64 + i.min(5) as f64 * 10.0),
            sm_clock_mhz: Some(1980.0),
            mem_clock_mhz: Some(2619.0),
            temperature_c: Some(45.0 + i as f64 * 0.2),
        })
        .collect();
    let metrics = CellMetrics {
        backend: target.name().into(),
        timing: if gpu { "cuda-events" } else { "wall-clock" }.into(),
        iterations: 200,
        latency_all_ms: latency.clone(),
        latency_model_ms: gpu.then_some(Latency {
            mean: ms * 0.8,
            ..latency
        }),
        ms_per_sample: ms / batch as f64,
        samples_per_s: sps,
        first_iteration_ms: ms * 5.0,
        setup: Some(SetupTimes::new(
            if gpu { 1100.0 } else { 150.0 },
            gpu.then_some(200.0),
            ms * 5.0,
        )),
        gpu_memory: gpu.then(|| GpuMemory {
            before_mib: 600.0,
            peak_mib: 900.0 + 35.0 * batch as f64,
            method: "nvml".into(),
        }),
        host_rss_peak_mib: Some(310.0 + batch as f64),
        accuracy: Some(CellAccuracy {
            images: 1000,
            top1_pct: top1,
            top5_pct: 92.9,
            miou_pct: None,
            map_pct: None,
        }),
        closeness: Some(CellCloseness {
            reference: "tract-cpu fp32".into(),
            samples: 64,
            equal_pct: if precision == Precision::Fp32 {
                100.0
            } else {
                97.5
            },
            top1_agreement_pct: Some(if precision == Precision::Int8 {
                98.4
            } else {
                100.0
            }),
            max_abs_err: 1e-3,
            task_agreement_pct: None,
        }),
        artifact: Artifact {
            file: format!("{model}.onnx"),
            kind: "onnx".into(),
            bytes: 102_000_000,
            parameters: Some(25_557_032),
            layers: Some(122),
        },
        power: gpu.then(|| PowerSummary {
            samples: 40,
            rate_hz: 20.0,
            mean_w: Some(watts),
            max_w: Some(watts + 15.0),
            energy_per_sample_j: Some(watts / sps),
            samples_per_s_per_w: Some(sps / watts),
            sm_util_mean_pct: Some(90.0),
            sm_clock_mean_mhz: Some(1980.0),
            mem_clock_mean_mhz: Some(2619.0),
            temperature_max_c: Some(53.0),
        }),
        monitor,
        prepare_s: 1.0,
        work_s: 3.0,
        notes: vec![],
    };
    record(model, target, precision, batch, Some(metrics), None)
}

fn failed(
    model: &str,
    target: Target,
    precision: Precision,
    batch: usize,
    kind: FailureKind,
    reason: &str,
) -> CellRecord {
    let failure = CellFailure {
        kind,
        reason: reason.into(),
        exit_code: Some(1),
        signal: None,
        stderr_tail: String::new(),
        log: None,
    };
    record(model, target, precision, batch, None, Some(failure))
}

fn record(
    model: &str,
    target: Target,
    precision: Precision,
    batch: usize,
    metrics: Option<CellMetrics>,
    failure: Option<CellFailure>,
) -> CellRecord {
    let key = CellKey {
        model_sha256: trtkit::digest::sha256_hex16(model.as_bytes()).repeat(4),
        precision,
        batch,
        dims: Default::default(),
        target,
        trtkit_version: "0.1.0".into(),
        gpu: "NVIDIA H200".into(),
        settings: "s".into(),
    };
    CellRecord {
        id: key.id(),
        key,
        model: model.into(),
        model_path: format!("onnx/{model}.onnx"),
        status: if metrics.is_some() {
            Status::Ok
        } else {
            Status::Failed
        },
        metrics,
        failure,
        started_unix_s: 1.75e9,
        wall_s: 4.0,
        host: "h200".into(),
        device: None,
    }
}

/// Writes `records` as `dir/journal.jsonl`, then `tail` (a torn line, say).
fn write_journal(dir: &Path, records: &[CellRecord], tail: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let mut text: String = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    text += tail;
    std::fs::write(dir.join("journal.jsonl"), text).unwrap();
}

/// 2 targets × 2 precisions × 2 batches of `model`; trt fp16 at batch 8 ran out of memory.
fn small(model: &str) -> Vec<CellRecord> {
    let mut v = vec![];
    for t in [Target::Trt, Target::TractCpu] {
        for p in [Precision::Fp32, Precision::Fp16] {
            for b in [1, 8] {
                if (t, p, b) == (Target::Trt, Precision::Fp16, 8) {
                    v.push(failed(
                        model,
                        t,
                        p,
                        b,
                        FailureKind::Oom,
                        "CUDA out of memory allocating 3 GiB",
                    ));
                } else {
                    v.push(ok(
                        model,
                        t,
                        p,
                        b,
                        if t == Target::Trt { 0.5 } else { 20.0 } * b as f64,
                    ));
                }
            }
        }
    }
    v
}

fn stdout(args: &[&str]) -> String {
    let out = trtkit(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn markdown_csv_and_json_of_a_journal_with_a_torn_line() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("res");
    write_journal(&res, &small("resnet"), "{\"id\":\"abc\",\"key\":{");
    let r = res.to_str().unwrap();
    let out = trtkit(&["report", r, "--markdown"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("journal.jsonl:9"),
        "the torn line is warned about: {stderr}"
    );
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("## resnet"), "{md}");
    assert!(md.contains("**samples/s**\n\n| target | precision | batch 1 | batch 8 |\n| :--- | :--- | ---: | ---: |\n| trt | fp32 | 2000 | 2000 |\n| trt | fp16 | 2000 | OOM |\n| tract-cpu | fp32 | 50.00 | 50.00 |"), "{md}");
    assert!(
        md.contains("- resnet trt fp16 batch 8: OOM (CUDA out of memory allocating 3 GiB)"),
        "{md}"
    );

    let csv = stdout(&["report", r, "--csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 8, "{csv}");
    assert!(lines[0]
        .starts_with("model,target,precision,batch,status,failure,reason,id,samples_per_s,"));
    assert!(
        csv.contains("resnet,trt,fp16,8,failed,OOM,CUDA out of memory allocating 3 GiB,"),
        "{csv}"
    );

    let json: serde_json::Value = serde_json::from_str(&stdout(&["report", r, "--json"])).unwrap();
    assert_eq!(json["cells"].as_array().unwrap().len(), 8);
    assert_eq!(
        (json["ok"].as_u64(), json["failed"].as_u64()),
        (Some(7), Some(1))
    );
    assert_eq!(json["skipped"].as_array().unwrap().len(), 1);
}

#[test]
fn html_page_has_plots_escapes_names_and_merges_two_folders() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_journal(&a, &small("<img src=x>"), "");
    write_journal(&b, &small("mobilenet"), "");
    let page = dir.path().join("out/page.html");
    let text = stdout(&[
        "report",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(text.contains("16 cells: 14 ok, 2 failed"), "{text}");
    assert!(
        text.contains("model mobilenet") && text.contains("model <img src=x>"),
        "{text}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.matches("<svg").count() >= 7,
        "3 plots per model and the NVML panels"
    );
    assert!(
        html.contains("&lt;img src=x&gt;") && !html.contains("<img"),
        "escaped"
    );
    assert!(html.contains("title=\"CUDA out of memory allocating 3 GiB\">OOM</td>"));
}

#[test]
fn errors_name_the_path_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = empty.to_str().unwrap();
    assert_clean_error(&trtkit(&["report", e]), 1, &[e, "no journal"]);
    let missing = dir.path().join("missing");
    assert_clean_error(
        &trtkit(&["report", missing.to_str().unwrap()]),
        1,
        &["missing", "no such"],
    );
    write_journal(&empty, &[], "\n");
    assert_clean_error(&trtkit(&["report", e]), 1, &[e, "no cell records"]);
    write_journal(&empty, &small("m"), "");
    assert_clean_error(
        &trtkit(&["report", e, "--cell", "nope"]),
        1,
        &["--cell nope"],
    );
}

/// The realistic page: 2 models, batches 1–64, 3 targets × 3 precisions, NVML readings, a few
/// failures. Kept at `$TRTKIT_REPORT_DEMO` when set.
#[test]
fn realistic_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = vec![];
    for (model, scale) in [("resnet50", 1.0), ("vit_b_16", 3.5)] {
        for t in [Target::Trt, Target::TractCuda, Target::TractCpu] {
            for (p, speed) in [
                (Precision::Fp32, 1.0f64),
                (Precision::Fp16, 0.55),
                (Precision::Int8, 0.35),
            ] {
                for b in [1usize, 4, 16, 64] {
                    let base = match t {
                        Target::Trt => 0.9 + 0.09 * b as f64,
                        Target::TractCuda => 2.5 + 0.4 * b as f64,
                        _ => 11.0 * b as f64,
                    };
                    let ms = base
                        * scale
                        * if t == Target::TractCpu {
                            speed.sqrt()
                        } else {
                            speed
                        };
                    let r = match (model, t, p, b) {
                        ("vit_b_16", Target::Trt, Precision::Int8, 64) => {
                            failed(model, t, p, b, FailureKind::Oom, "out of memory")
                        }
                        (_, Target::TractCuda, Precision::Int8, _) => failed(
                            model,
                            t,
                            p,
                            b,
                            FailureKind::Parser,
                            "tract-cuda: DequantizeLinear is not supported",
                        ),
                        (_, Target::TractCpu, Precision::Fp16, _) => failed(
                            model,
                            t,
                            p,
                            b,
                            FailureKind::Error,
                            "expected F16 got F32 in Gemm",
                        ),
                        _ => ok(model, t, p, b, ms),
                    };
                    records.push(r);
                }
            }
        }
    }
    let res = dir.path().join("results/h200");
    write_journal(&res, &records, "");
    let page = dir.path().join("report.html");
    stdout(&[
        "report",
        res.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    if let Ok(keep) = std::env::var("TRTKIT_REPORT_DEMO") {
        std::fs::copy(&page, keep).unwrap();
    }
    assert!(std::fs::read_to_string(&page).unwrap().contains("<svg"));
}
