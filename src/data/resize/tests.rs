//! Tests of the resampler against PIL's arithmetic written plainly.

use super::weights::{axis_weights, clip8, PRECISION_BITS};
use super::*;

fn image(w: usize, h: usize, mut f: impl FnMut(usize, usize, usize) -> u8) -> RgbImage {
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

/// Pixels of a `w × h` image from `seed`: noise, noise of 0 and 255 alone (the sharpest
/// edges, whose bicubic overshoot the clamp cuts), or a gradient with a little noise.
fn pixels(w: usize, h: usize, seed: u64, pattern: u8) -> RgbImage {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    image(w, h, |x, y, c| match pattern {
        0 => next() as u8,
        1 => (next() & 1) as u8 * 255,
        _ => ((x * 255 / w.max(2) + y + c * 40) as u64 + (next() & 7)) as u8,
    })
}

/// Resize-then-crop through a resampler running `kernels`, handed each row at byte `align`
/// of a longer slice (with other bytes before and after it), with its intermediate rows in
/// a buffer that an earlier image left holding other bytes.
fn streamed(
    img: &RgbImage,
    win: &Window,
    kind: Interpolation,
    kernels: Kernels,
    align: usize,
) -> Vec<u8> {
    let buffer = vec![0x5a; (img.height + 9) * (win.width * 3 + 64)];
    let mut rs = Resampler::with_kernels(img.width, img.height, win, kind, buffer, kernels);
    let mut slice = vec![0xa5; align + img.width * 3 + 13];
    for (y, row) in img.pixels.chunks_exact(img.width * 3).enumerate() {
        slice[align..align + row.len()].copy_from_slice(row);
        rs.push_row(y, &slice[align..]);
    }
    let mut out = vec![0; win.width * win.height * 3];
    rs.finish(&mut out);
    out
}

/// An image size, a resized size and a crop window inside it: each side from 1 to 699
/// pixels, tiny ones often, shrinking and enlarging alike.
fn geometry() -> impl proptest::strategy::Strategy<Value = (usize, usize, Window)> {
    use proptest::prelude::*;
    let side = || prop_oneof![1usize..6, 1usize..80, 1usize..700];
    (side(), side(), side(), side())
        .prop_flat_map(|(w, h, rw, rh)| (Just((w, h, rw, rh)), 0..rw, 0..rh))
        .prop_flat_map(|((w, h, rw, rh), left, top)| {
            (Just((w, h, rw, rh, left, top)), 1..=rw - left, 1..=rh - top)
        })
        .prop_map(|((w, h, rw, rh, left, top), width, height)| {
            let win = Window {
                resized_w: rw,
                resized_h: rh,
                left,
                top,
                width,
                height,
            };
            (w, h, win)
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
    ))]

    /// Both kernel sets give PIL's bytes for any image, resize and crop, whatever the
    /// alignment of the rows handed in and whatever the reused buffer held.
    #[test]
    fn simd_and_portable_kernels_match_pil(
        (w, h, win) in geometry(),
        seed: u64, pattern in 0u8..3, bicubic: bool, align in 0usize..64,
    ) {
        let img = pixels(w, h, seed, pattern);
        let kind = if bicubic { Interpolation::Bicubic } else { Interpolation::Bilinear };
        let expected = reference(&img, &win, kind);
        for kernels in [Kernels::Best, Kernels::AnyScale, Kernels::Portable] {
            proptest::prop_assert_eq!(&streamed(&img, &win, kind, kernels, align), &expected, "{:?}", kernels);
        }
        proptest::prop_assert_eq!(&resize_crop(&img, &win, kind), &expected);
    }
}

/// The weights as first written: each weight added to the total as it is computed.
fn axis_weights_in_one_loop(
    kind: Interpolation,
    in_size: usize,
    out_size: usize,
    first: usize,
    count: usize,
) -> (Vec<usize>, Vec<i32>) {
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
    (starts, weights)
}

/// Summing the weights apart from computing them (so that the computing runs on vectors)
/// gives the same bits: every size from 1 to 200 pixels to every other.
#[test]
fn weights_summed_apart_are_the_same() {
    for kind in [Interpolation::Bilinear, Interpolation::Bicubic] {
        for in_size in 1..=200 {
            for out_size in 1..=200 {
                let w = axis_weights(kind, in_size, out_size, 0, out_size);
                let (starts, weights) =
                    axis_weights_in_one_loop(kind, in_size, out_size, 0, out_size);
                assert_eq!(
                    (w.starts, w.weights),
                    (starts, weights),
                    "{kind:?} {in_size} → {out_size}"
                );
            }
        }
    }
}

/// A crop of no rows or no columns gives no bytes, whichever kernels run.
#[test]
fn empty_crop_is_empty() {
    let img = pixels(40, 30, 7, 0);
    for (width, height) in [(0, 10), (10, 0), (0, 0)] {
        let win = Window {
            resized_w: 20,
            resized_h: 15,
            left: 3,
            top: 2,
            width,
            height,
        };
        for kernels in [Kernels::Best, Kernels::AnyScale, Kernels::Portable] {
            assert!(streamed(&img, &win, Interpolation::Bilinear, kernels, 0).is_empty());
        }
    }
}
