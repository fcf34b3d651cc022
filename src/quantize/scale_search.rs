//! Activation scales chosen by the error of the layer that reads them, not by the histogram:
//! for every quantized activation, candidate ranges around its calibrated one are tried on
//! captured samples, each through a probe of every node that reads it
//! ([`crate::onnx::rewrite::probe`]: the node in float beside the node with its input and
//! weights quantized), and the range whose quantized outputs stay closest to the float ones
//! wins. A reader the probe cannot isolate (a residual Add) counts the error of the
//! activation itself.

use crate::backend::open;
use crate::backend::select::BackendOptions;
use crate::data::batch_axis::concat;
use crate::onnx::rewrite::plan::{ActivationSite, QuantPlan};
use crate::onnx::rewrite::probe::scale_probe;
use crate::onnx::rewrite::qdq::{scale_of, WeightClipping};
use crate::onnx::OnnxModel;
use crate::tensor::{HostTensor, TensorData};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How the INT8 activation scales are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScaleSearch {
    /// The calibration cache's scales as they are.
    Off,
    /// Each scale searched for the least error of the layers reading the activation (the
    /// default wherever samples are given: on both real models measured it beat the
    /// histogram's ranges by far).
    #[default]
    Layer,
}

/// Candidate ranges tried per activation, besides the calibrated one: a geometric grid from a
/// quarter of the smaller of the calibrated range and the largest magnitude seen up to that
/// magnitude.
pub(crate) const CANDIDATES: usize = 16;

/// The most samples the search captures (the rest of the samples only score).
pub const SEARCH_SAMPLES: usize = 32;

/// What the search chose for one activation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleChoice {
    /// The activation tensor.
    pub tensor: String,
    /// The calibrated range (`scale × 127`).
    pub calibrated_amax: f32,
    /// The chosen range.
    pub amax: f32,
    /// The readers' relative squared error (summed over readers) at the calibrated range.
    pub calibrated_error: f64,
    /// The same at the chosen range (never higher: the calibrated range is a candidate).
    pub error: f64,
}

/// What the search did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleSearchReport {
    /// Samples captured.
    pub samples: usize,
    /// Activations searched.
    pub tensors: usize,
    /// Of which the range changed.
    pub changed: usize,
    /// Readers measured through a probe (the rest by the activation's own error).
    pub(crate) probed: usize,
    /// Every activation's choice, in graph order.
    pub choices: Vec<ScaleChoice>,
    /// The whole INT8 model scored with the searched scales and with the cache's, and which
    /// were kept (absent in reports made before the comparison existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<ScaleVerdict>,
}

/// The searched scales against the calibration cache's, on the whole INT8 model: the search
/// lowers each reading layer's error on the samples it tuned on, which need not make the model
/// closer on others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleVerdict {
    /// The samples both were scored on: `check` (kept apart from the search) or `tuning`
    /// (without a check set).
    pub judged_on: String,
    /// The INT8 model's cosine with the float model's output with the cache's scales.
    #[serde(with = "crate::metrics::non_finite")]
    pub plain_cosine: f64,
    /// The same with the searched scales.
    #[serde(with = "crate::metrics::non_finite")]
    pub searched_cosine: f64,
    /// The cache's scales were kept: they scored better.
    pub kept_plain: bool,
}

/// The scales to keep: the searched ones, unless the cache's (`plain`) give the whole model a
/// higher cosine (`plain_cosine` against `searched_cosine`, on `judged_on`); a NaN score loses.
pub(crate) fn keep_better(
    plain: BTreeMap<String, f32>,
    searched: BTreeMap<String, f32>,
    (plain_cosine, searched_cosine): (f64, f64),
    judged_on: &str,
) -> (BTreeMap<String, f32>, ScaleVerdict) {
    let kept_plain = match (plain_cosine.is_nan(), searched_cosine.is_nan()) {
        (false, true) => true,
        (true, _) => false,
        (false, false) => plain_cosine > searched_cosine,
    };
    let verdict = ScaleVerdict {
        judged_on: judged_on.to_string(),
        plain_cosine,
        searched_cosine,
        kept_plain,
    };
    (if kept_plain { plain } else { searched }, verdict)
}

