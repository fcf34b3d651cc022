//! The smallest float part that keeps an INT8 model at an accuracy target: rank the quantized
//! nodes by what leaving each alone in float recovers, bisect over that order for the shortest
//! prefix that meets the target, then give back to INT8 every node of the prefix the target
//! does not need (each step measured). The search's result is kept under a key (model, scales,
//! samples, fallback, target), with its SHA-256 beside it, so the same question is answered
//! again without measuring, from a result that is the one the search wrote.

use crate::calibration::cache::CalibrationTable;
use crate::digest::file_sha256;
use crate::onnx::rewrite::constant_weights::LiftConstantWeights;
use crate::onnx::rewrite::pass::run_pass;
use crate::onnx::rewrite::plan::{plan_int8, Exclusion};
use crate::onnx::rewrite::qdq::WeightQuant;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::quantize::eval_samples::samples_fingerprint;
use crate::quantize::evaluate::{EvalConfig, Evaluator, SampleUse, Score, WeightRounding};
use crate::quantize::kept_result::{keep, kept_path, short_key};
use crate::quantize::plan::int8_model;
use crate::quantize::scale_search::ScaleSearch;
use crate::quantize::search::{find, Variants};
pub use crate::quantize::search::{Goal, Strategy};
use crate::quantize::search_report::{Int8Search, Ran, SearchPrecision, SearchReport};
use crate::tensor::Precision;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

/// The search's job.
#[derive(Clone, Debug)]
pub struct TargetConfig {
    /// The model, scales and samples.
    pub eval: EvalConfig,
    /// What to keep.
    pub goal: Goal,
    /// Where the INT8 model goes.
    pub output: PathBuf,
    /// Folder of kept search results; `None`: the calibration cache's folder.
    pub(crate) result_dir: Option<PathBuf>,
    /// Search again even if a result with the same key is kept.
    pub research: bool,
    /// How the float part is searched for.
    pub strategy: Strategy,
}

/// The key of a search: everything its answer depends on (the reference backend too: its
/// scores differ slightly).
fn result_key(config: &TargetConfig, fingerprint: &str) -> Result<String> {
    let e = &config.eval;
    let key = serde_json::json!({
        "model": file_sha256(&e.model)?,
        "cache": file_sha256(&e.cache)?,
        "samples": fingerprint,
        "batch": e.batch_size,
        "shapes": format!("{:?}", e.backend.input_shapes),
        "fallback": e.fallback,
        "bias_correction": e.bias_correction,
        "weight_clip": e.weight_clip,
        "scale_search": e.scale_search,
        "weight_rounding": e.weight_rounding,
        "check": e.check,
        "backend": e.backend.kind,
        "device": format!("{:?}", e.backend.device),
        "goal": config.goal,
        "strategy": config.strategy,
        "trtkit": env!("CARGO_PKG_VERSION"),
    });
    Ok(short_key(&key))
}

impl TargetConfig {
    /// The folder kept search results go to: the one given, else the calibration cache's.
    pub(crate) fn result_dir(&self) -> PathBuf {
        if let Some(dir) = &self.result_dir {
            return dir.clone();
        }
        self.eval
            .cache
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// Searches (or reuses a kept answer), writes the INT8 model and reports.
pub fn search_target(config: &TargetConfig, progress: &dyn Progress) -> Result<SearchReport> {
    let start = Instant::now();
    let model = run_pass(OnnxModel::load(&config.eval.model)?, &LiftConstantWeights)?;
    let fingerprint = samples_fingerprint(&model, &config.eval)?;
    let key = result_key(config, &fingerprint)?;
    let kept = kept_path(
        &config.result_dir(),
        &config.eval.model,
        "int8-target",
        &key,
    );
    let mut not_reused = None;
    if !config.research {
        let found = SearchReport::read_kept(&kept, Precision::Int8).unwrap_or_else(|why| {
            not_reused = Some(format!("the kept search was not reused: {why}"));
            None
        });
        if let Some(mut found) = found {
            // Labels are names or `#INDEX`, which is what an exclusion resolves.
            let float = Exclusion {
                nodes: found.float_nodes.clone(),
                ..Default::default()
            }
            .resolve(model.graph())
            .with_context(|| format!("{}: a kept search result", kept.display()))?;
            let tuned = config.eval.bias_correction
                || config.eval.scale_search != ScaleSearch::Off
                || config.eval.weight_rounding != WeightRounding::Nearest;
            let out = if tuned {
                Evaluator::from_model(model, &config.eval, progress)?.variant(&float)?
            } else {
                plain_int8(config, &model, &float)?
            };
            save(config, out)?;
            found.output = config.output.display().to_string();
            found.reused = true;
            found.wall_s = start.elapsed().as_secs_f64();
            return Ok(found);
        }
    }
    let eval = Evaluator::from_model(model, &config.eval, progress)?;
    let goal = config.goal;
    let found = find(&eval, goal, config.strategy, progress)?;
    save(config, eval.variant(&found.float)?)?;
    let ran = Ran {
        model: &config.eval.model,
        output: &config.output,
        goal,
        strategy: config.strategy,
        result: &kept,
        notes: not_reused.into_iter().collect(),
        started: start,
    };
    let float_nodes = found.float.iter().map(|&i| eval.label(i)).collect();
    let report = SearchReport::ran(
        ran,
        &found,
        float_nodes,
        eval.sample_use(),
        SearchPrecision::Int8(Int8Search {
            full_int8: found.full,
            full_int8_check: found.full_check,
            int8_share: eval.int8_share(&found.float),
            weight_rounding: config.eval.weight_rounding,
            scale_search: eval.scale_search.clone(),
            rounding: eval.rounding.clone(),
        }),
    );
    keep(&kept, &report)?;
    Ok(report)
}

/// The INT8 model with `float` left in float, without an evaluator (a reused search that needs
/// no measured bias correction).
fn plain_int8(
    config: &TargetConfig,
    model: &OnnxModel,
    float: &BTreeSet<usize>,
) -> Result<OnnxModel> {
    let table = CalibrationTable::load(&config.eval.cache)?;
    int8_model(
        model,
        plan_int8(model.graph()).without(float),
        &table.scales,
        config.eval.fallback,
        &WeightQuant::nearest(config.eval.weight_clip.clone()),
    )
}

/// Writes `model` (atomically) where the search's INT8 model goes.
fn save(config: &TargetConfig, model: OnnxModel) -> Result<()> {
    OnnxModel::from_proto(model.proto, &config.output).save(&config.output)
}

/// The INT8 evaluator as the search sees it: its candidates are the quantized nodes.
impl Variants for Evaluator {
    fn candidates(&self) -> Vec<usize> {
        self.quantized_nodes()
    }

    fn score(&self, float: &BTreeSet<usize>) -> Result<Score> {
        Evaluator::score(self, float)
    }

    fn check_score(&self, float: &BTreeSet<usize>) -> Result<Option<Score>> {
        Evaluator::check_score(self, float)
    }

    fn label(&self, node: usize) -> String {
        Evaluator::label(self, node)
    }

    fn share(&self, float: &BTreeSet<usize>) -> Option<f64> {
        self.int8_share(float)
    }

    fn sample_use(&self) -> SampleUse {
        Evaluator::sample_use(self)
    }
}
