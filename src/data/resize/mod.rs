//! Antialiased resampling as PIL does it (`Image.resize` with BILINEAR or BICUBIC), restricted
//! to a crop window of the output: only the pixels that survive the crop are computed.
//!
//! PIL's algorithm: a separable convolution whose kernel is stretched by the scale factor when
//! shrinking (that stretch is the antialiasing); weights are normalized per output pixel and
//! turned into 22-bit fixed point; the horizontal pass runs first and rounds to 8 bits, then
//! the vertical pass. Doing the same arithmetic gives the same bytes as PIL on the same pixels.
//!
//! On x86-64 with AVX2 both passes run explicit SIMD kernels (`avx2`), elsewhere portable
//! ones (`scalar`). Both compute the same 32-bit sums, so the bytes do not depend on the
//! processor.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod scalar;
#[cfg(test)]
mod tests;
mod weights;

use super::decode::RgbImage;
pub use weights::Interpolation;
use weights::{axis_weights, AxisWeights};

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

/// Which kernels a resampler runs: the best explicit SIMD ones the processor has (else the
/// portable ones), or, for tests and the bench, a given set. Every set gives the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// The fastest that apply.
    Best,
    /// The SIMD kernels, with the horizontal one that works at any scale.
    AnyScale,
    /// The portable kernels (what every processor without AVX2 runs).
    Portable,
}

/// The explicit SIMD plans of both passes.
#[cfg(target_arch = "x86_64")]
type Simd = avx2::Plan;

/// No explicit SIMD kernels off x86-64.
#[cfg(not(target_arch = "x86_64"))]
enum Simd {}

/// Plans the SIMD kernels, where the processor has them and `kernels` allows them.
fn plan_simd(hw: &AxisWeights, vw: &AxisWeights, in_w: usize, kernels: Kernels) -> Option<Simd> {
    #[cfg(target_arch = "x86_64")]
    if kernels != Kernels::Portable {
        return avx2::Plan::new(hw, vw, in_w, kernels == Kernels::Best);
    }
    let _ = (hw, vw, in_w, kernels);
    None
}

/// Resize-then-crop fed one input row at a time, top to bottom (so that decoding and the
/// horizontal pass share the cache, and rows below the crop need not be decoded at all).
pub struct Resampler {
    hw: AxisWeights,
    vw: AxisWeights,
    in_w: usize,
    in_h: usize,
    out_w: usize,
    out_h: usize,
    /// First input row the vertical pass reads.
    row_lo: usize,
    /// One past the last input row the vertical pass reads.
    row_hi: usize,
    /// Bytes from one intermediate row to the next: `out_w * 3` rounded up to a multiple of
    /// 32, so that the SIMD kernels work on whole vectors (the bytes past `out_w * 3` are
    /// scratch).
    stride: usize,
    /// Scratch for the end of a row, zero-padded so that the horizontal kernels' reads near
    /// the right edge are in bounds.
    padded: Vec<u8>,
    /// Horizontal-pass output for rows `row_lo..row_hi`, `stride` bytes each.
    mid: Vec<u8>,
    /// The SIMD kernels' plans, where they run.
    simd: Option<Simd>,
}

impl Resampler {
    /// Plans the resize of an `in_w × in_h` image to the crop window `win`.
    pub fn new(in_w: usize, in_h: usize, win: &Window, kind: Interpolation) -> Self {
        Self::with_buffer(in_w, in_h, win, kind, Vec::new())
    }

    /// [`Resampler::new`] keeping its intermediate rows in `buffer` (grown when too small,
    /// never cleared: every byte it reads is written first), so that one thread resizing
    /// image after image allocates and clears that memory once, not per image.
    /// [`Resampler::into_buffer`] hands it back.
    pub fn with_buffer(
        in_w: usize,
        in_h: usize,
        win: &Window,
        kind: Interpolation,
        buffer: Vec<u8>,
    ) -> Self {
        Self::with_kernels(in_w, in_h, win, kind, buffer, Kernels::Best)
    }

