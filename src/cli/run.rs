//! `trtkit run MODEL|ENGINE --batch-size 1,16,32,64`: flags into a [`RunConfig`]; the report is
//! rendered by [`crate::report::latency`].

use crate::backend::select::{BackendKind, BackendOptions};
use crate::cli::args::backend::{BackendArgs, EngineArgs};
use crate::cli::args::batch_axis::BatchAxisArgs;
use crate::cli::args::output::OutputArgs;
use crate::cli::args::shapes::ShapeArgs;
use crate::cli::args::timing::TimingArgs;
use crate::cli::outputs::check_outputs;
use crate::cli::usage;
use crate::cuda::harness::HarnessOptions;
use crate::error::Setting;
use crate::jobs::run::{measure_latency, RunConfig};
use crate::report::latency::{export_times, render};
use crate::report::progress::Bar;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ONNX model (or a TensorRT engine: .engine / .plan).
    pub model: PathBuf,
    /// Batch sizes to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub batch_size: Vec<usize>,
    /// Input shapes and named axes of an ONNX model (`--dim seq=64,128` sweeps).
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// Where inputs hold their samples, where the model's named axes do not say.
    #[command(flatten)]
    pub batch_axes: BatchAxisArgs,
    /// Backend, device and threads for an ONNX model.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Warm-up and measured amounts.
    #[command(flatten)]
    pub timing: TimingArgs,
    /// GPU and TensorRT libraries (an engine, or any GPU backend).
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Keep inputs on the device and skip output copies: compute only (GPU backends).
    #[arg(long)]
    pub(crate) no_transfers: bool,
    /// Capture the inference into a CUDA graph once and replay it (GPU backends).
    #[arg(long)]
    pub cuda_graph: bool,
    /// Concurrent CUDA streams, each with its own buffers (GPU backends).
    #[arg(long)]
    pub streams: Option<usize>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Write every measured iteration's spans to FILE (.csv, otherwise JSON).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_times: Option<PathBuf>,
    /// ONNX Runtime backends: profile every run with ONNX Runtime's own profiler and say, in a
    /// note, the time per operator type (the first run of each session left out). On the CUDA
    /// provider the profiler times kernel launches; run with CUDA_LAUNCH_BLOCKING=1 to time
    /// the kernels (and not the speed).
    #[arg(long)]
    pub(crate) op_profile: bool,
}

/// The measurement these flags describe; every flag check of `run` is here.
pub fn config(args: &RunArgs) -> Result<RunConfig> {
    if args.batch_size.is_empty() || args.batch_size.contains(&0) {
        return Err(usage("--batch-size takes positive integers, e.g. 1,16,32"));
    }
    args.timing.check().map_err(usage)?;
    if args.streams == Some(0) {
        return Err(usage("--streams must be at least 1"));
    }
    if args.op_profile && args.backend.backend == Some(BackendKind::Tract) {
        return Err(usage(
            "--op-profile reads ONNX Runtime's own profiler; tract has none: run with --backend ort",
        ));
    }
    let gpu_settings = [
        (Setting::DeviceId, args.engine.device_id.is_some()),
        (Setting::NoTransfers, args.no_transfers),
        (Setting::CudaGraph, args.cuda_graph),
        (Setting::Streams, args.streams.is_some()),
    ]
    .into_iter()
    .filter_map(|(s, set)| set.then_some(s))
    .collect();
    let (input_shapes, dim_sweep) = args.shapes.sweep()?;
    Ok(RunConfig {
        model: args.model.clone(),
        batch_sizes: args.batch_size.clone(),
        backend: BackendOptions {
            input_shapes,
            batch_axes: args.batch_axes.request()?,
            op_profile: args.op_profile,
            ..args.engine.apply(args.backend.options(None))
        },
        dim_sweep,
        harness: HarnessOptions {
            warmup: args.timing.warmup(),
            measure: args.timing.measure(),
            transfers: !args.no_transfers,
            cuda_graph: args.cuda_graph,
            streams: args.streams.unwrap_or(1),
        },
        gpu_settings,
    })
}

/// Runs `run`.
pub fn run(args: RunArgs) -> Result<()> {
    check_outputs(
        &[("--export-times", args.export_times.as_deref())],
        &[("MODEL", Some(&args.model))],
    )?;
    let config = config(&args)?;
    let report = measure_latency(&config, &Bar::new("iterations", args.output.quiet()))?;
    if let Some(path) = &args.export_times {
        export_times(path, &report.results)?;
    }
    args.output
        .print(&report, |markdown| render(&report, markdown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::is_usage;
    use crate::cuda::harness::Amount;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Wrap::try_parse_from(std::iter::once("run").chain(args.iter().copied())).map(|w| w.args)
    }

    #[test]
    fn parses_batch_lists_and_amounts() {
        let a = parse(&["m.onnx", "--batch-size", "1,16,32", "--duration", "2.5"]).unwrap();
        assert_eq!(a.batch_size, vec![1, 16, 32]);
        let h = config(&a).unwrap().harness;
        assert_eq!(h.measure, Amount::Seconds(2.5));
        assert_eq!(h.warmup, Amount::Iterations(10));
        assert!(h.transfers && !h.cuda_graph);
        assert_eq!(h.streams, 1);
        let b = parse(&[
            "m.onnx",
            "--no-transfers",
            "--cuda-graph",
            "--streams",
            "4",
            "--warmup-seconds",
            "1",
        ])
        .unwrap();
        let c = config(&b).unwrap();
        let h = c.harness;
        assert!(!h.transfers && h.cuda_graph);
        assert_eq!((h.streams, h.warmup), (4, Amount::Seconds(1.0)));
        assert_eq!(
            c.gpu_settings,
            vec![Setting::NoTransfers, Setting::CudaGraph, Setting::Streams]
        );
        // The old spelling of the warm-up count still parses.
        let old = parse(&["m.onnx", "--warmup-iterations", "3"]).unwrap();
        assert_eq!(config(&old).unwrap().harness.warmup, Amount::Iterations(3));
        assert!(parse(&["m.onnx", "--iterations", "5", "--duration", "1"]).is_err());
        assert!(parse(&["m.onnx", "--batch-size", "1,x"]).is_err());
        assert!(parse(&["m.onnx", "--warmup", "2.5"]).is_err());
    }

    #[test]
    fn rejects_bad_values() {
        for bad in [
            &["m.onnx", "--batch-size", "0"][..],
            &["m.onnx", "--iterations", "0"],
            &["m.onnx", "--duration", "0"],
            &["m.onnx", "--streams", "0"],
        ] {
            let err = config(&parse(bad).unwrap()).unwrap_err();
            assert!(is_usage(&err), "{bad:?}");
        }
        assert!(config(&parse(&["m.onnx"]).unwrap()).is_ok());
    }
}
