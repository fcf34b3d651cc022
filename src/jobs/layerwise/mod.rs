//! `compare --layerwise`: where two ONNX graphs of one model part ways. Every float tensor of
//! the reference B (or those `--tensors` names) and its match in A
//! ([`matching::matched_name`]) become graph outputs of their own type; both run
//! on the same inputs, batch by batch, and each tensor's statistics are summed as its values
//! come and then dropped. When the marked tensors of one batch would not fit in the memory
//! allowed, they run in groups, each group a separately marked pair of models.
//! [`all`] runs it for every precision of one model.

pub mod all;
mod matching;

use super::compare::{declared_inputs, make_inputs, CompareConfig, SideConfig, DEFAULT_BATCH};
use crate::backend::open::{open, open_file, FileKind, Opened};
use crate::backend::Backend;
use crate::data::batch_axis::{slice_padded, truncate};
use crate::host_memory::{available_bytes, peak_rss_bytes};
use crate::metrics::closeness::Tolerance;
use crate::metrics::layerwise::{first_divergence, TensorDivergence, TensorStats};
use crate::onnx::input_roles::int_input_roles;
use crate::onnx::rewrite::mark::{float_tensors, MarkOutputs, ProducedTensor};
use crate::onnx::rewrite::pass::run_pass;
use crate::onnx::shape::{fixed_batch, InputShapes};
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::tensor::{conform_floats, conversion_note, FloatConversion, HostTensor};
use anyhow::{bail, Context, Result};
use matching::{groups, match_tensors};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::num::NonZeroUsize;

/// The cosine below which a tensor counts as diverged, unless `--layerwise-cosine` says.
pub(crate) const DEFAULT_COSINE: f64 = 0.999;

/// Everything a layerwise comparison needs.
#[derive(Clone, Debug)]
pub struct LayerwiseConfig {
    /// The two sides (both ONNX models), the inputs, input shapes, batch and tolerances, as
    /// `compare` takes them (its top-k and task are not used).
    pub compare: CompareConfig,
    /// Only the reference tensors whose name this regular expression matches.
    pub tensors: Option<String>,
    /// Tensors whose cosine falls below this diverge.
    pub(crate) cosine_threshold: f64,
    /// The most bytes of marked outputs (both sides, one batch) held at once; `None`: half the
    /// memory the system has left, at most 512 MiB. With no batch asked for, the batch is
    /// lowered until one group fits.
    pub(crate) group_bytes: Option<u64>,
}

/// The first tensor, in the reference's graph order, whose cosine is below the threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FirstDivergence {
    /// The tensor (its name in the reference).
    pub tensor: String,
    /// The node that makes it.
    pub node: String,
    /// That node's op type.
    pub op: String,
    /// Its cosine (NaN where a NaN or ±Inf is on one side only).
    #[serde(with = "crate::metrics::non_finite")]
    pub cosine: f64,
}

/// How much memory the comparison held.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// Groups of marked tensors run (1 when all fit at once).
    pub groups: usize,
    /// The most bytes of marked outputs (both sides, one batch) held at once.
    pub peak_marked_bytes: u64,
    /// The process's peak resident memory (`VmHWM`), where the system tells it.
    pub peak_rss_bytes: Option<u64>,
}

/// Everything the layerwise comparison found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerwiseReport {
    /// The graph under test.
    pub a: String,
    /// The reference graph.
    pub b: String,
    /// The backend that ran A.
    pub(crate) backend_a: String,
    /// The backend that ran B.
    pub(crate) backend_b: String,
    /// Where the inputs came from.
    pub inputs: String,
    /// Samples run.
    pub samples: usize,
    /// Samples per inference.
    pub batch: usize,
    /// The isclose tolerances.
    pub tolerance: Tolerance,
    /// The cosine below which a tensor diverges.
    pub(crate) cosine_threshold: f64,
    /// One row per compared tensor, in the reference's graph order.
    pub tensors: Vec<TensorDivergence>,
    /// The first tensor below the threshold; `None` when none is.
    pub first_divergence: Option<FirstDivergence>,
    /// Reference tensors A has no match for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmatched: Vec<String>,
    /// Reference tensors with no batch axis (constants, shape arithmetic), not compared: they
    /// are the same for every sample.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_for_every_sample: Vec<String>,
    /// The memory held.
    pub memory: MemoryUse,
}

