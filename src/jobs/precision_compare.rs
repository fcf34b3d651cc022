//! `compare` of every precision of one model against its FP32 ONNX model (the workspace form of
//! `compare`): the reference runs once, and every engine or kept graph runs on its inputs and is
//! compared with its run in memory. The rows are those of [`super::precision_table`].

use super::precision_table::{
    candidates, row_backend, skipped_lines, Candidate, RowKind, RowSource,
};
use crate::jobs::compare::{
    compare_results, run_sources, CompareConfig, CompareReport, InputSource, RunConfig, RunResult,
    SideConfig, SourceConfig,
};
use crate::jobs::validate::{dataset_tensor, ValidateConfig};
use crate::metrics::closeness::Tolerance;
use crate::metrics::task::TaskComparison;
use crate::metrics::topk::RankRow;
use crate::progress::Progress;
use crate::tensor::HostTensor;
use crate::trt::built_engines::list;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `compare` of everything built from a model against the FP32 ONNX model.
#[derive(Clone, Debug)]
pub(crate) struct CompareAllConfig {
    /// The FP32 ONNX model: the reference.
    pub model: PathBuf,
    /// The folder of engines built from it.
    pub engines: PathBuf,
    /// Everything else: `b` is the reference's backend; `a`'s backend runs each engine or
    /// graph (their paths are replaced per row).
    pub base: CompareConfig,
    /// Compare over these images (preprocessed for the model) instead of `base.inputs`.
    pub images: Option<ValidateConfig>,
}

/// One row of the closeness table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CompareRow {
    /// What ran, and whether it could.
    #[serde(flatten)]
    pub source: RowSource,
    /// isclose %, all elements of the first output.
    pub equal_pct: Option<f64>,
    /// Samples whose every element is close, %.
    pub(crate) all_close_samples_pct: Option<f64>,
    /// Largest |A − B| (NaN or +Inf where the two disagree in non-finite values).
    #[serde(default, with = "crate::metrics::non_finite::option")]
    pub max_abs_err: Option<f64>,
    /// Mean |A − B| (NaN or +Inf as `max_abs_err`).
    #[serde(default, with = "crate::metrics::non_finite::option")]
    pub(crate) mean_abs_err: Option<f64>,
    /// Top-1 agreement with the reference, % (`[batch, classes]` outputs).
    pub top1_agreement_pct: Option<f64>,
    /// NaN elements of this side's output, % (100 means the run is broken).
    pub(crate) nan_pct: Option<f64>,
    /// The rank table (MAE and disagreement per rank).
    pub ranks: Vec<RankRow>,
    /// The task-aware agreement (matched boxes, pixel agreement), when a task applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskComparison>,
}

/// Everything `compare` found over the precisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CompareAllReport {
    /// The reference model.
    pub reference: String,
    /// The reference's backend.
    pub reference_backend: String,
    /// Where the inputs came from.
    pub inputs: String,
    /// Tolerances used.
    pub tolerance: Tolerance,
    /// The first output's name, the one compared.
    pub output: String,
    /// One row per engine or graph.
    pub rows: Vec<CompareRow>,
    /// Engines in the folder that were not compared, and why.
    pub skipped: Vec<String>,
}

/// The reference's run, kept in memory after the first row that ran and compared with every
/// later row, and the inputs it ran on.
struct Reference {
    result: RunResult,
    inputs: Vec<HostTensor>,
    inputs_note: String,
}

/// The inputs of the workspace comparison: the images asked for (preprocessed for the model),
/// else the base config's inputs.
fn workspace_inputs(config: &CompareAllConfig) -> Result<InputSource> {
    Ok(match &config.images {
        Some(images) => {
            let tensor = dataset_tensor(images)?;
            let note = format!(
                "{} images of {}, preprocessed for the model",
                tensor.shape[0],
                images.dataset.display()
            );
            InputSource::Given {
                tensors: vec![tensor],
                note,
            }
        }
        None => config.base.inputs.clone(),
    })
}

/// Runs the row `c` and compares it with the reference: with the reference on `inputs` when it
/// has not run yet (keeping its run in `reference`), else alone on the reference's inputs.
fn compare_row(
    config: &CompareAllConfig,
    c: &Candidate,
    inputs: &InputSource,
    reference: &mut Option<Reference>,
    progress: &dyn Progress,
) -> Result<CompareReport> {
    let row = SourceConfig::new(
        c.label(),
        SideConfig {
            path: c.path.clone(),
            backend: row_backend(&c.kind, &config.base.a.backend),
        },
    );
    let measures = config.base.measures();
    let runner = |sources, inputs: InputSource| RunConfig {
        sources,
        input_shapes: Default::default(),
        batch_size: config.base.batch_size,
        inputs,
    };
    if let Some(r) = reference {
        let given = InputSource::Given {
            tensors: r.inputs.clone(),
            note: r.inputs_note.clone(),
        };
        let runs = run_sources(&runner(vec![row], given), progress)?;
        return compare_results(&runs.results[0], &r.result, &r.inputs_note, &measures);
    }
    let model = SourceConfig::new(
        "fp32 onnx",
        SideConfig {
            path: config.model.clone(),
            backend: config.base.b.backend.clone(),
        },
    );
    let runs = run_sources(&runner(vec![row, model], inputs.clone()), progress)?;
    let mut results = runs.results.into_iter();
    let (tested, result) = (results.next(), results.next());
    let (Some(tested), Some(result)) = (tested, result) else {
        anyhow::bail!("{}: the runner gave no result", c.path.display());
    };
    let kept = reference.insert(Reference {
        result,
        inputs: runs.inputs.unwrap_or_default(),
        inputs_note: match inputs {
            InputSource::Given { note, .. } => note.clone(),
            _ => runs.inputs_note,
        },
    });
    compare_results(&tested, &kept.result, &kept.inputs_note, &measures)
}

