//! How ONNX Runtime's CUDA provider is tuned for a model: the layout its convolutions run in
//! (`--layout-policy`), whether cuDNN fuses them (`--cudnn-fuse`), and cuDNN's algorithm search
//! and workspace (`--cudnn-search`, `--cudnn-workspace`). Layout and fusion left on auto are
//! the ways to run the model that [`candidates`] lists; which one wins is measured once
//! (`super::ort_cuda_autotune`), or, where nothing can be measured, [`rule_choice`].

use crate::onnx::OnnxModel;
use std::collections::HashMap;

pub use crate::cuda::ort_stream::ConvAlgoSearch;

/// Which memory layout ONNX Runtime's CUDA provider runs convolutions in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayoutPolicy {
    /// Measured once per model, batch and GPU: NHWC and NCHW ([`candidates`]).
    #[default]
    Auto,
    /// Channels first, as ONNX models are written.
    Nchw,
    /// Channels last inside the provider (`prefer_nhwc`); inputs and outputs keep their layout.
    Nhwc,
}

/// Whether cuDNN may use as much workspace as the fastest convolution algorithm asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CudnnWorkspace {
    /// As much as the fastest algorithm asks for (`cudnn_conv_use_max_workspace`).
    #[default]
    Max,
    /// cuDNN's algorithms limited to ONNX Runtime's small default workspace (32 MiB).
    Limited,
}

/// Whether ONNX Runtime's CUDA provider fuses convolution, bias, residual add and activation
/// into one cuDNN graph (`fuse_conv_bias`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionPolicy {
    /// Measured once per model, batch and GPU with the layout ([`candidates`]).
    #[default]
    Auto,
    /// Fused.
    On,
    /// Not fused.
    Off,
}

/// The CUDA provider's settings as the user asked for them (layout and fusion still policies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrtCudaTuning {
    /// The layout policy.
    pub layout: LayoutPolicy,
    /// How cuDNN picks each convolution's algorithm.
    pub(crate) conv_search: ConvAlgoSearch,
    /// cuDNN's workspace limit.
    pub workspace: CudnnWorkspace,
    /// The fusion policy.
    pub(crate) fusion: FusionPolicy,
    /// The batches the command will run, where it knows them before it starts (`validate`):
    /// of the measured candidates it then takes the one that finishes them soonest, set-up
    /// included ([`super::ort_cuda_autotune::TuningRecord::soonest`]); otherwise the fastest
    /// per batch.
    pub(crate) planned_batches: Option<usize>,
}

/// One way to run a model: its convolutions' layout and whether they are fused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) struct Candidate {
    /// Convolutions in NHWC.
    pub(crate) nhwc: bool,
    /// Convolution, bias and activation fused by cuDNN.
    pub fused: bool,
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let layout = if self.nhwc { "NHWC" } else { "NCHW" };
        let fused = if self.fused { ", fused" } else { "" };
        write!(f, "{layout}{fused}")
    }
}

/// The ways to run `model` that `tuning` leaves open, the likeliest fastest first. A model
/// without 2-D convolutions has one: NCHW, unfused (neither setting touches it). Auto layout
/// tries NHWC and NCHW; auto fusion tries fused only in NHWC when the layout is auto (cuDNN
/// could not fuse FP16 convolutions in NCHW on the H200), and with the named layout otherwise.
pub(crate) fn candidates(model: &OnnxModel, tuning: &OrtCudaTuning) -> Vec<Candidate> {
    if count_2d_convolutions(model) == 0 {
        return vec![Candidate {
            nhwc: tuning.layout == LayoutPolicy::Nhwc,
            fused: tuning.fusion == FusionPolicy::On,
        }];
    }
    let layouts: &[bool] = match tuning.layout {
        LayoutPolicy::Auto => &[true, false],
        LayoutPolicy::Nchw => &[false],
        LayoutPolicy::Nhwc => &[true],
    };
    let mut out = vec![];
    for &nhwc in layouts {
        let fusions: &[bool] = match tuning.fusion {
            FusionPolicy::On => &[true],
            FusionPolicy::Off => &[false],
            FusionPolicy::Auto if nhwc || tuning.layout == LayoutPolicy::Nchw => &[true, false],
            FusionPolicy::Auto => &[false],
        };
        out.extend(fusions.iter().map(|&fused| Candidate { nhwc, fused }));
    }
    out
}

