//! ONNX Runtime's CUDA provider (`--backend ort --device cuda`, bench target `ort-cuda`): the
//! GPU reference that runs on every NVIDIA GPU ONNX Runtime supports, Hopper included, timed by
//! trtkit's own harness exactly as engines are.
//!
//! One session per harness slot, each made with the slot's stream as its compute stream and its
//! inputs and outputs bound to the harness's device buffers ([`StreamSession`]); session 0 also
//! runs host tensors for `compare`, `validate` and calibration. Each session holds its own copy
//! of the weights and its own memory arena, so `--streams N` holds the weights N times. The
//! batch feed's slots take turns, so one session serves them all: one copy of the weights, one
//! first inference (cuDNN's algorithm search included).

use super::ort::{available, OrtOptions};
use super::ort::{prepared_model, run_host, run_host_visit, session_builder, session_io};
use super::ort_cuda_autotune::{cache_dir, lookup, store, TuningKey, TuningRecord};
use super::ort_cuda_tuning::{
    candidates, count_2d_convolutions, rule_choice, Candidate, CudnnWorkspace, OrtCudaTuning,
};
use super::ort_libs::{
    cuda_provider_missing, cuda_search_dirs, find_cuda_dependencies, preload_cuda_dependencies,
};
use super::ort_placement::Placement;
use super::ort_profile::OpTimes;
use super::{Backend, OutputVisitor, RunOutput};
use crate::cuda::device::{Gpu, Stream};
use crate::cuda::enqueue::{GpuEnqueue, IoBindings};
use crate::cuda::harness::{self, Amount, HarnessOptions};
use crate::cuda::ort_stream::{ConvAlgoSearch, CudaProviderSettings, StreamSession};
use crate::data::synthetic::timing_inputs;
use crate::onnx::shape::model_inputs;
use crate::onnx::OnnxModel;
use crate::tensor::{ElemType, HostTensor, IoSpec};
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// How to open a model on ONNX Runtime's CUDA provider.
#[derive(Clone, Debug, Default)]
pub(crate) struct OrtCudaOptions {
    /// Shapes, batch and CPU threads, as on the CPU.
    pub model: OrtOptions,
    /// The GPU.
    pub device_id: usize,
    /// The layout policy and cuDNN settings.
    pub tuning: OrtCudaTuning,
}

/// Checks, once per process, that the ONNX Runtime this process loads has its CUDA provider and
/// that the CUDA libraries it needs are loadable (loading those the linker cannot find from
/// where they were found): the one-line reason when it cannot.
pub(crate) fn ensure_cuda_provider() -> Result<()> {
    static READY: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let outcome = READY.get_or_init(|| {
        let lib = available().map_err(|e| format!("{e:#}"))?;
        let deps = find_cuda_dependencies(&cuda_search_dirs());
        if let Some(why) = cuda_provider_missing(lib, &deps) {
            return Err(why);
        }
        preload_cuda_dependencies(&deps).map_err(|e| format!("{e:#}"))
    });
    outcome.clone().map_err(|e| anyhow!("{e}"))
}

/// Whether ONNX Runtime's CUDA provider can run on GPU `device_id` of this machine: the GPU
/// opens and every library the provider needs is there.
pub fn ort_cuda_usable(device_id: usize) -> bool {
    Gpu::open(device_id).is_ok() && ensure_cuda_provider().is_ok()
}

/// A model on ONNX Runtime's CUDA provider.
pub(crate) struct OrtCudaBackend {
    gpu: Gpu,
    shown: String,
    model_bytes: Vec<u8>,
    options: OrtOptions,
    cuda: CudaProviderSettings,
    /// Why the layout and fusion are what they are, for the notes.
    why: String,
    sessions: Vec<StreamSession>,
    /// The session each prepared slot runs on.
    slot_sessions: Vec<usize>,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    quantized: bool,
    /// What the transformer fusion did, for the notes.
    fusion_note: Option<String>,
}

