//! Hand-written AVX-512 and AVX2 block passes for the histogram, in safe Rust.
//!
//! The `std::arch` intrinsics come through `pulp`'s tokens: a [`V4`] or [`V3`] exists only
//! where the CPU has the features (detected at run time, once), its methods are the intrinsics
//! made safe by that proof, and `vectorize` compiles the pass with the features on. Loads and
//! stores go through arrays (`bytemuck::cast` between `[f32; N]` and the vector types, one
//! unaligned vector move). So no `unsafe` is written here: a `#[target_feature]` function of
//! our own would be safe to write but not to call from code without the features, and
//! `multiversion` keeps the body of its clones in a function without them. Every pass has a
//! scalar twin, [`super::packed_scalar`], and proptests hold them to it.
//!
//! What they add over the compiler-vectorised scalar pass is the packing: bin numbers of 0 (the
//! exact zeros after a ReLU, about half of all values) are left out of `index`, so the scalar
//! increments that follow touch only the values that need them; the caller adds the rest to
//! bin 0 at once.

use pulp::bytemuck;
use pulp::x86::{V3, V4};
use std::arch::x86_64::{__m256, __m256i, __m512, _CMP_EQ_OQ, _CMP_LT_OQ};

use super::{packed_scalar, Scan};

/// Values per AVX-512 vector.
const W512: usize = 16;

/// Values per AVX2 vector.
const W256: usize = 8;

/// For each 8-bit mask, the lanes whose bit is set, in order, then zeros: the
/// `_mm256_permutevar8x32_epi32` indices that pack an AVX2 vector's kept lanes to its front.
const PACK8: [[u32; 8]; 256] = {
    let mut table = [[0u32; 8]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut lane, mut n) = (0, 0);
        while lane < 8 {
            if mask & (1 << lane) != 0 {
                table[mask][n] = lane as u32;
                n += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
};

/// The scale and the last bin as [`super::bin_block`] takes them.
fn scale_last(range: f32, bins: usize) -> (f32, f32) {
    let scale = if range > 0.0 {
        bins as f32 / range
    } else {
        0.0
    };
    (scale, (bins - 1) as f32)
}

/// Adds the scalar twin's pass over the tail (shorter than a vector) to a vector pass's result.
fn finish_tail(
    tail: &[f32],
    range: f32,
    bins: usize,
    index: &mut [u32],
    scan: Scan,
    kept: usize,
) -> (Scan, usize) {
    let (t, n) = packed_scalar(tail, range, bins, &mut index[kept..]);
    let scan = Scan {
        max_abs: scan.max_abs.max(t.max_abs),
        non_finite: scan.non_finite + t.non_finite,
        zeros: scan.zeros + t.zeros,
    };
    (scan, kept + n)
}

/// [`super::packed_scalar`] with AVX-512: 16 values a step, packed with `vpcompressd`.
/// `index` holds `block.len()` numbers: each packed vector is stored whole, ending no further
/// than the values read so far.
pub(super) fn packed_avx512(
    simd: V4,
    block: &[f32],
    range: f32,
    bins: usize,
    index: &mut [u32],
) -> (Scan, usize) {
    simd.vectorize(
        #[inline(always)]
        || {
            let f = simd.avx512f;
            let (scale, last) = scale_last(range, bins);
            let (scale_v, last_v) = (f._mm512_set1_ps(scale), f._mm512_set1_ps(last));
            let (inf, zero) = (f._mm512_set1_ps(f32::INFINITY), f._mm512_setzero_ps());
            let mut max = f._mm512_setzero_ps();
            let (mut non_finite, mut zeros, mut kept) = (0u64, 0u64, 0usize);
            let mut groups = block.chunks_exact(W512);
            for group in &mut groups {
                let v: __m512 = bytemuck::cast(<[f32; W512]>::try_from(group).expect("16 lanes"));
                let a = f._mm512_abs_ps(v);
                let finite = f._mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, inf);
                non_finite += u64::from(W512 as u32 - finite.count_ones());
                zeros += u64::from(f._mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, zero).count_ones());
                max = f._mm512_mask_max_ps(max, finite, max, a);
                // `minps` keeps its first operand only where it is less: NaN and past-the-range
                // products become the last bin, as in `bin_of`.
                let g = f._mm512_min_ps(f._mm512_mul_ps(a, scale_v), last_v);
                // g is in [0, last]: truncation is the floor.
                let bin = f._mm512_cvttps_epi32(g);
                let keep = f._mm512_cmpneq_epi32_mask(bin, f._mm512_setzero_si512());
                let packed: [u32; W512] = bytemuck::cast(f._mm512_maskz_compress_epi32(keep, bin));
                // kept <= the values before this group, so the store ends inside `index`.
                index[kept..kept + W512].copy_from_slice(&packed);
                kept += keep.count_ones() as usize;
            }
            let lanes: [f32; W512] = bytemuck::cast(max);
            let scan = Scan {
                max_abs: lanes.iter().copied().fold(0.0, f32::max),
                non_finite,
                zeros,
            };
            finish_tail(groups.remainder(), range, bins, index, scan, kept)
        },
    )
}

