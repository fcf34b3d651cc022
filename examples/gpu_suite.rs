//! The GPU test suite: drives the timing harness with NVRTC kernels of known cost and checks
//! what it measures, then builds the test classifier's TensorRT engine and runs it through the
//! same harness and against tract-cpu, and with `--onnx MODEL` (a ResNet-50 export) runs a real
//! network on ONNX Runtime's CUDA provider through the same enqueue seam: plain, with CUDA
//! graphs and on 2 streams, then against tract-cpu, and with `--dataset DIR` (an image folder)
//! validates it through the GPU feed against tract-cpu, image by image. Not run by CI (it needs a GPU). Build it, then
//! run it on a machine with an NVIDIA GPU:
//!
//! ```text
//! cargo build --release --example gpu_suite
//! target/release/examples/gpu_suite [--device-id N] [--tensorrt-dir DIR] [--onnx resnet50.onnx [--dataset DIR]]
//! ```
//!
//! Prints one line per check (PASS/FAIL with the figures; SKIP with the reason where this GPU
//! cannot run the engine) and exits 1 when a check fails.

use anyhow::{Context, Result};
use std::process::ExitCode;
use trtkit::backend::engine::{TrtBackend, TrtOptions};
use trtkit::cuda::device::Gpu;
use trtkit::cuda::harness::{self, Amount, HarnessOptions, HarnessReport};
use trtkit::cuda::kernels::{KernelWorkload, Kernels, Work};
use trtkit::cuda::memory::DeviceBuffer;
use trtkit::jobs::compare::{compare, Saves, SideConfig};
use trtkit::jobs::doctor::check::{against_tract_cpu, build_classifier_engine};
use trtkit::metrics::closeness::Tolerance;
use trtkit::metrics::latency::{IterationSpans, Stats};
use trtkit::progress::NoProgress;

/// The anchor for pinned copies: PyTorch's pinned-tensor copies at 64 MiB on an H100 host, in
/// GiB/s (`scripts/bench_pinned_copy.py`).
const ANCHOR_COPY_GIBS: f64 = 51.0;

struct Suite {
    gpu: Gpu,
    kernels: std::sync::Arc<Kernels>,
    failed: usize,
    tensorrt_dir: Option<std::path::PathBuf>,
}

fn opts(warmup: u64, iters: u64, transfers: bool, graph: bool, streams: usize) -> HarnessOptions {
    HarnessOptions {
        warmup: Amount::Iterations(warmup),
        measure: Amount::Iterations(iters),
        transfers,
        cuda_graph: graph,
        streams,
    }
}

fn stat(r: &HarnessReport, f: fn(&IterationSpans) -> Option<f64>) -> Stats {
    let v: Vec<f64> = r.iterations.iter().filter_map(f).collect();
    Stats::from_samples(&v).expect("measured iterations")
}

/// The smallest latency-all − latency-model over a run's iterations.
fn smallest_all_minus_model(r: &HarnessReport) -> f64 {
    r.iterations
        .iter()
        .map(|s| s.all_ms - s.compute_ms.unwrap_or(f64::NAN))
        .fold(f64::INFINITY, f64::min)
}

impl Suite {
    fn check(&mut self, name: &str, pass: bool, detail: String) {
        println!("{} {name}: {detail}", if pass { "PASS" } else { "FAIL" });
        if !pass {
            self.failed += 1;
        }
    }

    fn run(&self, work: Work, batch: usize, o: &HarnessOptions) -> Result<HarnessReport> {
        let mut w = KernelWorkload::new(self.kernels.clone(), work);
        let (i, out) = w.io();
        harness::run(&self.gpu, &mut w, &i, &out, batch, o)
    }

    fn clock(&self) -> Result<f64> {
        let s = self.gpu.new_stream()?;
        self.kernels.measure_clock_ghz(&s, 20_000_000)?; // let the clock settle
        self.kernels.measure_clock_ghz(&s, 100_000_000)
    }

