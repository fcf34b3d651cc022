//! Every model in ONNX's own backend test data loads and summarizes.
//!
//! Needs `scripts/fetch-onnx-test-data.sh` (CI runs it first).

mod support;

use support::models_under;

use trtkit::onnx::summary::summarize;
use trtkit::onnx::OnnxModel;
use trtkit::report::inspect::render;

/// Models in the pinned onnx wheel's simple, pytorch-converted, pytorch-operator and light suites.
const PEER_MODELS: usize = 149;

#[test]
fn every_peer_model_loads_and_summarizes() {
    let root = support::onnx_test_data();
    assert!(
        root.is_dir(),
        "{} is missing: run scripts/fetch-onnx-test-data.sh first",
        root.display()
    );
    let mut paths = Vec::new();
    models_under(&root, &mut paths);
    paths.sort();
    let mut handled = 0;
    for path in &paths {
        let model = OnnxModel::load(path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        let summary = summarize(&model, true);
        assert!(!summary.outputs.is_empty(), "{}", path.display());
        let text = render(&summary);
        assert!(text.contains("opsets"), "{}", path.display());
        handled += 1;
    }
    assert_eq!(
        handled,
        PEER_MODELS,
        "models handled under {}",
        root.display()
    );
}