/// The relative squared error `Σ(a-b)² / Σb²` (0 when `b` is all zeros and `a` equals it).
fn relative_error(a: &[f32], b: &[f32]) -> f64 {
    let (mut diff, mut norm) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        diff += ((x - y) as f64).powi(2);
        norm += (y as f64).powi(2);
    }
    if norm > 0.0 {
        diff / norm
    } else {
        diff
    }
}

/// `values` quantized symmetrically to INT8 at `amax` and back.
fn fake_quantize(values: &[f32], amax: f32) -> Vec<f32> {
    let s = scale_of(amax);
    values
        .iter()
        .map(|&v| (v / s).round().clamp(-128.0, 127.0) * s)
        .collect()
}

/// The candidate ranges of an activation calibrated at `calibrated` whose largest magnitude is
/// `peak`: the calibrated range first, then the grid.
pub(crate) fn candidates(calibrated: f32, peak: f32) -> Vec<f32> {
    let mut out = vec![calibrated];
    let lo = calibrated.min(peak) * 0.25;
    if peak > 0.0 && lo > 0.0 {
        let ratio = (peak / lo).powf(1.0 / (CANDIDATES - 1) as f32);
        out.extend((0..CANDIDATES).map(|i| lo * ratio.powi(i as i32)));
    }
    out
}

/// What every activation's search shares: the model, its plan, where probes run and how
/// weights are quantized.
struct Searcher<'a> {
    model: &'a OnnxModel,
    plan: &'a QuantPlan,
    backend: &'a BackendOptions,
    clip: &'a WeightClipping,
}