    fn spin_accuracy(&mut self) -> Result<()> {
        let ghz = self.clock()?;
        let expected_ms = 5.0;
        let cycles = (ghz * expected_ms * 1e6) as i64;
        let r = self.run(Work::Spin { cycles }, 1, &opts(3, 30, false, false, 1))?;
        let ghz_after = self.clock()?;
        let c = stat(&r, |s| s.compute_ms);
        let err = (c.mean - expected_ms) / expected_ms;
        self.check(
            "spin kernel event-timed within 2%",
            err.abs() < 0.02,
            format!(
                "{cycles} cycles at {ghz:.4} GHz (after: {ghz_after:.4} GHz) expect {expected_ms:.3} ms, measured mean {:.4} ms (min {:.4}, max {:.4}), error {:+.2}%",
                c.mean, c.min, c.max, err * 100.0
            ),
        );
        Ok(())
    }

    fn all_covers_model(&mut self) -> Result<()> {
        let mut worst = f64::INFINITY;
        let mut n = 0;
        for (streams, graph) in [(1, false), (2, false), (2, true)] {
            let r = self.run(
                Work::Copy { bytes: 1 << 20 },
                4,
                &opts(5, 200, true, graph, streams),
            )?;
            worst = worst.min(smallest_all_minus_model(&r));
            n += r.iterations.len();
        }
        self.check(
            "latency-all >= latency-model in every iteration",
            worst >= 0.0,
            format!("{n} iterations (copy 4 MiB, 1-2 streams, with and without graphs), smallest all - model = {worst:.6} ms"),
        );
        Ok(())
    }

    fn bandwidth(&mut self) -> Result<()> {
        let mib64 = 64usize << 20;
        let r = self.run(Work::Copy { bytes: mib64 }, 1, &opts(3, 20, true, false, 1))?;
        let gib = mib64 as f64 / (1u64 << 30) as f64;
        type Pick = fn(&IterationSpans) -> Option<f64>;
        let picks: [(&str, Pick); 2] = [("H2D", |s| s.h2d_ms), ("D2H", |s| s.d2h_ms)];
        for (dir, f) in picks {
            let st = stat(&r, f);
            let bw = gib / (st.mean / 1e3);
            let best = gib / (st.min / 1e3);
            self.check(
                &format!("pinned {dir} 64 MiB within 5% of {ANCHOR_COPY_GIBS} GiB/s"),
                bw >= ANCHOR_COPY_GIBS * 0.95,
                format!(
                    "mean {bw:.2} GiB/s (best {best:.2}), ratio to anchor {:.3}",
                    bw / ANCHOR_COPY_GIBS
                ),
            );
        }
        let c = stat(&r, |s| s.compute_ms);
        println!(
            "INFO copy kernel 64 MiB device-to-device: {:.3} ms, {:.1} GiB/s read+write",
            c.mean,
            2.0 * gib / (c.mean / 1e3)
        );
        Ok(())
    }

    fn overhead(&mut self) -> Result<()> {
        let mut per_iter = vec![];
        for graph in [false, true] {
            let r = self.run(Work::Empty, 1, &opts(500, 20_000, false, graph, 1))?;
            let us = r.wall_s * 1e6 / r.iterations.len() as f64;
            let host = stat(&r, |s| Some(s.host_ms));
            let model = stat(&r, |s| s.compute_ms);
            let all = stat(&r, |s| Some(s.all_ms));
            println!(
                "INFO empty kernel, no transfers, cuda graph {graph}: {us:.2} us per iteration (wall / iterations), host enqueue mean {:.2} us, latency-model mean {:.2} us, latency-all mean {:.2} us",
                host.mean * 1e3,
                model.mean * 1e3,
                all.mean * 1e3
            );
            per_iter.push(us);
        }
        self.check(
            "harness overhead with CUDA graphs under 10 us per iteration",
            per_iter[1] < 10.0,
            format!(
                "{:.2} us with graphs, {:.2} us without",
                per_iter[1], per_iter[0]
            ),
        );
        self.check(
            "CUDA graph replay lowers the overhead",
            per_iter[1] < per_iter[0],
            format!("{:.2} us -> {:.2} us", per_iter[0], per_iter[1]),
        );
        Ok(())
    }

