//! The fused pass ([`super::fused`]) in AVX-512 and AVX2, in safe Rust.
//!
//! The `std::arch` intrinsics come through `pulp`'s tokens: a [`V4`] or [`V3`] exists only
//! where the CPU has the features (detected at run time, once), its methods are the intrinsics
//! made safe by that proof, and `vectorize` compiles the pass with the features on. Loads and
//! stores go through arrays (`bytemuck::cast` between `[f32; N]` and the vector types, one
//! unaligned vector move). So no `unsafe` is written here. Both passes have a scalar twin,
//! [`super::fused::count_portable`], and proptests hold them to it.
//!
//! Each vector of values takes one of two steps. The lean one, for vectors whose values are
//! all finite and inside the range (nearly all of them), needs no clamp and no finiteness
//! mask: |x| < range makes `|x| * bins / range` less than `bins`, exactly, as the scale is a
//! power of two. The general one takes NaNs, infinities, values past the range once it is 2^127,
//! and the last, partial vector of a run.

use pulp::bytemuck;
use pulp::x86::{V3, V4};
use std::arch::x86_64::{
    __m256, __m256i, __m512, __m512i, _CMP_EQ_OQ, _CMP_GE_OQ, _CMP_LT_OQ, _CMP_NLT_UQ,
};

use super::fused::{count_portable, grow_threshold, scatter, Counted, Target, GROUP};
use super::Scan;

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

/// A group is packed when at least one value in `PACK_SHARE` of the group before was in bin 0
/// (or, for a group that was not packed, exactly zero).
const PACK_SHARE: usize = 4;

/// Bins per unit of |x| at `range` (0 at range 0), and the last bin, as [`super::bin_of`]
/// takes them.
fn scale_last(range: f32, bins: usize) -> (f32, f32) {
    let scale = if range > 0.0 {
        bins as f32 / range
    } else {
        0.0
    };
    (scale, (bins - 1) as f32)
}

/// Whether the group after one of `n` values, `bin0` of them in bin 0, is worth packing.
fn worth_packing(bin0: usize, n: usize) -> bool {
    bin0 * PACK_SHARE >= n
}

/// The |x| from which a value needs the general step: the range (values at or past it count in
/// the last bin once the range is 2^127 and cannot grow), or while the range is 0 the smallest
/// positive float.
fn lean_limit(range: f32) -> f32 {
    if range > 0.0 {
        range
    } else {
        f32::from_bits(1)
    }
}

/// The pass's constants, broadcast.
struct Consts512 {
    scale: __m512,
    last: __m512,
    /// The |x| from which a vector takes the general step (see [`lean_limit`]).
    lean: __m512,
    grow: __m512,
    inf: __m512,
}

/// What the AVX-512 pass adds up: the maximum and the zeros per lane, and the NaNs and
/// infinities (rare: only the general step sees them).
#[derive(Clone, Copy)]
struct Acc512 {
    max: __m512,
    zeros: __m512i,
    non_finite: u64,
}

/// The general AVX-512 step over the lanes of `valid` (a prefix), none past the range unless
/// not finite, or the range is 2^127 (they count in the last bin): NaNs and infinities are left out of the maximum and binned in the last bin, as
/// [`super::bin_of`] does (`minps` returns its second operand when the first is NaN).
#[inline(always)]
fn general512<const PACK: bool>(
    simd: V4,
    c: &Consts512,
    a: __m512,
    valid: u16,
    acc: &mut Acc512,
    index: &mut [u32],
    kept: &mut usize,
) {
    let f = simd.avx512f;
    let finite = f._mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(valid, a, c.inf);
    acc.non_finite += u64::from((valid & !finite).count_ones());
    let zero = f._mm512_mask_cmp_ps_mask::<_CMP_EQ_OQ>(valid, a, f._mm512_setzero_ps());
    acc.zeros = f._mm512_mask_add_epi32(acc.zeros, zero, acc.zeros, f._mm512_set1_epi32(1));
    acc.max = f._mm512_mask_max_ps(acc.max, finite, acc.max, a);
    let g = f._mm512_min_ps(f._mm512_mul_ps(a, c.scale), c.last);
    // g is in [0, last]: truncation is the floor.
    let bin = f._mm512_cvttps_epi32(g);
    let keep = if PACK {
        f._mm512_mask_test_epi32_mask(valid, bin, bin)
    } else {
        valid
    };
    let packed: [u32; W512] = bytemuck::cast(f._mm512_maskz_compress_epi32(keep, bin));
    // kept <= the values before this vector in the group, so the store ends inside `index`.
    index[*kept..*kept + W512].copy_from_slice(&packed);
    *kept += keep.count_ones() as usize;
}