impl OrtCudaBackend {
    /// Opens GPU `options.device_id` and makes the first session of `model` there, in the
    /// layout and fusion its tuning policies choose (measured once, or by rule). Errors in one
    /// line when there is no GPU, no GPU build of ONNX Runtime or a missing CUDA library.
    pub fn load(model: &OnnxModel, options: &OrtCudaOptions) -> Result<Self> {
        let shown = model.path.display();
        let gpu = Gpu::open(options.device_id).with_context(|| {
            format!("{shown}: ONNX Runtime's CUDA provider (ort-cuda) needs an NVIDIA GPU")
        })?;
        ensure_cuda_provider().with_context(|| format!("{shown}: ort-cuda"))?;
        let (prepared, fusion_note) = prepared_model(model, &options.model)?;
        let prepared = Prepared::new(prepared);
        let (candidate, why, measured) = choose(&gpu, &prepared, options);
        let mut backend = match measured {
            Some(mut backend) => {
                backend.why = why;
                backend
            }
            None => Self::open_as(gpu, &prepared, options, candidate, why)?,
        };
        backend.fusion_note = fusion_note;
        Ok(backend)
    }

    /// Makes the first session of the prepared model on `gpu` as `candidate`.
    fn open_as(
        gpu: Gpu,
        prepared: &Prepared,
        options: &OrtCudaOptions,
        candidate: Candidate,
        why: String,
    ) -> Result<Self> {
        let mut backend = OrtCudaBackend {
            gpu,
            shown: prepared.model.path.display().to_string(),
            model_bytes: prepared.bytes.clone(),
            options: options.model.clone(),
            cuda: CudaProviderSettings {
                device_id: options.device_id,
                prefer_nhwc: candidate.nhwc,
                conv_algo_search: options.tuning.conv_search,
                max_workspace: options.tuning.workspace == CudnnWorkspace::Max,
                fuse_conv_bias: candidate.fused,
            },
            why,
            sessions: vec![],
            slot_sessions: vec![],
            inputs: vec![],
            outputs: vec![],
            quantized: prepared
                .model
                .graph()
                .node
                .iter()
                .any(|n| n.op_type == "DequantizeLinear"),
            fusion_note: None,
        };
        let stream = backend.gpu.new_stream()?;
        backend.add_session(stream)?;
        let (inputs, outputs) = session_io(backend.sessions[0].session_mut(), &backend.shown)?;
        backend.inputs = inputs;
        backend.outputs = outputs;
        Ok(backend)
    }

    fn add_session(&mut self, stream: Stream) -> Result<()> {
        let session = StreamSession::new(
            session_builder(&self.options)?,
            &self.model_bytes,
            &self.cuda,
            stream,
        )
        .with_context(|| {
            format!(
                "{}: ONNX Runtime's CUDA provider cannot load the model",
                self.shown
            )
        })?;
        self.sessions.push(session);
        Ok(())
    }
}

impl OrtCudaBackend {
    /// Where ONNX Runtime runs each node of the model: one profiled run of a session of its own.
    fn placement(&self) -> Result<Placement> {
        let dir = tempfile::tempdir()?;
        let builder = session_builder(&self.options)?
            .with_profiling(dir.path().join("ort-profile"))
            .map_err(|e| anyhow!("{e}"))?;
        let mut session = StreamSession::new(
            builder,
            &self.model_bytes,
            &self.cuda,
            self.gpu.new_stream()?,
        )?;
        let inputs = timing_inputs(&self.inputs, self.fixed_batch().unwrap_or(1))?;
        run_host(
            session.session_mut(),
            (&self.inputs, &self.outputs),
            &inputs,
        )?;
        let file = session
            .session_mut()
            .end_profiling()
            .map_err(|e| anyhow!("{e}"))?;
        Placement::from_file(Path::new(&file))
    }
}

/// The model as ONNX Runtime opens it, serialized once: every candidate's session and the tuning
/// key read the same bytes.
struct Prepared {
    model: OnnxModel,
    bytes: Vec<u8>,
}

impl Prepared {
    fn new(model: OnnxModel) -> Prepared {
        let bytes = model.to_bytes();
        Prepared { model, bytes }
    }
}

/// ONNX Runtime's version, as the library file names it.
fn onnxruntime_version() -> String {
    available()
        .ok()
        .and_then(|l| super::ort_libs::version_of(&l.path))
        .unwrap_or_else(|| "(version unknown)".into())
}

