//! The ONNX Runtime CUDA provider group (`--layout-policy`, `--cudnn-search`,
//! `--cudnn-workspace`, `--cudnn-fuse`) of every command that opens a model on a backend.

use crate::backend::ort_cuda_tuning::{
    ConvAlgoSearch, CudnnWorkspace, FusionPolicy, LayoutPolicy, OrtCudaTuning,
};
use clap::Args;

/// How ONNX Runtime's CUDA provider runs a model: the layout of its convolutions and cuDNN's
/// settings. The defaults are the fastest measured on H100/H200 GPUs; each flag forces one.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "ONNX Runtime on CUDA")]
pub struct OrtCudaArgs {
    /// Layout of the convolutions inside ONNX Runtime's CUDA provider: auto (the faster of NHWC
    /// and NCHW, measured once per model, batch and GPU and kept in trtkit's cache folder), nchw
    /// or nhwc. Inputs and outputs keep theirs.
    #[arg(long, value_enum, value_name = "POLICY", default_value = "auto")]
    pub(crate) layout_policy: LayoutPolicy,
    /// The same as --layout-policy nhwc.
    #[arg(long, hide = true, conflicts_with = "layout_policy")]
    pub(crate) nhwc: bool,
    /// How cuDNN picks each convolution's algorithm.
    #[arg(long, value_enum, value_name = "HOW", default_value = "exhaustive")]
    pub(crate) cudnn_search: ConvAlgoSearch,
    /// cuDNN's convolution workspace: max (what the fastest algorithm asks for) or limited
    /// (32 MiB).
    #[arg(long, value_enum, value_name = "SIZE", default_value = "max")]
    pub(crate) cudnn_workspace: CudnnWorkspace,
    /// Fuse convolution, bias, residual add and activation into one cuDNN graph (ONNX Runtime's
    /// fuse_conv_bias): auto (measured once with the layout), on or off.
    #[arg(long, value_enum, value_name = "POLICY", default_value = "auto")]
    pub(crate) cudnn_fuse: FusionPolicy,
}

impl Default for OrtCudaArgs {
    fn default() -> Self {
        let t = OrtCudaTuning::default();
        OrtCudaArgs {
            layout_policy: t.layout,
            nhwc: false,
            cudnn_search: t.conv_search,
            cudnn_workspace: t.workspace,
            cudnn_fuse: t.fusion,
        }
    }
}

impl OrtCudaArgs {
    /// The tuning these flags ask for.
    pub fn tuning(&self) -> OrtCudaTuning {
        OrtCudaTuning {
            layout: if self.nhwc {
                LayoutPolicy::Nhwc
            } else {
                self.layout_policy
            },
            conv_search: self.cudnn_search,
            workspace: self.cudnn_workspace,
            fusion: self.cudnn_fuse,
            planned_batches: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ort_cuda: OrtCudaArgs,
    }

    fn parse(args: &[&str]) -> Result<OrtCudaTuning, String> {
        Cli::try_parse_from(std::iter::once("trtkit").chain(args.iter().copied()))
            .map(|c| c.ort_cuda.tuning())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_are_the_library_defaults() {
        assert_eq!(parse(&[]).unwrap(), OrtCudaTuning::default());
        let args = OrtCudaArgs::default();
        assert_eq!(args.tuning(), OrtCudaTuning::default());
    }

    #[test]
    fn each_flag_reaches_the_tuning() {
        let t = parse(&[
            "--layout-policy",
            "nchw",
            "--cudnn-search",
            "heuristic",
            "--cudnn-workspace",
            "limited",
            "--cudnn-fuse",
            "on",
        ])
        .unwrap();
        assert_eq!(
            t,
            OrtCudaTuning {
                layout: LayoutPolicy::Nchw,
                conv_search: ConvAlgoSearch::Heuristic,
                workspace: CudnnWorkspace::Limited,
                fusion: FusionPolicy::On,
                planned_batches: None,
            }
        );
        assert_eq!(parse(&["--nhwc"]).unwrap().layout, LayoutPolicy::Nhwc);
    }

    #[test]
    fn a_bad_value_is_one_line_naming_the_flag() {
        for (flag, value) in [
            ("--layout-policy", "nhcw"),
            ("--cudnn-search", "fast"),
            ("--cudnn-workspace", "64"),
            ("--cudnn-fuse", "yes"),
            ("--cudnn-fuse", "true"),
        ] {
            let e = parse(&[flag, value]).unwrap_err();
            let first = e.lines().next().unwrap();
            assert!(first.contains(value) && first.contains(flag), "{first}");
        }
        let e = parse(&["--nhwc", "--layout-policy", "nchw"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }
}