/// [`super::packed_scalar`] with AVX2: 8 values a step, packed with a permutation from
/// [`PACK8`]; stores as [`packed_avx512`] does.
pub(super) fn packed_avx2(
    simd: V3,
    block: &[f32],
    range: f32,
    bins: usize,
    index: &mut [u32],
) -> (Scan, usize) {
    simd.vectorize(
        #[inline(always)]
        || {
            let (x, x2) = (simd.avx, simd.avx2);
            let (scale, last) = scale_last(range, bins);
            let (scale_v, last_v) = (x._mm256_set1_ps(scale), x._mm256_set1_ps(last));
            let (inf, zero) = (x._mm256_set1_ps(f32::INFINITY), x._mm256_setzero_ps());
            let sign_off = x._mm256_castsi256_ps(x._mm256_set1_epi32(0x7FFF_FFFF));
            let mut max = x._mm256_setzero_ps();
            let (mut non_finite, mut zeros, mut kept) = (0u64, 0u64, 0usize);
            let mut groups = block.chunks_exact(W256);
            for group in &mut groups {
                let v: __m256 = bytemuck::cast(<[f32; W256]>::try_from(group).expect("8 lanes"));
                let a = x._mm256_and_ps(v, sign_off);
                let finite = x._mm256_cmp_ps::<_CMP_LT_OQ>(a, inf);
                non_finite += u64::from(W256 as u32 - x._mm256_movemask_ps(finite).count_ones());
                let is_zero = x._mm256_cmp_ps::<_CMP_EQ_OQ>(a, zero);
                zeros += u64::from(x._mm256_movemask_ps(is_zero).count_ones());
                // NaN and infinity lanes become 0 before the maximum, which then keeps `max`.
                max = x._mm256_max_ps(max, x._mm256_and_ps(a, finite));
                // As in `packed_avx512`: `minps` sends NaN and past-the-range to the last bin.
                let g = x._mm256_min_ps(x._mm256_mul_ps(a, scale_v), last_v);
                let bin = x._mm256_cvttps_epi32(g);
                let keep = x2._mm256_cmpgt_epi32(bin, x._mm256_setzero_si256());
                let mask = x._mm256_movemask_ps(x._mm256_castsi256_ps(keep)) as usize;
                let perm: __m256i = bytemuck::cast(PACK8[mask]);
                let packed: [u32; W256] = bytemuck::cast(x2._mm256_permutevar8x32_epi32(bin, perm));
                index[kept..kept + W256].copy_from_slice(&packed);
                kept += mask.count_ones() as usize;
            }
            let lanes: [f32; W256] = bytemuck::cast(max);
            let scan = Scan {
                max_abs: lanes.iter().copied().fold(0.0, f32::max),
                non_finite,
                zeros,
            };
            finish_tail(groups.remainder(), range, bins, index, scan, kept)
        },
    )
}
