//! The comparator behind `compare`: the same inputs through two sides (an ONNX model on a
//! reference backend, a TensorRT engine, or an `.npz` of saved outputs), and how close A is to
//! the reference B.

use crate::backend::batch_runner::{run_batched, samples_of};
use crate::backend::select::BackendOptions;
use crate::backend::Backend;
use crate::data::npz;
use crate::data::synthetic::{apply_int_inputs, InputDistribution, RandomInputs};
use crate::jobs::batch_memory::{check_host, specs_sample_bytes};
use crate::jobs::open::{open_file, open_model, FileKind, Opened};
use crate::metrics::closeness::Tolerance;
use crate::metrics::compare::{compare_outputs, OutputComparison};
use crate::metrics::task::{compare_task, TaskComparison, TaskRequest};
use crate::onnx::input_roles::int_input_roles;
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::{fixed_batch, model_inputs, InputShapes, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::setting::Setting;
use crate::tensor::{HostTensor, IntInput, IoSpec};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

/// The most samples per inference when neither the caller nor the model sets the batch.
pub const DEFAULT_BATCH: usize = 32;

/// One side of a comparison: the file and, for a model, the backend that runs it.
#[derive(Clone, Debug)]
pub struct SideConfig {
    /// An `.onnx` model, a TensorRT engine, or an `.npz`/`.npy` of saved outputs.
    pub path: PathBuf,
    /// The backend for a model (its batch is decided by the comparator).
    pub backend: BackendOptions,
}

/// Where the inputs come from.
#[derive(Clone, Debug)]
pub enum InputSource {
    /// An `.npz` with one array per model input (or an `.npy` for a one-input model).
    File(PathBuf),
    /// `samples` random samples.
    Random {
        /// The distribution and seed.
        random: RandomInputs,
        /// Values of integer inputs given by hand (`--int-range`), over what the graph says.
        int_inputs: BTreeMap<String, IntInput>,
        /// How many samples.
        samples: usize,
    },
}

/// Everything a comparison needs.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// The side under test.
    pub a: SideConfig,
    /// The reference.
    pub b: SideConfig,
    /// Input shape overrides applied to both models.
    pub input_shapes: ShapeRequest,
    /// Samples per inference; `None`: the model's fixed batch, else up to [`DEFAULT_BATCH`].
    pub batch_size: Option<NonZeroUsize>,
    /// The inputs.
    pub inputs: InputSource,
    /// isclose tolerances.
    pub tolerance: Tolerance,
    /// Ranks in the top-k table of `[batch, classes]` outputs.
    pub topk: usize,
    /// The task (given or guessed) and how detections are decoded.
    pub task: TaskRequest,
}

/// One side of the comparison, as reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SideReport {
    /// `A` or `B`.
    pub label: String,
    /// The file.
    pub source: String,
    /// Backend name, or `saved outputs`.
    pub backend: String,
    /// Samples run (0 for saved outputs).
    pub samples: usize,
    /// Batch size per inference (0 for saved outputs).
    pub batch: usize,
    /// Inference time summed over batches, seconds.
    pub inference_s: f64,
    /// Samples per second of inference time.
    pub samples_per_s: f64,
}

/// Everything the comparison found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareReport {
    /// A (under test) and B (reference).
    pub sides: Vec<SideReport>,
    /// Where the inputs came from.
    pub inputs: String,
    /// Tolerances used.
    pub tolerance: Tolerance,
    /// One entry per output.
    pub outputs: Vec<OutputComparison>,
    /// The task-aware agreement (matched boxes, pixel agreement), when a task applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskComparison>,
    /// What could not be compared, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The tensors a comparison used and produced, for saving beside the report.
#[derive(Clone, Debug, Default)]
pub struct CompareTensors {
    /// The inputs fed to the models (none when both sides are saved outputs).
    pub inputs: Option<Vec<HostTensor>>,
    /// A's outputs.
    pub a: Vec<HostTensor>,
    /// B's outputs.
    pub b: Vec<HostTensor>,
}

