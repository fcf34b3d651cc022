//! Peer suite: every case of ONNX's own backend test data that ships inputs and expected
//! outputs (`test_data_set_*/input_*.pb`, `output_*.pb`) runs on each reference backend and is
//! compared with numpy `isclose` (rtol 1e-3, atol 1e-5, NaN == NaN). The floors below are the
//! counts measured when the test was written; a regression lowers the count and fails.
//!
//! Needs `scripts/fetch-onnx-test-data.sh` (CI runs it first); the ort case needs the
//! `onnxruntime` Python package (CI installs it) or ORT_DYLIB_PATH.

mod support;

use std::path::{Path, PathBuf};
use trtkit::backend::open;
use trtkit::backend::select::{BackendKind, BackendOptions};
use trtkit::data::proto;
use trtkit::metrics::closeness::Tolerance;
use trtkit::metrics::compare::compare_outputs;
use trtkit::onnx::OnnxModel;
use trtkit::tensor::HostTensor;

/// Cases with inputs and expected outputs in the pinned onnx wheel's test data.
const CASES: usize = 140;
/// Cases tract passes (measured).
const TRACT_PASSES: usize = 117;
/// Cases ONNX Runtime passes (measured).
const ORT_PASSES: usize = 98;

fn cases(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.join("model.onnx").is_file() && path.join("test_data_set_0").is_dir() {
                out.push(path);
            } else {
                cases(&path, out);
            }
        }
    }
}

fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            let n = name
                .strip_prefix(prefix)?
                .strip_suffix(".pb")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// Runs one case; `Err` carries the reason it fails.
fn run_case(case: &Path, kind: BackendKind) -> Result<(), String> {
    let model = OnnxModel::load(&case.join("model.onnx")).map_err(|e| format!("load: {e:#}"))?;
    let options = BackendOptions {
        kind,
        threads: Some(1),
        ..Default::default()
    };
    let mut backend = open(&model, &options).map_err(|e| format!("prepare: {e:#}"))?;
    let mut sets: Vec<PathBuf> = std::fs::read_dir(case)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    let tol = Tolerance {
        rtol: 1e-3,
        atol: 1e-5,
        equal_nan: true,
    };
    for set in sets {
        let mut inputs: Vec<HostTensor> = numbered(&set, "input_")
            .iter()
            .map(|p| proto::load(p))
            .collect::<anyhow::Result<_>>()
            .map_err(|e| format!("inputs: {e:#}"))?;
        for (t, spec) in inputs.iter_mut().zip(backend.inputs()) {
            t.name = spec.name.clone();
        }
        let mut expected: Vec<HostTensor> = numbered(&set, "output_")
            .iter()
            .map(|p| proto::load(p))
            .collect::<anyhow::Result<_>>()
            .map_err(|e| format!("expected outputs: {e:#}"))?;
        let out = backend.run(&inputs).map_err(|e| format!("run: {e:#}"))?;
        if out.outputs.len() != expected.len() {
            return Err(format!(
                "{} outputs, expected {}",
                out.outputs.len(),
                expected.len()
            ));
        }
        for (got, want) in out.outputs.iter().zip(expected.iter_mut()) {
            want.name = got.name.clone();
            let c = compare_outputs(
                std::slice::from_ref(got),
                std::slice::from_ref(want),
                &tol,
                0,
            )
            .map_err(|e| format!("{e:#}"))?;
            let eq = c[0].closeness.equal_pct;
            if eq < 100.0 {
                return Err(format!(
                    "output '{}': {eq:.2}% close, max abs err {:.3e}",
                    got.name, c[0].closeness.max_abs_err
                ));
            }
        }
    }
    Ok(())
}

fn suite(kind: BackendKind, floor: usize) {
    let root = support::onnx_test_data();
    assert!(
        root.is_dir(),
        "{} is missing: run scripts/fetch-onnx-test-data.sh first",
        root.display()
    );
    let mut all = Vec::new();
    cases(&root, &mut all);
    all.sort();
    assert_eq!(all.len(), CASES, "cases under {}", root.display());
    let mut passed = 0;
    for case in &all {
        let outcome = std::panic::catch_unwind(|| run_case(case, kind))
            .unwrap_or_else(|_| Err("panicked".into()));
        match outcome {
            Ok(()) => passed += 1,
            Err(reason) => {
                let name = case.strip_prefix(&root).unwrap_or(case).display();
                let line = reason.replace('\n', " ");
                eprintln!("FAIL {kind:?} {name}: {}", &line[..line.len().min(300)]);
            }
        }
    }
    eprintln!("{kind:?}: {passed}/{} cases pass", all.len());
    assert!(
        passed >= floor,
        "{kind:?}: {passed} cases pass, at least {floor} did before"
    );
}

#[test]
fn tract_passes_the_peer_suite() {
    suite(BackendKind::Tract, TRACT_PASSES);
}

#[test]
fn ort_passes_the_peer_suite() {
    suite(BackendKind::Ort, ORT_PASSES);
}
