//! Preprocessing presets: resize the shorter side, center crop, scale to [0,1], normalize,
//! lay out as NCHW or NHWC in RGB or BGR order. `imagenet` is torchvision's
//! `Resize(256) + CenterCrop(224) + ToTensor() + Normalize(mean, std)`.

use super::decode::{decode_rows, RgbImage, RowSink};
use super::resize::{resize_crop, Interpolation, Resampler, Window};
use crate::error::{fix_with, Setting};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Memory layout of one preprocessed image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Channels first: C×H×W (PyTorch models).
    Nchw,
    /// Channels last: H×W×C (TensorFlow models).
    Nhwc,
}

/// Channel order of one preprocessed image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelOrder {
    /// Red, green, blue.
    Rgb,
    /// Blue, green, red (Caffe-style models).
    Bgr,
}

/// Everything that turns a decoded image into model input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Preprocess {
    /// Resize the shorter side to this many pixels (aspect kept); `None` = no resize.
    pub resize: Option<usize>,
    /// Center crop to this height and width.
    pub crop: (usize, usize),
    /// Resampling kernel.
    pub interpolation: Interpolation,
    /// Per-channel mean subtracted after scaling to [0,1], in RGB order.
    pub mean: [f32; 3],
    /// Per-channel std divided by after the mean, in RGB order.
    pub std: [f32; 3],
    /// NCHW or NHWC.
    pub layout: Layout,
    /// RGB or BGR.
    pub(crate) channel_order: ChannelOrder,
}

/// ImageNet mean (RGB) used by torchvision models.
pub(crate) const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet std (RGB) used by torchvision models.
pub(crate) const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// What the user asked for: each field left `None` takes the default for the model's input
/// (resize to crop/0.875, crop to the input's height and width, ImageNet mean/std, the input's
/// layout). One value shared by every command that preprocesses images (`validate`,
/// `calibrate`, `build --int8`), resolved against each model by [`PreprocessRequest::resolve`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreprocessRequest {
    /// Shorter side after resizing; `Some(0)` = no resize.
    pub resize: Option<usize>,
    /// Square center crop; must match the model's input.
    pub crop: Option<usize>,
    /// Resampling kernel (default bilinear).
    pub interpolation: Option<Interpolation>,
    /// Per-channel mean, RGB order, after scaling to [0,1].
    pub mean: Option<[f32; 3]>,
    /// Per-channel std, RGB order.
    pub std: Option<[f32; 3]>,
    /// Layout; must match the model's input.
    pub layout: Option<Layout>,
    /// Channel order (default RGB).
    pub(crate) channel_order: Option<ChannelOrder>,
}

impl PreprocessRequest {
    /// `self` laid over `base`, field by field: what `self` sets wins (flags over a
    /// workspace's or a bench plan's settings).
    pub(crate) fn with_defaults_from(&self, base: &PreprocessRequest) -> PreprocessRequest {
        PreprocessRequest {
            resize: self.resize.or(base.resize),
            crop: self.crop.or(base.crop),
            interpolation: self.interpolation.or(base.interpolation),
            mean: self.mean.or(base.mean),
            std: self.std.or(base.std),
            layout: self.layout.or(base.layout),
            channel_order: self.channel_order.or(base.channel_order),
        }
    }

    /// The preprocessing for a model input `input` of `layout` and `height × width`.
    pub(crate) fn resolve(
        &self,
        input: &str,
        layout: Layout,
        height: usize,
        width: usize,
    ) -> Result<Preprocess> {
        let crop = match self.crop {
            Some(c) if (c, c) != (height, width) => {
                return Err(fix_with(Setting::Crop, format!("a {c}×{c} crop does not match the model's input '{input}', which is {height}×{width}")));
            }
            _ => (height, width),
        };
        let resize = match self.resize {
            Some(0) => None,
            Some(r) => Some(r),
            None => Some((crop.0.min(crop.1) as f64 / 0.875).floor() as usize),
        };
        if let Some(l) = self.layout.filter(|l| *l != layout) {
            return Err(fix_with(
                Setting::Layout,
                format!(
                    "layout {l:?} does not match the model's input '{input}', which is {layout:?}"
                ),
            ));
        }
        let pre = Preprocess {
            resize,
            crop,
            interpolation: self.interpolation.unwrap_or(Interpolation::Bilinear),
            mean: self.mean.unwrap_or(IMAGENET_MEAN),
            std: self.std.unwrap_or(IMAGENET_STD),
            layout,
            channel_order: self.channel_order.unwrap_or(ChannelOrder::Rgb),
        };
        pre.check()?;
        Ok(pre)
    }

