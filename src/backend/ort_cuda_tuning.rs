//! How ONNX Runtime's CUDA provider is tuned for a model: the layout its convolutions run in
//! (`--layout-policy`) and the cuDNN settings (`--cudnn-search`, `--cudnn-workspace`,
//! `--cudnn-fuse`), with the defaults trtkit picks when the user names none.

use crate::onnx::OnnxModel;
use std::collections::HashMap;

pub use crate::cuda::ort_stream::ConvAlgoSearch;

/// Which memory layout ONNX Runtime's CUDA provider runs convolutions in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayoutPolicy {
    /// NHWC for a model with 2-D convolutions, NCHW otherwise ([`choose_layout`]).
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

/// The CUDA provider's settings as the user asked for them (the layout still a policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrtCudaTuning {
    /// The layout policy.
    pub layout: LayoutPolicy,
    /// How cuDNN picks each convolution's algorithm.
    pub conv_search: ConvAlgoSearch,
    /// cuDNN's workspace limit.
    pub workspace: CudnnWorkspace,
    /// Let the provider fuse convolution, bias and activation through cuDNN (`fuse_conv_bias`).
    pub fuse_conv_bias: bool,
}

impl Default for OrtCudaTuning {
    fn default() -> Self {
        OrtCudaTuning {
            layout: LayoutPolicy::Auto,
            conv_search: ConvAlgoSearch::Exhaustive,
            workspace: CudnnWorkspace::Max,
            fuse_conv_bias: false,
        }
    }
}

/// The layout a model's convolutions run in, and why, in the words of the run's notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutChoice {
    /// Convolutions in NHWC.
    pub nhwc: bool,
    /// Why: `"--layout-policy nhwc"`, or auto's reason (`"auto: 53 2-D convolutions"`).
    pub reason: String,
}

/// Applies `policy` to `model`. Auto runs NHWC when the model has at least one 2-D convolution
/// (a 4-D weight, or a Conv whose weight is computed, as in a Q/DQ graph): on the H100/H200,
/// ResNet-50 and MobileNetV3-Large ran faster in NHWC in FP32 and FP16 at every batch measured,
/// and a model without convolutions runs the same either way.
pub fn choose_layout(model: &OnnxModel, policy: LayoutPolicy) -> LayoutChoice {
    match policy {
        LayoutPolicy::Nchw => LayoutChoice {
            nhwc: false,
            reason: "--layout-policy nchw".into(),
        },
        LayoutPolicy::Nhwc => LayoutChoice {
            nhwc: true,
            reason: "--layout-policy nhwc".into(),
        },
        LayoutPolicy::Auto => {
            let convs = count_2d_convolutions(model);
            LayoutChoice {
                nhwc: convs > 0,
                reason: match convs {
                    0 => "auto: no 2-D convolution".into(),
                    1 => "auto: 1 2-D convolution".into(),
                    n => format!("auto: {n} 2-D convolutions"),
                },
            }
        }
    }
}

/// The Conv nodes of `model`'s main graph that convolve over two spatial axes: a 4-D weight
/// initializer, or a weight made by another node (its rank unknown here, counted as 2-D, the
/// common case of a quantized CNN).
fn count_2d_convolutions(model: &OnnxModel) -> usize {
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
    use crate::onnx::test_models;

    fn model(proto: crate::onnx::pb::ModelProto) -> OnnxModel {
        OnnxModel::from_proto(proto, "m.onnx")
    }

    #[test]
    fn auto_picks_nhwc_for_a_cnn_and_nchw_without_convolutions() {
        let cnn = model(test_models::classifier(None));
        let convs = count_2d_convolutions(&cnn);
        assert!(convs > 0, "the classifier fixture has convolutions");
        let auto = choose_layout(&cnn, LayoutPolicy::Auto);
        assert!(auto.nhwc);
        assert!(auto.reason.starts_with("auto: "), "{}", auto.reason);
        assert!(auto.reason.contains("2-D convolution"), "{}", auto.reason);

        let mlp = model(test_models::token_classifier());
        assert_eq!(count_2d_convolutions(&mlp), 0);
        let auto = choose_layout(&mlp, LayoutPolicy::Auto);
        assert_eq!(
            auto,
            LayoutChoice {
                nhwc: false,
                reason: "auto: no 2-D convolution".into()
            }
        );
    }

    #[test]
    fn a_named_policy_wins_over_the_model() {
        let cnn = model(test_models::classifier(None));
        let mlp = model(test_models::token_classifier());
        assert!(!choose_layout(&cnn, LayoutPolicy::Nchw).nhwc);
        assert!(choose_layout(&mlp, LayoutPolicy::Nhwc).nhwc);
        assert_eq!(
            choose_layout(&mlp, LayoutPolicy::Nhwc).reason,
            "--layout-policy nhwc"
        );
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
        assert!(!choose_layout(&m, LayoutPolicy::Auto).nhwc);
    }
}
