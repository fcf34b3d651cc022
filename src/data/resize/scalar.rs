//! The portable kernels: plain loops that the compiler vectorizes, compiled for several
//! instruction sets and picked at run time. They serve wherever the explicit SIMD kernels
//! do not (other processors, or x86-64 without AVX2).

use super::weights::{clip8, AxisWeights, PRECISION_BITS};
use multiversion::multiversion;

/// Length of the zero-padded scratch that [`horizontal`] needs.
pub(super) fn padded_len(hw: &AxisWeights, in_w: usize) -> usize {
    (in_w + hw.taps) * 3 + 1
}

/// The horizontal pass over one input row (`in_w * 3` bytes) into `out` (3 bytes an
/// output); `padded` is scratch of [`padded_len`] bytes.
pub(super) fn horizontal(hw: &AxisWeights, row: &[u8], padded: &mut [u8], out: &mut [u8]) {
    let (taps, in_w) = (hw.taps, row.len() / 3);
    // Outputs whose tap window (and the byte after it, which the kernels read and ignore)
    // fits in the row read it in place; the last few, whose window runs past the right edge,
    // read a zero-padded copy of the row's end (their weights past the edge are zero).
    let inside = hw.starts.partition_point(|&s| s + taps < in_w);
    let (out_in, out_edge) = out.split_at_mut(inside * 3);
    let (w_in, w_edge) = hw.weights.split_at(inside * taps);
    let starts = &hw.starts;
    horizontal_row(row, &starts[..inside], w_in, taps, 0, out_in);
    if inside < starts.len() {
        let first = starts[inside];
        let tail = &mut padded[..(in_w - first + taps) * 3 + 1];
        tail.fill(0);
        tail[..(in_w - first) * 3].copy_from_slice(&row[first * 3..]);
        horizontal_row(tail, &starts[inside..], w_edge, taps, first, out_edge);
    }
}

/// The vertical pass into `out` (rows of `out_w * 3` bytes): output row `y` reads
/// `windows[y].1` intermediate rows from byte `windows[y].0` of `mid`, `stride` bytes apart.
pub(super) fn vertical(
    vw: &AxisWeights,
    mid: &[u8],
    stride: usize,
    windows: &[(usize, usize)],
    out: &mut [u8],
) {
    let width = out.len() / windows.len().max(1);
    let mut acc = vec![0; width];
    for (y, (out_row, &(first, n))) in out.chunks_exact_mut(width.max(1)).zip(windows).enumerate() {
        let k = &vw.weights[y * vw.taps..y * vw.taps + n];
        vertical_row(
            &mid[first..first + n * stride],
            stride,
            k,
            &mut acc,
            out_row,
        );
    }
}

/// One output row of the vertical pass: `rows` holds `k.len()` consecutive input rows,
/// `stride` bytes apart, whose first `out.len()` bytes are read; `acc` is scratch of
/// `out.len()` accumulators.
#[multiversion(targets("x86_64+avx2+fma", "x86_64+sse4.1"))]
fn vertical_row(rows: &[u8], stride: usize, k: &[i32], acc: &mut [i32], out: &mut [u8]) {
    let half = 1i32 << (PRECISION_BITS - 1);
    acc.fill(half);
    for (t, &kk) in k.iter().enumerate() {
        if kk == 0 {
            continue;
        }
        let src = &rows[t * stride..t * stride + out.len()];
        for (a, &s) in acc.iter_mut().zip(src) {
            *a += s as i32 * kk;
        }
    }
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = clip8(a);
    }
}

/// The horizontal pass over one row, dispatched on the tap count (unrolled kernels for the
/// common ones): output `i` reads the `taps` pixels from `starts[i] - offset` of `src`, and
/// one byte more. Compiled for several instruction sets and picked at run time.
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
        2 => horizontal_n::<2>(src, starts, weights, offset, out),
        3 => horizontal_n::<3>(src, starts, weights, offset, out),
        4 => horizontal_n::<4>(src, starts, weights, offset, out),
        5 => horizontal_n::<5>(src, starts, weights, offset, out),
        6 => horizontal_n::<6>(src, starts, weights, offset, out),
        7 => horizontal_n::<7>(src, starts, weights, offset, out),
        _ => horizontal_taps(src, starts, weights, taps, offset, out),
    }
}

/// [`horizontal_taps`] with a tap count known at compile time.
#[inline(always)]
fn horizontal_n<const N: usize>(
    src: &[u8],
    starts: &[usize],
    weights: &[i32],
    offset: usize,
    out: &mut [u8],
) {
    horizontal_taps(src, starts, weights, N, offset, out);
}

/// The horizontal pass for any tap count. Each pixel is taken as four lanes (R, G, B and the
/// next pixel's R, one byte past the window) and each output is written as four bytes (the
/// fourth is overwritten by the next output), so that every lane is live and the compiler
/// turns a tap into one vector multiply-add; the last output is written as three bytes.
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
