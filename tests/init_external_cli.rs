//! `trtkit init` of a model with external data: the data files come into the workspace beside
//! the model's copy (or, with `--link`, are read beside the file the link leads to), so the
//! workspace's commands find them.

mod support;

use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, trtkit_in};
use trtkit::onnx::pb::tensor_proto::DataLocation;
use trtkit::onnx::pb::StringStringEntryProto;
use trtkit::onnx::test_models;

/// The classifier in `dir/model/ext.onnx` with `fc.weight` in `data/fc.bin` beside it.
fn external_classifier(dir: &Path) -> PathBuf {
    let mut proto = test_models::classifier(Some(1));
    let graph = proto.graph.as_mut().unwrap();
    let w = graph
        .initializer
        .iter_mut()
        .find(|t| t.name == "fc.weight")
        .unwrap();
    let data = std::mem::take(&mut w.raw_data);
    w.data_location = Some(DataLocation::External as i32);
    w.external_data = vec![StringStringEntryProto {
        key: "location".into(),
        value: "data/fc.bin".into(),
    }];
    let folder = dir.join("model");
    std::fs::create_dir_all(folder.join("data")).unwrap();
    std::fs::write(folder.join("data/fc.bin"), data).unwrap();
    save(&folder, "ext.onnx", proto)
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn init_copies_the_external_data_and_the_workspace_builds() {
    let dir = tempfile::tempdir().unwrap();
    let model = external_classifier(dir.path());
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let said = ok(&trtkit_in(&ws, &["init", model.to_str().unwrap()]));
    assert!(said.contains("data/fc.bin"), "{said}");
    let copied = std::fs::read(ws.join("onnx/data/fc.bin")).unwrap();
    assert_eq!(
        copied,
        std::fs::read(dir.path().join("model/data/fc.bin")).unwrap()
    );
    let built = ok(&trtkit_in(&ws, &["build", "--json"]));
    assert!(built.contains("engine"), "{built}");
}

#[test]
fn init_link_reads_the_data_beside_the_linked_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = external_classifier(dir.path());
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    ok(&trtkit_in(
        &ws,
        &["init", model.to_str().unwrap(), "--link"],
    ));
    assert!(!ws.join("onnx/data").exists());
    ok(&trtkit_in(&ws, &["inspect", "onnx/ext.onnx"]));
}

#[test]
fn init_refuses_data_that_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let model = external_classifier(dir.path());
    std::fs::remove_file(dir.path().join("model/data/fc.bin")).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = trtkit_in(&ws, &["init", model.to_str().unwrap()]);
    assert_clean_error(&out, 1, &["ext.onnx", "fc.weight", "missing"]);
    assert!(!ws.join("trtkit.toml").exists());
}
