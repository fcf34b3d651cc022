//! A cell as a child process: `trtkit bench-cell --spec FILE --result FILE`, its stderr kept as
//! the cell's log, killed when it runs past the time limit, and its end turned into a record:
//! the metrics it wrote, or why there are none (exit code, signal, timeout, out of memory, …).
//! Both sides of that exchange are here: the parent's ([`run_child`]) and the child's
//! ([`run_in_child`]).

use super::cell::run_cell;
use super::plan::CellSpec;
use super::record::{now_unix_s, CellFailure, CellMetrics, CellRecord, FailureKind, Status};
use crate::atomic_file::write_atomic;
use crate::error::{kind_of, ErrorKind};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The hidden subcommand a cell's child runs.
pub(crate) const CELL_SUBCOMMAND: &str = "bench-cell";

/// How the child ended, before it is read.
enum End {
    Exited(ExitStatus),
    TimedOut,
}

/// How a run starts its cells' processes.
pub(crate) struct Supervisor<'a> {
    /// trtkit's own executable.
    pub(crate) exe: PathBuf,
    /// The time limit of one cell, seconds.
    pub(crate) timeout_s: f64,
    /// The results folder's lock ([`super::lock::FolderLock::handle`]), lent to each cell as its
    /// stdout (read-only, so nothing it prints lands there): the lock stays held while a cell
    /// lives, even if its `bench` was killed.
    pub lock: Option<&'a File>,
}

/// Runs `spec` in a child process with the supervisor's time limit and returns its record; a
/// cell pinned to a GPU runs with that board alone visible (`CUDA_VISIBLE_DEVICES=<uuid>`).
/// The child's stdin is a pipe this process never writes: it closes when this process ends,
/// however it ends, and the child then ends too ([`super::watchdog`]). Only a failure to start
/// the child at all (or to write its files) is an error.
pub(crate) fn run_child(supervisor: &Supervisor, spec: &CellSpec) -> Result<CellRecord> {
    let timeout_s = supervisor.timeout_s;
    let work = spec.folder.join("cells");
    let logs = spec.folder.join("logs");
    for d in [&work, &logs] {
        std::fs::create_dir_all(d).with_context(|| format!("{}: cannot create", d.display()))?;
    }
    let spec_file = work.join(format!("{}.spec.json", spec.id));
    let result_file = work.join(format!("{}.result.json", spec.id));
    let log_file = logs.join(format!("{}.log", spec.id));
    let _ = std::fs::remove_file(&result_file);
    let _ = std::fs::remove_file(kind_file(&result_file));
    write_atomic(&spec_file, &serde_json::to_vec_pretty(spec)?)?;
    let log = std::fs::File::create(&log_file)
        .with_context(|| format!("{}: cannot create the cell's log", log_file.display()))?;
    let started_unix_s = now_unix_s();
    let start = Instant::now();
    let mut child = spawn_cell(supervisor, spec, &spec_file, &result_file)?;
    let stderr = keep_stderr(child.stderr.take(), log);
    let limit = Duration::from_secs_f64(timeout_s.max(0.001));
    let end = loop {
        if let Some(status) = child.try_wait()? {
            break End::Exited(status);
        }
        if start.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            break End::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall_s = start.elapsed().as_secs_f64();
    let stderr = stderr.join().unwrap_or_default();
    let outcome = match end {
        End::Exited(status) if status.success() => read_result(&result_file),
        End::Exited(status) => Err(failure_of_exit(status, &stderr, read_kind(&result_file))),
        End::TimedOut => Err(CellFailure {
            kind: FailureKind::Timeout,
            reason: format!("ran past the cell time limit of {timeout_s} s and was killed"),
            exit_code: None,
            signal: None,
            stderr_tail: tail(&stderr, 8),
            log: None,
        }),
    };
    let _ = std::fs::remove_file(&spec_file);
    let _ = std::fs::remove_file(&result_file);
    let _ = std::fs::remove_file(kind_file(&result_file));
    let relative_log = log_file
        .strip_prefix(&spec.folder)
        .unwrap_or(&log_file)
        .display()
        .to_string();
    let (status, metrics, failure) = match outcome {
        Ok(m) => (Status::Ok, Some(m), None),
        Err(mut f) => {
            f.log = Some(relative_log);
            (Status::Failed, None, Some(f))
        }
    };
    Ok(CellRecord {
        id: spec.id.clone(),
        key: spec.key.clone(),
        model: spec.model_name(),
        model_path: spec.model.display().to_string(),
        status,
        metrics,
        failure,
        started_unix_s,
        wall_s,
        host: crate::this_host::name().into(),
        device: spec.gpu.clone(),
    })
}

/// Starts the cell's process: its stdin a pipe it watches, its stdout the folder's lock (or
/// nothing), its stderr a pipe to [`keep_stderr`].
fn spawn_cell(
    supervisor: &Supervisor,
    spec: &CellSpec,
    spec_file: &Path,
    result_file: &Path,
) -> Result<Child> {
    let stdout = match supervisor.lock {
        Some(lock) => Stdio::from(
            lock.try_clone()
                .context("cannot lend the results folder's lock to a cell")?,
        ),
        None => Stdio::null(),
    };
    let mut command = Command::new(&supervisor.exe);
    if let Some(gpu) = &spec.gpu {
        command.env("CUDA_VISIBLE_DEVICES", &gpu.uuid);
    }
    command
        .arg(CELL_SUBCOMMAND)
        .arg("--spec")
        .arg(spec_file)
        .arg("--result")
        .arg(result_file)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!(
                "{}: cannot start the cell's process",
                supervisor.exe.display()
            )
        })
}

