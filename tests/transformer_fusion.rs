//! The transformer fusion on small encoders made in code (2 layers, 4 heads, hidden 64): the
//! fused graph holds ONNX Runtime's fused operators, no node of the old blocks is left behind,
//! it loads in ONNX Runtime's CPU build and matches the unfused graph within 1e-4 at sequence
//! lengths 8, 32 and 77, with and without a padding mask; an attention pattern the fused
//! operator would not compute the same is left alone, and the report says why.
//!
//! Needs the `onnxruntime` Python package (CI installs it) or ORT_DYLIB_PATH.

mod support;

use std::collections::HashSet;
use support::{save, stdout_of_success, trtkit};
use trtkit::backend::open;
use trtkit::backend::select::{BackendKind, BackendOptions, TransformerFusionPolicy};
use trtkit::onnx::pb::ModelProto;
use trtkit::onnx::rewrite::pass::Pass;
use trtkit::onnx::rewrite::report::{PassReport, TransformerFusionReport};
use trtkit::onnx::rewrite::transformer_fusion::TransformerFusion;
use trtkit::onnx::test_models::{deterministic_weights, encoder, EncoderStyle, ENCODER_HIDDEN};
use trtkit::onnx::OnnxModel;
use trtkit::tensor::{HostTensor, TensorData};

const BATCH: usize = 2;

fn fused(proto: ModelProto) -> (OnnxModel, TransformerFusionReport) {
    let model = OnnxModel::from_proto(proto, "encoder.onnx");
    let (model, report) = TransformerFusion { float16: false }.run(model).unwrap();
    let PassReport::TransformerFusion(report) = report else {
        panic!("the pass reported {report:?}");
    };
    (model, report)
}

fn op_count(model: &OnnxModel, op: &str) -> usize {
    model
        .graph()
        .node
        .iter()
        .filter(|n| n.op_type == op)
        .count()
}

/// Every node input is made by a node, an initializer or a graph input, and every node's
/// output is read by a node or is a graph output.
fn assert_no_dangling(model: &OnnxModel) {
    let g = model.graph();
    let mut made: HashSet<&str> = g.input.iter().map(|i| i.name.as_str()).collect();
    made.extend(g.initializer.iter().map(|t| t.name.as_str()));
    let mut read: HashSet<&str> = g.output.iter().map(|o| o.name.as_str()).collect();
    for n in &g.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            assert!(
                made.contains(i.as_str()),
                "'{i}' read by {} before it is made",
                n.name
            );
            read.insert(i);
        }
        made.extend(n.output.iter().map(String::as_str));
    }
    for n in &g.node {
        for o in &n.output {
            assert!(
                read.contains(o.as_str()),
                "{}'s output '{o}' is read by nothing",
                n.name
            );
        }
    }
    for t in &g.initializer {
        assert!(
            read.contains(t.name.as_str()),
            "initializer '{}' is read by nothing",
            t.name
        );
    }
}

/// The encoder's inputs at `seq` tokens: hidden states, and a mask whose second sample has its
/// last third padded.
fn inputs(seq: usize, mask: bool) -> Vec<HostTensor> {
    let h = ENCODER_HIDDEN as usize;
    let hidden = deterministic_weights(seq as u64, BATCH * seq * h, 1.0);
    let mut tensors =
        vec![HostTensor::new("hidden", vec![BATCH, seq, h], TensorData::F32(hidden)).unwrap()];
    if mask {
        let valid = [seq, seq - seq / 3];
        let m: Vec<i64> = (0..BATCH * seq)
            .map(|i| (i % seq < valid[i / seq]) as i64)
            .collect();
        tensors
            .push(HostTensor::new("attention_mask", vec![BATCH, seq], TensorData::I64(m)).unwrap());
    }
    tensors
}