impl CompareTensors {
    /// Saves the tensors asked for as `.npz`: the inputs (when a model ran), A's outputs and
    /// B's outputs.
    pub fn save(&self, inputs: Option<&Path>, a: Option<&Path>, b: Option<&Path>) -> Result<()> {
        if let (Some(p), Some(t)) = (inputs, &self.inputs) {
            npz::save(p, t)?;
        }
        if let Some(p) = a {
            npz::save(p, &self.a)?;
        }
        if let Some(p) = b {
            npz::save(p, &self.b)?;
        }
        Ok(())
    }
}

/// A file that is neither an ONNX model nor saved outputs.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0}: expected an .onnx model, a TensorRT engine (.engine/.plan) or an .npz of saved outputs"
)]
pub struct NotComparable(pub String);

enum Source {
    Model(Box<(OnnxModel, BackendOptions)>),
    Engine(Box<dyn Backend>),
    Saved(Vec<HostTensor>),
}

/// The ONNX model of a side, when it is one.
fn sources_model(src: &Source) -> Option<&OnnxModel> {
    match src {
        Source::Model(boxed) => Some(&boxed.0),
        _ => None,
    }
}

impl Source {
    /// The inputs the side takes and the batch they are fixed to (`None` when dynamic); `None`
    /// for saved outputs.
    fn inputs(&self) -> Option<Result<(Vec<IoSpec>, Option<usize>)>> {
        match self {
            Source::Model(boxed) => {
                Some(declared_inputs(&boxed.0).map(|specs| (specs, fixed_batch(&boxed.0))))
            }
            Source::Engine(backend) => Some(Ok((backend.inputs().to_vec(), backend.fixed_batch()))),
            Source::Saved(_) => None,
        }
    }
}

/// Whether `path` is a model or an engine (as opposed to saved outputs).
pub fn is_model(path: &Path) -> bool {
    FileKind::runs(path)
}

/// Loads one side, by its kind ([`open_file`]); a model gets the input shape overrides applied.
/// An engine takes no per-input shapes (they were fixed when it was built); named-axis sizes
/// apply to the ONNX side only, so an engine built at `seq=128` compares with its model at
/// `--dim seq=128` (an engine built at another size refuses the inputs, naming its shapes).
fn source(side: &SideConfig, shapes: &ShapeRequest) -> Result<Source> {
    let Some(kind) = FileKind::from_path(&side.path) else {
        return Err(NotComparable(side.path.display().to_string()).into());
    };
    if kind == FileKind::Engine && !shapes.shapes.is_empty() {
        bail!(
            "{}: an engine's input shapes were fixed when it was built; --input-shape applies to ONNX models only",
            side.path.display()
        );
    }
    Ok(match open_file(&side.path, &side.backend)? {
        Opened::Model(model) => {
            let mut model = *model;
            if !shapes.is_empty() {
                model = InputShapes(shapes.clone()).run(model)?.0;
            }
            Source::Model(Box::new((model, side.backend.clone())))
        }
        Opened::Engine(backend) => Source::Engine(backend),
        Opened::Saved(tensors) => Source::Saved(tensors),
    })
}

fn load_inputs(path: &Path, specs: &[IoSpec]) -> Result<Vec<HostTensor>> {
    let mut arrays = npz::load(path)?;
    if arrays.len() == 1 && specs.len() == 1 && path.extension().is_some_and(|e| e == "npy") {
        arrays[0].name = specs[0].name.clone();
    }
    specs
        .iter()
        .map(|s| {
            let t = arrays.iter().find(|t| t.name == s.name).with_context(|| {
                let names: Vec<&str> = arrays.iter().map(|t| t.name.as_str()).collect();
                format!(
                    "{}: has no array for input '{}' (it has: {})",
                    path.display(),
                    s.name,
                    names.join(", ")
                )
            })?;
            if t.elem_type() != s.elem_type {
                bail!(
                    "{}: input '{}' is {}, the model takes {}",
                    path.display(),
                    s.name,
                    t.elem_type(),
                    s.elem_type
                );
            }
            Ok(t.clone())
        })
        .collect()
}