/// The most of a cell's stderr kept in memory (its log has all of it).
const KEPT_STDERR: usize = 1 << 20;

/// Copies a cell's stderr to its log as it comes and keeps its text (the last
/// [`KEPT_STDERR`] bytes): the record's reason is read from that text, so a log that cannot be
/// written (a full disk) does not lose the cell's error line. The thread ends with the pipe.
fn keep_stderr(pipe: Option<ChildStderr>, log: File) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            return String::new();
        };
        let (mut kept, mut buf) = (Vec::new(), vec![0u8; 1 << 14]);
        let (mut log, mut log_error) = (Some(log), None);
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > KEPT_STDERR {
                kept.drain(..kept.len() - KEPT_STDERR / 2);
            }
            if let Some(Err(e)) = log.as_mut().map(|l| l.write_all(&buf[..n])) {
                log_error = Some(e);
                log = None;
            }
        }
        let mut text = String::from_utf8_lossy(&kept).into_owned();
        if let Some(e) = log_error {
            text.push_str(&format!("\n(the cell's log could not be written: {e})\n"));
        }
        text
    })
}

/// The child's side: reads the cell [`run_child`] wrote to `spec`, runs it in this process and
/// writes its metrics to `result`; the process ends as soon as its parent does.
pub fn run_in_child(spec: &Path, result: &Path) -> Result<()> {
    super::watchdog::end_with_parent();
    let text = std::fs::read_to_string(spec)
        .with_context(|| format!("{}: cannot read the cell", spec.display()))?;
    let cell: CellSpec = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a cell of trtkit bench", spec.display()))?;
    let metrics = run_cell(&cell).inspect_err(|e| {
        if let Some(kind) = kind_of(e) {
            let _ = write_atomic(
                &kind_file(result),
                &serde_json::to_vec(&kind).unwrap_or_default(),
            );
        }
    })?;
    write_atomic(result, &serde_json::to_vec(&metrics)?)
}

/// Where a failed cell's child leaves its error's kind, beside the result it did not write.
fn kind_file(result: &Path) -> PathBuf {
    result.with_extension("kind.json")
}

/// The kind of failure the child's typed error stands for, when it left one.
fn read_kind(result: &Path) -> Option<FailureKind> {
    let text = std::fs::read(kind_file(result)).ok()?;
    let kind: ErrorKind = serde_json::from_slice(&text).ok()?;
    Some(match kind {
        ErrorKind::OutOfMemory => FailureKind::Oom,
        ErrorKind::GpuCannotRunEngine => FailureKind::UnsupportedGpu,
        ErrorKind::NoGpu | ErrorKind::TensorRtMissing => FailureKind::Missing,
        ErrorKind::BatchOutsideProfile => FailureKind::Batch,
        ErrorKind::BackendRefusedModel => FailureKind::Parser,
        // Said by their message, as any error of no kind.
        ErrorKind::TooLargeForMemory | ErrorKind::UnfixedAxis | ErrorKind::NoWorkspace => {
            return None
        }
    })
}

fn read_result(path: &PathBuf) -> Result<CellMetrics, CellFailure> {
    let text = std::fs::read_to_string(path).map_err(|e| CellFailure {
        kind: FailureKind::Error,
        reason: format!("the cell exited 0 but wrote no result ({e})"),
        exit_code: Some(0),
        signal: None,
        stderr_tail: String::new(),
        log: None,
    })?;
    serde_json::from_str(&text).map_err(|e| CellFailure {
        kind: FailureKind::Error,
        reason: format!("the cell's result does not read ({e})"),
        exit_code: Some(0),
        signal: None,
        stderr_tail: String::new(),
        log: None,
    })
}

