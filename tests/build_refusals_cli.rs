//! What `trtkit build` refuses before any work starts, each in one line with a non-zero exit
//! and nothing written: flag ranges that contradict themselves, `-o` with `--engine-dir`, and
//! graphs no ONNX model may have (a cycle, an output listed twice, a tensor written twice),
//! which `quantize` refuses the same way.
//!
//! Needs TensorRT-RTX (`python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`; CI installs
//! it) for the builds that are obeyed.

mod support;

use std::path::Path;
use std::process::Output;
use support::{assert_clean_error, files, save, stdout_of_success, trtkit_in};
use trtkit::onnx::pb::ModelProto;
use trtkit::onnx::test_models;

/// Runs `trtkit build` in `dir` with `args` (the TensorRT folder passed explicitly).
fn build_in(dir: &Path, args: &[&str]) -> Output {
    let all: Vec<&str> = std::iter::once("build")
        .chain(args.iter().copied())
        .collect();
    trtkit_in(dir, &all)
}

#[test]
fn flag_ranges_are_refused_before_any_work_as_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    save(d, "clf.onnx", test_models::classifier(None));
    let before = files(d);
    let shape = ["clf.onnx", "--input-shape", "-1", "3", "16", "16"];
    let shapes = |min: &'static str, opt: &'static str, max: &'static str| {
        vec![
            "clf.onnx",
            "--min-shapes",
            min,
            "--opt-shapes",
            opt,
            "--max-shapes",
            max,
        ]
    };
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            [&shape[..], &["--min-batch", "8", "--max-batch", "4"]].concat(),
            vec!["--min-batch", "min 8, max 4"],
        ),
        (
            [&shape[..], &["--min-batch", "100", "--max-batch", "4"]].concat(),
            vec!["--max-batch", "min 100, max 4"],
        ),
        (
            [&shape[..], &["--max-batch", "0"]].concat(),
            vec!["--max-batch", "max batch 0"],
        ),
        (
            [&shape[..], &["--opt-batch=-3"]].concat(),
            vec!["--opt-batch", "opt batch -3"],
        ),
        (
            [&shape[..], &["--opt-batch", "16", "--max-batch", "8"]].concat(),
            vec!["--opt-batch", "opt 16, max 8"],
        ),
        (
            shapes("input:8x3x16x16", "input:4x3x16x16", "input:16x3x16x16"),
            vec!["--min-shapes", "'input' axis 0: min 8, opt 4, max 16"],
        ),
        (
            shapes("input:1x3x16x16", "input:4x3x16", "input:16x3x16x16"),
            vec!["--opt-shapes", "ranks 4, 3 and 4"],
        ),
        (
            vec!["clf.onnx", "--max-shapes", "input:16x3x16x16"],
            vec!["--min-shapes", "input 'input': give all three"],
        ),
        (
            vec!["clf.onnx", "--dim", "seq=64:16:128"],
            vec!["--dim", "min ≤ opt ≤ max"],
        ),
        (
            vec!["clf.onnx", "--dim", "seq=0:16:128"],
            vec!["--dim", "'0' is not a size"],
        ),
    ];
    for (args, needles) in cases {
        let out = build_in(d, &args);
        assert_clean_error(&out, 2, &needles);
    }
    // Checked before the model is read: a model that does not exist is not reached.
    let out = build_in(d, &["missing.onnx", "--min-batch", "8", "--max-batch", "4"]);
    assert_clean_error(&out, 2, &["min 8, max 4"]);
    assert_eq!(
        files(d),
        before,
        "a refused build must leave nothing behind"
    );
}

#[test]
fn output_and_engine_dir_together_are_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    save(d, "clf.onnx", test_models::classifier(Some(1)));
    let before = files(d);
    let out = build_in(
        d,
        &["clf.onnx", "-o", "mine.engine", "--engine-dir", "keyed"],
    );
    assert_clean_error(
        &out,
        2,
        &["-o mine.engine", "--engine-dir keyed", "conflict"],
    );
    assert_eq!(files(d), before, "nothing may be written");
    // Each on its own is obeyed.
    stdout_of_success(&build_in(d, &["clf.onnx", "-o", "mine.engine"]));
    assert!(d.join("mine.engine").is_file());
    stdout_of_success(&build_in(d, &["clf.onnx", "--engine-dir", "keyed"]));
    assert!(files(&d.join("keyed"))
        .iter()
        .any(|f| f.ends_with(".engine")));
}

/// The test classifier with its first node and the node reading it made to read each other.
fn cyclic() -> ModelProto {
    let mut m = test_models::classifier(Some(1));
    let g = m.graph.as_mut().unwrap();
    let first_out = g.node[0].output[0].clone();
    let j = g
        .node
        .iter()
        .position(|n| n.input.contains(&first_out))
        .unwrap();
    g.node[0].name = "first".into();
    g.node[j].name = "second".into();
    g.node[0].input[0] = g.node[j].output[0].clone();
    m
}

/// The test classifier with its output listed twice.
fn output_twice() -> ModelProto {
    let mut m = test_models::classifier(Some(1));
    let g = m.graph.as_mut().unwrap();
    let out = g.output[0].clone();
    g.output.push(out);
    m
}

/// The test classifier with a second node writing the first node's output.
fn written_twice() -> ModelProto {
    let mut m = test_models::classifier(Some(1));
    let g = m.graph.as_mut().unwrap();
    let mut twin = g.node[0].clone();
    g.node[0].name = "one".into();
    twin.name = "two".into();
    g.node.insert(1, twin);
    m
}

#[test]
fn broken_graphs_are_refused_by_build_and_quantize_naming_the_fault() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let output_name = test_models::classifier(Some(1)).graph.unwrap().output[0]
        .name
        .clone();
    let first_out = test_models::classifier(Some(1)).graph.unwrap().node[0].output[0].clone();
    save(d, "cyclic.onnx", cyclic());
    save(d, "twice.onnx", output_twice());
    save(d, "twin.onnx", written_twice());
    let before = files(d);
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "cyclic.onnx",
            vec!["cycle".into(), "'first'".into(), "'second'".into()],
        ),
        (
            "twice.onnx",
            vec![format!("graph output '{output_name}' is listed twice")],
        ),
        (
            "twin.onnx",
            vec![
                format!("tensor '{first_out}' is written by two nodes"),
                "'one'".into(),
                "'two'".into(),
            ],
        ),
    ];
    for (model, needles) in &cases {
        let mut needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        needles.push(model);
        // One line: TensorRT's parser is never handed the graph (it prints its own lines).
        assert_clean_error(&build_in(d, &[model]), 1, &needles);
        let quantized = trtkit_in(d, &["quantize", model, "--fp16", "-o", "q.onnx"]);
        assert_clean_error(&quantized, 1, &needles);
        let stderr = String::from_utf8_lossy(&quantized.stderr);
        assert!(!stderr.contains("Loop detected"), "{stderr}");
    }
    assert_eq!(
        files(d),
        before,
        "a refused model must leave nothing behind"
    );
}