/// The lean AVX-512 step: all 16 values finite and inside the range. Packed, the nonzero bin
/// numbers are compressed to the front of the vector (`vpcompressd`).
#[inline(always)]
fn lean512<const PACK: bool>(
    simd: V4,
    c: &Consts512,
    a: __m512,
    acc: &mut Acc512,
    index: &mut [u32],
    kept: &mut usize,
) {
    let f = simd.avx512f;
    let zero = f._mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, f._mm512_setzero_ps());
    acc.zeros = f._mm512_mask_add_epi32(acc.zeros, zero, acc.zeros, f._mm512_set1_epi32(1));
    acc.max = f._mm512_max_ps(acc.max, a);
    let bin = f._mm512_cvttps_epi32(f._mm512_mul_ps(a, c.scale));
    let (n, out) = if PACK {
        let keep = f._mm512_test_epi32_mask(bin, bin);
        (
            keep.count_ones() as usize,
            f._mm512_maskz_compress_epi32(keep, bin),
        )
    } else {
        (W512, bin)
    };
    let out: [u32; W512] = bytemuck::cast(out);
    index[*kept..*kept + W512].copy_from_slice(&out);
    *kept += n;
}

/// Whether a lane of `valid` holds a finite value the range must grow for.
#[inline(always)]
fn must_grow512(simd: V4, c: &Consts512, a: __m512, valid: u16) -> bool {
    let f = simd.avx512f;
    let finite = f._mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(valid, a, c.inf);
    f._mm512_mask_cmp_ps_mask::<_CMP_GE_OQ>(finite, a, c.grow) != 0
}

/// Bins one group (at most [`GROUP`] values) into `index`: how many bin numbers it kept, or
/// `None` where the range must grow for one of its values (what it added to `acc` is then
/// to be dropped).
#[inline(always)]
fn group512<const PACK: bool>(
    simd: V4,
    c: &Consts512,
    group: &[f32],
    acc: &mut Acc512,
    index: &mut [u32; GROUP],
) -> Option<usize> {
    let f = simd.avx512f;
    let mut kept = 0;
    let mut vectors = group.chunks_exact(W512);
    for v in &mut vectors {
        let v: __m512 = bytemuck::cast(<[f32; W512]>::try_from(v).expect("16 lanes"));
        let a = f._mm512_abs_ps(v);
        // Not less than the limit, or NaN: past the range or not finite.
        if f._mm512_cmp_ps_mask::<_CMP_NLT_UQ>(a, c.lean) == 0 {
            lean512::<PACK>(simd, c, a, acc, index, &mut kept);
            continue;
        }
        if must_grow512(simd, c, a, u16::MAX) {
            return None;
        }
        general512::<PACK>(simd, c, a, u16::MAX, acc, index, &mut kept);
    }
    let tail = vectors.remainder();
    if !tail.is_empty() {
        let mut lanes = [0f32; W512];
        lanes[..tail.len()].copy_from_slice(tail);
        let a = f._mm512_abs_ps(bytemuck::cast(lanes));
        let valid = ((1u32 << tail.len()) - 1) as u16;
        if must_grow512(simd, c, a, valid) {
            return None;
        }
        general512::<PACK>(simd, c, a, valid, acc, index, &mut kept);
    }
    Some(kept)
}

