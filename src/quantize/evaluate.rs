//! How close an INT8 variant of a model stays to the float model, on real samples: the samples
//! are read once (split into a tuning and a check part, [`crate::quantize::eval_samples`]) and
//! the float model's outputs computed once on each; what fits the INT8 model to data (the scale
//! search, bias correction's means, adaptive rounding) sees the tuning part only. Each variant
//! (the Q/DQ plan with some nodes left in float) is then rewritten in memory, opened on the
//! reference backend (tract or ONNX Runtime) and scored by the cosine, top-1 agreement and mean
//! absolute error of its first output against the float one, with 95% intervals. The
//! sensitivity scan and the accuracy-target search both measure through it.

use crate::backend::mac_count::model_macs;
use crate::calibration::cache::{check_cache_model, CalibrationTable};
use crate::digest::file_sha256;
use crate::metrics::bootstrap::IntervalScores;
use crate::onnx::macs::MacsCount;
use crate::onnx::rewrite::bias::correct_biases;
use crate::onnx::rewrite::constant_weights::LiftConstantWeights;
use crate::onnx::rewrite::pass::run_pass;
use crate::onnx::rewrite::plan::{node_label, node_op, QuantPlan};
use crate::onnx::rewrite::qdq::WeightQuant;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::quantize::adaptive_rounding::{round_adaptively, rounding_inputs, RoundingReport};
pub use crate::quantize::eval_config::{EvalConfig, WeightRounding};
use crate::quantize::plan::{int8_model, int8_pass};
use crate::quantize::reference::Reference;
pub(crate) use crate::quantize::reference::SampleUse;
use crate::quantize::scale_search::{
    keep_better, search_scales, ScaleSearch, ScaleSearchReport, ScaleVerdict, SEARCH_SAMPLES,
};
use crate::tensor::HostTensor;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// How close a variant's first output is to the float model's, on a set of samples, with 95%
/// intervals.
pub(crate) type Score = IntervalScores;

/// Samples the layers' inputs are captured on for adaptive rounding (the first of the tuning
/// part).
pub(crate) const ROUNDING_SAMPLES: usize = 32;

/// The float model, its plan and scales, the samples and the reference outputs.
pub(crate) struct Evaluator {
    /// The float model.
    pub model: OnnxModel,
    /// The full INT8 plan of the model.
    pub plan: QuantPlan,
    /// The activation scales.
    pub scales: BTreeMap<String, f32>,
    /// MACs per node (empty when the shapes cannot be inferred).
    pub macs: MacsCount,
    /// What the scale search changed (when asked for).
    pub scale_search: Option<ScaleSearchReport>,
    /// What adaptive rounding changed (when asked for).
    pub rounding: Option<RoundingReport>,
    /// The samples and the float model's outputs on them.
    reference: Reference,
    /// Input channel means of the quantized convolutions (bias correction only).
    means: HashMap<String, Vec<f64>>,
    /// How the weights become INT8 (with the adaptively rounded ones, when asked for).
    weights: WeightQuant,
    config: EvalConfig,
}

impl Evaluator {
    /// Loads the model and cache, reads the samples and runs the float model on them.
    pub fn new(config: &EvalConfig, progress: &dyn Progress) -> Result<Evaluator> {
        Evaluator::from_model(OnnxModel::load(&config.model)?, config, progress)
    }

    /// [`Evaluator::new`] for `model`, already loaded from `config.model`.
    pub(crate) fn from_model(
        model: OnnxModel,
        config: &EvalConfig,
        progress: &dyn Progress,
    ) -> Result<Evaluator> {
        let model = run_pass(model, &LiftConstantWeights)?;
        let table = CalibrationTable::load(&config.cache)?;
        check_cache_model(&config.cache, &config.model, &file_sha256(&config.model)?)?;
        // The INT8 pass refuses a model with nothing to quantize.
        let plan = int8_pass(&model, &table.scales)?.plan;
        let reference = Reference::new(&model, config)?;
        let macs = model_macs(&model, &config.backend.input_shapes).unwrap_or_default();
        let mut me = Evaluator {
            scale_search: None,
            rounding: None,
            model,
            plan,
            scales: table.scales,
            macs,
            reference,
            means: HashMap::new(),
            weights: WeightQuant::nearest(config.weight_clip.clone()),
            config: config.clone(),
        };
        if config.bias_correction {
            me.means = me.channel_means(me.bias_inputs())?;
        }
        if config.scale_search == ScaleSearch::Layer {
            me.search_scales(progress)?;
        }
        if config.weight_rounding == WeightRounding::Adaptive {
            me.round_weights(progress)?;
        }
        Ok(me)
    }