    fn streams(&mut self) -> Result<()> {
        let ghz = self.clock()?;
        let cycles = (ghz * 50_000.0) as i64; // 50 us of one thread
        let mut tp = vec![];
        for k in [1usize, 2, 4] {
            let r = self.run(Work::Spin { cycles }, 1, &opts(100, 4000, false, false, k))?;
            println!(
                "INFO spin 50 us kernel, {k} stream(s): {:.0} inferences/s",
                r.throughput
            );
            tp.push(r.throughput);
        }
        self.check(
            "K streams raise throughput of a small kernel",
            tp[2] > 2.0 * tp[0] && tp[1] > 1.5 * tp[0],
            format!(
                "x{:.2} with 2 streams, x{:.2} with 4",
                tp[1] / tp[0],
                tp[2] / tp[0]
            ),
        );
        Ok(())
    }

    fn bad_input(&mut self) -> Result<()> {
        let m = self.gpu.mem_info()?;
        let err = DeviceBuffer::new(&self.gpu, (m.total + (1 << 30)) as usize)
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        self.check(
            "out of memory says asked and free",
            err.contains("out of GPU memory") && err.contains("asked for") && err.contains("free"),
            err,
        );
        let err = Gpu::open(4096)
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        self.check(
            "--device-id out of range",
            err.contains("out of range"),
            err,
        );
        Ok(())
    }
}

/// Compares side `a` with `model` on tract-cpu over 64 seeded samples: the top-1 agreement (0
/// without a class axis) and the first output's closeness.
fn top1_against_tract_cpu(
    a: SideConfig,
    model: &std::path::Path,
    batch: usize,
    tolerance: Tolerance,
) -> Result<(f64, trtkit::metrics::closeness::Closeness)> {
    let config = against_tract_cpu(a, model, batch, 64, tolerance);
    let report = compare(&config, &Saves::default(), &NoProgress)?;
    let out = report.outputs.into_iter().next().context("no output")?;
    let top1 = out.topk.map(|k| k.top1_agreement_pct).unwrap_or(0.0);
    Ok((top1, out.closeness))
}

/// Builds the test classifier's dynamic-batch engine (batch 1..8) in `dir` with the build job.
fn build_test_engine(
    dir: &std::path::Path,
    tensorrt_dir: Option<std::path::PathBuf>,
) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    use trtkit::onnx::{test_models, OnnxModel};
    let model = dir.join("clf.onnx");
    OnnxModel::from_proto(test_models::classifier(None), &model).save(&model)?;
    let note = |n: &str| println!("INFO build: {n}");
    let engine = build_classifier_engine(dir, &model, 8, tensorrt_dir, &note)?;
    Ok((engine, model))
}