/// An input whose shape the model does not declare, so no inputs can be made for it.
#[derive(Debug, thiserror::Error)]
#[error("{model}: input '{input}' declares no shape")]
pub struct UndeclaredShape {
    /// The model file.
    pub model: String,
    /// The input.
    pub input: String,
}

/// The inputs `model` declares (names, dtypes, dims), read without preparing it.
pub fn declared_inputs(model: &OnnxModel) -> Result<Vec<IoSpec>> {
    model_inputs(model)
        .into_iter()
        .map(|i| {
            let elem_type = crate::onnx::dtype::elem_type(i.dtype_code).with_context(|| {
                format!(
                    "{}: input '{}' is {}, which trtkit cannot feed",
                    model.path.display(),
                    i.name,
                    i.dtype
                )
            })?;
            let dims = i.dims.ok_or_else(|| UndeclaredShape {
                model: model.path.display().to_string(),
                input: i.name.clone(),
            })?;
            Ok(IoSpec {
                name: i.name,
                elem_type,
                dims,
            })
        })
        .collect()
}

/// How the random inputs are described in the report.
fn describe(r: &RandomInputs, n: usize) -> String {
    match r.dist {
        InputDistribution::Uniform { low, high } => {
            format!(
                "{n} random samples, uniform [{low}, {high}), seed {}",
                r.seed
            )
        }
        InputDistribution::Normal { mean, std } => {
            format!(
                "{n} random samples, normal(mean {mean}, std {std}), seed {}",
                r.seed
            )
        }
    }
}

/// The inputs of a comparison, for a model taking `probe`, and how they are described: read
/// from the file given, or made at random (integer inputs as `graph_roles` and the hand-given
/// ranges say). Errors name `path`.
pub fn make_inputs(
    config: &CompareConfig,
    probe: &[IoSpec],
    path: &Path,
    graph_roles: &BTreeMap<String, IntInput>,
) -> Result<(Vec<HostTensor>, String)> {
    Ok(match &config.inputs {
        InputSource::File(p) => (load_inputs(p, probe)?, p.display().to_string()),
        InputSource::Random {
            random,
            int_inputs,
            samples,
        } => {
            if *samples == 0 {
                bail!("at least one random sample is needed");
            }
            check_host(Setting::Samples, *samples, specs_sample_bytes(probe))
                .with_context(|| path.display().to_string())?;
            let mut made = random
                .generate(probe, *samples)
                .with_context(|| format!("{}: cannot make inputs", path.display()))?;
            // Integer inputs take the values the graph says they take, unless given by hand.
            let mut roles = graph_roles.clone();
            roles.extend(int_inputs.iter().map(|(k, v)| (k.clone(), *v)));
            roles.retain(|name, _| probe.iter().any(|s| &s.name == name));
            apply_int_inputs(&mut made, &roles, random.seed)
                .with_context(|| format!("{}: cannot make inputs", path.display()))?;
            let mut note = describe(random, *samples);
            for (name, role) in &roles {
                note.push_str(&format!("; {name}: {role}"));
            }
            (made, note)
        }
    })
}

fn saved_side(label: &str, path: &Path) -> SideReport {
    SideReport {
        label: label.into(),
        source: path.display().to_string(),
        backend: "saved outputs".into(),
        samples: 0,
        batch: 0,
        inference_s: 0.0,
        samples_per_s: 0.0,
    }
}

/// The batch of a run over `samples` inputs: the one asked for, but a batch beyond the samples
/// runs the samples (no padding to a size nobody needs) unless a model fixes it; up to
/// [`DEFAULT_BATCH`] when none was asked for.
fn batch_for_inputs(asked: Option<usize>, samples: usize, any_fixed: bool) -> usize {
    match asked {
        Some(b) if any_fixed => b,
        Some(b) => b.min(samples),
        None => samples.min(DEFAULT_BATCH),
    }
}

