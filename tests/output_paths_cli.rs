//! Outputs never replace what is not a file, nor the command's own inputs: a device, a FIFO or
//! a link to one named as an output is refused and still there afterwards; an output that is an
//! input is a usage error and the input is byte-identical afterwards; a link to a file is
//! written through, the link kept.

mod support;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use support::{assert_clean_error, save, trtkit};
use trtkit::onnx::test_models::classifier;

fn fifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

#[test]
fn a_fifo_or_a_link_to_a_device_as_an_output_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let pipe = dir.path().join("pipe.npz");
    fifo(&pipe);
    let null = dir.path().join("null.npz");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    for (flag, out) in [("--save-outputs", &pipe), ("--save-inputs", &null)] {
        let o = trtkit(&[
            "compare",
            m,
            m,
            "--num-samples",
            "2",
            flag,
            out.to_str().unwrap(),
        ]);
        assert_clean_error(&o, 2, &[flag, out.to_str().unwrap(), "not a regular file"]);
    }
    assert!(std::fs::symlink_metadata(&pipe)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(std::fs::symlink_metadata(&null)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    let o = trtkit(&["report", m, "-o", dir.path().to_str().unwrap()]);
    assert_clean_error(&o, 2, &["-o", "is a folder"]);
}

#[test]
fn a_link_to_a_file_is_written_through_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let real = dir.path().join("real.npz");
    std::fs::write(&real, b"old").unwrap();
    let link = dir.path().join("link.npz");
    std::os::unix::fs::symlink("real.npz", &link).unwrap();
    let o = trtkit(&[
        "compare",
        m,
        m,
        "--num-samples",
        "2",
        "--save-outputs",
        link.to_str().unwrap(),
    ]);
    support::stdout_of_success(&o);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let saved = trtkit::data::npz::load(&real).unwrap();
    assert_eq!(saved[0].shape, [2, 10]);
}

#[test]
fn an_output_onto_an_input_is_a_usage_error_and_the_input_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "c.onnx", classifier(None));
    let m = model.to_str().unwrap();
    let labels = dir.path().join("labels.csv");
    std::fs::write(&labels, "a.jpg,0\n").unwrap();
    let l = labels.to_str().unwrap();
    let journal = dir.path().join("journal.jsonl");
    std::fs::write(&journal, "{}\n").unwrap();
    let j = journal.to_str().unwrap();
    let before = |p: &Path| std::fs::read(p).unwrap();
    let (model_bytes, labels_bytes, journal_bytes) =
        (before(&model), before(&labels), before(&journal));
    let cases: [(&[&str], &str); 6] = [
        (&["build", m, "-o", m], "MODEL"),
        (&["quantize", m, "--fp16", "-o", m], "MODEL"),
        (
            &[
                "validate",
                m,
                "--dataset",
                ".",
                "--labels",
                l,
                "--save-predictions",
                l,
            ],
            "--labels",
        ),
        (&["report", j, "-o", j], "RESULTS"),
        (&["compare", m, m, "--save-outputs", m], "A"),
        (&["run", m, "--export-times", m], "MODEL"),
    ];
    for (args, input_flag) in cases {
        let o = trtkit(args);
        assert_clean_error(&o, 2, &[&format!("same file as {input_flag}")]);
    }
    assert_eq!(before(&model), model_bytes);
    assert_eq!(before(&labels), labels_bytes);
    assert_eq!(before(&journal), journal_bytes);
    // Two outputs on one file.
    let out = dir.path().join("o.npz");
    let o = out.to_str().unwrap();
    let twice = trtkit(&["compare", m, m, "--save-outputs", o, "--save-reference", o]);
    assert_clean_error(
        &twice,
        2,
        &["--save-reference and --save-outputs both name"],
    );
}