    /// [`Resampler::with_buffer`] running `kernels`.
    fn with_kernels(
        in_w: usize,
        in_h: usize,
        win: &Window,
        kind: Interpolation,
        mut buffer: Vec<u8>,
        kernels: Kernels,
    ) -> Self {
        let hw = axis_weights(kind, in_w, win.resized_w, win.left, win.width).trimmed();
        let vw = axis_weights(kind, in_h, win.resized_h, win.top, win.height).trimmed();
        let row_lo = vw.starts.iter().copied().min().unwrap_or(0);
        let row_hi = vw
            .starts
            .iter()
            .map(|&s| (s + vw.taps).min(in_h))
            .max()
            .unwrap_or(0)
            .max(row_lo);
        let stride = (win.width * 3).next_multiple_of(32);
        let len = (row_hi - row_lo) * stride;
        if buffer.len() < len {
            buffer.resize(len, 0);
        }
        let simd = plan_simd(&hw, &vw, in_w, kernels);
        let padded = match &simd {
            #[cfg(target_arch = "x86_64")]
            Some(simd) => simd.horizontal.padded_len(),
            _ => scalar::padded_len(&hw, in_w),
        };
        Resampler {
            padded: vec![0u8; padded],
            mid: buffer,
            hw,
            vw,
            in_w,
            in_h,
            out_w: win.width,
            out_h: win.height,
            row_lo,
            row_hi,
            stride,
            simd,
        }
    }

    /// The intermediate-row buffer, for the next [`Resampler::with_buffer`].
    pub fn into_buffer(self) -> Vec<u8> {
        self.mid
    }

    /// How many input rows from the top the resize reads; rows past them are never needed.
    pub fn rows_needed(&self) -> usize {
        self.row_hi
    }

    /// Takes input row `y` (`in_w * 3` bytes, RGB); rows outside the window are ignored.
    pub(crate) fn push_row(&mut self, y: usize, row: &[u8]) {
        if y < self.row_lo || y >= self.row_hi {
            return;
        }
        let at = (y - self.row_lo) * self.stride;
        let out = &mut self.mid[at..at + self.stride];
        let row = &row[..self.in_w * 3];
        match &self.simd {
            #[cfg(target_arch = "x86_64")]
            Some(simd) => simd.horizontal.row(row, &mut self.padded, out),
            _ => scalar::horizontal(&self.hw, row, &mut self.padded, &mut out[..self.out_w * 3]),
        }
    }

    /// Runs the vertical pass over the rows pushed so far into `out` (`crop w × h × 3` bytes).
    pub fn finish(&self, out: &mut [u8]) {
        assert_eq!(
            out.len(),
            self.out_w * 3 * self.out_h,
            "output has the wrong size"
        );
        // Each output row's input rows: where the first starts in `mid`, and how many.
        let windows: Vec<(usize, usize)> = (self.vw.starts.iter())
            .map(|&start| {
                let n = self.vw.taps.min(self.in_h - start);
                ((start - self.row_lo) * self.stride, n)
            })
            .collect();
        match &self.simd {
            #[cfg(target_arch = "x86_64")]
            Some(simd) => simd.vertical.run(&self.mid, self.stride, &windows, out),
            _ => scalar::vertical(&self.vw, &self.mid, self.stride, &windows, out),
        }
    }
}

/// Resizes `img` to `win.resized_w × win.resized_h` and returns only the crop window, RGB.
pub(crate) fn resize_crop(img: &RgbImage, win: &Window, kind: Interpolation) -> Vec<u8> {
    resize_crop_with(img, win, kind, Kernels::Best)
}

/// [`resize_crop`] on the given `kernels` (the bench times them side by side).
pub fn resize_crop_with(
    img: &RgbImage,
    win: &Window,
    kind: Interpolation,
    kernels: Kernels,
) -> Vec<u8> {
    let mut rs = Resampler::with_kernels(img.width, img.height, win, kind, Vec::new(), kernels);
    let rows = rs.rows_needed();
    for (y, row) in img
        .pixels
        .chunks_exact(img.width * 3)
        .take(rows)
        .enumerate()
    {
        rs.push_row(y, row);
    }
    let mut out = vec![0u8; win.width * win.height * 3];
    rs.finish(&mut out);
    out
}
