//! `quantize --weight-rounding adaptive`: each rounded layer's output error on its captured
//! inputs is no higher than nearest rounding's, the written model holds the chosen values as
//! ordinary int8 initializers behind DequantizeLinear, and the option is part of the kept
//! search's key.

mod support;

use serde_json::Value;
use std::path::Path;
use trtkit::onnx::OnnxModel;

/// `quantize … --int8` on 24 synthetic samples, parsed.
fn quantize(model: &Path, cache: &str, args: &[&str]) -> Value {
    let eval = ["--eval-data", "synthetic:5", "--eval-samples", "24"];
    support::int8_json(model, cache, &[&eval[..], args].concat())
}

/// The int8 values of every weight the model dequantizes, by initializer name.
fn int8_weights(path: &Path) -> Vec<(String, Vec<i8>)> {
    let m = OnnxModel::load(path).unwrap();
    let g = m.graph();
    g.node
        .iter()
        .filter(|n| n.op_type == "DequantizeLinear")
        .filter_map(|n| g.initializer.iter().find(|t| t.name == n.input[0]))
        .map(|t| {
            (
                t.name.clone(),
                t.raw_data.iter().map(|&b| b as i8).collect(),
            )
        })
        .collect()
}

#[test]
fn adaptive_rounding_never_raises_a_layers_error_and_writes_plain_int8_weights() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = support::scaled_model_and_cache(dir.path());
    let (near, adapt) = (dir.path().join("near.onnx"), dir.path().join("adapt.onnx"));
    let nearest = quantize(&model, &cache, &["-o", near.to_str().unwrap()]);
    assert!(nearest.get("rounding").is_none(), "{nearest:#}");
    let adaptive = quantize(
        &model,
        &cache,
        &[
            "--weight-rounding",
            "adaptive",
            "-o",
            adapt.to_str().unwrap(),
        ],
    );
    assert_eq!(adaptive["weight_rounding"], "adaptive");
    let r = &adaptive["rounding"];
    let layers = r["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 3, "the three convs: {r:#}");
    // The classifier's Gemm sees one input row a sample: too few to round it from.
    let kept = &r["kept_nearest"][0];
    assert_eq!(kept["op"], "Gemm", "{r:#}");
    assert!(
        kept["reason"].as_str().unwrap().contains("too few"),
        "{r:#}"
    );
    for l in layers {
        let (n, a) = (
            l["nearest_error"].as_f64().unwrap(),
            l["adaptive_error"].as_f64().unwrap(),
        );
        assert!(a <= n, "{l:#}");
    }
    assert!(r["changed"].as_u64().unwrap() > 0, "{r:#}");
    assert!(
        r["mean_adaptive_error"].as_f64().unwrap() < r["mean_nearest_error"].as_f64().unwrap(),
        "{r:#}"
    );
    // The same int8 initializers, some values moved by one step, none by more.
    let (a, b) = (int8_weights(&near), int8_weights(&adapt));
    assert_eq!(a.len(), 4);
    assert_eq!(
        a.iter().map(|w| &w.0).collect::<Vec<_>>(),
        b.iter().map(|w| &w.0).collect::<Vec<_>>()
    );
    let mut moved = 0;
    for ((_, x), (_, y)) in a.iter().zip(&b) {
        for (p, q) in x.iter().zip(y) {
            assert!((*p as i32 - *q as i32).abs() <= 1);
            moved += usize::from(p != q);
        }
    }
    assert_eq!(moved as u64, r["changed"].as_u64().unwrap());
}