/// `model`'s output on ONNX Runtime's CPU build, the fusion on or off.
fn run_ort(model: &OnnxModel, inputs: &[HostTensor], fusion: TransformerFusionPolicy) -> Vec<f32> {
    let options = BackendOptions {
        kind: BackendKind::Ort,
        threads: Some(1),
        transformer_fusion: fusion,
        ..Default::default()
    };
    let mut backend = open(model, &options).unwrap();
    let out = backend.run(inputs).unwrap();
    // The first float output (a sentence encoder passes its token ids through first).
    out.outputs
        .iter()
        .find_map(|t| match &t.data {
            TensorData::F32(v) => Some(v.clone()),
            _ => None,
        })
        .expect("a float output")
}

/// `model`'s first float output on ONNX Runtime's CPU build, float16 computed as it computes
/// it (no emulation, no fusion of its own).
fn run_ort_as_is(model: &OnnxModel, inputs: &[HostTensor]) -> Vec<f32> {
    let options = BackendOptions {
        kind: BackendKind::Ort,
        threads: Some(1),
        transformer_fusion: TransformerFusionPolicy::Off,
        fp16_compute: trtkit::backend::select::Fp16Compute::Backend,
        ..Default::default()
    };
    let mut backend = open(model, &options).unwrap();
    let out = backend.run(inputs).unwrap();
    match &out.outputs[0].data {
        TensorData::F32(v) => v.clone(),
        other => panic!("output is {other:?}"),
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Fuses `style`'s encoder, checks its structure, and compares it with the unfused graph on
/// ONNX Runtime at every sequence length.
fn fuses_and_matches(style: EncoderStyle, skip_norms: usize) {
    let proto = encoder(style);
    let unfused = OnnxModel::from_proto(proto.clone(), "encoder.onnx");
    let (model, report) = fused(proto);
    assert_eq!(report.attention, 2, "{style:?}: {report:?}");
    assert_eq!(report.skip_layer_norms, skip_norms, "{style:?}: {report:?}");
    assert!(report.left_alone.is_empty(), "{report:?}");
    assert_eq!(op_count(&model, "Attention"), 2);
    for gone in ["Softmax", "Transpose", "Split"] {
        assert_eq!(op_count(&model, gone), 0, "{style:?}: a {gone} is left");
    }
    assert_eq!(op_count(&model, "SkipLayerNormalization"), skip_norms);
    assert_no_dangling(&model);
    for seq in [8, 32, 77] {
        let x = inputs(seq, style.mask);
        let want = run_ort(&unfused, &x, TransformerFusionPolicy::Off);
        // Opened as every command opens it: the backend fuses on the way in.
        let got = run_ort(&unfused, &x, TransformerFusionPolicy::On);
        let diff = max_abs_diff(&want, &got);
        assert!(diff < 1e-4, "{style:?} seq {seq}: max abs diff {diff}");
        // The pass's own graph runs the same.
        let direct = run_ort(&model, &x, TransformerFusionPolicy::Off);
        assert_eq!(got, direct, "{style:?} seq {seq}");
    }
}

#[test]
fn bert_style_post_norm_encoders_fuse_with_and_without_a_mask() {
    for mask in [true, false] {
        let style = EncoderStyle {
            mask,
            ..Default::default()
        };
        fuses_and_matches(style, 4);
    }
}

#[test]
fn packed_projections_and_a_scaled_query_fuse() {
    let style = EncoderStyle {
        mask: true,
        packed_qkv: true,
        scale_on_q: true,
        ..Default::default()
    };
    fuses_and_matches(style, 4);
}

#[test]
fn pre_norm_encoders_fuse_their_attention_and_keep_the_residual_stream() {
    // Each residual sum inside is read by the next residual add as well as by a LayerNorm, so
    // it stays; only the last layer's sum, which the final LayerNorm alone reads, fuses.
    let style = EncoderStyle {
        pre_norm: true,
        mask: true,
        ..Default::default()
    };
    fuses_and_matches(style, 1);
}

#[test]
fn a_per_head_scale_on_the_scores_is_left_alone_and_said() {
    let style = EncoderStyle {
        mask: true,
        per_head_scale: true,
        ..Default::default()
    };
    let proto = encoder(style);
    let nodes_before = proto.graph.as_ref().unwrap().node.len();
    let (model, report) = fused(proto);
    assert_eq!(report.attention, 0, "{report:?}");
    assert_eq!(report.left_alone.len(), 2, "{report:?}");
    assert_eq!(op_count(&model, "Softmax"), 2);
    assert_eq!(op_count(&model, "Attention"), 0);
    // The residual LayerNorms still fuse; the attention blocks keep every node.
    assert_eq!(report.skip_layer_norms, 4);
    assert_eq!(model.graph().node.len(), nodes_before - 4 * 2);
    let x = inputs(8, true);
    let want = run_ort(
        &OnnxModel::from_proto(encoder(style), "e.onnx"),
        &x,
        TransformerFusionPolicy::Off,
    );
    let got = run_ort(&model, &x, TransformerFusionPolicy::Off);
    assert!(max_abs_diff(&want, &got) < 1e-4);
}

#[test]
fn a_model_without_attention_is_unchanged() {
    let proto = trtkit::onnx::test_models::classifier(None);
    let (model, report) = fused(proto.clone());
    assert_eq!(report, TransformerFusionReport::default());
    assert_eq!(model.proto, proto);
}

/// Token ids and a mask at `seq` tokens for a BERT-style model's inputs (by name), the second
/// sample's last third padded.
fn token_inputs(model: &OnnxModel, seq: usize) -> Vec<HostTensor> {
    let valid = [seq, seq - seq / 3];
    let ids = deterministic_weights(seq as u64 + 7, BATCH * seq, 1.0);
    let mask = (0..BATCH * seq).map(|i| (i % seq < valid[i / seq]) as i64);
    let values = |name: &str| -> Vec<i64> {
        match name {
            "attention_mask" => mask.clone().collect(),
            "token_type_ids" => vec![0; BATCH * seq],
            _ => ids
                .iter()
                .map(|v| 100 + (v.abs() * 1000.0) as i64)
                .collect(),
        }
    };
    model
        .graph()
        .input
        .iter()
        .map(|i| {
            HostTensor::new(&i.name, vec![BATCH, seq], TensorData::I64(values(&i.name))).unwrap()
        })
        .collect()
}

#[test]
fn the_corpus_sentence_encoders_fuse_and_match() {
    let dir = std::env::var_os("TRTKIT_MODEL_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/model-corpus")
        });
    let path = dir.join("paraphrase-minilm-l3.onnx");
    if !path.is_file() {
        eprintln!(
            "skipped: {} is missing (scripts/fetch-model-corpus.sh)",
            path.display()
        );
        return;
    }
    let model = OnnxModel::load(&path).unwrap();
    let (fused_model, report) = TransformerFusion { float16: false }
        .run(model.clone())
        .unwrap();
    let PassReport::TransformerFusion(report) = report else {
        panic!("{report:?}");
    };
    // Three BERT layers exported by torch.onnx: each attention block and both residual
    // LayerNorms of each layer.
    assert_eq!(
        (report.attention, report.skip_layer_norms),
        (3, 6),
        "{report:?}"
    );
    assert_no_dangling(&fused_model);
    for seq in [8, 32, 77] {
        let x = token_inputs(&model, seq);
        let want = run_ort(&model, &x, TransformerFusionPolicy::Off);
        let got = run_ort(&model, &x, TransformerFusionPolicy::On);
        let diff = max_abs_diff(&want, &got);
        assert!(diff < 1e-4, "seq {seq}: max abs diff {diff}");
    }
}