impl Suite {
    /// The engine path: build, open on this GPU (or SKIP with the reason), time through the
    /// harness, compare with tract-cpu.
    fn engine(&mut self) -> Result<()> {
        let dir = tempfile::tempdir()?;
        let (engine, model) = match build_test_engine(dir.path(), self.tensorrt_dir.clone()) {
            Ok(built) => built,
            Err(e) => {
                println!("SKIP engine section: {e:#}");
                return Ok(());
            }
        };
        println!("INFO engine built: {}", engine.display());
        let options = TrtOptions {
            device_id: self.gpu.id(),
            tensorrt_dir: self.tensorrt_dir.clone(),
        };
        let mut backend = match TrtBackend::open(&engine, &options) {
            Ok(b) => b,
            Err(e) => {
                println!("SKIP engine section: {e:#}");
                return Ok(());
            }
        };
        use trtkit::backend::Backend;
        let (inputs, outputs) = (backend.inputs().to_vec(), backend.outputs().to_vec());
        let mut worst = f64::INFINITY;
        let mut n = 0;
        for (batch, graph, streams) in [(4, false, 1), (8, true, 2)] {
            let r = harness::run(
                &self.gpu,
                &mut backend,
                &inputs,
                &outputs,
                batch,
                &opts(5, 100, true, graph, streams),
            )?;
            println!(
                "INFO engine batch {batch} (graph {graph}, {streams} stream(s)): first iteration {:.3} ms, latency-model mean {:.4} ms, latency-all mean {:.4} ms, {:.0} samples/s",
                r.first_iteration_ms,
                stat(&r, |s| s.compute_ms).mean,
                stat(&r, |s| Some(s.all_ms)).mean,
                r.throughput
            );
            worst = worst.min(smallest_all_minus_model(&r));
            n += r.iterations.len();
        }
        self.check(
            "engine: latency-all >= latency-model in every iteration",
            worst >= 0.0,
            format!("{n} iterations, smallest all - model = {worst:.6} ms"),
        );
        for note in backend.finish()? {
            println!("INFO {note}");
        }
        let a = SideConfig {
            path: engine.clone(),
            backend: trtkit::backend::select::BackendOptions {
                device_id: Some(self.gpu.id()),
                tensorrt_dir: self.tensorrt_dir.clone(),
                ..Default::default()
            },
        };
        let tolerance = Tolerance {
            rtol: 1e-3,
            atol: 1e-5,
            equal_nan: false,
        };
        let (top1, out) = top1_against_tract_cpu(a, &model, 8, tolerance)?;
        self.check(
            "engine vs tract-cpu: top-1 agreement 100%",
            top1 == 100.0,
            format!(
                "top-1 agreement {top1:.2}%, max abs error {:.3e}, equal {:.2}% at rtol 1e-3 atol 1e-5, 64 samples",
                out.max_abs_err, out.equal_pct
            ),
        );
        Ok(())
    }
}

impl Suite {
    /// A real network on ONNX Runtime's CUDA provider through the enqueue seam engines use.
    fn ort_network(&mut self, model: &std::path::Path) -> Result<()> {
        use trtkit::backend::select::{BackendKind, BackendOptions};
        let batch = 32;
        let options = BackendOptions {
            kind: BackendKind::Ort,
            device: trtkit::backend::Device::Cuda,
            device_id: Some(self.gpu.id()),
            batch: Some(batch),
            ..Default::default()
        };
        let mut backend = trtkit::backend::open(model, &options)?;
        let (inputs, outputs) = (backend.inputs().to_vec(), backend.outputs().to_vec());
        let enqueue = backend
            .gpu()
            .context("ort-cuda enqueues on trtkit's streams")?;
        let mut worst = f64::INFINITY;
        let mut n = 0;
        let mut plain_model_ms = 0.0;
        for (name, graph, streams) in [
            ("plain", false, 1),
            ("CUDA graph", true, 1),
            ("2 streams", false, 2),
        ] {
            let r = harness::run(
                &self.gpu,
                enqueue,
                &inputs,
                &outputs,
                batch,
                &opts(10, 100, true, graph, streams),
            )?;
            let model_ms = stat(&r, |s| s.compute_ms).mean;
            if !graph && streams == 1 {
                plain_model_ms = model_ms;
            }
            println!(
                "INFO ort-cuda {} batch {batch} {name}: first iteration {:.1} ms, latency-model mean {model_ms:.3} ms, latency-all mean {:.3} ms, {:.0} samples/s, process GPU memory peak {}",
                model.display(),
                r.first_iteration_ms,
                stat(&r, |s| Some(s.all_ms)).mean,
                r.throughput,
                r.memory.process_peak.map(trtkit::report::format::bytes).unwrap_or("?".into())
            );
            worst = worst.min(smallest_all_minus_model(&r));
            n += r.iterations.len();
        }
        self.check(
            "ort-cuda ResNet-50: latency-all >= latency-model in every iteration (plain, graph, 2 streams)",
            worst >= 0.0 && plain_model_ms > 0.0,
            format!("{n} iterations, smallest all - model = {worst:.6} ms"),
        );
        drop(backend);
        let a = SideConfig {
            path: model.to_path_buf(),
            backend: options,
        };
        let tolerance = Tolerance {
            rtol: 1e-2,
            atol: 1e-3,
            equal_nan: false,
        };
        let (top1, out) = top1_against_tract_cpu(a, model, batch, tolerance)?;
        self.check(
            "ort-cuda ResNet-50 vs tract-cpu: top-1 agreement 100%",
            top1 == 100.0,
            format!(
                "top-1 agreement {top1:.2}%, max abs error {:.3e}, cosine {:.6}, 64 samples",
                out.max_abs_err, out.cosine
            ),
        );
        Ok(())
    }
}