/// The layout and fusion `prepared` runs in, why, and the winner's backend when it was just
/// measured (opened and warmed up already). One candidate left open by the policies is taken as
/// it is. Otherwise the candidates are measured at the model's fixed batch, once per model,
/// batch, GPU and ONNX Runtime version, and the winner is kept in trtkit's cache folder
/// ([`cache_dir`]); a model without a fixed batch, or one no candidate of which can be timed,
/// takes [`rule_choice`].
fn choose(
    gpu: &Gpu,
    prepared: &Prepared,
    options: &OrtCudaOptions,
) -> (Candidate, String, Option<OrtCudaBackend>) {
    let model = &prepared.model;
    let open = candidates(model, &options.tuning);
    if let [only] = open[..] {
        let why = if count_2d_convolutions(model) == 0 {
            "the model has no 2-D convolution"
        } else {
            "as asked"
        };
        return (only, why.into(), None);
    }
    let rule = |why: &str| (rule_choice(model, &options.tuning), why.to_string(), None);
    let Some(batch) = options.model.batch else {
        return rule("by rule: the batch is not fixed, so nothing was measured");
    };
    if !every_input_shape_fixed(model) {
        return rule(
            "by rule: an input has a free axis besides the batch, so nothing was measured",
        );
    }
    let key = TuningKey::new(
        &prepared.bytes,
        batch,
        gpu.name(),
        &onnxruntime_version(),
        (options.tuning.conv_search, options.tuning.workspace),
        &open,
    );
    let dir = cache_dir();
    if let Some(record) = dir.as_deref().and_then(|d| lookup(d, &key)) {
        let (choice, how) = pick(&record, options.tuning.planned_batches);
        return (choice, format!("{how}, kept from earlier"), None);
    }
    tracing::info!(
        "{}: measuring {} ways to run it on ort-cuda at batch {batch}, once",
        model.path.display(),
        open.len()
    );
    // The fastest so far stays open, so the winner is not opened (and compiled) twice.
    let mut fastest: Option<(f64, Candidate, OrtCudaBackend)> = None;
    let measured = TuningRecord::measure(key, |candidate| {
        let (ms, setup_s, backend) = time_candidate(gpu, prepared, options, candidate, batch)?;
        if fastest.as_ref().is_none_or(|(best, ..)| ms < *best) {
            fastest = Some((ms, candidate, backend));
        }
        Ok((ms, setup_s))
    });
    let record = match measured {
        Ok(record) => record,
        Err(e) => return rule(&format!("by rule: {e:#}")),
    };
    let kept = match dir.as_deref().map(|d| store(d, &record)) {
        Some(Ok(path)) => format!("kept in {}", path.display()),
        Some(Err(e)) => format!("not kept: {e:#}"),
        None => "not kept: no cache folder (set TRTKIT_CACHE_DIR)".into(),
    };
    let (choice, how) = pick(&record, options.tuning.planned_batches);
    let backend = fastest.filter(|(_, c, _)| *c == choice).map(|(.., b)| b);
    (choice, format!("{how}, {kept}"), backend)
}

/// The candidate of `record` a command takes, and the measurement in words: the fastest per
/// batch, or with `planned` batches to run, the one that finishes them soonest.
fn pick(record: &TuningRecord, planned: Option<usize>) -> (Candidate, String) {
    match planned.and_then(|n| record.soonest(n)) {
        Some((choice, why)) => (choice, format!("{why}; {}", record.said())),
        None => (record.choice, record.said()),
    }
}

/// Whether every input of `prepared` has a declared shape whose axes are all fixed (the batch
/// one included): what the timing harness needs to allocate its buffers.
fn every_input_shape_fixed(prepared: &OnnxModel) -> bool {
    model_inputs(prepared).iter().all(|i| {
        i.dims.as_ref().is_some_and(|dims| {
            dims.iter()
                .all(|d| matches!(d, crate::tensor::Dim::Fixed(_)))
        })
    })
}

/// Milliseconds per batch of `prepared` run as `candidate` on the GPU clock (a short harness
/// run without copies), the seconds its opening and first inference took, and the backend.
fn time_candidate(
    gpu: &Gpu,
    prepared: &Prepared,
    options: &OrtCudaOptions,
    candidate: Candidate,
    batch: usize,
) -> Result<(f64, f64, OrtCudaBackend)> {
    let started = std::time::Instant::now();
    let mut backend =
        OrtCudaBackend::open_as(gpu.clone(), prepared, options, candidate, String::new())?;
    let open_s = started.elapsed().as_secs_f64();
    let (inputs, outputs) = (backend.inputs.clone(), backend.outputs.clone());
    let trial = HarnessOptions {
        warmup: Amount::Iterations(3),
        measure: Amount::Seconds(0.3),
        transfers: false,
        cuda_graph: false,
        streams: 1,
    };
    let report = harness::run(gpu, &mut backend, &inputs, &outputs, batch, &trial)?;
    let setup_s = open_s + (report.prepare_ms + report.first_iteration_ms) / 1e3;
    let ms = report.wall_s * 1e3 / report.iterations.len().max(1) as f64;
    Ok((ms, setup_s, backend))
}

