//! `trtkit run MODEL|ENGINE --batch-size 1,16,32,64`: flags into a [`RunConfig`], and the
//! rendering of the latency report (table, JSON, per-iteration CSV/JSON export).

use crate::atomic_file::write_atomic;
use crate::cli::args::backend::BackendArgs;
use crate::cli::args::output::OutputArgs;
use crate::cli::args::timing::TimingArgs;
use crate::cli::progress::Bar;
use crate::cli::UsageError;
use crate::cuda::harness::HarnessOptions;
use crate::measure::latency::{measure_latency, BatchResult, GpuSetting, RunConfig, RunReport};
use crate::metrics::latency::{IterationSpans, Stats};
use crate::report::format::{bytes, json};
use crate::report::table::Table;
use anyhow::Result;
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ONNX model (or a TensorRT engine: .engine / .plan).
    pub model: PathBuf,
    /// Batch sizes to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub batch_size: Vec<usize>,
    /// Backend, device and threads for an ONNX model.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Warm-up and measured amounts.
    #[command(flatten)]
    pub timing: TimingArgs,
    /// GPU to run on (GPU backends only).
    #[arg(long)]
    pub device_id: Option<usize>,
    /// Keep inputs on the device and skip output copies: compute only (GPU backends).
    #[arg(long)]
    pub no_transfers: bool,
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
    pub export_times: Option<PathBuf>,
}

/// The measurement these flags describe; every flag check of `run` is here.
pub fn config(args: &RunArgs) -> Result<RunConfig> {
    let usage = |m: String| -> anyhow::Error { UsageError(m).into() };
    if args.batch_size.is_empty() || args.batch_size.contains(&0) {
        return Err(usage(
            "--batch-size takes positive integers, e.g. 1,16,32".into(),
        ));
    }
    args.timing.check().map_err(usage)?;
    if args.streams == Some(0) {
        return Err(usage("--streams must be at least 1".into()));
    }
    let gpu_settings = [
        (GpuSetting::DeviceId, args.device_id.is_some()),
        (GpuSetting::NoTransfers, args.no_transfers),
        (GpuSetting::CudaGraph, args.cuda_graph),
        (GpuSetting::Streams, args.streams.is_some()),
    ]
    .into_iter()
    .filter_map(|(s, set)| set.then_some(s))
    .collect();
    Ok(RunConfig {
        model: args.model.clone(),
        batch_sizes: args.batch_size.clone(),
        backend: args.backend.options(None),
        harness: HarnessOptions {
            warmup: args.timing.warmup(),
            measure: args.timing.measure(),
            transfers: !args.no_transfers,
            cuda_graph: args.cuda_graph,
            streams: args.streams.unwrap_or(1),
        },
        device_id: args.device_id,
        gpu_settings,
    })
}

/// Runs `run`.
pub fn run(args: RunArgs) -> Result<()> {
    let config = config(&args)?;
    let report = measure_latency(&config, &Bar::new("iterations", args.output.quiet()))?;
    if let Some(path) = &args.export_times {
        export_times(path, &report.results)?;
    }
    args.output
        .print(&report, |markdown| render(&report, markdown))
}

fn ms(s: Option<&Stats>, f: fn(&Stats) -> f64) -> String {
    s.map(|s| format!("{:.3}", f(s)))
        .unwrap_or_else(|| "-".into())
}

/// The terminal (or markdown) rendering: one row per batch size.
pub fn render(r: &RunReport, markdown: bool) -> String {
    let mut t = Table::new(&[
        "batch",
        "iters",
        "all mean ms",
        "all p99 ms",
        "all max ms",
        "model mean ms",
        "model p99 ms",
        "h2d ms",
        "d2h ms",
        "host ms",
        "samples/s",
        "GPU mem peak",
    ]);
    for b in &r.results {
        let l = &b.latency_ms;
        t.row(vec![
            b.batch.to_string(),
            b.iterations.to_string(),
            format!("{:.3}", l.all.mean),
            format!("{:.3}", l.all.p99),
            format!("{:.3}", l.all.max),
            ms(l.compute.as_ref(), |s| s.mean),
            ms(l.compute.as_ref(), |s| s.p99),
            ms(l.h2d.as_ref(), |s| s.mean),
            ms(l.d2h.as_ref(), |s| s.mean),
            format!("{:.3}", l.host.mean),
            format!("{:.1}", b.throughput),
            b.memory
                .as_ref()
                .map(|m| bytes(m.peak_used))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    let mut out = format!("model  {}\n", r.model);
    if let Some(g) = &r.gpu {
        out += &format!("gpu    {g}\n");
    }
    for n in &r.notes {
        out += &format!("note   {n}\n");
    }
    out += "\n";
    out += &if markdown {
        t.render_markdown()
    } else {
        t.render()
    };
    for b in &r.results {
        if let Some(m) = &b.memory {
            out += &format!(
                "batch {}: GPU memory used {} before setup, {} after, peak {} ({})\n",
                b.batch,
                bytes(m.before_setup.used()),
                bytes(m.after_setup.used()),
                bytes(m.peak_used),
                m.peak_method
            );
        }
    }
    out
}

/// CSV of every iteration: batch, index, stream and each span in ms (empty where unknown).
pub fn times_csv(results: &[BatchResult]) -> String {
    let mut out = String::from("batch,iteration,stream,h2d_ms,compute_ms,d2h_ms,all_ms,host_ms\n");
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
    for b in results {
        for (i, s) in b.spans.iter().enumerate() {
            out += &format!(
                "{},{i},{},{},{},{},{:.6},{:.6}\n",
                b.batch,
                s.stream,
                opt(s.h2d_ms),
                opt(s.compute_ms),
                opt(s.d2h_ms),
                s.all_ms,
                s.host_ms
            );
        }
    }
    out
}

fn export_times(path: &Path, results: &[BatchResult]) -> Result<()> {
    let csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let text = if csv {
        times_csv(results)
    } else {
        #[derive(Serialize)]
        struct Entry<'a> {
            batch: usize,
            backend: &'a str,
            timing: &'a str,
            iterations: &'a [IterationSpans],
        }
        let entries: Vec<Entry> = results
            .iter()
            .map(|b| Entry {
                batch: b.batch,
                backend: &b.backend,
                timing: &b.timing,
                iterations: &b.spans,
            })
            .collect();
        json(&entries)?
    };
    write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::harness::Amount;
    use crate::metrics::latency::SpanStats;
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
            vec![
                GpuSetting::NoTransfers,
                GpuSetting::CudaGraph,
                GpuSetting::Streams
            ]
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
            assert!(err.is::<UsageError>(), "{bad:?}");
        }
        assert!(config(&parse(&["m.onnx"]).unwrap()).is_ok());
    }

    #[test]
    fn csv_leaves_unknown_spans_empty() {
        let spans = vec![IterationSpans::wall_only(1.5)];
        let r = BatchResult {
            batch: 2,
            backend: "tract-cpu".into(),
            timing: "wall-clock".into(),
            iterations: 1,
            latency_ms: SpanStats::of(&spans).unwrap(),
            throughput: 1.0,
            wall_s: 1.0,
            memory: None,
            spans,
        };
        assert_eq!(
            times_csv(&[r]),
            "batch,iteration,stream,h2d_ms,compute_ms,d2h_ms,all_ms,host_ms\n2,0,0,,,,1.500000,1.500000\n"
        );
    }
}
