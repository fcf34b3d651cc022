//! The float model's side of every measurement of a reduced-precision variant: the samples
//! (tuning and check parts, [`crate::quantize::eval_samples`]), the float model's first output
//! on each part, computed once, and the scoring of a variant's first output against it (cosine,
//! top-1 agreement, mean absolute error, with 95% intervals), all on the reference backend. The
//! INT8 evaluator and the FP16 one both measure through it.

use crate::backend::batch_runner::run_batched;
use crate::backend::open;
use crate::backend::select::BackendOptions;
use crate::backend::Backend;
use crate::data::batch_axis::slice_padded;
use crate::metrics::bootstrap::{interval_scores, sample_sums, IntervalScores};
use crate::onnx::rewrite::capture::{Capture, Source};
use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::OnnxModel;
use crate::progress::NoProgress;
use crate::quantize::check_split::CheckOrigin;
use crate::quantize::eval_config::EvalConfig;
use crate::quantize::eval_samples::{batches_of, read_eval_samples};
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The seed of the bootstrap intervals (fixed: the same scores, the same intervals).
const INTERVAL_SEED: u64 = 0x5eed;

/// Samples and the float model's first output on them.
pub(crate) struct SampleSet {
    /// One tensor per model input, samples along axis 0.
    pub inputs: Vec<HostTensor>,
    /// How many samples.
    pub count: usize,
    /// The float model's first output on them, flattened.
    pub reference: Vec<f64>,
}

/// Which samples a triage report's scores come from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleUse {
    /// Samples tuned on (the scale search, bias correction, rounding, the search's choices).
    pub tune: usize,
    /// Samples kept apart and only scored (0 without a check set).
    pub check: usize,
    /// Where the check samples came from.
    pub(crate) check_from: String,
    /// Samples the sources had beyond `--eval-samples`, left out.
    pub left_out: usize,
    /// How the check samples were chosen and which files they share with the tuning samples.
    #[serde(default)]
    pub check_origin: CheckOrigin,
}

/// The samples, the float model's outputs on them, and the backend every variant runs on.
pub(crate) struct Reference {
    /// The tuning part.
    pub tune: SampleSet,
    /// The check part (`None` without a check set).
    pub check: Option<SampleSet>,
    /// Samples the sources had beyond `--eval-samples`.
    pub left_out: usize,
    /// How the check samples were chosen.
    origin: CheckOrigin,
    /// Classes of a `[N, classes]` first output (top-1 agreement is scored on those).
    classes: Option<usize>,
    config: EvalConfig,
}

impl Reference {
    /// Reads the samples `config` names for `model` and runs `model` (the float one) on them.
    pub fn new(model: &OnnxModel, config: &EvalConfig) -> Result<Reference> {
        let samples = read_eval_samples(model, config)?;
        let set = |inputs: Vec<HostTensor>, count: usize| SampleSet {
            inputs,
            count,
            reference: vec![],
        };
        let mut me = Reference {
            tune: set(samples.tune, samples.tune_count),
            check: (samples.check_count > 0).then(|| set(samples.check, samples.check_count)),
            left_out: samples.left_out,
            origin: samples.origin,
            classes: None,
            config: config.clone(),
        };
        let (reference, shape) = me.outputs(model, &me.tune.inputs)?;
        me.classes = (shape.len() == 2).then_some(shape[1]);
        me.tune.reference = reference;
        if let Some(check) = &me.check {
            let reference = me.outputs(model, &check.inputs)?.0;
            if let Some(c) = me.check.as_mut() {
                c.reference = reference;
            }
        }
        Ok(me)
    }

    /// The reference backend, opened on `model` at the evaluation's batch size.
    pub fn open_backend(&self, model: &OnnxModel) -> Result<Box<dyn Backend>> {
        open(
            model,
            &BackendOptions {
                batch: Some(self.config.batch_size),
                ..self.config.backend.clone()
            },
        )
    }

    /// The first output of `model` over `inputs`, flattened, and its shape per sample set.
    pub fn outputs(
        &self,
        model: &OnnxModel,
        inputs: &[HostTensor],
    ) -> Result<(Vec<f64>, Vec<usize>)> {
        let mut backend = self.open_backend(model)?;
        let out = run_batched(
            backend.as_mut(),
            inputs,
            self.config.batch_size,
            &NoProgress,
        )?;
        let first = out
            .outputs
            .into_iter()
            .next()
            .context("the model has no output")?;
        Ok((first.data.to_f64(), first.shape))
    }

    /// The score of `variant` on `set`.
    fn score_on(&self, variant: &OnnxModel, set: &SampleSet) -> Result<IntervalScores> {
        let (out, _) = self.outputs(variant, &set.inputs)?;
        if out.len() != set.reference.len() {
            bail!("the variant's output has another size than the float model's");
        }
        let classes = self
            .classes
            .filter(|&k| k > 1 && out.len() == set.count * k);
        let sums = sample_sums(&out, &set.reference, set.count, classes);
        Ok(interval_scores(&sums, INTERVAL_SEED))
    }

    /// The score of `variant` on the tuning samples.
    pub fn score(&self, variant: &OnnxModel) -> Result<IntervalScores> {
        self.score_on(variant, &self.tune)
    }

    /// The score of `variant` on the check samples (`None` without a check set).
    pub(crate) fn check_score(&self, variant: &OnnxModel) -> Result<Option<IntervalScores>> {
        let Some(check) = &self.check else {
            return Ok(None);
        };
        Ok(Some(self.score_on(variant, check)?))
    }

    /// Which samples the scores come from.
    pub(crate) fn sample_use(&self) -> SampleUse {
        SampleUse {
            tune: self.tune.count,
            check: self.check.as_ref().map_or(0, |c| c.count),
            check_from: self.config.check.to_string(),
            left_out: self.left_out,
            check_origin: self.origin.clone(),
        }
    }

    /// Runs `model` with `tensors` exposed as outputs on the first `samples` tuning samples and
    /// hands each captured tensor to `each`, batch by batch.
    pub(crate) fn capture(
        &self,
        model: &OnnxModel,
        tensors: Vec<String>,
        samples: usize,
        mut each: impl FnMut(&str, &HostTensor) -> Result<()>,
    ) -> Result<()> {
        let (capture, report) = Capture { names: tensors }.run(model.clone())?;
        let PassReport::Capture { sources } = report else {
            bail!("the capture pass reported no tensor sources");
        };
        let mut backend = self.open_backend(&capture)?;
        let first: Vec<HostTensor> = self
            .tune
            .inputs
            .iter()
            .map(|t| slice_padded(t, 0, samples.min(self.tune.count)))
            .collect::<Result<_>>()?;
        for batch in batches_of(&first, self.config.batch_size)? {
            let out = run_batched(
                backend.as_mut(),
                &batch,
                self.config.batch_size,
                &NoProgress,
            )?;
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
}
