//! Float flag values and what cannot be written: NaN, ±inf and out-of-range values are a
//! one-line usage error naming the flag (exit 2) before anything is written, in a flag or a
//! bench plan file (a cell timeout beyond what a timer holds is refused, not a panic); the
//! workspace comparison's `--fail-below` fails when no row was measured; help, version and log
//! lines going to a full disk never panic.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::{assert_clean_error, save, trtkit};
use trtkit::onnx::test_models::classifier;

/// Runs the trtkit binary in `dir` with `args`.
fn trtkit_at(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// Runs the trtkit binary with `args`, `/dev/full` as its stdout or its stderr.
fn to_full(args: &[&str], stderr_full: bool) -> Output {
    let full = || Stdio::from(std::fs::File::create("/dev/full").unwrap());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trtkit"));
    cmd.args(args);
    match stderr_full {
        true => cmd.stderr(full()).stdout(Stdio::piped()),
        false => cmd.stdout(full()).stderr(Stdio::piped()),
    };
    cmd.output().unwrap()
}

/// Non-finite values of float flags are refused at parse time, naming the flag and the value;
/// the comparison does not run and writes nothing.
#[test]
fn a_non_finite_float_flag_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let saved = dir.path().join("out.npz");
    for (flag, value) in [
        (&["--rtol", "NaN"][..], "NaN"),
        (&["--atol", "inf"], "inf"),
        (&["--range", "0", "inf"], "inf"),
        (&["--layerwise-cosine", "nan"], "nan"),
    ] {
        let mut args = vec!["compare", m, m, "--num-samples", "2"];
        args.extend(["--save-outputs", saved.to_str().unwrap()]);
        args.extend(flag);
        let out = trtkit(&args);
        assert_clean_error(&out, 2, &[flag[0], value, "not a finite number"]);
        assert!(!saved.exists(), "{flag:?} wrote {}", saved.display());
    }
    // Other commands' float flags go through the same parser.
    let out = trtkit(&["run", m, "--duration", "NaN"]);
    assert_clean_error(&out, 2, &["--duration", "not a finite number"]);
    let out = trtkit(&["calibrate", m, "--percentile", "inf"]);
    assert_clean_error(&out, 2, &["--percentile", "not a finite number"]);
    // Preprocessing means too (a NaN mean turned every pixel into NaN).
    let out = trtkit(&["validate", m, "--dataset", "val", "--mean", "NaN,0.5,0.5"]);
    assert_clean_error(&out, 2, &["--mean", "NaN", "not a finite number"]);
}

/// `--fail-below` takes a finite percentage in [0, 100]: NaN (which no figure is below) and 101
/// (which every figure is below) are usage errors, not gates that always pass or always fail.
#[test]
fn fail_below_takes_a_percentage() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    for (value, why) in [
        ("NaN", "not a finite number"),
        ("101", "outside [0, 100]"),
        ("100.5", "outside [0, 100]"),
    ] {
        let out = trtkit(&["compare", m, m, "--num-samples", "2", "--fail-below", value]);
        assert_clean_error(&out, 2, &["--fail-below", value, why]);
    }
    // 100 itself is a percentage: identical sides pass it.
    let out = trtkit(&["compare", m, m, "--num-samples", "2", "--fail-below", "100"]);
    support::stdout_of_success(&out);
}

/// A cell timeout beyond what a timer holds (`1e20` s) is a usage error, as a flag and as a plan
/// file's setting, before any cell runs: no panic, no results folder.
#[test]
fn a_cell_timeout_no_timer_holds_is_refused_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), "dyn.onnx", classifier(None));
    let matrix = [
        "bench",
        "--models",
        "dyn.onnx",
        "--precisions",
        "fp32",
        "--batch-sizes",
        "1",
        "--targets",
        "tract-cpu",
        "--warmup",
        "1",
        "--iterations",
        "2",
    ];
    let out = trtkit_at(
        dir.path(),
        &[&matrix[..], &["--cell-timeout", "1e20"]].concat(),
    );
    assert_clean_error(
        &out,
        2,
        &["--cell-timeout", "1e20", "more than a timer can hold"],
    );
    let out = trtkit_at(
        dir.path(),
        &[&matrix[..], &["--cell-timeout", "NaN"]].concat(),
    );
    assert_clean_error(&out, 2, &["--cell-timeout", "not a finite number"]);
    std::fs::write(
        dir.path().join("p.toml"),
        "models = [\"dyn.onnx\"]\nprecisions = [\"fp32\"]\nbatch_sizes = [1]\n\
         targets = [\"tract-cpu\"]\niterations = 2\ncell_timeout = 1e20\n",
    )
    .unwrap();
    let out = trtkit_at(dir.path(), &["bench", "p.toml"]);
    assert_clean_error(
        &out,
        2,
        &["p.toml", "cell-timeout", "1e20", "timer can hold"],
    );
    assert!(!dir.path().join("results").exists());
}

/// In a workspace with nothing to compare (no engine, no kept graph), `compare --fail-below`
/// shows its empty table and fails, saying nothing was measured: a gate that measured nothing
/// does not pass.
#[test]
fn the_workspace_comparison_fails_below_when_nothing_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("onnx")).unwrap();
    save(&ws.join("onnx"), "clf.onnx", classifier(None));
    std::fs::write(ws.join("trtkit.toml"), "model = \"onnx/clf.onnx\"\n").unwrap();
    // Without the gate the empty table is no failure.
    support::stdout_of_success(&trtkit_at(ws, &["compare"]));
    let out = trtkit_at(ws, &["compare", "--fail-below", "50"]);
    assert_clean_error(&out, 1, &["--fail-below 50", "nothing was measured"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Precision"));
}

/// `--help` and `--version` that cannot be written (stdout on a full disk) exit 1 in one line,
/// without a panic.
#[test]
fn help_and_version_to_a_full_disk_exit_1() {
    for args in [&["--help"][..], &["--version"], &["compare", "--help"]] {
        let out = to_full(args, false);
        assert_clean_error(&out, 1, &["cannot write to standard output"]);
    }
}

/// Log lines that cannot be written (stderr on a full disk) are dropped: the command still runs
/// to its end and prints its result.
#[test]
fn log_lines_to_a_full_disk_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let args = ["-vv", "inspect", m.to_str().unwrap()];
    let logged = trtkit(&args);
    let shown = support::stdout_of_success(&logged);
    assert!(
        String::from_utf8_lossy(&logged.stderr).contains("DEBUG"),
        "the command logs nothing, so it tests nothing: {}",
        String::from_utf8_lossy(&logged.stderr)
    );
    let out = to_full(&args, true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), shown);
}
