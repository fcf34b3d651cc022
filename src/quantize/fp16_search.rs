//! The fewest nodes an FP16 model keeps in float32 for an accuracy target: the INT8 target
//! search's method ([`crate::quantize::search`]: ranking, bisection or greedy growth, the give
//! back, the check on samples the choice never saw) over the nodes the FP16 graph computes in
//! float16 ([`Fp16Evaluator`]). The report says why each node stays float32: its float32 output
//! passes float16's range on the samples (`overflow`), or keeping it recovers measured error.
//! The result is kept under a key (model, samples, goal, keep lists, backend) with its SHA-256
//! beside it, so the same question is answered again without measuring.

use crate::digest::file_sha256;
use crate::metrics::bootstrap::IntervalScores as Score;
use crate::onnx::rewrite::fp16::{Fp16, Fp16Options};
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::quantize::eval_config::EvalConfig;
use crate::quantize::eval_samples::samples_fingerprint;
use crate::quantize::fp16_eval::Fp16Evaluator;
use crate::quantize::kept_result::{keep, kept_path, read_kept, short_key};
use crate::quantize::reference::SampleUse;
use crate::quantize::search::{find, Found, Goal, Strategy, Variants};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// The FP16 search's job.
#[derive(Clone, Debug)]
pub struct Fp16TargetConfig {
    /// The model, samples, check set and reference backend (its INT8 fields are not read).
    pub eval: EvalConfig,
    /// The FP16 rewrite every variant starts from (the op types and nodes the user keeps).
    pub options: Fp16Options,
    /// What to keep.
    pub goal: Goal,
    /// Where the FP16 model goes.
    pub output: PathBuf,
    /// Folder of kept search results; `None`: the output model's folder.
    pub(crate) result_dir: Option<PathBuf>,
    /// Search again even if a result with the same key is kept.
    pub research: bool,
    /// How the float32 part is searched for.
    pub strategy: Strategy,
}

/// Why the search kept a node in float32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum KeepReason {
    /// The float model's output of the node passes ±65504 on the tuning samples.
    Overflow {
        /// The largest magnitude seen.
        max_abs: f64,
    },
    /// Keeping it in float32 brings the output closer to the float model's.
    MeasuredError {
        /// The goal's measure with only this node in float32, on the tuning samples (absent
        /// when not measured, or not a number).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alone: Option<f64>,
        /// What that gains over every candidate in float16 (absent where either is not finite:
        /// an all-FP16 output with NaN or ±Inf values).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovers: Option<f64>,
    },
}

/// A node the search kept in float32, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptNode {
    /// Its name (or `#INDEX`).
    pub name: String,
    /// Its op type.
    pub op: String,
    /// Why it stays float32.
    #[serde(flatten)]
    pub why: KeepReason,
}

/// What the FP16 search found (also the kept result).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fp16TargetReport {
    /// The model.
    pub model: String,
    /// The FP16 model written.
    pub output: String,
    /// The goal.
    pub goal: Goal,
    /// Whether the written model meets it on the check samples (on the tuning samples when
    /// there is no check set).
    pub met: bool,
    /// Whether it meets it on the tuning samples the search chose on.
    pub met_on_tuning: bool,
    /// What the user should know about how "met" was decided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Nodes the search kept in float32, in graph order (beside the op types and nodes kept by
    /// the user).
    pub float_nodes: Vec<String>,
    /// The same nodes, each with why it stays float32.
    pub kept: Vec<KeptNode>,
    /// The written model's score on the tuning samples.
    pub score: Score,
    /// Its score on the check samples (absent without a check set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Score>,
    /// Every candidate in float16, on the tuning samples.
    pub full_fp16: Score,
    /// The same on the check samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) full_fp16_check: Option<Score>,
    /// When the tuning samples met the goal and the check did not: the check score of the
    /// model chosen then (from then on the check chose where to stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) check_when_tuning_met: Option<Score>,
    /// Share of the counted MACs computed in float16, in [0, 1].
    pub(crate) fp16_share: Option<f64>,
    /// The op types kept in float32 in every variant.
    pub(crate) keep_fp32: Vec<String>,
    /// The nodes the user kept in float32 in every variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) keep_nodes: Vec<String>,
    /// Whether the variants were scored with float16 arithmetic emulated (a CPU backend).
    pub emulated: bool,
    /// The samples scored.
    pub samples: SampleUse,
    /// Variants measured.
    pub variants: usize,
    /// How the float32 part was searched for.
    pub strategy: Strategy,
    /// The kept result this came from (or was written to).
    pub result: String,
    /// Whether the result was reused rather than searched.
    pub reused: bool,
    /// Wall time, seconds.
    pub wall_s: f64,
}