    /// Resolves against one sample's shape, `[3,H,W]` (NCHW) or `[H,W,3]` (NHWC).
    pub(crate) fn resolve_for_sample(
        &self,
        input: &str,
        sample_shape: &[usize],
    ) -> Result<Preprocess> {
        let (layout, h, w) = match sample_shape {
            [3, h, w] => (Layout::Nchw, *h, *w),
            [h, w, 3] => (Layout::Nhwc, *h, *w),
            other => bail!(
                "input '{input}' is {other:?} per sample; an image input must be [3,H,W] or [H,W,3]"
            ),
        };
        self.resolve(input, layout, h, w)
    }
}

/// The settings of a preprocessing by name, as `(name, value)`: the names of
/// [`PreprocessRequest`]'s fields (and of the settings that set them), the values as people
/// write them. What a calibration key compares field by field.
pub(crate) fn preprocess_fields(p: &Preprocess) -> Vec<(&'static str, String)> {
    let three = |v: [f32; 3]| format!("{},{},{}", v[0], v[1], v[2]);
    vec![
        ("resize", p.resize.map_or("none".into(), |r| r.to_string())),
        ("crop", format!("{}x{}", p.crop.0, p.crop.1)),
        (
            "interpolation",
            format!("{:?}", p.interpolation).to_lowercase(),
        ),
        ("mean", three(p.mean)),
        ("std", three(p.std)),
        ("layout", format!("{:?}", p.layout).to_lowercase()),
        (
            "channel_order",
            format!("{:?}", p.channel_order).to_lowercase(),
        ),
    ]
}

impl Preprocess {
    /// The `imagenet` preset: resize 256, crop 224, bilinear, ImageNet mean/std, NCHW RGB.
    pub fn imagenet() -> Self {
        Preprocess {
            resize: Some(256),
            crop: (224, 224),
            interpolation: Interpolation::Bilinear,
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
            layout: Layout::Nchw,
            channel_order: ChannelOrder::Rgb,
        }
    }

    /// `ToTensor()` only: the same geometry, values in [0,1] (mean 0, std 1).
    pub fn unnormalized(mut self) -> Self {
        self.mean = [0.0; 3];
        self.std = [1.0; 3];
        self
    }

    /// Checks the settings themselves (not any image): sizes positive, mean finite, std finite and non-zero, crop
    /// not larger than the resize.
    pub fn check(&self) -> Result<()> {
        let (ch, cw) = self.crop;
        if ch == 0 || cw == 0 {
            bail!("crop size {ch}×{cw} is empty");
        }
        if let Some(r) = self.resize {
            if r == 0 {
                bail!("resize size is 0");
            }
            if r < ch.min(cw) {
                bail!("resize {r} is smaller than the crop {ch}×{cw}: the crop would fall outside the image");
            }
        }
        if self.std.iter().any(|s| *s == 0.0 || !s.is_finite()) {
            bail!("std {:?} has a zero or non-finite value", self.std);
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            bail!("mean {:?} has a non-finite value", self.mean);
        }
        Ok(())
    }

    /// Elements of one preprocessed image (3 × crop height × crop width).
    pub fn elements(&self) -> usize {
        3 * self.crop.0 * self.crop.1
    }