/// The sum of a vector's 32-bit lanes.
fn lane_sum<const N: usize, V: bytemuck::Pod>(v: V) -> u64
where
    [u32; N]: bytemuck::Pod,
{
    let lanes: [u32; N] = bytemuck::cast(v);
    lanes.iter().map(|&n| u64::from(n)).sum()
}

/// [`super::count_fused`] with AVX-512: 16 values a step.
pub(super) fn count_avx512(
    simd: V4,
    values: &[f32],
    range: f32,
    to: Target,
    pack: bool,
) -> Counted {
    let (scale, last) = scale_last(range, to.bins);
    if !scale.is_finite() {
        // A range below bins * 2^-128 (only values that small so far): the twin's clamps.
        return count_portable(values, range, to, pack);
    }
    simd.vectorize(
        #[inline(always)]
        || {
            let f = simd.avx512f;
            let c = Consts512 {
                scale: f._mm512_set1_ps(scale),
                last: f._mm512_set1_ps(last),
                lean: f._mm512_set1_ps(lean_limit(range)),
                grow: f._mm512_set1_ps(grow_threshold(range)),
                inf: f._mm512_set1_ps(f32::INFINITY),
            };
            let mut acc = Acc512 {
                max: f._mm512_setzero_ps(),
                zeros: f._mm512_setzero_si512(),
                non_finite: 0,
            };
            let groups = count_groups(
                values,
                to,
                pack,
                &mut acc,
                |a| lane_sum::<W512, _>(a.zeros),
                |pack, group, acc, index| {
                    if pack {
                        group512::<true>(simd, &c, group, acc, index)
                    } else {
                        group512::<false>(simd, &c, group, acc, index)
                    }
                },
            );
            let scan = Scan {
                max_abs: f._mm512_reduce_max_ps(acc.max),
                non_finite: acc.non_finite,
                zeros: lane_sum::<W512, _>(acc.zeros),
            };
            Counted {
                done: groups.done,
                scan,
                bin0: groups.bin0,
                pack: groups.pack,
            }
        },
    )
}

/// Where the group loop stopped: values counted, values packing sent to bin 0, and whether the
/// next group should pack.
struct Groups {
    done: usize,
    bin0: u64,
    pack: bool,
}

/// The group loop both widths run: each group of `values` counted by `count_group` (packing or
/// not, as the last group's share of zeros advises) and its kept indices scattered into the
/// bins. A group holding a value past the range stops it, with `acc` as it was before that
/// group (the caller grows the range and goes on from `done`).
#[inline(always)]
fn count_groups<A: Copy>(
    values: &[f32],
    to: Target,
    mut pack: bool,
    acc: &mut A,
    zeros_of: impl Fn(&A) -> u64,
    mut count_group: impl FnMut(bool, &[f32], &mut A, &mut [u32; GROUP]) -> Option<usize>,
) -> Groups {
    let Target { lanes, bins, index } = to;
    let index = &mut index.0;
    let (mut done, mut bin0, mut zeros) = (0, 0, 0);
    for group in values.chunks(GROUP) {
        let before = *acc;
        let Some(kept) = count_group(pack, group, acc, index) else {
            *acc = before;
            break;
        };
        scatter(&index[..kept], lanes, bins);
        let n = group.len();
        bin0 += (n - kept) as u64;
        done += n;
        let zeros_now = zeros_of(acc);
        let zeros_here = (zeros_now - zeros) as usize;
        pack = worth_packing(if pack { n - kept } else { zeros_here }, n);
        zeros = zeros_now;
    }
    Groups { done, bin0, pack }
}

/// The AVX2 pass's constants, broadcast.
struct Consts256 {
    scale: __m256,
    last: __m256,
    lean: __m256,
    grow: __m256,
    inf: __m256,
    /// Every bit but the sign: `and` with it is |x|.
    magnitude: __m256,
    /// 0, 1, …, 7: lane numbers, to mask a prefix of lanes.
    lane: __m256i,
}