impl Fp16TargetConfig {
    /// The folder kept search results go to: the one given, else the output model's.
    pub(crate) fn result_dir(&self) -> PathBuf {
        if let Some(dir) = &self.result_dir {
            return dir.clone();
        }
        self.output
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// The key of a search: everything its answer depends on.
    fn key(&self, fingerprint: &str) -> Result<String> {
        let e = &self.eval;
        let o = &self.options;
        Ok(short_key(&serde_json::json!({
            "precision": "fp16",
            "model": file_sha256(&e.model)?,
            "samples": fingerprint,
            "batch": e.batch_size,
            "shapes": format!("{:?}", e.backend.input_shapes),
            "check": e.check,
            "backend": e.backend.kind,
            "device": format!("{:?}", e.backend.device),
            "goal": self.goal,
            "strategy": self.strategy,
            "keep_fp32": o.keep_fp32,
            "keep_nodes": o.keep_nodes,
            "keep_regex": o.keep_regex,
            "fp16_io": o.fp16_io,
            "trtkit": env!("CARGO_PKG_VERSION"),
        })))
    }
}

/// Searches (or reuses a kept answer), writes the FP16 model and reports.
pub(crate) fn search_fp16_target(
    config: &Fp16TargetConfig,
    progress: &dyn Progress,
) -> Result<Fp16TargetReport> {
    let start = Instant::now();
    let model = OnnxModel::load(&config.eval.model)?;
    crate::quantize::already_quantized::refuse_quantized(&model, "FP16")?;
    let fingerprint = samples_fingerprint(&model, &config.eval)?;
    let kept = kept_path(
        &config.result_dir(),
        &config.eval.model,
        "fp16-target",
        &config.key(&fingerprint)?,
    );
    let mut notes = vec![];
    if !config.research {
        match read_kept::<Fp16TargetReport>(&kept) {
            Ok(Some(mut found)) => {
                let mut options = config.options.clone();
                options.keep_nodes.extend(found.float_nodes.iter().cloned());
                let shown = config.eval.model.display().to_string();
                save(config, Fp16(options).run(model).with_context(|| shown)?.0)?;
                found.output = config.output.display().to_string();
                found.reused = true;
                found.wall_s = start.elapsed().as_secs_f64();
                return Ok(found);
            }
            Ok(None) => {}
            Err(why) => notes.push(format!("the kept search was not reused: {why}")),
        }
    }
    let eval = Fp16Evaluator::new(model, &config.eval, &config.options)?;
    let goal = config.goal;
    let found = find(&eval, goal, config.strategy, progress)?;
    save(config, eval.variant(&found.float)?)?;
    notes.extend(found.notes.iter().cloned());
    let report = Fp16TargetReport {
        model: config.eval.model.display().to_string(),
        output: config.output.display().to_string(),
        goal,
        met: found.met(&goal),
        met_on_tuning: goal.met_by(&found.score),
        notes,
        float_nodes: found.float.iter().map(|&i| eval.label(i)).collect(),
        kept: kept_nodes(&eval, &found, &goal),
        score: found.score,
        check: found.check,
        full_fp16: found.full,
        full_fp16_check: found.full_check,
        check_when_tuning_met: found.check_when_tuning_met,
        fp16_share: eval.share(&found.float),
        keep_fp32: config.options.keep_fp32.clone(),
        keep_nodes: config.options.keep_nodes.clone(),
        emulated: eval.emulated,
        samples: eval.sample_use(),
        variants: found.variants,
        strategy: config.strategy,
        result: kept.display().to_string(),
        reused: false,
        wall_s: start.elapsed().as_secs_f64(),
    };
    keep(&kept, &report)?;
    Ok(report)
}

/// Each node the search kept, with why: an overflow where the float model's output passes
/// float16's range, else what keeping it alone measured.
fn kept_nodes(eval: &Fp16Evaluator, found: &Found, goal: &Goal) -> Vec<KeptNode> {
    let finite = |v: f64| v.is_finite().then_some(v);
    let full = finite(goal.value(&found.full));
    found
        .float
        .iter()
        .map(|&n| KeptNode {
            name: eval.label(n),
            op: eval.op(n),
            why: match eval.overflow.get(&n) {
                Some(&max_abs) => KeepReason::Overflow { max_abs },
                None => {
                    let alone = found
                        .alone
                        .iter()
                        .find(|a| a.0 == n)
                        .and_then(|a| finite(a.1));
                    KeepReason::MeasuredError {
                        alone,
                        recovers: alone.zip(full).map(|(a, f)| a - f),
                    }
                }
            },
        })
        .collect()
}

/// Writes `model` (atomically) where the search's FP16 model goes.
fn save(config: &Fp16TargetConfig, model: OnnxModel) -> Result<()> {
    OnnxModel::from_proto(model.proto, &config.output).save(&config.output)
}
