//! Every job's report reads back: the JSON a command prints deserializes into the library's
//! report type and serializes to the same JSON (what `bench` and `report` rely on).

mod support;

use serde::de::DeserializeOwned;
use serde::Serialize;
use support::{save, trtkit, write_jpeg};
use trtkit::onnx::test_models;

/// Runs trtkit with `args` (which ask for JSON), reads the report as `T`, and checks that
/// writing it again gives the same JSON.
fn round_trips<T: Serialize + DeserializeOwned>(args: &[&str]) -> T {
    let out = trtkit(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report: T = serde_json::from_value(printed.clone())
        .unwrap_or_else(|e| panic!("{args:?}: the report does not read back: {e}"));
    // Through text, as a script would read it (float32 fields print in their shortest form).
    let again: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    assert_eq!(again, printed, "{args:?}");
    report
}

#[test]
fn reports_of_the_model_jobs_round_trip() {
    use trtkit::jobs::compare::{CompareManyReport, CompareReport};
    use trtkit::jobs::run::RunReport;
    use trtkit::jobs::validate::ValidateReport;
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let m = model.to_str().unwrap();

    let run: RunReport = round_trips(&[
        "run",
        m,
        "--batch-size",
        "1,2",
        "--iterations",
        "2",
        "--warmup",
        "1",
        "--json",
    ]);
    assert_eq!(run.results.len(), 2);

    let compare: CompareReport = round_trips(&["compare", m, m, "--num-samples", "4", "--json"]);
    assert_eq!(compare.outputs[0].closeness.equal_pct, 100.0);
    let many: CompareManyReport =
        round_trips(&["compare", m, m, m, "--num-samples", "4", "--json"]);
    assert_eq!(many.comparisons.len(), 2);
    assert_eq!(many.comparisons[1].sides[0].label, "B");

    let val = dir.path().join("val");
    write_jpeg(&val.join("0_a/x.jpg"), 20, 20, [200, 10, 10], 1);
    write_jpeg(&val.join("1_b/y.jpg"), 20, 20, [10, 200, 10], 2);
    let validate: ValidateReport = round_trips(&[
        "validate",
        m,
        "--dataset",
        val.to_str().unwrap(),
        "--crop",
        "16",
        "--json",
    ]);
    assert_eq!(validate.images, 2);
}

#[test]
fn reports_of_the_model_file_jobs_round_trip() {
    use trtkit::jobs::calibrate::CalibrateReport;
    use trtkit::jobs::doctor::DoctorReport;
    use trtkit::jobs::inspect::InspectReport;
    use trtkit::jobs::quantize::QuantizeReport;
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let m = model.to_str().unwrap();
    let d = dir.path().to_str().unwrap();

    let inspected: InspectReport = round_trips(&["inspect", m, "--json"]);
    let InspectReport::Onnx(summary) = inspected else {
        panic!("an ONNX model reads back as an engine: {inspected:?}");
    };
    assert!(!summary.inputs.is_empty());
    // An engine (by its magic) reads back as one.
    let engine = dir.path().join("e.engine");
    std::fs::write(&engine, b"vtrt\x00\x00\x00\x00rest of an engine").unwrap();
    let inspected: InspectReport = round_trips(&["inspect", engine.to_str().unwrap(), "--json"]);
    assert!(
        matches!(&inspected, InspectReport::Engine(e) if e.sidecar.is_none()),
        "{inspected:?}"
    );
    let doctor: DoctorReport = round_trips(&["doctor", "--json"]);
    assert!(!doctor.backends.is_empty());
    let checked: trtkit::jobs::doctor::check::DoctorCheck =
        round_trips(&["doctor", "--check", "--json"]);
    assert_eq!(checked.doctor.backends, doctor.backends);

    let calibration: CalibrateReport = round_trips(&[
        "calibrate",
        m,
        "--calib-data",
        "synthetic:1",
        "--batch-size",
        "2",
        "--num-samples",
        "4",
        "--cache-dir",
        d,
        "--json",
    ]);
    let cache = calibration.caches[0].cache.clone();

    let fp16 = dir.path().join("c-fp16.onnx");
    let q: QuantizeReport = round_trips(&[
        "quantize",
        m,
        "--fp16",
        "-o",
        fp16.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(q.precision, "fp16");
    let int8 = dir.path().join("c-int8.onnx");
    let q: QuantizeReport = round_trips(&[
        "quantize",
        m,
        "--int8",
        "--calibration-cache",
        &cache,
        "-o",
        int8.to_str().unwrap(),
        "--json",
    ]);
    assert!(q.int8.quantized_activations.unwrap() > 0);
}

#[test]
fn the_build_report_round_trips() {
    use trtkit::jobs::build::BuildReport;
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let engines = dir.path().join("engines");
    let build: BuildReport = round_trips(&[
        "build",
        model.to_str().unwrap(),
        "--input-shape",
        "-1",
        "3",
        "16",
        "16",
        "--max-batch",
        "4",
        "--opt-batch",
        "2",
        "--engine-dir",
        engines.to_str().unwrap(),
        "--json",
    ]);
    assert!(!build.reused);
}

#[test]
fn the_bench_and_report_reports_round_trip() {
    use trtkit::bench::matrix::BenchReport;
    use trtkit::report::bench::JournalReport;
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", test_models::classifier(None));
    let results = dir.path().join("results");
    let bench: BenchReport = round_trips(&[
        "bench",
        "--models",
        model.to_str().unwrap(),
        "--precisions",
        "fp32",
        "--batch-sizes",
        "1",
        "--targets",
        "tract-cpu",
        "--warmup",
        "1",
        "--iterations",
        "2",
        "--results",
        results.to_str().unwrap(),
        "--name",
        "rt",
        "--json",
    ]);
    assert_eq!((bench.ran, bench.ok), (1, 1), "{:?}", bench.failures);
    let report: JournalReport =
        round_trips(&["report", results.join("rt").to_str().unwrap(), "--json"]);
    assert_eq!((report.ok, report.cells.len()), (1, 1));
}