/// What the AVX2 pass adds up (as [`Acc512`]).
#[derive(Clone, Copy)]
struct Acc256 {
    max: __m256,
    zeros: __m256i,
    non_finite: u64,
}

/// The general AVX2 step over the first `valid` lanes (as [`general512`]).
#[inline(always)]
fn general256<const PACK: bool>(
    simd: V3,
    c: &Consts256,
    a: __m256,
    valid: usize,
    acc: &mut Acc256,
    index: &mut [u32],
    kept: &mut usize,
) {
    let (x, x2) = (simd.avx, simd.avx2);
    let valid_bits = (1u32 << valid) - 1;
    let in_prefix = x2._mm256_cmpgt_epi32(x._mm256_set1_epi32(valid as i32), c.lane);
    let in_prefix = x._mm256_castsi256_ps(in_prefix);
    let finite = x._mm256_and_ps(x._mm256_cmp_ps::<_CMP_LT_OQ>(a, c.inf), in_prefix);
    let finite_bits = x._mm256_movemask_ps(finite) as u32;
    acc.non_finite += u64::from((valid_bits & !finite_bits).count_ones());
    let zero = x._mm256_cmp_ps::<_CMP_EQ_OQ>(a, x._mm256_setzero_ps());
    let zero = x._mm256_castps_si256(x._mm256_and_ps(zero, in_prefix));
    // A true comparison is -1 in every lane it holds.
    acc.zeros = x2._mm256_sub_epi32(acc.zeros, zero);
    // NaN, infinite and left-out lanes become 0 before the maximum, which then keeps `max`.
    acc.max = x._mm256_max_ps(acc.max, x._mm256_and_ps(a, finite));
    let g = x._mm256_min_ps(x._mm256_mul_ps(a, c.scale), c.last);
    let bin = x._mm256_cvttps_epi32(g);
    let keep = if PACK {
        let nonzero = x2._mm256_cmpgt_epi32(bin, x._mm256_setzero_si256());
        valid_bits & x._mm256_movemask_ps(x._mm256_castsi256_ps(nonzero)) as u32
    } else {
        valid_bits
    };
    let perm: __m256i = bytemuck::cast(PACK8[keep as usize]);
    let packed: [u32; W256] = bytemuck::cast(x2._mm256_permutevar8x32_epi32(bin, perm));
    index[*kept..*kept + W256].copy_from_slice(&packed);
    *kept += keep.count_ones() as usize;
}

/// The lean AVX2 step (as [`lean512`]); packed, with a permutation from [`PACK8`].
#[inline(always)]
fn lean256<const PACK: bool>(
    simd: V3,
    c: &Consts256,
    a: __m256,
    acc: &mut Acc256,
    index: &mut [u32],
    kept: &mut usize,
) {
    let (x, x2) = (simd.avx, simd.avx2);
    let zero = x._mm256_cmp_ps::<_CMP_EQ_OQ>(a, x._mm256_setzero_ps());
    acc.zeros = x2._mm256_sub_epi32(acc.zeros, x._mm256_castps_si256(zero));
    acc.max = x._mm256_max_ps(acc.max, a);
    let bin = x._mm256_cvttps_epi32(x._mm256_mul_ps(a, c.scale));
    let (n, out) = if PACK {
        let nonzero = x2._mm256_cmpgt_epi32(bin, x._mm256_setzero_si256());
        let keep = x._mm256_movemask_ps(x._mm256_castsi256_ps(nonzero)) as usize;
        let perm: __m256i = bytemuck::cast(PACK8[keep]);
        let packed = x2._mm256_permutevar8x32_epi32(bin, perm);
        (keep.count_ones() as usize, packed)
    } else {
        (W256, bin)
    };
    let out: [u32; W256] = bytemuck::cast(out);
    index[*kept..*kept + W256].copy_from_slice(&out);
    *kept += n;
}

