//! How close an INT8 variant of a model stays to the float model, on real samples: the samples
//! are read once and the float model's outputs computed once; each variant (the Q/DQ plan with
//! some nodes left in float) is then rewritten in memory, opened on the reference backend
//! (tract or ONNX Runtime) and scored by the
//! cosine, top-1 agreement and mean absolute error of its first output against the float one.
//! The sensitivity scan and the accuracy-target search both measure through it.

use crate::backend::mac_count::model_macs;
use crate::backend::select::{open, BackendOptions};
use crate::calibration::cache::{check_cache_model, CalibrationTable};
use crate::calibration::job::{open_samples, CalibrateConfig};
use crate::calibration::sample_source::CalibrationBatches;
use crate::data::preprocess::PreprocessRequest;
use crate::metrics::closeness::{closeness, Tolerance};
use crate::metrics::topk::topk;
use crate::onnx::macs::MacsCount;
use crate::onnx::model::file_sha256;
use crate::onnx::rewrite::bias::correct_biases;
use crate::onnx::rewrite::capture::{Capture, Source};
use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::rewrite::plan::{node_label, QuantPlan};
use crate::onnx::rewrite::qdq::{WeightClip, WeightQuant};
use crate::onnx::shape::InputShapes;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::quantize::job::{int8_model, int8_pass, Fallback};
use crate::quantize::scale_search::{
    search_scales, ScaleSearch, ScaleSearchReport, SEARCH_SAMPLES,
};
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

/// What the measurements of INT8 variants run on.
#[derive(Clone, Debug)]
pub struct EvalConfig {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// Its calibration cache (the activation scales).
    pub cache: PathBuf,
    /// Samples as `calibrate` takes them: images, .npy/.npz, or `synthetic:SEED`.
    pub eval_data: String,
    /// Samples used (default 64).
    pub samples: Option<usize>,
    /// Samples per inference.
    pub batch_size: usize,
    /// How images become model input.
    pub preprocess: PreprocessRequest,
    /// The reference backend that runs the float model and every variant (its batch is set to
    /// `batch_size`).
    pub backend: BackendOptions,
    /// What the nodes left in float compute in.
    pub fallback: Fallback,
    /// How the weights' per-channel ranges are chosen.
    pub weight_clip: WeightClip,
    /// Correct the biases of the INT8 convolutions for their weights' rounding (the input
    /// channel means measured on these samples).
    pub bias_correction: bool,
    /// Search the activation scales on these samples (the cache's are the starting point).
    pub scale_search: ScaleSearch,
}

/// How close a variant's first output is to the float model's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// Cosine similarity of the flattened outputs.
    pub cosine: f64,
    /// Samples whose top-1 class agrees, % (`[batch, classes]` outputs; else `None`).
    pub top1_agreement_pct: Option<f64>,
    /// Mean absolute difference.
    pub mae: f64,
}

/// The default number of samples the variants are measured on.
pub const DEFAULT_EVAL_SAMPLES: usize = 64;

/// The samples `config` names, as batches for `model`.
pub fn open_eval_samples(
    model: &OnnxModel,
    config: &EvalConfig,
) -> Result<Box<dyn CalibrationBatches>> {
    // Samples are made at the sizes `--input-shape`/`--dim` fix (a token model's `seq`).
    let shaped;
    let model = if config.backend.input_shapes.is_empty() {
        model
    } else {
        shaped = InputShapes(config.backend.input_shapes.clone())
            .run(model.clone())
            .with_context(|| config.model.display().to_string())?
            .0;
        &shaped
    };
    open_samples(
        model,
        &CalibrateConfig {
            model: config.model.clone(),
            calib_data: config.eval_data.clone(),
            batch_size: config.batch_size,
            num_images: Some(config.samples.unwrap_or(DEFAULT_EVAL_SAMPLES)),
            algorithms: vec![],
            recalibrate: false,
            cache_dir: PathBuf::new(),
            measure_plain: false,
            backend: Default::default(),
            preprocess: config.preprocess.clone(),
        },
    )
    .with_context(|| format!("evaluation data {}", config.eval_data))
}

