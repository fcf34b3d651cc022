//! `trtkit inspect` on good models and on everything that is not one.

mod support;

use support::{assert_clean_error, save, trtkit};
use trtkit::onnx::pb::tensor_proto::DataLocation;
use trtkit::onnx::pb::StringStringEntryProto;
use trtkit::onnx::test_models;

#[test]
fn inspect_prints_io_ops_and_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let path = save(dir.path(), "classifier.onnx", test_models::classifier(None));
    let out = trtkit(&["inspect", path.to_str().unwrap(), "--layers"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("batch×3×16×16"), "{text}");
    assert!(text.contains("batch×10"), "{text}");
    assert!(text.contains("5,388 in 9 initializers"), "{text}");
    // MACs by hand: 8×16×16 conv outputs × 3×3×3, then 512 × 10 in the Gemm.
    assert!(
        text.contains("conv_0  Conv  input, conv.weight, conv.bias → conv_out  [55,296 MACs]"),
        "{text}"
    );
    assert!(
        text.contains("compute     60,416 MACs per sample (120.83 kFLOPs): Conv 91.5%, Gemm 8.5%"),
        "{text}"
    );
    let json = trtkit(&["inspect", path.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["macs"]["total"], 55_296 + 5_120);
    assert_eq!(v["macs"]["nodes"][1]["op"], "Gemm");
}

#[test]
fn inspect_json_is_machine_readable() {
    let dir = tempfile::tempdir().unwrap();
    let path = save(dir.path(), "two.onnx", test_models::two_input(Some(2)));
    let out = trtkit(&["inspect", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["inputs"].as_array().unwrap().len(), 2);
    assert_eq!(v["inputs"][1]["name"], "b");
    assert_eq!(v["inputs"][1]["dims"], serde_json::json!([2, 4]));
    assert_eq!(v["node_count"], 3);
    assert_eq!(v["opsets"][0]["version"], 17);
}

/// The classifier with `fc.weight` moved to `weights.bin` beside the model.
fn write_external_model(dir: &std::path::Path, file_len: Option<usize>) -> std::path::PathBuf {
    let mut proto = test_models::classifier(Some(1));
    let graph = proto.graph.as_mut().unwrap();
    let w = graph
        .initializer
        .iter_mut()
        .find(|t| t.name == "fc.weight")
        .unwrap();
    let mut data = std::mem::take(&mut w.raw_data);
    w.data_location = Some(DataLocation::External as i32);
    w.external_data = vec![StringStringEntryProto {
        key: "location".into(),
        value: "weights.bin".into(),
    }];
    if let Some(len) = file_len {
        data.truncate(len);
        std::fs::write(dir.join("weights.bin"), &data).unwrap();
    }
    save(dir, "ext.onnx", proto)
}

#[test]
fn external_data_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_external_model(dir.path(), Some(usize::MAX));
    let out = trtkit(&["inspect", path.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["external_weight_bytes"], 10 * 512 * 4);
    assert_eq!(v["largest_initializers"][0]["external"], true);
}

#[test]
fn missing_external_data_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_external_model(dir.path(), None);
    let out = trtkit(&["inspect", path.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &["ext.onnx", "fc.weight", "weights.bin", "missing"],
    );
}

#[test]
fn short_external_data_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_external_model(dir.path(), Some(100));
    let out = trtkit(&["inspect", path.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &["ext.onnx", "weights.bin", "too short", "20480 bytes"],
    );
}

#[test]
fn an_initializer_whose_data_does_not_fill_its_shape_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut proto = test_models::classifier(Some(1));
    let graph = proto.graph.as_mut().unwrap();
    let w = graph
        .initializer
        .iter_mut()
        .find(|t| t.name == "fc.weight")
        .unwrap();
    w.dims = vec![2_000_000_000];
    w.raw_data = vec![0; 128];
    let path = save(dir.path(), "claims.onnx", proto);
    let out = trtkit(&["inspect", path.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &[
            "claims.onnx",
            "'fc.weight'",
            "8000000000 bytes",
            "holds 128",
        ],
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn an_external_length_that_does_not_fill_the_shape_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut proto = test_models::classifier(Some(1));
    let graph = proto.graph.as_mut().unwrap();
    let w = graph
        .initializer
        .iter_mut()
        .find(|t| t.name == "fc.weight")
        .unwrap();
    let data = std::mem::take(&mut w.raw_data);
    w.data_location = Some(DataLocation::External as i32);
    // The model says the data is 128 bytes long, and the file holds them; the shape needs more.
    w.external_data = [("location", "weights.bin"), ("length", "128")]
        .map(|(key, value)| StringStringEntryProto {
            key: key.into(),
            value: value.into(),
        })
        .to_vec();
    std::fs::write(dir.path().join("weights.bin"), &data[..128]).unwrap();
    let path = save(dir.path(), "ext.onnx", proto);
    let out = trtkit(&["inspect", path.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &["ext.onnx", "'fc.weight'", "20480 bytes", "length is 128"],
    );
}

#[test]
fn bad_paths_and_foreign_files_are_clean_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = trtkit::onnx::OnnxModel::from_proto(test_models::classifier(None), "x").to_bytes();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.onnx", vec![], "empty"),
        (
            "truncated.onnx",
            model[..model.len() / 2].to_vec(),
            "truncated",
        ),
        (
            "random.onnx",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
            "not a valid ONNX model",
        ),
        (
            "image.png",
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".to_vec(),
            "PNG image",
        ),
    ];
    for (name, bytes, needle) in cases {
        let path = d.join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = trtkit(&["inspect", path.to_str().unwrap()]);
        assert_clean_error(&out, 1, &[name, needle]);
    }
    // An engine (recognised by its magic, whatever its name) is described, not refused.
    let engine = d.join("model.onnx");
    std::fs::write(
        &engine,
        b"ftrt\x00\x00\x00\x00\xe8\x00\x00\x00rest of an engine",
    )
    .unwrap();
    let out = trtkit(&["inspect", engine.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("flavour     TensorRT\n") && text.contains("no sidecar"),
        "{text}"
    );
    let out = trtkit(&["inspect", d.join("nope.onnx").to_str().unwrap()]);
    assert_clean_error(&out, 1, &["nope.onnx", "no such file"]);
    let out = trtkit(&["inspect", d.to_str().unwrap()]);
    assert_clean_error(&out, 1, &["is a directory"]);
}

#[test]
fn usage_errors_exit_with_2() {
    let out = trtkit(&["inspect"]);
    assert_eq!(out.status.code(), Some(2));
    let out = trtkit(&["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn doctor_runs_without_a_gpu_and_reports_json() {
    let out = trtkit(&["doctor", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let libs: Vec<&str> = v["tensorrt"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["library"].as_str().unwrap())
        .collect();
    assert_eq!(libs, ["libtensorrt_rtx", "libnvinfer", "libnvonnxparser"]);
    assert_eq!(v["tensorrt"][0]["flavour"], "tensor-rt-rtx");
    // Whatever the machine, the GPU list and the driver flag must agree.
    if v["cuda"]["driver_found"] == false {
        assert!(v["cuda"]["gpus"].as_array().unwrap().is_empty());
        let text = trtkit(&["doctor"]);
        assert!(String::from_utf8_lossy(&text.stdout).contains("no usable NVIDIA GPU"));
    }
}

/// `doctor --tensorrt-flavour` prints one word for GPU 0 and exits 0, `none` without a GPU;
/// `doctor --json` says which flavour this binary loads and what each GPU needs.
#[test]
fn doctor_names_the_tensorrt_flavour_for_gpu_0() {
    let out = trtkit(&["doctor", "--tensorrt-flavour"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let word = String::from_utf8(out.stdout).unwrap();
    let json = trtkit(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let binary = if cfg!(feature = "tensorrt") {
        "tensorrt"
    } else {
        "tensorrt-rtx"
    };
    assert_eq!(v["tensorrt_flavour"]["binary"], binary);
    let gpus = v["tensorrt_flavour"]["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), v["cuda"]["gpus"].as_array().unwrap().len());
    match gpus.first() {
        None => assert_eq!(word, "none\n"),
        Some(g) => assert_eq!(word.trim_end(), g["needs"].as_str().unwrap()),
    }
    let text = String::from_utf8(trtkit(&["doctor"]).stdout).unwrap();
    assert!(text.contains("flavour      this trtkit loads "), "{text}");
    for refused in [
        ["--tensorrt-flavour", "--json"],
        ["--tensorrt-flavour", "--check"],
    ] {
        let out = trtkit(&["doctor", refused[0], refused[1]]);
        assert_eq!(out.status.code(), Some(2), "{refused:?}");
    }
}

/// `doctor` says whether the JPEG decoder has its SIMD code, and it matches this machine: the
/// tests are built here, so with `nasm` installed (as `.ci/run` ensures) the decoder has it,
/// and without `nasm` it must not claim it.
#[test]
fn doctor_says_whether_the_jpeg_decoder_has_simd() {
    let out = trtkit(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nasm = std::process::Command::new("nasm")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    assert_eq!(v["jpeg_decoder"]["simd"], serde_json::Value::Bool(nasm));
    let text = String::from_utf8_lossy(&trtkit(&["doctor"]).stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("JPEG decoder"))
        .expect("a JPEG decoder line");
    if nasm {
        assert!(line.ends_with("with SIMD"), "{line}");
    } else {
        assert!(
            line.contains("WITHOUT SIMD") && line.contains("nasm"),
            "{line}"
        );
    }
}

/// On x86-64, tract's kernel cost model is trtkit's default (the AMD-measured one) unless
/// `TRACT_X86_KIND` is set, and `doctor` says which is in use and who chose it.
#[cfg(target_arch = "x86_64")]
#[test]
fn doctor_names_the_tract_kernel_model_and_who_chose_it() {
    let doctor = |kind: Option<&str>| {
        let mut cmd = assert_cmd::Command::cargo_bin("trtkit").unwrap();
        cmd.args(["doctor", "--json"]).env_remove("TRACT_X86_KIND");
        if let Some(k) = kind {
            cmd.env("TRACT_X86_KIND", k);
        }
        let out = cmd.output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["tract_kernels"]["model"].clone(),
            v["tract_kernels"]["source"].clone(),
        )
    };
    assert_eq!(doctor(None), ("amd".into(), "trtkit".into()));
    assert_eq!(
        doctor(Some("intel")),
        ("intel".into(), "TRACT_X86_KIND".into())
    );
}

/// A report that cannot be written to stdout (a full disk) is one error line and exit 1.
#[test]
fn a_full_stdout_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = save(dir.path(), "classifier.onnx", test_models::classifier(None));
    for flag in ["--layers", "--json"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_trtkit"))
            .args(["inspect", path.to_str().unwrap(), flag])
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_clean_error(&out, 1, &["cannot write to standard output"]);
    }
}