/// The last `n` non-empty lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(unix)]
fn signal_of(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn signal_of(_: ExitStatus) -> Option<i32> {
    None
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// The failure a child that exited unsuccessfully stands for: of the kind its typed error had
/// (`kind`), else of the kind its error line reads as.
fn failure_of_exit(status: ExitStatus, stderr: &str, kind: Option<FailureKind>) -> CellFailure {
    let error_line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("error: "))
        .map(|l| l.trim_start_matches("error: ").to_string())
        .or_else(|| panic_message(stderr));
    let signal = signal_of(status);
    let (kind, reason) = match (signal, error_line) {
        (Some(s), _) => {
            // reads words, not a kind: the Rust runtime's abort message, all such a child leaves.
            let alloc = stderr.contains("memory allocation of");
            let kind = if alloc {
                FailureKind::Oom
            } else {
                FailureKind::Signal
            };
            let why = match (alloc, s) {
                (true, _) => "host memory allocation failed",
                (_, 9) => "killed (out of host memory, or by hand)",
                _ => "crashed",
            };
            let mut reason = format!("{why}: signal {s} ({})", signal_name(s));
            if let Some(panic) = panic_message(stderr) {
                reason.push_str(&format!(" after it {panic}"));
            }
            (kind, reason)
        }
        (None, Some(line)) => (kind.unwrap_or_else(|| classify(&line)), line),
        (None, None) => (
            FailureKind::Error,
            format!(
                "exited with code {} without an error line",
                status.code().unwrap_or(-1)
            ),
        ),
    };
    CellFailure {
        kind,
        reason,
        exit_code: status.code(),
        signal,
        stderr_tail: tail(stderr, 8),
        log: None,
    }
}

/// A panic's message (`thread '…' panicked at FILE:LINE:COL:` is followed by it), said as
/// `panicked: MESSAGE`.
fn panic_message(stderr: &str) -> Option<String> {
    let mut lines = stderr.lines();
    lines.find(|l| l.contains(" panicked at "))?;
    let message = lines.next().unwrap_or("").trim();
    Some(format!("panicked: {message}"))
}

/// The kind of failure an error line describes, for a child that left no kind of its own (its
/// error came from another library's words, a panic, or a child that failed before it could
/// write one).
pub(crate) fn classify(line: &str) -> FailureKind {
    let m = line.to_ascii_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
    if any(&[
        "out of memory",
        "out_of_memory",
        "out of gpu memory",
        "memory allocation of",
        "failed to allocate memory",
    ]) {
        FailureKind::Oom
    } else if any(&[
        "cannot run on this gpu",
        "cannot run on gpu",
        "compute capability",
    ]) {
        FailureKind::UnsupportedGpu
    } else if any(&[
        "running it needs",
        "tensorrt not found",
        "libonnxruntime",
        "no cuda driver",
        "has none usable",
        "libcuda",
        "not installed",
    ]) {
        FailureKind::Missing
    } else if any(&[
        "batch outside",
        "optimization profile",
        "batch size",
        "batch axis",
        "fixed batch",
        "at batch",
    ]) {
        FailureKind::Batch
    } else if any(&["parse", "protobuf", "unsupported op", "not an onnx"]) {
        FailureKind::Parser
    } else {
        FailureKind::Error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_named_in_a_word() {
        let cases = [
            ("CUDA_ERROR_OUT_OF_MEMORY, out of memory", FailureKind::Oom),
            (
                "e.engine: The engine cannot run on this GPU, which has compute capability 9.0",
                FailureKind::UnsupportedGpu,
            ),
            (
                "running it needs TensorRT-RTX: not found",
                FailureKind::Missing,
            ),
            (
                "m.onnx: batch 4 is outside the engine's optimization profile",
                FailureKind::Batch,
            ),
            ("m.onnx: failed to parse the protobuf", FailureKind::Parser),
            (
                "BFCArena::AllocateRawInternal Failed to allocate memory for requested buffer of size 8589934592",
                FailureKind::Oom,
            ),
            (
                "the ONNX Runtime at /x/libonnxruntime.so.1.31.1 is the CPU build: it has no libonnxruntime_providers_cuda.so beside it",
                FailureKind::Missing,
            ),
            (
                "ONNX Runtime's CUDA provider needs libcudnn.so.9, which is not installed",
                FailureKind::Missing,
            ),
            ("something else", FailureKind::Error),
        ];
        for (line, kind) in cases {
            assert_eq!(classify(line), kind, "{line}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_childs_kind_decides_over_its_words() {
        use std::os::unix::process::ExitStatusExt;
        let dir = tempfile::tempdir().unwrap();
        let result = dir.path().join("c.result.json");
        assert_eq!(read_kind(&result), None);
        std::fs::write(kind_file(&result), b"\"batch-outside-profile\"").unwrap();
        let kind = read_kind(&result);
        assert_eq!(kind, Some(FailureKind::Batch));
        let exited_1 = ExitStatus::from_raw(1 << 8);
        let stderr = "error: m.engine: input 'x' refused it\n";
        let typed = failure_of_exit(exited_1, stderr, kind);
        assert_eq!(typed.kind, FailureKind::Batch);
        assert_eq!(typed.reason, "m.engine: input 'x' refused it");
        assert_eq!(
            failure_of_exit(exited_1, stderr, None).kind,
            FailureKind::Error
        );
    }

    #[test]
    fn a_panic_is_said_by_its_message() {
        let stderr =
            "log line\nthread 'main' panicked at src/a.rs:1:2:\nCUDA out of memory\nnote: …\n";
        let m = panic_message(stderr).unwrap();
        assert_eq!(m, "panicked: CUDA out of memory");
        assert_eq!(classify(&m), FailureKind::Oom);
        assert_eq!(panic_message("error: x"), None);
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        assert_eq!(tail("a\n\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("", 3), "");
    }
}
