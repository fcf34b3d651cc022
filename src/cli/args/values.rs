//! The command-line names of library enums. The library stays free of clap: each enum a flag
//! takes gets its `ValueEnum` here, with the value names and help users see.

use crate::backend::ort_cuda_tuning::{ConvAlgoSearch, CudnnWorkspace, FusionPolicy, LayoutPolicy};
use crate::backend::select::{BackendKind, Fp16Compute, TransformerFusionPolicy};
use crate::backend::Device;
use crate::data::preprocess::{ChannelOrder, Layout};
use crate::data::resize::Interpolation;
use crate::onnx::rewrite::qdq::WeightClip;
use crate::quantize::evaluate::WeightRounding;
use crate::quantize::plan::Fallback;
use crate::quantize::scale_search::ScaleSearch;
use crate::quantize::target_search::Strategy;
use clap::builder::PossibleValue;

/// Implements `clap::ValueEnum` for a library enum: each variant with its name and help.
macro_rules! flag_values {
    ($ty:ty { $($variant:path => $name:literal, $help:literal;)+ }) => {
        impl clap::ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($variant),+]
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(match self {
                    $($variant => PossibleValue::new($name).help($help),)+
                })
            }
        }
    };
}

flag_values!(BackendKind {
    BackendKind::Tract => "tract", "tract, embedded (CPU, or CUDA with --device cuda)";
    BackendKind::Ort => "ort", "ONNX Runtime, loaded at run time (CPU, or its CUDA provider with --device cuda)";
});

flag_values!(Fp16Compute {
    Fp16Compute::Emulate => "emulate", "Computed in float32, every float16 tensor rounded to float16 as FP16 hardware holds it";
    Fp16Compute::Backend => "backend", "As the backend does it: ONNX Runtime's CPU build and tract widen float16 to float32";
});

flag_values!(TransformerFusionPolicy {
    TransformerFusionPolicy::On => "on", "Attention blocks and residual LayerNorms of exported encoders run as ONNX Runtime's fused operators";
    TransformerFusionPolicy::Off => "off", "The graph as the file has it";
});

flag_values!(LayoutPolicy {
    LayoutPolicy::Auto => "auto", "The faster, measured once per model, batch and GPU (NCHW for a model without 2-D convolutions)";
    LayoutPolicy::Nchw => "nchw", "Channels first, as the ONNX model is written";
    LayoutPolicy::Nhwc => "nhwc", "Channels last (prefer_nhwc)";
});

flag_values!(ConvAlgoSearch {
    ConvAlgoSearch::Exhaustive => "exhaustive", "Time every algorithm on the first inference, keep the fastest";
    ConvAlgoSearch::Heuristic => "heuristic", "cuDNN's heuristics: no timing";
    ConvAlgoSearch::Default => "default", "cuDNN's default algorithm";
});

flag_values!(FusionPolicy {
    FusionPolicy::Auto => "auto", "Fused or not, whichever ran faster, measured once with the layout";
    FusionPolicy::On => "on", "Fused";
    FusionPolicy::Off => "off", "Not fused";
});

flag_values!(CudnnWorkspace {
    CudnnWorkspace::Max => "max", "As much as the fastest algorithm asks for";
    CudnnWorkspace::Limited => "limited", "At most 32 MiB";
});

flag_values!(Device {
    Device::Cpu => "cpu", "The host CPU";
    Device::Cuda => "cuda", "An NVIDIA GPU through CUDA";
});

flag_values!(Interpolation {
    Interpolation::Bilinear => "bilinear", "Triangle kernel, support 1 (PIL BILINEAR, torchvision's default)";
    Interpolation::Bicubic => "bicubic", "Cubic kernel with a = -0.5, support 2 (PIL BICUBIC)";
});

flag_values!(Layout {
    Layout::Nchw => "nchw", "Channels first: C×H×W (PyTorch models)";
    Layout::Nhwc => "nhwc", "Channels last: H×W×C (TensorFlow models)";
});

flag_values!(ChannelOrder {
    ChannelOrder::Rgb => "rgb", "Red, green, blue";
    ChannelOrder::Bgr => "bgr", "Blue, green, red (Caffe-style models)";
});

flag_values!(Fallback {
    Fallback::Fp32 => "fp32", "float32: the Q/DQ graph as it is";
    Fallback::Fp16 => "fp16", "float16 outside INT8; the INT8 nodes and their Q/DQ stay float32";
});

flag_values!(WeightClip {
    WeightClip::Max => "max", "Each weight channel's largest magnitude";
    WeightClip::Mse => "mse", "The fraction of it with the least squared rounding error";
});

flag_values!(WeightRounding {
    WeightRounding::Nearest => "nearest", "To the nearest step";
    WeightRounding::Adaptive => "adaptive", "Up or down, for the least output error of the weight's layer";
});

flag_values!(ScaleSearch {
    ScaleSearch::Off => "off", "The calibration cache's activation scales";
    ScaleSearch::Layer => "layer", "Each scale searched for the least error of the layers reading it";
});

flag_values!(Strategy {
    Strategy::Bisect => "bisect", "The shortest prefix of the nodes ranked by what each recovers alone";
    Strategy::Greedy => "greedy", "One node at a time, re-measured with the float part so far";
});

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    #[test]
    fn names_parse_back_to_their_variants() {
        for v in super::BackendKind::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(super::BackendKind::from_str(&name, false).unwrap(), *v);
        }
        assert_eq!(
            super::Layout::from_str("NHWC", true).unwrap(),
            super::Layout::Nhwc
        );
    }
}