/// `proto` with every LayerNorm reading its weights through an `Identity`, as TorchScript
/// exports share equal weights; after the FP16 rewrite a float32 LayerNorm then reads them
/// through a Cast of the float16 Identity.
fn norm_weights_through_identity(mut proto: ModelProto) -> ModelProto {
    let g = proto.graph.as_mut().unwrap();
    let mut identities = Vec::new();
    for n in g
        .node
        .iter_mut()
        .filter(|n| n.op_type == "LayerNormalization")
    {
        for input in n.input.iter_mut().skip(1) {
            let shared = format!("{input}.shared");
            identities.push(trtkit::onnx::pb::NodeProto {
                op_type: "Identity".into(),
                input: vec![input.clone()],
                output: vec![shared.clone()],
                ..Default::default()
            });
            *input = shared;
        }
    }
    g.node.splice(0..0, identities);
    proto
}

#[test]
fn the_fp16_rewrite_of_an_encoder_fuses_for_the_cuda_provider_only() {
    use trtkit::onnx::rewrite::fp16::Fp16;
    let style = EncoderStyle {
        mask: true,
        ..Default::default()
    };
    let model = OnnxModel::from_proto(norm_weights_through_identity(encoder(style)), "e.onnx");
    let (half, _) = Fp16::default().run(model).unwrap();
    // The rewrite keeps Softmax and LayerNormalization in float32 behind Casts; the fused
    // operators step over those Casts and compute in float16 (accumulating in float32).
    let (fused, report) = TransformerFusion { float16: true }
        .run(half.clone())
        .unwrap();
    let PassReport::TransformerFusion(report) = report else {
        panic!("{report:?}");
    };
    assert_eq!(
        (report.attention, report.skip_layer_norms),
        (2, 4),
        "{report:?}"
    );
    assert_eq!(
        op_count(&fused, "Softmax") + op_count(&fused, "LayerNormalization"),
        0
    );
    assert_no_dangling(&fused);
    // ONNX Runtime's CPU build runs the float16 operators too (as it runs float16, not
    // emulated): the fused FP16 graph stays within cosine 0.9999 of the unfused FP32 graph.
    let reference = OnnxModel::from_proto(encoder(style), "encoder.onnx");
    for seq in [8, 77] {
        let x = inputs(seq, true);
        let want = run_ort(&reference, &x, TransformerFusionPolicy::Off);
        let got = run_ort_as_is(&fused, &x);
        let cos = cosine(&want, &got);
        assert!(cos > 0.9999, "seq {seq}: cosine {cos}");
    }
    // ONNX Runtime's CPU build has float32 kernels for them only: nothing fuses for it, and
    // each block says why.
    let (_, report) = TransformerFusion { float16: false }.run(half).unwrap();
    let PassReport::TransformerFusion(report) = report else {
        panic!("{report:?}");
    };
    assert_eq!(
        (report.attention, report.skip_layer_norms),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(report.left_alone.len(), 2, "{report:?}");
}

/// The notes of `trtkit run` on `model` with `args` added.
fn run_notes(model: &std::path::Path, args: &[&str]) -> Vec<String> {
    let model = model.to_str().unwrap();
    let mut all = vec![
        "run",
        model,
        "--backend",
        "ort",
        "--dim",
        "seq=8",
        "--batch-size",
        "2",
    ];
    all.extend(["--warmup", "1", "--iterations", "2", "--json"]);
    all.extend(args);
    let out = stdout_of_success(&trtkit(&all));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn run_says_what_it_fused_and_off_runs_the_file_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let style = EncoderStyle {
        mask: true,
        ..Default::default()
    };
    let model = save(dir.path(), "encoder.onnx", encoder(style));
    let fusion_notes = |args: &[&str]| -> Vec<String> {
        let notes = run_notes(&model, args);
        notes
            .into_iter()
            .filter(|n| n.contains("transformer fusion"))
            .collect()
    };
    let on = fusion_notes(&[]);
    assert_eq!(on.len(), 1, "{on:?}");
    assert!(on[0].contains("2 attention block(s) fused"), "{on:?}");
    assert!(on[0].contains("4 residual LayerNorm(s)"), "{on:?}");
    assert!(fusion_notes(&["--transformer-fusion", "off"]).is_empty());
}