impl Suite {
    /// `validate` through the GPU feed (pinned ring, trtkit's copies on two streams around one
    /// session's inference stream) against `validate` on tract-cpu: the same images, the same
    /// top-1 per image.
    fn validate_feed(&mut self, model: &std::path::Path, dataset: &std::path::Path) -> Result<()> {
        use trtkit::backend::select::{BackendKind, BackendOptions};
        use trtkit::jobs::validate::{validate, ValidateConfig, WarmupBatches};
        let config = |kind, device| ValidateConfig {
            model: model.to_path_buf(),
            dataset: dataset.to_path_buf(),
            dataset_options: Default::default(),
            shuffle_seed: Some(1),
            limit: Some(96),
            batch_size: 32,
            backend: BackendOptions {
                kind,
                device,
                device_id: Some(self.gpu.id()),
                ..Default::default()
            },
            warmup: WarmupBatches::Count(1),
            preprocess: Default::default(),
            prefetch: 2,
            keep_predictions: true,
            detect: trtkit::metrics::detection::outputs::DetectOptions::evaluation(),
        };
        let gpu = validate(
            &config(BackendKind::Ort, trtkit::backend::Device::Cuda),
            &NoProgress,
        )?;
        let cpu = validate(
            &config(BackendKind::Tract, trtkit::backend::Device::Cpu),
            &NoProgress,
        )?;
        println!(
            "INFO validate ort-cuda ({}): {} images, {:.0} images/s, split {:?}",
            gpu.data_path, gpu.images, gpu.images_per_s, gpu.time_split
        );
        self.check(
            "validate ort-cuda: the GPU feed's two slots share one session (one inference stream)",
            gpu.data_path.contains("one inference stream"),
            format!("GPU path: {}", gpu.data_path),
        );
        let same = gpu
            .predictions
            .iter()
            .zip(&cpu.predictions)
            .filter(|(a, b)| a.file == b.file && a.top5.first() == b.top5.first())
            .count();
        self.check(
            "validate ort-cuda (GPU feed) vs tract-cpu: the same top-1 for every image",
            same == cpu.predictions.len() && gpu.images == cpu.images && gpu.images > 0,
            format!(
                "{same} of {} images agree; GPU path: {}",
                cpu.predictions.len(),
                gpu.data_path
            ),
        );
        Ok(())
    }
}

fn flag(name: &str) -> Option<String> {
    std::env::args().skip_while(|a| a != name).nth(1)
}

fn main() -> ExitCode {
    let device_id = flag("--device-id")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let tensorrt_dir = flag("--tensorrt-dir").map(std::path::PathBuf::from);
    let onnx = flag("--onnx").map(std::path::PathBuf::from);
    let outcome = (|| -> Result<usize> {
        let gpu = Gpu::open(device_id)?;
        let kernels = Kernels::compile(&gpu).context("compiling the test kernels")?;
        let m = gpu.mem_info()?;
        println!(
            "GPU {} ({}), {} free of {}",
            gpu.id(),
            gpu.name(),
            trtkit::report::format::bytes(m.free),
            trtkit::report::format::bytes(m.total)
        );
        let mut s = Suite {
            gpu,
            kernels,
            failed: 0,
            tensorrt_dir,
        };
        s.spin_accuracy()?;
        s.all_covers_model()?;
        s.bandwidth()?;
        s.overhead()?;
        s.streams()?;
        s.bad_input()?;
        s.engine()?;
        if let Some(model) = &onnx {
            s.ort_network(model)?;
            if let Some(dataset) = flag("--dataset") {
                s.validate_feed(model, std::path::Path::new(&dataset))?;
            }
        }
        Ok(s.failed)
    })();
    match outcome {
        Ok(0) => {
            println!("all checks passed");
            ExitCode::SUCCESS
        }
        Ok(n) => {
            println!("{n} check(s) failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