    /// The inputs of the convolutions bias correction corrects.
    fn bias_inputs(&self) -> Vec<String> {
        let g = self.model.graph();
        self.plan
            .weights
            .iter()
            .filter(|w| g.node[w.consumer.0].op_type == "Conv")
            .filter_map(|w| g.node[w.consumer.0].input.first().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Every tensor `names` lists, captured from the float model on the first `samples`
    /// tuning samples, batch by batch.
    fn capture_all(
        &mut self,
        names: Vec<String>,
        samples: usize,
    ) -> Result<BTreeMap<String, Vec<HostTensor>>> {
        if self
            .model
            .graph()
            .initializer
            .iter()
            .any(|t| !t.external_data.is_empty())
        {
            self.model.inline_external_data()?;
        }
        let mut captured: BTreeMap<String, Vec<HostTensor>> = BTreeMap::new();
        self.capture(names, samples, |name, t| {
            captured
                .entry(name.to_string())
                .or_default()
                .push(t.clone());
            Ok(())
        })?;
        Ok(captured)
    }

    /// Replaces the calibrated activation scales with those [`search_scales`] finds on the
    /// first [`SEARCH_SAMPLES`] tuning samples.
    fn search_scales(&mut self, progress: &dyn Progress) -> Result<()> {
        let samples = SEARCH_SAMPLES.min(self.reference.tune.count);
        let captured = self.capture_all(self.plan.activation_names(), samples)?;
        progress.start(
            "activation scales",
            Some(self.plan.activations.len() as u64),
        );
        let (scales, report) = search_scales(
            &self.model,
            &self.plan,
            &self.scales,
            captured,
            samples,
            &self.config.backend,
            &self.config.weight_clip,
            |name| {
                progress.status(format!("searching the scale of {name}"));
                progress.advance(1);
            },
        )?;
        progress.finish();
        let (scales, verdict) = self.keep_better_scales(scales, progress)?;
        self.scales = scales;
        self.scale_search = Some(ScaleSearchReport {
            verdict: Some(verdict),
            ..report
        });
        Ok(())
    }

    /// The searched `scales` or the cache's, whichever gives the whole INT8 model the higher
    /// cosine on the check samples (on the tuning samples without a check set).
    fn keep_better_scales(
        &mut self,
        searched: BTreeMap<String, f32>,
        progress: &dyn Progress,
    ) -> Result<(BTreeMap<String, f32>, ScaleVerdict)> {
        progress.status("scoring the searched scales against the cache's".into());
        let judged_on = if self.reference.check.is_some() {
            "check"
        } else {
            "tuning"
        };
        let none = BTreeSet::new();
        let cosine = |me: &Self| -> Result<f64> {
            let variant = me.variant(&none)?;
            Ok(match me.reference.check_score(&variant)? {
                Some(s) => s.cosine,
                None => me.reference.score(&variant)?.cosine,
            })
        };
        let plain_cosine = cosine(self)?;
        let plain = std::mem::replace(&mut self.scales, searched);
        let searched_cosine = cosine(self)?;
        let searched = std::mem::take(&mut self.scales);
        Ok(keep_better(
            plain,
            searched,
            (plain_cosine, searched_cosine),
            judged_on,
        ))
    }

    /// Chooses each quantized weight's rounding by its layer's output on the first
    /// [`ROUNDING_SAMPLES`] tuning samples ([`round_adaptively`]).
    fn round_weights(&mut self, progress: &dyn Progress) -> Result<()> {
        progress.start("adaptive rounding", None);
        progress.status("capturing the layers' inputs".into());
        let names = rounding_inputs(&self.model, &self.plan);
        let captured = self.capture_all(names, ROUNDING_SAMPLES)?;
        progress.status("rounding the weights".into());
        let (chosen, report) = round_adaptively(
            &self.model,
            &self.plan,
            self.config.weight_clip.clone(),
            &captured,
        )?;
        progress.finish();
        self.weights.chosen = Arc::new(chosen);
        self.rounding = Some(report);
        Ok(())
    }

    /// Runs the float model with `tensors` exposed as outputs on the first `samples` tuning
    /// samples and hands each captured tensor to `each`, batch by batch.
    fn capture(
        &self,
        tensors: Vec<String>,
        samples: usize,
        each: impl FnMut(&str, &HostTensor) -> Result<()>,
    ) -> Result<()> {
        self.reference.capture(&self.model, tensors, samples, each)
    }

    /// The mean of each channel (axis 1) of `tensors` over the tuning samples, from one pass
    /// of the float model with them exposed as outputs.
    fn channel_means(&self, tensors: Vec<String>) -> Result<HashMap<String, Vec<f64>>> {
        let mut sums: HashMap<String, (Vec<f64>, usize)> = HashMap::new();
        self.capture(tensors, self.reference.tune.count, |name, t| {
            let channels = *t.shape.get(1).unwrap_or(&1);
            let inner: usize = t.shape.iter().skip(2).product();
            let entry = sums
                .entry(name.to_string())
                .or_insert_with(|| (vec![0.0; channels], 0));
            for (i, v) in t.data.to_f64().into_iter().enumerate() {
                entry.0[(i / inner.max(1)) % channels] += v;
            }
            entry.1 += t.data.len() / channels.max(1);
            Ok(())
        })?;
        Ok(sums
            .into_iter()
            .map(|(name, (sum, n))| (name, sum.iter().map(|s| s / n.max(1) as f64).collect()))
            .collect())
    }

    /// The INT8 model with every node of the plan in INT8 except `float` (biases corrected
    /// when asked).
    pub fn variant(&self, float: &BTreeSet<usize>) -> Result<OnnxModel> {
        let plan = self.plan.without(float);
        let mut base = self.model.clone();
        if self.config.bias_correction {
            base.inline_external_data()?;
            correct_biases(&mut base, &plan, &self.means, &self.weights)?;
        }
        int8_model(
            &base,
            plan,
            &self.scales,
            self.config.fallback,
            &self.weights,
        )
    }

    /// The score, on the tuning samples, of the model with every node of the plan in INT8
    /// except `float`.
    pub fn score(&self, float: &BTreeSet<usize>) -> Result<Score> {
        self.reference.score(&self.variant(float)?)
    }

    /// The score of the same model on the check samples (`None` without a check set).
    pub(crate) fn check_score(&self, float: &BTreeSet<usize>) -> Result<Option<Score>> {
        if self.reference.check.is_none() {
            return Ok(None);
        }
        self.reference.check_score(&self.variant(float)?)
    }

    /// Which samples the scores come from.
    pub(crate) fn sample_use(&self) -> SampleUse {
        self.reference.sample_use()
    }

    /// The nodes the plan quantizes, in graph order.
    pub(crate) fn quantized_nodes(&self) -> Vec<usize> {
        self.plan.quantized_nodes().into_iter().collect()
    }

    /// A node's label (its name, or `#INDEX`).
    pub fn label(&self, node: usize) -> String {
        node_label(self.model.graph(), node)
    }

    /// A node's op type.
    pub fn op(&self, node: usize) -> String {
        node_op(self.model.graph(), node)
    }

    /// The share of the model's counted MACs that run in INT8 when `float` is left in float.
    pub fn int8_share(&self, float: &BTreeSet<usize>) -> Option<f64> {
        (self.macs.total > 0).then(|| {
            self.macs
                .share(self.plan.quantized_nodes().difference(float).copied())
        })
    }
}

/// What `quantize --int8 --eval-data` wrote and how close it stays.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MeasuredReport {
    /// The model written.
    pub output: String,
    /// The nodes left in float.
    pub float_nodes: Vec<String>,
    /// Convolution biases corrected.
    pub bias_correction: bool,
    /// How the weights were rounded.
    #[serde(default)]
    pub weight_rounding: WeightRounding,
    /// Its score against the float model on the tuning samples.
    pub score: Score,
    /// Its score on the check samples (absent without a check set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Score>,
    /// Share of the counted MACs that run in INT8, in [0, 1].
    pub int8_share: Option<f64>,
    /// The samples scored.
    pub samples: SampleUse,
    /// What the activation scale search changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_search: Option<ScaleSearchReport>,
    /// What adaptive rounding changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounding: Option<RoundingReport>,
    /// Wall time, seconds.
    #[serde(default)]
    pub wall_s: f64,
}

/// Writes the INT8 model with the nodes `exclude` names in float and measures it.
pub fn measure_int8(
    config: &EvalConfig,
    exclude: &crate::onnx::rewrite::plan::Exclusion,
    output: &std::path::Path,
    progress: &dyn Progress,
) -> Result<MeasuredReport> {
    let start = std::time::Instant::now();
    let eval = Evaluator::new(config, progress)?;
    let float = exclude.resolve(eval.model.graph())?;
    let variant = eval.variant(&float)?;
    let score = eval.score(&float)?;
    let check = eval.check_score(&float)?;
    OnnxModel::from_proto(variant.proto, output).save(output)?;
    Ok(MeasuredReport {
        output: output.display().to_string(),
        float_nodes: eval
            .plan
            .quantized_nodes()
            .intersection(&float)
            .map(|&i| eval.label(i))
            .collect(),
        bias_correction: config.bias_correction,
        weight_rounding: config.weight_rounding,
        score,
        check,
        int8_share: eval.int8_share(&float),
        samples: eval.sample_use(),
        scale_search: eval.scale_search.clone(),
        rounding: eval.rounding.clone(),
        wall_s: start.elapsed().as_secs_f64(),
    })
}
