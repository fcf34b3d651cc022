//! The horizontal pass with one output pixel per 128-bit lane: for any scale.

use super::super::weights::AxisWeights;
use super::{combine_and_pack, load16, store32, PRECISION_BITS, QUAD_BYTES};
use core::arch::x86_64::__m256i;
use pulp::{cast, x86::V3};

/// The horizontal pass planned with one output pixel per 128-bit lane: outputs go eight at a time, output `v` of a group
/// in the low 128-bit lane and output `v + 4` in the high one. One 16-byte load from an
/// output's first pixel holds five pixels; two byte shuffles turn taps 0-1 and 2-3 into
/// 16-bit (pixel t, pixel t+1) pairs per channel, one `vpmaddwd` per weight half each.
pub(crate) struct Pixels {
    simd: V3,
    /// Tap pairs per output.
    pairs: usize,
    /// Per group of 8 outputs: the byte offset of each one's first pixel in the row (the
    /// outputs past the last are copies of it).
    offsets: Vec<[usize; 8]>,
    /// Per group of 8 outputs and tap pair, for each lane pair `v`: the high and the low
    /// weight halves, each as 16-bit (tap 2p, tap 2p+1) pairs repeated over the lane.
    weights: Vec<[__m256i; 8]>,
    /// Groups whose reads all lie inside the row; the rest read a zero-padded copy.
    inside: usize,
    /// Bytes in a row.
    row_len: usize,
}

impl Pixels {
    /// Plans the pass for `hw` over rows of `in_w` pixels, or `None` where a weight does not
    /// split.
    pub(crate) fn new(simd: V3, hw: &AxisWeights, in_w: usize) -> Option<Self> {
        let n = hw.starts.len();
        let pairs = hw.taps.div_ceil(2);
        let groups = n.div_ceil(8);
        let last = hw.starts.last().copied().unwrap_or(0);
        let offsets = (0..groups)
            .map(|g| std::array::from_fn(|j| hw.starts.get(8 * g + j).copied().unwrap_or(last) * 3))
            .collect();
        // Each output's weights as packed (tap 2p, tap 2p+1) halves per pair, the outputs
        // past the last with zero weights.
        let mut packed = vec![[0i32; 2]; groups * 8 * pairs];
        for (k, dst) in hw
            .weights
            .chunks_exact(hw.taps)
            .zip(packed.chunks_exact_mut(pairs))
        {
            for (p, d) in dst.iter_mut().enumerate() {
                *d = super::split_pair(k[2 * p], k.get(2 * p + 1).copied().unwrap_or(0))?;
            }
        }
        let mut weights = Vec::with_capacity(groups * pairs);
        for group in packed.chunks_exact(8 * pairs) {
            for p in 0..pairs {
                weights.push(std::array::from_fn(|j| {
                    let (v, half) = (j / 2, j % 2);
                    let (a, b) = (group[v * pairs + p][half], group[(v + 4) * pairs + p][half]);
                    cast([a, a, a, a, b, b, b, b])
                }));
            }
        }
        let mut plan = Pixels {
            simd,
            pairs,
            offsets,
            weights,
            inside: 0,
            row_len: in_w * 3,
        };
        let reach = plan.reach();
        plan.inside = plan
            .offsets
            .iter()
            .take_while(|o| o[7] + reach <= plan.row_len)
            .count();
        Some(plan)
    }

    /// Bytes read from an output's first pixel.
    fn reach(&self) -> usize {
        (self.pairs.div_ceil(2) - 1) * QUAD_BYTES + 16
    }

    /// Length of the zero-padded scratch that [`Pixels::row`] needs.
    pub(crate) fn padded_len(&self) -> usize {
        match (self.offsets.get(self.inside), self.offsets.last()) {
            (Some(first), Some(last)) => {
                (last[7] + self.reach() - first[0]).max(self.row_len - first[0])
            }
            _ => 0,
        }
    }