/// Says which side is not an ONNX graph: an engine or saved outputs cannot be marked.
fn onnx_side(side: &SideConfig, shapes: &crate::onnx::shape::ShapeRequest) -> Result<OnnxModel> {
    let path = side.path.display();
    if FileKind::from_path(&side.path) != Some(FileKind::Onnx) {
        bail!(
            "{path}: layerwise needs two ONNX graphs (for an engine, the graph its build kept beside it)"
        );
    }
    let Opened::Model(model) = open_file(&side.path, &side.backend)? else {
        bail!("{path}: layerwise needs two ONNX graphs");
    };
    let mut model = *model;
    if !shapes.is_empty() {
        model = run_pass(model, &InputShapes(shapes.clone()))?;
    }
    Ok(model)
}

/// The reference tensors to compare: every float tensor B's nodes make, or those `pattern`
/// matches.
fn candidates(b: &OnnxModel, pattern: Option<&str>) -> Result<Vec<ProducedTensor>> {
    let all = float_tensors(b);
    let Some(p) = pattern else {
        return Ok(all);
    };
    let re = regex::Regex::new(p).with_context(|| format!("--tensors {p:?}"))?;
    let picked: Vec<ProducedTensor> = all.into_iter().filter(|t| re.is_match(&t.name)).collect();
    if picked.is_empty() {
        bail!(
            "{}: no float tensor's name matches --tensors {p:?}",
            b.path.display()
        );
    }
    Ok(picked)
}

/// The batch of the run: a model's fixed batch, else the one asked for (at most the samples),
/// else up to [`DEFAULT_BATCH`] (which [`fitting_batch`] may lower to fit in memory).
fn batch_of(
    a: &OnnxModel,
    b: &OnnxModel,
    asked: Option<NonZeroUsize>,
    samples: usize,
) -> Result<usize> {
    let fixed = fixed_batch(b).or_else(|| fixed_batch(a));
    Ok(match (fixed, asked.map(NonZeroUsize::get)) {
        (Some(f), Some(x)) if f != x => bail!(
            "{}: the model's batch is fixed to {f}, a batch size of {x} cannot apply",
            b.path.display()
        ),
        (Some(f), _) => f,
        (None, Some(x)) => x.min(samples),
        (None, None) => samples.min(DEFAULT_BATCH),
    })
}

/// The most bytes of marked outputs held at once when `--layerwise-group-bytes` does not say:
/// half the memory the system has left, at most 512 MiB (512 MiB where it cannot tell). The
/// backends hold about as much again while they run. A smaller batch costs the CPU backends
/// little per sample, and a batch of one ResNet-50 sample with every tensor marked (about 225 MB
/// on both sides) ran as fast as a batch of three and kept the process at half the memory.
fn default_budget() -> u64 {
    const CAP: u64 = 512 << 20;
    available_bytes().map_or(CAP, |b| (b / 2).min(CAP))
}

/// The batch a run with no batch asked for takes: the largest up to `most` whose marked
/// outputs (`per_sample` bytes a sample) fit in `budget` at once, so that every tensor is
/// compared in one group where one sample fits; at least 1.
fn fitting_batch(most: usize, per_sample: u64, budget: u64) -> usize {
    let fits = budget.checked_div(per_sample).unwrap_or(u64::MAX);
    (fits.min(most as u64) as usize).max(1)
}

/// One side of a group run: the model with its tensors marked, on its backend.
struct Side<'a> {
    model: &'a OnnxModel,
    config: &'a SideConfig,
    names: Vec<String>,
}

impl Side<'_> {
    fn open(&self, batch: usize) -> Result<Box<dyn Backend>> {
        let mark = MarkOutputs {
            names: self.names.clone(),
        };
        let marked = run_pass(self.model.clone(), &mark)
            .with_context(|| self.model.path.display().to_string())?;
        let mut options = self.config.backend.clone();
        if fixed_batch(self.model).is_none() {
            options.batch = Some(batch);
        }
        open(&marked, &options).with_context(|| self.model.path.display().to_string())
    }
}

