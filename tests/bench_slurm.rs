//! `trtkit bench --slurm` against a real SLURM: a one-node cluster on this machine
//! (`tests/slurm/start-slurm.sh`: slurmctld and slurmd on localhost, no cgroups). A CPU matrix
//! runs as a job array and the merged report has every cell; a task killed with `scancel` is a
//! recorded failure, and the next `--slurm` run submits that cell alone. Where SLURM cannot start
//! (not root, packages missing) the test fails and says why: the cluster path is then untested.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{save, trtkit_in};
use trtkit::onnx::test_models::classifier;

fn start_slurm() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/start-slurm.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "a one-node SLURM did not start, so `bench --slurm` is untested here (it needs root and \
         `apt-get install slurmctld slurmd slurm-client munge`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    })
}

/// `bench` flags of a tract-cpu matrix of `dyn.onnx`, named `name`, as a SLURM array.
fn matrix<'a>(name: &'a str, batches: &'a str, timing: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "bench",
        "--models",
        "dyn.onnx",
        "--precisions",
        "fp32",
        "--batch-sizes",
        batches,
        "--targets",
        "tract-cpu",
        "--threads",
        "1",
        "--warmup",
        "1",
        "--name",
        name,
        "--slurm",
        "--poll",
        "0.3",
        "--json",
    ];
    args.extend_from_slice(timing);
    args
}

/// The array job id and state of task `task` of run `name`'s array, once squeue lists it.
fn task_state(name: &str, task: u32) -> Option<(String, String)> {
    let out = Command::new("squeue")
        .args(["-h", "-r", "-t", "all", "-n", &format!("trtkit-{name}")])
        .args(["-o", "%F %K %T"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() == 3 && w[1] == task.to_string()).then(|| (w[0].to_string(), w[2].to_string()))
    })
}

fn report(dir: &Path, name: &str) -> Value {
    let folder = format!("results/{name}");
    json_of(&trtkit_in(dir, &["report", &folder, "--json"]))
}

#[test]
fn a_matrix_runs_as_an_array_and_a_killed_task_is_resubmitted_alone() {
    start_slurm();
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), "dyn.onnx", classifier(None));

    // The whole matrix as an array, followed to its end; the report has every cell.
    let quick = ["--iterations", "2"];
    let array = format!("array-{}", std::process::id());
    let array = array.as_str();
    let ran = json_of(&trtkit_in(dir.path(), &matrix(array, "1,2,3,4", &quick)));
    assert_eq!(
        (ran["ran"].as_u64(), ran["ok"].as_u64()),
        (Some(4), Some(4)),
        "{ran}"
    );
    assert_eq!(ran["slurm"]["tasks"].as_u64(), Some(4), "{ran}");
    let kept = std::fs::read_to_string(ran["slurm"]["script"].as_str().unwrap()).unwrap();
    assert!(kept.contains("#SBATCH --array=0-3\n"), "{kept}");
    let merged = report(dir.path(), array);
    assert_eq!(merged["cells"].as_array().unwrap().len(), 4, "{merged}");
    assert_eq!(merged["ok"].as_u64(), Some(4));
    let again = json_of(&trtkit_in(dir.path(), &matrix(array, "1,2,3,4", &quick)));
    assert_eq!(
        again["ran"].as_u64(),
        Some(0),
        "nothing is missing: {again}"
    );

    // Three slow cells; the second task is cancelled while it runs. (SLURM lists ended arrays
    // for a while: the run's name is this test's own.)
    let slow = ["--duration", "5"];
    let killed = format!("killed-{}", std::process::id());
    let killed = killed.as_str();
    let follower = Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .current_dir(dir.path())
        .args(matrix(killed, "1,2,3", &slow))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let job = loop {
        if let Some((job, state)) = task_state(killed, 1) {
            if state == "RUNNING" {
                break job;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "task 1 never ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let cancel = Command::new("scancel")
        .arg(format!("{job}_1"))
        .status()
        .unwrap();
    assert!(cancel.success());
    let followed = json_of(&follower.wait_with_output().unwrap());
    assert_eq!(
        (followed["ok"].as_u64(), followed["failed"].as_u64()),
        (Some(2), Some(1)),
        "{followed}"
    );
    let failure = followed["failures"][0].as_str().unwrap();
    assert!(
        failure.starts_with("dyn/fp32/b2/tract-cpu: interrupted") && failure.contains("CANCELLED"),
        "{failure}"
    );
    let recorded = report(dir.path(), killed);
    assert_eq!(recorded["failed"].as_u64(), Some(1), "{recorded}");

    // The next run submits the cancelled cell alone.
    let mut dry = matrix(killed, "1,2,3", &slow);
    dry.push("--dry-run");
    let script = trtkit_in(dir.path(), &dry);
    let script = String::from_utf8_lossy(&script.stdout);
    assert!(script.contains("#SBATCH --array=0-0\n"), "{script}");
    assert!(script.contains("\n  dyn/fp32/b2/tract-cpu\n"), "{script}");
    let resubmitted = json_of(&trtkit_in(dir.path(), &matrix(killed, "1,2,3", &slow)));
    assert_eq!(
        (resubmitted["ran"].as_u64(), resubmitted["ok"].as_u64()),
        (Some(1), Some(1)),
        "{resubmitted}"
    );
    let merged = report(dir.path(), killed);
    assert_eq!(
        (merged["ok"].as_u64(), merged["failed"].as_u64()),
        (Some(3), Some(0)),
        "{merged}"
    );
}
