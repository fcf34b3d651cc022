//! Antialiased resampling as PIL does it (`Image.resize` with BILINEAR or BICUBIC), restricted
//! to a crop window of the output: only the pixels that survive the crop are computed.
//!
//! PIL's algorithm: a separable convolution whose kernel is stretched by the scale factor when
//! shrinking (that stretch is the antialiasing); weights are normalized per output pixel and
//! turned into 22-bit fixed point; the horizontal pass runs first and rounds to 8 bits, then
//! the vertical pass. Doing the same arithmetic gives the same bytes as PIL on the same pixels.

use super::decode::RgbImage;

/// Fixed-point precision of the weights (PIL: 32 - 8 - 2 bits).
const PRECISION_BITS: u32 = 22;

/// The resampling kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    /// Triangle kernel, support 1 (PIL BILINEAR, torchvision's default).
    Bilinear,
    /// Cubic kernel with a = -0.5, support 2 (PIL BICUBIC).
    Bicubic,
}

impl Interpolation {
    fn support(self) -> f64 {
        match self {
            Interpolation::Bilinear => 1.0,
            Interpolation::Bicubic => 2.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        let x = x.abs();
        match self {
            Interpolation::Bilinear => (1.0 - x).max(0.0),
            Interpolation::Bicubic => {
                let a = -0.5;
                if x < 1.0 {
                    ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * a
                } else {
                    0.0
                }
            }
        }
    }
}

/// Fixed-point weights of one axis: for each output index, the first input index and weights.
struct AxisWeights {
    starts: Vec<usize>,
    taps: usize,
    /// `starts.len() * taps` weights, zero-padded past each window.
    weights: Vec<i32>,
}

/// Weights for output indices `first..first+count` of an axis resized from `in_size` to
/// `out_size`.
fn axis_weights(
    kind: Interpolation,
    in_size: usize,
    out_size: usize,
    first: usize,
    count: usize,
) -> AxisWeights {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = kind.support() * filterscale;
    let taps = support.ceil() as usize * 2 + 1;
    let mut starts = Vec::with_capacity(count);
    let mut weights = vec![0i32; count * taps];
    let mut w = vec![0f64; taps];
    for (i, out) in (first..first + count).enumerate() {
        let center = (out as f64 + 0.5) * scale;
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = (((center + support + 0.5) as i64).min(in_size as i64) as usize).max(xmin);
        let n = (xmax - xmin).min(taps);
        let mut total = 0.0;
        for (x, wx) in w.iter_mut().enumerate().take(n) {
            *wx = kind.weight((x as f64 + xmin as f64 - center + 0.5) / filterscale);
            total += *wx;
        }
        for x in 0..n {
            let v = if total != 0.0 { w[x] / total } else { 0.0 };
            let fixed = v * (1i64 << PRECISION_BITS) as f64;
            weights[i * taps + x] = if fixed < 0.0 {
                (fixed - 0.5) as i32
            } else {
                (fixed + 0.5) as i32
            };
        }
        starts.push(xmin);
    }
    AxisWeights {
        starts,
        taps,
        weights,
    }
}

#[inline]
fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The geometry of resize-then-crop: the resized size and the crop window inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Width of the (virtual) resized image.
    pub resized_w: usize,
    /// Height of the (virtual) resized image.
    pub resized_h: usize,
    /// Left edge of the crop in the resized image.
    pub left: usize,
    /// Top edge of the crop in the resized image.
    pub top: usize,
    /// Crop width.
    pub width: usize,
    /// Crop height.
    pub height: usize,
}

