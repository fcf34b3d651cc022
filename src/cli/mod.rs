//! The command line: global flags, one subcommand per file (its flags, the one function that
//! turns them into the library job's config, and the glue that runs the job and prints its
//! report, rendered by [`crate::report`]), the flag groups the commands share, the progress bars,
//! and how errors become exit codes.

pub mod args;
pub mod bench;
pub mod build;
pub mod calibrate;
pub mod compare;
pub mod doctor;
pub(crate) mod hints;
pub mod init;
pub mod inspect;
pub(crate) mod log_lines;
pub(crate) mod outputs;
pub mod quantize;
pub mod report;
pub mod run;
pub mod stdout;
pub(crate) mod usage_error;
pub mod validate;
pub mod workspace;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;
pub(crate) use usage_error::is_usage;
pub use usage_error::usage;

/// trtkit: ONNX to validated TensorRT engines, and proof of how fast and accurate they are.
#[derive(Debug, Parser)]
#[command(name = "trtkit", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands that exist today.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a TensorRT engine from an ONNX model: static or dynamic batch, fp32/fp16/int8.
    Build(Box<build::BuildArgs>),
    /// Summarize an ONNX model: I/O, opsets, op counts, parameters, weight size.
    Inspect(inspect::InspectArgs),
    /// Report what this machine offers: CUDA driver, GPUs, TensorRT libraries, backends.
    Doctor(doctor::DoctorArgs),
    /// INT8 calibration: activation ranges into a TensorRT-format cache keyed on the batch size.
    Calibrate(calibrate::CalibrateArgs),
    /// Precision rewrites: INT8 Q/DQ from a calibration cache (with the INT8 triage on samples), FP16, or cross-layer equalisation.
    Quantize(quantize::QuantizeArgs),
    /// Top-1/top-5 accuracy of a model on an ImageNet-style folder, with images/s and latency.
    Validate(Box<validate::ValidateArgs>),
    /// Measure latency (latency-all, latency-model), throughput and GPU memory per batch size.
    Run(run::RunArgs),
    /// Compare the outputs of A with the reference B: isclose %, errors, top-k rank agreement.
    Compare(compare::CompareArgs),
    /// Make a workspace (trtkit.toml, onnx/, engines/, calibration/) so commands need no paths.
    Init(Box<init::InitArgs>),
    /// The benchmark matrix: models × precisions × batch sizes × targets, each cell in its own
    /// process, recorded in a journal; run it again to finish what is missing.
    Bench(Box<bench::BenchArgs>),
    /// Tables, CSV, JSON and an HTML page with plots from bench journals (merged; partial runs
    /// report too).
    Report(report::ReportArgs),
    /// One cell of a bench run (what bench's child processes run).
    #[command(name = "bench-cell", hide = true)]
    BenchCell(bench::CellArgs),
}

/// Sets up logging on stderr: warnings by default, more with `-v`, errors only with `-q`.
pub fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (_, 0) => "warn",
        (_, 1) => "info",
        (_, 2) => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(log_lines::WarningsOnce)
        .with_target(false)
        .without_time()
        // A log line that cannot be written (stderr full or closed) is dropped: no panic.
        .log_internal_errors(false)
        .try_init();
}

/// What a command line that did not parse comes to: help and version on stdout (exit 0, or 1
/// when stdout cannot take them), a refused value as one line on stderr, other usage errors as
/// clap says them; exit 2 for those.
pub fn parse_failure(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    use std::io::IsTerminal;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let text = match std::io::stdout().is_terminal() {
                true => err.render().ansi().to_string(),
                false => err.render().to_string(),
            };
            exit_code(stdout::print(&text))
        }
        ErrorKind::ValueValidation => {
            let text = err.to_string();
            let line = text.lines().next().unwrap_or_default();
            let _ = writeln!(std::io::stderr(), "{line}");
            ExitCode::from(2)
        }
        _ => {
            let _ = err.print();
            ExitCode::from(2)
        }
    }
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Build(args) => build::run(*args),
        Command::Inspect(args) => inspect::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Calibrate(args) => calibrate::run(args, cli.verbose > 0),
        Command::Quantize(args) => quantize::run(args),
        Command::Validate(args) => validate::run(*args),
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Init(args) => init::run(*args),
        Command::Bench(args) => bench::run(*args),
        Command::BenchCell(args) => bench::run_one(args),
        Command::Report(args) => report::run(args),
    }
}

/// Turns a command's outcome into one error line on stderr and an exit code (2 usage, 1 failure).
pub fn exit_code(outcome: anyhow::Result<()>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let err = hints::with_hint(err);
            let line = format!("{err:#}").replace('\n', " ");
            // Nothing more can be said where stderr itself cannot be written.
            let _ = writeln!(std::io::stderr(), "error: {line}");
            if is_usage(&err) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
