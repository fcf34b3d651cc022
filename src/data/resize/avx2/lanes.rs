//! The horizontal pass with one output byte per 32-bit lane, for scales where the taps of
//! four consecutive output bytes lie within 16 input bytes (shrinking by up to about 3×).
//!
//! Each 128-bit half of a vector computes four consecutive bytes of the output row. For
//! each tap pair it loads the 16 input bytes from the lowest one they read, and a byte
//! shuffle planned per half (the gather) places each byte's two input bytes as a 16-bit
//! pair for `vpmaddwd`. Unlike [`super::pixels`], no lane is idle and the bytes come out in
//! order.

use super::super::weights::AxisWeights;
use super::{combine_and_pack, load16, split_pair, PRECISION_BITS};
use core::arch::x86_64::__m256i;
use pulp::{cast, x86::V3};

/// The shuffle index that zeroes a byte.
const ZERO: i8 = -128;

/// The plan of one vector for one tap pair.
#[derive(Clone, Copy)]
struct Tap {
    /// Byte shuffle from the 16 loaded bytes of each half to (tap 2p, tap 2p+1) pairs.
    gather: __m256i,
    /// High weight halves, one pair per lane.
    hi: __m256i,
    /// Low weight halves, one pair per lane.
    lo: __m256i,
}

/// Bytes of a block's window: 16 from any offset a byte can hold.
const WINDOW: usize = 256 + 16;

/// The horizontal pass planned with one output byte per lane.
pub(crate) struct Lanes {
    simd: V3,
    /// Tap pairs per output.
    pairs: usize,
    /// Per block of 32 output bytes: the row offset of the [`WINDOW`] bytes it reads.
    windows: Vec<usize>,
    /// Per block, tap pair and vector of 8 output bytes: the offsets in the block's window
    /// of the 16 bytes that the vector's low and high halves gather from.
    offsets: Vec<[u8; 2]>,
    /// The same per block, pair and vector: its shuffle and weights.
    taps: Vec<Tap>,
    /// Blocks whose windows lie inside the row; the rest read a zero-padded copy from
    /// `first`.
    inside: usize,
    /// Row offset of the padded copy.
    first: usize,
    /// Length of the padded copy, zero past the row's end.
    padded_len: usize,
    /// Bytes in a row.
    row_len: usize,
}

/// Where output byte `j`, for tap pair `p`, sits among the halves of a plan laid out as
/// `[block][pair][vector][half]`, and its lane in the half.
fn half_of(j: usize, p: usize, pairs: usize) -> (usize, usize) {
    let (blk, v, h, l) = (j / 32, j % 32 / 8, j % 8 / 4, j % 4);
    ((((blk * pairs + p) * 4) + v) * 2 + h, l)
}

