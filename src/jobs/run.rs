//! The `run` job: latency, throughput and GPU memory of one model at several batch sizes.
//!
//! GPU backends (those whose [`Backend::gpu`] is `Some`) go through the event-timed harness in
//! `cuda::harness`: H2D, compute (latency-model) and D2H spans on the GPU clock, latency-all from
//! the first copy in to the last copy out. Backends without it (tract on the CPU) are timed here,
//! on the wall clock around `Backend::run`: latency-all only, and the report says so. Both feed
//! the same inputs ([`timing_inputs`](crate::data::synthetic::timing_inputs)) and share the statistics of `metrics::latency`.

use crate::backend::batch_memory::{check_gpu, check_host, model_sample_bytes};
use crate::backend::select::BackendOptions;
use crate::backend::{open, FileKind};
use crate::backend::{Backend, Device};
use crate::cuda::device::Gpu;
use crate::cuda::harness::{self, Amount, HarnessOptions, HarnessReport, MemoryReport};
use crate::data::synthetic::{apply_int_inputs, timing_inputs_on, TIMING_SEED};
use crate::error::{fix_with, Hint, Setting, TypedError};
use crate::metrics::latency::{throughput, IterationSpans, SpanStats};
use crate::metrics::setup::SetupTimes;
use crate::onnx::input_roles::int_input_roles;
use crate::onnx::shape::{dim_points, DimSweep};
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::tensor::IntInput;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// Everything a `run` measurement needs.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The model (ONNX) or engine file.
    pub model: PathBuf,
    /// Batch sizes to measure, in order.
    pub(crate) batch_sizes: Vec<usize>,
    /// The backend that runs an ONNX model (its batch is set per batch size).
    pub backend: BackendOptions,
    /// Named axes to sweep (`seq` → 64, 128, …): every batch size runs at every combination.
    pub(crate) dim_sweep: DimSweep,
    /// Warm-up, measured amount, transfers, CUDA graphs and streams.
    pub harness: HarnessOptions,
    /// Whether any setting that only GPU backends honour was asked for explicitly (a device id,
    /// no transfers, CUDA graphs, a stream count): a CPU backend then refuses to run.
    pub(crate) gpu_settings: Vec<Setting>,
}

/// A GPU-only `setting` asked of `backend`, which runs host tensors: an error whose message
/// follows the setting's name, which its hint carries.
fn needs_gpu_backend(setting: Setting, backend: &str) -> TypedError {
    TypedError::hinted(
        Hint::NeedsGpuBackend(setting),
        format!("needs a backend that enqueues on trtkit's CUDA streams; {backend} does not (it is timed on the wall clock)"),
    )
}

/// Results for one batch size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BatchResult {
    /// Batch size.
    pub batch: usize,
    /// Sizes of the swept named axes (`seq` → 128); empty without a sweep.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dims: BTreeMap<String, i64>,
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
    /// Wall time of the first inference at this batch size, milliseconds: run on its own
    /// before the warm-up (TensorRT-RTX compiles its kernels there) and left out of every
    /// statistic.
    pub first_iteration_ms: f64,
    /// Where the time before the first measured iteration went: opening the backend, the
    /// harness's preparation (GPU backends), the first inference, and their total. Zero in
    /// reports written before it was recorded.
    #[serde(default)]
    pub setup: SetupTimes,
    /// GPU memory (GPU backends only).
    pub memory: Option<MemoryReport>,
    /// Every measured iteration (exported on request, not printed).
    #[serde(skip)]
    pub(crate) spans: Vec<IterationSpans>,
}

/// The whole report of `run`.
#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// Checks the largest batch of the list against the host memory left before the first one is
/// measured, so that a list ending in an impossible batch fails at once, not after the others.
fn check_largest_batch(config: &RunConfig, model: &OnnxModel) -> Result<()> {
    let Some(&largest) = config.batch_sizes.iter().max() else {
        return Ok(());
    };
    check_host(Setting::BatchSize, largest, model_sample_bytes(model))
        .with_context(|| format!("{}: batch {largest}", config.model.display()))?;
    Ok(())
}