    /// The pass over one input row (`in_w * 3` bytes) into `out` (at least `3 · outputs`
    /// bytes, written up to its end); `padded` is scratch of [`Pixels::padded_len`]
    /// bytes, zero past the row's copied end.
    pub(crate) fn row(&self, row: &[u8], padded: &mut [u8], out: &mut [u8]) {
        match self.pairs {
            1 => self.row_n::<1, 1, 16>(row, padded, out),
            2 => self.row_n::<2, 1, 16>(row, padded, out),
            3 => self.row_n::<3, 2, 28>(row, padded, out),
            4 => self.row_n::<4, 2, 28>(row, padded, out),
            5 => self.row_n::<5, 3, 40>(row, padded, out),
            6 => self.row_n::<6, 3, 40>(row, padded, out),
            7 => self.row_n::<7, 4, 52>(row, padded, out),
            8 => self.row_n::<8, 4, 52>(row, padded, out),
            _ => self.row_n::<0, 0, 0>(row, padded, out),
        }
    }

    /// [`Pixels::row`] for `P` tap pairs, read as `Q` loads spanning `R` bytes from each
    /// output's first pixel (`P = 0`: any number of pairs).
    fn row_n<const P: usize, const Q: usize, const R: usize>(
        &self,
        row: &[u8],
        padded: &mut [u8],
        out: &mut [u8],
    ) {
        struct Job<'a, const P: usize, const Q: usize, const R: usize> {
            plan: &'a Pixels,
            row: &'a [u8],
            padded: &'a mut [u8],
            out: &'a mut [u8],
        }
        impl<const P: usize, const Q: usize, const R: usize> pulp::NullaryFnOnce for Job<'_, P, Q, R> {
            type Output = ();
            #[inline(always)]
            fn call(self) {
                self.plan
                    .row_impl::<P, Q, R>(self.row, self.padded, self.out)
            }
        }
        self.simd.vectorize(Job::<P, Q, R> {
            plan: self,
            row,
            padded,
            out,
        })
    }

    #[inline(always)]
    fn row_impl<const P: usize, const Q: usize, const R: usize>(
        &self,
        row: &[u8],
        padded: &mut [u8],
        out: &mut [u8],
    ) {
        let mut weights = self.weights.chunks_exact(self.pairs);
        for (g, (offs, w)) in self.offsets[..self.inside]
            .iter()
            .zip(&mut weights)
            .enumerate()
        {
            store32(out, 24 * g, self.group::<P, Q, R>(row, 0, offs, w));
        }
        if let Some(first) = self.offsets.get(self.inside).map(|o| o[0]) {
            padded[..self.row_len - first].copy_from_slice(&row[first..self.row_len]);
            let tail = self.offsets[self.inside..].iter().zip(weights).enumerate();
            for (g, (offs, w)) in tail {
                let v = self.group::<P, Q, R>(padded, first, offs, w);
                store32(out, 24 * (self.inside + g), v);
            }
        }
    }

    /// The group kernel for `P` tap pairs (any number if `P = 0`).
    #[inline(always)]
    fn group<const P: usize, const Q: usize, const R: usize>(
        &self,
        src: &[u8],
        base: usize,
        offs: &[usize; 8],
        w: &[[__m256i; 8]],
    ) -> __m256i {
        if P == 0 {
            self.group_any(src, base, offs, w)
        } else {
            self.group_n::<P, Q, R>(src, base, offs, w.try_into().unwrap())
        }
    }

    /// Outputs of one group as 24 bytes (and 8 of zero), reading `src`, whose byte 0 is the
    /// row's byte `base`; `w` holds the group's weights for `P` tap pairs.
    #[inline(always)]
    fn group_n<const P: usize, const Q: usize, const R: usize>(
        &self,
        src: &[u8],
        base: usize,
        offs: &[usize; 8],
        w: &[[__m256i; 8]; P],
    ) -> __m256i {
        let simd = self.simd;
        let avx2 = simd.avx2;
        let (m01, m23) = tap_shuffles(simd);
        let mut hi = [simd.avx._mm256_setzero_si256(); 4];
        let mut lo = [simd.avx._mm256_set1_epi32(1 << (PRECISION_BITS - 1)); 4];
        let at = |i: usize| -> &[u8; R] { src[offs[i] - base..].first_chunk().unwrap() };
        for v in 0..4 {
            let (a, b) = (at(v), at(v + 4));
            for q in 0..Q {
                let x = simd
                    .avx
                    ._mm256_set_m128i(load16(b, q * QUAD_BYTES), load16(a, q * QUAD_BYTES));
                for (p, m) in [(2 * q, m01), (2 * q + 1, m23)] {
                    if p < P {
                        let d = avx2._mm256_shuffle_epi8(x, m);
                        hi[v] =
                            avx2._mm256_add_epi32(hi[v], avx2._mm256_madd_epi16(d, w[p][2 * v]));
                        lo[v] = avx2
                            ._mm256_add_epi32(lo[v], avx2._mm256_madd_epi16(d, w[p][2 * v + 1]));
                    }
                }
            }
        }
        pack_group(simd, hi, lo)
    }

    /// [`Pixels::group`] for any number of tap pairs.
    #[inline(always)]
    fn group_any(&self, src: &[u8], base: usize, offs: &[usize; 8], w: &[[__m256i; 8]]) -> __m256i {
        let simd = self.simd;
        let avx2 = simd.avx2;
        let (m01, m23) = tap_shuffles(simd);
        let mut hi = [simd.avx._mm256_setzero_si256(); 4];
        let mut lo = [simd.avx._mm256_set1_epi32(1 << (PRECISION_BITS - 1)); 4];
        for v in 0..4 {
            for (q, wq) in w.chunks(2).enumerate() {
                let a = load16(src, offs[v] - base + q * QUAD_BYTES);
                let b = load16(src, offs[v + 4] - base + q * QUAD_BYTES);
                let x = simd.avx._mm256_set_m128i(b, a);
                for (wp, m) in wq.iter().zip([m01, m23]) {
                    let d = avx2._mm256_shuffle_epi8(x, m);
                    hi[v] = avx2._mm256_add_epi32(hi[v], avx2._mm256_madd_epi16(d, wp[2 * v]));
                    lo[v] = avx2._mm256_add_epi32(lo[v], avx2._mm256_madd_epi16(d, wp[2 * v + 1]));
                }
            }
        }
        pack_group(simd, hi, lo)
    }
}

