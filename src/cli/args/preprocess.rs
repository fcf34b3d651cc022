//! The preprocessing flags shared by every command that feeds images to a model (`validate`,
//! `calibrate`, `build --int8`): defined once here, handed to the library as one
//! [`PreprocessRequest`].

use crate::cli::usage;
use crate::data::preprocess::{ChannelOrder, Layout, PreprocessRequest};
use crate::data::resize::Interpolation;
use crate::number;
use clap::Args;

/// How images become model input; unset flags follow the model's input.
#[derive(Clone, Debug, Default, Args)]
pub struct PreprocessArgs {
    /// Resize the shorter side to this (default: crop / 0.875, i.e. 256 for a 224 crop);
    /// 0 = no resize.
    #[arg(long)]
    pub resize: Option<usize>,
    /// Center-crop size (default: the model's input height and width).
    #[arg(long)]
    pub crop: Option<usize>,
    /// Resampling kernel of the resize (antialiased, as PIL). Default: bilinear.
    #[arg(long, value_enum)]
    pub interpolation: Option<Interpolation>,
    /// Per-channel mean in RGB order, after scaling to [0,1], as `R,G,B` or `R G B`.
    /// Default: ImageNet's.
    #[arg(
        long,
        num_args = 1..=3,
        value_delimiter = ',',
        allow_negative_numbers = true,
        value_name = "R,G,B",
        value_parser = number::finite_f32
    )]
    pub mean: Option<Vec<f32>>,
    /// Per-channel std in RGB order, as `R,G,B` or `R G B`. Default: ImageNet's.
    #[arg(long, num_args = 1..=3, value_delimiter = ',', value_name = "R,G,B", value_parser = number::finite_f32)]
    pub std: Option<Vec<f32>>,
    /// Input layout (default: from the model's input shape).
    #[arg(long, value_enum)]
    pub layout: Option<Layout>,
    /// Channel order fed to the model. Default: rgb.
    #[arg(long, value_enum)]
    pub(crate) channel_order: Option<ChannelOrder>,
}

impl PreprocessArgs {
    /// The request these flags make; `--mean` and `--std` must have three values each.
    pub fn request(&self) -> anyhow::Result<PreprocessRequest> {
        let three = |flag: &str, v: &Option<Vec<f32>>| match v.as_deref() {
            None => Ok(None),
            Some(&[r, g, b]) => Ok(Some([r, g, b])),
            Some(other) => Err(usage(format!(
                "{flag} needs three values, R,G,B (e.g. {flag} 0.5,0.5,0.5); got {}",
                other.len()
            ))),
        };
        Ok(PreprocessRequest {
            resize: self.resize,
            crop: self.crop,
            interpolation: self.interpolation,
            mean: three("--mean", &self.mean)?,
            std: three("--std", &self.std)?,
            layout: self.layout,
            channel_order: self.channel_order,
        })
    }
}