    /// The resize-then-crop geometry for an image of `w × h`, as torchvision computes it:
    /// the shorter side becomes `resize`, the longer `int(resize * long / short)`; the crop is
    /// centred with Python's `round` (half to even). An image smaller than the crop is an error.
    pub fn window(&self, w: usize, h: usize) -> Result<Window> {
        let (ch, cw) = self.crop;
        let (rw, rh) = match self.resize {
            Some(s) if w <= h => (s, (s as f64 * h as f64 / w as f64) as usize),
            Some(s) => ((s as f64 * w as f64 / h as f64) as usize, s),
            None => (w, h),
        };
        if rw < cw || rh < ch {
            bail!("image is {w}×{h}, smaller than the {cw}×{ch} crop");
        }
        let centre =
            |outer: usize, inner: usize| ((outer - inner) as f64 / 2.0).round_ties_even() as usize;
        Ok(Window {
            resized_w: rw,
            resized_h: rh,
            left: centre(rw, cw),
            top: centre(rh, ch),
            width: cw,
            height: ch,
        })
    }

    /// Resize and crop only: the 8-bit RGB crop, `crop.0 × crop.1 × 3` bytes.
    pub fn crop_rgb(&self, img: &RgbImage) -> Result<Vec<u8>> {
        let win = self.window(img.width, img.height)?;
        Ok(resize_crop(img, &win, self.interpolation))
    }

    /// Preprocesses `img` into `out` (exactly [`Preprocess::elements`] floats).
    pub fn apply(&self, img: &RgbImage, out: &mut [f32]) -> Result<()> {
        let crop = self.crop_rgb(img)?;
        self.normalize(&crop, out);
        Ok(())
    }

    /// Decodes a JPEG or PNG held in memory and preprocesses it into `out` (exactly
    /// [`Preprocess::elements`] floats). Same result as [`decode_rgb`](super::decode::decode_rgb)
    /// then [`Preprocess::apply`], but the rows are resized as they are decoded and a JPEG is
    /// decoded only down to the last row the crop needs.
    pub fn apply_encoded(&self, bytes: &[u8], out: &mut [f32]) -> Result<()> {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.take();
            let result = self.apply_encoded_in(bytes, out, &mut scratch);
            SCRATCH.set(scratch);
            result
        })
    }

    /// [`Preprocess::apply_encoded`] with this thread's reusable buffers.
    fn apply_encoded_in(&self, bytes: &[u8], out: &mut [f32], scratch: &mut Scratch) -> Result<()> {
        let mut sink = ResampleSink {
            pre: self,
            resampler: None,
            buffer: std::mem::take(&mut scratch.rows),
        };
        let decoded = decode_rows(bytes, &mut sink);
        let Some(resampler) = sink.resampler else {
            decoded?;
            bail!("decoder gave no image");
        };
        decoded?;
        let crop = &mut scratch.crop;
        if crop.len() != self.elements() {
            crop.resize(self.elements(), 0);
        }
        resampler.finish(crop);
        scratch.rows = resampler.into_buffer();
        self.normalize(crop, out);
        Ok(())
    }

    /// Scales, normalizes and lays out an 8-bit RGB crop into `out`.
    fn normalize(&self, crop: &[u8], out: &mut [f32]) {
        assert_eq!(
            out.len(),
            self.elements(),
            "output slice has the wrong size"
        );
        // One table per channel: byte → normalized float, computed as torchvision does
        // (divide by 255, subtract the mean, divide by the std, in f32).
        let mut lut = [[0f32; 256]; 3];
        for (c, table) in lut.iter_mut().enumerate() {
            for (v, t) in table.iter_mut().enumerate() {
                *t = (v as f32 / 255.0 - self.mean[c]) / self.std[c];
            }
        }
        let order = match self.channel_order {
            ChannelOrder::Rgb => [0, 1, 2],
            ChannelOrder::Bgr => [2, 1, 0],
        };
        let plane = self.crop.0 * self.crop.1;
        match self.layout {
            Layout::Nchw => {
                let (c0, rest) = out.split_at_mut(plane);
                let (c1, c2) = rest.split_at_mut(plane);
                let (l0, l1, l2) = (&lut[order[0]], &lut[order[1]], &lut[order[2]]);
                for (((px, o0), o1), o2) in crop
                    .chunks_exact(3)
                    .zip(c0.iter_mut())
                    .zip(c1.iter_mut())
                    .zip(c2.iter_mut())
                {
                    *o0 = l0[px[order[0]] as usize];
                    *o1 = l1[px[order[1]] as usize];
                    *o2 = l2[px[order[2]] as usize];
                }
            }
            Layout::Nhwc => {
                for (o, px) in out.chunks_exact_mut(3).zip(crop.chunks_exact(3)) {
                    for (dst_c, &src_c) in order.iter().enumerate() {
                        o[dst_c] = lut[src_c][px[src_c] as usize];
                    }
                }
            }
        }
    }
}