/// Whether one of the first `valid` lanes holds a finite value the range must grow for.
#[inline(always)]
fn must_grow256(simd: V3, c: &Consts256, a: __m256, valid: usize) -> bool {
    let x = simd.avx;
    let finite = x._mm256_cmp_ps::<_CMP_LT_OQ>(a, c.inf);
    let grow = x._mm256_and_ps(finite, x._mm256_cmp_ps::<_CMP_GE_OQ>(a, c.grow));
    x._mm256_movemask_ps(grow) as u32 & ((1u32 << valid) - 1) != 0
}

/// Bins one group into `index` (as [`group512`]).
#[inline(always)]
fn group256<const PACK: bool>(
    simd: V3,
    c: &Consts256,
    group: &[f32],
    acc: &mut Acc256,
    index: &mut [u32; GROUP],
) -> Option<usize> {
    let x = simd.avx;
    let mut kept = 0;
    let mut vectors = group.chunks_exact(W256);
    for v in &mut vectors {
        let v: __m256 = bytemuck::cast(<[f32; W256]>::try_from(v).expect("8 lanes"));
        let a = x._mm256_and_ps(v, c.magnitude);
        let odd = x._mm256_cmp_ps::<_CMP_NLT_UQ>(a, c.lean);
        if x._mm256_movemask_ps(odd) == 0 {
            lean256::<PACK>(simd, c, a, acc, index, &mut kept);
            continue;
        }
        if must_grow256(simd, c, a, W256) {
            return None;
        }
        general256::<PACK>(simd, c, a, W256, acc, index, &mut kept);
    }
    let tail = vectors.remainder();
    if !tail.is_empty() {
        let mut lanes = [0f32; W256];
        lanes[..tail.len()].copy_from_slice(tail);
        let a = x._mm256_and_ps(bytemuck::cast(lanes), c.magnitude);
        if must_grow256(simd, c, a, tail.len()) {
            return None;
        }
        general256::<PACK>(simd, c, a, tail.len(), acc, index, &mut kept);
    }
    Some(kept)
}

/// [`super::count_fused`] with AVX2: 8 values a step.
pub(super) fn count_avx2(simd: V3, values: &[f32], range: f32, to: Target, pack: bool) -> Counted {
    let (scale, last) = scale_last(range, to.bins);
    if !scale.is_finite() {
        return count_portable(values, range, to, pack);
    }
    simd.vectorize(
        #[inline(always)]
        || {
            let x = simd.avx;
            let c = Consts256 {
                scale: x._mm256_set1_ps(scale),
                last: x._mm256_set1_ps(last),
                lean: x._mm256_set1_ps(lean_limit(range)),
                grow: x._mm256_set1_ps(grow_threshold(range)),
                inf: x._mm256_set1_ps(f32::INFINITY),
                magnitude: x._mm256_castsi256_ps(x._mm256_set1_epi32(0x7FFF_FFFF)),
                lane: x._mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            };
            let mut acc = Acc256 {
                max: x._mm256_setzero_ps(),
                zeros: x._mm256_setzero_si256(),
                non_finite: 0,
            };
            let groups = count_groups(
                values,
                to,
                pack,
                &mut acc,
                |a| lane_sum::<W256, _>(a.zeros),
                |pack, group, acc, index| {
                    if pack {
                        group256::<true>(simd, &c, group, acc, index)
                    } else {
                        group256::<false>(simd, &c, group, acc, index)
                    }
                },
            );
            let maxima: [f32; W256] = bytemuck::cast(acc.max);
            let scan = Scan {
                max_abs: maxima.iter().copied().fold(0.0, f32::max),
                non_finite: acc.non_finite,
                zeros: lane_sum::<W256, _>(acc.zeros),
            };
            Counted {
                done: groups.done,
                scan,
                bin0: groups.bin0,
                pack: groups.pack,
            }
        },
    )
}