/// The candidate trtkit picks without measuring (a batch that is not fixed): the first of
/// [`candidates`], except that an FP32 model is not fused under auto fusion (fusion ran
/// ResNet-50 1.5× faster in FP32 but MobileNetV3-Large 2× slower; in FP16 both gained 1.5×).
pub(crate) fn rule_choice(model: &OnnxModel, tuning: &OrtCudaTuning) -> Candidate {
    let open = candidates(model, tuning);
    let float16 = crate::onnx::rewrite::fp16_emulate::has_float16_compute(model);
    open.iter()
        .copied()
        .find(|c| float16 || !c.fused || tuning.fusion == FusionPolicy::On)
        .unwrap_or(open[0])
}

/// The Conv nodes of `model`'s main graph that convolve over two spatial axes: a 4-D weight
/// initializer, or a weight made by another node (its rank unknown here, counted as 2-D, the
/// common case of a quantized CNN).
pub(crate) fn count_2d_convolutions(model: &OnnxModel) -> usize {
    let graph = model.graph();
    let weight_rank: HashMap<&str, usize> = graph
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), t.dims.len()))
        .collect();
    graph
        .node
        .iter()
        .filter(|n| n.op_type == "Conv" && n.domain.is_empty())
        .filter(|n| {
            n.input
                .get(1)
                .is_some_and(|w| weight_rank.get(w.as_str()).is_none_or(|&r| r == 4))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::rewrite::fp16::Fp16;
    use crate::onnx::rewrite::pass::Pass;
    use crate::onnx::test_models;

    fn model(proto: crate::onnx::pb::ModelProto) -> OnnxModel {
        OnnxModel::from_proto(proto, "m.onnx")
    }

    fn tuning(layout: LayoutPolicy, fusion: FusionPolicy) -> OrtCudaTuning {
        OrtCudaTuning {
            layout,
            fusion,
            ..Default::default()
        }
    }

    const fn c(nhwc: bool, fused: bool) -> Candidate {
        Candidate { nhwc, fused }
    }

    #[test]
    fn auto_tries_nhwc_fused_and_unfused_then_nchw_for_a_cnn() {
        let cnn = model(test_models::classifier(None));
        assert!(count_2d_convolutions(&cnn) > 0);
        let auto = OrtCudaTuning::default();
        assert_eq!(
            candidates(&cnn, &auto),
            [c(true, true), c(true, false), c(false, false)]
        );
        let nchw = tuning(LayoutPolicy::Nchw, FusionPolicy::Auto);
        assert_eq!(candidates(&cnn, &nchw), [c(false, true), c(false, false)]);
        let off = tuning(LayoutPolicy::Auto, FusionPolicy::Off);
        assert_eq!(candidates(&cnn, &off), [c(true, false), c(false, false)]);
        let fixed = tuning(LayoutPolicy::Nhwc, FusionPolicy::On);
        assert_eq!(candidates(&cnn, &fixed), [c(true, true)]);
    }

    #[test]
    fn a_model_without_convolutions_has_nothing_to_tune() {
        let tokens = model(test_models::token_classifier());
        assert_eq!(count_2d_convolutions(&tokens), 0);
        let auto = OrtCudaTuning::default();
        assert_eq!(candidates(&tokens, &auto), [c(false, false)]);
        let named = tuning(LayoutPolicy::Nhwc, FusionPolicy::On);
        assert_eq!(candidates(&tokens, &named), [c(true, true)]);
    }

    #[test]
    fn the_rule_fuses_float16_models_only() {
        let fp32 = model(test_models::classifier(None));
        let fp16 = Fp16::default().run(fp32.clone()).unwrap().0;
        let auto = OrtCudaTuning::default();
        assert_eq!(rule_choice(&fp16, &auto), c(true, true));
        assert_eq!(rule_choice(&fp32, &auto), c(true, false));
        let on = tuning(LayoutPolicy::Auto, FusionPolicy::On);
        assert_eq!(rule_choice(&fp32, &on), c(true, true));
        let nchw = tuning(LayoutPolicy::Nchw, FusionPolicy::Off);
        assert_eq!(rule_choice(&fp16, &nchw), c(false, false));
    }

    #[test]
    fn one_dimensional_convolutions_do_not_count() {
        let mut m = model(test_models::classifier(None));
        let conv_weights: Vec<String> = m
            .graph()
            .node
            .iter()
            .filter(|n| n.op_type == "Conv")
            .map(|n| n.input[1].clone())
            .collect();
        for t in m.graph_mut().initializer.iter_mut() {
            if conv_weights.contains(&t.name) {
                t.dims.truncate(3);
            }
        }
        assert_eq!(count_2d_convolutions(&m), 0);
        assert_eq!(candidates(&m, &OrtCudaTuning::default()), [c(false, false)]);
    }

    #[test]
    fn candidates_name_themselves() {
        assert_eq!(c(true, true).to_string(), "NHWC, fused");
        assert_eq!(c(false, false).to_string(), "NCHW");
    }
}