/// Samples `start..start + take` of every input.
fn chunk(inputs: &[HostTensor], start: usize, take: usize) -> Result<Vec<HostTensor>> {
    inputs
        .iter()
        .map(|t| slice_padded(t, start, take))
        .collect()
}

/// The outputs of a run by name.
type ByName<'t> = std::collections::HashMap<&'t str, &'t HostTensor>;

fn by_name(outputs: &[HostTensor]) -> ByName<'_> {
    outputs.iter().map(|t| (t.name.as_str(), t)).collect()
}

/// The output named `name` of a run.
fn output<'t>(outputs: &ByName<'t>, name: &str, path: &str) -> Result<&'t HostTensor> {
    outputs
        .get(name)
        .copied()
        .with_context(|| format!("{path}: the run gave no tensor '{name}'"))
}

/// What running one group gave: per tensor its sums and shape, the bytes held, the backends
/// and, per side, the inputs converted to the float type its model takes.
struct GroupRun {
    stats: Vec<TensorStats>,
    shapes: Vec<Vec<usize>>,
    peak_bytes: u64,
    backends: [String; 2],
    converted: [Vec<FloatConversion>; 2],
}

/// Runs the tensors `sides` mark over every sample, `batch` at a time, summing each tensor's
/// statistics as its values come.
fn run_group(
    sides: [&Side; 2],
    inputs: &[HostTensor],
    samples: usize,
    batch: usize,
    tol: &Tolerance,
    progress: &dyn Progress,
    opened_b: Option<Box<dyn Backend>>,
) -> Result<GroupRun> {
    let b = match opened_b {
        Some(b) => b,
        None => sides[1].open(batch)?,
    };
    let mut backends = [sides[0].open(batch)?, b];
    let n = sides[1].names.len();
    let mut run = GroupRun {
        stats: vec![TensorStats::default(); n],
        shapes: vec![vec![]; n],
        peak_bytes: 0,
        backends: [backends[0].name(), backends[1].name()],
        converted: Default::default(),
    };
    let paths = sides.map(|s| s.model.path.display().to_string());
    let mut start = 0;
    while start < samples {
        let take = batch.min(samples - start);
        // Every backend was opened for `batch` samples: a short last batch is padded to it,
        // and each compared tensor (all of them carry the batch axis) cut back to `take`.
        let part = chunk(inputs, start, batch)?;
        let mut outs = Vec::with_capacity(2);
        for (side, (backend, path)) in backends.iter_mut().zip(&paths).enumerate() {
            let (fed, converted) = conform_floats(&part, backend.inputs());
            let ran = backend.run(&fed).with_context(|| path.clone())?;
            run.converted[side] = converted;
            let cut: Result<Vec<HostTensor>> = ran
                .outputs
                .into_iter()
                .map(|t| match t.shape.first() {
                    Some(&n) if n == batch => truncate(t, take),
                    _ => Ok(t),
                })
                .collect();
            outs.push(cut.with_context(|| path.clone())?);
        }
        let held: usize = outs.iter().flatten().map(HostTensor::byte_len).sum();
        run.peak_bytes = run.peak_bytes.max(held as u64);
        let (out_a, out_b) = (by_name(&outs[0]), by_name(&outs[1]));
        let mut pairs = Vec::with_capacity(n);
        for i in 0..n {
            let a = output(&out_a, &sides[0].names[i], &paths[0])?;
            let b = output(&out_b, &sides[1].names[i], &paths[1])?;
            if a.shape != b.shape {
                bail!(
                    "tensor '{}': {} has shape {:?} ('{}'), {} has {:?}",
                    sides[1].names[i],
                    paths[0],
                    a.shape,
                    a.name,
                    paths[1],
                    b.shape
                );
            }
            if run.shapes[i].is_empty() {
                run.shapes[i] = b.shape.clone();
            }
            pairs.push((a, b));
        }
        // Tensors are independent: their sums are taken on every core.
        run.stats
            .par_iter_mut()
            .zip(pairs)
            .for_each(|(stats, (a, b))| stats.add(&a.data.as_f32(), &b.data.as_f32(), tol));
        progress.advance(take as u64);
        start += take;
    }
    for (b, path) in backends.iter_mut().zip(&paths) {
        for note in b.finish()? {
            tracing::info!("{path}: {note}");
        }
    }
    Ok(run)
}

