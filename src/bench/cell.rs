//! One cell, measured inside its own process: make the file it runs, time it with the `run` job
//! while NVML samples the GPU, then (as the plan asks) score it on the dataset with `validate`
//! and compare it with the FP32 model with `compare`.

use super::monitor::{memory_used_mib, summarize, Monitor, NvmlGpu};
use super::plan::CellSpec;
use super::prepare::{prepare, Prepared};
use super::record::{Artifact, CellAccuracy, CellCloseness, CellMetrics, GpuMemory, Latency};
use crate::backend::select::BackendOptions;
use crate::backend::select::Runtime;
use crate::backend::FileKind;
use crate::cuda::harness::{Amount, HarnessOptions};
use crate::data::dataset::DatasetOptions;
use crate::data::synthetic::{InputDistribution, RandomInputs};
use crate::jobs::compare::{compare, CompareConfig, InputSource, Saves, SideConfig};
use crate::jobs::run::{measure_latency, BatchResult, RunConfig};
use crate::jobs::validate::{validate, ValidateConfig, WarmupBatches};
use crate::metrics::closeness::Tolerance;
use crate::metrics::detection::outputs::DetectOptions;
use crate::onnx::OnnxModel;
use crate::progress::{NoProgress, Progress};
use crate::trt::engine_file::read_sidecar;
use anyhow::{Context, Result};
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::Instant;

const MIB: f64 = 1024.0 * 1024.0;

/// Tells the monitor when the measured phase runs: the `run` job starts its progress right
/// before warming up and finishes it after the last measured iteration.
struct PhaseMarks<'a>(Option<&'a Monitor>);

impl Progress for PhaseMarks<'_> {
    fn start(&self, _: &str, _: Option<u64>) {
        if let Some(m) = self.0 {
            m.phase_start();
        }
    }
    fn advance(&self, _: u64) {}
    fn status(&self, _: String) {}
    fn finish(&self) {
        if let Some(m) = self.0 {
            m.phase_end();
        }
    }
}

/// The backend options of the cell's target (the input shapes are the job's to set).
fn backend_of(spec: &CellSpec, target: Runtime) -> BackendOptions {
    let s = &spec.settings;
    BackendOptions {
        threads: s.threads,
        device_id: Some(s.device_id),
        tensorrt_dir: s.tensorrt_dir.clone(),
        ..Default::default()
    }
    .on(target)
}

/// Peak resident memory of this process, MiB (Linux; `None` elsewhere).
pub fn host_rss_peak_mib() -> Option<f64> {
    crate::host_memory::peak_rss_bytes().map(|b| b as f64 / (1024.0 * 1024.0))
}

/// Size, parameters and layers of the file a cell ran.
fn artifact(path: &Path) -> Artifact {
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let file = path.display().to_string();
    if FileKind::from_path(path) == Some(FileKind::Engine) {
        let facts = read_sidecar(path).ok().map(|s| s.facts);
        return Artifact {
            file,
            kind: "engine".into(),
            bytes,
            parameters: facts.as_ref().map(|f| f.parameters),
            layers: facts.map(|f| f.network_layers),
        };
    }
    let model = OnnxModel::load(path).ok();
    Artifact {
        file,
        kind: "onnx".into(),
        bytes,
        parameters: model.as_ref().map(OnnxModel::parameters),
        layers: model.map(|m| m.graph().node.len()),
    }
}

/// Times the prepared file at the cell's batch, with NVML sampling `gpu` (on GPU targets).
fn time_it(
    spec: &CellSpec,
    prepared: &Prepared,
    gpu: Option<&NvmlGpu>,
    notes: &mut Vec<String>,
) -> Result<(BatchResult, Option<Monitor>)> {
    let s = &spec.settings;
    let monitor = match gpu {
        Some(gpu) => Monitor::start(gpu, s.nvml_hz)
            .map_err(|why| notes.push(why))
            .ok(),
        None => None,
    };
    let config = RunConfig {
        model: prepared.path.clone(),
        batch_sizes: vec![spec.key.batch],
        backend: BackendOptions {
            input_shapes: s.shape_request(&spec.key.dims)?,
            ..backend_of(spec, spec.key.target)
        },
        harness: HarnessOptions {
            warmup: Amount::Iterations(s.warmup),
            measure: s
                .iterations
                .map(Amount::Iterations)
                .unwrap_or(Amount::Seconds(s.duration_s)),
            transfers: true,
            cuda_graph: false,
            streams: 1,
        },
        gpu_settings: vec![],
        dim_sweep: vec![],
    };
    let report = measure_latency(&config, &PhaseMarks(monitor.as_ref()))?;
    notes.extend(report.notes);
    let result = report
        .results
        .into_iter()
        .next()
        .context("the run job measured nothing")?;
    Ok((result, monitor))
}

/// Top-1/top-5 of the prepared file on the plan's dataset.
fn score(spec: &CellSpec, prepared: &Prepared, dataset: &Path) -> Result<CellAccuracy> {
    let report = validate(
        &ValidateConfig {
            model: prepared.path.clone(),
            dataset: dataset.to_path_buf(),
            dataset_options: DatasetOptions {
                annotations: spec.settings.annotations(),
                ..Default::default()
            },
            shuffle_seed: None,
            limit: spec.settings.limit,
            batch_size: spec.key.batch,
            backend: backend_of(spec, spec.key.target),
            warmup: WarmupBatches::Count(0),
            preprocess: spec.settings.preprocess.clone(),
            prefetch: 2,
            keep_predictions: false,
            detect: DetectOptions::evaluation(),
        },
        &NoProgress,
    )
    .context("accuracy on the dataset")?;
    Ok(CellAccuracy {
        images: report.images,
        top1_pct: 100.0 * report.counts.top1(),
        top5_pct: 100.0 * report.counts.top5(),
        miou_pct: report
            .segment
            .as_ref()
            .and_then(|m| m.miou)
            .map(|v| 100.0 * v),
        map_pct: report.detect.as_ref().map(|d| 100.0 * d.map.map50_95),
    })
}

