//! Entry points for fuzzing: each takes any bytes as one kind of file trtkit reads from others
//! and runs the code that reads it, as the commands do. An error is the right answer to bad
//! bytes; a panic, an abort or an allocation past the decode budget is a bug. The fuzzing loop
//! itself is `tests/fuzz.rs`.

use crate::onnx::OnnxModel;
use std::path::Path;

/// One fuzz target: its name (the folder of its corpus) and what it runs.
pub struct Target {
    /// The target's name, `onnx`, `npz`, ….
    pub name: &'static str,
    /// Reads one input.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "onnx",
        run: onnx_model,
    },
    Target {
        name: "onnx_fp16",
        run: onnx_fp16,
    },
    Target {
        name: "onnx_transformer_fusion",
        run: onnx_transformer_fusion,
    },
    Target {
        name: "npz",
        run: npz_archive,
    },
    Target {
        name: "npy",
        run: npy_array,
    },
    Target {
        name: "image",
        run: image,
    },
    Target {
        name: "calibration_cache",
        run: calibration_cache,
    },
    Target {
        name: "bench_journal",
        run: bench_journal,
    },
];

/// A model file: decoded with its large weights deferred, checked (initializer sizes, external
/// data, graph structure) and summarised as `inspect` does.
pub(crate) fn onnx_model(bytes: &[u8]) {
    // A folder that does not exist: external data is refused, never read from elsewhere.
    let path = Path::new("/nonexistent-trtkit-fuzz/model.onnx");
    if let Ok((model, _)) = OnnxModel::from_bytes_deferring(path, bytes) {
        let _ = crate::onnx::graph_check::check_graph_structure(model.graph());
        let _ = crate::onnx::summary::summarize(&model, true);
    }
}

/// A model file rewritten to FP16, as `quantize --fp16` does once the model is read and
/// checked.
pub fn onnx_fp16(bytes: &[u8]) {
    use crate::onnx::rewrite::pass::Pass;
    let path = Path::new("/nonexistent-trtkit-fuzz/model.onnx");
    if let Ok(model) = OnnxModel::from_bytes(path, bytes) {
        if crate::onnx::graph_check::check_graph_structure(model.graph()).is_ok() {
            let _ = crate::onnx::rewrite::fp16::Fp16::default().run(model);
        }
    }
}

/// A model file with its transformer blocks fused, as ONNX Runtime backends open it (the float16
/// blocks too, as the CUDA provider's do).
pub fn onnx_transformer_fusion(bytes: &[u8]) {
    use crate::onnx::rewrite::pass::Pass;
    use crate::onnx::rewrite::transformer_fusion::TransformerFusion;
    let path = Path::new("/nonexistent-trtkit-fuzz/model.onnx");
    if let Ok(model) = OnnxModel::from_bytes(path, bytes) {
        if crate::onnx::graph_check::check_graph_structure(model.graph()).is_ok() {
            let _ = TransformerFusion { float16: true }.run(model);
        }
    }
}

/// An `.npz` given to `compare --inputs` or `calibrate --calib-data`.
pub(crate) fn npz_archive(bytes: &[u8]) {
    let _ = crate::data::npz::decode(bytes, "fuzz.npz");
}

/// An `.npy` given the same way.
pub(crate) fn npy_array(bytes: &[u8]) {
    let _ = crate::data::npy::decode("x", bytes, "fuzz.npy");
}

/// An image of a dataset folder: its size from the header, then decoded and preprocessed to
/// a 224×224 ImageNet crop, as `validate` and `calibrate` read it.
pub fn image(bytes: &[u8]) {
    let _ = crate::data::image_size::size_of(&mut std::io::Cursor::new(bytes));
    let pre = crate::data::preprocess::Preprocess::imagenet();
    let mut out = vec![0f32; pre.elements()];
    let _ = pre.apply_encoded(bytes, &mut out);
}

/// A calibration cache handed over with `--calibration-cache`.
pub fn calibration_cache(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = crate::calibration::cache::CalibrationTable::parse(text);
    }
}

/// A bench journal given to `report`: its lines read into records, then the latest of each
/// cell and the cells done, as the report and a resumed run ask.
pub fn bench_journal(bytes: &[u8]) {
    let mut journal = crate::bench::journal::Journal::default();
    journal.read_text(Path::new("journal.jsonl"), &String::from_utf8_lossy(bytes));
    let _ = journal.latest();
    let _ = journal.done(true);
}
