//! The AVX2 kernels (x86-64-v3), run through `pulp`'s safe feature tokens.
//!
//! Both passes multiply 8-bit pixels by 22-bit weights. `vpmaddwd` multiplies pairs of 16-bit
//! lanes and adds each pair into 32 bits, which is exact for a pixel and a 16-bit factor, so
//! every weight is split as `w = hi·2^11 + lo` with `lo` in `0..2^11` (both fit 16 bits) and
//! the two partial sums are put back together as `(Σ p·hi)·2^11 + Σ p·lo`. All of it is
//! wrapping 32-bit arithmetic, so the result is the portable kernels' 32-bit sum bit for bit.

mod lanes;
mod pixels;
mod vertical;

use super::weights::{AxisWeights, PRECISION_BITS};
use core::arch::x86_64::{__m128i, __m256i};
use pulp::{cast, x86::V3};

/// Bits of a weight in its low half.
const SPLIT: u32 = 11;

/// Bytes the horizontal kernel reads from an output's first pixel for each four taps.
const QUAD_BYTES: usize = 12;

/// `w` as (high, low) halves, or `None` if the high half does not fit 16 bits.
fn split(w: i32) -> Option<(i16, i16)> {
    let hi = i16::try_from(w >> SPLIT).ok()?;
    Some((hi, (w & ((1 << SPLIT) - 1)) as i16))
}

/// The weights of two taps as (high halves, low halves), each pair packed into 32 bits
/// (the first tap in the low 16), or `None` if a high half does not fit 16 bits.
fn split_pair(w0: i32, w1: i32) -> Option<[i32; 2]> {
    let ((h0, l0), (h1, l1)) = (split(w0)?, split(w1)?);
    let pack = |a: i16, b: i16| (a as u16 as u32 | (b as u16 as u32) << 16) as i32;
    Some([pack(h0, h1), pack(l0, l1)])
}

/// A 16-byte load from `src` at byte `at`.
#[inline(always)]
fn load16(src: &[u8], at: usize) -> __m128i {
    let bytes: [u8; 16] = *src[at..].first_chunk().unwrap();
    cast(bytes)
}

/// Stores `v` at byte `at` of `out`, cut short at its end.
#[inline(always)]
fn store32(out: &mut [u8], at: usize, v: __m256i) {
    let bytes: [u8; 32] = cast(v);
    match out.get_mut(at..at + 32) {
        Some(dst) => dst.copy_from_slice(&bytes),
        None => {
            let n = out.len() - at;
            out[at..].copy_from_slice(&bytes[..n]);
        }
    }
}

/// `(hi·2^11 + lo) >> 22`, lane by lane (the rounding term is already in `lo`).
#[inline(always)]
fn combine(simd: V3, hi: __m256i, lo: __m256i) -> __m256i {
    let sum = simd
        .avx2
        ._mm256_add_epi32(simd.avx2._mm256_slli_epi32::<{ SPLIT as i32 }>(hi), lo);
    simd.avx2
        ._mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(sum)
}

/// Four vectors of split sums (`hi`, `lo`) combined and packed to bytes with unsigned
/// saturation, in the order `packs`/`packus` leave them (each caller puts them in its own).
#[inline(always)]
fn combine_and_pack(simd: V3, hi: [__m256i; 4], lo: [__m256i; 4]) -> __m256i {
    let r = [
        combine(simd, hi[0], lo[0]),
        combine(simd, hi[1], lo[1]),
        combine(simd, hi[2], lo[2]),
        combine(simd, hi[3], lo[3]),
    ];
    let p0 = simd.avx2._mm256_packs_epi32(r[0], r[1]);
    let p1 = simd.avx2._mm256_packs_epi32(r[2], r[3]);
    simd.avx2._mm256_packus_epi16(p0, p1)
}

/// The horizontal pass planned for AVX2: one output byte per lane where the scale allows
/// it, else one output pixel per 128-bit lane.
pub(crate) enum Horizontal {
    /// One output byte per 32-bit lane.
    Lanes(lanes::Lanes),
    /// One output pixel per 128-bit lane.
    Pixels(pixels::Pixels),
}

impl Horizontal {
    /// Length of the zero-padded scratch that [`Horizontal::row`] needs.
    pub(crate) fn padded_len(&self) -> usize {
        match self {
            Horizontal::Lanes(h) => h.padded_len(),
            Horizontal::Pixels(h) => h.padded_len(),
        }
    }

    /// The pass over one input row (`in_w * 3` bytes) into `out` (the outputs' bytes rounded
    /// up to a multiple of 32); `padded` is scratch of [`Horizontal::padded_len`] bytes.
    pub(crate) fn row(&self, row: &[u8], padded: &mut [u8], out: &mut [u8]) {
        match self {
            Horizontal::Lanes(h) => h.row(row, padded, out),
            Horizontal::Pixels(h) => h.row(row, padded, out),
        }
    }
}

/// Both passes planned for AVX2.
pub struct Plan {
    /// The horizontal pass.
    pub(crate) horizontal: Horizontal,
    /// The vertical pass.
    pub(crate) vertical: vertical::Vertical,
}

impl Plan {
    /// Plans both passes, or `None` where the processor lacks AVX2 (or, in theory, a weight
    /// does not split); the horizontal one with one output byte per lane where `lanes` is
    /// set and the scale allows it.
    pub(crate) fn new(
        hw: &AxisWeights,
        vw: &AxisWeights,
        in_w: usize,
        lanes: bool,
    ) -> Option<Self> {
        let simd = V3::try_new()?;
        let lanes = lanes.then(|| lanes::Lanes::new(simd, hw, in_w)).flatten();
        let horizontal = match lanes {
            Some(h) => Horizontal::Lanes(h),
            None => Horizontal::Pixels(pixels::Pixels::new(simd, hw, in_w)?),
        };
        Some(Plan {
            horizontal,
            vertical: vertical::Vertical::new(simd, vw)?,
        })
    }
}