/// What the probe of the reference learned: the bytes one sample of each marked tensor takes
/// (`None` for a tensor that does not carry the batch axis), and the backend it ran on, opened
/// for `rows` samples, which the comparison reuses when it runs at that batch in one group.
struct Probe {
    sizes: Vec<Option<u64>>,
    backend: Box<dyn Backend>,
    rows: usize,
}

/// Runs `side` with all of its tensors marked on one sample (one batch where the model fixes
/// it). A tensor whose first axis is not that many rows (a scalar, a constant, shape arithmetic)
/// is the same for every sample, and no sample of A can diverge there; one that happens to
/// have a first axis of one row is compared, which costs nothing and misleads no one (both sides
/// hold the same constant).
fn per_sample_bytes(side: &Side, inputs: &[HostTensor]) -> Result<Probe> {
    let rows = fixed_batch(side.model).unwrap_or(1);
    let mut backend = side.open(rows)?;
    let path = side.model.path.display().to_string();
    let part = chunk(inputs, 0, rows)?;
    let (fed, _) = conform_floats(&part, backend.inputs());
    let ran = backend.run(&fed).with_context(|| path.clone())?;
    let outputs = by_name(&ran.outputs);
    let sizes = side
        .names
        .iter()
        .map(|n| {
            let t = output(&outputs, n, &path)?;
            Ok((t.shape.first() == Some(&rows)).then(|| t.byte_len() as u64 / rows as u64))
        })
        .collect::<Result<_>>()?;
    Ok(Probe {
        sizes,
        backend,
        rows,
    })
}

/// The matched tensors that carry the batch axis, with the bytes a sample of each takes on both
/// sides (each about as many as the reference's), and the names of those that do not.
type Split = (Vec<(ProducedTensor, String)>, Vec<u64>, Vec<String>);

fn split_by_batch_axis(matched: Vec<(ProducedTensor, String)>, sizes: Vec<Option<u64>>) -> Split {
    let mut split: Split = (vec![], vec![], vec![]);
    for (m, size) in matched.into_iter().zip(sizes) {
        match size {
            Some(bytes) => {
                split.1.push(bytes.saturating_mul(2));
                split.0.push(m);
            }
            None => split.2.push(m.0.name),
        }
    }
    split
}

/// Each compared tensor's row, in the reference's graph order, and the first one below
/// `threshold`.
fn divergences(
    matched: Vec<(ProducedTensor, String)>,
    stats: &[TensorStats],
    shapes: Vec<Vec<usize>>,
    threshold: f64,
) -> (Vec<TensorDivergence>, Option<FirstDivergence>) {
    let tensors: Vec<TensorDivergence> = matched
        .into_iter()
        .zip(stats.iter().zip(shapes))
        .map(|((t, m), (s, shape))| TensorDivergence {
            name: t.name,
            matched: m,
            node: t.node,
            op: t.op,
            order: t.order,
            depth: t.depth,
            shape,
            figures: s.figures(),
        })
        .collect();
    let first = first_divergence(&tensors, threshold).map(|i| FirstDivergence {
        tensor: tensors[i].name.clone(),
        node: tensors[i].node.clone(),
        op: tensors[i].op.clone(),
        cosine: tensors[i].figures.cosine,
    });
    (tensors, first)
}