/// The float model, its plan and scales, the samples and the reference outputs.
pub struct Evaluator {
    /// The float model.
    pub model: OnnxModel,
    /// The full INT8 plan of the model.
    pub plan: QuantPlan,
    /// The activation scales.
    pub scales: BTreeMap<String, f32>,
    /// MACs per node (empty when the shapes cannot be inferred).
    pub macs: MacsCount,
    /// Samples measured on.
    pub samples: usize,
    /// What the scale search changed (when asked for).
    pub scale_search: Option<ScaleSearchReport>,
    batches: Vec<Vec<HostTensor>>,
    /// Input channel means of the quantized convolutions (bias correction only).
    means: HashMap<String, Vec<f64>>,
    /// How the weights become INT8 (with the adaptively rounded ones, when asked for).
    weights: WeightQuant,
    reference: Vec<f64>,
    classes: Option<usize>,
    config: EvalConfig,
}

impl Evaluator {
    /// Loads the model and cache, reads the samples and runs the float model on them.
    pub fn new(config: &EvalConfig, progress: &dyn Progress) -> Result<Evaluator> {
        Evaluator::from_model(OnnxModel::load(&config.model)?, config, progress)
    }

    /// [`Evaluator::new`] for `model`, already loaded from `config.model`.
    pub fn from_model(
        model: OnnxModel,
        config: &EvalConfig,
        progress: &dyn Progress,
    ) -> Result<Evaluator> {
        let table = CalibrationTable::load(&config.cache)?;
        check_cache_model(&config.cache, &config.model, &file_sha256(&config.model)?)?;
        // The INT8 pass refuses a model with nothing to quantize.
        let plan = int8_pass(&model, &table.scales)?.plan;
        let samples = open_eval_samples(&model, config)?;
        let count = samples.image_count();
        let batches: Vec<Vec<HostTensor>> = samples.collect::<Result<_>>()?;
        if batches.is_empty() {
            bail!("evaluation data {}: no samples", config.eval_data);
        }
        let macs = model_macs(&model, &config.backend.input_shapes).unwrap_or_default();
        let mut me = Evaluator {
            samples: count,
            scale_search: None,
            model,
            plan,
            scales: table.scales,
            macs,
            batches,
            means: HashMap::new(),
            weights: WeightQuant::nearest(config.weight_clip),
            reference: vec![],
            classes: None,
            config: config.clone(),
        };
        let (reference, shape) = me.outputs(&me.model.clone())?;
        me.classes = (shape.len() == 2).then_some(shape[1]);
        me.reference = reference;
        if config.bias_correction {
            let g = me.model.graph();
            let inputs: Vec<String> = me
                .plan
                .weights
                .iter()
                .filter(|w| g.node[w.consumer.0].op_type == "Conv")
                .filter_map(|w| g.node[w.consumer.0].input.first().cloned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            me.means = me.channel_means(inputs)?;
        }
        if config.scale_search == ScaleSearch::Layer {
            me.search_scales(progress)?;
        }
        Ok(me)
    }

    /// Replaces the calibrated activation scales with those [`search_scales`] finds on the
    /// first [`SEARCH_SAMPLES`] samples.
    fn search_scales(&mut self, progress: &dyn Progress) -> Result<()> {
        if self
            .model
            .graph()
            .initializer
            .iter()
            .any(|t| !t.external_data.is_empty())
        {
            self.model.inline_external_data()?;
        }
        let names = self.plan.activation_names();
        let mut captured: BTreeMap<String, Vec<HostTensor>> = BTreeMap::new();
        let mut seen = 0;
        let keep = self
            .batches
            .iter()
            .take_while(|b| {
                let first = seen < SEARCH_SAMPLES;
                seen += b
                    .first()
                    .and_then(|t| t.shape.first())
                    .copied()
                    .unwrap_or(1);
                first
            })
            .count();
        self.capture(names, keep, |name, t| {
            captured
                .entry(name.to_string())
                .or_default()
                .push(t.clone());
            Ok(())
        })?;
        progress.start(
            "activation scales",
            Some(self.plan.activations.len() as u64),
        );
        let (scales, report) = search_scales(
            &self.model,
            &self.plan,
            &self.scales,
            captured,
            &self.config.backend,
            self.config.weight_clip,
            |name| {
                progress.status(format!("searching the scale of {name}"));
                progress.advance(1);
            },
        )?;
        progress.finish();
        self.scales = scales;
        self.scale_search = Some(report);
        Ok(())
    }

    /// Runs the float model with `tensors` exposed as outputs on the first `batches` batches
    /// and hands each captured tensor to `each`, batch by batch.
    fn capture(
        &self,
        tensors: Vec<String>,
        batches: usize,
        mut each: impl FnMut(&str, &HostTensor) -> Result<()>,
    ) -> Result<()> {
        let (capture, report) = Capture { names: tensors }.run(self.model.clone())?;
        let PassReport::Capture { sources } = report else {
            bail!("the capture pass reported no tensor sources");
        };
        let mut backend = open(
            &capture,
            &BackendOptions {
                batch: Some(self.config.batch_size),
                ..self.config.backend.clone()
            },
        )?;
        for batch in self.batches.iter().take(batches) {
            let out = backend.run(batch)?;
            for (name, source) in &sources {
                let t = match source {
                    Source::Output(j) => out.outputs.get(*j),
                    Source::Input(_) => batch.iter().find(|t| &t.name == name),
                }
                .with_context(|| format!("tensor '{name}' was not in the run's outputs"))?;
                each(name, t)?;
            }
        }
        Ok(())
    }

    /// The mean of each channel (axis 1) of `tensors` over the samples, from one pass of the
    /// float model with them exposed as outputs.
    fn channel_means(&self, tensors: Vec<String>) -> Result<HashMap<String, Vec<f64>>> {
        let mut sums: HashMap<String, (Vec<f64>, usize)> = HashMap::new();
        self.capture(tensors, self.batches.len(), |name, t| {
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

    /// The first output of `model` over every sample, flattened, and its shape per batch.
    fn outputs(&self, model: &OnnxModel) -> Result<(Vec<f64>, Vec<usize>)> {
        let mut backend = open(
            model,
            &BackendOptions {
                batch: Some(self.config.batch_size),
                ..self.config.backend.clone()
            },
        )?;
        let mut all = vec![];
        let mut shape = vec![];
        for batch in &self.batches {
            let out = backend.run(batch)?;
            let first = out
                .outputs
                .into_iter()
                .next()
                .context("the model has no output")?;
            shape = first.shape.clone();
            all.extend(first.data.to_f64());
        }
        Ok((all, shape))
    }

    /// The score of the model with every node of the plan in INT8 except `float`.
    pub fn score(&self, float: &BTreeSet<usize>) -> Result<Score> {
        let variant = self.variant(float)?;
        let (out, _) = self.outputs(&variant)?;
        if out.len() != self.reference.len() {
            bail!("the INT8 model's output has another size than the float model's");
        }
        let c = closeness(&out, &self.reference, self.samples, &Tolerance::default());
        let top1 = self
            .classes
            .filter(|&k| k > 1 && out.len() == self.samples * k)
            .map(|k| topk(&out, &self.reference, self.samples, k, 1).top1_agreement_pct);
        Ok(Score {
            cosine: c.cosine,
            top1_agreement_pct: top1,
            mae: c.mean_abs_err,
        })
    }

    /// The nodes the plan quantizes, in graph order.
    pub fn quantized_nodes(&self) -> Vec<usize> {
        self.plan.quantized_nodes().into_iter().collect()
    }

    /// A node's label (its name, or `#INDEX`).
    pub fn label(&self, node: usize) -> String {
        node_label(self.model.graph(), node)
    }

    /// A node's op type.
    pub fn op(&self, node: usize) -> String {
        self.model
            .graph()
            .node
            .get(node)
            .map(|n| n.op_type.clone())
            .unwrap_or_default()
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
    /// Its score against the float model.
    pub score: Score,
    /// Share of the counted MACs that run in INT8, in [0, 1].
    pub int8_share: Option<f64>,
    /// Samples measured on.
    pub samples: usize,
    /// What the activation scale search changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_search: Option<ScaleSearchReport>,
}

/// Writes the INT8 model with the nodes `exclude` names in float and measures it.
pub fn measure_int8(
    config: &EvalConfig,
    exclude: &crate::onnx::rewrite::plan::Exclusion,
    output: &std::path::Path,
    progress: &dyn Progress,
) -> Result<MeasuredReport> {
    let eval = Evaluator::new(config, progress)?;
    let float = exclude.resolve(eval.model.graph())?;
    let variant = eval.variant(&float)?;
    let score = eval.score(&float)?;
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
        score,
        int8_share: eval.int8_share(&float),
        samples: eval.samples,
        scale_search: eval.scale_search.clone(),
    })
}
