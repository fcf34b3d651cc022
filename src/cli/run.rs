//! `trtkit run MODEL|ENGINE --batch-size 1,16,32,64`: latency, throughput and GPU memory.
//!
//! GPU backends (those whose [`Backend::gpu`] is `Some`) run through the event-timed harness
//! in `cuda::harness`: H2D, compute (latency-model) and D2H spans on the GPU clock,
//! latency-all from the first copy in to the last copy out. Backends without it (tract on the
//! CPU) are timed on the wall clock around `Backend::run`: latency-all only, said in the output.

use crate::atomic_file::write_atomic;
use crate::backend::select::open;
use crate::backend::{Backend, Device};
use crate::cli::backend_args::BackendArgs;
use crate::cli::UsageError;
use crate::cuda::device::Gpu;
use crate::cuda::harness::{self, Amount, HarnessOptions, MemoryReport};
use crate::metrics::latency::{throughput, IterationSpans, SpanStats, Stats};
use crate::onnx::OnnxModel;
use crate::report::format::{bytes, json};
use crate::report::table::Table;
use crate::tensor::{ElemType, HostTensor, IoSpec, TensorData};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
    /// GPU to run on (GPU backends only).
    #[arg(long)]
    pub device_id: Option<usize>,
    /// Warm-up iterations before measuring.
    #[arg(long, default_value_t = 10, conflicts_with = "warmup")]
    pub warmup_iterations: u64,
    /// Warm up for this many seconds instead of a number of iterations.
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Measured iterations per batch size.
    #[arg(long, default_value_t = 100, conflicts_with = "duration")]
    pub iterations: u64,
    /// Measure for this many seconds instead of a number of iterations.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Keep inputs on the device and skip output copies: compute only (GPU backends).
    #[arg(long)]
    pub no_transfers: bool,
    /// Capture the inference into a CUDA graph once and replay it (GPU backends).
    #[arg(long)]
    pub cuda_graph: bool,
    /// Concurrent CUDA streams, each with its own buffers (GPU backends).
    #[arg(long)]
    pub streams: Option<usize>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write every measured iteration's spans to FILE (.csv, otherwise JSON).
    #[arg(long, value_name = "FILE")]
    pub export_times: Option<PathBuf>,
}

/// Results for one batch size.
#[derive(Clone, Debug, Serialize)]
pub struct BatchResult {
    /// Batch size.
    pub batch: usize,
    /// Backend name.
    pub backend: String,
    /// `cuda-events` (GPU clock, full span breakdown) or `wall-clock` (latency-all only).
    pub timing: String,
    /// Measured iterations.
    pub iterations: usize,
    /// Statistics of every span, milliseconds.
    pub latency_ms: SpanStats,
    /// Samples per second over the measured wall time.
    pub throughput: f64,
    /// Wall time of the measured phase, seconds.
    pub wall_s: f64,
    /// GPU memory (GPU backends only).
    pub memory: Option<MemoryReport>,
    /// Every measured iteration (exported with `--export-times`, not printed).
    #[serde(skip)]
    pub spans: Vec<IterationSpans>,
}

/// The whole report of `run`.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Model or engine path.
    pub model: String,
    /// GPU name when a GPU backend ran.
    pub gpu: Option<String>,
    /// What each number covers.
    pub notes: Vec<String>,
    /// One entry per batch size.
    pub results: Vec<BatchResult>,
}

const ENGINE_EXTENSIONS: [&str; 3] = ["engine", "plan", "trt"];

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// Checks flag combinations that clap cannot.
pub fn validate(args: &RunArgs) -> Result<()> {
    if args.batch_size.is_empty() || args.batch_size.contains(&0) {
        return Err(usage("--batch-size takes positive integers, e.g. 1,16,32"));
    }
    if args.iterations == 0 {
        return Err(usage("--iterations must be at least 1"));
    }
    for (flag, v) in [("--duration", args.duration), ("--warmup", args.warmup)] {
        if let Some(s) = v {
            if !(s.is_finite() && s > 0.0) {
                return Err(usage(format!("{flag} takes a positive number of seconds")));
            }
        }
    }
    if args.streams == Some(0) {
        return Err(usage("--streams must be at least 1"));
    }
    Ok(())
}