/// Resizes `img` to `win.resized_w × win.resized_h` and returns only the crop window, RGB.
pub fn resize_crop(img: &RgbImage, win: &Window, kind: Interpolation) -> Vec<u8> {
    let (w, h) = (img.width, img.height);
    let hw = axis_weights(kind, w, win.resized_w, win.left, win.width);
    let vw = axis_weights(kind, h, win.resized_h, win.top, win.height);
    // Input rows the vertical pass reads.
    let row_lo = vw.starts.iter().copied().min().unwrap_or(0);
    let row_hi = vw
        .starts
        .iter()
        .map(|&s| (s + vw.taps).min(h))
        .max()
        .unwrap_or(0);
    // Horizontal pass over the needed rows, to 8 bits as PIL does.
    let mid_w = win.width;
    let mut mid = vec![0u8; (row_hi - row_lo) * mid_w * 3];
    let half = 1i32 << (PRECISION_BITS - 1);
    for (y, out_row) in (row_lo..row_hi).zip(mid.chunks_exact_mut(mid_w * 3)) {
        let in_row = &img.pixels[y * w * 3..(y + 1) * w * 3];
        for (x, out_px) in out_row.chunks_exact_mut(3).enumerate() {
            let start = hw.starts[x];
            let n = hw.taps.min(w - start);
            let k = &hw.weights[x * hw.taps..x * hw.taps + n];
            let src = &in_row[start * 3..(start + n) * 3];
            let (mut r, mut g, mut b) = (half, half, half);
            for (kk, px) in k.iter().zip(src.chunks_exact(3)) {
                r += px[0] as i32 * kk;
                g += px[1] as i32 * kk;
                b += px[2] as i32 * kk;
            }
            out_px[0] = clip8(r);
            out_px[1] = clip8(g);
            out_px[2] = clip8(b);
        }
    }
    // Vertical pass.
    let stride = mid_w * 3;
    let mut out = vec![0u8; win.width * win.height * 3];
    let mut acc = vec![0i32; stride];
    for (y, out_row) in out.chunks_exact_mut(stride).enumerate() {
        let start = vw.starts[y];
        let n = vw.taps.min(h - start);
        let k = &vw.weights[y * vw.taps..y * vw.taps + n];
        acc.fill(half);
        for (j, &kk) in k.iter().enumerate() {
            if kk == 0 {
                continue;
            }
            let r = start + j - row_lo;
            let src = &mid[r * stride..(r + 1) * stride];
            for (a, &s) in acc.iter_mut().zip(src) {
                *a += s as i32 * kk;
            }
        }
        for (o, &a) in out_row.iter_mut().zip(&acc) {
            *o = clip8(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(w: usize, h: usize, f: impl Fn(usize, usize, usize) -> u8) -> RgbImage {
        let mut pixels = Vec::with_capacity(w * h * 3);
        for y in 0..h {
            for x in 0..w {
                for c in 0..3 {
                    pixels.push(f(x, y, c));
                }
            }
        }
        RgbImage {
            width: w,
            height: h,
            pixels,
        }
    }

    fn full(w: usize, h: usize) -> Window {
        Window {
            resized_w: w,
            resized_h: h,
            left: 0,
            top: 0,
            width: w,
            height: h,
        }
    }

    #[test]
    fn identity_size_is_a_copy() {
        let img = image(7, 5, |x, y, c| (x * 31 + y * 7 + c * 50) as u8);
        for kind in [Interpolation::Bilinear, Interpolation::Bicubic] {
            assert_eq!(resize_crop(&img, &full(7, 5), kind), img.pixels);
        }
    }

    #[test]
    fn flat_image_stays_flat() {
        let img = image(37, 23, |_, _, c| [10, 128, 250][c]);
        let out = resize_crop(&img, &full(11, 64), Interpolation::Bicubic);
        assert!(out.chunks(3).all(|p| p == [10, 128, 250]));
    }

    #[test]
    fn halving_averages_pairs() {
        // Bilinear 4→2: the kernel is stretched to support 2; output 0 is centred on input
        // 1.0 and sees inputs 0, 1, 2 with weights 0.75, 0.75, 0.25 (normalized by 1.75).
        let img = image(4, 1, |x, _, _| [0, 80, 160, 240][x]);
        let out = resize_crop(&img, &full(2, 1), Interpolation::Bilinear);
        let left: f64 = (0.0 * 3.0 + 80.0 * 3.0 + 160.0) / 7.0;
        let right: f64 = (80.0 + 160.0 * 3.0 + 240.0 * 3.0) / 7.0;
        assert_eq!(out[0], left.round() as u8);
        assert_eq!(out[3], right.round() as u8);
    }

    #[test]
    fn crop_window_matches_full_resize_then_crop() {
        let img = image(50, 37, |x, y, c| ((x * x + 3 * y + 17 * c) % 256) as u8);
        let whole = resize_crop(&img, &full(34, 25), Interpolation::Bilinear);
        let win = Window {
            resized_w: 34,
            resized_h: 25,
            left: 5,
            top: 3,
            width: 20,
            height: 18,
        };
        let part = resize_crop(&img, &win, Interpolation::Bilinear);
        for y in 0..18 {
            let a = &whole[((y + 3) * 34 + 5) * 3..((y + 3) * 34 + 25) * 3];
            assert_eq!(&part[y * 60..(y + 1) * 60], a);
        }
    }
}