/// Measures `config.model` at every batch size (and every combination of the swept named axes).
/// An ONNX model is opened once per batch size and combination (its reference backend is
/// prepared for one shape); an engine once for all of them.
pub(crate) fn measure_latency(config: &RunConfig, progress: &dyn Progress) -> Result<RunReport> {
    let shown = config.model.display().to_string();
    let options = &config.harness;
    let mut gpu: Option<Gpu> = None;
    let mut results = vec![];
    let mut notes = vec![];
    let is_engine = FileKind::from_path(&config.model) == Some(FileKind::Engine);
    if is_engine && !config.dim_sweep.is_empty() {
        return Err(fix_with(
            Setting::InputShape,
            format!("{shown}: an engine's axes carry no names; its shapes are those of its optimization profile"),
        ));
    }
    let mut engine: Option<Box<dyn Backend>> = None;
    // Integer inputs of an ONNX model take the values its graph says (token ids, masks).
    let model = (!is_engine)
        .then(|| OnnxModel::load(&config.model).ok())
        .flatten();
    let roles = model.as_ref().map(int_input_roles).unwrap_or_default();
    if let Some(model) = model {
        check_largest_batch(config, &model)?;
    }
    if !roles.is_empty() {
        let said: Vec<String> = roles.iter().map(|(n, r)| format!("{n}: {r}")).collect();
        notes.push(format!("integer inputs: {}", said.join("; ")));
    }
    let points = dim_points(&config.dim_sweep);
    for (&batch, point) in config
        .batch_sizes
        .iter()
        .flat_map(|b| points.iter().map(move |p| (b, p)))
    {
        let dims: BTreeMap<String, i64> =
            point.iter().map(|d| (d.symbol.clone(), d.size)).collect();
        let at = point_label(batch, &dims);
        let open_start = Instant::now();
        let reused = engine.is_some();
        let mut opened;
        let backend: &mut Box<dyn Backend> = if is_engine {
            match &mut engine {
                Some(e) => e,
                None => engine.insert(open(&config.model, &config.backend)?),
            }
        } else {
            let backend_options = BackendOptions {
                batch: Some(batch),
                input_shapes: config.backend.input_shapes.with_dims(point),
                ..config.backend.clone()
            };
            opened =
                open(&config.model, &backend_options).with_context(|| format!("{shown}: {at}"))?;
            &mut opened
        };
        let mut open_ms = if reused { 0.0 } else { ms_since(open_start) };
        let name = backend.name();
        let inputs = backend.inputs().to_vec();
        let outputs = backend.outputs().to_vec();
        let (mut result, note) = match backend.gpu() {
            Some(enqueue) => {
                let g = match &gpu {
                    Some(g) => g.clone(),
                    None => {
                        let opening = Instant::now();
                        let g = gpu.insert(Gpu::open(config.backend.device_id.unwrap_or(0))?);
                        open_ms += ms_since(opening);
                        g.clone()
                    }
                };
                progress.start(&format!("{name} {at}"), None);
                let r = check_gpu(&g, (&inputs, &outputs), batch, options.streams)
                    .and_then(|()| harness::run(&g, enqueue, &inputs, &outputs, batch, options))
                    .with_context(|| format!("{shown}: {name}"));
                progress.finish();
                let note = format!("{name}: CUDA events on the GPU clock; latency-model = inference only, latency-all = first H2D start to last D2H end{}", if options.transfers { "" } else { " (no transfers: no copies)" });
                (harness_result(r?, name, dims)?, note)
            }
            None => {
                if let Some(&setting) = config.gpu_settings.first() {
                    return Err(needs_gpu_backend(setting, &name).into());
                }
                let note = if config.backend.device == Device::Cuda {
                    format!("{name}: wall clock around each inference (host tensors in → host tensors out, copies to and from the GPU included); tract's CUDA runtime runs on its own streams, so no event-timed spans: latency-all only")
                } else {
                    format!("{name}: wall clock around each inference (host tensors in → host tensors out); latency-all only, no GPU spans")
                };
                let mut result =
                    measure_wall_clock(backend.as_mut(), batch, options, &roles, progress)
                        .with_context(|| format!("{shown}: {name} at {at}"))?;
                result.dims = dims;
                (result, note)
            }
        };
        result.setup = result.setup.with_open(open_ms);
        if !notes.contains(&note) {
            notes.push(note);
        }
        results.push(result);
        if !is_engine {
            notes.extend(backend.finish()?);
        }
    }
    if let Some(mut e) = engine {
        notes.extend(e.finish()?);
    }
    notes.push(setup_note(is_engine && results.len() > 1));
    if config.backend.op_profile && !notes.iter().any(|n| n.contains("op profile")) {
        notes.push(
            "op profile: nothing profiled: --op-profile reads ONNX Runtime's profiler, and this run was not on ONNX Runtime".into(),
        );
    }
    Ok(RunReport {
        model: shown,
        gpu: gpu.map(|g| format!("{} (GPU {})", g.name(), g.id())),
        notes,
        results,
    })
}