fn is_engine(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ENGINE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Opens the backend that runs `model` at `batch` (the TensorRT engine joins here).
pub fn open_backend(model: &OnnxModel, args: &RunArgs, batch: usize) -> Result<Box<dyn Backend>> {
    open(model, &args.backend.options(batch))
}

fn harness_options(args: &RunArgs) -> HarnessOptions {
    HarnessOptions {
        warmup: args
            .warmup
            .map(Amount::Seconds)
            .unwrap_or(Amount::Iterations(args.warmup_iterations)),
        measure: args
            .duration
            .map(Amount::Seconds)
            .unwrap_or(Amount::Iterations(args.iterations)),
        transfers: !args.no_transfers,
        cuda_graph: args.cuda_graph,
        streams: args.streams.unwrap_or(1),
    }
}

/// Deterministic host inputs for a CPU run: floats in [0, 1), other types zero.
fn host_inputs(specs: &[IoSpec], batch: usize) -> Result<Vec<HostTensor>> {
    specs
        .iter()
        .map(|s| {
            let shape = s.concrete_shape(batch)?;
            let n: usize = shape.iter().product();
            let f = |i: usize| ((i * 7919) % 1000) as f32 / 1000.0;
            let data = match s.elem_type {
                ElemType::F32 => TensorData::F32((0..n).map(f).collect()),
                ElemType::F16 => {
                    TensorData::F16((0..n).map(|i| half::f16::from_f32(f(i))).collect())
                }
                ElemType::F64 => TensorData::F64((0..n).map(|i| f64::from(f(i))).collect()),
                ElemType::I64 => TensorData::I64(vec![0; n]),
                ElemType::I32 => TensorData::I32(vec![0; n]),
                ElemType::I8 => TensorData::I8(vec![0; n]),
                ElemType::U8 => TensorData::U8(vec![0; n]),
                ElemType::Bool => TensorData::Bool(vec![false; n]),
            };
            HostTensor::new(s.name.clone(), shape, data)
        })
        .collect()
}

fn run_cpu(
    backend: &mut dyn Backend,
    batch: usize,
    options: &HarnessOptions,
) -> Result<BatchResult> {
    let inputs = host_inputs(backend.inputs(), batch)?;
    let bar = indicatif::ProgressBar::new_spinner()
        .with_message(format!("{} batch {batch}", backend.name()));
    let mut phase = |amount: Amount, record: bool| -> Result<(Vec<IterationSpans>, f64)> {
        let start = Instant::now();
        let mut spans = vec![];
        let mut i = 0u64;
        while match amount {
            Amount::Iterations(n) => i < n,
            Amount::Seconds(s) => start.elapsed().as_secs_f64() < s,
        } {
            let t = Instant::now();
            backend.run(&inputs)?;
            if record {
                spans.push(IterationSpans::wall_only(t.elapsed().as_secs_f64() * 1e3));
            }
            bar.tick();
            i += 1;
        }
        Ok((spans, start.elapsed().as_secs_f64()))
    };
    phase(options.warmup, false)?;
    let (spans, wall_s) = phase(options.measure, true)?;
    bar.finish_and_clear();
    let samples = spans.len() as u64 * batch as u64;
    Ok(BatchResult {
        batch,
        backend: backend.name(),
        timing: "wall-clock".into(),
        iterations: spans.len(),
        latency_ms: SpanStats::of(&spans).context("no iteration was measured")?,
        throughput: throughput(samples, wall_s),
        wall_s,
        memory: None,
        spans,
    })
}

fn check_cpu_flags(args: &RunArgs, name: &str) -> Result<()> {
    let gpu_flags = [
        ("--device-id", args.device_id.is_some()),
        ("--no-transfers", args.no_transfers),
        ("--cuda-graph", args.cuda_graph),
        ("--streams", args.streams.is_some()),
    ];
    if let Some((flag, _)) = gpu_flags.iter().find(|(_, set)| *set) {
        return Err(usage(format!(
            "{flag} needs a backend that enqueues on trtkit's CUDA streams; {name} does not (it is timed on the wall clock)"
        )));
    }
    Ok(())
}

/// Runs `run`.
pub fn run(args: RunArgs) -> Result<()> {
    validate(&args)?;
    let shown = args.model.display().to_string();
    if is_engine(&args.model) {
        let probes = crate::trt::loader::probe_tensorrt();
        let nvinfer = probes.iter().find(|p| p.library == "libnvinfer");
        match nvinfer {
            Some(p) if p.found => bail!(
                "{shown}: running TensorRT engines is not built into trtkit yet (TensorRT {} was found)",
                p.version.clone().unwrap_or_default()
            ),
            _ => bail!(
                "{shown}: running a TensorRT engine requires TensorRT (libnvinfer), which was not found on this machine; `trtkit doctor` lists what was tried"
            ),
        }
    }
    let model = OnnxModel::load(&args.model)?;
    let options = harness_options(&args);
    let mut gpu: Option<Gpu> = None;
    let mut results = vec![];
    let mut notes = vec![];
    for &batch in &args.batch_size {
        let mut backend = open_backend(&model, &args, batch)
            .with_context(|| format!("{shown}: batch {batch}"))?;
        let name = backend.name();
        let inputs = backend.inputs().to_vec();
        let outputs = backend.outputs().to_vec();
        let result = match backend.gpu() {
            Some(enqueue) => {
                let g = match &gpu {
                    Some(g) => g.clone(),
                    None => {
                        let g = Gpu::open(args.device_id.unwrap_or(0))?;
                        gpu = Some(g.clone());
                        g
                    }
                };
                let r = harness::run(&g, enqueue, &inputs, &outputs, batch, &options)
                    .with_context(|| format!("{shown}: {name}"))?;
                let note = format!("{name}: CUDA events on the GPU clock; latency-model = inference only, latency-all = first H2D start to last D2H end{}", if options.transfers { "" } else { " (--no-transfers: no copies)" });
                if !notes.contains(&note) {
                    notes.push(note);
                }
                BatchResult {
                    batch,
                    backend: name,
                    timing: "cuda-events".into(),
                    iterations: r.iterations.len(),
                    latency_ms: SpanStats::of(&r.iterations)
                        .context("no iteration was measured")?,
                    throughput: r.throughput,
                    wall_s: r.wall_s,
                    memory: Some(r.memory),
                    spans: r.iterations,
                }
            }
            None => {
                check_cpu_flags(&args, &name)?;
                let note = if args.backend.device == Device::Cuda {
                    format!("{name}: wall clock around each inference (host tensors in → host tensors out, copies to and from the GPU included); tract's CUDA runtime runs on its own streams, so no event-timed spans: latency-all only")
                } else {
                    format!("{name}: wall clock around each inference (host tensors in → host tensors out); latency-all only, no GPU spans")
                };
                if !notes.contains(&note) {
                    notes.push(note);
                }
                run_cpu(backend.as_mut(), batch, &options)
                    .with_context(|| format!("{shown}: {name} at batch {batch}"))?
            }
        };
        results.push(result);
    }
    let report = RunReport {
        model: shown,
        gpu: gpu.map(|g| format!("{} (GPU {})", g.name(), g.id())),
        notes,
        results,
    };
    if let Some(path) = &args.export_times {
        export_times(path, &report.results)?;
    }
    print!(
        "{}",
        if args.json {
            json(&report)?
        } else {
            render(&report)
        }
    );
    Ok(())
}

fn ms(s: Option<&Stats>, f: fn(&Stats) -> f64) -> String {
    s.map(|s| format!("{:.3}", f(s)))
        .unwrap_or_else(|| "-".into())
}

/// The terminal rendering: one row per batch size.
pub fn render(r: &RunReport) -> String {
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
    out += &t.render();
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
        let h = harness_options(&a);
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
            "--warmup",
            "1",
        ])
        .unwrap();
        let h = harness_options(&b);
        assert!(!h.transfers && h.cuda_graph);
        assert_eq!((h.streams, h.warmup), (4, Amount::Seconds(1.0)));
        assert!(parse(&["m.onnx", "--iterations", "5", "--duration", "1"]).is_err());
        assert!(parse(&["m.onnx", "--batch-size", "1,x"]).is_err());
    }

    #[test]
    fn rejects_bad_values() {
        for bad in [
            &["m.onnx", "--batch-size", "0"][..],
            &["m.onnx", "--iterations", "0"],
            &["m.onnx", "--duration", "0"],
            &["m.onnx", "--streams", "0"],
        ] {
            let err = validate(&parse(bad).unwrap()).unwrap_err();
            assert!(err.is::<UsageError>(), "{bad:?}");
        }
        assert!(validate(&parse(&["m.onnx"]).unwrap()).is_ok());
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
        assert!(is_engine(Path::new("a/m.ENGINE")) && !is_engine(Path::new("m.onnx")));
    }
}