/// The batch of the run over `made` ([`batch_for_inputs`]), checked against the host memory
/// left: a fixed batch pads the samples up to it, so it must fit before anything is made.
fn checked_batch(
    config: &CompareConfig,
    asked: Option<usize>,
    made: &[HostTensor],
    any_fixed: bool,
    probe: &[IoSpec],
    path: &Path,
) -> Result<usize> {
    let batch = batch_for_inputs(asked, samples_of(made)?, any_fixed);
    let setting = match (any_fixed, config.batch_size) {
        (true, None) => Setting::InputShape,
        _ => Setting::BatchSize,
    };
    check_host(setting, batch, specs_sample_bytes(probe))
        .with_context(|| path.display().to_string())?;
    Ok(batch)
}

/// Runs the comparison: the report, and the tensors for whoever wants to save them.
/// `progress` gets one phase per side that runs a model, advancing by samples.
pub fn compare(
    config: &CompareConfig,
    progress: &dyn Progress,
) -> Result<(CompareReport, CompareTensors)> {
    let sides = [&config.a, &config.b];
    let shapes = &config.input_shapes;
    let sources = [source(sides[0], shapes)?, source(sides[1], shapes)?];
    // The batch, decided once from the first model and used on both.
    let mut batch = config.batch_size.map(NonZeroUsize::get);
    let mut dynamic = [false; 2];
    let mut specs = [None, None];
    for (i, src) in sources.iter().enumerate() {
        let Some(declared) = src.inputs() else {
            continue;
        };
        let (declared, fixed) = declared?;
        match (fixed, batch) {
            (Some(f), Some(b)) if f != b => bail!(
                "{}: the model's batch is fixed to {f}, a batch size of {b} cannot apply (make the batch axis dynamic with an input shape of -1 ...)",
                sides[i].path.display()
            ),
            (Some(f), _) => batch = Some(f),
            (None, _) => dynamic[i] = true,
        }
        specs[i] = Some(declared);
    }
    let any_fixed = specs.iter().zip(dynamic).any(|(s, d)| s.is_some() && !d);
    // What the integer inputs take, from whichever side is an ONNX graph.
    let graph_roles = sources
        .iter()
        .find_map(sources_model)
        .map(int_input_roles)
        .unwrap_or_default();
    let mut tensors = CompareTensors::default();
    let mut input_note = "none (both sides are saved outputs)".to_string();
    let mut reports = Vec::new();
    for (i, src) in sources.into_iter().enumerate() {
        let label = ["A", "B"][i];
        let path = &sides[i].path;
        let (outputs, side) = match src {
            Source::Saved(saved) => (saved, saved_side(label, path)),
            src => {
                if tensors.inputs.is_none() {
                    // Inputs first: their count decides the batch of a dynamic model.
                    let probe = specs[i].as_deref().expect("read for every model above");
                    let (made, note) = make_inputs(config, probe, path, &graph_roles)?;
                    batch = Some(checked_batch(config, batch, &made, any_fixed, probe, path)?);
                    input_note = note;
                    tensors.inputs = Some(made);
                }
                let batch = batch.expect("decided above");
                let mut backend = match src {
                    Source::Model(boxed) => {
                        let (model, mut options) = *boxed;
                        if dynamic[i] {
                            options.batch = Some(batch);
                        }
                        open_model(&model, &options)?
                    }
                    Source::Engine(engine) => engine,
                    Source::Saved(_) => unreachable!("saved outputs are matched above"),
                };
                let inputs = tensors.inputs.as_deref().expect("made above");
                progress.start(
                    &format!("{label}: {}", backend.name()),
                    Some(samples_of(inputs)? as u64),
                );
                let ran = run_batched(backend.as_mut(), inputs, batch, progress)
                    .with_context(|| path.display().to_string());
                progress.finish();
                let ran = ran?;
                for note in backend.finish()? {
                    tracing::info!("{}: {note}", path.display());
                }
                let secs = ran.inference.as_secs_f64();
                let side = SideReport {
                    label: label.into(),
                    source: path.display().to_string(),
                    backend: backend.name(),
                    samples: ran.samples,
                    batch,
                    inference_s: secs,
                    samples_per_s: if secs > 0.0 {
                        ran.samples as f64 / secs
                    } else {
                        0.0
                    },
                };
                (ran.outputs, side)
            }
        };
        if i == 0 {
            tensors.a = outputs;
        } else {
            tensors.b = outputs;
        }
        reports.push(side);
    }
    let pair = || format!("{} vs {}", config.a.path.display(), config.b.path.display());
    let task = compare_task(&tensors.a, &tensors.b, &config.task).with_context(pair)?;
    let mut notes = vec![];
    let compared = match compare_outputs(&tensors.a, &tensors.b, &config.tolerance, config.topk) {
        Ok(compared) => compared,
        // Two layouts of one detector's head, say, agree on boxes but not element by element.
        Err(e)
            if task
                .as_ref()
                .is_some_and(TaskComparison::compared_something) =>
        {
            notes.push(format!("no element-wise closeness: {e:#}"));
            vec![]
        }
        Err(e) => return Err(e.context(pair())),
    };
    Ok((
        CompareReport {
            sides: reports,
            inputs: input_note,
            tolerance: config.tolerance,
            outputs: compared,
            task,
            notes,
        },
        tensors,
    ))
}

