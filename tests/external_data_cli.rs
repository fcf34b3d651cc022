//! External data stays inside the model's folder: a data file that is a link to a file
//! elsewhere is refused by every command and backend, as are offsets and lengths that overflow
//! or pass the file's end.

mod support;

use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, trtkit, trtkit_in};
use trtkit::onnx::pb::tensor_proto::DataLocation;
use trtkit::onnx::pb::{StringStringEntryProto, TensorProto};
use trtkit::onnx::test_models;

/// Marks `t` as stored in `location` at `offset` (its bytes taken out of the model).
fn make_external(t: &mut TensorProto, location: &str, offset: Option<&str>) -> Vec<u8> {
    let data = std::mem::take(&mut t.raw_data);
    t.data_location = Some(DataLocation::External as i32);
    t.external_data = vec![StringStringEntryProto {
        key: "location".into(),
        value: location.into(),
    }];
    if let Some(o) = offset {
        t.external_data.push(StringStringEntryProto {
            key: "offset".into(),
            value: o.into(),
        });
    }
    data
}

/// The classifier in `dir/model/ext.onnx` with `fc.weight` in `weights.bin`, and the bytes
/// that file must hold.
fn external_classifier(dir: &Path, offset: Option<&str>) -> (PathBuf, Vec<u8>) {
    let mut proto = test_models::classifier(Some(1));
    let graph = proto.graph.as_mut().unwrap();
    let w = graph
        .initializer
        .iter_mut()
        .find(|t| t.name == "fc.weight")
        .unwrap();
    let data = make_external(w, "weights.bin", offset);
    let folder = dir.join("model");
    std::fs::create_dir_all(&folder).unwrap();
    (save(&folder, "ext.onnx", proto), data)
}

/// The classifier whose `weights.bin` is a link to `dir/elsewhere/secret.bin` (holding the
/// right bytes, so only the link is wrong).
fn linked_out(dir: &Path) -> PathBuf {
    let (model, data) = external_classifier(dir, None);
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("secret.bin"), &data).unwrap();
    std::os::unix::fs::symlink(
        elsewhere.join("secret.bin"),
        model.parent().unwrap().join("weights.bin"),
    )
    .unwrap();
    model
}

const OUTSIDE: &[&str] = &["fc.weight", "weights.bin", "outside the model's folder"];

#[test]
fn inspect_refuses_data_linked_from_outside_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let model = linked_out(dir.path());
    let out = trtkit(&["inspect", model.to_str().unwrap()]);
    assert_clean_error(&out, 1, OUTSIDE);
}

#[test]
fn compare_refuses_data_linked_from_outside_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let model = linked_out(dir.path());
    let m = model.to_str().unwrap();
    let saved = dir.path().join("saved.npz");
    for backend in ["tract", "ort"] {
        let out = trtkit(&[
            "compare",
            m,
            m,
            "--backend",
            backend,
            "--num-inputs",
            "1",
            "--save-outputs",
            saved.to_str().unwrap(),
        ]);
        assert_clean_error(&out, 1, OUTSIDE);
    }
    assert!(!saved.exists(), "outputs were saved from the linked file");
}

#[test]
fn build_refuses_data_linked_from_outside_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let model = linked_out(dir.path());
    let out = trtkit_in(dir.path(), &["build", model.to_str().unwrap()]);
    assert_clean_error(&out, 1, OUTSIDE);
}

#[test]
fn a_link_that_stays_inside_the_folder_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (model, data) = external_classifier(dir.path(), None);
    let folder = model.parent().unwrap();
    std::fs::create_dir_all(folder.join("blobs")).unwrap();
    std::fs::write(folder.join("blobs/w.bin"), &data).unwrap();
    std::os::unix::fs::symlink("blobs/w.bin", folder.join("weights.bin")).unwrap();
    let out = trtkit(&[
        "compare",
        model.to_str().unwrap(),
        model.to_str().unwrap(),
        "--backend",
        "tract",
        "--num-inputs",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_offset_that_overflows_names_the_initializer() {
    let dir = tempfile::tempdir().unwrap();
    let (model, data) = external_classifier(dir.path(), Some("18446744073709551608"));
    std::fs::write(model.parent().unwrap().join("weights.bin"), &data).unwrap();
    for args in [
        vec!["inspect", model.to_str().unwrap()],
        vec![
            "compare",
            model.to_str().unwrap(),
            model.to_str().unwrap(),
            "--backend",
            "ort",
            "--num-inputs",
            "1",
        ],
    ] {
        let out = trtkit(&args);
        assert_clean_error(&out, 1, &["fc.weight", "overflows"]);
    }
}