/// Runs the layerwise comparison. `progress` gets one phase per group, advancing by samples.
pub fn layerwise(config: &LayerwiseConfig, progress: &dyn Progress) -> Result<LayerwiseReport> {
    let c = &config.compare;
    let a = onnx_side(&c.a, &c.input_shapes)?;
    let b = onnx_side(&c.b, &c.input_shapes)?;
    let (matched, unmatched) = match_tensors(candidates(&b, config.tensors.as_deref())?, &a);
    if matched.is_empty() {
        bail!(
            "{}: none of the reference's tensors is in {}",
            b.path.display(),
            a.path.display()
        );
    }
    let specs = declared_inputs(&b)?;
    let (inputs, mut note) = make_inputs(
        &c.inputs,
        &specs,
        &b.path,
        &int_input_roles(&b),
        &crate::tensor::BatchAxes::default(),
    )?;
    let samples = crate::backend::batch_runner::samples_of(&inputs)?;
    let mut batch = batch_of(&a, &b, c.batch_size, samples)?;
    let names = |matched: &[(ProducedTensor, String)], i: usize| -> Vec<String> {
        matched
            .iter()
            .map(|m| [&m.1, &m.0.name][i].clone())
            .collect()
    };
    let probe = Side {
        model: &b,
        config: &c.b,
        names: names(&matched, 1),
    };
    let probe = per_sample_bytes(&probe, &inputs)?;
    let (matched, per_sample, same_for_every_sample) = split_by_batch_axis(matched, probe.sizes);
    let whole = [
        Side {
            model: &a,
            config: &c.a,
            names: names(&matched, 0),
        },
        Side {
            model: &b,
            config: &c.b,
            names: names(&matched, 1),
        },
    ];
    let budget = config.group_bytes.unwrap_or_else(default_budget);
    if c.batch_size.is_none() && fixed_batch(&a).or_else(|| fixed_batch(&b)).is_none() {
        batch = fitting_batch(batch, per_sample.iter().sum(), budget);
    }
    let cost: Vec<u64> = per_sample
        .iter()
        .map(|s| s.saturating_mul(batch as u64))
        .collect();
    let parts = groups(&cost, budget);
    // One group at the probe's batch: the probe's backend of B runs it (one session less).
    let mut opened_b = (parts.len() == 1 && batch == probe.rows).then_some(probe.backend);
    let mut stats = vec![TensorStats::default(); matched.len()];
    let mut shapes = vec![vec![]; matched.len()];
    let mut memory = MemoryUse {
        groups: parts.len(),
        peak_marked_bytes: 0,
        peak_rss_bytes: None,
    };
    let mut backends = [String::new(), String::new()];
    let mut converted: [Vec<FloatConversion>; 2] = Default::default();
    for (g, part) in parts.iter().enumerate() {
        let pick = |s: &Side| part.iter().map(|&i| s.names[i].clone()).collect();
        let sides = [&whole[0], &whole[1]].map(|s| Side {
            model: s.model,
            config: s.config,
            names: pick(s),
        });
        progress.start(
            &format!("tensors, group {}/{}", g + 1, parts.len()),
            Some(samples as u64),
        );
        let run = run_group(
            [&sides[0], &sides[1]],
            &inputs,
            samples,
            batch,
            &c.tolerance,
            progress,
            opened_b.take(),
        );
        progress.finish();
        let run = run?;
        for (k, &i) in part.iter().enumerate() {
            stats[i] = run.stats[k];
            shapes[i] = run.shapes[k].clone();
        }
        memory.peak_marked_bytes = memory.peak_marked_bytes.max(run.peak_bytes);
        backends = run.backends;
        converted = run.converted;
    }
    // Inputs a side took in another float type are said where the inputs are.
    for (conversions, side) in converted.iter().zip(["A", "B"]) {
        if let Some(said) = conversion_note(conversions, side) {
            note.push_str(&format!("; {said}"));
        }
    }
    memory.peak_rss_bytes = peak_rss_bytes();
    let (tensors, first) = divergences(matched, &stats, shapes, config.cosine_threshold);
    let [backend_a, backend_b] = backends;
    Ok(LayerwiseReport {
        a: c.a.path.display().to_string(),
        b: c.b.path.display().to_string(),
        backend_a,
        backend_b,
        inputs: note,
        samples,
        batch,
        tolerance: c.tolerance,
        cosine_threshold: config.cosine_threshold,
        tensors,
        first_divergence: first,
        unmatched,
        same_for_every_sample,
        memory,
    })
}

#[cfg(test)]
mod tests {
    use super::fitting_batch;

    #[test]
    fn the_batch_shrinks_until_the_marked_outputs_fit() {
        // 100 MB a sample: a 1 GiB budget holds 10 of them.
        assert_eq!(fitting_batch(32, 100_000_000, 1 << 30), 10);
        assert_eq!(fitting_batch(4, 100_000_000, 1 << 30), 4);
        // Not even one sample fits: one at a time, and the tensors go in groups.
        assert_eq!(fitting_batch(32, 5 << 30, 1 << 30), 1);
        assert_eq!(fitting_batch(32, 0, 1 << 30), 32);
    }
}