/// What ONNX Runtime's profiler times on the CUDA provider, as the op profile says it.
fn cuda_times_said() -> &'static str {
    if std::env::var("CUDA_LAUNCH_BLOCKING").is_ok_and(|v| v.trim() == "1") {
        "each node's kernels run to completion: CUDA_LAUNCH_BLOCKING=1"
    } else {
        "each node's kernel launches on the host, not the kernels: CUDA_LAUNCH_BLOCKING=1 times them"
    }
}

/// The cuDNN settings as the run's notes say them.
fn cudnn_said(cuda: &CudaProviderSettings) -> String {
    let search = match cuda.conv_algo_search {
        ConvAlgoSearch::Exhaustive => "exhaustive algorithm search (timed on the first inference)",
        ConvAlgoSearch::Heuristic => "heuristic algorithm choice",
        ConvAlgoSearch::Default => "default algorithms",
    };
    let workspace = if cuda.max_workspace {
        "workspace as large as the fastest algorithm asks"
    } else {
        "workspace limited to 32 MiB"
    };
    format!("{search}, {workspace}")
}

/// How many sessions ran and what they served, for the notes.
fn sessions_said(sessions: usize, slot_sessions: &[usize]) -> String {
    if sessions == 1 && slot_sessions.len() > 1 {
        format!(
            "one session serving {} slots in turn (one copy of the weights)",
            slot_sessions.len()
        )
    } else if sessions == 1 {
        "one session".into()
    } else {
        format!("{sessions} sessions (one per stream, each with its own copy of the weights)")
    }
}

/// Pairs each binding (a `TensorBinding` when enqueuing) with the element type of its spec.
fn typed<B: Clone>(bindings: &[B], specs: &[IoSpec]) -> Result<Vec<(B, ElemType)>> {
    if bindings.len() != specs.len() {
        bail!(
            "{} buffers bound for {} tensors",
            bindings.len(),
            specs.len()
        );
    }
    Ok(bindings
        .iter()
        .zip(specs)
        .map(|(b, s)| (b.clone(), s.elem_type))
        .collect())
}

/// Which session each of `slots` slots runs on: a session each when the slots run side by side
/// (`--streams`), the first one for all when they take turns (the batch feed).
fn sessions_of_slots(slots: usize, in_turn: bool) -> Vec<usize> {
    (0..slots).map(|k| if in_turn { 0 } else { k }).collect()
}

impl OrtCudaBackend {
    /// Checks `gpu` and `batch`, opens the sessions the slots need and returns each slot's
    /// stream.
    fn prepare_slots(
        &mut self,
        gpu: &Gpu,
        batch: usize,
        slots: usize,
        in_turn: bool,
    ) -> Result<Vec<Stream>> {
        if gpu.id() != self.gpu.id() {
            bail!(
                "{}: the model was opened on GPU {}, not GPU {}",
                self.shown,
                self.gpu.id(),
                gpu.id()
            );
        }
        for spec in self.inputs.iter().chain(&self.outputs) {
            spec.concrete_shape(batch)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("{}: at batch {batch}", self.shown))?;
        }
        self.slot_sessions = sessions_of_slots(slots, in_turn);
        let needed = self.slot_sessions.iter().max().map_or(0, |k| k + 1);
        while self.sessions.len() < needed {
            let stream = self.gpu.new_stream()?;
            self.add_session(stream)?;
        }
        Ok(self
            .slot_sessions
            .iter()
            .map(|&k| self.sessions[k].stream().clone())
            .collect())
    }
}

impl GpuEnqueue for OrtCudaBackend {
    fn prepare(&mut self, gpu: &Gpu, batch: usize, slots: usize) -> Result<Vec<Stream>> {
        self.prepare_slots(gpu, batch, slots, false)
    }

    fn prepare_in_turn(&mut self, gpu: &Gpu, batch: usize, slots: usize) -> Result<Vec<Stream>> {
        self.prepare_slots(gpu, batch, slots, true)
    }