/// Byte shuffles taking the 16 bytes from an output's first pixel to 16-bit (pixel t,
/// pixel t+1) pairs of R, G and B (and a zero pair): for taps 0-1, and for taps 2-3.
#[inline(always)]
fn tap_shuffles(simd: V3) -> (__m256i, __m256i) {
    let z = -128i8;
    #[rustfmt::skip]
    let m01 = simd.avx._mm256_setr_epi8(
        0, z, 3, z, 1, z, 4, z, 2, z, 5, z, z, z, z, z,
        0, z, 3, z, 1, z, 4, z, 2, z, 5, z, z, z, z, z,
    );
    #[rustfmt::skip]
    let m23 = simd.avx._mm256_setr_epi8(
        6, z, 9, z, 7, z, 10, z, 8, z, 11, z, z, z, z, z,
        6, z, 9, z, 7, z, 10, z, 8, z, 11, z, z, z, z, z,
    );
    (m01, m23)
}

/// The 8 outputs of a group from their sums (lane pair `v` holding outputs `v` and `v + 4`
/// as R, G, B, 0) as 24 bytes and 8 of zero.
#[inline(always)]
fn pack_group(simd: V3, hi: [__m256i; 4], lo: [__m256i; 4]) -> __m256i {
    let (avx, avx2) = (simd.avx, simd.avx2);
    // i16 (o0 o1 | o4 o5), (o2 o3 | o6 o7) → bytes (o0 o1 o2 o3 | o4 o5 o6 o7), four bytes a
    // pixel; then drop every fourth byte and close the gap between the lanes.
    let bytes = combine_and_pack(simd, hi, lo);
    let z = -128i8;
    #[rustfmt::skip]
    let compact = avx._mm256_setr_epi8(
        0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z, z, z, z,
        0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z, z, z, z,
    );
    let packed = avx2._mm256_shuffle_epi8(bytes, compact);
    avx2._mm256_permutevar8x32_epi32(packed, avx._mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7))
}
