//! Builds sharing an engine folder: two builds of one engine at once take turns (the second
//! waits, then reuses what the first built, whose sidecar describes it), and a build writing
//! into a folder removes the temporary files that killed processes left there.
//!
//! Needs TensorRT-RTX (`python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`; CI installs it).

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{files, save, stdout_of_success, tensorrt_dir, trtkit, trtkit_in};
use trtkit::keyed_artifact::Lookup;
use trtkit::onnx::test_models;
use trtkit::trt::engine_file::{lookup, EngineSidecar};

#[test]
fn two_builds_of_one_engine_take_turns_and_the_second_reuses_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    save(d, "clf.onnx", test_models::classifier(Some(1)));
    let start = |hold_ms: &str| {
        Command::new(env!("CARGO_BIN_EXE_trtkit"))
            .current_dir(d)
            .args(["build", "clf.onnx", "--fp16"])
            .env("TRTKIT_TENSORRT_DIR", tensorrt_dir())
            // Debug builds only: the first build waits between building and landing.
            .env("TRTKIT_TEST_HOLD_LANDING_MS", hold_ms)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = start("4000");
    let first_pid = first.id();
    let engines = d.join("engines");
    let t0 = Instant::now();
    while !files(&engines).iter().any(|f| f.ends_with(".engine.lock")) {
        assert!(t0.elapsed() < Duration::from_secs(120), "no build started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = start("0");
    let first = stdout_of_success(&first.wait_with_output().unwrap());
    let second = stdout_of_success(&second.wait_with_output().unwrap());
    assert!(first.starts_with("built engines/clf-"), "{first}");
    let engine_name = first.split_whitespace().nth(1).unwrap();
    assert!(
        second.contains(&format!(
            "waiting for another build of {engine_name} (pid {first_pid})"
        )),
        "{second}"
    );
    assert!(
        second.contains(&format!("reusing {engine_name}")),
        "{second}"
    );
    // One engine, described by its sidecar; nothing else left behind.
    let engine = d.join(engine_name);
    let sidecar: EngineSidecar =
        serde_json::from_slice(&std::fs::read(format!("{}.json", engine.display())).unwrap())
            .unwrap();
    match lookup(&engine, &sidecar.key) {
        Lookup::Hit(found) => assert_eq!(
            found.facts.engine_bytes,
            std::fs::metadata(&engine).unwrap().len()
        ),
        _ => panic!("the sidecar does not describe the engine"),
    }
    stdout_of_success(&trtkit(&["inspect", engine.to_str().unwrap()]));
    // `run` takes it as the engine its sidecar describes (without a GPU it then says why not).
    let ran = trtkit_in(d, &["run", engine_name]);
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success()
            || (said.contains(engine_name) && !said.contains("truncated or changed")),
        "{said}"
    );
    let left: Vec<String> = files(&engines)
        .into_iter()
        .filter(|f| f.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_build_removes_the_temporary_files_of_processes_that_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    save(d, "clf.onnx", test_models::classifier(Some(1)));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let live_pid = std::process::id();
    let engines = d.join("engines");
    std::fs::create_dir(&engines).unwrap();
    let dead = engines.join(format!(".trtkit-tmp-{gone_pid}@{host}-Ab12Cd"));
    let live = engines.join(format!(".trtkit-tmp-{live_pid}@{host}-Ef34Gh"));
    for f in [&dead, &live] {
        std::fs::write(f, vec![0u8; 4096]).unwrap();
    }
    stdout_of_success(&trtkit_in(d, &["build", "clf.onnx", "--fp16"]));
    assert!(!dead.exists(), "the file of a gone process is still there");
    assert!(live.exists(), "the file of a live process was removed");
}
