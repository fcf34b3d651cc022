//! The vertical pass for AVX2.

use super::super::weights::AxisWeights;
use super::{combine_and_pack, load16, split_pair, store32, PRECISION_BITS};
use core::arch::x86_64::__m256i;
use pulp::x86::V3;

/// The vertical pass planned for AVX2: 32 output bytes at a time, input rows taken in pairs
/// whose bytes are interleaved into 16-bit (row 2p, row 2p+1) lanes for `vpmaddwd`.
pub(crate) struct Vertical {
    simd: V3,
    /// Row pairs per output row.
    pairs: usize,
    /// Per output row and row pair: the high and the low weight halves, each as a 32-bit
    /// lane holding the pair's two 16-bit halves.
    weights: Vec<[i32; 2]>,
}

impl Vertical {
    /// Plans the pass for `vw`, or `None` where a weight does not split.
    pub(crate) fn new(simd: V3, vw: &AxisWeights) -> Option<Self> {
        let pairs = vw.taps.div_ceil(2);
        let mut weights = Vec::with_capacity(vw.starts.len() * pairs);
        for k in vw.weights.chunks_exact(vw.taps) {
            for p in 0..pairs {
                weights.push(split_pair(
                    k[2 * p],
                    k.get(2 * p + 1).copied().unwrap_or(0),
                )?);
            }
        }
        Some(Vertical {
            simd,
            pairs,
            weights,
        })
    }

    /// The pass into `out` (one row per window): output row `y` reads `windows[y].1`
    /// intermediate rows from byte `windows[y].0` of `mid`, `stride` bytes apart (a
    /// multiple of 32, and at least the output row's length rounded up to 32).
    pub(crate) fn run(
        &self,
        mid: &[u8],
        stride: usize,
        windows: &[(usize, usize)],
        out: &mut [u8],
    ) {
        struct Job<'a> {
            plan: &'a Vertical,
            mid: &'a [u8],
            stride: usize,
            windows: &'a [(usize, usize)],
            out: &'a mut [u8],
        }
        impl pulp::NullaryFnOnce for Job<'_> {
            type Output = ();
            #[inline(always)]
            fn call(self) {
                self.plan
                    .run_impl(self.mid, self.stride, self.windows, self.out)
            }
        }
        self.simd.vectorize(Job {
            plan: self,
            mid,
            stride,
            windows,
            out,
        })
    }

    #[inline(always)]
    fn run_impl(&self, mid: &[u8], stride: usize, windows: &[(usize, usize)], out: &mut [u8]) {
        let width = out.len() / windows.len().max(1);
        let chunks = width.div_ceil(32);
        let stride = stride / 32;
        let (mid, _) = mid.as_chunks::<32>();
        let rows = out.chunks_exact_mut(width.max(1));
        for ((out, &(first, n)), w) in rows.zip(windows).zip(self.weights.chunks_exact(self.pairs))
        {
            let w = &w[..n.div_ceil(2)];
            for c in 0..chunks {
                let v = self.chunk(mid, first / 32 + c, stride, n, w);
                store32(out, 32 * c, v);
            }
        }
    }

    /// 32 bytes of an output row: the weighted sum of the 32-byte chunks `at`, `at + stride`,
    /// ... of `mid` (`n` of them, weights `w`).
    #[inline(always)]
    fn chunk(
        &self,
        mid: &[[u8; 32]],
        at: usize,
        stride: usize,
        n: usize,
        w: &[[i32; 2]],
    ) -> __m256i {
        let simd = self.simd;
        let (avx, avx2) = (simd.avx, simd.avx2);
        let mut hi = [avx._mm256_setzero_si256(); 4];
        let mut lo = [avx._mm256_set1_epi32(1 << (PRECISION_BITS - 1)); 4];
        for (p, &[wh, wl]) in w.iter().enumerate() {
            let (wh, wl) = (avx._mm256_set1_epi32(wh), avx._mm256_set1_epi32(wl));
            // The odd row out of the last pair has weight zero: any row stands in.
            let ra = &mid[at + 2 * p * stride];
            let rb = &mid[at + (2 * p + 1).min(n - 1) * stride];
            for h in 0..2 {
                let a = avx2._mm256_cvtepu8_epi16(load16(ra, 16 * h));
                let b = avx2._mm256_cvtepu8_epi16(load16(rb, 16 * h));
                let lo_hi = [
                    avx2._mm256_unpacklo_epi16(a, b),
                    avx2._mm256_unpackhi_epi16(a, b),
                ];
                for (s, ab) in lo_hi.into_iter().enumerate() {
                    let i = 2 * h + s;
                    hi[i] = avx2._mm256_add_epi32(hi[i], avx2._mm256_madd_epi16(ab, wh));
                    lo[i] = avx2._mm256_add_epi32(lo[i], avx2._mm256_madd_epi16(ab, wl));
                }
            }
        }
        // unpacklo/hi split each 16 columns as (0-3, 8-11) and (4-7, 12-15); packing them
        // back pairwise restores the order within each 128-bit lane.
        let bytes = combine_and_pack(simd, hi, lo);
        avx2._mm256_permute4x64_epi64::<0b11_01_10_00>(bytes)
    }
}