    fn enqueue(&mut self, slot: usize, stream: &Stream, io: &IoBindings) -> Result<()> {
        let Some(session) = self
            .slot_sessions
            .get(slot)
            .and_then(|&k| self.sessions.get_mut(k))
        else {
            bail!("slot {slot} was not prepared");
        };
        if session.stream().raw() != stream.raw() {
            bail!("slot {slot} runs on the stream its session was made with, not another");
        }
        let inputs = typed(&io.inputs, &self.inputs)?;
        let outputs = typed(&io.outputs, &self.outputs)?;
        session.bind(&inputs, &outputs)?;
        session.enqueue()
    }
}

impl Backend for OrtCudaBackend {
    fn name(&self) -> String {
        "ort-cuda".into()
    }

    fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
        let session = self.sessions[0].session_mut();
        run_host(session, (&self.inputs, &self.outputs), inputs)
    }

    fn run_visit(&mut self, inputs: &[HostTensor], visit: &OutputVisitor) -> Result<Duration> {
        let session = self.sessions[0].session_mut();
        run_host_visit(session, (&self.inputs, &self.outputs), inputs, visit)
    }

    fn gpu(&mut self) -> Option<&mut dyn GpuEnqueue> {
        Some(self)
    }

    /// How the provider was set up, and for a Q/DQ model which ops ONNX Runtime ran where and
    /// which computed in INT8.
    fn finish(&mut self) -> Result<Vec<String>> {
        let mut notes = vec![format!(
            "ort-cuda: ONNX Runtime {}'s CUDA provider on GPU {}, {}, convolutions {} ({}), cuDNN: {}, TF32 allowed",
            onnxruntime_version(),
            self.cuda.device_id,
            sessions_said(self.sessions.len(), &self.slot_sessions),
            Candidate {
                nhwc: self.cuda.prefer_nhwc,
                fused: self.cuda.fuse_conv_bias,
            },
            self.why,
            cudnn_said(&self.cuda),
        )];
        notes.extend(self.fusion_note.iter().map(|n| format!("ort-cuda: {n}")));
        if self.options.op_profile.is_some() {
            let mut times = OpTimes::default();
            for session in &mut self.sessions {
                times.add(OpTimes::of_session(session.session_mut())?);
            }
            notes.push(format!("ort-cuda: {}", times.said(cuda_times_said())));
        }
        if self.quantized {
            match self.placement() {
                Ok(p) => notes.extend(p.lines()),
                Err(e) => notes.push(format!(
                    "where ONNX Runtime ran each node could not be read from its profile: {e:#}"
                )),
            }
        }
        Ok(notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_model_with_every_input_axis_fixed_is_measured() {
        let model =
            |batch| OnnxModel::from_proto(crate::onnx::test_models::classifier(batch), "c.onnx");
        assert!(every_input_shape_fixed(&model(Some(8))));
        assert!(!every_input_shape_fixed(&model(None)));
    }

    #[test]
    fn slots_taking_turns_share_the_first_session_and_side_by_side_slots_do_not() {
        assert_eq!(sessions_of_slots(2, true), vec![0, 0]);
        assert_eq!(sessions_of_slots(3, false), vec![0, 1, 2]);
        assert_eq!(
            sessions_said(1, &sessions_of_slots(2, true)),
            "one session serving 2 slots in turn (one copy of the weights)"
        );
        assert!(sessions_said(2, &sessions_of_slots(2, false)).starts_with("2 sessions"));
    }

    #[test]
    fn bindings_take_the_element_types_of_their_specs() {
        let spec = |name: &str, elem_type| IoSpec {
            name: name.into(),
            elem_type,
            dims: vec![crate::tensor::Dim::Fixed(2)],
        };
        // What is paired is opaque to `typed`: a name stands in for a device buffer.
        let binding = |name: &str| name.to_string();
        let specs = [spec("ids", ElemType::I64), spec("mask", ElemType::F16)];
        let typed = typed(&[binding("ids"), binding("mask")], &specs).unwrap();
        assert_eq!(typed[0], ("ids".to_string(), ElemType::I64));
        assert_eq!(typed[1].1, ElemType::F16);
        let err = super::typed(&[binding("ids")], &specs).unwrap_err();
        assert!(err.to_string().contains("1 buffers bound for 2 tensors"));
    }
}