/// Milliseconds since `start`.
fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// What the set-up figures cover; `engine_shared` where one engine ran several batches.
fn setup_note(engine_shared: bool) -> String {
    let mut note = "set-up: opening the backend, the harness's preparation (GPU backends) and the first inference, per batch, timed on the wall clock and left out of every figure".to_string();
    if engine_shared {
        note += "; the engine is opened once for all batches, so its open time counts in the first batch's set-up only";
    }
    note
}

/// The result of one batch from the harness's report (its set-up without the open time, which
/// the caller adds).
fn harness_result(
    r: HarnessReport,
    backend: String,
    dims: BTreeMap<String, i64>,
) -> Result<BatchResult> {
    Ok(BatchResult {
        batch: r.batch,
        dims,
        backend,
        timing: "cuda-events".into(),
        iterations: r.iterations.len(),
        latency_ms: SpanStats::from_iterations(&r.iterations)
            .context("no iteration was measured")?,
        throughput: r.throughput,
        wall_s: r.wall_s,
        first_iteration_ms: r.first_iteration_ms,
        setup: SetupTimes::new(0.0, Some(r.prepare_ms), r.first_iteration_ms),
        memory: Some(r.memory),
        spans: r.iterations,
    })
}

/// `batch 1`, or `batch 1 seq 128` with swept axes: how reports, errors and progress name a
/// measured point.
pub(crate) fn point_label(batch: usize, dims: &BTreeMap<String, i64>) -> String {
    std::iter::once(format!("batch {batch}"))
        .chain(dims.iter().map(|(n, v)| format!("{n} {v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Times a backend that runs host tensors on the wall clock: the first inference on its own,
/// warm-up, then the measured iterations, each from host tensors in to host tensors out (the
/// set-up it returns is the first inference's; opening the backend is the caller's to add).
/// Integer inputs named in `int_inputs` take those values; the rest are [`timing_inputs`](crate::data::synthetic::timing_inputs).
pub(crate) fn measure_wall_clock(
    backend: &mut dyn Backend,
    batch: usize,
    options: &HarnessOptions,
    int_inputs: &BTreeMap<String, IntInput>,
    progress: &dyn Progress,
) -> Result<BatchResult> {
    let mut inputs = timing_inputs_on(backend.inputs(), batch, &backend.batch_axes())?;
    apply_int_inputs(&mut inputs, int_inputs, TIMING_SEED)?;
    let first = Instant::now();
    backend.run(&inputs).context("the first inference")?;
    let first_iteration_ms = ms_since(first);
    progress.start(&format!("{} batch {batch}", backend.name()), None);
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
            progress.advance(1);
            i += 1;
        }
        Ok((spans, start.elapsed().as_secs_f64()))
    };
    let measured = phase(options.warmup, false).and_then(|_| phase(options.measure, true));
    progress.finish();
    let (spans, wall_s) = measured?;
    let samples = spans.len() as u64 * batch as u64;
    Ok(BatchResult {
        batch,
        dims: BTreeMap::new(),
        backend: backend.name(),
        timing: "wall-clock".into(),
        iterations: spans.len(),
        latency_ms: SpanStats::from_iterations(&spans).context("no iteration was measured")?,
        throughput: throughput(samples, wall_s),
        wall_s,
        first_iteration_ms,
        setup: SetupTimes::new(0.0, None, first_iteration_ms),
        memory: None,
        spans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models;
    use crate::progress::NoProgress;
    use crate::tensor::{Dim, ElemType, IoSpec, TensorData};

    fn spec(name: &str, elem_type: ElemType) -> IoSpec {
        IoSpec {
            name: name.into(),
            elem_type,
            dims: vec![Dim::Symbol("N".into()), Dim::Fixed(3), Dim::Fixed(5)],
        }
    }

    #[test]
    fn cpu_and_gpu_paths_get_the_same_input_bytes() {
        let specs = [
            spec("x", ElemType::F32),
            spec("h", ElemType::F16),
            spec("ids", ElemType::I64),
        ];
        let cpu = crate::data::synthetic::timing_inputs(&specs, 4).unwrap();
        let gpu = harness::input_bytes(&specs, 4).unwrap();
        assert_eq!(gpu.len(), 3);
        for (t, bytes) in cpu.iter().zip(&gpu) {
            assert_eq!(&t.to_le_bytes(), bytes, "{}", t.name);
        }
        // float16 inputs carry data, not zeros, and the same seed gives the same bytes.
        let TensorData::F16(h) = &cpu[1].data else {
            panic!("float16 expected")
        };
        assert!(h.iter().any(|v| v.to_f32() > 0.0));
        assert!(h.iter().all(|v| (0.0..=1.0).contains(&v.to_f32())));
        assert_eq!(gpu, harness::input_bytes(&specs, 4).unwrap());
    }

    #[test]
    fn the_set_up_note_says_when_one_engine_served_every_batch() {
        let shared = setup_note(true);
        assert!(shared.starts_with(&setup_note(false)), "{shared}");
        assert!(
            shared.ends_with("counts in the first batch's set-up only"),
            "{shared}"
        );
        assert!(!setup_note(false).contains("engine"));
    }

    #[test]
    fn run_report_round_trips_through_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.onnx");
        crate::onnx::OnnxModel::from_proto(test_models::classifier(None), &path)
            .save(&path)
            .unwrap();
        let config = RunConfig {
            model: path,
            batch_sizes: vec![1, 2],
            backend: BackendOptions {
                threads: Some(1),
                ..Default::default()
            },
            harness: HarnessOptions {
                warmup: Amount::Iterations(1),
                measure: Amount::Iterations(3),
                transfers: true,
                cuda_graph: false,
                streams: 1,
            },
            gpu_settings: vec![],
            dim_sweep: vec![],
        };
        let report = measure_latency(&config, &NoProgress).unwrap();
        assert_eq!(report.results.len(), 2);
        assert_eq!(report.results[1].iterations, 3);
        assert_eq!(report.results[1].timing, "wall-clock");
        let text = serde_json::to_string(&report).unwrap();
        let back: RunReport = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        // Each batch opened its own tract model: every part of its set-up is there, and sums.
        for b in &report.results {
            let s = &b.setup;
            assert!(s.open_ms > 0.0, "{s:?}");
            assert!(s.first_iteration_ms > 0.0, "{s:?}");
            assert_eq!(s.first_iteration_ms, b.first_iteration_ms);
            assert_eq!(s.prepare_ms, None, "no harness on the wall clock");
            assert!((s.total_ms - (s.open_ms + s.first_iteration_ms)).abs() < 1e-9);
        }
        assert!(text.contains(r#""setup":{"open_ms":"#), "{text}");
        let shown = crate::report::latency::render(&report, false);
        for b in &report.results {
            let line = format!("batch {}: {}", b.batch, b.setup.line());
            assert!(shown.contains(&line), "{line} not in {shown}");
        }
        assert!(shown.contains("— not in the figures"), "{shown}");
        assert!(shown.contains("note   set-up: "), "{shown}");
        // A report saved before the set-up was recorded still reads, with a zero set-up.
        let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
        for r in old["results"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("setup").unwrap();
        }
        let old: RunReport = serde_json::from_value(old).unwrap();
        assert_eq!(old.results[0].setup, SetupTimes::default());
        assert!(!crate::report::latency::render(&old, false).contains("set-up "));
        let refused = RunConfig {
            gpu_settings: vec![Setting::CudaGraph],
            ..config
        };
        let err = measure_latency(&refused, &NoProgress).unwrap_err();
        assert_eq!(
            crate::error::hint_of(&err),
            Some(&Hint::NeedsGpuBackend(Setting::CudaGraph)),
            "{err:#}"
        );
    }
}
