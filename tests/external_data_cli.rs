//! External data stays inside the model's folder: a data file that is a link to a file
//! elsewhere is refused by every command and backend, as are offsets and lengths that overflow
//! or pass the file's end; `inspect` reads sizes, not bytes, so a model with gigabytes of
//! external weights is summarised in little memory.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{assert_clean_error, save, trtkit, trtkit_in};
use trtkit::onnx::graph_builder::GraphBuilder;
use trtkit::onnx::pb::tensor_proto::{DataLocation, DataType};
use trtkit::onnx::pb::{StringStringEntryProto, TensorProto};
use trtkit::onnx::test_models;
use trtkit::tensor::Dim;

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

/// `x` [1, 65536] → MatMul with `w` [65536, 32768] float (8 GiB, in sparse `w.bin`) → `y`.
fn sparse_giant(dir: &Path) -> PathBuf {
    let (rows, cols) = (65_536i64, 32_768i64);
    let mut w = TensorProto {
        name: "w".into(),
        dims: vec![rows, cols],
        data_type: DataType::Float as i32,
        ..Default::default()
    };
    make_external(&mut w, "w.bin", None);
    let file = std::fs::File::create(dir.join("w.bin")).unwrap();
    file.set_len((rows * cols * 4) as u64).unwrap();
    let mut g = GraphBuilder::new("giant");
    g.input("x", DataType::Float, &[Dim::Fixed(1), Dim::Fixed(rows)])
        .output("y", DataType::Float, &[Dim::Fixed(1), Dim::Fixed(cols)])
        .initializer(w)
        .node("MatMul", &["x", "w"], &["y"], vec![]);
    save(dir, "giant.onnx", g.build())
}

/// Runs `cmd` to its end; its exit status and peak resident memory in bytes (`wait4`'s
/// `ru_maxrss`, which Linux counts in KiB).
#[allow(clippy::zombie_processes)] // `wait4` below reaps it.
fn run_with_peak(cmd: &mut Command) -> (i32, u64) {
    let child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct `wait4` fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped; both pointers are to live locals.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4 failed");
    assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
    (libc::WEXITSTATUS(status), usage.ru_maxrss as u64 * 1024)
}

#[test]
fn inspect_reads_sizes_not_bytes_of_external_weights() {
    let dir = tempfile::tempdir().unwrap();
    let model = sparse_giant(dir.path());
    let on_disk = std::fs::metadata(dir.path().join("w.bin")).unwrap();
    assert_eq!(on_disk.len(), 8 << 30);
    let t = Instant::now();
    let (code, peak) = run_with_peak(
        Command::new(env!("CARGO_BIN_EXE_trtkit"))
            .args(["inspect", model.to_str().unwrap(), "--json"])
            .stdout(std::process::Stdio::null()),
    );
    let took = t.elapsed();
    assert_eq!(code, 0);
    assert!(peak < 200 << 20, "peak RSS {} MiB", peak >> 20);
    assert!(took < Duration::from_secs(30), "{took:?}");
    let out = trtkit(&["inspect", model.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["external_weight_bytes"], 8u64 << 30);
    assert_eq!(v["parameters"], 65_536u64 * 32_768);
    assert_eq!(v["macs"]["total"], 65_536u64 * 32_768);
}