/// Closeness of the prepared file to the FP32 model on `reference`.
fn closeness(spec: &CellSpec, prepared: &Prepared, reference: Runtime) -> Result<CellCloseness> {
    let batch = spec.key.batch;
    let samples = spec.settings.compare_samples.unwrap_or(batch.max(8));
    let report = compare(
        &CompareConfig {
            a: SideConfig {
                path: prepared.path.clone(),
                backend: backend_of(spec, spec.key.target),
            },
            b: SideConfig {
                path: spec.model.clone(),
                backend: backend_of(spec, reference),
            },
            input_shapes: spec.settings.shape_request(&spec.key.dims)?,
            batch_size: NonZeroUsize::new(batch.min(samples)),
            inputs: InputSource::Random {
                random: RandomInputs {
                    dist: InputDistribution::Uniform {
                        low: 0.0,
                        high: 1.0,
                    },
                    seed: 1,
                },
                int_inputs: Default::default(),
                samples,
            },
            tolerance: Tolerance::default(),
            topk: 5,
            task: Default::default(),
        },
        &Saves::default(),
        &NoProgress,
    )
    .context("comparison with FP32")?;
    let first = report
        .outputs
        .first()
        .context("the comparison found no output")?;
    Ok(CellCloseness {
        reference: format!("fp32 on {reference}"),
        samples,
        equal_pct: first.closeness.equal_pct,
        top1_agreement_pct: first.topk.as_ref().map(|k| k.top1_agreement_pct),
        max_abs_err: first.closeness.max_abs_err,
        task_agreement_pct: report.task.as_ref().and_then(|t| {
            t.detect
                .as_ref()
                .and_then(|d| d.agreement.matched_50_pct)
                .or(t.segment.as_ref().map(|s| s.agreement.pixel_agreement_pct))
        }),
    })
}

/// Measures one cell in this process.
pub(crate) fn run_cell(spec: &CellSpec) -> Result<CellMetrics> {
    let start = Instant::now();
    let s = &spec.settings;
    let on_gpu = spec.key.target.on_gpu();
    let gpu = on_gpu.then(|| NvmlGpu::of_cell(spec));
    let memory_before = gpu.as_ref().and_then(memory_used_mib);
    let prepared = prepare(spec)?;
    let mut notes = prepared.notes.clone();
    let (result, monitor) = time_it(spec, &prepared, gpu.as_ref(), &mut notes)?;
    let (samples, window, rate) = match monitor {
        Some(m) => {
            let (samples, window, rate) = m.stop();
            (samples, window, Some(rate))
        }
        None => (vec![], None, None),
    };
    let power = rate.map(|r| summarize(&samples, window, r, result.throughput));
    let gpu_memory = gpu_memory(memory_before, &samples, &result);
    let accuracy = match &s.dataset {
        Some(d) => Some(score(spec, &prepared, d)?),
        None => None,
    };
    let closeness = match s.compare_on {
        Some(reference) => Some(closeness(spec, &prepared, reference)?),
        None => None,
    };
    let latency_model_ms = result.latency_ms.compute.as_ref().map(Latency::from);
    Ok(CellMetrics {
        backend: result.backend.clone(),
        timing: result.timing.clone(),
        iterations: result.iterations,
        latency_all_ms: Latency::from(&result.latency_ms.all),
        latency_model_ms,
        ms_per_sample: result.latency_ms.all.mean / spec.key.batch as f64,
        samples_per_s: result.throughput,
        first_iteration_ms: result.first_iteration_ms,
        setup: Some(result.setup),
        gpu_memory,
        host_rss_peak_mib: host_rss_peak_mib(),
        accuracy,
        closeness,
        artifact: artifact(&prepared.path),
        power,
        monitor: samples,
        prepare_s: prepared.seconds,
        work_s: start.elapsed().as_secs_f64(),
        notes,
    })
}

/// GPU memory before and at peak: what this process held at most where the harness could read
/// it from NVML (backends timed on trtkit's streams: the VRAM figure users publish), else
/// NVML's whole-device readings, else the CUDA driver's counts from the harness.
fn gpu_memory(
    before: Option<f64>,
    samples: &[super::record::MonitorSample],
    result: &BatchResult,
) -> Option<GpuMemory> {
    if let Some(held) = result.memory.as_ref().and_then(|m| m.process_peak) {
        return Some(GpuMemory {
            before_mib: 0.0,
            peak_mib: held as f64 / MIB,
            method: "nvml (this process, peak while timed)".into(),
        });
    }
    let nvml_peak = samples
        .iter()
        .filter_map(|s| s.memory_used_mib)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    if let (Some(before), Some(peak)) = (before, nvml_peak) {
        return Some(GpuMemory {
            before_mib: before,
            peak_mib: peak,
            method: "nvml (whole device)".into(),
        });
    }
    result.memory.as_ref().map(|m| GpuMemory {
        before_mib: m.before_setup.used() as f64 / MIB,
        peak_mib: m.peak_used as f64 / MIB,
        method: m.peak_method.clone(),
    })
}