/// The closeness row of `c`: its figures when it compared, else why it could not.
fn row_of(c: &Candidate, outcome: &Result<CompareReport>) -> CompareRow {
    let ran = outcome.as_ref().map(|r| r.sides[0].backend.clone());
    let mut row = CompareRow {
        source: RowSource::from_outcome(c, c.label(), ran),
        equal_pct: None,
        all_close_samples_pct: None,
        max_abs_err: None,
        mean_abs_err: None,
        top1_agreement_pct: None,
        nan_pct: None,
        ranks: vec![],
        task: None,
    };
    if let Some(o) = outcome.as_ref().ok().and_then(|r| r.outputs.first()) {
        row.equal_pct = Some(o.closeness.equal_pct);
        row.all_close_samples_pct = Some(o.closeness.all_close_samples_pct);
        row.max_abs_err = Some(o.closeness.max_abs_err);
        row.mean_abs_err = Some(o.closeness.mean_abs_err);
        row.top1_agreement_pct = o.topk.as_ref().map(|k| k.top1_agreement_pct);
        let elements = o.closeness.elements.max(1) as f64;
        row.nan_pct = Some(o.closeness.nan_a as f64 * 100.0 / elements);
        row.ranks = o.topk.as_ref().map(|k| k.ranks.clone()).unwrap_or_default();
    }
    row.task = outcome.as_ref().ok().and_then(|r| r.task.clone());
    row
}

/// Compares every engine built from the model (or its kept graph) with the model. The reference
/// runs once, with the first row that opens (a row that cannot open fails before anything
/// runs); its run and inputs stay in memory and every later row runs on those inputs and is
/// compared with that run.
pub(crate) fn compare_all(
    config: &CompareAllConfig,
    progress: &dyn Progress,
) -> Result<CompareAllReport> {
    let artifacts = list(&config.engines, &config.model)?;
    let inputs = workspace_inputs(config)?;
    let mut reference: Option<Reference> = None;
    let mut output: Option<String> = None;
    let mut rows = vec![];
    for c in candidates(&config.model, &artifacts, false) {
        let engine_ran = rows.iter().any(|r: &CompareRow| {
            r.source.precision == c.precision && r.source.unavailable.is_none()
        });
        if c.kind == RowKind::Graph && engine_ran {
            continue; // the engine itself was compared
        }
        let outcome = compare_row(config, &c, &inputs, &mut reference, progress);
        if let (None, Ok(report)) = (&output, &outcome) {
            output = Some(
                report
                    .outputs
                    .first()
                    .map(|o| o.name.clone())
                    .unwrap_or_default(),
            );
        }
        rows.push(row_of(&c, &outcome));
    }
    let (reference_backend, inputs) = match reference {
        Some(r) => (r.result.backend, r.inputs_note),
        None => (
            String::new(),
            "none: no engine or graph could run, so the reference was not run".into(),
        ),
    };
    Ok(CompareAllReport {
        reference: config.model.display().to_string(),
        reference_backend,
        inputs,
        tolerance: config.base.tolerance,
        output: output.unwrap_or_default(),
        rows,
        skipped: skipped_lines(&artifacts),
    })
}

/// What fails the workspace comparison under `--fail-below PCT`, after its table is shown: a
/// row whose equality or top-1 agreement is below the threshold, or that disagrees in NaN or
/// ±Inf values, and a table where no row was measured (a gate that measured nothing fails).
pub(crate) fn gate(report: &CompareAllReport, fail_below: Option<f64>) -> Result<()> {
    let Some(threshold) = fail_below else {
        return Ok(());
    };
    let flag = format!("--fail-below {threshold}");
    let measured: Vec<&CompareRow> = report
        .rows
        .iter()
        .filter(|r| r.equal_pct.is_some())
        .collect();
    if measured.is_empty() {
        let why: Vec<String> = report
            .rows
            .iter()
            .map(|r| {
                let said = r.source.unavailable.as_deref().unwrap_or("did not run");
                format!("{}: {said}", r.source.label)
            })
            .chain(report.skipped.iter().cloned())
            .collect();
        let why = match why.is_empty() {
            true => "no engine or kept graph of the model was found".to_string(),
            false => why.join("; "),
        };
        anyhow::bail!("{flag}: nothing was measured, so nothing passed ({why})");
    }
    for r in measured {
        if r.max_abs_err.is_some_and(|e| !e.is_finite()) {
            anyhow::bail!(
                "{}: disagrees with the model in NaN or Inf values, below {flag}",
                r.source.shown()
            );
        }
        for (what, pct) in [
            ("equality", r.equal_pct),
            ("top-1 agreement", r.top1_agreement_pct),
        ] {
            if let Some(pct) = pct.filter(|p| p.is_nan() || *p < threshold) {
                anyhow::bail!("{}: {what} {pct:.2}% is below {flag}", r.source.shown());
            }
        }
    }
    Ok(())
}