/// A comparison that must fail the run after its report is shown.
#[derive(Debug, thiserror::Error)]
pub enum Verdict {
    /// An output of one side is all NaN: that run is broken.
    #[error("output '{output}' of {side} is all NaN: that run is broken")]
    AllNan {
        /// The output.
        output: String,
        /// `A` or `B`.
        side: &'static str,
    },
    /// An output disagrees in NaN or ±Inf values, so its cosine is NaN: below any threshold.
    #[error("output '{output}': cosine NaN ({mismatches} elements NaN or Inf on one side only, NaN A/B {nan_a}/{nan_b}, Inf A/B {inf_a}/{inf_b}) is below {threshold}")]
    NonFinite {
        /// The output.
        output: String,
        /// Elements where the two disagree and either is NaN or ±Inf.
        mismatches: usize,
        /// NaN count in A.
        nan_a: usize,
        /// NaN count in B.
        nan_b: usize,
        /// ±Inf count in A.
        inf_a: usize,
        /// ±Inf count in B.
        inf_b: usize,
        /// The threshold, percent.
        threshold: f64,
    },
    /// An output's equality or top-1 agreement is below the threshold asked for.
    #[error("output '{output}': {what} {pct:.2}% is below {threshold}")]
    Below {
        /// The output.
        output: String,
        /// `equality` or `top-1 agreement`.
        what: &'static str,
        /// The measured percentage.
        pct: f64,
        /// The threshold, percent.
        threshold: f64,
    },
}

/// What makes a comparison fail: all-NaN outputs, and (with `fail_below`) any output's
/// equality % or top-1 agreement % below it, or NaN or ±Inf values where the sides disagree
/// (a NaN cosine passes no threshold).
pub fn verdict(r: &CompareReport, fail_below: Option<f64>) -> Result<(), Verdict> {
    for o in &r.outputs {
        for (side, a) in [("A", true), ("B", false)] {
            if o.all_nan(a) {
                return Err(Verdict::AllNan {
                    output: o.name.clone(),
                    side,
                });
            }
        }
    }
    let Some(threshold) = fail_below else {
        return Ok(());
    };
    for o in &r.outputs {
        let below = |what, pct: f64| {
            (pct < threshold).then(|| Verdict::Below {
                output: o.name.clone(),
                what,
                pct,
                threshold,
            })
        };
        let c = &o.closeness;
        if c.non_finite_mismatches > 0 {
            return Err(Verdict::NonFinite {
                output: o.name.clone(),
                mismatches: c.non_finite_mismatches,
                nan_a: c.nan_a,
                nan_b: c.nan_b,
                inf_a: c.inf_a,
                inf_b: c.inf_b,
                threshold,
            });
        }
        let topk = o.topk.as_ref().map(|k| k.top1_agreement_pct);
        if let Some(v) = below("equality", o.closeness.equal_pct)
            .or_else(|| topk.and_then(|pct| below("top-1 agreement", pct)))
        {
            return Err(v);
        }
    }
    Ok(())
}