/// Buffers one thread reuses from image to image: a decode-and-resize allocates (and the
/// allocator clears) about 400 KB otherwise, which costs page faults and memory bandwidth that
/// all cores share.
#[derive(Default)]
struct Scratch {
    /// The resampler's intermediate rows.
    rows: Vec<u8>,
    /// The 8-bit crop before normalization.
    crop: Vec<u8>,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
}

/// Feeds decoded rows straight into the resampler of the image's crop window.
struct ResampleSink<'a> {
    pre: &'a Preprocess,
    resampler: Option<Resampler>,
    /// Memory for the resampler's intermediate rows.
    buffer: Vec<u8>,
}

impl RowSink for ResampleSink<'_> {
    fn begin(&mut self, width: usize, height: usize) -> Result<usize> {
        let win = self.pre.window(width, height)?;
        let buffer = std::mem::take(&mut self.buffer);
        let rs = Resampler::with_buffer(width, height, &win, self.pre.interpolation, buffer);
        let rows = rs.rows_needed();
        self.resampler = Some(rs);
        Ok(rows)
    }

    fn row(&mut self, y: usize, rgb: &[u8]) {
        if let Some(rs) = &mut self.resampler {
            rs.push_row(y, rgb);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_follows_torchvision() {
        let p = Preprocess::imagenet();
        // 500×375 → 341×256; (341-224)/2 = 58.5 rounds half to even → 58.
        let w = p.window(500, 375).unwrap();
        assert_eq!(
            (w.resized_w, w.resized_h, w.left, w.top),
            (341, 256, 58, 16)
        );
        let w = p.window(375, 500).unwrap();
        assert_eq!(
            (w.resized_w, w.resized_h, w.left, w.top),
            (256, 341, 16, 58)
        );
        let mut raw = p.clone();
        raw.resize = None;
        let err = raw.window(100, 300).unwrap_err().to_string();
        assert!(err.contains("smaller than the 224×224 crop"), "{err}");
    }

    #[test]
    fn check_rejects_bad_settings() {
        let mut p = Preprocess::imagenet();
        p.resize = Some(100);
        assert!(p
            .check()
            .unwrap_err()
            .to_string()
            .contains("smaller than the crop"));
        let mut p = Preprocess::imagenet();
        p.std[1] = 0.0;
        assert!(p.check().is_err());
        assert!(Preprocess::imagenet().check().is_ok());
    }

    #[test]
    fn layouts_and_channel_orders() {
        let img = RgbImage {
            width: 2,
            height: 2,
            pixels: [[255u8, 0, 51]; 4].concat(),
        };
        let mut p = Preprocess {
            resize: None,
            crop: (2, 2),
            ..Preprocess::imagenet().unnormalized()
        };
        let mut out = vec![0.0; 12];
        p.apply(&img, &mut out).unwrap();
        assert_eq!(out, [[1.0f32; 4], [0.0; 4], [0.2; 4]].concat());
        p.layout = Layout::Nhwc;
        p.channel_order = ChannelOrder::Bgr;
        p.apply(&img, &mut out).unwrap();
        assert_eq!(out, [[0.2f32, 0.0, 1.0]; 4].concat());
        let mut q = Preprocess::imagenet();
        q.resize = None;
        q.crop = (2, 2);
        q.apply(&img, &mut out).unwrap();
        assert!((out[0] - (1.0 - 0.485) / 0.229).abs() < 1e-6);
    }
}