impl Lanes {
    /// Plans the pass for `hw` over rows of `in_w` pixels, or `None` where it would not pay
    /// (more than two tap pairs), some four output bytes read more than 16 input bytes for
    /// one tap pair, a block reads more than its window, or a weight does not split.
    pub(crate) fn new(simd: V3, hw: &AxisWeights, in_w: usize) -> Option<Self> {
        // With three pairs or more, the other kernel serves four taps a load and this one
        // saves less per row than its longer plan costs per image (224 × 224 crops of photos
        // around 500 × 375, bicubic: the same time either way).
        if hw.taps > 4 {
            return None;
        }
        // Four output bytes span two outputs; a tap pair of both spans 3·d + 4 bytes, where d
        // is how far the second's window starts after the first's.
        if hw.starts.windows(2).any(|s| s[1] - s[0] > 3) {
            return None;
        }
        let (taps, pairs) = (hw.taps, hw.taps.div_ceil(2));
        let blocks = (3 * hw.starts.len()).div_ceil(32);
        // Output byte 3i + c reads row bytes (start_i + t)·3 + c for taps t = 2p, 2p + 1:
        // each output's pairs as (first row byte, weights split into halves).
        let mut reads = Vec::with_capacity(hw.starts.len() * pairs);
        for (k, &start) in hw.weights.chunks_exact(taps).zip(&hw.starts) {
            for p in 0..pairs {
                let (wa, wb) = (k[2 * p], k.get(2 * p + 1).copied().unwrap_or(0));
                reads.push(((start + 2 * p) * 3, [wa != 0, wb != 0], split_pair(wa, wb)?));
            }
        }
        // Each half's first byte read, from the first bytes its lanes read (a half that reads
        // none takes the previous one's).
        let mut bases = vec![(usize::MAX, 0); blocks * pairs * 8];
        for (i, reads) in reads.chunks_exact(pairs).enumerate() {
            for (p, &(at, live, _)) in reads.iter().enumerate() {
                for c in 0..3 {
                    let (half, _) = half_of(3 * i + c, p, pairs);
                    for (t, _) in live.iter().enumerate().filter(|&(_, &live)| live) {
                        let (lo, hi) = &mut bases[half];
                        (*lo, *hi) = ((*lo).min(at + 3 * t + c), (*hi).max(at + 3 * t + c));
                    }
                }
            }
        }
        let mut last = 0;
        for (lo, hi) in &mut bases {
            if *lo == usize::MAX {
                *lo = last;
            } else if *hi >= *lo + 16 {
                return None;
            }
            last = *lo;
        }
        // The shuffles and weights, per block, pair and vector.
        let mut gathers = vec![[ZERO; 32]; blocks * pairs * 4];
        let mut weights = vec![[[0i32; 8]; 2]; blocks * pairs * 4];
        for (i, reads) in reads.chunks_exact(pairs).enumerate() {
            for (p, &(at, live, [wh, wl])) in reads.iter().enumerate() {
                for c in 0..3 {
                    let (half, l) = half_of(3 * i + c, p, pairs);
                    let (vector, lane) = (half / 2, half % 2 * 4 + l);
                    for (t, _) in live.iter().enumerate().filter(|&(_, &live)| live) {
                        gathers[vector][4 * lane + 2 * t] = (at + 3 * t + c - bases[half].0) as i8;
                    }
                    [weights[vector][0][lane], weights[vector][1][lane]] = [wh, wl];
                }
            }
        }
        let taps = (gathers.iter().zip(&weights))
            .map(|(gather, [hi, lo])| Tap {
                gather: cast(*gather),
                hi: cast(*hi),
                lo: cast(*lo),
            })
            .collect();
        // Each block's window, and its loads' offsets in it (16 bytes from below 256).
        let mut windows = Vec::with_capacity(blocks);
        let mut offsets = Vec::with_capacity(blocks * pairs * 4);
        for block in bases.chunks_exact(pairs * 8) {
            let window = block.iter().map(|&(lo, _)| lo).min().unwrap_or(0);
            for halves in block.chunks_exact(2) {
                offsets.push([
                    u8::try_from(halves[0].0 - window).ok()?,
                    u8::try_from(halves[1].0 - window).ok()?,
                ]);
            }
            windows.push(window);
        }
        let row_len = in_w * 3;
        let inside = (windows.iter())
            .take_while(|&&w| w + WINDOW <= row_len)
            .count();
        let first = windows[inside..].iter().copied().min().unwrap_or(0);
        let padded_len = match windows[inside..].iter().max() {
            Some(&last) => (last + WINDOW - first).max(row_len - first),
            None => 0,
        };
        Some(Lanes {
            simd,
            pairs,
            windows,
            offsets,
            taps,
            inside,
            first,
            padded_len,
            row_len,
        })
    }

    /// Length of the zero-padded scratch that [`Lanes::row`] needs.
    pub(crate) fn padded_len(&self) -> usize {
        self.padded_len
    }

