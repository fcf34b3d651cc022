//! The fewest nodes an FP16 model keeps in float32 for an accuracy target: the INT8 target
//! search's method ([`crate::quantize::search`]: ranking, bisection or greedy growth, the give
//! back, the check on samples the choice never saw) over the nodes the FP16 graph computes in
//! float16 ([`Fp16Evaluator`]). The report says why each node stays float32: its float32 output
//! passes float16's range on the samples (`overflow`), or keeping it recovers measured error.
//! The result is kept under a key (model, samples, goal, keep lists, backend) with its SHA-256
//! beside it, so the same question is answered again without measuring.

use crate::digest::file_sha256;
use crate::onnx::rewrite::fp16::{Fp16, Fp16Options};
use crate::onnx::rewrite::pass::run_pass;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::quantize::eval_config::EvalConfig;
use crate::quantize::eval_samples::samples_fingerprint;
use crate::quantize::fp16_eval::Fp16Evaluator;
use crate::quantize::kept_result::{keep, kept_path, short_key};
use crate::quantize::search::{find, Found, Goal, Strategy, Variants};
use crate::quantize::search_report::{Fp16Search, Ran, SearchPrecision, SearchReport};
use crate::tensor::Precision;
use anyhow::{Context, Result};
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

pub use crate::quantize::search_report::{KeepReason, KeptNode};

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
) -> Result<SearchReport> {
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
        match SearchReport::read_kept(&kept, Precision::Fp16) {
            Ok(Some(mut found)) => {
                let mut options = config.options.clone();
                options.keep_nodes.extend(found.float_nodes.iter().cloned());
                let shown = config.eval.model.display().to_string();
                save(
                    config,
                    run_pass(model, &Fp16(options)).with_context(|| shown)?,
                )?;
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
    let ran = Ran {
        model: &config.eval.model,
        output: &config.output,
        goal,
        strategy: config.strategy,
        result: &kept,
        notes,
        started: start,
    };
    let float_nodes = found.float.iter().map(|&i| eval.label(i)).collect();
    let report = SearchReport::ran(
        ran,
        &found,
        float_nodes,
        eval.sample_use(),
        SearchPrecision::Fp16(Fp16Search {
            kept: kept_nodes(&eval, &found, &goal),
            full_fp16: found.full,
            full_fp16_check: found.full_check,
            fp16_share: eval.share(&found.float),
            keep_fp32: config.options.keep_fp32.clone(),
            keep_nodes: config.options.keep_nodes.clone(),
            emulated: eval.emulated,
        }),
    );
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