impl Searcher<'_> {
    /// Searches the range of one activation given its captured values; also returns how many
    /// of its readers were measured through a probe.
    fn search_one(
        &self,
        site: &ActivationSite,
        calibrated_scale: f32,
        captured: Vec<HostTensor>,
    ) -> Result<(ScaleChoice, usize)> {
        let x = concat(captured)?;
        let TensorData::F32(values) = &x.data else {
            bail!(
                "tensor '{}' is {:?}, not float32; its scale cannot be searched",
                x.name,
                x.elem_type()
            );
        };
        let dims = &x.shape;
        let peak = values.iter().fold(0f32, |m, v| m.max(v.abs()));
        let calibrated = calibrated_scale * 127.0;
        let amaxes = candidates(calibrated, peak);
        let scales: Vec<f32> = amaxes.iter().map(|&a| scale_of(a)).collect();
        let mut errors = vec![0f64; amaxes.len()];
        let mut probed = 0;
        for &consumer in &site.consumers {
            let probe = scale_probe(
                self.model,
                self.plan,
                &site.tensor,
                consumer,
                dims,
                &scales,
                self.clip.clone(),
            )?;
            match probe {
                Some(probe) => {
                    probed += 1;
                    let mut b = open(
                        &probe,
                        &BackendOptions {
                            batch: None,
                            input_shapes: Default::default(),
                            ..self.backend.clone()
                        },
                    )?;
                    let outs = b.run(std::slice::from_ref(&x))?.outputs;
                    let float = float_values(&outs[0]);
                    for (k, e) in errors.iter_mut().enumerate() {
                        *e += relative_error(&float_values(&outs[k + 1]), &float);
                    }
                }
                None => {
                    for (e, &a) in errors.iter_mut().zip(&amaxes) {
                        *e += relative_error(&fake_quantize(values, a), values);
                    }
                }
            }
        }
        // The first (calibrated) candidate wins ties.
        let best = (0..amaxes.len())
            .min_by(|&a, &b| errors[a].total_cmp(&errors[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        let choice = ScaleChoice {
            tensor: site.tensor.clone(),
            calibrated_amax: calibrated,
            amax: amaxes[best],
            calibrated_error: errors[0],
            error: errors[best],
        };
        Ok((choice, probed))
    }
}

/// A probe output's values as float32.
fn float_values(t: &HostTensor) -> Vec<f32> {
    match &t.data {
        TensorData::F32(v) => v.clone(),
        other => other.to_f64().into_iter().map(|v| v as f32).collect(),
    }
}

/// The scales of `plan`'s activations searched on `captured` (each tensor's values over the
/// `samples` search samples, one tensor per batch), starting from `scales`; the probes run on
/// `backend`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search_scales(
    model: &OnnxModel,
    plan: &QuantPlan,
    scales: &BTreeMap<String, f32>,
    mut captured: BTreeMap<String, Vec<HostTensor>>,
    samples: usize,
    backend: &BackendOptions,
    clip: &WeightClipping,
    mut on_tensor: impl FnMut(&str),
) -> Result<(BTreeMap<String, f32>, ScaleSearchReport)> {
    let searcher = Searcher {
        model,
        plan,
        backend,
        clip,
    };
    let mut searched = scales.clone();
    let mut choices = vec![];
    let mut probed = 0;
    for site in &plan.activations {
        on_tensor(&site.tensor);
        let (Some(&scale), Some(values)) =
            (scales.get(&site.tensor), captured.remove(&site.tensor))
        else {
            bail!(
                "tensor '{}': no calibrated scale or no captured values",
                site.tensor
            );
        };
        let (choice, n) = searcher.search_one(site, scale, values)?;
        probed += n;
        searched.insert(site.tensor.clone(), scale_of(choice.amax));
        choices.push(choice);
    }
    Ok((
        searched,
        ScaleSearchReport {
            samples,
            tensors: choices.len(),
            changed: choices
                .iter()
                .filter(|c| c.amax != c.calibrated_amax)
                .count(),
            probed,
            choices,
            verdict: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_start_with_the_calibrated_range_and_reach_the_peak() {
        let c = candidates(2.0, 10.0);
        assert_eq!(c.len(), 1 + CANDIDATES);
        assert_eq!(c[0], 2.0);
        assert!((c[1] - 0.5).abs() < 1e-6);
        assert!((c[CANDIDATES] - 10.0).abs() < 1e-4);
        assert_eq!(candidates(2.0, 0.0), vec![2.0]);
    }

    #[test]
    fn fake_quantization_error_is_smallest_near_the_values_range() {
        let v: Vec<f32> = (0..1000).map(|i| (i as f32 / 999.0) * 2.0 - 1.0).collect();
        let err = |a| relative_error(&fake_quantize(&v, a), &v);
        assert!(err(1.0) < err(4.0));
        assert!(err(1.0) < err(0.25));
        assert_eq!(relative_error(&v, &v), 0.0);
    }

    #[test]
    fn the_cache_scales_are_kept_when_they_score_better() {
        let plain = BTreeMap::from([("x".to_string(), 0.1f32)]);
        let searched = BTreeMap::from([("x".to_string(), 0.05f32)]);
        let (kept, v) = keep_better(plain.clone(), searched.clone(), (0.930, 0.901), "check");
        assert_eq!(kept, plain);
        assert!(v.kept_plain && v.judged_on == "check");
        let (kept, v) = keep_better(plain.clone(), searched.clone(), (0.901, 0.986), "check");
        assert_eq!(kept, searched);
        assert!(!v.kept_plain);
        // A tie keeps the search's; a NaN loses.
        assert_eq!(
            keep_better(plain.clone(), searched.clone(), (0.9, 0.9), "tuning").0,
            searched
        );
        assert_eq!(
            keep_better(plain.clone(), searched.clone(), (0.5, f64::NAN), "tuning").0,
            plain
        );
        assert_eq!(
            keep_better(plain, searched.clone(), (f64::NAN, 0.5), "tuning").0,
            searched
        );
    }
}