    /// The pass over one input row (`in_w * 3` bytes) into `out` (the outputs' bytes
    /// rounded up to a multiple of 32); `padded` is scratch of [`Lanes::padded_len`] bytes,
    /// zero past the row's copied end.
    pub(crate) fn row(&self, row: &[u8], padded: &mut [u8], out: &mut [u8]) {
        match self.pairs {
            1 => self.row_n::<1>(row, padded, out),
            2 => self.row_n::<2>(row, padded, out),
            3 => self.row_n::<3>(row, padded, out),
            4 => self.row_n::<4>(row, padded, out),
            5 => self.row_n::<5>(row, padded, out),
            6 => self.row_n::<6>(row, padded, out),
            7 => self.row_n::<7>(row, padded, out),
            8 => self.row_n::<8>(row, padded, out),
            _ => self.row_n::<0>(row, padded, out),
        }
    }

    /// [`Lanes::row`] for `P` tap pairs (any number if `P = 0`).
    fn row_n<const P: usize>(&self, row: &[u8], padded: &mut [u8], out: &mut [u8]) {
        struct Job<'a, const P: usize> {
            plan: &'a Lanes,
            row: &'a [u8],
            padded: &'a mut [u8],
            out: &'a mut [u8],
        }
        impl<const P: usize> pulp::NullaryFnOnce for Job<'_, P> {
            type Output = ();
            #[inline(always)]
            fn call(self) {
                self.plan.row_impl::<P>(self.row, self.padded, self.out)
            }
        }
        self.simd.vectorize(Job::<P> {
            plan: self,
            row,
            padded,
            out,
        })
    }

    #[inline(always)]
    fn row_impl<const P: usize>(&self, row: &[u8], padded: &mut [u8], out: &mut [u8]) {
        let (out, _) = out.as_chunks_mut::<32>();
        let plans =
            (self.offsets.chunks_exact(4 * self.pairs)).zip(self.taps.chunks_exact(4 * self.pairs));
        let mut blocks = self.windows.iter().zip(plans).zip(out);
        for ((&window, (offsets, taps)), out) in (&mut blocks).take(self.inside) {
            *out = cast(self.block::<P>(row, window, offsets, taps));
        }
        if self.inside < self.windows.len() {
            let first = self.first;
            padded[..self.row_len - first].copy_from_slice(&row[first..]);
            for ((&window, (offsets, taps)), out) in blocks {
                *out = cast(self.block::<P>(padded, window - first, offsets, taps));
            }
        }
    }

    /// 32 output bytes from the [`WINDOW`] bytes at `window` in `src`.
    #[inline(always)]
    fn block<const P: usize>(
        &self,
        src: &[u8],
        window: usize,
        offsets: &[[u8; 2]],
        taps: &[Tap],
    ) -> __m256i {
        let simd = self.simd;
        let (avx, avx2) = (simd.avx, simd.avx2);
        let src: &[u8; WINDOW] = src[window..].first_chunk().unwrap();
        let mut hi = [avx._mm256_setzero_si256(); 4];
        let mut lo = [avx._mm256_set1_epi32(1 << (PRECISION_BITS - 1)); 4];
        let pairs = if P == 0 { offsets.len() / 4 } else { P };
        let (offsets, taps) = (&offsets[..4 * pairs], &taps[..4 * pairs]);
        for v in 0..4 {
            for p in 0..pairs {
                let [o0, o1] = offsets[4 * p + v];
                let x = avx._mm256_set_m128i(load16(src, o1 as usize), load16(src, o0 as usize));
                let t = &taps[4 * p + v];
                let d = avx2._mm256_shuffle_epi8(x, t.gather);
                hi[v] = avx2._mm256_add_epi32(hi[v], avx2._mm256_madd_epi16(d, t.hi));
                lo[v] = avx2._mm256_add_epi32(lo[v], avx2._mm256_madd_epi16(d, t.lo));
            }
        }
        // Vector v holds bytes 8v..8v+4 in its low half and 8v+4..8v+8 in its high one;
        // packing interleaves them as (0 8 16 24 | 4 12 20 28) in 4-byte units.
        let bytes = combine_and_pack(simd, hi, lo);
        avx2._mm256_permutevar8x32_epi32(bytes, avx._mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }
}
