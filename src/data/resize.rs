//! Antialiased resampling as PIL does it (`Image.resize` with BILINEAR or BICUBIC), restricted
//! to a crop window of the output: only the pixels that survive the crop are computed.
//!
//! PIL's algorithm: a separable convolution whose kernel is stretched by the scale factor when
//! shrinking (that stretch is the antialiasing); weights are normalized per output pixel and
//! turned into 22-bit fixed point; the horizontal pass runs first and rounds to 8 bits, then
//! the vertical pass. Doing the same arithmetic gives the same bytes as PIL on the same pixels.

use super::decode::RgbImage;
use multiversion::multiversion;

/// Fixed-point precision of the weights (PIL: 32 - 8 - 2 bits).
const PRECISION_BITS: u32 = 22;

/// The resampling kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

impl AxisWeights {
    /// The same weights with every window narrowed to its span of non-zero weights and the
    /// tap count cut to the widest span. The sums are the same to the bit (a zero weight adds
    /// nothing), and fewer taps are less work: PIL sizes every window for the kernel's full
    /// support (`2·ceil(support)+1`), which for a bilinear shrink of 1.5× is 5 taps of which
    /// at most 3 are non-zero.
    fn trimmed(self) -> AxisWeights {
        let taps = self.taps;
        // Each window's non-zero span as input indices; an all-zero window keeps its start.
        let mut spans: Vec<(usize, usize)> = self
            .weights
            .chunks_exact(taps)
            .zip(&self.starts)
            .map(|(k, &start)| match k.iter().position(|&w| w != 0) {
                Some(first) => {
                    let last = k.iter().rposition(|&w| w != 0).unwrap_or(first);
                    (start + first, start + last + 1)
                }
                None => (start, start),
            })
            .collect();
        // Starts must not decrease (the row kernels find the windows that run past the right
        // edge by bisection); a weight of exactly zero inside the kernel (the cubic is zero at
        // 1 and 2) can trim one window's start past the next one's.
        for i in (0..spans.len().saturating_sub(1)).rev() {
            spans[i].0 = spans[i].0.min(spans[i + 1].0);
        }
        // The minimum only lowers a start, so every span still has lo <= hi.
        let width = spans
            .iter()
            .map(|&(lo, hi)| hi - lo)
            .max()
            .unwrap_or(0)
            .max(1);
        let mut weights = vec![0i32; spans.len() * width];
        for (i, (&(lo, hi), &start)) in spans.iter().zip(&self.starts).enumerate() {
            for x in lo..hi {
                // lo can sit before the original start only through the suffix minimum, and
                // then only over weights that are zero.
                if let Some(t) = x.checked_sub(start).filter(|&t| t < taps) {
                    weights[i * width + x - lo] = self.weights[i * taps + t];
                }
            }
        }
        AxisWeights {
            starts: spans.iter().map(|&(lo, _)| lo).collect(),
            taps: width,
            weights,
        }
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
    /// Scratch for the end of a row, zero-padded so that every tap window (plus the one byte
    /// past it that the kernels read) is in bounds.
    padded: Vec<u8>,
    /// Horizontal-pass output for rows `row_lo..row_hi`, `out_w * 3` bytes each.
    mid: Vec<u8>,
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
        mut buffer: Vec<u8>,
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
        Resampler {
            padded: vec![0u8; (in_w + hw.taps) * 3 + 1],
            mid: {
                let len = (row_hi - row_lo) * win.width * 3;
                if buffer.len() < len {
                    buffer.resize(len, 0);
                }
                buffer
            },
            hw,
            vw,
            in_w,
            in_h,
            out_w: win.width,
            out_h: win.height,
            row_lo,
            row_hi,
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
    pub fn push_row(&mut self, y: usize, row: &[u8]) {
        if y < self.row_lo || y >= self.row_hi {
            return;
        }
        let stride = self.out_w * 3;
        let out = &mut self.mid[(y - self.row_lo) * stride..(y - self.row_lo + 1) * stride];
        let row = &row[..self.in_w * 3];
        let taps = self.hw.taps;
        // Outputs whose tap window (and the byte after it, which the kernels read and
        // ignore) fits in the row read it in place; the last few, whose window runs past the
        // right edge, read a zero-padded copy of the row's end (their weights past the edge
        // are zero).
        let inside = self.hw.starts.partition_point(|&s| s + taps < self.in_w);
        let (out_in, out_edge) = out.split_at_mut(inside * 3);
        let (w_in, w_edge) = self.hw.weights.split_at(inside * taps);
        let starts = &self.hw.starts;
        horizontal_row(row, &starts[..inside], w_in, taps, 0, out_in);
        if inside < starts.len() {
            let first = starts[inside];
            let tail = &mut self.padded[..(self.in_w - first + taps) * 3 + 1];
            tail.fill(0);
            tail[..(self.in_w - first) * 3].copy_from_slice(&row[first * 3..]);
            horizontal_row(tail, &starts[inside..], w_edge, taps, first, out_edge);
        }
    }

    /// Runs the vertical pass over the rows pushed so far into `out` (`crop w × h × 3` bytes).
    pub fn finish(&self, out: &mut [u8]) {
        let stride = self.out_w * 3;
        assert_eq!(out.len(), stride * self.out_h, "output has the wrong size");
        let mut acc = vec![0i32; stride];
        for (y, out_row) in out.chunks_exact_mut(stride).enumerate() {
            let start = self.vw.starts[y];
            let n = self.vw.taps.min(self.in_h - start);
            let k = &self.vw.weights[y * self.vw.taps..y * self.vw.taps + n];
            let first = (start - self.row_lo) * stride;
            vertical_row(&self.mid[first..first + n * stride], k, &mut acc, out_row);
        }
    }
}

/// One output row of the vertical pass: `rows` holds `k.len()` consecutive input rows of
/// `out.len()` bytes each; `acc` is scratch of the same length. Compiled for several
/// instruction sets and picked at run time (AVX2 doubles the vector width).
#[multiversion(targets("x86_64+avx2+fma", "x86_64+sse4.1"))]
fn vertical_row(rows: &[u8], k: &[i32], acc: &mut [i32], out: &mut [u8]) {
    let half = 1i32 << (PRECISION_BITS - 1);
    acc.fill(half);
    for (src, &kk) in rows.chunks_exact(out.len()).zip(k) {
        if kk == 0 {
            continue;
        }
        for (a, &s) in acc.iter_mut().zip(src) {
            *a += s as i32 * kk;
        }
    }
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = clip8(a);
    }
}

/// The horizontal pass over one row, dispatched on the tap count (unrolled kernels for the
/// common ones). Compiled for several instruction sets and picked at run time.
#[multiversion(targets("x86_64+avx2+fma", "x86_64+sse4.1"))]
fn horizontal_row(
    src: &[u8],
    starts: &[usize],
    weights: &[i32],
    taps: usize,
    offset: usize,
    out: &mut [u8],
) {
    match taps {
        2 => horizontal::<2>(src, starts, weights, offset, out),
        3 => horizontal::<3>(src, starts, weights, offset, out),
        4 => horizontal::<4>(src, starts, weights, offset, out),
        5 => horizontal::<5>(src, starts, weights, offset, out),
        6 => horizontal::<6>(src, starts, weights, offset, out),
        7 => horizontal::<7>(src, starts, weights, offset, out),
        _ => horizontal_taps(src, starts, weights, taps, offset, out),
    }
}

/// The horizontal pass with a tap count known at compile time: output `i` reads the `N`
/// pixels from `starts[i] - offset` of `src` (weights past a window's end are zero).
#[inline(always)]
fn horizontal<const N: usize>(
    src: &[u8],
    starts: &[usize],
    weights: &[i32],
    offset: usize,
    out: &mut [u8],
) {
    horizontal_taps(src, starts, weights, N, offset, out);
}

/// [`horizontal`] for any tap count. Each pixel is taken as four lanes (R, G, B and the next
/// pixel's R, one byte past the window) and each output is written as four bytes (the fourth
/// is overwritten by the next output), so that every lane is live and the compiler turns a
/// tap into one vector multiply-add; the last output is written as three bytes.
#[inline(always)]
fn horizontal_taps(
    src: &[u8],
    starts: &[usize],
    weights: &[i32],
    taps: usize,
    offset: usize,
    out: &mut [u8],
) {
    let n = starts.len();
    if n == 0 {
        return;
    }
    let k = |i: usize| &weights[i * taps..(i + 1) * taps];
    for i in 0..n - 1 {
        let px = tap_pixels(src, starts[i] - offset, taps);
        out[3 * i..3 * i + 4].copy_from_slice(&convolve(px, k(i)));
    }
    let px = tap_pixels(src, starts[n - 1] - offset, taps);
    out[3 * (n - 1)..3 * n].copy_from_slice(&convolve(px, k(n - 1))[..3]);
}

/// The `taps` pixels from pixel `start` of `src`, and one byte more.
#[inline(always)]
fn tap_pixels(src: &[u8], start: usize, taps: usize) -> &[u8] {
    &src[start * 3..(start + taps) * 3 + 1]
}

/// One output pixel of the horizontal pass, as four lanes (the fourth is not a channel).
#[inline(always)]
fn convolve(px: &[u8], k: &[i32]) -> [u8; 4] {
    let mut acc = [1i32 << (PRECISION_BITS - 1); 4];
    for (t, &kt) in k.iter().enumerate() {
        let p = &px[3 * t..3 * t + 4];
        for (a, &v) in acc.iter_mut().zip(p) {
            *a += v as i32 * kt;
        }
    }
    acc.map(clip8)
}

/// Resizes `img` to `win.resized_w × win.resized_h` and returns only the crop window, RGB.
pub fn resize_crop(img: &RgbImage, win: &Window, kind: Interpolation) -> Vec<u8> {
    let mut rs = Resampler::new(img.width, img.height, win, kind);
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

    /// PIL's two passes written plainly: full 32-bit weights, one pixel at a time.
    fn reference(img: &RgbImage, win: &Window, kind: Interpolation) -> Vec<u8> {
        let hw = axis_weights(kind, img.width, win.resized_w, win.left, win.width);
        let vw = axis_weights(kind, img.height, win.resized_h, win.top, win.height);
        let half = 1i32 << (PRECISION_BITS - 1);
        let mut mid = vec![0u8; img.height * win.width * 3];
        for y in 0..img.height {
            for x in 0..win.width {
                for c in 0..3 {
                    let mut acc = half;
                    for t in 0..hw.taps.min(img.width - hw.starts[x]) {
                        let px = img.pixels[(y * img.width + hw.starts[x] + t) * 3 + c];
                        acc += px as i32 * hw.weights[x * hw.taps + t];
                    }
                    mid[(y * win.width + x) * 3 + c] = clip8(acc);
                }
            }
        }
        let mut out = vec![0u8; win.width * win.height * 3];
        for y in 0..win.height {
            for i in 0..win.width * 3 {
                let mut acc = half;
                for t in 0..vw.taps.min(img.height - vw.starts[y]) {
                    let px = mid[(vw.starts[y] + t) * win.width * 3 + i];
                    acc += px as i32 * vw.weights[y * vw.taps + t];
                }
                out[y * win.width * 3 + i] = clip8(acc);
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The streaming resampler gives PIL's bytes for any sizes (shrinking by up to 8×,
        /// which takes the any-tap-count path, and enlarging), either kernel.
        #[test]
        fn blocked_resampler_matches_the_plain_arithmetic(
            w in 1usize..90, h in 1usize..90, rw in 1usize..60, rh in 1usize..60,
            seed in 0usize..1000, bicubic: bool,
        ) {
            let img = image(w, h, |x, y, c| ((x * 37 + y * 101 + c * 53 + seed) % 256) as u8);
            let win = Window {
                resized_w: rw,
                resized_h: rh,
                left: rw / 4,
                top: rh / 3,
                width: rw - rw / 4 - rw / 5,
                height: rh - rh / 3,
            };
            let kind = if bicubic { Interpolation::Bicubic } else { Interpolation::Bilinear };
            proptest::prop_assert_eq!(resize_crop(&img, &win, kind), reference(&img, &win, kind));
        }
    }
}
